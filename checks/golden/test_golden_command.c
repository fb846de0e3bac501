/* `refenc golden` and `refenc run --config ... --out`, on a user's own
 * weights and inputs files.
 *
 * The files are taken apart from fixture cases (the parameters into a
 * weights file under their state_dict names, the in.* tensors into an inputs
 * file, the metadata's config into a config file), so the truth is known
 * independently of the code under test: the fixture's golden outputs were
 * computed by `refenc golden --catalogue` from the seed, and the reference's
 * outputs by `refenc run --case`.  Rebuilding the case from the files must
 * give those same bits; changing one weight must not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/io/golden_names.h"
#include "../../ref/io/safetensors.h"
#include "../robustness/robust.h"

/* Writes dir/weights.safetensors (the parameters), dir/inputs.safetensors
 * (in.*) and dir/config.json ({"model": the case's config}) from a fixture
 * case.  bump: a parameter whose first element gets 1 added (or NULL). */
static void split_case(const char *dir, const char *case_name, const char *bump)
{
    rb_golden g;
    rb_golden_load(&g, case_name);
    refenc_st_entry w[RB_MAX_TENSORS], in[8];
    size_t nw = 0, ni = 0;
    for (size_t i = 0; i < g.n; i++) {
        const refenc_st_entry *e = &g.e[i];
        if (strncmp(e->name, "in.", 3) == 0)
            in[ni++] = *e;
        else if (!refenc_name_is_expected(e->name))
            w[nw++] = *e;
    }
    if (bump != NULL) {
        float *v = rb_golden_data(&g, bump);
        v[0] += 1.0f;
        for (size_t i = 0; i < nw; i++)
            if (strcmp(w[i].name, bump) == 0)
                w[i].data = v;
    }
    char path[RB_PATH_MAX + 64];
    refenc_error err;
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    cr_assert_eq(refenc_st_write(path, w, nw, NULL, &err), REFENC_OK, "%s", err.message);
    snprintf(path, sizeof path, "%s/inputs.safetensors", dir);
    cr_assert_eq(refenc_st_write(path, in, ni, NULL, &err), REFENC_OK, "%s", err.message);
    const char *cfg = json_string_value(json_object_get(g.meta, "config"));
    cr_assert_not_null(cfg);
    char *text = malloc(strlen(cfg) + 32);
    sprintf(text, "{\"model\": %s}", cfg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    rb_write_file(path, text, strlen(text));
    free(text);
    rb_golden_free(&g);
}

/* The bytes of tensor `name` of a file, or NULL (free it). */
static unsigned char *tensor_bytes(const char *path, const char *name, size_t *n)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    const refenc_st_tensor *t = refenc_st_find(&f, name);
    unsigned char *b = NULL;
    if (t != NULL) {
        b = malloc(t->nbytes ? t->nbytes : 1);
        memcpy(b, t->data, t->nbytes);
        *n = t->nbytes;
    }
    refenc_st_free(&f);
    return b;
}

static int is_output_or_mask(const char *name)
{
    return strncmp(name, REFENC_NAME_OUTPUT, strlen(REFENC_NAME_OUTPUT)) == 0 ||
           strncmp(name, REFENC_NAME_DONTCARE, strlen(REFENC_NAME_DONTCARE)) == 0;
}

/* Every out.* tensor of `want` and its don't-care mask (dontcare.out.*) is
 * in `got` with the same bytes, and `got` has no mask `want` has not (a
 * padded query row is don't-care in every output that has it).  Returns the
 * number compared. */
static size_t same_outputs(const char *got, const char *want)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, got, &err), REFENC_OK, "%s", err.message);
    for (size_t i = 0; i < f.n_tensors; i++)
        if (strncmp(f.tensors[i].name, REFENC_NAME_DONTCARE, strlen(REFENC_NAME_DONTCARE)) == 0) {
            size_t n = 0;
            unsigned char *b = tensor_bytes(want, f.tensors[i].name, &n);
            cr_expect_not_null(b, "%s has a mask %s that %s has not", got, f.tensors[i].name, want);
            free(b);
        }
    refenc_st_free(&f);
    cr_assert_eq(refenc_st_read(&f, want, &err), REFENC_OK, "%s", err.message);
    size_t compared = 0;
    for (size_t i = 0; i < f.n_tensors; i++) {
        const refenc_st_tensor *t = &f.tensors[i];
        if (!is_output_or_mask(t->name))
            continue;
        size_t n = 0;
        unsigned char *b = tensor_bytes(got, t->name, &n);
        cr_expect_not_null(b, "%s has no %s", got, t->name);
        if (b != NULL)
            cr_expect(n == t->nbytes && memcmp(b, t->data, n) == 0, "%s: %s differs from %s", got, t->name,
                      want);
        free(b);
        compared++;
    }
    refenc_st_free(&f);
    return compared;
}

