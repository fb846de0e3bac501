/* The safetensors container (ref/safetensors.c): round trips through the
 * writer and the reader, the writer's bytes against the format built by
 * hand, and one test per validation rule with its exact error.
 *
 * Every parse runs on a heap copy of exactly the file's size, so that
 * AddressSanitizer or valgrind would see any read past the end. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <gsl/gsl_rng.h>

#include "../../ref/io/safetensors.h"
#include "../common/testutil.h"

#define FILE_NAME "case.safetensors"

/* ---------------------------------------------------------------- helpers */

/* A file built by hand from the spec: the 8-byte little-endian length N,
 * the header, the data.  hand_file_n writes any N; hand_file the true one. */
static unsigned char *hand_file_n(size_t *len, unsigned long long N, const char *header,
                                  const void *data, size_t data_len)
{
    const size_t h = strlen(header);
    *len = 8 + h + data_len;
    unsigned char *b = malloc(*len);
    cr_assert_not_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(N >> (8 * i));
    memcpy(b + 8, header, h);
    if (data_len > 0)
        memcpy(b + 8 + h, data, data_len);
    return b;
}

static unsigned char *hand_file(size_t *len, const char *header, const void *data,
                                size_t data_len)
{
    return hand_file_n(len, strlen(header), header, data, data_len);
}

/* File offset of the first occurrence of needle in the header of a hand
 * file (8 + its offset in the header). */
static size_t at(const char *header, const char *needle)
{
    const char *p = strstr(header, needle);
    cr_assert_not_null(p, "'%s' not in the header", needle);
    return 8 + (size_t)(p - header);
}

static const char *fmt(char *buf, size_t n, const char *f, ...)
    __attribute__((format(printf, 3, 4)));
static const char *fmt(char *buf, size_t n, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, n, f, ap);
    va_end(ap);
    return buf;
}

static void assert_empty(const refenc_st_file *f)
{
    cr_assert(f->path == NULL && f->buf == NULL && f->size == 0 && f->metadata == NULL &&
                  f->n_tensors == 0 && f->tensors == NULL && f->owns_buf == 0,
              "the file struct is not empty after an error");
}

/* Parses an exact-size heap copy of bytes[0..len). */
static int parse_copy(refenc_st_file *f, unsigned char **copy, const unsigned char *bytes,
                      size_t len, refenc_error *err)
{
    *copy = malloc(len ? len : 1);
    cr_assert_not_null(*copy);
    if (len > 0)
        memcpy(*copy, bytes, len);
    refenc_error_clear(err);
    return refenc_st_parse(f, *copy, len, FILE_NAME, err);
}

/* The parse fails with `status` and a message that contains every fragment
 * (a NULL-terminated list); the struct is left empty. */
static void expect_parse_error(const unsigned char *bytes, size_t len, int status, ...)
{
    refenc_st_file f;
    refenc_error err;
    unsigned char *copy;
    int st = parse_copy(&f, &copy, bytes, len, &err);
    cr_assert_eq(st, status, "status %d (%s), want %d; message: %s", st, refenc_status_name(st),
                 status, err.message);
    cr_assert_eq(err.status, status);
    va_list ap;
    va_start(ap, status);
    for (const char *frag = va_arg(ap, const char *); frag != NULL; frag = va_arg(ap, const char *))
        cr_assert(strstr(err.message, frag) != NULL, "message \"%s\" lacks \"%s\"", err.message,
                  frag);
    va_end(ap);
    assert_empty(&f);
    refenc_st_free(&f); /* safe on the empty struct */
    free(copy);
}

/* The negative control: the bytes parse.  Returns the tensor count. */
static size_t expect_parse_ok(const unsigned char *bytes, size_t len)
{
    refenc_st_file f;
    refenc_error err;
    unsigned char *copy;
    int st = parse_copy(&f, &copy, bytes, len, &err);
    cr_assert_eq(st, REFENC_OK, "valid file refused: %s", err.message);
    size_t n = f.n_tensors;
    refenc_st_free(&f);
    free(copy);
    return n;
}

/* tmpl with its one "@" replaced by `with` (malloc'd). */
static char *subst(const char *tmpl, const char *with)
{
    const char *m = strchr(tmpl, '@');
    cr_assert_not_null(m);
    size_t a = (size_t)(m - tmpl), w = strlen(with), b = strlen(m + 1);
    char *s = malloc(a + w + b + 1);
    cr_assert_not_null(s);
    memcpy(s, tmpl, a);
    memcpy(s + a, with, w);
    memcpy(s + a + w, m + 1, b + 1);
    return s;
}

/* A temporary directory, removed (with its plain files) by rm_dir. */
static char *make_dir(void)
{
    const char *t = getenv("TMPDIR");
    char *d = malloc(PATH_MAX);
    cr_assert_not_null(d);
    snprintf(d, PATH_MAX, "%s/refenc-st-XXXXXX", t != NULL && t[0] != '\0' ? t : "/tmp");
    cr_assert_not_null(mkdtemp(d), "mkdtemp: %s", strerror(errno));
    return d;
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void rm_dir(char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        char p[PATH_MAX];
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0)
                rmdir(p);
        }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp, "%s: %s", path, strerror(errno));
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    cr_assert_not_null(b);
    cr_assert_eq(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return b;
}

static const char *join(char *buf, const char *dir, const char *name)
{
    int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);
    cr_assert(n > 0 && n < PATH_MAX);
    return buf;
}

/* ------------------------------------------------------------ round trips */

/* Every dtype, with 0-d, zero-size, 1-d to 8-d shapes; the U8 and BOOL
 * tensors have the first names and odd sizes, so a writer that laid data
 * out by name would leave the wider ones unaligned. */
static const double f64v[6] = {2.385, -0.0, 0x1p-1074, 1e308, -7.25e-3, 3.0};
static const float f32v[6] = {2.385f, -1.5e-40f, 3.4e38f, -0.0f, 1.0f / 3, 7.0f};
static const uint16_t f16v[3] = {0x3C00, 0x0001, 0xFBFF}; /* 1, 2^-24, -65504 */
static const uint16_t bf16v[4] = {0x4019, 0x0001, 0xFF7F, 0x7F80};
static const int64_t i64v[5] = {INT64_MIN, -1, 0, 42, INT64_MAX};
static const uint8_t u8v[3] = {0, 127, 255};
static const uint8_t boolv[5] = {1, 0, 0, 1, 1};
static const double scalar = -2.385;

#define N_RT 10
static const refenc_st_entry rt_entries[N_RT] = {
    {"z.f64", REFENC_ST_F64, 2, {2, 3}, f64v},
    {"y.f32", REFENC_ST_F32, 3, {1, 6, 1}, f32v},
    {"x.f16", REFENC_ST_F16, 1, {3}, f16v},
    {"w.bf16", REFENC_ST_BF16, 8, {1, 1, 1, 2, 1, 1, 2, 1}, bf16v},
    {"v.i64", REFENC_ST_I64, 1, {5}, i64v},
    {"b.u8", REFENC_ST_U8, 1, {3}, u8v},
    {"a.bool", REFENC_ST_BOOL, 2, {5, 1}, boolv},
    {"s.scalar", REFENC_ST_F64, 0, {0}, &scalar},
    {"e.empty", REFENC_ST_F32, 3, {2, 0, 5}, NULL},
    {"e.empty0", REFENC_ST_I64, 1, {0}, NULL},
};

static void check_same_tensor(const refenc_st_file *f, const refenc_st_entry *e)
{
    const refenc_st_tensor *t = refenc_st_find(f, e->name);
    cr_assert_not_null(t, "tensor '%s' not found", e->name);
    cr_assert_str_eq(t->name, e->name);
    cr_assert_eq(t->dtype, e->dtype, "%s: dtype", e->name);
    cr_assert_eq(t->ndim, e->ndim, "%s: ndim", e->name);
    size_t numel = 1;
    for (size_t i = 0; i < e->ndim; i++) {
        cr_assert_eq(t->shape[i], e->shape[i], "%s: shape[%zu]", e->name, i);
        numel *= e->shape[i];
    }
    cr_assert_eq(t->numel, numel, "%s: numel", e->name);
    cr_assert_eq(t->nbytes, numel * refenc_st_dtype_size(e->dtype), "%s: nbytes", e->name);
    cr_assert_eq(t->data, f->buf + t->file_offset);
    if (numel > 0)
        cr_assert(memcmp(t->data, e->data, t->nbytes) == 0, "%s: data differs", e->name);
}

