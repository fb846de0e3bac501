/* A complete peer of refenc's golden cases, built against the installed C API
 * (docs/c-api.md):
 *
 *     cc -std=c11 -O2 peer.c $(pkg-config --cflags --libs refenc) -o peer
 *     ./peer "$(pkg-config --variable=goldendir refenc)" results
 *     refenc certify --golden "$(pkg-config --variable=goldendir refenc)" --results results
 *
 * For every case in GOLDEN/cases (each .safetensors file) it reads the case (config,
 * inputs, parameters), runs an implementation on it, and writes each output
 * the implementation produces under the golden's name (out.<step>) to
 * RESULTS/<case>.safetensors, in F64.  It also reads each expected output back
 * from the golden and prints the largest difference, to show that half of the
 * API.  Exit status: 0 when every case was written, 2 otherwise.
 *
 * The implementation here is refenc's own double reference
 * (refenc_case_run_reference), which reports every step through a trace
 * callback: replace my_implementation() with a call into yours, reporting
 * each output you compute with report_output(). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <refenc/refenc.h>

#define MAX_OUTPUTS 256

/* The outputs of one case, collected for the results file. */
typedef struct {
    const refenc_st_file *golden;       /* to keep only the outputs the golden has */
    size_t n;
    char names[MAX_OUTPUTS][REFENC_NAME_MAX];
    double *data[MAX_OUTPUTS];
    refenc_st_entry entries[MAX_OUTPUTS];
    double max_diff;                    /* largest |got - want| over every output   */
    int failed;
} outputs;

/* Keeps one output (a copy) if the golden lists it. */
static void report_output(void *ctx, const char *step, const double *data, size_t ndim,
                          const size_t *shape)
{
    outputs *o = ctx;
    char name[REFENC_NAME_MAX];
    refenc_name_output(name, sizeof name, step);
    const refenc_st_tensor *want = refenc_st_find(o->golden, name);
    if (o->failed || want == NULL)
        return;
    if (o->n == MAX_OUTPUTS || ndim > REFENC_ST_MAX_NDIM || want->ndim != ndim) {
        o->failed = 1;
        return;
    }
    size_t numel = 1;
    for (size_t d = 0; d < ndim; d++)
        numel *= shape[d];
    double *copy = refenc_alloc_array(numel, sizeof *copy);
    double *expected = refenc_alloc_array(numel, sizeof *expected);
    refenc_error err;
    if (copy == NULL || expected == NULL || want->numel != numel ||
        refenc_st_to_f64(expected, o->golden, want, &err) != REFENC_OK) {
        free(copy);
        free(expected);
        o->failed = 1;
        return;
    }
    memcpy(copy, data, numel * sizeof *copy);
    for (size_t i = 0; i < numel; i++) /* NaN compares false: print it as such */
        if (!(fabs(copy[i] - expected[i]) <= o->max_diff))
            o->max_diff = fabs(copy[i] - expected[i]);
    free(expected);

    refenc_st_entry *e = &o->entries[o->n];
    snprintf(o->names[o->n], REFENC_NAME_MAX, "%s", name);
    e->name = o->names[o->n];
    e->dtype = REFENC_ST_F64;
    e->ndim = ndim;
    memcpy(e->shape, shape, ndim * sizeof *shape);
    e->data = copy;
    o->data[o->n++] = copy;
}

/* Your implementation goes here: compute the case's outputs from c->cfg,
 * c->x or c->tokens, the masks and positions, and c->params (PyTorch
 * state_dict names: refenc_params_find(&c->params, "layers.0.norm1.weight")),
 * and report each one. */
static int my_implementation(const refenc_case *c, outputs *o, refenc_error *err)
{
    const refenc_trace trace = {report_output, o};
    return refenc_case_run_reference(c, &trace, err);
}

/* Reads golden_path, runs the implementation, writes results_path. */
static int run_one(const char *golden_path, const char *results_path)
{
    refenc_st_file golden;
    refenc_case c;
    refenc_error err;
    outputs o;
    memset(&o, 0, sizeof o);
    int st = refenc_st_read(&golden, golden_path, &err);
    if (st != REFENC_OK) {
        fprintf(stderr, "peer: %s\n", err.message);
        return st;
    }
    o.golden = &golden;
    if ((st = refenc_case_from_file(&c, &golden, &err)) == REFENC_OK) {
        st = my_implementation(&c, &o, &err);
        if (st == REFENC_OK && o.failed)
            st = refenc_error_set(&err, REFENC_ENOMEM, "%s: cannot keep the outputs", golden_path);
        if (st == REFENC_OK)
            st = refenc_st_write(results_path, o.entries, o.n, NULL, &err);
        if (st == REFENC_OK)
            printf("%-40s %2zu outputs, max |got - want| = %.3g\n", c.name, o.n, o.max_diff);
        refenc_case_free(&c);
    }
    if (st != REFENC_OK)
        fprintf(stderr, "peer: %s\n", err.message);
    for (size_t k = 0; k < o.n; k++)
        free(o.data[k]);
    refenc_st_free(&golden);
    return st;
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: peer GOLDEN_DIR RESULTS_DIR\n");
        return 2;
    }
    char cases[4096];
    snprintf(cases, sizeof cases, "%s/cases", argv[1]);
    DIR *d = opendir(cases);
    if (d == NULL) {
        perror(cases);
        return 2;
    }
    int failures = 0, n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!ends_with(e->d_name, ".safetensors"))
            continue;
        char in[8192], out[8192];
        snprintf(in, sizeof in, "%s/%s", cases, e->d_name);
        snprintf(out, sizeof out, "%s/%s", argv[2], e->d_name);
        n++;
        failures += run_one(in, out) != REFENC_OK;
    }
    closedir(d);
    printf("peer: %d cases, %d written, %d failed\n", n, n - failures, failures);
    return failures == 0 && n > 0 ? 0 : 2;
}
