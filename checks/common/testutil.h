/* Helpers shared by the Criterion suites in checks/. */
#ifndef REFENC_TESTUTIL_H
#define REFENC_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

/* Unit roundoff of double, and gamma_n = n u / (1 - n u) (Higham, Accuracy
 * and Stability of Numerical Algorithms, 3.1): the relative error bound of
 * n rounded operations in sequence, e.g. a dot product of length n. */
#define TEST_U 0x1p-53
double test_gamma(double n);

/* The suites' seed: REFENC_SEED from the environment if set (a decimal
 * integer), else TEST_DEFAULT_SEED.  A malformed REFENC_SEED aborts the test
 * with a message (it is a usage error, not a pass). */
#define TEST_DEFAULT_SEED 20240521ul
unsigned long test_seed(void);

/* An mt19937 generator seeded with test_seed() + stream, so that each test
 * draws from its own reproducible stream.  Never NULL (aborts the test). */
gsl_rng *test_rng(unsigned long stream);

/* Fills x[0..n) with N(mean, sigma^2) values (GSL's Ziggurat). */
void test_fill_gaussian(double *x, size_t n, double mean, double sigma, gsl_rng *rng);

/* The distance between two doubles in units in the last place: the number of
 * representable doubles between them (0 if equal, 1 for neighbours; +0 and -0
 * are 0 apart).  Infinite if either is NaN.  Exact below 2^53 for any pair of
 * doubles of the same or different sign, rounded above. */
double test_ulp_distance(double a, double b);

/* Worst case tracking for a property checked over many values: keeps the
 * largest excess err/tol and the values that produced it, so a failing test
 * can print them (%a and %.17g) with the seed. */
typedef struct {
    double worst_ratio;   /* max err / tol seen (0 if none)      */
    double got, want, tol;
    char where[160];      /* which case, which index              */
    size_t checked;       /* number of comparisons                */
} test_worst;

void test_worst_init(test_worst *w);
/* Records |got - want| against tol; returns 1 if within tol. */
int test_worst_check(test_worst *w, double got, double want, double tol, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Formats "seed S, worst at WHERE: got %a (%.17g), want %a (%.17g), |diff| %.3g > tol %.3g"
 * into buf. */
const char *test_worst_describe(const test_worst *w, char *buf, size_t n);

/* Files for the file-system suites (PATH_MAX buffers; each fails the test
 * on error): a fresh directory $TMPDIR/refenc-TAG-XXXXXX, its removal, dir/name,
 * and a small text file. */
void test_tmpdir(char *dir, const char *tag);
void test_rmdir(const char *dir);
const char *test_join(char *buf, const char *dir, const char *name);
void test_put(const char *path, const char *text);

#endif
