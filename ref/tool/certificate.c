#include "certificate.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/text.h"
#include "../io/atomic_write.h"

#include "variants.h"

int refenc_certify_dir_check(const char *dir, const char *what, refenc_error *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return refenc_error_set(err, REFENC_EIO, "%s (the %s directory): %s", dir, what, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return refenc_error_set(err, REFENC_EIO, "%s (the %s directory): %s", dir, what, strerror(ENOTDIR));
    if (faccessat(AT_FDCWD, dir, X_OK, AT_EACCESS) != 0)
        return refenc_error_set(err, REFENC_EIO, "%s (the %s directory): cannot be searched: %s", dir, what,
                                strerror(errno));
    return REFENC_OK;
}

/* dir + "/" + rest + name + suffix, in a new string, or NULL. */
static char *join_path(const char *dir, const char *rest, const char *name, const char *suffix)
{
    const size_t n = strlen(dir) + strlen(rest) + strlen(name) + strlen(suffix) + 2;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s%s%s", dir, rest, name, suffix);
    return p;
}

int refenc_certify_refuse_output(const char *out_path, const refenc_manifest *m, const char *golden_dir,
                                 const char *results_dir, const char *case_glob, refenc_error *err)
{
    int st = refenc_refuse_same_file(out_path, m->path, "manifest", err);
    for (size_t i = 0; i < m->n_cases && st == REFENC_OK; i++) {
        if (case_glob != NULL && fnmatch(case_glob, m->cases[i].name, 0) != 0)
            continue;
        char *gpath = join_path(golden_dir, "cases/", m->cases[i].file, "");
        char *rpath = join_path(results_dir, "", m->cases[i].name, ".safetensors");
        if (gpath == NULL || rpath == NULL)
            st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", m->cases[i].name);
        if (st == REFENC_OK)
            st = refenc_refuse_same_file(out_path, gpath, "golden case", err);
        if (st == REFENC_OK)
            st = refenc_refuse_same_file(out_path, rpath, "results file", err);
        free(gpath);
        free(rpath);
    }
    return st;
}

int refenc_certify_dir_case(refenc_case_report *rep, refenc_st_file *golden, refenc_st_file *results,
                            const char *golden_dir, const refenc_manifest_case *c, const char *results_dir,
                            const refenc_certify_options *opt, refenc_error *err)
{
    memset(rep, 0, sizeof *rep);
    memset(golden, 0, sizeof *golden);
    memset(results, 0, sizeof *results);
    char *gpath = join_path(golden_dir, "cases/", c->file, "");
    char *rpath = join_path(results_dir, "", c->name, ".safetensors");
    struct stat sb;
    int st = REFENC_OK;
    if (gpath == NULL || rpath == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", c->name);
    /* the golden case is used only as the manifest lists it */
    if (st == REFENC_OK && (st = refenc_st_read(golden, gpath, err)) == REFENC_OK)
        st = refenc_manifest_verify(c, golden, err);
    if (st == REFENC_OK) {
        if (stat(rpath, &sb) == 0) {
            if ((st = refenc_st_read(results, rpath, err)) == REFENC_OK)
                st = refenc_certify_case(rep, golden, results, opt, err);
        } else if (errno == ENOENT) {
            char note[256];
            snprintf(note, sizeof note, "no results file %.230s", rpath);
            st = refenc_certify_missing(rep, golden, note, err);
        } else {
            st = refenc_error_set(err, REFENC_EIO, "%s: cannot read: %s", rpath, strerror(errno));
        }
    }
    free(gpath);
    free(rpath);
    return st;
}

json_t *refenc_certificate_text(const char *s)
{
    const size_t cap = 4 * strlen(s) + 1;
    char *clean = malloc(cap);
    if (clean == NULL)
        return NULL;
    refenc_text_escape(clean, cap, s);
    json_t *j = json_string(clean);
    free(clean);
    return j;
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
        json_object_set_new(o, "note", refenc_certificate_text(r->note));
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
        json_object_set_new(c, "note", refenc_certificate_text(rep->note));
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
                               const char *manifest_sha256, json_t *cases, size_t n_cases, size_t n_passed,
                               const char *verdict)
{
    return json_pack("{s:s, s:o, s:o, s:s, s:o, s:{s:I, s:I, s:I, s:s}}", "refenc_version", version, "golden",
                     refenc_certificate_text(golden_dir), "results", refenc_certificate_text(results_dir),
                     "manifest_sha256", manifest_sha256, "cases", cases, "summary", "cases", (json_int_t)n_cases,
                     "passed", (json_int_t)n_passed, "failed", (json_int_t)(n_cases - n_passed), "verdict",
                     verdict);
}
