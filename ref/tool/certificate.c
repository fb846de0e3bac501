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
                                 const char *results_dir, refenc_error *err)
{
    int st = refenc_refuse_same_file(out_path, m->path, "manifest", err);
    for (size_t i = 0; i < m->n_cases && st == REFENC_OK; i++) {
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
    int missing;
    return refenc_certify_dir_case_outputs(rep, golden, results, golden_dir, c, results_dir, opt, NULL, &missing,
                                           err);
}

int refenc_certify_dir_case_outputs(refenc_case_report *rep, refenc_st_file *golden, refenc_st_file *results,
                                    const char *golden_dir, const refenc_manifest_case *c, const char *results_dir,
                                    const refenc_certify_options *opt, const char *outputs_glob, int *missing,
                                    refenc_error *err)
{
    *missing = 0;
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
                st = refenc_certify_case_outputs(rep, golden, results, opt, outputs_glob, err);
        } else if (errno == ENOENT) {
            char note[256];
            snprintf(note, sizeof note, "no results file %.230s", rpath);
            *missing = 1;
            st = refenc_certify_missing_outputs(rep, golden, note, outputs_glob, err);
            rep->results_missing = 1;
        } else {
            st = refenc_error_set(err, REFENC_EIO, "%s: cannot read: %s", rpath, strerror(errno));
        }
    }
    free(gpath);
    free(rpath);
    return st;
}

int refenc_certify_selected(const char *const *patterns, size_t n_patterns, size_t *matched, const char *name)
{
    int any = n_patterns == 0;
    for (size_t i = 0; i < n_patterns; i++)
        if (fnmatch(patterns[i], name, 0) == 0) {
            if (matched != NULL)
                matched[i]++;
            any = 1;
        }
    return any;
}

/* Whether any output of the case is checked (with --outputs, some may not be). */
static int any_checked(const refenc_case_report *rep)
{
    for (size_t i = 0; i < rep->n_outputs; i++)
        if (rep->outputs[i].status != REFENC_OUT_NOT_CHECKED)
            return 1;
    return 0;
}

