/* Known bug variants: the mistakes Transformer implementations make that
 * refenc can recognise.  Each is a different function from the encoder the
 * golden cases specify; the golden generator stores the oracle's outputs under
 * the variants a case targets (alt.<variant>.<output>), and `refenc certify`
 * reports the variant a failing implementation matches, with its explanation
 * and fix.  docs/certify.md carries the same table.
 *
 * Most variants are the same computation on a transformed case (another eps,
 * another activation, a scaled or transposed table, other token types or
 * positions); two change the computation itself and are flags for the
 * engine (refenc_variant_hooks).  A LayerNorm variant (eps, variance) acts
 * on every LayerNorm, the embedding LayerNorm included, as a bug in a
 * shared LayerNorm would. */
#ifndef REFENC_VARIANTS_H
#define REFENC_VARIANTS_H

#include "../core/case.h"

typedef enum {
    REFENC_VAR_LAYERNORM_EPS_X10 = 0,
    REFENC_VAR_LAYERNORM_EPS_DIV10,
    REFENC_VAR_UNBIASED_VARIANCE,
    REFENC_VAR_GELU_TANH_FOR_EXACT,
    REFENC_VAR_GELU_EXACT_FOR_TANH,
    REFENC_VAR_ROPE_LAYOUT_SWAPPED,
    REFENC_VAR_ROPE_BASE_WRONG,
    REFENC_VAR_ATTENTION_SCALE_SQRT_D,
    REFENC_VAR_ATTENTION_UNSCALED,
    REFENC_VAR_MISSING_FINAL_NORM,
    REFENC_VAR_EMBEDDING_UNSCALED,
    REFENC_VAR_ALIBI_SLOPES_POW2,
    REFENC_VAR_PADDING_MASK_INVERTED,
    REFENC_VAR_PRE_POST_SWAPPED,
    REFENC_VAR_HEADS_MERGED_WITHOUT_TRANSPOSE,
    /* the encoder families' (docs/families.md) */
    REFENC_VAR_EPS_1E5_FOR_1E12,
    REFENC_VAR_EPS_1E12_FOR_1E5,
    REFENC_VAR_EMBEDDING_NORM_MISSING,
    REFENC_VAR_TOKEN_TYPES_IGNORED,
    REFENC_VAR_ROBERTA_POSITIONS_FROM_ZERO,
    REFENC_VAR_CONV1D_NOT_TRANSPOSED,
    REFENC_VAR_QUICK_GELU_FOR_GELU,
    REFENC_VAR_GELU_FOR_QUICK_GELU,
    REFENC_VAR_EMBEDDING_SCALED,
    /* the modern blocks' (RMSNorm, gated FFN; docs/certify.md) */
    REFENC_VAR_GLU_HALVES_SWAPPED,
    REFENC_VAR_RMSNORM_OFFSET_MISSING,
    REFENC_VAR_RMSNORM_OFFSET_DOUBLED,
    /* RoPE scaling (docs/rope-scaling.md) */
    REFENC_VAR_LLAMA3_SCALING_IGNORED,
    REFENC_VAR_YARN_FACTOR_SQUARED,
    REFENC_VAR_YARN_FACTOR_DROPPED,
    REFENC_VAR_DYNAMIC_NTK_FROM_MAX_POSITIONS,
    REFENC_VAR_NTK_SCALING_IGNORED,
    /* grouped-query attention (docs/families.md) */
    REFENC_VAR_GQA_TILED,
    /* Gemma 2/3's attention (docs/families.md) */
    REFENC_VAR_SOFTCAP_MISSING,
    REFENC_VAR_QUERY_SCALE_HEAD_DIM,
    REFENC_VAR_SOFTCAP_AFTER_MASK,
    /* attention windows (window.h, docs/families.md) */
    REFENC_VAR_WINDOW_OFF_BY_ONE,
    REFENC_VAR_WINDOW_IGNORED,
    /* local and global layers (layer_pattern.h, docs/families.md) */
    REFENC_VAR_LOCAL_BASE_ON_GLOBAL_LAYER0,
    REFENC_VAR_ROPE_SCALING_ON_LOCAL_LAYERS,
    REFENC_VAR_GLOBAL_ROPE_SCALING_IGNORED,
    /* Gemma's embedding normaliser (embedding.h, docs/families.md) */
    REFENC_VAR_EMBEDDING_NORMALIZER_UNROUNDED,
    /* Qwen's attention (qk_norm.h, docs/families.md) */
    REFENC_VAR_QKV_BIAS_DROPPED,
    REFENC_VAR_QK_NORM_AFTER_ROPE,
    REFENC_VAR_QK_NORM_OVER_ALL_HEADS,
    /* pooled sentence embeddings (pooling.h, docs/families.md) */
    REFENC_VAR_MEAN_COUNTS_PADDING,
    REFENC_VAR_LAST_TOKEN_IGNORES_PADDING,
    REFENC_VAR_POOLING_NOT_NORMALIZED,
    /* ModernBERT's first layer (params.h: skip_first_prenorm) */
    REFENC_VAR_FIRST_PRENORM_APPLIED,
    /* Gemma 2/3's norms of the sublayers' outputs (sandwich_norm) */
    REFENC_VAR_SANDWICH_NORMS_MISSING,
    REFENC_VAR_POST_ATTENTION_NORM_AS_PRE_FFN,
    /* decoder blocks run as bidirectional encoders (docs/families.md) */
    REFENC_VAR_BIDIRECTIONAL_RUN_CAUSALLY,
    /* T5's relative position bias (relative_bias.h, docs/families.md) */
    REFENC_VAR_T5_SCORES_SCALED,
    REFENC_VAR_T5_BUCKET_NOT_CLAMPED,
    REFENC_VAR_T5_BIAS_PER_LAYER,
    /* issue 23's last three: ALiBi's sign, RMSNorm's centring, the layer
     * pattern's phase (docs/certify.md) */
    REFENC_VAR_ALIBI_BIAS_POSITIVE,
    REFENC_VAR_RMSNORM_MEAN_SUBTRACTED,
    REFENC_VAR_LAYER_PATTERN_SHIFTED,
    /* the named backward bugs (issue 25; tool/backward_bugs.h, docs/gradients.md):
     * the forward is right, one backward kernel is not.  They come last. */
    REFENC_VAR_LAYERNORM_BACKWARD_MEAN_TWICE,
    REFENC_VAR_LAYERNORM_BACKWARD_MEAN_MISSING,
    REFENC_VAR_LAYERNORM_BACKWARD_VARIANCE_MISSING,
    REFENC_VAR_SOFTMAX_BACKWARD_WITHOUT_ROWSUM,
    REFENC_VAR_ATTENTION_BACKWARD_UNSCALED,
    REFENC_VAR_ATTENTION_BACKWARD_SCALED_TWICE,
    REFENC_VAR_ATTENTION_BACKWARD_UNMASKED,
    REFENC_VAR_ROPE_BACKWARD_PLUS_THETA,
    REFENC_VAR_GELU_BACKWARD_TANH_DERIVATIVE,
    REFENC_VAR_BIAS_GRAD_NOT_SUMMED_OVER_BATCH,
    REFENC_VAR_EMBEDDING_GRAD_OVERWRITTEN,
    REFENC_VAR_LINEAR_DW_TRANSPOSED,
    REFENC_VAR_COUNT,
    REFENC_VAR_FIRST_BACKWARD = REFENC_VAR_LAYERNORM_BACKWARD_MEAN_TWICE
} refenc_variant;

