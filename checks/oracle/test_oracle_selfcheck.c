/* The oracle checked against itself and against known exact results: two
 * precisions agree, exact values come out exact, GELU agrees with MPFR's
 * correctly rounded erf computed independently. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/oracle/oracle.h"
#include "../../ref/refenc.h"
#include "../common/testutil.h"
#include "../../ref/tool/random_params.h"

#define P0 REFENC_MP_PREC_DEFAULT

static void ok(int st, const refenc_mp_report *rep, const char *what)
{
    cr_assert_eq(st, REFENC_OK, "%s: status %d: %s", what, st, rep->error.message);
}

/* bitwise equality of two arrays, with the first difference in the message */
static void same(const double *a, const double *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(memcmp(&a[i], &b[i], sizeof(double)) == 0,
                  "%s[%zu]: %a (%.17g) vs %a (%.17g)", what, i, a[i], a[i], b[i], b[i]);
}

Test(oracle_selfcheck, two_precisions_give_the_same_stack)
{
    /* the certified result may not depend on the starting precision */
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 12, cfg.n_heads = 3, cfg.d_ff = 20, cfg.positional = REFENC_POS_ROPE;
    cfg.activation = REFENC_ACT_GELU_TANH;
    refenc_params p;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&p, &cfg, &err), REFENC_OK);
    gsl_rng *r = test_rng(1);
    refenc_params_init_random(&p, &cfg, r);
    const size_t B = 2, L = 5, n = B * L * cfg.d_model;
    double *x = malloc(n * sizeof *x), *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    test_fill_gaussian(x, n, 0.3, 1.7, r);
    refenc_input in = {.B = B, .L = L, .x = x};
    refenc_mp_report rep;
    ok(refenc_mp_encoder_forward(y1, &p, &cfg, &in, NULL, P0, &rep), &rep, "192 bits");
    cr_assert_eq(rep.prec, P0);
    ok(refenc_mp_encoder_forward(y2, &p, &cfg, &in, NULL, 1000, &rep), &rep, "1000 bits");
    same(y1, y2, n, "output");
    /* negative control: the check sees a one-ulp change */
    y2[3] = nextafter(y2[3], INFINITY);
    cr_assert(memcmp(&y1[3], &y2[3], sizeof(double)) != 0);
    free(x), free(y1), free(y2);
    gsl_rng_free(r);
    refenc_params_free(&p);
}

Test(oracle_selfcheck, softmax_of_equal_logits_is_one_over_n)
{
    for (size_t n = 1; n <= 13; n++) {
        double s[13], y[13];
        for (size_t i = 0; i < n; i++)
            s[i] = 2.385;
        refenc_mp_report rep;
        ok(refenc_mp_softmax_forward(y, s, 1, n, 0.37, P0, &rep), &rep, "softmax");
        for (size_t i = 0; i < n; i++) /* 1/n correctly rounded: one IEEE division */
            cr_assert(y[i] == 1.0 / (double)n, "n=%zu: %a, want %a", n, y[i], 1.0 / (double)n);
    }
}

Test(oracle_selfcheck, masked_rows_get_zero_weights_and_outputs)
{
    const size_t L = 3, Dh = 2;
    const double q[6] = {1, 2, 3, 4, 5, 6}, k[6] = {0.5, -1, 2, 0.25, 1, 1}, v[6] = {1, 2, 3, 4, 5, 6};
    const uint8_t pad[3] = {1, 1, 1}; /* every key is padding */
    refenc_attn_options opt = {.key_padding_mask = pad, .temperature = 1};
    double out[6], w[9];
    refenc_mp_report rep;
    ok(refenc_mp_attention_forward(out, w, q, k, v, &opt, 1, 1, L, Dh, P0, &rep), &rep, "attn");
    for (size_t i = 0; i < 9; i++)
        cr_assert(w[i] == 0 && !signbit(w[i]), "w[%zu] = %a", i, w[i]);
    for (size_t i = 0; i < 6; i++)
        cr_assert(out[i] == 0, "out[%zu] = %a", i, out[i]);
}