Test(safetensors, every_dtype_and_shape_round_trips)
{
    char *dir = make_dir(), path[PATH_MAX];
    refenc_error err;
    refenc_st_file f;
    join(path, dir, "rt.safetensors");
    cr_assert_eq(refenc_st_write(path, rt_entries, N_RT, NULL, &err), REFENC_OK, "%s",
                 err.message);
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(f.n_tensors, N_RT);
    cr_assert_null(f.metadata);
    cr_assert_eq(f.owns_buf, 1);
    cr_assert_str_eq(f.path, path);
    for (size_t i = 0; i < N_RT; i++)
        check_same_tensor(&f, &rt_entries[i]);
    /* sorted by data offset, contiguous, each aligned to its element size */
    for (size_t i = 0; i < f.n_tensors; i++) {
        const refenc_st_tensor *t = &f.tensors[i];
        cr_assert_eq(t->file_offset % refenc_st_dtype_size(t->dtype), 0, "%s at %zu", t->name,
                     t->file_offset);
        if (i > 0)
            cr_assert(f.tensors[i - 1].file_offset + f.tensors[i - 1].nbytes == t->file_offset);
    }
    /* largest elements first: 8-byte dtypes open the buffer, BOOL/U8 close it */
    cr_assert_eq(refenc_st_dtype_size(f.tensors[0].dtype), 8);
    cr_assert_eq(refenc_st_dtype_size(f.tensors[N_RT - 1].dtype), 1);
    cr_assert_null(refenc_st_find(&f, "missing"));
    cr_assert_eq(refenc_st_find(&f, "s.scalar")->numel, 1);
    cr_assert_eq(refenc_st_find(&f, "e.empty")->numel, 0);
    /* header padded: data starts 8-aligned */
    cr_assert_eq(f.tensors[0].file_offset % 8, 0);
    refenc_st_free(&f);
    assert_empty(&f);
    cr_assert_eq(count_entries(dir), 1, "a temporary file was left behind");
    rm_dir(dir);
}

Test(safetensors, converters_read_values_exactly)
{
    char *dir = make_dir(), path[PATH_MAX];
    refenc_error err;
    refenc_st_file f;
    join(path, dir, "rt.safetensors");
    cr_assert_eq(refenc_st_write(path, rt_entries, N_RT, NULL, &err), REFENC_OK, "%s",
                 err.message);
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    double d[6];
    int64_t q[6];

    cr_assert_eq(refenc_st_to_f64(d, &f, refenc_st_find(&f, "z.f64"), &err), REFENC_OK);
    cr_assert(memcmp(d, f64v, sizeof f64v) == 0); /* bits, -0.0 and subnormal included */
    cr_assert_eq(refenc_st_to_f64(d, &f, refenc_st_find(&f, "y.f32"), &err), REFENC_OK);
    for (int i = 0; i < 6; i++)
        cr_assert(d[i] == (double)f32v[i] && !!signbit(d[i]) == !!signbit(f32v[i]), "f32[%d]", i);
    cr_assert_eq(refenc_st_to_f64(d, &f, refenc_st_find(&f, "x.f16"), &err), REFENC_OK);
    cr_assert(d[0] == 1.0 && d[1] == 0x1p-24 && d[2] == -65504.0);
    cr_assert_eq(refenc_st_to_f64(d, &f, refenc_st_find(&f, "w.bf16"), &err), REFENC_OK);
    cr_assert(d[0] == 2.390625 && d[1] == 0x1p-133 && d[2] == -0x1.fep127 && isinf(d[3]));
    cr_assert_eq(refenc_st_to_f64(d, &f, refenc_st_find(&f, "s.scalar"), &err), REFENC_OK);
    cr_assert(d[0] == -2.385);
    cr_assert_eq(refenc_st_to_f64(d, &f, refenc_st_find(&f, "e.empty"), &err), REFENC_OK);

    cr_assert_eq(refenc_st_to_i64(q, &f, refenc_st_find(&f, "v.i64"), &err), REFENC_OK);
    cr_assert(memcmp(q, i64v, sizeof i64v) == 0);
    cr_assert_eq(refenc_st_to_i64(q, &f, refenc_st_find(&f, "b.u8"), &err), REFENC_OK);
    cr_assert(q[0] == 0 && q[1] == 127 && q[2] == 255);
    cr_assert_eq(refenc_st_to_i64(q, &f, refenc_st_find(&f, "a.bool"), &err), REFENC_OK);
    cr_assert(q[0] == 1 && q[1] == 0 && q[2] == 0 && q[3] == 1 && q[4] == 1);
    cr_assert_eq(refenc_st_to_i64(q, &f, refenc_st_find(&f, "e.empty0"), &err), REFENC_OK);

    /* the wrong kind of dtype is refused, naming file, tensor and offset */
    const refenc_st_tensor *ti = refenc_st_find(&f, "v.i64"), *tf = refenc_st_find(&f, "y.f32");
    char frag[128];
    cr_assert_eq(refenc_st_to_f64(d, &f, ti, &err), REFENC_EFORMAT);
    cr_assert(strstr(err.message, path) && strstr(err.message, "tensor 'v.i64'") &&
                  strstr(err.message, "dtype I64 is not a floating type") &&
                  strstr(err.message, fmt(frag, sizeof frag, "data at byte %zu", ti->file_offset)),
              "%s", err.message);
    cr_assert_eq(refenc_st_to_i64(q, &f, tf, &err), REFENC_EFORMAT);
    cr_assert(strstr(err.message, "tensor 'y.f32'") &&
                  strstr(err.message, "dtype F32 is not an integer type") &&
                  strstr(err.message, fmt(frag, sizeof frag, "data at byte %zu", tf->file_offset)),
              "%s", err.message);
    refenc_st_free(&f);
    rm_dir(dir);
}

Test(safetensors, f32_nan_payloads_survive_the_conversion)
{
    /* a signalling NaN (the hardware conversion would quiet it) and a quiet
     * one with a payload, as their bits */
    const char *hdr = "{\"n\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}";
    const uint32_t v[3] = {0x7F800001u, 0xFFC00123u, 0x3F800000u};
    size_t len;
    refenc_st_file f;
    refenc_error err;
    unsigned char *b = hand_file(&len, hdr, v, sizeof v), *copy;
    cr_assert_eq(parse_copy(&f, &copy, b, len, &err), REFENC_OK, "%s", err.message);
    double d[3];
    cr_assert_eq(refenc_st_to_f64(d, &f, &f.tensors[0], &err), REFENC_OK);
    uint64_t bits[3];
    memcpy(bits, d, sizeof bits);
    cr_assert_eq(bits[0], 0x7FF0000020000000ull); /* payload 1 << 29 */
    cr_assert_eq(bits[1], 0xFFF8002460000000ull);
    cr_assert(d[2] == 1.0);
    refenc_st_free(&f);
    free(copy);
    free(b);
}

Test(safetensors, parse_without_a_name_says_buffer)
{
    const unsigned char b[3] = {0};
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_parse(&f, b, sizeof b, NULL, &err), REFENC_EFORMAT);
    cr_assert(strstr(err.message, "<buffer>: file is 3 bytes"), "%s", err.message);
    /* and the error argument may be NULL: the status still says what failed */
    cr_assert_eq(refenc_st_parse(&f, b, sizeof b, "x", NULL), REFENC_EFORMAT);
    assert_empty(&f);
}

