/* The bug variants' outputs of a golden case (alt.h). */
#include "alt.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/version.h"
#include "../io/golden_names.h"
#include "../tool/certify.h"
#include "../tool/emulate.h"
#include "../tool/linear_blocked.h"
#include "../tool/run_case.h"
#include "engine.h"

/* A copy of a case, for a bug variant to change. */
static int case_copy(refenc_case *dst, const refenc_case *src, refenc_error *err)
{
    int st = refenc_case_alloc(dst, src->component, &src->cfg, src->B, src->L, src->tokens != NULL,
                               src->key_padding_mask != NULL, src->attn_mask != NULL, err);
    if (st != REFENC_OK)
        return st;
    memcpy(dst->name, src->name, sizeof dst->name);
    memcpy(dst->params.block, src->params.block, src->params.n_values * sizeof(double));
    if (src->x != NULL)
        memcpy(dst->x, src->x, src->x_numel * sizeof *src->x);
    if (src->tokens != NULL)
        memcpy(dst->tokens, src->tokens, src->B * src->L * sizeof *src->tokens);
    if (src->token_types != NULL && dst->token_types != NULL)
        memcpy(dst->token_types, src->token_types, src->B * src->L * sizeof *src->token_types);
    if (src->key_padding_mask != NULL)
        memcpy(dst->key_padding_mask, src->key_padding_mask, src->B * src->L);
    if (src->attn_mask != NULL)
        memcpy(dst->attn_mask, src->attn_mask, src->L * src->L * sizeof *src->attn_mask);
    memcpy(dst->positions, src->positions, src->L * sizeof *src->positions);
    dst->has_positions = src->has_positions;
    if (src->rows != NULL) { /* the last layer's query rows */
        if ((dst->rows = refenc_alloc_array(src->R, sizeof *dst->rows)) == NULL)
            return refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", src->name);
        memcpy(dst->rows, src->rows, src->R * sizeof *src->rows);
        dst->R = src->R;
    }
    return REFENC_OK;
}

/* A bug variant is stored only when it moves a required output this many
 * times the float64 tolerance: otherwise it could not be told apart from a
 * correct float64 result (docs/certify.md). */
#define VARIANT_MIN_EXCESS 100.0

/* The double reference's variants stand for the oracle's when the reference
 * is this close to the oracle on the case's own outputs: a tenth of the
 * float64 tolerance, the margin docs/verdict.md ("The tolerance policy")
 * leaves between any correct float64 result's error bound and the
 * tolerance.  Then a buggy result within q bounds of the exact variant is
 * within q + 0.1 of the reference's (the triangle inequality), in float64,
 * and within far less in the wider bounds of F32, F16 and BF16
 * (docs/diagnosis.md, "Variants from the double reference"). */
#define REFERENCE_ERROR_MAX 0.1


void golden_alt_free(golden_alt *v)
{
    for (size_t i = 0; i < v->n; i++) {
        golden_set_free(&v->set[i]);
        refenc_case_free(&v->vc[i]);
        free(v->keep[i]);
    }
    json_decref(v->meta);
    json_decref(v->classes);
    memset(v, 0, sizeof *v);
}

static int targeted(const golden_alt_request *rq, const refenc_variant_info *info)
{
    if (rq->all)
        return 1;
    size_t i;
    json_t *cl;
    json_array_foreach(rq->bug_classes, i, cl)
        if (strcmp(json_string_value(cl), info->bug_class) == 0)
            return 1;
    return 0;
}

/* The golden output named out_name ("out.<step>"), or NULL. */
static const golden_output *golden_find(const golden_set *golden, const char *out_name)
{
    for (size_t g = 0; g < golden->n; g++)
        if (strcmp(golden->o[g].name, out_name) == 0)
            return &golden->o[g];
    return NULL;
}

/* A variant's steps from the reference, each compared with the golden as it
 * comes: kept when required, or when it is the first to diverge (what
 * variant_effect keeps), so a variant holds no more than those at a time. */
typedef struct {
    golden_set *alt;
    const golden_set *golden;
    const refenc_case *c;
    refenc_tolerance tol64;
    int diverged;
} variant_stream;

