/* ALiBi slopes and bias in double (alibi.h): with C the largest power of two <= H,
 *   m_h     = 2^(-8 (h+1) / C),         h < C
 *   m_{C+k} = 2^(-8 (2k+1) / (2C)),     k < H - C
 *   bias[h,i,j] = -m_h |pos_i - pos_j| */
#include "alibi.h"

#include <math.h>

void refenc_alibi_slopes(double *slopes, size_t H)
{
    size_t C = 1; /* the largest power of two <= H */
    while (C * 2 <= H)
        C *= 2;
    /* the first C heads: 2^(-8 (h+1) / C) */
    for (size_t h = 0; h < C; h++)
        slopes[h] = exp2(-8.0 * (double)(h + 1) / (double)C);
    /* the rest: the odd-numbered slopes of the sequence for 2C heads,
     * 2^(-8 (2k+1) / (2C)) */
    for (size_t k = 0; C + k < H; k++)
        slopes[C + k] = exp2(-8.0 * (double)(2 * k + 1) / (double)(2 * C));
}

double refenc_alibi_bias(double slope, int64_t pos_i, int64_t pos_j)
{
    const int64_t d = pos_i > pos_j ? pos_i - pos_j : pos_j - pos_i; /* |pos_i - pos_j| */
    return -slope * (double)d;
}
