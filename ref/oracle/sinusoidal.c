/* Sinusoidal PE in MPFR (sinusoidal.h):
 *   PE[pos, 2i] = sin(pos w_i),  PE[pos, 2i+1] = cos(pos w_i),  w_i = 10000^(-2i/D).
 * The exponent -2i/D is the rational evaluated in MPFR (one rounding at p
 * bits), not the double fl(2i/D) of the reference: the oracle computes the
 * function itself, and the difference is part of the reference's error
 * (docs/error-bounds.md). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* w[i] = 10000^(-2i/D), i < D/2.  t: one scratch value. */
static void frequencies(mpfr_ptr w, size_t D, mpfr_ptr t)
{
    for (size_t i = 0; i < D / 2; i++) {
        mpfr_set_si(t, -(long)(2 * i), MPFR_RNDN);
        mpfr_div_ui(t, t, D, MPFR_RNDN); /* -2i/D */
        mpfr_ui_pow(w + i, 10000, t, MPFR_RNDN);
    }
}

void refenc_mpk_sinusoidal_angles(mpfr_ptr angle, const int64_t *pos, size_t L, size_t D,
                                  refenc_mp_ws *ws)
{
    mpfr_ptr t = ws->tmp, w = ws->tmp + 1;
    for (size_t i = 0; i < D / 2; i++) {
        mpfr_set_si(t, -(long)(2 * i), MPFR_RNDN);
        mpfr_div_ui(t, t, D, MPFR_RNDN);
        mpfr_ui_pow(w, 10000, t, MPFR_RNDN);
        for (size_t l = 0; l < L; l++)
            refenc_mp_mul_pos(angle + l * (D / 2) + i, w, pos[l]);
    }
}

/* row (D) = PE[pos, :], w the frequencies, a scratch.  Returns 1 if every
 * value is exact (only at pos = 0: sin 0 = 0, cos 0 = 1). */
static int pe_row(mpfr_ptr row, int64_t pos, mpfr_srcptr w, size_t D, mpfr_ptr a)
{
    int exact = 1;
    for (size_t i = 0; i < D / 2; i++) {
        exact &= refenc_mp_mul_pos(a, w + i, pos) == 0;
        exact &= mpfr_sin_cos(row + 2 * i, row + 2 * i + 1, a, MPFR_RNDN) == 0;
    }
    return exact;
}

void refenc_mpk_sinusoidal_table(mpfr_ptr pe, const int64_t *pos, size_t L, size_t D,
                                 refenc_mp_ws *ws)
{
    mpfr_ptr w = ws->tmp, a = ws->tmp + D / 2, t = ws->tmp + D / 2 + 1;
    frequencies(w, D, t);
    for (size_t l = 0; l < L; l++)
        pe_row(pe + l * D, pos[l], w, D, a);
}

void refenc_mpk_sinusoidal_forward(mpfr_ptr y, unsigned char *exact, mpfr_srcptr x,
                                   const int64_t *pos, size_t B, size_t L, size_t D,
                                   refenc_mp_ws *ws)
{
    mpfr_ptr w = ws->tmp, row = ws->tmp + D / 2, a = row + D, t = a + 1;
    frequencies(w, D, t);
    for (size_t l = 0; l < L; l++) {
        const int row_exact = pe_row(row, pos[l], w, D, a);
        for (size_t b = 0; b < B; b++) {
            const size_t off = (b * L + l) * D; /* [b,l,:] */
            for (size_t d = 0; d < D; d++) {
                const int tern = mpfr_add(y + off + d, x + off + d, row + d, MPFR_RNDN);
                if (exact != NULL)
                    exact[off + d] = exact[off + d] && row_exact && tern == 0;
            }
        }
    }
}

typedef struct {
    int what; /* 0 angles, 1 table, 2 forward */
    const double *x;
    const int64_t *pos;
    size_t B, L, D;
} sin_args;

static int sin_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const sin_args *a = ctx;
    const size_t n = a->what == 0 ? a->L * (a->D / 2) : a->B * a->L * a->D;
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 3 * a->D / 2 + 3, 1);
    mpfr_ptr y = a->what == 2 ? refenc_mp_from_d(a->x, n, prec) : refenc_mp_alloc(n, prec);
    unsigned char *exact = a->what == 2 ? malloc(n) : NULL;
    if (exact != NULL)
        memset(exact, 1, n); /* x: doubles, exact */
    if (st || !y || (a->what == 2 && !exact)) {
        st = refenc_mp_enomem(err, "sinusoidal PE", prec);
    } else if (a->what == 0) {
        refenc_mpk_sinusoidal_angles(y, a->pos, a->L, a->D, &ws);
        const size_t shape[2] = {a->L, a->D / 2};
        st = refenc_mp_sink_emit(sink, "angle", y, 2, shape);
    } else if (a->what == 1) {
        refenc_mpk_sinusoidal_table(y, a->pos, a->L, a->D, &ws);
        const size_t shape[2] = {a->L, a->D};
        st = refenc_mp_sink_emit(sink, "pe", y, 2, shape);
    } else {
        refenc_mpk_sinusoidal_forward(y, exact, y, a->pos, a->B, a->L, a->D, &ws);
        const size_t shape[3] = {a->B, a->L, a->D};
        st = refenc_mp_sink_emit_exact(sink, "y", y, exact, 3, shape);
    }
    free(exact);
    refenc_mp_free(y, n);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_sinusoidal_angles(double *angle, const int64_t *pos, size_t L, size_t D,
                                mpfr_prec_t prec, refenc_mp_report *rep)
{
    sin_args a = {0, NULL, pos, 1, L, D};
    const refenc_mp_output outs[] = {{"angle", angle}};
    return refenc_mp_run_twin(sin_eval, &a, prec, rep, outs, 1);
}

int refenc_mp_sinusoidal_table(double *pe, const int64_t *pos, size_t L, size_t D,
                               mpfr_prec_t prec, refenc_mp_report *rep)
{
    sin_args a = {1, NULL, pos, 1, L, D};
    const refenc_mp_output outs[] = {{"pe", pe}};
    return refenc_mp_run_twin(sin_eval, &a, prec, rep, outs, 1);
}

int refenc_mp_sinusoidal_forward(double *y, const double *x, const int64_t *pos,
                                 size_t B, size_t L, size_t D,
                                 mpfr_prec_t prec, refenc_mp_report *rep)
{
    sin_args a = {2, x, pos, B, L, D};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(sin_eval, &a, prec, rep, outs, 1);
}
