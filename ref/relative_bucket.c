/* T5's bidirectional relative position bucket (relative_bucket.h):
 *   bucket(rel) = (rel > 0 ? half : 0) + m(|rel|),  half = nb/2, me = half/2, n = half - me
 *   m(r) = r  (r < me);   m(r) = min(me + floor(n log(r/me) / log(md/me)), half - 1)
 * with floor(n log(r/me)/log(md/me)) >= t  <=>  r^n >= md^t me^(n-t), exact
 * in integers (the proof is in the header). */
#include "relative_bucket.h"

/* a^k; no overflow where it is used: every power is at most md^n < 2^64
 * (r < md; md^t me^(n-t) <= md^n), which the config's validation requires */
static uint64_t ipow(uint64_t a, size_t k)
{
    uint64_t p = 1;
    for (size_t i = 0; i < k; i++)
        p *= a;
    return p;
}

/* The largest t in [0, n-1] with r^n >= md^t me^(n-t), me <= r < md: t = 0
 * holds (r >= me) and t = n does not (r < md), so the loop stops by n - 1. */
static size_t log_steps(uint64_t r, uint64_t me, uint64_t md, size_t n)
{
    const uint64_t rn = ipow(r, n);
    size_t t = 0;
    while (rn >= ipow(md, t + 1) * ipow(me, n - t - 1))
        t++;
    return t;
}

size_t refenc_relative_bucket(int64_t rel, size_t num_buckets, size_t max_distance, int unclamped)
{
    const size_t half = num_buckets / 2, me = half / 2, n = half - me;
    const uint64_t r = rel < 0 ? (uint64_t)0 - (uint64_t)rel : (uint64_t)rel;
    const size_t sign = rel > 0 ? half : 0;
    if (r < me)
        return sign + (size_t)r;
    if (r < max_distance)
        return sign + me + log_steps(r, me, max_distance, n);
    if (!unclamped)
        return sign + half - 1;
    /* unclamped (the variant): floor(n log(r/me)/log(md/me)) = n while
     * r < md (md/me)^(1/n) (T5: r < 181), one past the clamp */
    return sign + half;
}
