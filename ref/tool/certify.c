/* Certification of results against a golden case (certify.h). */
#include "certify.h"

#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/text.h"
#include "../io/golden_names.h"
#include "budget.h"
#include "verdict.h"
#include "variants.h"

_Static_assert(REFENC_VAR_COUNT <= REFENC_CASE_MAX_VARIANTS, "a case report holds every variant's effect");
_Static_assert(REFENC_CASE_MAX_VARIANTS <= sizeof(refenc_variant_set) * CHAR_BIT,
               "a case report's candidates and not_ruled_out hold one bit per variant");

/* ---- the policy ----------------------------------------------------------------------
 * F64 (docs/verdict.md, "Why F64 is 1e-10 / 1e-11"): a correct float64
 * implementation's forward error on the golden cases is at most about 1e-12
 * on outputs of order 1 (dot products of n <= 96 terms, gamma_96 ~ 1.1e-14;
 * LayerNorm dividing by sigma >= 0.01; two layers), and a single float32 step
 * moves the outputs by 1e-8 to 1e-7: atol 1e-11 and rtol 1e-10 are a factor
 * 10 above the first and 1000 below the second. */
static const refenc_tolerance POLICY_F64 = {1e-10, 1e-11};
/* F32: torch.testing.assert_close's float32 defaults, the floor of the F32
 * bound: they cover what one op of a correct float32 implementation may do
 * that the baseline does not (PyTorch's GELU through 1 + erf cancels on the
 * tail: 2.4e-7 at |x| = 3.6, 250 times the baseline's error there).  Every
 * element's bound adds refenc_budget_f32, twice the emulated float32
 * baseline's largest error on the output, which grows with the depth of the
 * model where a fixed tolerance does not (docs/verdict.md, "Float32"), and
 * the angle allowance (budget.h) where float32 angles cost more. */
static const refenc_tolerance POLICY_F32 = {1.3e-6, 1e-5};

int refenc_certify_policy(refenc_tolerance *tol, refenc_st_dtype dtype)
{
    switch (dtype) {
    case REFENC_ST_F64: *tol = POLICY_F64; return 1;
    case REFENC_ST_F32: *tol = POLICY_F32; return 1;
    default: return 0;
    }
}

/* The emulation format of a floating result dtype; 0 for any other dtype. */
static int format_of(refenc_format *f, refenc_st_dtype dtype)
{
    switch (dtype) {
    case REFENC_ST_F64: *f = REFENC_FMT_F64; return 1;
    case REFENC_ST_F32: *f = REFENC_FMT_F32; return 1;
    case REFENC_ST_F16: *f = REFENC_FMT_F16; return 1;
    case REFENC_ST_BF16: *f = REFENC_FMT_BF16; return 1;
    default: return 0;
    }
}

double refenc_ulp_error(double got, double want, refenc_st_dtype dtype)
{
    refenc_format f = REFENC_FMT_F64;
    format_of(&f, dtype);
    return fabs(got - want) / refenc_format_ulp(f, want);
}

void refenc_case_report_free(refenc_case_report *rep)
{
    if (rep == NULL)
        return;
    free(rep->outputs);
    rep->outputs = NULL;
    rep->n_outputs = 0;
}

/* ---- the golden's metadata ------------------------------------------------------------ */

/* What the certifier reads from a golden case's metadata besides its outputs. */
typedef struct {
    double scale[REFENC_FMT_COUNT]; /* the case's scale of the policy, per dtype (1: none) */
    int holds_inputs[REFENC_FMT_COUNT]; /* input_dtype: the formats that hold every input  */
    json_t *variants;               /* the checked "variants" array, or NULL              */
    int by_reference;               /* variant_engine "reference": the double reference's */
} case_meta;

static int meta_error(refenc_error *err, const refenc_st_file *golden, const char *name, const char *key,
                      const char *what)
{
    return refenc_error_set(err, REFENC_EFORMAT, "%s: case '%s': __metadata__.%s %s", golden->path, name, key,
                            what);
}

/* "tolerance": {} or {"scale": {"F64": s, ...}, "reason": "..."}, s > 0. */
static int parse_tolerance(case_meta *m, const refenc_st_file *golden, const char *name, refenc_error *err)
{
    for (int f = 0; f < REFENC_FMT_COUNT; f++)
        m->scale[f] = 1.0;
    const char *s = refenc_st_metadata(golden, "tolerance");
    if (s == NULL)
        return REFENC_OK;
    json_error_t jerr;
    json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, &jerr), *v;
    const json_t *scale = json_object_get(j, "scale");
    const char *key;
    int st = REFENC_OK;
    if (j == NULL && json_error_code(&jerr) == json_error_out_of_memory)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", golden->path);
    else if (!json_is_object(j) || (scale != NULL && !json_is_object(scale)) ||
        json_object_size(j) != (size_t)(scale != NULL) + (json_object_get(j, "reason") != NULL))
        st = meta_error(err, golden, name, "tolerance",
                        "is not a JSON object {\"scale\": {DTYPE: factor}, \"reason\": \"...\"}");
    json_object_foreach((json_t *)scale, key, v) {
        refenc_format f;
        refenc_st_dtype dt;
        if (st != REFENC_OK)
            break;
        if (!refenc_st_dtype_parse(&dt, key) || !format_of(&f, dt))
            st = meta_error(err, golden, name, "tolerance", "scales a dtype that is not F64, F32, F16 or BF16");
        else if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v)))
            st = meta_error(err, golden, name, "tolerance", "has a scale that is not a finite number > 0");
        else
            m->scale[f] = json_number_value(v);
    }
    json_decref(j);
    return st;
}

