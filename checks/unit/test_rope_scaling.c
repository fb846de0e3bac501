/* RoPE scaling (ref/rope_scaling.h): each type of Hugging Face's
 * modeling_rope_utils.py against values derived by hand, its defining
 * property, and a negative control for each.
 *
 * Tolerances, u = 2^-53.  theta_j = pow(base, -fl(2j/R)): the exponent e is
 * off by u e, which moves theta by |e ln base| u relatively, and pow adds
 * < 1 ulp (2u): theta within (|e ln base| + 2) u.  Every further rounded
 * operation adds u relatively (the operands are positive; the cancellations
 * are discussed where they happen).  An error of r u |y| is < r ULPs
 * (unit.h), plus half an ULP for a reference rounded from a closed form. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/rope.h"
#include "../../ref/rope_scaling.h"
#include "unit.h"

static refenc_rope_scaling scaling(refenc_rope_scaling_type t, double factor)
{
    refenc_rope_scaling s;
    refenc_rope_scaling_default(&s);
    s.type = t, s.factor = factor;
    return s;
}

/* ---- linear --------------------------------------------------------------- */

/* base 10000, R = 8: theta_1 = 10000^(-1/4) = 0.1 exactly in the reals;
 * e = 1/4 exact, pow < 1 ulp; /4 exact (a power of two): 0.025 within 2 ULPs
 * (1 of pow, 1/2 of the reference's rounding). */
Test(rope_scaling, linear_divides_every_frequency_by_the_factor)
{
    const refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_LINEAR, 4.0);
    EXPECT_ULPS(refenc_rope_scaled_frequency(1, 8, 10000.0, &s, 1), 0.025, 2, "theta_1 / 4");
    EXPECT_EXACT(refenc_rope_scaled_frequency(0, 8, 10000.0, &s, 1), 0.25, "theta_0 / 4");
    /* negative control: the unscaled frequency */
    EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(1, 8, 10000.0, &s, 1), 0.1, 2, "linear ignored");
}

/* Linear at position 4p is the unscaled rotation at p, bit for bit: theta/4
 * is exact and fl(4p theta/4) = fl(p theta) (powers of two scale exactly). */
Test(rope_scaling, linear_at_position_factor_times_p_is_unscaled_at_p)
{
    const refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_LINEAR, 4.0);
    const double x[16] = {2.385, -0.75, 1.5, 0.3125, -1.1, 0.6, 2.0, -0.45,
                          0.9, 1.7, -0.35, -2.2, 0.125, -3.0, 0.8, 1.3};
    const int64_t p[2] = {1001, 32767}, p4[2] = {4004, 131068};
    double y[16], y4[16];
    for (int layout = 0; layout < 2; layout++) {
        refenc_rope_forward(y, x, p, 1, 2, 8, 500000.0, (refenc_rope_layout)layout);
        refenc_rope_scaled_forward(y4, x, p4, 1, 2, 8, 500000.0, (refenc_rope_layout)layout, &s);
        cr_expect(memcmp(y, y4, sizeof y) == 0, "layout %d: linear(4p) != unscaled(p)", layout);
        /* negative control: linear at p itself is not unscaled at p */
        refenc_rope_scaled_forward(y4, x, p, 1, 2, 8, 500000.0, (refenc_rope_layout)layout, &s);
        cr_expect(memcmp(y, y4, sizeof y) != 0, "layout %d: linear(p) == unscaled(p)", layout);
    }
}

/* ---- dynamic NTK ---------------------------------------------------------- */

/* S <= L0: the base is unchanged (HF resets to the original inv_freq). */
Test(rope_scaling, dynamic_equals_unscaled_up_to_the_original_length)
{
    refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_DYNAMIC, 2.0);
    s.max_position_embeddings = 2048;
    for (size_t j = 0; j < 4; j++) {
        EXPECT_EXACT(refenc_rope_scaled_frequency(j, 8, 10000.0, &s, 2048), refenc_rope_frequency(j, 8, 10000.0),
                     "S = L0, j = %zu", j);
        EXPECT_EXACT(refenc_rope_scaled_frequency(j, 8, 10000.0, &s, 17), refenc_rope_frequency(j, 8, 10000.0),
                     "S = 17, j = %zu", j);
    }
    /* negative control: one past L0 the base grows and theta_1 drops */
    cr_expect(refenc_rope_scaled_frequency(1, 8, 10000.0, &s, 2049) < refenc_rope_frequency(1, 8, 10000.0),
              "S = L0 + 1 left theta_1 unscaled");
}

