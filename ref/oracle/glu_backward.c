/* The gated FFN's backward in MPFR, from glu.h: with z = x W1^T + b1 (N, 2F),
 * a and b its gate and up halves (glu_gate: the gate's rows first or
 * second), h = act(a) * b, y = h W2^T + b2:
 *   dh = dy W2;   db = dh * act(a);   da = dh * b * act'(a)
 *   d[a | b] in linear1's row order;  dx = d[a | b] W1
 *   dW2 += dy^T h, db2 += sum_n dy;  dW1 += d[a | b]^T x, db1 += sum_n d[a | b]
 * The forward is recomputed here exactly (refenc_mpk_glu_forward_keep); the
 * products are formed at the working precision and the sums are the linear
 * twins' correctly rounded dot products: Ziv's loop certifies the result.
 * The layer's twin (layer_backward.c) runs the same two kernels. */
#include "backward.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

void refenc_mpk_glu_forward_keep(mpfr_ptr y, mpfr_ptr z, mpfr_ptr ga, mpfr_ptr h, mpfr_srcptr x,
                                 mpfr_srcptr W1, mpfr_srcptr b1, mpfr_srcptr W2, mpfr_srcptr b2,
                                 size_t N, size_t D, size_t F, size_t gate, refenc_activation act,
                                 refenc_mp_ws *ws)
{
    const size_t up = F - gate;
    refenc_mpk_linear_forward(z, x, W1, b1, N, D, 2 * F, ws);
    for (size_t n = 0; n < N; n++)
        for (size_t f = 0; f < F; f++)
            mpfr_set(ga + n * F + f, z + n * 2 * F + gate + f, MPFR_RNDN);
    refenc_mpk_activation_forward(ga, ga, N * F, act, ws); /* act(a) */
    for (size_t n = 0; n < N; n++)
        for (size_t f = 0; f < F; f++) /* h = act(a) * b */
            mpfr_mul(h + n * F + f, ga + n * F + f, z + n * 2 * F + up + f, MPFR_RNDN);
    if (y != NULL)
        refenc_mpk_linear_forward(y, h, W2, b2, N, F, D, ws);
}

void refenc_mpk_glu_backward(mpfr_ptr dx, mpfr_ptr dW1, mpfr_ptr db1, mpfr_ptr dW2, mpfr_ptr db2,
                             mpfr_ptr dz, mpfr_ptr dh, mpfr_ptr t, mpfr_ptr gd, mpfr_srcptr dy,
                             mpfr_srcptr x, mpfr_srcptr z, mpfr_srcptr ga, mpfr_srcptr h,
                             mpfr_srcptr W1, mpfr_srcptr W2, size_t N, size_t D, size_t F,
                             size_t gate, refenc_activation act, unsigned char *ex_db2,
                             refenc_mp_ws *ws)
{
    const size_t up = F - gate;
    refenc_mpk_linear_backward(dh, dW2, db2, dy, h, W2, N, F, D, NULL, NULL, ex_db2, ws);
    for (size_t n = 0; n < N; n++)
        for (size_t f = 0; f < F; f++)
            mpfr_set(t + n * F + f, z + n * 2 * F + gate + f, MPFR_RNDN); /* a */
    refenc_mpk_activation_derivative(gd, t, N * F, act, ws);               /* act'(a) */
    for (size_t n = 0; n < N; n++)
        for (size_t f = 0; f < F; f++) {
            const size_t i = n * F + f;
            mpfr_ptr da = dz + n * 2 * F + gate + f, db = dz + n * 2 * F + up + f;
            mpfr_mul(db, dh + i, ga + i, MPFR_RNDN);                 /* db = dh act(a) */
            mpfr_mul(da, dh + i, z + n * 2 * F + up + f, MPFR_RNDN);
            mpfr_mul(da, da, gd + i, MPFR_RNDN);                     /* da = dh b act'(a) */
        }
    refenc_mpk_linear_backward(dx, dW1, db1, dz, x, W1, N, D, 2 * F, NULL, NULL, NULL, ws);
}

typedef struct {
    const double *dy, *x, *W1, *b1, *W2, *b2, *start; /* start: dW1, db1, dW2, db2 on entry */
    size_t N, D, F, gate;
    refenc_activation act;
} glub_args;

