/* refenc report: a certification drawn as one self-contained HTML file
 * (ref/tool/report.h; docs/certify.md, "The HTML report"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../refenc.h"
#include "../tool/report.h"
#include "cli.h"

static const char report_usage[] =
    "usage: refenc report --golden DIR --results DIR --html REPORT.html [--case GLOB]\n"
    "                     [--rtol X --atol Y] [--heatmaps failing|all]\n"
    "\n"
    "Certifies the results as 'refenc certify' does and writes one self-contained\n"
    "HTML file (inline SVG, no script, no network): per case the verdict, the first\n"
    "divergence, the diagnosis and every figure of the JSON certificate; the forward\n"
    "graph with the first diverging output outlined; and per output a heatmap of\n"
    "|error| / tolerance over its last two axes (positions x features, query x key\n"
    "for attention weights; one panel per batch item and head) and a histogram of\n"
    "|error| / tolerance against the budget 1.\n"
    "\n"
    "options:\n"
    "  --golden DIR        the golden directory (normally golden/)\n"
    "  --results DIR       the directory of results files, one per case\n"
    "  --html FILE         the report to write (atomically)\n"
    "  --case GLOB         only the cases whose name matches GLOB (shell pattern)\n"
    "  --rtol X --atol Y   one tolerance for every output instead of the policy\n"
    "  --heatmaps WHICH    'failing' (default): heatmaps for the failing cases only;\n"
    "                      'all': for every case\n"
    "  -h, --help          this help\n"
    "\n"
    "exit codes: 0 every case passed, 1 some case failed, 2 usage or format error\n"
    "(the report is written in all three cases when the golden manifest is readable)\n";

int cmd_report(int argc, char **argv)
{
    refenc_report_options opt = {.version = REFENC_VERSION};
    const char *html = NULL;
    int have_rtol = 0, have_atol = 0;
    for (int i = 1; i < argc; i += 2) { /* every option but --help takes a value */
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            fputs(report_usage, stdout);
            return REFENC_EXIT_OK;
        }
        if (v == NULL)
            return cli_error("report", "%s needs a value (see 'refenc report --help')", s);
        if (strcmp(s, "--golden") == 0)
            opt.golden_dir = v;
        else if (strcmp(s, "--results") == 0)
            opt.results_dir = v;
        else if (strcmp(s, "--html") == 0)
            html = v;
        else if (strcmp(s, "--case") == 0)
            opt.case_glob = v;
        else if (strcmp(s, "--heatmaps") == 0) {
            if (strcmp(v, "all") != 0 && strcmp(v, "failing") != 0)
                return cli_error("report", "--heatmaps: '%s' is neither 'failing' nor 'all'", v);
            opt.heatmaps_all = strcmp(v, "all") == 0;
        } else if (strcmp(s, "--rtol") == 0) {
            if (!cli_parse_tolerance(&opt.certify.tol.rtol, v))
                return cli_error("report", "--rtol: '%s' is not a finite number >= 0", v);
            have_rtol = 1;
        } else if (strcmp(s, "--atol") == 0) {
            if (!cli_parse_tolerance(&opt.certify.tol.atol, v))
                return cli_error("report", "--atol: '%s' is not a finite number >= 0", v);
            have_atol = 1;
        } else
            return cli_error("report", "unknown option '%s' (see 'refenc report --help')", s);
    }
    if (opt.golden_dir == NULL || opt.results_dir == NULL || html == NULL)
        return cli_error("report", "--golden DIR, --results DIR and --html FILE are required "
                                   "(see 'refenc report --help')");
    if (have_rtol != have_atol)
        return cli_error("report", "--rtol and --atol go together");
    opt.certify.override_tolerance = have_rtol;

    refenc_report_summary sum;
    refenc_error err;
    if (refenc_report_write(html, &opt, &sum, &err) != REFENC_OK)
        return cli_error("report", "%s", err.message);
    if (sum.errors)
        cli_error("report", "%s", sum.first_error.message);
    printf("refenc report: %zu case%s, %zu passed, %zu failed%s; wrote %s\n", sum.cases, sum.cases == 1 ? "" : "s",
           sum.passed, sum.cases - sum.passed, sum.errors ? " (some could not be read)" : "", html);
    return sum.errors ? REFENC_EXIT_USAGE : sum.failed ? REFENC_EXIT_FAIL : REFENC_EXIT_OK;
}
