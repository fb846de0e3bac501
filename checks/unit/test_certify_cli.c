/* refenc certify's command line for partial and fused implementations and for
 * CI: --case lists, --skip-missing, --outputs, --junit, a missing results
 * directory, expected failures and the run's most likely bug. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../robustness/robust.h"

static const char *golden(void)
{
    const char *s = getenv("REFENC_SRCDIR");
    static char buf[RB_PATH_MAX];
    snprintf(buf, sizeof buf, "%s/golden", s && *s ? s : ".");
    return buf;
}

static char dir[RB_PATH_MAX], results[RB_PATH_MAX + 16], out[RB_PATH_MAX + 32];

static void setup(void)
{
    rb_tmpdir(dir);
    snprintf(results, sizeof results, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
}

static void teardown(void)
{
    char cmd[3 * RB_PATH_MAX];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir); /* results/ is a subdirectory */
    cr_assert_eq(system(cmd), 0);
}

TestSuite(certify_cli, .init = setup, .fini = teardown);

/* results/NAME.safetensors from the emulation (EMU NULL: the reference). */
static void make_results(const char *name, const char *emu, const char *bug)
{
    char g[2 * RB_PATH_MAX], r[2 * RB_PATH_MAX];
    snprintf(g, sizeof g, "%s/cases/%s.safetensors", golden(), name);
    snprintf(r, sizeof r, "%s/%s.safetensors", results, name);
    const char *args[] = {"refenc", "run", "--case", g, "--out", r, emu ? "--emulate" : "--bug", emu ? emu : bug,
                          emu && bug ? "--bug" : NULL, bug, NULL};
    if (emu == NULL && bug == NULL)
        args[6] = NULL;
    rb_result res = rb_run(args);
    cr_assert_eq(res.status, 0, "%s: %s", name, res.err);
    rb_result_free(&res);
}

/* refenc certify --golden golden --results results EXTRA... */
static rb_result certify(const char *const *extra)
{
    const char *args[32] = {"refenc", "certify", "--golden", golden(), "--results", results};
    size_t n = 6;
    for (; extra[n - 6] != NULL && n < 31; n++)
        args[n] = extra[n - 6];
    args[n] = NULL;
    return rb_run(args);
}

Test(certify_cli, a_missing_results_directory_is_a_usage_error)
{
    char missing[2 * RB_PATH_MAX];
    snprintf(missing, sizeof missing, "%s/no-such-dir", dir);
    const char *args[] = {"refenc", "certify", "--golden", golden(), "--results", missing, NULL};
    rb_result r = rb_run(args);
    char frag[3 * RB_PATH_MAX];
    snprintf(frag, sizeof frag, "%s (the results directory): No such file or directory", missing);
    rb_expect_error(&r, 2, "certify", "missing results directory", (const char *[]){frag, NULL});
    cr_expect_str_empty(r.out, "nothing is certified: %s", r.out);
    rb_result_free(&r);
}

Test(certify_cli, case_patterns_repeat_and_take_comma_lists)
{
    make_results("layernorm_d4", NULL, NULL);
    make_results("softmax_basic", NULL, NULL);
    make_results("alibi_h4", NULL, NULL);
    make_results("alibi_h6", NULL, NULL);
    rb_result r = certify((const char *[]){"--case", "layernorm_d4,softmax_basic", "--case", "alibi_h[46]", NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "summary: 4 cases, 4 passed, 0 failed: PASS") != NULL, "%s", r.out);
    rb_result_free(&r);
    /* every pattern must match a case: a typo is an error, not a smaller run */
    r = certify((const char *[]){"--case", "layernorm_d4,layrnorm_d4", NULL});
    rb_expect_error(&r, 2, "certify", "a pattern matching nothing",
                    (const char *[]){"no golden case matches 'layrnorm_d4'", NULL});
    rb_result_free(&r);
    r = certify((const char *[]){"--case", "layernorm_d4,", NULL});
    rb_expect_error(&r, 2, "certify", "an empty pattern", (const char *[]){"--case: empty pattern", NULL});
    rb_result_free(&r);
}

Test(certify_cli, skip_missing_skips_cases_without_results_but_needs_one)
{
    make_results("layernorm_d4", "bf16", NULL);
    rb_result r = certify((const char *[]){"--case", "layernorm_d4,softmax_basic", NULL});
    cr_expect_eq(r.status, 1, "without --skip-missing a missing file fails: %s", r.out);
    rb_result_free(&r);
    r = certify((const char *[]){"--case", "layernorm_d4,softmax_basic", "--skip-missing", NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "softmax_basic") != NULL && strstr(r.out, "SKIP") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "2 cases, 1 passed, 0 failed, 1 skipped: PASS") != NULL, "%s", r.out);
    rb_result_free(&r);
    r = certify((const char *[]){"--case", "softmax_basic", "--skip-missing", NULL});
    rb_expect_error(&r, 2, "certify", "no results at all",
                    (const char *[]){"no case was certified: no results file for any selected case", NULL});
    rb_result_free(&r);
}

