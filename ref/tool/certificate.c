#include "certificate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "variants.h"

int refenc_manifest_load(refenc_manifest *m, const char *golden_dir, refenc_error *err)
{
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s/manifest.json", golden_dir);
    json_error_t jerr;
    m->root = json_load_file(m->path, JSON_REJECT_DUPLICATES, &jerr);
    if (m->root == NULL && jerr.line >= 0) /* a syntax error: say where */
        return refenc_error_set(err, REFENC_EFORMAT, "%s: line %d, column %d (byte %d): %s", m->path,
                                jerr.line, jerr.column, jerr.position, jerr.text);
    if (m->root == NULL)
        return refenc_error_set(err, REFENC_EIO, "%s: %s", m->path, jerr.text);
    m->cases = json_object_get(m->root, "cases");
    if (!json_is_array(m->cases)) {
        json_decref(m->root);
        m->root = NULL;
        m->cases = NULL;
        return refenc_error_set(err, REFENC_EFORMAT, "%s: expected an object with a \"cases\" array",
                                m->path);
    }
    return REFENC_OK;
}

size_t refenc_manifest_size(const refenc_manifest *m)
{
    return m->cases ? json_array_size(m->cases) : 0;
}

int refenc_manifest_case(const refenc_manifest *m, size_t i, const char **name, const char **file,
                         refenc_error *err)
{
    const json_t *entry = json_array_get(m->cases, i);
    *name = json_string_value(json_object_get(entry, "case"));
    *file = json_string_value(json_object_get(entry, "file"));
    if (*name == NULL || *file == NULL || strchr(*file, '/') != NULL)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: cases[%zu] needs \"case\" and a plain \"file\" name",
                                m->path, i);
    return REFENC_OK;
}

void refenc_manifest_free(refenc_manifest *m)
{
    json_decref(m->root);
    m->root = NULL;
    m->cases = NULL;
}

int refenc_certify_dir_case(refenc_case_report *rep, refenc_st_file *golden, refenc_st_file *results,
                            const char *golden_dir, const char *file, const char *results_dir,
                            const char *name, const refenc_certify_options *opt, refenc_error *err)
{
    memset(rep, 0, sizeof *rep);
    memset(golden, 0, sizeof *golden);
    memset(results, 0, sizeof *results);
    char gpath[4096], rpath[4096];
    snprintf(gpath, sizeof gpath, "%s/cases/%s", golden_dir, file);
    snprintf(rpath, sizeof rpath, "%s/%s.safetensors", results_dir, name);
    int st = refenc_st_read(golden, gpath, err);
    if (st != REFENC_OK)
        return st;
    if (access(rpath, F_OK) != 0) {
        char note[256];
        snprintf(note, sizeof note, "no results file %.230s", rpath);
        return refenc_certify_missing(rep, golden, note, err);
    }
    if ((st = refenc_st_read(results, rpath, err)) != REFENC_OK)
        return st;
    return refenc_certify_case(rep, golden, results, opt, err);
}

json_t *refenc_certificate_number(double v)
{
    if (isfinite(v))
        return json_real(v);
    return json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

void refenc_certificate_worst_index(size_t idx[REFENC_ST_MAX_NDIM], const refenc_output_report *r)
{
    size_t rest = r->worst_flat;
    for (size_t d = r->ndim; d-- > 0;) {
        idx[d] = r->shape[d] ? rest % r->shape[d] : 0;
        rest = r->shape[d] ? rest / r->shape[d] : 0;
    }
}

static json_t *output_json(const refenc_output_report *r)
{
    json_t *o = json_pack("{s:s, s:b, s:s}", "name", r->name, "required", r->required, "status",
                          refenc_output_status_name(r->status));
    if (r->status == REFENC_OUT_PASS || r->status == REFENC_OUT_FAIL) {
        size_t tmp[REFENC_ST_MAX_NDIM];
        refenc_certificate_worst_index(tmp, r);
        json_t *idx = json_array();
        for (size_t d = 0; d < r->ndim; d++)
            json_array_append_new(idx, json_integer((json_int_t)tmp[d]));
        json_object_set_new(o, "dtype", json_string(refenc_st_dtype_name(r->dtype)));
        json_object_set_new(o, "rtol", refenc_certificate_number(r->tol.rtol));
        json_object_set_new(o, "atol", refenc_certificate_number(r->tol.atol));
        json_object_set_new(o, "compared", json_integer((json_int_t)r->compared));
        json_object_set_new(o, "dont_care", json_integer((json_int_t)r->dont_care));
        json_object_set_new(o, "out_of_tolerance", json_integer((json_int_t)r->out_of_tol));
        json_object_set_new(o, "nonfinite", json_integer((json_int_t)r->nonfinite));
        json_object_set_new(o, "max_abs_error", refenc_certificate_number(r->max_abs));
        json_object_set_new(o, "max_rel_error", refenc_certificate_number(r->max_rel));
        json_object_set_new(o, "max_ulp_error", refenc_certificate_number(r->max_ulp));
        json_object_set_new(o, "nmse", refenc_certificate_number(r->nmse));
        json_object_set_new(o, "worst_index", idx);
        json_object_set_new(o, "worst_got", refenc_certificate_number(r->worst_got));
        json_object_set_new(o, "worst_want", refenc_certificate_number(r->worst_want));
    }
    if (r->note[0])
        json_object_set_new(o, "note", json_string(r->note));
    return o;
}

json_t *refenc_certificate_case(const refenc_case_report *rep)
{
    json_t *outs = json_array();
    for (size_t i = 0; i < rep->n_outputs; i++)
        json_array_append_new(outs, output_json(&rep->outputs[i]));
    json_t *c = json_pack("{s:s, s:s, s:o}", "case", rep->name, "verdict", rep->pass ? "PASS" : "FAIL",
                          "outputs", outs);
    if (c == NULL)
        return NULL;
    json_object_set_new(c, "first_divergence",
                        rep->first_divergence >= 0 ? json_string(rep->outputs[rep->first_divergence].name)
                                                   : json_null());
    if (rep->note[0])
        json_object_set_new(c, "note", json_string(rep->note));
    if (!rep->pass) {
        refenc_variant v;
        json_t *d;
        if (rep->diagnosis[0] && refenc_variant_parse(&v, rep->diagnosis)) {
            const refenc_variant_info *info = refenc_variant_get(v);
            d = json_pack("{s:s, s:s, s:s, s:s, s:o, s:I}", "variant", info->name, "symptom", info->symptom,
                          "cause", info->cause, "fix", info->fix, "ratio",
                          refenc_certificate_number(rep->diagnosis_ratio), "variants_checked",
                          (json_int_t)rep->variants_checked);
        } else {
            d = json_pack("{s:n, s:s, s:I}", "variant", "message", "no known variant matches",
                          "variants_checked", (json_int_t)rep->variants_checked);
        }
        json_object_set_new(c, "diagnosis", d);
    }
    return c;
}

json_t *refenc_certificate_doc(const char *version, const char *golden_dir, const char *results_dir,
                               json_t *cases, size_t n_cases, size_t n_passed, const char *verdict)
{
    return json_pack("{s:s, s:s, s:s, s:o, s:{s:I, s:I, s:I, s:s}}", "refenc_version", version, "golden",
                     golden_dir, "results", results_dir, "cases", cases, "summary", "cases",
                     (json_int_t)n_cases, "passed", (json_int_t)n_passed, "failed",
                     (json_int_t)(n_cases - n_passed), "verdict", verdict);
}
