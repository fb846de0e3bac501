/* The checks' recorder of a traced run (refenc_trace): every step it
 * emits copied whole, by name, with its shape, for comparisons of two runs. */
#ifndef REFENC_CHECKS_TRACE_STEPS_H
#define REFENC_CHECKS_TRACE_STEPS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#define TRACE_STEPS_MAX 64

typedef struct {
    size_t n;
    char name[TRACE_STEPS_MAX][64];
    size_t ndim[TRACE_STEPS_MAX], shape[TRACE_STEPS_MAX][4], numel[TRACE_STEPS_MAX];
    double *data[TRACE_STEPS_MAX];
} trace_steps;

/* A refenc_trace function: each step copied whole into ctx (a trace_steps). */
static inline void trace_steps_record(void *ctx, const char *name, const double *data, size_t ndim,
                                      const size_t *shape)
{
    trace_steps *s = ctx;
    cr_assert_lt(s->n, TRACE_STEPS_MAX);
    const size_t i = s->n++;
    snprintf(s->name[i], sizeof s->name[i], "%s", name);
    s->ndim[i] = ndim;
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= (s->shape[i][d] = shape[d]);
    s->numel[i] = n;
    s->data[i] = malloc((n ? n : 1) * sizeof(double));
    cr_assert_not_null(s->data[i]);
    memcpy(s->data[i], data, n * sizeof(double));
}

static inline void trace_steps_free(trace_steps *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->data[i]);
    memset(s, 0, sizeof *s);
}

#endif
