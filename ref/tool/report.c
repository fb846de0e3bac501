#include "report.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../core/alloc.h"
#include "../io/atomic_write.h"
#include "../io/golden_names.h"
#include "../io/safetensors.h"
#include "certificate.h"

/* ---- the classes of an element ---------------------------------------------
 * r = |got - want| / (atol + rtol |want|); an element is out of tolerance
 * when !(|got - want| <= atol + rtol |want|) or got is not finite, as in
 * certify.c.  Its class is the decade of r, k = ceil(log10 r) clamped to
 * [-6, 7] (k <= 0: within tolerance; k = 7: r > 1e6), or one of: */
enum { CL_DONTCARE = -100, CL_EXACT = -99, CL_NONFINITE = 100, K_MIN = -6, K_MAX = 7 };

/* Heatmap colours, from the coolest class to the most severe (a pooled cell
 * takes the most severe of its elements).  Blues within tolerance, darker
 * towards the budget; orange to dark red beyond it. */
enum { BIN_DC, BIN_EXACT, BIN_E3, BIN_E2, BIN_E1, BIN_E0, BIN_HOT1, BIN_HOT3, BIN_HOTX, BIN_NAN, N_BINS };
static const struct {
    const char *color, *cls, *label;
} PALETTE[N_BINS] = {
    {"#d9d9d9", "c-dc", "don't-care"},      {"#f7fbff", "c-ok", "r = 0"},
    {"#c6dbef", "c-ok", "r \xe2\x89\xa4 1e-3"}, {"#6baed6", "c-ok", "r \xe2\x89\xa4 0.01"},
    {"#2171b5", "c-ok", "r \xe2\x89\xa4 0.1"},  {"#08306b", "c-ok", "r \xe2\x89\xa4 1"},
    {"#fdae61", "c-hot", "r \xe2\x89\xa4 10"},  {"#f46d43", "c-hot", "r \xe2\x89\xa4 1e3"},
    {"#a50026", "c-hot", "r > 1e3"},          {"#40004b", "c-nan", "not finite"},
};

static int bin_of(signed char cl)
{
    if (cl == CL_DONTCARE)
        return BIN_DC;
    if (cl == CL_EXACT)
        return BIN_EXACT;
    if (cl == CL_NONFINITE)
        return BIN_NAN;
    if (cl <= -3)
        return BIN_E3;
    if (cl <= 0)
        return BIN_E0 + cl; /* -2, -1, 0 */
    return cl == 1 ? BIN_HOT1 : cl <= 3 ? BIN_HOT3 : BIN_HOTX;
}

static signed char class_of(double got, double want, const refenc_tolerance *tol)
{
    if (!isfinite(got))
        return CL_NONFINITE;
    const double d = fabs(got - want), bound = tol->atol + tol->rtol * fabs(want);
    if (d == 0)
        return CL_EXACT;
    /* r > 1 exactly when d > bound, certify's test: division is correctly
     * rounded and monotonic, and a d above bound is at least the next double,
     * so d / bound >= 1 + 1/m with m < 2^53 bound's integer significand: above
     * 1 + 2^-53, it rounds above 1.  Then log10 r > 0 and k >= 1.  A zero
     * bound (--rtol 0 --atol 0): every difference is out. */
    const double r = bound > 0 ? d / bound : INFINITY;
    const double k = ceil(log10(r));
    return (signed char)(k < K_MIN ? K_MIN : k > K_MAX ? K_MAX : k);
}

/* The class of every element of an output present in the results. */
static int output_classes(signed char *cl, const refenc_st_file *golden, const refenc_st_file *results,
                          const refenc_output_report *r, refenc_error *err)
{
    const refenc_st_tensor *got_t = refenc_st_find(results, r->name), *want_t = refenc_st_find(golden, r->name);
    char dc_name[REFENC_NAME_MAX];
    refenc_name_dontcare(dc_name, sizeof dc_name, NULL, r->name);
    const refenc_st_tensor *dc_t = refenc_st_find(golden, dc_name);
    const size_t n = r->numel;
    double *got = refenc_alloc_array(n, sizeof *got), *want = refenc_alloc_array(n, sizeof *want);
    int64_t *dc = refenc_alloc_array(n, sizeof *dc);
    int st = REFENC_OK;
    if (got == NULL || want == NULL || dc == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for '%s'", results->path, r->name);
    if (st == REFENC_OK)
        st = refenc_st_to_f64(got, results, got_t, err);
    if (st == REFENC_OK)
        st = refenc_st_to_f64(want, golden, want_t, err);
    if (st == REFENC_OK && dc_t != NULL) /* certify checked its shape */
        st = refenc_st_to_i64(dc, golden, dc_t, err);
    for (size_t i = 0; st == REFENC_OK && i < n; i++)
        cl[i] = dc_t != NULL && dc[i] ? CL_DONTCARE : class_of(got[i], want[i], &r->tol);
    free(got);
    free(want);
    free(dc);
    return st;
}

/* ---- HTML text ----------------------------------------------------------- */

static void esc(FILE *o, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs("&quot;", o); break;
        case '\'': fputs("&#39;", o); break;
        default: fputc(*s, o);
        }
    }
}

/* A value of the certificate: data-path (base, or base/key) and data-v (its
 * JSON, exact) on the element, a readable form as its text. */
static void figure_key(FILE *o, const char *tag, const char *base, const char *key, const json_t *v)
{
    char *j = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17));
    fprintf(o, "<%s data-path=\"", tag);
    esc(o, base);
    if (key != NULL) {
        fputc('/', o);
        esc(o, key);
    }
    fputs("\" data-v=\"", o);
    esc(o, j);
    fputs("\">", o);
    if (json_is_real(v)) {
        fprintf(o, "%.4g", json_real_value(v));
    } else if (json_is_string(v)) {
        esc(o, json_string_value(v));
    } else if (json_is_true(v) || json_is_false(v)) {
        fputs(json_is_true(v) ? "yes" : "no", o);
    } else if (json_is_null(v)) {
        fputs("&mdash;", o);
    } else {
        esc(o, j); /* integers, the worst index */
    }
    fprintf(o, "</%s>", tag);
    free(j);
}

/* ---- the heatmap -------------------------------------------------------- */

/* Which outputs get a heatmap (flags): the failing ones, or every one
 * compared; and whether downsampled or element by element. */
enum { MAPS_FAILING = 1, MAPS_ALL = 2, MAPS_FULL = 4 };

/* Above these sizes a heatmap is downsampled (docs/certify.md, "The HTML
 * report"): at most 64 panels, 64 x 128 cells a panel and 32768 cells an
 * output, each cell the most severe of a block of pr x pc elements (max
 * pooling: one element out of tolerance makes its whole cell hot, where a
 * mean would dilute it by the block's size).  A cell costs about 15 bytes
 * of the page in the worst case (noise, no two neighbours alike), so an
 * output costs at most about 0.5 MB; --full-heatmaps (MAPS_FULL) draws
 * every element of every panel. */
