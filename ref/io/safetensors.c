#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/alloc.h"
#include "../core/text.h"
#include "atomic_write.h"
#include "file_read.h"
#include "half.h"

/* Data is copied byte for byte between the file and memory: the host must
 * store numbers little-endian, as the format does. */
#if !defined(__BYTE_ORDER__) || !defined(__ORDER_LITTLE_ENDIAN__)
#error "refenc needs __BYTE_ORDER__ to check that the host is little-endian"
#endif
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian; refenc supports little-endian hosts only");
_Static_assert(sizeof(double) == 8 && sizeof(float) == 4, "IEEE binary64 and binary32 expected");

/* ---------------------------------------------------------------- dtypes */

static const struct {
    const char *name;
    size_t size;
} dtype_table[] = {
    [REFENC_ST_F64] = {"F64", 8}, [REFENC_ST_F32] = {"F32", 4}, [REFENC_ST_F16] = {"F16", 2},
    [REFENC_ST_BF16] = {"BF16", 2}, [REFENC_ST_I64] = {"I64", 8}, [REFENC_ST_U8] = {"U8", 1},
    [REFENC_ST_BOOL] = {"BOOL", 1},
};
#define N_DTYPES (sizeof dtype_table / sizeof dtype_table[0])
#define DTYPE_LIST "F64, F32, F16, BF16, I64, U8, BOOL"

static int dtype_valid(refenc_st_dtype d)
{
    return (unsigned)d < N_DTYPES;
}

const char *refenc_st_dtype_name(refenc_st_dtype d)
{
    return dtype_valid(d) ? dtype_table[d].name : "?";
}

size_t refenc_st_dtype_size(refenc_st_dtype d)
{
    return dtype_valid(d) ? dtype_table[d].size : 0;
}

int refenc_st_dtype_parse(refenc_st_dtype *d, const char *name)
{
    for (size_t i = 0; i < N_DTYPES; i++) {
        if (strcmp(name, dtype_table[i].name) == 0) {
            *d = (refenc_st_dtype)i;
            return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- helpers */

/* A name as it appears in a message: bytes that would garble a terminal line
 * (controls, quote, backslash) as \xNN, cut after about 80 bytes (at a UTF-8
 * character boundary) with "...". */
#define SHOW_MAX 128
static const char *show(char out[SHOW_MAX], const char *name)
{
    size_t o = 0;
    for (size_t i = 0; name[i] != '\0'; i++) {
        const unsigned char c = (unsigned char)name[i];
        if (o >= 80 && (c & 0xC0) != 0x80) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c == 0x7F || c == '\'' || c == '\\')
            o += (size_t)snprintf(out + o, SHOW_MAX - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
    return out;
}

/* "[2, 3, 4]": at most 8 dimensions of at most 20 digits fit in SHAPE_MAX. */
#define SHAPE_MAX (2 + REFENC_ST_MAX_NDIM * 22 + 1)

/* Checked a * b. */
static int mul_ok(size_t *r, size_t a, size_t b)
{
    return !__builtin_mul_overflow(a, b, r);
}

/* Bytes of a tensor: the product of its dimensions times the dtype size.
 * Refused (returns 0) when the product of the non-zero dimensions times the
 * dtype size overflows, even if another dimension is 0: such a shape has no
 * use and every stride computed from it would overflow.  *numel and *nbytes
 * are the true counts. */
static int tensor_size(size_t *numel, size_t *nbytes, const size_t *shape, size_t ndim,
                       size_t elsize)
{
    size_t nz = elsize, n = 1;
    int zero = 0;
    for (size_t i = 0; i < ndim; i++) {
        if (shape[i] == 0)
            zero = 1;
        else if (!mul_ok(&nz, nz, shape[i]))
            return 0;
    }
    if (!zero)
        n = nz / elsize;
    *numel = zero ? 0 : n;
    *nbytes = zero ? 0 : nz;
    return 1;
}

/* ------------------------------------------------------ reading: context */

typedef struct {
    const char *file;           /* name for messages                      */
    const unsigned char *hdr;   /* the header bytes (file offset 8)       */
    size_t hdr_len;             /* N                                      */
    size_t data_start;          /* 8 + N                                  */
    size_t data_size;           /* file size - 8 - N                      */
    const size_t *entry_at;     /* file offset of each header key, in
                                   header order, or NULL if unknown       */
} parse_ctx;

static char *decode_key(const unsigned char *t, size_t n);

/* Where the header entry with index k (in header order) and this name starts
 * in the file: its key's opening quote, or the header's start if unknown.
 * The scan's k-th key is jansson's k-th (jansson keeps insertion order); the
 * key is decoded again to make sure, so a message never points elsewhere. */
static size_t entry_offset(const parse_ctx *c, size_t k, const char *name)
{
    if (c->entry_at == NULL)
        return 8;
    const size_t s = c->entry_at[k] - 8;
    size_t e = s + 1;
    while (e < c->hdr_len && c->hdr[e] != '"')
        e += c->hdr[e] == '\\' ? 2 : 1;
    if (e >= c->hdr_len)
        return 8;
    char *key = decode_key(c->hdr + s, e + 1 - s);
    const int same = key != NULL && strcmp(key, name) == 0;
    free(key);
    return same ? c->entry_at[k] : 8;
}

/* The error of one header entry: "FILE: tensor 'NAME' (header entry at byte
 * X): DETAIL". */
__attribute__((format(printf, 6, 7))) static int
entry_error(refenc_error *err, int status, const parse_ctx *c, const char *name, size_t k,
            const char *fmt, ...)
{
    char detail[REFENC_ERRMSG_MAX], shown[SHOW_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    const char *what = strcmp(name, "__metadata__") == 0 ? "" : "tensor ";
    return refenc_error_set(err, status, "%s: %s'%s' (header entry at byte %zu): %s", c->file,
                            what, show(shown, name), entry_offset(c, k, name), detail);
}

/* Scans the keys of the outermost object of a JSON text h[0..n) that starts
 * with '{': stores the offset of each key's opening quote in starts[0..cap)
 * and returns how many keys it saw; *last_start and *last_end delimit the last
 * key token seen and *depth is the nesting depth at the end (1: inside the
 * outer object, between entries).  Never reads outside h[0..n); the result
 * is meaningful on valid JSON or on a prefix of valid JSON (where jansson
 * stopped), which is all it is used for. */
static size_t scan_keys(const unsigned char *h, size_t n, size_t *starts, size_t cap,
                        size_t *last_start, size_t *last_end, int *depth)
{
    size_t count = 0;
    int d = 0, expect_key = 0;
    *last_start = *last_end = n;
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = h[i];
        if (ch == '"') {
            const size_t s = i++;
            while (i < n && h[i] != '"')
                i += h[i] == '\\' ? 2 : 1;
            if (d == 1 && expect_key) {
                if (count < cap)
                    starts[count] = s;
                count++;
                *last_start = s;
                *last_end = i < n ? i + 1 : n;
                expect_key = 0;
            }
        } else if (ch == '{' || ch == '[') {
            if (++d == 1)
                expect_key = ch == '{';
        } else if (ch == '}' || ch == ']') {
            if (d > 0 && --d == 0)
                break;
        } else if (ch == ',' && d == 1) {
            expect_key = 1;
        }
    }
    *depth = d;
    return count;
}

/* The decoded text of the JSON string token t[0..n), or NULL. */
static char *decode_key(const unsigned char *t, size_t n)
{
    json_t *j = json_loadb((const char *)t, n, JSON_DECODE_ANY, NULL);
    char *s = json_is_string(j) ? strdup(json_string_value(j)) : NULL;
    json_decref(j);
    return s;
}

/* The error for a header jansson refused (pos: its offset in the header,
 * where parsing stopped): names the duplicate key, or the entry being read. */
static int json_error(refenc_error *err, const parse_ctx *c, const json_error_t *je)
{
    if (json_error_code(je) == json_error_out_of_memory)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory reading the header",
                                c->file);
    size_t pos = je->position < 0 ? 0 : (size_t)je->position;
    if (pos > c->hdr_len)
        pos = c->hdr_len;
    size_t ks, ke;
    int depth;
    scan_keys(c->hdr, pos, NULL, 0, &ks, &ke, &depth);
    char *key = ks < pos ? decode_key(c->hdr + ks, ke - ks) : NULL;
    char shown[SHOW_MAX];
    int st;
    if (json_error_code(je) == json_error_duplicate_key && depth == 1 && key != NULL)
        st = refenc_error_set(err, REFENC_EFORMAT,
                              "%s: duplicate tensor name '%s' at byte %zu (header keys must be "
                              "unique)",
                              c->file, show(shown, key), 8 + ks);
    else if (json_error_code(je) == json_error_duplicate_key && key != NULL)
        st = refenc_error_set(err, REFENC_EFORMAT,
                              "%s: '%s' (header entry at byte %zu): duplicate key near byte %zu",
                              c->file, show(shown, key), 8 + ks, 8 + pos);
    else if (key != NULL && depth >= 2)
        st = refenc_error_set(err, REFENC_EFORMAT,
                              "%s: header is not valid JSON near byte %zu, in the entry of '%s' "
                              "(at byte %zu): %s",
                              c->file, 8 + pos, show(shown, key), 8 + ks, je->text);
    else
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: header is not valid JSON near byte %zu: %s",
                              c->file, 8 + pos, je->text);
    free(key);
    return st;
}

/* ------------------------------------------------ reading: the entries */

typedef struct {
    refenc_st_tensor t;
    size_t begin, end; /* data_offsets */
    size_t entry;      /* index of its entry in the header */
} slot;

static int slot_cmp(const void *pa, const void *pb)
{
    const slot *a = pa, *b = pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return strcmp(a->t.name, b->t.name);
}

/* A non-negative JSON integer that fits in size_t. */
static int get_size(size_t *v, const json_t *j)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return 0;
    if ((unsigned long long)json_integer_value(j) > SIZE_MAX)
        return 0;
    *v = (size_t)json_integer_value(j);
    return 1;
}

static int check_metadata(const parse_ctx *c, size_t k, const json_t *v, refenc_error *err)
{
    if (!json_is_object(v))
        return entry_error(err, REFENC_EFORMAT, c, "__metadata__", k,
                           "is not an object (metadata is an object of strings)");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (!json_is_string(val)) {
            char shown[SHOW_MAX];
            return entry_error(err, REFENC_EFORMAT, c, "__metadata__", k,
                               "the value of '%s' is not a string (metadata values must be "
                               "strings)",
                               show(shown, key));
        }
    }
    return REFENC_OK;
}