static int glub_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const glub_args *a = ctx;
    const size_t N = a->N, D = a->D, F = a->F, F2 = 2 * F;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    size_t np = N > F2 ? N : F2;
    np = np > D ? np : D;
    int st = refenc_mp_ws_alloc(&ws, prec, 8, np + 1);
    mpfr_ptr x = refenc_mp_arena_from_d(&ar, a->x, N * D, 53), dy = refenc_mp_arena_from_d(&ar, a->dy, N * D, 53);
    mpfr_ptr W1 = refenc_mp_arena_from_d(&ar, a->W1, F2 * D, 53), W2 = refenc_mp_arena_from_d(&ar, a->W2, D * F, 53);
    mpfr_ptr b1 = a->b1 ? refenc_mp_arena_from_d(&ar, a->b1, F2, 53) : NULL;
    mpfr_ptr b2 = a->b2 ? refenc_mp_arena_from_d(&ar, a->b2, D, 53) : NULL;
    const double *s = a->start;
    mpfr_ptr dW1 = refenc_mp_arena_from_d(&ar, s, F2 * D, prec);
    mpfr_ptr db1 = a->b1 ? refenc_mp_arena_from_d(&ar, s + F2 * D, F2, prec) : NULL;
    mpfr_ptr dW2 = refenc_mp_arena_from_d(&ar, s + F2 * D + F2, D * F, prec);
    mpfr_ptr db2 = a->b2 ? refenc_mp_arena_from_d(&ar, s + F2 * D + F2 + D * F, D, prec) : NULL;
    mpfr_ptr z = refenc_mp_arena_alloc(&ar, N * F2, prec), dz = refenc_mp_arena_alloc(&ar, N * F2, prec);
    mpfr_ptr ga = refenc_mp_arena_alloc(&ar, N * F, prec), h = refenc_mp_arena_alloc(&ar, N * F, prec);
    mpfr_ptr dh = refenc_mp_arena_alloc(&ar, N * F, prec), t = refenc_mp_arena_alloc(&ar, N * F, prec);
    mpfr_ptr gd = refenc_mp_arena_alloc(&ar, N * F, prec), dx = refenc_mp_arena_alloc(&ar, N * D, prec);
    unsigned char *ex = malloc(D); /* which values of db2 are exact (sums of the doubles dy) */
    if (st || ar.failed || ex == NULL) {
        st = refenc_mp_enomem(err, "gated FFN backward", prec);
    } else {
        refenc_mpk_glu_forward_keep(NULL, z, ga, h, x, W1, b1, W2, b2, N, D, F, a->gate, a->act, &ws);
        refenc_mpk_glu_backward(dx, dW1, db1, dW2, db2, dz, dh, t, gd, dy, x, z, ga, h, W1, W2, N, D, F,
                                a->gate, a->act, ex, &ws);
        const size_t sx[2] = {N, D}, s1[2] = {F2, D}, s2[2] = {D, F}, v1[1] = {F2}, v2[1] = {D};
        st = refenc_mp_sink_emit(sink, "dx", dx, 2, sx);
        if (st == REFENC_OK)
            st = refenc_mp_sink_emit(sink, "dW1", dW1, 2, s1);
        if (st == REFENC_OK && db1 != NULL)
            st = refenc_mp_sink_emit(sink, "db1", db1, 1, v1);
        if (st == REFENC_OK)
            st = refenc_mp_sink_emit(sink, "dW2", dW2, 2, s2);
        if (st == REFENC_OK && db2 != NULL)
            st = refenc_mp_sink_emit_exact(sink, "db2", db2, ex, 1, v2);
    }
    free(ex);
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_glu_backward(double *dx, double *dW1, double *db1, double *dW2, double *db2,
                           const double *dy, const double *x, const double *W1, const double *b1,
                           const double *W2, const double *b2, size_t N, size_t D, size_t F,
                           refenc_activation act, refenc_glu_gate gate, mpfr_prec_t prec,
                           refenc_mp_report *rep)
{
    const size_t F2 = 2 * F, n = F2 * D + F2 + D * F + D;
    double *start = calloc(n, sizeof *start); /* the starting values: written over */
    if (start == NULL)
        return refenc_mp_enomem(rep ? &rep->error : NULL, "gated FFN backward", prec);
    memcpy(start, dW1, F2 * D * sizeof *start);
    if (b1 != NULL)
        memcpy(start + F2 * D, db1, F2 * sizeof *start);
    memcpy(start + F2 * D + F2, dW2, D * F * sizeof *start);
    if (b2 != NULL)
        memcpy(start + F2 * D + F2 + D * F, db2, D * sizeof *start);
    glub_args a = {dy, x, W1, b1, W2, b2, start, N, D, F, gate == REFENC_GLU_GATE_SECOND ? F : 0, act};
    refenc_mp_output outs[5] = {{"dx", dx}, {"dW1", dW1}};
    size_t no = 2;
    if (b1 != NULL)
        outs[no++] = (refenc_mp_output){"db1", db1};
    outs[no++] = (refenc_mp_output){"dW2", dW2};
    if (b2 != NULL)
        outs[no++] = (refenc_mp_output){"db2", db2};
    const int st = refenc_mp_run_twin(glub_eval, &a, prec, rep, outs, no);
    free(start);
    return st;
}
