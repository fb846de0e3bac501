/* The golden directory is not trusted blindly (docs/verdict.md, "What a
 * certificate proves"): certify uses a case file only if its bytes have the
 * sha256 the manifest lists and its metadata names the listed case; the
 * manifest's names cannot reach outside the golden and results directories;
 * and the manifest's own sha256 is in every report, for a CI to pin.
 *
 * Each tampering of the issue that made wrong results PASS is refused by
 * default (exit 2, naming the file); its control shows that the same
 * tampered golden, listed again in a manifest of its own, does make those
 * results pass, and that the manifest's printed checksum then changes: the
 * check is what stops it, and pinning the manifest is what catches a
 * re-listed one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <nettle/sha2.h>

#include "robust.h"

#define CASE "act_gelu" /* out.output (4, 16), required, no don't-care mask */

typedef struct {
    char dir[RB_PATH_MAX];
    char golden[RB_PATH_MAX];
    char results[RB_PATH_MAX + 16];
    char rfile[RB_PATH_MAX + 64];
    char manifest[RB_PATH_MAX + 32];
} setup;

static void make_setup(setup *s)
{
    rb_tmpdir(s->dir);
    rb_golden_dir(s->dir, CASE, s->golden);
    snprintf(s->results, sizeof s->results, "%s/results", s->dir);
    cr_assert_eq(mkdir(s->results, 0700), 0);
    snprintf(s->rfile, sizeof s->rfile, "%s/" CASE ".safetensors", s->results);
    snprintf(s->manifest, sizeof s->manifest, "%s/manifest.json", s->dir);
}

/* The sha256 of a file, computed here with nettle's streaming interface
 * (not refenc's), as hex. */
static void sha256_of(char hex[65], const char *path)
{
    size_t n;
    unsigned char *b = rb_read_file(path, &n);
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    for (size_t at = 0; at < n; at += 1000)
        sha256_update(&ctx, n - at < 1000 ? n - at : 1000, b + at);
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    free(b);
}

/* The reference's out.output of CASE, each value moved by +1e-3 (10^8 F64
 * tolerances): wrong results. */
static void wrong_values(double y[64])
{
    char ref[RB_PATH_MAX + 32], dir[RB_PATH_MAX];
    rb_tmpdir(dir);
    snprintf(ref, sizeof ref, "%s/r.safetensors", dir);
    rb_reference_results(CASE, ref);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, ref, &err), REFENC_OK, "%s", err.message);
    const refenc_st_tensor *t = refenc_st_find(&f, "out.output");
    cr_assert(t != NULL && t->numel == 64);
    cr_assert_eq(refenc_st_to_f64(y, &f, t, &err), REFENC_OK);
    refenc_st_free(&f);
    for (size_t i = 0; i < 64; i++)
        y[i] += 1e-3;
    rb_tmpdir_remove(dir);
}

static void write_results(const setup *s, const double *y)
{
    refenc_st_entry e = {"out.output", REFENC_ST_F64, 2, {4, 16}, y};
    refenc_error err;
    cr_assert_eq(refenc_st_write(s->rfile, &e, y != NULL, NULL, &err), REFENC_OK, "%s", err.message);
}

static rb_result certify(const setup *s, const char *json)
{
    const char *args[] = {"refenc", "certify", "--golden", s->dir, "--results", s->results, "--case", CASE,
                          json ? "--json" : NULL, json, NULL};
    return rb_run(args);
}

typedef enum { EXPECTED_VALUES, TOLERANCE_SCALE, DONT_CARE_ALL, NOT_REQUIRED, N_TAMPERINGS } tampering;
static const char *const tampering_name[] = {"expected values replaced", "tolerance scale 1e300",
                                             "an all-ones don't-care mask", "the output marked not required"};

/* The golden of CASE tampered in one way, and results that pass against it
 * but are wrong. */
