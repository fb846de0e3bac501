/* softmax (ref/softmax.h) against closed forms.
 *
 * For two logits, softmax([a, b]) = [1/(1 + e^(b-a)), 1/(1 + e^(a-b))]: the
 * logistic function of the difference.  Decimal values below are those closed
 * forms evaluated at 40 significant digits (mpmath), then rounded by the
 * compiler to the nearest double.
 *
 * Tolerance for two logits whose scaled difference is exact: the code forms
 * t = exp(-d) (< 1 ulp: relative error <= 2u), sum = fl(1 + t) (u), then
 * fl(1/sum) and fl(t/sum) (u each).  The larger weight's relative error is
 * at most 2u t/(1+t) + u + u <= 3u, the smaller's 2u + 2u + u = 5u; with
 * the literal's own half ulp that is below 6 ULPs.  With tau = 3 the
 * difference fl(1/3) - fl(2/3) = -fl(1/3) is exact (fl(2/3) = 2 fl(1/3),
 * Sterbenz) and off from -1/3 by at most u/3: exp adds u/3 more, still
 * below 6 ULPs. */
#include <math.h>

#include <criterion/criterion.h>

#include "../../ref/softmax.h"
#include "unit.h"

#define SOFTMAX_ULPS 6

static const double SIGMOID_1 = 0.7310585786300048792511592418218362743651;   /* e/(e+1)     */
static const double SIGMOID_M1 = 0.2689414213699951207488407581781637256349;  /* 1/(e+1)     */
static const double SIGMOID_2 = 0.8807970779778824440597291413023967952064;   /* e^2/(e^2+1) */
static const double SIGMOID_M2 = 0.1192029220221175559402708586976032047936;
static const double SIGMOID_HALF = 0.6224593312018545646389005657455084787533;  /* 1/(1+e^(-1/2)) */
static const double SIGMOID_THIRD = 0.5825702064623146768663946139612295590528;   /* 1/(1+e^(-1/3)) */
static const double SIGMOID_MTHIRD = 0.4174297935376853231336053860387704409472;

Test(softmax, two_logits_give_e_over_e_plus_one)
{
    const double s[2] = {2.0, 1.0};
    double y[2];
    refenc_softmax_forward(y, s, 1, 2, 1.0);
    EXPECT_ULPS(y[0], SIGMOID_1, SOFTMAX_ULPS, "softmax([2,1])[0] = e/(e+1)");
    EXPECT_ULPS(y[1], SIGMOID_M1, SOFTMAX_ULPS, "softmax([2,1])[1] = 1/(e+1)");
    /* negative control: the order of the weights matters */
    EXPECT_ULPS_REJECTS(y[0], SIGMOID_M1, SOFTMAX_ULPS, "swapped weights");
}

Test(softmax, temperature_divides_the_logits)
{
    const double s[2] = {2.0, 1.0};
    double y[2];

    /* tau = 0.5: softmax([4, 2]) = [sigmoid(2), sigmoid(-2)]; s/tau is exact */
    refenc_softmax_forward(y, s, 1, 2, 0.5);
    EXPECT_ULPS(y[0], SIGMOID_2, SOFTMAX_ULPS, "tau 0.5, weight 0");
    EXPECT_ULPS(y[1], SIGMOID_M2, SOFTMAX_ULPS, "tau 0.5, weight 1");
    /* negative controls: tau ignored ([2, 1]), or multiplied instead of dividing ([1, 0.5]) */
    EXPECT_ULPS_REJECTS(y[0], SIGMOID_1, SOFTMAX_ULPS, "tau ignored");
    EXPECT_ULPS_REJECTS(y[0], SIGMOID_HALF, SOFTMAX_ULPS, "tau multiplied");

    /* tau = 3: softmax([2/3, 1/3]) = [sigmoid(1/3), sigmoid(-1/3)] */
    refenc_softmax_forward(y, s, 1, 2, 3.0);
    EXPECT_ULPS(y[0], SIGMOID_THIRD, SOFTMAX_ULPS, "tau 3, weight 0");
    EXPECT_ULPS(y[1], SIGMOID_MTHIRD, SOFTMAX_ULPS, "tau 3, weight 1");
    EXPECT_ULPS_REJECTS(y[0], SIGMOID_1, SOFTMAX_ULPS, "tau 3 ignored");
}