static void stream_collect(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    variant_stream *vs = ctx;
    golden_set *alt = vs->alt;
    const size_t n = alt->n;
    golden_set_collect(alt, name, data, ndim, shape);
    if (alt->failed || alt->n == n)
        return;
    golden_output *ao = &alt->o[alt->n - 1];
    if (golden_is_required(vs->c, ao->name))
        return;
    const golden_output *go = golden_find(vs->golden, ao->name);
    if (!vs->diverged && go != NULL && go->numel == ao->numel &&
        golden_excess(ao->data, go->data, ao->dc, go->dc, ao->numel, vs->tol64) > 1) {
        vs->diverged = 1;
        return;
    }
    free(ao->data);
    free(ao->dc);
    alt->n--;
}

/* The double reference on case c with the variant's hooks: the reference's
 * own kernels when no hook is set, else its emulation at F64, which computes
 * the same doubles bit for bit (emulate.h) but rounds every operation through
 * a call.  Both with the linear maps, most of a run's time, in the blocked
 * schedule of the same sums (linear_blocked.h: the same doubles, bit for
 * bit; the emulation's at F64, emu_linear). */
static int run_reference(const refenc_case *c, const refenc_variant_hooks *hooks, const refenc_trace *tr,
                         refenc_error *err)
{
    static const refenc_variant_hooks none;
    if (hooks == NULL || memcmp(hooks, &none, sizeof none) == 0)
        return refenc_case_run_reference_with(c, refenc_linear_blocked_forward, tr, err);
    const refenc_emulation e = refenc_emulation_baseline(REFENC_FMT_F64);
    return refenc_emulation_run_case(c, &e, hooks, tr, err);
}

/* The reference's outputs of the case itself against the golden's: its
 * error, in float64 tolerances, on this case (docs/diagnosis.md, "Variants
 * from the double reference"). */
typedef struct {
    const golden_set *golden;
    refenc_tolerance tol64;
    double worst;
} reference_check;

static void check_collect(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    reference_check *rc = ctx;
    char out_name[REFENC_NAME_MAX];
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    if (!refenc_name_output(out_name, sizeof out_name, name))
        return;
    const golden_output *go = golden_find(rc->golden, out_name);
    if (go != NULL && go->numel == n)
        rc->worst = fmax(rc->worst, golden_excess(data, go->data, NULL, go->dc, n, rc->tol64));
}

/* The reference's error on the golden outputs, into *worst.  Errors: those
 * of refenc_emulation_run_case (REFENC_ENOMEM). */
static int reference_error(double *worst, const refenc_case *c, const golden_set *golden,
                           const refenc_tolerance *tol64, refenc_error *err)
{
    reference_check rc = {golden, *tol64, 0};
    const refenc_trace tr = {check_collect, &rc};
    const int st = run_reference(c, NULL, &tr, err);
    *worst = rc.worst;
    return st;
}

/* A copy of the case's inputs, sharing its parameters (never written through
 * it: refenc_variant_writes_params says which variants need case_copy);
 * free it with refenc_case_free_inputs, never refenc_case_free. */
static int case_view(refenc_case *dst, const refenc_case *src, refenc_error *err)
{
    const size_t BL = src->B * src->L;
    *dst = *src;
    dst->x = NULL, dst->tokens = dst->token_types = dst->positions = NULL;
    dst->key_padding_mask = NULL, dst->attn_mask = NULL, dst->rows = NULL;
    int ok = 1;
#define DUP(f, n)                                                                        \
    if (src->f != NULL) {                                                                \
        dst->f = refenc_alloc_array((n) > 0 ? (n) : 1, sizeof *src->f);                     \
        if (dst->f != NULL)                                                              \
            memcpy(dst->f, src->f, (n) * sizeof *src->f);                                \
        ok &= dst->f != NULL;                                                            \
    }
    DUP(x, src->x_numel)
    DUP(tokens, BL)
    DUP(token_types, BL)
    DUP(key_padding_mask, BL)
    DUP(positions, src->L)
    DUP(attn_mask, src->L * src->L)
    DUP(rows, src->R)
#undef DUP
    return ok ? REFENC_OK : refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", src->name);
}

