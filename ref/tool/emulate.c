/* A golden case run in emulated precision (emulate.h): the structure of
 * refenc_case_run_reference (run_case.c), refenc_encoder_forward,
 * refenc_layer_forward and refenc_mha_forward on the emulation's kernels. */
#include "emulate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../alibi.h"
#include "../core/alloc.h"
#include "../embedding.h"
#include "../encoder.h"
#include "../glu.h"
#include "../gqa.h"
#include "../layer_pattern.h"
#include "../mha.h"
#include "../position_ids.h"
#include "../rows.h"
#include "emulate_kernels.h"

void refenc_emulation_round_case(refenc_case *c, refenc_format f)
{
    for (size_t i = 0; c->x != NULL && i < c->x_numel; i++)
        c->x[i] = refenc_round(f, c->x[i]);
    for (size_t i = 0; c->attn_mask != NULL && i < c->L * c->L; i++)
        c->attn_mask[i] = refenc_round(f, c->attn_mask[i]);
    for (size_t i = 0; i < c->params.n_values; i++)
        c->params.block[i] = refenc_round(f, c->params.block[i]);
}

/* Everything one run needs besides the case. */
typedef struct {
    const refenc_emulation *e;
    const refenc_variant_hooks *hooks;
    const refenc_trace *trace;
    size_t Hkv, Dh; /* the case's key/value heads and head width (gqa.h) */
    const refenc_config *cfg; /* the case's (qk_norm, its eps and scale) */
} emu_run;

static void emit(const emu_run *r, const char *name, const double *data, size_t ndim, size_t d0, size_t d1,
                 size_t d2, size_t d3)
{
    const size_t shape[4] = {d0, d1, d2, d3};
    refenc_trace_emit(r->trace, name, data, ndim, shape);
}

/* K or V heads (B, H, L, Dh) from the projection p (B, L, Hkv Dh), through
 * scratch (B, Hkv, L, Dh): query head h reads key/value head h / g (gqa.h),
 * or, for the bug variant gqa_tiled, h % Hkv. */
static void kv_heads(const emu_run *r, double *dst, double *scratch, const double *p, size_t B, size_t L,
                     size_t H, size_t Hkv, size_t Dh)
{
    const int tiled = r->hooks != NULL && r->hooks->gqa_tiled;
    if (Hkv == H) {
        refenc_heads_split(dst, p, B, L, H, Dh);
        return;
    }
    refenc_heads_split(scratch, p, B, L, Hkv, Dh);
    if (!tiled) {
        refenc_kv_heads_repeat(dst, scratch, B, H, Hkv, L, Dh);
        return;
    }
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) /* dst[b,h] = scratch[b, h % Hkv]: the tiled bug */
            memcpy(dst + (b * H + h) * L * Dh, scratch + (b * Hkv + h % Hkv) * L * Dh, L * Dh * sizeof(double));
}

/* Qwen3's q_norm, k_norm (qk_norm.h) on q (rows of H Dh) and k (rows of
 * Hkv Dh) in Qwen3RMSNorm's order (normalised in the math format, cast, times
 * w; Gemma 3's (1 + w) in its own order); the bug variant
 * qk_norm_over_all_heads normalises each row over its whole width. */
static void qk_norm(const emu_run *r, double *q, double *k, const refenc_layer_params *lp, size_t rows_q,
                    size_t rows, size_t H, size_t Hkv)
{
    const refenc_config *cfg = r->cfg;
    const int all = r->hooks != NULL && r->hooks->qk_norm_over_all_heads, off = cfg->rmsnorm_offset;
    const size_t Dh = r->Dh, nq = all ? 1 : H, nk = all ? 1 : Hkv;
    emu_rmsnorm_rows(r->e, q, q, lp->q_norm_weight, rows_q * nq, H * Dh / nq, Dh, cfg->layer_norm_eps, off, !off);
    emu_rmsnorm_rows(r->e, k, k, lp->k_norm_weight, rows * nk, Hkv * Dh / nk, Dh, cfg->layer_norm_eps, off, !off);
}