int refenc_certify_dir_case_selected(refenc_case_report *rep, refenc_st_file *golden, refenc_st_file *results,
                                     const char *golden_dir, const refenc_manifest_case *c, const char *results_dir,
                                     const refenc_certify_options *opt, const char *outputs_glob, int skip_missing,
                                     refenc_error *err)
{
    int missing;
    const int st = refenc_certify_dir_case_outputs(rep, golden, results, golden_dir, c, results_dir, opt,
                                                   outputs_glob, &missing, err);
    if (st == REFENC_OK && missing && skip_missing)
        rep->verdict = REFENC_VERDICT_SKIP;
    if (st == REFENC_OK && !any_checked(rep)) {
        rep->verdict = REFENC_VERDICT_SKIP;
        snprintf(rep->note, sizeof rep->note, "no output matches --outputs '%.200s'", outputs_glob);
    }
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

/* The figures of a compared output: the rule and its bounds, then the errors. */
static void output_figures(json_t *o, const refenc_output_report *r)
{
    size_t tmp[REFENC_ST_MAX_NDIM];
    refenc_certificate_worst_index(tmp, r);
    json_t *idx = json_array();
    for (size_t d = 0; d < r->ndim; d++)
        json_array_append_new(idx, json_integer((json_int_t)tmp[d]));
    json_object_set_new(o, "dtype", json_string(refenc_st_dtype_name(r->dtype)));
    json_object_set_new(o, "rule", json_string(r->rule == REFENC_RULE_BUDGET ? "budget" : "policy"));
    json_object_set_new(o, "rtol", refenc_certificate_number(r->tol.rtol));
    json_object_set_new(o, "atol", refenc_certificate_number(r->tol.atol));
    if (r->rule == REFENC_RULE_BUDGET) {
        json_object_set_new(o, "budget_max_abs_error", refenc_certificate_number(r->budget_max_abs));
        json_object_set_new(o, "budget_nmse", refenc_certificate_number(r->budget_nmse));
        json_object_set_new(o, "baseline_max_abs_error", refenc_certificate_number(r->base_max_abs));
        json_object_set_new(o, "baseline_nmse", refenc_certificate_number(r->base_nmse));
    } else {
        json_object_set_new(o, "angle_allowance", json_boolean(r->angle_allowance));
        if (r->dtype == REFENC_ST_F32) { /* the float32 baseline's share of every bound */
            json_object_set_new(o, "baseline_max_abs_error", refenc_certificate_number(r->base_max_abs));
            json_object_set_new(o, "baseline_allowance", refenc_certificate_number(r->base_allowance));
        }
    }
    if (r->hazard_checked) { /* the bounds an expected failure stays within */
        json_object_set_new(o, "hazard_budget_max_abs_error", refenc_certificate_number(r->hazard_max_abs));
        json_object_set_new(o, "hazard_budget_nmse", refenc_certificate_number(r->hazard_nmse));
    }
    json_object_set_new(o, "compared", json_integer((json_int_t)r->compared));
    json_object_set_new(o, "dont_care", json_integer((json_int_t)r->dont_care));
    json_object_set_new(o, "out_of_tolerance", json_integer((json_int_t)r->out_of_tol));
    json_object_set_new(o, "nonfinite", json_integer((json_int_t)r->nonfinite));
    json_object_set_new(o, "max_abs_error", refenc_certificate_number(r->max_abs));
    json_object_set_new(o, "max_rel_error", refenc_certificate_number(r->max_rel));
    json_object_set_new(o, "max_ulp_error", refenc_certificate_number(r->max_ulp));
    json_object_set_new(o, "scale", refenc_certificate_number(r->scale));
    json_object_set_new(o, "nmse", refenc_certificate_number(r->nmse));
    json_object_set_new(o, "excess", refenc_certificate_number(r->excess));
    json_object_set_new(o, "worst_index", idx);
    json_object_set_new(o, "worst_got", refenc_certificate_number(r->worst_got));
    json_object_set_new(o, "worst_want", refenc_certificate_number(r->worst_want));
}

static json_t *output_json(const refenc_output_report *r)
{
    json_t *o = json_pack("{s:s, s:b, s:s}", "name", r->name, "required", r->required, "status",
                          refenc_output_status_name(r->status));
    if (o != NULL && (r->status == REFENC_OUT_PASS || r->status == REFENC_OUT_FAIL))
        output_figures(o, r);
    if (o != NULL && r->note[0])
        json_object_set_new(o, "note", refenc_certificate_text(r->note));
    return o;
}

/* The variants the case matches (refenc_case_report.candidates). */
static json_t *candidates_json(const refenc_case_report *rep)
{
    json_t *a = json_array();
    for (int k = 0; a != NULL && k < REFENC_VAR_COUNT; k++)
        if (refenc_variant_set_has(&rep->candidates, k))
            json_array_append_new(a, json_string(refenc_variant_get((refenc_variant)k)->name));
    return a;
}

static json_t *diagnosis_json(const refenc_case_report *rep)
{
    refenc_variant v;
    if (rep->diagnosis[0] && refenc_variant_parse(&v, rep->diagnosis)) {
        const refenc_variant_info *info = refenc_variant_get(v);
        return json_pack("{s:s, s:s, s:s, s:s, s:o, s:I, s:o}", "variant", info->name, "symptom", info->symptom,
                         "cause", info->cause, "fix", info->fix, "ratio",
                         refenc_certificate_number(rep->diagnosis_ratio), "variants_checked",
                         (json_int_t)rep->variants_checked, "candidates", candidates_json(rep));
    }
    return json_pack("{s:n, s:s, s:I, s:o}", "variant", "message", "no known variant matches", "variants_checked",
                     (json_int_t)rep->variants_checked, "candidates", candidates_json(rep));
}

/* The variants no verdict on this case rules out: [{"variant", "effect"}]. */
static json_t *not_ruled_out_json(const refenc_case_report *rep)
{
    json_t *a = json_array();
    for (int k = 0; a != NULL && k < REFENC_VAR_COUNT; k++)
        if (refenc_variant_set_has(&rep->not_ruled_out, k))
            json_array_append_new(a, json_pack("{s:s, s:o}", "variant", refenc_variant_get((refenc_variant)k)->name,
                                               "effect", refenc_certificate_number(rep->effect[k])));
    return a;
}

/* The case's variants, matched or not: how many it stores, the closest
 * (null when none was compared), those not ruled out. */
static void variants_json(json_t *c, const refenc_case_report *rep)
{
    json_object_set_new(c, "variants_stored", json_integer((json_int_t)rep->variants_stored));
    if (rep->variants_stored > 0) /* what computed them: the oracle, or the double reference */
        json_object_set_new(c, "variants_computed_by", json_string(rep->variants_by_reference ? "reference" : "oracle"));
    json_object_set_new(c, "closest_variant",
                        rep->closest[0] ? json_pack("{s:s, s:o, s:b}", "variant", rep->closest, "distance",
                                                    refenc_certificate_number(rep->closest_distance), "named",
                                                    strcmp(rep->closest, rep->diagnosis) == 0)
                                        : json_null());
    json_object_set_new(c, "not_ruled_out", not_ruled_out_json(rep));
}

json_t *refenc_certificate_case(const refenc_case_report *rep)
{
    json_t *outs = json_array();
    for (size_t i = 0; i < rep->n_outputs; i++)
        json_array_append_new(outs, output_json(&rep->outputs[i]));
    json_t *c = json_pack("{s:s, s:s, s:o}", "case", rep->name, "verdict", refenc_verdict_name(rep->verdict),
                          "outputs", outs);
    if (c == NULL)
        return NULL;
    json_object_set_new(c, "first_divergence",
                        rep->first_divergence >= 0 ? json_string(rep->outputs[rep->first_divergence].name)
                                                   : json_null());
    if (rep->grads > 0) /* a gradient case: the first failing gradient, in backward order */
        json_object_set_new(c, "first_grad_divergence",
                            rep->first_grad_divergence >= 0
                                ? json_string(rep->outputs[rep->first_grad_divergence].name)
                                : json_null());
    if (rep->note[0])
        json_object_set_new(c, "note", refenc_certificate_text(rep->note));
    if (rep->hazard[0])
        json_object_set_new(c, "hazard", refenc_certificate_text(rep->hazard));
    if (rep->verdict == REFENC_VERDICT_FAIL || rep->verdict == REFENC_VERDICT_XFAIL)
        json_object_set_new(c, "diagnosis", diagnosis_json(rep));
    variants_json(c, rep);
    if (rep->results_missing)
        json_object_set_new(c, "results_missing", json_true());
    if (rep->hint[0])
        json_object_set_new(c, "hint", refenc_certificate_text(rep->hint));
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

/* The refenc_format index of a result dtype (F64 0 .. BF16 3). */
static int format_index(refenc_st_dtype d)
{
    return d == REFENC_ST_F32 ? 1 : d == REFENC_ST_F16 ? 2 : d == REFENC_ST_BF16 ? 3 : 0;
}

static void tally_failing(refenc_certificate_tally *t, const refenc_case_report *rep)
{
    refenc_variant v;
    size_t matched = 0;
    t->failed++;
    if (rep->results_missing) {
        t->missing++;
        return; /* nothing to diagnose */
    }
    if (rep->diagnosis[0] && refenc_variant_parse(&v, rep->diagnosis))
        t->diagnosed[v]++;
    else
        t->undiagnosed++;
    for (int k = 0; k < REFENC_VAR_COUNT; k++)
        if (refenc_variant_set_has(&rep->candidates, k)) {
            t->candidate[k]++;
            matched++;
        }
    t->ambiguous += matched > 1;
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const refenc_output_report *r = &rep->outputs[i];
        if ((r->status == REFENC_OUT_PASS || r->status == REFENC_OUT_FAIL) && format_index(r->dtype) > t->low_dtype)
            t->low_dtype = format_index(r->dtype);
    }
}

/* The variants the case stores: each told apart from the golden or not. */
static void tally_variants(refenc_certificate_tally *t, const refenc_case_report *rep)
{
    t->with_variants += rep->variants_stored > 0;
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const refenc_output_report *r = &rep->outputs[i];
        if ((r->status == REFENC_OUT_PASS || r->status == REFENC_OUT_FAIL) && format_index(r->dtype) > t->run_dtype)
            t->run_dtype = format_index(r->dtype);
    }
    for (int v = 0; v < REFENC_VAR_COUNT; v++) {
        if (!(rep->effect[v] >= 0))
            continue; /* not stored, or nothing compared */
        t->stored[v]++;
        if (refenc_variant_set_has(&rep->not_ruled_out, v))
            t->largest_effect[v] = fmax(t->largest_effect[v], rep->effect[v]);
        else
            t->told_apart[v]++;
    }
}

