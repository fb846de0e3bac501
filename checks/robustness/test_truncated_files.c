/* Truncated files, end to end: a results file and a golden file cut at every
 * offset of their header (the 8-byte length included) and at several in
 * their data, given to `refenc certify` and `refenc run --case`.  Each run
 * must exit 2 with one message naming the file, the tensor (once the header
 * is whole) and the byte offsets, write no partial output, and never pass.
 *
 * The expected message of each offset is derived from the intact file (its
 * header length, its entries in header order with their data offsets and
 * the byte where each entry's key starts) and the rules of
 * docs/golden-format.md: too short for the length, a header longer than what
 * follows, or the first entry (in header order) whose data is cut.
 *
 * The offsets are split over TRUNC_CHUNKS parameterized runs so that
 * Criterion spreads them over its jobs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>

#include "robust.h"

#define TRUNC_CHUNKS 8
#define MAX_ENTRIES 64

/* The small fixture case used here: one output, two tensors in the golden. */
#define CASE "act_gelu"

typedef struct {
    char name[128];
    size_t begin, end; /* data_offsets */
    size_t key_at;     /* file offset of the entry's key (its opening quote) */
} entry;

typedef struct {
    unsigned char *bytes;
    size_t size, N; /* file size, header length */
    size_t n;
    entry e[MAX_ENTRIES]; /* tensor entries, in header order */
} layout;

static void read_layout(layout *l, const char *path)
{
    memset(l, 0, sizeof *l);
    l->bytes = rb_read_file(path, &l->size);
    l->N = (size_t)rb_header_length(l->bytes, l->size);
    cr_assert(8 + l->N <= l->size, "%s: bad fixture", path);
    const char *hdr = (const char *)l->bytes + 8;
    json_t *root = json_loadb(hdr, l->N, JSON_REJECT_DUPLICATES, NULL);
    cr_assert(json_is_object(root), "%s: the header is not a JSON object", path);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) { /* jansson iterates in insertion (file) order */
        if (strcmp(key, "__metadata__") == 0)
            continue;
        cr_assert_lt(l->n, (size_t)MAX_ENTRIES);
        entry *e = &l->e[l->n++];
        snprintf(e->name, sizeof e->name, "%s", key);
        const json_t *off = json_object_get(v, "data_offsets");
        e->begin = (size_t)json_integer_value(json_array_get(off, 0));
        e->end = (size_t)json_integer_value(json_array_get(off, 1));
        char quoted[160];
        snprintf(quoted, sizeof quoted, "\"%s\":", key);
        const char *p = NULL;
        for (const char *s = hdr; s < hdr + l->N && (s = memchr(s, '"', (size_t)(hdr + l->N - s))) != NULL; s++)
            if ((size_t)(hdr + l->N - s) >= strlen(quoted) && memcmp(s, quoted, strlen(quoted)) == 0) {
                p = s;
                break;
            }
        cr_assert_not_null(p, "%s: key %s not found in the header", path, quoted);
        e->key_at = 8 + (size_t)(p - hdr);
    }
    json_decref(root);
    cr_assert_gt(l->n, (size_t)0);
}

/* The message for the file `path` cut to k bytes. */
static void expected_message(char *out, size_t cap, const layout *l, const char *path, size_t k)
{
    const size_t data_start = 8 + l->N, d = k - data_start;
    if (k < 8) {
        snprintf(out, cap, "%s: file is %zu bytes, too short for the 8-byte header length at byte 0",
                 path, k);
        return;
    }
    if (k < data_start) {
        snprintf(out, cap, "%s: header length %zu at byte 0 exceeds the %zu bytes that follow it",
                 path, l->N, k - 8);
        return;
    }
    for (size_t i = 0; i < l->n; i++)
        if (l->e[i].end > d) {
            snprintf(out, cap,
                     "%s: tensor '%s' (header entry at byte %zu): data_offsets [%zu, %zu] end past "
                     "the data buffer, which has %zu bytes (file bytes %zu to %zu)",
                     path, l->e[i].name, l->e[i].key_at, l->e[i].begin, l->e[i].end, d, data_start, k);
            return;
        }
    cr_assert_fail("offset %zu does not cut any tensor", k);
}

/* The offsets to cut at: every one of the header, and some of the data. */
static size_t cut_offsets(size_t *k, const layout *l)
{
    size_t n = 0;
    for (size_t i = 0; i <= 8 + l->N; i++)
        k[n++] = i;
    const size_t data_start = 8 + l->N, D = l->size - data_start;
    const size_t in_data[] = {data_start + 1, data_start + 7, data_start + 8, data_start + D / 2,
                              l->size - 8, l->size - 1};
    for (size_t i = 0; i < sizeof in_data / sizeof in_data[0]; i++)
        k[n++] = in_data[i];
    return n;
}

/* The --json certificate after an error: complete, verdict ERROR for the
 * case and in the summary, the case's note the message; no temporary file. */
