/* The temporary files a process has open for writing, removed when it is
 * ended by a termination signal (SIGHUP, SIGINT, SIGQUIT, SIGTERM) in any of
 * its threads (docs/hardening.md, "The file-system layer").
 *
 * The atomic writer (atomic_write.h) reserves an entry before it creates a
 * temporary file, publishes its name once created, and takes it out when it
 * renames or removes it.  The first
 * reservation installs a handler for each termination signal whose disposition
 * is still the default (one a program ignores, or handles itself, is left
 * as it is).  The handler runs in whichever thread the kernel picks (the
 * golden oracle's OpenMP workers included), unlinks every registered
 * temporary (unlinkat only: async-signal-safe), restores the default
 * disposition and raises the signal again, so the process still ends by it
 * and its parent sees the same status.
 *
 * A program with its own handlers calls refenc_temporaries_unlink_all from
 * them.  The registry is a fixed table without locks: an entry is claimed
 * and released with atomic compare-and-swap, and one the handler took is
 * never reused nor its directory closed (its owner waits for the end). */
#ifndef REFENC_TEMPORARIES_H
#define REFENC_TEMPORARIES_H

/* How many temporary files a process may hold at once (refenc holds one or
 * two: a case and its manifest). */
#define REFENC_TEMPORARIES_MAX 64

/* Reserves an entry before the temporary file is created: from then on a
 * handler waits (a bounded time) for the entry to be published or released,
 * so that a signal taken by another thread between the creation and the
 * publication still removes the file.  The caller has the termination
 * signals blocked in its own thread.  Returns the entry's index, or -1 when
 * every entry is taken. */
int refenc_temporaries_reserve(void);

/* Publishes reserved entry i: the temporary `name` in the directory dirfd
 * (both must stay valid until refenc_temporaries_remove). */
void refenc_temporaries_publish(int i, int dirfd, const char *name);

/* Gives back reserved entry i when no file was created. */
void refenc_temporaries_release(int i);

/* Takes entry i out (i < 0: nothing).  When a signal handler has taken it
 * (it unlinks the file and ends the process by its signal), never returns:
 * the calling thread waits for the end, so that the process ends by the
 * signal, not by an error about its vanished temporary file. */
void refenc_temporaries_remove(int i);

/* Unlinks every registered temporary file.  Async-signal-safe. */
void refenc_temporaries_unlink_all(void);

#endif
