/* RMSNorm's backward (rmsnorm.h) against finite differences, on the budget of
 * docs/gradients.md (gc_central: truncation from two steps, rounding from
 * the forward's bound, here bnd_rmsnorm of checks/oracle/bounds.c), along x
 * and along w, both scales; and its exact structure at eps = 0: RMSNorm(a x)
 * = RMSNorm(x) makes dx orthogonal to x.  Negative control, run in the same
 * tests: the backward without its x^ mean(g x^) term, rejected by the same
 * comparisons. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/rmsnorm.h"
#include "../common/testutil.h"
#include "../oracle/bounds.h"
#include "gradcheck.h"

#define U TEST_U
#define ROWS 4

typedef struct {
    size_t D;
    int offset;
    double eps;
    const double *x, *w, *dy, *vx, *vw;
    double *xt, *wt, *y, *ey;
} rms_ctx;

static void along(double *dst, const double *a, const double *v, double t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] + t * v[i]; /* exact on the grids of gradcheck.h */
}

/* phi(t) = <dy, RMSNorm(x + t vx; w + t vw)>, with bnd_rmsnorm's bound */
static double rms_phi(void *p, double t, double *err)
{
    rms_ctx *k = p;
    const size_t n = ROWS * k->D;
    along(k->xt, k->x, k->vx, t, n);
    along(k->wt, k->w, k->vw, t, k->D);
    refenc_rmsnorm_forward(k->y, k->xt, k->wt, ROWS, k->D, k->eps, k->offset);
    cr_assert(bnd_rmsnorm(k->ey, k->xt, NULL, k->wt, k->offset, k->y, ROWS, k->D, k->eps));
    double edot, ew = 0;
    const double phi = gc_dot(k->dy, k->y, n, &edot);
    for (size_t i = 0; i < n; i++)
        ew += fabs(k->dy[i]) * k->ey[i];
    *err = ew + edot;
    return phi;
}

/* the backward without the projection term: dx = g / r (a named mutant) */
static void backward_no_projection(double *dx, const double *dy, const double *x, const double *w,
                                   size_t N, size_t D, double eps, int offset)
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

static double *z(size_t n)
{
    double *p = calloc(n, sizeof *p);
    cr_assert_not_null(p);
    return p;
}

Test(grad_rmsnorm, finite_differences_along_x_and_w)
{
    gsl_rng *r = test_rng(901);
    const size_t widths[] = {2, 3, 7, 16, 33};
    test_worst w, wbad;
    test_worst_init(&w);
    test_worst_init(&wbad);
    size_t bad = 0, caught = 0, controls = 0;
    for (size_t t = 0; t < 5; t++)
        for (int offset = 0; offset < 2; offset++) {
            const size_t D = widths[t], n = ROWS * D;
            double *x = z(n), *wt = z(D), *dy = z(n), *vx = z(n), *vw = z(D), *zero = z(n);
            test_fill_gaussian(x, n, 0.2, 1.3, r);
            test_fill_gaussian(wt, D, offset ? 0.0 : 1.0, 0.1, r);
            test_fill_gaussian(dy, n, 0.0, 1.0, r);
            gc_quantize(x, n, GC_GRID_X);
            gc_quantize(wt, D, GC_GRID_X);
            double *dx = z(n), *dw = z(D), *dxb = z(n);
            refenc_rmsnorm_backward(dx, dw, dy, x, wt, ROWS, D, 1e-6, offset);
            backward_no_projection(dxb, dy, x, wt, ROWS, D, 1e-6, offset);
            rms_ctx k = {D, offset, 1e-6, x, wt, dy, NULL, NULL, z(n), z(D), z(n), z(n)};
            for (int p = 0; p < 2; p++) {
                gc_direction(p == 0 ? vx : vw, p == 0 ? n : D, p == 0 ? 0.05 : 0.5, r);
                k.vx = p == 0 ? vx : zero;
                k.vw = p == 1 ? vw : zero;
                gc_fd fd;
                gc_central(&fd, rms_phi, &k, GC_STEP);
                double ea;
                const double a = p == 0 ? gc_dot(dx, vx, n, &ea) : gc_dot(dw, vw, D, &ea);
                bad += !gc_fd_check(&w, a, ea, &fd, "RMSNorm D %zu offset %d, d%s", D, offset,
                                    p == 0 ? "x" : "w");
                if (p == 0) { /* negative control on the same budget */
                    const double ab = gc_dot(dxb, vx, n, &ea);
                    controls++;
                    caught += !gc_fd_check(&wbad, ab, ea, &fd, "no-projection mutant D %zu", D);
                }
            }
            free(x), free(wt), free(dy), free(vx), free(vw), free(zero), free(dx), free(dw), free(dxb);
            free(k.xt), free(k.wt), free(k.y), free(k.ey);
        }
    char buf[512];
    cr_expect_eq(bad, 0, "%zu finite-difference checks failed; %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_expect_eq(caught, controls, "the no-projection mutant passed %zu of %zu checks",
                 controls - caught, controls);
    gsl_rng_free(r);
}

