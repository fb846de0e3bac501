/* The encoder's golden outputs at scale (oracle.h, refenc_mp_encoder_run):
 * batch item by batch item (or layer by layer), evaluated at two precisions
 * in lockstep, each step certified with Ziv's test as soon as it is
 * computed, the work of each step shared by threads.
 *
 * The arithmetic is the kernels' (refenc_mpk_*), called on one item, one
 * row or one head at a time: the values are those of
 * refenc_mpk_encoder_forward, bit for bit.  What changes is the schedule:
 *   - items are independent (attention never looks across the batch), so
 *     an item is evaluated, certified and forgotten before the next: the
 *     MPFR storage is one item's, whatever B;
 *   - both precisions of Ziv's pair are evaluated together, step by step,
 *     so a step is certified while its two evaluations are at hand, and
 *     nothing is collected; an item whose step is not certified is
 *     evaluated again from its input at the next pair of precisions;
 *   - within a step, rows (LayerNorm, linear maps, FFN) or heads (attention)
 *     go to OpenMP threads, each with its own workspace.  A value is
 *     computed by the same operations whatever the thread; MPFR's flags are
 *     per thread, so each thread reports whether it saw an inexact
 *     operation and the unit's flag is their union.  The output does not
 *     depend on the number of threads.
 * Parameters stay doubles (refenc_mpk_linear_d); the LayerNorms' (D) are
 * converted per layer, embedding and PE rows per item. */
#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../core/alloc.h"

