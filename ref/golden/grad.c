/* A gradient case's backward tensors (grad.h; docs/golden-format.md,
 * "Gradients"): the upstream gradient and the oracle's certified gradients,
 * named after the forward's steps and the parameters, in backward order. */
#include "grad.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../core/alloc.h"
#include "../io/grad_input.h"
#include "../oracle/backward.h"
#include "catalogue.h"
#include "engine.h"

int golden_grad_seeded_dy(double *dY, const refenc_case *c, uint64_t seed)
{
    const size_t BL = c->B * c->L, D = c->cfg.d_model;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (rng == NULL)
        return 0;
    gsl_rng_set(rng, (unsigned long)seed);
    for (size_t n = 0; n < BL; n++)
        for (size_t d = 0; d < D; d++) {
            const double v = catalogue_round(gsl_ran_gaussian_ziggurat(rng, 1.0), 8);
            dY[n * D + d] = c->key_padding_mask != NULL && c->key_padding_mask[n] ? 0.0 : v;
        }
    gsl_rng_free(rng);
    return 1;
}

int golden_grad_read_dy(double **dY, const refenc_case *c, const char *path, refenc_error *err)
{
    refenc_st_file f;
    *dY = NULL;
    int st = refenc_st_read(&f, path, err);
    if (st == REFENC_OK)
        st = refenc_grad_dy_from_file(dY, c, &f, err);
    refenc_st_free(&f);
    return st;
}

/* One entry (the data taken over), or 0 when out of memory. */
static int push(golden_grad *g, const char *name, double *data, size_t ndim, const size_t *shape)
{
    size_t k = g->n;
    if (data == NULL)
        return 0;
    g->data[k] = data;
    snprintf(g->names[k], sizeof g->names[k], "%s", name);
    g->e[k] = (refenc_st_entry){.name = g->names[k], .dtype = REFENC_ST_F64, .ndim = ndim, .data = data};
    memcpy(g->e[k].shape, shape, ndim * sizeof *shape);
    g->n++;
    return 1;
}

/* The parameter suffixes of a layer in the order its backward reaches them. */
static const char *const pre_order[] = {
    "linear2.weight", "linear2.bias", "linear1.weight", "linear1.bias", "norm2.weight", "norm2.bias",
    "self_attn.out_proj.weight", "self_attn.out_proj.bias", "self_attn.in_proj_weight",
    "self_attn.in_proj_bias", "norm1.weight", "norm1.bias", NULL};
static const char *const post_order[] = {
    "norm2.weight", "norm2.bias", "linear2.weight", "linear2.bias", "linear1.weight", "linear1.bias",
    "norm1.weight", "norm1.bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", NULL};
static const char *const embed_order[] = {"embedding_norm.weight", "embedding_norm.bias", "x",
                                          "pos_embedding.weight", "token_type_embedding.weight",
                                          "embedding.weight", NULL};

/* Appends the parameter name when the case has that tensor (a bias-free
 * block's bias, RMSNorm's beta: none). */
static void append_param(json_t *a, const refenc_case *c, const char *name)
{
    if (refenc_params_find(&c->params, name) != NULL)
        json_array_append_new(a, json_string(name));
}

/* The backward's names, in backward order, without "grad.": what the oracle
 * computes, in the order a backward computes it. */
static json_t *backward_names(const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    json_t *a = json_array();
    char b[REFENC_NAME_MAX];
    if (cfg->final_norm) {
        append_param(a, c, "norm.weight");
        append_param(a, c, "norm.bias");
    }
    for (size_t i = cfg->n_layers; i-- > 0;) {
        snprintf(b, sizeof b, "layers.%zu.output", i);
        json_array_append_new(a, json_string(b));
        for (const char *const *s = cfg->norm == REFENC_NORM_PRE ? pre_order : post_order; *s; s++) {
            snprintf(b, sizeof b, "layers.%zu.%s", i, *s);
            append_param(a, c, b);
        }
    }
    json_array_append_new(a, json_string("embed"));
    for (const char *const *s = embed_order; *s; s++)
        if (strcmp(*s, "x") == 0 ? c->x != NULL : refenc_params_find(&c->params, *s) != NULL)
            json_array_append_new(a, json_string(*s));
    return a;
}

static double *copy_of(const double *x, size_t n)
{
    double *y = refenc_alloc_array(n ? n : 1, sizeof *y);
    if (y != NULL)
        memcpy(y, x, n * sizeof *y);
    return y;
}

/* The entries, from the oracle's outputs, in backward order. */
static int collect(golden_grad *g, const refenc_case *c, const json_t *order, double *const *steps,
                   const double *dx, const refenc_params *grad, double *dY, refenc_error *err)
{
    const size_t BL = c->B * c->L, D = c->cfg.d_model, bld[3] = {c->B, c->L, D};
    int ok = push(g, REFENC_NAME_GRAD_DY, dY, 3, bld);
    size_t k;
    const json_t *v;
    json_array_foreach(order, k, v) {
        const char *nm = json_string_value(v);
        char full[REFENC_NAME_MAX];
        snprintf(full, sizeof full, REFENC_NAME_GRAD "%s", nm);
        const refenc_tensor *t = refenc_params_find(grad, nm);
        size_t layer;
        if (t != NULL)
            ok = ok && push(g, full, copy_of(t->data, t->size), t->ndim, t->shape);
        else if (strcmp(nm, "x") == 0)
            ok = ok && push(g, full, copy_of(dx, BL * D), 3, bld);
        else if (strcmp(nm, "embed") == 0)
            ok = ok && push(g, full, copy_of(steps[0], BL * D), 3, bld);
        else if (sscanf(nm, "layers.%zu.output", &layer) == 1 && layer < c->cfg.n_layers)
            ok = ok && push(g, full, copy_of(steps[layer + 1], BL * D), 3, bld);
        else
            return refenc_error_set(err, REFENC_EINVAL, "case %s: no gradient named %s", c->name, full);
    }
    return ok ? REFENC_OK : refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", c->name);
}

