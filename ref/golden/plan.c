/* The plan of a case made in parts and its checksums (plan.h). */
#include "plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "../core/version.h"
#include "../io/case_file.h"
#include "../io/config_json.h"
#include "../io/manifest.h"
#include "digest.h"

static char *canonical(const json_t *j)
{
    return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : strdup("null");
}

/* The parameters as used, under the case file's names. */
static void weights_sha256(char hex[65], const refenc_case *c)
{
    struct sha256_ctx h;
    sha256_init(&h);
    for (size_t t = 0; t < c->params.n_tensors; t++) {
        const refenc_tensor *p = &c->params.tensors[t];
        const char *name = refenc_case_param_name(c->component, p->name);
        if (name != NULL)
            golden_digest_tensor(&h, name, p->ndim, p->shape, p->data, p->size * sizeof *p->data);
    }
    golden_digest_hex(hex, &h);
}

/* The inputs as used: the shape, then each input tensor, absent ones as empty. */
static void inputs_sha256(char hex[65], const refenc_case *c)
{
    const size_t B = c->B, L = c->L, bl[2] = {B, L}, ll[2] = {L, L}, l1[1] = {L}, x1[1] = {c->x_numel};
    struct sha256_ctx h;
    sha256_init(&h);
    golden_digest_tensor(&h, "in.x", 1, x1, c->x, c->x ? c->x_numel * sizeof *c->x : 0);
    golden_digest_tensor(&h, "in.tokens", 2, bl, c->tokens, c->tokens ? B * L * sizeof *c->tokens : 0);
    golden_digest_tensor(&h, "in.token_type_ids", 2, bl, c->token_types,
                c->token_types ? B * L * sizeof *c->token_types : 0);
    golden_digest_tensor(&h, "in.key_padding_mask", 2, bl, c->key_padding_mask, c->key_padding_mask ? B * L : 0);
    golden_digest_tensor(&h, "in.positions", 1, l1, c->positions, c->has_positions ? L * sizeof *c->positions : 0);
    golden_digest_tensor(&h, "in.attn_mask", 2, ll, c->attn_mask, c->attn_mask ? L * L * sizeof *c->attn_mask : 0);
    if (c->rows != NULL) { /* only when present: the plans of cases without rows keep their digest */
        const size_t r1[1] = {c->R};
        golden_digest_tensor(&h, "in.rows", 1, r1, c->rows, c->R * sizeof *c->rows);
    }
    golden_digest_hex(hex, &h);
}

/* The case's metadata: description, bug classes, tolerance, hazard. */
static int case_meta_sha256(char hex[65], const golden_file *g)
{
    char *bugs = canonical(g->bug_classes), *tol = canonical(g->tolerance);
    struct sha256_ctx h;
    sha256_init(&h);
    golden_digest_str(&h, g->description);
    golden_digest_str(&h, bugs);
    golden_digest_str(&h, tol);
    golden_digest_str(&h, g->float32_hazard != NULL ? g->float32_hazard : "(none)");
    golden_digest_hex(hex, &h);
    const int ok = bugs != NULL && tol != NULL;
    free(bugs);
    free(tol);
    return ok;
}

/* ---- the plan ----------------------------------------------------------------------- */

/* The fields in the order a difference is named: a version first, then what
 * the case is, then how it is cut. */
static const struct {
    const char *key;
    json_type type;
} fields[] = {
    {"refenc_version", JSON_STRING}, {"case", JSON_STRING},           {"component", JSON_STRING},
    {"config", JSON_OBJECT},         {"weights_sha256", JSON_STRING}, {"inputs_sha256", JSON_STRING},
    {"case_meta_sha256", JSON_STRING}, {"per_layer", JSON_TRUE},      {"outputs", JSON_STRING},
    {"first_prec", JSON_INTEGER},    {"units", JSON_INTEGER},         {"shards", JSON_INTEGER},
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

/* The one optional field, present only when merge makes the bug variants
 * (the double reference's): "all" (a config's: every variant that applies)
 * or "bug_classes" (a catalogue entry's); plans without it keep their text. */
#define VARIANTS_FIELD "variants"

json_t *golden_plan_make(const golden_file *g, int per_layer, int final_only, long first_prec, size_t units,
                         size_t shards, const char *variants)
{
    const refenc_case *c = g->c;
    char w[65], in[65], cm[65];
    weights_sha256(w, c);
    inputs_sha256(in, c);
    if (!case_meta_sha256(cm, g))
        return NULL;
    json_t *config = refenc_config_to_json(&c->cfg);
    if (config == NULL)
        return NULL;
    json_t *plan = json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:s, s:b, s:s, s:I, s:I, s:I}", "refenc_version",
                             REFENC_VERSION, "case", g->name, "component", refenc_component_name(c->component),
                             "config", config, "weights_sha256", w, "inputs_sha256", in, "case_meta_sha256", cm,
                             "per_layer", per_layer, "outputs", final_only ? "final" : "all", "first_prec",
                             (json_int_t)first_prec, "units", (json_int_t)units, "shards", (json_int_t)shards);
    if (plan != NULL && variants != NULL && json_object_set_new(plan, VARIANTS_FIELD, json_string(variants)) != 0) {
        json_decref(plan);
        return NULL;
    }
    return plan;
}

