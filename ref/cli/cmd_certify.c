/* refenc certify: compare an implementation's results files with the golden
 * cases and report, per case and output, whether they pass, by how much they
 * differ, and where a failing implementation first diverges. */
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "../refenc.h"
#include "../io/atomic_write.h"
#include "../io/manifest.h"
#include "../tool/certificate.h"
#include "../tool/certify.h"
#include "../io/safetensors.h"
#include "../tool/variants.h"
#include "certify_report.h"
#include "cli.h"
#include "selection.h"

static const char certify_usage[] =
    "usage: refenc certify --golden DIR --results DIR [--case GLOB[,GLOB...]]...\n"
    "                      [--outputs GLOB] [--skip-missing] [--json FILE] [--junit FILE]\n"
    "                      [--rtol X --atol Y] [--quiet]\n"
    "\n"
    "For each golden case (DIR/manifest.json lists them; files in DIR/cases/), reads\n"
    "RESULTS/<case>.safetensors written by the implementation under test and compares\n"
    "each out.* tensor it holds with the golden (the final outputs are required,\n"
    "intermediates optional; F64, F32, F16 or BF16), skipping don't-care elements.\n"
    "\n"
    "options:\n"
    "  --golden DIR        the golden directory (normally golden/)\n"
    "  --results DIR       the directory of results files, one per case (must exist)\n"
    "  --case GLOB         only the cases whose name matches GLOB (shell pattern);\n"
    "                      repeatable, and a comma-separated list is several; each\n"
    "                      pattern must match some case\n"
    "  --outputs GLOB      check only the golden outputs whose name matches GLOB (e.g.\n"
    "                      'out.layers.*.self_attn' for a fused attention kernel); each\n"
    "                      of them is then required, the others are 'not checked'\n"
    "  --skip-missing      a case without a results file is SKIP, not FAIL (at least\n"
    "                      one case must have one)\n"
    "  --json FILE         also write the whole report as a JSON certificate\n"
    "  --junit FILE        also write JUnit XML: one testcase per case and output,\n"
    "                      each failure with its verdict, worst element and diagnosis\n"
    "  --rtol X --atol Y   use this tolerance for every output, instead of the\n"
    "                      policy and budgets (docs/verdict.md); give both\n"
    "  --quiet             print only the failing cases and the summaries\n"
    "  --list-bugs         print the known bug variants the diagnosis recognises\n"
    "                      (name, symptom, cause, fix) and exit\n"
    "  --list-grad-bugs    the same for the named backward bugs, which certify names\n"
    "                      from a case's gradients (docs/gradients.md)\n"
    "  -h, --help          this help\n"
    "\n"
    "F64 results pass when |got - want| <= atol + rtol |want| per element; F32\n"
    "results within that plus twice the error of an emulated float32 implementation;\n"
    "F16 and BF16 results when each output's largest error and NMSE are within the\n"
    "budget of an emulated straightforward implementation in that dtype.  A NaN or\n"
    "infinity where the golden is finite always fails, and so does an output with\n"
    "no element compared.  A case the dtype cannot be expected to pass (inputs it\n"
    "cannot hold) is XFAIL when it fails finitely within the hazard's budget,\n"
    "XPASS when it passes.\n"
    "exit codes: 0 every case passed (or XFAIL/XPASS/SKIP), 1 some case failed,\n"
    "            2 usage or format error\n";

typedef struct {
    const char *golden_dir, *results_dir, *json_path, *junit_path;
    cli_selection sel; /* --case, --outputs, --skip-missing (selection.h) */
    int have_rtol, have_atol, quiet;
    refenc_certify_options opt;
} certify_args;

/* The forward's variants (--list-bugs) or the backward's (--list-grad-bugs). */
static int list_bugs(int backward)
{
    for (int k = backward ? REFENC_VAR_FIRST_BACKWARD : 0; k < (backward ? REFENC_VAR_COUNT : REFENC_VAR_FIRST_BACKWARD);
         k++) {
        const refenc_variant_info *info = refenc_variant_get((refenc_variant)k);
        printf("%s\n  symptom: %s\n  cause:   %s\n  fix:     %s\n", info->name, info->symptom, info->cause,
               info->fix);
    }
    return REFENC_EXIT_OK;
}

static int takes_value(const char *s)
{
    static const char *const names[] = {"--golden", "--results", "--json", "--junit", "--rtol", "--atol"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i]) == 0)
            return 1;
    return 0;
}

/* An option that takes a value (takes_value): stores it; returns an exit code. */
static int value_option(certify_args *a, const char *s, const char *v)
{
    if (strcmp(s, "--golden") == 0)
        a->golden_dir = v;
    else if (strcmp(s, "--results") == 0)
        a->results_dir = v;
    else if (strcmp(s, "--json") == 0)
        a->json_path = v;
    else if (strcmp(s, "--junit") == 0)
        a->junit_path = v;
    else if (strcmp(s, "--rtol") == 0 || strcmp(s, "--atol") == 0) {
        const int r = s[2] == 'r';
        if (!cli_parse_tolerance(r ? &a->opt.tol.rtol : &a->opt.tol.atol, v))
            return cli_error("certify", "%s: '%s' is not a finite number >= 0", s, v);
        *(r ? &a->have_rtol : &a->have_atol) = 1;
    }
    return REFENC_EXIT_OK;
}

