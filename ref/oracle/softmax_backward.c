/* Softmax's backward in MPFR, from softmax.h:
 *   ds[r,i] = y[r,i] (dy[r,i] - D_r) / tau,    D_r = sum_j y[r,j] dy[r,j]
 * y is the exact forward (refenc_mpk_softmax_forward of the logits, at the
 * working precision), D_r a correctly rounded dot product.  A masked entry
 * has y = 0 exactly, hence ds = 0; a fully masked row is 0. */
#include "backward.h"
#include "internal.h"

void refenc_mpk_softmax_backward(mpfr_ptr ds, mpfr_srcptr dy, mpfr_srcptr y, size_t R, size_t n,
                                 mpfr_srcptr tau, refenc_mp_ws *ws)
{
    mpfr_ptr Dr = ws->tmp, t = ws->tmp + 1;
    for (size_t r = 0; r < R; r++) {
        mpfr_srcptr y_r = y + r * n, dy_r = dy + r * n;
        refenc_mp_dot(Dr, y_r, 1, dy_r, 1, n, NULL, ws); /* D_r */
        for (size_t i = 0; i < n; i++) {
            mpfr_sub(t, dy_r + i, Dr, MPFR_RNDN);
            mpfr_mul(t, t, y_r + i, MPFR_RNDN);
            mpfr_div(ds + r * n + i, t, tau, MPFR_RNDN);
        }
    }
}

typedef struct {
    const double *dy, *s;
    size_t R, n;
    double tau;
} smb_args;

static int smb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const smb_args *a = ctx;
    const size_t Rn = a->R * a->n;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 2, a->n + 1);
    mpfr_ptr y = refenc_mp_arena_from_d(&ar, a->s, Rn, prec); /* the forward, in place */
    mpfr_ptr dy = refenc_mp_arena_from_d(&ar, a->dy, Rn, 53);
    mpfr_ptr tau = refenc_mp_arena_from_d(&ar, &a->tau, 1, 53);
    mpfr_ptr ds = refenc_mp_arena_alloc(&ar, Rn, prec);
    if (st || ar.failed) {
        st = refenc_mp_enomem(err, "softmax backward", prec);
    } else {
        refenc_mpk_softmax_forward(y, y, a->R, a->n, tau, &ws);
        refenc_mpk_softmax_backward(ds, dy, y, a->R, a->n, tau, &ws);
        const size_t shape[2] = {a->R, a->n};
        st = refenc_mp_sink_emit(sink, "ds", ds, 2, shape);
    }
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_softmax_backward(double *ds, const double *dy, const double *s, size_t R, size_t n,
                               double tau, mpfr_prec_t prec, refenc_mp_report *rep)
{
    smb_args a = {dy, s, R, n, tau};
    const refenc_mp_output outs[] = {{"ds", ds}};
    return refenc_mp_run_twin(smb_eval, &a, prec, rep, outs, 1);
}