/* "variants": [{"name": <known variant>, "outputs": [<outputs of the case>], ...}]. */
static int parse_variants(case_meta *m, const refenc_case_report *rep, const refenc_st_file *golden,
                          refenc_error *err)
{
    const char *s = refenc_st_metadata(golden, "variants");
    if (s == NULL)
        return REFENC_OK;
    json_error_t jerr;
    m->variants = json_loads(s, JSON_REJECT_DUPLICATES, &jerr);
    if (m->variants == NULL && json_error_code(&jerr) == json_error_out_of_memory)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", golden->path);
    if (!json_is_array(m->variants))
        return meta_error(err, golden, rep->name, "variants", "is not a JSON array");
    size_t i, k;
    json_t *v, *o;
    json_array_foreach(m->variants, i, v) {
        refenc_variant known;
        const char *vname = json_string_value(json_object_get(v, "name"));
        const json_t *outs = json_object_get(v, "outputs");
        int ok = vname != NULL && refenc_variant_parse(&known, vname) && json_is_array(outs);
        json_array_foreach(outs, k, o) {
            size_t j = 0;
            while (ok && j < rep->n_outputs && (!json_is_string(o) ||
                                                strcmp(rep->outputs[j].name, json_string_value(o)) != 0))
                j++;
            ok &= j < rep->n_outputs;
        }
        if (!ok) {
            char key[48];
            snprintf(key, sizeof key, "variants[%zu]", i);
            return meta_error(err, golden, rep->name, key, "is malformed: expected {\"name\": <a known variant>, "
                              "\"outputs\": [<outputs of the case>]}");
        }
    }
    return REFENC_OK;
}

static int read_meta(case_meta *m, const refenc_case_report *rep, const refenc_st_file *golden, refenc_error *err)
{
    memset(m, 0, sizeof *m);
    const char *in_dtype = refenc_st_metadata(golden, "input_dtype");
    /* "F16,BF16" (the default), "F16", "BF16", "F32" or "F64": F32 holds what
     * either 16-bit format holds, F64 everything */
    const char *held = in_dtype != NULL ? in_dtype : "F16,BF16";
    m->holds_inputs[REFENC_FMT_F64] = 1;
    m->holds_inputs[REFENC_FMT_F32] = strcmp(held, "F64") != 0;
    m->holds_inputs[REFENC_FMT_F16] = strcmp(held, "F16") == 0 || strcmp(held, "F16,BF16") == 0;
    m->holds_inputs[REFENC_FMT_BF16] = strcmp(held, "BF16") == 0 || strcmp(held, "F16,BF16") == 0;
    const char *engine = refenc_st_metadata(golden, "variant_engine"); /* absent: the oracle's */
    if (engine != NULL && strcmp(engine, "reference") != 0 && strcmp(engine, "oracle") != 0)
        return meta_error(err, golden, rep->name, "variant_engine", "is neither \"oracle\" nor \"reference\"");
    m->by_reference = engine != NULL && strcmp(engine, "reference") == 0;
    int st = parse_tolerance(m, golden, rep->name, err);
    if (st == REFENC_OK)
        st = parse_variants(m, rep, golden, err);
    /* a gradient case whose variants are all backward bugs: those are the
     * double reference's (grad_variant_engine, docs/golden-format.md) */
    const char *grad_engine = refenc_st_metadata(golden, "grad_variant_engine");
    int all_backward = st == REFENC_OK && json_array_size(m->variants) > 0; /* names checked by parse_variants */
    size_t i;
    json_t *v;
    json_array_foreach(all_backward ? m->variants : NULL, i, v) {
        refenc_variant known;
        const char *vname = json_string_value(json_object_get(v, "name"));
        all_backward &= vname != NULL && refenc_variant_parse(&known, vname) && refenc_variant_is_backward(known);
    }
    if (all_backward && engine == NULL && grad_engine != NULL && strcmp(grad_engine, "reference") == 0)
        m->by_reference = 1;
    return st;
}

/* Reads the golden's metadata "outputs" list into rep->outputs (names,
 * required flags) and checks each is an F64 tensor of the golden. */
static int load_outputs(refenc_case_report *rep, const refenc_st_file *golden, refenc_error *err)
{
    memset(rep, 0, sizeof *rep);
    rep->first_divergence = -1;
    rep->first_grad_divergence = -1;
    for (int k = 0; k < REFENC_CASE_MAX_VARIANTS; k++)
        rep->effect[k] = -1; /* not stored */
    const char *name = refenc_st_metadata(golden, "case");
    const char *outs = refenc_st_metadata(golden, "outputs");
    const char *fmt = refenc_st_metadata(golden, "format");
    if (fmt == NULL || strcmp(fmt, REFENC_GOLDEN_FORMAT) != 0 || name == NULL || outs == NULL)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: not a refenc golden case (its __metadata__ needs format = \"%s\", "
                                "case and outputs)", golden->path, REFENC_GOLDEN_FORMAT);
    snprintf(rep->name, sizeof rep->name, "%s", name);
    /* duplicate keys refused, as everywhere else in a golden file */
    json_t *list = json_loads(outs, JSON_REJECT_DUPLICATES, NULL);
    int st = REFENC_OK;
    if (list == NULL || !json_is_array(list) || json_array_size(list) == 0)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.outputs is not a non-empty JSON array",
                              golden->path);
    else if ((rep->outputs = calloc(json_array_size(list), sizeof *rep->outputs)) == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", golden->path);
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o) {
        const char *oname = json_string_value(json_object_get(o, "name"));
        const json_t *req = json_object_get(o, "required");
        const refenc_st_tensor *t = oname ? refenc_st_find(golden, oname) : NULL;
        if (st != REFENC_OK)
            break;
        if (oname == NULL || !json_is_boolean(req) || t == NULL || t->dtype != REFENC_ST_F64 ||
            strlen(oname) >= sizeof rep->outputs[i].name) {
            st = refenc_error_set(err, REFENC_EFORMAT,
                                  "%s: __metadata__.outputs[%zu] does not name an F64 tensor of the case",
                                  golden->path, i);
            break;
        }
        refenc_output_report *r = &rep->outputs[rep->n_outputs++];
        snprintf(r->name, sizeof r->name, "%s", oname);
        r->required = json_is_true(req);
        r->ndim = t->ndim;
        memcpy(r->shape, t->shape, sizeof r->shape);
        r->numel = t->numel;
    }
    json_decref(list);
    return st;
}

/* Appends the golden's gradients (metadata "grad_outputs", in backward
 * order, format version 2) to rep->outputs, optional, marked grad. */
