/* One encoder layer in MPFR (layer.h), nothing rounded between steps:
 *   Pre-LN:   h = x + MHA(LN1(x));   y = h + FFN(LN2(h))
 *   Post-LN:  h = LN1(x + MHA(x));   y = LN2(h + FFN(h))
 * with the reference's trace steps, emitted in MPFR. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static int emit(const refenc_mp_sink *sink, size_t index, const char *step, mpfr_srcptr data,
                size_t ndim, const size_t *shape)
{
    char name[64];
    snprintf(name, sizeof name, "layers.%zu.%s", index, step);
    return refenc_mp_sink_emit(sink, name, data, ndim, shape);
}

static void add(mpfr_ptr y, mpfr_srcptr a, mpfr_srcptr b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mpfr_add(y + i, a + i, b + i, MPFR_RNDN);
}

int refenc_mpk_layer_forward(mpfr_ptr y, refenc_mp_layer_work *w, mpfr_srcptr x,
                             const refenc_mp_layer_params *lp, const refenc_config *cfg,
                             mpfr_srcptr eps, const refenc_mp_attn_options *opt,
                             const refenc_mp_rope_options *rope, size_t B, size_t L,
                             size_t index, const refenc_mp_sink *sink, refenc_mp_ws *ws)
{
    const size_t D = cfg->d_model, F = cfg->d_ff, H = cfg->n_heads, BL = B * L;
    const size_t bld[3] = {B, L, D}, bhll[4] = {B, H, L, L};
    int st = REFENC_OK;
#define EMIT(step, data, nd, shape)                                   \
    do {                                                              \
        if ((st = emit(sink, index, step, data, nd, shape)) != 0)     \
            return st;                                                \
    } while (0)

    if (cfg->norm == REFENC_NORM_PRE) {
        refenc_mpk_layernorm_forward(w->ln, x, lp->norm1_weight, lp->norm1_bias, BL, D, eps, ws);
        EMIT("norm1", w->ln, 3, bld);
        refenc_mpk_mha_forward(w->attn, &w->mha, w->ln, lp->in_proj_weight, lp->in_proj_bias,
                               lp->out_proj_weight, lp->out_proj_bias, opt, rope, B, L, D, H, ws);
        EMIT("self_attn.weights", w->mha.weights, 4, bhll);
        EMIT("self_attn", w->attn, 3, bld);
        add(w->resid, x, w->attn, BL * D);
        refenc_mpk_layernorm_forward(w->ln, w->resid, lp->norm2_weight, lp->norm2_bias, BL, D,
                                     eps, ws);
        EMIT("norm2", w->ln, 3, bld);
        refenc_mpk_ffn_forward(w->ffn, w->hidden, w->ln, lp->linear1_weight, lp->linear1_bias,
                               lp->linear2_weight, lp->linear2_bias, BL, D, F, cfg->activation,
                               ws);
        EMIT("ffn", w->ffn, 3, bld);
        add(y, w->resid, w->ffn, BL * D);
    } else {
        refenc_mpk_mha_forward(w->attn, &w->mha, x, lp->in_proj_weight, lp->in_proj_bias,
                               lp->out_proj_weight, lp->out_proj_bias, opt, rope, B, L, D, H, ws);
        EMIT("self_attn.weights", w->mha.weights, 4, bhll);
        EMIT("self_attn", w->attn, 3, bld);
        add(w->resid, x, w->attn, BL * D);
        refenc_mpk_layernorm_forward(w->ln, w->resid, lp->norm1_weight, lp->norm1_bias, BL, D,
                                     eps, ws);
        EMIT("norm1", w->ln, 3, bld);
        refenc_mpk_ffn_forward(w->ffn, w->hidden, w->ln, lp->linear1_weight, lp->linear1_bias,
                               lp->linear2_weight, lp->linear2_bias, BL, D, F, cfg->activation,
                               ws);
        EMIT("ffn", w->ffn, 3, bld);
        add(w->resid, w->ln, w->ffn, BL * D);
        refenc_mpk_layernorm_forward(y, w->resid, lp->norm2_weight, lp->norm2_bias, BL, D, eps,
                                     ws);
        EMIT("norm2", y, 3, bld);
    }
    EMIT("output", y, 3, bld);
#undef EMIT
    return REFENC_OK;
}

void refenc_mp_layer_work_alloc(refenc_mp_layer_work *w, refenc_mp_arena *ar, size_t B,
                                size_t L, const refenc_config *cfg, mpfr_prec_t prec)
{
    const size_t BLD = B * L * cfg->d_model;
    w->ln = refenc_mp_arena_alloc(ar, BLD, prec);
    w->attn = refenc_mp_arena_alloc(ar, BLD, prec);
    w->resid = refenc_mp_arena_alloc(ar, BLD, prec);
    w->ffn = refenc_mp_arena_alloc(ar, BLD, prec);
    w->hidden = refenc_mp_arena_alloc(ar, B * L * cfg->d_ff, prec);
    refenc_mp_mha_work_alloc(&w->mha, ar, B, L, cfg->d_model, cfg->n_heads, prec);
}

typedef struct {
    const double *x;
    const refenc_layer_params *lp;
    const refenc_config *cfg;
    const refenc_attn_options *opt;
    const refenc_rope_options *rope;
    size_t B, L, index;
} layer_args;

static int layer_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const layer_args *a = ctx;
    const refenc_config *cfg = a->cfg;
    const size_t D = cfg->d_model, F = cfg->d_ff, H = cfg->n_heads, BLD = a->B * a->L * D;
    const refenc_layer_params *lp = a->lp;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    void *oh = NULL;
    const refenc_mp_attn_options *opt = NULL;
    int st = refenc_mp_ws_alloc(&ws, prec, refenc_mpk_ws_tmp(D, F, a->L, D / H),
                                refenc_mpk_ws_ptr(D, F, a->L, D / H));
    const int ok = refenc_mp_attn_options_from_d(&oh, &opt, a->opt, H, a->L);
    refenc_mp_layer_params mlp = {
        refenc_mp_arena_from_d(&ar, lp->in_proj_weight, 3 * D * D, 53),
        refenc_mp_arena_from_d(&ar, lp->in_proj_bias, 3 * D, 53),
        refenc_mp_arena_from_d(&ar, lp->out_proj_weight, D * D, 53),
        refenc_mp_arena_from_d(&ar, lp->out_proj_bias, D, 53),
        refenc_mp_arena_from_d(&ar, lp->linear1_weight, F * D, 53),
        refenc_mp_arena_from_d(&ar, lp->linear1_bias, F, 53),
        refenc_mp_arena_from_d(&ar, lp->linear2_weight, D * F, 53),
        refenc_mp_arena_from_d(&ar, lp->linear2_bias, D, 53),
        refenc_mp_arena_from_d(&ar, lp->norm1_weight, D, 53),
        refenc_mp_arena_from_d(&ar, lp->norm1_bias, D, 53),
        refenc_mp_arena_from_d(&ar, lp->norm2_weight, D, 53),
        refenc_mp_arena_from_d(&ar, lp->norm2_bias, D, 53),
    };
    mpfr_ptr x = refenc_mp_arena_from_d(&ar, a->x, BLD, 53);
    mpfr_ptr eps = refenc_mp_arena_from_d(&ar, &cfg->layer_norm_eps, 1, 53);
    mpfr_ptr base = a->rope ? refenc_mp_arena_from_d(&ar, &a->rope->base, 1, 53) : NULL;
    mpfr_ptr y = refenc_mp_arena_alloc(&ar, BLD, prec);
    refenc_mp_layer_work w;
    refenc_mp_layer_work_alloc(&w, &ar, a->B, a->L, cfg, prec);
    if (st || !ok || ar.failed) {
        st = refenc_mp_enomem(err, "layer", prec);
    } else {
        refenc_mp_rope_options rope = {a->rope ? a->rope->layout : REFENC_ROPE_HALF, base,
                                       a->rope ? a->rope->positions : NULL};
        st = refenc_mpk_layer_forward(y, &w, x, &mlp, cfg, eps, opt, a->rope ? &rope : NULL,
                                      a->B, a->L, a->index, sink, &ws);
    }
    refenc_mp_arena_free(&ar);
    refenc_mp_attn_options_free(oh);
    refenc_mp_ws_free(&ws);
    return st;
}

/* Certified steps go to the caller's trace; the one named `name` also into y. */
typedef struct {
    const char *name;
    double *y;
    const refenc_trace *user;
} tee_ctx;

static void tee(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    const tee_ctx *t = ctx;
    if (strcmp(name, t->name) == 0) {
        size_t n = 1;
        for (size_t d = 0; d < ndim; d++)
            n *= shape[d];
        memcpy(t->y, data, n * sizeof(double));
    }
    refenc_trace_emit(t->user, name, data, ndim, shape);
}

int refenc_mp_layer_forward(double *y, const double *x, const refenc_layer_params *lp,
                            const refenc_config *cfg, const refenc_attn_options *opt,
                            const refenc_rope_options *rope, size_t B, size_t L, size_t index,
                            const refenc_trace *trace, mpfr_prec_t prec, refenc_mp_report *rep)
{
    layer_args a = {x, lp, cfg, opt, rope, B, L, index};
    char name[64];
    snprintf(name, sizeof name, "layers.%zu.output", index);
    tee_ctx t = {name, y, trace};
    const refenc_trace tr = {tee, &t};
    return refenc_mp_certify(layer_eval, &a, prec, &tr, rep);
}