/* A fused attention kernel: only the attention block's outputs, in bfloat16. */
Test(certify_cli, outputs_certifies_what_a_fused_kernel_produces)
{
    make_results("encoder_pre", "bf16", NULL);
    make_results("layernorm_d4", "bf16", NULL);
    snprintf(out, sizeof out, "%s/cert.json", dir);
    rb_result r = certify((const char *[]){"--case", "encoder_pre,layernorm_d4", "--outputs",
                                           "out.layers.*.self_attn*", "--json", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    rb_result_free(&r);
    json_t *cert = json_load_file(out, 0, NULL);
    cr_assert_not_null(cert);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(cert, "selection"), "outputs")),
                     "out.layers.*.self_attn*");
    size_t i, k, checked = 0;
    json_t *c, *o;
    json_array_foreach(json_object_get(cert, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "case"));
        const char *verdict = json_string_value(json_object_get(c, "verdict"));
        cr_expect_str_eq(verdict, strcmp(name, "layernorm_d4") == 0 ? "SKIP" : "PASS", "%s", name);
        json_array_foreach(json_object_get(c, "outputs"), k, o) {
            const char *oname = json_string_value(json_object_get(o, "name"));
            const char *status = json_string_value(json_object_get(o, "status"));
            const int match = strstr(oname, ".self_attn") != NULL;
            cr_expect_str_eq(status, match ? "PASS" : "not checked", "%s %s", name, oname);
            checked += match;
        }
    }
    cr_expect_eq(checked, 4, "two layers, weights and output each");
    json_decref(cert);
    /* the matched outputs are required: a kernel that omits one fails */
    make_results("encoder_pre", NULL, NULL);
    r = certify((const char *[]){"--case", "encoder_pre", "--outputs", "out.nothing*", NULL});
    rb_expect_error(&r, 2, "certify", "no output matches",
                    (const char *[]){"no case was certified: no results file, or no output matches --outputs", NULL});
    rb_result_free(&r);
}

Test(certify_cli, junit_has_a_testcase_per_output_and_failures_with_the_worst_element)
{
    make_results("layernorm_d4", "bf16", "unbiased_variance");
    make_results("softmax_basic", "bf16", NULL);
    snprintf(out, sizeof out, "%s/junit.xml", dir);
    rb_result r = certify((const char *[]){"--case", "layernorm_d4,softmax_basic", "--junit", out, NULL});
    cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
    rb_result_free(&r);
    size_t n;
    char *xml = (char *)rb_read_file(out, &n);
    cr_assert_not_null(xml);
    cr_expect(strstr(xml, "<testsuite name=\"refenc certify\" tests=\"2\" failures=\"1\" errors=\"0\">") != NULL,
              "%s", xml);
    cr_expect(strstr(xml, "<testcase classname=\"softmax_basic\" name=\"out.output\"></testcase>") != NULL, "%s",
              xml);
    cr_expect(strstr(xml, "<testcase classname=\"layernorm_d4\" name=\"out.output\"><failure message=\"FAIL: "
                          "worst at [") != NULL, "%s", xml);
    cr_expect(!rb_has_temporary_file(dir));
    free(xml);
}

/* The run's most likely bug is the variant a majority of the failing cases
 * name; a minority is never promoted (unbiased_variance in bfloat16 is named
 * on layernorm_d4 but not on layernorm_var_eps: 1 of 2), the candidates are
 * listed instead. */
Test(certify_cli, the_summary_names_the_bug_the_failing_cases_agree_on)
{
    make_results("rope_half_base1e4", "bf16", "rope_layout_swapped");
    make_results("rope_interleaved_base1e4", "bf16", "rope_layout_swapped");
    make_results("softmax_basic", "bf16", NULL);
    rb_result r = certify((const char *[]){"--case", "rope_half_base1e4,rope_interleaved_base1e4,softmax_basic", NULL});
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "\nmost likely bug: rope_layout_swapped (named on 2 of 2 failing cases") != NULL, "%s",
              r.out);
    rb_result_free(&r);
    /* a minority: named on 1 of 2 failing cases, the other matching none */
    make_results("layernorm_d4", "bf16", "unbiased_variance");
    make_results("layernorm_var_eps", "bf16", "unbiased_variance");
    r = certify((const char *[]){"--case", "layernorm_d4,layernorm_var_eps", NULL});
    cr_expect(strstr(r.out, "most likely bug: undecided (no variant is named by a majority of the 2 failing cases): "
                            "unbiased_variance (1 case); 1 of them match no known variant") != NULL, "%s", r.out);
    rb_result_free(&r);
    /* two cases naming different bugs name none, and list both */
    make_results("layernorm_var_eps", "bf16", "layernorm_eps_x10");
    r = certify((const char *[]){"--case", "layernorm_d4,layernorm_var_eps", NULL});
    cr_expect(strstr(r.out, "most likely bug: undecided (no variant is named by a majority of the 2 failing cases): "
                            "layernorm_eps_x10 (1 case) or unbiased_variance (1 case)") != NULL, "%s", r.out);
    rb_result_free(&r);
}

