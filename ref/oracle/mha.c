/* Multi-head self-attention in MPFR (mha.h), nn.MultiheadAttention layouts,
 * one batch item on the engine (engine.h):
 *   q = x W_q^T + b_q, k = x W_k^T + b_k, v = x W_v^T + b_v   (in_proj blocks)
 *   q, k per head RMS-normalised (qk_norm 'rms', Qwen3), then rotated by RoPE
 *   (scheme rope);  ctx_h = attention(q_h, k_h, v_h)
 *   y = concat_h(ctx_h) W_o^T + b_o
 * Rows go to the threads for the projections, heads for the attention. */
#include "engine.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Which projections a row computes, from which buffer. */
typedef struct {
    int src;
    size_t lo, hi; /* in_proj's rows [lo, hi): [0, E) q, [E, E + 2 Ekv) k and v */
} proj_arg;

/* q, k, v of row r: x[r,:] (in_proj_weight)^T + in_proj_bias, split into
 * heads: q[h, r, d] = (x W_q^T + b_q)[r, h Dh + d] over the E = H Dh rows of
 * W_q, k and v the same over the Ekv = Hkv Dh rows of W_k, W_v after it.
 * q holds L rows (the query rows), k and v Lseq (every position). */
static void proj_row(refenc_mpe_unit *u, int li, size_t r, refenc_mpe_worker *w, const void *arg)
{
    const proj_arg *a = arg;
    refenc_mpe_lane *ln = &u->lanes[li];
    const size_t D = u->D, L = u->L, Lk = u->Lseq, Dh = u->Dh, E = u->E, Ekv = u->Hkv * u->Dh;
    const refenc_layer_params *lp = u->lm->lp;
    mpfr_srcptr x_r = refenc_mpe_buf(u, li, a->src) + r * D;
    refenc_mp_row_load(&w->ws[li], x_r, D);
    for (size_t o = a->lo; o < a->hi; o++) {
        const size_t which = o < E ? 0 : o < E + Ekv ? 1 : 2;
        const size_t j = which == 0 ? o : (o - E) % Ekv, h = j / Dh, d = j % Dh;
        mpfr_ptr dest = which == 0 ? ln->q + (h * L + r) * Dh + d
                                   : (which == 1 ? ln->k : ln->v) + (h * Lk + r) * Dh + d;
        refenc_mp_dot_row_d(dest, x_r, lp->in_proj_weight + o * D, REFENC_MP_BIAS_AT(lp->in_proj_bias, o), o,
                            &u->lm->in_span, &w->ws[li]);
    }
}

/* t[r,:] = ctx[r,:] (out_proj.weight)^T + out_proj.bias;  ctx (L, E), W_o (D, E) */
static void out_proj_row(refenc_mpe_unit *u, int li, size_t r, refenc_mpe_worker *w, const void *arg)
{
    (void)arg;
    refenc_mpe_lane *ln = &u->lanes[li];
    const size_t D = u->D, E = u->E;
    const refenc_layer_params *lp = u->lm->lp;
    mpfr_srcptr x_r = ln->ctx + r * E;
    refenc_mp_row_load(&w->ws[li], x_r, E);
    for (size_t o = 0; o < D; o++)
        refenc_mp_dot_row_d(ln->t + r * D + o, x_r, lp->out_proj_weight + o * E, REFENC_MP_BIAS_AT(lp->out_proj_bias, o), o,
                            &u->lm->out_span, &w->ws[li]);
}

/* The oracle's own reading of the layer patterns (the reference's is
 * layer_pattern.c).  ModernBERT's global_attn_every_n_layers = n: the global
 * layers are the multiples of n, 0 n, 1 n, 2 n, ...  Gemma 3's
 * sliding_window_pattern = p: every p-th layer counted from 1, the layers
 * p - 1, 2 p - 1, ...  A global layer has no window and the global base; a
 * local layer of Gemma 3's pattern rotates without rope_scaling.  Only the
 * encoder's layers follow a pattern: a one-block run is the block without a
 * layer. */
static int has_pattern(const refenc_mpe_unit *u)
{
    return (u->cfg->global_attn_every_n_layers != 0 || u->cfg->sliding_window_pattern != 0) &&
           u->run->block == REFENC_MP_BLOCK_ENCODER;
}

static int layer_is_global(const refenc_mpe_unit *u)
{
    const size_t n = u->cfg->global_attn_every_n_layers, p = u->cfg->sliding_window_pattern;
    if (!has_pattern(u))
        return 0;
    if (p != 0)
        return ((u->layer + 1) / p) * p == u->layer + 1;
    return (u->layer / n) * n == u->layer;
}

