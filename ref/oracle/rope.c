/* RoPE in MPFR (rope.h): pair j of a head vector at position p is rotated by
 * p theta_j, theta_j = base^(-2j/Dh):  (a, b) -> (a cos - b sin, b cos + a sin).
 * HALF pairs (j, j + Dh/2), INTERLEAVED pairs (2j, 2j+1).  The exponent is
 * the rational -2j/Dh evaluated in MPFR, base the exact double. */
#include "backward.h"
#include "internal.h"

/* The rotated width R: Dh, or floor(Dh * partial_rotary_factor) */
static size_t rotary_dim(const refenc_rope_scaling *sc, size_t Dh)
{
    return sc != NULL ? refenc_rope_scaling_rotary_dim(sc, Dh) : Dh;
}

/* The angles of Lr rows: row l at position pos[rows[l]] (rows NULL: Lr = L,
 * pos[l]); S from all L positions, whichever rows are rotated. */
static void angles_rows(mpfr_ptr angle, const int64_t *pos, const int64_t *rows, size_t Lr, size_t L,
                        size_t Dh, mpfr_srcptr base, const refenc_rope_scaling *sc, refenc_mp_ws *ws)
{
    mpfr_ptr theta = ws->tmp + 1;
    const size_t half = rotary_dim(sc, Dh) / 2;
    int64_t S = 0; /* the length dynamic and longrope read: max(pos) + 1 */
    for (size_t l = 0; l < L; l++)
        S = pos[l] > S ? pos[l] : S;
    for (size_t j = 0; j < half; j++) {
        refenc_mpk_rope_frequency(theta, j, 2 * half, base, sc, S + 1);
        for (size_t l = 0; l < Lr; l++)
            refenc_mp_mul_pos(angle + l * half + j, theta, pos[rows != NULL ? (size_t)rows[l] : l]);
    }
}

void refenc_mpk_rope_angles(mpfr_ptr angle, const int64_t *pos, size_t L, size_t Dh,
                            mpfr_srcptr base, const refenc_rope_scaling *sc, refenc_mp_ws *ws)
{
    angles_rows(angle, pos, NULL, L, L, Dh, base, sc, ws);
}

/* y = f R(pos)^dir x on the first R coordinates: dir +1 the rotation by
 * +theta (the forward), -1 by -theta (its transpose, the backward). */
static void rotate_rows(mpfr_ptr y, mpfr_srcptr x, const int64_t *pos, const int64_t *rows, size_t N, size_t L,
                        size_t Lseq, size_t Dh, mpfr_srcptr base, refenc_rope_layout layout,
                        const refenc_rope_scaling *sc, int dir, refenc_mp_ws *ws)
{
    const size_t R = rotary_dim(sc, Dh), half = R / 2;
    /* cos and sin of every angle, once: cs[l, j] = (cos, sin) */
    mpfr_ptr cs = ws->tmp + 2, a = cs + L * Dh, b = a + 1, t = a + 2; /* tmp[0..2): angles' */
    angles_rows(cs, pos, rows, L, Lseq, Dh, base, sc, ws); /* angles in cs[0 .. L*half) */
    /* spread the angles to even slots, from the last (no overlap: 2i >= i) */
    for (size_t i = L * half; i-- > 0;)
        mpfr_swap(cs + 2 * i, cs + i);
    refenc_mpk_rope_attention_factor(a, sc); /* f, multiplying cos and sin */
    for (size_t i = 0; i < L * half; i++) {
        mpfr_set(t, cs + 2 * i, MPFR_RNDN);
        mpfr_sin_cos(cs + 2 * i + 1, cs + 2 * i, t, MPFR_RNDN);
        mpfr_mul(cs + 2 * i, cs + 2 * i, a, MPFR_RNDN);
        mpfr_mul(cs + 2 * i + 1, cs + 2 * i + 1, a, MPFR_RNDN);
    }
    for (size_t n = 0; n < N; n++)
        for (size_t l = 0; l < L; l++) {
            const size_t off = (n * L + l) * Dh; /* [n,l,:] */
            for (size_t j = 0; j < half; j++) {
                const size_t ia = layout == REFENC_ROPE_HALF ? j : 2 * j;
                const size_t ib = layout == REFENC_ROPE_HALF ? j + half : 2 * j + 1;
                mpfr_srcptr c = cs + 2 * (l * half + j), s = c + 1;
                mpfr_set(a, x + off + ia, MPFR_RNDN); /* y may alias x */
                mpfr_set(b, x + off + ib, MPFR_RNDN);
                if (dir > 0) {
                    mpfr_fmms(y + off + ia, a, c, b, s, MPFR_RNDN); /* a cos - b sin */
                    mpfr_fmma(y + off + ib, b, c, a, s, MPFR_RNDN); /* b cos + a sin */
                } else {
                    mpfr_fmma(y + off + ia, a, c, b, s, MPFR_RNDN); /* a cos + b sin */
                    mpfr_fmms(y + off + ib, b, c, a, s, MPFR_RNDN); /* b cos - a sin */
                }
            }
            for (size_t d = R; d < Dh && y != x; d++) /* partial rotary: passed through */
                mpfr_set(y + off + d, x + off + d, MPFR_RNDN);
        }
}

