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
#include "../../ref/io/safetensors.h"
#include "../../ref/tool/report.h"
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

/* Parses the heatmap of `output`: every <rect class="c-*"> of every panel,
 * each cell drawn exactly once. */
static void parse_heatmap(heatmap *h, const char *html, const char *output)
{
    char want[256];
    snprintf(want, sizeof want, "<svg class=\"heatmap\"");
    const char *s = html;
    char tag[300];
    snprintf(tag, sizeof tag, "data-output=\"%s\"", output);
    while ((s = strstr(s, want)) != NULL) {
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
    size_t pool_r, pool_c;
    cr_assert_eq(sscanf(strstr(s, "data-pool="), "data-pool=\"%zu %zu\"", &pool_r, &pool_c), 2);
    cr_assert(pool_r == 1 && pool_c == 1, "these outputs are drawn one cell per element");
    h->panels = 0;
    for (const char *p = s; (p = strstr(p, "<g class=\"panel\"")) != NULL && p < svg_end; p++)
        h->panels++;
    h->cls = calloc(h->panels * h->rows * h->cols, 1);
    cr_assert_not_null(h->cls);
    const char *p = s;
    for (size_t k = 0; k < h->panels; k++) {
        p = strstr(p, "<g class=\"panel\"");
        const char *g_end = strstr(p, "</g>");
        unsigned char *panel = h->cls + k * h->rows * h->cols;
        for (const char *r = p; (r = strstr(r, "<rect class=\"c-")) != NULL && r < g_end; r++) {
            char cls[8];
            size_t x, y, w, hh;
            cr_assert_eq(sscanf(r, "<rect class=\"c-%7[a-z]\" x=\"%zu\" y=\"%zu\" width=\"%zu\" height=\"%zu\"", cls,
                                &x, &y, &w, &hh), 5, "unreadable cell: %.80s", r);
            cr_assert(x % h->cell == 0 && y % h->cell == 0 && w % h->cell == 0 && hh == h->cell && w > 0,
                      "cell off the grid: %.80s", r);
            const int c = strcmp(cls, "ok") == 0 ? CELL_OK : strcmp(cls, "hot") == 0 ? CELL_HOT
                        : strcmp(cls, "nan") == 0 ? CELL_NAN : strcmp(cls, "dc") == 0 ? CELL_DC : -1;
            cr_assert(c > 0, "unknown cell class %s", cls);
            const size_t row = y / h->cell;
            for (size_t col = x / h->cell; col < (x + w) / h->cell; col++) {
                cr_assert(row < h->rows && col < h->cols, "cell (%zu, %zu) outside the grid", row, col);
                cr_assert_eq(panel[row * h->cols + col], CELL_NONE, "cell (%zu, %zu) drawn twice", row, col);
                panel[row * h->cols + col] = (unsigned char)c;
            }
        }
        for (size_t i = 0; i < h->rows * h->cols; i++)
            cr_assert_neq(panel[i], CELL_NONE, "panel %zu: cell (%zu, %zu) not drawn", k, i / h->cols, i % h->cols);
        p = g_end;
    }
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

    /* cannot write: a directory in the way, or no such directory */
    snprintf(sub, sizeof sub, "%s/dir.html", tmp);
    cr_assert_eq(mkdir(sub, 0755), 0);
    r = rb_run((const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", sub,
                                     "--case", "ffn_relu", NULL});
    rb_expect_error(&r, 2, "report", "a directory at the report's path",
                    (const char *const[]){"dir.html", "cannot write", NULL});
    rb_result_free(&r);
    cr_assert_not(rb_has_temporary_file(tmp), "a temporary file was left behind");
    cr_assert_eq(rmdir(sub), 0);
    snprintf(sub, sizeof sub, "%s/no/such/report.html", tmp);
    r = rb_run((const char *const[]){"refenc", "report", "--golden", golden_dir(), "--results", tmp, "--html", sub,
                                     "--case", "ffn_relu", NULL});
    rb_expect_error(&r, 2, "report", "no such directory", (const char *const[]){"cannot create", NULL});
    rb_result_free(&r);
}
