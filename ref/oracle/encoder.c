/* The encoder stack in MPFR (encoder.h), every intermediate kept in MPFR:
 *   h = E[tokens] (sqrt(D))  or  h = x;   h = h + TT[types];   h = h + PE (sinusoidal,
 *   learned at 0..L-1, in.positions, or RoBERTa's ids);   h = LN_emb(h) if embedding_norm
 *   h = layer_i(h), i = 0 .. N-1   (RoPE / ALiBi inside every attention)
 *   y = LN(h) if final_norm, else h
 * Only the certified twin rounds, once, at the end of every step it reports. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int refenc_mp_params_alloc(refenc_mp_params *mp, const refenc_params *p, refenc_error *err)
{
    memset(mp, 0, sizeof *mp);
    mp->n_values = p->n_values;
    mp->block = refenc_mp_alloc(p->n_values, 53); /* doubles are exact at 53 bits */
    mp->layers = calloc(p->n_layers ? p->n_layers : 1, sizeof *mp->layers);
    if (mp->block == NULL || mp->layers == NULL) {
        refenc_mp_params_free(mp);
        return refenc_mp_enomem(err, "parameters", 53);
    }
    refenc_mp_set_d(mp->block, p->block, p->n_values);
    mp->n_layers = p->n_layers;
#define VIEW(ptr) ((ptr) != NULL ? (mpfr_srcptr)(mp->block + ((ptr) - p->block)) : NULL)
    mp->embedding = VIEW(p->embedding);
    mp->pos_embedding = VIEW(p->pos_embedding);
    mp->norm_weight = VIEW(p->norm_weight);
    mp->norm_bias = VIEW(p->norm_bias);
    mp->token_type_embedding = VIEW(p->token_type_embedding);
    mp->embedding_norm_weight = VIEW(p->embedding_norm_weight);
    mp->embedding_norm_bias = VIEW(p->embedding_norm_bias);
    for (size_t i = 0; i < p->n_layers; i++) {
        const refenc_layer_params *l = &p->layers[i];
        mp->layers[i] = (refenc_mp_layer_params){
            VIEW(l->in_proj_weight), VIEW(l->in_proj_bias), VIEW(l->out_proj_weight),
            VIEW(l->out_proj_bias), VIEW(l->linear1_weight), VIEW(l->linear1_bias),
            VIEW(l->linear2_weight), VIEW(l->linear2_bias), VIEW(l->norm1_weight),
            VIEW(l->norm1_bias), VIEW(l->norm2_weight), VIEW(l->norm2_bias),
        };
    }
#undef VIEW
    return REFENC_OK;
}

void refenc_mp_params_free(refenc_mp_params *mp)
{
    if (mp == NULL)
        return;
    refenc_mp_free(mp->block, mp->n_values);
    free(mp->layers);
    memset(mp, 0, sizeof *mp);
}

