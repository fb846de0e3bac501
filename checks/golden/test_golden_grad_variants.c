/* The named backward bugs as variants (docs/gradients.md, "The named
 * backward bugs"; tool/backward_bugs.h): each shipped gradient case stores
 * every backward variant that applies to it (alt.<variant>.grad.*), none
 * that does not, and certify names them.
 *
 * Two sources of buggy results, both certified in F64:
 *   - the double reference's backward with the bug's kernels, `refenc run
 *     --case CASE --grad --bug VARIANT` (the negative control of the double
 *     backward: each bug fails certify);
 *   - a results file built from the golden alone: its forward outputs and
 *     gradients, with one variant's stored gradients in place of the
 *     golden's.  This does not run the reference, so a naming that picked
 *     another variant than the one the results hold fails it.
 * Both must FAIL, name the variant, and report as the first diverging
 * backward step the variant's recorded first_divergence.
 * Control (run, docs/gradients.md): certify.c's variant_matches with a
 * backward variant held to the forward's rule (a required output among
 * those compared, which a backward variant never stores) names none, and
 * with the closest candidate replaced by the farthest it names another:
 * both fail these tests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/io/case_file.h"
#include "../../ref/io/golden_names.h"
#include "../../ref/io/safetensors.h"
#include "../../ref/refenc.h"
#include "../robustness/robust.h"

static const char *const grad_cases[] = {"grad_pre_rope_padding", "grad_post_rope_interleaved_padding",
                                         "grad_bert_tokens"};
#define N_CASES (sizeof grad_cases / sizeof grad_cases[0])

static void golden_path(char *p, size_t n, const char *name)
{
    snprintf(p, n, "golden/cases/%s.safetensors", name);
}

/* The case's "variants" metadata (a new reference). */
static json_t *stored_variants(const refenc_st_file *f)
{
    const char *s = refenc_st_metadata(f, "variants");
    cr_assert_not_null(s, "%s: no variants metadata", f->path);
    json_t *v = json_loads(s, 0, NULL);
    cr_assert(json_is_array(v));
    return v;
}

/* The stored entry of variant name, or NULL. */
static const json_t *find_variant(const json_t *vars, const char *name)
{
    size_t i;
    const json_t *v;
    json_array_foreach(vars, i, v)
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0)
            return v;
    return NULL;
}

static void certify_file(refenc_case_report *rep, const refenc_st_file *golden, const char *results)
{
    refenc_st_file rf;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&rf, results, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_certify_case(rep, golden, &rf, NULL, &err), REFENC_OK, "%s", err.message);
    refenc_st_free(&rf);
}

/* FAIL, named `variant` within its bound, the first diverging backward step
 * the one the golden records for it. */
static void expect_named(const refenc_case_report *rep, const json_t *stored, const char *variant, const char *how)
{
    cr_expect_eq(rep->verdict, REFENC_VERDICT_FAIL, "%s %s (%s): passes", rep->name, variant, how);
    cr_expect_eq(rep->first_divergence >= 0 && rep->outputs[rep->first_divergence].grad, 1,
                 "%s %s (%s): the forward fails", rep->name, variant, how);
    cr_expect_str_eq(rep->diagnosis, variant, "%s %s (%s): named '%s'", rep->name, variant, how, rep->diagnosis);
    cr_expect(rep->diagnosis_ratio <= 1, "%s %s (%s): %g bounds from its variant", rep->name, variant, how,
              rep->diagnosis_ratio);
    cr_assert_geq(rep->first_grad_divergence, 0, "%s %s (%s)", rep->name, variant, how);
    cr_expect_str_eq(rep->outputs[rep->first_grad_divergence].name,
                     json_string_value(json_object_get(stored, "first_divergence")), "%s %s (%s)", rep->name,
                     variant, how);
}

static refenc_output_status output_status_of(const refenc_case_report *rep, const char *name)
{
    for (size_t i = 0; i < rep->n_outputs; i++)
        if (strcmp(rep->outputs[i].name, name) == 0)
            return rep->outputs[i].status;
    cr_assert_fail("case %s has no output %s", rep->name, name);
    return REFENC_OUT_NOT_PROVIDED;
}

/* A results file from the golden alone: every out.* and grad.* tensor of the
 * case, F64, variant's stored gradients (alt.<variant>.grad.*) in place of
 * the golden's; NULL variant: the golden itself. */
