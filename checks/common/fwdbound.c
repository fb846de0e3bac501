#include "fwdbound.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "propcase.h"

#define U TEST_U
#define TINY 0x1p-1074 /* absolute error of a subnormal result, per ulp */

static double g(double n)
{
    return test_gamma(n);
}

static double *dalloc(size_t n)
{
    return prop_calloc(n, sizeof(double));
}

/* ---------------------------------------------------------------------------
 * Certified spectral norms. */

/* C = X Y for symmetric n x n X, Y (|X|, |Y| if absval). */
static void matmul(double *C, const double *X, const double *Y, size_t n, int absval)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double acc = 0.0;
            for (size_t k = 0; k < n; k++)
                acc += absval ? fabs(X[i * n + k]) * fabs(Y[k * n + j]) : X[i * n + k] * Y[k * n + j];
            C[i * n + j] = acc;
        }
}

static double frobenius(const double *X, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n * n; i++)
        s += X[i] * X[i];
    return sqrt(s);
}

double fb_norm2_upper(const double *W, size_t rows, size_t cols)
{
    /* A = W W^T (rows <= cols) or W^T W: |W|_2^2 = |A|_2. */
    const int by_rows = rows <= cols;
    const size_t n = by_rows ? rows : cols, m = by_rows ? cols : rows;
    double *A = dalloc(7 * n * n);
    double *F0 = A + n * n, *B2 = F0 + n * n, *F2 = B2 + n * n, *B4 = F2 + n * n;
    double *T1 = B4 + n * n, *T2 = T1 + n * n;

    /* A^ = fl(A), |A^ - A| <= gamma_m |W||W|^T = F0 elementwise, hence
     * |A|_2 <= |A^|_2 + |F0|_F. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double a = 0.0, f = 0.0;
            for (size_t k = 0; k < m; k++) {
                const double wi = by_rows ? W[i * cols + k] : W[k * cols + i];
                const double wj = by_rows ? W[j * cols + k] : W[k * cols + j];
                a += wi * wj;
                f += fabs(wi * wj);
            }
            A[i * n + j] = a;
            F0[i * n + j] = g((double)m) * f;
        }
    const double nF0 = frobenius(F0, n);

    /* A^ is symmetric (the same products in the same order), so
     * |A^|_2^8 = max lambda^8 <= sum lambda^8 = tr(A^^8) = |A^^4|_F^2.
     * B2 = fl(A^ A^): |B2 - A^^2| <= gamma_n |A^||A^| = F2.
     * B4 = fl(B2 B2): |B4 - A^^4| <= F2|B2| + |B2|F2 + F2 F2 + gamma_n |B2||B2| = F4,
     * and |F2|B2| + |B2|F2|_F <= 2 |F2|B2||_F (one is the other's transpose). */
    matmul(B2, A, A, n, 0);
    matmul(F2, A, A, n, 1);
    for (size_t i = 0; i < n * n; i++)
        F2[i] *= g((double)n);
    matmul(B4, B2, B2, n, 0);
    matmul(T1, F2, B2, n, 1);
    matmul(T2, F2, F2, n, 1);
    double nF4 = 2.0 * frobenius(T1, n) + frobenius(T2, n);
    matmul(T1, B2, B2, n, 1);
    nF4 += g((double)n) * frobenius(T1, n);

    const double normA = pow(frobenius(B4, n) + nF4, 0.25) + nF0;
    free(A);
    /* the bound's own evaluation: sums of at most 4 n^2 + 64 non-negative
     * terms in sequence, then pow and sqrt */
    return sqrt(normA) * (1.0 + g(4.0 * (double)(n * n) + 64.0));
}

void fb_norms_compute(fb_norms *nm, const refenc_params *p, const refenc_config *cfg)
{
    const size_t N = cfg->n_layers, H = cfg->n_heads, D = cfg->d_model, F = cfg->d_ff, Dh = D / H;
    nm->N = N;
    nm->H = H;
    nm->qkv = dalloc(N * 3 * H);
    nm->o = dalloc(N);
    nm->l1 = dalloc(N);
    nm->l2 = dalloc(N);
    for (size_t i = 0; i < N; i++) {
        const refenc_layer_params *lp = &p->layers[i];
        for (size_t t = 0; t < 3; t++)
            for (size_t h = 0; h < H; h++)
                nm->qkv[(i * 3 + t) * H + h] =
                    fb_norm2_upper(lp->in_proj_weight + (t * D + h * Dh) * D, Dh, D);
        nm->o[i] = fb_norm2_upper(lp->out_proj_weight, D, D);
        /* the gated FFN's linear1 is (2F, D): its norm bounds each half's */
        nm->l1[i] = fb_norm2_upper(lp->linear1_weight, cfg->ffn_type == REFENC_FFN_GLU ? 2 * F : F, D);
        nm->l2[i] = fb_norm2_upper(lp->linear2_weight, D, F);
    }
}

void fb_norms_free(fb_norms *nm)
{
    free(nm->qkv);
    free(nm->o);
    free(nm->l1);
    free(nm->l2);
    memset(nm, 0, sizeof *nm);
}

/* ---------------------------------------------------------------------------
 * Single stages, componentwise. */

/* The documented two-pass LayerNorm at the computed input x^ (one row):
 *   mu^ = fl(sum x / D):      |mu^ - mu| <= gamma_D sum|x| / D = e_mu
 *   dev^ = fl(x - mu^):       |dev^ - dev| <= e_mu + gamma_1 |dev^| = e_dev
 *   ss^ = fl(sum dev^^2):     |ss^ - sum dev^^2| <= gamma_D ss^
 *   sum dev^^2 - sum dev^2:   <= sum e_dev (2 |dev^| + e_dev)
 *   var^ = fl(ss^ / D):       + gamma_1 var^
 *   V^ = fl(var^ + eps):      + gamma_1 V^                       -> e_V
 *   s^ = fl(sqrt V^):         |s^ - s| <= gamma_1 s^ + e_V / s^   = e_s
 *   n^ = fl(dev^ / s^):       |n^ - dev/s| <= gamma_1 |n^| + e_dev / s^
 *                                             + (|dev^| + e_dev) e_s / (s^ (s^ - e_s))
 *   y^ = fl(fl(n^ gamma) + beta): + gamma_2 (|n^ gamma| + |beta|)
 * rnd[d] receives |y^_d - LN(x^)_d|; returns s_lo(enorm), the smallest
 * sqrt(var + eps) on the segment from x^ to any x within enorm (2-norm):
 * s is 1/sqrt(D)-Lipschitz, so s_lo = s^ - e_s - enorm / sqrt D (<= 0: no bound). */
void fb_moments(const double *x, size_t D, double *mu_out, double *e_mu_out, double *var_out,
                double *e_var_out)
{
    const double dD = (double)D;
    double sum = 0.0, sabs = 0.0;
    for (size_t d = 0; d < D; d++) {
        sum += x[d];
        sabs += fabs(x[d]);
    }
    const double mu = sum / dD;
    const double e_mu = g(dD) * sabs / dD;
    double ss = 0.0, cross = 0.0;
    for (size_t d = 0; d < D; d++) {
        const double dev = x[d] - mu;
        const double e_dev = e_mu + g(1) * fabs(dev);
        ss += dev * dev;
        cross += e_dev * (2.0 * fabs(dev) + e_dev);
    }
    const double var = ss / dD;
    *mu_out = mu;
    *e_mu_out = e_mu;
    *var_out = var;
    *e_var_out = g(1) * var + (g(dD) * ss + cross) / dD;
}