static void tamper(const setup *s, tampering t)
{
    rb_golden g;
    rb_golden_load(&g, CASE);
    double y[64];
    wrong_values(y);
    switch (t) {
    case EXPECTED_VALUES:
        memcpy(rb_golden_data(&g, "out.output"), y, sizeof y);
        break;
    case TOLERANCE_SCALE:
        rb_golden_set_meta(&g, "tolerance", "{\"scale\": {\"F64\": 1e300}, \"reason\": \"trust me\"}");
        break;
    case DONT_CARE_ALL: {
        const size_t shape[2] = {4, 16};
        memset(rb_golden_reshape(&g, "dontcare.out.output", REFENC_ST_BOOL, 2, shape), 1, 64);
        break;
    }
    default:
        rb_golden_set_meta(&g, "outputs", "[{\"name\": \"out.output\", \"required\": false}]");
    }
    rb_golden_write(&g, s->golden);
    rb_golden_free(&g);
    write_results(s, t == NOT_REQUIRED ? NULL : y);
}

Test(golden_trust, a_tampered_case_is_refused_by_default)
{
    for (int t = 0; t < N_TAMPERINGS; t++) {
        setup s;
        make_setup(&s);
        char listed[65], actual[65], json[RB_PATH_MAX + 16], frag[3 * RB_PATH_MAX];
        json_t *m = json_load_file(s.manifest, 0, NULL);
        cr_assert_not_null(m);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(m, "cases"), i, e)
            if (strcmp(json_string_value(json_object_get(e, "case")), CASE) == 0)
                snprintf(listed, sizeof listed, "%s", json_string_value(json_object_get(e, "sha256")));
        json_decref(m);
        tamper(&s, (tampering)t);
        sha256_of(actual, s.golden);
        snprintf(json, sizeof json, "%s/cert.json", s.dir);

        rb_result r = certify(&s, json);
        snprintf(frag, sizeof frag, "refenc certify: %s: sha256 %s, but the manifest lists %s for case '" CASE "': "
                 "the file was changed after its release", s.golden, actual, listed);
        rb_expect_error(&r, 2, "certify", tampering_name[t], (const char *[]){frag, NULL});
        cr_expect(strstr(r.out, "PASS") == NULL, "%s: %s", tampering_name[t], r.out);
        rb_result_free(&r);
        json_t *doc = json_load_file(json, 0, NULL);
        cr_assert_not_null(doc);
        const json_t *c0 = json_array_get(json_object_get(doc, "cases"), 0);
        cr_expect_str_eq(json_string_value(json_object_get(c0, "verdict")), "ERROR", "%s", tampering_name[t]);
        json_decref(doc);

        /* the control: the tampered case listed again, in a manifest of its
         * own, makes the wrong results pass, under another manifest checksum;
         * but for the tamperings that leave nothing compared (every element
         * don't-care, the only output optional and absent): a case passes
         * only with at least one element compared (docs/certify.md) */
        const int nothing_compared = t == DONT_CARE_ALL || t == NOT_REQUIRED;
        char before[65], after[65];
        sha256_of(before, s.manifest);
        rb_golden_relist(s.dir, CASE);
        sha256_of(after, s.manifest);
        cr_expect_str_neq(before, after);
        r = certify(&s, NULL);
        cr_expect_eq(r.status, nothing_compared, "%s, re-listed: exit %d: %s", tampering_name[t], r.status, r.err);
        if (nothing_compared)
            cr_expect(strstr(r.out, t == DONT_CARE_ALL ? "compared 0 elements" : "no output was compared") != NULL,
                      "%s: %s", tampering_name[t], r.out);
        snprintf(frag, sizeof frag, "manifest sha256 %s\n", after);
        cr_expect(strstr(r.out, frag) != NULL, "%s: the report does not show the new manifest's checksum: %s",
                  tampering_name[t], r.out);
        rb_result_free(&r);
        rb_tmpdir_remove(s.dir);
    }
}

Test(golden_trust, the_manifest_checksum_is_in_the_text_and_json_reports)
{
    setup s;
    make_setup(&s);
    rb_reference_results(CASE, s.rfile);
    char hex[65], json[RB_PATH_MAX + 16], line[128];
    sha256_of(hex, s.manifest);
    snprintf(json, sizeof json, "%s/cert.json", s.dir);
    rb_result r = certify(&s, json);
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    snprintf(line, sizeof line, "\nmanifest sha256 %s\n", hex);
    cr_expect(strstr(r.out, line) != NULL, "stdout lacks '%s': %s", line + 1, r.out);
    rb_result_free(&r);
    json_t *doc = json_load_file(json, 0, NULL);
    cr_assert_not_null(doc);
    cr_expect_str_eq(json_string_value(json_object_get(doc, "manifest_sha256")), hex);
    json_decref(doc);
    rb_tmpdir_remove(s.dir);
}