/* An entry is an object with exactly the keys dtype, shape and data_offsets. */
static int check_entry_keys(const parse_ctx *c, const char *name, size_t k, const json_t *v, refenc_error *err)
{
    if (!json_is_object(v))
        return entry_error(err, REFENC_EFORMAT, c, name, k,
                           "entry is not an object with dtype, shape and data_offsets");
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    for (size_t i = 0; i < 3; i++)
        if (json_object_get(v, keys[i]) == NULL)
            return entry_error(err, REFENC_EFORMAT, c, name, k, "missing key '%s'", keys[i]);
    if (json_object_size(v) == 3)
        return REFENC_OK;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        (void)val;
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 && strcmp(key, "data_offsets") != 0) {
            char shown[SHOW_MAX];
            return entry_error(err, REFENC_EFORMAT, c, name, k,
                               "unexpected key '%s' (an entry has exactly dtype, shape and "
                               "data_offsets)",
                               show(shown, key));
        }
    }
    return REFENC_OK;
}

/* The entry's dtype, one of the known names, and its shape: at most REFENC_ST_MAX_NDIM sizes whose
 * product in bytes fits a size_t.  Fills s->t's dtype, ndim, shape, numel and nbytes. */
static int check_entry_type(slot *s, const parse_ctx *c, size_t k, const json_t *v, refenc_error *err)
{
    const char *name = s->t.name;
    const json_t *jd = json_object_get(v, "dtype");
    if (!json_is_string(jd))
        return entry_error(err, REFENC_EFORMAT, c, name, k, "dtype is not a string");
    if (!refenc_st_dtype_parse(&s->t.dtype, json_string_value(jd))) {
        char shown[SHOW_MAX];
        return entry_error(err, REFENC_EFORMAT, c, name, k, "unknown dtype '%s' (known: %s)",
                           show(shown, json_string_value(jd)), DTYPE_LIST);
    }
    const json_t *js = json_object_get(v, "shape");
    if (!json_is_array(js))
        return entry_error(err, REFENC_EFORMAT, c, name, k, "shape is not an array");
    if (json_array_size(js) > REFENC_ST_MAX_NDIM)
        return entry_error(err, REFENC_EFORMAT, c, name, k,
                           "shape has %zu dimensions, more than the %d supported",
                           json_array_size(js), REFENC_ST_MAX_NDIM);
    s->t.ndim = json_array_size(js);
    for (size_t i = 0; i < s->t.ndim; i++) {
        const json_t *ji = json_array_get(js, i);
        if (!get_size(&s->t.shape[i], ji)) {
            if (json_is_integer(ji))
                return entry_error(err, REFENC_EFORMAT, c, name, k,
                                   "shape[%zu] = %lld is negative", i,
                                   (long long)json_integer_value(ji));
            return entry_error(err, REFENC_EFORMAT, c, name, k, "shape[%zu] is not an integer", i);
        }
    }
    char sh[SHAPE_MAX];
    if (!tensor_size(&s->t.numel, &s->t.nbytes, s->t.shape, s->t.ndim,
                     refenc_st_dtype_size(s->t.dtype)))
        return entry_error(err, REFENC_EFORMAT, c, name, k,
                           "shape %s of %s overflows: its size in bytes exceeds %zu",
                           refenc_shape_format(sh, sizeof sh, s->t.shape, s->t.ndim, "[]"),
                           refenc_st_dtype_name(s->t.dtype), (size_t)SIZE_MAX);
    return REFENC_OK;
}