static double layernorm_row(double *rnd, const double *x, const double *gamma,
                            const double *beta, size_t D, double eps, double enorm)
{
    const double dD = (double)D;
    double mu, e_mu, var, e_var;
    fb_moments(x, D, &mu, &e_mu, &var, &e_var);
    const double V = var + eps;
    const double s = sqrt(V);
    const double e_V = e_var + g(1) * V;
    const double e_s = g(1) * s + e_V / s;
    if (!(s - e_s > 0.0)) {
        for (size_t d = 0; d < D; d++)
            rnd[d] = INFINITY;
        return 0.0;
    }
    for (size_t d = 0; d < D; d++) {
        const double dev = x[d] - mu;
        const double nh = dev / s;
        const double e_dev = e_mu + g(1) * fabs(dev);
        const double e_n = g(1) * fabs(nh) + e_dev / s + (fabs(dev) + e_dev) * e_s / (s * (s - e_s));
        rnd[d] = fabs(gamma[d]) * e_n + g(2) * (fabs(nh * gamma[d]) + (beta != NULL ? fabs(beta[d]) : 0.0));
    }
    return s - e_s - enorm / sqrt(dD);
}

void fb_layernorm(double *y, double *ey, const double *x, const double *ex,
                  const double *gamma, const double *beta, size_t N, size_t D, double eps)
{
    refenc_layernorm_forward(y, x, gamma, beta, N, D, eps);
    for (size_t n = 0; n < N; n++) {
        double enorm = 0.0;
        for (size_t d = 0; ex != NULL && d < D; d++)
            enorm += ex[n * D + d] * ex[n * D + d];
        enorm = sqrt(enorm);
        /* Input errors: the exact n(x) = P x / s(x) (P removes the mean) has
         * Jacobian (1/s)(P - p p^T / (D s^2)), p = P x, whose eigenvalues lie
         * in [0, 1/s]; so |n(x^)_d - n(x)_d| <= |n(x^) - n(x)|_2 <= enorm / s_lo. */
        const double s_lo = layernorm_row(ey + n * D, x + n * D, gamma, beta, D, eps, enorm);
        for (size_t d = 0; d < D; d++)
            ey[n * D + d] += enorm == 0.0 ? 0.0
                             : s_lo > 0.0 ? fabs(gamma[d]) * enorm / s_lo : INFINITY;
    }
}

/* |refenc_gelu(x) - x Phi(x)| for an exact input x.
 * t^ = fl(-x * M_SQRT1_2): the constant and the product, |t^ - t| <= gamma_2 |t|
 * (gamma_3 |t^| covers it); erfc at t^ within 5 ulps; erfc(t^) - erfc(t) <=
 * |t^ - t| (2/sqrt pi) exp(-t_min^2); 0.5 is exact; the product adds gamma_1 |y|. */
static double gelu_rounding(double x, double y)
{
    const double t = -x * M_SQRT1_2;
    const double et = g(3) * fabs(t);
    const double E = erfc(t);
    const double tmin = fmax(0.0, fabs(t) - et);
    const double eE = 2.0 * FB_ULPS_ERFC * U * E / (1.0 - 2.0 * FB_ULPS_ERFC * U) +
                      FB_ULPS_ERFC * TINY + et * M_2_SQRTPI * exp(-tmin * tmin);
    return g(1) * fabs(y) + 0.5 * fabs(x) * eE;
}

/* |fl(x / (1 + exp(a^))) - x / (1 + exp(a))| for exact x, the exponent a^
 * computed within ea of the exact a (the common tail of GELU-tanh, a = -2z,
 * and quick GELU, a = -1.702 x):
 *   E^ = exp(a^) within 1 ulp: E^ / exp(a) in [e^{-ea}(1 - 2u), e^{ea}(1 + 2u)]: rel_E
 *   1 + E^: relative to 1 + exp(a) at most rel_E + u + rel_E u = rel_d
 *   y^ = fl(x / .): |y^/y - 1| <= (1 + u)/(1 - rel_d) - 1 = rel_y.
 * If E^ overflows, y^ = -0 and |y| <= |x| exp(-a) <= |x| exp(-a^ + ea). */
static double logistic_rounding(double x, double y, double a, double ea)
{
    const double E = exp(a);
    if (isinf(E))
        return fabs(x) * exp(-a + ea) + TINY;
    const double rel_E = expm1(ea) * (1.0 + 2.0 * FB_ULPS_EXP * U) + 2.0 * FB_ULPS_EXP * U;
    const double rel_d = rel_E + U + rel_E * U;
    const double rel_y = (1.0 + U) / (1.0 - rel_d) - 1.0;
    return rel_y * fabs(y) / (1.0 - rel_y) + 2.0 * TINY;
}

/* |refenc_gelu_tanh(x) - 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))| for exact x.
 * y = x / (1 + exp(-2z)), z = S (x + C x^3), S = sqrt(2/pi), C = 0.044715.
 *   w^ = fl(x + fl(C^ fl(fl(x x) x))): x^3 two roundings, C^ = C(1+d) and the
 *        product two more, the sum one: |w^ - w| <= gamma_5 (|x| + |C x^3|)
 *        (gamma_6 covers using the computed |C x^3|)
 *   z^ = fl(S^ w^): |z^ - z| <= S e_w (1 + u) + gamma_3 |z^|
 *   then logistic_rounding with a = -2z (the doubling is exact), ea = 2 e_z. */
static double gelu_tanh_rounding(double x, double y)
{
    const double C = 0.044715, S = 0.7978845608028654;
    const double cx3 = C * (x * x * x);
    const double ew = g(6) * (fabs(x) + fabs(cx3));
    const double z = S * (x + cx3);
    const double ez = S * ew * (1.0 + U) + g(3) * fabs(z);
    return logistic_rounding(x, y, -2.0 * z, 2.0 * ez);
}

/* |refenc_quick_gelu(x) - x / (1 + exp(-1.702 x))| for exact x:
 *   t^ = fl(A^ x), A^ = 1.702 (1 + d): |t^ - t| <= gamma_2 |t| (gamma_3 |t^| covers it),
 *   then logistic_rounding with a = -t^, ea = gamma_3 |t^|. */
static double quick_gelu_rounding(double x, double y)
{
    const double t = 1.702 * x;
    return logistic_rounding(x, y, -t, g(3) * fabs(t));
}

/* |refenc_silu(x) - x / (1 + exp(-x))| for exact x: a = -x exact, ea = 0. */
static double silu_rounding(double x, double y)
{
    return logistic_rounding(x, y, -x, 0.0);
}

double fb_activation_rounding(refenc_activation act, double x, double y)
{
    switch (act) {
    case REFENC_ACT_GELU: return gelu_rounding(x, y);
    case REFENC_ACT_GELU_TANH: return gelu_tanh_rounding(x, y);
    case REFENC_ACT_QUICK_GELU: return quick_gelu_rounding(x, y);
    case REFENC_ACT_SILU: return silu_rounding(x, y);
    case REFENC_ACT_RELU: break;
    }
    return 0.0; /* ReLU is exact */
}

static double act_lipschitz(refenc_activation act)
{
    return act == REFENC_ACT_RELU ? 1.0 : FB_LIP_GELU;
}

