#include "certify.h"

#include "variants.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/text.h"
#include "../io/golden_names.h"

int refenc_certify_policy(refenc_tolerance *tol, refenc_st_dtype dtype)
{
    switch (dtype) {
    case REFENC_ST_F64: *tol = (refenc_tolerance){1e-10, 1e-11}; return 1;
    case REFENC_ST_F32: *tol = (refenc_tolerance){1.3e-6, 1e-5}; return 1;
    case REFENC_ST_F16: *tol = (refenc_tolerance){1e-3, 1e-5}; return 1;
    case REFENC_ST_BF16: *tol = (refenc_tolerance){1.6e-2, 1e-5}; return 1;
    default: return 0;
    }
}

const char *refenc_output_status_name(refenc_output_status s)
{
    switch (s) {
    case REFENC_OUT_PASS: return "PASS";
    case REFENC_OUT_FAIL: return "FAIL";
    case REFENC_OUT_BAD_SHAPE: return "FAIL (shape)";
    case REFENC_OUT_MISSING: return "FAIL (missing)";
    case REFENC_OUT_NOT_PROVIDED: return "not provided";
    }
    return "?";
}

double refenc_ulp_error(double got, double want, refenc_st_dtype dtype)
{
    int p, emin; /* precision in bits, exponent of the smallest normal */
    switch (dtype) {
    case REFENC_ST_F32: p = 24; emin = -126; break;
    case REFENC_ST_F16: p = 11; emin = -14; break;
    case REFENC_ST_BF16: p = 8; emin = -126; break;
    default: p = 53; emin = -1022; break;
    }
    int e;
    frexp(want, &e); /* want = m 2^e, 0.5 <= |m| < 1: the binade's exponent is e - 1 */
    e = want == 0.0 ? emin : e - 1;
    if (e < emin)
        e = emin;
    return fabs(got - want) / ldexp(1.0, e - p + 1);
}

void refenc_case_report_free(refenc_case_report *rep)
{
    if (rep == NULL)
        return;
    free(rep->outputs);
    rep->outputs = NULL;
    rep->n_outputs = 0;
}

/* Reads the golden's metadata "outputs" list into rep->outputs (names,
 * required flags) and checks each is an F64 tensor of the golden. */
static int load_outputs(refenc_case_report *rep, const refenc_st_file *golden, refenc_error *err)
{
    memset(rep, 0, sizeof *rep);
    rep->first_divergence = -1;
    const char *name = refenc_st_metadata(golden, "case");
    const char *outs = refenc_st_metadata(golden, "outputs");
    const char *fmt = refenc_st_metadata(golden, "format");
    if (fmt == NULL || strcmp(fmt, REFENC_GOLDEN_FORMAT) != 0 || name == NULL || outs == NULL)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: not a refenc golden case (its __metadata__ needs format = \"%s\", "
                                "case and outputs)", golden->path, REFENC_GOLDEN_FORMAT);
    snprintf(rep->name, sizeof rep->name, "%s", name);

    /* duplicate keys refused, as everywhere else in a golden file */
    json_error_t jerr;
    json_t *list = json_loads(outs, JSON_REJECT_DUPLICATES, &jerr);
    int st = REFENC_OK;
    if (list == NULL || !json_is_array(list) || json_array_size(list) == 0) {
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.outputs is not a non-empty JSON array",
                              golden->path);
        goto done;
    }
    rep->outputs = calloc(json_array_size(list), sizeof *rep->outputs);
    if (rep->outputs == NULL) {
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", golden->path);
        goto done;
    }
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o) {
        const char *oname = json_string_value(json_object_get(o, "name"));
        const json_t *req = json_object_get(o, "required");
        const refenc_st_tensor *t = oname ? refenc_st_find(golden, oname) : NULL;
        if (oname == NULL || !json_is_boolean(req) || t == NULL || t->dtype != REFENC_ST_F64 ||
            strlen(oname) >= sizeof rep->outputs[i].name) {
            st = refenc_error_set(err, REFENC_EFORMAT,
                                  "%s: __metadata__.outputs[%zu] does not name an F64 tensor of the case",
                                  golden->path, i);
            goto done;
        }
        refenc_output_report *r = &rep->outputs[rep->n_outputs++];
        snprintf(r->name, sizeof r->name, "%s", oname);
        r->required = json_is_true(req);
        r->ndim = t->ndim;
        memcpy(r->shape, t->shape, sizeof r->shape);
        r->numel = t->numel;
    }