/* --json and --junit naming the same file: one would silently replace the
 * other; refused with exit 2 before anything is certified or written. */
Test(certify_cli, json_and_junit_to_the_same_file_are_refused)
{
    make_results("softmax_basic", "bf16", NULL);
    char other[2 * RB_PATH_MAX];
    snprintf(out, sizeof out, "%s/cert.out", dir);
    snprintf(other, sizeof other, "%s/./cert.out", dir);
    const char *const pairs[2][2] = {{out, out}, {out, other}};
    for (int k = 0; k < 2; k++) {
        rb_result r = certify((const char *[]){"--case", "softmax_basic", "--json", pairs[k][0], "--junit",
                                               pairs[k][1], NULL});
        cr_expect_eq(r.status, 2, "%s", r.out);
        cr_expect(strstr(r.err, "is the same file as the --json certificate") != NULL, "%s", r.err);
        cr_expect_not(rb_exists(out), "a file was written");
        rb_result_free(&r);
    }
    /* negative control: two files, both written */
    snprintf(other, sizeof other, "%s/cert.xml", dir);
    rb_result r = certify((const char *[]){"--case", "softmax_basic", "--json", out, "--junit", other, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(rb_exists(out) && rb_exists(other));
    rb_result_free(&r);
}

/* --case and --outputs patterns that are not UTF-8 stay in the certificate's
 * record of the selection, \xNN-escaped (before: dropped, the outputs
 * pattern and the whole selection with it). */
Test(certify_cli, non_utf8_patterns_are_recorded_escaped)
{
    make_results("softmax_basic", "bf16", NULL);
    snprintf(out, sizeof out, "%s/cert.json", dir);
    rb_result r = certify((const char *[]){"--case", "[!\xff]oftmax_basic", "--outputs", "out.[!\xfe]utput", "--json",
                                           out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    rb_result_free(&r);
    json_t *doc = json_load_file(out, 0, NULL);
    cr_assert_not_null(doc);
    const json_t *sel = json_object_get(doc, "selection");
    cr_expect_str_eq(json_string_value(json_array_get(json_object_get(sel, "cases"), 0)), "[!\\xff]oftmax_basic");
    cr_expect_str_eq(json_string_value(json_object_get(sel, "outputs")), "out.[!\\xfe]utput");
    json_decref(doc);
}

Test(certify_cli, a_hazard_shows_as_xfail_and_does_not_fail_the_run)
{
    make_results("layernorm_large_mean", "bf16", NULL);
    rb_result r = certify((const char *[]){"--case", "layernorm_large_mean", NULL});
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "XFAIL (inputs need float32: BF16 cannot hold them)") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "0 passed, 0 failed, 1 expected failure (XFAIL), 0 unexpected passes (XPASS): PASS") !=
                  NULL, "%s", r.out);
    rb_result_free(&r);
}

/* In JUnit, an expected failure (a hazard: inputs bfloat16 cannot hold) is skipped with the hazard as its message, and
 * a case whose results cannot be read is an error naming why; the summary counts it. */
Test(certify_cli, junit_skips_an_expected_failure_and_errs_on_an_unreadable_case)
{
    make_results("layernorm_large_mean", "bf16", NULL);
    char bad[2 * RB_PATH_MAX];
    snprintf(bad, sizeof bad, "%s/softmax_basic.safetensors", results);
    rb_write_file(bad, "not safetensors", 15);
    snprintf(out, sizeof out, "%s/junit.xml", dir);
    rb_result r = certify((const char *[]){"--case", "layernorm_large_mean,softmax_basic", "--junit", out, NULL});
    cr_expect_neq(r.status, 0, "an unreadable results file passed: %s%s", r.out, r.err);
    rb_result_free(&r);
    size_t n;
    char *xml = (char *)rb_read_file(out, &n);
    cr_assert_not_null(xml);
    cr_expect(strstr(xml, "errors=\"1\">") != NULL, "%s", xml);
    cr_expect(strstr(xml, "<testcase classname=\"layernorm_large_mean\" name=\"out.output\"><skipped message=\"") !=
                  NULL, "%s", xml);
    cr_expect(strstr(xml, "<testcase classname=\"softmax_basic\" name=\"case\"><error message=\"") != NULL, "%s", xml);
    free(xml);
    /* negative control: the readable case alone has no error */
    r = certify((const char *[]){"--case", "layernorm_large_mean", "--junit", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    rb_result_free(&r);
    xml = (char *)rb_read_file(out, &n);
    cr_expect(strstr(xml, "errors=\"0\">") != NULL && strstr(xml, "<error") == NULL, "%s", xml);
    free(xml);
}
