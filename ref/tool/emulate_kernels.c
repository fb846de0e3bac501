/* The emulation's kernels (emulate_kernels.h).  Each follows its reference
 * twin (ref/<name>.c) operation for operation; the comments say only where a
 * rounding goes and why. */
#include "emulate_kernels.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "../alibi.h"
#include "../relative_bias.h"
#include "../attention.h"
#include "../pooling.h"
#include "../rope.h"
#include "../rope_scaling.h"
#include "../rows.h"
#include "../window.h"
#include "linear_blocked.h"

/* ---- building blocks ---------------------------------------------------------- */

/* The k-th index of an accumulation over n terms, in the emulation's order. */
static size_t at(const refenc_emulation *e, size_t k, size_t n)
{
    return e->reverse_sums ? n - 1 - k : k;
}

/* Elementary functions: double libm, or the float versions of another
 * implementation (then rounded like any op by the caller). */
static double f_exp(const refenc_emulation *e, double x)
{
    return e->float_functions ? (double)expf((float)x) : exp(x);
}

static double f_erfc(const refenc_emulation *e, double x)
{
    return e->float_functions ? (double)erfcf((float)x) : erfc(x);
}

static double f_sqrt(const refenc_emulation *e, double x)
{
    return e->float_functions ? (double)sqrtf((float)x) : sqrt(x);
}

static double f_pow(const refenc_emulation *e, double x, double y)
{
    return e->float_functions ? (double)powf((float)x, (float)y) : pow(x, y);
}

static double f_tanh(const refenc_emulation *e, double x)
{
    return e->float_functions ? (double)tanhf((float)x) : tanh(x);
}

static double f_sin(const refenc_emulation *e, double x)
{
    return e->float_functions ? (double)sinf((float)x) : sin(x);
}

static double f_cos(const refenc_emulation *e, double x)
{
    return e->float_functions ? (double)cosf((float)x) : cos(x);
}

/* sum_k a[k] b[k*stride] in the acc format: every product and every partial
 * sum rounded (the products of two float16 or bfloat16 values are exact in
 * float32, so in the float32-accumulation model only the sums round). */
static double dot(const refenc_emulation *e, const double *a, const double *b, size_t stride, size_t n)
{
    double acc = 0.0;
    if (e->acc == REFENC_FMT_F64 && !e->reverse_sums) { /* every rounding the identity: the */
        for (size_t i = 0; i < n; i++)                  /* same sum, without a call per term */
            acc += a[i] * b[i * stride];                /* (the golden's bug variants, alt.c) */
        return acc;
    }
    for (size_t k = 0; k < n; k++) {
        const size_t i = at(e, k, n);
        acc = emu_a(e, acc + emu_a(e, a[i] * b[i * stride]));
    }
    return acc;
}

/* The angle pos * base^(-two_i / width) of a PE or RoPE pair.  Positions are
 * index arithmetic: implementations form the frequency table and the angle
 * in float32 (or wider) and round only the sin and cos, so the angle is in
 * the acc format. */
static double angle(const refenc_emulation *e, int64_t pos, size_t two_i, size_t width, double base)
{
    const double ex = emu_a(e, (double)two_i / (double)width);
    const double freq = emu_a(e, f_pow(e, base, -ex));
    return emu_a(e, (double)pos * freq);
}

/* ---- kernels ---------------------------------------------------------------------- */

void emu_linear(const refenc_emulation *e, double *y, const double *x, const double *W, const double *b,
                size_t N, size_t in, size_t out)
{
    if (e->value == REFENC_FMT_F64 && e->acc == REFENC_FMT_F64 && !e->reverse_sums) {
        /* every rounding the identity: the reference's map itself, in its
         * faster schedule (the golden's bug variants, alt.c) */
        refenc_linear_blocked_forward(y, x, W, b, N, in, out);
        return;
    }
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < out; o++) {
            const double acc = dot(e, x + n * in, W + o * in, 1, in);
            /* the matmul's output, then the bias add (fused: one rounding) */
            y[n * out + o] = b != NULL ? emu_v(e, emu_m(e, acc) + b[o]) : emu_v(e, acc);
        }
}

void emu_add(const refenc_emulation *e, double *y, const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = emu_v(e, a[i] + b[i]);
}

