#include "file.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../io/config_json.h"
#include "../io/half.h"
#include "../core/version.h"
#include "../encoder.h"
#include "../io/case_file.h"
#include "../io/config_json.h"
#include "../io/safetensors.h"
#include "../io/manifest.h"
#include "../tool/certify.h"
#include "digest.h"

/* ---- outputs and don't-care masks ------------------------------------------ */

/* Query rows whose outputs are implementation-defined: queries that see no
 * key (every key padded, later than them with the causal mask, or -inf in the
 * additive mask), and, with padded_queries, padded queries.  A bug variant's
 * outputs leave padded queries in: an implementation that inverts the mask
 * computes real values at the real tokens it believes are padding. */
static uint8_t *dead_rows_of(const refenc_case *c, int padded_queries, const uint8_t *pad, const double *attn,
                             int *failed)
{
    const size_t B = c->B, L = c->L;
    *failed = 0;
    if (c->component != REFENC_COMP_ENCODER && c->component != REFENC_COMP_ATTENTION)
        return NULL;
    uint8_t *dead = calloc(B * L, 1);
    if (dead == NULL) {
        *failed = 1;
        return NULL;
    }
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L; i++) {
            int sees_a_key = 0;
            for (size_t j = 0; j < L && !sees_a_key; j++)
                sees_a_key |= !(pad && pad[b * L + j]) && !(c->cfg.causal && j > i) &&
                              !(attn && attn[i * L + j] == -INFINITY);
            dead[b * L + i] = !sees_a_key || (padded_queries && pad && pad[b * L + i]);
        }
    return dead;
}

static uint8_t *dead_rows(const refenc_case *c, int padded_queries, int *failed)
{
    return dead_rows_of(c, padded_queries, c->key_padding_mask, c->attn_mask, failed);
}

/* 1 when every query row is dead with these masks (the golden's rule: padded queries too). */
static int every_row_dead(const refenc_case *c, const uint8_t *pad, const double *attn, int *failed)
{
    uint8_t *dead = dead_rows_of(c, 1, pad, attn, failed);
    int all = dead != NULL;
    for (size_t r = 0; dead != NULL && r < c->B * c->L && all; r++)
        all = dead[r];
    free(dead);
    return all;
}

static size_t masked_softmax_elements(const refenc_case *c, uint8_t *dc);

/* 1 when every softmax row of the case is all -inf (every element don't-care). */
static int every_softmax_row_masked(const refenc_case *c, int *failed)
{
    const size_t n = c->B * c->L;
    uint8_t *dc = calloc(n ? n : 1, 1);
    *failed = dc == NULL;
    const int all = dc != NULL && c->x != NULL && masked_softmax_elements(c, dc) == n;
    free(dc);
    return all;
}

const char *golden_uncompared_inputs(const refenc_case *c, int *failed)
{
    *failed = 0;
    if (c->component == REFENC_COMP_SOFTMAX)
        return every_softmax_row_masked(c, failed) ? "in.x" : NULL;
    if (!every_row_dead(c, c->key_padding_mask, c->attn_mask, failed))
        return NULL;
    /* which of the two does it alone; else both together */
    if (c->key_padding_mask != NULL && every_row_dead(c, c->key_padding_mask, NULL, failed))
        return "in.key_padding_mask";
    if (c->attn_mask != NULL && every_row_dead(c, NULL, c->attn_mask, failed))
        return "in.attn_mask";
    return "in.key_padding_mask and in.attn_mask";
}

int golden_set_init(golden_set *s, const refenc_case *c, int padded_queries, int final_only,
                    refenc_error *err)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    s->final_only = final_only;
    int failed;
    s->dead = dead_rows(c, padded_queries, &failed);
    return failed ? refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", c->name) : REFENC_OK;
}

void golden_set_free(golden_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->o[i].data);
        free(s->o[i].dc);
    }
    free(s->o);
    free(s->dead);
    memset(s, 0, sizeof *s);
}

int golden_is_required(const refenc_case *c, const char *out_name)
{
    return strcmp(out_name, "out.output") == 0 || strcmp(out_name, "out.embedding") == 0 ||
           c->component == REFENC_COMP_ALIBI;
}