/* Componentwise: y_a = a c - b s, y_b = b c + a s, with c, s within
 * e_c = 2u + gamma_1 |angle^| of the exact cos, sin of p theta_j (see
 * chain_rope), two products and a sum (gamma_2), and the input errors
 * through the computed c, s: (|c| + e_c) e_a + (|s| + e_c) e_b. */
void fb_rope(double *y, double *ey, const double *x, const double *ex, const int64_t *pos,
             size_t N, size_t L, size_t Dh, double base, refenc_rope_layout layout)
{
    refenc_rope_forward(y, x, pos, N, L, Dh, base, layout);
    const size_t half = Dh / 2;
    for (size_t n = 0; n < N; n++)
        for (size_t l = 0; l < L; l++) {
            const size_t off = (n * L + l) * Dh;
            for (size_t j = 0; j < half; j++) {
                const size_t ia = layout == REFENC_ROPE_HALF ? j : 2 * j;
                const size_t ib = layout == REFENC_ROPE_HALF ? j + half : 2 * j + 1;
                const double angle = (double)pos[l] * refenc_rope_frequency(j, Dh, base);
                const double c = cos(angle), s = sin(angle);
                const double ecs = 2.0 * FB_ULPS_SINCOS * U + g(1) * fabs(angle);
                const double a = x[off + ia], b = x[off + ib];
                const double ea = ex != NULL ? ex[off + ia] : 0.0, eb = ex != NULL ? ex[off + ib] : 0.0;
                const double common = (fabs(a) + fabs(b)) * ecs;
                ey[off + ia] = g(2) * (fabs(a * c) + fabs(b * s)) + common +
                               (fabs(c) + ecs) * ea + (fabs(s) + ecs) * eb;
                ey[off + ib] = g(2) * (fabs(b * c) + fabs(a * s)) + common +
                               (fabs(c) + ecs) * eb + (fabs(s) + ecs) * ea;
            }
        }
}

/* Bound for one softmax row w computed by the reference from the values
 * z_j it exponentiates (z = s / tau as computed, -inf for masked entries),
 * given ez_j >= |z^_j - z_j| for the exact z.
 *   Rounding at z^ (the max m is exact): t^_j = fl(z^_j - m) is within a
 *   factor (1 + u) of z^_j - m, so exp(t^_j) = exp(z^_j - m) e^{+-u|z^_j - m|},
 *   and exp adds 1 ulp: e^_j = exp(z^_j - m)(1 + alpha_j), |alpha_j| <= a_j =
 *   e^{u|z^_j - m|}(1 + 2u) - 1.  The sum from 0.0 adds gamma_{n-1}, the division u:
 *   w^_j / softmax(z^)_j - 1 <= (1 + a_j)(1 + u) / ((1 - a_max)(1 - gamma_{n-1})) - 1 = r_j.
 *   Input: softmax(z)_j / softmax(z^)_j lies in [e^{-2 delta}, e^{2 delta}],
 *   delta = max_j ez_j, since softmax(z)_j = softmax(z^)_j e^{z_j - z^_j} /
 *   sum_k softmax(z^)_k e^{z_k - z^_k}.
 *   Together: |w^_j - w_j| <= w^_j (r_j + e^{2 delta} - 1) / (1 - r_j), plus
 *   subnormal terms (absolute, 2^-1074 per ulp each, over a sum >= 1). */
static void softmax_row_bound(double *ew, const double *w, const double *z, const double *ez,
                              size_t n)
{
    double m = -INFINITY, delta = 0.0, amax = 0.0;
    for (size_t j = 0; j < n; j++)
        if (z[j] > m)
            m = z[j];
    if (m == -INFINITY) { /* every entry masked: zeros, exactly as in exact arithmetic */
        for (size_t j = 0; j < n; j++)
            ew[j] = 0.0;
        return;
    }
    for (size_t j = 0; j < n; j++) {
        if (z[j] == -INFINITY)
            continue;
        const double a = expm1(U * fabs(z[j] - m)) * (1.0 + 2.0 * FB_ULPS_EXP * U) +
                         2.0 * FB_ULPS_EXP * U;
        amax = fmax(amax, a);
        delta = fmax(delta, ez[j]);
    }
    const double den = (1.0 - amax) * (1.0 - g((double)n - 1.0) - 2.0 * FB_ULPS_EXP * (double)n * TINY);
    const double growth = expm1(2.0 * delta);
    for (size_t j = 0; j < n; j++) {
        if (z[j] == -INFINITY) {
            ew[j] = 0.0;
            continue;
        }
        const double a = expm1(U * fabs(z[j] - m)) * (1.0 + 2.0 * FB_ULPS_EXP * U) +
                         2.0 * FB_ULPS_EXP * U;
        const double r = (1.0 + a) * (1.0 + U) / den - 1.0;
        ew[j] = w[j] * (r + growth) / (1.0 - r) + 4.0 * FB_ULPS_EXP * TINY;
    }
}

void fb_softmax(double *y, double *ey, const double *s, const double *es, size_t R, size_t n,
                double tau)
{
    double *z = dalloc(2 * n), *ez = z + n;
    refenc_softmax_forward(y, s, R, n, tau);
    for (size_t r = 0; r < R; r++) {
        /* z^ = fl(s / tau): |z^ - s/tau| <= gamma_1 |z^| + es / tau */
        for (size_t j = 0; j < n; j++) {
            z[j] = s[r * n + j] / tau;
            ez[j] = g(1) * fabs(z[j]) + (es != NULL ? es[r * n + j] / tau : 0.0);
        }
        softmax_row_bound(ey + r * n, y + r * n, z, ez, n);
    }
    free(z);
}

/* ---------------------------------------------------------------------------
 * The encoder chain, with row 2-norm bounds. */

/* y = x W^T + b for rows of x (N, in); out = nblk blocks of out/nblk columns.
 * Ey[n * nblk + k] bounds block k of row n:
 *   |W_k|_2 Ex[n] + |(gamma_{in+1} (sum_i |x_i W_oi| + |b_o|))_{o in block k}|_2
 * (the dot product from 0.0 then the bias: in + 1 roundings, Higham 3.1). */
static void chain_linear(double *y, double *Ey, const double *x, const double *Ex,
                         const double *W, const double *b, size_t N, size_t in, size_t out,
                         size_t nblk, const double *nW)
{
    refenc_linear_forward(y, x, W, b, N, in, out);
    const double gin = g((double)in + 1.0);
    const size_t bw = out / nblk;
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * in;
        for (size_t k = 0; k < nblk; k++) {
            double r2 = 0.0;
            for (size_t o = k * bw; o < (k + 1) * bw; o++) {
                const double *w_o = W + o * in;
                double mag = b != NULL ? fabs(b[o]) : 0.0;
                for (size_t i = 0; i < in; i++)
                    mag += fabs(x_n[i] * w_o[i]);
                r2 += (gin * mag) * (gin * mag);
            }
            Ey[n * nblk + k] = nW[k] * Ex[n] + sqrt(r2);
        }
    }
}

