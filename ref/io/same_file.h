/* An output must never be an input of the same command, nor another output
 * of it (docs/cli.md, "Files"): every writer of refenc asks here before it
 * writes.
 *
 * Two paths name the same file when both exist and have the same device and
 * inode (a hard link, "./x" for "x", a symbolic link to it), or, when
 * neither exists yet (two outputs of one command), when they resolve to the
 * same path: the directory part resolved by realpath(3), the last name
 * compared as it is.  One that exists and one that does not are different
 * files: writing the second leaves the first. */
#ifndef REFENC_SAME_FILE_H
#define REFENC_SAME_FILE_H

#include "../core/status.h"

/* 1 when a and b name the same file, 0 otherwise (also when neither can be
 * resolved: the write or the read will fail on its own). */
int refenc_same_file(const char *a, const char *b);

/* REFENC_EINVAL when `out` names the same file as `in`, with the message
 * "OUT: is the same file as the WHAT IN: refusing to overwrite it". */
int refenc_refuse_same_file(const char *out, const char *in, const char *what, refenc_error *err);

#endif