/* The entry's data_offsets [begin, end]: inside the data buffer, exactly the bytes its shape needs.
 * Fills s's begin, end and the tensor's file offset. */
static int check_entry_offsets(slot *s, const parse_ctx *c, size_t k, const json_t *v, refenc_error *err)
{
    const char *name = s->t.name;
    const json_t *jo = json_object_get(v, "data_offsets");
    size_t b, e;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)))
        return entry_error(err, REFENC_EFORMAT, c, name, k,
                           "data_offsets is not an array of 2 integers [begin, end]");
    if (!get_size(&b, json_array_get(jo, 0)) || !get_size(&e, json_array_get(jo, 1)))
        return entry_error(err, REFENC_EFORMAT, c, name, k, "data_offsets [%lld, %lld] is negative",
                           (long long)json_integer_value(json_array_get(jo, 0)),
                           (long long)json_integer_value(json_array_get(jo, 1)));
    if (b > e)
        return entry_error(err, REFENC_EFORMAT, c, name, k,
                           "data_offsets [%zu, %zu]: begin is after end", b, e);
    if (e > c->data_size)
        return entry_error(err, REFENC_EFORMAT, c, name, k,
                           "data_offsets [%zu, %zu] end past the data buffer, which has %zu "
                           "bytes (file bytes %zu to %zu)",
                           b, e, c->data_size, c->data_start, c->data_start + c->data_size);
    char sh[SHAPE_MAX];
    if (e - b != s->t.nbytes)
        return entry_error(err, REFENC_EFORMAT, c, name, k,
                           "data_offsets [%zu, %zu] but shape %s of %s needs %zu bytes", b, e,
                           refenc_shape_format(sh, sizeof sh, s->t.shape, s->t.ndim, "[]"),
                           refenc_st_dtype_name(s->t.dtype), s->t.nbytes);
    s->begin = b;
    s->end = e;
    s->t.file_offset = c->data_start + b;
    return REFENC_OK;
}

/* Validates one tensor entry; fills s (s->t.name is set by the caller). */
static int check_entry(slot *s, const parse_ctx *c, size_t k, const json_t *v, refenc_error *err)
{
    if (s->t.name[0] == '\0')
        return entry_error(err, REFENC_EFORMAT, c, s->t.name, k, "empty tensor name");
    int st = check_entry_keys(c, s->t.name, k, v, err);
    if (st == REFENC_OK)
        st = check_entry_type(s, c, k, v, err);
    if (st == REFENC_OK)
        st = check_entry_offsets(s, c, k, v, err);
    if (st == REFENC_OK)
        s->entry = k;
    return st;
}

/* The tensors, sorted by data offsets, must tile [0, data size) exactly:
 * each begins where the previous ended (zero-size tensors occupy nothing, so
 * they may sit at any boundary). */
static int check_tiling(const slot *s, size_t n, const parse_ctx *c, refenc_error *err)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i].begin < at) {
            const slot *p = &s[i - 1]; /* i > 0: at > 0 only after a tensor */
            char shown[SHOW_MAX];
            return entry_error(err, REFENC_EFORMAT, c, s[i].t.name, s[i].entry,
                               "data_offsets [%zu, %zu] (file bytes %zu to %zu) overlap those "
                               "of tensor '%s' [%zu, %zu]",
                               s[i].begin, s[i].end, c->data_start + s[i].begin,
                               c->data_start + s[i].end, show(shown, p->t.name), p->begin, p->end);
        }
        if (s[i].begin > at)
            return entry_error(err, REFENC_EFORMAT, c, s[i].t.name, s[i].entry,
                               "data_offsets [%zu, %zu] leave a hole: data bytes [%zu, %zu) "
                               "(file bytes %zu to %zu) belong to no tensor",
                               s[i].begin, s[i].end, at, s[i].begin, c->data_start + at,
                               c->data_start + s[i].begin);
        at = s[i].end;
    }
    if (at != c->data_size)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: data bytes [%zu, %zu) (file bytes %zu to %zu) belong to no "
                                "tensor",
                                c->file, at, c->data_size, c->data_start + at,
                                c->data_start + c->data_size);
    return REFENC_OK;
}

/* The file offset of each key of the header, for the messages: jansson keeps
 * keys in insertion (= file) order, so the k-th key of the scan is the k-th of
 * json_object_foreach.  cx->entry_at stays unset when the scan does not find
 * every key. */
static void locate_entries(parse_ctx *cx, size_t *entry_at, size_t n_keys)
{
    size_t ls, le;
    int depth;
    if (scan_keys(cx->hdr, cx->hdr_len, entry_at, n_keys, &ls, &le, &depth) != n_keys)
        return;
    for (size_t k = 0; k < n_keys; k++)
        entry_at[k] += 8;
    cx->entry_at = entry_at;
}

/* Checks the header's entries in file order: the metadata (kept in f) and
 * each tensor, into slots[0, *n) (*n counts the names to free on failure). */
static int read_entries(refenc_st_file *f, const parse_ctx *cx, json_t *root, slot *slots, size_t *n,
                        refenc_error *err)
{
    const char *key;
    json_t *val;
    size_t k = 0;
    json_object_foreach(root, key, val) {
        int st;
        if (strcmp(key, "__metadata__") == 0) {
            if ((st = check_metadata(cx, k, val, err)))
                return st;
            f->metadata = json_incref(val);
        } else {
            slot *s = &slots[*n];
            if ((s->t.name = strdup(key)) == NULL)
                return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", cx->file);
            (*n)++;
            if ((st = check_entry(s, cx, k, val, err)))
                return st;
        }
        k++;
    }
    return REFENC_OK;
}

/* Hands the n checked tensors, in data order, to f; their data point into f->buf. */
static int adopt_tensors(refenc_st_file *f, const slot *slots, size_t n, const char *file, refenc_error *err)
{
    if (n > 0 && (f->tensors = malloc(n * sizeof *f->tensors)) == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", file);
    for (size_t i = 0; i < n; i++) {
        f->tensors[i] = slots[i].t;
        f->tensors[i].data = f->buf + f->tensors[i].file_offset;
    }
    f->n_tensors = n;
    return REFENC_OK;
}

/* The header's entries checked one by one, then together (they tile the data
 * buffer); on success f holds the tensors and the metadata. */
static int parse_header(refenc_st_file *f, const parse_ctx *c, json_t *root, refenc_error *err)
{
    const size_t n_keys = json_object_size(root);
    size_t *entry_at = refenc_alloc_array(n_keys, sizeof *entry_at);
    slot *slots = calloc(n_keys ? n_keys : 1, sizeof *slots);
    parse_ctx cx = *c;
    size_t n = 0;
    int st;
    if (entry_at == NULL || slots == NULL) {
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for %zu header entries",
                              c->file, n_keys);
    } else {
        locate_entries(&cx, entry_at, n_keys);
        st = read_entries(f, &cx, root, slots, &n, err);
    }
    if (st == REFENC_OK) {
        qsort(slots, n, sizeof *slots, slot_cmp);
        st = check_tiling(slots, n, &cx, err);
    }
    if (st == REFENC_OK && (st = adopt_tensors(f, slots, n, c->file, err)) == REFENC_OK)
        n = 0; /* the names now belong to f */
    for (size_t i = 0; i < n; i++)
        free(slots[i].t.name);
    free(slots);
    free(entry_at);
    return st;
}

