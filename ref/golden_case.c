#include "golden_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "activation.h"
#include "alibi.h"
#include "config_json.h"
#include "encoder.h"
#include "ffn.h"
#include "layernorm.h"
#include "mha.h"
#include "rope.h"
#include "sinusoidal.h"
#include "softmax.h"

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
    case REFENC_COMP_ROPE: return B * L * cfg->d_model; /* rope: (B, H, L, Dh), H Dh = D */
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
    if ((st = refenc_params_alloc(&c->params, cfg, err)))
        return st;

    c->x_numel = with_tokens ? 0 : x_numel(comp, cfg, B, L);
    if (c->x_numel)
        c->x = calloc(c->x_numel, sizeof *c->x);
    if (with_tokens)
        c->tokens = calloc(B * L, sizeof *c->tokens);
    if (with_mask)
        c->key_padding_mask = calloc(B * L, 1);
    if (with_attn_mask)
        c->attn_mask = calloc(L * L, sizeof *c->attn_mask);
    c->positions = malloc(L * sizeof *c->positions);
    if ((c->x_numel && !c->x) || (with_tokens && !c->tokens) || (with_mask && !c->key_padding_mask) ||
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
    free(c->x);
    free(c->tokens);
    free(c->key_padding_mask);
    free(c->positions);
    free(c->attn_mask);
    memset(c, 0, sizeof *c);
}

/* ---- loading --------------------------------------------------------------- */

static int shape_is(const refenc_st_tensor *t, size_t ndim, const size_t *shape)
{
    if (t->ndim != ndim)
        return 0;
    for (size_t i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i])
            return 0;
    return 1;
}

static int shape_error(const refenc_st_file *f, const refenc_st_tensor *t, size_t ndim,
                       const size_t *shape, refenc_error *err)
{
    char want[128] = "(";
    for (size_t i = 0; i < ndim; i++) {
        char part[32];
        snprintf(part, sizeof part, i + 1 < ndim ? "%zu, " : "%zu", shape[i]);
        strncat(want, part, sizeof want - strlen(want) - 1);
    }
    strncat(want, ")", sizeof want - strlen(want) - 1);
    return refenc_error_set(err, REFENC_EFORMAT, "%s: tensor '%s' (data at byte %zu) should have shape %s",
                            f->path, t->name, t->file_offset, want);
}

/* The leading dimensions (B, L) of the case from its defining input. */
static int case_shape(size_t *B, size_t *L, refenc_component comp, const refenc_config *cfg,
                      const refenc_st_file *f, refenc_error *err)
{
    const refenc_st_tensor *x = refenc_st_find(f, "in.x");
    const refenc_st_tensor *tok = refenc_st_find(f, "in.tokens");
    const refenc_st_tensor *pos = refenc_st_find(f, "in.positions");
    const char *need = NULL;
    switch (comp) {
    case REFENC_COMP_ENCODER:
        if (cfg->vocab_size > 0) {
            if (tok == NULL || tok->ndim != 2) { need = "in.tokens of shape (B, L)"; break; }
            *B = tok->shape[0], *L = tok->shape[1];
            return REFENC_OK;
        }
        __attribute__((fallthrough)); /* the input is x (B, L, D) */
    case REFENC_COMP_ATTENTION:
    case REFENC_COMP_FFN:
    case REFENC_COMP_LAYERNORM:
        if (x == NULL || x->ndim != 3) { need = "in.x of shape (B, L, D)"; break; }
        *B = x->shape[0], *L = x->shape[1];
        return REFENC_OK;
    case REFENC_COMP_SOFTMAX:
    case REFENC_COMP_ACTIVATION:
        if (x == NULL || x->ndim != 2) { need = "in.x of shape (B, L)"; break; }
        *B = x->shape[0], *L = x->shape[1];
        return REFENC_OK;
    case REFENC_COMP_ROPE:
        if (x == NULL || x->ndim != 4) { need = "in.x of shape (B, H, L, Dh)"; break; }
        *B = x->shape[0], *L = x->shape[2];
        return REFENC_OK;
    case REFENC_COMP_SINUSOIDAL_PE:
    case REFENC_COMP_ALIBI:
        if (pos == NULL || pos->ndim != 1) { need = "in.positions of shape (L)"; break; }
        *B = 1, *L = pos->shape[0];
        return REFENC_OK;
    default:
        need = "a known component";
    }
    return refenc_error_set(err, REFENC_EFORMAT, "%s: a %s case needs %s", f->path,
                            refenc_component_name(comp), need);
}

