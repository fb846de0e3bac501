/* Softmax and temperature invariances (softmax.h, attention.h, layer.h).
 *
 * Properties:
 *  - rows sum to 1;
 *  - softmax(s + c) = softmax(s), with logits in the hundreds and c = +-800
 *    (exp overflows unless the maximum is subtracted);
 *  - in a Pre-LN attention block, multiplying LN1's gain and bias and the
 *    q/k/v projection biases by c, the temperature by c^2 and W_o by 1/c
 *    leaves the attention weights and the output unchanged: bitwise for c a
 *    power of two, within the derived bound for c = 3;
 *  - dy_i/ds_i = y_i (1 - y_i), against a central difference;
 *  - as the logits are scaled up the largest weight tends to 1 and that
 *    derivative to 0.
 * Tolerances: fb_softmax / fb_encoder bounds (fwdbound.h) and the
 * derivations below; docs/properties.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "../common/testutil.h"

#define U TEST_U

/* A random row of n logits: moderate, wide, or in the hundreds; some masked. */
static void random_logits(double *s, size_t n, gsl_rng *r, size_t t, int allow_mask)
{
    static const double sigmas[] = {0.1, 3.0, 30.0};
    const double sigma = sigmas[t % 3];
    const double offset = t % 4 == 3 ? 300.0 + 600.0 * gsl_rng_uniform(r) : 0.0;
    test_fill_gaussian(s, n, offset, sigma, r);
    if (allow_mask && n > 1)
        for (size_t j = 0; j < n; j++)
            if (gsl_rng_uniform(r) < 0.2 && j != t % n)
                s[j] = -INFINITY;
}

/* |fl(sum y^) - 1| <= gamma_2n: the computed sum S^ of the exponentials is
 * within gamma_{n-1} of their sum, so sum_j e^_j / S^ lies in
 * [1/(1+gamma_{n-1}), 1/(1-gamma_{n-1})]; each division adds u; the test's own
 * sum gamma_{n-1}: at most 2n - 1 factors (1 +- u) in all.  Subnormal
 * exponentials add at most n 2^-1074. */
static size_t check_sums(test_worst *w, const double *y, size_t R, size_t n)
{
    size_t bad = 0;
    for (size_t r = 0; r < R; r++) {
        double sum = 0.0;
        for (size_t j = 0; j < n; j++)
            sum += y[r * n + j];
        bad += !fb_within(w, sum, test_gamma(2.0 * (double)n) + (double)n * 0x1p-1074, 1.0, 0.0,
                          "n=%zu row %zu", n, r);
    }
    return bad;
}

