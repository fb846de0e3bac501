/* The reference's backward kernels against the oracle's backward
 * (ref/oracle/backward.h): every gradient element of the double kernel lies
 * within a derived bound of the correctly rounded one.
 *
 * The bound of each element is |ref - oracle| <= e + u |oracle| (1 + 2u):
 * e bounds |ref - exact| by a running error analysis of the double kernel's
 * own arithmetic (first order in u; the derivations are in the comments
 * below and in docs/gradients.md, "The oracle's backward"), and u |oracle|
 * (1 + 2u) bounds |exact - oracle| for a correctly rounded oracle
 * (|exact| <= |oracle| / (1 - u)).  Magnitudes such as sum |dy W| are
 * computed in double from the same data; their own rounding, relative
 * gamma_n, is a second-order change of e, covered by the factor GO_SLACK.
 * Where a kernel reads what its forward saved (softmax's y, attention's P
 * and O) it is given the oracle's correctly rounded forward, so that the
 * bound is the backward's alone: every such input is within u of exact.
 * The bounds never read the kernel's outputs: no bug can widen them. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/oracle/backward.h"
#include "../common/fwdbound.h"
#include "oracle_compare.h"

#define U TEST_U
#define GO_SLACK (1.0 + 0x1p-30) /* second-order terms: products of two gammas */
#define PREC REFENC_MP_PREC_DEFAULT

static double gm(double n) { return test_gamma(n); }

/* One element: ref within e of the exact value, oracle its rounding. */
static size_t within(test_worst *w, double ref, double orc, double e, const char *what, size_t i)
{
    const double tol = e * GO_SLACK + U * fabs(orc) * (1.0 + 2.0 * U);
    return test_worst_check(w, ref, orc, tol, "%s[%zu]", what, i) ? 0 : 1;
}

static void fill(double *x, size_t n, double sigma, gsl_rng *r)
{
    test_fill_gaussian(x, n, 0.0, sigma, r);
}

/* ---- linear --------------------------------------------------------------- */
/* dx[n,k] = sum_o dy W, recursive from 0: gamma_out sum_o |dy W|.
 * dW[o,k] = dW0 + sum_n dy x: N products and N additions from dW0, however
 * they are grouped: gamma_{N+1} (|dW0| + sum_n |dy x|); db: gamma_N (|db0| +
 * sum_n |dy|). */
size_t go_linear(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { N = 5, IN = 4, OUT = 3 };
    double dy[N * OUT], x[N * IN], W[OUT * IN], dW0[OUT * IN], db0[OUT];
    fill(dy, N * OUT, 1, r), fill(x, N * IN, 1, r), fill(W, OUT * IN, 1, r);
    fill(dW0, OUT * IN, 1, r), fill(db0, OUT, 1, r);
    double dx[N * IN], dW[OUT * IN], db[OUT], odx[N * IN], odW[OUT * IN], odb[OUT];
    memcpy(dW, dW0, sizeof dW), memcpy(db, db0, sizeof db);
    memcpy(odW, dW0, sizeof dW), memcpy(odb, db0, sizeof db);
    K->linear(dx, dW, db, dy, x, W, N, IN, OUT);
    cr_assert_eq(refenc_mp_linear_backward(odx, odW, odb, dy, x, W, N, IN, OUT, PREC, NULL), 0);
    size_t bad = 0;
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < IN; k++) {
            double m = 0;
            for (size_t o = 0; o < OUT; o++)
                m += fabs(dy[n * OUT + o] * W[o * IN + k]);
            bad += within(w, dx[n * IN + k], odx[n * IN + k], gm(OUT) * m, "linear dx", n * IN + k);
        }
    for (size_t o = 0; o < OUT; o++) {
        double mb = fabs(db0[o]);
        for (size_t n = 0; n < N; n++)
            mb += fabs(dy[n * OUT + o]);
        bad += within(w, db[o], odb[o], gm(N) * mb, "linear db", o);
        for (size_t k = 0; k < IN; k++) {
            double m = fabs(dW0[o * IN + k]);
            for (size_t n = 0; n < N; n++)
                m += fabs(dy[n * OUT + o] * x[n * IN + k]);
            bad += within(w, dW[o * IN + k], odW[o * IN + k], gm(N + 1) * m, "linear dW", o * IN + k);
        }
    }
    return bad;
}

