#ifndef REFENC_LINEAR_H
#define REFENC_LINEAR_H

#include <stddef.h>

/* Affine map in PyTorch's nn.Linear convention.
 * y: (N, out)   x: (N, in)   W: (out, in) row-major   b: (out) or NULL.
 * y[n,o] = sum_{k=0}^{in-1} x[n,k] * W[o,k]  + b[o]
 * The sum is accumulated from k = 0 upward starting at 0.0 and the bias is
 * added last, so |fl(y) - y| <= gamma_in (1 + u) sum_k |x[n,k] W[o,k]| + u |y|
 * (the sum's error is itself rounded by the bias addition; without a bias,
 * gamma_in sum_k |x[n,k] W[o,k]|).
 * y must not alias x.  Never fails. */
void refenc_linear_forward(double *y, const double *x, const double *W, const double *b,
                           size_t N, size_t in, size_t out);

#endif