/* ------------------------------------------------------ reading: entry */

void refenc_st_free(refenc_st_file *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    json_decref(f->metadata);
    if (f->owns_buf)
        free(f->buf);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* How many JSON tokens a header text holds: brackets that open an object or
 * an array, strings (keys included) and runs of other non-space characters
 * (numbers, true, false, null, or garbage); punctuation does not count.
 * Whatever the bytes, it bounds the number of values and keys jansson can
 * build from them, and so its memory (safetensors.h). */
static size_t header_tokens(const unsigned char *h, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = h[i];
        if (ch == '"') {
            count++;
            for (i++; i < n && h[i] != '"'; i++)
                i += h[i] == '\\';
        } else if (ch == '{' || ch == '[') {
            count++;
        } else if (ch != '}' && ch != ']' && ch != ',' && ch != ':' && ch != ' ' && ch != '\t' &&
                   ch != '\n' && ch != '\r') {
            count++;
            while (i + 1 < n && !strchr("\"{}[],: \t\n\r", h[i + 1]))
                i++;
        }
    }
    return count;
}

/* Validates a file of `size` bytes of which buf holds the first
 * header_extent(buf, size): everything but the data, which it never reads.
 * The tensors' data pointers are buf + their file offsets. */
/* The 8-byte little-endian header length N at byte 0: N bytes must follow it, N at most
 * REFENC_ST_MAX_HEADER.  Fills c's header and data spans. */
static int header_frame(parse_ctx *c, const unsigned char *buf, size_t size, refenc_error *err)
{
    if (size < 8)
        return refenc_error_set(
            err, REFENC_EFORMAT,
            "%s: file is %zu bytes, too short for the 8-byte header length at byte 0", c->file, size);
    /* N is read as an unsigned 64-bit number and compared with what follows
     * it (size - 8 cannot underflow), so no value of N can overflow. */
    uint64_t N = 0;
    for (int i = 7; i >= 0; i--)
        N = N << 8 | buf[i];
    if (N > (uint64_t)(size - 8))
        return refenc_error_set(
            err, REFENC_EFORMAT,
            "%s: header length %llu at byte 0 exceeds the %zu bytes that follow it", c->file,
            (unsigned long long)N, size - 8);
    if (N > REFENC_ST_MAX_HEADER)
        return refenc_error_set(
            err, REFENC_EFORMAT, "%s: header length %llu at byte 0 exceeds the limit of %llu bytes",
            c->file, (unsigned long long)N, (unsigned long long)REFENC_ST_MAX_HEADER);
    c->hdr = buf + 8;
    c->hdr_len = (size_t)N;
    c->data_start = 8 + c->hdr_len;
    c->data_size = size - c->data_start;
    return REFENC_OK;
}

/* The header's text, before JSON parsing: it starts with '{', is valid UTF-8 (the first bad byte
 * named, with the entry it falls in) and holds at most REFENC_ST_MAX_TOKENS tokens. */
static int header_text(const parse_ctx *c, refenc_error *err)
{
    if (c->hdr_len == 0)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: header is empty (header length 0 at byte 0); it must be a JSON "
                                "object",
                                c->file);
    if (c->hdr[0] != '{')
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: header does not start with '{' (byte 0x%02x at byte 8); it "
                                "must be a JSON object",
                                c->file, c->hdr[0]);
    const size_t bad = refenc_utf8_invalid_at(c->hdr, c->hdr_len);
    if (bad < c->hdr_len) {
        size_t ks, ke;
        int depth, st;
        scan_keys(c->hdr, bad, NULL, 0, &ks, &ke, &depth);
        char *key = ks < bad ? decode_key(c->hdr + ks, ke - ks) : NULL;
        char shown[SHOW_MAX];
        if (key != NULL && depth >= 2)
            st = refenc_error_set(err, REFENC_EFORMAT,
                                  "%s: header is not valid UTF-8: byte 0x%02x at byte %zu, in the "
                                  "entry of '%s' (at byte %zu)",
                                  c->file, c->hdr[bad], 8 + bad, show(shown, key), 8 + ks);
        else
            st = refenc_error_set(err, REFENC_EFORMAT,
                                  "%s: header is not valid UTF-8: byte 0x%02x at byte %zu", c->file,
                                  c->hdr[bad], 8 + bad);
        free(key);
        return st;
    }
    const size_t tokens = header_tokens(c->hdr, c->hdr_len);
    if (tokens > REFENC_ST_MAX_TOKENS)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: header holds %zu JSON tokens (keys, values, brackets), more than the "
                                "limit of %d (a tensor's entry takes 10 to 18)",
                                c->file, tokens, REFENC_ST_MAX_TOKENS);
    return REFENC_OK;
}

/* The header as JSON (duplicate keys refused), then its entries into f. */
static int header_json(refenc_st_file *f, const parse_ctx *c, refenc_error *err)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)c->hdr, c->hdr_len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL)
        return json_error(err, c, &je);
    int st;
    if (!json_is_object(root)) /* cannot happen: the text starts with '{' */
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: header is not a JSON object", c->file);
    else
        st = parse_header(f, c, root, err);
    json_decref(root);
    return st;
}

