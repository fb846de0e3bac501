/* The bug variants of a user's golden (docs/diagnosis.md, "Variants from the
 * double reference"): by default `refenc golden --config` stores every
 * variant that applies, computed by the double reference; --no-variants
 * stores none; --variants (= --variants=oracle) the oracle's, as before.
 *
 * Properties, each with its negative control run here:
 *   - a golden with the default variants names a bug injected into an
 *     implementation that is not the reference (its float32 emulation), and
 *     the report says whose variants they are; with --no-variants the same
 *     results fail unnamed;
 *   - the reference's variants are the oracle's within a tenth of the
 *     float64 tolerance, output by output (the comparison does tell a
 *     variant from the golden);
 *   - made in parts (--per-layer, --shard then merge) the case holds the
 *     same variants, byte for byte the whole run's file;
 *   - computed on any number of --threads workers, the file is the same
 *     bytes and the messages the same lines (the control: the variants
 *     collected in the order they finish fail it, run by hand);
 *   - the workers beyond the first hold at most half the parameters'
 *     memory (the control: without that bound a long sequence gets every
 *     thread, run by hand);
 *   - the option's values and the metadata's are checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/core/config.h"
#include "../../ref/golden/alt.h"
#include "../../ref/io/safetensors.h"
#include "../robustness/robust.h"

#define CONFIG                                                                                     \
    "{\"model\": {\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 24, \"n_layers\": 2, \"norm\": \"pre\", " \
    "\"positional\": \"rope\", \"final_norm\": true}, "                                            \
    "\"input\": {\"batch\": 2, \"seq_len\": 5, \"padding\": [0, 2]}}"

/* The F64 policy (docs/verdict.md) and the reference's allowance on it
 * (REFERENCE_ERROR_MAX, ref/golden/alt.c): a tenth of the tolerance. */
#define F64_RTOL 1e-10
#define F64_ATOL 1e-11
#define REFERENCE_SHARE 0.1

static size_t count_prefixed(const char *path, const char *prefix)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    size_t n = 0;
    for (size_t i = 0; i < f.n_tensors; i++)
        n += strncmp(f.tensors[i].name, prefix, strlen(prefix)) == 0;
    refenc_st_free(&f);
    return n;
}

/* The metadata value of key in the case file, copied (NULL when absent). */
static char *meta_of(const char *path, const char *key)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    const char *v = refenc_st_metadata(&f, key);
    char *copy = v != NULL ? strdup(v) : NULL;
    refenc_st_free(&f);
    return copy;
}

/* Writes DIR/g (the golden directory) holding case "u" made with the extra
 * option (or none), and the results of the float32 emulation with bug. */
static void golden_and_buggy_results(const char *dir, const char *cfg, const char *option, const char *bug)
{
    char gold[RB_PATH_MAX + 32], res[RB_PATH_MAX + 32], casef[RB_PATH_MAX + 64], out[RB_PATH_MAX + 64];
    snprintf(gold, sizeof gold, "%s/g", dir);
    snprintf(res, sizeof res, "%s/r", dir);
    snprintf(casef, sizeof casef, "%s/cases/u.safetensors", gold);
    snprintf(out, sizeof out, "%s/u.safetensors", res);
    rb_tmpdir_remove(gold);
    const char *args[] = {"refenc", "golden", "--config", cfg, "--name", "u", "--quiet", "--out", gold,
                          option, NULL};
    rb_run_ok(args);
    rb_tmpdir_remove(res);
    char mk[RB_PATH_MAX + 48];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", res);
    cr_assert_eq(system(mk), 0);
    rb_run_ok((const char *[]){"refenc", "run", "--case", casef, "--emulate", "f32", "--bug", bug, "--out", out,
                            NULL});
}

