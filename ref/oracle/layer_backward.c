/* One encoder layer's backward in MPFR, from layer.h and docs/gradients.md:
 *   Pre-LN   h = x + MHA(LN1(x)),  y = h + FFN(LN2(h))
 *            dh = dy + LN2^T(FFN^T dy);   dx = dh + LN1^T(MHA^T dh)
 *   Post-LN  r1 = x + MHA(x), h = LN1(r1), r2 = h + FFN(h), y = LN2(r2)
 *            dr2 = LN2^T dy;  dh = dr2 + FFN^T dr2;  dr1 = LN1^T dh;  dx = dr1 + MHA^T dr1
 *   MHA^T    dctx = dy W_o, split into the H heads, attention backward, dq and
 *            dk rotated back by -theta (RoPE, scaled or not), merged; with
 *            grouped-query attention (Hkv < H, g = H / Hkv) the key/value head
 *            j was repeated to query heads j g .. j g + g - 1, so its dk and dv
 *            are the sums over that group (the adjoint of repeat_kv);
 *            dx = dqkv W_in, W_in (E + 2 Ekv, D)
 *   FFN^T    MLP: dh = dy W2, da = dh act'(a), dx = da W1
 *            gated (h = act(a) * b, a and b linear1's gate and up halves):
 *            dh = dy W2, db = dh act(a), da = dh b act'(a), d[a | b] in
 *            linear1's row order, dx = d[a | b] W1
 *   LN^T     LayerNorm's (layernorm_backward.c) or RMSNorm's (rmsnorm_backward.c)
 * The forward is recomputed here in MPFR from the oracle's kernels (every
 * intermediate exact to the working precision, nothing rounded to double),
 * then the backward kernels of backward.h run on it: every output is the
 * exact gradient of the exact layer, certified by Ziv's loop.  The
 * parameter gradients are accumulated as in the double layer; a bias the
 * config does not have (P NULL) has no gradient. */
#include "layer_backward.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

void refenc_mpb_layer_shape(lyr *m, const refenc_config *c, size_t B, size_t L)
{
    m->B = B, m->L = L, m->BL = B * L, m->D = c->d_model, m->H = c->n_heads;
    m->Hkv = refenc_config_kv_heads(c), m->Dh = refenc_config_head_dim(c);
    m->E = m->H * m->Dh, m->Ekv = m->Hkv * m->Dh, m->R = m->E + 2 * m->Ekv;
    m->F = c->d_ff, m->glu = c->ffn_type == REFENC_FFN_GLU, m->F1 = m->glu ? 2 * m->F : m->F;
    m->gate = m->glu && c->glu_gate == REFENC_GLU_GATE_SECOND ? m->F : 0;
    m->act = c->activation, m->pre = c->norm == REFENC_NORM_PRE;
    m->rms = c->norm_type == REFENC_NORMTYPE_RMSNORM, m->offset = c->rmsnorm_offset;
}

/* qkv (BL, R) -> q (B, H, L, Dh) and k, v repeated to the H query heads
 * (dir 0); or back (dir 1): dqkv's q block from dq, its key/value head j
 * from the sum over query heads j g .. j g + g - 1 of dk, dv (one rounding). */
static void heads(lyr *m, mpfr_ptr qkv, mpfr_ptr q, mpfr_ptr k, mpfr_ptr v, int dir,
                  refenc_mp_ws *ws)
{
    const size_t E = m->E, Ekv = m->Ekv, Dh = m->Dh, g = m->H / m->Hkv;
    for (size_t b = 0; b < m->B; b++)
        for (size_t l = 0; l < m->L; l++)
            for (size_t c = 0; c < m->R; c++) {
                const int part = c < E ? 0 : c < E + Ekv ? 1 : 2;
                const size_t cc = part == 0 ? c : part == 1 ? c - E : c - E - Ekv;
                const size_t hh = cc / Dh, d = cc % Dh; /* the head in its block */
                mpfr_ptr base = part == 0 ? q : part == 1 ? k : v;
                mpfr_ptr rv = qkv + (b * m->L + l) * m->R + c;
                const size_t h0 = part == 0 ? hh : hh * g, n = part == 0 ? 1 : g;
                for (size_t i = 0; i < n; i++) {
                    mpfr_ptr hv = base + ((b * m->H + h0 + i) * m->L + l) * Dh + d;
                    if (dir == 0)
                        mpfr_set(hv, rv, MPFR_RNDN);
                    ws->pa[i] = hv;
                }
                if (dir == 1)
                    mpfr_sum(rv, ws->pa, n, MPFR_RNDN);
            }
}

