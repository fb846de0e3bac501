#ifndef REFENC_RMSNORM_H
#define REFENC_RMSNORM_H

#include <stddef.h>

/* Root-mean-square normalisation over the last axis (Zhang & Sennrich 2019;
 * T5LayerNorm, LlamaRMSNorm, GemmaRMSNorm):
 *   ms      = sum_d x[n,d]^2 / D              no mean subtracted, no bias
 *   s_d     = w[d]            (offset 0: T5, Llama, Qwen, Mistral)
 *           = fl(1 + w[d])    (offset 1: Gemma, whose w is stored as the
 *                              deviation from 1 and (1 + w) is formed in the
 *                              working precision, GemmaRMSNorm.forward)
 *   y[n,d]  = x[n,d] / sqrt(ms + eps) * s_d
 * T5's T5LayerNorm is the offset-0 form (its variance is mean(x^2), "without
 * mean subtraction"; eps 1e-6 in its configs).  eps inside the square root.
 * y, x: (N, D); y may alias x.  w: (D).
 * Preconditions: D >= 1, eps >= 0, offset 0 or 1; a zero row with eps = 0
 * divides 0 by 0.  Never fails. */
void refenc_rmsnorm_forward(double *y, const double *x, const double *w,
                            size_t N, size_t D, double eps, int offset);

/* Backward (docs/gradients.md).  With r = sqrt(ms + eps), x^ = x / r,
 * g = dy * s (s as the forward):
 *   dx[n,d]  = (g[n,d] - x^[n,d] mean_d (g x^)[n,:]) / r_n
 *   dw[d]   += sum_n dy[n,d] x^[n,d]          accumulated (+=); the same for
 *                                             both offsets (d(1 + w)/dw = 1)
 * dx: (N, D), written; it may alias dy, not x.  Never fails. */
void refenc_rmsnorm_backward(double *dx, double *dw, const double *dy, const double *x,
                             const double *w, size_t N, size_t D, double eps, int offset);

#endif
