/* The backward in emulated precision (emulate_backward.h): the structure of
 * refenc_encoder_backward, refenc_layer_backward, refenc_gqa_backward and
 * the norms' and FFNs' backwards (ref/encoder.c, layer.c, mha.c, layernorm.c,
 * rmsnorm.c, ffn.c, glu.c, rope.c), each kernel the reference's formula with
 * its sums in the acc format and its stored outputs in the value format. */
#include "emulate_backward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../activation.h"
#include "../attention.h"
#include "../core/alloc.h"
#include "../embedding.h"
#include "../glu.h"
#include "../encoder.h"
#include "../layer_pattern.h"
#include "../mha.h"
#include "../position_ids.h"
#include "emulate.h"
#include "emulate_kernels.h"

/* ---- kernels ---------------------------------------------------------------------- */

/* acc + t in the acc format, t itself rounded to it first (a product of two
 * 16-bit values is exact in float32: only the sum rounds then) */
static double acc_add(const refenc_emulation *e, double acc, double t)
{
    return emu_a(e, acc + emu_a(e, t));
}

/* dx (N, in) = dy (N, out) W (out, in), stored;  dW (out, in) += dy^T x and
 * db (out) += sum_n dy_n, each summed over the N tokens in the acc format and
 * stored once.  mW += 2 sum_n |dy x|, mb += sum_n |dy| (the growth terms). */
static void linear_backward(const refenc_emulation *e, double *dx, double *dW, double *db, double *mW,
                            double *mb, const double *dy, const double *x, const double *W, size_t N,
                            size_t in, size_t out)
{
    for (size_t n = 0; dx != NULL && n < N; n++)
        for (size_t i = 0; i < in; i++) {
            double acc = 0.0;
            for (size_t o = 0; o < out; o++)
                acc = acc_add(e, acc, dy[n * out + o] * W[o * in + i]);
            dx[n * in + i] = emu_v(e, acc);
        }
    for (size_t o = 0; o < out; o++) {
        for (size_t i = 0; i < in; i++) {
            double acc = 0.0, m = 0.0;
            for (size_t n = 0; n < N; n++) {
                const double t = dy[n * out + o] * x[n * in + i];
                acc = acc_add(e, acc, t);
                m += 2.0 * fabs(t);
            }
            dW[o * in + i] = emu_v(e, dW[o * in + i] + acc);
            mW[o * in + i] += m;
        }
        if (db == NULL)
            continue;
        double acc = 0.0, m = 0.0;
        for (size_t n = 0; n < N; n++) {
            acc = acc_add(e, acc, dy[n * out + o]);
            m += fabs(dy[n * out + o]);
        }
        db[o] = emu_v(e, db[o] + acc);
        mb[o] += m;
    }
}

/* LayerNorm's backward (ref/layernorm.c), per row, in the acc format:
 *   x^ = (x - mu)/sd,  g = dy gamma,  dx = (g - mean(g) - x^ mean(g x^)) / sd  (stored);
 *   dgamma += sum_n dy x^,  dbeta += sum_n dy  (summed over the rows, stored once).
 * mu and sd as emu_layernorm forms them.  dx may alias dy.  sums (2D): scratch. */
