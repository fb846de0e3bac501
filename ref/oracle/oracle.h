/* refenc's oracle: the encoder in MPFR, with correctly rounded, certified outputs.
 *
 * Every function of ref/ has a twin here, written from the formula stated in
 * its header (not translated from the double code): the two implementations
 * share only conventions (layouts, parameter names, masks, the masked-row
 * policy, the ALiBi and RoPE rules).  docs/oracle.md describes the design;
 * docs/error-bounds.md uses the oracle to measure the reference's error.
 *
 * Two levels.
 *
 * 1. Kernels, refenc_mpk_<module>_<verb>: the same computation on arrays of
 *    MPFR numbers at a working precision p.  Nothing is rounded to double.
 *    The blocks built from them (multi-head attention, the FFN, a layer,
 *    the encoder) run on one engine (refenc_mp_encoder_run, engine.c), item
 *    by item, every intermediate in MPFR.  Outputs are caller-initialised arrays at precision p; inputs
 *    may have any precision (parameters are kept at 53 bits, where doubles are
 *    exact, so that converting them does not depend on p).  Temporaries come
 *    from a workspace (refenc_mp_ws): kernels never allocate.
 *
 * 2. Twins, refenc_mp_<module>_<verb>: the double function's arguments plus a
 *    precision and a report.  They convert every double input exactly
 *    (mpfr_set_d with ternary 0, checked), run the kernels, and round each
 *    output once to the nearest double -- after certifying that rounding with
 *    Ziv's strategy (refenc_mp_certify): the computation is repeated at a
 *    higher precision, and a value is certified only when the result at the
 *    higher precision lies farther from the nearest rounding boundary (the
 *    midpoint between two doubles) than the difference between the two
 *    results; otherwise the precision is raised and the computation repeated.
 *    The report gives the precision that was needed.
 *
 * Elementary functions are MPFR's (mpfr_exp, mpfr_erfc, mpfr_sin_cos,
 * mpfr_sqrt, mpfr_pow, mpfr_exp2, mpfr_tanh, mpfr_const_pi), never libm.
 * Dot products and sums are correctly rounded (exact products, mpfr_sum).
 * Precision is always an argument: no mpfr_set_default_prec, no static state.
 * The MPFR flags are saved and restored around every certified evaluation.
 */
#ifndef REFENC_ORACLE_H
#define REFENC_ORACLE_H

#include <stddef.h>
#include <stdint.h>

#include <mpfr.h>

#include "../core/case.h"
#include "../core/config.h"
#include "../core/input.h"
#include "../core/options.h"
#include "../core/params.h"
#include "../core/status.h"
#include "../core/trace.h"

/* The oracle includes nothing of ref/ but core/ (the layering check,
 * scripts/check-layering.sh, enforces it): it shares conventions with the
 * reference, never code. */

/* What a known bug variant changes in the computation itself, beyond a
 * transformed case (tool/variants.h maps each variant to these). */
typedef struct {
    int alibi_slopes_pow2;       /* slopes 2^(-8(h+1)/H) whatever H            */
    int merge_without_transpose; /* (B, H, L, Dh) read as (B, L, D)            */
    int gqa_tiled;               /* query head h reads key/value head h % Hkv   */
    int softcap_after_mask;      /* the cap over score + biases + masks        */
    int rope_scaling_on_local_layers; /* Gemma 3's local layers scaled too    */
    int qk_norm_after_rope;      /* Qwen3's q_norm, k_norm after RoPE, not before */
    int qk_norm_over_all_heads;  /* q_norm, k_norm over the H Dh of a row      */
    int pooling_ignores_padding; /* the pooling reads every row as a token     */
    int t5_bucket_not_clamped;   /* T5's bucket without min(., nb/2 - 1)        */
    int t5_bias_per_layer;       /* T5's bias in layer 0 only (its own table)   */
    int alibi_bias_positive;     /* the ALiBi bias +m_h |i - j| (slopes negated) */
} refenc_mp_hooks;

/* ------------------------------------------------------------------------ */
/* Precision and certification                                              */

#define REFENC_MP_PREC_DEFAULT ((mpfr_prec_t)192) /* first working precision      */
#define REFENC_MP_PREC_MIN ((mpfr_prec_t)64)      /* below this, twins refuse      */
#define REFENC_MP_PREC_MAX ((mpfr_prec_t)1 << 16) /* Ziv gives up above this      */

/* The precision sequence of Ziv's loop: p_0 = the requested precision,
 * p_{k+1} = p_k + 64 * 2^k (192, 256, 384, 640, 1152, ...).  The result at p_k
 * is checked against the result at p_{k+1}. */
mpfr_prec_t refenc_mp_next_prec(mpfr_prec_t p, unsigned k);

/* What a certified evaluation needed. */
typedef struct {
    mpfr_prec_t prec;        /* p_k: the precision whose outputs were certified   */
    mpfr_prec_t prec_check;  /* p_{k+1}: the precision that certified them         */
    unsigned evaluations;    /* k + 2: evaluations run (2 when no escalation)      */
    size_t values;           /* values certified (every output and trace step)     */
    refenc_error error;      /* on failure: which step and index, or which input   */
} refenc_mp_report;

/* An observer of an MPFR evaluation: called with each step's values, still in
 * MPFR (the kernel-level twin of refenc_trace).  exact, when not NULL, tells
 * which values are known to be exact (every operation that produced them had
 * ternary value 0).  Returns REFENC_OK, or a status that stops the evaluation. */