char *golden_plan_text(const json_t *plan)
{
    return plan != NULL ? json_dumps(plan, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

static int is_hex64(const char *s)
{
    if (s == NULL || strlen(s) != 64)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

int golden_plan_check(const json_t *plan, const char *path, refenc_error *err)
{
    if (!json_is_object(plan))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.plan is not a JSON object", path);
    for (size_t i = 0; i < N_FIELDS; i++) {
        const json_t *v = json_object_get(plan, fields[i].key);
        const int ok = fields[i].type == JSON_TRUE ? json_is_boolean(v)
                       : fields[i].type == JSON_INTEGER ? json_is_integer(v) && json_integer_value(v) >= 0
                                                        : v != NULL && json_typeof(v) == fields[i].type;
        if (!ok)
            return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.plan: '%s' is missing or not a%s %s",
                                    path, fields[i].key, fields[i].type == JSON_OBJECT ? "n" : "",
                                    fields[i].type == JSON_TRUE      ? "boolean"
                                    : fields[i].type == JSON_INTEGER ? "non-negative integer"
                                    : fields[i].type == JSON_OBJECT  ? "object"
                                                                     : "string");
    }
    const json_t *vars = json_object_get(plan, VARIANTS_FIELD);
    const char *vs = json_string_value(vars);
    if (vars != NULL && (vs == NULL || (strcmp(vs, "all") != 0 && strcmp(vs, "bug_classes") != 0)))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.plan: '" VARIANTS_FIELD "' is neither "
                                "'all' nor 'bug_classes'", path);
    if (json_object_size(plan) != N_FIELDS + (vars != NULL))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.plan has %zu fields, not the %zu of "
                                "part format version " GOLDEN_PART_FORMAT_VERSION, path, json_object_size(plan),
                                N_FIELDS);
    const char *name = json_string_value(json_object_get(plan, "case"));
    if (!refenc_manifest_name_ok(name))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.plan: case '%s' is not a case name "
                                "certify accepts (A-Z a-z 0-9 . _ -, not starting with '.', without '..')",
                                path, name);
    static const char *const sums[] = {"weights_sha256", "inputs_sha256", "case_meta_sha256"};
    for (size_t i = 0; i < 3; i++)
        if (!is_hex64(json_string_value(json_object_get(plan, sums[i]))))
            return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.plan: '%s' is not 64 lower-case hex "
                                    "digits", path, sums[i]);
    const char *outs = json_string_value(json_object_get(plan, "outputs"));
    if (strcmp(outs, "all") != 0 && strcmp(outs, "final") != 0)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.plan: outputs '%s' is neither 'all' nor "
                                "'final'", path, outs);
    return REFENC_OK;
}

const char *golden_plan_differs(const json_t *a, const json_t *b)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!json_equal(json_object_get(a, fields[i].key), json_object_get(b, fields[i].key)))
            return fields[i].key;
    const json_t *va = json_object_get(a, VARIANTS_FIELD), *vb = json_object_get(b, VARIANTS_FIELD);
    if ((va == NULL) != (vb == NULL) || (va != NULL && !json_equal(va, vb)))
        return VARIANTS_FIELD;
    return NULL;
}

/* Names the first field of the plan that the case read back does not have. */
int golden_plan_verify_case(const json_t *plan, const golden_file *g, const char *path, refenc_error *err)
{
    json_t *have = golden_plan_make(g, json_is_true(json_object_get(plan, "per_layer")),
                                    strcmp(json_string_value(json_object_get(plan, "outputs")), "final") == 0,
                                    (long)json_integer_value(json_object_get(plan, "first_prec")),
                                    (size_t)json_integer_value(json_object_get(plan, "units")),
                                    (size_t)json_integer_value(json_object_get(plan, "shards")),
                                    json_string_value(json_object_get(plan, VARIANTS_FIELD)));
    if (have == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    const char *field = golden_plan_differs(plan, have);
    int st = REFENC_OK;
    if (field != NULL) {
        char *want = canonical(json_object_get(plan, field)), *got = canonical(json_object_get(have, field));
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: the case it holds does not match the plan's '%s' "
                              "(the plan: %.80s; the case: %.80s): its inputs, parameters or metadata were "
                              "changed, or the plan was", path, field, want ? want : "?", got ? got : "?");
        free(want);
        free(got);
    }
    json_decref(have);
    return st;
}
