/* The HTML report of a certification (`refenc report`, docs/certify.md).
 *
 * Each case of a golden directory is certified as `refenc certify` does
 * (certificate.h), and one self-contained HTML file shows, per case:
 *   - the verdict, the first divergence, the diagnosis, and every figure of
 *     the JSON certificate, each in an element carrying its place in the
 *     certificate (data-path="cases/<case>/outputs/<output>/<key>") and its
 *     value as JSON (data-v), so the page can be checked against the
 *     certificate;
 *   - the forward graph: the case's outputs in forward order, coloured by
 *     status, the first diverging output outlined;
 *   - per output compared, a histogram of r by decade with the budget r = 1
 *     marked, and per failing output (every output compared with
 *     heatmaps_all) a heatmap of r = |got - want| / (atol + rtol |want|)
 *     (the output's element bound: for a float16 or bfloat16 result under
 *     the budget, rtol 0 and atol the budget's max error)
 *     over the output's last two axes (positions x features; query x key for
 *     attention weights and ALiBi biases), one panel per index of the leading
 *     axes (batch item, head).
 * r <= 1 passes (the element test of certify.h); a non-finite result is its
 * own class.  The pictures are inline SVG written here: no script, no
 * external resource, the file opens from disk without a network.
 *
 * Heatmaps are drawn for the failing outputs (every output compared with
 * heatmaps_all), downsampled above 64 x 128 cells a panel, 64 panels or
 * 32768 cells an output by max pooling (a cell is the most severe of its
 * block of elements), unless full_heatmaps.  Inside each panel's <g>, in a
 * <g class="cells" transform="scale(cell)">, the cells of one colour are one
 * <path class="c-ok|c-hot|c-nan|c-dc" fill="#..."> (within tolerance, out
 * of tolerance, non-finite, don't-care) of rectangles "M x y h w v1 h-w z",
 * x the column and y the row of cells, each a run of that colour along a
 * row.  The legend on the page gives each colour with its class and its
 * range of r (<span class="c-hot" style="background:#...">).
 *
 * The page: a summary naming and linking the failing cases and outputs,
 * then the failing cases' sections, then the others; in a section the
 * failing outputs' pictures first; the run's figures and every case's row
 * at the end. */
#ifndef REFENC_REPORT_H
#define REFENC_REPORT_H

#include <stddef.h>

#include "../core/status.h"
#include "certify.h"

typedef struct {
    const char *golden_dir, *results_dir;
    const char *case_glob;          /* NULL: every case of the manifest              */
    const char *const *case_patterns; /* n_case_patterns > 0: the cases any of these    */
    size_t n_case_patterns;         /* matches (case_glob then unused); each must   */
                                    /* match some case (docs/cli.md, the selection)  */
    const char *outputs_glob;       /* certify's --outputs: NULL, every output       */
    int skip_missing;               /* certify's --skip-missing                      */
    refenc_certify_options certify; /* the tolerance override of certify's --rtol/--atol */
    int heatmaps_all;               /* 0: heatmaps of the failing outputs only; 1: of every output compared */
    int full_heatmaps;              /* 1: every element drawn (no downsampling, every panel) */
    const char *version;            /* the certificate's refenc_version              */
} refenc_report_options;

typedef struct {
    size_t cases, passed, failed, errors; /* errors: cases that could not be read  */
    size_t skipped;                       /* SKIP (counted in passed, as certify's
                                             exit code counts them)                  */
    refenc_error first_error;             /* the first such case's message          */
} refenc_report_summary;

/* Certifies the cases and writes the report to html_path atomically (a
 * temporary file in the same directory, flushed to disk, renamed; on error
 * removed, and a file already at html_path is left as it was).  A case that
 * cannot be read is drawn as ERROR with its message and counted in
 * sum->errors; the report is still written.
 * Cases are selected and skipped as refenc certify selects and skips them
 * (case_patterns or case_glob, outputs_glob, skip_missing).
 * Errors: REFENC_EFORMAT or REFENC_EIO (the manifest), REFENC_EINVAL (no case
 * matches the glob, a pattern matches no case, every case selected is SKIP), REFENC_EIO (cannot write html_path), REFENC_ENOMEM. */
int refenc_report_write(const char *html_path, const refenc_report_options *opt,
                        refenc_report_summary *sum, refenc_error *err);

#endif