/* An output into the set: a copy of data, or (owned) data itself. */
static void set_add(golden_set *s, const char *name, const double *data, double *owned, size_t ndim,
                    const size_t *shape);

void golden_set_collect(void *ctx, const char *name, const double *data, size_t ndim,
                        const size_t *shape)
{
    set_add(ctx, name, data, NULL, ndim, shape);
}

void golden_set_adopt(golden_set *s, const char *name, double *data, size_t ndim, const size_t *shape)
{
    set_add(s, name, data, data, ndim, shape);
}

/* Marks the don't-care elements of dead query rows in a (B, L, D) or (B, H, L, L) output, or, with
 * selected rows (in.rows), in the last layer's (B, R, D) or (B, H, R, L): row k is query row
 * rows[k]; returns how many. */
static size_t dead_query_elements(const golden_set *s, size_t ndim, const size_t *shape, uint8_t *dc)
{
    const size_t B = s->c->B, L = s->c->L;
    const int64_t *rows = s->c->rows;
    size_t any = 0, Q = 0; /* the output's query rows */
    if (ndim == 3 && shape[0] == B && (shape[1] == L || (rows != NULL && shape[1] == s->c->R)))
        Q = shape[1];
    else if (ndim == 4 && shape[0] == B && shape[3] == L && (shape[2] == L || (rows != NULL && shape[2] == s->c->R)))
        Q = shape[2];
    if (Q == 0)
        return 0;
    const int selected = Q != L; /* a (B, R, ...) output: its row k is query rows[k] */
    for (size_t b = 0; b < B; b++)
        for (size_t k = 0; k < Q; k++) {
            const size_t i = selected ? (size_t)rows[k] : k;
            if (!s->dead[b * L + i])
                continue;
            if (ndim == 3)
                for (size_t d = 0; d < shape[2]; d++, any++)
                    dc[(b * Q + k) * shape[2] + d] = 1;
            else
                for (size_t h = 0; h < shape[1]; h++)
                    for (size_t j = 0; j < L; j++, any++)
                        dc[((b * shape[1] + h) * Q + k) * L + j] = 1;
        }
    return any;
}

/* Marks the softmax rows whose every logit is -inf as don't-care; returns how many elements. */
static size_t masked_softmax_elements(const refenc_case *c, uint8_t *dc)
{
    const size_t B = c->B, L = c->L;
    size_t any = 0;
    for (size_t r = 0; r < B; r++) {
        int all_masked = 1;
        for (size_t j = 0; j < L; j++)
            all_masked &= c->x[r * L + j] == -INFINITY;
        for (size_t j = 0; j < L && all_masked; j++, any++)
            dc[r * L + j] = 1;
    }
    return any;
}

static void set_add(golden_set *s, const char *name, const double *data, double *owned, size_t ndim,
                    const size_t *shape)
{
    const refenc_case *c = s->c;
    char out_name[REFENC_NAME_MAX];
    if (s->failed || ndim > 4 || !refenc_name_output(out_name, sizeof out_name, name)) {
        s->failed = 1;
        free(owned);
        return;
    }
    if (s->final_only && !golden_is_required(c, out_name)) {
        free(owned);
        return;
    }
    if (!refenc_array_reserve((void **)&s->o, &s->cap, s->n + 1, sizeof *s->o)) {
        s->failed = 1;
        free(owned);
        return;
    }
    golden_output *o = &s->o[s->n];
    memset(o, 0, sizeof *o);
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    memcpy(o->name, out_name, sizeof out_name);
    o->ndim = ndim;
    memcpy(o->shape, shape, ndim * sizeof *shape);
    o->numel = n;
    o->data = owned != NULL ? owned : refenc_alloc_array(n, sizeof(double));
    uint8_t *dc = calloc(n ? n : 1, 1);
    if (o->data == NULL || dc == NULL) {
        free(o->data);
        free(dc);
        s->failed = 1;
        return;
    }
    if (owned == NULL)
        memcpy(o->data, data, n * sizeof(double));

    /* don't-care elements: query rows of (B, L, ...) outputs after the input
     * (padded queries, queries with every key masked); softmax rows of -inf */
    size_t any = 0;
    const int rowwise = (c->component == REFENC_COMP_ENCODER && strcmp(name, "embed") != 0) ||
                        c->component == REFENC_COMP_ATTENTION;
    if (rowwise && s->dead != NULL)
        any += dead_query_elements(s, ndim, shape, dc);
    if (c->component == REFENC_COMP_SOFTMAX)
        any += masked_softmax_elements(c, dc);
    if (!any) {
        free(dc);
        dc = NULL;
    }
    o->dc = dc;
    s->n++;
}

