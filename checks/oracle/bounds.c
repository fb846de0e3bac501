/* Forward error bounds of the reference (bounds.h, docs/error-bounds.md).
 * Each function restates the identity its bound comes from; u = 2^-53. */
#include "bounds.h"

#include "../../ref/gqa.h"
#include "../../ref/layer_pattern.h"
#include "../../ref/softcap.h"
#include "../../ref/window.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "../common/testutil.h"

#define U BOUND_U

double bnd_gamma(double n) { return n * U / (1.0 - n * U); }

double bnd_ulp(double y)
{
    const double a = fabs(y);
    if (isinf(a) || isnan(a))
        return INFINITY;
    return nextafter(a, INFINITY) - a;
}

static double *dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    cr_assert_not_null(p, "out of memory");
    return p;
}

/* ---- linear: y = x W^T + b -------------------------------------------- */
/* Recursive summation from 0.0 of n products (Higham 3.1):
 *   |fl(s) - s| <= gamma_n sum |x_k w_k|; the bias adds u |y|.
 * Input error: y is linear in x, so it propagates exactly as sum |w_k| E_k. */
void bnd_linear(double *E_y, const double *x, const double *E_x, const double *W,
                const double *b, const double *y, size_t N, size_t in, size_t out)
{
    const double g = bnd_gamma((double)in);
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < out; o++) {
            const double *x_n = x + n * in, *w_o = W + o * in;
            double abs_sum = 0, prop = 0;
            for (size_t k = 0; k < in; k++) {
                abs_sum += fabs(x_n[k] * w_o[k]);
                if (E_x != NULL)
                    prop += fabs(w_o[k]) * E_x[n * in + k];
            }
            E_y[n * out + o] = g * abs_sum + (b != NULL ? U * fabs(y[n * out + o]) : 0) + prop;
        }
}

/* ---- LayerNorm ---------------------------------------------------------- */
/* mu^ = fl(fl(sum x)/D):       |mu^ - mu| <= gamma_{D-1} sum|x|/D + u|mu^|      = E_mu
 * c^_d = fl(x_d - mu^):         |c^_d - c_d| <= E_mu + u|c^_d| (+ E_x,d + mean E_x) = E_c,d
 * sd^ = fl(sqrt(fl(fl(sum c^^2)/D) + eps)):  relative to s~ = sqrt(|c^|^2/D + eps),
 *   rho = gamma_{D+2}/2 + u; and |s~ - sigma| <= ||E_c||_2 / sqrt D (sqrt(a^2+e) is
 *   1-Lipschitz in a), so |sd^ - sigma| <= rho sd^ + ||E_c||_2/sqrt D = E_s.
 * n = c/sigma:  |c^/sd^ - c/sigma| <= (E_c + |c^/sd^| E_s) / (sd^ - E_s), + u |n^|.
 * y = fl(fl(n^ gamma) + beta):  |gamma| E_n + u |n^ gamma| + u |y^|. */
int bnd_layernorm(double *E_y, const double *x, const double *E_x, const double *gamma,
                  const double *beta, const double *y, size_t N, size_t D, double eps)
{
    (void)beta;
    int applicable = 1;
    double *Ec = dalloc(D);
    const double rho = bnd_gamma((double)D + 2) / 2 + U;
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D;
        double sum = 0, abs_sum = 0, Ex_mean = 0;
        for (size_t d = 0; d < D; d++) {
            sum += x_n[d];
            abs_sum += fabs(x_n[d]);
            if (E_x != NULL)
                Ex_mean += E_x[n * D + d];
        }
        const double mu = sum / (double)D;
        Ex_mean /= (double)D;
        const double E_mu = bnd_gamma((double)D - 1) * abs_sum / (double)D + U * fabs(mu);
        double ss = 0, normEc2 = 0;
        for (size_t d = 0; d < D; d++) {
            const double c = x_n[d] - mu;
            ss += c * c;
            Ec[d] = E_mu + U * fabs(c) + (E_x != NULL ? E_x[n * D + d] + Ex_mean : 0);
            normEc2 += Ec[d] * Ec[d];
        }
        const double sd = sqrt(ss / (double)D + eps);
        const double E_s = rho * sd + sqrt(normEc2 / (double)D);
        if (!(E_s < sd / 2))
            applicable = 0;
        for (size_t d = 0; d < D; d++) {
            const double nh = (x_n[d] - mu) / sd;
            const double E_n = (Ec[d] + fabs(nh) * E_s) / (sd - E_s) + U * fabs(nh);
            E_y[n * D + d] = fabs(gamma[d]) * E_n + U * fabs(nh * gamma[d]) + U * fabs(y[n * D + d]);
        }
    }
    free(Ec);
    return applicable;
}

/* ---- RMSNorm ------------------------------------------------------------ */
/* r^ = fl(sqrt(fl(fl(sum x^2)/D) + eps)): the sum of D squares of one sign is
 * within gamma_D, /D and + eps add a rounding each (eps >= 0 only dilutes a
 * relative error), sqrt halves it and rounds:  r^ = r~ (1 + theta),
 * |theta| <= rho = gamma_{D+2}/2 + u, r~ = sqrt(|x^|^2/D + eps) on the
 * computed input.  An input error E_x moves r~ by <= ||E_x||_2 / sqrt(D)
 * (sqrt(a^2/D + eps) is 1/sqrt(D)-Lipschitz in ||a||_2):
 * E_r = rho r^ + ||E_x||_2/sqrt(D).  With z^ = x^/r^ (the division rounds):
 *   |z^_d - z_d| <= E_z,d = (E_x,d + |z^_d| E_r) / (r^ - E_r) + u |z^_d|,
 * the scale s^ = w (exact) or fl(1 + w) (E_s = u |s^|), and the product rounds:
 *   |y^_d - y_d| <= |s^_d| E_z,d + (|z^_d| + E_z,d) E_s,d + u |y^_d|.
 * This is LayerNorm's bound with c = x (no mean): E_c,d = E_x,d. */
