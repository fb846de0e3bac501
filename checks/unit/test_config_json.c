/* Reading a model config from JSON (ref/config_json.h): unknown keys, wrong
 * JSON types, unknown names and invalid values are errors whose message
 * starts with the location given by the caller and names the key. */
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>

#include "../../ref/core/family.h"
#include "../../ref/core/params.h"
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
    {"family_unknown_name", "{\"family\": \"xlnet\"}", REFENC_EINVAL,
     "model.family: unknown name 'xlnet' (expected one of 'vaswani', 'bert', 'roberta', "
     "'distilbert', 'gpt2', 'clip-text', 'llama', 'mistral', 'qwen2', 'qwen3', 'modernbert', 'gemma3', "
     "'t5-encoder', 'nomic-bert', 'jina-bert-v2', 'gte')"},
    {"sliding_window_null_over_mistral_without_causal", "{\"family\": \"mistral\", \"d_model\": 8, "
     "\"n_heads\": 2, \"n_kv_heads\": 1, \"d_ff\": 8, \"n_layers\": 1, \"vocab_size\": 5, "
     "\"causal\": false}", REFENC_EINVAL, "sliding_window"},
    {"llama_preset_alone_over_the_size_limit", "{\"family\": \"llama\"}", REFENC_ELIMIT,
     "model: the parameters need more than the limit"},
    {"family_integer", "{\"family\": 1}", REFENC_EINVAL, "model.family: expected a string"},
    {"scale_embedding_string", "{\"scale_embedding\": \"no\"}", REFENC_EINVAL,
     "model.scale_embedding: expected true or false"},
    {"type_vocab_size_real", "{\"vocab_size\": 9, \"type_vocab_size\": 2.0}", REFENC_EINVAL,
     "model.type_vocab_size: expected an integer"},
    {"embedding_norm_integer", "{\"embedding_norm\": 1}", REFENC_EINVAL,
     "model.embedding_norm: expected true or false"},
    {"embedding_norm_eps_string", "{\"embedding_norm_eps\": \"1e-12\"}", REFENC_EINVAL,
     "model.embedding_norm_eps: expected a number"},
    {"position_ids_unknown_name", "{\"position_ids\": \"absolute\"}", REFENC_EINVAL,
     "model.position_ids: unknown name 'absolute' (expected one of 'index', 'roberta')"},
    {"mask_value_unknown_name", "{\"mask_value\": \"-infinity\"}", REFENC_EINVAL,
     "model.mask_value: unknown name '-infinity' (expected one of '-inf', 'finfo_min')"},
    {"activation_quick_gelu_misspelt", "{\"activation\": \"gelu_quick\"}", REFENC_EINVAL,
     "model.activation: unknown name 'gelu_quick' (expected one of 'relu', 'gelu', 'gelu_tanh', "
     "'quick_gelu', 'silu')"},
    {"family_override_breaks_a_rule", "{\"family\": \"roberta\", \"positional\": \"sinusoidal\"}",
     REFENC_EINVAL, "model: position_ids 'roberta' index the learned PE table"},
    {"token_types_on_x_inputs", "{\"type_vocab_size\": 2}", REFENC_EINVAL,
     "model: type_vocab_size = 2 needs token inputs"},
    {"not_an_object", "[]", REFENC_EINVAL, "model: expected a JSON object"},
    /* Gemma's attention keys: absent or null is off, an explicit value > 0 */
    {"softcap_zero", "{\"attn_logit_softcapping\": 0}", REFENC_EINVAL,
     "model.attn_logit_softcapping: expected a number > 0 or null, got 0"},
    {"softcap_negative", "{\"attn_logit_softcapping\": -50.0}", REFENC_EINVAL,
     "model.attn_logit_softcapping: expected a number > 0 or null, got -50"},
    {"softcap_string", "{\"attn_logit_softcapping\": \"50\"}", REFENC_EINVAL,
     "model.attn_logit_softcapping: expected a number > 0 or null"},
    {"softcap_boolean", "{\"attn_logit_softcapping\": true}", REFENC_EINVAL,
     "model.attn_logit_softcapping: expected a number > 0 or null"},
    {"query_pre_attn_scalar_zero", "{\"query_pre_attn_scalar\": 0.0}", REFENC_EINVAL,
     "model.query_pre_attn_scalar: expected a number > 0 or null, got 0"},
    {"query_pre_attn_scalar_negative", "{\"query_pre_attn_scalar\": -144}", REFENC_EINVAL,
     "model.query_pre_attn_scalar: expected a number > 0 or null, got -144"},
    {"query_pre_attn_scalar_array", "{\"query_pre_attn_scalar\": [256]}", REFENC_EINVAL,
     "model.query_pre_attn_scalar: expected a number > 0 or null"},
    /* the windows: absent or null is off, an explicit value an integer >= 1 */
    {"sliding_window_zero", "{\"sliding_window\": 0, \"causal\": true}", REFENC_EINVAL,
     "model.sliding_window: expected an integer >= 1 or null"},
    {"sliding_window_negative", "{\"sliding_window\": -4, \"causal\": true}", REFENC_EINVAL,
     "model.sliding_window: expected an integer >= 1 or null"},
    {"sliding_window_real", "{\"sliding_window\": 4.0, \"causal\": true}", REFENC_EINVAL,
     "model.sliding_window: expected an integer >= 1 or null"},
    {"sliding_window_too_large", "{\"sliding_window\": 1048577, \"causal\": true}", REFENC_ELIMIT,
     "model.sliding_window: 1048577 exceeds 1048576"},
    {"sliding_window_not_causal", "{\"sliding_window\": 4}", REFENC_EINVAL,
     "sliding_window = 4 needs causal: true"},
    {"local_attention_zero", "{\"local_attention\": 0}", REFENC_EINVAL,
     "model.local_attention: expected an integer >= 1 or null"},
    {"local_attention_string", "{\"local_attention\": \"128\"}", REFENC_EINVAL,
     "model.local_attention: expected an integer >= 1 or null"},
    {"local_attention_too_large", "{\"local_attention\": 9223372036854775807}", REFENC_ELIMIT,
     "model.local_attention: 9223372036854775807 exceeds 1048576"},
    /* the layer pattern: a period an integer >= 1, the bases numbers > 0
     * (the reader), > 1 and only with the period (validate) */
    {"global_attn_every_n_layers_zero", "{\"global_attn_every_n_layers\": 0}", REFENC_EINVAL,
     "model.global_attn_every_n_layers: expected an integer >= 1 or null"},
    {"global_attn_every_n_layers_real", "{\"global_attn_every_n_layers\": 3.0}", REFENC_EINVAL,
     "model.global_attn_every_n_layers: expected an integer >= 1 or null"},
    {"global_attn_every_n_layers_too_large", "{\"global_attn_every_n_layers\": 1025}", REFENC_ELIMIT,
     "model.global_attn_every_n_layers: 1025 exceeds 1024"},
    {"local_rope_theta_string", "{\"global_attn_every_n_layers\": 3, \"local_rope_theta\": \"1e4\"}",
     REFENC_EINVAL, "model.local_rope_theta: expected a number > 0 or null"},
    {"global_rope_theta_negative", "{\"global_attn_every_n_layers\": 3, \"global_rope_theta\": -1}",
     REFENC_EINVAL, "model.global_rope_theta: expected a number > 0 or null, got -1"},
    {"local_rope_theta_one", "{\"global_attn_every_n_layers\": 3, \"local_rope_theta\": 1}",
     REFENC_EINVAL, "local_rope_theta must be finite and > 1 (0: rope_base), got 1"},
    {"global_rope_theta_without_pattern", "{\"global_rope_theta\": 160000}", REFENC_EINVAL,
     "global_rope_theta needs global_attn_every_n_layers or sliding_window_pattern"},
    {"normalizer_dtype_unknown", "{\"vocab_size\": 5, \"embedding_normalizer_dtype\": \"bf16\"}", REFENC_EINVAL,
     "model.embedding_normalizer_dtype: unknown name 'bf16'"},
    {"normalizer_dtype_number", "{\"vocab_size\": 5, \"embedding_normalizer_dtype\": 16}", REFENC_EINVAL,
     "model.embedding_normalizer_dtype"},
    {"normalizer_dtype_unscaled", "{\"vocab_size\": 5, \"scale_embedding\": false, "
     "\"embedding_normalizer_dtype\": \"float16\"}", REFENC_EINVAL, "needs scale_embedding and a vocabulary"},
    {"sliding_window_pattern_zero", "{\"sliding_window_pattern\": 0}", REFENC_EINVAL,
     "model.sliding_window_pattern: expected an integer >= 1 or null"},
    {"sliding_window_pattern_string", "{\"sliding_window_pattern\": \"6\"}", REFENC_EINVAL,
     "model.sliding_window_pattern: expected an integer >= 1 or null"},
    {"sliding_window_pattern_too_large", "{\"sliding_window_pattern\": 1025}", REFENC_ELIMIT,
     "model.sliding_window_pattern: 1025 exceeds 1024"},
    {"both_layer_patterns", "{\"sliding_window_pattern\": 6, \"global_attn_every_n_layers\": 3}", REFENC_EINVAL,
     "are two rules for the same pattern; give one"},
    /* Qwen's attention: qkv_bias a boolean, only on bias-free linears; qk_norm a name */
    {"qkv_bias_string", "{\"linear_bias\": false, \"qkv_bias\": \"true\"}", REFENC_EINVAL,
     "model.qkv_bias: expected true or false"},
    {"qkv_bias_with_linear_bias", "{\"qkv_bias\": true}", REFENC_EINVAL,
     "model: qkv_bias (Qwen2's biased q, k, v on bias-free linears) needs linear_bias false"},
    /* Jina's and GTE's linear1 without bias: a boolean, only beside biased linear maps */
    {"linear1_bias_string", "{\"linear1_bias\": \"false\"}", REFENC_EINVAL, "model.linear1_bias: expected true or false"},
    {"linear1_bias_without_linear_bias", "{\"linear_bias\": false, \"linear1_bias\": false}", REFENC_EINVAL,
     "model: linear1_bias false (linear1 bias-free beside biased linear maps: Jina-v2, GTE) needs linear_bias true"},
    {"qk_norm_unknown", "{\"qk_norm\": \"layernorm\"}", REFENC_EINVAL,
     "model.qk_norm: unknown name 'layernorm' (expected one of 'none', 'rms')"},
    {"qk_norm_boolean", "{\"qk_norm\": true}", REFENC_EINVAL, "model.qk_norm: expected a string"},
    /* ModernBERT's first layer: a boolean, Pre-LN only */
    {"skip_first_prenorm_integer", "{\"skip_first_prenorm\": 1}", REFENC_EINVAL,
     "model.skip_first_prenorm: expected true or false"},
    {"sandwich_norm_string", "{\"sandwich_norm\": \"yes\"}", REFENC_EINVAL,
     "model.sandwich_norm: expected true or false"},
    {"sandwich_norm_post_ln", "{\"norm\": \"post\", \"sandwich_norm\": true}", REFENC_EINVAL,
     "sandwich_norm needs norm 'pre'"},
    {"skip_first_prenorm_post_ln", "{\"norm\": \"post\", \"skip_first_prenorm\": true}", REFENC_EINVAL,
     "skip_first_prenorm needs norm 'pre'"},
    /* the pooling: a name or null; pooling_normalize a boolean, only with a pooling */
    {"pooling_unknown_name", "{\"pooling\": \"max\"}", REFENC_EINVAL,
     "model.pooling: unknown name 'max' (expected one of 'none', 'mean', 'cls', 'last_token')"},
    {"pooling_array", "{\"pooling\": [\"mean\"]}", REFENC_EINVAL, "model.pooling: expected a string"},
    {"pooling_normalize_integer", "{\"pooling\": \"cls\", \"pooling_normalize\": 1}", REFENC_EINVAL,
     "model.pooling_normalize: expected true or false"},
    {"pooling_normalize_alone", "{\"pooling_normalize\": true}", REFENC_EINVAL,
     "model.pooling_normalize: needs pooling"},
    {"pooling_normalize_with_none", "{\"pooling\": \"none\", \"pooling_normalize\": false}", REFENC_EINVAL,
     "model.pooling_normalize: needs pooling"},
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

