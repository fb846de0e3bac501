/* Qwen3's per-head q/k RMSNorm (ref/qk_norm.h): each head's Dh values are
 * normalised by their own rms, with the (Dh) weight shared by the heads, and
 * the grouped-query attention that applies it is invariant to the scale of
 * the q and k projections.  Negative controls: the whole-row rms (OLMo-2's
 * q_norm width, the variant qk_norm_over_all_heads) fails the per-head
 * checks, and attention without qk_norm is not scale-invariant. */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/mha.h"
#include "../../ref/qk_norm.h"
#include "unit.h"

enum { QH = 4, QHKV = 2, QDH = 6, QBL = 3 };

/* head h of row r: values of scale 10^h, so the heads' rms differ by 10x */
static void fill(double *x, size_t rows, size_t heads)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t h = 0; h < heads; h++)
            for (size_t d = 0; d < QDH; d++)
                x[(r * heads + h) * QDH + d] = pow(10.0, (double)h) * (0.5 + sin(1.0 + r + 3.0 * h + 7.0 * d));
}

/* the mean of the squares of head h of row r of x (rows, heads, Dh) */
static double head_ms(const double *x, size_t heads, size_t r, size_t h)
{
    double s = 0;
    for (size_t d = 0; d < QDH; d++)
        s += x[(r * heads + h) * QDH + d] * x[(r * heads + h) * QDH + d];
    return s / QDH;
}

/* With w = 1 and eps = 0 every head of q and of k has mean square 1: a few
 * roundings of each of Dh = 6 terms, 1e-14 relative is ~45 u.  Negative
 * control: the row-wide rms leaves heads of mean square 10^(2h) / mean. */
Test(qk_norm, every_head_has_unit_rms)
{
    double q[QBL * QH * QDH], k[QBL * QHKV * QDH], bug[QBL * QH * QDH], ones[QDH];
    for (size_t d = 0; d < QDH; d++)
        ones[d] = 1.0;
    fill(q, QBL, QH);
    fill(k, QBL, QHKV);
    memcpy(bug, q, sizeof q);
    const refenc_qk_norm n = {ones, ones, 0.0, 0};
    refenc_qk_norm_forward(q, k, &n, QBL, QH, QHKV, QDH);
    for (size_t r = 0; r < QBL; r++) {
        for (size_t h = 0; h < QH; h++)
            cr_expect(fabs(head_ms(q, QH, r, h) - 1.0) < 1e-14, "q row %zu head %zu: ms %.17g", r, h,
                      head_ms(q, QH, r, h));
        for (size_t h = 0; h < QHKV; h++)
            cr_expect(fabs(head_ms(k, QHKV, r, h) - 1.0) < 1e-14, "k row %zu head %zu: ms %.17g", r, h,
                      head_ms(k, QHKV, r, h));
    }
    /* the control: one RMSNorm over the row's H Dh values */
    for (size_t r = 0; r < QBL; r++) {
        double ms = 0;
        for (size_t i = 0; i < QH * QDH; i++)
            ms += bug[r * QH * QDH + i] * bug[r * QH * QDH + i];
        const double rr = sqrt(ms / (QH * QDH));
        for (size_t i = 0; i < QH * QDH; i++)
            bug[r * QH * QDH + i] /= rr;
        cr_expect(fabs(head_ms(bug, QH, r, 0) - 1.0) > 0.5, "control: the row-wide rms must leave head 0 off 1");
    }
}

/* The weight is shared by the heads and indexed by d: with w_d = d + 1,
 * q[h, d] / rms_h * w_d for every head (the product is the last rounding:
 * within 2 ulps of the exact over each head's own rms). */
