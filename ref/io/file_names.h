/* Names that become file names, and paths refenc builds (docs/cli.md,
 * "Files").
 *
 * A name that refenc turns into a file name (a case name: from --name, a
 * catalogue, a part file, a manifest) is 1 to REFENC_SAFE_NAME_MAX bytes of
 * A-Z a-z 0-9 '.' '_' '-', does not start with '.' and holds no "..": no
 * path separator, no way up, no hidden file, nothing a shell or a URL must
 * quote.  certify reads manifests by the same rule (io/manifest.h), so
 * whatever refenc golden writes, certify reads.
 *
 * A path refenc builds from a directory and names is an error when it does
 * not fit in PATH_MAX bytes, never a shorter path naming another file. */
#ifndef REFENC_FILE_NAMES_H
#define REFENC_FILE_NAMES_H

#include <stddef.h>

#include "../core/status.h"

/* The longest file name in a directory (Linux's NAME_MAX). */
#define REFENC_FILE_NAME_MAX 255

#define REFENC_SAFE_NAME_MAX 127
#define REFENC_SAFE_NAME_RULE                                                                  \
    "1 to 127 characters of A-Z a-z 0-9 . _ -, not starting with '.' and without '..'"

/* 1 when s follows the rule above. */
int refenc_file_name_ok(const char *s);

/* Formats a path into buf (cap bytes, at most PATH_MAX).  Errors:
 * REFENC_ELIMIT when it does not fit ("PATH...: path too long (N bytes, longer
 * than the limit of CAP - 1)"): buf then holds "" and nothing may use it. */
int refenc_path_format(char *buf, size_t cap, refenc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