void refenc_certificate_tally_add(refenc_certificate_tally *t, const refenc_case_report *rep)
{
    t->cases++;
    if (rep->verdict != REFENC_VERDICT_SKIP)
        tally_variants(t, rep);
    switch (rep->verdict) {
    case REFENC_VERDICT_PASS: t->passed++; break;
    case REFENC_VERDICT_XPASS: t->xpass++; break;
    case REFENC_VERDICT_XFAIL: t->xfail++; break;
    case REFENC_VERDICT_SKIP: t->skipped++; break;
    case REFENC_VERDICT_FAIL: tally_failing(t, rep); break;
    }
}

void refenc_certificate_tally_error(refenc_certificate_tally *t)
{
    t->cases++;
    t->failed++;
    t->undiagnosed++;
    t->errors++;
}

size_t refenc_certificate_examined(const refenc_certificate_tally *t)
{
    return t->failed - t->errors - t->missing;
}

const char *refenc_certificate_most_likely_bug(const refenc_certificate_tally *t)
{
    const size_t examined = refenc_certificate_examined(t);
    for (int v = 0; v < REFENC_VAR_COUNT; v++) {
        if (2 * t->diagnosed[v] <= examined)
            continue; /* not a majority of the failing cases */
        for (int w = 0; w < REFENC_VAR_COUNT; w++)
            if (w != v && t->candidate[w] >= t->candidate[v])
                return NULL; /* another variant matches as many cases: indistinguishable */
        return refenc_variant_get((refenc_variant)v)->name;
    }
    return NULL;
}

