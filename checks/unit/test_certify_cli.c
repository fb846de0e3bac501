/* refenc certify's command line for partial and fused implementations and for
 * CI: --case lists, --skip-missing, --outputs, --junit, a missing results
 * directory, expected failures and the run's most likely bug. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/io/safetensors.h"
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

/* refenc HEAD... EXTRA... (head: n_head arguments; extra: NULL-terminated) */
static rb_result run_args(const char *const *head, size_t n_head, const char *const *extra)
{
    const char *args[32];
    size_t n = 0;
    for (; n < n_head; n++)
        args[n] = head[n];
    for (size_t k = 0; extra[k] != NULL && n < 31; k++, n++)
        args[n] = extra[k];
    args[n] = NULL;
    return rb_run(args);
}

/* refenc certify --golden golden --results results EXTRA... */
static rb_result certify(const char *const *extra)
{
    const char *head[] = {"refenc", "certify", "--golden", golden(), "--results", results};
    return run_args(head, 6, extra);
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
    cr_expect(strstr(xml, "<testsuite name=\"refenc certify\" tests=\"2\" failures=\"1\" errors=\"0\" "
                          "skipped=\"0\">") != NULL, "%s", xml);
    cr_expect(strstr(xml, "<testcase classname=\"softmax_basic\" name=\"out.output\"></testcase>") != NULL, "%s",
              xml);
    cr_expect(strstr(xml, "<testcase classname=\"layernorm_d4\" name=\"out.output\"><failure message=\"FAIL: "
                          "out.output[1,3,3]: got ") != NULL, "%s", xml);
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
    cr_expect(strstr(xml, "errors=\"1\" skipped=\"1\">") != NULL, "%s", xml);
    cr_expect(strstr(xml, "<testcase classname=\"layernorm_large_mean\" name=\"out.output\"><skipped message=\"") !=
                  NULL, "%s", xml);
    cr_expect(strstr(xml, "<testcase classname=\"softmax_basic\" name=\"case\"><error message=\"") != NULL, "%s", xml);
    free(xml);
    /* negative control: the readable case alone has no error */
    r = certify((const char *[]){"--case", "layernorm_large_mean", "--junit", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    rb_result_free(&r);
    xml = (char *)rb_read_file(out, &n);
    cr_expect(strstr(xml, "errors=\"0\" skipped=\"1\">") != NULL && strstr(xml, "<error") == NULL, "%s", xml);
    free(xml);
}

/* Whether FILE is well-formed XML (Python's expat, as CI test views parse it). */
static int xml_well_formed(const char *file)
{
    char cmd[3 * RB_PATH_MAX];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "
             "'%s' 2>/dev/null", file);
    return system(cmd) == 0;
}

/* A failing testcase explains itself: the message carries the verdict, the
 * output's worst element (got, want, excess, bounds) and the case's
 * diagnosis; the body the same with the closest variant.  A case without a
 * results file is a failure saying so (before: every output 'skipped', the
 * CI green), skipped with the reason under --skip-missing; a passing
 * output is a testcase with nothing in it. */
Test(certify_cli, junit_failures_carry_the_verdict_first_divergence_and_diagnosis)
{
    make_results("layernorm_d4", "bf16", "unbiased_variance");
    make_results("softmax_basic", "bf16", NULL);
    snprintf(out, sizeof out, "%s/junit.xml", dir);
    rb_result r = certify((const char *[]){"--case", "layernorm_d4,softmax_basic,ffn_gelu", "--junit", out, NULL});
    cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
    rb_result_free(&r);
    size_t n;
    char *xml = (char *)rb_read_file(out, &n);
    cr_assert_not_null(xml);
    cr_expect(xml_well_formed(out), "%s", xml);
    const char *frags[] = {
        "tests=\"3\" failures=\"2\" errors=\"0\" skipped=\"0\">",
        "<testcase classname=\"layernorm_d4\" name=\"out.output\"><failure message=\"FAIL: out.output[1,3,3]: got "
        "1.5625, want 1.7907970698165276; excess ",
        " x its bound; 40 of 48 elements out of tolerance (BF16, budget: max abs error 0.228, bound ",
        " | case: this output is the first divergence; diagnosis: the known bug unbiased_variance (within ",
        "\" type=\"FAIL\">case layernorm_d4: FAIL: first divergence out.output[1,3,3]: got 1.5625",
        "&#10;closest known variant: unbiased_variance at ",
        "<testcase classname=\"softmax_basic\" name=\"out.output\"></testcase>",
        "<testcase classname=\"ffn_gelu\" name=\"out.output\"><failure message=\"FAIL: out.output: FAIL (missing) | "
        "case: no results file ",
    };
    for (size_t i = 0; i < sizeof frags / sizeof frags[0]; i++)
        cr_expect(strstr(xml, frags[i]) != NULL, "lacks '%s':\n%s", frags[i], xml);
    free(xml);
    r = certify((const char *[]){"--case", "softmax_basic,ffn_gelu", "--skip-missing", "--junit", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    rb_result_free(&r);
    xml = (char *)rb_read_file(out, &n);
    cr_expect(strstr(xml, "failures=\"0\" errors=\"0\" skipped=\"1\">") != NULL, "%s", xml);
    cr_expect(strstr(xml, "<testcase classname=\"ffn_gelu\" name=\"out.output\"><skipped message=\"no results file ") !=
                  NULL, "%s", xml);
    free(xml);
}

/* Notes quote the results directory's path; whatever it holds (markup, a
 * quote, a control character, U+FFFE, a byte that is not UTF-8), the JUnit
 * file stays well-formed XML.  Negative control: the same file with U+FFFE
 * written as it is does not parse. */
Test(certify_cli, junit_is_well_formed_whatever_the_paths_hold)
{
    snprintf(results, sizeof results, "%s/r<&\"'>\x01\xef\xbf\xbe\xff", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    make_results("softmax_basic", "bf16", NULL);
    snprintf(out, sizeof out, "%s/junit.xml", dir);
    rb_result r = certify((const char *[]){"--case", "softmax_basic,ffn_gelu", "--skip-missing", "--junit", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    rb_result_free(&r);
    size_t n;
    char *xml = (char *)rb_read_file(out, &n);
    cr_assert_not_null(xml);
    cr_expect(xml_well_formed(out), "%s", xml);
    cr_expect(strstr(xml, "r&lt;&amp;&quot;'&gt;\\x01\\uFFFE\\xff/ffn_gelu.safetensors") != NULL, "%s", xml);
    /* the control */
    char *raw = strstr(xml, "\\uFFFE");
    cr_assert_not_null(raw);
    char bad[2 * RB_PATH_MAX];
    snprintf(bad, sizeof bad, "%s/bad.xml", dir);
    FILE *f = fopen(bad, "wb");
    cr_assert_not_null(f);
    fwrite(xml, 1, (size_t)(raw - xml), f);
    fputs("\xef\xbf\xbe", f);
    fputs(raw + 6, f);
    fclose(f);
    cr_expect(!xml_well_formed(bad), "U+FFFE in an attribute parsed");
    free(xml);
}

/* ---- the closest variant and what a verdict does not rule out ---------------------------- */

static json_t *load_json(const char *path)
{
    json_t *doc = json_load_file(path, 0, NULL);
    cr_assert_not_null(doc, "%s", path);
    return doc;
}

static const json_t *case_of(const json_t *cert, const char *name)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(cert, "cases"), i, c)
        if (strcmp(json_string_value(json_object_get(c, "case")), name) == 0)
            return c;
    cr_assert_fail("no case %s in the certificate", name);
    return NULL;
}

/* A passing case still reports its closest variant (here far from it: named
 * false); a case storing none says so in words, not "0 checked". */
Test(certify_cli, every_case_reports_its_closest_variant_or_that_it_stores_none)
{
    make_results("encoder_pre", "bf16", NULL);
    make_results("softmax_basic", "bf16", NULL);
    snprintf(out, sizeof out, "%s/cert.json", dir);
    rb_result r = certify((const char *[]){"--case", "encoder_pre,softmax_basic", "--json", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "encoder_pre                                          PASS\n"
                            "    closest known variant: pre_post_swapped, ") != NULL, "%s", r.out);
    rb_result_free(&r);
    json_t *cert = load_json(out);
    const json_t *c = case_of(cert, "encoder_pre"), *near = json_object_get(c, "closest_variant");
    cr_expect_eq(json_integer_value(json_object_get(c, "variants_stored")), 4);
    cr_expect_str_eq(json_string_value(json_object_get(near, "variant")), "pre_post_swapped");
    cr_expect(json_number_value(json_object_get(near, "distance")) > 2, "a correct result is far from the bug");
    cr_expect(json_is_false(json_object_get(near, "named")));
    c = case_of(cert, "softmax_basic");
    cr_expect_eq(json_integer_value(json_object_get(c, "variants_stored")), 0);
    cr_expect(json_is_null(json_object_get(c, "closest_variant")));
    json_decref(cert);
    /* a failing case storing no variant: no diagnosis possible, said plainly */
    r = certify((const char *[]){"--case", "softmax_basic", "--rtol", "0", "--atol", "0", NULL});
    cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "diagnosis: none possible: the golden stores no bug variants for this case") != NULL, "%s",
              r.out);
    cr_expect(strstr(r.out, "(0 checked)") == NULL, "%s", r.out);
    cr_expect(strstr(r.out, "known bugs: the golden stores no bug variants for these cases") != NULL, "%s", r.out);
    rb_result_free(&r);
}

/* In bfloat16, exact GELU for quick GELU changes activation_quick_gelu by
 * less than the budget: a PASS there does not rule it out, and the
 * certificate says so; activation_quick_gelu_tail tells it apart, and with
 * it in the run the summary no longer lists it (the case still does).
 * Negative control: in float64 every bound tells it apart. */
Test(certify_cli, a_pass_states_the_variants_it_does_not_rule_out)
{
    make_results("activation_quick_gelu", "bf16", NULL);
    snprintf(out, sizeof out, "%s/cert.json", dir);
    rb_result r = certify((const char *[]){"--case", "activation_quick_gelu", "--json", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "    not ruled out: gelu_for_quick_gelu (its effect on this case is ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "\na BF16 PASS here does not rule out gelu_for_quick_gelu: its effect on these cases is at "
                            "most ") != NULL, "%s", r.out);
    rb_result_free(&r);
    json_t *cert = load_json(out);
    const json_t *nro = json_object_get(json_object_get(cert, "summary"), "not_ruled_out");
    cr_expect_eq(json_array_size(nro), 1);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(nro, 0), "variant")), "gelu_for_quick_gelu");
    const double effect = json_number_value(json_object_get(json_array_get(nro, 0), "largest_effect"));
    cr_expect(effect > 0 && effect <= 2, "effect %g", effect);
    const json_t *cnro = json_object_get(case_of(cert, "activation_quick_gelu"), "not_ruled_out");
    cr_expect_eq(json_number_value(json_object_get(json_array_get(cnro, 0), "effect")), effect);
    json_decref(cert);
    make_results("activation_quick_gelu_tail", "bf16", NULL);
    r = certify((const char *[]){"--case", "activation_quick_gelu*", "--json", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "does not rule out") == NULL, "%s", r.out);
    cr_expect(strstr(r.out, "    not ruled out: gelu_for_quick_gelu") != NULL, "%s", r.out);
    rb_result_free(&r);
    make_results("activation_quick_gelu", NULL, NULL);
    r = certify((const char *[]){"--case", "activation_quick_gelu", "--json", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "not rule") == NULL, "F64 tells every variant apart: %s", r.out);
    rb_result_free(&r);
    cert = load_json(out);
    cr_expect_eq(json_array_size(json_object_get(json_object_get(cert, "summary"), "not_ruled_out")), 0);
    json_decref(cert);
}

