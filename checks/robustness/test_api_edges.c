/* The edges of the library's boundary that the end-to-end catalogue does not
 * reach: names of every status, freeing NULL, the ULP measure of each result
 * dtype at its binade edges, a case's tolerance scale when it is absent or
 * nonsensical, a don't-care mask of a non-integer dtype, a golden case that
 * lacks its positions, inputs made invalid after loading. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/tool/certify.h"
#include "../../ref/encoder.h"
#include "../../ref/core/case.h"
#include "../../ref/io/case_file.h"
#include "../../ref/tool/run_case.h"
#include "../../ref/io/safetensors.h"
#include "robust.h"

Test(api_edges, every_status_has_a_name)
{
    const char *want[] = {"ok", "invalid value", "size limit", "out of memory", "format error", "i/o error"};
    for (int s = REFENC_OK; s <= REFENC_EIO; s++)
        cr_expect_str_eq(refenc_status_name(s), want[s]);
    cr_expect_str_eq(refenc_status_name(-1), "unknown status");
    cr_expect_str_eq(refenc_status_name(REFENC_EIO + 1), "unknown status");

    const char *outs[] = {"PASS", "FAIL", "FAIL (shape)", "FAIL (missing)", "not provided"};
    for (int s = REFENC_OUT_PASS; s <= REFENC_OUT_NOT_PROVIDED; s++)
        cr_expect_str_eq(refenc_output_status_name((refenc_output_status)s), outs[s]);
    cr_expect_str_eq(refenc_output_status_name((refenc_output_status)99), "?");
}

Test(api_edges, freeing_null_does_nothing)
{
    refenc_st_free(NULL);
    refenc_case_free(NULL);
    refenc_case_report_free(NULL);
    refenc_workspace_free(NULL);
    refenc_params_free(NULL);
    refenc_error_set(NULL, REFENC_EINVAL, "no error to fill");
    refenc_error_clear(NULL);
}

/* One ULP of each format at 1 (binade [1, 2)), at 0 (the smallest subnormal),
 * and in the subnormal range (the spacing of the smallest binade). */
Test(api_edges, ulp_error_of_each_dtype)
{
    const struct {
        refenc_st_dtype d;
        int p, emin; /* precision, exponent of the smallest normal */
    } f[] = {{REFENC_ST_F64, 53, -1022}, {REFENC_ST_F32, 24, -126}, {REFENC_ST_F16, 11, -14}, {REFENC_ST_BF16, 8, -126}};
    for (size_t i = 0; i < 4; i++) {
        const double ulp1 = ldexp(1.0, 1 - f[i].p), ulp_min = ldexp(1.0, f[i].emin - f[i].p + 1);
        const char *n = refenc_st_dtype_name(f[i].d);
        cr_expect_eq(refenc_ulp_error(1 + ulp1, 1, f[i].d), 1.0, "%s at 1", n);
        cr_expect_eq(refenc_ulp_error(1.5 - 3 * ulp1, 1.5, f[i].d), 3.0, "%s at 1.5", n);
        cr_expect_eq(refenc_ulp_error(-2 - 4 * ulp1, -2, f[i].d), 2.0, "%s at -2 (the next binade)", n);
        cr_expect_eq(refenc_ulp_error(ulp_min, 0, f[i].d), 1.0, "%s at 0", n);
        const double sub = ldexp(1.0, f[i].emin - 3); /* subnormal: spaced by ulp_min */
        cr_expect_eq(refenc_ulp_error(sub + 2 * ulp_min, sub, f[i].d), 2.0, "%s in the subnormals", n);
    }
}

Test(api_edges, only_float_dtypes_have_a_tolerance_policy)
{
    refenc_tolerance t;
    cr_expect(refenc_certify_policy(&t, REFENC_ST_F64) && t.rtol == 1e-10 && t.atol == 1e-11);
    cr_expect(!refenc_certify_policy(&t, REFENC_ST_I64));
    cr_expect(!refenc_certify_policy(&t, REFENC_ST_U8));
    cr_expect(!refenc_certify_policy(&t, REFENC_ST_BOOL));
}

/* ---- certification rules on edited golden files ----------------------------- */

typedef struct {
    refenc_st_file golden, results;
    char dir[RB_PATH_MAX], gpath[RB_PATH_MAX + 32], rpath[RB_PATH_MAX + 32];
} pair;

