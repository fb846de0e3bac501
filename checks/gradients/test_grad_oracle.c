/* The reference's backward against the oracle's correctly rounded backward
 * (oracle_compare.c): on the reference every element lies within its
 * derived bound; negative controls: each named backward bug (mutants.c)
 * puts some element of its kernel outside. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "oracle_compare.h"
#include "../../ref/oracle/layer_backward.h"

static void holds(gc_property run, unsigned long stream)
{
    gc_holds(run, &gc_reference, stream);
}

Test(grad_oracle, linear_dx_dW_db_within_the_derived_bound) { holds(go_linear, 2601); }
Test(grad_oracle, layernorm_dx_dgamma_dbeta_within_the_derived_bound) { holds(go_layernorm, 2602); }
Test(grad_oracle, softmax_with_masks_within_the_derived_bound) { holds(go_softmax, 2603); }
Test(grad_oracle, attention_every_mask_kind_within_the_derived_bound) { holds(go_attention, 2604); }
Test(grad_oracle, rope_both_layouts_within_the_derived_bound) { holds(go_rope, 2605); }
Test(grad_oracle, relu_agrees_bit_for_bit) { holds(go_activation_relu, 2606); }
Test(grad_oracle, gelu_gelu_tanh_quick_gelu_silu_within_the_derived_bound) { holds(go_activation_gelu, 2608); }
Test(grad_oracle, embedding_scatter_add_within_the_derived_bound) { holds(go_embedding, 2607); }
Test(grad_oracle, lookup_token_types_learned_pe_within_the_derived_bound) { holds(go_scatter_unscaled, 2609); }

/* The comparison of the kernel a mutant replaces (NULL: none here). */
static gc_property comparison_of(const gc_kernels *m)
{
    const gc_kernels *R = &gc_reference;
    if (m->linear != R->linear)
        return go_linear;
    if (m->layernorm != R->layernorm)
        return go_layernorm;
    if (m->softmax != R->softmax)
        return go_softmax;
    if (m->attention != R->attention)
        return go_attention;
    if (m->rope != R->rope)
        return go_rope;
    if (m->embedding != R->embedding)
        return go_embedding;
    if (m->activation != R->activation)
        return go_activation_gelu;
    return NULL;
}

/* Negative controls: every named bug fails the comparison of its kernel. */
Test(grad_oracle, every_named_backward_bug_falls_outside_the_bound)
{
    size_t controls = 0;
    for (size_t i = 0; i < gc_n_mutants; i++) {
        const gc_property run = comparison_of(&gc_mutants[i]);
        if (run == NULL)
            continue;
        gsl_rng *r = test_rng(2690 + i);
        test_worst w;
        test_worst_init(&w);
        const size_t bad = run(&gc_mutants[i], r, &w);
        gsl_rng_free(r);
        char msg[512];
        cr_log_info("%s: %zu outside; %s", gc_mutants[i].name, bad,
                    test_worst_describe(&w, msg, sizeof msg));
        cr_expect(bad > 0, "the named bug %s passes the comparison with the oracle",
                  gc_mutants[i].name);
        controls++;
    }
    cr_assert_eq(controls, gc_n_mutants, "%zu controls ran", controls);
}

/* Negative control: the scatter-adds summed over batch item 0 only (each of
 * lookup, token types, learned PE) fall outside their bound. */
Test(grad_oracle, scatter_adds_not_summed_over_the_batch_fall_outside)
{
    gsl_rng *r = test_rng(2609);
    test_worst w;
    test_worst_init(&w);
    const size_t bad = go_scatter_unscaled(&gc_mutants[0], r, &w);
    gsl_rng_free(r);
    cr_assert(bad >= 3, "only %zu outside", bad);
}

/* ---- the oracle's adjoint identity (oracle_adjoint.c) ---------------------- */

#include "oracle_adjoint.h"

static void adjoint_holds(gc_property run, unsigned long stream)
{
    gc_holds(run, NULL, stream); /* NULL: the oracle's backward */
}

Test(oracle_adjoint, linear) { adjoint_holds(ad_linear, 2621); }
Test(oracle_adjoint, layernorm) { adjoint_holds(ad_layernorm, 2622); }
Test(oracle_adjoint, softmax_with_masks) { adjoint_holds(ad_softmax, 2623); }
Test(oracle_adjoint, attention_every_mask_kind) { adjoint_holds(ad_attention, 2624); }
Test(oracle_adjoint, rope_both_layouts) { adjoint_holds(ad_rope, 2625); }
Test(oracle_adjoint, every_activation) { adjoint_holds(ad_activation, 2626); }
Test(oracle_adjoint, embedding_with_repeated_tokens) { adjoint_holds(ad_embedding, 2627); }

