#include "config_json.h"

#include <math.h>
#include <string.h>

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
            char list[512] = "";
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
    "causal", "vocab_size", "padding_idx", NULL};

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

    if ((st = refenc_json_get_size(&c->d_model, obj, "d_model", where, err)) ||
        (st = refenc_json_get_size(&c->n_heads, obj, "n_heads", where, err)) ||
        (st = refenc_json_get_size(&c->d_ff, obj, "d_ff", where, err)) ||
        (st = refenc_json_get_size(&c->n_layers, obj, "n_layers", where, err)) ||
        (st = refenc_json_get_size(&c->max_len, obj, "max_len", where, err)) ||
        (st = refenc_json_get_size(&c->vocab_size, obj, "vocab_size", where, err)) ||
        (st = get_double(&c->layer_norm_eps, obj, "layer_norm_eps", where, err)) ||
        (st = get_double(&c->rope_base, obj, "rope_base", where, err)) ||
        (st = get_double(&c->temperature, obj, "temperature", where, err)) ||
        (st = get_bool(&c->causal, obj, "causal", where, err)))
        return st;

    if ((st = get_string(&s, obj, "norm", where, err)))
        return st;
    snprintf(field, sizeof field, "%s.norm", where);
    if (s != NULL && (st = refenc_norm_parse(&c->norm, s, field, err)))
        return st;
    c->final_norm = c->norm == REFENC_NORM_PRE; /* the default follows the placement */
    if ((st = get_bool(&c->final_norm, obj, "final_norm", where, err)))
        return st;

    if ((st = get_string(&s, obj, "activation", where, err)))
        return st;
    snprintf(field, sizeof field, "%s.activation", where);
    if (s != NULL && (st = refenc_activation_parse(&c->activation, s, field, err)))
        return st;
    if ((st = get_string(&s, obj, "positional", where, err)))
        return st;
    snprintf(field, sizeof field, "%s.positional", where);
    if (s != NULL && (st = refenc_positional_parse(&c->positional, s, field, err)))
        return st;
    if ((st = get_string(&s, obj, "rope_layout", where, err)))
        return st;
    snprintf(field, sizeof field, "%s.rope_layout", where);
    if (s != NULL && (st = refenc_rope_layout_parse(&c->rope_layout, s, field, err)))
        return st;

    const json_t *pi = json_object_get(obj, "padding_idx");
    if (pi != NULL) {
        if (!json_is_integer(pi))
            return refenc_error_set(err, REFENC_EINVAL, "%s.padding_idx: expected an integer", where);
        c->padding_idx = json_integer_value(pi);
    }

    st = refenc_config_validate(c, err);
    if (st && err != NULL) { /* "config: <field> ..." becomes "<where>: <field> ..." */
        char msg[REFENC_ERRMSG_MAX];
        const char *rest = strncmp(err->message, "config: ", 8) == 0 ? err->message + 8 : err->message;
        snprintf(msg, sizeof msg, "%s", rest);
        refenc_error_set(err, st, "%s: %s", where, msg);
    }
    return st;
}

json_t *refenc_config_to_json(const refenc_config *c)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:f, s:b, s:s, s:s, s:f, s:I, s:f, s:b, s:I, s:I}",
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
}
