/* refenc certify: compare an implementation's results files with the golden
 * cases and report, per case and output, whether they pass, by how much they
 * differ, and where a failing implementation first diverges. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../refenc.h"
#include "../io/atomic_write.h"
#include "../io/manifest.h"
#include "../tool/certificate.h"
#include "../tool/certify.h"
#include "../io/safetensors.h"
#include "../tool/variants.h"
#include "cli.h"

static const char certify_usage[] =
    "usage: refenc certify --golden DIR --results DIR [--case GLOB] [--json REPORT.json]\n"
    "                      [--rtol X --atol Y] [--quiet]\n"
    "\n"
    "For each golden case (DIR/manifest.json lists them; files in DIR/cases/), reads\n"
    "RESULTS/<case>.safetensors written by the implementation under test and compares\n"
    "each out.* tensor it holds with the golden (the final outputs are required,\n"
    "intermediates optional; F64, F32, F16 or BF16), skipping don't-care elements.\n"
    "\n"
    "options:\n"
    "  --golden DIR        the golden directory (normally golden/)\n"
    "  --results DIR       the directory of results files, one per case\n"
    "  --case GLOB         only the cases whose name matches GLOB (shell pattern)\n"
    "  --json FILE         also write the whole report as a JSON certificate\n"
    "  --rtol X --atol Y   use this tolerance for every output, instead of the\n"
    "                      policy per dtype and case (docs/certify.md); give both\n"
    "  --quiet             print only failing outputs and the summary\n"
    "  --list-bugs         print the known bug variants the diagnosis recognises\n"
    "                      (name, symptom, cause, fix) and exit\n"
    "  -h, --help          this help\n"
    "\n"
    "An element passes when |got - want| <= atol + rtol |want|; a NaN or infinity\n"
    "where the golden is finite always fails.\n"
    "exit codes: 0 every case passed, 1 some case failed, 2 usage or format error\n";

typedef struct {
    const char *golden_dir, *results_dir, *case_glob, *json_path;
    int have_rtol, have_atol, quiet;
    refenc_certify_options opt;
} certify_args;

static void print_index(FILE *out, const refenc_output_report *r)
{
    size_t idx[REFENC_ST_MAX_NDIM];
    refenc_certificate_worst_index(idx, r);
    fputc('[', out);
    for (size_t d = 0; d < r->ndim; d++)
        fprintf(out, d ? ", %zu" : "%zu", idx[d]);
    fputc(']', out);
}

static void print_case(const refenc_case_report *rep, int quiet)
{
    printf("%-52s %s\n", rep->name, rep->pass ? "PASS" : "FAIL");
    if (rep->note[0])
        printf("    %s\n", rep->note);
    if (!rep->pass && rep->first_divergence >= 0)
        printf("    first divergence: %s\n", rep->outputs[rep->first_divergence].name);
    if (!rep->pass) {
        refenc_variant v;
        if (rep->diagnosis[0] && refenc_variant_parse(&v, rep->diagnosis)) {
            const refenc_variant_info *info = refenc_variant_get(v);
            printf("    diagnosis: the results match the known bug '%s' (within %.2g of the tolerance)\n"
                   "      symptom: %s\n      cause:   %s\n      fix:     %s\n",
                   info->name, rep->diagnosis_ratio, info->symptom, info->cause, info->fix);
        } else {
            printf("    diagnosis: no known variant matches (%zu checked)\n", rep->variants_checked);
        }
    }
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const refenc_output_report *r = &rep->outputs[i];
        if (r->status == REFENC_OUT_NOT_PROVIDED)
            continue;
        if (quiet && r->status == REFENC_OUT_PASS)
            continue;
        printf("    %-30s %-14s", r->name, refenc_output_status_name(r->status));
        if (r->status == REFENC_OUT_PASS || r->status == REFENC_OUT_FAIL) {
            printf(" %-4s abs %.3g  rel %.3g  ulp %.3g  nmse %.3g  (rtol %.3g, atol %.3g",
                   refenc_st_dtype_name(r->dtype), r->max_abs, r->max_rel, r->max_ulp, r->nmse,
                   r->tol.rtol, r->tol.atol);
            if (r->dont_care)
                printf("; %zu don't-care", r->dont_care);
            printf(")\n");
            if (r->status == REFENC_OUT_FAIL) {
                printf("        %zu of %zu elements out of tolerance; worst at ", r->out_of_tol, r->compared);
                print_index(stdout, r);
                printf(": got %.17g, want %.17g\n", r->worst_got, r->worst_want);
            }
        } else {
            printf("\n");
        }
        if (r->note[0])
            printf("        %s\n", r->note);
    }
}

/* Writes the certificate atomically (io/atomic_write.h): a temporary file
 * renamed into place, never over anything but a regular file. */
static int write_json(const char *path, json_t *doc)
{
    refenc_error err;
    if (doc == NULL)
        return cli_error("certify", "%s: out of memory building the JSON certificate", path);
    if (refenc_atomic_write_json(path, doc, JSON_INDENT(2) | JSON_SORT_KEYS, &err) != REFENC_OK)
        return cli_error("certify", "%s", err.message);
    return REFENC_EXIT_OK;
}

