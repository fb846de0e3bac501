/* Softmax with temperature in double (softmax.h):
 *   y_i = exp(s_i/tau - m) / sum_j exp(s_j/tau - m),  m = max_j s_j/tau.
 * -inf entries get exp(-inf) = 0; a row of -inf gets 0; a row with a NaN is NaN. */
#include "softmax.h"

#include <math.h>

void refenc_softmax_forward(double *y, const double *s, size_t R, size_t n, double tau)
{
    for (size_t r = 0; r < R; r++) {
        const double *s_r = s + r * n; /* s[r,:] */
        double *y_r = y + r * n;       /* y[r,:] */

        /* m = max_i z_i, or NaN if some z_i is NaN (z > m is false for a NaN,
         * which would otherwise be skipped, and a row of NaN and -inf taken for
         * a fully masked row): a NaN m makes every weight of the row NaN */
        double m = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            const double z = s_r[i] / tau;
            if (z > m || isnan(z))
                m = z;
        }
        if (m == -INFINITY) { /* every entry masked: the row attends to nothing */
            for (size_t i = 0; i < n; i++)
                y_r[i] = 0.0;
            continue;
        }

        /* exp(z_i - m) <= 1, and exactly 1 at the maximum: sum >= 1 */
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            y_r[i] = exp(s_r[i] / tau - m); /* exp(-inf) = 0 for masked entries */
            sum += y_r[i];
        }
        for (size_t i = 0; i < n; i++)
            y_r[i] = y_r[i] / sum;
    }
}

/* Backward of y = softmax(s/tau):  ds_i = y_i (dy_i - D) / tau,  D = sum_j y_j dy_j.
 * A fully masked row (y all 0) gets ds = 0. */
void refenc_softmax_backward(double *ds, const double *dy, const double *y,
                             size_t R, size_t n, double tau)
{
    for (size_t r = 0; r < R; r++) {
        const double *y_r = y + r * n;   /* y[r,:]  */
        const double *dy_r = dy + r * n; /* dy[r,:] */
        double *ds_r = ds + r * n;       /* ds[r,:] */
        double dot = 0.0;                /* D = sum_j y_j dy_j, read before ds is written */
        for (size_t j = 0; j < n; j++)
            dot += y_r[j] * dy_r[j];
        for (size_t i = 0; i < n; i++)
            ds_r[i] = y_r[i] * (dy_r[i] - dot) / tau;
    }
}