static int load_grads(refenc_case_report *rep, const refenc_st_file *golden, refenc_error *err)
{
    const char *gs = refenc_st_metadata(golden, "grad_outputs");
    if (gs == NULL)
        return REFENC_OK;
    json_t *list = json_loads(gs, JSON_REJECT_DUPLICATES, NULL);
    const size_t k = json_array_size(list);
    int st = REFENC_OK;
    refenc_output_report *grown = NULL;
    if (!json_is_array(list) || k == 0)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.grad_outputs is not a non-empty JSON "
                              "array of tensor names", golden->path);
    else if ((grown = realloc(rep->outputs, (rep->n_outputs + k) * sizeof *grown)) == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", golden->path);
    else
        rep->outputs = grown;
    for (size_t i = 0; st == REFENC_OK && i < k; i++) {
        const char *g = json_string_value(json_array_get(list, i));
        const refenc_st_tensor *t = g != NULL ? refenc_st_find(golden, g) : NULL;
        if (t == NULL || t->dtype != REFENC_ST_F64 || strncmp(g, REFENC_NAME_GRAD, strlen(REFENC_NAME_GRAD)) != 0 ||
            strlen(g) >= sizeof rep->outputs[0].name) {
            st = refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.grad_outputs[%zu] does not name an "
                                  "F64 grad.* tensor of the case", golden->path, i);
            break;
        }
        refenc_output_report *r = &rep->outputs[rep->n_outputs++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", g);
        r->grad = 1;
        r->ndim = t->ndim;
        memcpy(r->shape, t->shape, sizeof r->shape);
        r->numel = t->numel;
        rep->grads++;
    }
    json_decref(list);
    return st;
}

/* ---- one output ----------------------------------------------------------------------- */

/* Everything certifying one case needs besides the report. */
typedef struct {
    const refenc_st_file *golden, *results;
    const refenc_certify_options *opt;
    const char *outputs_glob;
    case_meta meta;
    refenc_baseline base[REFENC_FMT_COUNT]; /* measured when first needed */
    int have_base[REFENC_FMT_COUNT];
    refenc_baseline gbase[REFENC_FMT_COUNT]; /* the emulated backward's, measured when first needed */
    int have_gbase[REFENC_FMT_COUNT];
    char hint[256];                         /* a recognisable mistake (dtype_hint) */
    refenc_error *err;
} certify_ctx;

/* An output's values, as doubles. */
typedef struct {
    size_t n;
    double *got, *want, *allow; /* allow: the F32 angle allowance, or NULL */
    int64_t *dc;                /* don't-care mask, or NULL                 */
} out_data;

static void out_data_free(out_data *d)
{
    free(d->got);
    free(d->want);
    free(d->allow);
    free(d->dc);
    memset(d, 0, sizeof *d);
}

/* Reads got (from the results, or the variant's alt.* copy when `from` is
 * the golden), want and the don't-care masks of the golden and, with a
 * variant, the variant's (an element is skipped when either says so). */
static int out_data_load(out_data *d, const certify_ctx *x, const refenc_st_tensor *got_t,
                         const refenc_st_tensor *want_t, const char *output, const char *variant)
{
    char name[REFENC_NAME_MAX];
    refenc_name_dontcare(name, sizeof name, NULL, output);
    const refenc_st_tensor *dc_t = refenc_st_find(x->golden, name);
    refenc_name_dontcare(name, sizeof name, variant, output);
    const refenc_st_tensor *vdc_t = variant ? refenc_st_find(x->golden, name) : NULL;
    const size_t n = want_t->numel;
    memset(d, 0, sizeof *d);
    d->n = n;
    if ((dc_t && dc_t->numel != n) || (vdc_t && vdc_t->numel != n)) {
        refenc_name_dontcare(name, sizeof name, dc_t && dc_t->numel != n ? NULL : variant, output);
        return refenc_error_set(x->err, REFENC_EFORMAT, "%s: '%s' does not have the shape of '%s'",
                                x->golden->path, name, output);
    }
    d->got = refenc_alloc_array(n, sizeof *d->got);
    d->want = refenc_alloc_array(n, sizeof *d->want);
    d->dc = refenc_alloc_array(n, sizeof *d->dc);
    int64_t *vdc = vdc_t ? refenc_alloc_array(n, sizeof *vdc) : NULL;
    int st = REFENC_OK;
    if (!d->got || !d->want || !d->dc || (vdc_t && !vdc))
        st = refenc_error_set(x->err, REFENC_ENOMEM, "%s: out of memory for '%s'", x->results->path, output);
    if (st == REFENC_OK)
        st = refenc_st_to_f64(d->got, x->results, got_t, x->err);
    if (st == REFENC_OK)
        st = refenc_st_to_f64(d->want, x->golden, want_t, x->err);
    for (size_t i = 0; i < n && d->dc; i++)
        d->dc[i] = 0;
    if (st == REFENC_OK && dc_t)
        st = refenc_st_to_i64(d->dc, x->golden, dc_t, x->err);
    if (st == REFENC_OK && vdc_t && (st = refenc_st_to_i64(vdc, x->golden, vdc_t, x->err)) == REFENC_OK)
        for (size_t i = 0; i < n; i++)
            d->dc[i] |= vdc[i];
    free(vdc);
    return st;
}

/* What bounds an element's error. */
typedef struct {
    refenc_rule rule;
    refenc_tolerance tol;  /* policy */
    const double *allow;   /* policy: the angle allowance per element, or NULL */
    double budget;         /* budget: the bound on every element; policy: the */
                           /* F32 baseline's allowance added to every bound   */
} elem_bound;

static double bound_at(const elem_bound *b, size_t i, double want)
{
    if (b->rule == REFENC_RULE_BUDGET)
        return b->budget;
    return b->tol.atol + b->tol.rtol * fabs(want) + (b->allow != NULL ? b->allow[i] : 0.0) + b->budget;
}

static double max_abs_want(const out_data *d)
{
    double m = 0;
    for (size_t i = 0; i < d->n; i++)
        if (!d->dc[i])
            m = fmax(m, fabs(d->want[i]));
    return m;
}

/* The emulated baseline of format f, measured once per case. */
static int baseline(const refenc_baseline **b, certify_ctx *x, refenc_format f)
{
    if (!x->have_base[f]) {
        const int st = refenc_baseline_measure(&x->base[f], x->golden, f, x->err);
        if (st)
            return st;
        x->have_base[f] = 1;
    }
    *b = &x->base[f];
    return REFENC_OK;
}

