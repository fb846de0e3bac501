/* refenc report (ref/tool/report.h): the heatmap of a planted tiling bug
 * (errors in one 16-column block) has its hot cells exactly in that block,
 * read back from the SVG the report wrote; a planted head shows in exactly
 * that head's panels; the page holds every figure of the JSON certificate
 * (`refenc certify --json`) with its exact value; and the program's exit
 * codes, messages and atomic output.  Each check has its negative control. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/io/golden_names.h"
#include "../../ref/io/manifest.h"
#include "../../ref/io/safetensors.h"
#include "../../ref/tool/report.h"
#include "../robustness/fault.h"
#include "../robustness/robust.h"

#define PATH_CAP (2 * RB_PATH_MAX) /* a path in a directory of RB_PATH_MAX */
#define CASE "encoder_pre_alibi_h12" /* D = 48: three 16-column blocks; B = 2, H = 12, L = 7 */

static char golden[RB_PATH_MAX];

static const char *golden_dir(void)
{
    const char *r = getenv("REFENC_SOURCE_ROOT");
    snprintf(golden, sizeof golden, "%s/golden", r && *r ? r : ".");
    return golden;
}

/* An edit of a results tensor: x holds the golden values, shape the shape. */
typedef void (*plant_fn)(double *x, const size_t *shape, size_t ndim, size_t lo, size_t hi);

/* Adds 1e-3 to every element whose last index is in [lo, hi): what a
 * kernel with one wrong tile of columns produces.  The F32 tolerance is
 * 1e-5 + 1.3e-6 |want|, |want| < 4: r = 1e-3 / tol is between 66 and 100. */
static void plant_columns(double *x, const size_t *shape, size_t ndim, size_t lo, size_t hi)
{
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    for (size_t i = 0; i < n; i++)
        if (i % shape[ndim - 1] >= lo && i % shape[ndim - 1] < hi)
            x[i] += 1e-3;
}

/* Adds 1e-3 to every element of heads [lo, hi) (axis 1 of (B, H, L, L)). */
static void plant_heads(double *x, const size_t *shape, size_t ndim, size_t lo, size_t hi)
{
    cr_assert_eq(ndim, 4);
    const size_t per_head = shape[2] * shape[3];
    for (size_t i = 0; i < shape[0] * shape[1] * per_head; i++) {
        const size_t h = i / per_head % shape[1];
        if (h >= lo && h < hi)
            x[i] += 1e-3;
    }
}

/* RESULTS/<case>.safetensors: the golden's outputs `names`, as F32 (so
 * the cells around the plant hold float32 rounding errors, not zeros); the
 * output `planted` edited by plant(lo, hi). */
static void write_results(const char *dir, const char *case_name, const char *const *names, size_t n,
                          const char *planted, plant_fn plant, size_t lo, size_t hi)
{
    char path[PATH_CAP];
    refenc_st_file g;
    refenc_error err;
    snprintf(path, sizeof path, "%s/cases/%s.safetensors", golden_dir(), case_name);
    cr_assert_eq(refenc_st_read(&g, path, &err), REFENC_OK, "%s", err.message);
    refenc_st_entry e[16];
    float *data[16];
    cr_assert(n <= 16);
    for (size_t i = 0; i < n; i++) {
        const refenc_st_tensor *t = refenc_st_find(&g, names[i]);
        cr_assert_not_null(t, "%s has no %s", path, names[i]);
        double *x = malloc(t->numel * sizeof *x);
        data[i] = malloc(t->numel * sizeof *data[i]);
        cr_assert(x && data[i]);
        cr_assert_eq(refenc_st_to_f64(x, &g, t, &err), REFENC_OK, "%s", err.message);
        if (planted && strcmp(planted, names[i]) == 0)
            plant(x, t->shape, t->ndim, lo, hi);
        for (size_t k = 0; k < t->numel; k++)
            data[i][k] = (float)x[k];
        free(x);
        e[i] = (refenc_st_entry){.name = names[i], .dtype = REFENC_ST_F32, .ndim = t->ndim, .data = data[i]};
        memcpy(e[i].shape, t->shape, sizeof e[i].shape);
    }
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, case_name);
    cr_assert_eq(refenc_st_write(path, e, n, NULL, &err), REFENC_OK, "%s", err.message);
    for (size_t i = 0; i < n; i++)
        free(data[i]);
    refenc_st_free(&g);
}

/* The report of one case (through the library), read into memory. */
static char *report(const char *dir, const char *case_name, int heatmaps_all, refenc_report_summary *sum)
{
    char html[PATH_CAP];
    snprintf(html, sizeof html, "%s/report.html", dir);
    refenc_report_options opt = {.golden_dir = golden_dir(), .results_dir = dir, .case_glob = case_name,
                                 .heatmaps_all = heatmaps_all, .version = "test"};
    refenc_error err;
    cr_assert_eq(refenc_report_write(html, &opt, sum, &err), REFENC_OK, "%s", err.message);
    size_t n;
    return (char *)rb_read_file(html, &n);
}

/* ---- the heatmap, read back from the SVG --------------------------------- */

enum { CELL_NONE = 0, CELL_OK, CELL_HOT, CELL_NAN, CELL_DC };

typedef struct {
    size_t rows, cols, cell, panels;
    unsigned char *cls; /* panels x rows x cols: the class drawn there */
} heatmap;

/* Reads one panel's cells: every <path class="c-*"> of its <g class="cells">,
 * each rectangle "Mx yhwv1h-wz" a run of w cells of row y from column x;
 * every cell drawn exactly once.  Returns the end of the panel. */
