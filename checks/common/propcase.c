#include "propcase.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>

#include "testutil.h"
#include "../../ref/tool/random_params.h"

void prop_opts_default(prop_opts *o)
{
    memset(o, 0, sizeof *o);
    o->positional = REFENC_POS_NONE;
    o->causal = 0;
    o->max_layers = 2;
    o->max_len = 64;
    o->min_len = 1;
    o->max_batch = 3;
    o->padding = 1;
    o->norm = -1;
    o->min_d_model = 1;
}

void *prop_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    cr_assert_not_null(p, "out of memory (%zu x %zu bytes)", n, size);
    return p;
}

static size_t pick(gsl_rng *r, const size_t *v, size_t n)
{
    return v[gsl_rng_uniform_int(r, n)];
}

void prop_case_describe(prop_case *c)
{
    const refenc_config *g = &c->cfg;
    char emb[96] = "";
    if (g->vocab_size > 0)
        snprintf(emb, sizeof emb, " tokens V=%zu T=%zu%s%s emb_eps=%g mask=%s", g->vocab_size,
                 g->type_vocab_size, g->scale_embedding ? " scaled" : "",
                 g->embedding_norm ? " emb_LN" : "", g->embedding_norm_eps,
                 refenc_mask_value_name(g->mask_value));
    snprintf(c->desc, sizeof c->desc,
             "B=%zu L=%zu D=%zu H=%zu F=%zu N=%zu %s-LN %s pos=%s%s%s eps=%g tau=%.17g%s%s%s",
             c->B, c->L, g->d_model, g->n_heads, g->d_ff, g->n_layers,
             g->norm == REFENC_NORM_PRE ? "Pre" : "Post", refenc_activation_name(g->activation),
             refenc_positional_name(g->positional),
             g->positional == REFENC_POS_ROPE ? "/" : "",
             g->positional == REFENC_POS_ROPE ? refenc_rope_layout_name(g->rope_layout) : "",
             g->layer_norm_eps, g->temperature, g->causal ? " causal" : "",
             c->pad ? " padded" : "", emb);
}

void prop_case_random(prop_case *c, gsl_rng *r, size_t index, const prop_opts *o)
{
    memset(c, 0, sizeof *c);
    refenc_config *g = &c->cfg;
    refenc_config_default(g);

    /* Widths: even cases use powers of two only (H and Dh both powers of
     * two), odd cases a head width with an odd factor, so D = H Dh is not a
     * power of two.  RoPE needs Dh even, sinusoidal PE needs D even. */
    static const size_t pow2_h[] = {1, 2, 4, 8}, pow2_dh[] = {2, 4, 8, 16};
    static const size_t odd_dh_even[] = {6, 10, 12}, odd_dh_any[] = {3, 5, 6, 7, 10, 12};
    size_t H, Dh;
    do {
        if (index % 2 == 0) {
            H = pick(r, pow2_h, 4);
            Dh = pick(r, pow2_dh, 4);
        } else {
            H = 1 + gsl_rng_uniform_int(r, 8);
            int need_even_dh = o->positional == REFENC_POS_ROPE ||
                               (o->positional == REFENC_POS_SINUSOIDAL && H % 2 == 1);
            Dh = need_even_dh ? pick(r, odd_dh_even, 3) : pick(r, odd_dh_any, 6);
        }
    } while (H * Dh < o->min_d_model);
    g->n_heads = H;
    g->d_model = H * Dh;
    g->d_ff = 1 + gsl_rng_uniform_int(r, 3 * g->d_model);
    g->n_layers = 1 + gsl_rng_uniform_int(r, o->max_layers);

    static const refenc_activation acts[] = {REFENC_ACT_RELU, REFENC_ACT_GELU, REFENC_ACT_GELU_TANH,
                                             REFENC_ACT_QUICK_GELU};
    g->activation = acts[index % 4];
    g->norm = o->norm >= 0 ? (refenc_norm_placement)o->norm
                           : ((index / 3) % 2 == 0 ? REFENC_NORM_PRE : REFENC_NORM_POST);
    g->final_norm = g->norm == REFENC_NORM_PRE; /* nn.TransformerEncoder's usual choice */
    static const double epss[] = {1e-5, 1e-6, 2.5e-3};
    g->layer_norm_eps = epss[gsl_rng_uniform_int(r, 3)];
    g->temperature = 0.6 + 1.1 * gsl_rng_uniform(r);
    g->positional = o->positional;
    g->rope_layout = gsl_rng_uniform_int(r, 2) ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF;
    g->rope_base = gsl_rng_uniform_int(r, 2) ? 500000.0 : 10000.0;
    g->causal = o->causal;

    size_t min_len = o->min_len ? o->min_len : 1;
    c->L = min_len + gsl_rng_uniform_int(r, o->max_len - min_len + 1);
    c->B = 1 + gsl_rng_uniform_int(r, o->max_batch);
    g->max_len = c->L + gsl_rng_uniform_int(r, 8);

    refenc_error err;
    int st = refenc_params_alloc(&c->p, g, &err);
    cr_assert_eq(st, REFENC_OK, "params: %s", err.message);
    refenc_params_init_random(&c->p, g, r);

    const size_t BLD = c->B * c->L * g->d_model;
    c->x = prop_calloc(BLD, sizeof(double));
    test_fill_gaussian(c->x, BLD, 0.3, 1.3, r);
    if (o->padding && gsl_rng_uniform_int(r, 2)) {
        c->pad = prop_calloc(c->B * c->L, 1);
        for (size_t i = 0; i < c->B * c->L; i++)
            c->pad[i] = gsl_rng_uniform(r) < 0.25;
    }
    prop_case_describe(c);
}

