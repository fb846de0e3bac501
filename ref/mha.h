#ifndef REFENC_MHA_H
#define REFENC_MHA_H

#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "backward_kernels.h"
#include "core/config.h"
#include "core/options.h"
#include "linear.h"
#include "qk_norm.h"

/* Buffers multi-head attention writes; the caller owns them
 * (refenc_workspace provides them).  Shapes for an input (B, L, D). */
typedef struct {
    double *q, *k, *v;     /* (B, L, D)      projections                          */
    double *qh, *kh, *vh;  /* (B, H, L, Dh)  the projections split into heads     */
    double *ctxh;          /* (B, H, L, Dh)  attention output per head            */
    double *ctx;           /* (B, L, D)      heads merged back                    */
    double *weights;       /* (B, H, L, L)   attention weights                    */
} refenc_mha_work;

/* xh: (B, H, L, Dh)   x: (B, L, D), D = H*Dh.
 * xh[b,h,l,:] = x[b,l, h*Dh : (h+1)*Dh]  (a copy, exact).  Never fails. */
void refenc_heads_split(double *xh, const double *x, size_t B, size_t L, size_t H, size_t Dh);

/* The inverse: x[b,l, h*Dh : (h+1)*Dh] = xh[b,h,l,:]  (exact).  Never fails. */
void refenc_heads_merge(double *x, const double *xh, size_t B, size_t L, size_t H, size_t Dh);

/* Multi-head self-attention in nn.MultiheadAttention's conventions.
 * y, x: (B, L, D)
 * in_proj_weight: (3D, D), rows [0, D) = W_q, [D, 2D) = W_k, [2D, 3D) = W_v
 * in_proj_bias:   (3D), the same blocks.
 * out_proj_weight: (D, D), out_proj_bias: (D).
 *
 *   q = x W_q^T + b_q,  k = x W_k^T + b_k,  v = x W_v^T + b_v      (linear.h)
 *   q, k rotated by RoPE if rope != NULL                             (rope.h)
 *   per head: ctx_h = attention(q_h, k_h, v_h)                      (attention.h)
 *   y = concat_h(ctx_h) W_o^T + b_o
 * Attention weights are left in work->weights.  y must not alias x.
 * Preconditions: D = H*Dh; with rope, Dh even.  Never fails. */
void refenc_mha_forward(double *y, refenc_mha_work *work, const double *x,
                        const double *in_proj_weight, const double *in_proj_bias,
                        const double *out_proj_weight, const double *out_proj_bias,
                        const refenc_attn_options *opt, const refenc_rope_options *rope,
                        size_t B, size_t L, size_t D, size_t H);

/* Grouped-query attention (gqa.h), the general case of the above:
 * y, x: (B, L, D);  E = H*Dh, Ekv = Hkv*Dh,  Hkv divides H, g = H / Hkv.
 * in_proj_weight: (E + 2 Ekv, D), rows [0, E) = W_q, [E, E+Ekv) = W_k,
 *                 [E+Ekv, E+2Ekv) = W_v  (Llama's q_proj, k_proj, v_proj stacked)
 * in_proj_bias:   (E + 2 Ekv), the same blocks, or NULL.
 * out_proj_weight: (D, E), out_proj_bias: (D) or NULL.
 *   q = x W_q^T + b_q  (B, L, E);  k, v (B, L, Ekv)
 *   query head h attends with key/value head h / g   (HF's repeat_kv)
 *   y = concat_h(ctx_h) W_o^T + b_o
 * Dh need not be D / H (Gemma's head_dim).  work's q, qh, kh, vh, ctxh, ctx
 * hold (B, L, E) each; k and v (B, L, Ekv).  With Hkv = H, Dh = D/H it is
 * refenc_mha_forward.  Preconditions: with rope, Dh even.  Never fails. */
void refenc_gqa_forward(double *y, refenc_mha_work *work, const double *x,
                        const double *in_proj_weight, const double *in_proj_bias,
                        const double *out_proj_weight, const double *out_proj_bias,
                        const refenc_attn_options *opt, const refenc_rope_options *rope,
                        size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh);

/* refenc_gqa_forward with Qwen3's q/k normalisation (qk_norm.h): when
 * qk_norm is not NULL, q and k are RMS-normalised head by head right after
 * the projections, before RoPE; NULL is refenc_gqa_forward.  Never fails. */
void refenc_gqa_qk_forward(double *y, refenc_mha_work *work, const double *x,
                           const double *in_proj_weight, const double *in_proj_bias,
                           const double *out_proj_weight, const double *out_proj_bias,
                           const refenc_attn_options *opt, const refenc_rope_options *rope,
                           const refenc_qk_norm *qk_norm,
                           size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh);

