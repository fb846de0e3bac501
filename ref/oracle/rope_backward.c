/* RoPE's backward in MPFR (unscaled, the whole head), from rope.h: the rotation by -theta,
 * R(pos)^T = R(-pos):
 *   dx[n,l,:] = R(pos[l])^T dy[n,l,:],  pair (ga, gb) -> (ga cos + gb sin, gb cos - ga sin)
 * with the exact angles of the oracle's forward (refenc_mpk_rope_angles);
 * HALF pairs (j, j + Dh/2), INTERLEAVED pairs (2j, 2j+1).  No parameters.
 * Each output is one correctly rounded a c + b s (mpfr_fmma). */
#include "backward.h"
#include "internal.h"

void refenc_mpk_rope_backward(mpfr_ptr dx, mpfr_srcptr dy, const int64_t *pos, size_t N,
                              size_t L, size_t Dh, mpfr_srcptr base, refenc_rope_layout layout,
                              refenc_mp_ws *ws)
{
    const size_t half = Dh / 2;
    mpfr_ptr cs = ws->tmp + 2, a = cs + L * Dh, b = a + 1, t = a + 2; /* tmp[0..2): angles' */
    refenc_mpk_rope_angles(cs, pos, L, Dh, base, NULL, ws); /* unscaled */
    for (size_t i = L * half; i-- > 0;) /* to even slots, from the last */
        mpfr_swap(cs + 2 * i, cs + i);
    for (size_t i = 0; i < L * half; i++) { /* cs[l, j] = (cos, sin) */
        mpfr_set(t, cs + 2 * i, MPFR_RNDN);
        mpfr_sin_cos(cs + 2 * i + 1, cs + 2 * i, t, MPFR_RNDN);
    }
    for (size_t n = 0; n < N; n++)
        for (size_t l = 0; l < L; l++) {
            const size_t off = (n * L + l) * Dh; /* [n,l,:] */
            for (size_t j = 0; j < half; j++) {
                const size_t ia = layout == REFENC_ROPE_HALF ? j : 2 * j;
                const size_t ib = layout == REFENC_ROPE_HALF ? j + half : 2 * j + 1;
                mpfr_srcptr c = cs + 2 * (l * half + j), s = c + 1;
                mpfr_set(a, dy + off + ia, MPFR_RNDN); /* dx may alias dy */
                mpfr_set(b, dy + off + ib, MPFR_RNDN);
                mpfr_fmma(dx + off + ia, a, c, b, s, MPFR_RNDN); /* ga cos + gb sin */
                mpfr_fmms(dx + off + ib, b, c, a, s, MPFR_RNDN); /* gb cos - ga sin */
            }
        }
}

typedef struct {
    const double *dy;
    const int64_t *pos;
    size_t N, L, Dh;
    double base;
    refenc_rope_layout layout;
} ropeb_args;

static int ropeb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const ropeb_args *a = ctx;
    const size_t n = a->N * a->L * a->Dh;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, a->L * a->Dh + 5, 1);
    mpfr_ptr dx = refenc_mp_arena_from_d(&ar, a->dy, n, prec); /* in place */
    mpfr_ptr base = refenc_mp_arena_from_d(&ar, &a->base, 1, 53);
    if (st || ar.failed) {
        st = refenc_mp_enomem(err, "RoPE backward", prec);
    } else {
        refenc_mpk_rope_backward(dx, dx, a->pos, a->N, a->L, a->Dh, base, a->layout, &ws);
        const size_t shape[3] = {a->N, a->L, a->Dh};
        st = refenc_mp_sink_emit(sink, "dx", dx, 3, shape);
    }
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_rope_backward(double *dx, const double *dy, const int64_t *pos, size_t N, size_t L,
                            size_t Dh, double base, refenc_rope_layout layout, mpfr_prec_t prec,
                            refenc_mp_report *rep)
{
    ropeb_args a = {dy, pos, N, L, Dh, base, layout};
    const refenc_mp_output outs[] = {{"dx", dx}};
    return refenc_mp_run_twin(ropeb_eval, &a, prec, rep, outs, 1);
}
