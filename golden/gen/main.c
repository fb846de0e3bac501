/* refenc-golden: generates the golden cases of golden/catalogue.json from the
 * MPFR oracle, and their manifest.
 *
 *   refenc-golden list CATALOGUE
 *   refenc-golden gen CATALOGUE CASE OUT.safetensors
 *   refenc-golden manifest CATALOGUE CASES_DIR OUT.json
 *
 * Generation is deterministic: the same catalogue gives byte-identical files. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../../ref/tool/certify.h"
#include "../../ref/core/case.h"
#include "../../ref/io/case_file.h"
#include "../../ref/tool/run_case.h"
#include "../../ref/refenc.h"
#include "../../ref/io/safetensors.h"
#include "catalogue.h"
#include "engine.h"

#define MAX_TENSORS 512

/* Everything a case file holds, built up before one write. */
typedef struct {
    size_t n;
    refenc_st_entry e[MAX_TENSORS];
    void *owned[MAX_TENSORS]; /* data and names to free */
    size_t n_owned;
    json_t *outputs;          /* [{"name", "required"}] in forward order */
    int failed;
} file_builder;

static void *own(file_builder *fb, void *p)
{
    if (p == NULL || fb->n_owned == MAX_TENSORS) {
        fb->failed = 1;
        free(p);
        return NULL;
    }
    fb->owned[fb->n_owned++] = p;
    return p;
}

static void add(file_builder *fb, const char *name, refenc_st_dtype dtype, size_t ndim,
                const size_t *shape, const void *data)
{
    if (fb->failed || fb->n == MAX_TENSORS) {
        fb->failed = 1;
        return;
    }
    refenc_st_entry *e = &fb->e[fb->n++];
    e->name = own(fb, strdup(name));
    e->dtype = dtype;
    e->ndim = ndim;
    memcpy(e->shape, shape, ndim * sizeof *shape);
    e->data = data;
}

/* A float tensor stored as F32: its values are exactly representable (they
 * were rounded to at most 24 significant bits). */
static void add_f32(file_builder *fb, const char *name, size_t ndim, const size_t *shape, const double *x)
{
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    float *f = own(fb, malloc((n ? n : 1) * sizeof *f));
    if (f == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)x[i];
        if ((double)f[i] != x[i] && !isnan(x[i])) /* an input the catalogue did not round */
            fb->failed = 1;
    }
    add(fb, name, REFENC_ST_F32, ndim, shape, f);
}

/* ---- outputs and don't-care masks ------------------------------------------ */

#define MAX_OUTPUTS 128

/* The outputs of one run of a case (the golden, or a bug variant's). */
typedef struct {
    size_t n;
    char name[MAX_OUTPUTS][160];   /* "out.<step>"                               */
    size_t ndim[MAX_OUTPUTS], shape[MAX_OUTPUTS][4], numel[MAX_OUTPUTS];
    double *data[MAX_OUTPUTS];
    uint8_t *dc[MAX_OUTPUTS];      /* don't-care mask, or NULL when none         */
    const refenc_case *c;
    const uint8_t *dead;           /* (B, L) query rows that are don't-care      */
    int failed;
} output_set;

static void output_set_free(output_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->data[i]);
        free(s->dc[i]);
    }
    s->n = 0;
}

