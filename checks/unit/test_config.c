/* Config validation (ref/config.h): every invalid value or combination is
 * refused with its status code and a message naming the field; the limits
 * are enforced before anything is allocated; size arithmetic is overflow
 * checked.  Each error case is one parameterized test instance over the
 * table below; each comes with a valid neighbour (positive control) where
 * one exists, so the check is not passing because everything is refused. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "../../ref/core/config.h"
#include "../../ref/encoder.h"
#include "../../ref/core/params.h"
#include "unit.h"

/* X(name, mutation of the default config c, status, fragment the message must contain) */
#define CONFIG_ERRORS(X)                                                                         \
    X(d_model_zero, c->d_model = 0, REFENC_EINVAL, "d_model must be at least 1")                 \
    X(n_heads_zero, c->n_heads = 0, REFENC_EINVAL, "n_heads must be at least 1")                 \
    X(d_ff_zero, c->d_ff = 0, REFENC_EINVAL, "d_ff must be at least 1")                          \
    X(n_layers_zero, c->n_layers = 0, REFENC_EINVAL, "n_layers must be at least 1")              \
    X(max_len_zero, c->max_len = 0, REFENC_EINVAL, "max_len must be at least 1")                 \
    X(d_model_over_limit, c->d_model = REFENC_MAX_DIM + 1, REFENC_ELIMIT, "d_model = 1048577")   \
    X(n_heads_over_limit, c->n_heads = REFENC_MAX_HEADS + 1, REFENC_ELIMIT, "n_heads = 1025")    \
    X(d_ff_over_limit, c->d_ff = REFENC_MAX_DIM + 1, REFENC_ELIMIT, "d_ff = 1048577")            \
    X(n_layers_over_limit, c->n_layers = REFENC_MAX_LAYERS + 1, REFENC_ELIMIT, "n_layers = 1025") \
    X(max_len_over_limit, c->max_len = REFENC_MAX_DIM + 1, REFENC_ELIMIT, "max_len = 1048577")   \
    X(vocab_size_over_limit, c->vocab_size = REFENC_MAX_VOCAB + 1, REFENC_ELIMIT,                \
      "vocab_size = 16777217")                                                                   \
    X(norm_out_of_range, c->norm = (refenc_norm_placement)2, REFENC_EINVAL, "norm")              \
    X(activation_out_of_range, c->activation = (refenc_activation)5, REFENC_EINVAL, "activation") \
    X(positional_out_of_range, c->positional = (refenc_positional)5, REFENC_EINVAL, "positional") \
    X(rope_layout_out_of_range, c->rope_layout = (refenc_rope_layout)2, REFENC_EINVAL,           \
      "rope_layout")                                                                             \
    X(final_norm_not_boolean, c->final_norm = 2, REFENC_EINVAL, "final_norm")                    \
    X(causal_not_boolean, c->causal = -1, REFENC_EINVAL, "causal")                               \
    X(d_model_not_divisible_by_n_heads, (c->d_model = 10, c->n_heads = 4), REFENC_EINVAL,        \
      "d_model = 10 is not divisible by n_heads = 4")                                            \
    X(rope_with_odd_head_width, (c->d_model = 12, c->n_heads = 4, c->positional = REFENC_POS_ROPE), \
      REFENC_EINVAL, "positional 'rope' needs an even head width")                               \
    X(sinusoidal_with_odd_d_model, (c->d_model = 9, c->n_heads = 3,                              \
                                    c->positional = REFENC_POS_SINUSOIDAL),                      \
      REFENC_EINVAL, "positional 'sinusoidal' needs an even d_model")                            \
    X(eps_negative, c->layer_norm_eps = -1e-12, REFENC_EINVAL, "layer_norm_eps")                 \
    X(eps_nan, c->layer_norm_eps = NAN, REFENC_EINVAL, "layer_norm_eps")                         \
    X(eps_infinite, c->layer_norm_eps = INFINITY, REFENC_EINVAL, "layer_norm_eps")               \
    X(temperature_zero, c->temperature = 0.0, REFENC_EINVAL, "temperature")                      \
    X(temperature_negative, c->temperature = -1.0, REFENC_EINVAL, "temperature")                 \
    X(temperature_nan, c->temperature = NAN, REFENC_EINVAL, "temperature")                       \
    X(temperature_infinite, c->temperature = INFINITY, REFENC_EINVAL, "temperature")             \
    X(rope_base_one, c->rope_base = 1.0, REFENC_EINVAL, "rope_base")                             \
    X(rope_base_below_one, c->rope_base = 0.5, REFENC_EINVAL, "rope_base")                       \
    X(rope_base_nan, c->rope_base = NAN, REFENC_EINVAL, "rope_base")                             \
    X(rope_base_infinite, c->rope_base = INFINITY, REFENC_EINVAL, "rope_base")                   \
    X(padding_idx_equal_to_vocab_size, (c->vocab_size = 10, c->padding_idx = 10), REFENC_EINVAL, \
      "padding_idx = 10")                                                                        \
    X(padding_idx_below_minus_one, (c->vocab_size = 10, c->padding_idx = -2), REFENC_EINVAL,     \
      "padding_idx = -2")                                                                        \
    X(padding_idx_without_vocabulary, c->padding_idx = 0, REFENC_EINVAL, "padding_idx = 0")      \
    X(type_vocab_size_over_limit, (c->vocab_size = 4, c->type_vocab_size = REFENC_MAX_VOCAB + 1), \
      REFENC_ELIMIT, "type_vocab_size = 16777217")                                               \
    X(token_types_without_tokens, c->type_vocab_size = 2, REFENC_EINVAL,                         \
      "type_vocab_size = 2 needs token inputs")                                                  \
    X(family_out_of_range, c->family = REFENC_FAMILY_COUNT, REFENC_EINVAL, "family")             \
    X(position_ids_out_of_range, c->position_ids = (refenc_position_ids)2, REFENC_EINVAL,        \
      "position_ids")                                                                            \
    X(mask_value_out_of_range, c->mask_value = (refenc_mask_value)2, REFENC_EINVAL, "mask_value") \
    X(scale_embedding_not_boolean, c->scale_embedding = 2, REFENC_EINVAL, "scale_embedding")     \
    X(embedding_norm_not_boolean, c->embedding_norm = -1, REFENC_EINVAL, "embedding_norm")       \
    X(embedding_norm_eps_negative, c->embedding_norm_eps = -1e-12, REFENC_EINVAL,                \
      "embedding_norm_eps")                                                                      \
    X(embedding_norm_eps_nan, c->embedding_norm_eps = NAN, REFENC_EINVAL, "embedding_norm_eps")  \
    X(softcap_negative, c->attn_logit_softcapping = -50.0, REFENC_EINVAL,                        \
      "attn_logit_softcapping must be finite and > 0 (0: off), got -50")                         \
    X(softcap_nan, c->attn_logit_softcapping = NAN, REFENC_EINVAL, "attn_logit_softcapping")     \
    X(softcap_infinite, c->attn_logit_softcapping = INFINITY, REFENC_EINVAL,                     \
      "attn_logit_softcapping")                                                                  \
    X(query_pre_attn_scalar_negative, c->query_pre_attn_scalar = -256.0, REFENC_EINVAL,          \
      "query_pre_attn_scalar must be finite and > 0 (0: head_dim), got -256")                    \
    X(query_pre_attn_scalar_nan, c->query_pre_attn_scalar = NAN, REFENC_EINVAL,                  \
      "query_pre_attn_scalar")                                                                   \
    X(query_pre_attn_scalar_infinite, c->query_pre_attn_scalar = -INFINITY, REFENC_EINVAL,       \
      "query_pre_attn_scalar")                                                                   \
    X(sliding_window_without_causal, c->sliding_window = 4, REFENC_EINVAL,                       \
      "sliding_window = 4 needs causal: true")                                                   \
    X(sliding_window_over_limit, (c->causal = 1, c->sliding_window = REFENC_MAX_DIM + 1),        \
      REFENC_ELIMIT, "sliding_window = 1048577")                                                 \
    X(local_attention_over_limit, c->local_attention = REFENC_MAX_DIM + 1, REFENC_ELIMIT,        \
      "local_attention = 1048577")                                                               \
    X(global_attn_every_n_layers_over_limit, c->global_attn_every_n_layers = REFENC_MAX_LAYERS + 1, \
      REFENC_ELIMIT, "global_attn_every_n_layers = 1025")                                        \
    X(local_rope_theta_nan, (c->global_attn_every_n_layers = 3, c->local_rope_theta = NAN),       \
      REFENC_EINVAL, "local_rope_theta must be finite and > 1")                                  \
    X(global_rope_theta_below_one, (c->global_attn_every_n_layers = 3, c->global_rope_theta = 0.5), \
      REFENC_EINVAL, "global_rope_theta must be finite and > 1")                                 \
    X(local_rope_theta_without_pattern, c->local_rope_theta = 10000.0, REFENC_EINVAL,             \
      "local_rope_theta needs global_attn_every_n_layers")                                       \
    X(normalizer_dtype_out_of_range, c->embedding_normalizer_dtype = (refenc_normalizer_dtype)9, REFENC_EINVAL, \
      "embedding_normalizer_dtype is not a known dtype")                                        \
    X(normalizer_dtype_without_vocabulary, c->embedding_normalizer_dtype = REFENC_NORMALIZER_BFLOAT16,  \
      REFENC_EINVAL, "embedding_normalizer_dtype 'bfloat16' needs scale_embedding and a vocabulary") \
    X(sliding_window_pattern_over_limit, c->sliding_window_pattern = REFENC_MAX_LAYERS + 1,       \
      REFENC_ELIMIT, "sliding_window_pattern = 1025")                                            \
    X(both_layer_patterns, (c->global_attn_every_n_layers = 2, c->sliding_window_pattern = 2),    \
      REFENC_EINVAL, "are two rules for the same pattern")                                       \
    X(partial_rotary_with_gemma3_pattern,                                                         \
      (c->sliding_window_pattern = 2, c->rope_scaling.partial_rotary_factor = 0.5), REFENC_EINVAL, \
      "partial_rotary_factor with sliding_window_pattern is not supported")                      \
    X(roberta_positions_without_learned_table, (c->vocab_size = 10, c->padding_idx = 1,          \
                                                c->position_ids = REFENC_POSIDS_ROBERTA),        \
      REFENC_EINVAL, "position_ids 'roberta' index the learned PE table")                        \
    X(roberta_positions_without_padding_idx, (c->vocab_size = 10, c->positional = REFENC_POS_LEARNED, \
                                              c->position_ids = REFENC_POSIDS_ROBERTA),          \
      REFENC_EINVAL, "position_ids 'roberta' count from padding_idx")                            \
    X(roberta_first_position_outside_table, (c->vocab_size = 10, c->padding_idx = 3,             \
                                             c->positional = REFENC_POS_LEARNED, c->max_len = 4, \
                                             c->position_ids = REFENC_POSIDS_ROBERTA),           \
      REFENC_EINVAL, "start at padding_idx + 1 = 4, outside the max_len = 4 rows")               \
    /* V D = 2^29 doubles = 4 GiB on its own: with the layers, over REFENC_MAX_BYTES */          \
    X(parameters_over_max_bytes_by_vocabulary, (c->vocab_size = REFENC_MAX_VOCAB, c->d_model = 32, \
                                                c->n_heads = 1, c->d_ff = 1, c->n_layers = 1),   \
      REFENC_ELIMIT, "parameters need more than")                                                \
    /* 1024 layers of 6 * 1024^2 doubles: 48 GiB */                                              \
    X(parameters_over_max_bytes_by_layers, (c->d_model = 1024, c->d_ff = 1024, c->n_layers = 1024), \
      REFENC_ELIMIT, "parameters need more than")

