#include "testutil.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>

double test_gamma(double n)
{
    return n * TEST_U / (1.0 - n * TEST_U);
}

unsigned long test_seed(void)
{
    const char *s = getenv("REFENC_SEED");
    if (s == NULL || *s == '\0')
        return TEST_DEFAULT_SEED;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || *s == '-')
        cr_assert_fail("REFENC_SEED='%s' is not a decimal unsigned integer", s);
    return v;
}

gsl_rng *test_rng(unsigned long stream)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    cr_assert_not_null(r, "cannot allocate a GSL generator");
    gsl_rng_set(r, test_seed() + stream * 1000003ul);
    return r;
}

void test_fill_gaussian(double *x, size_t n, double mean, double sigma, gsl_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = mean + gsl_ran_gaussian_ziggurat(rng, sigma);
}

/* Maps a double onto a signed integer line on which neighbouring doubles are
 * neighbouring integers: non-negative doubles keep their bit pattern,
 * negative ones are reflected (-x maps to -bits(x)). */
static int64_t ordered(double x)
{
    int64_t i;
    memcpy(&i, &x, sizeof i);
    return i >= 0 ? i : -(i & INT64_MAX);
}

double test_ulp_distance(double a, double b)
{
    if (isnan(a) || isnan(b))
        return INFINITY;
    const int64_t ia = ordered(a), ib = ordered(b);
    /* |ia - ib| < 2^64: exact in unsigned arithmetic (modulo 2^64), then
     * converted to double, exactly below 2^53 */
    const uint64_t d = ia > ib ? (uint64_t)ia - (uint64_t)ib : (uint64_t)ib - (uint64_t)ia;
    return (double)d;
}

void test_worst_init(test_worst *w)
{
    memset(w, 0, sizeof *w);
}

int test_worst_check(test_worst *w, double got, double want, double tol, const char *fmt, ...)
{
    const double diff = fabs(got - want);
    /* NaN anywhere compares false: never within tolerance, always the worst */
    const int ok = diff <= tol;
    const double ratio = !(diff == diff) ? INFINITY : tol > 0 ? diff / tol : (diff > 0 ? INFINITY : 0);
    w->checked++;
    if (ratio > w->worst_ratio || (!ok && w->where[0] == '\0')) {
        w->worst_ratio = ratio;
        w->got = got;
        w->want = want;
        w->tol = tol;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->where, sizeof w->where, fmt, ap);
        va_end(ap);
    }
    return ok;
}

const char *test_worst_describe(const test_worst *w, char *buf, size_t n)
{
    snprintf(buf, n,
             "seed %lu (replay: REFENC_SEED=%lu), %zu values checked, worst at %s: "
             "got %a (%.17g), want %a (%.17g), |diff| %.3g, tol %.3g (%.3g of tol)",
             test_seed(), test_seed(), w->checked, w->where, w->got, w->got, w->want, w->want,
             fabs(w->got - w->want), w->tol, w->worst_ratio);
    return buf;
}

void test_tmpdir(char *dir, const char *tag)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, PATH_MAX, "%s/refenc-%s-XXXXXX", t != NULL && *t ? t : "/tmp", tag);
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

void test_rmdir(const char *dir)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

const char *test_join(char *buf, const char *dir, const char *name)
{
    const int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);
    cr_assert(n > 0 && n < PATH_MAX);
    return buf;
}

void test_put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}