Test(oracle_selfcheck, pe_at_position_zero_is_exactly_sin0_cos0)
{
    const int64_t pos[1] = {0};
    double pe[10], x[10], y[10];
    refenc_mp_report rep;
    ok(refenc_mp_sinusoidal_table(pe, pos, 1, 10, P0, &rep), &rep, "table");
    for (size_t i = 0; i < 10; i++)
        cr_assert(pe[i] == (i % 2 ? 1.0 : 0.0), "pe[%zu] = %a", i, pe[i]);
    /* x + cos 0 is exact and often a midpoint: the oracle must know it is exact */
    for (size_t i = 0; i < 10; i++)
        x[i] = 1.0 + 0x1p-52 * (double)(2 * i + 1); /* x + 1: an odd multiple of 2^-52 */
    ok(refenc_mp_sinusoidal_forward(y, x, pos, 1, 1, 10, P0, &rep), &rep, "forward");
    cr_assert_eq(rep.prec, P0, "exact results need no escalation");
    for (size_t i = 0; i < 10; i++)
        cr_assert(y[i] == x[i] + (i % 2 ? 1.0 : 0.0), "y[%zu] = %a", i, y[i]);
}

Test(oracle_selfcheck, gelu_of_zero_is_zero)
{
    const double x[3] = {0.0, -0.0, 0x1p-1074};
    for (int act = REFENC_ACT_RELU; act <= REFENC_ACT_GELU_TANH; act++) {
        double y[3];
        refenc_mp_report rep;
        ok(refenc_mp_activation_forward(y, x, 3, (refenc_activation)act, P0, &rep), &rep, "act");
        cr_assert(y[0] == 0 && y[1] == 0, "act %d: %a %a", act, y[0], y[1]);
        /* the smallest subnormal: x Phi(x) = x/2 + ..., below half of 2^-1074 rounds to
         * even: 0 for GELU (x/2 exactly halfway is below by the x^2 term) */
        if (act != REFENC_ACT_RELU)
            cr_assert(y[2] == 0 || y[2] == 0x1p-1074, "act %d: %a", act, y[2]);
    }
}

Test(oracle_selfcheck, layernorm_of_a_symmetric_row_is_antisymmetric)
{
    /* a row symmetric about its mean m: the normalised row is exactly odd, and
     * with eps = 0 the row (m - 1, m + 1) normalises to exactly (-1, 1) */
    const size_t D = 6;
    const double m = 2.385;
    const double x[6] = {m - 1.5, m - 0.25, m - 0.125, m + 0.125, m + 0.25, m + 1.5};
    const double g[6] = {1, 1, 1, 1, 1, 1}, b[6] = {0};
    double y[6];
    refenc_mp_report rep;
    ok(refenc_mp_layernorm_forward(y, x, g, b, 1, D, 1e-5, P0, &rep), &rep, "ln");
    for (size_t d = 0; d < D; d++)
        cr_assert(y[d] == -y[D - 1 - d], "y[%zu] = %a, y[%zu] = %a", d, y[d], D - 1 - d, y[D - 1 - d]);
    const double x2[2] = {m - 1, m + 1};
    ok(refenc_mp_layernorm_forward(y, x2, g, b, 1, 2, 0.0, P0, &rep), &rep, "ln eps 0");
    cr_assert(y[0] == -1.0 && y[1] == 1.0, "%a %a", y[0], y[1]);
}

/* x Phi(x) from mpfr_erf at 1000 bits, an independent formulation:
 * Phi(x) = (1 + erf(x / sqrt 2)) / 2 (cancellation for x < 0 is harmless at
 * 1000 bits for |x| <= 10). */
