/* Ziv's loop: the oracle raises the precision when two precisions do not
 * certify the rounding, and reports the precision it needed. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/oracle/internal.h"
#include "../../ref/oracle/oracle.h"
#include "../../ref/refenc.h"
#include "../common/testutil.h"
#include "../../ref/tool/random_params.h"

#define P0 REFENC_MP_PREC_DEFAULT

Test(oracle_ziv, the_precision_sequence_doubles_its_step)
{
    cr_assert_eq(refenc_mp_next_prec(192, 0), 256);
    cr_assert_eq(refenc_mp_next_prec(256, 1), 384);
    cr_assert_eq(refenc_mp_next_prec(384, 2), 640);
}

Test(oracle_ziv, a_dot_product_just_above_a_midpoint_escalates)
{
    /* 1 + 2^-53 + 2^-300: the exact value lies 2^-300 above the midpoint
     * between 1 and 1 + 2^-52, so it rounds up; at 192 bits the tail is lost
     * and the value is the midpoint itself, which rounds to even (1). */
    const double x[3] = {1.0, 0x1p-53, 0x1p-300}, W[3] = {1.0, 1.0, 1.0};
    double y;
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_linear_forward(&y, x, W, NULL, 1, 3, 1, P0, &rep), REFENC_OK, "%s",
                 rep.error.message);
    cr_assert(y == 1.0 + 0x1p-52, "got %a", y);
    cr_assert_gt(rep.prec, P0, "no escalation: certified at %ld bits", (long)rep.prec);
    cr_assert_geq(rep.evaluations, 3);
    /* the first precisions' "not certified" is not left in a successful report */
    cr_expect(rep.error.status == REFENC_OK && rep.error.message[0] == '\0', "status %d: %s", rep.error.status,
              rep.error.message);
    /* negative control: 2^-300 below the midpoint rounds down, also escalating */
    const double x2[3] = {1.0, 0x1p-53, -0x1p-300};
    cr_assert_eq(refenc_mp_linear_forward(&y, x2, W, NULL, 1, 3, 1, P0, &rep), REFENC_OK);
    cr_assert(y == 1.0, "got %a", y);
    cr_assert_gt(rep.prec, P0);
    /* and an ordinary dot product needs no escalation */
    const double x3[3] = {1.0, 0.3, -2.385};
    cr_assert_eq(refenc_mp_linear_forward(&y, x3, W, NULL, 1, 3, 1, P0, &rep), REFENC_OK);
    cr_assert_eq(rep.prec, P0);
    cr_assert_eq(rep.evaluations, 2);
}

