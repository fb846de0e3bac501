/* The named backward bugs (issue 25, docs/gradients.md): each is the
 * reference's backward kernel table (backward_kernels.h) with one kernel
 * replaced by the kernel with the bug, so the double reference's backward
 * (refenc_encoder_backward with refenc_grad_workspace.kernels set) computes
 * the gradients an implementation with that one bug computes.  The bugs
 * are variants of tool/variants.h (refenc_variant_is_backward); the golden
 * generator stores their gradients (alt.<variant>.grad.*) and certify names
 * them as it names the forward's (docs/diagnosis.md, "Diagnosis").
 *
 * Each replaced kernel is the reference's kernel plus the bug as a
 * correction where the bug is one (LayerNorm's terms, the attention's scale
 * and row term, the derivative, the bias, the rotation's sign), written out
 * where it is the loop itself (dW's layout, the overwriting scatter). */
#ifndef REFENC_BACKWARD_BUGS_H
#define REFENC_BACKWARD_BUGS_H

#include "../backward_kernels.h"
#include "variants.h"

/* The kernel table of backward variant v; NULL when v is not a backward
 * variant (the forward's). */
const refenc_backward_kernels *refenc_backward_bug_kernels(refenc_variant v);

#endif
