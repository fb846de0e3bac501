/* sha256 digests of a golden part's plan and tensors (digest.h). */
#include "digest.h"

#include <unistd.h>

#include "../io/file_read.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void golden_digest_str(struct sha256_ctx *h, const char *s)
{
    const char *v = s != NULL ? s : "";
    sha256_update(h, strlen(v) + 1, (const uint8_t *)v); /* with its NUL: a separator */
}

/* n bytes, after their count: two fields never run into each other */
void golden_digest_bytes(struct sha256_ctx *h, const void *p, size_t n)
{
    const uint64_t len = n;
    sha256_update(h, sizeof len, (const uint8_t *)&len);
    if (p != NULL && n > 0)
        sha256_update(h, n, p);
}

/* A named tensor: its name, shape and bytes. */
void golden_digest_tensor(struct sha256_ctx *h, const char *name, size_t ndim, const size_t *shape, const void *p,
                        size_t nbytes)
{
    golden_digest_str(h, name);
    uint64_t dims[REFENC_ST_MAX_NDIM + 1] = {ndim};
    for (size_t d = 0; d < ndim && d < REFENC_ST_MAX_NDIM; d++)
        dims[d + 1] = shape[d];
    golden_digest_bytes(h, dims, (ndim + 1) * sizeof *dims);
    golden_digest_bytes(h, p, nbytes);
}

void golden_digest_hex(char hex[65], struct sha256_ctx *h)
{
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_digest(h, sizeof digest, digest);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}

/* ---- the tensors of a part ------------------------------------------------------------ */

typedef struct {
    const char *name;
    refenc_st_dtype dtype;
    size_t ndim;
    const size_t *shape;
    const void *data;
    size_t nbytes;
} tensor_view;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const tensor_view *)a)->name, ((const tensor_view *)b)->name);
}

/* Sorts the views by name (names are unique in a file) and hashes them;
 * 0 when there was no memory for the views. */
static int views_sha256(char hex[65], tensor_view *v, size_t n)
{
    if (v == NULL)
        return 0;
    struct sha256_ctx h;
    sha256_init(&h);
    qsort(v, n, sizeof *v, by_name);
    for (size_t i = 0; i < n; i++) {
        golden_digest_str(&h, refenc_st_dtype_name(v[i].dtype));
        golden_digest_tensor(&h, v[i].name, v[i].ndim, v[i].shape, v[i].data, v[i].nbytes);
    }
    golden_digest_hex(hex, &h);
    return 1;
}

int golden_entries_sha256(char hex[65], const refenc_st_entry *e, size_t n)
{
    tensor_view *v = calloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; v != NULL && i < n; i++) {
        size_t numel = 1;
        for (size_t d = 0; d < e[i].ndim; d++)
            numel *= e[i].shape[d];
        v[i] = (tensor_view){e[i].name, e[i].dtype, e[i].ndim, e[i].shape, e[i].data,
                             numel * refenc_st_dtype_size(e[i].dtype)};
    }
    const int ok = views_sha256(hex, v, n);
    free(v);
    return ok;
}

int golden_file_sha256(char hex[65], const refenc_st_file *f)
{
    tensor_view *v = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *v);
    for (size_t i = 0; v != NULL && i < f->n_tensors; i++) {
        const refenc_st_tensor *t = &f->tensors[i];
        v[i] = (tensor_view){t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes};
    }
    const int ok = views_sha256(hex, v, f->n_tensors);
    free(v);
    return ok;
}

static int entry_by_name(const void *a, const void *b)
{
    return strcmp((*(const refenc_st_entry *const *)a)->name, (*(const refenc_st_entry *const *)b)->name);
}

