/* What `refenc certify` prints and writes for a failing case is exactly what
 * refenc_certify_case computed (whose figures checks/unit/test_certify_figures.c
 * pins): every figure of every output in the JSON certificate, the worst
 * element's multi-dimensional index (unravelled here from the row-major
 * shape), the first divergence among several failing outputs, in the text
 * report and in the certificate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/tool/certificate.h"
#include "../../ref/tool/certify.h"
#include "../../ref/tool/variants.h"
#include "robust.h"

#define CASE "encoder_pre_rope" /* 15 outputs, don't-care masks, 4-d attention weights */

/* Moves element `at` (a multi-index) of output `name` in the results file by
 * delta; the element must not be don't-care.  Returns its flat index. */
static size_t move_element(const char *rfile, const char *name, const size_t *at, double delta)
{
    char golden[RB_PATH_MAX], dcname[160];
    rb_fixture_case(golden, CASE);
    refenc_st_file g, f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&g, golden, &err), REFENC_OK);
    cr_assert_eq(refenc_st_read(&f, rfile, &err), REFENC_OK);
    const refenc_st_tensor *t = refenc_st_find(&f, name);
    cr_assert_not_null(t);
    size_t flat = 0;
    for (size_t d = 0; d < t->ndim; d++)
        flat = flat * t->shape[d] + at[d];
    snprintf(dcname, sizeof dcname, "dontcare.%s", name);
    const refenc_st_tensor *dc = refenc_st_find(&g, dcname);
    cr_assert(dc == NULL || dc->data[flat] == 0, "%s[%zu] is don't-care: choose another element", name, flat);
    /* rewrite the file with every tensor, this one changed */
    refenc_st_entry e[32];
    double *data[32];
    for (size_t i = 0; i < f.n_tensors; i++) {
        const refenc_st_tensor *u = &f.tensors[i];
        data[i] = malloc(u->numel * sizeof(double));
        cr_assert_eq(refenc_st_to_f64(data[i], &f, u, &err), REFENC_OK);
        if (u == t)
            data[i][flat] += delta;
        e[i] = (refenc_st_entry){.name = u->name, .dtype = REFENC_ST_F64, .ndim = u->ndim, .data = data[i]};
        memcpy(e[i].shape, u->shape, sizeof e[i].shape);
    }
    cr_assert_eq(refenc_st_write(rfile, e, f.n_tensors, NULL, &err), REFENC_OK, "%s", err.message);
    for (size_t i = 0; i < f.n_tensors; i++)
        free(data[i]);
    refenc_st_free(&f);
    refenc_st_free(&g);
    return flat;
}

static double jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    cr_assert(json_is_number(v) || json_is_string(v), "no number '%s'", key);
    if (json_is_string(v)) /* inf and nan are strings */
        return strcmp(json_string_value(v), "inf") == 0 ? INFINITY : NAN;
    return json_number_value(v);
}