/* The golden set, as far as it can be trusted before any case is read
 * (docs/certify.md, the trust model): --golden and --results searchable
 * directories, the manifest's entries checked, and --json none of the
 * inputs.  Fills m; prints the message and returns REFENC_EXIT_USAGE on error. */
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
        st = refenc_certify_refuse_output(a->json_path, m, a->golden_dir, a->results_dir, a->case_glob, &err);
    if (st == REFENC_OK)
        return REFENC_EXIT_OK;
    refenc_manifest_free(m);
    return cli_error("certify", "%s", err.message);
}

int cmd_certify(int argc, char **argv)
{
    certify_args a = {0};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            fputs(certify_usage, stdout);
            return REFENC_EXIT_OK;
        } else if (strcmp(s, "--quiet") == 0) {
            a.quiet = 1;
            continue;
        } else if (strcmp(s, "--list-bugs") == 0) {
            for (int k = 0; k < REFENC_VAR_COUNT; k++) {
                const refenc_variant_info *info = refenc_variant_get((refenc_variant)k);
                printf("%s\n  symptom: %s\n  cause:   %s\n  fix:     %s\n", info->name, info->symptom,
                       info->cause, info->fix);
            }
            return REFENC_EXIT_OK;
        }
        if (v == NULL)
            return cli_error("certify", "%s needs a value (see 'refenc certify --help')", s);
        if (strcmp(s, "--golden") == 0)
            a.golden_dir = v;
        else if (strcmp(s, "--results") == 0)
            a.results_dir = v;
        else if (strcmp(s, "--case") == 0)
            a.case_glob = v;
        else if (strcmp(s, "--json") == 0)
            a.json_path = v;
        else if (strcmp(s, "--rtol") == 0) {
            if (!cli_parse_tolerance(&a.opt.tol.rtol, v))
                return cli_error("certify", "--rtol: '%s' is not a finite number >= 0", v);
            a.have_rtol = 1;
        } else if (strcmp(s, "--atol") == 0) {
            if (!cli_parse_tolerance(&a.opt.tol.atol, v))
                return cli_error("certify", "--atol: '%s' is not a finite number >= 0", v);
            a.have_atol = 1;
        } else
            return cli_error("certify", "unknown option '%s' (see 'refenc certify --help')", s);
        i++;
    }
    if (a.golden_dir == NULL || a.results_dir == NULL)
        return cli_error("certify", "--golden DIR and --results DIR are required (see 'refenc certify --help')");
    if (a.have_rtol != a.have_atol)
        return cli_error("certify", "--rtol and --atol go together");
    a.opt.override_tolerance = a.have_rtol;

    refenc_manifest manifest;
    refenc_error err;
    if (open_golden_set(&manifest, &a) != REFENC_EXIT_OK)
        return REFENC_EXIT_USAGE;

    json_t *report = json_array();
    size_t n_cases = 0, n_pass = 0;
    int rc = REFENC_EXIT_OK;
    printf("refenc certify: golden %s, results %s\n", a.golden_dir, a.results_dir);
    printf("manifest sha256 %s\n\n", manifest.sha256);
    for (size_t idx = 0; idx < manifest.n_cases; idx++) {
        const char *name = manifest.cases[idx].name;
        if (a.case_glob != NULL && fnmatch(a.case_glob, name, 0) != 0)
            continue;
        n_cases++;

        refenc_error_clear(&err);
        refenc_st_file golden, results;
        refenc_case_report rep;
        int st = refenc_certify_dir_case(&rep, &golden, &results, a.golden_dir, &manifest.cases[idx],
                                         a.results_dir, &a.opt, &err);
        if (st != REFENC_OK) {
            rc = cli_error("certify", "%s", err.message);
            json_array_append_new(report, json_pack("{s:s, s:s, s:s}", "case", name, "verdict", "ERROR",
                                                    "note", err.message));
        } else {
            print_case(&rep, a.quiet);
            n_pass += rep.pass;
            if (!rep.pass && rc == REFENC_EXIT_OK)
                rc = REFENC_EXIT_FAIL;
            json_array_append_new(report, refenc_certificate_case(&rep));
        }
        refenc_case_report_free(&rep);
        refenc_st_free(&golden);
        refenc_st_free(&results);
    }

    if (rc != REFENC_EXIT_USAGE && n_cases == 0)
        rc = cli_error("certify", "no golden case matches '%s'", a.case_glob ? a.case_glob : "*");
    const char *verdict = rc == REFENC_EXIT_OK ? "PASS" : rc == REFENC_EXIT_FAIL ? "FAIL" : "ERROR";
    printf("\nsummary: %zu case%s, %zu passed, %zu failed: %s\n", n_cases, n_cases == 1 ? "" : "s",
           n_pass, n_cases - n_pass, verdict);

    if (a.json_path != NULL) {
        json_t *doc = refenc_certificate_doc(REFENC_VERSION, a.golden_dir, a.results_dir, manifest.sha256,
                                             report, n_cases, n_pass, verdict);
        if (write_json(a.json_path, doc) != REFENC_EXIT_OK)
            rc = REFENC_EXIT_USAGE;
        json_decref(doc);
    } else {
        json_decref(report);
    }
    refenc_manifest_free(&manifest);
    return rc;
}
