/* Gradient properties of the token-wise kernels: linear, LayerNorm,
 * softmax, activations, RoPE, embedding (gradcheck.h, docs/gradients.md).
 * Each takes the kernel table it checks, so the same function is the test
 * (on the reference) and the negative control (on a named bug). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "gradcheck.h"

#define U TEST_U
#define G test_gamma

static double *zalloc(size_t n)
{
    return prop_calloc(n ? n : 1, sizeof(double));
}

/* x (n): N(mean, sigma^2) on the input grid */
static void fill_input(double *x, size_t n, double mean, double sigma, gsl_rng *r)
{
    test_fill_gaussian(x, n, mean, sigma, r);
    gc_quantize(x, n, GC_GRID_X);
}

/* y = a + t v, elementwise (exact on the grids) */
static void along(double *y, const double *a, const double *v, double t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + t * v[i];
}

/* sum_i |dY_i| e_i: the rounding of <dY, y^> inherited from y^'s bounds */
static double weighted(const double *dY, const double *e, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += fabs(dY[i]) * e[i];
    return s * (1.0 + G((double)n));
}

/* ---- linear --------------------------------------------------------------- */

typedef struct {
    size_t N, in, out;
    const double *x, *W, *b, *vx, *vW, *vb, *dY;
    double *xt, *Wt, *bt, *y, *e;
} lin_ctx;

/* phi(t) = <dY, (x + t vx)(W + t vW)^T + (b + t vb)>; linear.h's bound per
 * output: gamma_in (1 + u) sum_k |x_k W_ok| + u |y_o|. */
static double lin_phi(void *p, double t, double *err)
{
    lin_ctx *c = p;
    along(c->xt, c->x, c->vx, t, c->N * c->in);
    along(c->Wt, c->W, c->vW, t, c->out * c->in);
    along(c->bt, c->b, c->vb, t, c->out);
    refenc_linear_forward(c->y, c->xt, c->Wt, c->bt, c->N, c->in, c->out);
    for (size_t n = 0; n < c->N; n++)
        for (size_t o = 0; o < c->out; o++) {
            double mag = 0.0;
            for (size_t k = 0; k < c->in; k++)
                mag += fabs(c->xt[n * c->in + k] * c->Wt[o * c->in + k]);
            c->e[n * c->out + o] = G((double)c->in) * (1.0 + U) * mag * (1.0 + G(c->in + 2.0)) +
                                   U * fabs(c->y[n * c->out + o]);
        }
    double edot;
    const double phi = gc_dot(c->dY, c->y, c->N * c->out, &edot);
    *err = weighted(c->dY, c->e, c->N * c->out) + edot;
    return phi;
}

static const size_t lin_shapes[][3] = {{1, 1, 1}, {3, 5, 4}, {7, 16, 9}, {5, 8, 8}, {4, 3, 11}};

/* Finite differences along x, W and b separately: <dx, vx>, <dW, vW>,
 * <db, vb> each against the central difference of phi. */
size_t gp_linear_fd(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    size_t bad = 0;
    for (size_t s = 0; s < sizeof lin_shapes / sizeof lin_shapes[0]; s++) {
        const size_t N = lin_shapes[s][0], in = lin_shapes[s][1], out = lin_shapes[s][2];
        double *x = zalloc(N * in), *W = zalloc(out * in), *b = zalloc(out), *dY = zalloc(N * out);
        double *v[3] = {zalloc(N * in), zalloc(out * in), zalloc(out)};
        double *g[3] = {zalloc(N * in), zalloc(out * in), zalloc(out)};
        const size_t len[3] = {N * in, out * in, out};
        lin_ctx c = {N, in, out, x, W, b, NULL, NULL, NULL, dY, zalloc(N * in), zalloc(out * in),
                     zalloc(out), zalloc(N * out), zalloc(N * out)};
        fill_input(x, N * in, 0.3, 1.0, r);
        fill_input(W, out * in, 0.0, 1.0 / sqrt((double)in), r);
        fill_input(b, out, 0.1, 0.5, r);
        test_fill_gaussian(dY, N * out, 0.0, 1.0, r);
        K->linear(g[0], g[1], g[2], dY, x, W, N, in, out);
        double *zero[3] = {zalloc(N * in), zalloc(out * in), zalloc(out)};
        for (size_t p = 0; p < 3; p++) {
            gc_direction(v[p], len[p], 1.0, r);
            c.vx = p == 0 ? v[0] : zero[0];
            c.vW = p == 1 ? v[1] : zero[1];
            c.vb = p == 2 ? v[2] : zero[2];
            gc_fd fd;
            gc_central(&fd, lin_phi, &c, GC_STEP);
            double ea;
            const double a = gc_dot(g[p], v[p], len[p], &ea);
            bad += !gc_fd_check(w, a, ea, &fd, "linear (%zu, %zu, %zu), d%s", N, in, out,
                                p == 0 ? "x" : p == 1 ? "W" : "b");
        }
        for (size_t p = 0; p < 3; p++) {
            free(v[p]);
            free(g[p]);
            free(zero[p]);
        }
        free(x), free(W), free(b), free(dY), free(c.xt), free(c.Wt), free(c.bt), free(c.y), free(c.e);
    }
    return bad;
}