static void collect_output(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    output_set *s = ctx;
    const refenc_case *c = s->c;
    if (s->failed || s->n == MAX_OUTPUTS || ndim > 4) {
        s->failed = 1;
        return;
    }
    const size_t k = s->n;
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    refenc_name_output(s->name[k], sizeof s->name[k], name);
    s->ndim[k] = ndim;
    memcpy(s->shape[k], shape, ndim * sizeof *shape);
    s->numel[k] = n;
    s->data[k] = malloc((n ? n : 1) * sizeof(double));
    uint8_t *dc = calloc(n ? n : 1, 1);
    if (s->data[k] == NULL || dc == NULL) {
        free(s->data[k]);
        free(dc);
        s->failed = 1;
        return;
    }
    memcpy(s->data[k], data, n * sizeof(double));

    /* don't-care elements: query rows of (B, L, ...) outputs after the input
     * (padded queries, queries with every key masked); softmax rows of -inf */
    size_t any = 0;
    const int rowwise = (c->component == REFENC_COMP_ENCODER && strcmp(name, "embed") != 0) ||
                        c->component == REFENC_COMP_ATTENTION;
    const size_t B = c->B, L = c->L;
    if (rowwise && s->dead != NULL) {
        if (ndim == 3 && shape[0] == B && shape[1] == L) {            /* (B, L, D) */
            for (size_t bl = 0; bl < B * L; bl++)
                if (s->dead[bl])
                    for (size_t d = 0; d < shape[2]; d++, any++)
                        dc[bl * shape[2] + d] = 1;
        } else if (ndim == 4 && shape[0] == B && shape[2] == L) {     /* (B, H, L, L) */
            for (size_t b = 0; b < B; b++)
                for (size_t h = 0; h < shape[1]; h++)
                    for (size_t i = 0; i < L; i++)
                        if (s->dead[b * L + i])
                            for (size_t j = 0; j < L; j++, any++)
                                dc[((b * shape[1] + h) * L + i) * L + j] = 1;
        }
    }
    if (c->component == REFENC_COMP_SOFTMAX) {
        for (size_t r = 0; r < B; r++) {
            int all_masked = 1;
            for (size_t j = 0; j < L; j++)
                all_masked &= c->x[r * L + j] == -INFINITY;
            for (size_t j = 0; j < L && all_masked; j++, any++)
                dc[r * L + j] = 1;
        }
    }
    if (!any) {
        free(dc);
        dc = NULL;
    }
    s->dc[k] = dc;
    s->n++;
}

/* Query rows whose outputs are implementation-defined: queries that see no
 * key (every key padded, later than them with the causal mask, or -inf in the
 * additive mask), and, with padded_queries, padded queries.  A bug variant's
 * outputs leave padded queries in: an implementation that inverts the mask
 * computes real values at the real tokens it believes are padding. */
static uint8_t *dead_rows(const refenc_case *c, int padded_queries)
{
    const size_t B = c->B, L = c->L;
    if (c->component != REFENC_COMP_ENCODER && c->component != REFENC_COMP_ATTENTION)
        return NULL;
    uint8_t *dead = calloc(B * L, 1);
    if (dead == NULL)
        return NULL;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L; i++) {
            int sees_a_key = 0;
            for (size_t j = 0; j < L; j++)
                sees_a_key |= !(c->key_padding_mask && c->key_padding_mask[b * L + j]) &&
                              !(c->cfg.causal && j > i) &&
                              !(c->attn_mask && c->attn_mask[i * L + j] == -INFINITY);
            dead[b * L + i] = !sees_a_key ||
                              (padded_queries && c->key_padding_mask && c->key_padding_mask[b * L + i]);
        }
    return dead;
}

/* Runs the engine on c; the set keeps the outputs and their don't-care masks. */
static int run_case(output_set *s, const refenc_case *c, uint8_t **dead, const refenc_variant_hooks *hooks,
                    int certify, char *desc, size_t n_desc, refenc_error *err)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    *dead = dead_rows(c, hooks == NULL && certify);
    s->dead = *dead;
    const refenc_trace tr = {collect_output, s};
    int st = golden_engine_run(c, hooks, certify, &tr, desc, n_desc, err);
    if (st == REFENC_OK && s->failed)
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: too many outputs, or out of memory", c->name);
    return st;
}

/* The largest |a - b| / (atol + rtol |b|) over elements that are not
 * don't-care in either mask; +inf if a value is not finite. */