/* c written with to_json has n_keys keys and reads back the same. */
static void expect_round_trip(const refenc_config *c, size_t n_keys)
{
    refenc_config back;
    json_t *obj = refenc_config_to_json(c);
    cr_assert_not_null(obj);
    cr_expect_eq(json_object_size(obj), n_keys, "to_json wrote %zu keys, want %zu",
                 json_object_size(obj), n_keys);
    refenc_error err;
    const int st = refenc_config_from_json(&back, obj, "model", &err);
    json_decref(obj);
    cr_assert_eq(st, REFENC_OK, "%s", err.message);
    cr_expect(memcmp(c, &back, sizeof back) == 0, "the config changed through to_json/from_json");
}

/* to_json writes the 16 keys every config has, and the keys of the
 * embedding path and the families only off their defaults (a config
 * without them writes what it always wrote: golden files regenerate byte for
 * byte); reading it back gives the same config. */
Test(config_json, to_json_round_trips)
{
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = 30, c.n_heads = 5, c.d_ff = 7, c.n_layers = 1, c.norm = REFENC_NORM_POST;
    c.activation = REFENC_ACT_RELU, c.layer_norm_eps = 1e-6, c.final_norm = 1;
    c.positional = REFENC_POS_ALIBI, c.rope_layout = REFENC_ROPE_INTERLEAVED, c.rope_base = 123.25;
    c.max_len = 9, c.temperature = 2.385, c.causal = 1, c.vocab_size = 11, c.padding_idx = 3;
    c.embedding_norm_eps = c.layer_norm_eps; /* its default follows layer_norm_eps */
    expect_round_trip(&c, 16);
    /* Gemma's keys only when set: two more keys, and they read back (the
     * values are not nice: %.17g must carry every bit) */
    c.attn_logit_softcapping = 7.3, c.query_pre_attn_scalar = 0.1 + 0.2;
    expect_round_trip(&c, 18);
    /* the windows only when set, as integers */
    c.sliding_window = 5, c.local_attention = 7;
    expect_round_trip(&c, 20);
    /* the layer pattern only when set */
    c.global_attn_every_n_layers = 3, c.local_rope_theta = 10000.5, c.global_rope_theta = 0.1 + 160000;
    expect_round_trip(&c, 23);
    /* Gemma 3's pattern instead of ModernBERT's */
    c.global_attn_every_n_layers = 0, c.sliding_window_pattern = 6;
    expect_round_trip(&c, 23);
    /* Gemma's normaliser dtype only when set, by name */
    c.vocab_size = 7, c.embedding_normalizer_dtype = REFENC_NORMALIZER_BFLOAT16;
    expect_round_trip(&c, 24);
    /* Qwen's keys only when set (linear_bias false is a key of its own) */
    c.linear_bias = 0, c.qkv_bias = 1, c.qk_norm = REFENC_QKNORM_RMS;
    expect_round_trip(&c, 27);
    /* the pooling only when set, with its normalisation */
    c.pooling = REFENC_POOL_LAST_TOKEN, c.pooling_normalize = 0;
    expect_round_trip(&c, 29);
    /* ModernBERT's first layer only when set (Pre-LN: norm keeps its key) */
    c.norm = REFENC_NORM_PRE, c.skip_first_prenorm = 1;
    expect_round_trip(&c, 30);
    /* Gemma 2/3's sandwich norms only when set */
    c.sandwich_norm = 1;
    expect_round_trip(&c, 31);
}

