/* The encoder's backward in MPFR, from encoder.h and docs/gradients.md:
 * final norm (if any), layers N-1 ... 0, LN_emb, then the scatter-adds:
 * learned positions, token types, the token embedding (x sqrt(D) when
 * scaled); dx is the gradient of x (V = 0) or of the token embedding's
 * output (V > 0).  The forward is computed in MPFR from the oracle's
 * kernels (the layer's: layer_backward.h), each layer's input kept, each
 * layer's forward recomputed before its backward (but the last's, still
 * held); every output -- the forward's, dx, every parameter's gradient,
 * accumulated -- is the correctly rounded double of the exact value,
 * certified by Ziv's loop. */
#include "layer_backward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const refenc_params *p;
    const refenc_config *cfg;
    const refenc_input *in;
    const double *dY, *start; /* start: the gradients' starting values, tensor after tensor */
    int steps;                /* 1: emit the gradient of each layer's input and output */
    int threads;              /* the layers' linear maps' threads (>= 1) */
} encb_args;

/* The evaluation's MPFR state. */
typedef struct {
    const encb_args *a;
    size_t B, L, D, BL, N, nt;
    mpfr_ptr *PT, *GT;        /* (nt) each tensor and its gradient       */
    unsigned char **exT;      /* (nt) exactness of a gradient, or NULL   */
    int64_t *pos, *ids, *types; /* (L), (B L), (B L)                       */
    mpfr_ptr *xs;             /* (N + 1) each layer's input, then the last output */
    mpfr_ptr *dxs;            /* (N + 1) their gradients, when a->steps; else NULL */
    mpfr_ptr e, d, out, mask, slopes, tau, emb_eps;
    refenc_mp_attn_options mo;
    refenc_rope_options rope;
    lyr m;
} enc;

/* the index of the tensor whose data is ptr (every parameter is one); NONE
 * for NULL, a tensor the config does not have (a bias-free block's bias) */
static const size_t NONE = (size_t)-1;
static size_t tidx(const enc *s, const double *ptr)
{
    for (size_t t = 0; ptr != NULL && t < s->nt; t++)
        if (s->a->p->tensors[t].data == ptr)
            return t;
    return NONE;
}

/* the parameter, its gradient, its exactness array of tensor t, or NULL */
static mpfr_ptr PT(const enc *s, size_t t) { return t == NONE ? NULL : s->PT[t]; }
static mpfr_ptr GT(const enc *s, size_t t) { return t == NONE ? NULL : s->GT[t]; }
static unsigned char *exT(const enc *s, size_t t) { return t == NONE ? NULL : s->exT[t]; }

/* m's parameters, gradients and exactness arrays those of layer i, and its
 * linear maps' doubles; 0 on allocation failure */
static int bind_layer(enc *s, size_t i, int dy_exact)
{
    const refenc_layer_params *lp = &s->a->p->layers[i];
    const double *const t[12] = {lp->in_proj_weight, lp->in_proj_bias, lp->out_proj_weight,
                                 lp->out_proj_bias, lp->linear1_weight, lp->linear1_bias,
                                 lp->linear2_weight, lp->linear2_bias, lp->norm1_weight,
                                 lp->norm1_bias, lp->norm2_weight, lp->norm2_bias};
    for (int k = 0; k < 12; k++) {
        const size_t j = tidx(s, t[k]);
        s->m.P[k] = PT(s, j), s->m.G[k] = GT(s, j);
        s->m.ex[k] = dy_exact && (k == L2B || k == N2B) ? exT(s, j) : NULL;
    }
    return refenc_mpb_layer_bind_d(&s->m, t);
}

