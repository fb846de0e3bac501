/* Reading a model config from JSON (ref/config_json.h): unknown keys, wrong
 * JSON types, unknown names and invalid values are errors whose message
 * starts with the location given by the caller and names the key. */
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>

#include "../../ref/io/config_json.h"
#include "unit.h"

typedef struct {
    const char *name;
    const char *json; /* the "model" object */
    int status;
    const char *fragment;
} json_error_case;

static const json_error_case json_errors[] = {
    {"unknown_key", "{\"d_modle\": 64}", REFENC_EINVAL, "model.d_modle: unknown key"},
    {"unknown_key_lists_known_keys", "{\"heads\": 4}", REFENC_EINVAL, "known keys: d_model, n_heads"},
    {"d_model_string", "{\"d_model\": \"64\"}", REFENC_EINVAL, "model.d_model: expected an integer"},
    {"d_model_real", "{\"d_model\": 64.0}", REFENC_EINVAL, "model.d_model: expected an integer"},
    {"d_model_boolean", "{\"d_model\": true}", REFENC_EINVAL, "model.d_model: expected an integer"},
    {"n_heads_null", "{\"n_heads\": null}", REFENC_EINVAL, "model.n_heads: expected an integer"},
    {"d_ff_negative", "{\"d_ff\": -256}", REFENC_EINVAL, "model.d_ff: expected an integer >= 0"},
    {"n_layers_array", "{\"n_layers\": [2]}", REFENC_EINVAL, "model.n_layers: expected an integer"},
    {"max_len_object", "{\"max_len\": {}}", REFENC_EINVAL, "model.max_len: expected an integer"},
    {"vocab_size_string", "{\"vocab_size\": \"1000\"}", REFENC_EINVAL, "model.vocab_size: expected an integer"},
    {"layer_norm_eps_string", "{\"layer_norm_eps\": \"1e-5\"}", REFENC_EINVAL,
     "model.layer_norm_eps: expected a number"},
    {"rope_base_boolean", "{\"rope_base\": false}", REFENC_EINVAL, "model.rope_base: expected a number"},
    {"temperature_null", "{\"temperature\": null}", REFENC_EINVAL, "model.temperature: expected a number"},
    {"causal_integer", "{\"causal\": 1}", REFENC_EINVAL, "model.causal: expected true or false"},
    {"final_norm_string", "{\"final_norm\": \"yes\"}", REFENC_EINVAL, "model.final_norm: expected true or false"},
    {"norm_integer", "{\"norm\": 1}", REFENC_EINVAL, "model.norm: expected a string"},
    {"activation_null", "{\"activation\": null}", REFENC_EINVAL, "model.activation: expected a string"},
    {"positional_array", "{\"positional\": [\"rope\"]}", REFENC_EINVAL, "model.positional: expected a string"},
    {"rope_layout_integer", "{\"rope_layout\": 0}", REFENC_EINVAL, "model.rope_layout: expected a string"},
    {"padding_idx_string", "{\"vocab_size\": 10, \"padding_idx\": \"0\"}", REFENC_EINVAL,
     "model.padding_idx: expected an integer"},
    {"padding_idx_real", "{\"vocab_size\": 10, \"padding_idx\": 0.5}", REFENC_EINVAL,
     "model.padding_idx: expected an integer"},
    {"norm_unknown_name", "{\"norm\": \"middle\"}", REFENC_EINVAL,
     "model.norm: unknown name 'middle' (expected one of 'pre', 'post')"},
    {"activation_unknown_name", "{\"activation\": \"swish\"}", REFENC_EINVAL,
     "model.activation: unknown name 'swish'"},
    {"positional_unknown_name", "{\"positional\": \"rotary\"}", REFENC_EINVAL,
     "model.positional: unknown name 'rotary'"},
    {"rope_layout_unknown_name", "{\"rope_layout\": \"neox\"}", REFENC_EINVAL,
     "model.rope_layout: unknown name 'neox'"},
    {"names_are_case_sensitive", "{\"activation\": \"GELU\"}", REFENC_EINVAL,
     "model.activation: unknown name 'GELU'"},
    {"not_an_object", "[]", REFENC_EINVAL, "model: expected a JSON object"},
    /* validation errors, re-labelled with the location */
    {"d_model_zero", "{\"d_model\": 0}", REFENC_EINVAL, "model: d_model must be at least 1"},
    {"d_model_not_divisible", "{\"d_model\": 10, \"n_heads\": 4}", REFENC_EINVAL,
     "model: d_model = 10 is not divisible by n_heads = 4"},
    {"rope_odd_head_width", "{\"d_model\": 12, \"n_heads\": 4, \"positional\": \"rope\"}", REFENC_EINVAL,
     "model: positional 'rope' needs an even head width"},
    {"sinusoidal_odd_d_model", "{\"d_model\": 9, \"n_heads\": 3, \"positional\": \"sinusoidal\"}",
     REFENC_EINVAL, "model: positional 'sinusoidal' needs an even d_model"},
    {"layer_norm_eps_negative", "{\"layer_norm_eps\": -1e-5}", REFENC_EINVAL, "model: layer_norm_eps"},
    {"temperature_zero", "{\"temperature\": 0}", REFENC_EINVAL, "model: temperature"},
    {"rope_base_one", "{\"rope_base\": 1}", REFENC_EINVAL, "model: rope_base"},
    {"padding_idx_out_of_range", "{\"vocab_size\": 10, \"padding_idx\": 10}", REFENC_EINVAL,
     "model: padding_idx = 10"},
    {"padding_idx_below_minus_one", "{\"vocab_size\": 10, \"padding_idx\": -3}", REFENC_EINVAL,
     "model: padding_idx = -3"},
    {"d_model_int64_max", "{\"d_model\": 9223372036854775807}", REFENC_ELIMIT,
     "model: d_model = 9223372036854775807 exceeds the limit"},
    {"vocab_size_over_limit", "{\"vocab_size\": 16777217}", REFENC_ELIMIT, "model: vocab_size = 16777217"},
    {"parameters_over_max_bytes", "{\"d_model\": 4096, \"n_heads\": 1, \"d_ff\": 16384, \"n_layers\": 24}",
     REFENC_ELIMIT, "model: the parameters need more than"},
};
#define N_JSON_ERRORS (sizeof json_errors / sizeof json_errors[0])