/* refenc_gqa_rows_forward with the emulation's kernels: the queries from
 * xq (B, R, D), the selected rows `rows` (NULL: R = L, xq = x), keys and
 * values from x (B, L, D); the merge honours the variant that reads
 * (B, H, R, Dh) as (B, R, E). */
static void mha(const emu_run *r, double *y, refenc_mha_work *w, const double *xq, const double *x,
                const int64_t *rows, size_t R, const refenc_layer_params *lp, const refenc_attn_options *opt,
                const refenc_rope_options *rope, size_t B, size_t L, size_t D, size_t H)
{
    const refenc_emulation *e = r->e;
    const size_t Hkv = r->Hkv, Dh = r->Dh, BL = B * L, BR = B * R, E = H * Dh, Ekv = Hkv * Dh;
    emu_linear(e, w->q, xq, lp->in_proj_weight, lp->in_proj_bias, BR, D, E);
    const double *b = lp->in_proj_bias; /* NULL: bias-free (linear_bias false) */
    emu_linear(e, w->k, x, lp->in_proj_weight + E * D, b != NULL ? b + E : NULL, BL, D, Ekv);
    emu_linear(e, w->v, x, lp->in_proj_weight + (E + Ekv) * D, b != NULL ? b + E + Ekv : NULL, BL, D, Ekv);
    const int qkn = r->cfg->qk_norm == REFENC_QKNORM_RMS;
    const int late = qkn && r->hooks != NULL && r->hooks->qk_norm_after_rope;
    if (qkn && !late) /* before RoPE, as Qwen3Attention */
        qk_norm(r, w->q, w->k, lp, BR, BL, H, Hkv);
    refenc_heads_split(w->qh, w->q, B, R, H, Dh);
    kv_heads(r, w->kh, w->ctxh, w->k, B, L, H, Hkv, Dh);
    kv_heads(r, w->vh, w->ctxh, w->v, B, L, H, Hkv, Dh);
    if (rope != NULL) {
        emu_rope_rows(e, w->qh, w->qh, rope->positions, rows, B * H, R, L, Dh, rope->base, rope->layout,
                      rope->scaling);
        emu_rope(e, w->kh, w->kh, rope->positions, B * H, L, Dh, rope->base, rope->layout, rope->scaling);
    }
    if (late) /* the bug: every head's rows (B H L, Dh), the repeated keys alike */
        qk_norm(r, w->qh, w->kh, lp, BR, BL, H, H);
    emu_attention_rows(e, w->ctxh, w->weights, w->qh, w->kh, w->vh, rows, opt, B, H, R, L, Dh,
                       r->hooks != NULL && r->hooks->softcap_after_mask);
    if (r->hooks != NULL && r->hooks->merge_without_transpose)
        memcpy(w->ctx, w->ctxh, BR * E * sizeof(double));
    else
        refenc_heads_merge(w->ctx, w->ctxh, B, R, H, Dh);
    emu_linear(e, y, w->ctx, lp->out_proj_weight, lp->out_proj_bias, BR, E, D);
}

static void emit_layer(const emu_run *r, size_t index, const char *step, const double *data, size_t ndim,
                       size_t d0, size_t d1, size_t d2, size_t d3)
{
    char name[64];
    snprintf(name, sizeof name, "layers.%zu.%s", index, step);
    emit(r, name, data, ndim, d0, d1, d2, d3);
}

/* refenc_ffn_block_forward: the MLP, or the gated FFN h = act(a) * b (glu.h)
 * with hidden (N, 2F) holding h and b. */