#define MAX_PANELS 64
#define MAX_ROWS 64
#define MAX_COLS 128
#define MAX_CELLS 32768
#define PAGE_W 1100

static size_t cdiv(size_t a, size_t b) { return (a + b - 1) / b; }

/* Axis names for an output: query x key for attention weights and ALiBi
 * biases, position x feature otherwise; the leading axes' letters. */
static void axes(const char *component, const refenc_output_report *r, const char **rows, const char **cols,
                 const char **lead0, const char **lead1)
{
    const size_t len = strlen(r->name);
    const int qk = (len >= 8 && strcmp(r->name + len - 8, ".weights") == 0) ||
                   (strcmp(component, "alibi") == 0 && strcmp(r->name, "out.bias") == 0);
    *rows = qk ? "query" : "position";
    *cols = qk ? "key" : "feature";
    if (strcmp(component, "softmax") == 0 || strcmp(component, "activation") == 0) {
        *rows = "row";
        *cols = "element";
    }
    if (r->ndim == 1)
        *cols = strcmp(component, "alibi") == 0 ? "head" : "element";
    *lead0 = r->ndim == 3 && strcmp(component, "alibi") == 0 ? "h" : "b";
    *lead1 = "h";
}

/* The geometry of a heatmap: the output's panels, their pooling into cells, and where each is drawn. */
typedef struct {
    size_t nd, rows, cols, panels;
    size_t pr, pc, R, C, cell; /* each cell the worst of pr x pc elements; R x C cells of cell px */
    size_t pw, ph, drawn, per_b, width, height;
    size_t *px, *py;           /* (drawn) each panel's corner */
} heat_layout;

/* The sizes of the panels and cells, downsampled unless full; 0 when there is nothing to draw. */
static int heat_sizes(heat_layout *h, const refenc_output_report *r, int full)
{
    memset(h, 0, sizeof *h);
    const size_t nd = h->nd = r->ndim;
    h->rows = nd >= 2 ? r->shape[nd - 2] : 1, h->cols = nd >= 1 ? r->shape[nd - 1] : 1;
    h->panels = 1;
    for (size_t d = 0; d + 2 < nd; d++)
        h->panels *= r->shape[d];
    if (h->rows == 0 || h->cols == 0 || h->panels == 0)
        return 0;
    h->drawn = full || h->panels < MAX_PANELS ? h->panels : MAX_PANELS;
    /* large outputs: each cell the most severe of pr x pc elements */
    h->pr = full ? 1 : cdiv(h->rows, MAX_ROWS), h->pc = full ? 1 : cdiv(h->cols, MAX_COLS);
    h->R = cdiv(h->rows, h->pr), h->C = cdiv(h->cols, h->pc);
    while (!full && h->drawn * h->R * h->C > MAX_CELLS) { /* many panels: coarser, the longer axis first */
        *(h->R > h->C ? &h->pr : &h->pc) *= 2;
        h->R = cdiv(h->rows, h->pr), h->C = cdiv(h->cols, h->pc);
    }
    size_t cell = 480 / h->C;
    cell = cell < 3 ? 3 : cell > 16 ? 16 : cell;
    if (h->R * cell > 420)
        cell = 420 / h->R < 3 ? 3 : 420 / h->R;
    h->cell = cell;
    h->pw = h->C * cell, h->ph = h->R * cell;
    h->per_b = nd >= 4 ? r->shape[nd - 3] : 0; /* heads per batch item: a new row of panels */
    return 1;
}

/* Layout: panels left to right, wrapped at the page width. */
static int heat_place(heat_layout *h, const refenc_output_report *r, refenc_error *err)
{
    const size_t gapx = 40, gapy = 44, left = 30, top = 18;
    h->px = refenc_alloc_array(h->drawn, sizeof *h->px), h->py = refenc_alloc_array(h->drawn, sizeof *h->py);
    if (h->px == NULL || h->py == NULL) {
        free(h->px);
        free(h->py);
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory for the heatmap of '%s'", r->name);
    }
    size_t x = left, y = top, width = 0;
    for (size_t p = 0; p < h->drawn; p++) {
        if (p > 0 && (x + h->pw > PAGE_W || (h->per_b && p % h->per_b == 0))) {
            x = left;
            y += h->ph + gapy;
        }
        h->px[p] = x;
        h->py[p] = y;
        x += h->pw + gapx;
        if (x > width)
            width = x;
    }
    h->width = width;
    h->height = y + h->ph + 22;
    return REFENC_OK;
}

/* The caption naming the axes and the pooling, and the svg element's opening tag; *l0 is the panels' letter. */
static void heat_open(FILE *o, const char *component, const refenc_output_report *r, const heat_layout *h,
                      const char **l0)
{
    const char *rname, *cname, *l1;
    axes(component, r, &rname, &cname, l0, &l1);
    fprintf(o, "<p class=\"axes\">|error| / tolerance: rows %s, columns %s", rname, cname);
    if (h->nd >= 3)
        fprintf(o, ", one panel per %s", h->nd >= 4 ? "batch item and head (b, h)"
                                                    : strcmp(*l0, "h") == 0 ? "head (h)" : "batch item (b)");
    if (h->pr > 1 || h->pc > 1)
        fprintf(o, "; downsampled: each cell is the worst (the largest r) of %zu &times; %zu elements, "
                   "<code>--full-heatmaps</code> draws every element", h->pr, h->pc);
    if (h->drawn < h->panels)
        fprintf(o, "; the first %zu of %zu panels", h->drawn, h->panels);
    fputs("</p>\n", o);
    fprintf(o, "<svg class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%zu\" height=\"%zu\" "
               "data-output=\"", h->width, h->height);
    esc(o, r->name);
    fprintf(o, "\" data-rows=\"%zu\" data-cols=\"%zu\" data-cell=\"%zu\" data-pool=\"%zu %zu\" "
               "shape-rendering=\"crispEdges\">\n", h->rows, h->cols, h->cell, h->pr, h->pc);
}

/* The cells of a panel: bins[i*C + j] the most severe bin of the block of
 * pr x pc elements at (i*pr, j*pc) (max pooling; bins are ordered by r, so
 * the most severe bin is the bin of the largest r). */
static void heat_pool(unsigned char *bins, const heat_layout *h, const signed char *base)
{
    for (size_t i = 0; i < h->R; i++)
        for (size_t j = 0; j < h->C; j++) {
            int b = 0;
            for (size_t ii = i * h->pr; ii < (i + 1) * h->pr && ii < h->rows; ii++)
                for (size_t jj = j * h->pc; jj < (j + 1) * h->pc && jj < h->cols; jj++) {
                    const int bb = bin_of(base[ii * h->cols + jj]);
                    b = bb > b ? bb : b;
                }
            bins[i * h->C + j] = (unsigned char)b;
        }
}

