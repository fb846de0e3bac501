/* The plumbing shared by the twins: exact input conversion and copying the
 * certified steps into the caller's arrays. */
#include "internal.h"

#include <limits.h>
#include <string.h>

_Static_assert(ULONG_MAX >= ((unsigned long long)1 << 53) - 1,
               "positions up to 2^53 must fit in unsigned long");

mpfr_ptr refenc_mp_from_d(const double *x, size_t n, mpfr_prec_t prec)
{
    mpfr_ptr a = refenc_mp_alloc(n, prec);
    if (a == NULL)
        return NULL;
    if (refenc_mp_set_d(a, x, n) != 0) { /* internal invariant: prec >= 53 */
        refenc_mp_free(a, n);
        return NULL;
    }
    return a;
}

int refenc_mp_enomem(refenc_error *err, const char *what, mpfr_prec_t prec)
{
    return refenc_error_set(err, REFENC_ENOMEM, "oracle: cannot allocate %s at %ld bits", what,
                            (long)prec);
}

int refenc_mp_mul_pos(mpfr_ptr y, mpfr_srcptr x, int64_t pos)
{
    return mpfr_mul_ui(y, x, (unsigned long)pos, MPFR_RNDN);
}

typedef struct {
    const refenc_mp_output *outs;
    size_t n_outs;
} capture;

static void capture_fn(void *ctx, const char *name, const double *data, size_t ndim,
                       const size_t *shape)
{
    const capture *c = ctx;
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    for (size_t i = 0; i < c->n_outs; i++)
        if (c->outs[i].dst != NULL && strcmp(c->outs[i].name, name) == 0)
            memcpy(c->outs[i].dst, data, n * sizeof(double));
}

int refenc_mp_run_twin(refenc_mp_eval_fn eval, void *ctx, mpfr_prec_t prec,
                       refenc_mp_report *rep, const refenc_mp_output *outs, size_t n_outs)
{
    capture c = {outs, n_outs};
    const refenc_trace trace = {capture_fn, &c};
    return refenc_mp_certify(eval, ctx, prec, &trace, rep);
}

mpfr_ptr refenc_mp_arena_alloc(refenc_mp_arena *ar, size_t n, mpfr_prec_t prec)
{
    if (n == 0)
        return NULL;
    if (ar->n == sizeof ar->a / sizeof ar->a[0]) {
        ar->failed = 1;
        return NULL;
    }
    mpfr_ptr p = refenc_mp_alloc(n, prec);
    if (p == NULL) {
        ar->failed = 1;
        return NULL;
    }
    ar->a[ar->n].p = p;
    ar->a[ar->n].n = n;
    ar->n++;
    return p;
}

mpfr_ptr refenc_mp_arena_from_d(refenc_mp_arena *ar, const double *x, size_t n, mpfr_prec_t prec)
{
    mpfr_ptr p = refenc_mp_arena_alloc(ar, n, prec);
    if (p != NULL && refenc_mp_set_d(p, x, n) != 0)
        ar->failed = 1; /* internal invariant: prec >= 53 */
    return p;
}

void refenc_mp_arena_free(refenc_mp_arena *ar)
{
    for (size_t i = 0; i < ar->n; i++)
        refenc_mp_free(ar->a[i].p, ar->a[i].n);
    ar->n = 0;
}
