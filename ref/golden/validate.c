/* A golden case's inputs, validated before the oracle runs (validate.h). */
#include "validate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "file.h"

/* "nan", "inf" or "-inf". */
static const char *nonfinite_name(double v)
{
    return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

/* The first element of x[0..n) that is not finite (and not -inf when
 * minus_inf_ok); n when there is none. */
static size_t first_bad(const double *x, size_t n, int minus_inf_ok)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) && !(minus_inf_ok && x[i] == -INFINITY))
            return i;
    return n;
}

/* Every parameter finite: the first that is not, by its name and flat index (and row, column). */
static int finite_params(const refenc_case *c, const char *name, const golden_sources *src, refenc_error *err)
{
    for (size_t t = 0; t < c->params.n_tensors; t++) {
        const refenc_tensor *p = &c->params.tensors[t];
        const size_t i = first_bad(p->data, p->size, 0);
        if (i == p->size)
            continue;
        char at[64] = "";
        if (p->ndim == 2)
            snprintf(at, sizeof at, " (row %zu, column %zu)", i / p->shape[1], i % p->shape[1]);
        return refenc_error_set(err, REFENC_EINVAL, "%s%s%s: parameter '%s' element %zu%s is %s: a golden's "
                                "expected values must be finite (case %s)", src->weights_path ? "--weights " : "",
                                src->weights_path ? src->weights_path : "", src->weights_path ? "" : "seeded",
                                p->name, i, at, nonfinite_name(p->data[i]), name);
    }
    return REFENC_OK;
}

/* in.x finite (a softmax case's logits may be -inf), in.attn_mask finite or -inf. */
static int finite_inputs(const refenc_case *c, const char *name, const golden_sources *src, refenc_error *err)
{
    const char *from = src->inputs_path ? src->inputs_path : src->source_path;
    const size_t nx = c->x != NULL ? c->x_numel : 0;
    size_t i = c->x != NULL ? first_bad(c->x, nx, c->component == REFENC_COMP_SOFTMAX) : 0;
    if (c->x != NULL && i < nx)
        return refenc_error_set(err, REFENC_EINVAL, "%s: in.x element %zu (of item %zu) is %s: a golden's "
                                "inputs must be finite%s (case %s)", from, i, i / (nx / c->B),
                                nonfinite_name(c->x[i]), c->component == REFENC_COMP_SOFTMAX ? " or -inf" : "",
                                name);
    const size_t nm = c->L * c->L;
    i = c->attn_mask != NULL ? first_bad(c->attn_mask, nm, 1) : nm;
    if (i < nm)
        return refenc_error_set(err, REFENC_EINVAL, "%s: in.attn_mask element %zu (query %zu, key %zu) is %s: "
                                "only finite values and -inf are allowed (case %s)", from, i, i / c->L, i % c->L,
                                nonfinite_name(c->attn_mask[i]), name);
    return REFENC_OK;
}

int golden_validate_case(const refenc_case *c, const char *name, const golden_sources *src, refenc_error *err)
{
    int st = finite_params(c, name, src, err);
    if (st == REFENC_OK)
        st = finite_inputs(c, name, src, err);
    if (st != REFENC_OK)
        return st;
    int failed;
    const char *field = golden_uncompared_inputs(c, &failed);
    if (failed)
        return refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", name);
    if (field == NULL)
        return REFENC_OK;
    const int pad = strstr(field, "padding") != NULL;
    return refenc_error_set(err, REFENC_EINVAL, "%s: %s%s leaves no element of the required output compared "
                            "(%s): a golden with nothing compared would pass any result; leave at least one "
                            "position of one item unpadded and unmasked (case %s)",
                            src->inputs_path ? src->inputs_path : src->source_path, field,
                            pad && src->inputs_path == NULL ? " (input.padding)" : "",
                            c->component == REFENC_COMP_SOFTMAX ? "every row of logits is -inf"
                                                                : "every query row is padded or sees no key",
                            name);
}