Test(safetensors, bool_other_than_0_or_1_is_refused_with_its_offset)
{
    /* by hand: the writer refuses such a tensor */
    const char *hdr = "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[0,4]}}";
    const unsigned char bad[4] = {1, 0, 2, 1}, good[4] = {1, 0, 0, 1};
    size_t len;
    int64_t q[4];
    refenc_error err;
    refenc_st_file f;
    unsigned char *b = hand_file(&len, hdr, good, 4), *copy;
    cr_assert_eq(parse_copy(&f, &copy, b, len, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_to_i64(q, &f, &f.tensors[0], &err), REFENC_OK);
    refenc_st_free(&f);
    free(copy);
    free(b);

    b = hand_file(&len, hdr, bad, 4);
    cr_assert_eq(parse_copy(&f, &copy, b, len, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_to_i64(q, &f, &f.tensors[0], &err), REFENC_EFORMAT);
    char frag[64];
    cr_assert(strstr(err.message, FILE_NAME ": tensor 'm'") &&
                  strstr(err.message, "BOOL element 2 is 2, not 0 or 1") &&
                  strstr(err.message, fmt(frag, sizeof frag, "at byte %zu", 8 + strlen(hdr) + 2)),
              "%s", err.message);
    refenc_st_free(&f);
    free(copy);
    free(b);
}

Test(safetensors, metadata_round_trips)
{
    char *dir = make_dir(), path[PATH_MAX];
    refenc_error err;
    refenc_st_file f;
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s}", "format_version", "1", "case",
                             "pre_ln \"rope\"\nline 2", "config", "{\"d_model\": 12}", "unicode",
                             "\xc3\xa9t\xc3\xa9 \xe2\x88\x9a \xf0\x9f\x98\x80");
    cr_assert_not_null(meta);
    join(path, dir, "meta.safetensors");
    cr_assert_eq(refenc_st_write(path, rt_entries, 2, meta, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_not_null(f.metadata);
    cr_assert(json_equal(f.metadata, meta));
    cr_assert_str_eq(refenc_st_metadata(&f, "case"), "pre_ln \"rope\"\nline 2");
    cr_assert_str_eq(refenc_st_metadata(&f, "unicode"),
                     "\xc3\xa9t\xc3\xa9 \xe2\x88\x9a \xf0\x9f\x98\x80");
    cr_assert_str_eq(refenc_st_metadata(&f, "config"), "{\"d_model\": 12}");
    cr_assert_null(refenc_st_metadata(&f, "absent"));
    cr_assert_eq(f.n_tensors, 2);
    refenc_st_free(&f);

    /* an empty metadata object is kept; no metadata gives NULL */
    json_t *empty = json_object();
    cr_assert_eq(refenc_st_write(path, rt_entries, 1, empty, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert(json_is_object(f.metadata) && json_object_size(f.metadata) == 0);
    refenc_st_free(&f);
    cr_assert_eq(refenc_st_write(path, rt_entries, 1, NULL, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_null(f.metadata);
    cr_assert_null(refenc_st_metadata(&f, "case"));
    refenc_st_free(&f);
    json_decref(empty);
    json_decref(meta);
    rm_dir(dir);
}

Test(safetensors, writer_is_deterministic_whatever_the_entry_order)
{
    char *dir = make_dir(), p1[PATH_MAX], p2[PATH_MAX];
    refenc_error err;
    refenc_st_entry reversed[N_RT];
    for (size_t i = 0; i < N_RT; i++)
        reversed[i] = rt_entries[N_RT - 1 - i];
    json_t *m1 = json_pack("{s:s, s:s}", "b", "2", "a", "1");
    json_t *m2 = json_pack("{s:s, s:s}", "a", "1", "b", "2");
    cr_assert_eq(refenc_st_write(join(p1, dir, "1.safetensors"), rt_entries, N_RT, m1, &err),
                 REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_write(join(p2, dir, "2.safetensors"), reversed, N_RT, m2, &err),
                 REFENC_OK, "%s", err.message);
    size_t n1, n2;
    unsigned char *b1 = slurp(p1, &n1), *b2 = slurp(p2, &n2);
    cr_assert_eq(n1, n2);
    cr_assert(memcmp(b1, b2, n1) == 0, "same entries gave different bytes");
    /* negative control: different data gives different bytes */
    refenc_st_entry changed[N_RT];
    memcpy(changed, rt_entries, sizeof changed);
    const double other = 2.386;
    changed[7].data = &other;
    cr_assert_eq(refenc_st_write(p2, changed, N_RT, m1, &err), REFENC_OK, "%s", err.message);
    free(b2);
    b2 = slurp(p2, &n2);
    cr_assert(n1 == n2 && memcmp(b1, b2, n1) != 0);
    free(b1);
    free(b2);
    json_decref(m1);
    json_decref(m2);
    rm_dir(dir);
}

/* The writer's bytes are the format's, not only what our reader accepts:
 * the expected file is spelt out byte by byte from the specification. */
Test(safetensors, writer_output_matches_the_spec_byte_for_byte)
{
    static const unsigned char expected_prefix[8] = {0xC8, 0, 0, 0, 0, 0, 0, 0}; /* N = 200 */
    /* keys sorted; data by element size, largest first: s, weight, b */
    static const char expected_header[] =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"b\":{\"data_offsets\":[16,19],\"dtype\":\"U8\",\"shape\":[3]},"
        "\"s\":{\"data_offsets\":[0,8],\"dtype\":\"F64\",\"shape\":[]},"
        "\"weight\":{\"data_offsets\":[8,16],\"dtype\":\"F32\",\"shape\":[2]}}"
        "   "; /* 197 bytes of JSON + 3 spaces = 200 */
    static const unsigned char expected_data[19] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xD8, 0xBF, /* s: F64 -0.375          */
        0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x10, 0xC0, /* weight: F32 1.5, -2.25 */
        0x07, 0x00, 0xFF,                               /* b: U8 7, 0, 255        */
    };
    cr_assert_eq(sizeof expected_header - 1, 200);

    const uint8_t b[3] = {7, 0, 255};
    const double s = -0.375;
    const float w[2] = {1.5f, -2.25f};
    const refenc_st_entry e[3] = {
        {"weight", REFENC_ST_F32, 1, {2}, w},
        {"s", REFENC_ST_F64, 0, {0}, &s},
        {"b", REFENC_ST_U8, 1, {3}, b},
    };
    json_t *meta = json_pack("{s:s}", "format", "pt");
    char *dir = make_dir(), path[PATH_MAX];
    refenc_error err;
    cr_assert_eq(refenc_st_write(join(path, dir, "tiny.safetensors"), e, 3, meta, &err),
                 REFENC_OK, "%s", err.message);
    size_t n;
    unsigned char *got = slurp(path, &n);
    cr_assert_eq(n, 8 + 200 + 19);
    cr_assert(memcmp(got, expected_prefix, 8) == 0, "length prefix differs");
    cr_assert(memcmp(got + 8, expected_header, 200) == 0, "header differs: %.200s", got + 8);
    cr_assert(memcmp(got + 208, expected_data, 19) == 0, "data differs");
    free(got);
    json_decref(meta);
    rm_dir(dir);
}

/* A file in the style of other writers (Hugging Face's: unsorted keys,
 * spaces in the JSON, metadata anywhere), spelt out by hand, is read. */
Test(safetensors, reads_a_hand_built_file_in_another_writers_style)
{
    static const char header[] =
        "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}, "
        "\"__metadata__\": {\"format\": \"pt\"}, "
        "\"t\": {\"shape\": [1], \"data_offsets\": [0, 8], \"dtype\": \"I64\"}}    ";
    static const unsigned char data[16] = {
        0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, /* t: I64 -2           */
        0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x10, 0xC0, /* w: F32 1.5, -2.25   */
    };
    size_t len;
    unsigned char *bytes = hand_file(&len, header, data, sizeof data), *copy;
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(parse_copy(&f, &copy, bytes, len, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(f.n_tensors, 2);
    cr_assert_str_eq(f.tensors[0].name, "t"); /* ordered by data offset */
    cr_assert_str_eq(f.tensors[1].name, "w");
    cr_assert_eq(f.tensors[1].file_offset, 8 + strlen(header) + 8);
    double d[2];
    int64_t q;
    cr_assert_eq(refenc_st_to_f64(d, &f, refenc_st_find(&f, "w"), &err), REFENC_OK);
    cr_assert(d[0] == 1.5 && d[1] == -2.25);
    cr_assert_eq(refenc_st_to_i64(&q, &f, refenc_st_find(&f, "t"), &err), REFENC_OK);
    cr_assert_eq(q, -2);
    cr_assert_str_eq(refenc_st_metadata(&f, "format"), "pt");
    cr_assert_eq(f.owns_buf, 0);
    refenc_st_free(&f);
    free(copy);
    free(bytes);
}

Test(safetensors, empty_file_of_no_tensors_round_trips)
{
    char *dir = make_dir(), path[PATH_MAX];
    refenc_error err;
    refenc_st_file f;
    cr_assert_eq(refenc_st_write(join(path, dir, "none.safetensors"), NULL, 0, NULL, &err),
                 REFENC_OK, "%s", err.message);
    size_t n;
    unsigned char *b = slurp(path, &n);
    /* "{}" padded to 8 bytes */
    cr_assert_eq(n, 16);
    cr_assert(memcmp(b, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    free(b);
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(f.n_tensors, 0);
    cr_assert_null(f.tensors);
    refenc_st_free(&f);
    /* metadata and no tensor: 35 bytes of JSON, 5 spaces */
    json_t *meta = json_pack("{s:s}", "framework", "pt");
    cr_assert_eq(refenc_st_write(path, NULL, 0, meta, &err), REFENC_OK, "%s", err.message);
    b = slurp(path, &n);
    cr_assert_eq(n, 48);
    cr_assert(memcmp(b, "\x28\0\0\0\0\0\0\0{\"__metadata__\":{\"framework\":\"pt\"}}     ", 48) ==
              0);
    free(b);
    json_decref(meta);
    rm_dir(dir);
}

/* ------------------------------------------------------ writer: refusals */

/* The write fails with status and fragments, and nothing is left in dir. */
static void expect_write_error(const refenc_st_entry *e, size_t n, const json_t *meta, int status,
                               const char *frag)
{
    char *dir = make_dir(), path[PATH_MAX];
    refenc_error err;
    refenc_error_clear(&err);
    int st = refenc_st_write(join(path, dir, "w.safetensors"), e, n, meta, &err);
    cr_assert_eq(st, status, "status %d, want %d: %s", st, status, err.message);
    cr_assert(strstr(err.message, path) != NULL, "message \"%s\" lacks the path", err.message);
    cr_assert(strstr(err.message, frag) != NULL, "message \"%s\" lacks \"%s\"", err.message, frag);
    cr_assert_eq(count_entries(dir), 0, "something was left in the directory");
    rm_dir(dir);
}

Test(safetensors, writer_refuses_bad_entries_and_leaves_nothing)
{
    const double v[2] = {2.385, -1.25};
    const uint8_t bools[3] = {0, 1, 3};
    refenc_st_entry e[2] = {{"a", REFENC_ST_F64, 1, {2}, v}, {"b", REFENC_ST_F64, 1, {2}, v}};
    /* negative control: the entries as they are can be written */
    char *dir = make_dir(), path[PATH_MAX];
    refenc_error err;
    cr_assert_eq(refenc_st_write(join(path, dir, "ok.safetensors"), e, 2, NULL, &err), REFENC_OK,
                 "%s", err.message);
    rm_dir(dir);

    e[1].name = "a";
    expect_write_error(e, 2, NULL, REFENC_EINVAL, "duplicate tensor name 'a'");
    e[1].name = "";
    expect_write_error(e, 2, NULL, REFENC_EINVAL, "empty name");
    e[1].name = NULL;
    expect_write_error(e, 2, NULL, REFENC_EINVAL, "empty name");
    e[1].name = "__metadata__";
    expect_write_error(e, 2, NULL, REFENC_EINVAL, "'__metadata__' is reserved");
    e[1].name = "bad\xff";
    expect_write_error(e, 2, NULL, REFENC_EINVAL, "is not valid UTF-8");
    e[1].name = "b";

    e[1].dtype = (refenc_st_dtype)7;
    expect_write_error(e, 2, NULL, REFENC_EINVAL, "tensor 'b': unknown dtype 7");
    e[1].dtype = REFENC_ST_F64;
    e[1].ndim = 9;
    expect_write_error(e, 2, NULL, REFENC_EINVAL, "tensor 'b': 9 dimensions, more than the 8");
    e[1].ndim = 2;
    e[1].shape[0] = e[1].shape[1] = (size_t)1 << 40;
    expect_write_error(e, 2, NULL, REFENC_ELIMIT,
                       "tensor 'b': shape [1099511627776, 1099511627776] of F64 overflows");
    e[1].ndim = 1;
    e[1].shape[0] = (size_t)1 << 62; /* 2^65 bytes */
    expect_write_error(e, 2, NULL, REFENC_ELIMIT, "overflows");
    e[1].shape[0] = 2;
    e[1].data = NULL;
    expect_write_error(e, 2, NULL, REFENC_EINVAL, "tensor 'b': data is NULL");
    e[1] = (refenc_st_entry){"b", REFENC_ST_BOOL, 1, {3}, bools};
    expect_write_error(e, 2, NULL, REFENC_EINVAL, "tensor 'b': BOOL element 2 is 3, not 0 or 1");
    e[1].shape[0] = 2; /* {0, 1}: fine */

    json_t *m = json_pack("{s:s, s:i}", "ok", "x", "version", 1);
    expect_write_error(e, 2, m, REFENC_EINVAL, "metadata 'version' is not a string");
    json_decref(m);
    m = json_pack("[s]", "x");
    expect_write_error(e, 2, m, REFENC_EINVAL, "metadata is not a JSON object");
    json_decref(m);
    m = json_pack("{s:s%}", "k", "a\0b", (size_t)3);
    expect_write_error(e, 2, m, REFENC_EINVAL, "metadata 'k' contains a NUL byte");
    json_decref(m);

    /* each tensor fits, their sum does not (refused before any data is read) */
    e[0] = (refenc_st_entry){"a", REFENC_ST_U8, 1, {(size_t)1 << 62}, bools};
    e[1] = (refenc_st_entry){"b", REFENC_ST_U8, 2, {(size_t)1 << 61, 2}, bools};
    expect_write_error(e, 2, NULL, REFENC_ELIMIT, "the tensors' total size overflows");
}

Test(safetensors, writer_replaces_a_file_and_refuses_a_directory)
{
    char *dir = make_dir(), path[PATH_MAX];
    refenc_error err;
    refenc_st_file f;
    const double a = 2.385, b[2] = {-1.5, 7.25};
    const refenc_st_entry e1 = {"x", REFENC_ST_F64, 0, {0}, &a};
    const refenc_st_entry e2 = {"x", REFENC_ST_F64, 1, {2}, b};
    join(path, dir, "out.safetensors");
    cr_assert_eq(refenc_st_write(path, &e1, 1, NULL, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_write(path, &e2, 1, NULL, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(f.tensors[0].numel, 2);
    refenc_st_free(&f);
    cr_assert_eq(count_entries(dir), 1);

    /* path is a non-empty directory: refused before anything is written
     * (io/atomic_write.h; checks/unit/test_atomic_write.c has the rest) */
    char sub[PATH_MAX], inner[PATH_MAX];
    join(sub, dir, "adir");
    cr_assert_eq(mkdir(sub, 0700), 0);
    FILE *fp = fopen(join(inner, sub, "keep"), "w");
    cr_assert_not_null(fp);
    fclose(fp);
    cr_assert_eq(refenc_st_write(sub, &e1, 1, NULL, &err), REFENC_EINVAL);
    cr_assert(strstr(err.message, sub) && strstr(err.message, "is a directory, not a regular file: "
                                                                "refusing to replace it"),
              "%s", err.message);
    cr_assert_eq(count_entries(dir), 2, "a temporary file was left behind");
    cr_assert_eq(count_entries(sub), 1);

    /* a directory that does not exist: nothing can be created */
    join(path, dir, "no/such/dir/out.safetensors");
    cr_assert_eq(refenc_st_write(path, &e1, 1, NULL, &err), REFENC_EIO);
    cr_assert(strstr(err.message, path) && strstr(err.message, "cannot write into its directory") &&
                  strstr(err.message, "No such file or directory"),
              "%s", err.message);
    unlink(inner);
    rmdir(sub);
    rm_dir(dir);
}

/* ------------------------------------------------------- reading: files */

Test(safetensors, reading_a_missing_file_or_a_directory_is_an_io_error)
{
    char *dir = make_dir(), path[PATH_MAX];
    refenc_st_file f;
    refenc_error err;
    join(path, dir, "absent.safetensors");
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_EIO);
    cr_assert(strstr(err.message, path) && strstr(err.message, "cannot open") &&
                  strstr(err.message, "No such file or directory"),
              "%s", err.message);
    assert_empty(&f);
    refenc_st_free(&f);

    cr_assert_eq(refenc_st_read(&f, dir, &err), REFENC_EIO);
    cr_assert(strstr(err.message, dir) && strstr(err.message, "is a directory"), "%s",
              err.message);
    assert_empty(&f);

    cr_assert_eq(refenc_st_read(&f, "/dev/null", &err), REFENC_EIO);
    cr_assert(strstr(err.message, "/dev/null: not a regular file"), "%s", err.message);
    /* a FIFO without a writer: refused at once, not waited on */
    char fifo[PATH_MAX];
    cr_assert_eq(mkfifo(join(fifo, dir, "fifo"), 0600), 0);
    cr_assert_eq(refenc_st_read(&f, fifo, &err), REFENC_EIO);
    cr_assert(strstr(err.message, "fifo: not a regular file"), "%s", err.message);
    unlink(fifo);

    /* unreadable: only meaningful when not root */
    if (geteuid() != 0) {
        const double a = 2.385;
        const refenc_st_entry e = {"x", REFENC_ST_F64, 0, {0}, &a};
        cr_assert_eq(refenc_st_write(path, &e, 1, NULL, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(chmod(path, 0), 0);
        cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_EIO);
        cr_assert(strstr(err.message, path) && strstr(err.message, "Permission denied"), "%s",
                  err.message);
    }

    /* a malformed file on disk: the format error names the path */
    join(path, dir, "short.safetensors");
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    fwrite("\x10\0\0", 1, 3, fp);
    fclose(fp);
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_EFORMAT);
    cr_assert(strstr(err.message, path) && strstr(err.message, "file is 3 bytes"), "%s",
              err.message);
    assert_empty(&f);
    rm_dir(dir);
}

/* ------------------------------------------------ reading: validation */

/* A valid file of three tensors whose header entries are not in data order:
 *   a: F64 [2] at [0, 16), c: U8 [3] at [16, 19), b: F32 [] at [19, 23). */
static const char three_hdr[] =
    "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
    "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[19,23]},"
    "\"c\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[16,19]}}";
static const unsigned char three_data[23] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                             13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};

Test(safetensors, file_truncated_at_every_offset_is_refused)
{
    size_t len;
    unsigned char *b = hand_file(&len, three_hdr, three_data, sizeof three_data);
    const size_t N = strlen(three_hdr), data_start = 8 + N;
    cr_assert_eq(expect_parse_ok(b, len), 3);
    char f1[128], f2[128], f3[128];
    for (size_t k = 0; k < len; k++) {
        if (k < 8) {
            expect_parse_error(b, k, REFENC_EFORMAT,
                               fmt(f1, sizeof f1,
                                   FILE_NAME ": file is %zu bytes, too short for the 8-byte "
                                             "header length at byte 0",
                                   k),
                               NULL);
        } else if (k < data_start) {
            expect_parse_error(b, k, REFENC_EFORMAT,
                               fmt(f1, sizeof f1,
                                   FILE_NAME ": header length %zu at byte 0 exceeds the %zu "
                                             "bytes that follow it",
                                   N, k - 8),
                               NULL);
        } else {
            /* the first entry, in header order, whose data is cut */
            const size_t d = k - data_start;
            const char *name = d < 16 ? "a" : "b";
            const char *range = d < 16 ? "[0, 16]" : "[19, 23]";
            char key[8];
            fmt(key, sizeof key, "\"%s\"", name);
            expect_parse_error(
                b, k, REFENC_EFORMAT,
                fmt(f1, sizeof f1, FILE_NAME ": tensor '%s' (header entry at byte %zu)", name,
                    at(three_hdr, key)),
                fmt(f2, sizeof f2, "data_offsets %s end past the data buffer, which has %zu bytes",
                    range, d),
                fmt(f3, sizeof f3, "(file bytes %zu to %zu)", data_start, k), NULL);
        }
    }
    free(b);
}

Test(safetensors, header_length_larger_than_the_file_is_refused)
{
    size_t len;
    const size_t N = strlen(three_hdr);
    char frag[128];
    unsigned char *b = hand_file_n(&len, N + 24, three_hdr, three_data, 23);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       fmt(frag, sizeof frag,
                           FILE_NAME ": header length %zu at byte 0 exceeds the %zu bytes that "
                                     "follow it",
                           N + 24, N + 23),
                       NULL);
    free(b);
    /* negative control: the true length */
    b = hand_file_n(&len, strlen(three_hdr), three_hdr, three_data, 23);
    cr_assert_eq(expect_parse_ok(b, len), 3);
    free(b);
}

Test(safetensors, header_length_2_pow_63_and_2_pow_64_minus_1_are_refused_without_overflow)
{
    size_t len;
    char frag[128];
    unsigned char *b = hand_file_n(&len, 1ull << 63, three_hdr, three_data, 23);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       fmt(frag, sizeof frag,
                           FILE_NAME ": header length 9223372036854775808 at byte 0 exceeds the "
                                     "%zu bytes that follow it",
                           strlen(three_hdr) + 23),
                       NULL);
    free(b);
    b = hand_file_n(&len, ~0ull, three_hdr, three_data, 23);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       FILE_NAME ": header length 18446744073709551615 at byte 0 exceeds", NULL);
    free(b);
    /* 2^64 - 8: 8 + N would wrap around to 0 */
    b = hand_file_n(&len, ~0ull - 7, three_hdr, three_data, 23);
    expect_parse_error(b, len, REFENC_EFORMAT, "header length 18446744073709551608 at byte 0",
                       NULL);
    free(b);
}

Test(safetensors, header_over_the_100_MB_limit_is_refused)
{
    /* a file large enough to hold it: calloc'd pages are never touched */
    const size_t N = REFENC_ST_MAX_HEADER + 1, len = 8 + N;
    unsigned char *b = calloc(len, 1);
    cr_assert_not_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)N >> (8 * i));
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_parse(&f, b, len, FILE_NAME, &err), REFENC_EFORMAT);
    cr_assert(strstr(err.message,
                     FILE_NAME ": header length 100000001 at byte 0 exceeds the limit of "
                               "100000000 bytes"),
              "%s", err.message);
    assert_empty(&f);
    /* at the limit the length is accepted, and the header itself is judged */
    const size_t M = REFENC_ST_MAX_HEADER;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)M >> (8 * i));
    cr_assert_eq(refenc_st_parse(&f, b, len, FILE_NAME, &err), REFENC_EFORMAT);
    cr_assert(strstr(err.message, "header does not start with '{' (byte 0x00 at byte 8)"), "%s",
              err.message);
    free(b);
}

Test(safetensors, header_not_a_json_object_is_refused)
{
    size_t len;
    unsigned char *b = hand_file(&len, "", NULL, 0);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       FILE_NAME ": header is empty (header length 0 at byte 0)", NULL);
    free(b);
    static const char *const not_objects[] = {"[1, 2]", "\"a string\"", "42", " {}", "\n{}",
                                              "null"};
    for (size_t i = 0; i < sizeof not_objects / sizeof *not_objects; i++) {
        b = hand_file(&len, not_objects[i], NULL, 0);
        char frag[96];
        expect_parse_error(b, len, REFENC_EFORMAT,
                           fmt(frag, sizeof frag,
                               FILE_NAME ": header does not start with '{' (byte 0x%02x at byte 8)",
                               (unsigned char)not_objects[i][0]),
                           NULL);
        free(b);
    }
    b = hand_file(&len, "{}", NULL, 0);
    cr_assert_eq(expect_parse_ok(b, len), 0); /* negative control */
    free(b);
}

Test(safetensors, deeply_nested_header_is_refused_without_recursing)
{
    /* 100000 nested arrays: the parser's depth limit stops it */
    const size_t depth = 100000;
    char *h = malloc(depth + 8);
    cr_assert_not_null(h);
    memcpy(h, "{\"a\":", 5);
    memset(h + 5, '[', depth);
    h[5 + depth] = '\0';
    size_t len;
    unsigned char *b = hand_file(&len, h, NULL, 0);
    expect_parse_error(b, len, REFENC_EFORMAT, FILE_NAME ": header is not valid JSON near byte",
                       "maximum parsing depth reached", "in the entry of 'a' (at byte 9)", NULL);
    free(b);
    free(h);
}

Test(safetensors, header_not_json_is_refused_at_its_offset)
{
    static const struct {
        const char *hdr;
        const char *frag;
    } cases[] = {
        {"{not json}", FILE_NAME ": header is not valid JSON near byte 12: string or '}' expected"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}",
         "near byte 60: '}' expected near end of file"},
        {"{} {}", "near byte 12: end of file expected"},
        {"{\"a\":1,}", "near byte 16"},
        {"{\"x\":\"\\u0000\"}", "\\u0000 is not allowed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        unsigned char *b = hand_file(&len, cases[i].hdr, NULL, 0);
        expect_parse_error(b, len, REFENC_EFORMAT, FILE_NAME ": header is not valid JSON near byte",
                           cases[i].frag, NULL);
        free(b);
    }
    /* padding with NUL bytes instead of spaces */
    const unsigned char nul_pad[] = {11, 0, 0, 0, 0, 0, 0, 0, '{', '}', 0, 0, 0, 0, 0, 0, 0, 0, 0};
    expect_parse_error(nul_pad, sizeof nul_pad, REFENC_EFORMAT,
                       FILE_NAME ": header is not valid JSON near byte 11: end of file expected",
                       NULL);
    /* negative controls: space padding, and JSON whitespace after the object */
    const unsigned char sp_pad[] = {11, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ',
                                    ' ', ' ', ' ', ' ', ' '};
    cr_assert_eq(expect_parse_ok(sp_pad, sizeof sp_pad), 0);
    size_t len;
    unsigned char *b = hand_file(&len, "{}\n", NULL, 0);
    cr_assert_eq(expect_parse_ok(b, len), 0);
    free(b);
}

Test(safetensors, syntax_error_inside_an_entry_names_the_entry)
{
    const char *hdr = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"b\":{\"dtype\":\"U8\",\"shape\":[1,],\"data_offsets\":[1,2]}}";
    size_t len;
    char frag[96];
    unsigned char *b = hand_file(&len, hdr, "xy", 2);
    expect_parse_error(
        b, len, REFENC_EFORMAT, FILE_NAME ": header is not valid JSON near byte",
        fmt(frag, sizeof frag, "in the entry of 'b' (at byte %zu)", at(hdr, "\"b\"")), NULL);
    free(b);
}

Test(safetensors, header_not_utf8_is_refused_at_the_bad_byte)
{
    /* each bad sequence inside a tensor name, then inside a metadata value */
    static const char *const bad[] = {
        "\xff",             /* never in UTF-8                    */
        "\x80",             /* lone continuation byte            */
        "\xc0\xaf",         /* overlong '/'                      */
        "\xe0\x80\xaf",     /* overlong, 3 bytes                 */
        "\xed\xa0\x80",     /* UTF-16 surrogate U+D800           */
        "\xf4\x90\x80\x80", /* above U+10FFFF                    */
        "\xf5\x80\x80\x80", /* lead byte out of range            */
        "\xe4\xb8",         /* truncated sequence before '"'     */
        "\xf0\x9f\x98",     /* truncated 4-byte sequence         */
    };
    const char *tmpl = "{\"n@\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    const char *mtmpl = "{\"__metadata__\":{\"k\":\"v@\"},"
                        "\"n\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *h = subst(tmpl, bad[i]), frag[96];
        size_t len;
        unsigned char *b = hand_file(&len, h, "x", 1);
        expect_parse_error(b, len, REFENC_EFORMAT,
                           fmt(frag, sizeof frag,
                               FILE_NAME ": header is not valid UTF-8: byte 0x%02x at byte 11",
                               (unsigned char)bad[i][0]),
                           NULL);
        free(b);
        free(h);
        h = subst(mtmpl, bad[i]);
        b = hand_file(&len, h, "x", 1);
        expect_parse_error(b, len, REFENC_EFORMAT,
                           fmt(frag, sizeof frag,
                               "header is not valid UTF-8: byte 0x%02x at byte 31",
                               (unsigned char)bad[i][0]),
                           "in the entry of '__metadata__' (at byte 9)", NULL);
        free(b);
        free(h);
    }
    /* negative controls: 2-, 3- and 4-byte characters, the extremes of the
     * valid ranges */
    static const char *const good[] = {"\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80",
                                       "\xc2\x80", "\xe0\xa0\x80", "\xed\x9f\xbf",
                                       "\xee\x80\x80", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        char *h = subst(tmpl, good[i]);
        size_t len;
        unsigned char *b = hand_file(&len, h, "x", 1);
        cr_assert_eq(expect_parse_ok(b, len), 1, "good[%zu]", i);
        free(b);
        free(h);
    }
}

/* One rule per template: "@" replaced by a valid value must parse, by each
 * invalid one must fail with the fragment. */
typedef struct {
    const char *value;
    const char *frag;
} variant;

static void check_rule(const char *tmpl, const void *data, size_t data_len, const char *good,
                       const variant *bad, size_t n_bad, const char *entry_key)
{
    char *h = subst(tmpl, good);
    size_t len;
    unsigned char *b = hand_file(&len, h, data, data_len);
    expect_parse_ok(b, len);
    free(b);
    free(h);
    for (size_t i = 0; i < n_bad; i++) {
        char prefix[128];
        h = subst(tmpl, bad[i].value);
        b = hand_file(&len, h, data, data_len);
        const char *shown = entry_key[0] == '_' ? "" : "tensor ";
        char key[64];
        fmt(key, sizeof key, "\"%s\"", entry_key);
        fmt(prefix, sizeof prefix, FILE_NAME ": %s'%s' (header entry at byte %zu): ", shown,
            entry_key, at(h, key));
        expect_parse_error(b, len, REFENC_EFORMAT, prefix, bad[i].frag, NULL);
        free(b);
        free(h);
    }
}

#define CHECK_RULE(tmpl, data, data_len, good, key, ...)                                           \
    do {                                                                                           \
        const variant bad_[] = {__VA_ARGS__};                                                      \
        check_rule(tmpl, data, data_len, good, bad_, sizeof bad_ / sizeof *bad_, key);             \
    } while (0)

/* A first valid entry, so the entry under test is not at the header's start. */
#define FIRST "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"

Test(safetensors, data_offsets_out_of_range_are_refused)
{
    CHECK_RULE("{" FIRST "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":@}}",
               three_data, 10, "[2,10]", "t",
               {"[2,18]", "data_offsets [2, 18] end past the data buffer, which has 10 bytes "
                          "(file bytes "},
               {"[10,18]", "end past the data buffer"},
               {"[12,4]", "data_offsets [12, 4]: begin is after end"},
               {"[-8,0]", "data_offsets [-8, 0] is negative"},
               {"[2,-1]", "data_offsets [2, -1] is negative"},
               {"[2]", "data_offsets is not an array of 2 integers"},
               {"[2,10,10]", "data_offsets is not an array of 2 integers"},
               {"[2.0,10]", "data_offsets is not an array of 2 integers"},
               {"[\"2\",10]", "data_offsets is not an array of 2 integers"},
               {"{\"begin\":2}", "data_offsets is not an array of 2 integers"},
               {"[2,9223372036854775807]", "end past the data buffer"});
}