static void expect_error_certificate(const char *report, const char *dir, const char *message)
{
    json_error_t je;
    json_t *doc = json_load_file(report, 0, &je);
    cr_assert_not_null(doc, "%s is not a whole JSON document: %s", report, je.text);
    const json_t *c = json_array_get(json_object_get(doc, "cases"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc, "summary"), "verdict")),
                     "ERROR");
    cr_expect_str_eq(json_string_value(json_object_get(c, "verdict")), "ERROR");
    cr_expect_str_eq(json_string_value(json_object_get(c, "note")), message);
    json_decref(doc);
    cr_expect(!rb_has_temporary_file(dir), "a temporary file is left in %s", dir);
}

ParameterizedTestParameters(truncated, results_file_cut_anywhere_is_a_format_error)
{
    static int chunks[TRUNC_CHUNKS];
    for (int i = 0; i < TRUNC_CHUNKS; i++)
        chunks[i] = i;
    return cr_make_param_array(int, chunks, TRUNC_CHUNKS);
}

/* certify --golden G --results R: R/act_gelu.safetensors cut at k */
ParameterizedTest(int *chunk, truncated, results_file_cut_anywhere_is_a_format_error)
{
    char dir[RB_PATH_MAX], results[RB_PATH_MAX + 32], good[RB_PATH_MAX + 64], bad[RB_PATH_MAX + 64],
        report[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(results, sizeof results, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    snprintf(good, sizeof good, "%s/intact.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/" CASE ".safetensors", results);
    snprintf(report, sizeof report, "%s/report.json", dir);
    rb_reference_results(CASE, good);
    layout l;
    read_layout(&l, good);
    size_t k[4096];
    cr_assert_lt(l.N + 16, sizeof k / sizeof k[0]);
    const size_t n = cut_offsets(k, &l);

    for (size_t i = (size_t)*chunk; i < n; i += TRUNC_CHUNKS) {
        rb_write_file(bad, l.bytes, k[i]);
        unlink(report);
        const char *args[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results,
                              "--case", CASE, "--json", report, NULL};
        rb_result r = rb_run(args);
        char msg[1024], what[64];
        expected_message(msg, sizeof msg, &l, bad, k[i]);
        snprintf(what, sizeof what, "results cut at byte %zu", k[i]);
        const char *frag[] = {msg, NULL};
        rb_expect_error(&r, 2, "certify", what, frag);
        cr_expect(strstr(r.out, "PASS") == NULL, "%s: stdout says PASS: %s", what, r.out);
        expect_error_certificate(report, dir, msg);
        rb_result_free(&r);
    }
    free(l.bytes);
    rb_tmpdir_remove(dir);
}

ParameterizedTestParameters(truncated, golden_file_cut_anywhere_is_a_format_error)
{
    static int chunks[TRUNC_CHUNKS];
    for (int i = 0; i < TRUNC_CHUNKS; i++)
        chunks[i] = i;
    return cr_make_param_array(int, chunks, TRUNC_CHUNKS);
}

/* The golden file cut at k: certify (with intact results) and run --case
 * both refuse it; run --case leaves no results file. */
ParameterizedTest(int *chunk, truncated, golden_file_cut_anywhere_is_a_format_error)
{
    char dir[RB_PATH_MAX], gcase[RB_PATH_MAX], results[RB_PATH_MAX + 32], out[RB_PATH_MAX + 64],
        intact[RB_PATH_MAX + 64], report[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    rb_golden_dir(dir, CASE, gcase);
    snprintf(results, sizeof results, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    snprintf(intact, sizeof intact, "%s/" CASE ".safetensors", results);
    snprintf(out, sizeof out, "%s/out.safetensors", results);
    snprintf(report, sizeof report, "%s/report.json", dir);
    rb_reference_results(CASE, intact);
    layout l;
    read_layout(&l, gcase);
    size_t k[4096];
    cr_assert_lt(l.N + 16, sizeof k / sizeof k[0]);
    const size_t n = cut_offsets(k, &l);

    for (size_t i = (size_t)*chunk; i < n; i += TRUNC_CHUNKS) {
        rb_write_file(gcase, l.bytes, k[i]);
        char msg[1024], what[64];
        expected_message(msg, sizeof msg, &l, gcase, k[i]);
        const char *frag[] = {msg, NULL};

        unlink(report);
        const char *certify[] = {"refenc", "certify", "--golden", dir, "--results", results,
                                 "--case", CASE, "--json", report, NULL};
        rb_result r = rb_run(certify);
        snprintf(what, sizeof what, "certify, golden cut at byte %zu", k[i]);
        rb_expect_error(&r, 2, "certify", what, frag);
        cr_expect(strstr(r.out, "PASS") == NULL, "%s: stdout says PASS: %s", what, r.out);
        expect_error_certificate(report, dir, msg);
        rb_result_free(&r);

        const char *run[] = {"refenc", "run", "--case", gcase, "--out", out, NULL};
        r = rb_run(run);
        snprintf(what, sizeof what, "run --case, golden cut at byte %zu", k[i]);
        rb_expect_error(&r, 2, "run", what, frag);
        cr_expect_str_empty(r.out, "%s: stdout: %s", what, r.out);
        cr_expect(!rb_exists(out), "%s: %s was written", what, out);
        cr_expect(!rb_has_temporary_file(results), "%s: a temporary file is left", what);
        rb_result_free(&r);
    }
    free(l.bytes);
    rb_tmpdir_remove(dir);
}
