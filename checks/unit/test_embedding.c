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
    refenc_embedding_forward(x, tokens, table, 2, 3, 3, 4);
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
    refenc_embedding_forward(x, tokens, table, 1, 2, 2, 3);
    for (int l = 0; l < 2; l++)
        for (int d = 0; d < 3; d++) {
            const double want = (double)(table[tokens[l] * 3 + d] * sqrtl(3.0L));
            EXPECT_ULPS(x[l * 3 + d], want, 3, "x[0,%d,%d]", l, d);
            /* negative control: scale by D instead of sqrt(D) */
            EXPECT_ULPS_REJECTS(x[l * 3 + d], 3.0 * table[tokens[l] * 3 + d], 3,
                                "scale by D, entry %d,%d", l, d);
        }
}
