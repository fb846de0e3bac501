/* Scaled dot-product attention (ref/attention.h), worked out by hand.
 *
 * One head, two tokens, Dh = 2:
 *   q0 = [1, 2], q1 = [0.5, -1];  k0 = [1, 0], k1 = [0, 1];  v0 = [2, -1], v1 = [0.5, 3]
 *   scores s = q k^T / sqrt(2) = [[1, 2], [0.5, -1]] / sqrt(2)
 *   row 0: w00 = 1/(1 + e^(1/sqrt2)),    w01 = 1/(1 + e^(-1/sqrt2))
 *   row 1: w10 = 1/(1 + e^(-1.5/sqrt2)), w11 = 1/(1 + e^(1.5/sqrt2))
 *   out_i = w_i0 v0 + w_i1 v1
 * The expected values are these closed forms in long double, rounded once.
 *
 * Tolerance (u = 2^-53): the dot products are exact; the divisor fl(sqrt 2)
 * and the division round once each: |s| <= sqrt2 is off by <= 2.83u.  In the
 * softmax the difference to the row maximum is off by <= 2 * 2.83u + u|diff|
 * <= 6.7u, exp adds 1 ulp: the smaller term t is off by 8.7u relative, the
 * larger is exactly 1; sum = 1 + t by <= 8.7u t/(1+t) + u <= 5.4u; the
 * weights by 6.4u (larger) and 15.1u (smaller): 16 ULPs.  Each output is
 * sum_j w_j v_j: weights 15.1u, products u, sum u, reference u: within
 * 19u * sum_j |w_j v_j|. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/attention.h"
#include "unit.h"

#define ATT_WEIGHT_ULPS 16
#define ATT_OUT_FACTOR (19 * TEST_U)
/* Scores that are exact (dyadic dot products over an exact divisor, exact
 * biases): only exp (1 ulp), the sum and the division round, as in
 * test_softmax.c: 6 ULPs. */
#define ATT_EXACT_SCORE_ULPS 6

static const double Q2[4] = {1.0, 2.0, 0.5, -1.0};
static const double K2[4] = {1.0, 0.0, 0.0, 1.0};
static const double V2[4] = {2.0, -1.0, 0.5, 3.0};

/* logistic(z) = 1 / (1 + e^-z), long double */
static long double logistic(long double z)
{
    return 1.0L / (1.0L + expl(-z));
}

/* The hand weights and outputs of the two-token example with divisor c
 * (c = sqrt(Dh) tau, or 1 for the unscaled negative control). */
static void hand_two_tokens(double w[4], double out[4], long double c)
{
    const long double d0 = (2.0L - 1.0L) / c;     /* s01 - s00 */
    const long double d1 = (-1.0L - 0.5L) / c;    /* s11 - s10 */
    const long double w00 = logistic(-d0), w01 = logistic(d0);
    const long double w10 = logistic(-d1), w11 = logistic(d1);
    const long double wl[4] = {w00, w01, w10, w11};
    for (int i = 0; i < 2; i++) {
        for (int d = 0; d < 2; d++)
            out[i * 2 + d] = (double)(wl[i * 2] * V2[d] + wl[i * 2 + 1] * V2[2 + d]);
        w[i * 2] = (double)wl[i * 2];
        w[i * 2 + 1] = (double)wl[i * 2 + 1];
    }
}

static double out_tol(const double *w_i, int d)
{
    return ATT_OUT_FACTOR * (fabs(w_i[0] * V2[d]) + fabs(w_i[1] * V2[2 + d]));
}