/* e = the embedding sum, xs[0] = LN_emb(e) or e */
static void embed_fwd(enc *s, refenc_mp_ws *ws)
{
    const refenc_config *c = s->a->cfg;
    const refenc_params *p = s->a->p;
    const refenc_input *in = s->a->in;
    if (c->vocab_size > 0 && c->scale_embedding)
        refenc_mpk_embedding_forward(s->e, NULL, in->tokens, s->PT[tidx(s, p->embedding)], s->B,
                                     s->L, s->D, c->embedding_normalizer_dtype, ws);
    else if (c->vocab_size > 0)
        refenc_mpk_embedding_lookup(s->e, NULL, in->tokens, s->PT[tidx(s, p->embedding)], s->B,
                                    s->L, s->D);
    else
        refenc_mp_set_d(s->e, in->x, s->BL * s->D);
    if (c->type_vocab_size > 0)
        refenc_mpk_embedding_add(s->e, NULL, s->e, s->types, s->PT[tidx(s, p->token_type_embedding)],
                                 s->B, s->L, s->D);
    if (c->positional == REFENC_POS_SINUSOIDAL)
        refenc_mpk_sinusoidal_forward(s->e, NULL, s->e, s->pos, s->B, s->L, s->D, ws);
    else if (c->positional == REFENC_POS_LEARNED)
        refenc_mpk_embedding_add(s->e, NULL, s->e, s->ids, s->PT[tidx(s, p->pos_embedding)], s->B,
                                 s->L, s->D);
    if (c->embedding_norm)
        refenc_mpb_norm_forward(&s->m, s->xs[0], s->e, PT(s, tidx(s, p->embedding_norm_weight)),
                                PT(s, tidx(s, p->embedding_norm_bias)), s->emb_eps, ws);
    else
        for (size_t i = 0; i < s->BL * s->D; i++)
            mpfr_set(s->xs[0] + i, s->e + i, MPFR_RNDN);
}

/* d (the gradient of xs[0]) through LN_emb and into the tables */
static void embed_bwd(enc *s, refenc_mp_ws *ws)
{
    const refenc_config *c = s->a->cfg;
    const refenc_params *p = s->a->p;
    if (c->embedding_norm) {
        const size_t w = tidx(s, p->embedding_norm_weight), b = tidx(s, p->embedding_norm_bias);
        refenc_mpb_norm_backward(&s->m, s->m.d1, s->GT[w], GT(s, b), s->d, s->e, s->PT[w],
                                 s->emb_eps, NULL, ws);
        for (size_t i = 0; i < s->BL * s->D; i++)
            mpfr_set(s->d + i, s->m.d1 + i, MPFR_RNDN);
    }
    if (c->positional == REFENC_POS_LEARNED)
        refenc_mpk_scatter_add_backward(s->GT[tidx(s, p->pos_embedding)], s->d, s->ids, s->BL,
                                        c->max_len, s->D, NULL, NULL, ws);
    if (c->type_vocab_size > 0)
        refenc_mpk_scatter_add_backward(s->GT[tidx(s, p->token_type_embedding)], s->d, s->types,
                                        s->BL, c->type_vocab_size, s->D, NULL, NULL, ws);
    if (c->vocab_size > 0) {
        mpfr_ptr scale = ws->tmp + ws->n_tmp - 1;
        mpfr_sqrt_ui(scale, s->D, MPFR_RNDN);
        refenc_mpk_scatter_add_backward(s->GT[tidx(s, p->embedding)], s->d, s->a->in->tokens, s->BL,
                                        c->vocab_size, s->D, c->scale_embedding ? scale : NULL,
                                        NULL, ws);
    }
}

static void copy(mpfr_ptr y, mpfr_srcptr x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mpfr_set(y + i, x + i, MPFR_RNDN);
}

/* out = the encoder's output; then d = its input gradient, into the tables.
 * 0 on allocation failure. */
static int run(enc *s, refenc_mp_ws *ws)
{
    const refenc_params *p = s->a->p;
    const size_t n = s->BL * s->D;
    const int fin = s->a->cfg->final_norm;
    embed_fwd(s, ws);
    for (size_t i = 0; i < s->N; i++) {
        if (!bind_layer(s, i, 0))
            return 0;
        refenc_mpb_layer_forward(&s->m, s->xs[i], ws);
        copy(s->xs[i + 1], s->m.y, n);
    }
    size_t nw = 0, nb = 0;
    if (fin) {
        nw = tidx(s, p->norm_weight), nb = tidx(s, p->norm_bias);
        refenc_mpb_norm_forward(&s->m, s->out, s->xs[s->N], s->PT[nw], PT(s, nb), s->m.eps, ws);
    } else {
        copy(s->out, s->xs[s->N], n);
    }
    refenc_mp_set_d(s->d, s->a->dY, n);
    if (fin) { /* dY is exact: norm.bias's sums of it are recorded */
        refenc_mpb_norm_backward(&s->m, s->m.d1, s->GT[nw], GT(s, nb), s->d, s->xs[s->N],
                                 s->PT[nw], s->m.eps, exT(s, nb), ws);
        copy(s->d, s->m.d1, n);
    }
    for (size_t i = s->N; i-- > 0;) {
        if (s->dxs != NULL) /* the gradient of layer i's output */
            copy(s->dxs[i + 1], s->d, n);
        if (!bind_layer(s, i, i == s->N - 1 && !fin))
            return 0;
        /* recomputed, but for the last layer: m holds its forward still (the
         * final norm's backward writes only d1 and xhat, backward scratch) */
        if (i < s->N - 1)
            refenc_mpb_layer_forward(&s->m, s->xs[i], ws);
        copy(s->d, refenc_mpb_layer_backward(&s->m, s->d, s->xs[i], ws), n);
    }
    if (s->dxs != NULL) /* the gradient of the embedding path's output */
        copy(s->dxs[0], s->d, n);
    embed_bwd(s, ws);
    return 1;
}

