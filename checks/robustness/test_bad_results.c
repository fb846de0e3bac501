/* Results files wrong in one way, through `refenc certify` as a user runs
 * it (docs/cli.md): a malformed file is a format error (exit 2), a file that
 * reads but does not match the case is a failure (exit 1) or, when it holds a
 * tensor that is not an output of the case or has a dtype that is not a
 * float, a format error (exit 2).  Every error is one line on stderr naming
 * the file, the tensor and the byte offset; every run writes its --json
 * certificate whole (verdict FAIL or ERROR), leaves no temporary file, and
 * never says PASS.  Positive controls: the reference's own results in F64,
 * and rounded to F32, F16 and BF16, pass.
 *
 * The case is the fixture's act_gelu: one required output, out.output
 * (4, 16), GELU on a grid over [-6, 6]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/io/safetensors.h"
#include "robust.h"

#define CASE "act_gelu"
#define NUMEL 64

typedef struct {
    char dir[RB_PATH_MAX];
    char results[RB_PATH_MAX + 16]; /* the results directory               */
    char file[RB_PATH_MAX + 64];    /* results/act_gelu.safetensors          */
    char report[RB_PATH_MAX + 16];  /* the --json certificate                */
    double ref[NUMEL];              /* the reference's out.output            */
} setup;

static void make_setup(setup *s)
{
    rb_tmpdir(s->dir);
    snprintf(s->results, sizeof s->results, "%s/results", s->dir);
    cr_assert_eq(mkdir(s->results, 0700), 0);
    snprintf(s->file, sizeof s->file, "%s/" CASE ".safetensors", s->results);
    snprintf(s->report, sizeof s->report, "%s/report.json", s->dir);
    rb_reference_results(CASE, s->file);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, s->file, &err), REFENC_OK, "%s", err.message);
    const refenc_st_tensor *t = refenc_st_find(&f, "out.output");
    cr_assert(t != NULL && t->numel == NUMEL);
    cr_assert_eq(refenc_st_to_f64(s->ref, &f, t, &err), REFENC_OK);
    refenc_st_free(&f);
    unlink(s->file);
}

/* File offset of needle in a header written by rb_write_safetensors. */
static size_t at(const char *header, const char *needle)
{
    const char *p = strstr(header, needle);
    cr_assert_not_null(p, "'%s' not in the header", needle);
    return 8 + (size_t)(p - header);
}

/* The verdict in the certificate. */
static void expect_certificate(const setup *s, const char *verdict, const char *what)
{
    json_error_t je;
    json_t *doc = json_load_file(s->report, 0, &je);
    cr_assert_not_null(doc, "%s: %s is not a whole JSON document: %s", what, s->report, je.text);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc, "summary"), "verdict")),
                     verdict, "%s: summary verdict", what);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(doc, "cases"), 0),
                                                       "verdict")),
                     verdict, "%s: case verdict", what);
    json_decref(doc);
    cr_expect(!rb_has_temporary_file(s->dir) && !rb_has_temporary_file(s->results),
              "%s: a temporary file is left", what);
}

static rb_result certify(const setup *s)
{
    unlink(s->report);
    const char *args[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", s->results,
                          "--case", CASE, "--json", s->report, NULL};
    return rb_run(args);
}

/* A format error: exit 2, one line with the file and the fragments, an
 * ERROR certificate. */
static void expect_format_error(const setup *s, const char *what, const char *const *fragments)
{
    rb_result r = certify(s);
    const char *with_file[8] = {s->file};
    size_t n = 1;
    for (size_t i = 0; fragments[i] != NULL && n < 7; i++)
        with_file[n++] = fragments[i];
    with_file[n] = NULL;
    rb_expect_error(&r, 2, "certify", what, with_file);
    /* no line says PASS: a name that holds a newline and PASS is escaped, never a line of its own */
    cr_expect(strstr(r.out, "\nPASS") == NULL && strstr(r.out, " PASS\n") == NULL, "%s: stdout says PASS: %s",
              what, r.out);
    cr_expect(strstr(r.out, " ERROR\n") != NULL, "%s: stdout does not show the case as ERROR: %s", what, r.out);
    expect_certificate(s, "ERROR", what);
    rb_result_free(&r);
}