static void results_from_golden(const refenc_st_file *f, const char *variant, const char *path)
{
    refenc_st_entry *e = calloc(f->n_tensors, sizeof *e);
    double **data = calloc(f->n_tensors, sizeof *data);
    size_t n = 0;
    refenc_error err;
    for (size_t t = 0; t < f->n_tensors; t++) {
        const refenc_st_tensor *src = &f->tensors[t];
        if (strncmp(src->name, "out.", 4) != 0 && strncmp(src->name, "grad.", 5) != 0)
            continue;
        char alt[REFENC_NAME_MAX];
        const refenc_st_tensor *from = src;
        if (variant != NULL && strncmp(src->name, "grad.", 5) == 0) {
            refenc_name_alt(alt, sizeof alt, variant, src->name);
            if (refenc_st_find(f, alt) != NULL)
                from = refenc_st_find(f, alt);
        }
        data[n] = malloc(src->numel * sizeof(double));
        cr_assert_eq(refenc_st_to_f64(data[n], f, from, &err), REFENC_OK, "%s", err.message);
        e[n] = (refenc_st_entry){.name = src->name, .dtype = REFENC_ST_F64, .ndim = src->ndim, .data = data[n]};
        memcpy(e[n].shape, src->shape, src->ndim * sizeof(size_t));
        n++;
    }
    cr_assert_eq(refenc_st_write(path, e, n, NULL, &err), REFENC_OK, "%s", err.message);
    for (size_t i = 0; i < n; i++)
        free(data[i]);
    free(data), free(e);
}

Test(golden_grad_variants, results_holding_one_variant_are_named_that_variant, .timeout = 60)
{
    char dir[RB_PATH_MAX], out[RB_PATH_MAX + 96];
    rb_tmpdir(dir);
    size_t named = 0;
    for (size_t k = 0; k < N_CASES; k++) {
        char g[RB_PATH_MAX];
        golden_path(g, sizeof g, grad_cases[k]);
        refenc_st_file f;
        refenc_error err;
        cr_assert_eq(refenc_st_read(&f, g, &err), REFENC_OK, "%s", err.message);
        refenc_case_report rep;
        snprintf(out, sizeof out, "%s/%s.golden.safetensors", dir, grad_cases[k]);
        results_from_golden(&f, NULL, out); /* the golden itself passes, named nothing */
        certify_file(&rep, &f, out);
        cr_expect_eq(rep.verdict, REFENC_VERDICT_PASS, "%s: the golden's own values fail", grad_cases[k]);
        cr_expect_str_eq(rep.diagnosis, "");
        refenc_case_report_free(&rep);
        json_t *vars = stored_variants(&f);
        size_t i;
        const json_t *v;
        json_array_foreach(vars, i, v) {
            const char *name = json_string_value(json_object_get(v, "name"));
            snprintf(out, sizeof out, "%s/%s.%s.safetensors", dir, grad_cases[k], name);
            results_from_golden(&f, name, out);
            certify_file(&rep, &f, out);
            expect_named(&rep, v, name, "its stored gradients");
            cr_expect(rep.variants_by_reference, "%s: its backward variants are the double reference's "
                      "(grad_variant_engine): the report must say so", grad_cases[k]);
            named += strcmp(rep.diagnosis, name) == 0;
            refenc_case_report_free(&rep);
        }
        json_decref(vars);
        refenc_st_free(&f);
    }
    cr_expect_eq(named, 32, "%zu (case, backward variant) pairs named", named);
    rb_tmpdir_remove(dir);
}

