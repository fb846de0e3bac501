/* LayerNorm in double (layernorm.h):
 *   mu = sum_d x_d / D,   var = sum_d (x_d - mu)^2 / D,
 *   y_d = (x_d - mu) / sqrt(var + eps) * gamma_d + beta_d   (beta NULL: no bias). */
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

        for (size_t d = 0; d < D; d++) {
            const double t = (x_n[d] - mu) / sd * gamma[d];
            y_n[d] = beta != NULL ? t + beta[d] : t; /* bias-free: no + 0 (it would turn -0 to +0) */
        }
    }
}

/* Backward, per row (x^ = (x - mu)/sd, sd = sqrt(var + eps), g = dy * gamma):
 *   dx_d     = (g_d - mean(g) - x^_d mean(g x^)) / sd
 *   dgamma_d += sum_n dy[n,d] x^[n,d],    dbeta_d += sum_n dy[n,d]
 * mu and sd are recomputed from x exactly as the forward computes them. */
void refenc_layernorm_backward(double *dx, double *dgamma, double *dbeta,
                               const double *dy, const double *x, const double *gamma,
                               size_t N, size_t D, double eps)
{
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D;   /* x[n,:]  */
        const double *dy_n = dy + n * D; /* dy[n,:] */
        double *dx_n = dx + n * D;       /* dx[n,:] */

        double sum = 0.0;
        for (size_t d = 0; d < D; d++)
            sum += x_n[d];
        const double mu = sum / (double)D;
        double ss = 0.0;
        for (size_t d = 0; d < D; d++) {
            const double dev = x_n[d] - mu;
            ss += dev * dev;
        }
        const double sd = sqrt(ss / (double)D + eps);

        /* mean(g) and mean(g x^), read before dx is written: dx may alias dy */
        double sg = 0.0, sgx = 0.0;
        for (size_t d = 0; d < D; d++) {
            const double xhat = (x_n[d] - mu) / sd;
            const double g = dy_n[d] * gamma[d];
            sg += g;
            sgx += g * xhat;
            dgamma[d] += dy_n[d] * xhat;
            if (dbeta != NULL)
                dbeta[d] += dy_n[d];
        }
        const double mg = sg / (double)D, mgx = sgx / (double)D;
        for (size_t d = 0; d < D; d++) {
            const double xhat = (x_n[d] - mu) / sd;
            dx_n[d] = (dy_n[d] * gamma[d] - mg - xhat * mgx) / sd;
        }
    }
}