/* ---- output shaped like pytest's ------------------------------------------------------- */

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* --quiet: the failing case only, the cases without results in one line
 * with their count, a short summary naming the failing case and its bug;
 * the missing cases neither count against the diagnosis nor print "(0
 * checked)"; an unreadable case is ERROR in stdout, not only on stderr. */
Test(certify_cli, quiet_prints_failures_collapses_missing_cases_and_ends_with_a_short_summary)
{
    make_results("layernorm_d4", "bf16", "unbiased_variance");
    make_results("softmax_basic", "bf16", NULL);
    rb_result r = certify((const char *[]){"--case", "layernorm_*,softmax_basic,ffn_gelu", "--quiet", NULL});
    cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "softmax_basic") == NULL, "a passing case printed: %s", r.out);
    cr_expect(strstr(r.out, "(0 checked)") == NULL && strstr(r.out, "no results file") == NULL, "%s", r.out);
    cr_expect_eq(count(r.out, "without a results file"), 1, "%s", r.out);
    cr_expect(strstr(r.out, "\nFAIL  6 cases without a results file in ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "\nshort summary:\nFAILED layernorm_d4: first divergence out.output[1,3,3]: got 1.5625") !=
                  NULL, "%s", r.out);
    cr_expect(strstr(r.out, "diagnosis: the known bug unbiased_variance") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "\nmost likely bug: unbiased_variance (named on 1 of 1 failing cases") != NULL, "%s", r.out);
    rb_result_free(&r);
    /* --skip-missing --quiet: a handful of lines */
    r = certify((const char *[]){"--case", "layernorm_*,softmax_basic,ffn_gelu", "--quiet", "--skip-missing", NULL});
    cr_expect(strstr(r.out, "\nSKIP  6 cases without a results file in ") != NULL, "%s", r.out);
    cr_expect(count(r.out, "\n") <= 20, "%zu lines: %s", count(r.out, "\n"), r.out);
    rb_result_free(&r);
    /* an unreadable results file */
    char bad[2 * RB_PATH_MAX];
    snprintf(bad, sizeof bad, "%s/softmax_basic.safetensors", results);
    rb_write_file(bad, "not safetensors", 15);
    r = certify((const char *[]){"--case", "softmax_basic,layernorm_d4", "--quiet", NULL});
    cr_expect_eq(r.status, 2, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "softmax_basic                                        ERROR\n    ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "\nERROR  softmax_basic: ") != NULL, "%s", r.out);
    rb_result_free(&r);
}

