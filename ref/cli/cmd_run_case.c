/* refenc run --case: the reference as a peer.  Reads a golden case's inputs
 * and parameters, runs the double-precision reference on them, and writes a
 * results file with every output the case lists, for `refenc certify`. */
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
    e->ndim = ndim;
    memcpy(e->shape, shape, ndim * sizeof *shape);
    e->data = c->data[c->n];
    c->n++;
}

int run_case(const char *case_path, const char *out_path)
{
    refenc_error err;
    refenc_error_clear(&err);
    refenc_st_file f;
    refenc_case c;
    collector col;
    memset(&f, 0, sizeof f); /* freed below whatever fails first */
    memset(&col, 0, sizeof col);
    memset(&c, 0, sizeof c);

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
        st = refenc_case_run_reference(&c, &tr, &err);
        if (st == REFENC_OK && col.failed)
            st = refenc_error_set(&err, REFENC_ENOMEM, "%s: cannot collect the outputs", case_path);
    }
    if (st == REFENC_OK) {
        json_t *meta = json_pack("{s:s, s:s}", "implementation", "refenc reference " REFENC_VERSION " (double)",
                                 "case", c.name);
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
