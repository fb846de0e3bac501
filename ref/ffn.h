#ifndef REFENC_FFN_H
#define REFENC_FFN_H

#include <stddef.h>

#include "core/config.h"

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

#endif
