/* A results file being built: named tensors (out.<step>) collected from a
 * trace, in F64 or, for an emulation, in its dtype, then written at once
 * (docs/golden-format.md, "Tensors"). */
#ifndef REFENC_CLI_RESULTS_H
#define REFENC_CLI_RESULTS_H

#include <stddef.h>

#include <jansson.h>

#include "../core/status.h"
#include "../core/trace.h"
#include "../io/safetensors.h"
#include "../tool/emulate.h"

typedef struct {
    const json_t *wanted; /* a golden's "outputs" list [{"name": ...}], or NULL: every step */
    size_t n, cap;
    char **names;
    double **data;
    refenc_st_entry *entries;
    refenc_format format; /* the dtype written (zero: F64); the values must already be in it */
    const char *prefix;   /* of the names kept: NULL for "out.", or "grad." */
    int failed;           /* out of memory, or more dimensions than a file holds */
} results;

/* The trace function: keeps a copy of each step as "out.<step>" (only those
 * in r->wanted, when it is set).  ctx is a results. */
void results_collect(void *ctx, const char *name, const double *data, size_t ndim,
                     const size_t *shape);

/* Writes the tensors kept to path, atomically (refenc_st_write), with the
 * metadata (may be NULL).  Errors: REFENC_ENOMEM (a step could not be
 * kept), those of refenc_st_write. */
int results_write(const results *r, const char *path, const json_t *metadata, refenc_error *err);

void results_free(results *r);

#endif