int bnd_rmsnorm(double *E_y, const double *x, const double *E_x, const double *w, int offset,
                const double *y, size_t N, size_t D, double eps)
{
    int applicable = 1;
    const double rho = bnd_gamma((double)D + 2) / 2 + U;
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D;
        double ss = 0, normEx2 = 0;
        for (size_t d = 0; d < D; d++) {
            ss += x_n[d] * x_n[d];
            if (E_x != NULL)
                normEx2 += E_x[n * D + d] * E_x[n * D + d];
        }
        const double r = sqrt(ss / (double)D + eps);
        const double E_r = rho * r + sqrt(normEx2 / (double)D);
        if (!(E_r < r / 2))
            applicable = 0;
        for (size_t d = 0; d < D; d++) {
            const double z = x_n[d] / r, s = offset ? 1.0 + w[d] : w[d];
            const double E_z = ((E_x != NULL ? E_x[n * D + d] : 0) + fabs(z) * E_r) / (r - E_r) +
                               U * fabs(z);
            const double E_s = offset ? U * fabs(s) : 0;
            E_y[n * D + d] = fabs(s) * E_z + (fabs(z) + E_z) * E_s + U * fabs(y[n * D + d]);
        }
    }
    return applicable;
}

int bnd_norm(double *E_y, const double *x, const double *E_x, const double *weight,
             const double *bias, const double *y, size_t N, size_t D, double eps,
             const refenc_config *cfg)
{
    if (cfg->norm_type == REFENC_NORMTYPE_RMSNORM)
        return bnd_rmsnorm(E_y, x, E_x, weight, cfg->rmsnorm_offset, y, N, D, eps);
    return bnd_layernorm(E_y, x, E_x, weight, bias, y, N, D, eps);
}

/* ---- softmax ------------------------------------------------------------ */
/* With k the computed argmax, y_i = exp(z_i - z_k) / sum_j exp(z_j - z_k) for
 * any k.  t^_i = fl(z^_i - z^_k) is off the exact z_i - z_k by
 *   eta_i = E_z,i + E_z,k + u |t^_i|,
 * exp adds 1 ulp (2u relative), the sum gamma_{n-1}, the division u:
 *   |y^_i - y_i| <= (eta_i + max_j eta_j + 5u + gamma_{n-1}) y^_i   (first order).
 * Masked entries (-inf) are exactly 0 on both sides. */
void bnd_softmax_scaled(double *E_y, const double *z, const double *E_z, const double *y,
                        size_t R, size_t n)
{
    const double g = bnd_gamma((double)n - 1);
    for (size_t r = 0; r < R; r++) {
        const double *z_r = z + r * n;
        size_t k = n;
        for (size_t i = 0; i < n; i++)
            if (z_r[i] != -INFINITY && (k == n || z_r[i] > z_r[k]))
                k = i;
        if (k == n) { /* all masked: exact zeros */
            for (size_t i = 0; i < n; i++)
                E_y[r * n + i] = 0;
            continue;
        }
        double eta_max = 0;
        for (size_t i = 0; i < n; i++) {
            if (z_r[i] == -INFINITY)
                continue;
            const double eta = E_z[r * n + i] + E_z[r * n + k] + U * fabs(z_r[i] - z_r[k]);
            if (eta > eta_max)
                eta_max = eta;
        }
        for (size_t i = 0; i < n; i++) {
            if (z_r[i] == -INFINITY) {
                E_y[r * n + i] = 0;
                continue;
            }
            const double eta = E_z[r * n + i] + E_z[r * n + k] + U * fabs(z_r[i] - z_r[k]);
            /* 2u LIBM_ULP_EXP per exp, twice (numerator and sum), + division */
            const double rho = eta + eta_max + 4 * LIBM_ULP_EXP * U + U + g;
            E_y[r * n + i] = rho * fabs(y[r * n + i]) + 0x1p-1070; /* subnormal floor */
        }
    }
}

void bnd_softmax(double *E_y, const double *s, const double *y, size_t R, size_t n, double tau)
{
    double *z = dalloc(R * n), *Ez = dalloc(R * n);
    for (size_t i = 0; i < R * n; i++) {
        z[i] = s[i] / tau;          /* as the reference computes it */
        Ez[i] = U * fabs(z[i]);     /* one rounding */
    }
    bnd_softmax_scaled(E_y, z, Ez, y, R, n);
    free(z);
    free(Ez);
}

/* ---- activations -------------------------------------------------------- */
void bnd_activation(double *E_y, const double *x, const double *E_x, const double *y, size_t n,
                    refenc_activation act)
{
    for (size_t i = 0; i < n; i++) {
        const double xi = x[i], ex = E_x != NULL ? E_x[i] : 0;
        double r = 0, lip = LIP_RELU;
        switch (act) {
        case REFENC_ACT_RELU: /* exact */
            break;
        case REFENC_ACT_GELU: {
            /* y = x erfc(t)/2, t = -x/sqrt2.  t^ = fl(-x M_SQRT1_2): |t^ - t| <= 2u|t^|
             * (the constant and the product).  |erfc(t^) - erfc(t)| <= 2/sqrt(pi)
             * exp(-xi^2) |t^ - t|, xi the smallest |.| between them; erfc adds 5 ulp;
             * the product x * (erfc/2) adds u |y|. */
            const double t = -xi * M_SQRT1_2, E = erfc(t);
            const double dt = 2 * U * fabs(t), xi_min = fmax(0.0, fabs(t) - dt);
            const double dE = 2 / sqrt(M_PI) * exp(-xi_min * xi_min) * dt
                              + LIBM_ULP_ERFC * bnd_ulp(E);
            r = fabs(xi) / 2 * dE + U * fabs(y[i]);
            lip = LIP_GELU;
            break;
        }
        case REFENC_ACT_GELU_TANH: {
            /* y = x / (1 + exp(-2z)), z = K (x + c x^3), K and c the doubles nearest
             * sqrt(2/pi) and 0.044715 (relative error <= u each).
             * |z^ - z| <= K (4u |c x^3| + u |x + c x^3|) + 2u |z^| = dz;
             * exp(-2z^) within (2 dz + 2u) of exp(-2z) relatively; the sum 1 + E adds
             * u (1 + E), the division u. */
            const double x3 = xi * xi * xi, inner = xi + 0.044715 * x3;
            const double z = 0.7978845608028654 * inner;
            const double dz = 0.7978845608028654 * (4 * U * fabs(0.044715 * x3) + U * fabs(inner))
                              + 2 * U * fabs(z);
            const double E = exp(-2 * z), den = 1 + E;
            if (isinf(E)) {
                r = 0x1p-1000; /* y underflows to -0; the exact value is below 2^-1000 */
            } else {
                const double rel = (E * (2 * dz + 2 * LIBM_ULP_EXP * U) + U * den) / den + U;
                r = rel * fabs(y[i]);
            }
            lip = LIP_GELU_TANH;
            break;
        }
        case REFENC_ACT_QUICK_GELU: {
            /* y = x / (1 + exp(-t)), t = A x, A the double nearest 1.702 (relative
             * error <= u): |t^ - t| <= 2u |t^| = dt (the constant and the product);
             * exp(-t^) within (dt + 2u) of exp(-t) relatively; the sum 1 + E adds
             * u (1 + E), the division u.  If exp(-t^) overflows (x < -417), y^ = -0
             * and |y| <= 417 e^-709 < 2^-1000. */
            const double t = 1.702 * xi, dt = 2 * U * fabs(t);
            const double E = exp(-t), den = 1 + E;
            if (isinf(E)) {
                r = 0x1p-1000;
            } else {
                const double rel = (E * (dt + 2 * LIBM_ULP_EXP * U) + U * den) / den + U;
                r = rel * fabs(y[i]);
            }
            lip = LIP_QUICK_GELU;
            break;
        }
        case REFENC_ACT_SILU: {
            /* quick GELU's bound with t = x exact (dt = 0); the same derivative
             * range, so the same Lipschitz constant (bounds.h). */
            const double E = exp(-xi), den = 1 + E;
            if (isinf(E)) {
                r = 0x1p-1000; /* x < -709: y^ = -0, |y| <= 709 e^-709 */
            } else {
                const double rel = (E * (2 * LIBM_ULP_EXP * U) + U * den) / den + U;
                r = rel * fabs(y[i]);
            }
            lip = LIP_QUICK_GELU;
            break;
        }
        }
        E_y[i] = r + lip * ex;
    }
}

