/* Pooled sentence embeddings (ref/pooling.h): the rows each pooling reads,
 * worked out by hand, and the properties sentence-transformers' Pooling and
 * Normalize modules have, each with a negative control that runs the bug it
 * guards against (the pooling given no padding mask: the mean over L, the
 * last token at L - 1; no normalisation). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include <criterion/criterion.h>

#include "../../ref/core/input.h"
#include "../../ref/pooling.h"
#include "unit.h"

enum { PB = 3, PL = 7, PD = 5 };

/* y[b,l,d] = 100 b + l + d / 8: every row tells its (b, l), every sum of a
 * few of them is exact */
static void fill_rows(double *y)
{
    for (size_t b = 0; b < PB; b++)
        for (size_t l = 0; l < PL; l++)
            for (size_t d = 0; d < PD; d++)
                y[(b * PL + l) * PD + d] = 100.0 * (double)b + (double)l + (double)d / 8.0;
}

/* item 0 unpadded, item 1 right-padded by 3 (tokens 0..3), item 2
 * left-padded by 2 (tokens 2..6) */
static void fill_mask(uint8_t *m)
{
    memset(m, 0, PB * PL);
    for (size_t l = 4; l < PL; l++)
        m[1 * PL + l] = 1;
    for (size_t l = 0; l < 2; l++)
        m[2 * PL + l] = 1;
}

/* Worked by hand: item 0's mean of rows 0..6 is row 3 (l = 3), item 1's of
 * rows 0..3 is 101.5 + d/8, item 2's of rows 2..6 is 204 + d/8; all exact. */
Test(pooling, mean_over_tokens_by_hand)
{
    double y[PB * PL * PD], e[PB * PD];
    uint8_t m[PB * PL];
    fill_rows(y), fill_mask(m);
    refenc_pooling_forward(e, y, m, PB, PL, PD, REFENC_POOL_MEAN, 0);
    const double want[PB] = {3.0, 101.5, 204.0};
    for (size_t b = 0; b < PB; b++)
        for (size_t d = 0; d < PD; d++)
            cr_expect_eq(e[b * PD + d], want[b] + (double)d / 8.0, "mean of item %zu, d %zu: %.17g", b, d,
                         e[b * PD + d]);
}

/* last_token reads row 6 (unpadded), row 3 (right padding: the last token,
 * not L - 1) and row 6 (left padding: L - 1 is the last token); cls reads
 * row 0.  Negative control: given no mask (the bug last_token_ignores_padding)
 * item 1 reads row 6, a padding row. */
Test(pooling, last_token_row_under_right_and_left_padding)
{
    double y[PB * PL * PD], e[PB * PD];
    uint8_t m[PB * PL];
    fill_rows(y), fill_mask(m);
    const size_t want_row[PB] = {6, 3, 6};
    refenc_pooling_forward(e, y, m, PB, PL, PD, REFENC_POOL_LAST_TOKEN, 0);
    for (size_t b = 0; b < PB; b++) {
        cr_expect_eq(refenc_pooling_last_token(m + b * PL, PL), want_row[b], "item %zu", b);
        cr_expect_eq(e[b * PD + 1], y[(b * PL + want_row[b]) * PD + 1], "last_token of item %zu", b);
    }
    refenc_pooling_forward(e, y, NULL, PB, PL, PD, REFENC_POOL_LAST_TOKEN, 0);
    cr_expect_neq(e[1 * PD + 1], y[(1 * PL + 3) * PD + 1], "control: without the mask item 1 reads row L - 1");
    refenc_pooling_forward(e, y, m, 2, PL, PD, REFENC_POOL_CLS, 0);
    for (size_t b = 0; b < 2; b++)
        cr_expect_eq(e[b * PD + 2], y[b * PL * PD + 2], "cls of item %zu reads row 0", b);
    uint8_t all[PL];
    memset(all, 1, PL);
    cr_expect_eq(refenc_pooling_last_token(all, PL), PL, "every token padding: L (no token)");
}

/* A padded token's hidden state does not reach the mean: replacing it (by a
 * huge value, an infinity, a NaN) leaves every embedding bit-identical.
 * Negative control: the mean over every row (mean_counts_padding) moves. */