/* ctx (BL, E) <- o (B, H, L, Dh) (dir 0), or o <- ctx (dir 1) */
static void merge(lyr *m, mpfr_ptr ctx, mpfr_ptr o, int dir)
{
    for (size_t b = 0; b < m->B; b++)
        for (size_t l = 0; l < m->L; l++)
            for (size_t c = 0; c < m->E; c++) {
                mpfr_ptr hv = o + ((b * m->H + c / m->Dh) * m->L + l) * m->Dh + c % m->Dh;
                mpfr_ptr cv = ctx + (b * m->L + l) * m->E + c;
                mpfr_set(dir == 0 ? cv : hv, dir == 0 ? hv : cv, MPFR_RNDN);
            }
}

static const refenc_rope_scaling *scaling(const lyr *m)
{
    return m->rope != NULL ? m->rope->scaling : NULL;
}

/* The linear maps of m->lin: k 0 in_proj, 1 out_proj, 2 linear1, 3 linear2,
 * and their weights' and biases' indices among the 12 tensors. */
enum { LIN_IN, LIN_OUT, LIN_1, LIN_2 };
static const int lin_param[4][2] = {{IPW, IPB}, {OPW, OPB}, {L1W, L1B}, {L2W, L2B}};

int refenc_mpb_layer_threads(lyr *m, int threads, mpfr_prec_t prec)
{
    size_t np = m->R > m->F1 ? m->R : m->F1; /* the rows' lengths, and dW's sums of BL terms */
    np = np > m->D ? np : m->D;
    np = np > m->BL ? np : m->BL;
    m->tws = calloc((size_t)threads, sizeof *m->tws);
    m->threads = m->tws != NULL ? threads : 0;
    for (int t = 0; t < m->threads; t++)
        if (refenc_mp_ws_alloc(&m->tws[t], prec, 1, np + 1) != REFENC_OK) {
            refenc_mpb_layer_threads_free(m);
            return 0;
        }
    size_t width = m->R > m->F1 ? m->R : m->F1; /* dy's and x's widths: R, D, E, F1, F */
    width = width > m->D ? width : m->D;
    width = width > m->E ? width : m->E;
    m->dyT = refenc_mp_block_alloc(width * m->BL, prec);
    m->xT = refenc_mp_block_alloc(width * m->BL, prec);
    if (m->tws == NULL || m->dyT == NULL || m->xT == NULL) {
        refenc_mpb_layer_threads_free(m);
        return 0;
    }
    return 1;
}

void refenc_mpb_layer_threads_free(lyr *m)
{
    for (int t = 0; m->tws != NULL && t < m->threads; t++)
        refenc_mp_ws_free(&m->tws[t]); /* an unallocated one is zeroed: safe */
    free(m->tws);
    refenc_mp_block_free(m->dyT);
    refenc_mp_block_free(m->xT);
    m->tws = NULL, m->threads = 0, m->dyT = m->xT = NULL;
}

/* Runs fn(m, i, ws, arg) for i < n on m's threads.  MPFR's flags are per
 * thread: the inexact flag is cleared before each call and what the calls
 * raised set in the caller's (as one thread computing them all would). */
typedef void lyr_task(const lyr *m, size_t i, refenc_mp_ws *ws, const void *arg);
static void lyr_parallel(const lyr *m, size_t n, lyr_task *fn, const void *arg)
{
    const int was = mpfr_inexflag_p();
    int inex = 0;
#pragma omp parallel for schedule(dynamic) num_threads(m->threads) reduction(| : inex)
    for (long i = 0; i < (long)n; i++) {
        mpfr_clear_inexflag();
        fn(m, (size_t)i, &m->tws[omp_get_thread_num()], arg);
        inex |= mpfr_inexflag_p() != 0;
    }
    if (was || inex)
        mpfr_set_inexflag();
}

/* One row of y = x W^T (+ b), W (out, in) doubles with its span. */
typedef struct {
    mpfr_ptr y;
    mpfr_srcptr x;
    const double *W, *b;
    const refenc_mp_wspan *span;
    size_t in, out;
} row_job;
static void row_task(const lyr *m, size_t n, refenc_mp_ws *ws, const void *arg)
{
    (void)m;
    const row_job *j = arg;
    refenc_mpk_linear_d(j->y + n * j->out, j->x + n * j->in, j->W, j->b, j->span, 1, j->in, j->out, ws);
}

