#ifndef REFENC_ALIBI_H
#define REFENC_ALIBI_H

#include <stddef.h>
#include <stdint.h>

/* ALiBi (Press et al., "Train Short, Test Long", 2022).
 *
 * Slopes.  For H a power of two, head h (0-based) has
 *     m_h = 2^(-8 (h+1) / H),
 * the geometric sequence starting at and with ratio 2^(-8/H).  Otherwise, with
 * C the largest power of two below H, the first C heads take the slopes for C
 * heads, and the remaining H - C heads take every other slope of the sequence
 * for 2C heads, starting with the first:  m_{C+k} = 2^(-8 (2k+1) / (2C)),
 * k = 0 .. H-C-1 (the paper's get_slopes, and BLOOM's build_alibi_tensor).
 * These extra slopes fall between (interleave with) the first C.
 * The exponent is exact in double (C is a power of two), so each slope is
 * exp2 of an exact argument: < 1 ulp.
 *
 * Bias.  For the encoder (no causality assumed) the bias is symmetric:
 *     bias[h, i, j] = -m_h * |pos_i - pos_j|,
 * added to the scores after the 1/sqrt(Dh) scaling (attention.h).
 *
 * Backward.  ALiBi has no parameters: the bias is a constant added to the
 * scores, so the scores' gradient dS flows to q and k unchanged
 * (refenc_attention_backward) and nothing flows to the slopes
 * (docs/gradients.md). */

/* slopes: (H).  Precondition: H >= 1.  Never fails. */
void refenc_alibi_slopes(double *slopes, size_t H);

/* The bias for one head and one pair of positions, as above (one rounding:
 * |p_i - p_j| is exact below 2^53). */
double refenc_alibi_bias(double slope, int64_t pos_i, int64_t pos_j);

#endif