static void layernorm_backward(const refenc_emulation *e, double *dx, double *dgamma, double *dbeta,
                               double *mg, double *mb, double *sums, const double *dy, const double *x,
                               const double *gamma, size_t N, size_t D, double eps)
{
    double *sdg = sums, *sdb = sums + D;
    for (size_t d = 0; d < 2 * D; d++)
        sums[d] = 0.0;
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D, *dy_n = dy + n * D;
        double *dx_n = dx + n * D;
        double sum = 0.0;
        for (size_t d = 0; d < D; d++)
            sum = emu_a(e, sum + x_n[d]);
        const double mu = emu_a(e, sum / (double)D);
        double ss = 0.0;
        for (size_t d = 0; d < D; d++) {
            const double dev = emu_a(e, x_n[d] - mu);
            ss = emu_a(e, ss + emu_a(e, dev * dev));
        }
        const double sd = emu_a(e, sqrt(emu_a(e, emu_a(e, ss / (double)D) + eps)));
        double sg = 0.0, sgx = 0.0;
        for (size_t d = 0; d < D; d++) {
            const double xhat = emu_a(e, emu_a(e, x_n[d] - mu) / sd);
            const double g = emu_a(e, dy_n[d] * gamma[d]);
            sg = emu_a(e, sg + g);
            sgx = acc_add(e, sgx, g * xhat);
            sdg[d] = acc_add(e, sdg[d], dy_n[d] * xhat);
            mg[d] += 2.0 * fabs(dy_n[d] * xhat);
            if (dbeta != NULL) {
                sdb[d] = emu_a(e, sdb[d] + dy_n[d]);
                mb[d] += fabs(dy_n[d]);
            }
        }
        const double mgm = emu_a(e, sg / (double)D), mgx = emu_a(e, sgx / (double)D);
        for (size_t d = 0; d < D; d++) {
            const double xhat = emu_a(e, emu_a(e, x_n[d] - mu) / sd);
            const double g = emu_a(e, dy_n[d] * gamma[d]);
            const double num = emu_a(e, emu_a(e, g - mgm) - emu_a(e, xhat * mgx));
            dx_n[d] = emu_v(e, num / sd);
        }
    }
    for (size_t d = 0; d < D; d++) {
        dgamma[d] = emu_v(e, dgamma[d] + sdg[d]);
        if (dbeta != NULL)
            dbeta[d] = emu_v(e, dbeta[d] + sdb[d]);
    }
}

/* RMSNorm's backward (ref/rmsnorm.c), per row, in the acc format:
 *   x^ = x / r,  g = dy s (s = w, or 1 + w in the acc format for Gemma's offset),
 *   dx = (g - x^ mean(g x^)) / r  (stored);  dw += sum_n dy x^  (summed over the
 *   rows, stored once).  r as emu_rmsnorm forms it.  dx may alias dy.  sums (D): scratch. */
static void rmsnorm_backward(const refenc_emulation *e, double *dx, double *dw, double *mw, double *sums,
                             const double *dy, const double *x, const double *w, size_t N, size_t D,
                             double eps, int offset)
{
    for (size_t d = 0; d < D; d++)
        sums[d] = 0.0;
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D, *dy_n = dy + n * D;
        double *dx_n = dx + n * D;
        double ss = 0.0;
        for (size_t d = 0; d < D; d++)
            ss = emu_a(e, ss + emu_a(e, x_n[d] * x_n[d]));
        const double r = emu_a(e, sqrt(emu_a(e, emu_a(e, ss / (double)D) + eps)));
        double sgx = 0.0;
        for (size_t d = 0; d < D; d++) {
            const double xhat = emu_a(e, x_n[d] / r);
            const double s = offset ? emu_a(e, 1.0 + w[d]) : w[d];
            const double g = emu_a(e, dy_n[d] * s);
            sgx = acc_add(e, sgx, g * xhat);
            sums[d] = acc_add(e, sums[d], dy_n[d] * xhat);
            mw[d] += 2.0 * fabs(dy_n[d] * xhat);
        }
        const double mgx = emu_a(e, sgx / (double)D);
        for (size_t d = 0; d < D; d++) {
            const double xhat = emu_a(e, x_n[d] / r);
            const double s = offset ? emu_a(e, 1.0 + w[d]) : w[d];
            const double g = emu_a(e, dy_n[d] * s);
            dx_n[d] = emu_v(e, emu_a(e, g - emu_a(e, xhat * mgx)) / r);
        }
    }
    for (size_t d = 0; d < D; d++)
        dw[d] = emu_v(e, dw[d] + sums[d]);
}

/* One head's backward (ref/attention.c's head_backward): D_i in the acc
 * format (inside the kernel, as FlashAttention and softmax's backward keep
 * it); dP, dS, dq, dk, dv stored. */
