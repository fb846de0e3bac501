/* The oracle's backward: MPFR twins of the reference's backward kernels
 * (docs/gradients.md, "The oracle's backward").  Each is written from the
 * formula of the double kernel's header, never from its code: the oracle
 * includes nothing of ref/ but core/ (scripts/check-layering.sh).
 *
 * Two levels, as the forward (oracle.h):
 *   refenc_mpk_<kernel>_backward   MPFR arrays at a working precision p;
 *                                  nothing rounded to double; never allocate
 *   refenc_mp_<kernel>_backward    the double kernel's arguments, every
 *                                  output the correctly rounded double of the
 *                                  exact gradient, certified by Ziv's loop
 *                                  (refenc_mp_certify: evaluated at p and at a
 *                                  higher precision, accepted when both round
 *                                  to the same double, else the precision is
 *                                  raised), plus prec and a report.
 *
 * What the twins compute is the exact gradient of the exact forward at the
 * given double inputs.  Where the double kernel reads what its forward saved
 * (softmax: y; attention: P and O), the twin takes the forward's inputs
 * instead (the logits s; q, k, v) and recomputes the forward exactly: its
 * outputs are the gradients of the function, not of the reference's rounded
 * intermediates.  Accumulated outputs (dW, db, dgamma, dbeta, the tables'
 * gradients) keep the double kernel's convention: on entry they hold a
 * starting value, on return the correctly rounded double of that value plus
 * the exact sum (one rounding).  Written outputs (dx, dq, dP, ...) are
 * overwritten; NULL where the double kernel allows NULL.
 *
 * Return REFENC_OK, or REFENC_EINVAL / REFENC_ENOMEM / REFENC_ELIMIT as
 * refenc_mp_certify, the message in rep->error. */
#ifndef REFENC_ORACLE_BACKWARD_H
#define REFENC_ORACLE_BACKWARD_H

#include "oracle.h"

/* ---- kernels (MPFR arrays) ----------------------------------------------- */

/* A sum of exact products of doubles can be exact and lie on a rounding
 * boundary of double (a midpoint), where Ziv's test can only certify it as
 * known to be exact.  The kernels that compute such sums record, when given
 * an array ex (NULL: not recorded), which of those values are exact:
 * refenc_mpb_exact_begin before the value, refenc_mpb_exact_end after
 * (which leaves MPFR's inexact flag set if it was set before or is now, so
 * that the evaluation's own exactness tracking is unchanged).  A recorded
 * value is exact only if the sum's inputs are: the caller passes ex only
 * where they are (exact doubles converted). */
static inline int refenc_mpb_exact_begin(void)
{
    const int was = mpfr_inexflag_p();
    mpfr_clear_inexflag();
    return was;
}
static inline unsigned char refenc_mpb_exact_end(int was)
{
    const int exact = !mpfr_inexflag_p();
    if (was)
        mpfr_set_inexflag();
    return (unsigned char)exact;
}

/* dx = dy W (dx may be NULL), dW = dW0 + dy^T x, db = db0 + sum_n dy_n (db may
 * be NULL); dW and db hold dW0 and db0 on entry.
 * ws: n_tmp >= 1, n_ptr >= max(N, out) + 1. */
void refenc_mpk_linear_backward(mpfr_ptr dx, mpfr_ptr dW, mpfr_ptr db, mpfr_srcptr dy,
                                mpfr_srcptr x, mpfr_srcptr W, size_t N, size_t in, size_t out,
                                unsigned char *ex_dx, unsigned char *ex_dW, unsigned char *ex_db,
                                refenc_mp_ws *ws);

/* refenc_mpk_linear_backward's dW on rows o0 <= o < o1 of dW (in columns)
 * only, a thread's share of them (ex_dW indexed as there), with dy[n,o] at
 * dy + n dy_n + o dy_o and x[n,k] at x + n x_n + k x_k: (out, 1) and (in,
 * 1) for the matrices as they are, (1, N) for their transposes, whose sums
 * then read consecutive values.  And its db alone.
 * ws: as refenc_mpk_linear_backward's. */
void refenc_mpk_linear_backward_dw(mpfr_ptr dW, mpfr_srcptr dy, size_t dy_n, size_t dy_o, mpfr_srcptr x,
                                   size_t x_n, size_t x_k, size_t N, size_t in, size_t o0, size_t o1,
                                   unsigned char *ex_dW, refenc_mp_ws *ws);
