/* One encoder layer in double (layer.h):
 *   Pre-LN:   h = x + MHA(LN1(x));   y = h + FFN(LN2(h))
 *             (LN1 the identity in a layer without norm1: skip_first_prenorm)
 * Sandwich (Pre-LN with sandwich_norm, Gemma 2/3):
 *             h = x + LN1'(MHA(LN1(x)));   y = h + LN2'(FFN(LN2(h)))
 *   Post-LN:  h = LN1(x + MHA(x));   y = LN2(h + FFN(h))
 * LN is the configured norm (norm.h): LayerNorm or RMSNorm; FFN the configured
 * block (glu.h): the MLP or the gated FFN.
 * Backward (below), the residuals adding their two paths' gradients:
 *   Pre-LN:   dh = dy + LN2^T FFN^T dy;   dx = dh + LN1^T MHA^T dh
 *   Post-LN:  dr2 = LN2^T dy;  dh = dr2 + FFN^T dr2;  dr1 = LN1^T dh;  dx = dr1 + MHA^T dr1 */
#include "layer.h"

#include <stdio.h>

#include "ffn.h"
#include "glu.h"
#include "linear.h"
#include "norm.h"
#include "rows.h"

/* Emits "layers.{index}.{step}" with shape (B, L, width) or (B, H, L, L). */
static void emit(const refenc_trace *trace, size_t index, const char *step,
                 const double *data, size_t ndim, const size_t *shape)
{
    char name[64];
    if (trace == NULL)
        return;
    snprintf(name, sizeof name, "layers.%zu.%s", index, step);
    refenc_trace_emit(trace, name, data, ndim, shape);
}

/* ln = LN1(x), or x itself when the layer has no norm1 (ModernBERT's layer
 * 0 under skip_first_prenorm: attn_norm = nn.Identity()). */
static void norm1_forward(double *ln, const double *x, const refenc_layer_params *lp, size_t BL,
                          const refenc_config *cfg)
{
    const size_t D = cfg->d_model;
    if (lp->norm1_weight == NULL) {
        for (size_t i = 0; i < BL * D; i++)
            ln[i] = x[i];
        return;
    }
    refenc_norm_forward(ln, x, lp->norm1_weight, lp->norm1_bias, BL, D, cfg->layer_norm_eps, cfg);
}

/* t = N'(t) in place when the layer has the norm (sandwich_norm: Gemma 2/3's
 * post_attention and post_feedforward norms on the sublayer's output);
 * otherwise t is left as it is. */
static void post_norm(double *t, const double *weight, const double *bias, size_t BL,
                      const refenc_config *cfg)
{
    if (weight != NULL)
        refenc_norm_forward(t, t, weight, bias, BL, cfg->d_model, cfg->layer_norm_eps, cfg);
}