/* A command that must be refused: exit 2, one message with the fragment,
 * and `out` not written. */
typedef struct {
    const char *what, *args[12], *fragment;
} refusal;

static void expect_refusals(const refusal *cases, size_t n, const char *out)
{
    for (size_t i = 0; i < n; i++) {
        rb_result r = rb_run(cases[i].args);
        rb_expect_error(&r, 2, "golden", cases[i].what, (const char *[]){cases[i].fragment, NULL});
        rb_result_free(&r);
        cr_expect(!rb_exists(out), "%s: %s was written", cases[i].what, out);
    }
}

/* dir/config.json holding text; its path in path. */
static void config_file(char *path, size_t cap, const char *dir, const char *text)
{
    snprintf(path, cap, "%s/config.json", dir);
    rb_write_file(path, text, strlen(text));
}

/* The reference on the user's files equals the reference on the case. */
Test(golden_command, run_config_on_files_writes_the_reference_outputs)
{
    const char *cases[] = {"encoder_causal_learned", "encoder_pre_rope"};
    for (size_t k = 0; k < 2; k++) {
        char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], w[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32];
        char got[RB_PATH_MAX + 32], want[RB_PATH_MAX + 32], golden[RB_PATH_MAX];
        rb_tmpdir(dir);
        split_case(dir, cases[k], NULL);
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        snprintf(w, sizeof w, "%s/weights.safetensors", dir);
        snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
        snprintf(got, sizeof got, "%s/got.safetensors", dir);
        snprintf(want, sizeof want, "%s/want.safetensors", dir);
        rb_fixture_case(golden, cases[k]);
        rb_run_ok((const char *[]){"refenc", "run", "--config", cfg, "--weights", w, "--inputs", in, "--out", got, NULL});
        rb_run_ok((const char *[]){"refenc", "run", "--case", golden, "--out", want, NULL});
        cr_expect_geq(same_outputs(got, want), 3, "%s: too few outputs compared", cases[k]);
        rb_tmpdir_remove(dir);
    }
}

Test(golden_command, run_config_on_a_changed_weight_differs)
{
    /* negative control of the test above: one weight changed changes the output */
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], w[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32];
    char got[RB_PATH_MAX + 32], want[RB_PATH_MAX + 32], golden[RB_PATH_MAX];
    rb_tmpdir(dir);
    split_case(dir, "encoder_causal_learned", "layers.0.linear2.bias");
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(w, sizeof w, "%s/weights.safetensors", dir);
    snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
    snprintf(got, sizeof got, "%s/got.safetensors", dir);
    snprintf(want, sizeof want, "%s/want.safetensors", dir);
    rb_fixture_case(golden, "encoder_causal_learned");
    rb_run_ok((const char *[]){"refenc", "run", "--config", cfg, "--weights", w, "--inputs", in, "--out", got, NULL});
    rb_run_ok((const char *[]){"refenc", "run", "--case", golden, "--out", want, NULL});
    size_t na, nb;
    unsigned char *a = tensor_bytes(got, "out.output", &na), *b = tensor_bytes(want, "out.output", &nb);
    cr_assert(a && b && na == nb);
    cr_expect(memcmp(a, b, na) != 0, "a changed bias left out.output unchanged");
    free(a);
    free(b);
    rb_tmpdir_remove(dir);
}

/* The oracle on the user's files reproduces the golden made from the seed. */
Test(golden_command, golden_from_files_reproduces_the_seeded_golden, .timeout = 60)
{
    const char *cases[] = {"encoder_causal_learned", "encoder_pre_rope"};
    for (size_t k = 0; k < 2; k++) {
        char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], w[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32];
        char got[RB_PATH_MAX + 32], want[RB_PATH_MAX], manifest[RB_PATH_MAX + 32];
        rb_tmpdir(dir);
        split_case(dir, cases[k], NULL);
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        snprintf(w, sizeof w, "%s/weights.safetensors", dir);
        snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
        rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--weights", w, "--inputs", in,
                                "--name", "mine", "--out", dir, "--quiet", NULL});
        snprintf(got, sizeof got, "%s/cases/mine.safetensors", dir);
        rb_fixture_case(want, cases[k]);
        cr_expect_geq(same_outputs(got, want), 3, "%s: too few outputs compared", cases[k]);
        /* the manifest lists it, with its checksum */
        snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
        json_t *m = json_load_file(manifest, 0, NULL);
        const json_t *e = json_array_get(json_object_get(m, "cases"), 0);
        cr_expect_str_eq(json_string_value(json_object_get(e, "case")), "mine");
        cr_expect_eq(json_array_size(json_object_get(m, "cases")), 1);
        json_decref(m);
        rb_tmpdir_remove(dir);
    }
}

