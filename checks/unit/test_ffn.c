/* Position-wise FFN (ref/ffn.h) with each activation, D = 2, F = 3.
 *
 *   x  = [1, -0.5]
 *   W1 = [[0.5, 0], [0, 2], [0.5, 0]],  b1 = [0.5, 0, -0.5]   -> pre = [1, -1, 0] exactly
 *   W2 = [[1, 1, 1], [2, -1, 0.5]],     b2 = [0.5, 0]
 *   y  = W2 act(pre) + b2:
 *     relu:      h = [1, 0, 0]                 y = [1.5, 2]                       exact
 *     gelu:      h = [Phi(1), -Phi(-1), 0]     y = [2 Phi(1) - 1/2, 1 + Phi(1)]   (Phi(-1) = 1 - Phi(1))
 *     gelu_tanh: h = [g(1), g(-1), 0]          y = [tanh(z) + 1/2, 3/2 + tanh(z)/2]
 *                (g(1) + g(-1) = tanh z, 2 g(1) - g(-1) = 3/2 + tanh(z)/2,
 *                 z = sqrt(2/pi) * 1.044715)
 * Decimal values at 40 digits (mpmath).
 *
 * Tolerance: the hidden values carry the activation's relative error
 * (test_activation.c: 11.53u for gelu, 8u for gelu_tanh); W2's entries are
 * powers of two (exact products); the sum and the bias round 3 times; the
 * literal adds half an ulp:
 *   |err| <= E sum_f |W2[o,f] h_f| + 3u (sum_f |W2[o,f] h_f| + |b2[o]|) + u |y|. */
#include <math.h>

#include <criterion/criterion.h>

#include "../../ref/ffn.h"
#include "unit.h"

static const double X[2] = {1.0, -0.5};
static const double W1[6] = {0.5, 0.0, 0.0, 2.0, 0.5, 0.0}, B1[3] = {0.5, 0.0, -0.5};
static const double W2[6] = {1.0, 1.0, 1.0, 2.0, -1.0, 0.5}, B2[2] = {0.5, 0.0};

static const double PHI_1 = 0.8413447460685429485852325456320379224779;

static void check_ffn(refenc_activation act, const double h_want[3], const double y_want[2],
                      double rel_err_h)
{
    double y[2], hidden[3];
    refenc_ffn_forward(y, hidden, X, W1, B1, W2, B2, 1, 2, 3, act);
    const char *name = refenc_activation_name(act);
    for (int o = 0; o < 2; o++) {
        double s = 0.0;
        for (int f = 0; f < 3; f++)
            s += fabs(W2[o * 3 + f] * h_want[f]);
        const double tol = rel_err_h * s + 3 * TEST_U * (s + fabs(B2[o])) + TEST_U * fabs(y_want[o]);
        EXPECT_ABS(y[o], y_want[o], tol, "%s: y[%d]", name, o);
        /* negative control: the other activations' values */
        const double relu_y[2] = {1.5, 2.0};
        if (act != REFENC_ACT_RELU)
            EXPECT_ABS_REJECTS(y[o], relu_y[o], tol, "%s gives the relu value at %d", name, o);
    }
    for (int f = 0; f < 3; f++)
        EXPECT_ABS(hidden[f], h_want[f], rel_err_h * fabs(h_want[f]) + TEST_U * fabs(h_want[f]),
                   "%s: hidden[%d] = act(pre)", name, f);
}

Test(ffn, relu_on_a_hand_checkable_input)
{
    const double h[3] = {1.0, 0.0, 0.0}, y[2] = {1.5, 2.0};
    check_ffn(REFENC_ACT_RELU, h, y, 0.0);
    /* exact arithmetic: check exactly too */
    double yy[2], hidden[3];
    refenc_ffn_forward(yy, hidden, X, W1, B1, W2, B2, 1, 2, 3, REFENC_ACT_RELU);
    EXPECT_EXACT(yy[0], 1.5, "relu y[0]");
    EXPECT_EXACT(yy[1], 2.0, "relu y[1]");
    /* negative control: W2's memory read as (F, D) gives y[1] = h0 * 1 + h1 * 2 + h2 * 0.5 = 1 */
    cr_expect(yy[1] != 1.0, "W2 read transposed");
}

Test(ffn, gelu_on_a_hand_checkable_input)
{
    const double h[3] = {PHI_1, -0.1586552539314570514147674543679620775221, 0.0};
    const double y[2] = {1.182689492137085897170465091264075844956,
                         1.841344746068542948585232545632037922478};
    check_ffn(REFENC_ACT_GELU, h, y, 11.53 * TEST_U);
}

Test(ffn, gelu_tanh_on_a_hand_checkable_input)
{
    const double h[3] = {0.8411919906082767047819957770451838608258,
                         -0.1588080093917232952180042229548161391742, 0.0};
    const double y[2] = {1.182383981216553409563991554090367721652,  /* tanh z + 1/2   */
                         1.841191990608276704781995777045183860826}; /* 3/2 + tanh z/2 */
    check_ffn(REFENC_ACT_GELU_TANH, h, y, 8.0 * TEST_U);
}

/* N = 2 positions: the same map at every position. */
Test(ffn, every_position_uses_the_same_weights)
{
    const double x[4] = {1.0, -0.5, 1.0, -0.5};
    double y[4], hidden[6];
    refenc_ffn_forward(y, hidden, x, W1, B1, W2, B2, 2, 2, 3, REFENC_ACT_RELU);
    EXPECT_EXACT(y[2], y[0], "position 1, y[0]");
    EXPECT_EXACT(y[3], y[1], "position 1, y[1]");
}