/* A failure: exit 1, nothing on stderr, stdout says FAIL and the fragments,
 * a FAIL certificate. */
static void expect_failure(const setup *s, const char *what, const char *const *fragments)
{
    rb_result r = certify(s);
    cr_expect_eq(r.status, 1, "%s: exit %d, want 1; stderr: %s", what, r.status, r.err);
    cr_expect_str_empty(r.err, "%s: stderr: %s", what, r.err);
    cr_expect(strstr(r.out, CASE) != NULL && strstr(r.out, "FAIL") != NULL, "%s: stdout: %s", what, r.out);
    cr_expect(strstr(r.out, "summary: 1 case, 0 passed, 1 failed: FAIL") != NULL, "%s: %s", what, r.out);
    for (size_t i = 0; fragments[i] != NULL; i++)
        cr_expect(strstr(r.out, fragments[i]) != NULL, "%s: stdout lacks '%s': %s", what, fragments[i],
                  r.out);
    expect_certificate(s, "FAIL", what);
    rb_result_free(&r);
}

static void write_results(const setup *s, const refenc_st_entry *e, size_t n)
{
    refenc_error err;
    cr_assert_eq(refenc_st_write(s->file, e, n, NULL, &err), REFENC_OK, "%s", err.message);
}

/* The file offset of a tensor's data in a results file. */
static size_t data_at(const setup *s, const char *name)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, s->file, &err), REFENC_OK, "%s", err.message);
    const refenc_st_tensor *t = refenc_st_find(&f, name);
    cr_assert_not_null(t);
    const size_t off = t->file_offset;
    refenc_st_free(&f);
    return off;
}

/* ---- the container ---------------------------------------------------------------- */

static const char good_header[] = "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,16],\"data_offsets\":[0,512]}}";

Test(bad_results, the_reference_results_pass_and_a_hand_built_file_too)
{
    setup s;
    make_setup(&s);
    rb_write_safetensors(s.file, good_header, s.ref, sizeof s.ref);
    rb_result r = certify(&s);
    cr_expect_eq(r.status, 0, "exit %d: %s%s", r.status, r.out, r.err);
    cr_expect(strstr(r.out, "summary: 1 case, 1 passed, 0 failed: PASS") != NULL, "%s", r.out);
    expect_certificate(&s, "PASS", "the reference");
    rb_result_free(&r);
    rb_tmpdir_remove(s.dir);
}

Test(bad_results, header_length_larger_than_the_file)
{
    setup s;
    make_setup(&s);
    const size_t h = strlen(good_header), size = 8 + h + sizeof s.ref;
    unsigned char *b = malloc(size);
    cr_assert_not_null(b);
    const uint64_t lengths[] = {size - 8 + 1, (uint64_t)1 << 63, UINT64_MAX};
    const char *shown[] = {NULL, "9223372036854775808", "18446744073709551615"};
    for (size_t i = 0; i < 3; i++) {
        for (int k = 0; k < 8; k++)
            b[k] = (unsigned char)(lengths[i] >> (8 * k));
        memcpy(b + 8, good_header, h);
        memcpy(b + 8 + h, s.ref, sizeof s.ref);
        rb_write_file(s.file, b, size);
        char frag[160], len[32];
        snprintf(len, sizeof len, "%llu", (unsigned long long)lengths[i]);
        cr_assert(shown[i] == NULL || strcmp(len, shown[i]) == 0);
        snprintf(frag, sizeof frag, ": header length %s at byte 0 exceeds the %zu bytes that follow it", len,
                 size - 8);
        const char *f[] = {frag, NULL};
        expect_format_error(&s, len, f);
    }
    free(b);
    rb_tmpdir_remove(s.dir);
}

