/* Gradient properties of scaled dot-product attention with every mask kind
 * (gradcheck.h, docs/gradients.md).  The attention is run as multi-head
 * attention with identity projections, q = k = v = x split into heads and
 * out = the merged context, so that fb_mha (checks/common/fwdbound.h)
 * bounds its forward; the backward under test is the kernel table's
 * attention (and RoPE) backward, so the gradient with respect to x is
 * merge(dq) + merge(dk) + merge(dv). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "gradcheck.h"

#define U TEST_U
#define G test_gamma

enum { AB = 2, AL = 5, AH = 2, ADH = 4, AD = AH * ADH, N_CASES = 7 };

typedef struct {
    refenc_attn_options opt;
    refenc_rope_options rope;
    const refenc_rope_options *rope_p;
    uint8_t pad[AB * AL];
    double mask[AL * AL];
    int64_t pos[AL];
    double slopes[AH];
    int has_pad, fully_masked_item[AB]; /* an item with a row that sees no key */
    char desc[120];
} at_case;

/* The cases: none; key padding; causal; attn_mask with a column of -inf
 * and ALiBi; RoPE half + padding + finfo_min; RoPE interleaved + causal +
 * left padding (rows that see no key); finfo_min + causal + an item all
 * padding.  Temperatures 1, 0.8 and 1.3. */
static void at_case_make(at_case *c, size_t t, gsl_rng *r)
{
    memset(c, 0, sizeof *c);
    for (size_t l = 0; l < AL; l++)
        c->pos[l] = (int64_t)(l * 3 + 1);
    c->opt.temperature = t % 3 == 0 ? 1.0 : t % 3 == 1 ? 0.8 : 1.3;
    c->opt.positions = c->pos;
    static const uint8_t pads[4][AB * AL] = {
        {0, 0, 0, 1, 1, 1, 0, 0, 0, 0}, {0, 0, 0, 0, 1, 0, 1, 0, 0, 1},
        {0, 0, 0, 0, 0, 1, 1, 0, 0, 0}, {0, 0, 1, 0, 0, 1, 1, 1, 1, 1}};
    const int pad_kind = t == 1 ? 0 : t == 4 ? 1 : t == 5 ? 2 : t == 6 ? 3 : -1;
    if (pad_kind >= 0) {
        memcpy(c->pad, pads[pad_kind], sizeof c->pad);
        c->opt.key_padding_mask = c->pad;
        c->has_pad = 1;
    }
    c->opt.causal = t == 2 || t == 5 || t == 6;
    if (t == 3) {
        test_fill_gaussian(c->mask, AL * AL, 0.0, 1.0, r);
        for (size_t i = 0; i < AL; i++)
            c->mask[i * AL + AL - 1] = -INFINITY; /* key L-1 masked for every query */
        c->mask[0 * AL + 1] = -INFINITY;
        c->opt.attn_mask = c->mask;
        refenc_alibi_slopes(c->slopes, AH);
        c->opt.alibi_slopes = c->slopes;
    }
    c->opt.mask_value = t == 4 || t == 6 ? REFENC_MASK_FINFO_MIN : REFENC_MASK_NEG_INF;
    if (t == 4 || t == 5) {
        c->rope = (refenc_rope_options){t == 4 ? REFENC_ROPE_HALF : REFENC_ROPE_INTERLEAVED,
                                        10000.0, c->pos, NULL};
        c->rope_p = &c->rope;
    }
    /* left padding under the causal mask: query 0 of item 1 (t = 5); an item
     * all padding (t = 6) */
    c->fully_masked_item[1] = t == 5 || t == 6;
    snprintf(c->desc, sizeof c->desc, "attention case %zu (tau %g%s%s%s%s%s)", t,
             c->opt.temperature, c->has_pad ? ", padding" : "", c->opt.causal ? ", causal" : "",
             t == 3 ? ", attn_mask -inf + ALiBi" : "", c->rope_p ? ", RoPE" : "",
             c->opt.mask_value == REFENC_MASK_FINFO_MIN ? ", finfo_min" : "");
}

