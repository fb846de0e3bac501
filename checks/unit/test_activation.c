/* Activations (ref/activation.h) against closed forms.
 *
 * GELU (exact): gelu(x) = x Phi(x).  Phi(1) = 0.84134474606854294858...,
 * Phi(-1) = 1 - Phi(1) = 0.15865525393145705141... (mpmath, 40 digits).
 * Tolerance: the code computes x * (0.5 * erfc(-x * M_SQRT1_2)).  t =
 * -x M_SQRT1_2 is off by <= u relative (the constant's rounding; the product
 * by +-1 is exact); erfc amplifies that by its condition number
 * k(t) = |t erfc'(t) / erfc(t)| (0.29 at t = -1/sqrt2, 1.53 at t = 1/sqrt2)
 * and adds its own error, which glibc's libm-test-ulps tables list at up to
 * 5 ulps (10u relative) for double on x86_64; halving and the product by +-1
 * are exact.  So <= (1.53 + 10) u: 12 ULPs with the literal's half ULP.
 *
 * GELU (tanh): 0.5 x (1 + tanh z), z = sqrt(2/pi) (x + 0.044715 x^3).  At
 * x = 1: 0.84119199060827670478..., x = -1: -0.15880800939172329521...
 * Tolerance: the code computes x / (1 + exp(-2z)).  z is off by <= 3.05u
 * relative (two rounded constants, one sum, one product; x^3 exact), so the
 * argument -2z (|2z| = 1.67) by <= 5.1u absolute; exp adds 1 ulp: 7.1u on
 * E = exp(-2z); 1 + E is off by 7.1u E/(1+E) + u <= 7u (E = 5.29 at x = -1);
 * the division adds u: < 8 ULPs, 9 with the literal's half ULP.
 *
 * Quick GELU: x sigma(1.702 x) = x / (1 + exp(-1.702 x)).  Closed forms in
 * 45-digit decimal arithmetic (Python's decimal): at x = 1
 * 0.845795765932821295707106826525397337762, x = -1
 * -0.154204234067178704292893173474602662238, x = 3 2.98192869029221403348735873300412604880,
 * x = -3 -0.0180713097077859665126412669958739511998.
 * Tolerance: t = fl(A x), A the double nearest 1.702 (u relative), the
 * product u more (exact for x = +-1): |t^ - t| <= 2u |t|; E = exp(-t^) is off
 * by 2u|t| + 2u relative (argument, 1 ulp); 1 + E by that times E/(1+E)
 * plus u; the division u.  x = 1 (E = 0.18): 0.15 (3.4u + 2u) + 2u = 2.9u;
 * x = -1 (E = 5.49): 0.85 (3.4u + 2u) + 2u = 6.6u; x = 3 (E = 0.006): 2.04u;
 * x = -3 (E = 164, |t| = 5.1): 0.994 (10.2u + 2u) + 2u = 14.2u.  With the
 * literal's half ULP: 4, 8, 3 and 15 ULPs; one tolerance, 15. */
#include <math.h>

#include <criterion/criterion.h>

#include "../../ref/activation.h"
#include "unit.h"

#define GELU_ULPS 12
#define GELU_TANH_ULPS 9
#define QUICK_GELU_ULPS 15

static const double PHI_1 = 0.8413447460685429485852325456320379224779;
static const double GELU_M1 = -0.1586552539314570514147674543679620775221; /* -Phi(-1) */
static const double GELU_TANH_1 = 0.8411919906082767047819957770451838608258;
static const double GELU_TANH_M1 = -0.1588080093917232952180042229548161391742;

Test(activation, gelu_at_zero_and_plus_minus_one)
{
    EXPECT_EXACT(refenc_gelu(0.0), 0.0, "gelu(0)");
    EXPECT_ULPS(refenc_gelu(1.0), PHI_1, GELU_ULPS, "gelu(1) = Phi(1)");
    EXPECT_ULPS(refenc_gelu(-1.0), GELU_M1, GELU_ULPS, "gelu(-1) = -Phi(-1)");
    /* negative controls: the tanh approximation, and Phi(-1) with the wrong sign */
    EXPECT_ULPS_REJECTS(refenc_gelu(1.0), GELU_TANH_1, GELU_ULPS, "tanh approximation");
    EXPECT_ULPS_REJECTS(refenc_gelu(-1.0), -GELU_M1, GELU_ULPS, "sign of gelu(-1)");
}

