/* `refenc golden` refuses what it cannot make, as a user meets it: one wrong
 * thing at a time (a catalogue entry, an option, a part file, an output
 * place), each run must exit 2 with one line naming the file or the field,
 * and leave nothing on disk.
 *
 * Every group has a negative control: the same command with the one wrong
 * thing put right succeeds, so a refusal is the wrong thing's doing. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <nettle/sha2.h>

#include "../../ref/core/version.h"
#include "../../ref/io/safetensors.h"
#include "../robustness/robust.h"

/* A command that must be refused: exit 2, one line with every fragment. */
typedef struct {
    const char *what, *args[14], *fragment[3];
} refusal;

/* The number of entries of dir (other than . and ..); -1 when it does not exist. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* Runs each refusal; dir must hold exactly `files` entries after each (nothing written, no
 * temporary file left). */
static void expect_refusals(const refusal *cases, size_t n, const char *dir, int files)
{
    for (size_t i = 0; i < n; i++) {
        rb_result r = rb_run(cases[i].args);
        rb_expect_error(&r, 2, "golden", cases[i].what, cases[i].fragment);
        rb_result_free(&r);
        cr_expect_eq(entries(dir), files, "%s: %d entries in %s, want %d (something was written)",
                     cases[i].what, entries(dir), dir, files);
    }
}

/* dir/name holding text; its path in path. */
/* A catalogue whose one case "t" (a LayerNorm over D = 4) has `extra` spliced into its entry and
 * `input` as its input object. */
static void catalogue(char *path, size_t cap, const char *dir, const char *extra, const char *input)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"cases\": [{\"case\": \"t\", \"component\": \"layernorm\", \"description\": \"d\", "
             "\"seed\": 7, \"model\": {\"d_model\": 4, \"n_heads\": 1, \"d_ff\": 1, \"n_layers\": 1}, "
             "\"input\": %s%s}]}",
             input, extra);
    rb_text_file(path, cap, dir, "cat.json", text);
}

#define GOOD_INPUT "{\"batch\": 2, \"seq_len\": 3}"

