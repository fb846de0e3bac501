#include "parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../core/alloc.h"
#include "../io/case_file.h"
#include "../io/golden_names.h"
#include "../encoder.h"
#include "../io/config_json.h"
#include "../io/safetensors.h"
#include "../io/manifest.h"
#include "../core/version.h"
#include "../oracle/oracle.h"
#include "../tool/certify.h"
#include "alt.h"
#include "digest.h"
#include "manifest.h"
#include "plan.h"
#include "places.h"

int golden_parse_shard(const char *s, size_t *k, size_t *n)
{
    unsigned long a, b;
    int used = 0;
    if (s == NULL || sscanf(s, "%lu/%lu%n", &a, &b, &used) != 2 || s[used] != '\0' || s[0] < '0' ||
        s[0] > '9' || strchr(s, '+') != NULL || strchr(s, '-') != NULL || strchr(s, ' ') != NULL)
        return 0;
    if (a < 1 || b < 1 || a > b)
        return 0;
    *k = a;
    *n = b;
    return 1;
}

void golden_shard_units(size_t k, size_t n, size_t units, size_t *begin, size_t *end)
{
    /* (k - 1) units / n without overflow for any size_t units and n */
    *begin = (size_t)((unsigned __int128)(k - 1) * units / n);
    *end = (size_t)((unsigned __int128)k * units / n);
}

/* ---- the reference's layer inputs --------------------------------------------------- */

typedef struct {
    double **inputs;
    size_t first, last, n_layers, offset, numel; /* the items' values: numel from offset */
} chain;

static void keep_layer_input(void *ctx, const char *name, const double *data, size_t ndim,
                             const size_t *shape)
{
    (void)ndim, (void)shape;
    chain *ch = ctx;
    size_t layer;
    if (strcmp(name, "embed") == 0)
        layer = 0;
    else if (sscanf(name, "layers.%zu.", &layer) == 1 && strstr(name, ".output") != NULL &&
             strcmp(strstr(name, ".output"), ".output") == 0)
        layer++; /* the output of layer i is the input of layer i + 1 */
    else
        return;
    if (layer >= ch->first && layer <= ch->last && layer < ch->n_layers && ch->inputs[layer] != NULL)
        memcpy(ch->inputs[layer] + ch->offset, data, ch->numel * sizeof(double));
}

/* The case's input restricted to the items [lo, hi): the (B, L, ...)
 * tensors from item lo on; positions and the (L, L) mask are shared. */
static refenc_input items_input(const refenc_case *c, size_t lo, size_t hi)
{
    refenc_input in = refenc_case_input(c);
    const size_t L = c->L, D = c->cfg.d_model;
    in.B = hi - lo;
    if (in.tokens != NULL)
        in.tokens += lo * L;
    if (in.x != NULL)
        in.x += lo * L * D;
    if (in.key_padding_mask != NULL)
        in.key_padding_mask += lo * L;
    if (in.token_types != NULL)
        in.token_types += lo * L;
    return in;
}

void golden_layer_inputs_free(double **inputs, size_t n_layers)
{
    if (inputs == NULL)
        return;
    for (size_t i = 0; i < n_layers; i++)
        free(inputs[i]);
    free(inputs);
}

