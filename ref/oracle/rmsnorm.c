/* RMSNorm in MPFR, from the formula of rmsnorm.h:
 *   ms = sum_d x_d^2 / D,   s_d = w_d or (1 + w_d),
 *   y_d = x_d / sqrt(ms + eps) * s_d.
 * The sum of squares is one correctly rounded dot product (refenc_mp_dot)
 * and no difference of nearby values is formed except 1 + w_d, whose
 * cancellation (w_d near -1) Ziv's loop detects.  The golden is the exact
 * (1 + w_d): the double kernel's fl(1 + w_d) is one rounding of its budget. */
#include "internal.h"

void refenc_mpk_rmsnorm_forward(mpfr_ptr y, mpfr_srcptr x, mpfr_srcptr w, size_t N, size_t D,
                                mpfr_srcptr eps, int offset, refenc_mp_ws *ws)
{
    mpfr_ptr r = ws->tmp, t = ws->tmp + 1;
    for (size_t n = 0; n < N; n++) {
        mpfr_srcptr x_n = x + n * D; /* x[n,:] */
        mpfr_ptr y_n = y + n * D;

        refenc_mp_dot(r, x_n, 1, x_n, 1, D, NULL, ws); /* sum of squares */
        mpfr_div_ui(r, r, D, MPFR_RNDN);
        mpfr_add(r, r, eps, MPFR_RNDN);
        mpfr_sqrt(r, r, MPFR_RNDN);                     /* sqrt(ms + eps) */

        for (size_t d = 0; d < D; d++) {
            mpfr_div(t, x_n + d, r, MPFR_RNDN);         /* y may alias x: x_d read first */
            if (offset) {
                mpfr_add_ui(y_n + d, w + d, 1, MPFR_RNDN);
                mpfr_mul(y_n + d, t, y_n + d, MPFR_RNDN);
            } else {
                mpfr_mul(y_n + d, t, w + d, MPFR_RNDN);
            }
        }
    }
}

typedef struct {
    const double *x, *w;
    size_t N, D;
    double eps;
    int offset;
} rms_args;

static int rms_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const rms_args *a = ctx;
    const size_t ND = a->N * a->D;
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 2, a->D + 1);
    mpfr_ptr x = refenc_mp_from_d(a->x, ND, 53);
    mpfr_ptr w = refenc_mp_from_d(a->w, a->D, 53);
    mpfr_ptr eps = refenc_mp_from_d(&a->eps, 1, 53);
    mpfr_ptr y = refenc_mp_alloc(ND, prec);
    if (st || !x || !w || !eps || !y) {
        st = refenc_mp_enomem(err, "rmsnorm", prec);
    } else {
        refenc_mpk_rmsnorm_forward(y, x, w, a->N, a->D, eps, a->offset, &ws);
        const size_t shape[2] = {a->N, a->D};
        st = refenc_mp_sink_emit(sink, "y", y, 2, shape);
    }
    refenc_mp_free(y, ND);
    refenc_mp_free(eps, 1);
    refenc_mp_free(w, a->D);
    refenc_mp_free(x, ND);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_rmsnorm_forward(double *y, const double *x, const double *w, size_t N, size_t D,
                              double eps, int offset, mpfr_prec_t prec, refenc_mp_report *rep)
{
    rms_args a = {x, w, N, D, eps, offset};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(rms_eval, &a, prec, rep, outs, 1);
}