typedef struct {
    int (*fn)(void *ctx, const char *name, mpfr_srcptr data, const unsigned char *exact,
              size_t ndim, const size_t *shape);
    void *ctx;
} refenc_mp_sink;

/* Calls sink->fn if sink is not NULL; returns its status (REFENC_OK if none).
 * refenc_mp_sink_emit passes exact = NULL. */
int refenc_mp_sink_emit(const refenc_mp_sink *sink, const char *name, mpfr_srcptr data,
                        size_t ndim, const size_t *shape);
int refenc_mp_sink_emit_exact(const refenc_mp_sink *sink, const char *name, mpfr_srcptr data,
                              const unsigned char *exact, size_t ndim, const size_t *shape);

/* One evaluation of a computation at working precision prec: it emits every
 * value to be certified through sink (in a fixed order, with the same names
 * and shapes at every precision).  Returns REFENC_OK or an error status,
 * with a message in err. */
typedef int (*refenc_mp_eval_fn)(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink,
                                 refenc_error *err);

/* Ziv's loop around eval.  Evaluates at p_0 = prec and p_1, p_2, ... (see
 * refenc_mp_next_prec) until, for two consecutive precisions, every emitted
 * value is certified:
 *   b, the value at the higher precision, is farther from the nearest
 *   rounding boundary of round-to-nearest double (the midpoint of two
 *   consecutive doubles) than max(|a - b|, 2^(16 - p_hi) |b|), a being the
 *   value at the lower precision; or b is exact: every operation up to this
 *   step was exact (MPFR's inexact flag is clear), or the step says this
 *   value is (refenc_mp_sink_emit_exact).  Exact values can lie on a
 *   boundary (x + cos 0 = x + 1 often does); computed ones cannot be told
 *   from it, which is why exactness is tracked.
 * The difference |a - b| estimates the error of a, itself about 2^(p_hi -
 * p_lo) times larger than the error of b: the test is the one MPFR's own
 * functions make with an error bound (mpfr_can_round), with the observed
 * difference in place of an a priori bound.  The floor 2^(16 - p_hi)|b| keeps
 * a value that happens to be identical at both precisions, because what it
 * depends on lies below both, from being certified right on a boundary.
 * Then each step is given to trace (if not NULL), rounded to nearest double,
 * in the order emitted, and rep (if not NULL) says what was needed.
 * Errors: REFENC_EINVAL (prec outside [REFENC_MP_PREC_MIN,
 *         REFENC_MP_PREC_MAX], or eval's own errors), REFENC_ENOMEM,
 *         REFENC_ELIMIT (not certified below REFENC_MP_PREC_MAX: the message
 *         names the step and the index). */
int refenc_mp_certify(refenc_mp_eval_fn eval, void *ctx, mpfr_prec_t prec,
                      const refenc_trace *trace, refenc_mp_report *rep);

/* ------------------------------------------------------------------------ */
/* Arrays and workspace                                                      */

/* n MPFR numbers, contiguous, initialised at precision prec to +0.
 * NULL if n == 0 or on allocation failure. */
mpfr_ptr refenc_mp_alloc(size_t n, mpfr_prec_t prec);
void refenc_mp_free(mpfr_ptr a, size_t n);

/* y[i] = x[i], exactly.  Returns 0, or the number of values whose ternary
 * value was not 0 (possible only if y's precision is below 53 bits). */
size_t refenc_mp_set_d(mpfr_ptr y, const double *x, size_t n);

/* y[i] = x[i] rounded to nearest double. */
void refenc_mp_get_d(double *y, mpfr_srcptr x, size_t n);

/* Temporaries for the kernels, at the working precision p.  Each kernel
 * states how many it needs (n_tmp values, n_ptr pointers and products);
 * refenc_mpk_ws_tmp / refenc_mpk_ws_ptr give the largest need. */
/* An MPFR number as an integer and a power of two: (-1)^neg d 2^lsb, d its
 * n limbs (least significant first).  dot.c */
typedef struct {
    int neg;
    const mp_limb_t *d;
    size_t n;
    long lsb;
} refenc_mp_operand;

/* A row of MPFR values decoded once for many dot products with rows of
 * doubles (refenc_mp_dot_row_d): its nonzero values, and their span. */
typedef struct {
    size_t n, nnz;
    size_t *idx;               /* (n) indices of the nonzero values           */
    refenc_mp_operand *op;     /* (n) those values                            */
    long lo, hi;               /* lowest last-bit and highest exponent        */
    size_t nx;                 /* the limbs of every value, when they agree   */
    int special;               /* a NaN or an infinity                         */
    /* The same values for fixed-point weights (refenc_mp_wspan_fix): value j
     * is X_j 2^lsb_j with lsb_j - lo = 64 k_j + r_j (0 <= r_j < 64); X_j 2^r_j
     * is stored in fx_n limbs, the values sorted by (k_j, sign): one group
     * each.  fx_n 0: the row does not take that path. */
    size_t fx_n;
    mp_limb_t *fx_x;           /* (n (fx_n + 1)) in group order: the value's
                                  index in the row, then its shifted limbs  */
    size_t fx_groups;
    size_t fx_end[130];        /* group g: slots fx_end[g - 1] .. fx_end[g)   */
    unsigned fx_k[130];        /* its k                                       */
    int fx_neg[130];           /* its values' sign                            */
    mp_limb_t fx_corr[130][7]; /* 2^63 times the sum of its X 2^r (fx_n + 2 limbs) */
} refenc_mp_row;