int golden_layer_inputs(double ***inputs, const refenc_case *c, size_t first, size_t last,
                        size_t item_lo, size_t item_hi, refenc_error *err)
{
    const size_t N = c->cfg.n_layers, LD = c->L * c->cfg.d_model, numel = c->B * LD;
    const size_t items = item_hi - item_lo;
    *inputs = calloc(N, sizeof **inputs);
    if (*inputs == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory for the layer inputs");
    for (size_t i = first; i <= last && i < N; i++)
        if (((*inputs)[i] = refenc_alloc_array(numel, sizeof(double))) == NULL) {
            golden_layer_inputs_free(*inputs, N);
            *inputs = NULL;
            return refenc_error_set(err, REFENC_ENOMEM, "out of memory for the layer inputs");
        }
    /* the stack before layer `last`, whose output is that layer's input;
     * for last = 0, the embedding alone */
    refenc_config cfg = c->cfg;
    cfg.n_layers = last == 0 ? 1 : last < N ? last : N;
    refenc_workspace ws; /* the embedding alone needs no layer's buffers */
    double *y = refenc_alloc_array(items * LD, sizeof *y);
    int st = last > 0 ? refenc_workspace_alloc(&ws, &cfg, items, c->L, err)
                      : refenc_workspace_alloc_embed(&ws, &cfg, items, c->L, err);
    if (st == REFENC_OK && y == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory for the reference's run");
    if (st == REFENC_OK) {
        chain ch = {*inputs, first, last, N, item_lo * LD, items * LD};
        const refenc_trace tr = {keep_layer_input, &ch};
        refenc_input in = items_input(c, item_lo, item_hi);
        in.rows = NULL, in.R = 0; /* the stack before layer `last`: every row (the rows are the last layer's) */
        if (last > 0) {
            st = refenc_encoder_forward(y, &ws, &c->params, &cfg, &in, &tr, err);
        } else if ((st = refenc_encoder_embed(y, &ws, &c->params, &cfg, &in, err)) == REFENC_OK) {
            const size_t shape[3] = {items, c->L, c->cfg.d_model};
            keep_layer_input(&ch, "embed", y, 3, shape);
        }
    }
    refenc_workspace_free(&ws);
    free(y);
    if (st != REFENC_OK) {
        golden_layer_inputs_free(*inputs, N);
        *inputs = NULL;
    }
    return st;
}

/* ---- the slices of a part ------------------------------------------------------------- */

/* The layer a step belongs to: layers.{i}.*, embed with layer 0, norm and
 * output with the last. */
static size_t step_layer(const char *step, size_t n_layers)
{
    size_t layer;
    if (sscanf(step, "layers.%zu.", &layer) == 1)
        return layer;
    return strcmp(step, "embed") == 0 ? 0 : n_layers - 1;
}

/* The items of layer `layer` among the units [begin, end). */
static void layer_items(size_t layer, size_t B, int per_layer, size_t begin, size_t end, size_t *lo,
                        size_t *hi)
{
    if (!per_layer) {
        *lo = begin, *hi = end;
        return;
    }
    const size_t a = begin > layer * B ? begin : layer * B, b = end < (layer + 1) * B ? end : (layer + 1) * B;
    *lo = a < b ? a - layer * B : 0;
    *hi = a < b ? b - layer * B : 0;
}

static int add_slice(golden_part_set *ps, const char *name, size_t lo, size_t hi, size_t ndim,
                     const size_t *full_shape)
{
    if (!refenc_array_reserve((void **)&ps->slice, &ps->cap, ps->n + 1, sizeof *ps->slice))
        return 0;
    golden_slice *sl = &ps->slice[ps->n++];
    memset(sl, 0, sizeof *sl);
    snprintf(sl->name, sizeof sl->name, "%s", name);
    sl->lo = lo, sl->hi = hi, sl->ndim = ndim;
    memcpy(sl->shape, full_shape, ndim * sizeof *full_shape);
    sl->shape[0] = hi - lo;
    return 1;
}

void golden_part_set_free(golden_part_set *ps)
{
    free(ps->slice);
    memset(ps, 0, sizeof *ps);
}

int golden_part_set_init(golden_part_set *ps, const refenc_case *c, golden_steps *steps, int per_layer,
                         size_t begin, size_t end, refenc_error *err)
{
    memset(ps, 0, sizeof *ps);
    const size_t N = c->cfg.n_layers, B = c->B;
    char name[REFENC_NAME_MAX];
    for (size_t i = 0; i < steps->n; i++) {
        size_t lo, hi;
        layer_items(step_layer(steps->step[i].name, N), B, per_layer, begin, end, &lo, &hi);
        if (lo == hi)
            continue;
        refenc_name_output(name, sizeof name, steps->step[i].name);
        if (!add_slice(ps, name, lo, hi, steps->step[i].ndim, steps->step[i].shape)) {
            golden_part_set_free(ps);
            return refenc_error_set(err, REFENC_ENOMEM, "out of memory for a part's outputs");
        }
    }
    for (size_t l = 0; per_layer && l < N; l++) {
        size_t lo, hi;
        layer_items(l, B, per_layer, begin, end, &lo, &hi);
        if (lo == hi)
            continue;
        const size_t shape[3] = {B, c->L, c->cfg.d_model};
        refenc_name_layer_input(name, sizeof name, l);
        if (!add_slice(ps, name, lo, hi, 3, shape)) {
            golden_part_set_free(ps);
            return refenc_error_set(err, REFENC_ENOMEM, "out of memory for a part's layer inputs");
        }
    }
    return REFENC_OK;
}

void golden_part_set_put_inputs(golden_part_set *ps, const refenc_case *c, const double *const *layer_inputs)
{
    const size_t LD = c->L * c->cfg.d_model;
    for (size_t i = 0; i < ps->n; i++) {
        size_t l;
        if (!refenc_name_is_layer_input(ps->slice[i].name, &l))
            continue;
        for (size_t b = ps->slice[i].lo; b < ps->slice[i].hi; b++)
            golden_part_put(ps->file, i, b, layer_inputs[l] + b * LD, LD);
    }
}

void golden_part_set_emit(void *ctx, const char *step, size_t item, const double *data, size_t ndim,
                          const size_t *shape)
{
    golden_part_set *ps = ctx;
    char name[REFENC_NAME_MAX];
    refenc_name_output(name, sizeof name, step);
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    for (size_t i = 0; i < ps->n; i++)
        if (strcmp(ps->slice[i].name, name) == 0 && item >= ps->slice[i].lo && item < ps->slice[i].hi) {
            golden_part_put(ps->file, i, item, data, n);
            return;
        }
}

/* ---- merge ------------------------------------------------------------------------------- */

typedef struct {
    refenc_st_file f;
    size_t k, n, begin, end, units;
    long prec, prec_check;
    json_t *slices, *plan;
} part;

static int final_step(void *ctx, const char *step)
{
    (void)ctx;
    return strcmp(step, "output") == 0;
}

static const char *meta(const part *p, const char *key)
{
    const char *v = refenc_st_metadata(&p->f, key);
    return v != NULL ? v : "";
}

static const char *plan_str(const part *p, const char *key)
{
    const char *v = json_string_value(json_object_get(p->plan, key));
    return v != NULL ? v : "";
}

static size_t plan_size(const part *p, const char *key)
{
    return (size_t)json_integer_value(json_object_get(p->plan, key));
}

/* The format and its version: a part of another format, or of version 1
 * (no plan, no checksums), is refused with what to do. */
static int check_format(const part *p, const char *path, refenc_error *err)
{
    if (strcmp(meta(p, "format"), GOLDEN_PART_FORMAT) != 0)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: not a part of a golden case (__metadata__.format is '%s', not '%s'): "
                                "parts are made by refenc golden --shard K/N",
                                path, meta(p, "format"), GOLDEN_PART_FORMAT);
    if (strcmp(meta(p, "format_version"), GOLDEN_PART_FORMAT_VERSION) != 0)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: a part of format version '%s'; this refenc merges version %s only: "
                                "earlier parts carry neither their plan (config, weights and inputs sha256, "
                                "units) nor a sha256 of their values, so their merge cannot be verified; make "
                                "the parts again with this refenc (refenc golden ... --shard K/N)",
                                path, meta(p, "format_version"), GOLDEN_PART_FORMAT_VERSION);
    return REFENC_OK;
}

