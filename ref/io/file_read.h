/* Opening input files safely, for every reader of refenc (safetensors files,
 * the manifest, configs): an input must be a regular file.  It is opened with
 * O_NONBLOCK, so that a FIFO (or a device that would wait) cannot block the
 * open, then checked with fstat: a directory, a FIFO, a device or a socket is
 * refused with a message naming the path.  Messages start with the path. */
#ifndef REFENC_FILE_READ_H
#define REFENC_FILE_READ_H

#include <stddef.h>

#include "../core/status.h"

/* Opens path for reading and returns its descriptor in *fd and its size in
 * *size.  Errors: REFENC_EIO (cannot open or stat it: the system's reason;
 * "is a directory, not a file"; "not a regular file"; larger than SIZE_MAX).
 * On error *fd is -1. */
int refenc_open_regular(int *fd, size_t *size, const char *path, refenc_error *err);

/* The same for the name `path` relative to the directory descriptor `at`
 * (AT_FDCWD: the working directory), named `display` in messages, and
 * opened with O_NOFOLLOW: a symbolic link at the name is refused ("is a
 * symbolic link, not a regular file"), never followed.  For files inside a
 * directory refenc writes (a golden directory's manifest.json), where a
 * planted link must not redirect the read.  absent (may be NULL): set to 1,
 * with REFENC_EIO, when nothing exists at the name. */
int refenc_open_regular_at(int *fd, size_t *size, int at, const char *path, const char *display,
                           int *absent, refenc_error *err);

/* Reads exactly n bytes from offset off of fd into buf, retrying after
 * interruptions.  Errors: REFENC_EIO (a read error, or the end of the file
 * before n bytes: the file changed while it was read). */
int refenc_read_at(int fd, void *buf, size_t n, size_t off, const char *path, refenc_error *err);

/* The whole of a regular file of at most max bytes, in a new buffer with a
 * NUL after the n bytes (free it).  Errors: as above, and REFENC_ELIMIT (more
 * than max bytes: nothing is read), REFENC_ENOMEM. */
int refenc_read_file(char **buf, size_t *n, const char *path, size_t max, refenc_error *err);

/* The same through refenc_open_regular_at (absent as there). */
int refenc_read_file_at(char **buf, size_t *n, int at, const char *path, const char *display, size_t max,
                        int *absent, refenc_error *err);

#endif