/* Each wrong catalogue entry is named: the case and the key, or the catalogue and the entry. */
Test(golden_errors, a_bad_catalogue_entry_is_named_and_nothing_is_written)
{
    char dir[RB_PATH_MAX], cat[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(out, sizeof out, "%s/t.safetensors", dir);
    static const struct {
        const char *what, *extra, *input, *fragment[3];
    } bad[] = {
        {"an unknown key", ", \"colour\": 1", GOOD_INPUT, {"cat.json: cases[0].colour: unknown key", NULL}},
        {"no description", ", \"description\": null", GOOD_INPUT,
         {"case t: needs a description, a known component and a seed >= 0", NULL}},
        {"a negative seed", ", \"seed\": -1", GOOD_INPUT, {"case t: needs a description", NULL}},
        {"a seed in a string", ", \"seed\": \"7\"", GOOD_INPUT, {"case t: needs a description", NULL}},
        {"an unknown component", ", \"component\": \"convolution\"", GOOD_INPUT,
         {"case t: needs a description, a known component", NULL}},
        {"no component", ", \"component\": null", GOOD_INPUT, {"case t: needs a description, a known component", NULL}},
        {"input_bits 16", ", \"input_bits\": 16", GOOD_INPUT, {"case t: input_bits must be 8 or 24", NULL}},
        {"params not an object", ", \"params\": 3", GOOD_INPUT, {"case t: params must be an object", NULL}},
        {"a params entry not an object", ", \"params\": {\"norm1.weight\": 3}", GOOD_INPUT,
         {"case t: params.norm1.weight must be an object", NULL}},
        {"a params key of a parameter", ", \"params\": {\"norm1.weight\": {\"colour\": 1}}", GOOD_INPUT,
         {"case t: params.norm1.weight.colour: unknown key", NULL}},
        {"a params entry naming nothing", ", \"params\": {\"linear9.bias\": {\"mean\": 1}}", GOOD_INPUT,
         {"case t: params.linear9.bias names no parameter of the case", NULL}},
        {"bug_classes a string", ", \"bug_classes\": \"layernorm_eps\"", GOOD_INPUT,
         {"case t: bug_classes must be an array of bug class names", NULL}},
        {"a bug class not a name", ", \"bug_classes\": [\"layernorm_eps\", 3]", GOOD_INPUT,
         {"case t: bug_classes must be an array of bug class names", NULL}},
        {"tolerance a number", ", \"tolerance\": 3", GOOD_INPUT, {"case t: tolerance must be an object", NULL}},
        {"float32_hazard a number", ", \"float32_hazard\": 1", GOOD_INPUT,
         {"case t: float32_hazard must be a string", NULL}},
        {"embedding_std 0", ", \"embedding_std\": 0", GOOD_INPUT, {"case t: embedding_std must be a number > 0", NULL}},
        {"embedding_std a string", ", \"embedding_std\": \"big\"", GOOD_INPUT,
         {"case t: embedding_std must be a number > 0", NULL}},
        {"input not an object", "", "[2, 3]", {"case t: input: expected an object", NULL}},
        {"an unknown input key", "", "{\"batch\": 2, \"seq_len\": 3, \"colour\": 1}",
         {"case t: input.colour: unknown key", NULL}},
        {"padding of another batch", "", "{\"batch\": 2, \"seq_len\": 3, \"padding\": [1]}",
         {"case t: input.padding: expected 2 integers", NULL}},
        {"a model over the limits", ", \"model\": {\"d_model\": 1048577}", GOOD_INPUT,
         {"case t: model", "d_model = 1048577 exceeds the limit", NULL}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* a later duplicate "model" or "description" would be refused as a duplicate: splice the
         * override in place of the key instead */
        char text[2048];
        const char *model = "{\"d_model\": 4, \"n_heads\": 1, \"d_ff\": 1, \"n_layers\": 1}";
        const char *description = "\"d\"";
        const char *seed = "7", *component = "\"layernorm\"";
        const char *extra = bad[i].extra;
        if (strncmp(extra, ", \"component\": ", 15) == 0)
            component = extra + 15, extra = "";
        else if (strncmp(extra, ", \"model\": ", 11) == 0)
            model = extra + 11, extra = "";
        else if (strncmp(extra, ", \"description\": ", 17) == 0)
            description = extra + 17, extra = "";
        else if (strncmp(extra, ", \"seed\": ", 10) == 0)
            seed = extra + 10, extra = "";
        snprintf(text, sizeof text,
                 "{\"cases\": [{\"case\": \"t\", \"component\": %s, \"description\": %s, "
                 "\"seed\": %s, \"model\": %s, \"input\": %s%s}]}",
                 component, description, seed, model, bad[i].input, extra);
        rb_text_file(cat, sizeof cat, dir, "cat.json", text);
        const refusal r = {bad[i].what, {"refenc", "golden", "--catalogue", cat, "--case", "t", "--out-file", out,
                                         "--quiet", NULL},
                           {bad[i].fragment[0], bad[i].fragment[1], NULL}};
        expect_refusals(&r, 1, dir, 1);
    }
    /* negative control: the entry put right makes its case, under the name, description and seed
     * the command line gives */
    catalogue(cat, sizeof cat, dir,
              ", \"params\": {\"norm1.weight\": {\"mean\": 1, \"scale\": 0.5}}, \"input_bits\": 24, "
              "\"bug_classes\": [], \"tolerance\": {}, \"float32_hazard\": \"none here\"",
              GOOD_INPUT);
    rb_run_ok((const char *[]){"refenc", "golden", "--catalogue", cat, "--case", "t", "--out-file", out, "--quiet",
                            "--name", "u", "--description", "given", "--seed", "8", NULL});
    cr_expect(rb_exists(out), "the good catalogue made no case");
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s", err.message);
    cr_expect_str_eq(refenc_st_metadata(&f, "case"), "u");
    cr_expect_str_eq(refenc_st_metadata(&f, "description"), "given");
    cr_expect_str_eq(refenc_st_metadata(&f, "float32_hazard"), "none here");
    refenc_st_free(&f);
    rb_tmpdir_remove(dir);
}

/* A catalogue that is not one: named with the place of the fault, for the make, list and manifest verbs. */
Test(golden_errors, a_catalogue_that_is_not_one_is_refused_by_every_verb)
{
    char dir[RB_PATH_MAX], cat[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32], man[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(out, sizeof out, "%s/t.safetensors", dir);
    snprintf(man, sizeof man, "%s/manifest.json", dir);
    static const struct {
        const char *what, *text, *fragment;
    } bad[] = {
        {"not JSON", "{\"cases\": [", "cat.json: line 1, column"},
        {"no cases array", "{\"cases\": 3}", "cat.json: expected an object with a \"cases\" array"},
        {"an entry without a name", "{\"cases\": [{\"component\": \"layernorm\"}]}",
         "cat.json: cases[0] needs a \"case\" name"},
        {"an entry not an object", "{\"cases\": [3]}", "cat.json: cases[0] is not an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rb_text_file(cat, sizeof cat, dir, "cat.json", bad[i].text);
        const refusal r[] = {
            {bad[i].what, {"refenc", "golden", "--catalogue", cat, "--case", "t", "--out-file", out, NULL},
             {bad[i].fragment, NULL}},
            {bad[i].what, {"refenc", "golden", "list", cat, NULL}, {bad[i].fragment, NULL}},
            {bad[i].what, {"refenc", "golden", "manifest", cat, dir, man, NULL}, {bad[i].fragment, NULL}},
        };
        expect_refusals(r, sizeof r / sizeof r[0], dir, 1);
    }
    /* negative control: a good catalogue lists its case */
    catalogue(cat, sizeof cat, dir, "", GOOD_INPUT);
    rb_result r = rb_run((const char *[]){"refenc", "golden", "list", cat, NULL});
    cr_expect_eq(r.status, 0, "list: exit %d: %s", r.status, r.err);
    cr_expect_str_eq(r.out, "t\n");
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}

/* The manifest verb: a case file missing, or a file that is not a golden case. */
Test(golden_errors, a_manifest_over_missing_or_foreign_files_is_refused)
{
    char dir[RB_PATH_MAX], cat[RB_PATH_MAX + 32], man[RB_PATH_MAX + 32], cases[RB_PATH_MAX + 32];
    char file[RB_PATH_MAX + 64];
    rb_tmpdir(dir);
    catalogue(cat, sizeof cat, dir, "", GOOD_INPUT);
    snprintf(man, sizeof man, "%s/manifest.json", dir);
    snprintf(cases, sizeof cases, "%s/cases", dir);
    cr_assert_eq(mkdir(cases, 0700), 0);
    snprintf(file, sizeof file, "%s/t.safetensors", cases);
    const refusal missing = {"a missing case file", {"refenc", "golden", "manifest", cat, cases, man, NULL},
                             {"t.safetensors", NULL}};
    expect_refusals(&missing, 1, dir, 2);
    rb_write_safetensors(file, "{\"__metadata__\": {\"case\": \"t\"}}", NULL, 0);
    const refusal foreign = {"a file that is not a golden case",
                             {"refenc", "golden", "manifest", cat, cases, man, NULL},
                             {"t.safetensors: __metadata__ needs case, component, description, outputs and "
                              "bug_classes", NULL}};
    expect_refusals(&foreign, 1, dir, 2);
    const refusal usage = {"too few arguments", {"refenc", "golden", "manifest", cat, cases, NULL},
                           {"usage: refenc golden manifest CATALOGUE.json CASES_DIR OUT.json", NULL}};
    expect_refusals(&usage, 1, dir, 2);
    /* a made case with one of the keys the manifest needs missing, or not an array */
    remove(file);
    rb_run_ok((const char *[]){"refenc", "golden", "--catalogue", cat, "--case", "t", "--out-file", file, "--quiet",
                            NULL});
    char good[RB_PATH_MAX + 32];
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    rb_copy_file(file, good);
    static const struct {
        const char *key, *value;
    } edits[] = {{"case", NULL}, {"component", NULL}, {"description", NULL}, {"outputs", NULL},
                 {"outputs", "{}"}, {"bug_classes", NULL}, {"bug_classes", "\"none\""}};
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        rb_golden g;
        rb_golden_load_file(&g, good);
        rb_golden_set_meta(&g, edits[i].key, edits[i].value);
        rb_golden_write(&g, file);
        rb_golden_free(&g);
        const refusal r = {edits[i].key, {"refenc", "golden", "manifest", cat, cases, man, NULL},
                           {"t.safetensors: __metadata__ needs case, component, description, outputs and "
                            "bug_classes", NULL}};
        expect_refusals(&r, 1, dir, 3);
    }
    /* negative control: the case as made, the manifest lists it */
    rb_copy_file(good, file);
    rb_run_ok((const char *[]){"refenc", "golden", "manifest", cat, cases, man, NULL});
    cr_expect(rb_exists(man));
    remove(file);
    rmdir(cases);
    rb_tmpdir_remove(dir);
}

/* Options: each value out of its range, each unknown or incomplete option, each missing pairing. */
Test(golden_errors, a_bad_option_is_refused_before_any_work)
{
    char dir[RB_PATH_MAX], cat[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    catalogue(cat, sizeof cat, dir, "", GOOD_INPUT);
    snprintf(out, sizeof out, "%s/t.safetensors", dir);
#define MAKE "refenc", "golden", "--catalogue", cat, "--case", "t", "--out-file", out
    const refusal cases[] = {
        {"--seed too large", {MAKE, "--seed", "4294967296", NULL}, {"--seed: '4294967296' is not an integer", NULL}},
        {"--seed not a number", {MAKE, "--seed", "x", NULL}, {"--seed: 'x' is not an integer", NULL}},
        {"--shard without a slash", {MAKE, "--shard", "2", NULL}, {"--shard: '2' is not K/N", NULL}},
        {"--shard 1/0", {MAKE, "--shard", "1/0", NULL}, {"--shard: '1/0' is not K/N", NULL}},
        {"--prec 63", {MAKE, "--prec", "63", NULL}, {"--prec: '63' is not an integer in [64, 65472]", NULL}},
        {"--prec 65537", {MAKE, "--prec", "65537", NULL}, {"--prec: '65537' is not an integer", NULL}},
        {"--threads 4097", {MAKE, "--threads", "4097", NULL}, {"--threads: '4097' is not an integer", NULL}},
        {"an unknown option", {MAKE, "--colour", NULL}, {"unknown option '--colour'", NULL}},
        {"a value missing", {MAKE, "--seed", NULL}, {"--seed needs a value", NULL}},
        {"--catalogue without --case", {"refenc", "golden", "--catalogue", cat, "--out-file", out, NULL},
         {"--catalogue and --case go together", NULL}},
        {"--case without --catalogue", {"refenc", "golden", "--config", cat, "--case", "t", "--out-file", out, NULL},
         {"--catalogue and --case go together", NULL}},
        {"both outputs", {MAKE, "--out", dir, NULL}, {"give one of --out DIR and --out-file FILE", NULL}},
        {"list without its catalogue", {"refenc", "golden", "list", NULL},
         {"usage: refenc golden list CATALOGUE.json", NULL}},
        {"list of two catalogues", {"refenc", "golden", "list", cat, cat, NULL},
         {"usage: refenc golden list CATALOGUE.json", NULL}},
        {"--shard with a sign", {MAKE, "--shard", "+1/2", NULL}, {"--shard: '+1/2' is not K/N", NULL}},
        {"--shard with a negative N", {MAKE, "--shard", "1/-2", NULL}, {"--shard: '1/-2' is not K/N", NULL}},
        {"--shard with a space", {MAKE, "--shard", " 1/2", NULL}, {"--shard: ' 1/2' is not K/N", NULL}},
        {"--shard with a letter", {MAKE, "--shard", "a/2", NULL}, {"--shard: 'a/2' is not K/N", NULL}},
        {"--shard with a tail", {MAKE, "--shard", "1/2x", NULL}, {"--shard: '1/2x' is not K/N", NULL}},
        {"--prec not a number", {MAKE, "--prec", "high", NULL}, {"--prec: 'high' is not an integer", NULL}},
        {"--threads not a number", {MAKE, "--threads", "many", NULL}, {"--threads: 'many' is not an integer", NULL}},
        {"an empty --name", {MAKE, "--name", "", NULL}, {"--name: '' is not a case name", NULL}},
        {"a hidden --name", {MAKE, "--name", ".t", NULL}, {"--name: '.t' is not a case name", NULL}},
        {"a --name with a space", {MAKE, "--name", "t 2", NULL}, {"--name: 't 2' is not a case name", NULL}},
        {"a --name with '..'", {MAKE, "--name", "a..b", NULL},
         {"--name: 'a..b' is not a case name certify accepts", "no '..'", NULL}},
        {"a --name ending in '..'", {MAKE, "--name", "t..", NULL}, {"--name: 't..' is not a case name", NULL}},
        {"a --name with a slash", {MAKE, "--name", "a/b", NULL}, {"--name: 'a/b' is not a case name", NULL}},
        {"a --name of 116 characters (its file name 128)",
         {MAKE, "--name",
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
          NULL},
         {"is not a case name", "1 to 115 characters", NULL}},
    };
#undef MAKE
    expect_refusals(cases, sizeof cases / sizeof cases[0], dir, 1);
    /* negative control: the same options in range make the case, and say so (-h: the usage) */
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--catalogue", cat, "--case", "t", "--out-file", out,
                                          "--seed", "4294967295", "--prec", "64", "--threads", "1", "--name",
                                          "t-2.b_c", NULL});
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "refenc golden: case t-2.b_c: ") != NULL && strstr(r.out, out) != NULL,
              "the run does not say what it wrote: %s", r.out);
    rb_result_free(&r);
    cr_expect(rb_exists(out));
    r = rb_run((const char *[]){"refenc", "golden", "-h", NULL});
    cr_expect(r.status == 0 && strstr(r.out, "usage: refenc golden") != NULL, "-h: exit %d: %s", r.status, r.out);
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}

