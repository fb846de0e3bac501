/* RMSNorm in double (rmsnorm.h):
 *   ms = sum_d x_d^2 / D,   s_d = w_d or fl(1 + w_d),
 *   y_d = x_d / sqrt(ms + eps) * s_d.
 * Backward: dx_d = (g_d - x^_d mean(g x^)) / r, g = dy s, r = sqrt(ms + eps). */
#include "rmsnorm.h"

#include <math.h>

/* sqrt(sum_d x_d^2 / D + eps), summed left to right as the forward's comment says. */
static double rms(const double *x_n, size_t D, double eps)
{
    double ss = 0.0;
    for (size_t d = 0; d < D; d++)
        ss += x_n[d] * x_n[d];
    return sqrt(ss / (double)D + eps);
}

void refenc_rmsnorm_forward(double *y, const double *x, const double *w,
                            size_t N, size_t D, double eps, int offset)
{
    const double one = offset ? 1.0 : 0.0; /* 0 + w_d is w_d exactly */
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D; /* x[n,:] */
        double *y_n = y + n * D;       /* y[n,:] */
        const double r = rms(x_n, D, eps);
        for (size_t d = 0; d < D; d++)
            y_n[d] = x_n[d] / r * (one + w[d]);
    }
}

void refenc_rmsnorm_backward(double *dx, double *dw, const double *dy, const double *x,
                             const double *w, size_t N, size_t D, double eps, int offset)
{
    const double one = offset ? 1.0 : 0.0;
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D;   /* x[n,:]  */
        const double *dy_n = dy + n * D; /* dy[n,:] */
        double *dx_n = dx + n * D;       /* dx[n,:] */
        const double r = rms(x_n, D, eps);

        /* mean(g x^), read before dx is written: dx may alias dy */
        double sgx = 0.0;
        for (size_t d = 0; d < D; d++) {
            const double xhat = x_n[d] / r;
            sgx += dy_n[d] * (one + w[d]) * xhat;
            dw[d] += dy_n[d] * xhat;
        }
        const double mgx = sgx / (double)D;
        for (size_t d = 0; d < D; d++) {
            const double xhat = x_n[d] / r;
            dx_n[d] = (dy_n[d] * (one + w[d]) - xhat * mgx) / r;
        }
    }
}
