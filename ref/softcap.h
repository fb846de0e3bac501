/* Attention-logit soft-capping (Gemma 2; docs/families.md, "Gemma's
 * attention"): each score s, after the scaling and before the masks and the
 * softmax, becomes
 *     y = cap * tanh(s / cap),          cap > 0,
 * which is s to first order for |s| << cap and tends to +-cap for |s| >> cap.
 * Hugging Face's Gemma2Attention computes it as three tensor ops (divide,
 * tanh, multiply) and then adds the mask; refenc does the same in double.
 *   dy/ds = 1 - tanh^2(s / cap)   in (0, 1]  (no backward yet: docs/gradients.md)
 * Error (docs/error-bounds.md, "Soft-capping"): s / cap one rounding, tanh
 * within glibc's 2 ulps, the product one rounding; as |dy/ds| <= 1 the
 * result is within |ds| + u|s| + 5u|y| of the exact cap tanh(s / cap) of the
 * exact s when the computed s is off by ds. */
#ifndef REFENC_SOFTCAP_H
#define REFENC_SOFTCAP_H

#include <stddef.h>

/* cap tanh(s / cap), rounded as three operations (above).  s = +-inf gives
 * +-cap; NaN stays NaN.  Preconditions: cap > 0 finite.  Never fails. */
double refenc_softcap(double s, double cap);

#endif