void refenc_mpk_linear_backward_db(mpfr_ptr db, mpfr_srcptr dy, size_t N, size_t out,
                                   unsigned char *ex_db, refenc_mp_ws *ws);

/* LayerNorm's backward; dgamma, dbeta (NULL: a bias-free LayerNorm) accumulated as above.  xhat: (N, D)
 * scratch at p (on return, x^).  ws: n_tmp >= D + 5, n_ptr >= max(N, D) + 1. */
void refenc_mpk_layernorm_backward(mpfr_ptr dx, mpfr_ptr dgamma, mpfr_ptr dbeta, mpfr_ptr xhat,
                                   mpfr_srcptr dy, mpfr_srcptr x, mpfr_srcptr gamma, size_t N,
                                   size_t D, mpfr_srcptr eps, unsigned char *ex_dbeta,
                                   refenc_mp_ws *ws);

/* RMSNorm's backward (rmsnorm_backward.c); dw accumulated as above, the
 * same for both scales (offset: s = 1 + w).  xhat: (N, D) scratch at p (on
 * return, x^).  ws: n_tmp >= D + 2, n_ptr >= max(N, D) + 1. */
void refenc_mpk_rmsnorm_backward(mpfr_ptr dx, mpfr_ptr dw, mpfr_ptr xhat, mpfr_srcptr dy,
                                 mpfr_srcptr x, mpfr_srcptr w, size_t N, size_t D, mpfr_srcptr eps,
                                 int offset, refenc_mp_ws *ws);

/* The gated FFN (glu.h), h = act(a) * b, a and b linear1's gate and up
 * halves (gate: the gate's first row, 0 or F), y = h W2^T + b2: the forward
 * keeping z = x W1^T + b1 (N, 2F), ga = act(a) and h (N, F) (y may be NULL;
 * b1, b2 may be NULL), and its backward on them: dx written, dW1, db1, dW2,
 * db2 accumulated (db1, db2 NULL: bias-free), dz (N, 2F), dh, t, gd (N, F)
 * scratch; ex_db2 as refenc_mpk_linear_backward's ex_db.
 * ws: n_tmp >= 6, n_ptr >= max(N, 2F, D) + 1. */
void refenc_mpk_glu_forward_keep(mpfr_ptr y, mpfr_ptr z, mpfr_ptr ga, mpfr_ptr h, mpfr_srcptr x,
                                 mpfr_srcptr W1, mpfr_srcptr b1, mpfr_srcptr W2, mpfr_srcptr b2,
                                 size_t N, size_t D, size_t F, size_t gate, refenc_activation act,
                                 refenc_mp_ws *ws);
void refenc_mpk_glu_backward(mpfr_ptr dx, mpfr_ptr dW1, mpfr_ptr db1, mpfr_ptr dW2, mpfr_ptr db2,
                             mpfr_ptr dz, mpfr_ptr dh, mpfr_ptr t, mpfr_ptr gd, mpfr_srcptr dy,
                             mpfr_srcptr x, mpfr_srcptr z, mpfr_srcptr ga, mpfr_srcptr h,
                             mpfr_srcptr W1, mpfr_srcptr W2, size_t N, size_t D, size_t F,
                             size_t gate, refenc_activation act, unsigned char *ex_db2,
                             refenc_mp_ws *ws);

/* ds = y (dy - D) / tau row by row, y the forward's weights (exact, at p).
 * ws: n_tmp >= 2, n_ptr >= n + 1. */
void refenc_mpk_softmax_backward(mpfr_ptr ds, mpfr_srcptr dy, mpfr_srcptr y, size_t R, size_t n,
                                 mpfr_srcptr tau, refenc_mp_ws *ws);

/* act'(x) into d[i].  ws: n_tmp >= 6. */
void refenc_mpk_activation_derivative(mpfr_ptr d, mpfr_srcptr x, size_t n, refenc_activation act,
                                      refenc_mp_ws *ws);

/* dx = f R(pos)^T dy per head vector (dx may alias dy): the forward's
 * rotation by -theta, its angles those of the scaling sc (NULL: unscaled,
 * the whole head, f = 1; the pass-through coordinates of a partial rotary
 * head copied).  ws: n_tmp >= L Dh + 5. */