static int thread_num(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* The state of one unit at one precision. */
typedef struct {
    mpfr_prec_t p;
    mpfr_ptr h, a, t;       /* (L, D): the hidden state, a LayerNorm's output, a sublayer's  */
    mpfr_ptr q, k, v;       /* (H, L, Dh): the heads' queries, keys, values                 */
    mpfr_ptr ctx;           /* (L, D): the heads' contexts, merged                            */
    mpfr_ptr slopes;        /* (H): ALiBi                                                     */
    unsigned char *exact;   /* (L, D): which values of "embed" are exact                      */
    int inexact;            /* an inexact operation has happened in this unit                */
} lane;

/* What each thread works with, at each lane's precision. */
typedef struct {
    refenc_mp_ws ws[2];
    mpfr_ptr weights[2];    /* (L, L): one head's attention weights */
    mpfr_ptr out[2];        /* (L, Dh): one head's context           */
    mpfr_ptr hidden[2];     /* (F): one row of the FFN               */
    mpfr_t t, u;            /* 64 bits, for Ziv's test               */
} worker;

/* One layer's parameters as the kernels take them. */
typedef struct {
    const refenc_layer_params *lp;
    mpfr_ptr ln;            /* (4 D) norm1 weight, bias, norm2 weight, bias at 53 bits */
    refenc_mp_wspan in_span, out_span, l1_span, l2_span;
} layer_mp;

enum { BUF_H, BUF_A, BUF_T, BUF_CTX };

typedef struct unit_ctx {
    const refenc_mp_run *run;
    const refenc_config *cfg;
    size_t B, L, D, H, Dh, F, N;
    int threads;
    lane lanes[2];
    worker *workers;
    mpfr_ptr eps, tau, base, mask; /* 53 bits; mask (L, L) or NULL */
    mpfr_ptr emb_eps;              /* 53 bits: the embedding LayerNorm's eps          */
    mpfr_ptr table;                /* (L, D) at 53 bits: embedding, type or PE rows  */
    int64_t *rows;                 /* (L) 0 .. L-1: the rows of table               */
    int64_t *zeros, *ids;          /* (L): token types 0; RoBERTa's position ids     */
    const int64_t *pos;
    size_t item, layer;
    double *dbl;                   /* a step's certified doubles                    */
    /* the step being run */
    const layer_mp *lm;
    int src, dst, src2;
    mpfr_srcptr gamma, beta;
    /* the first value not certified */
    int failed;
    char fail[REFENC_ERRMSG_MAX];
    /* progress */
    double done, total;
    size_t unit, units;
} unit_ctx;

static mpfr_ptr buf(lane *ln, int which)
{
    return which == BUF_H ? ln->h : which == BUF_A ? ln->a : which == BUF_T ? ln->t : ln->ctx;
}

/* ---- the parallel schedule -------------------------------------------------------- */

typedef void (*row_fn)(unit_ctx *u, int li, size_t row, worker *w);

static void progress(unit_ctx *u, const char *step, double work);

/* fn on every (lane, row), rows of both lanes shared by the threads; each
 * lane's inexact flag gathers what its rows raised.  `work` (in the units of
 * refenc_mp_progress) is reported as the rows finish, by the first thread:
 * a long step shows its progress. */
static void for_rows_w(unit_ctx *u, size_t n, row_fn fn, const char *step, double work)
{
    int inex0 = 0, inex1 = 0;
    const long total = 2 * (long)n;
    const double done0 = u->done;
    long finished = 0;
#pragma omp parallel for schedule(dynamic) num_threads(u->threads) reduction(| : inex0, inex1)
    for (long it = 0; it < total; it++) {
        const int li = it >= (long)n;
        const int t = thread_num();
        worker *w = &u->workers[t];
        mpfr_clear_inexflag();
        fn(u, li, (size_t)(li ? it - (long)n : it), w);
        if (mpfr_inexflag_p()) {
            if (li)
                inex1 = 1;
            else
                inex0 = 1;
        }
        long now;
#pragma omp atomic capture
        now = ++finished;
        if (t == 0 && step != NULL) {
            u->done = done0;
            progress(u, step, work * (double)now / (double)total);
        }
    }
    u->done = done0 + (step != NULL ? work : 0);
    u->lanes[0].inexact |= inex0;
    u->lanes[1].inexact |= inex1;
}

static void for_rows(unit_ctx *u, size_t n, row_fn fn)
{
    for_rows_w(u, n, fn, NULL, 0);
}

static int wanted(const unit_ctx *u, const char *step)
{
    return u->run->wanted == NULL || u->run->wanted(u->run->wanted_ctx, step);
}

static void progress(unit_ctx *u, const char *step, double work)
{
    u->done += work;
    if (u->run->progress != NULL) {
        const refenc_mp_progress p = {u->unit, u->units, u->layer, step, u->done, u->total,
                                      u->lanes[0].p};
        u->run->progress(u->run->progress_ctx, &p);
    }
}

static void record_failure(unit_ctx *u, const char *step, size_t index, mpfr_srcptr lo, mpfr_srcptr hi)
{
    u->failed = 1;
    snprintf(u->fail, sizeof u->fail,
             "oracle: the rounding of %s[%zu] of batch item %zu (%.17g) is not certified: %.17g at "
             "%ld bits, %.17g at %ld bits; no precision up to %ld bits certified it",
             step, index, u->item, mpfr_get_d(hi, MPFR_RNDN), mpfr_get_d(lo, MPFR_RNDN),
             (long)u->lanes[0].p, mpfr_get_d(hi, MPFR_RNDN), (long)u->lanes[1].p,
             (long)REFENC_MP_PREC_MAX);
}

/* Certifies a step (n values, in both lanes at lo and hi) and emits its
 * doubles; 0 if a value is not certified (the unit must be evaluated
 * again).  exact_v: per value exactness of the higher lane, or NULL. */
static int certify(unit_ctx *u, const char *step, mpfr_srcptr lo, mpfr_srcptr hi, size_t n,
                   const unsigned char *exact_v, size_t ndim, const size_t *shape)
{
    if (!wanted(u, step))
        return 1;
    const int exact_step = !u->lanes[1].inexact;
    const mpfr_prec_t p_hi = u->lanes[1].p;
    size_t first = SIZE_MAX;
#pragma omp parallel for schedule(static) num_threads(u->threads) reduction(min : first)
    for (long i = 0; i < (long)n; i++) {
        worker *w = &u->workers[thread_num()];
        const int ex = exact_step || (exact_v != NULL && exact_v[i]);
        if (refenc_mp_certified(lo + i, hi + i, p_hi, ex, w->t, w->u))
            u->dbl[i] = mpfr_get_d(hi + i, MPFR_RNDN);
        else if ((size_t)i < first)
            first = (size_t)i;
    }
    if (first != SIZE_MAX) {
        record_failure(u, step, first, lo + first, hi + first);
        return 0;
    }
    u->run->emit(u->run->emit_ctx, step, u->item, u->dbl, ndim, shape);
    return 1;
}

/* Certifies a step of shape (L, D) held in buffer `which` of both lanes. */
static int certify_ld(unit_ctx *u, const char *step, int which)
{
    const size_t shape[2] = {u->L, u->D};
    return certify(u, step, buf(&u->lanes[0], which), buf(&u->lanes[1], which), u->L * u->D, NULL, 2,
                   shape);
}

/* ---- the steps, one row (or head) at a time ------------------------------------------ */

static void layernorm_row(unit_ctx *u, int li, size_t r, worker *w)
{
    lane *ln = &u->lanes[li];
    const size_t D = u->D;
    refenc_mpk_layernorm_forward(buf(ln, u->dst) + r * D, buf(ln, u->src) + r * D, u->gamma, u->beta,
                                 1, D, u->eps, &w->ws[li]);
}

/* q, k, v of row r: x[r,:] (in_proj_weight)^T + in_proj_bias, split into heads. */
static void qkv_row(unit_ctx *u, int li, size_t r, worker *w)
{
    lane *ln = &u->lanes[li];
    const size_t D = u->D, L = u->L, Dh = u->Dh;
    const refenc_layer_params *lp = u->lm->lp;
    mpfr_srcptr x_r = buf(ln, u->src) + r * D;
    refenc_mp_row_load(&w->ws[li], x_r, D);
    for (size_t o = 0; o < 3 * D; o++) {
        const size_t which = o / D, j = o % D, h = j / Dh, d = j % Dh;
        mpfr_ptr dest = (which == 0 ? ln->q : which == 1 ? ln->k : ln->v) + (h * L + r) * Dh + d;
        refenc_mp_dot_row_d(dest, x_r, lp->in_proj_weight + o * D, lp->in_proj_bias + o,
                            &u->lm->in_span, &w->ws[li]);
    }
}

/* t[r,:] = ctx[r,:] (out_proj.weight)^T + out_proj.bias */
static void out_proj_row(unit_ctx *u, int li, size_t r, worker *w)
{
    lane *ln = &u->lanes[li];
    const size_t D = u->D;
    const refenc_layer_params *lp = u->lm->lp;
    mpfr_srcptr x_r = ln->ctx + r * D;
    refenc_mp_row_load(&w->ws[li], x_r, D);
    for (size_t o = 0; o < D; o++)
        refenc_mp_dot_row_d(ln->t + r * D + o, x_r, lp->out_proj_weight + o * D, lp->out_proj_bias + o,
                            &u->lm->out_span, &w->ws[li]);
}

/* t[r,:] = act(x[r,:] W1^T + b1) W2^T + b2, the hidden row in the worker's buffer */
static void ffn_row(unit_ctx *u, int li, size_t r, worker *w)
{
    lane *ln = &u->lanes[li];
    const size_t D = u->D, F = u->F;
    const refenc_layer_params *lp = u->lm->lp;
    refenc_mp_ws *ws = &w->ws[li];
    mpfr_srcptr x_r = buf(ln, u->src) + r * D;
    mpfr_ptr hid = w->hidden[li];
    refenc_mp_row_load(ws, x_r, D);
    for (size_t f = 0; f < F; f++)
        refenc_mp_dot_row_d(hid + f, x_r, lp->linear1_weight + f * D, lp->linear1_bias + f, &u->lm->l1_span, ws);
    refenc_mpk_activation_forward(hid, hid, F, u->cfg->activation, ws);
    refenc_mp_row_load(ws, hid, F);
    for (size_t o = 0; o < D; o++)
        refenc_mp_dot_row_d(ln->t + r * D + o, hid, lp->linear2_weight + o * F, lp->linear2_bias + o,
                            &u->lm->l2_span, ws);
}

/* dst[r,:] = src[r,:] + src2[r,:] */
static void add_row(unit_ctx *u, int li, size_t r, worker *w)
{
    (void)w;
    lane *ln = &u->lanes[li];
    const size_t D = u->D;
    mpfr_ptr y = buf(ln, u->dst) + r * D;
    mpfr_srcptr a = buf(ln, u->src) + r * D, b = buf(ln, u->src2) + r * D;
    for (size_t d = 0; d < D; d++)
        mpfr_add(y + d, a + d, b + d, MPFR_RNDN);
}

/* RoPE on q and k of both lanes: four tasks. */
static void rope_all(unit_ctx *u)
{
    int inex[4] = {0, 0, 0, 0};
    const refenc_config *cfg = u->cfg;
#pragma omp parallel for schedule(dynamic) num_threads(u->threads)
    for (int task = 0; task < 4; task++) {
        const int li = task / 2;
        lane *ln = &u->lanes[li];
        worker *w = &u->workers[thread_num()];
        mpfr_ptr x = task % 2 ? ln->k : ln->q;
        mpfr_clear_inexflag();
        refenc_mpk_rope_forward(x, x, u->pos, u->H, u->L, u->Dh, u->base, cfg->rope_layout, &w->ws[li]);
        inex[task] = mpfr_inexflag_p() != 0;
    }
    u->lanes[0].inexact |= inex[0] | inex[1];
    u->lanes[1].inexact |= inex[2] | inex[3];
}

/* Attention, head by head, both lanes of a head in one thread so that its
 * weights are certified there; the contexts are merged into ctx. */
static int attention_all(unit_ctx *u, const char *weights_step)
{
    const size_t L = u->L, Dh = u->Dh, D = u->D, H = u->H;
    const refenc_input *in = u->run->in;
    const int want = wanted(u, weights_step);
    const int was_inexact = u->lanes[1].inexact;
    int inex0 = 0, inex1 = 0;
    size_t first = SIZE_MAX;
#pragma omp parallel for schedule(dynamic) num_threads(u->threads) reduction(| : inex0, inex1) reduction(min : first)
    for (long hh = 0; hh < (long)H; hh++) {
        const size_t h = (size_t)hh;
        worker *w = &u->workers[thread_num()];
        int head_inexact[2];
        for (int li = 0; li < 2; li++) {
            lane *ln = &u->lanes[li];
            const refenc_mp_attn_options opt = {
                .key_padding_mask = in->key_padding_mask ? in->key_padding_mask + u->item * L : NULL,
                .causal = u->cfg->causal,
                .attn_mask = u->mask,
                .alibi_slopes = u->cfg->positional == REFENC_POS_ALIBI ? ln->slopes + h : NULL,
                .positions = u->pos,
                .temperature = u->tau,
                .mask_value = u->cfg->mask_value,
                .merge_without_transpose = 0,
            };
            mpfr_clear_inexflag();
            refenc_mpk_attention_forward(w->out[li], w->weights[li], ln->q + h * L * Dh, ln->k + h * L * Dh,
                                         ln->v + h * L * Dh, &opt, 1, 1, L, Dh, &w->ws[li]);
            head_inexact[li] = mpfr_inexflag_p() != 0;
            for (size_t l = 0; l < L; l++) /* ctx[l, h Dh + d] = out[l, d]: moved, not copied */
                for (size_t d = 0; d < Dh; d++)
                    mpfr_swap(ln->ctx + l * D + h * Dh + d, w->out[li] + l * Dh + d);
        }
        inex0 |= head_inexact[0];
        inex1 |= head_inexact[1];
        if (want) {
            const int exact = !was_inexact && !head_inexact[1];
            double *dst = u->dbl + h * L * L;
            for (size_t i = 0; i < L * L; i++) {
                if (refenc_mp_certified(w->weights[0] + i, w->weights[1] + i, u->lanes[1].p, exact, w->t, w->u))
                    dst[i] = mpfr_get_d(w->weights[1] + i, MPFR_RNDN);
                else if (h * L * L + i < first)
                    first = h * L * L + i;
            }
        }
    }
    u->lanes[0].inexact |= inex0;
    u->lanes[1].inexact |= inex1;
    if (first != SIZE_MAX) {
        /* recompute the head's weights to name the values (rare: escalation follows) */
        u->failed = 1;
        snprintf(u->fail, sizeof u->fail,
                 "oracle: the rounding of %s[%zu] of batch item %zu is not certified at %ld and %ld "
                 "bits; no precision up to %ld bits certified it",
                 weights_step, first, u->item, (long)u->lanes[0].p, (long)u->lanes[1].p,
                 (long)REFENC_MP_PREC_MAX);
        return 0;
    }
    if (want) {
        const size_t shape[3] = {H, L, L};
        u->run->emit(u->run->emit_ctx, weights_step, u->item, u->dbl, 3, shape);
    }
    return 1;
}

/* ---- a layer, the embedding, the final norm --------------------------------------------- */

static void layer_name(char *name, size_t cap, size_t i, const char *step)
{
    snprintf(name, cap, "layers.%zu.%s", i, step);
}

static double layer_work(const refenc_config *c, size_t L)
{
    const double D = (double)c->d_model, F = (double)c->d_ff, H = (double)c->n_heads, Dh = D / H;
    const double act = c->activation == REFENC_ACT_RELU ? 0 : 600; /* erfc, tanh: about 600 multiply-adds */
    return 4 * L * D + 3 * L * D * D + 2 * H * L * L * Dh + 60 * H * L * L + L * D * D +
           2 * L * D * F + act * L * F;
}

/* Runs layer i on lanes' h (the result in h); 0 if a step is not certified. */
static int run_layer(unit_ctx *u, const layer_mp *lm, size_t i)
{
    const refenc_config *cfg = u->cfg;
    const size_t L = u->L, D = u->D, H = u->H, Dh = u->Dh, F = u->F;
    char name[64];
    u->lm = lm;
    u->layer = i;
    const double w_ln = 4.0 * L * D, w_qkv = 3.0 * L * D * D, w_attn = 2.0 * H * L * L * Dh + 60.0 * H * L * L;
    const double w_proj = (double)L * D * D;
    const double w_ffn = 2.0 * L * D * F + (cfg->activation == REFENC_ACT_RELU ? 0 : 600.0 * L * F);
    mpfr_srcptr g1 = lm->ln, b1 = lm->ln + D, g2 = lm->ln + 2 * D, b2 = lm->ln + 3 * D;
#define LN(dst_, src_, g_, b_) (u->dst = (dst_), u->src = (src_), u->gamma = (g_), u->beta = (b_), \
                                for_rows(u, L, layernorm_row))
#define CERT(step, which)                                  \
    do {                                                   \
        layer_name(name, sizeof name, i, step);            \
        if (!certify_ld(u, name, which))                   \
            return 0;                                      \
        progress(u, name, 0);                              \
    } while (0)
#define ATTENTION(src_)                                                        \
    do {                                                                       \
        u->src = (src_);                                                       \
        for_rows_w(u, L, qkv_row, "q, k, v", w_qkv);                          \
        if (cfg->positional == REFENC_POS_ROPE)                                \
            rope_all(u);                                                       \
        layer_name(name, sizeof name, i, "self_attn.weights");                 \
        if (!attention_all(u, name))                                           \
            return 0;                                                          \
        progress(u, name, w_attn);                                             \
        for_rows_w(u, L, out_proj_row, "out_proj", w_proj);                    \
        CERT("self_attn", BUF_T);                                              \
    } while (0)

    if (cfg->norm == REFENC_NORM_PRE) {
        LN(BUF_A, BUF_H, g1, b1);
        progress(u, "norm1", w_ln / 2);
        CERT("norm1", BUF_A);
        ATTENTION(BUF_A);
        u->dst = BUF_H, u->src = BUF_H, u->src2 = BUF_T;
        for_rows(u, L, add_row);
        LN(BUF_A, BUF_H, g2, b2);
        progress(u, "norm2", w_ln / 2);
        CERT("norm2", BUF_A);
        u->src = BUF_A;
        for_rows_w(u, L, ffn_row, "ffn", w_ffn);
        CERT("ffn", BUF_T);
        u->dst = BUF_H, u->src = BUF_H, u->src2 = BUF_T;
        for_rows(u, L, add_row);
        CERT("output", BUF_H);
    } else {
        ATTENTION(BUF_H);
        u->dst = BUF_H, u->src = BUF_H, u->src2 = BUF_T;
        for_rows(u, L, add_row);
        LN(BUF_A, BUF_H, g1, b1);
        progress(u, "norm1", w_ln / 2);
        CERT("norm1", BUF_A);
        u->src = BUF_A;
        for_rows_w(u, L, ffn_row, "ffn", w_ffn);
        CERT("ffn", BUF_T);
        u->dst = BUF_T, u->src = BUF_A, u->src2 = BUF_T;
        for_rows(u, L, add_row);
        LN(BUF_H, BUF_T, g2, b2);
        progress(u, "norm2", w_ln / 2);
        CERT("norm2", BUF_H);
        CERT("output", BUF_H);
    }
#undef LN
#undef CERT
#undef ATTENTION
    return 1;
}