/* ---- positional encodings ---------------------------------------------- */
/* a^ = fl(pos * pow(B, -fl(2j/n))): the rounded exponent moves the frequency by a
 * factor exp(-ln(B) e delta), |delta| <= u, pow adds 1 ulp (2u), the product u:
 *   |a^ - a| <= (ln(B) e + 2 + 1) u |a^|  (first order). */
static double angle_rel(double base, size_t j, size_t n)
{
    const double e = (double)(2 * j) / (double)n;
    return (log(base) * e + 2 * LIBM_ULP_POW + 1) * U;
}

void bnd_sinusoidal_angles(double *angle, double *E, const int64_t *pos, size_t L, size_t D)
{
    for (size_t l = 0; l < L; l++)
        for (size_t i = 0; i < D / 2; i++) {
            const double a = refenc_sinusoidal_angle(pos[l], i, D);
            if (angle != NULL)
                angle[l * (D / 2) + i] = a;
            E[l * (D / 2) + i] = angle_rel(10000.0, i, D) * fabs(a);
        }
}

/* |sin(a^) - sin(a)| <= |a^ - a|, and sin, cos add 1 ulp of the result. */
void bnd_sinusoidal_table(double *E, const int64_t *pos, size_t L, size_t D)
{
    for (size_t l = 0; l < L; l++)
        for (size_t i = 0; i < D / 2; i++) {
            const double a = refenc_sinusoidal_angle(pos[l], i, D);
            const double da = angle_rel(10000.0, i, D) * fabs(a);
            E[l * D + 2 * i] = da + LIBM_ULP_SINCOS * bnd_ulp(sin(a));
            E[l * D + 2 * i + 1] = da + LIBM_ULP_SINCOS * bnd_ulp(cos(a));
        }
}

void bnd_rope_angles(double *angle, double *E, const int64_t *pos, size_t L, size_t Dh,
                     double base)
{
    for (size_t l = 0; l < L; l++)
        for (size_t j = 0; j < Dh / 2; j++) {
            const double a = (double)pos[l] * refenc_rope_frequency(j, Dh, base);
            if (angle != NULL)
                angle[l * (Dh / 2) + j] = a;
            E[l * (Dh / 2) + j] = angle_rel(base, j, Dh) * fabs(a);
        }
}

/* (a, b) -> (a c - b s, b c + a s) with c^, s^ within E_c = da + ulp(c^) of the
 * exact cos, sin: each output errs by |a| E_c + |b| E_s + u (|a c^| + |b s^|) +
 * u |y^|; input errors propagate through the rotation: |c^| E_a + |s^| E_b. */
void bnd_rope(double *E_y, const double *x, const double *E_x, const int64_t *pos, size_t N,
              size_t L, size_t Dh, double base, refenc_rope_layout layout, const double *y)
{
    const size_t half = Dh / 2;
    for (size_t n = 0; n < N; n++)
        for (size_t l = 0; l < L; l++)
            for (size_t j = 0; j < half; j++) {
                const size_t off = (n * L + l) * Dh;
                const size_t ia = off + (layout == REFENC_ROPE_HALF ? j : 2 * j);
                const size_t ib = off + (layout == REFENC_ROPE_HALF ? j + half : 2 * j + 1);
                const double ang = (double)pos[l] * refenc_rope_frequency(j, Dh, base);
                const double da = angle_rel(base, j, Dh) * fabs(ang);
                const double c = cos(ang), s = sin(ang);
                const double Ec = da + LIBM_ULP_SINCOS * bnd_ulp(c);
                const double Es = da + LIBM_ULP_SINCOS * bnd_ulp(s);
                const double a = fabs(x[ia]), b = fabs(x[ib]);
                const double Ea = E_x ? E_x[ia] : 0, Eb = E_x ? E_x[ib] : 0;
                E_y[ia] = a * Ec + b * Es + U * (a * fabs(c) + b * fabs(s)) + U * fabs(y[ia])
                          + fabs(c) * Ea + fabs(s) * Eb;
                E_y[ib] = b * Ec + a * Es + U * (b * fabs(c) + a * fabs(s)) + U * fabs(y[ib])
                          + fabs(c) * Eb + fabs(s) * Ea;
            }
}

/* ---- attention ------------------------------------------------------------ */
/* A score the kernel replaces by the mask value: key padding, the causal
 * mask, a window (window.h; the oracle applies its own rule, so a wrong
 * window shows as a difference far beyond this bound). */