/* The angle allowance of an output (budget.h), or NULL where none applies. */
static int allowance(double **allow, certify_ctx *x, const char *output, const double *want, size_t n)
{
    int applies;
    *allow = refenc_alloc_array(n, sizeof **allow);
    if (*allow == NULL)
        return refenc_error_set(x->err, REFENC_ENOMEM, "%s: out of memory for '%s'", x->golden->path, output);
    const int st = refenc_angle_allowance(&applies, *allow, x->golden, output, want, n, x->err);
    if (st || !applies) {
        free(*allow);
        *allow = NULL;
    }
    return st;
}

/* An F32 output's allowances on top of the policy: the float32 baseline's
 * (refenc_budget_f32) and the angle allowance (budget.h). */
static int f32_allowances(refenc_output_report *r, certify_ctx *x, out_data *d)
{
    const refenc_baseline *base;
    int st = baseline(&base, x, REFENC_FMT_F32);
    if (st)
        return st;
    const refenc_baseline_error *e = refenc_baseline_find(base, r->name);
    r->base_max_abs = e ? e->max_abs : 0;
    r->base_nmse = e ? e->nmse : 0;
    r->base_allowance = refenc_budget_f32(e);
    st = allowance(&d->allow, x, r->name, d->want, d->n);
    r->angle_allowance = d->allow != NULL;
    return st;
}

/* The emulated backward's baseline of format f, measured once per case. */
static int grad_baseline(const refenc_baseline **b, certify_ctx *x, refenc_format f)
{
    if (!x->have_gbase[f]) {
        const int st = refenc_grad_baseline_measure(&x->gbase[f], x->golden, f, x->err);
        if (st)
            return st;
        x->have_gbase[f] = 1;
    }
    *b = &x->gbase[f];
    return REFENC_OK;
}

/* A gradient in F32, F16 or BF16 (certify.h, docs/gradients.md): the
 * forward's rules with the emulated backward's baseline and the growth term
 * of a parameter gradient (budget.h); F32's policy with its absolute term at
 * the tensor's scale, as the F64 gradient rule. */
static int set_grad_rule(elem_bound *b, refenc_output_report *r, certify_ctx *x, const out_data *d,
                         refenc_format f)
{
    const refenc_baseline *base;
    const int st = grad_baseline(&base, x, f);
    if (st)
        return st;
    if (base->unsupported != NULL) {
        r->status = REFENC_OUT_NOT_CHECKED;
        snprintf(r->note, sizeof r->note, "not certified: the emulated %s backward, its budget's baseline, "
                 "does not model %s yet (docs/gradients.md)", refenc_format_name(f), base->unsupported);
        return REFENC_OK;
    }
    const refenc_baseline_error *e = refenc_baseline_find(base, r->name);
    r->base_max_abs = e ? e->max_abs : 0;
    r->base_nmse = e ? e->nmse : 0;
    if (e != NULL && !e->finite)
        snprintf(r->note, sizeof r->note, "the emulated %s backward overflows: the budget is its floor",
                 refenc_format_name(f));
    if (f == REFENC_FMT_F32) {
        refenc_certify_policy(&r->tol, r->dtype);
        r->tol.atol *= r->max_want;
        r->rule = b->rule = REFENC_RULE_POLICY;
        r->base_allowance = refenc_budget_f32(e) + refenc_grad_growth(e, f);
        b->tol = r->tol;
        b->budget = r->base_allowance;
        r->scale = r->max_want;
        return REFENC_OK;
    }
    double sum_w2 = 0;
    size_t n = 0;
    for (size_t i = 0; i < d->n; i++)
        if (!d->dc[i]) {
            sum_w2 += d->want[i] * d->want[i];
            n++;
        }
    r->rule = b->rule = REFENC_RULE_BUDGET;
    refenc_grad_budget(&r->budget_max_abs, &r->budget_nmse, e, f, r->max_want, n > 0 ? sum_w2 / (double)n : 0);
    b->budget = r->budget_max_abs;
    r->tol = (refenc_tolerance){0.0, r->budget_max_abs};
    r->scale = r->max_want;
    return REFENC_OK;
}

/* Chooses the output's rule and fills its tolerance or budget (certify.h). */
static int set_rule(elem_bound *b, refenc_output_report *r, certify_ctx *x, out_data *d, refenc_format f)
{
    memset(b, 0, sizeof *b);
    const double max_want = max_abs_want(d);
    r->max_want = max_want;
    if (r->grad && f != REFENC_FMT_F64 && !(x->opt && x->opt->override_tolerance))
        return set_grad_rule(b, r, x, d, f);
    if ((x->opt && x->opt->override_tolerance) || refenc_certify_policy(&r->tol, r->dtype)) {
        r->rule = REFENC_RULE_POLICY;
        if (x->opt && x->opt->override_tolerance) {
            r->tol = x->opt->tol;
        } else if (r->grad) { /* F64 (F32, F16, BF16: set_grad_rule): certify.h, docs/gradients.md */
            r->tol = (refenc_tolerance){REFENC_GRAD_RTOL * x->meta.scale[f],
                                        REFENC_GRAD_ATOL * max_want * x->meta.scale[f]};
        } else {
            r->tol.rtol *= x->meta.scale[f];
            r->tol.atol *= x->meta.scale[f];
            const int st = f == REFENC_FMT_F32 ? f32_allowances(r, x, d) : REFENC_OK;
            if (st)
                return st;
        }
        b->tol = r->tol;
        b->budget = r->base_allowance;
        b->allow = d->allow;
        r->scale = r->tol.rtol > 0 ? r->tol.atol / r->tol.rtol : max_want;
        return REFENC_OK;
    }
    const refenc_baseline *base;
    const int st = baseline(&base, x, f);
    if (st)
        return st;
    const refenc_baseline_error *e = refenc_baseline_find(base, r->name);
    r->rule = b->rule = REFENC_RULE_BUDGET;
    r->base_max_abs = e ? e->max_abs : 0;
    r->base_nmse = e ? e->nmse : 0;
    refenc_budget(&r->budget_max_abs, &r->budget_nmse, e, f, max_want);
    b->budget = r->budget_max_abs;
    r->tol = (refenc_tolerance){0.0, r->budget_max_abs}; /* the element bound, as a tolerance */
    r->scale = max_want;
    if (e != NULL && !e->finite)
        snprintf(r->note, sizeof r->note, "the emulated %s baseline overflows: the budget is its floor",
                 refenc_format_name(f));
    return REFENC_OK;
}