Test(golden_variants, default_variants_name_an_injected_bug_and_say_whose_they_are, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], gold[RB_PATH_MAX + 32], res[RB_PATH_MAX + 32];
    char casef[RB_PATH_MAX + 64], cert[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "u.json", CONFIG);
    snprintf(gold, sizeof gold, "%s/g", dir);
    snprintf(res, sizeof res, "%s/r", dir);
    snprintf(casef, sizeof casef, "%s/cases/u.safetensors", gold);
    snprintf(cert, sizeof cert, "%s/c.json", dir);
    static const char *const bugs[] = {"rope_layout_swapped", "attention_unscaled", "unbiased_variance"};
    for (size_t i = 0; i < sizeof bugs / sizeof bugs[0]; i++) {
        golden_and_buggy_results(dir, cfg, NULL, bugs[i]);
        char *engine = meta_of(casef, "variant_engine"), *desc = meta_of(casef, "variant_oracle");
        cr_expect(engine != NULL && strcmp(engine, "reference") == 0, "variant_engine %s", engine ? engine : "(none)");
        cr_expect(desc != NULL && strstr(desc, "double reference") != NULL, "variant_oracle %s", desc ? desc : "(none)");
        free(engine);
        free(desc);
        rb_result r = rb_run((const char *[]){"refenc", "certify", "--golden", gold, "--results", res, "--json",
                                              cert, NULL});
        cr_expect_eq(r.status, 1, "%s: exit %d: %s", bugs[i], r.status, r.err);
        char want[128];
        snprintf(want, sizeof want, "match the known bug '%s'", bugs[i]);
        cr_expect(strstr(r.out, want) != NULL, "%s not named: %s", bugs[i], r.out);
        cr_expect(strstr(r.out, "the golden's bug variants are the double reference's") != NULL,
                  "the report does not say whose variants named it: %s", r.out);
        rb_result_free(&r);
        json_t *c = json_load_file(cert, 0, NULL);
        const json_t *k = json_array_get(json_object_get(c, "cases"), 0);
        cr_expect_str_eq(json_string_value(json_object_get(k, "variants_computed_by")), "reference");
        json_decref(c);

        /* negative control: the same results against the golden without variants fail, unnamed */
        golden_and_buggy_results(dir, cfg, "--no-variants", bugs[i]);
        cr_expect_eq(count_prefixed(casef, "alt."), 0, "--no-variants stored variants");
        r = rb_run((const char *[]){"refenc", "certify", "--golden", gold, "--results", res, NULL});
        cr_expect_eq(r.status, 1, "%s: exit %d: %s", bugs[i], r.status, r.err);
        cr_expect(strstr(r.out, "match the known bug") == NULL, "named without variants: %s", r.out);
        cr_expect(strstr(r.out, "diagnosis: none possible") != NULL, "%s", r.out);
        rb_result_free(&r);
    }
    rb_tmpdir_remove(dir);
}

/* A tensor's values as doubles (the file's buffer is unaligned: the converter copies). */
static double *values(const refenc_st_file *f, const char *name, size_t *n)
{
    const refenc_st_tensor *t = refenc_st_find(f, name);
    cr_assert_not_null(t, "%s missing", name);
    double *v = malloc((t->numel ? t->numel : 1) * sizeof *v);
    refenc_error err;
    cr_assert(v != NULL && refenc_st_to_f64(v, f, t, &err) == REFENC_OK, "%s", name);
    *n = t->numel;
    return v;
}

/* The largest |x - y| / (atol + rtol |y|) of tensor xn of a and tensor yn of b. */
static double f64_distance(const refenc_st_file *a, const char *xn, const refenc_st_file *b, const char *yn)
{
    size_t nx, ny;
    double *x = values(a, xn, &nx), *y = values(b, yn, &ny);
    cr_assert_eq(nx, ny, "%s and %s differ in size", xn, yn);
    double worst = 0;
    for (size_t i = 0; i < nx; i++)
        worst = fmax(worst, fabs(x[i] - y[i]) / (F64_ATOL + F64_RTOL * fabs(y[i])));
    free(x);
    free(y);
    return worst;
}

