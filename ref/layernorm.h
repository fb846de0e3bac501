#ifndef REFENC_LAYERNORM_H
#define REFENC_LAYERNORM_H

#include <stddef.h>

/* Layer normalisation over the last axis (Ba et al. 2016; nn.LayerNorm):
 *   mu  = sum_d x[n,d] / D
 *   var = sum_d (x[n,d] - mu)^2 / D          biased: divide by D, not D - 1
 *   y[n,d] = (x[n,d] - mu) / sqrt(var + eps) * gamma[d] + beta[d]
 * Two passes (mean first, then squared deviations) so a large mean does not
 * cancel the variance; eps inside the square root.
 * y, x: (N, D); y may alias x.  gamma, beta: (D); beta NULL: bias-free
 * (ModernBERT's norm_bias=False), y = (x - mu) / sqrt(var + eps) * gamma.
 * Preconditions: D >= 1, eps >= 0; a constant row with eps = 0 divides 0 by 0
 * (refenc_config_validate allows eps = 0 for the user who wants it).
 * Never fails. */
void refenc_layernorm_forward(double *y, const double *x,
                              const double *gamma, const double *beta,
                              size_t N, size_t D, double eps);

/* Backward (docs/gradients.md).  dy: (N, D), the gradient with respect to
 * y; x: (N, D), the forward's input (mu and sd are recomputed from it, with
 * the forward's own arithmetic); with x^ = (x - mu)/sd, g = dy * gamma:
 *   dx[n,d]    = (g[n,d] - mean_d g[n,:] - x^[n,d] mean_d (g x^)[n,:]) / sd_n
 *                (biased variance, as the forward: the D in the means is D)
 *   dgamma[d] += sum_n dy[n,d] x^[n,d]       accumulated (+=)
 *   dbeta[d]  += sum_n dy[n,d]               accumulated (+=); dbeta NULL: none
 * Each row of dx sums to zero and is orthogonal to x^ (exactly; in double
 * within rounding).  dx: (N, D), written; it may alias dy, not x.
 * Preconditions as the forward.  Never fails. */
void refenc_layernorm_backward(double *dx, double *dgamma, double *dbeta,
                               const double *dy, const double *x, const double *gamma,
                               size_t N, size_t D, double eps);

#endif