static int parse_file(refenc_st_file *f, const unsigned char *buf, size_t size, const char *name,
                      refenc_error *err)
{
    memset(f, 0, sizeof *f);
    if (name == NULL)
        name = "<buffer>";
    f->path = strdup(name);
    if (f->path == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", name);
    f->buf = (unsigned char *)buf; /* borrowed: never written through */
    f->size = size;
    parse_ctx c = {.file = f->path};
    int st = header_frame(&c, buf, size, err);
    if (st == REFENC_OK)
        st = header_text(&c, err);
    if (st == REFENC_OK)
        st = header_json(f, &c, err);
    if (st != REFENC_OK)
        refenc_st_free(f); /* buf is borrowed: owns_buf is 0 */
    return st;
}

int refenc_st_parse(refenc_st_file *f, const unsigned char *buf, size_t size, const char *name,
                    refenc_error *err)
{
    return parse_file(f, buf, size, name, err);
}

/* How many bytes of a file of `size` bytes parse_file reads, given its first
 * min(size, 8) bytes: the 8-byte length and, if that length is acceptable,
 * the header; never the data. */
static size_t header_extent(const unsigned char *prefix, size_t size)
{
    if (size < 8)
        return size;
    uint64_t N = 0;
    for (int i = 7; i >= 0; i--)
        N = N << 8 | prefix[i];
    return N > (uint64_t)(size - 8) || N > REFENC_ST_MAX_HEADER ? 8 : 8 + (size_t)N;
}

/* Reads the header and checks it against the file's size: *buf (head
 * bytes, the caller's) holds it, f's tensors point past it. */
static int read_header(refenc_st_file *f, int fd, size_t size, const char *path, unsigned char **buf, size_t *head,
                       refenc_error *err)
{
    unsigned char prefix[8];
    int st = refenc_read_at(fd, prefix, size < 8 ? size : 8, 0, path, err);
    if (st)
        return st;
    *head = header_extent(prefix, size);
    *buf = malloc(*head ? *head : 1);
    if (*buf == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: cannot allocate %zu bytes for its header", path, *head);
    if ((st = refenc_read_at(fd, *buf, *head, 0, path, err)) || (st = parse_file(f, *buf, size, path, err))) {
        free(*buf);
        *buf = NULL;
    }
    return st;
}

/* Reads the header and checks it against the file's size, then the data it
 * declares: memory is the header until the header is valid, and the file's
 * size only for a file whose header accounts for every byte of it. */
static int read_checked(refenc_st_file *f, int fd, size_t size, const char *path, refenc_error *err)
{
    unsigned char *buf;
    size_t head;
    int st = read_header(f, fd, size, path, &buf, &head, err);
    if (st)
        return st;
    /* the header is valid: its tensors tile the rest of the file exactly */
    unsigned char *all = realloc(buf, size ? size : 1);
    if (all == NULL) {
        free(buf);
        refenc_st_free(f);
        return refenc_error_set(err, REFENC_ENOMEM, "%s: cannot allocate %zu bytes to read it", path, size);
    }
    if ((st = refenc_read_at(fd, all + head, size - head, head, path, err))) {
        free(all);
        refenc_st_free(f);
        return st;
    }
    f->buf = all;
    f->owns_buf = 1;
    for (size_t i = 0; i < f->n_tensors; i++)
        f->tensors[i].data = all + f->tensors[i].file_offset;
    return REFENC_OK;
}

int refenc_st_read(refenc_st_file *f, const char *path, refenc_error *err)
{
    memset(f, 0, sizeof *f);
    int fd;
    size_t size;
    int st = refenc_open_regular(&fd, &size, path, err);
    if (st)
        return st;
    st = read_checked(f, fd, size, path, err);
    close(fd);
    return st;
}

int refenc_st_read_at(refenc_st_file *f, int at, const char *path, const char *display, refenc_error *err)
{
    memset(f, 0, sizeof *f);
    int fd;
    size_t size;
    int st = refenc_open_regular_at(&fd, &size, at, path, display, NULL, err);
    if (st)
        return st;
    st = read_checked(f, fd, size, display, err);
    close(fd);
    return st;
}

int refenc_st_read_header(refenc_st_file *f, const char *path, refenc_error *err)
{
    memset(f, 0, sizeof *f);
    int fd;
    size_t size, head;
    unsigned char *buf;
    int st = refenc_open_regular(&fd, &size, path, err);
    if (st)
        return st;
    st = read_header(f, fd, size, path, &buf, &head, err);
    close(fd);
    if (st == REFENC_OK) {
        f->buf = buf;
        f->owns_buf = 1;
        for (size_t i = 0; i < f->n_tensors; i++)
            f->tensors[i].data = NULL; /* past the header: not read */
    }
    return st;
}

const refenc_st_tensor *refenc_st_find(const refenc_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

int refenc_st_shape_is(const refenc_st_tensor *t, size_t ndim, const size_t *shape)
{
    if (t->ndim != ndim)
        return 0;
    for (size_t i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i])
            return 0;
    return 1;
}

const char *refenc_st_metadata(const refenc_st_file *f, const char *key)
{
    return f->metadata != NULL ? json_string_value(json_object_get(f->metadata, key)) : NULL;
}

/* ------------------------------------------------------------ converters */

int refenc_st_to_f64(double *out, const refenc_st_file *f, const refenc_st_tensor *t,
                     refenc_error *err)
{
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case REFENC_ST_F64:
        if (t->numel > 0)
            memcpy(out, p, t->nbytes);
        return REFENC_OK;
    case REFENC_ST_F32:
        for (size_t i = 0; i < t->numel; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            out[i] = refenc_f32_to_double(u);
        }
        return REFENC_OK;
    case REFENC_ST_F16:
    case REFENC_ST_BF16:
        for (size_t i = 0; i < t->numel; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype == REFENC_ST_F16 ? refenc_f16_to_double(h) : refenc_bf16_to_double(h);
        }
        return REFENC_OK;
    default: {
        char shown[SHOW_MAX];
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: tensor '%s' (data at byte %zu): dtype %s is not a floating "
                                "type (F64, F32, F16, BF16)",
                                f->path, show(shown, t->name), t->file_offset,
                                refenc_st_dtype_name(t->dtype));
    }
    }
}

int refenc_st_to_i64(int64_t *out, const refenc_st_file *f, const refenc_st_tensor *t,
                     refenc_error *err)
{
    const unsigned char *p = t->data;
    char shown[SHOW_MAX];
    switch (t->dtype) {
    case REFENC_ST_I64:
        if (t->numel > 0)
            memcpy(out, p, t->nbytes);
        return REFENC_OK;
    case REFENC_ST_U8:
        for (size_t i = 0; i < t->numel; i++)
            out[i] = p[i];
        return REFENC_OK;
    case REFENC_ST_BOOL:
        for (size_t i = 0; i < t->numel; i++) {
            if (p[i] > 1)
                return refenc_error_set(err, REFENC_EFORMAT,
                                        "%s: tensor '%s': BOOL element %zu is %u, not 0 or 1 "
                                        "(at byte %zu)",
                                        f->path, show(shown, t->name), i, p[i],
                                        t->file_offset + i);
            out[i] = p[i];
        }
        return REFENC_OK;
    default:
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: tensor '%s' (data at byte %zu): dtype %s is not an integer "
                                "type (I64, U8, BOOL)",
                                f->path, show(shown, t->name), t->file_offset,
                                refenc_st_dtype_name(t->dtype));
    }
}

/* ---------------------------------------------------------------- writing */

static int entry_name_cmp(const void *pa, const void *pb)
{
    const refenc_st_entry *a = *(const refenc_st_entry *const *)pa;
    const refenc_st_entry *b = *(const refenc_st_entry *const *)pb;
    return strcmp(a->name, b->name);
}