/* Runs bug variant var by the oracle on a copy of the case into v's next set; from then on golden_alt_free frees it. */
static int compute_variant(golden_alt *v, int var, const refenc_variant_info *info, const golden_alt_request *rq,
                           const golden_set *golden, refenc_error *err)
{
    refenc_case *w = &v->vc[v->n];
    golden_set *alt = &v->set[v->n];
    refenc_variant_hooks hooks;
    int st = case_copy(w, rq->c, err);
    if (st != REFENC_OK)
        return st;
    st = refenc_variant_apply((refenc_variant)var, w, &hooks, err);
    if (st == REFENC_OK && (st = golden_set_init(alt, w, 0, golden->final_only, err)) == REFENC_OK) {
        const refenc_trace tr = {golden_set_collect, alt};
        const golden_engine_options eo = {.threads = (int)rq->threads, .quiet = 1};
        st = golden_engine_run(w, &hooks, 0, &eo, &tr, v->desc, sizeof v->desc, err);
    }
    int *keep = calloc(alt->n ? alt->n : 1, sizeof *keep);
    v->keep[v->n] = keep;
    v->names[v->n] = info->name;
    v->n++; /* from here on golden_alt_free frees it */
    if (st == REFENC_OK && (alt->failed || keep == NULL))
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", rq->name);
    return st;
}

/* The variant's effect on the required outputs, which it keeps; returns the first diverging output or -1. */
static int variant_effect(const golden_set *alt, const golden_set *golden, const refenc_case *c, int *keep,
                          const refenc_tolerance *tol64, const refenc_tolerance *tol32, double *effect64,
                          double *effect32)
{
    int first = -1;
    for (size_t k = 0; k < alt->n; k++) {
        const golden_output *ao = &alt->o[k];
        size_t g = 0;
        while (g < golden->n && strcmp(golden->o[g].name, ao->name) != 0)
            g++;
        if (g == golden->n || golden->o[g].numel != ao->numel)
            continue;
        const golden_output *go = &golden->o[g];
        const double e64 = golden_excess(ao->data, go->data, ao->dc, go->dc, ao->numel, *tol64);
        if (first < 0 && e64 > 1)
            first = (int)k;
        if (golden_is_required(c, ao->name)) {
            keep[k] = 1;
            *effect64 = fmax(*effect64, e64);
            *effect32 = fmax(*effect32, golden_excess(ao->data, go->data, ao->dc, go->dc, ao->numel, *tol32));
        }
    }
    return first;
}

/* Records a stored variant in the "variants" metadata, and its bug class among the case's. */
static void record_variant(golden_alt *v, const refenc_variant_info *info, const golden_set *alt,
                           const int *keep, int first, double effect64, double effect32)
{
    json_t *stored = json_array();
    for (size_t k = 0; k < alt->n; k++)
        if (keep[k])
            json_array_append_new(stored, json_string(alt->o[k].name));
    json_array_append_new(v->meta, json_pack("{s:s, s:o, s:s?, s:f, s:f}", "name", info->name, "outputs",
                                             stored, "first_divergence",
                                             first >= 0 ? alt->o[first].name : NULL,
                                             "effect_f64", effect64, "effect_f32", effect32));
    int listed = 0;
    size_t i;
    json_t *cl;
    json_array_foreach(v->classes, i, cl)
        listed |= strcmp(json_string_value(cl), info->bug_class) == 0;
    if (!listed)
        json_array_append_new(v->classes, json_string(info->bug_class));
}

/* The forward variants a request asks for, in the table's order; returns
 * how many.  The backward's are grad.h's. */
static size_t wanted_variants(int *vars, const golden_alt_request *rq)
{
    size_t n = 0;
    for (int var = 0; var < REFENC_VAR_FIRST_BACKWARD; var++)
        if (targeted(rq, refenc_variant_get((refenc_variant)var)) &&
            refenc_variant_applies((refenc_variant)var, rq->c))
            vars[n++] = var;
    return n;
}

