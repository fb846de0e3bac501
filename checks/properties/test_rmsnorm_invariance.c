/* RMSNorm properties (rmsnorm.h), each with a negative control that is run.
 *
 *  - scale invariance: RMSNorm_{eps}(c x) = RMSNorm_{eps/c^2}(x) for c > 0; bitwise
 *    when c is a power of two (c x, c^2 ms and sqrt(c^2 t) = c sqrt(t) are
 *    exact, so the division sees the same quotient); for c = 2.385 within the
 *    sum of two derived bounds (bnd_rmsnorm, checks/oracle/bounds.c): the
 *    evaluation at x, and at fl(c x) with the input error u |c x|;
 *  - with w = 1 and eps = 0 each output row has RMS 1: mean(y^2) is within
 *    2 (rho + u)/(1 - u) + gamma_{D+1} of 1 (each y_d = z^_d is within
 *    (rho + u)/(1 - u) relative of the exact x_d / r, rho = gamma_{D+2}/2 + u,
 *    the test's own sum of squares and division gamma_{D+1});
 *  - the Gemma form equals the plain form on fl(1 + w), bit for bit (the
 *    kernel forms fl(1 + w) and multiplies, nothing else differs);
 *  - the mean is not subtracted: RMSNorm(x + c 1) != RMSNorm(x).
 * Inputs avoid nice values (2.385, widths not powers of two as well). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>

#include "../../ref/rmsnorm.h"
#include "../common/testutil.h"
#include "../oracle/bounds.h"

#define U TEST_U

static const size_t widths[] = {1, 2, 3, 7, 16, 33, 64, 100, 257, 768};
#define N_WIDTHS (sizeof widths / sizeof widths[0])
#define ROWS 3

static double *fresh(size_t n)
{
    double *p = calloc(n, sizeof *p);
    cr_assert_not_null(p);
    return p;
}

/* max_i |a_i - b_i| / tol_i over n values (0/0 = 0) */
static double worst_ratio(const double *a, const double *b, const double *tol, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(a[i] - b[i]);
        const double r = e == 0 ? 0 : (tol[i] > 0 ? e / tol[i] : INFINITY);
        if (!(r <= w))
            w = r;
    }
    return w;
}

Test(rmsnorm, scale_invariance_bitwise_for_powers_of_two)
{
    gsl_rng *r = test_rng(801);
    for (size_t k = 0; k < N_WIDTHS; k++)
        for (int offset = 0; offset < 2; offset++) {
            const size_t D = widths[k], n = ROWS * D;
            double *x = fresh(n), *cx = fresh(n), *w = fresh(D), *y = fresh(n), *yc = fresh(n);
            test_fill_gaussian(x, n, 0.3, 1.7, r);
            test_fill_gaussian(w, D, offset ? 0.0 : 1.0, 0.1, r);
            const double eps = 1e-6;
            for (int e2 = -3; e2 <= 3; e2 += 2) {
                const double c = ldexp(1.0, e2);
                for (size_t i = 0; i < n; i++)
                    cx[i] = c * x[i];
                refenc_rmsnorm_forward(y, x, w, ROWS, D, eps, offset);
                refenc_rmsnorm_forward(yc, cx, w, ROWS, D, eps * c * c, offset);
                cr_expect(memcmp(y, yc, n * sizeof(double)) == 0,
                          "seed %lu, D %zu, offset %d, c 2^%d: RMSNorm(c x) with eps c^2 differs",
                          test_seed(), D, offset, e2);
                /* negative control: eps = 0.05 left unscaled (about 2% of ms ~ 3 at
                 * x, 0.1% to 100% at c x): the bitwise check sees the difference */
                refenc_rmsnorm_forward(yc, cx, w, ROWS, D, 0.05, offset);
                refenc_rmsnorm_forward(y, x, w, ROWS, D, 0.05, offset);
                cr_expect(memcmp(y, yc, n * sizeof(double)) != 0,
                          "negative control, D %zu: eps not scaled with c^2 went unseen", D);
            }
            free(x), free(cx), free(w), free(y), free(yc);
        }
    gsl_rng_free(r);
}

