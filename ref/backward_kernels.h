/* The backward's kernel table: the kernels the layer's and the stack's
 * backward call (mha.c, ffn.c, glu.c, layer.c, encoder.c), as pointers.
 * NULL everywhere means the reference's own kernels
 * (refenc_backward_reference); a named backward bug (tool/backward_bugs.h,
 * docs/gradients.md) is this table with one kernel replaced, so the rest of
 * the backward runs, unchanged, on the bug's output.  The signatures are
 * the reference kernels' (linear.h, layernorm.h, attention.h, rope.h,
 * activation.h, embedding.h); `embedding` is the token embedding's
 * scatter-add dtable[tokens[b,l],:] += dx[b,l,:] * s, s = sqrt(D) when
 * scaled, else 1. */
#ifndef REFENC_BACKWARD_KERNELS_H
#define REFENC_BACKWARD_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "activation.h"
#include "attention.h"
#include "rope.h"

typedef struct refenc_backward_kernels {
    void (*linear)(double *dx, double *dW, double *db, const double *dy, const double *x, const double *W,
                   size_t N, size_t in, size_t out);
    void (*layernorm)(double *dx, double *dgamma, double *dbeta, const double *dy, const double *x,
                      const double *gamma, size_t N, size_t D, double eps);
    void (*attention)(double *dq, double *dk, double *dv, double *dP, double *dS, double *Drow,
                      const double *dout, const double *q, const double *k, const double *v,
                      const double *weights, const double *out, const refenc_attn_options *opt,
                      size_t B, size_t H, size_t L, size_t Dh);
    void (*rope)(double *dx, const double *dy, const int64_t *pos, size_t N, size_t L, size_t Dh, double base,
                 refenc_rope_layout layout, const refenc_rope_scaling *sc);
    void (*activation)(double *dx, const double *dy, const double *x, size_t n, refenc_activation act);
    void (*embedding)(double *dtable, const double *dx, const int64_t *tokens, size_t B, size_t L, size_t V,
                      size_t D, int scaled);
} refenc_backward_kernels;

/* The reference's kernels. */
extern const refenc_backward_kernels refenc_backward_reference;

/* k, or the reference's table when k is NULL. */
const refenc_backward_kernels *refenc_backward_kernels_or_reference(const refenc_backward_kernels *k);

/* The token embedding's scatter-add (refenc_embedding_backward when scaled,
 * else refenc_embedding_lookup_backward): the reference's `embedding`. */
void refenc_embedding_token_backward(double *dtable, const double *dx, const int64_t *tokens, size_t B,
                                     size_t L, size_t V, size_t D, int scaled);

#endif
