#include "config_json.h"

#include <math.h>
#include <string.h>

#include "../core/family.h"
#include "rope_scaling_json.h"

int refenc_json_check_keys(const json_t *obj, const char *const *known, const char *where,
                           refenc_error *err)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        (void)value;
        int found = 0;
        for (size_t i = 0; known[i] != NULL && !found; i++)
            found = strcmp(key, known[i]) == 0;
        if (!found) {
            char list[1024] = ""; /* every key; the message keeps its head and tail */
            for (size_t i = 0; known[i] != NULL; i++) {
                strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
                strncat(list, known[i], sizeof list - strlen(list) - 1);
            }
            return refenc_error_set(err, REFENC_EINVAL, "%s.%s: unknown key (known keys: %s)",
                                    where, key, list);
        }
    }
    return REFENC_OK;
}

int refenc_json_get_size(size_t *v, const json_t *obj, const char *key, const char *where,
                         refenc_error *err)
{
    const json_t *j = json_object_get(obj, key);
    if (j == NULL)
        return REFENC_OK;
    if (!json_is_integer(j))
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected an integer", where, key);
    json_int_t i = json_integer_value(j);
    if (i < 0)
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected an integer >= 0, got %lld",
                                where, key, (long long)i);
    if ((unsigned long long)i > SIZE_MAX)
        return refenc_error_set(err, REFENC_ELIMIT, "%s.%s: %lld is too large", where, key,
                                (long long)i);
    *v = (size_t)i;
    return REFENC_OK;
}

static int get_double(double *v, const json_t *obj, const char *key, const char *where,
                      refenc_error *err)
{
    const json_t *j = json_object_get(obj, key);
    if (j == NULL)
        return REFENC_OK;
    if (!json_is_number(j))
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected a number", where, key);
    *v = json_number_value(j);
    return REFENC_OK;
}

static int get_bool(int *v, const json_t *obj, const char *key, const char *where,
                    refenc_error *err)
{
    const json_t *j = json_object_get(obj, key);
    if (j == NULL)
        return REFENC_OK;
    if (!json_is_boolean(j))
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected true or false", where, key);
    *v = json_is_true(j);
    return REFENC_OK;
}

/* The string member `key`, or NULL (absent); a non-string is an error. */
static int get_string(const char **v, const json_t *obj, const char *key, const char *where,
                      refenc_error *err)
{
    const json_t *j = json_object_get(obj, key);
    *v = NULL;
    if (j == NULL)
        return REFENC_OK;
    if (!json_is_string(j))
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected a string", where, key);
    *v = json_string_value(j);
    return REFENC_OK;
}

static const char *const model_keys[] = {
    "d_model", "n_heads", "d_ff", "n_layers", "norm", "activation", "layer_norm_eps",
    "final_norm", "positional", "rope_layout", "rope_base", "max_len", "temperature",
    "causal", "vocab_size", "padding_idx", "family", "scale_embedding", "type_vocab_size",
    "embedding_norm", "embedding_norm_eps", "position_ids", "mask_value", "norm_type", "rmsnorm_offset", "ffn_type", "glu_gate", "norm_bias", "linear_bias", "linear1_bias", "skip_first_prenorm", "sandwich_norm",
    "rope_scaling", "partial_rotary_factor", "n_kv_heads", "head_dim",
    "attn_logit_softcapping", "query_pre_attn_scalar", "sliding_window", "local_attention",
    "global_attn_every_n_layers", "local_rope_theta", "global_rope_theta", "sliding_window_pattern", "embedding_normalizer_dtype",
    "qkv_bias", "qk_norm", "pooling", "pooling_normalize",
    "relative_attention_num_buckets", "relative_attention_max_distance", NULL};

/* n_kv_heads or head_dim: absent leaves the default (0: H, or D / H); an
 * explicit value must be an integer >= 1, as every other size. */