/* A panel's cells, in cell units: per bin one path, each run of that bin
 * along a row one rectangle "M x y h w v 1 h -w z". */
static void heat_cells(FILE *o, const heat_layout *h, const unsigned char *bins)
{
    fprintf(o, "<g class=\"cells\" transform=\"scale(%zu)\">", h->cell);
    for (int b = 0; b < N_BINS; b++) {
        int open = 0;
        for (size_t i = 0; i < h->R; i++)
            for (size_t j = 0; j < h->C; j++) {
                if (bins[i * h->C + j] != b || (j > 0 && bins[i * h->C + j - 1] == b))
                    continue;
                size_t w = 1;
                while (j + w < h->C && bins[i * h->C + j + w] == b)
                    w++;
                if (!open++)
                    fprintf(o, "<path class=\"%s\" fill=\"%s\" d=\"", PALETTE[b].cls, PALETTE[b].color);
                fprintf(o, "M%zu %zuh%zuv1h-%zuz", j, i, w, w);
            }
        if (open)
            fputs("\"/>\n", o);
    }
    fputs("</g>", o);
}

/* Panel p: its label, its cells, its frame, and column and row labels every cstep and rstep cells. */
static void heat_panel(FILE *o, const heat_layout *h, const signed char *cl, unsigned char *bins, size_t p,
                       const char *l0, size_t cstep, size_t rstep)
{
    const size_t cell = h->cell;
    fprintf(o, "<g class=\"panel\" transform=\"translate(%zu,%zu)\">", h->px[p], h->py[p]);
    if (h->nd >= 3) {
        fprintf(o, "<text class=\"pl\" x=\"0\" y=\"-5\">");
        if (h->nd == 4)
            fprintf(o, "b=%zu, h=%zu", p / h->per_b, p % h->per_b);
        else if (h->nd > 4)
            fprintf(o, "panel %zu", p);
        else
            fprintf(o, "%s=%zu", l0, p);
        fputs("</text>", o);
    }
    heat_pool(bins, h, cl + p * h->rows * h->cols);
    heat_cells(o, h, bins);
    fprintf(o, "<rect class=\"frame\" x=\"0\" y=\"0\" width=\"%zu\" height=\"%zu\" fill=\"none\" "
               "stroke=\"#737373\"/>", h->pw, h->ph);
    for (size_t j = 0; j < h->C; j += cstep)
        fprintf(o, "<line x1=\"%zu\" y1=\"%zu\" x2=\"%zu\" y2=\"%zu\" stroke=\"#737373\"/>"
                   "<text class=\"tk\" x=\"%zu\" y=\"%zu\">%zu</text>",
                j * cell, h->ph, j * cell, h->ph + 4, j * cell, h->ph + 14, j * h->pc);
    for (size_t i = 0; i < h->R; i += rstep)
        fprintf(o, "<text class=\"tk\" x=\"-4\" y=\"%zu\" text-anchor=\"end\">%zu</text>",
                i * cell + cell / 2 + 4, i * h->pr);
    fputs("</g>\n", o);
}

/* The heatmap of an output's error classes, one panel per leading index. */
static int heatmap(FILE *o, const char *component, const refenc_output_report *r, const signed char *cl,
                   int full, refenc_error *err)
{
    heat_layout h;
    if (!heat_sizes(&h, r, full))
        return REFENC_OK;
    int st = heat_place(&h, r, err);
    if (st != REFENC_OK)
        return st;
    unsigned char *bins = refenc_alloc_array(h.R * h.C, 1); /* one panel's cells */
    if (bins == NULL) {
        free(h.px);
        free(h.py);
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory for the heatmap of '%s'", r->name);
    }
    const char *l0;
    heat_open(o, component, r, &h, &l0);
    /* column and row labels every `step` cells, at least 22 px apart */
    size_t cstep = 1, rstep = 1;
    while (cstep * h.cell < 22)
        cstep *= 2;
    while (rstep * h.cell < 14)
        rstep *= 2;
    for (size_t p = 0; p < h.drawn; p++)
        heat_panel(o, &h, cl, bins, p, l0, cstep, rstep);
    fputs("</svg>\n", o);
    free(bins);
    free(h.px);
    free(h.py);
    return REFENC_OK;
}

/* ---- the histogram ---------------------------------------------------- */

static void histogram(FILE *o, const refenc_output_report *r, const signed char *cl)
{
    /* classes: 0 "r = 0", then k = -6 .. 7 (k = -6: r <= 1e-6; 7: r > 1e6), then non-finite */
    enum { NK = K_MAX - K_MIN + 1, NH = NK + 2 };
    size_t count[NH] = {0}, max = 0;
    for (size_t i = 0; i < r->numel; i++) {
        if (cl[i] == CL_DONTCARE)
            continue;
        const size_t h = cl[i] == CL_EXACT ? 0 : cl[i] == CL_NONFINITE ? NH - 1 : (size_t)(cl[i] - K_MIN + 1);
        if (++count[h] > max)
            max = count[h];
    }
    const size_t bw = 26, left = 44, top = 10, hh = 110, width = left + NH * bw + 10, height = top + hh + 48;
    fprintf(o, "<svg class=\"histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%zu\" height=\"%zu\" "
               "data-output=\"", width, height);
    esc(o, r->name);
    fputs("\">\n", o);
    fprintf(o, "<text class=\"tk\" x=\"%zu\" y=\"%zu\" text-anchor=\"end\">%zu</text>"
               "<text class=\"tk\" x=\"%zu\" y=\"%zu\" text-anchor=\"end\">0</text>",
            left - 4, top + 8, max, left - 4, top + hh);
    for (size_t h = 0; h < NH; h++) {
        const size_t bh = max ? (count[h] * hh + max - 1) / max : 0, x = left + h * bw;
        const int beyond = h == NH - 1 || (h > 0 && (int)h - 1 + K_MIN > 0);
        char label[24];
        if (h == 0)
            snprintf(label, sizeof label, "0");
        else if (h == NH - 1)
            snprintf(label, sizeof label, "NaN");
        else if ((int)h - 1 + K_MIN == K_MAX)
            snprintf(label, sizeof label, ">1e%d", K_MAX - 1);
        else
            snprintf(label, sizeof label, "1e%d", (int)h - 1 + K_MIN);
        fprintf(o, "<rect class=\"bar\" x=\"%zu\" y=\"%zu\" width=\"%zu\" height=\"%zu\" fill=\"%s\" "
                   "data-count=\"%zu\"><title>%s%s: %zu element%s</title></rect>",
                x + 2, top + hh - bh, bw - 4, bh, beyond ? "#e6550d" : "#9e9ac8", count[h],
                h == 0 || h == NH - 1 ? "r = " : "r \xe2\x89\xa4 ", label, count[h], count[h] == 1 ? "" : "s");
        fprintf(o, "<text class=\"tk\" x=\"%zu\" y=\"%zu\" text-anchor=\"middle\">%s</text>\n", x + bw / 2,
                top + hh + 14 + (h % 2) * 11, label);
    }
    /* the budget: r = 1, between the classes r <= 1 and r <= 10 */
    const size_t bx = left + (size_t)(0 - K_MIN + 2) * bw;
    fprintf(o, "<line x1=\"%zu\" y1=\"%zu\" x2=\"%zu\" y2=\"%zu\" stroke=\"#000\" stroke-width=\"2\" "
               "stroke-dasharray=\"4 2\"/><text class=\"tk\" x=\"%zu\" y=\"%zu\">budget r = 1</text>\n",
            bx, top, bx, top + hh, bx + 4, top + 8);
    fprintf(o, "<text class=\"tk\" x=\"%zu\" y=\"%zu\">r = |error| / tolerance (upper edge of each "
               "decade); %zu compared</text>\n</svg>\n", left, height - 2, r->compared);
}