/* y = x W^T + b, W (out, in) the linear map k's doubles */
static void lin_fwd(lyr *m, int k, mpfr_ptr y, mpfr_srcptr x)
{
    const lyr_lin *l = &m->lin[k];
    const row_job j = {y, x, l->W, l->b, &l->fwd, l->in, l->out};
    lyr_parallel(m, m->BL, row_task, &j);
}

/* dx = dy W = dy (W^T)^T: the forward's rows of doubles, on W's transpose */
static void lin_dx(lyr *m, int k, mpfr_ptr dx, mpfr_srcptr dy)
{
    const lyr_lin *l = &m->lin[k];
    const row_job j = {dx, dy, l->WT, NULL, &l->bwd, l->out, l->in};
    lyr_parallel(m, m->BL, row_task, &j);
}

/* Row o of dW += dy^T x, dW (out, in), from the transposes m->dyT (out, BL)
 * and m->xT (in, BL). */
typedef struct {
    mpfr_ptr dW;
    size_t in;
} dw_job;
static void dw_task(const lyr *m, size_t o, refenc_mp_ws *ws, const void *arg)
{
    const dw_job *j = arg;
    refenc_mpk_linear_backward_dw(j->dW, m->dyT, 1, m->BL, m->xT, 1, m->BL, m->BL, j->in, o, o + 1,
                                  NULL, ws);
}

/* t (w, BL) = a (BL, w) transposed; exact: t's precision, the working
 * one, is at least a's */
static void transpose(mpfr_ptr t, mpfr_srcptr a, size_t BL, size_t w)
{
    for (size_t n = 0; n < BL; n++)
        for (size_t c = 0; c < w; c++)
            mpfr_set(t + c * BL + n, a + n * w + c, MPFR_RNDN);
}

/* dW += dy^T x, dW (out, in), on m's threads */
static void dw_rows(lyr *m, mpfr_ptr dW, mpfr_srcptr dy, mpfr_srcptr x, size_t in, size_t out)
{
    transpose(m->dyT, dy, m->BL, out);
    transpose(m->xT, x, m->BL, in);
    const dw_job j = {dW, in};
    lyr_parallel(m, out, dw_task, &j);
}

/* The linear map k's parameter gradients: dW += dy^T x (on m's threads),
 * db += sum_n dy (ex_db: which are exact, or NULL) */
static void lin_dw(lyr *m, int k, mpfr_srcptr dy, mpfr_srcptr x, unsigned char *ex_db,
                   refenc_mp_ws *ws)
{
    const lyr_lin *l = &m->lin[k];
    dw_rows(m, m->G[lin_param[k][0]], dy, x, l->in, l->out);
    if (m->G[lin_param[k][1]] != NULL)
        refenc_mpk_linear_backward_db(m->G[lin_param[k][1]], dy, m->BL, l->out, ex_db, ws);
}

int refenc_mpb_layer_bind_d(lyr *m, const double *const t[12])
{
    const size_t shape[4][2] = {{m->R, m->D}, {m->D, m->E}, {m->F1, m->D}, {m->D, m->F}};
    for (int k = 0; k < (m->glu ? 2 : 4); k++) {
        lyr_lin *l = &m->lin[k];
        const double *W = t[lin_param[k][0]], *b = t[lin_param[k][1]];
        if (l->WT != NULL && l->W == W && l->b == b)
            continue; /* bound already (the last layer, forward then backward) */
        const size_t out = shape[k][0], in = shape[k][1];
        if (l->WT == NULL && (l->WT = malloc(out * in * sizeof *l->WT)) == NULL)
            return 0;
        refenc_mp_wspan_unfix(&l->fwd);
        refenc_mp_wspan_unfix(&l->bwd);
        l->W = W, l->b = b, l->out = out, l->in = in;
        for (size_t o = 0; o < out; o++)
            for (size_t i = 0; i < in; i++)
                l->WT[i * out + o] = W[o * in + i];
        refenc_mp_wspan_of(&l->fwd, W, out * in, b, b != NULL ? out : 0);
        refenc_mp_wspan_of(&l->bwd, l->WT, in * out, NULL, 0);
        /* without the fixed-point rows, the same sums, slower */
        (void)refenc_mp_wspan_fix(&l->fwd, W, out, in);
        (void)refenc_mp_wspan_fix(&l->bwd, l->WT, in, out);
    }
    return 1;
}

