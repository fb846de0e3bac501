/* LayerNorm invariances (layernorm.h).
 *
 * Properties (LN_{g,b,eps} over the last axis, biased variance, eps inside
 * the square root):
 *  - with g = 1, b = 0 each row has mean 0 and variance var/(var + eps);
 *  - LN_{g,b}(x) = g * LN_{1,0}(x) + b, elementwise;
 *  - LN(x + c 1) = LN(x), so a bias vector added before a (Post-)LN acts only
 *    through b - mean(b) (checked on a Post-LN layer too);
 *  - LN with eps a^2 eps on a x equals LN with eps on x, bitwise when a is a
 *    power of two;
 *  - g = sqrt(var + eps), b = mean gives back x;
 *  - a constant row gives b.
 * Tolerances: fb_layernorm's componentwise bound for each evaluation (the
 * rounding of the two-pass algorithm, and input errors through the exact
 * LayerNorm, whose Jacobian has 2-norm <= |g| / sqrt(var + eps)); the sums of
 * two such bounds where two evaluations are compared; fb_moments for the
 * statistics the test computes itself.  See docs/properties.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "../common/testutil.h"

#define U TEST_U

static const size_t widths[] = {1, 2, 3, 7, 16, 33, 64, 100, 128, 257, 768};
#define N_WIDTHS (sizeof widths / sizeof widths[0])

/* A batch of rows for one width: offsets up to a few thousand (the mean must
 * not cancel the variance), scales from 1e-3 to 1e2 (some with var ~ eps). */
typedef struct {
    size_t N, D;
    double eps;
    double *x, *gamma, *beta, *ones, *zeros;
} ln_case;

static void ln_case_random(ln_case *c, gsl_rng *r, size_t D, size_t t)
{
    static const double epss[] = {1e-5, 1e-3, 0.37, 0.0};
    c->N = 12;
    c->D = D;
    /* eps = 0 only where rows cannot be constant (D >= 2, random data) */
    c->eps = epss[t % (D >= 2 ? 4 : 3)];
    c->x = prop_calloc(c->N * D, sizeof(double));
    c->gamma = prop_calloc(D, sizeof(double));
    c->beta = prop_calloc(D, sizeof(double));
    c->ones = prop_calloc(D, sizeof(double));
    c->zeros = prop_calloc(D, sizeof(double));
    for (size_t n = 0; n < c->N; n++) {
        const double offset = (gsl_rng_uniform(r) - 0.5) * (n % 3 == 0 ? 5000.0 : 4.77);
        const double scale = n % 4 == 1 && c->eps > 0 ? sqrt(c->eps) * (0.5 + gsl_rng_uniform(r))
                                                     : pow(10.0, -3.0 + 5.0 * gsl_rng_uniform(r));
        test_fill_gaussian(c->x + n * D, D, offset, scale, r);
    }
    test_fill_gaussian(c->gamma, D, 1.0, 0.3, r);
    test_fill_gaussian(c->beta, D, 0.0, 0.7, r);
    for (size_t d = 0; d < D; d++)
        c->ones[d] = 1.0;
}

static void ln_case_free(ln_case *c)
{
    free(c->x);
    free(c->gamma);
    free(c->beta);
    free(c->ones);
    free(c->zeros);
}

/* ------------------------------------------------------------------------ */

/* Mean and variance of LN_{g,b}(x) rows against 0 and var/(var + eps)
 * (for g = 1, b = 0; the control passes g = 1.5, b = 0.1).
 * Mean: the exact output has mean 0; the computed mean of y^ is within
 *   sum e / D (the outputs' errors) + gamma_D sum |y^| / D (its own sum).
 * Variance: var(y^) is within |e|_2 (2 sqrt(D var(y^)) + |e|_2) / D of
 *   var(y) (var(z) = |P z|^2 / D, P the centring projection), and its
 *   two-pass evaluation within fb_moments' e_var.  The target r = var/(var+eps)
 *   from the test's var^ of x (e_var): r is increasing in var with slope
 *   eps/(var + eps)^2, so |r(var^) - r(var)| <= e_var eps / (var_lo + eps)^2;
 *   its evaluation adds gamma_2 r^.  Returns the violations. */
