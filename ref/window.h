/* Attention windows (docs/families.md, "Attention windows"): which keys j a
 * query i may see, by their indices in the sequence (not their position
 * ids: Hugging Face builds both masks from cache/sequence indices).
 *
 *   sliding_window w >= 1 (Mistral, Qwen2, Gemma 2/3; Hugging Face's
 *   masking_utils.sliding_window_overlay: kv_idx > q_idx - w), causal only:
 *       key j visible  iff  i - w < j  (and j <= i by the causal mask),
 *       so w keys including the query itself: i-w+1 .. i.
 *   local_attention w >= 1 (ModernBERT, symmetric, bidirectional:
 *   window_mask = |i - j| <= local_attention // 2):
 *       key j visible  iff  |i - j| <= floor(w / 2),
 *       so 2 floor(w/2) + 1 keys away from the edges (129 for w = 128).
 * 0 means no window.  Both may be set: a key must lie in both.
 *
 * The off-by-one bugs on record are each one key more (or less) at the
 * window's edge: FlashAttention given window_size (w, w) attends 2w+1 keys
 * (transformers#39408, #40163), the Mistral mask diagonal needed -w+1
 * (transformers#26792), a window of 128 attended 129 keys (mlx-lm#390),
 * SGLang's exclusive rule against HF's inclusive one (sglang#26147); the
 * window also got lost before the kernel (transformers#30127,
 * semantic-router#3406).  The unit tests check both edges (i - j = w - 1 and
 * w; |i - j| = w/2 and w/2 + 1). */
#ifndef REFENC_WINDOW_H
#define REFENC_WINDOW_H

#include <stddef.h>

/* 1 when key j lies outside query i's window(s), 0 inside (or no window).
 * Never fails. */
int refenc_window_excludes(size_t sliding_window, size_t local_attention, size_t i, size_t j);

#endif
