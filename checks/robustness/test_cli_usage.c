/* The command line of `refenc certify` and `refenc run --case`, misused:
 * every mistake exits 2 with one message on stderr saying what is wrong, and
 * certifies nothing.  Also what the report says when it works: --quiet,
 * don't-care counts, the first divergence, several cases, a manifest that is
 * wrong (docs/cli.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/io/safetensors.h"
#include "robust.h"

Test(cli_usage, certify_options_misused)
{
    const char *g = rb_fixture_dir();
    const struct {
        const char *what, *args[12], *fragment;
    } cases[] = {
        {"no option", {"refenc", "certify", NULL}, "--golden DIR and --results DIR are required"},
        {"no --results", {"refenc", "certify", "--golden", g, NULL}, "--golden DIR and --results DIR are required"},
        {"--golden without a value", {"refenc", "certify", "--results", "/tmp", "--golden", NULL},
         "--golden needs a value"},
        {"unknown option", {"refenc", "certify", "--golden", g, "--results", "/tmp", "--strict", "1", NULL},
         "unknown option '--strict'"},
        {"--rtol not a number", {"refenc", "certify", "--golden", g, "--results", "/tmp", "--rtol", "tight", "--atol", "0", NULL},
         "--rtol: 'tight' is not a finite number >= 0"},
        {"--rtol negative", {"refenc", "certify", "--golden", g, "--results", "/tmp", "--rtol", "-1e-6", "--atol", "0", NULL},
         "--rtol: '-1e-6' is not a finite number >= 0"},
        {"--rtol inf", {"refenc", "certify", "--golden", g, "--results", "/tmp", "--rtol", "inf", "--atol", "0", NULL},
         "--rtol: 'inf' is not a finite number >= 0"},
        {"--atol nan", {"refenc", "certify", "--golden", g, "--results", "/tmp", "--rtol", "0", "--atol", "nan", NULL},
         "--atol: 'nan' is not a finite number >= 0"},
        {"--atol empty", {"refenc", "certify", "--golden", g, "--results", "/tmp", "--rtol", "0", "--atol", "", NULL},
         "--atol: '' is not a finite number >= 0"},
        {"--rtol alone", {"refenc", "certify", "--golden", g, "--results", "/tmp", "--rtol", "1e-3", NULL},
         "--rtol and --atol go together"},
        {"no case matches", {"refenc", "certify", "--golden", g, "--results", "/tmp", "--case", "zz*", NULL},
         "no golden case matches 'zz*'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rb_result r = rb_run(cases[i].args);
        rb_expect_error(&r, 2, "certify", cases[i].what, (const char *[]){cases[i].fragment, NULL});
        cr_expect(strstr(r.out, "PASS") == NULL, "%s: %s", cases[i].what, r.out);
        rb_result_free(&r);
    }
    const char *help[] = {"refenc", "certify", "--help", NULL};
    rb_result r = rb_run(help);
    cr_expect_eq(r.status, 0);
    cr_expect(strncmp(r.out, "usage: refenc certify --golden DIR --results DIR", 48) == 0, "%s", r.out);
    cr_expect_str_empty(r.err);
    rb_result_free(&r);
}

Test(cli_usage, certify_refuses_a_manifest_it_cannot_use)
{
    char dir[RB_PATH_MAX], manifest[RB_PATH_MAX + 32], frag[3 * RB_PATH_MAX];
    rb_tmpdir(dir);
    snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
    const char *args[] = {"refenc", "certify", "--golden", dir, "--results", dir, NULL};

    rb_result r = rb_run(args);
    snprintf(frag, sizeof frag, "refenc certify: %s: cannot open: No such file or directory", manifest);
    rb_expect_error(&r, 2, "certify", "no manifest", (const char *[]){frag, NULL});
    rb_result_free(&r);

    const struct {
        const char *what, *text, *fragment;
    } bad[] = {
        {"not JSON", "{\"cases\": [", "line 1, column 11 (byte 11): ']' expected near end of file"},
        {"duplicate keys", "{\"cases\": [], \"cases\": []}", "line 1, column 21 (byte 21): duplicate object key near '\"cases\"'"},
        {"no cases", "{\"format\": \"refenc-golden\"}", "expected an object with a \"cases\" array"},
        {"cases not an array", "{\"cases\": {}}", "expected an object with a \"cases\" array"},
        {"an entry without a file", "{\"cases\": [{\"case\": \"a\"}]}", "cases[0] needs \"case\" and a plain \"file\" name"},
        {"a file in another directory", "{\"cases\": [{\"case\": \"a\", \"file\": \"../a.safetensors\"}]}",
         "cases[0] needs \"case\" and a plain \"file\" name"},
        {"an entry not an object", "{\"cases\": [3]}", "cases[0] needs \"case\" and a plain \"file\" name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rb_write_file(manifest, bad[i].text, strlen(bad[i].text));
        r = rb_run(args);
        snprintf(frag, sizeof frag, "refenc certify: %s: ", manifest);
        rb_expect_error(&r, 2, "certify", bad[i].what, (const char *[]){frag, bad[i].fragment, NULL});
        rb_result_free(&r);
    }
    /* an empty list certifies nothing: an error, not a PASS */
    rb_write_file(manifest, "{\"cases\": []}", 13);
    r = rb_run(args);
    rb_expect_error(&r, 2, "certify", "no cases", (const char *[]){"no golden case matches '*'", NULL});
    cr_expect(strstr(r.out, "summary: 0 cases, 0 passed, 0 failed: ERROR") != NULL, "%s", r.out);
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}