double golden_excess(const double *a, const double *b, const uint8_t *dc_a, const uint8_t *dc_b,
                     size_t n, refenc_tolerance tol)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if ((dc_a && dc_a[i]) || (dc_b && dc_b[i]))
            continue;
        const double d = fabs(a[i] - b[i]);
        const double r = isfinite(a[i]) ? d / (tol.atol + tol.rtol * fabs(b[i])) : INFINITY;
        if (r > worst)
            worst = r;
    }
    return worst;
}

/* ---- inputs and parameters ---------------------------------------------------- */

/* Bits of x equal to those of y (a NaN counts as held whatever its payload:
 * the formats keep a NaN a NaN). */
enum { HOLD_F16 = 1, HOLD_BF16 = 2, HOLD_F32 = 4 };

/* Which of F16, BF16, F32 hold the double x exactly (a NaN counts as held
 * whatever its payload: the formats keep a NaN a NaN).  Read from x as a
 * float32, when float32 holds it: bfloat16 is float32's upper half;
 * float16 has float32's 11 upper significand bits, exponents from -14
 * (normal) down to -24 (subnormal: multiples of 2^-24), and at most 65504. */
static int held_by(double x)
{
    if (isnan(x))
        return HOLD_F16 | HOLD_BF16 | HOLD_F32;
    const float f = (float)x;
    if ((double)f != x || (x == 0 && !signbit(x) != !signbit(f)))
        return 0; /* not even float32; then neither of the narrower two */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    int h = HOLD_F32;
    if ((u & 0xffff) == 0)
        h |= HOLD_BF16;
    const int biased = (int)(u >> 23) & 0xff, e = biased - 127; /* x = 1.m 2^e (normal float32) */
    const uint32_t frac = u & 0x7fffff;
    if (isinf(f) || x == 0)
        h |= HOLD_F16;
    else if (biased != 0 && e >= -14 && e <= 15 && (frac & 0x1fff) == 0)
        h |= HOLD_F16; /* normal float16: 10 fraction bits */
    else if (biased != 0 && e >= -24 && e < -14 && (frac & ((1u << (-1 - e)) - 1)) == 0)
        h |= HOLD_F16; /* subnormal float16: a multiple of 2^-24 */
    return h;
}

/* Which of F16, BF16, F32 hold every value of x[0..n) exactly. */
static int holds(const double *x, size_t n)
{
    int h = HOLD_F16 | HOLD_BF16 | HOLD_F32;
    for (size_t i = 0; i < n && h != 0; i++)
        h &= held_by(x[i]);
    return h;
}

const char *golden_input_dtype(const refenc_case *c)
{
    int h = HOLD_F16 | HOLD_BF16 | HOLD_F32;
    if (c->x != NULL)
        h &= holds(c->x, c->x_numel);
    if (c->attn_mask != NULL)
        h &= holds(c->attn_mask, c->L * c->L);
    for (size_t t = 0; t < c->params.n_tensors; t++)
        if (refenc_case_param_name(c->component, c->params.tensors[t].name) != NULL)
            h &= holds(c->params.tensors[t].data, c->params.tensors[t].size);
    if ((h & HOLD_F16) && (h & HOLD_BF16))
        return "F16,BF16";
    if (h & HOLD_F16)
        return "F16";
    if (h & HOLD_BF16)
        return "BF16";
    return h & HOLD_F32 ? "F32" : "F64";
}

typedef golden_entries entries;

static void *own(entries *es, void *p)
{
    if (p == NULL) {
        es->failed = 1;
        return NULL;
    }
    if (!refenc_array_reserve((void **)&es->owned, &es->cap_owned, es->n_owned + 1, sizeof *es->owned)) {
        free(p);
        es->failed = 1;
        return NULL;
    }
    es->owned[es->n_owned++] = p;
    return p;
}

