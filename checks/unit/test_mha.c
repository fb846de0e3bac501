/* Multi-head attention (ref/mha.h): nn.MultiheadAttention's packing of
 * in_proj_weight (3D, D) = [W_q; W_k; W_v] and in_proj_bias (3D), out_proj in
 * nn.Linear's (out, in) layout, and the head split/merge.
 *
 * Hand example, one head, D = 2, two tokens x0 = e0 = [1, 0], x1 = e1 = [0, 1],
 * so each projection of x_i is column i of its weight plus its bias:
 *   W_q = [[1, 0], [0, 0]],     b_q = [0, 1]       q0 = [1, 1],     q1 = [0, 1]
 *   W_k = [[0.5, 2], [1, -1]],  b_k = [0.125, -0.25]
 *                                                   k0 = [0.625, 0.75], k1 = [2.125, -1.25]
 *   W_v = [[1, 3], [-2, 0.5]],  b_v = [0.25, 0]    v0 = [1.25, -2], v1 = [3.25, 0.5]
 *   scores / sqrt 2 of q.k:  row 0 [1.375, 0.875], row 1 [0.75, -1.25]
 *   (b_k adds q_i . b_k to a whole row: it cannot change the weights)
 *   ctx_i = w_i0 v0 + w_i1 v1,   y_i = W_o ctx_i + b_o,  W_o = [[2, 0.5], [0, 1]], b_o = [0, -1]
 * The expected values are this computation in long double (hand_mha below,
 * written from the formulas, not from the code under test).
 *
 * Tolerance (u = 2^-53): projections and dot products are exact (short
 * dyadic values); from there on as in test_attention.c: weights within 16
 * ULPs (15.1u), ctx within 19u sum_j |w_j v_j|; then y = W_o ctx + b_o adds
 * sum_k |W_o[o,k]| err(ctx_k) and 3 roundings of the sum, and the reference
 * half ulp. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/mha.h"
#include "../../ref/rope.h"
#include "unit.h"

#define MHA_WEIGHT_ULPS 16
#define MHA_CTX_FACTOR (19 * TEST_U)

static const double X[4] = {1.0, 0.0, 0.0, 1.0};
/* in_proj_weight rows: W_q (2 rows), W_k (2 rows), W_v (2 rows) */
static const double IN_W[12] = {1.0, 0.0, 0.0, 0.0, 0.5, 2.0, 1.0, -1.0, 1.0, 3.0, -2.0, 0.5};
static const double IN_B[6] = {0.0, 1.0, 0.125, -0.25, 0.25, 0.0};
static const double OUT_W[4] = {2.0, 0.5, 0.0, 1.0}, OUT_B[2] = {0.0, -1.0};

/* One head, D = Dh = 2, L = 2, in long double from the formulas. */
typedef struct {
    long double w[4], ctx[4], y[4];
} mha_hand;

static void proj(long double out[2], const double W[4], const double b[2], const double x[2])
{
    for (int o = 0; o < 2; o++)
        out[o] = (long double)W[o * 2] * x[0] + (long double)W[o * 2 + 1] * x[1] + b[o];
}

static void hand_mha(mha_hand *r, const double *Wq, const double *bq, const double *Wk,
                     const double *bk, const double *Wv, const double *bv, int transpose_wo)
{
    long double q[2][2], k[2][2], v[2][2];
    for (int i = 0; i < 2; i++) {
        proj(q[i], Wq, bq, X + 2 * i);
        proj(k[i], Wk, bk, X + 2 * i);
        proj(v[i], Wv, bv, X + 2 * i);
    }
    for (int i = 0; i < 2; i++) {
        long double s[2], m, e[2];
        for (int j = 0; j < 2; j++)
            s[j] = (q[i][0] * k[j][0] + q[i][1] * k[j][1]) / sqrtl(2.0L);
        m = s[0] > s[1] ? s[0] : s[1];
        e[0] = expl(s[0] - m), e[1] = expl(s[1] - m);
        for (int j = 0; j < 2; j++)
            r->w[i * 2 + j] = e[j] / (e[0] + e[1]);
        for (int d = 0; d < 2; d++)
            r->ctx[i * 2 + d] = r->w[i * 2] * v[0][d] + r->w[i * 2 + 1] * v[1][d];
        for (int o = 0; o < 2; o++) {
            const long double w0 = transpose_wo ? OUT_W[o] : OUT_W[o * 2];
            const long double w1 = transpose_wo ? OUT_W[2 + o] : OUT_W[o * 2 + 1];
            r->y[i * 2 + o] = w0 * r->ctx[i * 2] + w1 * r->ctx[i * 2 + 1] + OUT_B[o];
        }
    }
}

/* |v| per token for the ctx tolerance */
static void hand_v(long double v[2][2])
{
    for (int i = 0; i < 2; i++)
        proj(v[i], IN_W + 8, IN_B + 4, X + 2 * i);
}

typedef struct {
    double q[4], k[4], v[4], qh[4], kh[4], vh[4], ctxh[4], ctx[4], weights[4];
} mha_buffers;

