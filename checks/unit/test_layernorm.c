/* LayerNorm (ref/layernorm.h) against closed forms.
 *
 * x = [1, 2, 4]: mean 7/3, deviations [-4/3, -1/3, 5/3], squared deviations
 * sum to 42/9, biased variance 14/9, so with gamma = 1, beta = 0
 *   y = dev / sqrt(14/9 + eps) = [-4, -1, 5] / sqrt(14 + 9 eps).
 * The expected values are this closed form in long double (64-bit
 * significand) rounded once to double.
 *
 * Tolerance for [1, 2, 4] (u = 2^-53, errors to first order):
 *   mean fl(7/3): absolute error <= (7/3) u.
 *   dev_d = fl(x_d - mean): d = 1, 2 are exact subtractions (Sterbenz), d = 0
 *     rounds once; absolute error <= (7/3) u + u |dev_0| = 3.67u, 2.33u,
 *     2.33u, i.e. relative 2.75u, 7u, 1.4u.
 *   sum of squares: each square doubles its deviation's relative error and
 *     rounds (u), two additions round: <= 30.3u absolute on 42/9, 6.5u
 *     relative; /3 adds u, + eps adds u: 8.5u; sqrt halves and rounds: 5.25u.
 *   y_d = dev_d / sd: dev's relative error + 5.25u + u <= 13.25u (d = 1).
 * So below 14 ULPs, 15 with the reference's half ULP.  gamma = 1 and
 * beta = 0 are exact.  With general gamma and beta, the product adds u |term|
 * and the sum u |y|, where term = dev/sd * gamma. */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/layernorm.h"
#include "unit.h"

#define LN_124_ULPS 15
/* [1, 2, 6] with eps = 0: mean 3 and deviations [-2, -1, 3] exact, sum of
 * squares 14 exact; var = fl(14/3) (u), sqrt (u/2 + u), division (u): 3.5u,
 * below 4 ULPs with the reference's half ULP. */
#define LN_126_ULPS 4

static const double ONES[4] = {1.0, 1.0, 1.0, 1.0}, ZEROS[4] = {0.0, 0.0, 0.0, 0.0};

Test(layernorm, three_vector_uses_biased_variance_and_eps_inside_the_root)
{
    const double x[3] = {1.0, 2.0, 4.0}, eps = 1e-5;
    double y[3];
    refenc_layernorm_forward(y, x, ONES, ZEROS, 1, 3, eps);

    const long double e = eps, dev[3] = {-4.0L / 3, -1.0L / 3, 5.0L / 3};
    for (int d = 0; d < 3; d++) {
        const double want = (double)(dev[d] / sqrtl(14.0L / 9 + e));
        EXPECT_ULPS(y[d], want, LN_124_ULPS, "LN([1,2,4])[%d]", d);

        /* negative controls, rejected by the same comparison:
         * unbiased variance (divide by D - 1 = 2: 7/3), eps outside the root,
         * eps left out (the gaps are ~1e-6 relative, tolerance ~1e-15) */
        EXPECT_ULPS_REJECTS(y[d], (double)(dev[d] / sqrtl(7.0L / 3 + e)), LN_124_ULPS,
                            "unbiased variance, entry %d", d);
        EXPECT_ULPS_REJECTS(y[d], (double)(dev[d] / (sqrtl(14.0L / 9) + e)), LN_124_ULPS,
                            "eps outside the square root, entry %d", d);
        EXPECT_ULPS_REJECTS(y[d], (double)(dev[d] / sqrtl(14.0L / 9)), LN_124_ULPS,
                            "eps left out, entry %d", d);
    }
}

Test(layernorm, gamma_scales_and_beta_shifts_each_feature)
{
    const double x[3] = {1.0, 2.0, 4.0}, eps = 1e-5;
    const double gamma[3] = {2.385, -0.5, 1.25}, beta[3] = {0.125, 0.3, -1.1};
    double y[3];
    refenc_layernorm_forward(y, x, gamma, beta, 1, 3, eps);

    const long double dev[3] = {-4.0L / 3, -1.0L / 3, 5.0L / 3};
    for (int d = 0; d < 3; d++) {
        const long double term = dev[d] / sqrtl(14.0L / 9 + (long double)eps) * gamma[d];
        const double want = (double)(term + beta[d]);
        /* 14u on the normalised value (above), u for the product with gamma, u for
         * the sum with beta, half an ulp (<= u |y|) for the reference */
        const double tol = 15 * TEST_U * fabsl(term) + 2 * TEST_U * fabs(want);
        EXPECT_ABS(y[d], want, tol, "LN([1,2,4]) * gamma + beta, entry %d", d);
        /* negative control: gamma and beta of another feature */
        const int o = (d + 1) % 3;
        const double wrong = (double)(dev[d] / sqrtl(14.0L / 9 + (long double)eps) * gamma[o] + beta[o]);
        EXPECT_ABS_REJECTS(y[d], wrong, tol, "parameters of feature %d used for feature %d", o, d);
    }
}

/* [1, 2, 6] and [1001, 1002, 1006] (two rows in one call): the same exact
 * deviations, so the same operations and bit-identical results: LayerNorm
 * ignores a shift, and the rows are independent. */
Test(layernorm, exact_deviations_give_the_closed_form_and_ignore_a_shift)
{
    const double x[6] = {1.0, 2.0, 6.0, 1001.0, 1002.0, 1006.0};
    double y[6];
    refenc_layernorm_forward(y, x, ONES, ZEROS, 2, 3, 0.0);
    const long double dev[3] = {-2, -1, 3};
    for (int d = 0; d < 3; d++) {
        EXPECT_ULPS(y[d], (double)(dev[d] / sqrtl(14.0L / 3)), LN_126_ULPS, "LN([1,2,6])[%d]", d);
        EXPECT_EXACT(y[3 + d], y[d], "shifted row, entry %d", d);
    }
}

/* A constant row: every deviation is exactly 0, so y = 0 / sd * gamma + beta
 * = beta exactly (eps > 0 keeps sd > 0). */
Test(layernorm, constant_row_gives_beta)
{
    const double x[4] = {2.385, 2.385, 2.385, 2.385};
    const double gamma[4] = {1.5, -2.0, 0.25, 3.0}, beta[4] = {0.125, -0.75, 1.1, 0.0};
    double y[4];
    refenc_layernorm_forward(y, x, gamma, beta, 1, 4, 1e-5);
    for (int d = 0; d < 4; d++) {
        cr_expect(isfinite(y[d]), "entry %d is not finite", d);
        EXPECT_EXACT(y[d], beta[d], "entry %d", d);
    }
}

/* y may alias x. */
Test(layernorm, in_place_equals_out_of_place)
{
    double x[6] = {0.5, -1.25, 2.385, 7.0, 3.0, -2.0}, y[6];
    const double gamma[3] = {1.5, -2.0, 0.25}, beta[3] = {0.125, -0.75, 1.1};
    refenc_layernorm_forward(y, x, gamma, beta, 2, 3, 1e-5);
    refenc_layernorm_forward(x, x, gamma, beta, 2, 3, 1e-5);
    cr_expect(memcmp(x, y, sizeof y) == 0, "in-place LayerNorm differs from out-of-place");
}