Test(bad_results, header_not_json_not_an_object_not_utf8)
{
    setup s;
    make_setup(&s);
    char f1[200], f2[200];
    /* jansson stops just past the token it cannot read */
    static const char not_json[] = "{\"out.output\":nope}";
    rb_write_safetensors(s.file, not_json, s.ref, sizeof s.ref);
    snprintf(f1, sizeof f1, ": header is not valid JSON near byte %zu: invalid token near 'nope'",
             at(not_json, "nope") + 4);
    expect_format_error(&s, "not JSON", (const char *[]){f1, NULL});

    static const char trailing[] =
        "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,16],\"data_offsets\":[0,512]},}";
    rb_write_safetensors(s.file, trailing, s.ref, sizeof s.ref);
    snprintf(f1, sizeof f1, ": header is not valid JSON near byte %zu", at(trailing, ",}") + 2);
    expect_format_error(&s, "a trailing comma", (const char *[]){f1, NULL});

    static const char inner[] = "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,16,],\"data_offsets\":[0,512]}}";
    rb_write_safetensors(s.file, inner, s.ref, sizeof s.ref);
    snprintf(f1, sizeof f1, ": header is not valid JSON near byte %zu, in the entry of 'out.output' (at byte 9)",
             at(inner, ",]") + 2);
    expect_format_error(&s, "an error inside an entry", (const char *[]){f1, NULL});

    rb_write_safetensors(s.file, "[{\"out.output\":{}}]", s.ref, sizeof s.ref);
    expect_format_error(&s, "an array",
                        (const char *[]){": header does not start with '{' (byte 0x5b at byte 8); it must be a JSON object",
                                         NULL});
    rb_write_safetensors(s.file, "", s.ref, sizeof s.ref);
    expect_format_error(&s, "an empty header",
                        (const char *[]){": header is empty (header length 0 at byte 0); it must be a JSON object",
                                         NULL});

    static const char latin1[] = "{\"out.outp\xfbt\":{\"dtype\":\"F64\",\"shape\":[4,16],\"data_offsets\":[0,512]}}";
    rb_write_safetensors(s.file, latin1, s.ref, sizeof s.ref);
    snprintf(f1, sizeof f1, ": header is not valid UTF-8: byte 0xfb at byte %zu", at(latin1, "\xfb"));
    expect_format_error(&s, "not UTF-8", (const char *[]){f1, NULL});

    static const char latin1_inner[] = "{\"out.output\":{\"dtype\":\"F6\xe9\",\"shape\":[4,16],\"data_offsets\":[0,512]}}";
    rb_write_safetensors(s.file, latin1_inner, s.ref, sizeof s.ref);
    snprintf(f1, sizeof f1, ": header is not valid UTF-8: byte 0xe9 at byte %zu", at(latin1_inner, "\xe9"));
    snprintf(f2, sizeof f2, "in the entry of 'out.output' (at byte 9)");
    expect_format_error(&s, "not UTF-8 in an entry", (const char *[]){f1, f2, NULL});
    rb_tmpdir_remove(s.dir);
}