/* s = 2, S = 2 L0: s S / L0 - (s - 1) = 3 (exact: 4 - 1); R = 4: the
 * exponent R/(R-2) = 2, base' = 9 base = 90000 (pow(3, 2) exact, * base
 * exact); theta_1 = 90000^(-1/2) = 1/300: one pow, < 1 ulp -> 2 ULPs. */
Test(rope_scaling, dynamic_grows_the_base_with_the_sequence_length)
{
    refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_DYNAMIC, 2.0);
    s.max_position_embeddings = 2048;
    const double t1 = refenc_rope_scaled_frequency(1, 4, 10000.0, &s, 4096);
    EXPECT_ULPS(t1, 1.0 / 300.0, 2, "theta_1 at S = 2 L0");
    /* negative control: S = L0 (the bug that reads max positions, not S) */
    EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(1, 4, 10000.0, &s, 2048), 1.0 / 300.0, 2, "S = L0");
    /* the kernel reads S = max(pos) + 1 */
    const int64_t pos[3] = {5, 4095, 7};
    cr_expect_eq(refenc_rope_seq_len(pos, 3), 4096);
}

/* ---- YaRN ----------------------------------------------------------------- */

/* 0.1 ln(s) + 1; s = 4: ln 4 = 1.3862943611198906188..., 1.13862943611198906...
 * log < 1 ulp, two roundings: 2 ULPs. */
Test(rope_scaling, yarn_attention_factor_is_a_tenth_of_ln_s_plus_one)
{
    refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_YARN, 4.0);
    s.original_max_position_embeddings = 4096;
    EXPECT_ULPS(refenc_rope_attention_factor(&s), 1.1386294361119890618834464242916, 2, "0.1 ln 4 + 1");
    /* negative controls: squared (sglang#33558) and dropped (exllamav3#259) */
    EXPECT_ULPS_REJECTS(refenc_rope_attention_factor(&s), 1.1386294361119890618834464242916 * 1.1386294361119890618834464242916,
                        2, "squared");
    EXPECT_ULPS_REJECTS(refenc_rope_attention_factor(&s), 1.0, 2, "dropped");
    /* mscale = mscale_all_dim: the ratio is exactly 1 (DeepSeek-V2's config) */
    s.mscale = s.mscale_all_dim = 0.707;
    EXPECT_EXACT(refenc_rope_attention_factor(&s), 1.0, "mscale / mscale_all_dim");
    /* mscale_all_dim alone: HF needs both (`if mscale and mscale_all_dim`),
     * so the factor stays 0.1 ln 4 + 1, not 1 / (0.0707 ln 4 + 1) */
    s.mscale = 0;
    EXPECT_ULPS(refenc_rope_attention_factor(&s), 1.1386294361119890618834464242916, 2, "mscale_all_dim alone");
    /* and mscale alone (mscale_all_dim 0): still 0.1 ln 4 + 1, not 0.0707 ln 4 + 1 */
    s.mscale = 0.707;
    s.mscale_all_dim = 0;
    EXPECT_ULPS(refenc_rope_attention_factor(&s), 1.1386294361119890618834464242916, 2, "mscale alone");
    s.mscale_all_dim = 0.707;
    /* an explicit attention_factor wins */
    s.attention_factor = 1.25;
    EXPECT_EXACT(refenc_rope_attention_factor(&s), 1.25, "explicit attention_factor");
    /* the other types have none */
    const refenc_rope_scaling l = scaling(REFENC_ROPE_SCALING_LINEAR, 4.0);
    EXPECT_EXACT(refenc_rope_attention_factor(&l), 1.0, "linear");
}

/* R = 128, base 10000, L0 = 4096 (hand): the correction dims are
 * 128 ln(4096 / (32 * 2 pi)) / (2 ln 10000) = 20.94... -> floor 20 and
 * 128 ln(4096 / (2 pi)) / (2 ln 10000) = 45.03... -> ceil 46.  Below j = 20:
 * theta_j (extrapolation); from 46 on: theta_j / s; at j = 33, r = 13/26 =
 * 1/2: theta (1/(2s) + 1/2) = theta 5/8 for s = 4.  Bounds: theta / 4 one
 * rounding more than theta (2 ULPs + 1); at j = 33 the ramp's roundings (r
 * exact, 1 - r exact, two products, one sum, the division by s): 6 ULPs. */
