/* Scaled dot-product attention in MPFR (attention.h):
 *   s[i,j] = c((q_i . k_j) / (sqrt(S) tau)) - m_h |pos_i - pos_j| + t5[h,i,j] + attn_mask[i,j]
 *            t5: T5's table[bucket(pos_j - pos_i), h] (relative_bias.c)
 *            S = score_scalar or Dh;  c(s) = cap tanh(s / cap) with a softcap
 *            (softcap.h: mpfr_tanh, correctly rounded at the working
 *            precision; Ziv's loop certifies the result), else s
 *   s[i,j] = M where key j is padding, or j > i under the causal mask, or
 *            outside a window (sliding_window, local_attention),
 *            M = -inf, or exactly -DBL_MAX (mask_value finfo_min)
 *   weights[i,:] = softmax(s[i,:]);  out_i = sum_j weights[i,j] v_j
 * A query whose every score is -inf gets weights 0 and output 0.  With
 * M = -DBL_MAX the softmax of a fully masked row is exp(0)/L = 1/L each; in
 * a row that sees a key, a masked weight exp(-DBL_MAX - max) lies far below
 * MPFR's exponent range and underflows to 0. */
#include "internal.h"

#include <float.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* divisor = sqrt(S) tau, S = score_scalar (query_pre_attn_scalar, exact) or
 * Dh.  Returns e when the divisor is a power of two 2^e (Dh = 64, tau = 1:
 * 8), which divides exactly by an exponent shift: the same value as
 * mpfr_div without a division per score; LONG_MIN otherwise. */
static long score_divisor(mpfr_ptr divisor, const refenc_mp_attn_options *opt, size_t Dh)
{
    if (opt->score_scalar != NULL)
        mpfr_sqrt(divisor, opt->score_scalar, MPFR_RNDN);
    else
        mpfr_sqrt_ui(divisor, Dh, MPFR_RNDN);
    mpfr_mul(divisor, divisor, opt->temperature, MPFR_RNDN);
    const int pow2 = mpfr_regular_p(divisor) && mpfr_sgn(divisor) > 0 &&
                     mpfr_cmp_ui_2exp(divisor, 1, mpfr_get_exp(divisor) - 1) == 0;
    return pow2 ? (long)mpfr_get_exp(divisor) - 1 : LONG_MIN;
}

/* s <- s / divisor (an exponent shift when score_divisor found one). */
static void scale(mpfr_ptr s, mpfr_srcptr divisor, long shift)
{
    if (shift != LONG_MIN)
        mpfr_div_2si(s, s, shift, MPFR_RNDN);
    else
        mpfr_div(s, s, divisor, MPFR_RNDN);
}

/* s <- cap tanh(s / cap) (softcap.h); s = -inf gives -cap exactly */
static void cap_score(mpfr_ptr s, mpfr_srcptr cap)
{
    mpfr_div(s, s, cap, MPFR_RNDN);
    mpfr_tanh(s, s, MPFR_RNDN);
    mpfr_mul(s, s, cap, MPFR_RNDN);
}

/* The windows, written apart from the reference's window.c (the oracle
 * stays an independent implementation; docs/families.md gives the rules):
 * the causal window keeps j with j + w > i (w keys, the query's own
 * included: Hugging Face's kv_idx > q_idx - w), the symmetric one keeps
 * 2 |i - j| <= w, which for integers is |i - j| <= floor(w / 2)
 * (ModernBERT's local_attention // 2). */
static int outside_window(const refenc_mp_attn_options *opt, size_t i, size_t j)
{
    const int out_causal = opt->sliding_window != 0 &&
                           (j + opt->sliding_window <= i || i + opt->sliding_window <= j);
    const size_t lo = i < j ? i : j, hi = i < j ? j : i;
    const int out_local = opt->local_attention != 0 && 2 * (hi - lo) > opt->local_attention;
    return out_causal || out_local;
}

/* What the score of key j for query i is made of. */
typedef struct {
    mpfr_srcptr divisor;
    long shift;        /* score_divisor's */
    mpfr_ptr t;        /* scratch */
    int late;          /* the bug variant softcap_after_mask: cap after the biases and masks */
} score_ctx;

/* One score s[i,j] of head h: q_i.k_j / divisor, capped (before ALiBi and
 * the additive mask; after them under the bug variant), or M when masked
 * (under the bug variant: -cap, which the cap makes of -inf or of -DBL_MAX,
 * tanh(-DBL_MAX / cap) being -1 to far below any working precision). */
