/* Pooled sentence embeddings in double's reference (pooling.h). */
#include "pooling.h"

#include <math.h>
#include <string.h>

size_t refenc_pooling_last_token(const uint8_t *mask_b, size_t L)
{
    if (mask_b == NULL)
        return L - 1;
    for (size_t l = L; l-- > 0;)
        if (mask_b[l] == 0)
            return l;
    return L;
}

/* e_b (D) = sum_{l : m_b[l] = 0} y_b[l,:] / n_b,  y_b (L, D) */
static void mean_row(double *e_b, const double *y_b, const uint8_t *m_b, size_t L, size_t D)
{
    size_t n = 0;
    memset(e_b, 0, D * sizeof *e_b);
    for (size_t l = 0; l < L; l++) {
        if (m_b != NULL && m_b[l])
            continue;
        const double *y_bl = y_b + l * D; /* y[b,l,:] */
        for (size_t d = 0; d < D; d++)
            e_b[d] += y_bl[d];
        n++;
    }
    for (size_t d = 0; d < D; d++)
        e_b[d] /= (double)n;
}

/* e_b (D) <- e_b / max(||e_b||_2, eps) */
static void normalize_row(double *e_b, size_t D)
{
    double ss = 0.0;
    for (size_t d = 0; d < D; d++)
        ss += e_b[d] * e_b[d];
    const double norm = fmax(sqrt(ss), REFENC_POOLING_NORM_EPS);
    for (size_t d = 0; d < D; d++)
        e_b[d] /= norm;
}

void refenc_pooling_forward(double *e, const double *y, const uint8_t *mask, size_t B, size_t L, size_t D,
                            refenc_pooling mode, int normalize)
{
    for (size_t b = 0; b < B; b++) {
        double *e_b = e + b * D;             /* e[b,:]   (D)    */
        const double *y_b = y + b * L * D;   /* y[b,:,:] (L, D) */
        const uint8_t *m_b = mask != NULL ? mask + b * L : NULL;
        if (mode == REFENC_POOL_MEAN)
            mean_row(e_b, y_b, m_b, L, D);
        else if (mode == REFENC_POOL_CLS)
            memcpy(e_b, y_b, D * sizeof *e_b);
        else
            memcpy(e_b, y_b + refenc_pooling_last_token(m_b, L) * D, D * sizeof *e_b);
        if (normalize)
            normalize_row(e_b, D);
    }
}
