/* The golden directory's manifest, DIR/manifest.json (docs/golden-format.md),
 * and the trust it carries (docs/verdict.md, "What a certificate proves"):
 * each case file is used only if its bytes have the sha256 the manifest
 * lists, so a golden file changed after its release (expected values
 * replaced, a tolerance scale raised, a don't-care mask widened, an output
 * marked optional) is refused, never certified against.  The manifest itself
 * is trusted as a whole: its own sha256 is printed in every certificate so
 * that a CI can pin the release it certifies against.
 *
 * Reading refuses what is not a regular file (a FIFO cannot block it: it is
 * opened with O_NONBLOCK, then checked), a manifest over
 * REFENC_MANIFEST_MAX_BYTES, JSON errors and duplicate keys, and every entry
 * that is not {"case": NAME, "file": FILE, "sha256": 64 hex digits, ...}
 * with NAME and FILE safe names: 1 to 127 bytes of [A-Za-z0-9._-], not
 * starting with '.', without "..", so that neither can reach outside the
 * golden and results directories; two entries with the same case name are
 * refused too. */
#ifndef REFENC_MANIFEST_H
#define REFENC_MANIFEST_H

#include <stddef.h>

#include "../core/status.h"
#include "safetensors.h"

/* 16 MiB: the committed manifest of 57 cases is about 30 kB. */
#define REFENC_MANIFEST_MAX_BYTES ((size_t)16 << 20)
#define REFENC_CASE_NAME_MAX 128 /* with the NUL */

typedef struct {
    char name[REFENC_CASE_NAME_MAX];
    char file[REFENC_CASE_NAME_MAX];
    char sha256[65]; /* lower-case hex */
} refenc_manifest_case;

typedef struct {
    char *path;                  /* DIR/manifest.json                      */
    char sha256[65];             /* of the manifest's bytes                */
    size_t n_cases;
    refenc_manifest_case *cases; /* in the manifest's order                */
} refenc_manifest;

/* Reads and checks golden_dir/manifest.json.  Messages start with its path.
 * Errors: REFENC_EIO (cannot open or read it, not a regular file),
 * REFENC_ELIMIT (larger than REFENC_MANIFEST_MAX_BYTES), REFENC_EFORMAT (not
 * JSON, no "cases" array, an entry as refused above, naming its index),
 * REFENC_ENOMEM.  On error *m is empty (safe to free). */
int refenc_manifest_read(refenc_manifest *m, const char *golden_dir, refenc_error *err);
void refenc_manifest_free(refenc_manifest *m);

/* 1 if s is a safe case or file name (above). */
int refenc_manifest_name_ok(const char *s);

/* Checks that the golden file f, read for entry c, is the one the manifest
 * lists: its bytes have c->sha256, and its __metadata__.case is c->name.
 * Errors: REFENC_EFORMAT, naming the file and both checksums or names. */
int refenc_manifest_verify(const refenc_manifest_case *c, const refenc_st_file *f, refenc_error *err);

/* The sha256 of n bytes, as 64 lower-case hex digits and a NUL. */
void refenc_sha256_hex(char hex[65], const void *bytes, size_t n);

#endif