void refenc_mpb_layer_unbind_d(lyr *m)
{
    for (int k = 0; k < 4; k++) {
        refenc_mp_wspan_unfix(&m->lin[k].fwd);
        refenc_mp_wspan_unfix(&m->lin[k].bwd);
        free(m->lin[k].WT);
        m->lin[k] = (lyr_lin){0};
    }
}

/* t = MHA(in) */
static void mha_fwd(lyr *m, mpfr_srcptr in, refenc_mp_ws *ws)
{
    lin_fwd(m, LIN_IN, m->qkv, in);
    heads(m, m->qkv, m->q, m->k, m->v, 0, ws);
    if (m->rope != NULL) { /* the repeated key heads rotated alike: HF's rotate-then-repeat */
        refenc_mpk_rope_forward(m->q, m->q, m->rope->positions, m->B * m->H, m->L, m->Dh, m->base,
                                m->rope->layout, scaling(m), ws);
        refenc_mpk_rope_forward(m->k, m->k, m->rope->positions, m->B * m->H, m->L, m->Dh, m->base,
                                m->rope->layout, scaling(m), ws);
    }
    refenc_mpk_attention_forward(m->o, m->Pw, m->q, m->k, m->v, m->opt, m->B, m->H, m->L, m->Dh, ws);
    merge(m, m->ctx, m->o, 0);
    lin_fwd(m, LIN_OUT, m->t, m->ctx);
}

/* f = FFN(in), keeping the pre-activation z (BL, F1), act(a) in ga (gated)
 * and h in hid */
static void ffn_fwd(lyr *m, mpfr_srcptr in, refenc_mp_ws *ws)
{
    if (m->glu) { /* glu_backward.c */
        refenc_mpk_glu_forward_keep(m->f, m->z, m->ga, m->hid, in, m->P[L1W], m->P[L1B], m->P[L2W],
                                    m->P[L2B], m->BL, m->D, m->F, m->gate, m->act, ws);
        return;
    }
    lin_fwd(m, LIN_1, m->z, in);
    refenc_mpk_activation_forward(m->hid, m->z, m->BL * m->F, m->act, ws);
    lin_fwd(m, LIN_2, m->f, m->hid);
}

static void add(mpfr_ptr y, mpfr_srcptr a, mpfr_srcptr b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mpfr_add(y + i, a + i, b + i, MPFR_RNDN);
}

void refenc_mpb_norm_forward(const lyr *m, mpfr_ptr y, mpfr_srcptr x, mpfr_srcptr w, mpfr_srcptr b,
                             mpfr_srcptr eps, refenc_mp_ws *ws)
{
    if (m->rms)
        refenc_mpk_rmsnorm_forward(y, x, w, m->BL, m->D, eps, m->offset, ws);
    else
        refenc_mpk_layernorm_forward(y, x, w, b, m->BL, m->D, eps, ws);
}

void refenc_mpb_norm_backward(lyr *m, mpfr_ptr dx, mpfr_ptr dw, mpfr_ptr db, mpfr_srcptr dy,
                              mpfr_srcptr x, mpfr_srcptr w, mpfr_srcptr eps, unsigned char *ex_db,
                              refenc_mp_ws *ws)
{
    if (m->rms)
        refenc_mpk_rmsnorm_backward(dx, dw, m->xhat, dy, x, w, m->BL, m->D, eps, m->offset, ws);
    else
        refenc_mpk_layernorm_backward(dx, dw, db, m->xhat, dy, x, w, m->BL, m->D, eps, ex_db, ws);
}

/* y = LN(x), the norm's weight at P[wi], its bias (if any) at P[wi + 1] */
static void ln_fwd(lyr *m, mpfr_ptr y, mpfr_srcptr x, int wi, refenc_mp_ws *ws)
{
    refenc_mpb_norm_forward(m, y, x, m->P[wi], m->P[wi + 1], m->eps, ws);
}

void refenc_mpb_layer_forward(lyr *m, mpfr_srcptr x, refenc_mp_ws *ws)
{
    const size_t n = m->BL * m->D;
    if (m->pre) {
        ln_fwd(m, m->a, x, N1W, ws);
        mha_fwd(m, m->a, ws);
        add(m->h, x, m->t, n);
        ln_fwd(m, m->a2, m->h, N2W, ws);
        ffn_fwd(m, m->a2, ws);
        add(m->y, m->h, m->f, n);
    } else {
        mha_fwd(m, x, ws);
        add(m->r1, x, m->t, n);
        ln_fwd(m, m->h, m->r1, N1W, ws);
        ffn_fwd(m, m->h, ws);
        add(m->r2, m->h, m->f, n);
        ln_fwd(m, m->y, m->r2, N2W, ws);
    }
}