/* dW = dW0 + sum_n dy[n,:] x[n,:]^T and db = db0 + sum_n dy[n,:], the sums
 * over the tokens: both sides add the same N + 1 rounded products in some
 * order, so they differ by at most 2 gamma_{N+1} (|dW0| + sum_n |dy x|). */
size_t gp_linear_outer(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    size_t bad = 0;
    for (size_t s = 0; s < sizeof lin_shapes / sizeof lin_shapes[0]; s++) {
        const size_t N = lin_shapes[s][0], in = lin_shapes[s][1], out = lin_shapes[s][2];
        double *x = zalloc(N * in), *W = zalloc(out * in), *dy = zalloc(N * out);
        double *dW = zalloc(out * in), *db = zalloc(out), *dx = zalloc(N * in);
        double *dW0 = zalloc(out * in), *db0 = zalloc(out);
        test_fill_gaussian(x, N * in, 0.0, 1.3, r);
        test_fill_gaussian(W, out * in, 0.0, 0.7, r);
        test_fill_gaussian(dy, N * out, 0.0, 1.0, r);
        test_fill_gaussian(dW0, out * in, 0.0, 0.2, r); /* accumulated into: += */
        test_fill_gaussian(db0, out, 0.0, 0.2, r);
        memcpy(dW, dW0, out * in * sizeof(double));
        memcpy(db, db0, out * sizeof(double));
        K->linear(dx, dW, db, dy, x, W, N, in, out);
        for (size_t o = 0; o < out; o++) {
            double sb = db0[o], mb = fabs(db0[o]);
            for (size_t n = 0; n < N; n++)
                sb += dy[n * out + o], mb += fabs(dy[n * out + o]);
            bad += !test_worst_check(w, db[o], sb, 2.0 * G(N + 1.0) * mb, "linear (%zu, %zu, %zu) db[%zu]", N, in, out, o);
            for (size_t k = 0; k < in; k++) {
                double sw = dW0[o * in + k], mw = fabs(sw);
                for (size_t n = 0; n < N; n++) {
                    sw += dy[n * out + o] * x[n * in + k];
                    mw += fabs(dy[n * out + o] * x[n * in + k]);
                }
                bad += !test_worst_check(w, dW[o * in + k], sw, 2.0 * G(N + 1.0) * mw,
                                         "linear (%zu, %zu, %zu) dW[%zu,%zu]", N, in, out, o, k);
            }
        }
        free(x), free(W), free(dy), free(dW), free(db), free(dx), free(dW0), free(db0);
    }
    return bad;
}

/* ---- LayerNorm -------------------------------------------------------------- */

typedef struct {
    size_t N, D;
    double eps;
    double *x, *gamma, *beta, *dy;
} ln_data;

static const size_t ln_widths[] = {1, 2, 3, 7, 16, 33};
#define N_LN (sizeof ln_widths / sizeof ln_widths[0])