static void head_backward(const refenc_emulation *e, double *dq, double *dk, double *dv, double *dP,
                          double *dS, double *Drow, const double *dO, const double *q, const double *k,
                          const double *v, const double *P, const double *O, const uint8_t *pad,
                          int causal, size_t L, size_t Dh, double divisor)
{
    for (size_t i = 0; i < L; i++) {
        double Di = 0.0;
        for (size_t d = 0; d < Dh; d++)
            Di = acc_add(e, Di, dO[i * Dh + d] * O[i * Dh + d]);
        Drow[i] = Di;
        for (size_t j = 0; j < L; j++) {
            double dp = 0.0;
            for (size_t d = 0; d < Dh; d++)
                dp = acc_add(e, dp, dO[i * Dh + d] * v[j * Dh + d]);
            dP[i * L + j] = emu_v(e, dp);
            const int replaced = (pad != NULL && pad[j]) || (causal && j > i);
            /* softmax's backward reads the stored dP and P, its row term in acc */
            dS[i * L + j] = replaced ? 0.0 : emu_v(e, P[i * L + j] * emu_a(e, dP[i * L + j] - Di));
        }
    }
    for (size_t j = 0; j < L; j++)
        for (size_t d = 0; d < Dh; d++) {
            double av = 0.0, ak = 0.0;
            for (size_t i = 0; i < L; i++) {
                av = acc_add(e, av, P[i * L + j] * dO[i * Dh + d]);
                ak = acc_add(e, ak, dS[i * L + j] * q[i * Dh + d]);
            }
            dv[j * Dh + d] = emu_v(e, av);
            dk[j * Dh + d] = emu_v(e, ak / divisor);
        }
    for (size_t i = 0; i < L; i++)
        for (size_t d = 0; d < Dh; d++) {
            double aq = 0.0;
            for (size_t j = 0; j < L; j++)
                aq = acc_add(e, aq, dS[i * L + j] * k[j * Dh + d]);
            dq[i * Dh + d] = emu_v(e, aq / divisor);
        }
}

/* ---- blocks ----------------------------------------------------------------------- */

/* Everything one backward needs besides the case. */
typedef struct {
    const refenc_emulation *e;
    const refenc_case *c;
    refenc_params *grad, *mag;  /* the gradients and their growth terms, the parameters' layout */
    double *sums;               /* (2D) the norms' column sums                                */
} emu_bwd;

/* The gated FFN's backward (ref/glu.c): dh = dy W2 (stored), then the
 * elementwise kernels da = fl(dh b) act'(a) and db = dh act(a) (act' and act
 * in the acc format as the forward's kernel, the products stored), d[a | b]
 * in linear1's row order (the gate half first or second), dx = d[a | b] W1.
 * a = x Wg^T + bg recomputed as the forward's emu_linear; hidden (N, 2F)
 * holds h and b as the forward stored them.  pre: a, dh; dpre: d[a | b]. */
static void glu_backward(const emu_bwd *r, double *dx, const refenc_layer_params *dlp,
                         const refenc_layer_params *mlp, refenc_layer_grad_work *g, const double *dy,
                         const double *x, const double *hidden, const refenc_layer_params *lp, size_t N)
{
    const refenc_emulation *e = r->e;
    const refenc_config *cfg = &r->c->cfg;
    const size_t D = cfg->d_model, F = cfg->d_ff, NF = N * F;
    const size_t go = cfg->glu_gate == REFENC_GLU_GATE_FIRST ? 0 : F, uo = F - go;
    const double *Wg, *bg, *Wu, *bu, *b = hidden + NF;
    refenc_glu_halves(&Wg, &bg, &Wu, &bu, lp->linear1_weight, lp->linear1_bias, D, F, cfg->glu_gate);
    double *a = g->pre, *dh = g->pre + NF;
    emu_linear(e, a, x, Wg, bg, N, D, F);
    linear_backward(e, dh, dlp->linear2_weight, dlp->linear2_bias, mlp->linear2_weight, mlp->linear2_bias, dy,
                    hidden, lp->linear2_weight, N, F, D);
    for (size_t n = 0; n < N; n++)
        for (size_t f = 0; f < F; f++) {
            const size_t i = n * F + f;
            double act;
            emu_activation(e, &act, &a[i], 1, cfg->activation); /* act(a) as the forward stored it */
            const double dhb = emu_v(e, dh[i] * b[i]);
            g->dpre[n * 2 * F + go + f] =
                emu_v(e, dhb * emu_a(e, refenc_activation_derivative(a[i], cfg->activation)));
            g->dpre[n * 2 * F + uo + f] = emu_v(e, dh[i] * act);
        }
    linear_backward(e, dx, dlp->linear1_weight, dlp->linear1_bias, mlp->linear1_weight, mlp->linear1_bias,
                    g->dpre, x, lp->linear1_weight, N, D, 2 * F);
}

