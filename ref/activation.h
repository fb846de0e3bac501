#ifndef REFENC_ACTIVATION_H
#define REFENC_ACTIVATION_H

#include <stddef.h>

#include "core/config.h"

/* ReLU: max(x, 0).  Exact.  NaN propagates (relu(NaN) = NaN, as torch.relu). */
double refenc_relu(double x);

/* GELU, exact (Hendrycks & Gimpel 2016):  x * Phi(x),  Phi(x) = (1 + erf(x/sqrt 2)) / 2.
 * Computed as x * (erfc(-x/sqrt 2) / 2), the same function: erfc(-t) = 1 + erf(t).
 * The erfc form keeps Phi's relative accuracy for negative x, where 1 + erf
 * would cancel (Phi(-8) = 6e-16 would be computed from 1 - 0.99999999999999878).
 * Error: x/sqrt(2) is x * M_SQRT1_2 (<= 2u relative); glibc documents erfc
 * to 5 ulps on x86_64 (libm-test-ulps), not 1; the argument's error is
 * amplified by erfc's condition number 2t^2 + O(1) at t = -x/sqrt 2
 * (docs/error-bounds.md). */
double refenc_gelu(double x);

/* GELU, tanh approximation (the same paper; PyTorch's approximate='tanh'):
 *   0.5 x (1 + tanh(z)),   z = sqrt(2/pi) (x + 0.044715 x^3).
 * Computed as x / (1 + exp(-2z)), the same function: (1 + tanh z)/2 =
 * 1/(1 + e^(-2z)), which does not cancel for negative x.
 * sqrt(2/pi) is the double nearest 0.7978845608028654; x^3 is x*x*x. */
double refenc_gelu_tanh(double x);

/* Quick GELU (CLIP; HF's QuickGELUActivation, input * sigmoid(1.702 input)):
 *   x sigma(1.702 x),   sigma(t) = 1 / (1 + exp(-t)).
 * Computed as x / (1 + exp(-t)), t = fl(A x), A the double nearest 1.702:
 * no cancellation for either sign; for x < -417, exp(-t) overflows and the
 * result is -0 (the exact value is below 2^-1000 in magnitude).
 * It differs from exact GELU by up to 0.0203 (at x = 2.27), so using
 * one where the other is meant is a detectable bug. */
double refenc_quick_gelu(double x);

/* SiLU (Elfwing et al. 2018; swish; torch.nn.functional.silu):  x sigma(x).
 * Computed as x / (1 + exp(-x)): no cancellation for either sign; for
 * x < -709, exp(-x) overflows and the result is -0 (the exact value is below
 * 2^-1000 in magnitude). */
double refenc_silu(double x);

/* y, x: (n); y may alias x.  y[i] = act(x[i]).  Never fails. */
void refenc_activation_forward(double *y, const double *x, size_t n, refenc_activation act);

/* act'(x), the derivative (docs/gradients.md):
 *   ReLU        1 for x > 0, else 0 (0 at x = 0, as PyTorch)
 *   GELU        Phi(x) + x phi(x),  phi(x) = exp(-x^2/2)/sqrt(2 pi)
 *   GELU-tanh   s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2),  s = sigma(2z)
 *   quick GELU  s + 1.702 x s (1 - s),  s = sigma(1.702 x)
 * (1 - s is computed as sigma(-t), without cancellation.)  NaN for a NaN
 * x except ReLU (0 for NaN <= 0 is false: 1, as PyTorch passes dy). */
double refenc_activation_derivative(double x, refenc_activation act);

/* Backward: dx[i] = dy[i] act'(x[i]).  dx, dy, x: (n); x is the forward's
 * input (the pre-activation, saved or recomputed by the caller); dx is
 * written and may alias dy, not x.  Never fails. */
void refenc_activation_backward(double *dx, const double *dy, const double *x, size_t n,
                                refenc_activation act);

#endif