/* Rows with offsets up to a few hundred and scales from 1e-2 to 10 */
static void ln_data_random(ln_data *c, gsl_rng *r, size_t D, size_t t)
{
    static const double epss[] = {1e-5, 1e-12, 0.37, 0.0};
    c->N = 5;
    c->D = D;
    c->eps = epss[t % (D >= 2 ? 4 : 3)]; /* eps = 0 only where no row is constant */
    c->x = zalloc(c->N * D), c->gamma = zalloc(D), c->beta = zalloc(D), c->dy = zalloc(c->N * D);
    for (size_t n = 0; n < c->N; n++)
        fill_input(c->x + n * D, D, (gsl_rng_uniform(r) - 0.5) * (n % 2 ? 400.0 : 3.0),
                   pow(10.0, -2.0 + 3.0 * gsl_rng_uniform(r)), r);
    fill_input(c->gamma, D, 1.0, 0.3, r);
    fill_input(c->beta, D, 0.0, 0.7, r);
    test_fill_gaussian(c->dy, c->N * D, 0.0, 1.0, r);
}

static void ln_data_free(ln_data *c)
{
    free(c->x), free(c->gamma), free(c->beta), free(c->dy);
}

/* A bound e[d] on |dx^_d - dx_d| for one row, dx the exact backward at the
 * exact x, dy, gamma and dx^ the computed one (layernorm.h's order):
 *   mu^, var^ within e_mu, e_var (fb_moments: the forward's two passes);
 *   sd^ = fl(sqrt(fl(var^ + eps))): relative error <= rel + 2u,
 *     rel = (e_var + u (var^ + eps)) / (var^ + eps - e_var)  (sqrt halves it);
 *   x^_d = fl(fl(x_d - mu^) / sd^): e_x = (e_mu + u |dev| + |dev| d_sd') / sd_lo;
 *   g = fl(dy gamma): u |g|;  mg = fl(fl(sum g) / D): gamma_{D+2} sum |g| / D + u |mg|;
 *   mgx = fl(fl(sum fl(g x^)) / D): (sum |g| e_x + gamma_{D+2} sum |g x^|) / D + u |mgx|;
 *   num = fl(fl(g - mg) - fl(x^ mgx)): the input errors plus gamma_3 of the magnitudes;
 *   dx = fl(num / sd^): (e_num + |num| d_sd') / sd_lo.
 * xh receives x^ and ex its bound.  Returns the exact value of
 * sum_d dx_d x^_d = (eps / (var + eps)) sum_d g_d x^_d / sd, computed, and
 * sets *e_ortho to its bound: the relative errors of eps/(var + eps) (rel +
 * 2u) and of sd (dsd + u), and sum g x^'s (sum |g| e_x + gamma_{D+2} sum |g x^|). */
static double ln_row_bounds(double *e, double *xh, double *ex, const double *x, const double *dy,
                            const double *gamma, size_t D, double eps, double *e_ortho)
{
    double mu, e_mu, var, e_var;
    fb_moments(x, D, &mu, &e_mu, &var, &e_var);
    const double ve = var + eps;
    const double rel = ve > e_var ? (e_var + U * ve) / (ve - e_var) : INFINITY;
    const double dsd = rel + 2.0 * U, sd = sqrt(ve), sd_lo = sd * (1.0 - dsd);
    double sg = 0.0, ag = 0.0, sgx = 0.0, agx = 0.0, egx = 0.0;
    for (size_t d = 0; d < D; d++) {
        const double dev = x[d] - mu, g = dy[d] * gamma[d];
        xh[d] = dev / sd;
        ex[d] = (e_mu + U * fabs(dev) + fabs(dev) * (dsd + U)) / sd_lo;
        sg += g, ag += fabs(g), sgx += g * xh[d], agx += fabs(g * xh[d]), egx += fabs(g) * ex[d];
    }
    const double mg = sg / (double)D, mgx = sgx / (double)D;
    const double e_mg = G(D + 2.0) * ag / (double)D + U * fabs(mg);
    const double e_mgx = (egx + G(D + 2.0) * agx) / (double)D + U * fabs(mgx);
    for (size_t d = 0; d < D; d++) {
        const double g = dy[d] * gamma[d], num = g - mg - xh[d] * mgx;
        const double e_num = U * fabs(g) + e_mg + (fabs(xh[d]) + ex[d]) * e_mgx + fabs(mgx) * ex[d] +
                             G(3) * (fabs(g) + fabs(mg) + fabs(xh[d] * mgx));
        e[d] = (e_num + fabs(num) * (dsd + U)) / sd_lo * (1.0 + 0x1p-20);
    }
    const double ortho = eps / ve * sgx / sd;
    *e_ortho = (fabs(ortho) * (rel + dsd + 4.0 * U) + eps / ve * (egx + G(D + 2.0) * agx) / sd_lo) *
               (1.0 + 0x1p-20);
    return ortho;
}