static void check_two_tokens(double tau)
{
    const refenc_attn_options opt = {.temperature = tau};
    double out[4], w[4], want_w[4], want_out[4], unscaled_w[4], unscaled_out[4];
    refenc_attention_forward(out, w, Q2, K2, V2, &opt, 1, 1, 2, 2);
    hand_two_tokens(want_w, want_out, sqrtl(2.0L) * tau);
    hand_two_tokens(unscaled_w, unscaled_out, 1.0L);

    for (int i = 0; i < 4; i++) {
        EXPECT_ULPS(w[i], want_w[i], ATT_WEIGHT_ULPS, "tau %g: weight[%d][%d]", tau, i / 2, i % 2);
        /* negative control: scores not divided by sqrt(Dh) tau */
        EXPECT_ULPS_REJECTS(w[i], unscaled_w[i], ATT_WEIGHT_ULPS,
                            "tau %g: unscaled weight[%d][%d]", tau, i / 2, i % 2);
    }
    for (int i = 0; i < 2; i++)
        for (int d = 0; d < 2; d++)
            EXPECT_ABS(out[i * 2 + d], want_out[i * 2 + d], out_tol(want_w + 2 * i, d),
                       "tau %g: out[%d][%d]", tau, i, d);
}

Test(attention, one_head_two_tokens_by_hand)
{
    check_two_tokens(1.0);
}

/* tau = 2: the divisor is sqrt(2) * 2 (exact doubling), the same analysis. */
Test(attention, temperature_divides_the_scores)
{
    check_two_tokens(2.0);
    /* negative control: tau = 2 must not give the tau = 1 weights */
    const refenc_attn_options opt = {.temperature = 2.0};
    double out[4], w[4], w1[4], out1[4];
    refenc_attention_forward(out, w, Q2, K2, V2, &opt, 1, 1, 2, 2);
    hand_two_tokens(w1, out1, sqrtl(2.0L));
    EXPECT_ULPS_REJECTS(w[0], w1[0], ATT_WEIGHT_ULPS, "temperature ignored");
}

/* Three tokens whose last key is padding: its weight is exactly 0, and since
 * exp(-inf) = 0 adds nothing, rows 0 and 1 are bit-identical to the two-token
 * run. */
Test(attention, key_padding_mask_gives_padding_keys_zero_weight)
{
    const double q[6] = {1.0, 2.0, 0.5, -1.0, -0.3, 0.7};
    const double k[6] = {1.0, 0.0, 0.0, 1.0, 5.0, 5.0};
    const double v[6] = {2.0, -1.0, 0.5, 3.0, 100.0, -100.0};
    const uint8_t pad[3] = {0, 0, 1};
    refenc_attn_options opt = {.temperature = 1.0, .key_padding_mask = pad};
    double out3[6], w3[9], out2[4], w2[4];
    refenc_attention_forward(out3, w3, q, k, v, &opt, 1, 1, 3, 2);
    const refenc_attn_options plain = {.temperature = 1.0};
    refenc_attention_forward(out2, w2, Q2, K2, V2, &plain, 1, 1, 2, 2);
    for (int i = 0; i < 3; i++)
        EXPECT_EXACT(w3[i * 3 + 2], 0.0, "weight[%d][2] on the padding key", i);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            EXPECT_EXACT(w3[i * 3 + j], w2[i * 2 + j], "weight[%d][%d]", i, j);
            EXPECT_EXACT(out3[i * 2 + j], out2[i * 2 + j], "out[%d][%d]", i, j);
        }
    /* negative control: without the mask the padding key gets weight */
    opt.key_padding_mask = NULL;
    refenc_attention_forward(out3, w3, q, k, v, &opt, 1, 1, 3, 2);
    cr_expect(w3[2] > 0.0, "the unmasked third key has no weight");
}

/* Causal: query i sees keys j <= i.  Row 0 sees only key 0: weight exactly
 * 1 (exp(0) / 1), output exactly v0. */
