/* Scaled dot-product attention in double (attention.h):
 *   s[i,j] = c((q_i . k_j) / (sqrt(S) tau)) - m_h |pos_i - pos_j| + t5[h,i,j] + attn_mask[i,j]
 *            S = score_scalar or Dh;  c(s) = cap tanh(s / cap) with a softcap,
 *            else s
 *   s[i,j] = M where key j is padding, or j > i under the causal mask, or
 *            outside a window (window.h),
 *            M = -inf or -DBL_MAX (mask_value)
 *   weights[i,:] = softmax(s[i,:]);  out_i = sum_j weights[i,j] v_j
 * A query whose every score is -inf gets weights 0 and output 0; with
 * M = -DBL_MAX a query whose every key is masked gets weights 1/L.
 * Backward (below): dS_ij = P_ij (dO_i . v_j - D_i), D_i = dO_i . O_i, 0 where
 * the mask replaced the score; dq = dS k / divisor, dk = dS^T q / divisor,
 * dv = P^T dO. */
#include "attention.h"

#include <float.h>
#include <math.h>

#include "alibi.h"
#include "relative_bias.h"
#include "softcap.h"
#include "window.h"
#include "rows.h"
#include "softmax.h"

double refenc_attention_divisor(const refenc_attn_options *opt, size_t Dh)
{
    const double S = opt->score_scalar > 0 ? opt->score_scalar : (double)Dh;
    return sqrt(S) * opt->temperature;
}

/* The score s[i,j] of head h, q_i . k_j (Dh) unmasked: the scaled dot
 * product, capped, plus ALiBi, T5's bias and attn_mask, in that order. */
static double score(const refenc_attn_options *opt, const double *q_i, const double *k_j, size_t h, size_t H,
                    size_t i, size_t j, size_t L, size_t Dh, double divisor)
{
    double dot = 0.0;
    for (size_t d = 0; d < Dh; d++)
        dot += q_i[d] * k_j[d];
    double s = dot / divisor;
    if (opt->softcap > 0) /* Gemma 2: capped before any bias or mask */
        s = refenc_softcap(s, opt->softcap);
    if (opt->alibi_slopes != NULL)
        s += refenc_alibi_bias(opt->alibi_slopes[h], opt->positions[i], opt->positions[j]);
    if (opt->relative_bias != NULL) /* T5: with the mask (HF adds them first) */
        s += refenc_relative_bias(opt->relative_bias, H, h, opt->positions[i], opt->positions[j],
                                  opt->relative_num_buckets, opt->relative_max_distance, opt->relative_unclamped);
    if (opt->attn_mask != NULL)
        s += opt->attn_mask[i * L + j];
    return s;
}

double refenc_attention_score(const refenc_attn_options *opt, const double *q_i, const double *k_j, size_t h,
                              size_t H, size_t i, size_t j, size_t L, size_t Dh)
{
    return score(opt, q_i, k_j, h, H, i, j, L, Dh, refenc_attention_divisor(opt, Dh));
}

void refenc_attention_forward(double *out, double *weights,
                              const double *q, const double *k, const double *v,
                              const refenc_attn_options *opt,
                              size_t B, size_t H, size_t L, size_t Dh)
{
    refenc_attention_rows_forward(out, weights, q, k, v, NULL, opt, B, H, L, L, Dh);
}

