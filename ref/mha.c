/* Multi-head self-attention in double (mha.h), nn.MultiheadAttention layouts:
 *   q = x W_q^T + b_q, k = x W_k^T + b_k, v = x W_v^T + b_v   (in_proj blocks)
 *   q, k rotated by RoPE if given;  ctx_h = attention(q_h, k_h, v_h)
 *   y = concat_h(ctx_h) W_o^T + b_o
 * Backward (below): dctx = dy W_o, per head attention^T, dq and dk rotated by
 * -theta, dx = dq W_q + dk W_k + dv W_v. */
#include "mha.h"

#include <string.h>

#include "gqa.h"
#include "linear.h"
#include "qk_norm.h"
#include "rope.h"

void refenc_heads_split(double *xh, const double *x, size_t B, size_t L, size_t H, size_t Dh)
{
    /* (B, L, H, Dh) -> (B, H, L, Dh) */
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t l = 0; l < L; l++)
                memcpy(xh + ((b * H + h) * L + l) * Dh,   /* xh[b,h,l,:]           */
                       x + (b * L + l) * H * Dh + h * Dh, /* x[b,l,h*Dh:(h+1)*Dh] */
                       Dh * sizeof(double));
}

void refenc_heads_merge(double *x, const double *xh, size_t B, size_t L, size_t H, size_t Dh)
{
    /* (B, H, L, Dh) -> (B, L, H, Dh): the transpose back, not a reinterpretation */
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t l = 0; l < L; l++)
                memcpy(x + (b * L + l) * H * Dh + h * Dh,
                       xh + ((b * H + h) * L + l) * Dh,
                       Dh * sizeof(double));
}

/* Per-head K and V from their projections k, v: (B, L, Hkv*Dh): split into
 * (B, Hkv, L, Dh) in scratch (ctxh, free until attention writes it), then
 * repeated to the H query heads (gqa.h).  With Hkv = H a split alone. */
static void kv_heads(refenc_mha_work *w, size_t B, size_t L, size_t H, size_t Hkv, size_t Dh)
{
    if (Hkv == H) {
        refenc_heads_split(w->kh, w->k, B, L, H, Dh);
        refenc_heads_split(w->vh, w->v, B, L, H, Dh);
        return;
    }
    refenc_heads_split(w->ctxh, w->k, B, L, Hkv, Dh);
    refenc_kv_heads_repeat(w->kh, w->ctxh, B, H, Hkv, L, Dh);
    refenc_heads_split(w->ctxh, w->v, B, L, Hkv, Dh);
    refenc_kv_heads_repeat(w->vh, w->ctxh, B, H, Hkv, L, Dh);
}

void refenc_gqa_forward(double *y, refenc_mha_work *w, const double *x,
                        const double *in_proj_weight, const double *in_proj_bias,
                        const double *out_proj_weight, const double *out_proj_bias,
                        const refenc_attn_options *opt, const refenc_rope_options *rope,
                        size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh)
{
    refenc_gqa_qk_forward(y, w, x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, opt,
                          rope, NULL, B, L, D, H, Hkv, Dh);
}

void refenc_gqa_qk_forward(double *y, refenc_mha_work *w, const double *x,
                           const double *in_proj_weight, const double *in_proj_bias,
                           const double *out_proj_weight, const double *out_proj_bias,
                           const refenc_attn_options *opt, const refenc_rope_options *rope,
                           const refenc_qk_norm *qk_norm,
                           size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh)
{
    refenc_gqa_rows_forward(y, w, x, x, NULL, L, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias,
                            opt, rope, qk_norm, B, L, D, H, Hkv, Dh, refenc_linear_forward);
}