static const char *parse_panel(unsigned char *panel, const heatmap *h, const char *p)
{
    const char *cells = strstr(p, "<g class=\"cells\" transform=\"scale(");
    cr_assert_not_null(cells, "a panel without its cells: %.80s", p);
    const char *g_end = strstr(cells, "</g>"); /* the cells' group holds only paths */
    cr_assert_not_null(g_end);
    size_t scale;
    cr_assert_eq(sscanf(cells, "<g class=\"cells\" transform=\"scale(%zu)\">", &scale), 1);
    cr_assert_eq(scale, h->cell, "cells scaled by %zu, the cell is %zu px", scale, h->cell);
    for (const char *r = cells; (r = strstr(r, "<path class=\"c-")) != NULL && r < g_end; r++) {
        char cls[8];
        int off = 0;
        cr_assert_eq(sscanf(r, "<path class=\"c-%7[a-z]\" fill=\"#%*6[0-9a-f]\" d=\"%n", cls, &off), 1);
        cr_assert_gt(off, 0, "unreadable path: %.80s", r);
        const int c = strcmp(cls, "ok") == 0 ? CELL_OK : strcmp(cls, "hot") == 0 ? CELL_HOT
                    : strcmp(cls, "nan") == 0 ? CELL_NAN : strcmp(cls, "dc") == 0 ? CELL_DC : -1;
        cr_assert(c > 0, "unknown cell class %s", cls);
        for (const char *d = r + off; *d != '"';) {
            size_t x, y, w, w2;
            int n = 0;
            cr_assert_eq(sscanf(d, "M%zu %zuh%zuv1h-%zuz%n", &x, &y, &w, &w2, &n), 4, "unreadable run: %.40s", d);
            cr_assert(n > 0 && w == w2 && w > 0, "not a rectangle of one row: %.40s", d);
            for (size_t col = x; col < x + w; col++) {
                cr_assert(y < h->rows && col < h->cols, "cell (%zu, %zu) outside the grid", y, col);
                cr_assert_eq(panel[y * h->cols + col], CELL_NONE, "cell (%zu, %zu) drawn twice", y, col);
                panel[y * h->cols + col] = (unsigned char)c;
            }
            d += n;
        }
    }
    for (size_t i = 0; i < h->rows * h->cols; i++)
        cr_assert_neq(panel[i], CELL_NONE, "cell (%zu, %zu) not drawn", i / h->cols, i % h->cols);
    return strstr(g_end + 4, "</g>"); /* the panel's */
}

/* Parses the heatmap of `output`: its panels' cells (rows x cols cells, the
 * output's last two axes pooled by pool_r x pool_c, as the svg says). */
static void parse_pooled(heatmap *h, const char *html, const char *output, size_t *pool_r, size_t *pool_c)
{
    const char *s = html;
    char tag[300];
    snprintf(tag, sizeof tag, "data-output=\"%s\"", output);
    while ((s = strstr(s, "<svg class=\"heatmap\"")) != NULL) {
        const char *end = strchr(s, '>'), *at = strstr(s, tag);
        if (end && at && at < end)
            break;
        s++;
    }
    cr_assert_not_null(s, "no heatmap of %s in the report", output);
    const char *svg_end = strstr(s, "</svg>");
    cr_assert_not_null(svg_end);
    cr_assert_eq(sscanf(strstr(s, "data-rows="), "data-rows=\"%zu\" data-cols=\"%zu\" data-cell=\"%zu\"",
                        &h->rows, &h->cols, &h->cell), 3);
    cr_assert_eq(sscanf(strstr(s, "data-pool="), "data-pool=\"%zu %zu\"", pool_r, pool_c), 2);
    h->rows = (h->rows + *pool_r - 1) / *pool_r, h->cols = (h->cols + *pool_c - 1) / *pool_c;
    h->panels = 0;
    for (const char *p = s; (p = strstr(p, "<g class=\"panel\"")) != NULL && p < svg_end; p++)
        h->panels++;
    h->cls = calloc(h->panels * h->rows * h->cols, 1);
    cr_assert_not_null(h->cls);
    const char *p = s;
    for (size_t k = 0; k < h->panels; k++)
        p = parse_panel(h->cls + k * h->rows * h->cols, h, strstr(p, "<g class=\"panel\""));
}

/* The heatmap of an output drawn one cell per element. */
static void parse_heatmap(heatmap *h, const char *html, const char *output)
{
    size_t pool_r, pool_c;
    parse_pooled(h, html, output, &pool_r, &pool_c);
    cr_assert(pool_r == 1 && pool_c == 1, "these outputs are drawn one cell per element");
}

/* 1 iff the hot cells are exactly the cells of the panels in [p0, p1) (mod
 * period, when period > 0) and columns [c0, c1); else 0, with the first
 * cell that disagrees in why. */
static int hot_exactly(const heatmap *h, size_t period, size_t p0, size_t p1, size_t c0, size_t c1, char *why,
                       size_t cap)
{
    for (size_t k = 0; k < h->panels; k++)
        for (size_t r = 0; r < h->rows; r++)
            for (size_t c = 0; c < h->cols; c++) {
                const size_t pk = period ? k % period : k;
                const int want = pk >= p0 && pk < p1 && c >= c0 && c < c1;
                const int hot = h->cls[(k * h->rows + r) * h->cols + c] == CELL_HOT;
                if (want != hot) {
                    snprintf(why, cap, "panel %zu, row %zu, column %zu is %s", k, r, c,
                             hot ? "hot but outside the plant" : "not hot but planted");
                    return 0;
                }
            }
    return 1;
}

static char tmp[RB_PATH_MAX];
static void setup(void) { rb_tmpdir(tmp); }
static void teardown(void) { rb_tmpdir_remove(tmp); }

TestSuite(report, .init = setup, .fini = teardown);

Test(report, planted_column_block_is_exactly_the_hot_stripe)
{
    static const char *const outs[] = {"out.output"};
    heatmap h;
    char why[160];
    refenc_report_summary sum;

    write_results(tmp, CASE, outs, 1, "out.output", plant_columns, 16, 32);
    char *html = report(tmp, CASE, 0, &sum);
    cr_assert_eq(sum.failed, 1);
    parse_heatmap(&h, html, "out.output");
    cr_assert_eq(h.panels, 2, "one panel per batch item");
    cr_assert_eq(h.rows, 7);
    cr_assert_eq(h.cols, 48);
    cr_assert(hot_exactly(&h, 0, 0, 2, 16, 32, why, sizeof why), "the block [16, 32): %s", why);
    /* negative control: the check rejects a stripe anywhere else */
    cr_assert_not(hot_exactly(&h, 0, 0, 2, 32, 48, why, sizeof why));
    cr_assert_not(hot_exactly(&h, 0, 0, 2, 16, 31, why, sizeof why));
    free(h.cls);
    free(html);

    /* negative control: the next block planted is drawn there, not at 16 */
    write_results(tmp, CASE, outs, 1, "out.output", plant_columns, 32, 48);
    html = report(tmp, CASE, 0, &sum);
    parse_heatmap(&h, html, "out.output");
    cr_assert_not(hot_exactly(&h, 0, 0, 2, 16, 32, why, sizeof why));
    cr_assert(hot_exactly(&h, 0, 0, 2, 32, 48, why, sizeof why), "the block [32, 48): %s", why);
    free(h.cls);
    free(html);
}