/* ---- LayerNorm -------------------------------------------------------------- */
/* Per row, from fb_moments' |mu^ - mu| <= e_mu, |var^ - var| <= e_var:
 *   sd^ = fl(sqrt(fl(var^ + eps))):  e_sd = (e_var + u (var + eps)) / sd + u sd
 *   x^_d = fl(fl(x_d - mu^) / sd^):  E_d = (e_mu + u |x_d - mu|) / sd + |x^_d| (e_sd / sd + u)
 *   mean(g), g = fl(dy gamma):       e_mg = gamma_{D+1} sum |g| / D + u |mg|
 *   mean(g x^):                      e_mgx = (sum |g| E + gamma_{D+2} sum |g x^|) / D + u |mgx|
 *   numerator g - mg - x^ mgx:       e_num = u |g| + e_mg + |x^| e_mgx + |mgx| E
 *                                            + gamma_3 (|g| + |mg| + |x^ mgx|)
 *   dx = num / sd:                   e_num / sd + |num| e_sd / sd^2 + u |dx|
 *   dgamma = dg0 + sum_n dy x^:      gamma_{N+1} (|dg0| + sum |dy x^|) + sum |dy| E
 *   dbeta = db0 + sum_n dy:          gamma_N (|db0| + sum |dy|) */
typedef struct {
    double sd, e_sd, mg, e_mg, mgx, e_mgx;
} ln_row_err;

static void ln_row_bounds(ln_row_err *q, double *xh, double *E, const double *x, const double *dy,
                          const double *gamma, size_t D, double eps)
{
    double mu, e_mu, var, e_var;
    fb_moments(x, D, &mu, &e_mu, &var, &e_var);
    q->sd = sqrt(var + eps);
    q->e_sd = (e_var + U * (var + eps)) / q->sd + U * q->sd;
    double sg = 0, sag = 0, sgx = 0, sagx = 0, sagE = 0;
    for (size_t d = 0; d < D; d++) {
        xh[d] = (x[d] - mu) / q->sd;
        E[d] = (e_mu + U * fabs(x[d] - mu)) / q->sd + fabs(xh[d]) * (q->e_sd / q->sd + U);
        const double g = dy[d] * gamma[d];
        sg += g, sag += fabs(g), sgx += g * xh[d], sagx += fabs(g * xh[d]), sagE += fabs(g) * E[d];
    }
    q->mg = sg / (double)D, q->mgx = sgx / (double)D;
    q->e_mg = gm(D + 1) * sag / (double)D + U * fabs(q->mg);
    q->e_mgx = (sagE + gm(D + 2) * sagx) / (double)D + U * fabs(q->mgx);
}