Test(attention, causal_mask_hides_later_keys)
{
    const double q[6] = {1.0, 2.0, 0.5, -1.0, -0.3, 0.7};
    const double k[6] = {1.0, 0.0, 0.0, 1.0, 5.0, 5.0};
    const double v[6] = {2.0, -1.0, 0.5, 3.0, 100.0, -100.0};
    const refenc_attn_options opt = {.temperature = 1.0, .causal = 1};
    double out[6], w[9], out2[4], w2[4];
    refenc_attention_forward(out, w, q, k, v, &opt, 1, 1, 3, 2);
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            EXPECT_EXACT(w[i * 3 + j], 0.0, "weight[%d][%d] on a later key", i, j);
    EXPECT_EXACT(w[0], 1.0, "weight[0][0]");
    EXPECT_EXACT(out[0], 2.0, "out[0][0] = v0");
    EXPECT_EXACT(out[1], -1.0, "out[0][1] = v0");
    /* row 1 sees keys 0 and 1: the two-token row 1 */
    const refenc_attn_options plain = {.temperature = 1.0};
    refenc_attention_forward(out2, w2, Q2, K2, V2, &plain, 1, 1, 2, 2);
    EXPECT_EXACT(w[3], w2[2], "weight[1][0]");
    EXPECT_EXACT(w[4], w2[3], "weight[1][1]");
    /* row 2 sees all three keys, including the 'later' ones of rows 0 and 1 */
    cr_expect(w[8] > 0.0, "row 2 gives its own key no weight");
}

/* Additive mask with q = 0 (every score 0): row 0 gets mask [0, -ln 3] so
 * weights [1, 1/3] / (4/3) = [3/4, 1/4]; row 1 gets [-inf, 0]: [0, 1].
 * Tolerance: fl(-ln 3) is off by <= 1.1u, exp adds 2u, sum and division
 * round: 5.9u, and 3/4, 1/4 are exact: 6 ULPs. */
Test(attention, additive_mask_is_added_to_the_scores)
{
    const double q[4] = {0, 0, 0, 0}, k[4] = {1.0, -2.0, 0.5, 3.0};
    const double v[4] = {2.0, -1.0, 0.5, 3.0};
    const double mask[4] = {0.0, (double)-logl(3.0L), -INFINITY, 0.0};
    const refenc_attn_options opt = {.temperature = 1.0, .attn_mask = mask};
    double out[4], w[4];
    refenc_attention_forward(out, w, q, k, v, &opt, 1, 1, 2, 2);
    EXPECT_ULPS(w[0], 0.75, ATT_EXACT_SCORE_ULPS, "weight[0][0]");
    EXPECT_ULPS(w[1], 0.25, ATT_EXACT_SCORE_ULPS, "weight[0][1]");
    EXPECT_EXACT(w[2], 0.0, "weight[1][0] under -inf");
    EXPECT_EXACT(w[3], 1.0, "weight[1][1]");
    EXPECT_EXACT(out[2], 0.5, "out[1] = v1");
    EXPECT_EXACT(out[3], 3.0, "out[1] = v1");
    /* negative control: the mask ignored gives uniform weights */
    EXPECT_ULPS_REJECTS(w[0], 0.5, ATT_EXACT_SCORE_ULPS, "mask ignored");
}

/* The documented policy: a query whose every key is masked gets weights 0
 * and output 0, finite.  Three ways: the whole batch item is padding; an
 * attn_mask row of -inf; causal with key 0 padding (row 0 sees only key 0).
 * Other rows and batch items are unaffected. */
/* The two-token example twice: B = 2, H = 1, L = 2, Dh = 2. */
static void two_items(double q[8], double k[8], double v[8])
{
    memcpy(q, Q2, sizeof Q2), memcpy(q + 4, Q2, sizeof Q2);
    memcpy(k, K2, sizeof K2), memcpy(k + 4, K2, sizeof K2);
    memcpy(v, V2, sizeof V2), memcpy(v + 4, V2, sizeof V2);
}

