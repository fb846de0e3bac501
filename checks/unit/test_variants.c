/* The bug variants (ref/variants.h): the table is complete and consistent,
 * each variant applies where it should, and each transform computes the bug
 * it names -- checked against the bug written out directly. */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/encoder.h"
#include "../../ref/layernorm.h"
#include "../../ref/tool/variants.h"
#include "../common/testutil.h"
#include "../../ref/tool/random_params.h"

Test(variants, table_is_complete_and_names_parse_back)
{
    for (int v = 0; v < REFENC_VAR_COUNT; v++) {
        const refenc_variant_info *i = refenc_variant_get((refenc_variant)v);
        cr_assert_not_null(i);
        cr_expect(i->name && i->bug_class && i->symptom && i->cause && i->fix, "variant %d incomplete", v);
        refenc_variant back;
        cr_expect(refenc_variant_parse(&back, i->name) && back == (refenc_variant)v, "%s", i->name);
        for (int w = 0; w < v; w++)
            cr_expect_str_neq(i->name, refenc_variant_get((refenc_variant)w)->name);
    }
    refenc_variant v;
    cr_expect(!refenc_variant_parse(&v, "no_such_bug"));
    cr_expect_null(refenc_variant_get(REFENC_VAR_COUNT));
}

/* A small encoder case: D = 24, H = 6, pre-LN, ALiBi, tokens, padding. */
static void small_case(refenc_case *c, refenc_positional pos, size_t H, int padding)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 24;
    cfg.n_heads = H;
    cfg.d_ff = 32;
    cfg.positional = pos;
    cfg.vocab_size = 11;
    cfg.padding_idx = 0;
    refenc_error err;
    cr_assert_eq(refenc_case_alloc(c, REFENC_COMP_ENCODER, &cfg, 2, 5, 1, padding, 0, &err), REFENC_OK,
                 "%s", err.message);
    gsl_rng *r = test_rng(71);
    refenc_params_init_random(&c->params, &cfg, r);
    for (size_t i = 0; i < 10; i++)
        c->tokens[i] = 1 + (int64_t)(i % 10);
    if (padding)
        c->key_padding_mask[9] = 1;
    gsl_rng_free(r);
}

Test(variants, each_applies_only_where_it_changes_something)
{
    refenc_case c;
    small_case(&c, REFENC_POS_ALIBI, 6, 1);
    cr_expect(refenc_variant_applies(REFENC_VAR_ALIBI_SLOPES_POW2, &c), "6 heads: not a power of two");
    cr_expect(!refenc_variant_applies(REFENC_VAR_ROPE_LAYOUT_SWAPPED, &c), "no RoPE");
    cr_expect(refenc_variant_applies(REFENC_VAR_PADDING_MASK_INVERTED, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_MISSING_FINAL_NORM, &c), "Pre-LN with a final norm");
    cr_expect(refenc_variant_applies(REFENC_VAR_EMBEDDING_UNSCALED, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_GELU_TANH_FOR_EXACT, &c), "the default activation is gelu");
    cr_expect(!refenc_variant_applies(REFENC_VAR_GELU_EXACT_FOR_TANH, &c));
    refenc_case_free(&c);

    small_case(&c, REFENC_POS_ROPE, 4, 0);
    cr_expect(!refenc_variant_applies(REFENC_VAR_ALIBI_SLOPES_POW2, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_ROPE_LAYOUT_SWAPPED, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_ROPE_BASE_WRONG, &c));
    cr_expect(!refenc_variant_applies(REFENC_VAR_PADDING_MASK_INVERTED, &c), "no padding mask");
    c.cfg.norm = REFENC_NORM_POST;
    cr_expect(!refenc_variant_applies(REFENC_VAR_MISSING_FINAL_NORM, &c), "Post-LN");
    refenc_case_free(&c);

    small_case(&c, REFENC_POS_ALIBI, 8, 0);
    c.cfg.d_model = 24; /* H = 8 does not divide 24, but applies() only reads H */
    cr_expect(!refenc_variant_applies(REFENC_VAR_ALIBI_SLOPES_POW2, &c), "8 heads: a power of two");
    refenc_case_free(&c);
}

