/* Multi-head self-attention in MPFR (mha.h), nn.MultiheadAttention layouts:
 *   q = x W_q^T + b_q, k = x W_k^T + b_k, v = x W_v^T + b_v   (in_proj blocks)
 *   q, k rotated by RoPE if given;  ctx_h = attention(q_h, k_h, v_h)
 *   y = concat_h(ctx_h) W_o^T + b_o */
#include "internal.h"

void refenc_mpk_heads_split(mpfr_ptr xh, mpfr_srcptr x, size_t B, size_t L, size_t H, size_t Dh)
{
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t l = 0; l < L; l++)
                for (size_t d = 0; d < Dh; d++) /* xh[b,h,l,d] = x[b,l,h*Dh+d] */
                    mpfr_set(xh + ((b * H + h) * L + l) * Dh + d,
                             x + (b * L + l) * H * Dh + h * Dh + d, MPFR_RNDN);
}

void refenc_mpk_heads_merge(mpfr_ptr x, mpfr_srcptr xh, size_t B, size_t L, size_t H, size_t Dh)
{
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t l = 0; l < L; l++)
                for (size_t d = 0; d < Dh; d++)
                    mpfr_set(x + (b * L + l) * H * Dh + h * Dh + d,
                             xh + ((b * H + h) * L + l) * Dh + d, MPFR_RNDN);
}

void refenc_mpk_mha_forward(mpfr_ptr y, refenc_mp_mha_work *w, mpfr_srcptr x,
                            mpfr_srcptr in_proj_weight, mpfr_srcptr in_proj_bias,
                            mpfr_srcptr out_proj_weight, mpfr_srcptr out_proj_bias,
                            const refenc_mp_attn_options *opt, const refenc_mp_rope_options *rope,
                            size_t B, size_t L, size_t D, size_t H, refenc_mp_ws *ws)
{
    const size_t Dh = D / H, BL = B * L;
    refenc_mpk_linear_forward(w->q, x, in_proj_weight, in_proj_bias, BL, D, D, ws);
    refenc_mpk_linear_forward(w->k, x, in_proj_weight + D * D, in_proj_bias + D, BL, D, D, ws);
    refenc_mpk_linear_forward(w->v, x, in_proj_weight + 2 * D * D, in_proj_bias + 2 * D, BL, D, D,
                              ws);
    refenc_mpk_heads_split(w->qh, w->q, B, L, H, Dh);
    refenc_mpk_heads_split(w->kh, w->k, B, L, H, Dh);
    refenc_mpk_heads_split(w->vh, w->v, B, L, H, Dh);
    if (rope != NULL) {
        refenc_mpk_rope_forward(w->qh, w->qh, rope->positions, B * H, L, Dh, rope->base,
                                rope->layout, ws);
        refenc_mpk_rope_forward(w->kh, w->kh, rope->positions, B * H, L, Dh, rope->base,
                                rope->layout, ws);
    }
    refenc_mpk_attention_forward(w->ctxh, w->weights, w->qh, w->kh, w->vh, opt, B, H, L, Dh, ws);
    if (opt->merge_without_transpose) /* bug variant: the memory of (B, H, L, Dh) read as (B, L, D) */
        for (size_t i = 0; i < BL * D; i++)
            mpfr_set(w->ctx + i, w->ctxh + i, MPFR_RNDN);
    else
        refenc_mpk_heads_merge(w->ctx, w->ctxh, B, L, H, Dh);
    refenc_mpk_linear_forward(y, w->ctx, out_proj_weight, out_proj_bias, BL, D, D, ws);
}

void refenc_mp_mha_work_alloc(refenc_mp_mha_work *w, refenc_mp_arena *ar, size_t B, size_t L,
                              size_t D, size_t H, mpfr_prec_t prec)
{
    const size_t BLD = B * L * D;
    mpfr_ptr *bufs[] = {&w->q, &w->k, &w->v, &w->qh, &w->kh, &w->vh, &w->ctxh, &w->ctx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        *bufs[i] = refenc_mp_arena_alloc(ar, BLD, prec);
    w->weights = refenc_mp_arena_alloc(ar, B * H * L * L, prec);
}

typedef struct {
    const double *x, *ipw, *ipb, *opw, *opb;
    const refenc_attn_options *opt;
    const refenc_rope_options *rope;
    size_t B, L, D, H;
} mha_args;

static int mha_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const mha_args *a = ctx;
    const size_t D = a->D, H = a->H, BLD = a->B * a->L * D, Dh = D / H;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    void *oh = NULL;
    const refenc_mp_attn_options *opt = NULL;
    int st = refenc_mp_ws_alloc(&ws, prec, refenc_mpk_ws_tmp(D, 1, a->L, Dh),
                                refenc_mpk_ws_ptr(D, 1, a->L, Dh));
    const int ok = refenc_mp_attn_options_from_d(&oh, &opt, a->opt, H, a->L);
    mpfr_ptr x = refenc_mp_arena_from_d(&ar, a->x, BLD, 53);
    mpfr_ptr ipw = refenc_mp_arena_from_d(&ar, a->ipw, 3 * D * D, 53);
    mpfr_ptr ipb = refenc_mp_arena_from_d(&ar, a->ipb, 3 * D, 53);
    mpfr_ptr opw = refenc_mp_arena_from_d(&ar, a->opw, D * D, 53);
    mpfr_ptr opb = refenc_mp_arena_from_d(&ar, a->opb, D, 53);
    mpfr_ptr base = a->rope ? refenc_mp_arena_from_d(&ar, &a->rope->base, 1, 53) : NULL;
    mpfr_ptr y = refenc_mp_arena_alloc(&ar, BLD, prec);
    refenc_mp_mha_work w;
    refenc_mp_mha_work_alloc(&w, &ar, a->B, a->L, D, H, prec);
    if (st || !ok || ar.failed) {
        st = refenc_mp_enomem(err, "multi-head attention", prec);
    } else {
        refenc_mp_rope_options rope = {a->rope ? a->rope->layout : REFENC_ROPE_HALF, base,
                                       a->rope ? a->rope->positions : NULL};
        refenc_mpk_mha_forward(y, &w, x, ipw, ipb, opw, opb, opt, a->rope ? &rope : NULL, a->B,
                               a->L, D, H, &ws);
        const size_t sw[4] = {a->B, H, a->L, a->L}, sy[3] = {a->B, a->L, D};
        st = refenc_mp_sink_emit(sink, "weights", w.weights, 4, sw);
        if (st == REFENC_OK)
            st = refenc_mp_sink_emit(sink, "y", y, 3, sy);
    }
    refenc_mp_arena_free(&ar);
    refenc_mp_attn_options_free(oh);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_mha_forward(double *y, double *weights, const double *x,
                          const double *in_proj_weight, const double *in_proj_bias,
                          const double *out_proj_weight, const double *out_proj_bias,
                          const refenc_attn_options *opt, const refenc_rope_options *rope,
                          size_t B, size_t L, size_t D, size_t H,
                          mpfr_prec_t prec, refenc_mp_report *rep)
{
    mha_args a = {x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, opt, rope,
                  B, L, D, H};
    const refenc_mp_output outs[] = {{"weights", weights}, {"y", y}};
    return refenc_mp_run_twin(mha_eval, &a, prec, rep, outs, 2);
}