static void one_score(mpfr_ptr s, const refenc_mp_attn_options *opt, const score_ctx *c, mpfr_srcptr q_i,
                      mpfr_srcptr k_j, size_t h, size_t i, size_t j, size_t L, size_t Dh, int masked,
                      refenc_mp_ws *ws)
{
    if (masked) {
        if (c->late)
            mpfr_neg(s, opt->softcap, MPFR_RNDN);       /* exact: prec >= 53 */
        else if (opt->mask_value == REFENC_MASK_FINFO_MIN)
            mpfr_set_d(s, -DBL_MAX, MPFR_RNDN); /* exact: prec >= 53 */
        else
            mpfr_set_inf(s, -1);
        return;
    }
    refenc_mp_dot(s, q_i, 1, k_j, 1, Dh, NULL, ws); /* q_i.k_j */
    scale(s, c->divisor, c->shift);
    if (opt->softcap != NULL && !c->late)
        cap_score(s, opt->softcap);
    if (opt->alibi_slopes != NULL) {
        const int64_t pi = opt->positions[i], pj = opt->positions[j];
        refenc_mp_mul_pos(c->t, opt->alibi_slopes + h, pi > pj ? pi - pj : pj - pi);
        mpfr_sub(s, s, c->t, MPFR_RNDN);
    }
    if (opt->relative_bias != NULL) /* T5: table[bucket(pos_j - pos_i), h] */
        refenc_mpk_relative_bias_add(s, opt, h, i, j);
    if (opt->attn_mask != NULL)
        mpfr_add(s, s, opt->attn_mask + i * L + j, MPFR_RNDN);
    if (c->late)
        cap_score(s, opt->softcap);
}

void refenc_mpk_attention_forward(mpfr_ptr out, mpfr_ptr weights, mpfr_srcptr q, mpfr_srcptr k,
                                  mpfr_srcptr v, const refenc_mp_attn_options *opt, size_t B,
                                  size_t H, size_t L, size_t Dh, refenc_mp_ws *ws)
{
    refenc_mpk_attention_rows_forward(out, weights, q, k, v, NULL, opt, B, H, L, L, Dh, ws);
}

void refenc_mpk_attention_rows_forward(mpfr_ptr out, mpfr_ptr weights, mpfr_srcptr q, mpfr_srcptr k,
                                       mpfr_srcptr v, const int64_t *rows, const refenc_mp_attn_options *opt,
                                       size_t B, size_t H, size_t R, size_t L, size_t Dh, refenc_mp_ws *ws)
{
    /* tmp[0..2) belong to the softmax kernel */
    mpfr_ptr divisor = ws->tmp + 2;
    const score_ctx sc = {divisor, score_divisor(divisor, opt, Dh), ws->tmp + 3,
                          opt->cap_after_mask && opt->softcap != NULL};

    for (size_t b = 0; b < B; b++) {
        const uint8_t *pad_b = opt->key_padding_mask ? opt->key_padding_mask + b * L : NULL;
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h;
            mpfr_srcptr q_bh = q + bh * R * Dh, k_bh = k + bh * L * Dh, v_bh = v + bh * L * Dh;
            mpfr_ptr w_bh = weights + bh * R * L, o_bh = out + bh * R * Dh;

            for (size_t r = 0; r < R; r++) {
                const size_t i = rows != NULL ? (size_t)rows[r] : r; /* query row r's position index */
                for (size_t j = 0; j < L; j++)
                    one_score(w_bh + r * L + j, opt, &sc, q_bh + r * Dh, k_bh + j * Dh, h, i, j, L, Dh,
                              (pad_b != NULL && pad_b[j]) || (opt->causal && j > i) ||
                                  outside_window(opt, i, j), ws);
            }

            refenc_mpk_softmax_forward(w_bh, w_bh, R, L, NULL, ws);

            for (size_t r = 0; r < R; r++) /* out[r,d] = weights[r,:] . v[:,d] */
                for (size_t d = 0; d < Dh; d++)
                    refenc_mp_dot(o_bh + r * Dh + d, w_bh + r * L, 1, v_bh + d, Dh, L, NULL, ws);
        }
    }
}

/* The double options converted: masks and slopes are inputs, exact. */
typedef struct {
    mpfr_ptr mask, slopes, tau, scalar, cap; /* scalar, cap: NULL when unset */
    size_t n_mask, n_slopes;
    refenc_mp_attn_options opt;
} mp_opts;