static int get_optional_size(size_t *v, const json_t *obj, const char *key, const char *where,
                             refenc_error *err)
{
    const json_t *j = json_object_get(obj, key);
    if (json_is_integer(j) && json_integer_value(j) < 1)
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected an integer >= 1, got %lld", where,
                                key, (long long)json_integer_value(j));
    return refenc_json_get_size(v, obj, key, where, err);
}

/* attn_logit_softcapping or query_pre_attn_scalar (Hugging Face's names and
 * meanings): absent or null leaves 0 (off: no cap, the scale sqrt(Dh)); an
 * explicit value must be a number > 0 (JSON has no NaN or infinity, and the
 * parser refuses a number that overflows a double). */
static int get_optional_positive(double *v, const json_t *obj, const char *key, const char *where,
                                 refenc_error *err)
{
    const json_t *j = json_object_get(obj, key);
    if (j == NULL) /* absent: the value stays (0, or the family's preset) */
        return REFENC_OK;
    if (json_is_null(j)) { /* null: 0, also over a preset (ModernBERT's bases) */
        *v = 0;
        return REFENC_OK;
    }
    if (!json_is_number(j))
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected a number > 0 or null", where, key);
    if (!(json_number_value(j) > 0))
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected a number > 0 or null, got %.17g",
                                where, key, json_number_value(j));
    *v = json_number_value(j);
    return REFENC_OK;
}

/* An optional count in 1 .. max: absent leaves the value (0, off, or the
 * family's preset); null sets 0 (off, also over a preset: Mistral's window);
 * an explicit value must be an integer >= 1.  The windows sliding_window and
 * local_attention (window.h; max REFENC_MAX_DIM: Hugging Face writes null
 * for no window, and 0 would be a window of no key) and the layer periods
 * global_attn_every_n_layers and sliding_window_pattern (layer_pattern.h;
 * max REFENC_MAX_LAYERS, 1: every layer global). */
static int get_optional_count(size_t *v, const json_t *obj, const char *key, size_t max, const char *where,
                              refenc_error *err)
{
    const json_t *j = json_object_get(obj, key);
    if (j == NULL)
        return REFENC_OK;
    if (json_is_null(j)) { /* off, also where the family's preset sets it (Mistral's window) */
        *v = 0;
        return REFENC_OK;
    }
    if (!json_is_integer(j) || json_integer_value(j) < 1)
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected an integer >= 1 or null", where, key);
    if ((unsigned long long)json_integer_value(j) > max)
        return refenc_error_set(err, REFENC_ELIMIT, "%s.%s: %lld exceeds %zu", where, key,
                                (long long)json_integer_value(j), max);
    *v = (size_t)json_integer_value(j);
    return REFENC_OK;
}

/* The attention's optional keys: n_kv_heads, head_dim (grouped-query
 * attention), attn_logit_softcapping, query_pre_attn_scalar (Gemma),
 * sliding_window, local_attention (windows). */
static int read_attention_keys(refenc_config *c, const json_t *obj, const char *where, refenc_error *err)
{
    int st;
    if ((st = get_optional_size(&c->n_kv_heads, obj, "n_kv_heads", where, err)) ||
        (st = get_optional_size(&c->head_dim, obj, "head_dim", where, err)) ||
        (st = get_optional_positive(&c->attn_logit_softcapping, obj, "attn_logit_softcapping", where, err)) ||
        (st = get_optional_positive(&c->query_pre_attn_scalar, obj, "query_pre_attn_scalar", where, err)) ||
        (st = get_optional_count(&c->sliding_window, obj, "sliding_window", REFENC_MAX_DIM, where, err)) ||
        (st = get_optional_count(&c->local_attention, obj, "local_attention", REFENC_MAX_DIM, where, err)) ||
        (st = get_optional_count(&c->global_attn_every_n_layers, obj, "global_attn_every_n_layers",
                                 REFENC_MAX_LAYERS, where, err)) ||
        (st = get_optional_count(&c->sliding_window_pattern, obj, "sliding_window_pattern", REFENC_MAX_LAYERS,
                                 where, err)) ||
        (st = get_optional_positive(&c->local_rope_theta, obj, "local_rope_theta", where, err)) ||
        (st = get_optional_positive(&c->global_rope_theta, obj, "global_rope_theta", where, err)))
        return st;
    return REFENC_OK;
}

