/* The oracle's layer, forward and backward on MPFR buffers, shared by the
 * layer's twin (layer_backward.c) and the stack's (encoder_backward.c); not
 * part of the public API. */
#ifndef REFENC_ORACLE_LAYER_BACKWARD_H
#define REFENC_ORACLE_LAYER_BACKWARD_H

#include "backward.h"
#include "internal.h"

/* The layer's MPFR values: parameters (53 bits) and the forward's buffers. */
typedef struct {
    size_t B, L, D, H, Dh, F, BL;
    mpfr_ptr P[12];  /* the parameters, in refenc_layer_params order */
    mpfr_ptr G[12];  /* their gradients (accumulated)               */
    unsigned char *ex[12]; /* which gradient values are exact         */
    mpfr_ptr eps;
    mpfr_ptr a, qkv, q, k, v, Pw, o, ctx, t, h, a2, z, hid, f, r1, r2, y; /* forward */
    mpfr_ptr d1, d2, d3, dh, dob, dqkv, dq, dk, dv, dP, dS, Dr, xhat, dz; /* backward */
    const refenc_mp_attn_options *opt;
    const refenc_rope_options *rope;
    mpfr_ptr base;
    refenc_activation act;
    int pre;
} lyr;

enum { IPW, IPB, OPW, OPB, L1W, L1B, L2W, L2B, N1W, N1B, N2W, N2B };

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

/* REFENC_OK when the layer backward computes cfg's blocks: LayerNorm with
 * its bias, the plain MLP, every linear with its bias, RoPE unscaled over
 * the whole head; otherwise
 * REFENC_EINVAL with a message naming the config key (RMSNorm, the gated
 * FFN and bias-free blocks have a double backward, not yet an MPFR twin). */
int refenc_mpb_blocks_supported(const refenc_config *cfg, refenc_error *err);

#endif