static int opts_from_d(mp_opts *m, const refenc_attn_options *opt, size_t H, size_t L)
{
    memset(m, 0, sizeof *m);
    m->opt.key_padding_mask = opt->key_padding_mask;
    m->opt.causal = opt->causal;
    m->opt.sliding_window = opt->sliding_window;
    m->opt.local_attention = opt->local_attention;
    m->opt.mask_value = opt->mask_value;
    m->opt.positions = opt->positions;
    m->opt.relative_bias = opt->relative_bias; /* a table of doubles, read exactly */
    m->opt.relative_stride = H;
    m->opt.relative_num_buckets = opt->relative_num_buckets;
    m->opt.relative_max_distance = opt->relative_max_distance;
    m->opt.relative_unclamped = opt->relative_unclamped;
    m->tau = refenc_mp_from_d(&opt->temperature, 1, 53);
    m->opt.temperature = m->tau;
    if (opt->score_scalar > 0)
        m->opt.score_scalar = m->scalar = refenc_mp_from_d(&opt->score_scalar, 1, 53);
    if (opt->softcap > 0)
        m->opt.softcap = m->cap = refenc_mp_from_d(&opt->softcap, 1, 53);
    if (opt->attn_mask != NULL) {
        m->n_mask = L * L;
        m->mask = refenc_mp_from_d(opt->attn_mask, L * L, 53);
        m->opt.attn_mask = m->mask;
    }
    if (opt->alibi_slopes != NULL) {
        m->n_slopes = H;
        m->slopes = refenc_mp_from_d(opt->alibi_slopes, H, 53);
        m->opt.alibi_slopes = m->slopes;
    }
    return m->tau && (!opt->attn_mask || m->mask) && (!opt->alibi_slopes || m->slopes) &&
           (!(opt->score_scalar > 0) || m->scalar) && (!(opt->softcap > 0) || m->cap);
}

static void opts_free(mp_opts *m)
{
    refenc_mp_free(m->tau, 1);
    refenc_mp_free(m->scalar, 1);
    refenc_mp_free(m->cap, 1);
    refenc_mp_free(m->mask, m->n_mask);
    refenc_mp_free(m->slopes, m->n_slopes);
}

typedef struct {
    const double *q, *k, *v;
    const refenc_attn_options *opt;
    size_t B, H, L, Dh;
} attn_args;

static int attn_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const attn_args *a = ctx;
    const size_t n = a->B * a->H * a->L * a->Dh, nw = a->B * a->H * a->L * a->L;
    const size_t np = a->L > a->Dh ? a->L : a->Dh;
    refenc_mp_ws ws;
    mp_opts m;
    int st = refenc_mp_ws_alloc(&ws, prec, 4, np + 1);
    const int ok = opts_from_d(&m, a->opt, a->H, a->L);
    mpfr_ptr q = refenc_mp_from_d(a->q, n, 53), k = refenc_mp_from_d(a->k, n, 53);
    mpfr_ptr v = refenc_mp_from_d(a->v, n, 53);
    mpfr_ptr out = refenc_mp_alloc(n, prec), w = refenc_mp_alloc(nw, prec);
    if (st || !ok || !q || !k || !v || !out || !w) {
        st = refenc_mp_enomem(err, "attention", prec);
    } else {
        refenc_mpk_attention_forward(out, w, q, k, v, &m.opt, a->B, a->H, a->L, a->Dh, &ws);
        const size_t so[4] = {a->B, a->H, a->L, a->Dh}, sw[4] = {a->B, a->H, a->L, a->L};
        st = refenc_mp_sink_emit(sink, "weights", w, 4, sw);
        if (st == REFENC_OK)
            st = refenc_mp_sink_emit(sink, "out", out, 4, so);
    }
    refenc_mp_free(w, nw);
    refenc_mp_free(out, n);
    refenc_mp_free(v, n);
    refenc_mp_free(k, n);
    refenc_mp_free(q, n);
    opts_free(&m);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_attention_forward(double *out, double *weights,
                                const double *q, const double *k, const double *v,
                                const refenc_attn_options *opt,
                                size_t B, size_t H, size_t L, size_t Dh,
                                mpfr_prec_t prec, refenc_mp_report *rep)
{
    attn_args a = {q, k, v, opt, B, H, L, Dh};
    const refenc_mp_output outs[] = {{"weights", weights}, {"out", out}};
    return refenc_mp_run_twin(attn_eval, &a, prec, rep, outs, 2);
}

int refenc_mp_attn_options_from_d(void **handle, const refenc_mp_attn_options **opt,
                                  const refenc_attn_options *o, size_t H, size_t L)
{
    mp_opts *m = malloc(sizeof *m);
    *handle = m;
    if (m == NULL)
        return 0;
    const int ok = opts_from_d(m, o, H, L);
    *opt = &m->opt;
    return ok;
}

void refenc_mp_attn_options_free(void *handle)
{
    if (handle != NULL) {
        opts_free(handle);
        free(handle);
    }
}