/* Hashes entry i of s as golden_digest_tensor does, its bytes read back in chunks. */
static int stream_tensor(struct sha256_ctx *h, refenc_st_stream *s, size_t i, unsigned char *buf, size_t chunk,
                         refenc_error *err)
{
    const refenc_st_entry *e = &s->e[i];
    golden_digest_str(h, refenc_st_dtype_name(e->dtype));
    golden_digest_str(h, e->name);
    uint64_t dims[REFENC_ST_MAX_NDIM + 1] = {e->ndim};
    for (size_t d = 0; d < e->ndim && d < REFENC_ST_MAX_NDIM; d++)
        dims[d + 1] = e->shape[d];
    golden_digest_bytes(h, dims, (e->ndim + 1) * sizeof *dims);
    const uint64_t len = s->nbytes[i];
    sha256_update(h, sizeof len, (const uint8_t *)&len);
    for (size_t at = 0; at < s->nbytes[i];) {
        const size_t n = s->nbytes[i] - at < chunk ? s->nbytes[i] - at : chunk;
        const int st = refenc_st_stream_get(s, i, at, buf, n, err);
        if (st != REFENC_OK)
            return st;
        sha256_update(h, n, buf);
        at += n;
    }
    return REFENC_OK;
}

int golden_stream_sha256(char hex[65], refenc_st_stream *s, refenc_error *err)
{
    const size_t chunk = (size_t)1 << 20;
    const refenc_st_entry **order = calloc(s->n ? s->n : 1, sizeof *order);
    unsigned char *buf = malloc(chunk);
    int st = order == NULL || buf == NULL ? refenc_error_set(err, REFENC_ENOMEM, "out of memory") : REFENC_OK;
    if (st == REFENC_OK) {
        for (size_t i = 0; i < s->n; i++)
            order[i] = &s->e[i];
        qsort(order, s->n, sizeof *order, entry_by_name); /* names are unique: the order is total */
        struct sha256_ctx h;
        sha256_init(&h);
        for (size_t k = 0; k < s->n && st == REFENC_OK; k++)
            st = stream_tensor(&h, s, (size_t)(order[k] - s->e), buf, chunk, err);
        if (st == REFENC_OK)
            golden_digest_hex(hex, &h);
    }
    free(order);
    free(buf);
    return st;
}

static int tensor_by_name(const void *a, const void *b)
{
    return strcmp((*(const refenc_st_tensor *const *)a)->name, (*(const refenc_st_tensor *const *)b)->name);
}

/* Hashes tensor t as golden_digest_tensor does, its bytes read from fd in chunks. */
static int read_tensor(struct sha256_ctx *h, const refenc_st_tensor *t, int fd, const char *path, unsigned char *buf,
                       size_t chunk, refenc_error *err)
{
    golden_digest_str(h, refenc_st_dtype_name(t->dtype));
    golden_digest_str(h, t->name);
    uint64_t dims[REFENC_ST_MAX_NDIM + 1] = {t->ndim};
    for (size_t d = 0; d < t->ndim && d < REFENC_ST_MAX_NDIM; d++)
        dims[d + 1] = t->shape[d];
    golden_digest_bytes(h, dims, (t->ndim + 1) * sizeof *dims);
    const uint64_t len = t->nbytes;
    sha256_update(h, sizeof len, (const uint8_t *)&len);
    for (size_t at = 0; at < t->nbytes;) {
        const size_t n = t->nbytes - at < chunk ? t->nbytes - at : chunk;
        const int st = refenc_read_at(fd, buf, n, t->file_offset + at, path, err);
        if (st != REFENC_OK)
            return st;
        sha256_update(h, n, buf);
        at += n;
    }
    return REFENC_OK;
}

int golden_file_sha256_read(char hex[65], const refenc_st_file *f, refenc_error *err)
{
    const size_t chunk = (size_t)1 << 20;
    const refenc_st_tensor **order = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *order);
    unsigned char *buf = malloc(chunk);
    int fd = -1;
    size_t size;
    int st = order == NULL || buf == NULL ? refenc_error_set(err, REFENC_ENOMEM, "out of memory") : REFENC_OK;
    if (st == REFENC_OK)
        st = refenc_open_regular(&fd, &size, f->path, err);
    if (st == REFENC_OK) {
        for (size_t i = 0; i < f->n_tensors; i++)
            order[i] = &f->tensors[i];
        qsort(order, f->n_tensors, sizeof *order, tensor_by_name); /* names are unique: the order is total */
        struct sha256_ctx h;
        sha256_init(&h);
        for (size_t k = 0; k < f->n_tensors && st == REFENC_OK; k++)
            st = read_tensor(&h, order[k], fd, f->path, buf, chunk, err);
        if (st == REFENC_OK)
            golden_digest_hex(hex, &h);
    }
    if (fd >= 0)
        close(fd);
    free(order);
    free(buf);
    return st;
}
