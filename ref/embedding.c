/* Token embeddings in double (embedding.h):
 *   forward  x[b,l,:] = table[tokens[b,l],:] sqrt(D)
 *   lookup   x[b,l,:] = table[tokens[b,l],:]
 *   add      y[b,l,:] = x[b,l,:] + table[ids[b,l],:] */
#include "embedding.h"

#include <math.h>
#include <string.h>

void refenc_embedding_forward(double *x, const int64_t *tokens, const double *table,
                              size_t B, size_t L, size_t V, size_t D)
{
    (void)V; /* bounds are a precondition, checked at the boundary */
    const double scale = sqrt((double)D);
    for (size_t bl = 0; bl < B * L; bl++) {
        const double *row = table + (size_t)tokens[bl] * D; /* table[tokens[b,l], :] */
        double *x_bl = x + bl * D;                           /* x[b,l,:] */
        for (size_t d = 0; d < D; d++)
            x_bl[d] = row[d] * scale;
    }
}

void refenc_embedding_lookup(double *x, const int64_t *tokens, const double *table,
                             size_t B, size_t L, size_t V, size_t D)
{
    (void)V; /* bounds are a precondition, checked at the boundary */
    for (size_t bl = 0; bl < B * L; bl++)                    /* x[b,l,:] = table[tokens[b,l], :] */
        memcpy(x + bl * D, table + (size_t)tokens[bl] * D, D * sizeof(double));
}

void refenc_embedding_add(double *y, const double *x, const int64_t *ids, const double *table,
                          size_t B, size_t L, size_t R, size_t D)
{
    (void)R; /* bounds are a precondition, checked at the boundary */
    for (size_t bl = 0; bl < B * L; bl++) {
        const double *row = table + (size_t)ids[bl] * D;  /* table[ids[b,l], :] */
        const double *x_bl = x + bl * D;                   /* x[b,l,:] */
        double *y_bl = y + bl * D;                         /* y[b,l,:] */
        for (size_t d = 0; d < D; d++)
            y_bl[d] = x_bl[d] + row[d];
    }
}