/* y = a + b over rows of width D: Ey = Ea + Eb + |gamma_1 |y||_2. */
static void chain_add(double *y, double *Ey, const double *a, const double *Ea, const double *b,
                      const double *Eb, size_t N, size_t D)
{
    for (size_t n = 0; n < N; n++) {
        double r2 = 0.0;
        for (size_t d = 0; d < D; d++) {
            y[n * D + d] = a[n * D + d] + b[n * D + d];
            const double t = g(1) * fabs(y[n * D + d]);
            r2 += t * t;
        }
        Ey[n] = Ea[n] + Eb[n] + sqrt(r2);
    }
}

/* LayerNorm: the exact map has Lipschitz constant max|gamma| / s_lo in the
 * 2-norm (Jacobian above), plus the rounding at x^ (layernorm_row). */
static void chain_layernorm(double *y, double *Ey, const double *x, const double *Ex,
                            const double *gamma, const double *beta, size_t N, size_t D, double eps)
{
    double *rnd = dalloc(D), gmax = 0.0;
    refenc_layernorm_forward(y, x, gamma, beta, N, D, eps);
    for (size_t d = 0; d < D; d++)
        gmax = fmax(gmax, fabs(gamma[d]));
    for (size_t n = 0; n < N; n++) {
        const double s_lo = layernorm_row(rnd, x + n * D, gamma, beta, D, eps, Ex[n]);
        double r2 = 0.0;
        for (size_t d = 0; d < D; d++)
            r2 += rnd[d] * rnd[d];
        Ey[n] = (Ex[n] == 0.0 ? 0.0 : s_lo > 0.0 ? gmax * Ex[n] / s_lo : INFINITY) + sqrt(r2);
    }
    free(rnd);
}

/* RMSNorm, y = s x / r, r = sqrt(|x|^2/D + eps), s = w or 1 + w: the
 * Jacobian diag(s) (I - x^ x^T / D) / r (x^ = x / r, |x^|^2 / D <= 1) has
 * 2-norm at most max|s| / r, and r >= r_lo = sqrt(max(0, |x^|_2 - Ex)^2 / D
 * + eps) on the segment from the computed input to any x within Ex; plus
 * the rounding at the computed input (bnd_rmsnorm's derivation,
 * checks/oracle/bounds.c, with no input error): r^ within rho r^, rho =
 * gamma_{D+2}/2 + u; z^ within (|z^| E_r) / (r^ - E_r) + u |z^|; the scale
 * fl(1 + w) within u |s|; the product u |y^|. */
static void chain_rmsnorm(double *y, double *Ey, const double *x, const double *Ex, const double *w,
                          int offset, size_t N, size_t D, double eps)
{
    const double dD = (double)D, rho = g(dD + 2.0) / 2 + U;
    refenc_rmsnorm_forward(y, x, w, N, D, eps, offset);
    double smax = 0.0;
    for (size_t d = 0; d < D; d++)
        smax = fmax(smax, (offset ? fabs(1.0 + w[d]) : fabs(w[d])) * (1.0 + g(1)));
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D;
        double ss = 0.0, r2 = 0.0;
        for (size_t d = 0; d < D; d++)
            ss += x_n[d] * x_n[d];
        const double r = sqrt(ss / dD + eps), E_r = rho * r;
        const double xn_lo = fmax(0.0, sqrt(ss) * (1.0 - g(dD + 2.0)) - Ex[n]);
        const double r_lo = sqrt(xn_lo * xn_lo / dD + eps);
        for (size_t d = 0; d < D; d++) {
            const double z = x_n[d] / r, s = offset ? 1.0 + w[d] : w[d];
            const double E_z = fabs(z) * E_r / (r - E_r) + U * fabs(z);
            const double E_s = offset ? U * fabs(s) : 0.0;
            const double t = fabs(s) * E_z + (fabs(z) + E_z) * E_s + U * fabs(y[n * D + d]);
            r2 += t * t;
        }
        const double lip = Ex[n] == 0.0 ? 0.0 : r_lo > 0.0 && E_r < r / 2 ? smax * Ex[n] / r_lo : INFINITY;
        Ey[n] = lip + (E_r < r / 2 ? sqrt(r2) : INFINITY);
    }
}

/* The configured norm (norm_type). */
static void chain_norm(double *y, double *Ey, const double *x, const double *Ex, const double *weight,
                       const double *bias, size_t N, size_t D, double eps, const refenc_config *cfg)
{
    if (cfg->norm_type == REFENC_NORMTYPE_RMSNORM)
        chain_rmsnorm(y, Ey, x, Ex, weight, cfg->rmsnorm_offset, N, D, eps);
    else
        chain_layernorm(y, Ey, x, Ex, weight, bias, N, D, eps);
}

/* act over rows of width F: Ey = Lip Ex + |rounding|_2. */
static void chain_activation(double *y, double *Ey, const double *x, const double *Ex, size_t N,
                             size_t F, refenc_activation act)
{
    refenc_activation_forward(y, x, N * F, act);
    for (size_t n = 0; n < N; n++) {
        double r2 = 0.0;
        for (size_t f = 0; f < F; f++) {
            const double t = fb_activation_rounding(act, x[n * F + f], y[n * F + f]);
            r2 += t * t;
        }
        Ey[n] = act_lipschitz(act) * Ex[n] + sqrt(r2);
    }
}

/* RoPE on (NH, L, Dh), bounds per (nh, l).  y^ - y = (R^ - R) x^ + R (x^ - x) + rho:
 * R is orthogonal (|R dx|_2 = |dx|_2); R^ - R has entries of at most
 * e_c = 2u + gamma_1 |angle^| (the angle fl(p theta_j) within gamma_1, cos and
 * sin within 1 ulp <= 2^-52, 1-Lipschitz); rho, two products and a sum per
 * output: gamma_2 (|a c| + |b s|).  Componentwise terms go in the 2-norm. */
static void chain_rope(double *y, double *Ey, const double *x, const double *Ex,
                       const int64_t *pos, size_t NH, size_t L, size_t Dh, double base,
                       refenc_rope_layout layout)
{
    refenc_rope_forward(y, x, pos, NH, L, Dh, base, layout);
    const size_t half = Dh / 2;
    for (size_t n = 0; n < NH; n++)
        for (size_t l = 0; l < L; l++) {
            const double *x_nl = x + (n * L + l) * Dh;
            double r2 = 0.0;
            for (size_t j = 0; j < half; j++) {
                const size_t ia = layout == REFENC_ROPE_HALF ? j : 2 * j;
                const size_t ib = layout == REFENC_ROPE_HALF ? j + half : 2 * j + 1;
                const double angle = (double)pos[l] * refenc_rope_frequency(j, Dh, base);
                const double c = cos(angle), s = sin(angle);
                const double ecs = 2.0 * FB_ULPS_SINCOS * U + g(1) * fabs(angle);
                const double a = x_nl[ia], b = x_nl[ib];
                const double ta = g(2) * (fabs(a * c) + fabs(b * s)) + (fabs(a) + fabs(b)) * ecs;
                const double tb = g(2) * (fabs(b * c) + fabs(a * s)) + (fabs(a) + fabs(b)) * ecs;
                r2 += ta * ta + tb * tb;
            }
            Ey[n * L + l] = Ex[n * L + l] + sqrt(r2);
        }
}