Test(qk_norm, weight_is_shared_by_the_heads)
{
    double q[QBL * QH * QDH], k[QBL * QHKV * QDH], x[QBL * QH * QDH], w[QDH];
    for (size_t d = 0; d < QDH; d++)
        w[d] = (double)d + 1.0;
    fill(q, QBL, QH);
    fill(k, QBL, QHKV);
    memcpy(x, q, sizeof q);
    const refenc_qk_norm n = {w, w, 1e-6, 0};
    refenc_qk_norm_forward(q, k, &n, QBL, QH, QHKV, QDH);
    for (size_t r = 0; r < QBL; r++)
        for (size_t h = 0; h < QH; h++) {
            const double rms = sqrt(head_ms(x, QH, r, h) + 1e-6);
            for (size_t d = 0; d < QDH; d++) {
                const size_t i = (r * QH + h) * QDH + d;
                EXPECT_ULPS(q[i], x[i] / rms * w[d], 2, "row %zu head %zu d %zu", r, h, d);
            }
        }
}

enum { AB = 1, AL = 4, AD = 8, AE = QH * QDH, AEKV = QHKV * QDH, AR = AE + 2 * AEKV };

/* the attention output of x under (W, b), with or without the norms */
static void attend(double *y, const double *x, const double *W, const double *b, const double *Wo,
                   const refenc_qk_norm *n)
{
    static double q[AL * AE], k[AL * AE], v[AL * AE], qh[AL * AE], kh[AL * AE], vh[AL * AE],
        ctxh[AL * AE], ctx[AL * AE], wts[QH * AL * AL];
    refenc_mha_work w = {q, k, v, qh, kh, vh, ctxh, ctx, wts};
    const int64_t pos[AL] = {0, 1, 2, 3};
    const refenc_attn_options opt = {.temperature = 1.0, .positions = pos};
    const refenc_rope_options rope = {REFENC_ROPE_HALF, 10000.0, pos, NULL};
    refenc_gqa_qk_forward(y, &w, x, W, b, Wo, NULL, &opt, &rope, n, AB, AL, AD, QH, QHKV, QDH);
}

/* q_norm and k_norm make the attention independent of the scale of W_q, b_q
 * and of W_k, b_k (eps = 0): scaled by 4 (exact in binary), the output is the
 * same up to the roundings the scale moves (1e-12).  Negative control:
 * without the norms the scores scale by 16 and the output moves by far more. */
Test(qk_norm, attention_ignores_the_scale_of_q_and_k)
{
    double x[AL * AD], W[AR * AD], b[AR], Wo[AD * AE], w[QDH], y0[AL * AD], y1[AL * AD];
    for (size_t i = 0; i < AL * AD; i++)
        x[i] = sin(0.7 * (double)i + 0.3);
    for (size_t i = 0; i < AR * AD; i++)
        W[i] = 0.8 * cos(1.3 * (double)i + 0.1);
    for (size_t i = 0; i < AR; i++)
        b[i] = 0.1 * sin(2.1 * (double)i);
    for (size_t i = 0; i < AD * AE; i++)
        Wo[i] = 0.3 * sin(0.9 * (double)i + 1.0);
    for (size_t d = 0; d < QDH; d++)
        w[d] = 1.0 + 0.3 * (double)d;
    const refenc_qk_norm n = {w, w, 0.0, 0};
    double Ws[AR * AD], bs[AR];
    memcpy(Ws, W, sizeof W);
    memcpy(bs, b, sizeof b);
    for (size_t i = 0; i < (AE + AEKV) * AD; i++) /* q and k rows */
        Ws[i] *= 4.0;
    for (size_t i = 0; i < AE + AEKV; i++)
        bs[i] *= 4.0;
    attend(y0, x, W, b, Wo, &n);
    attend(y1, x, Ws, bs, Wo, &n);
    double worst = 0, ctl = 0;
    for (size_t i = 0; i < AL * AD; i++)
        worst = fmax(worst, fabs(y1[i] - y0[i]));
    cr_expect(worst < 1e-12, "with q_norm, k_norm the scale of q and k must not matter: moved %g", worst);
    attend(y0, x, W, b, Wo, NULL);
    attend(y1, x, Ws, bs, Wo, NULL);
    for (size_t i = 0; i < AL * AD; i++)
        ctl = fmax(ctl, fabs(y1[i] - y0[i]));
    cr_expect(ctl > 1e-3, "control: without the norms the scale must matter: moved %g", ctl);
}
