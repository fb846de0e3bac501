/* The "rope_scaling" object of a model config (rope_scaling_json.h). */
#include "rope_scaling_json.h"

#include <stdio.h>
#include <string.h>


static const char *const keys[] = {
    "rope_type", "type", "factor", "max_position_embeddings", "original_max_position_embeddings",
    "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate",
    "low_freq_factor", "high_freq_factor", "short_factor", "long_factor", "mixed_b", NULL};

/* Fails naming where.key for the first key of obj not in `keys`. */
static int check_keys(const json_t *obj, const char *where, refenc_error *err)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        (void)value;
        size_t i = 0;
        while (keys[i] != NULL && strcmp(key, keys[i]) != 0)
            i++;
        if (keys[i] == NULL)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "%s.%s: unknown key (known keys: rope_type, type, factor, max_position_embeddings, "
                                    "original_max_position_embeddings, attention_factor, beta_fast, beta_slow, mscale, "
                                    "mscale_all_dim, truncate, low_freq_factor, high_freq_factor, short_factor, "
                                    "long_factor, mixed_b)", where, key);
    }
    return REFENC_OK;
}

/* A length: an integer in [0, 2^53] (HF's position counts), if present. */
static int get_length(size_t *v, const json_t *obj, const char *key, const char *where, refenc_error *err)
{
    const json_t *j = json_object_get(obj, key);
    if (j == NULL)
        return REFENC_OK;
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected an integer >= 0", where, key);
    if (json_integer_value(j) > ((json_int_t)1 << 53))
        return refenc_error_set(err, REFENC_ELIMIT, "%s.%s: %lld is too large (limit 2^53)", where, key,
                                (long long)json_integer_value(j));
    *v = (size_t)json_integer_value(j);
    return REFENC_OK;
}

static int get_number(double *v, const json_t *obj, const char *key, const char *where, refenc_error *err)
{
    const json_t *j = json_object_get(obj, key);
    if (j != NULL && !json_is_number(j))
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected a number", where, key);
    if (j != NULL)
        *v = json_number_value(j);
    return REFENC_OK;
}

/* rope_type, or the legacy type: a string, the same when both are given */
static int get_type(refenc_rope_scaling_type *t, const json_t *obj, const char *where, refenc_error *err)
{
    const json_t *a = json_object_get(obj, "rope_type"), *b = json_object_get(obj, "type");
    const char *key = a != NULL ? "rope_type" : "type";
    const json_t *v = a != NULL ? a : b;
    char field[256];
    snprintf(field, sizeof field, "%s.%s", where, key);
    if (v == NULL)
        return refenc_error_set(err, REFENC_EINVAL, "%s.rope_type: missing (one of default, linear, "
                                "dynamic, yarn, llama3, longrope, ntk)", where);
    if (!json_is_string(v) || (b != NULL && !json_is_string(b)))
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected a string", where, b && !json_is_string(b) ? "type" : key);
    if (b != NULL && a != NULL && strcmp(json_string_value(a), json_string_value(b)) != 0)
        return refenc_error_set(err, REFENC_EINVAL, "%s.type: '%s' disagrees with rope_type '%s'", where,
                                json_string_value(b), json_string_value(a));
    return refenc_rope_scaling_parse(t, json_string_value(v), field, err);
}

/* A list of numbers, at most REFENC_ROPE_MAX_FACTORS; *n its length. */
static int get_factors(double *v, size_t *n, const json_t *obj, const char *key, const char *where,
                       refenc_error *err)
{
    const json_t *a = json_object_get(obj, key);
    if (a == NULL)
        return REFENC_OK;
    if (!json_is_array(a))
        return refenc_error_set(err, REFENC_EINVAL, "%s.%s: expected a list of numbers", where, key);
    if (json_array_size(a) > REFENC_ROPE_MAX_FACTORS)
        return refenc_error_set(err, REFENC_ELIMIT, "%s.%s: %zu factors, more than the limit of %d", where,
                                key, json_array_size(a), REFENC_ROPE_MAX_FACTORS);
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *x = json_array_get(a, i);
        if (!json_is_number(x))
            return refenc_error_set(err, REFENC_EINVAL, "%s.%s[%zu]: expected a number", where, key, i);
        v[i] = json_number_value(x);
    }
    *n = json_array_size(a);
    return REFENC_OK;
}

static int get_truncate(int *v, const json_t *obj, const char *where, refenc_error *err)
{
    const json_t *j = json_object_get(obj, "truncate");
    if (j != NULL && !json_is_boolean(j))
        return refenc_error_set(err, REFENC_EINVAL, "%s.truncate: expected true or false", where);
    if (j != NULL)
        *v = json_is_true(j);
    return REFENC_OK;
}

/* GTE's ntk: mixed_b a number (the mixed NTK), or null or absent (the fixed NTK,
 * new-impl's default None). */