void refenc_gqa_rows_forward(double *y, refenc_mha_work *w, const double *xq, const double *x,
                             const int64_t *rows, size_t R,
                             const double *in_proj_weight, const double *in_proj_bias,
                             const double *out_proj_weight, const double *out_proj_bias,
                             const refenc_attn_options *opt, const refenc_rope_options *rope,
                             const refenc_qk_norm *qk_norm,
                             size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh,
                             refenc_linear_fn *linear)
{
    const size_t BL = B * L, BR = B * R, E = H * Dh, Ekv = Hkv * Dh;
    if (linear == NULL)
        linear = refenc_linear_forward;
    const double *W_q = in_proj_weight;               /* in_proj_weight[0:E, :]          */
    const double *W_k = in_proj_weight + E * D;       /* in_proj_weight[E:E+Ekv, :]      */
    const double *W_v = in_proj_weight + (E + Ekv) * D; /* in_proj_weight[E+Ekv:E+2Ekv, :] */
    const double *b_q = in_proj_bias;
    const double *b_k = in_proj_bias != NULL ? in_proj_bias + E : NULL; /* NULL: bias-free */
    const double *b_v = in_proj_bias != NULL ? in_proj_bias + E + Ekv : NULL;

    /* projections: the queries' rows (B*R, D) -> q (B*R, E); every position
     * (B*L, D) -> k and v (B*L, Ekv) */
    linear(w->q, xq, W_q, b_q, BR, D, E);
    linear(w->k, x, W_k, b_k, BL, D, Ekv);
    linear(w->v, x, W_v, b_v, BL, D, Ekv);
    if (qk_norm != NULL) /* Qwen3: every head of q and k RMS-normalised, before RoPE */
        refenc_qk_norm_rows_forward(w->q, w->k, qk_norm, BR, BL, H, Hkv, Dh);

    refenc_heads_split(w->qh, w->q, B, R, H, Dh); /* qh: (B, H, R, Dh) */
    kv_heads(w, B, L, H, Hkv, Dh); /* kh, vh: (B, H, L, Dh) */

    /* rotating the repeated heads rotates each key/value head g times, the
     * same operations on the same values: bit for bit HF's rotate-then-repeat */
    if (rope != NULL) { /* rotate every head's q and k at its position */
        refenc_rope_rows_forward(w->qh, w->qh, rope->positions, rows, B * H, R, L, Dh, rope->base, rope->layout, rope->scaling);
        refenc_rope_scaled_forward(w->kh, w->kh, rope->positions, B * H, L, Dh, rope->base, rope->layout, rope->scaling);
    }

    refenc_attention_rows_forward(w->ctxh, w->weights, w->qh, w->kh, w->vh, rows, opt, B, H, R, L, Dh);

    refenc_heads_merge(w->ctx, w->ctxh, B, R, H, Dh);
    linear(y, w->ctx, out_proj_weight, out_proj_bias, BR, E, D); /* (B*R, E) -> (B*R, D) */
}

void refenc_mha_forward(double *y, refenc_mha_work *w, const double *x,
                        const double *in_proj_weight, const double *in_proj_bias,
                        const double *out_proj_weight, const double *out_proj_bias,
                        const refenc_attn_options *opt, const refenc_rope_options *rope,
                        size_t B, size_t L, size_t D, size_t H)
{
    refenc_gqa_forward(y, w, x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, opt,
                       rope, B, L, D, H, H, D / H);
}

/* dx = sum over the three projections p of dp W_p; dW_p, db_p += (linear.h):
 * W_q rows [0, E), W_k [E, E + Ekv), W_v [E + Ekv, E + 2 Ekv).  tmp (B*L, D)
 * is scratch. */
static void projections_backward(double *dx, double *tmp, double *d_in_w, double *d_in_b,
                                 const refenc_mha_grad_work *g, const double *x,
                                 const double *in_proj_weight, size_t BL, size_t D, size_t E,
                                 size_t Ekv)
{
    const refenc_backward_kernels *K = refenc_backward_kernels_or_reference(g->kernels);
    const double *dp[3] = {g->dq, g->dk, g->dv};
    const size_t row[3] = {0, E, E + Ekv}, out[3] = {E, Ekv, Ekv};
    for (size_t p = 0; p < 3; p++) {
        K->linear(p == 0 ? dx : tmp, d_in_w + row[p] * D, d_in_b != NULL ? d_in_b + row[p] : NULL, dp[p], x,
                  in_proj_weight + row[p] * D, BL, D, out[p]);
        if (p > 0)
            for (size_t i = 0; i < BL * D; i++)
                dx[i] += tmp[i];
    }
}

