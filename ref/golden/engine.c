#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/alloc.h"
#include "../oracle/oracle.h"
#include "threads.h"

/* A bug variant's outputs: one evaluation at 128 bits (oracle.h). */
#define VARIANT_PREC ((mpfr_prec_t)128)

/* A run whose work exceeds this many multiply-adds (a few seconds) prints
 * its memory estimate before it starts. */
#define LONG_RUN_WORK 2e9

int golden_default_threads(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 && n <= 4096 ? (int)n : 1;
}

/* ---- the encoder's steps, assembled from the items' slices -------------------- */

void golden_steps_free(golden_steps *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->step[i].data);
    free(s->step);
    memset(s, 0, sizeof *s);
}

static int add_step(golden_steps *s, const char *name, size_t ndim, const size_t *shape, int keep)
{
    if (!refenc_array_reserve((void **)&s->step, &s->cap, s->n + 1, sizeof *s->step))
        return 0;
    golden_step *st = &s->step[s->n++];
    memset(st, 0, sizeof *st);
    snprintf(st->name, sizeof st->name, "%s", name);
    st->ndim = ndim;
    memcpy(st->shape, shape, ndim * sizeof *shape);
    st->numel = 1;
    for (size_t d = 0; d < ndim; d++)
        st->numel *= shape[d];
    st->keep = keep;
    if (keep && (st->data = refenc_alloc_array(st->numel, sizeof(double))) == NULL)
        return 0;
    return 1;
}

int golden_steps_init(golden_steps *s, const refenc_case *c, int (*wanted)(void *, const char *),
                      void *wanted_ctx, int allocate)
{
    memset(s, 0, sizeof *s);
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model, H = cfg->n_heads;
    const size_t R = c->rows != NULL ? c->R : L; /* the last layer's query rows (rows.h) */
    const size_t bld[3] = {B, L, D}, bhll[4] = {B, H, L, L}, brd[3] = {B, R, D}, bhrl[4] = {B, H, R, L};
    static const char *const pre[] = {"norm1", "self_attn.weights", "self_attn", "norm2", "ffn", "output"};
    static const char *const post[] = {"self_attn.weights", "self_attn", "norm1", "ffn", "norm2", "output"};
    char name[64];
#define STEP(nm, nd, sh)                                                                      \
    do {                                                                                      \
        const int k_ = wanted == NULL || wanted(wanted_ctx, nm);                              \
        if (k_ && !add_step(s, nm, nd, sh, allocate)) {                                       \
            golden_steps_free(s);                                                             \
            return REFENC_ENOMEM;                                                             \
        }                                                                                     \
    } while (0)
    STEP("embed", 3, bld);
    for (size_t i = 0; i < cfg->n_layers; i++)
        for (size_t k = 0; k < 6; k++) {
            const char *step = cfg->norm == REFENC_NORM_PRE ? pre[k] : post[k];
            snprintf(name, sizeof name, "layers.%zu.%s", i, step);
            const int last = i + 1 == cfg->n_layers;
            if (strcmp(step, "self_attn.weights") == 0)
                STEP(name, 4, last ? bhrl : bhll);
            else
                STEP(name, 3, last ? brd : bld);
        }
    if (cfg->final_norm)
        STEP("norm", 3, brd);
    STEP("output", 3, brd);
    const size_t bd[2] = {B, D};
    if (cfg->pooling != REFENC_POOL_NONE) /* the pooled embedding (pooling.h) */
        STEP("embedding", 2, bd);
#undef STEP
    return REFENC_OK;
}

golden_step *golden_steps_find(golden_steps *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->step[i].name, name) == 0)
            return &s->step[i];
    return NULL;
}

/* emit: an item's slice into its place */
static void emit_slice(void *ctx, const char *step, size_t item, const double *data, size_t ndim,
                       const size_t *shape)
{
    golden_steps *s = ctx;
    golden_step *st = golden_steps_find(s, step);
    if (st == NULL || st->data == NULL)
        return;
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    memcpy(st->data + item * n, data, n * sizeof(double));
}

/* ---- progress on stderr ----------------------------------------------------------- */

/* Off a terminal (CI logs, make -j, Slurm output files) a whole line at
 * most this many seconds apart; REFENC_PROGRESS_INTERVAL (seconds, 0 to 30)
 * sets a shorter one, for the tests (docs/cli.md). */
#define LOG_INTERVAL 30.0

typedef struct {
    int on;            /* the run is not quiet */
    int tty;           /* stderr is a terminal: one line rewritten in place */
    double start, last, interval;
    size_t n_layers;
    int shown;
} progress_ctx;

