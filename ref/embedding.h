#ifndef REFENC_EMBEDDING_H
#define REFENC_EMBEDDING_H

#include <stddef.h>
#include <stdint.h>

/* Token embedding scaled by s = sqrt(D), as in "Attention Is All You Need"
 * 3.4, or by sqrt(D) rounded to a model dtype (refenc_embedding_normalizer).
 * x: (B, L, D)   tokens: (B, L), each in [0, V)   table: (V, D).
 * x[b,l,:] = table[tokens[b,l], :] * s
 * The padding token is looked up like any other: its row is used as stored
 * (PyTorch's nn.Embedding does the same; the padding row is zero only
 * because initialisation makes it so).  s is sqrt(D) correctly rounded to
 * double (or the declared rounded value, exact), and each product is
 * rounded once: relative error <= (1 + u)^2 - 1 = 2u + u^2 <= gamma_2.
 * Precondition: every token in [0, V) (refenc_encoder_forward checks it).
 * Never fails. */
void refenc_embedding_forward(double *x, const int64_t *tokens, const double *table,
                              size_t B, size_t L, size_t V, size_t D, double s);

/* The embedding's scale s: sqrt(D) rounded to nearest (ties to even) to
 * `bits` significant bits, the significand of the dtype Gemma's normaliser
 * is formed in: Hugging Face's GemmaModel multiplies by
 * torch.tensor(hidden_size ** 0.5, dtype=the model's dtype), so sqrt(3072)
 * = 55.4256... is 55.5 in bfloat16 (8 bits; transformers#29402).  bits 0 or
 * 53: sqrt(D) as the correctly rounded double.  sqrt(D) for D <= 2^20 is in
 * [1, 1024], inside every dtype's normal range.  Never fails. */
double refenc_embedding_normalizer(size_t D, unsigned bits);

/* Token embedding without the scale (BERT, GPT-2's wte, CLIP).
 * x: (B, L, D)   tokens: (B, L), each in [0, V)   table: (V, D).
 * x[b,l,:] = table[tokens[b,l], :]    (a copy: exact)
 * Precondition: every token in [0, V).  Never fails. */
void refenc_embedding_lookup(double *x, const int64_t *tokens, const double *table,
                             size_t B, size_t L, size_t V, size_t D);

/* Adds the rows of a table picked per position: token-type (segment)
 * embeddings, and learned positions that differ between batch items
 * (RoBERTa's rule, position_ids.h).
 * y, x: (B, L, D)   ids: (B, L), each in [0, R)   table: (R, D).
 * y[b,l,:] = x[b,l,:] + table[ids[b,l], :]    (one rounding per element:
 * relative error <= u).  y may alias x.
 * Precondition: every id in [0, R).  Never fails. */
void refenc_embedding_add(double *y, const double *x, const int64_t *ids, const double *table,
                          size_t B, size_t L, size_t R, size_t D);

/* Backwards (docs/gradients.md): scatter-add of the gradient into the
 * table's rows, accumulated (+=), b and l upward:
 *   refenc_embedding_backward          dtable[tokens[b,l],:] += dx[b,l,:] * sqrt(D)
 *   refenc_embedding_lookup_backward   dtable[tokens[b,l],:] += dx[b,l,:]
 *   refenc_embedding_add_backward      dtable[ids[b,l],:]    += dy[b,l,:]
 *                                      (and dx = dy: the identity, nothing to compute)
 * A token that occurs k times receives the sum of its k gradients; rows of
 * tokens that do not occur are unchanged.  dtable: (V, D) or (R, D);
 * dx, dy: (B, L, D).  Preconditions as the forwards.  Never fail. */
void refenc_embedding_backward(double *dtable, const double *dx, const int64_t *tokens,
                               size_t B, size_t L, size_t V, size_t D);
void refenc_embedding_lookup_backward(double *dtable, const double *dx, const int64_t *tokens,
                                      size_t B, size_t L, size_t V, size_t D);
void refenc_embedding_add_backward(double *dtable, const double *dy, const int64_t *ids,
                                   size_t B, size_t L, size_t R, size_t D);

#endif