Test(rope_scaling, yarn_ramps_between_extrapolation_and_interpolation)
{
    refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_YARN, 4.0);
    s.original_max_position_embeddings = 4096;
    for (size_t j = 0; j < 64; j++) {
        const double t = refenc_rope_frequency(j, 128, 10000.0), y = refenc_rope_scaled_frequency(j, 128, 10000.0, &s, 1);
        if (j <= 20)
            EXPECT_EXACT(y, t, "j = %zu: below the ramp, extrapolated", j);
        else if (j >= 46)
            EXPECT_ULPS(y, t / 4.0, 1, "j = %zu: past the ramp, interpolated", j);
    }
    const double t33 = refenc_rope_frequency(33, 128, 10000.0);
    EXPECT_ULPS(refenc_rope_scaled_frequency(33, 128, 10000.0, &s, 1), t33 * 0.625, 6, "j = 33: halfway");
    /* negative control: without truncation the ramp runs 20.94 .. 45.03 */
    s.truncate = 0;
    EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(33, 128, 10000.0, &s, 1), t33 * 0.625, 6, "not truncated");
}

/* ---- llama3 --------------------------------------------------------------- */

static refenc_rope_scaling llama31(void)
{
    refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_LLAMA3, 8.0);
    s.original_max_position_embeddings = 8192, s.low_freq_factor = 1.0, s.high_freq_factor = 4.0;
    return s;
}

/* Llama 3.1's (8, 1, 4, 8192) at base 500000, R = 128: wavelengths below
 * 8192/4 = 2048 keep theta_j, those above 8192 get theta_j / 8 (exact). */
Test(rope_scaling, llama3_keeps_high_and_divides_low_frequencies)
{
    const refenc_rope_scaling s = llama31();
    int high = 0, low = 0;
    for (size_t j = 0; j < 64; j++) {
        const double t = refenc_rope_frequency(j, 128, 500000.0), w = 2 * M_PI / t;
        const double y = refenc_rope_scaled_frequency(j, 128, 500000.0, &s, 1);
        if (w < 2048 * (1 - 1e-9)) {
            EXPECT_EXACT(y, t, "j = %zu, wavelength %g: unchanged", j, w);
            high++;
        } else if (w > 8192 * (1 + 1e-9)) {
            EXPECT_EXACT(y, t / 8, "j = %zu, wavelength %g: / 8", j, w);
            low++;
        } else
            cr_expect(y > t / 8 && y < t, "j = %zu, wavelength %g: between", j, w);
    }
    cr_expect(high > 0 && low > 0, "Llama 3.1's bands: %d high, %d low", high, low);
}

/* Medium band by hand: choose theta_1 (R = 4) = 2 pi / 3276.8, a wavelength
 * 2 L0 / (low + high) = 3276.8, so L0 / w = 2.5 and m = (2.5 - 1) / 3 = 1/2:
 * theta ((1 - m)/8 + m) = theta 9/16.  base = (3276.8 / (2 pi))^2 rounds
 * (u), theta = pow(base, -1/2) (u/2 + 2u); w, L0/w, - low, / 3: m within
 * ~ 2.5 (4u) / 3 + 3u of 1/2; d(result)/dm = theta (1 - 1/8) keeps it below
 * 10u relative, the four final roundings 4u more: 16 ULPs. */
Test(rope_scaling, llama3_smooths_the_middle_band)
{
    const refenc_rope_scaling s = llama31();
    const long double pi = 3.14159265358979323846264338327950288L;
    const long double theta = 2 * pi / 3276.8L;
    const double base = (double)(1 / (theta * theta));
    EXPECT_ULPS(refenc_rope_scaled_frequency(1, 4, base, &s, 1), (double)(theta * 9 / 16), 16, "m = 1/2");
    /* negative control: llama3 ignored (transformers#32330) */
    EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(1, 4, base, &s, 1), (double)theta, 16, "ignored");
}

/* Continuity at both band edges: theta_1 (R = 4) as a function of the base
 * across the base where w = L0 / high (and L0 / low): a relative step of
 * 1e-12 in the base moves the result by about 1e-12 / 2 (theta ~ base^-1/2)
 * plus the roundings; a jump would be a factor up to 8.  The bound 1e-10 is
 * a hundred times the smooth change. */
static double edge_jump(double (*f)(double, const refenc_rope_scaling *), double w_edge)
{
    const refenc_rope_scaling s = llama31();
    const double base = (w_edge / (2 * M_PI)) * (w_edge / (2 * M_PI)); /* w = 2 pi sqrt(base) */
    const double a = f(base * (1 - 1e-12), &s), b = f(base * (1 + 1e-12), &s);
    return fabs(a - b) / fabs(a);
}