static void add(entries *es, const char *name, refenc_st_dtype dtype, size_t ndim, const size_t *shape,
                const void *data)
{
    if (es->failed)
        return;
    if (!refenc_array_reserve((void **)&es->e, &es->cap, es->n + 1, sizeof *es->e)) {
        es->failed = 1;
        return;
    }
    refenc_st_entry *e = &es->e[es->n];
    memset(e, 0, sizeof *e);
    e->name = own(es, strdup(name));
    e->dtype = dtype;
    e->ndim = ndim;
    memcpy(e->shape, shape, ndim * sizeof *shape);
    e->data = data;
    es->n++;
}

/* A floating tensor: F32 when float32 holds every value, else F64. */
static void add_float(entries *es, const char *name, size_t ndim, const size_t *shape, const double *x)
{
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    if (holds(x, n) & HOLD_F32) {
        float *f = own(es, refenc_alloc_array(n, sizeof *f));
        if (f == NULL)
            return;
        for (size_t i = 0; i < n; i++)
            f[i] = (float)x[i];
        add(es, name, REFENC_ST_F32, ndim, shape, f);
    } else {
        add(es, name, REFENC_ST_F64, ndim, shape, x);
    }
}

static void add_outputs(entries *es, const golden_set *s, const char *variant, const int *keep)
{
    for (size_t k = 0; k < s->n; k++) {
        if (keep != NULL && !keep[k])
            continue;
        const golden_output *o = &s->o[k];
        char name[REFENC_NAME_MAX];
        if (variant == NULL)
            snprintf(name, sizeof name, "%s", o->name);
        else if (!refenc_name_alt(name, sizeof name, variant, o->name))
            es->failed = 1;
        add(es, name, REFENC_ST_F64, o->ndim, o->shape, o->data);
        if (o->dc != NULL) {
            if (!refenc_name_dontcare(name, sizeof name, variant, o->name))
                es->failed = 1;
            add(es, name, REFENC_ST_BOOL, o->ndim, o->shape, o->dc);
        }
    }
}

void golden_entries_add(golden_entries *es, const char *name, refenc_st_dtype dtype, size_t ndim,
                        const size_t *shape, const void *data)
{
    add(es, name, dtype, ndim, shape, data);
}

void golden_entries_free(golden_entries *es)
{
    for (size_t i = 0; i < es->n_owned; i++)
        free(es->owned[i]);
    free(es->owned);
    free(es->e);
    memset(es, 0, sizeof *es);
}

/* Writes the entries with the metadata (NULL: out of memory) to path
 * relative to `at` (display in messages) and frees what they own. */
