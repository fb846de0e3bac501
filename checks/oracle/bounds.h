/* Forward error bounds of the reference, as derived in docs/error-bounds.md.
 *
 * Every function fills E (absolute error bounds, elementwise) for one
 * operation of the reference: the bound on |computed - exact| where
 * "computed" is what the reference returns from its inputs and "exact" is
 * the operation's true value on the true inputs.  Inputs may carry an error
 * of their own (E_x, NULL: exact): the bound is then the operation's
 * rounding error at the computed inputs plus the propagated input error
 * (a Lipschitz or bilinear bound), i.e. the a posteriori running bound used
 * for layers and stacks.  Magnitudes are those of the reference's own
 * intermediates, recomputed here with the reference's kernels.
 *
 * Bounds are first order in u = 2^-53; the neglected terms are at most
 * (n + 10) u times the bound for the sizes used here, covered by
 * BOUND_SAFETY when the bound is checked.  libm accuracies are glibc's
 * documented maxima for x86_64 (libm-test-ulps): exp, exp2, pow, sin, cos
 * 1 ulp, erfc 5 ulps. */
#ifndef REFENC_CHECKS_BOUNDS_H
#define REFENC_CHECKS_BOUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "../../ref/refenc.h"

#define BOUND_U 0x1p-53
#define BOUND_SAFETY (1.0 + 0x1p-20)
#define LIBM_ULP_EXP 1.0
#define LIBM_ULP_POW 1.0
#define LIBM_ULP_SINCOS 1.0
#define LIBM_ULP_EXP2 1.0
#define LIBM_ULP_ERFC 5.0
/* Lipschitz constants of the activations over R (docs/error-bounds.md):
 * GELU' = Phi + x phi peaks at x = sqrt 2: 1.12886; GELU-tanh' <= 1 + 0.39;
 * quick GELU (x sigma(1.702 x))' = s + u s (1 - s), s = sigma(u), u = 1.702 x,
 * whatever the factor the SiLU's derivative, which peaks at 1.099839 and
 * bottoms at -0.099839 (u = +-2.3994); SiLU (x sigma(x)) is that function of
 * u = x, so LIP_QUICK_GELU bounds it too. */
#define LIP_RELU 1.0
#define LIP_GELU 1.1289
#define LIP_GELU_TANH 1.4
#define LIP_QUICK_GELU 1.0999

/* gamma_n = n u / (1 - n u) */
double bnd_gamma(double n);
/* The spacing of doubles just above |y| (ulp(0) = 2^-1074). */
double bnd_ulp(double y);

void bnd_linear(double *E_y, const double *x, const double *E_x, const double *W,
                const double *b, const double *y, size_t N, size_t in, size_t out);

/* Returns 0 if the bound does not apply (input error comparable to the
 * row's spread); every row must then be checked by other means. */
int bnd_layernorm(double *E_y, const double *x, const double *E_x, const double *gamma,
                  const double *beta, const double *y, size_t N, size_t D, double eps);

/* RMSNorm (rmsnorm.h), scale w or fl(1 + w) (offset); the same conditions
 * as bnd_layernorm (input error comparable to the row's RMS: 0). */
int bnd_rmsnorm(double *E_y, const double *x, const double *E_x, const double *w, int offset,
                const double *y, size_t N, size_t D, double eps);

/* The configured norm's bound (norm_type): bnd_layernorm or bnd_rmsnorm. */
int bnd_norm(double *E_y, const double *x, const double *E_x, const double *weight,
             const double *bias, const double *y, size_t N, size_t D, double eps,
             const refenc_config *cfg);

/* z: the scaled logits as computed (s/tau), E_z their error; y: the weights. */
void bnd_softmax_scaled(double *E_y, const double *z, const double *E_z, const double *y,
                        size_t R, size_t n);
/* refenc_softmax_forward on exact logits s. */
void bnd_softmax(double *E_y, const double *s, const double *y, size_t R, size_t n, double tau);

void bnd_activation(double *E_y, const double *x, const double *E_x, const double *y, size_t n,
                    refenc_activation act);

/* The reference's angle pos * w_i and its bound (sinusoidal.h). */
void bnd_sinusoidal_angles(double *angle, double *E, const int64_t *pos, size_t L, size_t D);
void bnd_sinusoidal_table(double *E, const int64_t *pos, size_t L, size_t D);
void bnd_rope_angles(double *angle, double *E, const int64_t *pos, size_t L, size_t Dh,
                     double base);
