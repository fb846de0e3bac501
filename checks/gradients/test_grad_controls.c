/* Negative controls of the gradient properties: every named backward bug of
 * issue 25 (mutants.c) must make the property docs/gradients.md names for
 * it fail.  The other properties it fails are listed in the test's log. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "gradcheck.h"

/* the property that must catch each mutant (docs/gradients.md's table) */
static const struct {
    const char *mutant, *property;
} catches[] = {
    {"layernorm_mean_subtracted_twice", "layernorm_rows"},
    {"layernorm_mean_term_missing", "layernorm_rows"},
    {"layernorm_variance_term_missing", "layernorm_rows"},
    {"softmax_backward_without_rowsum", "softmax_rows"},
    {"attention_backward_without_rowsum", "attention_rows"},
    {"attention_scale_missing", "attention_adjoint"},
    {"attention_scale_applied_twice", "attention_adjoint"},
    {"attention_dk_from_unmasked_scores", "attention_masked_keys"},
    {"rope_backward_rotates_by_plus_theta", "rope_fd"},
    {"exact_gelu_with_tanh_derivative", "activation_fd"},
    {"bias_gradient_not_summed_over_batch", "linear_outer"},
    {"embedding_gradient_overwritten", "embedding_repeats"},
    {"linear_dw_transposed", "linear_outer"},
};

static const gc_kernels *mutant(const char *name)
{
    for (size_t i = 0; i < gc_n_mutants; i++)
        if (strcmp(gc_mutants[i].name, name) == 0)
            return &gc_mutants[i];
    return NULL;
}

/* Runs every property on mutant m; requires `expected` to fail. */
static void caught(const char *m, const char *expected)
{
    const gc_kernels *K = mutant(m);
    cr_assert(K != NULL, "no mutant %s", m);
    char failed[512] = "";
    int expected_failed = 0;
    for (size_t p = 0; p < gc_n_properties; p++) {
        gsl_rng *r = test_rng(2600 + p);
        test_worst w;
        test_worst_init(&w);
        const size_t bad = gc_properties[p].run(K, r, &w);
        gsl_rng_free(r);
        if (bad > 0) {
            strncat(failed, " ", sizeof failed - strlen(failed) - 1);
            strncat(failed, gc_properties[p].name, sizeof failed - strlen(failed) - 1);
            if (strcmp(gc_properties[p].name, expected) == 0) {
                expected_failed = 1;
                char msg[512];
                cr_log_info("%s: %s fails: %zu violations; %s", m, expected, bad,
                            test_worst_describe(&w, msg, sizeof msg));
            }
        }
    }
    cr_log_info("%s fails:%s", m, failed);
    cr_assert(expected_failed, "the bug %s passed %s (it fails only:%s)", m, expected,
              failed[0] ? failed : " nothing");
}

Test(grad_controls, every_named_bug_has_a_catching_property)
{
    cr_assert_eq(gc_n_mutants, sizeof catches / sizeof catches[0]);
    for (size_t i = 0; i < gc_n_mutants; i++)
        cr_assert_str_eq(gc_mutants[i].name, catches[i].mutant);
}

#define CONTROL(m, p) \
    Test(grad_controls, m) { caught(#m, p); }
CONTROL(layernorm_mean_subtracted_twice, "layernorm_rows")
CONTROL(layernorm_mean_term_missing, "layernorm_rows")
CONTROL(layernorm_variance_term_missing, "layernorm_rows")
CONTROL(softmax_backward_without_rowsum, "softmax_rows")
CONTROL(attention_backward_without_rowsum, "attention_rows")
CONTROL(attention_scale_missing, "attention_adjoint")
CONTROL(attention_scale_applied_twice, "attention_adjoint")
CONTROL(attention_dk_from_unmasked_scores, "attention_masked_keys")
CONTROL(rope_backward_rotates_by_plus_theta, "rope_fd")
CONTROL(exact_gelu_with_tanh_derivative, "activation_fd")
CONTROL(bias_gradient_not_summed_over_batch, "linear_outer")
CONTROL(embedding_gradient_overwritten, "embedding_repeats")
CONTROL(linear_dw_transposed, "linear_outer")