/* The MLP's backward (ref/ffn.c): dh = dy W2, da = dh act'(a), dx = da W1;
 * a = x W1^T + b1 recomputed as the forward's emu_linear, hidden = act(a)
 * as the forward stored it. */
static void ffn_backward(const emu_bwd *r, double *dx, const refenc_layer_params *dlp,
                         const refenc_layer_params *mlp, refenc_layer_grad_work *g, const double *dy,
                         const double *x, const double *hidden, const refenc_layer_params *lp, size_t N)
{
    const refenc_emulation *e = r->e;
    const refenc_config *cfg = &r->c->cfg;
    const size_t D = cfg->d_model, F = cfg->d_ff;
    if (cfg->ffn_type == REFENC_FFN_GLU) {
        glu_backward(r, dx, dlp, mlp, g, dy, x, hidden, lp, N);
        return;
    }
    emu_linear(e, g->pre, x, lp->linear1_weight, lp->linear1_bias, N, D, F);
    linear_backward(e, g->dpre, dlp->linear2_weight, dlp->linear2_bias, mlp->linear2_weight, mlp->linear2_bias,
                    dy, hidden, lp->linear2_weight, N, F, D);
    for (size_t i = 0; i < N * F; i++) /* an elementwise kernel: act' in acc, the product stored */
        g->dpre[i] = emu_v(e, g->dpre[i] * emu_a(e, refenc_activation_derivative(g->pre[i], cfg->activation)));
    linear_backward(e, dx, dlp->linear1_weight, dlp->linear1_bias, mlp->linear1_weight, mlp->linear1_bias,
                    g->dpre, x, lp->linear1_weight, N, D, F);
}

/* The gradient of the key (or value) projection dk (B, L, Hkv Dh) from that
 * of the repeated heads dkh (B, H, L, Dh): key/value head j served query
 * heads j g .. j g + g - 1 (gqa.h), so dk[b, l, j Dh + d] = sum_i dkh[b,
 * j g + i, l, d], summed in the acc format and stored once. */
static void kv_heads_backward(const refenc_emulation *e, double *dk, const double *dkh, size_t B, size_t L,
                              size_t H, size_t Hkv, size_t Dh)
{
    const size_t gs = H / Hkv, Ekv = Hkv * Dh;
    if (Hkv == H) {
        refenc_heads_merge(dk, dkh, B, L, H, Dh);
        return;
    }
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++)
            for (size_t j = 0; j < Hkv; j++)
                for (size_t d = 0; d < Dh; d++) {
                    double acc = 0.0;
                    for (size_t i = 0; i < gs; i++)
                        acc = emu_a(e, acc + dkh[((b * H + j * gs + i) * L + l) * Dh + d]);
                    dk[(b * L + l) * Ekv + j * Dh + d] = emu_v(e, acc);
                }
}

/* Grouped-query attention's backward (ref/mha.c, refenc_gqa_backward) from
 * the forward's stored buffers w: H query heads and Hkv key/value heads of
 * width Dh (gqa.h; multi-head attention when Hkv = H, Dh = D / H);
 * kv_heads_backward sums a key/value head's gradient over its query heads. */
