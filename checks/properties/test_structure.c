/* Structural properties of the encoder.
 *
 *  - the FFN is position-wise: changing row j changes only output row j;
 *  - batch items are independent;
 *  - appending masked padding tokens leaves the other outputs unchanged;
 *  - with the causal mask, output i does not depend on tokens after i;
 *  - multi-head attention equals H single-head attentions, concatenated
 *    and projected (built from the public functions, not from mha.c);
 *  - permuting the heads with the matching blocks of W_o changes nothing;
 *  - ALiBi slopes: geometric for H a power of two, the closest-power-of-two
 *    rule otherwise; the ALiBi bias is invariant under shifting positions;
 *  - GELU-tanh stays within its known maximum distance of exact GELU, and
 *    both tend to x for large x and to 0 for large negative x;
 *  - Pre-LN and Post-LN layers with the same weights differ;
 *  - a Pre-LN stack's output is layer-normalised (its final LayerNorm);
 *  - the encoder is the composition of its documented stages.
 * Most are exact in floating point and tested bitwise: each says why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "../common/testutil.h"
#include "../../ref/tool/random_params.h"

#define U TEST_U

static const refenc_positional all_schemes[] = {REFENC_POS_NONE, REFENC_POS_SINUSOIDAL,
                                                REFENC_POS_LEARNED, REFENC_POS_ROPE,
                                                REFENC_POS_ALIBI};

/* The first mismatch any count_unequal met in this test (each Criterion
 * test runs in its own process), with the seed and both values in %a and
 * %.17g: appended to the failure messages of the bitwise properties. */
static char first_diff[400];

static size_t count_unequal(const double *a, const double *b, size_t n)
{
    char buf[400];
    const size_t k = prop_count_unequal(a, b, n, buf, sizeof buf);
    if (k > 0 && first_diff[0] == '\0')
        snprintf(first_diff, sizeof first_diff, "%s", buf);
    return k;
}

/* ------------------------------------------------------------------------
 * FFN: y_n = act(x_n W1^T + b1) W2^T + b2 reads row n only, so every other
 * output row is computed by the same operations on the same values: bitwise. */
