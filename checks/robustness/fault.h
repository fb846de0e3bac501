/* Allocation failures on demand, to reach every out-of-memory path of the
 * library.
 *
 * The checks binary is linked with -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc,--wrap=strdup (mk/hardening.mk): every such call from
 * librefenc.a and from the test objects goes through fault.c.  Calls made
 * inside shared libraries (libc, Criterion, jansson) do not; jansson's can be
 * redirected with json_set_alloc_funcs while a failure is armed — but only
 * for building and dumping JSON: jansson 2.14's parser does not survive a
 * failed allocation (lex_save ignores it: the token loses bytes, and a
 * string with an escape then trips an assert(0) in lex_scan_string), so
 * tests that parse JSON leave jansson's allocations alone
 * (docs/hardening.md).
 *
 * Between fault_arm and fault_disarm a test must call only the function under
 * test: the test's own allocations would count. */
#ifndef REFENC_FAULT_H
#define REFENC_FAULT_H

#include <stddef.h>

/* The n-th allocation from now (n >= 1) fails, and none other; jansson's
 * allocations count (and may fail) if `jansson`. */
void fault_arm(long n, int jansson);
/* Stops failing; returns 1 if the armed failure happened. */
int fault_disarm(void);

/* Runs call(ctx) with its 1st, 2nd, ... allocation failing, until a run
 * makes fewer allocations than the one that would fail; after each run,
 * check(ctx, status, failed) checks the outcome (status: what call returned;
 * failed: 1 if the armed allocation failed) and cleans up.  Returns the
 * number of allocations of the run that did not fail. */
long fault_run(int (*call)(void *ctx), void (*check)(void *ctx, int status, int failed), void *ctx,
               int jansson);

/* The largest single allocation (in bytes) through the wrappers since
 * fault_largest_reset: a test's check that a function does not allocate
 * what it does not need. */
void fault_largest_reset(void);
size_t fault_largest(void);

#endif