/* Says on stderr that a variant is not stored (unless quiet and every variant was asked for). */
static void say_not_stored(const golden_alt_request *rq, const refenc_variant_info *info, double effect64)
{
    if (!rq->quiet || !rq->all)
        fprintf(stderr, "refenc golden: %s: variant %s moves the outputs by only %.3g float64 "
                "tolerances; not stored\n", rq->name, info->name, effect64);
}

/* ---- the double reference's variants, on the --threads workers -------------------- */

/* One run of the double reference: on the case itself (var < 0: its error on
 * the golden outputs) or with bug variant var.  The runs are independent, and
 * each is the same sequence of double operations whatever the thread that
 * runs it; golden_alt_make reads them in this order once all are done, so
 * the file and the messages are the same for any --threads. */
typedef struct {
    int var;
    int writes;        /* on a copy of the parameters (refenc_variant_writes_params) */
    int taken, st;
    refenc_error err;
    golden_set set;    /* the outputs it keeps: emptied when not stored */
    int *keep;         /* NULL when not stored */
    int first;
    double effect64, effect32, ref_error;
} reference_run;

/* The workers' queue.  At most one run on a copy of the parameters at a
 * time, so that --threads adds no more than one workspace per thread to the
 * memory of one thread's runs. */
typedef struct {
    const golden_alt_request *rq;
    const golden_set *golden;
    const refenc_tolerance *tol64, *tol32;
    reference_run *runs;
    size_t n, done;
    int copying, failed;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    golden_log log;
} reference_pool;

/* Variant r->var by the reference into r: its kept outputs and its effect,
 * or nothing kept when it moves the required outputs too little. */
static int reference_variant(reference_run *r, const reference_pool *p)
{
    refenc_case w;
    refenc_variant_hooks hooks;
    int st = r->writes ? case_copy(&w, p->rq->c, &r->err) : case_view(&w, p->rq->c, &r->err);
    if (st == REFENC_OK)
        st = refenc_variant_apply((refenc_variant)r->var, &w, &hooks, &r->err);
    if (st == REFENC_OK && (st = golden_set_init(&r->set, &w, 0, p->golden->final_only, &r->err)) == REFENC_OK) {
        variant_stream vs = {.alt = &r->set, .golden = p->golden, .c = p->rq->c, .tol64 = *p->tol64};
        const refenc_trace tr = {stream_collect, &vs};
        st = run_reference(&w, &hooks, &tr, &r->err);
    }
    if (r->writes) /* the outputs hold no reference to it: one copy at a time */
        refenc_case_free(&w);
    else /* a view is never refenc_case_free'd: its parameters are the case's */
        refenc_case_free_inputs(&w);
    if (st == REFENC_OK && (r->set.failed || (r->keep = calloc(r->set.n ? r->set.n : 1, sizeof *r->keep)) == NULL))
        st = refenc_error_set(&r->err, REFENC_ENOMEM, "case %s: out of memory", p->rq->name);
    if (st != REFENC_OK)
        return st;
    r->first = variant_effect(&r->set, p->golden, p->rq->c, r->keep, p->tol64, p->tol32, &r->effect64,
                              &r->effect32);
    if (!(r->effect64 >= VARIANT_MIN_EXCESS)) { /* not stored: its outputs go now */
        golden_set_free(&r->set);
        free(r->keep);
        r->keep = NULL;
    } else if (r->first >= 0)
        r->keep[r->first] = 1;
    return REFENC_OK;
}

/* The next run to do, in order but for a copy of the parameters while
 * another is in use; NULL when none is left or one failed. */