/* Several cases, one failing at an intermediate, one without results:
 * the report names the first divergence, counts don't-care elements, and
 * --quiet keeps only what failed. */
Test(cli_usage, certify_reports_divergence_dont_care_and_quiet)
{
    char dir[RB_PATH_MAX], results[RB_PATH_MAX + 16], rfile[RB_PATH_MAX + 64];
    rb_tmpdir(dir);
    snprintf(results, sizeof results, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    snprintf(rfile, sizeof rfile, "%s/encoder_pre_rope.safetensors", results);
    rb_reference_results("encoder_pre_rope", rfile);
    snprintf(rfile, sizeof rfile, "%s/act_gelu.safetensors", results);
    rb_reference_results("act_gelu", rfile);

    /* act_gelu: out.output perturbed by 1e-6 relative everywhere */
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, rfile, &err), REFENC_OK);
    double y[64];
    cr_assert_eq(refenc_st_to_f64(y, &f, refenc_st_find(&f, "out.output"), &err), REFENC_OK);
    refenc_st_free(&f);
    for (size_t i = 0; i < 64; i++)
        y[i] *= 1 + 1e-6;
    refenc_st_entry e = {"out.output", REFENC_ST_F64, 2, {4, 16}, y};
    cr_assert_eq(refenc_st_write(rfile, &e, 1, NULL, &err), REFENC_OK);

    const char *args[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results, "--case",
                          "[ae]*", NULL};
    rb_result r = rb_run(args);
    cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    const char *out_frags[] = {
        "act_gelu                                             FAIL",
        "    first divergence: out.output",
        "encoder_pre_rope                                     PASS",
        "    out.layers.0.self_attn.weights PASS           F64  abs ",
        "; 56 don't-care)",
        /* 2 encoders of the fixture have no results; alibi_12 and the 2 attention cases neither */
        "FAIL  5 cases without a results file in ",
        "summary: 7 cases, 1 passed, 6 failed: FAIL",
    };
    for (size_t i = 0; i < sizeof out_frags / sizeof out_frags[0]; i++)
        cr_expect(strstr(r.out, out_frags[i]) != NULL, "stdout lacks '%s':\n%s", out_frags[i], r.out);
    cr_expect_str_empty(r.err);
    rb_result_free(&r);

    const char *quiet[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results, "--case",
                           "[ae]*", "--quiet", NULL};
    r = rb_run(quiet);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.out, "out.layers.0.self_attn.weights") == NULL, "--quiet shows a passing output:\n%s", r.out);
    cr_expect(strstr(r.out, "    out.output                     FAIL") != NULL, "--quiet hides a failure:\n%s", r.out);
    cr_expect(strstr(r.out, "summary: 7 cases, 1 passed, 6 failed: FAIL") != NULL, "%s", r.out);
    rb_result_free(&r);

    /* a tolerance given on the command line applies to every output */
    const char *loose[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results, "--case",
                           "act_gelu", "--rtol", "2e-6", "--atol", "0", NULL};
    r = rb_run(loose);
    cr_expect_eq(r.status, 0, "rtol 2e-6: exit %d: %s", r.status, r.out);
    cr_expect(strstr(r.out, "(rtol 2e-06, atol 0)") != NULL, "%s", r.out);
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}

