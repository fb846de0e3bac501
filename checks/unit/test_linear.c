/* Linear maps (ref/linear.h) in PyTorch's nn.Linear convention:
 * W is (out, in), y = x W^T + b.
 *
 * Every value below is a short dyadic rational, so each product and partial
 * sum is exact in double and the results are compared exactly:
 *   x = [[0.5, -1.25, 2], [-3, 0.75, 0.25]]          (N = 2, in = 3)
 *   W = [[1.5, 0.25, -2], [3, -0.5, 0.125]]          (out = 2, in = 3)
 *   b = [0.375, -1]
 *   y[0,0] = 0.75 - 0.3125 - 4 + 0.375     = -3.1875
 *   y[0,1] = 1.5 + 0.625 + 0.25 - 1        =  1.375
 *   y[1,0] = -4.5 + 0.1875 - 0.5 + 0.375   = -4.4375
 *   y[1,1] = -9 - 0.375 + 0.03125 - 1      = -10.34375 */
#include <criterion/criterion.h>

#include "../../ref/linear.h"
#include "unit.h"

static const double X[6] = {0.5, -1.25, 2.0, -3.0, 0.75, 0.25};
static const double W[6] = {1.5, 0.25, -2.0, 3.0, -0.5, 0.125};
static const double B[2] = {0.375, -1.0};

Test(linear, weight_is_out_by_in_and_bias_is_added)
{
    const double want[4] = {-3.1875, 1.375, -4.4375, -10.34375};
    double y[4];
    refenc_linear_forward(y, X, W, B, 2, 3, 2);
    for (int i = 0; i < 4; i++)
        EXPECT_EXACT(y[i], want[i], "y[%d,%d]", i / 2, i % 2);

    /* negative control: reading the same memory as (in, out), i.e. y = x W + b,
     * gives y[0,0] = 0.5*1.5 + (-1.25)(-2) + 2(-0.5) + 0.375 = 2.625 */
    cr_expect(y[0] != 2.625, "y = x W (transposed convention) was computed");
}

Test(linear, null_bias_means_no_bias)
{
    const double want[4] = {-3.5625, 2.375, -4.8125, -9.34375};
    double y[4];
    refenc_linear_forward(y, X, W, NULL, 2, 3, 2);
    for (int i = 0; i < 4; i++)
        EXPECT_EXACT(y[i], want[i], "y[%d,%d] without bias", i / 2, i % 2);
}

/* (N, in) -> (N, out) with out > in: each output row is one dot product per
 * row of W; here W = [[1,0],[0,1],[1,1]] picks and sums the inputs. */
Test(linear, widening_map_uses_one_row_of_w_per_output)
{
    const double x[2] = {2.385, -0.75}, w[6] = {1, 0, 0, 1, 1, 1}, b[3] = {0, 0, 0.5};
    double y[3];
    refenc_linear_forward(y, x, w, b, 1, 2, 3);
    EXPECT_EXACT(y[0], 2.385, "row 0 of W picks x0");
    EXPECT_EXACT(y[1], -0.75, "row 1 of W picks x1");
    EXPECT_EXACT(y[2], (2.385 - 0.75) + 0.5, "row 2 sums, then the bias");
}