/* The candidates' order: most matched first, then the table's order. */
static int next_candidate(const refenc_certificate_tally *t, const int *used)
{
    int best = -1;
    for (int v = 0; v < REFENC_VAR_COUNT; v++)
        if (!used[v] && t->candidate[v] > 0 && (best < 0 || t->candidate[v] > t->candidate[best]))
            best = v;
    return best;
}

void refenc_certificate_bug_candidates(char *buf, size_t cap, size_t *n, const refenc_certificate_tally *t)
{
    static const char *const dtypes[] = {"F64", "F32", "F16", "BF16"};
    int used[REFENC_VAR_COUNT] = {0};
    size_t len = 0;
    *n = 0;
    buf[0] = '\0';
    for (int v; (v = next_candidate(t, used)) >= 0; used[v] = 1, ++*n)
        len += (size_t)snprintf(buf + (len < cap ? len : cap - 1), len < cap ? cap - len : 1, "%s%s (%zu case%s)",
                                *n ? " or " : "", refenc_variant_get((refenc_variant)v)->name, t->candidate[v],
                                t->candidate[v] == 1 ? "" : "s");
    if (t->ambiguous)
        snprintf(buf + (len < cap ? len : cap - 1), len < cap ? cap - len : 1,
                 ": indistinguishable in %s on these cases", dtypes[t->low_dtype & 3]);
}

refenc_variant_set refenc_certificate_not_ruled_out(const refenc_certificate_tally *t)
{
    refenc_variant_set bits = {{0}};
    for (int v = 0; v < REFENC_VAR_COUNT; v++)
        if (t->stored[v] > 0 && t->told_apart[v] == 0)
            refenc_variant_set_add(&bits, v);
    return bits;
}

/* The summary's record of the variants: how many cases store any, and
 * those the run does not rule out with their largest effect. */
static void summary_variants(json_t *summary, const refenc_certificate_tally *t)
{
    const refenc_variant_set bits = refenc_certificate_not_ruled_out(t);
    json_t *a = json_array();
    for (int v = 0; v < REFENC_VAR_COUNT; v++)
        if (refenc_variant_set_has(&bits, v))
            json_array_append_new(a, json_pack("{s:s, s:o, s:I}", "variant", refenc_variant_get((refenc_variant)v)->name,
                                               "largest_effect", refenc_certificate_number(t->largest_effect[v]),
                                               "cases", (json_int_t)t->stored[v]));
    json_object_set_new(summary, "cases_with_variants", json_integer((json_int_t)t->with_variants));
    json_object_set_new(summary, "not_ruled_out", a);
}

void refenc_certificate_summary_add(json_t *summary, const refenc_certificate_tally *t)
{
    summary_variants(summary, t);
    const char *bug = t->failed ? refenc_certificate_most_likely_bug(t) : NULL;
    json_object_set_new(summary, "passed", json_integer((json_int_t)t->passed));
    json_object_set_new(summary, "failed", json_integer((json_int_t)t->failed));
    json_object_set_new(summary, "xfail", json_integer((json_int_t)t->xfail));
    json_object_set_new(summary, "xpass", json_integer((json_int_t)t->xpass));
    json_object_set_new(summary, "skipped", json_integer((json_int_t)t->skipped));
    json_object_set_new(summary, "most_likely_bug", bug ? json_string(bug) : json_null());
    json_t *cands = json_array();
    int used[REFENC_VAR_COUNT] = {0};
    for (int v; (v = next_candidate(t, used)) >= 0; used[v] = 1)
        json_array_append_new(cands, json_pack("{s:s, s:I}", "variant", refenc_variant_get((refenc_variant)v)->name,
                                               "cases", (json_int_t)t->candidate[v]));
    json_object_set_new(summary, "bug_candidates", cands);
}

json_t *refenc_certificate_selection(const char *const *patterns, size_t n_patterns, const char *outputs_glob,
                                     int skip_missing)
{
    json_t *pats = json_array();
    int ok = pats != NULL;
    for (size_t i = 0; ok && i < n_patterns; i++) /* any bytes, \xNN-escaped: never dropped */
        ok = json_array_append_new(pats, refenc_certificate_text(patterns[i])) == 0;
    json_t *outs = outputs_glob != NULL ? refenc_certificate_text(outputs_glob) : json_null();
    if (!ok || outs == NULL) {
        json_decref(pats);
        json_decref(outs);
        return NULL;
    }
    return json_pack("{s:o, s:o, s:b}", "cases", pats, "outputs", outs, "skip_missing", skip_missing);
}
