/* What the oracle's certification relies on besides the values: the
 * "exact" flags a kernel reports (a value flagged exact skips the rounding
 * check of Ziv's loop, so a flag left set where a rounding happened would
 * skip the check on a rounded value), and out-of-memory statuses, which must
 * reach the caller instead of a result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/oracle/oracle.h"
#include "../robustness/fault.h"

/* x (B, L, D) + PE[pos]: at position 0, PE = (sin 0, cos 0, ...) = (0, 1, ...)
 * and x + 0, x + 1 are exact at 128 bits for these x; at any other position
 * sin and cos are irrational and every value is rounded. */
Test(oracle_flags, sinusoidal_clears_the_exact_flag_of_every_rounded_value)
{
    enum { B = 2, L = 3, D = 6 };
    const int64_t pos[L] = {0, 1, 5};
    double x[B * L * D];
    for (size_t i = 0; i < B * L * D; i++)
        x[i] = 2.385 * (double)(i % 7) - 6.5;
    mpfr_ptr y = refenc_mp_alloc(B * L * D, 128);
    cr_assert_not_null(y);
    cr_assert_eq(refenc_mp_set_d(y, x, B * L * D), 0);
    unsigned char exact[B * L * D];
    memset(exact, 1, sizeof exact);
    refenc_mp_ws ws;
    cr_assert_eq(refenc_mp_ws_alloc(&ws, 128, 3 * D / 2 + 3, 1), REFENC_OK);
    refenc_mpk_sinusoidal_forward(y, exact, y, pos, B, L, D, &ws);
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++)
            for (size_t d = 0; d < D; d++) {
                const size_t i = (b * L + l) * D + d;
                cr_expect_eq(exact[i], pos[l] == 0, "[%zu, %zu, %zu] at position %lld: exact flag %d", b, l, d,
                             (long long)pos[l], exact[i]);
                /* and the value is x + PE (to double accuracy) */
                const double w = pow(10000, -(double)(d / 2 * 2) / D) * (double)pos[l];
                const double pe = d % 2 ? cos(w) : sin(w);
                cr_expect(fabs(mpfr_get_d(y + i, MPFR_RNDN) - (x[i] + pe)) < 1e-14, "[%zu]", i);
            }
    /* a flag already clear stays clear, even at position 0 */
    memset(exact, 0, sizeof exact);
    cr_assert_eq(refenc_mp_set_d(y, x, B * L * D), 0);
    refenc_mpk_sinusoidal_forward(y, exact, y, pos, B, L, D, &ws);
    for (size_t i = 0; i < B * L * D; i++)
        cr_expect_eq(exact[i], 0);
    refenc_mp_ws_free(&ws);
    refenc_mp_free(y, B * L * D);
}

static int alibi_call(void *ctx)
{
    return refenc_mp_alibi_slopes(ctx, 12, 128, NULL);
}

static double alibi_want[12];

static void alibi_check(void *ctx, int status, int failed)
{
    const double *m = ctx;
    if (failed) {
        cr_expect_eq(status, REFENC_ENOMEM, "an allocation failed but the ALiBi twin returned %d", status);
    } else {
        cr_expect_eq(status, REFENC_OK);
        cr_expect(memcmp(m, alibi_want, sizeof alibi_want) == 0, "the slopes differ after the failed runs");
    }
}

Test(oracle_flags, the_alibi_twin_returns_every_allocation_failure)
{
    double m[12];
    cr_assert_eq(alibi_call(m), REFENC_OK);
    memcpy(alibi_want, m, sizeof m);
    /* 12 heads: 2^-1 ... 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 */
    cr_expect_eq(m[0], 0.5);
    cr_expect_eq(m[7], 0x1p-8);
    cr_expect_eq(m[8], sqrt(0.5));
    cr_expect_gt(fault_run(alibi_call, alibi_check, m, 0), 0, "the twin allocates nothing");
}

/* The report counts the values certified: one output of n values is n
 * (Ziv's loop sums the steps it emits, and no more). */
Test(oracle_flags, the_report_counts_the_values_certified)
{
    double x[7], y[7];
    for (size_t i = 0; i < 7; i++)
        x[i] = 0.37 * (double)i - 1.1;
    for (size_t n = 1; n <= 7; n += 3) {
        refenc_mp_report rep;
        cr_assert_eq(refenc_mp_activation_forward(y, x, n, REFENC_ACT_GELU, 128, &rep), REFENC_OK, "%s",
                     rep.error.message);
        cr_expect_eq(rep.values, n, "%zu values reported for %zu", rep.values, n);
    }
}