static size_t check_moments(test_worst *w, const ln_case *c, const double *g, const double *b)
{
    const size_t N = c->N, D = c->D;
    double *y = prop_calloc(N * D, sizeof(double)), *e = prop_calloc(N * D, sizeof(double));
    fb_layernorm(y, e, c->x, NULL, g, b, N, D, c->eps);
    size_t bad = 0;
    for (size_t n = 0; n < N; n++) {
        const double *y_n = y + n * D, *e_n = e + n * D;
        double sum = 0.0, sabs = 0.0, esum = 0.0, e2 = 0.0;
        for (size_t d = 0; d < D; d++) {
            sum += y_n[d];
            sabs += fabs(y_n[d]);
            esum += e_n[d];
            e2 += e_n[d] * e_n[d];
        }
        const double mean = sum / (double)D;
        const double tol_mean = esum / (double)D + test_gamma((double)D) * sabs / (double)D;
        bad += !fb_within(w, mean, tol_mean, 0.0, 0.0, "D=%zu eps=%g row %zu: mean", D, c->eps, n);

        double my, emy, vy, evy, mx, emx, vx, evx;
        fb_moments(y_n, D, &my, &emy, &vy, &evy);
        fb_moments(c->x + n * D, D, &mx, &emx, &vx, &evx);
        const double en = sqrt(e2);
        const double tol_v = evy + en * (2.0 * sqrt((double)D * vy) + en) / (double)D;
        const double r = vx / (vx + c->eps);
        const double vlo = fmax(0.0, vx - evx);
        const double tol_r = (c->eps > 0.0 ? evx * c->eps / ((vlo + c->eps) * (vlo + c->eps)) : 0.0) +
                             test_gamma(2) * r;
        bad += !fb_within(w, vy, tol_v, r, tol_r, "D=%zu eps=%g row %zu: variance", D, c->eps, n);
    }
    free(y);
    free(e);
    return bad;
}