/* d in_proj_bias += sum_n dqkv[n,:] for the q and v blocks.  Without RoPE
 * the k block's gradient is exactly 0 and is left unchanged: a key bias b_k
 * adds q_i . b_k to every score of query i alike (ALiBi, attn_mask and the
 * masks' constants do not depend on it), which the softmax ignores;
 * equivalently each row of dS sums to 0, so sum_j dk_j = sum_i (sum_j dS_ij)
 * q_i / divisor = 0 (under grouped-query attention for each query head of
 * the group, hence for their sum).  Computed, the sum is a cancellation to 0
 * whose sign of zero differs between precisions, which no precision
 * certifies.  With RoPE the key is rotated after the bias, R_j (W x_j + b_k),
 * so the bias adds q_i . R_j b_k, which depends on j: the block is summed
 * like the others. */
static void in_bias_backward(lyr *m, refenc_mp_ws *ws)
{
    mpfr_ptr t = ws->tmp;
    for (size_t c = 0; c < m->R; c++) {
        if (c >= m->E && c < m->E + m->Ekv && m->rope == NULL)
            continue;
        for (size_t n = 0; n < m->BL; n++)
            ws->pa[n] = m->dqkv + n * m->R + c;
        ws->pa[m->BL] = m->G[IPB] + c;
        mpfr_sum(t, ws->pa, m->BL + 1, MPFR_RNDN);
        mpfr_set(m->G[IPB] + c, t, MPFR_RNDN);
    }
}

/* dx_out = MHA^T dy (the block's input in); uses d1, dob, dqkv, dq, dk, dv */
static void mha_bwd(lyr *m, mpfr_ptr dx_out, mpfr_srcptr dy, mpfr_srcptr in, refenc_mp_ws *ws)
{
    const size_t BH = m->B * m->H;
    lin_dx(m, LIN_OUT, m->d1, dy);
    lin_dw(m, LIN_OUT, dy, m->ctx, NULL, ws);
    merge(m, m->d1, m->dob, 1);
    refenc_mpk_attention_backward(m->dq, m->dk, m->dv, m->dP, m->dS, m->Dr, m->dob, m->q, m->k,
                                  m->v, m->Pw, m->o, m->opt, m->B, m->H, m->L, m->Dh, NULL, NULL,
                                  ws);
    if (m->rope != NULL) {
        refenc_mpk_rope_backward(m->dq, m->dq, m->rope->positions, BH, m->L, m->Dh, m->base,
                                 m->rope->layout, scaling(m), ws);
        refenc_mpk_rope_backward(m->dk, m->dk, m->rope->positions, BH, m->L, m->Dh, m->base,
                                 m->rope->layout, scaling(m), ws);
    }
    heads(m, m->dqkv, m->dq, m->dk, m->dv, 1, ws); /* dk, dv summed over each group */
    lin_dx(m, LIN_IN, dx_out, m->dqkv);
    dw_rows(m, m->G[IPW], m->dqkv, in, m->D, m->R); /* the bias: in_bias_backward */
    if (m->G[IPB] != NULL)
        in_bias_backward(m, ws);
}

/* dx_out = FFN^T dy (input in); dy_exact: dy is the layer's own input dY
 * (exact doubles), so db2 = db2_0 + sum dy is recorded exact where it is */
static void ffn_bwd(lyr *m, mpfr_ptr dx_out, mpfr_srcptr dy, mpfr_srcptr in, int dy_exact,
                    refenc_mp_ws *ws)
{
    const size_t n = m->BL * m->F;
    unsigned char *ex = dy_exact ? m->ex[L2B] : NULL;
    if (m->glu) { /* glu_backward.c */
        refenc_mpk_glu_backward(dx_out, m->G[L1W], m->G[L1B], m->G[L2W], m->G[L2B], m->dz, m->dhid,
                                m->za, m->gd, dy, in, m->z, m->ga, m->hid, m->P[L1W], m->P[L2W],
                                m->BL, m->D, m->F, m->gate, m->act, ex, ws);
        return;
    }
    lin_dx(m, LIN_2, m->dhid, dy);
    lin_dw(m, LIN_2, dy, m->hid, ex, ws);
    refenc_mpk_activation_derivative(m->gd, m->z, n, m->act, ws);
    for (size_t i = 0; i < n; i++)
        mpfr_mul(m->dz + i, m->dhid + i, m->gd + i, MPFR_RNDN); /* da = dh act'(a) */
    lin_dx(m, LIN_1, dx_out, m->dz);
    lin_dw(m, LIN_1, m->dz, in, NULL, ws);
}

