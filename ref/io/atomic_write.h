/* Output files written atomically: a reader sees the old file or the whole
 * new one, never a part; on any error the old file is left as it was and
 * nothing else is left behind.  Every file refenc writes goes through here
 * (results files, certificates, the golden manifest).
 *
 *   refenc_atomic_open    checks the target and creates a temporary file in
 *                         the target's directory
 *   refenc_atomic_write   appends bytes to it
 *   refenc_atomic_commit  fsync, rename over the target, fsync the directory
 *   refenc_atomic_abort   removes the temporary file
 *
 * The target must be a regular file or absent: a directory, a symbolic link,
 * a device, a FIFO or a socket at that name is refused, never replaced (nor
 * written through).  The temporary file is "<name>.tmp.XXXXXX" (the target's
 * name, cut to fit NAME_MAX, and six random characters), created with
 * O_CREAT | O_EXCL | O_NOFOLLOW relative to the directory's descriptor: a file
 * or a symbolic link planted at that name is never opened nor followed
 * (another name is drawn), and a target path close to PATH_MAX works as long
 * as the path itself is valid.  Its mode is what the target would get: the
 * permission bits of the regular file it replaces, or 0666 less the umask
 * for a new file.
 *
 * Between open and commit or abort, the termination signals (SIGHUP, SIGINT,
 * SIGQUIT, SIGTERM) are blocked in the calling thread (unless a write that
 * lasts as long as a computation lets them through: refenc_atomic_signals):
 * one that arrives mid-write takes effect once the temporary file is renamed
 * or removed.
 * Another thread (an OpenMP worker) may still take it: the temporary file is
 * registered (temporaries.h), and the handler installed there removes it
 * before the process ends by the signal.  SIGKILL can neither be blocked
 * nor handled: it may leave the temporary file, never a changed target.  A file-size limit (RLIMIT_FSIZE) kills a process with
 * SIGXFSZ unless the process ignores that signal: programs should ignore it
 * (refenc and refenc-golden do), and a write past the limit then fails with
 * EFBIG and is reported like a full disk.
 *
 * A failing write or commit removes the temporary file itself: after an
 * error the caller only returns.  Every message starts with the target's
 * path. */
#ifndef REFENC_ATOMIC_WRITE_H
#define REFENC_ATOMIC_WRITE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../core/status.h"
#include "file_names.h"
#include "same_file.h"

typedef struct refenc_atomic_file {
    const char *path;                     /* the target, as given (borrowed)       */
    int dirfd;                            /* the target's directory, or -1          */
    int fd;                               /* the temporary file, or -1              */
    char base[REFENC_FILE_NAME_MAX + 1]; /* the target's name in its directory     */
    char tmp[REFENC_FILE_NAME_MAX + 1];  /* the temporary's name, "" when none     */
    int reg;                              /* its entry in temporaries.h, or -1      */
    sigset_t saved;                       /* the signal mask before open            */
    int blocked;                          /* the termination signals are blocked    */
} refenc_atomic_file;

/* Checks the target and creates the temporary file.  path must outlive a.
 * Errors: REFENC_EINVAL (path empty or ending in '/', the target exists and is
 * not a regular file), REFENC_EIO (the directory cannot be opened, no
 * temporary file can be created: the message gives the system's reason).
 * On error nothing is left open or created. */
int refenc_atomic_open(refenc_atomic_file *a, const char *path, refenc_error *err);

/* The same with path relative to the directory descriptor `at` (AT_FDCWD:
 * the working directory), and `display` (NULL: path; borrowed like path)
 * as the target's name in every message.  A name without '/' under a
 * directory the caller opened with O_NOFOLLOW is written exactly there,
 * whatever happens to the paths above it, at any length of display. */
int refenc_atomic_openat(refenc_atomic_file *a, int at, const char *path, const char *display,
                         refenc_error *err);

/* Appends n bytes.  Errors: REFENC_EIO (the temporary file is then removed). */
int refenc_atomic_write(refenc_atomic_file *a, const void *buf, size_t n, refenc_error *err);

/* Writes n bytes at offset of the temporary file (pwrite: the end where
 * refenc_atomic_write appends does not move), or reads them back (the
 * temporary is open for reading and writing).  Calls for distinct bytes may
 * come from several threads at once.  Unlike refenc_atomic_write, a failure
 * leaves the temporary file: the caller aborts.  Errors: REFENC_EIO (a full
 * disk, a file-size limit, bytes not written yet). */
int refenc_atomic_pwrite(refenc_atomic_file *a, const void *buf, size_t n, uint64_t offset, refenc_error *err);
int refenc_atomic_pread(refenc_atomic_file *a, void *buf, size_t n, uint64_t offset, refenc_error *err);

/* blocked 0: the termination signals are let through in the calling thread,
 * for a write that lasts as long as a computation (a golden part streamed
 * over its oracle run, safetensors.h): one that arrives then ends the
 * process and the handler (temporaries.h) removes the temporary file, the
 * target untouched.  blocked 1: blocked again, as between open and commit. */
void refenc_atomic_signals(refenc_atomic_file *a, int blocked);

/* Makes the file appear under its name.  Errors: REFENC_EIO (fsync, close or
 * rename failed; the temporary file is removed and the target untouched). */
int refenc_atomic_commit(refenc_atomic_file *a, refenc_error *err);

/* Removes the temporary file, if any, and restores the signal mask.  Safe to
 * call more than once, and after a failed open, write or commit. */
void refenc_atomic_abort(refenc_atomic_file *a);

/* A whole JSON document, dumped with jansson's flags, written atomically.
 * Errors: as above, and REFENC_ENOMEM (jansson could not dump it). */
int refenc_atomic_write_json(const char *path, const json_t *doc, size_t flags,
                             refenc_error *err);

/* The same relative to `at`, display in messages (refenc_atomic_openat). */
int refenc_atomic_write_json_at(int at, const char *path, const char *display, const json_t *doc,
                                size_t flags, refenc_error *err);

#endif