static void run_mha(double y[4], mha_buffers *b, const refenc_rope_options *rope)
{
    refenc_mha_work w = {b->q, b->k, b->v, b->qh, b->kh, b->vh, b->ctxh, b->ctx, b->weights};
    const refenc_attn_options opt = {.temperature = 1.0};
    refenc_mha_forward(y, &w, X, IN_W, IN_B, OUT_W, OUT_B, &opt, rope, 1, 2, 2, 1);
}

Test(mha, in_proj_rows_are_q_then_k_then_v_and_out_proj_is_out_by_in)
{
    double y[4];
    mha_buffers b;
    run_mha(y, &b, NULL);
    mha_hand want, qk_swapped, kv_swapped, wo_transposed;
    hand_mha(&want, IN_W, IN_B, IN_W + 4, IN_B + 2, IN_W + 8, IN_B + 4, 0);
    hand_mha(&qk_swapped, IN_W + 4, IN_B + 2, IN_W, IN_B, IN_W + 8, IN_B + 4, 0);
    hand_mha(&kv_swapped, IN_W, IN_B, IN_W + 8, IN_B + 4, IN_W + 4, IN_B + 2, 0);
    hand_mha(&wo_transposed, IN_W, IN_B, IN_W + 4, IN_B + 2, IN_W + 8, IN_B + 4, 1);
    long double v[2][2];
    hand_v(v);

    for (int i = 0; i < 2; i++) {
        double ctx_tol[2];
        for (int d = 0; d < 2; d++) {
            const int id = i * 2 + d;
            EXPECT_ULPS(b.weights[id], (double)want.w[id], MHA_WEIGHT_ULPS, "weight[%d][%d]", i, d);
            ctx_tol[d] = MHA_CTX_FACTOR * (double)(fabsl(want.w[i * 2] * v[0][d]) +
                                                   fabsl(want.w[i * 2 + 1] * v[1][d]));
            EXPECT_ABS(b.ctx[id], (double)want.ctx[id], ctx_tol[d], "ctx[%d][%d]", i, d);
        }
        for (int o = 0; o < 2; o++) {
            const int io = i * 2 + o;
            const double s = fabs(OUT_W[o * 2] * (double)want.ctx[i * 2]) +
                             fabs(OUT_W[o * 2 + 1] * (double)want.ctx[i * 2 + 1]) + fabs(OUT_B[o]);
            const double tol = fabs(OUT_W[o * 2]) * ctx_tol[0] + fabs(OUT_W[o * 2 + 1]) * ctx_tol[1] +
                               3 * TEST_U * s + TEST_U * fabs((double)want.y[io]);
            EXPECT_ABS(y[io], (double)want.y[io], tol, "y[%d][%d]", i, o);
            /* negative controls: other packings give other outputs */
            EXPECT_ABS_REJECTS(y[io], (double)qk_swapped.y[io], tol, "q and k blocks swapped, y[%d][%d]", i, o);
            EXPECT_ABS_REJECTS(y[io], (double)kv_swapped.y[io], tol, "k and v blocks swapped, y[%d][%d]", i, o);
            if (o == 0) /* W_o transposed changes y[.][0] (the (0,1) entry 0.5 moves) */
                EXPECT_ABS_REJECTS(y[io], (double)wo_transposed.y[io], tol, "W_o transposed, y[%d][0]", i);
        }
    }
    /* the projections themselves: q = x W_q^T + b_q, exact */
    EXPECT_EXACT(b.q[0], 1.0, "q0[0]");
    EXPECT_EXACT(b.q[1], 1.0, "q0[1]");
    EXPECT_EXACT(b.k[2], 2.125, "k1[0]");
    EXPECT_EXACT(b.v[1], -2.0, "v0[1]");
}

/* RoPE at position 0 is the identity: bit-identical to no RoPE.  At
 * positions {0, 1} it changes the scores (a negative control that the
 * option is used). */
Test(mha, rope_at_position_zero_changes_nothing)
{
    double y0[4], y1[4];
    mha_buffers b0, b1;
    run_mha(y0, &b0, NULL);
    const int64_t zeros[2] = {0, 0}, steps[2] = {0, 1};
    const refenc_rope_options rope0 = {REFENC_ROPE_HALF, 10000.0, zeros, NULL};
    run_mha(y1, &b1, &rope0);
    cr_expect(memcmp(y0, y1, sizeof y0) == 0, "RoPE at position 0 changed the output");
    cr_expect(memcmp(b0.weights, b1.weights, sizeof b0.weights) == 0, "... or the weights");
    const refenc_rope_options rope1 = {REFENC_ROPE_HALF, 10000.0, steps, NULL};
    run_mha(y1, &b1, &rope1);
    cr_expect(memcmp(b0.weights, b1.weights, sizeof b0.weights) != 0, "RoPE at {0, 1} changed nothing");
    /* v is not rotated: the value projections are unchanged */
    cr_expect(memcmp(b0.vh, b1.vh, sizeof b0.vh) == 0, "RoPE rotated v");
    cr_expect(memcmp(b0.qh, b1.qh, sizeof b0.qh) != 0, "RoPE did not rotate q");
    cr_expect(memcmp(b0.kh, b1.kh, sizeof b0.kh) != 0, "RoPE did not rotate k");
}