/* dx_out = LN^T dy (the norm's input x), the norm's weight at P[w] */
static void ln_bwd(lyr *m, mpfr_ptr dx_out, mpfr_srcptr dy, mpfr_srcptr x, int w, int dy_exact,
                   refenc_mp_ws *ws)
{
    refenc_mpb_norm_backward(m, dx_out, m->G[w], m->G[w + 1], dy, x, m->P[w], m->eps,
                             dy_exact ? m->ex[w + 1] : NULL, ws);
}

/* dx = the layer's input gradient, into d3's place (returned) */
mpfr_ptr refenc_mpb_layer_backward(lyr *m, mpfr_srcptr dy, mpfr_srcptr x, refenc_mp_ws *ws)
{
    const size_t n = m->BL * m->D;
    if (m->pre) {
        ffn_bwd(m, m->d2, dy, m->a2, 1, ws);
        ln_bwd(m, m->d3, m->d2, m->h, N2W, 0, ws);
        add(m->dh, dy, m->d3, n);                 /* dh = dy + LN2^T FFN^T dy */
        mha_bwd(m, m->d2, m->dh, m->a, ws);
        ln_bwd(m, m->d3, m->d2, x, N1W, 0, ws);
        add(m->d3, m->dh, m->d3, n);              /* dx = dh + LN1^T MHA^T dh */
    } else {
        ln_bwd(m, m->d2, dy, m->r2, N2W, 1, ws);  /* dr2 */
        ffn_bwd(m, m->d3, m->d2, m->h, 0, ws);
        add(m->dh, m->d2, m->d3, n);              /* dh = dr2 + FFN^T dr2 */
        ln_bwd(m, m->d2, m->dh, m->r1, N1W, 0, ws); /* dr1 */
        mha_bwd(m, m->d3, m->d2, x, ws);
        add(m->d3, m->d2, m->d3, n);              /* dx = dr1 + MHA^T dr1 */
    }
    return m->d3;
}

int refenc_mpb_layer_ws(refenc_mp_ws *ws, const lyr *m, mpfr_prec_t prec)
{
    size_t np = m->BL > m->R ? m->BL : m->R;
    np = np > m->F1 ? np : m->F1;
    np = np > m->D ? np : m->D;
    return refenc_mp_ws_alloc(ws, prec, m->L * m->Dh + m->D + 8, np + m->L + m->Dh + 1);
}

static const char *const grad_names[12] = {
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
    "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
    "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"};

/* the sizes (rows, cols) of the 12 tensors, in refenc_layer_params order
 * (a vector: rows 1) */
static void tensor_shapes(size_t (*s)[2], const lyr *m)
{
    const size_t D = m->D;
    const size_t t[12][2] = {{m->R, D}, {1, m->R}, {D, m->E}, {1, D}, {m->F1, D}, {1, m->F1},
                             {D, m->F}, {1, D},    {1, D},    {1, D}, {1, D},    {1, D}};
    memcpy(s, t, sizeof t);
}

static const double *param_ptr(const refenc_layer_params *p, int i)
{
    const double *const t[12] = {p->in_proj_weight, p->in_proj_bias, p->out_proj_weight,
                                 p->out_proj_bias, p->linear1_weight, p->linear1_bias,
                                 p->linear2_weight, p->linear2_bias, p->norm1_weight,
                                 p->norm1_bias, p->norm2_weight, p->norm2_bias};
    return t[i];
}

typedef struct {
    const double *dy, *x, *start; /* start: the gradients' starting values, concatenated */
    const refenc_layer_params *lp;
    const refenc_config *cfg;
    const refenc_attn_options *opt;
    const refenc_rope_options *rope;
    size_t B, L;
} layb_args;