static int masked_key(const refenc_attn_options *opt, const uint8_t *pad, size_t i, size_t j)
{
    return (pad != NULL && pad[j]) || (opt->causal && j > i) ||
           refenc_window_excludes(opt->sliding_window, opt->local_attention, i, j);
}

/* d^ = fl(q.k) from 0: |d^ - d(q^,k^)| <= gamma_Dh sum|q k|; q^, k^ off by E_q, E_k:
 *   |d(q^,k^) - d(q,k)| <= sum |q^| E_k + E_q |k^| + E_q E_k  (bilinear, exact).
 * c^ = fl(fl(sqrt Dh) tau) = c (1 + theta), |theta| <= gamma_2;  s1 = fl(d^/c^):
 *   E_s1 = (gamma_Dh sum|qk| (1 + gamma_2) + gamma_2 |d^| + P) / c^ + u |s1^|.
 * ALiBi adds fl(-m |dp|) (u of it, plus |dp| times the slope's error) and u of the
 * sum; the additive mask u of the sum.  Then the softmax bound, and
 *   out = sum_j w_j v_j:  gamma_L sum w^|v^| + sum (E_w |v^| + w^ E_v + E_w E_v). */
void bnd_attention(double *E_out, double *E_w, const double *q, const double *E_q,
                   const double *k, const double *E_k, const double *v, const double *E_v,
                   const refenc_attn_options *opt, const double *slope_err, const double *w,
                   size_t B, size_t H, size_t L, size_t Dh)
{
    /* sqrt(S) tau, S = query_pre_attn_scalar or Dh: formed as the kernel does */
    const double c = sqrt(opt->score_scalar > 0 ? opt->score_scalar : (double)Dh) * opt->temperature;
    const double gD = bnd_gamma((double)Dh), g2 = bnd_gamma(2), gL = bnd_gamma((double)L);
    double *s = dalloc(L * L), *Es = dalloc(L * L);
    for (size_t b = 0; b < B; b++) {
        const uint8_t *pad = opt->key_padding_mask ? opt->key_padding_mask + b * L : NULL;
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h;
            const double *q_ = q + bh * L * Dh, *k_ = k + bh * L * Dh, *v_ = v + bh * L * Dh;
            const double *Eq = E_q ? E_q + bh * L * Dh : NULL, *Ek = E_k ? E_k + bh * L * Dh : NULL;
            const double *Ev = E_v ? E_v + bh * L * Dh : NULL;
            const double *w_ = w + bh * L * L;
            for (size_t i = 0; i < L; i++)
                for (size_t j = 0; j < L; j++) {
                    double dot = 0, A = 0, P = 0;
                    for (size_t d = 0; d < Dh; d++) {
                        const double qd = q_[i * Dh + d], kd = k_[j * Dh + d];
                        dot += qd * kd;
                        A += fabs(qd * kd);
                        const double eq = Eq ? Eq[i * Dh + d] : 0, ek = Ek ? Ek[j * Dh + d] : 0;
                        P += fabs(qd) * ek + eq * fabs(kd) + eq * ek;
                    }
                    double sv = dot / c;
                    double E = (gD * A * (1 + g2) + g2 * fabs(dot) + P) / c + U * fabs(sv);
                    if (opt->softcap > 0) {
                        /* y = cap tanh(s / cap) (softcap.h): |dy/ds| <= 1 carries E; s / cap
                         * rounds (u|s| after that derivative), tanh within 2 ulps (glibc:
                         * 4u|y|), the product u|y| (docs/error-bounds.md) */
                        const double y = refenc_softcap(sv, opt->softcap);
                        E += U * fabs(sv) + 5 * U * fabs(y);
                        sv = y;
                    }
                    if (opt->alibi_slopes != NULL) {
                        const int64_t pi = opt->positions[i], pj = opt->positions[j];
                        const double dp = (double)(pi > pj ? pi - pj : pj - pi);
                        const double bias = refenc_alibi_bias(opt->alibi_slopes[h], pi, pj);
                        sv += bias;
                        E += U * fabs(bias) + U * fabs(sv) + (slope_err ? dp * slope_err[h] : 0);
                    }
                    if (opt->attn_mask != NULL) {
                        sv += opt->attn_mask[i * L + j];
                        E += U * fabs(sv);
                    }
                    if (masked_key(opt, pad, i, j) || sv == -INFINITY) {
                        sv = -INFINITY;
                        E = 0;
                    }
                    s[i * L + j] = sv;
                    Es[i * L + j] = E;
                }
            /* mask_value finfo_min: a row with an unmasked score above -inf gives
             * its masked keys weight exp(-DBL_MAX - max) = 0 (below the subnormal
             * floor of the softmax bound), as -inf does; a row without one scores
             * every masked key -DBL_MAX exactly, in the reference as in the oracle:
             * equal scores, exp(0) each (attention.h) */
            for (size_t i = 0; opt->mask_value == REFENC_MASK_FINFO_MIN && i < L; i++) {
                int sees = 0;
                for (size_t j = 0; j < L; j++)
                    sees |= !(masked_key(opt, pad, i, j)) && s[i * L + j] > -INFINITY;
                for (size_t j = 0; !sees && j < L; j++)
                    if (masked_key(opt, pad, i, j))
                        s[i * L + j] = 0, Es[i * L + j] = 0;
            }
            double *Ew_ = E_w + bh * L * L;
            bnd_softmax_scaled(Ew_, s, Es, w_, L, L);
            for (size_t i = 0; i < L; i++)
                for (size_t d = 0; d < Dh; d++) {
                    double e = 0;
                    for (size_t j = 0; j < L; j++) {
                        const double vj = fabs(v_[j * Dh + d]), ev = Ev ? Ev[j * Dh + d] : 0;
                        const double wj = w_[i * L + j], ew = Ew_[i * L + j];
                        e += gL * wj * vj + ew * vj + wj * ev + ew * ev;
                    }
                    E_out[(bh * L + i) * Dh + d] = e;
                }
        }
    }
    free(s);
    free(Es);
}

/* ---- multi-head attention and FFN, run and bounded -------------------------- */
int bnd_mha_run_alloc(bnd_mha_run *r, size_t B, size_t L, size_t D, size_t H)
{
    return bnd_gqa_run_alloc(r, B, L, D, H, H, D / H);
}

