#include "results.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../io/golden_names.h"
#include "../io/half.h"

static int is_wanted(const json_t *wanted, const char *out_name)
{
    size_t i;
    json_t *o;
    json_array_foreach(wanted, i, o) {
        const char *n = json_string_value(json_object_get(o, "name"));
        if (n != NULL && strcmp(n, out_name) == 0)
            return 1;
    }
    return 0;
}

/* Re-encodes x (n doubles, each exactly a value of f) in f's dtype, in place:
 * the buffer holds n doubles, so it holds n floats or n 16-bit values. */
static int encode(refenc_st_entry *e, double *x, size_t n, refenc_format f)
{
    if (f == REFENC_FMT_F32) {
        float *v = (float *)x;
        for (size_t i = 0; i < n; i++)
            v[i] = (float)x[i]; /* v[i] overlaps only x[i / 2] <= x[i], already read */
        e->dtype = REFENC_ST_F32;
        return 1;
    }
    uint16_t *h = (uint16_t *)x;
    for (size_t i = 0; i < n; i++)
        h[i] = f == REFENC_FMT_F16 ? refenc_double_to_f16(x[i]) : refenc_double_to_bf16(x[i]);
    e->dtype = f == REFENC_FMT_F16 ? REFENC_ST_F16 : REFENC_ST_BF16;
    return f == REFENC_FMT_F16 || f == REFENC_FMT_BF16;
}

void results_collect(void *ctx, const char *name, const double *data, size_t ndim,
                     const size_t *shape)
{
    results *r = ctx;
    char out_name[REFENC_NAME_MAX];
    if (r->failed)
        return;
    const int fits = r->prefix == NULL ? refenc_name_output(out_name, sizeof out_name, name)
                                       : snprintf(out_name, sizeof out_name, "%s%s", r->prefix, name) <
                                             (int)sizeof out_name;
    if (!fits || ndim > REFENC_ST_MAX_NDIM) {
        r->failed = 1;
        return;
    }
    if (r->wanted != NULL && !is_wanted(r->wanted, out_name))
        return;
    size_t cap_names = r->cap, cap_data = r->cap, cap_entries = r->cap;
    if (!refenc_array_reserve((void **)&r->names, &cap_names, r->n + 1, sizeof *r->names) ||
        !refenc_array_reserve((void **)&r->data, &cap_data, r->n + 1, sizeof *r->data) ||
        !refenc_array_reserve((void **)&r->entries, &cap_entries, r->n + 1, sizeof *r->entries)) {
        r->failed = 1;
        return;
    }
    r->cap = cap_entries; /* the three grow alike */
    size_t numel = 1;
    for (size_t d = 0; d < ndim; d++)
        numel *= shape[d];
    char *nm = strdup(out_name);
    double *copy = refenc_alloc_array(numel, sizeof(double));
    if (nm == NULL || copy == NULL) {
        free(nm);
        free(copy);
        r->failed = 1;
        return;
    }
    memcpy(copy, data, numel * sizeof(double));
    refenc_st_entry *e = &r->entries[r->n];
    memset(e, 0, sizeof *e);
    e->name = nm;
    e->dtype = REFENC_ST_F64;
    if (r->format != REFENC_FMT_F64 && !encode(e, copy, numel, r->format)) {
        free(nm);
        free(copy);
        r->failed = 1;
        return;
    }
    e->ndim = ndim;
    memcpy(e->shape, shape, ndim * sizeof *shape);
    e->data = copy;
    r->names[r->n] = nm;
    r->data[r->n] = copy;
    r->n++;
}

int results_write(const results *r, const char *path, const json_t *metadata, refenc_error *err)
{
    if (r->failed)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: cannot keep the outputs (out of memory)", path);
    return refenc_st_write(path, r->entries, r->n, metadata, err);
}

void results_free(results *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->names[i]);
        free(r->data[i]);
    }
    free(r->names);
    free(r->data);
    free(r->entries);
    memset(r, 0, sizeof *r);
}
