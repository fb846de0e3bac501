/* Small helpers shared by the accuracy suites. */
#ifndef REFENC_CHECKS_ACC_COMMON_H
#define REFENC_CHECKS_ACC_COMMON_H

#include <stdlib.h>

#include <criterion/criterion.h>

#include "../../ref/oracle/oracle.h"
#include "../../ref/refenc.h"
#include "../common/testutil.h"
#include "bounds.h"

#define P0 REFENC_MP_PREC_DEFAULT

/* n values N(mean, sd^2) from r, in a fresh allocation */
static inline double *acc_randn(size_t n, double mean, double sd, gsl_rng *r)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert_not_null(x);
    test_fill_gaussian(x, n, mean, sd, r);
    return x;
}

static inline double *acc_zeros(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    cr_assert_not_null(x);
    return x;
}

/* the oracle call must succeed */
#define MP_OK(call)                                                                   \
    do {                                                                              \
        refenc_mp_report rep_;                                                        \
        memset(&rep_, 0, sizeof rep_);                                                \
        const int st_ = (call);                                                       \
        cr_assert_eq(st_, REFENC_OK, "oracle failed: %s", rep_.error.message);        \
    } while (0)
#define REP (&rep_)

#endif
