/* refenc certify: compare an implementation's results files with the golden
 * cases and report, per case and output, whether they pass, by how much they
 * differ, and where a failing implementation first diverges. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "../refenc.h"
#include "../tool/certify.h"
#include "../core/text.h"
#include "../io/atomic_write.h"
#include "../io/manifest.h"
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

static int parse_double(double *v, const char *s)
{
    char *end;
    if (s == NULL || *s == '\0')
        return 0;
    *v = strtod(s, &end);
    return *end == '\0' && isfinite(*v) && *v >= 0;
}

static void print_index(FILE *out, const refenc_output_report *r)
{
    size_t rest = r->worst_flat, idx[REFENC_ST_MAX_NDIM];
    for (size_t d = r->ndim; d-- > 0;) {
        idx[d] = r->shape[d] ? rest % r->shape[d] : 0;
        rest = r->shape[d] ? rest / r->shape[d] : 0;
    }
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

/* JSON numbers cannot be inf or NaN: those become strings. */
static json_t *num(double v)
{
    if (isfinite(v))
        return json_real(v);
    return json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

/* A JSON string of any bytes: a path may hold bytes that are not UTF-8,
 * which JSON strings cannot; they are written \xNN as in messages
 * (refenc_text_escape), so the certificate stays valid JSON and is never
 * lost to a file name. */
static json_t *json_text(const char *s)
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

static json_t *case_json(const refenc_case_report *rep)
{
    json_t *outs = json_array();
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const refenc_output_report *r = &rep->outputs[i];
        json_t *o = json_pack("{s:s, s:b, s:s}", "name", r->name, "required", r->required,
                              "status", refenc_output_status_name(r->status));
        if (r->status == REFENC_OUT_PASS || r->status == REFENC_OUT_FAIL) {
            size_t rest = r->worst_flat;
            json_t *idx = json_array();
            size_t tmp[REFENC_ST_MAX_NDIM];
            for (size_t d = r->ndim; d-- > 0;) {
                tmp[d] = r->shape[d] ? rest % r->shape[d] : 0;
                rest = r->shape[d] ? rest / r->shape[d] : 0;
            }
            for (size_t d = 0; d < r->ndim; d++)
                json_array_append_new(idx, json_integer((json_int_t)tmp[d]));
            json_object_set_new(o, "dtype", json_string(refenc_st_dtype_name(r->dtype)));
            json_object_set_new(o, "rtol", num(r->tol.rtol));
            json_object_set_new(o, "atol", num(r->tol.atol));
            json_object_set_new(o, "compared", json_integer((json_int_t)r->compared));
            json_object_set_new(o, "dont_care", json_integer((json_int_t)r->dont_care));
            json_object_set_new(o, "out_of_tolerance", json_integer((json_int_t)r->out_of_tol));
            json_object_set_new(o, "nonfinite", json_integer((json_int_t)r->nonfinite));
            json_object_set_new(o, "max_abs_error", num(r->max_abs));
            json_object_set_new(o, "max_rel_error", num(r->max_rel));
            json_object_set_new(o, "max_ulp_error", num(r->max_ulp));
            json_object_set_new(o, "nmse", num(r->nmse));
            json_object_set_new(o, "worst_index", idx);
            json_object_set_new(o, "worst_got", num(r->worst_got));
            json_object_set_new(o, "worst_want", num(r->worst_want));
        }
        if (r->note[0])
            json_object_set_new(o, "note", json_text(r->note));
        json_array_append_new(outs, o);
    }
    json_t *c = json_pack("{s:s, s:s, s:o}", "case", rep->name, "verdict", rep->pass ? "PASS" : "FAIL",
                          "outputs", outs);
    json_object_set_new(c, "first_divergence",
                        rep->first_divergence >= 0 ? json_string(rep->outputs[rep->first_divergence].name)
                                                   : json_null());
    if (rep->note[0])
        json_object_set_new(c, "note", json_text(rep->note));
    if (!rep->pass) {
        refenc_variant v;
        json_t *d;
        if (rep->diagnosis[0] && refenc_variant_parse(&v, rep->diagnosis)) {
            const refenc_variant_info *info = refenc_variant_get(v);
            d = json_pack("{s:s, s:s, s:s, s:s, s:o, s:I}", "variant", info->name, "symptom", info->symptom,
                          "cause", info->cause, "fix", info->fix, "ratio", num(rep->diagnosis_ratio),
                          "variants_checked", (json_int_t)rep->variants_checked);
        } else {
            d = json_pack("{s:n, s:s, s:I}", "variant", "message", "no known variant matches",
                          "variants_checked", (json_int_t)rep->variants_checked);
        }
        json_object_set_new(c, "diagnosis", d);
    }
    return c;
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

/* --golden and --results must be directories this process can search: one
 * that is missing, that may not be entered, or a symbolic-link loop is an
 * error with the system's reason, never "no results file" for every case. */
static int check_directory(const char *option, const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return cli_error("certify", "%s %s: %s", option, dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return cli_error("certify", "%s %s: %s", option, dir, strerror(ENOTDIR));
    if (faccessat(AT_FDCWD, dir, X_OK, AT_EACCESS) != 0)
        return cli_error("certify", "%s %s: cannot be searched: %s", option, dir, strerror(errno));
    return REFENC_EXIT_OK;
}

/* dir + "/" + rest + name + suffix into a new string, or NULL (out of memory). */
static char *join_path(const char *dir, const char *rest, const char *name, const char *suffix)
{
    const size_t n = strlen(dir) + strlen(rest) + strlen(name) + strlen(suffix) + 2;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s%s%s", dir, rest, name, suffix);
    return p;
}

/* The certificate must never replace an input: the manifest, a golden case
 * or a results file of a selected case (the same file under any name). */
static int refuse_json_over_an_input(const refenc_manifest *m, const certify_args *a)
{
    refenc_error err;
    int st = a->json_path == NULL ? REFENC_OK : refenc_refuse_same_file(a->json_path, m->path, "manifest", &err);
    for (size_t i = 0; i < m->n_cases && st == REFENC_OK && a->json_path != NULL; i++) {
        if (a->case_glob != NULL && fnmatch(a->case_glob, m->cases[i].name, 0) != 0)
            continue;
        char *gpath = join_path(a->golden_dir, "cases/", m->cases[i].file, "");
        char *rpath = join_path(a->results_dir, "", m->cases[i].name, ".safetensors");
        if (gpath == NULL || rpath == NULL)
            st = refenc_error_set(&err, REFENC_ENOMEM, "%s: out of memory", m->cases[i].name);
        if (st == REFENC_OK)
            st = refenc_refuse_same_file(a->json_path, gpath, "golden case", &err);
        if (st == REFENC_OK)
            st = refenc_refuse_same_file(a->json_path, rpath, "results file", &err);
        free(gpath);
        free(rpath);
    }
    return st == REFENC_OK ? REFENC_EXIT_OK : cli_error("certify", "%s", err.message);
}

/* The files of one case, read and checked before anything is compared
 * (docs/certify.md, the trust model): the golden case file must have the
 * sha256 the manifest lists; a results file that does not exist fills
 * missing_note (the case fails), any other reason it cannot be reached is an
 * error. */
static int read_case_files(refenc_st_file *golden, refenc_st_file *results, char missing_note[256],
                           const refenc_manifest_case *mc, const certify_args *a, refenc_error *err)
{
    memset(golden, 0, sizeof *golden);
    memset(results, 0, sizeof *results);
    missing_note[0] = '\0';
    char *gpath = join_path(a->golden_dir, "cases/", mc->file, "");
    char *rpath = join_path(a->results_dir, "", mc->name, ".safetensors");
    struct stat sb;
    int st = REFENC_OK;
    if (gpath == NULL || rpath == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", mc->name);
    if (st == REFENC_OK && (st = refenc_st_read(golden, gpath, err)) == REFENC_OK)
        st = refenc_manifest_verify(mc, golden, err);
    if (st == REFENC_OK) {
        if (stat(rpath, &sb) == 0)
            st = refenc_st_read(results, rpath, err);
        else if (errno == ENOENT)
            snprintf(missing_note, 256, "no results file %.230s", rpath);
        else
            st = refenc_error_set(err, REFENC_EIO, "%s: cannot read: %s", rpath, strerror(errno));
    }
    free(gpath);
    free(rpath);
    return st;
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
            if (!parse_double(&a.opt.tol.rtol, v))
                return cli_error("certify", "--rtol: '%s' is not a finite number >= 0", v);
            a.have_rtol = 1;
        } else if (strcmp(s, "--atol") == 0) {
            if (!parse_double(&a.opt.tol.atol, v))
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

    if (check_directory("--golden", a.golden_dir) || check_directory("--results", a.results_dir))
        return REFENC_EXIT_USAGE;
    refenc_manifest m;
    refenc_error merr;
    if (refenc_manifest_read(&m, a.golden_dir, &merr) != REFENC_OK)
        return cli_error("certify", "%s", merr.message);
    if (refuse_json_over_an_input(&m, &a) != REFENC_EXIT_OK) {
        refenc_manifest_free(&m);
        return REFENC_EXIT_USAGE;
    }

    json_t *report = json_array();
    size_t n_cases = 0, n_pass = 0;
    int rc = REFENC_EXIT_OK;
    printf("refenc certify: golden %s, results %s\n", a.golden_dir, a.results_dir);
    printf("manifest sha256 %s\n\n", m.sha256);
    for (size_t idx = 0; idx < m.n_cases; idx++) {
        const char *name = m.cases[idx].name;
        if (a.case_glob != NULL && fnmatch(a.case_glob, name, 0) != 0)
            continue;
        n_cases++;

        refenc_error err;
        refenc_error_clear(&err);
        refenc_st_file golden, results;
        refenc_case_report rep;
        memset(&rep, 0, sizeof rep);
        char missing[256];
        int st = read_case_files(&golden, &results, missing, &m.cases[idx], &a, &err);
        if (st == REFENC_OK && missing[0] != '\0')
            st = refenc_certify_missing(&rep, &golden, missing, &err);
        else if (st == REFENC_OK)
            st = refenc_certify_case(&rep, &golden, &results, &a.opt, &err);
        if (st != REFENC_OK) {
            rc = cli_error("certify", "%s", err.message);
            json_array_append_new(report, json_pack("{s:s, s:s, s:s}", "case", name, "verdict", "ERROR",
                                                    "note", err.message));
        } else {
            print_case(&rep, a.quiet);
            n_pass += rep.pass;
            if (!rep.pass && rc == REFENC_EXIT_OK)
                rc = REFENC_EXIT_FAIL;
            json_array_append_new(report, case_json(&rep));
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
        json_t *doc = json_pack("{s:s, s:o, s:o, s:s, s:o, s:{s:I, s:I, s:I, s:s}}",
                                "refenc_version", REFENC_VERSION, "golden", json_text(a.golden_dir),
                                "results", json_text(a.results_dir), "manifest_sha256", m.sha256,
                                "cases", report, "summary",
                                "cases", (json_int_t)n_cases, "passed", (json_int_t)n_pass,
                                "failed", (json_int_t)(n_cases - n_pass), "verdict", verdict);
        if (write_json(a.json_path, doc) != REFENC_EXIT_OK)
            rc = REFENC_EXIT_USAGE;
        json_decref(doc);
    } else {
        json_decref(report);
    }
    refenc_manifest_free(&m);
    return rc;
}