done:
    json_decref(list);
    return st;
}

/* The case's scale of the policy for dtype: __metadata__.tolerance =
 * {"scale": {"F64": s, ...}, "reason": "..."}; 1 when absent. */
static double case_scale(const refenc_st_file *golden, refenc_st_dtype dtype)
{
    const char *tol = refenc_st_metadata(golden, "tolerance");
    double s = 1.0;
    if (tol == NULL)
        return s;
    json_t *j = json_loads(tol, 0, NULL);
    const json_t *v = json_object_get(json_object_get(j, "scale"), refenc_st_dtype_name(dtype));
    if (json_is_number(v) && json_number_value(v) > 0)
        s = json_number_value(v);
    json_decref(j);
    return s;
}

static int compare_output(refenc_output_report *r, const refenc_st_file *golden,
                          const refenc_st_file *results, const refenc_st_tensor *got_t,
                          const refenc_certify_options *opt, refenc_error *err)
{
    const refenc_st_tensor *want_t = refenc_st_find(golden, r->name);
    char dc_name[REFENC_NAME_MAX];
    refenc_name_dontcare(dc_name, sizeof dc_name, NULL, r->name);
    const refenc_st_tensor *dc_t = refenc_st_find(golden, dc_name);

    r->dtype = got_t->dtype;
    if (!refenc_certify_policy(&r->tol, got_t->dtype))
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: tensor '%s' has dtype %s; outputs must be F64, F32, F16 or BF16 "
                                "(data at byte %zu)", results->path, r->name,
                                refenc_st_dtype_name(got_t->dtype), got_t->file_offset);
    if (opt != NULL && opt->override_tolerance) {
        r->tol = opt->tol;
    } else {
        const double s = case_scale(golden, got_t->dtype);
        r->tol.rtol *= s;
        r->tol.atol *= s;
    }

    if (got_t->ndim != want_t->ndim ||
        memcmp(got_t->shape, want_t->shape, want_t->ndim * sizeof(size_t)) != 0) {
        char gs[96], ws[96];
        refenc_shape_format(gs, sizeof gs, got_t->shape, got_t->ndim, "()");
        refenc_shape_format(ws, sizeof ws, want_t->shape, want_t->ndim, "()");
        r->status = REFENC_OUT_BAD_SHAPE;
        snprintf(r->note, sizeof r->note, "shape %s but the golden is %s", gs, ws);
        return REFENC_OK;
    }

    const size_t n = want_t->numel;
    double *got = refenc_alloc_array(n, sizeof *got), *want = refenc_alloc_array(n, sizeof *want);
    int64_t *dc = dc_t ? refenc_alloc_array(n, sizeof *dc) : NULL;
    int st = REFENC_OK;
    if (got == NULL || want == NULL || (dc_t && dc == NULL)) {
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for '%s'", results->path, r->name);
        goto done;
    }
    if ((st = refenc_st_to_f64(got, results, got_t, err)) ||
        (st = refenc_st_to_f64(want, golden, want_t, err)))
        goto done;
    if (dc_t != NULL) {
        if (dc_t->numel != n) {
            st = refenc_error_set(err, REFENC_EFORMAT, "%s: '%s' does not have the shape of '%s'",
                                  golden->path, dc_name, r->name);
            goto done;
        }
        if ((st = refenc_st_to_i64(dc, golden, dc_t, err)))
            goto done;
    }

    double sum_d2 = 0, sum_w2 = 0;
    for (size_t i = 0; i < n; i++) {
        if (dc != NULL && dc[i]) {
            r->dont_care++;
            continue;
        }
        r->compared++;
        const double g = got[i], w = want[i];
        const double bound = r->tol.atol + r->tol.rtol * fabs(w);
        double d, ratio;
        if (!isfinite(g)) { /* NaN or infinity where the golden is finite: always a failure */
            r->nonfinite++;
            r->out_of_tol++;
            d = INFINITY;
            ratio = INFINITY;
        } else {
            d = fabs(g - w);
            ratio = d / bound;
            if (!(d <= bound))
                r->out_of_tol++;
            sum_d2 += d * d;
            if (w != 0 && d / fabs(w) > r->max_rel)
                r->max_rel = d / fabs(w);
            const double ulp = refenc_ulp_error(g, w, r->dtype);
            if (ulp > r->max_ulp)
                r->max_ulp = ulp;
        }
        sum_w2 += w * w;
        if (d > r->max_abs)
            r->max_abs = d;
        if (ratio > r->worst_ratio || r->compared == 1) {
            r->worst_ratio = ratio;
            r->worst_flat = i;
            r->worst_got = g;
            r->worst_want = w;
        }
    }
    r->nmse = r->nonfinite ? INFINITY : sum_w2 > 0 ? sum_d2 / sum_w2 : sum_d2;
    r->status = r->out_of_tol ? REFENC_OUT_FAIL : REFENC_OUT_PASS;
    if (r->nonfinite)
        snprintf(r->note, sizeof r->note, "%zu non-finite value%s where the golden is finite",
                 r->nonfinite, r->nonfinite == 1 ? "" : "s");