static mpfr_srcptr layer_base(const refenc_mpe_unit *u)
{
    if (!has_pattern(u))
        return u->base;
    return layer_is_global(u) ? u->base_global : u->base_local;
}

/* The scaling of this layer's rotation: none on Gemma 3's local layers
 * (unless the bug variant rope_scaling_on_local_layers asks for it). */
static const refenc_rope_scaling *layer_scaling(const refenc_mpe_unit *u)
{
    const int local_unscaled = has_pattern(u) && u->cfg->sliding_window_pattern != 0 && !layer_is_global(u);
    if (local_unscaled && !(u->run->hooks != NULL && u->run->hooks->rope_scaling_on_local_layers))
        return NULL;
    return &u->cfg->rope_scaling;
}

/* RoPE on every head of q (task 0) or k (task 1) of lane li. */
static void rope_row(refenc_mpe_unit *u, int li, size_t task, refenc_mpe_worker *w, const void *arg)
{
    (void)arg;
    refenc_mpe_lane *ln = &u->lanes[li];
    mpfr_ptr x = task ? ln->k : ln->q;
    if (task == 0 && u->qrows != NULL) /* the selected query rows, at their positions */
        refenc_mpk_rope_rows_forward(x, x, u->pos, u->qrows, u->H, u->L, u->Lseq, u->Dh, layer_base(u),
                                     u->cfg->rope_layout, layer_scaling(u), &w->ws[li]);
    else
        refenc_mpk_rope_forward(x, x, u->pos, task ? u->Hkv : u->H, task ? u->Lseq : u->L, u->Dh, layer_base(u),
                                u->cfg->rope_layout, layer_scaling(u), &w->ws[li]);
}

/* The bug variant qk_norm_over_all_heads: each row l of x (nh, L, Dh)
 * normalised over its nh Dh values (OLMo-2's q_norm width), the (Dh)
 * weight wt repeated on every head.  Working precision: a variant's values
 * are rounded once, never certified. */
static void rms_over_heads(mpfr_ptr x, mpfr_srcptr wt, size_t nh, size_t L, size_t Dh, mpfr_srcptr eps,
                           int offset, refenc_mp_ws *ws)
{
    mpfr_ptr r = ws->tmp, t = ws->tmp + 1;
    for (size_t l = 0; l < L; l++) {
        mpfr_set_zero(r, 1);
        for (size_t h = 0; h < nh; h++)
            for (size_t d = 0; d < Dh; d++) {
                mpfr_sqr(t, x + (h * L + l) * Dh + d, MPFR_RNDN);
                mpfr_add(r, r, t, MPFR_RNDN);
            }
        mpfr_div_ui(r, r, nh * Dh, MPFR_RNDN);
        mpfr_add(r, r, eps, MPFR_RNDN);
        mpfr_sqrt(r, r, MPFR_RNDN);
        for (size_t h = 0; h < nh; h++)
            for (size_t d = 0; d < Dh; d++) {
                mpfr_ptr v = x + (h * L + l) * Dh + d;
                mpfr_div(v, v, r, MPFR_RNDN);
                if (offset) {
                    mpfr_add_ui(t, wt + d, 1, MPFR_RNDN);
                    mpfr_mul(v, v, t, MPFR_RNDN);
                } else {
                    mpfr_mul(v, v, wt + d, MPFR_RNDN);
                }
            }
    }
}

/* Qwen3's q_norm (task 0) on every query head or k_norm (task 1) on every
 * key/value head of lane li: the RMSNorm twin (rmsnorm.c) on the rows of
 * (heads, L, Dh), eps layer_norm_eps, the layer's (Dh) weight shared by the
 * heads (qk_norm.h). */
static void qk_norm_row(refenc_mpe_unit *u, int li, size_t task, refenc_mpe_worker *w, const void *arg)
{
    (void)arg;
    refenc_mpe_lane *ln = &u->lanes[li];
    mpfr_ptr x = task ? ln->k : ln->q;
    const size_t nh = task ? u->Hkv : u->H;
    mpfr_srcptr wt = u->lm->qkn + task * u->Dh;
    const size_t L = task ? u->Lseq : u->L; /* k: every position; q: the query rows */
    if (u->run->hooks != NULL && u->run->hooks->qk_norm_over_all_heads)
        rms_over_heads(x, wt, nh, L, u->Dh, u->eps, u->cfg->rmsnorm_offset, &w->ws[li]);
    else
        refenc_mpk_rmsnorm_forward(x, x, wt, nh * L, u->Dh, u->eps, u->cfg->rmsnorm_offset, &w->ws[li]);
}