Test(safetensors, overlapping_tensors_are_refused)
{
    /* a: [0, 16), b: [8, 24) over a 24-byte buffer */
    const char *h = "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                    "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}}";
    size_t len;
    char f1[96], f2[128];
    unsigned char data[32] = {0};
    unsigned char *b = hand_file(&len, h, data, 24);
    const size_t ds = 8 + strlen(h);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       fmt(f1, sizeof f1, FILE_NAME ": tensor 'b' (header entry at byte %zu)",
                           at(h, "\"b\"")),
                       fmt(f2, sizeof f2,
                           "data_offsets [8, 24] (file bytes %zu to %zu) overlap those of tensor "
                           "'a' [0, 16]",
                           ds + 8, ds + 24),
                       NULL);
    free(b);
    /* the same tensor twice at the same place */
    h = "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}";
    b = hand_file(&len, h, data, 16);
    expect_parse_error(b, len, REFENC_EFORMAT, "tensor 'b' (header entry at byte",
                       "overlap those of tensor 'a' [0, 16]", NULL);
    free(b);
    /* a zero-size tensor inside another one's bytes */
    h = "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
        "\"z\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[8,8]}}";
    b = hand_file(&len, h, data, 16);
    expect_parse_error(b, len, REFENC_EFORMAT, "tensor 'z' (header entry at byte",
                       "data_offsets [8, 8] (file bytes", "overlap those of tensor 'a' [0, 16]",
                       NULL);
    free(b);
    /* negative control: adjacent, and zero-size tensors at the boundaries */
    h = "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
        "\"z0\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[0,0]},"
        "\"z1\":{\"dtype\":\"U8\",\"shape\":[3,0],\"data_offsets\":[16,16]},"
        "\"z2\":{\"dtype\":\"BOOL\",\"shape\":[0],\"data_offsets\":[24,24]},"
        "\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[16,24]}}";
    b = hand_file(&len, h, data, 24);
    cr_assert_eq(expect_parse_ok(b, len), 5);
    free(b);
}