Test(report, clean_results_have_no_hot_cell)
{
    static const char *const outs[] = {"out.output"};
    heatmap h;
    char why[160];
    refenc_report_summary sum;
    write_results(tmp, CASE, outs, 1, NULL, NULL, 0, 0);
    char *html = report(tmp, CASE, 1, &sum); /* a passing case: heatmaps only when asked */
    cr_assert_eq(sum.passed, 1);
    parse_heatmap(&h, html, "out.output");
    cr_assert(hot_exactly(&h, 0, 0, 0, 0, 0, why, sizeof why), "%s", why);
    free(h.cls);
    free(html);
    html = report(tmp, CASE, 0, &sum);
    cr_assert_null(strstr(html, "<svg class=\"heatmap\""), "heatmaps of a passing case by default");
    cr_assert_not_null(strstr(html, "<svg class=\"histogram\""));
    free(html);
}

Test(report, planted_head_is_hot_in_its_panels_only)
{
    static const char *const outs[] = {"out.layers.0.self_attn.weights", "out.output"};
    heatmap h;
    char why[160];
    refenc_report_summary sum;
    write_results(tmp, CASE, outs, 2, "out.layers.0.self_attn.weights", plant_heads, 5, 6);
    char *html = report(tmp, CASE, 0, &sum);
    parse_heatmap(&h, html, "out.layers.0.self_attn.weights");
    cr_assert_eq(h.panels, 24, "one panel per batch item and head");
    cr_assert(h.rows == 7 && h.cols == 7, "query x key");
    cr_assert(hot_exactly(&h, 12, 5, 6, 0, 7, why, sizeof why), "head 5: %s", why);
    cr_assert_not(hot_exactly(&h, 12, 4, 5, 0, 7, why, sizeof why)); /* negative control */
    cr_assert_not_null(strstr(html, "rows query, columns key, one panel per batch item and head (b, h)"));
    /* the forward graph outlines the first divergence */
    cr_assert_not_null(strstr(html, "<g class=\"node first-divergence\" data-output=\"out.layers.0.self_attn.weights\""));
    free(h.cls);
    free(html);
}

/* ---- failing first ------------------------------------------------------ */

/* Where `needle` first occurs in html (its offset), or SIZE_MAX. */
static size_t at(const char *html, const char *needle)
{
    const char *p = strstr(html, needle);
    return p ? (size_t)(p - html) : (size_t)-1;
}

/* 1 iff the first output block of the page is a failing one, and the
 * summary at the top links to `output` of `case_name` before any case's
 * section starts. */
static int failing_first(const char *html, const char *case_name, const char *output)
{
    char link[256], block[256];
    snprintf(link, sizeof link, "<a class=\"failing-output\" href=\"#%s/%s\">", case_name, output);
    snprintf(block, sizeof block, "<div class=\"output\" id=\"%s/%s\"><h3>%s <span class=\"badge fail\">", case_name,
             output, output);
    const size_t first_block = at(html, "<div class=\"output\""), first_section = at(html, "<section");
    return at(html, link) < first_section && first_block == at(html, block);
}

Test(report, failing_cases_and_outputs_come_first)
{
    /* ffn_gelu passes and comes first in the manifest; in encoder_pre_alibi_h12
     * the attention weights, earlier in the forward pass, pass, out.output fails */
    static const char *const outs[] = {"out.layers.0.self_attn.weights", "out.output"}, *const ffn[] = {"out.output"};
    write_results(tmp, "ffn_gelu", ffn, 1, NULL, NULL, 0, 0);
    write_results(tmp, CASE, outs, 2, "out.output", plant_columns, 16, 32);
    refenc_report_summary sum;
    char html_path[PATH_CAP];
    snprintf(html_path, sizeof html_path, "%s/report.html", tmp);
    static const char *const both[] = {"ffn_gelu", CASE};
    refenc_report_options opt = {.golden_dir = golden_dir(), .results_dir = tmp, .case_patterns = both,
                                 .n_case_patterns = 2, .heatmaps_all = 1, .version = "test"};
    refenc_error err;
    cr_assert_eq(refenc_report_write(html_path, &opt, &sum, &err), REFENC_OK, "%s", err.message);
    size_t n;
    char *html = (char *)rb_read_file(html_path, &n);
    cr_assert(sum.failed == 1 && sum.passed == 1, "%zu failed, %zu passed", sum.failed, sum.passed);
    cr_assert(failing_first(html, CASE, "out.output"), "the failing output is not first");
    cr_assert_lt(at(html, "<section class=\"case\" id=\"case-" CASE "\""),
                 at(html, "<section class=\"case\" id=\"case-ffn_gelu\""), "the failing case is not first");
    cr_assert_lt(at(html, "data-path=\"cases/" CASE "/outputs/out.output/status\""),
                 at(html, "data-path=\"cases/" CASE "/outputs/out.layers.0.self_attn.weights/status\""),
                 "the failing output's row is not first in the figures");
    free(html);
    /* by default, heatmaps of the failing outputs only; histograms of all */
    opt.heatmaps_all = 0;
    cr_assert_eq(refenc_report_write(html_path, &opt, &sum, &err), REFENC_OK, "%s", err.message);
    html = (char *)rb_read_file(html_path, &n);
    cr_assert_not_null(strstr(html, "<svg class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width="));
    cr_assert_null(strstr(html, "data-output=\"out.layers.0.self_attn.weights\" data-rows="), "a passing output's heatmap");
    cr_assert_not_null(strstr(html, "data-output=\"out.output\" data-rows="), "no heatmap of the failing output");
    cr_assert_not_null(strstr(html, "height=\"168\" data-output=\"out.layers.0.self_attn.weights\""),
                       "no histogram of the passing output");
    free(html);
    /* negative control: the weights planted instead, out.output clean, so
     * the first block is the weights' and the check on out.output fails */
    write_results(tmp, CASE, outs, 2, "out.layers.0.self_attn.weights", plant_heads, 5, 6);
    html = report(tmp, CASE, 1, &sum);
    cr_assert_not(failing_first(html, CASE, "out.output"));
    cr_assert(failing_first(html, CASE, "out.layers.0.self_attn.weights"));
    free(html);
}

