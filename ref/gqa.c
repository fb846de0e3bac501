/* Grouped-query attention's head mapping (gqa.h): repeat_kv. */
#include "gqa.h"

#include <string.h>

void refenc_kv_heads_repeat(double *dst, const double *src, size_t B, size_t H, size_t Hkv,
                            size_t L, size_t Dh)
{
    const size_t g = H / Hkv; /* query heads per key/value head */
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            const double *s = src + (b * Hkv + h / g) * L * Dh; /* src[b, h/g, :, :] */
            memcpy(dst + (b * H + h) * L * Dh, s, L * Dh * sizeof(double));
        }
}