void refenc_mpk_rope_backward(mpfr_ptr dx, mpfr_srcptr dy, const int64_t *pos, size_t N,
                              size_t L, size_t Dh, mpfr_srcptr base, refenc_rope_layout layout,
                              const refenc_rope_scaling *sc, refenc_mp_ws *ws);

/* The attention backward from the forward's exact P and O (attention.c's
 * kernel): dq, dk, dv (B, H, L, Dh), dP, dS (B, H, L, L), Drow (B, H, L).
 * ws: n_tmp >= 4, n_ptr >= max(L, Dh) + 1. */
void refenc_mpk_attention_backward(mpfr_ptr dq, mpfr_ptr dk, mpfr_ptr dv, mpfr_ptr dP, mpfr_ptr dS,
                                   mpfr_ptr Drow, mpfr_srcptr dout, mpfr_srcptr q, mpfr_srcptr k,
                                   mpfr_srcptr v, mpfr_srcptr P, mpfr_srcptr O,
                                   const refenc_mp_attn_options *opt, size_t B, size_t H, size_t L,
                                   size_t Dh, unsigned char *ex_dv, unsigned char *ex_dP,
                                   refenc_mp_ws *ws);

/* dtable[r,:] = dtable0[r,:] + s sum over the n with ids[n] = r of dy[n,:]
 * (N = B L rows; s = scale, or 1 when scale is NULL); dtable holds dtable0
 * on entry, at p.  ws: n_tmp >= 1, n_ptr >= N + 1. */
void refenc_mpk_scatter_add_backward(mpfr_ptr dtable, mpfr_srcptr dy, const int64_t *ids,
                                     size_t N, size_t R, size_t D, mpfr_srcptr scale,
                                     unsigned char *ex, refenc_mp_ws *ws);

/* ---- twins (doubles in, correctly rounded doubles out) -------------------- */

int refenc_mp_linear_backward(double *dx, double *dW, double *db, const double *dy,
                              const double *x, const double *W, size_t N, size_t in, size_t out,
                              mpfr_prec_t prec, refenc_mp_report *rep);

int refenc_mp_layernorm_backward(double *dx, double *dgamma, double *dbeta, const double *dy,
                                 const double *x, const double *gamma, size_t N, size_t D,
                                 double eps, mpfr_prec_t prec, refenc_mp_report *rep);

/* s: the forward's logits (R, n) (not its output y). */
/* RMSNorm (rmsnorm.h, refenc_rmsnorm_backward): dx written, dw accumulated;
 * offset: Gemma's s = 1 + w, exact here (the double kernel's fl(1 + w) is
 * one rounding of its error). */
int refenc_mp_rmsnorm_backward(double *dx, double *dw, const double *dy, const double *x,
                               const double *w, size_t N, size_t D, double eps, int offset,
                               mpfr_prec_t prec, refenc_mp_report *rep);

/* The gated FFN (glu.h, refenc_ffn_block_backward with ffn_type "glu"):
 * x (N, D), W1 (2F, D), b1 (2F) or NULL, W2 (D, F), b2 (D) or NULL; dx
 * written, dW1, db1, dW2, db2 accumulated (db1, db2 ignored when b1, b2
 * are NULL). */
int refenc_mp_glu_backward(double *dx, double *dW1, double *db1, double *dW2, double *db2,
                           const double *dy, const double *x, const double *W1, const double *b1,
                           const double *W2, const double *b2, size_t N, size_t D, size_t F,
                           refenc_activation act, refenc_glu_gate gate, mpfr_prec_t prec,
                           refenc_mp_report *rep);

int refenc_mp_softmax_backward(double *ds, const double *dy, const double *s, size_t R, size_t n,
                               double tau, mpfr_prec_t prec, refenc_mp_report *rep);

int refenc_mp_activation_backward(double *dx, const double *dy, const double *x, size_t n,
                                  refenc_activation act, mpfr_prec_t prec,
                                  refenc_mp_report *rep);

int refenc_mp_rope_backward(double *dx, const double *dy, const int64_t *pos, size_t N, size_t L,
                            size_t Dh, double base, refenc_rope_layout layout, mpfr_prec_t prec,
                            refenc_mp_report *rep);

