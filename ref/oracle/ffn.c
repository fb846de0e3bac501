/* Position-wise FFN in MPFR (ffn.h): y = act(x W1^T + b1) W2^T + b2. */
#include "internal.h"

void refenc_mpk_ffn_forward(mpfr_ptr y, mpfr_ptr hidden, mpfr_srcptr x, mpfr_srcptr W1,
                            mpfr_srcptr b1, mpfr_srcptr W2, mpfr_srcptr b2, size_t N, size_t D,
                            size_t F, refenc_activation act, refenc_mp_ws *ws)
{
    refenc_mpk_linear_forward(hidden, x, W1, b1, N, D, F, ws);
    refenc_mpk_activation_forward(hidden, hidden, N * F, act, ws);
    refenc_mpk_linear_forward(y, hidden, W2, b2, N, F, D, ws);
}

typedef struct {
    const double *x, *W1, *b1, *W2, *b2;
    size_t N, D, F;
    refenc_activation act;
} ffn_args;

static int ffn_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const ffn_args *a = ctx;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 8, (a->D > a->F ? a->D : a->F) + 1);
    mpfr_ptr x = refenc_mp_arena_from_d(&ar, a->x, a->N * a->D, 53);
    mpfr_ptr W1 = refenc_mp_arena_from_d(&ar, a->W1, a->F * a->D, 53);
    mpfr_ptr b1 = refenc_mp_arena_from_d(&ar, a->b1, a->F, 53);
    mpfr_ptr W2 = refenc_mp_arena_from_d(&ar, a->W2, a->D * a->F, 53);
    mpfr_ptr b2 = refenc_mp_arena_from_d(&ar, a->b2, a->D, 53);
    mpfr_ptr hidden = refenc_mp_arena_alloc(&ar, a->N * a->F, prec);
    mpfr_ptr y = refenc_mp_arena_alloc(&ar, a->N * a->D, prec);
    if (st || ar.failed) {
        st = refenc_mp_enomem(err, "FFN", prec);
    } else {
        refenc_mpk_ffn_forward(y, hidden, x, W1, b1, W2, b2, a->N, a->D, a->F, a->act, &ws);
        const size_t sh[2] = {a->N, a->F}, sy[2] = {a->N, a->D};
        st = refenc_mp_sink_emit(sink, "hidden", hidden, 2, sh);
        if (st == REFENC_OK)
            st = refenc_mp_sink_emit(sink, "y", y, 2, sy);
    }
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_ffn_forward(double *y, double *hidden, const double *x,
                          const double *W1, const double *b1,
                          const double *W2, const double *b2,
                          size_t N, size_t D, size_t F, refenc_activation act,
                          mpfr_prec_t prec, refenc_mp_report *rep)
{
    ffn_args a = {x, W1, b1, W2, b2, N, D, F, act};
    const refenc_mp_output outs[] = {{"hidden", hidden}, {"y", y}};
    return refenc_mp_run_twin(ffn_eval, &a, prec, rep, outs, 2);
}