Test(softmax_temperature, rows_sum_to_one)
{
    gsl_rng *r = test_rng(501);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 300; t++) {
        const size_t n = 1 + gsl_rng_uniform_int(r, t % 2 ? 8 : 200);
        const double tau = 0.25 + 3.75 * gsl_rng_uniform(r);
        double *s = prop_calloc(n, sizeof(double)), *y = prop_calloc(n, sizeof(double));
        random_logits(s, n, r, t, 1);
        refenc_softmax_forward(y, s, 1, n, tau);
        bad += check_sums(&w, y, 1, n);
        /* negative control: a fully masked row sums to 0 (the documented
         * policy), and the same comparison flags it */
        for (size_t j = 0; j < n; j++)
            s[j] = -INFINITY;
        refenc_softmax_forward(y, s, 1, n, tau);
        test_worst wc;
        test_worst_init(&wc);
        cr_assert_eq(check_sums(&wc, y, 1, n), 1, "negative control: a masked row summed to 1");
        free(s);
        free(y);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu rows do not sum to 1: %s", bad, test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* softmax((s + shift)/tau) against softmax(s/tau), shift = c 1 (the property)
 * or c e_j (the control).  s' = fl(s + shift) is within gamma_1 |s'| of the
 * exact s + shift: input errors for fb_softmax.  Returns the violations. */
static size_t check_shift(test_worst *w, const double *s, size_t n, double tau, double c, long only)
{
    double *s1 = prop_calloc(n, sizeof(double)), *e1 = prop_calloc(n, sizeof(double));
    double *y0 = prop_calloc(n, sizeof(double)), *f0 = prop_calloc(n, sizeof(double));
    double *y1 = prop_calloc(n, sizeof(double)), *f1 = prop_calloc(n, sizeof(double));
    for (size_t j = 0; j < n; j++) {
        s1[j] = (only < 0 || (size_t)only == j) ? s[j] + c : s[j];
        e1[j] = test_gamma(1) * fabs(s1[j]);
    }
    fb_softmax(y0, f0, s, NULL, 1, n, tau);
    fb_softmax(y1, f1, s1, e1, 1, n, tau);
    size_t bad = 0;
    for (size_t j = 0; j < n; j++)
        bad += !fb_within(w, y1[j], f1[j], y0[j], f0[j], "n=%zu tau=%g c=%g: %zu", n, tau, c, j);
    free(s1);
    free(e1);
    free(y0);
    free(f0);
    free(y1);
    free(f1);
    return bad;
}

Test(softmax_temperature, shift_by_a_constant_leaves_weights_unchanged)
{
    gsl_rng *r = test_rng(502);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 300; t++) {
        const size_t n = 2 + gsl_rng_uniform_int(r, t % 2 ? 8 : 100);
        const double tau = t % 5 == 0 ? 1.0 : 0.5 + 1.5 * gsl_rng_uniform(r);
        static const double cs[] = {800.0, -800.0};
        const double c = t % 3 == 2 ? (gsl_rng_uniform(r) - 0.5) * 2000.0 : cs[t % 2];
        double *s = prop_calloc(n, sizeof(double));
        /* logits in the hundreds on one case in four (random_logits), and
         * 800 added: exp(s/tau) overflows without the max subtraction */
        random_logits(s, n, r, t, 1);
        bad += check_shift(&w, s, n, tau, c, -1);
        /* negative control: 3 added to one logit of an unmasked row (a row
         * with a single visible entry is 1 there whatever its logit) */
        test_worst wc;
        test_worst_init(&wc);
        random_logits(s, n, r, t, 0);
        cr_assert_gt(check_shift(&wc, s, n, tau, 3.0, (long)(t % n)), 0,
                     "negative control: adding 3 to one logit left softmax unchanged (n=%zu)", n);
        free(s);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu weights changed under softmax(s + c): %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* ------------------------------------------------------------------------ */

/* x rounded to `bits` significant bits (so that a product by a small odd
 * integer is exact). */
static void round_bits(double *x, size_t n, int bits)
{
    for (size_t i = 0; i < n; i++) {
        int e;
        const double m = frexp(x[i], &e);
        x[i] = ldexp(nearbyint(ldexp(m, bits)), e - bits);
    }
}

/* What the rescaling touches. */
enum { SCALE_ALL = 0, SCALE_NOT_WO = 1, SCALE_TAU_BY_C = 2 };

/* Applies the rescaling by c to every layer: LN1 gain and bias and the
 * q/k/v biases times c, W_o divided by c (unless SCALE_NOT_WO), tau times c^2
 * (times c with SCALE_TAU_BY_C).  For c = 3 the caller has made every one of
 * these products exact. */
static void rescale(refenc_params *p, refenc_config *cfg, double c, int mode)
{
    const size_t D = cfg->d_model;
    for (size_t i = 0; i < cfg->n_layers; i++) {
        refenc_layer_params *lp = &p->layers[i];
        for (size_t d = 0; d < D; d++) {
            lp->norm1_weight[d] *= c;
            lp->norm1_bias[d] *= c;
        }
        for (size_t d = 0; d < 3 * D; d++)
            lp->in_proj_bias[d] *= c;
        if (mode != SCALE_NOT_WO)
            for (size_t d = 0; d < D * D; d++)
                lp->out_proj_weight[d] /= c;
    }
    cfg->temperature *= mode == SCALE_TAU_BY_C ? c : c * c;
}

/* For c = 3: gains, biases and tau on 49 bits, so 3x and 9x are exact; W_o
 * = 3 w with w on 50 bits, so W_o / 3 = w exactly.  The exact block is then
 * exactly invariant and only the rounding of the two runs differs. */
static void make_exact_for_three(refenc_params *p, refenc_config *cfg)
{
    const size_t D = cfg->d_model;
    for (size_t i = 0; i < cfg->n_layers; i++) {
        refenc_layer_params *lp = &p->layers[i];
        round_bits(lp->norm1_weight, D, 49);
        round_bits(lp->norm1_bias, D, 49);
        round_bits(lp->in_proj_bias, 3 * D, 49);
        round_bits(lp->out_proj_weight, D * D, 50);
        for (size_t d = 0; d < D * D; d++)
            lp->out_proj_weight[d] *= 3.0;
    }
    round_bits(&cfg->temperature, 1, 49);
}

/* Runs the case before and after the rescaling; compares outputs and every
 * layer's weights: bitwise (bitwise = 1) or within both runs' bounds.
 * Returns the number of differing values. */
static size_t check_rescaling(test_worst *w, prop_case *c, double scale, int mode, int bitwise)
{
    const size_t BLD = c->B * c->L * c->cfg.d_model, D = c->cfg.d_model;
    double *y0 = prop_calloc(BLD, sizeof(double)), *y1 = prop_calloc(BLD, sizeof(double));
    const refenc_input in = {.B = c->B, .L = c->L, .x = c->x, .key_padding_mask = c->pad};
    prop_capture k0 = {0}, k1 = {0};
    fb_norms n0, n1;
    fb_result f0, f1;
    refenc_config cfg1 = c->cfg;
    fb_norms_compute(&n0, &c->p, &c->cfg);
    fb_encoder_checked(&f0, y0, &k0, &c->p, &c->cfg, &in, &n0, c->desc);
    rescale(&c->p, &cfg1, scale, mode);
    fb_norms_compute(&n1, &c->p, &cfg1);
    fb_encoder_checked(&f1, y1, &k1, &c->p, &cfg1, &in, &n1, c->desc);
    size_t bad = 0;
    /* bitwise: w records the first difference (tolerance 0) */
    for (size_t i = 0; i < BLD; i++)
        bad += bitwise ? !test_worst_check(w, y1[i], y0[i], 0.0, "%s c=%g: output %zu", c->desc,
                                           scale, i)
                       : !fb_within(w, y1[i], f1.Ey[i / D], y0[i], f0.Ey[i / D],
                                    "%s c=%g: output %zu", c->desc, scale, i);
    for (size_t n = 0; n < f0.N; n++)
        for (size_t i = 0; i < f0.BHLL; i++)
            bad += bitwise ? !test_worst_check(w, k1.weights[n][i], k0.weights[n][i], 0.0,
                                               "%s c=%g: layer %zu weight %zu", c->desc, scale, n, i)
                           : !fb_within(w, k1.weights[n][i], f1.ew[n][i], k0.weights[n][i],
                                        f0.ew[n][i], "%s c=%g: layer %zu weight %zu", c->desc,
                                        scale, n, i);
    prop_capture_free(&k0);
    prop_capture_free(&k1);
    fb_result_free(&f0);
    fb_result_free(&f1);
    fb_norms_free(&n0);
    fb_norms_free(&n1);
    free(y0);
    free(y1);
    return bad;
}

Test(softmax_temperature, pre_ln_block_is_invariant_under_gain_and_temperature_rescaling)
{
    static const refenc_positional schemes[] = {REFENC_POS_NONE, REFENC_POS_SINUSOIDAL,
                                                REFENC_POS_LEARNED, REFENC_POS_ROPE, REFENC_POS_ALIBI};
    static const double pow2[] = {2.0, 0.5, 8.0, 0.125};
    gsl_rng *r = test_rng(503);
    prop_opts o;
    prop_opts_default(&o);
    o.norm = REFENC_NORM_PRE;
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 20; t++) {
        prop_case c;
        o.positional = schemes[t % 5];
        o.causal = t % 7 == 3;
        prop_case_random(&c, r, t, &o);
        const double cp = pow2[t % 4];
        test_worst wb;
        test_worst_init(&wb);
        cr_assert_eq(check_rescaling(&wb, &c, cp, SCALE_ALL, 1), 0,
                     "rescaling by c = %g (a power of two) changed the weights or the output: %s",
                     cp, test_worst_describe(&wb, buf, sizeof buf));
        prop_case_free(&c);

        prop_case_random(&c, r, t, &o);
        make_exact_for_three(&c.p, &c.cfg);
        prop_case_describe(&c);
        bad += check_rescaling(&w, &c, 3.0, SCALE_ALL, 0);
        prop_case_free(&c);
    }
    cr_assert_eq(bad, 0, "%zu weights or outputs changed under the rescaling by c = 3: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));

    /* Negative controls: W_o not divided by c (the output changes), or tau
     * multiplied by c instead of c^2 (the weights change); the same bitwise
     * comparison (c = 2) and the same bounded one (c = 3) must flag them. */
    o.positional = REFENC_POS_NONE;
    o.causal = 0;
    o.padding = 0;
    o.min_len = 2;
    o.min_d_model = 4; /* the final LayerNorm over 2 features is a sign function up to eps */
    for (size_t t = 0; t < 6; t++) {
        const int mode = t % 2 ? SCALE_TAU_BY_C : SCALE_NOT_WO;
        prop_case c;
        test_worst wc;
        test_worst_init(&wc);
        prop_case_random(&c, r, t, &o);
        cr_assert_gt(check_rescaling(&wc, &c, 2.0, mode, 1), 0,
                     "negative control (%s, c = 2): %s unchanged",
                     mode == SCALE_NOT_WO ? "W_o not rescaled" : "tau times c", c.desc);
        prop_case_free(&c);
        prop_case_random(&c, r, t, &o);
        make_exact_for_three(&c.p, &c.cfg);
        cr_assert_gt(check_rescaling(&wc, &c, 3.0, mode, 0), 0,
                     "negative control (%s, c = 3): %s unchanged within the bounds",
                     mode == SCALE_NOT_WO ? "W_o not rescaled" : "tau times c", c.desc);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------ */

/* Central difference of y_i in s_j with step h = 2^-16 on logits that are
 * multiples of h (so s_j +- h is exact), against y_i (1 - y_i).
 * As a function of s_i alone, y_i is a logistic function: f' = y(1-y),
 * f''' = y(1-y)(1 - 6y + 6y^2), |f'''| <= 1/8, so the central difference
 * is within h^2/6 max|f'''| = h^2/48 of f'.  Rounding: each evaluation within
 * its fb_softmax bound e+-, so (e+ + e-)/(2h); the subtraction adds
 * gamma_1 |FD^| (the division by 2h is exact).  The analytic side
 * a^ = fl(y^ fl(1 - y^)): |a^ - y(1-y)| <= e (|1 - 2 y^| + e) + gamma_2 |a^|.
 * j != i is the negative control (the derivative is then -y_i y_j).
 * Returns the violations. */
static size_t check_derivative(test_worst *w, const double *s, size_t n, size_t i, size_t j)
{
    const double h = 0x1p-16;
    double *sp = prop_calloc(n, sizeof(double)), *y = prop_calloc(n, sizeof(double));
    double *e = prop_calloc(n, sizeof(double));
    memcpy(sp, s, n * sizeof(double));
    fb_softmax(y, e, s, NULL, 1, n, 1.0);
    const double yi = y[i], ei = e[i];
    sp[j] = s[j] + h;
    fb_softmax(y, e, sp, NULL, 1, n, 1.0);
    const double yp = y[i], ep = e[i];
    sp[j] = s[j] - h;
    fb_softmax(y, e, sp, NULL, 1, n, 1.0);
    const double ym = y[i], em = e[i];
    const double fd = (yp - ym) / (2.0 * h);
    const double tol_fd = h * h / 48.0 + (ep + em) / (2.0 * h) + test_gamma(1) * fabs(fd);
    const double a = yi * (1.0 - yi);
    const double tol_a = ei * (fabs(1.0 - 2.0 * yi) + ei) + test_gamma(2) * fabs(a);
    free(sp);
    free(y);
    free(e);
    return !fb_within(w, fd, tol_fd, a, tol_a, "n=%zu i=%zu j=%zu", n, i, j);
}

Test(softmax_temperature, derivative_matches_central_difference)
{
    gsl_rng *r = test_rng(504);
    static const double sigmas[] = {0.5, 2.0, 5.0};
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 60; t++) {
        const size_t n = 2 + gsl_rng_uniform_int(r, 40);
        double *s = prop_calloc(n, sizeof(double));
        test_fill_gaussian(s, n, 0.0, sigmas[t % 3], r);
        for (size_t k = 0; k < n; k++)
            s[k] = ldexp(nearbyint(ldexp(s[k], 16)), -16);
        for (size_t i = 0; i < n; i++)
            bad += check_derivative(&w, s, n, i, i);
        /* negative control: the derivative in another logit s_j is -y_i y_j,
         * not y_i (1 - y_i); flagged for the largest weight (y_i (1 - y_i)
         * + y_i y_j >= y_i y_j > 0 is large there) */
        size_t imax = 0;
        for (size_t k = 1; k < n; k++)
            if (s[k] > s[imax])
                imax = k;
        test_worst wc;
        test_worst_init(&wc);
        cr_assert(check_derivative(&wc, s, n, imax, (imax + 1) % n),
                  "negative control: dy_i/ds_j matched y_i (1 - y_i) (n=%zu)", n);
        free(s);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu derivatives differ from y (1 - y): %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* ------------------------------------------------------------------------ */

/* The largest weight of softmax(lambda s), lambda = 2^k (tau = 1/lambda, so
 * s / tau = lambda s exactly): in exact arithmetic it is nondecreasing in
 * lambda (d/dlambda w_max = w_max (s_max - sum_j w_j s_j) >= 0), so the
 * computed values may decrease only within their bounds; its derivative
 * w (1 - w) then decreases once w >= 1/2; and when lambda (s_max - s_j) > 745
 * for every other j, exp underflows to 0: w_max == 1 and w (1 - w) == 0
 * exactly.  A row with a tie at the maximum tends to 1/2 instead (the
 * negative control).  Returns 1 if the row behaves as the property says. */
static int saturates(test_worst *w, const double *s, size_t n, size_t imax)
{
    double *y = prop_calloc(n, sizeof(double)), *e = prop_calloc(n, sizeof(double));
    double prev = 0.0, prev_e = 0.0;
    int ok = 1;
    for (int k = 0; k <= 14; k++) {
        fb_softmax(y, e, s, NULL, 1, n, ldexp(1.0, -k));
        if (k > 0)
            ok &= y[imax] >= prev - (e[imax] + prev_e) * FB_SLACK;
        prev = y[imax];
        prev_e = e[imax];
    }
    /* lambda = 2^14 = 16384 and gaps >= 0.05: exponents below -819 */
    int limit = y[imax] == 1.0 && y[imax] * (1.0 - y[imax]) == 0.0;
    for (size_t j = 0; j < n; j++)
        limit &= j == imax || y[j] == 0.0;
    test_worst_check(w, y[imax], 1.0, 0.0, "n=%zu lambda=2^14: largest weight", n);
    free(y);
    free(e);
    return ok && limit;
}

Test(softmax_temperature, largest_weight_tends_to_one_as_logits_grow)
{
    gsl_rng *r = test_rng(505);
    char buf[640];
    for (size_t t = 0; t < 100; t++) {
        const size_t n = 2 + gsl_rng_uniform_int(r, 30);
        double *s = prop_calloc(n, sizeof(double));
        test_fill_gaussian(s, n, 0.0, 1.0, r);
        size_t imax = 0;
        for (size_t k = 1; k < n; k++)
            if (s[k] > s[imax])
                imax = k;
        for (size_t k = 0; k < n; k++) /* a gap of at least 0.05 below the maximum */
            if (k != imax && s[k] > s[imax] - 0.05)
                s[k] = s[imax] - 0.05 - 0.1 * gsl_rng_uniform(r);
        test_worst w;
        test_worst_init(&w);
        cr_assert(saturates(&w, s, n, imax),
                  "the largest weight did not increase to 1 (or its derivative to 0): %s",
                  test_worst_describe(&w, buf, sizeof buf));
        /* negative control: a tie at the maximum */
        s[(imax + 1) % n] = s[imax];
        test_worst_init(&w);
        cr_assert(!saturates(&w, s, n, imax), "negative control: a tied row saturated to 1 (n=%zu)", n);
        free(s);
    }
    gsl_rng_free(r);
}
