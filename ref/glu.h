#ifndef REFENC_GLU_H
#define REFENC_GLU_H

#include <stddef.h>

#include "backward_kernels.h"
#include "core/config.h"
#include "linear.h"

/* Gated feed-forward network (Shazeer 2020, "GLU Variants Improve
 * Transformer"):
 *   a = x Wg^T + bg   (the gate: the activated half)
 *   b = x Wu^T + bu   (the up projection: the linear half)
 *   h = act(a) * b    elementwise
 *   y = h W2^T + b2
 * GeGLU is act = GELU (exact: ModernBERT, Jina; tanh: Gemma, T5 v1.1),
 * SwiGLU act = SiLU (Llama, NomicBERT).  The operand order matters:
 * act(b) * a (the halves or the operands swapped) is another function.
 * Each bias may be NULL (a bias-free linear).
 * y, x: (N, D)   hidden, up: (N, F), left holding h and b
 * Wg, Wu: (F, D)  bg, bu: (F)  W2: (D, F)  b2: (D)
 * y must not alias x, hidden or up.  Never fails. */
void refenc_glu_forward(double *y, double *hidden, double *up, const double *x,
                        const double *Wg, const double *bg, const double *Wu, const double *bu,
                        const double *W2, const double *b2,
                        size_t N, size_t D, size_t F, refenc_activation act);

/* Backward of the configured FFN (docs/gradients.md).  dy: (N, D).  Saved
 * from refenc_ffn_block_forward: x (N, D) and hidden (N, F) for the MLP,
 * (N, 2F) for the gated FFN (h, then b).  The MLP is refenc_ffn_backward
 * (pre, dpre (N, F)).  The gated FFN, with g and u the gate and up halves
 * of linear1 (refenc_glu_halves) and a = x Wg^T + bg recomputed:
 *   dh = dy W2;  db = dh * act(a);  da = dh * b * act'(a)
 *   d[a | b] in linear1's row order (the gate's half at g, the up's at u),
 *   dx = d[a | b] W1 (one fused linear backward)             written
 *   dW2 += dy^T h,  db2 += sum dy;  dW1 += d[a | b]^T x,  db1 += sum d[a | b]
 * pre (N, 3F) and dpre (N, 2F) are caller-owned work buffers: pre is left
 * holding act(a), dh and da, dpre d[a | b].  Each bias gradient may be NULL (bias-free).
 * dx must not alias any input.  Never fails. */
void refenc_ffn_block_backward(double *dx, double *dW1, double *db1, double *dW2, double *db2,
                               double *pre, double *dpre, const double *dy, const double *x,
                               const double *hidden, const double *W1, const double *b1,
                               const double *W2, size_t N, const refenc_config *cfg);

/* The same with the kernels of table k (backward_kernels.h; NULL: the
 * reference's). */
void refenc_ffn_block_backward_k(const refenc_backward_kernels *k, double *dx, double *dW1, double *db1,
                                 double *dW2, double *db2, double *pre, double *dpre, const double *dy,
                                 const double *x, const double *hidden, const double *W1, const double *b1,
                                 const double *W2, size_t N, const refenc_config *cfg);

/* The gate and up halves of a fused linear1 W1 (2F, D), b1 (2F) (b1 may be
 * NULL): rows [0, F) are the gate when gate is REFENC_GLU_GATE_FIRST
 * ([gate | up], ModernBERT, Jina), rows [F, 2F) when SECOND ([up | gate],
 * GTE).  Views, no copy. */
void refenc_glu_halves(const double **Wg, const double **bg, const double **Wu, const double **bu,
                       const double *W1, const double *b1, size_t D, size_t F, refenc_glu_gate gate);

/* The configured FFN (ffn_type) on linear1 / linear2 of the layer: the MLP
 * (ffn.h; hidden (N, F)) or the gated FFN (hidden (N, 2F): h, then b).
 * Never fails. */
void refenc_ffn_block_forward(double *y, double *hidden, const double *x, const double *W1,
                              const double *b1, const double *W2, const double *b2, size_t N,
                              const refenc_config *cfg);

/* The same with linear (linear.h: the same doubles) for its linear maps
 * (refenc_layer_work.linear's).  Never fails. */
void refenc_ffn_block_forward_with(double *y, double *hidden, const double *x, const double *W1,
                                   const double *b1, const double *W2, const double *b2, size_t N,
                                   const refenc_config *cfg, refenc_linear_fn *linear);

#endif