/* ---- every figure of the certificate ---------------------------------- */

/* The data-v of the element with data-path = path, unescaped and parsed;
 * NULL if there is none. */
static json_t *html_value(const char *html, const char *path)
{
    char key[1024];
    snprintf(key, sizeof key, "data-path=\"%s\" data-v=\"", path); /* paths hold no character to escape */
    const char *s = strstr(html, key);
    if (s == NULL)
        return NULL;
    s += strlen(key);
    const char *end = strchr(s, '"');
    char *text = malloc((size_t)(end - s) + 1), *t = text;
    static const char *const ent[][2] = {{"&quot;", "\""}, {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&#39;", "'"}};
    while (s < end) {
        size_t k = 0;
        while (k < 5 && strncmp(s, ent[k][0], strlen(ent[k][0])) != 0)
            k++;
        if (k < 5) {
            *t++ = ent[k][1][0];
            s += strlen(ent[k][0]);
        } else {
            *t++ = *s++;
        }
    }
    *t = '\0';
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    free(text);
    return v;
}

/* Checks every leaf of the certificate against the page; returns the number
 * of leaves, and the first that is absent or differs in why. */
static size_t check_leaf(const char *html, const char *path, const json_t *v, size_t *bad, char *why, size_t cap)
{
    json_t *got = html_value(html, path);
    if (got == NULL || !json_equal(got, (json_t *)v)) {
        if ((*bad)++ == 0)
            snprintf(why, cap, "%s: %s in the page", path, got ? "another value" : "absent");
    }
    json_decref(got);
    return 1;
}

static size_t check_certificate(const char *html, const json_t *doc, size_t *bad, char *why, size_t cap)
{
    size_t n = 0, i;
    char path[1024], base[768];
    const char *key;
    json_t *v, *c;
    *bad = 0;
    json_object_foreach((json_t *)doc, key, v) {
        if (strcmp(key, "cases") == 0)
            continue;
        if (json_is_object(v)) {
            const char *k2;
            json_t *v2;
            json_object_foreach(v, k2, v2) {
                snprintf(path, sizeof path, "%s/%s", key, k2);
                n += check_leaf(html, path, v2, bad, why, cap);
            }
        } else {
            n += check_leaf(html, key, v, bad, why, cap);
        }
    }
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "case"));
        json_object_foreach(c, key, v) {
            if (strcmp(key, "outputs") == 0) {
                size_t j;
                json_t *o;
                json_array_foreach(v, j, o) {
                    const char *k2;
                    json_t *v2;
                    json_object_foreach(o, k2, v2) {
                        snprintf(path, sizeof path, "cases/%s/outputs/%s/%s", name,
                                 json_string_value(json_object_get(o, "name")), k2);
                        n += check_leaf(html, path, v2, bad, why, cap);
                    }
                }
            } else if (json_is_object(v)) {
                const char *k2;
                json_t *v2;
                json_object_foreach(v, k2, v2) {
                    snprintf(base, sizeof base, "cases/%s/%s", name, key);
                    snprintf(path, sizeof path, "%s/%s", base, k2);
                    n += check_leaf(html, path, v2, bad, why, cap);
                }
            } else {
                snprintf(path, sizeof path, "cases/%s/%s", name, key);
                n += check_leaf(html, path, v, bad, why, cap);
            }
        }
    }
    return n;
}

Test(report, holds_every_figure_of_the_json_certificate)
{
    /* a known bug (its diagnosis), a pass, a missing file, a malformed one */
    static const char *const ln[] = {"alt.unbiased_variance.out.output"};
    char path[PATH_CAP], html_path[PATH_CAP], json_path[PATH_CAP];
    refenc_st_file g;
    refenc_error err;
    snprintf(path, sizeof path, "%s/cases/layernorm_eps1e-5.safetensors", golden_dir());
    cr_assert_eq(refenc_st_read(&g, path, &err), REFENC_OK);
    const refenc_st_tensor *t = refenc_st_find(&g, ln[0]);
    double *x = malloc(t->numel * sizeof *x);
    cr_assert_eq(refenc_st_to_f64(x, &g, t, &err), REFENC_OK);
    refenc_st_entry e = {.name = "out.output", .dtype = REFENC_ST_F64, .ndim = t->ndim, .data = x};
    memcpy(e.shape, t->shape, sizeof e.shape);
    snprintf(path, sizeof path, "%s/layernorm_eps1e-5.safetensors", tmp);
    cr_assert_eq(refenc_st_write(path, &e, 1, NULL, &err), REFENC_OK);
    free(x);
    refenc_st_free(&g);
    static const char *const outs[] = {"out.output"};
    write_results(tmp, "ffn_relu", outs, 1, NULL, NULL, 0, 0);
    snprintf(path, sizeof path, "%s/activation_relu.safetensors", tmp);
    rb_write_file(path, "garbage", 7);

    snprintf(html_path, sizeof html_path, "%s/report.html", tmp);
    snprintf(json_path, sizeof json_path, "%s/certificate.json", tmp);
    rb_result rc = rb_run((const char *const[]){"refenc", "certify", "--golden", golden_dir(), "--results", tmp,
                                                "--json", json_path, "--quiet", NULL});
    rb_result rr = rb_run((const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp,
                                                "--html", html_path, NULL});
    cr_assert_eq(rc.status, 2, "a malformed results file: exit 2 (%s)", rc.err);
    cr_assert_eq(rr.status, 2, "report exits as certify does (%s)", rr.err);
    cr_assert_not_null(strstr(rr.err, "activation_relu.safetensors"), "%s", rr.err);
    rb_result_free(&rc);
    rb_result_free(&rr);

    json_error_t jerr;
    json_t *doc = json_load_file(json_path, 0, &jerr);
    cr_assert_not_null(doc, "%s", jerr.text);
    size_t n;
    char *html = (char *)rb_read_file(html_path, &n);
    size_t bad;
    char why[256];
    const size_t leaves = check_certificate(html, doc, &bad, why, sizeof why);
    cr_assert_eq(bad, 0, "%zu of %zu figures of the certificate are not in the report; first: %s", bad, leaves, why);
    cr_assert_gt(leaves, 57 * 6, "the certificate's figures were walked (%zu)", leaves);
    cr_assert_not_null(strstr(html, "data-path=\"cases/layernorm_eps1e-5/diagnosis/variant\" "
                                    "data-v=\"&quot;unbiased_variance&quot;\""));

    /* negative control: one figure changed in the page is caught */
    char *p = strstr(html, "data-path=\"cases/layernorm_eps1e-5/outputs/out.output/max_abs_error\" data-v=\"");
    cr_assert_not_null(p);
    p += strlen("data-path=\"cases/layernorm_eps1e-5/outputs/out.output/max_abs_error\" data-v=\"");
    *p = *p == '9' ? '8' : '9';
    check_certificate(html, doc, &bad, why, sizeof why);
    cr_assert_eq(bad, 1, "a changed max_abs_error went unnoticed");
    cr_assert_not_null(strstr(why, "max_abs_error"), "%s", why);
    free(html);
    json_decref(doc);
}

