/* refenc report: a certification drawn as one self-contained HTML file
 * (ref/tool/report.h; docs/certify.md, "The HTML report"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../refenc.h"
#include "../tool/report.h"
#include "cli.h"
#include "selection.h"

static const char report_usage[] =
    "usage: refenc report --golden DIR --results DIR --html REPORT.html\n"
    "                     [--case GLOB[,GLOB...]]... [--outputs GLOB] [--skip-missing]\n"
    "                     [--rtol X --atol Y] [--heatmaps failing|all] [--full-heatmaps]\n"
    "\n"
    "Certifies the results as 'refenc certify' does and writes one self-contained\n"
    "HTML file (inline SVG, no script, no network), the failing cases and outputs\n"
    "first, under a summary that links them: per case the verdict, the first\n"
    "divergence, the diagnosis and every figure of the JSON certificate; the forward\n"
    "graph with the first diverging output outlined; and per output a histogram of\n"
    "|error| / tolerance against the budget 1 and, for a failing output, a heatmap\n"
    "of it over its last two axes (positions x features, query x key for attention\n"
    "weights; one panel per batch item and head), max-pooled above 64 x 128 cells.\n"
    "\n"
    "options:\n"
    "  --golden DIR        the golden directory (normally golden/)\n"
    "  --results DIR       the directory of results files, one per case\n"
    "  --html FILE         the report to write (atomically)\n"
    "  --case GLOB         only the cases whose name matches GLOB (shell pattern);\n"
    "                      repeatable, and a comma-separated list is several; each\n"
    "                      pattern must match some case (as for certify)\n"
    "  --outputs GLOB      check only the golden outputs matching GLOB (as for certify)\n"
    "  --skip-missing      a case without a results file is SKIP, not FAIL\n"
    "  --rtol X --atol Y   one tolerance for every output instead of the policy\n"
    "  --heatmaps WHICH    'failing' (default): heatmaps of the failing outputs only;\n"
    "                      'all': of every output compared\n"
    "  --full-heatmaps     draw every element: no downsampling of large heatmaps\n"
    "                      (by default a cell is the worst of a block of elements\n"
    "                      above 64 x 128 cells a panel; choose the output with\n"
    "                      --case and --outputs, the file grows with its size)\n"
    "  -h, --help          this help\n"
    "\n"
    "exit codes: 0 every case passed, 1 some case failed, 2 usage or format error\n"
    "(the report is written in all three cases when the golden manifest is readable)\n";

typedef struct {
    refenc_report_options opt;
    cli_selection sel; /* --case, --outputs, --skip-missing: certify's grammar (selection.h) */
    const char *html;
    int have_rtol, have_atol;
} report_args;

/* An option with its value; returns an exit code. */
static int value_option(report_args *a, const char *s, const char *v)
{
    if (strcmp(s, "--golden") == 0)
        a->opt.golden_dir = v;
    else if (strcmp(s, "--results") == 0)
        a->opt.results_dir = v;
    else if (strcmp(s, "--html") == 0)
        a->html = v;
    else if (strcmp(s, "--heatmaps") == 0) {
        if (strcmp(v, "all") != 0 && strcmp(v, "failing") != 0)
            return cli_error("report", "--heatmaps: '%s' is neither 'failing' nor 'all'", v);
        a->opt.heatmaps_all = strcmp(v, "all") == 0;
    } else if (strcmp(s, "--rtol") == 0 || strcmp(s, "--atol") == 0) {
        const int r = s[2] == 'r';
        if (!cli_parse_tolerance(r ? &a->opt.certify.tol.rtol : &a->opt.certify.tol.atol, v))
            return cli_error("report", "%s: '%s' is not a finite number >= 0", s, v);
        *(r ? &a->have_rtol : &a->have_atol) = 1;
    } else
        return cli_error("report", "unknown option '%s' (see 'refenc report --help')", s);
    return REFENC_EXIT_OK;
}

/* Parses argv; *done = 1 after --help. */
static int parse_args(report_args *a, int argc, char **argv, int *done)
{
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int sel_value, rc;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            fputs(report_usage, stdout);
            *done = 1;
            return REFENC_EXIT_OK;
        }
        if (strcmp(s, "--full-heatmaps") == 0) {
            a->opt.full_heatmaps = 1;
            continue;
        }
        const int sel = cli_selection_is_option(s, &sel_value);
        if (sel && !sel_value) {
            cli_selection_option(&a->sel, "report", s, NULL);
            continue;
        }
        if (v == NULL)
            return cli_error("report", "%s needs a value (see 'refenc report --help')", s);
        if ((rc = sel ? cli_selection_option(&a->sel, "report", s, v) : value_option(a, s, v)) != REFENC_EXIT_OK)
            return rc;
        i++;
    }
    if (a->opt.golden_dir == NULL || a->opt.results_dir == NULL || a->html == NULL)
        return cli_error("report", "--golden DIR, --results DIR and --html FILE are required "
                                   "(see 'refenc report --help')");
    if (a->have_rtol != a->have_atol)
        return cli_error("report", "--rtol and --atol go together");
    a->opt.certify.override_tolerance = a->have_rtol;
    a->opt.case_patterns = (const char *const *)a->sel.patterns;
    a->opt.n_case_patterns = a->sel.n_patterns;
    a->opt.outputs_glob = a->sel.outputs_glob;
    a->opt.skip_missing = a->sel.skip_missing;
    return REFENC_EXIT_OK;
}

int cmd_report(int argc, char **argv)
{
    report_args a;
    memset(&a, 0, sizeof a);
    a.opt.version = REFENC_VERSION;
    int done = 0, rc = parse_args(&a, argc, argv, &done);
    if (done || rc != REFENC_EXIT_OK) {
        cli_selection_free(&a.sel);
        return rc;
    }
    refenc_report_summary sum;
    refenc_error err;
    if (refenc_report_write(a.html, &a.opt, &sum, &err) != REFENC_OK) {
        cli_selection_free(&a.sel);
        return cli_error("report", "%s", err.message);
    }
    cli_selection_free(&a.sel);
    if (sum.errors)
        cli_error("report", "%s", sum.first_error.message);
    printf("refenc report: %zu case%s, %zu passed, %zu failed%s", sum.cases, sum.cases == 1 ? "" : "s",
           sum.passed - sum.skipped, sum.cases - sum.passed, sum.errors ? " (some could not be read)" : "");
    if (sum.skipped)
        printf(", %zu skipped", sum.skipped);
    printf("; wrote %s\n", a.html);
    return sum.errors ? REFENC_EXIT_USAGE : sum.failed ? REFENC_EXIT_FAIL : REFENC_EXIT_OK;
}