void emu_layernorm(const refenc_emulation *e, double *y, const double *x, const double *gamma,
                   const double *beta, size_t N, size_t D, double eps)
{
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D;
        double *y_n = y + n * D;
        /* the statistics: acc format */
        double sum = 0.0;
        for (size_t k = 0; k < D; k++)
            sum = emu_a(e, sum + x_n[at(e, k, D)]);
        const double mu = emu_a(e, sum / (double)D);
        double ss = 0.0;
        for (size_t k = 0; k < D; k++) {
            const double dev = emu_a(e, x_n[at(e, k, D)] - mu);
            ss = emu_a(e, ss + emu_a(e, dev * dev));
        }
        const double var = emu_a(e, ss / (double)D);
        const double sd = emu_a(e, f_sqrt(e, emu_a(e, var + eps)));
        /* the normalisation: elementwise steps, then the output */
        for (size_t d = 0; d < D; d++) {
            const double z = emu_m(e, emu_m(e, x_n[d] - mu) / sd);
            const double t = emu_m(e, z * gamma[d]);
            y_n[d] = emu_v(e, beta != NULL ? t + beta[d] : t); /* beta NULL: bias-free */
        }
    }
}

void emu_rmsnorm_rows(const refenc_emulation *e, double *y, const double *x, const double *w, size_t N,
                      size_t D, size_t Dw, double eps, int offset, int cast_first)
{
    for (size_t n = 0; n < N; n++) {
        const double *x_n = x + n * D;
        double *y_n = y + n * D;
        double ss = 0.0; /* the statistic: acc format */
        for (size_t k = 0; k < D; k++) {
            const double xk = x_n[at(e, k, D)];
            ss = emu_a(e, ss + emu_a(e, xk * xk));
        }
        const double r = emu_a(e, f_sqrt(e, emu_a(e, emu_a(e, ss / (double)D) + eps)));
        for (size_t d = 0; d < D; d++) {
            const double wd = w[d % Dw];
            const double z = emu_m(e, x_n[d] / r);
            if (cast_first) { /* Llama, Qwen: z cast to the model's format, then z w in it */
                y_n[d] = emu_v(e, emu_v(e, z) * wd);
                continue;
            }
            if (offset) { /* Gemma: x / rms and (1 + w) in float32, the product cast once */
                y_n[d] = emu_v(e, emu_a(e, emu_a(e, x_n[d] / r) * emu_a(e, 1.0 + wd)));
                continue;
            }
            y_n[d] = emu_v(e, emu_m(e, z * wd));
        }
    }
}

void emu_rmsnorm(const refenc_emulation *e, double *y, const double *x, const double *w, size_t N,
                 size_t D, double eps, int offset)
{
    emu_rmsnorm_rows(e, y, x, w, N, D, D, eps, offset, 0);
}

void emu_norm(const refenc_emulation *e, double *y, const double *x, const double *weight,
              const double *bias, size_t N, size_t D, double eps, const refenc_config *cfg)
{
    if (cfg->norm_type == REFENC_NORMTYPE_RMSNORM)
        emu_rmsnorm(e, y, x, weight, N, D, eps, cfg->rmsnorm_offset);
    else
        emu_layernorm(e, y, x, weight, bias, N, D, eps);
}

void emu_softmax(const refenc_emulation *e, double *y, const double *s, size_t R, size_t n, double tau,
                 int inner)
{
    for (size_t r = 0; r < R; r++) {
        const double *s_r = s + r * n;
        double *y_r = y + r * n;
        double m = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            const double z = emu_m(e, s_r[i] / tau);
            if (z > m || isnan(z))
                m = z;
        }
        if (m == -INFINITY) {
            for (size_t i = 0; i < n; i++)
                y_r[i] = 0.0;
            continue;
        }
        for (size_t i = 0; i < n; i++) /* y_r may alias s_r: each entry read before written */
            y_r[i] = emu_m(e, f_exp(e, emu_m(e, emu_m(e, s_r[i] / tau) - m)));
        double sum = 0.0; /* the denominator: acc format */
        for (size_t k = 0; k < n; k++)
            sum = emu_a(e, sum + y_r[at(e, k, n)]);
        for (size_t i = 0; i < n; i++)
            y_r[i] = inner ? emu_m(e, y_r[i] / sum) : emu_v(e, y_r[i] / sum);
    }
}

