#ifndef REFENC_RELATIVE_BUCKET_H
#define REFENC_RELATIVE_BUCKET_H

#include <stddef.h>
#include <stdint.h>

/* T5's bidirectional relative position buckets (Raffel et al. 2020; HF
 * transformers models/t5/modeling_t5.py, T5Attention._relative_position_bucket
 * with bidirectional=True, the encoder's).
 *
 * rel = pos_j - pos_i (key minus query: HF's memory_position -
 * query_position).  With nb = num_buckets, half = nb / 2 buckets per sign,
 * me = half / 2 (max_exact), n = half - me, md = max_distance, r = |rel|:
 *   bucket(rel) = (rel > 0 ? half : 0) + m(r)
 *   m(r) = r                                           r < me
 *   m(r) = min(me + floor(n log(r / me) / log(md / me)), half - 1)   r >= me
 * T5: nb 32, md 128: half 16, me 8, n 8.
 *
 * Exactness.  At r = 16, 32, 64 (T5) the argument of floor is exactly 2, 4,
 * 6, so a rounded log can land on either side.  The reference computes the
 * mathematical floor with integers instead: for me <= r < md and t >= 0,
 *   floor(n log(r/me) / log(md/me)) >= t
 *     <=> n log(r/me) >= t log(md/me)           (log(md/me) > 0: md > me)
 *     <=> (r/me)^n >= (md/me)^t                 (exp increasing)
 *     <=> r^n >= md^t me^(n-t)                  (times me^n > 0)
 * so m(r) = me + the largest t in [0, n-1] with r^n >= md^t me^(n-t); for
 * r >= md, t = n already holds and the clamp gives half - 1.  Both sides are
 * at most md^n (r < md; md^t me^(n-t) <= md^n): exact in uint64_t when
 * md^n < 2^64, which the config's validation requires (T5: 128^8 = 2^56). */

/* The bucket of rel as above, in [0, num_buckets).  unclamped != 0 is the
 * bug variant t5_bucket_not_clamped (candle#1312): the min(., half - 1) left
 * out, so that r >= md gets m(r) = me + n = half, one past the sign's last
 * bucket.  That is the unclamped index for md <= r < md (md/me)^(1/n) (T5:
 * 128 .. 180); refenc's variant keeps it for every larger r too (the golden
 * cases stay below), so the index is exact and at most num_buckets
 * (relative_bias.h reads row index mod nb).
 * Preconditions: num_buckets even, >= 4; max_distance > me;
 * max_distance^(half - me) < 2^64.  Never fails. */
size_t refenc_relative_bucket(int64_t rel, size_t num_buckets, size_t max_distance, int unclamped);

#endif