/* fn on task first + t of every lane, t < n: q (task 0) and k (task 1). */
typedef struct {
    refenc_mpe_row_fn fn;
    size_t first;
} task_arg;

static void task_row(refenc_mpe_unit *u, int li, size_t t, refenc_mpe_worker *w, const void *arg)
{
    const task_arg *a = arg;
    a->fn(u, li, a->first + t, w, NULL);
}

/* q and/or k (tasks first .. first + n - 1: 0 q, 1 k) normalised (qk_norm
 * 'rms') and rotated (RoPE): the norms first, as Qwen3Attention; after the
 * rotation for the bug variant qk_norm_after_rope. */
static void qk_transforms(refenc_mpe_unit *u, size_t first, size_t n)
{
    const int norm = u->lm->qkn != NULL; /* the layer has q_norm, k_norm: qk_norm 'rms' */
    const int late = u->run->hooks != NULL && u->run->hooks->qk_norm_after_rope;
    const task_arg an = {qk_norm_row, first}, ar = {rope_row, first};
    if (norm && !late)
        refenc_mpe_rows(u, n, task_row, &an, NULL, 0);
    if (u->cfg->positional == REFENC_POS_ROPE)
        refenc_mpe_rows(u, n, task_row, &ar, NULL, 0);
    if (norm && late)
        refenc_mpe_rows(u, n, task_row, &an, NULL, 0);
}

/* What the heads report: the first weight of the item not certified
 * (SIZE_MAX: none), and which lanes saw an inexact operation. */
typedef struct {
    const char *step;
    int want, was_inexact;
    int inexact[2];    /* per lane: an inexact operation in some head */
    size_t first;
} heads_arg;

/* Head h of every lane: its scores, weights and context (attention.c),
 * moved into ctx -- at ctx[l, h Dh + d], or, for the bug variant
 * merge_without_transpose, where the memory of (H, L, Dh) read as (L, D)
 * puts it -- and its weights certified into the step's doubles. */
static void head(refenc_mpe_unit *u, size_t h, refenc_mpe_worker *w, void *arg)
{
    heads_arg *a = arg;
    const size_t L = u->L, Lk = u->Lseq, Dh = u->Dh, D = u->E; /* L query rows, Lk keys; ctx's width E */
    /* query head h reads key/value head h / g, g = H / Hkv (gqa.h); the bug
     * variant gqa_tiled reads h % Hkv */
    const int tiled = u->run->hooks != NULL && u->run->hooks->gqa_tiled;
    const size_t kv = tiled ? h % u->Hkv : h / (u->H / u->Hkv);
    const refenc_input *in = u->run->in;
    const int flat = u->run->hooks != NULL && u->run->hooks->merge_without_transpose;
    /* T5's table: layer 0's for every layer; the bug variant t5_bias_per_layer
     * gives the later layers none (only block 0 has relative_attention_bias) */
    const int own = u->run->hooks != NULL && u->run->hooks->t5_bias_per_layer;
    const double *t5 = own && u->layer > 0 ? NULL : u->run->params->layers[0].relative_attention_bias;
    int inexact[2] = {0, 0};
    REFENC_MPE_LANES(u, li) {
        refenc_mpe_lane *ln = &u->lanes[li];
        const refenc_mp_attn_options opt = {
            .key_padding_mask = in->key_padding_mask ? in->key_padding_mask + u->item * Lk : NULL,
            .causal = u->cfg->causal, .attn_mask = u->mask,
            .alibi_slopes = u->cfg->positional == REFENC_POS_ALIBI ? ln->slopes + h : NULL,
            .positions = u->pos, .temperature = u->tau, .mask_value = u->cfg->mask_value,
            .score_scalar = u->scalar, .softcap = u->cap,
            .cap_after_mask = u->run->hooks != NULL && u->run->hooks->softcap_after_mask,
            .sliding_window = layer_is_global(u) ? 0 : u->cfg->sliding_window,
            .local_attention = layer_is_global(u) ? 0 : u->cfg->local_attention,
            .relative_bias = t5 != NULL ? t5 + h : NULL, .relative_stride = u->H, /* column h as head 0 */
            .relative_num_buckets = u->cfg->relative_attention_num_buckets,
            .relative_max_distance = u->cfg->relative_attention_max_distance,
            .relative_unclamped = u->run->hooks != NULL && u->run->hooks->t5_bucket_not_clamped};
        mpfr_clear_inexflag();
        refenc_mpk_attention_rows_forward(w->out[li], w->weights[li], ln->q + h * L * Dh, ln->k + kv * Lk * Dh,
                                          ln->v + kv * Lk * Dh, u->qrows, &opt, 1, 1, L, Lk, Dh, &w->ws[li]);
        inexact[li] = mpfr_inexflag_p() != 0;
        for (size_t l = 0; l < L; l++) /* moved, not copied */
            for (size_t d = 0; d < Dh; d++)
                mpfr_swap(ln->ctx + (flat ? (h * L + l) * Dh + d : l * D + h * Dh + d), w->out[li] + l * Dh + d);
    }
    const int exact = !a->was_inexact && !inexact[u->lanes_n - 1];
    for (size_t i = 0; a->want && i < L * Lk; i++) {
        mpfr_srcptr v[2] = {w->weights[0] + i, w->weights[u->lanes_n - 1] + i};
        if (!refenc_mpe_value(u, w, v, exact, u->dbl + h * L * Lk + i)) {
#pragma omp critical(refenc_mpe_heads_first)
            a->first = h * L * Lk + i < a->first ? h * L * Lk + i : a->first;
            break;
        }
    }
#pragma omp critical(refenc_mpe_heads_inexact)
    a->inexact[0] |= inexact[0], a->inexact[1] |= inexact[1];
}