Test(golden_variants, the_references_variants_are_the_oracles_within_a_tenth_of_the_f64_tolerance, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], ref[RB_PATH_MAX + 32], orc[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "u.json", CONFIG);
    snprintf(ref, sizeof ref, "%s/ref.safetensors", dir);
    snprintf(orc, sizeof orc, "%s/orc.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--quiet", "--out-file", ref, NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--variants", "--quiet", "--out-file", orc, NULL});
    char *engine = meta_of(orc, "variant_engine");
    cr_expect_null(engine, "--variants (the oracle's) wrote variant_engine %s", engine);
    free(engine);
    char *vr = meta_of(ref, "variants"), *vo = meta_of(orc, "variants");
    json_t *jr = json_loads(vr, 0, NULL), *jo = json_loads(vo, 0, NULL);
    cr_assert(json_is_array(jr) && json_is_array(jo));
    cr_expect_eq(json_array_size(jr), json_array_size(jo), "different variants stored");
    cr_expect_gt(json_array_size(jr), 5, "too few variants to say anything");
    refenc_st_file a, b;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&a, ref, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(&b, orc, &err), REFENC_OK, "%s", err.message);
    size_t compared = 0;
    for (size_t i = 0; i < a.n_tensors; i++) {
        const char *name = a.tensors[i].name;
        if (strncmp(name, "alt.", 4) != 0 || strstr(name, ".dontcare.") != NULL)
            continue;
        const double d = f64_distance(&a, name, &b, name);
        cr_expect_leq(d, REFERENCE_SHARE, "%s: the reference's variant is %.3g float64 tolerances from the "
                      "oracle's", name, d);
        compared++;
    }
    cr_expect_gt(compared, 0);
    /* negative control: the same distance tells a variant from the golden */
    const json_t *v0 = json_array_get(jr, 0);
    char alt[256];
    snprintf(alt, sizeof alt, "alt.%s.out.output", json_string_value(json_object_get(v0, "name")));
    const double sep = f64_distance(&a, alt, &b, "out.output");
    cr_expect_gt(sep, 100, "%s is within %.3g tolerances of the golden", alt, sep);
    refenc_st_free(&a);
    refenc_st_free(&b);
    json_decref(jr);
    json_decref(jo);
    free(vr);
    free(vo);
    rb_tmpdir_remove(dir);
}

Test(golden_variants, variants_made_in_parts_are_the_whole_runs_bytes, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], whole[RB_PATH_MAX + 32], merged[RB_PATH_MAX + 32];
    char p[4][RB_PATH_MAX + 64];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "u.json", CONFIG);
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(merged, sizeof merged, "%s/merged.safetensors", dir);
    static const char *const modes[] = {NULL, "--per-layer"};
    for (size_t m = 0; m < 2; m++) {
        const size_t n = m == 0 ? 2 : 4; /* items, or (layer, item) pairs */
        rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--quiet", "--out-file", whole, modes[m], NULL});
        cr_expect_gt(count_prefixed(whole, "alt."), 0, "the whole run stored no variant");
        for (size_t k = 0; k < n; k++) {
            char spec[48];
            snprintf(spec, sizeof spec, "%zu/%zu", k + 1, n);
            snprintf(p[k], sizeof p[k], "%s/p%zu.safetensors", dir, k + 1);
            rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--quiet", "--shard", spec, "--out-file", p[k],
                                    modes[m], NULL});
            cr_expect_eq(count_prefixed(p[k], "alt."), 0, "a part holds variants: merge computes them");
        }
        rb_run_ok((const char *[]){"refenc", "golden", "merge", "--quiet", "--out-file", merged, p[0], p[1],
                                n > 2 ? p[2] : NULL, n > 2 ? p[3] : NULL, NULL});
        cr_expect(rb_same_file(merged, whole), "%s: the merged case differs from the whole run's",
                  modes[m] ? modes[m] : "--shard");
        /* negative control: the comparison tells a case without variants from one with them */
        rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--quiet", "--no-variants", "--out-file", whole,
                                modes[m], NULL});
        cr_expect(!rb_same_file(merged, whole), "with and without variants: the same bytes");
        for (size_t k = 0; k < n; k++)
            remove(p[k]);
    }
    rb_tmpdir_remove(dir);
}

/* The reference's variants run on the --threads workers (ref/golden/alt.c):
 * whatever their number, the same file and the same messages, in the
 * variants' order.  Three workers on two cores, so that they interleave;
 * BERT's eps, so that the eps variants move too little to be stored and say
 * so (unbiased_variance runs on a copy of the parameters, heads_merged_... on
 * the emulation: every kind of run); a token table, so that the parameters
 * leave room for three workers (golden_alt_workers; checked below). */
