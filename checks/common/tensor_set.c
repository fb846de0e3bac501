/* Named double tensors of a results file (tensor_set.h). */
#include "tensor_set.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/io/half.h"

double *tensor_set_put(tensor_set *s, const char *name, const double *x, size_t ndim, const size_t *shape)
{
    size_t k = 0, numel = 1;
    while (k < s->n && strcmp(s->name[k], name) != 0)
        k++;
    cr_assert_lt(k, TENSOR_SET_MAX);
    for (size_t d = 0; d < ndim; d++)
        numel *= shape[d];
    if (k == s->n)
        s->n++;
    else
        free(s->data[k]);
    s->data[k] = calloc(numel ? numel : 1, sizeof(double));
    cr_assert_not_null(s->data[k]);
    snprintf(s->name[k], sizeof s->name[k], "%s", name);
    if (x != NULL)
        memcpy(s->data[k], x, numel * sizeof(double));
    s->ndim[k] = ndim, s->numel[k] = numel;
    memcpy(s->shape[k], shape, ndim * sizeof *shape);
    return s->data[k];
}

double *tensor_set_get(const tensor_set *s, const char *name)
{
    for (size_t k = 0; k < s->n; k++)
        if (strcmp(s->name[k], name) == 0)
            return s->data[k];
    return NULL;
}

void tensor_set_load(tensor_set *s, const char *path, int results_only)
{
    refenc_st_file f;
    refenc_error err;
    memset(s, 0, sizeof *s);
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    for (size_t t = 0; t < f.n_tensors; t++) {
        const refenc_st_tensor *tt = &f.tensors[t];
        if (results_only && strcmp(tt->name, "out.output") != 0 && strncmp(tt->name, "grad.", 5) != 0)
            continue;
        double *x = tensor_set_put(s, tt->name, NULL, tt->ndim, tt->shape);
        cr_assert_eq(refenc_st_to_f64(x, &f, tt, &err), REFENC_OK, "%s", err.message);
    }
    refenc_st_free(&f);
}

/* The values of x (n) rounded to f into a new buffer; its dtype in *dtype. */
static void *rounded(const double *x, size_t n, refenc_format f, refenc_st_dtype *dtype)
{
    if (f == REFENC_FMT_F32) {
        float *v = malloc((n ? n : 1) * sizeof *v);
        cr_assert_not_null(v);
        for (size_t i = 0; i < n; i++)
            v[i] = (float)x[i];
        *dtype = REFENC_ST_F32;
        return v;
    }
    uint16_t *v = malloc((n ? n : 1) * sizeof *v);
    cr_assert_not_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = f == REFENC_FMT_F16 ? refenc_double_to_f16(x[i]) : refenc_double_to_bf16(x[i]);
    *dtype = f == REFENC_FMT_F16 ? REFENC_ST_F16 : REFENC_ST_BF16;
    return v;
}

void tensor_set_write(const tensor_set *s, const char *path, refenc_format f, const char *prefix)
{
    refenc_st_entry e[TENSOR_SET_MAX];
    void *buf[TENSOR_SET_MAX] = {0};
    for (size_t k = 0; k < s->n; k++) {
        e[k] = (refenc_st_entry){.name = s->name[k], .dtype = REFENC_ST_F64, .ndim = s->ndim[k],
                                 .data = s->data[k]};
        memcpy(e[k].shape, s->shape[k], s->ndim[k] * sizeof(size_t));
        if (f != REFENC_FMT_F64 && (prefix == NULL || strncmp(s->name[k], prefix, strlen(prefix)) == 0))
            e[k].data = buf[k] = rounded(s->data[k], s->numel[k], f, &e[k].dtype);
    }
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, e, s->n, NULL, &err), REFENC_OK, "%s", err.message);
    for (size_t k = 0; k < s->n; k++)
        free(buf[k]);
}

void tensor_set_free(tensor_set *s)
{
    for (size_t k = 0; k < s->n; k++)
        free(s->data[k]);
    s->n = 0;
}