Test(bad_results, data_offsets_out_of_range_overlapping_or_not_matching_the_shape)
{
    setup s;
    make_setup(&s);
    char f1[300];
    static const char past[] = "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,16],\"data_offsets\":[0,520]}}";
    rb_write_safetensors(s.file, past, s.ref, sizeof s.ref);
    snprintf(f1, sizeof f1,
             ": tensor 'out.output' (header entry at byte 9): data_offsets [0, 520] end past the data buffer, "
             "which has 512 bytes (file bytes %zu to %zu)",
             8 + strlen(past), 8 + strlen(past) + 512);
    expect_format_error(&s, "past the end", (const char *[]){f1, NULL});

    static const char backwards[] = "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,16],\"data_offsets\":[512,0]}}";
    rb_write_safetensors(s.file, backwards, s.ref, sizeof s.ref);
    expect_format_error(&s, "begin after end",
                        (const char *[]){": tensor 'out.output' (header entry at byte 9): data_offsets [512, 0]: "
                                         "begin is after end",
                                         NULL});

    static const char negative[] = "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,16],\"data_offsets\":[-8,504]}}";
    rb_write_safetensors(s.file, negative, s.ref, sizeof s.ref);
    expect_format_error(&s, "negative offset",
                        (const char *[]){": tensor 'out.output' (header entry at byte 9): data_offsets [-8, 504] is negative",
                                         NULL});

    static const char mismatch[] = "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,16],\"data_offsets\":[0,256]}}";
    rb_write_safetensors(s.file, mismatch, s.ref, 256);
    expect_format_error(&s, "shape x dtype is not the byte length",
                        (const char *[]){": tensor 'out.output' (header entry at byte 9): data_offsets [0, 256] but "
                                         "shape [4, 16] of F64 needs 512 bytes",
                                         NULL});

    static const char f32_as_f64[] = "{\"out.output\":{\"dtype\":\"F32\",\"shape\":[4,16],\"data_offsets\":[0,512]}}";
    rb_write_safetensors(s.file, f32_as_f64, s.ref, sizeof s.ref);
    expect_format_error(&s, "F32 with the bytes of F64",
                        (const char *[]){"data_offsets [0, 512] but shape [4, 16] of F32 needs 256 bytes", NULL});

    /* out.x [256, 768] overlaps out.output [0, 512] */
    static const char overlap[] =
        "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,16],\"data_offsets\":[0,512]},"
        "\"out.x\":{\"dtype\":\"F64\",\"shape\":[64],\"data_offsets\":[256,768]}}";
    double data[96] = {0};
    rb_write_safetensors(s.file, overlap, data, sizeof data);
    const size_t ds = 8 + strlen(overlap);
    snprintf(f1, sizeof f1,
             ": tensor 'out.x' (header entry at byte %zu): data_offsets [256, 768] (file bytes %zu to %zu) overlap "
             "those of tensor 'out.output' [0, 512]",
             at(overlap, "\"out.x\""), ds + 256, ds + 768);
    expect_format_error(&s, "overlapping tensors", (const char *[]){f1, NULL});

    /* a hole: bytes [512, 520) belong to no tensor */
    rb_write_safetensors(s.file, good_header, data, 520);
    snprintf(f1, sizeof f1, ": data bytes [512, 520) (file bytes %zu to %zu) belong to no tensor",
             8 + strlen(good_header) + 512, 8 + strlen(good_header) + 520);
    expect_format_error(&s, "trailing bytes", (const char *[]){f1, NULL});
    rb_tmpdir_remove(s.dir);
}

Test(bad_results, shape_overflow_unknown_dtype_duplicate_names)
{
    setup s;
    make_setup(&s);
    char f1[300];
    static const char overflow[] =
        "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,512]}}";
    rb_write_safetensors(s.file, overflow, s.ref, sizeof s.ref);
    expect_format_error(&s, "a shape whose product overflows",
                        (const char *[]){": tensor 'out.output' (header entry at byte 9): shape [4294967296, "
                                         "4294967296] of F64 overflows: its size in bytes exceeds 18446744073709551615",
                                         NULL});
    /* 2^61 elements of 8 bytes overflow too, even with a 0 dimension */
    static const char zero_overflow[] =
        "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[0,2305843009213693952],\"data_offsets\":[0,0]},"
        "\"out.y\":{\"dtype\":\"F64\",\"shape\":[4,16],\"data_offsets\":[0,512]}}";
    rb_write_safetensors(s.file, zero_overflow, s.ref, sizeof s.ref);
    expect_format_error(&s, "an overflowing shape with a 0",
                        (const char *[]){"shape [0, 2305843009213693952] of F64 overflows", NULL});

    static const char dtype[] = "{\"out.output\":{\"dtype\":\"F128\",\"shape\":[4,16],\"data_offsets\":[0,512]}}";
    rb_write_safetensors(s.file, dtype, s.ref, sizeof s.ref);
    expect_format_error(&s, "an unknown dtype",
                        (const char *[]){": tensor 'out.output' (header entry at byte 9): unknown dtype 'F128' "
                                         "(known: F64, F32, F16, BF16, I64, U8, BOOL)",
                                         NULL});

    static const char dup[] =
        "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,8],\"data_offsets\":[0,256]},"
        "\"out.output\":{\"dtype\":\"F64\",\"shape\":[4,8],\"data_offsets\":[256,512]}}";
    rb_write_safetensors(s.file, dup, s.ref, sizeof s.ref);
    snprintf(f1, sizeof f1, ": duplicate tensor name 'out.output' at byte %zu (header keys must be unique)",
             at(dup, "},\"out.output\"") + 2);
    expect_format_error(&s, "duplicate names", (const char *[]){f1, NULL});
    rb_tmpdir_remove(s.dir);
}

/* ---- files that read, but are not the case's outputs ------------------------------------ */

