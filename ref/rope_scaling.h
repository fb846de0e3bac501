#ifndef REFENC_ROPE_SCALING_H
#define REFENC_ROPE_SCALING_H

#include <stddef.h>
#include <stdint.h>

#include "core/rope_scaling.h"

/* The scaled RoPE frequencies and attention factor, in double, as Hugging
 * Face's modeling_rope_utils.py defines them (docs/rope-scaling.md).
 * R = rotary_dim, j < R/2, theta_j = base^(-2j/R), s = factor:
 *   linear    theta_j / s
 *   dynamic   base' = base (s S/L0 - (s - 1))^(R/(R-2)) when S > L0, else base;
 *             theta_j = base'^(-2j/R)   (S: the sequence length, L0:
 *             max_position_embeddings)
 *   yarn      ramp r_j = clamp((j - lo) / (hi - lo), 0, 1) with
 *             lo, hi = [floor, ceil] of R ln(L0 / (beta 2 pi)) / (2 ln base)
 *             for beta = beta_fast, beta_slow, clamped to [0, R-1]  (L0:
 *             original_max_position_embeddings);
 *             theta_j (1 - r_j) + theta_j / s r_j
 *   llama3    wavelength w_j = 2 pi / theta_j;  w_j < L0 / high_freq_factor:
 *             theta_j; w_j > L0 / low_freq_factor: theta_j / s; between:
 *             (1 - m) theta_j / s + m theta_j, m = (L0 / w_j - low) / (high - low)
 *   longrope  theta_j / ext_j, ext = long_factor when S > L0, short_factor
 *             otherwise
 *   ntk       GTE's fixed NTK (Alibaba-NLP/new-impl NTKScalingRotaryEmbedding,
 *             kexue.fm/archives/9706), at every length:
 *             (base s)^(-2j/R) / s^(2/R);  with mixed_b = b:
 *             theta_j / exp(a (j + 1)^b), a = ln(s) / (R/2)^b
 * Every operation is rounded once in double; the oracle's twin
 * (ref/oracle/rope_scaling.c) evaluates the same formulas exactly. */

/* S as Hugging Face's dynamic_rope_update reads it: max(pos) + 1.  pos: (L). */
int64_t refenc_rope_seq_len(const int64_t *pos, size_t L);

/* The base theta_j is a power of: dynamic's base' at length S (S > L0),
 * base otherwise.  Preconditions: s NULL or valid, R the rotary dim. */
double refenc_rope_scaled_base(double base, size_t R, const refenc_rope_scaling *s, int64_t S);

/* theta_j for pair j < R/2 with the scaling s (NULL: none) at length S.
 * Preconditions: s valid (rope_scaling.h), R the rotary dim of s. */
double refenc_rope_scaled_frequency(size_t j, size_t R, double base, const refenc_rope_scaling *s,
                                    int64_t S);

/* The factor cos and sin are multiplied by: yarn: attention_factor or
 * 0.1 ln(s) + 1 (the ratio of the mscale, mscale_all_dim ones when both are
 * set); longrope: attention_factor or sqrt(1 + ln(s) / ln(L0)); 1 otherwise. */
double refenc_rope_attention_factor(const refenc_rope_scaling *s);

#endif