/* Each row of dx sums to zero (LN(x + c 1) = LN(x)) and is orthogonal to
 * x^ up to the eps term: sum_d dx_d x^_d = (eps/(var + eps)) sum_d g_d x^_d / sd
 * (0 for eps = 0, where LN(a x) = LN(x)).  Tolerances: sum_d e_d
 * (ln_row_bounds) plus the test's own sum, gamma_D sum |dx^|; for the
 * product with x^, the errors of both factors and of the eps term. */
size_t gp_layernorm_rows(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    size_t bad = 0;
    for (size_t t = 0; t < N_LN; t++) {
        ln_data c;
        const size_t D = ln_widths[t];
        ln_data_random(&c, r, D, t);
        double *dx = zalloc(c.N * D), *dg = zalloc(D), *db = zalloc(D);
        double *e = zalloc(D), *xh = zalloc(D), *ex = zalloc(D);
        K->layernorm(dx, dg, db, c.dy, c.x, c.gamma, c.N, D, c.eps);
        for (size_t n = 0; n < c.N; n++) {
            const double *dx_n = dx + n * D;
            double e_ortho;
            const double ortho = ln_row_bounds(e, xh, ex, c.x + n * D, c.dy + n * D, c.gamma, D,
                                               c.eps, &e_ortho);
            double s = 0.0, as = 0.0, es = 0.0, o = 0.0, ao = 0.0, eo = 0.0;
            for (size_t d = 0; d < D; d++) {
                s += dx_n[d], as += fabs(dx_n[d]), es += e[d];
                o += dx_n[d] * xh[d], ao += fabs(dx_n[d] * xh[d]);
                eo += e[d] * (fabs(xh[d]) + ex[d]) + fabs(dx_n[d]) * ex[d];
            }
            bad += !test_worst_check(w, s, 0.0, es + G(D) * as, "LayerNorm D %zu eps %g row %zu: sum dx", D, c.eps, n);
            bad += !test_worst_check(w, o, ortho, eo + G(D + 1.0) * ao + e_ortho,
                                     "LayerNorm D %zu eps %g row %zu: dx . x^", D, c.eps, n);
        }
        free(dx), free(dg), free(db), free(e), free(xh), free(ex);
        ln_data_free(&c);
    }
    return bad;
}

typedef struct {
    ln_data *c;
    const double *vx, *vg, *vb;
    double *xt, *gt, *bt, *y, *ey;
} ln_ctx;

/* phi(t) = <dy, LN(x + t vx; gamma + t vg, beta + t vb)>, fb_layernorm's bounds */
static double ln_phi(void *p, double t, double *err)
{
    ln_ctx *k = p;
    const size_t N = k->c->N, D = k->c->D;
    along(k->xt, k->c->x, k->vx, t, N * D);
    along(k->gt, k->c->gamma, k->vg, t, D);
    along(k->bt, k->c->beta, k->vb, t, D);
    fb_layernorm(k->y, k->ey, k->xt, NULL, k->gt, k->bt, N, D, k->c->eps);
    double edot;
    const double phi = gc_dot(k->c->dy, k->y, N * D, &edot);
    *err = weighted(k->c->dy, k->ey, N * D) + edot;
    return phi;
}

/* Finite differences of LayerNorm along x, gamma and beta (D >= 2: at D = 1
 * the output is beta whatever x, and the FD is trivially 0). */
