/* RoPE in double (rope.h): pair j of a head vector at position p is rotated by
 * p theta_j, theta_j = base^(-2j/R):  (a, b) -> (a cos - b sin, b cos + a sin).
 * HALF pairs (j, j + R/2), INTERLEAVED pairs (2j, 2j+1); coordinates from R
 * on pass through.  With scaling, theta_j and the attention factor come from
 * rope_scaling.c and cos and sin are multiplied by that factor (as HF does). */
#include "rope.h"

#include <math.h>
#include <string.h>

#include "rope_scaling.h"
#include "rows.h"

double refenc_rope_frequency(size_t j, size_t Dh, double base)
{
    const double e = (double)(2 * j) / (double)Dh; /* one rounding */
    return pow(base, -e);
}

/* y = f R(+-pos) x on the first R coordinates, x on the rest; sign +1 is the
 * forward rotation, -1 its transpose (the backward).
 * y, x: (N, Lr, Dh), row l at pos[rows[l]] (rows NULL: Lr = L, pos[l]);
 * pos: (L).  y may alias x. */
static void rotate_rows(double *y, const double *x, const int64_t *pos, const int64_t *rows, size_t N,
                        size_t Lr, size_t L, size_t Dh, double base, refenc_rope_layout layout,
                        const refenc_rope_scaling *sc, double sign)
{
    const size_t R = sc != NULL ? refenc_rope_scaling_rotary_dim(sc, Dh) : Dh, half = R / 2;
    const int64_t S = refenc_rope_seq_len(pos, L); /* what dynamic and longrope read: all L */
    const double f = refenc_rope_attention_factor(sc);
    for (size_t n = 0; n < N; n++) {
        for (size_t l = 0; l < Lr; l++) {
            const double *x_nl = x + (n * Lr + l) * Dh; /* x[n,l,:] */
            double *y_nl = y + (n * Lr + l) * Dh;       /* y[n,l,:] */
            const int64_t p = pos[refenc_rows_index(rows, l)]; /* row l's position */
            for (size_t j = 0; j < half; j++) {
                /* the two coordinates of pair j in this layout */
                const size_t ia = layout == REFENC_ROPE_HALF ? j : 2 * j;
                const size_t ib = layout == REFENC_ROPE_HALF ? j + half : 2 * j + 1;
                const double angle = (double)p * refenc_rope_scaled_frequency(j, R, base, sc, S);
                const double c = cos(angle) * f, s = sign * (sin(angle) * f);
                const double a = x_nl[ia], b = x_nl[ib]; /* read both before writing: y may alias x */
                y_nl[ia] = a * c - b * s;
                y_nl[ib] = b * c + a * s;
            }
            if (y_nl != x_nl && R < Dh) /* partial rotary: the rest passes through */
                memcpy(y_nl + R, x_nl + R, (Dh - R) * sizeof *y_nl);
        }
    }
}

static void rotate(double *y, const double *x, const int64_t *pos, size_t N, size_t L, size_t Dh,
                   double base, refenc_rope_layout layout, const refenc_rope_scaling *sc, double sign)
{
    rotate_rows(y, x, pos, NULL, N, L, L, Dh, base, layout, sc, sign);
}

void refenc_rope_rows_forward(double *y, const double *x, const int64_t *pos, const int64_t *rows,
                              size_t N, size_t R, size_t L, size_t Dh, double base,
                              refenc_rope_layout layout, const refenc_rope_scaling *sc)
{
    rotate_rows(y, x, pos, rows, N, R, L, Dh, base, layout, sc, 1.0);
}

void refenc_rope_forward(double *y, const double *x, const int64_t *pos,
                         size_t N, size_t L, size_t Dh, double base,
                         refenc_rope_layout layout)
{
    rotate(y, x, pos, N, L, Dh, base, layout, NULL, 1.0);
}

/* Backward: R(a) is a rotation, so its Jacobian's transpose is R(-a):
 *   (da, db) = (ga cos + gb sin,  gb cos - ga sin)  for the gradient (ga, gb). */
void refenc_rope_backward(double *dx, const double *dy, const int64_t *pos,
                          size_t N, size_t L, size_t Dh, double base,
                          refenc_rope_layout layout)
{
    rotate(dx, dy, pos, N, L, Dh, base, layout, NULL, -1.0);
}

void refenc_rope_scaled_forward(double *y, const double *x, const int64_t *pos,
                                size_t N, size_t L, size_t Dh, double base,
                                refenc_rope_layout layout, const refenc_rope_scaling *sc)
{
    rotate(y, x, pos, N, L, Dh, base, layout, sc, 1.0);
}

/* The factor f scales the Jacobian too: dx = f R(pos)^T dy on the rotated part. */
void refenc_rope_scaled_backward(double *dx, const double *dy, const int64_t *pos,
                                 size_t N, size_t L, size_t Dh, double base,
                                 refenc_rope_layout layout, const refenc_rope_scaling *sc)
{
    rotate(dx, dy, pos, N, L, Dh, base, layout, sc, -1.0);
}