void refenc_mpb_layer_buffers(lyr *m, refenc_mp_arena *ar2, mpfr_prec_t p)
{
    const size_t nd = m->BL * m->D, nf = m->BL * m->F, nw = m->B * m->H * m->L * m->L;
    const size_t ne = m->BL * (m->E > m->D ? m->E : m->D); /* attention's (BL, E) and d1 */
    mpfr_ptr *fd[] = {&m->a, &m->t, &m->h, &m->a2, &m->f, &m->r1, &m->r2, &m->y, &m->d2,
                      &m->d3, &m->dh, &m->xhat};
    for (size_t i = 0; i < sizeof fd / sizeof fd[0]; i++)
        *fd[i] = refenc_mp_arena_alloc(ar2, nd, p);
    mpfr_ptr *fe[] = {&m->q, &m->k, &m->v, &m->o, &m->ctx, &m->d1, &m->dob, &m->dq, &m->dk, &m->dv};
    for (size_t i = 0; i < sizeof fe / sizeof fe[0]; i++)
        *fe[i] = refenc_mp_arena_alloc(ar2, ne, p);
    m->qkv = refenc_mp_arena_alloc(ar2, m->BL * m->R, p);
    m->dqkv = refenc_mp_arena_alloc(ar2, m->BL * m->R, p);
    m->z = refenc_mp_arena_alloc(ar2, m->BL * m->F1, p), m->dz = refenc_mp_arena_alloc(ar2, m->BL * m->F1, p);
    mpfr_ptr *ff[] = {&m->hid, &m->ga, &m->dhid, &m->za, &m->gd};
    for (size_t i = 0; i < sizeof ff / sizeof ff[0]; i++)
        *ff[i] = refenc_mp_arena_alloc(ar2, nf, p);
    m->Pw = refenc_mp_arena_alloc(ar2, nw, p), m->dP = refenc_mp_arena_alloc(ar2, nw, p);
    m->dS = refenc_mp_arena_alloc(ar2, nw, p);
    m->Dr = refenc_mp_arena_alloc(ar2, m->B * m->H * m->L, p);
}

static int lyr_emit(const lyr *m, const refenc_mp_sink *sink, mpfr_srcptr dx)
{
    size_t sh[12][2];
    tensor_shapes(sh, m);
    const size_t sx[3] = {m->B, m->L, m->D};
    int st = refenc_mp_sink_emit(sink, "y", m->y, 3, sx);
    if (st == REFENC_OK)
        st = refenc_mp_sink_emit(sink, "dx", dx, 3, sx);
    for (int i = 0; i < 12 && st == REFENC_OK; i++) {
        if (m->G[i] == NULL) /* a tensor the config does not have */
            continue;
        const int matrix = i % 2 == 0 && i < 8; /* the four weights */
        st = refenc_mp_sink_emit_exact(sink, grad_names[i], m->G[i], m->ex[i], matrix ? 2 : 1,
                                       matrix ? sh[i] : sh[i] + 1);
    }
    return st;
}