/* skip_first_prenorm: layer 0 has no norm1 tensors, the other layers have
 * theirs, and the parameter count drops by layer 0's (D). */
Test(config_json, skip_first_prenorm_drops_layer0_norm1)
{
    json_t *obj = json_loads("{\"d_model\": 8, \"n_heads\": 2, \"n_layers\": 2, \"norm_bias\": false, "
                             "\"skip_first_prenorm\": true}", 0, NULL);
    refenc_config c;
    refenc_error err;
    cr_assert_eq(refenc_config_from_json(&c, obj, "model", &err), REFENC_OK, "%s", err.message);
    json_decref(obj);
    cr_expect_eq(c.skip_first_prenorm, 1);
    refenc_params p;
    cr_assert_eq(refenc_params_alloc(&p, &c, &err), REFENC_OK, "%s", err.message);
    cr_expect_null(refenc_params_find(&p, "layers.0.norm1.weight"));
    cr_expect_null(p.layers[0].norm1_weight);
    cr_expect_not_null(refenc_params_find(&p, "layers.1.norm1.weight"));
    cr_expect_not_null(refenc_params_find(&p, "layers.0.norm2.weight"));
    c.skip_first_prenorm = 0;
    cr_expect_eq(refenc_config_param_count(&c), p.n_values + 8, "layer 0's norm1.weight (D 8)");
    refenc_params_free(&p);
}

/* sandwich_norm: every layer has post_attn_norm and post_ffn_norm (D), with
 * biases only under LayerNorm with norm_bias, after norm2. */
Test(config_json, sandwich_norm_makes_two_norms_a_layer)
{
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = 8, c.n_heads = 2, c.n_layers = 2, c.sandwich_norm = 1;
    refenc_params p;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&p, &c, &err), REFENC_OK, "%s", err.message);
    for (size_t i = 0; i < 2; i++) {
        cr_expect_eq(p.layers[i].post_attn_norm_weight, refenc_params_find(&p, i ? "layers.1.post_attn_norm.weight" : "layers.0.post_attn_norm.weight")->data);
        cr_expect_not_null(p.layers[i].post_ffn_norm_bias);
        cr_expect_eq(p.layers[i].post_attn_norm_weight, p.layers[i].norm2_bias + 8, "after norm2");
    }
    refenc_params_free(&p);
    c.norm_type = REFENC_NORMTYPE_RMSNORM;
    cr_assert_eq(refenc_params_alloc(&p, &c, &err), REFENC_OK, "%s", err.message);
    cr_expect_null(p.layers[0].post_attn_norm_bias);
    cr_expect_null(refenc_params_find(&p, "layers.0.post_ffn_norm.bias"));
    cr_expect_not_null(refenc_params_find(&p, "layers.1.post_ffn_norm.weight"));
    c.sandwich_norm = 0;
    cr_expect_eq(refenc_config_param_count(&c) + 2 * 2 * 8, p.n_values, "two (D) weights a layer");
    refenc_params_free(&p);
}

/* T5's relative bias keys only when set, both of them (max_distance's
 * default 128 is written too: reading "family" first must not change it);
 * an explicit 0 buckets is off, as T5Config's num_buckets 0 would be.
 * Negative control: without the writer's two keys the round trip reads
 * num_buckets 0 and the memcmp fails. */
