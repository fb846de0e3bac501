/* The oracle's layer, forward and backward on MPFR buffers, shared by the
 * layer's twin (layer_backward.c) and the stack's (encoder_backward.c); not
 * part of the public API. */
#ifndef REFENC_ORACLE_LAYER_BACKWARD_H
#define REFENC_ORACLE_LAYER_BACKWARD_H

#include "backward.h"
#include "internal.h"

/* One linear map's weights as doubles, for the fixed-point row sums of
 * refenc_mpk_linear_d (the forward engine's, oracle.h): W (out, in) and its
 * bias b for y = x W^T + b, and W's transpose WT (in, out) for the input
 * gradient dx = dy W, each with its span (wspan_fix).  The same correctly
 * rounded sums as refenc_mp_dot on the MPFR copies of the weights, which
 * decodes both operands of every term anew: the backward's linear maps
 * spent most of its time there. */
typedef struct {
    const double *W, *b;
    double *WT;
    size_t out, in;
    refenc_mp_wspan fwd, bwd;
} lyr_lin;

/* The layer's MPFR values: parameters (53 bits) and the forward's buffers.
 * E = H Dh (the attention's width), Ekv = Hkv Dh, R = E + 2 Ekv (in_proj's
 * rows), F1 = F or 2F (linear1's rows, gated).  A tensor the config does not
 * have (a bias-free linear, RMSNorm's or a bias-free LayerNorm's beta) has
 * P and G NULL. */
typedef struct {
    size_t B, L, D, H, Hkv, Dh, E, Ekv, R, F, F1, BL;
    mpfr_ptr P[12];  /* the parameters, in refenc_layer_params order */
    lyr_lin lin[4];  /* in_proj, out_proj, linear1, linear2 as doubles (MLP; the
                        gated FFN's linears take P): refenc_mpb_layer_bind_d */
    int threads;     /* the linear maps' rows go to this many OpenMP threads, */
    refenc_mp_ws *tws; /* each with its workspace (refenc_mpb_layer_threads)  */
    mpfr_ptr dyT, xT;  /* dW's operands transposed, (width, BL), width up to the
                          widest linear: each sum reads consecutive values   */
    mpfr_ptr G[12];  /* their gradients (accumulated)               */
    unsigned char *ex[12]; /* which gradient values are exact         */
    mpfr_ptr eps;
    mpfr_ptr a, qkv, q, k, v, Pw, o, ctx, t, h, a2, z, hid, ga, f, r1, r2, y; /* forward */
    mpfr_ptr d1, d2, d3, dh, dob, dqkv, dq, dk, dv, dP, dS, Dr, xhat, dz, dhid, za, gd; /* backward */
    const refenc_mp_attn_options *opt;
    const refenc_rope_options *rope;
    mpfr_ptr base;
    refenc_activation act;
    int pre;
    int rms, offset;   /* RMSNorm (norm_type), Gemma's 1 + w (rmsnorm_offset) */
    int glu;           /* the gated FFN (ffn_type "glu")                       */
    size_t gate;       /* the gate's first row of linear1: 0 or F (glu_gate)   */
} lyr;

/* m's sizes and block types from cfg (B, L set by the caller). */
void refenc_mpb_layer_shape(lyr *m, const refenc_config *cfg, size_t B, size_t L);

enum { IPW, IPB, OPW, OPB, L1W, L1B, L2W, L2B, N1W, N1B, N2W, N2B };

/* m->lin from the layer's double parameters t (refenc_layer_params order):
 * their spans, fixed-point rows and transposes, rebuilt for each layer
 * (the transposes' buffers kept).  Returns 0 on allocation failure.
 * refenc_mpb_layer_unbind_d frees them. */
int refenc_mpb_layer_bind_d(lyr *m, const double *const t[12]);
void refenc_mpb_layer_unbind_d(lyr *m);

/* m's threads (threads >= 1) and their workspaces, each at prec as large as
 * the linear maps' rows need, and dyT, xT; 0 on allocation failure.  A value is computed by the same operations on any thread: the
 * outputs are the same for any number.  refenc_mpb_layer_threads_free
 * frees them. */
int refenc_mpb_layer_threads(lyr *m, int threads, mpfr_prec_t prec);
void refenc_mpb_layer_threads_free(lyr *m);

/* The forward's and the backward's buffers of m (its sizes set), from ar2. */
void refenc_mpb_layer_buffers(lyr *m, refenc_mp_arena *ar2, mpfr_prec_t p);

/* The workspace the layer's kernels need. */
int refenc_mpb_layer_ws(refenc_mp_ws *ws, const lyr *m, mpfr_prec_t prec);

/* m->y = the layer on x, keeping what the backward reads. */
void refenc_mpb_layer_forward(lyr *m, mpfr_srcptr x, refenc_mp_ws *ws);

/* The input gradient of the layer whose forward m holds (returned: one of
 * m's buffers, valid until the next call); m->G accumulated.  m->ex[L2B]
 * (Pre-LN) or m->ex[N2B] (Post-LN), when not NULL, receive which values of
 * that bias gradient are exact: pass them only when dy is exact (doubles). */
mpfr_ptr refenc_mpb_layer_backward(lyr *m, mpfr_srcptr dy, mpfr_srcptr x, refenc_mp_ws *ws);

/* y = the configured norm (LayerNorm with beta b or none, RMSNorm) of x
 * (m->BL, m->D), and its backward: dx written, dw and db (NULL: none)
 * accumulated, m->xhat scratch; ex_db as refenc_mpk_layernorm_backward's. */
void refenc_mpb_norm_forward(const lyr *m, mpfr_ptr y, mpfr_srcptr x, mpfr_srcptr w, mpfr_srcptr b,
                             mpfr_srcptr eps, refenc_mp_ws *ws);
void refenc_mpb_norm_backward(lyr *m, mpfr_ptr dx, mpfr_ptr dw, mpfr_ptr db, mpfr_srcptr dy,
                              mpfr_srcptr x, mpfr_srcptr w, mpfr_srcptr eps, unsigned char *ex_db,
                              refenc_mp_ws *ws);

/* REFENC_OK when the layer backward computes cfg's blocks: LayerNorm (with
 * or without its bias) or RMSNorm (w or 1 + w), the MLP or the gated FFN,
 * linears with or without biases, RoPE scaled or not, multi-head or
 * grouped-query attention of any head width; otherwise REFENC_EINVAL with a
 * message naming the config key (docs/gradients.md). */
int refenc_mpb_blocks_supported(const refenc_config *cfg, refenc_error *err);

#endif
