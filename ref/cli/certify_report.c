/* refenc certify's reports (certify_report.h). */
#include "certify_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/text.h"
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

/* The diagnosis of a failing case: the variant it matches, or why none is
 * named (none stored; none close enough, with the closest). */
static void print_diagnosis(FILE *out, const refenc_case_report *rep)
{
    refenc_variant v;
    if (rep->diagnosis[0] && refenc_variant_parse(&v, rep->diagnosis)) {
        const refenc_variant_info *info = refenc_variant_get(v);
        fprintf(out, "    diagnosis: the results match the known bug '%s' (within %.2g of the tolerance)\n"
                "      symptom: %s\n      cause:   %s\n      fix:     %s\n",
                info->name, rep->diagnosis_ratio, info->symptom, info->cause, info->fix);
        if (rep->variants_by_reference)
            fprintf(out, "      (the golden's bug variants are the double reference's, not the oracle's: "
                    "docs/diagnosis.md, \"Variants from the double reference\")\n");
    } else if (rep->variants_stored == 0) {
        fprintf(out, "    diagnosis: none possible: the golden stores no bug variants for this case "
                "('refenc golden' stores them unless --no-variants)\n");
    } else {
        fprintf(out, "    diagnosis: no known variant matches (%zu checked)\n", rep->variants_checked);
    }
}

/* The closest variant, when it is not the diagnosis, and the variants whose
 * effect on the case is within the bounds: what the verdict does not rule out. */
static void print_variants(FILE *out, const refenc_case_report *rep)
{
    if (rep->closest[0] && strcmp(rep->closest, rep->diagnosis) != 0)
        fprintf(out, "    closest known variant: %s, %.3g budgets away (a match is within 1, and told apart "
                "from the golden)\n", rep->closest, rep->closest_distance);
    for (int k = 0; k < REFENC_VAR_COUNT; k++)
        if (refenc_variant_set_has(&rep->not_ruled_out, k))
            fprintf(out, "    not ruled out: %s (its effect on this case is %.2g budgets, too small to tell in "
                    "these dtypes)\n", refenc_variant_get((refenc_variant)k)->name, rep->effect[k]);
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
    if (failed && rep->first_grad_divergence >= 0)
        fprintf(out, "    first diverging backward step: %s\n", rep->outputs[rep->first_grad_divergence].name);
    if (failed)
        print_diagnosis(out, rep);
    if (rep->hint[0])
        fprintf(out, "    hint: %s\n", rep->hint);
    if (rep->verdict != REFENC_VERDICT_SKIP)
        print_variants(out, rep);
    for (size_t i = 0; i < rep->n_outputs && rep->verdict != REFENC_VERDICT_SKIP; i++) {
        const refenc_output_report *r = &rep->outputs[i];
        const int grad_note = r->grad && r->status == REFENC_OUT_NOT_CHECKED && r->note[0];
        if (r->status == REFENC_OUT_NOT_PROVIDED || (r->status == REFENC_OUT_NOT_CHECKED && !grad_note) ||
            (quiet && r->status == REFENC_OUT_PASS))
            continue;
        print_output(out, r);
    }
}

/* What the run's verdict does not rule out: the golden stores no variants,
 * or those it stores that no case tells apart from the golden. */
