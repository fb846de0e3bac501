/* The negative control of `make sanitize`'s leak check: a Criterion test
 * that leaks, built and run by the sanitize target alone (not part of make
 * check).  Criterion ignores how a test's worker process exits once the
 * test has passed, so LeakSanitizer's report of this leak does not fail the
 * run; the target must find the report in the sanitizer logs and fail, and
 * scripts/sanitizer-logs.sh checks that it does. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

Test(leak_probe, leaks_77_bytes)
{
    char *p = malloc(77);
    cr_assert_not_null(p);
    strcpy(p, "a leak LeakSanitizer must report");
    cr_expect_eq(p[0], 'a');
}