/* The data layout: dtype size, largest first, then name (Hugging Face's
 * writer's order).  Every size is a power of two and the data starts 8-aligned,
 * so each tensor starts at a multiple of its element size. */
static int entry_layout_cmp(const void *pa, const void *pb)
{
    const refenc_st_entry *a = *(const refenc_st_entry *const *)pa;
    const refenc_st_entry *b = *(const refenc_st_entry *const *)pb;
    const size_t sa = refenc_st_dtype_size(a->dtype), sb = refenc_st_dtype_size(b->dtype);
    if (sa != sb)
        return sa > sb ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Validates one entry to write and computes its size. */
static int check_write_entry(size_t *nbytes, const char *path, const refenc_st_entry *e, int streamed,
                             refenc_error *err)
{
    char shown[SHOW_MAX], sh[SHAPE_MAX];
    if (e->name == NULL || e->name[0] == '\0')
        return refenc_error_set(err, REFENC_EINVAL, "%s: a tensor has an empty name", path);
    const size_t len = strlen(e->name);
    if (refenc_utf8_invalid_at((const unsigned char *)e->name, len) != len)
        return refenc_error_set(err, REFENC_EINVAL, "%s: tensor name '%s' is not valid UTF-8",
                                path, show(shown, e->name));
    if (strcmp(e->name, "__metadata__") == 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "%s: '__metadata__' is reserved, not a tensor name", path);
    if (!dtype_valid(e->dtype))
        return refenc_error_set(err, REFENC_EINVAL, "%s: tensor '%s': unknown dtype %d", path,
                                show(shown, e->name), (int)e->dtype);
    if (e->ndim > REFENC_ST_MAX_NDIM)
        return refenc_error_set(err, REFENC_EINVAL,
                                "%s: tensor '%s': %zu dimensions, more than the %d supported", path,
                                show(shown, e->name), e->ndim, REFENC_ST_MAX_NDIM);
    size_t numel = 0;
    /* JSON integers are int64: every dimension and offset must fit */
    int fits = tensor_size(&numel, nbytes, e->shape, e->ndim, refenc_st_dtype_size(e->dtype)) &&
               *nbytes <= INT64_MAX;
    for (size_t i = 0; i < e->ndim; i++)
        fits = fits && e->shape[i] <= INT64_MAX;
    if (!fits)
        return refenc_error_set(err, REFENC_ELIMIT, "%s: tensor '%s': shape %s of %s overflows",
                                path, show(shown, e->name),
                                refenc_shape_format(sh, sizeof sh, e->shape, e->ndim, "[]"),
                                refenc_st_dtype_name(e->dtype));
    if (*nbytes > 0 && e->data == NULL && !streamed)
        return refenc_error_set(err, REFENC_EINVAL, "%s: tensor '%s': data is NULL", path,
                                show(shown, e->name));
    if (e->dtype == REFENC_ST_BOOL && e->data != NULL) {
        const unsigned char *p = e->data;
        for (size_t i = 0; i < numel; i++)
            if (p[i] > 1)
                return refenc_error_set(err, REFENC_EINVAL,
                                        "%s: tensor '%s': BOOL element %zu is %u, not 0 or 1",
                                        path, show(shown, e->name), i, p[i]);
    }
    return REFENC_OK;
}

static int check_write_metadata(const char *path, const json_t *metadata, refenc_error *err)
{
    if (metadata == NULL)
        return REFENC_OK;
    if (!json_is_object(metadata))
        return refenc_error_set(err, REFENC_EINVAL, "%s: metadata is not a JSON object", path);
    char shown[SHOW_MAX];
    for (void *it = json_object_iter((json_t *)metadata); it != NULL;
         it = json_object_iter_next((json_t *)metadata, it)) {
        const char *key = json_object_iter_key(it);
        const json_t *v = json_object_iter_value(it);
        if (!json_is_string(v))
            return refenc_error_set(err, REFENC_EINVAL,
                                    "%s: metadata '%s' is not a string (metadata values must be "
                                    "strings)",
                                    path, show(shown, key));
        /* the reader refuses \u0000, so a NUL must not reach the file */
        if (json_object_iter_key_len(it) != strlen(key) ||
            json_string_length(v) != strlen(json_string_value(v)))
            return refenc_error_set(err, REFENC_EINVAL, "%s: metadata '%s' contains a NUL byte",
                                    path, show(shown, key));
    }
    return REFENC_OK;
}

/* {"data_offsets": [begin, end], "dtype": ..., "shape": [...]}, or NULL
 * (out of memory). */
static json_t *header_entry(const refenc_st_entry *e, size_t begin, size_t end)
{
    json_t *ent = json_object(), *shape = json_array(), *offsets = json_array();
    int bad = ent == NULL || shape == NULL || offsets == NULL;
    for (size_t d = 0; d < e->ndim && !bad; d++)
        bad = json_array_append_new(shape, json_integer((json_int_t)e->shape[d])) != 0;
    bad = bad || json_array_append_new(offsets, json_integer((json_int_t)begin)) != 0 ||
          json_array_append_new(offsets, json_integer((json_int_t)end)) != 0;
    /* the _new setters take the reference even when they fail */
    bad =
        bad || json_object_set_new(ent, "dtype", json_string(refenc_st_dtype_name(e->dtype))) != 0;
    bad = bad || json_object_set(ent, "shape", shape) != 0 ||
          json_object_set(ent, "data_offsets", offsets) != 0;
    json_decref(shape);
    json_decref(offsets);
    if (bad) {
        json_decref(ent);
        return NULL;
    }
    return ent;
}

/* json_dumps into a buffer that remembers a failed allocation: jansson 2.14
 * ignores the result of writing an object's key (dump.c), so after a failed
 * allocation json_dumps can return success and a header with a key missing,
 * which would be written to the file. */
typedef struct {
    char *text;
    size_t len, cap;
    int failed;
} dump_buffer;

static int dump_append(const char *bytes, size_t n, void *data)
{
    dump_buffer *b = data;
    if (b->failed)
        return -1;
    if (n >= b->cap - b->len) { /* room for n bytes and the NUL */
        size_t cap = b->cap ? b->cap : 256;
        while (n >= cap - b->len && cap <= SIZE_MAX / 2)
            cap *= 2;
        char *t = n < cap - b->len ? realloc(b->text, cap) : NULL;
        if (t == NULL) {
            b->failed = 1;
            return -1;
        }
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, bytes, n);
    b->len += n;
    b->text[b->len] = '\0';
    return 0;
}

/* The header text: the entries with consecutive data offsets in layout
 * order, and "__metadata__"; keys sorted, compact, no newline.  NULL if out
 * of memory. */
static char *build_header(const refenc_st_entry *const *sorted, const size_t *nbytes, size_t n,
                          const json_t *metadata)
{
    json_t *root = json_object();
    int bad = root == NULL;
    size_t at = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        bad = json_object_set_new(root, sorted[i]->name,
                                  header_entry(sorted[i], at, at + nbytes[i])) != 0;
        at += nbytes[i];
    }
    if (!bad && metadata != NULL)
        bad = json_object_set_new(root, "__metadata__", json_deep_copy(metadata)) != 0;
    dump_buffer b = {NULL, 0, 0, 0};
    if (!bad)
        bad = json_dump_callback(root, dump_append, &b, JSON_SORT_KEYS | JSON_COMPACT) != 0 ||
              b.failed || b.text == NULL;
    json_decref(root);
    if (bad) {
        free(b.text);
        return NULL;
    }
    return b.text;
}