/* eps = 0: d/da RMSNorm(a x) = 0 at a = 1, so <dx, x> = 0 for every dy.
 * dx_d = (g_d - x^_d m) / r with m = mean(g x^): sum_d x_d dx_d =
 * (sum g x - m sum x^ x) / r = (sum g x^ - m D) = 0 exactly, as
 * sum x^_d x_d / r = D.  Bound: each computed dx^_d is within
 * (gamma_{D+4} (|g_d| + |x^_d m|) + ...) of the exact, bounded generously
 * but derivedly by gamma_{2D+8} (|g_d| + |x^_d| |m|_abs) / r where
 * |m|_abs = mean |g x^| (every rounding of x^, the sum and the two
 * subtractions, first order); the test's own sum adds gamma_D sum |x dx^|. */
Test(grad_rmsnorm, dx_is_orthogonal_to_x_at_eps_zero)
{
    gsl_rng *r = test_rng(902);
    const size_t widths[] = {1, 2, 7, 64, 100};
    for (size_t t = 0; t < 5; t++)
        for (int offset = 0; offset < 2; offset++) {
            const size_t D = widths[t], n = ROWS * D;
            double *x = z(n), *wt = z(D), *dy = z(n), *dx = z(n), *dw = z(D), *dxb = z(n);
            test_fill_gaussian(x, n, -0.4, 2.385, r);
            test_fill_gaussian(wt, D, offset ? 0.0 : 1.0, 0.1, r);
            test_fill_gaussian(dy, n, 0.0, 1.0, r);
            refenc_rmsnorm_backward(dx, dw, dy, x, wt, ROWS, D, 0.0, offset);
            backward_no_projection(dxb, dy, x, wt, ROWS, D, 0.0, offset);
            for (size_t row = 0; row < ROWS; row++) {
                const double *xr = x + row * D, *dyr = dy + row * D;
                double ss = 0;
                for (size_t d = 0; d < D; d++)
                    ss += xr[d] * xr[d];
                const double rr = sqrt(ss / (double)D);
                double mabs = 0;
                for (size_t d = 0; d < D; d++)
                    mabs += fabs(dyr[d] * ((offset ? 1.0 : 0.0) + wt[d]) * xr[d] / rr);
                mabs /= (double)D;
                double o = 0, ob = 0, ao = 0, tol = 0;
                for (size_t d = 0; d < D; d++) {
                    const double g = dyr[d] * ((offset ? 1.0 : 0.0) + wt[d]);
                    o += xr[d] * dx[row * D + d];
                    ob += xr[d] * dxb[row * D + d];
                    ao += fabs(xr[d] * dx[row * D + d]);
                    tol += fabs(xr[d]) * test_gamma(2.0 * (double)D + 8) *
                           (fabs(g) + fabs(xr[d] / rr) * mabs) / rr;
                }
                tol += test_gamma((double)D) * ao;
                cr_expect(fabs(o) <= tol, "seed %lu, D %zu, offset %d, row %zu: <dx, x> = %.3g > %.3g",
                          test_seed(), D, offset, row, o, tol);
                /* negative control: without the projection term <dx, x> = sum g x / r != 0 */
                cr_expect(fabs(ob) > tol, "negative control, D %zu: <dx, x> of the mutant %.3g within %.3g",
                          D, ob, tol);
            }
            free(x), free(wt), free(dy), free(dx), free(dw), free(dxb);
        }
    gsl_rng_free(r);
}
