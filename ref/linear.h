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

/* A linear map with refenc_linear_forward's arguments that computes its y
 * bit for bit.  The forwards with linear maps take one in their _with twins
 * (mha.h, ffn.h, glu.h; refenc_layer_work.linear for a layer) so that a
 * tool may pass a faster schedule of the same sums (tool/linear_blocked.h);
 * the plain functions pass refenc_linear_forward. */
typedef void refenc_linear_fn(double *y, const double *x, const double *W, const double *b,
                              size_t N, size_t in, size_t out);

/* Backward (docs/gradients.md).  dy: (N, out), the gradient of the loss
 * with respect to y; x: (N, in), the forward's input; W: (out, in).
 *   dx[n,k]  = sum_o dy[n,o] W[o,k]        dx: (N, in), written; NULL: not computed
 *   dW[o,k] += sum_n dy[n,o] x[n,k]        dW: (out, in), accumulated (+=)
 *   db[o]   += sum_n dy[n,o]               db: (out), accumulated; NULL: no bias
 * dW is the sum over the N tokens of the outer products dy[n,:] x[n,:]^T,
 * in nn.Linear's (out, in) layout.  Sums run n = 0 upward (o = 0 upward for
 * dx).  dx must not alias dy or x.  Never fails. */
void refenc_linear_backward(double *dx, double *dW, double *db,
                            const double *dy, const double *x, const double *W,
                            size_t N, size_t in, size_t out);

#endif