#define CONFIG_BERT_EPS                                                                            \
    "{\"model\": {\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 24, \"n_layers\": 2, \"norm\": \"pre\", " \
    "\"positional\": \"rope\", \"final_norm\": true, \"layer_norm_eps\": 1e-12, \"vocab_size\": 2000}, " \
    "\"input\": {\"batch\": 2, \"seq_len\": 5, \"padding\": [0, 2]}}"

Test(golden_variants, the_references_variants_are_the_same_bytes_and_messages_on_any_number_of_threads,
     .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32], one[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "u.json", CONFIG_BERT_EPS);
    snprintf(out, sizeof out, "%s/u.safetensors", dir);
    snprintf(one, sizeof one, "%s/one.safetensors", dir);
    refenc_config c; /* CONFIG_BERT_EPS's sizes: the workers --threads 3 and 2 give */
    refenc_config_default(&c);
    c.d_model = 16, c.n_heads = 2, c.d_ff = 24, c.n_layers = 2, c.positional = REFENC_POS_ROPE;
    c.final_norm = 1, c.vocab_size = 2000;
    cr_assert_eq(golden_alt_workers(&c, 2, 5, 3, 15), 3, "the parameters leave room for fewer workers");
    cr_assert_eq(golden_alt_workers(&c, 2, 5, 2, 15), 2);
    char *err1 = NULL;
    static const char *const threads[] = {"1", "3", "2", "3", "2", "3"}; /* repeated: timing varies */
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--name", "u", "--threads",
                                              threads[t], "--out-file", out, NULL});
        cr_assert_eq(r.status, 0, "--threads %s: exit %d: %s", threads[t], r.status, r.err);
        if (t == 0) {
            rb_copy_file(out, one);
            err1 = strdup(r.err);
            /* what the comparisons below compare: variants stored, and some said not to be */
            cr_expect_gt(count_prefixed(one, "alt."), 0, "no variant stored");
            cr_expect(strstr(err1, "not stored") != NULL, "no variant said not stored: %s", err1);
        } else {
            cr_expect(rb_same_file(out, one), "--threads %s: the file differs from --threads 1's", threads[t]);
            cr_expect_str_eq(r.err, err1, "--threads %s: the messages differ from --threads 1's", threads[t]);
        }
        rb_result_free(&r);
    }
    free(err1);
    rb_tmpdir_remove(dir);
}

/* golden_alt_workers: at most --threads and the runs, and the workers beyond
 * the first at two workspaces each within half the parameters' memory. */
Test(golden_variants, the_variants_workers_beyond_the_first_fit_in_half_the_parameters, .timeout = 10)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    /* BERT-base width, one layer, L 128 (make bench-variants WIDTH=base): the parameters dwarf a workspace */
    cfg.d_model = 768, cfg.n_heads = 12, cfg.d_ff = 3072, cfg.n_layers = 1, cfg.vocab_size = 30522;
    cfg.positional = REFENC_POS_LEARNED, cfg.max_len = 512, cfg.type_vocab_size = 2;
    cr_expect_eq(golden_alt_workers(&cfg, 1, 128, 2, 15), 2, "the bench's two threads");
    cr_expect_eq(golden_alt_workers(&cfg, 1, 128, 1, 15), 1);
    cr_expect_eq(golden_alt_workers(&cfg, 1, 128, 0, 15), 1, "threads < 1: one");
    cr_expect_eq(golden_alt_workers(&cfg, 1, 128, 64, 3), 3, "no more workers than runs");
    /* a long sequence: (B, H, L, L) attention weights far beyond the parameters: one worker */
    cr_expect_eq(golden_alt_workers(&cfg, 2, 4096, 64, 15), 1);
    static const size_t Ls[] = {1, 16, 128, 512, 2048, 4096};
    static const int threads[] = {1, 2, 3, 8, 64, 4096};
    for (size_t i = 0; i < sizeof Ls / sizeof Ls[0]; i++)
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            const int k = golden_alt_workers(&cfg, 1, Ls[i], threads[t], 15);
            const size_t ws = refenc_config_workspace_count(&cfg, 1, Ls[i]);
            cr_expect(k >= 1 && k <= threads[t] && k <= 15, "L %zu threads %d: %d workers", Ls[i], threads[t], k);
            cr_expect_leq((size_t)(k - 1) * 2 * ws, refenc_config_param_count(&cfg) / 2,
                          "L %zu threads %d: %d workers of %zu doubles each", Ls[i], threads[t], k, 2 * ws);
        }
}

