/* The configured normalisation (norm.h): norm_type picks the kernel. */
#include "norm.h"

#include "layernorm.h"
#include "rmsnorm.h"

void refenc_norm_forward(double *y, const double *x, const double *weight, const double *bias,
                         size_t N, size_t D, double eps, const refenc_config *cfg)
{
    if (cfg->norm_type == REFENC_NORMTYPE_RMSNORM)
        refenc_rmsnorm_forward(y, x, weight, N, D, eps, cfg->rmsnorm_offset);
    else
        refenc_layernorm_forward(y, x, weight, bias, N, D, eps);
}

void refenc_norm_backward(double *dx, double *dweight, double *dbias, const double *dy,
                          const double *x, const double *weight, size_t N, size_t D, double eps,
                          const refenc_config *cfg)
{
    refenc_norm_backward_k(NULL, dx, dweight, dbias, dy, x, weight, N, D, eps, cfg);
}

void refenc_norm_backward_k(const refenc_backward_kernels *k, double *dx, double *dweight, double *dbias,
                            const double *dy, const double *x, const double *weight, size_t N, size_t D,
                            double eps, const refenc_config *cfg)
{
    if (cfg->norm_type == REFENC_NORMTYPE_RMSNORM)
        refenc_rmsnorm_backward(dx, dweight, dy, x, weight, N, D, eps, cfg->rmsnorm_offset);
    else
        refenc_backward_kernels_or_reference(k)->layernorm(dx, dweight, dbias, dy, x, weight, N, D, eps);
}