/* ---- the forward graph --------------------------------------------------- */

/* "out.layers.3.norm1" -> layer 3, label "norm1"; other outputs: layer -1. */
static long layer_of(const char *name, const char **label)
{
    const char *s = strncmp(name, "out.", 4) == 0 ? name + 4 : name;
    *label = s;
    if (strncmp(s, "layers.", 7) != 0)
        return -1;
    char *end;
    const long i = strtol(s + 7, &end, 10);
    if (end == s + 7 || *end != '.')
        return -1;
    *label = end + 1;
    return i;
}

static const char *status_fill(refenc_output_status s)
{
    switch (s) {
    case REFENC_OUT_PASS: return "#c7e9c0";
    case REFENC_OUT_NOT_PROVIDED: return "#ffffff";
    default: return "#fcbba1";
    }
}

/* The graph's node sizes and spacing, in pixels. */
enum { GRAPH_NW = 132, GRAPH_NH = 26, GRAPH_GX = 18, GRAPH_ROWH = 58, GRAPH_LEFT = 70 };

/* Places the nodes: a new row for each layer, and after 7 nodes; returns the last row's index. */
static size_t graph_layout(const refenc_case_report *rep, size_t *col, size_t *row, size_t *maxc)
{
    size_t rows = 0;
    long prev = -2;
    const char *label;
    *maxc = 0;
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const long layer = layer_of(rep->outputs[i].name, &label);
        if (i == 0 || layer != prev || col[i - 1] + 1 >= 7) {
            rows += i > 0;
            col[i] = 0;
        } else {
            col[i] = col[i - 1] + 1;
        }
        row[i] = rows;
        *maxc = col[i] + 1 > *maxc ? col[i] + 1 : *maxc;
        prev = layer;
    }
    return rows;
}

/* The arrow into node i at (x, y): from the previous node, or down from the end of the previous row. */
static void graph_arrow(FILE *o, const size_t *col, size_t i, size_t x, size_t y)
{
    const size_t nw = GRAPH_NW, nh = GRAPH_NH, gx = GRAPH_GX, rowh = GRAPH_ROWH, left = GRAPH_LEFT;
    if (i > 0 && col[i] > 0) /* an arrow from the previous node */
        fprintf(o, "<line x1=\"%zu\" y1=\"%zu\" x2=\"%zu\" y2=\"%zu\" stroke=\"#525252\"/>"
                   "<polygon points=\"%zu,%zu %zu,%zu %zu,%zu\" fill=\"#525252\"/>",
                x - gx, y + nh / 2, x - 5, y + nh / 2, x, y + nh / 2, x - 6, y + nh / 2 - 4, x - 6,
                y + nh / 2 + 4);
    else if (i > 0) { /* down from the end of the previous row */
        const size_t x0 = left + col[i - 1] * (nw + gx) + nw / 2, y0 = y - rowh + nh;
        fprintf(o, "<polyline points=\"%zu,%zu %zu,%zu %zu,%zu %zu,%zu\" fill=\"none\" stroke=\"#525252\"/>"
                   "<polygon points=\"%zu,%zu %zu,%zu %zu,%zu\" fill=\"#525252\"/>",
                x0, y0, x0, y0 + 14, x + nw / 2, y0 + 14, x + nw / 2, y - 1, x + nw / 2, y, x + nw / 2 - 4,
                y - 6, x + nw / 2 + 4, y - 6);
    }
}

/* Node i at (x, y): a box filled by its status, its label, and the first divergence marked. */
static void graph_node(FILE *o, const refenc_case_report *rep, size_t i, size_t x, size_t y, const char *label)
{
    const size_t nw = GRAPH_NW, nh = GRAPH_NH;
    const refenc_output_report *r = &rep->outputs[i];
    const int first = (int)i == rep->first_divergence;
    fprintf(o, "<g class=\"node%s\" data-output=\"", first ? " first-divergence" : "");
    esc(o, r->name);
    fprintf(o, "\"><title>");
    esc(o, r->name);
    fprintf(o, ": %s</title><rect x=\"%zu\" y=\"%zu\" width=\"%zu\" height=\"%zu\" rx=\"4\" fill=\"%s\" "
               "stroke=\"%s\" stroke-width=\"%d\"%s/>",
            refenc_output_status_name(r->status), x, y, nw, nh, status_fill(r->status),
            first ? "#000" : "#737373", first ? 3 : 1,
            r->status == REFENC_OUT_NOT_PROVIDED || r->status == REFENC_OUT_MISSING ? " stroke-dasharray=\"4 3\""
                                                                                   : "");
    fprintf(o, "<text x=\"%zu\" y=\"%zu\" text-anchor=\"middle\">", x + nw / 2, y + 17);
    esc(o, label);
    fputs("</text>", o);
    if (first)
        fprintf(o, "<text class=\"fd\" x=\"%zu\" y=\"%zu\" text-anchor=\"middle\">first divergence</text>",
                x + nw / 2, y + nh + 12);
    fputs("</g>\n", o);
}

/* The case's outputs as a graph of nodes in forward order, one row per layer. */
static int graph(FILE *o, const refenc_case_report *rep, refenc_error *err)
{
    const size_t nw = GRAPH_NW, gx = GRAPH_GX, rowh = GRAPH_ROWH, left = GRAPH_LEFT, n = rep->n_outputs;
    size_t *col = refenc_alloc_array(n, sizeof *col), *row = refenc_alloc_array(n, sizeof *row);
    if (col == NULL || row == NULL) {
        free(col);
        free(row);
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory for the graph of '%s'", rep->name);
    }
    size_t maxc;
    const size_t rows = graph_layout(rep, col, row, &maxc);
    const size_t width = left + maxc * (nw + gx), height = (rows + 1) * rowh + 6;
    fprintf(o, "<svg class=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%zu\" height=\"%zu\">\n", width,
            height);
    for (size_t i = 0; i < n; i++) {
        const char *label;
        const long layer = layer_of(rep->outputs[i].name, &label);
        const size_t x = left + col[i] * (nw + gx), y = 8 + row[i] * rowh;
        if (col[i] == 0 && layer >= 0)
            fprintf(o, "<text class=\"tk\" x=\"4\" y=\"%zu\">layer %ld</text>", y + 17, layer);
        graph_arrow(o, col, i, x, y);
        graph_node(o, rep, i, x, y, label);
    }
    fputs("</svg>\n", o);
    free(col);
    free(row);
    return REFENC_OK;
}

