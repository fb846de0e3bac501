#ifndef REFENC_POSITION_IDS_H
#define REFENC_POSITION_IDS_H

#include <stddef.h>
#include <stdint.h>

/* RoBERTa's learned positions (HF create_position_ids_from_input_ids):
 *   m[b,l]   = 1 if tokens[b,l] != padding_idx, else 0
 *   pos[b,l] = (m[b,0] + ... + m[b,l]) * m[b,l] + padding_idx
 * so the non-padding tokens of each item are numbered padding_idx + 1,
 * padding_idx + 2, ... in order (padding between them is skipped), and every
 * padding token gets padding_idx.  The rule reads the tokens, not the key
 * padding mask.
 * pos, tokens: (B, L).  Integer arithmetic: exact.
 * Precondition: padding_idx >= 0 (so the largest position, padding_idx + L,
 * is below 2^63).  Never fails. */
void refenc_position_ids_roberta(int64_t *pos, const int64_t *tokens, size_t B, size_t L,
                                 int64_t padding_idx);

#endif