/* ---- hints ----------------------------------------------------------------------------- */

/* results/NAME.safetensors rewritten: every tensor as F32 with the same
 * values, the one named `from` (if any) renamed `to`. */
static int perturb_first; /* rewrite_results: element 0 of every tensor made no bfloat16 */

static void rewrite_results(const char *name, const char *from, const char *to)
{
    char path[2 * RB_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.safetensors", results, name);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    refenc_st_entry e[32];
    float *data[32];
    cr_assert(f.n_tensors <= 32);
    for (size_t t = 0; t < f.n_tensors; t++) {
        const refenc_st_tensor *x = &f.tensors[t];
        double *d = malloc(x->numel * sizeof *d);
        data[t] = malloc(x->numel * sizeof *data[t]);
        cr_assert(d && data[t]);
        cr_assert_eq(refenc_st_to_f64(d, &f, x, &err), REFENC_OK);
        for (size_t i = 0; i < x->numel; i++)
            data[t][i] = (float)d[i];
        if (perturb_first && x->numel > 0)
            data[t][0] = (float)(d[0] * (1 + 0x1p-20)); /* 20 bits: no bfloat16 nor float16 */
        free(d);
        e[t] = (refenc_st_entry){strdup(from && strcmp(x->name, from) == 0 ? to : x->name), REFENC_ST_F32, x->ndim,
                                 {0}, data[t]};
        memcpy(e[t].shape, x->shape, x->ndim * sizeof x->shape[0]);
    }
    const size_t n = f.n_tensors;
    refenc_st_free(&f);
    unlink(path);
    cr_assert_eq(refenc_st_write(path, e, n, NULL, &err), REFENC_OK, "%s", err.message);
    for (size_t t = 0; t < n; t++) {
        free((char *)e[t].name);
        free(data[t]);
    }
}

/* bfloat16 values written as F32 fail at float32's tolerance; the report
 * says every value is exactly a bfloat16.  Negative controls: float32
 * results, correct or with a bug, get no hint. */
Test(certify_cli, f32_results_that_are_all_bfloat16_get_a_hint)
{
    make_results("layernorm_d4", "bf16", NULL);
    rewrite_results("layernorm_d4", NULL, NULL);
    snprintf(out, sizeof out, "%s/cert.json", dir);
    rb_result r = certify((const char *[]){"--case", "layernorm_d4", "--json", out, NULL});
    cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "    hint: every value of out.output is exactly a bfloat16: it looks like BF16 data "
                            "declared as F32") != NULL, "%s", r.out);
    rb_result_free(&r);
    json_t *cert = load_json(out);
    const char *hint = json_string_value(json_object_get(case_of(cert, "layernorm_d4"), "hint"));
    cr_expect(hint != NULL && strstr(hint, "bfloat16") != NULL, "%s", hint ? hint : "no hint");
    json_decref(cert);
    make_results("layernorm_d4", "f16", NULL);
    rewrite_results("layernorm_d4", NULL, NULL);
    r = certify((const char *[]){"--case", "layernorm_d4", NULL});
    cr_expect(strstr(r.out, "exactly a float16: it looks like F16 data declared as F32") != NULL, "%s", r.out);
    rb_result_free(&r);
    /* every value but the first a bfloat16: no hint */
    make_results("layernorm_d4", "bf16", NULL);
    perturb_first = 1;
    rewrite_results("layernorm_d4", NULL, NULL);
    perturb_first = 0;
    r = certify((const char *[]){"--case", "layernorm_d4", NULL});
    cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "hint:") == NULL, "%s", r.out);
    rb_result_free(&r);
    const char *bugs[] = {NULL, "unbiased_variance"};
    for (int k = 0; k < 2; k++) {
        make_results("layernorm_d4", "f32", bugs[k]);
        r = certify((const char *[]){"--case", "layernorm_d4", NULL});
        cr_expect_eq(r.status, k, "%s%s", r.out, r.err);
        cr_expect(strstr(r.out, "hint:") == NULL, "%s", r.out);
        rb_result_free(&r);
    }
}