int refenc_mpk_encoder_forward(mpfr_ptr y, const refenc_mp_params *p, const refenc_config *cfg,
                               const refenc_input *in, mpfr_prec_t prec,
                               const refenc_mp_hooks *hooks,
                               const refenc_mp_sink *sink, refenc_error *err)
{
    const size_t B = in->B, L = in->L, D = cfg->d_model, H = cfg->n_heads, F = cfg->d_ff;
    const size_t BLD = B * L * D, bld[3] = {B, L, D};
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, refenc_mpk_ws_tmp(D, F, L, D / H),
                                refenc_mpk_ws_ptr(D, F, L, D / H));
    int64_t *pos_default = malloc(L * sizeof(int64_t));
    int64_t *ids = calloc(B * L, sizeof(int64_t)); /* token types 0, or RoBERTa's positions */
    unsigned char *exact = malloc(BLD); /* which values of "embed" are exact */
    mpfr_ptr h = refenc_mp_arena_alloc(&ar, BLD, prec), next = refenc_mp_arena_alloc(&ar, BLD, prec);
    mpfr_ptr slopes = refenc_mp_arena_alloc(&ar, H, prec);
    mpfr_ptr eps = refenc_mp_arena_from_d(&ar, &cfg->layer_norm_eps, 1, 53);
    mpfr_ptr emb_eps = refenc_mp_arena_from_d(&ar, &cfg->embedding_norm_eps, 1, 53);
    mpfr_ptr tau = refenc_mp_arena_from_d(&ar, &cfg->temperature, 1, 53);
    mpfr_ptr base = refenc_mp_arena_from_d(&ar, &cfg->rope_base, 1, 53);
    mpfr_ptr mask = in->attn_mask ? refenc_mp_arena_from_d(&ar, in->attn_mask, L * L, 53) : NULL;
    refenc_mp_layer_work w;
    refenc_mp_layer_work_alloc(&w, &ar, B, L, cfg, prec);
    if (st || ar.failed || pos_default == NULL || ids == NULL || exact == NULL) {
        st = refenc_mp_enomem(err, "encoder", prec);
        goto done;
    }
    for (size_t l = 0; l < L; l++)
        pos_default[l] = (int64_t)l;
    const int64_t *pos = in->positions != NULL ? in->positions : pos_default;

    if (cfg->vocab_size > 0 && cfg->scale_embedding) {
        refenc_mpk_embedding_forward(h, exact, in->tokens, p->embedding, B, L, D, &ws);
    } else if (cfg->vocab_size > 0) {
        refenc_mpk_embedding_lookup(h, exact, in->tokens, p->embedding, B, L, D);
    } else {
        refenc_mp_set_d(h, in->x, BLD); /* exact: prec >= 53 */
        memset(exact, 1, BLD);
    }
    if (cfg->type_vocab_size > 0) /* without in.token_type_ids every type is 0 (ids zeroed) */
        refenc_mpk_embedding_add(h, exact, h, in->token_types ? in->token_types : ids,
                                 p->token_type_embedding, B, L, D);
    if (cfg->positional == REFENC_POS_SINUSOIDAL) {
        refenc_mpk_sinusoidal_forward(h, exact, h, pos, B, L, D, &ws);
    } else if (cfg->positional == REFENC_POS_LEARNED && cfg->position_ids == REFENC_POSIDS_ROBERTA) {
        refenc_mpk_position_ids_roberta(ids, in->tokens, B, L, cfg->padding_idx);
        refenc_mpk_embedding_add(h, exact, h, ids, p->pos_embedding, B, L, D);
    } else if (cfg->positional == REFENC_POS_LEARNED) {
        refenc_mpk_learned_pe_forward(h, exact, h, pos, p->pos_embedding, B, L, D);
    }
    if (cfg->embedding_norm) {
        refenc_mpk_layernorm_forward(h, h, p->embedding_norm_weight, p->embedding_norm_bias,
                                     B * L, D, emb_eps, &ws);
        memset(exact, 0, BLD); /* computed: certified as any other value */
    }
    if ((st = refenc_mp_sink_emit_exact(sink, "embed", h, exact, 3, bld)) != REFENC_OK)
        goto done;

    if (hooks != NULL && hooks->alibi_slopes_pow2)
        refenc_mpk_alibi_slopes_pow2(slopes, H, &ws);
    else
        refenc_mpk_alibi_slopes(slopes, H, &ws);
    const refenc_mp_attn_options opt = {
        .key_padding_mask = in->key_padding_mask,
        .causal = cfg->causal,
        .attn_mask = mask,
        .alibi_slopes = cfg->positional == REFENC_POS_ALIBI ? slopes : NULL,
        .positions = pos,
        .temperature = tau,
        .mask_value = cfg->mask_value,
        .merge_without_transpose = hooks != NULL && hooks->merge_without_transpose,
    };
    const refenc_mp_rope_options rope = {cfg->rope_layout, base, pos};
    const refenc_mp_rope_options *rope_p = cfg->positional == REFENC_POS_ROPE ? &rope : NULL;

    for (size_t i = 0; i < cfg->n_layers; i++) {
        st = refenc_mpk_layer_forward(next, &w, h, &p->layers[i], cfg, eps, &opt, rope_p, B, L, i,
                                      sink, &ws);
        if (st != REFENC_OK)
            goto done;
        mpfr_ptr t = h;
        h = next;
        next = t;
    }

    if (cfg->final_norm) {
        refenc_mpk_layernorm_forward(y, h, p->norm_weight, p->norm_bias, B * L, D, eps, &ws);
        if ((st = refenc_mp_sink_emit(sink, "norm", y, 3, bld)) != REFENC_OK)
            goto done;
    } else {
        for (size_t i = 0; i < BLD; i++)
            mpfr_set(y + i, h + i, MPFR_RNDN);
    }
    st = refenc_mp_sink_emit(sink, "output", y, 3, bld);
done:
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    free(pos_default);
    free(ids);
    free(exact);
    return st;
}

typedef struct {
    const refenc_mp_params *p;
    const refenc_config *cfg;
    const refenc_input *in;
} enc_args;

static int enc_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const enc_args *a = ctx;
    const size_t n = a->in->B * a->in->L * a->cfg->d_model;
    mpfr_ptr y = refenc_mp_alloc(n, prec);
    if (y == NULL)
        return refenc_mp_enomem(err, "encoder output", prec);
    const int st = refenc_mpk_encoder_forward(y, a->p, a->cfg, a->in, prec, NULL, sink, err);
    refenc_mp_free(y, n);
    return st;
}

typedef struct {
    double *y;
    const refenc_trace *user;
} enc_tee;

static void enc_tee_fn(void *ctx, const char *name, const double *data, size_t ndim,
                       const size_t *shape)
{
    const enc_tee *t = ctx;
    if (strcmp(name, "output") == 0)
        memcpy(t->y, data, shape[0] * shape[1] * shape[2] * sizeof(double));
    refenc_trace_emit(t->user, name, data, ndim, shape);
}

int refenc_mp_encoder_forward(double *y, const refenc_params *p, const refenc_config *cfg,
                              const refenc_input *in, const refenc_trace *trace,
                              mpfr_prec_t prec, refenc_mp_report *rep)
{
    refenc_mp_report local;
    if (rep == NULL)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    int st = refenc_input_validate(in, cfg, &rep->error);
    if (st != REFENC_OK)
        return st;
    refenc_mp_params mp;
    if ((st = refenc_mp_params_alloc(&mp, p, &rep->error)) != REFENC_OK)
        return st;
    enc_args a = {&mp, cfg, in};
    enc_tee t = {y, trace};
    const refenc_trace tr = {enc_tee_fn, &t};
    st = refenc_mp_certify(enc_eval, &a, prec, &tr, rep);
    refenc_mp_params_free(&mp);
    return st;
}
