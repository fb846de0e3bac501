/* What computes a golden case's outputs: the MPFR oracle, every output
 * certified correctly rounded. */
#ifndef REFENC_GOLDEN_ENGINE_H
#define REFENC_GOLDEN_ENGINE_H

#include <stddef.h>

#include "../../ref/golden_case.h"
#include "../../ref/status.h"
#include "../../ref/trace.h"

/* Runs the case; reports each output (rounded to double) through trace in
 * forward order, and describes the computation in desc (for the metadata). */
int golden_engine_run(const refenc_case *c, const refenc_trace *trace, char *desc, size_t n,
                      refenc_error *err);

#endif