/* Parses argv; *done = 1 when the command is complete (help, list). */
static int parse_args(certify_args *a, int argc, char **argv, int *done)
{
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0 || strcmp(s, "--list-bugs") == 0 ||
            strcmp(s, "--list-grad-bugs") == 0) {
            *done = 1;
            return s[2] == 'l' ? list_bugs(s[7] == 'g') : (fputs(certify_usage, stdout), REFENC_EXIT_OK);
        }
        int sel_value;
        if (strcmp(s, "--quiet") == 0) {
            a->quiet = 1;
            continue;
        }
        if (cli_selection_is_option(s, &sel_value) && !sel_value) {
            cli_selection_option(&a->sel, "certify", s, NULL);
            continue;
        }
        if (!sel_value && !takes_value(s))
            return cli_error("certify", "unknown option '%s' (see 'refenc certify --help')", s);
        if (v == NULL)
            return cli_error("certify", "%s needs a value (see 'refenc certify --help')", s);
        const int rc = sel_value ? cli_selection_option(&a->sel, "certify", s, v) : value_option(a, s, v);
        if (rc != REFENC_EXIT_OK)
            return rc;
        i++;
    }
    if (a->golden_dir == NULL || a->results_dir == NULL)
        return cli_error("certify", "--golden DIR and --results DIR are required (see 'refenc certify --help')");
    if (a->have_rtol != a->have_atol)
        return cli_error("certify", "--rtol and --atol go together");
    a->opt.override_tolerance = a->have_rtol;
    return REFENC_EXIT_OK;
}

/* The golden set, as far as it can be trusted before any case is read
 * (docs/verdict.md, the trust model): --golden and --results searchable
 * directories, the manifest's entries checked, and neither --json nor
 * --junit one of the inputs, nor one the other.  Fills m; prints the message and returns
 * REFENC_EXIT_USAGE on error. */
static int open_golden_set(refenc_manifest *m, const certify_args *a)
{
    refenc_error err;
    int st = refenc_certify_dir_check(a->golden_dir, "golden", &err);
    if (st == REFENC_OK)
        st = refenc_certify_dir_check(a->results_dir, "results", &err);
    if (st == REFENC_OK)
        st = refenc_manifest_read(m, a->golden_dir, &err);
    else
        memset(m, 0, sizeof *m);
    if (st == REFENC_OK && a->json_path != NULL)
        st = refenc_certify_refuse_output(a->json_path, m, a->golden_dir, a->results_dir, &err);
    if (st == REFENC_OK && a->junit_path != NULL)
        st = refenc_certify_refuse_output(a->junit_path, m, a->golden_dir, a->results_dir, &err);
    /* two outputs of one run are two files: one must not replace the other */
    if (st == REFENC_OK && a->json_path != NULL && a->junit_path != NULL)
        st = refenc_refuse_same_file(a->junit_path, a->json_path, "--json certificate", &err);
    if (st == REFENC_OK)
        return REFENC_EXIT_OK;
    refenc_manifest_free(m);
    return cli_error("certify", "%s", err.message);
}

/* The checks that need the whole run: every pattern matched some case, some
 * case was certified. */
static int check_selection(const certify_args *a, const refenc_certificate_tally *t)
{
    const char *unmatched = cli_selection_unmatched(&a->sel);
    if (unmatched != NULL)
        return cli_error("certify", "no golden case matches '%s'", unmatched);
    if (t->cases == 0)
        return cli_error("certify", "no golden case matches '*'");
    if (t->skipped == t->cases)
        return cli_error("certify", "no case was certified: %s",
                         a->sel.outputs_glob ? "no results file, or no output matches --outputs"
                                             : "no results file for any selected case");
    return REFENC_EXIT_OK;
}

/* The text report's groups (certify_report.h): cases without a results
 * file, failing or skipped, and cases --outputs leaves nothing to check. */
typedef struct {
    certify_group missing, missing_skipped, nothing_selected;
} case_groups;

/* Prints a certified case, or adds it to its group: with --quiet only the
 * failing cases are printed (docs/cli.md). */
static void report_case(const certify_args *a, const refenc_case_report *rep, case_groups *g)
{
    if (rep->results_missing && rep->verdict == REFENC_VERDICT_SKIP)
        certify_group_add(&g->missing_skipped, rep->name);
    else if (rep->results_missing)
        certify_group_add(&g->missing, rep->name);
    else if (rep->verdict == REFENC_VERDICT_SKIP)
        certify_group_add(&g->nothing_selected, rep->name);
    else if (!a->quiet || rep->verdict == REFENC_VERDICT_FAIL)
        certify_print_case(stdout, rep, a->quiet);
}

