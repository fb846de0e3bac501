/* Token embeddings in double (embedding.h):
 *   forward  x[b,l,:] = table[tokens[b,l],:] s,   s = sqrt(D) (rounded to
 *            the model dtype's significand when the config declares one)
 *   lookup   x[b,l,:] = table[tokens[b,l],:]
 *   add      y[b,l,:] = x[b,l,:] + table[ids[b,l],:] */
#include "embedding.h"

#include <math.h>
#include <string.h>

void refenc_embedding_forward(double *x, const int64_t *tokens, const double *table,
                              size_t B, size_t L, size_t V, size_t D, double s)
{
    (void)V; /* bounds are a precondition, checked at the boundary */
    for (size_t bl = 0; bl < B * L; bl++) {
        const double *row = table + (size_t)tokens[bl] * D; /* table[tokens[b,l], :] */
        double *x_bl = x + bl * D;                           /* x[b,l,:] */
        for (size_t d = 0; d < D; d++)
            x_bl[d] = row[d] * s;
    }
}

/* sqrt(D) = m 2^e with m in [0.5, 1): keep `bits` bits of m, rounding to
 * nearest even (nearbyint in the default rounding mode), exactly in double
 * (m 2^bits < 2^53).  Rounding the correctly rounded double again equals
 * rounding sqrt(D) itself (no double rounding) for bits <= 25: a midpoint
 * M of `bits`-bit numbers in sqrt(D)'s binade [2^(e-1), 2^e) is a multiple
 * of 2^(e-bits-1), so D - M^2 is 0 or at least 2^(2e-2bits-2) and
 * |sqrt(D) - M| = |D - M^2| / (sqrt(D) + M) >= 2^(e-2bits-3), more than
 * double's half-ulp 2^(e-54) there; D - M^2 = 0 makes sqrt(D) = M exact. */
double refenc_embedding_normalizer(size_t D, unsigned bits)
{
    const double s = sqrt((double)D);
    if (bits == 0 || bits >= 53)
        return s;
    int e;
    const double m = frexp(s, &e);
    return ldexp(nearbyint(ldexp(m, (int)bits)), e - (int)bits);
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

/* Backward of the three: scatter-add into the table's rows,
 *   dtable[tokens[b,l],:] += dx[b,l,:] s   (s = sqrt(D), or 1 for the lookup)
 * so a token that occurs k times receives the sum of its k gradients. */
static void scatter_add(double *dtable, const double *dx, const int64_t *ids, size_t BL,
                        size_t D, double scale)
{
    for (size_t bl = 0; bl < BL; bl++) {
        double *row = dtable + (size_t)ids[bl] * D; /* dtable[ids[b,l], :] */
        const double *dx_bl = dx + bl * D;           /* dx[b,l,:] */
        for (size_t d = 0; d < D; d++)
            row[d] += dx_bl[d] * scale;
    }
}

void refenc_embedding_backward(double *dtable, const double *dx, const int64_t *tokens,
                               size_t B, size_t L, size_t V, size_t D)
{
    (void)V;
    scatter_add(dtable, dx, tokens, B * L, D, sqrt((double)D));
}

void refenc_embedding_lookup_backward(double *dtable, const double *dx, const int64_t *tokens,
                                      size_t B, size_t L, size_t V, size_t D)
{
    (void)V;
    scatter_add(dtable, dx, tokens, B * L, D, 1.0);
}

void refenc_embedding_add_backward(double *dtable, const double *dy, const int64_t *ids,
                                   size_t B, size_t L, size_t R, size_t D)
{
    (void)R;
    scatter_add(dtable, dy, ids, B * L, D, 1.0);
}
