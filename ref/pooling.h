/* Pooled sentence embeddings, out.embedding (docs/families.md, "Pooling"):
 * the final output y (B, L, D) reduced to one vector per item, as
 * sentence-transformers' Pooling module (then its Normalize module) does.
 *
 *   mean:        n_b   = #{l : m[b,l] = 0}          (m: key_padding_mask, 1 = padding)
 *                e[b,:] = (sum_{l : m[b,l] = 0} y[b,l,:]) / n_b
 *                (Pooling's pooling_mode_mean_tokens: sum(y * mask) / sum(mask))
 *   cls:         e[b,:] = y[b,0,:]                  (pooling_mode_cls_token)
 *   last_token:  l*_b  = max{l : m[b,l] = 0}        (pooling_mode_lasttoken)
 *                e[b,:] = y[b,l*_b,:]
 *                the last non-padding position, so right padding (l* = n_b - 1)
 *                and left padding (l* = L - 1) are both right (TEI #648:
 *                Qwen3-Embedding batched with left padding)
 *   normalize:   e[b,:] <- e[b,:] / max(||e[b,:]||_2, 1e-12)
 *                (torch.nn.functional.normalize, p = 2, eps = 1e-12)
 *
 * Preconditions (refenc_input_validate refuses the others): every item has a
 * non-padding token; with cls, token 0 is not padding.  The sum runs over l
 * ascending; the norm is sqrt(sum_d e_d^2), d ascending. */
#ifndef REFENC_POOLING_H
#define REFENC_POOLING_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

/* The minimum norm torch's F.normalize divides by (its eps). */
#define REFENC_POOLING_NORM_EPS 1e-12

/* l*: the last l in [0, L) with mask_b[l] == 0 (mask_b NULL: L - 1);
 * L when every token is padding.  mask_b: (L).  Never fails. */
size_t refenc_pooling_last_token(const uint8_t *mask_b, size_t L);

/* e (B, D) = the pooled y (B, L, D) under mask (B, L), NULL for no padding;
 * normalised when normalize is 1.  mode is not REFENC_POOL_NONE.
 * Preconditions: as above; B, L, D >= 1.  Never fails. */
void refenc_pooling_forward(double *e, const double *y, const uint8_t *mask, size_t B, size_t L, size_t D,
                            refenc_pooling mode, int normalize);

#endif