/* Adds table rows to h in both lanes: row ids[l] of `src` (V, D) goes into
 * the table's row l, then h[l,:] += table[l,:] (refenc_mpk_embedding_add). */
static void embed_add_rows(unit_ctx *u, const double *src, const int64_t *ids)
{
    const size_t L = u->L, D = u->D;
    for (size_t l = 0; l < L; l++)
        refenc_mp_set_d(u->table + l * D, src + (size_t)ids[l] * D, D);
    for (int li = 0; li < 2; li++) {
        lane *ln = &u->lanes[li];
        mpfr_clear_inexflag();
        refenc_mpk_embedding_add(ln->h, ln->exact, ln->h, u->rows, u->table, 1, L, D);
        ln->inexact |= mpfr_inexflag_p() != 0;
    }
}

/* h = the item's embedding, in the order of refenc_mpk_encoder_forward: the
 * token rows (scaled by sqrt D, or not) or the given x; the token types'
 * rows; the positional encoding (sinusoidal, learned rows at the positions
 * or at RoBERTa's ids); the embedding LayerNorm.  Both lanes; "embed"
 * certified. */
static int run_embed(unit_ctx *u)
{
    const refenc_config *cfg = u->cfg;
    const refenc_input *in = u->run->in;
    const refenc_params *p = u->run->params;
    const size_t L = u->L, D = u->D;
    /* the rows of the tables this item reads, exactly at 53 bits */
    if (cfg->vocab_size > 0)
        for (size_t l = 0; l < L; l++)
            refenc_mp_set_d(u->table + l * D, p->embedding + (size_t)in->tokens[u->item * L + l] * D, D);
    for (int li = 0; li < 2; li++) {
        lane *ln = &u->lanes[li];
        refenc_mp_ws *ws = &u->workers[0].ws[li];
        mpfr_clear_inexflag();
        if (cfg->vocab_size > 0 && cfg->scale_embedding) {
            refenc_mpk_embedding_forward(ln->h, ln->exact, u->rows, u->table, 1, L, D, ws);
        } else if (cfg->vocab_size > 0) {
            refenc_mpk_embedding_lookup(ln->h, ln->exact, u->rows, u->table, 1, L, D);
        } else {
            refenc_mp_set_d(ln->h, in->x + u->item * L * D, L * D); /* exact: p >= 53 */
            memset(ln->exact, 1, L * D);
        }
        ln->inexact |= mpfr_inexflag_p() != 0;
    }
    if (cfg->type_vocab_size > 0) /* without token types every type is 0 (u->zeros) */
        embed_add_rows(u, p->token_type_embedding, in->token_types ? in->token_types + u->item * L : u->zeros);
    if (cfg->positional == REFENC_POS_LEARNED && cfg->position_ids == REFENC_POSIDS_ROBERTA) {
        refenc_mpk_position_ids_roberta(u->ids, in->tokens + u->item * L, 1, L, cfg->padding_idx);
        embed_add_rows(u, p->pos_embedding, u->ids);
    } else {
        if (cfg->positional == REFENC_POS_LEARNED)
            for (size_t l = 0; l < L; l++)
                refenc_mp_set_d(u->table + l * D, p->pos_embedding + (size_t)u->pos[l] * D, D);
        for (int li = 0; li < 2; li++) {
            lane *ln = &u->lanes[li];
            refenc_mp_ws *ws = &u->workers[0].ws[li];
            mpfr_clear_inexflag();
            if (cfg->positional == REFENC_POS_SINUSOIDAL)
                refenc_mpk_sinusoidal_forward(ln->h, ln->exact, ln->h, u->pos, 1, L, D, ws);
            else if (cfg->positional == REFENC_POS_LEARNED)
                refenc_mpk_learned_pe_forward(ln->h, ln->exact, ln->h, u->rows, u->table, 1, L, D);
            ln->inexact |= mpfr_inexflag_p() != 0;
        }
    }
    if (cfg->embedding_norm) {
        mpfr_ptr g = u->table, b = u->table + D; /* the table's first rows: no longer needed */
        refenc_mp_set_d(g, p->embedding_norm_weight, D);
        refenc_mp_set_d(b, p->embedding_norm_bias, D);
        for (int li = 0; li < 2; li++) {
            lane *ln = &u->lanes[li];
            mpfr_clear_inexflag();
            refenc_mpk_layernorm_forward(ln->h, ln->h, g, b, L, D, u->emb_eps, &u->workers[0].ws[li]);
            memset(ln->exact, 0, L * D); /* computed: certified as any other value */
            ln->inexact |= mpfr_inexflag_p() != 0;
        }
    }
    const size_t shape[2] = {L, D};
    if (!certify(u, "embed", u->lanes[0].h, u->lanes[1].h, L * D, u->lanes[1].exact, 2, shape))
        return 0;
    progress(u, "embed", 0);
    return 1;
}