Test(cli_usage, run_case_options_misused)
{
    char golden[RB_PATH_MAX];
    rb_fixture_case(golden, "act_gelu");
    const struct {
        const char *what, *args[10], *fragment;
    } cases[] = {
        {"--case without --out", {"refenc", "run", "--case", golden, NULL}, "--case and --out go together"},
        {"--out without --case or --config", {"refenc", "run", "--out", "/tmp/x.safetensors", NULL}, "--out needs --config or --case"},
        {"--case without a value", {"refenc", "run", "--out", "x", "--case", NULL}, "--case needs a file name"},
        {"--case with --config", {"refenc", "run", "--case", golden, "--out", "x", "--config", "docs/examples/pre_ln_rope.json", NULL},
         "--case does not combine with --config"},
        {"--case with --trace", {"refenc", "run", "--trace", "--case", golden, "--out", "x", NULL},
         "--case does not combine with --config, --weights, --inputs or --trace"},
        {"--case that does not exist", {"refenc", "run", "--case", "/nonexistent.safetensors", "--out", "x", NULL},
         "/nonexistent.safetensors: cannot open: No such file or directory"},
        {"--emulate of no dtype", {"refenc", "run", "--case", golden, "--out", "x", "--emulate", "f8", NULL},
         "--emulate: 'f8' is not f32, f16 or bf16 with modifiers"},
        {"--emulate f64 (the reference itself)", {"refenc", "run", "--case", golden, "--out", "x", "--emulate", "f64", NULL},
         "--emulate: 'f64' is not f32"},
        {"--emulate with an unknown modifier", {"refenc", "run", "--case", golden, "--out", "x", "--emulate", "f16,fast", NULL},
         "--emulate: 'f16,fast' is not"},
        {"--emulate with every modifier but one unknown",
         {"refenc", "run", "--case", golden, "--out", "x", "--emulate", "bf16,pure,fused,reverse,float-libm,x", NULL},
         "--emulate: 'bf16,pure,fused,reverse,float-libm,x' is not"},
        {"--bug unknown", {"refenc", "run", "--case", golden, "--out", "x", "--bug", "colour", NULL},
         "--bug: unknown variant 'colour'"},
        {"--emulate without --case", {"refenc", "run", "--config", "docs/examples/pre_ln_rope.json", "--emulate", "f32", NULL},
         "--emulate and --bug go with --case"},
        {"--seed out of range", {"refenc", "run", "--config", "docs/examples/pre_ln_rope.json", "--seed", "-1", NULL},
         "--seed: '-1' is not an integer in [0, 4294967295]"},
        {"an unknown option", {"refenc", "run", "--colour", NULL}, "unknown option '--colour'"},
        {"--seed without a value", {"refenc", "run", "--seed", NULL}, "--seed needs a value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rb_result r = rb_run(cases[i].args);
        rb_expect_error(&r, 2, "run", cases[i].what, (const char *[]){cases[i].fragment, NULL});
        cr_expect_str_empty(r.out, "%s: %s", cases[i].what, r.out);
        rb_result_free(&r);
    }
    cr_expect(!rb_exists("x"), "run --case wrote ./x");
}

/* run --case writes the outputs the golden lists, and only those */
Test(cli_usage, run_case_writes_the_outputs_the_case_lists)
{
    char dir[RB_PATH_MAX], gfile[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(gfile, sizeof gfile, "%s/case.safetensors", dir);
    snprintf(out, sizeof out, "%s/results.safetensors", dir);
    rb_golden g;
    rb_golden_load(&g, "encoder_pre_rope");
    rb_golden_set_meta(&g, "outputs", "[{\"name\": \"out.layers.1.ffn\", \"required\": false},"
                                      " {\"name\": \"out.output\", \"required\": true}]");
    rb_golden_write(&g, gfile);
    const char *args[] = {"refenc", "run", "--case", gfile, "--out", out, NULL};
    rb_result r = rb_run(args);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "refenc run: case encoder_pre_rope: 2 outputs written to ") != NULL, "%s", r.out);
    rb_result_free(&r);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(f.n_tensors, 2);
    cr_expect(refenc_st_find(&f, "out.layers.1.ffn") != NULL && refenc_st_find(&f, "out.output") != NULL);
    refenc_st_free(&f);

    rb_golden_set_meta(&g, "outputs", "{\"out.output\": true}");
    rb_golden_write(&g, gfile);
    unlink(out);
    r = rb_run(args);
    rb_expect_error(&r, 2, "run", "outputs not a list",
                    (const char *[]){gfile, ": __metadata__.outputs is not a JSON array", NULL});
    cr_expect(!rb_exists(out));
    rb_result_free(&r);
    rb_golden_free(&g);
    rb_tmpdir_remove(dir);
}

/* Results that are exactly a known bug's outputs (the golden stores them):
 * a failure, with the bug named in the report and in the certificate.  And
 * --list-bugs lists the known bugs. */