/* T5's relative bias (relative_bias.h): relative_attention_num_buckets
 * null or 0 is off, also over the t5-encoder preset; absent leaves the
 * preset's (T5Config writes 32) or off; max_distance (default 128) only with
 * buckets.  The values' rules are the config's validation. */
static int read_relative_bias(refenc_config *c, const json_t *obj, const char *where, refenc_error *err)
{
    const json_t *nb = json_object_get(obj, "relative_attention_num_buckets");
    int st;
    if (json_is_null(nb) || (json_is_integer(nb) && json_integer_value(nb) == 0))
        c->relative_attention_num_buckets = 0;
    else if (nb != NULL &&
             (st = get_optional_count(&c->relative_attention_num_buckets, obj, "relative_attention_num_buckets",
                                      REFENC_MAX_DIM, where, err)))
        return st;
    if ((st = get_optional_count(&c->relative_attention_max_distance, obj, "relative_attention_max_distance",
                                 REFENC_MAX_DIM, where, err)))
        return st;
    if (c->relative_attention_num_buckets == 0 && json_object_get(obj, "relative_attention_max_distance") != NULL)
        return refenc_error_set(err, REFENC_EINVAL, "%s.relative_attention_max_distance: needs "
                                "relative_attention_num_buckets (no relative bias to bound)", where);
    return REFENC_OK;
}

/* pooling (pooling.h): absent, null or "none" is no pooled output;
 * pooling_normalize (default true) only with a pooling. */
static int read_pooling(refenc_config *c, const json_t *obj, const char *where, refenc_error *err)
{
    const json_t *j = json_object_get(obj, "pooling");
    char field[128];
    int st;
    if (j != NULL && !json_is_null(j)) {
        if (!json_is_string(j))
            return refenc_error_set(err, REFENC_EINVAL, "%s.pooling: expected a string ('mean', 'cls' or "
                                    "'last_token') or null", where);
        snprintf(field, sizeof field, "%s.pooling", where);
        if ((st = refenc_pooling_parse(&c->pooling, json_string_value(j), field, err)))
            return st;
    }
    if ((st = get_bool(&c->pooling_normalize, obj, "pooling_normalize", where, err)))
        return st;
    if (c->pooling == REFENC_POOL_NONE && json_object_get(obj, "pooling_normalize") != NULL)
        return refenc_error_set(err, REFENC_EINVAL, "%s.pooling_normalize: needs pooling ('mean', 'cls' or "
                                "'last_token'): there is no pooled output to normalise", where);
    return REFENC_OK;
}

/* The enum-valued member `key` through its parser, if present. */
#define GET_ENUM(parse, dst, key)                                                   \
    do {                                                                            \
        if ((st = get_string(&s, obj, key, where, err)))                            \
            return st;                                                              \
        snprintf(field, sizeof field, "%s." key, where);                            \
        if (s != NULL && (st = parse(dst, s, field, err)))                          \
            return st;                                                              \
    } while (0)

/* The choices read after norm: activation, positional, rope_layout,
 * position_ids, mask_value (absent: the family's or the default). */
