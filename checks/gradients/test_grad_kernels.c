/* The backward kernels' properties on the reference (gradcheck.h,
 * docs/gradients.md).  Each property's negative controls, the named bugs,
 * are in test_grad_controls.c. */
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "gradcheck.h"

/* One property on the reference, its own seeded stream (gradcheck.h). */
static void holds(gc_property run, unsigned long stream)
{
    gc_holds(run, &gc_reference, stream);
}

Test(grad_linear, finite_differences_of_dx_dW_db) { holds(gp_linear_fd, 2501); }
Test(grad_linear, dW_is_the_sum_over_tokens_of_outer_products) { holds(gp_linear_outer, 2502); }
Test(grad_layernorm, input_gradient_rows_sum_to_zero_and_are_orthogonal_to_xhat) { holds(gp_layernorm_rows, 2503); }
Test(grad_layernorm, finite_differences_of_dx_dgamma_dbeta) { holds(gp_layernorm_fd, 2504); }
Test(grad_softmax, backward_rows_sum_to_zero) { holds(gp_softmax_rows, 2505); }
Test(grad_softmax, finite_differences_with_temperature_and_masks) { holds(gp_softmax_fd, 2506); }
Test(grad_activation, derivatives_match_finite_differences) { holds(gp_activation_fd, 2507); }
Test(grad_rope, backward_is_the_adjoint_in_both_layouts) { holds(gp_rope_fd, 2508); }
Test(grad_embedding, repeated_tokens_accumulate) { holds(gp_embedding_repeats, 2509); }
Test(grad_attention, adjoint_identity_with_every_mask_kind) { holds(gp_attention_adjoint, 2510); }
Test(grad_attention, rowsum_D_and_dS_rows_sum_to_zero) { holds(gp_attention_rows, 2511); }
Test(grad_attention, masked_keys_get_zero_dk_and_dv) { holds(gp_attention_masked_keys, 2512); }