Test(config_json, relative_bias_keys_round_trip)
{
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = 12, c.n_heads = 2, c.d_ff = 7, c.n_layers = 3, c.query_pre_attn_scalar = 1;
    c.relative_attention_num_buckets = 32, c.relative_attention_max_distance = 100;
    expect_round_trip(&c, 19); /* 16, query_pre_attn_scalar and the two */
    json_t *off = json_pack("{s:i, s:i}", "relative_attention_num_buckets", 0, "d_model", 12);
    refenc_config back;
    refenc_error err;
    cr_assert_eq(refenc_config_from_json(&back, off, "model", &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(back.relative_attention_num_buckets, 0);
    json_decref(off);
}

/* Qwen2's qkv_bias and Qwen3's qk_norm: in_proj_bias (E + 2 Ekv) with no
 * other linear bias; q_norm, k_norm (Dh) each after out_proj. */
Test(config_json, qwen_keys_make_their_tensors)
{
    json_t *obj = json_loads("{\"d_model\": 16, \"n_heads\": 4, \"n_kv_heads\": 2, \"head_dim\": 8, "
                             "\"linear_bias\": false, \"qkv_bias\": true, \"qk_norm\": \"rms\"}", 0, NULL);
    refenc_config c;
    refenc_error err;
    cr_assert_eq(refenc_config_from_json(&c, obj, "model", &err), REFENC_OK, "%s", err.message);
    json_decref(obj);
    cr_expect_eq(c.qkv_bias, 1);
    cr_expect_eq(c.qk_norm, REFENC_QKNORM_RMS);
    refenc_params p;
    cr_assert_eq(refenc_params_alloc(&p, &c, &err), REFENC_OK, "%s", err.message);
    const refenc_tensor *b = refenc_params_find(&p, "layers.0.self_attn.in_proj_bias");
    const refenc_tensor *q = refenc_params_find(&p, "layers.0.self_attn.q_norm.weight");
    const refenc_tensor *k = refenc_params_find(&p, "layers.0.self_attn.k_norm.weight");
    cr_expect(b != NULL && b->size == 32 + 2 * 16, "in_proj_bias (E + 2 Hkv Dh)");
    cr_expect(q != NULL && q->size == 8 && k != NULL && k->size == 8, "q_norm, k_norm (Dh)");
    cr_expect_null(refenc_params_find(&p, "layers.0.self_attn.out_proj.bias"), "o_proj is bias-free");
    cr_expect_null(refenc_params_find(&p, "layers.0.linear1.bias"), "the MLP is bias-free");
    cr_expect_eq(p.layers[0].q_norm_weight, q != NULL ? q->data : NULL);
    refenc_params_free(&p);
}

/* pooling's names (sentence-transformers' modes); absent, null and "none"
 * are no pooling; pooling_normalize defaults to true (the Normalize module
 * that the embedding models' modules.json list). */
Test(config_json, pooling_keys_are_read)
{
    const char *const texts[] = {"{\"pooling\": \"mean\"}", "{\"pooling\": \"cls\", \"pooling_normalize\": false}",
                                 "{\"pooling\": \"last_token\", \"pooling_normalize\": true}", "{\"pooling\": null}",
                                 "{\"pooling\": \"none\"}", "{}"};
    const refenc_pooling want[] = {REFENC_POOL_MEAN, REFENC_POOL_CLS, REFENC_POOL_LAST_TOKEN,
                                   REFENC_POOL_NONE, REFENC_POOL_NONE, REFENC_POOL_NONE};
    const int want_norm[] = {1, 0, 1, 1, 1, 1};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        json_t *obj = json_loads(texts[k], 0, NULL);
        refenc_config c;
        refenc_error err;
        cr_assert_eq(refenc_config_from_json(&c, obj, "model", &err), REFENC_OK, "%s: %s", texts[k], err.message);
        json_decref(obj);
        cr_expect_eq(c.pooling, want[k], "%s", texts[k]);
        cr_expect_eq(c.pooling_normalize, want_norm[k], "%s", texts[k]);
    }
}

/* c from the model object text, which must read without error. */
static void read_ok(refenc_config *c, const char *text)
{
    json_t *obj = json_loads(text, 0, NULL);
    cr_assert_not_null(obj, "%s: not JSON", text);
    refenc_error err;
    cr_assert_eq(refenc_config_from_json(c, obj, "model", &err), REFENC_OK, "%s: %s", text, err.message);
    json_decref(obj);
}

/* The windows with their Hugging Face names (Mistral's sliding_window,
 * ModernBERT's local_attention); null is off, as Qwen2's config.json writes
 * it with use_sliding_window false. */
Test(config_json, window_keys_are_read)
{
    refenc_config c;
    read_ok(&c, "{\"sliding_window\": 4096, \"causal\": true, \"local_attention\": 128}");
    cr_expect_eq(c.sliding_window, 4096);
    cr_expect_eq(c.local_attention, 128);
    read_ok(&c, "{\"sliding_window\": null}");
    cr_expect_eq(c.sliding_window, 0, "null must be off");
    cr_expect_eq(c.local_attention, 0, "absent must be off");
}

/* ModernBERT's layer pattern with its Hugging Face names and values; null
 * is off. */
Test(config_json, layer_pattern_keys_are_read)
{
    refenc_config c;
    read_ok(&c, "{\"global_attn_every_n_layers\": 3, \"local_rope_theta\": 10000.0, "
                "\"global_rope_theta\": 160000.0, \"local_attention\": 128}");
    cr_expect_eq(c.global_attn_every_n_layers, 3);
    cr_expect_eq(c.local_rope_theta, 10000.0);
    cr_expect_eq(c.global_rope_theta, 160000.0);
    read_ok(&c, "{\"global_attn_every_n_layers\": null, \"local_rope_theta\": null}");
    cr_expect_eq(c.global_attn_every_n_layers, 0, "null must be off");
    cr_expect_eq(c.local_rope_theta, 0, "null must be off");
    cr_expect_eq(c.global_rope_theta, 0, "absent must be off");
}

/* Gemma 3's pattern with its Hugging Face name (Gemma3TextConfig's
 * sliding_window_pattern, still on the Hub's configs); null is off. */
Test(config_json, gemma3_pattern_key_is_read)
{
    refenc_config c;
    read_ok(&c, "{\"sliding_window_pattern\": 6, \"local_rope_theta\": 10000.0, "
                "\"rope_base\": 1000000.0, \"sliding_window\": 512, \"causal\": true}");
    cr_expect_eq(c.sliding_window_pattern, 6);
    cr_expect_eq(c.global_attn_every_n_layers, 0);
    cr_expect_eq(c.local_rope_theta, 10000.0);
    read_ok(&c, "{\"sliding_window_pattern\": null}");
    cr_expect_eq(c.sliding_window_pattern, 0, "null must be off");
}

/* Gemma 2's keys with their Hugging Face names and values; null is off, as
 * Gemma 3's config.json writes it for the final logits. */
Test(config_json, gemma_attention_keys_are_read)
{
    const char *text = "{\"attn_logit_softcapping\": 50.0, \"query_pre_attn_scalar\": 144}";
    json_t *obj = json_loads(text, 0, NULL);
    refenc_config c;
    refenc_error err;
    cr_assert_eq(refenc_config_from_json(&c, obj, "model", &err), REFENC_OK, "%s", err.message);
    json_decref(obj);
    cr_expect_eq(c.attn_logit_softcapping, 50.0);
    cr_expect_eq(c.query_pre_attn_scalar, 144.0);
    obj = json_loads("{\"attn_logit_softcapping\": null}", 0, NULL);
    cr_assert_eq(refenc_config_from_json(&c, obj, "model", &err), REFENC_OK, "%s", err.message);
    json_decref(obj);
    cr_expect_eq(c.attn_logit_softcapping, 0.0, "null must be off");
    cr_expect_eq(c.query_pre_attn_scalar, 0.0, "absent must be the default");
}

/* The keys of the embedding path and the families are read. */
Test(config_json, every_embedding_and_family_key_is_read)
{
    const char *text =
        "{\"family\": \"roberta\", \"scale_embedding\": true, \"type_vocab_size\": 3,"
        " \"embedding_norm\": false, \"embedding_norm_eps\": 2.5e-7, \"position_ids\": \"index\","
        " \"mask_value\": \"-inf\", \"activation\": \"quick_gelu\"}";
    json_error_t jerr;
    json_t *obj = json_loads(text, 0, &jerr);
    cr_assert_not_null(obj, "%s", jerr.text);
    refenc_config c;
    refenc_error err;
    const int st = refenc_config_from_json(&c, obj, "model", &err);
    json_decref(obj);
    cr_assert_eq(st, REFENC_OK, "%s", err.message);
    cr_expect_eq(c.family, REFENC_FAMILY_ROBERTA);
    cr_expect_eq(c.scale_embedding, 1);
    cr_expect_eq(c.type_vocab_size, 3);
    cr_expect_eq(c.embedding_norm, 0);
    cr_expect_eq(c.embedding_norm_eps, 2.5e-7);
    cr_expect_eq(c.position_ids, REFENC_POSIDS_INDEX);
    cr_expect_eq(c.mask_value, REFENC_MASK_NEG_INF);
    cr_expect_eq(c.activation, REFENC_ACT_QUICK_GELU);
    cr_expect_eq(c.layer_norm_eps, 1e-5, "roberta's eps stays where not overridden");
    cr_expect_eq(c.max_len, 514, "roberta's table stays where not overridden");
}

/* Each family's preset, read from {"family": NAME}, against the values its
 * model's config and modeling code use (docs/families.md cites them); and
 * the defaults that follow other keys (final_norm, embedding_norm_eps)
 * follow them inside a family too. */
Test(config_json, each_family_sets_its_conventions_and_keys_override_them)
{
    static const struct {
        const char *name;
        refenc_family family;
        refenc_norm_placement norm;
        int final_norm, causal, embedding_norm;
        refenc_activation act;
        double eps;
        size_t D, H, F, N, V, P, T;
        int64_t padding_idx;
        refenc_position_ids posids;
    } fam[] = {
        {"vaswani", REFENC_FAMILY_VASWANI, REFENC_NORM_PRE, 1, 0, 0, REFENC_ACT_GELU, 1e-5,
         64, 4, 256, 2, 0, 512, 0, -1, REFENC_POSIDS_INDEX},
        {"bert", REFENC_FAMILY_BERT, REFENC_NORM_POST, 0, 0, 1, REFENC_ACT_GELU, 1e-12,
         768, 12, 3072, 12, 30522, 512, 2, 0, REFENC_POSIDS_INDEX},
        {"roberta", REFENC_FAMILY_ROBERTA, REFENC_NORM_POST, 0, 0, 1, REFENC_ACT_GELU, 1e-5,
         768, 12, 3072, 12, 50265, 514, 1, 1, REFENC_POSIDS_ROBERTA},
        {"distilbert", REFENC_FAMILY_DISTILBERT, REFENC_NORM_POST, 0, 0, 1, REFENC_ACT_GELU, 1e-12,
         768, 12, 3072, 6, 30522, 512, 0, 0, REFENC_POSIDS_INDEX},
        {"gpt2", REFENC_FAMILY_GPT2, REFENC_NORM_PRE, 1, 1, 0, REFENC_ACT_GELU_TANH, 1e-5,
         768, 12, 3072, 12, 50257, 1024, 0, -1, REFENC_POSIDS_INDEX},
        {"clip-text", REFENC_FAMILY_CLIP_TEXT, REFENC_NORM_PRE, 1, 1, 0, REFENC_ACT_QUICK_GELU, 1e-5,
         512, 8, 2048, 12, 49408, 77, 0, -1, REFENC_POSIDS_INDEX},
    };
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "{\"family\": \"%s\"}", fam[i].name);
        json_t *obj = json_loads(text, 0, NULL);
        refenc_config c;
        refenc_error err;
        cr_assert_eq(refenc_config_from_json(&c, obj, "model", &err), REFENC_OK, "%s: %s",
                     fam[i].name, err.message);
        json_decref(obj);
        const char *n = fam[i].name;
        const int vaswani = fam[i].family == REFENC_FAMILY_VASWANI;
        cr_expect_eq(c.family, fam[i].family, "%s", n);
        cr_expect_eq(c.norm, fam[i].norm, "%s: norm", n);
        cr_expect_eq(c.final_norm, fam[i].final_norm, "%s: final_norm", n);
        cr_expect_eq(c.causal, fam[i].causal, "%s: causal", n);
        cr_expect_eq(c.embedding_norm, fam[i].embedding_norm, "%s: embedding_norm", n);
        cr_expect_eq(c.activation, fam[i].act, "%s: activation", n);
        cr_expect_eq(c.layer_norm_eps, fam[i].eps, "%s: layer_norm_eps", n);
        cr_expect_eq(c.embedding_norm_eps, fam[i].eps, "%s: embedding_norm_eps", n);
        cr_expect_eq(c.d_model, fam[i].D, "%s: d_model", n);
        cr_expect_eq(c.n_heads, fam[i].H, "%s: n_heads", n);
        cr_expect_eq(c.d_ff, fam[i].F, "%s: d_ff", n);
        cr_expect_eq(c.n_layers, fam[i].N, "%s: n_layers", n);
        cr_expect_eq(c.vocab_size, fam[i].V, "%s: vocab_size", n);
        cr_expect_eq(c.max_len, fam[i].P, "%s: max_len", n);
        cr_expect_eq(c.type_vocab_size, fam[i].T, "%s: type_vocab_size", n);
        cr_expect_eq(c.padding_idx, fam[i].padding_idx, "%s: padding_idx", n);
        cr_expect_eq(c.position_ids, fam[i].posids, "%s: position_ids", n);
        cr_expect_eq(c.positional, vaswani ? REFENC_POS_NONE : REFENC_POS_LEARNED, "%s: positional", n);
        cr_expect_eq(c.scale_embedding, vaswani, "%s: scale_embedding", n);
        cr_expect_eq(c.mask_value, vaswani ? REFENC_MASK_NEG_INF : REFENC_MASK_FINFO_MIN,
                     "%s: mask_value", n);
    }

    /* overrides, in any key order; the following defaults follow */
    const char *text = "{\"layer_norm_eps\": 1e-6, \"norm\": \"pre\", \"family\": \"bert\","
                       " \"d_model\": 24, \"n_heads\": 3, \"vocab_size\": 50, \"max_len\": 9}";
    json_t *obj = json_loads(text, 0, NULL);
    refenc_config c;
    refenc_error err;
    cr_assert_eq(refenc_config_from_json(&c, obj, "model", &err), REFENC_OK, "%s", err.message);
    json_decref(obj);
    cr_expect_eq(c.layer_norm_eps, 1e-6);
    cr_expect_eq(c.embedding_norm_eps, 1e-6, "embedding_norm_eps follows layer_norm_eps");
    cr_expect_eq(c.final_norm, 1, "final_norm follows norm");
    cr_expect_eq(c.d_model, 24);
    cr_expect_eq(c.vocab_size, 50);
    cr_expect_eq(c.embedding_norm, 1, "the rest of the preset stays");
    cr_expect_eq(c.type_vocab_size, 2);
}