size_t go_layernorm(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { N = 3, D = 8 };
    double dy[N * D], x[N * D], gamma[D], dg0[D], db0[D];
    fill(dy, N * D, 1, r), fill(x, N * D, 2, r), fill(gamma, D, 1, r);
    fill(dg0, D, 1, r), fill(db0, D, 1, r);
    for (size_t i = 0; i < D; i++) /* a row with a large mean: cancellation in x - mu */
        x[i] += 100.0;
    const double eps = 1e-5;
    double dx[N * D], dg[D], db[D], odx[N * D], odg[D], odb[D];
    memcpy(dg, dg0, sizeof dg), memcpy(db, db0, sizeof db);
    memcpy(odg, dg0, sizeof dg), memcpy(odb, db0, sizeof db);
    K->layernorm(dx, dg, db, dy, x, gamma, N, D, eps);
    cr_assert_eq(refenc_mp_layernorm_backward(odx, odg, odb, dy, x, gamma, N, D, eps, PREC, NULL), 0);
    double eg[D], mg[D], mb[D], xh[D], E[D];
    for (size_t d = 0; d < D; d++)
        eg[d] = 0, mg[d] = fabs(dg0[d]), mb[d] = fabs(db0[d]);
    size_t bad = 0;
    for (size_t n = 0; n < N; n++) {
        ln_row_err q;
        const double *dyn = dy + n * D;
        ln_row_bounds(&q, xh, E, x + n * D, dyn, gamma, D, eps);
        for (size_t d = 0; d < D; d++) {
            const double g = dyn[d] * gamma[d], num = g - q.mg - xh[d] * q.mgx;
            const double e_num = U * fabs(g) + q.e_mg + fabs(xh[d]) * q.e_mgx + fabs(q.mgx) * E[d] +
                                 gm(3) * (fabs(g) + fabs(q.mg) + fabs(xh[d] * q.mgx));
            const double e = e_num / q.sd + fabs(num) * q.e_sd / (q.sd * q.sd) + U * fabs(num / q.sd);
            bad += within(w, dx[n * D + d], odx[n * D + d], e, "layernorm dx", n * D + d);
            eg[d] += fabs(dyn[d]) * E[d], mg[d] += fabs(dyn[d] * xh[d]), mb[d] += fabs(dyn[d]);
        }
    }
    for (size_t d = 0; d < D; d++) {
        bad += within(w, dg[d], odg[d], gm(N + 1) * mg[d] + eg[d], "layernorm dgamma", d);
        bad += within(w, db[d], odb[d], gm(N) * mb[d], "layernorm dbeta", d);
    }
    return bad;
}

/* ---- softmax ---------------------------------------------------------------- */
/* y the oracle's forward (each within u of exact).  D = sum_j y dy from 0:
 * e_D = gamma_{n+1} sum |y dy| (the inputs' u and gamma_n); ds = y (dy - D) /
 * tau, three roundings and y's: e = (|y| e_D + gamma_4 |y (dy - D)|) / tau. */
size_t go_softmax(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { R = 4, n = 6 };
    double s[R * n], dy[R * n], y[R * n], ds[R * n], ods[R * n];
    fill(s, R * n, 2, r), fill(dy, R * n, 1, r);
    s[1] = s[n + 4] = -INFINITY; /* masked entries */
    for (size_t i = 0; i < n; i++)
        s[3 * n + i] = -INFINITY; /* a fully masked row */
    const double tau = 0.7;
    cr_assert_eq(refenc_mp_softmax_forward(y, s, R, n, tau, PREC, NULL), 0);
    K->softmax(ds, dy, y, R, n, tau);
    cr_assert_eq(refenc_mp_softmax_backward(ods, dy, s, R, n, tau, PREC, NULL), 0);
    size_t bad = 0;
    for (size_t rr = 0; rr < R; rr++) {
        const double *yr = y + rr * n, *dyr = dy + rr * n;
        double Dr = 0, m = 0;
        for (size_t j = 0; j < n; j++)
            Dr += yr[j] * dyr[j], m += fabs(yr[j] * dyr[j]);
        const double eD = gm(n + 1) * m;
        for (size_t i = 0; i < n; i++) {
            const double e = (fabs(yr[i]) * eD + gm(4) * fabs(yr[i] * (dyr[i] - Dr))) / tau;
            bad += within(w, ds[rr * n + i], ods[rr * n + i], e, "softmax ds", rr * n + i);
        }
    }
    return bad;
}

/* ---- attention -------------------------------------------------------------- */
/* P and O the oracle's forward (each within u of exact).  Per head:
 *   dv_j   = sum_i P_ij dO_i:      gamma_{L+1} sum_i |P_ij dO_i|
 *   dP_ij  = dO_i . v_j:           e_dP = gamma_Dh sum |dO_i v_j|
 *   D_i    = dO_i . O_i:           e_D = gamma_{Dh+1} sum |dO_i O_i|
 *   dS_ij  = P_ij (dP_ij - D_i):   e_dS = |P| (e_dP + e_D) + gamma_3 |P (dP - D)|
 *                                  (0 where the mask replaced the score: both 0)
 *   dq_i   = sum_j dS_ij k_j / divisor, divisor = fl(fl(sqrt Dh) tau):
 *            (sum_j e_dS |k_j| + gamma_{L+3} sum_j |dS_ij k_j|) / divisor; dk alike. */