Test(oracle_ziv, ffn_hidden_and_output_steps_just_above_a_midpoint_escalate)
{
    /* The FFN block, ReLU, D 1, F 3: x = 1 and W1 = (1, 2^-53, 2^-300) give
     * the hidden row itself; W2 = (1, 1, 1) sums it, 1 + 2^-53 + 2^-300 as
     * in the dot product above: the output step is not certified at the
     * first precisions and must be evaluated again, then emitted rounded up. */
    const double x[1] = {1.0}, W1[3] = {1.0, 0x1p-53, 0x1p-300}, b1[3] = {0, 0, 0}, W2[3] = {1.0, 1.0, 1.0},
                 b2[1] = {0};
    double y[1] = {NAN}, hidden[3] = {NAN, NAN, NAN};
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_ffn_forward(y, hidden, x, W1, b1, W2, b2, 1, 1, 3, REFENC_ACT_RELU, P0, &rep), REFENC_OK,
                 "%s", rep.error.message);
    cr_expect(hidden[0] == 1.0 && hidden[1] == 0x1p-53 && hidden[2] == 0x1p-300, "hidden %a %a %a", hidden[0],
              hidden[1], hidden[2]);
    cr_expect(y[0] == 1.0 + 0x1p-52, "got %a", y[0]);
    cr_expect_gt(rep.prec, P0, "no escalation: certified at %ld bits", (long)rep.prec);
    /* negative control: W2 = (1, 1, -1), 2^-300 below the midpoint, rounds down */
    const double W2m[3] = {1.0, 1.0, -1.0};
    y[0] = NAN;
    cr_assert_eq(refenc_mp_ffn_forward(y, hidden, x, W1, b1, W2m, b2, 1, 1, 3, REFENC_ACT_RELU, P0, &rep),
                 REFENC_OK, "%s", rep.error.message);
    cr_expect(y[0] == 1.0, "got %a", y[0]);
    cr_expect_gt(rep.prec, P0);
    /* the hidden step alone (D 3, F 1): h = (1, 1, 1) . (1, 2^-53, 2^-300) is
     * not certified at the first precisions while the output, W2 = 0, is b2
     * exactly: the hidden step must still be evaluated again and emitted */
    const double x3[3] = {1.0, 0x1p-53, 0x1p-300}, W13[3] = {1.0, 1.0, 1.0}, b13[1] = {0}, W23[3] = {0, 0, 0},
                 b23[3] = {0.5, 0, -1.0};
    double y3[3] = {NAN, NAN, NAN}, h3[1] = {NAN};
    cr_assert_eq(refenc_mp_ffn_forward(y3, h3, x3, W13, b13, W23, b23, 1, 3, 1, REFENC_ACT_RELU, P0, &rep),
                 REFENC_OK, "%s", rep.error.message);
    cr_expect(h3[0] == 1.0 + 0x1p-52, "hidden: got %a", h3[0]);
    cr_expect(y3[0] == 0.5 && y3[1] == 0 && y3[2] == -1.0, "output %a %a %a", y3[0], y3[1], y3[2]);
    cr_expect_gt(rep.prec, P0, "no escalation: certified at %ld bits", (long)rep.prec);
}

Test(oracle_ziv, a_layernorm_output_near_a_midpoint_is_not_certified_by_agreement_alone)
{
    /* Row (-1, 1), eps = 2^-300: n_0 = -1/sqrt(1 + 2^-300) = -(1 - 2^-301 + ...).
     * With gamma_0 = -2^-53 and beta_0 = 1 + 2^-52:
     *   y_0 = 1 + 2^-52 + 2^-53 (1 - 2^-301 + ...)   just below a midpoint: rounds to 1 + 2^-52.
     * At 192 and 256 bits both evaluations give the midpoint exactly (2^-354 is
     * lost), which rounds to even, 1 + 2^-51: the same wrong double at two
     * precisions.  The oracle must not certify a value sitting on a boundary. */
    const double x[2] = {-1.0, 1.0}, g[2] = {-0x1p-53, 1.0}, b[2] = {1.0 + 0x1p-52, 0.0};
    double y[2];
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_layernorm_forward(y, x, g, b, 1, 2, 0x1p-300, P0, &rep), REFENC_OK,
                 "%s", rep.error.message);
    cr_assert(y[0] == 1.0 + 0x1p-52, "got %a, want %a", y[0], 1.0 + 0x1p-52);
    cr_assert_gt(rep.prec, 354, "certified at %ld bits, below the 354 the tail needs",
                 (long)rep.prec);
}