static void print_not_ruled_out(FILE *out, const refenc_certificate_tally *t, const char *verdict)
{
    static const char *const dtypes[] = {"F64", "F32", "F16", "BF16"};
    const refenc_variant_set bits = refenc_certificate_not_ruled_out(t);
    if (t->cases == t->skipped + t->errors)
        return;
    if (t->with_variants == 0) {
        fprintf(out, "known bugs: the golden stores no bug variants for these cases, so none can be named and "
                "none is ruled out beyond the budgets ('refenc golden' stores them unless --no-variants)\n");
        return;
    }
    for (int v = 0; v < REFENC_VAR_COUNT; v++)
        if (refenc_variant_set_has(&bits, v))
            fprintf(out, "a %s %s here does not rule out %s: its effect on these cases is at most %.2g budgets; "
                    "only cases designed to show it, or a wider dtype, can\n", dtypes[t->run_dtype & 3], verdict,
                    refenc_variant_get((refenc_variant)v)->name, t->largest_effect[v]);
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
    print_not_ruled_out(out, t, verdict);
    if (t->failed == 0)
        return;
    const char *bug = refenc_certificate_most_likely_bug(t);
    char cands[1024];
    size_t n_cands;
    refenc_variant v;
    refenc_certificate_bug_candidates(cands, sizeof cands, &n_cands, t);
    const size_t examined = refenc_certificate_examined(t);
    if (bug != NULL && refenc_variant_parse(&v, bug))
        fprintf(out, "most likely bug: %s (named on %zu of %zu failing cases%s; refenc certify --list-bugs "
                "explains it)\n", bug, t->diagnosed[v], examined, n_cands == 1 ? ", no other variant matches" : "");
    else if (examined == 0)
        fprintf(out, "most likely bug: unknown (no failing case was compared: %zu without a results file, %zu "
                "unreadable)\n", t->missing, t->errors);
    else if (n_cands == 0)
        fprintf(out, "most likely bug: unknown (no known variant matches any failing case)\n");
    else
        fprintf(out, "most likely bug: undecided (no variant is named by a majority of the %zu failing cases): "
                "%s; %zu of them match no known variant\n", examined, cands, t->undiagnosed - t->errors);
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

/* ---- explanations ----------------------------------------------------------------- */

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

static const json_t *find_output(const json_t *c, const char *name)
{
    size_t k;
    json_t *o;
    json_array_foreach(json_object_get(c, "outputs"), k, o)
        if (strcmp(str(o, "name"), name) == 0)
            return o;
    return NULL;
}

void certify_explain_output(FILE *f, const json_t *o)
{
    const json_t *idx = json_object_get(o, "worst_index");
    fputs(str(o, "name"), f);
    if (idx == NULL) { /* missing, the wrong shape: nothing compared */
        fprintf(f, ": %s%s%s", str(o, "status"), json_object_get(o, "note") ? ": " : "", str(o, "note"));
        return;
    }
    char *where = json_dumps(idx, JSON_COMPACT);
    const int budget = strcmp(str(o, "rule"), "budget") == 0;
    fprintf(f, "%s: got %.17g, want %.17g; excess %.3g x its bound; %lld of %lld elements out of tolerance (%s, %s: "
            "max abs error %.3g, bound %.3g", where ? where : "?", number(o, "worst_got"), number(o, "worst_want"),
            number(o, "excess"), json_integer_value(json_object_get(o, "out_of_tolerance")),
            json_integer_value(json_object_get(o, "compared")), str(o, "dtype"), budget ? "budget" : "policy",
            number(o, "max_abs_error"), budget ? number(o, "budget_max_abs_error") : number(o, "atol"));
    if (budget)
        fprintf(f, ", nmse %.3g, budget %.3g", number(o, "nmse"), number(o, "budget_nmse"));
    else
        fprintf(f, " + rtol %.3g |want|", number(o, "rtol"));
    fputc(')', f);
    if (json_object_get(o, "note") != NULL)
        fprintf(f, "; %s", str(o, "note"));
    free(where);
}

/* The diagnosis in a line: the variant matched, or why none is named and the closest. */
static void explain_diagnosis(FILE *f, const json_t *c)
{
    const json_t *d = json_object_get(c, "diagnosis"), *near = json_object_get(c, "closest_variant");
    const json_t *cands = json_object_get(d, "candidates");
    if (json_is_string(json_object_get(d, "variant"))) {
        fprintf(f, "diagnosis: the known bug %s (within %.2g of the tolerance)", str(d, "variant"), number(d, "ratio"));
        for (size_t k = 1; k < json_array_size(cands); k++) /* the others, indistinguishable on this case */
            fprintf(f, "%s%s", k == 1 ? "; also matches " : ", ", json_string_value(json_array_get(cands, k)));
    } else if (json_integer_value(json_object_get(c, "variants_stored")) == 0) {
        fputs("diagnosis: none possible: the golden stores no bug variants for this case", f);
    } else {
        fprintf(f, "diagnosis: no known variant matches (%lld checked)",
                json_integer_value(json_object_get(d, "variants_checked")));
        if (json_is_object(near))
            fprintf(f, "; the closest is %s at %.3g budgets", str(near, "variant"), number(near, "distance"));
    }
}

static void explain_case_body(FILE *f, const json_t *c, const char *said);

/* The case in a line (certify_explain_case); said: an output already
 * explained, named rather than explained again when it is the first divergence. */
static void explain_case(FILE *f, const json_t *c, const char *said)
{
    fputs(said != NULL ? "case" : str(c, "verdict"), f);
    explain_case_body(f, c, said);
}

/* What explain_case says after the verdict. */
static void explain_case_body(FILE *f, const json_t *c, const char *said)
{
    const char *first = json_string_value(json_object_get(c, "first_divergence"));
    if (json_object_get(c, "outputs") == NULL) { /* unreadable: the note is the error */
        fprintf(f, ": %s", str(c, "note"));
        return;
    }
    if (json_object_get(c, "hazard") != NULL)
        fprintf(f, " (%s)", str(c, "hazard"));
    if (json_is_true(json_object_get(c, "results_missing")) || json_object_get(c, "diagnosis") == NULL) {
        if (json_object_get(c, "note") != NULL)
            fprintf(f, ": %s", str(c, "note"));
        return;
    }
    if (first != NULL && said != NULL && strcmp(first, said) == 0) {
        fputs(": this output is the first divergence", f);
    } else if (first != NULL) {
        fputs(": first divergence ", f);
        certify_explain_output(f, find_output(c, first));
    } else if (json_object_get(c, "note") != NULL) {
        fprintf(f, ": %s", str(c, "note"));
    }
    fputs("; ", f);
    explain_diagnosis(f, c);
    if (json_object_get(c, "hint") != NULL)
        fprintf(f, "; hint: %s", str(c, "hint"));
}

void certify_explain_case(FILE *f, const json_t *c)
{
    explain_case(f, c, NULL);
}

/* A failing output, then its case (junit_failure's message). */
static void explain_failure(FILE *f, const json_t *pair)
{
    const json_t *c = json_array_get(pair, 0), *o = json_array_get(pair, 1);
    fprintf(f, "%s: ", str(c, "verdict"));
    certify_explain_output(f, o);
    fputs(" | ", f);
    explain_case(f, c, str(o, "name"));
}

void certify_group_add(certify_group *g, const char *name)
{
    if (g->n < CERTIFY_GROUP_NAMES)
        snprintf(g->names[g->n], sizeof g->names[g->n], "%s", name);
    g->n++;
}

void certify_print_group(FILE *out, const certify_group *g, const char *verdict, const char *why)
{
    if (g->n == 0)
        return;
    fprintf(out, "%-5s %zu case%s %s: ", verdict, g->n, g->n == 1 ? "" : "s", why);
    for (size_t i = 0; i < g->n && i < CERTIFY_GROUP_NAMES; i++)
        fprintf(out, "%s%s", i ? ", " : "", g->names[i]);
    if (g->n > CERTIFY_GROUP_NAMES)
        fprintf(out, " and %zu more", g->n - CERTIFY_GROUP_NAMES);
    fputc('\n', out);
}

void certify_print_short_summary(FILE *out, const json_t *cases)
{
    size_t i;
    json_t *c;
    int any = 0;
    json_array_foreach(cases, i, c) {
        const int error = json_object_get(c, "outputs") == NULL;
        if ((!error && strcmp(str(c, "verdict"), "FAIL") != 0) || json_is_true(json_object_get(c, "results_missing")))
            continue;
        if (!any++)
            fputs("\nshort summary:\n", out);
        fprintf(out, "%s %s", error ? "ERROR " : "FAILED", str(c, "case"));
        explain_case_body(out, c, NULL);
        fputc('\n', out);
    }
}

/* ---- JUnit ------------------------------------------------------------------------ */

/* s as XML character data, valid in an attribute as in an element: the
 * markup characters as entities, line breaks and tabs as character
 * references; what XML 1.0 cannot hold at all (the other control
 * characters, U+FFFE and U+FFFF, bytes outside a valid UTF-8 sequence)
 * written \xNN or \uFFFE as in every message (refenc_text_escape). */
static void xml_text(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        const size_t n = refenc_utf8_char_len(p, strlen((const char *)p));
        if (n == 3 && p[0] == 0xEF && p[1] == 0xBF && (p[2] == 0xBE || p[2] == 0xBF))
            fprintf(f, "\\u%s", p[2] == 0xBE ? "FFFE" : "FFFF");
        else if (n > 1)
            fwrite(p, 1, n, f);
        else if (n == 0 || (*p < 0x20 && *p != '\n' && *p != '\t' && *p != '\r'))
            fprintf(f, "\\x%02x", *p);
        else if (*p < 0x20)
            fprintf(f, "&#%d;", *p);
        else if (*p == '&' || *p == '<' || *p == '>' || *p == '"')
            fputs(*p == '&' ? "&amp;" : *p == '<' ? "&lt;" : *p == '>' ? "&gt;" : "&quot;", f);
        else
            fputc(*p, f);
        p += n ? n : 1;
    }
}