static double excess(const double *a, const double *b, const uint8_t *dc_a, const uint8_t *dc_b,
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

/* A bug variant is stored only when it moves a required output this many
 * times the float64 tolerance: otherwise it could not be told apart from a
 * correct float64 result (docs/certify.md). */
#define VARIANT_MIN_EXCESS 100.0

/* ---- gen --------------------------------------------------------------------- */

static char *json_string_of(const json_t *j)
{
    return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : strdup("null");
}

static int is_required(const refenc_case *c, const char *out_name)
{
    return strcmp(out_name, "out.output") == 0 || c->component == REFENC_COMP_ALIBI;
}

/* Adds the outputs of set s, the golden's (variant NULL) or a variant's
 * (alt.<variant>.*): only those in keep (NULL: all), with their don't-care
 * masks. */
static void add_outputs(file_builder *fb, const output_set *s, const char *variant, const int *keep)
{
    for (size_t k = 0; k < s->n; k++) {
        if (keep != NULL && !keep[k])
            continue;
        char name[REFENC_NAME_MAX];
        if (variant == NULL)
            snprintf(name, sizeof name, "%s", s->name[k]);
        else
            refenc_name_alt(name, sizeof name, variant, s->name[k]);
        add(fb, name, REFENC_ST_F64, s->ndim[k], s->shape[k], s->data[k]);
        if (s->dc[k] != NULL) {
            refenc_name_dontcare(name, sizeof name, variant, s->name[k]);
            add(fb, name, REFENC_ST_BOOL, s->ndim[k], s->shape[k], s->dc[k]);
        }
    }
}

#define MAX_VARIANTS REFENC_VAR_COUNT

static int gen(const char *catalogue_path, const char *name, const char *out_path, refenc_error *err)
{
    json_t *cat = catalogue_load(catalogue_path, err);
    if (cat == NULL)
        return REFENC_EINVAL;
    catalogue_case cc;
    refenc_case c;
    memset(&c, 0, sizeof c);
    file_builder fb;
    memset(&fb, 0, sizeof fb);
    fb.outputs = json_array();
    json_t *variants_meta = json_array();
    output_set golden, alt[MAX_VARIANTS];
    refenc_case vc[MAX_VARIANTS];
    uint8_t *dead = NULL, *vdead[MAX_VARIANTS] = {0};
    int keep[MAX_VARIANTS][MAX_OUTPUTS];
    size_t n_alt = 0;
    memset(&golden, 0, sizeof golden);
    memset(vc, 0, sizeof vc);
    json_t *meta = NULL;
    char engine_desc[256] = "", variant_desc[256] = "";

    int st = catalogue_find(&cc, cat, name, err);
    if (st == REFENC_OK)
        st = catalogue_build(&c, &cc, err);
    if (st == REFENC_OK) {
        const size_t B = c.B, L = c.L, D = c.cfg.d_model, H = c.cfg.n_heads;
        /* inputs */
        if (c.x != NULL) {
            size_t shape[4];
            size_t nd;
            if (c.component == REFENC_COMP_ROPE)
                shape[0] = B, shape[1] = H, shape[2] = L, shape[3] = D / H, nd = 4;
            else if (c.component == REFENC_COMP_SOFTMAX || c.component == REFENC_COMP_ACTIVATION)
                shape[0] = B, shape[1] = L, nd = 2;
            else
                shape[0] = B, shape[1] = L, shape[2] = D, nd = 3;
            add_f32(&fb, "in.x", nd, shape, c.x);
        }
        const size_t bl[2] = {B, L}, ll[2] = {L, L}, l1[1] = {L};
        if (c.tokens != NULL)
            add(&fb, "in.tokens", REFENC_ST_I64, 2, bl, c.tokens);
        if (c.token_types != NULL)
            add(&fb, "in.token_type_ids", REFENC_ST_I64, 2, bl, c.token_types);
        if (c.key_padding_mask != NULL)
            add(&fb, "in.key_padding_mask", REFENC_ST_BOOL, 2, bl, c.key_padding_mask);
        if (c.has_positions)
            add(&fb, "in.positions", REFENC_ST_I64, 1, l1, c.positions);
        if (c.attn_mask != NULL)
            add_f32(&fb, "in.attn_mask", 2, ll, c.attn_mask);
        /* parameters, under the component's names */
        for (size_t t = 0; t < c.params.n_tensors; t++) {
            const refenc_tensor *p = &c.params.tensors[t];
            const char *fname = refenc_case_param_name(c.component, p->name);
            if (fname != NULL)
                add_f32(&fb, fname, p->ndim, p->shape, p->data);
        }
        /* the golden outputs, certified by the oracle */
        st = run_case(&golden, &c, &dead, NULL, 1, engine_desc, sizeof engine_desc, err);
        if (st == REFENC_OK && fb.failed)
            st = refenc_error_set(err, REFENC_EINVAL, "case %s: too many tensors, out of memory, "
                                  "or an input not exactly representable", name);
    }
    if (st == REFENC_OK) {
        add_outputs(&fb, &golden, NULL, NULL);
        for (size_t k = 0; k < golden.n; k++)
            json_array_append_new(fb.outputs, json_pack("{s:s, s:b}", "name", golden.name[k], "required",
                                                         is_required(&c, golden.name[k])));
    }

    /* the bug variants the case targets, from the oracle */
    const json_t *classes = json_object_get(cc.entry, "bug_classes");
    refenc_tolerance tol64, tol32;
    refenc_certify_policy(&tol64, REFENC_ST_F64);
    refenc_certify_policy(&tol32, REFENC_ST_F32);
    for (int v = 0; v < REFENC_VAR_COUNT && st == REFENC_OK; v++) {
        const refenc_variant_info *info = refenc_variant_get((refenc_variant)v);
        int targeted = 0;
        size_t i;
        json_t *cl;
        json_array_foreach(classes, i, cl)
            targeted |= strcmp(json_string_value(cl), info->bug_class) == 0;
        if (!targeted || !refenc_variant_applies((refenc_variant)v, &c))
            continue;
        refenc_case *w = &vc[n_alt];
        refenc_variant_hooks hooks;
        if ((st = catalogue_build(w, &cc, err)))
            break;
        refenc_variant_apply((refenc_variant)v, w, &hooks);
        output_set *a = &alt[n_alt];
        if ((st = run_case(a, w, &vdead[n_alt], &hooks, 0, variant_desc, sizeof variant_desc, err)))
            break;
        /* effect on the required outputs; keep those and the first diverging one */
        double effect64 = 0, effect32 = 0;
        int first = -1;
        for (size_t k = 0; k < a->n; k++) {
            keep[n_alt][k] = 0;
            size_t g = 0;
            while (g < golden.n && strcmp(golden.name[g], a->name[k]) != 0)
                g++;
            if (g == golden.n || golden.numel[g] != a->numel[k])
                continue;
            const double e64 = excess(a->data[k], golden.data[g], a->dc[k], golden.dc[g], a->numel[k], tol64);
            if (first < 0 && e64 > 1)
                first = (int)k;
            if (is_required(&c, a->name[k])) {
                keep[n_alt][k] = 1;
                effect64 = fmax(effect64, e64);
                effect32 = fmax(effect32, excess(a->data[k], golden.data[g], a->dc[k], golden.dc[g],
                                                 a->numel[k], tol32));
            }
        }
        if (!(effect64 >= VARIANT_MIN_EXCESS)) { /* indistinguishable: not stored */
            fprintf(stderr, "refenc-golden: %s: variant %s moves the outputs by only %.3g float64 "
                    "tolerances; not stored\n", name, info->name, effect64);
            output_set_free(a);
            refenc_case_free(w);
            free(vdead[n_alt]);
            vdead[n_alt] = NULL;
            continue;
        }
        if (first >= 0)
            keep[n_alt][first] = 1;
        json_t *stored = json_array();
        for (size_t k = 0; k < a->n; k++)
            if (keep[n_alt][k])
                json_array_append_new(stored, json_string(a->name[k]));
        json_array_append_new(variants_meta,
                              json_pack("{s:s, s:o, s:s?, s:f, s:f}", "name", info->name, "outputs", stored,
                                        "first_divergence", first >= 0 ? a->name[first] : NULL,
                                        "effect_f64", effect64, "effect_f32", effect32));
        add_outputs(&fb, a, info->name, keep[n_alt]);
        n_alt++;
    }

    if (st == REFENC_OK) {
        json_t *config = refenc_config_to_json(&c.cfg);
        char *cfg_s = json_string_of(config), *outs_s = json_string_of(fb.outputs);
        char *bugs_s = json_string_of(classes), *vars_s = json_string_of(variants_meta);
        const json_t *tol = json_object_get(cc.entry, "tolerance");
        char *tol_s = tol ? json_string_of(tol) : strdup("{}");
        /* a NULL from json_dumps (out of memory) must not become a file without metadata */
        const int cfg_ok = cfg_s && outs_s && bugs_s && vars_s && tol_s;
        meta = !cfg_ok ? NULL : json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
                         "format", REFENC_GOLDEN_FORMAT, "format_version", REFENC_GOLDEN_FORMAT_VERSION,
                         "case", name, "component", refenc_component_name(c.component),
                         "description", cc.description, "config", cfg_s, "outputs", outs_s,
                         "bug_classes", bugs_s, "tolerance", tol_s, "variants", vars_s,
                         "input_dtype", cc.input_bits <= 8 ? "F16,BF16" : "F32",
                         "generator", "refenc-golden " REFENC_VERSION, "oracle", engine_desc);
        const char *hazard = json_string_value(json_object_get(cc.entry, "float32_hazard"));
        if (meta != NULL && hazard != NULL)
            json_object_set_new(meta, "float32_hazard", json_string(hazard));
        if (meta != NULL && n_alt > 0)
            json_object_set_new(meta, "variant_oracle", json_string(variant_desc));
        free(cfg_s);
        free(outs_s);
        free(bugs_s);
        free(vars_s);
        free(tol_s);
        json_decref(config);
        if (fb.failed || meta == NULL || !cfg_ok)
            st = refenc_error_set(err, REFENC_ENOMEM, "case %s: too many tensors or out of memory", name);
        else
            st = refenc_st_write(out_path, fb.e, fb.n, meta, err);
    }

    for (size_t i = 0; i < fb.n_owned; i++)
        free(fb.owned[i]);
    for (size_t i = 0; i < n_alt; i++) {
        output_set_free(&alt[i]);
        refenc_case_free(&vc[i]);
        free(vdead[i]);
    }
    output_set_free(&golden);
    json_decref(fb.outputs);
    json_decref(variants_meta);
    json_decref(meta);
    free(dead);
    refenc_case_free(&c);
    json_decref(cat);
    return st;
}