static void ffn(const emu_run *r, double *y, double *hidden, const double *x, const refenc_layer_params *lp,
                size_t N, const refenc_config *cfg)
{
    const size_t D = cfg->d_model, F = cfg->d_ff;
    if (cfg->ffn_type != REFENC_FFN_GLU) {
        emu_linear(r->e, hidden, x, lp->linear1_weight, lp->linear1_bias, N, D, F);
        emu_activation(r->e, hidden, hidden, N * F, cfg->activation);
    } else {
        const double *Wg, *bg, *Wu, *bu;
        double *up = hidden + N * F;
        refenc_glu_halves(&Wg, &bg, &Wu, &bu, lp->linear1_weight, lp->linear1_bias, D, F, cfg->glu_gate);
        emu_linear(r->e, hidden, x, Wg, bg, N, D, F);
        emu_activation(r->e, hidden, hidden, N * F, cfg->activation);
        emu_linear(r->e, up, x, Wu, bu, N, D, F);
        for (size_t i = 0; i < N * F; i++) /* the product, an elementwise step */
            hidden[i] = emu_v(r->e, hidden[i] * up[i]);
    }
    emu_linear(r->e, y, hidden, lp->linear2_weight, lp->linear2_bias, N, F, D);
}

/* The attention block of a layer on the query rows `in` (B, R, D) with keys
 * and values from kv (B, L, D), its trace steps, and the residual
 * w->resid = x_rows + attention (x_rows (B, R, D): the selected rows of the
 * layer's input). */
static void attention_residual(const emu_run *r, refenc_layer_work *w, const double *in, const double *kv,
                               const double *x_rows, const int64_t *rows, size_t R, const refenc_layer_params *lp,
                               const refenc_attn_options *opt, const refenc_rope_options *rope, size_t B,
                               size_t L, size_t D, size_t H, size_t i)
{
    mha(r, w->attn, &w->mha, in, kv, rows, R, lp, opt, rope, B, L, D, H);
    if (lp->post_attn_norm_weight != NULL) /* sandwich_norm: in place, row by row */
        emu_norm(r->e, w->attn, w->attn, lp->post_attn_norm_weight, lp->post_attn_norm_bias, B * R, D,
                 r->cfg->layer_norm_eps, r->cfg);
    emit_layer(r, i, "self_attn.weights", w->mha.weights, 4, B, H, R, L);
    emit_layer(r, i, "self_attn", w->attn, 3, B, R, D, 0);
    emu_add(r->e, w->resid, x_rows, w->attn, B * R * D);
}

/* refenc_layer_rows_forward: Pre-LN or Post-LN, the same trace steps; the
 * selected rows (NULL: all) gathered once, as the reference does. */
static void layer(const emu_run *r, double *y, refenc_layer_work *w, const double *x,
                  const refenc_layer_params *lp, const refenc_config *cfg, const refenc_attn_options *opt,
                  const refenc_rope_options *rope, size_t B, size_t L, const int64_t *rows, size_t R, size_t i)
{
    const refenc_emulation *e = r->e;
    const size_t D = cfg->d_model, H = cfg->n_heads, BL = B * L, BR = B * R;
    const double eps = cfg->layer_norm_eps;
    if (cfg->norm == REFENC_NORM_PRE) {
        if (lp->norm1_weight != NULL)
            emu_norm(e, w->ln, x, lp->norm1_weight, lp->norm1_bias, BL, D, eps, cfg);
        else /* skip_first_prenorm's layer 0: the identity, no rounding */
            memcpy(w->ln, x, BL * D * sizeof(double));
        refenc_rows_gather(w->ffn, w->ln, rows, B, L, R, D); /* the queries' rows; ffn free until the FFN */
        emit_layer(r, i, "norm1", w->ffn, 3, B, R, D, 0);
        refenc_rows_gather(w->resid, x, rows, B, L, R, D);
        attention_residual(r, w, w->ffn, w->ln, w->resid, rows, R, lp, opt, rope, B, L, D, H, i);
        emu_norm(e, w->ln, w->resid, lp->norm2_weight, lp->norm2_bias, BR, D, eps, cfg);
        emit_layer(r, i, "norm2", w->ln, 3, B, R, D, 0);
        ffn(r, w->ffn, w->hidden, w->ln, lp, BR, cfg);
        if (lp->post_ffn_norm_weight != NULL) /* sandwich_norm: in place, row by row */
            emu_norm(e, w->ffn, w->ffn, lp->post_ffn_norm_weight, lp->post_ffn_norm_bias, BR, D, eps, cfg);
        emit_layer(r, i, "ffn", w->ffn, 3, B, R, D, 0);
        emu_add(e, y, w->resid, w->ffn, BR * D);
    } else {
        refenc_rows_gather(w->ln, x, rows, B, L, R, D);
        attention_residual(r, w, w->ln, x, w->ln, rows, R, lp, opt, rope, B, L, D, H, i);
        emu_norm(e, w->ln, w->resid, lp->norm1_weight, lp->norm1_bias, BR, D, eps, cfg);
        emit_layer(r, i, "norm1", w->ln, 3, B, R, D, 0);
        ffn(r, w->ffn, w->hidden, w->ln, lp, BR, cfg);
        emit_layer(r, i, "ffn", w->ffn, 3, B, R, D, 0);
        emu_add(e, w->resid, w->ln, w->ffn, BR * D);
        emu_norm(e, y, w->resid, lp->norm2_weight, lp->norm2_bias, BR, D, eps, cfg);
        emit_layer(r, i, "norm2", y, 3, B, R, D, 0);
    }
    emit_layer(r, i, "output", y, 3, B, R, D, 0);
}