Test(rmsnorm, scale_invariance_within_derived_bound)
{
    gsl_rng *r = test_rng(802);
    const double c = 2.385;
    for (size_t k = 0; k < N_WIDTHS; k++)
        for (int offset = 0; offset < 2; offset++) {
            const size_t D = widths[k], n = ROWS * D;
            double *x = fresh(n), *cx = fresh(n), *Ecx = fresh(n), *w = fresh(D);
            double *y = fresh(n), *yc = fresh(n), *E1 = fresh(n), *E2 = fresh(n), *tol = fresh(n);
            test_fill_gaussian(x, n, -0.2, 0.9, r);
            test_fill_gaussian(w, D, offset ? 0.0 : 1.0, 0.1, r);
            for (size_t i = 0; i < n; i++) {
                cx[i] = c * x[i];
                Ecx[i] = U * fabs(cx[i]); /* the rounding of c x, an input error */
            }
            refenc_rmsnorm_forward(y, x, w, ROWS, D, 0.0, offset);
            refenc_rmsnorm_forward(yc, cx, w, ROWS, D, 0.0, offset);
            cr_assert(bnd_rmsnorm(E1, x, NULL, w, offset, y, ROWS, D, 0.0));
            cr_assert(bnd_rmsnorm(E2, cx, Ecx, w, offset, yc, ROWS, D, 0.0));
            for (size_t i = 0; i < n; i++)
                tol[i] = E1[i] + E2[i];
            const double wr = worst_ratio(y, yc, tol, n);
            cr_expect(wr <= 1, "seed %lu, D %zu, offset %d: RMSNorm(2.385 x) off RMSNorm(x) by %.3g "
                      "times the bound", test_seed(), D, offset, wr);
            /* negative controls, the same comparison: eps = 0.5 not scaled with c^2
             * (a function that is not scale invariant), and the shift x + c (the
             * mean is not subtracted, so RMSNorm is not shift invariant: a kernel
             * that centres the rows, LayerNorm's habit, would pass this one) */
            double *yb = fresh(n);
            refenc_rmsnorm_forward(y, x, w, ROWS, D, 0.5, offset);
            for (size_t i = 0; i < n; i++)
                cx[i] = c * x[i];
            refenc_rmsnorm_forward(yb, cx, w, ROWS, D, 0.5, offset);
            cr_expect(worst_ratio(y, yb, tol, n) > 1,
                      "negative control, D %zu: eps not scaled accepted as invariant", D);
            refenc_rmsnorm_forward(y, x, w, ROWS, D, 0.0, offset);
            for (size_t i = 0; i < n; i++)
                cx[i] = x[i] + c;
            refenc_rmsnorm_forward(yb, cx, w, ROWS, D, 0.0, offset);
            if (D > 1)
                cr_expect(worst_ratio(y, yb, tol, n) > 1,
                          "negative control, D %zu: RMSNorm(x + c) accepted as RMSNorm(x)", D);
            free(yb);
            free(x), free(cx), free(Ecx), free(w), free(y), free(yc), free(E1), free(E2), free(tol);
        }
    gsl_rng_free(r);
}

Test(rmsnorm, unit_weight_rows_have_rms_one)
{
    gsl_rng *r = test_rng(803);
    for (size_t k = 0; k < N_WIDTHS; k++) {
        const size_t D = widths[k], n = ROWS * D;
        double *x = fresh(n), *w = fresh(D), *y = fresh(n);
        test_fill_gaussian(x, n, 2.385, 3.1, r);
        for (size_t d = 0; d < D; d++)
            w[d] = 1.0;
        refenc_rmsnorm_forward(y, x, w, ROWS, D, 0.0, 0);
        const double rho = test_gamma((double)D + 2) / 2 + U;
        const double tol = 2 * (rho + U) / (1 - U) + test_gamma((double)D + 1);
        for (size_t row = 0; row < ROWS; row++) {
            double ss = 0;
            for (size_t d = 0; d < D; d++)
                ss += y[row * D + d] * y[row * D + d];
            const double ms = ss / (double)D;
            cr_expect(fabs(ms - 1) <= tol, "seed %lu, D %zu, row %zu: mean(y^2) = %.17g, off 1 by "
                      "more than %.3g", test_seed(), D, row, ms, tol);
            /* negative controls, the same comparison: the squares divided by D - 1
             * (mean(y^2) = D/(D-1)), a (1 + w) doubled (scale 2: mean 4) */
            if (D > 1)
                cr_expect(fabs(ms * (double)D / (double)(D - 1) - 1) > tol,
                          "negative control, D %zu: divisor D - 1 went unseen", D);
            cr_expect(fabs(4 * ms - 1) > tol, "negative control: scale 2 went unseen");
        }
        free(x), free(w), free(y);
    }
    gsl_rng_free(r);
}

Test(rmsnorm, gemma_form_is_the_plain_form_on_one_plus_w)
{
    gsl_rng *r = test_rng(804);
    for (size_t k = 0; k < N_WIDTHS; k++) {
        const size_t D = widths[k], n = ROWS * D;
        double *x = fresh(n), *w = fresh(D), *w1 = fresh(D), *w2 = fresh(D);
        double *yg = fresh(n), *yp = fresh(n), *ybad = fresh(n);
        test_fill_gaussian(x, n, 0.1, 1.3, r);
        test_fill_gaussian(w, D, 0.0, 0.1, r); /* Gemma stores w near 0 */
        for (size_t d = 0; d < D; d++) {
            w1[d] = 1.0 + w[d];
            w2[d] = 2.0 + w[d]; /* the +1 folded twice (mold#1074) */
        }
        refenc_rmsnorm_forward(yg, x, w, ROWS, D, 1e-6, 1);
        refenc_rmsnorm_forward(yp, x, w1, ROWS, D, 1e-6, 0);
        cr_expect(memcmp(yg, yp, n * sizeof(double)) == 0,
                  "seed %lu, D %zu: RMSNorm_(1+w) differs from RMSNorm_w' with w' = fl(1 + w)",
                  test_seed(), D);
        /* negative controls: the offset missing (Liger-Kernel#74) or doubled */
        refenc_rmsnorm_forward(ybad, x, w, ROWS, D, 1e-6, 0);
        cr_expect(memcmp(yg, ybad, n * sizeof(double)) != 0, "negative control: offset missing unseen");
        refenc_rmsnorm_forward(ybad, x, w2, ROWS, D, 1e-6, 0);
        cr_expect(memcmp(yg, ybad, n * sizeof(double)) != 0, "negative control: offset doubled unseen");
        free(x), free(w), free(w1), free(w2), free(yg), free(yp), free(ybad);
    }
    gsl_rng_free(r);
}
