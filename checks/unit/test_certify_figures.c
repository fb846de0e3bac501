/* Every figure and every diagnosis of refenc_certify_case (ref/tool/certify.h),
 * pinned against a computation of its own here, on golden cases built for
 * the purpose (so that each figure has a known answer):
 *   per output: elements compared and don't-care, out of tolerance,
 *   non-finite, max abs, max rel, max ULPs (from nextafter, not from the
 *   binade arithmetic certify uses), NMSE, the worst element (index, both
 *   values, its error / tolerance), the status; the tolerance's boundary;
 *   per case: the first divergence among several failing outputs;
 *   the diagnosis: perturbations of a variant in both directions, the
 *   tolerance it is judged by, masked (padded) elements, several near
 *   variants in every order (the closest wins), required outputs.
 * Data come from a seeded generator (REFENC_FIGURES_SEED overrides the
 * seed; a failure prints it). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/tool/certify.h"
#include "../../ref/io/safetensors.h"

#define N 60            /* elements of every output: shape (3, 4, 5) */
#define MAXO 4
#define MAXV 4
static const size_t SHAPE[3] = {3, 4, 5};

/* The F64 policy's bound at w, written out from the policy table
 * (docs/certify.md), not taken from certify. */
static double tol64(double w)
{
    return 1e-11 + 1e-10 * fabs(w);
}
static double tol32(double w)
{
    return 1e-5 + 1.3e-6 * fabs(w);
}
/* The F32 bound is the policy plus twice the emulated float32 baseline's
 * error (docs/certify.md); the golden cases built here hold outputs only,
 * no case to emulate, so their F32 results are judged by the policy alone,
 * given as the tolerance: the figures are the same code either way. */
static const refenc_certify_options F32_POLICY = {.override_tolerance = 1, .tol = {1.3e-6, 1e-5}};

/* ---- a seeded generator ------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t seed_used;

static void rng_seed(uint64_t s)
{
    seed_used = s;
    rng_state = s * 0x9E3779B97F4A7C15u + 1;
}

static uint64_t seed_from_env(uint64_t fallback)
{
    const char *s = getenv("REFENC_FIGURES_SEED");
    return s && *s ? strtoull(s, NULL, 10) : fallback;
}

static double uniform(void) /* [0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}

/* A value exact in float32, in [-3, 3], not a "nice" one; 0 one time in 12. */
static double value(void)
{
    if (uniform() < 1.0 / 12)
        return 0.0;
    return (double)(float)(6 * uniform() - 3);
}

/* ---- golden cases built for a test -------------------------------------------- */

typedef struct {
    const char *name;
    int required;
    double want[N];
    int has_dc;
    uint8_t dc[N];
} out_spec;

typedef struct {
    const char *name; /* a known variant (variants.h) */
    size_t n_outs;
    const char *outs[MAXO];
    double alt[MAXO][N];
    int has_dc[MAXO];
    uint8_t dc[MAXO][N];
} var_spec;

typedef struct {
    size_t n_outs, n_vars;
    out_spec o[MAXO];
    var_spec v[MAXV];
    const char *tolerance; /* __metadata__.tolerance, or NULL */
    const char *outputs_text, *variants_text; /* the metadata as given, or NULL: built */
} golden_spec;

/* A case of one required output, out.output, its values to fill. */
static golden_spec one_output(void)
{
    golden_spec g = {.n_outs = 1};
    g.o[0] = (out_spec){.name = "out.output", .required = 1};
    return g;
}

static char tmpdir[64];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/refenc-figures-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/golden.safetensors", tmpdir);
    unlink(p);
    snprintf(p, sizeof p, "%s/results.safetensors", tmpdir);
    unlink(p);
    rmdir(tmpdir);
}

TestSuite(figures, .init = setup, .fini = teardown);

static void add(refenc_st_entry *e, size_t *n, char *name, refenc_st_dtype dt, const void *data)
{
    e[*n] = (refenc_st_entry){.name = name, .dtype = dt, .ndim = 3, .data = data};
    memcpy(e[*n].shape, SHAPE, sizeof SHAPE);
    (*n)++;
}

/* Writes the golden case of g and reads it into f. */
static void make_golden(refenc_st_file *f, const golden_spec *g)
{
    refenc_st_entry e[64];
    char names[64][128];
    size_t n = 0;
    json_t *outs = json_array(), *vars = json_array();
    for (size_t i = 0; i < g->n_outs; i++) {
        const out_spec *o = &g->o[i];
        snprintf(names[n], sizeof names[n], "%s", o->name);
        add(e, &n, names[n], REFENC_ST_F64, o->want);
        if (o->has_dc) {
            snprintf(names[n], sizeof names[n], "dontcare.%s", o->name);
            add(e, &n, names[n], REFENC_ST_BOOL, o->dc);
        }
        json_array_append_new(outs, json_pack("{s:s, s:b}", "name", o->name, "required", o->required));
    }
    for (size_t k = 0; k < g->n_vars; k++) {
        const var_spec *v = &g->v[k];
        json_t *vo = json_array();
        for (size_t i = 0; i < v->n_outs; i++) {
            snprintf(names[n], sizeof names[n], "alt.%s.%s", v->name, v->outs[i]);
            add(e, &n, names[n], REFENC_ST_F64, v->alt[i]);
            if (v->has_dc[i]) {
                snprintf(names[n], sizeof names[n], "alt.%s.dontcare.%s", v->name, v->outs[i]);
                add(e, &n, names[n], REFENC_ST_BOOL, v->dc[i]);
            }
            json_array_append_new(vo, json_string(v->outs[i]));
        }
        json_array_append_new(vars, json_pack("{s:s, s:o}", "name", v->name, "outputs", vo));
    }
    char *outs_s = json_dumps(outs, JSON_COMPACT), *vars_s = json_dumps(vars, JSON_COMPACT);
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s}", "format", REFENC_GOLDEN_FORMAT, "case", "figures",
                             "outputs", g->outputs_text ? g->outputs_text : outs_s,
                             "variants", g->variants_text ? g->variants_text : vars_s);
    if (g->tolerance != NULL)
        json_object_set_new(meta, "tolerance", json_string(g->tolerance));
    char path[128];
    snprintf(path, sizeof path, "%s/golden.safetensors", tmpdir);
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, e, n, meta, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(f, path, &err), REFENC_OK, "%s", err.message);
    free(outs_s);
    free(vars_s);
    json_decref(meta);
    json_decref(outs);
    json_decref(vars);
}