/* The entries of a file to write, checked, in layout order. */
typedef struct {
    const refenc_st_entry **sorted; /* (n): the data's order                  */
    size_t *nbytes;                 /* (2n): [0, n) by entry, [n, 2n) sorted  */
    size_t n, total;                /* total: the data's size                 */
} write_plan;

static void plan_free(write_plan *p)
{
    free(p->sorted);
    free(p->nbytes);
}

/* Checks every entry and the metadata, refuses duplicate names, and orders
 * the entries for the data (entry_layout_cmp).  streamed: data may be NULL. */
static int plan_write(write_plan *p, const char *path, const refenc_st_entry *entries, size_t n,
                      const json_t *metadata, int streamed, refenc_error *err)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    p->nbytes = refenc_alloc_array(n, 2 * sizeof *p->nbytes);
    p->sorted = refenc_alloc_array(n, sizeof *p->sorted);
    if (p->nbytes == NULL || p->sorted == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for %zu tensors", path, n);
    int st = REFENC_OK;
    for (size_t i = 0; i < n && st == REFENC_OK; i++)
        st = check_write_entry(&p->nbytes[i], path, &entries[i], streamed, err);
    if (st || (st = check_write_metadata(path, metadata, err)))
        return st;
    for (size_t i = 0; i < n; i++)
        p->sorted[i] = &entries[i];
    qsort(p->sorted, n, sizeof *p->sorted, entry_name_cmp);
    for (size_t i = 1; i < n; i++) {
        char shown[SHOW_MAX];
        if (strcmp(p->sorted[i - 1]->name, p->sorted[i]->name) == 0)
            return refenc_error_set(err, REFENC_EINVAL, "%s: duplicate tensor name '%s'", path,
                                    show(shown, p->sorted[i]->name));
    }
    /* names are unique: the layout order is total, so the bytes are
     * determined by the entries whatever their order in the array */
    qsort(p->sorted, n, sizeof *p->sorted, entry_layout_cmp);
    size_t *sorted_nbytes = p->nbytes + n;
    for (size_t i = 0; i < n; i++) {
        sorted_nbytes[i] = p->nbytes[p->sorted[i] - entries];
        if (__builtin_add_overflow(p->total, sorted_nbytes[i], &p->total) || p->total > INT64_MAX)
            return refenc_error_set(err, REFENC_ELIMIT, "%s: the tensors' total size overflows", path);
    }
    return REFENC_OK;
}

/* The header text, padded with spaces to a multiple of 8 bytes so that the
 * data starts 8-aligned, in *out (*len: its length with the padding). */
static int padded_header(char **out, size_t *len, const write_plan *p, const json_t *metadata,
                         const char *path, refenc_error *err)
{
    *out = NULL;
    char *text = build_header(p->sorted, p->nbytes + p->n, p->n, metadata);
    if (text == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory building the header", path);
    const size_t raw = strlen(text), padded = raw + (8 - raw % 8) % 8;
    if (header_tokens((const unsigned char *)text, raw) > REFENC_ST_MAX_TOKENS) {
        free(text);
        return refenc_error_set(err, REFENC_ELIMIT, "%s: header of %zu tensors would hold more than the "
                                "%d JSON tokens a reader accepts", path, p->n, REFENC_ST_MAX_TOKENS);
    }
    if (padded > REFENC_ST_MAX_HEADER) {
        free(text);
        return refenc_error_set(err, REFENC_ELIMIT, "%s: header of %zu bytes exceeds the limit of %llu bytes",
                                path, padded, (unsigned long long)REFENC_ST_MAX_HEADER);
    }
    char *h = realloc(text, padded + 1);
    if (h == NULL) {
        free(text);
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory building the header", path);
    }
    memset(h + raw, ' ', padded - raw);
    h[padded] = '\0';
    *out = h;
    *len = padded;
    return REFENC_OK;
}

/* The file's bytes, written atomically (atomic_write.h): the 8-byte header
 * length, the header, then each tensor's data in layout order. */
static int write_file(int at, const char *path, const char *display, const char *header, size_t len,
                      const write_plan *p, refenc_error *err)
{
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)((uint64_t)len >> (8 * i));
    refenc_atomic_file a;
    int st = refenc_atomic_openat(&a, at, path, display, err);
    if (st == REFENC_OK)
        st = refenc_atomic_write(&a, prefix, 8, err);
    if (st == REFENC_OK)
        st = refenc_atomic_write(&a, header, len, err);
    for (size_t i = 0; i < p->n && st == REFENC_OK; i++)
        st = refenc_atomic_write(&a, p->sorted[i]->data, p->nbytes[p->n + i], err);
    return st == REFENC_OK ? refenc_atomic_commit(&a, err) : st;
}

int refenc_st_write(const char *path, const refenc_st_entry *entries, size_t n,
                    const json_t *metadata, refenc_error *err)
{
    return refenc_st_write_at(AT_FDCWD, path, path, entries, n, metadata, err);
}

int refenc_st_write_at(int at, const char *path, const char *display, const refenc_st_entry *entries,
                       size_t n, const json_t *metadata, refenc_error *err)
{
    write_plan p;
    if (display == NULL)
        display = path;
    int st = plan_write(&p, display, entries, n, metadata, 0, err);
    if (st == REFENC_OK) {
        char *header;
        size_t len = 0;
        st = padded_header(&header, &len, &p, metadata, display, err);
        if (st == REFENC_OK)
            st = write_file(at, path, display, header, len, &p, err);
        free(header);
    }
    plan_free(&p);
    return st;
}

/* ---------------------------------------------------------------- writing in pieces */

void refenc_st_stream_abort(refenc_st_stream *s)
{
    if (s->open)
        refenc_atomic_abort(s->a); /* after a commit: nothing left to remove */
    free(s->a);
    for (size_t i = 0; s->e != NULL && i < s->n; i++)
        free((char *)s->e[i].name);
    free(s->e);
    free(s->sorted);
    free(s->nbytes);
    free(s->at);
    memset(s, 0, sizeof *s);
}

/* Takes the checked plan of the caller's entries over: copies of the entries
 * (names owned, no data) in its order, and each one's place in the file
 * after a header of hlen bytes. */
