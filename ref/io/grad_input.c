/* The upstream gradient of a gradient case (docs/golden-format.md,
 * "Gradients"): in.grad.dY, read and checked. */
#include "grad_input.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "golden_names.h"

int refenc_grad_dy_from_file(double **dY, const refenc_case *c, const refenc_st_file *f, refenc_error *err)
{
    const refenc_st_tensor *t = refenc_st_find(f, REFENC_NAME_GRAD_DY);
    *dY = NULL;
    const size_t shape[3] = {c->B, c->L, c->cfg.d_model};
    if (t == NULL)
        return REFENC_OK;
    if (t->dtype != REFENC_ST_F64 && t->dtype != REFENC_ST_F32 && t->dtype != REFENC_ST_F16 &&
        t->dtype != REFENC_ST_BF16)
        return refenc_error_set(err, REFENC_EINVAL, "%s: tensor '%s' (data at byte %zu): dtype %s, expected "
                                "F64, F32, F16 or BF16", f->path, t->name, t->file_offset,
                                refenc_st_dtype_name(t->dtype));
    if (!refenc_st_shape_is(t, 3, shape)) {
        char got[200] = "[";
        for (size_t d = 0; d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%zu", d ? ", " : "", t->shape[d]);
        return refenc_error_set(err, REFENC_EINVAL, "%s: tensor '%s' (data at byte %zu) has shape %s], expected "
                                "the output's shape [%zu, %zu, %zu] (B, L, d_model)", f->path, t->name,
                                t->file_offset, got, shape[0], shape[1], shape[2]);
    }
    if ((*dY = refenc_alloc_array(t->numel, sizeof **dY)) == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", f->path);
    int st = refenc_st_to_f64(*dY, f, t, err);
    for (size_t i = 0; st == REFENC_OK && i < t->numel; i++)
        if (!isfinite((*dY)[i]))
            st = refenc_error_set(err, REFENC_EINVAL, "%s: tensor '%s' element %zu (at byte %zu) is %s; the "
                                  "upstream gradient must be finite", f->path, t->name, i,
                                  t->file_offset + i * refenc_st_dtype_size(t->dtype),
                                  isnan((*dY)[i]) ? "NaN" : "infinite");
    if (st != REFENC_OK) {
        free(*dY);
        *dY = NULL;
    }
    return st;
}
