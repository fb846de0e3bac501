/* LayerNorm in double (layernorm.h):
 *   mu = sum_d x_d / D,   var = sum_d (x_d - mu)^2 / D,
 *   y_d = (x_d - mu) / sqrt(var + eps) * gamma_d + beta_d. */
#include "layernorm.h"

#include <math.h>

void refenc_layernorm_forward(double *y, const double *x,
                              const double *gamma, const double *beta,
                              size_t N, size_t D, double eps)
{
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D; /* x[n,:] */
        double *y_n = y + n * D;       /* y[n,:] */

        double sum = 0.0;
        for (size_t d = 0; d < D; d++)
            sum += x_n[d];
        const double mu = sum / (double)D;

        double ss = 0.0;
        for (size_t d = 0; d < D; d++) {
            const double dev = x_n[d] - mu;
            ss += dev * dev;
        }
        const double var = ss / (double)D; /* biased */
        const double sd = sqrt(var + eps);

        for (size_t d = 0; d < D; d++)
            y_n[d] = (x_n[d] - mu) / sd * gamma[d] + beta[d];
    }
}