/* What only encoder cases take (an inputs file, parts), what parts cannot hold (bug variants),
 * and more shards than units. */
Test(golden_errors, what_a_case_cannot_be_made_with_is_named)
{
    char dir[RB_PATH_MAX], cat[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32], cfg[RB_PATH_MAX + 32];
    char enc[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    catalogue(cat, sizeof cat, dir, "", GOOD_INPUT);
    snprintf(out, sizeof out, "%s/t.safetensors", dir);
    rb_text_file(cfg, sizeof cfg, dir, "finfo.json",
              "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1, "
              "\"mask_value\": \"finfo_min\"}, \"input\": {\"batch\": 2, \"seq_len\": 3}}");
    rb_text_file(enc, sizeof enc, dir, "enc.json",
              "{\"cases\": [{\"case\": \"e\", \"component\": \"encoder\", \"description\": \"d\", \"seed\": 3, "
              "\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1}, "
              "\"input\": {\"batch\": 2, \"seq_len\": 3}, \"bug_classes\": [\"rope_layout\"]}]}");
    char one[RB_PATH_MAX + 32];
    rb_text_file(one, sizeof one, dir, "one.json",
              "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1}, "
              "\"input\": {\"batch\": 1, \"seq_len\": 3}}");
    char inputs[RB_PATH_MAX];
    rb_fixture_case(inputs, "encoder_causal_learned");
    const refusal cases[] = {
        {"--inputs for a LayerNorm case",
         {"refenc", "golden", "--catalogue", cat, "--case", "t", "--inputs", inputs, "--out-file", out, NULL},
         {"--inputs: case t is a layernorm case; only encoder cases take an inputs file", NULL}},
        {"--per-layer for a LayerNorm case",
         {"refenc", "golden", "--catalogue", cat, "--case", "t", "--per-layer", "--out-file", out, NULL},
         {"case t is a layernorm case; only encoder cases are made in parts", NULL}},
        {"--shard for a LayerNorm case",
         {"refenc", "golden", "--catalogue", cat, "--case", "t", "--shard", "1/2", "--out-file", out, NULL},
         {"only encoder cases are made in parts", NULL}},
        {"--shard of a catalogue entry with bug classes",
         {"refenc", "golden", "--catalogue", enc, "--case", "e", "--shard", "1/2", "--out-file", out, NULL},
         {"--shard makes no oracle bug variants", "--no-variants", NULL}},
        {"two shards of one item", {"refenc", "golden", "--config", one, "--shard", "1/2", "--out-file", out, NULL},
         {"--shard 1/2: case one has only 1 unit (batch items; --per-layer makes layers x batch items); "
          "give at most 1 shards", NULL}},
        {"three shards of one layer of one item",
         {"refenc", "golden", "--config", one, "--per-layer", "--shard", "2/3", "--out-file", out, NULL},
         {"case one has only 1 unit (layers x batch items)", NULL}},
    };
    expect_refusals(cases, sizeof cases / sizeof cases[0], dir, 4);
    /* negative controls: the entry with --no-variants, and a family option (the finfo.min mask
     * value) made per layer, as any encoder */
    rb_run_ok((const char *[]){"refenc", "golden", "--catalogue", enc, "--case", "e", "--no-variants", "--shard", "1/2",
                            "--out-file", out, "--quiet", NULL});
    cr_expect(rb_exists(out));
    remove(out);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--out-file", out, "--quiet", NULL});
    cr_expect(rb_exists(out));
    rb_tmpdir_remove(dir);
}

/* Where the output cannot go: a file where a directory is wanted, a directory that cannot be
 * made, a manifest that is not one (left as it is). */
Test(golden_errors, an_output_place_that_cannot_take_the_case_is_refused)
{
    char dir[RB_PATH_MAX], cat[RB_PATH_MAX + 32], file[RB_PATH_MAX + 32], deep[RB_PATH_MAX + 32];
    char gold[RB_PATH_MAX + 32], cases[RB_PATH_MAX + 64], man[RB_PATH_MAX + 64], nodir[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    catalogue(cat, sizeof cat, dir, "", GOOD_INPUT);
    rb_text_file(file, sizeof file, dir, "plain", "x");
    snprintf(deep, sizeof deep, "%s/no/such", dir);
    snprintf(nodir, sizeof nodir, "%s/no/t.safetensors", dir);
    snprintf(gold, sizeof gold, "%s/gold", dir);
    snprintf(cases, sizeof cases, "%s/cases", gold);
    snprintf(man, sizeof man, "%s/manifest.json", gold);
    cr_assert_eq(mkdir(gold, 0700), 0);
    cr_assert_eq(mkdir(cases, 0700), 0);
    rb_write_file(man, "{\"cases\": 3}", 12);
#define MAKE "refenc", "golden", "--catalogue", cat, "--case", "t", "--quiet"
    const refusal cases_[] = {
        {"--out a regular file", {MAKE, "--out", file, NULL}, {"plain: exists and is not a directory", NULL}},
        {"--out under a missing directory", {MAKE, "--out", deep, NULL},
         {"no/such: cannot create the directory", NULL}},
        {"--out-file in a missing directory", {MAKE, "--out-file", nodir, NULL}, {"no/t.safetensors", NULL}},
        {"--out with a bad manifest", {MAKE, "--out", gold, NULL},
         {"manifest.json: not a golden manifest", "it is left as it is", NULL}},
    };
#undef MAKE
    expect_refusals(cases_, sizeof cases_ / sizeof cases_[0], dir, 3);
    cr_expect_eq(entries(cases), 0, "a case file was left in %s", cases);
    size_t n;
    unsigned char *m = rb_read_file(man, &n);
    cr_expect(n == 12 && memcmp(m, "{\"cases\": 3}", 12) == 0, "the bad manifest was changed");
    free(m);
    /* negative control: with no manifest yet, the directory takes the case and a manifest */
    remove(man);
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--catalogue", cat, "--case", "t", "--out", gold, NULL});
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "/gold/cases/t.safetensors") != NULL, "the run does not say where it wrote: %s", r.out);
    rb_result_free(&r);
    cr_expect_eq(entries(cases), 1);
    cr_expect(rb_exists(man));
    rb_tmpdir_remove(gold);
    rb_tmpdir_remove(dir);
}

/* ---- parts -------------------------------------------------------------------------------- */

#define PART_CONFIG "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1}, " \
                    "\"input\": {\"batch\": 4, \"seq_len\": 3}}"

/* dir/p1 and dir/p2: the parts 1/2 and 2/2 of a 4-item case (items 0-2 and 2-4); dir/q2: its
 * part 2/4. */