typedef void (*config_mutation)(refenc_config *c);
typedef struct {
    const char *name;
    config_mutation mutate;
    int status;
    const char *fragment;
} config_error_case;

#define DEFINE_MUTATION(name, stmt, st, frag) \
    static void mutate_##name(refenc_config *c) { stmt; }
CONFIG_ERRORS(DEFINE_MUTATION)
#define TABLE_ROW(name, stmt, st, frag) {#name, mutate_##name, st, frag},
static const config_error_case config_errors[] = {CONFIG_ERRORS(TABLE_ROW)};
#define N_CONFIG_ERRORS (sizeof config_errors / sizeof config_errors[0])

ParameterizedTestParameters(config, validate_rejects_each_invalid_field)
{
    static size_t idx[N_CONFIG_ERRORS];
    for (size_t i = 0; i < N_CONFIG_ERRORS; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_CONFIG_ERRORS);
}

ParameterizedTest(size_t *i, config, validate_rejects_each_invalid_field)
{
    const config_error_case *t = &config_errors[*i];
    refenc_config c;
    refenc_error err;
    refenc_config_default(&c);
    t->mutate(&c);
    refenc_error_clear(&err);
    const int st = refenc_config_validate(&c, &err);
    cr_expect_eq(st, t->status, "%s: status %d (%s), want %d (%s); message: %s", t->name, st,
                 refenc_status_name(st), t->status, refenc_status_name(t->status), err.message);
    cr_expect_eq(err.status, st, "%s: err.status %d differs from the returned %d", t->name,
                 err.status, st);
    cr_expect(strstr(err.message, t->fragment) != NULL, "%s: message '%s' does not contain '%s'",
              t->name, err.message, t->fragment);
    cr_expect(strncmp(err.message, "config: ", 8) == 0, "%s: message '%s' does not start with 'config: '",
              t->name, err.message);
    /* the same config cannot be allocated either, and nothing is allocated */
    refenc_params p;
    const int pst = refenc_params_alloc(&p, &c, NULL);
    cr_expect_eq(pst, t->status, "%s: refenc_params_alloc returned %d", t->name, pst);
    cr_expect_null(p.block, "%s: parameters were allocated for an invalid config", t->name);
    refenc_params_free(&p);
}