static gc_property adjoint_of(const gc_kernels *m)
{
    const gc_kernels *R = &gc_reference;
    return m->linear != R->linear         ? ad_linear
           : m->layernorm != R->layernorm ? ad_layernorm
           : m->softmax != R->softmax     ? ad_softmax
           : m->attention != R->attention ? ad_attention
           : m->rope != R->rope           ? ad_rope
           : m->embedding != R->embedding ? ad_embedding
           : m->activation != R->activation ? ad_activation
                                            : NULL;
}

/* Negative controls: the identity on the oracle's forward rejects the
 * gradient of every named backward bug (each replaces g). */
Test(oracle_adjoint, every_named_backward_bug_breaks_the_identity)
{
    for (size_t i = 0; i < gc_n_mutants; i++) {
        const gc_property run = adjoint_of(&gc_mutants[i]);
        cr_assert_not_null(run, "%s", gc_mutants[i].name);
        gsl_rng *r = test_rng(2680 + i);
        test_worst w;
        test_worst_init(&w);
        const size_t bad = run(&gc_mutants[i], r, &w);
        gsl_rng_free(r);
        char msg[512];
        cr_log_info("%s: %zu broken; %s", gc_mutants[i].name, bad,
                    test_worst_describe(&w, msg, sizeof msg));
        cr_expect(bad > 0, "the named bug %s keeps the oracle's adjoint identity", gc_mutants[i].name);
    }
}

/* ---- the twins' optional outputs and refusals ------------------------------ */

#include "../../ref/oracle/backward.h"

/* Without dx and without a bias, the twin computes dW alone: the same dW. */
Test(grad_oracle, linear_twin_without_dx_and_bias_gives_the_same_dW)
{
    enum { N = 3, IN = 2, OUT = 2 };
    const double dy[N * OUT] = {1, -2, 0.5, 3, -1, 0.25}, x[N * IN] = {2, 1, -1, 4, 0.5, -3};
    const double W[OUT * IN] = {1, 2, 3, 4};
    double dx[N * IN], dW1[OUT * IN] = {0}, dW2[OUT * IN] = {0}, db[OUT] = {0};
    cr_assert_eq(refenc_mp_linear_backward(dx, dW1, db, dy, x, W, N, IN, OUT, 192, NULL), 0);
    cr_assert_eq(refenc_mp_linear_backward(NULL, dW2, NULL, dy, x, W, N, IN, OUT, 192, NULL), 0);
    for (size_t i = 0; i < OUT * IN; i++)
        cr_assert_eq(dW1[i], dW2[i], "dW[%zu]", i);
    cr_assert_eq(dW1[0], 1 * 2 + 0.5 * -1 + -1 * 0.5); /* sum_n dy[n,0] x[n,0], exact */
    cr_assert_eq(db[1], -2 + 3 + 0.25);
}

/* A precision outside the limits is refused with a message, nothing written. */
Test(grad_oracle, a_precision_outside_the_limits_is_refused)
{
    double dx[2] = {7, 7};
    const double dy[2] = {1, 2}, x[2] = {0.5, -0.5};
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_activation_backward(dx, dy, x, 2, REFENC_ACT_GELU, 8, &rep), REFENC_EINVAL);
    cr_assert(rep.error.message[0] != '\0');
    cr_assert(dx[0] == 7 && dx[1] == 7);
}

/* The encoder twin refuses gradients of another config and an invalid
 * input, with a message, before computing anything. */
Test(grad_oracle, encoder_twin_refuses_mismatched_gradients_and_bad_input)
{
    refenc_config a, b;
    refenc_config_default(&a);
    a.d_model = 4, a.n_heads = 2, a.d_ff = 4, a.n_layers = 1, a.vocab_size = 0;
    b = a;
    b.d_ff = 6;
    refenc_params p, g;
    cr_assert_eq(refenc_params_alloc(&p, &a, NULL), 0);
    cr_assert_eq(refenc_params_alloc(&g, &b, NULL), 0);
    double x[8] = {0}, dY[8] = {0};
    refenc_input in = {.B = 1, .L = 2, .x = x};
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_encoder_backward(&g, NULL, NULL, &p, &a, &in, dY, 192, &rep), REFENC_EINVAL);
    cr_assert(strstr(rep.error.message, "gradients") != NULL, "%s", rep.error.message);
    in.x = NULL; /* neither tokens nor x */
    cr_assert_eq(refenc_mp_encoder_backward(&p, NULL, NULL, &p, &a, &in, dY, 192, &rep), REFENC_EINVAL);
    cr_assert(rep.error.message[0] != '\0');
    refenc_params_free(&g), refenc_params_free(&p);
}

