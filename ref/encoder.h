#ifndef REFENC_ENCODER_H
#define REFENC_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "layer.h"
#include "params.h"
#include "status.h"
#include "trace.h"

/* The input of one forward pass. */
typedef struct {
    size_t B, L;
    const int64_t *tokens;           /* (B, L) in [0, V), when vocab_size > 0; else NULL   */
    const double *x;                 /* (B, L, D), when vocab_size == 0; else NULL          */
    const uint8_t *key_padding_mask; /* (B, L), 1 = padding, 0 = token; NULL: none          */
    const int64_t *positions;        /* (L) in [0, 2^53) (learned: [0, P)); NULL: 0..L-1    */
    const double *attn_mask;         /* (L, L) additive, finite or -inf; NULL: none         */
} refenc_input;

/* Everything a forward pass on (B, L) writes besides its output: one
 * allocation for the doubles, carved into named buffers. */
typedef struct {
    size_t B, L;
    double *block;
    double *h0, *h1;          /* (B, L, D) hidden state between layers (ping-pong) */
    refenc_layer_work layer;  /* 12 (B, L, D), one (B, L, F), one (B, H, L, L)     */
    double *alibi_slopes;     /* (H)                                                */
    int64_t *positions;       /* (L) 0..L-1, used when the input has none           */
} refenc_workspace;

/* Errors: REFENC_EINVAL / REFENC_ELIMIT (config or shape invalid, see
 * refenc_config_validate_shape), REFENC_ENOMEM.  On error *ws is empty. */
int refenc_workspace_alloc(refenc_workspace *ws, const refenc_config *cfg, size_t B, size_t L,
                           refenc_error *err);
void refenc_workspace_free(refenc_workspace *ws);

/* Checks an input against a config: the right one of tokens / x present,
 * tokens in [0, V), key padding mask entries 0 or 1, positions in range,
 * attn_mask free of NaN and +inf.  Messages name the tensor and the index.
 * NaN and infinities in x are not errors: they propagate (docs/architecture.md).
 * Errors: REFENC_EINVAL, REFENC_ELIMIT. */
int refenc_input_validate(const refenc_input *in, const refenc_config *cfg, refenc_error *err);

/* The encoder stack.
 * y: (B, L, D).
 *   h = embedding(tokens) * sqrt(D)      if vocab_size > 0, else h = x
 *   h = h + PE                           sinusoidal or learned schemes
 *   h = layer_i(h), i = 0 .. N-1         RoPE / ALiBi inside every attention
 *   y = LN(h) if final_norm, else h      nn.TransformerEncoder's norm
 * Trace steps: "embed", the layers' steps (layer.h), "norm" (if final_norm),
 * "output".
 * Errors: REFENC_EINVAL (input invalid, or ws allocated for another shape).
 * On error y is not written. */
int refenc_encoder_forward(double *y, refenc_workspace *ws, const refenc_params *p,
                           const refenc_config *cfg, const refenc_input *in,
                           const refenc_trace *trace, refenc_error *err);

#endif