/* The same for R selected query rows (rows.h): the queries from xq (B, R, D),
 * the rows `rows` (R) of the layer's attention input, the keys and values
 * from every position of x (B, L, D); y: (B, R, D), work->weights
 * (B, H, R, L).  rows NULL: R = L and xq = x (refenc_gqa_qk_forward).
 * linear: the linear maps' function (NULL: refenc_linear_forward).
 * Never fails. */
void refenc_gqa_rows_forward(double *y, refenc_mha_work *work, const double *xq, const double *x,
                             const int64_t *rows, size_t R,
                             const double *in_proj_weight, const double *in_proj_bias,
                             const double *out_proj_weight, const double *out_proj_bias,
                             const refenc_attn_options *opt, const refenc_rope_options *rope,
                             const refenc_qk_norm *qk_norm,
                             size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh,
                             refenc_linear_fn *linear);

/* Buffers the backward writes; the caller owns them (refenc_grad_workspace
 * provides them).  After refenc_mha_backward they hold the intermediates. */
typedef struct {
    double *dctx;          /* (B, L, max(D, E)) d of the merged heads (then scratch) */
    double *dctxh;         /* (B, H, L, Dh)  dO, the attention output's gradient  */
    double *dqh, *dkh, *dvh; /* (B, H, L, Dh) dq, dk (un-rotated), dv per query head */
    double *dq, *dk, *dv;  /* (B, L, E), (B, L, Ekv) x 2: the projections' gradients */
    double *dP, *dS;       /* (B, H, L, L)   d weights, d scores                  */
    double *Drow;          /* (B, H, L)      D_i = rowsum(dO * O)                 */
    const refenc_backward_kernels *kernels; /* NULL: the reference's (backward_kernels.h) */
} refenc_mha_grad_work;

/* Backward of refenc_mha_forward (docs/gradients.md).  dy: (B, L, D), the
 * gradient with respect to y; x: (B, L, D), the forward's input; w: the
 * forward's work buffers as it left them (saved: ctx, the heads qh, kh
 * after RoPE, vh, weights, ctxh).
 *   dctx = dy W_o  -> heads dO;   (dq, dk, dv) = attention_backward (attention.h)
 *   dq, dk rotated back by -theta (rope.h) when rope != NULL
 *   dx = dq W_q + dk W_k + dv W_v       dx: (B, L, D), written
 *   d_out_proj_weight += dy^T ctx, d_out_proj_bias += sum dy   accumulated
 *   d_in_proj_weight rows [0,D) += dq^T x, [D,2D) dk^T x, [2D,3D) dv^T x;
 *   d_in_proj_bias the same blocks                             accumulated
 * dx must not alias dy, x or g's buffers.  Never fails. */
void refenc_mha_backward(double *dx, double *d_in_proj_weight, double *d_in_proj_bias,
                         double *d_out_proj_weight, double *d_out_proj_bias,
                         refenc_mha_grad_work *g, const double *dy, const double *x,
                         const refenc_mha_work *w,
                         const double *in_proj_weight, const double *out_proj_weight,
                         const refenc_attn_options *opt, const refenc_rope_options *rope,
                         size_t B, size_t L, size_t D, size_t H);

/* Backward of refenc_gqa_forward (docs/gradients.md), the general case of
 * the above: E = H Dh, Ekv = Hkv Dh, g = H / Hkv.  As refenc_mha_backward,
 * with out_proj (D, E) and in_proj's blocks W_q (E rows), W_k, W_v (Ekv
 * rows each); the repeated key/value heads' gradients dkh, dvh (per query
 * head, kept in g) are summed over each group (gqa.h: the adjoint of
 * repeat_kv) before the projections' backward:
 *   dk[b, l, j Dh + d] = sum_{i<g} dkh[b, j g + i, l, d]   (the same for v)
 * d_in_proj_bias may be NULL (bias-free), d_out_proj_bias too.  g's buffers
 * hold (B, L, max(D, E)) each.  Never fails. */
void refenc_gqa_backward(double *dx, double *d_in_proj_weight, double *d_in_proj_bias,
                         double *d_out_proj_weight, double *d_out_proj_bias,
                         refenc_mha_grad_work *g, const double *dy, const double *x,
                         const refenc_mha_work *w,
                         const double *in_proj_weight, const double *out_proj_weight,
                         const refenc_attn_options *opt, const refenc_rope_options *rope,
                         size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh);

#endif
