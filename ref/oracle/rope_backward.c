/* RoPE's backward in MPFR (unscaled, the whole head), from rope.h: the rotation by -theta,
 * R(pos)^T = R(-pos):
 *   dx[n,l,:] = R(pos[l])^T dy[n,l,:],  pair (ga, gb) -> (ga cos + gb sin, gb cos - ga sin)
 * the forward's rotation with -theta (rope.c: refenc_mpk_rope_backward), its
 * exact angles; HALF pairs (j, j + Dh/2), INTERLEAVED pairs (2j, 2j+1).  No
 * parameters.  Each output is one correctly rounded a c + b s (mpfr_fmma).
 * This file is the backward's twin: its evaluation certified by Ziv's loop. */
#include "backward.h"
#include "internal.h"

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
        refenc_mpk_rope_backward(dx, dx, a->pos, a->N, a->L, a->Dh, base, a->layout, NULL, &ws);
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
