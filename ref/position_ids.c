/* RoBERTa's position ids in integers (position_ids.h):
 *   pos[b,l] = cumsum_l(tokens != padding_idx) * (tokens[b,l] != padding_idx) + padding_idx */
#include "position_ids.h"

void refenc_position_ids_roberta(int64_t *pos, const int64_t *tokens, size_t B, size_t L,
                                 int64_t padding_idx)
{
    for (size_t b = 0; b < B; b++) {
        const int64_t *t_b = tokens + b * L; /* tokens[b,:] */
        int64_t *p_b = pos + b * L;          /* pos[b,:]    */
        int64_t count = 0;                   /* non-padding tokens in t_b[0..l] */
        for (size_t l = 0; l < L; l++) {
            const int64_t m = t_b[l] != padding_idx;
            count += m;
            p_b[l] = count * m + padding_idx;
        }
    }
}