/* The plan, its fingerprint and the tensors' sha256: the part is what it
 * was made as, and says which plan it belongs to (plan.h). */
static int check_integrity(part *p, const char *path, refenc_error *err)
{
    const char *plan_s = refenc_st_metadata(&p->f, "plan");
    p->plan = plan_s != NULL ? json_loads(plan_s, JSON_REJECT_DUPLICATES, NULL) : NULL;
    int st = golden_plan_check(p->plan, path, err);
    if (st != REFENC_OK)
        return st;
    char have[65];
    refenc_sha256_hex(have, plan_s, strlen(plan_s));
    if (strcmp(have, meta(p, "fingerprint")) != 0)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.fingerprint %.16s... is not the sha256 "
                                "of its plan (%.16s...): the fingerprint or the plan was edited", path,
                                meta(p, "fingerprint"), have);
    if (p->f.n_tensors > 0 && p->f.tensors[0].data == NULL) { /* the header alone (golden_part_verify) */
        if ((st = golden_file_sha256_read(have, &p->f, err)) != REFENC_OK)
            return st;
    } else if (!golden_file_sha256(have, &p->f)) {
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", path);
    }
    if (strcmp(have, meta(p, "tensors_sha256")) != 0)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: its tensors do not have the sha256 its metadata "
                                "records (tensors_sha256 %.16s..., the file's %.16s...): values were changed "
                                "after the part was made", path, meta(p, "tensors_sha256"), have);
    if (strcmp(meta(p, "case"), plan_str(p, "case")) != 0 ||
        strcmp(meta(p, "component"), plan_str(p, "component")) != 0)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.case or component ('%s', '%s') is not "
                                "its plan's ('%s', '%s')", path, meta(p, "case"), meta(p, "component"),
                                plan_str(p, "case"), plan_str(p, "component"));
    return REFENC_OK;
}

