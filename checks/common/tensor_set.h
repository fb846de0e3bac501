/* A results file as named double tensors, for the gradient suites: read one
 * (every tensor, or only out.output and the gradients), change a tensor,
 * write it again in a dtype (checks/golden/test_golden_grad*.c). */
#ifndef REFENC_CHECKS_TENSOR_SET_H
#define REFENC_CHECKS_TENSOR_SET_H

#include <stddef.h>

#include "../../ref/io/safetensors.h"
#include "../../ref/refenc.h"

#define TENSOR_SET_MAX 96

typedef struct {
    size_t n;
    char name[TENSOR_SET_MAX][REFENC_NAME_MAX];
    double *data[TENSOR_SET_MAX];
    size_t ndim[TENSOR_SET_MAX], shape[TENSOR_SET_MAX][4], numel[TENSOR_SET_MAX];
} tensor_set;

/* The tensor `name` set to x (NULL: zeros) of that shape, added or
 * replaced; returns its values. */
double *tensor_set_put(tensor_set *s, const char *name, const double *x, size_t ndim, const size_t *shape);

/* The values of `name`, or NULL. */
double *tensor_set_get(const tensor_set *s, const char *name);

/* s <- the tensors of the file at path, as doubles: every one, or with
 * results_only only out.output and the grad.* ones. */
void tensor_set_load(tensor_set *s, const char *path, int results_only);

/* Writes s to path: the tensors whose name starts with prefix (NULL: every
 * one) in format f, each value rounded to it (round to nearest even), the
 * others F64. */
void tensor_set_write(const tensor_set *s, const char *path, refenc_format f, const char *prefix);

void tensor_set_free(tensor_set *s);

#endif
