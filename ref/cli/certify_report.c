/* refenc certify's reports (certify_report.h). */
#include "certify_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../io/atomic_write.h"
#include "../tool/certificate.h"
#include "../tool/variants.h"

static void print_index(FILE *out, const refenc_output_report *r)
{
    size_t idx[REFENC_ST_MAX_NDIM];
    refenc_certificate_worst_index(idx, r);
    fputc('[', out);
    for (size_t d = 0; d < r->ndim; d++)
        fprintf(out, d ? ", %zu" : "%zu", idx[d]);
    fputc(']', out);
}

/* "PASS", "XFAIL (float32 hazard: ...)", "XPASS (...; passed unexpectedly)". */
static void print_verdict(FILE *out, const refenc_case_report *rep)
{
    fputs(refenc_verdict_name(rep->verdict), out);
    if (rep->verdict == REFENC_VERDICT_XFAIL)
        fprintf(out, " (%s)", rep->hazard);
    else if (rep->verdict == REFENC_VERDICT_XPASS)
        fprintf(out, " (%s; passed unexpectedly)", rep->hazard);
    fputc('\n', out);
}

static void print_diagnosis(FILE *out, const refenc_case_report *rep)
{
    refenc_variant v;
    if (rep->diagnosis[0] && refenc_variant_parse(&v, rep->diagnosis)) {
        const refenc_variant_info *info = refenc_variant_get(v);
        fprintf(out, "    diagnosis: the results match the known bug '%s' (within %.2g of the tolerance)\n"
                "      symptom: %s\n      cause:   %s\n      fix:     %s\n",
                info->name, rep->diagnosis_ratio, info->symptom, info->cause, info->fix);
    } else {
        fprintf(out, "    diagnosis: no known variant matches (%zu checked)\n", rep->variants_checked);
    }
}

static void print_output(FILE *out, const refenc_output_report *r)
{
    fprintf(out, "    %-30s %-14s", r->name, refenc_output_status_name(r->status));
    if (r->status == REFENC_OUT_PASS || r->status == REFENC_OUT_FAIL) {
        fprintf(out, " %-4s abs %.3g  rel %.3g  ulp %.3g  nmse %.3g", refenc_st_dtype_name(r->dtype), r->max_abs,
                r->max_rel, r->max_ulp, r->nmse);
        if (r->rule == REFENC_RULE_BUDGET)
            fprintf(out, "  (budget abs %.3g, nmse %.3g; baseline abs %.3g, nmse %.3g", r->budget_max_abs,
                    r->budget_nmse, r->base_max_abs, r->base_nmse);
        else
            fprintf(out, "  (rtol %.3g, atol %.3g", r->tol.rtol, r->tol.atol);
        if (r->rule == REFENC_RULE_POLICY && r->base_allowance > 0)
            fprintf(out, ", + 2 x the float32 baseline's %.3g", r->base_max_abs);
        if (r->rule == REFENC_RULE_POLICY && r->angle_allowance)
            fprintf(out, ", + angle allowance");
        if (r->dont_care)
            fprintf(out, "; %zu don't-care", r->dont_care);
        fprintf(out, ")\n");
        if (r->status == REFENC_OUT_FAIL && r->out_of_tol) {
            fprintf(out, "        %zu of %zu elements out of tolerance; worst at ", r->out_of_tol, r->compared);
            print_index(out, r);
            fprintf(out, ": got %.17g, want %.17g\n", r->worst_got, r->worst_want);
        }
    } else {
        fputc('\n', out);
    }
    if (r->hazard_checked)
        fprintf(out, "        hazard budget abs %.3g, nmse %.3g (the baseline with the inputs in %s)\n",
                r->hazard_max_abs, r->hazard_nmse, refenc_st_dtype_name(r->dtype));
    if (r->note[0])
        fprintf(out, "        %s\n", r->note);
}

void certify_print_case(FILE *out, const refenc_case_report *rep, int quiet)
{
    const int failed = rep->verdict == REFENC_VERDICT_FAIL || rep->verdict == REFENC_VERDICT_XFAIL;
    fprintf(out, "%-52s ", rep->name);
    print_verdict(out, rep);
    if (rep->note[0])
        fprintf(out, "    %s\n", rep->note);
    if (failed && rep->first_divergence >= 0)
        fprintf(out, "    first divergence: %s\n", rep->outputs[rep->first_divergence].name);
    if (failed)
        print_diagnosis(out, rep);
    for (size_t i = 0; i < rep->n_outputs && rep->verdict != REFENC_VERDICT_SKIP; i++) {
        const refenc_output_report *r = &rep->outputs[i];
        if (r->status == REFENC_OUT_NOT_PROVIDED || r->status == REFENC_OUT_NOT_CHECKED ||
            (quiet && r->status == REFENC_OUT_PASS))
            continue;
        print_output(out, r);
    }
}