/* The attention options of the case (T5's table: layer 0's; the bug
 * variant t5_bucket_not_clamped from the hooks). */
static refenc_attn_options attn_options(const emu_run *r, const refenc_case *c, const double *slopes)
{
    refenc_attn_options opt = refenc_attn_options_of(&c->cfg, c->key_padding_mask, c->attn_mask, c->positions, slopes);
    opt.relative_bias = c->params.layers[0].relative_attention_bias;
    opt.relative_unclamped = r->hooks != NULL && r->hooks->t5_bucket_not_clamped;
    return opt;
}

/* The layers on h (next: their other buffer), each with its window and RoPE
 * base (layer_pattern.h); returns the buffer that holds the last output. */
static double *stack(const emu_run *r, double *h, double *next, refenc_workspace *ws, const double *slopes,
                     const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    for (size_t i = 0; i < cfg->n_layers; i++) {
        refenc_attn_options opt = attn_options(r, c, slopes);
        refenc_rope_options rope = {cfg->rope_layout, cfg->rope_base, c->positions, &cfg->rope_scaling};
        refenc_layer_options(cfg, i, &opt, &rope);
        if (r->hooks != NULL && r->hooks->t5_bias_per_layer && i > 0) /* only block 0 has a table */
            opt.relative_bias = NULL;
        if (r->hooks != NULL && r->hooks->rope_scaling_on_local_layers)
            rope.scaling = &cfg->rope_scaling;
        const int last = i + 1 == cfg->n_layers; /* the selected rows: the last layer's (rows.h) */
        layer(r, next, &ws->layer, h, &c->params.layers[i], cfg, &opt,
              cfg->positional == REFENC_POS_ROPE ? &rope : NULL, c->B, c->L, last ? c->rows : NULL,
              last && c->rows != NULL ? c->R : c->L, i);
        double *t = h;
        h = next;
        next = t;
    }
    return h;
}

/* The embedding path before its norm into h: embedding (scaled or not) or
 * x, token types, additive PE (RoBERTa's positions from the tokens). */
static void embed_sum(const refenc_emulation *e, double *h, refenc_workspace *ws, const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    const refenc_params *p = &c->params;
    const size_t B = c->B, L = c->L, D = cfg->d_model;
    if (cfg->vocab_size > 0 && cfg->scale_embedding)
        emu_embedding(e, h, c->tokens, p->embedding, B, L, D,
                      refenc_embedding_normalizer(D, refenc_normalizer_bits(cfg->embedding_normalizer_dtype)));
    else if (cfg->vocab_size > 0)
        emu_embedding_lookup(e, h, c->tokens, p->embedding, B, L, D);
    else
        memcpy(h, c->x, B * L * D * sizeof(double));
    if (cfg->type_vocab_size > 0) {
        const int64_t *types = c->token_types;
        if (types == NULL) { /* HF's default token_type_ids: all 0 */
            memset(ws->ids, 0, B * L * sizeof(int64_t));
            types = ws->ids;
        }
        emu_embedding_add(e, h, h, types, p->token_type_embedding, B, L, D);
    }
    if (cfg->positional == REFENC_POS_SINUSOIDAL) {
        emu_sinusoidal_forward(e, h, h, c->positions, B, L, D);
    } else if (cfg->positional == REFENC_POS_LEARNED && cfg->position_ids == REFENC_POSIDS_ROBERTA) {
        refenc_position_ids_roberta(ws->ids, c->tokens, B, L, cfg->padding_idx); /* integers: exact */
        emu_embedding_add(e, h, h, ws->ids, p->pos_embedding, B, L, D);
    } else if (cfg->positional == REFENC_POS_LEARNED) {
        emu_learned_pe(e, h, h, c->positions, p->pos_embedding, B, L, D);
    }
}