Test(pooling, mean_ignores_padded_rows)
{
    double y[PB * PL * PD], e0[PB * PD], e1[PB * PD], c0[PB * PD], c1[PB * PD];
    uint8_t m[PB * PL];
    fill_rows(y), fill_mask(m);
    refenc_pooling_forward(e0, y, m, PB, PL, PD, REFENC_POOL_MEAN, 1);
    refenc_pooling_forward(c0, y, NULL, PB, PL, PD, REFENC_POOL_MEAN, 1);
    const double junk[] = {1e300, INFINITY, NAN, -0.0};
    for (size_t k = 0; k < sizeof junk / sizeof junk[0]; k++) {
        double z[PB * PL * PD];
        memcpy(z, y, sizeof z);
        for (size_t d = 0; d < PD; d++) {
            z[(1 * PL + 5) * PD + d] = junk[k]; /* item 1, row 5: padding */
            z[(2 * PL + 0) * PD + d] = junk[k]; /* item 2, row 0: padding */
        }
        refenc_pooling_forward(e1, z, m, PB, PL, PD, REFENC_POOL_MEAN, 1);
        cr_expect_arr_eq(e1, e0, sizeof e0, "padded rows set to %g changed the masked mean", junk[k]);
        refenc_pooling_forward(c1, z, NULL, PB, PL, PD, REFENC_POOL_MEAN, 1);
        cr_expect(memcmp(c1, c0, sizeof c0) != 0, "control: the unmasked mean ignored %g", junk[k]);
    }
}

/* The mean is a function of the set of tokens: a permutation of an item's
 * tokens (its unpadded rows) leaves it bit-identical, the values being
 * multiples of 1/8 whose sums are exact.  Negative control: a permutation
 * that swaps a token with a padding row moves it. */
Test(pooling, mean_invariant_under_token_permutation)
{
    double y[PB * PL * PD], z[PB * PL * PD], e0[PB * PD], e1[PB * PD];
    uint8_t m[PB * PL];
    fill_rows(y), fill_mask(m);
    refenc_pooling_forward(e0, y, m, PB, PL, PD, REFENC_POOL_MEAN, 0);
    static const size_t perm1[4] = {2, 0, 3, 1};       /* item 1's tokens 0..3 */
    static const size_t perm2[5] = {6, 4, 2, 5, 3};    /* item 2's tokens 2..6 */
    memcpy(z, y, sizeof z);
    for (size_t k = 0; k < 4; k++)
        memcpy(z + (1 * PL + k) * PD, y + (1 * PL + perm1[k]) * PD, PD * sizeof *y);
    for (size_t k = 0; k < 5; k++)
        memcpy(z + (2 * PL + 2 + k) * PD, y + (2 * PL + perm2[k]) * PD, PD * sizeof *y);
    refenc_pooling_forward(e1, z, m, PB, PL, PD, REFENC_POOL_MEAN, 0);
    cr_expect_arr_eq(e1, e0, sizeof e0, "a permutation of the tokens changed the mean");
    memcpy(z + (1 * PL + 0) * PD, y + (1 * PL + 6) * PD, PD * sizeof *y); /* a padding row in */
    refenc_pooling_forward(e1, z, m, PB, PL, PD, REFENC_POOL_MEAN, 0);
    cr_expect(memcmp(e1, e0, sizeof e0) != 0, "control: a padding row swapped in left the mean unchanged");
}

/* Normalised embeddings have unit length.  Bound: each e_d = fl(x_d / n)
 * with n = fl(sqrt(fl(sum x_d^2))); the sum of D squares is within
 * gamma_D = D u / (1 - D u) relative, the root and its rounding add half of
 * that and u, each quotient u: | ||e|| - 1 | <= gamma_D / 2 + 2u; the test's
 * own norm (the same recurrence) adds gamma_D / 2 + u.  So (D + 4) u with
 * u = 2^-53 bounds both, for D well below 2^50.  Over random rows of widths
 * 1 to 97 and magnitudes 2^-40 .. 2^40.  Negative control: unnormalised. */
