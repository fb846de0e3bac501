/* The encoder stack in double (encoder.h):
 *   h = E[tokens] (sqrt(D))  or  h = x;   h = h + TT[types];   h = h + PE (sinusoidal, learned)
 *   h = LN_emb(h) if embedding_norm
 *   h = layer_i(h), i = 0 .. N-1   (RoPE / ALiBi inside every attention)
 *   y = LN(h) if final_norm, else h */
#include "encoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alibi.h"
#include "embedding.h"
#include "layernorm.h"
#include "learned_pe.h"
#include "position_ids.h"
#include "sinusoidal.h"

int refenc_workspace_alloc(refenc_workspace *ws, const refenc_config *cfg, size_t B, size_t L,
                           refenc_error *err)
{
    memset(ws, 0, sizeof *ws);
    int st = refenc_config_validate_shape(cfg, B, L, err);
    if (st)
        return st;

    const size_t D = cfg->d_model, F = cfg->d_ff, H = cfg->n_heads;
    const size_t BLD = B * L * D, BLF = B * L * F, BHLL = B * H * L * L; /* bounded: validated */
    const size_t n = refenc_config_workspace_count(cfg, B, L);

    const int need_ids = cfg->type_vocab_size > 0 || cfg->position_ids == REFENC_POSIDS_ROBERTA;
    ws->block = malloc(n * sizeof(double));
    ws->positions = malloc(L * sizeof(int64_t));
    ws->ids = need_ids ? malloc(B * L * sizeof(int64_t)) : NULL;
    if (ws->block == NULL || ws->positions == NULL || (need_ids && ws->ids == NULL)) {
        refenc_workspace_free(ws);
        return refenc_error_set(err, REFENC_ENOMEM,
                                "workspace: cannot allocate %zu values for batch %zu x seq_len %zu",
                                n, B, L);
    }
    ws->B = B;
    ws->L = L;

    double *cur = ws->block;
    double **bld_buffers[] = {
        &ws->h0, &ws->h1,
        &ws->layer.ln, &ws->layer.attn, &ws->layer.resid, &ws->layer.ffn,
        &ws->layer.mha.q, &ws->layer.mha.k, &ws->layer.mha.v,
        &ws->layer.mha.qh, &ws->layer.mha.kh, &ws->layer.mha.vh,
        &ws->layer.mha.ctxh, &ws->layer.mha.ctx,
    };
    for (size_t i = 0; i < sizeof bld_buffers / sizeof bld_buffers[0]; i++) {
        *bld_buffers[i] = cur;
        cur += BLD;
    }
    ws->layer.hidden = cur;
    cur += BLF;
    ws->layer.mha.weights = cur;
    cur += BHLL;
    ws->alibi_slopes = cur;
    cur += H;
    /* the last L (and B L) slots of the count are the int64 positions (and
     * ids), allocated apart */
    const size_t n_ids = need_ids ? B * L : 0;
    if ((size_t)(cur - ws->block) + L + n_ids != n) { /* internal invariant: layout matches the count */
        refenc_workspace_free(ws);
        return refenc_error_set(err, REFENC_EINVAL, "workspace: internal size mismatch");
    }

    for (size_t l = 0; l < L; l++)
        ws->positions[l] = (int64_t)l;
    refenc_alibi_slopes(ws->alibi_slopes, H);
    return REFENC_OK;
}

int refenc_workspace_alloc_embed(refenc_workspace *ws, const refenc_config *cfg, size_t B, size_t L,
                                 refenc_error *err)
{
    memset(ws, 0, sizeof *ws);
    int st = refenc_config_validate_shape(cfg, B, L, err);
    if (st)
        return st;
    const int need_ids = cfg->type_vocab_size > 0 || cfg->position_ids == REFENC_POSIDS_ROBERTA;
    ws->positions = malloc(L * sizeof(int64_t));
    ws->ids = need_ids ? malloc(B * L * sizeof(int64_t)) : NULL;
    if (ws->positions == NULL || (need_ids && ws->ids == NULL)) {
        refenc_workspace_free(ws);
        return refenc_error_set(err, REFENC_ENOMEM, "workspace: cannot allocate the positions for batch %zu x "
                                "seq_len %zu", B, L);
    }
    ws->B = B;
    ws->L = L;
    for (size_t l = 0; l < L; l++)
        ws->positions[l] = (int64_t)l;
    return REFENC_OK;
}

void refenc_workspace_free(refenc_workspace *ws)
{
    if (ws == NULL)
        return;
    free(ws->block);
    free(ws->positions);
    free(ws->ids);
    memset(ws, 0, sizeof *ws);
}

/* h (B, L, D): the embedding or the given x, the token types, the
 * additive PE, the embedding LayerNorm (in and ws checked by the caller) */