/* cap tanh(s / cap): divide, tanh, multiply, each rounded (ref/softcap.c);
 * s = -inf gives -cap */
static double emu_softcap(const refenc_emulation *e, double s, double cap)
{
    return emu_m(e, cap * emu_m(e, f_tanh(e, emu_m(e, s / cap))));
}

/* The scores of one (b, h) into w (L, L): q.k / divisor, capped (Gemma 2,
 * before the biases and masks), + ALiBi + T5's bias + mask.  cap_after_mask (the bug
 * variant softcap_after_mask) caps after them instead: a masked -inf or
 * -DBL_MAX becomes -cap. */
static void scores(const refenc_emulation *e, double *w, const double *q, const double *k,
                   const int64_t *rows, const refenc_attn_options *opt, const uint8_t *pad, size_t h,
                   size_t H, size_t R, size_t L, size_t Dh, double divisor, int cap_after_mask)
{
    const int cap = opt->softcap > 0;
    for (size_t r = 0; r < R; r++) {
        const size_t i = refenc_rows_index(rows, r); /* query row r's position index */
        for (size_t j = 0; j < L; j++) {
            double s = emu_m(e, emu_m(e, dot(e, q + r * Dh, k + j * Dh, 1, Dh)) / divisor);
            if (cap && !cap_after_mask)
                s = emu_softcap(e, s, opt->softcap);
            if (opt->alibi_slopes != NULL)
                s = emu_m(e, s + emu_m(e, refenc_alibi_bias(opt->alibi_slopes[h], opt->positions[i],
                                                             opt->positions[j])));
            if (opt->relative_bias != NULL) /* T5: a table entry in the model's dtype */
                s = emu_m(e, s + emu_m(e, refenc_relative_bias(opt->relative_bias, H, h,
                                                                opt->positions[i], opt->positions[j],
                                                                opt->relative_num_buckets,
                                                                opt->relative_max_distance,
                                                                opt->relative_unclamped)));
            if (opt->attn_mask != NULL)
                s = emu_m(e, s + opt->attn_mask[i * L + j]);
            if ((pad != NULL && pad[j]) || (opt->causal && j > i) || /* the model's mask value */
                refenc_window_excludes(opt->sliding_window, opt->local_attention, i, j))
                s = opt->mask_value == REFENC_MASK_FINFO_MIN ? -DBL_MAX : -INFINITY;
            if (cap && cap_after_mask)
                s = emu_softcap(e, s, opt->softcap);
            w[r * L + j] = s;
        }
    }
}

void emu_attention(const refenc_emulation *e, double *out, double *weights, const double *q,
                   const double *k, const double *v, const refenc_attn_options *opt, size_t B, size_t H,
                   size_t L, size_t Dh, int cap_after_mask)
{
    emu_attention_rows(e, out, weights, q, k, v, NULL, opt, B, H, L, L, Dh, cap_after_mask);
}

void emu_attention_rows(const refenc_emulation *e, double *out, double *weights, const double *q,
                        const double *k, const double *v, const int64_t *rows, const refenc_attn_options *opt,
                        size_t B, size_t H, size_t R, size_t L, size_t Dh, int cap_after_mask)
{
    /* a scalar, formed in double: sqrt(S) tau, S = query_pre_attn_scalar or Dh */
    const double divisor = refenc_attention_divisor(opt, Dh);
    for (size_t b = 0; b < B; b++) {
        const uint8_t *pad_b = opt->key_padding_mask ? opt->key_padding_mask + b * L : NULL;
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h;
            double *w_bh = weights + bh * R * L;
            const double *v_bh = v + bh * L * Dh;
            scores(e, w_bh, q + bh * R * Dh, k + bh * L * Dh, rows, opt, pad_b, h, H, R, L, Dh, divisor,
                   cap_after_mask);
            emu_softmax(e, w_bh, w_bh, R, L, 1.0, 1);
            for (size_t r = 0; r < R; r++)
                for (size_t d = 0; d < Dh; d++)
                    out[(bh * R + r) * Dh + d] = emu_v(e, dot(e, w_bh + r * L, v_bh + d, Dh, L));
            for (size_t i = 0; i < R * L; i++) /* the stored weights: the value format */
                w_bh[i] = emu_v(e, w_bh[i]);
        }
    }
}

