/* refenc_variant_writes_params (variants.h) on every shipped golden case:
 * a variant it says leaves the parameters be must leave them be, values,
 * pointers and allocation, wherever it applies.  The golden generator runs
 * those variants on a copy that shares the case's parameters
 * (golden/alt.c), so a wrong "no" would corrupt the golden's own case.
 *
 * Negative control (run): with refenc_variant_writes_params answering 0
 * for unbiased_variance, the test fails on every case the variant applies
 * to (its norm weights change). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/core/case.h"
#include "../../ref/io/case_file.h"
#include "../../ref/io/safetensors.h"
#include "../../ref/tool/variants.h"

static const char *srcdir(void)
{
    const char *s = getenv("REFENC_SRCDIR");
    return s && *s ? s : ".";
}

/* p's offset into block, or -1 for NULL (pointers of two copies compared). */
static long offset(const double *p, const double *block)
{
    return p == NULL ? -1 : (long)(p - block);
}

/* Whether a (a variant's copy) has b's parameters: the same values, views and tensors. */
static int same_params(const refenc_params *a, const refenc_params *b)
{
    if (a->n_values != b->n_values || a->n_layers != b->n_layers || a->n_tensors != b->n_tensors ||
        memcmp(a->block, b->block, a->n_values * sizeof *a->block) != 0)
        return 0;
    const double *const *pa, *const *pb;
    for (size_t i = 0; i < a->n_layers; i++) {
        pa = (const double *const *)&a->layers[i];
        pb = (const double *const *)&b->layers[i];
        for (size_t k = 0; k < sizeof(refenc_layer_params) / sizeof(double *); k++)
            if (offset(pa[k], a->block) != offset(pb[k], b->block))
                return 0;
    }
    const double *va[] = {a->embedding, a->token_type_embedding, a->pos_embedding, a->embedding_norm_weight,
                          a->embedding_norm_bias, a->norm_weight, a->norm_bias};
    const double *vb[] = {b->embedding, b->token_type_embedding, b->pos_embedding, b->embedding_norm_weight,
                          b->embedding_norm_bias, b->norm_weight, b->norm_bias};
    for (size_t k = 0; k < sizeof va / sizeof va[0]; k++)
        if (offset(va[k], a->block) != offset(vb[k], b->block))
            return 0;
    for (size_t t = 0; t < a->n_tensors; t++)
        if (strcmp(a->tensors[t].name, b->tensors[t].name) != 0 ||
            offset(a->tensors[t].data, a->block) != offset(b->tensors[t].data, b->block))
            return 0;
    return 1;
}

static void read_case(refenc_case *c, const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/cases/%s", srcdir(), file);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_case_from_file(c, &f, &err), REFENC_OK, "%s: %s", path, err.message);
    refenc_st_free(&f);
}

Test(variant_writes, a_variant_said_to_leave_the_parameters_leaves_them_on_every_shipped_case, .timeout = 60)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/manifest.json", srcdir());
    json_t *m = json_load_file(path, 0, NULL);
    cr_assert_not_null(m, "%s", path);
    size_t i, applied = 0, writers_seen = 0;
    json_t *e;
    json_array_foreach(json_object_get(m, "cases"), i, e) {
        refenc_case c;
        read_case(&c, json_string_value(json_object_get(e, "file")));
        for (int v = 0; v < REFENC_VAR_COUNT; v++) {
            if (!refenc_variant_applies((refenc_variant)v, &c))
                continue;
            refenc_case w, orig;
            refenc_variant_hooks hooks;
            refenc_error err;
            read_case(&w, json_string_value(json_object_get(e, "file")));
            read_case(&orig, json_string_value(json_object_get(e, "file")));
            cr_assert_eq(refenc_variant_apply((refenc_variant)v, &w, &hooks, &err), REFENC_OK, "%s", err.message);
            const int same = same_params(&w.params, &orig.params);
            if (!refenc_variant_writes_params((refenc_variant)v))
                cr_expect(same, "case %s: variant %s changes the parameters but refenc_variant_writes_params "
                          "says it leaves them", c.name, refenc_variant_get((refenc_variant)v)->name);
            writers_seen += !same;
            applied++;
            refenc_case_free(&w);
            refenc_case_free(&orig);
        }
        refenc_case_free(&c);
    }
    json_decref(m);
    cr_expect_gt(applied, 200, "only %zu (case, variant) pairs", applied);
    cr_expect_gt(writers_seen, 0, "no variant changed any parameter: the comparison sees nothing");
}
