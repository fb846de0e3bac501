/* refenc_certify_case (ref/certify.h) on real golden cases with results files
 * built from the golden values: each rule of the verdict, the report's
 * figures, the tolerance policy and its case scaling, and the diagnosis. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../ref/tool/certify.h"
#include "../../ref/io/safetensors.h"

static const char *srcdir(void)
{
    const char *s = getenv("REFENC_SRCDIR");
    return s && *s ? s : ".";
}

static void load(refenc_st_file *f, const char *name)
{
    char path[4096];
    refenc_error err;
    snprintf(path, sizeof path, "%s/golden/cases/%s.safetensors", srcdir(), name);
    cr_assert_eq(refenc_st_read(f, path, &err), REFENC_OK, "%s", err.message);
}

/* A results file: the named tensors of `from` (a golden file), as doubles,
 * each optionally changed by edit(), written as dtype. */
typedef void (*edit_fn)(const char *name, double *x, size_t n);

static void write_results(const char *path, const refenc_st_file *from, const char *const *names,
                          size_t n_names, refenc_st_dtype dtype, edit_fn edit)
{
    refenc_st_entry e[16];
    void *bufs[16];
    refenc_error err;
    for (size_t i = 0; i < n_names; i++) {
        const refenc_st_tensor *t = refenc_st_find(from, names[i]);
        cr_assert_not_null(t, "%s has no tensor %s", from->path, names[i]);
        double *x = malloc(t->numel * sizeof *x);
        cr_assert_eq(refenc_st_to_f64(x, from, t, &err), REFENC_OK);
        if (edit)
            edit(names[i], x, t->numel);
        /* result names drop a leading "alt.<variant>." */
        const char *out = strstr(names[i], "out.");
        e[i] = (refenc_st_entry){.name = out, .dtype = dtype, .ndim = t->ndim};
        memcpy(e[i].shape, t->shape, sizeof e[i].shape);
        if (dtype == REFENC_ST_F64) {
            bufs[i] = x;
        } else {
            float *f = malloc(t->numel * sizeof *f);
            for (size_t k = 0; k < t->numel; k++)
                f[k] = (float)x[k];
            free(x);
            bufs[i] = f;
        }
        e[i].data = bufs[i];
    }
    cr_assert_eq(refenc_st_write(path, e, n_names, NULL, &err), REFENC_OK, "%s", err.message);
    for (size_t i = 0; i < n_names; i++)
        free(bufs[i]);
}

static int certify(refenc_case_report *rep, const refenc_st_file *golden, const char *path,
                   const refenc_certify_options *opt, refenc_error *err)
{
    refenc_st_file res;
    cr_assert_eq(refenc_st_read(&res, path, err), REFENC_OK, "%s", err->message);
    int st = refenc_certify_case(rep, golden, &res, opt, err);
    refenc_st_free(&res);
    return st;
}

static char tmp[64];

static void setup(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/refenc-certify-XXXXXX");
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    close(fd);
}

static void teardown(void)
{
    unlink(tmp);
}

TestSuite(certify, .init = setup, .fini = teardown);

static const char *const OUT[] = {"out.output"};

Test(certify, golden_values_pass_in_every_float_dtype)
{
    refenc_st_file g;
    load(&g, "layernorm_eps1e-5");
    const refenc_st_dtype dts[2] = {REFENC_ST_F64, REFENC_ST_F32};
    for (int k = 0; k < 2; k++) {
        refenc_case_report rep;
        refenc_error err;
        write_results(tmp, &g, OUT, 1, dts[k], NULL);
        cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK, "%s", err.message);
        cr_expect(rep.pass, "%s results equal to the golden must pass", refenc_st_dtype_name(dts[k]));
        cr_expect_eq(rep.outputs[0].status, REFENC_OUT_PASS);
        cr_expect_eq(rep.outputs[0].dtype, dts[k]);
        /* F64: identical values, every figure 0 */
        if (dts[k] == REFENC_ST_F64)
            cr_expect(rep.outputs[0].max_abs == 0 && rep.outputs[0].max_ulp == 0 && rep.outputs[0].nmse == 0);
        /* F32: rounding to float is at most half a float ulp */
        else
            cr_expect(rep.outputs[0].max_ulp <= 0.5, "F32 rounding: %g ulps", rep.outputs[0].max_ulp);
        refenc_case_report_free(&rep);
    }
    refenc_st_free(&g);
}