Test(pooling, unit_norm_when_normalized)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 2385);
    static double y[2 * 3 * 97], e[2 * 97];
    for (size_t D = 1; D <= 97; D += 8) {
        const double scale = ldexp(1.0, (int)gsl_rng_uniform_int(r, 81) - 40);
        for (size_t i = 0; i < 2 * 3 * D; i++)
            y[i] = scale * (gsl_rng_uniform(r) - 0.5);
        const refenc_pooling modes[] = {REFENC_POOL_MEAN, REFENC_POOL_CLS, REFENC_POOL_LAST_TOKEN};
        for (size_t k = 0; k < 3; k++) {
            refenc_pooling_forward(e, y, NULL, 2, 3, D, modes[k], 1);
            for (size_t b = 0; b < 2; b++) {
                double ss = 0.0;
                for (size_t d = 0; d < D; d++)
                    ss += e[b * D + d] * e[b * D + d];
                const double n = sqrt(ss), tol = (double)(D + 4) * 0x1p-53;
                cr_expect(fabs(n - 1.0) <= tol, "D %zu mode %d item %zu scale %g: ||e|| - 1 = %a, bound %a", D,
                          (int)modes[k], b, scale, n - 1.0, tol);
            }
            refenc_pooling_forward(e, y, NULL, 2, 3, D, modes[k], 0);
            double ss = 0.0;
            for (size_t d = 0; d < D; d++)
                ss += e[d] * e[d];
            cr_expect(fabs(sqrt(ss) - 1.0) > (double)(D + 4) * 0x1p-53, "control: D %zu unnormalised at unit length",
                      D);
        }
    }
    gsl_rng_free(r);
}

/* torch's F.normalize divides by max(||e||, 1e-12): a zero embedding stays
 * 0, not 0 / 0; a tiny one is scaled by 1e12, not to unit length. */
Test(pooling, normalize_floor_as_torch)
{
    double y[2] = {0.0, 0.0}, e[2];
    refenc_pooling_forward(e, y, NULL, 1, 1, 2, REFENC_POOL_CLS, 1);
    cr_expect(e[0] == 0.0 && e[1] == 0.0, "a zero vector: %g %g", e[0], e[1]);
    y[0] = 3e-14, y[1] = 4e-14; /* norm 5e-14 < 1e-12 */
    refenc_pooling_forward(e, y, NULL, 1, 1, 2, REFENC_POOL_CLS, 1);
    EXPECT_ULPS(e[0], 3e-14 / 1e-12, 1, "tiny vector, e_0");
    EXPECT_ULPS(e[1], 4e-14 / 1e-12, 1, "tiny vector, e_1");
}

/* The inputs a pooling cannot read are refused (refenc_input_validate): an
 * item of padding only, cls on a padded token 0, an attn_mask that removes
 * every key of a token the pooling reads.  Negative control: the same inputs
 * without a pooling are valid (their rows are only don't-care). */
Test(pooling, inputs_it_cannot_pool_are_refused)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 4, cfg.n_heads = 2, cfg.d_ff = 4, cfg.n_layers = 1;
    double x[2 * 3 * 4] = {0};
    uint8_t all[6] = {0, 0, 0, 1, 1, 1}, left[6] = {0, 0, 0, 1, 0, 0};
    double am[9] = {0, 0, 0, -INFINITY, -INFINITY, -INFINITY, 0, 0, 0}; /* row 1: no key */
    const struct {
        refenc_pooling mode;
        const uint8_t *pad;
        const double *attn;
        const char *msg;
    } rows[] = {
        {REFENC_POOL_MEAN, all, NULL, "in.key_padding_mask[1] pads every token"},
        {REFENC_POOL_LAST_TOKEN, all, NULL, "in.key_padding_mask[1] pads every token"},
        {REFENC_POOL_CLS, left, NULL, "in.key_padding_mask[1][0] = 1: pooling 'cls' reads token 0"},
        {REFENC_POOL_MEAN, NULL, am, "removes every key of token 1 of item 0"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const refenc_input in = {.B = 2, .L = 3, .x = x, .key_padding_mask = rows[k].pad, .attn_mask = rows[k].attn};
        refenc_error err;
        cfg.pooling = rows[k].mode;
        cr_expect_eq(refenc_input_validate(&in, &cfg, &err), REFENC_EINVAL, "row %zu accepted", k);
        cr_expect(strstr(err.message, rows[k].msg) != NULL, "row %zu: %s", k, err.message);
        cfg.pooling = REFENC_POOL_NONE;
        cr_expect_eq(refenc_input_validate(&in, &cfg, &err), REFENC_OK, "control: row %zu without a pooling: %s", k,
                     err.message);
    }
    cfg.pooling = REFENC_POOL_LAST_TOKEN; /* left padding: token 0 padded, fine for last_token */
    const refenc_input ok = {.B = 2, .L = 3, .x = x, .key_padding_mask = left};
    refenc_error err;
    cr_expect_eq(refenc_input_validate(&ok, &cfg, &err), REFENC_OK, "%s", err.message);
}