void certify_print_summary(FILE *out, const refenc_certificate_tally *t, const char *verdict)
{
    fprintf(out, "\nsummary: %zu case%s, %zu passed, %zu failed", t->cases, t->cases == 1 ? "" : "s", t->passed,
            t->failed);
    if (t->xfail || t->xpass)
        fprintf(out, ", %zu expected failure%s (XFAIL), %zu unexpected pass%s (XPASS)", t->xfail,
                t->xfail == 1 ? "" : "s", t->xpass, t->xpass == 1 ? "" : "es");
    if (t->skipped)
        fprintf(out, ", %zu skipped", t->skipped);
    fprintf(out, ": %s\n", verdict);
    if (t->failed == 0)
        return;
    const char *bug = refenc_certificate_most_likely_bug(t);
    char cands[1024];
    size_t n_cands;
    refenc_variant v;
    refenc_certificate_bug_candidates(cands, sizeof cands, &n_cands, t);
    if (bug != NULL && refenc_variant_parse(&v, bug))
        fprintf(out, "most likely bug: %s (named on %zu of %zu failing cases%s; refenc certify --list-bugs "
                "explains it)\n", bug, t->diagnosed[v], t->failed, n_cands == 1 ? ", no other variant matches" : "");
    else if (n_cands == 0)
        fprintf(out, "most likely bug: unknown (no known variant matches any failing case)\n");
    else
        fprintf(out, "most likely bug: undecided (no variant is named by a majority of the %zu failing cases): "
                "%s; %zu of them match no known variant\n", t->failed, cands, t->undiagnosed);
}

/* ---- JSON ------------------------------------------------------------------------- */

/* Writes what writer prints, atomically (io/atomic_write.h): built in
 * memory, then a temporary file renamed into place, never over anything but
 * a regular file. */
static int write_atomic(const char *path, int (*writer)(FILE *, const void *), const void *what,
                        refenc_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    int ok = f != NULL && writer(f, what);
    if (f != NULL)
        ok &= fclose(f) == 0;
    if (!ok) {
        free(buf);
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", path);
    }
    refenc_atomic_file a;
    int st = refenc_atomic_open(&a, path, err);
    if (st == REFENC_OK && (st = refenc_atomic_write(&a, buf, n, err)) == REFENC_OK)
        st = refenc_atomic_commit(&a, err);
    else if (st == REFENC_OK)
        refenc_atomic_abort(&a);
    free(buf);
    return st;
}

static int json_writer(FILE *f, const void *doc)
{
    return json_dumpf((const json_t *)doc, f, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 && fputc('\n', f) != EOF;
}

int certify_write_json(const char *path, const json_t *doc, refenc_error *err)
{
    return write_atomic(path, json_writer, doc, err);
}

/* ---- JUnit ------------------------------------------------------------------------ */

static void xml_text(FILE *f, const char *s)
{
    for (; s != NULL && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* A figure of the certificate: a number, or "nan"/"inf"/"-inf". */
static double number(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : strtod(str(o, key), NULL);
}

/* One output's testcase: a failure, skipped, or nothing (a pass). */
static void junit_output(FILE *f, const json_t *c, const json_t *o)
{
    const char *verdict = str(c, "verdict"), *status = str(o, "status");
    fputs("    <testcase classname=\"", f);
    xml_text(f, str(c, "case"));
    fputs("\" name=\"", f);
    xml_text(f, str(o, "name"));
    fputs("\">", f);
    const int compared = strcmp(status, "PASS") == 0 || strncmp(status, "FAIL", 4) == 0;
    if (strcmp(verdict, "SKIP") == 0 || !compared || (strcmp(verdict, "XFAIL") == 0 && strcmp(status, "PASS"))) {
        fputs("<skipped message=\"", f);
        xml_text(f, strcmp(verdict, "XFAIL") == 0 ? str(c, "hazard") : strcmp(verdict, "SKIP") == 0 ? str(c, "note") : status);
        fputs("\"/>", f);
    } else if (strcmp(status, "PASS") != 0) {
        const json_t *idx = json_object_get(o, "worst_index");
        fputs("<failure message=\"", f);
        xml_text(f, status);
        if (idx != NULL) {
            char *where = json_dumps(idx, JSON_COMPACT);
            fprintf(f, ": worst at %s: got %.17g, want %.17g", where ? where : "?", number(o, "worst_got"),
                    number(o, "worst_want"));
            free(where);
        }
        fputs("\" type=\"", f);
        xml_text(f, str(o, "dtype"));
        fputs("\">", f);
        xml_text(f, str(o, "note"));
        fputs("</failure>", f);
    }
    fputs("</testcase>\n", f);
}

static int junit_writer(FILE *f, const void *what)
{
    const json_t *cases = what;
    size_t tests = 0, failures = 0, i, k;
    json_t *c, *o;
    json_array_foreach(cases, i, c)
        json_array_foreach(json_object_get(c, "outputs"), k, o) {
            tests++;
            failures += strncmp(str(o, "status"), "FAIL", 4) == 0 && strcmp(str(c, "verdict"), "FAIL") == 0;
        }
    size_t errors = 0;
    json_array_foreach(cases, i, c)
        errors += json_object_get(c, "outputs") == NULL; /* a case that could not be read */
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
               "  <testsuite name=\"refenc certify\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\">\n",
            tests + errors, failures, errors);
    json_array_foreach(cases, i, c) {
        if (json_object_get(c, "outputs") == NULL) {
            fputs("    <testcase classname=\"", f);
            xml_text(f, str(c, "case"));
            fputs("\" name=\"case\"><error message=\"", f);
            xml_text(f, str(c, "note"));
            fputs("\"/></testcase>\n", f);
        }
        json_array_foreach(json_object_get(c, "outputs"), k, o)
            junit_output(f, c, o);
    }
    return fputs("  </testsuite>\n</testsuites>\n", f) != EOF;
}

int certify_write_junit(const char *path, const json_t *cases, refenc_error *err)
{
    return write_atomic(path, junit_writer, cases, err);
}