/* Temporaries for the kernels, at the working precision p.  Each kernel
 * states how many it needs (n_tmp values, n_ptr pointers and products);
 * refenc_mpk_ws_tmp / refenc_mpk_ws_ptr give the largest need. */
typedef struct {
    mpfr_prec_t prec;
    size_t n_tmp;
    mpfr_ptr tmp;     /* (n_tmp) scratch values at p                        */
    size_t n_ptr;
    mpfr_ptr *pa;     /* (n_ptr) pointers, for mpfr_sum                     */
    mpfr_ptr prod;    /* (n_ptr) exact products, at 2p bits                 */
    mpfr_ptr *pprod;  /* (n_ptr) pprod[k] = prod + k                        */
    size_t acc_limbs; /* limbs of each of the dot product's accumulators    */
    mp_limb_t *acc;   /* (131 acc_limbs) the accumulators (dot.c)           */
    mpfr_ptr wconv;   /* one value at 53 bits: a double, converted          */
    refenc_mp_row row;/* a row being multiplied by doubles (n_ptr values)   */
    refenc_mp_operand *dx, *dy; /* (n_ptr) refenc_mp_dot's nonzero terms, decoded */
    size_t fixed_rows; /* dot products that took the fixed-point weights (dot.c:
                          add_groups); counted so that a test sees the path taken */
} refenc_mp_ws;

/* r = sum_{k<n} x[k sx] y[k sy] (+ extra, if not NULL), correctly rounded
 * to r's precision: the exact sum of the exact products, rounded once
 * (dot.c: the same value, ternary and sign of zero as mpfr_sum of the
 * products).  ws: n_ptr >= n + 1; x, y, extra of at most ws->prec bits. */
void refenc_mp_dot(mpfr_ptr r, mpfr_srcptr x, size_t sx, mpfr_srcptr y, size_t sy, size_t n,
                   mpfr_srcptr extra, refenc_mp_ws *ws);

/* The weights of a matrix (out, in) in fixed point, row by row
 * (refenc_mp_wspan_fix): w[o, k] = (U[o in + k] - 2^63) 2^base[o], U
 * unsigned (the signed integer biased by 2^63), for every weight whose
 * significant bits fit in row o's window [base[o], base[o] + 63); the others
 * (outliers, and zeros: U = 2^63) are listed, out_idx[out_off[o] ..
 * out_off[o + 1]).  Narrow (U32 instead of U): the same in 32 bits, w[o, k]
 * = (U32[o in + k] - 2^31) 2^base[o], windows of 31 bits, for matrices whose
 * weights have few significant bits (bf16 or seeded weights: 8), half the
 * memory; wspan_fix takes it when at most one weight in 1024 is an outlier. */
typedef struct {
    const double *W;
    size_t out, in;
    uint64_t *U;     /* (out, in), or NULL when narrow */
    uint32_t *U32;   /* (out, in) when narrow, else NULL */
    int width;       /* the windows' width in bits: 63, or 31 when narrow */
    long *base;
    size_t *out_off, *out_idx;
} refenc_mp_wfix;

/* Where the nonzero finite values of a matrix of doubles and of its bias
 * lie: the lowest exponent of a last bit and the highest exponent, of each. */
typedef struct {
    long w_lo, w_hi, b_lo, b_hi;
    int w_empty, b_empty;     /* no nonzero value                         */
    int special;              /* a NaN or an infinity among them          */
    refenc_mp_wfix *fix;      /* NULL, or W in fixed point                */
} refenc_mp_wspan;
void refenc_mp_wspan_of(refenc_mp_wspan *s, const double *W, size_t n_w, const double *b, size_t n_b);
/* After refenc_mp_wspan_of(s, W, out * in, ...): W's rows in fixed point,
 * which refenc_mp_dot_row_d then uses for row o (same sums, faster); narrow
 * (32 bits a weight) when at most one weight in 1024 falls outside its
 * row's 31-bit window, else 64 bits.
 * Errors: REFENC_ENOMEM (s->fix stays NULL: the sums are the same, slower).
 * W must outlive s->fix; refenc_mp_wspan_unfix frees it. */
int refenc_mp_wspan_fix(refenc_mp_wspan *s, const double *W, size_t out, size_t in);
void refenc_mp_wspan_unfix(refenc_mp_wspan *s);

/* Dot products of one row x (n values of at most ws->prec bits) with rows
 * of doubles: refenc_mp_row_load decodes x into ws->row; then each
 * refenc_mp_dot_row_d(r, x, w, extra, w_row, span, ws) is
 * r = sum_k x[k] w[k] (+ *extra), correctly rounded as refenc_mp_dot, with
 * span covering w and extra.  w_row: w is row w_row of the matrix span was
 * made of (w = W + w_row n), which lets the sum use span's fixed-point
 * weights (refenc_mp_wspan_fix); SIZE_MAX when w is not such a row.
 * ws: n_ptr >= n + 1. */
void refenc_mp_row_load(refenc_mp_ws *ws, mpfr_srcptr x, size_t n);
void refenc_mp_dot_row_d(mpfr_ptr r, mpfr_srcptr x, const double *w, const double *extra, size_t w_row,
                         const refenc_mp_wspan *span, refenc_mp_ws *ws);