enum { AB = 2, AH = 2, AL = 4, ADh = 4 };
#define AN (AB * AH * AL * ADh)
#define AW (AB * AH * AL * AL)

typedef struct {
    double q[AN], k[AN], v[AN], dO[AN], P[AW], O[AN];
    double dq[AN], dk[AN], dv[AN], dP[AW], dS[AW], Dr[AB * AH * AL];
    double oq[AN], ok[AN], ov[AN], odP[AW], odS[AW], oDr[AB * AH * AL];
    double edS[AW];
} attn_case;

static int replaced(const refenc_attn_options *o, size_t b, size_t i, size_t j)
{
    return (o->key_padding_mask && o->key_padding_mask[b * AL + j]) || (o->causal && j > i);
}

static size_t attn_head_dv_ds(attn_case *c, const refenc_attn_options *o, size_t b, size_t bh,
                              test_worst *w)
{
    size_t bad = 0;
    const size_t x0 = bh * AL * ADh, w0 = bh * AL * AL;
    for (size_t j = 0; j < AL; j++)
        for (size_t d = 0; d < ADh; d++) {
            double m = 0;
            for (size_t i = 0; i < AL; i++)
                m += fabs(c->P[w0 + i * AL + j] * c->dO[x0 + i * ADh + d]);
            bad += within(w, c->dv[x0 + j * ADh + d], c->ov[x0 + j * ADh + d], gm(AL + 1) * m,
                          "attention dv", x0 + j * ADh + d);
        }
    for (size_t i = 0; i < AL; i++) {
        double mD = 0;
        for (size_t d = 0; d < ADh; d++)
            mD += fabs(c->dO[x0 + i * ADh + d] * c->O[x0 + i * ADh + d]);
        const double eD = gm(ADh + 1) * mD;
        bad += within(w, c->Dr[bh * AL + i], c->oDr[bh * AL + i], eD, "attention D", bh * AL + i);
        for (size_t j = 0; j < AL; j++) {
            double mP = 0;
            for (size_t d = 0; d < ADh; d++)
                mP += fabs(c->dO[x0 + i * ADh + d] * c->v[x0 + j * ADh + d]);
            const size_t ij = w0 + i * AL + j;
            bad += within(w, c->dP[ij], c->odP[ij], gm(ADh) * mP, "attention dP", ij);
            const double p = fabs(c->P[ij]);
            c->edS[ij] = replaced(o, b, i, j) ? 0.0
                         : p * (gm(ADh) * mP + eD) + gm(3) * p * fabs(c->odP[ij] - c->oDr[bh * AL + i]);
            bad += within(w, c->dS[ij], c->odS[ij], c->edS[ij], "attention dS", ij);
        }
    }
    return bad;
}

/* dq (qk = 0: sum over j of dS_ij k_j) or dk (sum over i of dS_ij q_i). */
static size_t attn_head_dqk(const attn_case *c, int qk, size_t bh, double div, test_worst *w)
{
    size_t bad = 0;
    const size_t x0 = bh * AL * ADh, w0 = bh * AL * AL;
    const double *other = qk == 0 ? c->k : c->q, *got = qk == 0 ? c->dq : c->dk;
    const double *want = qk == 0 ? c->oq : c->ok;
    for (size_t a = 0; a < AL; a++)
        for (size_t d = 0; d < ADh; d++) {
            double e = 0, m = 0;
            for (size_t z = 0; z < AL; z++) {
                const size_t ij = qk == 0 ? w0 + a * AL + z : w0 + z * AL + a;
                const double o = fabs(other[x0 + z * ADh + d]);
                e += c->edS[ij] * o, m += fabs(c->odS[ij]) * o;
            }
            const size_t at = x0 + a * ADh + d;
            bad += within(w, got[at], want[at], (e + gm(AL + 3) * m) / div,
                          qk == 0 ? "attention dq" : "attention dk", at);
        }
    return bad;
}