static void rotate(mpfr_ptr y, mpfr_srcptr x, const int64_t *pos, size_t N, size_t L, size_t Dh,
                   mpfr_srcptr base, refenc_rope_layout layout, const refenc_rope_scaling *sc, int dir,
                   refenc_mp_ws *ws)
{
    rotate_rows(y, x, pos, NULL, N, L, L, Dh, base, layout, sc, dir, ws);
}

void refenc_mpk_rope_forward(mpfr_ptr y, mpfr_srcptr x, const int64_t *pos, size_t N, size_t L,
                             size_t Dh, mpfr_srcptr base, refenc_rope_layout layout,
                             const refenc_rope_scaling *sc, refenc_mp_ws *ws)
{
    rotate(y, x, pos, N, L, Dh, base, layout, sc, 1, ws);
}

void refenc_mpk_rope_rows_forward(mpfr_ptr y, mpfr_srcptr x, const int64_t *pos, const int64_t *rows,
                                  size_t N, size_t R, size_t L, size_t Dh, mpfr_srcptr base,
                                  refenc_rope_layout layout, const refenc_rope_scaling *sc, refenc_mp_ws *ws)
{
    rotate_rows(y, x, pos, rows, N, R, L, Dh, base, layout, sc, 1, ws);
}

void refenc_mpk_rope_backward(mpfr_ptr dx, mpfr_srcptr dy, const int64_t *pos, size_t N,
                              size_t L, size_t Dh, mpfr_srcptr base, refenc_rope_layout layout,
                              const refenc_rope_scaling *sc, refenc_mp_ws *ws)
{
    rotate(dx, dy, pos, N, L, Dh, base, layout, sc, -1, ws); /* the angles are constants */
}

typedef struct {
    int what; /* 0 angles, 1 forward */
    const double *x;
    const int64_t *pos;
    size_t N, L, Dh;
    double base;
    refenc_rope_layout layout;
    const refenc_rope_scaling *sc;
} rope_args;

static int rope_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const rope_args *a = ctx;
    const size_t half = rotary_dim(a->sc, a->Dh) / 2;
    const size_t n = a->what == 0 ? a->L * half : a->N * a->L * a->Dh;
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, a->L * a->Dh + 5, 1);
    mpfr_ptr y = a->what == 1 ? refenc_mp_from_d(a->x, n, prec) : refenc_mp_alloc(n, prec);
    mpfr_ptr base = refenc_mp_from_d(&a->base, 1, 53);
    if (st || !y || !base) {
        st = refenc_mp_enomem(err, "RoPE", prec);
    } else if (a->what == 0) {
        refenc_mpk_rope_angles(y, a->pos, a->L, a->Dh, base, a->sc, &ws);
        const size_t shape[2] = {a->L, half};
        st = refenc_mp_sink_emit(sink, "angle", y, 2, shape);
    } else {
        refenc_mpk_rope_forward(y, y, a->pos, a->N, a->L, a->Dh, base, a->layout, a->sc, &ws);
        const size_t shape[3] = {a->N, a->L, a->Dh};
        st = refenc_mp_sink_emit(sink, "y", y, 3, shape);
    }
    refenc_mp_free(base, 1);
    refenc_mp_free(y, n);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_rope_angles(double *angle, const int64_t *pos, size_t L, size_t Dh, double base,
                          mpfr_prec_t prec, refenc_mp_report *rep)
{
    rope_args a = {0, NULL, pos, 1, L, Dh, base, REFENC_ROPE_HALF, NULL};
    const refenc_mp_output outs[] = {{"angle", angle}};
    return refenc_mp_run_twin(rope_eval, &a, prec, rep, outs, 1);
}

int refenc_mp_rope_forward(double *y, const double *x, const int64_t *pos,
                           size_t N, size_t L, size_t Dh, double base, refenc_rope_layout layout,
                           mpfr_prec_t prec, refenc_mp_report *rep)
{
    rope_args a = {1, x, pos, N, L, Dh, base, layout, NULL};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(rope_eval, &a, prec, rep, outs, 1);
}

int refenc_mp_rope_scaled_angles(double *angle, const int64_t *pos, size_t L, size_t Dh, double base,
                                 const refenc_rope_scaling *sc, mpfr_prec_t prec, refenc_mp_report *rep)
{
    rope_args a = {0, NULL, pos, 1, L, Dh, base, REFENC_ROPE_HALF, sc};
    const refenc_mp_output outs[] = {{"angle", angle}};
    return refenc_mp_run_twin(rope_eval, &a, prec, rep, outs, 1);
}

int refenc_mp_rope_scaled_forward(double *y, const double *x, const int64_t *pos, size_t N, size_t L,
                                  size_t Dh, double base, refenc_rope_layout layout,
                                  const refenc_rope_scaling *sc, mpfr_prec_t prec, refenc_mp_report *rep)
{
    rope_args a = {1, x, pos, N, L, Dh, base, layout, sc};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(rope_eval, &a, prec, rep, outs, 1);
}
