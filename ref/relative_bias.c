/* T5's relative position bias in double (relative_bias.h):
 *   bias[h, i, j] = table[bucket(pos_j - pos_i) mod nb, h]     table: (nb, H)
 * (mod nb only changes the bug variant's unclamped index). */
#include "relative_bias.h"

#include "relative_bucket.h"

double refenc_relative_bias(const double *table, size_t H, size_t h, int64_t pos_i, int64_t pos_j,
                            size_t num_buckets, size_t max_distance, int unclamped)
{
    const size_t bucket = refenc_relative_bucket(pos_j - pos_i, num_buckets, max_distance, unclamped);
    return table[(bucket % num_buckets) * H + h]; /* table[bucket, h] */
}
