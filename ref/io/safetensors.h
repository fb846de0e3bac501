/* Safetensors files (the Hugging Face format), read and written strictly.
 *
 * Layout: an 8-byte little-endian unsigned header length N, then N bytes of
 * UTF-8 JSON (an object starting at its first byte; whitespace after it, the
 * writers' space padding, is allowed), then the data buffer.  Each header
 * entry other than "__metadata__" is
 *     "name": {"dtype": "F64", "shape": [2, 3], "data_offsets": [begin, end]}
 * with offsets relative to the start of the data buffer.  "__metadata__", if
 * present, is an object whose values are all strings.
 *
 * Reading validates everything (docs/golden-format.md): N <= file size - 8 and
 * N <= REFENC_ST_MAX_HEADER; at most REFENC_ST_MAX_TOKENS JSON tokens; the
 * header is valid UTF-8 JSON, an object,
 * without duplicate keys; each entry has exactly the three keys, a known
 * dtype, a shape of at most REFENC_ST_MAX_NDIM non-negative integers whose
 * product times the dtype size equals end - begin and does not overflow (the
 * product of the non-zero dimensions is checked, so a 0 does not excuse an
 * overflowing shape); 0 <= begin <= end <= data size;
 * the tensors neither overlap nor leave holes (together they cover the data
 * buffer exactly, as the format requires; zero-size tensors may sit at any
 * boundary); names are non-empty.  Every error message names the file, the
 * tensor (if any) and a byte offset in the file: the entry's key for an
 * entry's error, the data bytes concerned, or where the JSON parser stopped.
 * Values are little-endian on disk; refenc runs on little-endian hosts only
 * (checked at compile time). */
#ifndef REFENC_SAFETENSORS_H
#define REFENC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../core/status.h"
#include "half.h"

/* 100 MB, the limit of Hugging Face's implementation (MAX_HEADER_SIZE = 100_000_000):
 * a larger header is refused there, so it is refused here and never written. */
#define REFENC_ST_MAX_HEADER ((uint64_t)100000000)
/* The most JSON tokens (keys, values, brackets) a header may hold: 2^19.  A
 * tensor's entry takes 10 to 18, so a file can hold 29,000 tensors or more.
 * jansson spends about 100 bytes on each token it parses (the measured
 * figure is in docs/golden-format.md), far more than the 2 to 5 bytes of
 * text a token can take: counted before jansson parses anything, the limit
 * keeps reading a header to its own size plus a bounded amount, instead of
 * about 22 times its size. */
#define REFENC_ST_MAX_TOKENS (1 << 19)
#define REFENC_ST_MAX_NDIM 8

typedef enum {
    REFENC_ST_F64 = 0,
    REFENC_ST_F32,
    REFENC_ST_F16,
    REFENC_ST_BF16,
    REFENC_ST_I64,
    REFENC_ST_U8,
    REFENC_ST_BOOL
} refenc_st_dtype;

/* "F64", "F32", "F16", "BF16", "I64", "U8", "BOOL". */
const char *refenc_st_dtype_name(refenc_st_dtype d);
/* Bytes per element: 8, 4, 2, 2, 8, 1, 1. */
size_t refenc_st_dtype_size(refenc_st_dtype d);
/* Parses a dtype name; returns 0 if unknown. */
int refenc_st_dtype_parse(refenc_st_dtype *d, const char *name);

/* One tensor of a file that has been read. */
typedef struct {
    char *name;
    refenc_st_dtype dtype;
    size_t ndim;
    size_t shape[REFENC_ST_MAX_NDIM];
    size_t numel;              /* product of shape (1 for ndim 0)             */
    size_t nbytes;             /* numel * dtype size                           */
    size_t file_offset;        /* where its data starts in the file            */
    const unsigned char *data; /* into the file's buffer (unaligned: use memcpy or the converters) */
} refenc_st_tensor;