/* The larger of two figures, NaN if either is. */
static double worse(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : fmax(a, b);
}

/* One element into the output's figures. */
static void measure_element(refenc_output_report *r, const out_data *d, const elem_bound *b, size_t i,
                            refenc_format f, double *sum_d2)
{
    const double g = d->got[i], w = d->want[i];
    double diff, ratio;
    r->compared++;
    if (!isfinite(g)) { /* NaN or infinity where the golden is finite: always a failure */
        r->nonfinite++;
        r->out_of_tol++;
        diff = isnan(g) ? NAN : INFINITY;
        ratio = INFINITY;
        r->max_rel = worse(r->max_rel, diff);
        r->max_ulp = worse(r->max_ulp, diff);
    } else {
        const double bound = bound_at(b, i, w), at = fmax(fabs(w), r->scale);
        diff = fabs(g - w);
        ratio = diff / bound;
        r->out_of_tol += !(diff <= bound);
        *sum_d2 += diff * diff;
        r->max_rel = worse(r->max_rel, at > 0 ? diff / at : diff);
        r->max_ulp = worse(r->max_ulp, diff / refenc_format_ulp(f, at));
    }
    r->max_abs = worse(r->max_abs, diff);
    if (ratio > r->worst_ratio || r->compared == 1) {
        r->worst_ratio = ratio;
        r->worst_flat = i;
        r->worst_got = g;
        r->worst_want = w;
    }
}

static void measure(refenc_output_report *r, const out_data *d, const elem_bound *b, refenc_format f)
{
    double sum_d2 = 0, sum_w2 = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (d->dc[i]) {
            r->dont_care++;
            continue;
        }
        measure_element(r, d, b, i, f, &sum_d2);
        sum_w2 += d->want[i] * d->want[i];
    }
    r->nmse = r->nonfinite ? r->max_abs : sum_w2 > 0 ? sum_d2 / sum_w2 : sum_d2; /* NaN or inf */
    const int nmse_over = r->rule == REFENC_RULE_BUDGET && !(r->nmse <= r->budget_nmse);
    /* the NMSE's ratio in amplitude, like the errors' */
    r->excess = r->rule == REFENC_RULE_BUDGET ? worse(r->worst_ratio, sqrt(r->nmse / r->budget_nmse)) : r->worst_ratio;
    refenc_verdict_output(r, nmse_over);
}

/* Fewer values than this say nothing about the dtype they were made in:
 * a float32 value is a bfloat16 by chance with probability 2^-16, so 16
 * nonzero values all bfloat16 happen by chance with probability 2^-256. */
#define HINT_MIN_VALUES 16

/* Whether every compared value of got is one of format f (and enough of them are nonzero). */
static int all_in_format(const out_data *d, refenc_format f)
{
    size_t nonzero = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (d->dc[i] || !isfinite(d->got[i]))
            continue;
        if (refenc_round(f, d->got[i]) != d->got[i])
            return 0;
        nonzero += d->got[i] != 0;
    }
    return nonzero >= HINT_MIN_VALUES;
}

/* A failing F32 output whose every value is exactly a bfloat16 (or a
 * float16) is most likely 16-bit data declared F32: certified as F32, it is
 * held to float32's tolerance.  The hint says so, once per case. */
static void dtype_hint(certify_ctx *x, const refenc_output_report *r, const out_data *d)
{
    if (x->hint[0] || r->dtype != REFENC_ST_F32 || r->status != REFENC_OUT_FAIL)
        return;
    const int bf16 = all_in_format(d, REFENC_FMT_BF16), f16 = !bf16 && all_in_format(d, REFENC_FMT_F16);
    if (bf16 || f16)
        snprintf(x->hint, sizeof x->hint, "every value of %.96s is exactly a %s: it looks like %s data declared "
                 "as F32; write it as %s to be held to %s's budget", r->name, bf16 ? "bfloat16" : "float16",
                 bf16 ? "BF16" : "F16", bf16 ? "BF16" : "F16", bf16 ? "bfloat16" : "float16");
}

static int compare_output(refenc_output_report *r, certify_ctx *x, const refenc_st_tensor *got_t)
{
    const refenc_st_tensor *want_t = refenc_st_find(x->golden, r->name);
    refenc_format f;
    r->dtype = got_t->dtype;
    if (!format_of(&f, got_t->dtype))
        return refenc_error_set(x->err, REFENC_EFORMAT,
                                "%s: tensor '%s' has dtype %s; outputs must be F64, F32, F16 or BF16 "
                                "(data at byte %zu)", x->results->path, r->name,
                                refenc_st_dtype_name(got_t->dtype), got_t->file_offset);
    if (got_t->ndim != want_t->ndim ||
        memcmp(got_t->shape, want_t->shape, want_t->ndim * sizeof(size_t)) != 0) {
        char gs[96], ws[96];
        refenc_shape_format(gs, sizeof gs, got_t->shape, got_t->ndim, "()");
        refenc_shape_format(ws, sizeof ws, want_t->shape, want_t->ndim, "()");
        r->status = REFENC_OUT_BAD_SHAPE;
        snprintf(r->note, sizeof r->note, "shape %s but the golden is %s", gs, ws);
        return REFENC_OK;
    }
    out_data d;
    elem_bound b;
    int st = out_data_load(&d, x, got_t, want_t, r->name, NULL);
    if (st == REFENC_OK)
        st = set_rule(&b, r, x, &d, f);
    if (st == REFENC_OK && r->status != REFENC_OUT_NOT_CHECKED) { /* set_rule: no budget for it */
        measure(r, &d, &b, f);
        dtype_hint(x, r, &d);
    }
    out_data_free(&d);
    return st;
}

/* ---- the case ------------------------------------------------------------------------- */