static void mha_backward(const emu_bwd *r, double *dx, const refenc_layer_params *dlp,
                         const refenc_layer_params *mlp, refenc_mha_grad_work *g, const double *dy,
                         const double *x, const refenc_mha_work *w, const refenc_layer_params *lp,
                         const refenc_attn_options *opt, const refenc_rope_options *rope)
{
    const refenc_emulation *e = r->e;
    const refenc_config *cfg = &r->c->cfg;
    const size_t B = r->c->B, L = r->c->L, D = cfg->d_model, H = cfg->n_heads, BL = B * L;
    const size_t Hkv = refenc_config_kv_heads(cfg), Dh = refenc_config_head_dim(cfg), E = H * Dh, Ekv = Hkv * Dh;
    linear_backward(e, g->dctx, dlp->out_proj_weight, dlp->out_proj_bias, mlp->out_proj_weight,
                    mlp->out_proj_bias, dy, w->ctx, lp->out_proj_weight, BL, E, D);
    refenc_heads_split(g->dctxh, g->dctx, B, L, H, Dh);
    const double divisor = refenc_attention_divisor(opt, Dh);
    for (size_t b = 0; b < B; b++) {
        const uint8_t *pad_b = opt->key_padding_mask ? opt->key_padding_mask + b * L : NULL;
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h, hd = bh * L * Dh, ll = bh * L * L;
            head_backward(e, g->dqh + hd, g->dkh + hd, g->dvh + hd, g->dP + ll, g->dS + ll, g->Drow + bh * L,
                          g->dctxh + hd, w->qh + hd, w->kh + hd, w->vh + hd, w->weights + ll, w->ctxh + hd,
                          pad_b, opt->causal, L, Dh, divisor);
        }
    }
    if (rope != NULL) { /* the transpose of the forward's rotation, its tables (scaled, partial) */
        emu_rope_backward(e, g->dqh, g->dqh, rope->positions, B * H, L, Dh, rope->base, rope->layout, rope->scaling);
        emu_rope_backward(e, g->dkh, g->dkh, rope->positions, B * H, L, Dh, rope->base, rope->layout, rope->scaling);
    }
    refenc_heads_merge(g->dq, g->dqh, B, L, H, Dh);
    kv_heads_backward(e, g->dk, g->dkh, B, L, H, Hkv, Dh);
    kv_heads_backward(e, g->dv, g->dvh, B, L, H, Hkv, Dh);
    /* in_proj is one linear map of E + 2 Ekv outputs (rows: W_q [0, E), W_k
     * [E, E + Ekv), W_v [E + Ekv, E + 2 Ekv)): dx = the sum over its rows in one sum */
    const double *dp[3] = {g->dq, g->dk, g->dv};
    const size_t row[3] = {0, E, E + Ekv}, out[3] = {E, Ekv, Ekv};
    for (size_t n = 0; n < BL; n++)
        for (size_t i = 0; i < D; i++) {
            double acc = 0.0;
            for (size_t p = 0; p < 3; p++)
                for (size_t o = 0; o < out[p]; o++)
                    acc = acc_add(e, acc, dp[p][n * out[p] + o] * lp->in_proj_weight[(row[p] + o) * D + i]);
            dx[n * D + i] = emu_v(e, acc);
        }
    for (size_t p = 0; p < 3; p++) {
        double *db = dlp->in_proj_bias != NULL ? dlp->in_proj_bias + row[p] : NULL;
        linear_backward(e, NULL, dlp->in_proj_weight + row[p] * D, db, mlp->in_proj_weight + row[p] * D,
                        mlp->in_proj_bias != NULL ? mlp->in_proj_bias + row[p] : NULL, dp[p], x,
                        lp->in_proj_weight + row[p] * D, BL, D, out[p]);
    }
}

static void ln_backward(const emu_bwd *r, double *dx, double *dgamma, double *dbeta, double *mg, double *mb,
                        const double *dy, const double *x, const double *gamma, double eps)
{
    const refenc_config *cfg = &r->c->cfg;
    if (cfg->norm_type == REFENC_NORMTYPE_RMSNORM)
        rmsnorm_backward(r->e, dx, dgamma, mg, r->sums, dy, x, gamma, r->c->B * r->c->L, cfg->d_model, eps,
                         cfg->rmsnorm_offset);
    else
        layernorm_backward(r->e, dx, dgamma, dbeta, mg, mb, r->sums, dy, x, gamma, r->c->B * r->c->L,
                           cfg->d_model, eps);
}

/* refenc_layer_backward: the layer's forward recomputed into w, then Pre-LN's
 * or Post-LN's backward (ref/layer.c), the residual sums stored. */