size_t gp_layernorm_fd(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    size_t bad = 0;
    for (size_t t = 1; t < N_LN; t++) {
        ln_data c;
        const size_t D = ln_widths[t], N = 5;
        ln_data_random(&c, r, D, t);
        double *g[3] = {zalloc(N * D), zalloc(D), zalloc(D)}, *v[3] = {zalloc(N * D), zalloc(D), zalloc(D)};
        double *zero = zalloc(N * D);
        const size_t len[3] = {N * D, D, D};
        K->layernorm(g[0], g[1], g[2], c.dy, c.x, c.gamma, N, D, c.eps);
        ln_ctx k = {&c, NULL, NULL, NULL, zalloc(N * D), zalloc(D), zalloc(D), zalloc(N * D), zalloc(N * D)};
        for (size_t p = 0; p < 3; p++) {
            /* the direction on x at the scale of each row's deviation */
            gc_direction(v[p], len[p], p == 0 ? 0.01 : 0.5, r);
            k.vx = p == 0 ? v[0] : zero;
            k.vg = p == 1 ? v[1] : zero;
            k.vb = p == 2 ? v[2] : zero;
            gc_fd fd;
            gc_central(&fd, ln_phi, &k, GC_STEP);
            double ea;
            const double a = gc_dot(g[p], v[p], len[p], &ea);
            bad += !gc_fd_check(w, a, ea, &fd, "LayerNorm D %zu eps %g, d%s", D, c.eps,
                                p == 0 ? "x" : p == 1 ? "gamma" : "beta");
        }
        for (size_t p = 0; p < 3; p++)
            free(g[p]), free(v[p]);
        free(zero), free(k.xt), free(k.gt), free(k.bt), free(k.y), free(k.ey);
        ln_data_free(&c);
    }
    return bad;
}

/* ---- softmax ---------------------------------------------------------------- */

typedef struct {
    size_t R, n;
    double tau;
    double *s, *dy;
} sm_data;

/* R rows of n logits (N(0, 3^2) on the grid); row 1 has two -inf entries
 * and row R-1 is all -inf (a fully masked row) */
static void sm_data_random(sm_data *c, gsl_rng *r, size_t n, double tau)
{
    c->R = 4, c->n = n, c->tau = tau;
    c->s = zalloc(c->R * n), c->dy = zalloc(c->R * n);
    fill_input(c->s, c->R * n, 0.5, 3.0, r);
    test_fill_gaussian(c->dy, c->R * n, 0.0, 1.0, r);
    if (n >= 3)
        c->s[1 * n + 0] = c->s[1 * n + 2] = -INFINITY;
    for (size_t i = 0; i < n; i++)
        c->s[(c->R - 1) * n + i] = -INFINITY;
}

static const size_t sm_widths[] = {1, 2, 5, 17, 64};
static const double sm_taus[] = {1.0, 0.7, 2.5};

/* Each row of ds sums to zero: sum_i y_i (dy_i - D) = D (1 - sum y) = 0.
 * Computed: the kernel's D^ = fl(sum y^ dy) within gamma_n sum |y^ dy|; the
 * computed y^ sums to 1 within sum_i ey_i (fb_softmax's bounds against the
 * exact softmax, which sums to 1); each ds^_i within gamma_3 |ds^_i| of
 * y^_i (dy_i - D^)/tau; the test's sum gamma_n sum |ds^|. */
size_t gp_softmax_rows(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    size_t bad = 0;
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 3; b++) {
            sm_data c;
            sm_data_random(&c, r, sm_widths[a], sm_taus[b]);
            const size_t R = c.R, n = c.n;
            double *y = zalloc(R * n), *ey = zalloc(R * n), *ds = zalloc(R * n);
            fb_softmax(y, ey, c.s, NULL, R, n, c.tau);
            K->softmax(ds, c.dy, y, R, n, c.tau);
            for (size_t i = 0; i < R; i++) {
                double D = 0.0, aD = 0.0, sy = 0.0, s = 0.0, as = 0.0;
                for (size_t j = 0; j < n; j++) {
                    D += y[i * n + j] * c.dy[i * n + j], aD += fabs(y[i * n + j] * c.dy[i * n + j]);
                    sy += ey[i * n + j];
                    s += ds[i * n + j], as += fabs(ds[i * n + j]);
                }
                const double tol = (G(n) * aD + fabs(D) * sy) / c.tau + (G(3) + G(n)) * as;
                bad += !test_worst_check(w, s, 0.0, tol * (1.0 + 0x1p-20), "softmax n %zu tau %g row %zu: sum ds", n, c.tau, i);
            }
            free(y), free(ey), free(ds), free(c.s), free(c.dy);
        }
    return bad;
}

