#ifndef REFENC_ATTENTION_H
#define REFENC_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "core/options.h"

/* The scores' divisor sqrt(S) tau, S = score_scalar (Gemma's
 * query_pre_attn_scalar) or Dh, formed in double: two roundings.  The
 * forward, the backward and the low-precision emulation all divide by it. */
double refenc_attention_divisor(const refenc_attn_options *opt, size_t Dh);

/* The score s[i,j] of head h of H before any mask, as the forward forms it:
 * q_i . k_j (Dh) / divisor, capped, plus ALiBi, T5's bias and attn_mask.
 * (A named backward bug recomputes masked scores with it:
 * tool/backward_bugs.c.)  Never fails. */
double refenc_attention_score(const refenc_attn_options *opt, const double *q_i, const double *k_j, size_t h,
                              size_t H, size_t i, size_t j, size_t L, size_t Dh);

/* Scaled dot-product attention over B*H independent heads.
 * out: (B, H, L, Dh)   weights: (B, H, L, L)   q, k, v: (B, H, L, Dh)
 *
 *   s[i,j] = c((q_i . k_j) / (sqrt(S) tau))  +  alibi[h,i,j]  +  t5[h,i,j]  +  attn_mask[i,j]
 *   S = opt->score_scalar (Gemma's query_pre_attn_scalar) if > 0, else Dh;
 *   c(s) = cap tanh(s / cap) when opt->softcap = cap > 0 (softcap.h), else s
 *   s[i,j] = M      where key j is padding, or j > i with the causal mask, or
 *                   outside opt's window (window.h: sliding_window, local_attention):
 *                   M = -inf (mask_value "-inf", the default), or
 *                   M = -DBL_MAX (mask_value "finfo_min", torch.finfo(float64).min)
 *   weights[i,:] = softmax(s[i,:])          (softmax.h, tau already applied)
 *   out[i,:] = sum_j weights[i,j] v_j
 *
 * The divisor sqrt(S) tau is formed once (two roundings) and each score is
 * one division of the dot product (accumulated j = 0 upward) by it; the cap
 * comes before ALiBi, the additive mask and the masks, as in Gemma 2.
 * alibi[h,i,j] = -m_h |pos_i - pos_j| (alibi.h), added after the scaling;
 * t5[h,i,j] = opt->relative_bias[bucket(pos_j - pos_i), h] (relative_bias.h),
 * added after ALiBi (never both: the config refuses it), then attn_mask.
 * Masked-row policy: a query whose every score is -inf (every key masked
 * with M = -inf, or an attn_mask row of -inf) gets weights all 0 and output
 * 0: finite and deterministic.  With M = -DBL_MAX a row that sees some key
 * gives its masked keys exp(-DBL_MAX - max) = 0, exactly the -inf weights;
 * a row whose every key is masked has every score -DBL_MAX (the masked
 * score replaces the sum, as torch.where does) and gets uniform weights 1/L:
 * the mean of v over all L keys, as HF models compute it.  Either way those
 * rows are don't-care in golden files (docs/golden-format.md).
 * out must not alias q, k or v.  Preconditions: tau > 0; attn_mask has no
 * NaN and no +inf (refenc_encoder_forward checks it).  Never fails. */
void refenc_attention_forward(double *out, double *weights,
                              const double *q, const double *k, const double *v,
                              const refenc_attn_options *opt,
                              size_t B, size_t H, size_t L, size_t Dh);

/* The same for R selected query rows (rows.h) against all L keys:
 * q, out: (B, H, R, Dh)   k, v: (B, H, L, Dh)   weights: (B, H, R, L)
 * rows: (R) increasing in [0, L), the position index i of each query row
 * (the causal mask, the windows, ALiBi, T5's bias and attn_mask[i, :]
 * read it); NULL: R = L, row r is position r (refenc_attention_forward).
 * Each selected row's scores, weights and output are computed by the same
 * operations as the full run's row i.  Never fails. */
void refenc_attention_rows_forward(double *out, double *weights,
                                   const double *q, const double *k, const double *v,
                                   const int64_t *rows, const refenc_attn_options *opt,
                                   size_t B, size_t H, size_t R, size_t L, size_t Dh);

/* Backward (docs/gradients.md), FlashAttention's formulation.
 * dout: (B, H, L, Dh), the gradient with respect to out.  Saved from the
 * forward: q, k, v (as the forward read them, RoPE applied), weights P and
 * out O.  Per head, with divisor = sqrt(S) tau formed as the forward does:
 *   dv_j  = sum_i P_ij dO_i                        dv: (B, H, L, Dh)
 *   dP_ij = dO_i . v_j                             dP: (B, H, L, L)
 *   D_i   = dO_i . O_i   (= sum_j P_ij dP_ij)      Drow: (B, H, L)
 *   dS_ij = P_ij (dP_ij - D_i)                     dS: (B, H, L, L), the
 *           gradient of the scores (after ALiBi and attn_mask, which are
 *           constants: no gradient flows to them)
 *   dq_i  = sum_j dS_ij k_j / divisor,   dk_j = sum_i dS_ij q_i / divisor
 * Masks: a score the key padding or causal mask replaced by M is a constant,
 * so dS_ij = 0 there (also with M = -DBL_MAX in a fully masked row, whose
 * uniform weights are constants); an additive -inf gives P_ij = 0 and so
 * dS_ij = 0.  Masked keys get dk = dv = 0 from every query.  A fully masked
 * row (P = 0, O = 0 under M = -inf) has D_i = 0 and contributes nothing.
 * Every output is written.  None may alias an input.
 * Precondition: no softcap and no window (opt->softcap, opt->sliding_window
 * and opt->local_attention 0: neither is applied here;
 * the backward's callers refuse it, docs/gradients.md).  Never fails. */
void refenc_attention_backward(double *dq, double *dk, double *dv,
                               double *dP, double *dS, double *Drow,
                               const double *dout, const double *q, const double *k,
                               const double *v, const double *weights, const double *out,
                               const refenc_attn_options *opt,
                               size_t B, size_t H, size_t L, size_t Dh);

#endif