static double log_interval(void)
{
    const char *s = getenv("REFENC_PROGRESS_INTERVAL");
    char *end;
    const double v = s != NULL && *s != '\0' ? strtod(s, &end) : -1;
    return s != NULL && *s != '\0' && *end == '\0' && v >= 0 && v <= LOG_INTERVAL ? v : LOG_INTERVAL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void format_duration(char *buf, size_t n, double s)
{
    if (s < 60)
        snprintf(buf, n, "%.0fs", s);
    else if (s < 3600)
        snprintf(buf, n, "%.0fm%02.0fs", (double)(long)(s / 60), s - 60 * (double)(long)(s / 60));
    else
        snprintf(buf, n, "%.0fh%02.0fm", (double)(long)(s / 3600),
                 (s - 3600 * (double)(long)(s / 3600)) / 60);
}

/* Where the run is, how much is done, the rate, the ETA: on a terminal one
 * line, rewritten in place, after the first 3 seconds and then every half
 * second; elsewhere a whole line every interval (30 s), with the time
 * elapsed.  Only stderr sees the clock: the outputs never depend on it. */
static void show_progress(void *ctx, const refenc_mp_progress *p)
{
    progress_ctx *pc = ctx;
    const double t = now();
    if (!pc->on || p->total <= 0 ||
        (pc->tty ? t - pc->start < 3 || t - pc->last < 0.5 : t - pc->last < pc->interval))
        return;
    pc->last = t;
    const double frac = p->done / p->total, rate = p->done / (t - pc->start);
    char eta[32] = "?", elapsed[32];
    if (rate > 0)
        format_duration(eta, sizeof eta, (p->total - p->done) / rate);
    if (pc->tty) {
        fprintf(stderr, "\roracle: unit %zu/%zu, layer %zu/%zu, %-28.28s %5.1f%%  %.3g madd/s  ETA %s   ",
                p->unit + 1, p->units, p->layer + 1, pc->n_layers, p->step, 100 * frac, rate, eta);
        pc->shown = 1;
    } else {
        format_duration(elapsed, sizeof elapsed, t - pc->start);
        fprintf(stderr, "oracle: progress: unit %zu/%zu, layer %zu/%zu, %s; %.1f%% done, elapsed %s, ETA %s\n",
                p->unit + 1, p->units, p->layer + 1, pc->n_layers, p->step, 100 * frac, elapsed, eta);
    }
    fflush(stderr);
}

void golden_log_start(golden_log *g, int quiet)
{
    g->on = !quiet && !isatty(2);
    g->start = g->last = now();
    g->interval = log_interval();
}

int golden_log_due(golden_log *g, char *elapsed, size_t n)
{
    const double t = now();
    if (!g->on || t - g->last < g->interval)
        return 0;
    g->last = t;
    format_duration(elapsed, n, t - g->start);
    return 1;
}

/* ---- the engine ------------------------------------------------------------------- */

static int wanted_step(void *ctx, const char *step)
{
    golden_steps *s = ctx;
    return golden_steps_find(s, step) != NULL;
}

void golden_oracle_desc(char *desc, size_t n, long prec, long prec_check)
{
    snprintf(desc, n, "MPFR %s; every output correctly rounded to double, certified by "
             "recomputing at %ld bits (computed at %ld bits)", mpfr_get_version(), prec_check, prec);
}

int golden_encoder_run(const refenc_case *c, const golden_run_options *opt, golden_steps *steps,
                       void (*emit)(void *, const char *, size_t, const double *, size_t, const size_t *),
                       void *emit_ctx, char *desc, size_t n, long *prec, long *prec_check,
                       refenc_error *err)
{
    const refenc_input in = refenc_case_input(c);
    const int threads = opt->threads > 0 ? opt->threads : golden_default_threads();
    const int per_layer = opt->layer_inputs != NULL;
    const size_t units = refenc_mp_encoder_units(&c->cfg, c->B, per_layer);
    progress_ctx pc = {.on = !opt->quiet, .tty = isatty(2), .start = now(), .n_layers = c->cfg.n_layers,
                       .interval = log_interval()};
    pc.last = pc.start;
    const refenc_mp_run run = {
        .cfg = &c->cfg, .params = &c->params, .in = &in, .layer_inputs = opt->layer_inputs,
        .unit_begin = opt->unit_end > 0 ? opt->unit_begin : 0,
        .unit_end = opt->unit_end > 0 ? opt->unit_end : units,
        .wanted = wanted_step, .wanted_ctx = steps,
        .emit = emit != NULL ? emit : emit_slice, .emit_ctx = emit != NULL ? emit_ctx : steps,
        .progress = show_progress, .progress_ctx = &pc,
        .prec = opt->prec > 0 ? (mpfr_prec_t)opt->prec : REFENC_MP_PREC_DEFAULT, .threads = threads};
    double work = 0;
    for (size_t k = run.unit_begin; k < run.unit_end; k++)
        work += refenc_mp_encoder_unit_work(&c->cfg, c->L, per_layer, per_layer ? k / c->B : 0);
    if (!opt->quiet && work >= LONG_RUN_WORK) {
        double out_bytes = opt->output_bytes;
        for (size_t i = 0; i < steps->n; i++)
            out_bytes += steps->step[i].keep ? 8.0 * (double)steps->step[i].numel : 0;
        fprintf(stderr,
                "oracle: %zu unit%s of %zu, %d thread%s, about %.0f MiB of MPFR storage and %.0f MiB "
                "of outputs (estimates), %.3g multiply-adds\n",
                run.unit_end - run.unit_begin, run.unit_end - run.unit_begin == 1 ? "" : "s", units,
                threads, threads == 1 ? "" : "s",
                (double)refenc_mp_encoder_run_bytes(&c->cfg, c->L, threads, run.prec) / 1048576.0,
                out_bytes / 1048576.0, work);
    }
    const int ts = golden_threads_check(threads, err); /* before libgomp, which exits if it cannot */
    if (ts != REFENC_OK)
        return ts;
    refenc_mp_report rep;
    const int st = refenc_mp_encoder_run(&run, &rep);
    if (pc.shown)
        fprintf(stderr, "\r%*s\r", 110, "");
    if (st != REFENC_OK)
        return refenc_error_set(err, st, "case %s: %s", c->name, rep.error.message);
    golden_oracle_desc(desc, n, (long)rep.prec, (long)rep.prec_check);
    if (prec != NULL)
        *prec = (long)rep.prec;
    if (prec_check != NULL)
        *prec_check = (long)rep.prec_check;
    return REFENC_OK;
}

int golden_engine_run(const refenc_case *c, const refenc_variant_hooks *hooks, int certify,
                      const golden_engine_options *opt, const refenc_trace *trace, char *desc,
                      size_t n, refenc_error *err)
{
    if (c->component == REFENC_COMP_ENCODER && hooks == NULL && certify) {
        golden_steps steps;
        int st = golden_steps_init(&steps, c, opt->wanted, opt->wanted_ctx, 1);
        if (st != REFENC_OK)
            return refenc_error_set(err, st, "case %s: out of memory for the outputs", c->name);
        const golden_run_options ro = {.threads = opt->threads, .quiet = opt->quiet};
        st = golden_encoder_run(c, &ro, &steps, NULL, NULL, desc, n, NULL, NULL, err);
        for (size_t i = 0; i < steps.n && st == REFENC_OK; i++)
            refenc_trace_emit(trace, steps.step[i].name, steps.step[i].data, steps.step[i].ndim,
                              steps.step[i].shape);
        golden_steps_free(&steps);
        return st;
    }
    refenc_mp_report rep;
    refenc_mp_hooks mh = {0};
    if (hooks != NULL)
        mh = (refenc_mp_hooks){.alibi_slopes_pow2 = hooks->alibi_slopes_pow2,
                               .merge_without_transpose = hooks->merge_without_transpose,
                               .gqa_tiled = hooks->gqa_tiled,
                               .softcap_after_mask = hooks->softcap_after_mask,
                               .rope_scaling_on_local_layers = hooks->rope_scaling_on_local_layers,
                               .qk_norm_after_rope = hooks->qk_norm_after_rope,
                               .qk_norm_over_all_heads = hooks->qk_norm_over_all_heads,
                               .pooling_ignores_padding = hooks->pooling_ignores_padding,
                               .t5_bucket_not_clamped = hooks->t5_bucket_not_clamped,
                               .t5_bias_per_layer = hooks->t5_bias_per_layer,
                               .alibi_bias_positive = hooks->alibi_bias_positive};
    const int st = refenc_mp_case_run(c, hooks != NULL ? &mh : NULL, certify, trace,
                                      certify ? REFENC_MP_PREC_DEFAULT : VARIANT_PREC, &rep);
    if (st != REFENC_OK)
        return refenc_error_set(err, st, "case %s: oracle: %s", c->name, rep.error.message);
    if (certify)
        snprintf(desc, n, "MPFR %s; every output correctly rounded to double, certified by "
                 "recomputing at %ld bits (computed at %ld bits)",
                 mpfr_get_version(), (long)rep.prec_check, (long)rep.prec);
    else
        snprintf(desc, n, "MPFR %s; bug variants computed once at %ld bits, then rounded to double",
                 mpfr_get_version(), (long)rep.prec);
    return REFENC_OK;
}
