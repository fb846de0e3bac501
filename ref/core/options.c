/* The attention options of a model's config and inputs (options.h). */
#include "options.h"

refenc_attn_options refenc_attn_options_of(const refenc_config *cfg, const uint8_t *key_padding_mask,
                                           const double *attn_mask, const int64_t *positions,
                                           const double *alibi_slopes)
{
    return (refenc_attn_options){
        .key_padding_mask = key_padding_mask,
        .causal = cfg->causal,
        .attn_mask = attn_mask,
        .alibi_slopes = cfg->positional == REFENC_POS_ALIBI ? alibi_slopes : NULL,
        .positions = positions,
        .temperature = cfg->temperature,
        .mask_value = cfg->mask_value,
        .score_scalar = cfg->query_pre_attn_scalar,
        .softcap = cfg->attn_logit_softcapping,
        .sliding_window = cfg->sliding_window,
        .local_attention = cfg->local_attention,
        .relative_num_buckets = cfg->relative_attention_num_buckets,
        .relative_max_distance = cfg->relative_attention_max_distance,
    };
}
