/* RoPE in double (rope.h): pair j of a head vector at position p is rotated by
 * p theta_j, theta_j = base^(-2j/Dh):  (a, b) -> (a cos - b sin, b cos + a sin).
 * HALF pairs (j, j + Dh/2), INTERLEAVED pairs (2j, 2j+1). */
#include "rope.h"

#include <math.h>

double refenc_rope_frequency(size_t j, size_t Dh, double base)
{
    const double e = (double)(2 * j) / (double)Dh; /* one rounding */
    return pow(base, -e);
}

void refenc_rope_forward(double *y, const double *x, const int64_t *pos,
                         size_t N, size_t L, size_t Dh, double base,
                         refenc_rope_layout layout)
{
    const size_t half = Dh / 2;
    for (size_t n = 0; n < N; n++) {
        for (size_t l = 0; l < L; l++) {
            const double *x_nl = x + (n * L + l) * Dh; /* x[n,l,:] */
            double *y_nl = y + (n * L + l) * Dh;       /* y[n,l,:] */
            for (size_t j = 0; j < half; j++) {
                /* the two coordinates of pair j in this layout */
                const size_t ia = layout == REFENC_ROPE_HALF ? j : 2 * j;
                const size_t ib = layout == REFENC_ROPE_HALF ? j + half : 2 * j + 1;
                const double angle = (double)pos[l] * refenc_rope_frequency(j, Dh, base);
                const double c = cos(angle), s = sin(angle);
                const double a = x_nl[ia], b = x_nl[ib]; /* read both before writing: y may alias x */
                y_nl[ia] = a * c - b * s;
                y_nl[ib] = b * c + a * s;
            }
        }
    }
}

/* Backward: R(a) is a rotation, so its Jacobian's transpose is R(-a):
 *   (da, db) = (ga cos + gb sin,  gb cos - ga sin)  for the gradient (ga, gb). */
void refenc_rope_backward(double *dx, const double *dy, const int64_t *pos,
                          size_t N, size_t L, size_t Dh, double base,
                          refenc_rope_layout layout)
{
    const size_t half = Dh / 2;
    for (size_t n = 0; n < N; n++) {
        for (size_t l = 0; l < L; l++) {
            const double *dy_nl = dy + (n * L + l) * Dh; /* dy[n,l,:] */
            double *dx_nl = dx + (n * L + l) * Dh;       /* dx[n,l,:] */
            for (size_t j = 0; j < half; j++) {
                const size_t ia = layout == REFENC_ROPE_HALF ? j : 2 * j;
                const size_t ib = layout == REFENC_ROPE_HALF ? j + half : 2 * j + 1;
                const double angle = (double)pos[l] * refenc_rope_frequency(j, Dh, base);
                const double c = cos(angle), s = sin(angle);
                const double ga = dy_nl[ia], gb = dy_nl[ib]; /* dx may alias dy */
                dx_nl[ia] = ga * c + gb * s;
                dx_nl[ib] = gb * c - ga * s;
            }
        }
    }
}