/* Writes a manifest of one entry (case, file, sha256 given as JSON text). */
static void one_entry_manifest(const setup *s, const char *entry)
{
    char text[2048];
    snprintf(text, sizeof text, "{\"format\": \"refenc-golden\", \"cases\": [%s]}", entry);
    rb_write_file(s->manifest, text, strlen(text));
}

Test(golden_trust, manifest_names_cannot_reach_outside_the_directories)
{
    setup s;
    make_setup(&s);
    char sha[65], entry[512], planted[RB_PATH_MAX + 64], frag[3 * RB_PATH_MAX];
    sha256_of(sha, s.golden);
    /* results that would pass, planted one level above --results */
    snprintf(planted, sizeof planted, "%s/outside.safetensors", s.dir);
    rb_reference_results(CASE, planted);
    const char *names[][2] = {{"../outside", CASE ".safetensors"}, {"..", CASE ".safetensors"},
                              {"a/../../outside", CASE ".safetensors"}, {CASE, "../cases/" CASE ".safetensors"},
                              {CASE, ".."}, {".hidden", CASE ".safetensors"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(entry, sizeof entry, "{\"case\": \"%s\", \"file\": \"%s\", \"sha256\": \"%s\"}", names[i][0],
                 names[i][1], sha);
        one_entry_manifest(&s, entry);
        const char *args[] = {"refenc", "certify", "--golden", s.dir, "--results", s.results, NULL};
        rb_result r = rb_run(args);
        snprintf(frag, sizeof frag, "refenc certify: %s: cases[0]", s.manifest);
        rb_expect_error(&r, 2, "certify", names[i][0], (const char *[]){frag, NULL});
        cr_expect(strstr(r.out, "PASS") == NULL, "%s", r.out);
        rb_result_free(&r);
    }
    /* the control: the same entry with the plain name passes */
    rb_reference_results(CASE, s.rfile);
    snprintf(entry, sizeof entry, "{\"case\": \"" CASE "\", \"file\": \"" CASE ".safetensors\", \"sha256\": \"%s\"}",
             sha);
    one_entry_manifest(&s, entry);
    const char *args[] = {"refenc", "certify", "--golden", s.dir, "--results", s.results, NULL};
    rb_result r = rb_run(args);
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    rb_tmpdir_remove(s.dir);
}

Test(golden_trust, an_unlisted_or_misnamed_case_is_refused)
{
    setup s;
    make_setup(&s);
    rb_reference_results(CASE, s.rfile);
    char sha[65], entry[512], frag[3 * RB_PATH_MAX];
    sha256_of(sha, s.golden);
    /* no checksum listed */
    one_entry_manifest(&s, "{\"case\": \"" CASE "\", \"file\": \"" CASE ".safetensors\"}");
    rb_result r = certify(&s, NULL);
    snprintf(frag, sizeof frag, "refenc certify: %s: cases[0] (case '" CASE "') lists no \"sha256\"", s.manifest);
    rb_expect_error(&r, 2, "certify", "no sha256", (const char *[]){frag, NULL});
    rb_result_free(&r);

    /* the right bytes under another case's name (its results file then
     * being this case's) */
    char other[RB_PATH_MAX + 64];
    snprintf(other, sizeof other, "%s/softmax_masked.safetensors", s.results);
    rb_copy_file(s.rfile, other);
    snprintf(entry, sizeof entry,
             "{\"case\": \"softmax_masked\", \"file\": \"" CASE ".safetensors\", \"sha256\": \"%s\"}", sha);
    one_entry_manifest(&s, entry);
    const char *args[] = {"refenc", "certify", "--golden", s.dir, "--results", s.results, NULL};
    r = rb_run(args);
    snprintf(frag, sizeof frag, "refenc certify: %s: its __metadata__.case is '" CASE "', but the manifest lists it "
             "as case 'softmax_masked'", s.golden);
    rb_expect_error(&r, 2, "certify", "a case under another name", (const char *[]){frag, NULL});
    cr_expect(strstr(r.out, "PASS") == NULL, "%s", r.out);
    rb_result_free(&r);
    rb_tmpdir_remove(s.dir);
}
