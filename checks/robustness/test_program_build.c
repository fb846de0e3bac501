/* How the refenc program is built matters to the people who run it: it must
 * not carry the test framework with it.
 *
 * Regression: the Makefile linked every program with Criterion.  GCC on Debian
 * links with --as-needed and dropped it, but clang (and GCC with the
 * sanitizers) kept it, and Criterion's constructor, finding the environment of
 * the Criterion worker that runs the CLI tests, aborted the program: `make
 * CC=clang check` failed 65 CLI tests with exit code 134 and no message. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "robust.h"

/* LD_TRACE_LOADED_OBJECTS makes the dynamic loader list the shared libraries
 * the program loads, instead of running it (what ldd does). */
Test(program_build, the_program_does_not_load_the_test_framework)
{
    const char *args[] = {"refenc", "--version", NULL};
    const rb_run_options opt = {.env_name = "LD_TRACE_LOADED_OBJECTS", .env_value = "1"};
    rb_result r = rb_run_with(args, &opt);
    cr_assert_eq(r.status, 0, "the loader's trace failed: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "libjansson") != NULL, "the trace does not list libjansson: %s", r.out);
    cr_expect(strstr(r.out, "libcriterion") == NULL, "%s loads Criterion:\n%s", rb_cli(), r.out);
    rb_result_free(&r);
}