Test(layernorm_invariance, unit_affine_output_has_mean_zero_and_variance_ratio)
{
    gsl_rng *r = test_rng(401);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 4 * N_WIDTHS; t++) {
        ln_case c;
        ln_case_random(&c, r, widths[t % N_WIDTHS], t);
        bad += check_moments(&w, &c, c.ones, c.zeros);
        if (c.D >= 2) {
            /* negative control: g = 1.5, b = 0.1 moves both moments */
            double *g = prop_calloc(c.D, sizeof(double)), *b = prop_calloc(c.D, sizeof(double));
            for (size_t d = 0; d < c.D; d++) {
                g[d] = 1.5;
                b[d] = 0.1;
            }
            test_worst wc;
            test_worst_init(&wc);
            cr_assert_eq(check_moments(&wc, &c, g, b), 2 * c.N,
                         "negative control: g = 1.5, b = 0.1 passed as unit affine (D=%zu)", c.D);
            free(g);
            free(b);
        }
        ln_case_free(&c);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu moments differ from 0 and var/(var+eps): %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* ------------------------------------------------------------------------ */

/* LN_{g,b}(x) == fl(fl(g LN_{1,0}(x)) + b) bitwise: the header's order of
 * operations ((x - mu) / sd * g + b) computes the same normalised value n^
 * for both (n^ * 1 + 0 = n^), then the same two operations on it. */
static size_t count_affine_mismatch(const ln_case *c, const double *g, char *buf, size_t len)
{
    const size_t N = c->N, D = c->D;
    double *y = prop_calloc(N * D, sizeof(double)), *n = prop_calloc(N * D, sizeof(double));
    refenc_layernorm_forward(y, c->x, c->gamma, c->beta, N, D, c->eps);
    refenc_layernorm_forward(n, c->x, c->ones, c->zeros, N, D, c->eps);
    for (size_t i = 0; i < N * D; i++)
        n[i] = g[i % D] * n[i] + c->beta[i % D];
    const size_t bad = prop_count_unequal(y, n, N * D, buf, len);
    free(y);
    free(n);
    return bad;
}

Test(layernorm_invariance, affine_is_elementwise_after_normalisation)
{
    gsl_rng *r = test_rng(402);
    for (size_t t = 0; t < 2 * N_WIDTHS; t++) {
        ln_case c;
        ln_case_random(&c, r, widths[t % N_WIDTHS], t);
        char buf[400];
        cr_assert_eq(count_affine_mismatch(&c, c.gamma, buf, sizeof buf), 0,
                     "LN_{g,b}(x) != g * LN_{1,0}(x) + b (D=%zu eps=%g): %s", c.D, c.eps, buf);
        if (c.D >= 2) { /* negative control: g applied in reverse order */
            double *rev = prop_calloc(c.D, sizeof(double));
            for (size_t d = 0; d < c.D; d++)
                rev[d] = c.gamma[c.D - 1 - d];
            cr_assert_gt(count_affine_mismatch(&c, rev, NULL, 0), 0,
                         "negative control: reversed gamma matched (D=%zu)", c.D);
            free(rev);
        }
        ln_case_free(&c);
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------ */

/* LN(x + s) against LN(x) for a shift vector s (the property: s = c 1).
 * x' = fl(x + s) is within gamma_1 |x'| of the exact x + s: an input error
 * for fb_layernorm.  Returns the violations. */
static size_t check_shift(test_worst *w, const ln_case *c, const double *shift, const char *what)
{
    const size_t N = c->N, D = c->D;
    double *xs = prop_calloc(N * D, sizeof(double)), *exs = prop_calloc(N * D, sizeof(double));
    double *y0 = prop_calloc(N * D, sizeof(double)), *e0 = prop_calloc(N * D, sizeof(double));
    double *y1 = prop_calloc(N * D, sizeof(double)), *e1 = prop_calloc(N * D, sizeof(double));
    for (size_t i = 0; i < N * D; i++) {
        xs[i] = c->x[i] + shift[i % D];
        exs[i] = test_gamma(1) * fabs(xs[i]);
    }
    fb_layernorm(y0, e0, c->x, NULL, c->gamma, c->beta, N, D, c->eps);
    fb_layernorm(y1, e1, xs, exs, c->gamma, c->beta, N, D, c->eps);
    size_t bad = 0;
    for (size_t i = 0; i < N * D; i++)
        bad += !fb_within(w, y1[i], e1[i], y0[i], e0[i], "D=%zu eps=%g %s: element %zu", D,
                          c->eps, what, i);
    free(xs);
    free(exs);
    free(y0);
    free(e0);
    free(y1);
    free(e1);
    return bad;
}

Test(layernorm_invariance, shift_by_a_constant_vector_changes_nothing)
{
    gsl_rng *r = test_rng(403);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 4 * N_WIDTHS; t++) {
        ln_case c;
        ln_case_random(&c, r, widths[t % N_WIDTHS], t);
        const size_t D = c.D;
        double *s = prop_calloc(D, sizeof(double));
        const double cst = (gsl_rng_uniform(r) - 0.5) * (t % 2 ? 2.385 : 4770.0);
        for (size_t d = 0; d < D; d++)
            s[d] = cst;
        bad += check_shift(&w, &c, s, "x + c 1");

        /* A bias b before LN acts only through b - mean(b): LN(x + b) against
         * LN(x + fl(b - m)) with m = mean(b) as computed.  b' = fl(b - m) is
         * within gamma_1 |b'| of b - m; x + b' adds its rounding; both are
         * input errors of the second evaluation (one gamma_1 each, so the
         * shift helper's gamma_1 |x + b'| is complemented below). */
        double *bias = prop_calloc(D, sizeof(double)), *bc = prop_calloc(D, sizeof(double));
        test_fill_gaussian(bias, D, 37.5, 1.9, r);
        double m = 0.0;
        for (size_t d = 0; d < D; d++)
            m += bias[d];
        m /= (double)D;
        for (size_t d = 0; d < D; d++)
            bc[d] = bias[d] - m;
        {
            const size_t N = c.N;
            double *x1 = prop_calloc(N * D, sizeof(double)), *e1 = prop_calloc(N * D, sizeof(double));
            double *x2 = prop_calloc(N * D, sizeof(double)), *e2 = prop_calloc(N * D, sizeof(double));
            double *y1 = prop_calloc(N * D, sizeof(double)), *f1 = prop_calloc(N * D, sizeof(double));
            double *y2 = prop_calloc(N * D, sizeof(double)), *f2 = prop_calloc(N * D, sizeof(double));
            for (size_t i = 0; i < N * D; i++) {
                x1[i] = c.x[i] + bias[i % D];
                e1[i] = test_gamma(1) * fabs(x1[i]);
                x2[i] = c.x[i] + bc[i % D];
                e2[i] = test_gamma(1) * fabs(x2[i]) + test_gamma(1) * fabs(bc[i % D]);
            }
            /* exact inputs x + b and x + b - m 1: LN of both is equal */
            fb_layernorm(y1, f1, x1, e1, c.gamma, c.beta, N, D, c.eps);
            fb_layernorm(y2, f2, x2, e2, c.gamma, c.beta, N, D, c.eps);
            for (size_t i = 0; i < N * D; i++)
                bad += !fb_within(&w, y2[i], f2[i], y1[i], f1[i], "D=%zu eps=%g b - mean(b): %zu",
                                  D, c.eps, i);
            free(x1);
            free(e1);
            free(x2);
            free(e2);
            free(y1);
            free(f1);
            free(y2);
            free(f2);
        }

        if (D >= 2) {
            /* negative control: a shift of one coordinate only, by more than
             * three times the largest spread of a row (it reorders the
             * values, so LN must change even for D = 2, where LN is close to
             * a sign function) */
            double spread = 0.0;
            for (size_t n = 0; n < c.N; n++) {
                double lo = INFINITY, hi = -INFINITY;
                for (size_t d = 0; d < D; d++) {
                    lo = fmin(lo, c.x[n * D + d]);
                    hi = fmax(hi, c.x[n * D + d]);
                }
                spread = fmax(spread, hi - lo);
            }
            double *s1 = prop_calloc(D, sizeof(double));
            s1[t % D] = 3.0 * spread + 1.0;
            test_worst wc;
            test_worst_init(&wc);
            cr_assert_gt(check_shift(&wc, &c, s1, "control"), 0,
                         "negative control: shifting one coordinate left LN unchanged (D=%zu)", D);
            free(s1);
        }
        free(s);
        free(bias);
        free(bc);
        ln_case_free(&c);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu outputs changed under a constant shift: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* A Post-LN layer (N = 1, no final norm): replacing the out_proj and linear2
 * biases b by b - c 1 leaves the output unchanged, since each feeds a
 * LayerNorm directly.  c = the biases' mean rounded to a multiple of 2^-40,
 * the biases rounded to multiples of 2^-40 first, so b - c 1 is exact and
 * the exact layers are equal; tolerance: fb_encoder's bounds of both runs.
 * Negative control: the same change in a Pre-LN layer (the residual stream
 * carries the mean) must be flagged. */
static void round_to_grid(double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = ldexp(nearbyint(ldexp(b[i], 40)), -40);
}

static double grid_mean(const double *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m += b[i];
    return ldexp(nearbyint(ldexp(m / (double)n, 40)), -40);
}

static void remove_bias_means(prop_case *c, void *arg)
{
    (void)arg;
    const size_t D = c->cfg.d_model;
    refenc_layer_params *lp = &c->p.layers[0];
    const double m_o = grid_mean(lp->out_proj_bias, D), m_2 = grid_mean(lp->linear2_bias, D);
    for (size_t d = 0; d < D; d++) {
        lp->out_proj_bias[d] -= m_o; /* exact: multiples of 2^-40 below 2^12 */
        lp->linear2_bias[d] -= m_2;
    }
}

static size_t check_bias_mean(test_worst *w, prop_case *c)
{
    round_to_grid(c->p.layers[0].out_proj_bias, c->cfg.d_model);
    round_to_grid(c->p.layers[0].linear2_bias, c->cfg.d_model);
    return fb_outputs_changed_by(w, c, remove_bias_means, NULL);
}

Test(layernorm_invariance, post_ln_layer_sees_biases_only_through_their_deviation_from_mean)
{
    gsl_rng *r = test_rng(404);
    prop_opts o;
    prop_opts_default(&o);
    o.max_layers = 1;
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 12; t++) {
        prop_case c;
        o.norm = REFENC_NORM_POST;
        prop_case_random(&c, r, t, &o);
        /* make the biases' means matter: shift them away from 0 */
        for (size_t d = 0; d < c.cfg.d_model; d++) {
            c.p.layers[0].out_proj_bias[d] += 0.75;
            c.p.layers[0].linear2_bias[d] -= 1.25;
        }
        bad += check_bias_mean(&w, &c);
        prop_case_free(&c);

        /* negative control: a Pre-LN layer, alone (a final LayerNorm would
         * remove the mean again) */
        o.norm = REFENC_NORM_PRE;
        prop_case_random(&c, r, t, &o);
        c.cfg.final_norm = 0;
        prop_case_describe(&c);
        for (size_t d = 0; d < c.cfg.d_model; d++)
            c.p.layers[0].out_proj_bias[d] += 0.75;
        test_worst wc;
        test_worst_init(&wc);
        cr_assert_gt(check_bias_mean(&wc, &c), 0,
                     "negative control: removing the bias mean left a Pre-LN layer unchanged (%s)",
                     c.desc);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu outputs of a Post-LN layer changed with the biases' mean: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* ------------------------------------------------------------------------ */

/* LN_{a^2 eps}(a x) == LN_eps(x) bitwise for a = 2^k: every step of the
 * two-pass algorithm commutes with scaling by a power of two (no overflow or
 * underflow here): mu(ax) = a mu, dev = a dev, ss = a^2 ss, a^2 var + a^2 eps
 * = a^2 (var + eps), sqrt(4^k V) = 2^k sqrt V, and (a dev)/(a s) = dev/s. */
static size_t count_scale_mismatch(const ln_case *c, double a, double eps_scaled, char *buf,
                                   size_t len)
{
    const size_t N = c->N, D = c->D;
    double *xa = prop_calloc(N * D, sizeof(double));
    double *y0 = prop_calloc(N * D, sizeof(double)), *y1 = prop_calloc(N * D, sizeof(double));
    for (size_t i = 0; i < N * D; i++)
        xa[i] = a * c->x[i];
    refenc_layernorm_forward(y0, c->x, c->gamma, c->beta, N, D, c->eps);
    refenc_layernorm_forward(y1, xa, c->gamma, c->beta, N, D, eps_scaled);
    const size_t bad = prop_count_unequal(y1, y0, N * D, buf, len);
    free(xa);
    free(y0);
    free(y1);
    return bad;
}

/* For a not a power of two: x' = fl(a x) (gamma_1 |x'|, an input error) and
 * eps' = fl(fl(a a) eps), within gamma_2 eps' of a^2 eps.  The exact LN at
 * a x with eps' differs from the one with a^2 eps by at most
 *   |g_d| |dev'_d| |eps' - a^2 eps| / (2 V_lo^(3/2)),
 * (d/dV of 1/sqrt(V) is -1/(2 V^(3/2))), with dev' and V_lo from fb_moments
 * of x' less their bounds.  Returns the violations. */
static size_t check_scale_general(test_worst *w, const ln_case *c, double a)
{
    const size_t N = c->N, D = c->D;
    double *xa = prop_calloc(N * D, sizeof(double)), *exa = prop_calloc(N * D, sizeof(double));
    double *y0 = prop_calloc(N * D, sizeof(double)), *e0 = prop_calloc(N * D, sizeof(double));
    double *y1 = prop_calloc(N * D, sizeof(double)), *e1 = prop_calloc(N * D, sizeof(double));
    for (size_t i = 0; i < N * D; i++) {
        xa[i] = a * c->x[i];
        exa[i] = test_gamma(1) * fabs(xa[i]);
    }
    const double eps1 = a * a * c->eps;
    fb_layernorm(y0, e0, c->x, NULL, c->gamma, c->beta, N, D, c->eps);
    fb_layernorm(y1, e1, xa, exa, c->gamma, c->beta, N, D, eps1);
    size_t bad = 0;
    for (size_t n = 0; n < N; n++) {
        double mu, emu, var, evar, enorm = 0.0;
        fb_moments(xa + n * D, D, &mu, &emu, &var, &evar);
        for (size_t d = 0; d < D; d++)
            enorm += exa[n * D + d] * exa[n * D + d];
        enorm = sqrt(enorm);
        /* the exact variance of the exact a x: within evar and the input
         * errors' effect (2 sqrt(D var) |e| + |e|^2) / D */
        const double dvar = evar + enorm * (2.0 * sqrt((double)D * var) + enorm) / (double)D;
        const double vlo = fmax(0.0, var - dvar) + fmin(eps1, a * a * c->eps) * (1.0 - test_gamma(2));
        for (size_t d = 0; d < D; d++) {
            const size_t i = n * D + d;
            const double dev = fabs(xa[i] - mu) + emu + exa[i];
            const double te = vlo > 0.0 ? fabs(c->gamma[d]) * dev * test_gamma(2) * eps1 /
                                              (2.0 * vlo * sqrt(vlo))
                                        : INFINITY;
            bad += !fb_within(w, y1[i], e1[i] + te, y0[i], e0[i], "D=%zu eps=%g a=%.17g: %zu", D,
                              c->eps, a, i);
        }
    }
    free(xa);
    free(exa);
    free(y0);
    free(e0);
    free(y1);
    free(e1);
    return bad;
}

Test(layernorm_invariance, scaling_x_by_a_and_eps_by_a_squared_changes_nothing)
{
    gsl_rng *r = test_rng(405);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 4 * N_WIDTHS; t++) {
        ln_case c;
        ln_case_random(&c, r, widths[t % N_WIDTHS], t);
        const int k = (int)gsl_rng_uniform_int(r, 41) - 20;
        const double a = ldexp(1.0, k);
        char msg[400];
        cr_assert_eq(count_scale_mismatch(&c, a, ldexp(c.eps, 2 * k), msg, sizeof msg), 0,
                     "LN_{4^k eps}(2^k x) != LN_eps(x) bitwise (D=%zu eps=%g k=%d): %s", c.D, c.eps,
                     k, msg);
        const double ag = (t % 2 ? 3.7 : 0.0123) * (1.0 + gsl_rng_uniform(r));
        bad += check_scale_general(&w, &c, ag);
        /* negative control: eps not scaled, a = 2^10, on rows where eps
         * matters (the case has rows with var ~ eps when eps > 0) */
        if (c.eps > 0.0 && c.D >= 2)
            cr_assert_gt(count_scale_mismatch(&c, 1024.0, c.eps, NULL, 0), 0,
                         "negative control: LN_eps(1024 x) == LN_eps(x) (D=%zu eps=%g)", c.D, c.eps);
        ln_case_free(&c);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu outputs differ for a not a power of two: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* ------------------------------------------------------------------------ */

/* g_d = s^ = fl(sqrt(fl(var^ + eps))), b_d = mu^ (computed here): exactly,
 * n_d s + mu = x_d.  |s^ - s| <= e_s = gamma_1 s^ + (e_var + gamma_1 V^) / s^,
 * |mu^ - mu| <= e_mu, so |y^_d - x_d| <= fb_layernorm's bound (with these g,
 * b) + |n_d| e_s + e_mu, |n_d| <= (|x_d - mu^| + e_mu) / (s^ - e_s).
 * unbiased = 1 builds g from var D/(D-1): the negative control. */
static size_t check_restore(test_worst *w, const ln_case *c, int unbiased)
{
    const size_t N = c->N, D = c->D;
    double *g = prop_calloc(D, sizeof(double)), *b = prop_calloc(D, sizeof(double));
    double *y = prop_calloc(D, sizeof(double)), *e = prop_calloc(D, sizeof(double));
    size_t bad = 0;
    for (size_t n = 0; n < N; n++) {
        const double *x = c->x + n * D;
        double mu, emu, var, evar;
        fb_moments(x, D, &mu, &emu, &var, &evar);
        if (unbiased)
            var = var * (double)D / (double)(D - 1);
        const double V = var + c->eps, s = sqrt(V);
        const double es = test_gamma(1) * s + (evar + test_gamma(1) * V) / s;
        for (size_t d = 0; d < D; d++) {
            g[d] = s;
            b[d] = mu;
        }
        fb_layernorm(y, e, x, NULL, g, b, 1, D, c->eps);
        for (size_t d = 0; d < D; d++) {
            const double nd = (fabs(x[d] - mu) + emu) / (s - es);
            bad += !fb_within(w, y[d], e[d] + nd * es + emu, x[d], 0.0, "D=%zu eps=%g row %zu: %zu",
                              D, c->eps, n, d);
        }
    }
    free(g);
    free(b);
    free(y);
    free(e);
    return bad;
}

Test(layernorm_invariance, gain_sigma_and_bias_mean_give_back_the_input)
{
    gsl_rng *r = test_rng(406);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 4 * N_WIDTHS; t++) {
        ln_case c;
        ln_case_random(&c, r, widths[t % N_WIDTHS], t);
        bad += check_restore(&w, &c, 0);
        if (c.D >= 2) { /* negative control: sigma from the unbiased variance */
            test_worst wc;
            test_worst_init(&wc);
            cr_assert_gt(check_restore(&wc, &c, 1), 0,
                         "negative control: an unbiased sigma also gave back x (D=%zu)", c.D);
        }
        ln_case_free(&c);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu values not restored: %s", bad, test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* A constant row: the exact deviations are 0, so the exact output is b;
 * the computed mean may be off by rounding, which fb_layernorm bounds.
 * Negative control: one entry moved by 1e-3 |c| + 1e-3 is flagged. */
Test(layernorm_invariance, constant_row_gives_beta)
{
    gsl_rng *r = test_rng(407);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    static const double epss[] = {1e-5, 1e-3, 0.37};
    for (size_t t = 0; t < 3 * N_WIDTHS; t++) {
        const size_t D = widths[t % N_WIDTHS];
        const double eps = epss[t % 3];
        const double cst = (gsl_rng_uniform(r) - 0.5) * (t % 2 ? 4.77 : 4770.0);
        double *x = prop_calloc(D, sizeof(double)), *g = prop_calloc(D, sizeof(double));
        double *b = prop_calloc(D, sizeof(double)), *y = prop_calloc(D, sizeof(double));
        double *e = prop_calloc(D, sizeof(double));
        test_fill_gaussian(g, D, 1.0, 0.3, r);
        test_fill_gaussian(b, D, 0.0, 0.7, r);
        for (size_t d = 0; d < D; d++)
            x[d] = cst;
        fb_layernorm(y, e, x, NULL, g, b, 1, D, eps);
        for (size_t d = 0; d < D; d++)
            bad += !fb_within(&w, y[d], e[d], b[d], 0.0, "D=%zu eps=%g c=%.17g: %zu", D, eps, cst, d);
        if (D >= 2) {
            x[t % D] += 1e-3 * fabs(cst) + 1e-3;
            fb_layernorm(y, e, x, NULL, g, b, 1, D, eps);
            test_worst wc;
            test_worst_init(&wc);
            size_t ctrl = 0;
            for (size_t d = 0; d < D; d++)
                ctrl += !fb_within(&wc, y[d], e[d], b[d], 0.0, "control");
            cr_assert_gt(ctrl, 0, "negative control: a non-constant row gave beta (D=%zu)", D);
        }
        free(x);
        free(g);
        free(b);
        free(y);
        free(e);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu outputs of constant rows differ from beta: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
}

/* ------------------------------------------------------------------------ */
/* The embedding LayerNorm (BERT, RoBERTa, DistilBERT): the embedding sum
 * h = E[tok] (+ TT[type]) (+ P[pos]) enters the encoder only through
 * LN_emb(h), so a constant vector c 1 added to every row of a table (word,
 * type or position) changes nothing.  Tables rounded to multiples of 2^-30
 * and c = 0.375: every sum is exact (magnitudes below 2^22), so the shifted
 * sum is exactly h + c 1 and the exact encoders are equal; tolerance:
 * fb_encoder's bounds of both runs (the LayerNorms' two-pass sums do round
 * differently).  Negative control: the same shift without the embedding
 * LayerNorm must be flagged. */
static void round_to_grid30(double *b, size_t n)
{
    for (size_t i = 0; b != NULL && i < n; i++)
        b[i] = ldexp(nearbyint(ldexp(b[i], 30)), -30);
}

/* c 1 = 0.375 added to every row of the word, type or position table
 * (which % 3, as present) */
static void shift_a_table(prop_case *c, void *arg)
{
    const size_t which = *(const size_t *)arg, D = c->cfg.d_model;
    double *t = c->p.embedding;
    size_t rows = c->cfg.vocab_size;
    if (which % 3 == 1 && c->p.token_type_embedding != NULL)
        t = c->p.token_type_embedding, rows = c->cfg.type_vocab_size;
    else if (which % 3 == 2 && c->p.pos_embedding != NULL)
        t = c->p.pos_embedding, rows = c->cfg.max_len;
    for (size_t i = 0; i < rows * D; i++)
        t[i] += 0.375;
}

static size_t check_table_shift(test_worst *w, prop_case *c, size_t which)
{
    const refenc_config *g = &c->cfg;
    const size_t D = g->d_model;
    round_to_grid30(c->p.embedding, g->vocab_size * D);
    round_to_grid30(c->p.token_type_embedding, g->type_vocab_size * D);
    round_to_grid30(c->p.pos_embedding, g->positional == REFENC_POS_LEARNED ? g->max_len * D : 0);
    return fb_outputs_changed_by(w, c, shift_a_table, &which);
}

Test(layernorm_invariance, embedding_layernorm_removes_a_constant_shift_of_any_table)
{
    gsl_rng *r = test_rng(411);
    prop_opts o;
    prop_opts_default(&o);
    o.min_d_model = 2;
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 18; t++) {
        prop_case c;
        o.positional = t % 2 ? REFENC_POS_LEARNED : REFENC_POS_NONE;
        prop_case_random(&c, r, t, &o);
        prop_case_tokens(&c, r, t);
        c.cfg.scale_embedding = 0; /* the scale would multiply c by sqrt(D), inexactly */
        c.cfg.embedding_norm = 1;
        prop_case_redraw(&c, r);
        bad += check_table_shift(&w, &c, t);
        prop_case_free(&c);

        /* negative control: without the embedding LayerNorm (and a Pre-LN
         * stack, whose residual stream carries the shift to the output) */
        o.norm = REFENC_NORM_PRE;
        prop_case_random(&c, r, t, &o);
        prop_case_tokens(&c, r, t);
        c.cfg.scale_embedding = 0, c.cfg.embedding_norm = 0, c.cfg.final_norm = 0;
        prop_case_redraw(&c, r);
        test_worst wc;
        test_worst_init(&wc);
        cr_assert_gt(check_table_shift(&wc, &c, t), 0,
                     "negative control: a shifted table left an encoder without embedding "
                     "LayerNorm unchanged (%s)", c.desc);
        prop_case_free(&c);
        o.norm = -1;
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu outputs changed with a constant shift of an embedding table: %s",
                 bad, test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* Scaling every embedding table by a = 2^k and embedding_norm_eps by a^2
 * leaves the encoder's output unchanged bit for bit: the lookups copy, the
 * sums and the sqrt(D) scale commute with a power of two (no overflow or
 * underflow here), so the LayerNorm's input is exactly a h, and
 * LN_{a^2 eps}(a h) == LN_eps(h) bitwise (above).  Negative control: a not
 * a power of two (the sums and the LN round differently), or eps left as it
 * is (with eps = 2.5e-3 it weighs in every row), must differ. */
Test(layernorm_invariance, scaling_the_embedding_tables_by_a_power_of_two_and_eps_by_its_square)
{
    gsl_rng *r = test_rng(412);
    prop_opts o;
    prop_opts_default(&o);
    o.min_d_model = 2;
    o.positional = REFENC_POS_LEARNED;
    for (size_t t = 0; t < 12; t++) {
        prop_case c;
        prop_case_random(&c, r, t, &o);
        prop_case_tokens(&c, r, t);
        c.cfg.embedding_norm = 1, c.cfg.embedding_norm_eps = 2.5e-3;
        prop_case_redraw(&c, r);
        const refenc_config *g = &c.cfg;
        const size_t D = g->d_model, BLD = c.B * c.L * D;
        const double a = t % 2 ? 0.25 : 8.0;
        double *y0 = prop_calloc(BLD, sizeof(double)), *y1 = prop_calloc(BLD, sizeof(double));
        double *y2 = prop_calloc(BLD, sizeof(double));
        const refenc_input in = {.B = c.B, .L = c.L, .tokens = c.tokens, .token_types = c.types,
                                 .key_padding_mask = c.pad};
        prop_encoder_run(y0, NULL, &c.p, g, &in);
        double *tables[3] = {c.p.embedding, c.p.token_type_embedding, c.p.pos_embedding};
        const size_t sizes[3] = {g->vocab_size * D, g->type_vocab_size * D, g->max_len * D};
        for (size_t k = 0; k < 3; k++)
            for (size_t i = 0; tables[k] != NULL && i < sizes[k]; i++)
                tables[k][i] *= a;
        refenc_config scaled = *g;
        scaled.embedding_norm_eps = g->embedding_norm_eps * a * a;
        prop_encoder_run(y1, NULL, &c.p, &scaled, &in);
        char buf[320];
        const size_t n = prop_count_unequal(y1, y0, BLD, buf, sizeof buf);
        cr_assert_eq(n, 0, "%zu outputs differ after scaling the tables by %g and eps by %g (%s): %s",
                     n, a, a * a, c.desc, buf);
        /* negative control: eps not scaled */
        prop_encoder_run(y2, NULL, &c.p, g, &in);
        cr_assert_gt(prop_count_unequal(y2, y0, BLD, NULL, 0), 0,
                     "negative control: eps not scaled with the tables made no difference (%s)",
                     c.desc);
        free(y0), free(y1), free(y2);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
}
