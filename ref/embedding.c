/* Token embedding in double (embedding.h): x[b,l,:] = table[tokens[b,l],:] sqrt(D). */
#include "embedding.h"

#include <math.h>

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