static int stream_adopt(refenc_st_stream *s, write_plan *p, const refenc_st_entry *entries, size_t hlen,
                        const char *path, refenc_error *err)
{
    s->n = p->n, s->total = p->total, s->data_at = 8 + (uint64_t)hlen;
    s->sorted = p->sorted, s->nbytes = p->nbytes;
    p->sorted = NULL, p->nbytes = NULL;
    s->e = calloc(s->n ? s->n : 1, sizeof *s->e);
    s->at = calloc(s->n ? s->n : 1, sizeof *s->at);
    if (s->e == NULL || s->at == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for %zu tensors", path, s->n);
    for (size_t i = 0; i < s->n; i++) {
        s->e[i] = entries[i];
        s->e[i].data = NULL;
        if ((s->e[i].name = strdup(entries[i].name)) == NULL)
            return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for %zu tensors", path, s->n);
    }
    uint64_t at = s->data_at;
    for (size_t k = 0; k < s->n; k++) {
        const size_t i = (size_t)(s->sorted[k] - entries);
        s->sorted[k] = &s->e[i];
        s->at[i] = at;
        at += s->nbytes[s->n + k];
    }
    return REFENC_OK;
}

/* The file's whole size now, its blocks reserved where the file system
 * can: a full disk or a file-size limit fails the open, not the last piece
 * of a long run; and a piece read back before it is written reads zeros,
 * not a short file.  Where space cannot be reserved, the size alone. */
static int stream_reserve(refenc_st_stream *s, const char *path, refenc_error *err)
{
    const off_t size = (off_t)(s->data_at + s->total);
    const int e = size > 0 ? posix_fallocate(s->a->fd, 0, size) : 0;
    if (e == ENOSPC || e == EFBIG)
        return refenc_error_set(err, REFENC_EIO, "%s: cannot write its %lld bytes: %s", path, (long long)size,
                                strerror(e));
    if (ftruncate(s->a->fd, size) != 0)
        return refenc_error_set(err, REFENC_EIO, "%s: cannot write: %s", path, strerror(errno));
    return REFENC_OK;
}

int refenc_st_stream_open(refenc_st_stream *s, const char *path, const refenc_st_entry *entries, size_t n,
                          const json_t *guess, refenc_error *err)
{
    memset(s, 0, sizeof *s);
    write_plan p;
    char *header = NULL;
    size_t hlen = 0;
    int st = plan_write(&p, path, entries, n, guess, 1, err);
    if (st == REFENC_OK)
        st = padded_header(&header, &hlen, &p, guess, path, err);
    free(header);
    if (st == REFENC_OK)
        st = stream_adopt(s, &p, entries, hlen, path, err);
    plan_free(&p);
    if (st == REFENC_OK && (s->a = calloc(1, sizeof *s->a)) == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", path);
    if (st == REFENC_OK && (st = refenc_atomic_open(s->a, path, err)) == REFENC_OK) {
        s->open = 1;
        refenc_atomic_signals(s->a, 0); /* a long write: a termination signal ends it (atomic_write.h) */
        st = stream_reserve(s, path, err);
    }
    for (size_t i = 0; i < n && st == REFENC_OK; i++)
        if (entries[i].data != NULL)
            st = refenc_st_stream_put(s, i, 0, entries[i].data, s->nbytes[i], err);
    if (st != REFENC_OK)
        refenc_st_stream_abort(s);
    return st;
}

/* Whether bytes [at, at + n) are in entry i. */
static int stream_range(const refenc_st_stream *s, size_t i, size_t at, size_t n, refenc_error *err)
{
    if (s->open && i < s->n && at <= s->nbytes[i] && n <= s->nbytes[i] - at)
        return REFENC_OK;
    const char *path = s->a != NULL && s->a->path != NULL ? s->a->path : "(no file)";
    return refenc_error_set(err, REFENC_EINVAL, "%s: bytes %zu to %zu of tensor %zu of %zu: not in the tensor, "
                            "or the file is not open", path, at, at + n, i, s->n);
}

int refenc_st_stream_put(refenc_st_stream *s, size_t i, size_t at, const void *data, size_t n,
                         refenc_error *err)
{
    const int st = stream_range(s, i, at, n, err);
    return st == REFENC_OK ? refenc_atomic_pwrite(s->a, data, n, s->at[i] + at, err) : st;
}

int refenc_st_stream_get(refenc_st_stream *s, size_t i, size_t at, void *data, size_t n, refenc_error *err)
{
    const int st = stream_range(s, i, at, n, err);
    return st == REFENC_OK ? refenc_atomic_pread(s->a, data, n, s->at[i] + at, err) : st;
}

/* Moves the data to start at byte `to` of the file: the last bytes first
 * when they move up, the first when down, so none is overwritten unread. */
static int stream_move(refenc_st_stream *s, uint64_t to, refenc_error *err)
{
    const uint64_t from = s->data_at;
    const size_t chunk = (size_t)1 << 20;
    unsigned char *buf = malloc(chunk);
    int st = buf == NULL ? refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", s->a->path) : REFENC_OK;
    for (size_t done = 0; done < s->total && st == REFENC_OK;) {
        const size_t n = s->total - done < chunk ? s->total - done : chunk;
        const size_t off = to > from ? s->total - done - n : done;
        st = refenc_atomic_pread(s->a, buf, n, from + off, err);
        if (st == REFENC_OK)
            st = refenc_atomic_pwrite(s->a, buf, n, to + off, err);
        done += n;
    }
    free(buf);
    if (st == REFENC_OK && to < from && ftruncate(s->a->fd, (off_t)(to + s->total)) != 0)
        st = refenc_error_set(err, REFENC_EIO, "%s: cannot write: %s", s->a->path, strerror(errno));
    for (size_t i = 0; i < s->n && st == REFENC_OK; i++)
        s->at[i] = s->at[i] - from + to;
    if (st == REFENC_OK)
        s->data_at = to;
    return st;
}

int refenc_st_stream_commit(refenc_st_stream *s, const json_t *metadata, refenc_error *err)
{
    if (!s->open)
        return refenc_error_set(err, REFENC_EINVAL, "a streamed file committed without being open");
    refenc_atomic_signals(s->a, 1);
    write_plan view = {s->sorted, s->nbytes, s->n, s->total};
    char *header = NULL;
    size_t len = 0;
    int st = check_write_metadata(s->a->path, metadata, err);
    if (st == REFENC_OK)
        st = padded_header(&header, &len, &view, metadata, s->a->path, err);
    if (st == REFENC_OK && 8 + (uint64_t)len != s->data_at)
        st = stream_move(s, 8 + (uint64_t)len, err);
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)((uint64_t)len >> (8 * i));
    if (st == REFENC_OK)
        st = refenc_atomic_pwrite(s->a, prefix, 8, 0, err);
    if (st == REFENC_OK)
        st = refenc_atomic_pwrite(s->a, header, len, 8, err);
    if (st == REFENC_OK)
        st = refenc_atomic_commit(s->a, err);
    free(header);
    refenc_st_stream_abort(s);
    return st;
}