/* Two heads, D = 4, Dh = 2: head h owns features [2h, 2h + 2).  W_q's rows
 * for head 0 are zero, so head 0's scores are all 0 and its weights exactly
 * 1/2; head 1's q and k read x's features 0, 1 and 2, 3:
 *   x0 = [1, 2, 0.5, 0], x1 = [0, -1, 1, 1]
 *   q (head 1) = [x_i0, x_i1], k (head 1) = [x_j2, x_j3]
 *   scores: row 0 [0.5, 3], row 1 [0, -1], divided by sqrt 2.
 * Had the split taken strided features (h, h + H), head 0 would see W_q's
 * nonzero row 2 and lose its uniform weights. */
Test(mha, heads_use_contiguous_feature_blocks)
{
    const double x[8] = {1.0, 2.0, 0.5, 0.0, 0.0, -1.0, 1.0, 1.0};
    double in_w[48] = {0}, in_b[12] = {0}, out_w[16] = {0}, out_b[4] = {0};
    in_w[2 * 4 + 0] = 1.0;     /* W_q row 2 (head 1, dim 0) reads x0 */
    in_w[3 * 4 + 1] = 1.0;     /* W_q row 3 (head 1, dim 1) reads x1 */
    in_w[(4 + 0) * 4 + 3] = 7.0; /* W_k rows of head 0: anything (q = 0 there) */
    in_w[(4 + 1) * 4 + 0] = -3.0;
    in_w[(4 + 2) * 4 + 2] = 1.0; /* W_k row 2 (head 1, dim 0) reads x2 */
    in_w[(4 + 3) * 4 + 3] = 1.0; /* W_k row 3 (head 1, dim 1) reads x3 */
    for (int d = 0; d < 4; d++)
        in_w[(8 + d) * 4 + d] = 1.0; /* W_v = I */
    double q[8], k[8], v[8], qh[8], kh[8], vh[8], ctxh[8], ctx[8], weights[8], y[8];
    refenc_mha_work w = {q, k, v, qh, kh, vh, ctxh, ctx, weights};
    const refenc_attn_options opt = {.temperature = 1.0};
    refenc_mha_forward(y, &w, x, in_w, in_b, out_w, out_b, &opt, NULL, 1, 2, 4, 2);

    for (int i = 0; i < 4; i++)
        EXPECT_EXACT(weights[i], 0.5, "head 0 weight[%d][%d]", i / 2, i % 2);
    /* head 1: row 0 logistic((0.5 - 3)/sqrt2) for key 0; row 1 logistic(1/sqrt2) for key 0 */
    const long double r2 = sqrtl(2.0L);
    const long double w00 = 1.0L / (1.0L + expl(2.5L / r2)), w10 = 1.0L / (1.0L + expl(-1.0L / r2));
    EXPECT_ULPS(weights[4], (double)w00, MHA_WEIGHT_ULPS, "head 1 weight[0][0]");
    EXPECT_ULPS(weights[5], (double)(1 - w00), MHA_WEIGHT_ULPS, "head 1 weight[0][1]");
    EXPECT_ULPS(weights[6], (double)w10, MHA_WEIGHT_ULPS, "head 1 weight[1][0]");
    EXPECT_ULPS(weights[7], (double)(1 - w10), MHA_WEIGHT_ULPS, "head 1 weight[1][1]");
    /* head 0 averages features 0, 1 of v (= x): ctx[i][0:2] = (x0 + x1)/2, exact */
    EXPECT_EXACT(ctx[0], 0.5, "ctx[0][0]");
    EXPECT_EXACT(ctx[1], 0.5, "ctx[0][1]");
    EXPECT_EXACT(ctx[4], 0.5, "ctx[1][0]");
    /* out_proj is zero: y = b_o = 0 */
    for (int i = 0; i < 8; i++)
        EXPECT_EXACT(y[i], 0.0, "y[%d]", i);
}

/* split: xh[b,h,l,:] = x[b,l,h*Dh:(h+1)*Dh]; merge is its inverse (exact copies). */
Test(mha, heads_split_moves_feature_blocks_to_the_head_axis_and_merge_inverts_it)
{
    enum { B = 2, L = 3, H = 2, Dh = 3, D = H * Dh };
    double x[B * L * D], xh[B * H * L * Dh], back[B * L * D];
    for (int i = 0; i < B * L * D; i++)
        x[i] = 0.5 * i + 0.25;
    refenc_heads_split(xh, x, B, L, H, Dh);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int l = 0; l < L; l++)
                for (int d = 0; d < Dh; d++)
                    EXPECT_EXACT(xh[((b * H + h) * L + l) * Dh + d], x[(b * L + l) * D + h * Dh + d],
                                 "xh[%d,%d,%d,%d]", b, h, l, d);
    /* negative control: the split is a transpose, not a reinterpretation of memory */
    cr_expect(memcmp(xh, x, sizeof x) != 0, "split left the memory as it was");
    refenc_heads_merge(back, xh, B, L, H, Dh);
    cr_expect(memcmp(back, x, sizeof x) == 0, "merge(split(x)) != x");
}