static void make_parts(const char *dir, char *cfg, char *p1, char *p2, char *q2, size_t cap)
{
    rb_text_file(cfg, cap, dir, "config.json", PART_CONFIG);
    snprintf(p1, cap, "%s/p1.safetensors", dir);
    snprintf(p2, cap, "%s/p2.safetensors", dir);
    snprintf(q2, cap, "%s/q2.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", "1/2", "--out-file", p1, "--quiet", NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", "2/2", "--out-file", p2, "--quiet", NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", "2/4", "--out-file", q2, "--quiet", NULL});
}

/* A copy of part `from` at `to` with metadata key set to value (NULL: removed). */
static void part_with_meta(const char *from, const char *to, const char *key, const char *value)
{
    rb_golden g;
    rb_golden_load_file(&g, from);
    rb_golden_set_meta(&g, key, value);
    rb_golden_write(&g, to);
    rb_golden_free(&g);
}

/* Merge's own misuse, and parts that do not belong together. */
Test(golden_errors, parts_that_do_not_make_a_case_are_not_merged, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], p1[RB_PATH_MAX + 32], p2[RB_PATH_MAX + 32];
    char q2[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32], plain[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    make_parts(dir, cfg, p1, p2, q2, sizeof cfg);
    snprintf(out, sizeof out, "%s/merged.safetensors", dir);
    snprintf(plain, sizeof plain, "%s/no/merged.safetensors", dir);
    const refusal cases[] = {
        {"merge with no output", {"refenc", "golden", "merge", p1, p2, NULL},
         {"merge: give one of --out DIR and --out-file FILE", NULL}},
        {"merge with both outputs", {"refenc", "golden", "merge", "--out", dir, "--out-file", out, p1, p2, NULL},
         {"merge: give one of --out DIR and --out-file FILE", NULL}},
        {"merge with no parts", {"refenc", "golden", "merge", "--out-file", out, NULL},
         {"merge: no part files given", NULL}},
        {"merge with an unknown option", {"refenc", "golden", "merge", "--colour", "--out-file", out, p1, p2, NULL},
         {"merge: unknown option '--colour'", NULL}},
        {"merge with --out-file last", {"refenc", "golden", "merge", p1, p2, "--out-file", NULL},
         {"--out-file needs a value", NULL}},
        {"parts of different shard counts", {"refenc", "golden", "merge", "--out-file", out, p1, q2, NULL},
         {"q2.safetensors: its plan's 'shards' is 4,", "p1.safetensors's is 2: parts of different plans", NULL}},
        {"a part that is no file", {"refenc", "golden", "merge", "--out-file", out, p1, cfg, NULL},
         {"config.json", NULL}},
        {"merged into a missing directory", {"refenc", "golden", "merge", "--out-file", plain, p1, p2, NULL},
         {"no/merged.safetensors", NULL}},
    };
    expect_refusals(cases, sizeof cases / sizeof cases[0], dir, 4);
    /* negative control: the right parts merge */
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", out, p2, p1, "--quiet", NULL});
    cr_expect(rb_exists(out));
    rb_tmpdir_remove(dir);
}