static void layer_backward(const emu_bwd *r, double *dx, refenc_layer_grad_work *g, refenc_layer_work *w,
                           const double *dy, const double *x, const refenc_attn_options *opt,
                           const refenc_rope_options *rope, size_t i)
{
    const refenc_emulation *e = r->e;
    const refenc_config *cfg = &r->c->cfg;
    const refenc_layer_params *lp = &r->c->params.layers[i];
    const refenc_layer_params *dlp = &r->grad->layers[i], *mlp = &r->mag->layers[i];
    const size_t BL = r->c->B * r->c->L, D = cfg->d_model;
    const double eps = cfg->layer_norm_eps;
    refenc_emulation_layer_forward(e, g->y, w, x, r->c, opt, rope, i);
    if (cfg->norm == REFENC_NORM_PRE) {
        emu_norm(e, g->a, x, lp->norm1_weight, lp->norm1_bias, BL, D, eps, cfg); /* LN1(x), as the forward */
        ffn_backward(r, g->d1, dlp, mlp, g, dy, w->ln, w->hidden, lp, BL);
        ln_backward(r, g->d1, dlp->norm2_weight, dlp->norm2_bias, mlp->norm2_weight, mlp->norm2_bias, g->d1,
                    w->resid, lp->norm2_weight, eps);
        emu_add(e, g->d1, dy, g->d1, BL * D);
        mha_backward(r, g->d2, dlp, mlp, &g->mha, g->d1, g->a, &w->mha, lp, opt, rope);
        ln_backward(r, g->d2, dlp->norm1_weight, dlp->norm1_bias, mlp->norm1_weight, mlp->norm1_bias, g->d2, x,
                    lp->norm1_weight, eps);
        emu_add(e, dx, g->d1, g->d2, BL * D);
    } else {
        emu_add(e, g->a, x, w->attn, BL * D); /* r1 = x + MHA(x), as the forward */
        ln_backward(r, g->d1, dlp->norm2_weight, dlp->norm2_bias, mlp->norm2_weight, mlp->norm2_bias, dy,
                    w->resid, lp->norm2_weight, eps);
        ffn_backward(r, g->d2, dlp, mlp, g, g->d1, w->ln, w->hidden, lp, BL);
        emu_add(e, g->d2, g->d1, g->d2, BL * D);
        ln_backward(r, g->d2, dlp->norm1_weight, dlp->norm1_bias, mlp->norm1_weight, mlp->norm1_bias, g->d2,
                    g->a, lp->norm1_weight, eps);
        mha_backward(r, g->d3, dlp, mlp, &g->mha, g->d2, x, &w->mha, lp, opt, rope);
        emu_add(e, dx, g->d2, g->d3, BL * D);
    }
}

/* dtable[ids[n]] += s dx[n] over the tokens, in the acc format (each row's
 * sum then stored once by finish_table); mtable += |s dx|. */
static void scatter_add(const refenc_emulation *e, double *dtable, double *mtable, const double *dx,
                        const int64_t *ids, size_t N, size_t D, double s)
{
    for (size_t n = 0; n < N; n++)
        for (size_t d = 0; d < D; d++) {
            const size_t k = (size_t)ids[n] * D + d;
            dtable[k] = acc_add(e, dtable[k], dx[n * D + d] * s);
            mtable[k] += fabs(dx[n * D + d] * s);
        }
}

static void finish_table(const refenc_emulation *e, double *dtable, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dtable[i] = emu_v(e, dtable[i]);
}

/* The embedding path's backward (ref/encoder.c's embed_backward): LN_emb,
 * then the scatter-adds; dh is overwritten. */
