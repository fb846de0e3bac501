/* RoPE (ref/rope.h): a quarter turn, both layouts, against the exact rotation.
 *
 * With Dh = 4 there are two pairs, frequencies theta_0 = base^0 = 1 and
 * theta_1 = base^(-2/4) = base^(-1/2).  Choosing base = (4/pi)^2 (> 1, a
 * valid base) makes theta_1 = pi/4, so at position 2 pair 1 turns by
 * exactly pi/2 -- (a, b) -> (-b, a) -- and pair 0 by 2 radians.
 * The layouts differ only in which coordinates form a pair:
 *   half:        pair 0 = (x0, x2), pair 1 = (x1, x3)
 *   interleaved: pair 0 = (x0, x1), pair 1 = (x2, x3)
 *
 * Tolerance, per output of a pair (a, b), u = 2^-53:
 *   quarter turn: base rounds to double (u), pow(base, -0.5) halves that and
 *     adds 1 ulp (2u): theta_1 = pi/4 (1 + d), |d| <= 2.5u; the angle 2 theta_1
 *     is exact, so it is off pi/2 by <= (pi/2) 2.5u < 4u.  Then cos(angle) is
 *     within 4u of 0 and sin(angle) within u of 1, and a c - b s rounds three
 *     times: error <= 4u |a| + u |b| + 3u (|a| + |b|) <= 8u (|a| + |b|).
 *   2 radians: the angle is exact, cos and sin are within 1 ulp (2u relative),
 *     three roundings: <= 5u (|a| + |b|).
 * The reference values (cos 2, sin 2) are long double, rounded once. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/rope.h"
#include "unit.h"

#define ROPE_TOL_FACTOR (8 * TEST_U)

static double quarter_turn_base(void)
{
    const long double pi = 4.0L * atanl(1.0L);
    return (double)((4.0L / pi) * (4.0L / pi)); /* 1.6211389382774043431... */
}

/* The exact rotation of x (Dh = 4) at position 2 for a layout: pair 0 by 2 rad,
 * pair 1 by pi/2. */
static void rotate_by_hand(double *y, const double *x, refenc_rope_layout layout)
{
    const int a0 = 0, b0 = layout == REFENC_ROPE_HALF ? 2 : 1;
    const int a1 = layout == REFENC_ROPE_HALF ? 1 : 2, b1 = 3;
    const long double c = cosl(2.0L), s = sinl(2.0L);
    y[a0] = (double)(x[a0] * c - x[b0] * s);
    y[b0] = (double)(x[b0] * c + x[a0] * s);
    y[a1] = -x[b1];
    y[b1] = x[a1];
}

/* the tolerance for output d of x (Dh = 4) in a layout: 8u (|a| + |b|) of its pair */
static double rope_tol(const double *x, int d, refenc_rope_layout layout)
{
    static const int partner_half[4] = {2, 3, 0, 1}, partner_inter[4] = {1, 0, 3, 2};
    const int p = layout == REFENC_ROPE_HALF ? partner_half[d] : partner_inter[d];
    return ROPE_TOL_FACTOR * (fabs(x[d]) + fabs(x[p]));
}

static void check_layout(refenc_rope_layout layout)
{
    const char *name = refenc_rope_layout_name(layout);
    const refenc_rope_layout other = layout == REFENC_ROPE_HALF ? REFENC_ROPE_INTERLEAVED
                                                                : REFENC_ROPE_HALF;
    /* (N = 2 heads, L = 2 positions, Dh = 4); positions 2 and 0 */
    const double x[16] = {2.385, -0.75, 1.5, 0.3125,   -1.1, 0.6, 2.0, -0.45,
                          0.9, 1.7, -0.35, -2.2,       0.125, -3.0, 0.8, 1.3};
    const int64_t pos[2] = {2, 0};
    double y[16];
    refenc_rope_forward(y, x, pos, 2, 2, 4, quarter_turn_base(), layout);

    for (int n = 0; n < 2; n++) {
        const double *x_n2 = x + (n * 2 + 0) * 4, *y_n2 = y + (n * 2 + 0) * 4; /* position 2 */
        const double *x_n0 = x + (n * 2 + 1) * 4, *y_n0 = y + (n * 2 + 1) * 4; /* position 0 */
        double want[4], wrong[4];
        rotate_by_hand(want, x_n2, layout);
        rotate_by_hand(wrong, x_n2, other);
        for (int d = 0; d < 4; d++) {
            const double tol = rope_tol(x_n2, d, layout);
            EXPECT_ABS(y_n2[d], want[d], tol, "%s, head %d, position 2, coordinate %d", name, n, d);
            /* position 0: cos 0 = 1, sin 0 = 0, a*1 - b*0 = a exactly */
            EXPECT_EXACT(y_n0[d], x_n0[d], "%s, head %d, position 0 is the identity, coordinate %d",
                         name, n, d);
        }
        /* negative control: the other layout's pairing gives other values */
        for (int d = 0; d < 4; d++)
            EXPECT_ABS_REJECTS(y_n2[d], wrong[d], rope_tol(x_n2, d, layout),
                               "%s output matches the %s pairing at coordinate %d", name,
                               refenc_rope_layout_name(other), d);
    }
}

