/* The encoder stack in double (encoder.h):
 *   h = E[tokens] (sqrt(D))  or  h = x;   h = h + TT[types];   h = h + PE (sinusoidal, learned)
 *   h = LN_emb(h) if embedding_norm
 *   h = layer_i(h), i = 0 .. N-1   (RoPE / ALiBi inside every attention)
 *   y = LN(h) if final_norm, else h
 *   e = pool(y) (B, D) if pooling, traced as "embedding" (pooling.h)
 * Backward (refenc_encoder_backward, below): the forward recomputed keeping each
 * layer's input, then LN^T, layer_i^T for i = N-1 .. 0, LN_emb^T and the
 * scatter-adds into the tables (docs/gradients.md). */
#include "encoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "alibi.h"
#include "embedding.h"
#include "layer_pattern.h"
#include "pooling.h"
#include "norm.h"
#include "learned_pe.h"
#include "position_ids.h"
#include "sinusoidal.h"

/* The forward's buffers in ws->block, in the order of
 * refenc_config_workspace_count; returns the first slot after the
 * attention weights. */
static double *carve(refenc_workspace *ws, const refenc_config *cfg, size_t B, size_t L)
{
    const size_t H = cfg->n_heads, BLD = B * L * cfg->d_model, BLF = B * L * cfg->d_ff;
    const size_t BHLL = B * H * L * L; /* bounded: validated */
    double *cur = ws->block;
    double **bld_buffers[] = {
        &ws->h0, &ws->h1,
        &ws->layer.ln, &ws->layer.attn, &ws->layer.resid, &ws->layer.ffn,
    };
    for (size_t i = 0; i < sizeof bld_buffers / sizeof bld_buffers[0]; i++) {
        *bld_buffers[i] = cur;
        cur += BLD;
    }
    /* attention's (B, L, E), E = H Dh (= D unless head_dim is set; k and v
     * use the first (B, L, Hkv Dh) of theirs) */
    double **ble_buffers[] = {
        &ws->layer.mha.q, &ws->layer.mha.k, &ws->layer.mha.v,
        &ws->layer.mha.qh, &ws->layer.mha.kh, &ws->layer.mha.vh,
        &ws->layer.mha.ctxh, &ws->layer.mha.ctx,
    };
    for (size_t i = 0; i < sizeof ble_buffers / sizeof ble_buffers[0]; i++) {
        *ble_buffers[i] = cur;
        cur += B * L * H * refenc_config_head_dim(cfg);
    }
    ws->layer.hidden = cur;
    cur += cfg->ffn_type == REFENC_FFN_GLU ? 2 * BLF : BLF; /* the gated FFN's h and b */
    ws->layer.mha.weights = cur;
    cur += BHLL;
    return cur;
}