Test(certificate, every_figure_and_the_worst_index_as_certify_computed_them)
{
    char dir[RB_PATH_MAX], results[RB_PATH_MAX + 16], rfile[RB_PATH_MAX + 64], json[RB_PATH_MAX + 16];
    rb_tmpdir(dir);
    snprintf(results, sizeof results, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    snprintf(rfile, sizeof rfile, "%s/" CASE ".safetensors", results);
    snprintf(json, sizeof json, "%s/cert.json", dir);
    rb_reference_results(CASE, rfile);
    /* three failing outputs, the first in forward order an intermediate */
    const struct {
        const char *name;
        size_t at[4];
        double delta;
    } moves[] = {{"out.layers.1.ffn", {0, 5, 17}, 2e-6},
                 {"out.layers.0.self_attn.weights", {1, 2, 3, 2}, -3e-7},
                 {"out.output", {1, 4, 30}, 5e-5}};
    size_t flat[3];
    for (size_t i = 0; i < 3; i++)
        flat[i] = move_element(rfile, moves[i].name, moves[i].at, moves[i].delta);

    /* the API's report on the same files */
    char golden[RB_PATH_MAX];
    rb_fixture_case(golden, CASE);
    refenc_st_file g, res;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&g, golden, &err), REFENC_OK);
    cr_assert_eq(refenc_st_read(&res, rfile, &err), REFENC_OK);
    refenc_case_report rep;
    cr_assert_eq(refenc_certify_case(&rep, &g, &res, NULL, &err), REFENC_OK, "%s", err.message);
    cr_assert(!rep.pass);
    cr_assert_str_eq(rep.outputs[rep.first_divergence].name, "out.layers.0.self_attn.weights");

    const char *args[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results, "--case", CASE,
                          "--json", json, NULL};
    rb_result r = rb_run(args);
    cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "    first divergence: out.layers.0.self_attn.weights\n") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "worst at [1, 2, 3, 2]: got ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "worst at [0, 5, 17]: got ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "worst at [1, 4, 30]: got ") != NULL, "%s", r.out);
    json_t *doc = json_load_file(json, 0, NULL);
    cr_assert_not_null(doc);
    const json_t *c = json_array_get(json_object_get(doc, "cases"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(c, "first_divergence")), "out.layers.0.self_attn.weights");
    cr_expect_str_eq(json_string_value(json_object_get(c, "verdict")), "FAIL");
    const json_t *outs = json_object_get(c, "outputs");
    cr_assert_eq(json_array_size(outs), rep.n_outputs);
    for (size_t i = 0; i < rep.n_outputs; i++) {
        const refenc_output_report *o = &rep.outputs[i];
        const json_t *jo = json_array_get(outs, i);
        cr_expect_str_eq(json_string_value(json_object_get(jo, "name")), o->name);
        cr_expect_str_eq(json_string_value(json_object_get(jo, "status")), refenc_output_status_name(o->status));
        cr_expect_eq(json_integer_value(json_object_get(jo, "compared")), (json_int_t)o->compared, "%s", o->name);
        cr_expect_eq(json_integer_value(json_object_get(jo, "dont_care")), (json_int_t)o->dont_care, "%s", o->name);
        cr_expect_eq(json_integer_value(json_object_get(jo, "out_of_tolerance")), (json_int_t)o->out_of_tol);
        cr_expect_eq(json_integer_value(json_object_get(jo, "nonfinite")), (json_int_t)o->nonfinite);
        /* numbers are written with 17 significant digits: exact */
        cr_expect(jnum(jo, "max_abs_error") == o->max_abs, "%s max_abs", o->name);
        cr_expect(jnum(jo, "max_rel_error") == o->max_rel, "%s max_rel", o->name);
        cr_expect(jnum(jo, "max_ulp_error") == o->max_ulp, "%s max_ulp", o->name);
        cr_expect(jnum(jo, "nmse") == o->nmse, "%s nmse", o->name);
        cr_expect(jnum(jo, "rtol") == o->tol.rtol && jnum(jo, "atol") == o->tol.atol, "%s tolerance", o->name);
        cr_expect(jnum(jo, "worst_got") == o->worst_got && jnum(jo, "worst_want") == o->worst_want, "%s worst",
                  o->name);
        /* the worst index, unravelled here from the row-major shape */
        const json_t *idx = json_object_get(jo, "worst_index");
        cr_assert_eq(json_array_size(idx), o->ndim, "%s", o->name);
        size_t back = 0;
        for (size_t d = 0; d < o->ndim; d++) {
            const json_int_t k = json_integer_value(json_array_get(idx, d));
            cr_expect(k >= 0 && (size_t)k < o->shape[d], "%s: index %lld out of dimension %zu", o->name,
                      (long long)k, d);
            back = back * o->shape[d] + (size_t)k;
        }
        cr_expect_eq(back, o->worst_flat, "%s: worst index does not ravel back to %zu", o->name, o->worst_flat);
    }
    /* the three moved elements are the worst of their outputs */
    for (size_t i = 0; i < 3; i++)
        for (size_t k = 0; k < rep.n_outputs; k++)
            if (strcmp(rep.outputs[k].name, moves[i].name) == 0) {
                cr_expect_eq(rep.outputs[k].worst_flat, flat[i], "%s", moves[i].name);
                cr_expect_eq(rep.outputs[k].out_of_tol, 1, "%s", moves[i].name);
            }
    json_decref(doc);
    rb_result_free(&r);
    refenc_case_report_free(&rep);
    refenc_st_free(&g);
    refenc_st_free(&res);
    rb_tmpdir_remove(dir);
}