Test(rope, quarter_turn_half_layout_maps_a_b_to_minus_b_a)
{
    check_layout(REFENC_ROPE_HALF);
}

Test(rope, quarter_turn_interleaved_layout_maps_a_b_to_minus_b_a)
{
    check_layout(REFENC_ROPE_INTERLEAVED);
}

/* The same input through both layouts: the outputs differ (they pair
 * different coordinates), and in each the quarter-turn pair is an exact-ish
 * swap of the right coordinates: half moves -x3 to index 1, interleaved to 2. */
Test(rope, layouts_pair_different_coordinates)
{
    const double x[4] = {2.385, -0.75, 1.5, 0.3125};
    const int64_t pos[1] = {2};
    double yh[4], yi[4];
    refenc_rope_forward(yh, x, pos, 1, 1, 4, quarter_turn_base(), REFENC_ROPE_HALF);
    refenc_rope_forward(yi, x, pos, 1, 1, 4, quarter_turn_base(), REFENC_ROPE_INTERLEAVED);
    cr_expect(memcmp(yh, yi, sizeof yh) != 0, "half and interleaved give the same output");
    EXPECT_ABS(yh[1], -x[3], rope_tol(x, 1, REFENC_ROPE_HALF), "half: y1 = -x3");
    EXPECT_ABS(yh[3], x[1], rope_tol(x, 3, REFENC_ROPE_HALF), "half: y3 = x1");
    EXPECT_ABS(yi[2], -x[3], rope_tol(x, 2, REFENC_ROPE_INTERLEAVED), "interleaved: y2 = -x3");
    EXPECT_ABS(yi[3], x[2], rope_tol(x, 3, REFENC_ROPE_INTERLEAVED), "interleaved: y3 = x2");
}

Test(rope, frequency_is_base_to_minus_two_j_over_dh)
{
    EXPECT_EXACT(refenc_rope_frequency(0, 4, 10000.0), 1.0, "theta_0 = base^0");
    /* 10000^(-2/4) = 0.01: the exponent 0.5 is exact, pow < 1 ulp */
    EXPECT_ULPS(refenc_rope_frequency(1, 4, 10000.0), 0.01, 1, "theta_1, Dh = 4, base 10000");
    /* base 2, Dh = 8, j = 2: 2^(-1/2) = sqrt(1/2) */
    EXPECT_ULPS(refenc_rope_frequency(2, 8, 2.0), 0.7071067811865475244008443621048490392848, 1,
                "theta_2, Dh = 8, base 2");
    /* quarter-turn base: theta_1 = pi/4 within 2.5u relative (above) -> 3 ULPs */
    EXPECT_ULPS(refenc_rope_frequency(1, 4, quarter_turn_base()),
                0.7853981633974483096156608458198757210493, 3, "theta_1 = pi/4");
    /* negative control: base^(-j/Dh) would give 10000^(-1/4) = 0.1 */
    EXPECT_ULPS_REJECTS(refenc_rope_frequency(1, 4, 10000.0), 0.1, 1, "exponent j/Dh");
}

/* y may alias x (the attention rotates q and k in place). */
Test(rope, in_place_equals_out_of_place)
{
    double x[8] = {2.385, -0.75, 1.5, 0.3125, -1.1, 0.6, 2.0, -0.45}, y[8];
    const int64_t pos[2] = {3, 7};
    for (int layout = 0; layout < 2; layout++) {
        double z[8];
        memcpy(z, x, sizeof z);
        refenc_rope_forward(y, z, pos, 1, 2, 4, 10000.0, (refenc_rope_layout)layout);
        refenc_rope_forward(z, z, pos, 1, 2, 4, 10000.0, (refenc_rope_layout)layout);
        cr_expect(memcmp(y, z, sizeof y) == 0, "layout %d: in place differs", layout);
    }
}
