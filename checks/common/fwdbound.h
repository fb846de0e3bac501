/* Forward error bounds of the reference, computed from the data.
 *
 * Each fb_ function computes one stage's values with the reference's own
 * public function (so the values are the reference's, bit for bit) and, next
 * to them, a bound on |computed - exact|, where "exact" is the same stage in
 * exact real arithmetic on the exact inputs, given bounds on the inputs' own
 * errors.  They are running error bounds (Higham, Accuracy and Stability of
 * Numerical Algorithms, 2nd ed., 3.3): the standard model
 * fl(a op b) = (a op b)(1 + d), |d| <= u, applied to the operations in the
 * order each ref/ header documents, with the magnitudes taken from the data
 * (sum |x_k W_k|, |q_d k_d|, ...) rather than assumed.  docs/properties.md
 * derives each formula; the comments in fwdbound.c state them.
 *
 * Two shapes of bound:
 *  - componentwise (e[i] >= |error of element i|): single stages (LayerNorm,
 *    softmax, activation) and the attention weights;
 *  - per row, in the 2-norm (E[r] >= |error of row r|_2): the encoder chain.
 *    Propagating componentwise bounds through x W^T costs sum_k |W_ok| ~ sqrt(n)
 *    per linear map and gives useless bounds after two layers; row 2-norms go
 *    through a linear map with the factor |W|_2 (certified, fb_norm2_upper),
 *    through LayerNorm with max|gamma| / sqrt(var + eps), through attention
 *    by Cauchy-Schwarz.  An element's error is at most its row's 2-norm bound.
 *
 * "Exact" takes the parameters as given (doubles) and, for positions, the
 * frequencies and ALiBi slopes the reference computes
 * (refenc_rope_frequency, refenc_sinusoidal_frequency, refenc_alibi_slopes):
 * the identities the properties check hold for any value of those, so two
 * runs that share them are compared against one exact function.  Two runs
 * whose exact results are equal (or related by a permutation) differ by at
 * most E_1 + E_2: that is every tolerance of the encoder-level properties.
 *
 * libm accuracy: glibc documents (math/libm-test-ulps, x86_64) maximal errors
 * of 1 ulp for exp, sin, cos, pow, exp2 and 5 ulps for erfc in round-to-
 * nearest; 1 ulp of a normal result y is at most 2u|y|, and at most 2^-52 for
 * |y| <= 1.  A subnormal result adds an absolute error of ulps * 2^-1074. */
#ifndef REFENC_FWDBOUND_H
#define REFENC_FWDBOUND_H

#include <stddef.h>
#include <stdint.h>

#include "../../ref/refenc.h"
#include "propcase.h"
#include "testutil.h"

#define FB_ULPS_EXP 1.0
#define FB_ULPS_SINCOS 1.0
#define FB_ULPS_ERFC 5.0

/* Largest |d/dx act(x)|: GELU x Phi(x) has derivative Phi + x phi, extremal
 * where phi (2 - x^2) = 0: 1.12891 at x = sqrt 2.  The tanh approximation
 * peaks at 1.12899 (x = 1.4185, on a 1e-4 grid over [-10, 10], a central
 * difference with step 1e-6; outside, the derivative is within 1e-15 of 0 or
 * 1).  Quick GELU x sigma(a x) has derivative s + u s (1 - s), s = sigma(u),
 * u = a x: whatever a, the SiLU's derivative, which peaks at 1.0998393
 * (u = 2.39936, on a 1e-5 grid over [0, 5]; it tends to 1 beyond) and
 * bottoms at -0.0998393 (its mirror: the derivative minus 1/2 is odd in u),
 * so FB_LIP_GELU covers it.  ReLU: 1. */
#define FB_LIP_GELU 1.13

/* The bounds are evaluated in double: sums of non-negative terms, each with
 * relative error below gamma_{n+20}, and the factors 1/(1 - gamma_k) dropped
 * where they multiply a term already O(gamma_k): below 2^-30 relative for
 * every size here.  Every comparison multiplies its bound by FB_SLACK. */
#define FB_SLACK (1.0 + 0x1p-20)

/* A certified upper bound on the spectral norm |W|_2 of W (rows, cols),
 * row-major: with A = W W^T or W^T W (the smaller, n x n, symmetric),
 * |A|_2 <= |A^4|_F^(1/4) (= (sum lambda^8)^(1/8)), and every rounding in
 * forming A, A^2 and A^4 is bounded and added (docs/properties.md).
 * Overestimates |W|_2 by at most n^(1/16) plus O(n u). */
double fb_norm2_upper(const double *W, size_t rows, size_t cols);

/* Certified norms of every weight matrix of an encoder, computed once per
 * set of parameters. */
typedef struct {
    size_t N, H;
    double *qkv;    /* (N, 3, H): |W_q|, |W_k|, |W_v| restricted to head h's rows */
    double *o;      /* (N) |out_proj.weight|_2 */
    double *l1, *l2; /* (N) |linear1.weight|_2, |linear2.weight|_2 */
} fb_norms;

