/* Reading a golden case (docs/golden-format.md) from a safetensors file. */
#ifndef REFENC_CASE_FILE_H
#define REFENC_CASE_FILE_H

#include "../core/case.h"
#include "../core/status.h"
#include "safetensors.h"

/* Loads a case from a golden file (its metadata component and config, its
 * in.* tensors and parameters).  Every tensor is checked for name, dtype
 * class and shape; messages name the file and tensor.
 * Errors: REFENC_EFORMAT, REFENC_EINVAL, REFENC_ELIMIT, REFENC_ENOMEM. */
int refenc_case_from_file(refenc_case *c, const refenc_st_file *f, refenc_error *err);

#endif