/* What writer prints into f, as XML character data. */
static void xml_print(FILE *f, void (*writer)(FILE *, const json_t *), const json_t *what)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (m != NULL) {
        writer(m, what);
        fclose(m);
    }
    xml_text(f, buf ? buf : "(out of memory)");
    free(buf);
}

/* The failure of one testcase: the message (the output, then the case's
 * verdict, first divergence and diagnosis), the body with one line each and
 * what the verdict does not rule out. */
static void junit_failure(FILE *f, const json_t *c, const json_t *o)
{
    json_t *pair = json_pack("[O, O]", c, o != NULL ? o : json_null());
    fputs("<failure message=\"", f);
    if (o != NULL && pair != NULL)
        xml_print(f, explain_failure, pair);
    else
        xml_print(f, certify_explain_case, c);
    json_decref(pair);
    fputs("\" type=\"", f);
    xml_text(f, str(c, "verdict"));
    fputs("\">case ", f);
    xml_text(f, str(c, "case"));
    fputs(": ", f);
    xml_print(f, certify_explain_case, c);
    if (o != NULL) {
        fputs("&#10;output: ", f);
        xml_print(f, certify_explain_output, o);
    }
    const json_t *near = json_object_get(c, "closest_variant"), *v;
    size_t k;
    if (json_is_object(near))
        fprintf(f, "&#10;closest known variant: %s at %.3g budgets", str(near, "variant"), number(near, "distance"));
    json_array_foreach(json_object_get(c, "not_ruled_out"), k, v)
        fprintf(f, "&#10;not ruled out: %s (its effect on this case is %.2g budgets)", str(v, "variant"),
                number(v, "effect"));
    fputs("</failure>", f);
}