/* An output named as Hugging Face or sentence-transformers name it, or
 * without its out. prefix: "did you mean".  Negative controls: a name
 * nothing resembles, and BERT's pooler_output (another computation), get no
 * guess. */
Test(certify_cli, an_unknown_output_name_gets_did_you_mean)
{
    const struct { const char *name, *from, *to, *meant; } rows[] = {
        {"layernorm_d4", "out.output", "last_hidden_state", "did you mean 'out.output'?"},
        {"layernorm_d4", "out.output", "output", "did you mean 'out.output'?"},
        {"encoder_pre", "out.embed", "embed", "did you mean 'out.embed'?"},
        {"encoder_pre", "out.layers.0.ffn", "layers.0.ffn", "did you mean 'out.layers.0.ffn'?"},
        {"encoder_pool_mean_right_padding", "out.embedding", "sentence_embedding", "did you mean 'out.embedding'?"},
        {"encoder_pool_mean_right_padding", "out.embedding", "embedding", "did you mean 'out.embedding'?"},
        {"encoder_pool_mean_right_padding", "out.embedding", "pooler_output", NULL},
        {"layernorm_d4", "out.output", "y", NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        make_results(rows[i].name, "f32", NULL);
        rewrite_results(rows[i].name, rows[i].from, rows[i].to);
        rb_result r = certify((const char *[]){"--case", rows[i].name, NULL});
        cr_expect_eq(r.status, 2, "%s: %s%s", rows[i].to, r.out, r.err);
        cr_expect(strstr(r.err, "is not an output of case") != NULL, "%s", r.err);
        if (rows[i].meant)
            cr_expect(strstr(r.err, rows[i].meant) != NULL, "%s: %s", rows[i].to, r.err);
        else
            cr_expect(strstr(r.err, "did you mean") == NULL, "%s", r.err);
        rb_result_free(&r);
    }
}

/* The HTML report states the same: per case the closest variant and those
 * not ruled out, for the run what its verdict does not rule out, or that
 * the golden stores no variants.  Control: a case that tells every variant
 * apart (F64) states nothing of the kind. */
Test(certify_cli, the_html_report_states_the_closest_variant_and_what_is_not_ruled_out)
{
    make_results("activation_quick_gelu", "bf16", NULL);
    make_results("softmax_basic", "bf16", NULL);
    snprintf(out, sizeof out, "%s/report.html", dir);
    const struct { const char *glob, *frag; } rows[] = {
        {"activation_quick_gelu", "This verdict does not rule out gelu_for_quick_gelu: its effect on these cases is at "
                                  "most "},
        {"activation_quick_gelu", "<td>gelu_for_quick_gelu ("},
        {"softmax_basic", "The golden stores no bug variants for these cases"},
        {"softmax_basic", "<td>none stored</td>"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        rb_result r = rb_run((const char *[]){"refenc", "report", "--golden", golden(), "--results", results, "--case",
                                              rows[i].glob, "--html", out, NULL});
        cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
        rb_result_free(&r);
        size_t n;
        char *html = (char *)rb_read_file(out, &n);
        cr_assert_not_null(html);
        cr_expect(strstr(html, rows[i].frag) != NULL, "%s lacks '%s'", rows[i].glob, rows[i].frag);
        free(html);
    }
    make_results("activation_quick_gelu", NULL, NULL);
    rb_result r = rb_run((const char *[]){"refenc", "report", "--golden", golden(), "--results", results, "--case",
                                          "activation_quick_gelu", "--html", out, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    rb_result_free(&r);
    size_t n;
    char *html = (char *)rb_read_file(out, &n);
    cr_expect(html && strstr(html, "does not rule out") == NULL && strstr(html, "no bug variants") == NULL);
    free(html);
}

/* ---- one selection grammar ------------------------------------------------------------- */

static rb_result report_run(const char *const *extra)
{
    const char *head[] = {"refenc", "report", "--golden", golden(), "--results", results, "--html", out};
    return run_args(head, 8, extra);
}

/* report reads --case lists and repeats, --outputs and --skip-missing as
 * certify does (before: 'a,b' matched nothing, a repeated --case kept the
 * last, --skip-missing and --outputs were unknown options); a pattern that
 * matches nothing is an error that writes no report. */
Test(certify_cli, report_selects_cases_and_outputs_as_certify_does)
{
    make_results("layernorm_d4", "bf16", NULL);
    make_results("softmax_basic", "bf16", NULL);
    make_results("encoder_pre", "bf16", NULL);
    snprintf(out, sizeof out, "%s/report.html", dir);
    rb_result r = report_run((const char *[]){"--case", "layernorm_d4,softmax_basic", "--case", "encoder_pre", NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "refenc report: 3 cases, 3 passed, 0 failed;") != NULL, "%s", r.out);
    rb_result_free(&r);
    r = report_run((const char *[]){"--case", "layernorm_d4,ffn_gelu", NULL});
    cr_expect_eq(r.status, 1, "a missing results file fails: %s%s", r.out, r.err);
    rb_result_free(&r);
    r = report_run((const char *[]){"--case", "layernorm_d4,ffn_gelu", "--skip-missing", NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "2 cases, 1 passed, 0 failed, 1 skipped;") != NULL, "%s", r.out);
    rb_result_free(&r);
    r = report_run((const char *[]){"--case", "encoder_pre,layernorm_d4", "--outputs", "out.layers.*.self_attn*", NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "2 cases, 1 passed, 0 failed, 1 skipped;") != NULL, "layernorm_d4 has no such output: %s",
              r.out);
    rb_result_free(&r);
    size_t n;
    char *html = (char *)rb_read_file(out, &n);
    cr_assert_not_null(html);
    cr_expect(strstr(html, "not checked") != NULL, "the outputs --outputs excludes are 'not checked'");
    free(html);
    cr_assert_eq(unlink(out), 0);
    r = report_run((const char *[]){"--case", "layernorm_d4,layrnorm_d4", NULL});
    rb_expect_error(&r, 2, "report", "a pattern matching nothing", (const char *[]){"no golden case matches 'layrnorm_d4'",
                                                                                    NULL});
    cr_expect_not(rb_exists(out), "a report was written");
    rb_result_free(&r);
    r = report_run((const char *[]){"--case", "softmax_basic,", NULL});
    rb_expect_error(&r, 2, "report", "an empty pattern", (const char *[]){"--case: empty pattern", NULL});
    rb_result_free(&r);
}

/* More patterns than a fixed table held (64 before): every case by name. */
Test(certify_cli, certify_takes_as_many_case_patterns_as_given)
{
    make_results("softmax_basic", "bf16", NULL);
    char list[80 * 14 + 1] = "";
    for (int k = 0; k < 80; k++)
        strcat(list, k ? ",softmax_basic" : "softmax_basic");
    rb_result r = certify((const char *[]){"--case", list, NULL});
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    rb_result_free(&r);
}