Test(activation, gelu_tanh_at_zero_and_plus_minus_one)
{
    EXPECT_EXACT(refenc_gelu_tanh(0.0), 0.0, "gelu_tanh(0)");
    EXPECT_ULPS(refenc_gelu_tanh(1.0), GELU_TANH_1, GELU_TANH_ULPS, "gelu_tanh(1)");
    EXPECT_ULPS(refenc_gelu_tanh(-1.0), GELU_TANH_M1, GELU_TANH_ULPS, "gelu_tanh(-1)");
    /* negative control: the exact GELU differs by 1.5e-4 at 1 */
    EXPECT_ULPS_REJECTS(refenc_gelu_tanh(1.0), PHI_1, GELU_TANH_ULPS, "exact GELU");
    EXPECT_ULPS_REJECTS(refenc_gelu_tanh(-1.0), GELU_M1, GELU_TANH_ULPS, "exact GELU at -1");
}

/* Far left, Phi(x) is tiny and 1 + erf(x/sqrt2) would cancel; the erfc form
 * keeps the relative accuracy the header promises.  gelu(-8) = -8 Phi(-8)
 * = -4.9767684594174272988e-15 (mpmath).  Tolerance: t = 8/sqrt2 = 5.66,
 * k(t) ~ 2t^2 + 1 = 65, so 65u from the argument plus erfc's 10u: 76 ULPs.
 * The cancelling formula is off by several percent and must be rejected. */
Test(activation, gelu_keeps_relative_accuracy_far_left)
{
    const double want = -4.976768459417427298812796138070550737991e-15;
    const double got = refenc_gelu(-8.0);
    EXPECT_ULPS(got, want, 76, "gelu(-8)");
    const double cancelling = -8.0 * (0.5 * (1.0 + erf(-8.0 * M_SQRT1_2)));
    EXPECT_ULPS_REJECTS(got, cancelling, 76, "x (1 + erf(x/sqrt2)) / 2");
}

Test(activation, relu_is_max_of_x_and_zero)
{
    EXPECT_EXACT(refenc_relu(2.385), 2.385, "relu(2.385)");
    EXPECT_EXACT(refenc_relu(-2.385), 0.0, "relu(-2.385)");
    EXPECT_EXACT(refenc_relu(0.0), 0.0, "relu(0)");
    EXPECT_EXACT(refenc_relu(0x1p-1074), 0x1p-1074, "relu(smallest subnormal)");
    EXPECT_EXACT(refenc_relu(INFINITY), INFINITY, "relu(inf)");
    EXPECT_EXACT(refenc_relu(-INFINITY), 0.0, "relu(-inf)");
}

/* NaN propagates through every activation, as in torch.relu and the encoder's
 * contract (encoder.h: NaN in x is not an error, it propagates). */
Test(activation, nan_propagates_through_every_activation)
{
    cr_expect(isnan(refenc_relu(NAN)), "relu(NaN) = %g, not NaN", refenc_relu(NAN));
    cr_expect(isnan(refenc_gelu(NAN)), "gelu(NaN) is not NaN");
    cr_expect(isnan(refenc_gelu_tanh(NAN)), "gelu_tanh(NaN) is not NaN");
}

/* activation_forward applies the selected function elementwise, in place too. */
Test(activation, forward_applies_the_selected_activation_elementwise)
{
    const double x[3] = {1.0, -1.0, 0.0};
    const double want[3][3] = {
        {1.0, 0.0, 0.0},             /* relu      */
        {PHI_1, GELU_M1, 0.0},       /* gelu      */
        {GELU_TANH_1, GELU_TANH_M1, 0.0}, /* gelu_tanh */
    };
    const double tol[3] = {0, GELU_ULPS, GELU_TANH_ULPS};
    for (int a = 0; a < 3; a++) {
        double y[3] = {x[0], x[1], x[2]};
        refenc_activation_forward(y, y, 3, (refenc_activation)a);
        for (int i = 0; i < 3; i++)
            EXPECT_ULPS(y[i], want[a][i], tol[a], "%s(%g)",
                        refenc_activation_name((refenc_activation)a), x[i]);
    }
}

