#ifndef REFENC_LEARNED_PE_H
#define REFENC_LEARNED_PE_H

#include <stddef.h>
#include <stdint.h>

/* Learned positional encoding: a (P, D) table of parameters added to the
 * input, as BERT's position embeddings.
 * y, x: (B, L, D)   pos: (L), each in [0, P)   table: (P, D).
 * y[b,l,:] = x[b,l,:] + table[pos[l], :]   (y may alias x); one rounding each.
 * Precondition: every position in [0, P) (refenc_encoder_forward checks it).
 * Never fails. */
void refenc_learned_pe_forward(double *y, const double *x, const int64_t *pos,
                               const double *table, size_t B, size_t L, size_t P, size_t D);

/* Backward (docs/gradients.md): the gradient of the table, a scatter-add
 * over positions, summed over the batch, accumulated (+=):
 *   dtable[pos[l],:] += sum_b dy[b,l,:]      (b upward)
 * A position that occurs twice in pos receives both sums.  The input's
 * gradient is dx = dy (the identity: nothing to compute).
 * dtable: (P, D)   dy: (B, L, D)   pos: (L).  Never fails. */
void refenc_learned_pe_backward(double *dtable, const double *dy, const int64_t *pos,
                                size_t B, size_t L, size_t P, size_t D);

#endif
