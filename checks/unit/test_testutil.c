/* The test helpers are code too: the ULP distance every accuracy test relies on. */
#include <math.h>

#include <criterion/criterion.h>

#include "../common/testutil.h"

Test(testutil, ulp_distance_counts_representable_doubles)
{
    cr_expect_eq(test_ulp_distance(1.0, 1.0), 0.0);
    cr_expect_eq(test_ulp_distance(1.0, nextafter(1.0, 2.0)), 1.0);
    cr_expect_eq(test_ulp_distance(1.0, nextafter(1.0, 0.0)), 1.0);
    cr_expect_eq(test_ulp_distance(0.0, -0.0), 0.0);
    /* across zero: the smallest subnormals on each side are 2 apart */
    cr_expect_eq(test_ulp_distance(0x1p-1074, -0x1p-1074), 2.0);
    /* 2^52 doubles in [1, 2) */
    cr_expect_eq(test_ulp_distance(1.0, 2.0), 0x1p52);
    cr_expect_eq(test_ulp_distance(-1.0, -2.0), 0x1p52);
    cr_expect(isinf(test_ulp_distance(NAN, 1.0)));
    /* negative control: a different value is not 0 apart */
    cr_expect_neq(test_ulp_distance(1.0, 1.0 + 0x1p-52), 0.0);
}

Test(testutil, gamma_matches_its_definition)
{
    cr_expect_eq(test_gamma(1), TEST_U / (1 - TEST_U));
    cr_expect(test_gamma(100) > 100 * TEST_U);
}
