/* RMSNorm's backward in MPFR, from rmsnorm.h: with r = sqrt(mean_d x_d^2 + eps),
 * x^ = x / r, s_d = w_d or (1 + w_d) (rmsnorm_offset), g = dy * s:
 *   dx[n,d]  = (g[n,d] - x^[n,d] mean_d (g x^)[n,:]) / r_n
 *   dw[d]   += sum_n dy[n,d] x^[n,d]       accumulated (+=), the same for both scales
 * The second term is the projection out of the direction x^: RMSNorm(a x) =
 * RMSNorm(x) at eps = 0, so sum_d dx_d x_d = 0 there.  The sum of squares and
 * mean(g x^) are correctly rounded dot products (refenc_mp_dot), 1 + w_d is
 * exact to the working precision (the golden is the exact (1 + w_d), as the
 * forward twin's), and g - x^ mean(g x^) is one fused rounding (mpfr_fms):
 * the only loss is that cancellation, which Ziv's loop detects. */
#include "backward.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

void refenc_mpk_rmsnorm_backward(mpfr_ptr dx, mpfr_ptr dw, mpfr_ptr xhat, mpfr_srcptr dy,
                                 mpfr_srcptr x, mpfr_srcptr w, size_t N, size_t D, mpfr_srcptr eps,
                                 int offset, refenc_mp_ws *ws)
{
    mpfr_ptr g = ws->tmp, r = ws->tmp + D, mgx = ws->tmp + D + 1;
    for (size_t n = 0; n < N; n++) {
        mpfr_srcptr x_n = x + n * D, dy_n = dy + n * D; /* x[n,:], dy[n,:] */
        mpfr_ptr xh_n = xhat + n * D, dx_n = dx + n * D;
        refenc_mp_dot(r, x_n, 1, x_n, 1, D, NULL, ws); /* sum of squares */
        mpfr_div_ui(r, r, D, MPFR_RNDN);
        mpfr_add(r, r, eps, MPFR_RNDN);
        mpfr_sqrt(r, r, MPFR_RNDN);                     /* r = sqrt(ms + eps) */
        for (size_t d = 0; d < D; d++) {
            mpfr_div(xh_n + d, x_n + d, r, MPFR_RNDN);  /* x^ */
            if (offset) {
                mpfr_add_ui(g + d, w + d, 1, MPFR_RNDN);
                mpfr_mul(g + d, g + d, dy_n + d, MPFR_RNDN);
            } else {
                mpfr_mul(g + d, dy_n + d, w + d, MPFR_RNDN);
            }
        }
        refenc_mp_dot(mgx, g, 1, xh_n, 1, D, NULL, ws);
        mpfr_div_ui(mgx, mgx, D, MPFR_RNDN);            /* mean(g x^) */
        for (size_t d = 0; d < D; d++) {
            mpfr_fms(dx_n + d, xh_n + d, mgx, g + d, MPFR_RNDN); /* x^ mean(g x^) - g */
            mpfr_neg(dx_n + d, dx_n + d, MPFR_RNDN);
            mpfr_div(dx_n + d, dx_n + d, r, MPFR_RNDN);
        }
    }
    mpfr_ptr t = ws->tmp; /* the new values, then copied */
    for (size_t d = 0; d < D; d++) {
        refenc_mp_dot(t, dy + d, D, xhat + d, D, N, dw + d, ws); /* dw0 + sum_n dy x^ */
        mpfr_set(dw + d, t, MPFR_RNDN);
    }
}

typedef struct {
    const double *dy, *x, *w, *dw0;
    size_t N, D;
    double eps;
    int offset;
} rmsb_args;

static int rmsb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const rmsb_args *a = ctx;
    const size_t N = a->N, D = a->D;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, D + 2, (N > D ? N : D) + 1);
    mpfr_ptr dy = refenc_mp_arena_from_d(&ar, a->dy, N * D, 53);
    mpfr_ptr x = refenc_mp_arena_from_d(&ar, a->x, N * D, 53);
    mpfr_ptr w = refenc_mp_arena_from_d(&ar, a->w, D, 53);
    mpfr_ptr eps = refenc_mp_arena_from_d(&ar, &a->eps, 1, 53);
    mpfr_ptr dw = refenc_mp_arena_from_d(&ar, a->dw0, D, prec);
    mpfr_ptr dx = refenc_mp_arena_alloc(&ar, N * D, prec);
    mpfr_ptr xhat = refenc_mp_arena_alloc(&ar, N * D, prec);
    if (st || ar.failed) {
        st = refenc_mp_enomem(err, "rmsnorm backward", prec);
    } else {
        refenc_mpk_rmsnorm_backward(dx, dw, xhat, dy, x, w, N, D, eps, a->offset, &ws);
        const size_t sx[2] = {N, D}, sp[1] = {D};
        st = refenc_mp_sink_emit(sink, "dx", dx, 2, sx);
        if (st == REFENC_OK)
            st = refenc_mp_sink_emit(sink, "dw", dw, 1, sp);
    }
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_rmsnorm_backward(double *dx, double *dw, const double *dy, const double *x,
                               const double *w, size_t N, size_t D, double eps, int offset,
                               mpfr_prec_t prec, refenc_mp_report *rep)
{
    double *start = malloc(D * sizeof *start); /* dw0: written over */
    if (start == NULL)
        return refenc_mp_enomem(rep ? &rep->error : NULL, "rmsnorm backward", prec);
    memcpy(start, dw, D * sizeof *start);
    rmsb_args a = {dy, x, w, start, N, D, eps, offset};
    const refenc_mp_output outs[] = {{"dx", dx}, {"dw", dw}};
    const int st = refenc_mp_run_twin(rmsb_eval, &a, prec, rep, outs, 2);
    free(start);
    return st;
}
