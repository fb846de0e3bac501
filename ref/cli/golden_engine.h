/* What computes a golden case's outputs: the MPFR oracle. */
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
} golden_engine_options;

/* Runs the case on the oracle; reports each output (a double) through trace
 * in forward order, and describes the computation in desc (for the
 * metadata).  hooks: NULL, or a bug variant's.  certify: 1 for the golden
 * outputs (correctly rounded, certified), 0 for a bug variant's (one
 * evaluation at 128 bits). */
int golden_engine_run(const refenc_case *c, const refenc_variant_hooks *hooks, int certify,
                      const golden_engine_options *opt, const refenc_trace *trace, char *desc,
                      size_t n, refenc_error *err);

#endif
