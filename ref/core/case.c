#include "case.h"

#include <stdlib.h>
#include <string.h>

static const char *const component_names[REFENC_COMP_COUNT] = {
    "encoder", "attention", "ffn", "layernorm", "softmax", "activation",
    "sinusoidal_pe", "rope", "alibi"};

const char *refenc_component_name(refenc_component c)
{
    return (unsigned)c < REFENC_COMP_COUNT ? component_names[c] : "?";
}

int refenc_component_parse(refenc_component *c, const char *name)
{
    for (int i = 0; i < REFENC_COMP_COUNT; i++)
        if (strcmp(name, component_names[i]) == 0) {
            *c = (refenc_component)i;
            return 1;
        }
    return 0;
}

/* encoder name -> file name, per component */
static const struct {
    refenc_component component;
    const char *encoder_name, *file_name;
} param_map[] = {
    {REFENC_COMP_ATTENTION, "layers.0.self_attn.in_proj_weight", "in_proj_weight"},
    {REFENC_COMP_ATTENTION, "layers.0.self_attn.in_proj_bias", "in_proj_bias"},
    {REFENC_COMP_ATTENTION, "layers.0.self_attn.out_proj.weight", "out_proj.weight"},
    {REFENC_COMP_ATTENTION, "layers.0.self_attn.out_proj.bias", "out_proj.bias"},
    {REFENC_COMP_FFN, "layers.0.linear1.weight", "linear1.weight"},
    {REFENC_COMP_FFN, "layers.0.linear1.bias", "linear1.bias"},
    {REFENC_COMP_FFN, "layers.0.linear2.weight", "linear2.weight"},
    {REFENC_COMP_FFN, "layers.0.linear2.bias", "linear2.bias"},
    {REFENC_COMP_LAYERNORM, "layers.0.norm1.weight", "weight"},
    {REFENC_COMP_LAYERNORM, "layers.0.norm1.bias", "bias"},
    {REFENC_COMP_ATTENTION, "layers.0.self_attn.q_norm.weight", "q_norm.weight"},
    {REFENC_COMP_ATTENTION, "layers.0.self_attn.k_norm.weight", "k_norm.weight"},
    {REFENC_COMP_ATTENTION, "layers.0.self_attn.relative_attention_bias.weight", "relative_attention_bias.weight"},
};

const char *refenc_case_param_name(refenc_component c, const char *encoder_name)
{
    if (c == REFENC_COMP_ENCODER)
        return encoder_name;
    for (size_t i = 0; i < sizeof param_map / sizeof param_map[0]; i++)
        if (param_map[i].component == c && strcmp(param_map[i].encoder_name, encoder_name) == 0)
            return param_map[i].file_name;
    return NULL;
}

/* Number of elements of in.x for the component and shape. */
static size_t x_numel(refenc_component comp, const refenc_config *cfg, size_t B, size_t L)
{
    switch (comp) {
    case REFENC_COMP_ENCODER:
    case REFENC_COMP_ATTENTION:
    case REFENC_COMP_FFN:
    case REFENC_COMP_LAYERNORM:
    case REFENC_COMP_ROPE: return B * L * cfg->n_heads * refenc_config_head_dim(cfg); /* rope: (B, H, L, Dh) */
    case REFENC_COMP_SOFTMAX:
    case REFENC_COMP_ACTIVATION: return B * L;
    default: return 0;
    }
}