static size_t attn_one(const gc_kernels *K, attn_case *c, const refenc_attn_options *o,
                       test_worst *w)
{
    refenc_mp_report fr;
    const int fs = refenc_mp_attention_forward(c->O, c->P, c->q, c->k, c->v, o, AB, AH, AL, ADh,
                                               PREC, &fr);
    cr_assert_eq(fs, 0, "%s", fr.error.message);
    K->attention(c->dq, c->dk, c->dv, c->dP, c->dS, c->Dr, c->dO, c->q, c->k, c->v, c->P, c->O, o,
                 AB, AH, AL, ADh);
    refenc_mp_report rep;
    const int st = refenc_mp_attention_backward(c->oq, c->ok, c->ov, c->odP, c->odS, c->oDr, c->dO,
                                                c->q, c->k, c->v, o, AB, AH, AL, ADh, PREC, &rep);
    cr_assert_eq(st, 0, "%s", rep.error.message);
    size_t bad = 0;
    const double div = sqrt((double)ADh) * o->temperature / (1.0 + gm(2));
    for (size_t b = 0; b < AB; b++)
        for (size_t h = 0; h < AH; h++) {
            bad += attn_head_dv_ds(c, o, b, b * AH + h, w);
            bad += attn_head_dqk(c, 0, b * AH + h, div, w);
            bad += attn_head_dqk(c, 1, b * AH + h, div, w);
        }
    return bad;
}

/* Every mask kind: none; causal with a temperature; key padding with a fully
 * padded item under -inf; padding and causal under finfo_min; an additive
 * mask with -inf and ALiBi. */
size_t go_attention(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    attn_case *c = calloc(1, sizeof *c);
    cr_assert_not_null(c);
    fill(c->q, AN, 1, r), fill(c->k, AN, 1, r), fill(c->v, AN, 1, r), fill(c->dO, AN, 1, r);
    static const uint8_t pad[AB * AL] = {0, 0, 1, 0, 1, 1, 1, 1};
    /* finfo_min without a fully masked row: there the forward's weights are
     * 1/L exactly and out a sum of doubles / L, which can be a midpoint the
     * forward oracle (no per-value exactness) cannot certify */
    static const uint8_t pad2[AB * AL] = {0, 0, 1, 0, 0, 1, 1, 0};
    static const int64_t pos[AL] = {0, 1, 2, 3};
    double am[AL * AL], slopes[AH] = {0.5, 0.25};
    fill(am, AL * AL, 0.5, r);
    am[1] = am[2 * AL + 3] = -INFINITY;
    const refenc_attn_options opts[] = {
        {.temperature = 1.0},
        {.causal = 1, .temperature = 0.8},
        {.key_padding_mask = pad, .temperature = 1.0},
        {.key_padding_mask = pad2, .causal = 1, .temperature = 1.3,
         .mask_value = REFENC_MASK_FINFO_MIN},
        {.attn_mask = am, .alibi_slopes = slopes, .positions = pos, .temperature = 1.0},
    };
    size_t bad = 0;
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        bad += attn_one(K, c, &opts[i], w);
    free(c);
    return bad;
}

/* ---- RoPE ------------------------------------------------------------------- */
/* The backward (ga c + gb s, gb c - ga s) on the forward's angles: two
 * products and a sum, gamma_2 (|ga c| + |gb s|), plus (|ga| + |gb|) e_cs, the
 * error of cos and sin: FB_ULPS_SINCOS ulps each, plus the angle's error,
 * which rope.h bounds by (ln(base) + 3) u |angle| (the exponent's rounding
 * through pow, pow's own, the product by the position). */
