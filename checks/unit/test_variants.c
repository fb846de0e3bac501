/* The bug variants (ref/variants.h): the table is complete and consistent,
 * each variant applies where it should, and each transform computes the bug
 * it names -- checked against the bug written out directly. */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/core/family.h"
#include "../../ref/encoder.h"
#include "../../ref/layer_pattern.h"
#include "../../ref/layernorm.h"
#include "../../ref/norm.h"
#include "../../ref/rmsnorm.h"
#include "../../ref/rope_scaling.h"
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
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_UNBIASED_VARIANCE, &c, &hooks, NULL), 0);
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
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_ATTENTION_SCALE_SQRT_D, &c, &hooks, NULL), 0);
    cr_expect(fabs(sqrt(Dh) * c.cfg.temperature - sqrt(D) * tau) <= 4 * TEST_U * sqrt(D) * tau);
    refenc_case_free(&c);
    small_case(&c, REFENC_POS_NONE, 6, 0);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_ATTENTION_UNSCALED, &c, &hooks, NULL), 0);
    cr_expect(fabs(sqrt(Dh) * c.cfg.temperature - tau) <= 4 * TEST_U * tau);
    refenc_case_free(&c);
}

Test(variants, the_other_transforms)
{
    refenc_case c;
    refenc_variant_hooks hooks;
    small_case(&c, REFENC_POS_ALIBI, 6, 1);
    const double e0 = c.params.embedding[24 * 3 + 5], eps0 = c.cfg.layer_norm_eps;
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_EMBEDDING_UNSCALED, &c, &hooks, NULL), 0);
    /* E / sqrt(D) * sqrt(D) returns E within 2 roundings */
    cr_expect(fabs(c.params.embedding[24 * 3 + 5] * sqrt(24.0) - e0) <= 2 * TEST_U * fabs(e0));
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_PADDING_MASK_INVERTED, &c, &hooks, NULL), 0);
    cr_expect(c.key_padding_mask[9] == 0 && c.key_padding_mask[0] == 1);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_PRE_POST_SWAPPED, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.norm, REFENC_NORM_POST);
    cr_expect_eq(c.cfg.final_norm, 1, "the final norm is kept: only the placement is swapped");
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_LAYERNORM_EPS_X10, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.layer_norm_eps, eps0 * 10);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_MISSING_FINAL_NORM, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.final_norm, 0);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_ALIBI_SLOPES_POW2, &c, &hooks, NULL), 0);
    cr_expect(hooks.alibi_slopes_pow2 && !hooks.merge_without_transpose);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_HEADS_MERGED_WITHOUT_TRANSPOSE, &c, &hooks, NULL), 0);
    cr_expect(hooks.merge_without_transpose && !hooks.alibi_slopes_pow2);
    refenc_case_free(&c);

    small_case(&c, REFENC_POS_ROPE, 4, 0);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_ROPE_LAYOUT_SWAPPED, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.rope_layout, REFENC_ROPE_INTERLEAVED);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_ROPE_BASE_WRONG, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.rope_base, 500000.0);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_ROPE_BASE_WRONG, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.rope_base, 10000.0);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_GELU_TANH_FOR_EXACT, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.activation, REFENC_ACT_GELU_TANH);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_GELU_EXACT_FOR_TANH, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.activation, REFENC_ACT_GELU);
    refenc_case_free(&c);
}

/* ---- the families' variants ---------------------------------------------------------
 * A small family case: the preset at D 24, H 6, F 32, N 2, V 11, P 9, tokens
 * with types where the family has them, padding on item 1. */
static void family_case(refenc_case *c, refenc_family fam)
{
    refenc_config cfg;
    refenc_config_family(&cfg, fam);
    cfg.d_model = 24, cfg.n_heads = 6, cfg.d_ff = 32, cfg.n_layers = 2, cfg.vocab_size = 11;
    cfg.max_len = 9;
    if (cfg.padding_idx < 0)
        cfg.padding_idx = 0;
    refenc_error err;
    cr_assert_eq(refenc_case_alloc(c, REFENC_COMP_ENCODER, &cfg, 2, 5, 1, 1, 0, &err), REFENC_OK,
                 "%s", err.message);
    gsl_rng *r = test_rng(73);
    refenc_params_init_random(&c->params, &cfg, r);
    gsl_rng_free(r);
    for (size_t i = 0; i < 10; i++) {
        c->tokens[i] = 2 + (int64_t)(i % 9);
        if (c->token_types != NULL)
            c->token_types[i] = (int64_t)(i % cfg.type_vocab_size);
    }
    c->tokens[9] = cfg.padding_idx, c->key_padding_mask[9] = 1;
}

