/* An output directory (refenc golden --out DIR): the directory and the
 * subdirectories refenc writes into, and the advisory lock that makes a
 * read-modify-write of the directory (a case and the manifest that lists
 * it) one step for every other refenc process (docs/cli.md, "Files").
 *
 * DIR itself is the user's choice: created if absent (its parent must
 * exist), and resolved as given, symbolic links included.  What refenc
 * names inside it (cases/, parts/) is opened with O_NOFOLLOW relative to
 * DIR's descriptor: a symbolic link or anything but a directory there is
 * refused, so every file lands inside DIR.  The lock is flock(2) LOCK_EX on
 * DIR's descriptor: another tool may take the same lock to read DIR while
 * refenc is not changing it. */
#ifndef REFENC_OUT_DIR_H
#define REFENC_OUT_DIR_H

#include "../core/status.h"

typedef struct {
    const char *path; /* DIR as given (borrowed) */
    int fd;           /* DIR, or -1 */
} refenc_out_dir;

/* Creates DIR if absent, opens it and, when `lock`, waits for the lock.
 * Errors: REFENC_EIO ("DIR: exists and is not a directory", "cannot create
 * the directory", "cannot lock the directory", with the system's reason).
 * On error d->fd is -1. */
int refenc_out_dir_open(refenc_out_dir *d, const char *path, int lock, refenc_error *err);

/* The subdirectory `name` (one name, no '/') of d, created if absent,
 * opened with O_NOFOLLOW into *fd.  Errors: REFENC_EIO ("DIR/NAME: exists
 * and is not a directory", "is a symbolic link, not a directory: refusing
 * to write through it", "cannot create the directory"). */
int refenc_out_dir_sub(const refenc_out_dir *d, const char *name, int *fd, refenc_error *err);

/* Releases the lock and closes DIR.  Safe after a failed open. */
void refenc_out_dir_close(refenc_out_dir *d);

#endif