/* A file held in memory. */
typedef struct {
    char *path;              /* for messages */
    unsigned char *buf;      /* the whole file (owned unless borrowed)        */
    size_t size;
    int owns_buf;
    json_t *metadata;        /* the "__metadata__" object, or NULL            */
    size_t n_tensors;
    refenc_st_tensor *tensors; /* sorted by data offsets (ties: by name)      */
} refenc_st_file;

/* Reads a file and validates it as refenc_st_parse does, header first: the
 * 8-byte length and the header are read and checked against the file's size
 * before any data is, so memory holds the header (at most
 * REFENC_ST_MAX_HEADER bytes, and jansson's parse of it) until the header is
 * valid, and the whole file only when its tensors account for every byte of
 * it (the data it declares).  The path must name a regular file: it is opened
 * without blocking (a FIFO cannot hang the read) and checked.
 * Errors: REFENC_EIO (cannot open or read it, a short read, a directory or
 * another non-regular file: the message names the path and the reason),
 * REFENC_EFORMAT (anything invalid), REFENC_ENOMEM.  On error *f is empty
 * (safe to free). */
int refenc_st_read(refenc_st_file *f, const char *path, refenc_error *err);

/* The same for `path` relative to the directory descriptor `at`, opened
 * with O_NOFOLLOW (file_read.h, refenc_open_regular_at), `display` in
 * messages and as f->path. */
int refenc_st_read_at(refenc_st_file *f, int at, const char *path, const char *display, refenc_error *err);

/* The header alone, checked as refenc_st_read checks it (the tensors tile
 * the file's size exactly), for a file too large to hold: the tensors'
 * data are NULL (read them at their file_offset).  Errors: as
 * refenc_st_read's. */
int refenc_st_read_header(refenc_st_file *f, const char *path, refenc_error *err);

/* Validates a buffer already in memory (the fuzzing entry point): never
 * reads outside buf[0..size), never leaks, whatever the bytes.  `name` is
 * used in messages.  The buffer is borrowed: it must outlive f.
 * Errors: REFENC_EFORMAT, REFENC_ENOMEM.  On error *f is empty. */
int refenc_st_parse(refenc_st_file *f, const unsigned char *buf, size_t size, const char *name,
                    refenc_error *err);

void refenc_st_free(refenc_st_file *f);

/* The tensor with this name, or NULL. */
const refenc_st_tensor *refenc_st_find(const refenc_st_file *f, const char *name);

/* Whether t has exactly this shape. */
int refenc_st_shape_is(const refenc_st_tensor *t, size_t ndim, const size_t *shape);

/* The metadata string for key, or NULL. */
const char *refenc_st_metadata(const refenc_st_file *f, const char *key);

/* Converts a floating tensor (F64, F32, F16, BF16) to doubles, exactly
 * (every value of these formats is a double; NaN payloads are kept).  out
 * has t->numel entries.  Errors: REFENC_EFORMAT if the dtype is not floating
 * (message names the file, the tensor and its data offset). */
int refenc_st_to_f64(double *out, const refenc_st_file *f, const refenc_st_tensor *t,
                     refenc_error *err);

/* Converts an integer tensor (I64, U8, BOOL) to int64.  BOOL values must be
 * 0 or 1.  Errors: REFENC_EFORMAT (not an integer dtype, or a BOOL byte not
 * 0/1, naming the element's file offset). */
int refenc_st_to_i64(int64_t *out, const refenc_st_file *f, const refenc_st_tensor *t,
                     refenc_error *err);

/* One tensor to write: data in the given dtype's in-memory representation
 * (little-endian). */
typedef struct {
    const char *name;
    refenc_st_dtype dtype;
    size_t ndim;
    size_t shape[REFENC_ST_MAX_NDIM];
    const void *data;
} refenc_st_entry;