Test(golden_command, golden_from_a_changed_weight_differs, .timeout = 60)
{
    /* negative control of the test above */
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], w[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32];
    char got[RB_PATH_MAX + 32], want[RB_PATH_MAX];
    rb_tmpdir(dir);
    split_case(dir, "encoder_causal_learned", "layers.0.norm2.weight");
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(w, sizeof w, "%s/weights.safetensors", dir);
    snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
    snprintf(got, sizeof got, "%s/mine.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--weights", w, "--inputs", in,
                            "--out-file", got, "--outputs", "final", "--quiet", NULL});
    rb_fixture_case(want, "encoder_causal_learned");
    size_t na, nb;
    unsigned char *a = tensor_bytes(got, "out.output", &na), *b = tensor_bytes(want, "out.output", &nb);
    cr_assert(a && b && na == nb);
    cr_expect(memcmp(a, b, na) != 0, "a changed LayerNorm weight left out.output unchanged");
    free(a);
    free(b);
    /* --outputs final: the required output only */
    unsigned char *c = tensor_bytes(got, "out.embed", &na);
    cr_expect_null(c, "--outputs final stored out.embed");
    free(c);
    rb_tmpdir_remove(dir);
}

/* A second case goes into the same manifest; making one again replaces its entry. */
Test(golden_command, the_manifest_gathers_the_cases_of_a_directory, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], manifest[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    const char *text = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1},"
                       " \"input\": {\"batch\": 1, \"seq_len\": 3}}";
    config_file(cfg, sizeof cfg, dir, text);
    const char *names[] = {"first", "second", "first"};
    for (int k = 0; k < 3; k++)
        rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--name", names[k], "--seed",
                                k == 2 ? "7" : "1", "--out", dir, "--quiet", NULL});
    snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
    json_t *m = json_load_file(manifest, 0, NULL);
    cr_assert_not_null(m);
    const json_t *cases = json_object_get(m, "cases");
    cr_assert_eq(json_array_size(cases), 2, "the manifest lists %zu cases", json_array_size(cases));
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(cases, 0), "case")), "first");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(cases, 1), "case")), "second");
    /* certify reads the directory: the manifest is well formed */
    const char *args[] = {"refenc", "certify", "--golden", dir, "--results", dir, "--quiet", NULL};
    rb_result r = rb_run(args); /* no results: every case fails, but the manifest must be readable */
    cr_expect_eq(r.status, 1, "certify on the directory: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    cr_expect(!rb_has_temporary_file(dir), "a temporary file was left in %s", dir);
    json_decref(m);
    rb_tmpdir_remove(dir);
}

/* Bad input: one message naming every problem, exit 2, nothing written. */
Test(golden_command, a_weights_file_that_does_not_match_is_refused_whole)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], w[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    split_case(dir, "encoder_causal_learned", NULL);
    /* drop one tensor, misshape another, add a third */
    rb_golden g;
    rb_golden_load(&g, "encoder_causal_learned");
    refenc_st_entry e[RB_MAX_TENSORS];
    size_t n = 0;
    static float extra[4];
    for (size_t i = 0; i < g.n; i++) {
        if (strncmp(g.e[i].name, "in.", 3) == 0 || refenc_name_is_expected(g.e[i].name) ||
            strcmp(g.e[i].name, "layers.0.norm2.bias") == 0)
            continue;
        e[n] = g.e[i];
        if (strcmp(e[n].name, "layers.0.linear1.weight") == 0) { /* (36, 20) read as (20, 36) */
            e[n].shape[0] = 20;
            e[n].shape[1] = 36;
        }
        n++;
    }
    e[n++] = (refenc_st_entry){.name = "pooler.weight", .dtype = REFENC_ST_F32, .ndim = 1, .shape = {4},
                               .data = extra};
    refenc_error err;
    snprintf(w, sizeof w, "%s/weights.safetensors", dir);
    cr_assert_eq(refenc_st_write(w, e, n, NULL, &err), REFENC_OK, "%s", err.message);
    rb_golden_free(&g);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    for (int k = 0; k < 2; k++) {
        const char *golden_args[] = {"refenc", "golden", "--config", cfg, "--weights", w, "--out", out, NULL};
        const char *run_args[] = {"refenc", "run", "--config", cfg, "--weights", w, NULL};
        rb_result r = rb_run(k == 0 ? golden_args : run_args);
        rb_expect_error(&r, 2, k == 0 ? "golden" : "run", "a mismatched weights file",
                        (const char *[]){"weights.safetensors: the weights do not match the config (3 problems)",
                                         "missing 'layers.0.norm2.bias' (20)",
                                         "'layers.0.linear1.weight' has shape (20, 36), expected (36, 20)",
                                         "extra 'pooler.weight' (4)", NULL});
        rb_result_free(&r);
    }
    cr_expect(!rb_exists(out), "refenc golden created %s", out);
    rb_tmpdir_remove(dir);
}