/* ---- the program: exit codes, messages, atomic output ------------------- */

Test(report, exit_codes_messages_and_atomic_output)
{
    static const char *const outs[] = {"out.output"};
    char html[PATH_CAP], sub[PATH_CAP];
    snprintf(html, sizeof html, "%s/report.html", tmp);
    write_results(tmp, "ffn_relu", outs, 1, NULL, NULL, 0, 0);
    write_results(tmp, "ffn_gelu", outs, 1, "out.output", plant_columns, 0, 1);

    rb_result r = rb_run((const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp,
                                               "--html", html, "--case", "ffn_relu", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "1 case, 1 passed, 0 failed"), "%s", r.out);
    rb_result_free(&r);
    r = rb_run((const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                                     "--case", "ffn_*", NULL});
    cr_assert_eq(r.status, 1, "%s", r.err);
    rb_result_free(&r);
    /* --heatmaps all and a tolerance wide enough for the planted 1e-3 */
    r = rb_run((const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                                     "--case", "ffn_[rg]*[uh]", "--heatmaps", "all", "--rtol", "0", "--atol", "2e-3", NULL});
    cr_assert_eq(r.status, 1, "ffn_gelu_tanh has no results: %s", r.out);
    cr_assert_not_null(strstr(r.out, "3 cases, 2 passed, 1 failed"), "%s", r.out);
    size_t len;
    char *page = (char *)rb_read_file(html, &len);
    cr_assert_not_null(strstr(page, "<svg class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\""));
    cr_assert_not_null(strstr(page, "data-path=\"cases/ffn_relu/outputs/out.output/atol\" data-v=\"0.002\""));
    free(page);
    rb_result_free(&r);
    /* --full-heatmaps takes no value: the --case after it is an option (the
     * library's test of the big case checks what it draws) */
    r = rb_run((const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                                     "--full-heatmaps", "--case", "ffn_gelu", NULL});
    cr_assert_eq(r.status, 1, "%s", r.err);
    page = (char *)rb_read_file(html, &len);
    cr_assert_not_null(strstr(r.out, "1 case, 0 passed, 1 failed"), "%s", r.out);
    cr_assert_not_null(strstr(page, "<svg class=\"heatmap\""), "no heatmap of the failing output");
    free(page);
    rb_result_free(&r);
    r = rb_run((const char *const[]){"refenc", "report", "--help", NULL});
    cr_assert(r.status == 0 && strstr(r.out, "usage: refenc report") && r.err[0] == '\0');
    rb_result_free(&r);
    r = rb_run((const char *const[]){"refenc", "report", "-h", NULL});
    cr_assert(r.status == 0 && strstr(r.out, "usage: refenc report") && r.err[0] == '\0');
    rb_result_free(&r);

    /* errors: one message, exit 2, and the report already there untouched */
    rb_write_file(html, "before", 6);
    struct {
        const char *const *args;
        const char *what;
    } bad[] = {
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, NULL}, "required"},
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                               "--heatmaps", "some", NULL}, "'some' is neither"},
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                               "--rtol", "1e-3", NULL}, "go together"},
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                               "--frobnicate", "1", NULL}, "unknown option"},
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                               "--rtol", "-1", "--atol", "0", NULL}, "--rtol: '-1' is not a finite number >= 0"},
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                               "--rtol", "0", "--atol", "inf", NULL}, "--atol: 'inf' is not a finite number >= 0"},
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                               "--atol", "1e-3", NULL}, "--rtol and --atol go together"},
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--html", html, NULL}, "required"},
        {(const char *const[]){"refenc", "report", "--results", tmp, "--html", html, NULL}, "required"},
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", NULL},
         "--html needs a value"},
        {(const char *const[]){"refenc", "report", "--golden", tmp, "--results", tmp, "--html", html, NULL},
         "manifest.json"},
        {(const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", html,
                               "--case", "no_such_case", NULL}, "no golden case matches 'no_such_case'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = rb_run(bad[i].args);
        rb_expect_error(&r, 2, "report", bad[i].what, (const char *const[]){bad[i].what, NULL});
        rb_result_free(&r);
        size_t n;
        char *kept = (char *)rb_read_file(html, &n);
        cr_expect(n == 6 && memcmp(kept, "before", 6) == 0, "%s: the existing report was touched", bad[i].what);
        free(kept);
    }
    cr_assert_not(rb_has_temporary_file(tmp));

    /* cannot write: a directory in the way (refused, never replaced), or no such directory */
    snprintf(sub, sizeof sub, "%s/dir.html", tmp);
    cr_assert_eq(mkdir(sub, 0755), 0);
    r = rb_run((const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", sub,
                                     "--case", "ffn_relu", NULL});
    rb_expect_error(&r, 2, "report", "a directory at the report's path",
                    (const char *const[]){"dir.html: is a directory, not a regular file: refusing to replace it",
                                           NULL});
    rb_result_free(&r);
    cr_assert_not(rb_has_temporary_file(tmp), "a temporary file was left behind");
    cr_assert_eq(rmdir(sub), 0);
    snprintf(sub, sizeof sub, "%s/no/such/report.html", tmp);
    r = rb_run((const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", sub,
                                     "--case", "ffn_relu", NULL});
    rb_expect_error(&r, 2, "report", "no such directory",
                    (const char *const[]){"cannot write into its directory: No such file or directory", NULL});
    rb_result_free(&r);
}