static reference_run *pool_take(reference_pool *p)
{
    pthread_mutex_lock(&p->mu);
    reference_run *r = NULL;
    for (;;) {
        int left = 0;
        for (size_t i = 0; i < p->n && r == NULL && !p->failed; i++)
            if (!p->runs[i].taken) {
                left = 1;
                if (!p->runs[i].writes || !p->copying)
                    r = &p->runs[i];
            }
        if (r != NULL || !left || p->failed)
            break;
        pthread_cond_wait(&p->cv, &p->mu);
    }
    if (r != NULL) {
        r->taken = 1;
        p->copying |= r->writes;
        char elapsed[32];
        if (r->var >= 0 && golden_log_due(&p->log, elapsed, sizeof elapsed)) /* off a terminal, every 30 s */
            fprintf(stderr, "refenc golden: %s: bug variants: %zu/%zu done, now %s, elapsed %s\n", p->rq->name,
                    p->done, p->n - 1, refenc_variant_get((refenc_variant)r->var)->name, elapsed);
    }
    pthread_mutex_unlock(&p->mu);
    return r;
}

static void *pool_work(void *arg)
{
    reference_pool *p = arg;
    reference_run *r;
    while ((r = pool_take(p)) != NULL) {
        r->st = r->var < 0 ? reference_error(&r->ref_error, p->rq->c, p->golden, p->tol64, &r->err)
                           : reference_variant(r, p);
        pthread_mutex_lock(&p->mu);
        p->copying &= !r->writes;
        p->failed |= r->st != REFENC_OK;
        p->done += r->var >= 0;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

int golden_alt_workers(const refenc_config *cfg, size_t B, size_t L, int threads, size_t runs)
{
    const size_t ws = refenc_config_workspace_count(cfg, B, L), params = refenc_config_param_count(cfg);
    /* each further worker: its workspace, and a step's copy as large (the
     * attention weights, the biggest, are both) */
    const size_t extra = ws > 0 ? params / 4 / ws : runs;
    size_t k = 1 + (extra < runs ? extra : runs);
    if (k > (size_t)(threads < 1 ? 1 : threads))
        k = (size_t)(threads < 1 ? 1 : threads);
    if (k > runs)
        k = runs;
    return k < 1 ? 1 : (int)k;
}

/* Runs the pool's runs on the caller's thread and threads - 1 more (fewer if
 * they cannot start: the results are the same). */
static void pool_run(reference_pool *p, int threads)
{
    pthread_t t[64];
    int started = 0;
    if (threads > 64)
        threads = 64;
    while (started < threads - 1 && (size_t)started + 1 < p->n &&
           pthread_create(&t[started], NULL, pool_work, p) == 0)
        started++;
    pool_work(p);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
}

/* The reference's error on the case into v: its description, and the
 * warning (even when quiet) when its variants may not stand for the oracle's. */
static void reference_describe(golden_alt *v, const golden_alt_request *rq, double ref_error)
{
    v->ref_error = ref_error;
    snprintf(v->desc, sizeof v->desc, "refenc %s double reference: bug variants computed by the "
             "reference in double (its F64 emulation for the variants with an engine hook); on this "
             "case's golden outputs its error is %.2g float64 tolerances", REFENC_VERSION, v->ref_error);
    if (!(v->ref_error <= REFERENCE_ERROR_MAX)) /* even with --quiet: the variants may be off */
        fprintf(stderr, "refenc golden: %s: the double reference is %.3g float64 tolerances from the "
                "oracle on this case (more than %g): its bug variants may be off by as much; "
                "--variants=oracle computes them exactly\n", rq->name, v->ref_error, REFERENCE_ERROR_MAX);
}

/* The runs' results into v, in order: the first failure, else the
 * reference's error, then each variant stored or said not to be. */
static int pool_collect(golden_alt *v, reference_pool *p, refenc_error *err)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->runs[i].st != REFENC_OK) {
            if (err != NULL)
                *err = p->runs[i].err;
            return p->runs[i].st;
        }
    reference_describe(v, p->rq, p->runs[0].ref_error);
    for (size_t i = 1; i < p->n; i++) {
        reference_run *r = &p->runs[i];
        const refenc_variant_info *info = refenc_variant_get((refenc_variant)r->var);
        if (r->keep == NULL) {
            say_not_stored(p->rq, info, r->effect64);
            continue;
        }
        v->set[v->n] = r->set, v->keep[v->n] = r->keep, v->names[v->n] = info->name;
        memset(&r->set, 0, sizeof r->set), r->keep = NULL;
        record_variant(v, info, &v->set[v->n], v->keep[v->n], r->first, r->effect64, r->effect32);
        v->n++;
    }
    return REFENC_OK;
}