/* A part whose metadata was edited: each inconsistency is named with the part's path. */
Test(golden_errors, a_part_with_edited_metadata_is_named, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], p1[RB_PATH_MAX + 32], p2[RB_PATH_MAX + 32];
    char q2[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32], e1[RB_PATH_MAX + 32], e2[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    make_parts(dir, cfg, p1, p2, q2, sizeof cfg);
    remove(q2);
    snprintf(out, sizeof out, "%s/merged.safetensors", dir);
    snprintf(e1, sizeof e1, "%s/e1.safetensors", dir);
    snprintf(e2, sizeof e2, "%s/e2.safetensors", dir);

    /* p1's slices, to give p2 the same items */
    rb_golden g;
    rb_golden_load_file(&g, p1);
    char *slices1 = strdup(json_string_value(json_object_get(g.meta, "slices")));
    rb_golden_free(&g);
    cr_assert_not_null(slices1);
    /* p2's slices less one output: an item no part holds */
    rb_golden_load_file(&g, p2);
    json_t *sl = json_loads(json_string_value(json_object_get(g.meta, "slices")), 0, NULL);
    cr_assert(json_is_object(sl));
    const char *dropped = json_object_iter_key(json_object_iter(sl));
    char dropped_name[256];
    snprintf(dropped_name, sizeof dropped_name, "'%s'", dropped);
    json_object_del(sl, dropped);
    char *slices2_less = json_dumps(sl, JSON_COMPACT);
    json_decref(sl);
    rb_golden_free(&g);

    static const char zeros[] = "0000000000000000000000000000000000000000000000000000000000000000";
    static const struct {
        const char *what;
        int part;  /* the part edited: 1 or 2 */
        int both;  /* the edit made in both parts */
        const char *key, *value, *fragment[3];
    } bad[] = {
        {"a case file for a part", 1, 0, "format", "refenc-golden", {"e1.safetensors: not a part of a golden case", NULL}},
        {"a part of format version 1", 2, 0, "format_version", "1",
         {"e2.safetensors: a part of format version '1'; this refenc merges version 2 only",
          "make the parts again with this refenc", NULL}},
        {"no format version", 2, 0, "format_version", NULL, {"e2.safetensors: a part of format version ''", NULL}},
        {"no plan", 2, 0, "plan", NULL, {"e2.safetensors: __metadata__.plan is not a JSON object", NULL}},
        {"no shard", 2, 0, "shard", NULL, {"e2.safetensors: __metadata__: shard, units, prec or prec_check", NULL}},
        {"a malformed prec", 2, 0, "prec", "high", {"e2.safetensors: __metadata__: shard, units", NULL}},
        {"malformed units", 2, 0, "units", "two", {"e2.safetensors: __metadata__: shard, units", NULL}},
        {"a malformed prec_check", 2, 0, "prec_check", "", {"e2.safetensors: __metadata__: shard, units", NULL}},
        {"units ending elsewhere", 2, 0, "units", "2-3",
         {"e2.safetensors: shard 2/2 of 4 units should hold units 2-4, not 2-3", NULL}},
        {"units of another shard", 2, 0, "units", "0-2",
         {"e2.safetensors: shard 2/2 of 4 units should hold units 2-4, not 0-2", NULL}},
        {"a shard of another count", 2, 0, "shard", "2/3", {"e2.safetensors: shard 2/3 of a plan of 2 shards", NULL}},
        {"slices not an object", 2, 0, "slices", "[]", {"e2.safetensors: __metadata__.slices is not a JSON object", NULL}},
        {"a slice of no output", 2, 0, "slices", "{\"out.colour\": [2, 4]}",
         {"e2.safetensors: slice 'out.colour' (items 2 to 4) is not one of the case's outputs", NULL}},
        {"another case name than the plan's", 2, 0, "case", "other",
         {"e2.safetensors: __metadata__.case or component ('other', 'encoder') is not its plan's", NULL}},
        {"no bug classes in part 1", 1, 0, "bug_classes", NULL,
         {"e1.safetensors: __metadata__ of part 1 lacks the case's bug_classes or tolerance", NULL}},
        {"another fingerprint in both", 1, 1, "fingerprint", zeros,
         {"e1.safetensors: __metadata__.fingerprint 0000000000000000... is not the sha256 of its plan", NULL}},
        {"another tensors_sha256", 2, 0, "tensors_sha256", zeros,
         {"e2.safetensors: its tensors do not have the sha256 its metadata records", NULL}},
        {"another description in part 1", 1, 0, "description", "edited",
         {"e1.safetensors: the case it holds does not match the plan's 'case_meta_sha256'", NULL}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int one = bad[i].part == 1 || bad[i].both, two = bad[i].part == 2 || bad[i].both;
        if (one)
            part_with_meta(p1, e1, bad[i].key, bad[i].value);
        else
            rb_copy_file(p1, e1);
        if (two)
            part_with_meta(p2, e2, bad[i].key, bad[i].value);
        else
            rb_copy_file(p2, e2);
        const refusal r = {bad[i].what, {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                           {bad[i].fragment[0], bad[i].fragment[1], NULL}};
        expect_refusals(&r, 1, dir, 5);
    }
    /* items: twice, and never */
    rb_copy_file(p1, e1);
    part_with_meta(p2, e2, "slices", slices1);
    const refusal twice = {"an item in two parts", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                           {"e2.safetensors: slice '", "' holds items 0 to 2, but shard 2/2 (units 2-4) holds "
                            "items 2 to 4 of it", NULL}};
    expect_refusals(&twice, 1, dir, 5);
    part_with_meta(p2, e2, "slices", slices2_less);
    const refusal never = {"an item in no part", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                           {"no part holds item 2 of", dropped_name, NULL}};
    expect_refusals(&never, 1, dir, 5);
    /* negative control: the copies unedited merge */
    rb_copy_file(p2, e2);
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", out, e1, e2, "--quiet", NULL});
    cr_expect(rb_exists(out));
    free(slices1);
    free(slices2_less);
    rb_tmpdir_remove(dir);
}

/* The sha256 of n bytes as hex, computed here with nettle (not refenc's). */
static void sha256_hex(char hex[65], const void *p, size_t n)
{
    struct sha256_ctx h;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&h);
    sha256_update(&h, n, p);
    sha256_digest(&h, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static int entry_by_name(const void *a, const void *b)
{
    return strcmp(((const refenc_st_entry *)a)->name, ((const refenc_st_entry *)b)->name);
}

/* The tensors_sha256 of a part's entries as docs/golden-format.md defines it, computed here: in
 * the order of their names, each tensor's dtype name and name (with their NULs), then its
 * (ndim, shape...) and its bytes, each of those two as a 64-bit little-endian byte count and
 * the bytes. */
static void tensors_sha256(char hex[65], const rb_golden *g)
{
    refenc_st_entry e[RB_MAX_TENSORS];
    memcpy(e, g->e, g->n * sizeof *e);
    qsort(e, g->n, sizeof *e, entry_by_name);
    struct sha256_ctx h;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&h);
    for (size_t i = 0; i < g->n; i++) {
        const char *dt = refenc_st_dtype_name(e[i].dtype);
        sha256_update(&h, strlen(dt) + 1, (const uint8_t *)dt);
        sha256_update(&h, strlen(e[i].name) + 1, (const uint8_t *)e[i].name);
        uint64_t dims[REFENC_ST_MAX_NDIM + 2] = {(e[i].ndim + 1) * 8, e[i].ndim};
        size_t numel = 1;
        for (size_t k = 0; k < e[i].ndim; k++)
            dims[k + 2] = e[i].shape[k], numel *= e[i].shape[k];
        sha256_update(&h, (e[i].ndim + 2) * 8, (const uint8_t *)dims);
        const uint64_t nbytes = numel * refenc_st_dtype_size(e[i].dtype);
        sha256_update(&h, 8, (const uint8_t *)&nbytes);
        sha256_update(&h, nbytes, e[i].data);
    }
    sha256_digest(&h, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* A copy of part `from` at `to` with the first value of tensor `name` changed (1 added: F64 or
 * F32), and its tensors_sha256 recomputed when rehash (an edit the part's checksum cannot see). */
static void part_with_value(const char *from, const char *to, const char *name, int rehash)
{
    rb_golden g;
    rb_golden_load_file(&g, from);
    const refenc_st_entry *e = rb_golden_entry(&g, name);
    if (e->dtype == REFENC_ST_F64)
        ((double *)rb_golden_data(&g, name))[0] += 1;
    else if (e->dtype == REFENC_ST_F32)
        ((float *)rb_golden_data(&g, name))[0] += 1;
    else
        ((int64_t *)rb_golden_data(&g, name))[0] ^= 1;
    if (rehash) {
        char hex[65];
        tensors_sha256(hex, &g);
        rb_golden_set_meta(&g, "tensors_sha256", hex);
    }
    rb_golden_write(&g, to);
    rb_golden_free(&g);
}

/* A copy of part `from` at `to` whose plan has `field` set to the JSON text `value` (NULL:
 * removed), written as the canonical text, and its fingerprint recomputed when refingerprint;
 * with case_too, __metadata__.case is set to the same string. */
static void part_with_plan(const char *from, const char *to, const char *field, const char *value,
                           int refingerprint, int case_too)
{
    rb_golden g;
    rb_golden_load_file(&g, from);
    json_t *plan = json_loads(json_string_value(json_object_get(g.meta, "plan")), 0, NULL);
    cr_assert(json_is_object(plan), "%s has no plan", from);
    if (value != NULL)
        json_object_set_new(plan, field, json_loads(value, JSON_DECODE_ANY, NULL));
    else
        json_object_del(plan, field);
    char *text = json_dumps(plan, JSON_COMPACT | JSON_SORT_KEYS);
    rb_golden_set_meta(&g, "plan", text);
    if (refingerprint) {
        char hex[65];
        sha256_hex(hex, text, strlen(text));
        rb_golden_set_meta(&g, "fingerprint", hex);
    }
    if (case_too)
        rb_golden_set_meta(&g, "case", json_string_value(json_object_get(plan, field)));
    rb_golden_write(&g, to);
    free(text);
    json_decref(plan);
    rb_golden_free(&g);
}

/* A copy of `from` at `to` with only its first half of bytes: a file no reader takes. */
static void truncated_copy(const char *from, const char *to)
{
    size_t n;
    unsigned char *b = rb_read_file(from, &n);
    rb_write_file(to, b, n / 2);
    free(b);
}

/* A part is verified, not trusted (docs/verdict.md, the trust model): values changed after it
 * was made, a part of another config, weights or inputs even with the fingerprint string copied,
 * parts of another plan or of mixed versions, a case that is not the plan's, and a later part
 * that cannot be read: each is refused, naming the part and the field, and nothing is written. */
Test(golden_errors, a_part_that_is_not_what_its_plan_says_is_refused, .timeout = 90)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], p1[RB_PATH_MAX + 32], p2[RB_PATH_MAX + 32];
    char q2[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32], e1[RB_PATH_MAX + 32], e2[RB_PATH_MAX + 32];
    char cfg2[RB_PATH_MAX + 32], s2[RB_PATH_MAX + 32], c2[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    make_parts(dir, cfg, p1, p2, q2, sizeof cfg);
    remove(q2);
    snprintf(out, sizeof out, "%s/merged.safetensors", dir);
    snprintf(e1, sizeof e1, "%s/e1.safetensors", dir);
    snprintf(e2, sizeof e2, "%s/e2.safetensors", dir);
    snprintf(s2, sizeof s2, "%s/s2.safetensors", dir);
    snprintf(c2, sizeof c2, "%s/c2.safetensors", dir);
    /* shard 2/2 of the same config with another seed (other weights and inputs), and of another
     * config (d_ff 16): their values are of the same shapes */
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--seed", "9", "--shard", "2/2", "--out-file", s2,
                            "--quiet", NULL});
    rb_text_file(cfg2, sizeof cfg2, dir, "config2.json",
              "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 1}, "
              "\"input\": {\"batch\": 4, \"seq_len\": 3}}");
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg2, "--name", "config", "--description", "d",
                            "--shard", "2/2", "--out-file", c2, "--quiet", NULL});
    rb_golden g;
    rb_golden_load_file(&g, p2);
    const char *fp2 = json_string_value(json_object_get(g.meta, "fingerprint"));
    char fingerprint[65];
    cr_assert(fp2 != NULL && strlen(fp2) == 64);
    memcpy(fingerprint, fp2, 65);
    rb_golden_free(&g);
    const int files = 8; /* config.json, config2.json, p1, p2, s2, c2, e1, e2 */

    /* values changed after the part was made: a slice of part 2, a weight of part 1 */
    rb_copy_file(p1, e1);
    part_with_value(p2, e2, "slice.out.output", 0);
    const refusal changed2 = {"a changed value", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                              {"e2.safetensors: its tensors do not have the sha256 its metadata records",
                               "values were changed after the part was made", NULL}};
    expect_refusals(&changed2, 1, dir, files);
    rb_copy_file(p2, e2);
    part_with_value(p1, e1, "layers.0.linear1.weight", 0);
    const refusal changed1 = {"a changed weight", {"refenc", "golden", "merge", "--out-file", out, e2, e1, NULL},
                              {"e1.safetensors: its tensors do not have the sha256", NULL}};
    expect_refusals(&changed1, 1, dir, files);
    /* the same with the tensors' checksum recomputed: part 1's case is checked against the plan */
    part_with_value(p1, e1, "layers.0.linear1.weight", 1);
    const refusal weights = {"a changed weight, rehashed", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                             {"e1.safetensors: the case it holds does not match the plan's 'weights_sha256'", NULL}};
    expect_refusals(&weights, 1, dir, files);
    part_with_value(p1, e1, "in.x", 1);
    const refusal inputs = {"a changed input, rehashed", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                            {"e1.safetensors: the case it holds does not match the plan's 'inputs_sha256'", NULL}};
    expect_refusals(&inputs, 1, dir, files);

    /* parts of another seed or config with part 2's fingerprint string copied */
    rb_copy_file(p1, e1);
    part_with_meta(s2, e2, "fingerprint", fingerprint);
    const refusal seed = {"another seed, fingerprint copied", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                          {"e2.safetensors: __metadata__.fingerprint", "is not the sha256 of its plan", NULL}};
    expect_refusals(&seed, 1, dir, files);
    part_with_meta(c2, e2, "fingerprint", fingerprint);
    const refusal config = {"another config, fingerprint copied",
                            {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                            {"e2.safetensors: __metadata__.fingerprint", "is not the sha256 of its plan", NULL}};
    expect_refusals(&config, 1, dir, files);
    /* as made, they are parts of another plan, named by the first field that differs */
    const refusal seed_plan = {"another seed", {"refenc", "golden", "merge", "--out-file", out, e1, s2, NULL},
                               {"s2.safetensors: its plan's 'weights_sha256' is", "parts of different plans", NULL}};
    expect_refusals(&seed_plan, 1, dir, files);
    const refusal config_plan = {"another config", {"refenc", "golden", "merge", "--out-file", out, e1, c2, NULL},
                                 {"c2.safetensors: its plan's 'config' is", "parts of different plans", NULL}};
    expect_refusals(&config_plan, 1, dir, files);

    /* mixed versions, and a version other than this refenc's */
    part_with_plan(p2, e2, "refenc_version", "\"0.0.9\"", 1, 0);
    const refusal mixed = {"mixed versions", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                           {"e2.safetensors: its plan's 'refenc_version' is \"0.0.9\"",
                            "parts made by different refenc versions do not merge", NULL}};
    expect_refusals(&mixed, 1, dir, files);
    part_with_plan(p1, e1, "refenc_version", "\"0.0.9\"", 1, 0);
    const refusal other = {"another version", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                           {"e1.safetensors: made by refenc 0.0.9; this is refenc " REFENC_VERSION, NULL}};
    expect_refusals(&other, 1, dir, files);
    /* a plan's field missing, and a case name certify refuses, each with a fingerprint to match */
    rb_copy_file(p1, e1);
    part_with_plan(p2, e2, "units", NULL, 1, 0);
    const refusal units = {"a plan without units", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                           {"e2.safetensors: __metadata__.plan: 'units' is missing", NULL}};
    expect_refusals(&units, 1, dir, files);
    part_with_plan(p2, e2, "case", "\"a..b\"", 1, 1);
    const refusal name = {"a case name with ..", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                          {"e2.safetensors: __metadata__.plan: case 'a..b' is not a case name certify accepts", NULL}};
    expect_refusals(&name, 1, dir, files);
    /* a field of the wrong type, a negative count, a sum that is not hex: named as such */
    part_with_plan(p2, e2, "config", "\"x\"", 1, 0);
    const refusal config_str = {"a config that is a string", {"refenc", "golden", "merge", "--out-file", out, e1, e2,
                                                          NULL},
                            {"e2.safetensors: __metadata__.plan: 'config' is missing or not an object", NULL}};
    expect_refusals(&config_str, 1, dir, files);
    part_with_plan(p2, e2, "units", "-1", 1, 0);
    const refusal negative = {"a negative unit count", {"refenc", "golden", "merge", "--out-file", out, e1, e2,
                                                        NULL},
                              {"e2.safetensors: __metadata__.plan: 'units' is missing or not a non-negative "
                               "integer", NULL}};
    expect_refusals(&negative, 1, dir, files);
    part_with_plan(p2, e2, "weights_sha256", "\"abc\"", 1, 0);
    const refusal sum = {"a weights sha256 of 3 digits", {"refenc", "golden", "merge", "--out-file", out, e1, e2,
                                                           NULL},
                         {"e2.safetensors: __metadata__.plan: 'weights_sha256' is not 64 lower-case hex digits",
                          NULL}};
    expect_refusals(&sum, 1, dir, files);

    /* a plan of 6 units for a case of 4 items, consistent in both parts (units 0-3 and 3-6) */
    part_with_plan(p1, e1, "units", "6", 1, 0);
    part_with_meta(e1, e1, "units", "0-3");
    part_with_plan(p2, e2, "units", "6", 1, 0);
    part_with_meta(e2, e2, "units", "3-6");
    const refusal six = {"a plan of other units", {"refenc", "golden", "merge", "--out-file", out, e1, e2, NULL},
                         {"e1.safetensors: its plan's units (6) are not the case's: 4 (batch items)", NULL}};
    expect_refusals(&six, 1, dir, files);
    rb_copy_file(p1, e1);

    /* a later part that cannot be read: its own error, never another part's */
    truncated_copy(p2, e2);
    const refusal later = {"a later part unreadable", {"refenc", "golden", "merge", "--out-file", out, p1, e2, NULL},
                           {"e2.safetensors", NULL}};
    expect_refusals(&later, 1, dir, files);
    rb_result r = rb_run((const char *[]){"refenc", "golden", "merge", "--out-file", out, p1, p2, e2, NULL});
    rb_expect_error(&r, 2, "golden", "a third part unreadable", (const char *[]){"e2.safetensors", NULL});
    cr_expect(strstr(r.err, "both shard") == NULL && strstr(r.err, "plan") == NULL,
              "the unreadable part is not what the message names: %s", r.err);
    rb_result_free(&r);
    cr_expect(!rb_exists(out));

    /* negative control: the parts as made merge, also from copies */
    rb_copy_file(p1, e1);
    rb_copy_file(p2, e2);
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", out, e2, e1, "--quiet", NULL});
    cr_expect(rb_exists(out));
    rb_tmpdir_remove(dir);
}

/* Parts made into a directory (--out DIR: DIR/parts/NAME.part-K-of-N.safetensors) and merged into
 * another (DIR/cases/NAME.safetensors and its manifest) give the bytes of the whole run, final
 * outputs only as asked; each run says what it wrote unless --quiet. */
Test(golden_errors, parts_in_a_directory_merge_into_a_golden_directory, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], whole[RB_PATH_MAX + 32], parts[RB_PATH_MAX + 32];
    char gold[RB_PATH_MAX + 32], p[2][RB_PATH_MAX + 96], merged[RB_PATH_MAX + 96], man[RB_PATH_MAX + 64];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "pc.json", PART_CONFIG);
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(parts, sizeof parts, "%s/parts", dir);
    snprintf(gold, sizeof gold, "%s/gold", dir);
    snprintf(merged, sizeof merged, "%s/cases/pc.safetensors", gold);
    snprintf(man, sizeof man, "%s/manifest.json", gold);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--outputs", "final", "--out-file", whole, "--quiet",
                            NULL});
    for (int k = 1; k <= 2; k++) {
        char spec[16];
        snprintf(spec, sizeof spec, "%d/2", k);
        snprintf(p[k - 1], sizeof p[k - 1], "%s/parts/pc.part-%d-of-2.safetensors", dir, k);
        rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--outputs", "final", "--shard",
                                              spec, "--out", dir, NULL});
        cr_assert_eq(r.status, 0, "shard %s: exit %d: %s", spec, r.status, r.err);
        cr_expect(strstr(r.out, "refenc golden: case pc: shard") != NULL && strstr(r.out, p[k - 1]) != NULL,
                  "shard %s does not say where it went: %s", spec, r.out);
        rb_result_free(&r);
        cr_expect(rb_exists(p[k - 1]), "%s was not written", p[k - 1]);
    }
    rb_result r = rb_run((const char *[]){"refenc", "golden", "merge", "--out", gold, p[1], p[0], NULL});
    cr_assert_eq(r.status, 0, "merge: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "case pc: 2 parts joined into") != NULL, "merge does not say what it did: %s", r.out);
    rb_result_free(&r);
    cr_expect(rb_same_file(merged, whole), "the parts merged into a directory differ from the whole run");
    cr_expect(rb_exists(man), "no manifest in %s", gold);
    /* negative control: the comparison tells the final outputs from all of them */
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--out-file", whole, "--quiet", NULL});
    cr_expect(!rb_same_file(merged, whole), "all outputs and the final ones gave the same file");
    for (int k = 0; k < 2; k++)
        remove(p[k]);
    rmdir(parts);
    rb_tmpdir_remove(gold);
    rb_tmpdir_remove(dir);
}

