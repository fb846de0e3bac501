/* Reading a golden case from its file: metadata, inputs, parameters. */
#include "case_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../core/alloc.h"
#include "../core/text.h"
#include "config_json.h"
#include "golden_names.h"

static int shape_error(const refenc_st_file *f, const refenc_st_tensor *t, size_t ndim,
                       const size_t *shape, refenc_error *err)
{
    char want[128];
    refenc_shape_format(want, sizeof want, shape, ndim, "()");
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

/* The metadata every golden file carries: case, component and config. */
static int read_metadata(const char **name, refenc_component *comp, refenc_config *cfg,
                         const refenc_st_file *f, refenc_error *err)
{
    *name = refenc_st_metadata(f, "case");
    const char *comp_s = refenc_st_metadata(f, "component");
    const char *cfg_s = refenc_st_metadata(f, "config");
    if (*name == NULL || comp_s == NULL || cfg_s == NULL)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: __metadata__ needs case, component and config", f->path);
    if (!refenc_component_parse(comp, comp_s))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.component: unknown component '%s'",
                                f->path, comp_s);

    json_error_t jerr;
    json_t *cj = json_loads(cfg_s, JSON_REJECT_DUPLICATES, &jerr);
    if (cj == NULL)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.config: byte %d: %s", f->path,
                                jerr.position, jerr.text);
    char where[512];
    snprintf(where, sizeof where, "%s: __metadata__.config", f->path);
    const int st = refenc_config_from_json(cfg, cj, where, err);
    json_decref(cj);
    return st;
}

/* An error of a case-level check, prefixed with the file's path. */
static int with_path(const refenc_st_file *f, int st, refenc_error *err)
{
    char msg[REFENC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", err ? err->message : "");
    return refenc_error_set(err, st, "%s: %s", f->path, msg);
}

/* in.key_padding_mask: BOOL or U8, entries 0/1 (anything else is kept as 2,
 * which refenc_case_validate refuses with the element's index). */
static int load_padding_mask(refenc_case *c, const refenc_st_file *f, const refenc_st_tensor *t,
                             refenc_error *err)
{
    const size_t B = c->B, L = c->L, shape[2] = {B, L};
    if (!refenc_st_shape_is(t, 2, shape))
        return shape_error(f, t, 2, shape, err);
    if (t->dtype != REFENC_ST_BOOL && t->dtype != REFENC_ST_U8)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: tensor '%s' (data at byte %zu) must be BOOL or U8",
                                f->path, t->name, t->file_offset);
    int64_t *tmp = refenc_alloc_array(B * L, sizeof *tmp);
    if (tmp == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", f->path);
    const int st = refenc_st_to_i64(tmp, f, t, err);
    if (st == REFENC_OK)
        for (size_t k = 0; k < B * L; k++)
            c->key_padding_mask[k] = (uint8_t)(tmp[k] != 0 ? (tmp[k] == 1 ? 1 : 2) : 0);
    free(tmp);
    return st;
}

/* A parameter: the encoder tensor whose file name (for this component) it is. */
static int load_parameter(refenc_case *c, const refenc_st_file *f, const refenc_st_tensor *t,
                          refenc_error *err)
{
    refenc_tensor *p = NULL;
    for (size_t k = 0; k < c->params.n_tensors && p == NULL; k++) {
        const char *fname = refenc_case_param_name(c->component, c->params.tensors[k].name);
        if (fname != NULL && strcmp(fname, t->name) == 0)
            p = &c->params.tensors[k];
    }
    if (p == NULL)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: tensor '%s' (data at byte %zu) is neither an input, an output "
                                "nor a parameter of a %s case with this config",
                                f->path, t->name, t->file_offset, refenc_component_name(c->component));
    if (!refenc_st_shape_is(t, p->ndim, p->shape))
        return shape_error(f, t, p->ndim, p->shape, err);
    return refenc_st_to_f64(p->data, f, t, err);
}

/* One tensor of the file into the case: an input, a parameter, or (outputs,
 * masks, variants) nothing. */
