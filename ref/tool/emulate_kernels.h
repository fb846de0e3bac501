/* The kernels of the emulation (emulate.h): emulate_kernels.c defines them,
 * emulate.c runs a case on them.  Each is the reference kernel of the same
 * name (ref/<name>.c) with an explicit rounding after every operation:
 *   emu_v  the output of an op (a tensor an implementation stores): value format
 *   emu_m  a step inside one kernel: value format, or acc when fused
 *   emu_a  an accumulation or a statistic: acc format
 * Shapes and preconditions are the reference's. */
#ifndef REFENC_EMULATE_KERNELS_H
#define REFENC_EMULATE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/config.h"
#include "../core/options.h"
#include "precision.h"

static inline double emu_v(const refenc_emulation *e, double x)
{
    return refenc_round(e->value, x);
}

static inline double emu_m(const refenc_emulation *e, double x)
{
    return refenc_round(e->fused ? e->acc : e->value, x);
}

static inline double emu_a(const refenc_emulation *e, double x)
{
    return refenc_round(e->acc, x);
}

/* y (N, out) = x (N, in) W^T + b */
void emu_linear(const refenc_emulation *e, double *y, const double *x, const double *W, const double *b,
                size_t N, size_t in, size_t out);

/* y = a + b, n values (a residual connection) */
void emu_add(const refenc_emulation *e, double *y, const double *a, const double *b, size_t n);

/* LayerNorm over the last axis of x (N, D), biased variance */
void emu_layernorm(const refenc_emulation *e, double *y, const double *x, const double *gamma,
                   const double *beta, size_t N, size_t D, double eps);

/* RMSNorm over the last axis of x (N, D), no mean, no bias, in each
 * family's rounding order: the sum of squares in the accumulation format;
 * then w (Llama, T5: LlamaRMSNorm, T5LayerNorm) times z = x / rms rounded to
 * the math format, the product rounded in it, or, when offset (Gemma:
 * GemmaRMSNorm, "(x * w).to(float16)"), z and 1 + w in the accumulation
 * format, their product too, and the output rounded once. */
void emu_rmsnorm(const refenc_emulation *e, double *y, const double *x, const double *w, size_t N,
                 size_t D, double eps, int offset);

/* emu_rmsnorm with the weight repeated every Dw values (w[d % Dw]; Dw = D:
 * emu_rmsnorm's) and, when cast_first, Llama's and Qwen's order (HF
 * LlamaRMSNorm, Qwen3RMSNorm: z = x / rms in the math format, cast to the
 * model's format, then z w rounded in it); cast_first needs offset 0. */
void emu_rmsnorm_rows(const refenc_emulation *e, double *y, const double *x, const double *w, size_t N,
                      size_t D, size_t Dw, double eps, int offset, int cast_first);

/* The configured norm (norm_type): emu_layernorm or emu_rmsnorm. */
void emu_norm(const refenc_emulation *e, double *y, const double *x, const double *weight,
              const double *bias, size_t N, size_t D, double eps, const refenc_config *cfg);

/* softmax(s / tau) over the last axis of s (R, n); inner: the weights stay
 * inside a fused attention (rounded with emu_m, not emu_v) */
void emu_softmax(const refenc_emulation *e, double *y, const double *s, size_t R, size_t n, double tau,
                 int inner);

/* scaled dot-product attention per (b, h); weights (B, H, L, L).
 * cap_after_mask: the bug variant softcap_after_mask (variants.h) */
void emu_attention(const refenc_emulation *e, double *out, double *weights, const double *q,
                   const double *k, const double *v, const refenc_attn_options *opt, size_t B, size_t H,
                   size_t L, size_t Dh, int cap_after_mask);

/* the same for R selected query rows (rows.h): q, out (B, H, R, Dh), k, v
 * (B, H, L, Dh), weights (B, H, R, L); rows NULL: R = L */
void emu_attention_rows(const refenc_emulation *e, double *out, double *weights, const double *q,
                        const double *k, const double *v, const int64_t *rows, const refenc_attn_options *opt,
                        size_t B, size_t H, size_t R, size_t L, size_t Dh, int cap_after_mask);

void emu_activation(const refenc_emulation *e, double *y, const double *x, size_t n, refenc_activation act);

/* x (N, L, Dh) rotated at pos */
void emu_rope(const refenc_emulation *e, double *y, const double *x, const int64_t *pos, size_t N, size_t L,
              size_t Dh, double base, refenc_rope_layout layout, const refenc_rope_scaling *sc);
/* Its backward (ref/rope.c): the transpose f R(pos)^T on the rotated part,
 * the forward's tables with sin negated (exact); the rest passes through.
 * dx may alias dy. */
void emu_rope_backward(const refenc_emulation *e, double *dx, const double *dy, const int64_t *pos, size_t N,
                       size_t L, size_t Dh, double base, refenc_rope_layout layout, const refenc_rope_scaling *sc);

/* x (N, Lr, Dh), row l rotated at pos[rows[l]] (rows NULL: Lr = L), the
 * scaling's S from all L positions */
void emu_rope_rows(const refenc_emulation *e, double *y, const double *x, const int64_t *pos,
                   const int64_t *rows, size_t N, size_t Lr, size_t L, size_t Dh, double base,
                   refenc_rope_layout layout, const refenc_rope_scaling *sc);

/* pe (L, D): the sinusoidal table; forward: y = x + PE, (B, L, D) */
void emu_sinusoidal_table(const refenc_emulation *e, double *pe, const int64_t *pos, size_t L, size_t D);
void emu_sinusoidal_forward(const refenc_emulation *e, double *y, const double *x, const int64_t *pos,
                            size_t B, size_t L, size_t D);

/* x (B, L, D) = table[tokens] * s, s the scale formed in double (sqrt(D),
 * or the model's rounded normaliser: refenc_embedding_normalizer) */
void emu_embedding(const refenc_emulation *e, double *x, const int64_t *tokens, const double *table,
                   size_t B, size_t L, size_t D, double s);

/* y = x + table[pos], (B, L, D) */
/* The families' embedding path: rows looked up unscaled, and rows of a table
 * (token types, RoBERTa's positions) added, each sum rounded. */
void emu_embedding_lookup(const refenc_emulation *e, double *x, const int64_t *tokens, const double *table,
                          size_t B, size_t L, size_t D);
void emu_embedding_add(const refenc_emulation *e, double *y, const double *x, const int64_t *ids,
                       const double *table, size_t B, size_t L, size_t D);
void emu_learned_pe(const refenc_emulation *e, double *y, const double *x, const int64_t *pos,
                    const double *table, size_t B, size_t L, size_t D);

/* the H ALiBi slopes; pow2: the bug variant's 2^(-8(h+1)/H) for every H */
void emu_alibi_slopes(const refenc_emulation *e, double *slopes, size_t H, int pow2);

/* the pooled embedding (pooling.h) e (B, D) of y (B, L, D) under mask (B, L,
 * NULL: none), as sentence-transformers computes it in the model's dtype:
 * the masked sum accumulated in the acc format and stored (value), divided
 * by the token count (value); the norm's sum of squares in the acc format,
 * the norm stored (value), each e_d / max(norm, 1e-12) stored (value) */
void emu_pooling(const refenc_emulation *e, double *out, const double *y, const uint8_t *mask, size_t B,
                 size_t L, size_t D, refenc_pooling mode, int normalize);

#endif
