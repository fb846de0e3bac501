#ifndef REFENC_FFN_H
#define REFENC_FFN_H

#include <stddef.h>

#include "backward_kernels.h"
#include "core/config.h"
#include "linear.h"

/* Position-wise feed-forward network ("Attention Is All You Need" 3.3), the
 * same at every position (a 1x1 convolution):
 *   y = act(x W1^T + b1) W2^T + b2
 * y, x: (N, D)   hidden: (N, F), left holding act(x W1^T + b1)
 * W1: (F, D)  b1: (F)  W2: (D, F)  b2: (D)   -- nn.Linear layouts (linear1, linear2).
 * y must not alias x or hidden.  Never fails. */
void refenc_ffn_forward(double *y, double *hidden, const double *x,
                        const double *W1, const double *b1,
                        const double *W2, const double *b2,
                        size_t N, size_t D, size_t F, refenc_activation act);

/* The same with linear (linear.h: the same doubles) for linear1 and linear2.
 * Never fails. */
void refenc_ffn_forward_with(double *y, double *hidden, const double *x,
                             const double *W1, const double *b1,
                             const double *W2, const double *b2,
                             size_t N, size_t D, size_t F, refenc_activation act,
                             refenc_linear_fn *linear);

/* Backward (docs/gradients.md).  dy: (N, D), the gradient with respect to
 * y.  Saved from the forward: x (N, D) and hidden (N, F), the activations
 * act(a) it left; the pre-activation a = x W1^T + b1 is recomputed (the
 * forward's own arithmetic) into pre (N, F).  With a:
 *   dh = dy W2 (N, F);  da = dh * act'(a);  dx = da W1        dx: (N, D), written
 *   dW2 += dy^T hidden,  db2 += sum_n dy[n,:]                 accumulated
 *   dW1 += da^T x,       db1 += sum_n da[n,:]                 accumulated
 * pre and dpre (N, F) are caller-owned work buffers, left holding a and da.
 * dx must not alias any input.  Never fails. */
void refenc_ffn_backward(double *dx, double *dW1, double *db1, double *dW2, double *db2,
                         double *pre, double *dpre,
                         const double *dy, const double *x, const double *hidden,
                         const double *W1, const double *b1, const double *W2,
                         size_t N, size_t D, size_t F, refenc_activation act);

/* The same with the linear and activation kernels of table k
 * (backward_kernels.h; NULL: the reference's). */
void refenc_ffn_backward_k(const refenc_backward_kernels *k, double *dx, double *dW1, double *db1, double *dW2,
                           double *db2, double *pre, double *dpre, const double *dy, const double *x,
                           const double *hidden, const double *W1, const double *b1, const double *W2,
                           size_t N, size_t D, size_t F, refenc_activation act);

#endif
