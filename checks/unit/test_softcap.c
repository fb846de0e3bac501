/* Attention-logit soft-capping (ref/softcap.h) and Gemma's score scale
 * (query_pre_attn_scalar, ref/attention.h), worked out by hand.
 *
 * Closed forms: tanh(ln r) = (r^2 - 1) / (r^2 + 1), so for s = cap ln r
 *   cap tanh(s / cap) = cap (r^2 - 1) / (r^2 + 1):
 *   cap 2.5: s = 2.5 ln 3 -> 2, s = 2.5 ln 2 -> 1.5;  cap 50 (Gemma 2):
 *   s = 50 ln 9 -> 50 * 80/82, s = 50 ln 1.5 -> 50 * 1.25/3.25.
 * Tolerance (u = 2^-53; docs/error-bounds.md, "Soft-capping"): the input s
 * is cap ln r rounded once (|ds| <= u|s|, carried with the derivative
 * 1 - t^2 <= 1); s / cap rounds once (u|s| after the same derivative); glibc's
 * tanh is within 2 ulps (its manual's table of known maximum errors): 4u|y|;
 * the product rounds once: u|y|.  Together 2u|s| + 5u|y|. */
#include <math.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "../../ref/attention.h"
#include "../../ref/softcap.h"
#include "unit.h"

static double softcap_tol(double s, double y)
{
    return TEST_U * (2 * fabs(s) + 5 * fabs(y));
}

Test(softcap, tanh_of_a_logarithm_by_hand)
{
    const struct { double cap; long double r; } cs[] = {
        {2.5, 3.0L}, {2.5, 2.0L}, {2.5, 1.0L / 3.0L}, {50.0, 9.0L}, {50.0, 1.5L}, {0.7, 40.0L}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const long double r = cs[c].r, r2 = r * r;
        const double s = (double)(cs[c].cap * logl(r));
        const double want = (double)(cs[c].cap * (r2 - 1) / (r2 + 1));
        const double y = refenc_softcap(s, cs[c].cap);
        EXPECT_ABS(y, want, softcap_tol(s, want), "cap %g, s = cap ln %Lg", cs[c].cap, r);
        /* negative control: the uncapped score */
        EXPECT_ABS_REJECTS(s, want, softcap_tol(s, want), "cap %g, s = cap ln %Lg uncapped", cs[c].cap, r);
    }
}

/* The ends: +-inf give exactly +-cap (tanh(+-inf) = +-1, one exact product);
 * +-0 stay +-0; NaN stays NaN; a score far past the cap gives the cap. */
Test(softcap, limits_are_the_cap_and_zero_stays_zero)
{
    EXPECT_EXACT(refenc_softcap(INFINITY, 50.0), 50.0, "+inf");
    EXPECT_EXACT(refenc_softcap(-INFINITY, 50.0), -50.0, "-inf");
    EXPECT_EXACT(refenc_softcap(1e300, 2.5), 2.5, "1e300");
    cr_expect(signbit(refenc_softcap(-0.0, 50.0)) && refenc_softcap(-0.0, 50.0) == 0.0, "-0 must stay -0");
    cr_expect(!signbit(refenc_softcap(0.0, 50.0)) && refenc_softcap(0.0, 50.0) == 0.0, "+0 must stay +0");
    cr_expect(isnan(refenc_softcap(NAN, 50.0)), "NaN must stay NaN");
    /* a score small against the cap: cap (x - x^3/3 + 2x^5/15), x = s / cap =
     * 0.006, to within the next term 17 cap x^7 / 315 = 7.6e-16 and the
     * rounding 2u|s| + 5u|y| = 2.3e-16: 1e-15 */
    const double s = 0.3, y = refenc_softcap(s, 50.0);
    const long double x = 0.3L / 50, series = 50 * (x - x * x * x / 3 + 2 * x * x * x * x * x / 15);
    EXPECT_ABS(y, (double)series, 1e-15, "small score");
    EXPECT_ABS_REJECTS(y, s, 1e-15, "small score uncapped"); /* the cubic term 3.6e-9 */
}

