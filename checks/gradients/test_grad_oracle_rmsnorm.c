/* The oracle's RMSNorm backward (ref/oracle/rmsnorm_backward.c), kernel by
 * kernel, both scales (w and Gemma's 1 + w):
 *   - the adjoint identity along x and w against the oracle's forward
 *     kernel (refenc_mpk_rmsnorm_forward), at the oracle's own rounding
 *     (oracle_adjoint.c's budget);
 *   - RMSNorm's own property at eps = 0: RMSNorm(a x) = RMSNorm(x), so the
 *     exact dx is orthogonal to x; the twin's doubles within their rounding;
 *   - the reference's refenc_rmsnorm_backward within a derived first-order
 *     bound of its arithmetic (below) of the twin's correctly rounded values.
 * Negative control in each test: the backward without its projection term
 * x^ mean(g x^) (dx = g / r, the bug class of LayerNorm's "variance term
 * missing") fails it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "../../ref/oracle/backward.h"
#include "../../ref/oracle/internal.h"
#include "../../ref/rmsnorm.h"
#include "oracle_adjoint.h"

#define U TEST_U
#define PREC REFENC_MP_PREC_DEFAULT
#define SLACK (1.0 + 0x1p-30) /* second-order terms: products of two gammas */

enum { N = 3 };

/* dx = g / r: the backward without its projection term (negative control) */
static void no_projection(double *dx, const double *dy, const double *x, const double *w, size_t D,
                          double eps, int offset)
{
    for (size_t n = 0; n < N; n++) {
        double ss = 0;
        for (size_t d = 0; d < D; d++)
            ss += x[n * D + d] * x[n * D + d];
        const double r = sqrt(ss / (double)D + eps);
        for (size_t d = 0; d < D; d++)
            dx[n * D + d] = dy[n * D + d] * ((offset ? 1.0 : 0.0) + w[d]) / r;
    }
}

typedef struct {
    const double *x, *w;
    size_t D;
    double eps;
    int offset, which; /* theta: x (0) or w (1) */
} rms_ctx;

static void rms_fwd(const void *c_, mpfr_ptr y, mpfr_srcptr th, refenc_mp_ws *ws)
{
    const rms_ctx *c = c_;
    mpfr_ptr x = refenc_mp_from_d(c->x, N * c->D, 53), w = refenc_mp_from_d(c->w, c->D, 53);
    mpfr_ptr eps = refenc_mp_from_d(&c->eps, 1, 53);
    refenc_mpk_rmsnorm_forward(y, c->which == 0 ? th : x, c->which == 1 ? th : w, N, c->D, eps,
                               c->offset, ws);
    refenc_mp_free(x, N * c->D), refenc_mp_free(w, c->D), refenc_mp_free(eps, 1);
}

typedef struct {
    size_t D;
    int offset;
    double eps;
    double *x, *w, *dY;
} rcase;

static void rcase_fill(rcase *c, size_t D, int offset, double eps, gsl_rng *r)
{
    c->D = D, c->offset = offset, c->eps = eps;
    c->x = malloc(N * D * sizeof *c->x), c->w = malloc(D * sizeof *c->w);
    c->dY = malloc(N * D * sizeof *c->dY);
    test_fill_gaussian(c->x, N * D, 0.3, 1.2, r);
    test_fill_gaussian(c->w, D, offset ? 0.0 : 1.0, 0.4, r); /* Gemma's w near 0 */
    test_fill_gaussian(c->dY, N * D, 0.0, 1.0, r);
}

static void rcase_free(rcase *c) { free(c->x), free(c->w), free(c->dY); }

static const size_t widths[] = {2, 5, 8, 13};

Test(oracle_adjoint, rmsnorm_both_scales)
{
    gsl_rng *r = test_rng(2628);
    test_worst w, wc;
    test_worst_init(&w), test_worst_init(&wc);
    size_t bad = 0, caught = 0, controls = 0;
    for (size_t t = 0; t < 4; t++)
        for (int offset = 0; offset < 2; offset++) {
            rcase c;
            const size_t D = widths[t];
            rcase_fill(&c, D, offset, 1e-5, r);
            double *dx = malloc(N * D * sizeof *dx), *dw = calloc(D, sizeof *dw);
            double *dxb = malloc(N * D * sizeof *dxb), *v = malloc(N * D * sizeof *v);
            refenc_mp_report rep;
            cr_assert_eq(refenc_mp_rmsnorm_backward(dx, dw, c.dY, c.x, c.w, N, D, c.eps, offset, PREC, &rep),
                         0, "%s", rep.error.message);
            no_projection(dxb, c.dY, c.x, c.w, D, c.eps, offset);
            for (int k = 0; k < 2; k++) {
                const size_t n = k == 0 ? N * D : D;
                test_fill_gaussian(v, n, 0.0, 1.0, r);
                const rms_ctx ctx = {c.x, c.w, D, c.eps, offset, k};
                const ad_problem pb = {rms_fwd, &ctx, k == 0 ? c.x : c.w, v, c.dY, n, N * D};
                bad += ad_check(&pb, k == 0 ? dx : dw, &w, k == 0 ? "rmsnorm dx" : "rmsnorm dw");
                if (k == 0)
                    controls++, caught += ad_check(&pb, dxb, &wc, "no-projection dx");
            }
            free(dx), free(dw), free(dxb), free(v);
            rcase_free(&c);
        }
    char msg[512];
    cr_log_info("rmsnorm: %s", test_worst_describe(&w, msg, sizeof msg));
    cr_expect_eq(bad, 0, "%zu violations; %s", bad, test_worst_describe(&w, msg, sizeof msg));
    cr_expect_eq(caught, controls, "the no-projection backward kept the identity in %zu of %zu",
                 controls - caught, controls);
    gsl_rng_free(r);
}

