#ifndef REFENC_ROPE_SCALING_JSON_H
#define REFENC_ROPE_SCALING_JSON_H

#include <jansson.h>

#include "../core/rope_scaling.h"
#include "../core/status.h"

/* Reads a model config's "rope_scaling" object (Hugging Face's shape,
 * docs/rope-scaling.md) and its "partial_rotary_factor" into s, leaving the
 * defaults for what is absent; "rope_scaling": null means none.  Keys:
 * rope_type (or the legacy "type"; both must agree), factor,
 * max_position_embeddings, original_max_position_embeddings,
 * attention_factor, beta_fast, beta_slow, mscale, mscale_all_dim, truncate,
 * low_freq_factor, high_freq_factor, short_factor, long_factor.  An unknown
 * key or a value of the wrong JSON type is an error naming
 * `where`.rope_scaling.<key>; ranges are checked by
 * refenc_rope_scaling_validate.  Errors: REFENC_EINVAL, REFENC_ELIMIT. */
int refenc_rope_scaling_from_json(refenc_rope_scaling *s, const json_t *model, const char *where,
                                  refenc_error *err);

/* Adds "rope_scaling" (when a type is set) and "partial_rotary_factor" (when
 * not 1) to the config object j, so that a config without them writes what
 * it always wrote.  Returns 0, or -1 when out of memory. */
int refenc_rope_scaling_to_json(json_t *j, const refenc_rope_scaling *s);

#endif