/* ---- manifest ------------------------------------------------------------------ */

static int manifest(const char *catalogue_path, const char *cases_dir, const char *out_path, refenc_error *err)
{
    json_t *cat = catalogue_load(catalogue_path, err);
    if (cat == NULL)
        return REFENC_EINVAL;
    json_t *list = json_array();
    size_t i, total = 0;
    json_t *e;
    int st = REFENC_OK;
    json_array_foreach(json_object_get(cat, "cases"), i, e) {
        const char *name = json_string_value(json_object_get(e, "case"));
        char file[256], path[4096], hex[65];
        size_t bytes;
        snprintf(file, sizeof file, "%s.safetensors", name);
        snprintf(path, sizeof path, "%s/%s", cases_dir, file);
        refenc_st_file f;
        if ((st = refenc_st_read(&f, path, err)))
            break;
        /* the bytes read are the bytes hashed */
        refenc_sha256_hex(hex, f.buf, f.size);
        bytes = f.size;
        total += bytes;
        json_t *outs = json_loads(refenc_st_metadata(&f, "outputs"), 0, NULL);
        json_t *names = json_array();
        size_t k;
        json_t *o;
        json_array_foreach(outs, k, o)
            json_array_append(names, json_object_get(o, "name"));
        json_t *entry = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:O, s:I}",
                                  "case", name, "file", file, "sha256", hex,
                                  "component", json_string_value(json_object_get(e, "component")),
                                  "description", json_string_value(json_object_get(e, "description")),
                                  "outputs", names, "bug_classes", json_object_get(e, "bug_classes"),
                                  "bytes", (json_int_t)bytes);
        const char *hazard = refenc_st_metadata(&f, "float32_hazard");
        if (hazard != NULL)
            json_object_set_new(entry, "float32_hazard", json_string(hazard));
        json_array_append_new(list, entry);
        json_decref(outs);
        refenc_st_free(&f);
    }
    if (st == REFENC_OK) {
        json_t *doc = json_pack("{s:s, s:s, s:I, s:o}", "format", REFENC_GOLDEN_FORMAT,
                                "format_version", REFENC_GOLDEN_FORMAT_VERSION,
                                "total_bytes", (json_int_t)total, "cases", list);
        list = NULL;
        st = refenc_atomic_write_json(out_path, doc, JSON_INDENT(2) | JSON_SORT_KEYS, err);
        json_decref(doc);
    }
    json_decref(list);
    json_decref(cat);
    return st;
}