/* Blocks without an MPFR backward yet (Gemma's attention conventions, the
 * windows and layer patterns, Qwen's and T5's attention keys, the pooling,
 * the sandwich norms, a layer without its attention norm) are refused by
 * name, never computed as something else; the blocks that have one now
 * (RMSNorm, the gated FFN, bias-free norms and linears, RoPE scaling,
 * grouped-query attention and head_dim) get past the check.  Control: the
 * same config with the defaults gets past it too. */
Test(grad_oracle, encoder_twin_refuses_blocks_it_cannot_differentiate)
{
    refenc_config a;
    refenc_config_default(&a);
    a.d_model = 4, a.n_heads = 2, a.d_ff = 4, a.n_layers = 1, a.vocab_size = 0;
    refenc_params p;
    cr_assert_eq(refenc_params_alloc(&p, &a, NULL), 0);
    double x[8] = {0}, dY[8] = {0};
    refenc_input in = {.B = 1, .L = 2, .x = x};
    refenc_mp_report rep;
    for (int i = 0; i < 8; i++) { /* differentiated by the twins now */
        refenc_config c = a;
        if (i == 0)
            c.norm_type = REFENC_NORMTYPE_RMSNORM, c.norm_bias = 0;
        else if (i == 1)
            c.ffn_type = REFENC_FFN_GLU;
        else if (i == 2)
            c.norm_bias = 0;
        else if (i == 3)
            c.linear_bias = 0;
        else if (i == 4)
            c.rope_scaling.type = REFENC_ROPE_SCALING_LINEAR, c.rope_scaling.factor = 4;
        else if (i == 5)
            c.rope_scaling.partial_rotary_factor = 0.5;
        else if (i == 6)
            c.n_kv_heads = 1; /* multi-query: dK, dV summed over the group */
        else
            c.head_dim = 4;   /* 2 heads of 4 over D 4 */
        cr_expect_eq(refenc_mpb_blocks_supported(&c, &rep.error), REFENC_OK, "%d: %s", i, rep.error.message);
    }
    const char *keys[8] = {"attn_logit_softcapping", "query_pre_attn_scalar", "sliding_window",
                           "local_attention", "global_attn_every_n_layers", "sliding_window_pattern",
                           "embedding_normalizer_dtype", "pooling"};
    for (int i = 0; i < 8; i++) {
        refenc_config c = a;
        if (i == 0)
            c.attn_logit_softcapping = 50; /* Gemma 2: the cap's derivative is not applied */
        else if (i == 1)
            c.query_pre_attn_scalar = 3;   /* a scale other than sqrt(Dh) */
        else if (i == 2)
            c.causal = 1, c.sliding_window = 2; /* the window's masks are not in the backward */
        else if (i == 3)
            c.local_attention = 2;
        else if (i == 4)
            c.global_attn_every_n_layers = 2; /* per-layer windows and bases: forward only */
        else if (i == 5)
            c.sliding_window_pattern = 2; /* Gemma 3's pattern: forward only */
        else if (i == 6)
            c.embedding_normalizer_dtype = REFENC_NORMALIZER_BFLOAT16; /* Gemma's rounded sqrt(D): forward only */
        else
            c.pooling = REFENC_POOL_LAST_TOKEN; /* the pooled embedding: forward only */
        cr_assert_eq(refenc_mpb_blocks_supported(&c, &rep.error), REFENC_EINVAL);
        cr_expect(strstr(rep.error.message, keys[i]) != NULL, "%s", rep.error.message);
        cr_expect_eq(refenc_mp_encoder_backward(&p, NULL, NULL, &p, &c, &in, dY, 192, &rep), REFENC_EINVAL);
        cr_expect(strstr(rep.error.message, keys[i]) != NULL, "%s", rep.error.message);
    }
    cr_expect_eq(refenc_mpb_blocks_supported(&a, &rep.error), REFENC_OK);
    refenc_params_free(&p);
}