/* Errors: REFENC_ENOMEM.  On error *ws is empty (safe to free). */
int refenc_mp_ws_alloc(refenc_mp_ws *ws, mpfr_prec_t prec, size_t n_tmp, size_t n_ptr);
void refenc_mp_ws_free(refenc_mp_ws *ws);

/* The workspace needs of the kernels below, for the given sizes. */
size_t refenc_mpk_ws_tmp(size_t D, size_t F, size_t L, size_t Dh);
size_t refenc_mpk_ws_ptr(size_t D, size_t F, size_t L, size_t Dh);

/* ------------------------------------------------------------------------ */
/* Kernels (MPFR arrays; shapes and formulas as in the double headers)      */

/* y[n,o] = sum_k x[n,k] W[o,k] + b[o], the whole sum rounded once
 * (refenc_mp_dot with the bias as one more term).  b may be NULL.
 * ws: n_ptr >= in + 1.  linear.h */
void refenc_mpk_linear_forward(mpfr_ptr y, mpfr_srcptr x, mpfr_srcptr W, mpfr_srcptr b,
                               size_t N, size_t in, size_t out, refenc_mp_ws *ws);

/* The same with W (out, in) and b (out) doubles, as the parameters are
 * kept: every output is the same correctly rounded sum.  span: that of W
 * and b (refenc_mp_wspan_of), or NULL to have it computed.
 * ws: n_ptr >= in + 1. */
void refenc_mpk_linear_d(mpfr_ptr y, mpfr_srcptr x, const double *W, const double *b,
                         const refenc_mp_wspan *span, size_t N, size_t in, size_t out,
                         refenc_mp_ws *ws);

/* LayerNorm, biased variance, eps inside the root.  y may alias x.
 * ws: n_tmp >= D + 3, n_ptr >= D.  layernorm.h */
void refenc_mpk_layernorm_forward(mpfr_ptr y, mpfr_srcptr x, mpfr_srcptr gamma,
                                  mpfr_srcptr beta, size_t N, size_t D, mpfr_srcptr eps,
                                  refenc_mp_ws *ws);

/* RMSNorm, no mean, no bias, eps inside the root; scale w_d, or the exact
 * (1 + w_d) when offset (Gemma).  y may alias x.
 * ws: n_tmp >= 2, n_ptr >= D.  rmsnorm.h */
void refenc_mpk_rmsnorm_forward(mpfr_ptr y, mpfr_srcptr x, mpfr_srcptr w, size_t N, size_t D,
                                mpfr_srcptr eps, int offset, refenc_mp_ws *ws);

/* One item's pooled embedding e (D) from y (L, D) under its padding m (L,
 * 1 = padding; NULL: none), normalised when normalize (pooling.h).  mode is
 * not REFENC_POOL_NONE.  ws: n_tmp >= 1, n_ptr >= max(L, D) + 1.  pooling.h */
void refenc_mpk_pooling_forward(mpfr_ptr e, mpfr_srcptr y, const uint8_t *m, size_t L, size_t D,
                                refenc_pooling mode, int normalize, refenc_mp_ws *ws);

/* Softmax over rows with temperature tau (NULL: 1); -inf entries get weight
 * 0; an all -inf row gets all 0.  y may alias s.
 * ws: n_tmp >= 2, n_ptr >= n.  softmax.h */
void refenc_mpk_softmax_forward(mpfr_ptr y, mpfr_srcptr s, size_t R, size_t n,
                                mpfr_srcptr tau, refenc_mp_ws *ws);

/* y[i] = act(x[i]), y may alias x.  GELU: x erfc(-x/sqrt 2)/2.  GELU-tanh:
 * x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))/2 with sqrt(2/pi) from
 * mpfr_const_pi and 0.044715 the decimal rounded at the working precision.
 * Quick GELU: x / (1 + exp(-1.702 x)), 1.702 the decimal likewise.
 * ws: n_tmp >= 6.  activation.h */
void refenc_mpk_activation_forward(mpfr_ptr y, mpfr_srcptr x, size_t n,
                                   refenc_activation act, refenc_mp_ws *ws);

/* x[b,l,:] = table[tokens[b,l],:] s: s = sqrt(D) (dtype EXACT), or sqrt(D)
 * correctly rounded to the dtype's significand (MPFR at that precision;
 * Gemma's normaliser).  exact (B, L, D) or NULL: set to 1 where the value
 * is exact.  ws: n_tmp >= 1.  embedding.h */
void refenc_mpk_embedding_forward(mpfr_ptr x, unsigned char *exact, const int64_t *tokens,
                                  mpfr_srcptr table, size_t B, size_t L, size_t D,
                                  refenc_normalizer_dtype dtype, refenc_mp_ws *ws);

/* x[b,l,:] = table[tokens[b,l],:], a copy (exact: sets exact to 1 when not
 * NULL).  embedding.h */
void refenc_mpk_embedding_lookup(mpfr_ptr x, unsigned char *exact, const int64_t *tokens,
                                 mpfr_srcptr table, size_t B, size_t L, size_t D);

/* y[b,l,:] = x[b,l,:] + table[ids[b,l],:], y may alias x; exact (B, L, D)
 * or NULL: on entry 1 where x is exact, on return 1 where y is.  embedding.h */
void refenc_mpk_embedding_add(mpfr_ptr y, unsigned char *exact, mpfr_srcptr x,
                              const int64_t *ids, mpfr_srcptr table, size_t B, size_t L,
                              size_t D);