/* Reads and checks a part; header_only: its data are read in pieces for
 * its hash, never held (a rerun's check of a part it may keep). */
static int read_part(part *p, const char *path, int header_only, refenc_error *err)
{
    memset(p, 0, sizeof *p);
    int st = header_only ? refenc_st_read_header(&p->f, path, err) : refenc_st_read(&p->f, path, err);
    if (st == REFENC_OK)
        st = check_format(p, path, err);
    if (st == REFENC_OK)
        st = check_integrity(p, path, err);
    if (st != REFENC_OK)
        return st;
    unsigned long b, e;
    if (!golden_parse_shard(meta(p, "shard"), &p->k, &p->n) || sscanf(meta(p, "units"), "%lu-%lu", &b, &e) != 2 ||
        sscanf(meta(p, "prec"), "%ld", &p->prec) != 1 || sscanf(meta(p, "prec_check"), "%ld", &p->prec_check) != 1)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__: shard, units, prec or prec_check "
                                "missing or malformed", path);
    p->begin = b, p->end = e, p->units = plan_size(p, "units");
    if (p->n != plan_size(p, "shards"))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: shard %zu/%zu of a plan of %zu shards", path, p->k,
                                p->n, plan_size(p, "shards"));
    size_t want_b, want_e;
    golden_shard_units(p->k, p->n, p->units, &want_b, &want_e);
    if (want_b != p->begin || want_e != p->end)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: shard %zu/%zu of %zu units should hold units "
                                "%zu-%zu, not %zu-%zu", path, p->k, p->n, p->units, want_b, want_e, p->begin, p->end);
    p->slices = json_loads(meta(p, "slices"), 0, NULL);
    if (!json_is_object(p->slices))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.slices is not a JSON object", path);
    return REFENC_OK;
}

static void part_free(part *p)
{
    refenc_st_free(&p->f);
    json_decref(p->slices);
    json_decref(p->plan);
}

/* Whether path is shard k of the plan plan_text, whole and unchanged (parts.h). */
int golden_part_verify(const char *path, const char *plan_text, size_t k, refenc_error *err)
{
    part p;
    int st = read_part(&p, path, 1, err);
    json_t *want = st == REFENC_OK ? json_loads(plan_text, 0, NULL) : NULL;
    const char *field = want != NULL ? golden_plan_differs(p.plan, want) : NULL;
    if (st == REFENC_OK && want == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    else if (st == REFENC_OK && field != NULL)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: a part of another plan (its '%s' differs)", path, field);
    else if (st == REFENC_OK && p.k != k)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: shard %zu/%zu, not %zu/%zu", path, p.k, p.n, k, p.n);
    json_decref(want);
    part_free(&p);
    return st;
}

/* The state of one merge: the parts, the case they hold, and what is joined so far. */
typedef struct {
    part *p;
    size_t n_parts;
    const char *const *paths;
    const part *first; /* shard 1, which carries the case */
    int per_layer, final_only;
    refenc_case c;
    golden_steps steps;
    golden_set gs;
    json_t *bugs, *tol, *extra_meta;
    uint8_t **seen; /* seen[which][b]: item b of a step's output or of a layer input is placed */
    double **layer_inputs;
    refenc_st_entry *extra;
    size_t n_layers, n_seen;
    const char *variants; /* the plan's: NULL, "all" or "bug_classes" */
    golden_alt alt;       /* the bug variants, computed here (the reference's) */
} merge;

/* Names the shards that no part holds. */
static int missing_shards(const merge *m, refenc_error *err)
{
    const part *p = m->p;
    char missing[256] = "";
    for (size_t k = 1; k <= p[0].n && strlen(missing) < 200; k++) {
        int have = 0;
        for (size_t i = 0; i < m->n_parts; i++)
            have |= p[i].k == k;
        if (!have)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%zu/%zu",
                     missing[0] ? ", " : "", k, p[0].n);
    }
    return refenc_error_set(err, REFENC_EFORMAT, "case '%s' has %zu shards; %zu part%s given, missing: %s",
                            meta(&p[0], "case"), p[0].n, m->n_parts, m->n_parts == 1 ? "" : "s", missing);
}