Test(bad_results, missing_extra_misnamed_or_wrongly_typed_outputs)
{
    setup s;
    make_setup(&s);
    char f1[300];
    const double zero[NUMEL] = {0};

    /* no tensor at all: the required output is missing, a failure */
    write_results(&s, NULL, 0);
    expect_failure(&s, "no output", (const char *[]){"out.output", "FAIL (missing)",
                                                   "required output missing from", NULL});

    /* an extra tensor next to the right one: not an output of the case */
    refenc_st_entry two[2] = {{"out.output", REFENC_ST_F64, 2, {4, 16}, s.ref},
                              {"out.bonus", REFENC_ST_F64, 1, {64}, zero}};
    write_results(&s, two, 2);
    snprintf(f1, sizeof f1, ": tensor 'out.bonus' (data at byte %zu) is not an output of case 'act_gelu'",
             data_at(&s, "out.bonus"));
    expect_format_error(&s, "an extra output", (const char *[]){f1, NULL});

    /* a gradient for a case made without --grad: named as such */
    refenc_st_entry grad[2] = {{"out.output", REFENC_ST_F64, 2, {4, 16}, s.ref},
                               {"grad.x", REFENC_ST_F64, 2, {4, 16}, s.ref}};
    write_results(&s, grad, 2);
    snprintf(f1, sizeof f1, ": tensor 'grad.x' (data at byte %zu) is a gradient, but case 'act_gelu' holds none",
             data_at(&s, "grad.x"));
    expect_format_error(&s, "a gradient", (const char *[]){f1, NULL});

    /* a misspelt name */
    refenc_st_entry misnamed = {"out.outptu", REFENC_ST_F64, 2, {4, 16}, s.ref};
    write_results(&s, &misnamed, 1);
    snprintf(f1, sizeof f1, ": tensor 'out.outptu' (data at byte %zu) is not an output of case 'act_gelu'",
             data_at(&s, "out.outptu"));
    expect_format_error(&s, "a misnamed output", (const char *[]){f1, NULL});

    /* an input given back, a name with a control character */
    refenc_st_entry input = {"in.x", REFENC_ST_F64, 2, {4, 16}, s.ref};
    write_results(&s, &input, 1);
    expect_format_error(&s, "an input", (const char *[]){"tensor 'in.x' (data at byte", NULL});
    refenc_st_entry ctrl = {"out.output\nPASS", REFENC_ST_F64, 2, {4, 16}, s.ref};
    write_results(&s, &ctrl, 1);
    expect_format_error(&s, "a name with a newline", (const char *[]){"tensor 'out.output\\x0aPASS'", NULL});

    /* an integer dtype */
    int64_t ints[NUMEL] = {0};
    refenc_st_entry i64 = {"out.output", REFENC_ST_I64, 2, {4, 16}, ints};
    write_results(&s, &i64, 1);
    snprintf(f1, sizeof f1,
             ": tensor 'out.output' has dtype I64; outputs must be F64, F32, F16 or BF16 (data at byte %zu)",
             data_at(&s, "out.output"));
    expect_format_error(&s, "an I64 output", (const char *[]){f1, NULL});
    rb_tmpdir_remove(s.dir);
}

Test(bad_results, wrong_shapes_fail_with_both_shapes_named)
{
    setup s;
    make_setup(&s);
    const struct {
        size_t ndim, shape[3];
        const char *note;
    } shapes[] = {
        {2, {4, 15}, "shape (4, 15) but the golden is (4, 16)"},
        {2, {16, 4}, "shape (16, 4) but the golden is (4, 16)"},
        {1, {64}, "shape (64) but the golden is (4, 16)"},
        {3, {4, 16, 1}, "shape (4, 16, 1) but the golden is (4, 16)"},
        {2, {4, 0}, "shape (4, 0) but the golden is (4, 16)"},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        refenc_st_entry e = {"out.output", REFENC_ST_F64, shapes[i].ndim, {0}, s.ref};
        memcpy(e.shape, shapes[i].shape, sizeof shapes[i].shape);
        write_results(&s, &e, 1);
        expect_failure(&s, shapes[i].note, (const char *[]){"FAIL (shape)", shapes[i].note, NULL});
    }
    rb_tmpdir_remove(s.dir);
}