/* Attention with q, k, v (B, H, L, Dh) and bounds per (b, h, l).
 * Scores, for head h, query i, key j (Cauchy-Schwarz on the inputs):
 *   dot^: gamma_Dh sum |q^ k^| + |q^_i| Ek_j + Eq_i |k^_j| + Eq_i Ek_j = e_dot
 *   divisor^ = fl(fl(sqrt Dh) tau) = div (1 + eta), |eta| <= gamma_2;
 *   s^ = fl(dot^ / divisor^): |s^ - s| <= gamma_4 |s^| + e_dot (1 + gamma_2) / divisor^
 *   ALiBi bias^ = fl(-m |p_i - p_j|) (the slope as computed): gamma_1 |bias^|,
 *   the sums with the bias and the mask: gamma_1 |s^| each.
 * Weights: softmax_row_bound.  Output row i (head h), from 0.0 upward:
 *   rounding gamma_L sum_j |w^_ij v^_jd| per component, in the 2-norm, and
 *   sum_j ew_ij |v^_j|_2 + (w^_ij + ew_ij) Ev_j. */
static void chain_attention(double *out, double *Eout, double *w, double *ew,
                            const double *q, const double *Eq, const double *k, const double *Ek,
                            const double *v, const double *Ev, const refenc_attn_options *opt,
                            size_t B, size_t H, size_t L, size_t Dh)
{
    refenc_attention_forward(out, w, q, k, v, opt, B, H, L, Dh);
    const double div = sqrt((double)Dh) * opt->temperature;
    double *z = dalloc(4 * L), *ez = z + L, *nk = ez + L, *nv = nk + L;

    for (size_t b = 0; b < B; b++) {
        const uint8_t *pad_b = opt->key_padding_mask ? opt->key_padding_mask + b * L : NULL;
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h;
            const double *q_bh = q + bh * L * Dh, *k_bh = k + bh * L * Dh, *v_bh = v + bh * L * Dh;
            const double *Eq_bh = Eq + bh * L, *Ek_bh = Ek + bh * L, *Ev_bh = Ev + bh * L;
            const double *w_bh = w + bh * L * L;
            double *ew_bh = ew + bh * L * L;
            for (size_t j = 0; j < L; j++) {
                double sk = 0.0, sv = 0.0;
                for (size_t d = 0; d < Dh; d++) {
                    sk += k_bh[j * Dh + d] * k_bh[j * Dh + d];
                    sv += v_bh[j * Dh + d] * v_bh[j * Dh + d];
                }
                nk[j] = sqrt(sk) * (1.0 + g((double)Dh + 1.0));
                nv[j] = sqrt(sv) * (1.0 + g((double)Dh + 1.0));
            }
            for (size_t i = 0; i < L; i++) {
                const double *q_i = q_bh + i * Dh;
                double sq = 0.0;
                for (size_t d = 0; d < Dh; d++)
                    sq += q_i[d] * q_i[d];
                const double nq = sqrt(sq) * (1.0 + g((double)Dh + 1.0));
                int sees = 0; /* some unmasked score above -inf */
                for (size_t j = 0; j < L; j++) {
                    if ((pad_b != NULL && pad_b[j]) || (opt->causal && j > i)) {
                        z[j] = -INFINITY; /* masked in both: exact */
                        ez[j] = 0.0;
                        continue;
                    }
                    const double *k_j = k_bh + j * Dh;
                    double dot = 0.0, mag = 0.0;
                    for (size_t d = 0; d < Dh; d++) {
                        dot += q_i[d] * k_j[d];
                        mag += fabs(q_i[d] * k_j[d]);
                    }
                    const double e_dot = g((double)Dh) * mag + nq * Ek_bh[j] + Eq_bh[i] * nk[j] +
                                         Eq_bh[i] * Ek_bh[j];
                    double s = dot / div;
                    double es = g(4) * fabs(s) + e_dot * (1.0 + g(2)) / div;
                    if (opt->alibi_slopes != NULL) {
                        const double bias = refenc_alibi_bias(opt->alibi_slopes[h],
                                                              opt->positions[i], opt->positions[j]);
                        s += bias;
                        es += g(1) * fabs(bias) + g(1) * fabs(s);
                    }
                    if (opt->attn_mask != NULL) {
                        s += opt->attn_mask[i * L + j];
                        es += g(1) * fabs(s);
                    }
                    z[j] = s;
                    ez[j] = es;
                    sees |= s > -INFINITY;
                }
                /* mask_value finfo_min: with a visible key, a masked weight is
                 * exp(-DBL_MAX - max) = 0 in both, as for -inf; without one,
                 * every masked score is -DBL_MAX exactly in both: equal scores,
                 * exp(0) each (attention.h) */
                for (size_t j = 0; opt->mask_value == REFENC_MASK_FINFO_MIN && !sees && j < L; j++)
                    if ((pad_b != NULL && pad_b[j]) || (opt->causal && j > i))
                        z[j] = 0.0, ez[j] = 0.0;
                softmax_row_bound(ew_bh + i * L, w_bh + i * L, z, ez, L);
            }
            for (size_t i = 0; i < L; i++) {
                const double *w_i = w_bh + i * L, *ew_i = ew_bh + i * L;
                double prop = 0.0, r2 = 0.0;
                for (size_t j = 0; j < L; j++)
                    prop += ew_i[j] * nv[j] + (w_i[j] + ew_i[j]) * Ev_bh[j];
                for (size_t d = 0; d < Dh; d++) {
                    double mag = 0.0;
                    for (size_t j = 0; j < L; j++)
                        mag += fabs(w_i[j] * v_bh[j * Dh + d]);
                    r2 += (g((double)L) * mag) * (g((double)L) * mag);
                }
                Eout[bh * L + i] = prop + sqrt(r2);
            }
        }
    }
    free(z);
}

/* (B, L, H) block bounds -> (B, H, L), the layout of the heads. */
static void split_bounds(double *Eh, const double *E, size_t B, size_t L, size_t H)
{
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t l = 0; l < L; l++)
                Eh[(b * H + h) * L + l] = E[(b * L + l) * H + h];
}

