/* A refenc_trace observer that records every step (name, shape and the first
 * values) so a test can check the order and the intermediate values. */
#ifndef REFENC_TRACE_LOG_H
#define REFENC_TRACE_LOG_H

#include <stdio.h>
#include <string.h>

#include "../../ref/core/trace.h"

#define TRACE_LOG_STEPS 64
#define TRACE_LOG_VALUES 64

typedef struct {
    size_t n;
    char name[TRACE_LOG_STEPS][64];
    size_t ndim[TRACE_LOG_STEPS];
    size_t shape[TRACE_LOG_STEPS][4];
    size_t count[TRACE_LOG_STEPS];                 /* number of values in the step  */
    double value[TRACE_LOG_STEPS][TRACE_LOG_VALUES]; /* the first TRACE_LOG_VALUES */
} trace_log;

static inline void trace_log_record(void *ctx, const char *name, const double *data, size_t ndim,
                                    const size_t *shape)
{
    trace_log *log = ctx;
    if (log->n >= TRACE_LOG_STEPS)
        return;
    const size_t i = log->n++;
    snprintf(log->name[i], sizeof log->name[i], "%s", name);
    log->ndim[i] = ndim;
    size_t count = 1;
    for (size_t d = 0; d < ndim && d < 4; d++) {
        log->shape[i][d] = shape[d];
        count *= shape[d];
    }
    log->count[i] = count;
    memcpy(log->value[i], data, (count < TRACE_LOG_VALUES ? count : TRACE_LOG_VALUES) * sizeof(double));
}

/* The recorded step with this name, or -1. */
static inline int trace_log_find(const trace_log *log, const char *name)
{
    for (size_t i = 0; i < log->n; i++)
        if (strcmp(log->name[i], name) == 0)
            return (int)i;
    return -1;
}

#endif
