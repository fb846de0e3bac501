/* Softmax with temperature in MPFR, from softmax.h:
 *   y_i = exp(s_i/tau - m) / sum_j exp(s_j/tau - m),  m = max_j s_j/tau.
 * The shift by m changes nothing mathematically; in MPFR it only keeps
 * exp's argument <= 0 for logits so large that exp would leave MPFR's
 * exponent range.  -inf entries get exp(-inf) = 0; a row of -inf gets 0; a
 * row with a NaN is NaN. */
#include "internal.h"

void refenc_mpk_softmax_forward(mpfr_ptr y, mpfr_srcptr s, size_t R, size_t n,
                                mpfr_srcptr tau, refenc_mp_ws *ws)
{
    mpfr_ptr m = ws->tmp, sum = ws->tmp + 1;
    for (size_t r = 0; r < R; r++) {
        mpfr_srcptr s_r = s + r * n; /* s[r,:] */
        mpfr_ptr y_r = y + r * n;

        mpfr_set_inf(m, -1);
        for (size_t i = 0; i < n; i++) {
            if (tau != NULL)
                mpfr_div(y_r + i, s_r + i, tau, MPFR_RNDN);
            else if (y_r + i != s_r + i)
                mpfr_set(y_r + i, s_r + i, MPFR_RNDN);
            /* a NaN makes m NaN, hence the row (softmax.h): mpfr_greater_p is
             * false for a NaN, which would otherwise be skipped */
            if (mpfr_nan_p(y_r + i))
                mpfr_set_nan(m);
            else if (!mpfr_nan_p(m) && mpfr_greater_p(y_r + i, m))
                mpfr_set(m, y_r + i, MPFR_RNDN);
        }
        if (mpfr_inf_p(m) && mpfr_sgn(m) < 0) { /* every entry masked */
            for (size_t i = 0; i < n; i++)
                mpfr_set_zero(y_r + i, 1);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            mpfr_sub(y_r + i, y_r + i, m, MPFR_RNDN);
            mpfr_exp(y_r + i, y_r + i, MPFR_RNDN);
            ws->pa[i] = y_r + i;
        }
        mpfr_sum(sum, ws->pa, n, MPFR_RNDN);
        for (size_t i = 0; i < n; i++)
            mpfr_div(y_r + i, y_r + i, sum, MPFR_RNDN);
    }
}

typedef struct {
    const double *s;
    size_t R, n;
    double tau;
} softmax_args;

static int softmax_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink,
                        refenc_error *err)
{
    const softmax_args *a = ctx;
    const size_t Rn = a->R * a->n;
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 2, a->n);
    mpfr_ptr y = refenc_mp_from_d(a->s, Rn, prec); /* in place */
    mpfr_ptr tau = refenc_mp_from_d(&a->tau, 1, 53);
    if (st || !y || !tau) {
        st = refenc_mp_enomem(err, "softmax", prec);
    } else {
        refenc_mpk_softmax_forward(y, y, a->R, a->n, tau, &ws);
        const size_t shape[2] = {a->R, a->n};
        st = refenc_mp_sink_emit(sink, "y", y, 2, shape);
    }
    refenc_mp_free(tau, 1);
    refenc_mp_free(y, Rn);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_softmax_forward(double *y, const double *s, size_t R, size_t n, double tau,
                              mpfr_prec_t prec, refenc_mp_report *rep)
{
    softmax_args a = {s, R, n, tau};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(softmax_eval, &a, prec, rep, outs, 1);
}