Test(golden_command, bad_sources_are_refused_and_nothing_is_written)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], big[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32];
    char out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    split_case(dir, "encoder_causal_learned", NULL);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
    snprintf(big, sizeof big, "%s/big.json", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    const char *text = "{\"model\": {\"d_model\": 1048577}}";
    rb_write_file(big, text, strlen(text));
    const char *mismatch = "{\"model\": {\"d_model\": 20, \"n_heads\": 2, \"positional\": \"learned\", "
                           "\"max_len\": 9}, \"input\": {\"batch\": 3, \"seq_len\": 6}}";
    char mism[RB_PATH_MAX + 32];
    snprintf(mism, sizeof mism, "%s/mismatch.json", dir);
    rb_write_file(mism, mismatch, strlen(mismatch));
    const refusal cases[] = {
        {"a config over the limits", {"refenc", "golden", "--config", big, "--out", out, NULL},
         "model: d_model = 1048577 exceeds the limit"},
        {"inputs of another shape than the config's", {"refenc", "golden", "--config", mism, "--inputs", in, "--out", out, NULL},
         "input: batch 3, seq_len 6, but"},
        {"an inputs file for another width", {"refenc", "golden", "--config", big, "--inputs", in, "--out", out, NULL},
         "exceeds the limit"},
        {"an invalid name", {"refenc", "golden", "--config", cfg, "--name", "../x", "--out", out, NULL},
         "--name: '../x' is not a case name"},
        {"no output", {"refenc", "golden", "--config", cfg, NULL}, "give one of --out DIR and --out-file FILE"},
        {"both sources", {"refenc", "golden", "--config", cfg, "--catalogue", cfg, "--case", "x", "--out", out, NULL},
         "give --config FILE.json or --catalogue CAT.json --case NAME"},
        {"--outputs some", {"refenc", "golden", "--config", cfg, "--outputs", "some", "--out", out, NULL},
         "--outputs: 'some' is neither 'all' nor 'final'"},
        {"--threads 0", {"refenc", "golden", "--config", cfg, "--threads", "0", "--out", out, NULL},
         "--threads: '0' is not an integer in [1, 4096]"},
        {"a case the catalogue lacks", {"refenc", "golden", "--catalogue", "golden/catalogue.json", "--case", "nope", "--out", out, NULL},
         "no case named 'nope' in the catalogue"},
    };
    expect_refusals(cases, sizeof cases / sizeof cases[0], out);
    rb_tmpdir_remove(dir);
}

/* The oracle's threads change nothing: 1 and 2 threads, the same bytes. */
Test(golden_command, any_thread_count_gives_the_same_bytes, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], f1[RB_PATH_MAX + 32], f2[RB_PATH_MAX + 32];
    char f3[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    const char *text = "{\"model\": {\"d_model\": 24, \"n_heads\": 3, \"d_ff\": 40, \"n_layers\": 2,"
                       " \"positional\": \"rope\", \"activation\": \"gelu\"},"
                       " \"input\": {\"batch\": 3, \"seq_len\": 9, \"padding\": [0, 2, 4]}}";
    config_file(cfg, sizeof cfg, dir, text);
    snprintf(f1, sizeof f1, "%s/t1.safetensors", dir);
    snprintf(f2, sizeof f2, "%s/t2.safetensors", dir);
    snprintf(f3, sizeof f3, "%s/seed.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--threads", "1", "--out-file", f1, "--quiet", NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--threads", "2", "--out-file", f2, "--quiet", NULL});
    cr_expect(rb_same_file(f1, f2), "1 and 2 threads gave different files");
    /* negative control: the comparison tells two cases apart */
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--seed", "2", "--threads", "2", "--out-file", f3,
                            "--quiet", NULL});
    cr_expect(!rb_same_file(f1, f3), "two seeds gave the same file");
    rb_tmpdir_remove(dir);
}