typedef struct {
    const char *name;      /* as in alt.<name>.* and --bug <name>              */
    const char *bug_class; /* the catalogue's bug class it belongs to          */
    const char *symptom;   /* what the failing outputs look like               */
    const char *cause;     /* the mistake                                      */
    const char *fix;       /* what to change                                   */
} refenc_variant_info;

/* The table, indexed by refenc_variant. */
const refenc_variant_info *refenc_variant_get(refenc_variant v);

/* The variant with this name; returns 0 if unknown. */
int refenc_variant_parse(refenc_variant *v, const char *name);

/* What the engine must do differently (the variants no case transform can
 * express). */
typedef struct {
    int alibi_slopes_pow2;       /* slopes 2^(-8(h+1)/H) whatever H            */
    int merge_without_transpose; /* (B, H, L, Dh) read as (B, L, D)            */
    int gqa_tiled;               /* query head h reads key/value head h % Hkv   */
    int softcap_after_mask;      /* the cap over score + biases + masks: a
                                  * masked key scores -cap, not -inf          */
    int rope_scaling_on_local_layers; /* Gemma 3's local layers rotate with
                                       * rope_scaling too (layer_pattern.h)  */
    int qk_norm_after_rope;      /* Qwen3's q_norm, k_norm after RoPE, not before */
    int qk_norm_over_all_heads;  /* q_norm, k_norm over a row's H Dh (OLMo-2's) */
    int pooling_ignores_padding; /* the pooling reads every row as a token:
                                  * the mean over L, the last token at L - 1   */
    int t5_bucket_not_clamped;   /* T5's bucket without min(., nb/2 - 1)       */
    int t5_bias_per_layer;       /* T5's bias in layer 0 only: the later layers
                                  * have no table of their own                 */
    int alibi_bias_positive;     /* the ALiBi bias +m_h |i - j|: slopes negated */
} refenc_variant_hooks;

/* Whether v is a backward bug: the forward unchanged (refenc_variant_apply
 * leaves the case as it is), the gradients those of the backward with
 * refenc_backward_bug_kernels(v) (tool/backward_bugs.h).  The golden
 * generator stores them only for cases with gradients (--grad), as
 * alt.<variant>.grad.*; --list-bugs lists the forward's. */
int refenc_variant_is_backward(refenc_variant v);

/* Whether the variant changes this case at all (e.g. no RoPE variant for a
 * case without RoPE, no ALiBi slope variant for a power-of-two head count). */
int refenc_variant_applies(refenc_variant v, const refenc_case *c);

/* Turns c, in place, into the case the buggy implementation computes, and
 * sets the engine hooks.  Precondition: refenc_variant_applies(v, c).
 * A variant that gives the case a tensor it lacks (first_prenorm_applied)
 * rebuilds its parameters.  Errors: REFENC_ENOMEM (c is then unchanged). */
int refenc_variant_apply(refenc_variant v, refenc_case *c, refenc_variant_hooks *hooks, refenc_error *err);

/* Whether refenc_variant_apply(v, ...) writes the case's parameters: their
 * values, their pointers or their allocation.  The other variants change
 * only the config, the hooks and the inputs (token types, padding mask), so
 * a caller may run them on a copy that shares the parameters (the golden
 * generator's variants, golden/alt.c).  checks/unit/test_variant_writes.c
 * holds every variant to it on every shipped case. */
int refenc_variant_writes_params(refenc_variant v);

#endif