/* Names the field where part i's plan differs from part 0's. */
static int plans_differ(const merge *m, size_t i, const char *field, refenc_error *err)
{
    char *a = json_dumps(json_object_get(m->p[i].plan, field), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    char *b = json_dumps(json_object_get(m->p[0].plan, field), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    const int version = strcmp(field, "refenc_version") == 0;
    int st = refenc_error_set(err, REFENC_EFORMAT, "%s: its plan's '%s' is %.80s, %s's is %.80s: %s", m->paths[i],
                              field, a ? a : "?", m->paths[0], b ? b : "?",
                              version ? "parts made by different refenc versions do not merge"
                                      : "parts of different plans do not merge");
    free(a);
    free(b);
    return st;
}

/* Checks that the parts are of one plan, made by this refenc, every shard
 * once, and finds shard 1. */
static int check_shards(merge *m, refenc_error *err)
{
    const part *p = m->p;
    const char *const *paths = m->paths;
    int st = REFENC_OK;
    for (size_t i = 0; i < m->n_parts && st == REFENC_OK; i++) {
        const char *field = golden_plan_differs(p[i].plan, p[0].plan);
        if (field != NULL)
            st = plans_differ(m, i, field, err);
        for (size_t j = 0; j < i && st == REFENC_OK; j++)
            if (p[j].k == p[i].k)
                st = refenc_error_set(err, REFENC_EFORMAT, "%s and %s are both shard %zu/%zu", paths[j],
                                      paths[i], p[i].k, p[i].n);
        if (p[i].k == 1)
            m->first = &p[i];
    }
    if (st == REFENC_OK && m->n_parts != p[0].n)
        st = missing_shards(m, err);
    if (st == REFENC_OK && strcmp(plan_str(&p[0], "refenc_version"), REFENC_VERSION) != 0)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: made by refenc %s; this is refenc %s: merge the parts "
                              "with the refenc that made them (the case records its maker)", paths[0],
                              plan_str(&p[0], "refenc_version"), REFENC_VERSION);
    return st;
}

/* The case's name becomes a file name, and no file the merge writes may be
 * one of its parts (places.h). */
static int check_places(const merge *m, const char *out_dir, const char *out_file, refenc_error *err)
{
    const char *name = meta(&m->p[0], "case");
    int st = golden_check_case_name(name, m->paths[0], err);
    const char **what = st == REFENC_OK ? malloc(m->n_parts * sizeof *what) : NULL;
    if (st == REFENC_OK && what == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    for (size_t i = 0; what != NULL && i < m->n_parts; i++)
        what[i] = "part";
    const golden_places p = {.out_dir = out_dir, .out_file = out_file, .name = name};
    if (st == REFENC_OK)
        st = golden_refuse_inputs(&p, m->paths, what, m->n_parts, err);
    free(what);
    return st;
}

/* Reads the case from part 1: its tensors but the slices. */
static int case_from_first(merge *m, refenc_error *err)
{
    const part *first = m->first;
    refenc_st_file view = first->f;
    view.tensors = malloc((first->f.n_tensors ? first->f.n_tensors : 1) * sizeof *view.tensors);
    view.n_tensors = 0;
    if (view.tensors == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    for (size_t t = 0; t < first->f.n_tensors; t++)
        if (strncmp(first->f.tensors[t].name, GOLDEN_SLICE_PREFIX, strlen(GOLDEN_SLICE_PREFIX)) != 0)
            view.tensors[view.n_tensors++] = first->f.tensors[t];
    int st = refenc_case_from_file(&m->c, &view, err);
    free(view.tensors);
    return st;
}

/* Reads the case's bug classes and tolerance from part 1's metadata. */
static int read_case_meta(merge *m, refenc_error *err)
{
    m->bugs = json_loads(meta(m->first, "bug_classes"), 0, NULL);
    m->tol = json_loads(meta(m->first, "tolerance"), 0, NULL);
    if (!json_is_array(m->bugs) || !json_is_object(m->tol) || m->c.component != REFENC_COMP_ENCODER)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__ of part 1 lacks the case's "
                                "bug_classes or tolerance, or it is not an encoder case", m->first->f.path);
    return REFENC_OK;
}

/* Checks that the plan's units are the case's: its batch items, or layers x items per layer. */
static int check_units(const merge *m, refenc_error *err)
{
    const size_t want = refenc_mp_encoder_units(&m->c.cfg, m->c.B, m->per_layer);
    if (plan_size(m->first, "units") != want)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: its plan's units (%zu) are not the case's: %zu (%s)",
                                m->first->f.path, plan_size(m->first, "units"), want,
                                m->per_layer ? "layers x batch items" : "batch items");
    return REFENC_OK;
}

/* Allocates the merged layer inputs and the record of which items are placed. */
static int alloc_merged(merge *m, refenc_error *err)
{
    const refenc_case *c = &m->c;
    m->n_layers = c->cfg.n_layers;
    m->n_seen = m->steps.n + (m->per_layer ? m->n_layers : 0);
    m->seen = calloc(m->n_seen, sizeof *m->seen);
    m->layer_inputs = m->per_layer ? calloc(m->n_layers, sizeof *m->layer_inputs) : NULL;
    int st = m->seen == NULL || (m->per_layer && m->layer_inputs == NULL) ? REFENC_ENOMEM : REFENC_OK;
    for (size_t i = 0; i < m->n_seen && st == REFENC_OK; i++)
        if ((m->seen[i] = calloc(c->B, 1)) == NULL)
            st = REFENC_ENOMEM;
    for (size_t l = 0; m->per_layer && l < m->n_layers && st == REFENC_OK; l++)
        if ((m->layer_inputs[l] = refenc_alloc_array(c->B * c->L * c->cfg.d_model, sizeof(double))) == NULL)
            st = REFENC_ENOMEM;
    if (st != REFENC_OK)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory for the merged case");
    return st;
}

/* Places one slice of part i in its step's tensor or layer input, each item once. */
static int place_slice(merge *m, size_t i, const char *key, json_t *range, refenc_error *err)
{
    const refenc_case *c = &m->c;
    char tname[REFENC_NAME_MAX + 8];
    snprintf(tname, sizeof tname, GOLDEN_SLICE_PREFIX "%s", key);
    const refenc_st_tensor *t = refenc_st_find(&m->p[i].f, tname);
    const json_int_t lo = json_integer_value(json_array_get(range, 0));
    const json_int_t hi = json_integer_value(json_array_get(range, 1));
    /* where it goes: a step's tensor, or a layer input */
    double *full = NULL;
    size_t per_item = 0, which = 0, layer = 0;
    if (strncmp(key, REFENC_NAME_OUTPUT, strlen(REFENC_NAME_OUTPUT)) == 0) {
        golden_step *gst = golden_steps_find(&m->steps, key + strlen(REFENC_NAME_OUTPUT));
        if (gst != NULL) {
            full = gst->data;
            per_item = gst->numel / c->B;
            which = (size_t)(gst - m->steps.step);
            layer = step_layer(gst->name, m->n_layers);
        }
    } else if (m->per_layer && refenc_name_is_layer_input(key, &layer) && layer < m->n_layers) {
        full = m->layer_inputs[layer];
        per_item = c->L * c->cfg.d_model;
        which = m->steps.n + layer;
    }
    if (full == NULL || t == NULL || lo < 0 || hi <= lo || (size_t)hi > c->B ||
        t->numel != (size_t)(hi - lo) * per_item || t->dtype != REFENC_ST_F64)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: slice '%s' (items %lld to %lld) is not one of "
                                "the case's outputs, or does not have its shape", m->paths[i], key,
                                (long long)lo, (long long)hi);
    /* the items its units give, no other */
    const part *p = &m->p[i];
    size_t want_lo, want_hi;
    layer_items(layer, c->B, m->per_layer, p->begin, p->end, &want_lo, &want_hi);
    if ((size_t)lo != want_lo || (size_t)hi != want_hi)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: slice '%s' holds items %lld to %lld, but shard "
                                "%zu/%zu (units %zu-%zu) holds items %zu to %zu of it", m->paths[i], key,
                                (long long)lo, (long long)hi, p->k, p->n, p->begin, p->end, want_lo, want_hi);
    int st = REFENC_OK;
    for (size_t b = (size_t)lo; b < (size_t)hi && st == REFENC_OK; b++)
        if (m->seen[which][b]++)
            st = refenc_error_set(err, REFENC_EFORMAT, "%s: item %zu of '%s' is also in another part",
                                  m->paths[i], b, key);
    if (st == REFENC_OK)
        st = refenc_st_to_f64(full + (size_t)lo * per_item, &m->p[i].f, t, err);
    return st;
}