Test(safetensors, holes_between_or_after_tensors_are_refused)
{
    unsigned char data[32] = {0};
    const char *h = "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[16,24]}}";
    size_t len;
    char f1[96], f2[160];
    const size_t ds = 8 + strlen(h);
    unsigned char *b = hand_file(&len, h, data, 24);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       fmt(f1, sizeof f1, FILE_NAME ": tensor 'b' (header entry at byte %zu)",
                           at(h, "\"b\"")),
                       fmt(f2, sizeof f2,
                           "data_offsets [16, 24] leave a hole: data bytes [8, 16) (file bytes "
                           "%zu to %zu) belong to no tensor",
                           ds + 8, ds + 16),
                       NULL);
    free(b);
    /* a hole at the start */
    h = "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,16]}}";
    b = hand_file(&len, h, data, 16);
    expect_parse_error(b, len, REFENC_EFORMAT, "tensor 'a'",
                       "leave a hole: data bytes [0, 8)", NULL);
    free(b);
    /* bytes after the last tensor */
    h = "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}";
    b = hand_file(&len, h, data, 11);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       fmt(f1, sizeof f1,
                           FILE_NAME ": data bytes [8, 11) (file bytes %zu to %zu) belong to no "
                                     "tensor",
                           8 + strlen(h) + 8, 8 + strlen(h) + 11),
                       NULL);
    free(b);
    /* data without any tensor */
    b = hand_file(&len, "{}", data, 3);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       FILE_NAME ": data bytes [0, 3) (file bytes 10 to 13) belong to no tensor",
                       NULL);
    free(b);
    /* negative control */
    b = hand_file(&len, h, data, 8);
    cr_assert_eq(expect_parse_ok(b, len), 1);
    free(b);
}