static void shift_element_7(const char *name, double *x, size_t n)
{
    (void)name;
    cr_assert(n > 7);
    x[7] += 1e-6; /* 1e4 F64 tolerances, 0.1 F32 tolerances */
}

Test(certify, one_element_out_of_tolerance_fails_with_its_index)
{
    refenc_st_file g;
    load(&g, "layernorm_eps1e-5");
    refenc_case_report rep;
    refenc_error err;
    write_results(tmp, &g, OUT, 1, REFENC_ST_F64, shift_element_7);
    cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK);
    const refenc_output_report *r = &rep.outputs[0];
    cr_expect(!rep.pass);
    cr_expect_eq(r->status, REFENC_OUT_FAIL);
    cr_expect_eq(r->out_of_tol, 1);
    cr_expect_eq(r->worst_flat, 7);
    cr_expect(fabs(r->max_abs - 1e-6) < 1e-12, "max_abs %g", r->max_abs);
    cr_expect_eq(rep.first_divergence, 0);
    cr_expect_str_empty(rep.diagnosis, "a random shift matches no known variant");
    refenc_case_report_free(&rep);
    /* the same shift is within the float32 policy (atol 1e-5): negative control of the policy */
    write_results(tmp, &g, OUT, 1, REFENC_ST_F32, shift_element_7);
    cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK);
    cr_expect(rep.pass, "1e-6 is within float32's atol 1e-5");
    refenc_case_report_free(&rep);
    refenc_st_free(&g);
}

static void nan_at_0(const char *name, double *x, size_t n)
{
    (void)name;
    (void)n;
    x[0] = NAN;
}

Test(certify, a_nan_never_passes_even_with_a_huge_tolerance)
{
    refenc_st_file g;
    load(&g, "layernorm_eps1e-5");
    refenc_case_report rep;
    refenc_error err;
    const refenc_certify_options wide = {.override_tolerance = 1, .tol = {1e300, 1e300}};
    write_results(tmp, &g, OUT, 1, REFENC_ST_F64, nan_at_0);
    cr_assert_eq(certify(&rep, &g, tmp, &wide, &err), REFENC_OK);
    cr_expect(!rep.pass);
    cr_expect_eq(rep.outputs[0].nonfinite, 1);
    /* a NaN never hides behind a finite figure */
    const refenc_output_report *r = &rep.outputs[0];
    cr_expect(isnan(r->nmse) && isnan(r->max_abs) && isnan(r->max_rel) && isnan(r->max_ulp),
              "nmse %g abs %g rel %g ulp %g", r->nmse, r->max_abs, r->max_rel, r->max_ulp);
    refenc_case_report_free(&rep);
    refenc_st_free(&g);
}

Test(certify, dont_care_elements_are_never_compared)
{
    /* attention_padding marks padded query rows don't-care: NaN there passes */
    refenc_st_file g;
    load(&g, "attention_padding");
    const refenc_st_tensor *dc = refenc_st_find(&g, "dontcare.out.output");
    cr_assert_not_null(dc);
    int64_t *mask = malloc(dc->numel * sizeof *mask);
    refenc_error err;
    cr_assert_eq(refenc_st_to_i64(mask, &g, dc, &err), REFENC_OK);
    size_t first_dc = 0;
    while (!mask[first_dc])
        first_dc++;
    const refenc_st_tensor *t = refenc_st_find(&g, "out.output");
    double *x = malloc(t->numel * sizeof *x);
    cr_assert_eq(refenc_st_to_f64(x, &g, t, &err), REFENC_OK);
    x[first_dc] = NAN;
    refenc_st_entry e = {.name = "out.output", .dtype = REFENC_ST_F64, .ndim = t->ndim, .data = x};
    memcpy(e.shape, t->shape, sizeof e.shape);
    cr_assert_eq(refenc_st_write(tmp, &e, 1, NULL, &err), REFENC_OK);
    refenc_case_report rep;
    cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK);
    cr_expect(rep.pass, "a NaN in a don't-care element must not count");
    cr_expect(rep.outputs[1].dont_care > 0);
    refenc_case_report_free(&rep);
    /* negative control: the same NaN one element before the first don't-care row fails */
    cr_assert(first_dc > 0);
    x[first_dc] = 0.5;
    x[first_dc - 1] = NAN;
    cr_assert_eq(refenc_st_write(tmp, &e, 1, NULL, &err), REFENC_OK);
    cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK);
    cr_expect(!rep.pass);
    refenc_case_report_free(&rep);
    free(x);
    free(mask);
    refenc_st_free(&g);
}

