/* The named backward bugs of issue 25, as test-only mutants of the
 * reference's backward kernels (gradcheck.h).  Each is the reference with
 * one kernel replaced by a copy carrying the bug; test_grad_controls.c
 * shows that some property of gradcheck.h fails on each. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/propcase.h"
#include "gradcheck.h"

/* ---- LayerNorm: the three ways to get the projection wrong --------------- */

enum { LN_MEAN_TWICE, LN_MEAN_MISSING, LN_VAR_MISSING };

static void ln_mutant(int bug, double *dx, double *dgamma, double *dbeta, const double *dy,
                      const double *x, const double *gamma, size_t N, size_t D, double eps)
{
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D, *dy_n = dy + n * D;
        double sum = 0.0, ss = 0.0, sg = 0.0, sgx = 0.0;
        for (size_t d = 0; d < D; d++)
            sum += x_n[d];
        const double mu = sum / (double)D;
        for (size_t d = 0; d < D; d++)
            ss += (x_n[d] - mu) * (x_n[d] - mu);
        const double sd = sqrt(ss / (double)D + eps);
        for (size_t d = 0; d < D; d++) {
            const double xhat = (x_n[d] - mu) / sd, g = dy_n[d] * gamma[d];
            sg += g, sgx += g * xhat;
            dgamma[d] += dy_n[d] * xhat;
            dbeta[d] += dy_n[d];
        }
        const double mg = sg / (double)D, mgx = sgx / (double)D;
        for (size_t d = 0; d < D; d++) {
            const double xhat = (x_n[d] - mu) / sd, g = dy_n[d] * gamma[d];
            dx[n * D + d] = bug == LN_MEAN_TWICE     ? (g - 2.0 * mg - xhat * mgx) / sd
                            : bug == LN_MEAN_MISSING ? (g - xhat * mgx) / sd
                                                     : (g - mg) / sd;
        }
    }
}

#define LN_WRAP(name, bug)                                                                       \
    static void name(double *dx, double *dg, double *db, const double *dy, const double *x,    \
                     const double *gamma, size_t N, size_t D, double eps)                     \
    {                                                                                          \
        ln_mutant(bug, dx, dg, db, dy, x, gamma, N, D, eps);                                   \
    }
LN_WRAP(ln_mean_twice, LN_MEAN_TWICE)
LN_WRAP(ln_mean_missing, LN_MEAN_MISSING)
LN_WRAP(ln_var_missing, LN_VAR_MISSING)

/* ---- softmax without the row term D ------------------------------------------ */

static void softmax_no_rowsum(double *ds, const double *dy, const double *y, size_t R, size_t n,
                              double tau)
{
    for (size_t i = 0; i < R * n; i++)
        ds[i] = y[i] * dy[i] / tau;
}

/* ---- attention: a copy of the backward with a bug switch --------------------- */

enum { AT_SCALE_MISSING, AT_SCALE_TWICE, AT_NO_ROWSUM };

static void attention_mutant(int bug, double *dq, double *dk, double *dv, double *dP, double *dS,
                             double *Drow, const double *dO, const double *q, const double *k,
                             const double *v, const double *P, const double *O,
                             const refenc_attn_options *opt, size_t B, size_t H, size_t L, size_t Dh)
{
    const double div0 = sqrt((double)Dh) * opt->temperature;
    const double div = bug == AT_SCALE_MISSING ? 1.0 : bug == AT_SCALE_TWICE ? div0 * div0 : div0;
    for (size_t bh = 0; bh < B * H; bh++) {
        const uint8_t *pad = opt->key_padding_mask ? opt->key_padding_mask + (bh / H) * L : NULL;
        const size_t hd = bh * L * Dh, ll = bh * L * L;
        for (size_t i = 0; i < L; i++) {
            double Di = 0.0;
            for (size_t d = 0; d < Dh; d++)
                Di += dO[hd + i * Dh + d] * O[hd + i * Dh + d];
            Drow[bh * L + i] = Di;
            for (size_t j = 0; j < L; j++) {
                double dp = 0.0;
                for (size_t d = 0; d < Dh; d++)
                    dp += dO[hd + i * Dh + d] * v[hd + j * Dh + d];
                dP[ll + i * L + j] = dp;
                const int replaced = (pad != NULL && pad[j]) || (opt->causal && j > i);
                const double p = P[ll + i * L + j];
                dS[ll + i * L + j] = replaced ? 0.0 : bug == AT_NO_ROWSUM ? p * dp : p * (dp - Di);
            }
        }
        for (size_t j = 0; j < L; j++)
            for (size_t d = 0; d < Dh; d++) {
                double av = 0.0, ak = 0.0, aq = 0.0;
                for (size_t i = 0; i < L; i++) {
                    av += P[ll + i * L + j] * dO[hd + i * Dh + d];
                    ak += dS[ll + i * L + j] * q[hd + i * Dh + d];
                    aq += dS[ll + j * L + i] * k[hd + i * Dh + d];
                }
                dv[hd + j * Dh + d] = av;
                dk[hd + j * Dh + d] = ak / div;
                dq[hd + j * Dh + d] = aq / div;
            }
    }
}

