#ifndef REFENC_TRACE_H
#define REFENC_TRACE_H

#include <stddef.h>

/* An observer of the forward pass: called once per step, in forward order,
 * with the step's name, its values and its shape.  The names are part of
 * refenc's contract (docs/architecture.md); golden files store the same
 * steps as out.<name>.  The data is valid only during the call. */
typedef struct {
    void (*fn)(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape);
    void *ctx;
} refenc_trace;

/* Calls trace->fn if trace is not NULL.  shape has ndim entries. */
void refenc_trace_emit(const refenc_trace *trace, const char *name, const double *data,
                       size_t ndim, const size_t *shape);

#endif
