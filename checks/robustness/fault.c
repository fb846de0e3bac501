#include "fault.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);

static long countdown; /* 0: disarmed; else allocations left before the failing one */
static size_t largest;  /* the largest allocation since fault_largest_reset */
static int fired;
static int jansson_redirected;

/* 1 if this allocation is the one to fail */
static int fail_now(void)
{
    if (countdown == 0)
        return 0;
    if (--countdown == 0) {
        fired = 1;
        return 1;
    }
    return 0;
}

static void record(size_t n)
{
    if (n > largest)
        largest = n;
}

void *__wrap_malloc(size_t n)
{
    record(n);
    return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    record(size != 0 && n > (size_t)-1 / size ? (size_t)-1 : n * size);
    return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    record(n);
    return fail_now() ? NULL : __real_realloc(p, n);
}

void fault_largest_reset(void)
{
    largest = 0;
}

size_t fault_largest(void)
{
    return largest;
}

char *__wrap_strdup(const char *s)
{
    return fail_now() ? NULL : __real_strdup(s);
}

static void *json_alloc(size_t n)
{
    return __wrap_malloc(n);
}

static void json_release(void *p)
{
    free(p);
}

void fault_arm(long n, int jansson)
{
    cr_assert_gt(n, 0);
    fired = 0;
    countdown = n;
    if (jansson) {
        json_set_alloc_funcs(json_alloc, json_release);
        jansson_redirected = 1;
    }
}

int fault_disarm(void)
{
    countdown = 0;
    /* jansson's default (its own, unwrapped, reference to malloc); `malloc`
     * here would be __wrap_malloc */
    if (jansson_redirected)
        json_set_alloc_funcs(__real_malloc, free);
    jansson_redirected = 0;
    return fired;
}

long fault_run(int (*call)(void *ctx), void (*check)(void *ctx, int status, int failed), void *ctx,
               int jansson)
{
    for (long n = 1; n < 100000; n++) {
        fault_arm(n, jansson);
        const int status = call(ctx);
        const int failed = fault_disarm();
        check(ctx, status, failed);
        if (!failed)
            return n - 1;
    }
    cr_assert_fail("more than 100000 allocations");
    return -1;
}