static int entries_write_at(entries *es, int at, const char *path, const char *display, const json_t *meta,
                            const char *name, refenc_error *err)
{
    int st;
    if (es->failed || meta == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", name);
    else
        st = refenc_st_write_at(at, path, display, es->e, es->n, meta, err);
    golden_entries_free(es);
    return st;
}

static char *json_string_of(const json_t *j)
{
    return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : strdup("null");
}

char *golden_json_text(const json_t *j)
{
    return json_string_of(j);
}

/* The case's inputs and parameters (under the component's names). */
static void add_case(entries *es, const refenc_case *c)
{
    const size_t B = c->B, L = c->L, D = c->cfg.d_model, H = c->cfg.n_heads;
    if (c->x != NULL) {
        size_t shape[4];
        size_t nd;
        if (c->component == REFENC_COMP_ROPE)
            shape[0] = B, shape[1] = H, shape[2] = L, shape[3] = refenc_config_head_dim(&c->cfg), nd = 4;
        else if (c->component == REFENC_COMP_SOFTMAX || c->component == REFENC_COMP_ACTIVATION)
            shape[0] = B, shape[1] = L, nd = 2;
        else
            shape[0] = B, shape[1] = L, shape[2] = D, nd = 3;
        add_float(es, "in.x", nd, shape, c->x);
    }
    const size_t bl[2] = {B, L}, ll[2] = {L, L}, l1[1] = {L};
    if (c->tokens != NULL)
        add(es, "in.tokens", REFENC_ST_I64, 2, bl, c->tokens);
    if (c->token_types != NULL)
        add(es, "in.token_type_ids", REFENC_ST_I64, 2, bl, c->token_types);
    if (c->key_padding_mask != NULL)
        add(es, "in.key_padding_mask", REFENC_ST_BOOL, 2, bl, c->key_padding_mask);
    if (c->has_positions)
        add(es, "in.positions", REFENC_ST_I64, 1, l1, c->positions);
    if (c->attn_mask != NULL)
        add_float(es, "in.attn_mask", 2, ll, c->attn_mask);
    const size_t r1[1] = {c->R};
    if (c->rows != NULL) /* the last layer's query rows (docs/golden-format.md) */
        add(es, "in.rows", REFENC_ST_I64, 1, r1, c->rows);
    for (size_t t = 0; t < c->params.n_tensors; t++) {
        const refenc_tensor *p = &c->params.tensors[t];
        const char *fname = refenc_case_param_name(c->component, p->name);
        if (fname != NULL)
            add_float(es, fname, p->ndim, p->shape, p->data);
    }
}

void golden_entries_add_case(golden_entries *es, const refenc_case *c)
{
    add_case(es, c);
}

int golden_file_write(const golden_file *g, const char *path, refenc_error *err)
{
    return golden_file_write_at(g, AT_FDCWD, path, path, err);
}

int golden_file_write_at(const golden_file *g, int at, const char *path, const char *display,
                         refenc_error *err)
{
    const refenc_case *c = g->c;
    entries es = {0};
    add_case(&es, c);
    for (size_t t = 0; t < g->n_extra; t++)
        add(&es, g->extra[t].name, g->extra[t].dtype, g->extra[t].ndim, g->extra[t].shape,
            g->extra[t].data);
    /* the golden outputs, then the variants' */
    add_outputs(&es, g->golden, NULL, NULL);
    json_t *outputs = json_array();
    for (size_t k = 0; k < g->golden->n; k++)
        json_array_append_new(outputs, json_pack("{s:s, s:b}", "name", g->golden->o[k].name, "required",
                                                 golden_is_required(c, g->golden->o[k].name)));
    for (size_t v = 0; v < g->n_alt; v++)
        add_outputs(&es, &g->alt[v], g->alt_names[v], g->alt_keep[v]);

    json_t *config = refenc_config_to_json(&c->cfg);
    char *cfg_s = json_string_of(config), *outs_s = json_string_of(outputs);
    char *bugs_s = json_string_of(g->bug_classes), *vars_s = json_string_of(g->variants);
    char *tol_s = g->tolerance ? json_string_of(g->tolerance) : strdup("{}");
    /* a NULL from json_dumps (out of memory) must not become a file without metadata */
    const int ok = cfg_s && outs_s && bugs_s && vars_s && tol_s;
    json_t *meta = !ok ? NULL
                   : json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
                               "format", REFENC_GOLDEN_FORMAT, "format_version",
                               REFENC_GOLDEN_FORMAT_VERSION, "case", g->name, "component",
                               refenc_component_name(c->component), "description", g->description,
                               "config", cfg_s, "outputs", outs_s, "bug_classes", bugs_s,
                               "tolerance", tol_s, "variants", vars_s, "input_dtype",
                               golden_input_dtype(c), "generator", "refenc-golden " REFENC_VERSION,
                               "oracle", g->oracle);
    if (meta != NULL && g->float32_hazard != NULL)
        json_object_set_new(meta, "float32_hazard", json_string(g->float32_hazard));
    if (meta != NULL && g->variant_oracle != NULL)
        json_object_set_new(meta, "variant_oracle", json_string(g->variant_oracle));
    if (meta != NULL && g->variants_by_reference) { /* only then: the oracle's cases keep their bytes */
        char e[32];
        snprintf(e, sizeof e, "%.3g", g->variant_reference_error);
        json_object_set_new(meta, "variant_engine", json_string("reference"));
        json_object_set_new(meta, "variant_reference_error_f64", json_string(e));
    }
    if (meta != NULL && g->extra_meta != NULL)
        json_object_update(meta, (json_t *)g->extra_meta);
    const int st = entries_write_at(&es, at, path, display, meta, g->name, err);
    free(cfg_s);
    free(outs_s);
    free(bugs_s);
    free(vars_s);
    free(tol_s);
    json_decref(config);
    json_decref(outputs);
    json_decref(meta);
    return st;
}