int bnd_gqa_run_alloc(bnd_mha_run *r, size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh)
{
    memset(r, 0, sizeof *r);
    r->B = B, r->L = L, r->D = D, r->H = H, r->Hkv = Hkv, r->Dh = Dh;
    const size_t BLE = B * L * H * Dh, BLD = B * L * D; /* E = H Dh >= Hkv Dh */
    r->block = dalloc(10 * BLE + BLD + B * H * L * L);
    double *c = r->block;
    double **bufs[] = {&r->w.q, &r->w.k, &r->w.v, &r->w.qh, &r->w.kh, &r->w.vh, &r->w.ctxh,
                       &r->w.ctx, &r->qh_pre, &r->kh_pre};
    for (size_t i = 0; i < 10; i++) {
        *bufs[i] = c;
        c += BLE;
    }
    r->y = c;
    r->w.weights = c + BLD;
    r->applicable = 1;
    return 0;
}

void bnd_mha_run_free(bnd_mha_run *r)
{
    free(r->block);
    memset(r, 0, sizeof *r);
}

/* Per-head K or V errors (B, H, L, Dh) from the projection's (B, L, Ekv):
 * the repeat copies, so each key/value head's bound serves its group. */
static void kv_err_heads(double *dst, double *scratch, const double *E, size_t B, size_t L, size_t H,
                         size_t Hkv, size_t Dh)
{
    refenc_heads_split(scratch, E, B, L, Hkv, Dh);
    refenc_kv_heads_repeat(dst, scratch, B, H, Hkv, L, Dh);
}

/* The bound follows the kernel: q, k, v dot products of length D (gamma_D),
 * the scores' of length Dh (gamma_Dh: head_dim enters here, not D / H), the
 * context's of length L, out_proj's of length E = H Dh (gamma_E). */
void bnd_mha(double *E_y, double *E_w, bnd_mha_run *r, const double *x, const double *E_x,
             const double *ipw, const double *ipb, const double *opw, const double *opb,
             const refenc_attn_options *opt, const refenc_rope_options *rope,
             const double *slope_err)
{
    const size_t B = r->B, L = r->L, D = r->D, H = r->H, Hkv = r->Hkv, Dh = r->Dh, BL = B * L;
    const size_t E = H * Dh, Ekv = Hkv * Dh, BLE = BL * E;
    refenc_gqa_qk_forward(r->y, &r->w, x, ipw, ipb, opw, opb, opt, rope, r->qkn, B, L, D, H, Hkv, Dh);
    refenc_heads_split(r->qh_pre, r->w.q, B, L, H, Dh);
    double *scratch = dalloc(BLE);
    kv_err_heads(r->kh_pre, scratch, r->w.k, B, L, H, Hkv, Dh); /* the repeated k before RoPE */

    double *Eb = dalloc(12 * BLE);
    double *Eq = Eb, *Ek = Eb + BLE, *Ev = Eb + 2 * BLE, *Eqh = Eb + 3 * BLE, *Ekh = Eb + 4 * BLE;
    double *Evh = Eb + 5 * BLE, *Eqr = Eb + 6 * BLE, *Ekr = Eb + 7 * BLE, *Ectxh = Eb + 8 * BLE;
    double *Ectx = Eb + 9 * BLE, *qp = Eb + 10 * BLE, *kp = Eb + 11 * BLE;
    /* the projections as Linear wrote them: before the q/k norms, if any */
    refenc_linear_forward(qp, x, ipw, ipb, BL, D, E);
    refenc_linear_forward(kp, x, ipw + E * D, ipb != NULL ? ipb + E : NULL, BL, D, Ekv);
    bnd_linear(Eq, x, E_x, ipw, ipb, qp, BL, D, E);
    bnd_linear(Ek, x, E_x, ipw + E * D, ipb != NULL ? ipb + E : NULL, kp, BL, D, Ekv);
    if (r->qkn != NULL) { /* bnd_rmsnorm on every head's Dh values, its output the normalised q, k */
        r->applicable &= bnd_rmsnorm(Eq, qp, Eq, r->qkn->q_weight, r->qkn->offset, r->w.q, BL * H, Dh,
                                     r->qkn->eps);
        r->applicable &= bnd_rmsnorm(Ek, kp, Ek, r->qkn->k_weight, r->qkn->offset, r->w.k, BL * Hkv, Dh,
                                     r->qkn->eps);
    }
    bnd_linear(Ev, x, E_x, ipw + (E + Ekv) * D, ipb != NULL ? ipb + E + Ekv : NULL, r->w.v, BL, D, Ekv);
    refenc_heads_split(Eqh, Eq, B, L, H, Dh);
    kv_err_heads(Ekh, scratch, Ek, B, L, H, Hkv, Dh);
    kv_err_heads(Evh, scratch, Ev, B, L, H, Hkv, Dh);
    if (rope != NULL) {
        bnd_rope(Eqr, r->qh_pre, Eqh, rope->positions, B * H, L, Dh, rope->base, rope->layout,
                 r->w.qh);
        bnd_rope(Ekr, r->kh_pre, Ekh, rope->positions, B * H, L, Dh, rope->base, rope->layout,
                 r->w.kh);
    } else {
        memcpy(Eqr, Eqh, BLE * sizeof(double));
        memcpy(Ekr, Ekh, BLE * sizeof(double));
    }
    bnd_attention(Ectxh, E_w, r->w.qh, Eqr, r->w.kh, Ekr, r->w.vh, Evh, opt, slope_err,
                  r->w.weights, B, H, L, Dh);
    refenc_heads_merge(Ectx, Ectxh, B, L, H, Dh);
    bnd_linear(E_y, r->w.ctx, Ectx, opw, opb, r->y, BL, E, D);
    free(Eb);
    free(scratch);
}