static void open_pair(pair *p, rb_golden *g, const char *case_name)
{
    rb_tmpdir(p->dir);
    snprintf(p->gpath, sizeof p->gpath, "%s/golden.safetensors", p->dir);
    snprintf(p->rpath, sizeof p->rpath, "%s/results.safetensors", p->dir);
    rb_golden_write(g, p->gpath);
    rb_reference_results(case_name, p->rpath);
    refenc_error err;
    cr_assert_eq(refenc_st_read(&p->golden, p->gpath, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(&p->results, p->rpath, &err), REFENC_OK, "%s", err.message);
}

static void close_pair(pair *p)
{
    refenc_st_free(&p->golden);
    refenc_st_free(&p->results);
    rb_tmpdir_remove(p->dir);
}

/* Certifies act_gelu's reference results against its golden whose metadata
 * "tolerance" is `tolerance` (NULL: absent); returns the status. */
static int certify_with_tolerance(const char *tolerance, refenc_case_report *rep, refenc_error *err)
{
    rb_golden g;
    rb_golden_load(&g, "act_gelu");
    rb_golden_set_meta(&g, "tolerance", tolerance);
    pair p;
    open_pair(&p, &g, "act_gelu");
    const int st = refenc_certify_case(rep, &p.golden, &p.results, NULL, err);
    close_pair(&p);
    rb_golden_free(&g);
    return st;
}

Test(api_edges, a_tolerance_scale_is_absent_or_valid_never_guessed)
{
    /* absent or {}: the policy as it is */
    const char *none[] = {NULL, "{}", "{\"reason\": \"none needed\"}"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        refenc_case_report rep;
        refenc_error err;
        cr_assert_eq(certify_with_tolerance(none[i], &rep, &err), REFENC_OK, "%s", err.message);
        cr_expect(rep.outputs[0].tol.rtol == 1e-10 && rep.outputs[0].tol.atol == 1e-11,
                  "tolerance %s: rtol %g atol %g", none[i] ? none[i] : "(absent)", rep.outputs[0].tol.rtol,
                  rep.outputs[0].tol.atol);
        refenc_case_report_free(&rep);
    }
    /* anything else that is not a valid scale is a format error naming the case, never "scale 1" */
    const char *bad[] = {"{\"scale\": {\"F64\": 0}}", "{\"scale\": {\"F64\": -10}}", "{\"scale\": {\"F64\": \"10\"}}",
                         "{\"scale\": 10}", "not json", "{\"scale\": {\"F8\": 2}}", "{\"scael\": {\"F64\": 2}}", "[]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        refenc_case_report rep;
        refenc_error err;
        cr_expect_eq(certify_with_tolerance(bad[i], &rep, &err), REFENC_EFORMAT, "tolerance %s", bad[i]);
        cr_expect(strstr(err.message, ": case 'act_gelu': __metadata__.tolerance ") != NULL, "tolerance %s: %s",
                  bad[i], err.message);
        refenc_case_report_free(&rep);
    }
}

Test(api_edges, a_dont_care_mask_must_be_integers)
{
    rb_golden g;
    rb_golden_load(&g, "softmax_masked");
    const size_t shape[2] = {4, 9};
    rb_golden_reshape(&g, "dontcare.out.output", REFENC_ST_F64, 2, shape);
    pair p;
    open_pair(&p, &g, "softmax_masked");
    refenc_case_report rep;
    refenc_error err;
    cr_expect_eq(refenc_certify_case(&rep, &p.golden, &p.results, NULL, &err), REFENC_EFORMAT);
    cr_expect(strstr(err.message, "tensor 'dontcare.out.output' (data at byte ") != NULL &&
                  strstr(err.message, "dtype F64 is not an integer type") != NULL,
              "%s", err.message);
    refenc_case_report_free(&rep);
    /* and a golden that is not one: refenc_certify_missing refuses it too */
    rb_golden_set_meta(&g, "outputs", NULL);
    rb_golden_write(&g, p.gpath);
    refenc_st_free(&p.golden);
    cr_assert_eq(refenc_st_read(&p.golden, p.gpath, &err), REFENC_OK);
    cr_expect_eq(refenc_certify_missing(&rep, &p.golden, "no file", &err), REFENC_EFORMAT);
    cr_expect(strstr(err.message, "not a refenc golden case") != NULL, "%s", err.message);
    refenc_case_report_free(&rep);
    close_pair(&p);
    rb_golden_free(&g);
}

/* ---- loading cases ---------------------------------------------------------- */

static int load(refenc_case *c, rb_golden *g, refenc_error *err, char *path)
{
    rb_golden_write(g, path);
    refenc_st_file f;
    cr_assert_eq(refenc_st_read(&f, path, err), REFENC_OK, "%s", err->message);
    const int st = refenc_case_from_file(c, &f, err);
    refenc_st_free(&f);
    return st;
}

Test(api_edges, cases_with_a_tensor_of_the_wrong_rank_or_no_positions)
{
    char dir[RB_PATH_MAX], path[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(path, sizeof path, "%s/case.safetensors", dir);
    refenc_case c;
    refenc_error err;
    rb_golden g;

    rb_golden_load(&g, "rope_interleaved"); /* x (B, H, L, Dh), positions (L) */
    rb_golden_drop(&g, "in.positions");
    cr_expect_eq(load(&c, &g, &err, path), REFENC_EFORMAT);
    cr_expect(strstr(err.message, ": a rope case needs in.positions") != NULL, "%s", err.message);
    rb_golden_free(&g);

    rb_golden_load(&g, "layernorm_small_variance");
    const size_t two_d[2] = {1, 24};
    rb_golden_reshape(&g, "weight", REFENC_ST_F32, 2, two_d);
    cr_expect_eq(load(&c, &g, &err, path), REFENC_EFORMAT);
    cr_expect(strstr(err.message, "tensor 'weight' (data at byte ") != NULL &&
                  strstr(err.message, ") should have shape (24)") != NULL,
              "%s", err.message);
    rb_golden_free(&g);

    rb_golden_load(&g, "encoder_pre_rope"); /* tokens and mask (2, 7) */
    const size_t bl[2] = {2, 6};
    rb_golden_reshape(&g, "in.key_padding_mask", REFENC_ST_BOOL, 2, bl);
    cr_expect_eq(load(&c, &g, &err, path), REFENC_EFORMAT);
    cr_expect(strstr(err.message, "tensor 'in.key_padding_mask' (data at byte ") != NULL &&
                  strstr(err.message, ") should have shape (2, 7)") != NULL,
              "%s", err.message);
    rb_golden_free(&g);

    /* inputs made invalid after loading: the reference checks them again */
    rb_golden_load(&g, "encoder_pre_rope");
    cr_assert_eq(load(&c, &g, &err, path), REFENC_OK, "%s", err.message);
    c.tokens[3] = 1000;
    cr_expect_eq(refenc_case_run_reference(&c, NULL, &err), REFENC_EINVAL);
    cr_expect_str_eq(err.message, "input: in.tokens[0][3] = 1000 is outside [0, vocab_size = 50)");
    refenc_case_free(&c);
    rb_golden_free(&g);
    rb_tmpdir_remove(dir);
}