void prop_case_redraw(prop_case *c, gsl_rng *r)
{
    refenc_error err;
    refenc_params_free(&c->p);
    cr_assert_eq(refenc_params_alloc(&c->p, &c->cfg, &err), REFENC_OK, "params: %s", err.message);
    refenc_params_init_random(&c->p, &c->cfg, r);
    prop_case_describe(c);
}

void prop_case_tokens(prop_case *c, gsl_rng *r, size_t index)
{
    refenc_config *g = &c->cfg;
    g->vocab_size = 3 + gsl_rng_uniform_int(r, 18);
    g->padding_idx = 0;
    g->type_vocab_size = index % 3;
    g->scale_embedding = (index / 3) % 2;
    g->embedding_norm = index % 4 != 3;
    static const double epss[] = {1e-12, 1e-5, 2.5e-3};
    g->embedding_norm_eps = epss[gsl_rng_uniform_int(r, 3)];
    g->mask_value = index % 2 ? REFENC_MASK_FINFO_MIN : REFENC_MASK_NEG_INF;
    prop_case_redraw(c, r);

    free(c->x);
    c->x = NULL;
    const size_t BL = c->B * c->L;
    c->tokens = prop_calloc(BL, sizeof(int64_t));
    c->types = g->type_vocab_size > 0 ? prop_calloc(BL, sizeof(int64_t)) : NULL;
    for (size_t i = 0; i < BL; i++) { /* padding positions hold the padding token */
        c->tokens[i] = c->pad && c->pad[i] ? 0 : 1 + (int64_t)gsl_rng_uniform_int(r, g->vocab_size - 1);
        if (c->types != NULL)
            c->types[i] = (int64_t)gsl_rng_uniform_int(r, g->type_vocab_size);
    }
    prop_case_describe(c);
}

void prop_case_free(prop_case *c)
{
    refenc_params_free(&c->p);
    free(c->x);
    free(c->pad);
    free(c->tokens);
    free(c->types);
    memset(c, 0, sizeof *c);
}

void prop_random_permutation(size_t *perm, size_t n, gsl_rng *r)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    if (n > 1)
        gsl_ran_shuffle(r, perm, n, sizeof *perm);
}

int prop_perm_is_trivial(const size_t *perm, size_t n)
{
    int id = 1, rev = 1;
    for (size_t i = 0; i < n; i++) {
        id &= perm[i] == i;
        rev &= perm[i] == n - 1 - i;
    }
    return id || rev;
}

/* Trace callback: keeps "layers.{i}.self_attn.weights" and "layers.{i}.output". */
static void capture_fn(void *ctx, const char *name, const double *data, size_t ndim,
                       const size_t *shape)
{
    prop_capture *cap = ctx;
    size_t i, n = 1;
    char step[64];
    for (size_t k = 0; k < ndim; k++)
        n *= shape[k];
    if (sscanf(name, "layers.%zu.%63s", &i, step) != 2 || i >= cap->n_layers)
        return;
    if (strcmp(step, "self_attn.weights") == 0)
        memcpy(cap->weights[i], data, n * sizeof(double));
    else if (strcmp(step, "output") == 0)
        memcpy(cap->layer_out[i], data, n * sizeof(double));
}

void prop_encoder_run(double *y, prop_capture *cap, const refenc_params *p,
                      const refenc_config *cfg, const refenc_input *in)
{
    refenc_error err;
    refenc_workspace ws;
    int st = refenc_workspace_alloc(&ws, cfg, in->B, in->L, &err);
    cr_assert_eq(st, REFENC_OK, "workspace: %s", err.message);

    refenc_trace tr = {capture_fn, cap};
    if (cap != NULL) {
        cap->n_layers = cfg->n_layers;
        cap->BHLL = in->B * cfg->n_heads * in->L * in->L;
        cap->weights = prop_calloc(cfg->n_layers, sizeof(double *));
        cap->layer_out = prop_calloc(cfg->n_layers, sizeof(double *));
        for (size_t i = 0; i < cfg->n_layers; i++) {
            cap->weights[i] = prop_calloc(cap->BHLL, sizeof(double));
            cap->layer_out[i] = prop_calloc(in->B * in->L * cfg->d_model, sizeof(double));
        }
    }
    st = refenc_encoder_forward(y, &ws, p, cfg, in, cap != NULL ? &tr : NULL, &err);
    refenc_workspace_free(&ws);
    cr_assert_eq(st, REFENC_OK, "encoder: %s", err.message);
}

void prop_capture_free(prop_capture *cap)
{
    for (size_t i = 0; cap->weights != NULL && i < cap->n_layers; i++) {
        free(cap->weights[i]);
        free(cap->layer_out[i]);
    }
    free(cap->weights);
    free(cap->layer_out);
    memset(cap, 0, sizeof *cap);
}

size_t prop_count_unequal(const double *a, const double *b, size_t n, char *buf, size_t len)
{
    size_t k = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!(a[i] == b[i]) && k++ == 0)
            first = i;
    if (buf != NULL && len > 0) {
        if (k == 0)
            snprintf(buf, len, "seed %lu (replay: REFENC_SEED=%lu), all %zu values equal",
                     test_seed(), test_seed(), n);
        else
            snprintf(buf, len, "seed %lu (replay: REFENC_SEED=%lu), %zu of %zu values differ, "
                     "first at %zu: %a (%.17g) vs %a (%.17g)", test_seed(), test_seed(), k, n,
                     first, a[first], a[first], b[first], b[first]);
    }
    return k;
}