void bnd_ffn(double *E_y, double *E_hidden, double *y, double *hidden, const double *x,
             const double *E_x, const double *W1, const double *b1, const double *W2,
             const double *b2, size_t N, size_t D, size_t F, refenc_activation act)
{
    double *pre = dalloc(N * F), *E_pre = dalloc(N * F);
    refenc_linear_forward(pre, x, W1, b1, N, D, F);
    bnd_linear(E_pre, x, E_x, W1, b1, pre, N, D, F);
    refenc_activation_forward(hidden, pre, N * F, act);
    bnd_activation(E_hidden, pre, E_pre, hidden, N * F, act);
    refenc_linear_forward(y, hidden, W2, b2, N, F, D);
    bnd_linear(E_y, hidden, E_hidden, W2, b2, y, N, F, D);
    free(pre);
    free(E_pre);
}

/* Gated FFN (glu.h): a = x Wg^T + bg and b = x Wu^T + bu with bnd_linear's
 * bounds, act(a) with bnd_activation's (the input error E_a through the
 * Lipschitz constant), the product h^ = fl(act^ b^):
 *   |h^ - h| <= |b^| E_act + |act^| E_b + E_act E_b + u |h^|,
 * then linear2 with bnd_linear on h^ and E_h.  hidden (N, F) receives h^. */
void bnd_glu(double *E_y, double *y, double *hidden, const double *x, const double *E_x,
             const double *Wg, const double *bg, const double *Wu, const double *bu,
             const double *W2, const double *b2, size_t N, size_t D, size_t F,
             refenc_activation act)
{
    const size_t n = N * F;
    double *a = dalloc(n), *Ea = dalloc(n), *b = dalloc(n), *Eb = dalloc(n);
    double *g = dalloc(n), *Eg = dalloc(n), *Eh = dalloc(n);
    refenc_linear_forward(a, x, Wg, bg, N, D, F);
    bnd_linear(Ea, x, E_x, Wg, bg, a, N, D, F);
    refenc_activation_forward(g, a, n, act);
    bnd_activation(Eg, a, Ea, g, n, act);
    refenc_linear_forward(b, x, Wu, bu, N, D, F);
    bnd_linear(Eb, x, E_x, Wu, bu, b, N, D, F);
    for (size_t i = 0; i < n; i++) {
        hidden[i] = g[i] * b[i];
        Eh[i] = fabs(b[i]) * Eg[i] + fabs(g[i]) * Eb[i] + Eg[i] * Eb[i] + U * fabs(hidden[i]);
    }
    refenc_linear_forward(y, hidden, W2, b2, N, F, D);
    bnd_linear(E_y, hidden, Eh, W2, b2, y, N, F, D);
    free(a), free(Ea), free(b), free(Eb), free(g), free(Eg), free(Eh);
}

/* The configured FFN's bound (ffn_type): bnd_ffn or bnd_glu on linear1's
 * halves.  hidden: (N, F). */
static void bnd_ffn_block(double *E_y, double *E_hidden, double *y, double *hidden, const double *x,
                          const double *E_x, const refenc_layer_params *lp, size_t N,
                          const refenc_config *cfg)
{
    const size_t D = cfg->d_model, F = cfg->d_ff;
    if (cfg->ffn_type != REFENC_FFN_GLU) {
        bnd_ffn(E_y, E_hidden, y, hidden, x, E_x, lp->linear1_weight, lp->linear1_bias,
                lp->linear2_weight, lp->linear2_bias, N, D, F, cfg->activation);
        return;
    }
    const double *Wg, *bg, *Wu, *bu;
    refenc_glu_halves(&Wg, &bg, &Wu, &bu, lp->linear1_weight, lp->linear1_bias, D, F, cfg->glu_gate);
    bnd_glu(E_y, y, hidden, x, E_x, Wg, bg, Wu, bu, lp->linear2_weight, lp->linear2_bias, N, D, F,
            cfg->activation);
}

/* ---- layers and stacks ---------------------------------------------------- */
static void record(bnd_steps *st, const char *name, const double *ref, const double *E, size_t n)
{
    cr_assert_lt(st->n, sizeof st->s / sizeof st->s[0], "too many steps");
    bnd_step *s = &st->s[st->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->n = n;
    s->ref = dalloc(n);
    s->E = dalloc(n);
    memcpy(s->ref, ref, n * sizeof(double));
    memcpy(s->E, E, n * sizeof(double));
}

void bnd_steps_free(bnd_steps *st)
{
    for (size_t i = 0; i < st->n; i++) {
        free(st->s[i].ref);
        free(st->s[i].E);
    }
    st->n = 0;
}

const bnd_step *bnd_steps_find(const bnd_steps *st, const char *name)
{
    for (size_t i = 0; i < st->n; i++)
        if (strcmp(st->s[i].name, name) == 0)
            return &st->s[i];
    return NULL;
}

/* y = a + b with errors: E_a + E_b + u |y|. */
static void add_bounded(double *y, double *E, const double *a, const double *Ea, const double *b,
                        const double *Eb, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        y[i] = a[i] + b[i];
        E[i] = Ea[i] + Eb[i] + U * fabs(y[i]);
    }
}

/* t = N'(t) with its bound, when the layer has the norm (sandwich_norm:
 * Gemma 2/3's norm of a sublayer's output); s, Es: scratch of t's size.
 * Returns 0 where the norm's bound does not apply. */
static int post_norm_bounded(double *t, double *Et, double *s, double *Es, const double *weight,
                             const double *bias, size_t BL, const refenc_config *cfg)
{
    const size_t D = cfg->d_model;
    if (weight == NULL)
        return 1;
    refenc_norm_forward(s, t, weight, bias, BL, D, cfg->layer_norm_eps, cfg);
    const int ok = bnd_norm(Es, t, Et, weight, bias, s, BL, D, cfg->layer_norm_eps, cfg);
    memcpy(t, s, BL * D * sizeof(double));
    memcpy(Et, Es, BL * D * sizeof(double));
    return ok;
}