/* A family's config writes every key (23), and reads back the same; so does
 * one that overrides keys of its preset with the global defaults, which a
 * writer of only the keys off their default would lose. */
Test(config_json, family_configs_round_trip_with_every_key)
{
    refenc_config c;
    refenc_config_family(&c, REFENC_FAMILY_BERT);
    c.d_model = 24, c.n_heads = 3, c.d_ff = 40, c.n_layers = 2, c.vocab_size = 50, c.max_len = 9;
    c.embedding_norm = 0, c.mask_value = REFENC_MASK_NEG_INF, c.embedding_norm_eps = 3e-7;
    expect_round_trip(&c, 23);
}

/* The Llama-style presets (family.c): the base model's sizes and Llama's
 * conventions, each key overridable.  At full size a preset is over
 * REFENC_MAX_BYTES (Llama-3-8B's parameters in doubles), so the test reads
 * it with one layer and a small vocabulary. */
Test(config_json, llama_presets_set_the_base_models_sizes_and_conventions)
{
    static const struct {
        const char *name;
        refenc_family family;
        size_t D, H, Hkv, Dh, F, P, window;
        double theta, eps;
        int qkv_bias;
        refenc_qk_norm_type qk_norm;
    } fam[] = {
        {"llama", REFENC_FAMILY_LLAMA, 4096, 32, 8, 0, 14336, 8192, 0, 500000.0, 1e-5, 0, REFENC_QKNORM_NONE},
        {"mistral", REFENC_FAMILY_MISTRAL, 4096, 32, 8, 0, 14336, 32768, 4096, 10000.0, 1e-5, 0, REFENC_QKNORM_NONE},
        {"qwen2", REFENC_FAMILY_QWEN2, 3584, 28, 4, 0, 18944, 32768, 0, 1e6, 1e-6, 1, REFENC_QKNORM_NONE},
        {"qwen3", REFENC_FAMILY_QWEN3, 1024, 16, 8, 128, 3072, 32768, 0, 1e6, 1e-6, 0, REFENC_QKNORM_RMS},
    };
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "{\"family\": \"%s\", \"n_layers\": 1, \"vocab_size\": 100}", fam[i].name);
        json_t *obj = json_loads(text, 0, NULL);
        refenc_config c;
        refenc_error err;
        const char *n = fam[i].name;
        cr_assert_eq(refenc_config_from_json(&c, obj, "model", &err), REFENC_OK, "%s: %s", n, err.message);
        json_decref(obj);
        cr_expect(c.family == fam[i].family && c.d_model == fam[i].D && c.n_heads == fam[i].H &&
                  c.n_kv_heads == fam[i].Hkv && c.head_dim == fam[i].Dh && c.d_ff == fam[i].F &&
                  c.max_len == fam[i].P && c.sliding_window == fam[i].window, "%s: sizes", n);
        cr_expect(c.rope_base == fam[i].theta && c.layer_norm_eps == fam[i].eps && c.embedding_norm_eps == fam[i].eps,
                  "%s: rope_theta, rms_norm_eps", n);
        cr_expect(c.qkv_bias == fam[i].qkv_bias && c.qk_norm == fam[i].qk_norm, "%s: Qwen's keys", n);
        cr_expect(c.norm == REFENC_NORM_PRE && c.final_norm == 1 && c.norm_type == REFENC_NORMTYPE_RMSNORM &&
                  c.rmsnorm_offset == 0, "%s: Pre-norm RMSNorm and the final norm", n);
        cr_expect(c.ffn_type == REFENC_FFN_GLU && c.glu_gate == REFENC_GLU_GATE_FIRST &&
                  c.activation == REFENC_ACT_SILU && c.linear_bias == 0, "%s: SwiGLU, gate first, bias-free", n);
        cr_expect(c.positional == REFENC_POS_ROPE && c.rope_layout == REFENC_ROPE_HALF, "%s: RoPE rotate_half", n);
        cr_expect(c.causal == 1 && c.mask_value == REFENC_MASK_FINFO_MIN && c.scale_embedding == 0 &&
                  c.type_vocab_size == 0 && c.embedding_norm == 0 && c.padding_idx == -1 &&
                  c.pooling == REFENC_POOL_NONE, "%s: causal, finfo.min, the embedding unscaled", n);
    }
}