/* y = a + b, elementwise over n values. */
static void add(double *y, const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void refenc_layer_forward(double *y, refenc_layer_work *w, const double *x,
                          const refenc_layer_params *lp, const refenc_config *cfg,
                          const refenc_attn_options *opt, const refenc_rope_options *rope,
                          size_t B, size_t L, size_t index, const refenc_trace *trace)
{
    refenc_layer_rows_forward(y, w, x, lp, cfg, opt, rope, B, L, NULL, L, index, trace);
}

void refenc_layer_rows_forward(double *y, refenc_layer_work *w, const double *x,
                               const refenc_layer_params *lp, const refenc_config *cfg,
                               const refenc_attn_options *opt, const refenc_rope_options *rope,
                               size_t B, size_t L, const int64_t *rows, size_t R, size_t index,
                               const refenc_trace *trace)
{
    const size_t D = cfg->d_model, H = cfg->n_heads, BL = B * L, BR = B * R;
    const double eps = cfg->layer_norm_eps;
    const size_t brd[3] = {B, R, D}, bhrl[4] = {B, H, R, L};
    refenc_qk_norm qk;
    const refenc_qk_norm *qkn = refenc_qk_norm_of(&qk, cfg, lp); /* NULL: no qk_norm */
    refenc_linear_fn *linear = w->linear != NULL ? w->linear : refenc_linear_forward;

    if (cfg->norm == REFENC_NORM_PRE) {
        /* h = x + MHA(LN1(x)): keys and values from LN1 of every position,
         * queries from the selected rows of it (w->ffn is free until the FFN) */
        norm1_forward(w->ln, x, lp, BL, cfg);
        refenc_rows_gather(w->ffn, w->ln, rows, B, L, R, D);
        emit(trace, index, "norm1", w->ffn, 3, brd);
        refenc_gqa_rows_forward(w->attn, &w->mha, w->ffn, w->ln, rows, R, lp->in_proj_weight, lp->in_proj_bias,
                                lp->out_proj_weight, lp->out_proj_bias, opt, rope, qkn, B, L, D, H,
                                refenc_config_kv_heads(cfg), refenc_config_head_dim(cfg), linear);
        post_norm(w->attn, lp->post_attn_norm_weight, lp->post_attn_norm_bias, BR, cfg);
        emit(trace, index, "self_attn.weights", w->mha.weights, 4, bhrl);
        emit(trace, index, "self_attn", w->attn, 3, brd);
        refenc_rows_gather(w->resid, x, rows, B, L, R, D);
        add(w->resid, w->resid, w->attn, BR * D);

        /* y = h + FFN(LN2(h)) */
        refenc_norm_forward(w->ln, w->resid, lp->norm2_weight, lp->norm2_bias, BR, D, eps, cfg);
        emit(trace, index, "norm2", w->ln, 3, brd);
        refenc_ffn_block_forward_with(w->ffn, w->hidden, w->ln, lp->linear1_weight, lp->linear1_bias,
                                      lp->linear2_weight, lp->linear2_bias, BR, cfg, linear);
        post_norm(w->ffn, lp->post_ffn_norm_weight, lp->post_ffn_norm_bias, BR, cfg);
        emit(trace, index, "ffn", w->ffn, 3, brd);
        add(y, w->resid, w->ffn, BR * D);
    } else {
        /* h = LN1(x + MHA(x)): the queries and the residual from the selected rows of x */
        refenc_rows_gather(w->ln, x, rows, B, L, R, D);
        refenc_gqa_rows_forward(w->attn, &w->mha, w->ln, x, rows, R, lp->in_proj_weight, lp->in_proj_bias,
                                lp->out_proj_weight, lp->out_proj_bias, opt, rope, qkn, B, L, D, H,
                                refenc_config_kv_heads(cfg), refenc_config_head_dim(cfg), linear);
        emit(trace, index, "self_attn.weights", w->mha.weights, 4, bhrl);
        emit(trace, index, "self_attn", w->attn, 3, brd);
        add(w->resid, w->ln, w->attn, BR * D);
        refenc_norm_forward(w->ln, w->resid, lp->norm1_weight, lp->norm1_bias, BR, D, eps, cfg);
        emit(trace, index, "norm1", w->ln, 3, brd);

        /* y = LN2(h + FFN(h)) */
        refenc_ffn_block_forward_with(w->ffn, w->hidden, w->ln, lp->linear1_weight, lp->linear1_bias,
                                      lp->linear2_weight, lp->linear2_bias, BR, cfg, linear);
        emit(trace, index, "ffn", w->ffn, 3, brd);
        add(w->resid, w->ln, w->ffn, BR * D);
        refenc_norm_forward(y, w->resid, lp->norm2_weight, lp->norm2_bias, BR, D, eps, cfg);
        emit(trace, index, "norm2", y, 3, brd);
    }
    emit(trace, index, "output", y, 3, brd);
}

/* Pre-LN backward: y = h + FFN(c), c = LN2(h);  h = x + MHA(a), a = LN1(x).
 * The forward (just recomputed into w) left c in w->ln, h in w->resid, the
 * activations in w->hidden and MHA's saved buffers in w->mha; a = LN1(x) is
 * recomputed into g->a. */
static void pre_ln_backward(double *dx, const refenc_layer_params *dlp, refenc_layer_grad_work *g,
                            const refenc_layer_work *w, const double *dy, const double *x,
                            const refenc_layer_params *lp, const refenc_config *cfg,
                            const refenc_attn_options *opt, const refenc_rope_options *rope,
                            size_t B, size_t L)
{
    const size_t D = cfg->d_model, H = cfg->n_heads, BL = B * L;
    const double eps = cfg->layer_norm_eps;
    norm1_forward(g->a, x, lp, BL, cfg);

    /* dc = FFN^T dy;  dh = dy + LN2^T dc */
    refenc_ffn_block_backward_k(g->kernels, g->d1, dlp->linear1_weight, dlp->linear1_bias, dlp->linear2_weight,
                              dlp->linear2_bias, g->pre, g->dpre, dy, w->ln, w->hidden,
                              lp->linear1_weight, lp->linear1_bias, lp->linear2_weight, BL, cfg);
    refenc_norm_backward_k(g->kernels, g->d1, dlp->norm2_weight, dlp->norm2_bias, g->d1, w->resid,
                              lp->norm2_weight, BL, D, eps, cfg);
    add(g->d1, dy, g->d1, BL * D);

    /* da = MHA^T dh;  dx = dh + LN1^T da */
    refenc_gqa_backward(g->d2, dlp->in_proj_weight, dlp->in_proj_bias, dlp->out_proj_weight,
                        dlp->out_proj_bias, &g->mha, g->d1, g->a, &w->mha, lp->in_proj_weight,
                        lp->out_proj_weight, opt, rope, B, L, D, H, refenc_config_kv_heads(cfg),
                        refenc_config_head_dim(cfg));
    if (lp->norm1_weight != NULL) /* the identity's transpose is the identity */
        refenc_norm_backward_k(g->kernels, g->d2, dlp->norm1_weight, dlp->norm1_bias, g->d2, x,
                             lp->norm1_weight, BL, D, eps, cfg);
    add(dx, g->d1, g->d2, BL * D);
}

/* Post-LN backward: y = LN2(r2), r2 = h + FFN(h);  h = LN1(r1), r1 = x + MHA(x).
 * The forward left MHA(x) in w->attn, h in w->ln, r2 in w->resid; r1 is
 * recomputed into g->a (the same addition, the same bits). */
static void post_ln_backward(double *dx, const refenc_layer_params *dlp, refenc_layer_grad_work *g,
                             const refenc_layer_work *w, const double *dy, const double *x,
                             const refenc_layer_params *lp, const refenc_config *cfg,
                             const refenc_attn_options *opt, const refenc_rope_options *rope,
                             size_t B, size_t L)
{
    const size_t D = cfg->d_model, H = cfg->n_heads, BL = B * L;
    const double eps = cfg->layer_norm_eps;
    add(g->a, x, w->attn, BL * D);

    /* dr2 = LN2^T dy;  dh = dr2 + FFN^T dr2 */
    refenc_norm_backward_k(g->kernels, g->d1, dlp->norm2_weight, dlp->norm2_bias, dy, w->resid,
                              lp->norm2_weight, BL, D, eps, cfg);
    refenc_ffn_block_backward_k(g->kernels, g->d2, dlp->linear1_weight, dlp->linear1_bias, dlp->linear2_weight,
                              dlp->linear2_bias, g->pre, g->dpre, g->d1, w->ln, w->hidden,
                              lp->linear1_weight, lp->linear1_bias, lp->linear2_weight, BL, cfg);
    add(g->d2, g->d1, g->d2, BL * D);

    /* dr1 = LN1^T dh;  dx = dr1 + MHA^T dr1 */
    refenc_norm_backward_k(g->kernels, g->d2, dlp->norm1_weight, dlp->norm1_bias, g->d2, g->a,
                              lp->norm1_weight, BL, D, eps, cfg);
    refenc_gqa_backward(g->d3, dlp->in_proj_weight, dlp->in_proj_bias, dlp->out_proj_weight,
                        dlp->out_proj_bias, &g->mha, g->d2, x, &w->mha, lp->in_proj_weight,
                        lp->out_proj_weight, opt, rope, B, L, D, H, refenc_config_kv_heads(cfg),
                        refenc_config_head_dim(cfg));
    add(dx, g->d2, g->d3, BL * D);
}

void refenc_layer_backward(double *dx, const refenc_layer_params *dlp, refenc_layer_grad_work *g,
                           refenc_layer_work *w, const double *dy, const double *x,
                           const refenc_layer_params *lp, const refenc_config *cfg,
                           const refenc_attn_options *opt, const refenc_rope_options *rope,
                           size_t B, size_t L)
{
    /* recompute the forward: it leaves what the backward reads in w */
    refenc_layer_forward(g->y, w, x, lp, cfg, opt, rope, B, L, 0, NULL);
    g->mha.kernels = g->kernels;
    if (cfg->norm == REFENC_NORM_PRE)
        pre_ln_backward(dx, dlp, g, w, dy, x, lp, cfg, opt, rope, B, L);
    else
        post_ln_backward(dx, dlp, g, w, dy, x, lp, cfg, opt, rope, B, L);
}