static int layb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const layb_args *a = ctx;
    const refenc_config *c = a->cfg;
    lyr m = {.rope = a->rope};
    refenc_mpb_layer_shape(&m, c, a->B, a->L);
    refenc_mp_arena ar1 = {0}, ar2 = {0};
    refenc_mp_ws ws;
    int st = refenc_mpb_layer_ws(&ws, &m, prec);
    void *handle = NULL;
    const int ok = refenc_mp_attn_options_from_d(&handle, &m.opt, a->opt, m.H, m.L);
    size_t sh[12][2];
    tensor_shapes(sh, &m);
    for (int i = 0, off = 0; i < 12; i++) {
        const double *pt = param_ptr(a->lp, i);
        const size_t n = sh[i][0] * sh[i][1];
        if (pt == NULL)
            continue;
        m.P[i] = refenc_mp_arena_from_d(&ar1, pt, n, 53);
        m.G[i] = refenc_mp_arena_from_d(&ar1, a->start + off, n, prec);
        off += (int)n;
    }
    refenc_mpb_layer_buffers(&m, &ar2, prec);
    const double *params[12];
    for (int i = 0; i < 12; i++)
        params[i] = param_ptr(a->lp, i);
    const int bound = refenc_mpb_layer_bind_d(&m, params);
    mpfr_ptr x = refenc_mp_arena_from_d(&ar1, a->x, m.BL * m.D, 53);
    mpfr_ptr dy = refenc_mp_arena_from_d(&ar1, a->dy, m.BL * m.D, 53);
    m.eps = refenc_mp_arena_from_d(&ar1, &c->layer_norm_eps, 1, 53);
    const double base = a->rope ? a->rope->base : 2.0;
    m.base = refenc_mp_arena_from_d(&ar1, &base, 1, 53);
    const int eb = m.pre ? L2B : N2B; /* the bias summed from dy: db2 (Pre-LN), dbeta2 (Post-LN) */
    unsigned char *exb = m.G[eb] != NULL ? malloc(m.D) : NULL;
    m.ex[eb] = exb;
    if (st || !ok || !bound || ar1.failed || ar2.failed || (m.G[eb] != NULL && exb == NULL) ||
        !refenc_mpb_layer_threads(&m, 1, prec)) {
        st = refenc_mp_enomem(err, "layer backward", prec);
    } else {
        refenc_mpb_layer_forward(&m, x, &ws);
        st = lyr_emit(&m, sink, refenc_mpb_layer_backward(&m, dy, x, &ws));
    }
    free(exb);
    refenc_mpb_layer_threads_free(&m);
    refenc_mpb_layer_unbind_d(&m);
    refenc_mp_attn_options_free(handle);
    refenc_mp_arena_free(&ar2);
    refenc_mp_arena_free(&ar1);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mpb_blocks_supported(const refenc_config *cfg, refenc_error *err)
{
    const char *key = cfg->qkv_bias                                ? "qkv_bias" /* Qwen's: named first */
                      : cfg->qk_norm != REFENC_QKNORM_NONE         ? "qk_norm"
                      : cfg->relative_attention_num_buckets != 0 ? "relative_attention_num_buckets" /* T5's, too */
                      : cfg->attn_logit_softcapping != 0                   ? "attn_logit_softcapping"
                      : cfg->query_pre_attn_scalar != 0                    ? "query_pre_attn_scalar"
                      : cfg->sliding_window != 0                           ? "sliding_window"
                      : cfg->local_attention != 0                          ? "local_attention"
                      : cfg->global_attn_every_n_layers != 0               ? "global_attn_every_n_layers"
                      : cfg->sliding_window_pattern != 0                   ? "sliding_window_pattern"
                      : cfg->embedding_normalizer_dtype != REFENC_NORMALIZER_EXACT ? "embedding_normalizer_dtype"
                      : cfg->pooling != REFENC_POOL_NONE                   ? "pooling"
                      : cfg->skip_first_prenorm                            ? "skip_first_prenorm"
                      : cfg->sandwich_norm                                 ? "sandwich_norm"
                                                                   : NULL;
    if (key == NULL)
        return REFENC_OK;
    return refenc_error_set(err, REFENC_EINVAL,
                            "oracle backward: config key %s: only LayerNorm (with or without its bias) or "
                            "RMSNorm, the MLP or the gated FFN, linears with or without biases, RoPE scaled "
                            "or not, multi-head or grouped-query attention of any head width, uncapped, "
                            "unwindowed and scaled by sqrt(head_dim), without Qwen's qkv_bias or qk_norm, "
                            "T5's relative bias, a pooling or sandwich norms, every layer with its attention "
                            "norm, have an MPFR backward yet", key);
}

int refenc_mp_layer_backward(double *dx, const refenc_layer_params *dlp, double *y,
                             const double *dy, const double *x, const refenc_layer_params *lp,
                             const refenc_config *cfg, const refenc_attn_options *opt,
                             const refenc_rope_options *rope, size_t B, size_t L,
                             mpfr_prec_t prec, refenc_mp_report *rep)
{
    size_t sh[12][2], total = 0;
    refenc_error local;
    const int ok = refenc_mpb_blocks_supported(cfg, rep ? &rep->error : &local);
    if (ok != REFENC_OK)
        return ok;
    lyr m = {0};
    refenc_mpb_layer_shape(&m, cfg, B, L);
    tensor_shapes(sh, &m);
    for (int i = 0; i < 12; i++)
        total += param_ptr(lp, i) != NULL ? sh[i][0] * sh[i][1] : 0;
    double *start = malloc(total * sizeof *start); /* the starting values: written over */
    if (start == NULL)
        return refenc_mp_enomem(rep ? &rep->error : NULL, "layer backward", prec);
    refenc_mp_output outs[14] = {{"y", y}, {"dx", dx}};
    size_t no = 2;
    for (size_t i = 0, off = 0; i < 12; i++) {
        if (param_ptr(lp, (int)i) == NULL)
            continue;
        const size_t n = sh[i][0] * sh[i][1];
        memcpy(start + off, param_ptr(dlp, (int)i), n * sizeof *start);
        outs[no].name = grad_names[i];
        outs[no++].dst = (double *)param_ptr(dlp, (int)i);
        off += n;
    }
    layb_args a = {dy, x, start, lp, cfg, opt, rope, B, L};
    const int st = refenc_mp_run_twin(layb_eval, &a, prec, rep, outs, no);
    free(start);
    return st;
}