static int read_choices(refenc_config *c, const json_t *obj, const char *where, refenc_error *err)
{
    char field[128];
    const char *s;
    int st;
    GET_ENUM(refenc_activation_parse, &c->activation, "activation");
    GET_ENUM(refenc_positional_parse, &c->positional, "positional");
    GET_ENUM(refenc_rope_layout_parse, &c->rope_layout, "rope_layout");
    GET_ENUM(refenc_position_ids_parse, &c->position_ids, "position_ids");
    GET_ENUM(refenc_mask_value_parse, &c->mask_value, "mask_value");
    GET_ENUM(refenc_norm_type_parse, &c->norm_type, "norm_type");
    GET_ENUM(refenc_ffn_type_parse, &c->ffn_type, "ffn_type");
    GET_ENUM(refenc_glu_gate_parse, &c->glu_gate, "glu_gate");
    GET_ENUM(refenc_normalizer_dtype_parse, &c->embedding_normalizer_dtype, "embedding_normalizer_dtype");
    if (c->norm_type == REFENC_NORMTYPE_RMSNORM && json_is_true(json_object_get(obj, "norm_bias")))
        return refenc_error_set(err, REFENC_EINVAL, "%s.norm_bias: RMSNorm has no bias (norm_type 'rmsnorm')",
                                where);
    if (c->ffn_type != REFENC_FFN_GLU && json_object_get(obj, "glu_gate") != NULL)
        return refenc_error_set(err, REFENC_EINVAL, "%s.glu_gate: needs ffn_type 'glu' (the MLP has no gate)",
                                where);
    return REFENC_OK;
}

/* The layer's structure: ModernBERT's first layer, Gemma 2/3's sandwich
 * norms, Jina-v2's and GTE's bias-free linear1. */
static int read_layer_keys(refenc_config *c, const json_t *obj, const char *where, refenc_error *err)
{
    int st;
    if ((st = get_bool(&c->skip_first_prenorm, obj, "skip_first_prenorm", where, err)) ||
        (st = get_bool(&c->sandwich_norm, obj, "sandwich_norm", where, err)) ||
        (st = get_bool(&c->linear1_bias, obj, "linear1_bias", where, err)))
        return st;
    return REFENC_OK;
}

/* Qwen's attention keys (qk_norm.h): qkv_bias (Qwen2), qk_norm (Qwen3). */
static int read_qwen_keys(refenc_config *c, const json_t *obj, const char *where, refenc_error *err)
{
    char field[128];
    const char *s;
    int st;
    if ((st = get_bool(&c->qkv_bias, obj, "qkv_bias", where, err)))
        return st;
    GET_ENUM(refenc_qk_norm_parse, &c->qk_norm, "qk_norm");
    return REFENC_OK;
}

/* refenc_config_validate, its message's "config: <field> ..." becoming
 * "<where>: <field> ...". */
static int validate_at(const refenc_config *c, const char *where, refenc_error *err)
{
    const int st = refenc_config_validate(c, err);
    if (st && err != NULL) {
        char msg[REFENC_ERRMSG_MAX];
        const char *rest = strncmp(err->message, "config: ", 8) == 0 ? err->message + 8 : err->message;
        snprintf(msg, sizeof msg, "%s", rest);
        refenc_error_set(err, st, "%s: %s", where, msg);
    }
    return st;
}