static int emit(const enc *s, const refenc_mp_sink *sink)
{
    const size_t shape[3] = {s->B, s->L, s->D};
    int st = refenc_mp_sink_emit(sink, "output", s->out, 3, shape);
    if (st == REFENC_OK)
        st = refenc_mp_sink_emit(sink, "dx", s->d, 3, shape);
    for (size_t i = 0; s->dxs != NULL && i <= s->N && st == REFENC_OK; i++) {
        char name[64];
        refenc_mp_grad_step_name(name, sizeof name, i);
        st = refenc_mp_sink_emit(sink, name, s->dxs[i], 3, shape);
    }
    for (size_t t = 0; t < s->nt && st == REFENC_OK; t++) {
        const refenc_tensor *tt = &s->a->p->tensors[t];
        st = refenc_mp_sink_emit_exact(sink, tt->name, s->GT[t], s->exT[t], tt->ndim, tt->shape);
    }
    return st;
}

/* positions, learned-PE ids, token types (integers) */
static int enc_ints(enc *s)
{
    const refenc_config *c = s->a->cfg;
    const refenc_input *in = s->a->in;
    s->pos = malloc(s->L * sizeof *s->pos);
    s->ids = malloc(s->BL * sizeof *s->ids), s->types = calloc(s->BL, sizeof *s->types);
    if (!s->pos || !s->ids || !s->types)
        return 0;
    for (size_t l = 0; l < s->L; l++)
        s->pos[l] = in->positions ? in->positions[l] : (int64_t)l;
    if (c->positional == REFENC_POS_LEARNED && c->position_ids == REFENC_POSIDS_ROBERTA)
        refenc_mpk_position_ids_roberta(s->ids, in->tokens, s->B, s->L, c->padding_idx);
    else
        for (size_t n = 0; n < s->BL; n++)
            s->ids[n] = s->pos[n % s->L];
    if (in->token_types != NULL)
        memcpy(s->types, in->token_types, s->BL * sizeof *s->types);
    return 1;
}

/* the parameters, their gradients' starting values, the exactness arrays */
static int enc_tensors(enc *s, mpfr_prec_t prec)
{
    const refenc_params *p = s->a->p;
    s->PT = calloc(s->nt, sizeof *s->PT), s->GT = calloc(s->nt, sizeof *s->GT);
    s->exT = calloc(s->nt, sizeof *s->exT);
    if (!s->PT || !s->GT || !s->exT)
        return 0;
    int ok = 1;
    for (size_t t = 0, off = 0; t < s->nt; off += p->tensors[t].size, t++) {
        ok &= (s->PT[t] = refenc_mp_from_d(p->tensors[t].data, p->tensors[t].size, 53)) != NULL;
        ok &= (s->GT[t] = refenc_mp_from_d(s->a->start + off, p->tensors[t].size, prec)) != NULL;
    }
    const refenc_layer_params *last = &p->layers[s->N - 1];
    const double *exact_bias = s->a->cfg->final_norm ? p->norm_bias
                               : s->m.pre            ? last->linear2_bias
                                                     : last->norm2_bias;
    if (exact_bias != NULL) /* none: RMSNorm, a bias-free LayerNorm or linear2 */
        ok &= (s->exT[tidx(s, exact_bias)] = malloc(s->D)) != NULL;
    return ok;
}