void fb_mha(double *y, double *Ey, double *w, double *ew, const double *x, const double *Ex,
            const double *in_w, const double *in_b, const double *out_w, const double *out_b,
            const refenc_attn_options *opt, const refenc_rope_options *rope,
            size_t B, size_t L, size_t D, size_t H, const double *nqkv, double no)
{
    const size_t Dh = D / H, BL = B * L, BLD = BL * D;
    double *buf = dalloc(9 * BLD + 12 * BL * H);
    double *q = buf, *k = q + BLD, *v = k + BLD, *qh = v + BLD, *kh = qh + BLD, *vh = kh + BLD;
    double *rot = vh + BLD, *ctxh = rot + BLD, *ctx = ctxh + BLD;
    double *Eq = ctx + BLD, *Ek = Eq + BL * H, *Ev = Ek + BL * H;
    double *Eqh = Ev + BL * H, *Ekh = Eqh + BL * H, *Evh = Ekh + BL * H;
    double *Erot = Evh + BL * H, *Ectxh = Erot + BL * H, *Ectx = Ectxh + BL * H;

    /* each head's rows of W_q, W_k, W_v: a bound per head */
    chain_linear(q, Eq, x, Ex, in_w, in_b, BL, D, D, H, nqkv);
    chain_linear(k, Ek, x, Ex, in_w + D * D, in_b != NULL ? in_b + D : NULL, BL, D, D, H, nqkv + H);
    chain_linear(v, Ev, x, Ex, in_w + 2 * D * D, in_b != NULL ? in_b + 2 * D : NULL, BL, D, D, H,
                 nqkv + 2 * H); /* in_b NULL: linear_bias false */
    refenc_heads_split(qh, q, B, L, H, Dh); /* copies: exact */
    refenc_heads_split(kh, k, B, L, H, Dh);
    refenc_heads_split(vh, v, B, L, H, Dh);
    split_bounds(Eqh, Eq, B, L, H);
    split_bounds(Ekh, Ek, B, L, H);
    split_bounds(Evh, Ev, B, L, H);
    if (rope != NULL) {
        chain_rope(rot, Erot, qh, Eqh, rope->positions, B * H, L, Dh, rope->base, rope->layout);
        memcpy(qh, rot, BLD * sizeof(double));
        memcpy(Eqh, Erot, BL * H * sizeof(double));
        chain_rope(rot, Erot, kh, Ekh, rope->positions, B * H, L, Dh, rope->base, rope->layout);
        memcpy(kh, rot, BLD * sizeof(double));
        memcpy(Ekh, Erot, BL * H * sizeof(double));
    }
    chain_attention(ctxh, Ectxh, w, ew, qh, Eqh, kh, Ekh, vh, Evh, opt, B, H, L, Dh);
    refenc_heads_merge(ctx, ctxh, B, L, H, Dh);
    /* the heads are disjoint blocks of a row: the row's bound is the 2-norm
     * of the heads' bounds */
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++) {
            double s = 0.0;
            for (size_t h = 0; h < H; h++)
                s += Ectxh[(b * H + h) * L + l] * Ectxh[(b * H + h) * L + l];
            Ectx[b * L + l] = sqrt(s);
        }
    chain_linear(y, Ey, ctx, Ectx, out_w, out_b, BL, D, D, 1, &no);
    free(buf);
}

void fb_mha_observed(double *y, double *Ey, double *w, double *ew, const double *x,
                     const double *in_w, const double *in_b, const double *out_w,
                     const double *out_b, const refenc_attn_options *opt,
                     const refenc_rope_options *rope, size_t B, size_t L, size_t D, size_t H,
                     const double *nqkv, double no)
{
    const size_t Dh = D / H, BL = B * L, BLD = BL * D, BHLL = B * H * L * L;
    double *buf = dalloc(10 * BLD + BHLL + 8 * BL * H);
    refenc_mha_work wk = {buf, buf + BLD, buf + 2 * BLD, buf + 3 * BLD, buf + 4 * BLD,
                          buf + 5 * BLD, buf + 6 * BLD, buf + 7 * BLD, buf + 10 * BLD};
    double *ctxh = buf + 8 * BLD, *y2 = buf + 9 * BLD;
    double *Eq = buf + 10 * BLD + BHLL, *Ek = Eq + BL * H, *Ev = Ek + BL * H;
    double *Eqh = Ev + BL * H, *Ekh = Eqh + BL * H, *Evh = Ekh + BL * H;
    double *Ectxh = Evh + BL * H, *Ectx = Ectxh + BL * H;
    refenc_mha_forward(y, &wk, x, in_w, in_b, out_w, out_b, opt, rope, B, L, D, H);

    /* projections of the exact x, per head block (chain_linear, Ex = 0) */
    const double *Wt[3] = {in_w, in_w + D * D, in_w + 2 * D * D};
    const double *bt[3] = {in_b, in_b != NULL ? in_b + D : NULL, in_b != NULL ? in_b + 2 * D : NULL};
    double *Et[3] = {Eq, Ek, Ev}, *proj[3] = {ctxh, y2, ctxh};
    double *zero = dalloc(BL);
    for (size_t t = 0; t < 3; t++)
        chain_linear(proj[t], Et[t], x, zero, Wt[t], bt[t], BL, D, D, H, nqkv + t * H);
    free(zero);
    split_bounds(Eqh, Eq, B, L, H);
    split_bounds(Ekh, Ek, B, L, H);
    split_bounds(Evh, Ev, B, L, H);

    if (rope != NULL) {
        /* Whatever coordinates RoPE pairs, each pair (a, b) is rotated with
         * cos, sin within e_c = 2u + gamma_1 |angle| (the largest angle at
         * position p is p theta_0 = p) and rounded within gamma_2 (|a| + |b|)
         * per output: the pair's error is at most 2 (gamma_2 + e_c) |(a, b)|_2,
         * the head's at most 2 (gamma_2 + e_c) |x_h|_2; the rotation keeps
         * the input errors' 2-norm.  x_h: the projection before rotation
         * (w.q, w.k; mha.c rotates the split copies in place). */
        for (size_t t = 0; t < 2; t++) {
            const double *pre = t == 0 ? wk.q : wk.k;
            double *E = t == 0 ? Eqh : Ekh;
            for (size_t b = 0; b < B; b++)
                for (size_t h = 0; h < H; h++)
                    for (size_t l = 0; l < L; l++) {
                        const double *v = pre + (b * L + l) * D + h * Dh;
                        double s2 = 0.0;
                        for (size_t d = 0; d < Dh; d++)
                            s2 += v[d] * v[d];
                        const double ec = 2.0 * FB_ULPS_SINCOS * U + g(1) * fabs((double)rope->positions[l]);
                        E[(b * H + h) * L + l] += 2.0 * (g(2) + ec) * sqrt(s2) * (1.0 + g((double)Dh + 1.0));
                    }
        }
    }
    /* attention from the rotated q, k and the v that mha_forward computed */
    chain_attention(ctxh, Ectxh, w, ew, wk.qh, Eqh, wk.kh, Ekh, wk.vh, Evh, opt, B, H, L, Dh);
    cr_assert(memcmp(w, wk.weights, BHLL * sizeof(double)) == 0,
              "attention recomputed from refenc_mha_forward's own q, k, v gave other weights");
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++) {
            double s = 0.0;
            for (size_t h = 0; h < H; h++)
                s += Ectxh[(b * H + h) * L + l] * Ectxh[(b * H + h) * L + l];
            Ectx[b * L + l] = sqrt(s);
        }
    chain_linear(y2, Ey, wk.ctx, Ectx, out_w, out_b, BL, D, D, 1, &no);
    cr_assert(memcmp(y, y2, BLD * sizeof(double)) == 0,
              "the output projection recomputed from refenc_mha_forward's context differs");
    free(buf);
}

/* The gated FFN (glu.h), rows: a, b within Ea, Eb (chain_linear, each half's
 * norm at most linear1's), act(a) within Eg (chain_activation), then
 * h^ = fl(g^ b^):  g^ b^ - g b = (g^ - g) b^ + g (b^ - b), so
 *   Eh = max|b^| Eg + (max|g^| + Eg) Eb + |u h^|_2,
 * then linear2. */