/* LayerNorm with the unbiased variance, written out directly. */
static void layernorm_unbiased(double *y, const double *x, const double *g, const double *b, size_t D,
                               double eps)
{
    long double mu = 0, ss = 0;
    for (size_t d = 0; d < D; d++)
        mu += x[d];
    mu /= D;
    for (size_t d = 0; d < D; d++)
        ss += (x[d] - mu) * (x[d] - mu);
    const long double sd = sqrtl(ss / (D - 1) + eps);
    for (size_t d = 0; d < D; d++)
        y[d] = (double)((x[d] - mu) / sd * g[d] + b[d]);
}

Test(variants, unbiased_variance_transform_is_layernorm_with_d_minus_1)
{
    /* gamma' = gamma sqrt((D-1)/D), eps' = eps (D-1)/D: the reference's
     * LayerNorm on the transformed case equals the unbiased one up to the
     * roundings of gamma', eps' (u each) and of the two computations (D + 6
     * roundings each, gamma_{2D+14}), amplified by LayerNorm's condition
     * kappa = 2 max|x| / sd (x - mean cancels): |error| <= gamma_{2D+14}
     * kappa |gamma_d| (1 + |n_d|) + u |beta_d|, n_d the normalised value. */
    refenc_case c;
    small_case(&c, REFENC_POS_NONE, 6, 0);
    const size_t D = c.cfg.d_model;
    double x[24], want[24], got[24];
    gsl_rng *r = test_rng(72);
    test_fill_gaussian(x, D, 0.3, 0.01, r);
    gsl_rng_free(r);
    const refenc_layer_params *lp = &c.params.layers[0];
    layernorm_unbiased(want, x, lp->norm1_weight, lp->norm1_bias, D, c.cfg.layer_norm_eps);
    double plain[24];
    refenc_layernorm_forward(plain, x, lp->norm1_weight, lp->norm1_bias, 1, D, c.cfg.layer_norm_eps);

    refenc_variant_hooks hooks;
    refenc_variant_apply(REFENC_VAR_UNBIASED_VARIANCE, &c, &hooks);
    cr_expect(!hooks.alibi_slopes_pow2 && !hooks.merge_without_transpose);
    refenc_layernorm_forward(got, x, lp->norm1_weight, lp->norm1_bias, 1, D, c.cfg.layer_norm_eps);
    int differs = 0;
    long double mu = 0, ss = 0, xmax = 0;
    for (size_t d = 0; d < D; d++)
        mu += x[d], xmax = fmaxl(xmax, fabsl(x[d]));
    mu /= D;
    for (size_t d = 0; d < D; d++)
        ss += (x[d] - mu) * (x[d] - mu);
    const double kappa = (double)(2 * xmax / sqrtl(ss / D));
    for (size_t d = 0; d < D; d++) {
        const double n_d = (want[d] - lp->norm1_bias[d]) / lp->norm1_weight[d];
        const double tol = test_gamma(2.0 * D + 14) * kappa * fabs(lp->norm1_weight[d]) * (1 + fabs(n_d)) +
                           TEST_U * fabs(lp->norm1_bias[d]);
        cr_expect(fabs(got[d] - want[d]) <= tol, "d %zu: got %a want %a", d, got[d], want[d]);
        differs |= fabs(plain[d] - want[d]) > 100 * tol; /* negative control: the biased LN differs */
    }
    cr_expect(differs, "the biased LayerNorm must differ from the unbiased one");
    refenc_case_free(&c);
}