/* Per layer, the parts also carry the layers' inputs: one dropped is named. */
Test(golden_errors, a_layer_input_no_part_holds_is_named, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], p1[RB_PATH_MAX + 32], p2[RB_PATH_MAX + 32];
    char e2[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "config.json", PART_CONFIG);
    snprintf(p1, sizeof p1, "%s/p1.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/p2.safetensors", dir);
    snprintf(e2, sizeof e2, "%s/e2.safetensors", dir);
    snprintf(out, sizeof out, "%s/merged.safetensors", dir);
    /* 4 units (1 layer x 4 items) in 2 parts */
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--shard", "1/2", "--out-file", p1,
                            "--quiet", NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--per-layer", "--shard", "2/2", "--out-file", p2,
                            "--quiet", NULL});
    rb_golden g;
    rb_golden_load_file(&g, p2);
    json_t *sl = json_loads(json_string_value(json_object_get(g.meta, "slices")), 0, NULL);
    cr_assert_not_null(json_object_get(sl, "in.layers.0.input"), "part 2 has no layer input slice");
    json_object_del(sl, "in.layers.0.input");
    char *text = json_dumps(sl, JSON_COMPACT);
    rb_golden_set_meta(&g, "slices", text);
    rb_golden_write(&g, e2);
    free(text);
    json_decref(sl);
    rb_golden_free(&g);
    const refusal r = {"a layer input in no part", {"refenc", "golden", "merge", "--out-file", out, p1, e2, NULL},
                       {"no part holds item 2 of 'in.layers.0.input'", NULL}};
    expect_refusals(&r, 1, dir, 4);
    /* negative control: the parts as made merge */
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", out, p1, p2, "--quiet", NULL});
    cr_expect(rb_exists(out));
    rb_tmpdir_remove(dir);
}