Test(safetensors, shape_times_dtype_size_must_equal_the_byte_length)
{
    /* the example of the docs */
    const char *h =
        "{\"out.output\":{\"dtype\":\"F64\",\"shape\":[2,3,4],\"data_offsets\":[0,96]}}";
    unsigned char data[192] = {0};
    size_t len;
    unsigned char *b = hand_file(&len, h, data, 96);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       FILE_NAME ": tensor 'out.output' (header entry at byte 9): data_offsets "
                                 "[0, 96] but shape [2, 3, 4] of F64 needs 192 bytes",
                       NULL);
    free(b);
    CHECK_RULE("{" FIRST "\"t\":{\"dtype\":@,\"shape\":[3],\"data_offsets\":[2,8]}}", data, 8,
               "\"F16\"", "t",
               {"\"F32\"", "data_offsets [2, 8] but shape [3] of F32 needs 12 bytes"},
               {"\"F64\"", "data_offsets [2, 8] but shape [3] of F64 needs 24 bytes"},
               {"\"BOOL\"", "data_offsets [2, 8] but shape [3] of BOOL needs 3 bytes"});
    CHECK_RULE("{" FIRST "\"t\":{\"dtype\":\"F64\",\"shape\":@,\"data_offsets\":[2,10]}}", data,
               10, "[]", "t", {"[0]", "but shape [0] of F64 needs 0 bytes"},
               {"[1,1,2]", "but shape [1, 1, 2] of F64 needs 16 bytes"});
}

