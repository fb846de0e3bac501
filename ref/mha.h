#ifndef REFENC_MHA_H
#define REFENC_MHA_H

#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "core/config.h"
#include "core/options.h"

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

#endif
