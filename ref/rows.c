/* The row selection of the last layer (rows.h):
 *   dst[b, k, :] = src[b, rows[k], :]
 * a copy of whole rows, so every selected value is bit for bit the full
 * run's. */
#include "rows.h"

#include <string.h>

void refenc_rows_gather(double *dst, const double *src, const int64_t *rows, size_t B, size_t L, size_t R,
                        size_t W)
{
    for (size_t b = 0; b < B; b++)
        for (size_t k = 0; k < R; k++)
            memcpy(dst + (b * R + k) * W,                             /* dst[b,k,:]       */
                   src + (b * L + refenc_rows_index(rows, k)) * W,    /* src[b,rows[k],:] */
                   W * sizeof *dst);
}