/* the attention options in MPFR (exact ALiBi slopes) and the layer's state */
static int enc_setup(enc *s, refenc_mp_arena *ar, refenc_mp_ws *ws, mpfr_prec_t prec)
{
    const refenc_config *c = s->a->cfg;
    const refenc_input *in = s->a->in;
    const size_t H = c->n_heads;
    s->m = (lyr){0};
    refenc_mpb_layer_shape(&s->m, c, s->B, s->L);
    if (!enc_ints(s) || !enc_tensors(s, prec))
        return 0;
    s->mask = in->attn_mask ? refenc_mp_arena_from_d(ar, in->attn_mask, s->L * s->L, 53) : NULL;
    s->tau = refenc_mp_arena_from_d(ar, &c->temperature, 1, 53);
    s->slopes = c->positional == REFENC_POS_ALIBI ? refenc_mp_arena_alloc(ar, H, prec) : NULL;
    if (s->slopes != NULL)
        refenc_mpk_alibi_slopes(s->slopes, H, ws);
    s->mo = (refenc_mp_attn_options){in->key_padding_mask, c->causal, s->mask, s->slopes, s->pos,
                                     s->tau, c->mask_value, NULL, NULL, 0, 0, 0,
                                     NULL, 0, 0, 0, 0}; /* no scalar, cap, window, T5 bias: blocks_supported */
    s->rope = (refenc_rope_options){c->rope_layout, c->rope_base, s->pos, &c->rope_scaling}; /* as the forward's */
    s->m.opt = &s->mo;
    s->m.rope = c->positional == REFENC_POS_ROPE ? &s->rope : NULL;
    s->m.base = refenc_mp_arena_from_d(ar, &c->rope_base, 1, 53);
    s->m.eps = refenc_mp_arena_from_d(ar, &c->layer_norm_eps, 1, 53);
    s->emb_eps = refenc_mp_arena_from_d(ar, &c->embedding_norm_eps, 1, 53);
    const size_t n = s->BL * s->D;
    s->e = refenc_mp_arena_alloc(ar, n, prec), s->d = refenc_mp_arena_alloc(ar, n, prec);
    s->out = refenc_mp_arena_alloc(ar, n, prec);
    s->xs = calloc(s->N + 1, sizeof *s->xs);
    int ok = s->xs != NULL;
    for (size_t i = 0; ok && i <= s->N; i++)
        ok &= (s->xs[i] = refenc_mp_alloc(n, prec)) != NULL;
    if (ok && s->a->steps)
        ok = (s->dxs = calloc(s->N + 1, sizeof *s->dxs)) != NULL;
    for (size_t i = 0; ok && s->dxs != NULL && i <= s->N; i++)
        ok &= (s->dxs[i] = refenc_mp_alloc(n, prec)) != NULL;
    return ok;
}

static void enc_free(enc *s)
{
    for (size_t t = 0; t < s->nt; t++) {
        if (s->PT)
            refenc_mp_free(s->PT[t], s->a->p->tensors[t].size);
        if (s->GT)
            refenc_mp_free(s->GT[t], s->a->p->tensors[t].size);
        if (s->exT)
            free(s->exT[t]);
    }
    for (size_t i = 0; s->xs != NULL && i <= s->N; i++)
        refenc_mp_free(s->xs[i], s->BL * s->D);
    for (size_t i = 0; s->dxs != NULL && i <= s->N; i++)
        refenc_mp_free(s->dxs[i], s->BL * s->D);
    free(s->PT), free(s->GT), free(s->exT), free(s->xs), free(s->dxs);
    free(s->pos), free(s->ids), free(s->types);
}

static int encb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const encb_args *a = ctx;
    const refenc_config *c = a->cfg;
    enc s = {.a = a, .B = a->in->B, .L = a->in->L, .D = c->d_model, .N = c->n_layers,
             .nt = a->p->n_tensors};
    s.BL = s.B * s.L;
    refenc_mp_arena ar = {0}, ar2 = {0};
    refenc_mp_ws ws;
    lyr shape = {0};
    refenc_mpb_layer_shape(&shape, c, s.B, s.L);
    size_t np = s.BL > shape.R ? s.BL : shape.R, w = s.D > shape.Dh ? s.D : shape.Dh;
    np = np > shape.F1 ? np : shape.F1;
    np = np > s.D ? np : s.D;
    int st = refenc_mp_ws_alloc(&ws, prec, s.L * w + 2 * s.D + 8, np + s.L + shape.Dh + 1);
    const int ok = st == REFENC_OK && enc_setup(&s, &ar, &ws, prec);
    if (ok)
        refenc_mpb_layer_buffers(&s.m, &ar2, prec);
    if (!ok || ar.failed || ar2.failed || !refenc_mpb_layer_threads(&s.m, a->threads, prec) ||
        !run(&s, &ws))
        st = refenc_mp_enomem(err, "encoder backward", prec);
    else
        st = emit(&s, sink);
    refenc_mpb_layer_threads_free(&s.m);
    refenc_mpb_layer_unbind_d(&s.m);
    enc_free(&s);
    refenc_mp_arena_free(&ar2);
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