/* A Llama-style family's config writes the 23 keys of a family, norm_type,
 * linear_bias, ffn_type and n_kv_heads, and those of its preset (head_dim,
 * sliding_window, qkv_bias, qk_norm).  One that sets keys of its preset back to the
 * global defaults (bias, MLP, LayerNorm, no window, no q/k norm, multi-head)
 * or declares an embedding model on it (bidirectional, pooled) writes them
 * and reads back the same: reading "family" first would bring the preset
 * back.  A Mistral window turned off writes "sliding_window": null. */
Test(config_json, llama_family_configs_round_trip)
{
    for (int fam = REFENC_FAMILY_LLAMA; fam <= REFENC_FAMILY_QWEN3; fam++) {
        refenc_config c;
        refenc_config_family(&c, (refenc_family)fam);
        c.d_model = 16, c.n_heads = 4, c.n_kv_heads = 2, c.d_ff = 24, c.n_layers = 2, c.vocab_size = 50;
        c.max_len = 32, c.head_dim = c.head_dim ? 8 : 0, c.sliding_window = c.sliding_window ? 5 : 0;
        expect_round_trip(&c, 27 + (c.head_dim != 0) + (c.sliding_window != 0) + (c.qkv_bias != 0) +
                                  (c.qk_norm != REFENC_QKNORM_NONE));
        c.causal = 0, c.sliding_window = 0, c.pooling = REFENC_POOL_LAST_TOKEN; /* gte-Qwen2 */
        c.n_kv_heads = 4, c.qkv_bias = 0, c.qk_norm = REFENC_QKNORM_NONE;
        c.head_dim = c.head_dim ? 4 : 0; /* D / H, explicit (JSON has no head_dim 0) */
        c.linear_bias = 1, c.ffn_type = REFENC_FFN_MLP, c.norm_type = REFENC_NORMTYPE_LAYERNORM;
        c.activation = REFENC_ACT_GELU;
        refenc_config p;
        refenc_config_family(&p, (refenc_family)fam);
        json_t *obj = refenc_config_to_json(&c);
        cr_assert_not_null(obj);
        cr_expect(p.sliding_window == 0 || json_is_null(json_object_get(obj, "sliding_window")),
                  "%s: the window turned off is not written as null", refenc_family_name((refenc_family)fam));
        json_decref(obj);
        expect_round_trip(&c, 29 + (p.head_dim != 0) + (p.sliding_window != 0) + (p.qkv_bias != 0) +
                                  (p.qk_norm != REFENC_QKNORM_NONE));
    }
}

/* The modernbert preset: ModernBERT-base's sizes and conventions
 * (family.c), and its config round-trips, also with every key of its
 * preset set back to the global defaults (biased LayerNorms and linears,
 * an attention norm in layer 0, an MLP, no window or layer pattern, one
 * RoPE base), since reading "family" first brings the preset back. */
Test(config_json, modernbert_preset_and_round_trip)
{
    refenc_config c;
    refenc_config_family(&c, REFENC_FAMILY_MODERNBERT);
    cr_expect(c.d_model == 768 && c.n_heads == 12 && c.d_ff == 1152 && c.n_layers == 22);
    cr_expect(c.vocab_size == 50368 && c.max_len == 8192 && c.padding_idx == 50283);
    cr_expect(c.skip_first_prenorm && !c.norm_bias && !c.linear_bias && c.embedding_norm && !c.scale_embedding);
    cr_expect(c.ffn_type == REFENC_FFN_GLU && c.glu_gate == REFENC_GLU_GATE_FIRST && c.activation == REFENC_ACT_GELU);
    cr_expect(c.local_attention == 128 && c.global_attn_every_n_layers == 3);
    cr_expect(c.local_rope_theta == 10000.0 && c.global_rope_theta == 160000.0 && !c.causal);
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_MODERNBERT), "modernbert");
    c.d_model = 16, c.n_heads = 4, c.d_ff = 24, c.n_layers = 4, c.vocab_size = 50, c.max_len = 32, c.padding_idx = 0;
    c.local_attention = 6;
    json_t *obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    const size_t n = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n);
    c.norm_bias = 1, c.linear_bias = 1, c.skip_first_prenorm = 0, c.ffn_type = REFENC_FFN_MLP;
    c.local_attention = 0, c.global_attn_every_n_layers = 0, c.local_rope_theta = 0, c.global_rope_theta = 0;
    c.embedding_norm = 0, c.scale_embedding = 1;
    obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    const size_t n2 = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n2);
}

/* The gemma3 preset: Gemma-3-1B's sizes and conventions (family.c), and its
 * config round-trips, also with every key of its preset set back to the
 * global defaults (w rather than 1 + w, no sandwich norms, the exact
 * normaliser, sqrt(Dh) scores, no window or layer pattern, one RoPE base),
 * since reading "family" first brings the preset back; control: the writer's
 * old rules (rmsnorm_offset, the normaliser and the query scalar written only
 * off the global default) lose those three here. */
Test(config_json, gemma3_preset_and_round_trip)
{
    refenc_config c;
    refenc_config_family(&c, REFENC_FAMILY_GEMMA3);
    cr_expect(c.d_model == 1152 && c.n_heads == 4 && c.n_kv_heads == 1 && c.head_dim == 256);
    cr_expect(c.d_ff == 6912 && c.n_layers == 26 && c.vocab_size == 262144 && c.max_len == 32768);
    cr_expect(c.norm_type == REFENC_NORMTYPE_RMSNORM && c.rmsnorm_offset && c.sandwich_norm && c.layer_norm_eps == 1e-6);
    cr_expect(c.qk_norm == REFENC_QKNORM_RMS && !c.linear_bias && !c.qkv_bias && c.query_pre_attn_scalar == 256);
    cr_expect(c.ffn_type == REFENC_FFN_GLU && c.glu_gate == REFENC_GLU_GATE_FIRST &&
              c.activation == REFENC_ACT_GELU_TANH);
    cr_expect(c.sliding_window == 512 && c.sliding_window_pattern == 6 && c.local_rope_theta == 10000.0 &&
              c.rope_base == 1e6 && c.causal && c.padding_idx == 0);
    cr_expect(c.scale_embedding && c.embedding_normalizer_dtype == REFENC_NORMALIZER_BFLOAT16 && !c.embedding_norm);
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_GEMMA3), "gemma3");
    c.d_model = 16, c.n_heads = 4, c.head_dim = 8, c.d_ff = 24, c.n_layers = 3, c.vocab_size = 50, c.max_len = 32;
    c.sliding_window = 5, c.sliding_window_pattern = 3, c.query_pre_attn_scalar = 8;
    json_t *obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    const size_t n = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n);
    c.rmsnorm_offset = 0, c.sandwich_norm = 0, c.embedding_normalizer_dtype = REFENC_NORMALIZER_EXACT;
    c.query_pre_attn_scalar = 0, c.sliding_window = 0, c.sliding_window_pattern = 0, c.local_rope_theta = 0;
    c.qk_norm = REFENC_QKNORM_NONE, c.causal = 0;
    obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    const size_t n2 = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n2);
}

