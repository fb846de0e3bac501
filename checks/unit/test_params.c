/* The parameter container (ref/params.h): names, shapes and order as in a
 * PyTorch state_dict, one contiguous block, deterministic seeded
 * initialisation, a zeroed padding row, and the documented scales. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>

#include "../../ref/core/params.h"
#include "unit.h"
#include "../../ref/tool/random_params.h"

/* D = 6, H = 2, F = 10, N = 2, V = 7, P = 5, learned PE, final norm */
static void small_config(refenc_config *c)
{
    refenc_config_default(c);
    c->d_model = 6, c->n_heads = 2, c->d_ff = 10, c->n_layers = 2;
    c->vocab_size = 7, c->padding_idx = 3, c->max_len = 5;
    c->positional = REFENC_POS_LEARNED;
}

Test(params, names_and_shapes_follow_the_state_dict_order)
{
    /* nn.TransformerEncoderLayer registers self_attn (in_proj_weight,
     * in_proj_bias, out_proj), linear1, linear2, norm1, norm2 in this order */
    static const struct {
        const char *name;
        size_t ndim, rows, cols;
    } want[] = {
        {"embedding.weight", 2, 7, 6},
        {"pos_embedding.weight", 2, 5, 6},
        {"layers.0.self_attn.in_proj_weight", 2, 18, 6},
        {"layers.0.self_attn.in_proj_bias", 1, 18, 0},
        {"layers.0.self_attn.out_proj.weight", 2, 6, 6},
        {"layers.0.self_attn.out_proj.bias", 1, 6, 0},
        {"layers.0.linear1.weight", 2, 10, 6},
        {"layers.0.linear1.bias", 1, 10, 0},
        {"layers.0.linear2.weight", 2, 6, 10},
        {"layers.0.linear2.bias", 1, 6, 0},
        {"layers.0.norm1.weight", 1, 6, 0},
        {"layers.0.norm1.bias", 1, 6, 0},
        {"layers.0.norm2.weight", 1, 6, 0},
        {"layers.0.norm2.bias", 1, 6, 0},
        {"layers.1.self_attn.in_proj_weight", 2, 18, 6},
        {"layers.1.self_attn.in_proj_bias", 1, 18, 0},
        {"layers.1.self_attn.out_proj.weight", 2, 6, 6},
        {"layers.1.self_attn.out_proj.bias", 1, 6, 0},
        {"layers.1.linear1.weight", 2, 10, 6},
        {"layers.1.linear1.bias", 1, 10, 0},
        {"layers.1.linear2.weight", 2, 6, 10},
        {"layers.1.linear2.bias", 1, 6, 0},
        {"layers.1.norm1.weight", 1, 6, 0},
        {"layers.1.norm1.bias", 1, 6, 0},
        {"layers.1.norm2.weight", 1, 6, 0},
        {"layers.1.norm2.bias", 1, 6, 0},
        {"norm.weight", 1, 6, 0},
        {"norm.bias", 1, 6, 0},
    };
    const size_t n_want = sizeof want / sizeof want[0];
    refenc_config c;
    small_config(&c);
    refenc_params p;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&p, &c, &err), REFENC_OK, "%s", err.message);

    cr_expect_eq(p.n_tensors, n_want, "%zu tensors, want %zu", p.n_tensors, n_want);
    const double *next = p.block;
    size_t total = 0;
    for (size_t i = 0; i < n_want && i < p.n_tensors; i++) {
        const refenc_tensor *t = &p.tensors[i];
        cr_expect_str_eq(t->name, want[i].name, "tensor %zu", i);
        cr_expect_eq(t->ndim, want[i].ndim, "%s: ndim", want[i].name);
        cr_expect_eq(t->shape[0], want[i].rows, "%s: shape[0]", want[i].name);
        if (want[i].ndim == 2)
            cr_expect_eq(t->shape[1], want[i].cols, "%s: shape[1]", want[i].name);
        const size_t size = want[i].rows * (want[i].ndim == 2 ? want[i].cols : 1);
        cr_expect_eq(t->size, size, "%s: size", want[i].name);
        /* one block, tensors back to back in table order */
        cr_expect(t->data == next, "%s does not follow the previous tensor in the block", t->name);
        next = t->data + t->size;
        total += t->size;
        cr_expect(refenc_params_find(&p, want[i].name) == t, "find(%s)", want[i].name);
    }
    /* 740 by hand in test_config.c */
    cr_expect_eq(total, 740);
    cr_expect_eq(p.n_values, 740);
    cr_expect_eq(refenc_config_param_count(&c), 740);
    cr_expect_null(refenc_params_find(&p, "layers.2.norm1.weight"), "a third layer was found");
    cr_expect_null(refenc_params_find(&p, "encoder.layers.0.norm1.weight"), "unknown prefix found");

    /* the named views are the table's tensors */
    cr_expect(p.embedding == refenc_params_find(&p, "embedding.weight")->data);
    cr_expect(p.pos_embedding == refenc_params_find(&p, "pos_embedding.weight")->data);
    cr_expect(p.layers[1].linear2_weight == refenc_params_find(&p, "layers.1.linear2.weight")->data);
    cr_expect(p.layers[0].norm2_bias == refenc_params_find(&p, "layers.0.norm2.bias")->data);
    cr_expect(p.norm_weight == refenc_params_find(&p, "norm.weight")->data);
    /* zeroed at allocation */
    for (size_t i = 0; i < p.n_values; i++)
        if (p.block[i] != 0.0)
            cr_expect_fail("value %zu is %g after alloc, not 0", i, p.block[i]);
    refenc_params_free(&p);
    cr_expect_null(p.block, "free leaves the container empty");
}

