#ifndef REFENC_ENCODER_H
#define REFENC_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/input.h"
#include "core/params.h"
#include "core/status.h"
#include "core/trace.h"
#include "layer.h"

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
