/* Running the double-precision reference's backward on a golden case. */
#ifndef REFENC_RUN_BACKWARD_H
#define REFENC_RUN_BACKWARD_H

#include "../backward_kernels.h"
#include "../core/case.h"
#include "../core/status.h"
#include "../core/trace.h"

/* The reference's backward of the encoder case c at the upstream gradient
 * dY (B, L, D), with the kernels of table k (NULL: the reference's; a
 * named backward bug's: tool/backward_bugs.h).  Every gradient is reported
 * through trace by its golden name without "grad." (docs/golden-format.md,
 * "Gradients"): "layers.{i}.output" (i = N-1 .. 0) and "embed" as the
 * backward passes them, then every parameter's gradient in table order,
 * then "x" when the case's input is x.
 * Errors: those of refenc_grad_workspace_alloc and
 * refenc_encoder_backward (REFENC_EINVAL, REFENC_ELIMIT), REFENC_ENOMEM. */
int refenc_case_run_backward(const refenc_case *c, const double *dY, const refenc_backward_kernels *k,
                             const refenc_trace *trace, refenc_error *err);

#endif
