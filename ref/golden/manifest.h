/* The manifest of a golden directory, DIR/manifest.json, listing the cases
 * in DIR/cases/ (docs/golden-format.md):
 *   {"format": "refenc-golden", "format_version": "1", "total_bytes": N,
 *    "cases": [{"case", "file", "sha256", "bytes", "component", "description",
 *               "outputs", "bug_classes", ["float32_hazard"]}, ...]}
 * Every entry is read from its case file (checksum, size, metadata). */
#ifndef REFENC_CLI_GOLDEN_MANIFEST_H
#define REFENC_CLI_GOLDEN_MANIFEST_H

#include <stddef.h>

#include <jansson.h>

#include "../core/status.h"


/* The manifest entry of the case file at path, listed as `file` (a name in
 * DIR/cases/).  Errors: those of refenc_st_read, REFENC_EFORMAT (metadata
 * without case, component, description, outputs or bug_classes), REFENC_EIO. */
int golden_manifest_entry(json_t **entry, const char *path, const char *file, refenc_error *err);

/* Writes DIR/manifest.json-style document with these entries (total_bytes
 * summed), atomically.  Errors: REFENC_EIO, REFENC_ENOMEM. */
int golden_manifest_write(const char *path, const json_t *cases, refenc_error *err);

/* Rebuilds a manifest for the cases a catalogue lists, in its order, from
 * the files CASES_DIR/<case>.safetensors.  Errors: as above, and
 * REFENC_EINVAL for a malformed catalogue. */
int golden_manifest_for_catalogue(const char *catalogue, const char *cases_dir, const char *out,
                                  refenc_error *err);

/* Puts the case file `tmp_path` into the golden directory dir as
 * dir/cases/<name>.safetensors and its entry into dir/manifest.json (added,
 * or replacing the entry of the same name in place), under a lock on dir, so
 * that concurrent runs into one directory each keep their entry.  The case
 * file and the manifest change together or not at all: on any error the
 * temporary file is removed and dir is left as it was.
 * Errors: REFENC_EIO, REFENC_EFORMAT (an existing manifest that is not one),
 * REFENC_ENOMEM. */
int golden_dir_add(const char *dir, const char *name, const char *tmp_path, refenc_error *err);

/* Creates dir and dir/SUB (SUB may be NULL) if they do not exist.
 * Errors: REFENC_EIO. */
int golden_mkdirs(const char *dir, const char *sub, refenc_error *err);

#endif