static double llama3_theta1(double base, const refenc_rope_scaling *s)
{
    return refenc_rope_scaled_frequency(1, 4, base, s, 1);
}

/* negative control: HF's where() without the smoothing: a step at L0/low */
static double step_theta1(double base, const refenc_rope_scaling *s)
{
    const double t = refenc_rope_frequency(1, 4, base);
    return 2 * M_PI / t > (double)s->original_max_position_embeddings ? t / s->factor : t;
}

Test(rope_scaling, llama3_is_continuous_at_the_band_edges)
{
    cr_expect(edge_jump(llama3_theta1, 2048.0) < 1e-10, "jump at L0 / high: %g", edge_jump(llama3_theta1, 2048.0));
    cr_expect(edge_jump(llama3_theta1, 8192.0) < 1e-10, "jump at L0 / low: %g", edge_jump(llama3_theta1, 8192.0));
    cr_expect(edge_jump(step_theta1, 8192.0) > 1e-10, "the step control has no jump: %g", edge_jump(step_theta1, 8192.0));
}

/* ---- longrope ------------------------------------------------------------- */

/* Phi-3's max 131072 / original 4096 = 32: sqrt(1 + ln 32 / ln 4096) =
 * sqrt(1 + 5/12) = sqrt(17/12) = 1.19023807142380835...; two logs, a
 * division, a sum, a sqrt: 4 ULPs.  theta / ext: short factors up to
 * S = 4096, long ones beyond. */
Test(rope_scaling, longrope_switches_factors_past_the_original_length)
{
    refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_LONGROPE, 1.0);
    s.max_position_embeddings = 131072, s.original_max_position_embeddings = 4096, s.n_factors = 2;
    s.short_factor[0] = 1.0, s.short_factor[1] = 2.0, s.long_factor[0] = 4.0, s.long_factor[1] = 8.0;
    EXPECT_ULPS(refenc_rope_attention_factor(&s), 1.1902380714238083, 4, "sqrt(17/12)");
    EXPECT_ULPS(refenc_rope_scaled_frequency(1, 4, 10000.0, &s, 4096), 0.005, 2, "short, S = 4096");
    EXPECT_ULPS(refenc_rope_scaled_frequency(1, 4, 10000.0, &s, 4097), 0.00125, 2, "long, S = 4097");
    /* negative control: the long factors at S = 4096 */
    EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(1, 4, 10000.0, &s, 4096), 0.00125, 2, "long at L0");
}

/* ---- ntk (GTE's fixed NTK) ------------------------------------------------ */

/* base 10000, R = 8, s = 16: (base s)^(-2j/8) / 16^(2/8) = 160000^(-j/4) / 2,
 * 160000 = 20^4: theta_0 = 1/2, theta_1 = 1/40, theta_3 = 1/16000 in the reals.
 * Bound (checks/oracle/test_accuracy_rope_scaling.c, k_ntk): e ln(base s) +
 * e + (2/R) ln s + 5 units, e = 2j/R: j = 1: 9.0, j = 3: 15.4; plus half an
 * ULP for the closed form: 10 and 16 ULPs; j = 0: only 16^(1/4) = 2 (pow of
 * an exact case) and an exact division: 2 ULPs. */
Test(rope_scaling, ntk_is_base_times_factor_and_one_more_factor_power)
{
    const refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_NTK, 16.0);
    EXPECT_ULPS(refenc_rope_scaled_frequency(0, 8, 10000.0, &s, 1), 0.5, 2, "theta_0 = 16^(-1/4)");
    EXPECT_ULPS(refenc_rope_scaled_frequency(1, 8, 10000.0, &s, 1), 1.0 / 40.0, 10, "theta_1");
    EXPECT_ULPS(refenc_rope_scaled_frequency(3, 8, 10000.0, &s, 1), 1.0 / 16000.0, 16, "theta_3");
    /* negative controls: HF's linear (theta_j / s) and dynamic (theta_0 = 1,
     * at any length) give other tables; so does the unscaled one */
    refenc_rope_scaling lin = scaling(REFENC_ROPE_SCALING_LINEAR, 16.0), dyn = scaling(REFENC_ROPE_SCALING_DYNAMIC, 16.0);
    dyn.max_position_embeddings = 512;
    EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(1, 8, 10000.0, &lin, 1), 1.0 / 40.0, 10, "linear's theta_1");
    EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(0, 8, 10000.0, &lin, 1), 0.5, 2, "linear's theta_0");
    for (int64_t S = 1; S <= 1 << 20; S *= 32) {
        EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(0, 8, 10000.0, &dyn, S), 0.5, 2, "dynamic's theta_0, S %lld",
                            (long long)S);
        EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(1, 8, 10000.0, &dyn, S), 1.0 / 40.0, 10,
                            "dynamic's theta_1, S %lld", (long long)S);
    }
    EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(1, 8, 10000.0, NULL, 1), 1.0 / 40.0, 10, "unscaled theta_1");
}