/* Places every slice of part i. */
static int place_part(merge *m, size_t i, refenc_error *err)
{
    const char *key;
    json_t *range;
    json_object_foreach(m->p[i].slices, key, range) {
        int st = place_slice(m, i, key, range, err);
        if (st != REFENC_OK)
            return st;
    }
    return REFENC_OK;
}

/* Checks that some part held every item of every output and layer input. */
static int check_every_item(const merge *m, refenc_error *err)
{
    for (size_t i = 0; i < m->n_seen; i++)
        for (size_t b = 0; b < m->c.B; b++)
            if (!m->seen[i][b]) {
                char nm[REFENC_NAME_MAX];
                if (i < m->steps.n)
                    refenc_name_output(nm, sizeof nm, m->steps.step[i].name);
                else
                    refenc_name_layer_input(nm, sizeof nm, i - m->steps.n);
                return refenc_error_set(err, REFENC_EFORMAT, "no part holds item %zu of '%s'", b, nm);
            }
    return REFENC_OK;
}

/* Moves the merged outputs into the case file's set of tensors. */
static int adopt_outputs(merge *m, refenc_error *err)
{
    int st = golden_set_init(&m->gs, &m->c, 1, m->final_only, err);
    for (size_t i = 0; i < m->steps.n && st == REFENC_OK; i++) {
        golden_step *s = &m->steps.step[i];
        golden_set_adopt(&m->gs, s->name, s->data, s->ndim, s->shape);
        s->data = NULL;
    }
    if (st == REFENC_OK && m->gs.failed)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory for the merged case");
    return st;
}