static const char usage[] =
    "usage: refenc-golden list CATALOGUE\n"
    "       refenc-golden gen CATALOGUE CASE OUT.safetensors\n"
    "       refenc-golden manifest CATALOGUE CASES_DIR OUT.json\n";

int main(int argc, char **argv)
{
    /* a write past a file-size limit fails with EFBIG instead of killing the
     * program mid-write (io/atomic_write.h) */
    signal(SIGXFSZ, SIG_IGN);
    refenc_error err;
    refenc_error_clear(&err);
    int st;
    if (argc == 3 && strcmp(argv[1], "list") == 0) {
        json_t *cat = catalogue_load(argv[2], &err);
        if (cat == NULL) {
            fprintf(stderr, "refenc-golden: %s\n", err.message);
            return 2;
        }
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(cat, "cases"), i, e)
            printf("%s\n", json_string_value(json_object_get(e, "case")));
        json_decref(cat);
        return 0;
    } else if (argc == 5 && strcmp(argv[1], "gen") == 0) {
        st = gen(argv[2], argv[3], argv[4], &err);
    } else if (argc == 5 && strcmp(argv[1], "manifest") == 0) {
        st = manifest(argv[2], argv[3], argv[4], &err);
    } else {
        fputs(usage, stderr);
        return 2;
    }
    if (st != REFENC_OK) {
        fprintf(stderr, "refenc-golden: %s\n", err.message);
        return 2;
    }
    return 0;
}
