/* The oracle's adjoint identity (oracle_adjoint.c). */
#ifndef REFENC_ORACLE_ADJOINT_H
#define REFENC_ORACLE_ADJOINT_H

#include <criterion/criterion.h>
#include <mpfr.h>

#include "../../ref/oracle/oracle.h"
#include "gradcheck.h"

/* y = f(theta) with the oracle's forward kernels at ws->prec. */
typedef struct {
    void (*forward)(const void *ctx, mpfr_ptr y, mpfr_srcptr theta, refenc_mp_ws *ws);
    const void *ctx;
    const double *theta, *v, *dY; /* (n), (n), (ny) */
    size_t n, ny;
} ad_problem;

/* 0 if |<g, v> - D(h/2)| is within the budget, else 1; the comparison goes
 * to w under the name what. */
size_t ad_check(const ad_problem *pb, const double *g, test_worst *w, const char *what);

/* The kernels' identities, on the oracle's backward (K NULL) or, as negative
 * controls, with g from a double kernel table (a named bug's). */
size_t ad_linear(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t ad_layernorm(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t ad_softmax(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t ad_attention(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t ad_rope(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t ad_activation(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t ad_embedding(const gc_kernels *K, gsl_rng *r, test_worst *w);

#endif