static double gelu_from_erf(double xd)
{
    mpfr_t x, t, s;
    mpfr_inits2(1000, x, t, s, (mpfr_ptr)0);
    cr_assert_eq(mpfr_set_d(x, xd, MPFR_RNDN), 0);
    mpfr_sqrt_ui(s, 2, MPFR_RNDN);
    mpfr_div(t, x, s, MPFR_RNDN);
    mpfr_erf(t, t, MPFR_RNDN);
    mpfr_add_ui(t, t, 1, MPFR_RNDN);
    mpfr_mul(t, t, x, MPFR_RNDN);
    mpfr_div_2ui(t, t, 1, MPFR_RNDN);
    const double r = mpfr_get_d(t, MPFR_RNDN);
    mpfr_clears(x, t, s, (mpfr_ptr)0);
    return r;
}

Test(oracle_selfcheck, gelu_agrees_with_mpfr_erf)
{
    enum { N = 400 };
    double x[N], y[N];
    gsl_rng *r = test_rng(2);
    test_fill_gaussian(x, N - 4, 0.0, 3.0, r);
    x[N - 4] = -9.5, x[N - 3] = 7.25, x[N - 2] = 1e-300, x[N - 1] = -0x1.6a09e667f3bcdp+0;
    refenc_mp_report rep;
    ok(refenc_mp_activation_forward(y, x, N, REFENC_ACT_GELU, P0, &rep), &rep, "gelu");
    for (size_t i = 0; i < N; i++) {
        const double want = gelu_from_erf(x[i]);
        cr_assert(y[i] == want, "x = %a: oracle %a, erf formulation %a", x[i], y[i], want);
    }
    gsl_rng_free(r);
}

Test(oracle_selfcheck, gelu_tanh_agrees_with_an_independent_formulation)
{
    /* 0.5 x (1 + tanh z) = x / (1 + exp(-2z)), in MPFR at 1000 bits */
    enum { N = 200 };
    double x[N], y[N];
    gsl_rng *r = test_rng(3);
    test_fill_gaussian(x, N, 0.0, 3.0, r);
    refenc_mp_report rep;
    ok(refenc_mp_activation_forward(y, x, N, REFENC_ACT_GELU_TANH, P0, &rep), &rep, "gelu_tanh");
    mpfr_t xm, z, c, k;
    mpfr_inits2(1000, xm, z, c, k, (mpfr_ptr)0);
    mpfr_const_pi(k, MPFR_RNDN);
    mpfr_ui_div(k, 2, k, MPFR_RNDN);
    mpfr_sqrt(k, k, MPFR_RNDN);
    mpfr_set_str(c, "0.044715", 10, MPFR_RNDN);
    for (size_t i = 0; i < N; i++) {
        mpfr_set_d(xm, x[i], MPFR_RNDN);
        mpfr_pow_ui(z, xm, 3, MPFR_RNDN);
        mpfr_mul(z, z, c, MPFR_RNDN);
        mpfr_add(z, z, xm, MPFR_RNDN);
        mpfr_mul(z, z, k, MPFR_RNDN);
        mpfr_mul_si(z, z, -2, MPFR_RNDN);
        mpfr_exp(z, z, MPFR_RNDN);
        mpfr_add_ui(z, z, 1, MPFR_RNDN);
        mpfr_div(z, xm, z, MPFR_RNDN);
        const double want = mpfr_get_d(z, MPFR_RNDN);
        cr_assert(y[i] == want, "x = %a: oracle %a, exp formulation %a", x[i], y[i], want);
    }
    mpfr_clears(xm, z, c, k, (mpfr_ptr)0);
    gsl_rng_free(r);
}

Test(oracle_selfcheck, the_flags_and_default_precision_are_left_alone)
{
    const mpfr_prec_t before = mpfr_get_default_prec();
    mpfr_flags_clear(MPFR_FLAGS_ALL);
    mpfr_flags_set(MPFR_FLAGS_ERANGE);
    const double x[2] = {0.1, 0.2};
    double y[2];
    refenc_mp_report rep;
    ok(refenc_mp_activation_forward(y, x, 2, REFENC_ACT_GELU, P0, &rep), &rep, "gelu");
    cr_assert_eq(mpfr_get_default_prec(), before);
    cr_assert_eq(mpfr_flags_save(), MPFR_FLAGS_ERANGE, "the caller's flags were changed");
}
