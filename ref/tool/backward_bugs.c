/* The named backward bugs' kernels (backward_bugs.h). */
#include "backward_bugs.h"

#include <math.h>

#include "../activation.h"
#include "../attention.h"
#include "../embedding.h"
#include "../layernorm.h"
#include "../linear.h"
#include "../rope.h"

/* ---- LayerNorm: the projection's terms ----------------------------------------
 * The reference: dx = (g - mean(g) - x^ mean(g x^)) / sd, g = dy gamma.
 * With the mean term subtracted twice, dx - mean(g)/sd; without it,
 * dx + mean(g)/sd; without the variance term, dx + x^ mean(g x^)/sd
 * (tt-metal#53204: the first, "loss still decreases").  Row by row: the
 * row's means are taken from dy before the reference's kernel overwrites it
 * (dx may alias dy), and the reference's kernel on one row at a time
 * accumulates dgamma and dbeta in the same order as on all N. */
static void layernorm_terms(double c_mean, double c_var, double *dx, double *dgamma, double *dbeta,
                            const double *dy, const double *x, const double *gamma, size_t N, size_t D,
                            double eps)
{
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D, *dy_n = dy + n * D; /* x[n,:], dy[n,:] */
        double *dx_n = dx + n * D;
        double mu = 0.0, ss = 0.0, sg = 0.0, sgx = 0.0;
        for (size_t d = 0; d < D; d++)
            mu += x_n[d];
        mu /= (double)D;
        for (size_t d = 0; d < D; d++)
            ss += (x_n[d] - mu) * (x_n[d] - mu);
        const double sd = sqrt(ss / (double)D + eps);
        for (size_t d = 0; d < D; d++) {
            const double g = dy_n[d] * gamma[d];
            sg += g;
            sgx += g * ((x_n[d] - mu) / sd);
        }
        const double mg = sg / (double)D, mgx = sgx / (double)D;
        refenc_layernorm_backward(dx_n, dgamma, dbeta, dy_n, x_n, gamma, 1, D, eps);
        for (size_t d = 0; d < D; d++)
            dx_n[d] += (c_mean * mg + c_var * ((x_n[d] - mu) / sd) * mgx) / sd;
    }
}

#define LN_BUG(name, c_mean, c_var)                                                                        \
    static void name(double *dx, double *dgamma, double *dbeta, const double *dy, const double *x,          \
                     const double *gamma, size_t N, size_t D, double eps)                                   \
    {                                                                                                      \
        layernorm_terms(c_mean, c_var, dx, dgamma, dbeta, dy, x, gamma, N, D, eps);                         \
    }
LN_BUG(layernorm_mean_twice, -1.0, 0.0)
LN_BUG(layernorm_mean_missing, 1.0, 0.0)
LN_BUG(layernorm_variance_missing, 0.0, 1.0)

/* ---- attention: the scale and the row term D_i ----------------------------------
 * The reference: dq_i = sum_j dS_ij k_j / divisor, dk_j = sum_i dS_ij q_i /
 * divisor, dS_ij = P_ij (dP_ij - D_i).  Without the scale dq and dk are
 * divisor times too large; with it twice, divisor times too small. */
static void scale_dq_dk(double *dq, double *dk, double f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dq[i] *= f;
        dk[i] *= f;
    }
}

static void attention_unscaled(double *dq, double *dk, double *dv, double *dP, double *dS, double *Drow,
                               const double *dout, const double *q, const double *k, const double *v,
                               const double *weights, const double *out, const refenc_attn_options *opt,
                               size_t B, size_t H, size_t L, size_t Dh)
{
    refenc_attention_backward(dq, dk, dv, dP, dS, Drow, dout, q, k, v, weights, out, opt, B, H, L, Dh);
    scale_dq_dk(dq, dk, refenc_attention_divisor(opt, Dh), B * H * L * Dh);
}

static void attention_scaled_twice(double *dq, double *dk, double *dv, double *dP, double *dS, double *Drow,
                                   const double *dout, const double *q, const double *k, const double *v,
                                   const double *weights, const double *out, const refenc_attn_options *opt,
                                   size_t B, size_t H, size_t L, size_t Dh)
{
    refenc_attention_backward(dq, dk, dv, dP, dS, Drow, dout, q, k, v, weights, out, opt, B, H, L, Dh);
    scale_dq_dk(dq, dk, 1.0 / refenc_attention_divisor(opt, Dh), B * H * L * Dh);
}

/* dq_i = sum_j dS_ij k_j / divisor, dk_i = sum_j dS_ji q_j / divisor, per
 * head: the reference's last step, from a dS a bug changed. */
static void dq_dk_from_ds(double *dq, double *dk, const double *dS, const double *q, const double *k, size_t BH,
                          size_t L, size_t Dh, double divisor)
{
    for (size_t bh = 0; bh < BH; bh++) {
        const size_t hd = bh * L * Dh, ll = bh * L * L;
        for (size_t i = 0; i < L; i++)
            for (size_t d = 0; d < Dh; d++) {
                double aq = 0.0, ak = 0.0;
                for (size_t j = 0; j < L; j++) {
                    aq += dS[ll + i * L + j] * k[hd + j * Dh + d];
                    ak += dS[ll + j * L + i] * q[hd + j * Dh + d];
                }
                dq[hd + i * Dh + d] = aq / divisor;
                dk[hd + i * Dh + d] = ak / divisor;
            }
    }
}

