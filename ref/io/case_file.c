/* Reading a golden case from its file: metadata, inputs, parameters. */
#include "case_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

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
    size_t layer;
    for (size_t i = 0; i < f->n_tensors && st == REFENC_OK; i++) {
        const refenc_st_tensor *t = &f->tensors[i];
        if (refenc_name_is_expected(t->name))
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
            st = refenc_st_shape_is(t, nd, shape) ? refenc_st_to_f64(c->x, f, t, err) : shape_error(f, t, nd, shape, err);
        } else if (strcmp(t->name, "in.tokens") == 0 && c->tokens != NULL) {
            const size_t shape[2] = {B, L};
            st = refenc_st_shape_is(t, 2, shape) ? refenc_st_to_i64(c->tokens, f, t, err) : shape_error(f, t, 2, shape, err);
        } else if (strcmp(t->name, "in.key_padding_mask") == 0) {
            const size_t shape[2] = {B, L};
            int64_t *tmp = malloc(B * L * sizeof *tmp);
            if (tmp == NULL)
                st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", f->path);
            else if (!refenc_st_shape_is(t, 2, shape))
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
            st = refenc_st_shape_is(t, 1, shape) ? refenc_st_to_i64(c->positions, f, t, err) : shape_error(f, t, 1, shape, err);
            c->has_positions = 1;
        } else if (strcmp(t->name, "in.attn_mask") == 0) {
            const size_t shape[2] = {L, L};
            st = refenc_st_shape_is(t, 2, shape) ? refenc_st_to_f64(c->attn_mask, f, t, err) : shape_error(f, t, 2, shape, err);
        } else if (refenc_name_is_layer_input(t->name, &layer) && comp == REFENC_COMP_ENCODER &&
                   layer < cfg.n_layers) {
            /* a layer's stored input (a case made per layer): the outputs are
             * functions of it; the reference runs the stack from in.x */
            const size_t shape[3] = {B, L, D};
            if (!refenc_st_shape_is(t, 3, shape))
                st = shape_error(f, t, 3, shape, err);
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
            else if (!refenc_st_shape_is(t, p->ndim, p->shape))
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