static void embed_backward(const emu_bwd *r, double *dh, refenc_workspace *ws, const double *esum)
{
    const refenc_emulation *e = r->e;
    const refenc_case *c = r->c;
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model, V = cfg->vocab_size;
    refenc_params *gr = r->grad, *mg = r->mag;
    if (cfg->embedding_norm)
        ln_backward(r, dh, gr->embedding_norm_weight, gr->embedding_norm_bias, mg->embedding_norm_weight,
                    mg->embedding_norm_bias, dh, esum, c->params.embedding_norm_weight, cfg->embedding_norm_eps);
    if (cfg->positional == REFENC_POS_LEARNED) {
        const int64_t *pos = c->positions;
        if (cfg->position_ids == REFENC_POSIDS_ROBERTA) {
            refenc_position_ids_roberta(ws->ids, c->tokens, B, L, cfg->padding_idx);
            scatter_add(e, gr->pos_embedding, mg->pos_embedding, dh, ws->ids, B * L, D, 1.0);
        } else {
            for (size_t b = 0; b < B; b++) /* dP[pos[l]] += dy[b, l] */
                scatter_add(e, gr->pos_embedding, mg->pos_embedding, dh + b * L * D, pos, L, D, 1.0);
        }
        finish_table(e, gr->pos_embedding, cfg->max_len * D);
    }
    if (cfg->type_vocab_size > 0) {
        const int64_t *types = c->token_types;
        if (types == NULL) {
            memset(ws->ids, 0, B * L * sizeof(int64_t));
            types = ws->ids;
        }
        scatter_add(e, gr->token_type_embedding, mg->token_type_embedding, dh, types, B * L, D, 1.0);
        finish_table(e, gr->token_type_embedding, cfg->type_vocab_size * D);
    }
    if (V > 0) {
        const double s = cfg->scale_embedding ? refenc_embedding_normalizer(D, refenc_normalizer_bits(cfg->embedding_normalizer_dtype)) : 1.0;
        scatter_add(e, gr->embedding, mg->embedding, dh, c->tokens, B * L, D, s);
        finish_table(e, gr->embedding, V * D);
    }
}

/* The configs the gradient goldens hold (the oracle's backward refuses the
 * others, these two among them): the first key that is outside them, or NULL. */
const char *refenc_emulation_backward_unsupported(const refenc_config *cfg)
{
    if (cfg->skip_first_prenorm)
        return "skip_first_prenorm";
    if (cfg->embedding_normalizer_dtype != REFENC_NORMALIZER_EXACT)
        return "embedding_normalizer_dtype";
    return NULL;
}

static void emit(const refenc_grad_sink *sink, const char *name, const double *g, const double *mag, size_t n)
{
    if (sink != NULL && sink->fn != NULL)
        sink->fn(sink->ctx, name, g, mag, n);
}

/* Layer i's attention and RoPE options, as the stack's forward forms them. */
static void layer_opts(refenc_attn_options *opt, refenc_rope_options *rope, const refenc_case *c,
                       const double *slopes, size_t i)
{
    const refenc_config *cfg = &c->cfg;
    *opt = refenc_attn_options_of(cfg, c->key_padding_mask, c->attn_mask, c->positions, slopes);
    *rope = (refenc_rope_options){cfg->rope_layout, cfg->rope_base, c->positions, &cfg->rope_scaling};
    refenc_layer_options(cfg, i, opt, rope);
}