/* ---- values ------------------------------------------------------------------------- */

Test(bad_results, non_finite_values_and_values_out_of_tolerance_fail)
{
    setup s;
    make_setup(&s);
    double v[NUMEL];
    const double bad[] = {NAN, -NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(v, s.ref, sizeof v);
        v[37] = bad[i];
        refenc_st_entry e = {"out.output", REFENC_ST_F64, 2, {4, 16}, v};
        write_results(&s, &e, 1);
        expect_failure(&s, "a non-finite value",
                       (const char *[]){"1 of 64 elements out of tolerance; worst at [2, 5]",
                                        "1 non-finite value where the golden is finite", NULL});
    }
    /* every value non-finite */
    for (size_t i = 0; i < NUMEL; i++)
        v[i] = NAN;
    refenc_st_entry e = {"out.output", REFENC_ST_F64, 2, {4, 16}, v};
    write_results(&s, &e, 1);
    expect_failure(&s, "all NaN", (const char *[]){"64 non-finite values where the golden is finite", NULL});

    /* one value off by 3e-10 relative: over F64's rtol 1e-10 + atol 1e-11 */
    memcpy(v, s.ref, sizeof v);
    const size_t k = 60; /* x = 5.43: GELU(x) ~ 5.43, far from 0 */
    cr_assert_gt(fabs(s.ref[k]), 1.0);
    v[k] = s.ref[k] * (1 + 3e-10);
    write_results(&s, &e, 1);
    expect_failure(&s, "a value out of tolerance",
                   (const char *[]){"1 of 64 elements out of tolerance; worst at [3, 12]", NULL});
    rb_tmpdir_remove(s.dir);
}

/* Positive controls: the reference rounded to each result dtype passes
 * under that dtype's policy (docs/verdict.md): rounding costs at most half a
 * unit in the last place, 2^-24, 2^-11, 2^-8 relative, under the rtol of
 * 1.3e-6, 1e-3, 1.6e-2. */
Test(bad_results, reference_rounded_to_each_dtype_passes)
{
    setup s;
    make_setup(&s);
    float f32[NUMEL];
    uint16_t f16[NUMEL], bf16[NUMEL];
    for (size_t i = 0; i < NUMEL; i++) {
        f32[i] = (float)s.ref[i];
        f16[i] = refenc_double_to_f16(s.ref[i]);
        bf16[i] = refenc_double_to_bf16(s.ref[i]);
    }
    const struct {
        refenc_st_dtype dtype;
        const void *data;
        const char *line;
    } runs[] = {{REFENC_ST_F32, f32, "F32 "}, {REFENC_ST_F16, f16, "F16 "}, {REFENC_ST_BF16, bf16, "BF16"}};
    for (size_t i = 0; i < 3; i++) {
        refenc_st_entry e = {"out.output", runs[i].dtype, 2, {4, 16}, runs[i].data};
        write_results(&s, &e, 1);
        rb_result r = certify(&s);
        cr_expect_eq(r.status, 0, "%s: exit %d: %s%s", runs[i].line, r.status, r.out, r.err);
        cr_expect(strstr(r.out, runs[i].line) != NULL, "%s", r.out);
        expect_certificate(&s, "PASS", runs[i].line);
        rb_result_free(&r);
    }
    /* negative control: BF16 values under the F32 policy fail */
    const char *args[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", s.results,
                          "--case", CASE, "--rtol", "1.3e-6", "--atol", "1e-5", NULL};
    rb_result r = rb_run(args);
    cr_expect_eq(r.status, 1, "BF16 under rtol 1.3e-6: exit %d: %s", r.status, r.out);
    rb_result_free(&r);
    rb_tmpdir_remove(s.dir);
}

Test(bad_results, a_missing_results_file_fails_and_a_directory_is_an_error)
{
    setup s;
    make_setup(&s);
    expect_failure(&s, "no results file",
                   (const char *[]){"FAIL  1 case without a results file in ", ": " CASE "\n", NULL});
    cr_assert_eq(mkdir(s.file, 0700), 0);
    expect_format_error(&s, "a directory", (const char *[]){": is a directory, not a file", NULL});
    rmdir(s.file);
    rb_tmpdir_remove(s.dir);
}