/* Builds the extra entries of the layer inputs and the metadata that announces them. */
static int layer_input_entries(merge *m, refenc_error *err)
{
    const refenc_case *c = &m->c;
    m->extra = calloc(m->n_layers, sizeof *m->extra);
    char (*names)[REFENC_NAME_MAX] = m->extra ? calloc(m->n_layers, REFENC_NAME_MAX) : NULL;
    m->extra_meta = json_pack("{s:s}", "per_layer", "true");
    if (names == NULL || m->extra_meta == NULL) {
        free(names);
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    }
    for (size_t l = 0; l < m->n_layers; l++) {
        refenc_name_layer_input(names[l], REFENC_NAME_MAX, l);
        m->extra[l] = (refenc_st_entry){.name = names[l], .dtype = REFENC_ST_F64, .ndim = 3,
                                        .shape = {c->B, c->L, c->cfg.d_model}, .data = m->layer_inputs[l]};
    }
    return REFENC_OK;
}

/* Writes the case file, as the run without --shard writes it, and reports it unless quiet. */
static int write_merged(const merge *m, golden_file *g, const char *out_dir, const char *out_file, int quiet,
                        refenc_error *err)
{
    const char *name = g->name;
    long prec = 0, check = 0;
    for (size_t i = 0; i < m->n_parts; i++) {
        prec = m->p[i].prec > prec ? m->p[i].prec : prec;
        check = m->p[i].prec_check > check ? m->p[i].prec_check : check;
    }
    char desc[256];
    golden_oracle_desc(desc, sizeof desc, prec, check);
    json_t *variants = json_array();
    const golden_alt *v = &m->alt;
    g->oracle = desc;
    g->golden = &m->gs;
    g->variants = v->meta != NULL ? v->meta : variants;
    if (m->variants != NULL) /* as the run without --shard writes them (make.c, write_case) */
        *g = (golden_file){.c = g->c, .name = g->name, .description = g->description,
                           .bug_classes = strcmp(m->variants, "all") == 0 ? v->classes : g->bug_classes,
                           .tolerance = g->tolerance, .float32_hazard = g->float32_hazard, .oracle = desc,
                           .golden = &m->gs, .variant_oracle = v->n > 0 ? v->desc : NULL,
                           .variants_by_reference = v->n > 0 && v->by_reference,
                           .variant_reference_error = v->ref_error, .n_alt = v->n, .alt = v->set,
                           .alt_names = v->names, .alt_keep = (const int *const *)v->keep, .variants = g->variants};
    g->extra_meta = m->extra_meta;
    g->n_extra = m->per_layer ? m->n_layers : 0;
    g->extra = m->extra;
    int st;
    if (out_file != NULL)
        st = golden_file_write(g, out_file, err);
    else
        st = golden_dir_add(out_dir, g, err);
    json_decref(variants);
    if (st == REFENC_OK && !quiet)
        printf("refenc golden merge: case %s: %zu parts joined into %s%s%s%s\n", name, m->n_parts,
               out_file ? out_file : out_dir, out_file ? "" : "/cases/", out_file ? "" : name,
               out_file ? "" : ".safetensors");
    return st;
}

