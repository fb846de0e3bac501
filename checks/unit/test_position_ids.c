/* RoBERTa's position ids (ref/position_ids.h), worked out by hand from HF's
 * create_position_ids_from_input_ids: mask = tokens != padding_idx,
 * pos = cumsum(mask) * mask + padding_idx. */
#include <stdint.h>

#include <criterion/criterion.h>

#include "../../ref/position_ids.h"
#include "unit.h"

/* padding_idx = 1.  Item 0: right padding; item 1: left padding and a pad
 * in the middle (skipped: the tokens after it continue the count); item 2:
 * no padding.
 *   tokens [0, 5, 7, 1, 1]  ->  [2, 3, 4, 1, 1]
 *   tokens [1, 1, 4, 1, 9]  ->  [1, 1, 2, 1, 3]
 *   tokens [8, 8, 8, 8, 8]  ->  [2, 3, 4, 5, 6] */
Test(position_ids, roberta_numbers_non_padding_tokens_from_padding_idx_plus_one)
{
    const int64_t tokens[15] = {0, 5, 7, 1, 1, 1, 1, 4, 1, 9, 8, 8, 8, 8, 8};
    const int64_t want[15] = {2, 3, 4, 1, 1, 1, 1, 2, 1, 3, 2, 3, 4, 5, 6};
    int64_t pos[15];
    refenc_position_ids_roberta(pos, tokens, 3, 5, 1);
    for (int i = 0; i < 15; i++)
        cr_expect_eq(pos[i], want[i], "pos[%d][%d] = %lld, want %lld", i / 5, i % 5,
                     (long long)pos[i], (long long)want[i]);
    /* negative control: positions from 0 (the bug variant roberta_positions_from_zero)
     * differ in every item, from its first non-padding token on */
    for (int b = 0; b < 3; b++) {
        int differ = 0;
        for (int l = 0; l < 5; l++)
            differ |= pos[b * 5 + l] != l;
        cr_expect(differ, "item %d: positions 0 .. L-1", b);
    }
    cr_expect_eq(pos[0], 2, "the first token is position padding_idx + 1, not 0");
}

/* padding_idx 0 (a BERT-style vocabulary with RoBERTa's rule): the first
 * token is position 1, the count reads the tokens, nothing else. */
Test(position_ids, roberta_with_padding_idx_zero)
{
    const int64_t tokens[4] = {3, 0, 2, 2};
    const int64_t want[4] = {1, 0, 2, 3};
    int64_t pos[4];
    refenc_position_ids_roberta(pos, tokens, 1, 4, 0);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(pos[i], want[i], "pos[0][%d] = %lld", i, (long long)pos[i]);
}