/* Max subtraction: [1002, 1001] and [-998, -999] go through exactly the same
 * operations as [2, 1] (the differences to the maximum are exact), so the
 * results are bit-identical, and nothing overflows (e^1002 would). */
Test(softmax, shift_by_a_large_constant_changes_nothing)
{
    const double s[6] = {2.0, 1.0, 1002.0, 1001.0, -998.0, -999.0};
    double y[6];
    refenc_softmax_forward(y, s, 3, 2, 1.0);
    for (int r = 1; r < 3; r++) {
        EXPECT_EXACT(y[2 * r], y[0], "row %d weight 0", r);
        EXPECT_EXACT(y[2 * r + 1], y[1], "row %d weight 1", r);
    }
    EXPECT_ULPS(y[2], SIGMOID_1, SOFTMAX_ULPS, "softmax([1002, 1001])[0]");

    /* with a temperature the maximum is that of s / tau: [1000, 999] / 0.5 =
     * [2000, 1998] differs from its maximum by [0, -2], as [2, 1] / 0.5 does */
    double t[4];
    const double st[4] = {2.0, 1.0, 1000.0, 999.0};
    refenc_softmax_forward(t, st, 2, 2, 0.5);
    EXPECT_EXACT(t[2], t[0], "tau 0.5, large logits, weight 0");
    EXPECT_EXACT(t[3], t[1], "tau 0.5, large logits, weight 1");
    EXPECT_ULPS(t[2], SIGMOID_2, SOFTMAX_ULPS, "softmax([1000, 999] / 0.5)[0]");
}

/* Equal logits: every exp is exp(0) = 1, the sum n is exact, and each weight
 * is the correctly rounded 1/n. */
Test(softmax, equal_logits_give_one_over_n)
{
    const double s[3] = {2.385, 2.385, 2.385};
    double y[3];
    refenc_softmax_forward(y, s, 1, 3, 0.7);
    for (int i = 0; i < 3; i++)
        EXPECT_EXACT(y[i], 1.0 / 3.0, "weight %d", i);
}

/* A -inf entry contributes exp(-inf) = 0 exactly, so the other weights are
 * bit-identical to the softmax without that entry. */
Test(softmax, minus_infinity_gets_exactly_zero_weight)
{
    const double s3[3] = {2.0, -INFINITY, 1.0}, s2[2] = {2.0, 1.0};
    double y3[3], y2[2];
    refenc_softmax_forward(y3, s3, 1, 3, 1.0);
    refenc_softmax_forward(y2, s2, 1, 2, 1.0);
    EXPECT_EXACT(y3[1], 0.0, "masked weight");
    EXPECT_EXACT(y3[0], y2[0], "weight 0 equals the unmasked two-entry softmax");
    EXPECT_EXACT(y3[2], y2[1], "weight 2 equals the unmasked two-entry softmax");
}

/* The documented policy: a row of -inf attends to nothing: weights all 0,
 * not NaN; the neighbouring row is unaffected. */
Test(softmax, fully_masked_row_gives_zero_weights)
{
    const double s[6] = {-INFINITY, -INFINITY, -INFINITY, 2.0, 1.0, -INFINITY};
    double y[6];
    refenc_softmax_forward(y, s, 2, 3, 1.0);
    for (int i = 0; i < 3; i++) {
        cr_expect(isfinite(y[i]), "masked row weight %d is %g, not finite", i, y[i]);
        EXPECT_EXACT(y[i], 0.0, "masked row weight %d", i);
    }
    EXPECT_ULPS(y[3], SIGMOID_1, SOFTMAX_ULPS, "second row weight 0");
    EXPECT_ULPS(y[4], SIGMOID_M1, SOFTMAX_ULPS, "second row weight 1");
    EXPECT_EXACT(y[5], 0.0, "second row masked weight");
}

/* y may alias s. */
Test(softmax, in_place_equals_out_of_place)
{
    double s[4] = {0.5, -1.25, 2.385, 0.0}, y[4];
    refenc_softmax_forward(y, s, 2, 2, 1.5);
    refenc_softmax_forward(s, s, 2, 2, 1.5);
    for (int i = 0; i < 4; i++)
        EXPECT_EXACT(s[i], y[i], "entry %d", i);
}