/* ---- every class of cell, pooled outputs, axis names ----------------- */

/* The class of cell (panel, row, col) of a parsed heatmap. */
static int cell_at(const heatmap *h, size_t p, size_t r, size_t c)
{
    return h->cls[(p * h->rows + r) * h->cols + c];
}

Test(report, every_class_of_cell)
{
    /* attention_padding: padded query rows are don't-care; in a results
     * directory whose name needs escaping */
    char dir[RB_PATH_MAX + 64], path[PATH_CAP];
    snprintf(dir, sizeof dir, "%s/a&b<c>'d\"", tmp);
    cr_assert_eq(mkdir(dir, 0755), 0);
    refenc_st_file g;
    refenc_error err;
    snprintf(path, sizeof path, "%s/cases/attention_padding.safetensors", golden_dir());
    cr_assert_eq(refenc_st_read(&g, path, &err), REFENC_OK);
    const refenc_st_tensor *t = refenc_st_find(&g, "out.output"), *dc = refenc_st_find(&g, "dontcare.out.output");
    cr_assert(t && dc);
    const size_t D = t->shape[2];
    double *x = malloc(t->numel * sizeof *x);
    int64_t *m = malloc(t->numel * sizeof *m);
    cr_assert_eq(refenc_st_to_f64(x, &g, t, &err), REFENC_OK);
    cr_assert_eq(refenc_st_to_i64(m, &g, dc, &err), REFENC_OK);
    /* batch item 0, position 0: features 0..3 exact (F64), 4 NaN, 5 +1e-10 (r in (1, 10]: the F64
     * tolerance is 1e-11 + 1e-10 |want|), 6 +1e-8 (r <= 1e3), 7 +1 (r > 1e3); the rest 1e-13 off (r <= 0.1) */
    for (size_t i = 0; i < t->numel; i++)
        x[i] += 1e-13;
    for (size_t f = 0; f < 4; f++)
        x[f] -= 1e-13;
    x[4] = NAN;
    x[5] += 1e-10;
    x[6] += 1e-8;
    x[7] += 1;
    refenc_st_entry e = {.name = "out.output", .dtype = REFENC_ST_F64, .ndim = 3, .data = x};
    memcpy(e.shape, t->shape, sizeof e.shape);
    snprintf(path, sizeof path, "%s/attention_padding.safetensors", dir);
    cr_assert_eq(refenc_st_write(path, &e, 1, NULL, &err), REFENC_OK, "%s", err.message);

    refenc_report_summary sum;
    char *html = report(dir, "attention_padding", 0, &sum);
    heatmap h;
    parse_heatmap(&h, html, "out.output");
    static const int want[8] = {CELL_OK, CELL_OK, CELL_OK, CELL_OK, CELL_NAN, CELL_HOT, CELL_HOT, CELL_HOT};
    for (size_t f = 0; f < 8; f++)
        cr_expect_eq(cell_at(&h, 0, 0, f), want[f], "feature %zu", f);
    const char *fills[] = {"fill=\"#f7fbff\"", "fill=\"#40004b\"", "fill=\"#fdae61\"", "fill=\"#f46d43\"",
                           "fill=\"#a50026\"", "fill=\"#d9d9d9\""}; /* exact, NaN, hot x3, don't-care */
    for (size_t i = 0; i < 6; i++)
        cr_expect_not_null(strstr(html, fills[i]), "no cell drawn with %s", fills[i]);
    size_t n_dc = 0, want_dc = 0;
    for (size_t i = 0; i < t->numel; i++) {
        const size_t p = i / (t->shape[1] * D), r = i / D % t->shape[1], c = i % D;
        want_dc += m[i] != 0;
        n_dc += cell_at(&h, p, r, c) == CELL_DC;
        if (m[i])
            cr_expect_eq(cell_at(&h, p, r, c), CELL_DC, "a don't-care element at [%zu, %zu, %zu] drawn otherwise", p, r, c);
    }
    cr_assert(want_dc > 0 && n_dc == want_dc, "%zu don't-care cells drawn, %zu in the mask", n_dc, want_dc);
    cr_assert_not_null(strstr(html, "a&amp;b&lt;c&gt;&#39;d&quot;"), "the results path escaped");
    cr_assert_null(strstr(html, "a&b<c>"), "the results path unescaped");
    free(h.cls);
    free(html);

    /* a zero tolerance: every difference out, the exact elements still exact */
    char html_path[PATH_CAP];
    snprintf(html_path, sizeof html_path, "%s/zero.html", tmp);
    refenc_report_options opt = {.golden_dir = golden_dir(), .results_dir = dir, .case_glob = "attention_padding",
                                 .certify = {.override_tolerance = 1, .tol = {0, 0}}, .version = "test"};
    cr_assert_eq(refenc_report_write(html_path, &opt, &sum, &err), REFENC_OK, "%s", err.message);
    size_t n;
    html = (char *)rb_read_file(html_path, &n);
    parse_heatmap(&h, html, "out.output");
    for (size_t f = 0; f < 8; f++)
        cr_expect_eq(cell_at(&h, 0, 0, f), f < 4 ? CELL_OK : f == 4 ? CELL_NAN : CELL_HOT, "zero tolerance, feature %zu", f);
    cr_expect_eq(cell_at(&h, 0, 0, 8), CELL_HOT, "1e-13 is out of a zero tolerance");
    free(h.cls);
    free(html);
    free(x);
    free(m);
    refenc_st_free(&g);
    snprintf(path, sizeof path, "%s/attention_padding.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

Test(report, axis_names_by_component)
{
    static const char *const sm[] = {"out.output"}, *const al[] = {"out.slopes", "out.bias"};
    write_results(tmp, "softmax_basic", sm, 1, NULL, NULL, 0, 0);
    write_results(tmp, "alibi_h6", al, 2, NULL, NULL, 0, 0);
    refenc_report_summary sum;
    char *html = report(tmp, "softmax_basic", 1, &sum);
    cr_assert_not_null(strstr(html, "rows row, columns element</p>"));
    free(html);
    html = report(tmp, "alibi_h6", 1, &sum);
    cr_assert_not_null(strstr(html, "columns head</p>"), "the slopes (H)");
    cr_assert_not_null(strstr(html, "rows query, columns key, one panel per head (h)</p>"), "the bias (H, L, L)");
    heatmap h;
    parse_heatmap(&h, html, "out.bias");
    cr_assert_eq(h.panels, 6);
    free(h.cls);
    free(html);
}

/* A golden directory of one made-up case with outputs larger than a panel
 * draws (pooled), more panels than are drawn, and five axes. */
static void big_golden(const char dir[RB_PATH_MAX + 64])
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/cases", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    static double big[300 * 600], many[70 * 2 * 3], deep[32];
    for (size_t i = 0; i < 300 * 600; i++)
        big[i] = (double)(i % 7) - 3.0;
    refenc_st_entry e[3] = {
        {.name = "out.big", .dtype = REFENC_ST_F64, .ndim = 3, .shape = {1, 300, 600}, .data = big},
        {.name = "out.many", .dtype = REFENC_ST_F64, .ndim = 4, .shape = {70, 1, 2, 3}, .data = many},
        {.name = "out.output", .dtype = REFENC_ST_F64, .ndim = 5, .shape = {2, 2, 2, 2, 2}, .data = deep}};
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s}", "format", "refenc-golden", "case", "big", "component", "encoder",
                             "outputs", "[{\"name\": \"out.big\", \"required\": false}, {\"name\": \"out.many\", "
                                        "\"required\": false}, {\"name\": \"out.output\", \"required\": true}]");
    refenc_error err;
    snprintf(path, sizeof path, "%s/cases/big.safetensors", dir);
    cr_assert_eq(refenc_st_write(path, e, 3, meta, &err), REFENC_OK, "%s", err.message);
    json_decref(meta);
    /* the manifest, with the case's sha256 (certify verifies it) */
    size_t n;
    unsigned char *bytes = rb_read_file(path, &n);
    char hex[65], text[256];
    refenc_sha256_hex(hex, bytes, n);
    free(bytes);
    snprintf(text, sizeof text, "{\"cases\": [{\"case\": \"big\", \"file\": \"big.safetensors\", \"sha256\": \"%s\"}]}",
             hex);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    rb_write_file(path, text, strlen(text));
}