/* eps = 0: with x_d / r = x^_d, sum_d x_d dx_d = sum_d x^_d g_d - m sum_d x^_d^2
 * = D m - m D = 0 exactly (m = mean(g x^); at eps = 0, sum_d x^_d^2 = D).  The twin's dx_d is the exact value
 * rounded once, within u |dx_d| (1 + 2u); the test's sum is exact in MPFR
 * (products of doubles at 4096 bits), so |sum x_d dx^_d| <= u (1 + 2u)
 * sum |x_d dx^_d|. */
Test(grad_oracle, rmsnorm_twin_dx_is_orthogonal_to_x_at_eps_zero)
{
    gsl_rng *r = test_rng(2629);
    mpfr_t s, t;
    mpfr_inits2(4096, s, t, (mpfr_ptr)0);
    for (size_t k = 0; k < 4; k++)
        for (int offset = 0; offset < 2; offset++) {
            rcase c;
            const size_t D = widths[k];
            rcase_fill(&c, D, offset, 0.0, r);
            double *dx = malloc(N * D * sizeof *dx), *dw = calloc(D, sizeof *dw);
            double *dxb = malloc(N * D * sizeof *dxb);
            cr_assert_eq(refenc_mp_rmsnorm_backward(dx, dw, c.dY, c.x, c.w, N, D, 0.0, offset, PREC, NULL), 0);
            no_projection(dxb, c.dY, c.x, c.w, D, 0.0, offset);
            for (size_t n = 0; n < N; n++) {
                double tol = 0;
                for (int bug = 0; bug < 2; bug++) {
                    const double *g = (bug ? dxb : dx) + n * D, *xr = c.x + n * D;
                    mpfr_set_zero(s, 1);
                    for (size_t d = 0; d < D; d++) {
                        mpfr_set_d(t, xr[d], MPFR_RNDN);
                        mpfr_mul_d(t, t, g[d], MPFR_RNDN); /* exact */
                        mpfr_add(s, s, t, MPFR_RNDN);      /* exact at 4096 bits */
                        if (!bug)
                            tol += fabs(xr[d] * g[d]);
                    }
                    if (!bug)
                        tol *= U * (1.0 + 2.0 * U) * SLACK;
                    const double o = fabs(mpfr_get_d(s, MPFR_RNDN));
                    if (!bug)
                        cr_expect(o <= tol, "D %zu offset %d row %zu: <dx, x> = %.3g > %.3g", D, offset, n, o, tol);
                    else /* negative control: sum g x / r != 0 */
                        cr_expect(o > tol, "control D %zu offset %d row %zu: <dx, x> = %.3g within %.3g", D,
                                  offset, n, o, tol);
                }
            }
            free(dx), free(dw), free(dxb);
            rcase_free(&c);
        }
    mpfr_clears(s, t, (mpfr_ptr)0);
    gsl_rng_free(r);
}

/* The reference's refenc_rmsnorm_backward (rmsnorm.c) against the twin.
 * Its arithmetic, first order, per row (u = 2^-53, gamma_n = n u/(1 - n u)):
 *   ss = sum x_d^2 left to right: gamma_D ss; / D, + eps: 2u more, so
 *   ms + eps within gamma_{D+2}; the square root halves it and adds u:
 *   r^ = r (1 + d_r), |d_r| <= e_r = gamma_{D+2}/2 + u.
 *   x^ = fl(x / r^): relative e_x = e_r + u.
 *   s = fl(1 + w) (offset; the twin's s is exact): relative u_s = u, else 0.
 *   sgx = sum_d fl(fl(dy s) x^): each term within (u_s + 2u + e_x) of its
 *   value, the left-to-right sum gamma_D of the magnitudes; / D: u.  So
 *   |m^ - m| <= e_m A, A = mean_d |g x^|, e_m = u_s + 3u + e_x + gamma_D.
 *   dx_d = fl(fl(fl(dy s) - fl(x^ m^)) / r^):
 *     |num^ - num| <= (u_s + u)|g| + |x^|((e_x + u)|m| + e_m A) + u |g - x^ m|
 *     |dx^ - dx|   <= |num^ - num| / r + (e_r + u) |dx|.
 *   dw[d] = dw0 + sum_n fl(dy x^) (+= in order): (e_x + u) sum |dy x^| +
 *   gamma_N (|dw0| + sum |dy x^|).
 * The exact values (r, x^, g, m, dx) are taken from the double data (their
 * own rounding is second order here: SLACK). */