/* The encoder's item-by-item run reproduces a committed encoder case. */
Test(golden_command, an_encoder_case_of_the_catalogue_regenerates_byte_for_byte, .timeout = 60)
{
    char dir[RB_PATH_MAX], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(out, sizeof out, "%s/case.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--catalogue", "golden/catalogue.json", "--case",
                            "encoder_pre_alibi_h6", "--threads", "2", "--out-file", out, "--quiet", NULL});
    cr_expect(rb_same_file(out, "golden/cases/encoder_pre_alibi_h6.safetensors"),
              "encoder_pre_alibi_h6 regenerates to other bytes than golden/cases/");
    rb_tmpdir_remove(dir);
}

/* Parts computed apart and merged: the bytes of the run without --shard. */
Test(golden_command, shards_merge_into_the_unsharded_file, .timeout = 90)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], whole[RB_PATH_MAX + 32], merged[RB_PATH_MAX + 32];
    char part[5][RB_PATH_MAX + 32], spec[16];
    rb_tmpdir(dir);
    const char *text = "{\"model\": {\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 24, \"n_layers\": 2,"
                       " \"positional\": \"alibi\", \"norm\": \"post\"},"
                       " \"input\": {\"batch\": 3, \"seq_len\": 5, \"padding\": [0, 2, 1]}}";
    config_file(cfg, sizeof cfg, dir, text);
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(merged, sizeof merged, "%s/merged.safetensors", dir);
    for (int per_layer = 1; per_layer >= 0; per_layer--) {
        /* per layer, 6 units (layers x items) in 4 parts: item 0 and items 1-2
         * of layer 0, then of layer 1 (whose reference runs on those items
         * alone); the whole stack, 3 items in 2 parts */
        const int n = per_layer ? 4 : 2;
        rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, per_layer ? "--per-layer" : "--quiet",
                                "--out-file", whole, "--quiet", NULL});
        for (int k = 1; k <= n; k++) {
            snprintf(part[k], sizeof part[k], "%s/part%d.safetensors", dir, k);
            snprintf(spec, sizeof spec, "%d/%d", k, n);
            rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, per_layer ? "--per-layer" : "--quiet",
                                    "--shard", spec, "--threads", k == 1 ? "2" : "1", "--out-file", part[k],
                                    "--quiet", NULL});
        }
        /* in any order */
        if (n == 4)
            rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", merged, part[3], part[1], part[4],
                                    part[2], "--quiet", NULL});
        else
            rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", merged, part[2], part[1], "--quiet",
                                    NULL});
        cr_expect(rb_same_file(whole, merged), "%s: the merged parts differ from the whole run",
                  per_layer ? "per layer" : "whole stack");
    }
    /* negative control: the whole stack and per layer are different files */
    char other[RB_PATH_MAX + 32];
    snprintf(other, sizeof other, "%s/per_layer.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--out-file", other, "--quiet", NULL});
    cr_expect(!rb_same_file(whole, other), "per layer and whole stack gave the same file");
    /* a case made per layer holds every layer's input, (B, L, D) in F64
     * (docs/golden-format.md), the first layer's too */
    for (int l = 0; l < 2; l++) {
        char name[64];
        snprintf(name, sizeof name, "in.layers.%d.input", l);
        size_t nb = 0;
        unsigned char *b = tensor_bytes(other, name, &nb);
        cr_expect(b != NULL && nb == 3 * 5 * 16 * sizeof(double), "the per-layer case has no %s of (3, 5, 16)",
                  name);
        free(b);
    }
    rb_tmpdir_remove(dir);
}

/* Per layer, shards that start inside a layer take their layer inputs from
 * the reference run on their own items alone: the token ids and token types
 * of those items must be theirs.  A BERT-style model (tokens, token types,
 * learned positions), 2 layers x 3 items = 6 units in 4 shards: [0, 1),
 * [1, 3) (layer 0, items 1-2: the embedding of items 1 and 2 only), [3, 4),
 * [4, 6) (layer 1, items 1-2: the stack's first layer on items 1 and 2
 * only).  The merged case must be the unsharded one byte for byte. */