/* The t5-encoder preset: t5-base's sizes and T5's conventions (family.c),
 * and its config round-trips, also with every key of its preset set back to
 * the global defaults (LayerNorm, biases, scaled scores, no relative bias,
 * scaled embedding), which the writer then writes (null for the scalar and
 * the buckets), since reading "family" first brings the preset back. */
Test(config_json, t5_encoder_preset_and_round_trip)
{
    refenc_config c;
    refenc_config_family(&c, REFENC_FAMILY_T5_ENCODER);
    cr_expect(c.d_model == 768 && c.n_heads == 12 && c.d_ff == 3072 && c.n_layers == 12 && c.head_dim == 0);
    cr_expect(c.vocab_size == 32128 && c.max_len == 512 && c.padding_idx == -1);
    cr_expect(c.norm == REFENC_NORM_PRE && c.final_norm && c.norm_type == REFENC_NORMTYPE_RMSNORM &&
              !c.rmsnorm_offset && c.layer_norm_eps == 1e-6 && !c.linear_bias && !c.embedding_norm &&
              !c.scale_embedding);
    cr_expect(c.ffn_type == REFENC_FFN_MLP && c.activation == REFENC_ACT_RELU && c.positional == REFENC_POS_NONE);
    cr_expect(c.query_pre_attn_scalar == 1.0 && c.relative_attention_num_buckets == 32 &&
              c.relative_attention_max_distance == 128 && !c.causal && c.mask_value == REFENC_MASK_FINFO_MIN);
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_T5_ENCODER), "t5-encoder");
    refenc_error err;
    cr_expect_eq(refenc_config_validate(&c, &err), REFENC_OK, "t5-base itself: %s", err.message);
    c.d_model = 16, c.n_heads = 4, c.d_ff = 24, c.n_layers = 3, c.vocab_size = 50, c.max_len = 32;
    c.ffn_type = REFENC_FFN_GLU, c.activation = REFENC_ACT_GELU_TANH; /* v1.1 */
    json_t *obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    const size_t n = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n);
    c.norm_type = REFENC_NORMTYPE_LAYERNORM, c.linear_bias = 1, c.query_pre_attn_scalar = 0;
    c.relative_attention_num_buckets = 0, c.scale_embedding = 1, c.ffn_type = REFENC_FFN_MLP;
    obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    cr_expect(json_is_null(json_object_get(obj, "relative_attention_num_buckets")) &&
              json_is_null(json_object_get(obj, "query_pre_attn_scalar")), "the preset's keys turned off: null");
    const size_t n2 = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n2);
}

/* The nomic-bert preset: nomic-embed-text-v1.5's sizes and NomicBERT's
 * conventions (family.c), and its config round-trips, also with its dynamic
 * NTK declared (the model card's rotary_scaling_factor 2 over 2048 trained
 * positions) and with every key of its preset set back to the global
 * defaults (biases, an MLP, Pre-LN, no RoPE, no token types, no embedding
 * norm, no pooling), which reading "family" first would otherwise bring back. */
Test(config_json, nomic_bert_preset_and_round_trip)
{
    refenc_config c;
    refenc_config_family(&c, REFENC_FAMILY_NOMIC_BERT);
    cr_expect(c.d_model == 768 && c.n_heads == 12 && c.d_ff == 3072 && c.n_layers == 12);
    cr_expect(c.vocab_size == 30528 && c.max_len == 8192 && c.padding_idx == 0 && c.type_vocab_size == 2);
    cr_expect(c.norm == REFENC_NORM_POST && !c.final_norm && c.norm_type == REFENC_NORMTYPE_LAYERNORM && c.norm_bias &&
              c.layer_norm_eps == 1e-12 && c.embedding_norm && c.embedding_norm_eps == 1e-12 && !c.scale_embedding);
    cr_expect(!c.linear_bias && c.ffn_type == REFENC_FFN_GLU && c.glu_gate == REFENC_GLU_GATE_FIRST &&
              c.activation == REFENC_ACT_SILU);
    cr_expect(c.positional == REFENC_POS_ROPE && c.rope_layout == REFENC_ROPE_HALF && c.rope_base == 1000.0 &&
              c.rope_scaling.type == REFENC_ROPE_SCALING_NONE && !c.causal && c.mask_value == REFENC_MASK_FINFO_MIN);
    cr_expect(c.pooling == REFENC_POOL_MEAN && c.pooling_normalize, "the model card's mean, normalised");
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_NOMIC_BERT), "nomic-bert");
    refenc_error err;
    cr_expect_eq(refenc_config_validate(&c, &err), REFENC_OK, "nomic-embed-text-v1.5 itself: %s", err.message);
    c.d_model = 16, c.n_heads = 2, c.d_ff = 24, c.n_layers = 2, c.vocab_size = 50, c.max_len = 32;
    c.rope_scaling.type = REFENC_ROPE_SCALING_DYNAMIC, c.rope_scaling.factor = 2;
    c.rope_scaling.max_position_embeddings = 8;
    json_t *obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    const size_t n = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n);
    refenc_rope_scaling_default(&c.rope_scaling);
    c.norm = REFENC_NORM_PRE, c.final_norm = 1, c.linear_bias = 1, c.ffn_type = REFENC_FFN_MLP;
    c.activation = REFENC_ACT_GELU, c.positional = REFENC_POS_NONE, c.type_vocab_size = 0, c.embedding_norm = 0;
    c.pooling = REFENC_POOL_NONE;
    obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    const size_t n2 = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n2);
}

/* The jina-bert-v2 preset: jina-embeddings-v2-base-en's sizes and JinaBERT's
 * conventions (family.c), and its config round-trips, also with every key
 * of its preset set back to the global defaults (linear1 biased, an MLP,
 * Pre-LN, no ALiBi, no token types, no embedding norm, no pooling), which
 * reading "family" first would otherwise bring back. */
