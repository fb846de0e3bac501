/* Comparison helpers for the unit suites (checks/unit/): a hand value, the
 * computed value and a tolerance that the test derives in a comment.
 *
 * Converting a relative error bound r (in units of u = 2^-53) into ULPs:
 * for y in [2^e, 2^(e+1)), ulp(y) = 2^(e-52) > u |y|, so an error of r u |y|
 * is less than r ULPs.  A reference value rounded from a more precise closed
 * form adds at most half an ULP. */
#ifndef REFENC_UNIT_H
#define REFENC_UNIT_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include <criterion/criterion.h>

#include "../common/testutil.h"

/* 1 if got is within maxulps representable doubles of want (never for NaN). */
static inline int unit_ulps_within(double got, double want, double maxulps)
{
    return test_ulp_distance(got, want) <= maxulps;
}

/* 1 if |got - want| <= tol (never for NaN). */
static inline int unit_abs_within(double got, double want, double tol)
{
    return fabs(got - want) <= tol;
}

#define EXPECT_ULPS(got, want, maxulps, ...)                                                 \
    do {                                                                                     \
        const double g_ = (got), w_ = (want);                                                \
        char what_[160];                                                                     \
        snprintf(what_, sizeof what_, __VA_ARGS__);                                          \
        cr_expect(unit_ulps_within(g_, w_, (maxulps)),                                       \
                  "%s: got %a (%.17g), want %a (%.17g): %.4g ulps apart, tolerance %g ulps", \
                  what_, g_, g_, w_, w_, test_ulp_distance(g_, w_), (double)(maxulps));      \
    } while (0)

#define EXPECT_ABS(got, want, tol, ...)                                                      \
    do {                                                                                     \
        const double g_ = (got), w_ = (want), t_ = (tol);                                    \
        char what_[160];                                                                     \
        snprintf(what_, sizeof what_, __VA_ARGS__);                                          \
        cr_expect(unit_abs_within(g_, w_, t_),                                               \
                  "%s: got %a (%.17g), want %a (%.17g): |diff| %.3g > tol %.3g",             \
                  what_, g_, g_, w_, w_, fabs(g_ - w_), t_);                                 \
    } while (0)

/* Exact: the arithmetic involved is exact (stated in the test). */
#define EXPECT_EXACT(got, want, ...)                                                         \
    do {                                                                                     \
        const double g_ = (got), w_ = (want);                                                \
        char what_[160];                                                                     \
        snprintf(what_, sizeof what_, __VA_ARGS__);                                          \
        cr_expect(g_ == w_, "%s: got %a (%.17g), want exactly %a (%.17g)", what_, g_, g_,    \
                  w_, w_);                                                                   \
    } while (0)

/* Negative control: a wrong hand value must be rejected by the same
 * comparison the test uses for the right one. */
#define EXPECT_ULPS_REJECTS(got, wrong, maxulps, ...)                                        \
    do {                                                                                     \
        const double g_ = (got), w_ = (wrong);                                               \
        char what_[160];                                                                     \
        snprintf(what_, sizeof what_, __VA_ARGS__);                                          \
        cr_expect(!unit_ulps_within(g_, w_, (maxulps)),                                      \
                  "negative control %s: got %.17g is within %g ulps of the wrong value "     \
                  "%.17g: the check cannot tell them apart", what_, g_, (double)(maxulps), w_); \
    } while (0)

#define EXPECT_ABS_REJECTS(got, wrong, tol, ...)                                             \
    do {                                                                                     \
        const double g_ = (got), w_ = (wrong), t_ = (tol);                                   \
        char what_[160];                                                                     \
        snprintf(what_, sizeof what_, __VA_ARGS__);                                          \
        cr_expect(!unit_abs_within(g_, w_, t_),                                              \
                  "negative control %s: got %.17g is within %.3g of the wrong value %.17g: " \
                  "the check cannot tell them apart", what_, g_, t_, w_);                    \
    } while (0)

#endif
