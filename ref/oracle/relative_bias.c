/* T5's relative position bias in the oracle (relative_bias.h), written apart
 * from the reference's relative_bucket.c (the oracle stays an independent
 * implementation):
 *   bias[h, i, j] = table[bucket(pos_j - pos_i), h]
 *   bucket(rel) = (rel > 0 ? half : 0) + m(|rel|),  half = nb/2, me = half/2, n = half - me
 *   m(r) = r (r < me);  m(r) = me + #{t in 1 .. n-1 : r >= me (md/me)^(t/n)}  (me <= r < md);
 *   m(r) = half - 1 (r >= md; half under the bug variant t5_bucket_not_clamped)
 * The count is floor(n log(r/me) / log(md/me)) below n: each threshold test
 * r >= me (md/me)^(t/n) is r^n >= md^t me^(n-t), compared as integers that
 * MPFR holds exactly (a precision of 64 n + 64 bits holds any power of n
 * factors below 2^64; the config bounds md^n below 2^64).  The entry is
 * a double of the table, added to the score with one rounding at the
 * working precision. */
#include "internal.h"

#include <stdint.h>

/* 1 when r^n >= md^t me^(n-t), in exact integers */
static int past_threshold(uint64_t r, uint64_t me, uint64_t md, unsigned long n, unsigned long t)
{
    mpfr_t a, b, c;
    const mpfr_prec_t p = 64 * (mpfr_prec_t)n + 64;
    mpfr_inits2(p, a, b, c, (mpfr_ptr)0);
    mpfr_ui_pow_ui(a, r, n, MPFR_RNDN);      /* exact: at most 64 n bits */
    mpfr_ui_pow_ui(b, md, t, MPFR_RNDN);
    mpfr_ui_pow_ui(c, me, n - t, MPFR_RNDN);
    mpfr_mul(b, b, c, MPFR_RNDN);            /* exact: at most 64 n bits */
    const int past = mpfr_cmp(a, b) >= 0;
    mpfr_clears(a, b, c, (mpfr_ptr)0);
    return past;
}

size_t refenc_mpk_relative_bucket(int64_t rel, size_t num_buckets, size_t max_distance, int unclamped)
{
    const size_t half = num_buckets / 2, me = half / 2, n = half - me;
    const uint64_t r = rel >= 0 ? (uint64_t)rel : (uint64_t)(-(rel + 1)) + 1;
    const size_t offset = rel > 0 ? half : 0;
    if (r < me)
        return offset + (size_t)r;
    if (r >= max_distance)
        return offset + (unclamped ? half : half - 1);
    size_t m = me;
    for (size_t t = 1; t < n; t++)
        m += (size_t)past_threshold(r, me, max_distance, n, t);
    return offset + m;
}

void refenc_mpk_relative_bias_add(mpfr_ptr s, const refenc_mp_attn_options *opt, size_t h, size_t i, size_t j)
{
    const size_t nb = opt->relative_num_buckets;
    const size_t bucket = refenc_mpk_relative_bucket(opt->positions[j] - opt->positions[i], nb,
                                                     opt->relative_max_distance, opt->relative_unclamped);
    /* table[bucket mod nb, h]: rows relative_stride apart */
    mpfr_add_d(s, s, opt->relative_bias[(bucket % nb) * opt->relative_stride + h], MPFR_RNDN);
}