/* GELU exact, x Phi(x) = x (0.5 erfc(-x / sqrt 2)), and tanh, x / (1 + exp(-2z)):
 * ref/activation.c's operations, each step rounded. */
static double gelu(const refenc_emulation *e, double x)
{
    const double phi = emu_m(e, 0.5 * emu_m(e, f_erfc(e, emu_m(e, -x * M_SQRT1_2))));
    return emu_v(e, x * phi);
}

static double gelu_tanh(const refenc_emulation *e, double x)
{
    static const double SQRT_2_OVER_PI = 0.7978845608028654; /* as ref/activation.c */
    const double x3 = emu_m(e, emu_m(e, x * x) * x);
    const double z = emu_m(e, SQRT_2_OVER_PI * emu_m(e, x + emu_m(e, 0.044715 * x3)));
    return emu_v(e, x / emu_m(e, 1.0 + emu_m(e, f_exp(e, emu_m(e, -2.0 * z)))));
}

/* Quick GELU, x sigma(1.702 x) = x / (1 + exp(-1.702 x)): ref/activation.c's
 * operations, each step rounded. */
static double quick_gelu(const refenc_emulation *e, double x)
{
    const double t = emu_m(e, 1.702 * x);
    return emu_v(e, x / emu_m(e, 1.0 + emu_m(e, f_exp(e, -t))));
}

/* SiLU, x / (1 + exp(-x)): ref/activation.c's operations, each step rounded. */
static double silu(const refenc_emulation *e, double x)
{
    return emu_v(e, x / emu_m(e, 1.0 + emu_m(e, f_exp(e, -x))));
}

void emu_activation(const refenc_emulation *e, double *y, const double *x, size_t n, refenc_activation act)
{
    for (size_t i = 0; i < n; i++) {
        switch (act) {
        case REFENC_ACT_RELU: y[i] = x[i] > 0.0 || isnan(x[i]) ? x[i] : 0.0; break; /* exact */
        case REFENC_ACT_GELU: y[i] = gelu(e, x[i]); break;
        case REFENC_ACT_GELU_TANH: y[i] = gelu_tanh(e, x[i]); break;
        case REFENC_ACT_QUICK_GELU: y[i] = quick_gelu(e, x[i]); break;
        case REFENC_ACT_SILU: y[i] = silu(e, x[i]); break;
        }
    }
}

/* The angle pos theta_j with a RoPE scaling, formed as Hugging Face forms its
 * table in float32: theta = 1 / base'^(2j/R) (base' = dynamic's grown base,
 * else base; the exponent, the power and the reciprocal each rounded to the
 * acc format), multiplied by the type's factor theta_scaled / theta (an exact
 * ratio, taken in double) and rounded once, then pos theta.  In an acc format
 * of double (no rounding) it is the reference's angle, bit for bit. */
static double scaled_angle(const refenc_emulation *e, int64_t pos, size_t j, size_t R, double base,
                           const refenc_rope_scaling *sc, int64_t S)
{
    if (sc == NULL || sc->type == REFENC_ROPE_SCALING_NONE)
        return angle(e, pos, 2 * j, R, base);
    const double scaled = refenc_rope_scaled_frequency(j, R, base, sc, S);
    if (e->acc == REFENC_FMT_F64)
        return (double)pos * scaled;
    const double b = refenc_rope_scaled_base(base, R, sc, S);
    const double ex = emu_a(e, (double)(2 * j) / (double)R);
    const double theta = emu_a(e, 1.0 / emu_a(e, f_pow(e, b, ex)));
    const double mult = scaled / refenc_rope_frequency(j, R, b);
    return emu_a(e, (double)pos * emu_a(e, theta * mult));
}

/* y = x rotated at the positions of rows (NULL: rows 0 .. Lr - 1), the
 * sines by sign (-1: the backward's rotation by -theta).  With a scaling sc
 * (NULL: none): the scaled angle above, and cos and sin are multiplied by
 * the attention factor in the acc format before they are stored (HF: (cos *
 * attention_scaling).to(dtype)).  Coordinates from the rotary dim R on pass
 * through. */