/* The final LayerNorm (if any) and "output". */
static int run_final(unit_ctx *u, const mpfr_ptr final_ln)
{
    const size_t L = u->L, D = u->D;
    if (u->cfg->final_norm) {
        u->dst = BUF_A, u->src = BUF_H, u->gamma = final_ln, u->beta = final_ln + D;
        for_rows(u, L, layernorm_row);
        if (!certify_ld(u, "norm", BUF_A) || !certify_ld(u, "output", BUF_A))
            return 0;
    } else if (!certify_ld(u, "output", BUF_H)) {
        return 0;
    }
    progress(u, "output", 0);
    return 1;
}

/* ---- memory ------------------------------------------------------------------------------ */

static size_t mp_bytes(size_t n, mpfr_prec_t p)
{
    return n * (sizeof(__mpfr_struct) + 8 * (((size_t)p + 63) / 64));
}

static void lane_free(lane *ln, size_t LD, size_t H)
{
    refenc_mp_free(ln->h, LD);
    refenc_mp_free(ln->a, LD);
    refenc_mp_free(ln->t, LD);
    refenc_mp_free(ln->q, LD);
    refenc_mp_free(ln->k, LD);
    refenc_mp_free(ln->v, LD);
    refenc_mp_free(ln->ctx, LD);
    refenc_mp_free(ln->slopes, H);
    free(ln->exact);
    memset(ln, 0, sizeof *ln);
}

