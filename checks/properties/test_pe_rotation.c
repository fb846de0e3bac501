/* The sinusoidal positional encoding (sinusoidal.h) as a rotation.
 *
 * Property: for every frequency w_i and offset k,
 *   (PE[p+k, 2i], PE[p+k, 2i+1]) = M(k w_i) (PE[p, 2i], PE[p, 2i+1]),
 *   M(t) = [[cos t, sin t], [-sin t, cos t]];
 * |PE| <= 1 and sin^2 + cos^2 = 1; PE at position 0 is exactly (0, 1, 0, 1, ...);
 * positions below max_len have distinct encodings; w_i = 10000^(-2i/D).
 * Why: sin((p+k)w) = sin(pw) cos(kw) + cos(pw) sin(kw) and
 * cos((p+k)w) = cos(pw) cos(kw) - sin(pw) sin(kw).
 *
 * Exact model: the identity holds for any w, so "exact" uses the frequency
 * w^_i the reference computes (refenc_sinusoidal_frequency) and exact angles
 * p w^_i.  Computed values: the angle fl(p w^) is within u p w^ (one rounding)
 * and sin, cos add 1 ulp <= 2^-52 = 2u, so
 *   e_p = 2u + gamma_1 |fl(p w^)|   per component of PE[p].
 * The tolerance grows with the angle because the angle is rounded relative
 * to its size: its absolute error is u p w, which at p = 10^6 and w = 1 is
 * 1.1e-10; the sine inherits it (it is 1-Lipschitz). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "../common/testutil.h"

#define U TEST_U

static const size_t widths[] = {2, 4, 6, 10, 16, 30, 64, 100, 128, 512};
#define N_WIDTHS (sizeof widths / sizeof widths[0])

/* PE rows of D values at the given positions. */
static double *pe_rows(const int64_t *pos, size_t L, size_t D)
{
    double *pe = prop_calloc(L * D, sizeof(double));
    refenc_sinusoidal_table(pe, pos, L, D);
    return pe;
}

/* Bound on the error of one PE component at position p, frequency i. */
static double pe_err(int64_t p, size_t i, size_t D)
{
    return 2.0 * U + test_gamma(1) * fabs(refenc_sinusoidal_angle(p, i, D));
}

/* Checks PE[p+k] = M(sign k w) PE[p] for every pair of width D; sign = -1
 * applies the transposed matrix (the negative control).  Returns the number
 * of components outside the tolerance. */
static size_t check_rotation(test_worst *w, size_t D, int64_t p, int64_t k, double sign)
{
    const int64_t pos[2] = {p, p + k};
    double *pe = pe_rows(pos, 2, D);
    size_t bad = 0;
    for (size_t i = 0; i < D / 2; i++) {
        const double a = pe[2 * i], b = pe[2 * i + 1];             /* PE[p]   */
        const double a1 = pe[D + 2 * i], b1 = pe[D + 2 * i + 1];   /* PE[p+k] */
        const double t = (double)k * refenc_sinusoidal_frequency(i, D);
        const double c = cos(t), s = sign * sin(t);
        const double ek = 2.0 * U + test_gamma(1) * fabs(t);
        const double ep = pe_err(p, i, D), epk = pe_err(p + k, i, D);
        /* rotated = (c a + s b, -s a + c b), computed: gamma_2 (|c a| + |s b|)
         * rounding, the errors of c, s (ek) and of a, b (ep) */
        const double r0 = c * a + s * b, r1 = -s * a + c * b;
        const double e0 = test_gamma(2) * (fabs(c * a) + fabs(s * b)) + ek * (fabs(a) + fabs(b)) +
                          (fabs(c) + fabs(s) + 2.0 * ek) * ep;
        const double e1 = test_gamma(2) * (fabs(s * a) + fabs(c * b)) + ek * (fabs(a) + fabs(b)) +
                          (fabs(c) + fabs(s) + 2.0 * ek) * ep;
        bad += !fb_within(w, r0, e0, a1, epk, "D=%zu p=%lld k=%lld i=%zu sin", D, (long long)p,
                          (long long)k, i);
        bad += !fb_within(w, r1, e1, b1, epk, "D=%zu p=%lld k=%lld i=%zu cos", D, (long long)p,
                          (long long)k, i);
    }
    free(pe);
    return bad;
}

static int64_t random_position(gsl_rng *r)
{
    /* half small (the positions a model sees), half up to 10^6 */
    return gsl_rng_uniform_int(r, 2) ? (int64_t)gsl_rng_uniform_int(r, 4096)
                                     : (int64_t)gsl_rng_uniform_int(r, 1000000);
}

