/* RoBERTa's position ids in the oracle (position_ids.h), from the formula
 *   pos[b,l] = padding_idx                                if tokens[b,l] = padding_idx
 *            = padding_idx + #{k <= l : tokens[b,k] != padding_idx}   otherwise
 * each count taken afresh (not the reference's running count), so that the
 * two implementations share no code. */
#include "internal.h"

void refenc_mpk_position_ids_roberta(int64_t *pos, const int64_t *tokens, size_t B, size_t L,
                                     int64_t padding_idx)
{
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++) {
            if (tokens[b * L + l] == padding_idx) {
                pos[b * L + l] = padding_idx;
                continue;
            }
            int64_t n = 0;
            for (size_t k = 0; k <= l; k++)
                n += tokens[b * L + k] != padding_idx;
            pos[b * L + l] = padding_idx + n;
        }
}
