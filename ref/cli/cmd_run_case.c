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

#include "../io/grad_input.h"
#include "../io/atomic_write.h"
#include "../tool/emulate_backward.h"
#include "../refenc.h"
#include "cli.h"
#include "results.h"

/* Runs the reference, or the emulation with the variant's changes. */
static int compute(refenc_case *c, const run_case_spec *spec, const refenc_trace *tr, refenc_error *err)
{
    if (spec->has_bug && refenc_variant_is_backward(spec->bug) && !refenc_variant_applies(spec->bug, c))
        return refenc_error_set(err, REFENC_EINVAL, "case %s: the bug variant '%s' does not apply to it",
                                c->name, refenc_variant_get(spec->bug)->name);
    if (!spec->emulate && (!spec->has_bug || refenc_variant_is_backward(spec->bug))) /* the forward is right */
        return refenc_case_run_reference(c, tr, err);
    refenc_variant_hooks hooks = {0};
    if (spec->has_bug) {
        if (!refenc_variant_applies(spec->bug, c))
            return refenc_error_set(err, REFENC_EINVAL, "case %s: the bug variant '%s' does not apply to it",
                                    c->name, refenc_variant_get(spec->bug)->name);
        const int st = refenc_variant_apply(spec->bug, c, &hooks, err);
        if (st)
            return st;
    }
    const refenc_emulation e = spec->emulate ? spec->emulation : refenc_emulation_baseline(REFENC_FMT_F64);
    refenc_emulation_round_case(c, e.value);
    return refenc_emulation_run_case(c, &e, &hooks, tr, err);
}

/* The emulated backward's gradients into the results, under the shapes of
 * the parameters, or (B, L, D). */
typedef struct {
    const refenc_case *c;
    results *col;
} emu_grad_ctx;

static void emu_grad_collect(void *ctx, const char *name, const double *g, const double *mag, size_t n)
{
    (void)mag, (void)n;
    const emu_grad_ctx *x = ctx;
    const refenc_tensor *t = refenc_params_find(&x->c->params, name);
    const size_t bld[3] = {x->c->B, x->c->L, x->c->cfg.d_model};
    results_collect(x->col, name, g, t != NULL ? t->ndim : 3, t != NULL ? t->shape : bld);
}

/* --grad --emulate: the emulated backward (tool/emulate_backward.h) of the
 * case, whose inputs and parameters compute() has rounded. */
static int compute_emulated_grad(const refenc_case *c, const refenc_st_file *f, const run_case_spec *spec,
                                 results *col, refenc_error *err)
{
    double *dY = NULL;
    int st = refenc_grad_dy_from_file(&dY, c, f, err);
    if (st == REFENC_OK && dY == NULL)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: --grad: case %s lists gradients but has no %s", f->path,
                              c->name, REFENC_NAME_GRAD_DY);
    emu_grad_ctx x = {c, col};
    const refenc_grad_sink sink = {emu_grad_collect, &x};
    col->prefix = REFENC_NAME_GRAD, col->wanted = NULL;
    if (st == REFENC_OK)
        st = refenc_emulation_backward_case(c, dY, &spec->emulation, &sink, err);
    free(dY);
    return st;
}

/* --grad: the reference's double backward at the case's in.grad.dY (with
 * --bug, a backward bug's kernels: tool/backward_bugs.h), every gradient
 * kept as grad.<name> (docs/golden-format.md, "Gradients"). */
static int compute_grad(const refenc_case *c, const refenc_st_file *f, const run_case_spec *spec, results *col,
                        refenc_error *err)
{
    double *dY = NULL;
    int st = refenc_grad_dy_from_file(&dY, c, f, err);
    if (st == REFENC_OK && dY == NULL)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: --grad: case %s lists gradients but has no %s", f->path,
                              c->name, REFENC_NAME_GRAD_DY);
    const refenc_trace tr = {results_collect, col};
    col->prefix = REFENC_NAME_GRAD, col->wanted = NULL;
    if (st == REFENC_OK)
        st = refenc_case_run_backward(c, dY, spec->has_bug ? refenc_backward_bug_kernels(spec->bug) : NULL, &tr,
                                      err);
    free(dY);
    return st;
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
    results col;
    memset(&f, 0, sizeof f); /* freed on every path, also when the read never happens */
    memset(&col, 0, sizeof col);
    memset(&c, 0, sizeof c);
    col.format = spec->emulate ? spec->emulation.value : REFENC_FMT_F64;
    json_t *wanted = NULL;

    /* the results must never replace the case they come from */
    int st = refenc_refuse_same_file(out_path, case_path, "golden case", &err);
    if (st == REFENC_OK)
        st = refenc_st_read(&f, case_path, &err);
    if (st == REFENC_OK)
        st = refenc_case_from_file(&c, &f, &err);
    if (st == REFENC_OK) {
        const char *outs = refenc_st_metadata(&f, "outputs");
        wanted = outs ? json_loads(outs, 0, NULL) : NULL;
        if (!json_is_array(wanted))
            st = refenc_error_set(&err, REFENC_EFORMAT, "%s: __metadata__.outputs is not a JSON array",
                                  case_path);
        col.wanted = wanted;
    }
    if (st == REFENC_OK) {
        const refenc_trace tr = {results_collect, &col};
        st = compute(&c, spec, &tr, &err);
    }
    if (st == REFENC_OK && spec->grad && refenc_st_metadata(&f, "grad_outputs") == NULL)
        st = refenc_error_set(&err, REFENC_EINVAL, "%s: --grad: case %s holds no gradients (made without "
                              "'refenc golden --grad')", f.path, c.name);
    if (st == REFENC_OK && spec->grad)
        st = spec->emulate ? compute_emulated_grad(&c, &f, spec, &col, &err)
                           : compute_grad(&c, &f, spec, &col, &err);
    if (st == REFENC_OK) {
        char impl[160];
        describe(impl, sizeof impl, spec);
        json_t *meta = json_pack("{s:s, s:s}", "implementation", impl, "case", c.name);
        st = results_write(&col, out_path, meta, &err);
        json_decref(meta);
        if (st == REFENC_OK)
            printf("refenc run: case %s: %zu %s written to %s\n", c.name, col.n,
                   spec->grad ? "outputs and gradients" : "outputs", out_path);
    }

    results_free(&col);
    json_decref(wanted);
    refenc_case_free(&c);
    refenc_st_free(&f);
    return st == REFENC_OK ? REFENC_EXIT_OK : cli_error("run", "%s", err.message);
}