static void print_groups(const certify_args *a, const case_groups *g)
{
    char why[600];
    snprintf(why, sizeof why, "without a results file in %.400s%s", a->results_dir,
             " (--skip-missing makes them SKIP)");
    certify_print_group(stdout, &g->missing, "FAIL", why);
    snprintf(why, sizeof why, "without a results file in %.400s", a->results_dir);
    certify_print_group(stdout, &g->missing_skipped, "SKIP", why);
    snprintf(why, sizeof why, "where no output matches --outputs '%.400s'",
             a->sel.outputs_glob ? a->sel.outputs_glob : "");
    certify_print_group(stdout, &g->nothing_selected, "SKIP", why);
}

/* Runs every selected case of the manifest; appends each to report.  A
 * case that cannot be read is ERROR, in the text report as on stderr. */
static int run_cases(certify_args *a, const refenc_manifest *manifest, json_t *report, refenc_certificate_tally *t)
{
    int rc = REFENC_EXIT_OK;
    case_groups g;
    memset(&g, 0, sizeof g);
    for (size_t idx = 0; idx < manifest->n_cases; idx++) {
        const char *name = manifest->cases[idx].name;
        refenc_error err;
        refenc_error_clear(&err);
        if (!cli_selection_selected(&a->sel, name))
            continue;
        refenc_case_report rep;
        refenc_st_file golden, results;
        const int st = refenc_certify_dir_case_selected(&rep, &golden, &results, a->golden_dir,
                                                        &manifest->cases[idx], a->results_dir, &a->opt,
                                                        a->sel.outputs_glob, a->sel.skip_missing, &err);
        refenc_st_free(&golden);
        refenc_st_free(&results);
        if (st != REFENC_OK) {
            rc = cli_error("certify", "%s", err.message);
            printf("%-52s ERROR\n    %s\n", name, err.message);
            refenc_certificate_tally_error(t);
            json_array_append_new(report, json_pack("{s:s, s:s, s:o}", "case", name, "verdict", "ERROR", "note",
                                                    refenc_certificate_text(err.message)));
        } else {
            report_case(a, &rep, &g);
            refenc_certificate_tally_add(t, &rep);
            json_array_append_new(report, refenc_certificate_case(&rep));
        }
        refenc_case_report_free(&rep);
    }
    print_groups(a, &g);
    certify_print_short_summary(stdout, report);
    return rc;
}

/* The certificate and the JUnit file, when asked for, each written
 * atomically (io/atomic_write.h). */
static int write_outputs(const certify_args *a, const refenc_manifest *manifest, json_t *report,
                         const refenc_certificate_tally *t, const char *verdict)
{
    int rc = REFENC_EXIT_OK;
    refenc_error err;
    if (a->junit_path != NULL && certify_write_junit(a->junit_path, report, &err) != REFENC_OK)
        rc = cli_error("certify", "%s", err.message);
    if (a->json_path != NULL) {
        json_t *doc = refenc_certificate_doc(REFENC_VERSION, a->golden_dir, a->results_dir, manifest->sha256,
                                             json_incref(report), t->cases, t->cases - t->failed, verdict);
        if (doc == NULL) {
            json_decref(report);
            return cli_error("certify", "%s: out of memory building the JSON certificate", a->json_path);
        }
        refenc_certificate_summary_add(json_object_get(doc, "summary"), t);
        if (json_object_set_new(doc, "selection",
                                refenc_certificate_selection((const char *const *)a->sel.patterns, a->sel.n_patterns,
                                                             a->sel.outputs_glob, a->sel.skip_missing)) != 0)
            rc = cli_error("certify", "%s: out of memory building the JSON certificate", a->json_path);
        else if (certify_write_json(a->json_path, doc, &err) != REFENC_OK)
            rc = cli_error("certify", "%s", err.message);
        json_decref(doc);
    }
    return rc;
}

int cmd_certify(int argc, char **argv)
{
    certify_args a;
    memset(&a, 0, sizeof a);
    int done = 0, rc = parse_args(&a, argc, argv, &done);
    refenc_manifest manifest;
    if (done || rc != REFENC_EXIT_OK || (rc = open_golden_set(&manifest, &a)) != REFENC_EXIT_OK) {
        cli_selection_free(&a.sel);
        return rc;
    }
    printf("refenc certify: golden %s, results %s\n", a.golden_dir, a.results_dir);
    printf("manifest sha256 %s\n\n", manifest.sha256);
    json_t *report = json_array();
    refenc_certificate_tally t;
    memset(&t, 0, sizeof t);
    rc = run_cases(&a, &manifest, report, &t);
    if (rc == REFENC_EXIT_OK)
        rc = check_selection(&a, &t);
    if (rc == REFENC_EXIT_OK && t.failed > 0)
        rc = REFENC_EXIT_FAIL;
    const char *verdict = rc == REFENC_EXIT_OK ? "PASS" : rc == REFENC_EXIT_FAIL ? "FAIL" : "ERROR";
    certify_print_summary(stdout, &t, verdict);
    const int wrc = write_outputs(&a, &manifest, report, &t, verdict);
    json_decref(report);
    refenc_manifest_free(&manifest);
    cli_selection_free(&a.sel);
    return wrc != REFENC_EXIT_OK ? wrc : rc;
}
