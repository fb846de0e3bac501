#ifndef REFENC_RELATIVE_BIAS_H
#define REFENC_RELATIVE_BIAS_H

#include <stddef.h>
#include <stdint.h>

/* T5's relative position bias (HF transformers models/t5/modeling_t5.py,
 * T5Attention.compute_bias; transformers#13397).
 *
 *   bias[h, i, j] = table[bucket(pos_j - pos_i), h]
 *   table: (nb, H), layers.0.self_attn.relative_attention_bias.weight
 *          (HF: nn.Embedding(num_buckets, n_heads) of block 0)
 *   bucket: relative_bucket.h (key minus query: HF's memory_position -
 *           query_position; keys after the query in the upper half)
 * added to the scores together with the mask, before the softmax
 * (attention.h); the scores themselves are not divided by sqrt(Dh) in T5
 * (query_pre_attn_scalar 1: the divisor is tau, exactly 1 by default).
 * Layer 0 holds the only table and every layer adds the same bias (HF
 * computes position_bias in block 0 and passes it on).
 *
 * unclamped: the bug variant t5_bucket_not_clamped (candle#1312): the bucket
 * without its min(., nb/2 - 1) (relative_bucket.h), which for r >= md is
 * nb/2 (keys before the query) or nb (after it); row (index mod nb) is read,
 * as a gather that wraps would: keys >= md before the query read row nb/2,
 * which no correct offset reads (rel = 0 is bucket 0), keys >= md after it
 * read row 0, the query's own bucket.
 * Exact: a table entry, no rounding.  Never fails. */
double refenc_relative_bias(const double *table, size_t H, size_t h, int64_t pos_i, int64_t pos_j,
                            size_t num_buckets, size_t max_distance, int unclamped);

#endif