/* The embedding path's tensors: the token-type table after the word
 * embeddings, the embedding LayerNorm after the position table, before the
 * layers (HF BertEmbeddings' order: word, position, token type, LayerNorm,
 * but refenc keeps its own table order: the names map, docs/families.md). */
Test(params, embedding_path_tensors_sit_before_the_layers)
{
    refenc_config c;
    small_config(&c);
    c.type_vocab_size = 3, c.embedding_norm = 1, c.n_layers = 1;
    refenc_params p;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&p, &c, &err), REFENC_OK, "%s", err.message);
    static const char *const first[] = {"embedding.weight", "token_type_embedding.weight",
                                        "pos_embedding.weight", "embedding_norm.weight",
                                        "embedding_norm.bias", "layers.0.self_attn.in_proj_weight"};
    for (size_t i = 0; i < 6; i++)
        cr_expect_str_eq(p.tensors[i].name, first[i], "tensor %zu", i);
    const refenc_tensor *tt = refenc_params_find(&p, "token_type_embedding.weight");
    cr_assert_not_null(tt);
    cr_expect(tt->shape[0] == 3 && tt->shape[1] == 6 && tt->data == p.token_type_embedding);
    cr_expect(p.embedding_norm_weight == refenc_params_find(&p, "embedding_norm.weight")->data);
    cr_expect(p.embedding_norm_bias == refenc_params_find(&p, "embedding_norm.bias")->data);
    cr_expect_eq(p.n_tensors, 5 + 12 + 2);
    cr_expect_eq(p.n_values, refenc_config_param_count(&c));
    refenc_params_free(&p);
    /* negative control: the default config has none of them */
    small_config(&c);
    cr_assert_eq(refenc_params_alloc(&p, &c, &err), REFENC_OK, "%s", err.message);
    cr_expect_null(refenc_params_find(&p, "token_type_embedding.weight"));
    cr_expect_null(refenc_params_find(&p, "embedding_norm.weight"));
    cr_expect(p.token_type_embedding == NULL && p.embedding_norm_weight == NULL);
    refenc_params_free(&p);
}