/* The encoder's output on a case's config and parameters, for an input. */
static void run_input(double *y, const refenc_case *c, const refenc_input *in)
{
    refenc_workspace ws;
    refenc_error err;
    cr_assert_eq(refenc_workspace_alloc(&ws, &c->cfg, c->B, c->L, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_encoder_forward(y, &ws, &c->params, &c->cfg, in, NULL, &err), REFENC_OK,
                 "%s", err.message);
    refenc_workspace_free(&ws);
}

/* The encoder's output on a case. */
static void run(double *y, const refenc_case *c)
{
    const refenc_input in = refenc_case_input(c);
    run_input(y, c, &in);
}

Test(variants, family_variants_apply_where_the_family_has_the_feature)
{
    refenc_case c;
    family_case(&c, REFENC_FAMILY_BERT);
    cr_expect(refenc_variant_applies(REFENC_VAR_EPS_1E5_FOR_1E12, &c), "bert: eps 1e-12");
    cr_expect(!refenc_variant_applies(REFENC_VAR_EPS_1E12_FOR_1E5, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_EMBEDDING_NORM_MISSING, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_TOKEN_TYPES_IGNORED, &c), "bert: types 0 and 1");
    cr_expect(!refenc_variant_applies(REFENC_VAR_ROBERTA_POSITIONS_FROM_ZERO, &c));
    cr_expect(!refenc_variant_applies(REFENC_VAR_CONV1D_NOT_TRANSPOSED, &c), "bert: nn.Linear layout");
    cr_expect(refenc_variant_applies(REFENC_VAR_QUICK_GELU_FOR_GELU, &c));
    cr_expect(!refenc_variant_applies(REFENC_VAR_GELU_FOR_QUICK_GELU, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_EMBEDDING_SCALED, &c), "bert does not scale");
    cr_expect(!refenc_variant_applies(REFENC_VAR_EMBEDDING_UNSCALED, &c), "bert does not scale");
    memset(c.token_types, 0, 10 * sizeof(int64_t));
    cr_expect(!refenc_variant_applies(REFENC_VAR_TOKEN_TYPES_IGNORED, &c), "every type already 0");
    refenc_case_free(&c);

    family_case(&c, REFENC_FAMILY_ROBERTA);
    cr_expect(refenc_variant_applies(REFENC_VAR_EPS_1E12_FOR_1E5, &c), "roberta: eps 1e-5");
    cr_expect(refenc_variant_applies(REFENC_VAR_ROBERTA_POSITIONS_FROM_ZERO, &c));
    cr_expect(!refenc_variant_applies(REFENC_VAR_TOKEN_TYPES_IGNORED, &c), "roberta: one type");
    refenc_case_free(&c);

    family_case(&c, REFENC_FAMILY_GPT2);
    cr_expect(refenc_variant_applies(REFENC_VAR_CONV1D_NOT_TRANSPOSED, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_QUICK_GELU_FOR_GELU, &c), "gpt2: tanh GELU");
    cr_expect(!refenc_variant_applies(REFENC_VAR_EMBEDDING_NORM_MISSING, &c));
    refenc_case_free(&c);

    family_case(&c, REFENC_FAMILY_CLIP_TEXT);
    cr_expect(refenc_variant_applies(REFENC_VAR_GELU_FOR_QUICK_GELU, &c));
    cr_expect(!refenc_variant_applies(REFENC_VAR_QUICK_GELU_FOR_GELU, &c));
    refenc_case_free(&c);
}

/* Each family variant's transformed case computes the bug written out
 * directly on the original case: bit for bit, since both run the same
 * kernels on the same values (the transposition and the zeroed types are
 * exact; the eps and activation are the bug's own values). */
Test(variants, family_transforms_compute_the_bugs_they_name)
{
    const size_t n = 2 * 5 * 24;
    double y_var[240], y_bug[240], y_ok[240];
    refenc_case c, b;
    refenc_variant_hooks hooks;

    /* eps 1e-5 for 1e-12: the bug sets both eps to PyTorch's default */
    family_case(&c, REFENC_FAMILY_BERT);
    run(y_ok, &c);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_EPS_1E5_FOR_1E12, &c, &hooks, NULL), 0);
    run(y_var, &c);
    refenc_case_free(&c);
    family_case(&b, REFENC_FAMILY_BERT);
    b.cfg.layer_norm_eps = 1e-5, b.cfg.embedding_norm_eps = 1e-5;
    run(y_bug, &b);
    cr_expect(memcmp(y_var, y_bug, n * sizeof(double)) == 0, "eps 1e-5 for 1e-12");
    cr_expect(memcmp(y_var, y_ok, n * sizeof(double)) != 0, "the bug changed nothing");
    /* the embedding LN missing; token types ignored (type ids all 0) */
    family_case(&c, REFENC_FAMILY_BERT);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_EMBEDDING_NORM_MISSING, &c, &hooks, NULL), 0);
    run(y_var, &c);
    b.cfg.layer_norm_eps = 1e-12, b.cfg.embedding_norm_eps = 1e-12, b.cfg.embedding_norm = 0;
    run(y_bug, &b);
    cr_expect(memcmp(y_var, y_bug, n * sizeof(double)) == 0, "embedding LN missing");
    refenc_case_free(&c);
    family_case(&c, REFENC_FAMILY_BERT);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_TOKEN_TYPES_IGNORED, &c, &hooks, NULL), 0);
    run(y_var, &c);
    b.cfg.embedding_norm = 1;
    refenc_input in = refenc_case_input(&b);
    in.token_types = NULL; /* not passed: HF's default, type 0 everywhere */
    run_input(y_bug, &b, &in);
    cr_expect(memcmp(y_var, y_bug, n * sizeof(double)) == 0, "token types ignored");
    cr_expect(memcmp(y_var, y_ok, n * sizeof(double)) != 0, "token types made no difference");
    refenc_case_free(&c);
    refenc_case_free(&b);

    /* RoBERTa's positions from 0: the positions 0 .. L-1 given explicitly */
    family_case(&c, REFENC_FAMILY_ROBERTA);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_ROBERTA_POSITIONS_FROM_ZERO, &c, &hooks, NULL), 0);
    run(y_var, &c);
    refenc_case_free(&c);
    family_case(&b, REFENC_FAMILY_ROBERTA);
    run(y_ok, &b);
    b.cfg.position_ids = REFENC_POSIDS_INDEX;
    const int64_t arange[5] = {0, 1, 2, 3, 4};
    in = refenc_case_input(&b);
    in.positions = arange;
    run_input(y_bug, &b, &in);
    cr_expect(memcmp(y_var, y_bug, n * sizeof(double)) == 0, "positions from 0");
    cr_expect(memcmp(y_var, y_ok, n * sizeof(double)) != 0, "positions from 0 changed nothing");
    refenc_case_free(&b);

    /* GPT-2's c_proj used as stored: out_proj.weight transposed, element by element */
    family_case(&c, REFENC_FAMILY_GPT2);
    const double w01 = c.params.layers[1].out_proj_weight[0 * 24 + 1];
    const double w10 = c.params.layers[1].out_proj_weight[1 * 24 + 0];
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_CONV1D_NOT_TRANSPOSED, &c, &hooks, NULL), 0);
    cr_expect(c.params.layers[1].out_proj_weight[0 * 24 + 1] == w10 &&
              c.params.layers[1].out_proj_weight[1 * 24 + 0] == w01, "layer 1's W_o is W_o^T");
    refenc_case_free(&c);

    /* the activations */
    family_case(&c, REFENC_FAMILY_GPT2);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_QUICK_GELU_FOR_GELU, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.activation, REFENC_ACT_QUICK_GELU);
    refenc_case_free(&c);
    family_case(&c, REFENC_FAMILY_CLIP_TEXT);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_GELU_FOR_QUICK_GELU, &c, &hooks, NULL), 0);
    cr_expect_eq(c.cfg.activation, REFENC_ACT_GELU);
    refenc_case_free(&c);

    /* eps 1e-12 for 1e-5 on RoBERTa: both eps */
    family_case(&c, REFENC_FAMILY_ROBERTA);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_EPS_1E12_FOR_1E5, &c, &hooks, NULL), 0);
    cr_expect(c.cfg.layer_norm_eps == 1e-12 && c.cfg.embedding_norm_eps == 1e-12);
    /* the LayerNorm variants act on the embedding LayerNorm too */
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_LAYERNORM_EPS_X10, &c, &hooks, NULL), 0);
    cr_expect(c.cfg.layer_norm_eps == 1e-11 && c.cfg.embedding_norm_eps == 1e-11);
    refenc_case_free(&c);

    /* the embedding scaled by sqrt(D): E sqrt(D), within a rounding of the lookup's own */
    family_case(&c, REFENC_FAMILY_GPT2);
    const double e0 = c.params.embedding[24 * 3 + 5];
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_EMBEDDING_SCALED, &c, &hooks, NULL), 0);
    cr_expect(fabs(c.params.embedding[24 * 3 + 5] - e0 * sqrt(24.0)) <= 2 * TEST_U * fabs(e0 * sqrt(24.0)));
    refenc_case_free(&c);
}

