/* Grouped-query attention's head mapping (gqa.h): repeat_kv,
 *   dst[b,h,:,:] = src[b, h / g, :, :],
 * and its adjoint, the sum over each group (the backward of the copy):
 *   dsrc[b,j,:,:] = sum_{i<g} ddst[b, j g + i, :, :]. */
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

void refenc_kv_heads_reduce(double *dst, const double *src, size_t B, size_t H, size_t Hkv,
                            size_t L, size_t Dh)
{
    const size_t g = H / Hkv, n = L * Dh;
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < Hkv; j++) {
            double *d = dst + (b * Hkv + j) * n;                   /* dst[b,j,:,:] */
            memcpy(d, src + (b * H + j * g) * n, n * sizeof(double)); /* query head j g */
            for (size_t i = 1; i < g; i++) {                       /* then j g + 1 .. in order */
                const double *s = src + (b * H + j * g + i) * n;
                for (size_t k = 0; k < n; k++)
                    d[k] += s[k];
            }
        }
}