static int lane_alloc(lane *ln, size_t LD, size_t H, mpfr_prec_t p)
{
    memset(ln, 0, sizeof *ln);
    ln->p = p;
    ln->h = refenc_mp_alloc(LD, p);
    ln->a = refenc_mp_alloc(LD, p);
    ln->t = refenc_mp_alloc(LD, p);
    ln->q = refenc_mp_alloc(LD, p);
    ln->k = refenc_mp_alloc(LD, p);
    ln->v = refenc_mp_alloc(LD, p);
    ln->ctx = refenc_mp_alloc(LD, p);
    ln->slopes = refenc_mp_alloc(H, p);
    ln->exact = malloc(LD);
    return ln->h && ln->a && ln->t && ln->q && ln->k && ln->v && ln->ctx && ln->slopes && ln->exact;
}

static void worker_free(worker *w, const unit_ctx *u)
{
    for (int li = 0; li < 2; li++) {
        refenc_mp_ws_free(&w->ws[li]);
        refenc_mp_free(w->weights[li], u->L * u->L);
        refenc_mp_free(w->out[li], u->L * u->Dh);
        refenc_mp_free(w->hidden[li], u->F);
    }
    mpfr_clear(w->t);
    mpfr_clear(w->u);
}

static int worker_alloc(worker *w, const unit_ctx *u)
{
    memset(w, 0, sizeof *w);
    mpfr_init2(w->t, 64);
    mpfr_init2(w->u, 64);
    int ok = 1;
    for (int li = 0; li < 2; li++) {
        const mpfr_prec_t p = u->lanes[li].p;
        ok &= refenc_mp_ws_alloc(&w->ws[li], p, refenc_mpk_ws_tmp(u->D, u->F, u->L, u->Dh),
                                 refenc_mpk_ws_ptr(u->D, u->F, u->L, u->Dh)) == REFENC_OK;
        ok &= (w->weights[li] = refenc_mp_alloc(u->L * u->L, p)) != NULL;
        ok &= (w->out[li] = refenc_mp_alloc(u->L * u->Dh, p)) != NULL;
        ok &= (w->hidden[li] = refenc_mp_alloc(u->F, p)) != NULL;
    }
    return ok;
}