/* RoBERTa's position ids (position_ids.h), from the formula: pos[b,l] =
 * padding_idx when tokens[b,l] is the padding token, else padding_idx + the
 * number of non-padding tokens among tokens[b,0..l], counted afresh for each
 * l.  Integers: the oracle computes them, it does not round them. */
void refenc_mpk_position_ids_roberta(int64_t *pos, const int64_t *tokens, size_t B, size_t L,
                                     int64_t padding_idx);

/* angle: (L, D/2), angle[l,i] = pos[l] 10000^(-2i/D), the exponent 2i/D a
 * rational evaluated in MPFR.  ws: n_tmp >= 3.  sinusoidal.h */
void refenc_mpk_sinusoidal_angles(mpfr_ptr angle, const int64_t *pos, size_t L, size_t D,
                                  refenc_mp_ws *ws);
/* pe: (L, D), interleaved sin/cos.  ws: n_tmp >= D/2 + 3. */
void refenc_mpk_sinusoidal_table(mpfr_ptr pe, const int64_t *pos, size_t L, size_t D,
                                 refenc_mp_ws *ws);
/* y = x + PE, y may alias x.  exact (B, L, D) or NULL: on entry 1 where x
 * is exact, on return 1 where y is (PE at position 0 is exactly 0 and 1).
 * ws: n_tmp >= 3D/2 + 3. */
void refenc_mpk_sinusoidal_forward(mpfr_ptr y, unsigned char *exact, mpfr_srcptr x,
                                   const int64_t *pos, size_t B, size_t L, size_t D,
                                   refenc_mp_ws *ws);

/* y = x + table[pos], y may alias x; exact as above.  learned_pe.h */
void refenc_mpk_learned_pe_forward(mpfr_ptr y, unsigned char *exact, mpfr_srcptr x,
                                   const int64_t *pos, mpfr_srcptr table, size_t B, size_t L,
                                   size_t D);

/* y = theta_j of the scaling s (NULL: base^(-2j/R)) at length S, at y's
 * precision; every formula of ref/rope_scaling.h, exactly.  rope_scaling.c */
void refenc_mpk_rope_frequency(mpfr_ptr y, size_t j, size_t R, mpfr_srcptr base,
                               const refenc_rope_scaling *s, int64_t S);
/* y = the attention factor of s (1 for NULL and the types without one). */
void refenc_mpk_rope_attention_factor(mpfr_ptr y, const refenc_rope_scaling *s);

/* angle: (L, R/2), angle[l,j] = pos[l] theta_j, theta_j scaled by sc (NULL:
 * none, R = Dh), S = max(pos) + 1.  ws: n_tmp >= 3.  rope.h */
void refenc_mpk_rope_angles(mpfr_ptr angle, const int64_t *pos, size_t L, size_t Dh,
                            mpfr_srcptr base, const refenc_rope_scaling *sc, refenc_mp_ws *ws);
/* y = f R(pos) x per head vector on the first R coordinates, in the given
 * layout, the rest passed through; f the attention factor of sc; y may alias
 * x.  ws: n_tmp >= L Dh + 5. */
void refenc_mpk_rope_forward(mpfr_ptr y, mpfr_srcptr x, const int64_t *pos, size_t N, size_t L,
                             size_t Dh, mpfr_srcptr base, refenc_rope_layout layout,
                             const refenc_rope_scaling *sc, refenc_mp_ws *ws);
/* The same on R selected rows: x, y (N, R, Dh), row r at pos[rows[r]], S =
 * max(pos) + 1 over all L positions (the full run's).  ws as above (R for L). */
void refenc_mpk_rope_rows_forward(mpfr_ptr y, mpfr_srcptr x, const int64_t *pos, const int64_t *rows,
                                  size_t N, size_t R, size_t L, size_t Dh, mpfr_srcptr base,
                                  refenc_rope_layout layout, const refenc_rope_scaling *sc, refenc_mp_ws *ws);

/* slopes[h] = 2^(-8 (h+1)/H) for H a power of two, else the rule of alibi.h,
 * each exponent an exact rational.  ws: n_tmp >= 1. */
void refenc_mpk_alibi_slopes(mpfr_ptr slopes, size_t H, refenc_mp_ws *ws);

/* The bug variant alibi_slopes_pow2 (variants.h): slopes[h] = 2^(-8 (h+1)/H)
 * whatever H, the exponent an exact rational.  ws: n_tmp >= 1. */
void refenc_mpk_alibi_slopes_pow2(mpfr_ptr slopes, size_t H, refenc_mp_ws *ws);

/* The slopes a run uses: the given doubles (NULL: none), else the bug
 * variant alibi_slopes_pow2's or the exact ones; negated under the bug
 * variant alibi_bias_positive (hooks may be NULL).  ws: n_tmp >= 1. */
void refenc_mpk_alibi_slopes_of(mpfr_ptr slopes, size_t H, const double *given,
                                const refenc_mp_hooks *hooks, refenc_mp_ws *ws);