/* Every head; the weights certified as `step`.  0 if one is not. */
static int heads(refenc_mpe_unit *u, const char *step)
{
    const size_t L = u->L, H = u->H;
    heads_arg a = {step, refenc_mpe_wanted(u, step), u->lanes[u->lanes_n - 1].inexact, {0, 0}, SIZE_MAX};
    refenc_mpe_heads(u, head, &a);
    u->lanes[0].inexact |= a.inexact[0];
    u->lanes[1].inexact |= a.inexact[1];
    if (a.first != SIZE_MAX) {
        u->failed = 1;
        snprintf(u->fail, sizeof u->fail,
                 "oracle: the rounding of %s[%zu] of batch item %zu is not certified at %ld and %ld "
                 "bits; no precision up to %ld bits certified it",
                 step, a.first, u->item, (long)u->lanes[0].p, (long)u->lanes[1].p, (long)REFENC_MP_PREC_MAX);
        return 0;
    }
    if (a.want) {
        const size_t shape[3] = {H, L, u->Lseq}; /* (H, R, L) after the rows' selection */
        u->run->emit(u->run->emit_ctx, step, u->item, u->dbl, 3, shape);
    }
    return 1;
}

/* rows[r] of buffer `which` of every lane moved to row r (W values a row):
 * rows increase, so rows[r] >= r and a row is read before it is written. */
static void gather_rows(refenc_mpe_unit *u, int which, size_t W, const int64_t *rows, size_t R)
{
    REFENC_MPE_LANES(u, li) {
        mpfr_ptr x = refenc_mpe_buf(u, li, which);
        for (size_t r = 0; r < R; r++)
            for (size_t d = 0; rows[r] != (int64_t)r && d < W; d++)
                mpfr_swap(x + r * W + d, x + (size_t)rows[r] * W + d);
    }
}

int refenc_mpe_select_rows(refenc_mpe_unit *u, int src)
{
    const refenc_input *in = u->run->in;
    const double L = (double)u->L, D = (double)u->D, Ekv = (double)(u->Hkv * u->Dh);
    const proj_arg kv = {src, u->E, u->E + 2 * u->Hkv * u->Dh};
    if (!refenc_mpe_block_weights(u, 0, 1)) /* in_proj in fixed point, for k and v here */
        return 0;
    refenc_mpe_rows(u, u->L, proj_row, &kv, "k, v", L * 2 * Ekv * D); /* every position */
    refenc_mpe_block_weights(u, 0, 0); /* the attention takes it again for q */
    qk_transforms(u, 1, 1);            /* k's norm and rotation */
    gather_rows(u, src, u->D, in->rows, in->R);
    if (src != MPE_H) /* the residual's rows too */
        gather_rows(u, MPE_H, u->D, in->rows, in->R);
    u->L = in->R;
    u->qrows = in->rows;
    u->kv_ready = 1;
    return 1;
}

