/* Whether the oracle's threads can start, asked before it starts them.
 * The oracle's threads are OpenMP's (libgomp): a thread it cannot create
 * ends the program inside the library, with exit status 1 and no refenc
 * message.  So `refenc golden` first starts the same number of threads
 * itself, with the stack libgomp would give them (OMP_STACKSIZE or
 * GOMP_STACKSIZE when set, else the system's default, RLIMIT_STACK: 8 MiB
 * on most machines), and stops them again; if one cannot start (a memory
 * limit such as `ulimit -v` that cannot hold the stacks, a process limit),
 * the run is refused with a message naming --threads. */
#ifndef REFENC_GOLDEN_THREADS_H
#define REFENC_GOLDEN_THREADS_H

#include "../core/status.h"

/* REFENC_OK if `threads` threads (the caller's and threads - 1 more) could
 * start; a team once known to start is not tried again (libgomp keeps its
 * threads).  Errors: REFENC_ELIMIT ("--threads N: only K threads could be
 * started (reason) ..."), REFENC_ENOMEM. */
int golden_threads_check(int threads, refenc_error *err);

#endif
