#include "engine.h"

#include <stdio.h>

/* Provisional: the double reference, until the oracle's case runner is in. */
int golden_engine_run(const refenc_case *c, const refenc_trace *trace, char *desc, size_t n,
                      refenc_error *err)
{
    snprintf(desc, n, "refenc double reference (provisional)");
    return refenc_case_run_reference(c, trace, err);
}
