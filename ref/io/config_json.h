#ifndef REFENC_CONFIG_JSON_H
#define REFENC_CONFIG_JSON_H

#include <jansson.h>

#include "../core/config.h"
#include "../core/status.h"

/* Reads a model config from a JSON object (jansson), starting from
 * refenc_config_default.  Keys (all optional; docs/architecture.md):
 *   d_model, n_heads, d_ff, n_layers, max_len, vocab_size: integers >= 1
 *       (vocab_size >= 0; 0 means the input is x, not tokens)
 *   padding_idx: integer >= -1
 *   norm: "pre" | "post"        activation: "relu" | "gelu" | "gelu_tanh"
 *   positional: "none" | "sinusoidal" | "learned" | "rope" | "alibi"
 *   rope_layout: "half" | "interleaved"     rope_base, layer_norm_eps, temperature: numbers
 *   final_norm, causal: booleans (final_norm defaults to true for Pre-LN,
 *       false for Post-LN)
 * An unknown key, a value of the wrong JSON type or out of range is an error
 * naming `where`.key (a typo must not be silently ignored).  The result is
 * then checked with refenc_config_validate.
 * Errors: REFENC_EINVAL, REFENC_ELIMIT. */
int refenc_config_from_json(refenc_config *cfg, const json_t *obj, const char *where,
                            refenc_error *err);

/* The config as a JSON object with every key above (a new reference), or
 * NULL if out of memory. */
json_t *refenc_config_to_json(const refenc_config *cfg);

/* Reads a non-negative integer member `key` of obj into *v, if present.
 * Errors name `where`.key.  Returns REFENC_OK when absent. */
int refenc_json_get_size(size_t *v, const json_t *obj, const char *key, const char *where,
                         refenc_error *err);

/* Fails with REFENC_EINVAL naming `where`.key for the first key of obj not
 * in the NULL-terminated list `known`. */
int refenc_json_check_keys(const json_t *obj, const char *const *known, const char *where,
                           refenc_error *err);

#endif