/* Writes a file: header keys sorted (JSON_SORT_KEYS, compact), padded with
 * spaces to a multiple of 8 bytes; data ordered by dtype size, largest first,
 * then by name (as Hugging Face's writer does), so that every tensor starts
 * at a multiple of its element size in the file, for peers that map the file
 * and cast pointers.  The same entries, in any order, always give the same
 * bytes.  metadata may be NULL; its values must be strings.  The file appears
 * atomically (atomic_write.h): a temporary file in path's directory, fsync'ed,
 * then renamed; on any error the temporary file is removed and path is
 * untouched.  path must be absent or a regular file.
 * Errors: REFENC_EINVAL (duplicate, empty, non-UTF-8 or "__metadata__" name,
 * unknown dtype, more than REFENC_ST_MAX_NDIM dimensions, NULL data, a BOOL
 * byte not 0/1, metadata not an object of strings, path a directory, a
 * symbolic link or another file that is not regular), REFENC_ELIMIT (a size
 * overflows, or the header would exceed REFENC_ST_MAX_HEADER or
 * REFENC_ST_MAX_TOKENS), REFENC_EIO,
 * REFENC_ENOMEM. */
int refenc_st_write(const char *path, const refenc_st_entry *entries, size_t n,
                    const json_t *metadata, refenc_error *err);

/* The same for `path` relative to the directory descriptor `at`, `display`
 * (NULL: path) in messages (atomic_write.h, refenc_atomic_openat). */
int refenc_st_write_at(int at, const char *path, const char *display, const refenc_st_entry *entries,
                       size_t n, const json_t *metadata, refenc_error *err);

/* A file written in pieces, for data too large to hold at once (a golden
 * part, written as the oracle's units complete).  The layout follows from
 * the entries' names, dtypes and shapes alone, as refenc_st_write lays them
 * out, so each piece goes to its final place as it comes, in any order, from
 * any thread; the file's bytes are those refenc_st_write gives for the same
 * tensors and metadata.  The header is written last (its metadata may hold
 * a checksum of the data): the data start after room for a header with the
 * metadata `guess`, and are moved once if the final header's padded length
 * differs.  The file appears atomically at commit (atomic_write.h); between
 * open and commit the termination signals are let through
 * (refenc_atomic_signals): a process ended by one leaves neither path nor
 * the temporary file.
 *
 *   open    checks the entries (data may be NULL: put later) and guess,
 *           creates the temporary file and writes the data given
 *   put     n bytes of entry i (its index in entries) from byte `at` of its data
 *   get     reads them back (for a checksum)
 *   commit  writes the header with the final metadata, renames the file
 *   abort   removes the temporary file; safe after a failed call, twice */
/* the temporary file (atomic_write.h), held by pointer: this header, which C11
 * programs include, needs no POSIX signal mask */
struct refenc_atomic_file;

typedef struct {
    struct refenc_atomic_file *a;     /* the temporary file, allocated at open             */
    refenc_st_entry *e;               /* (n) copies of the entries: names owned, data NULL */
    const refenc_st_entry **sorted;   /* (n) layout order                                  */
    size_t *nbytes;                   /* (2n) by entry, then in layout order               */
    uint64_t *at;                     /* (n) by entry: its data's offset in the file       */
    size_t n, total;                  /* total: the data's size                            */
    uint64_t data_at;                 /* where the data starts: 8 + the header's room      */
    int open;
} refenc_st_stream;

/* Errors: those of refenc_st_write (guess is the metadata checked). */
int refenc_st_stream_open(refenc_st_stream *s, const char *path, const refenc_st_entry *entries, size_t n,
                          const json_t *guess, refenc_error *err);
/* Errors: REFENC_EINVAL (i or the bytes outside the entry), REFENC_EIO. */
int refenc_st_stream_put(refenc_st_stream *s, size_t i, size_t at, const void *data, size_t n,
                         refenc_error *err);
int refenc_st_stream_get(refenc_st_stream *s, size_t i, size_t at, void *data, size_t n, refenc_error *err);
/* Errors: those of refenc_st_write for the metadata, REFENC_EIO, REFENC_ENOMEM; the
 * temporary file is then removed. */
int refenc_st_stream_commit(refenc_st_stream *s, const json_t *metadata, refenc_error *err);
void refenc_st_stream_abort(refenc_st_stream *s);

#endif