static void rope_rows_signed(const refenc_emulation *e, double *y, const double *x, const int64_t *pos,
                             const int64_t *rows, size_t N, size_t Lr, size_t L, size_t Dh, double base,
                             refenc_rope_layout layout, const refenc_rope_scaling *sc, double sign)
{
    const size_t R = sc != NULL ? refenc_rope_scaling_rotary_dim(sc, Dh) : Dh, half = R / 2;
    const int64_t S = refenc_rope_seq_len(pos, L); /* over all L positions, as the full run */
    const double f = refenc_rope_attention_factor(sc);
    for (size_t n = 0; n < N; n++)
        for (size_t l = 0; l < Lr; l++) {
            const double *x_nl = x + (n * Lr + l) * Dh;
            double *y_nl = y + (n * Lr + l) * Dh;
            const int64_t p = pos[refenc_rows_index(rows, l)];
            for (size_t j = 0; j < half; j++) {
                const size_t ia = layout == REFENC_ROPE_HALF ? j : 2 * j;
                const size_t ib = layout == REFENC_ROPE_HALF ? j + half : 2 * j + 1;
                const double t = scaled_angle(e, p, j, R, base, sc, S);
                /* the cos and sin tables are stored in the value format */
                const double c0 = f_cos(e, t), s0 = f_sin(e, t);
                const double c = emu_m(e, f == 1.0 ? c0 : emu_a(e, c0 * f)),
                             s = sign * emu_m(e, f == 1.0 ? s0 : emu_a(e, s0 * f));
                const double a = x_nl[ia], b = x_nl[ib];
                y_nl[ia] = emu_v(e, emu_m(e, a * c) - emu_m(e, b * s));
                y_nl[ib] = emu_v(e, emu_m(e, b * c) + emu_m(e, a * s));
            }
            for (size_t d = R; d < Dh && y_nl != x_nl; d++)
                y_nl[d] = x_nl[d];
        }
}

void emu_rope_rows(const refenc_emulation *e, double *y, const double *x, const int64_t *pos,
                   const int64_t *rows, size_t N, size_t Lr, size_t L, size_t Dh, double base,
                   refenc_rope_layout layout, const refenc_rope_scaling *sc)
{
    rope_rows_signed(e, y, x, pos, rows, N, Lr, L, Dh, base, layout, sc, 1.0);
}

static void rope_rotate(const refenc_emulation *e, double *y, const double *x, const int64_t *pos, size_t N,
                        size_t L, size_t Dh, double base, refenc_rope_layout layout, const refenc_rope_scaling *sc,
                        double sign)
{
    rope_rows_signed(e, y, x, pos, NULL, N, L, L, Dh, base, layout, sc, sign);
}

void emu_rope(const refenc_emulation *e, double *y, const double *x, const int64_t *pos, size_t N, size_t L,
              size_t Dh, double base, refenc_rope_layout layout, const refenc_rope_scaling *sc)
{
    rope_rotate(e, y, x, pos, N, L, Dh, base, layout, sc, 1.0);
}

void emu_rope_backward(const refenc_emulation *e, double *dx, const double *dy, const int64_t *pos, size_t N,
                       size_t L, size_t Dh, double base, refenc_rope_layout layout, const refenc_rope_scaling *sc)
{
    rope_rotate(e, dx, dy, pos, N, L, Dh, base, layout, sc, -1.0);
}

void emu_sinusoidal_table(const refenc_emulation *e, double *pe, const int64_t *pos, size_t L, size_t D)
{
    for (size_t l = 0; l < L; l++)
        for (size_t i = 0; i < D / 2; i++) {
            const double t = angle(e, pos[l], 2 * i, D, 10000.0);
            pe[l * D + 2 * i] = emu_v(e, f_sin(e, t));
            pe[l * D + 2 * i + 1] = emu_v(e, f_cos(e, t));
        }
}