Test(safetensors, shape_must_be_non_negative_integers_that_do_not_overflow)
{
    unsigned char data[8] = {0};
    CHECK_RULE("{" FIRST "\"t\":{\"dtype\":\"F64\",\"shape\":@,\"data_offsets\":[2,2]}}", data, 2,
               "[1099511627776,0]", "t",
               {"[1099511627776,1099511627776]",
                "shape [1099511627776, 1099511627776] of F64 overflows: its size in bytes "
                "exceeds 18446744073709551615"},
               {"[2305843009213693952]", "shape [2305843009213693952] of F64 overflows"},
               {"[4294967296,4294967296,0]", "of F64 overflows"},
               {"[2,-3]", "shape[1] = -3 is negative"},
               {"[-1]", "shape[0] = -1 is negative"},
               {"[2.0]", "shape[0] is not an integer"},
               {"[\"2\"]", "shape[0] is not an integer"},
               {"[null]", "shape[0] is not an integer"},
               {"2", "shape is not an array"},
               {"{}", "shape is not an array"},
               {"[1,1,1,1,1,1,1,1,0]", "shape has 9 dimensions, more than the 8 supported"});
    /* a zero dimension does not excuse the others: 2^61 bytes of U8 fit,
     * 2^61 elements of F64 (2^64 bytes) do not */
    CHECK_RULE("{" FIRST "\"t\":{\"dtype\":@,\"shape\":[0,2305843009213693952],"
               "\"data_offsets\":[2,2]}}",
               data, 2, "\"U8\"", "t",
               {"\"F64\"", "shape [0, 2305843009213693952] of F64 overflows"});
}

Test(safetensors, unknown_or_missing_dtype_is_refused)
{
    unsigned char data[8] = {0};
    CHECK_RULE("{" FIRST "\"t\":{\"dtype\":@,\"shape\":[1],\"data_offsets\":[2,3]}}", data, 3,
               "\"U8\"", "t",
               {"\"F8_E4M3\"", "unknown dtype 'F8_E4M3' (known: F64, F32, F16, BF16, I64, U8, "
                               "BOOL)"},
               {"\"I32\"", "unknown dtype 'I32'"},
               {"\"u8\"", "unknown dtype 'u8'"},
               {"\"\"", "unknown dtype ''"},
               {"\"U8\\u0027\"", "unknown dtype 'U8\\x27'"},
               {"8", "dtype is not a string"},
               {"null", "dtype is not a string"});
}

Test(safetensors, duplicate_names_are_refused)
{
    const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}";
    size_t len;
    char frag[128];
    unsigned char *b = hand_file(&len, h, "xyz", 3);
    const size_t second = 8 + (size_t)(strstr(strstr(h, "\"b\""), "\"a\"") - h);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       fmt(frag, sizeof frag,
                           FILE_NAME ": duplicate tensor name 'a' at byte %zu (header keys must "
                                     "be unique)",
                           second),
                       NULL);
    free(b);
    /* the same name spelt with an escape is still the same name */
    h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
        "\"\\u0061\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}";
    b = hand_file(&len, h, "xy", 2);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       fmt(frag, sizeof frag, "duplicate tensor name 'a' at byte %zu",
                           at(h, "\"\\u0061\"")),
                       NULL);
    free(b);
    /* a key repeated inside an entry */
    h = "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    b = hand_file(&len, h, "x", 1);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       FILE_NAME ": 'a' (header entry at byte 9): duplicate key near byte 34",
                       NULL);
    free(b);
    /* negative control: different names */
    h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
        "\"A\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}";
    b = hand_file(&len, h, "xy", 2);
    cr_assert_eq(expect_parse_ok(b, len), 2);
    free(b);
}

Test(safetensors, entry_must_have_exactly_dtype_shape_and_data_offsets)
{
    unsigned char data[8] = {0};
    CHECK_RULE("{" FIRST "\"t\":@}", data, 3,
               "{\"data_offsets\":[2,3],\"shape\":[1],\"dtype\":\"U8\"}", "t",
               {"{\"shape\":[1],\"data_offsets\":[2,3]}", "missing key 'dtype'"},
               {"{\"dtype\":\"U8\",\"data_offsets\":[2,3]}", "missing key 'shape'"},
               {"{\"dtype\":\"U8\",\"shape\":[1]}", "missing key 'data_offsets'"},
               {"{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3],\"offset\":0}",
                "unexpected key 'offset' (an entry has exactly dtype, shape and data_offsets)"},
               {"{}", "missing key 'dtype'"},
               {"[\"U8\",[1],[2,3]]", "entry is not an object"},
               {"\"U8\"", "entry is not an object"},
               {"null", "entry is not an object"});
}

Test(safetensors, metadata_must_be_an_object_of_strings)
{
    unsigned char data[8] = {0};
    CHECK_RULE("{" FIRST "\"__metadata__\":@}", data, 2, "{\"format\":\"pt\",\"x\":\"\"}",
               "__metadata__",
               {"{\"format\":\"pt\",\"version\":1}",
                "the value of 'version' is not a string (metadata values must be strings)"},
               {"{\"n\":null}", "the value of 'n' is not a string"},
               {"{\"o\":{\"p\":\"q\"}}", "the value of 'o' is not a string"},
               {"{\"l\":[\"a\"]}", "the value of 'l' is not a string"},
               {"{\"b\":true}", "the value of 'b' is not a string"},
               {"[\"pt\"]", "is not an object"},
               {"\"pt\"", "is not an object"});
}

Test(safetensors, empty_tensor_name_is_refused)
{
    unsigned char data[8] = {0};
    const char *h = "{" FIRST "\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}";
    size_t len;
    char frag[96];
    unsigned char *b = hand_file(&len, h, data, 3);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       fmt(frag, sizeof frag,
                           FILE_NAME ": tensor '' (header entry at byte %zu): empty tensor name",
                           at(h, "\"\":")),
                       NULL);
    free(b);
    /* negative control: a one-character name */
    b = hand_file(&len, "{" FIRST "\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}",
                  data, 3);
    cr_assert_eq(expect_parse_ok(b, len), 2);
    free(b);
}

Test(safetensors, message_offsets_point_at_the_entry_key_and_names_are_shown_safely)
{
    /* the third entry is wrong; keys with escapes and braces before it must
     * not confuse the position */
    const char *h = "{\"x\\\"{[\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"__metadata__\":{\"k\":\"}]\\\"\"},"
                    "\"bad\\n'name\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,2]}}";
    size_t len;
    char frag[128];
    unsigned char *b = hand_file(&len, h, "xy", 2);
    expect_parse_error(b, len, REFENC_EFORMAT,
                       fmt(frag, sizeof frag,
                           FILE_NAME ": tensor 'bad\\x0a\\x27name' (header entry at byte %zu): "
                                     "data_offsets [1, 2] but shape [2] of U8 needs 2 bytes",
                           at(h, "\"bad")),
                       NULL);
    free(b);
    /* a very long name is cut in the message */
    char *longh = malloc(4096);
    char name[1001];
    memset(name, 'n', 1000);
    name[1000] = '\0';
    snprintf(longh, 4096, "{\"%s\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,1]}}", name);
    b = hand_file(&len, longh, "x", 1);
    expect_parse_error(b, len, REFENC_EFORMAT, "nnnnnnnnnn...' (header entry at byte 9): ",
                       "needs 2 bytes", NULL);
    free(b);
    free(longh);
}

/* ----------------------------------------------- random corruptions */

/* What a parse that succeeded must guarantee to its users. */
static void check_invariants(const refenc_st_file *f, const unsigned char *buf, size_t len)
{
    size_t at = SIZE_MAX;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const refenc_st_tensor *t = &f->tensors[i];
        cr_assert(t->name != NULL && t->name[0] != '\0');
        cr_assert(t->ndim <= REFENC_ST_MAX_NDIM);
        size_t numel = 1;
        for (size_t d = 0; d < t->ndim; d++)
            numel *= t->shape[d]; /* no overflow: checked by the reader */
        cr_assert_eq(t->numel, numel);
        cr_assert_eq(t->nbytes, numel * refenc_st_dtype_size(t->dtype));
        cr_assert(t->file_offset <= len && t->nbytes <= len - t->file_offset);
        cr_assert_eq(t->data, buf + t->file_offset);
        if (i == 0)
            at = t->file_offset;
        cr_assert_eq(t->file_offset, at, "tensors do not tile the data");
        at += t->nbytes;
        if (t->numel > 0 && t->numel < 4096) {
            double d[4096];
            int64_t q[4096];
            refenc_error err;
            int st = t->dtype <= REFENC_ST_BF16 ? refenc_st_to_f64(d, f, t, &err)
                                                : refenc_st_to_i64(q, f, t, &err);
            cr_assert(st == REFENC_OK || (t->dtype == REFENC_ST_BOOL && st == REFENC_EFORMAT));
        }
    }
    if (f->n_tensors > 0)
        cr_assert_eq(at, len, "the tensors do not end at the end of the file");
}