/* What attention sees besides q, k, v (refenc_attn_options, in MPFR). */
typedef struct {
    const uint8_t *key_padding_mask; /* (B, L), 1 = padding; NULL: none          */
    int causal;
    mpfr_srcptr attn_mask;           /* (L, L) additive, may hold -inf; NULL     */
    mpfr_srcptr alibi_slopes;        /* (H); NULL: no ALiBi                       */
    const int64_t *positions;        /* (L); required with ALiBi                  */
    mpfr_srcptr temperature;         /* tau > 0                                   */
    refenc_mask_value mask_value;    /* a masked key's score: -inf or -DBL_MAX     */
    mpfr_srcptr score_scalar;        /* S: divide by sqrt(S) tau; NULL: S = Dh      */
    mpfr_srcptr softcap;             /* cap: s <- cap tanh(s / cap); NULL: none     */
    int cap_after_mask;              /* the bug variant softcap_after_mask: the cap
                                      * after ALiBi and the masks (masked: -cap)   */
    size_t sliding_window;           /* w: key j seen iff j + w > i; 0: off       */
    size_t local_attention;          /* w: key j seen iff 2 |i - j| <= w; 0: off   */
    const double *relative_bias;     /* T5's table (nb, H): entry [b, h] at        *
                                      * b * relative_stride + h; NULL: none         */
    size_t relative_stride;          /* H                                          */
    size_t relative_num_buckets;     /* nb                                         */
    size_t relative_max_distance;    /* md                                         */
    int relative_unclamped;          /* the bug variant t5_bucket_not_clamped      */
} refenc_mp_attn_options;

/* T5's bidirectional bucket of rel = pos_j - pos_i (relative_bias.c; the
 * rule of relative_bucket.h, computed apart), and s += table[bucket, h]
 * (one rounding).  Never fail. */
size_t refenc_mpk_relative_bucket(int64_t rel, size_t num_buckets, size_t max_distance, int unclamped);
void refenc_mpk_relative_bias_add(mpfr_ptr s, const refenc_mp_attn_options *opt, size_t h, size_t i, size_t j);

/* Scaled dot-product attention, masked-row policy of attention.h (a masked
 * key's score is -inf, or exactly -DBL_MAX with mask_value finfo_min).
 * out: (B, H, L, Dh)  weights: (B, H, L, L)  q, k, v: (B, H, L, Dh).
 * ws: n_tmp >= 4, n_ptr >= max(L, Dh). */
void refenc_mpk_attention_forward(mpfr_ptr out, mpfr_ptr weights, mpfr_srcptr q, mpfr_srcptr k,
                                  mpfr_srcptr v, const refenc_mp_attn_options *opt, size_t B,
                                  size_t H, size_t L, size_t Dh, refenc_mp_ws *ws);
/* The same for R selected query rows against all L keys: q, out (B, H, R,
 * Dh), weights (B, H, R, L), k, v (B, H, L, Dh); query row r is position
 * index rows[r] (the masks, windows, ALiBi, T5's bias and attn_mask read
 * it); rows NULL: R = L.  ws as above. */
void refenc_mpk_attention_rows_forward(mpfr_ptr out, mpfr_ptr weights, mpfr_srcptr q, mpfr_srcptr k,
                                       mpfr_srcptr v, const int64_t *rows, const refenc_mp_attn_options *opt,
                                       size_t B, size_t H, size_t R, size_t L, size_t Dh, refenc_mp_ws *ws);

/* ------------------------------------------------------------------------ */
/* Twins of the double functions: same arguments, plus the first working     */
/* precision prec (REFENC_MP_PREC_DEFAULT is a good choice) and a report      */
/* (may be NULL).  Every output is the correctly rounded double of the exact */
/* function of the double inputs, certified (refenc_mp_certify).             */
/* Return REFENC_OK, or REFENC_EINVAL / REFENC_ENOMEM / REFENC_ELIMIT as      */
/* refenc_mp_certify, the message in rep->error.                             */

int refenc_mp_linear_forward(double *y, const double *x, const double *W, const double *b,
                             size_t N, size_t in, size_t out,
                             mpfr_prec_t prec, refenc_mp_report *rep);

int refenc_mp_layernorm_forward(double *y, const double *x, const double *gamma,
                                const double *beta, size_t N, size_t D, double eps,
                                mpfr_prec_t prec, refenc_mp_report *rep);

int refenc_mp_rmsnorm_forward(double *y, const double *x, const double *w, size_t N, size_t D,
                              double eps, int offset, mpfr_prec_t prec, refenc_mp_report *rep);

int refenc_mp_softmax_forward(double *y, const double *s, size_t R, size_t n, double tau,
                              mpfr_prec_t prec, refenc_mp_report *rep);

int refenc_mp_activation_forward(double *y, const double *x, size_t n, refenc_activation act,
                                 mpfr_prec_t prec, refenc_mp_report *rep);

int refenc_mp_embedding_forward(double *x, const int64_t *tokens, const double *table,
                                size_t B, size_t L, size_t V, size_t D,
                                mpfr_prec_t prec, refenc_mp_report *rep);
int refenc_mp_embedding_lookup(double *x, const int64_t *tokens, const double *table,
                               size_t B, size_t L, size_t V, size_t D,
                               mpfr_prec_t prec, refenc_mp_report *rep);
int refenc_mp_embedding_add(double *y, const double *x, const int64_t *ids, const double *table,
                            size_t B, size_t L, size_t R, size_t D,
                            mpfr_prec_t prec, refenc_mp_report *rep);

/* angle: (L, D/2), the exact pos[l] * 10000^(-2i/D) (refenc_sinusoidal_angle). */
int refenc_mp_sinusoidal_angles(double *angle, const int64_t *pos, size_t L, size_t D,
                                mpfr_prec_t prec, refenc_mp_report *rep);
int refenc_mp_sinusoidal_table(double *pe, const int64_t *pos, size_t L, size_t D,
                               mpfr_prec_t prec, refenc_mp_report *rep);
