/* The reference's backward evaluated in emulated low precision: what a
 * straightforward float32, float16 or bfloat16 backward of the same formulas
 * computes.  `refenc certify` measures this baseline's error against a
 * gradient golden to set the budget of a low-precision gradient (budget.h,
 * docs/gradients.md "Budgets of F32, F16 and BF16 gradients").
 *
 * The model (the forward's emulation, emulate.h, carried into the backward):
 *   - the forward is the emulation's (every op's output in the value
 *     format), recomputed layer by layer as refenc_encoder_backward
 *     recomputes it, so the backward reads the activations an
 *     implementation in that dtype stores;
 *   - every tensor the backward stores is rounded to the value format: dx
 *     of each kernel, the gradient between layers, attention's dP and dS,
 *     dq, dk, dv, the residual sums, every parameter gradient;
 *   - inside a kernel, every sum and every step is kept in the acc format
 *     (float32): a dot product's partial sums, LayerNorm's statistics,
 *     mean(g) and mean(g x^), attention's row term D_i, a derivative
 *     act'(a), and each parameter gradient's sum over the B L tokens, which
 *     is rounded to the value format once, as a GEMM dW = dy^T x or a
 *     column sum with float32 accumulation stores it.
 * With value = acc = F64 every rounding is the identity.  The configs are
 * those of the gradient goldens, every block the oracle's backward takes
 * (LayerNorm or RMSNorm, the MLP or the gated FFN, multi-head or
 * grouped-query attention of any head width, RoPE scaled or partial; the
 * others are refused with REFENC_EINVAL).  The knobs reverse_sums, fused and
 * float_functions are not modelled in the backward (its kernels are fused:
 * one rounding per stored tensor).
 *
 * Per parameter gradient it also returns the magnitude of its sum over the
 * tokens, k |t_n| summed, t_n the token's term (dy_n x_n of a weight, dy_n
 * x^_n of a LayerNorm gain, dy_n of a bias or a table row), k the number of
 * stored tensors the term is formed from (2 for a product, 1 for a bias or a
 * table): the growth term of the budget (budget.h). */
#ifndef REFENC_EMULATE_BACKWARD_H
#define REFENC_EMULATE_BACKWARD_H

#include "../core/case.h"
#include "../core/status.h"
#include "precision.h"

/* Called once per gradient, under the golden's name without "grad."
 * ("layers.1.output", "embed", "x", or a parameter's): g its values, mag
 * the magnitudes above (NULL for a gradient that is not a parameter's), n
 * values.  The data is valid only during the call. */
typedef struct {
    void (*fn)(void *ctx, const char *name, const double *g, const double *mag, size_t n);
    void *ctx;
} refenc_grad_sink;

/* The config key of a convention the emulated backward does not model yet
 * (skip_first_prenorm, the rounded embedding normaliser: the oracle's
 * backward refuses them too), or NULL when it models them all.  Certify
 * reports the F32, F16 and BF16 gradients of such a case not certified:
 * it has no baseline for their budgets. */
const char *refenc_emulation_backward_unsupported(const refenc_config *cfg);

/* Runs the backward of the case c (its inputs and parameters already in the
 * value format: refenc_emulation_round_case) at the upstream gradient dY
 * (B, L, D) (rounded to the value format here) with the roundings of e.
 * Errors: REFENC_EINVAL (a config the gradient goldens do not hold: the
 *   message names the key; or the case's inputs do not validate),
 *   REFENC_ELIMIT, REFENC_ENOMEM. */
int refenc_emulation_backward_case(const refenc_case *c, const double *dY, const refenc_emulation *e,
                                   const refenc_grad_sink *sink, refenc_error *err);

#endif