void emu_sinusoidal_forward(const refenc_emulation *e, double *y, const double *x, const int64_t *pos,
                            size_t B, size_t L, size_t D)
{
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++) {
            const double *x_bl = x + (b * L + l) * D;
            double *y_bl = y + (b * L + l) * D;
            for (size_t i = 0; i < D / 2; i++) {
                const double t = angle(e, pos[l], 2 * i, D, 10000.0);
                y_bl[2 * i] = emu_v(e, x_bl[2 * i] + emu_m(e, f_sin(e, t)));
                y_bl[2 * i + 1] = emu_v(e, x_bl[2 * i + 1] + emu_m(e, f_cos(e, t)));
            }
        }
}

void emu_embedding(const refenc_emulation *e, double *x, const int64_t *tokens, const double *table,
                   size_t B, size_t L, size_t D, double s)
{
    for (size_t bl = 0; bl < B * L; bl++)
        for (size_t d = 0; d < D; d++)
            x[bl * D + d] = emu_v(e, table[(size_t)tokens[bl] * D + d] * s);
}

void emu_embedding_lookup(const refenc_emulation *e, double *x, const int64_t *tokens, const double *table,
                          size_t B, size_t L, size_t D)
{
    for (size_t bl = 0; bl < B * L; bl++)
        for (size_t d = 0; d < D; d++)
            x[bl * D + d] = emu_v(e, table[(size_t)tokens[bl] * D + d]);
}

void emu_embedding_add(const refenc_emulation *e, double *y, const double *x, const int64_t *ids,
                       const double *table, size_t B, size_t L, size_t D)
{
    for (size_t bl = 0; bl < B * L; bl++)
        for (size_t d = 0; d < D; d++)
            y[bl * D + d] = emu_v(e, x[bl * D + d] + table[(size_t)ids[bl] * D + d]);
}

void emu_learned_pe(const refenc_emulation *e, double *y, const double *x, const int64_t *pos,
                    const double *table, size_t B, size_t L, size_t D)
{
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++)
            for (size_t d = 0; d < D; d++)
                y[(b * L + l) * D + d] = emu_v(e, x[(b * L + l) * D + d] + table[(size_t)pos[l] * D + d]);
}

void emu_alibi_slopes(const refenc_emulation *e, double *slopes, size_t H, int pow2)
{
    /* computed in double (as implementations do, in Python), stored in the value format */
    if (pow2)
        for (size_t h = 0; h < H; h++)
            slopes[h] = exp2(-8.0 * (double)(h + 1) / (double)H);
    else
        refenc_alibi_slopes(slopes, H);
    for (size_t h = 0; h < H; h++)
        slopes[h] = emu_v(e, slopes[h]);
}

/* e_b (D) = the mean of y_b's (L, D) unpadded rows: the sum in the acc
 * format (torch's reduction accumulates in float32), stored, then divided */
static void emu_mean_row(const refenc_emulation *e, double *e_b, const double *y_b, const uint8_t *m_b,
                         size_t L, size_t D)
{
    size_t n = 0;
    for (size_t l = 0; l < L; l++)
        n += m_b == NULL || !m_b[l];
    for (size_t d = 0; d < D; d++) {
        double acc = 0.0;
        for (size_t k = 0; k < L; k++) {
            const size_t l = at(e, k, L);
            if (m_b == NULL || !m_b[l])
                acc = emu_a(e, acc + y_b[l * D + d]);
        }
        e_b[d] = emu_v(e, emu_v(e, acc) / (double)n);
    }
}

void emu_pooling(const refenc_emulation *e, double *out, const double *y, const uint8_t *mask, size_t B,
                 size_t L, size_t D, refenc_pooling mode, int normalize)
{
    for (size_t b = 0; b < B; b++) {
        double *e_b = out + b * D;
        const double *y_b = y + b * L * D;
        const uint8_t *m_b = mask != NULL ? mask + b * L : NULL;
        if (mode == REFENC_POOL_MEAN)
            emu_mean_row(e, e_b, y_b, m_b, L, D);
        else /* a row copied: exact */
            memcpy(e_b, y_b + (mode == REFENC_POOL_CLS ? 0 : refenc_pooling_last_token(m_b, L)) * D,
                   D * sizeof *e_b);
        if (!normalize)
            continue;
        const double norm = emu_v(e, f_sqrt(e, dot(e, e_b, e_b, 1, D)));
        for (size_t d = 0; d < D; d++)
            e_b[d] = emu_v(e, e_b[d] / fmax(norm, REFENC_POOLING_NORM_EPS));
    }
}