int bnd_encoder(bnd_steps *st, double *y, const refenc_params *p, const refenc_config *cfg,
                const refenc_input *in)
{
    memset(st, 0, sizeof *st);
    st->applicable = 1;
    const size_t B = in->B, L = in->L, D = cfg->d_model, H = cfg->n_heads, F = cfg->d_ff;
    const size_t BL = B * L, BLD = BL * D, BHLL = B * H * L * L;
    const double eps = cfg->layer_norm_eps;
    char name[64];

    int64_t *pos_default = malloc(L * sizeof(int64_t));
    for (size_t l = 0; l < L; l++)
        pos_default[l] = (int64_t)l;
    const int64_t *pos = in->positions ? in->positions : pos_default;

    double *h = dalloc(BLD), *Eh = dalloc(BLD), *ln = dalloc(BLD), *Eln = dalloc(BLD);
    double *attn = dalloc(BLD), *Eattn = dalloc(BLD), *resid = dalloc(BLD), *Eres = dalloc(BLD);
    double *ffn = dalloc(BLD), *Effn = dalloc(BLD), *hid = dalloc(BL * F), *Ehid = dalloc(BL * F);
    double *out = dalloc(BLD), *Eout = dalloc(BLD), *Ew = dalloc(BHLL), *pe = dalloc(L * D);
    double *Epe = dalloc(L * D), *slopes = dalloc(H), *slope_err = dalloc(H);

    /* embed: sqrt(D) rounded, one product: gamma_2 |x^| (without the scale an
     * exact copy); each table row added: u |y|; PE: table error + u |y|; the
     * embedding LayerNorm: bnd_layernorm with the sum's error as input error */
    if (cfg->vocab_size > 0 && cfg->scale_embedding) {
        refenc_embedding_forward(h, in->tokens, p->embedding, B, L, cfg->vocab_size, D,
                                 refenc_embedding_normalizer(D, refenc_normalizer_bits(cfg->embedding_normalizer_dtype)));
        for (size_t i = 0; i < BLD; i++)
            Eh[i] = bnd_gamma(2) * fabs(h[i]);
    } else if (cfg->vocab_size > 0) {
        refenc_embedding_lookup(h, in->tokens, p->embedding, B, L, cfg->vocab_size, D);
    } else {
        memcpy(h, in->x, BLD * sizeof(double));
    }
    int64_t *ids = calloc(BL, sizeof(int64_t)); /* token types 0, or RoBERTa's positions */
    if (cfg->type_vocab_size > 0) {
        refenc_embedding_add(h, h, in->token_types ? in->token_types : ids, p->token_type_embedding,
                             B, L, cfg->type_vocab_size, D);
        for (size_t i = 0; i < BLD; i++)
            Eh[i] += U * fabs(h[i]);
    }
    if (cfg->positional == REFENC_POS_SINUSOIDAL) {
        refenc_sinusoidal_forward(h, h, pos, B, L, D);
        bnd_sinusoidal_table(Epe, pos, L, D);
        for (size_t bl = 0; bl < BL; bl++)
            for (size_t d = 0; d < D; d++)
                Eh[bl * D + d] += Epe[(bl % L) * D + d] + U * fabs(h[bl * D + d]);
    } else if (cfg->positional == REFENC_POS_LEARNED) {
        if (cfg->position_ids == REFENC_POSIDS_ROBERTA) {
            refenc_position_ids_roberta(ids, in->tokens, B, L, cfg->padding_idx);
            refenc_embedding_add(h, h, ids, p->pos_embedding, B, L, cfg->max_len, D);
        } else {
            refenc_learned_pe_forward(h, h, pos, p->pos_embedding, B, L, cfg->max_len, D);
        }
        for (size_t i = 0; i < BLD; i++)
            Eh[i] += U * fabs(h[i]);
    }
    free(ids);
    if (cfg->embedding_norm) {
        refenc_norm_forward(ln, h, p->embedding_norm_weight, p->embedding_norm_bias, BL, D,
                            cfg->embedding_norm_eps, cfg);
        st->applicable &= bnd_norm(Eln, h, Eh, p->embedding_norm_weight, p->embedding_norm_bias,
                                   ln, BL, D, cfg->embedding_norm_eps, cfg);
        memcpy(h, ln, BLD * sizeof(double));
        memcpy(Eh, Eln, BLD * sizeof(double));
    }
    record(st, "embed", h, Eh, BLD);

    /* the reference's slopes: exp2 of an exact argument, 1 ulp */
    refenc_alibi_slopes(slopes, H);
    for (size_t i = 0; i < H; i++)
        slope_err[i] = LIBM_ULP_EXP2 * bnd_ulp(slopes[i]);
    const refenc_attn_options opt = refenc_attn_options_of(cfg, in->key_padding_mask, in->attn_mask, pos, slopes);
    const refenc_rope_options rope = {cfg->rope_layout, cfg->rope_base, pos, NULL}; /* bounds for unscaled RoPE */
    const refenc_rope_options *rope_p = cfg->positional == REFENC_POS_ROPE ? &rope : NULL;
    bnd_mha_run run; /* grouped-query and head_dim as refenc_encoder_forward */
    bnd_gqa_run_alloc(&run, B, L, D, H, refenc_config_kv_heads(cfg), refenc_config_head_dim(cfg));

#define REC(step, data, E, n)                                  \
    do {                                                       \
        snprintf(name, sizeof name, "layers.%zu.%s", i, step); \
        record(st, name, data, E, n);                          \
    } while (0)

    for (size_t i = 0; i < cfg->n_layers; i++) {
        const refenc_layer_params *lp = &p->layers[i];
        /* layer i's window, RoPE base and scaling, as refenc_encoder_forward's */
        refenc_attn_options opt_i = opt;
        refenc_rope_options rope_i = rope;
        refenc_layer_options(cfg, i, &opt_i, &rope_i);
        const refenc_rope_options *rope_ip = rope_p != NULL ? &rope_i : NULL;
        refenc_qk_norm qk;
        run.qkn = refenc_qk_norm_of(&qk, cfg, lp); /* Qwen3's q_norm, k_norm: NULL without */
        if (cfg->norm == REFENC_NORM_PRE) {
            if (lp->norm1_weight == NULL) { /* skip_first_prenorm's layer 0: LN1 the identity */
                memcpy(ln, h, BLD * sizeof(double));
                memcpy(Eln, Eh, BLD * sizeof(double));
            } else {
                refenc_norm_forward(ln, h, lp->norm1_weight, lp->norm1_bias, BL, D, eps, cfg);
                st->applicable &= bnd_norm(Eln, h, Eh, lp->norm1_weight, lp->norm1_bias, ln, BL, D, eps, cfg);
            }
            REC("norm1", ln, Eln, BLD);
            bnd_mha(Eattn, Ew, &run, ln, Eln, lp->in_proj_weight, lp->in_proj_bias,
                    lp->out_proj_weight, lp->out_proj_bias, &opt_i, rope_ip, slope_err);
            memcpy(attn, run.y, BLD * sizeof(double));
            st->applicable &= post_norm_bounded(attn, Eattn, out, Eout, lp->post_attn_norm_weight,
                                                lp->post_attn_norm_bias, BL, cfg);
            REC("self_attn.weights", run.w.weights, Ew, BHLL);
            REC("self_attn", attn, Eattn, BLD);
            add_bounded(resid, Eres, h, Eh, attn, Eattn, BLD);
            refenc_norm_forward(ln, resid, lp->norm2_weight, lp->norm2_bias, BL, D, eps, cfg);
            st->applicable &= bnd_norm(Eln, resid, Eres, lp->norm2_weight, lp->norm2_bias, ln, BL, D, eps, cfg);
            REC("norm2", ln, Eln, BLD);
            bnd_ffn_block(Effn, Ehid, ffn, hid, ln, Eln, lp, BL, cfg);
            st->applicable &= post_norm_bounded(ffn, Effn, out, Eout, lp->post_ffn_norm_weight,
                                                lp->post_ffn_norm_bias, BL, cfg);
            REC("ffn", ffn, Effn, BLD);
            add_bounded(out, Eout, resid, Eres, ffn, Effn, BLD);
        } else {
            bnd_mha(Eattn, Ew, &run, h, Eh, lp->in_proj_weight, lp->in_proj_bias,
                    lp->out_proj_weight, lp->out_proj_bias, &opt_i, rope_ip, slope_err);
            memcpy(attn, run.y, BLD * sizeof(double));
            REC("self_attn.weights", run.w.weights, Ew, BHLL);
            REC("self_attn", attn, Eattn, BLD);
            add_bounded(resid, Eres, h, Eh, attn, Eattn, BLD);
            refenc_norm_forward(ln, resid, lp->norm1_weight, lp->norm1_bias, BL, D, eps, cfg);
            st->applicable &= bnd_norm(Eln, resid, Eres, lp->norm1_weight, lp->norm1_bias, ln, BL, D, eps, cfg);
            REC("norm1", ln, Eln, BLD);
            bnd_ffn_block(Effn, Ehid, ffn, hid, ln, Eln, lp, BL, cfg);
            REC("ffn", ffn, Effn, BLD);
            add_bounded(resid, Eres, ln, Eln, ffn, Effn, BLD);
            refenc_norm_forward(out, resid, lp->norm2_weight, lp->norm2_bias, BL, D, eps, cfg);
            st->applicable &= bnd_norm(Eout, resid, Eres, lp->norm2_weight, lp->norm2_bias, out, BL, D, eps, cfg);
            REC("norm2", out, Eout, BLD);
        }
        REC("output", out, Eout, BLD);
        memcpy(h, out, BLD * sizeof(double));
        memcpy(Eh, Eout, BLD * sizeof(double));
    }
#undef REC
    if (cfg->final_norm) {
        refenc_norm_forward(out, h, p->norm_weight, p->norm_bias, BL, D, eps, cfg);
        st->applicable &= bnd_norm(Eout, h, Eh, p->norm_weight, p->norm_bias, out, BL, D, eps, cfg);
        record(st, "norm", out, Eout, BLD);
    } else {
        memcpy(out, h, BLD * sizeof(double));
        memcpy(Eout, Eh, BLD * sizeof(double));
    }
    record(st, "output", out, Eout, BLD);
    memcpy(y, out, BLD * sizeof(double));

    st->applicable &= run.applicable;
    bnd_mha_run_free(&run);
    double *bufs[] = {h, Eh, ln, Eln, attn, Eattn, resid, Eres, ffn, Effn, hid, Ehid,
                      out, Eout, Ew, pe, Epe, slopes, slope_err};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(pos_default);
    return st->applicable;
}

