/* The registry of temporary files and the termination handler (temporaries.h). */
#include "temporaries.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "file_names.h"

/* An entry's state: FREE, then FILLING from its reservation until its
 * owner has created the file and written its name (a handler waits for it:
 * the file may already exist), LIVE once the handler may read it, TAKEN
 * when the handler has claimed it. */
enum { FREE, FILLING, LIVE, TAKEN };

typedef struct {
    int state; /* accessed with __atomic builtins only */
    int dirfd;
    char name[REFENC_FILE_NAME_MAX + 1];
} entry;

static entry table[REFENC_TEMPORARIES_MAX];
static int installed; /* the handlers: 0 not yet, 1 being installed or done */

static const int termination[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM};

/* How long a handler waits for an entry being filled (its owner, with the
 * termination signals blocked, is one openat away from publishing it): a
 * bound, so that a handler in the owner's own thread (signals not blocked)
 * cannot wait for ever.  clock_gettime is async-signal-safe. */
#define FILLING_WAIT_NS 2000000000LL

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

void refenc_temporaries_unlink_all(void)
{
    const long long deadline = now_ns() + FILLING_WAIT_NS;
    for (int i = 0; i < REFENC_TEMPORARIES_MAX; i++) {
        while (__atomic_load_n(&table[i].state, __ATOMIC_ACQUIRE) == FILLING && now_ns() < deadline)
            ;
        int live = LIVE;
        if (__atomic_compare_exchange_n(&table[i].state, &live, TAKEN, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            unlinkat(table[i].dirfd, table[i].name, 0);
    }
}

/* Unlinks the temporaries, then ends the process by the same signal: the
 * disposition is back to the default (SA_RESETHAND); unblocked in this
 * thread, the signal raised again is delivered before raise returns.  (A
 * writer whose entry was taken waits in refenc_temporaries_remove: it never
 * reports the vanished file as an error of its own.) */
static void on_termination(int sig)
{
    const int saved = errno;
    refenc_temporaries_unlink_all();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    errno = saved;
}

/* Installs on_termination for each termination signal left at its default. */
static void install_handlers(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&installed, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    for (size_t k = 0; k < sizeof termination / sizeof termination[0]; k++) {
        struct sigaction old, sa;
        if (sigaction(termination[k], NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
            (old.sa_flags & SA_SIGINFO))
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_termination;
        sigemptyset(&sa.sa_mask);
        for (size_t j = 0; j < sizeof termination / sizeof termination[0]; j++)
            sigaddset(&sa.sa_mask, termination[j]); /* one handler at a time per thread */
        sa.sa_flags = SA_RESETHAND;
        sigaction(termination[k], &sa, NULL);
    }
}

int refenc_temporaries_reserve(void)
{
    install_handlers();
    for (int i = 0; i < REFENC_TEMPORARIES_MAX; i++) {
        int free_ = FREE;
        if (__atomic_compare_exchange_n(&table[i].state, &free_, FILLING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return i;
    }
    return -1;
}

void refenc_temporaries_publish(int i, int dirfd, const char *name)
{
    table[i].dirfd = dirfd;
    snprintf(table[i].name, sizeof table[i].name, "%s", name);
    __atomic_store_n(&table[i].state, LIVE, __ATOMIC_RELEASE);
}

void refenc_temporaries_release(int i)
{
    if (i >= 0 && i < REFENC_TEMPORARIES_MAX)
        __atomic_store_n(&table[i].state, FREE, __ATOMIC_RELEASE);
}

void refenc_temporaries_remove(int i)
{
    if (i < 0 || i >= REFENC_TEMPORARIES_MAX)
        return;
    int live = LIVE;
    if (__atomic_compare_exchange_n(&table[i].state, &live, FREE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    /* a handler took it: it has unlinked the file (or is unlinking it, with
     * this entry's descriptor) and the process ends by its signal; going on
     * would report a vanished temporary as an error, or close the descriptor */
    for (;;)
        pause();
}