/* The certificate lists every variant a case matches (its candidates), the
 * first of the variant table included: a case report with candidates
 * {0, last} gives both names, in the table's order, under a diagnosis and
 * without one.  (Mutants: the loop started at 1, or never run.) */
Test(certificate, a_diagnosis_lists_every_candidate_variant)
{
    refenc_case_report rep;
    memset(&rep, 0, sizeof rep);
    snprintf(rep.name, sizeof rep.name, "x");
    rep.verdict = REFENC_VERDICT_FAIL;
    rep.first_divergence = -1;
    rep.variants_checked = REFENC_VAR_COUNT;
    const int last = REFENC_VAR_COUNT - 1;
    rep.candidates = refenc_variant_set_of(0, last);
    const char *first_name = refenc_variant_get((refenc_variant)0)->name;
    const char *last_name = refenc_variant_get((refenc_variant)last)->name;
    for (int named = 0; named < 2; named++) {
        snprintf(rep.diagnosis, sizeof rep.diagnosis, "%s", named ? first_name : "");
        json_t *c = refenc_certificate_case(&rep);
        cr_assert_not_null(c);
        const json_t *cand = json_object_get(json_object_get(c, "diagnosis"), "candidates");
        cr_assert(json_is_array(cand), "named %d: no candidates array", named);
        cr_expect_eq(json_array_size(cand), 2, "named %d: %zu candidates", named, json_array_size(cand));
        cr_expect_str_eq(json_string_value(json_array_get(cand, 0)), first_name);
        cr_expect_str_eq(json_string_value(json_array_get(cand, 1)), last_name);
        json_decref(c);
    }
}

/* refenc_certificate_doc's summary (certificate.h): failed = n_cases -
 * n_passed, whatever the verdict string says. */
Test(certificate, the_summary_counts_the_failed_cases_as_the_rest)
{
    json_t *doc = refenc_certificate_doc("v", "g", "r", "0", json_array(), 5, 3, "FAIL");
    cr_assert_not_null(doc);
    const json_t *s = json_object_get(doc, "summary");
    cr_expect_eq(json_integer_value(json_object_get(s, "cases")), 5);
    cr_expect_eq(json_integer_value(json_object_get(s, "passed")), 3);
    cr_expect_eq(json_integer_value(json_object_get(s, "failed")), 2);
    cr_expect_str_eq(json_string_value(json_object_get(s, "verdict")), "FAIL");
    json_decref(doc);
}

/* What a run does not rule out (certificate.h): the variants stored and
 * compared somewhere and told apart nowhere; bits of real variants only.
 * Every variant told apart rules every one out; one left untold is the only
 * bit set (its neighbours in the tally, told apart, must not leak into a bit
 * past the last variant). */
Test(certificate, a_variant_told_apart_somewhere_is_ruled_out)
{
    refenc_certificate_tally t;
    memset(&t, 0, sizeof t);
    for (int v = 0; v < REFENC_VAR_COUNT; v++)
        t.stored[v] = t.told_apart[v] = 1;
    cr_expect(refenc_variant_set_equal(refenc_certificate_not_ruled_out(&t), refenc_variant_set_of(-1, -1)));
    const int last = REFENC_VAR_COUNT - 1;
    t.told_apart[last] = 0;
    cr_expect(refenc_variant_set_equal(refenc_certificate_not_ruled_out(&t), refenc_variant_set_of(last, -1)));
    t.stored[last] = 0; /* never compared: nothing to rule out */
    cr_expect(refenc_variant_set_equal(refenc_certificate_not_ruled_out(&t), refenc_variant_set_of(-1, -1)));
}