/* ---- the score scale and the cap inside attention ----
 * One head, two tokens, Dh = 2 (test_attention.c's example):
 *   q0 = [1, 2], q1 = [0.5, -1];  k0 = [1, 0], k1 = [0, 1];  v0 = [2, -1], v1 = [0.5, 3]
 * query_pre_attn_scalar S = 0.25: the divisor sqrt(S) = 0.5 is exact, and so
 * are the scores q.k / 0.5 = [[2, 4], [1, -2]]; the cap 2.5 makes them
 * c = 2.5 tanh(s / 2.5) (computed in long double), then
 *   w_i0 = logistic(c_i0 - c_i1),  w_i1 = logistic(c_i1 - c_i0),  out_i = w_i0 v0 + w_i1 v1.
 * Tolerance: each capped score is off by <= 2u|s| + 5u|c| (the budget
 * above; the input being exact, one u|s| of it is spare, and covers an
 * additive mask's rounding u|c + m| below): row 0, s = 2 and 4, c = 1.660
 * and 2.307: 12.3u and 19.6u; row 1, s = 1 and -2: 6.8u and 12.3u (+1.7u
 * for the mask's row).  The difference to the row maximum adds u|diff|
 * <= u: <= 33u.  exp adds 2u: the smaller term t is off by 35u relative,
 * the larger is exactly 1; sum = 1 + t by <= 17.5u + u; the weights by
 * 19.5u (larger) and 35u + 18.5u + u = 54.5u (smaller): 55 ULPs
 * (u |w| <= ulp(w)).  Each output w_0 v0 + w_1 v1 adds a product and a
 * sum: 56.5u (sum of |terms|).  The negative controls differ by 1e-2 and
 * more. */
#define SOFTCAP_WEIGHT_ULPS 55

static const double Q2[4] = {1.0, 2.0, 0.5, -1.0};
static const double K2[4] = {1.0, 0.0, 0.0, 1.0};
static const double V2[4] = {2.0, -1.0, 0.5, 3.0};

static long double logistic(long double z)
{
    return 1.0L / (1.0L + expl(-z));
}

/* The hand weights for divisor c, cap (0: none), an additive mask m added
 * after the cap (after = 1, Gemma 2) or before it (after = 0: the bug). */
static void hand_weights(double w[4], long double c, long double cap, const double m[4], int after)
{
    for (int i = 0; i < 2; i++) {
        long double s[2];
        for (int j = 0; j < 2; j++) {
            long double x = (Q2[i * 2] * K2[j * 2] + Q2[i * 2 + 1] * K2[j * 2 + 1]) / c;
            x += after ? 0 : m[i * 2 + j];
            x = cap > 0 ? cap * tanhl(x / cap) : x;
            s[j] = x + (after ? m[i * 2 + j] : 0);
        }
        w[i * 2] = (double)logistic(s[0] - s[1]);
        w[i * 2 + 1] = (double)logistic(s[1] - s[0]);
    }
}

static void expect_weights(const double *w, const double *want, const double *wrong, const char *what)
{
    for (int i = 0; i < 4; i++) {
        EXPECT_ULPS(w[i], want[i], SOFTCAP_WEIGHT_ULPS, "weight[%d][%d]", i / 2, i % 2);
        EXPECT_ULPS_REJECTS(w[i], wrong[i], SOFTCAP_WEIGHT_ULPS, "%s: weight[%d][%d]", what, i / 2, i % 2);
    }
}

Test(softcap, attention_caps_the_scores_by_hand)
{
    static const double none[4] = {0, 0, 0, 0};
    const refenc_attn_options opt = {.temperature = 1.0, .score_scalar = 0.25, .softcap = 2.5};
    double out[4], w[4], want[4], uncapped[4];
    refenc_attention_forward(out, w, Q2, K2, V2, &opt, 1, 1, 2, 2);
    hand_weights(want, 0.5L, 2.5L, none, 1);
    hand_weights(uncapped, 0.5L, 0, none, 1);
    expect_weights(w, want, uncapped, "the cap not applied");
    for (int i = 0; i < 2; i++) /* out_i = w_i0 v0 + w_i1 v1: 56.5u */
        for (int d = 0; d < 2; d++) {
            const double a = want[i * 2] * V2[d], b = want[i * 2 + 1] * V2[2 + d];
            EXPECT_ABS(out[i * 2 + d], a + b, 56.5 * TEST_U * (fabs(a) + fabs(b)), "out[%d][%d]", i, d);
        }
}

/* query_pre_attn_scalar replaces Dh in the scale: S = 0.25 against the
 * head_dim scale sqrt(2) (the bug query_scale_head_dim), with and without
 * the cap; S = Dh = 2 gives the unset scale bit for bit. */