Test(pe_rotation, rotation_identity_holds_for_every_frequency_and_offset)
{
    gsl_rng *r = test_rng(201);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 200; t++) {
        const size_t D = widths[t % N_WIDTHS];
        const int64_t p = random_position(r), k = 1 + (int64_t)gsl_rng_uniform_int(r, t % 2 ? 64 : 100000);
        bad += check_rotation(&w, D, p, k, 1.0);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu components violate PE[p+k] = M(k w) PE[p]: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* Negative control: M(-k w) (the transpose) maps PE[p] to PE[p-k], not
 * PE[p+k]; the comparison must flag it.  Frequency w_0 = 1 and an integer
 * k >= 1 give sin(k) != 0, so every case has a violation. */
Test(pe_rotation, transposed_rotation_is_detected)
{
    gsl_rng *r = test_rng(202);
    for (size_t t = 0; t < 50; t++) {
        test_worst w;
        test_worst_init(&w);
        const size_t D = widths[t % N_WIDTHS];
        const int64_t p = random_position(r), k = 1 + (int64_t)gsl_rng_uniform_int(r, 1000);
        cr_assert_gt(check_rotation(&w, D, p, k, -1.0), 0,
                     "negative control: M(-kw) PE[p] matched PE[p+k] (D=%zu p=%lld k=%lld, seed %lu)",
                     D, (long long)p, (long long)k, test_seed());
    }
    gsl_rng_free(r);
}

/* |PE| <= 1 exactly (sin, cos of a double lie in [-1, 1]), and
 * sin^2 + cos^2 = 1: for the computed a = sin^(t), b = cos^(t) of the same
 * computed angle t, |a - sin t|, |b - cos t| <= 2u, so
 * |a^2 + b^2 - 1| <= 4u (|a| + |b|) + 8u^2, and fl(fl(a a) + fl(b b)) adds
 * gamma_2 (a^2 + b^2).  The angle's own error does not enter: the identity
 * holds at any angle. */
static size_t check_unit_pairs(test_worst *w, const double *pe, size_t L, size_t D, size_t stride)
{
    size_t bad = 0;
    for (size_t l = 0; l < L; l++)
        for (size_t i = 0; i + stride < D; i += 2) {
            const double a = pe[l * D + i], b = pe[l * D + i + stride];
            const double tol = 4.0 * U * (fabs(a) + fabs(b)) + 8.0 * U * U +
                               test_gamma(2) * (a * a + b * b);
            bad += !fb_within(w, a * a + b * b, tol, 1.0, 0.0, "row %zu pair (%zu, %zu)", l, i,
                              i + stride);
        }
    return bad;
}

Test(pe_rotation, values_are_bounded_by_one_and_pairs_are_unit_vectors)
{
    gsl_rng *r = test_rng(203);
    const size_t L = 64;
    int64_t pos[64];
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0, out_of_range = 0;
    char buf[640];
    for (size_t t = 0; t < N_WIDTHS; t++) {
        const size_t D = widths[t];
        for (size_t l = 0; l < L; l++)
            pos[l] = random_position(r);
        double *pe = pe_rows(pos, L, D);
        for (size_t i = 0; i < L * D; i++)
            out_of_range += !(fabs(pe[i]) <= 1.0);
        bad += check_unit_pairs(&w, pe, L, D, 1);

        /* Negative controls, the same checks: PE added to an input x = 2.385
         * leaves [-1, 1]; a sine paired with the next pair's sine (stride 2)
         * is not a unit vector. */
        double *x = prop_calloc(L * D, sizeof(double));
        for (size_t i = 0; i < L * D; i++)
            x[i] = 2.385;
        refenc_sinusoidal_forward(x, x, pos, 1, L, D);
        size_t ctrl = 0;
        for (size_t i = 0; i < L * D; i++)
            ctrl += !(fabs(x[i]) <= 1.0);
        cr_assert_gt(ctrl, 0, "negative control: x + PE stayed in [-1, 1] (D=%zu)", D);
        if (D >= 4) {
            test_worst wc;
            test_worst_init(&wc);
            cr_assert_gt(check_unit_pairs(&wc, pe, L, D, 2), 0,
                         "negative control: (PE[2i], PE[2i+2]) passed as unit vectors (D=%zu)", D);
        }
        free(x);
        free(pe);
    }
    gsl_rng_free(r);
    cr_assert_eq(out_of_range, 0, "%zu PE values outside [-1, 1] (seed %lu)", out_of_range,
                 test_seed());
    cr_assert_eq(bad, 0, "%zu pairs with sin^2 + cos^2 != 1: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
}

/* 0 * w = 0 exactly, sin(0) = 0 and cos(0) = 1 exactly: bitwise. */
Test(pe_rotation, position_zero_is_exactly_zero_one)
{
    for (size_t t = 0; t < N_WIDTHS; t++) {
        const size_t D = widths[t];
        const int64_t pos[2] = {0, 1};
        double *pe = pe_rows(pos, 2, D), *want = prop_calloc(D, sizeof(double));
        char buf[400];
        for (size_t i = 0; i < D / 2; i++)
            want[2 * i + 1] = 1.0;
        cr_expect_eq(prop_count_unequal(pe, want, D, buf, sizeof buf), 0,
                     "PE[0] is not (0, 1, 0, 1, ...) for D = %zu: %s", D, buf);
        /* negative control: position 1 is not */
        cr_expect_gt(prop_count_unequal(pe + D, want, D, NULL, 0), 0,
                     "negative control: PE[1] == (0, 1, ...), D = %zu", D);
        free(want);
        free(pe);
    }
}

/* Two positions have distinct encodings if some component differs by more
 * than both errors (e_p + e_p'): then the exact encodings differ too. */
static int distinct(const double *pe, const int64_t *pos, size_t a, size_t b, size_t D)
{
    for (size_t i = 0; i < D; i++)
        if (fabs(pe[a * D + i] - pe[b * D + i]) >
            (pe_err(pos[a], i / 2, D) + pe_err(pos[b], i / 2, D)) * FB_SLACK)
            return 1;
    return 0;
}

/* Returns the number of pairs (a < b) that are not distinct. */
static size_t count_clashes(const double *pe, const int64_t *pos, size_t L, size_t D,
                            size_t *wa, size_t *wb)
{
    size_t n = 0;
    for (size_t a = 0; a < L; a++)
        for (size_t b = a + 1; b < L; b++)
            if (!distinct(pe, pos, a, b, D)) {
                if (n++ == 0) {
                    *wa = a;
                    *wb = b;
                }
            }
    return n;
}

Test(pe_rotation, positions_below_max_len_are_distinct)
{
    static const size_t max_lens[] = {512, 2048};
    for (size_t m = 0; m < 2; m++) {
        const size_t P = max_lens[m];
        int64_t *pos = prop_calloc(P, sizeof(int64_t));
        for (size_t l = 0; l < P; l++)
            pos[l] = (int64_t)l;
        for (size_t t = 0; t < N_WIDTHS; t++) {
            const size_t D = widths[t];
            double *pe = pe_rows(pos, P, D);
            size_t a = 0, b = 0;
            const size_t n = count_clashes(pe, pos, P, D, &a, &b);
            cr_expect_eq(n, 0, "D=%zu, max_len %zu: %zu pairs of positions share an encoding "
                         "(first: %zu and %zu)", D, P, n, a, b);
            free(pe);
        }
        /* negative control: a table with a repeated position has a clash */
        pos[P / 2] = pos[P / 3];
        double *pe = pe_rows(pos, P, 6);
        size_t a = 0, b = 0;
        cr_expect_gt(count_clashes(pe, pos, P, 6, &a, &b), 0,
                     "negative control: a repeated position was reported distinct");
        free(pe);
        free(pos);
    }
}

/* w_i = 10000^(-2i/D), against exp(-(2i/D) ln 10000) computed here.
 * Both start from e = fl(2i/D) (relative error u, i.e. a factor
 * exp(ln(10^4) e u) <= 1 + 9.22u on w); the reference's pow adds 1 ulp (2u);
 * here ln 10^4 (2u), the product (u) and exp's argument error move w by
 * 9.22 * 3u and exp adds 2u.  Total relative distance <= 2 (9.22u) + 2u +
 * 27.7u + 2u < 52u; we use 52u |w|. */
static size_t check_frequencies(test_worst *w, size_t D, size_t shift)
{
    size_t bad = 0;
    for (size_t i = 0; i + shift < D / 2; i++) {
        const double e = (double)(2 * i) / (double)D;
        const double mine = exp(-e * log(10000.0));
        const double ref = refenc_sinusoidal_frequency(i + shift, D);
        bad += !fb_within(w, ref, 52.0 * U * fabs(mine), mine, 0.0, "D=%zu i=%zu", D, i);
    }
    return bad;
}

Test(pe_rotation, frequencies_are_ten_thousand_to_the_minus_two_i_over_d)
{
    test_worst w;
    test_worst_init(&w);
    char buf[640];
    size_t bad = 0;
    for (size_t t = 0; t < N_WIDTHS; t++) {
        bad += check_frequencies(&w, widths[t], 0);
        if (widths[t] >= 4) { /* negative control: the next frequency is flagged */
            test_worst wc;
            test_worst_init(&wc);
            cr_expect_gt(check_frequencies(&wc, widths[t], 1), 0,
                         "negative control: w_{i+1} passed as w_i (D=%zu)", widths[t]);
        }
    }
    cr_assert_eq(bad, 0, "%zu frequencies differ from 10000^(-2i/D): %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
}