static int get_mixed_b(refenc_rope_scaling *s, const json_t *obj, const char *where, refenc_error *err)
{
    const json_t *j = json_object_get(obj, "mixed_b");
    if (j == NULL || json_is_null(j))
        return REFENC_OK;
    s->mixed = 1;
    return get_number(&s->mixed_b, obj, "mixed_b", where, err);
}

/* The lists: short_factor and long_factor, of the same length. */
static int get_lists(refenc_rope_scaling *s, const json_t *obj, const char *where, refenc_error *err)
{
    size_t ns = 0, nl = 0;
    int st;
    if ((st = get_factors(s->short_factor, &ns, obj, "short_factor", where, err)) ||
        (st = get_factors(s->long_factor, &nl, obj, "long_factor", where, err)))
        return st;
    if (ns != nl)
        return refenc_error_set(err, REFENC_EINVAL, "%s.long_factor: %zu factors, but short_factor has %zu",
                                where, nl, ns);
    s->n_factors = ns;
    return REFENC_OK;
}

static int read_object(refenc_rope_scaling *s, const json_t *obj, const char *where, refenc_error *err)
{
    int st;
    if (!json_is_object(obj))
        return refenc_error_set(err, REFENC_EINVAL, "%s: expected an object or null", where);
    if ((st = check_keys(obj, where, err)) || (st = get_type(&s->type, obj, where, err)) ||
        (st = get_number(&s->factor, obj, "factor", where, err)) ||
        (st = get_length(&s->max_position_embeddings, obj, "max_position_embeddings", where, err)) ||
        (st = get_length(&s->original_max_position_embeddings, obj,
                                "original_max_position_embeddings", where, err)) ||
        (st = get_number(&s->attention_factor, obj, "attention_factor", where, err)) ||
        (st = get_number(&s->beta_fast, obj, "beta_fast", where, err)) ||
        (st = get_number(&s->beta_slow, obj, "beta_slow", where, err)) ||
        (st = get_number(&s->mscale, obj, "mscale", where, err)) ||
        (st = get_number(&s->mscale_all_dim, obj, "mscale_all_dim", where, err)) ||
        (st = get_truncate(&s->truncate, obj, where, err)) ||
        (st = get_number(&s->low_freq_factor, obj, "low_freq_factor", where, err)) ||
        (st = get_number(&s->high_freq_factor, obj, "high_freq_factor", where, err)) ||
        (st = get_mixed_b(s, obj, where, err)))
        return st;
    return get_lists(s, obj, where, err);
}

int refenc_rope_scaling_from_json(refenc_rope_scaling *s, const json_t *model, const char *where,
                                  refenc_error *err)
{
    char at[160];
    int st;
    snprintf(at, sizeof at, "%s.rope_scaling", where);
    const json_t *obj = json_object_get(model, "rope_scaling");
    if (obj != NULL) { /* the object is whole, as in HF: over a preset's (gte's) too */
        const double p = s->partial_rotary_factor;
        refenc_rope_scaling_default(s);
        s->partial_rotary_factor = p;
    }
    if (obj != NULL && !json_is_null(obj) && (st = read_object(s, obj, at, err)))
        return st;
    return get_number(&s->partial_rotary_factor, model, "partial_rotary_factor", where, err);
}

static json_t *factor_list(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++)
        if (json_array_append_new(a, json_real(v[i])) != 0)
            json_decref(a), a = NULL;
    return a;
}

int refenc_rope_scaling_to_json(json_t *j, const refenc_rope_scaling *s)
{
    int bad = 0;
    if (s->partial_rotary_factor != 1.0)
        bad |= json_object_set_new(j, "partial_rotary_factor", json_real(s->partial_rotary_factor));
    if (s->type == REFENC_ROPE_SCALING_NONE)
        return bad ? -1 : 0;
    json_t *o = json_pack("{s:s, s:f, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:b, s:f, s:f}",
                          "rope_type", refenc_rope_scaling_name(s->type), "factor", s->factor,
                          "max_position_embeddings", (json_int_t)s->max_position_embeddings,
                          "original_max_position_embeddings", (json_int_t)s->original_max_position_embeddings,
                          "attention_factor", s->attention_factor, "beta_fast", s->beta_fast,
                          "beta_slow", s->beta_slow, "mscale", s->mscale, "mscale_all_dim", s->mscale_all_dim,
                          "truncate", s->truncate, "low_freq_factor", s->low_freq_factor,
                          "high_freq_factor", s->high_freq_factor);
    if (o == NULL)
        return -1;
    if (s->mixed)
        bad |= json_object_set_new(o, "mixed_b", json_real(s->mixed_b));
    if (s->n_factors > 0) {
        bad |= json_object_set_new(o, "short_factor", factor_list(s->short_factor, s->n_factors));
        bad |= json_object_set_new(o, "long_factor", factor_list(s->long_factor, s->n_factors));
    }
    bad |= json_object_set_new(j, "rope_scaling", o);
    return bad ? -1 : 0;
}