/* ---- a case ------------------------------------------------------------ */

/* The keys of an output in the certificate, in the order of docs/certify.md;
 * keys not listed here (a later version's) follow, in the certificate's order. */
static const char *const OUTPUT_KEYS[] = {
    "name", "required", "status", "dtype", "rtol", "atol", "compared", "dont_care", "out_of_tolerance",
    "nonfinite", "max_abs_error", "max_rel_error", "max_ulp_error", "nmse", "worst_index", "worst_got",
    "worst_want", "note"};
#define N_OUTPUT_KEYS (sizeof OUTPUT_KEYS / sizeof OUTPUT_KEYS[0])

static int known_key(const char *k)
{
    for (size_t i = 0; i < N_OUTPUT_KEYS; i++)
        if (strcmp(k, OUTPUT_KEYS[i]) == 0)
            return 1;
    return 0;
}

/* 1 iff an output of the certificate fails: "FAIL", "FAIL (shape)", "FAIL (missing)". */
static int json_output_fails(const json_t *out)
{
    const char *st = json_string_value(json_object_get(out, "status"));
    return st != NULL && strncmp(st, "FAIL", 4) == 0;
}

/* An output's row of the figures table: the known keys, then the extra ones. */
static void figures_row(FILE *o, const char *case_path, const json_t *out, const json_t *extra)
{
    char base[1024];
    snprintf(base, sizeof base, "%s/outputs/%s", case_path, json_string_value(json_object_get(out, "name")));
    const char *st = json_string_value(json_object_get(out, "status"));
    fprintf(o, "<tr class=\"%s\">", st && strcmp(st, "PASS") == 0 ? "pass" : json_output_fails(out) ? "fail" : "np");
    for (size_t k = 0; k < N_OUTPUT_KEYS + json_array_size(extra); k++) {
        const char *kk = k < N_OUTPUT_KEYS ? OUTPUT_KEYS[k] : json_string_value(json_array_get(extra, k - N_OUTPUT_KEYS));
        const json_t *val = json_object_get(out, kk);
        if (val != NULL)
            figure_key(o, "td", base, kk, val);
        else
            fputs("<td></td>", o);
    }
    fputs("</tr>\n", o);
}

static void figures_table(FILE *o, const char *case_path, const json_t *outputs)
{
    json_t *extra = json_array(); /* keys of no known column, in first-seen order */
    size_t i, k;
    json_t *out, *v;
    const char *key;
    json_array_foreach(outputs, i, out) {
        json_object_foreach((json_t *)out, key, v) {
            int seen = known_key(key);
            for (k = 0; k < json_array_size(extra); k++)
                seen |= strcmp(json_string_value(json_array_get(extra, k)), key) == 0;
            if (!seen)
                json_array_append_new(extra, json_string(key));
        }
    }
    fputs("<div class=\"scroll\"><table class=\"figures\">\n<tr>", o);
    for (k = 0; k < N_OUTPUT_KEYS; k++)
        fprintf(o, "<th>%s</th>", OUTPUT_KEYS[k]);
    json_array_foreach(extra, k, v) {
        fputs("<th>", o);
        esc(o, json_string_value(v));
        fputs("</th>", o);
    }
    fputs("</tr>\n", o);
    for (int failing = 1; failing >= 0; failing--) /* the failing outputs' rows first */
        json_array_foreach(outputs, i, out)
            if (json_output_fails(out) == failing)
                figures_row(o, case_path, out, extra);
    fputs("</table></div>\n", o);
    json_decref(extra);
}

/* The case's own figures (all but its outputs), diagnosis included. */
static void case_figures(FILE *o, const char *case_path, const json_t *c)
{
    fputs("<table class=\"case-figures\">\n", o);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)c, key, v) {
        if (strcmp(key, "outputs") == 0 || strcmp(key, "case") == 0)
            continue;
        if (json_is_object(v)) { /* the diagnosis */
            const char *k2;
            json_t *v2;
            char base[1024];
            snprintf(base, sizeof base, "%s/%s", case_path, key);
            json_object_foreach(v, k2, v2) {
                fputs("<tr><th>", o);
                esc(o, key);
                fputs(": ", o);
                esc(o, k2);
                fputs("</th>", o);
                figure_key(o, "td", base, k2, v2);
                fputs("</tr>\n", o);
            }
            continue;
        }
        fputs("<tr><th>", o);
        esc(o, key);
        fputs("</th>", o);
        figure_key(o, "td", case_path, key, v);
        fputs("</tr>\n", o);
    }
    fputs("</table>\n", o);
}

static const char *badge(const char *verdict)
{
    if (strcmp(verdict, "PASS") == 0 || strcmp(verdict, "XPASS") == 0)
        return "pass";
    return strcmp(verdict, "FAIL") == 0 ? "fail" : strcmp(verdict, "XFAIL") == 0 ? "xfail" : "error";
}

/* The case's heading: its name, its verdict, and what it is (the golden's
 * component and description). */
static void case_heading(FILE *o, const json_t *c, const refenc_st_file *golden, const char *path)
{
    const char *name = json_string_value(json_object_get(c, "case"));
    const char *verdict = json_string_value(json_object_get(c, "verdict"));
    fputs("<section class=\"case\" id=\"case-", o);
    esc(o, name);
    fputs("\">\n<h2>", o);
    figure_key(o, "span", path, "case", json_object_get(c, "case"));
    fprintf(o, " <span class=\"badge %s\">", badge(verdict));
    esc(o, verdict);
    fputs("</span></h2>\n", o);
    const char *desc = golden ? refenc_st_metadata(golden, "description") : NULL;
    const char *component = golden ? refenc_st_metadata(golden, "component") : NULL;
    if (desc != NULL) {
        fputs("<p class=\"desc\">", o);
        esc(o, component);
        fputs(": ", o);
        esc(o, desc);
        fputs("</p>\n", o);
    }
    const char *fd = json_string_value(json_object_get(c, "first_divergence"));
    const char *dv = json_string_value(json_object_get(json_object_get(c, "diagnosis"), "variant"));
    if (fd != NULL || dv != NULL) { /* in words here; the figures follow the pictures */
        fputs("<p class=\"desc\">", o);
        if (fd != NULL) {
            fputs("first divergence: ", o);
            esc(o, fd);
        }
        if (dv != NULL) {
            fputs(fd ? "; diagnosis: " : "diagnosis: ", o);
            esc(o, dv);
        }
        fputs("</p>\n", o);
    }
}

