/* Learned positional encoding in MPFR (learned_pe.h): y = x + table[pos]. */
#include "internal.h"

void refenc_mpk_learned_pe_forward(mpfr_ptr y, unsigned char *exact, mpfr_srcptr x,
                                   const int64_t *pos, mpfr_srcptr table, size_t B, size_t L,
                                   size_t D)
{
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++) {
            mpfr_srcptr row = table + (size_t)pos[l] * D; /* table[pos[l],:] */
            const size_t off = (b * L + l) * D;          /* [b,l,:] */
            for (size_t d = 0; d < D; d++) {
                const int t = mpfr_add(y + off + d, x + off + d, row + d, MPFR_RNDN);
                if (exact != NULL)
                    exact[off + d] = exact[off + d] && t == 0;
            }
        }
}

typedef struct {
    const double *x, *table;
    const int64_t *pos;
    size_t B, L, P, D;
} lpe_args;

static int lpe_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const lpe_args *a = ctx;
    const size_t n = a->B * a->L * a->D;
    int st;
    mpfr_ptr y = refenc_mp_from_d(a->x, n, prec); /* in place */
    mpfr_ptr t = refenc_mp_from_d(a->table, a->P * a->D, 53);
    if (!y || !t) {
        st = refenc_mp_enomem(err, "learned PE", prec);
    } else {
        refenc_mpk_learned_pe_forward(y, NULL, y, a->pos, t, a->B, a->L, a->D);
        const size_t shape[3] = {a->B, a->L, a->D};
        st = refenc_mp_sink_emit(sink, "y", y, 3, shape);
    }
    refenc_mp_free(t, a->P * a->D);
    refenc_mp_free(y, n);
    return st;
}

int refenc_mp_learned_pe_forward(double *y, const double *x, const int64_t *pos,
                                 const double *table, size_t B, size_t L, size_t P, size_t D,
                                 mpfr_prec_t prec, refenc_mp_report *rep)
{
    lpe_args a = {x, table, pos, B, L, P, D};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(lpe_eval, &a, prec, rep, outs, 1);
}