#define AT_WRAP(name, bug)                                                                       \
    static void name(double *dq, double *dk, double *dv, double *dP, double *dS, double *Drow,  \
                     const double *dO, const double *q, const double *k, const double *v,       \
                     const double *P, const double *O, const refenc_attn_options *opt,           \
                     size_t B, size_t H, size_t L, size_t Dh)                                   \
    {                                                                                          \
        attention_mutant(bug, dq, dk, dv, dP, dS, Drow, dO, q, k, v, P, O, opt, B, H, L, Dh);  \
    }
AT_WRAP(attention_scale_missing, AT_SCALE_MISSING)
AT_WRAP(attention_scale_twice, AT_SCALE_TWICE)
AT_WRAP(attention_no_rowsum, AT_NO_ROWSUM)

/* dK (and everything) from the unmasked scores: the weights recomputed
 * without the key padding mask, and the backward told of no padding. */
static void attention_unmasked(double *dq, double *dk, double *dv, double *dP, double *dS,
                               double *Drow, const double *dO, const double *q, const double *k,
                               const double *v, const double *P, const double *O,
                               const refenc_attn_options *opt, size_t B, size_t H, size_t L,
                               size_t Dh)
{
    (void)P, (void)O;
    refenc_attn_options open = *opt;
    open.key_padding_mask = NULL;
    double *P2 = prop_calloc(B * H * L * L, sizeof(double));
    double *O2 = prop_calloc(B * H * L * Dh, sizeof(double));
    refenc_attention_forward(O2, P2, q, k, v, &open, B, H, L, Dh);
    refenc_attention_backward(dq, dk, dv, dP, dS, Drow, dO, q, k, v, P2, O2, &open, B, H, L, Dh);
    free(P2);
    free(O2);
}

/* ---- RoPE rotating by +theta ---------------------------------------------------- */

static void rope_plus_theta(double *dx, const double *dy, const int64_t *pos, size_t N, size_t L,
                            size_t Dh, double base, refenc_rope_layout layout)
{
    refenc_rope_forward(dx, dy, pos, N, L, Dh, base, layout);
}

/* ---- exact GELU differentiated as the tanh approximation ------------------------ */

static void activation_tanh_for_exact(double *dx, const double *dy, const double *x, size_t n,
                                      refenc_activation act)
{
    refenc_activation_backward(dx, dy, x, n, act == REFENC_ACT_GELU ? REFENC_ACT_GELU_TANH : act);
}

/* ---- linear: the bias gradient of one token, dW transposed ---------------------- */

static void linear_bias_first_token(double *dx, double *dW, double *db, const double *dy,
                                     const double *x, const double *W, size_t N, size_t in,
                                     size_t out)
{
    refenc_linear_backward(dx, dW, NULL, dy, x, W, N, in, out);
    for (size_t o = 0; db != NULL && o < out; o++)
        db[o] += dy[o]; /* token 0 only: not summed over the batch */
}

static void linear_dw_transposed(double *dx, double *dW, double *db, const double *dy,
                                 const double *x, const double *W, size_t N, size_t in, size_t out)
{
    double *t = prop_calloc(out * in, sizeof(double));
    refenc_linear_backward(dx, t, db, dy, x, W, N, in, out);
    for (size_t o = 0; o < out; o++) /* written as (in, out): dW^T's layout */
        for (size_t k = 0; k < in; k++)
            dW[k * out + o] += t[o * in + k];
    free(t);
}

/* ---- embedding gradient overwritten instead of accumulated ---------------------- */

static void embedding_overwrite(double *dtable, const double *dx, const int64_t *tokens,
                                size_t B, size_t L, size_t V, size_t D)
{
    (void)V;
    const double s = sqrt((double)D);
    for (size_t bl = 0; bl < B * L; bl++)
        for (size_t d = 0; d < D; d++)
            dtable[(size_t)tokens[bl] * D + d] = dx[bl * D + d] * s;
}

/* ---- the table --------------------------------------------------------------------- */

#define MUTANT(label, field, fn) \
    { .name = label, .linear = refenc_linear_backward, .layernorm = refenc_layernorm_backward, \
      .softmax = refenc_softmax_backward, .attention = refenc_attention_backward,               \
      .rope = refenc_rope_backward, .activation = refenc_activation_backward,                   \
      .embedding = refenc_embedding_backward, .field = fn }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
const gc_kernels gc_mutants[] = {
    MUTANT("layernorm_mean_subtracted_twice", layernorm, ln_mean_twice),
    MUTANT("layernorm_mean_term_missing", layernorm, ln_mean_missing),
    MUTANT("layernorm_variance_term_missing", layernorm, ln_var_missing),
    MUTANT("softmax_backward_without_rowsum", softmax, softmax_no_rowsum),
    MUTANT("attention_backward_without_rowsum", attention, attention_no_rowsum),
    MUTANT("attention_scale_missing", attention, attention_scale_missing),
    MUTANT("attention_scale_applied_twice", attention, attention_scale_twice),
    MUTANT("attention_dk_from_unmasked_scores", attention, attention_unmasked),
    MUTANT("rope_backward_rotates_by_plus_theta", rope, rope_plus_theta),
    MUTANT("exact_gelu_with_tanh_derivative", activation, activation_tanh_for_exact),
    MUTANT("bias_gradient_not_summed_over_batch", linear, linear_bias_first_token),
    MUTANT("embedding_gradient_overwritten", embedding, embedding_overwrite),
    MUTANT("linear_dw_transposed", linear, linear_dw_transposed),
};
#pragma GCC diagnostic pop
const size_t gc_n_mutants = sizeof gc_mutants / sizeof gc_mutants[0];