/* Frees everything a merge holds, the parts included. */
static void merge_free(merge *m)
{
    if (m->extra != NULL && m->n_layers > 0)
        free((void *)m->extra[0].name);
    free(m->extra);
    json_decref(m->extra_meta);
    for (size_t i = 0; i < m->n_seen && m->seen != NULL; i++)
        free(m->seen[i]);
    free(m->seen);
    golden_layer_inputs_free(m->layer_inputs, m->n_layers);
    golden_alt_free(&m->alt);
    golden_set_free(&m->gs);
    golden_steps_free(&m->steps);
    json_decref(m->bugs);
    json_decref(m->tol);
    refenc_case_free(&m->c);
    for (size_t i = 0; i < m->n_parts; i++)
        part_free(&m->p[i]);
    free(m->p);
}

int golden_merge(const char *const *paths, size_t n_parts, const char *out_dir, const char *out_file,
                 int quiet, refenc_error *err)
{
    merge m;
    memset(&m, 0, sizeof m);
    m.p = calloc(n_parts ? n_parts : 1, sizeof *m.p);
    if (m.p == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    m.n_parts = n_parts;
    m.paths = paths;
    int st = REFENC_OK;
    for (size_t i = 0; i < n_parts && st == REFENC_OK; i++)
        st = read_part(&m.p[i], paths[i], 0, err);
    if (st == REFENC_OK)
        st = check_shards(&m, err);
    if (st == REFENC_OK)
        st = check_places(&m, out_dir, out_file, err);
    if (st == REFENC_OK) {
        m.per_layer = json_is_true(json_object_get(m.first->plan, "per_layer"));
        m.final_only = strcmp(plan_str(m.first, "outputs"), "final") == 0;
        st = case_from_first(&m, err);
    }
    if (st == REFENC_OK)
        st = read_case_meta(&m, err);
    golden_file g;
    memset(&g, 0, sizeof g);
    if (st == REFENC_OK) {
        g = (golden_file){.c = &m.c, .name = meta(m.first, "case"), .description = meta(m.first, "description"),
                          .bug_classes = m.bugs, .tolerance = json_object_size(m.tol) ? m.tol : NULL,
                          .float32_hazard = refenc_st_metadata(&m.first->f, "float32_hazard")};
        st = golden_plan_verify_case(m.first->plan, &g, m.first->f.path, err);
    }
    if (st == REFENC_OK)
        st = check_units(&m, err);
    if (st == REFENC_OK)
        st = golden_steps_init(&m.steps, &m.c, m.final_only ? final_step : NULL, NULL, 1);
    if (st == REFENC_OK)
        st = alloc_merged(&m, err);
    for (size_t i = 0; i < n_parts && st == REFENC_OK; i++)
        st = place_part(&m, i, err);
    if (st == REFENC_OK)
        st = check_every_item(&m, err);
    if (st == REFENC_OK)
        st = adopt_outputs(&m, err);
    if (st == REFENC_OK && m.per_layer)
        st = layer_input_entries(&m, err);
    m.variants = m.first != NULL ? json_string_value(json_object_get(m.first->plan, "variants")) : NULL;
    if (st == REFENC_OK && m.variants != NULL) /* the double reference's, from the merged case */
        st = golden_alt_make(&m.alt, &(golden_alt_request){.c = &m.c, .name = g.name, .bug_classes = m.bugs,
                             .all = strcmp(m.variants, "all") == 0, .by_reference = 1, .threads = 1,
                             .quiet = quiet}, &m.gs, err);
    if (st == REFENC_OK)
        st = write_merged(&m, &g, out_dir, out_file, quiet, err);
    merge_free(&m);
    return st;
}