/* Identity projections and the buffers of one forward + backward. */
typedef struct {
    double in_w[3 * AD * AD], in_b[3 * AD], out_w[AD * AD], out_b[AD], nqkv[3 * AH];
    double q[AB * AL * AD], k[AB * AL * AD], v[AB * AL * AD], qh[AB * AL * AD], kh[AB * AL * AD],
        vh[AB * AL * AD], ctxh[AB * AL * AD], ctx[AB * AL * AD], weights[AB * AH * AL * AL];
    double y[AB * AL * AD], dO[AB * AL * AD], dq[AB * AL * AD], dk[AB * AL * AD], dv[AB * AL * AD];
    double dP[AB * AH * AL * AL], dS[AB * AH * AL * AL], Drow[AB * AH * AL];
    refenc_mha_work w;
} at_run;

static void at_run_init(at_run *a)
{
    memset(a, 0, sizeof *a);
    for (size_t p = 0; p < 3; p++)
        for (size_t i = 0; i < AD; i++)
            a->in_w[(p * AD + i) * AD + i] = 1.0;
    for (size_t i = 0; i < AD; i++)
        a->out_w[i * AD + i] = 1.0;
    for (size_t i = 0; i < 3 * AH; i++)
        a->nqkv[i] = 1.0; /* a head's rows of the identity: norm 1 */
    a->w = (refenc_mha_work){a->q, a->k, a->v, a->qh, a->kh, a->vh, a->ctxh, a->ctx, a->weights};
}

/* g (B, L, D) = d<dY, attention(x)>/dx through the kernels K; a keeps P, O,
 * dO, dP, dS, D_i and the per-head gradients dq, dk, dv. */
static void at_grad(double *g, at_run *a, const gc_kernels *K, const at_case *c, const double *x,
                    const double *dY)
{
    double tmp[AB * AL * AD];
    refenc_mha_forward(a->y, &a->w, x, a->in_w, a->in_b, a->out_w, a->out_b, &c->opt, c->rope_p,
                       AB, AL, AD, AH);
    refenc_heads_split(a->dO, dY, AB, AL, AH, ADH); /* out_proj = I: dctx = dY */
    K->attention(a->dq, a->dk, a->dv, a->dP, a->dS, a->Drow, a->dO, a->qh, a->kh, a->vh,
                 a->weights, a->ctxh, &c->opt, AB, AH, AL, ADH);
    refenc_heads_merge(g, a->dv, AB, AL, AH, ADH);
    double dq[AB * AL * AD], dk[AB * AL * AD];
    memcpy(dq, a->dq, sizeof dq);
    memcpy(dk, a->dk, sizeof dk);
    if (c->rope_p != NULL) {
        K->rope(dq, dq, c->pos, AB * AH, AL, ADH, c->rope.base, c->rope.layout);
        K->rope(dk, dk, c->pos, AB * AH, AL, ADH, c->rope.base, c->rope.layout);
    }
    refenc_heads_merge(tmp, dq, AB, AL, AH, ADH);
    for (size_t i = 0; i < AB * AL * AD; i++)
        g[i] += tmp[i];
    refenc_heads_merge(tmp, dk, AB, AL, AH, ADH);
    for (size_t i = 0; i < AB * AL * AD; i++)
        g[i] += tmp[i];
}

/* y(x + t v) and its row bounds (fb_mha), at t = h, -h, h/2, -h/2 */
static void at_forward_bounded(double *y, double *Ey, at_run *a, const at_case *c,
                               const double *x, const double *v, double t)
{
    double xt[AB * AL * AD], Ex[AB * AL] = {0}, w[AB * AH * AL * AL], ew[AB * AH * AL * AL];
    for (size_t i = 0; i < AB * AL * AD; i++)
        xt[i] = x[i] + t * v[i];
    fb_mha(y, Ey, w, ew, xt, Ex, a->in_w, a->in_b, a->out_w, a->out_b, &c->opt, c->rope_p, AB,
           AL, AD, AH, a->nqkv, 1.0);
}