/* refenc_encoder_forward: the embedding path (embed_sum), embedding
 * LayerNorm, the layers, the final norm. */
static void encoder(const emu_run *r, double *y, refenc_workspace *ws, const double *slopes,
                    const refenc_case *c)
{
    const refenc_emulation *e = r->e;
    const refenc_config *cfg = &c->cfg;
    const refenc_params *p = &c->params;
    const size_t B = c->B, L = c->L, D = cfg->d_model;
    double *h = ws->h0, *next = ws->h1;
    embed_sum(e, h, ws, c);
    if (cfg->embedding_norm)
        emu_norm(e, h, h, p->embedding_norm_weight, p->embedding_norm_bias, B * L, D,
                      cfg->embedding_norm_eps, cfg);
    emit(r, "embed", h, 3, B, L, D, 0);
    h = stack(r, h, next, ws, slopes, c);
    const size_t R = c->rows != NULL ? c->R : L; /* the rows the last layer computed */
    if (cfg->final_norm) {
        emu_norm(e, y, h, p->norm_weight, p->norm_bias, B * R, D, cfg->layer_norm_eps, cfg);
        emit(r, "norm", y, 3, B, R, D, 0);
    } else {
        memcpy(y, h, B * R * D * sizeof(double));
    }
    emit(r, "output", y, 3, B, R, D, 0);
    if (cfg->pooling != REFENC_POOL_NONE) { /* out.embedding (B, D), in the free buffer next */
        const int ignore = r->hooks != NULL && r->hooks->pooling_ignores_padding;
        emu_pooling(e, next, y, ignore ? NULL : c->key_padding_mask, B, L, D, cfg->pooling,
                    cfg->pooling_normalize);
        emit(r, "embedding", next, 2, B, D, 0, 0);
    }
}

/* The components without a workspace of their own. */
static void component(const emu_run *r, double *y, double *y2, refenc_workspace *ws, const double *slopes,
                      const refenc_case *c)
{
    const refenc_emulation *e = r->e;
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model, H = cfg->n_heads, Dh = D / H;
    const refenc_layer_params *lp = &c->params.layers[0];
    switch (c->component) {
    case REFENC_COMP_ATTENTION: {
        const refenc_attn_options opt = attn_options(r, c, slopes);
        const refenc_rope_options rope = {cfg->rope_layout, cfg->rope_base, c->positions, &cfg->rope_scaling};
        mha(r, y, &ws->layer.mha, c->x, c->x, NULL, L, lp, &opt, cfg->positional == REFENC_POS_ROPE ? &rope : NULL,
            B, L, D, H);
        emit(r, "weights", ws->layer.mha.weights, 4, B, H, L, L);
        emit(r, "output", y, 3, B, L, D, 0);
        break;
    }
    case REFENC_COMP_FFN:
        ffn(r, y, ws->layer.hidden, c->x, lp, B * L, cfg);
        emit(r, "output", y, 3, B, L, D, 0);
        break;
    case REFENC_COMP_LAYERNORM:
        emu_norm(e, y, c->x, lp->norm1_weight, lp->norm1_bias, B * L, D, cfg->layer_norm_eps, cfg);
        emit(r, "output", y, 3, B, L, D, 0);
        break;
    case REFENC_COMP_SOFTMAX:
        emu_softmax(e, y, c->x, B, L, cfg->temperature, 0);
        emit(r, "output", y, 2, B, L, 0, 0);
        break;
    case REFENC_COMP_ACTIVATION:
        emu_activation(e, y, c->x, B * L, cfg->activation);
        emit(r, "output", y, 2, B, L, 0, 0);
        break;
    case REFENC_COMP_SINUSOIDAL_PE:
        emu_sinusoidal_table(e, y, c->positions, L, D);
        emit(r, "output", y, 2, L, D, 0, 0);
        break;
    case REFENC_COMP_ROPE:
        emu_rope(e, y, c->x, c->positions, B * H, L, Dh, cfg->rope_base, cfg->rope_layout, &cfg->rope_scaling);
        emit(r, "output", y, 4, B, H, L, Dh);
        break;
    case REFENC_COMP_ALIBI:
        memcpy(y, slopes, H * sizeof *y);
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L * L; i++)
                y2[h * L * L + i] = emu_v(e, refenc_alibi_bias(y[h], c->positions[i / L], c->positions[i % L]));
        emit(r, "slopes", y, 1, H, 0, 0, 0);
        emit(r, "bias", y2, 3, H, L, L, 0);
        break;
    default:
        break;
    }
}