int refenc_case_alloc(refenc_case *c, refenc_component comp, const refenc_config *cfg,
                      size_t B, size_t L, int with_tokens, int with_mask, int with_attn_mask,
                      refenc_error *err)
{
    memset(c, 0, sizeof *c);
    c->component = comp;
    c->cfg = *cfg;
    c->B = B;
    c->L = L;
    int st = refenc_config_validate_shape(cfg, B, L, err);
    if (st)
        return st;
    if (comp == REFENC_COMP_LAYERNORM && cfg->skip_first_prenorm)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: skip_first_prenorm in a layernorm case: the component "
                                "normalises with layers.0.norm1, which skip_first_prenorm removes");
    if (comp != REFENC_COMP_ENCODER && cfg->sandwich_norm)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: sandwich_norm in a case of component '%s': the norms of the sublayers' outputs "
                                "belong to a layer (encoder cases only)", refenc_component_name(comp));
    if ((st = refenc_params_alloc(&c->params, cfg, err)))
        return st;

    c->x_numel = with_tokens ? 0 : x_numel(comp, cfg, B, L);
    if (c->x_numel)
        c->x = calloc(c->x_numel, sizeof *c->x);
    const int with_types = with_tokens && cfg->type_vocab_size > 0;
    if (with_tokens)
        c->tokens = calloc(B * L, sizeof *c->tokens);
    if (with_types)
        c->token_types = calloc(B * L, sizeof *c->token_types);
    if (with_mask)
        c->key_padding_mask = calloc(B * L, 1);
    if (with_attn_mask)
        c->attn_mask = calloc(L * L, sizeof *c->attn_mask);
    c->positions = malloc(L * sizeof *c->positions);
    if ((c->x_numel && !c->x) || (with_tokens && !c->tokens) || (with_types && !c->token_types) ||
        (with_mask && !c->key_padding_mask) ||
        (with_attn_mask && !c->attn_mask) || !c->positions) {
        refenc_case_free(c);
        return refenc_error_set(err, REFENC_ENOMEM, "case: out of memory");
    }
    for (size_t l = 0; l < L; l++)
        c->positions[l] = (int64_t)l;
    return REFENC_OK;
}

void refenc_case_free(refenc_case *c)
{
    if (c == NULL)
        return;
    refenc_params_free(&c->params);
    refenc_case_free_inputs(c);
}

void refenc_case_free_inputs(refenc_case *c)
{
    if (c == NULL)
        return;
    free(c->x);
    free(c->tokens);
    free(c->token_types);
    free(c->key_padding_mask);
    free(c->positions);
    free(c->attn_mask);
    free(c->rows);
    memset(c, 0, sizeof *c);
}

/* ---- validation ------------------------------------------------------------------ */

refenc_input refenc_case_input(const refenc_case *c)
{
    refenc_input in = {
        .B = c->B, .L = c->L,
        .tokens = c->tokens,
        .x = c->tokens ? NULL : c->x,
        .key_padding_mask = c->key_padding_mask,
        .positions = c->cfg.position_ids == REFENC_POSIDS_ROBERTA ? NULL : c->positions,
        .attn_mask = c->attn_mask,
        .token_types = c->token_types,
        .rows = c->rows, .R = c->R,
    };
    return in;
}

int refenc_case_validate(const refenc_case *c, refenc_error *err)
{
    refenc_input in = refenc_case_input(c);
    if (c->component == REFENC_COMP_ENCODER && c->has_positions &&
        c->cfg.position_ids == REFENC_POSIDS_ROBERTA)
        in.positions = c->positions; /* given, hence refused (input.h) */
    if (c->component == REFENC_COMP_ENCODER)
        return refenc_input_validate(&in, &c->cfg, err);
    if (c->rows != NULL) /* a component has no last layer */
        return refenc_error_set(err, REFENC_EINVAL, "input: in.rows: only an encoder case selects query rows "
                                "(of its last layer), not a %s case", refenc_component_name(c->component));
    /* components: the checks that apply to what they read */
    refenc_config cfg = c->cfg;
    cfg.vocab_size = 0;
    cfg.type_vocab_size = 0;
    cfg.position_ids = REFENC_POSIDS_INDEX;
    in.tokens = NULL;
    in.token_types = NULL;
    if (in.x == NULL) {
        static const double zero = 0.0; /* no x: validate the rest against a dummy */
        in.x = &zero;
    }
    return refenc_input_validate(&in, &cfg, err);
}