Test(golden_command, per_layer_shards_inside_a_layer_take_their_own_tokens, .timeout = 90)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], whole[RB_PATH_MAX + 32], merged[RB_PATH_MAX + 32];
    char part[5][RB_PATH_MAX + 32], spec[16];
    rb_tmpdir(dir);
    const char *text = "{\"model\": {\"family\": \"bert\", \"d_model\": 16, \"n_heads\": 2, \"d_ff\": 24,"
                       " \"n_layers\": 2, \"vocab_size\": 37, \"type_vocab_size\": 3, \"max_len\": 8},"
                       " \"input\": {\"batch\": 3, \"seq_len\": 5, \"padding\": [0, 2, 1]}}";
    config_file(cfg, sizeof cfg, dir, text);
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(merged, sizeof merged, "%s/merged.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--out-file", whole, "--quiet", NULL});
    /* the case has token ids and token types that differ between items */
    size_t nt = 0, ny = 0;
    unsigned char *tok = tensor_bytes(whole, "in.tokens", &nt), *typ = tensor_bytes(whole, "in.token_type_ids", &ny);
    cr_assert(tok != NULL && typ != NULL && nt == 15 * 8 && ny == 15 * 8, "the case has no tokens or token types");
    cr_assert(memcmp(tok, tok + 5 * 8, 5 * 8) != 0 && memcmp(typ + 5 * 8, typ + 10 * 8, 5 * 8) != 0,
              "items with the same tokens or types would hide a wrong offset");
    free(tok);
    free(typ);
    for (int k = 1; k <= 4; k++) {
        snprintf(part[k], sizeof part[k], "%s/part%d.safetensors", dir, k);
        snprintf(spec, sizeof spec, "%d/4", k);
        rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--shard", spec, "--threads", "1",
                                "--out-file", part[k], "--quiet", NULL});
    }
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", merged, part[4], part[2], part[3], part[1],
                            "--quiet", NULL});
    cr_expect(rb_same_file(whole, merged), "per-layer shards starting inside a layer merge to other bytes than the "
              "unsharded run");
    rb_tmpdir_remove(dir);
}

Test(golden_command, bad_shards_and_merges_are_refused, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], p1[RB_PATH_MAX + 32], p2[RB_PATH_MAX + 32];
    char q2[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    const char *text = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1},"
                       " \"input\": {\"batch\": 2, \"seq_len\": 3}}";
    config_file(cfg, sizeof cfg, dir, text);
    snprintf(p1, sizeof p1, "%s/p1.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/p2.safetensors", dir);
    snprintf(q2, sizeof q2, "%s/q2.safetensors", dir);
    snprintf(out, sizeof out, "%s/merged.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", "1/2", "--out-file", p1, "--quiet", NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", "2/2", "--out-file", p2, "--quiet", NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--seed", "9", "--shard", "2/2", "--out-file", q2,
                            "--quiet", NULL});
    const refusal cases[] = {
        {"shard 3/2", {"refenc", "golden", "--config", cfg, "--shard", "3/2", "--out-file", out, NULL},
         "--shard: '3/2' is not K/N with 1 <= K <= N"},
        {"shard 0/2", {"refenc", "golden", "--config", cfg, "--shard", "0/2", "--out-file", out, NULL},
         "--shard: '0/2' is not K/N"},
        {"more shards than units", {"refenc", "golden", "--config", cfg, "--shard", "1/3", "--out-file", out, NULL},
         "has only 2 units"},
        {"parts of two seeds", {"refenc", "golden", "merge", "--out-file", out, p1, q2, NULL},
         "q2.safetensors: its plan's 'weights_sha256' is"},
        {"a missing part", {"refenc", "golden", "merge", "--out-file", out, p1, NULL}, "missing: 2/2"},
        {"a part twice", {"refenc", "golden", "merge", "--out-file", out, p1, p1, NULL}, "are both shard 1/2"},
        {"a case file for a part", {"refenc", "golden", "merge", "--out-file", out, "golden/cases/encoder_pre.safetensors", NULL},
         "not a part of a golden case"},
        {"variants in parts", {"refenc", "golden", "--config", cfg, "--variants", "--shard", "1/2", "--out-file", out, NULL},
         "--shard makes no oracle bug variants (merge computes the double reference's)"},
    };
    expect_refusals(cases, sizeof cases / sizeof cases[0], out);
    /* negative control: the two right parts merge */
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", out, p1, p2, "--quiet", NULL});
    cr_expect(rb_exists(out));
    rb_tmpdir_remove(dir);
}

