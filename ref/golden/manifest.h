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
#include "file.h"


/* The manifest entry of the case file at path, listed as `file` (a name in
 * DIR/cases/).  Errors: those of refenc_st_read, REFENC_EFORMAT (metadata
 * without case, component, description, outputs or bug_classes), REFENC_EIO. */
int golden_manifest_entry(json_t **entry, const char *path, const char *file, refenc_error *err);

/* Writes DIR/manifest.json-style document with these entries (total_bytes
 * summed), atomically.  Errors: REFENC_EIO, REFENC_ENOMEM. */
int golden_manifest_write(const char *path, const json_t *cases, refenc_error *err);

/* Rebuilds a manifest for the cases a catalogue lists, in its order, from
 * the files CASES_DIR/<case>.safetensors.  out must be neither the
 * catalogue nor one of those files; every case name must be a file name.
 * Errors: as above, and REFENC_EINVAL for a malformed catalogue, a bad
 * name, out being an input; REFENC_ELIMIT for a path over PATH_MAX. */
int golden_manifest_for_catalogue(const char *catalogue, const char *cases_dir, const char *out,
                                  refenc_error *err);

/* Writes the case g as dir/cases/<g->name>.safetensors and puts its entry
 * into dir/manifest.json (added, or replacing the entry of the same name in
 * place), all under the directory's lock (io/out_dir.h), so that of
 * concurrent runs into one directory each stores its own case and entry,
 * one after the other.  The manifest is read first, relative to dir and
 * without following a link or blocking (a FIFO, a link, a directory or a
 * malformed manifest is refused and left as it is, nothing written); the
 * case is written atomically into cases/ (opened with O_NOFOLLOW: a link
 * there is refused); a case that was new is taken back if the manifest
 * cannot be written.  g->name must be a case name (golden_check_case_name).
 * Errors: REFENC_EINVAL (the name), REFENC_ELIMIT (a path longer than
 * PATH_MAX), REFENC_EIO, REFENC_EFORMAT (an existing manifest that is not
 * one), REFENC_ENOMEM, those of golden_file_write. */
int golden_dir_add(const char *dir, const golden_file *g, refenc_error *err);

/* REFENC_EINVAL unless name, and name + ".safetensors", follow the rule of
 * names that become file names (io/file_names.h): no '/', no "..", not
 * starting with '.'.  where starts the message. */
int golden_check_case_name(const char *name, const char *where, refenc_error *err);

/* Creates dir and dir/SUB (SUB may be NULL) if they do not exist; SUB is
 * never a symbolic link (io/out_dir.h).  Errors: REFENC_EIO. */
int golden_mkdirs(const char *dir, const char *sub, refenc_error *err);

#endif
