/* Sinusoidal positional encoding (ref/sinusoidal.h) against closed forms.
 *
 * With D = 6 the frequencies are w_i = 10000^(-2i/6) = 10000^(-i/3):
 *   w_0 = 1, w_1 = 0.046415888336127788924..., w_2 = 0.0021544346900318837217...
 * and, interleaved, PE[pos] = [sin(pos w_0), cos(pos w_0), sin(pos w_1), ...].
 * The decimal values below are sin and cos of these w_i at 40 digits (mpmath).
 *
 * Tolerances (u = 2^-53; see the header's error analysis):
 *   i = 0: w_0 = pow(10000, -0.0) = 1 exactly, the angle pos * 1 is exact,
 *     and sin/cos are within 1 ulp: 1.5 ULPs with the literal's half ULP,
 *     so at most 2 representable doubles apart.
 *   i >= 1: the exponent fl(2i/D) is off by <= u relative, which moves w_i by
 *     ln(10^4) (2i/D) u <= 9.22 * (2/3) u = 6.2u; pow adds 1 ulp (<= 2u):
 *     the angle (pos = 1: exact product) is off by <= 8.2u relative.  For
 *     these small angles sin(a) ~ a inherits it (condition number
 *     a cot a <= 1) and adds 1 ulp: < 10.2 ULPs + 0.5 -> 11.  cos has
 *     condition number a tan a < 0.003: its error is its own 1 ulp -> 2. */
#include <math.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "../../ref/sinusoidal.h"
#include "unit.h"

#define PE_EXACT_ANGLE_ULPS 2
#define PE_SIN_ULPS 11
#define PE_COS_ULPS 2

/* PE[1, :] for D = 6, interleaved sin/cos */
static const double PE1_D6[6] = {
    0.8414709848078965066525023216302989996226,   /* sin(1)           */
    0.5403023058681397174009366074429766037323,   /* cos(1)           */
    0.04639922346473127168980854556541615335223,  /* sin(10000^(-1/3)) */
    0.9989229760406304374372283862661108787523,   /* cos(10000^(-1/3)) */
    0.002154433023365603854119347914142467987863, /* sin(10000^(-2/3)) */
    0.9999976792064808745925115358022118308281,   /* cos(10000^(-2/3)) */
};

static double pe_tolerance(int d)
{
    if (d < 2)
        return PE_EXACT_ANGLE_ULPS;
    return d % 2 == 0 ? PE_SIN_ULPS : PE_COS_ULPS;
}

Test(sinusoidal, position_zero_is_sin_zero_cos_one)
{
    const int64_t pos[1] = {0};
    double pe[8];
    refenc_sinusoidal_table(pe, pos, 1, 8);
    for (int i = 0; i < 4; i++) {
        EXPECT_EXACT(pe[2 * i], 0.0, "PE[0, %d] = sin(0)", 2 * i);
        EXPECT_EXACT(pe[2 * i + 1], 1.0, "PE[0, %d] = cos(0)", 2 * i + 1);
    }
}

Test(sinusoidal, position_one_interleaves_sin_and_cos_of_each_frequency)
{
    const int64_t pos[2] = {1, 0}; /* explicit positions, not 0..L-1 */
    double pe[12];
    refenc_sinusoidal_table(pe, pos, 2, 6);
    for (int d = 0; d < 6; d++)
        EXPECT_ULPS(pe[d], PE1_D6[d], pe_tolerance(d), "PE[1, %d]", d);
    for (int d = 0; d < 6; d++)
        EXPECT_EXACT(pe[6 + d], d % 2 ? 1.0 : 0.0, "PE[0, %d] (second row)", d);

    /* negative controls: the concatenated layout [sin w_0, sin w_1, sin w_2, cos w_0, ...]
     * puts sin(w_1) at index 1; the frequency 10000^(-i/D) (i instead of 2i)
     * gives sin(10000^(-1/6)) = 0.2138... at index 2 */
    EXPECT_ULPS_REJECTS(pe[1], PE1_D6[2], PE_EXACT_ANGLE_ULPS, "concatenated layout");
    EXPECT_ULPS_REJECTS(pe[2], (double)sinl(powl(10000.0L, -1.0L / 6)), PE_SIN_ULPS,
                        "frequency 10000^(-i/D)");
}

Test(sinusoidal, frequency_is_ten_thousand_to_minus_two_i_over_d)
{
    EXPECT_EXACT(refenc_sinusoidal_frequency(0, 6), 1.0, "w_0");
    /* D = 8, i = 2: exponent 4/8 = 0.5 exact, 10000^-0.5 = 0.01; pow < 1 ulp */
    EXPECT_ULPS(refenc_sinusoidal_frequency(2, 8), 0.01, 1, "w_2 for D = 8");
    EXPECT_ULPS(refenc_sinusoidal_frequency(1, 6), 0.04641588833612778892410076350919446576551,
                PE_SIN_ULPS, "w_1 for D = 6");
    /* the angle is pos * w_i: exact for w_0 */
    EXPECT_EXACT(refenc_sinusoidal_angle(8191, 0, 6), 8191.0, "angle at pos 8191, i = 0");
}

/* y = x + PE[pos]: one rounded addition per element, for every batch item;
 * y may alias x. */
Test(sinusoidal, forward_adds_the_table_to_every_batch_item)
{
    const size_t B = 2, L = 2, D = 6;
    const int64_t pos[2] = {0, 1};
    double x[24], y[24], pe[12];
    for (size_t i = 0; i < B * L * D; i++)
        x[i] = 0.25 * (double)i - 2.385;
    refenc_sinusoidal_table(pe, pos, L, D);
    refenc_sinusoidal_forward(y, x, pos, B, L, D);
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++)
            for (size_t d = 0; d < D; d++) {
                const size_t i = (b * L + l) * D + d;
                EXPECT_EXACT(y[i], x[i] + pe[l * D + d], "y[%zu,%zu,%zu] = x + PE", b, l, d);
            }
    /* the position-0 row is exactly x + [0, 1, 0, 1, 0, 1] */
    for (size_t d = 0; d < D; d++)
        EXPECT_EXACT(y[d], x[d] + (d % 2 ? 1.0 : 0.0), "y[0,0,%zu]", d);

    refenc_sinusoidal_forward(x, x, pos, B, L, D);
    for (size_t i = 0; i < B * L * D; i++)
        EXPECT_EXACT(x[i], y[i], "in place, element %zu", i);
}