/* The double reference's variants: the case itself first, for its error,
 * then every variant asked for, on rq->threads workers. */
static int reference_variants(golden_alt *v, const golden_alt_request *rq, const golden_set *golden,
                              const refenc_tolerance *tol64, const refenc_tolerance *tol32, refenc_error *err)
{
    int vars[REFENC_VAR_COUNT];
    const size_t total = wanted_variants(vars, rq);
    /* exactly the runs there are: a loop past the last is a read out of bounds, not a zeroed slot */
    reference_run *runs = calloc(total + 1, sizeof *runs);
    if (runs == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", rq->name);
    reference_pool p = {.rq = rq, .golden = golden, .tol64 = tol64, .tol32 = tol32, .runs = runs};
    runs[0].var = -1;
    for (size_t i = 0; i < total; i++)
        runs[i + 1].var = vars[i], runs[i + 1].writes = refenc_variant_writes_params((refenc_variant)vars[i]);
    p.n = total + 1;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    golden_log_start(&p.log, rq->quiet);
    pool_run(&p, golden_alt_workers(&rq->c->cfg, rq->c->B, rq->c->L, rq->threads, p.n));
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    const int st = pool_collect(v, &p, err);
    for (size_t i = 0; i < p.n; i++) { /* what pool_collect did not take (all, on failure) */
        golden_set_free(&runs[i].set);
        free(runs[i].keep);
    }
    free(runs);
    return st;
}

/* The oracle's variants, one after the other (each runs on the oracle's threads). */
static int oracle_variants(golden_alt *v, const golden_alt_request *rq, const golden_set *golden,
                           const refenc_tolerance *tol64, const refenc_tolerance *tol32, refenc_error *err)
{
    int vars[REFENC_VAR_COUNT];
    const size_t total = wanted_variants(vars, rq);
    golden_log log;
    golden_log_start(&log, rq->quiet);
    int st = REFENC_OK;
    for (size_t i = 0; i < total && st == REFENC_OK; i++) {
        const refenc_variant_info *info = refenc_variant_get((refenc_variant)vars[i]);
        char elapsed[32];
        if (golden_log_due(&log, elapsed, sizeof elapsed)) /* off a terminal, at most every 30 s */
            fprintf(stderr, "refenc golden: %s: bug variants: %zu/%zu done, now %s, elapsed %s\n", rq->name,
                    i, total, info->name, elapsed);
        if ((st = compute_variant(v, vars[i], info, rq, golden, err)) != REFENC_OK)
            break;
        golden_set *alt = &v->set[v->n - 1];
        int *keep = v->keep[v->n - 1];
        /* effect on the required outputs; keep those and the first diverging one */
        double effect64 = 0, effect32 = 0;
        const int first = variant_effect(alt, golden, rq->c, keep, tol64, tol32, &effect64, &effect32);
        if (!(effect64 >= VARIANT_MIN_EXCESS)) { /* indistinguishable: not stored */
            say_not_stored(rq, info, effect64);
            v->n--;
            golden_set_free(alt);
            refenc_case_free(&v->vc[v->n]);
            free(keep);
            continue;
        }
        if (first >= 0)
            keep[first] = 1;
        record_variant(v, info, alt, keep, first, effect64, effect32);
    }
    return st;
}

/* Runs every targeted bug variant that applies; stores those that move the required outputs. */
int golden_alt_make(golden_alt *v, const golden_alt_request *rq, const golden_set *golden, refenc_error *err)
{
    memset(v, 0, sizeof *v);
    v->meta = json_array();
    v->classes = json_array();
    refenc_tolerance tol64, tol32;
    refenc_certify_policy(&tol64, REFENC_ST_F64);
    refenc_certify_policy(&tol32, REFENC_ST_F32);
    if (v->meta == NULL || v->classes == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    v->by_reference = rq->by_reference;
    if (rq->by_reference)
        return reference_variants(v, rq, golden, &tol64, &tol32, err);
    return oracle_variants(v, rq, golden, &tol64, &tol32, err);
}