/* Certifies results (names[i] holds got[i], written as dtype); returns the
 * status (err says why). */
static int certify_status(refenc_case_report *rep, const refenc_st_file *golden, const char *const *names,
                          double (*got)[N], size_t n, refenc_st_dtype dtype, const refenc_certify_options *opt,
                          refenc_error *err)
{
    refenc_st_entry e[MAXO];
    float f[MAXO][N];
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < N; k++)
            f[i][k] = (float)got[i][k];
        e[i] = (refenc_st_entry){.name = names[i], .dtype = dtype, .ndim = 3,
                                 .data = dtype == REFENC_ST_F64 ? (const void *)got[i] : (const void *)f[i]};
        memcpy(e[i].shape, SHAPE, sizeof SHAPE);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/results.safetensors", tmpdir);
    cr_assert_eq(refenc_st_write(path, e, n, NULL, err), REFENC_OK, "%s", err->message);
    refenc_st_file res;
    cr_assert_eq(refenc_st_read(&res, path, err), REFENC_OK, "%s", err->message);
    const int st = refenc_certify_case(rep, golden, &res, opt, err);
    refenc_st_free(&res);
    return st;
}

/* The same, which must succeed. */
static void certify(refenc_case_report *rep, const refenc_st_file *golden, const char *const *names,
                    double (*got)[N], size_t n, refenc_st_dtype dtype, const refenc_certify_options *opt)
{
    refenc_error err;
    cr_assert_eq(certify_status(rep, golden, names, got, n, dtype, opt, &err), REFENC_OK, "seed %llu: %s",
                 (unsigned long long)seed_used, err.message);
}

/* ---- the figures, computed here ----------------------------------------------------- */

typedef struct {
    size_t compared, dont_care, out_of_tol, nonfinite, worst;
    double max_abs, max_rel, max_ulp, nmse, worst_ratio;
} figures;

/* One unit in the last place of dtype at w: the gap from |w| to the next
 * representable number above it (nextafter), which is the ulp of |w|'s
 * binade (w = 0: the smallest subnormal).  w must be representable in dtype. */
static double ulp_at(double w, refenc_st_dtype dtype)
{
    if (dtype == REFENC_ST_F32) {
        const float a = fabsf((float)w);
        return (double)nextafterf(a, INFINITY) - (double)a;
    }
    return nextafter(fabs(w), INFINITY) - fabs(w);
}

/* The larger of two figures, NaN when either is: a NaN never hides behind a
 * finite figure (docs/certify.md). */
static double worse(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : fmax(a, b);
}

/* The definitions of docs/verdict.md, element by element, for the policy
 * rule (F64, F32).  got is as the results file holds it (rounded to dtype).
 * Relative and ULP errors are measured at max(|want|, s), s = atol / rtol
 * (the largest |want| when rtol is 0); a non-finite result makes the
 * absolute, relative and ULP figures and the NMSE non-finite (NaN for a
 * NaN). */
static figures compute(const double *got, const double *want, const uint8_t *dc, double rtol, double atol,
                       refenc_st_dtype dtype)
{
    figures f = {0};
    double sd = 0, sw = 0, s = 0;
    f.worst_ratio = -1;
    for (size_t i = 0; i < N; i++)
        if (!(dc != NULL && dc[i]))
            s = fmax(s, fabs(want[i]));
    if (rtol > 0)
        s = atol / rtol;
    for (size_t i = 0; i < N; i++) {
        if (dc != NULL && dc[i]) {
            f.dont_care++;
            continue;
        }
        f.compared++;
        const double g = got[i], w = want[i], bound = atol + rtol * fabs(w);
        const double d = isfinite(g) ? fabs(g - w) : isnan(g) ? NAN : INFINITY;
        const double at = fmax(fabs(w), s);
        f.nonfinite += !isfinite(g);
        f.out_of_tol += !(d <= bound);
        f.max_abs = worse(f.max_abs, d);
        f.max_rel = worse(f.max_rel, !isfinite(g) ? d : at > 0 ? d / at : d);
        f.max_ulp = worse(f.max_ulp, !isfinite(g) ? d : d / ulp_at(at, dtype));
        sd += isfinite(g) ? d * d : 0;
        sw += w * w;
        const double ratio = isfinite(g) ? d / bound : INFINITY;
        if (ratio > f.worst_ratio) {
            f.worst_ratio = ratio;
            f.worst = i;
        }
    }
    f.nmse = f.nonfinite ? f.max_abs : sw > 0 ? sd / sw : sd;
    return f;
}