/* Why an output is not a pass or a failure, or NULL when it is one. */
static const char *skip_reason(const json_t *c, const json_t *o)
{
    const char *verdict = str(c, "verdict"), *status = str(o, "status");
    if (strcmp(verdict, "SKIP") == 0)
        return json_object_get(c, "note") ? str(c, "note") : "skipped";
    if (strcmp(status, "not provided") == 0)
        return "optional output not provided by the results";
    if (strcmp(status, "not checked") == 0)
        return "not checked: excluded by --outputs";
    if (strcmp(verdict, "XFAIL") == 0 && strcmp(status, "PASS") != 0)
        return str(c, "hazard");
    return NULL;
}

typedef struct {
    size_t tests, failures, errors, skipped;
} junit_counts;

static void junit_open(FILE *f, const json_t *c, const char *name, junit_counts *n)
{
    n->tests++;
    fputs("    <testcase classname=\"", f);
    xml_text(f, str(c, "case"));
    fputs("\" name=\"", f);
    xml_text(f, name);
    fputs("\">", f);
}

/* One case's testcases: one per output, and one named "case" for what
 * belongs to no output (a case that could not be read: error; a case
 * failing with no failing output, e.g. nothing compared: failure). */
static void junit_case(FILE *f, const json_t *c, junit_counts *n)
{
    const int fail = strcmp(str(c, "verdict"), "FAIL") == 0;
    size_t k, failing = 0;
    json_t *o;
    if (json_object_get(c, "outputs") == NULL) {
        junit_open(f, c, "case", n);
        fputs("<error message=\"", f);
        xml_text(f, str(c, "note"));
        fputs("\"/></testcase>\n", f);
        n->errors++;
        return;
    }
    json_array_foreach(json_object_get(c, "outputs"), k, o) {
        const char *why = skip_reason(c, o);
        junit_open(f, c, str(o, "name"), n);
        if (why != NULL) {
            fputs("<skipped message=\"", f);
            xml_text(f, why);
            fputs("\"/>", f);
            n->skipped++;
        } else if (fail && strncmp(str(o, "status"), "FAIL", 4) == 0) {
            junit_failure(f, c, o);
            failing++;
        }
        fputs("</testcase>\n", f);
    }
    if (fail && failing == 0) {
        junit_open(f, c, "case", n);
        junit_failure(f, c, NULL);
        failing++;
        fputs("</testcase>\n", f);
    }
    n->failures += failing;
}

static int junit_writer(FILE *f, const void *what)
{
    const json_t *cases = what;
    junit_counts n = {0, 0, 0, 0};
    char *body = NULL;
    size_t len = 0, i;
    json_t *c;
    FILE *m = open_memstream(&body, &len);
    if (m == NULL)
        return 0;
    json_array_foreach(cases, i, c)
        junit_case(m, c, &n);
    if (fclose(m) != 0) {
        free(body);
        return 0;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
               "  <testsuite name=\"refenc certify\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\">\n",
            n.tests, n.failures, n.errors, n.skipped);
    const int ok = fwrite(body, 1, len, f) == len;
    free(body);
    return ok && fputs("  </testsuite>\n</testsuites>\n", f) != EOF;
}

int certify_write_junit(const char *path, const json_t *cases, refenc_error *err)
{
    return write_atomic(path, junit_writer, cases, err);
}
