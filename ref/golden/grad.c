/* A gradient case's backward tensors (grad.h; docs/golden-format.md,
 * "Gradients"): the upstream gradient and the oracle's certified gradients,
 * named after the forward's steps and the parameters, in backward order. */
#include "grad.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../core/alloc.h"
#include "../io/grad_input.h"
#include "../io/golden_names.h"
#include "../oracle/backward.h"
#include "../tool/backward_bugs.h"
#include "../tool/certify.h"
#include "../tool/run_backward.h"
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
static int oracle_run(const refenc_case *c, const double *dY, long prec, int threads, double *dx,
                      double **steps, refenc_params *grad, char *desc, size_t n, refenc_error *err)
{
    const refenc_input in = refenc_case_input(c);
    refenc_mp_report rep;
    memset(&rep, 0, sizeof rep);
    const int st = refenc_mp_encoder_backward_steps(grad, dx, NULL, steps, &c->params, &c->cfg, &in, dY,
                                                    prec > 0 ? (mpfr_prec_t)prec : REFENC_MP_PREC_DEFAULT,
                                                    threads, &rep);
    if (st != REFENC_OK)
        return refenc_error_set(err, st, "case %s: gradients: %s", c->name, rep.error.message);
    golden_oracle_desc(desc, n, (long)rep.prec, (long)rep.prec_check);
    return REFENC_OK;
}

int golden_grad_make(golden_grad *g, const refenc_case *c, const double *dY, uint64_t seed, long prec,
                     int threads, int quiet, refenc_error *err)
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
        st = oracle_run(c, dy, prec, threads, dx, steps, &grad, desc, sizeof desc, err);
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

/* ---- the named backward bugs' gradients (golden_grad_variants) --------------------- */

/* A backward variant is stored when it moves some gradient by this many F64
 * gradient bounds, as a forward variant its required outputs (alt.c). */
#define GRAD_VARIANT_MIN_EXCESS 100.0
/* The reference's error on the golden gradients above which its variants
 * may not stand for the exact ones (alt.c's REFERENCE_ERROR_MAX). */
#define GRAD_REFERENCE_ERROR_MAX 0.1

/* One run of the reference's backward, its gradients by name ("grad.<name>"). */
typedef struct {
    size_t n;
    char (*names)[REFENC_NAME_MAX];
    double **data;
    size_t *numel, (*shape)[REFENC_ST_MAX_NDIM], *ndim;
    size_t cap;
    int failed;
} grad_run;

static void grad_run_collect(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    grad_run *r = ctx;
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    if (r->failed || r->n == r->cap || ndim > REFENC_ST_MAX_NDIM) {
        r->failed = 1;
        return;
    }
    double *copy = copy_of(data, n);
    if (copy == NULL) {
        r->failed = 1;
        return;
    }
    snprintf(r->names[r->n], sizeof r->names[r->n], REFENC_NAME_GRAD "%s", name);
    r->data[r->n] = copy, r->numel[r->n] = n, r->ndim[r->n] = ndim;
    memcpy(r->shape[r->n], shape, ndim * sizeof *shape);
    r->n++;
}

static void grad_run_free(grad_run *r)
{
    for (size_t i = 0; r->data != NULL && i < r->n; i++)
        free(r->data[i]);
    free(r->names), free(r->data), free(r->numel), free(r->shape), free(r->ndim);
    memset(r, 0, sizeof *r);
}

/* The reference's backward of c at dY with the kernels k into r. */
static int grad_run_make(grad_run *r, const refenc_case *c, const double *dY, const refenc_backward_kernels *k,
                         size_t cap, refenc_error *err)
{
    memset(r, 0, sizeof *r);
    r->cap = cap;
    r->names = calloc(cap, sizeof *r->names), r->data = calloc(cap, sizeof *r->data);
    r->numel = calloc(cap, sizeof *r->numel), r->shape = calloc(cap, sizeof *r->shape);
    r->ndim = calloc(cap, sizeof *r->ndim);
    if (!r->names || !r->data || !r->numel || !r->shape || !r->ndim)
        return refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", c->name);
    const refenc_trace tr = {grad_run_collect, r};
    const int st = refenc_case_run_backward(c, dY, k, &tr, err);
    return st == REFENC_OK && r->failed ? refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", c->name)
                                        : st;
}