/* Softmax's backward without the row term: dS_ij = P_ij dP_ij, the
 * reference's dS plus P_ij D_i where the score was not replaced (a replaced
 * score is a constant either way), then dq and dk from it as the reference
 * forms them.  dv does not read dS: unchanged (FlashAttention#2481: a
 * corrupted row term moved dQ and dK, not dV). */
static void attention_without_rowsum(double *dq, double *dk, double *dv, double *dP, double *dS, double *Drow,
                                     const double *dout, const double *q, const double *k, const double *v,
                                     const double *weights, const double *out, const refenc_attn_options *opt,
                                     size_t B, size_t H, size_t L, size_t Dh)
{
    refenc_attention_backward(dq, dk, dv, dP, dS, Drow, dout, q, k, v, weights, out, opt, B, H, L, Dh);
    const double divisor = refenc_attention_divisor(opt, Dh);
    for (size_t bh = 0; bh < B * H; bh++) {
        const uint8_t *pad = opt->key_padding_mask ? opt->key_padding_mask + (bh / H) * L : NULL;
        const size_t ll = bh * L * L;
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < L; j++) {
                const int replaced = (pad != NULL && pad[j]) || (opt->causal && j > i);
                if (!replaced)
                    dS[ll + i * L + j] += weights[ll + i * L + j] * Drow[bh * L + i];
            }
    }
    dq_dk_from_ds(dq, dk, dS, q, k, B * H, L, Dh, divisor);
}

/* dK from the unmasked scores: a backward that recomputes the weights from
 * the scores and the forward's normaliser (FlashAttention's P = exp(S -
 * LSE)) without the key padding mask.  A padded key j then gets
 * P'_ij = P_ij0 exp(s_ij - s_ij0) (j0 the row's largest weight, so the
 * forward's normaliser), dS'_ij = P'_ij (dP_ij - D_i), dV_j += sum_i P'_ij
 * dO_i, and dq, dk from dS': masked keys get gradient.  Rows whose every
 * key is padded have no normaliser to reuse: left as they are. */
static void attention_unmasked(double *dq, double *dk, double *dv, double *dP, double *dS, double *Drow,
                               const double *dout, const double *q, const double *k, const double *v,
                               const double *weights, const double *out, const refenc_attn_options *opt,
                               size_t B, size_t H, size_t L, size_t Dh)
{
    refenc_attention_backward(dq, dk, dv, dP, dS, Drow, dout, q, k, v, weights, out, opt, B, H, L, Dh);
    if (opt->key_padding_mask == NULL)
        return;
    for (size_t bh = 0; bh < B * H; bh++) {
        const uint8_t *pad = opt->key_padding_mask + (bh / H) * L;
        const size_t hd = bh * L * Dh, ll = bh * L * L, h = bh % H;
        for (size_t i = 0; i < L; i++) {
            size_t j0 = L;
            for (size_t j = 0; j < L; j++)
                if (!pad[j] && !(opt->causal && j > i) && (j0 == L || weights[ll + i * L + j] > weights[ll + i * L + j0]))
                    j0 = j;
            if (j0 == L || !(weights[ll + i * L + j0] > 0))
                continue;
            const double s0 = refenc_attention_score(opt, q + hd + i * Dh, k + hd + j0 * Dh, h, H, i, j0, L, Dh);
            for (size_t j = 0; j < L; j++) {
                if (!pad[j] || (opt->causal && j > i))
                    continue;
                const double s = refenc_attention_score(opt, q + hd + i * Dh, k + hd + j * Dh, h, H, i, j, L, Dh);
                const double p = weights[ll + i * L + j0] * exp(s - s0);
                dS[ll + i * L + j] = p * (dP[ll + i * L + j] - Drow[bh * L + i]);
                for (size_t d = 0; d < Dh; d++)
                    dv[hd + j * Dh + d] += p * dout[hd + i * Dh + d];
            }
        }
    }
    dq_dk_from_ds(dq, dk, dS, q, k, B * H, L, Dh, refenc_attention_divisor(opt, Dh));
}

/* ---- RoPE: the gradient rotated by +theta (the forward's rotation) again ------- */
static void rope_plus_theta(double *dx, const double *dy, const int64_t *pos, size_t N, size_t L, size_t Dh,
                            double base, refenc_rope_layout layout, const refenc_rope_scaling *sc)
{
    refenc_rope_scaled_forward(dx, dy, pos, N, L, Dh, base, layout, sc);
}

/* ---- exact GELU differentiated as the tanh approximation ------------------------ */
static void gelu_tanh_derivative(double *dx, const double *dy, const double *x, size_t n, refenc_activation act)
{
    refenc_activation_backward(dx, dy, x, n, act == REFENC_ACT_GELU ? REFENC_ACT_GELU_TANH : act);
}

