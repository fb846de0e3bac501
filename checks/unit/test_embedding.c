/* Token embedding (ref/embedding.h): table[token] * sqrt(D); the padding
 * token's row is used as stored. */
#include <math.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "../../ref/embedding.h"
#include "unit.h"

/* D = 4: sqrt(4) = 2 is exact and so is every product: compared exactly. */
Test(embedding, looks_up_rows_scaled_by_sqrt_d)
{
    const double table[3 * 4] = {
        1.0, -2.0, 0.5, 3.0,       /* row 0: the padding row, deliberately nonzero */
        0.25, 0.75, -1.5, 2.385,   /* row 1 */
        -0.125, 4.0, 0.0, -6.5,    /* row 2 */
    };
    const int64_t tokens[2 * 3] = {2, 0, 1, 1, 2, 0}; /* (B = 2, L = 3) */
    double x[2 * 3 * 4];
    refenc_embedding_forward(x, tokens, table, 2, 3, 3, 4, refenc_embedding_normalizer(4, 0));
    for (int bl = 0; bl < 6; bl++)
        for (int d = 0; d < 4; d++)
            EXPECT_EXACT(x[bl * 4 + d], 2.0 * table[tokens[bl] * 4 + d], "x[%d,%d,%d]", bl / 3,
                         bl % 3, d);
    /* the padding token (0 here, by the caller's convention) is not zeroed at lookup */
    EXPECT_EXACT(x[1 * 4 + 0], 2.0, "padding token's row used as stored");
    /* negative control: without the sqrt(D) scale */
    cr_expect(x[0] != table[2 * 4 + 0], "the row was not scaled");
}

/* D = 3: sqrt(3) is rounded (u) and so is each product (u): relative error
 * <= 2u, below 3 ULPs with the long double reference's half ULP. */
Test(embedding, scale_is_sqrt_d_for_non_square_widths)
{
    const double table[2 * 3] = {2.385, -0.75, 1.0, 0.1, 0.2, -0.3};
    const int64_t tokens[2] = {1, 0};
    double x[6];
    refenc_embedding_forward(x, tokens, table, 1, 2, 2, 3, refenc_embedding_normalizer(3, 0));
    for (int l = 0; l < 2; l++)
        for (int d = 0; d < 3; d++) {
            const double want = (double)(table[tokens[l] * 3 + d] * sqrtl(3.0L));
            EXPECT_ULPS(x[l * 3 + d], want, 3, "x[0,%d,%d]", l, d);
            /* negative control: scale by D instead of sqrt(D) */
            EXPECT_ULPS_REJECTS(x[l * 3 + d], 3.0 * table[tokens[l] * 3 + d], 3,
                                "scale by D, entry %d,%d", l, d);
        }
}

/* Gemma's normaliser, sqrt(D) rounded to the model dtype's significand, by
 * hand: sqrt(3072) = 55.4256... is 55.5 in bfloat16 (8 bits, spacing 0.25
 * in [32, 64): transformers#29402) and 55.4375 in float16 (11 bits, spacing
 * 1/32); sqrt(768) = 27.7128... is 27.75 in bfloat16 (spacing 0.125),
 * sqrt(2048) = 45.2548... is 45.25; sqrt(256) = 16 exactly in every dtype;
 * sqrt(66049) = 257 is halfway between bfloat16's 256 and 258: ties to even,
 * 256.  float64 and "exact" (bits 0) give sqrt(D) as the double.  Negative
 * controls: truncating (55.25) or not rounding at all (55.4256...) differ. */
Test(embedding, normalizer_rounds_sqrt_d_to_the_dtype)
{
    EXPECT_EXACT(refenc_embedding_normalizer(3072, 8), 55.5, "bfloat16 sqrt(3072)");
    EXPECT_EXACT(refenc_embedding_normalizer(3072, 11), 55.4375, "float16 sqrt(3072)");
    EXPECT_EXACT(refenc_embedding_normalizer(768, 8), 27.75, "bfloat16 sqrt(768)");
    EXPECT_EXACT(refenc_embedding_normalizer(2048, 8), 45.25, "bfloat16 sqrt(2048)");
    EXPECT_EXACT(refenc_embedding_normalizer(256, 8), 16.0, "bfloat16 sqrt(256)");
    EXPECT_EXACT(refenc_embedding_normalizer(66049, 8), 256.0, "a tie rounds to even");
    EXPECT_EXACT(refenc_embedding_normalizer(3072, 24), (double)(float)sqrt(3072.0), "float32 sqrt(3072)");
    EXPECT_EXACT(refenc_embedding_normalizer(3072, 53), sqrt(3072.0), "float64");
    EXPECT_EXACT(refenc_embedding_normalizer(3072, 0), sqrt(3072.0), "exact: the double");
    cr_expect_neq(refenc_embedding_normalizer(3072, 8), 55.25, "control: truncation");
    cr_expect_neq(refenc_embedding_normalizer(3072, 8), sqrt(3072.0), "control: unrounded");
}

/* Without the scale (BERT, GPT-2's wte, CLIP): the rows as stored, exactly. */
Test(embedding, lookup_copies_rows_without_scaling)
{
    const double table[3 * 3] = {1.0, -2.0, 0.5, 0.25, 2.385, -1.5, -0.125, 4.0, 0.1};
    const int64_t tokens[2 * 2] = {2, 0, 1, 2}; /* (B = 2, L = 2) */
    double x[2 * 2 * 3];
    refenc_embedding_lookup(x, tokens, table, 2, 2, 3, 3);
    for (int bl = 0; bl < 4; bl++)
        for (int d = 0; d < 3; d++)
            EXPECT_EXACT(x[bl * 3 + d], table[tokens[bl] * 3 + d], "x[%d,%d,%d]", bl / 2, bl % 2, d);
    /* negative control: the scaled lookup differs */
    double xs[12];
    refenc_embedding_forward(xs, tokens, table, 2, 2, 3, 3, refenc_embedding_normalizer(3, 0));
    cr_expect(xs[0] != x[0], "scaled and unscaled lookups agree");
}

/* y = x + table[ids]: per (b, l) rows, e.g. token types or RoBERTa's
 * positions.  Dyadic values: every sum is exact, compared exactly; in place
 * (y aliasing x) as the encoder calls it. */
Test(embedding, add_picks_a_row_per_batch_item_and_position)
{
    const double table[2 * 2] = {0.5, -0.25, 3.0, 0.125}; /* (R = 2, D = 2) */
    const int64_t ids[2 * 3] = {1, 0, 1, 0, 0, 1};        /* (B = 2, L = 3) */
    double x[12] = {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
    double want[12];
    for (int bl = 0; bl < 6; bl++)
        for (int d = 0; d < 2; d++)
            want[bl * 2 + d] = x[bl * 2 + d] + table[ids[bl] * 2 + d];
    refenc_embedding_add(x, x, ids, table, 2, 3, 2, 2);
    for (int i = 0; i < 12; i++)
        EXPECT_EXACT(x[i], want[i], "y[%d]", i);
    EXPECT_EXACT(x[0], 4.0, "y[0,0,0] = 1 + table[1][0]");
    EXPECT_EXACT(x[11], -6.0 + 0.125, "y[1,2,1] = -6 + table[1][1]");
    /* negative control: item 1 uses its own ids, not item 0's (ids[1,0] = 0, ids[0,0] = 1) */
    cr_expect(x[6] != -1.0 + table[2], "item 1 took item 0's row");
}