int refenc_case_from_file(refenc_case *c, const refenc_st_file *f, refenc_error *err)
{
    memset(c, 0, sizeof *c);
    const char *name = refenc_st_metadata(f, "case");
    const char *comp_s = refenc_st_metadata(f, "component");
    const char *cfg_s = refenc_st_metadata(f, "config");
    refenc_component comp;
    if (name == NULL || comp_s == NULL || cfg_s == NULL)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: __metadata__ needs case, component and config", f->path);
    if (!refenc_component_parse(&comp, comp_s))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.component: unknown component '%s'",
                                f->path, comp_s);

    json_error_t jerr;
    json_t *cj = json_loads(cfg_s, JSON_REJECT_DUPLICATES, &jerr);
    if (cj == NULL)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.config: byte %d: %s", f->path,
                                jerr.position, jerr.text);
    char where[512];
    snprintf(where, sizeof where, "%s: __metadata__.config", f->path);
    refenc_config cfg;
    int st = refenc_config_from_json(&cfg, cj, where, err);
    json_decref(cj);
    if (st)
        return st;

    size_t B = 0, L = 0;
    if ((st = case_shape(&B, &L, comp, &cfg, f, err)))
        return st;
    const int with_tokens = comp == REFENC_COMP_ENCODER && cfg.vocab_size > 0;
    if ((st = refenc_case_alloc(c, comp, &cfg, B, L, with_tokens, refenc_st_find(f, "in.key_padding_mask") != NULL,
                                refenc_st_find(f, "in.attn_mask") != NULL, err))) {
        char msg[REFENC_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->message : "");
        return refenc_error_set(err, st, "%s: %s", f->path, msg);
    }
    snprintf(c->name, sizeof c->name, "%s", name);

    const size_t D = cfg.d_model, H = cfg.n_heads;
    for (size_t i = 0; i < f->n_tensors && st == REFENC_OK; i++) {
        const refenc_st_tensor *t = &f->tensors[i];
        if (strncmp(t->name, "out.", 4) == 0 || strncmp(t->name, "dontcare.", 9) == 0 ||
            strncmp(t->name, "alt.", 4) == 0)
            continue;
        if (strcmp(t->name, "in.x") == 0 && c->x != NULL) {
            size_t shape[4];
            size_t nd = 0;
            if (comp == REFENC_COMP_ROPE)
                shape[0] = B, shape[1] = H, shape[2] = L, shape[3] = D / H, nd = 4;
            else if (comp == REFENC_COMP_SOFTMAX || comp == REFENC_COMP_ACTIVATION)
                shape[0] = B, shape[1] = L, nd = 2;
            else
                shape[0] = B, shape[1] = L, shape[2] = D, nd = 3;
            st = shape_is(t, nd, shape) ? refenc_st_to_f64(c->x, f, t, err) : shape_error(f, t, nd, shape, err);
        } else if (strcmp(t->name, "in.tokens") == 0 && c->tokens != NULL) {
            const size_t shape[2] = {B, L};
            st = shape_is(t, 2, shape) ? refenc_st_to_i64(c->tokens, f, t, err) : shape_error(f, t, 2, shape, err);
        } else if (strcmp(t->name, "in.key_padding_mask") == 0) {
            const size_t shape[2] = {B, L};
            int64_t *tmp = malloc(B * L * sizeof *tmp);
            if (tmp == NULL)
                st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", f->path);
            else if (!shape_is(t, 2, shape))
                st = shape_error(f, t, 2, shape, err);
            else if (t->dtype != REFENC_ST_BOOL && t->dtype != REFENC_ST_U8)
                st = refenc_error_set(err, REFENC_EFORMAT, "%s: tensor '%s' (data at byte %zu) must be BOOL or U8",
                                      f->path, t->name, t->file_offset);
            else if ((st = refenc_st_to_i64(tmp, f, t, err)) == REFENC_OK)
                for (size_t k = 0; k < B * L; k++)
                    c->key_padding_mask[k] = (uint8_t)(tmp[k] != 0 ? (tmp[k] == 1 ? 1 : 2) : 0);
            free(tmp);
        } else if (strcmp(t->name, "in.positions") == 0) {
            const size_t shape[1] = {L};
            st = shape_is(t, 1, shape) ? refenc_st_to_i64(c->positions, f, t, err) : shape_error(f, t, 1, shape, err);
            c->has_positions = 1;
        } else if (strcmp(t->name, "in.attn_mask") == 0) {
            const size_t shape[2] = {L, L};
            st = shape_is(t, 2, shape) ? refenc_st_to_f64(c->attn_mask, f, t, err) : shape_error(f, t, 2, shape, err);
        } else {
            /* a parameter: find the encoder tensor it names */
            refenc_tensor *p = NULL;
            for (size_t k = 0; k < c->params.n_tensors && p == NULL; k++) {
                const char *fname = refenc_case_param_name(comp, c->params.tensors[k].name);
                if (fname != NULL && strcmp(fname, t->name) == 0)
                    p = &c->params.tensors[k];
            }
            if (p == NULL)
                st = refenc_error_set(err, REFENC_EFORMAT,
                                      "%s: tensor '%s' (data at byte %zu) is neither an input, an output "
                                      "nor a parameter of a %s case with this config",
                                      f->path, t->name, t->file_offset, refenc_component_name(comp));
            else if (!shape_is(t, p->ndim, p->shape))
                st = shape_error(f, t, p->ndim, p->shape, err);
            else
                st = refenc_st_to_f64(p->data, f, t, err);
        }
    }
    /* every parameter the component uses must be present */
    for (size_t k = 0; k < c->params.n_tensors && st == REFENC_OK; k++) {
        const char *fname = refenc_case_param_name(comp, c->params.tensors[k].name);
        if (fname != NULL && refenc_st_find(f, fname) == NULL)
            st = refenc_error_set(err, REFENC_EFORMAT, "%s: parameter '%s' is missing", f->path, fname);
    }
    if (st == REFENC_OK && (comp == REFENC_COMP_ROPE || comp == REFENC_COMP_SINUSOIDAL_PE ||
                            comp == REFENC_COMP_ALIBI) && !c->has_positions)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: a %s case needs in.positions", f->path, comp_s);
    if (st == REFENC_OK && (st = refenc_case_validate(c, err)) != REFENC_OK) {
        char msg[REFENC_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->message : "");
        refenc_error_set(err, st, "%s: %s", f->path, msg);
    }
    if (st)
        refenc_case_free(c);
    return st;
}