Test(attention, fully_masked_row_gives_zero_weights_and_zero_output)
{
    /* B = 2, H = 1, L = 2, Dh = 2: item 0 normal, item 1 all padding */
    double q[8], k[8], v[8];
    two_items(q, k, v);
    const uint8_t pad[4] = {0, 0, 1, 1};
    const refenc_attn_options opt = {.temperature = 1.0, .key_padding_mask = pad};
    double out[8], w[8], out2[4], w2[4];
    refenc_attention_forward(out, w, q, k, v, &opt, 2, 1, 2, 2);
    const refenc_attn_options plain = {.temperature = 1.0};
    refenc_attention_forward(out2, w2, Q2, K2, V2, &plain, 1, 1, 2, 2);
    for (int i = 0; i < 4; i++) {
        EXPECT_EXACT(w[i], w2[i], "item 0 weight %d", i);
        EXPECT_EXACT(out[i], out2[i], "item 0 out %d", i);
        cr_expect(isfinite(w[4 + i]) && isfinite(out[4 + i]), "item 1 entry %d not finite", i);
        EXPECT_EXACT(w[4 + i], 0.0, "item 1 weight %d", i);
        EXPECT_EXACT(out[4 + i], 0.0, "item 1 out %d", i);
    }

    /* an attn_mask row of -inf */
    const double mask[4] = {-INFINITY, -INFINITY, 0.0, 0.0};
    const refenc_attn_options masked = {.temperature = 1.0, .attn_mask = mask};
    refenc_attention_forward(out2, w2, Q2, K2, V2, &masked, 1, 1, 2, 2);
    for (int j = 0; j < 2; j++) {
        EXPECT_EXACT(w2[j], 0.0, "attn_mask row of -inf: weight %d", j);
        EXPECT_EXACT(out2[j], 0.0, "attn_mask row of -inf: out %d", j);
    }
    cr_expect(w2[2] > 0.0 && w2[3] > 0.0, "the unmasked row lost its weights");

    /* causal and key 0 padding: row 0 has no visible key; row 1 sees key 1 only */
    const uint8_t pad0[2] = {1, 0};
    const refenc_attn_options causal = {.temperature = 1.0, .causal = 1, .key_padding_mask = pad0};
    refenc_attention_forward(out2, w2, Q2, K2, V2, &causal, 1, 1, 2, 2);
    EXPECT_EXACT(w2[0], 0.0, "causal+padding: weight[0][0]");
    EXPECT_EXACT(w2[1], 0.0, "causal+padding: weight[0][1]");
    EXPECT_EXACT(out2[0], 0.0, "causal+padding: out[0][0]");
    EXPECT_EXACT(out2[1], 0.0, "causal+padding: out[0][1]");
    EXPECT_EXACT(w2[3], 1.0, "causal+padding: weight[1][1]");
    EXPECT_EXACT(out2[2], 0.5, "causal+padding: out[1] = v1");
}

/* ALiBi: two heads with slopes 0.5 and 0.25, positions 0 and 3 (distance 3),
 * Dh = 4 so the divisor sqrt(4) = 2 is exact.  q0 k0 = 2, all other dot
 * products 0: scaled scores [[1, 0], [0, 0]], plus -m * 3 off the diagonal:
 *   head 0: row 0 [1, -1.5] -> logistic(2.5);  row 1 [-1.5, 0] -> logistic(-1.5)
 *   head 1: row 0 [1, -0.75] -> logistic(1.75); row 1 [-0.75, 0] -> logistic(-0.75)
 * Every score is exact: 6 ULPs as for a softmax.  Had the bias been added
 * before the 1/sqrt(Dh) scaling, head 0 row 0 would be [1, -0.75]. */
Test(attention, alibi_bias_is_added_after_the_scaling)
{
    double q[16] = {0}, k[16] = {0}, v[16];
    for (int h = 0; h < 2; h++) { /* (B = 1, H = 2, L = 2, Dh = 4), the same q, k in each head */
        q[h * 8 + 0] = 1.0;       /* q0 = e0 */
        q[h * 8 + 4 + 1] = 1.0;   /* q1 = e1 */
        k[h * 8 + 0] = 2.0;       /* k0 = 2 e0, k1 = 0 */
    }
    for (int i = 0; i < 16; i++)
        v[i] = 0.5 * i - 3.0;
    const double slopes[2] = {0.5, 0.25};
    const int64_t pos[2] = {0, 3};
    const refenc_attn_options opt = {.temperature = 1.0, .alibi_slopes = slopes, .positions = pos};
    double out[16], w[8];
    refenc_attention_forward(out, w, q, k, v, &opt, 1, 2, 2, 4);

    const long double z[2][2] = {{2.5L, -1.5L}, {1.75L, -0.75L}}; /* s_i0 - s_i1 per head, row */
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 2; i++) {
            const double w0 = (double)logistic(z[h][i]), w1 = (double)logistic(-z[h][i]);
            EXPECT_ULPS(w[h * 4 + i * 2], w0, ATT_EXACT_SCORE_ULPS, "head %d weight[%d][0]", h, i);
            EXPECT_ULPS(w[h * 4 + i * 2 + 1], w1, ATT_EXACT_SCORE_ULPS, "head %d weight[%d][1]", h, i);
        }
    /* negative controls: bias before the scaling; no bias at all */
    EXPECT_ULPS_REJECTS(w[0], (double)logistic(1.75L), ATT_EXACT_SCORE_ULPS, "bias before scaling");
    EXPECT_ULPS_REJECTS(w[0], (double)logistic(1.0L), ATT_EXACT_SCORE_ULPS, "no bias");
}