static void chain_glu(double *y, double *Ey, const double *x, const double *Ex,
                      const refenc_layer_params *lp, size_t N, const refenc_config *cfg, double n1,
                      double n2)
{
    const size_t D = cfg->d_model, F = cfg->d_ff;
    const double *Wg, *bg, *Wu, *bu;
    refenc_glu_halves(&Wg, &bg, &Wu, &bu, lp->linear1_weight, lp->linear1_bias, D, F, cfg->glu_gate);
    double *a = dalloc(3 * N * F + 4 * N);
    double *b = a + N * F, *h = b + N * F, *Ea = h + N * F, *Eb = Ea + N, *Eg = Eb + N, *Eh = Eg + N;
    chain_linear(a, Ea, x, Ex, Wg, bg, N, D, F, 1, &n1);
    chain_activation(h, Eg, a, Ea, N, F, cfg->activation);
    chain_linear(b, Eb, x, Ex, Wu, bu, N, D, F, 1, &n1);
    for (size_t n = 0; n < N; n++) {
        double bmax = 0.0, gmax = 0.0, r2 = 0.0;
        for (size_t f = 0; f < F; f++) {
            bmax = fmax(bmax, fabs(b[n * F + f]));
            gmax = fmax(gmax, fabs(h[n * F + f]));
            h[n * F + f] *= b[n * F + f];
            r2 += (U * h[n * F + f]) * (U * h[n * F + f]);
        }
        Eh[n] = bmax * Eg[n] + (gmax + Eg[n]) * Eb[n] + sqrt(r2);
    }
    chain_linear(y, Ey, h, Eh, lp->linear2_weight, lp->linear2_bias, N, F, D, 1, &n2);
    free(a);
}

static void chain_ffn(double *y, double *Ey, const double *x, const double *Ex,
                      const refenc_layer_params *lp, size_t N, const refenc_config *cfg,
                      double n1, double n2)
{
    const size_t D = cfg->d_model, F = cfg->d_ff;
    const refenc_activation act = cfg->activation;
    if (cfg->ffn_type == REFENC_FFN_GLU) {
        chain_glu(y, Ey, x, Ex, lp, N, cfg, n1, n2);
        return;
    }
    double *h = dalloc(2 * N * F + 2 * N);
    double *a = h + N * F, *Eh = a + N * F, *Ea = Eh + N;
    chain_linear(h, Eh, x, Ex, lp->linear1_weight, lp->linear1_bias, N, D, F, 1, &n1);
    chain_activation(a, Ea, h, Eh, N, F, act);
    chain_linear(y, Ey, a, Ea, lp->linear2_weight, lp->linear2_bias, N, F, D, 1, &n2);
    free(h);
}

static void chain_layer(double *y, double *Ey, double *w, double *ew, const double *x,
                        const double *Ex, const refenc_layer_params *lp, const refenc_config *cfg,
                        const refenc_attn_options *opt, const refenc_rope_options *rope,
                        size_t B, size_t L, const fb_norms *nm, size_t li)
{
    const size_t D = cfg->d_model, H = cfg->n_heads, BL = B * L, BLD = BL * D;
    const double eps = cfg->layer_norm_eps;
    const double *nqkv = nm->qkv + li * 3 * H;
    double *buf = dalloc(5 * BLD + 5 * BL);
    double *ln = buf, *at = ln + BLD, *res = at + BLD, *f = res + BLD, *t = f + BLD;
    double *Eln = t + BLD, *Eat = Eln + BL, *Eres = Eat + BL, *Ef = Eres + BL, *Et = Ef + BL;

    if (cfg->norm == REFENC_NORM_PRE) {
        /* h = x + MHA(LN1(x));  y = h + FFN(LN2(h)) */
        if (lp->norm1_weight == NULL) { /* skip_first_prenorm's layer 0: LN1 the identity */
            memcpy(ln, x, BLD * sizeof(double));
            memcpy(Eln, Ex, BL * sizeof(double));
        } else {
            chain_norm(ln, Eln, x, Ex, lp->norm1_weight, lp->norm1_bias, BL, D, eps, cfg);
        }
        fb_mha(at, Eat, w, ew, ln, Eln, lp->in_proj_weight, lp->in_proj_bias,
               lp->out_proj_weight, lp->out_proj_bias, opt, rope, B, L, D, H, nqkv, nm->o[li]);
        chain_add(res, Eres, x, Ex, at, Eat, BL, D);
        chain_norm(ln, Eln, res, Eres, lp->norm2_weight, lp->norm2_bias, BL, D, eps, cfg);
        chain_ffn(f, Ef, ln, Eln, lp, BL, cfg, nm->l1[li], nm->l2[li]);
        chain_add(y, Ey, res, Eres, f, Ef, BL, D);
    } else {
        /* h = LN1(x + MHA(x));  y = LN2(h + FFN(h)) */
        fb_mha(at, Eat, w, ew, x, Ex, lp->in_proj_weight, lp->in_proj_bias,
               lp->out_proj_weight, lp->out_proj_bias, opt, rope, B, L, D, H, nqkv, nm->o[li]);
        chain_add(res, Eres, x, Ex, at, Eat, BL, D);
        chain_norm(ln, Eln, res, Eres, lp->norm1_weight, lp->norm1_bias, BL, D, eps, cfg);
        chain_ffn(f, Ef, ln, Eln, lp, BL, cfg, nm->l1[li], nm->l2[li]);
        chain_add(t, Et, ln, Eln, f, Ef, BL, D);
        chain_norm(y, Ey, t, Et, lp->norm2_weight, lp->norm2_bias, BL, D, eps, cfg);
    }
    free(buf);
}

/* E[r] += |c h[r,:]|_2: one rounding of relative size c per element of row r. */
static void row_bound_add(double *E, const double *h, size_t R, size_t D, double c)
{
    for (size_t r = 0; r < R; r++) {
        double r2 = 0.0;
        for (size_t d = 0; d < D; d++)
            r2 += (c * h[r * D + d]) * (c * h[r * D + d]);
        E[r] += sqrt(r2);
    }
}