int refenc_mp_sinusoidal_forward(double *y, const double *x, const int64_t *pos,
                                 size_t B, size_t L, size_t D,
                                 mpfr_prec_t prec, refenc_mp_report *rep);

int refenc_mp_learned_pe_forward(double *y, const double *x, const int64_t *pos,
                                 const double *table, size_t B, size_t L, size_t P, size_t D,
                                 mpfr_prec_t prec, refenc_mp_report *rep);

/* angle: (L, Dh/2), the exact pos[l] * base^(-2j/Dh). */
int refenc_mp_rope_angles(double *angle, const int64_t *pos, size_t L, size_t Dh, double base,
                          mpfr_prec_t prec, refenc_mp_report *rep);
/* The twins of refenc_rope_scaled_forward and of its angles (L, R/2). */
int refenc_mp_rope_scaled_angles(double *angle, const int64_t *pos, size_t L, size_t Dh, double base,
                                 const refenc_rope_scaling *sc, mpfr_prec_t prec, refenc_mp_report *rep);
int refenc_mp_rope_scaled_forward(double *y, const double *x, const int64_t *pos, size_t N, size_t L,
                                  size_t Dh, double base, refenc_rope_layout layout,
                                  const refenc_rope_scaling *sc, mpfr_prec_t prec, refenc_mp_report *rep);
int refenc_mp_rope_forward(double *y, const double *x, const int64_t *pos,
                           size_t N, size_t L, size_t Dh, double base, refenc_rope_layout layout,
                           mpfr_prec_t prec, refenc_mp_report *rep);

int refenc_mp_alibi_slopes(double *slopes, size_t H, mpfr_prec_t prec, refenc_mp_report *rep);

/* opt's slopes, when given, are inputs (converted exactly), as in the
 * double function. */
int refenc_mp_attention_forward(double *out, double *weights,
                                const double *q, const double *k, const double *v,
                                const refenc_attn_options *opt,
                                size_t B, size_t H, size_t L, size_t Dh,
                                mpfr_prec_t prec, refenc_mp_report *rep);

/* weights (B, H, L, L) may be NULL. */
int refenc_mp_mha_forward(double *y, double *weights, const double *x,
                          const double *in_proj_weight, const double *in_proj_bias,
                          const double *out_proj_weight, const double *out_proj_bias,
                          const refenc_attn_options *opt, const refenc_rope_options *rope,
                          size_t B, size_t L, size_t D, size_t H,
                          mpfr_prec_t prec, refenc_mp_report *rep);

/* The twin of refenc_gqa_forward (mha.h): Hkv key/value heads, head width
 * Dh (independent of D / H).  Query head h reads key/value head h / (H / Hkv)
 * by index, without copying: an implementation independent of the double
 * kernel's repeat.  weights (B, H, L, L) may be NULL. */
int refenc_mp_gqa_forward(double *y, double *weights, const double *x,
                          const double *in_proj_weight, const double *in_proj_bias,
                          const double *out_proj_weight, const double *out_proj_bias,
                          const refenc_attn_options *opt, const refenc_rope_options *rope,
                          size_t B, size_t L, size_t D, size_t H, size_t Hkv, size_t Dh,
                          mpfr_prec_t prec, refenc_mp_report *rep);

/* hidden (N, F) may be NULL. */
int refenc_mp_ffn_forward(double *y, double *hidden, const double *x,
                          const double *W1, const double *b1,
                          const double *W2, const double *b2,
                          size_t N, size_t D, size_t F, refenc_activation act,
                          mpfr_prec_t prec, refenc_mp_report *rep);

/* The gated FFN (glu.h) on a fused linear1 W1 (2F, D), b1 (2F), the gate the
 * rows glu_gate names; hidden (N, F) = act(a) * b, may be NULL. */
int refenc_mp_glu_forward(double *y, double *hidden, const double *x,
                          const double *W1, const double *b1,
                          const double *W2, const double *b2,
                          size_t N, size_t D, size_t F, refenc_activation act,
                          refenc_glu_gate gate, mpfr_prec_t prec, refenc_mp_report *rep);

/* The whole encoder (encoder.h), on the same config, parameters and input
 * as refenc_encoder_forward; every trace step of the reference ("embed",
 * "layers.{i}.norm1", ..., "norm", "output") goes to trace, each value the
 * correctly rounded double of the exact intermediate (nothing is rounded
 * between steps), certified together with y.  ALiBi slopes are the exact
 * ones (computed in MPFR), not the reference's doubles.
 * Errors: as refenc_input_validate, and as refenc_mp_certify. */
int refenc_mp_encoder_forward(double *y, const refenc_params *p, const refenc_config *cfg,
                              const refenc_input *in, const refenc_trace *trace,
                              mpfr_prec_t prec, refenc_mp_report *rep);

/* ------------------------------------------------------------------------ */
/* The encoder at scale                                                      */

/* Where a run stands, for a progress report. */
typedef struct {
    size_t unit, units;      /* the unit being computed, and how many          */
    size_t layer;            /* its layer (whole stack: the current one)       */
    const char *step;        /* the step just finished                          */
    double done, total;      /* work, in multiply-adds (those of one of the two
                                precisions; exp, erfc and tanh count 60 to 600) */
    mpfr_prec_t prec;        /* the precision of the unit's first evaluation   */
} refenc_mp_progress;

/* What a run computes: the encoder, or one block of layer 0 on in->x (the
 * golden cases of one component, and the twins of mha.h and ffn.h). */