/* ---- linear: the bias gradient of one token; dW written transposed -------------- */

/* db += dy[0,:]: the reduction over the N = B L tokens dropped. */
static void linear_bias_one_token(double *dx, double *dW, double *db, const double *dy, const double *x,
                                  const double *W, size_t N, size_t in, size_t out)
{
    refenc_linear_backward(dx, dW, NULL, dy, x, W, N, in, out);
    for (size_t o = 0; db != NULL && N > 0 && o < out; o++)
        db[o] += dy[o];
}

/* dW's outer products written in the (in, out) layout, dW^T's, into the
 * (out, in) tensor: dW[k,o] += dy[n,o] x[n,k] read as (out, in).  dx and db
 * as the reference. */
static void linear_dw_transposed(double *dx, double *dW, double *db, const double *dy, const double *x,
                                 const double *W, size_t N, size_t in, size_t out)
{
    for (size_t n = 0; n < N; n++) {
        const double *dy_n = dy + n * out, *x_n = x + n * in; /* dy[n,:], x[n,:] */
        /* the same sums as the reference's, term by term in the same order
         * (over o for dx, over n for dW and db), the matrices read along
         * their rows */
        for (size_t k = 0; dx != NULL && k < in; k++)
            dx[n * in + k] = 0.0;
        for (size_t o = 0; dx != NULL && o < out; o++)
            for (size_t k = 0; k < in; k++)
                dx[n * in + k] += dy_n[o] * W[o * in + k];
        for (size_t k = 0; k < in; k++)
            for (size_t o = 0; o < out; o++)
                dW[k * out + o] += dy_n[o] * x_n[k];
        for (size_t o = 0; db != NULL && o < out; o++)
            db[o] += dy_n[o];
    }
}

/* ---- the token embedding's gradient overwritten: the last occurrence wins ------- */
static void embedding_overwritten(double *dtable, const double *dx, const int64_t *tokens, size_t B, size_t L,
                                  size_t V, size_t D, int scaled)
{
    (void)V;
    const double s = scaled ? sqrt((double)D) : 1.0;
    for (size_t bl = 0; bl < B * L; bl++)
        for (size_t d = 0; d < D; d++)
            dtable[(size_t)tokens[bl] * D + d] = dx[bl * D + d] * s;
}

/* ---- the tables -------------------------------------------------------------------- */

#define BUG_TABLE(field, fn)                                                                                  \
    {.linear = refenc_linear_backward, .layernorm = refenc_layernorm_backward,                                \
     .attention = refenc_attention_backward, .rope = refenc_rope_scaled_backward,                             \
     .activation = refenc_activation_backward, .embedding = refenc_embedding_token_backward, .field = fn}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const refenc_backward_kernels tables[] = {
    [REFENC_VAR_LAYERNORM_BACKWARD_MEAN_TWICE - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(layernorm, layernorm_mean_twice),
    [REFENC_VAR_LAYERNORM_BACKWARD_MEAN_MISSING - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(layernorm, layernorm_mean_missing),
    [REFENC_VAR_LAYERNORM_BACKWARD_VARIANCE_MISSING - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(layernorm, layernorm_variance_missing),
    [REFENC_VAR_SOFTMAX_BACKWARD_WITHOUT_ROWSUM - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(attention, attention_without_rowsum),
    [REFENC_VAR_ATTENTION_BACKWARD_UNSCALED - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(attention, attention_unscaled),
    [REFENC_VAR_ATTENTION_BACKWARD_SCALED_TWICE - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(attention, attention_scaled_twice),
    [REFENC_VAR_ATTENTION_BACKWARD_UNMASKED - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(attention, attention_unmasked),
    [REFENC_VAR_ROPE_BACKWARD_PLUS_THETA - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(rope, rope_plus_theta),
    [REFENC_VAR_GELU_BACKWARD_TANH_DERIVATIVE - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(activation, gelu_tanh_derivative),
    [REFENC_VAR_BIAS_GRAD_NOT_SUMMED_OVER_BATCH - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(linear, linear_bias_one_token),
    [REFENC_VAR_EMBEDDING_GRAD_OVERWRITTEN - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(embedding, embedding_overwritten),
    [REFENC_VAR_LINEAR_DW_TRANSPOSED - REFENC_VAR_FIRST_BACKWARD] = BUG_TABLE(linear, linear_dw_transposed),
};
#pragma GCC diagnostic pop
_Static_assert(sizeof tables / sizeof tables[0] == REFENC_VAR_COUNT - REFENC_VAR_FIRST_BACKWARD,
               "every backward variant has its kernel table");

const refenc_backward_kernels *refenc_backward_bug_kernels(refenc_variant v)
{
    if ((int)v < (int)REFENC_VAR_FIRST_BACKWARD || (int)v >= (int)REFENC_VAR_COUNT)
        return NULL;
    return &tables[v - REFENC_VAR_FIRST_BACKWARD];
}