int refenc_config_from_json(refenc_config *c, const json_t *obj, const char *where,
                            refenc_error *err)
{
    char field[128];
    const char *s;
    int st;

    refenc_config_default(c);
    if (!json_is_object(obj))
        return refenc_error_set(err, REFENC_EINVAL, "%s: expected a JSON object", where);
    if ((st = refenc_json_check_keys(obj, model_keys, where, err)))
        return st;

    /* the family's preset first; every other key overrides it */
    refenc_family family = REFENC_FAMILY_VASWANI;
    GET_ENUM(refenc_family_parse, &family, "family");
    refenc_config_family(c, family);

    if ((st = refenc_json_get_size(&c->d_model, obj, "d_model", where, err)) ||
        (st = refenc_json_get_size(&c->n_heads, obj, "n_heads", where, err)) ||
        (st = refenc_json_get_size(&c->d_ff, obj, "d_ff", where, err)) ||
        (st = refenc_json_get_size(&c->n_layers, obj, "n_layers", where, err)) ||
        (st = refenc_json_get_size(&c->max_len, obj, "max_len", where, err)) ||
        (st = refenc_json_get_size(&c->vocab_size, obj, "vocab_size", where, err)) ||
        (st = refenc_json_get_size(&c->type_vocab_size, obj, "type_vocab_size", where, err)) ||
        (st = read_attention_keys(c, obj, where, err)) ||
        (st = get_double(&c->layer_norm_eps, obj, "layer_norm_eps", where, err)) ||
        (st = get_double(&c->rope_base, obj, "rope_base", where, err)) ||
        (st = get_double(&c->temperature, obj, "temperature", where, err)) ||
        (st = get_bool(&c->causal, obj, "causal", where, err)) ||
        (st = get_bool(&c->scale_embedding, obj, "scale_embedding", where, err)) ||
        (st = get_bool(&c->embedding_norm, obj, "embedding_norm", where, err)) ||
        (st = get_bool(&c->rmsnorm_offset, obj, "rmsnorm_offset", where, err)) ||
        (st = get_bool(&c->norm_bias, obj, "norm_bias", where, err)) ||
        (st = get_bool(&c->linear_bias, obj, "linear_bias", where, err)))
        return st;

    GET_ENUM(refenc_norm_parse, &c->norm, "norm");
    c->final_norm = c->norm == REFENC_NORM_PRE; /* the default follows the placement */
    if ((st = get_bool(&c->final_norm, obj, "final_norm", where, err)))
        return st;
    c->embedding_norm_eps = c->layer_norm_eps;  /* the default follows the layers' eps */
    if ((st = get_double(&c->embedding_norm_eps, obj, "embedding_norm_eps", where, err)))
        return st;

    if ((st = read_choices(c, obj, where, err)) || (st = read_qwen_keys(c, obj, where, err)) ||
        (st = read_layer_keys(c, obj, where, err)) ||
        (st = read_pooling(c, obj, where, err)) || (st = read_relative_bias(c, obj, where, err)) ||
        (st = refenc_rope_scaling_from_json(&c->rope_scaling, obj, where, err)))
        return st;

    const json_t *pi = json_object_get(obj, "padding_idx");
    if (pi != NULL) {
        if (!json_is_integer(pi))
            return refenc_error_set(err, REFENC_EINVAL, "%s.padding_idx: expected an integer", where);
        c->padding_idx = json_integer_value(pi);
    }

    return validate_at(c, where, err);
}

/* An optional count or real key: written when set, and as null when the
 * family's preset (f) sets it and the config turned it off, so that reading
 * "family" first does not bring the preset's value back. */
static int optional_count(json_t *j, const char *key, size_t v, size_t preset)
{
    if (v != 0)
        return json_object_set_new(j, key, json_integer((json_int_t)v));
    return preset != 0 ? json_object_set_new(j, key, json_null()) : 0;
}

static int optional_real(json_t *j, const char *key, double v, double preset)
{
    if (v != 0)
        return json_object_set_new(j, key, json_real(v));
    return preset != 0 ? json_object_set_new(j, key, json_null()) : 0;
}

/* n_kv_heads, head_dim, the windows, periods, bases, softcap and query scalar,
 * written only when set (absent: the defaults), or when the family's preset
 * f sets them: n_kv_heads and head_dim as their values (H, D / H when 0),
 * sliding_window as null when off (the preset's window would come back). */