/* The golden gradient named name (g's entry), or -1. */
static long golden_index(const golden_grad *g, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->names[i], name) == 0)
            return (long)i;
    return -1;
}

/* How far a is from the golden gradient want (n values), in F64 gradient
 * bounds: max |a - want| / (rtol |want| + atol max |want|) (certify.h). */
static double grad_excess(const double *a, const double *want, size_t n)
{
    double m = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        const double q = fabs(a[i] - want[i]) / (REFENC_GRAD_RTOL * fabs(want[i]) + REFENC_GRAD_ATOL * m);
        worst = isnan(q) ? INFINITY : fmax(worst, q);
    }
    return worst;
}

/* The reference's own error on g's gradients (run r), into g's metadata,
 * with a warning (even when quiet) when its variants may be off. */
static int reference_error(golden_grad *g, const refenc_case *c, const grad_run *r)
{
    double worst = 0;
    for (size_t i = 0; i < r->n; i++) {
        const long k = golden_index(g, r->names[i]);
        if (k >= 0)
            worst = fmax(worst, grad_excess(r->data[i], g->data[k], r->numel[i]));
    }
    char e[32];
    snprintf(e, sizeof e, "%.3g", worst);
    json_object_set_new(g->meta, "grad_variant_engine", json_string("reference"));
    json_object_set_new(g->meta, "grad_variant_reference_error_f64", json_string(e));
    if (!(worst <= GRAD_REFERENCE_ERROR_MAX)) /* even with --quiet: the variants may be off */
        fprintf(stderr, "refenc golden: %s: the double reference's backward is %.3g float64 gradient bounds "
                "from the oracle's on this case (more than %g): its backward variants may be off by as much\n",
                c->name, worst, GRAD_REFERENCE_ERROR_MAX);
    return REFENC_OK;
}

/* Grows g's entries to hold more (the names move: the entries point at them again). */
static int grad_grow(golden_grad *g, size_t more)
{
    const size_t cap = g->n + more;
    refenc_st_entry *e = realloc(g->e, cap * sizeof *e);
    if (e != NULL)
        g->e = e;
    char(*names)[REFENC_NAME_MAX] = realloc(g->names, cap * sizeof *names);
    if (names != NULL)
        g->names = names;
    double **data = realloc(g->data, cap * sizeof *data);
    if (data != NULL)
        g->data = data;
    for (size_t i = 0; i < g->n; i++)
        g->e[i].name = g->names[i];
    return e != NULL && names != NULL && data != NULL;
}

/* Variant v's run r against the golden gradients: stored (its moved
 * gradients appended to g, its record to variants) when it moves one by
 * GRAD_VARIANT_MIN_EXCESS bounds; else said on stderr unless quiet. */