/* The projections' gradient of the key/value heads: dkh (B, H, L, Dh),
 * the gradient of the repeated heads, summed over each group into
 * (B, Hkv, L, Dh) in scratch (gqa.h), then merged into dk (B, L, Ekv). */
static void kv_heads_backward(double *dk, double *scratch, const double *dkh, size_t B, size_t L,
                              size_t H, size_t Hkv, size_t Dh)
{
    if (Hkv == H) {
        refenc_heads_merge(dk, dkh, B, L, H, Dh);
        return;
    }
    refenc_kv_heads_reduce(scratch, dkh, B, H, Hkv, L, Dh);
    refenc_heads_merge(dk, scratch, B, L, Hkv, Dh);
}

void refenc_gqa_backward(double *dx, double *d_in_proj_weight, double *d_in_proj_bias,
                         double *d_out_proj_weight, double *d_out_proj_bias,
                         refenc_mha_grad_work *g, const double *dy, const double *x,
                         const refenc_mha_work *w,
                         const double *in_proj_weight, const double *out_proj_weight,
                         const refenc_attn_options *opt, const refenc_rope_options *rope,
                         size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh)
{
    const size_t BL = B * L, E = H * Dh, Ekv = Hkv * Dh;
    const refenc_backward_kernels *K = refenc_backward_kernels_or_reference(g->kernels);

    /* y = ctx W_o^T + b_o, ctx (B*L, E) */
    K->linear(g->dctx, d_out_proj_weight, d_out_proj_bias, dy, w->ctx, out_proj_weight, BL, E, D);
    refenc_heads_split(g->dctxh, g->dctx, B, L, H, Dh);

    K->attention(g->dqh, g->dkh, g->dvh, g->dP, g->dS, g->Drow, g->dctxh,
                              w->qh, w->kh, w->vh, w->weights, w->ctxh, opt, B, H, L, Dh);

    if (rope != NULL) { /* q and k were rotated by +theta: their gradients by -theta */
        K->rope(g->dqh, g->dqh, rope->positions, B * H, L, Dh, rope->base, rope->layout, rope->scaling);
        K->rope(g->dkh, g->dkh, rope->positions, B * H, L, Dh, rope->base, rope->layout, rope->scaling);
    }
    refenc_heads_merge(g->dq, g->dqh, B, L, H, Dh);
    /* key/value head j served query heads j g .. j g + g - 1: their sum (dctx free until below) */
    kv_heads_backward(g->dk, g->dctx, g->dkh, B, L, H, Hkv, Dh);
    kv_heads_backward(g->dv, g->dctx, g->dvh, B, L, H, Hkv, Dh);

    projections_backward(dx, g->dctx, d_in_proj_weight, d_in_proj_bias, g, x, in_proj_weight,
                         BL, D, E, Ekv);
}

void refenc_mha_backward(double *dx, double *d_in_proj_weight, double *d_in_proj_bias,
                         double *d_out_proj_weight, double *d_out_proj_bias,
                         refenc_mha_grad_work *g, const double *dy, const double *x,
                         const refenc_mha_work *w,
                         const double *in_proj_weight, const double *out_proj_weight,
                         const refenc_attn_options *opt, const refenc_rope_options *rope,
                         size_t B, size_t L, size_t D, size_t H)
{
    refenc_gqa_backward(dx, d_in_proj_weight, d_in_proj_bias, d_out_proj_weight, d_out_proj_bias,
                        g, dy, x, w, in_proj_weight, out_proj_weight, opt, rope, B, L, D, H, H,
                        D / H);
}
