/* Learned positional encoding (ref/learned_pe.h): y = x + table[pos].
 * Dyadic values: every sum is exact. */
#include <stdint.h>

#include <criterion/criterion.h>

#include "../../ref/learned_pe.h"
#include "unit.h"

Test(learned_pe, adds_the_table_row_of_each_position_to_every_batch_item)
{
    const double table[3 * 2] = {0.5, -0.25, 1.5, 2.0, -3.0, 0.125}; /* (P = 3, D = 2) */
    const int64_t pos[3] = {2, 0, 2};                                 /* explicit, repeated */
    double x[2 * 3 * 2], y[2 * 3 * 2];
    for (int i = 0; i < 12; i++)
        x[i] = 0.75 * i - 4.0;
    refenc_learned_pe_forward(y, x, pos, table, 2, 3, 3, 2);
    for (int b = 0; b < 2; b++)
        for (int l = 0; l < 3; l++)
            for (int d = 0; d < 2; d++) {
                const int i = (b * 3 + l) * 2 + d;
                EXPECT_EXACT(y[i], x[i] + table[pos[l] * 2 + d], "y[%d,%d,%d]", b, l, d);
            }
    /* negative control: row l instead of row pos[l] (l = 1 has pos 0, row 1 differs) */
    cr_expect(y[1 * 2 + 0] != x[1 * 2 + 0] + table[1 * 2 + 0], "indexed by l, not by pos[l]");

    refenc_learned_pe_forward(x, x, pos, table, 2, 3, 3, 2); /* y may alias x */
    for (int i = 0; i < 12; i++)
        EXPECT_EXACT(x[i], y[i], "in place, element %d", i);
}