/* The modern blocks' variants apply only to the blocks they break: the gated
 * FFN, Gemma's (1 + w) RMSNorm. */
Test(variants, modern_block_variants_apply_only_to_their_blocks)
{
    refenc_case c;
    memset(&c, 0, sizeof c);
    refenc_config_default(&c.cfg);
    c.component = REFENC_COMP_ENCODER;
    cr_expect(!refenc_variant_applies(REFENC_VAR_GLU_HALVES_SWAPPED, &c), "the MLP has no halves");
    cr_expect(!refenc_variant_applies(REFENC_VAR_RMSNORM_OFFSET_MISSING, &c), "LayerNorm");
    c.cfg.ffn_type = REFENC_FFN_GLU;
    cr_expect(refenc_variant_applies(REFENC_VAR_GLU_HALVES_SWAPPED, &c));
    c.cfg.norm_type = REFENC_NORMTYPE_RMSNORM;
    cr_expect(!refenc_variant_applies(REFENC_VAR_RMSNORM_OFFSET_DOUBLED, &c), "no offset to double");
    cr_expect(!refenc_variant_applies(REFENC_VAR_UNBIASED_VARIANCE, &c), "RMSNorm has no variance");
    c.cfg.rmsnorm_offset = 1;
    cr_expect(refenc_variant_applies(REFENC_VAR_RMSNORM_OFFSET_MISSING, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_RMSNORM_OFFSET_DOUBLED, &c));
    c.component = REFENC_COMP_ATTENTION;
    cr_expect(!refenc_variant_applies(REFENC_VAR_GLU_HALVES_SWAPPED, &c), "no FFN");
    cr_expect(!refenc_variant_applies(REFENC_VAR_RMSNORM_OFFSET_MISSING, &c), "no norm");
}