int refenc_mpe_mha(refenc_mpe_unit *u, int src, const char *weights_step, const char *out_step)
{
    const double L = (double)u->L, D = (double)u->D, H = (double)u->H, Dh = (double)u->Dh;
    const double E = (double)u->E, R = E + 2 * (double)u->Hkv * Dh; /* in_proj's rows */
    if (!refenc_mpe_block_weights(u, 0, 1))
        return 0;
    if (u->kv_ready) { /* selected rows: k and v are there, the rows' queries only */
        const proj_arg q = {src, 0, u->E};
        refenc_mpe_rows(u, u->L, proj_row, &q, "q", L * E * D);
        qk_transforms(u, 0, 1);
    } else {
        const proj_arg qkv = {src, 0, u->E + 2 * u->Hkv * u->Dh};
        refenc_mpe_rows(u, u->L, proj_row, &qkv, "q, k, v", L * R * D);
        qk_transforms(u, 0, 2);
    }
    int ok = heads(u, weights_step);
    if (ok) {
        const double Lk = (double)u->Lseq;
        refenc_mpe_progress(u, weights_step, 2 * H * L * Lk * Dh + 60 * H * L * Lk);
        refenc_mpe_rows(u, u->L, out_proj_row, NULL, "out_proj", L * E * D);
    }
    refenc_mpe_block_weights(u, 0, 0);
    if (!ok)
        return 0;
    if (out_step == NULL) /* the caller normalises, then certifies (sandwich_norm) */
        return 1;
    if (!refenc_mpe_step_buf(u, out_step, MPE_T))
        return 0;
    refenc_mpe_progress(u, out_step, 0);
    return 1;
}

/* ---- the twin ------------------------------------------------------------------------------- */

int refenc_mp_mha_forward(double *y, double *weights, const double *x,
                          const double *in_proj_weight, const double *in_proj_bias,
                          const double *out_proj_weight, const double *out_proj_bias,
                          const refenc_attn_options *opt, const refenc_rope_options *rope,
                          size_t B, size_t L, size_t D, size_t H,
                          mpfr_prec_t prec, refenc_mp_report *rep)
{
    return refenc_mp_gqa_forward(y, weights, x, in_proj_weight, in_proj_bias, out_proj_weight,
                                 out_proj_bias, opt, rope, B, L, D, H, H, D / H, prec, rep);
}

int refenc_mp_gqa_forward(double *y, double *weights, const double *x,
                          const double *in_proj_weight, const double *in_proj_bias,
                          const double *out_proj_weight, const double *out_proj_bias,
                          const refenc_attn_options *opt, const refenc_rope_options *rope,
                          size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh,
                          mpfr_prec_t prec, refenc_mp_report *rep)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = D, cfg.n_heads = H, cfg.d_ff = 1, cfg.n_layers = 1;
    cfg.n_kv_heads = Hkv, cfg.head_dim = Dh;
    cfg.causal = opt->causal, cfg.temperature = opt->temperature, cfg.mask_value = opt->mask_value;
    cfg.query_pre_attn_scalar = opt->score_scalar, cfg.attn_logit_softcapping = opt->softcap;
    cfg.sliding_window = opt->sliding_window, cfg.local_attention = opt->local_attention;
    cfg.relative_attention_num_buckets = opt->relative_bias != NULL ? opt->relative_num_buckets : 0;
    cfg.relative_attention_max_distance = opt->relative_max_distance;
    cfg.positional = rope != NULL ? REFENC_POS_ROPE : opt->alibi_slopes != NULL ? REFENC_POS_ALIBI : REFENC_POS_NONE;
    if (rope != NULL)
        cfg.rope_layout = rope->layout, cfg.rope_base = rope->base;
    if (rope != NULL && rope->scaling != NULL)
        cfg.rope_scaling = *rope->scaling;
    refenc_layer_params lp = {.in_proj_weight = (double *)in_proj_weight, .in_proj_bias = (double *)in_proj_bias,
                              .out_proj_weight = (double *)out_proj_weight,
                              .out_proj_bias = (double *)out_proj_bias,
                              .relative_attention_bias = (double *)opt->relative_bias};
    const refenc_params p = {.n_layers = 1, .layers = &lp};
    const refenc_input in = {.B = B, .L = L, .x = x, .key_padding_mask = opt->key_padding_mask,
                             .positions = rope != NULL ? rope->positions : opt->positions,
                             .attn_mask = opt->attn_mask};
    const refenc_mp_output outs[] = {{"weights", weights}, {"output", y}};
    return refenc_mp_run_block(&cfg, &p, &in, REFENC_MP_BLOCK_MHA, opt->alibi_slopes, prec, rep, outs, 2);
}