/* Output i of the case `name`, compared: its badge, its heatmap (when
 * draw_maps) and its histogram. */
static int output_block(FILE *o, const char *name, const refenc_case_report *rep, size_t i,
                        const refenc_st_file *golden, const refenc_st_file *results, int draw_maps,
                        refenc_error *err)
{
    const refenc_output_report *r = &rep->outputs[i];
    const char *component = golden ? refenc_st_metadata(golden, "component") : NULL;
    signed char *cl = refenc_alloc_array(r->numel, 1);
    if (cl == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for '%s'", results->path, r->name);
    int st = output_classes(cl, golden, results, r, err);
    if (st == REFENC_OK) {
        fputs("<div class=\"output\" id=\"", o);
        esc(o, name);
        fputc('/', o);
        esc(o, r->name);
        fprintf(o, "\"><h3>");
        esc(o, r->name);
        fprintf(o, " <span class=\"badge %s\">%s</span>", r->status == REFENC_OUT_PASS ? "pass" : "fail",
                refenc_output_status_name(r->status));
        fprintf(o, "%s</h3>\n", (int)i == rep->first_divergence ? " <span class=\"fdl\">first divergence</span>" : "");
        if ((draw_maps & MAPS_ALL) || ((draw_maps & MAPS_FAILING) && r->status == REFENC_OUT_FAIL))
            st = heatmap(o, component ? component : "", r, cl, (draw_maps & MAPS_FULL) != 0, err);
        histogram(o, r, cl);
        fputs("</div>\n", o);
    }
    free(cl);
    return st;
}

/* One case's section: its figures, its graph, and per output compared its
 * pictures (heatmaps when draw_maps). */
static int case_section(FILE *o, const json_t *c, const refenc_case_report *rep, const refenc_st_file *golden,
                        const refenc_st_file *results, int draw_maps, refenc_error *err)
{
    const char *name = json_string_value(json_object_get(c, "case"));
    char path[512];
    snprintf(path, sizeof path, "cases/%s", name);
    case_heading(o, c, golden, path);
    if (rep == NULL) { /* the case could not be read */
        case_figures(o, path, c);
        fputs("</section>\n", o);
        return REFENC_OK;
    }
    /* the pictures first, the failing outputs' before the others': what a
     * reader looks for after a FAIL is on the first screen */
    int st = REFENC_OK;
    for (int failing = 1; failing >= 0; failing--)
        for (size_t i = 0; i < rep->n_outputs && st == REFENC_OK; i++) {
            const refenc_output_status s = rep->outputs[i].status;
            if ((s == REFENC_OUT_FAIL) == failing && (s == REFENC_OUT_PASS || s == REFENC_OUT_FAIL))
                st = output_block(o, name, rep, i, golden, results, draw_maps, err);
        }
    if (st == REFENC_OK)
        st = graph(o, rep, err);
    if (st == REFENC_OK) {
        figures_table(o, path, json_object_get(c, "outputs"));
        case_figures(o, path, c);
    }
    fputs("</section>\n", o);
    return st;
}

/* ---- the page ------------------------------------------------------------- */

static const char STYLE[] =
    "body{font:14px/1.4 sans-serif;margin:16px 24px;color:#111;background:#fff}"
    "h1{font-size:20px}h2{font-size:17px;margin:28px 0 6px;border-top:1px solid #bbb;padding-top:10px}"
    "h3{font-size:14px;margin:14px 0 2px}table{border-collapse:collapse;margin:6px 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;font-size:12px;white-space:nowrap}"
    "th{background:#f0f0f0}.scroll{overflow-x:auto}"
    ".badge{padding:1px 6px;border-radius:3px;color:#fff;font-size:12px}"
    ".badge.pass{background:#1b7837}.badge.fail{background:#b2182b}.badge.error{background:#542788}"
    ".badge.xfail{background:#b35806}"
    "tr.fail td{background:#fff5f0}.desc,.axes{color:#444;margin:2px 0}"
    ".fdl{color:#b2182b;font-size:12px}svg text{font:11px sans-serif}svg text.tk{font-size:10px;fill:#444}"
    "svg text.fd{font-size:10px;fill:#b2182b}svg{display:block;margin:4px 0}"
    ".legend span{display:inline-block;width:14px;height:12px;margin:0 4px 0 12px;vertical-align:middle;"
    "border:1px solid #999}";

/* What the run's verdict does not rule out (the certificate's summary),
 * or that the golden stores no variants for these cases. */
static void not_ruled_out_note(FILE *o, const json_t *summary)
{
    const json_t *nro = json_object_get(summary, "not_ruled_out"), *v;
    size_t i;
    if (json_integer_value(json_object_get(summary, "cases_with_variants")) == 0) {
        fputs("<p class=\"known-bugs\">The golden stores no bug variants for these cases: none can be named, "
              "and none is ruled out beyond the budgets.</p>\n", o);
        return;
    }
    json_array_foreach(nro, i, v) {
        fputs("<p class=\"known-bugs\">This verdict does not rule out ", o);
        esc(o, json_string_value(json_object_get(v, "variant")));
        fprintf(o, ": its effect on these cases is at most %.2g budgets; only cases designed to show it, or a "
                "wider dtype, can.</p>\n", json_number_value(json_object_get(v, "largest_effect")));
    }
}

/* A case's closest variant with its distance, and the variants it does not rule out. */
static void variant_cells(FILE *o, const json_t *c)
{
    const json_t *near = json_object_get(c, "closest_variant"), *v;
    size_t i;
    if (json_is_object(near)) {
        esc(o, json_string_value(json_object_get(near, "variant")));
        fprintf(o, " (%.3g budgets)", json_number_value(json_object_get(near, "distance")));
    } else if (json_integer_value(json_object_get(c, "variants_stored")) == 0 && json_object_get(c, "outputs")) {
        fputs("none stored", o);
    }
    fputs("</td><td>", o);
    json_array_foreach(json_object_get(c, "not_ruled_out"), i, v) {
        fputs(i ? ", " : "", o);
        esc(o, json_string_value(json_object_get(v, "variant")));
    }
}

/* The run's figures: where the golden and the results are, the summary and the selection. */
static void run_table(FILE *o, const json_t *doc)
{
    fputs("<h2 id=\"run\">The run</h2>\n<table class=\"summary\">\n", o);
    static const char *const top[] = {"refenc_version", "golden", "results", "manifest_sha256"};
    for (size_t i = 0; i < 4; i++) {
        fprintf(o, "<tr><th>%s</th>", top[i]);
        figure_key(o, "td", top[i], NULL, json_object_get(doc, top[i]));
        fputs("</tr>\n", o);
    }
    const char *key;
    json_t *v;
    static const char *const groups[] = {"summary", "selection"};
    for (size_t g = 0; g < 2; g++)
        json_object_foreach(json_object_get(doc, groups[g]), key, v) {
            fprintf(o, "<tr><th>%s: ", groups[g]);
            esc(o, key);
            fputs("</th>", o);
            figure_key(o, "td", groups[g], key, v);
            fputs("</tr>\n", o);
        }
    fputs("</table>\n", o);
}

/* One row per case: its verdict, first divergence, diagnosis and variants. */
static void cases_table(FILE *o, const json_t *doc)
{
    fputs("<table class=\"cases\"><tr><th>case</th><th>verdict</th><th>first divergence</th>"
          "<th>diagnosis</th><th>closest known variant</th><th>not ruled out</th></tr>\n", o);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "case"));
        const char *verdict = json_string_value(json_object_get(c, "verdict"));
        const json_t *fd = json_object_get(c, "first_divergence");
        const json_t *dv = json_object_get(json_object_get(c, "diagnosis"), "variant");
        fputs("<tr><td><a href=\"#case-", o);
        esc(o, name);
        fputs("\">", o);
        esc(o, name);
        fprintf(o, "</a></td><td><span class=\"badge %s\">%s</span></td><td>", badge(verdict), verdict);
        esc(o, json_string_value(fd));
        fputs("</td><td>", o);
        esc(o, json_string_value(dv));
        fputs("</td><td>", o);
        variant_cells(o, c);
        fputs("</td></tr>\n", o);
    }
    fputs("</table>\n", o);
}