/* ---- checking -------------------------------------------------------------- */
void acc_init(acc_stats *a)
{
    memset(a, 0, sizeof *a);
}

void acc_check(acc_stats *a, const char *what, const double *got, const double *want,
               const double *E, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const double err = fabs(got[i] - want[i]);
        const double tol = BOUND_SAFETY * (E != NULL ? E[i] : 0) + bnd_ulp(want[i]) / 2;
        double ratio;
        if (memcmp(&got[i], &want[i], sizeof(double)) == 0 || err == 0)
            ratio = 0; /* +0 and -0 are the same value */
        else if (!(err == err) || isinf(err))
            ratio = INFINITY; /* NaN, or an infinity where the oracle differs */
        else
            ratio = tol > 0 ? err / tol : INFINITY;
        const double ulps = test_ulp_distance(got[i], want[i]);
        if (ulps > a->max_ulps)
            a->max_ulps = ulps;
        if (ratio > a->max_ratio || a->worst_what[0] == '\0') {
            a->max_ratio = ratio;
            a->worst_got = got[i];
            a->worst_want = want[i];
            a->worst_tol = tol;
            a->worst_index = i;
            snprintf(a->worst_what, sizeof a->worst_what, "%s", what);
        }
        a->checked++;
    }
}

void acc_finish(const acc_stats *a, const char *name)
{
    char line[512];
    snprintf(line, sizeof line,
             "accuracy %-34s max %9.4g ulps, %8.3g of bound (%zu values; worst %s[%zu])", name,
             a->max_ulps, a->max_ratio, a->checked, a->worst_what, a->worst_index);
    cr_log_info("%s", line);
    const char *path = getenv("REFENC_ACCURACY_REPORT");
    if (path != NULL && *path != '\0') {
        FILE *f = fopen(path, "a");
        if (f != NULL) {
            fprintf(f, "%s\n", line);
            fclose(f);
        }
    }
    cr_assert(a->checked > 0, "%s: nothing was checked", name);
    cr_assert(a->max_ratio <= 1.0,
              "%s: the reference exceeds its derived error bound: at %s[%zu] got %a (%.17g), "
              "oracle %a (%.17g), |diff| %.3g > bound %.3g (%.3g of it); seed %lu "
              "(replay: REFENC_SEED=%lu)",
              name, a->worst_what, a->worst_index, a->worst_got, a->worst_got, a->worst_want,
              a->worst_want, fabs(a->worst_got - a->worst_want), a->worst_tol, a->max_ratio,
              test_seed(), test_seed());
}