Test(oracle_ziv, a_layernorm_row_with_a_huge_mean_escalates)
{
    /* Post-LN: norm1 sees x + MHA(x) with x = 2^180 on every entry and MHA(x)
     * of order 1: the row's mean is 2^180, its spread of order 1.  At 192 bits
     * the residual keeps only ~12 bits of the attention output, so the
     * normalised row is known to ~12 bits and the oracle must raise the
     * precision until 2^180 + O(1) is held with 53 bits to spare. */
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 8, cfg.n_heads = 2, cfg.d_ff = 12, cfg.norm = REFENC_NORM_POST;
    cfg.activation = REFENC_ACT_RELU, cfg.n_layers = 1, cfg.final_norm = 0;
    cfg.positional = REFENC_POS_NONE;
    refenc_params p;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&p, &cfg, &err), REFENC_OK);
    gsl_rng *r = test_rng(11);
    refenc_params_init_random(&p, &cfg, r);
    const size_t B = 1, L = 3, D = cfg.d_model;
    double x[24], y[24];
    for (size_t i = 0; i < 24; i++)
        x[i] = 0x1p180; /* the spread of norm1's row comes from MHA(x) alone */
    refenc_mp_report rep;
    /* in_proj maps x to huge q, k: scale the weights down so that the
     * attention output is of order 1 while x is of order 2^180 */
    for (size_t i = 0; i < 3 * D * D; i++)
        p.layers[0].in_proj_weight[i] = ldexp(p.layers[0].in_proj_weight[i], -180);
    /* one layer on x itself: no embedding scale, no positional encoding, no final norm */
    const refenc_input in = {.B = B, .L = L, .x = x};
    const int st = refenc_mp_encoder_forward(y, &p, &cfg, &in, NULL, P0, &rep);
    cr_assert_eq(st, REFENC_OK, "%s", rep.error.message);
    cr_assert_gt(rep.prec, P0, "no escalation: certified at %ld bits", (long)rep.prec);
    (void)D;
    gsl_rng_free(r);
    refenc_params_free(&p);
}

Test(oracle_ziv, an_impossible_certification_fails_with_a_message)
{
    /* an evaluation whose result changes with the precision in the last
     * place forever (it returns 1 + 2^-53 + 2^-(p+1)... rounded down at p):
     * no pair of precisions certifies it */
    extern int refenc_test_flip_eval(void *, mpfr_prec_t, const refenc_mp_sink *, refenc_error *);
    refenc_mp_report rep;
    const int st = refenc_mp_certify(refenc_test_flip_eval, NULL, P0, NULL, &rep);
    cr_assert_eq(st, REFENC_ELIMIT);
    cr_assert(strstr(rep.error.message, "not certified") != NULL, "%s", rep.error.message);
}

/* 1 + 2^-53 - 2^-(p-1) at precision p (exact there): just below the
 * midpoint, by an amount that shrinks with p, so that |a - b| stays larger
 * than b's distance to the boundary at every pair. */
int refenc_test_flip_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink,
                          refenc_error *err);
int refenc_test_flip_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink,
                          refenc_error *err)
{
    (void)ctx, (void)err;
    mpfr_t v;
    mpfr_init2(v, prec);
    mpfr_set_ui(v, 1, MPFR_RNDN);
    mpfr_add_d(v, v, 0x1p-53, MPFR_RNDN);
    mpfr_t t;
    mpfr_init2(t, 2);
    mpfr_set_ui_2exp(t, 1, -(long)prec + 1, MPFR_RNDN);
    mpfr_sub(v, v, t, MPFR_RNDN);
    mpfr_clear(t);
    const size_t shape[1] = {1};
    /* make the operation inexact so the exactness shortcut does not apply */
    mpfr_t w;
    mpfr_init2(w, prec);
    mpfr_const_pi(w, MPFR_RNDN);
    mpfr_clear(w);
    const int st = refenc_mp_sink_emit(sink, "v", v, 1, shape);
    mpfr_clear(v);
    return st;
}

/* A value past double's range is certified as the infinity it rounds to.
 * LayerNorm of the row (-1, 1), eps 1e-5: x^ = (-1, 1) / sqrt(1 + 1e-5),
 * irrational, so no evaluation is exact.  With gamma = beta = DBL_MAX,
 * y_1 = DBL_MAX (1 + 1/sqrt(1 + 1e-5)), about 2^1025: +inf; with -DBL_MAX,
 * -inf; y_0 = DBL_MAX (1 - 1/sqrt(1 + 1e-5)) stays finite.  Control: gamma
 * = beta = 2^1022 gives y_1 just below 2^1023, finite. */