/* Equal, or both NaN. */
static int same(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

static void expect_figures(const refenc_output_report *r, const figures *x, const double *got, const double *want,
                           const char *what)
{
    const unsigned long long s = (unsigned long long)seed_used;
    cr_expect_eq(r->compared, x->compared, "%s (seed %llu): compared %zu, want %zu", what, s, r->compared, x->compared);
    cr_expect_eq(r->dont_care, x->dont_care, "%s (seed %llu): don't-care %zu, want %zu", what, s, r->dont_care,
                 x->dont_care);
    cr_expect_eq(r->out_of_tol, x->out_of_tol, "%s (seed %llu): out of tolerance %zu, want %zu", what, s,
                 r->out_of_tol, x->out_of_tol);
    cr_expect_eq(r->nonfinite, x->nonfinite, "%s (seed %llu): non-finite", what, s);
    cr_expect(same(r->max_abs, x->max_abs), "%s (seed %llu): max abs %a, want %a", what, s, r->max_abs, x->max_abs);
    cr_expect(same(r->max_rel, x->max_rel), "%s (seed %llu): max rel %a, want %a", what, s, r->max_rel, x->max_rel);
    cr_expect(same(r->max_ulp, x->max_ulp), "%s (seed %llu): max ulp %.17g, want %.17g", what, s, r->max_ulp,
              x->max_ulp);
    /* the NMSE's two sums of N squares, in any order: within 2 gamma_N
     * relative (gamma_n = n u / (1 - n u), u = 2^-53) */
    const double g2 = 2 * (N * 0x1p-53) / (1 - N * 0x1p-53);
    cr_expect(same(r->nmse, x->nmse) || fabs(r->nmse - x->nmse) <= g2 * x->nmse,
              "%s (seed %llu): nmse %.17g, want %.17g", what, s, r->nmse, x->nmse);
    cr_expect(!(r->nmse < 0), "%s: a negative NMSE", what);
    cr_expect_eq(r->worst_flat, x->worst, "%s (seed %llu): worst element %zu, want %zu", what, s, r->worst_flat,
                 x->worst);
    cr_expect(r->worst_ratio == x->worst_ratio, "%s (seed %llu): worst ratio %.17g, want %.17g", what, s,
              r->worst_ratio, x->worst_ratio);
    cr_expect(r->worst_want == want[x->worst] &&
                  (r->worst_got == got[x->worst] || (isnan(r->worst_got) && isnan(got[x->worst]))),
              "%s (seed %llu): worst got %.17g want %.17g", what, s, r->worst_got, r->worst_want);
    cr_expect_eq(r->status, x->out_of_tol ? REFENC_OUT_FAIL : REFENC_OUT_PASS, "%s (seed %llu): status", what, s);
}

/* ---- figures ------------------------------------------------------------------------ */

/* A golden output and results around it: most elements within tolerance,
 * some beyond in both directions, some don't-care (and wild there). */
static void random_output(out_spec *o, double *got, refenc_st_dtype dtype)
{
    o->has_dc = 1;
    for (size_t i = 0; i < N; i++) {
        o->want[i] = value();
        o->dc[i] = uniform() < 0.15;
        const double tol = dtype == REFENC_ST_F64 ? tol64(o->want[i]) : tol32(o->want[i]);
        const double u = uniform();
        /* within 0.9 tolerance, or 2 to 1000 tolerances off, either way */
        const double k = u < 0.7 ? 1.8 * uniform() - 0.9 : (uniform() < 0.5 ? -1 : 1) * (2 + 998 * uniform());
        got[i] = o->dc[i] ? (uniform() < 0.5 ? NAN : 1e30) : o->want[i] + k * tol;
        if (dtype == REFENC_ST_F32)
            got[i] = (double)(float)got[i];
    }
}

Test(figures, every_figure_against_an_independent_computation)
{
    const refenc_st_dtype dts[2] = {REFENC_ST_F64, REFENC_ST_F32};
    const uint64_t base = seed_from_env(20240521);
    for (uint64_t s = base; s < base + 24; s++) {
        for (int k = 0; k < 2; k++) {
            rng_seed(s);
            golden_spec g = one_output();
            double got[1][N];
            random_output(&g.o[0], got[0], dts[k]);
            refenc_st_file f;
            make_golden(&f, &g);
            refenc_case_report rep;
            certify(&rep, &f, (const char *[]){"out.output"}, got, 1, dts[k],
                    dts[k] == REFENC_ST_F32 ? &F32_POLICY : NULL);
            const double rtol = dts[k] == REFENC_ST_F64 ? 1e-10 : 1.3e-6, atol = dts[k] == REFENC_ST_F64 ? 1e-11 : 1e-5;
            const figures x = compute(got[0], g.o[0].want, g.o[0].dc, rtol, atol, dts[k]);
            cr_assert_gt(x.out_of_tol, 0, "seed %llu: the data must fail somewhere", (unsigned long long)s);
            cr_assert_lt(x.out_of_tol, x.compared);
            expect_figures(&rep.outputs[0], &x, got[0], g.o[0].want, refenc_st_dtype_name(dts[k]));
            cr_expect(rep.outputs[0].max_rel > 0);
            cr_expect(!rep.pass);
            cr_expect_eq(rep.outputs[0].tol.rtol, rtol);
            cr_expect_eq(rep.outputs[0].tol.atol, atol);
            refenc_case_report_free(&rep);
            refenc_st_free(&f);
        }
    }
}

Test(figures, nonfinite_results_and_their_figures)
{
    rng_seed(seed_from_env(7));
    golden_spec g = one_output();
    double got[1][N];
    for (size_t i = 0; i < N; i++) {
        g.o[0].want[i] = value() + 4; /* no zero */
        got[0][i] = g.o[0].want[i] + (i == 17 ? 3e-10 : 0);
    }
    got[0][40] = INFINITY;
    got[0][41] = NAN;
    got[0][42] = -INFINITY;
    refenc_st_file f;
    make_golden(&f, &g);
    refenc_case_report rep;
    const refenc_certify_options wide = {1, {1e300, 1e300}};
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, &wide);
    const figures x = compute(got[0], g.o[0].want, NULL, 1e300, 1e300, REFENC_ST_F64);
    expect_figures(&rep.outputs[0], &x, got[0], g.o[0].want, "non-finite");
    cr_expect_eq(rep.outputs[0].nonfinite, 3);
    cr_expect_eq(rep.outputs[0].worst_flat, 40, "the first non-finite element is the worst");
    cr_expect(isnan(rep.outputs[0].max_abs) && isnan(rep.outputs[0].nmse) && isnan(rep.outputs[0].max_rel) &&
                  isnan(rep.outputs[0].max_ulp),
              "a NaN result makes every error figure NaN, never a finite one: abs %g rel %g ulp %g nmse %g",
              rep.outputs[0].max_abs, rep.outputs[0].max_rel, rep.outputs[0].max_ulp, rep.outputs[0].nmse);
    cr_expect(!rep.pass, "a NaN never passes, whatever the tolerance");
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

Test(figures, the_tolerance_boundary_passes_and_the_next_double_fails)
{
    golden_spec g = one_output();
    for (size_t i = 0; i < N; i++)
        g.o[0].want[i] = i % 2 ? 1.0 : 0.0;
    refenc_st_file f;
    make_golden(&f, &g);
    /* rtol 0.5, atol 0.25: the bound is 0.25 at 0 and 0.75 at 1, exactly */
    const refenc_certify_options opt = {1, {0.5, 0.25}};
    double got[1][N];
    for (size_t i = 0; i < N; i++)
        got[0][i] = g.o[0].want[i] + (i % 2 ? -0.75 : 0.25);
    refenc_case_report rep;
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, &opt);
    cr_expect(rep.pass, "|got - want| = atol + rtol |want| passes");
    cr_expect_eq(rep.outputs[0].worst_ratio, 1.0);
    refenc_case_report_free(&rep);
    /* an error one double beyond the bound: at 0 (atol alone; 0.25 + 2^-54),
     * then at 1 (rtol counts; the error 1 - got = 0.75 + 2^-53, exactly) */
    const size_t at[2] = {4, 5};
    const double beyond[2] = {nextafter(0.25, 1), 0.25 - 0x1p-53};
    for (int k = 0; k < 2; k++) {
        const double keep = got[0][at[k]];
        got[0][at[k]] = beyond[k];
        certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, &opt);
        cr_expect(!rep.pass, "one double beyond the bound at element %zu fails", at[k]);
        cr_expect_eq(rep.outputs[0].out_of_tol, 1);
        cr_expect_eq(rep.outputs[0].worst_flat, at[k]);
        refenc_case_report_free(&rep);
        got[0][at[k]] = keep;
    }
    /* the F64 policy at 0: atol = 1e-11 exactly */
    for (size_t i = 0; i < N; i++)
        got[0][i] = g.o[0].want[i];
    got[0][0] = 1e-11;
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect(rep.pass, "atol 1e-11 at 0 passes");
    refenc_case_report_free(&rep);
    got[0][0] = nextafter(1e-11, 1);
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect(!rep.pass, "just above atol 1e-11 at 0 fails");
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

