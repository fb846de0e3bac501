/* sha256 digests for golden parts (plan.h, docs/golden-format.md "Parts"):
 * fields and named tensors fed to one nettle sha256 context so that two
 * fields never run into each other, and the hash of a set of tensors in the
 * order of their names, the same for the entries about to be written and
 * the file read back. */
#ifndef REFENC_GOLDEN_DIGEST_H
#define REFENC_GOLDEN_DIGEST_H

#include <stddef.h>

#include <nettle/sha2.h>

#include "../io/safetensors.h"

/* A string with its NUL (a separator); NULL hashes as "". */
void golden_digest_str(struct sha256_ctx *h, const char *s);
/* n bytes, after their count. */
void golden_digest_bytes(struct sha256_ctx *h, const void *p, size_t n);
/* A named tensor: its name, shape and bytes. */
void golden_digest_tensor(struct sha256_ctx *h, const char *name, size_t ndim, const size_t *shape,
                          const void *p, size_t nbytes);
/* The digest as 64 lowercase hex digits. */
void golden_digest_hex(char hex[65], struct sha256_ctx *h);

/* The sha256 of tensors, in the order of their names: each tensor's name,
 * dtype, shape and bytes as they are in the file.  The entries about to be
 * written and the file read back give the same hash.  Return 0 when out of
 * memory (hex is then not set). */
int golden_entries_sha256(char hex[65], const refenc_st_entry *e, size_t n);
int golden_file_sha256(char hex[65], const refenc_st_file *f);
/* The same of a file read with its header alone (refenc_st_read_header),
 * its data read in pieces from f->path.  Errors: REFENC_ENOMEM, REFENC_EIO. */
int golden_file_sha256_read(char hex[65], const refenc_st_file *f, refenc_error *err);
/* The same of a file being streamed, its data read back from it (every
 * byte written).  Errors: REFENC_ENOMEM, those of refenc_st_stream_get. */
int golden_stream_sha256(char hex[65], refenc_st_stream *s, refenc_error *err);

#endif