void refenc_attention_rows_forward(double *out, double *weights,
                                   const double *q, const double *k, const double *v,
                                   const int64_t *rows, const refenc_attn_options *opt,
                                   size_t B, size_t H, size_t R, size_t L, size_t Dh)
{
    const double divisor = refenc_attention_divisor(opt, Dh);
    const double masked = opt->mask_value == REFENC_MASK_FINFO_MIN ? -DBL_MAX : -INFINITY;

    for (size_t b = 0; b < B; b++) {
        const uint8_t *pad_b = opt->key_padding_mask ? opt->key_padding_mask + b * L : NULL;
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h;
            const double *q_bh = q + bh * R * Dh;   /* q[b,h,:,:] (R, Dh) */
            const double *k_bh = k + bh * L * Dh;   /* k[b,h,:,:] (L, Dh) */
            const double *v_bh = v + bh * L * Dh;   /* v[b,h,:,:] */
            double *w_bh = weights + bh * R * L;    /* weights[b,h,:,:] (R, L) */
            double *o_bh = out + bh * R * Dh;       /* out[b,h,:,:] (R, Dh) */

            /* scores, written into the weights buffer; query row r is
             * position index i = rows[r] (r without rows) */
            for (size_t r = 0; r < R; r++) {
                const size_t i = refenc_rows_index(rows, r);
                double *s_i = w_bh + r * L;
                for (size_t j = 0; j < L; j++) {
                    const int out_of_sight = (pad_b != NULL && pad_b[j]) || (opt->causal && j > i) ||
                                             refenc_window_excludes(opt->sliding_window, opt->local_attention, i, j);
                    s_i[j] = out_of_sight ? masked : score(opt, q_bh + r * Dh, k_bh + j * Dh, h, H, i, j, L, Dh, divisor);
                }
            }

            /* weights = softmax over keys; rows of -inf become all 0 */
            refenc_softmax_forward(w_bh, w_bh, R, L, 1.0);

            /* out[r,:] = sum_j weights[r,j] v[j,:] */
            for (size_t r = 0; r < R; r++) {
                const double *w_r = w_bh + r * L;
                double *o_r = o_bh + r * Dh;
                for (size_t d = 0; d < Dh; d++) {
                    double acc = 0.0;
                    for (size_t j = 0; j < L; j++)
                        acc += w_r[j] * v_bh[j * Dh + d];
                    o_r[d] = acc;
                }
            }
        }
    }
}

/* Backward of one head (b, h); the slices are (L, Dh) and (L, L):
 *   dv_j = sum_i P_ij dO_i;   dP_ij = dO_i . v_j;   D_i = dO_i . O_i
 *   dS_ij = P_ij (dP_ij - D_i), 0 where the mask replaced the score
 *   dq_i = sum_j dS_ij k_j / divisor;   dk_j = sum_i dS_ij q_i / divisor */
static void head_backward(double *dq, double *dk, double *dv, double *dP, double *dS,
                          double *Drow, const double *dO, const double *q, const double *k,
                          const double *v, const double *P, const double *O,
                          const uint8_t *pad, int causal, size_t L, size_t Dh, double divisor)
{
    for (size_t i = 0; i < L; i++) {
        const double *dO_i = dO + i * Dh;
        double Di = 0.0;
        for (size_t d = 0; d < Dh; d++)
            Di += dO_i[d] * O[i * Dh + d];
        Drow[i] = Di;
        for (size_t j = 0; j < L; j++) {
            double dp = 0.0;
            for (size_t d = 0; d < Dh; d++)
                dp += dO_i[d] * v[j * Dh + d];
            dP[i * L + j] = dp;
            /* a replaced score is the constant M: no gradient reaches q or k */
            const int replaced = (pad != NULL && pad[j]) || (causal && j > i);
            dS[i * L + j] = replaced ? 0.0 : P[i * L + j] * (dp - Di);
        }
    }
    for (size_t j = 0; j < L; j++) {
        for (size_t d = 0; d < Dh; d++) {
            double av = 0.0, ak = 0.0;
            for (size_t i = 0; i < L; i++) {
                av += P[i * L + j] * dO[i * Dh + d];
                ak += dS[i * L + j] * q[i * Dh + d];
            }
            dv[j * Dh + d] = av;
            dk[j * Dh + d] = ak / divisor;
        }
    }
    for (size_t i = 0; i < L; i++) {
        for (size_t d = 0; d < Dh; d++) {
            double aq = 0.0;
            for (size_t j = 0; j < L; j++)
                aq += dS[i * L + j] * k[j * Dh + d];
            dq[i * Dh + d] = aq / divisor;
        }
    }
}

void refenc_attention_backward(double *dq, double *dk, double *dv,
                               double *dP, double *dS, double *Drow,
                               const double *dout, const double *q, const double *k,
                               const double *v, const double *weights, const double *out,
                               const refenc_attn_options *opt,
                               size_t B, size_t H, size_t L, size_t Dh)
{
    const double divisor = refenc_attention_divisor(opt, Dh); /* as the forward */
    for (size_t b = 0; b < B; b++) {
        const uint8_t *pad_b = opt->key_padding_mask ? opt->key_padding_mask + b * L : NULL;
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h, hd = bh * L * Dh, ll = bh * L * L;
            head_backward(dq + hd, dk + hd, dv + hd, dP + ll, dS + ll, Drow + bh * L,
                          dout + hd, q + hd, k + hd, v + hd, weights + ll, out + hd,
                          pad_b, opt->causal, L, Dh, divisor);
        }
    }
}