/* ---- the first divergence -------------------------------------------------------- */

static void four_outputs(golden_spec *g)
{
    static const char *const names[MAXO] = {"out.embed", "out.layers.0.norm1", "out.layers.0.ffn", "out.output"};
    *g = (golden_spec){.n_outs = MAXO};
    for (size_t i = 0; i < MAXO; i++) {
        g->o[i] = (out_spec){.name = names[i], .required = i == MAXO - 1};
        for (size_t k = 0; k < N; k++)
            g->o[i].want[k] = value();
    }
}

Test(figures, the_first_divergence_is_the_first_failing_output_in_forward_order)
{
    rng_seed(seed_from_env(11));
    golden_spec g;
    four_outputs(&g);
    refenc_st_file f;
    make_golden(&f, &g);
    const char *names[MAXO];
    double got[MAXO][N];
    for (size_t i = 0; i < MAXO; i++) {
        names[i] = g.o[i].name;
        memcpy(got[i], g.o[i].want, sizeof got[i]);
    }
    refenc_case_report rep;
    /* every failing subset of the four outputs: the first failing one */
    for (unsigned mask = 0; mask < 16; mask++) {
        for (size_t i = 0; i < MAXO; i++)
            got[i][9] = g.o[i].want[9] + (mask >> i & 1 ? 1e-3 : 0);
        certify(&rep, &f, names, got, MAXO, REFENC_ST_F64, NULL);
        const int want = mask == 0 ? -1 : __builtin_ctz(mask);
        cr_expect_eq(rep.first_divergence, want, "failing outputs %#x: first divergence %d, want %d", mask,
                     rep.first_divergence, want);
        cr_expect_eq(rep.pass, mask == 0);
        refenc_case_report_free(&rep);
    }
    /* a required output missing is a failure but not a divergence: the
     * failing intermediate before it is the first divergence */
    for (size_t i = 0; i < MAXO; i++)
        got[i][9] = g.o[i].want[9] + (i == 2 ? 1e-3 : 0);
    certify(&rep, &f, names, got, MAXO - 1, REFENC_ST_F64, NULL);
    cr_expect(!rep.pass);
    cr_expect_eq(rep.outputs[3].status, REFENC_OUT_MISSING);
    cr_expect_eq(rep.first_divergence, 2);
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

/* ---- the diagnosis ---------------------------------------------------------------- */

/* One required output; variant k (of n) = the golden moved by 10^3 to 10^5
 * F64 tolerances per element, up or down. */
static void variant_case(golden_spec *g, size_t n_vars)
{
    static const char *const vnames[3] = {"unbiased_variance", "layernorm_eps_x10", "layernorm_eps_div10"};
    *g = (golden_spec){.n_outs = 1, .n_vars = n_vars};
    g->o[0] = (out_spec){.name = "out.output", .required = 1};
    for (size_t i = 0; i < N; i++)
        g->o[0].want[i] = value();
    for (size_t k = 0; k < n_vars; k++) {
        var_spec *v = &g->v[k];
        *v = (var_spec){.name = vnames[k], .n_outs = 1, .outs = {"out.output"}};
        for (size_t i = 0; i < N; i++)
            v->alt[0][i] = g->o[0].want[i] + (uniform() < 0.5 ? -1 : 1) * (1e3 + 1e5 * uniform()) * tol64(g->o[0].want[i]);
    }
}

/* The largest |got - alt| / (atol + rtol |alt|) over the elements no mask
 * covers: the diagnosis ratio's definition. */
static double ratio_to(const double *got, const double *alt, const uint8_t *dc1, const uint8_t *dc2,
                       double (*tol)(double))
{
    double q = -1;
    for (size_t i = 0; i < N; i++)
        if (!(dc1 && dc1[i]) && !(dc2 && dc2[i]))
            q = fmax(q, isfinite(got[i]) ? fabs(got[i] - alt[i]) / tol(alt[i]) : INFINITY);
    return q;
}

Test(figures, a_variant_matches_within_tolerance_in_both_directions_only)
{
    rng_seed(seed_from_env(13));
    golden_spec g;
    variant_case(&g, 1);
    refenc_st_file f;
    make_golden(&f, &g);
    const double *alt = g.v[0].alt[0];
    double got[1][N];
    refenc_case_report rep;
    /* the variant itself, then moved by 0.6 tolerance up, down, alternating */
    const double moves[4] = {0, 0.6, -0.6, 0};
    for (int m = 0; m < 4; m++) {
        for (size_t i = 0; i < N; i++)
            got[0][i] = alt[i] + (m == 3 ? (i % 2 ? 0.6 : -0.6) : moves[m]) * tol64(alt[i]);
        certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
        cr_expect(!rep.pass);
        cr_expect_str_eq(rep.diagnosis, "unbiased_variance", "move %d (seed %llu)", m, (unsigned long long)seed_used);
        const double q = ratio_to(got[0], alt, NULL, NULL, tol64);
        cr_expect(rep.diagnosis_ratio == q, "move %d: ratio %.17g, want %.17g", m, rep.diagnosis_ratio, q);
        cr_expect(rep.diagnosis_ratio <= 1);
        refenc_case_report_free(&rep);
    }
    /* one element 3 tolerances off the variant, up or down: no match */
    for (int sgn = -1; sgn <= 1; sgn += 2) {
        for (size_t i = 0; i < N; i++)
            got[0][i] = alt[i] + (i == 23 ? sgn * 3 * tol64(alt[i]) : 0);
        certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
        cr_expect_str_empty(rep.diagnosis, "3 tolerances %s the variant still matches",
                            sgn < 0 ? "below" : "above");
        cr_expect_eq(rep.variants_checked, 1);
        refenc_case_report_free(&rep);
    }
    /* the bug mirrored (the golden moved the other way): no match */
    for (size_t i = 0; i < N; i++)
        got[0][i] = 2 * g.o[0].want[i] - alt[i];
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect_str_empty(rep.diagnosis, "the mirrored bug matches the variant");
    refenc_case_report_free(&rep);
    /* a NaN: no match */
    memcpy(got[0], alt, sizeof got[0]);
    got[0][3] = NAN;
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect_str_empty(rep.diagnosis);
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

/* A variant is told apart from the golden only beyond 2 tolerances (certify.c,
 * VARIANT_SEPARATION): results equal to a variant exactly 2 tolerances from
 * the golden get no diagnosis (a correct result 1 tolerance off could match
 * it); 4 tolerances away, they do. */
Test(figures, a_variant_exactly_two_tolerances_from_the_golden_is_not_a_candidate)
{
    rng_seed(seed_from_env(17));
    for (int away = 2; away <= 4; away += 2) {
        golden_spec g;
        variant_case(&g, 1);
        size_t exact = 0;
        for (size_t i = 0; i < N; i++) { /* moved where want + away tol is exactly away tol off */
            const double w = g.o[0].want[i], a = w + away * tol64(w);
            const int ok = fabs(a - w) / tol64(w) == away;
            g.v[0].alt[0][i] = ok ? a : w;
            exact += ok;
        }
        cr_assert(exact > 0, "no element is exactly %d tolerances off (seed %llu)", away, (unsigned long long)seed_used);
        refenc_st_file f;
        make_golden(&f, &g);
        double got[1][N];
        memcpy(got[0], g.v[0].alt[0], sizeof got[0]);
        refenc_case_report rep;
        certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
        cr_expect(!rep.pass);
        cr_expect_eq(rep.variants_checked, 1);
        if (away == 2)
            cr_expect_str_empty(rep.diagnosis, "a variant 2 tolerances away matched (seed %llu)",
                                (unsigned long long)seed_used);
        else
            cr_expect_str_eq(rep.diagnosis, "unbiased_variance", "4 tolerances away (seed %llu)",
                             (unsigned long long)seed_used);
        refenc_case_report_free(&rep);
        refenc_st_free(&f);
    }
}

Test(figures, a_variant_is_judged_by_the_outputs_own_tolerance)
{
    rng_seed(seed_from_env(17));
    golden_spec g;
    variant_case(&g, 1);
    /* variants far enough for float32 results to fail the golden too */
    for (size_t i = 0; i < N; i++)
        g.v[0].alt[0][i] = g.o[0].want[i] + (i % 2 ? 1 : -1) * 1e-2;
    refenc_st_file f;
    make_golden(&f, &g);
    const double *alt = g.v[0].alt[0];
    double got[1][N];
    refenc_case_report rep;
    /* 0.5 float32 tolerances off the variant: a match for F32 results
     * (rounded to float, within another 0.5 ulp < 0.3 tolerance), not for F64 */
    for (size_t i = 0; i < N; i++)
        got[0][i] = alt[i] + 0.5 * tol32(alt[i]);
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F32, &F32_POLICY);
    cr_expect_str_eq(rep.diagnosis, "unbiased_variance");
    double rounded[N];
    for (size_t i = 0; i < N; i++)
        rounded[i] = (double)(float)got[0][i];
    const double q32 = ratio_to(rounded, alt, NULL, NULL, tol32);
    cr_expect(rep.diagnosis_ratio == q32, "ratio %.17g, want %.17g", rep.diagnosis_ratio, q32);
    refenc_case_report_free(&rep);
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect_str_empty(rep.diagnosis, "0.5 float32 tolerances are 10^5 float64 ones");
    refenc_case_report_free(&rep);
    refenc_st_free(&f);

    /* the case's scale of the F64 policy applies to the diagnosis too */
    g.tolerance = "{\"scale\": {\"F64\": 4}, \"reason\": \"test\"}";
    make_golden(&f, &g);
    for (size_t i = 0; i < N; i++)
        got[0][i] = alt[i] + 2 * tol64(alt[i]);
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect_str_eq(rep.diagnosis, "unbiased_variance", "2 tolerances under a scale of 4");
    cr_expect(fabs(rep.diagnosis_ratio - 0.5) < 1e-6, "ratio %.17g", rep.diagnosis_ratio);
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

Test(figures, the_closest_of_several_matching_variants_wins_in_any_order)
{
    rng_seed(seed_from_env(19));
    golden_spec g;
    variant_case(&g, 3);
    double got[1][N];
    for (size_t i = 0; i < N; i++)
        got[0][i] = g.v[0].alt[0][i];
    /* around the results: variant 0 at 0.9 tolerance, 1 at 0.2, 2 at 0.6 */
    const double at[3] = {0.9, 0.2, 0.6};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < N; i++)
            g.v[k].alt[0][i] = got[0][i] + (i % 3 == k ? -1 : 1) * at[k] * tol64(got[0][i]);
    const var_spec v[3] = {g.v[0], g.v[1], g.v[2]};
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int o = 0; o < 6; o++) {
        for (int k = 0; k < 3; k++)
            g.v[k] = v[orders[o][k]];
        refenc_st_file f;
        make_golden(&f, &g);
        refenc_case_report rep;
        certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
        cr_expect_str_eq(rep.diagnosis, v[1].name, "order %d%d%d: %s won", orders[o][0], orders[o][1], orders[o][2],
                         rep.diagnosis);
        const double q = ratio_to(got[0], v[1].alt[0], NULL, NULL, tol64);
        cr_expect(rep.diagnosis_ratio == q, "ratio %.17g, want %.17g", rep.diagnosis_ratio, q);
        cr_expect(q > 0.15 && q < 0.25, "the data: the closest variant at %g", q);
        cr_expect_eq(rep.variants_checked, 3);
        refenc_case_report_free(&rep);
        refenc_st_free(&f);
    }
}

