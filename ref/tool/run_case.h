/* Running the double-precision reference on a golden case. */
#ifndef REFENC_RUN_CASE_H
#define REFENC_RUN_CASE_H

#include "../core/case.h"
#include "../core/status.h"
#include "../core/trace.h"

/* Runs the double-precision reference on the case; every output is reported
 * through trace with its name (without "out.") in forward order.
 * Errors: as refenc_case_validate, REFENC_ENOMEM. */
int refenc_case_run_reference(const refenc_case *c, const refenc_trace *trace, refenc_error *err);

#endif