/* The input hazard (verdict.h): the results' lowest dtype cannot hold the
 * case's inputs (input_dtype).  Each compared output of that dtype gets the
 * budget of the hazard's own baseline, the emulation with the inputs rounded
 * to the dtype, as a correct implementation in it must round them (budget.h;
 * for F32, the F32 bound with that baseline's allowance in place); then
 * refenc_verdict_hazard decides.  The golden's float32_hazard is a hazard of
 * no dtype (certify.h). */
static int expect_hazard(refenc_case_report *rep, certify_ctx *x)
{
    int low = REFENC_FMT_F64;
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const refenc_output_report *r = &rep->outputs[i];
        refenc_format f;
        if ((r->status == REFENC_OUT_PASS || r->status == REFENC_OUT_FAIL) && format_of(&f, r->dtype))
            low = (int)f > low ? (int)f : low; /* F64 < F32 < F16 < BF16 in refenc_format */
    }
    if (x->meta.holds_inputs[low])
        return REFENC_OK;
    char reason[256];
    snprintf(reason, sizeof reason, "inputs need %s: %s cannot hold them",
             x->meta.holds_inputs[REFENC_FMT_F32] ? "float32" : "float64", refenc_format_name((refenc_format)low));
    refenc_baseline hb;
    int st = rep->pass ? REFENC_OK : refenc_baseline_measure_inputs(&hb, x->golden, (refenc_format)low,
                                                                    (refenc_format)low, x->err);
    for (size_t i = 0; !rep->pass && st == REFENC_OK && i < rep->n_outputs; i++) {
        refenc_output_report *r = &rep->outputs[i];
        refenc_format f;
        if (r->status != REFENC_OUT_FAIL || !format_of(&f, r->dtype) || (int)f != low || r->grad ||
            (x->opt && x->opt->override_tolerance))
            continue;
        const refenc_baseline_error *e = refenc_baseline_find(&hb, r->name);
        if (r->rule == REFENC_RULE_BUDGET) {
            refenc_budget(&r->hazard_max_abs, &r->hazard_nmse, e, f, r->scale);
        } else {
            r->hazard_max_abs = r->tol.atol + r->tol.rtol * r->max_want + refenc_budget_f32(e);
            r->hazard_nmse = INFINITY;
        }
        r->hazard_checked = 1;
    }
    if (!rep->pass)
        refenc_baseline_free(&hb);
    if (st == REFENC_OK)
        refenc_verdict_hazard(rep, reason);
    return st;
}

/* How far a is from ref in units of the rule b: the largest |a - ref| /
 * bound, and for the budget also sqrt(nmse / its budget); +inf when a is not
 * finite, -1 when every element is don't-care. */
static double distance(const elem_bound *b, double budget_nmse, const double *a, const double *ref,
                       const int64_t *dc, size_t n)
{
    double worst = -1, sum_d2 = 0, sum_w2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (dc[i])
            continue;
        const double diff = fabs(a[i] - ref[i]);
        const double q = isfinite(a[i]) ? diff / bound_at(b, i, ref[i]) : INFINITY;
        worst = isnan(q) ? INFINITY : fmax(q, worst);
        sum_d2 += diff * diff;
        sum_w2 += ref[i] * ref[i];
    }
    if (b->rule == REFENC_RULE_BUDGET && worst >= 0)
        worst = fmax(worst, sqrt((sum_w2 > 0 ? sum_d2 / sum_w2 : sum_d2) / budget_nmse));
    return worst;
}

/* How far the results are from a variant's copy of output r (*ratio), and
 * the variant from the golden (*separation), in units of r's rule. */
static int variant_output_ratio(double *ratio, double *separation, certify_ctx *x, const char *variant,
                                const refenc_output_report *r)
{
    char name[REFENC_NAME_MAX];
    refenc_name_alt(name, sizeof name, variant, r->name);
    const refenc_st_tensor *alt_t = refenc_st_find(x->golden, name), *got_t = refenc_st_find(x->results, r->name);
    if (alt_t == NULL || alt_t->numel != r->numel)
        return refenc_error_set(x->err, REFENC_EFORMAT, "%s: variant '%s' of output '%s' is malformed",
                                x->golden->path, variant, r->name);
    out_data d;
    int st = out_data_load(&d, x, got_t, alt_t, r->name, variant); /* want: the variant's values */
    double *golden = st == REFENC_OK ? refenc_alloc_array(d.n, sizeof *golden) : NULL;
    if (st == REFENC_OK && golden == NULL)
        st = refenc_error_set(x->err, REFENC_ENOMEM, "%s: out of memory", x->golden->path);
    if (st == REFENC_OK)
        st = refenc_st_to_f64(golden, x->golden, refenc_st_find(x->golden, r->name), x->err);
    elem_bound b = {r->rule, r->tol, NULL, r->rule == REFENC_RULE_BUDGET ? r->budget_max_abs : r->base_allowance};
    if (st == REFENC_OK && r->angle_allowance && (st = allowance(&d.allow, x, r->name, d.want, d.n)) == REFENC_OK)
        b.allow = d.allow;
    if (st == REFENC_OK) {
        *ratio = distance(&b, r->budget_nmse, d.got, d.want, d.dc, d.n);
        *separation = distance(&b, r->budget_nmse, d.want, golden, d.dc, d.n);
    }
    free(golden);
    out_data_free(&d);
    return st;
}

/* A variant is a candidate only where it is told apart from the golden: some
 * output it changes by more than this many bounds.  Then results within one
 * bound of the variant are more than one bound from the golden (the triangle
 * inequality), so a diagnosis never names a variant a correct result could
 * match; the generator stores variants at 100 float64 tolerances or more, but
 * in float16 or bfloat16 some of them are within the budget. */
#define VARIANT_SEPARATION 2.0

/* Whether the results match variant v (certify.h): every stored output they
 * provide within the rule, a required one among them, and the variant told
 * apart from the golden; *worst: the ratio, *separation: the variant's
 * distance from the golden (its effect on the case), both -1 when no output
 * it stores was compared.  A backward variant (variants.h) stores gradients
 * only, all optional: some gradient it stores stands for the required
 * output, and its forward is the golden's, so results whose forward fails
 * do not match it.  Each gradient is compared under the bound its rule
 * gives the results' dtype (r->rule, r->tol, r->budget_*: set_rule), so
 * the naming follows the gradient rule wherever it certifies gradients. */