Test(certify, wrong_shape_missing_output_and_unknown_tensor)
{
    refenc_st_file g;
    load(&g, "attention_basic");
    refenc_error err;
    refenc_case_report rep;
    /* only the optional weights: the required output is missing */
    const char *const w[] = {"out.weights"};
    write_results(tmp, &g, w, 1, REFENC_ST_F64, NULL);
    cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK);
    cr_expect(!rep.pass);
    cr_expect_eq(rep.outputs[1].status, REFENC_OUT_MISSING);
    cr_expect_eq(rep.outputs[0].status, REFENC_OUT_PASS);
    refenc_case_report_free(&rep);

    /* a wrong shape: out.output written as (B*L, D) */
    const refenc_st_tensor *t = refenc_st_find(&g, "out.output");
    double *x = malloc(t->numel * sizeof *x);
    cr_assert_eq(refenc_st_to_f64(x, &g, t, &err), REFENC_OK);
    refenc_st_entry e = {.name = "out.output", .dtype = REFENC_ST_F64, .ndim = 2,
                         .shape = {t->shape[0] * t->shape[1], t->shape[2]}, .data = x};
    cr_assert_eq(refenc_st_write(tmp, &e, 1, NULL, &err), REFENC_OK);
    cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK);
    cr_expect(!rep.pass);
    cr_expect_eq(rep.outputs[1].status, REFENC_OUT_BAD_SHAPE);
    cr_expect(strstr(rep.outputs[1].note, "but the golden is") != NULL, "%s", rep.outputs[1].note);
    refenc_case_report_free(&rep);

    /* a misspelt output is a format error naming the tensor */
    e.name = "out.outptu";
    e.ndim = 3;
    memcpy(e.shape, t->shape, sizeof e.shape);
    cr_assert_eq(refenc_st_write(tmp, &e, 1, NULL, &err), REFENC_OK);
    cr_expect_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_EFORMAT);
    cr_expect(strstr(err.message, "'out.outptu'") != NULL, "%s", err.message);
    refenc_case_report_free(&rep);

    /* an integer output is a format error */
    int64_t *ix = calloc(t->numel, sizeof *ix);
    refenc_st_entry ei = {.name = "out.output", .dtype = REFENC_ST_I64, .ndim = 3, .data = ix};
    memcpy(ei.shape, t->shape, sizeof ei.shape);
    cr_assert_eq(refenc_st_write(tmp, &ei, 1, NULL, &err), REFENC_OK);
    cr_expect_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_EFORMAT);
    cr_expect(strstr(err.message, "I64") != NULL, "%s", err.message);
    refenc_case_report_free(&rep);
    free(ix);
    free(x);
    refenc_st_free(&g);
}

Test(certify, the_case_scale_multiplies_the_float64_policy_only)
{
    refenc_st_file g;
    load(&g, "sinusoidal_pe_large_positions"); /* tolerance: {"scale": {"F64": 4}} */
    refenc_case_report rep;
    refenc_error err;
    write_results(tmp, &g, OUT, 1, REFENC_ST_F64, NULL);
    cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK);
    cr_expect_eq(rep.outputs[0].tol.rtol, 4e-10);
    cr_expect_eq(rep.outputs[0].tol.atol, 4e-11);
    refenc_case_report_free(&rep);
    write_results(tmp, &g, OUT, 1, REFENC_ST_F32, NULL);
    cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK);
    cr_expect_eq(rep.outputs[0].tol.rtol, 1.3e-6);
    cr_expect_eq(rep.outputs[0].tol.atol, 1e-5);
    refenc_case_report_free(&rep);
    /* an explicit tolerance overrides policy and scale */
    const refenc_certify_options opt = {.override_tolerance = 1, .tol = {0.5, 0.25}};
    cr_assert_eq(certify(&rep, &g, tmp, &opt, &err), REFENC_OK);
    cr_expect_eq(rep.outputs[0].tol.rtol, 0.5);
    cr_expect_eq(rep.outputs[0].tol.atol, 0.25);
    refenc_case_report_free(&rep);
    refenc_st_free(&g);
}