typedef struct {
    sm_data *c;
    const double *v;
    double *st, *y, *ey;
} sm_ctx;

static double sm_phi(void *p, double t, double *err)
{
    sm_ctx *k = p;
    const size_t N = k->c->R * k->c->n;
    for (size_t i = 0; i < N; i++) /* -inf entries keep direction 0 */
        k->st[i] = k->v[i] == 0.0 ? k->c->s[i] : k->c->s[i] + t * k->v[i];
    fb_softmax(k->y, k->ey, k->st, NULL, k->c->R, k->c->n, k->c->tau);
    double edot;
    const double phi = gc_dot(k->c->dy, k->y, N, &edot);
    *err = weighted(k->c->dy, k->ey, N) + edot;
    return phi;
}

/* Finite differences of y = softmax(s / tau) along s. */
size_t gp_softmax_fd(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    size_t bad = 0;
    for (size_t a = 1; a < 5; a++)
        for (size_t b = 0; b < 3; b++) {
            sm_data c;
            sm_data_random(&c, r, sm_widths[a], sm_taus[b]);
            const size_t N = c.R * c.n;
            double *y = zalloc(N), *ds = zalloc(N), *v = zalloc(N);
            refenc_softmax_forward(y, c.s, c.R, c.n, c.tau);
            K->softmax(ds, c.dy, y, c.R, c.n, c.tau);
            gc_direction(v, N, 1.0, r);
            for (size_t i = 0; i < N; i++)
                if (isinf(c.s[i]))
                    v[i] = 0.0;
            sm_ctx k = {&c, v, zalloc(N), zalloc(N), zalloc(N)};
            gc_fd fd;
            gc_central(&fd, sm_phi, &k, GC_STEP);
            double ea;
            const double g = gc_dot(ds, v, N, &ea);
            bad += !gc_fd_check(w, g, ea, &fd, "softmax n %zu tau %g", c.n, c.tau);
            free(y), free(ds), free(v), free(k.st), free(k.y), free(k.ey), free(c.s), free(c.dy);
        }
    return bad;
}

/* ---- activations ------------------------------------------------------------ */

typedef struct {
    double x;
    refenc_activation act;
} act_ctx;

static double act_phi(void *p, double t, double *err)
{
    act_ctx *k = p;
    double y;
    const double xt = k->x + t;
    refenc_activation_forward(&y, &xt, 1, k->act);
    *err = fb_activation_rounding(k->act, xt, y);
    return y;
}

/* act'(x) against the central difference of act at 64 points in [-7, 7]
 * (ReLU away from its kink at 0). */
size_t gp_activation_fd(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    static const char *names[] = {"relu", "gelu", "gelu_tanh", "quick_gelu", "silu"};
    static const refenc_activation acts[] = {REFENC_ACT_RELU, REFENC_ACT_GELU,
                                             REFENC_ACT_GELU_TANH, REFENC_ACT_QUICK_GELU,
                                             REFENC_ACT_SILU};
    size_t bad = 0;
    for (size_t a = 0; a < 5; a++)
        for (size_t i = 0; i < 64; i++) {
            act_ctx k = {-7.0 + 14.0 * ((double)i + gsl_rng_uniform(r)) / 64.0, acts[a]};
            gc_quantize(&k.x, 1, GC_GRID_X);
            if (acts[a] == REFENC_ACT_RELU && fabs(k.x) < 4.0 * GC_STEP)
                continue;
            const double one = 1.0;
            double d;
            K->activation(&d, &one, &k.x, 1, acts[a]);
            gc_fd fd;
            gc_central(&fd, act_phi, &k, GC_STEP);
            bad += !gc_fd_check(w, d, 0.0, &fd, "%s'(%.17g)", names[a], k.x);
        }
    return bad;
}