/* The metadata of a gradient case. */
static json_t *grad_meta(const json_t *order, int seeded, uint64_t seed, const char *oracle)
{
    json_t *names = json_array();
    size_t k;
    const json_t *v;
    json_array_foreach(order, k, v) {
        char full[REFENC_NAME_MAX];
        snprintf(full, sizeof full, REFENC_NAME_GRAD "%s", json_string_value(v));
        json_array_append_new(names, json_string(full));
    }
    char *names_s = json_dumps(names, JSON_COMPACT);
    json_decref(names);
    char seed_s[32];
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)seed);
    json_t *m = names_s == NULL ? NULL
                : json_pack("{s:s, s:s, s:s, s:s}", "format_version", GOLDEN_GRAD_FORMAT_VERSION,
                            "grad_outputs", names_s, "grad_dY", seeded ? "seeded" : "given",
                            "grad_oracle", oracle);
    if (m != NULL && seeded)
        json_object_set_new(m, "grad_seed", json_string(seed_s));
    free(names_s);
    return m;
}

/* The oracle's run: dx, the steps' gradients and every parameter's. */
static int oracle_run(const refenc_case *c, const double *dY, long prec, double *dx, double **steps,
                      refenc_params *grad, char *desc, size_t n, refenc_error *err)
{
    const refenc_input in = refenc_case_input(c);
    refenc_mp_report rep;
    memset(&rep, 0, sizeof rep);
    const int st = refenc_mp_encoder_backward_steps(grad, dx, NULL, steps, &c->params, &c->cfg, &in, dY,
                                                    prec > 0 ? (mpfr_prec_t)prec : REFENC_MP_PREC_DEFAULT,
                                                    &rep);
    if (st != REFENC_OK)
        return refenc_error_set(err, st, "case %s: gradients: %s", c->name, rep.error.message);
    golden_oracle_desc(desc, n, (long)rep.prec, (long)rep.prec_check);
    return REFENC_OK;
}

int golden_grad_make(golden_grad *g, const refenc_case *c, const double *dY, uint64_t seed, long prec,
                     int quiet, refenc_error *err)
{
    memset(g, 0, sizeof *g);
    const size_t BL = c->B * c->L, D = c->cfg.d_model, N = c->cfg.n_layers;
    if (c->component != REFENC_COMP_ENCODER)
        return refenc_error_set(err, REFENC_EINVAL, "--grad: case %s is a %s case; gradients are made for "
                                "encoder cases", c->name, refenc_component_name(c->component));
    refenc_params grad;
    int st = refenc_params_alloc(&grad, &c->cfg, err);
    if (st != REFENC_OK)
        return st;
    json_t *order = backward_names(c);
    double *dy = refenc_alloc_array(BL * D, sizeof *dy), *dx = refenc_alloc_array(BL * D, sizeof *dx);
    double **steps = calloc(N + 1, sizeof *steps);
    const size_t cap = json_array_size(order) + 1;
    g->e = calloc(cap, sizeof *g->e), g->names = calloc(cap, sizeof *g->names);
    g->data = calloc(cap, sizeof *g->data);
    int ok = order && dy && dx && steps && g->e && g->names && g->data;
    for (size_t i = 0; ok && i <= N; i++)
        ok = (steps[i] = refenc_alloc_array(BL * D, sizeof **steps)) != NULL;
    if (!ok)
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", c->name);
    if (st == REFENC_OK && dY != NULL)
        memcpy(dy, dY, BL * D * sizeof *dy);
    else if (st == REFENC_OK && !golden_grad_seeded_dy(dy, c, seed))
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory for the upstream gradient's generator",
                              c->name);
    char desc[256] = "";
    const time_t t0 = time(NULL);
    if (st == REFENC_OK && !quiet)
        fprintf(stderr, "refenc golden: %s: gradients: the oracle's backward of %zu layer%s, %zu x %zu tokens, "
                "%zu values, certified together\n", c->name, N, N == 1 ? "" : "s", c->B, c->L,
                (N + 2) * BL * D + grad.n_values);
    if (st == REFENC_OK)
        st = oracle_run(c, dy, prec, dx, steps, &grad, desc, sizeof desc, err);
    if (st == REFENC_OK && !quiet)
        fprintf(stderr, "refenc golden: %s: gradients certified in %.0f s (%s)\n", c->name,
                difftime(time(NULL), t0), desc);
    if (st == REFENC_OK) {
        st = collect(g, c, order, steps, dx, &grad, dy, err);
        dy = NULL; /* taken over by g (or freed with it) */
    }
    if (st == REFENC_OK && (g->meta = grad_meta(order, dY == NULL, seed, desc)) == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", c->name);
    for (size_t i = 0; steps != NULL && i <= N; i++)
        free(steps[i]);
    free(steps), free(dx), free(dy);
    json_decref(order);
    refenc_params_free(&grad);
    if (st != REFENC_OK)
        golden_grad_free(g);
    return st;
}

void golden_grad_free(golden_grad *g)
{
    for (size_t i = 0; g->data != NULL && i < g->n; i++)
        free(g->data[i]);
    free(g->data), free(g->e), free(g->names);
    json_decref(g->meta);
    memset(g, 0, sizeof *g);
}