/* ---- validation and the reference --------------------------------------------- */

refenc_input refenc_case_input(const refenc_case *c)
{
    refenc_input in = {
        .B = c->B, .L = c->L,
        .tokens = c->tokens,
        .x = c->tokens ? NULL : c->x,
        .key_padding_mask = c->key_padding_mask,
        .positions = c->positions,
        .attn_mask = c->attn_mask,
    };
    return in;
}

int refenc_case_validate(const refenc_case *c, refenc_error *err)
{
    refenc_input in = refenc_case_input(c);
    if (c->component == REFENC_COMP_ENCODER)
        return refenc_input_validate(&in, &c->cfg, err);
    /* components: the checks that apply to what they read */
    refenc_config cfg = c->cfg;
    cfg.vocab_size = 0;
    in.tokens = NULL;
    if (in.x == NULL) {
        static const double zero = 0.0; /* no x: validate the rest against a dummy */
        in.x = &zero;
    }
    return refenc_input_validate(&in, &cfg, err);
}

static void emit(const refenc_trace *trace, const char *name, const double *data, size_t ndim,
                 size_t d0, size_t d1, size_t d2, size_t d3)
{
    const size_t shape[4] = {d0, d1, d2, d3};
    refenc_trace_emit(trace, name, data, ndim, shape);
}