static int variant_matches(int *match, double *worst, double *separation, certify_ctx *x, refenc_case_report *rep,
                           const json_t *v)
{
    const char *vname = json_string_value(json_object_get(v, "name"));
    refenc_variant known;
    const int backward = refenc_variant_parse(&known, vname) && refenc_variant_is_backward(known);
    int required_seen = 0, mismatch = 0, st = REFENC_OK;
    for (size_t j = 0; backward && j < rep->n_outputs; j++)
        mismatch |= !rep->outputs[j].grad && rep->outputs[j].status == REFENC_OUT_FAIL;
    size_t k;
    json_t *o;
    *worst = -1;
    *separation = -1;
    json_array_foreach(json_object_get(v, "outputs"), k, o) {
        refenc_output_report *r = NULL;
        for (size_t j = 0; j < rep->n_outputs; j++)
            if (strcmp(rep->outputs[j].name, json_string_value(o)) == 0)
                r = &rep->outputs[j];
        if (r->status != REFENC_OUT_PASS && r->status != REFENC_OUT_FAIL)
            continue; /* not provided or not checked, or the wrong shape: nothing to compare */
        double q = -1, sep = -1;
        if ((st = variant_output_ratio(&q, &sep, x, vname, r)))
            return st;
        *separation = fmax(*separation, sep);
        required_seen |= (backward ? r->grad : r->required) && q >= 0;
        mismatch |= q > 1;
        *worst = fmax(*worst, q);
    }
    *match = required_seen && !mismatch && *separation > VARIANT_SEPARATION;
    return REFENC_OK;
}

/* What one variant adds to the report: its effect, whether the bounds rule
 * it out, whether it is the closest; for a failing case whether it is a
 * candidate and the diagnosis (the closest candidate). */
static void note_variant(refenc_case_report *rep, refenc_variant vv, const char *vname, int match, double worst,
                         double sep)
{
    rep->effect[vv] = sep;
    if (sep >= 0 && sep <= VARIANT_SEPARATION)
        refenc_variant_set_add(&rep->not_ruled_out, vv);
    if (worst >= 0 && (rep->closest[0] == '\0' || worst < rep->closest_distance)) {
        snprintf(rep->closest, sizeof rep->closest, "%s", vname);
        rep->closest_distance = worst;
    }
    if (rep->pass || !match)
        return;
    refenc_variant_set_add(&rep->candidates, vv);
    if (rep->diagnosis[0] == '\0' || worst < rep->diagnosis_ratio) {
        snprintf(rep->diagnosis, sizeof rep->diagnosis, "%s", vname);
        rep->diagnosis_ratio = worst;
    }
}

/* Compares the results with every variant the case stores (certify.h): the
 * closest, the effects, and for failing results the variant they match. */
static int diagnose(refenc_case_report *rep, certify_ctx *x)
{
    size_t i;
    json_t *v;
    rep->diagnosis[0] = '\0';
    json_array_foreach(x->meta.variants, i, v) {
        int match;
        double worst, sep;
        const char *vname = json_string_value(json_object_get(v, "name"));
        refenc_variant vv;
        const int st = variant_matches(&match, &worst, &sep, x, rep, v);
        if (st)
            return st;
        rep->variants_checked++;
        rep->variants_stored++;
        if (refenc_variant_parse(&vv, vname)) /* parse_variants accepted only known names */
            note_variant(rep, vv, vname, match, worst, sep);
    }
    if (rep->pass)
        rep->variants_checked = 0; /* the diagnosis examines failing cases only */
    return REFENC_OK;
}

/* The output a misnamed results tensor most likely means, or NULL: the
 * name without its "out." prefix, the name Hugging Face gives the final
 * output (last_hidden_state, hidden_states, output), or the one
 * sentence-transformers gives the pooled embedding (sentence_embedding;
 * not BERT's pooler_output, a dense layer refenc does not compute). */
static const char *did_you_mean(const refenc_case_report *rep, const char *tn)
{
    static const char *const final_names[] = {"last_hidden_state", "hidden_states", "output", "outputs"};
    static const char *const pooled_names[] = {"sentence_embedding", "sentence_embeddings", "embeddings"};
    char full[REFENC_NAME_MAX];
    snprintf(full, sizeof full, "out.%s", tn);
    for (size_t k = 0; k < sizeof final_names / sizeof final_names[0]; k++)
        if (strcmp(tn, final_names[k]) == 0)
            snprintf(full, sizeof full, "out.output");
    for (size_t k = 0; k < sizeof pooled_names / sizeof pooled_names[0]; k++)
        if (strcmp(tn, pooled_names[k]) == 0)
            snprintf(full, sizeof full, "out.embedding");
    for (size_t i = 0; i < rep->n_outputs; i++)
        if (strcmp(rep->outputs[i].name, full) == 0)
            return rep->outputs[i].name;
    return NULL;
}

/* Every tensor of the results must be an output of the case. */
static int check_result_names(const refenc_case_report *rep, const refenc_st_file *results, refenc_error *err)
{
    for (size_t t = 0; t < results->n_tensors; t++) {
        const char *tn = results->tensors[t].name;
        size_t i = 0;
        while (i < rep->n_outputs && strcmp(rep->outputs[i].name, tn) != 0)
            i++;
        const char *meant = i == rep->n_outputs ? did_you_mean(rep, tn) : NULL;
        if (i == rep->n_outputs && rep->grads == 0 && strncmp(tn, REFENC_NAME_GRAD, strlen(REFENC_NAME_GRAD)) == 0)
            return refenc_error_set(err, REFENC_EFORMAT,
                                    "%s: tensor '%s' (data at byte %zu) is a gradient, but case '%s' holds "
                                    "none (a golden made without --grad: docs/golden-format.md, "
                                    "\"Gradients\")", results->path, tn, results->tensors[t].file_offset, rep->name);
        if (meant != NULL)
            return refenc_error_set(err, REFENC_EFORMAT,
                                    "%s: tensor '%s' (data at byte %zu) is not an output of case '%s': did you "
                                    "mean '%s'? (outputs are named out.*: docs/golden-format.md)",
                                    results->path, tn, results->tensors[t].file_offset, rep->name, meant);
        if (i == rep->n_outputs)
            return refenc_error_set(err, REFENC_EFORMAT,
                                    "%s: tensor '%s' (data at byte %zu) is not an output of case '%s' "
                                    "(its outputs are listed in docs/golden-format.md and in the "
                                    "golden's __metadata__.outputs)",
                                    results->path, tn, results->tensors[t].file_offset, rep->name);
    }
    return REFENC_OK;
}