Test(variants, scaling_transforms_give_the_wrong_divisors)
{
    /* sqrt(Dh) tau' = sqrt(D) tau (scale_sqrt_d) and = tau (unscaled), up to
     * the roundings of sqrt and of the products: 4u */
    refenc_case c;
    refenc_variant_hooks hooks;
    small_case(&c, REFENC_POS_NONE, 6, 0);
    const double Dh = 4, D = 24, tau = c.cfg.temperature;
    refenc_variant_apply(REFENC_VAR_ATTENTION_SCALE_SQRT_D, &c, &hooks);
    cr_expect(fabs(sqrt(Dh) * c.cfg.temperature - sqrt(D) * tau) <= 4 * TEST_U * sqrt(D) * tau);
    refenc_case_free(&c);
    small_case(&c, REFENC_POS_NONE, 6, 0);
    refenc_variant_apply(REFENC_VAR_ATTENTION_UNSCALED, &c, &hooks);
    cr_expect(fabs(sqrt(Dh) * c.cfg.temperature - tau) <= 4 * TEST_U * tau);
    refenc_case_free(&c);
}

Test(variants, the_other_transforms)
{
    refenc_case c;
    refenc_variant_hooks hooks;
    small_case(&c, REFENC_POS_ALIBI, 6, 1);
    const double e0 = c.params.embedding[24 * 3 + 5], eps0 = c.cfg.layer_norm_eps;
    refenc_variant_apply(REFENC_VAR_EMBEDDING_UNSCALED, &c, &hooks);
    /* E / sqrt(D) * sqrt(D) returns E within 2 roundings */
    cr_expect(fabs(c.params.embedding[24 * 3 + 5] * sqrt(24.0) - e0) <= 2 * TEST_U * fabs(e0));
    refenc_variant_apply(REFENC_VAR_PADDING_MASK_INVERTED, &c, &hooks);
    cr_expect(c.key_padding_mask[9] == 0 && c.key_padding_mask[0] == 1);
    refenc_variant_apply(REFENC_VAR_PRE_POST_SWAPPED, &c, &hooks);
    cr_expect_eq(c.cfg.norm, REFENC_NORM_POST);
    cr_expect_eq(c.cfg.final_norm, 1, "the final norm is kept: only the placement is swapped");
    refenc_variant_apply(REFENC_VAR_LAYERNORM_EPS_X10, &c, &hooks);
    cr_expect_eq(c.cfg.layer_norm_eps, eps0 * 10);
    refenc_variant_apply(REFENC_VAR_MISSING_FINAL_NORM, &c, &hooks);
    cr_expect_eq(c.cfg.final_norm, 0);
    refenc_variant_apply(REFENC_VAR_ALIBI_SLOPES_POW2, &c, &hooks);
    cr_expect(hooks.alibi_slopes_pow2 && !hooks.merge_without_transpose);
    refenc_variant_apply(REFENC_VAR_HEADS_MERGED_WITHOUT_TRANSPOSE, &c, &hooks);
    cr_expect(hooks.merge_without_transpose && !hooks.alibi_slopes_pow2);
    refenc_case_free(&c);

    small_case(&c, REFENC_POS_ROPE, 4, 0);
    refenc_variant_apply(REFENC_VAR_ROPE_LAYOUT_SWAPPED, &c, &hooks);
    cr_expect_eq(c.cfg.rope_layout, REFENC_ROPE_INTERLEAVED);
    refenc_variant_apply(REFENC_VAR_ROPE_BASE_WRONG, &c, &hooks);
    cr_expect_eq(c.cfg.rope_base, 500000.0);
    refenc_variant_apply(REFENC_VAR_ROPE_BASE_WRONG, &c, &hooks);
    cr_expect_eq(c.cfg.rope_base, 10000.0);
    refenc_variant_apply(REFENC_VAR_GELU_TANH_FOR_EXACT, &c, &hooks);
    cr_expect_eq(c.cfg.activation, REFENC_ACT_GELU_TANH);
    refenc_variant_apply(REFENC_VAR_GELU_EXACT_FOR_TANH, &c, &hooks);
    cr_expect_eq(c.cfg.activation, REFENC_ACT_GELU);
    refenc_case_free(&c);
}