static int attention_keys_to_json(json_t *j, const refenc_config *c, const refenc_config *f)
{
    int bad = 0;
    bad |= optional_real(j, "attn_logit_softcapping", c->attn_logit_softcapping, f->attn_logit_softcapping);
    bad |= optional_real(j, "query_pre_attn_scalar", c->query_pre_attn_scalar, f->query_pre_attn_scalar);
    bad |= optional_count(j, "sliding_window", c->sliding_window, f->sliding_window);
    bad |= optional_count(j, "local_attention", c->local_attention, f->local_attention);
    bad |= optional_count(j, "global_attn_every_n_layers", c->global_attn_every_n_layers,
                          f->global_attn_every_n_layers);
    bad |= optional_count(j, "sliding_window_pattern", c->sliding_window_pattern, f->sliding_window_pattern);
    bad |= optional_real(j, "local_rope_theta", c->local_rope_theta, f->local_rope_theta);
    bad |= optional_real(j, "global_rope_theta", c->global_rope_theta, f->global_rope_theta);
    if (c->n_kv_heads != 0 || f->n_kv_heads != 0)
        bad |= json_object_set_new(j, "n_kv_heads", json_integer((json_int_t)refenc_config_kv_heads(c)));
    if (c->head_dim != 0 || f->head_dim != 0)
        bad |= json_object_set_new(j, "head_dim", json_integer((json_int_t)refenc_config_head_dim(c)));
    if (c->qkv_bias != 0 || f->qkv_bias != 0)
        bad |= json_object_set_new(j, "qkv_bias", json_boolean(c->qkv_bias));
    if (c->qk_norm != REFENC_QKNORM_NONE || f->qk_norm != REFENC_QKNORM_NONE)
        bad |= json_object_set_new(j, "qk_norm", json_string(refenc_qk_norm_name(c->qk_norm)));
    if (c->relative_attention_num_buckets != 0) /* only when set: byte-identical goldens */
        bad |= json_object_set_new(j, "relative_attention_num_buckets",
                                   json_integer((json_int_t)c->relative_attention_num_buckets)) |
               json_object_set_new(j, "relative_attention_max_distance",
                                   json_integer((json_int_t)c->relative_attention_max_distance));
    else if (f->relative_attention_num_buckets != 0) /* off over t5-encoder's preset */
        bad |= json_object_set_new(j, "relative_attention_num_buckets", json_null());
    return bad;
}

/* The keys of the embedding path and the families: all of them for a
 * family's config (reading "family" first sets its preset, so every key
 * must be explicit to read back the same config); for the default family
 * only those off their default (d), so that a config without them writes
 * what it always wrote (golden files regenerate byte for byte). */
static int family_keys_to_json(json_t *j, const refenc_config *c, const refenc_config *d)
{
    const int all = c->family != REFENC_FAMILY_VASWANI;
    int bad = 0;
    if (all)
        bad |= json_object_set_new(j, "family", json_string(refenc_family_name(c->family)));
    if (all || c->scale_embedding != d->scale_embedding)
        bad |= json_object_set_new(j, "scale_embedding", json_boolean(c->scale_embedding));
    if (all || c->type_vocab_size != d->type_vocab_size)
        bad |= json_object_set_new(j, "type_vocab_size", json_integer((json_int_t)c->type_vocab_size));
    if (all || c->embedding_norm != d->embedding_norm)
        bad |= json_object_set_new(j, "embedding_norm", json_boolean(c->embedding_norm));
    if (all || c->embedding_norm_eps != c->layer_norm_eps)
        bad |= json_object_set_new(j, "embedding_norm_eps", json_real(c->embedding_norm_eps));
    if (all || c->position_ids != d->position_ids)
        bad |= json_object_set_new(j, "position_ids", json_string(refenc_position_ids_name(c->position_ids)));
    if (all || c->mask_value != d->mask_value)
        bad |= json_object_set_new(j, "mask_value", json_string(refenc_mask_value_name(c->mask_value)));
    return bad;
}

/* pooling and pooling_normalize, written only with a pooling (absent: no
 * pooled output, as every file before them), or "none" over a preset's (gte) */