/* A catalogue entry's variants from the reference (its bug classes: the
 * plan's 'variants' is 'bug_classes', where a config's is 'all') made in
 * parts are the whole run's bytes too. */
Test(golden_variants, a_catalogue_entrys_variants_made_in_parts_are_the_whole_runs_bytes, .timeout = 60)
{
    char dir[RB_PATH_MAX], whole[RB_PATH_MAX + 32], merged[RB_PATH_MAX + 32], p[2][RB_PATH_MAX + 64];
    rb_tmpdir(dir);
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(merged, sizeof merged, "%s/merged.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--catalogue", "golden/catalogue.json", "--case", "encoder_post_alibi_h8",
                            "--variants=reference", "--quiet", "--out-file", whole, NULL});
    cr_expect_gt(count_prefixed(whole, "alt."), 0, "the whole run stored no variant");
    for (size_t k = 0; k < 2; k++) {
        char spec[48];
        snprintf(spec, sizeof spec, "%zu/2", k + 1);
        snprintf(p[k], sizeof p[k], "%s/p%zu.safetensors", dir, k + 1);
        rb_run_ok((const char *[]){"refenc", "golden", "--catalogue", "golden/catalogue.json", "--case",
                                "encoder_post_alibi_h8", "--variants=reference", "--quiet", "--shard", spec,
                                "--out-file", p[k], NULL});
    }
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--quiet", "--out-file", merged, p[0], p[1], NULL});
    cr_expect(rb_same_file(merged, whole), "the merged case differs from the whole run's");
    for (size_t k = 0; k < 2; k++)
        remove(p[k]);
    rb_tmpdir_remove(dir);
}

Test(golden_variants, the_option_and_the_metadata_are_checked, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32], gold[RB_PATH_MAX + 32];
    char casef[RB_PATH_MAX + 64], res[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "u.json", CONFIG);
    snprintf(out, sizeof out, "%s/o.safetensors", dir);
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--variants=exact", "--out-file", out,
                                          NULL});
    rb_expect_error(&r, 2, "golden", "--variants=exact", (const char *[]){"--variants: 'exact' is neither", NULL});
    rb_result_free(&r);
    r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--variants", "--no-variants", "--out-file", out,
                                NULL});
    rb_expect_error(&r, 2, "golden", "both", (const char *[]){"--variants and --no-variants", NULL});
    rb_result_free(&r);
    cr_expect(!rb_exists(out), "a refused run wrote its file");
    /* negative control: the right spellings are accepted, and say which */
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--variants=reference", "--quiet", "--out-file", out,
                            NULL});
    char *engine = meta_of(out, "variant_engine");
    cr_expect(engine != NULL && strcmp(engine, "reference") == 0);
    free(engine);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--variants=oracle", "--quiet", "--out-file", out,
                            NULL});
    engine = meta_of(out, "variant_engine");
    cr_expect_null(engine);
    free(engine);

    /* a golden whose variant_engine is neither: certify exits 2 naming the field */
    snprintf(gold, sizeof gold, "%s/g", dir);
    snprintf(res, sizeof res, "%s/r.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--name", "u", "--quiet", "--out", gold, NULL});
    snprintf(casef, sizeof casef, "%s/cases/u.safetensors", gold);
    rb_golden g;
    rb_golden_load_file(&g, casef);
    rb_golden_set_meta(&g, "variant_engine", "guess");
    rb_golden_write(&g, casef);
    rb_golden_free(&g);
    rb_golden_relist(gold, "u");
    char rdir[RB_PATH_MAX + 32], rfile[RB_PATH_MAX + 64];
    snprintf(rdir, sizeof rdir, "%s/r", dir);
    snprintf(rfile, sizeof rfile, "%s/u.safetensors", rdir);
    char mk[RB_PATH_MAX + 48];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", rdir);
    cr_assert_eq(system(mk), 0);
    rb_run_ok((const char *[]){"refenc", "run", "--case", casef, "--out", rfile, NULL});
    r = rb_run((const char *[]){"refenc", "certify", "--golden", gold, "--results", rdir, NULL});
    cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "__metadata__.variant_engine is neither") != NULL, "%s", r.err);
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}
