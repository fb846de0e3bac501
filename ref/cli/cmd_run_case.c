/* refenc run --case: the reference as a peer.  Reads a golden case's inputs
 * and parameters, runs the double-precision reference on them, and writes a
 * results file with every output the case lists, for `refenc certify`.
 * With --emulate it runs the emulation of a low-precision implementation
 * instead (tool/emulate.h), and with --bug a known bug variant of either,
 * and writes the results in the emulated dtype. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../refenc.h"
#include "cli.h"

#define MAX_OUTPUTS 256

typedef struct {
    json_t *wanted;  /* the golden's outputs list */
    size_t n;
    char *names[MAX_OUTPUTS];
    double *data[MAX_OUTPUTS];
    refenc_st_entry entries[MAX_OUTPUTS];
    refenc_format format;  /* the results' dtype: the values are already in it */
    int failed;
    int trace;       /* also print the step summary */
} collector;

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

static void collect(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    collector *c = ctx;
    char out_name[REFENC_NAME_MAX];
    refenc_name_output(out_name, sizeof out_name, name);
    if (c->failed || !is_wanted(c->wanted, out_name))
        return;
    if (c->n == MAX_OUTPUTS || ndim > REFENC_ST_MAX_NDIM) {
        c->failed = 1;
        return;
    }
    size_t numel = 1;
    for (size_t d = 0; d < ndim; d++)
        numel *= shape[d];
    c->names[c->n] = strdup(out_name);
    c->data[c->n] = refenc_alloc_array(numel, sizeof(double));
    if (c->names[c->n] == NULL || c->data[c->n] == NULL) {
        free(c->names[c->n]);
        free(c->data[c->n]);
        c->failed = 1;
        return;
    }
    memcpy(c->data[c->n], data, numel * sizeof(double));
    refenc_st_entry *e = &c->entries[c->n];
    e->name = c->names[c->n];
    e->dtype = REFENC_ST_F64;
    if (c->format != REFENC_FMT_F64 && !encode(e, c->data[c->n], numel, c->format)) {
        free(c->names[c->n]);
        free(c->data[c->n]);
        c->failed = 1;
        return;
    }
    e->ndim = ndim;
    memcpy(e->shape, shape, ndim * sizeof *shape);
    e->data = c->data[c->n];
    c->n++;
}

/* Runs the reference, or the emulation with the variant's changes. */
static int compute(refenc_case *c, const run_case_spec *spec, const refenc_trace *tr, refenc_error *err)
{
    if (!spec->emulate && !spec->has_bug)
        return refenc_case_run_reference(c, tr, err);
    refenc_variant_hooks hooks = {0, 0};
    if (spec->has_bug) {
        if (!refenc_variant_applies(spec->bug, c))
            return refenc_error_set(err, REFENC_EINVAL, "case %s: the bug variant '%s' does not apply to it",
                                    c->name, refenc_variant_get(spec->bug)->name);
        refenc_variant_apply(spec->bug, c, &hooks);
    }
    const refenc_emulation e = spec->emulate ? spec->emulation : refenc_emulation_baseline(REFENC_FMT_F64);
    refenc_emulation_round_case(c, e.value);
    return refenc_emulation_run_case(c, &e, &hooks, tr, err);
}

/* "reference (double)", "emulated BF16, F32 accumulation", ... */
static void describe(char *buf, size_t n, const run_case_spec *spec)
{
    if (!spec->emulate)
        snprintf(buf, n, "refenc reference " REFENC_VERSION " (double)");
    else
        snprintf(buf, n, "refenc emulation " REFENC_VERSION " (%s values, %s accumulation)",
                 refenc_format_name(spec->emulation.value), refenc_format_name(spec->emulation.acc));
    if (spec->has_bug)
        snprintf(buf + strlen(buf), n - strlen(buf), " with bug %s", refenc_variant_get(spec->bug)->name);
}

int run_case(const char *case_path, const char *out_path, const run_case_spec *spec)
{
    refenc_error err;
    refenc_error_clear(&err);
    refenc_st_file f;
    refenc_case c;
    collector col;
    memset(&col, 0, sizeof col);
    memset(&c, 0, sizeof c);
    col.format = spec->emulate ? spec->emulation.value : REFENC_FMT_F64;

    /* the results must never replace the case they come from */
    int st = refenc_refuse_same_file(out_path, case_path, "golden case", &err);
    if (st == REFENC_OK)
        st = refenc_st_read(&f, case_path, &err);
    if (st == REFENC_OK)
        st = refenc_case_from_file(&c, &f, &err);
    if (st == REFENC_OK) {
        const char *outs = refenc_st_metadata(&f, "outputs");
        col.wanted = outs ? json_loads(outs, 0, NULL) : NULL;
        if (!json_is_array(col.wanted))
            st = refenc_error_set(&err, REFENC_EFORMAT, "%s: __metadata__.outputs is not a JSON array",
                                  case_path);
    }
    if (st == REFENC_OK) {
        const refenc_trace tr = {collect, &col};
        st = compute(&c, spec, &tr, &err);
        if (st == REFENC_OK && col.failed)
            st = refenc_error_set(&err, REFENC_ENOMEM, "%s: cannot collect the outputs", case_path);
    }
    if (st == REFENC_OK) {
        char impl[160];
        describe(impl, sizeof impl, spec);
        json_t *meta = json_pack("{s:s, s:s}", "implementation", impl, "case", c.name);
        st = refenc_st_write(out_path, col.entries, col.n, meta, &err);
        json_decref(meta);
        if (st == REFENC_OK)
            printf("refenc run: case %s: %zu outputs written to %s\n", c.name, col.n, out_path);
    }

    for (size_t i = 0; i < col.n; i++) {
        free(col.names[i]);
        free(col.data[i]);
    }
    json_decref(col.wanted);
    refenc_case_free(&c);
    refenc_st_free(&f);
    return st == REFENC_OK ? REFENC_EXIT_OK : cli_error("run", "%s", err.message);
}