Test(cli_usage, certify_names_the_known_bug_the_results_match)
{
    char dir[RB_PATH_MAX], results[RB_PATH_MAX + 16], rfile[RB_PATH_MAX + 64], report[RB_PATH_MAX + 32],
        golden[RB_PATH_MAX];
    rb_tmpdir(dir);
    snprintf(results, sizeof results, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    snprintf(rfile, sizeof rfile, "%s/layernorm_small_variance.safetensors", results);
    snprintf(report, sizeof report, "%s/report.json", dir);
    rb_fixture_case(golden, "layernorm_small_variance");

    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, golden, &err), REFENC_OK);
    const refenc_st_tensor *alt = refenc_st_find(&f, "alt.layernorm_eps_x10.out.output");
    cr_assert(alt != NULL && alt->dtype == REFENC_ST_F64 && alt->numel == 240);
    double y[240];
    cr_assert_eq(refenc_st_to_f64(y, &f, alt, &err), REFENC_OK);
    refenc_st_free(&f);
    refenc_st_entry e = {"out.output", REFENC_ST_F64, 3, {2, 5, 24}, y};
    cr_assert_eq(refenc_st_write(rfile, &e, 1, NULL, &err), REFENC_OK);

    const char *args[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results, "--case",
                          "layernorm_small_variance", "--json", report, NULL};
    rb_result r = rb_run(args);
    cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "    diagnosis: the results match the known bug 'layernorm_eps_x10'") != NULL, "%s",
              r.out);
    cr_expect(strstr(r.out, "      fix:     ") != NULL, "%s", r.out);
    rb_result_free(&r);
    json_t *doc = json_load_file(report, 0, NULL);
    const json_t *d = json_object_get(json_array_get(json_object_get(doc, "cases"), 0), "diagnosis");
    cr_expect_str_eq(json_string_value(json_object_get(d, "variant")), "layernorm_eps_x10");
    cr_expect(json_is_string(json_object_get(d, "fix")));
    json_decref(doc);
    rb_tmpdir_remove(dir);

    const char *list[] = {"refenc", "certify", "--list-bugs", NULL};
    r = rb_run(list);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "layernorm_eps_x10\n  symptom: ") != NULL && strstr(r.out, "unbiased_variance\n") != NULL,
              "%s", r.out);
    rb_result_free(&r);
}

/* The fingerprint line of refenc run's output, or "" (free it). */
static char *fingerprint_line(const char *out)
{
    const char *f = strstr(out, "fingerprint");
    const char *end = f ? strchr(f, '\n') : NULL;
    return f && end ? strndup(f, (size_t)(end - f)) : strdup("");
}

/* refenc run on a family's config (BERT: token types, the embedding LayerNorm) says which family
 * and options it runs, and its seeded weights, tokens and token types are the same for the same
 * seed; another seed gives another output (the negative control). */
Test(cli_usage, run_of_a_family_config_is_described_and_seeded)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/bert.json", dir);
    const char *text = "{\"model\": {\"family\": \"bert\", \"d_model\": 16, \"n_heads\": 2, \"d_ff\": 24, "
                       "\"n_layers\": 1, \"vocab_size\": 30, \"max_len\": 8}, "
                       "\"input\": {\"batch\": 2, \"seq_len\": 5, \"padding\": [0, 2]}}";
    rb_write_file(cfg, text, strlen(text));
    char *fp[3];
    for (int k = 0; k < 3; k++) {
        rb_result r = rb_run((const char *[]){"refenc", "run", "--config", cfg, "--seed", k == 2 ? "8" : "7", NULL});
        cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
        cr_expect(strstr(r.out, "family: bert; ") != NULL && strstr(r.out, " token types, LayerNorm") != NULL,
                  "the family is not described: %s", r.out);
        fp[k] = fingerprint_line(r.out);
        rb_result_free(&r);
    }
    cr_expect(fp[0][0] != '\0' && strcmp(fp[0], fp[1]) == 0, "the same seed gave '%s' and '%s'", fp[0], fp[1]);
    cr_expect(strcmp(fp[0], fp[2]) != 0, "two seeds gave the same output: %s", fp[0]);
    for (int k = 0; k < 3; k++)
        free(fp[k]);
    /* the original family with one family option (finfo.min) is described too; without, not */
    for (int k = 0; k < 2; k++) {
        text = k == 0 ? "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 2, "
                        "\"causal\": true, \"mask_value\": \"finfo_min\"}}"
                      : "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 2, "
                        "\"causal\": true}}";
        rb_write_file(cfg, text, strlen(text));
        rb_result r = rb_run((const char *[]){"refenc", "run", "--config", cfg, NULL});
        cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
        cr_expect((strstr(r.out, "family: vaswani; ") != NULL) == (k == 0) &&
                      (k == 1 || strstr(r.out, "masked scores finfo_min") != NULL),
                  "config %d: %s", k, r.out);
        rb_result_free(&r);
    }
    rb_tmpdir_remove(dir);
}