/* Optional tensors are absent when the config has no use for them. */
Test(params, optional_tensors_are_absent_when_unused)
{
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = 4, c.n_heads = 1, c.d_ff = 3, c.n_layers = 1, c.final_norm = 0;
    refenc_params p;
    cr_assert_eq(refenc_params_alloc(&p, &c, NULL), REFENC_OK);
    cr_expect_eq(p.n_tensors, 12, "one layer without embedding, PE table or final norm");
    cr_expect_null(p.embedding);
    cr_expect_null(p.pos_embedding);
    cr_expect_null(p.norm_weight);
    cr_expect_null(refenc_params_find(&p, "norm.weight"));
    cr_expect_str_eq(p.tensors[0].name, "layers.0.self_attn.in_proj_weight");
    refenc_params_free(&p);
}

static void init_with_seed(refenc_params *p, const refenc_config *c, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    cr_assert_not_null(r);
    gsl_rng_set(r, seed);
    refenc_params_init_random(p, c, r);
    gsl_rng_free(r);
}

Test(params, init_random_same_seed_is_bit_identical_and_another_seed_differs)
{
    refenc_config c;
    small_config(&c);
    refenc_params a, b, d;
    cr_assert_eq(refenc_params_alloc(&a, &c, NULL), REFENC_OK);
    cr_assert_eq(refenc_params_alloc(&b, &c, NULL), REFENC_OK);
    cr_assert_eq(refenc_params_alloc(&d, &c, NULL), REFENC_OK);
    const unsigned long seed = test_seed();
    init_with_seed(&a, &c, seed);
    init_with_seed(&b, &c, seed);
    init_with_seed(&d, &c, seed + 1);
    cr_expect(memcmp(a.block, b.block, a.n_values * sizeof(double)) == 0,
              "seed %lu twice gave different parameters", seed);
    /* every tensor differs with another seed (not only the first) */
    for (size_t t = 0; t < a.n_tensors; t++) {
        const refenc_tensor *ta = &a.tensors[t], *td = &d.tensors[t];
        cr_expect(memcmp(ta->data, td->data, ta->size * sizeof(double)) != 0,
                  "%s: seeds %lu and %lu gave the same values", ta->name, seed, seed + 1);
    }
    refenc_params_free(&a);
    refenc_params_free(&b);
    refenc_params_free(&d);
}

Test(params, init_random_zeroes_the_padding_row_only)
{
    refenc_config c;
    small_config(&c); /* padding_idx 3 of V = 7 */
    refenc_params p;
    cr_assert_eq(refenc_params_alloc(&p, &c, NULL), REFENC_OK);
    for (size_t i = 0; i < p.n_values; i++) /* a stale value must be overwritten */
        p.block[i] = 2.385;
    init_with_seed(&p, &c, test_seed());
    for (size_t v = 0; v < 7; v++)
        for (size_t d = 0; d < 6; d++) {
            const double x = p.embedding[v * 6 + d];
            if (v == 3)
                EXPECT_EXACT(x, 0.0, "padding row, column %zu", d);
            else
                cr_expect(x != 0.0 && x != 2.385, "row %zu column %zu = %g", v, d, x);
        }
    /* negative control: without a padding index no row is zero */
    c.padding_idx = -1;
    init_with_seed(&p, &c, test_seed());
    int zero_row = 1;
    for (size_t d = 0; d < 6; d++)
        zero_row &= p.embedding[3 * 6 + d] == 0.0;
    cr_expect(!zero_row, "row 3 is zero without a padding index");
    refenc_params_free(&p);
}

/* The documented scales (params.h), checked on tensors large enough for the
 * sample statistics to be sharp.  For n Gaussian samples the sample variance
 * s^2 has relative standard deviation sqrt(2/n) and the sample mean has
 * standard deviation sigma/sqrt(n); the bounds below are 6 standard
 * deviations (a false alarm probability below 1e-8 per check, whatever
 * REFENC_SEED is). */
