/* Running the double-precision reference on a golden case. */
#ifndef REFENC_RUN_CASE_H
#define REFENC_RUN_CASE_H

#include "../core/case.h"
#include "../core/status.h"
#include "../core/trace.h"
#include "../linear.h"

/* Runs the double-precision reference on the case; every output is reported
 * through trace with its name (without "out.") in forward order.
 * Errors: as refenc_case_validate, REFENC_ENOMEM. */
int refenc_case_run_reference(const refenc_case *c, const refenc_trace *trace, refenc_error *err);

/* The same with linear (linear.h) for every linear map of the forward: the
 * same outputs, bit for bit, from a faster map of the same sums (the golden
 * generator's runs: refenc_linear_blocked_forward, linear_blocked.h).
 * linear NULL: refenc_linear_forward.  Errors: as above. */
int refenc_case_run_reference_with(const refenc_case *c, refenc_linear_fn *linear,
                                   const refenc_trace *trace, refenc_error *err);

#endif