/* RESULTS/big.safetensors: the golden out.big edited by edit (columns
 * [lo, hi), or the element lo); zeros for the other outputs. */
static void big_results(const char *gdir, void (*edit)(double *x, size_t lo, size_t hi), size_t lo, size_t hi)
{
    char path[PATH_CAP];
    refenc_st_file g;
    refenc_error err;
    snprintf(path, sizeof path, "%s/cases/big.safetensors", gdir);
    cr_assert_eq(refenc_st_read(&g, path, &err), REFENC_OK);
    static double x[300 * 600];
    cr_assert_eq(refenc_st_to_f64(x, &g, refenc_st_find(&g, "out.big"), &err), REFENC_OK);
    edit(x, lo, hi);
    static const double zeros[70 * 2 * 3];
    refenc_st_entry e[3] = {
        {.name = "out.big", .dtype = REFENC_ST_F64, .ndim = 3, .shape = {1, 300, 600}, .data = x},
        {.name = "out.many", .dtype = REFENC_ST_F64, .ndim = 4, .shape = {70, 1, 2, 3}, .data = zeros},
        {.name = "out.output", .dtype = REFENC_ST_F64, .ndim = 5, .shape = {2, 2, 2, 2, 2}, .data = zeros}};
    snprintf(path, sizeof path, "%s/big.safetensors", tmp);
    cr_assert_eq(refenc_st_write(path, e, 3, NULL, &err), REFENC_OK);
    refenc_st_free(&g);
}

static void big_columns(double *x, size_t lo, size_t hi)
{
    const size_t shape[3] = {1, 300, 600};
    plant_columns(x, shape, 3, lo, hi);
}

static void big_remove(const char *gdir)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/cases/big.safetensors", gdir);
    unlink(path);
    snprintf(path, sizeof path, "%s/cases", gdir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/manifest.json", gdir);
    unlink(path);
    rmdir(gdir);
}