ParameterizedTestParameters(config_json, rejects_each_invalid_model_object)
{
    static size_t idx[N_JSON_ERRORS];
    for (size_t i = 0; i < N_JSON_ERRORS; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_JSON_ERRORS);
}

ParameterizedTest(size_t *i, config_json, rejects_each_invalid_model_object)
{
    const json_error_case *t = &json_errors[*i];
    json_error_t jerr;
    json_t *obj = json_loads(t->json, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    cr_assert_not_null(obj, "%s: the test's JSON does not parse: %s", t->name, jerr.text);
    refenc_config c;
    refenc_error err;
    refenc_error_clear(&err);
    const int st = refenc_config_from_json(&c, obj, "model", &err);
    json_decref(obj);
    cr_expect_eq(st, t->status, "%s: status %d (%s), want %d; message: %s", t->name, st,
                 refenc_status_name(st), t->status, err.message);
    cr_expect(strstr(err.message, t->fragment) != NULL, "%s: message '%s' does not contain '%s'",
              t->name, err.message, t->fragment);
    cr_expect(strncmp(err.message, "model", 5) == 0, "%s: message '%s' does not start with the location",
              t->name, err.message);
}

Test(config_json, every_key_is_read)
{
    const char *text =
        "{\"d_model\": 48, \"n_heads\": 6, \"d_ff\": 100, \"n_layers\": 3, \"norm\": \"post\","
        " \"activation\": \"gelu_tanh\", \"layer_norm_eps\": 0.001, \"final_norm\": true,"
        " \"positional\": \"rope\", \"rope_layout\": \"interleaved\", \"rope_base\": 500.5,"
        " \"max_len\": 77, \"temperature\": 0.75, \"causal\": true, \"vocab_size\": 321,"
        " \"padding_idx\": 320}";
    json_error_t jerr;
    json_t *obj = json_loads(text, 0, &jerr);
    cr_assert_not_null(obj, "%s", jerr.text);
    refenc_config c;
    refenc_error err;
    const int st = refenc_config_from_json(&c, obj, "model", &err);
    json_decref(obj);
    cr_assert_eq(st, REFENC_OK, "%s", err.message);
    cr_expect_eq(c.d_model, 48);
    cr_expect_eq(c.n_heads, 6);
    cr_expect_eq(c.d_ff, 100);
    cr_expect_eq(c.n_layers, 3);
    cr_expect_eq(c.norm, REFENC_NORM_POST);
    cr_expect_eq(c.activation, REFENC_ACT_GELU_TANH);
    cr_expect_eq(c.layer_norm_eps, 0.001);
    cr_expect_eq(c.final_norm, 1);
    cr_expect_eq(c.positional, REFENC_POS_ROPE);
    cr_expect_eq(c.rope_layout, REFENC_ROPE_INTERLEAVED);
    cr_expect_eq(c.rope_base, 500.5);
    cr_expect_eq(c.max_len, 77);
    cr_expect_eq(c.temperature, 0.75);
    cr_expect_eq(c.causal, 1);
    cr_expect_eq(c.vocab_size, 321);
    cr_expect_eq(c.padding_idx, 320);
}

/* Absent keys take the defaults; final_norm follows the placement (true for
 * Pre-LN, false for Post-LN, as nn.TransformerEncoder is used) unless given. */
Test(config_json, defaults_and_final_norm_follow_the_placement)
{
    const struct {
        const char *json;
        int norm, final_norm;
    } cases[] = {
        {"{}", REFENC_NORM_PRE, 1},
        {"{\"norm\": \"pre\"}", REFENC_NORM_PRE, 1},
        {"{\"norm\": \"post\"}", REFENC_NORM_POST, 0},
        {"{\"norm\": \"post\", \"final_norm\": true}", REFENC_NORM_POST, 1},
        {"{\"norm\": \"pre\", \"final_norm\": false}", REFENC_NORM_PRE, 0},
        {"{\"final_norm\": false, \"norm\": \"pre\"}", REFENC_NORM_PRE, 0}, /* key order is irrelevant */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_error_t jerr;
        json_t *obj = json_loads(cases[i].json, 0, &jerr);
        cr_assert_not_null(obj);
        refenc_config c, d;
        refenc_error err;
        const int st = refenc_config_from_json(&c, obj, "model", &err);
        json_decref(obj);
        cr_expect_eq(st, REFENC_OK, "%s: %s", cases[i].json, err.message);
        cr_expect_eq(c.norm, (refenc_norm_placement)cases[i].norm, "%s: norm", cases[i].json);
        cr_expect_eq(c.final_norm, cases[i].final_norm, "%s: final_norm", cases[i].json);
        refenc_config_default(&d);
        cr_expect_eq(c.d_model, d.d_model, "%s", cases[i].json);
        cr_expect_eq(c.layer_norm_eps, d.layer_norm_eps, "%s", cases[i].json);
        cr_expect_eq(c.rope_base, d.rope_base, "%s", cases[i].json);
    }
}

/* to_json writes every key; reading it back gives the same config. */
Test(config_json, to_json_round_trips)
{
    refenc_config c, back;
    refenc_config_default(&c);
    c.d_model = 30, c.n_heads = 5, c.d_ff = 7, c.n_layers = 1, c.norm = REFENC_NORM_POST;
    c.activation = REFENC_ACT_RELU, c.layer_norm_eps = 1e-6, c.final_norm = 1;
    c.positional = REFENC_POS_ALIBI, c.rope_layout = REFENC_ROPE_INTERLEAVED, c.rope_base = 123.25;
    c.max_len = 9, c.temperature = 2.385, c.causal = 1, c.vocab_size = 11, c.padding_idx = 3;
    json_t *obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    cr_expect_eq(json_object_size(obj), 16, "to_json wrote %zu keys", json_object_size(obj));
    refenc_error err;
    const int st = refenc_config_from_json(&back, obj, "model", &err);
    json_decref(obj);
    cr_assert_eq(st, REFENC_OK, "%s", err.message);
    cr_expect(memcmp(&c, &back, sizeof c) == 0, "the config changed through to_json/from_json");
}
