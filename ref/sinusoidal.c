/* Sinusoidal PE in double (sinusoidal.h):
 *   PE[pos, 2i] = sin(pos w_i),  PE[pos, 2i+1] = cos(pos w_i),  w_i = 10000^(-2i/D). */
#include "sinusoidal.h"

#include <math.h>

double refenc_sinusoidal_frequency(size_t i, size_t D)
{
    /* w_i = 10000^(-2i/D): the exponent 2i/D is rounded once; see the header
     * for what that costs. */
    const double e = (double)(2 * i) / (double)D;
    return pow(10000.0, -e);
}

double refenc_sinusoidal_angle(int64_t pos, size_t i, size_t D)
{
    return (double)pos * refenc_sinusoidal_frequency(i, D);
}

void refenc_sinusoidal_table(double *pe, const int64_t *pos, size_t L, size_t D)
{
    for (size_t l = 0; l < L; l++) {
        double *pe_l = pe + l * D; /* pe[l,:] */
        for (size_t i = 0; i < D / 2; i++) {
            const double a = refenc_sinusoidal_angle(pos[l], i, D);
            pe_l[2 * i] = sin(a);
            pe_l[2 * i + 1] = cos(a);
        }
    }
}

void refenc_sinusoidal_forward(double *y, const double *x, const int64_t *pos,
                               size_t B, size_t L, size_t D)
{
    for (size_t b = 0; b < B; b++) {
        for (size_t l = 0; l < L; l++) {
            const double *x_bl = x + (b * L + l) * D; /* x[b,l,:] */
            double *y_bl = y + (b * L + l) * D;       /* y[b,l,:] */
            for (size_t i = 0; i < D / 2; i++) {
                const double a = refenc_sinusoidal_angle(pos[l], i, D);
                y_bl[2 * i] = x_bl[2 * i] + sin(a);
                y_bl[2 * i + 1] = x_bl[2 * i + 1] + cos(a);
            }
        }
    }
}
