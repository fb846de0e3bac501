/* The input of one forward pass, and its validation against a config.
 * Shared by the reference (refenc_encoder_forward) and the oracle. */
#ifndef REFENC_INPUT_H
#define REFENC_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "status.h"

/* The input of one forward pass. */
typedef struct {
    size_t B, L;
    const int64_t *tokens;           /* (B, L) in [0, V), when vocab_size > 0; else NULL   */
    const double *x;                 /* (B, L, D), when vocab_size == 0; else NULL          */
    const uint8_t *key_padding_mask; /* (B, L), 1 = padding, 0 = token; NULL: none          */
    const int64_t *positions;        /* (L) in [0, 2^53) (learned: [0, P)); NULL: 0..L-1    */
    const double *attn_mask;         /* (L, L) additive, finite or -inf; NULL: none         */
    const int64_t *token_types;      /* (B, L) in [0, T), when type_vocab_size > 0; NULL:   *
                                      * every position type 0 (as HF's token_type_ids)     */
    const int64_t *rows;             /* (R) the query rows of the last layer, increasing in *
                                      * [0, L) (docs/cli.md, input.rows); NULL: all L      */
    size_t R;                        /* their number; 0 with rows NULL                     */
} refenc_input;

/* The rows the last layer computes: R = in->R with rows, else L. */
size_t refenc_input_rows(const refenc_input *in);

/* Checks a rows list against L: at least one, each an integer in [0, L),
 * strictly increasing (so no duplicate).  where names the field in the
 * message ("input.rows", "in.rows").  Errors: REFENC_EINVAL. */
int refenc_rows_validate(const int64_t *rows, size_t R, size_t L, const char *where, refenc_error *err);

/* Checks an input against a config: the right one of tokens / x present,
 * tokens in [0, V), token types in [0, T) and only when T > 0, key padding
 * mask entries 0 or 1, positions in range and not given under the RoBERTa
 * rule (which derives them from the tokens), attn_mask free of NaN and +inf,
 * rows (if any) valid (refenc_rows_validate) and not with a pooling.
 * Messages name the tensor and the index.
 * NaN and infinities in x are not errors: they propagate (docs/architecture.md).
 * Errors: REFENC_EINVAL, REFENC_ELIMIT. */
int refenc_input_validate(const refenc_input *in, const refenc_config *cfg, refenc_error *err);

#endif