int refenc_emulation_run_case(const refenc_case *c, const refenc_emulation *e,
                              const refenc_variant_hooks *hooks, const refenc_trace *trace,
                              refenc_error *err)
{
    int st = refenc_case_validate(c, err);
    if (st)
        return st;
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model, H = cfg->n_heads;
    const refenc_component k = c->component;
    refenc_workspace ws;
    memset(&ws, 0, sizeof ws);
    if ((k == REFENC_COMP_ENCODER || k == REFENC_COMP_ATTENTION || k == REFENC_COMP_FFN) &&
        (st = refenc_workspace_alloc(&ws, cfg, B, L, err)))
        return st;
    /* the output's size, as refenc_case_run_reference allocates it */
    const size_t n_y = k == REFENC_COMP_ALIBI ? H : k == REFENC_COMP_SINUSOIDAL_PE ? L * D
                       : k == REFENC_COMP_ENCODER || k == REFENC_COMP_ATTENTION || k == REFENC_COMP_FFN
                           ? B * L * D : c->x_numel;
    double *y = refenc_alloc_array(n_y, sizeof *y);
    double *slopes = refenc_alloc_array(H, sizeof *slopes);
    double *y2 = k == REFENC_COMP_ALIBI ? refenc_alloc_array(H * L * L, sizeof *y2) : NULL;
    if (y == NULL || slopes == NULL || (k == REFENC_COMP_ALIBI && y2 == NULL)) {
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for the emulation", c->name);
    } else {
        const emu_run r = {e, hooks, trace, refenc_config_kv_heads(cfg), refenc_config_head_dim(cfg), cfg};
        emu_alibi_slopes(e, slopes, H, hooks != NULL && hooks->alibi_slopes_pow2);
        for (size_t h = 0; hooks != NULL && hooks->alibi_bias_positive && h < H; h++)
            slopes[h] = -slopes[h]; /* the bias +m_h |i - j| */
        if (k == REFENC_COMP_ENCODER)
            encoder(&r, y, &ws, slopes, c);
        else
            component(&r, y, y2, &ws, slopes, c);
    }
    free(y);
    free(y2);
    free(slopes);
    refenc_workspace_free(&ws);
    return st;
}

/* ---- what the emulated backward recomputes (emulate_backward.c) ---- */

void refenc_emulation_embed_sum(const refenc_emulation *e, double *h, refenc_workspace *ws, const refenc_case *c)
{
    embed_sum(e, h, ws, c);
}

void refenc_emulation_layer_forward(const refenc_emulation *e, double *y, refenc_layer_work *w, const double *x,
                                    const refenc_case *c, const refenc_attn_options *opt,
                                    const refenc_rope_options *rope, size_t i)
{
    const emu_run r = {e, NULL, NULL, refenc_config_kv_heads(&c->cfg), refenc_config_head_dim(&c->cfg), &c->cfg};
    layer(&r, y, w, x, &c->params.layers[i], &c->cfg, opt, rope, c->B, c->L, NULL, c->L, i);
}