/* An encoder case of cfg (B 1, L 3, tokens), its parameters drawn from seed. */
static void encoder_case(refenc_case *c, const refenc_config *cfg, unsigned long seed)
{
    refenc_error err;
    cr_assert_eq(refenc_case_alloc(c, REFENC_COMP_ENCODER, cfg, 1, 3, 1, 0, 0, &err), REFENC_OK, "%s",
                 err.message);
    gsl_rng *r = test_rng(seed);
    refenc_params_init_random(&c->params, cfg, r);
    gsl_rng_free(r);
}

/* first_prenorm_applied (skip_first_prenorm): applies only with the key;
 * the transform gives layer 0 a norm1 of weight 1 and bias 0, keeps every
 * other tensor's values, and clears the key; pre_post_swapped does not
 * apply (Post-LN would need the missing norm).  A layernorm component case
 * with the key is refused (it reads layers.0.norm1). */
Test(variants, first_prenorm_applied_restores_a_unit_norm)
{
    refenc_case c;
    small_case(&c, REFENC_POS_NONE, 6, 0);
    cr_expect(!refenc_variant_applies(REFENC_VAR_FIRST_PRENORM_APPLIED, &c), "no skip_first_prenorm");
    refenc_config cfg = c.cfg;
    refenc_case_free(&c);

    cfg.skip_first_prenorm = 1, cfg.n_layers = 2;
    refenc_error err;
    encoder_case(&c, &cfg, 73);
    cr_expect(refenc_variant_applies(REFENC_VAR_FIRST_PRENORM_APPLIED, &c));
    cr_expect(!refenc_variant_applies(REFENC_VAR_PRE_POST_SWAPPED, &c), "Post-LN needs layer 0's norm1");
    const double w1 = c.params.layers[1].norm1_weight[3], e5 = c.params.embedding[5];
    refenc_variant_hooks hooks;
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_FIRST_PRENORM_APPLIED, &c, &hooks, &err), REFENC_OK);
    cr_expect_eq(c.cfg.skip_first_prenorm, 0);
    const refenc_layer_params *l0 = &c.params.layers[0];
    cr_assert_not_null(l0->norm1_weight);
    for (size_t d = 0; d < cfg.d_model; d++)
        cr_expect(l0->norm1_weight[d] == 1.0 && l0->norm1_bias[d] == 0.0, "d %zu", d);
    cr_expect_eq(c.params.layers[1].norm1_weight[3], w1);
    cr_expect_eq(c.params.embedding[5], e5);
    refenc_case_free(&c);

    cr_expect_eq(refenc_case_alloc(&c, REFENC_COMP_LAYERNORM, &cfg, 1, 3, 0, 0, 0, &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "skip_first_prenorm") != NULL, "%s", err.message);
}