Test(config_json, jina_bert_v2_preset_and_round_trip)
{
    refenc_config c;
    refenc_config_family(&c, REFENC_FAMILY_JINA_BERT_V2);
    cr_expect(c.d_model == 768 && c.n_heads == 12 && c.d_ff == 3072 && c.n_layers == 12);
    cr_expect(c.vocab_size == 30528 && c.max_len == 8192 && c.padding_idx == 0 && c.type_vocab_size == 2);
    cr_expect(c.norm == REFENC_NORM_POST && !c.final_norm && c.norm_type == REFENC_NORMTYPE_LAYERNORM && c.norm_bias &&
              c.layer_norm_eps == 1e-12 && c.embedding_norm && c.embedding_norm_eps == 1e-12 && !c.scale_embedding);
    cr_expect(c.linear_bias && !c.linear1_bias && !refenc_config_has_linear1_bias(&c) && c.ffn_type == REFENC_FFN_GLU &&
              c.glu_gate == REFENC_GLU_GATE_FIRST && c.activation == REFENC_ACT_GELU);
    cr_expect(c.positional == REFENC_POS_ALIBI && !c.causal && c.mask_value == REFENC_MASK_FINFO_MIN &&
              c.pooling == REFENC_POOL_MEAN && c.pooling_normalize, "the model card's mean, normalised");
    refenc_error err;
    cr_expect_eq(refenc_config_validate(&c, &err), REFENC_OK, "jina-embeddings-v2-base-en itself: %s", err.message);
    c.d_model = 24, c.n_heads = 12, c.d_ff = 16, c.n_layers = 2, c.vocab_size = 50, c.max_len = 32;
    json_t *obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    const size_t n = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n);
    c.norm = REFENC_NORM_PRE, c.final_norm = 1, c.linear1_bias = 1, c.ffn_type = REFENC_FFN_MLP;
    c.positional = REFENC_POS_NONE, c.type_vocab_size = 0, c.embedding_norm = 0, c.pooling = REFENC_POOL_NONE;
    obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    const size_t n2 = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n2);
}

/* linear1_bias false (Jina-v2's gated_layers, GTE's up_gate_proj): linear1
 * has no bias while in_proj, out_proj and linear2 keep theirs; the parameter
 * count drops by linear1's rows (2F under a gated FFN); the key is written
 * only when set (every earlier golden writes what it wrote) and reads back. */
Test(config_json, linear1_bias_false_drops_linear1_bias_only)
{
    json_t *obj = json_loads("{\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 6, \"n_layers\": 2, \"ffn_type\": \"glu\", "
                             "\"linear1_bias\": false}", 0, NULL);
    refenc_config c, with;
    refenc_error err;
    cr_assert_eq(refenc_config_from_json(&c, obj, "model", &err), REFENC_OK, "%s", err.message);
    json_decref(obj);
    cr_expect(!refenc_config_has_linear1_bias(&c) && c.linear_bias);
    with = c;
    with.linear1_bias = 1;
    cr_expect_eq(refenc_config_param_count(&with) - refenc_config_param_count(&c), 2 * 2 * 6,
                 "two layers of linear1.bias (2F) fewer");
    refenc_params p;
    cr_assert_eq(refenc_params_alloc(&p, &c, &err), REFENC_OK, "%s", err.message);
    cr_expect_null(refenc_params_find(&p, "layers.0.linear1.bias"));
    cr_expect_not_null(refenc_params_find(&p, "layers.1.linear2.bias"));
    cr_expect_not_null(refenc_params_find(&p, "layers.0.self_attn.in_proj_bias"));
    cr_expect_not_null(refenc_params_find(&p, "layers.0.self_attn.out_proj.bias"));
    refenc_params_free(&p);
    json_t *w = refenc_config_to_json(&with);
    cr_assert_not_null(w);
    cr_expect_null(json_object_get(w, "linear1_bias"), "the default is not written");
    json_decref(w);
    w = refenc_config_to_json(&c);
    cr_assert_not_null(w);
    const size_t n = json_object_size(w);
    cr_expect(json_is_false(json_object_get(w, "linear1_bias")));
    json_decref(w);
    expect_round_trip(&c, n);
}

/* The gte preset: gte-base-en-v1.5's sizes and GTE's conventions (family.c):
 * biased linears but a bias-free linear1, the GLU's second half activated,
 * rope_theta 500000 with its ntk factor 2, CLS pooling normalised.  Its config
 * round-trips; with the preset's rope_scaling and pooling set off ("rope_scaling":
 * null and "pooling": "none" are written, else reading "family" first would bring
 * them back) and its other keys at the global defaults.  Negative control: the
 * same config written without those two keys reads back with the preset's ntk
 * and CLS pooling. */
Test(config_json, gte_preset_and_round_trip)
{
    refenc_config c;
    refenc_config_family(&c, REFENC_FAMILY_GTE);
    cr_expect(c.d_model == 768 && c.n_heads == 12 && c.d_ff == 3072 && c.n_layers == 12);
    cr_expect(c.vocab_size == 30528 && c.max_len == 8192 && c.padding_idx == 0 && c.type_vocab_size == 0);
    cr_expect(c.norm == REFENC_NORM_POST && !c.final_norm && c.norm_type == REFENC_NORMTYPE_LAYERNORM && c.norm_bias &&
              c.layer_norm_eps == 1e-12 && c.embedding_norm && c.embedding_norm_eps == 1e-12 && !c.scale_embedding);
    cr_expect(c.linear_bias && !c.linear1_bias && !refenc_config_has_linear1_bias(&c) && c.ffn_type == REFENC_FFN_GLU &&
              c.glu_gate == REFENC_GLU_GATE_SECOND && c.activation == REFENC_ACT_GELU);
    cr_expect(c.positional == REFENC_POS_ROPE && c.rope_layout == REFENC_ROPE_HALF && c.rope_base == 500000.0 &&
              c.rope_scaling.type == REFENC_ROPE_SCALING_NTK && c.rope_scaling.factor == 2.0 && !c.rope_scaling.mixed);
    cr_expect(!c.causal && c.mask_value == REFENC_MASK_FINFO_MIN && c.pooling == REFENC_POOL_CLS && c.pooling_normalize);
    refenc_error err;
    cr_expect_eq(refenc_config_validate(&c, &err), REFENC_OK, "gte-base-en-v1.5 itself: %s", err.message);
    c.d_model = 16, c.n_heads = 2, c.d_ff = 24, c.n_layers = 2, c.vocab_size = 50, c.max_len = 32;
    c.type_vocab_size = 2, c.rope_base = 160000.0; /* gte-large-en-v1.5's */
    json_t *obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    size_t n = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n);
    refenc_rope_scaling_default(&c.rope_scaling);
    c.pooling = REFENC_POOL_NONE;
    obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    cr_expect(json_is_null(json_object_get(obj, "rope_scaling")), "rope_scaling off the preset not written null");
    cr_expect_str_eq(json_string_value(json_object_get(obj, "pooling")), "none");
    n = json_object_size(obj);
    refenc_config back;
    json_object_del(obj, "rope_scaling"), json_object_del(obj, "pooling");
    cr_assert_eq(refenc_config_from_json(&back, obj, "model", &err), REFENC_OK, "%s", err.message);
    cr_expect(back.rope_scaling.type == REFENC_ROPE_SCALING_NTK && back.pooling == REFENC_POOL_CLS,
              "without the two keys the preset's did not come back: the control is void");
    json_decref(obj);
    expect_round_trip(&c, n);
    c.norm = REFENC_NORM_PRE, c.final_norm = 1, c.linear1_bias = 1, c.ffn_type = REFENC_FFN_MLP;
    c.positional = REFENC_POS_NONE, c.type_vocab_size = 0, c.embedding_norm = 0, c.pooling = REFENC_POOL_NONE;
    obj = refenc_config_to_json(&c);
    cr_assert_not_null(obj);
    n = json_object_size(obj);
    json_decref(obj);
    expect_round_trip(&c, n);
}