/* The report of the big case, every output's heatmap; full: no downsampling. */
static char *big_report(const char *gdir, int full, const refenc_certify_options *certify)
{
    char html_path[PATH_CAP];
    snprintf(html_path, sizeof html_path, "%s/report.html", tmp);
    refenc_report_options opt = {.golden_dir = gdir, .results_dir = tmp, .heatmaps_all = 1, .full_heatmaps = full,
                                 .version = "test"};
    if (certify)
        opt.certify = *certify;
    refenc_report_summary sum;
    refenc_error err;
    cr_assert_eq(refenc_report_write(html_path, &opt, &sum, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(sum.failed, 1, "out.big fails");
    size_t n;
    return (char *)rb_read_file(html_path, &n);
}

Test(report, pools_large_outputs_and_caps_panels)
{
    char gdir[RB_PATH_MAX + 64];
    snprintf(gdir, sizeof gdir, "%s/g", tmp);
    cr_assert_eq(mkdir(gdir, 0755), 0);
    big_golden(gdir);
    big_results(gdir, big_columns, 256, 512); /* columns [256, 512) of out.big wrong */
    char *html = big_report(gdir, 0, NULL);
    /* 300 x 600 in cells of 5 x 5 elements (at most 64 x 128 cells): 60 x 120
     * cells; elements 256 .. 511 are in cells 51 .. 102 */
    cr_assert_not_null(strstr(html, "each cell is the worst (the largest r) of 5 &times; 5 elements"));
    heatmap h;
    size_t pr, pc;
    char why[160];
    parse_pooled(&h, html, "out.big", &pr, &pc);
    cr_assert(pr == 5 && pc == 5 && h.rows == 60 && h.cols == 120 && h.panels == 1);
    cr_assert(hot_exactly(&h, 0, 0, 1, 51, 103, why, sizeof why), "%s", why);
    cr_assert_not(hot_exactly(&h, 0, 0, 1, 51, 102, why, sizeof why)); /* negative control */
    free(h.cls);
    cr_assert_not_null(strstr(html, "the first 64 of 70 panels"));
    cr_assert_not_null(strstr(html, ">panel 7</text>"), "five axes: panels numbered");
    free(html);
    /* --full-heatmaps: every element, every panel */
    html = big_report(gdir, 1, NULL);
    parse_heatmap(&h, html, "out.big");
    cr_assert(h.rows == 300 && h.cols == 600);
    cr_assert(hot_exactly(&h, 0, 0, 1, 256, 512, why, sizeof why), "%s", why);
    free(h.cls);
    parse_heatmap(&h, html, "out.many");
    cr_assert_eq(h.panels, 70);
    free(h.cls);
    cr_assert_null(strstr(html, "the first 64 of 70 panels"));
    free(html);
    big_remove(gdir);
}

/* One element of out.big, [0, 157, 421], off by 3e-3: under --rtol 0
 * --atol 1e-3, r = 3 there and 0 elsewhere. */
static void big_one(double *x, size_t lo, size_t hi)
{
    (void)lo, (void)hi;
    x[157 * 600 + 421] += 3e-3;
}

Test(report, one_bad_element_stays_visible_when_downsampled)
{
    char gdir[RB_PATH_MAX + 64];
    snprintf(gdir, sizeof gdir, "%s/g", tmp);
    cr_assert_eq(mkdir(gdir, 0755), 0);
    big_golden(gdir);
    big_results(gdir, big_one, 0, 0);
    const refenc_certify_options tol = {.override_tolerance = 1, .tol = {.rtol = 0, .atol = 1e-3}};
    char *html = big_report(gdir, 0, &tol);
    heatmap h;
    size_t pr, pc;
    parse_pooled(&h, html, "out.big", &pr, &pc);
    cr_assert(pr == 5 && pc == 5, "pooled %zu x %zu", pr, pc);
    /* max pooling: the one cell holding [157, 421], (31, 84), is hot, no other */
    for (size_t r = 0; r < h.rows; r++)
        for (size_t c = 0; c < h.cols; c++)
            cr_assert_eq(h.cls[r * h.cols + c] == CELL_HOT, r == 157 / pr && c == 421 / pc,
                         "cell (%zu, %zu): hot %d", r, c, h.cls[r * h.cols + c] == CELL_HOT);
    /* negative control: the mean of r over that block, what mean pooling
     * would draw, is 3 / 25 = 0.12, within tolerance: it would hide the
     * element (a mean-pooling heat_pool, applied by hand, fails this test) */
    double mean = 0;
    for (size_t i = 155; i < 160; i++)
        for (size_t j = 420; j < 425; j++)
            mean += (i == 157 && j == 421 ? 3e-3 : 0) / 1e-3 / (double)(pr * pc);
    cr_assert_lt(mean, 1, "mean pooling would show the block as hot (%g)", mean);
    free(h.cls);
    free(html);
    big_remove(gdir);
}

/* ---- out of memory -------------------------------------------------------- */

typedef struct {
    char html[PATH_CAP];
    refenc_report_options opt;
    refenc_report_summary sum;
    refenc_error err;
    long run, as_case_error;
} oom_ctx;

static int oom_call(void *p)
{
    oom_ctx *c = p;
    return refenc_report_write(c->html, &c->opt, &c->sum, &c->err);
}

/* Each allocation failing in turn: the report is either not written
 * (REFENC_ENOMEM, a message naming it) or written with the case whose
 * certification ran out of memory as ERROR (refenc report then exits 2);
 * never a crash, never a temporary file left. */
static void oom_check(void *p, int st, int failed)
{
    oom_ctx *c = p;
    c->run++;
    if (!failed) {
        cr_expect_eq(st, REFENC_OK, "%s", c->err.message);
        cr_expect(c->sum.failed == 1 && c->sum.errors == 0);
    } else if (st == REFENC_OK) {
        c->as_case_error++;
        cr_expect(c->sum.errors == 1 && c->sum.first_error.status == REFENC_ENOMEM,
                  "allocation %ld failed: a report written without an ERROR case", c->run);
    } else {
        cr_expect_eq(st, REFENC_ENOMEM, "allocation %ld: status %d: %s", c->run, st, c->err.message);
        cr_expect(strstr(c->err.message, "out of memory") != NULL, "%s", c->err.message);
        cr_expect_not(rb_exists(c->html), "allocation %ld: a report written after an error", c->run);
    }
    cr_expect_not(rb_has_temporary_file(tmp), "allocation %ld: a temporary file left", c->run);
    unlink(c->html);
}

Test(report, out_of_memory)
{
    static const char *const outs[] = {"out.output"};
    write_results(tmp, "ffn_gelu", outs, 1, "out.output", plant_columns, 0, 8);
    oom_ctx c = {.opt = {.golden_dir = golden_dir(), .results_dir = tmp, .case_glob = "ffn_gelu", .version = "t"}};
    snprintf(c.html, sizeof c.html, "%s/report.html", tmp);
    const long n = fault_run(oom_call, oom_check, &c, 0);
    cr_assert_gt(n, 10, "the report allocates (%ld)", n);
    cr_assert_gt(c.as_case_error, 0);
    cr_assert_lt(c.as_case_error, n, "some failures are the report's own");
}