/* The sandwich norms' variants (sandwich_norm): they apply only with the
 * key; sandwich_norms_missing clears the key and the layers' post-norm
 * views (the tensors stay); post_attention_norm_as_pre_ffn copies each
 * layer's post-attention norm into its pre-FFN norm; pre_post_swapped does
 * not apply.  An attention case with the key is refused. */
Test(variants, sandwich_norm_variants)
{
    refenc_case c;
    small_case(&c, REFENC_POS_NONE, 6, 0);
    cr_expect(!refenc_variant_applies(REFENC_VAR_SANDWICH_NORMS_MISSING, &c));
    cr_expect(!refenc_variant_applies(REFENC_VAR_POST_ATTENTION_NORM_AS_PRE_FFN, &c));
    refenc_config cfg = c.cfg;
    refenc_case_free(&c);
    cfg.sandwich_norm = 1;
    refenc_error err;
    encoder_case(&c, &cfg, 74);
    cr_expect(refenc_variant_applies(REFENC_VAR_SANDWICH_NORMS_MISSING, &c));
    cr_expect(refenc_variant_applies(REFENC_VAR_POST_ATTENTION_NORM_AS_PRE_FFN, &c));
    cr_expect(!refenc_variant_applies(REFENC_VAR_PRE_POST_SWAPPED, &c), "Post-LN has no place for them");
    refenc_variant_hooks hooks;
    const refenc_layer_params *l0 = &c.params.layers[0];
    cr_assert(l0->norm2_weight[2] != l0->post_attn_norm_weight[2]);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_POST_ATTENTION_NORM_AS_PRE_FFN, &c, &hooks, &err), REFENC_OK);
    for (size_t d = 0; d < cfg.d_model; d++)
        cr_expect(l0->norm2_weight[d] == l0->post_attn_norm_weight[d] && l0->norm2_bias[d] == l0->post_attn_norm_bias[d]);
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_SANDWICH_NORMS_MISSING, &c, &hooks, &err), REFENC_OK);
    cr_expect_eq(c.cfg.sandwich_norm, 0);
    cr_expect(l0->post_attn_norm_weight == NULL && l0->post_ffn_norm_weight == NULL);
    cr_expect_not_null(refenc_params_find(&c.params, "layers.0.post_attn_norm.weight"), "the tensor stays");
    refenc_case_free(&c);

    cr_expect_eq(refenc_case_alloc(&c, REFENC_COMP_ATTENTION, &cfg, 1, 3, 0, 0, 0, &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "sandwich_norm in a case of component 'attention'") != NULL, "%s", err.message);
}

/* bidirectional_run_causally: a bidirectional RoPE + RMSNorm encoder (a
 * decoder's block run as an embedding model) only, not a causal one, not
 * a LayerNorm encoder, not a one-token sequence; the transform sets causal. */
