/* Safetensors files (the Hugging Face format), read and written strictly.
 *
 * Layout: an 8-byte little-endian unsigned header length N, then N bytes of
 * UTF-8 JSON (an object; trailing spaces allowed as padding), then the data
 * buffer.  Each header entry other than "__metadata__" is
 *     "name": {"dtype": "F64", "shape": [2, 3], "data_offsets": [begin, end]}
 * with offsets relative to the start of the data buffer.  "__metadata__", if
 * present, is an object whose values are all strings.
 *
 * Reading validates everything (docs/golden-format.md): N <= file size - 8 and
 * N <= REFENC_ST_MAX_HEADER; the header is valid UTF-8 JSON, an object,
 * without duplicate keys; each entry has exactly the three keys, a known
 * dtype, a shape of non-negative integers whose product times the dtype size
 * does not overflow and equals end - begin; 0 <= begin <= end <= data size;
 * the tensors neither overlap nor leave holes (together they cover the data
 * buffer exactly, as the format requires); names are non-empty.  Every error
 * message names the file, the tensor (if any) and the byte offset in the file.
 * Values are little-endian on disk; refenc runs on little-endian hosts only
 * (checked at compile time). */
#ifndef REFENC_SAFETENSORS_H
#define REFENC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "status.h"

#define REFENC_ST_MAX_HEADER ((uint64_t)100 << 20) /* 100 MiB, as the reference implementation */
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
    refenc_st_tensor *tensors; /* in header order of their data offsets       */
} refenc_st_file;

/* Reads and validates a file.  Errors: REFENC_EIO (cannot open or read),
 * REFENC_EFORMAT (anything invalid), REFENC_ENOMEM.  On error *f is empty
 * (safe to free). */
int refenc_st_read(refenc_st_file *f, const char *path, refenc_error *err);

/* Validates a buffer already in memory (the fuzzing entry point).  `name`
 * is used in messages.  The buffer is borrowed: it must outlive f. */
int refenc_st_parse(refenc_st_file *f, const unsigned char *buf, size_t size, const char *name,
                    refenc_error *err);

void refenc_st_free(refenc_st_file *f);

/* The tensor with this name, or NULL. */
const refenc_st_tensor *refenc_st_find(const refenc_st_file *f, const char *name);

/* The metadata string for key, or NULL. */
const char *refenc_st_metadata(const refenc_st_file *f, const char *key);

/* Converts a floating tensor (F64, F32, F16, BF16) to doubles, exactly
 * (every value of these formats is a double).  out has t->numel entries.
 * Errors: REFENC_EFORMAT if the dtype is not floating (message names the
 * file and tensor). */
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
 * spaces to a multiple of 8 bytes, data in the order of the sorted names, so
 * the same entries always give the same bytes.  metadata may be NULL; its
 * values must be strings.  The file appears atomically: written to
 * "<path>.tmp.<pid>" then renamed; on any error nothing is left at path.
 * Errors: REFENC_EINVAL (duplicate or empty name, bad shape, non-string
 * metadata value), REFENC_EIO, REFENC_ENOMEM. */
int refenc_st_write(const char *path, const refenc_st_entry *entries, size_t n,
                    const json_t *metadata, refenc_error *err);

/* Float conversions used by the converters and by peers that write reduced
 * precision: exact decoding, and encoding with round-to-nearest-even. */
double refenc_f16_to_double(uint16_t h);
double refenc_bf16_to_double(uint16_t b);
uint16_t refenc_double_to_f16(double x);
uint16_t refenc_double_to_bf16(double x);

#endif