/* The stack's backward (refenc_encoder_backward_traced) in the emulation. */
static void encoder_backward(emu_bwd *r, refenc_grad_workspace *g, refenc_workspace *ws, double *dy,
                             const double *slopes, const refenc_grad_sink *sink)
{
    const refenc_emulation *e = r->e;
    const refenc_case *c = r->c;
    const refenc_config *cfg = &c->cfg;
    const refenc_params *p = &c->params;
    const size_t B = c->B, L = c->L, D = cfg->d_model, BLD = B * L * D, N = cfg->n_layers;
    const int has_rope = cfg->positional == REFENC_POS_ROPE;
    /* the forward again, keeping each layer's input */
    refenc_emulation_embed_sum(e, g->e, ws, c);
    if (cfg->embedding_norm)
        emu_norm(e, g->acts, g->e, p->embedding_norm_weight, p->embedding_norm_bias, B * L, D,
                 cfg->embedding_norm_eps, cfg);
    else
        memcpy(g->acts, g->e, BLD * sizeof(double));
    refenc_attn_options opt;
    refenc_rope_options rope;
    for (size_t i = 0; i < N; i++) {
        layer_opts(&opt, &rope, c, slopes, i);
        refenc_emulation_layer_forward(e, g->acts + (i + 1) * BLD, &ws->layer, g->acts + i * BLD, c, &opt,
                                       has_rope ? &rope : NULL, i);
    }
    double *dh = g->dh0, *dnext = g->dh1;
    if (cfg->final_norm)
        ln_backward(r, dh, r->grad->norm_weight, r->grad->norm_bias, r->mag->norm_weight, r->mag->norm_bias, dy,
                    g->acts + N * BLD, p->norm_weight, cfg->layer_norm_eps);
    else
        memcpy(dh, dy, BLD * sizeof(double));
    for (size_t i = N; i-- > 0;) {
        char name[48];
        snprintf(name, sizeof name, "layers.%zu.output", i);
        emit(sink, name, dh, NULL, BLD);
        layer_opts(&opt, &rope, c, slopes, i);
        layer_backward(r, dnext, &g->layer, &ws->layer, dh, g->acts + i * BLD, &opt, has_rope ? &rope : NULL, i);
        double *t = dh;
        dh = dnext;
        dnext = t;
    }
    emit(sink, "embed", dh, NULL, BLD);
    embed_backward(r, dh, ws, g->e);
    if (c->x != NULL)
        emit(sink, "x", dh, NULL, BLD);
}

int refenc_emulation_backward_case(const refenc_case *c, const double *dY, const refenc_emulation *e,
                                   const refenc_grad_sink *sink, refenc_error *err)
{
    const refenc_config *cfg = &c->cfg;
    int st = refenc_case_validate(c, err);
    if (st)
        return st;
    if (c->component != REFENC_COMP_ENCODER)
        return refenc_error_set(err, REFENC_EINVAL, "case %s: gradients are computed for the encoder only", c->name);
    const char *key = refenc_emulation_backward_unsupported(cfg);
    if (key != NULL)
        return refenc_error_set(err, REFENC_EINVAL, "config: the emulated backward does not support %s (the "
                                "gradient goldens do not hold it)", key);
    const size_t B = c->B, L = c->L, D = cfg->d_model, H = cfg->n_heads, BLD = B * L * D;
    refenc_workspace ws;
    refenc_grad_workspace g;
    refenc_params grad, mag;
    memset(&ws, 0, sizeof ws);
    memset(&g, 0, sizeof g);
    memset(&grad, 0, sizeof grad);
    memset(&mag, 0, sizeof mag);
    double *dy = NULL, *sums = NULL, *slopes = NULL;
    st = refenc_workspace_alloc(&ws, cfg, B, L, err);
    if (st == REFENC_OK)
        st = refenc_grad_workspace_alloc(&g, cfg, B, L, err);
    if (st == REFENC_OK)
        st = refenc_params_alloc(&grad, cfg, err);
    if (st == REFENC_OK)
        st = refenc_params_alloc(&mag, cfg, err);
    if (st == REFENC_OK) {
        dy = refenc_alloc_array(BLD, sizeof *dy);
        sums = refenc_alloc_array(2 * D, sizeof *sums);
        slopes = refenc_alloc_array(H, sizeof *slopes);
        if (dy == NULL || sums == NULL || slopes == NULL)
            st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for the emulated backward", c->name);
    }
    if (st == REFENC_OK) {
        for (size_t i = 0; i < BLD; i++) /* the upstream gradient, as an implementation reads it */
            dy[i] = emu_v(e, dY[i]);
        emu_alibi_slopes(e, slopes, H, 0);
        emu_bwd r = {e, c, &grad, &mag, sums};
        encoder_backward(&r, &g, &ws, dy, slopes, sink);
        for (size_t t = 0; t < grad.n_tensors; t++)
            emit(sink, grad.tensors[t].name, grad.tensors[t].data, mag.tensors[t].data, grad.tensors[t].size);
    }
    free(dy);
    free(sums);
    free(slopes);
    refenc_params_free(&grad);
    refenc_params_free(&mag);
    refenc_grad_workspace_free(&g);
    refenc_workspace_free(&ws);
    return st;
}
