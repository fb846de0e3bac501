/* nn.Linear's backward in MPFR, from linear.h:
 *   dx[n,k]  = sum_o dy[n,o] W[o,k]        dx: (N, in), written; NULL: not computed
 *   dW[o,k] += sum_n dy[n,o] x[n,k]        dW: (out, in), accumulated (+=)
 *   db[o]   += sum_n dy[n,o]               db: (out), accumulated; NULL: no bias
 * Every output is one correctly rounded sum (refenc_mp_dot, mpfr_sum), the
 * starting value of an accumulated output one more term: the twin's outputs
 * are the exact gradients plus the starting values, rounded once. */
#include "backward.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

void refenc_mpk_linear_backward_dw(mpfr_ptr dW, mpfr_srcptr dy, size_t dy_n, size_t dy_o, mpfr_srcptr x,
                                   size_t x_n, size_t x_k, size_t N, size_t in, size_t o0, size_t o1,
                                   unsigned char *ex_dW, refenc_mp_ws *ws)
{
    mpfr_ptr t = ws->tmp; /* the new value, then copied: no output aliases an input */
    for (size_t o = o0; o < o1; o++) /* dW0[o,k] + dy[:,o] . x[:,k] */
        for (size_t k = 0; k < in; k++) {
            const int was = refenc_mpb_exact_begin();
            refenc_mp_dot(t, dy + o * dy_o, dy_n, x + k * x_k, x_n, N, dW + o * in + k, ws);
            const unsigned char e = refenc_mpb_exact_end(was);
            if (ex_dW != NULL)
                ex_dW[o * in + k] = e;
            mpfr_set(dW + o * in + k, t, MPFR_RNDN);
        }
}

void refenc_mpk_linear_backward_db(mpfr_ptr db, mpfr_srcptr dy, size_t N, size_t out,
                                   unsigned char *ex_db, refenc_mp_ws *ws)
{
    mpfr_ptr t = ws->tmp;
    for (size_t o = 0; o < out; o++) { /* db0[o] + sum_n dy[n,o] */
        for (size_t n = 0; n < N; n++)
            ws->pa[n] = (mpfr_ptr)(dy + n * out + o);
        ws->pa[N] = db + o;
        const int exact = mpfr_sum(t, ws->pa, N + 1, MPFR_RNDN) == 0;
        if (ex_db != NULL)
            ex_db[o] = (unsigned char)exact;
        mpfr_set(db + o, t, MPFR_RNDN);
    }
}

void refenc_mpk_linear_backward(mpfr_ptr dx, mpfr_ptr dW, mpfr_ptr db, mpfr_srcptr dy,
                                mpfr_srcptr x, mpfr_srcptr W, size_t N, size_t in, size_t out,
                                unsigned char *ex_dx, unsigned char *ex_dW, unsigned char *ex_db,
                                refenc_mp_ws *ws)
{
    if (dx != NULL)
        for (size_t n = 0; n < N; n++) /* dy[n,:] . W[:,k] */
            for (size_t k = 0; k < in; k++) {
                const int was = refenc_mpb_exact_begin();
                refenc_mp_dot(dx + n * in + k, dy + n * out, 1, W + k, in, out, NULL, ws);
                const unsigned char e = refenc_mpb_exact_end(was);
                if (ex_dx != NULL)
                    ex_dx[n * in + k] = e;
            }
    refenc_mpk_linear_backward_dw(dW, dy, out, 1, x, in, 1, N, in, 0, out, ex_dW, ws);
    if (db != NULL)
        refenc_mpk_linear_backward_db(db, dy, N, out, ex_db, ws);
}

typedef struct {
    const double *dy, *x, *W, *dW0, *db0;
    int want_dx;
    size_t N, in, out;
} linb_args;

static int linb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const linb_args *a = ctx;
    const size_t N = a->N, in = a->in, out = a->out;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 1, (N > out ? N : out) + 1);
    mpfr_ptr dy = refenc_mp_arena_from_d(&ar, a->dy, N * out, 53);
    mpfr_ptr x = refenc_mp_arena_from_d(&ar, a->x, N * in, 53);
    mpfr_ptr W = refenc_mp_arena_from_d(&ar, a->W, out * in, 53);
    mpfr_ptr dx = a->want_dx ? refenc_mp_arena_alloc(&ar, N * in, prec) : NULL;
    mpfr_ptr dW = refenc_mp_arena_alloc(&ar, out * in, prec);
    mpfr_ptr db = a->db0 != NULL ? refenc_mp_arena_alloc(&ar, out, prec) : NULL;
    unsigned char *ex = malloc(N * in + out * in + out); /* which values are exact */
    if (st || ar.failed || ex == NULL) {
        st = refenc_mp_enomem(err, "linear backward", prec);
    } else {
        refenc_mp_set_d(dW, a->dW0, out * in); /* exact: prec >= 53 */
        if (db != NULL)
            refenc_mp_set_d(db, a->db0, out);
        refenc_mpk_linear_backward(dx, dW, db, dy, x, W, N, in, out, ex, ex + N * in,
                                   ex + N * in + out * in, &ws);
        const size_t sx[2] = {N, in}, sw[2] = {out, in}, sb[1] = {out};
        if (dx != NULL)
            st = refenc_mp_sink_emit_exact(sink, "dx", dx, ex, 2, sx);
        if (st == REFENC_OK)
            st = refenc_mp_sink_emit_exact(sink, "dW", dW, ex + N * in, 2, sw);
        if (st == REFENC_OK && db != NULL)
            st = refenc_mp_sink_emit_exact(sink, "db", db, ex + N * in + out * in, 1, sb);
    }
    free(ex);
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_linear_backward(double *dx, double *dW, double *db, const double *dy,
                              const double *x, const double *W, size_t N, size_t in, size_t out,
                              mpfr_prec_t prec, refenc_mp_report *rep)
{
    /* the starting values, copied: the outputs are written over them */
    double *dW0 = malloc(out * in * sizeof *dW0), *db0 = db ? malloc(out * sizeof *db0) : NULL;
    if (dW0 == NULL || (db != NULL && db0 == NULL)) {
        free(dW0);
        free(db0);
        return refenc_mp_enomem(rep ? &rep->error : NULL, "linear backward", prec);
    }
    memcpy(dW0, dW, out * in * sizeof *dW0);
    if (db != NULL)
        memcpy(db0, db, out * sizeof *db0);
    linb_args a = {dy, x, W, dW0, db0, dx != NULL, N, in, out};
    const refenc_mp_output outs[] = {{"dx", dx}, {"dW", dW}, {"db", db}};
    const int st = refenc_mp_run_twin(linb_eval, &a, prec, rep, outs, 3);
    free(dW0);
    free(db0);
    return st;
}