Test(oracle_ziv, a_value_past_the_double_range_is_certified_as_infinity)
{
    const double x[2] = {-1.0, 1.0};
    const double big[2] = {DBL_MAX, DBL_MAX}, neg[2] = {-DBL_MAX, -DBL_MAX}, half[2] = {0x1p1022, 0x1p1022};
    const double k = 1.0 / sqrt(1.0 + 1e-5);
    double y[2] = {0, 0};
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_layernorm_forward(y, x, big, big, 1, 2, 1e-5, P0, &rep), REFENC_OK, "%s",
                 rep.error.message);
    cr_expect(isinf(y[1]) && y[1] > 0, "got %a", y[1]);
    cr_expect(isfinite(y[0]) && fabs(y[0] / (DBL_MAX * (1 - k)) - 1) < 1e-6, "got %a", y[0]);
    cr_assert_eq(refenc_mp_layernorm_forward(y, x, neg, neg, 1, 2, 1e-5, P0, &rep), REFENC_OK, "%s",
                 rep.error.message);
    cr_expect(isinf(y[1]) && y[1] < 0, "got %a", y[1]);
    cr_assert_eq(refenc_mp_layernorm_forward(y, x, half, half, 1, 2, 1e-5, P0, &rep), REFENC_OK, "%s",
                 rep.error.message);
    cr_expect(isfinite(y[1]) && fabs(y[1] / (0x1p1022 * (1 + k)) - 1) < 1e-12, "got %a", y[1]);
}

/* The certification margin is max(|a - b|, 2^(16 - p_hi) |b|) (ziv.c): two
 * evaluations that agree to the last bit still do not certify a value
 * nearer a rounding boundary than 2^(16 - p_hi) |b|, the room left for the
 * evaluation's own error.  b = a = the midpoint between 1 and its successor
 * less 2^-120, at p_hi 128 (margin 2^-112): not certified; less 2^-100
 * (outside the margin): certified; the same for the lower midpoint. */
Test(oracle_ziv, agreement_to_the_last_bit_does_not_certify_within_the_margin)
{
    mpfr_t a, b, t, u;
    mpfr_inits2(128, a, b, (mpfr_ptr)0);
    mpfr_inits2(64, t, u, (mpfr_ptr)0);
    const long gaps[] = {-120, -100};
    for (int side = 0; side < 2; side++)
        for (size_t g = 0; g < 2; g++) {
            mpfr_set_ui(b, 1, MPFR_RNDN);
            if (side == 0) { /* below 1 + 2^-53 */
                mpfr_add_d(b, b, 0x1p-53, MPFR_RNDN);
                mpfr_set_ui_2exp(a, 1, gaps[g], MPFR_RNDN);
                mpfr_sub(b, b, a, MPFR_RNDN);
            } else { /* above 1 - 2^-54 */
                mpfr_sub_d(b, b, 0x1p-54, MPFR_RNDN);
                mpfr_set_ui_2exp(a, 1, gaps[g], MPFR_RNDN);
                mpfr_add(b, b, a, MPFR_RNDN);
            }
            mpfr_set(a, b, MPFR_RNDN);
            cr_expect_eq(refenc_mp_certified(a, b, 128, 0, t, u), g == 1, "side %d, 2^%ld from the midpoint", side,
                         gaps[g]);
            cr_expect_eq(refenc_mp_certified(a, b, 128, 1, t, u), 1, "exact: always certified");
        }
    mpfr_clears(a, b, t, u, (mpfr_ptr)0);
}

/* refenc_mp_alloc refuses an empty array and a count whose bytes overflow
 * before allocating anything. */
Test(oracle_ziv, arrays_of_no_values_or_of_too_many_are_refused)
{
    cr_expect_null(refenc_mp_alloc(0, 64));
    cr_expect_null(refenc_mp_alloc(SIZE_MAX / sizeof(__mpfr_struct) + 2, 64)); /* n * size wraps to one struct */
    mpfr_ptr one = refenc_mp_alloc(1, 64);
    cr_expect_not_null(one);
    refenc_mp_free(one, 1);
}