/* Weights no narrower dtype holds are stored as they are, and said so. */
Test(golden_command, inputs_are_never_rounded_and_their_dtype_is_recorded, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], w[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    split_case(dir, "encoder_causal_learned", NULL);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(w, sizeof w, "%s/weights.safetensors", dir);
    snprintf(out, sizeof out, "%s/case.safetensors", dir);
    /* the fixture's weights (8 significant bits) first: F16 and BF16 hold them; then one weight
     * given 12 significant bits (float32 only), 40 (float64 only), 11 (float16's, not bfloat16's
     * 8), 2^20 (bfloat16's range, not float16's 2^15), 3 2^-22 (a float16 subnormal) and
     * 2^-19 + 2^-24 (a float16 subnormal whose last bit is 2^-24, float16's smallest) */
    const char *want[7] = {"F16,BF16", "F32", "F64", "F16", "BF16", "F16,BF16", "F16,BF16"};
    const double wide5[7] = {0, 1.0 + 0x1p-11, 1.0 + 0x1p-39, 1.0 + 0x1p-10, 0x1p20, 3 * 0x1p-22,
                             0x1p-19 + 0x1p-24};
    for (int k = 0; k < 7; k++) {
        if (k > 0) {
            rb_golden g;
            rb_golden_load(&g, "encoder_causal_learned");
            refenc_st_entry e[RB_MAX_TENSORS];
            size_t n = 0;
            static double wide[36];
            for (size_t i = 0; i < g.n; i++) {
                if (strncmp(g.e[i].name, "in.", 3) == 0 || refenc_name_is_expected(g.e[i].name))
                    continue;
                e[n] = g.e[i];
                if (strcmp(e[n].name, "layers.0.linear1.bias") == 0) {
                    const float *f = e[n].data;
                    for (size_t j = 0; j < 36; j++)
                        wide[j] = f[j];
                    wide[5] = wide5[k];
                    e[n].dtype = REFENC_ST_F64;
                    e[n].data = wide;
                }
                n++;
            }
            refenc_error err;
            cr_assert_eq(refenc_st_write(w, e, n, NULL, &err), REFENC_OK, "%s", err.message);
            rb_golden_free(&g);
        }
        rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--weights", w, "--out-file", out,
                                "--outputs", "final", "--quiet", NULL});
        refenc_st_file f;
        refenc_error err;
        cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s", err.message);
        cr_expect_str_eq(refenc_st_metadata(&f, "input_dtype"), want[k], "case %d: input_dtype", k);
        const refenc_st_tensor *t = refenc_st_find(&f, "layers.0.linear1.bias");
        cr_assert_not_null(t);
        double v[36];
        cr_assert_eq(refenc_st_to_f64(v, &f, t, &err), REFENC_OK);
        if (k > 0)
            cr_expect(v[5] == wide5[k], "case %d: the weight was rounded to %a", k, v[5]);
        cr_expect_eq(t->dtype, k == 2 ? REFENC_ST_F64 : REFENC_ST_F32, "case %d: stored as %s", k,
                     refenc_st_dtype_name(t->dtype));
        refenc_st_free(&f);
    }
    rb_tmpdir_remove(dir);
}

/* A config's --variants: the case's bug classes are those of the variants
 * it stores, each once. */
Test(golden_command, variants_of_a_config_list_their_bug_classes_once, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(out, sizeof out, "%s/case.safetensors", dir);
    config_file(cfg, sizeof cfg, dir,
                "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 1},"
                " \"input\": {\"batch\": 1, \"seq_len\": 3}}");
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--variants", "--out-file", out, "--quiet", NULL});
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s", err.message);
    json_t *classes = json_loads(refenc_st_metadata(&f, "bug_classes"), 0, NULL);
    json_t *variants = json_loads(refenc_st_metadata(&f, "variants"), 0, NULL);
    cr_assert(json_is_array(classes) && json_is_array(variants));
    cr_expect_gt(json_array_size(variants), 0, "no variant stored");
    cr_expect_gt(json_array_size(classes), 0, "variants stored, no bug class listed");
    for (size_t i = 0; i < json_array_size(classes); i++)
        for (size_t j = 0; j < i; j++)
            cr_expect_str_neq(json_string_value(json_array_get(classes, i)),
                              json_string_value(json_array_get(classes, j)), "a class listed twice");
    json_decref(classes);
    json_decref(variants);
    refenc_st_free(&f);
    rb_tmpdir_remove(dir);
}

/* Rewrites a part file's metadata key to value, its tensors unchanged. */
static void set_part_meta(const char *path, const char *key, const char *value)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    refenc_st_entry *e = calloc(f.n_tensors, sizeof *e);
    for (size_t i = 0; i < f.n_tensors; i++) {
        e[i] = (refenc_st_entry){.name = f.tensors[i].name, .dtype = f.tensors[i].dtype,
                                 .ndim = f.tensors[i].ndim, .data = f.tensors[i].data};
        memcpy(e[i].shape, f.tensors[i].shape, sizeof e[i].shape);
    }
    json_t *meta = json_deep_copy(f.metadata);
    json_object_set_new(meta, key, json_string(value));
    cr_assert_eq(refenc_st_write(path, e, f.n_tensors, meta, &err), REFENC_OK, "%s", err.message);
    json_decref(meta);
    free(e);
    refenc_st_free(&f);
}

/* The merged case records the highest precisions any part needed, the
 * first part's included. */