Test(golden_grad_variants, each_applicable_backward_variant_is_stored_and_no_other, .timeout = 60)
{
    size_t seen[REFENC_VAR_COUNT] = {0};
    for (size_t k = 0; k < N_CASES; k++) {
        char g[RB_PATH_MAX];
        golden_path(g, sizeof g, grad_cases[k]);
        refenc_st_file f;
        refenc_case c;
        refenc_error err;
        cr_assert_eq(refenc_st_read(&f, g, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(refenc_case_from_file(&c, &f, &err), REFENC_OK, "%s", err.message);
        json_t *vars = stored_variants(&f);
        cr_expect_str_eq(refenc_st_metadata(&f, "grad_variant_engine"), "reference");
        for (int v = REFENC_VAR_FIRST_BACKWARD; v < REFENC_VAR_COUNT; v++) {
            const char *name = refenc_variant_get((refenc_variant)v)->name;
            const json_t *e = find_variant(vars, name);
            const int applies = refenc_variant_applies((refenc_variant)v, &c);
            cr_expect_eq(e != NULL, applies, "%s: %s %s", grad_cases[k], name,
                         applies ? "applies but is not stored" : "is stored but does not apply");
            seen[v] += e != NULL;
            size_t i;
            const json_t *o;
            json_array_foreach(json_object_get(e, "outputs"), i, o) { /* gradients only, each stored */
                char alt[REFENC_NAME_MAX];
                cr_expect(strncmp(json_string_value(o), "grad.", 5) == 0, "%s", json_string_value(o));
                refenc_name_alt(alt, sizeof alt, name, json_string_value(o));
                cr_expect_not_null(refenc_st_find(&f, alt), "%s: no %s", grad_cases[k], alt);
            }
        }
        json_decref(vars);
        refenc_case_free(&c);
        refenc_st_free(&f);
    }
    for (int v = REFENC_VAR_FIRST_BACKWARD; v < REFENC_VAR_COUNT; v++) /* every one shipped somewhere */
        cr_expect_gt(seen[v], 0, "%s is stored by no shipped case", refenc_variant_get((refenc_variant)v)->name);
}

Test(golden_grad_variants, the_double_backward_with_each_bug_fails_in_f64_and_is_named, .timeout = 120)
{
    char dir[RB_PATH_MAX], out[RB_PATH_MAX + 96];
    rb_tmpdir(dir);
    size_t named = 0;
    for (size_t k = 0; k < N_CASES; k++) {
        char g[RB_PATH_MAX];
        golden_path(g, sizeof g, grad_cases[k]);
        refenc_st_file f;
        refenc_error err;
        cr_assert_eq(refenc_st_read(&f, g, &err), REFENC_OK, "%s", err.message);
        json_t *vars = stored_variants(&f);
        size_t i;
        const json_t *v;
        json_array_foreach(vars, i, v) {
            const char *name = json_string_value(json_object_get(v, "name"));
            refenc_variant known;
            cr_assert(refenc_variant_parse(&known, name));
            if (!refenc_variant_is_backward(known))
                continue;
            snprintf(out, sizeof out, "%s/%s.%s.safetensors", dir, grad_cases[k], name);
            rb_run_ok((const char *[]){"refenc", "run", "--case", g, "--grad", "--bug", name, "--out", out, NULL});
            refenc_case_report rep;
            certify_file(&rep, &f, out);
            expect_named(&rep, v, name, "refenc run --grad --bug");
            cr_expect_eq(output_status_of(&rep, "out.output"), REFENC_OUT_PASS, "%s: the forward is right", name);
            named += strcmp(rep.diagnosis, name) == 0;
            refenc_case_report_free(&rep);
        }
        json_decref(vars);
        refenc_st_free(&f);
    }
    cr_expect_eq(named, 32, "%zu (case, backward variant) pairs named", named);
    rb_tmpdir_remove(dir);
}

/* `refenc run --bug` with a backward bug: only with --grad, only where it
 * applies, never with --emulate; exit 2 with one message each.  (A forward
 * run that took a backward bug for a forward one would write the golden's
 * own outputs under a bug's name.) */
Test(golden_grad_variants, a_backward_bug_runs_only_with_grad_where_it_applies, .timeout = 60)
{
    char dir[RB_PATH_MAX], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(out, sizeof out, "%s/r.safetensors", dir);
    const char *pre = "golden/cases/grad_pre_rope_padding.safetensors";
    rb_result r = rb_run((const char *[]){"refenc", "run", "--case", pre, "--bug", "linear_dw_transposed", "--out",
                                          out, NULL});
    rb_expect_error(&r, 2, "run", "a backward bug without --grad",
                    (const char *[]){"linear_dw_transposed", "backward bug", "--grad", NULL});
    rb_result_free(&r);
    r = rb_run((const char *[]){"refenc", "run", "--case", pre, "--grad", "--bug", "embedding_grad_overwritten",
                                "--out", out, NULL});
    rb_expect_error(&r, 2, "run", "a backward bug that does not apply (no tokens)",
                    (const char *[]){"embedding_grad_overwritten", "does not apply", NULL});
    rb_result_free(&r);
    r = rb_run((const char *[]){"refenc", "run", "--case", pre, "--grad", "--emulate", "bf16", "--bug",
                                "linear_dw_transposed", "--out", out, NULL});
    rb_expect_error(&r, 2, "run", "a backward bug in an emulation", (const char *[]){"--emulate", NULL});
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}

/* in.x (1, 3, 8) = mean + spread z, z in [-0.72, 0.72] in steps of 1/16. */
static void cancelling_inputs(const char *path, double mean, double spread)
{
    double x[24];
    for (int i = 0; i < 24; i++)
        x[i] = mean + spread * (((i * 7) % 24) / 16.0 - 0.71875);
    const refenc_st_entry e = {.name = "in.x", .dtype = REFENC_ST_F64, .ndim = 3, .shape = {1, 3, 8}, .data = x};
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, &e, 1, NULL, &err), REFENC_OK, "%s", err.message);
}

