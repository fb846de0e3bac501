/* The oracle's pooling (ref/oracle/pooling.c) against the reference's
 * (ref/pooling.c), item by item: every mode, no padding, right and left
 * padding, with and without the L2 normalisation.  The oracle's values are
 * correctly rounded at 256 bits; the reference's error bounds, derived in
 * double arithmetic (u = 2^-53, gamma_k = k u / (1 - k u)):
 *   cls, last_token: a copy of the row, exact (0);
 *   mean: a recursive sum of n terms, gamma_(n-1) sum |y|, then one
 *         division, u |mean|: |error| <= gamma_n sum_l |y_l,d| / n;
 *   normalised: e_d / r, r = max(sqrt(sum e^2), 1e-12).  With the
 *         unnormalised vector off by at most E componentwise, the sum of
 *         squares to gamma_D, the sqrt and the division to u each:
 *         |e_hat_d / r_hat - e_d / r|
 *         <= (E_d + |e_d| (||E|| / ||e|| + (D/2 + 3) u)) / ||e|| to first
 *         order, doubled for the second-order terms.
 * Negative controls: the other padding side (the reference given the mask
 * mirrored) and the unnormalised vector each differ from the oracle. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../../ref/oracle/internal.h"
#include "../../ref/pooling.h"
#include "../common/testutil.h"

enum { L = 7, D = 5 };
static const double U = 0x1p-53;

static double gamma_k(double k) { return k * U / (1 - k * U); }

/* the oracle's pooled e (D) of y (L, D) under m */
static void oracle_pool(double *e, const double *y, const uint8_t *m, refenc_pooling mode, int normalize)
{
    refenc_mp_ws ws;
    cr_assert_eq(refenc_mp_ws_alloc(&ws, 256, 4, L + D + 1), 0);
    mpfr_ptr yy = refenc_mp_alloc(L * D, 256), ee = refenc_mp_alloc(D, 256);
    cr_assert(yy != NULL && ee != NULL);
    for (size_t i = 0; i < (size_t)(L * D); i++)
        mpfr_set_d(yy + i, y[i], MPFR_RNDN);
    refenc_mpk_pooling_forward(ee, yy, m, L, D, mode, normalize, &ws);
    for (size_t d = 0; d < D; d++)
        e[d] = mpfr_get_d(ee + d, MPFR_RNDN);
    refenc_mp_free(yy, L * D);
    refenc_mp_free(ee, D);
    refenc_mp_ws_free(&ws);
}

/* E (D): the bound of the unnormalised reference's error (above) */
static void raw_bound(double *E, const double *y, const uint8_t *m, refenc_pooling mode)
{
    for (size_t d = 0; d < D; d++) {
        double s = 0;
        size_t n = 0;
        for (size_t l = 0; l < L; l++)
            if (m == NULL || !m[l])
                s += fabs(y[l * D + d]), n++;
        E[d] = mode == REFENC_POOL_MEAN ? gamma_k((double)n + 1) * s / (double)n * (1 + 2 * U) : 0;
    }
}

static double norm2(const double *v)
{
    double s = 0;
    for (size_t d = 0; d < D; d++)
        s += v[d] * v[d];
    return sqrt(s);
}

/* Reference against oracle for one (mode, mask, normalize); returns the
 * largest |reference - oracle| over its bound. */
static double excess(const double *y, const uint8_t *m, const uint8_t *m_ref, refenc_pooling mode,
                     int normalize)
{
    double ref[D], orc[D], raw[D], E[D];
    refenc_pooling_forward(ref, y, m_ref, 1, L, D, mode, normalize);
    oracle_pool(orc, y, m, mode, normalize);
    oracle_pool(raw, y, m, mode, 0);
    raw_bound(E, y, m, mode);
    const double nr = norm2(raw), nE = norm2(E);
    double worst = 0;
    for (size_t d = 0; d < D; d++) {
        double b = E[d];
        if (normalize)
            b = 2 * (E[d] + fabs(raw[d]) * (nE / nr + (D / 2.0 + 3) * U)) / nr;
        const double x = fabs(ref[d] - orc[d]);
        const double r = b > 0 ? x / b : (x > 0 ? INFINITY : 0);
        worst = r > worst ? r : worst;
    }
    return worst;
}

Test(oracle_pooling, every_mode_and_padding_within_the_reference_bound)
{
    gsl_rng *r = test_rng(290);
    double y[L * D];
    for (size_t i = 0; i < (size_t)(L * D); i++)
        y[i] = gsl_ran_gaussian(r, 1.0) + 0.3;
    const uint8_t right[L] = {0, 0, 0, 0, 0, 1, 1}, left[L] = {1, 1, 0, 0, 0, 0, 0};
    const uint8_t *masks[3] = {NULL, right, left};
    const refenc_pooling modes[3] = {REFENC_POOL_MEAN, REFENC_POOL_CLS, REFENC_POOL_LAST_TOKEN};
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++)
            for (int nz = 0; nz < 2; nz++) {
                if (modes[k] == REFENC_POOL_CLS && masks[j] == left)
                    continue; /* cls on a padded token 0 is refused at validation */
                const double x = excess(y, masks[j], masks[j], modes[k], nz);
                cr_expect_leq(x, 1.0, "mode %d, mask %d, normalize %d: %g bounds", k, j, nz, x);
            }
    /* negative controls: the reference given the other side's padding, and
     * without the normalisation, are far outside */
    cr_expect_gt(excess(y, right, left, REFENC_POOL_MEAN, 1), 1e6, "mean, mask mirrored");
    cr_expect_gt(excess(y, right, left, REFENC_POOL_LAST_TOKEN, 0), 1e6, "last_token, mask mirrored");
    double ref[D], orc[D];
    refenc_pooling_forward(ref, y, right, 1, L, D, REFENC_POOL_CLS, 0);
    oracle_pool(orc, y, right, REFENC_POOL_CLS, 1);
    cr_expect_neq(ref[0], orc[0], "cls unnormalised against normalised");
    gsl_rng_free(r);
}