size_t refenc_mp_encoder_run_bytes(const refenc_config *cfg, size_t L, int threads, mpfr_prec_t prec)
{
    const size_t D = cfg->d_model, H = cfg->n_heads, F = cfg->d_ff, Dh = D / H;
    const mpfr_prec_t p[2] = {prec, refenc_mp_next_prec(prec, 0)};
    const double LD = (double)L * D;
    double bytes = 0;
    for (int li = 0; li < 2; li++) {
        bytes += (double)mp_bytes(1, p[li]) * (7 * LD + H);              /* the lane */
        bytes += LD;                                                       /* exact flags */
        const double ws_tmp = (double)refenc_mpk_ws_tmp(D, F, L, Dh), ws_ptr = (double)refenc_mpk_ws_ptr(D, F, L, Dh);
        const double per_thread = (double)mp_bytes(1, p[li]) * ((double)L * L + (double)L * Dh + F + ws_tmp) +
                                  (double)mp_bytes(1, 2 * p[li]) * ws_ptr + ws_ptr * (8 + 3 * sizeof(refenc_mp_operand)) +
                                  ws_ptr * 8 * (double)((p[li] + 63) / 64 + 2); /* the row for fixed-point weights */
        bytes += threads * per_thread;
    }
    bytes += 8 * fmax(LD, (double)H * L * L); /* a step's doubles */
    bytes += 8 * (4.0 * D * D + 2.0 * D * F);  /* a layer's weights in fixed point */
    bytes += (double)mp_bytes(1, 53) * (LD + 4 * D + (double)L * L);      /* tables, LayerNorms, mask */
    return bytes > (double)(SIZE_MAX / 2) ? 0 : (size_t)bytes;
}

size_t refenc_mp_encoder_units(const refenc_config *cfg, size_t B, int per_layer)
{
    return per_layer ? cfg->n_layers * B : B;
}

double refenc_mp_encoder_unit_work(const refenc_config *cfg, size_t L, int per_layer, size_t layer)
{
    (void)layer;
    return per_layer ? layer_work(cfg, L) : (double)cfg->n_layers * layer_work(cfg, L);
}