/* ---- RoPE ------------------------------------------------------------------- */

typedef struct {
    size_t N, L, Dh;
    double base;
    refenc_rope_layout layout;
    const int64_t *pos;
    const double *x, *v, *dy;
    double *xt, *y, *ey;
} rope_ctx;

static double rope_phi(void *p, double t, double *err)
{
    rope_ctx *k = p;
    const size_t n = k->N * k->L * k->Dh;
    along(k->xt, k->x, k->v, t, n);
    fb_rope(k->y, k->ey, k->xt, NULL, k->pos, k->N, k->L, k->Dh, k->base, k->layout);
    double edot;
    const double phi = gc_dot(k->dy, k->y, n, &edot);
    *err = weighted(k->dy, k->ey, n) + edot;
    return phi;
}

/* The backward is R^T = R(-theta): against the central difference of
 * <dy, R x> along x, both layouts, positions up to 4095, two bases. */
size_t gp_rope_fd(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    static const int64_t pos[] = {0, 3, 17, 1000, 4095};
    static const size_t dhs[] = {2, 6, 8};
    size_t bad = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t lay = 0; lay < 2; lay++) {
            const size_t N = 2, L = 5, Dh = dhs[a], n = N * L * Dh;
            rope_ctx k = {N, L, Dh, a == 2 ? 500000.0 : 10000.0,
                          lay ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF, pos,
                          NULL, NULL, NULL, zalloc(n), zalloc(n), zalloc(n)};
            double *x = zalloc(n), *v = zalloc(n), *dy = zalloc(n), *dx = zalloc(n);
            fill_input(x, n, 0.0, 1.0, r);
            gc_direction(v, n, 1.0, r);
            test_fill_gaussian(dy, n, 0.0, 1.0, r);
            k.x = x, k.v = v, k.dy = dy;
            K->rope(dx, dy, pos, N, L, Dh, k.base, k.layout);
            gc_fd fd;
            gc_central(&fd, rope_phi, &k, GC_STEP);
            double ea;
            const double g = gc_dot(dx, v, n, &ea);
            bad += !gc_fd_check(w, g, ea, &fd, "RoPE Dh %zu %s", Dh, lay ? "interleaved" : "half");
            free(x), free(v), free(dy), free(dx), free(k.xt), free(k.y), free(k.ey);
        }
    return bad;
}

/* ---- embedding -------------------------------------------------------------- */

/* Repeated tokens accumulate: dtable[v] = dtable0[v] + sum over the
 * positions holding v of fl(dx sqrt(D)); rows of absent tokens keep
 * dtable0 exactly.  Both sides add the same rounded products in some
 * order: 2 gamma_{k+1} (|dtable0| + sum |fl(dx s)|) for k occurrences. */
size_t gp_embedding_repeats(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    const size_t B = 2, L = 7, V = 5, D = 6;
    static const int64_t tokens[2 * 7] = {2, 1, 2, 0, 2, 1, 3, 3, 2, 2, 0, 1, 1, 2};
    double *dx = zalloc(B * L * D), *dt = zalloc(V * D), *dt0 = zalloc(V * D);
    test_fill_gaussian(dx, B * L * D, 0.0, 1.0, r);
    test_fill_gaussian(dt0, V * D, 0.0, 0.5, r); /* accumulated into: += */
    memcpy(dt, dt0, V * D * sizeof(double));
    K->embedding(dt, dx, tokens, B, L, V, D);
    const double s = sqrt((double)D);
    size_t bad = 0;
    for (size_t v = 0; v < V; v++)
        for (size_t d = 0; d < D; d++) {
            double want = dt0[v * D + d], mag = fabs(want), k = 0;
            for (size_t bl = 0; bl < B * L; bl++)
                if (tokens[bl] == (int64_t)v) {
                    const double term = dx[bl * D + d] * s;
                    want += term, mag += fabs(term), k++;
                }
            bad += !test_worst_check(w, dt[v * D + d], want, 2.0 * G(k + 1.0) * mag,
                                     "embedding row %zu (%g occurrences) [%zu]", v, k, d);
        }
    free(dx), free(dt), free(dt0);
    return bad;
}