static int load_tensor(refenc_case *c, const refenc_st_file *f, const refenc_st_tensor *t,
                       refenc_error *err)
{
    const refenc_component comp = c->component;
    const size_t B = c->B, L = c->L, D = c->cfg.d_model, H = c->cfg.n_heads;
    if (refenc_name_is_expected(t->name) || refenc_name_is_grad(t->name))
        return REFENC_OK; /* the backward's tensors: certify reads them (grad.c) */
    if (strcmp(t->name, "in.x") == 0 && c->x != NULL) {
        size_t shape[4];
        size_t nd = 0;
        if (comp == REFENC_COMP_ROPE)
            shape[0] = B, shape[1] = H, shape[2] = L, shape[3] = refenc_config_head_dim(&c->cfg), nd = 4;
        else if (comp == REFENC_COMP_SOFTMAX || comp == REFENC_COMP_ACTIVATION)
            shape[0] = B, shape[1] = L, nd = 2;
        else
            shape[0] = B, shape[1] = L, shape[2] = D, nd = 3;
        return refenc_st_shape_is(t, nd, shape) ? refenc_st_to_f64(c->x, f, t, err) : shape_error(f, t, nd, shape, err);
    }
    if (strcmp(t->name, "in.tokens") == 0 && c->tokens != NULL) {
        const size_t shape[2] = {B, L};
        return refenc_st_shape_is(t, 2, shape) ? refenc_st_to_i64(c->tokens, f, t, err) : shape_error(f, t, 2, shape, err);
    }
    if (strcmp(t->name, "in.token_type_ids") == 0 && c->token_types != NULL) {
        const size_t shape[2] = {B, L};
        return refenc_st_shape_is(t, 2, shape) ? refenc_st_to_i64(c->token_types, f, t, err)
                                     : shape_error(f, t, 2, shape, err);
    }
    if (strcmp(t->name, "in.key_padding_mask") == 0)
        return load_padding_mask(c, f, t, err);
    if (strcmp(t->name, "in.positions") == 0) {
        const size_t shape[1] = {L};
        c->has_positions = 1;
        return refenc_st_shape_is(t, 1, shape) ? refenc_st_to_i64(c->positions, f, t, err) : shape_error(f, t, 1, shape, err);
    }
    if (strcmp(t->name, "in.rows") == 0) { /* the last layer's query rows: (R), validated with the case */
        if (t->ndim != 1 || t->shape[0] == 0 || t->shape[0] > L)
            return refenc_error_set(err, REFENC_EFORMAT, "%s: tensor 'in.rows' (data at byte %zu) should have "
                                    "shape (R), 1 <= R <= L = %zu", f->path, t->file_offset, L);
        c->R = t->shape[0];
        c->rows = malloc(c->R * sizeof *c->rows);
        if (c->rows == NULL)
            return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", f->path);
        return refenc_st_to_i64(c->rows, f, t, err);
    }
    if (strcmp(t->name, "in.attn_mask") == 0) {
        const size_t shape[2] = {L, L};
        return refenc_st_shape_is(t, 2, shape) ? refenc_st_to_f64(c->attn_mask, f, t, err) : shape_error(f, t, 2, shape, err);
    }
    size_t layer;
    if (refenc_name_is_layer_input(t->name, &layer) && comp == REFENC_COMP_ENCODER && layer < c->cfg.n_layers) {
        /* a layer's stored input (a case made per layer): its outputs are
         * functions of it; the reference runs the stack from in.x */
        const size_t shape[3] = {B, L, D};
        return refenc_st_shape_is(t, 3, shape) ? REFENC_OK : shape_error(f, t, 3, shape, err);
    }
    return load_parameter(c, f, t, err);
}

/* What the file must have beyond what load_tensor checked: every parameter
 * the component uses, positions where the component needs them, and inputs
 * that validate. */
static int check_complete(refenc_case *c, const refenc_st_file *f, refenc_error *err)
{
    const refenc_component comp = c->component;
    for (size_t k = 0; k < c->params.n_tensors; k++) {
        const char *fname = refenc_case_param_name(comp, c->params.tensors[k].name);
        if (fname != NULL && refenc_st_find(f, fname) == NULL)
            return refenc_error_set(err, REFENC_EFORMAT, "%s: parameter '%s' is missing", f->path, fname);
    }
    if (c->token_types != NULL && refenc_st_find(f, "in.token_type_ids") == NULL)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: input 'in.token_type_ids' is missing "
                                "(type_vocab_size = %zu)", f->path, c->cfg.type_vocab_size);
    if ((comp == REFENC_COMP_ROPE || comp == REFENC_COMP_SINUSOIDAL_PE || comp == REFENC_COMP_ALIBI) &&
        !c->has_positions)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: a %s case needs in.positions", f->path,
                                refenc_component_name(comp));
    const int st = refenc_case_validate(c, err);
    return st == REFENC_OK ? REFENC_OK : with_path(f, st, err);
}

int refenc_case_from_file(refenc_case *c, const refenc_st_file *f, refenc_error *err)
{
    memset(c, 0, sizeof *c);
    const char *name;
    refenc_component comp;
    refenc_config cfg;
    int st = read_metadata(&name, &comp, &cfg, f, err);
    if (st)
        return st;

    size_t B = 0, L = 0;
    if ((st = case_shape(&B, &L, comp, &cfg, f, err)))
        return st;
    const int with_tokens = comp == REFENC_COMP_ENCODER && cfg.vocab_size > 0;
    if ((st = refenc_case_alloc(c, comp, &cfg, B, L, with_tokens, refenc_st_find(f, "in.key_padding_mask") != NULL,
                                refenc_st_find(f, "in.attn_mask") != NULL, err)))
        return with_path(f, st, err);
    snprintf(c->name, sizeof c->name, "%s", name);

    for (size_t i = 0; i < f->n_tensors && st == REFENC_OK; i++)
        st = load_tensor(c, f, &f->tensors[i], err);
    if (st == REFENC_OK)
        st = check_complete(c, f, err);
    if (st)
        refenc_case_free(c);
    return st;
}