/* Positive controls: the defaults and the valid neighbours of the cases above. */
Test(config, defaults_and_boundary_values_are_valid)
{
    refenc_config c;
    refenc_error err;
#define EXPECT_VALID(stmt)                                                                  \
    do {                                                                                    \
        refenc_config_default(&c);                                                          \
        stmt;                                                                               \
        refenc_error_clear(&err);                                                           \
        const int st_ = refenc_config_validate(&c, &err);                                   \
        cr_expect_eq(st_, REFENC_OK, "'%s' refused: %s", #stmt, err.message);               \
    } while (0)
    EXPECT_VALID((void)0);
    EXPECT_VALID((c.d_model = 1024, c.n_heads = REFENC_MAX_HEADS));
    EXPECT_VALID((c.d_model = 8, c.d_ff = 8, c.n_layers = REFENC_MAX_LAYERS));
    EXPECT_VALID(c.max_len = REFENC_MAX_DIM);
    EXPECT_VALID((c.d_model = 12, c.n_heads = 3, c.positional = REFENC_POS_ROPE)); /* Dh = 4 */
    EXPECT_VALID((c.d_model = 12, c.n_heads = 4));                       /* odd Dh, no RoPE */
    EXPECT_VALID((c.d_model = 10, c.n_heads = 5, c.positional = REFENC_POS_SINUSOIDAL));
    EXPECT_VALID((c.d_model = 9, c.n_heads = 3));                        /* odd D, no sinusoidal */
    EXPECT_VALID(c.layer_norm_eps = 0.0);
    EXPECT_VALID(c.temperature = 0x1p-1074);
    EXPECT_VALID(c.rope_base = 1.0000000000000002);
    EXPECT_VALID((c.vocab_size = 10, c.padding_idx = 9));
    EXPECT_VALID((c.vocab_size = 10, c.padding_idx = -1));
    EXPECT_VALID((c.norm = REFENC_NORM_POST, c.final_norm = 0));
    EXPECT_VALID((c.norm = REFENC_NORM_POST, c.final_norm = 1));
    EXPECT_VALID((c.vocab_size = 4, c.type_vocab_size = 1));
    EXPECT_VALID((c.vocab_size = 4, c.type_vocab_size = 2, c.scale_embedding = 0,
                  c.embedding_norm = 1, c.embedding_norm_eps = 0.0));
    EXPECT_VALID(c.embedding_norm = 1);                                  /* LN over x inputs */
    EXPECT_VALID((c.family = REFENC_FAMILY_CLIP_TEXT, c.mask_value = REFENC_MASK_FINFO_MIN));
    EXPECT_VALID((c.activation = REFENC_ACT_QUICK_GELU));
    EXPECT_VALID((c.attn_logit_softcapping = 50.0, c.query_pre_attn_scalar = 256.0)); /* Gemma 2 */
    EXPECT_VALID((c.attn_logit_softcapping = 0x1p-1074, c.query_pre_attn_scalar = 0x1p-1074));
    EXPECT_VALID((c.attn_logit_softcapping = DBL_MAX, c.query_pre_attn_scalar = DBL_MAX));
    EXPECT_VALID((c.causal = 1, c.sliding_window = 1, c.local_attention = REFENC_MAX_DIM));
    EXPECT_VALID((c.global_attn_every_n_layers = REFENC_MAX_LAYERS, c.local_rope_theta = 0x1.0000000000001p0,
                  c.global_rope_theta = DBL_MAX));
    EXPECT_VALID((c.global_attn_every_n_layers = 1)); /* every layer global, bases rope_base */
    EXPECT_VALID((c.sliding_window_pattern = REFENC_MAX_LAYERS, c.local_rope_theta = 10000.0));
    EXPECT_VALID((c.vocab_size = 10, c.embedding_normalizer_dtype = REFENC_NORMALIZER_FLOAT16));
    EXPECT_VALID((c.vocab_size = 10, c.padding_idx = 3, c.positional = REFENC_POS_LEARNED,
                  c.max_len = 5, c.position_ids = REFENC_POSIDS_ROBERTA)); /* positions 4 on */
    /* V = 2^24, D = 31: 520093696 + 4248 doubles, just under 2^29 = 536870912 */
    EXPECT_VALID((c.vocab_size = REFENC_MAX_VOCAB, c.d_model = 31, c.n_heads = 1, c.d_ff = 1,
                  c.n_layers = 1));
#undef EXPECT_VALID
}

/* validate_shape: the input (B, L) against the config and the memory limit. */
#define SHAPE_ERRORS(X)                                                                        \
    X(batch_zero, (void)0, 0, 8, REFENC_EINVAL, "input batch (B) must be at least 1")          \
    X(seq_len_zero, (void)0, 2, 0, REFENC_EINVAL, "input seq_len (L) must be at least 1")      \
    X(batch_over_limit, (void)0, REFENC_MAX_BATCH + 1, 8, REFENC_ELIMIT, "input batch (B) = 65537") \
    X(seq_len_over_limit, (void)0, 1, REFENC_MAX_DIM + 1, REFENC_ELIMIT,                       \
      "input seq_len (L) = 1048577")                                                           \
    X(seq_len_over_max_len_with_learned_pe, (c->positional = REFENC_POS_LEARNED, c->max_len = 16), \
      2, 17, REFENC_EINVAL, "seq_len = 17 exceeds max_len = 16")                               \
    /* 14 (B, L, D) buffers of 2^16 * 2^10 * 64 doubles: 56 TiB */                             \
    X(activations_over_max_bytes, (void)0, REFENC_MAX_BATCH, 1024, REFENC_ELIMIT,              \
      "forward pass on batch 65536 x seq_len 1024 needs more than")                            \
    /* the attention weights (B, H, L, L) alone: 2^10 * 4 * 2^20 doubles */                    \
    X(attention_weights_over_max_bytes, (c->d_model = 4, c->n_heads = 4, c->d_ff = 1), 1024,   \
      1024, REFENC_ELIMIT, "needs more than")                                                  \
    X(roberta_positions_past_the_table, (c->vocab_size = 10, c->padding_idx = 1,                \
                                         c->positional = REFENC_POS_LEARNED, c->max_len = 10,   \
                                         c->position_ids = REFENC_POSIDS_ROBERTA),              \
      2, 9, REFENC_EINVAL, "reaches position padding_idx + seq_len = 10, outside the max_len = 10") \
    X(config_error_comes_first, c->temperature = 0.0, 2, 8, REFENC_EINVAL, "temperature")

typedef struct {
    const char *name;
    config_mutation mutate;
    size_t B, L;
    int status;
    const char *fragment;
} shape_error_case;

#define DEFINE_SHAPE_MUTATION(name, stmt, B, L, st, frag) \
    static void shape_mutate_##name(refenc_config *c) { (void)c; stmt; }
SHAPE_ERRORS(DEFINE_SHAPE_MUTATION)
#define SHAPE_ROW(name, stmt, B, L, st, frag) {#name, shape_mutate_##name, B, L, st, frag},
static const shape_error_case shape_errors[] = {SHAPE_ERRORS(SHAPE_ROW)};
#define N_SHAPE_ERRORS (sizeof shape_errors / sizeof shape_errors[0])

ParameterizedTestParameters(config, validate_shape_rejects_each_invalid_input_shape)
{
    static size_t idx[N_SHAPE_ERRORS];
    for (size_t i = 0; i < N_SHAPE_ERRORS; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_SHAPE_ERRORS);
}

ParameterizedTest(size_t *i, config, validate_shape_rejects_each_invalid_input_shape)
{
    const shape_error_case *t = &shape_errors[*i];
    refenc_config c;
    refenc_error err;
    refenc_config_default(&c);
    t->mutate(&c);
    refenc_error_clear(&err);
    const int st = refenc_config_validate_shape(&c, t->B, t->L, &err);
    cr_expect_eq(st, t->status, "%s: status %d, want %d; message: %s", t->name, st, t->status,
                 err.message);
    cr_expect(strstr(err.message, t->fragment) != NULL, "%s: message '%s' does not contain '%s'",
              t->name, err.message, t->fragment);
    /* and the workspace is refused before anything is allocated */
    refenc_workspace ws;
    const int wst = refenc_workspace_alloc(&ws, &c, t->B, t->L, NULL);
    cr_expect_eq(wst, t->status, "%s: refenc_workspace_alloc returned %d", t->name, wst);
    cr_expect_null(ws.block, "%s: a workspace was allocated", t->name);
    refenc_workspace_free(&ws);
}

Test(config, valid_shapes_pass)
{
    refenc_config c;
    refenc_error err;
    refenc_config_default(&c);
    cr_expect_eq(refenc_config_validate_shape(&c, 1, 1, &err), REFENC_OK, "%s", err.message);
    c.positional = REFENC_POS_LEARNED;
    c.max_len = 16;
    cr_expect_eq(refenc_config_validate_shape(&c, 2, 16, &err), REFENC_OK, "L = max_len: %s",
                 err.message);
    c.positional = REFENC_POS_SINUSOIDAL; /* no table: L may exceed max_len */
    cr_expect_eq(refenc_config_validate_shape(&c, 2, 17, &err), REFENC_OK,
                 "sinusoidal with L > max_len: %s", err.message);
    /* RoBERTa's positions run from padding_idx + 1 to padding_idx + L < P */
    c.positional = REFENC_POS_LEARNED, c.vocab_size = 10, c.padding_idx = 1;
    c.position_ids = REFENC_POSIDS_ROBERTA;
    cr_expect_eq(refenc_config_validate_shape(&c, 2, 14, &err), REFENC_OK,
                 "roberta, L = max_len - padding_idx - 1: %s", err.message);
}

/* Size products that overflow size_t are detected, never wrapped. */
Test(config, size_arithmetic_detects_overflow)
{
    size_t r = 0;
    cr_expect_eq(refenc_size_mul(&r, SIZE_MAX / 2 + 1, 2), 0, "(SIZE_MAX/2 + 1) * 2 did not overflow");
    cr_expect_eq(refenc_size_mul(&r, (size_t)1 << 32, (size_t)1 << 32), 0, "2^32 * 2^32");
    cr_expect_eq(refenc_size_mul(&r, SIZE_MAX, 1), 1, "SIZE_MAX * 1 overflowed");
    cr_expect_eq(r, SIZE_MAX);
    cr_expect_eq(refenc_size_mul(&r, 0, SIZE_MAX), 1, "0 * SIZE_MAX overflowed");
    cr_expect_eq(r, 0);
    cr_expect_eq(refenc_size_add(&r, SIZE_MAX, 1), 0, "SIZE_MAX + 1 did not overflow");
    cr_expect_eq(refenc_size_add(&r, SIZE_MAX - 1, 1), 1, "SIZE_MAX - 1 + 1 overflowed");
    cr_expect_eq(r, SIZE_MAX);

    /* the counts report overflow as 0 (configs beyond the limits, never validated) */
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = SIZE_MAX / 2;
    cr_expect_eq(refenc_config_param_count(&c), 0, "param count of an overflowing config");
    refenc_config_default(&c);
    cr_expect_eq(refenc_config_workspace_count(&c, SIZE_MAX / 4, 8), 0,
                 "workspace count of an overflowing batch");
}

/* The parameter count, by hand, for D = 6, F = 10, N = 2, V = 7, P = 5:
 * per layer 3D*D + 3D + D*D + D + F*D + F + D*F + D + 4D = 108+18+36+6+60+10+60+6+24 = 328,
 * two layers 656, embedding 42, learned PE 30, final norm 12: 740. */
Test(config, param_count_matches_the_tensor_sizes)
{
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = 6, c.n_heads = 2, c.d_ff = 10, c.n_layers = 2, c.vocab_size = 7, c.max_len = 5;
    c.positional = REFENC_POS_LEARNED;
    cr_expect_eq(refenc_config_param_count(&c), 740);
    c.final_norm = 0;
    cr_expect_eq(refenc_config_param_count(&c), 728, "without the final norm");
    c.positional = REFENC_POS_ROPE;
    cr_expect_eq(refenc_config_param_count(&c), 698, "without the learned table");
    /* token types T = 3: 18 more; the embedding LayerNorm: 12 more */
    c.type_vocab_size = 3;
    cr_expect_eq(refenc_config_param_count(&c), 716, "with a token-type table");
    c.embedding_norm = 1;
    cr_expect_eq(refenc_config_param_count(&c), 728, "with the embedding LayerNorm");
}

Test(config, enum_names_round_trip_and_unknown_names_are_refused)
{
    refenc_error err;
    for (int v = 0; v < 2; v++) {
        refenc_norm_placement n = (refenc_norm_placement)!v;
        cr_expect_eq(refenc_norm_parse(&n, refenc_norm_name((refenc_norm_placement)v), "norm", &err),
                     REFENC_OK);
        cr_expect_eq(n, (refenc_norm_placement)v);
        refenc_rope_layout l = (refenc_rope_layout)!v;
        cr_expect_eq(refenc_rope_layout_parse(&l, refenc_rope_layout_name((refenc_rope_layout)v),
                                              "rope_layout", &err), REFENC_OK);
        cr_expect_eq(l, (refenc_rope_layout)v);
    }
    for (int v = 0; v < 4; v++) {
        refenc_activation a = REFENC_ACT_RELU;
        cr_expect_eq(refenc_activation_parse(&a, refenc_activation_name((refenc_activation)v),
                                             "activation", &err), REFENC_OK);
        cr_expect_eq(a, (refenc_activation)v);
    }
    for (int v = 0; v < 5; v++) {
        refenc_positional p = REFENC_POS_NONE;
        cr_expect_eq(refenc_positional_parse(&p, refenc_positional_name((refenc_positional)v),
                                             "positional", &err), REFENC_OK);
        cr_expect_eq(p, (refenc_positional)v);
    }
    for (int v = 0; v < REFENC_FAMILY_COUNT; v++) {
        refenc_family f = (refenc_family)((v + 1) % REFENC_FAMILY_COUNT);
        cr_expect_eq(refenc_family_parse(&f, refenc_family_name((refenc_family)v), "family", &err),
                     REFENC_OK);
        cr_expect_eq(f, (refenc_family)v);
    }
    for (int v = 0; v < 2; v++) {
        refenc_position_ids p = (refenc_position_ids)!v;
        cr_expect_eq(refenc_position_ids_parse(&p, refenc_position_ids_name((refenc_position_ids)v),
                                               "position_ids", &err), REFENC_OK);
        cr_expect_eq(p, (refenc_position_ids)v);
        refenc_mask_value m = (refenc_mask_value)!v;
        cr_expect_eq(refenc_mask_value_parse(&m, refenc_mask_value_name((refenc_mask_value)v),
                                             "mask_value", &err), REFENC_OK);
        cr_expect_eq(m, (refenc_mask_value)v);
    }
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_CLIP_TEXT), "clip-text");
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_LLAMA), "llama");
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_QWEN3), "qwen3");
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_MODERNBERT), "modernbert");
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_T5_ENCODER), "t5-encoder");
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_NOMIC_BERT), "nomic-bert");
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_JINA_BERT_V2), "jina-bert-v2");
    cr_expect_str_eq(refenc_family_name(REFENC_FAMILY_GTE), "gte");
    cr_expect_str_eq(refenc_mask_value_name(REFENC_MASK_FINFO_MIN), "finfo_min");
    cr_expect_str_eq(refenc_activation_name(REFENC_ACT_QUICK_GELU), "quick_gelu");
    cr_expect_str_eq(refenc_activation_name(REFENC_ACT_GELU_TANH), "gelu_tanh");
    cr_expect_str_eq(refenc_positional_name(REFENC_POS_ALIBI), "alibi");
    cr_expect_str_eq(refenc_positional_name((refenc_positional)9), "?");

    refenc_activation a = REFENC_ACT_RELU;
    refenc_error_clear(&err);
    cr_expect_eq(refenc_activation_parse(&a, "swish", "model.activation", &err), REFENC_EINVAL);
    cr_expect_eq(a, REFENC_ACT_RELU, "an unknown name changed the value");
    cr_expect(strstr(err.message, "model.activation") && strstr(err.message, "'swish'") &&
                  strstr(err.message, "'gelu_tanh'"),
              "message '%s' does not name the field, the name and the valid names", err.message);
    refenc_positional p;
    cr_expect_eq(refenc_positional_parse(&p, "Rope", "positional", &err), REFENC_EINVAL,
                 "names are case-sensitive");
}