static void embed(double *h, refenc_workspace *ws, const refenc_params *p, const refenc_config *cfg,
                  const refenc_input *in)
{
    const size_t B = in->B, L = in->L, D = cfg->d_model, BLD = B * L * D;
    const int64_t *pos = in->positions != NULL ? in->positions : ws->positions;
    if (cfg->vocab_size > 0 && cfg->scale_embedding)
        refenc_embedding_forward(h, in->tokens, p->embedding, B, L, cfg->vocab_size, D);
    else if (cfg->vocab_size > 0)
        refenc_embedding_lookup(h, in->tokens, p->embedding, B, L, cfg->vocab_size, D);
    else
        memcpy(h, in->x, BLD * sizeof(double));
    if (cfg->type_vocab_size > 0) {
        const int64_t *types = in->token_types;
        if (types == NULL) { /* HF's default token_type_ids: all 0 */
            memset(ws->ids, 0, B * L * sizeof(int64_t));
            types = ws->ids;
        }
        refenc_embedding_add(h, h, types, p->token_type_embedding, B, L, cfg->type_vocab_size, D);
    }
    if (cfg->positional == REFENC_POS_SINUSOIDAL) {
        refenc_sinusoidal_forward(h, h, pos, B, L, D);
    } else if (cfg->positional == REFENC_POS_LEARNED && cfg->position_ids == REFENC_POSIDS_ROBERTA) {
        refenc_position_ids_roberta(ws->ids, in->tokens, B, L, cfg->padding_idx);
        refenc_embedding_add(h, h, ws->ids, p->pos_embedding, B, L, cfg->max_len, D);
    } else if (cfg->positional == REFENC_POS_LEARNED) {
        refenc_learned_pe_forward(h, h, pos, p->pos_embedding, B, L, cfg->max_len, D);
    }
    if (cfg->embedding_norm)
        refenc_layernorm_forward(h, h, p->embedding_norm_weight, p->embedding_norm_bias, B * L, D,
                                 cfg->embedding_norm_eps);
}

static int check_call(const refenc_workspace *ws, const refenc_config *cfg, const refenc_input *in,
                      refenc_error *err)
{
    int st = refenc_input_validate(in, cfg, err);
    if (st)
        return st;
    if (ws->B != in->B || ws->L != in->L)
        return refenc_error_set(err, REFENC_EINVAL,
                                "input: shape (%zu, %zu) but the workspace is for (%zu, %zu)",
                                in->B, in->L, ws->B, ws->L);
    return REFENC_OK;
}

int refenc_encoder_embed(double *h, refenc_workspace *ws, const refenc_params *p,
                         const refenc_config *cfg, const refenc_input *in, refenc_error *err)
{
    int st = check_call(ws, cfg, in, err);
    if (st)
        return st;
    embed(h, ws, p, cfg, in);
    return REFENC_OK;
}

int refenc_encoder_forward(double *y, refenc_workspace *ws, const refenc_params *p,
                           const refenc_config *cfg, const refenc_input *in,
                           const refenc_trace *trace, refenc_error *err)
{
    int st = check_call(ws, cfg, in, err);
    if (st)
        return st;
    if (ws->block == NULL)
        return refenc_error_set(err, REFENC_EINVAL, "workspace: allocated for the embedding alone "
                                "(refenc_workspace_alloc_embed), not for the layers");

    const size_t B = in->B, L = in->L, D = cfg->d_model, BLD = B * L * D;
    const size_t bld[3] = {B, L, D};
    const int64_t *pos = in->positions != NULL ? in->positions : ws->positions;

    double *h = ws->h0, *next = ws->h1;
    embed(h, ws, p, cfg, in);
    refenc_trace_emit(trace, "embed", h, 3, bld);

    const refenc_attn_options opt = {
        .key_padding_mask = in->key_padding_mask,
        .causal = cfg->causal,
        .attn_mask = in->attn_mask,
        .alibi_slopes = cfg->positional == REFENC_POS_ALIBI ? ws->alibi_slopes : NULL,
        .positions = pos,
        .temperature = cfg->temperature,
        .mask_value = cfg->mask_value,
    };
    const refenc_rope_options rope = {cfg->rope_layout, cfg->rope_base, pos};
    const refenc_rope_options *rope_p = cfg->positional == REFENC_POS_ROPE ? &rope : NULL;

    for (size_t i = 0; i < cfg->n_layers; i++) {
        refenc_layer_forward(next, &ws->layer, h, &p->layers[i], cfg, &opt, rope_p, B, L, i, trace);
        double *t = h;
        h = next;
        next = t;
    }

    if (cfg->final_norm) {
        refenc_layernorm_forward(y, h, p->norm_weight, p->norm_bias, B * L, D, cfg->layer_norm_eps);
        refenc_trace_emit(trace, "norm", y, 3, bld);
    } else {
        memcpy(y, h, BLD * sizeof(double));
    }
    refenc_trace_emit(trace, "output", y, 3, bld);
    return REFENC_OK;
}
