/* ALiBi slopes in MPFR (alibi.h): with C the largest power of two <= H,
 *   m_h     = 2^(-8 (h+1) / C),         h < C
 *   m_{C+k} = 2^(-8 (2k+1) / (2C)),     k < H - C
 * each exponent an exact rational (C is a power of two), each slope mpfr_exp2. */
#include "internal.h"

void refenc_mpk_alibi_slopes(mpfr_ptr slopes, size_t H, refenc_mp_ws *ws)
{
    mpfr_ptr e = ws->tmp;
    size_t C = 1;
    while (C * 2 <= H)
        C *= 2;
    for (size_t h = 0; h < H; h++) {
        if (h < C) {
            mpfr_set_si(e, -8 * (long)(h + 1), MPFR_RNDN);
            mpfr_div_ui(e, e, C, MPFR_RNDN);
        } else {
            mpfr_set_si(e, -8 * (long)(2 * (h - C) + 1), MPFR_RNDN);
            mpfr_div_ui(e, e, 2 * C, MPFR_RNDN);
        }
        mpfr_exp2(slopes + h, e, MPFR_RNDN);
    }
}

void refenc_mpk_alibi_slopes_pow2(mpfr_ptr slopes, size_t H, refenc_mp_ws *ws)
{
    mpfr_ptr e = ws->tmp;
    for (size_t h = 0; h < H; h++) {
        mpfr_set_si(e, -8 * (long)(h + 1), MPFR_RNDN);
        mpfr_div_ui(e, e, H, MPFR_RNDN); /* exact unless H is not a power of two: then
                                            rounded at the working precision */
        mpfr_exp2(slopes + h, e, MPFR_RNDN);
    }
}

void refenc_mpk_alibi_slopes_of(mpfr_ptr slopes, size_t H, const double *given,
                                const refenc_mp_hooks *hooks, refenc_mp_ws *ws)
{
    if (given != NULL)
        refenc_mp_set_d(slopes, given, H);
    else if (hooks != NULL && hooks->alibi_slopes_pow2)
        refenc_mpk_alibi_slopes_pow2(slopes, H, ws);
    else
        refenc_mpk_alibi_slopes(slopes, H, ws);
    for (size_t h = 0; hooks != NULL && hooks->alibi_bias_positive && h < H; h++)
        mpfr_neg(slopes + h, slopes + h, MPFR_RNDN); /* exact */
}

typedef struct {
    size_t H;
} alibi_args;

static int alibi_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const alibi_args *a = ctx;
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 1, 1);
    mpfr_ptr m = refenc_mp_alloc(a->H, prec);
    if (st || !m) {
        st = refenc_mp_enomem(err, "ALiBi slopes", prec);
    } else {
        refenc_mpk_alibi_slopes(m, a->H, &ws);
        const size_t shape[1] = {a->H};
        st = refenc_mp_sink_emit(sink, "slopes", m, 1, shape);
    }
    refenc_mp_free(m, a->H);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_alibi_slopes(double *slopes, size_t H, mpfr_prec_t prec, refenc_mp_report *rep)
{
    alibi_args a = {H};
    const refenc_mp_output outs[] = {{"slopes", slopes}};
    return refenc_mp_run_twin(alibi_eval, &a, prec, rep, outs, 1);
}