Test(certify, a_stored_variant_is_diagnosed_and_only_it)
{
    refenc_st_file g;
    load(&g, "layernorm_eps1e-5");
    refenc_case_report rep;
    refenc_error err;
    const char *const names[][1] = {{"alt.unbiased_variance.out.output"}, {"alt.layernorm_eps_x10.out.output"},
                                    {"alt.layernorm_eps_div10.out.output"}};
    const char *const expect[] = {"unbiased_variance", "layernorm_eps_x10", "layernorm_eps_div10"};
    for (int k = 0; k < 3; k++) {
        write_results(tmp, &g, names[k], 1, REFENC_ST_F64, NULL);
        cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK, "%s", err.message);
        cr_expect(!rep.pass);
        cr_expect_eq(rep.variants_checked, 3);
        cr_expect_str_eq(rep.diagnosis, expect[k]);
        cr_expect(rep.diagnosis_ratio <= 1);
        refenc_case_report_free(&rep);
    }
    /* a variant's values shifted far beyond tolerance match nothing */
    write_results(tmp, &g, names[0], 1, REFENC_ST_F64, shift_element_7);
    cr_assert_eq(certify(&rep, &g, tmp, NULL, &err), REFENC_OK);
    cr_expect_str_empty(rep.diagnosis);
    refenc_case_report_free(&rep);
    refenc_st_free(&g);
}

Test(certify, missing_results_fail_every_required_output)
{
    refenc_st_file g;
    load(&g, "alibi_h12");
    refenc_case_report rep;
    refenc_error err;
    cr_assert_eq(refenc_certify_missing(&rep, &g, "no results file", &err), REFENC_OK);
    cr_expect(!rep.pass);
    for (size_t i = 0; i < rep.n_outputs; i++)
        cr_expect_eq(rep.outputs[i].status, REFENC_OUT_MISSING, "%s", rep.outputs[i].name);
    cr_expect_str_eq(rep.note, "no results file");
    refenc_case_report_free(&rep);
    refenc_st_free(&g);
}

Test(certify, policy_table_and_ulp_errors)
{
    refenc_tolerance t;
    cr_expect(refenc_certify_policy(&t, REFENC_ST_F64) && t.rtol == 1e-10 && t.atol == 1e-11);
    cr_expect(refenc_certify_policy(&t, REFENC_ST_F32) && t.rtol == 1.3e-6 && t.atol == 1e-5);
    /* float16 and bfloat16 are certified by budget, not by a tolerance */
    cr_expect(!refenc_certify_policy(&t, REFENC_ST_F16));
    cr_expect(!refenc_certify_policy(&t, REFENC_ST_BF16));
    cr_expect(!refenc_certify_policy(&t, REFENC_ST_I64));
    /* one ulp at 1.0 in each format: 2^-52, 2^-23, 2^-10, 2^-7 */
    cr_expect_eq(refenc_ulp_error(1 + 0x1p-52, 1.0, REFENC_ST_F64), 1.0);
    cr_expect_eq(refenc_ulp_error(1 + 0x1p-23, 1.0, REFENC_ST_F32), 1.0);
    cr_expect_eq(refenc_ulp_error(1 + 0x1p-10, 1.0, REFENC_ST_F16), 1.0);
    cr_expect_eq(refenc_ulp_error(1 + 0x1p-7, 1.0, REFENC_ST_BF16), 1.0);
    /* the binade of want: just below 2 the ulp is half of that at 2 */
    cr_expect_eq(refenc_ulp_error(2 - 0x1p-52, 2 - 0x1p-51, REFENC_ST_F64), 1.0);
    /* at zero: the smallest subnormal of the format */
    cr_expect_eq(refenc_ulp_error(0x1p-1074, 0.0, REFENC_ST_F64), 1.0);
    cr_expect_eq(refenc_ulp_error(0x1p-24, 0.0, REFENC_ST_F16), 1.0);
    cr_expect_str_eq(refenc_output_status_name(REFENC_OUT_BAD_SHAPE), "FAIL (shape)");
}
