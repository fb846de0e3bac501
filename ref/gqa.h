/* Grouped-query attention's head mapping (docs/families.md, "Grouped-query
 * attention"): Hkv key/value heads serve H query heads, g = H / Hkv each.
 * Key/value head j serves query heads j*g .. j*g + g - 1, as Hugging Face's
 * repeat_kv (torch.repeat_interleave over the head axis): query head h reads
 * key/value head h / g.  Hkv = H is multi-head attention, Hkv = 1 multi-query. */
#ifndef REFENC_GQA_H
#define REFENC_GQA_H

#include <stddef.h>

/* dst: (B, H, L, Dh)   src: (B, Hkv, L, Dh),  Hkv divides H, g = H / Hkv.
 * dst[b,h,:,:] = src[b, h / g, :, :]   (copies: exact).
 * Preconditions: Hkv >= 1, H % Hkv == 0, dst does not alias src.  Never fails. */
void refenc_kv_heads_repeat(double *dst, const double *src, size_t B, size_t H, size_t Hkv,
                            size_t L, size_t Dh);

/* The adjoint of refenc_kv_heads_repeat (the backward of repeat_kv):
 * dst: (B, Hkv, L, Dh)   src: (B, H, L, Dh),  g = H / Hkv.
 * dst[b,j,:,:] = sum_{i=0}^{g-1} src[b, j g + i, :, :], summed in that order
 * (g - 1 additions per element: within gamma_{g-1} of the sum of magnitudes).
 * Preconditions as above.  Never fails. */
void refenc_kv_heads_reduce(double *dst, const double *src, size_t B, size_t H, size_t Hkv,
                            size_t L, size_t Dh);

#endif
