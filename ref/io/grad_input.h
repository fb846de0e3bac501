/* The upstream gradient of a gradient case (docs/golden-format.md,
 * "Gradients"): the tensor in.grad.dY of a golden case or of a user's inputs
 * file, read by refenc golden --grad and refenc run --case --grad. */
#ifndef REFENC_IO_GRAD_INPUT_H
#define REFENC_IO_GRAD_INPUT_H

#include "../core/case.h"
#include "../core/status.h"
#include "safetensors.h"

/* in.grad.dY of f: floating (F64, F32, F16 or BF16), of c's output shape
 * (B, L, d_model), every value finite, into *dY (malloc'ed; NULL when f has
 * no in.grad.dY).  Errors: REFENC_EINVAL naming the file, the tensor and
 * the dtype, the shape, or the element and its byte (NaN, infinity);
 * REFENC_ENOMEM.  On error *dY is NULL. */
int refenc_grad_dy_from_file(double **dY, const refenc_case *c, const refenc_st_file *f, refenc_error *err);

#endif
