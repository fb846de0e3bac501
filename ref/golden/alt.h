/* The bug variants' outputs a golden case stores (alt.<variant>.<output>,
 * docs/golden-format.md) for certify's diagnosis: each known bug
 * (tool/variants.h) that applies to the case and moves its required
 * outputs by at least 100 float64 tolerances, with the outputs it changes
 * first and the required ones.  Computed by the oracle (MPFR, one
 * evaluation at 128 bits: the catalogue's cases) or by the double reference
 * (tool/emulate.h at F64: a user's model by default), whose error on the
 * case's own golden outputs is measured and recorded beside them
 * (docs/diagnosis.md, "Variants from the double reference"). */
#ifndef REFENC_GOLDEN_ALT_H
#define REFENC_GOLDEN_ALT_H

#include <stddef.h>

#include <jansson.h>

#include "../core/case.h"
#include "../core/status.h"
#include "../tool/variants.h"
#include "file.h"

/* Which variants of which case, computed how. */
typedef struct {
    const refenc_case *c;
    const char *name;           /* the case's, for messages */
    const json_t *bug_classes;  /* the variants of these classes, unless all */
    int all;                    /* every variant that applies (a config's case) */
    int by_reference;           /* the double reference, not the oracle */
    int threads, quiet;         /* the oracle's threads; no notices on stderr */
} golden_alt_request;

/* The variants stored, each with its outputs and which of them to keep. */
typedef struct {
    size_t n;
    golden_set set[REFENC_VAR_COUNT];
    refenc_case vc[REFENC_VAR_COUNT];
    const char *names[REFENC_VAR_COUNT];
    int *keep[REFENC_VAR_COUNT];
    json_t *meta;          /* the "variants" array */
    json_t *classes;       /* a config's bug classes: those of the stored variants */
    char desc[256];
    int by_reference;      /* computed by the double reference  */
    double ref_error;      /* then: the reference's error on the golden outputs, in F64 tolerances */
} golden_alt;

/* Computes every variant rq asks for against the case's golden outputs and
 * keeps those that move them enough; says on stderr (unless quiet) which
 * are not stored, and, even when quiet, when the reference is too far from
 * the oracle on this case for its variants to stand for the oracle's.
 * v is then freed by golden_alt_free, whatever the outcome.
 * Errors: REFENC_ENOMEM, the oracle's. */
int golden_alt_make(golden_alt *v, const golden_alt_request *rq, const golden_set *golden, refenc_error *err);

void golden_alt_free(golden_alt *v);

/* How many workers run the double reference's variants (runs: the case's
 * own run and the variants'): at most threads (< 1: one) and runs, and
 * beyond the first only as many as fit, at two workspaces each (the
 * reference's, and the copy of a step a run keeps or compares), in half the
 * parameters' memory.  So the workers add at most half a parameter block to
 * the peak, which the golden without variants already holds: a case whose
 * workspace dwarfs its parameters (a long sequence's (B, H, L, L) attention
 * weights) runs its variants one at a time, as a single thread would. */
int golden_alt_workers(const refenc_config *cfg, size_t B, size_t L, int threads, size_t runs);

#endif