done:
    free(got);
    free(want);
    free(dc);
    return st;
}

static void finish(refenc_case_report *rep)
{
    rep->pass = 1;
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const refenc_output_status s = rep->outputs[i].status;
        if (s == REFENC_OUT_FAIL || s == REFENC_OUT_BAD_SHAPE || s == REFENC_OUT_MISSING) {
            rep->pass = 0;
            if (rep->first_divergence < 0 && s != REFENC_OUT_MISSING)
                rep->first_divergence = (int)i;
        }
    }
}

/* The largest |got - alt| / (atol + rtol |alt|) of one output of a variant,
 * over the elements not don't-care in the golden or in the variant; +inf for
 * a non-finite result, -1 when every element is don't-care. */
static int variant_output_ratio(double *ratio, const refenc_st_file *golden, const refenc_st_file *results,
                                const char *variant, const refenc_output_report *r, refenc_error *err)
{
    char name[REFENC_NAME_MAX];
    refenc_name_alt(name, sizeof name, variant, r->name);
    const refenc_st_tensor *alt_t = refenc_st_find(golden, name);
    refenc_name_dontcare(name, sizeof name, variant, r->name);
    const refenc_st_tensor *adc_t = refenc_st_find(golden, name);
    refenc_name_dontcare(name, sizeof name, NULL, r->name);
    const refenc_st_tensor *gdc_t = refenc_st_find(golden, name);
    const refenc_st_tensor *got_t = refenc_st_find(results, r->name);
    const size_t n = r->numel;
    if (alt_t == NULL || alt_t->numel != n || (adc_t && adc_t->numel != n) || (gdc_t && gdc_t->numel != n))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: variant '%s' of output '%s' is malformed",
                                golden->path, variant, r->name);
    double *got = refenc_alloc_array(n, sizeof *got), *alt = refenc_alloc_array(n, sizeof *alt);
    int64_t *adc = calloc(n ? n : 1, sizeof *adc), *gdc = calloc(n ? n : 1, sizeof *gdc);
    int st = REFENC_OK;
    if (!got || !alt || !adc || !gdc)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", golden->path);
    if (st == REFENC_OK)
        st = refenc_st_to_f64(got, results, got_t, err);
    if (st == REFENC_OK)
        st = refenc_st_to_f64(alt, golden, alt_t, err);
    if (st == REFENC_OK && adc_t != NULL)
        st = refenc_st_to_i64(adc, golden, adc_t, err);
    if (st == REFENC_OK && gdc_t != NULL)
        st = refenc_st_to_i64(gdc, golden, gdc_t, err);
    *ratio = -1;
    for (size_t i = 0; st == REFENC_OK && i < n; i++) {
        if (adc[i] || gdc[i])
            continue;
        const double q = isfinite(got[i]) ? fabs(got[i] - alt[i]) / (r->tol.atol + r->tol.rtol * fabs(alt[i]))
                                          : INFINITY;
        if (!(q <= *ratio))
            *ratio = isnan(q) ? INFINITY : fmax(q, *ratio);
    }
    free(got);
    free(alt);
    free(adc);
    free(gdc);
    return st;
}