/* The adjoint identity <dY, J v> = <J^T dY, v>: J v by central differences,
 * component by component, each with its budget (gc_central's, from the rows'
 * bounds); then for three upstream gradients dY, <dY, (J v)^> against
 * <g(dY), v> within sum_i |dY_i| tol_i and the two dot products' rounding. */
size_t gp_attention_adjoint(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { N = AB * AL * AD };
    size_t bad = 0;
    at_run *a = prop_calloc(1, sizeof *a);
    at_run_init(a);
    for (size_t t = 0; t < N_CASES; t++) {
        at_case c;
        at_case_make(&c, t, r);
        double x[N], v[N], jv[N], tol[N], yv[4][N], Ey[4][AB * AL];
        test_fill_gaussian(x, N, 0.0, 1.2, r);
        gc_quantize(x, N, GC_GRID_X);
        gc_direction(v, N, 1.0, r);
        const double h = GC_STEP, ts[4] = {h, -h, h / 2, -h / 2};
        for (size_t s = 0; s < 4; s++)
            at_forward_bounded(yv[s], Ey[s], a, &c, x, v, ts[s]);
        for (size_t i = 0; i < N; i++) {
            const size_t row = i / AD;
            const double d1 = (yv[0][i] - yv[1][i]) / (2 * h), d2 = (yv[2][i] - yv[3][i]) / h;
            const double rho1 = (Ey[0][row] + Ey[1][row]) / (2 * h) + U * fabs(d1);
            const double rho2 = (Ey[2][row] + Ey[3][row]) / h + U * fabs(d2);
            jv[i] = d2;
            tol[i] = (2.0 / 3.0) * fabs(d1 - d2) + (5.0 / 3.0) * rho2 + (2.0 / 3.0) * rho1;
        }
        for (size_t k = 0; k < 3; k++) {
            double dY[N], g[N], e1, e2;
            test_fill_gaussian(dY, N, 0.0, 1.0, r);
            at_grad(g, a, K, &c, x, dY);
            const double lhs = gc_dot(dY, jv, N, &e1), rhs = gc_dot(g, v, N, &e2);
            double budget = 0.0;
            for (size_t i = 0; i < N; i++)
                budget += fabs(dY[i]) * tol[i];
            bad += !test_worst_check(w, rhs, lhs, (budget + e1 + e2) * (1.0 + 0x1p-20),
                                     "%s, dY %zu: <J^T dY, v> against <dY, J v>", c.desc, k);
        }
    }
    free(a);
    return bad;
}

/* Per row i of every head: D_i = dO_i . O_i equals sum_j P_ij dP_ij (the
 * identity FlashAttention's backward rests on: sum_j P_ij v_j = O_i), and
 * sum_j dS_ij = D_i (1 - sum_j P_ij) = 0.  Bounds: eD = gamma_Dh sum|dO O^|
 * + sum_d |dO_d| gamma_L sum_j |P^ v_jd| + sum_j P^ gamma_Dh sum_d |dO_d v_jd|
 * (the three computed dot products against their exact values); the row's
 * weights sum to sigma = fl(sum P^) within gamma_L sigma of the exact sum of
 * P^, which is 1 within |1 - sigma| + gamma_L sigma; each dS^ within
 * gamma_2 |dS^| of P^ (dP^ - D^); the test's own sums gamma_L. */
