/* The attention backward in MPFR, from attention.h (FlashAttention's
 * formulation).  Per head, with divisor = sqrt(Dh) tau:
 *   dv_j  = sum_i P_ij dO_i                        dv: (B, H, L, Dh)
 *   dP_ij = dO_i . v_j                             dP: (B, H, L, L)
 *   D_i   = dO_i . O_i   (= sum_j P_ij dP_ij)      Drow: (B, H, L)
 *   dS_ij = P_ij (dP_ij - D_i)                     dS: (B, H, L, L), the
 *           gradient of the scores (after ALiBi and attn_mask, which are
 *           constants: no gradient flows to them)
 *   dq_i  = sum_j dS_ij k_j / divisor,   dk_j = sum_i dS_ij q_i / divisor
 * Masks: a score the key padding or causal mask replaced by M is a constant,
 * so dS_ij = 0 there (also with M = -DBL_MAX in a fully masked row, whose
 * uniform weights are constants); an additive -inf gives P_ij = 0 and so
 * dS_ij = 0.  P and O are the exact forward (refenc_mpk_attention_forward);
 * every sum is a correctly rounded dot product. */
#include "backward.h"
#include "internal.h"

#include <stdlib.h>

typedef struct {
    mpfr_srcptr dO, q, k, v, P, O;
    mpfr_ptr dq, dk, dv, dP, dS, Drow;
    unsigned char *ex_dv, *ex_dP; /* NULL: not recorded */
} head_ptrs;

static void record(unsigned char *ex, size_t i, int was)
{
    const unsigned char e = refenc_mpb_exact_end(was);
    if (ex != NULL)
        ex[i] = e;
}

/* dv, dP, D, dS of one head; pad: its item's key padding, or NULL. */
static void head_dv_ds(const head_ptrs *h, const uint8_t *pad, int causal, size_t L, size_t Dh,
                       refenc_mp_ws *ws)
{
    for (size_t j = 0; j < L; j++) /* dv[j,d] = P[:,j] . dO[:,d] */
        for (size_t d = 0; d < Dh; d++) {
            const int was = refenc_mpb_exact_begin();
            refenc_mp_dot(h->dv + j * Dh + d, h->P + j, L, h->dO + d, Dh, L, NULL, ws);
            record(h->ex_dv, j * Dh + d, was); /* meaningful only if P and dO are exact */
        }
    for (size_t i = 0; i < L; i++) {
        refenc_mp_dot(h->Drow + i, h->dO + i * Dh, 1, h->O + i * Dh, 1, Dh, NULL, ws);
        for (size_t j = 0; j < L; j++) {
            mpfr_ptr dP = h->dP + i * L + j, dS = h->dS + i * L + j;
            const int was = refenc_mpb_exact_begin(); /* products of doubles */
            refenc_mp_dot(dP, h->dO + i * Dh, 1, h->v + j * Dh, 1, Dh, NULL, ws);
            record(h->ex_dP, i * L + j, was);
            if ((pad != NULL && pad[j]) || (causal && j > i)) {
                mpfr_set_zero(dS, 1); /* a replaced score is a constant */
                continue;
            }
            mpfr_sub(dS, dP, h->Drow + i, MPFR_RNDN);
            mpfr_mul(dS, dS, h->P + i * L + j, MPFR_RNDN);
        }
    }
}

/* dq, dk of one head from its dS. */
static void head_dq_dk(const head_ptrs *h, mpfr_srcptr divisor, size_t L, size_t Dh,
                       refenc_mp_ws *ws)
{
    for (size_t i = 0; i < L; i++) /* dq[i,d] = dS[i,:] . k[:,d] / divisor */
        for (size_t d = 0; d < Dh; d++) {
            refenc_mp_dot(h->dq + i * Dh + d, h->dS + i * L, 1, h->k + d, Dh, L, NULL, ws);
            mpfr_div(h->dq + i * Dh + d, h->dq + i * Dh + d, divisor, MPFR_RNDN);
        }
    for (size_t j = 0; j < L; j++) /* dk[j,d] = dS[:,j] . q[:,d] / divisor */
        for (size_t d = 0; d < Dh; d++) {
            refenc_mp_dot(h->dk + j * Dh + d, h->dS + j, L, h->q + d, Dh, L, NULL, ws);
            mpfr_div(h->dk + j * Dh + d, h->dk + j * Dh + d, divisor, MPFR_RNDN);
        }
}