/* grad has p's tensors: the same count, names and sizes */
static int same_layout(const refenc_params *grad, const refenc_params *p)
{
    if (grad->n_tensors != p->n_tensors)
        return 0;
    for (size_t t = 0; t < p->n_tensors; t++)
        if (grad->tensors[t].size != p->tensors[t].size ||
            strcmp(grad->tensors[t].name, p->tensors[t].name) != 0)
            return 0;
    return 1;
}

void refenc_mp_grad_step_name(char *name, size_t n, size_t i)
{
    if (i == 0)
        snprintf(name, n, "embed");
    else
        snprintf(name, n, "layers.%zu.output", i - 1);
}

/* The outputs of one run: y, dx, the steps' gradients (N + 1, or none),
 * then every parameter's gradient; names holds the steps' names. */
static refenc_mp_output *backward_outputs(char (**names)[64], double *y, double *dx,
                                          double *const *dsteps, const refenc_params *grad,
                                          const refenc_params *p)
{
    const size_t ns = dsteps != NULL ? p->n_layers + 1 : 0;
    refenc_mp_output *outs = malloc((p->n_tensors + 2 + ns) * sizeof *outs);
    *names = calloc(ns ? ns : 1, sizeof **names);
    if (outs == NULL || *names == NULL) {
        free(outs), free(*names);
        return NULL;
    }
    outs[0] = (refenc_mp_output){"output", y};
    outs[1] = (refenc_mp_output){"dx", dx};
    for (size_t i = 0; i < ns; i++) {
        refenc_mp_grad_step_name((*names)[i], sizeof (*names)[i], i);
        outs[2 + i] = (refenc_mp_output){(*names)[i], dsteps[i]};
    }
    for (size_t t = 0; t < p->n_tensors; t++)
        outs[2 + ns + t] = (refenc_mp_output){p->tensors[t].name, grad->tensors[t].data};
    return outs;
}

int refenc_mp_backward_supported(const refenc_config *cfg, refenc_error *err)
{
    return refenc_mpb_blocks_supported(cfg, err);
}

int refenc_mp_encoder_backward(refenc_params *grad, double *dx, double *y, const refenc_params *p,
                               const refenc_config *cfg, const refenc_input *in, const double *dY,
                               mpfr_prec_t prec, refenc_mp_report *rep)
{
    return refenc_mp_encoder_backward_steps(grad, dx, y, NULL, p, cfg, in, dY, prec, 1, rep);
}

int refenc_mp_encoder_backward_steps(refenc_params *grad, double *dx, double *y,
                                     double *const *dsteps, const refenc_params *p,
                                     const refenc_config *cfg, const refenc_input *in,
                                     const double *dY, mpfr_prec_t prec, int threads,
                                     refenc_mp_report *rep)
{
    refenc_error local, *err = rep ? &rep->error : &local;
    int st = refenc_input_validate(in, cfg, err);
    if (st == REFENC_OK)
        st = refenc_mpb_blocks_supported(cfg, err);
    if (st != REFENC_OK)
        return st;
    if (!same_layout(grad, p) || p->n_layers != cfg->n_layers || cfg->n_layers == 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "oracle: the gradients' tensors are not those of the parameters");
    double *start = malloc((grad->n_values ? grad->n_values : 1) * sizeof *start);
    char(*names)[64] = NULL;
    refenc_mp_output *outs = backward_outputs(&names, y, dx, dsteps, grad, p);
    if (start == NULL || outs == NULL) {
        free(start), free(outs), free(names);
        return refenc_mp_enomem(err, "encoder backward", prec);
    }
    for (size_t t = 0, off = 0; t < p->n_tensors; off += p->tensors[t].size, t++)
        memcpy(start + off, grad->tensors[t].data, p->tensors[t].size * sizeof *start);
    encb_args a = {p, cfg, in, dY, start, dsteps != NULL, threads > 1 ? threads : 1};
    st = refenc_mp_run_twin(encb_eval, &a, prec, rep, outs,
                            p->n_tensors + 2 + (dsteps != NULL ? p->n_layers + 1 : 0));
    free(outs), free(names);
    free(start);
    return st;
}
