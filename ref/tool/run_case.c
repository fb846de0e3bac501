/* Running the double-precision reference on a golden case. */
#include "run_case.h"

#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../activation.h"
#include "../alibi.h"
#include "../encoder.h"
#include "../ffn.h"
#include "../glu.h"
#include "../norm.h"
#include "../mha.h"
#include "../rope.h"
#include "../sinusoidal.h"
#include "../softmax.h"

static void emit(const refenc_trace *trace, const char *name, const double *data, size_t ndim,
                 size_t d0, size_t d1, size_t d2, size_t d3)
{
    const size_t shape[4] = {d0, d1, d2, d3};
    refenc_trace_emit(trace, name, data, ndim, shape);
}

/* The output buffers of a component: y (and y2 for ALiBi's bias), and the
 * workspace for the components that run through the encoder's buffers. */
static int alloc_outputs(double **y, double **y2, refenc_workspace *ws, const refenc_case *c,
                         refenc_error *err)
{
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model, H = cfg->n_heads;
    int st;
    switch (c->component) {
    case REFENC_COMP_ENCODER:
    case REFENC_COMP_ATTENTION:
    case REFENC_COMP_FFN:
        if ((st = refenc_workspace_alloc(ws, cfg, B, L, err)))
            return st;
        *y = malloc(B * L * D * sizeof **y);
        break;
    case REFENC_COMP_ALIBI:
        *y = malloc(H * sizeof **y);
        *y2 = malloc(H * L * L * sizeof **y2);
        break;
    case REFENC_COMP_SINUSOIDAL_PE:
        *y = malloc(L * D * sizeof **y);
        break;
    default:
        *y = refenc_alloc_array(c->x_numel, sizeof **y);
    }
    if (*y == NULL || (c->component == REFENC_COMP_ALIBI && *y2 == NULL))
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", c->name);
    return REFENC_OK;
}

/* Multi-head attention of layer 0, as nn.MultiheadAttention computes it. */
static void run_attention(double *y, refenc_workspace *ws, const refenc_case *c, const refenc_trace *trace)
{
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model, H = cfg->n_heads;
    const refenc_layer_params *lp = &c->params.layers[0];
    refenc_attn_options opt =
        refenc_attn_options_of(cfg, c->key_padding_mask, c->attn_mask, c->positions, ws->alibi_slopes);
    opt.relative_bias = lp->relative_attention_bias; /* T5's table, layer 0's */
    const refenc_rope_options rope = {cfg->rope_layout, cfg->rope_base, c->positions, &cfg->rope_scaling};
    refenc_qk_norm qk;
    refenc_gqa_rows_forward(y, &ws->layer.mha, c->x, c->x, NULL, L, lp->in_proj_weight, lp->in_proj_bias,
                            lp->out_proj_weight, lp->out_proj_bias, &opt,
                            cfg->positional == REFENC_POS_ROPE ? &rope : NULL,
                            refenc_qk_norm_of(&qk, cfg, lp), B, L, D, H,
                            refenc_config_kv_heads(cfg), refenc_config_head_dim(cfg), ws->layer.linear);
    emit(trace, "weights", ws->layer.mha.weights, 4, B, H, L, L);
    emit(trace, "output", y, 3, B, L, D, 0);
}

/* ALiBi's slopes (H) and bias (H, L, L). */
static void run_alibi(double *slopes, double *bias, const refenc_case *c, const refenc_trace *trace)
{
    const size_t L = c->L, H = c->cfg.n_heads;
    refenc_alibi_slopes(slopes, H);
    for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < L; j++)
                bias[(h * L + i) * L + j] = refenc_alibi_bias(slopes[h], c->positions[i], c->positions[j]);
    emit(trace, "slopes", slopes, 1, H, 0, 0, 0);
    emit(trace, "bias", bias, 3, H, L, L, 0);
}

/* The component's kernel on the case's inputs, its outputs through trace. */
static int run_component(double *y, double *y2, refenc_workspace *ws, const refenc_case *c,
                         const refenc_trace *trace, refenc_error *err)
{
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model, H = cfg->n_heads, Dh = refenc_config_head_dim(cfg);
    const refenc_layer_params *lp = &c->params.layers[0];
    switch (c->component) {
    case REFENC_COMP_ENCODER: {
        const refenc_input in = refenc_case_input(c);
        return refenc_encoder_forward(y, ws, &c->params, cfg, &in, trace, err);
    }
    case REFENC_COMP_ATTENTION:
        run_attention(y, ws, c, trace);
        return REFENC_OK;
    case REFENC_COMP_FFN:
        refenc_ffn_block_forward_with(y, ws->layer.hidden, c->x, lp->linear1_weight, lp->linear1_bias,
                                      lp->linear2_weight, lp->linear2_bias, B * L, cfg, ws->layer.linear);
        emit(trace, "output", y, 3, B, L, D, 0);
        return REFENC_OK;
    case REFENC_COMP_LAYERNORM:
        /* the configured norm: LayerNorm, or RMSNorm under norm_type "rmsnorm" */
        refenc_norm_forward(y, c->x, lp->norm1_weight, lp->norm1_bias, B * L, D, cfg->layer_norm_eps,
                            cfg);
        emit(trace, "output", y, 3, B, L, D, 0);
        return REFENC_OK;
    case REFENC_COMP_SOFTMAX:
        refenc_softmax_forward(y, c->x, B, L, cfg->temperature);
        emit(trace, "output", y, 2, B, L, 0, 0);
        return REFENC_OK;
    case REFENC_COMP_ACTIVATION:
        refenc_activation_forward(y, c->x, B * L, cfg->activation);
        emit(trace, "output", y, 2, B, L, 0, 0);
        return REFENC_OK;
    case REFENC_COMP_SINUSOIDAL_PE:
        refenc_sinusoidal_table(y, c->positions, L, D);
        emit(trace, "output", y, 2, L, D, 0, 0);
        return REFENC_OK;
    case REFENC_COMP_ROPE:
        refenc_rope_scaled_forward(y, c->x, c->positions, B * H, L, Dh, cfg->rope_base, cfg->rope_layout,
                                   &cfg->rope_scaling);
        emit(trace, "output", y, 4, B, H, L, Dh);
        return REFENC_OK;
    case REFENC_COMP_ALIBI:
        run_alibi(y, y2, c, trace);
        return REFENC_OK;
    default:
        return refenc_error_set(err, REFENC_EINVAL, "%s: unknown component", c->name);
    }
}

int refenc_case_run_reference(const refenc_case *c, const refenc_trace *trace, refenc_error *err)
{
    return refenc_case_run_reference_with(c, refenc_linear_forward, trace, err);
}

int refenc_case_run_reference_with(const refenc_case *c, refenc_linear_fn *linear,
                                   const refenc_trace *trace, refenc_error *err)
{
    int st = refenc_case_validate(c, err);
    if (st)
        return st;
    refenc_workspace ws;
    memset(&ws, 0, sizeof ws);
    double *y = NULL, *y2 = NULL;
    if ((st = alloc_outputs(&y, &y2, &ws, c, err)) == REFENC_OK) {
        ws.layer.linear = linear != NULL ? linear : refenc_linear_forward;
        st = run_component(y, y2, &ws, c, trace, err);
    }
    free(y);
    free(y2);
    refenc_workspace_free(&ws);
    return st;
}