Test(structure, ffn_is_position_wise)
{
    gsl_rng *r = test_rng(701);
    for (size_t t = 0; t < 30; t++) {
        const size_t N = 1 + gsl_rng_uniform_int(r, 40), D = 1 + gsl_rng_uniform_int(r, 70);
        const size_t F = 1 + gsl_rng_uniform_int(r, 150), j = gsl_rng_uniform_int(r, N);
        const refenc_activation act = (refenc_activation)(t % 3);
        double *x = prop_calloc(N * D, sizeof(double)), *W1 = prop_calloc(F * D, sizeof(double));
        double *b1 = prop_calloc(F, sizeof(double)), *W2 = prop_calloc(D * F, sizeof(double));
        double *b2 = prop_calloc(D, sizeof(double)), *h = prop_calloc(N * F, sizeof(double));
        double *y0 = prop_calloc(N * D, sizeof(double)), *y1 = prop_calloc(N * D, sizeof(double));
        test_fill_gaussian(x, N * D, 0.3, 1.3, r);
        test_fill_gaussian(W1, F * D, 0.0, 1.0 / sqrt((double)D), r);
        test_fill_gaussian(b1, F, 0.0, 0.1, r);
        test_fill_gaussian(W2, D * F, 0.0, 1.0 / sqrt((double)F), r);
        test_fill_gaussian(b2, D, 0.0, 0.1, r);
        refenc_ffn_forward(y0, h, x, W1, b1, W2, b2, N, D, F, act);
        for (size_t d = 0; d < D; d++)
            x[j * D + d] += 2.385;
        refenc_ffn_forward(y1, h, x, W1, b1, W2, b2, N, D, F, act);
        size_t others = 0;
        for (size_t n = 0; n < N; n++)
            if (n != j)
                others += count_unequal(y0 + n * D, y1 + n * D, D);
        cr_assert_eq(others, 0, "changing row %zu of %zu changed %zu values of other rows (D=%zu F=%zu "
                     "%s): %s", j, N, others, D, F, refenc_activation_name(act), first_diff);
        /* negative control: the changed row's own output changes.  Run with
         * GELU: with ReLU and a narrow F every hidden unit of the row can be
         * inactive before and after, and the row's output is then b2 both
         * times. */
        for (size_t d = 0; d < D; d++)
            x[j * D + d] -= 2.385;
        refenc_ffn_forward(y0, h, x, W1, b1, W2, b2, N, D, F, REFENC_ACT_GELU);
        for (size_t d = 0; d < D; d++)
            x[j * D + d] += 2.385;
        refenc_ffn_forward(y1, h, x, W1, b1, W2, b2, N, D, F, REFENC_ACT_GELU);
        cr_assert_gt(count_unequal(y0 + j * D, y1 + j * D, D), 0,
                     "negative control: row %zu's output did not change (seed %lu)", j, test_seed());
        free(x);
        free(W1);
        free(b1);
        free(W2);
        free(b2);
        free(h);
        free(y0);
        free(y1);
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------
 * Batch items: every loop over b in the reference computes item b from item
 * b alone, in the same order whatever B: bitwise. */
Test(structure, batch_items_are_independent)
{
    gsl_rng *r = test_rng(702);
    prop_opts o;
    prop_opts_default(&o);
    o.max_len = 24;
    for (size_t t = 0; t < 10; t++) {
        prop_case c;
        o.positional = all_schemes[t % 5];
        o.causal = t % 3 == 1;
        prop_case_random(&c, r, t, &o);
        const size_t B = c.B, L = c.L, D = c.cfg.d_model, LD = L * D;
        double *y = prop_calloc(B * LD, sizeof(double)), *y1 = prop_calloc(LD, sizeof(double));
        const refenc_input in = {.B = B, .L = L, .x = c.x, .key_padding_mask = c.pad};
        prop_encoder_run(y, NULL, &c.p, &c.cfg, &in);
        for (size_t b = 0; b < B; b++) {
            const refenc_input in1 = {.B = 1, .L = L, .x = c.x + b * LD,
                                      .key_padding_mask = c.pad ? c.pad + b * L : NULL};
            prop_encoder_run(y1, NULL, &c.p, &c.cfg, &in1);
            cr_assert_eq(count_unequal(y + b * LD, y1, LD), 0,
                         "%s: item %zu alone differs from item %zu in the batch: %s", c.desc, b, b,
                         first_diff);
        }
        /* item 0 changed: the others do not move, item 0 does (control) */
        double *y2 = prop_calloc(B * LD, sizeof(double));
        for (size_t i = 0; i < LD; i++)
            c.x[i] = -c.x[i];
        prop_encoder_run(y2, NULL, &c.p, &c.cfg, &in);
        cr_assert_eq(count_unequal(y + LD, y2 + LD, (B - 1) * LD), 0,
                     "%s: changing item 0 changed other items: %s", c.desc, first_diff);
        if (!(c.pad && memchr(c.pad, 0, L) == NULL)) /* item 0 not entirely padding */
            cr_assert_gt(count_unequal(y, y2, LD), 0,
                         "negative control: changing item 0 did not change its output (%s)", c.desc);
        free(y);
        free(y1);
        free(y2);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------
 * Padding appended and masked: the masked keys get score -inf, weight
 * exp(-inf) = 0 exactly; the softmax sum gains only +0 terms after the same
 * L terms, and sum_j w_ij v_j gains only (+-0) v terms: bitwise.  Positions
 * 0..L-1 are unchanged. */
Test(structure, masked_padding_tokens_change_nothing)
{
    gsl_rng *r = test_rng(703);
    prop_opts o;
    prop_opts_default(&o);
    o.max_len = 40;
    for (size_t t = 0; t < 10; t++) {
        prop_case c;
        o.positional = all_schemes[t % 5];
        o.causal = t % 3 == 1;
        prop_case_random(&c, r, t, &o);
        const size_t B = c.B, L = c.L, D = c.cfg.d_model, E = 1 + gsl_rng_uniform_int(r, 7);
        const size_t L2 = L + E;
        c.cfg.max_len = L2 + 1; /* the learned table must cover the new positions */
        if (c.cfg.positional == REFENC_POS_LEARNED) {
            refenc_error err;
            refenc_params_free(&c.p);
            cr_assert_eq(refenc_params_alloc(&c.p, &c.cfg, &err), REFENC_OK, "%s", err.message);
            refenc_params_init_random(&c.p, &c.cfg, r);
        }
        double *x2 = prop_calloc(B * L2 * D, sizeof(double));
        uint8_t *pad2 = prop_calloc(B * L2, 1);
        for (size_t b = 0; b < B; b++) {
            memcpy(x2 + b * L2 * D, c.x + b * L * D, L * D * sizeof(double));
            test_fill_gaussian(x2 + (b * L2 + L) * D, E * D, 0.0, 3.0, r);
            for (size_t l = 0; l < L2; l++)
                pad2[b * L2 + l] = l >= L ? 1 : (c.pad ? c.pad[b * L + l] : 0);
        }
        double *y = prop_calloc(B * L * D, sizeof(double)), *y2 = prop_calloc(B * L2 * D, sizeof(double));
        const refenc_input in = {.B = B, .L = L, .x = c.x, .key_padding_mask = c.pad};
        const refenc_input in2 = {.B = B, .L = L2, .x = x2, .key_padding_mask = pad2};
        prop_encoder_run(y, NULL, &c.p, &c.cfg, &in);
        prop_encoder_run(y2, NULL, &c.p, &c.cfg, &in2);
        size_t diff = 0;
        for (size_t b = 0; b < B; b++)
            diff += count_unequal(y + b * L * D, y2 + b * L2 * D, L * D);
        cr_assert_eq(diff, 0, "%s: %zu outputs changed when %zu masked tokens were appended: %s",
                     c.desc, diff, E, first_diff);
        /* negative control: the appended tokens visible (not causal, or the
         * first tokens could not see them) */
        if (!c.cfg.causal) {
            for (size_t b = 0; b < B; b++)
                for (size_t l = L; l < L2; l++)
                    pad2[b * L2 + l] = 0;
            prop_encoder_run(y2, NULL, &c.p, &c.cfg, &in2);
            diff = 0;
            for (size_t b = 0; b < B; b++)
                diff += count_unequal(y + b * L * D, y2 + b * L2 * D, L * D);
            cr_assert_gt(diff, 0, "negative control: visible appended tokens changed nothing (%s)", c.desc);
        }
        free(x2);
        free(pad2);
        free(y);
        free(y2);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------
 * Causal: for query i the keys j > i get -inf, weight exactly 0, and the
 * softmax max is taken over j <= i only; every other stage is per token:
 * outputs 0..i bitwise unchanged when tokens i+1.. change. */
Test(structure, causal_output_ignores_later_tokens)
{
    gsl_rng *r = test_rng(704);
    prop_opts o;
    prop_opts_default(&o);
    o.min_len = 2;
    o.max_len = 40;
    for (size_t t = 0; t < 12; t++) {
        prop_case c;
        o.positional = all_schemes[t % 5];
        for (int causal = 1; causal >= 0; causal--) {
            o.causal = causal;
            prop_case_random(&c, r, t, &o);
            const size_t B = c.B, L = c.L, D = c.cfg.d_model, i = gsl_rng_uniform_int(r, L - 1);
            double *y0 = prop_calloc(B * L * D, sizeof(double)), *y1 = prop_calloc(B * L * D, sizeof(double));
            const refenc_input in = {.B = B, .L = L, .x = c.x, .key_padding_mask = c.pad};
            prop_encoder_run(y0, NULL, &c.p, &c.cfg, &in);
            for (size_t b = 0; b < B; b++)
                test_fill_gaussian(c.x + (b * L + i + 1) * D, (L - i - 1) * D, 0.0, 2.0, r);
            prop_encoder_run(y1, NULL, &c.p, &c.cfg, &in);
            size_t diff = 0, visible = 0;
            for (size_t b = 0; b < B; b++) {
                diff += count_unequal(y0 + b * L * D, y1 + b * L * D, (i + 1) * D);
                for (size_t j = i + 1; j < L; j++)
                    visible += !(c.pad && c.pad[b * L + j]);
            }
            if (causal)
                cr_assert_eq(diff, 0, "%s: outputs 0..%zu changed with tokens after %zu: %s",
                             c.desc, i, i, first_diff);
            else if (visible > 0) /* negative control: without the mask they change */
                cr_assert_gt(diff, 0, "negative control: without the causal mask outputs 0..%zu "
                             "ignored later tokens (%s)", i, c.desc);
            free(y0);
            free(y1);
            prop_case_free(&c);
        }
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------
 * Multi-head attention against single heads. */

typedef struct {
    size_t B, L, D, H;
    double *x, *y, *in_w, *in_b, *out_w, *out_b, *slopes;
    uint8_t *pad;
    int64_t *pos;
    refenc_attn_options opt;
    refenc_rope_options rope;
    int use_rope;
} mha_case;

static void mha_case_random(mha_case *m, gsl_rng *r, size_t t)
{
    static const size_t hs[] = {1, 2, 3, 4, 5, 8}, dhs[] = {2, 4, 6, 8, 10};
    memset(m, 0, sizeof *m);
    m->H = hs[t % 6];
    const size_t Dh = dhs[gsl_rng_uniform_int(r, 5)];
    m->D = m->H * Dh;
    m->B = 1 + gsl_rng_uniform_int(r, 3);
    m->L = 1 + gsl_rng_uniform_int(r, 30);
    const size_t D = m->D, BLD = m->B * m->L * D;
    m->x = prop_calloc(BLD, sizeof(double));
    m->y = prop_calloc(BLD, sizeof(double));
    m->in_w = prop_calloc(3 * D * D, sizeof(double));
    m->in_b = prop_calloc(3 * D, sizeof(double));
    m->out_w = prop_calloc(D * D, sizeof(double));
    m->out_b = prop_calloc(D, sizeof(double));
    m->slopes = prop_calloc(m->H, sizeof(double));
    m->pos = prop_calloc(m->L, sizeof(int64_t));
    test_fill_gaussian(m->x, BLD, 0.2, 1.1, r);
    test_fill_gaussian(m->in_w, 3 * D * D, 0.0, 1.0 / sqrt((double)D), r);
    test_fill_gaussian(m->in_b, 3 * D, 0.0, 0.1, r);
    test_fill_gaussian(m->out_w, D * D, 0.0, 1.0 / sqrt((double)D), r);
    test_fill_gaussian(m->out_b, D, 0.0, 0.1, r);
    refenc_alibi_slopes(m->slopes, m->H);
    for (size_t l = 0; l < m->L; l++)
        m->pos[l] = (int64_t)(2 * l + 5);
    if (t % 2) {
        m->pad = prop_calloc(m->B * m->L, 1);
        for (size_t i = 0; i < m->B * m->L; i++)
            m->pad[i] = gsl_rng_uniform(r) < 0.2;
    }
    m->opt.key_padding_mask = m->pad;
    m->opt.causal = t % 5 == 2;
    m->opt.alibi_slopes = t % 3 == 1 ? m->slopes : NULL;
    m->opt.positions = m->pos;
    m->opt.temperature = 0.7 + gsl_rng_uniform(r);
    m->use_rope = t % 3 == 2;
    m->rope.layout = t % 4 < 2 ? REFENC_ROPE_HALF : REFENC_ROPE_INTERLEAVED;
    m->rope.base = 10000.0;
    m->rope.positions = m->pos;
}

static void mha_case_free(mha_case *m)
{
    free(m->x);
    free(m->y);
    free(m->in_w);
    free(m->in_b);
    free(m->out_w);
    free(m->out_b);
    free(m->slopes);
    free(m->pos);
    free(m->pad);
}

/* refenc_mha_forward with its own buffers; weights (B, H, L, L) and the
 * merged context (B, L, D) copied out if not NULL. */
static void run_mha(mha_case *m, double *weights, double *ctx)
{
    const size_t BLD = m->B * m->L * m->D;
    double *buf = prop_calloc(8 * BLD + m->B * m->H * m->L * m->L, sizeof(double));
    refenc_mha_work w = {buf, buf + BLD, buf + 2 * BLD, buf + 3 * BLD, buf + 4 * BLD,
                         buf + 5 * BLD, buf + 6 * BLD, buf + 7 * BLD, buf + 8 * BLD};
    refenc_mha_forward(m->y, &w, m->x, m->in_w, m->in_b, m->out_w, m->out_b, &m->opt,
                       m->use_rope ? &m->rope : NULL, m->B, m->L, m->D, m->H);
    if (weights)
        memcpy(weights, w.weights, m->B * m->H * m->L * m->L * sizeof(double));
    if (ctx)
        memcpy(ctx, w.ctx, BLD * sizeof(double));
    free(buf);
}

/* The same attention head by head from the public functions: q_h = x
 * W_q[h rows]^T + b_q[h] (the same dot products as the full projection's
 * columns of head h), RoPE on (B, L, Dh), attention with H = 1 and head h's
 * ALiBi slope, the heads placed at columns order[h] * Dh of ctx, then the
 * output projection.  Every value is computed by the same operations in the
 * same order as in mha.h's description: bitwise. */
static void heads_one_by_one(mha_case *m, double *y, double *weights, const size_t *order)
{
    const size_t B = m->B, L = m->L, D = m->D, H = m->H, Dh = D / H, BL = B * L;
    double *qh = prop_calloc(BL * Dh, sizeof(double)), *kh = prop_calloc(BL * Dh, sizeof(double));
    double *vh = prop_calloc(BL * Dh, sizeof(double)), *oh = prop_calloc(BL * Dh, sizeof(double));
    double *wh = prop_calloc(B * L * L, sizeof(double)), *ctx = prop_calloc(BL * D, sizeof(double));
    for (size_t h = 0; h < H; h++) {
        refenc_linear_forward(qh, m->x, m->in_w + h * Dh * D, m->in_b + h * Dh, BL, D, Dh);
        refenc_linear_forward(kh, m->x, m->in_w + (D + h * Dh) * D, m->in_b + D + h * Dh, BL, D, Dh);
        refenc_linear_forward(vh, m->x, m->in_w + (2 * D + h * Dh) * D, m->in_b + 2 * D + h * Dh,
                              BL, D, Dh);
        if (m->use_rope) {
            refenc_rope_forward(qh, qh, m->pos, B, L, Dh, m->rope.base, m->rope.layout);
            refenc_rope_forward(kh, kh, m->pos, B, L, Dh, m->rope.base, m->rope.layout);
        }
        refenc_attn_options oh_opt = m->opt;
        oh_opt.alibi_slopes = m->opt.alibi_slopes ? m->slopes + h : NULL;
        refenc_attention_forward(oh, wh, qh, kh, vh, &oh_opt, B, 1, L, Dh);
        for (size_t b = 0; b < B; b++) {
            memcpy(weights + (b * H + h) * L * L, wh + b * L * L, L * L * sizeof(double));
            for (size_t l = 0; l < L; l++)
                memcpy(ctx + (b * L + l) * D + order[h] * Dh, oh + (b * L + l) * Dh,
                       Dh * sizeof(double));
        }
    }
    refenc_linear_forward(y, ctx, m->out_w, m->out_b, BL, D, D);
    free(qh);
    free(kh);
    free(vh);
    free(oh);
    free(wh);
    free(ctx);
}

Test(structure, mha_equals_concatenated_single_heads)
{
    gsl_rng *r = test_rng(705);
    for (size_t t = 0; t < 30; t++) {
        mha_case m;
        mha_case_random(&m, r, t);
        const size_t BLD = m.B * m.L * m.D, BHLL = m.B * m.H * m.L * m.L;
        double *w0 = prop_calloc(BHLL, sizeof(double)), *w1 = prop_calloc(BHLL, sizeof(double));
        double *y1 = prop_calloc(BLD, sizeof(double));
        size_t order[8];
        for (size_t h = 0; h < m.H; h++)
            order[h] = h;
        run_mha(&m, w0, NULL);
        heads_one_by_one(&m, y1, w1, order);
        cr_assert(count_unequal(m.y, y1, BLD) == 0 && count_unequal(w0, w1, BHLL) == 0,
                  "MHA != concat of %zu single heads (D=%zu L=%zu B=%zu rope=%d alibi=%d causal=%d): "
                  "%s", m.H, m.D, m.L, m.B, m.use_rope, m.opt.alibi_slopes != NULL, m.opt.causal,
                  first_diff);
        if (m.H >= 2) { /* negative control: heads concatenated in reverse order,
                          * without padding (an item whose keys are all padding
                          * has a zero context, where head order cannot show) */
            m.opt.key_padding_mask = NULL;
            run_mha(&m, w0, NULL);
            for (size_t h = 0; h < m.H; h++)
                order[h] = m.H - 1 - h;
            heads_one_by_one(&m, y1, w1, order);
            cr_assert_gt(count_unequal(m.y, y1, BLD), 0,
                         "negative control: reversed heads gave the same output (H=%zu)", m.H);
        }
        free(w0);
        free(w1);
        free(y1);
        mha_case_free(&m);
    }
    gsl_rng_free(r);
}

/* Permuting the heads (blocks of rows of W_q, W_k, W_v and of the biases)
 * and the matching blocks of columns of W_o: each head computes the same
 * values (ctx is block-permuted, checked bitwise), and the output projection
 * sums the same products in another order.  Both runs are within
 * gamma_{D+1} (sum_k |ctx_k W_ok| + |b_o|) of the same exact value
 * (linear.h), hence the tolerance 2 gamma_{D+1} (...).  ALiBi is left out:
 * its slope belongs to the head's index. */
static size_t check_head_permutation(test_worst *w, mha_case *m, const size_t *perm, int permute_wo)
{
    const size_t D = m->D, H = m->H, Dh = D / H, BLD = m->B * m->L * D;
    double *y0 = prop_calloc(BLD, sizeof(double)), *ctx0 = prop_calloc(BLD, sizeof(double));
    double *ctx1 = prop_calloc(BLD, sizeof(double));
    run_mha(m, NULL, ctx0);
    memcpy(y0, m->y, BLD * sizeof(double));

    mha_case p = *m;
    p.in_w = prop_calloc(3 * D * D, sizeof(double));
    p.in_b = prop_calloc(3 * D, sizeof(double));
    p.out_w = prop_calloc(D * D, sizeof(double));
    p.y = prop_calloc(BLD, sizeof(double));
    for (size_t t = 0; t < 3; t++)
        for (size_t h = 0; h < H; h++) { /* new head h = old head perm[h] */
            memcpy(p.in_w + (t * D + h * Dh) * D, m->in_w + (t * D + perm[h] * Dh) * D,
                   Dh * D * sizeof(double));
            memcpy(p.in_b + t * D + h * Dh, m->in_b + t * D + perm[h] * Dh, Dh * sizeof(double));
        }
    for (size_t o = 0; o < D; o++)
        for (size_t h = 0; h < H; h++)
            memcpy(p.out_w + o * D + h * Dh, m->out_w + o * D + (permute_wo ? perm[h] : h) * Dh,
                   Dh * sizeof(double));
    run_mha(&p, NULL, ctx1);
    size_t bad = 0;
    for (size_t bl = 0; bl < m->B * m->L; bl++)
        for (size_t h = 0; h < H; h++)
            cr_assert_eq(memcmp(ctx1 + bl * D + h * Dh, ctx0 + bl * D + perm[h] * Dh,
                                Dh * sizeof(double)), 0, "a permuted head computed other values");
    for (size_t bl = 0; bl < m->B * m->L; bl++)
        for (size_t o = 0; o < D; o++) {
            double mag = fabs(m->out_b[o]);
            for (size_t k = 0; k < D; k++)
                mag += fabs(ctx0[bl * D + k] * m->out_w[o * D + k]);
            const double tol = test_gamma((double)D + 1.0) * mag;
            bad += !fb_within(w, p.y[bl * D + o], tol, y0[bl * D + o], tol, "H=%zu D=%zu: row %zu out %zu",
                              H, D, bl, o);
        }
    free(p.in_w);
    free(p.in_b);
    free(p.out_w);
    free(p.y);
    free(y0);
    free(ctx0);
    free(ctx1);
    return bad;
}

Test(structure, permuting_heads_with_matching_out_proj_changes_nothing)
{
    gsl_rng *r = test_rng(706);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0, controls = 0;
    char buf[640];
    for (size_t t = 0; t < 30; t++) {
        mha_case m;
        mha_case_random(&m, r, t);
        m.opt.alibi_slopes = NULL;
        size_t perm[8];
        prop_random_permutation(perm, m.H, r);
        bad += check_head_permutation(&w, &m, perm, 1);
        if (m.H >= 2) { /* negative control: W_o left in the old order (no
                          * padding: a zero context would hide it) */
            m.opt.key_padding_mask = NULL;
            if (perm[0] == 0) { /* make perm a non-identity */
                const size_t t0 = perm[0];
                perm[0] = perm[1];
                perm[1] = t0;
            }
            test_worst wc;
            test_worst_init(&wc);
            cr_assert_gt(check_head_permutation(&wc, &m, perm, 0), 0,
                         "negative control: heads permuted without W_o gave the same output (H=%zu)", m.H);
            controls++;
        }
        mha_case_free(&m);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu outputs changed when heads and W_o blocks were permuted: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_assert_gt(controls, 0, "no negative control ran");
}

/* ------------------------------------------------------------------------
 * ALiBi slopes (alibi.h; Press et al.): for H a power of two,
 * m_h = 2^(-8(h+1)/H), a geometric sequence of ratio m_0; otherwise, with C
 * the largest power of two below H, the C slopes for C heads, then every
 * other slope of the sequence for 2C heads, starting with the first. */
static double *slopes_for(size_t H)
{
    double *s = prop_calloc(H, sizeof(double));
    refenc_alibi_slopes(s, H);
    return s;
}

/* The closest-power-of-two rule against the slopes for C and 2C heads,
 * bitwise (the same exp2 of the same exact exponent).  Returns mismatches. */
static size_t count_rule_mismatch(const double *s, size_t H)
{
    size_t C = 1;
    while (C * 2 <= H)
        C *= 2;
    double *sc = slopes_for(C), *s2c = slopes_for(2 * C);
    size_t bad = 0;
    for (size_t h = 0; h < C; h++)
        bad += !(s[h] == sc[h]);
    for (size_t k = 0; C + k < H; k++)
        bad += !(s[C + k] == s2c[2 * k]);
    free(sc);
    free(s2c);
    return bad;
}

Test(structure, alibi_slopes_follow_the_closest_power_of_two_rule)
{
    test_worst w;
    test_worst_init(&w);
    char buf[640];
    size_t bad = 0;
    for (size_t H = 1; H <= 64; H++) {
        double *s = slopes_for(H);
        const int pow2 = (H & (H - 1)) == 0;
        if (pow2) {
            /* m_0 = 2^(-8/H): pow and exp2 each within 1 ulp: 4u |m_0| */
            bad += !fb_within(&w, s[0], 4.0 * U * s[0], pow(2.0, -8.0 / (double)H), 0.0,
                              "H=%zu m_0", H);
            /* geometric: m_{h+1} = m_h m_0; each slope within 1 ulp (2u) of
             * its exact value, the product adds u: 2u + 2u + u + 2u < 8u */
            for (size_t h = 0; h + 1 < H; h++)
                bad += !fb_within(&w, s[h + 1], 8.0 * U * s[h + 1], s[h] * s[0], 0.0,
                                  "H=%zu ratio at %zu", H, h);
            /* H <= 8: integer exponents, exact powers of two */
            for (size_t h = 0; H <= 8 && h < H; h++)
                bad += !test_worst_check(&w, s[h], ldexp(1.0, -(int)(8 * (h + 1) / H)), 0.0,
                                         "H=%zu slope %zu (a power of two)", H, h);
        } else {
            const size_t mis = count_rule_mismatch(s, H);
            if (mis > 0)
                test_worst_check(&w, (double)mis, 0.0, 0.0, "H=%zu: slopes breaking the rule", H);
            bad += mis;
            /* negative control: the geometric sequence 2^(-8(h+1)/H) for this
             * H breaks the same rule */
            double *geo = prop_calloc(H, sizeof(double));
            for (size_t h = 0; h < H; h++)
                geo[h] = exp2(-8.0 * (double)(h + 1) / (double)H);
            cr_expect_gt(count_rule_mismatch(geo, H), 0,
                         "negative control: the geometric slopes passed the rule for H=%zu", H);
            free(geo);
        }
        free(s);
    }
    cr_assert_eq(bad, 0, "%zu ALiBi slopes break the rule: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
}

/* The bias -m |p_i - p_j| uses the exact integer |p_i - p_j|: shifting both
 * positions gives the same double.  In the encoder, shifting every position
 * by s leaves every score, weight and output bitwise unchanged (ALiBi is the
 * only use of positions there). */
Test(structure, alibi_bias_is_invariant_under_position_shift)
{
    gsl_rng *r = test_rng(707);
    for (size_t t = 0; t < 1000; t++) {
        const double m = exp2(-8.0 * (double)(1 + t % 12) / 12.0);
        const int64_t i = (int64_t)gsl_rng_uniform_int(r, 1u << 30);
        const int64_t j = (int64_t)gsl_rng_uniform_int(r, 1u << 30);
        const int64_t s = (int64_t)gsl_rng_uniform_int(r, 1u << 30) << 10;
        cr_assert(refenc_alibi_bias(m, i + s, j + s) == refenc_alibi_bias(m, i, j),
                  "bias(%lld + s, %lld + s) != bias(%lld, %lld)", (long long)i, (long long)j,
                  (long long)i, (long long)j);
    }
    prop_opts o;
    prop_opts_default(&o);
    o.positional = REFENC_POS_ALIBI;
    o.min_len = 2;
    for (size_t t = 0; t < 8; t++) {
        prop_case c;
        o.causal = t % 3 == 1;
        prop_case_random(&c, r, t, &o);
        const size_t L = c.L, BLD = c.B * L * c.cfg.d_model;
        int64_t *p0 = prop_calloc(L, sizeof(int64_t)), *p1 = prop_calloc(L, sizeof(int64_t));
        const int64_t s = 1 + (int64_t)gsl_rng_uniform_int(r, 1u << 30);
        for (size_t l = 0; l < L; l++) {
            p0[l] = (int64_t)l;
            p1[l] = (int64_t)l + s;
        }
        double *y0 = prop_calloc(BLD, sizeof(double)), *y1 = prop_calloc(BLD, sizeof(double));
        prop_capture k0 = {0}, k1 = {0};
        refenc_input in = {.B = c.B, .L = L, .x = c.x, .key_padding_mask = c.pad, .positions = p0};
        prop_encoder_run(y0, &k0, &c.p, &c.cfg, &in);
        in.positions = p1;
        prop_encoder_run(y1, &k1, &c.p, &c.cfg, &in);
        size_t diff = count_unequal(y0, y1, BLD);
        for (size_t n = 0; n < k0.n_layers; n++)
            diff += count_unequal(k0.weights[n], k1.weights[n], k0.BHLL);
        cr_assert_eq(diff, 0, "%s: shifting positions by %lld changed %zu values: %s", c.desc,
                     (long long)s, diff, first_diff);
        /* negative control: the first position moved apart from the others,
         * without padding and causal mask (so that some query sees two keys
         * whose distance changed) */
        prop_capture_free(&k0);
        prop_capture_free(&k1);
        refenc_config open = c.cfg;
        open.causal = 0;
        in.key_padding_mask = NULL;
        in.positions = p0;
        prop_encoder_run(y0, &k0, &c.p, &open, &in);
        p1[0] -= 3;
        in.positions = p1;
        prop_encoder_run(y1, &k1, &c.p, &open, &in);
        cr_assert_gt(count_unequal(k0.weights[0], k1.weights[0], k0.BHLL), 0,
                     "negative control: moving one position left the weights unchanged (%s)", c.desc);
        prop_capture_free(&k0);
        prop_capture_free(&k1);
        free(p0);
        free(p1);
        free(y0);
        free(y1);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------
 * GELU-tanh against GELU: max_x |gelu_tanh(x) - gelu(x)| = M* =
 * 4.7323552068728e-4, attained at x = +-2.6989414 (the difference is even:
 * both functions equal x minus their value at -x).  M* was found by a grid
 * search in MPFR at 256 bits (step 1e-9 around the maximum); its error is
 * below 1e-16.  Computed differences are within the two functions' rounding
 * bounds (fb_activation_rounding) plus gamma_1 of the difference.  The grid
 * here passes within 5e-8 of the maximiser, where the difference is below
 * M* by at most max|d''| (5e-8)^2 / 2 < 2.5e-15 (|d''| < 2). */
#define GELU_TANH_MAXDIST 4.7323552068728e-4
#define GELU_TANH_ARGMAX 2.6989413802040016

/* max over a grid of |f(x) - gelu(x)| - rnd(x), and the same + rnd(x):
 * lower and upper estimates of the true maximum over the grid. */
static void max_distance(double *lo, double *hi, refenc_activation f)
{
    *lo = 0.0;
    *hi = 0.0;
    for (int pass = 0; pass < 3; pass++) {
        const double a = pass == 0 ? -10.0 : (pass == 1 ? 1.0 : -1.0) * GELU_TANH_ARGMAX - 1e-3;
        const double step = pass == 0 ? 1e-3 : 1e-7;
        for (size_t i = 0; i <= 20000; i++) {
            const double x = a + step * (double)i;
            double y, g;
            refenc_activation_forward(&y, &x, 1, f);
            refenc_activation_forward(&g, &x, 1, REFENC_ACT_GELU);
            const double d = fabs(y - g);
            const double e = fb_activation_rounding(f, x, y) +
                             fb_activation_rounding(REFENC_ACT_GELU, x, g) + test_gamma(1) * d;
            *lo = fmax(*lo, d - e);
            *hi = fmax(*hi, d + e);
        }
    }
}

Test(structure, gelu_tanh_stays_within_known_distance_of_gelu)
{
    double lo, hi;
    max_distance(&lo, &hi, REFENC_ACT_GELU_TANH);
    cr_assert(hi >= GELU_TANH_MAXDIST - 2.5e-15 - 1e-16 && lo <= GELU_TANH_MAXDIST + 1e-16,
              "max |gelu_tanh - gelu| on the grid is in [%.17g, %.17g], not at the known %.17g",
              lo, hi, GELU_TANH_MAXDIST);
    /* negative control: ReLU is 0.17 away from GELU */
    max_distance(&lo, &hi, REFENC_ACT_RELU);
    cr_assert(lo > GELU_TANH_MAXDIST + 1e-16,
              "negative control: ReLU stayed within %.3g of GELU", GELU_TANH_MAXDIST);
}

/* Large |x|: for x >= 9, 1 - Phi(x) < 1.2e-19 < u, so erfc(-x/sqrt2) rounds
 * to 2 and gelu(x) = x * 1 exactly; exp(-2z) < 1e-36 and gelu_tanh(x) =
 * x / 1 exactly.  For x <= -40, erfc(28.3) ~ 1e-350 underflows to 0 and
 * exp(-2z) = exp(4630) overflows: both return (-)0 exactly.  In between,
 * in exact arithmetic |f(x) - x| / x decreases for x > 0 (it is Q(x)) and
 * |f(x)| decreases as x -> -inf (for x < -1: d/dx (-x Phi(x)) =
 * |x| phi(x) - Phi(x) > 0 by the Mills ratio); the computed values may
 * deviate only by their rounding bounds. */
static int tends(refenc_activation f, double x_pos, double x_neg)
{
    int ok = 1;
    double prev = INFINITY, prev_e = 0.0;
    for (double x = 1.5; x <= x_pos; x += 0.25) { /* relative distance to x */
        double y;
        refenc_activation_forward(&y, &x, 1, f);
        const double d = fabs(y - x) / x, e = fb_activation_rounding(f, x, y) / x;
        ok &= d <= prev + (e + prev_e) * FB_SLACK;
        prev = d;
        prev_e = e;
    }
    double yb;
    refenc_activation_forward(&yb, &x_pos, 1, f);
    ok &= yb == x_pos;
    prev = INFINITY;
    prev_e = 0.0;
    for (double x = -1.5; x >= x_neg; x -= 0.25) { /* distance to 0 */
        double y;
        refenc_activation_forward(&y, &x, 1, f);
        const double e = fb_activation_rounding(f, x, y);
        ok &= fabs(y) <= prev + (e + prev_e) * FB_SLACK;
        prev = fabs(y);
        prev_e = e;
    }
    refenc_activation_forward(&yb, &x_neg, 1, f);
    ok &= yb == 0.0;
    return ok;
}

Test(structure, gelu_tends_to_identity_and_to_zero)
{
    static const double big[] = {9.0, 10.0, 20.0, 1e3, 1e6, 1e100};
    static const double neg[] = {-40.0, -100.0, -1e6, -1e100};
    for (int f = REFENC_ACT_GELU; f <= REFENC_ACT_GELU_TANH; f++) {
        cr_assert(tends((refenc_activation)f, 9.0, -40.0), "%s does not tend to x and to 0",
                  refenc_activation_name((refenc_activation)f));
        for (size_t i = 0; i < 6; i++) {
            double y;
            refenc_activation_forward(&y, &big[i], 1, (refenc_activation)f);
            cr_assert(y == big[i], "%s(%g) = %.17g, not exactly x",
                      refenc_activation_name((refenc_activation)f), big[i], y);
        }
        for (size_t i = 0; i < 4; i++) {
            double y;
            refenc_activation_forward(&y, &neg[i], 1, (refenc_activation)f);
            cr_assert(y == 0.0, "%s(%g) = %.17g, not 0", refenc_activation_name((refenc_activation)f),
                      neg[i], y);
        }
        /* negative control: the same check ending at moderate arguments,
         * where the limits are not reached */
        cr_assert(!tends((refenc_activation)f, 3.0, -3.0),
                  "negative control: %s reached its limits at |x| = 3",
                  refenc_activation_name((refenc_activation)f));
    }
}

/* ------------------------------------------------------------------------
 * Pre-LN and Post-LN layers (N = 1, no final norm) with the same weights:
 * they differ when some output differs by more than both runs' bounds
 * (then the exact layers differ).  Negative control, a case where the two
 * placements coincide exactly: attention and FFN outputs zero (W_o, b_o,
 * W2, b2 = 0), gain 1, bias 0, eps = 0 and rows of +-1 with as many of each
 * (mean 0 and variance 1 exactly, so LN(x) = x exactly): both layers return
 * x, and the same comparison must find no difference. */
static size_t count_differences(test_worst *w, prop_case *c)
{
    const size_t D = c->cfg.d_model, BLD = c->B * c->L * D;
    double *y0 = prop_calloc(BLD, sizeof(double)), *y1 = prop_calloc(BLD, sizeof(double));
    const refenc_input in = {.B = c->B, .L = c->L, .x = c->x, .key_padding_mask = c->pad};
    fb_norms nm;
    fb_result f0, f1;
    fb_norms_compute(&nm, &c->p, &c->cfg);
    c->cfg.norm = REFENC_NORM_PRE;
    fb_encoder_checked(&f0, y0, NULL, &c->p, &c->cfg, &in, &nm, c->desc);
    c->cfg.norm = REFENC_NORM_POST;
    fb_encoder_checked(&f1, y1, NULL, &c->p, &c->cfg, &in, &nm, c->desc);
    const size_t diff = fb_outputs_outside(w, y1, &f1, y0, &f0, c->desc);
    fb_result_free(&f0);
    fb_result_free(&f1);
    fb_norms_free(&nm);
    free(y0);
    free(y1);
    return diff;
}

Test(structure, pre_ln_and_post_ln_layers_differ)
{
    gsl_rng *r = test_rng(708);
    prop_opts o;
    prop_opts_default(&o);
    o.max_layers = 1;
    for (size_t t = 0; t < 10; t++) {
        prop_case c;
        o.positional = all_schemes[t % 5];
        prop_case_random(&c, r, t, &o);
        c.cfg.final_norm = 0;
        test_worst w;
        test_worst_init(&w);
        cr_assert_gt(count_differences(&w, &c), 0,
                     "%s: Pre-LN and Post-LN layers agree within their bounds (seed %lu)", c.desc,
                     test_seed());
        prop_case_free(&c);
    }
    for (size_t t = 0; t < 6; t++) { /* negative control */
        prop_case c;
        o.positional = REFENC_POS_NONE;
        prop_case_random(&c, r, 2 * t, &o); /* even index: D a power of two, even */
        c.cfg.final_norm = 0;
        c.cfg.layer_norm_eps = 0.0;
        const size_t D = c.cfg.d_model;
        refenc_layer_params *lp = &c.p.layers[0];
        memset(lp->out_proj_weight, 0, D * D * sizeof(double));
        memset(lp->out_proj_bias, 0, D * sizeof(double));
        memset(lp->linear2_weight, 0, D * c.cfg.d_ff * sizeof(double));
        memset(lp->linear2_bias, 0, D * sizeof(double));
        for (size_t d = 0; d < D; d++) {
            lp->norm1_weight[d] = lp->norm2_weight[d] = 1.0;
            lp->norm1_bias[d] = lp->norm2_bias[d] = 0.0;
        }
        for (size_t bl = 0; bl < c.B * c.L; bl++) {
            size_t *perm = prop_calloc(D, sizeof(size_t));
            prop_random_permutation(perm, D, r);
            for (size_t d = 0; d < D; d++)
                c.x[bl * D + perm[d]] = d < D / 2 ? 1.0 : -1.0;
            free(perm);
        }
        prop_case_describe(&c);
        test_worst w;
        test_worst_init(&w);
        cr_assert_eq(count_differences(&w, &c), 0,
                     "negative control: Pre-LN and Post-LN differ where they coincide (%s)", c.desc);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------
 * A Pre-LN stack ends with LayerNorm (encoder.h, final_norm): with its gain
 * 1 and bias 0, each output row has mean 0 and variance var/(var + eps),
 * var the variance of the last layer's output row (taken from the trace).
 * Tolerances as in layernorm_invariance (fb_layernorm of that row, whose
 * input is the exact input of this stage).  Negative control: the same
 * stack without the final norm is not normalised. */
static size_t check_normalised(test_worst *w, prop_case *c)
{
    const size_t D = c->cfg.d_model, BL = c->B * c->L, BLD = BL * D;
    double *y = prop_calloc(BLD, sizeof(double));
    double *ones = prop_calloc(D, sizeof(double)), *zeros = prop_calloc(D, sizeof(double));
    double *ly = prop_calloc(D, sizeof(double)), *le = prop_calloc(D, sizeof(double));
    for (size_t d = 0; d < D; d++)
        ones[d] = 1.0;
    if (c->p.norm_weight != NULL) {
        memcpy(c->p.norm_weight, ones, D * sizeof(double));
        memcpy(c->p.norm_bias, zeros, D * sizeof(double));
    }
    prop_capture k = {0};
    const refenc_input in = {.B = c->B, .L = c->L, .x = c->x, .key_padding_mask = c->pad};
    prop_encoder_run(y, &k, &c->p, &c->cfg, &in);
    const double *h = k.layer_out[c->cfg.n_layers - 1];
    const double eps = c->cfg.layer_norm_eps;
    size_t bad = 0;
    for (size_t bl = 0; bl < BL; bl++) {
        /* the bound of LN(h_row) from its exact input h_row */
        fb_layernorm(ly, le, h + bl * D, NULL, ones, zeros, 1, D, eps);
        double sum = 0.0, sabs = 0.0, esum = 0.0, e2 = 0.0;
        for (size_t d = 0; d < D; d++) {
            sum += y[bl * D + d];
            sabs += fabs(y[bl * D + d]);
            esum += le[d];
            e2 += le[d] * le[d];
        }
        bad += !fb_within(w, sum / (double)D, esum / (double)D + test_gamma((double)D) * sabs / (double)D,
                          0.0, 0.0, "%s row %zu: mean", c->desc, bl);
        double my, emy, vy, evy, mh, emh, vh, evh;
        fb_moments(y + bl * D, D, &my, &emy, &vy, &evy);
        fb_moments(h + bl * D, D, &mh, &emh, &vh, &evh);
        const double en = sqrt(e2), ratio = vh / (vh + eps), vlo = fmax(0.0, vh - evh);
        bad += !fb_within(w, vy, evy + en * (2.0 * sqrt((double)D * vy) + en) / (double)D, ratio,
                          evh * eps / ((vlo + eps) * (vlo + eps)) + test_gamma(2) * ratio,
                          "%s row %zu: variance", c->desc, bl);
    }
    prop_capture_free(&k);
    free(y);
    free(ones);
    free(zeros);
    free(ly);
    free(le);
    return bad;
}

Test(structure, pre_ln_stack_output_is_layer_normalised)
{
    gsl_rng *r = test_rng(709);
    prop_opts o;
    prop_opts_default(&o);
    o.norm = REFENC_NORM_PRE;
    o.max_layers = 3;
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 12; t++) {
        prop_case c;
        o.positional = all_schemes[t % 5];
        prop_case_random(&c, r, t, &o);
        bad += check_normalised(&w, &c);
        /* negative control: the same stack without its final norm; some row
         * with D >= 2 must be flagged */
        c.cfg.final_norm = 0;
        test_worst wc;
        test_worst_init(&wc);
        if (c.cfg.d_model >= 2)
            cr_assert_gt(check_normalised(&wc, &c), 0,
                         "negative control: a Pre-LN stack without final norm was normalised (%s)",
                         c.desc);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu output rows of Pre-LN stacks are not layer-normalised: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* ------------------------------------------------------------------------
 * The encoder (encoder.h) equals the composition of its public stages
 * recomputed in fwdbound.c (PE, then per layer the LayerNorms, projections,
 * head split, RoPE, attention, merge, output projection, residuals, FFN,
 * then the final norm), bitwise, for every scheme, norm placement, mask and
 * activation.  This is the precondition of every bound in this directory.
 * Negative control: the composition for the other norm placement differs. */
Test(structure, encoder_is_the_composition_of_its_stages)
{
    gsl_rng *r = test_rng(710);
    prop_opts o;
    prop_opts_default(&o);
    o.max_len = 24;
    o.max_layers = 3;
    for (size_t t = 0; t < 20; t++) {
        prop_case c;
        o.positional = all_schemes[t % 5];
        o.causal = t % 4 == 1;
        prop_case_random(&c, r, t, &o);
        const size_t BLD = c.B * c.L * c.cfg.d_model;
        double *y = prop_calloc(BLD, sizeof(double));
        const refenc_input in = {.B = c.B, .L = c.L, .x = c.x, .key_padding_mask = c.pad};
        fb_norms nm;
        fb_result f;
        prop_capture k = {0};
        fb_norms_compute(&nm, &c.p, &c.cfg);
        prop_encoder_run(y, &k, &c.p, &c.cfg, &in);
        fb_encoder(&f, &c.p, &c.cfg, &in, &nm);
        size_t diff = count_unequal(y, f.y, BLD);
        for (size_t n = 0; n < f.N; n++)
            diff += count_unequal(k.weights[n], f.w[n], f.BHLL);
        cr_assert_eq(diff, 0, "%s: %zu values differ from the composition of the stages: %s",
                     c.desc, diff, first_diff);
        fb_result_free(&f);
        refenc_config other = c.cfg;
        other.norm = other.norm == REFENC_NORM_PRE ? REFENC_NORM_POST : REFENC_NORM_PRE;
        fb_encoder(&f, &c.p, &other, &in, &nm);
        cr_assert_gt(count_unequal(y, f.y, BLD), 0,
                     "negative control: the other placement's composition matched (%s)", c.desc);
        fb_result_free(&f);
        prop_capture_free(&k);
        fb_norms_free(&nm);
        free(y);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
}
