#ifndef REFENC_NORM_H
#define REFENC_NORM_H

#include <stddef.h>

#include "backward_kernels.h"
#include "core/config.h"

/* The normalisation the config selects (norm_type), for every norm of the
 * stack: LayerNorm (layernorm.h: weight gamma, bias beta) or RMSNorm
 * (rmsnorm.h: weight w, no bias; bias is ignored and may be NULL; scale
 * (1 + w) when rmsnorm_offset).  Shapes and preconditions as those kernels.
 * Never fails. */
void refenc_norm_forward(double *y, const double *x, const double *weight, const double *bias,
                         size_t N, size_t D, double eps, const refenc_config *cfg);

/* The backward of refenc_norm_forward; dbias is not touched under RMSNorm. */
void refenc_norm_backward(double *dx, double *dweight, double *dbias, const double *dy,
                          const double *x, const double *weight, size_t N, size_t D, double eps,
                          const refenc_config *cfg);

/* The same with the LayerNorm kernel of table k (backward_kernels.h; NULL:
 * the reference's).  RMSNorm has no entry: it is always the reference's. */
void refenc_norm_backward_k(const refenc_backward_kernels *k, double *dx, double *dweight, double *dbias,
                            const double *dy, const double *x, const double *weight, size_t N, size_t D,
                            double eps, const refenc_config *cfg);

#endif