static void expect_scale(const refenc_params *p, const char *name, double mean, double sigma)
{
    const refenc_tensor *t = refenc_params_find(p, name);
    cr_assert_not_null(t, "%s missing", name);
    const double n = (double)t->size;
    double m = 0.0, s2 = 0.0;
    for (size_t i = 0; i < t->size; i++)
        m += t->data[i];
    m /= n;
    for (size_t i = 0; i < t->size; i++)
        s2 += (t->data[i] - m) * (t->data[i] - m);
    s2 /= n - 1;
    cr_expect(fabs(m - mean) <= 6 * sigma / sqrt(n), "%s: mean %g, want %g +- %g (seed %lu)", name,
              m, mean, 6 * sigma / sqrt(n), test_seed());
    cr_expect(fabs(s2 / (sigma * sigma) - 1) <= 6 * sqrt(2 / n),
              "%s: variance %g, want %g (1 +- %g) (seed %lu)", name, s2, sigma * sigma,
              6 * sqrt(2 / n), test_seed());
}

Test(params, init_random_uses_the_documented_scale_per_tensor)
{
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = 64, c.n_heads = 4, c.d_ff = 144, c.n_layers = 1, c.vocab_size = 300;
    c.positional = REFENC_POS_LEARNED, c.max_len = 100;
    refenc_params p;
    cr_assert_eq(refenc_params_alloc(&p, &c, NULL), REFENC_OK);
    init_with_seed(&p, &c, test_seed());
    expect_scale(&p, "layers.0.self_attn.in_proj_weight", 0.0, 1.0 / 8.0); /* 1/sqrt(fan_in 64) */
    expect_scale(&p, "layers.0.linear1.weight", 0.0, 1.0 / 8.0);           /* fan_in D = 64 */
    expect_scale(&p, "layers.0.linear2.weight", 0.0, 1.0 / 12.0);          /* fan_in F = 144 */
    expect_scale(&p, "embedding.weight", 0.0, 1.0 / 8.0);                  /* 1/sqrt(D) */
    expect_scale(&p, "pos_embedding.weight", 0.0, 0.5);
    expect_scale(&p, "layers.0.linear1.bias", 0.0, 0.1);
    expect_scale(&p, "layers.0.self_attn.in_proj_bias", 0.0, 0.1);
    /* LayerNorm gamma = 1 + N(0, 0.01): only 64 values, so check each lies
     * within 6 sigma of 1 and the final norm's beta within 6 sigma of 0 */
    const refenc_tensor *g = refenc_params_find(&p, "norm.weight");
    const refenc_tensor *b = refenc_params_find(&p, "norm.bias");
    for (size_t i = 0; i < 64; i++) {
        cr_expect(fabs(g->data[i] - 1.0) <= 0.6, "norm.weight[%zu] = %g", i, g->data[i]);
        cr_expect(fabs(b->data[i]) <= 0.6, "norm.bias[%zu] = %g", i, b->data[i]);
    }
    /* negative control: the 1/fan_in scale of linear2 is not that of linear1 */
    const refenc_tensor *w2 = refenc_params_find(&p, "layers.0.linear2.weight");
    double s2 = 0.0;
    for (size_t i = 0; i < w2->size; i++)
        s2 += w2->data[i] * w2->data[i];
    s2 /= (double)w2->size;
    cr_expect(fabs(s2 * 64.0 - 1) > 6 * sqrt(2.0 / (double)w2->size),
              "linear2.weight has the variance of fan_in D, not F");
    refenc_params_free(&p);
}

/* alloc on an invalid config: the status, and an empty container safe to free. */
Test(params, alloc_refuses_an_invalid_config_and_leaves_it_empty)
{
    refenc_config c;
    refenc_config_default(&c);
    c.n_heads = 5; /* 64 % 5 != 0 */
    refenc_params p;
    refenc_error err;
    cr_expect_eq(refenc_params_alloc(&p, &c, &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "n_heads") != NULL, "message: %s", err.message);
    cr_expect_null(p.block);
    cr_expect_null(p.tensors);
    cr_expect_eq(p.n_tensors, 0);
    refenc_params_free(&p);
    refenc_params_free(NULL);
}