/* --help prints the usage and succeeds, whatever else is on the line. */
Test(golden_errors, help_prints_the_usage)
{
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--seed", "3", "--help", "--colour", NULL});
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "usage: refenc golden") != NULL, "no usage: %s", r.out);
    cr_expect_str_eq(r.err, "");
    rb_result_free(&r);
    /* negative control: without --help the unknown option is refused */
    r = rb_run((const char *[]){"refenc", "golden", "--seed", "3", "--colour", NULL});
    cr_expect_eq(r.status, 2);
    rb_result_free(&r);
}

/* The number of tensors of a file whose names start with prefix. */
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

/* --variants on a config stores the known bugs that move its outputs, and says so; a catalogue
 * entry's bug classes (here on a case with an additive attention mask) each have their say. */
Test(golden_errors, bug_variants_are_stored_and_reported, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], cat[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "v.json",
              "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1, \"positional\": \"alibi\"}, "
              "\"input\": {\"batch\": 2, \"seq_len\": 4, \"padding\": [0, 1]}}");
    rb_text_file(cat, sizeof cat, dir, "cat.json",
              "{\"cases\": [{\"case\": \"m\", \"component\": \"encoder\", \"description\": \"d\", \"seed\": 5, "
              "\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1}, "
              "\"input\": {\"batch\": 2, \"seq_len\": 4, \"attn_mask\": \"random\"}, "
              "\"bug_classes\": [\"layernorm_eps\"]}]}");
    snprintf(out, sizeof out, "%s/v.safetensors", dir);
    /* negative control first: with --no-variants, no alt.* tensor */
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--no-variants", "--out-file", out, "--quiet", NULL});
    cr_expect_eq(count_prefixed(out, "alt."), 0);
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--variants", "--out-file", out, NULL});
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "outputs and bug variants") != NULL, "stdout: %s", r.out);
    rb_result_free(&r);
    cr_expect_gt(count_prefixed(out, "alt."), 0, "--variants stored no variant");
    /* the entry's one class: its two variants are computed, each stored or said too small */
    r = rb_run((const char *[]){"refenc", "golden", "--catalogue", cat, "--case", "m", "--out-file", out, NULL});
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    const size_t stored = count_prefixed(out, "alt.layernorm_eps_x10.") > 0,
                 stored2 = count_prefixed(out, "alt.layernorm_eps_div10.") > 0;
    cr_expect_eq(stored + stored2 + (strstr(r.err, "variant layernorm_eps_x10 moves") != NULL) +
                     (strstr(r.err, "variant layernorm_eps_div10 moves") != NULL), 2,
                 "each variant of the class is stored or reported: stderr %s", r.err);
    cr_expect_eq(count_prefixed(out, "alt."), count_prefixed(out, "alt.layernorm_eps_"), "a variant of another class");
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}

/* A config's case is named after its file (less a .json suffix only) and described from the
 * config unless --description says otherwise. */
Test(golden_errors, a_config_case_is_named_after_its_file)
{
    char dir[RB_PATH_MAX], plain[RB_PATH_MAX + 32], js[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    const char *text = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 2}, "
                       "\"input\": {\"batch\": 1, \"seq_len\": 3}}";
    rb_text_file(plain, sizeof plain, dir, "enc.v2", text);
    rb_text_file(js, sizeof js, dir, "enc.json", text);
    snprintf(out, sizeof out, "%s/case.safetensors", dir);
    static const struct {
        int json;
        const char *description, *name, *want_desc;
    } runs[] = {{0, NULL, "enc.v2", "enc.v2: 2 layers, Pre-LN, d_model 8"},
                {1, "mine", "enc", "mine"}};
    for (size_t i = 0; i < 2; i++) {
        rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", runs[i].json ? js : plain, "--out-file",
                                              out, "--quiet", runs[i].description ? "--description" : NULL,
                                              runs[i].description, NULL});
        cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
        rb_result_free(&r);
        refenc_st_file f;
        refenc_error err;
        cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s", err.message);
        cr_expect_str_eq(refenc_st_metadata(&f, "case"), runs[i].name);
        cr_expect(strncmp(refenc_st_metadata(&f, "description"), runs[i].want_desc, strlen(runs[i].want_desc)) == 0,
                  "description '%s', want '%s...'", refenc_st_metadata(&f, "description"), runs[i].want_desc);
        refenc_st_free(&f);
    }
    rb_tmpdir_remove(dir);
}

/* ---- ground truth from good input only -------------------------------------------------------- */

#define BI_CONFIG "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1}, " \
                  "\"input\": {\"batch\": 2, \"seq_len\": 3}}"

/* dir/w.safetensors: the parameters of a case made from BI_CONFIG, under their state_dict names,
 * with element `at` of `bad` (a parameter, or NULL) set to v. */
static void weights_file(const char *dir, const char *bad, size_t at, float v)
{
    char cfg[RB_PATH_MAX + 32], whole[RB_PATH_MAX + 32], w[RB_PATH_MAX + 32];
    snprintf(cfg, sizeof cfg, "%s/bi.json", dir);
    snprintf(whole, sizeof whole, "%s/whole.tmp", dir);
    snprintf(w, sizeof w, "%s/w.safetensors", dir);
    rb_write_file(cfg, BI_CONFIG, strlen(BI_CONFIG));
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--outputs", "final", "--no-variants", "--out-file",
                            whole, "--quiet", NULL});
    rb_golden g;
    rb_golden_load_file(&g, whole);
    refenc_st_entry e[RB_MAX_TENSORS];
    size_t n = 0;
    for (size_t i = 0; i < g.n; i++)
        if (strncmp(g.e[i].name, "in.", 3) != 0 && strncmp(g.e[i].name, "out.", 4) != 0 &&
            strncmp(g.e[i].name, "dontcare.", 9) != 0)
            e[n++] = g.e[i];
    if (bad != NULL) {
        cr_assert_eq(rb_golden_entry(&g, bad)->dtype, REFENC_ST_F32);
        float *d = rb_golden_data(&g, bad);
        d[at] = v;
        for (size_t i = 0; i < n; i++)
            if (strcmp(e[i].name, bad) == 0)
                e[i].data = d;
    }
    refenc_error err;
    cr_assert_eq(refenc_st_write(w, e, n, NULL, &err), REFENC_OK, "%s", err.message);
    rb_golden_free(&g);
    remove(whole);
    remove(cfg);
}