Test(variants, bidirectional_run_causally_applies_to_decoder_blocks_run_bidirectionally)
{
    refenc_case c;
    small_case(&c, REFENC_POS_ROPE, 4, 0);
    cr_expect(!refenc_variant_applies(REFENC_VAR_BIDIRECTIONAL_RUN_CAUSALLY, &c), "LayerNorm: a BERT-style encoder");
    c.cfg.norm_type = REFENC_NORMTYPE_RMSNORM;
    cr_expect(refenc_variant_applies(REFENC_VAR_BIDIRECTIONAL_RUN_CAUSALLY, &c));
    c.cfg.causal = 1;
    cr_expect(!refenc_variant_applies(REFENC_VAR_BIDIRECTIONAL_RUN_CAUSALLY, &c), "causal already");
    c.cfg.causal = 0, c.cfg.positional = REFENC_POS_NONE;
    cr_expect(!refenc_variant_applies(REFENC_VAR_BIDIRECTIONAL_RUN_CAUSALLY, &c), "no RoPE");
    c.cfg.positional = REFENC_POS_ROPE;
    refenc_variant_hooks hooks;
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_BIDIRECTIONAL_RUN_CAUSALLY, &c, &hooks, NULL), REFENC_OK);
    cr_expect_eq(c.cfg.causal, 1);
    refenc_case_free(&c);
}

/* alibi_bias_positive: applies to ALiBi attention of two positions or more
 * (any head count), not to RoPE, not to the slopes component; the transform
 * is the hook alone (the engines negate the slopes). */
Test(variants, alibi_bias_positive_is_a_hook_on_alibi_attention)
{
    refenc_case c;
    small_case(&c, REFENC_POS_ALIBI, 4, 0);
    cr_expect(refenc_variant_applies(REFENC_VAR_ALIBI_BIAS_POSITIVE, &c), "4 heads: the sign is wrong at any H");
    c.component = REFENC_COMP_ALIBI;
    cr_expect(!refenc_variant_applies(REFENC_VAR_ALIBI_BIAS_POSITIVE, &c), "the slopes alone carry no sign");
    c.component = REFENC_COMP_ENCODER;
    const refenc_config before = c.cfg;
    refenc_variant_hooks hooks;
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_ALIBI_BIAS_POSITIVE, &c, &hooks, NULL), REFENC_OK);
    cr_expect(hooks.alibi_bias_positive && !hooks.alibi_slopes_pow2);
    cr_expect(memcmp(&before, &c.cfg, sizeof before) == 0, "the config is untouched");
    refenc_case_free(&c);
    small_case(&c, REFENC_POS_ROPE, 4, 0);
    cr_expect(!refenc_variant_applies(REFENC_VAR_ALIBI_BIAS_POSITIVE, &c), "RoPE: no ALiBi bias");
    refenc_case_free(&c);
}

/* rmsnorm_mean_subtracted: applies to RMSNorm with the weight w (Llama, T5),
 * not to Gemma's (1 + w) nor to LayerNorm; the transform makes the norms
 * bias-free LayerNorms, and the reference's norm on the transformed config
 * is the RMSNorm of the centred row: y = (x - mu) / sqrt(var + eps) w,
 * var = mean((x - mu)^2), computed both ways.  The two differ by the
 * roundings of the mean and of two normalisations of D terms each, as in
 * unbiased_variance_transform_is_layernorm_with_d_minus_1: gamma_{2D+14}
 * times LayerNorm's condition 2 max|x| / sd times |w| (1 + |n_d|).
 * Negative control: the RMSNorm of the row itself is far from it. */