void bnd_rope(double *E_y, const double *x, const double *E_x, const int64_t *pos, size_t N,
              size_t L, size_t Dh, double base, refenc_rope_layout layout, const double *y);

/* slope_err: (H) bound on |slope given - true slope|, NULL: the given slopes
 * are the exact ones.  q, k, v: what the attention saw, with errors E_*. */
void bnd_attention(double *E_out, double *E_w, const double *q, const double *E_q,
                   const double *k, const double *E_k, const double *v, const double *E_v,
                   const refenc_attn_options *opt, const double *slope_err, const double *w,
                   size_t B, size_t H, size_t L, size_t Dh);

/* The reference's intermediates of one MHA call, recomputed. */
typedef struct {
    size_t B, L, D, H;
    size_t Hkv, Dh;            /* grouped-query attention: key/value heads, head width */
    refenc_mha_work w;
    double *block;
    double *qh_pre, *kh_pre;   /* heads before RoPE */
    double *y;
    const refenc_qk_norm *qkn; /* Qwen3's q/k norm of the layer (qk_norm.h), or NULL */
    int applicable;            /* 0 once a q/k RMSNorm bound did not apply */
} bnd_mha_run;
int bnd_mha_run_alloc(bnd_mha_run *r, size_t B, size_t L, size_t D, size_t H);
/* The same for refenc_gqa_forward (mha.h): Hkv key/value heads of width Dh;
 * bnd_mha then runs and bounds refenc_gqa_forward. */
int bnd_gqa_run_alloc(bnd_mha_run *r, size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh);
void bnd_mha_run_free(bnd_mha_run *r);
/* Runs refenc_mha_forward on x and bounds its output and weights. */
void bnd_mha(double *E_y, double *E_w, bnd_mha_run *r, const double *x, const double *E_x,
             const double *ipw, const double *ipb, const double *opw, const double *opb,
             const refenc_attn_options *opt, const refenc_rope_options *rope,
             const double *slope_err);

/* Runs the FFN pieces on x; fills hidden, y and their bounds. */
void bnd_ffn(double *E_y, double *E_hidden, double *y, double *hidden, const double *x,
             const double *E_x, const double *W1, const double *b1, const double *W2,
             const double *b2, size_t N, size_t D, size_t F, refenc_activation act);

/* The gated FFN (glu.h): y and hidden (h = act(a) * b, N x F) recomputed, E_y
 * its bound (bounds.c). */
void bnd_glu(double *E_y, double *y, double *hidden, const double *x, const double *E_x,
             const double *Wg, const double *bg, const double *Wu, const double *bu,
             const double *W2, const double *b2, size_t N, size_t D, size_t F,
             refenc_activation act);

/* One traced step of a layer or stack: the reference's values and bounds. */
typedef struct {
    char name[64];
    size_t n;
    double *ref, *E;
} bnd_step;

typedef struct {
    bnd_step s[64];
    size_t n;
    int applicable;  /* 0 if some LayerNorm bound did not apply */
} bnd_steps;

void bnd_steps_free(bnd_steps *st);
const bnd_step *bnd_steps_find(const bnd_steps *st, const char *name);

/* Recomputes refenc_encoder_forward step by step with the reference's own
 * kernels, recording every trace step and its running bound.  y receives
 * the output (the caller checks it equals refenc_encoder_forward's). */
int bnd_encoder(bnd_steps *st, double *y, const refenc_params *p, const refenc_config *cfg,
                const refenc_input *in);

/* ---- checking ---- */

typedef struct {
    double max_ulps, max_ratio;  /* largest |got - want| in ULPs; largest err / tol */
    double worst_got, worst_want, worst_tol;
    size_t worst_index, checked;
    char worst_what[96];
} acc_stats;

void acc_init(acc_stats *a);
/* Checks |got - want| <= BOUND_SAFETY E + ulp(want)/2 (the oracle's own
 * rounding), elementwise; E NULL: 0 (the reference must equal the oracle). */
void acc_check(acc_stats *a, const char *what, const double *got, const double *want,
               const double *E, size_t n);
/* Asserts (Criterion) that every value was within its bound, logs one line
 * "accuracy NAME: max N ulps, F of bound" and appends it to the file named by
 * REFENC_ACCURACY_REPORT if set. */
void acc_finish(const acc_stats *a, const char *name);

#endif