/* mask_value finfo_min (-DBL_MAX, HF's torch.finfo(dtype).min): a row that
 * sees some key gives each masked key exp(-DBL_MAX - max) = 0, so its
 * weights and output equal the -inf mask's bit for bit; a row whose every
 * key is masked has every score -DBL_MAX, hence weights exp(0)/L = 1/L
 * (exact for L = 2) and the mean of v: (v0 + v1)/2 = [1.25, 1] exactly.
 * Cases: item 0 key 1 padding (row sees key 0); item 1 all padding; and
 * causal with key 0 padding (row 0 sees nothing, row 1 key 1). */
Test(attention, finfo_min_mask_equals_minus_inf_except_on_fully_masked_rows)
{
    double q[8], k[8], v[8];
    two_items(q, k, v);
    const uint8_t pad[4] = {0, 1, 1, 1};
    const refenc_attn_options inf = {.temperature = 1.0, .key_padding_mask = pad};
    const refenc_attn_options fmin = {.temperature = 1.0, .key_padding_mask = pad,
                                      .mask_value = REFENC_MASK_FINFO_MIN};
    double out_i[8], w_i[8], out_f[8], w_f[8];
    refenc_attention_forward(out_i, w_i, q, k, v, &inf, 2, 1, 2, 2);
    refenc_attention_forward(out_f, w_f, q, k, v, &fmin, 2, 1, 2, 2);
    for (int i = 0; i < 4; i++) { /* item 0: each row sees key 0 */
        EXPECT_EXACT(w_f[i], w_i[i], "item 0 weight %d", i);
        EXPECT_EXACT(out_f[i], out_i[i], "item 0 out %d", i);
    }
    EXPECT_EXACT(w_f[1], 0.0, "item 0: the padding key's weight");
    for (int i = 0; i < 2; i++) /* item 1: every key masked */
        for (int j = 0; j < 2; j++) {
            EXPECT_EXACT(w_f[4 + i * 2 + j], 0.5, "item 1 weight[%d][%d] = 1/L", i, j);
            EXPECT_EXACT(out_f[4 + i * 2 + j], j == 0 ? 1.25 : 1.0, "item 1 out[%d][%d] = mean v", i, j);
            /* negative control: the -inf mask gives 0 there */
            EXPECT_EXACT(w_i[4 + i * 2 + j], 0.0, "-inf mask, item 1 weight[%d][%d]", i, j);
        }

    const uint8_t pad0[2] = {1, 0};
    const refenc_attn_options causal = {.temperature = 1.0, .causal = 1, .key_padding_mask = pad0,
                                        .mask_value = REFENC_MASK_FINFO_MIN};
    double out2[4], w2[4];
    refenc_attention_forward(out2, w2, Q2, K2, V2, &causal, 1, 1, 2, 2);
    EXPECT_EXACT(w2[0], 0.5, "causal+padding: row 0 sees nothing: weight[0][0] = 1/L");
    EXPECT_EXACT(w2[1], 0.5, "causal+padding: weight[0][1] = 1/L (the causal mask too)");
    EXPECT_EXACT(out2[0], 1.25, "causal+padding: out[0] = mean v");
    EXPECT_EXACT(w2[2], 0.0, "causal+padding: weight[1][0]");
    EXPECT_EXACT(w2[3], 1.0, "causal+padding: weight[1][1]");
    EXPECT_EXACT(out2[2], 0.5, "causal+padding: out[1] = v1");
}