/* q, k, v: the forward's inputs (B, H, L, Dh), RoPE applied; P and O are
 * recomputed exactly.  Any of dP, dS, Drow may be NULL. */
int refenc_mp_attention_backward(double *dq, double *dk, double *dv, double *dP, double *dS,
                                 double *Drow, const double *dout, const double *q,
                                 const double *k, const double *v, const refenc_attn_options *opt,
                                 size_t B, size_t H, size_t L, size_t Dh, mpfr_prec_t prec,
                                 refenc_mp_report *rep);

/* refenc_embedding_backward (scale sqrt(D)), refenc_embedding_lookup_backward
 * (scaled = 0) and refenc_embedding_add_backward (ids, R rows, scaled = 0). */
int refenc_mp_embedding_backward(double *dtable, const double *dx, const int64_t *tokens,
                                 size_t B, size_t L, size_t V, size_t D, int scaled,
                                 mpfr_prec_t prec, refenc_mp_report *rep);

/* dtable[pos[l],:] += sum_b dy[b,l,:], one rounding per element. */
int refenc_mp_learned_pe_backward(double *dtable, const double *dy, const int64_t *pos, size_t B,
                                  size_t L, size_t P, size_t D, mpfr_prec_t prec,
                                  refenc_mp_report *rep);

/* One layer (layer.h, refenc_layer_backward): dx (B, L, D) written, the
 * gradients dlp (the parameters' layout) accumulated, y (B, L, D, may be
 * NULL) the layer's forward output, certified with them.  opt's slopes
 * and masks are inputs (converted exactly); rope NULL: no RoPE.  Every
 * family's layer: Pre-LN and Post-LN, the four activations, the masks,
 * ALiBi, RoPE in both layouts. */
int refenc_mp_layer_backward(double *dx, const refenc_layer_params *dlp, double *y,
                             const double *dy, const double *x, const refenc_layer_params *lp,
                             const refenc_config *cfg, const refenc_attn_options *opt,
                             const refenc_rope_options *rope, size_t B, size_t L,
                             mpfr_prec_t prec, refenc_mp_report *rep);

/* The whole encoder (encoder.h, refenc_encoder_backward): grad (a second
 * refenc_params of the same config, tensor for tensor) accumulated, dx
 * (B, L, D; may be NULL) the gradient of x (V = 0) or of the token
 * embedding's output (V > 0), y (may be NULL) the encoder's output, all
 * certified together.  ALiBi's slopes are the exact ones, as the forward
 * oracle's.  Errors: as refenc_input_validate; REFENC_EINVAL (grad not
 * shaped as p); as refenc_mp_certify. */
int refenc_mp_encoder_backward(refenc_params *grad, double *dx, double *y, const refenc_params *p,
                               const refenc_config *cfg, const refenc_input *in, const double *dY,
                               mpfr_prec_t prec, refenc_mp_report *rep);

/* The same, with the backward's steps (docs/golden-format.md, "Gradients"):
 * dsteps (NULL: none) holds N + 1 arrays (B, L, D), dsteps[0] the gradient
 * of the embedding path's output (the forward's step "embed", layer 0's
 * input), dsteps[i + 1] that of layer i's output ("layers.{i}.output"), each
 * certified with the rest (may be NULL: not wanted).  The layers' linear
 * maps run on threads OpenMP threads (refenc_mp_encoder_backward: 1); the
 * outputs are the same for any number. */
int refenc_mp_encoder_backward_steps(refenc_params *grad, double *dx, double *y,
                                     double *const *dsteps, const refenc_params *p,
                                     const refenc_config *cfg, const refenc_input *in,
                                     const double *dY, mpfr_prec_t prec, int threads,
                                     refenc_mp_report *rep);

/* REFENC_OK when the oracle's backward computes cfg's blocks, else
 * REFENC_EINVAL with a message naming the config key it does not (the
 * conventions still forward only: docs/gradients.md). */
int refenc_mp_backward_supported(const refenc_config *cfg, refenc_error *err);

/* The forward's name of step i of refenc_mp_encoder_backward_steps: "embed"
 * for i = 0, else "layers.{i - 1}.output". */
void refenc_mp_grad_step_name(char *name, size_t n, size_t i);

#endif
