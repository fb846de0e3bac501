/* Shared machinery of the gradient suites (checks/gradients/,
 * docs/gradients.md): the finite-difference budget, the table of backward
 * kernels a property is run on (the reference's, or a test-only mutant's),
 * and the property functions themselves, so that the same function is the
 * test (on the reference: it must hold) and the negative control (on each
 * named bug: some property must fail).
 *
 * Every property returns the number of violations and records the worst
 * comparison in a test_worst (testutil.h), whose message carries the seed. */
#ifndef REFENC_GRADCHECK_H
#define REFENC_GRADCHECK_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "../../ref/refenc.h"
#include "../common/testutil.h"

/* ---- the kernels under test ----------------------------------------------- */

typedef struct {
    const char *name;
    void (*linear)(double *dx, double *dW, double *db, const double *dy, const double *x,
                   const double *W, size_t N, size_t in, size_t out);
    void (*layernorm)(double *dx, double *dgamma, double *dbeta, const double *dy,
                      const double *x, const double *gamma, size_t N, size_t D, double eps);
    void (*softmax)(double *ds, const double *dy, const double *y, size_t R, size_t n, double tau);
    void (*attention)(double *dq, double *dk, double *dv, double *dP, double *dS, double *Drow,
                      const double *dout, const double *q, const double *k, const double *v,
                      const double *weights, const double *out, const refenc_attn_options *opt,
                      size_t B, size_t H, size_t L, size_t Dh);
    void (*rope)(double *dx, const double *dy, const int64_t *pos, size_t N, size_t L, size_t Dh,
                 double base, refenc_rope_layout layout);
    void (*activation)(double *dx, const double *dy, const double *x, size_t n,
                       refenc_activation act);
    void (*embedding)(double *dtable, const double *dx, const int64_t *tokens, size_t B, size_t L,
                      size_t V, size_t D);
} gc_kernels;

/* The reference's backward kernels (ref/). */
extern const gc_kernels gc_reference;

/* The named backward bugs of issue 25, each the reference with one kernel
 * replaced by a test-only mutant (mutants.c). */
extern const gc_kernels gc_mutants[];
extern const size_t gc_n_mutants;

/* ---- the finite-difference budget (docs/gradients.md) --------------------- */

/* phi(t), computed in double at the exact point x + t v, with *err set to a
 * bound on |computed - exact phi(t)| (from the forward's error analysis). */
typedef double (*gc_phi)(void *ctx, double t, double *err);

typedef struct {
    double d1, d2;   /* the central differences at h and h/2                  */
    double trunc;    /* (2/3) |d1 - d2|: the truncation budget of d2          */
    double round;    /* (5/3) rho(h/2) + (2/3) rho(h): the rounding budget    */
    double tol;      /* trunc + round: |d2 - phi'(0)| <= tol                   */
} gc_fd;

/* Central differences of phi at steps h and h/2 (h a power of two, so that
 * the caller's x +- t v are exact) and the budget of d2. */
void gc_central(gc_fd *r, gc_phi phi, void *ctx, double h);

/* The step every suite uses: 2^-17, near (3 eps / M3)^(1/3) for eps ~ 1e-14,
 * M3 ~ 1 (docs/gradients.md). */
#define GC_STEP 0x1p-17
/* Inputs and parameters live on a grid of 2^-30 (magnitudes below 2^22),
 * directions on a grid of 2^-12 clamped to +-8: at t = +-h, +-h/2, t v is a
 * multiple of 2^-30 and x + t v, below 2^23, has at most 53 bits: exact. */
#define GC_GRID_X 0x1p-30
#define GC_GRID_V 0x1p-12

/* Rounds x to a multiple of grid (exactly, for |x| < 2^22 and grid >= 2^-30). */
void gc_quantize(double *x, size_t n, double grid);

/* Fills x (n) with N(0, sigma^2) values on the direction grid, clamped to +-8. */
void gc_direction(double *v, size_t n, double sigma, gsl_rng *r);

/* sum_i a_i b_i (i upward) and gamma_n sum |a_i b_i|, its rounding bound. */
double gc_dot(const double *a, const double *b, size_t n, double *err);

/* <dY, y> for y correctly rounded values (an oracle's outputs): *err is
 * gc_dot's bound plus each y_i's own rounding, |dY_i| u |y_i| (1 + 2u). */
double gc_dot_rounded(const double *dY, const double *y, size_t n, double *err);

/* Checks a computed directional derivative a = <g, v> (with its own
 * rounding bound ea) against the central difference: |a - d2| <= tol + ea. */
int gc_fd_check(test_worst *w, double a, double ea, const gc_fd *fd, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- kernel properties: each returns its number of violations ------------- */

size_t gp_linear_fd(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_linear_outer(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_layernorm_rows(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_layernorm_fd(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_softmax_rows(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_softmax_fd(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_activation_fd(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_rope_fd(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_embedding_repeats(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_attention_adjoint(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_attention_rows(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t gp_attention_masked_keys(const gc_kernels *K, gsl_rng *r, test_worst *w);

/* All of them, by name, for the negative controls. */
typedef size_t (*gc_property)(const gc_kernels *K, gsl_rng *r, test_worst *w);
typedef struct {
    const char *name;
    gc_property run;
} gc_named_property;
extern const gc_named_property gc_properties[];
extern const size_t gc_n_properties;

/* Fails the test unless something was checked and bad is 0, with the worst
 * comparison (and its seed) in the message; logs it either way. */
void gc_report(const test_worst *w, size_t bad);

/* Runs one property on the kernels K (NULL: the oracle's twins, for the
 * properties that take them) with its own seeded stream, and reports it. */
void gc_holds(gc_property run, const gc_kernels *K, unsigned long stream);

#endif
