#ifndef REFENC_LAYER_H
#define REFENC_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "mha.h"
#include "core/params.h"
#include "core/trace.h"

/* Buffers one encoder layer writes; the caller owns them. */
typedef struct {
    double *ln;        /* (B, L, D)  LayerNorm output                       */
    double *attn;      /* (B, L, D)  attention block output                 */
    double *resid;     /* (B, L, D)  residual stream inside the layer       */
    double *ffn;       /* (B, L, D)  FFN output                             */
    double *hidden;    /* (B, L, F)  FFN hidden activations; (B, L, 2F) gated */
    refenc_mha_work mha;
    refenc_linear_fn *linear; /* the linear maps' (linear.h): NULL, the reference's *
                               * refenc_linear_forward; a tool's faster map of the  *
                               * same doubles (tool/linear_blocked.h)               */
} refenc_layer_work;

/* One encoder layer, in nn.TransformerEncoderLayer's structure.
 * y, x: (B, L, D); y must not alias x.
 *
 * Pre-LN  (norm_first=True):   h = x + MHA(LN1(x));   y = h + FFN(LN2(h))
 * Post-LN (norm_first=False):  h = LN1(x + MHA(x));   y = LN2(h + FFN(h))
 *
 * Pre-LN's LN1 is the identity when lp->norm1_weight is NULL (layer 0 under
 * skip_first_prenorm, ModernBERT's attn_norm = nn.Identity()); the trace's
 * norm1 is then x.  With sandwich_norm (lp->post_attn_norm_weight and
 * post_ffn_norm_weight set; Pre-LN) each sublayer's output is normalised
 * before the residual adds it: h = x + LN1'(MHA(LN1(x))), y = h +
 * LN2'(FFN(LN2(h))); the trace's self_attn and ffn are then the normalised
 * outputs, the values the residual adds.  The backward refuses it
 * (refenc_grad_workspace_alloc).
 * opt carries the masks, ALiBi slopes and temperature; rope is NULL unless
 * the positional scheme is RoPE.  The six linear maps (q, k, v, out_proj,
 * linear1, linear2; three in a gated FFN's linear1) are work->linear's.  No dropout (refenc_layer_backward below).
 * Trace steps, in forward order, with prefix "layers.{index}.":
 *   Pre-LN:  norm1, self_attn.weights, self_attn, norm2, ffn, output
 *   Post-LN: self_attn.weights, self_attn, norm1, ffn, norm2, output
 * (self_attn is the attention block's output after out_proj; ffn is the FFN
 * output after linear2; norm1/norm2 are the LayerNorm outputs.)
 * Never fails. */
void refenc_layer_forward(double *y, refenc_layer_work *work, const double *x,
                          const refenc_layer_params *lp, const refenc_config *cfg,
                          const refenc_attn_options *opt, const refenc_rope_options *rope,
                          size_t B, size_t L, size_t index, const refenc_trace *trace);

/* The same on R selected query rows (rows.h), the last layer of a rows
 * run: y (B, R, D); the keys and values come from every position of x
 * (B, L, D), everything else (LN1's rows, the queries, attention, the
 * residual, the FFN, the norms) is computed on the rows alone, gathered
 * once from x (and from LN1(x) under Pre-LN).  The trace steps are the
 * same with (B, R, D) and weights (B, H, R, L).  rows NULL: R = L, the
 * whole layer (refenc_layer_forward).  Never fails. */
void refenc_layer_rows_forward(double *y, refenc_layer_work *work, const double *x,
                               const refenc_layer_params *lp, const refenc_config *cfg,
                               const refenc_attn_options *opt, const refenc_rope_options *rope,
                               size_t B, size_t L, const int64_t *rows, size_t R, size_t index,
                               const refenc_trace *trace);

/* Buffers the layer's backward writes; the caller owns them
 * (refenc_grad_workspace provides them). */
typedef struct {
    double *y;         /* (B, L, D)  the recomputed output (unused after)            */
    double *a;         /* (B, L, D)  Pre-LN: LN1(x); Post-LN: x + MHA(x), LN1's input */
    double *pre;       /* (B, L, F)  the FFN's pre-activation, recomputed; (B, L, 3F) *
                        * for the gated FFN (refenc_ffn_block_backward)              */
    double *dpre;      /* (B, L, F)  its gradient; (B, L, 2F) for the gated FFN       */
    double *d1, *d2, *d3; /* (B, L, D) gradients inside the layer                     */
    refenc_mha_grad_work mha; /* its kernels: the layer's (refenc_layer_backward sets them) */
    const refenc_backward_kernels *kernels; /* NULL: the reference's (backward_kernels.h) */
} refenc_layer_grad_work;

/* Backward of one layer (docs/gradients.md).  dy: (B, L, D), the gradient
 * with respect to y; x: (B, L, D), the layer's input (the only thing saved:
 * the backward first recomputes the forward from x into w, bit for bit,
 * then LN1(x) (Pre-LN) or x + MHA(x) (Post-LN) into g->a).
 *   Pre-LN:  dh = dy + LN2^T(FFN^T dy);   dx = dh + LN1^T(MHA^T dh)
 *   Post-LN: dr2 = LN2^T dy;  dh = dr2 + FFN^T dr2;  dr1 = LN1^T dh;
 *            dx = dr1 + MHA^T dr1
 * dx: (B, L, D), written.  dlp: the gradients of the layer's parameters,
 * the same layouts as lp, accumulated (+=).  After the call g->mha holds
 * the attention intermediates dP, dS, D_i and w the forward's buffers.
 * dx must not alias dy, x or any buffer of g or w.  Never fails. */
void refenc_layer_backward(double *dx, const refenc_layer_params *dlp, refenc_layer_grad_work *g,
                           refenc_layer_work *w, const double *dy, const double *x,
                           const refenc_layer_params *lp, const refenc_config *cfg,
                           const refenc_attn_options *opt, const refenc_rope_options *rope,
                           size_t B, size_t L);

#endif