int refenc_workspace_alloc(refenc_workspace *ws, const refenc_config *cfg, size_t B, size_t L,
                           refenc_error *err)
{
    memset(ws, 0, sizeof *ws);
    int st = refenc_config_validate_shape(cfg, B, L, err);
    if (st)
        return st;

    const size_t H = cfg->n_heads;
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

    double *cur = carve(ws, cfg, B, L);
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

/* The token types: the input's, or HF's default token_type_ids, all 0
 * (written into ws->ids) */
static const int64_t *token_types(refenc_workspace *ws, const refenc_input *in)
{
    if (in->token_types != NULL)
        return in->token_types;
    memset(ws->ids, 0, in->B * in->L * sizeof(int64_t));
    return ws->ids;
}

/* h (B, L, D): the embedding or the given x, the token types, the
 * additive PE, before the embedding LayerNorm (in and ws checked by the
 * caller) */
static void embed_sum(double *h, refenc_workspace *ws, const refenc_params *p,
                      const refenc_config *cfg, const refenc_input *in)
{
    const size_t B = in->B, L = in->L, D = cfg->d_model, BLD = B * L * D;
    const int64_t *pos = in->positions != NULL ? in->positions : ws->positions;
    if (cfg->vocab_size > 0 && cfg->scale_embedding)
        refenc_embedding_forward(h, in->tokens, p->embedding, B, L, cfg->vocab_size, D,
                                 refenc_embedding_normalizer(D, refenc_normalizer_bits(cfg->embedding_normalizer_dtype)));
    else if (cfg->vocab_size > 0)
        refenc_embedding_lookup(h, in->tokens, p->embedding, B, L, cfg->vocab_size, D);
    else
        memcpy(h, in->x, BLD * sizeof(double));
    if (cfg->type_vocab_size > 0)
        refenc_embedding_add(h, h, token_types(ws, in), p->token_type_embedding, B, L,
                             cfg->type_vocab_size, D);
    if (cfg->positional == REFENC_POS_SINUSOIDAL) {
        refenc_sinusoidal_forward(h, h, pos, B, L, D);
    } else if (cfg->positional == REFENC_POS_LEARNED && cfg->position_ids == REFENC_POSIDS_ROBERTA) {
        refenc_position_ids_roberta(ws->ids, in->tokens, B, L, cfg->padding_idx);
        refenc_embedding_add(h, h, ws->ids, p->pos_embedding, B, L, cfg->max_len, D);
    } else if (cfg->positional == REFENC_POS_LEARNED) {
        refenc_learned_pe_forward(h, h, pos, p->pos_embedding, B, L, cfg->max_len, D);
    }
}

/* h (B, L, D) = LN_emb(e) when embedding_norm, else e (h may alias e) */
static void embed_norm(double *h, const double *e, const refenc_params *p,
                       const refenc_config *cfg, size_t BL)
{
    const size_t D = cfg->d_model;
    if (cfg->embedding_norm)
        refenc_norm_forward(h, e, p->embedding_norm_weight, p->embedding_norm_bias, BL, D,
                            cfg->embedding_norm_eps, cfg);
    else if (h != e)
        memcpy(h, e, BL * D * sizeof(double));
}

/* h (B, L, D): the embedding module's output, the input of layer 0 */
static void embed(double *h, refenc_workspace *ws, const refenc_params *p, const refenc_config *cfg,
                  const refenc_input *in)
{
    embed_sum(h, ws, p, cfg, in);
    embed_norm(h, h, p, cfg, in->B * in->L);
}

/* The masks, ALiBi, T5's bias and temperature every attention of the stack
 * uses, and RoPE's options (*rope_p NULL unless the scheme is RoPE).  T5's
 * table is layer 0's for every layer (relative_bias.h). */
static void attention_setup(refenc_attn_options *opt, refenc_rope_options *rope,
                            const refenc_rope_options **rope_p, const refenc_workspace *ws,
                            const refenc_params *p, const refenc_config *cfg, const refenc_input *in)
{
    const int64_t *pos = in->positions != NULL ? in->positions : ws->positions;
    *opt = refenc_attn_options_of(cfg, in->key_padding_mask, in->attn_mask, pos, ws->alibi_slopes);
    opt->relative_bias = p->layers[0].relative_attention_bias;
    *rope = (refenc_rope_options){cfg->rope_layout, cfg->rope_base, pos, &cfg->rope_scaling};
    *rope_p = cfg->positional == REFENC_POS_ROPE ? rope : NULL;
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

    const size_t B = in->B, L = in->L, D = cfg->d_model, R = refenc_input_rows(in), BRD = B * R * D;
    const size_t bld[3] = {B, L, D}, brd[3] = {B, R, D};

    double *h = ws->h0, *next = ws->h1;
    embed(h, ws, p, cfg, in);
    refenc_trace_emit(trace, "embed", h, 3, bld);

    refenc_attn_options opt;
    refenc_rope_options rope;
    const refenc_rope_options *rope_p;
    attention_setup(&opt, &rope, &rope_p, ws, p, cfg, in);

    for (size_t i = 0; i < cfg->n_layers; i++) {
        /* layer i's window and RoPE base (layer_pattern.h) */
        refenc_attn_options opt_i = opt;
        refenc_rope_options rope_i = rope;
        refenc_layer_options(cfg, i, &opt_i, &rope_i);
        /* with selected rows (rows.h) the last layer computes them alone: its
         * output and everything after it is (B, R, D) */
        const int last = i + 1 == cfg->n_layers;
        refenc_layer_rows_forward(next, &ws->layer, h, &p->layers[i], cfg, &opt_i, rope_p ? &rope_i : NULL, B,
                                  L, last ? in->rows : NULL, last ? R : L, i, trace);
        double *t = h;
        h = next;
        next = t;
    }

    if (cfg->final_norm) {
        refenc_norm_forward(y, h, p->norm_weight, p->norm_bias, B * R, D, cfg->layer_norm_eps, cfg);
        refenc_trace_emit(trace, "norm", y, 3, brd);
    } else {
        memcpy(y, h, BRD * sizeof(double));
    }
    refenc_trace_emit(trace, "output", y, 3, brd);
    if (cfg->pooling != REFENC_POOL_NONE) { /* out.embedding (B, D), in the free buffer next */
        const size_t bd[2] = {B, D};
        refenc_pooling_forward(next, y, in->key_padding_mask, B, L, D, cfg->pooling, cfg->pooling_normalize);
        refenc_trace_emit(trace, "embedding", next, 2, bd);
    }
    return REFENC_OK;
}

/* ---- backward (docs/gradients.md) ----------------------------------------- */

/* The number of doubles of a gradient workspace: (N + 1) layer inputs, 8
 * (B, L, D) buffers (e, dh0, dh1; the layer's y, a, d1, d2, d3), 8 (B, L, A)
 * of attention's backward, A = max(D, E), E = H Dh (dctx, dctxh, dqh, dkh,
 * dvh, dq, dk, dv), 2 (B, L, F) (pre, dpre; 5 for the gated FFN: pre 3,
 * dpre 2, glu.h), 2 (B, H, L, L), (B, H, L).  0 on overflow. */
/* The (B, L, F) buffers of the FFN's backward: pre and dpre (N, F), or
 * for the gated FFN pre (N, 3F) and dpre (N, 2F) (glu.h). */
static size_t ffn_slots(const refenc_config *cfg)
{
    return cfg->ffn_type == REFENC_FFN_GLU ? 5 : 2;
}

/* A = max(D, H Dh): the width of attention's backward buffers per token */
static size_t attn_width(const refenc_config *cfg)
{
    const size_t E = cfg->n_heads * refenc_config_head_dim(cfg); /* bounded: validated */
    return E > cfg->d_model ? E : cfg->d_model;
}

static size_t grad_count(const refenc_config *cfg, size_t B, size_t L)
{
    size_t BL, BLD, BLA, BLF, BHL, BHLL, n_bld, t1, t2, t3, t4, total;
    int ok = refenc_size_mul(&BL, B, L) && refenc_size_mul(&BLD, BL, cfg->d_model) &&
             refenc_size_mul(&BLA, BL, attn_width(cfg)) &&
             refenc_size_mul(&BLF, BL, cfg->d_ff) && refenc_size_mul(&BHL, BL, cfg->n_heads) &&
             refenc_size_mul(&BHLL, BHL, L) && refenc_size_add(&n_bld, cfg->n_layers, 9) &&
             refenc_size_mul(&t1, n_bld, BLD) && refenc_size_mul(&t2, ffn_slots(cfg), BLF) &&
             refenc_size_mul(&t3, 2, BHLL) && refenc_size_mul(&t4, 8, BLA) &&
             refenc_size_add(&total, t1, t2) && refenc_size_add(&total, total, t3) &&
             refenc_size_add(&total, total, t4) && refenc_size_add(&total, total, BHL);
    return ok ? total : 0;
}

static void grad_carve(refenc_grad_workspace *g, const refenc_config *cfg, size_t B, size_t L)
{
    const size_t BLD = B * L * cfg->d_model, BLF = B * L * cfg->d_ff, BLA = B * L * attn_width(cfg);
    const size_t BHL = B * L * cfg->n_heads, BHLL = BHL * L;
    double *cur = g->block;
    g->acts = cur;
    cur += (cfg->n_layers + 1) * BLD;
    refenc_layer_grad_work *lw = &g->layer;
    double **bld[] = {&g->e, &g->dh0, &g->dh1, &lw->y, &lw->a, &lw->d1, &lw->d2, &lw->d3};
    for (size_t i = 0; i < sizeof bld / sizeof bld[0]; i++, cur += BLD)
        *bld[i] = cur;
    double **bla[] = {&lw->mha.dctx, &lw->mha.dctxh, &lw->mha.dqh, &lw->mha.dkh, &lw->mha.dvh,
                      &lw->mha.dq, &lw->mha.dk, &lw->mha.dv};
    for (size_t i = 0; i < sizeof bla / sizeof bla[0]; i++, cur += BLA)
        *bla[i] = cur;
    const size_t pre = ffn_slots(cfg) == 5 ? 3 : 1; /* pre's share of the slots */
    lw->pre = cur;
    lw->dpre = cur + pre * BLF;
    cur += ffn_slots(cfg) * BLF;
    lw->mha.dP = cur;
    lw->mha.dS = cur + BHLL;
    lw->mha.Drow = cur + 2 * BHLL;
}

/* The first key the config sets that the backward does not differentiate
 * yet (docs/gradients.md), with why; NULL when there is none. */
static const char *forward_only_key(const refenc_config *cfg, const char **why)
{
    static const char *const gemma = "Gemma's attention conventions are forward only";
    static const char *const windows = "attention windows and the local/global layer patterns are forward only";
    static const char *const qwen = "Qwen's q/k/v bias and per-head q/k norm are forward only";
    const struct {
        int set;
        const char *key, *why;
    } keys[] = {
        {cfg->attn_logit_softcapping != 0, "attn_logit_softcapping", gemma},
        {cfg->query_pre_attn_scalar != 0, "query_pre_attn_scalar", gemma},
        {cfg->sliding_window != 0, "sliding_window", windows},
        {cfg->local_attention != 0, "local_attention", windows},
        {cfg->global_attn_every_n_layers != 0, "global_attn_every_n_layers", windows},
        {cfg->sliding_window_pattern != 0, "sliding_window_pattern", windows},
        {cfg->embedding_normalizer_dtype != REFENC_NORMALIZER_EXACT, "embedding_normalizer_dtype",
         "the rounded sqrt(D) scale is forward only"},
        {cfg->qkv_bias, "qkv_bias", qwen},
        {cfg->qk_norm != REFENC_QKNORM_NONE, "qk_norm", qwen},
        {cfg->relative_attention_num_buckets != 0, "relative_attention_num_buckets",
         "T5's relative position bias is forward only"},
        {cfg->pooling != REFENC_POOL_NONE, "pooling",
         "the pooled embedding is forward only; its gradient is not differentiated"},
        {cfg->sandwich_norm, "sandwich_norm", "the norms of the sublayers' outputs are forward only"},
    };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (keys[k].set) {
            *why = keys[k].why;
            return keys[k].key;
        }
    return NULL;
}

/* The configs the backward does not differentiate yet (docs/gradients.md):
 * the first forward-only key set, named. */
static int refuse_forward_only(const refenc_config *cfg, refenc_error *err)
{
    const char *why, *key = forward_only_key(cfg, &why);
    if (key != NULL)
        return refenc_error_set(err, REFENC_EINVAL, "config: the backward pass does not support %s yet (%s)",
                                key, why);
    return REFENC_OK;
}

int refenc_grad_workspace_alloc(refenc_grad_workspace *g, const refenc_config *cfg, size_t B,
                                size_t L, refenc_error *err)
{
    memset(g, 0, sizeof *g);
    int st = refenc_config_validate_shape(cfg, B, L, err);
    if (st)
        return st;
    if ((st = refuse_forward_only(cfg, err)))
        return st;
    const size_t n = grad_count(cfg, B, L), params = refenc_config_param_count(cfg);
    size_t total, bytes;
    if (n == 0 || !refenc_size_add(&total, n, params) ||
        !refenc_size_mul(&bytes, total, sizeof(double)) || bytes > REFENC_MAX_BYTES)
        return refenc_error_set(err, REFENC_ELIMIT,
                                "config: a backward pass on batch %zu x seq_len %zu needs more "
                                "than the limit of %zu bytes", B, L, REFENC_MAX_BYTES);
    g->block = refenc_alloc_array(n, sizeof(double));
    if (g->block == NULL)
        return refenc_error_set(err, REFENC_ENOMEM,
                                "gradient workspace: cannot allocate %zu values for batch %zu x "
                                "seq_len %zu", n, B, L);
    g->B = B;
    g->L = L;
    g->n_layers = cfg->n_layers;
    grad_carve(g, cfg, B, L);
    return REFENC_OK;
}

void refenc_grad_workspace_free(refenc_grad_workspace *g)
{
    if (g == NULL)
        return;
    free(g->block);
    memset(g, 0, sizeof *g);
}

/* The embedding's backward, dh (B, L, D) the gradient of its output (it is
 * overwritten): LN_emb, then the scatter-adds into the tables; dx (if not
 * NULL) gets the gradient of the first term, E[tokens] (s) or x. */
static void embed_backward(refenc_params *grad, double *dx, double *dh, refenc_workspace *ws,
                           const refenc_grad_workspace *g, const refenc_params *p,
                           const refenc_config *cfg, const refenc_input *in)
{
    const size_t B = in->B, L = in->L, D = cfg->d_model, V = cfg->vocab_size;
    const int64_t *pos = in->positions != NULL ? in->positions : ws->positions;
    if (cfg->embedding_norm)
        refenc_norm_backward_k(g->kernels, dh, grad->embedding_norm_weight, grad->embedding_norm_bias, dh,
                             g->e, p->embedding_norm_weight, B * L, D, cfg->embedding_norm_eps, cfg);
    /* the additive terms pass dh through (dx = dy) and take a scatter-add */
    if (cfg->positional == REFENC_POS_LEARNED && cfg->position_ids == REFENC_POSIDS_ROBERTA) {
        refenc_position_ids_roberta(ws->ids, in->tokens, B, L, cfg->padding_idx);
        refenc_embedding_add_backward(grad->pos_embedding, dh, ws->ids, B, L, cfg->max_len, D);
    } else if (cfg->positional == REFENC_POS_LEARNED) {
        refenc_learned_pe_backward(grad->pos_embedding, dh, pos, B, L, cfg->max_len, D);
    }
    if (cfg->type_vocab_size > 0)
        refenc_embedding_add_backward(grad->token_type_embedding, dh, token_types(ws, in), B, L,
                                      cfg->type_vocab_size, D);
    if (V > 0) /* dE[tokens] += dh s, s = sqrt(D) when scaled (backward_kernels.h) */
        refenc_backward_kernels_or_reference(g->kernels)->embedding(grad->embedding, dh, in->tokens, B, L, V, D,
                                                                    cfg->scale_embedding);
    if (dx != NULL)
        memcpy(dx, dh, B * L * D * sizeof(double));
}

static int check_backward(const refenc_params *grad, const refenc_grad_workspace *g,
                          const refenc_config *cfg, const refenc_input *in, refenc_error *err)
{
    if (g->B != in->B || g->L != in->L || g->n_layers != cfg->n_layers)
        return refenc_error_set(err, REFENC_EINVAL,
                                "input: shape (%zu, %zu) with %zu layers but the gradient "
                                "workspace is for (%zu, %zu) with %zu", in->B, in->L,
                                cfg->n_layers, g->B, g->L, g->n_layers);
    if (grad->n_layers != cfg->n_layers || grad->n_values != refenc_config_param_count(cfg))
        return refenc_error_set(err, REFENC_EINVAL,
                                "gradients: allocated for another config (%zu values, want %zu)",
                                grad->n_values, refenc_config_param_count(cfg));
    return REFENC_OK;
}

int refenc_encoder_backward(refenc_params *grad, double *dx, refenc_grad_workspace *g,
                            refenc_workspace *ws, const refenc_params *p,
                            const refenc_config *cfg, const refenc_input *in, const double *dy,
                            refenc_error *err)
{
    return refenc_encoder_backward_traced(grad, dx, g, ws, p, cfg, in, dy, NULL, err);
}

int refenc_encoder_backward_traced(refenc_params *grad, double *dx, refenc_grad_workspace *g,
                                   refenc_workspace *ws, const refenc_params *p,
                                   const refenc_config *cfg, const refenc_input *in,
                                   const double *dy, const refenc_trace *trace, refenc_error *err)
{
    int st = check_call(ws, cfg, in, err);
    if (st == REFENC_OK)
        st = check_backward(grad, g, cfg, in, err);
    if (st == REFENC_OK && in->rows != NULL)
        st = refenc_error_set(err, REFENC_EINVAL, "input: in.rows: the backward differentiates the whole "
                              "sequence; selected query rows are forward only");
    if (st)
        return st;
    const size_t B = in->B, L = in->L, D = cfg->d_model, BLD = B * L * D, N = cfg->n_layers;
    refenc_attn_options opt;
    refenc_rope_options rope;
    const refenc_rope_options *rope_p;
    attention_setup(&opt, &rope, &rope_p, ws, p, cfg, in);

    /* the forward again, keeping each layer's input: acts[i] (B, L, D) */
    embed_sum(g->e, ws, p, cfg, in);
    embed_norm(g->acts, g->e, p, cfg, B * L);
    for (size_t i = 0; i < N; i++)
        refenc_layer_forward(g->acts + (i + 1) * BLD, &ws->layer, g->acts + i * BLD,
                             &p->layers[i], cfg, &opt, rope_p, B, L, i, NULL);

    double *dh = g->dh0, *dnext = g->dh1;
    g->layer.kernels = g->kernels;
    if (cfg->final_norm)
        refenc_norm_backward_k(g->kernels, dh, grad->norm_weight, grad->norm_bias, dy, g->acts + N * BLD,
                             p->norm_weight, B * L, D, cfg->layer_norm_eps, cfg);
    else
        memcpy(dh, dy, BLD * sizeof(double));
    const size_t bld[3] = {B, L, D};
    for (size_t i = N; i-- > 0;) {
        char name[48];
        snprintf(name, sizeof name, "layers.%zu.output", i);
        refenc_trace_emit(trace, name, dh, 3, bld); /* the gradient of layer i's output */
        refenc_layer_backward(dnext, &grad->layers[i], &g->layer, &ws->layer, dh,
                              g->acts + i * BLD, &p->layers[i], cfg, &opt, rope_p, B, L);
        double *t = dh;
        dh = dnext;
        dnext = t;
    }
    refenc_trace_emit(trace, "embed", dh, 3, bld);
    embed_backward(grad, dx, dh, ws, g, p, cfg, in);
    return REFENC_OK;
}
