/* Learned positional encoding in double (learned_pe.h): y = x + table[pos]. */
#include "learned_pe.h"

void refenc_learned_pe_forward(double *y, const double *x, const int64_t *pos,
                               const double *table, size_t B, size_t L, size_t P, size_t D)
{
    (void)P; /* bounds are a precondition, checked at the boundary */
    for (size_t b = 0; b < B; b++) {
        for (size_t l = 0; l < L; l++) {
            const double *row = table + (size_t)pos[l] * D; /* table[pos[l], :] */
            const double *x_bl = x + (b * L + l) * D;      /* x[b,l,:] */
            double *y_bl = y + (b * L + l) * D;            /* y[b,l,:] */
            for (size_t d = 0; d < D; d++)
                y_bl[d] = x_bl[d] + row[d];
        }
    }
}

/* Backward: dtable[pos[l],:] += sum_b dy[b,l,:]  (and dx = dy). */
void refenc_learned_pe_backward(double *dtable, const double *dy, const int64_t *pos,
                                size_t B, size_t L, size_t P, size_t D)
{
    (void)P;
    for (size_t b = 0; b < B; b++) {
        for (size_t l = 0; l < L; l++) {
            double *row = dtable + (size_t)pos[l] * D;      /* dtable[pos[l], :] */
            const double *dy_bl = dy + (b * L + l) * D;     /* dy[b,l,:] */
            for (size_t d = 0; d < D; d++)
                row[d] += dy_bl[d];
        }
    }
}