static int store_variant(golden_grad *g, json_t *variants, refenc_variant v, grad_run *r, const refenc_case *c,
                         int quiet, refenc_error *err)
{
    const char *vname = refenc_variant_get(v)->name;
    double effect = 0;
    int first = -1, *moved = calloc(r->n ? r->n : 1, sizeof *moved);
    size_t n_moved = 0;
    if (moved == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", c->name);
    for (size_t i = 0; i < r->n; i++) {
        const long k = golden_index(g, r->names[i]);
        if (k < 0 || g->e[k].dtype != REFENC_ST_F64)
            continue;
        const double q = grad_excess(r->data[i], g->data[k], r->numel[i]);
        effect = fmax(effect, q);
        if (q > 1) {
            moved[i] = 1, n_moved++;
            first = first < 0 || k < golden_index(g, r->names[first]) ? (int)i : first;
        }
    }
    int st = REFENC_OK;
    if (!(effect >= GRAD_VARIANT_MIN_EXCESS)) {
        if (!quiet)
            fprintf(stderr, "refenc golden: %s: backward variant %s moves the gradients by only %.3g float64 "
                    "gradient bounds; not stored\n", c->name, vname, effect);
    } else if (!grad_grow(g, n_moved)) {
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", c->name);
    } else {
        json_t *outs = json_array();
        for (size_t i = 0; i < r->n; i++) {
            if (!moved[i])
                continue;
            const size_t k = g->n;
            snprintf(g->names[k], sizeof g->names[k], REFENC_NAME_ALT "%s.%s", vname, r->names[i]);
            g->data[k] = r->data[i];
            g->e[k] = (refenc_st_entry){.name = g->names[k], .dtype = REFENC_ST_F64, .ndim = r->ndim[i],
                                        .data = r->data[i]};
            memcpy(g->e[k].shape, r->shape[i], r->ndim[i] * sizeof r->shape[i][0]);
            r->data[i] = NULL; /* taken over by g */
            g->n++;
            json_array_append_new(outs, json_string(r->names[i]));
        }
        json_array_append_new(variants, json_pack("{s:s, s:o, s:s, s:f}", "name", vname, "outputs", outs,
                                                  "first_divergence", r->names[first], "effect_f64", effect));
    }
    free(moved);
    return st;
}

/* One run of the reference's backward: on the case itself (var < 0: its
 * error on the golden gradients) or with backward bug var.  The runs are
 * independent, each the same double operations whatever the thread; they
 * are read in this order, so the file and the messages are the same for
 * any number of threads. */
typedef struct {
    const refenc_case *c;
    const double *dY;
    int var;
    size_t cap;
    grad_run r;
    int st;
    refenc_error err;
} grad_job;

static void *grad_job_run(void *arg)
{
    grad_job *j = arg;
    j->st = grad_run_make(&j->r, j->c, j->dY, j->var < 0 ? NULL : refenc_backward_bug_kernels((refenc_variant)j->var),
                          j->cap, &j->err);
    return NULL;
}

/* Runs jobs[0 .. n) at once, n - 1 of them on threads of their own (on the
 * caller's thread if one cannot start: the results are the same). */
static void grad_jobs_run(grad_job *jobs, size_t n)
{
    pthread_t t[64];
    int started[64] = {0};
    for (size_t i = 1; i < n && i < 64; i++)
        started[i] = pthread_create(&t[i], NULL, grad_job_run, &jobs[i]) == 0;
    grad_job_run(&jobs[0]);
    for (size_t i = 1; i < n && i < 64; i++) {
        if (started[i])
            pthread_join(t[i], NULL);
        else
            grad_job_run(&jobs[i]);
    }
}

int golden_grad_variants(golden_grad *g, const refenc_case *c, json_t *variants, int threads, int quiet,
                         refenc_error *err)
{
    const double *dY = g->data[0]; /* in.grad.dY (collect's first entry) */
    const size_t cap = g->n + 1;   /* the backward reports what the golden holds, and no more */
    /* the reference itself first (its error on the golden gradients), then
     * every backward bug that applies; threads at a time, each holding a
     * run's gradients until it is read */
    int vars[REFENC_VAR_COUNT + 1];
    size_t nv = 0;
    vars[nv++] = -1;
    for (int v = REFENC_VAR_FIRST_BACKWARD; v < REFENC_VAR_COUNT; v++)
        if (refenc_variant_applies((refenc_variant)v, c))
            vars[nv++] = v;
    const size_t batch = threads < 1 ? 1 : threads > 64 ? 64 : (size_t)threads;
    grad_job jobs[64];
    int st = REFENC_OK;
    for (size_t i0 = 0; st == REFENC_OK && i0 < nv; i0 += batch) {
        const size_t n = nv - i0 < batch ? nv - i0 : batch;
        for (size_t i = 0; i < n; i++)
            jobs[i] = (grad_job){.c = c, .dY = dY, .var = vars[i0 + i], .cap = cap};
        grad_jobs_run(jobs, n);
        for (size_t i = 0; i < n; i++) {
            grad_job *j = &jobs[i];
            if (st == REFENC_OK && j->st != REFENC_OK) {
                st = j->st;
                *err = j->err;
            } else if (st == REFENC_OK && j->var < 0) {
                st = reference_error(g, c, &j->r);
            } else if (st == REFENC_OK) {
                st = store_variant(g, variants, (refenc_variant)j->var, &j->r, c, quiet, err);
            }
            grad_run_free(&j->r);
        }
    }
    return st;
}