/* A metadata number of the golden file at path. */
static double metadata_number(const char *path, const char *key)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    const char *s = refenc_st_metadata(&f, key);
    cr_assert_not_null(s, "%s: no %s", path, key);
    const double v = strtod(s, NULL);
    refenc_st_free(&f);
    return v;
}

/* The variants are the double reference's runs with a bug's kernels, so they
 * stand for the exact ones only while the reference itself is close to the
 * oracle: `refenc golden` records the reference's error on the golden
 * (variant_reference_error_f64, grad_variant_reference_error_f64) and, above
 * 0.1, says on stderr, --quiet or not, that the variants may be off.  A
 * LayerNorm over x = 23850 + 1e-3 z cancels the mean in double (measured:
 * the forward 109 F64 tolerances, the backward 244 gradient bounds from the
 * oracle); the same z at mean 0 (1.6e-5 and 5.5e-5) says nothing. */
Test(golden_grad_variants, a_reference_far_from_the_oracle_is_said_on_stderr_even_with_quiet, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(in, sizeof in, "%s/in.safetensors", dir);
    snprintf(out, sizeof out, "%s/o.safetensors", dir);
    const char *c = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 1}}";
    rb_write_file(cfg, c, strlen(c));
    for (int far = 0; far < 2; far++) {
        cancelling_inputs(in, far ? 2.385e4 : 0.0, 1e-3);
        rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--inputs", in, "--grad",
                                              "--quiet", "--out-file", out, NULL});
        cr_assert_eq(r.status, 0, "mean %s: %s", far ? "23850" : "0", r.err);
        const double fwd = metadata_number(out, "variant_reference_error_f64"),
                     bwd = metadata_number(out, "grad_variant_reference_error_f64");
        cr_expect_eq(fwd > 0.1, far, "mean %s: the forward's reference error %g", far ? "23850" : "0", fwd);
        cr_expect_eq(bwd > 0.1, far, "mean %s: the backward's reference error %g", far ? "23850" : "0", bwd);
        cr_expect_eq(strstr(r.err, "its bug variants may be off by as much") != NULL, far,
                     "mean %s: the forward's note %s; stderr:\n%s", far ? "23850" : "0", far ? "missing" : "given",
                     r.err);
        cr_expect_eq(strstr(r.err, "its backward variants may be off by as much") != NULL, far,
                     "mean %s: the backward's note %s; stderr:\n%s", far ? "23850" : "0", far ? "missing" : "given",
                     r.err);
        cr_expect_eq(rb_count_lines(r.err), far ? 2 : 0, "stderr:\n%s", r.err);
        rb_result_free(&r);
    }
    rb_tmpdir_remove(dir);
}

/* Determinism: `refenc golden --grad` runs the oracle's backward linear maps
 * on --threads OpenMP threads and the backward bugs' reference runs --threads
 * at a time; the file, gradients, variants and metadata, is the same bytes on
 * 1, 2 and 3 threads (two layers, padding, so that every pool has work). */
Test(golden_grad_variants, the_gradient_golden_is_the_same_bytes_on_any_threads, .timeout = 120)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], out[3][RB_PATH_MAX + 32], threads[16];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    const char *c = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 2, \"norm\": \"pre\"},"
                    " \"input\": {\"batch\": 2, \"seq_len\": 5, \"padding\": [0, 2]}}";
    rb_write_file(cfg, c, strlen(c));
    for (int t = 0; t < 3; t++) {
        snprintf(out[t], sizeof out[t], "%s/t%d.safetensors", dir, t + 1);
        snprintf(threads, sizeof threads, "%d", t + 1);
        rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--grad", "--threads", threads, "--quiet",
                                   "--out-file", out[t], NULL});
        if (t > 0)
            cr_expect(rb_same_file(out[0], out[t]), "golden --grad: --threads %d differs from --threads 1", t + 1);
    }
    rb_tmpdir_remove(dir);
}