/* Fixed at every length (new-impl fills its cache for s max_position_embeddings
 * at construction, which takes the scaled branch): the table at S = 1 is the
 * table at S = 2^40, bit for bit.  Negative control: dynamic's is not. */
Test(rope_scaling, ntk_table_does_not_depend_on_the_length)
{
    const refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_NTK, 2.0);
    refenc_rope_scaling dyn = scaling(REFENC_ROPE_SCALING_DYNAMIC, 2.0);
    dyn.max_position_embeddings = 8192;
    int dyn_moved = 0;
    for (size_t j = 0; j < 32; j++) {
        EXPECT_EXACT(refenc_rope_scaled_frequency(j, 64, 500000.0, &s, 1),
                     refenc_rope_scaled_frequency(j, 64, 500000.0, &s, (int64_t)1 << 40), "j = %zu", j);
        dyn_moved |= refenc_rope_scaled_frequency(j, 64, 500000.0, &dyn, 1) !=
                     refenc_rope_scaled_frequency(j, 64, 500000.0, &dyn, (int64_t)1 << 40);
    }
    cr_expect(dyn_moved, "dynamic's table did not move with the length");
}

/* mixed_b = b: theta_j / exp(a (j + 1)^b), a = ln s / (R/2)^b.  R = 8, s = 16,
 * b = 2: lambda_j = 16^((j + 1)^2 / 16): lambda_1 = 2, so theta_1 = 0.1 / 2 =
 * 0.05 in the reals; bound K0 + 8x + 3 (x = ln 16 / 4 = 0.69, K0 = 4.3):
 * 13.9, 14 ULPs.  The last pair is s-scaled for every b (lambda = s): theta_3
 * = 10^-3 / 16.  Negative control: the fixed NTK's theta_1 = 1/40. */
Test(rope_scaling, ntk_mixed_b_scales_each_pair_by_its_own_lambda)
{
    refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_NTK, 16.0);
    s.mixed = 1, s.mixed_b = 2.0;
    EXPECT_ULPS(refenc_rope_scaled_frequency(1, 8, 10000.0, &s, 1), 0.05, 14, "theta_1, lambda_1 = 2");
    EXPECT_ULPS(refenc_rope_scaled_frequency(3, 8, 10000.0, &s, 1), 1e-3 / 16, 24, "theta_3, lambda_3 = s");
    EXPECT_ULPS_REJECTS(refenc_rope_scaled_frequency(1, 8, 10000.0, &s, 1), 1.0 / 40.0, 14, "the fixed NTK's");
}

/* kexue.fm/archives/9706: b = 1 is the fixed NTK: lambda_j = s^(2(j+1)/R) =
 * s^(2j/R) s^(2/R).  Both evaluations within their bounds of the same real
 * value: the sum of the two K, largest at j = 31 (R = 64, s = 2, base
 * 500000): fixed 19.4, mixed 23.3, so 43 units.
 * Negative control: b = 0.5 is another table. */
Test(rope_scaling, ntk_mixed_b_one_is_the_fixed_ntk)
{
    const refenc_rope_scaling fixed = scaling(REFENC_ROPE_SCALING_NTK, 2.0);
    refenc_rope_scaling m1 = fixed, mh = fixed;
    m1.mixed = 1, m1.mixed_b = 1.0, mh.mixed = 1, mh.mixed_b = 0.5;
    int half_differs = 0;
    for (size_t j = 0; j < 32; j++) {
        const double a = refenc_rope_scaled_frequency(j, 64, 500000.0, &fixed, 1);
        const double b = refenc_rope_scaled_frequency(j, 64, 500000.0, &m1, 1);
        cr_expect(fabs(a - b) <= 43 * TEST_U * a, "j = %zu: fixed %.17g, mixed_b 1 %.17g", j, a, b);
        half_differs |= fabs(refenc_rope_scaled_frequency(j, 64, 500000.0, &mh, 1) - a) > 43 * TEST_U * a;
    }
    cr_expect(half_differs, "mixed_b 0.5 gave the fixed NTK's table");
}

