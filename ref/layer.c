/* One encoder layer in double (layer.h):
 *   Pre-LN:   h = x + MHA(LN1(x));   y = h + FFN(LN2(h))
 *   Post-LN:  h = LN1(x + MHA(x));   y = LN2(h + FFN(h)) */
#include "layer.h"

#include <stdio.h>

#include "ffn.h"
#include "layernorm.h"

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
    const size_t D = cfg->d_model, F = cfg->d_ff, H = cfg->n_heads, BL = B * L;
    const double eps = cfg->layer_norm_eps;
    const size_t bld[3] = {B, L, D}, bhll[4] = {B, H, L, L};

    if (cfg->norm == REFENC_NORM_PRE) {
        /* h = x + MHA(LN1(x)) */
        refenc_layernorm_forward(w->ln, x, lp->norm1_weight, lp->norm1_bias, BL, D, eps);
        emit(trace, index, "norm1", w->ln, 3, bld);
        refenc_mha_forward(w->attn, &w->mha, w->ln, lp->in_proj_weight, lp->in_proj_bias,
                           lp->out_proj_weight, lp->out_proj_bias, opt, rope, B, L, D, H);
        emit(trace, index, "self_attn.weights", w->mha.weights, 4, bhll);
        emit(trace, index, "self_attn", w->attn, 3, bld);
        add(w->resid, x, w->attn, BL * D);

        /* y = h + FFN(LN2(h)) */
        refenc_layernorm_forward(w->ln, w->resid, lp->norm2_weight, lp->norm2_bias, BL, D, eps);
        emit(trace, index, "norm2", w->ln, 3, bld);
        refenc_ffn_forward(w->ffn, w->hidden, w->ln, lp->linear1_weight, lp->linear1_bias,
                           lp->linear2_weight, lp->linear2_bias, BL, D, F, cfg->activation);
        emit(trace, index, "ffn", w->ffn, 3, bld);
        add(y, w->resid, w->ffn, BL * D);
    } else {
        /* h = LN1(x + MHA(x)) */
        refenc_mha_forward(w->attn, &w->mha, x, lp->in_proj_weight, lp->in_proj_bias,
                           lp->out_proj_weight, lp->out_proj_bias, opt, rope, B, L, D, H);
        emit(trace, index, "self_attn.weights", w->mha.weights, 4, bhll);
        emit(trace, index, "self_attn", w->attn, 3, bld);
        add(w->resid, x, w->attn, BL * D);
        refenc_layernorm_forward(w->ln, w->resid, lp->norm1_weight, lp->norm1_bias, BL, D, eps);
        emit(trace, index, "norm1", w->ln, 3, bld);

        /* y = LN2(h + FFN(h)) */
        refenc_ffn_forward(w->ffn, w->hidden, w->ln, lp->linear1_weight, lp->linear1_bias,
                           lp->linear2_weight, lp->linear2_bias, BL, D, F, cfg->activation);
        emit(trace, index, "ffn", w->ffn, 3, bld);
        add(w->resid, w->ln, w->ffn, BL * D);
        refenc_layernorm_forward(y, w->resid, lp->norm2_weight, lp->norm2_bias, BL, D, eps);
        emit(trace, index, "norm2", y, 3, bld);
    }
    emit(trace, index, "output", y, 3, bld);
}
