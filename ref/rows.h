/* Selected query rows of the last layer (docs/cli.md, input.rows).
 *
 * With rows r_0 < r_1 < ... < r_{R-1} in [0, L), every layer but the last
 * runs on all L positions; the last computes its keys and values at all L
 * positions and everything else (queries, attention, out_proj, residual,
 * FFN, norms) on the R selected rows only.  Each query row sees every key
 * exactly as in the full run (the masks, ALiBi, T5's bias and RoPE read its
 * own position index r_k), so the selected rows of the full run's outputs
 * are the rows run's outputs, value for value.  The selection is one
 * explicit step, a gather: */
#ifndef REFENC_ROWS_H
#define REFENC_ROWS_H

#include <stddef.h>
#include <stdint.h>

/* dst: (B, R, W)   src: (B, L, W)   rows: (R) in [0, L), or NULL (R = L).
 * dst[b, k, :] = src[b, rows[k], :]   (a copy, exact); rows NULL: dst = src.
 * dst must not alias src.  Never fails. */
void refenc_rows_gather(double *dst, const double *src, const int64_t *rows, size_t B, size_t L, size_t R,
                        size_t W);

/* The position index of query row k: rows[k], or k without rows. */
static inline size_t refenc_rows_index(const int64_t *rows, size_t k)
{
    return rows != NULL ? (size_t)rows[k] : k;
}

#endif