/* ---- a unit at one pair of precisions ------------------------------------------------------ */

static int layer_mp_init(layer_mp *lm, const refenc_layer_params *lp, size_t D, size_t F)
{
    lm->lp = lp;
    lm->ln = refenc_mp_alloc(4 * D, 53);
    if (lm->ln == NULL)
        return 0;
    refenc_mp_set_d(lm->ln, lp->norm1_weight, D);
    refenc_mp_set_d(lm->ln + D, lp->norm1_bias, D);
    refenc_mp_set_d(lm->ln + 2 * D, lp->norm2_weight, D);
    refenc_mp_set_d(lm->ln + 3 * D, lp->norm2_bias, D);
    refenc_mp_wspan_of(&lm->in_span, lp->in_proj_weight, 3 * D * D, lp->in_proj_bias, 3 * D);
    refenc_mp_wspan_of(&lm->out_span, lp->out_proj_weight, D * D, lp->out_proj_bias, D);
    refenc_mp_wspan_of(&lm->l1_span, lp->linear1_weight, F * D, lp->linear1_bias, F);
    refenc_mp_wspan_of(&lm->l2_span, lp->linear2_weight, D * F, lp->linear2_bias, D);
    /* the weights in fixed point, for all the rows' dot products; without
     * the memory for them, the same sums are made the slower way */
    (void)refenc_mp_wspan_fix(&lm->in_span, lp->in_proj_weight, 3 * D, D);
    (void)refenc_mp_wspan_fix(&lm->out_span, lp->out_proj_weight, D, D);
    (void)refenc_mp_wspan_fix(&lm->l1_span, lp->linear1_weight, F, D);
    (void)refenc_mp_wspan_fix(&lm->l2_span, lp->linear2_weight, D, F);
    return 1;
}

static void layer_mp_free(layer_mp *lm, size_t D)
{
    refenc_mp_free(lm->ln, 4 * D);
    lm->ln = NULL;
    refenc_mp_wspan_unfix(&lm->in_span);
    refenc_mp_wspan_unfix(&lm->out_span);
    refenc_mp_wspan_unfix(&lm->l1_span);
    refenc_mp_wspan_unfix(&lm->l2_span);
}

/* Runs unit (first layer .. last layer, item) with lanes at p_lo and p_hi.
 * Returns REFENC_OK with *certified 1, or 0 (evaluate again), or an error. */
static int run_unit(unit_ctx *u, size_t first, size_t last, int per_layer, mpfr_prec_t p_lo,
                    mpfr_prec_t p_hi, int *certified, refenc_error *err)
{
    const size_t L = u->L, D = u->D, H = u->H, LD = L * D;
    const refenc_config *cfg = u->cfg;
    int st = REFENC_OK, ok = 1;
    *certified = 0;
    u->failed = 0;
    memset(u->workers, 0, (size_t)u->threads * sizeof *u->workers);
    int alloc = lane_alloc(&u->lanes[0], LD, H, p_lo) & lane_alloc(&u->lanes[1], LD, H, p_hi);
    int n_workers = 0;
    for (; alloc && n_workers < u->threads; n_workers++)
        alloc &= worker_alloc(&u->workers[n_workers], u);
    mpfr_ptr final_ln = cfg->final_norm && last == cfg->n_layers - 1 ? refenc_mp_alloc(2 * D, 53) : NULL;
    layer_mp lm = {0};
    if (!alloc || (cfg->final_norm && last == cfg->n_layers - 1 && final_ln == NULL)) {
        st = refenc_mp_enomem(err, "one batch item", p_hi);
        goto done;
    }
    if (final_ln != NULL) {
        refenc_mp_set_d(final_ln, u->run->params->norm_weight, D);
        refenc_mp_set_d(final_ln + D, u->run->params->norm_bias, D);
    }
    for (int li = 0; li < 2; li++)
        u->lanes[li].inexact = 0;

    if (first == 0)
        ok = run_embed(u);
    if (ok && per_layer) { /* the layer's input is the stored double, exactly */
        for (int li = 0; li < 2; li++) {
            refenc_mp_set_d(u->lanes[li].h, u->run->layer_inputs[first] + u->item * LD, LD);
            u->lanes[li].inexact = 0;
        }
    }
    for (int li = 0; ok && li < 2; li++) {
        mpfr_clear_inexflag();
        refenc_mpk_alibi_slopes(u->lanes[li].slopes, H, &u->workers[0].ws[li]);
        u->lanes[li].inexact |= mpfr_inexflag_p() != 0;
    }
    for (size_t i = first; ok && i <= last; i++) {
        if (!layer_mp_init(&lm, &u->run->params->layers[i], D, u->F)) {
            st = refenc_mp_enomem(err, "a layer's LayerNorms", 53);
            goto done;
        }
        ok = run_layer(u, &lm, i);
        layer_mp_free(&lm, D);
    }
    if (ok && last == cfg->n_layers - 1)
        ok = run_final(u, final_ln);
    *certified = ok;
done:
    refenc_mp_free(final_ln, 2 * D);
    for (int t = 0; t < n_workers; t++)
        worker_free(&u->workers[t], u);
    lane_free(&u->lanes[0], LD, H);
    lane_free(&u->lanes[1], LD, H);
    return st;
}

