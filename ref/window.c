/* Attention windows in double's reference (window.h). */
#include "window.h"

int refenc_window_excludes(size_t sliding_window, size_t local_attention, size_t i, size_t j)
{
    const size_t d = i > j ? i - j : j - i; /* |i - j| */
    /* causal window: visible iff i - w < j, i.e. i - j <= w - 1 (j > i is
     * the causal mask's); d >= w also excludes j >= i + w, which causal
     * already excludes */
    if (sliding_window > 0 && d >= sliding_window)
        return 1;
    /* symmetric window: visible iff |i - j| <= w // 2 (integer division) */
    if (local_attention > 0 && d > local_attention / 2)
        return 1;
    return 0;
}
