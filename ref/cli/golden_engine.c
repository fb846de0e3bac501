#include "golden_engine.h"

#include <stdio.h>

#include "../oracle/oracle.h"

/* A bug variant's outputs: one evaluation at 128 bits (oracle.h). */
#define VARIANT_PREC ((mpfr_prec_t)128)

int golden_engine_run(const refenc_case *c, const refenc_variant_hooks *hooks, int certify,
                      const golden_engine_options *opt,
                      const refenc_trace *trace, char *desc, size_t n, refenc_error *err)
{
    (void)opt;
    refenc_mp_report rep;
    refenc_mp_hooks mh = {0, 0};
    if (hooks != NULL)
        mh = (refenc_mp_hooks){.alibi_slopes_pow2 = hooks->alibi_slopes_pow2,
                               .merge_without_transpose = hooks->merge_without_transpose};
    const int st = refenc_mp_case_run(c, hooks != NULL ? &mh : NULL, certify, trace,
                                      certify ? REFENC_MP_PREC_DEFAULT : VARIANT_PREC, &rep);
    if (st != REFENC_OK)
        return refenc_error_set(err, st, "case %s: oracle: %s", c->name, rep.error.message);
    if (certify)
        snprintf(desc, n, "MPFR %s; every output correctly rounded to double, certified by "
                 "recomputing at %ld bits (computed at %ld bits)",
                 mpfr_get_version(), (long)rep.prec_check, (long)rep.prec);
    else
        snprintf(desc, n, "MPFR %s; bug variants computed once at %ld bits, then rounded to double",
                 mpfr_get_version(), (long)rep.prec);
    return REFENC_OK;
}
