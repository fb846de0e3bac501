/* A model's weights and inputs from safetensors files (model_file.h). */
#include "model_file.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/text.h"
#include "name_prefix.h"

int refenc_st_dtype_is_float(refenc_st_dtype d)
{
    return d == REFENC_ST_F64 || d == REFENC_ST_F32 || d == REFENC_ST_F16 || d == REFENC_ST_BF16;
}

/* ---- every problem of a file, listed in one message -------------------------- */

typedef struct {
    char *s;
    size_t len, cap, count;
    int oom;
} problems;

static void problem(problems *pr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(problems *pr, const char *fmt, ...)
{
    char item[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    const size_t n = strlen(item) + 2; /* "; " */
    if (pr->len + n + 1 > pr->cap) {
        size_t cap = pr->cap ? 2 * pr->cap : 1024;
        while (cap < pr->len + n + 1)
            cap *= 2;
        char *s = realloc(pr->s, cap);
        if (s == NULL) {
            pr->oom = 1;
            return;
        }
        pr->s = s;
        pr->cap = cap;
    }
    pr->len += (size_t)sprintf(pr->s + pr->len, "%s%s", pr->count ? "; " : "", item);
    pr->count++;
}

/* A tensor name as it may be quoted: control characters written \xNN (the
 * reader has checked it is UTF-8). */
static const char *quoted(char *buf, size_t cap, const char *name)
{
    size_t o = 0;
    for (const unsigned char *s = (const unsigned char *)name; *s != '\0' && o + 5 < cap; s++)
        o += (size_t)snprintf(buf + o, cap - o, *s < 0x20 || *s == 0x7f ? "\\x%02x" : "%c", *s);
    buf[o] = '\0';
    return buf;
}

/* Ends the list: REFENC_OK if it is empty, else the message
 * "<path>: <what>: <problems>" in err and (whole) in *report. */
static int problems_end(problems *pr, const char *path, const char *what, char **report,
                        refenc_error *err)
{
    if (report != NULL)
        *report = NULL;
    if (pr->oom) {
        free(pr->s);
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", path);
    }
    if (pr->count == 0) {
        free(pr->s);
        return REFENC_OK;
    }
    const size_t n = strlen(path) + strlen(what) + pr->len + 64;
    char *msg = malloc(n);
    if (msg == NULL) {
        free(pr->s);
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", path);
    }
    snprintf(msg, n, "%s: %s (%zu problem%s): %s", path, what, pr->count, pr->count == 1 ? "" : "s",
             pr->s);
    free(pr->s);
    refenc_error_set(err, REFENC_EFORMAT, "%s", msg);
    if (report != NULL)
        *report = msg;
    else
        free(msg);
    return REFENC_EFORMAT;
}

/* Checks tensor t against the expected shape and kind (floating or not);
 * returns 1 if it fits, else records the problem. */
static int check_tensor(problems *pr, const refenc_st_tensor *t, size_t ndim, const size_t *shape,
                        int floating, const char *dtypes)
{
    char q[512], got[128], want[128];
    int ok = 1;
    if (!refenc_st_shape_is(t, ndim, shape)) {
        problem(pr, "'%s' has shape %s, expected %s", quoted(q, sizeof q, t->name),
                refenc_shape_format(got, sizeof got, t->shape, t->ndim, "()"),
                refenc_shape_format(want, sizeof want, shape, ndim, "()"));
        ok = 0;
    }
    if (floating != refenc_st_dtype_is_float(t->dtype)) {
        problem(pr, "'%s' has dtype %s, expected %s", quoted(q, sizeof q, t->name),
                refenc_st_dtype_name(t->dtype), dtypes);
        ok = 0;
    }
    return ok;
}

#define FLOAT_DTYPES "F64, F32, F16 or BF16"

/* A prefix every name carries, as the problem: when no name is a parameter's as it is and some
 * are without the prefix.  Returns REFENC_OK when that is not the case. */
static int foreign_prefix(const refenc_params *p, const refenc_st_file *f, refenc_error *err)
{
    const size_t plen = name_prefix_common(f);
    const char *stripped = NULL;
    for (size_t i = 0; i < f->n_tensors && plen > 0; i++) {
        if (refenc_params_find(p, f->tensors[i].name) != NULL)
            return REFENC_OK;
        if (stripped == NULL && refenc_params_find(p, f->tensors[i].name + plen) != NULL)
            stripped = f->tensors[i].name;
    }
    if (stripped == NULL)
        return REFENC_OK;
    return name_prefix_refuse(f, plen, "nn.TransformerEncoder's state_dict", stripped, err);
}

int refenc_params_from_file(refenc_params *p, const refenc_st_file *f, char **report,
                            refenc_error *err)
{
    if (report != NULL)
        *report = NULL;
    const int foreign = foreign_prefix(p, f, err);
    if (foreign != REFENC_OK)
        return foreign;
    problems pr = {0};
    char q[512], want[128];
    for (size_t k = 0; k < p->n_tensors; k++) {
        const refenc_tensor *pt = &p->tensors[k];
        const refenc_st_tensor *t = refenc_st_find(f, pt->name);
        if (t == NULL)
            problem(&pr, "missing '%s' %s", pt->name,
                    refenc_shape_format(want, sizeof want, pt->shape, pt->ndim, "()"));
        else
            check_tensor(&pr, t, pt->ndim, pt->shape, 1, FLOAT_DTYPES);
    }
    for (size_t i = 0; i < f->n_tensors; i++) {
        const refenc_st_tensor *t = &f->tensors[i];
        if (refenc_params_find(p, t->name) == NULL)
            problem(&pr, "extra '%s' %s", quoted(q, sizeof q, t->name),
                    refenc_shape_format(want, sizeof want, t->shape, t->ndim, "()"));
    }
    int st = problems_end(&pr, f->path, "the weights do not match the config", report, err);
    for (size_t k = 0; k < p->n_tensors && st == REFENC_OK; k++)
        st = refenc_st_to_f64(p->tensors[k].data, f, refenc_st_find(f, p->tensors[k].name), err);
    return st;
}

/* ---- inputs ------------------------------------------------------------------ */

static const char *const input_names[] = {"in.tokens", "in.x", "in.token_type_ids", "in.key_padding_mask",
                                          "in.positions", "in.attn_mask", NULL};

/* The input tensors of an inputs file, and the shape (B, L) the leading one gives. */
typedef struct {
    int tokens;                 /* the config has a vocabulary: the input is in.tokens */
    const char *lead_name;
    const refenc_st_tensor *lead, *other, *types, *mask, *pos, *attn;
    size_t B, L;
} input_tensors;

/* The shape (B, L) from the leading input, in.tokens or in.x. */
static void check_lead(problems *pr, input_tensors *in, const refenc_config *cfg)
{
    const int tokens = in->tokens;
    const refenc_st_tensor *lead = in->lead;
    const size_t lead_ndim = tokens ? 2 : 3;
    if (lead == NULL) {
        problem(pr, tokens ? "missing 'in.tokens' (B, L) (the config has vocab_size %zu)"
                           : "missing 'in.x' (B, L, %zu) (the config has vocab_size %zu: the input is x)",
                tokens ? cfg->vocab_size : cfg->d_model, cfg->vocab_size);
    } else if (lead->ndim != lead_ndim || (!tokens && lead->shape[2] != cfg->d_model)) {
        char got[128];
        problem(pr, tokens ? "'in.tokens' has shape %s, expected (B, L)"
                           : "'in.x' has shape %s, expected (B, L, %zu)",
                refenc_shape_format(got, sizeof got, lead->shape, lead->ndim, "()"), cfg->d_model);
    } else {
        in->B = lead->shape[0];
        in->L = lead->shape[1];
        if (tokens)
            check_tensor(pr, lead, 2, lead->shape, 0, "I64");
        else
            check_tensor(pr, lead, 3, lead->shape, 1, FLOAT_DTYPES);
    }
}

/* The optional inputs, against the shape (B, L); then every tensor that is not an input. */
static void check_others(problems *pr, const input_tensors *in, const refenc_st_file *f)
{
    char q[512];
    const size_t B = in->B, L = in->L;
    if (B > 0) {
        const size_t bl[2] = {B, L}, l1[1] = {L}, ll[2] = {L, L};
        if (in->types != NULL)
            check_tensor(pr, in->types, 2, bl, 0, "I64");
        if (in->mask != NULL && check_tensor(pr, in->mask, 2, bl, 0, "BOOL or U8") &&
            in->mask->dtype == REFENC_ST_I64)
            problem(pr, "'in.key_padding_mask' has dtype I64, expected BOOL or U8");
        if (in->pos != NULL)
            check_tensor(pr, in->pos, 1, l1, 0, "I64");
        if (in->attn != NULL)
            check_tensor(pr, in->attn, 2, ll, 1, FLOAT_DTYPES);
    }
    for (size_t i = 0; i < f->n_tensors; i++) {
        int known = 0;
        for (const char *const *n = input_names; *n != NULL; n++)
            known |= strcmp(f->tensors[i].name, *n) == 0;
        if (!known)
            problem(pr, "extra '%s' (inputs are in.tokens or in.x, in.token_type_ids, "
                        "in.key_padding_mask, in.positions, in.attn_mask)",
                    quoted(q, sizeof q, f->tensors[i].name));
    }
}

/* The key padding mask: BOOL or U8 through int64, anything but 0/1 kept as 2 for validation to refuse. */
static int read_mask(refenc_case *c, const refenc_st_file *f, const input_tensors *in, refenc_error *err)
{
    int st;
    int64_t *m = refenc_alloc_array(in->B * in->L, sizeof *m);
    if (m == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", f->path);
    else if ((st = refenc_st_to_i64(m, f, in->mask, err)) == REFENC_OK)
        for (size_t k = 0; k < in->B * in->L; k++) /* a U8 other than 0/1 is refused by validation */
            c->key_padding_mask[k] = (uint8_t)(m[k] == 0 ? 0 : m[k] == 1 ? 1 : 2);
    free(m);
    return st;
}

/* Converts the file's inputs into the case allocated for them. */
static int read_inputs(refenc_case *c, const refenc_config *cfg, const refenc_st_file *f,
                       const input_tensors *in, refenc_error *err)
{
    /* given, or the defaults 0 ... L-1 for a positional scheme; never under position_ids
     * "roberta", which derives them from the tokens (and refuses given ones) */
    c->has_positions = in->pos != NULL ||
                       (cfg->positional != REFENC_POS_NONE && cfg->position_ids != REFENC_POSIDS_ROBERTA);
    int st = in->tokens ? refenc_st_to_i64(c->tokens, f, in->lead, err) : refenc_st_to_f64(c->x, f, in->lead, err);
    if (st == REFENC_OK && in->types != NULL) /* absent: every position type 0, as HF's default */
        st = refenc_st_to_i64(c->token_types, f, in->types, err);
    if (st == REFENC_OK && in->pos != NULL)
        st = refenc_st_to_i64(c->positions, f, in->pos, err);
    if (st == REFENC_OK && in->attn != NULL)
        st = refenc_st_to_f64(c->attn_mask, f, in->attn, err);
    if (st == REFENC_OK && in->mask != NULL)
        st = read_mask(c, f, in, err);
    return st;
}

int refenc_case_from_inputs_file(refenc_case *c, const refenc_config *cfg,
                                 const refenc_st_file *f, char **report, refenc_error *err)
{
    memset(c, 0, sizeof *c);
    if (report != NULL)
        *report = NULL;
    problems pr = {0};
    input_tensors in = {0};
    in.tokens = cfg->vocab_size > 0;
    in.lead_name = in.tokens ? "in.tokens" : "in.x";
    in.lead = refenc_st_find(f, in.lead_name);
    in.other = refenc_st_find(f, in.tokens ? "in.x" : "in.tokens");
    in.types = refenc_st_find(f, "in.token_type_ids");
    in.mask = refenc_st_find(f, "in.key_padding_mask");
    in.pos = refenc_st_find(f, "in.positions");
    in.attn = refenc_st_find(f, "in.attn_mask");

    check_lead(&pr, &in, cfg);
    if (in.other != NULL)
        problem(&pr, "extra '%s': the config has vocab_size %zu, so the input is %s", in.other->name,
                cfg->vocab_size, in.lead_name);
    if (in.types != NULL && (!in.tokens || cfg->type_vocab_size == 0)) {
        problem(&pr, "extra 'in.token_type_ids': the config has %s, so the model takes no token types",
                in.tokens ? "type_vocab_size 0" : "vocab_size 0 (the input is in.x)");
        in.types = NULL;
    }
    check_others(&pr, &in, f);
    int st = problems_end(&pr, f->path, "the inputs do not match the config", report, err);
    if (st != REFENC_OK)
        return st;

    if ((st = refenc_case_alloc(c, REFENC_COMP_ENCODER, cfg, in.B, in.L, in.tokens, in.mask != NULL,
                                in.attn != NULL, err)) != REFENC_OK) {
        char msg[REFENC_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", err != NULL ? err->message : "");
        return refenc_error_set(err, st, "%s: inputs of shape (B %zu, L %zu): %s", f->path, in.B, in.L, msg);
    }
    st = read_inputs(c, cfg, f, &in, err);
    if (st == REFENC_OK && (st = refenc_case_validate(c, err)) != REFENC_OK) {
        char msg[REFENC_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", err != NULL ? err->message : "");
        refenc_error_set(err, st, "%s: %s", f->path, msg);
    }
    if (st != REFENC_OK)
        refenc_case_free(c);
    return st;
}