void refenc_mpk_attention_backward(mpfr_ptr dq, mpfr_ptr dk, mpfr_ptr dv, mpfr_ptr dP, mpfr_ptr dS,
                                   mpfr_ptr Drow, mpfr_srcptr dout, mpfr_srcptr q, mpfr_srcptr k,
                                   mpfr_srcptr v, mpfr_srcptr P, mpfr_srcptr O,
                                   const refenc_mp_attn_options *opt, size_t B, size_t H, size_t L,
                                   size_t Dh, unsigned char *ex_dv, unsigned char *ex_dP,
                                   refenc_mp_ws *ws)
{
    mpfr_ptr divisor = ws->tmp + 3;
    mpfr_sqrt_ui(divisor, Dh, MPFR_RNDN);
    mpfr_mul(divisor, divisor, opt->temperature, MPFR_RNDN);
    for (size_t b = 0; b < B; b++)
        for (size_t hh = 0; hh < H; hh++) {
            const size_t bh = b * H + hh, o = bh * L * Dh, w = bh * L * L;
            const head_ptrs h = {dout + o, q + o, k + o, v + o, P + w, O + o,
                                 dq + o, dk + o, dv + o, dP + w, dS + w, Drow + bh * L,
                                 ex_dv ? ex_dv + o : NULL, ex_dP ? ex_dP + w : NULL};
            head_dv_ds(&h, opt->key_padding_mask ? opt->key_padding_mask + b * L : NULL,
                       opt->causal, L, Dh, ws);
            head_dq_dk(&h, divisor, L, Dh, ws);
        }
}

typedef struct {
    const double *dout, *q, *k, *v;
    const refenc_attn_options *opt;
    size_t B, H, L, Dh;
} attnb_args;

static int attnb_emit(const refenc_mp_sink *sink, mpfr_ptr *t, unsigned char *const *ex,
                      const attnb_args *a)
{
    const size_t sv[4] = {a->B, a->H, a->L, a->Dh}, sw[4] = {a->B, a->H, a->L, a->L};
    static const char *const names[6] = {"dq", "dk", "dv", "dP", "dS", "Drow"};
    int st = REFENC_OK;
    for (int i = 0; i < 6 && st == REFENC_OK; i++)
        st = refenc_mp_sink_emit_exact(sink, names[i], t[i], ex[i], i < 5 ? 4 : 3, i < 3 ? sv : sw);
    return st;
}

static int attnb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const attnb_args *a = ctx;
    const size_t n = a->B * a->H * a->L * a->Dh, nw = a->B * a->H * a->L * a->L;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    void *handle = NULL;
    const refenc_mp_attn_options *opt = NULL;
    int st = refenc_mp_ws_alloc(&ws, prec, 4, (a->L > a->Dh ? a->L : a->Dh) + 1);
    const int ok = refenc_mp_attn_options_from_d(&handle, &opt, a->opt, a->H, a->L);
    mpfr_ptr q = refenc_mp_arena_from_d(&ar, a->q, n, 53), k = refenc_mp_arena_from_d(&ar, a->k, n, 53);
    mpfr_ptr v = refenc_mp_arena_from_d(&ar, a->v, n, 53);
    mpfr_ptr dO = refenc_mp_arena_from_d(&ar, a->dout, n, 53);
    mpfr_ptr O = refenc_mp_arena_alloc(&ar, n, prec), P = refenc_mp_arena_alloc(&ar, nw, prec);
    mpfr_ptr t[6] = {refenc_mp_arena_alloc(&ar, n, prec), refenc_mp_arena_alloc(&ar, n, prec),
                     refenc_mp_arena_alloc(&ar, n, prec), refenc_mp_arena_alloc(&ar, nw, prec),
                     refenc_mp_arena_alloc(&ar, nw, prec),
                     refenc_mp_arena_alloc(&ar, a->B * a->H * a->L, prec)};
    unsigned char *ex_dP = malloc(nw); /* which values of dP are exact */
    /* dP = dO . v, both exact inputs: an exact sum is the exact value.  dv
     * is not recorded: P is rounded, so an exact sum says nothing */
    unsigned char *const ex[6] = {NULL, NULL, NULL, ex_dP, NULL, NULL};
    if (st || !ok || ar.failed || !ex_dP) {
        st = refenc_mp_enomem(err, "attention backward", prec);
    } else {
        refenc_mpk_attention_forward(O, P, q, k, v, opt, a->B, a->H, a->L, a->Dh, &ws);
        refenc_mpk_attention_backward(t[0], t[1], t[2], t[3], t[4], t[5], dO, q, k, v, P, O, opt,
                                      a->B, a->H, a->L, a->Dh, NULL, ex_dP, &ws);
        st = attnb_emit(sink, t, ex, a);
    }
    free(ex_dP);
    refenc_mp_arena_free(&ar);
    refenc_mp_attn_options_free(handle);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_attention_backward(double *dq, double *dk, double *dv, double *dP, double *dS,
                                 double *Drow, const double *dout, const double *q,
                                 const double *k, const double *v, const refenc_attn_options *opt,
                                 size_t B, size_t H, size_t L, size_t Dh, mpfr_prec_t prec,
                                 refenc_mp_report *rep)
{
    attnb_args a = {dout, q, k, v, opt, B, H, L, Dh};
    const refenc_mp_output outs[] = {{"dq", dq}, {"dk", dk},   {"dv", dv},
                                     {"dP", dP}, {"dS", dS}, {"Drow", Drow}};
    return refenc_mp_run_twin(attnb_eval, &a, prec, rep, outs, 6);
}
