/* ALiBi (ref/alibi.h): slopes and the symmetric bias.
 *
 * The ALiBi paper's get_slopes (Press et al. 2022, reference code):
 *   def get_slopes_power_of_2(n):
 *       start = 2 ** (-2 ** -(log2(n) - 3)); ratio = start
 *       return [start * ratio ** i for i in range(n)]
 *   def get_slopes(n):
 *       if log2(n).is_integer(): return get_slopes_power_of_2(n)
 *       c = 2 ** floor(log2(n))
 *       return get_slopes_power_of_2(c) + get_slopes(2 * c)[0::2][:n - c]
 * For 8 heads start = 2^-1: the slopes are 2^-1 ... 2^-8.  For 12 heads, c = 8,
 * and get_slopes(16) = 2^-0.5, 2^-1, 2^-1.5, ...; every other one from the
 * first gives 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5. */
#include <math.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "../../ref/alibi.h"
#include "unit.h"

/* 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 at 40 digits (mpmath) */
static const double HALF_POWERS[4] = {
    0.7071067811865475244008443621048490392848,
    0.3535533905932737622004221810524245196424,
    0.1767766952966368811002110905262122598212,
    0.0883883476483184405501055452631061299106,
};

/* exp2 of an exact argument: < 1 ulp; with the literal's half ulp, at most
 * 2 doubles apart (the header promises < 1 ulp). */
#define ALIBI_ULPS 2

Test(alibi, eight_heads_give_two_to_minus_one_through_minus_eight)
{
    double m[8];
    refenc_alibi_slopes(m, 8);
    for (int h = 0; h < 8; h++) /* exp2 of an integer is exact */
        EXPECT_EXACT(m[h], ldexp(1.0, -(h + 1)), "slope of head %d", h);
}

Test(alibi, twelve_heads_append_the_odd_half_powers)
{
    double m[12];
    refenc_alibi_slopes(m, 12);
    for (int h = 0; h < 8; h++)
        EXPECT_EXACT(m[h], ldexp(1.0, -(h + 1)), "slope of head %d (the 8-head sequence)", h);
    for (int k = 0; k < 4; k++)
        EXPECT_ULPS(m[8 + k], HALF_POWERS[k], ALIBI_ULPS, "slope of head %d = 2^-%d.5", 8 + k, k);
    /* negative control: the plain geometric sequence for 12 heads, 2^(-8(h+1)/12),
     * starts at 2^(-2/3), not 2^-1 */
    EXPECT_ULPS_REJECTS(m[0], exp2(-8.0 / 12.0), ALIBI_ULPS, "geometric sequence for 12 heads");
    /* negative control: the even-numbered slopes of the 16-head sequence */
    EXPECT_ULPS_REJECTS(m[8], 0.5, ALIBI_ULPS, "even-numbered extra slope");
}

Test(alibi, six_heads_by_hand)
{
    /* c = 4: 2^-2, 2^-4, 2^-6, 2^-8; get_slopes(8)[0::2][:2] = 2^-1, 2^-3 */
    const double want[6] = {0x1p-2, 0x1p-4, 0x1p-6, 0x1p-8, 0x1p-1, 0x1p-3};
    double m[6];
    refenc_alibi_slopes(m, 6);
    for (int h = 0; h < 6; h++)
        EXPECT_EXACT(m[h], want[h], "slope of head %d", h);
}

/* The paper's rule, transcribed independently in long double (64-bit
 * significand: its own error is below 2^-60 relative, far under an ulp of
 * double). */
static void paper_slopes_pow2(long double *m, size_t n)
{
    const long double k = log2l((long double)n);
    const long double start = powl(2.0L, -powl(2.0L, -(k - 3)));
    for (size_t i = 0; i < n; i++)
        m[i] = start * powl(start, (long double)i);
}

static void paper_slopes(long double *m, size_t n)
{
    if ((n & (n - 1)) == 0) {
        paper_slopes_pow2(m, n);
        return;
    }
    size_t c = 1;
    while (2 * c <= n)
        c *= 2;
    long double twice[2048];
    paper_slopes_pow2(m, c);
    paper_slopes(twice, 2 * c);
    for (size_t k = 0; k < n - c; k++)
        m[c + k] = twice[2 * k];
}

Test(alibi, slopes_follow_the_papers_get_slopes_for_1_to_100_heads)
{
    for (size_t H = 1; H <= 100; H++) {
        double m[100];
        long double want[100];
        refenc_alibi_slopes(m, H);
        paper_slopes(want, H);
        for (size_t h = 0; h < H; h++)
            EXPECT_ULPS(m[h], (double)want[h], ALIBI_ULPS, "H = %zu, head %zu", H, h);
    }
}

/* bias = -m |pos_i - pos_j|: one rounding, exact for a power-of-two slope. */
Test(alibi, bias_is_minus_slope_times_distance_in_both_directions)
{
    EXPECT_EXACT(refenc_alibi_bias(0.25, 3, 7), -1.0, "bias(0.25, 3, 7)");
    EXPECT_EXACT(refenc_alibi_bias(0.25, 7, 3), -1.0, "bias(0.25, 7, 3): symmetric");
    EXPECT_EXACT(refenc_alibi_bias(0.25, 5, 5), 0.0, "bias on the diagonal");
    EXPECT_EXACT(refenc_alibi_bias(0x1p-8, 0, 1000), -1000.0 / 256.0, "bias(2^-8, 0, 1000)");
    EXPECT_ULPS(refenc_alibi_bias(HALF_POWERS[0], 2, 9), -7.0 * HALF_POWERS[0], 1,
                "bias(2^-0.5, 2, 9), one rounding");
    /* negative control: a causal (one-sided) bias would be 0 for j < i */
    cr_expect(refenc_alibi_bias(0.25, 7, 3) != 0.0, "the bias vanishes for j < i");
}