static size_t compare(const double *dx, const double *dw, const double *odx, const double *odw,
                      const rcase *c, const double *dw0, test_worst *w)
{
    const size_t D = c->D;
    const double us = c->offset ? U : 0.0, one = c->offset ? 1.0 : 0.0;
    const double er = test_gamma((double)D + 2) / 2 + U, ex = er + U;
    const double em = us + 3 * U + ex + test_gamma((double)D);
    size_t bad = 0;
    double *sdw = calloc(D, sizeof *sdw);
    for (size_t n = 0; n < N; n++) {
        const double *x = c->x + n * D, *dy = c->dY + n * D;
        double ss = 0;
        for (size_t d = 0; d < D; d++)
            ss += x[d] * x[d];
        const double r = sqrt(ss / (double)D + c->eps);
        double m = 0, A = 0;
        for (size_t d = 0; d < D; d++) {
            const double g = dy[d] * (one + c->w[d]), xh = x[d] / r;
            m += g * xh, A += fabs(g * xh);
            sdw[d] += fabs(dy[d] * xh);
        }
        m /= (double)D, A /= (double)D;
        for (size_t d = 0; d < D; d++) {
            const double g = dy[d] * (one + c->w[d]), xh = x[d] / r, num = g - xh * m;
            const double e = ((us + U) * fabs(g) + fabs(xh) * ((ex + U) * fabs(m) + em * A) +
                              U * fabs(num)) / r + (er + U) * fabs(num / r);
            const double o = odx[n * D + d];
            bad += !test_worst_check(w, dx[n * D + d], o, e * SLACK + U * fabs(o) * (1 + 2 * U),
                                     "rmsnorm dx[%zu]", n * D + d);
        }
    }
    for (size_t d = 0; d < D; d++) {
        const double e = (ex + U) * sdw[d] + test_gamma((double)N) * (fabs(dw0[d]) + sdw[d]);
        bad += !test_worst_check(w, dw[d], odw[d], e * SLACK + U * fabs(odw[d]) * (1 + 2 * U),
                                 "rmsnorm dw[%zu]", d);
    }
    free(sdw);
    return bad;
}

Test(grad_oracle, rmsnorm_dx_dw_within_the_derived_bound)
{
    gsl_rng *r = test_rng(2610);
    test_worst w, wc;
    test_worst_init(&w), test_worst_init(&wc);
    size_t bad = 0, caught = 0;
    for (size_t k = 0; k < 4; k++)
        for (int offset = 0; offset < 2; offset++)
            for (int e = 0; e < 2; e++) {
                rcase c;
                const size_t D = widths[k];
                rcase_fill(&c, D, offset, e ? 0.37 : 1e-6, r);
                double *dw0 = malloc(D * sizeof *dw0);
                test_fill_gaussian(dw0, D, 0.0, 1.0, r); /* accumulated into */
                double *dx = malloc(N * D * sizeof *dx), *dw = malloc(D * sizeof *dw);
                double *odx = malloc(N * D * sizeof *odx), *odw = malloc(D * sizeof *odw);
                double *dxb = malloc(N * D * sizeof *dxb);
                memcpy(dw, dw0, D * sizeof *dw), memcpy(odw, dw0, D * sizeof *odw);
                refenc_rmsnorm_backward(dx, dw, c.dY, c.x, c.w, N, D, c.eps, offset);
                cr_assert_eq(refenc_mp_rmsnorm_backward(odx, odw, c.dY, c.x, c.w, N, D, c.eps, offset,
                                                        PREC, NULL), 0);
                bad += compare(dx, dw, odx, odw, &c, dw0, &w);
                no_projection(dxb, c.dY, c.x, c.w, D, c.eps, offset);
                caught += compare(dxb, dw, odx, odw, &c, dw0, &wc) > 0;
                free(dw0), free(dx), free(dw), free(odx), free(odw), free(dxb);
                rcase_free(&c);
            }
    char msg[512];
    cr_log_info("rmsnorm: %s", test_worst_describe(&w, msg, sizeof msg));
    cr_expect_eq(bad, 0, "%zu outside; %s", bad, test_worst_describe(&w, msg, sizeof msg));
    cr_expect_eq(caught, 16, "the no-projection backward fell outside in %zu of 16 cases", caught);
    gsl_rng_free(r);
}
