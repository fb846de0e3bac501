#ifndef REFENC_SINUSOIDAL_H
#define REFENC_SINUSOIDAL_H

#include <stddef.h>
#include <stdint.h>

/* Sinusoidal positional encoding, interleaved as in "Attention Is All You
 * Need" 3.5:
 *   PE[pos, 2i]   = sin(pos * w_i)
 *   PE[pos, 2i+1] = cos(pos * w_i),      w_i = 10000^(-2i/D),  0 <= i < D/2.
 *
 * How it is computed in double, and what that costs (docs/architecture.md):
 *   e_i   = fl(2i / D)              one rounding: relative error <= u
 *   w_i   = pow(10000.0, -e_i)      the rounded exponent moves w_i by a factor
 *                                   exp(-ln(10^4) e_i d), |d| <= u, i.e. a
 *                                   relative error <= 9.22 u; pow adds < 1 ulp
 *   a     = fl((double)pos * w_i)   pos is exact (|pos| < 2^53); one rounding
 *   sin(a), cos(a)                  libm, < 1 ulp each
 * The angle's relative error is at most about 12.3 u, so its absolute error
 * grows linearly with the position: about 12.3 u * pos * w_i, i.e. up to
 * 1.1e-11 rad at pos = 8191 where w_i is near 1 (i = 0 is exact: w_0 = 1).
 * The PE values inherit that absolute error.  In float32 the same angle is
 * off by about pos * 2^-24, 5e-4 at pos = 8191.
 * u = 2^-53 throughout. */

/* w_i = 10000^(-2i/D), as above.  Precondition: D >= 2 even, i < D/2. */
double refenc_sinusoidal_frequency(size_t i, size_t D);

/* The angle pos * w_i, as above. */
double refenc_sinusoidal_angle(int64_t pos, size_t i, size_t D);

/* pe: (L, D)   pos: (L) positions.
 * pe[l,:] = PE[pos[l], :].  Precondition: D even.  Never fails. */
void refenc_sinusoidal_table(double *pe, const int64_t *pos, size_t L, size_t D);

/* y, x: (B, L, D)   pos: (L).
 * y[b,l,:] = x[b,l,:] + PE[pos[l], :]   (y may alias x).
 * Each element is one rounded addition of the table value above.
 * Precondition: D even.  Never fails. */
void refenc_sinusoidal_forward(double *y, const double *x, const int64_t *pos,
                               size_t B, size_t L, size_t D);

/* Backward: PE has no parameters and is added, so dx = dy (the identity;
 * refenc_encoder_backward passes the gradient through unchanged and there
 * is no function to call).  docs/gradients.md. */

#endif