Test(activation, quick_gelu_by_closed_form)
{
    EXPECT_EXACT(refenc_quick_gelu(0.0), 0.0, "quick_gelu(0)");
    EXPECT_ULPS(refenc_quick_gelu(1.0), 0.845795765932821295707106826525397337762,
                QUICK_GELU_ULPS, "quick_gelu(1)");
    EXPECT_ULPS(refenc_quick_gelu(-1.0), -0.154204234067178704292893173474602662238,
                QUICK_GELU_ULPS, "quick_gelu(-1)");
    EXPECT_ULPS(refenc_quick_gelu(3.0), 2.98192869029221403348735873300412604880,
                QUICK_GELU_ULPS, "quick_gelu(3)");
    EXPECT_ULPS(refenc_quick_gelu(-3.0), -0.0180713097077859665126412669958739511998,
                QUICK_GELU_ULPS, "quick_gelu(-3)");
    /* negative controls: exact GELU (0.0012 away at 1), and sigmoid(x) x without 1.702 */
    EXPECT_ULPS_REJECTS(refenc_quick_gelu(1.0), PHI_1, QUICK_GELU_ULPS, "exact GELU at 1");
    EXPECT_ULPS_REJECTS(refenc_quick_gelu(1.0), 0.731058578630004879251159650278, QUICK_GELU_ULPS,
                        "x sigmoid(x) (SiLU) at 1");
    /* far left exp(-t) overflows: -0, the exact value being -1000 e^-1702 */
    const double y = refenc_quick_gelu(-1000.0);
    EXPECT_EXACT(y, 0.0, "quick_gelu(-1000)");
    cr_expect(signbit(y), "quick_gelu(-1000) is -0");
    cr_expect(isnan(refenc_quick_gelu(NAN)), "quick_gelu(NaN) is NaN");
    /* the array form dispatches to it */
    const double x[3] = {1.0, -3.0, 0.5};
    double z[3];
    refenc_activation_forward(z, x, 3, REFENC_ACT_QUICK_GELU);
    for (int i = 0; i < 3; i++)
        EXPECT_EXACT(z[i], refenc_quick_gelu(x[i]), "activation_forward[%d]", i);
}

/* The derivatives at 0, where each closed form is exact: GELU'(0) = Phi(0)
 * = 1/2 (erfc(0) = 1, the phi term is 0 x), GELU-tanh'(0) = sigma(0) = 1/2,
 * quick GELU'(0) = 1/2, ReLU'(0) = 0 (PyTorch); and the backward is dy
 * times the derivative, bit for bit. */
Test(activation, derivatives_at_zero_and_the_backward)
{
    const refenc_activation acts[] = {REFENC_ACT_RELU, REFENC_ACT_GELU, REFENC_ACT_GELU_TANH,
                                      REFENC_ACT_QUICK_GELU};
    const double want[] = {0.0, 0.5, 0.5, 0.5};
    for (size_t a = 0; a < 4; a++) {
        cr_assert(refenc_activation_derivative(0.0, acts[a]) == want[a], "activation %zu", a);
        const double x[3] = {-1.25, 0.375, 2.385}, dy[3] = {0.5, -3.0, 1.75};
        double dx[3];
        refenc_activation_backward(dx, dy, x, 3, acts[a]);
        for (size_t i = 0; i < 3; i++)
            cr_assert(dx[i] == dy[i] * refenc_activation_derivative(x[i], acts[a]));
    }
    cr_assert(refenc_activation_derivative(2.385, REFENC_ACT_RELU) == 1.0);
    cr_assert(refenc_activation_derivative(-2.385, REFENC_ACT_RELU) == 0.0);
}
