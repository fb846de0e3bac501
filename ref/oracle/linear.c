/* nn.Linear in MPFR:  y[n,o] = sum_k x[n,k] W[o,k] + b[o].
 * The sum, bias included, is one correctly rounded refenc_mp_dot: the kernel's
 * only error is one rounding at the working precision, whatever the
 * cancellation. */
#include "internal.h"

void refenc_mpk_linear_forward(mpfr_ptr y, mpfr_srcptr x, mpfr_srcptr W, mpfr_srcptr b,
                               size_t N, size_t in, size_t out, refenc_mp_ws *ws)
{
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < out; o++) /* x[n,:] . W[o,:] + b[o] */
            refenc_mp_dot(y + n * out + o, x + n * in, 1, W + o * in, 1, in,
                          b != NULL ? b + o : NULL, ws);
}

void refenc_mpk_linear_d(mpfr_ptr y, mpfr_srcptr x, const double *W, const double *b,
                         const refenc_mp_wspan *span, size_t N, size_t in, size_t out,
                         refenc_mp_ws *ws)
{
    refenc_mp_wspan own;
    if (span == NULL) {
        refenc_mp_wspan_of(&own, W, out * in, b, b != NULL ? out : 0);
        (void)refenc_mp_wspan_fix(&own, W, out, in); /* without it, the same sums, slower */
        span = &own;
    }
    for (size_t n = 0; n < N; n++) {
        refenc_mp_row_load(ws, x + n * in, in); /* x[n,:], decoded once */
        for (size_t o = 0; o < out; o++)        /* x[n,:] . W[o,:] + b[o] */
            refenc_mp_dot_row_d(y + n * out + o, x + n * in, W + o * in, b != NULL ? b + o : NULL, o,
                                span, ws);
    }
    if (span == &own)
        refenc_mp_wspan_unfix(&own);
}

typedef struct {
    const double *x, *W, *b;
    size_t N, in, out;
} linear_args;

static int linear_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const linear_args *a = ctx;
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 1, a->in + 1);
    mpfr_ptr x = refenc_mp_from_d(a->x, a->N * a->in, 53);
    mpfr_ptr W = refenc_mp_from_d(a->W, a->out * a->in, 53);
    mpfr_ptr b = a->b ? refenc_mp_from_d(a->b, a->out, 53) : NULL;
    mpfr_ptr y = refenc_mp_alloc(a->N * a->out, prec);
    if (st || !x || !W || (a->b && !b) || !y) {
        st = refenc_mp_enomem(err, "linear", prec);
    } else {
        refenc_mpk_linear_forward(y, x, W, b, a->N, a->in, a->out, &ws);
        const size_t shape[2] = {a->N, a->out};
        st = refenc_mp_sink_emit(sink, "y", y, 2, shape);
    }
    refenc_mp_free(y, a->N * a->out);
    refenc_mp_free(b, a->out);
    refenc_mp_free(W, a->out * a->in);
    refenc_mp_free(x, a->N * a->in);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_linear_forward(double *y, const double *x, const double *W, const double *b,
                             size_t N, size_t in, size_t out,
                             mpfr_prec_t prec, refenc_mp_report *rep)
{
    linear_args a = {x, W, b, N, in, out};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(linear_eval, &a, prec, rep, outs, 1);
}
