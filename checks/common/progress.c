/* One line per suite as it finishes, on stderr, for make check (and the
 * sanitize and coverage builds, which run the same runner):
 *
 *     suite layernorm: 12 passed (0.4 s)
 *     suite rope: 7 passed, 1 FAILED, 2 skipped (1.3 s)
 *
 * Criterion's own POST_SUITE hook cannot say this with --jobs > 1: it runs
 * once the suite's tests are started, not finished, with the suite's
 * counters still growing.  So PRE_SUITE records how many tests the suite
 * holds and when it started, POST_SUITE keeps the suite's live counters, and
 * the line is printed when passed + failed + skipped reaches that number
 * (checked after every test, crash and suite event; disabled and filtered-out
 * tests count as skipped as soon as the suite starts).  A crash is also a
 * failure in Criterion's counters.  POST_ALL prints any suite still open.
 * The time is wall-clock time from the suite's start to its last test:
 * suites overlap under --jobs, so the figures do not add up to the total.
 * A suite whose every test is filtered out (--filter) prints nothing.
 * REFENC_CHECK_PROGRESS=0 silences the lines.
 *
 * Every failed or crashed test is also named with the seed the randomised
 * suites drew from (REFENC_SEED, or the default: testutil.h) and the command
 * that replays it, whatever the test printed itself:
 *
 *     FAILED rope/relative_property under REFENC_SEED=7; replay: REFENC_SEED=7
 *         build/checks/refenc-checks --filter 'rope/relative_property'
 *
 * These lines are printed even with REFENC_CHECK_PROGRESS=0. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include "testutil.h"

struct progress_suite {
    const char *name;
    size_t expected;                      /* tests in the suite, disabled included */
    struct timespec start;
    struct criterion_suite_stats *stats;  /* live counters, from POST_SUITE */
    bool printed;
};

static struct progress_suite *suites;
static size_t n_suites, cap_suites;
static bool quiet = false;

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static struct progress_suite *find(const char *name)
{
    for (size_t i = 0; i < n_suites; i++)
        if (strcmp(suites[i].name, name) == 0)
            return &suites[i];
    return NULL;
}

/* Prints the suite's line if every test has an outcome (or if forced). */
static void report(struct progress_suite *s, bool force)
{
    const struct criterion_suite_stats *st = s->stats;
    if (quiet || s->printed || st == NULL)
        return;
    size_t done = st->tests_passed + st->tests_failed + st->tests_skipped;
    if (done < s->expected && !force)
        return;
    s->printed = true;
    if (st->tests_passed + st->tests_failed == 0)
        return;  /* nothing run: filtered out or disabled */
    char more[96] = "";
    int at = 0;
    if (st->tests_failed > 0)
        at += snprintf(more + at, sizeof more - (size_t)at, ", %zu FAILED", st->tests_failed);
    if (st->tests_crashed > 0)
        at += snprintf(more + at, sizeof more - (size_t)at, " (%zu crashed)", st->tests_crashed);
    if (st->tests_skipped > 0)
        snprintf(more + at, sizeof more - (size_t)at, ", %zu skipped", st->tests_skipped);
    fprintf(stderr, "suite %s: %zu passed%s (%.1f s)%s\n", s->name, st->tests_passed, more,
            seconds_since(&s->start), done < s->expected ? " [incomplete]" : "");
    fflush(stderr);
}

/* The seed as the suites read it (test_seed, which may not be called outside a test). */
static const char *seed_text(void)
{
    const char *s = getenv("REFENC_SEED");
    static char buf[32];
    if (s == NULL || *s == '\0') {
        snprintf(buf, sizeof buf, "%lu", TEST_DEFAULT_SEED);
        return buf;
    }
    return s;
}

static void report_failure(const struct criterion_test_stats *t)
{
    if (t->test_status != CR_STATUS_FAILED && !t->crashed)
        return;
    const char *seed = seed_text();
    fprintf(stderr, "%s %s/%s under REFENC_SEED=%s; replay: REFENC_SEED=%s build/checks/refenc-checks "
            "--filter '%s/%s'\n", t->crashed ? "CRASHED" : "FAILED", t->test->category, t->test->name, seed,
            seed, t->test->category, t->test->name);
    fflush(stderr);
}

static void report_category(const char *name)
{
    struct progress_suite *s = find(name);
    if (s != NULL)
        report(s, false);
}

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    const char *v = getenv("REFENC_CHECK_PROGRESS");
    quiet = v != NULL && strcmp(v, "0") == 0;
}

ReportHook(PRE_SUITE)(struct criterion_suite_set *set)
{
    if (n_suites == cap_suites) {
        size_t cap = cap_suites ? 2 * cap_suites : 64;
        struct progress_suite *p = realloc(suites, cap * sizeof *p);
        if (p == NULL) {  /* no progress lines rather than no tests */
            quiet = true;
            return;
        }
        suites = p;
        cap_suites = cap;
    }
    struct progress_suite *s = &suites[n_suites++];
    s->name = set->suite.name;
    s->expected = set->tests != NULL ? set->tests->size : 0;
    clock_gettime(CLOCK_MONOTONIC, &s->start);
    s->stats = NULL;
    s->printed = false;
}

ReportHook(POST_SUITE)(struct criterion_suite_stats *stats)
{
    struct progress_suite *s = find(stats->suite->name);
    if (s == NULL)
        return;
    s->stats = stats;
    report(s, false);
}

ReportHook(POST_TEST)(struct criterion_test_stats *t)
{
    if (!t->crashed) /* a crash is reported by TEST_CRASH */
        report_failure(t);
    report_category(t->test->category);
}

ReportHook(TEST_CRASH)(struct criterion_test_stats *t)
{
    report_failure(t);
    report_category(t->test->category);
}

ReportHook(POST_FINI)(struct criterion_test_stats *t)
{
    report_category(t->test->category);
}

ReportHook(POST_ALL)(struct criterion_global_stats *g)
{
    (void)g;
    for (size_t i = 0; i < n_suites; i++)
        report(&suites[i], true);
    free(suites);
    suites = NULL;
    n_suites = cap_suites = 0;
}