/* ---- partial rotary and the attention factor in the kernel ---------------- */

/* partial_rotary_factor 0.5 of Dh = 8: R = 4, pairs (0, 2), (1, 3) in the half
 * layout over 4 coordinates, theta_j = base^(-2j/4); coordinates 4..7 pass
 * through bit for bit.  The rotated half equals the full RoPE of Dh = 4. */
Test(rope_scaling, partial_rotary_rotates_the_first_coordinates_only)
{
    refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_NONE, 1.0);
    s.partial_rotary_factor = 0.5;
    const double x[8] = {2.385, -0.75, 1.5, 0.3125, -1.1, 0.6, 2.0, -0.45};
    const int64_t pos[1] = {77};
    double y[8], y4[4];
    for (int layout = 0; layout < 2; layout++) {
        refenc_rope_scaled_forward(y, x, pos, 1, 1, 8, 10000.0, (refenc_rope_layout)layout, &s);
        refenc_rope_forward(y4, x, pos, 1, 1, 4, 10000.0, (refenc_rope_layout)layout);
        cr_expect(memcmp(y, y4, sizeof y4) == 0, "layout %d: the rotated part", layout);
        cr_expect(memcmp(y + 4, x + 4, 4 * sizeof *y) == 0, "layout %d: the pass-through part", layout);
        /* negative control: full rotary rotates coordinates 4..7 too */
        refenc_rope_forward(y, x, pos, 1, 1, 8, 10000.0, (refenc_rope_layout)layout);
        cr_expect(memcmp(y + 4, x + 4, 4 * sizeof *y) != 0, "layout %d: full rotary left 4..7", layout);
    }
}

/* The attention factor multiplies cos and sin: at position 0 (cos 1, sin 0)
 * the rotated coordinates are f x, one rounding; the backward is the
 * transpose, f R^T: <R y, dy> = <y, R^T dy> up to roundings. */
Test(rope_scaling, attention_factor_scales_the_rotated_coordinates)
{
    refenc_rope_scaling s = scaling(REFENC_ROPE_SCALING_YARN, 4.0);
    s.original_max_position_embeddings = 64, s.partial_rotary_factor = 0.5;
    const double f = refenc_rope_attention_factor(&s);
    const double x[8] = {2.385, -0.75, 1.5, 0.3125, -1.1, 0.6, 2.0, -0.45};
    const int64_t pos[1] = {0};
    double y[8];
    refenc_rope_scaled_forward(y, x, pos, 1, 1, 8, 10000.0, REFENC_ROPE_HALF, &s);
    for (int d = 0; d < 4; d++)
        EXPECT_EXACT(y[d], x[d] * f, "rotated coordinate %d at position 0", d);
    for (int d = 4; d < 8; d++)
        EXPECT_EXACT(y[d], x[d], "passed-through coordinate %d", d);
    /* adjoint: <F(x), g> = <x, B(g)> within 8u sum |x||g| f (both sides
     * rotate by the same computed cos, sin: only the products and sums round) */
    const int64_t p2[1] = {100000};
    const double g[8] = {0.3, -1.2, 0.7, 2.2, -0.4, 1.1, 0.05, -0.9};
    double fx[8], bg[8], lhs = 0, rhs = 0, mag = 0;
    refenc_rope_scaled_forward(fx, x, p2, 1, 1, 8, 10000.0, REFENC_ROPE_HALF, &s);
    refenc_rope_scaled_backward(bg, g, p2, 1, 1, 8, 10000.0, REFENC_ROPE_HALF, &s);
    for (int d = 0; d < 8; d++)
        lhs += fx[d] * g[d], rhs += x[d] * bg[d], mag += fabs(x[d]) * fabs(g[d]) * f;
    cr_expect(fabs(lhs - rhs) <= 16 * TEST_U * mag, "adjoint: %.17g vs %.17g", lhs, rhs);
    /* negative control: the unscaled backward is not the adjoint (f != 1) */
    refenc_rope_backward(bg, g, p2, 1, 1, 8, 10000.0, REFENC_ROPE_HALF);
    rhs = 0;
    for (int d = 0; d < 8; d++)
        rhs += x[d] * bg[d];
    cr_expect(fabs(lhs - rhs) > 16 * TEST_U * mag, "the unscaled backward passed the adjoint check");
}
