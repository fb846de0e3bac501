/* What computes a golden case's outputs: the MPFR oracle.  Encoder cases
 * run item by item on refenc_mp_encoder_run (threads, progress, a memory
 * estimate, units for sharding); the components and the bug variants on
 * refenc_mp_case_run. */
#ifndef REFENC_GOLDEN_ENGINE_H
#define REFENC_GOLDEN_ENGINE_H

#include <stddef.h>

#include "../core/case.h"
#include "../core/status.h"
#include "../core/trace.h"
#include "../tool/variants.h"

typedef struct {
    int threads;   /* oracle threads; 0: every core */
    int quiet;     /* no progress and no memory estimate on stderr */
    /* the steps wanted (NULL: all), by trace name ("embed", "layers.0.norm1", ...) */
    int (*wanted)(void *ctx, const char *step);
    void *wanted_ctx;
} golden_engine_options;

/* Runs the case on the oracle; reports each output (a double) through trace
 * in forward order, and describes the computation in desc (for the
 * metadata).  hooks: NULL, or a bug variant's.  certify: 1 for the golden
 * outputs (correctly rounded, certified), 0 for a bug variant's (one
 * evaluation at 128 bits). */
int golden_engine_run(const refenc_case *c, const refenc_variant_hooks *hooks, int certify,
                      const golden_engine_options *opt, const refenc_trace *trace, char *desc,
                      size_t n, refenc_error *err);

/* The "oracle" metadata of a certified run that needed these precisions. */
void golden_oracle_desc(char *desc, size_t n, long prec, long prec_check);

/* Progress lines off a terminal (CI logs, Slurm output files): a whole line
 * at most interval seconds apart (30; REFENC_PROGRESS_INTERVAL, 0 to 30,
 * for the tests).  Only stderr sees the clock. */
typedef struct {
    int on; /* not quiet, and stderr is not a terminal */
    double start, last, interval;
} golden_log;

void golden_log_start(golden_log *g, int quiet);

/* 1 when a line is due (then the time since the start, formatted, in
 * elapsed), else 0. */
int golden_log_due(golden_log *g, char *elapsed, size_t n);

/* The number of cores: the default thread count. */
int golden_default_threads(void);

/* The steps of an encoder case, in forward order, with their full shapes
 * ((B, L, D), (B, H, L, L)) and, when allocated, their values. */
typedef struct {
    char name[64];
    size_t ndim, shape[4], numel;
    double *data;     /* NULL unless allocated */
    int keep;
} golden_step;

typedef struct {
    size_t n, cap;
    golden_step *step;
} golden_steps;

/* The steps of c that wanted accepts (NULL: all); allocate: give each its
 * values' storage.  Errors: REFENC_ENOMEM. */
int golden_steps_init(golden_steps *s, const refenc_case *c, int (*wanted)(void *, const char *),
                      void *wanted_ctx, int allocate);
golden_step *golden_steps_find(golden_steps *s, const char *name);
void golden_steps_free(golden_steps *s);

typedef struct {
    int threads, quiet;
    const double *const *layer_inputs; /* per layer (oracle.h), or NULL */
    size_t unit_begin, unit_end;       /* unit_end 0: every unit */
    double output_bytes;               /* what the caller keeps of the outputs, when
                                          steps are not allocated (for the estimate) */
    long prec;                         /* the first working precision; 0: 192 bits */
} golden_run_options;

/* The certified steps of the encoder case c for the units asked, into
 * steps (whose names select what is certified), or to emit when it is not
 * NULL (oracle.h: refenc_mp_run.emit).  desc: as golden_engine_run's. */
int golden_encoder_run(const refenc_case *c, const golden_run_options *opt, golden_steps *steps,
                       void (*emit)(void *, const char *, size_t, const double *, size_t, const size_t *),
                       void *emit_ctx, char *desc, size_t n, long *prec, long *prec_check,
                       refenc_error *err);

#endif