void fb_norms_compute(fb_norms *nm, const refenc_params *p, const refenc_config *cfg);
void fb_norms_free(fb_norms *nm);

/* Mean and biased variance of x (D) by the two-pass algorithm of
 * layernorm.h, with bounds |mu^ - mu| <= e_mu, |var^ - var| <= e_var for an
 * exact input (derivation at layernorm_row in fwdbound.c). */
void fb_moments(const double *x, size_t D, double *mu, double *e_mu, double *var, double *e_var);

/* LayerNorm over rows of x (N, D) (layernorm.h), componentwise bounds.
 * ex (may be NULL: exact input) is used through its row 2-norm. */
void fb_layernorm(double *y, double *ey, const double *x, const double *ex,
                  const double *gamma, const double *beta, size_t N, size_t D, double eps);

/* Rounding of one activation at an exact input x, y = act^(x). */
double fb_activation_rounding(refenc_activation act, double x, double y);

/* RoPE (rope.h) on (N, L, Dh), componentwise; ex may be NULL (exact input).
 * y may not alias x. */
void fb_rope(double *y, double *ey, const double *x, const double *ex, const int64_t *pos,
             size_t N, size_t L, size_t Dh, double base, refenc_rope_layout layout);

/* Softmax over rows of s (R, n) with temperature tau (softmax.h),
 * componentwise; es may be NULL (exact logits). */
void fb_softmax(double *y, double *ey, const double *s, const double *es, size_t R, size_t n,
                double tau);

/* Multi-head attention (mha.h), row bounds: x, Ex: (B, L, D) and (B L);
 * y, Ey likewise; w, ew: (B, H, L, L) weights, componentwise bounds.
 * nqkv: (3, H) head-block norms, no: |W_o|_2 (as in fb_norms, one layer). */
void fb_mha(double *y, double *Ey, double *w, double *ew, const double *x, const double *Ex,
            const double *in_w, const double *in_b, const double *out_w, const double *out_b,
            const refenc_attn_options *opt, const refenc_rope_options *rope,
            size_t B, size_t L, size_t D, size_t H, const double *nqkv, double no);

/* The same for an exact input x, but with the bounds derived from the
 * intermediates refenc_mha_forward leaves in its work buffers (projections,
 * rotated q and k, v, context) instead of a recomputation, and a RoPE bound
 * that holds whichever coordinates RoPE pairs: it does not presume the
 * layout, so it still bounds an attention whose q and k use different
 * layouts (docs/properties.md). */
void fb_mha_observed(double *y, double *Ey, double *w, double *ew, const double *x,
                     const double *in_w, const double *in_b, const double *out_w,
                     const double *out_b, const refenc_attn_options *opt,
                     const refenc_rope_options *rope, size_t B, size_t L, size_t D, size_t H,
                     const double *nqkv, double no);

/* The encoder (encoder.h), recomputed from its stages with bounds: an input
 * x, or tokens through the embedding path (the scale, token types, learned
 * positions by index or RoBERTa's rule, the embedding LayerNorm). */
typedef struct {
    size_t B, L, D, N, BHLL;
    double *y;        /* (B, L, D)  the output                                */
    double *Ey;       /* (B, L)     2-norm bound of each output row's error  */
    double **w, **ew; /* (N) of (B, H, L, L): weights, componentwise bounds   */
} fb_result;

void fb_encoder(fb_result *r, const refenc_params *p, const refenc_config *cfg,
                const refenc_input *in, const fb_norms *nm);
void fb_result_free(fb_result *r);

/* Runs refenc_encoder_forward (into y, and cap if not NULL) and fb_encoder
 * (into r) on the same input, and fails the test unless both computed the
 * same output and the same attention weights bit for bit: the bounds are
 * derived for the documented composition of stages (encoder.h, layer.h), so
 * they apply to the encoder's values only if it is that composition. */
void fb_encoder_checked(fb_result *r, double *y, prop_capture *cap, const refenc_params *p,
                        const refenc_config *cfg, const refenc_input *in, const fb_norms *nm,
                        const char *desc);

/* The number of outputs of two bounded encoder runs (y0 with f0's row
 * bounds, y1 with f1's) that differ by more than their bounds allow
 * (fb_within, element by element, "<what>: output <i>" in the record). */
size_t fb_outputs_outside(test_worst *w, const double *y1, const fb_result *f1, const double *y0,
                          const fb_result *f0, const char *what);

/* An invariance of the parameters: runs the bounded encoder on case c (its
 * x or tokens, token types and padding), applies change(c, arg), which
 * alters c's parameters only, runs it again, and returns the number of
 * outputs of the second run outside the two runs' bounds of the first
 * (fb_outputs_outside). */
size_t fb_outputs_changed_by(test_worst *w, prop_case *c, void (*change)(prop_case *c, void *arg),
                             void *arg);

/* 1 if |a - b| <= (ea + eb) * FB_SLACK; records the comparison in w. */
int fb_within(test_worst *w, double a, double ea, double b, double eb, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#endif