Test(golden_command, a_merge_records_the_highest_precision_of_its_parts, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], merged[RB_PATH_MAX + 32], part[3][RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    config_file(cfg, sizeof cfg, dir,
                "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 1},"
                " \"input\": {\"batch\": 2, \"seq_len\": 3}}");
    snprintf(merged, sizeof merged, "%s/merged.safetensors", dir);
    for (int k = 1; k <= 2; k++) {
        char spec[16];
        snprintf(part[k], sizeof part[k], "%s/part%d.safetensors", dir, k);
        snprintf(spec, sizeof spec, "%d/2", k);
        rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", spec, "--out-file", part[k],
                                "--quiet", NULL});
    }
    set_part_meta(part[1], "prec", "640"); /* as if shard 1 had needed two more steps of Ziv's loop */
    set_part_meta(part[1], "prec_check", "1152");
    /* that part given first: the parts are taken in the order given */
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", merged, part[1], part[2], "--quiet", NULL});
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, merged, &err), REFENC_OK, "%s", err.message);
    const char *oracle = refenc_st_metadata(&f, "oracle");
    cr_expect(oracle != NULL && strstr(oracle, "recomputing at 1152 bits (computed at 640 bits)") != NULL,
              "oracle: %s", oracle ? oracle : "(none)");
    refenc_st_free(&f);
    rb_tmpdir_remove(dir);
}

/* A part read back and written again whole from memory by refenc_st_write
 * (the writer every part went through before parts were streamed) is the
 * same file: its layout and header do not depend on the streaming. */
static void expect_whole_writers_bytes(const char *part, const char *again)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, part, &err), REFENC_OK, "%s", err.message);
    refenc_st_entry *e = calloc(f.n_tensors, sizeof *e);
    cr_assert_not_null(e);
    for (size_t i = 0; i < f.n_tensors; i++) {
        e[i] = (refenc_st_entry){.name = f.tensors[i].name, .dtype = f.tensors[i].dtype, .ndim = f.tensors[i].ndim,
                                 .data = f.tensors[i].data};
        memcpy(e[i].shape, f.tensors[i].shape, sizeof e[i].shape);
    }
    cr_assert_eq(refenc_st_write(again, e, f.n_tensors, f.metadata, &err), REFENC_OK, "%s", err.message);
    cr_expect(rb_same_file(part, again), "%s: other bytes than the same tensors and metadata written whole", part);
    free(e);
    refenc_st_free(&f);
}

/* Each unit's values go to the part file as the unit completes (file.h,
 * golden_part_writer): with 1 and 2 threads the parts are the same bytes,
 * those of the part written whole, and they merge into the unsharded file.
 * 2 layers x 3 items in 4 shards, so that shards start inside a layer and
 * hold slices of several items.  Negative control (run when this was
 * written): an item put one double past its place fails the merge. */
Test(golden_command, streamed_parts_are_the_same_bytes_on_any_threads, .timeout = 120)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], whole[RB_PATH_MAX + 32], merged[RB_PATH_MAX + 32];
    char part[3][5][RB_PATH_MAX + 64], again[RB_PATH_MAX + 32], spec[16], threads[16];
    rb_tmpdir(dir);
    config_file(cfg, sizeof cfg, dir,
                "{\"model\": {\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 24, \"n_layers\": 2, \"norm\": \"pre\"},"
                " \"input\": {\"batch\": 3, \"seq_len\": 5, \"padding\": [0, 2, 1]}}");
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(merged, sizeof merged, "%s/merged.safetensors", dir);
    snprintf(again, sizeof again, "%s/again.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--out-file", whole, "--quiet", NULL});
    for (int t = 1; t <= 2; t++) {
        snprintf(threads, sizeof threads, "%d", t);
        for (int k = 1; k <= 4; k++) {
            snprintf(part[t][k], sizeof part[t][k], "%s/t%d-part%d.safetensors", dir, t, k);
            snprintf(spec, sizeof spec, "%d/4", k);
            rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--shard", spec, "--threads",
                                    threads, "--out-file", part[t][k], "--quiet", NULL});
            expect_whole_writers_bytes(part[t][k], again);
            if (t == 2)
                cr_expect(rb_same_file(part[1][k], part[2][k]), "shard %d/4: 1 and 2 threads give other bytes", k);
        }
        rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", merged, part[t][2], part[t][4],
                                part[t][1], part[t][3], "--quiet", NULL});
        cr_expect(rb_same_file(whole, merged), "%d thread%s: the merged parts differ from the unsharded file", t,
                  t == 1 ? "" : "s");
    }
    cr_expect(!rb_has_temporary_file(dir), "a temporary file was left");
    rb_tmpdir_remove(dir);
}
