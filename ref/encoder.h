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
    int64_t *ids;             /* (B, L) token types when the input has none (all 0), *
                               * then RoBERTa's position ids; NULL unless T > 0 or  *
                               * position_ids is "roberta"                          */
} refenc_workspace;

/* Errors: REFENC_EINVAL / REFENC_ELIMIT (config or shape invalid, see
 * refenc_config_validate_shape), REFENC_ENOMEM.  On error *ws is empty. */
int refenc_workspace_alloc(refenc_workspace *ws, const refenc_config *cfg, size_t B, size_t L,
                           refenc_error *err);
void refenc_workspace_free(refenc_workspace *ws);

/* A workspace for refenc_encoder_embed alone: the positions and ids, no
 * layer buffers (refenc_encoder_forward refuses it with REFENC_EINVAL).
 * Errors: as refenc_workspace_alloc. */
int refenc_workspace_alloc_embed(refenc_workspace *ws, const refenc_config *cfg, size_t B, size_t L,
                                 refenc_error *err);

/* The encoder stack.
 * y: (B, L, D), or (B, R, D) with rows (below).
 *   h = E[tokens] * sqrt(D)              if vocab_size > 0 and scale_embedding,
 *   h = E[tokens]                        if vocab_size > 0, not scale_embedding,
 *   h = x                                otherwise                (embedding.h)
 *   h = h + TT[token_types]              if type_vocab_size > 0 (types 0 when
 *                                        the input has none)
 *   h = h + PE                           sinusoidal or learned schemes; learned
 *                                        positions 0..L-1 (or in.positions), or
 *                                        RoBERTa's from the tokens (position_ids.h)
 *   h = LN_emb(h)                        if embedding_norm, with embedding_norm_eps
 *   h = layer_i(h), i = 0 .. N-1         RoPE / ALiBi inside every attention
 *   y = LN(h) if final_norm, else h      nn.TransformerEncoder's norm
 * The sums are in HF BertEmbeddings' order: (word + type) + position.
 * With selected rows (in->rows, rows.h) the last layer computes its keys
 * and values at every position and the rest on the R rows alone: y, the
 * last layer's steps and "norm" are (B, R, D), its weights (B, H, R, L)
 * (refenc_layer_rows_forward); the pooling is refused with rows.
 * Trace steps: "embed" (the embedding module's output, after LN_emb), the
 * layers' steps (layer.h), "norm" (if final_norm), "output", and with a
 * pooling "embedding" (B, D), the pooled y (pooling.h; y is the caller's
 * out.output, the embedding reaches the caller through the trace).
 * Errors: REFENC_EINVAL (input invalid, or ws allocated for another shape).
 * On error y is not written. */
int refenc_encoder_forward(double *y, refenc_workspace *ws, const refenc_params *p,
                           const refenc_config *cfg, const refenc_input *in,
                           const refenc_trace *trace, refenc_error *err);

/* h (B, L, D) = the stack's "embed" step alone (the first five lines
 * above): the input of layer 0, without running any layer.  Errors and ws
 * as refenc_encoder_forward. */
int refenc_encoder_embed(double *h, refenc_workspace *ws, const refenc_params *p,
                         const refenc_config *cfg, const refenc_input *in, refenc_error *err);

/* ---- backward (docs/gradients.md) ---- */

/* Everything refenc_encoder_backward writes besides the gradients: one
 * allocation, carved into named buffers. */
typedef struct {
    size_t B, L, n_layers;
    double *block;
    double *acts;             /* (N + 1, B, L, D): acts[i] the input of layer i,  *
                               * acts[N] the last layer's output                   */
    double *e;                /* (B, L, D) the embedding sum, LN_emb's input        */
    double *dh0, *dh1;        /* (B, L, D) the gradient between layers (ping-pong)  */
    refenc_layer_grad_work layer; /* the layer's backward buffers: after the call,  *
                               * those of layer 0 (dP, dS, D_i of its attention)    */
    const refenc_backward_kernels *kernels; /* the kernels the backward calls: NULL   *
                               * (refenc_grad_workspace_alloc's) for the reference's; *
                               * a named backward bug's table (tool/backward_bugs.h)  */
} refenc_grad_workspace;

/* Errors: REFENC_EINVAL / REFENC_ELIMIT (config or shape invalid, or the
 * gradients plus this workspace above REFENC_MAX_BYTES), REFENC_ENOMEM.
 * On error *g is empty. */
int refenc_grad_workspace_alloc(refenc_grad_workspace *g, const refenc_config *cfg, size_t B,
                                size_t L, refenc_error *err);
void refenc_grad_workspace_free(refenc_grad_workspace *g);

/* The stack's backward: the gradients of a loss whose gradient with respect
 * to the output y is dy (B, L, D) — the upstream gradient, an input (seeded
 * or the user's).  Nothing is saved between the calls: the backward
 * recomputes the forward (bit for bit: the same kernels on the same inputs),
 * keeping each layer's input in g->acts, then runs back:
 *   final norm (if any), layer N-1 .. 0 (refenc_layer_backward, which
 *   recomputes its layer's forward), LN_emb, then the scatter-adds:
 *   learned positions (summed over the batch; RoBERTa's ids from the tokens),
 *   token types (types 0 when the input has none), the token embedding
 *   (times sqrt(D) when scale_embedding).  Sinusoidal PE, ALiBi and RoPE
 *   have no parameters.
 * grad: the parameters' gradients, a refenc_params of the same config
 *   (refenc_params_alloc gives it zeroed): every gradient is accumulated
 *   (+=), so a zeroed grad receives dL/dparam, each a sum over the B*L tokens.
 * dx: NULL, or (B, L, D): the gradient with respect to the stack's input x
 *   (vocab_size = 0), or to the token embedding's output E[tokens] (s)
 *   (vocab_size > 0).  Written.
 * Errors: REFENC_EINVAL (input invalid, ws or g allocated for another
 * shape, or grad for another config).
 * On error nothing is written. */
int refenc_encoder_backward(refenc_params *grad, double *dx, refenc_grad_workspace *g,
                            refenc_workspace *ws, const refenc_params *p,
                            const refenc_config *cfg, const refenc_input *in, const double *dy,
                            refenc_error *err);

/* The same, reporting through trace (NULL: none) the gradient of each
 * step the backward passes, by the forward step's name: "layers.{i}.output"
 * (the gradient of layer i's output, i = N-1 .. 0), then "embed" (of layer
 * 0's input), each (B, L, D) -- the golden's grad.<step> tensors
 * (docs/golden-format.md, "Gradients"). */
int refenc_encoder_backward_traced(refenc_params *grad, double *dx, refenc_grad_workspace *g,
                                   refenc_workspace *ws, const refenc_params *p,
                                   const refenc_config *cfg, const refenc_input *in,
                                   const double *dy, const refenc_trace *trace, refenc_error *err);

#endif
