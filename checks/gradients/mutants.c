/* The named backward bugs of issue 25 as kernel tables of gradcheck.h: the
 * reference with one kernel replaced.  Twelve are the shipped variants'
 * kernels (ref/tool/backward_bugs.h, which certify names); one is
 * test-only: the standalone softmax backward without D (the stack's softmax
 * backward is the attention's).
 * test_grad_controls.c shows that some property of gradcheck.h fails on each. */

#include "gradcheck.h"

/* ---- softmax without the row term D ------------------------------------------ */

static void softmax_no_rowsum(double *ds, const double *dy, const double *y, size_t R, size_t n,
                              double tau)
{
    for (size_t i = 0; i < R * n; i++)
        ds[i] = y[i] * dy[i] / tau;
}

/* ---- the shipped named backward bugs (ref/tool/backward_bugs.h) ----------------
 * The LayerNorm, attention, activation and linear bugs are the kernels the
 * golden generator stores and certify names: the properties here must catch
 * each of them as they caught the test-only copies these replace.  RoPE's and
 * the embedding's take the shipped tables' extra arguments. */

static const refenc_backward_kernels *shipped(refenc_variant v)
{
    return refenc_backward_bug_kernels(v);
}

static void rope_plus_theta(double *dx, const double *dy, const int64_t *pos, size_t N, size_t L,
                            size_t Dh, double base, refenc_rope_layout layout)
{
    shipped(REFENC_VAR_ROPE_BACKWARD_PLUS_THETA)->rope(dx, dy, pos, N, L, Dh, base, layout, NULL);
}

static void embedding_overwrite(double *dtable, const double *dx, const int64_t *tokens,
                                size_t B, size_t L, size_t V, size_t D)
{
    shipped(REFENC_VAR_EMBEDDING_GRAD_OVERWRITTEN)->embedding(dtable, dx, tokens, B, L, V, D, 1);
}

#define LN_SHIPPED(name, v)                                                                         \
    static void name(double *dx, double *dg, double *db, const double *dy, const double *x,           \
                     const double *gamma, size_t N, size_t D, double eps)                            \
    {                                                                                                 \
        shipped(v)->layernorm(dx, dg, db, dy, x, gamma, N, D, eps);                                   \
    }
LN_SHIPPED(ln_mean_twice, REFENC_VAR_LAYERNORM_BACKWARD_MEAN_TWICE)
LN_SHIPPED(ln_mean_missing, REFENC_VAR_LAYERNORM_BACKWARD_MEAN_MISSING)
LN_SHIPPED(ln_var_missing, REFENC_VAR_LAYERNORM_BACKWARD_VARIANCE_MISSING)

#define AT_SHIPPED(name, v)                                                                         \
    static void name(double *dq, double *dk, double *dv, double *dP, double *dS, double *Drow,       \
                     const double *dO, const double *q, const double *k, const double *v_,            \
                     const double *P, const double *O, const refenc_attn_options *opt,                \
                     size_t B, size_t H, size_t L, size_t Dh)                                        \
    {                                                                                                 \
        shipped(v)->attention(dq, dk, dv, dP, dS, Drow, dO, q, k, v_, P, O, opt, B, H, L, Dh);        \
    }
AT_SHIPPED(attention_no_rowsum, REFENC_VAR_SOFTMAX_BACKWARD_WITHOUT_ROWSUM)
AT_SHIPPED(attention_scale_missing, REFENC_VAR_ATTENTION_BACKWARD_UNSCALED)
AT_SHIPPED(attention_scale_twice, REFENC_VAR_ATTENTION_BACKWARD_SCALED_TWICE)
AT_SHIPPED(attention_unmasked, REFENC_VAR_ATTENTION_BACKWARD_UNMASKED)

static void activation_tanh_for_exact(double *dx, const double *dy, const double *x, size_t n,
                                      refenc_activation act)
{
    shipped(REFENC_VAR_GELU_BACKWARD_TANH_DERIVATIVE)->activation(dx, dy, x, n, act);
}

#define LIN_SHIPPED(name, v)                                                                        \
    static void name(double *dx, double *dW, double *db, const double *dy, const double *x,           \
                     const double *W, size_t N, size_t in, size_t out)                               \
    {                                                                                                 \
        shipped(v)->linear(dx, dW, db, dy, x, W, N, in, out);                                         \
    }
LIN_SHIPPED(linear_bias_first_token, REFENC_VAR_BIAS_GRAD_NOT_SUMMED_OVER_BATCH)
LIN_SHIPPED(linear_dw_transposed, REFENC_VAR_LINEAR_DW_TRANSPOSED)

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