size_t go_rope(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { N = 2, L = 4, Dh = 6, n = N * L * Dh };
    static const int64_t pos[L] = {0, 3, 700, 4099};
    double dy[n], dx[n], odx[n], ey[n];
    fill(dy, n, 1, r);
    size_t bad = 0;
    for (int lay = 0; lay < 2; lay++) {
        const refenc_rope_layout layout = lay ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF;
        for (size_t m = 0; m < N * L; m++)
            for (size_t j = 0; j < Dh / 2; j++) {
                const size_t ia = lay ? 2 * j : j, ib = lay ? 2 * j + 1 : j + Dh / 2;
                const double angle = (double)pos[m % L] * refenc_rope_frequency(j, Dh, 10000.0);
                const double ecs = 2.0 * FB_ULPS_SINCOS * U + (log(10000.0) + 3.0) * U * fabs(angle);
                const double a = fabs(dy[m * Dh + ia]), b = fabs(dy[m * Dh + ib]);
                const double c = fabs(cos(angle)), s = fabs(sin(angle));
                ey[m * Dh + ia] = gm(2) * (a * c + b * s) + (a + b) * ecs;
                ey[m * Dh + ib] = gm(2) * (b * c + a * s) + (a + b) * ecs;
            }
        K->rope(dx, dy, pos, N, L, Dh, 10000.0, layout);
        cr_assert_eq(refenc_mp_rope_backward(odx, dy, pos, N, L, Dh, 10000.0, layout, PREC, NULL), 0);
        for (size_t i = 0; i < n; i++)
            bad += within(w, dx[i], odx[i], ey[i], "rope dx", i);
    }
    return bad;
}

/* ---- ReLU ------------------------------------------------------------------- */
/* dy times 1 or 0: exact in double, so e = 0 and the two agree bit for bit
 * (the oracle's value is exact, hence its own rounding term is 0 too). */