/* dir/i.safetensors: in.x (2, 3, 8) of finite values but element x_at set to x_v (x_at >= 48:
 * none), and, when given, in.key_padding_mask (2, 3) and in.attn_mask (3, 3). */
static void inputs_file(const char *dir, size_t x_at, double x_v, const uint8_t *pad, const double *attn)
{
    double x[48];
    for (size_t i = 0; i < 48; i++)
        x[i] = 0.375 * (double)((i * 7) % 11) - 1.5;
    if (x_at < 48)
        x[x_at] = x_v;
    refenc_st_entry e[3] = {{.name = "in.x", .dtype = REFENC_ST_F64, .ndim = 3, .shape = {2, 3, 8}, .data = x}};
    size_t n = 1;
    if (pad != NULL)
        e[n++] = (refenc_st_entry){.name = "in.key_padding_mask", .dtype = REFENC_ST_BOOL, .ndim = 2,
                                   .shape = {2, 3}, .data = pad};
    if (attn != NULL)
        e[n++] = (refenc_st_entry){.name = "in.attn_mask", .dtype = REFENC_ST_F64, .ndim = 2, .shape = {3, 3},
                                   .data = attn};
    char path[RB_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/i.safetensors", dir);
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, e, n, NULL, &err), REFENC_OK, "%s", err.message);
}

/* Non-finite weights or inputs are refused before the oracle runs, naming the tensor and the flat
 * index; so are inputs under which the required output keeps no compared element (every query
 * row padded or seeing no key), naming the input field.  Before, each made a golden whose
 * expected values were NaN, or one certify passed on any results having compared nothing. */
Test(golden_errors, ground_truth_is_never_made_from_bad_input, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], pad_cfg[RB_PATH_MAX + 32], w[RB_PATH_MAX + 32];
    char in[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "c.json", BI_CONFIG);
    rb_text_file(pad_cfg, sizeof pad_cfg, dir, "padded.json",
              "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1}, "
              "\"input\": {\"batch\": 2, \"seq_len\": 3, \"padding\": [3, 3]}}");
    snprintf(w, sizeof w, "%s/w.safetensors", dir);
    snprintf(in, sizeof in, "%s/i.safetensors", dir);
    snprintf(out, sizeof out, "%s/case.safetensors", dir);
    const int files = 4; /* c.json, padded.json, w, i */
#define GOLD(...) {"refenc", "golden", "--config", cfg, __VA_ARGS__, "--out-file", out, NULL}
    const uint8_t no_pad[6] = {0}, all_pad[6] = {1, 1, 1, 1, 1, 1};
    const double minus_inf = -INFINITY;
    const double all_masked[9] = {minus_inf, minus_inf, minus_inf, minus_inf, minus_inf, minus_inf,
                                  minus_inf, minus_inf, minus_inf};
    /* each query sees key 0 only: item 1 with key 0 padded sees nothing; item 0 is all padding */
    const double only_key0[9] = {0.5, minus_inf, minus_inf, 0.25, minus_inf, minus_inf, 0.125, minus_inf, minus_inf};
    const uint8_t pad_item0_and_key0[6] = {1, 1, 1, 1, 0, 0};
    const double nan_mask[9] = {0, 0, 0, 0, NAN, 0, 0, 0, 0};

    /* weights: NaN, +inf and -inf, each named with its index */
    static const struct {
        const char *what, *param;
        size_t at;
        float v;
        const char *fragment;
    } bad_w[] = {
        {"a NaN weight", "layers.0.linear1.weight", 29, NAN,
         "parameter 'layers.0.linear1.weight' element 29 (row 3, column 5) is nan"},
        {"an infinite bias", "layers.0.norm2.bias", 6, INFINITY, "parameter 'layers.0.norm2.bias' element 6 is inf"},
        {"a -inf weight", "layers.0.self_attn.in_proj_weight", 0, -INFINITY,
         "parameter 'layers.0.self_attn.in_proj_weight' element 0 (row 0, column 0) is -inf"},
    };
    for (size_t i = 0; i < sizeof bad_w / sizeof bad_w[0]; i++) {
        weights_file(dir, bad_w[i].param, bad_w[i].at, bad_w[i].v);
        const refusal r = {bad_w[i].what, GOLD("--weights", w), {"--weights", bad_w[i].fragment, NULL}};
        expect_refusals(&r, 1, dir, files - 1);
    }
    weights_file(dir, NULL, 0, 0);
    inputs_file(dir, 13, NAN, NULL, NULL);
    const refusal x_nan = {"a NaN input", GOLD("--inputs", in), {"i.safetensors: in.x element 13 (of item 0) is nan", NULL}};
    expect_refusals(&x_nan, 1, dir, files);
    inputs_file(dir, 30, -INFINITY, NULL, NULL);
    const refusal x_inf = {"a -inf input", GOLD("--inputs", in), {"in.x element 30 (of item 1) is -inf", NULL}};
    expect_refusals(&x_inf, 1, dir, files);
    inputs_file(dir, 99, 0, NULL, nan_mask);
    const refusal m_nan = {"a NaN in the additive mask", GOLD("--inputs", in),
                           {"i.safetensors: input: in.attn_mask[1][1] = nan", NULL}};
    expect_refusals(&m_nan, 1, dir, files);

    /* nothing compared: every position padded (config and file), every key masked, both together */
    const refusal pad_all = {"padding [3, 3]", {"refenc", "golden", "--config", pad_cfg, "--out-file", out, NULL},
                             {"padded.json: in.key_padding_mask (input.padding) leaves no element of the required "
                              "output compared", NULL}};
    expect_refusals(&pad_all, 1, dir, files);
    inputs_file(dir, 99, 0, all_pad, NULL);
    const refusal ones = {"an all-ones padding mask", GOLD("--inputs", in),
                          {"i.safetensors: in.key_padding_mask leaves no element of the required output compared",
                           NULL}};
    expect_refusals(&ones, 1, dir, files);
    inputs_file(dir, 99, 0, NULL, all_masked);
    const refusal masked = {"an all -inf attention mask", GOLD("--inputs", in),
                            {"i.safetensors: in.attn_mask leaves no element of the required output compared", NULL}};
    expect_refusals(&masked, 1, dir, files);
    inputs_file(dir, 99, 0, pad_item0_and_key0, only_key0);
    const refusal both = {"padding and mask together", GOLD("--inputs", in),
                          {"in.key_padding_mask and in.attn_mask leaves no element", NULL}};
    expect_refusals(&both, 1, dir, files);
#undef GOLD

    /* negative controls: finite weights and inputs with -inf in the mask, one query that sees a
     * key (item 1's query 0 with key 0 unpadded), an unpadded position under the config */
    inputs_file(dir, 99, 0, no_pad, only_key0);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--weights", w, "--inputs", in, "--out-file", out,
                            "--quiet", NULL});
    cr_expect(rb_exists(out));
    remove(out);
    const uint8_t one_open[6] = {1, 1, 1, 0, 1, 1};
    inputs_file(dir, 99, 0, one_open, NULL);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--inputs", in, "--out-file", out, "--quiet", NULL});
    cr_expect(rb_exists(out));
    remove(out);
    rb_tmpdir_remove(dir);
}

/* --shard K/N reads K and N as decimal numbers, leading zeros allowed (as
 * a job array may format its index: 01/12 is shard 1 of 12); a sign, a
 * space, K 0 or K > N are refused (the negative controls). */
#include "../../ref/golden/parts.h"

Test(golden_errors, a_shard_spec_is_two_decimal_numbers)
{
    size_t k = 0, n = 0;
    cr_expect(golden_parse_shard("01/12", &k, &n) == 1 && k == 1 && n == 12, "01/12: %zu/%zu", k, n);
    cr_expect(golden_parse_shard("3/3", &k, &n) == 1 && k == 3 && n == 3, "3/3: %zu/%zu", k, n);
    const char *bad[] = {"0/2", "00/2", "+1/2", "-1/2", " 1/2", "1/+2", "1/-2", "1/ 2", "3/2", "1/2x", "1", "", "/2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(golden_parse_shard(bad[i], &k, &n), 0, "'%s' accepted", bad[i]);
}