/* Marks the outputs the caller excludes; with a glob, the others are required. */
static void apply_glob(refenc_case_report *rep, const char *glob)
{
    for (size_t i = 0; glob != NULL && i < rep->n_outputs; i++) {
        refenc_output_report *r = &rep->outputs[i];
        if (fnmatch(glob, r->name, 0) != 0)
            r->status = REFENC_OUT_NOT_CHECKED;
        else
            r->required = 1;
    }
}

/* The first failing gradient in backward order, and a note when the case
 * holds gradients the results do not give. */
static void grad_summary(refenc_case_report *rep, const certify_ctx *x)
{
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const refenc_output_report *r = &rep->outputs[i];
        if (!r->grad)
            continue;
        rep->grads_given += r->status != REFENC_OUT_NOT_PROVIDED && r->status != REFENC_OUT_NOT_CHECKED;
        if (rep->first_grad_divergence < 0 && (r->status == REFENC_OUT_FAIL || r->status == REFENC_OUT_BAD_SHAPE))
            rep->first_grad_divergence = (int)i;
    }
    const char *unmodelled = NULL; /* a dtype whose gradient budgets have no baseline (set_grad_rule) */
    refenc_format uf = REFENC_FMT_F64;
    for (int f = 0; f < REFENC_FMT_COUNT; f++)
        if (x->have_gbase[f] && x->gbase[f].unsupported != NULL)
            unmodelled = x->gbase[f].unsupported, uf = (refenc_format)f;
    if (unmodelled != NULL && rep->grads_given == 0 && rep->note[0] == '\0')
        snprintf(rep->note, sizeof rep->note, "the case's %zu gradients are not certified: the emulated %s "
                 "backward, their budgets' baseline, does not model %s yet (docs/gradients.md)", rep->grads,
                 refenc_format_name(uf), unmodelled);
    else if (rep->grads > 0 && rep->grads_given == 0 && rep->note[0] == '\0')
        snprintf(rep->note, sizeof rep->note, "the case holds %zu gradients (grad.*), the results none: "
                 "the backward is not certified", rep->grads);
}

static void free_ctx(certify_ctx *x)
{
    for (int f = 0; f < REFENC_FMT_COUNT; f++) {
        refenc_baseline_free(&x->base[f]);
        refenc_baseline_free(&x->gbase[f]);
    }
    json_decref(x->meta.variants);
}

int refenc_certify_case(refenc_case_report *rep, const refenc_st_file *golden,
                        const refenc_st_file *results, const refenc_certify_options *opt,
                        refenc_error *err)
{
    return refenc_certify_case_outputs(rep, golden, results, opt, NULL, err);
}

int refenc_certify_case_outputs(refenc_case_report *rep, const refenc_st_file *golden,
                                const refenc_st_file *results, const refenc_certify_options *opt,
                                const char *outputs_glob, refenc_error *err)
{
    certify_ctx x;
    memset(&x, 0, sizeof x);
    x.golden = golden;
    x.results = results;
    x.opt = opt;
    x.outputs_glob = outputs_glob;
    x.err = err;
    int st = load_outputs(rep, golden, err);
    if (st == REFENC_OK)
        st = load_grads(rep, golden, err);
    if (st == REFENC_OK)
        st = read_meta(&x.meta, rep, golden, err);
    rep->variants_by_reference = x.meta.by_reference;
    if (st == REFENC_OK)
        st = check_result_names(rep, results, err);
    apply_glob(rep, outputs_glob);
    for (size_t i = 0; st == REFENC_OK && i < rep->n_outputs; i++) {
        refenc_output_report *r = &rep->outputs[i];
        const refenc_st_tensor *got_t = refenc_st_find(results, r->name);
        if (r->status == REFENC_OUT_NOT_CHECKED)
            continue;
        if (got_t != NULL) {
            st = compare_output(r, &x, got_t);
            continue;
        }
        r->status = r->required ? REFENC_OUT_MISSING : REFENC_OUT_NOT_PROVIDED;
        if (r->required)
            snprintf(r->note, sizeof r->note, "required output missing from %s", results->path);
    }
    snprintf(rep->hint, sizeof rep->hint, "%s", x.hint);
    if (st == REFENC_OK) {
        refenc_verdict_case(rep);
        grad_summary(rep, &x);
        st = diagnose(rep, &x);
        if (st == REFENC_OK)
            st = expect_hazard(rep, &x);
    }
    free_ctx(&x);
    return st;
}

int refenc_certify_missing_outputs(refenc_case_report *rep, const refenc_st_file *golden, const char *note,
                                   const char *outputs_glob, refenc_error *err)
{
    int st = load_outputs(rep, golden, err);
    if (st == REFENC_OK)
        st = load_grads(rep, golden, err);
    if (st)
        return st;
    case_meta m; /* the variants stored, though none is compared without results */
    if ((st = read_meta(&m, rep, golden, err)) != REFENC_OK)
        return st;
    rep->variants_stored = json_array_size(m.variants);
    rep->variants_by_reference = m.by_reference;
    json_decref(m.variants);
    apply_glob(rep, outputs_glob);
    for (size_t i = 0; i < rep->n_outputs; i++)
        if (rep->outputs[i].status != REFENC_OUT_NOT_CHECKED)
            rep->outputs[i].status = rep->outputs[i].required ? REFENC_OUT_MISSING : REFENC_OUT_NOT_PROVIDED;
    snprintf(rep->note, sizeof rep->note, "%s", note);
    refenc_verdict_case(rep);
    return REFENC_OK;
}

int refenc_certify_missing(refenc_case_report *rep, const refenc_st_file *golden,
                           const char *note, refenc_error *err)
{
    return refenc_certify_missing_outputs(rep, golden, note, NULL, err);
}