int refenc_mp_encoder_run(const refenc_mp_run *run, refenc_mp_report *rep)
{
    refenc_mp_report local;
    if (rep == NULL)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    refenc_error *err = &rep->error;
    const refenc_config *cfg = run->cfg;
    int st = refenc_input_validate(run->in, cfg, err);
    if (st != REFENC_OK)
        return st;
    const int per_layer = run->layer_inputs != NULL;
    const size_t units = refenc_mp_encoder_units(cfg, run->in->B, per_layer);
    if (run->unit_begin > run->unit_end || run->unit_end > units || run->threads < 1)
        return refenc_error_set(err, REFENC_EINVAL, "oracle: units [%zu, %zu) of %zu, %d threads",
                                run->unit_begin, run->unit_end, units, run->threads);
    if (run->prec < REFENC_MP_PREC_MIN || run->prec > REFENC_MP_PREC_MAX)
        return refenc_error_set(err, REFENC_EINVAL, "oracle: precision %ld bits is outside [%ld, %ld]",
                                (long)run->prec, (long)REFENC_MP_PREC_MIN, (long)REFENC_MP_PREC_MAX);

    unit_ctx u;
    memset(&u, 0, sizeof u);
    u.run = run;
    u.cfg = cfg;
    u.B = run->in->B, u.L = run->in->L, u.D = cfg->d_model, u.H = cfg->n_heads, u.F = cfg->d_ff;
    u.Dh = u.D / u.H, u.N = cfg->n_layers;
    u.threads = run->threads;
    u.units = units;
    const size_t L = u.L, D = u.D;
    int64_t *pos_default = refenc_alloc_array(L, sizeof *pos_default);
    u.rows = refenc_alloc_array(L, sizeof *u.rows);
    u.workers = refenc_alloc_array((size_t)u.threads, sizeof *u.workers);
    u.dbl = refenc_alloc_array(L * D > u.H * L * L ? L * D : u.H * L * L, sizeof *u.dbl);
    u.eps = refenc_mp_from_d(&cfg->layer_norm_eps, 1, 53);
    u.tau = refenc_mp_from_d(&cfg->temperature, 1, 53);
    u.base = refenc_mp_from_d(&cfg->rope_base, 1, 53);
    u.mask = run->in->attn_mask ? refenc_mp_from_d(run->in->attn_mask, L * L, 53) : NULL;
    u.emb_eps = refenc_mp_from_d(&cfg->embedding_norm_eps, 1, 53);
    u.table = refenc_mp_alloc((L > 2 ? L : 2) * D, 53); /* 2 rows at least: the embedding norm's weight, bias */
    u.zeros = calloc(L, sizeof *u.zeros);
    u.ids = refenc_alloc_array(L, sizeof *u.ids);
    if (!pos_default || !u.rows || !u.workers || !u.dbl || !u.eps || !u.tau || !u.base ||
        (run->in->attn_mask && !u.mask) || !u.emb_eps || !u.table || !u.zeros || !u.ids) {
        st = refenc_mp_enomem(err, "the encoder run", 53);
        goto done;
    }
    for (size_t l = 0; l < L; l++)
        pos_default[l] = u.rows[l] = (int64_t)l;
    u.pos = run->in->positions != NULL ? run->in->positions : pos_default;
    for (size_t k = run->unit_begin; k < run->unit_end; k++)
        u.total += refenc_mp_encoder_unit_work(cfg, L, per_layer, per_layer ? k / u.B : 0);

    /* the caller's MPFR flags are restored on return */
    const mpfr_flags_t saved = mpfr_flags_save();
    rep->evaluations = 2;
    for (size_t k = run->unit_begin; k < run->unit_end && st == REFENC_OK; k++) {
        const size_t first = per_layer ? k / u.B : 0, last = per_layer ? first : u.N - 1;
        u.item = k % u.B;
        u.unit = k;
        mpfr_prec_t p_lo = run->prec;
        const double done0 = u.done;
        for (unsigned step = 0;; step++) {
            const mpfr_prec_t p_hi = refenc_mp_next_prec(p_lo, step);
            if (p_hi > REFENC_MP_PREC_MAX) {
                st = refenc_error_set(err, REFENC_ELIMIT, "%s", u.fail);
                break;
            }
            int certified;
            u.done = done0;
            if ((st = run_unit(&u, first, last, per_layer, p_lo, p_hi, &certified, err)) != REFENC_OK)
                break;
            if (certified) {
                if (p_lo > rep->prec)
                    rep->prec = p_lo;
                if (p_hi > rep->prec_check)
                    rep->prec_check = p_hi;
                if (step + 2 > rep->evaluations)
                    rep->evaluations = step + 2;
                break;
            }
            p_lo = p_hi;
        }
    }
    mpfr_flags_restore(saved, MPFR_FLAGS_ALL);
    /* MPFR's caches (constants, exp's tables) are per thread: the threads'
     * are freed here, not left to outlive the run */
#pragma omp parallel num_threads(u.threads)
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
done:
    free(pos_default);
    free(u.rows);
    free(u.workers);
    free(u.dbl);
    refenc_mp_free(u.eps, 1);
    refenc_mp_free(u.tau, 1);
    refenc_mp_free(u.base, 1);
    refenc_mp_free(u.mask, L * L);
    refenc_mp_free(u.emb_eps, 1);
    refenc_mp_free(u.table, (L > 2 ? L : 2) * D);
    free(u.zeros);
    free(u.ids);
    return st;
}