/* A failing case in the summary at the top: a link to it, its verdict, its
 * first divergence and diagnosis, and a link to each failing output. */
static void failing_item(FILE *o, const json_t *c)
{
    const char *name = json_string_value(json_object_get(c, "case"));
    const char *verdict = json_string_value(json_object_get(c, "verdict"));
    const char *fd = json_string_value(json_object_get(c, "first_divergence"));
    const char *dv = json_string_value(json_object_get(json_object_get(c, "diagnosis"), "variant"));
    fputs("<li><a href=\"#case-", o);
    esc(o, name);
    fputs("\">", o);
    esc(o, name);
    fprintf(o, "</a> <span class=\"badge %s\">%s</span>", badge(verdict), verdict);
    if (fd != NULL) {
        fputs(" first divergence ", o);
        esc(o, fd);
    }
    if (dv != NULL) {
        fputs("; diagnosis ", o);
        esc(o, dv);
    }
    size_t j, n = 0;
    json_t *out;
    json_array_foreach(json_object_get(c, "outputs"), j, out) {
        if (!json_output_fails(out))
            continue;
        const char *oname = json_string_value(json_object_get(out, "name"));
        fputs(n++ ? ", " : "; failing outputs: ", o);
        fputs("<a class=\"failing-output\" href=\"#", o);
        esc(o, name);
        fputc('/', o);
        esc(o, oname);
        fputs("\">", o);
        esc(o, oname);
        fputs("</a>", o);
    }
    fputs("</li>\n", o);
}

/* The top of the page: the verdict in one line, the failing cases and
 * outputs with links, and the heatmap legend. */
static void page_top(FILE *o, const json_t *doc)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<title>refenc certification report</title><style>", o);
    fputs(STYLE, o);
    fputs("</style></head><body>\n<h1>refenc certification report</h1>\n", o);
    const json_t *cases = json_object_get(doc, "cases"), *c;
    size_t i, failing = 0;
    json_array_foreach(cases, i, c) {
        const char *v = json_string_value(json_object_get(c, "verdict"));
        failing += strcmp(v, "FAIL") == 0 || strcmp(v, "ERROR") == 0;
    }
    fprintf(o, "<p class=\"verdict\">%zu case%s, %zu failing (FAIL or ERROR); failing cases first, and in each "
               "case its failing outputs first. <a href=\"#run\">The run</a> and every case's row are at the "
               "end.</p>\n", json_array_size(cases), json_array_size(cases) == 1 ? "" : "s", failing);
    if (failing) {
        fputs("<ul class=\"failing\">\n", o);
        json_array_foreach(cases, i, c) {
            const char *v = json_string_value(json_object_get(c, "verdict"));
            if (strcmp(v, "FAIL") == 0 || strcmp(v, "ERROR") == 0)
                failing_item(o, c);
        }
        fputs("</ul>\n", o);
    }
    fputs("<p class=\"legend\">heatmap cells, r = |got &minus; want| / (atol + rtol |want|), "
          "out of tolerance when r &gt; 1:", o);
    for (int b = 0; b < N_BINS; b++)
        fprintf(o, "<span class=\"%s\" style=\"background:%s\"></span>%s", PALETTE[b].cls, PALETTE[b].color,
                PALETTE[b].label);
    fputs("</p>\n", o);
}

/* The end of the page: the run's figures, what the verdict does not rule
 * out, and every case's row. */
static void page_foot(FILE *o, const json_t *doc)
{
    run_table(o, doc);
    not_ruled_out_note(o, json_object_get(doc, "summary"));
    cases_table(o, doc);
    fputs("</body></html>\n", o);
}

