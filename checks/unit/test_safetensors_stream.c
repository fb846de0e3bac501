/* A safetensors file written in pieces (refenc_st_stream, safetensors.h):
 * whatever the order of the pieces and whatever the room the first header
 * left, the file is byte for byte the one refenc_st_write makes of the same
 * tensors and metadata (the whole-file writer is the truth, tested against
 * the spec and Python's writer in test_safetensors.c). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/io/safetensors.h"

/* Every dtype size, names that do not sort as the layout does, odd sizes. */
static const double f64a[7] = {2.385, -0.0, 0x1p-1074, 1e308, -7.25e-3, 3.0, -1.5};
static const double f64b[5] = {11.5, -2.75, 0x1.8p-3, 6.125, 9.0};
static const float f32v[6] = {2.385f, -1.5e-40f, 3.4e38f, -0.0f, 1.0f / 3, 7.0f};
static const uint16_t f16v[3] = {0x3C00, 0x0001, 0xFBFF};
static const int64_t i64v[5] = {INT64_MIN, -1, 0, 42, INT64_MAX};
static const uint8_t boolv[5] = {1, 0, 0, 1, 1};

#define N_E 6
static const refenc_st_entry entries[N_E] = {
    {"slice.out.b", REFENC_ST_F64, 2, {7, 1}, f64a},
    {"a.f64", REFENC_ST_F64, 1, {5}, f64b},
    {"m.f32", REFENC_ST_F32, 2, {2, 3}, f32v},
    {"h.f16", REFENC_ST_F16, 1, {3}, f16v},
    {"in.tokens", REFENC_ST_I64, 1, {5}, i64v},
    {"in.mask", REFENC_ST_BOOL, 1, {5}, boolv},
};

static char *make_dir(void)
{
    const char *t = getenv("TMPDIR");
    char *d = malloc(PATH_MAX);
    cr_assert_not_null(d);
    snprintf(d, PATH_MAX, "%s/refenc-sts-XXXXXX", t != NULL && t[0] != '\0' ? t : "/tmp");
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
        char p[PATH_MAX + 256];
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    cr_assert(fa != NULL && fb != NULL, "%s or %s cannot be opened", a, b);
    int same = 1, ca, cb;
    do {
        ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
    } while (same && ca != EOF);
    fclose(fa);
    fclose(fb);
    return same;
}

static size_t nbytes(const refenc_st_entry *e)
{
    size_t n = refenc_st_dtype_size(e->dtype);
    for (size_t d = 0; d < e->ndim; d++)
        n *= e->shape[d];
    return n;
}

/* Streams the entries to path: the BOOL one given at open, the others put
 * in pieces of 3 bytes from the last piece of the last entry backwards, the
 * room left for a header with metadata `guess`, then committed with `meta`.
 * skew: the first piece put that many bytes lower (the negative control). */
static void stream(const char *path, const json_t *guess, const json_t *meta, size_t skew)
{
    refenc_st_entry e[N_E];
    memcpy(e, entries, sizeof e);
    for (size_t i = 0; i + 1 < N_E; i++)
        e[i].data = NULL;
    refenc_st_stream s;
    refenc_error err;
    cr_assert_eq(refenc_st_stream_open(&s, path, e, N_E, guess, &err), REFENC_OK, "%s", err.message);
    for (size_t k = N_E - 1; k-- > 0;) {
        const size_t n = nbytes(&entries[k]);
        for (size_t end = n; end > 0; end = end > 3 ? end - 3 : 0) {
            const size_t at = end > 3 ? end - 3 : 0, off = at >= skew ? at - skew : at;
            cr_assert_eq(refenc_st_stream_put(&s, k, off, (const unsigned char *)entries[k].data + at, end - at,
                                              &err), REFENC_OK, "%s", err.message);
            skew = 0;
        }
    }
    cr_assert_eq(refenc_st_stream_commit(&s, meta, &err), REFENC_OK, "%s", err.message);
}

/* The header's room from a guess of the same length, a shorter one and a
 * longer one (the data moved to a later offset, then to an earlier one). */
Test(safetensors_stream, pieces_in_any_order_give_the_whole_writers_bytes)
{
    char *dir = make_dir(), whole[PATH_MAX + 32], part[PATH_MAX + 32];
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(part, sizeof part, "%s/part.safetensors", dir);
    json_t *meta = json_pack("{s:s, s:s}", "prec", "96", "tensors_sha256", "0123456789abcdef");
    refenc_error err;
    cr_assert_eq(refenc_st_write(whole, entries, N_E, meta, &err), REFENC_OK, "%s", err.message);
    json_t *guesses[3] = {json_pack("{s:s, s:s}", "prec", "12", "tensors_sha256", "fedcba9876543210"),
                          json_pack("{s:s}", "prec", "1"),
                          json_pack("{s:s, s:s}", "prec", "1234567890123456789012345", "tensors_sha256", "x")};
    for (int g = 0; g < 3; g++) {
        stream(part, guesses[g], meta, 0);
        cr_expect(same_file(part, whole), "guess %d: the streamed file differs from refenc_st_write's", g);
        json_decref(guesses[g]);
    }
    /* negative control: one piece 8 bytes off its place is seen */
    stream(part, meta, meta, 8);
    cr_expect(!same_file(part, whole), "a piece put at the wrong offset went unnoticed");
    cr_expect_eq(count_entries(dir), 2, "temporary files were left");
    json_decref(meta);
    rm_dir(dir);
}

/* Out-of-range pieces are refused; an aborted stream leaves nothing, and
 * neither the file it would have replaced is touched. */
Test(safetensors_stream, bad_pieces_are_refused_and_abort_leaves_nothing)
{
    char *dir = make_dir(), path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/p.safetensors", dir);
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, entries, 1, NULL, &err), REFENC_OK, "%s", err.message);
    refenc_st_stream s;
    cr_assert_eq(refenc_st_stream_open(&s, path, entries, N_E, NULL, &err), REFENC_OK, "%s", err.message);
    const double x = 1;
    cr_expect_eq(refenc_st_stream_put(&s, 0, 7 * 8 - 4, &x, 8, &err), REFENC_EINVAL);
    cr_expect_eq(refenc_st_stream_put(&s, N_E, 0, &x, 8, &err), REFENC_EINVAL);
    cr_expect_eq(refenc_st_stream_put(&s, 0, 6 * 8, &x, 8, &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(count_entries(dir), 2, "no temporary file beside the target");
    refenc_st_stream_abort(&s);
    refenc_st_stream_abort(&s);
    cr_expect_eq(count_entries(dir), 1, "abort left a temporary file");
    refenc_st_file f;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(f.n_tensors, 1, "the file an aborted stream would replace was changed");
    refenc_st_free(&f);
    cr_expect_eq(refenc_st_stream_commit(&s, NULL, &err), REFENC_EINVAL, "an aborted stream committed");
    rm_dir(dir);
}