size_t go_activation_relu(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { n = 12 };
    double x[n], dy[n], dx[n], odx[n];
    fill(x, n, 1, r), fill(dy, n, 1, r);
    x[0] = 0.0, x[1] = -0.0, x[2] = 0x1p-1074, x[3] = -0x1p-1074;
    K->activation(dx, dy, x, n, REFENC_ACT_RELU);
    cr_assert_eq(refenc_mp_activation_backward(odx, dy, x, n, REFENC_ACT_RELU, PREC, NULL), 0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += test_worst_check(w, dx[i], odx[i], 0.0, "relu dx[%zu]", i) ? 0 : 1;
    return bad;
}

/* ---- GELU, GELU-tanh, quick GELU ------------------------------------------- */
/* The double derivative (activation.c) against the exact one at x; its
 * constants (1/sqrt(2 pi), sqrt(2/pi), 0.044715, 1.702, 1/sqrt 2) are the
 * nearest doubles, each within u relative of the oracle's.  libm: erfc within
 * FB_ULPS_ERFC ulps, exp within FB_ULPS_EXP (fwdbound.h), an ulp <= 2u rel.
 * Each returns e_d >= |d^ - act'(x)|, first order in u; then dx = dy d:
 * e = |dy| e_d + u |dy d|.
 * GELU  A = 0.5 erfc(t), t = fl(-x fl(1/sqrt 2)) within gamma_2 |t|:
 *         e_A = 0.5 (2 FB_ULPS_ERFC u erfc(t) + (2/sqrt pi) e^{-t^2} gamma_2 |t|)
 *       B = x (c exp(-0.5 fl(x x))): exp's argument within u x^2/2, c u,
 *         three products: e_B = |B| (gamma_4 + 2 FB_ULPS_EXP u + u x^2/2)
 *       e_d = e_A + e_B + u |A + B|. */
static double gelu_d_err(double x)
{
    const double t = -x / sqrt(2.0);
    const double A = 0.5 * erfc(t), B = x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
    const double eA = 0.5 * (2.0 * FB_ULPS_ERFC * U * erfc(t) + M_2_SQRTPI * exp(-t * t) * gm(2) * fabs(t));
    const double eB = fabs(B) * (gm(4) + 2.0 * FB_ULPS_EXP * U + U * 0.5 * x * x);
    return eA + eB + U * fabs(A + B);
}

/* s = 1/(1 + exp(-a)) with a within ea: relative errors of s and of
 * sc = 1 - s = 1/(1 + exp(a)): sc ea + gamma_2 + 2 FB_ULPS_EXP u, and s ea + ... */
static void sigmoid_rel(double a, double ea, double *s, double *sc, double *rs, double *rsc)
{
    *s = 1.0 / (1.0 + exp(-a)), *sc = 1.0 / (1.0 + exp(a));
    *rs = *sc * ea + gm(2) + 2.0 * FB_ULPS_EXP * U;
    *rsc = *s * ea + gm(2) + 2.0 * FB_ULPS_EXP * U;
}

/* GELU-tanh: z = c (x + k x^3) within e_z = |c| (gamma_4 |k x^3| + gamma_1 |x + k x^3|)
 * + gamma_2 |z| (x^3 two roundings, k's and c's u, the sum, the product);
 * s = sigma(2z), sc = sigma(-2z) with 2 e_z; dz = c (1 + 3 k x^2), every term
 * positive: gamma_7 |dz|; T = 2 x (s sc) dz: |T| (rs + rsc + gamma_10);
 * e_d = s rs + e_T + u |s + T|.
 * quick GELU: t = fl(a x) within gamma_2 |t|; T = (a x)(s sc): |T| (rs + rsc
 * + gamma_4); e_d = s rs + e_T + u |s + T|. */
static double gelu_tanh_d_err(double x)
{
    const double c = sqrt(2.0 / M_PI), k = 0.044715, in = x + k * x * x * x, z = c * in;
    const double ez = c * (gm(4) * fabs(k * x * x * x) + gm(1) * fabs(in)) + gm(2) * fabs(z);
    double s, sc, rs, rsc;
    sigmoid_rel(2.0 * z, 2.0 * ez, &s, &sc, &rs, &rsc);
    const double T = 2.0 * x * s * sc * c * (1.0 + 3.0 * k * x * x);
    return s * rs + fabs(T) * (rs + rsc + gm(10)) + U * fabs(s + T);
}

static double quick_gelu_d_err(double x)
{
    const double t = 1.702 * x;
    double s, sc, rs, rsc;
    sigmoid_rel(t, gm(2) * fabs(t), &s, &sc, &rs, &rsc);
    const double T = t * s * sc;
    return s * rs + fabs(T) * (rs + rsc + gm(4)) + U * fabs(s + T);
}

/* SiLU: s = sigma(x) with an exact argument (ea = 0); T = x (s sc), two
 * products: |T| (rs + rsc + gamma_2); e_d = s rs + e_T + u |s + T|. */
static double silu_d_err(double x)
{
    double s, sc, rs, rsc;
    sigmoid_rel(x, 0.0, &s, &sc, &rs, &rsc);
    const double T = x * s * sc;
    return s * rs + fabs(T) * (rs + rsc + gm(2)) + U * fabs(s + T);
}

size_t go_activation_gelu(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { n = 16 };
    static const refenc_activation acts[4] = {REFENC_ACT_GELU, REFENC_ACT_GELU_TANH,
                                              REFENC_ACT_QUICK_GELU, REFENC_ACT_SILU};
    static const char *const names[4] = {"gelu dx", "gelu_tanh dx", "quick_gelu dx", "silu dx"};
    double (*const err[4])(double) = {gelu_d_err, gelu_tanh_d_err, quick_gelu_d_err, silu_d_err};
    double x[n], dy[n], dx[n], odx[n];
    fill(x, n, 2, r), fill(dy, n, 1, r);
    x[0] = 0.0, x[1] = -0.7517915241, x[2] = 5.5, x[3] = -5.5; /* GELU' near its zero; tails */
    size_t bad = 0;
    for (int a = 0; a < 4; a++) {
        K->activation(dx, dy, x, n, acts[a]);
        cr_assert_eq(refenc_mp_activation_backward(odx, dy, x, n, acts[a], PREC, NULL), 0);
        for (size_t i = 0; i < n; i++) {
            const double e = fabs(dy[i]) * err[a](x[i]) + U * fabs(odx[i]);
            bad += within(w, dx[i], odx[i], e, names[a], i);
        }
    }
    return bad;
}

/* ---- embedding -------------------------------------------------------------- */
/* dtable[v] = dt0 + sum over the k tokens equal to v of fl(dx fl(sqrt D)):
 * each term within gamma_2 of dx sqrt(D), k additions:
 * gamma_{k+2} (|dt0| + sum |dx| sqrt(D)).  Rows no token reads are unchanged. */
size_t go_embedding(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { B = 2, L = 5, V = 6, D = 3 };
    static const int64_t tok[B * L] = {1, 3, 1, 1, 0, 3, 5, 1, 0, 1}; /* 2, 4 unused */
    double dx[B * L * D], t0[V * D], dt[V * D], odt[V * D];
    fill(dx, B * L * D, 1, r), fill(t0, V * D, 1, r);
    memcpy(dt, t0, sizeof dt), memcpy(odt, t0, sizeof dt);
    K->embedding(dt, dx, tok, B, L, V, D);
    cr_assert_eq(refenc_mp_embedding_backward(odt, dx, tok, B, L, V, D, 1, PREC, NULL), 0);
    size_t bad = 0;
    for (size_t v = 0; v < V; v++)
        for (size_t d = 0; d < D; d++) {
            double m = fabs(t0[v * D + d]), k = 0;
            for (size_t n = 0; n < B * L; n++)
                if (tok[n] == (int64_t)v)
                    m += fabs(dx[n * D + d]) * sqrt((double)D), k++;
            bad += within(w, dt[v * D + d], odt[v * D + d], gm(k + 2) * m, "embedding dtable",
                          v * D + d);
        }
    return bad;
}

/* ---- the unscaled scatter-adds: lookup, token types, learned positions ------ */
/* dtable[r] = dt0 + the k gradients of the rows that read r, added one by one
 * (no product): gamma_k (|dt0| + sum |dy|).  These kernels are not in the
 * mutants' table: called directly, on the reference for K = &gc_reference;
 * for any other K (the negative control) with the bug "not summed over the
 * batch": the double kernels see batch item 0 only. */
static size_t scatter_bound(test_worst *w, const double *got, const double *want, const double *t0,
                            const double *dy, const int64_t *ids, size_t N, size_t R, size_t D,
                            const char *what)
{
    size_t bad = 0;
    for (size_t v = 0; v < R; v++)
        for (size_t d = 0; d < D; d++) {
            double m = fabs(t0[v * D + d]), k = 0;
            for (size_t n = 0; n < N; n++)
                if (ids[n] == (int64_t)v)
                    m += fabs(dy[n * D + d]), k++;
            bad += within(w, got[v * D + d], want[v * D + d], gm(k) * m, what, v * D + d);
        }
    return bad;
}

size_t go_scatter_unscaled(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { B = 3, L = 4, R = 5, D = 2, P = 6 };
    const size_t Bk = K == &gc_reference ? B : 1;
    static const int64_t ids[B * L] = {1, 3, 1, 1, 0, 3, 4, 1, 0, 1, 1, 1};
    static const int64_t pos[L] = {2, 0, 2, 5}; /* a position read twice */
    int64_t pids[B * L];
    for (size_t n = 0; n < B * L; n++)
        pids[n] = pos[n % L];
    double dy[B * L * D], t0[P * D], dt[P * D], odt[P * D];
    fill(dy, B * L * D, 1, r), fill(t0, P * D, 1, r);
    size_t bad = 0;
    memcpy(dt, t0, sizeof dt), memcpy(odt, t0, sizeof dt);
    refenc_embedding_lookup_backward(dt, dy, ids, Bk, L, R, D);
    cr_assert_eq(refenc_mp_embedding_backward(odt, dy, ids, B, L, R, D, 0, PREC, NULL), 0);
    bad += scatter_bound(w, dt, odt, t0, dy, ids, B * L, R, D, "lookup dtable");
    memcpy(dt, t0, sizeof dt), memcpy(odt, t0, sizeof dt);
    refenc_embedding_add_backward(dt, dy, ids, Bk, L, R, D);
    cr_assert_eq(refenc_mp_embedding_backward(odt, dy, ids, B, L, R, D, 0, PREC, NULL), 0);
    bad += scatter_bound(w, dt, odt, t0, dy, ids, B * L, R, D, "token types dtable");
    memcpy(dt, t0, sizeof dt), memcpy(odt, t0, sizeof dt);
    refenc_learned_pe_backward(dt, dy, pos, Bk, L, P, D);
    cr_assert_eq(refenc_mp_learned_pe_backward(odt, dy, pos, B, L, P, D, PREC, NULL), 0);
    bad += scatter_bound(w, dt, odt, t0, dy, pids, B * L, P, D, "learned PE dtable");
    return bad;
}
