#ifndef REFENC_SOFTMAX_H
#define REFENC_SOFTMAX_H

#include <stddef.h>

/* Softmax over the last axis with temperature tau:
 *   y[r,i] = exp(s[r,i]/tau - m) / sum_j exp(s[r,j]/tau - m),   m = max_j s[r,j]/tau.
 * Subtracting the maximum changes nothing mathematically and keeps every
 * exponent <= 0: no overflow for logits in the hundreds, and the largest term
 * is exactly 1, so the sum is >= 1.
 * Entries equal to -inf are masked: their weight is exactly 0.
 * Masked-row policy: a row whose every entry is -inf has all weights 0 (not
 * NaN): it attends to nothing.  The same policy holds in attention.h.
 * y, s: (R, n); y may alias s.  Precondition: tau > 0.  A NaN or +inf in a
 * row makes that row's weights NaN (IEEE propagation, never a crash).
 * Never fails. */
void refenc_softmax_forward(double *y, const double *s, size_t R, size_t n, double tau);

/* Backward (docs/gradients.md).  dy: (R, n), the gradient with respect to y;
 * y: (R, n), the forward's output (saved):
 *   ds[r,i] = y[r,i] (dy[r,i] - D_r) / tau,    D_r = sum_j y[r,j] dy[r,j]
 * Each row of ds sums to zero (sum_i y_i = 1) and ds = dy J^T with J the
 * softmax Jacobian.  A masked entry (y = 0) gets 0; a fully masked row gets
 * 0.  ds: (R, n), written; it may alias dy, not y.  Never fails. */
void refenc_softmax_backward(double *ds, const double *dy, const double *y,
                             size_t R, size_t n, double tau);

#endif
