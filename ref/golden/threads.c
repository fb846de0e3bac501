/* Whether the oracle's threads can start (threads.h). */
#include "threads.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* libgomp's OMP_STACKSIZE: a size with an optional unit B, K, M or G (K when
 * none); 0 when unset or not such a size (libgomp then ignores it too). */
static size_t env_stack_size(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL)
        return 0;
    char *end;
    const unsigned long long n = strtoull(v, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    const char u = (char)toupper((unsigned char)*end);
    const int shift = u == 'B' ? 0 : u == 'K' || u == '\0' ? 10 : u == 'M' ? 20 : u == 'G' ? 30 : -1;
    if (end == v || shift < 0 || (u != '\0' && end[1] != '\0') || n > (SIZE_MAX >> shift))
        return 0;
    return (size_t)n << shift;
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate;

/* A started thread waits until every other has been tried. */
static void *wait_at(void *p)
{
    gate *g = p;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int golden_threads_check(int threads, refenc_error *err)
{
    static int known = 1; /* the largest team known to start */
    if (threads <= known)
        return REFENC_OK;
    pthread_t *t = malloc((size_t)(threads - 1) * sizeof *t);
    pthread_attr_t attr;
    if (t == NULL || pthread_attr_init(&attr) != 0) {
        free(t);
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory starting %d threads", threads);
    }
    size_t stack = env_stack_size("OMP_STACKSIZE");
    if (stack == 0)
        stack = env_stack_size("GOMP_STACKSIZE");
    if (stack > 0)
        pthread_attr_setstacksize(&attr, stack < PTHREAD_STACK_MIN ? PTHREAD_STACK_MIN : stack);
    pthread_attr_getstacksize(&attr, &stack);
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int started = 0, e = 0;
    while (started < threads - 1 && (e = pthread_create(&t[started], &attr, wait_at, &g)) == 0)
        started++;
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    pthread_attr_destroy(&attr);
    free(t);
    if (e != 0)
        return refenc_error_set(err, REFENC_ELIMIT,
                                "--threads %d: only %d threads could be started (%s); give fewer, or more "
                                "memory: each takes a stack of %zu KiB (OMP_STACKSIZE sets it)",
                                threads, started + 1, strerror(e), stack >> 10);
    known = threads;
    return REFENC_OK;
}
