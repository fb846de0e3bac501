#ifndef REFENC_ROPE_H
#define REFENC_ROPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/rope_scaling.h"

/* Rotary position embedding (RoFormer, Su et al. 2021) on per-head vectors.
 * Pair j (0 <= j < Dh/2) of a vector at position p is rotated by the angle
 * p * theta_j, theta_j = base^(-2j/Dh):
 *   (a, b) -> (a cos - b sin,  b cos + a sin)
 * The two layouts differ only in which coordinates form pair j:
 *   REFENC_ROPE_HALF         (j, j + Dh/2)   rotate_half: GPT-NeoX, HF LLaMA
 *   REFENC_ROPE_INTERLEAVED  (2j, 2j + 1)    RoFormer, GPT-J
 * For the same weights they give different results; neither is "the" RoPE.
 * theta_j = pow(base, -fl(2j/Dh)) and the angle fl(p * theta_j) are computed
 * as for the sinusoidal PE (sinusoidal.h), with the same accuracy: the
 * angle's absolute error grows as about (ln(base) + 3) u * p * theta_j. */

/* theta_j = base^(-2j/Dh).  Precondition: Dh even, j < Dh/2. */
double refenc_rope_frequency(size_t j, size_t Dh, double base);

/* y, x: (N, L, Dh)   pos: (L).
 * y[n,l,:] = R(pos[l]) x[n,l,:]   (y may alias x).
 * Each output is a cos + b sin with one rounding per operation: error
 * <= 3u (|a| + |b|) on top of the error of cos and sin.
 * Preconditions: Dh even, base > 1.  Never fails. */
void refenc_rope_forward(double *y, const double *x, const int64_t *pos,
                         size_t N, size_t L, size_t Dh, double base,
                         refenc_rope_layout layout);

/* Backward (docs/gradients.md): the rotation by -theta, R(pos)^T = R(-pos):
 *   dx[n,l,:] = R(pos[l])^T dy[n,l,:],  pair (ga, gb) -> (ga cos + gb sin, gb cos - ga sin)
 * with the forward's angles (same arithmetic).  No parameters.  dx, dy:
 * (N, L, Dh); dx is written and may alias dy.  Never fails. */
void refenc_rope_backward(double *dx, const double *dy, const int64_t *pos,
                          size_t N, size_t L, size_t Dh, double base,
                          refenc_rope_layout layout);

/* As refenc_rope_forward and _backward with a RoPE scaling sc (NULL: none,
 * the functions above): theta_j = refenc_rope_scaled_frequency(j, R, base,
 * sc, S) with R = rotary_dim and S = max(pos) + 1 (rope_scaling.h); cos and
 * sin are multiplied by refenc_rope_attention_factor(sc) before the rotation
 * (as Hugging Face multiplies its cos/sin tables), so the backward is
 * f R(pos)^T dy; coordinates R .. Dh-1 pass through (partial rotary).
 * Preconditions: sc valid for Dh.  Never fails. */
void refenc_rope_scaled_forward(double *y, const double *x, const int64_t *pos,
                                size_t N, size_t L, size_t Dh, double base,
                                refenc_rope_layout layout, const refenc_rope_scaling *sc);
void refenc_rope_scaled_backward(double *dx, const double *dy, const int64_t *pos,
                                 size_t N, size_t L, size_t Dh, double base,
                                 refenc_rope_layout layout, const refenc_rope_scaling *sc);

/* refenc_rope_scaled_forward on R selected rows (rows.h): y, x (N, R, Dh),
 * row k at position pos[rows[k]] (rows NULL: R = L, row k at pos[k]); S =
 * max(pos) + 1 over all L positions, as the full run reads it, so each row
 * is rotated by the same operations as the full run's.  Never fails. */
void refenc_rope_rows_forward(double *y, const double *x, const int64_t *pos, const int64_t *rows,
                              size_t N, size_t R, size_t L, size_t Dh, double base,
                              refenc_rope_layout layout, const refenc_rope_scaling *sc);

#endif