Test(safetensors, random_corruptions_are_refused_cleanly_or_parse_consistently)
{
    /* the base: a header with metadata, escapes and zero-size tensors */
    const char *h = "{\"__metadata__\":{\"format\":\"pt\",\"k\\\"\":\"v\\u00e9\"},"
                    "\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                    "\"z\":{\"dtype\":\"F16\",\"shape\":[0,3],\"data_offsets\":[16,16]},"
                    "\"m\":{\"dtype\":\"BOOL\",\"shape\":[2,1],\"data_offsets\":[16,18]},"
                    "\"t\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[18,20]}}  ";
    unsigned char data[20] = {0};
    data[16] = 1;
    size_t base_len;
    unsigned char *base = hand_file(&base_len, h, data, sizeof data);
    cr_assert_eq(expect_parse_ok(base, base_len), 4);
    static const char interesting[] = "{}[]\",:-0123456789 \\eE.u\x80\xff";
    gsl_rng *rng = test_rng(11);
    size_t accepted = 0, refused = 0;
    for (int it = 0; it < 20000; it++) {
        size_t len = base_len;
        /* sometimes cut or extend the file */
        const double r = gsl_rng_uniform(rng);
        if (r < 0.1)
            len = gsl_rng_uniform_int(rng, base_len);
        else if (r < 0.15)
            len = base_len + 1 + gsl_rng_uniform_int(rng, 16);
        unsigned char *b = malloc(len);
        cr_assert_not_null(b);
        for (size_t i = 0; i < len; i++)
            b[i] = i < base_len ? base[i] : ' ';
        const int n_mut = 1 + (int)gsl_rng_uniform_int(rng, 4);
        for (int m = 0; m < n_mut && len > 0; m++) {
            const size_t pos = gsl_rng_uniform_int(rng, len);
            const double kind = gsl_rng_uniform(rng);
            if (kind < 0.4)
                b[pos] = interesting[gsl_rng_uniform_int(rng, sizeof interesting - 1)];
            else if (kind < 0.8)
                b[pos] = (unsigned char)gsl_rng_uniform_int(rng, 256);
            else /* the header length: near its true value */
                b[0] = (unsigned char)(b[0] + gsl_rng_uniform_int(rng, 9) - 4);
        }
        refenc_st_file f;
        refenc_error err;
        refenc_error_clear(&err);
        int st = refenc_st_parse(&f, b, len, FILE_NAME, &err);
        if (st == REFENC_OK) {
            check_invariants(&f, b, len);
            refenc_st_free(&f);
            accepted++;
        } else {
            cr_assert_eq(st, REFENC_EFORMAT, "iteration %d: status %d: %s", it, st, err.message);
            cr_assert(strncmp(err.message, FILE_NAME ": ", strlen(FILE_NAME) + 2) == 0,
                      "iteration %d: %s", it, err.message);
            assert_empty(&f);
            refused++;
        }
        free(b);
    }
    /* both outcomes happen: the mutations reach past the first check */
    cr_assert(accepted > 100 && refused > 100, "seed %lu: %zu accepted, %zu refused",
              test_seed(), accepted, refused);
    cr_log_info("random corruptions: %zu accepted, %zu refused", accepted, refused);
    gsl_rng_free(rng);
    free(base);
}

/* ------------------------------------------ cross-check with Python */

/* scripts/st_crosscheck.py writes and reads the format independently (numpy
 * and json only); both sides build the same set of tensors from the same
 * formulas (see the script's docstring). */
#define CROSSCHECK "scripts/st_crosscheck.py"
#define PYTHON "/usr/bin/python3"

typedef struct {
    double x[6], scalar;
    float f32[4];
    uint16_t f16[16], bf16[16];
    int64_t tokens[3];
    uint8_t mask[4], bytes[3];
    refenc_st_entry e[9];
} crosscheck_set;

static void crosscheck_build(crosscheck_set *s)
{
    static const double special_f16[10] = {65520.0, 65519.0, 0x1p-25, 3 * 0x1p-25, 1 + 0x1p-11,
                                           2.385, -0.0, 1e-8, -1e9, 6.103515625e-05};
    static const double special_bf16[10] = {1 + 0x1p-8, 1 + 3 * 0x1p-8, 1 + 0x1p-8 + 0x1p-40,
                                            2.385, 0x1.ffp127, 0x1p-134, 3 * 0x1p-134, -1e-39,
                                            1e39, -0.0};
    for (int i = 0; i < 6; i++)
        s->x[i] = (double)(i * 37 % 11 - 5) / 64 + 2.385;
    for (int i = 0; i < 4; i++)
        s->f32[i] = (float)s->x[i];
    for (int i = 0; i < 16; i++) {
        s->f16[i] = refenc_double_to_f16(i < 6 ? s->x[i] : special_f16[i - 6]);
        s->bf16[i] = refenc_double_to_bf16(i < 6 ? s->x[i] : special_bf16[i - 6]);
    }
    s->scalar = -2.385;
    const int64_t tokens[3] = {-7, 0, ((int64_t)1 << 62) + 3};
    const uint8_t mask[4] = {1, 0, 0, 1}, bytes[3] = {0, 128, 255};
    memcpy(s->tokens, tokens, sizeof tokens);
    memcpy(s->mask, mask, sizeof mask);
    memcpy(s->bytes, bytes, sizeof bytes);
    const refenc_st_entry e[9] = {
        {"in.x", REFENC_ST_F64, 2, {2, 3}, s->x},
        {"w.f32", REFENC_ST_F32, 1, {4}, s->f32},
        {"w.f16", REFENC_ST_F16, 2, {2, 8}, s->f16},
        {"w.bf16", REFENC_ST_BF16, 1, {16}, s->bf16},
        {"in.tokens", REFENC_ST_I64, 1, {3}, s->tokens},
        {"in.mask", REFENC_ST_BOOL, 2, {2, 2}, s->mask},
        {"u.bytes", REFENC_ST_U8, 1, {3}, s->bytes},
        {"s.scalar", REFENC_ST_F64, 0, {0}, &s->scalar},
        {"z.empty", REFENC_ST_F32, 2, {0, 4}, NULL},
    };
    memcpy(s->e, e, sizeof e);
}

static int run(const char *fmt_, const char *arg)
{
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd, fmt_, arg);
    return system(cmd);
}

Test(safetensors, python_writer_and_reader_agree_with_ours)
{
    if (access(CROSSCHECK, R_OK) != 0)
        cr_skip_test(CROSSCHECK " not found: run from the repository root");
    if (access(PYTHON, X_OK) != 0 || system(PYTHON " -c 'import numpy' 2>/dev/null") != 0)
        cr_skip_test(PYTHON " with numpy is not available");
    crosscheck_set *s = malloc(sizeof *s);
    cr_assert_not_null(s);
    crosscheck_build(s);
    json_t *meta = json_pack("{s:s, s:s, s:s}", "format", "pt", "case", "crosscheck",
                             "\xc3\xa9t\xc3\xa9", "\xe2\x88\x9a \"q\"\n");
    char *dir = make_dir(), hf[PATH_MAX], ours[PATH_MAX];
    refenc_error err;
    refenc_st_file f;

    /* theirs, read by us */
    cr_assert_eq(run(PYTHON " " CROSSCHECK " write '%s'", join(hf, dir, "hf.safetensors")), 0);
    cr_assert_eq(refenc_st_read(&f, hf, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(f.n_tensors, 9);
    cr_assert(json_equal(f.metadata, meta), "metadata differs");
    for (size_t i = 0; i < 9; i++)
        check_same_tensor(&f, &s->e[i]); /* F16 and BF16: our encoder = numpy's = exact */
    refenc_st_free(&f);

    /* ours, read by theirs */
    cr_assert_eq(refenc_st_write(join(ours, dir, "refenc.safetensors"), s->e, 9, meta, &err),
                 REFENC_OK, "%s", err.message);
    cr_assert_eq(run(PYTHON " " CROSSCHECK " check '%s' >/dev/null", ours), 0,
                 "the Python reader refuses or disagrees with our file (run it by hand: "
                 CROSSCHECK " check %s)", ours);
    /* negative control: a different value is caught by the Python side */
    s->x[4] = 2.386;
    cr_assert_eq(refenc_st_write(ours, s->e, 9, meta, &err), REFENC_OK, "%s", err.message);
    cr_assert_neq(run(PYTHON " " CROSSCHECK " check '%s' 2>/dev/null", ours), 0);
    json_decref(meta);
    free(s);
    rm_dir(dir);
}
