/* Local and global layers (docs/families.md, "Local and global layers"):
 * which layers of the stack take the attention window, and which RoPE base
 * each layer rotates with.
 *
 *   n = global_attn_every_n_layers (ModernBERT, Hugging Face's
 *   modeling_modernbert: a layer is global when layer_id % n == 0):
 *       n = 0:   no pattern: every layer is windowed (sliding_window,
 *                local_attention, if set) and rotates with rope_base;
 *       n >= 1:  layer l is global iff l % n == 0 (so layer 0 is global),
 *                local otherwise.  A global layer has no window and the base
 *                global_rope_theta; a local layer has the window(s) and the
 *                base local_rope_theta (either base 0: rope_base).
 *
 *   p = sliding_window_pattern (Gemma 3, Hugging Face's Gemma3TextConfig:
 *       layer i is "sliding_attention" iff (i + 1) % p != 0):
 *       layer l is global iff (l + 1) % p == 0 (so layer p - 1 is the first
 *       global layer), local otherwise; windows and bases as above.  The
 *       local layers rotate unscaled: rope_scaling is the global layers'
 *       (modeling_gemma3: the local rotary embedding is built with
 *       rope_type "default" and rope_local_base_freq).  Under
 *       global_attn_every_n_layers rope_scaling scales every layer.
 *       (partial_rotary_factor is refused with p: it lives in the scaling
 *       that the local layers drop, and Gemma 3 rotates every coordinate.)
 *
 * The bugs on record: llama.cpp gave ModernBERT's layer 0 the local base
 * 10 000 instead of the global 160 000 (ggml-org/llama.cpp#18330: its
 * pattern lacked "dense first"); Gemma 3's linear scaling applied to the
 * sliding layers too (antonellof/ferrox#39, ggml-org/llama.cpp#14367) or to
 * no layer (lablup/mlxcel#1340, Blaizzy/mlx-vlm#1709). */
#ifndef REFENC_LAYER_PATTERN_H
#define REFENC_LAYER_PATTERN_H

#include <stddef.h>

#include "core/config.h"
#include "core/options.h"

/* 1 when layer l takes the window(s) (no pattern, or a local layer), 0 when
 * it is a global layer.  Never fails. */
int refenc_layer_windowed(const refenc_config *cfg, size_t l);

/* The RoPE base of layer l (rope_base, local_rope_theta or
 * global_rope_theta as above).  Never fails. */
double refenc_layer_rope_base(const refenc_config *cfg, size_t l);

/* Layer l's attention and RoPE options from the model's (opt, rope, either
 * may be NULL): the window(s) taken off a global layer, the base set to
 * refenc_layer_rope_base, the scaling taken off a local layer of
 * sliding_window_pattern.  The reference's stack and the low-precision
 * emulation both derive each layer's options here.  Never fails. */
void refenc_layer_options(const refenc_config *cfg, size_t l, refenc_attn_options *opt,
                          refenc_rope_options *rope);

#endif