size_t gp_attention_rows(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { N = AB * AL * AD };
    size_t bad = 0;
    at_run *a = prop_calloc(1, sizeof *a);
    at_run_init(a);
    for (size_t t = 0; t < N_CASES; t++) {
        at_case c;
        at_case_make(&c, t, r);
        double x[N], dY[N], g[N];
        test_fill_gaussian(x, N, 0.0, 1.2, r);
        test_fill_gaussian(dY, N, 0.0, 1.0, r);
        at_grad(g, a, K, &c, x, dY);
        for (size_t bh = 0; bh < AB * AH; bh++)
            for (size_t i = 0; i < AL; i++) {
                const double *P = a->weights + (bh * AL + i) * AL, *dP = a->dP + (bh * AL + i) * AL;
                const double *dS = a->dS + (bh * AL + i) * AL, *dO = a->dO + (bh * AL + i) * ADH;
                const double *O = a->ctxh + (bh * AL + i) * ADH, *V = a->vh + bh * AL * ADH;
                const double Di = a->Drow[bh * AL + i];
                double eD = 0.0, pdp = 0.0, apdp = 0.0, sig = 0.0, s = 0.0, as = 0.0;
                for (size_t d = 0; d < ADH; d++) {
                    double pv = 0.0;
                    for (size_t j = 0; j < AL; j++)
                        pv += fabs(P[j] * V[j * ADH + d]);
                    eD += G(ADH) * fabs(dO[d] * O[d]) + fabs(dO[d]) * G(AL) * pv;
                }
                for (size_t j = 0; j < AL; j++) {
                    double dv = 0.0;
                    for (size_t d = 0; d < ADH; d++)
                        dv += fabs(dO[d] * V[j * ADH + d]);
                    eD += P[j] * G(ADH) * dv;
                    pdp += P[j] * dP[j], apdp += fabs(P[j] * dP[j]), sig += P[j];
                    s += dS[j], as += fabs(dS[j]);
                }
                bad += !test_worst_check(w, Di, pdp, (eD + G(AL) * apdp) * (1.0 + 0x1p-20),
                                         "%s, head %zu row %zu: D_i against sum_j P dP", c.desc, bh, i);
                const double tol = eD + fabs(Di) * (fabs(1.0 - sig) + G(AL) * sig) + (G(2) + G(AL)) * as;
                bad += !test_worst_check(w, s, 0.0, tol * (1.0 + 0x1p-20),
                                         "%s, head %zu row %zu: sum_j dS_ij", c.desc, bh, i);
            }
    }
    free(a);
    return bad;
}

/* A key masked for every query (key padding, or an attn_mask column of
 * -inf) gets dk = 0 and dv = 0 exactly: its scores are constants (dS = 0)
 * and its weights are exactly 0.  The one exception is dv under finfo_min
 * in an item with a row that sees no key: that row's weights are 1/L on
 * every key (attention.h), so it reads every v. */
size_t gp_attention_masked_keys(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { N = AB * AL * AD };
    size_t bad = 0;
    at_run *a = prop_calloc(1, sizeof *a);
    at_run_init(a);
    for (size_t t = 0; t < N_CASES; t++) {
        at_case c;
        at_case_make(&c, t, r);
        double x[N], dY[N], g[N];
        test_fill_gaussian(x, N, 0.0, 1.2, r);
        test_fill_gaussian(dY, N, 0.0, 1.0, r);
        at_grad(g, a, K, &c, x, dY);
        for (size_t b = 0; b < AB; b++)
            for (size_t j = 0; j < AL; j++) {
                const int masked = (c.has_pad && c.pad[b * AL + j]) || (t == 3 && j == AL - 1);
                if (!masked)
                    continue;
                const int dv_free = c.opt.mask_value == REFENC_MASK_FINFO_MIN && c.fully_masked_item[b];
                for (size_t h = 0; h < AH; h++)
                    for (size_t d = 0; d < ADH; d++) {
                        const size_t i = ((b * AH + h) * AL + j) * ADH + d;
                        bad += !test_worst_check(w, a->dk[i], 0.0, 0.0, "%s, item %zu masked key %zu: dk", c.desc, b, j);
                        if (!dv_free)
                            bad += !test_worst_check(w, a->dv[i], 0.0, 0.0, "%s, item %zu masked key %zu: dv", c.desc, b, j);
                    }
            }
    }
    free(a);
    return bad;
}