Test(figures, masked_elements_are_skipped_in_figures_and_diagnosis)
{
    rng_seed(seed_from_env(23));
    golden_spec g;
    variant_case(&g, 1);
    /* the golden's mask: padded rows (elements 20..29 and 45); the
     * variant's own: element 7 and 52 */
    g.o[0].has_dc = 1;
    for (size_t i = 0; i < N; i++)
        g.o[0].dc[i] = (i >= 20 && i < 30) || i == 45;
    g.v[0].has_dc[0] = 1;
    g.v[0].dc[0][7] = g.v[0].dc[0][52] = 1;
    refenc_st_file f;
    make_golden(&f, &g);
    double got[1][N];
    const double *alt = g.v[0].alt[0];
    for (size_t i = 0; i < N; i++)
        got[0][i] = g.o[0].dc[i] ? (i % 2 ? NAN : -1e300) : g.v[0].dc[0][i] ? 1e30 : alt[i];
    refenc_case_report rep;
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    const figures x = compute(got[0], g.o[0].want, g.o[0].dc, 1e-10, 1e-11, REFENC_ST_F64);
    expect_figures(&rep.outputs[0], &x, got[0], g.o[0].want, "masked");
    cr_expect_eq(rep.outputs[0].dont_care, 11);
    cr_expect_eq(rep.outputs[0].nonfinite, 0, "the NaN are all don't-care");
    cr_expect(rep.outputs[0].worst_flat == 7 || rep.outputs[0].worst_flat == 52, "worst %zu",
              rep.outputs[0].worst_flat);
    cr_expect_str_eq(rep.diagnosis, "unbiased_variance", "masked elements spoilt the diagnosis");
    cr_expect_eq(rep.diagnosis_ratio, 0);
    refenc_case_report_free(&rep);
    /* the control: the same wild value on an element next to a masked one
     * (19, before the padded rows; 8, after the variant's) is seen */
    const size_t next[2] = {19, 8};
    for (int k = 0; k < 2; k++) {
        const double keep = got[0][next[k]];
        got[0][next[k]] = 1e30;
        certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
        cr_expect_str_empty(rep.diagnosis, "element %zu, next to a masked one, was skipped", next[k]);
        refenc_case_report_free(&rep);
        got[0][next[k]] = keep;
    }
    refenc_st_free(&f);
}