/* Looks for the known bug variant the failing results match (certify.h). */
static int diagnose(refenc_case_report *rep, const refenc_st_file *golden, const refenc_st_file *results,
                    refenc_error *err)
{
    const char *vs = refenc_st_metadata(golden, "variants");
    json_t *list = vs ? json_loads(vs, JSON_REJECT_DUPLICATES, NULL) : NULL;
    size_t i;
    json_t *v;
    int st = REFENC_OK;
    rep->diagnosis[0] = '\0';
    /* a list that cannot be read must not pass for "no known variant matches" */
    if (vs != NULL && !json_is_array(list))
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.variants is not a JSON array",
                              golden->path);
    json_array_foreach(list, i, v) {
        const char *vname = json_string_value(json_object_get(v, "name"));
        const json_t *outs = json_object_get(v, "outputs");
        refenc_variant known;
        if (vname == NULL || !json_is_array(outs) || !refenc_variant_parse(&known, vname)) {
            st = refenc_error_set(err, REFENC_EFORMAT, "%s: __metadata__.variants[%zu] is malformed",
                                  golden->path, i);
            break;
        }
        rep->variants_checked++;
        /* every stored output the results provide must match; a required one must be among them */
        double worst = -1;
        int required_seen = 0, mismatch = 0;
        size_t k;
        json_t *o;
        json_array_foreach(outs, k, o) {
            const char *oname = json_string_value(o);
            refenc_output_report *r = NULL;
            for (size_t j = 0; j < rep->n_outputs && oname; j++)
                if (strcmp(rep->outputs[j].name, oname) == 0)
                    r = &rep->outputs[j];
            if (r == NULL || (r->status != REFENC_OUT_PASS && r->status != REFENC_OUT_FAIL))
                continue; /* not provided, or the wrong shape: nothing to compare */
            double q;
            if ((st = variant_output_ratio(&q, golden, results, vname, r, err)))
                break;
            required_seen |= r->required && q >= 0;
            mismatch |= q > 1;
            worst = fmax(worst, q);
        }
        if (st)
            break;
        if (required_seen && !mismatch && (rep->diagnosis[0] == '\0' || worst < rep->diagnosis_ratio)) {
            snprintf(rep->diagnosis, sizeof rep->diagnosis, "%s", vname);
            rep->diagnosis_ratio = worst;
        }
    }
    json_decref(list);
    return st;
}

int refenc_certify_case(refenc_case_report *rep, const refenc_st_file *golden,
                        const refenc_st_file *results, const refenc_certify_options *opt,
                        refenc_error *err)
{
    int st = load_outputs(rep, golden, err);
    if (st)
        return st;

    /* every tensor of the results must be an output of the case */
    for (size_t t = 0; t < results->n_tensors; t++) {
        const char *tn = results->tensors[t].name;
        size_t i = 0;
        while (i < rep->n_outputs && strcmp(rep->outputs[i].name, tn) != 0)
            i++;
        if (i == rep->n_outputs)
            return refenc_error_set(err, REFENC_EFORMAT,
                                    "%s: tensor '%s' (data at byte %zu) is not an output of case '%s' "
                                    "(its outputs are listed in docs/golden-format.md and in the "
                                    "golden's __metadata__.outputs)",
                                    results->path, tn, results->tensors[t].file_offset, rep->name);
    }

    for (size_t i = 0; i < rep->n_outputs; i++) {
        refenc_output_report *r = &rep->outputs[i];
        const refenc_st_tensor *got_t = refenc_st_find(results, r->name);
        if (got_t == NULL) {
            r->status = r->required ? REFENC_OUT_MISSING : REFENC_OUT_NOT_PROVIDED;
            if (r->required)
                snprintf(r->note, sizeof r->note, "required output missing from %s", results->path);
            continue;
        }
        if ((st = compare_output(r, golden, results, got_t, opt, err)))
            return st;
    }
    finish(rep);
    return rep->pass ? REFENC_OK : diagnose(rep, golden, results, err);
}

int refenc_certify_missing(refenc_case_report *rep, const refenc_st_file *golden,
                           const char *note, refenc_error *err)
{
    int st = load_outputs(rep, golden, err);
    if (st)
        return st;
    for (size_t i = 0; i < rep->n_outputs; i++)
        rep->outputs[i].status = rep->outputs[i].required ? REFENC_OUT_MISSING : REFENC_OUT_NOT_PROVIDED;
    snprintf(rep->note, sizeof rep->note, "%s", note);
    finish(rep);
    return REFENC_OK;
}