typedef enum {
    REFENC_MP_BLOCK_ENCODER = 0, /* embed, the layers, norm, output              */
    REFENC_MP_BLOCK_MHA,         /* steps "weights" (H, L, L), "output" (L, D)   */
    REFENC_MP_BLOCK_FFN,         /* steps "hidden" (L, F), "output" (L, D)       */
} refenc_mp_block;

/* A run of the oracle's one forward engine, item by item (engine.c).
 *
 * The work is cut into units: a batch item of the whole stack, or, with
 * layer_inputs (per layer), a (layer l, item b) pair, unit l B + b, whose
 * input is the double layer_inputs[l][b] (the outputs of layer l are the
 * exact functions of that stored input).  Unit l = 0 also gives "embed",
 * unit l = N - 1 "norm" and "output".  Units are independent: any subset
 * [unit_begin, unit_end) may run, on any machine, and gives the same values.
 *
 * Each unit is evaluated at two precisions in lockstep, step by step, and
 * every value of every wanted step is certified with Ziv's test (as
 * refenc_mp_certify); a unit with a value not certified is evaluated again
 * at the next pair of precisions.  With one_evaluation, a unit is evaluated
 * once at prec and every value rounded once to double (a bug variant's
 * outputs).  Within a step the work is shared by `threads` threads (OpenMP)
 * over rows and heads, each with its own MPFR workspace; every value is
 * computed by the same operations whatever the thread, so the output is
 * bit-identical for any thread count.  Parameters stay doubles; the MPFR
 * storage is that of one item at two precisions plus each thread's
 * workspace (refenc_mp_encoder_run_bytes). */
typedef struct {
    const refenc_config *cfg;
    const refenc_params *params;
    const refenc_input *in;
    const double *const *layer_inputs; /* (N) pointers to (B, L, D), or NULL: the whole stack;
                                          only the layers of the units run are read */
    size_t unit_begin, unit_end;       /* units to compute                              */
    /* which steps to certify and emit (NULL: all): "embed", "layers.{i}.norm1", ... */
    int (*wanted)(void *ctx, const char *step);
    void *wanted_ctx;
    /* each certified step of each item: data is the item's slice (L, D), or
     * (H, L, L) for self_attn.weights; valid during the call only */
    void (*emit)(void *ctx, const char *step, size_t item, const double *data, size_t ndim,
                 const size_t *shape);
    void *emit_ctx;
    void (*progress)(void *ctx, const refenc_mp_progress *p); /* may be NULL */
    void *progress_ctx;
    mpfr_prec_t prec;                  /* first working precision                        */
    int threads;                       /* >= 1                                           */
    refenc_mp_block block;             /* 0: the encoder                                 */
    const refenc_mp_hooks *hooks;      /* NULL, or a bug variant's (variants.h)          */
    int one_evaluation;                /* 1: evaluated once at prec, rounded, not certified */
    const double *alibi_slopes;        /* (H) ALiBi's slopes as given doubles (a twin's
                                          inputs); NULL: the exact slopes               */
} refenc_mp_run;

/* Runs the units; rep gives the highest precisions any unit needed.
 * Errors: as refenc_input_validate, REFENC_EINVAL (a unit outside the
 * run, a precision outside the limits), REFENC_ENOMEM, REFENC_ELIMIT (a value
 * not certified below REFENC_MP_PREC_MAX: the message names the step and
 * the index). */
int refenc_mp_encoder_run(const refenc_mp_run *run, refenc_mp_report *rep);

/* Units of a run: B for the whole stack, N B per layer. */
size_t refenc_mp_encoder_units(const refenc_config *cfg, size_t B, int per_layer);

/* An estimate of the memory a certified encoder run needs besides the
 * parameters and what emit keeps: one item's values at the first two
 * precisions, each thread's workspace, a layer's weights in fixed point.
 * An upper bound of what the run allocates (checked by
 * oracle_engine/the_memory_estimate_bounds_what_a_run_allocates).
 * 0 if it overflows. */
size_t refenc_mp_encoder_run_bytes(const refenc_config *cfg, size_t L, int threads,
                                   mpfr_prec_t prec);

/* The work of one unit, in the multiply-adds of refenc_mp_progress. */
double refenc_mp_encoder_unit_work(const refenc_config *cfg, size_t L, int per_layer,
                                   size_t layer);

/* ------------------------------------------------------------------------ */
/* Golden cases                                                              */

/* The outputs of a golden case (golden_case.h), from the oracle: every output
 * the reference reports for the case (refenc_case_run_reference), with the
 * same names, in the same order.  hooks: NULL for the case as specified, or a
 * bug variant's (variants.h).  The encoder, attention and FFN cases run on
 * the engine (refenc_mp_encoder_run, one thread), the others on their
 * kernels.  certify: 1 for the golden outputs, each the certified correctly
 * rounded double (Ziv's test, starting at prec);
 * 0 for one evaluation at prec, every value rounded once to double (a bug
 * variant's outputs, which only need to be far more accurate than any
 * tolerance: at 128 bits they are within 2^-70 relative of the exact ones,
 * except where cancellation makes an output tiny, where they are within
 * 2^-70 of the inputs' scale).
 * Errors: as refenc_case_validate, and as refenc_mp_certify. */
int refenc_mp_case_run(const refenc_case *c, const refenc_mp_hooks *hooks, int certify,
                       const refenc_trace *trace, mpfr_prec_t prec, refenc_mp_report *rep);

#endif