/* The page's text between the cases: page_top or page_foot, in memory. */
static char *page_part(void (*part)(FILE *, const json_t *), const json_t *doc, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (f == NULL)
        return NULL;
    part(f, doc);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The case sections, failing cases first: body[0] the failing ones, body[1] the others. */
typedef struct {
    char *text[2];
    size_t len[2];
    FILE *o[2];
} report_body;

/* Writes the top, the failing cases, the others and the foot into html_path atomically (io/atomic_write.h). */
static int write_atomic(const char *html_path, const json_t *doc, const report_body *b, refenc_error *err)
{
    size_t head_len = 0, foot_len = 0;
    char *head = page_part(page_top, doc, &head_len), *foot = page_part(page_foot, doc, &foot_len);
    int st = REFENC_OK;
    if (head == NULL || foot == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", html_path);
    refenc_atomic_file a;
    if (st == REFENC_OK)
        st = refenc_atomic_open(&a, html_path, err);
    if (st == REFENC_OK)
        st = refenc_atomic_write(&a, head, head_len, err);
    for (int k = 0; k < 2 && st == REFENC_OK; k++)
        st = refenc_atomic_write(&a, b->text[k], b->len[k], err);
    if (st == REFENC_OK)
        st = refenc_atomic_write(&a, foot, foot_len, err);
    if (st == REFENC_OK)
        st = refenc_atomic_commit(&a, err);
    free(head);
    free(foot);
    return st;
}

/* The golden set, as far as it can be trusted before any case is read (as
 * certify opens it): searchable directories, the manifest's entries
 * checked, the report none of the inputs. */
static int open_golden_set(refenc_manifest *m, const char *html_path, const refenc_report_options *opt,
                           refenc_error *err)
{
    memset(m, 0, sizeof *m);
    int st = refenc_certify_dir_check(opt->golden_dir, "golden", err);
    if (st == REFENC_OK)
        st = refenc_certify_dir_check(opt->results_dir, "results", err);
    if (st == REFENC_OK)
        st = refenc_manifest_read(m, opt->golden_dir, err);
    if (st == REFENC_OK)
        st = refenc_certify_refuse_output(html_path, m, opt->golden_dir, opt->results_dir, err);
    for (size_t k = 0; st == REFENC_OK && k < opt->n_case_patterns; k++) { /* a typo is an error, not a smaller run */
        size_t hits = 0;
        for (size_t i = 0; i < m->n_cases; i++)
            hits += refenc_certify_selected(&opt->case_patterns[k], 1, NULL, m->cases[i].name);
        if (hits == 0)
            st = refenc_error_set(err, REFENC_EINVAL, "%s: no golden case matches '%s'", m->path,
                                  opt->case_patterns[k]);
    }
    if (st != REFENC_OK)
        refenc_manifest_free(m);
    return st;
}

/* Certifies case i of the manifest, tallies it, and writes its certificate entry and its section. */
static int report_case(FILE *const o[2], const refenc_manifest *manifest, size_t i, const char *html_path,
                       const refenc_report_options *opt, refenc_report_summary *sum,
                       refenc_certificate_tally *tally, json_t *cases, refenc_error *err)
{
    const char *name = manifest->cases[i].name;
    int st;
    sum->cases++;
    refenc_error cerr;
    refenc_error_clear(&cerr);
    refenc_st_file golden, results;
    refenc_case_report rep;
    json_t *c;
    const int cst = refenc_certify_dir_case_selected(&rep, &golden, &results, opt->golden_dir, &manifest->cases[i],
                                                     opt->results_dir, &opt->certify, opt->outputs_glob,
                                                     opt->skip_missing, &cerr);
    if (cst != REFENC_OK) {
        if (sum->errors++ == 0)
            sum->first_error = cerr;
        refenc_certificate_tally_error(tally);
        c = json_pack("{s:s, s:s, s:s}", "case", name, "verdict", "ERROR", "note", cerr.message);
    } else {
        c = refenc_certificate_case(&rep);
        sum->passed += !refenc_verdict_fails(rep.verdict); /* XFAIL and XPASS do not fail */
        sum->skipped += rep.verdict == REFENC_VERDICT_SKIP;
        sum->failed += refenc_verdict_fails(rep.verdict);
        refenc_certificate_tally_add(tally, &rep);
    }
    const int failing = cst != REFENC_OK || refenc_verdict_fails(rep.verdict); /* ERROR or FAIL: first */
    if (c == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", html_path);
    else
        st = case_section(o[!failing], c, cst == REFENC_OK ? &rep : NULL, golden.path ? &golden : NULL, &results,
                          (opt->heatmaps_all ? MAPS_ALL : MAPS_FAILING) | (opt->full_heatmaps ? MAPS_FULL : 0), err);
    json_array_append_new(cases, c);
    refenc_case_report_free(&rep);
    refenc_st_free(&golden);
    refenc_st_free(&results);
    return st;
}

/* Builds the certificate of the selection (taking cases) and writes the page with it. */
static int report_page_write(const char *html_path, const refenc_report_options *opt,
                             const refenc_report_summary *sum, const refenc_certificate_tally *tally,
                             const refenc_manifest *manifest, json_t *cases, const report_body *body,
                             refenc_error *err)
{
    const char *verdict = sum->errors ? "ERROR" : sum->failed ? "FAIL" : "PASS";
    json_t *doc = refenc_certificate_doc(opt->version ? opt->version : "", opt->golden_dir, opt->results_dir,
                                         manifest->sha256, cases, sum->cases, sum->passed, verdict);
    if (doc != NULL) { /* the certificate refenc certify writes for the same selection */
        refenc_certificate_summary_add(json_object_get(doc, "summary"), tally);
        const int many = opt->n_case_patterns > 0;
        if (json_object_set_new(doc, "selection",
                                refenc_certificate_selection(many ? opt->case_patterns : &opt->case_glob,
                                                             many ? opt->n_case_patterns : opt->case_glob != NULL,
                                                             opt->outputs_glob, opt->skip_missing))) {
            json_decref(doc); /* out of memory: the selection is never left out */
            doc = NULL;
        }
    }
    int st = doc ? write_atomic(html_path, doc, body, err)
                 : refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", html_path);
    json_decref(doc);
    return st;
}

/* The selection: any of the patterns, or the glob (certificate.h). */
static int report_selects(const refenc_report_options *opt, const char *name)
{
    if (opt->n_case_patterns > 0)
        return refenc_certify_selected(opt->case_patterns, opt->n_case_patterns, NULL, name);
    return refenc_certify_selected(&opt->case_glob, opt->case_glob != NULL, NULL, name);
}

/* Closes the body's streams; 0 when some text could not be kept (out of memory). */
static int body_close(report_body *b)
{
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        if (b->o[k] != NULL && fclose(b->o[k]) != 0)
            ok = 0;
        b->o[k] = NULL;
    }
    return ok;
}

int refenc_report_write(const char *html_path, const refenc_report_options *opt, refenc_report_summary *sum,
                        refenc_error *err)
{
    memset(sum, 0, sizeof *sum);
    refenc_certificate_tally tally;
    memset(&tally, 0, sizeof tally);
    refenc_error_clear(&sum->first_error);
    refenc_manifest manifest;
    int st = open_golden_set(&manifest, html_path, opt, err);
    if (st != REFENC_OK)
        return st;
    report_body body;
    memset(&body, 0, sizeof body);
    for (int k = 0; k < 2; k++)
        body.o[k] = open_memstream(&body.text[k], &body.len[k]);
    json_t *cases = json_array();
    if (body.o[0] == NULL || body.o[1] == NULL || cases == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", html_path);
    for (size_t i = 0; i < manifest.n_cases && st == REFENC_OK; i++)
        if (report_selects(opt, manifest.cases[i].name))
            st = report_case(body.o, &manifest, i, html_path, opt, sum, &tally, cases, err);
    if (st == REFENC_OK && sum->cases == 0)
        st = refenc_error_set(err, REFENC_EINVAL, "%s: no golden case matches '%s'", manifest.path,
                              opt->case_glob ? opt->case_glob : "*");
    if (st == REFENC_OK && sum->cases > 0 && sum->skipped == sum->cases)
        st = refenc_error_set(err, REFENC_EINVAL, "no case was certified: %s",
                              opt->outputs_glob ? "no results file, or no output matches --outputs"
                                                : "no results file for any selected case");
    if (!body_close(&body) && st == REFENC_OK)
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", html_path);
    if (st == REFENC_OK) {
        st = report_page_write(html_path, opt, sum, &tally, &manifest, cases, &body, err);
        cases = NULL; /* stolen */
    }
    free(body.text[0]);
    free(body.text[1]);
    json_decref(cases);
    refenc_manifest_free(&manifest);
    return st;
}