Test(variants, rmsnorm_mean_subtracted_is_rmsnorm_of_the_centred_row)
{
    refenc_case c;
    small_case(&c, REFENC_POS_NONE, 6, 0);
    cr_expect(!refenc_variant_applies(REFENC_VAR_RMSNORM_MEAN_SUBTRACTED, &c), "LayerNorm subtracts it already");
    c.cfg.norm_type = REFENC_NORMTYPE_RMSNORM, c.cfg.norm_bias = 0;
    cr_expect(refenc_variant_applies(REFENC_VAR_RMSNORM_MEAN_SUBTRACTED, &c));
    c.cfg.rmsnorm_offset = 1;
    cr_expect(!refenc_variant_applies(REFENC_VAR_RMSNORM_MEAN_SUBTRACTED, &c), "Gemma's (1 + w)");
    c.cfg.rmsnorm_offset = 0;
    const size_t D = c.cfg.d_model;
    double x[24], centred[24], want[24], got[24], plain[24];
    gsl_rng *r = test_rng(74);
    test_fill_gaussian(x, D, 0.7, 1.0, r);
    gsl_rng_free(r);
    const double *w = c.params.layers[0].norm1_weight;
    long double mu = 0, ss = 0, xmax = 0;
    for (size_t d = 0; d < D; d++)
        mu += x[d], xmax = fmaxl(xmax, fabsl(x[d]));
    mu /= D;
    for (size_t d = 0; d < D; d++)
        centred[d] = (double)(x[d] - mu), ss += (x[d] - mu) * (x[d] - mu);
    refenc_rmsnorm_forward(want, centred, w, 1, D, c.cfg.layer_norm_eps, 0);
    refenc_norm_forward(plain, x, w, NULL, 1, D, c.cfg.layer_norm_eps, &c.cfg);
    refenc_variant_hooks hooks;
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_RMSNORM_MEAN_SUBTRACTED, &c, &hooks, NULL), REFENC_OK);
    cr_expect(c.cfg.norm_type == REFENC_NORMTYPE_LAYERNORM && !c.cfg.norm_bias);
    refenc_norm_forward(got, x, w, NULL, 1, D, c.cfg.layer_norm_eps, &c.cfg);
    const double u = 0x1p-53, g = (2 * D + 14) * u / (1 - (2 * D + 14) * u);
    const long double kappa = 2 * xmax / sqrtl(ss / D + c.cfg.layer_norm_eps);
    int far = 0;
    for (size_t d = 0; d < D; d++) {
        const double bound = g * (double)kappa * fabs(w[d]) * (1 + fabs(want[d] / w[d]));
        cr_expect_leq(fabs(got[d] - want[d]), bound, "d %zu: %.17g against %.17g", d, got[d], want[d]);
        far |= fabs(plain[d] - want[d]) > 1e3 * bound;
    }
    cr_expect(far, "control: the RMSNorm of the uncentred row (mean 0.7) should be far from it");
    refenc_case_free(&c);
}

/* layer_pattern_shifted: applies to a pattern of period >= 2 where a local
 * layer differs from a global one (a window that cuts a key), not to period
 * 1 nor under RoPE scaling; the transform moves the period to the other
 * rule, so layer 0 (global under ModernBERT's l % n == 0) becomes local and
 * layer n - 1 global (Gemma's (l + 1) % n == 0), and back.  Negative
 * control: the unshifted pattern makes layer 0 global. */
Test(variants, layer_pattern_shifted_moves_the_global_layers_by_one)
{
    refenc_case c;
    small_case(&c, REFENC_POS_ROPE, 4, 0);
    c.cfg.n_layers = 3, c.cfg.local_attention = 2; /* |i - j| <= 1 of 5 positions */
    cr_expect(!refenc_variant_applies(REFENC_VAR_LAYER_PATTERN_SHIFTED, &c), "no pattern");
    c.cfg.global_attn_every_n_layers = 1;
    cr_expect(!refenc_variant_applies(REFENC_VAR_LAYER_PATTERN_SHIFTED, &c), "period 1: every layer global");
    c.cfg.global_attn_every_n_layers = 3;
    cr_expect(refenc_variant_applies(REFENC_VAR_LAYER_PATTERN_SHIFTED, &c));
    c.cfg.rope_scaling.type = REFENC_ROPE_SCALING_LINEAR, c.cfg.rope_scaling.factor = 2;
    cr_expect(!refenc_variant_applies(REFENC_VAR_LAYER_PATTERN_SHIFTED, &c), "scaled RoPE: the rules differ there too");
    refenc_rope_scaling_default(&c.cfg.rope_scaling);
    cr_expect(!refenc_layer_windowed(&c.cfg, 0) && refenc_layer_windowed(&c.cfg, 2), "control: ModernBERT's rule");
    refenc_variant_hooks hooks;
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_LAYER_PATTERN_SHIFTED, &c, &hooks, NULL), REFENC_OK);
    cr_expect(c.cfg.global_attn_every_n_layers == 0 && c.cfg.sliding_window_pattern == 3);
    cr_expect(refenc_layer_windowed(&c.cfg, 0) && refenc_layer_windowed(&c.cfg, 1) && !refenc_layer_windowed(&c.cfg, 2),
              "Gemma's rule: layer 2 global");
    cr_assert_eq(refenc_variant_apply(REFENC_VAR_LAYER_PATTERN_SHIFTED, &c, &hooks, NULL), REFENC_OK);
    cr_expect(c.cfg.global_attn_every_n_layers == 3 && c.cfg.sliding_window_pattern == 0, "and back");
    refenc_case_free(&c);
}
