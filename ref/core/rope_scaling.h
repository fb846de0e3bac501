/* RoPE scaling: the `rope_scaling` object of a Hugging Face config and its
 * `partial_rotary_factor`, as transformers' modeling_rope_utils.py reads them
 * (docs/rope-scaling.md gives every formula with its source).
 *
 *   type      HF rope_type   what changes
 *   NONE      "default"      nothing: theta_j = base^(-2j/R)
 *   LINEAR    "linear"       theta_j / factor
 *   DYNAMIC   "dynamic"      base grows with the sequence length S (NTK)
 *   YARN      "yarn"         a ramp between theta_j and theta_j / factor, and
 *                            an attention factor on cos and sin
 *   LLAMA3    "llama3"       three wavelength bands (Llama 3.1)
 *   LONGROPE  "longrope"     theta_j / ext_j (short or long factors), and an
 *                            attention factor
 *   NTK       "ntk"          GTE's fixed NTK (not an HF rope_type): base s and
 *                            one more s^(-2/R) at every length, or mixed_b's
 *                            per-pair exp(a (j + 1)^b) (Alibaba-NLP/new-impl)
 * R = rotary_dim = floor(Dh * partial_rotary_factor): the first R coordinates
 * of a head rotate, the other Dh - R pass through. */
#ifndef REFENC_ROPE_SCALING_CONFIG_H
#define REFENC_ROPE_SCALING_CONFIG_H

#include <stddef.h>

#include "status.h"

typedef enum {
    REFENC_ROPE_SCALING_NONE = 0,
    REFENC_ROPE_SCALING_LINEAR,
    REFENC_ROPE_SCALING_DYNAMIC,
    REFENC_ROPE_SCALING_YARN,
    REFENC_ROPE_SCALING_LLAMA3,
    REFENC_ROPE_SCALING_LONGROPE,
    REFENC_ROPE_SCALING_NTK
} refenc_rope_scaling_type;

/* longrope's short/long factors: one per rotated pair, R/2 <= this */
#define REFENC_ROPE_MAX_FACTORS 256

typedef struct {
    refenc_rope_scaling_type type;
    double factor;                    /* s >= 1 (linear, dynamic, yarn, llama3, longrope, ntk) */
    double partial_rotary_factor;     /* (0, 1], default 1                                 */
    size_t max_position_embeddings;   /* HF config.max_position_embeddings: dynamic's L0,  *
                                       * longrope's s = max / original; 0: absent          */
    size_t original_max_position_embeddings; /* yarn, llama3, longrope; 0: absent          */
    double attention_factor;          /* yarn, longrope; 0: derived from the factor        */
    double beta_fast, beta_slow;      /* yarn: 32, 1                                       */
    double mscale, mscale_all_dim;    /* yarn (DeepSeek); 0: absent                        */
    int truncate;                     /* yarn: floor/ceil the ramp's ends (default 1)      */
    double low_freq_factor, high_freq_factor; /* llama3: 1, 4                              */
    size_t n_factors;                 /* longrope: R/2                                     */
    int mixed;                        /* ntk: mixed_b given (mixed NTK), 0: fixed NTK      */
    double mixed_b;                   /* ntk with mixed: the exponent b > 0                */
    double short_factor[REFENC_ROPE_MAX_FACTORS], long_factor[REFENC_ROPE_MAX_FACTORS];
} refenc_rope_scaling;

/* No scaling, partial_rotary_factor 1, and HF's defaults for the optional
 * fields (beta_fast 32, beta_slow 1, truncate, low/high_freq_factor 1, 4). */
void refenc_rope_scaling_default(refenc_rope_scaling *s);

/* R = floor(Dh * partial_rotary_factor) (HF: int(head_dim * partial_rotary_factor)). */
size_t refenc_rope_scaling_rotary_dim(const refenc_rope_scaling *s, size_t Dh);

/* Checks every field for the type, with a head width Dh; rope: whether the
 * config's positional scheme is RoPE (without it, only "no scaling" and a
 * partial_rotary_factor of 1 are valid).  Returns
 * REFENC_EINVAL with "config: rope_scaling.<field> ..." naming the first bad
 * field (a factor < 1 or not finite, a missing or zero length, an odd or
 * too small rotary dim, a wrong count of longrope factors, ...). */
int refenc_rope_scaling_validate(const refenc_rope_scaling *s, int rope, size_t Dh, refenc_error *err);

/* "default", "linear", "dynamic", "yarn", "llama3", "longrope", "ntk"; parse
 * returns REFENC_EINVAL naming `field` and listing the names. */
const char *refenc_rope_scaling_name(refenc_rope_scaling_type t);
int refenc_rope_scaling_parse(refenc_rope_scaling_type *t, const char *name, const char *field,
                              refenc_error *err);

#endif
