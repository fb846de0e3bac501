/* The options of attention that are not tensors of the layer: masks, ALiBi,
 * temperature, the score scale and softcap, RoPE.  Shared by the reference and the oracle. */
#ifndef REFENC_OPTIONS_H
#define REFENC_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* What a scaled dot-product attention sees besides q, k and v. */
typedef struct {
    const uint8_t *key_padding_mask; /* (B, L), 1 = padding: never attended; NULL: none */
    int causal;                      /* 1: query i sees keys j <= i only                 */
    const double *attn_mask;         /* (L, L) additive, may hold -inf; NULL: none       */
    const double *alibi_slopes;      /* (H) ALiBi slopes; NULL: no ALiBi                 */
    const int64_t *positions;        /* (L) positions for ALiBi; required with slopes    */
    double temperature;              /* tau > 0                                          */
    refenc_mask_value mask_value;    /* the score of a masked key: -inf (0, the default  *
                                      * of a zeroed struct) or -DBL_MAX (attention.h)    */
    double score_scalar;             /* S > 0: scores divided by sqrt(S) tau (Gemma's     *
                                      * query_pre_attn_scalar); 0: S = Dh                */
    double softcap;                  /* cap > 0: s <- cap tanh(s / cap) after the scale  *
                                      * (softcap.h); 0: none                             */
    size_t sliding_window;           /* w >= 1: key j seen iff i - w < j (window.h); 0: off */
    size_t local_attention;          /* w >= 1: key j seen iff |i - j| <= w / 2; 0: off */
    const double *relative_bias;     /* (nb, H) T5's table (relative_bias.h), layer 0's *
                                      * for every layer; NULL: none; needs positions    */
    size_t relative_num_buckets;     /* nb (relative_attention_num_buckets)             */
    size_t relative_max_distance;    /* relative_attention_max_distance                 */
    int relative_unclamped;          /* the bug variant t5_bucket_not_clamped; 0        */
} refenc_attn_options;

/* The options every attention of a model uses: the config's mask kind,
 * (relative_bias, T5's table, is the caller's to set from layer 0's params)
 * temperature, score scale, soft-cap and windows, with the inputs' masks
 * and positions; alibi_slopes (H) is taken only when the config's scheme is
 * ALiBi.  The reference's stack, its component runs and the low-precision
 * emulation all build their options here.  Never fails. */
refenc_attn_options refenc_attn_options_of(const refenc_config *cfg, const uint8_t *key_padding_mask,
                                           const double *attn_mask, const int64_t *positions,
                                           const double *alibi_slopes);

/* RoPE inside multi-head attention: applied to q and k of every head. */
typedef struct {
    refenc_rope_layout layout;
    double base;
    const int64_t *positions; /* (L) */
    const refenc_rope_scaling *scaling; /* NULL: unscaled (rope.h, rope_scaling.h) */
} refenc_rope_options;

#endif