static int pooling_to_json(json_t *j, const refenc_config *c, const refenc_config *f)
{
    if (c->pooling == REFENC_POOL_NONE)
        return f->pooling == REFENC_POOL_NONE ? 0 : json_object_set_new(j, "pooling", json_string("none"));
    return json_object_set_new(j, "pooling", json_string(refenc_pooling_name(c->pooling))) |
           json_object_set_new(j, "pooling_normalize", json_boolean(c->pooling_normalize));
}

json_t *refenc_config_to_json(const refenc_config *c)
{
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:f, s:b, s:s, s:s, s:f, s:I, s:f, s:b, s:I, s:I}",
                          "d_model", (json_int_t)c->d_model, "n_heads", (json_int_t)c->n_heads,
                          "d_ff", (json_int_t)c->d_ff, "n_layers", (json_int_t)c->n_layers,
                          "norm", refenc_norm_name(c->norm),
                          "activation", refenc_activation_name(c->activation),
                          "layer_norm_eps", c->layer_norm_eps, "final_norm", c->final_norm,
                          "positional", refenc_positional_name(c->positional),
                          "rope_layout", refenc_rope_layout_name(c->rope_layout),
                          "rope_base", c->rope_base, "max_len", (json_int_t)c->max_len,
                          "temperature", c->temperature, "causal", c->causal,
                          "vocab_size", (json_int_t)c->vocab_size,
                          "padding_idx", (json_int_t)c->padding_idx);
    if (j == NULL)
        return NULL;
    refenc_config d, f;
    refenc_config_default(&d);
    refenc_config_family(&f, c->family);
    int bad = family_keys_to_json(j, c, &d);
    /* written off their default or off the family's preset (f; the default
     * for the encoder families, which set none of them): a file without them
     * writes what it always wrote, and every one reads back */
#define OFF(field) (c->field != d.field || c->field != f.field)
    if (OFF(norm_type))
        bad |= json_object_set_new(j, "norm_type", json_string(refenc_norm_type_name(c->norm_type)));
    if (OFF(rmsnorm_offset))
        bad |= json_object_set_new(j, "rmsnorm_offset", json_boolean(c->rmsnorm_offset));
    if (OFF(linear_bias))
        bad |= json_object_set_new(j, "linear_bias", json_boolean(c->linear_bias));
    if (OFF(linear1_bias)) /* only when set: byte-identical goldens */
        bad |= json_object_set_new(j, "linear1_bias", json_boolean(c->linear1_bias));
    if (c->norm_type == REFENC_NORMTYPE_LAYERNORM && OFF(norm_bias))
        bad |= json_object_set_new(j, "norm_bias", json_boolean(c->norm_bias));
    if (OFF(sandwich_norm))
        bad |= json_object_set_new(j, "sandwich_norm", json_boolean(c->sandwich_norm));
    if (OFF(skip_first_prenorm))
        bad |= json_object_set_new(j, "skip_first_prenorm", json_boolean(c->skip_first_prenorm));
    if (OFF(ffn_type))
        bad |= json_object_set_new(j, "ffn_type", json_string(refenc_ffn_type_name(c->ffn_type)));
    if (OFF(embedding_normalizer_dtype)) /* only when set: byte-identical goldens */
        bad |= json_object_set_new(j, "embedding_normalizer_dtype",
                                   json_string(refenc_normalizer_dtype_name(c->embedding_normalizer_dtype)));
    if (c->ffn_type == REFENC_FFN_GLU && OFF(glu_gate))
        bad |= json_object_set_new(j, "glu_gate", json_string(refenc_glu_gate_name(c->glu_gate)));
#undef OFF
    bad |= attention_keys_to_json(j, c, &f) | pooling_to_json(j, c, &f);
    bad |= refenc_rope_scaling_to_json(j, &c->rope_scaling) != 0;
    if (c->rope_scaling.type == REFENC_ROPE_SCALING_NONE && f.rope_scaling.type != REFENC_ROPE_SCALING_NONE)
        bad |= json_object_set_new(j, "rope_scaling", json_null()); /* off over gte's preset */
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}