void fb_encoder(fb_result *r, const refenc_params *p, const refenc_config *cfg,
                const refenc_input *in, const fb_norms *nm)
{
    const size_t B = in->B, L = in->L, D = cfg->d_model, H = cfg->n_heads;
    const size_t BL = B * L, BLD = BL * D;
    memset(r, 0, sizeof *r);
    r->B = B;
    r->L = L;
    r->D = D;
    r->N = cfg->n_layers;
    r->BHLL = B * H * L * L;
    r->y = dalloc(BLD);
    r->Ey = dalloc(BL);
    r->w = prop_calloc(r->N, sizeof(double *));
    r->ew = prop_calloc(r->N, sizeof(double *));
    for (size_t i = 0; i < r->N; i++) {
        r->w[i] = dalloc(r->BHLL);
        r->ew[i] = dalloc(r->BHLL);
    }

    int64_t *pos0 = prop_calloc(L, sizeof(int64_t));
    for (size_t l = 0; l < L; l++)
        pos0[l] = (int64_t)l;
    const int64_t *pos = in->positions != NULL ? in->positions : pos0;
    double *slopes = dalloc(H);
    refenc_alibi_slopes(slopes, H);

    double *h = dalloc(2 * BLD + 2 * BL);
    double *nx = h + BLD, *Eh = nx + BLD, *Enx = Eh + BL;
    /* the input x is exact: Eh = 0; so is a row looked up without the scale;
     * scaled by sqrt(D): fl(sqrt D) and the product, gamma_2 |h| per element */
    if (cfg->vocab_size > 0 && cfg->scale_embedding) {
        refenc_embedding_forward(h, in->tokens, p->embedding, B, L, cfg->vocab_size, D,
                                 refenc_embedding_normalizer(D, refenc_normalizer_bits(cfg->embedding_normalizer_dtype)));
        row_bound_add(Eh, h, BL, D, g(2));
    } else if (cfg->vocab_size > 0) {
        refenc_embedding_lookup(h, in->tokens, p->embedding, B, L, cfg->vocab_size, D);
    } else {
        memcpy(h, in->x, BLD * sizeof(double));
    }
    int64_t *ids = prop_calloc(BL, sizeof(int64_t)); /* types 0, or RoBERTa's positions */
    if (cfg->type_vocab_size > 0) { /* one rounded sum per element: gamma_1 |h| */
        refenc_embedding_add(h, h, in->token_types ? in->token_types : ids,
                             p->token_type_embedding, B, L, cfg->type_vocab_size, D);
        row_bound_add(Eh, h, BL, D, g(1));
    }

    if (cfg->positional == REFENC_POS_SINUSOIDAL) {
        /* y = fl(x + sin(angle^)): the angle fl(pos w_i) within gamma_1 |angle|,
         * sin, cos within 1 ulp (<= 2^-52) and 1-Lipschitz; the sum gamma_1 |y| */
        refenc_sinusoidal_forward(nx, h, pos, B, L, D);
        for (size_t bl = 0; bl < BL; bl++) {
            double r2 = 0.0;
            for (size_t d = 0; d < D; d++) {
                const double a = refenc_sinusoidal_angle(pos[bl % L], d / 2, D);
                const double t = 2.0 * FB_ULPS_SINCOS * U + g(1) * fabs(a) + g(1) * fabs(nx[bl * D + d]);
                r2 += t * t;
            }
            Eh[bl] += sqrt(r2);
        }
        memcpy(h, nx, BLD * sizeof(double));
    } else if (cfg->positional == REFENC_POS_LEARNED) {
        if (cfg->position_ids == REFENC_POSIDS_ROBERTA) {
            refenc_position_ids_roberta(ids, in->tokens, B, L, cfg->padding_idx);
            refenc_embedding_add(h, h, ids, p->pos_embedding, B, L, cfg->max_len, D);
        } else {
            refenc_learned_pe_forward(h, h, pos, p->pos_embedding, B, L, cfg->max_len, D);
        }
        row_bound_add(Eh, h, BL, D, g(1));
    }
    free(ids);
    if (cfg->embedding_norm) {
        chain_norm(nx, Enx, h, Eh, p->embedding_norm_weight, p->embedding_norm_bias, BL, D,
                   cfg->embedding_norm_eps, cfg);
        memcpy(h, nx, BLD * sizeof(double));
        memcpy(Eh, Enx, BL * sizeof(double));
    }

    const refenc_attn_options opt = {
        .key_padding_mask = in->key_padding_mask,
        .causal = cfg->causal,
        .attn_mask = in->attn_mask,
        .alibi_slopes = cfg->positional == REFENC_POS_ALIBI ? slopes : NULL,
        .positions = pos,
        .temperature = cfg->temperature,
        .mask_value = cfg->mask_value,
    };
    const refenc_rope_options rope = {cfg->rope_layout, cfg->rope_base, pos, NULL}; /* bounds for unscaled RoPE */
    const refenc_rope_options *rope_p = cfg->positional == REFENC_POS_ROPE ? &rope : NULL;

    for (size_t i = 0; i < r->N; i++) {
        chain_layer(nx, Enx, r->w[i], r->ew[i], h, Eh, &p->layers[i], cfg, &opt, rope_p, B, L, nm, i);
        memcpy(h, nx, BLD * sizeof(double));
        memcpy(Eh, Enx, BL * sizeof(double));
    }
    if (cfg->final_norm)
        chain_norm(r->y, r->Ey, h, Eh, p->norm_weight, p->norm_bias, BL, D, cfg->layer_norm_eps, cfg);
    else {
        memcpy(r->y, h, BLD * sizeof(double));
        memcpy(r->Ey, Eh, BL * sizeof(double));
    }
    free(h);
    free(slopes);
    free(pos0);
}

void fb_result_free(fb_result *r)
{
    for (size_t i = 0; r->w != NULL && i < r->N; i++) {
        free(r->w[i]);
        free(r->ew[i]);
    }
    free(r->w);
    free(r->ew);
    free(r->y);
    free(r->Ey);
    memset(r, 0, sizeof *r);
}

void fb_encoder_checked(fb_result *r, double *y, prop_capture *cap, const refenc_params *p,
                        const refenc_config *cfg, const refenc_input *in, const fb_norms *nm,
                        const char *desc)
{
    const size_t BLD = in->B * in->L * cfg->d_model;
    prop_encoder_run(y, cap, p, cfg, in);
    fb_encoder(r, p, cfg, in, nm);
    int same = memcmp(y, r->y, BLD * sizeof(double)) == 0;
    for (size_t i = 0; same && cap != NULL && i < r->N; i++)
        same = memcmp(cap->weights[i], r->w[i], r->BHLL * sizeof(double)) == 0;
    /* an expectation, not an assertion: the property's own comparison (of the
     * encoder's values) still runs and reports whether it breaks too */
    cr_expect(same, "%s: refenc_encoder_forward differs from the composition of its documented "
              "stages (encoder.h, layer.h, mha.h), so the derived bounds do not apply to it "
              "(seed %lu)", desc, test_seed());
}

int fb_within(test_worst *w, double a, double ea, double b, double eb, const char *fmt, ...)
{
    const double tol = (ea + eb) * FB_SLACK;
    const double diff = fabs(a - b);
    const int ok = diff <= tol;
    const double ratio = !(diff == diff) ? INFINITY
                         : tol > 0 ? diff / tol : (diff > 0 ? INFINITY : 0.0);
    /* format the location only when it becomes the worst case (it is costly) */
    if (!(ratio > w->worst_ratio || (!ok && w->where[0] == '\0'))) {
        w->checked++;
        return ok;
    }
    char where[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where, sizeof where, fmt, ap);
    va_end(ap);
    return test_worst_check(w, a, b, tol, "%s", where);
}

size_t fb_outputs_outside(test_worst *w, const double *y1, const fb_result *f1, const double *y0,
                          const fb_result *f0, const char *what)
{
    const size_t D = f0->D, BLD = f0->B * f0->L * D;
    size_t bad = 0;
    for (size_t i = 0; i < BLD; i++)
        bad += !fb_within(w, y1[i], f1->Ey[i / D], y0[i], f0->Ey[i / D], "%s: output %zu", what, i);
    return bad;
}

size_t fb_outputs_changed_by(test_worst *w, prop_case *c, void (*change)(prop_case *c, void *arg),
                             void *arg)
{
    const size_t BLD = c->B * c->L * c->cfg.d_model;
    double *y0 = prop_calloc(BLD, sizeof(double)), *y1 = prop_calloc(BLD, sizeof(double));
    const refenc_input in = {.B = c->B, .L = c->L, .x = c->x, .key_padding_mask = c->pad,
                             .tokens = c->tokens, .token_types = c->types};
    fb_norms nm;
    fb_result f0, f1;
    fb_norms_compute(&nm, &c->p, &c->cfg);
    fb_encoder_checked(&f0, y0, NULL, &c->p, &c->cfg, &in, &nm, c->desc);
    change(c, arg);
    fb_encoder_checked(&f1, y1, NULL, &c->p, &c->cfg, &in, &nm, c->desc);
    const size_t bad = fb_outputs_outside(w, y1, &f1, y0, &f0, c->desc);
    fb_result_free(&f0);
    fb_result_free(&f1);
    fb_norms_free(&nm);
    free(y0);
    free(y1);
    return bad;
}