Test(figures, a_variant_needs_a_required_output_among_those_compared)
{
    rng_seed(seed_from_env(29));
    golden_spec g;
    four_outputs(&g);
    g.n_vars = 1;
    g.v[0] = (var_spec){.name = "unbiased_variance", .n_outs = 2, .outs = {"out.layers.0.norm1", "out.output"}};
    for (size_t i = 0; i < N; i++) {
        g.v[0].alt[0][i] = g.o[1].want[i] + 1e-3;
        g.v[0].alt[1][i] = g.o[3].want[i] - 1e-3;
    }
    refenc_st_file f;
    make_golden(&f, &g);
    const char *names[2] = {"out.layers.0.norm1", "out.output"};
    double got[2][N];
    memcpy(got[0], g.v[0].alt[0], sizeof got[0]);
    memcpy(got[1], g.v[0].alt[1], sizeof got[1]);
    refenc_case_report rep;
    /* both provided: a match */
    certify(&rep, &f, names, got, 2, REFENC_ST_F64, NULL);
    cr_expect_str_eq(rep.diagnosis, "unbiased_variance");
    cr_expect_eq(rep.first_divergence, 1);
    refenc_case_report_free(&rep);
    /* only the required one: a match on it */
    certify(&rep, &f, names + 1, got + 1, 1, REFENC_ST_F64, NULL);
    cr_expect_str_eq(rep.diagnosis, "unbiased_variance");
    refenc_case_report_free(&rep);
    /* only the optional intermediate (the required output missing): the
     * variant matches what it can see, but no diagnosis without the final
     * output */
    certify(&rep, &f, names, got, 1, REFENC_ST_F64, NULL);
    cr_expect(!rep.pass);
    cr_expect_str_empty(rep.diagnosis);
    refenc_case_report_free(&rep);
    /* both provided, the intermediate off the variant: no match */
    got[0][30] += 1e-3;
    certify(&rep, &f, names, got, 2, REFENC_ST_F64, NULL);
    cr_expect_str_empty(rep.diagnosis);
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

/* ---- edges, each pinning one rule -------------------------------------------------- */

Test(figures, a_freed_report_is_empty)
{
    rng_seed(seed_from_env(31));
    golden_spec g = one_output();
    double got[1][N];
    for (size_t i = 0; i < N; i++)
        got[0][i] = g.o[0].want[i] = value();
    refenc_st_file f;
    make_golden(&f, &g);
    refenc_case_report rep;
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect_eq(rep.n_outputs, 1);
    refenc_case_report_free(&rep);
    cr_expect_eq(rep.n_outputs, 0);
    cr_expect_null(rep.outputs);
    refenc_case_report_free(&rep); /* twice: safe */
    refenc_st_free(&f);
}

Test(figures, output_names_fit_the_report_or_are_refused)
{
    /* a report holds names of up to 95 bytes: 96 is refused, never cut */
    char n95[96], n96[97];
    memset(n95, 'x', 95);
    memcpy(n95, "out.", 4);
    n95[95] = '\0';
    memset(n96, 'x', 96);
    memcpy(n96, "out.", 4);
    n96[96] = '\0';
    double got[1][N];
    for (int k = 0; k < 2; k++) {
        golden_spec g = {.n_outs = 1};
        g.o[0] = (out_spec){.name = k ? n96 : n95, .required = 1};
        for (size_t i = 0; i < N; i++)
            got[0][i] = g.o[0].want[i] = 2.385;
        refenc_st_file f;
        make_golden(&f, &g);
        refenc_error err;
        refenc_case_report rep;
        const int st = certify_status(&rep, &f, (const char *[]){g.o[0].name}, got, 1, REFENC_ST_F64, NULL, &err);
        if (k == 0) {
            cr_expect_eq(st, REFENC_OK, "%s", err.message);
            cr_expect(rep.pass && strcmp(rep.outputs[0].name, n95) == 0);
        } else {
            cr_expect_eq(st, REFENC_EFORMAT);
            cr_expect(strstr(err.message, "__metadata__.outputs[0] does not name an F64 tensor of the case"), "%s",
                      err.message);
        }
        refenc_case_report_free(&rep);
        refenc_st_free(&f);
    }
}

Test(figures, a_case_scale_below_one_tightens_the_policy)
{
    golden_spec g = {.n_outs = 1, .tolerance = "{\"scale\": {\"F64\": 0.5}, \"reason\": \"test\"}"};
    g.o[0] = (out_spec){.name = "out.output", .required = 1};
    double got[1][N];
    for (size_t i = 0; i < N; i++)
        got[0][i] = g.o[0].want[i] = 0.0;
    got[0][3] = 0.75e-11; /* within atol 1e-11, beyond 0.5e-11 */
    refenc_st_file f;
    make_golden(&f, &g);
    refenc_case_report rep;
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect_eq(rep.outputs[0].tol.rtol, 0.5e-10);
    cr_expect_eq(rep.outputs[0].tol.atol, 0.5e-11);
    cr_expect(!rep.pass);
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

Test(figures, a_perfect_outputs_worst_element_is_its_first_compared_one)
{
    /* never a don't-care element, even when every error is 0 */
    rng_seed(seed_from_env(37));
    golden_spec g = {.n_outs = 1};
    g.o[0] = (out_spec){.name = "out.output", .required = 1, .has_dc = 1};
    g.o[0].dc[0] = g.o[0].dc[1] = 1;
    double got[1][N];
    for (size_t i = 0; i < N; i++)
        got[0][i] = g.o[0].want[i] = value() + 5;
    got[0][0] = got[0][1] = NAN;
    refenc_st_file f;
    make_golden(&f, &g);
    refenc_case_report rep;
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect(rep.pass);
    cr_expect_eq(rep.outputs[0].worst_flat, 2);
    cr_expect(rep.outputs[0].worst_got == got[0][2] && rep.outputs[0].worst_want == g.o[0].want[2]);
    cr_expect_eq(rep.outputs[0].worst_ratio, 0);
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

Test(figures, nmse_of_small_and_of_zero_goldens)
{
    /* sum of squares of the golden below 1 (values 0.01): the ratio; all
     * zero: the sum of squared errors itself, never 0/0 */
    for (int zero = 0; zero < 2; zero++) {
        golden_spec g = one_output();
        double got[1][N];
        for (size_t i = 0; i < N; i++) {
            g.o[0].want[i] = zero ? 0.0 : 0.01 * (double)(i % 3 + 1);
            got[0][i] = g.o[0].want[i] + (i % 2 ? 3e-4 : -2e-4);
        }
        refenc_st_file f;
        make_golden(&f, &g);
        refenc_case_report rep;
        certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
        const figures x = compute(got[0], g.o[0].want, NULL, 1e-10, 1e-11, REFENC_ST_F64);
        expect_figures(&rep.outputs[0], &x, got[0], g.o[0].want, zero ? "zero golden" : "small golden");
        cr_expect(isfinite(rep.outputs[0].nmse) && rep.outputs[0].nmse > 0, "nmse %g", rep.outputs[0].nmse);
        refenc_case_report_free(&rep);
        refenc_st_free(&f);
    }
}

Test(figures, a_variant_whose_required_output_is_all_dont_care_is_not_a_diagnosis)
{
    rng_seed(seed_from_env(41));
    golden_spec g;
    variant_case(&g, 1);
    g.v[0].has_dc[0] = 1;
    memset(g.v[0].dc[0], 1, N);
    refenc_st_file f;
    make_golden(&f, &g);
    double got[1][N];
    memcpy(got[0], g.v[0].alt[0], sizeof got[0]);
    refenc_case_report rep;
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
    cr_expect(!rep.pass);
    cr_expect_str_empty(rep.diagnosis, "nothing compared, yet '%s' diagnosed", rep.diagnosis);
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

Test(figures, every_element_counts_for_a_variant_the_first_and_the_last)
{
    rng_seed(seed_from_env(43));
    golden_spec g;
    variant_case(&g, 1);
    refenc_st_file f;
    make_golden(&f, &g);
    const double *alt = g.v[0].alt[0];
    const size_t at[2] = {0, N - 1};
    for (int k = 0; k < 2; k++) {
        double got[1][N];
        memcpy(got[0], alt, sizeof got[0]);
        got[0][at[k]] += 3 * tol64(alt[at[k]]);
        refenc_case_report rep;
        certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL);
        cr_expect_str_empty(rep.diagnosis, "element %zu, 3 tolerances off, was not compared", at[k]);
        refenc_case_report_free(&rep);
    }
    refenc_st_free(&f);
}

Test(figures, a_variant_exactly_at_the_tolerance_matches_and_ties_go_to_the_first_listed)
{
    /* rtol 0.1, atol 0.25: the variant's bound at 0 is 0.25 exactly; the
     * diagnosis obeys the rule an element passes by (<=).  The variants are
     * 5 / (0.25 + 0.1 * 5) = 6.7 bounds from the golden: told apart from it,
     * so candidates (VARIANT_SEPARATION, 2 bounds). */
    golden_spec g;
    variant_case(&g, 2);
    for (size_t i = 0; i < N; i++) {
        g.o[0].want[i] = 5.0;
        g.v[0].alt[0][i] = g.v[1].alt[0][i] = 0.0;
    }
    refenc_st_file f;
    make_golden(&f, &g);
    const refenc_certify_options opt = {1, {0.1, 0.25}};
    double got[1][N];
    for (size_t i = 0; i < N; i++)
        got[0][i] = i % 2 ? 0.25 : -0.25;
    refenc_case_report rep;
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, &opt);
    cr_expect(!rep.pass);
    cr_expect_str_eq(rep.diagnosis, g.v[0].name, "at ratio 1 exactly, and on a tie with the second: '%s'",
                     rep.diagnosis);
    cr_expect_eq(rep.diagnosis_ratio, 1.0);
    refenc_case_report_free(&rep);
    got[0][7] = nextafter(0.25, 1);
    certify(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, &opt);
    cr_expect_str_empty(rep.diagnosis, "one double beyond still matches");
    refenc_case_report_free(&rep);
    refenc_st_free(&f);
}

Test(figures, outputs_and_variants_lists_that_cannot_be_read_are_errors)
{
    const struct {
        const char *outputs, *variants, *message;
    } bad[] = {
        {"[{\"name\": \"out.output\", \"name\": \"out.output\", \"required\": true}]", NULL,
         "__metadata__.outputs is not a non-empty JSON array"},
        {NULL, "[{\"name\": \"unbiased_variance\", \"outputs\": [], \"outputs\": []}]",
         "__metadata__.variants is not a JSON array"},
        {NULL, "[{\"name\": \"unbiased_variance\",", "__metadata__.variants is not a JSON array"},
        {NULL, "{}", "__metadata__.variants is not a JSON array"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        golden_spec g;
        variant_case(&g, 1);
        g.outputs_text = bad[k].outputs;
        g.variants_text = bad[k].variants;
        refenc_st_file f;
        make_golden(&f, &g);
        double got[1][N];
        for (size_t i = 0; i < N; i++)
            got[0][i] = g.o[0].want[i] + 1e-3; /* failing: the diagnosis reads the variants */
        refenc_error err;
        refenc_case_report rep;
        cr_expect_eq(certify_status(&rep, &f, (const char *[]){"out.output"}, got, 1, REFENC_ST_F64, NULL, &err),
                     REFENC_EFORMAT, "case %zu", k);
        cr_expect(strstr(err.message, bad[k].message) != NULL, "case %zu: %s", k, err.message);
        refenc_case_report_free(&rep);
        refenc_st_free(&f);
    }
}

/* The outputs glob (certify.h, refenc certify --outputs) is a shell pattern
 * over the whole output name, as fnmatch without flags: '*' spans any
 * character, '/' included. */
Test(figures, the_outputs_glob_spans_any_character)
{
    rng_seed(seed_from_env(19));
    golden_spec g = {.n_outs = 2};
    g.o[0] = (out_spec){.name = "out.a/b", .required = 1};
    g.o[1] = (out_spec){.name = "out.c", .required = 1};
    double got[2][N];
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < N; i++)
            got[k][i] = g.o[k].want[i] = value();
    refenc_st_file f;
    make_golden(&f, &g);
    refenc_st_entry e[2];
    for (size_t k = 0; k < 2; k++) {
        e[k] = (refenc_st_entry){.name = g.o[k].name, .dtype = REFENC_ST_F64, .ndim = 3, .data = got[k]};
        memcpy(e[k].shape, SHAPE, sizeof SHAPE);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/results.safetensors", tmpdir);
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, e, 2, NULL, &err), REFENC_OK, "%s", err.message);
    refenc_st_file res;
    cr_assert_eq(refenc_st_read(&res, path, &err), REFENC_OK, "%s", err.message);
    static const struct {
        const char *glob;
        refenc_output_status a_b, c;
    } globs[] = {
        {"out.*", REFENC_OUT_PASS, REFENC_OUT_PASS},
        {"*b", REFENC_OUT_PASS, REFENC_OUT_NOT_CHECKED},
        {"out.?/?", REFENC_OUT_PASS, REFENC_OUT_NOT_CHECKED},
        {"out.c", REFENC_OUT_NOT_CHECKED, REFENC_OUT_PASS},
    };
    for (size_t i = 0; i < sizeof globs / sizeof globs[0]; i++) {
        refenc_case_report rep;
        cr_assert_eq(refenc_certify_case_outputs(&rep, &f, &res, NULL, globs[i].glob, &err), REFENC_OK, "%s",
                     err.message);
        cr_assert_eq(rep.n_outputs, 2);
        cr_expect_str_eq(rep.outputs[0].name, "out.a/b");
        cr_expect_eq(rep.outputs[0].status, globs[i].a_b, "%s: out.a/b %s", globs[i].glob,
                     refenc_output_status_name(rep.outputs[0].status));
        cr_expect_eq(rep.outputs[1].status, globs[i].c, "%s: out.c %s", globs[i].glob,
                     refenc_output_status_name(rep.outputs[1].status));
        cr_expect(rep.pass, "%s", globs[i].glob);
        refenc_case_report_free(&rep);
    }
    refenc_st_free(&res);
    refenc_st_free(&f);
}