Test(softcap, query_pre_attn_scalar_replaces_head_dim)
{
    static const double none[4] = {0, 0, 0, 0};
    double out[4], w[4], want[4], head_dim[4];
    for (int capped = 0; capped < 2; capped++) {
        const long double cap = capped ? 2.5L : 0;
        const refenc_attn_options opt = {.temperature = 1.0, .score_scalar = 0.25, .softcap = (double)cap};
        refenc_attention_forward(out, w, Q2, K2, V2, &opt, 1, 1, 2, 2);
        hand_weights(want, 0.5L, cap, none, 1);
        hand_weights(head_dim, sqrtl(2.0L), cap, none, 1);
        expect_weights(w, want, head_dim, capped ? "capped, scaled by head_dim" : "scaled by head_dim");
    }
    const refenc_attn_options two = {.temperature = 1.0, .score_scalar = 2.0};
    const refenc_attn_options unset = {.temperature = 1.0};
    double w_unset[4], out_unset[4];
    refenc_attention_forward(out, w, Q2, K2, V2, &two, 1, 1, 2, 2);
    refenc_attention_forward(out_unset, w_unset, Q2, K2, V2, &unset, 1, 1, 2, 2);
    for (int i = 0; i < 4; i++)
        EXPECT_EXACT(w[i], w_unset[i], "S = Dh: weight[%d][%d]", i / 2, i % 2);
}

/* Gemma 2 adds the mask after the cap: c(s) + m.  Adding it before,
 * c(s + m), is a different function (the negative control).  m is exact and
 * one more rounding, u|c + m|, is inside the 2u|s| already budgeted. */
Test(softcap, the_additive_mask_comes_after_the_cap)
{
    static const double m[4] = {0.0, -1.5, 0.75, 0.0};
    const refenc_attn_options opt = {.temperature = 1.0, .score_scalar = 0.25, .softcap = 2.5,
                                     .attn_mask = m};
    double out[4], w[4], want[4], before[4];
    refenc_attention_forward(out, w, Q2, K2, V2, &opt, 1, 1, 2, 2);
    hand_weights(want, 0.5L, 2.5L, m, 1);
    hand_weights(before, 0.5L, 2.5L, m, 0);
    expect_weights(w, want, before, "mask added before the cap");
}

/* Property: with a cap, every score lies in [-cap, cap], so within a row of
 * unmasked keys no weight exceeds another by more than exp(2 cap) (up to
 * the softmax's rounding: a relative 2^-40 is far above it and far below
 * the margins).  Scores of scale 8 (q, k ~ N(0, 2.5^2), Dh 5, S 0.7) against
 * caps 0.5 to 3; negative control: the same heads uncapped break the bound. */
Test(softcap, weights_ratio_is_bounded_by_exp_of_twice_the_cap)
{
    gsl_rng *r = test_rng(211);
    const size_t B = 2, H = 3, L = 7, Dh = 5, n = B * H * L * Dh, nw = B * H * L * L;
    double q[2 * 3 * 7 * 5], k[2 * 3 * 7 * 5], v[2 * 3 * 7 * 5], out[2 * 3 * 7 * 5], w[2 * 3 * 7 * 7];
    const double caps[3] = {0.5, 1.25, 3.0};
    for (int c = 0; c < 3; c++) {
        test_fill_gaussian(q, n, 0, 2.5, r);
        test_fill_gaussian(k, n, 0, 2.5, r);
        test_fill_gaussian(v, n, 0, 1, r);
        double worst[2] = {0, 0}; /* max over rows of log(w_max / w_min) - 2 cap: capped, uncapped */
        for (int capped = 0; capped < 2; capped++) {
            const refenc_attn_options opt = {.temperature = 1.0, .score_scalar = 0.7,
                                             .softcap = capped ? caps[c] : 0};
            refenc_attention_forward(out, w, q, k, v, &opt, B, H, L, Dh);
            for (size_t row = 0; row < nw / L; row++) {
                double hi = 0, lo = 1;
                for (size_t j = 0; j < L; j++)
                    hi = fmax(hi, w[row * L + j]), lo = fmin(lo, w[row * L + j]);
                const double excess = log(hi / lo) - 2 * caps[c];
                worst[capped] = fmax(worst[capped], excess);
            }
        }
        cr_expect(worst[1] <= 0x1p-40, "cap %g: a row's log(w_max / w_min) exceeds 2 cap by %a (%.17g)",
                  caps[c], worst[1], worst[1]);
        cr_expect(worst[0] > 1.0, "negative control, cap %g: uncapped rows stay within exp(2 cap) (excess %g)",
                  caps[c], worst[0]);
    }
    gsl_rng_free(r);
}