int refenc_case_run_reference(const refenc_case *c, const refenc_trace *trace, refenc_error *err)
{
    int st = refenc_case_validate(c, err);
    if (st)
        return st;
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model, H = cfg->n_heads, Dh = D / H, F = cfg->d_ff;
    const refenc_layer_params *lp = &c->params.layers[0];
    const refenc_input in = refenc_case_input(c);
    refenc_workspace ws;
    memset(&ws, 0, sizeof ws);
    double *y = NULL, *y2 = NULL;

    switch (c->component) {
    case REFENC_COMP_ENCODER:
    case REFENC_COMP_ATTENTION:
    case REFENC_COMP_FFN:
        if ((st = refenc_workspace_alloc(&ws, cfg, B, L, err)))
            return st;
        y = malloc(B * L * D * sizeof *y);
        break;
    case REFENC_COMP_ALIBI:
        y = malloc(H * sizeof *y);
        y2 = malloc(H * L * L * sizeof *y2);
        break;
    case REFENC_COMP_SINUSOIDAL_PE:
        y = malloc(L * D * sizeof *y);
        break;
    default:
        y = malloc((c->x_numel ? c->x_numel : 1) * sizeof *y);
    }
    if (y == NULL || (c->component == REFENC_COMP_ALIBI && y2 == NULL)) {
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", c->name);
        goto done;
    }

    switch (c->component) {
    case REFENC_COMP_ENCODER:
        st = refenc_encoder_forward(y, &ws, &c->params, cfg, &in, trace, err);
        break;
    case REFENC_COMP_ATTENTION: {
        const refenc_attn_options opt = {
            .key_padding_mask = c->key_padding_mask, .causal = cfg->causal, .attn_mask = c->attn_mask,
            .alibi_slopes = cfg->positional == REFENC_POS_ALIBI ? ws.alibi_slopes : NULL,
            .positions = c->positions, .temperature = cfg->temperature};
        const refenc_rope_options rope = {cfg->rope_layout, cfg->rope_base, c->positions};
        refenc_mha_forward(y, &ws.layer.mha, c->x, lp->in_proj_weight, lp->in_proj_bias,
                           lp->out_proj_weight, lp->out_proj_bias, &opt,
                           cfg->positional == REFENC_POS_ROPE ? &rope : NULL, B, L, D, H);
        emit(trace, "weights", ws.layer.mha.weights, 4, B, H, L, L);
        emit(trace, "output", y, 3, B, L, D, 0);
        break;
    }
    case REFENC_COMP_FFN:
        refenc_ffn_forward(y, ws.layer.hidden, c->x, lp->linear1_weight, lp->linear1_bias,
                           lp->linear2_weight, lp->linear2_bias, B * L, D, F, cfg->activation);
        emit(trace, "output", y, 3, B, L, D, 0);
        break;
    case REFENC_COMP_LAYERNORM:
        refenc_layernorm_forward(y, c->x, lp->norm1_weight, lp->norm1_bias, B * L, D, cfg->layer_norm_eps);
        emit(trace, "output", y, 3, B, L, D, 0);
        break;
    case REFENC_COMP_SOFTMAX:
        refenc_softmax_forward(y, c->x, B, L, cfg->temperature);
        emit(trace, "output", y, 2, B, L, 0, 0);
        break;
    case REFENC_COMP_ACTIVATION:
        refenc_activation_forward(y, c->x, B * L, cfg->activation);
        emit(trace, "output", y, 2, B, L, 0, 0);
        break;
    case REFENC_COMP_SINUSOIDAL_PE:
        refenc_sinusoidal_table(y, c->positions, L, D);
        emit(trace, "output", y, 2, L, D, 0, 0);
        break;
    case REFENC_COMP_ROPE:
        refenc_rope_forward(y, c->x, c->positions, B * H, L, Dh, cfg->rope_base, cfg->rope_layout);
        emit(trace, "output", y, 4, B, H, L, Dh);
        break;
    case REFENC_COMP_ALIBI:
        refenc_alibi_slopes(y, H);
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < L; i++)
                for (size_t j = 0; j < L; j++)
                    y2[(h * L + i) * L + j] = refenc_alibi_bias(y[h], c->positions[i], c->positions[j]);
        emit(trace, "slopes", y, 1, H, 0, 0, 0);
        emit(trace, "bias", y2, 3, H, L, L, 0);
        break;
    default:
        st = refenc_error_set(err, REFENC_EINVAL, "%s: unknown component", c->name);
    }
done:
    free(y);
    free(y2);
    refenc_workspace_free(&ws);
    return st;
}
