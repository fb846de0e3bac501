/* Error budgets of low-precision results (budget.h, docs/verdict.md). */
#include "budget.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../io/case_file.h"
#include "../io/golden_names.h"
#include "../io/grad_input.h"
#include "emulate_backward.h"
#include "../rope.h"
#include "../rope_scaling.h"

int refenc_format_precision(refenc_format f)
{
    switch (f) {
    case REFENC_FMT_F32: return 24;
    case REFENC_FMT_F16: return 11;
    case REFENC_FMT_BF16: return 8;
    default: return 53;
    }
}

double refenc_format_ulp(refenc_format f, double x)
{
    const int p = refenc_format_precision(f);
    const int emin = f == REFENC_FMT_F16 ? -14 : f == REFENC_FMT_F64 ? -1022 : -126;
    int e;
    frexp(x, &e); /* x = m 2^e, 0.5 <= |m| < 1: the binade's exponent is e - 1 */
    e = x == 0.0 || !isfinite(x) ? emin : e - 1;
    return ldexp(1.0, (e < emin ? emin : e) - p + 1);
}

void refenc_budget(double *max_abs, double *nmse, const refenc_baseline_error *base, refenc_format f,
                   double max_want)
{
    const double floor_abs = REFENC_BUDGET_FLOOR_ULPS * refenc_format_ulp(f, max_want);
    const double floor_nmse = pow(REFENC_BUDGET_FLOOR_ULPS * ldexp(1.0, -refenc_format_precision(f)), 2);
    /* a baseline that overflows says nothing about the error: the floor alone */
    const int usable = base != NULL && base->finite;
    *max_abs = REFENC_BUDGET_C * (usable ? base->max_abs : 0.0) + floor_abs;
    *nmse = REFENC_BUDGET_C * REFENC_BUDGET_C * (usable ? base->nmse : 0.0) + floor_nmse;
}

double refenc_budget_f32(const refenc_baseline_error *base)
{
    return base != NULL && base->finite ? REFENC_BUDGET_C * base->max_abs : 0.0;
}

double refenc_grad_growth(const refenc_baseline_error *base, refenc_format f)
{
    return base != NULL ? REFENC_BUDGET_FLOOR_ULPS * ldexp(base->growth, -refenc_format_precision(f)) : 0.0;
}

void refenc_grad_budget(double *max_abs, double *nmse, const refenc_baseline_error *base, refenc_format f,
                        double max_want, double mean_sq_want)
{
    refenc_budget(max_abs, nmse, base, f, max_want);
    const double G = refenc_grad_growth(base, f);
    *max_abs += G;
    *nmse += mean_sq_want > 0 ? G * G / mean_sq_want : G * G;
}

void refenc_baseline_free(refenc_baseline *b)
{
    if (b == NULL)
        return;
    free(b->outputs);
    memset(b, 0, sizeof *b);
}

const refenc_baseline_error *refenc_baseline_find(const refenc_baseline *b, const char *name)
{
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->outputs[i].name, name) == 0)
            return &b->outputs[i];
    return NULL;
}

/* The trace observer of the baseline run: measures each output it reports
 * against the golden's. */
typedef struct {
    refenc_baseline *b;
    const refenc_st_file *golden;
    refenc_error *err;
    int st;
} measure_ctx;

static int measure_one(refenc_baseline_error *m, const refenc_st_file *golden, const char *out,
                       const double *base, size_t n, refenc_error *err)
{
    char dc_name[REFENC_NAME_MAX];
    refenc_name_dontcare(dc_name, sizeof dc_name, NULL, out);
    const refenc_st_tensor *want_t = refenc_st_find(golden, out), *dc_t = refenc_st_find(golden, dc_name);
    if (want_t->numel != n || (dc_t != NULL && dc_t->numel != n))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: '%s' does not have the shape the case computes",
                                golden->path, dc_t != NULL && dc_t->numel != n ? dc_name : out);
    double *want = refenc_alloc_array(n, sizeof *want);
    int64_t *dc = refenc_alloc_array(n, sizeof *dc);
    int st = want == NULL || dc == NULL
                 ? refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for '%s'", golden->path, out)
                 : refenc_st_to_f64(want, golden, want_t, err);
    if (st == REFENC_OK && dc_t != NULL)
        st = refenc_st_to_i64(dc, golden, dc_t, err);
    double sum_d2 = 0, sum_w2 = 0;
    snprintf(m->name, sizeof m->name, "%s", out);
    m->finite = 1;
    for (size_t i = 0; st == REFENC_OK && i < n; i++) {
        if (dc_t != NULL && dc[i])
            continue;
        const double d = fabs(base[i] - want[i]);
        m->finite &= isfinite(base[i]);
        m->max_abs = fmax(m->max_abs, d);
        sum_d2 += d * d;
        sum_w2 += want[i] * want[i];
    }
    m->nmse = sum_w2 > 0 ? sum_d2 / sum_w2 : sum_d2;
    free(want);
    free(dc);
    return st;
}

/* The baseline's error on the golden's output `out` (n values) appended to
 * mc->b; the entry, or NULL on an error (in mc->st). */
static refenc_baseline_error *append_measured(measure_ctx *mc, const char *out, const double *data, size_t n)
{
    refenc_baseline *b = mc->b;
    refenc_baseline_error *grown = realloc(b->outputs, (b->n + 1) * sizeof *grown);
    if (grown == NULL) {
        mc->st = refenc_error_set(mc->err, REFENC_ENOMEM, "%s: out of memory", mc->golden->path);
        return NULL;
    }
    b->outputs = grown;
    refenc_baseline_error *m = &b->outputs[b->n];
    memset(m, 0, sizeof *m);
    mc->st = measure_one(m, mc->golden, out, data, n, mc->err);
    b->n += mc->st == REFENC_OK;
    return mc->st == REFENC_OK ? m : NULL;
}

static void measure(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    measure_ctx *mc = ctx;
    char out[REFENC_NAME_MAX];
    refenc_name_output(out, sizeof out, name);
    if (mc->st != REFENC_OK || refenc_st_find(mc->golden, out) == NULL)
        return; /* an error already, or a step the golden does not store */
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    append_measured(mc, out, data, n);
}

int refenc_baseline_measure(refenc_baseline *b, const refenc_st_file *golden, refenc_format f,
                            refenc_error *err)
{
    /* inputs that need float32 (input_dtype F32) are read in float32 */
    const char *in_dtype = refenc_st_metadata(golden, "input_dtype");
    const int needs_f32 = in_dtype != NULL && strcmp(in_dtype, "F32") == 0;
    return refenc_baseline_measure_inputs(b, golden, f, needs_f32 && f != REFENC_FMT_F64 ? REFENC_FMT_F32 : f, err);
}

int refenc_baseline_measure_inputs(refenc_baseline *b, const refenc_st_file *golden, refenc_format f,
                                   refenc_format inputs, refenc_error *err)
{
    memset(b, 0, sizeof *b);
    b->format = f;
    refenc_case c;
    memset(&c, 0, sizeof c);
    int st = refenc_case_from_file(&c, golden, err);
    if (st == REFENC_OK) {
        refenc_emulation_round_case(&c, inputs);
        const refenc_emulation e = refenc_emulation_baseline(f);
        measure_ctx mc = {b, golden, err, REFENC_OK};
        const refenc_trace tr = {measure, &mc};
        st = refenc_emulation_run_case(&c, &e, NULL, &tr, err);
        if (st == REFENC_OK)
            st = mc.st;
    }
    refenc_case_free(&c);
    if (st != REFENC_OK)
        refenc_baseline_free(b);
    return st;
}

/* ---- gradients ---------------------------------------------------------------------- */

static void grad_measure(void *ctx, const char *name, const double *g, const double *mag, size_t n)
{
    measure_ctx *mc = ctx;
    char out[REFENC_NAME_MAX];
    snprintf(out, sizeof out, REFENC_NAME_GRAD "%s", name);
    if (mc->st != REFENC_OK || refenc_st_find(mc->golden, out) == NULL)
        return; /* an error already, or a gradient the golden does not store */
    refenc_baseline_error *m = append_measured(mc, out, g, n);
    for (size_t i = 0; m != NULL && mag != NULL && i < n; i++)
        m->growth = fmax(m->growth, mag[i]);
}

int refenc_grad_baseline_measure(refenc_baseline *b, const refenc_st_file *golden, refenc_format f,
                                 refenc_error *err)
{
    memset(b, 0, sizeof *b);
    b->format = f;
    const char *in_dtype = refenc_st_metadata(golden, "input_dtype");
    const int needs_f32 = in_dtype != NULL && strcmp(in_dtype, "F32") == 0;
    refenc_case c;
    memset(&c, 0, sizeof c);
    double *dY = NULL;
    int st = refenc_case_from_file(&c, golden, err);
    if (st == REFENC_OK && (b->unsupported = refenc_emulation_backward_unsupported(&c.cfg)) != NULL) {
        refenc_case_free(&c);
        return REFENC_OK; /* no baseline: certify says the gradients are not certified */
    }
    if (st == REFENC_OK)
        st = refenc_grad_dy_from_file(&dY, &c, golden, err);
    if (st == REFENC_OK && dY == NULL)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: case %s lists gradients but has no %s", golden->path,
                              c.name, REFENC_NAME_GRAD_DY);
    if (st == REFENC_OK) {
        refenc_emulation_round_case(&c, needs_f32 && f != REFENC_FMT_F64 ? REFENC_FMT_F32 : f);
        const refenc_emulation e = refenc_emulation_baseline(f);
        measure_ctx mc = {b, golden, err, REFENC_OK};
        const refenc_grad_sink sink = {grad_measure, &mc};
        st = refenc_emulation_backward_case(&c, dY, &e, &sink, err);
        if (st == REFENC_OK)
            st = mc.st;
    }
    free(dY);
    refenc_case_free(&c);
    if (st != REFENC_OK)
        refenc_baseline_free(b);
    return st;
}

/* ---- float32 angles --------------------------------------------------------------- */

double refenc_angle_error_units(size_t two_i, size_t width, double base)
{
    /* t = (2i/D) ln(base) rounded twice in float32 (the scaled exponent and
     * the product): |dt| <= 2 u |t|; exp or pow adds 2 u (one float32 ulp),
     * the reciprocal or the product pos * omega one u each */
    return 2.0 * ((double)two_i / (double)width) * log(base) + 4.0;
}

/* llama3 between its bands: m = (L0/w - low)/(high - low), w = 2 pi/theta,
 * q = L0/w within (K0 + 3) u of its value (K0 theta's error, a product, a
 * division, fl(2 pi)); m within dm = ((K0 + 3) q + |q - low|)/(high - low)
 * + 3; theta ((1 - m)/s + m) moves by (s - 1) dm relative, plus 5
 * roundings.  Clear of the bands (by 1e-6 relative): one division, or none. */
static double llama3_units(size_t j, size_t R, double base, const refenc_rope_scaling *s)
{
    const double k = refenc_angle_error_units(2 * j, R, base), k0 = k - 1; /* theta's, without pos * theta */
    const double q = (double)s->original_max_position_embeddings * refenc_rope_frequency(j, R, base) / (2 * M_PI);
    const double lo = s->low_freq_factor, hi = s->high_freq_factor;
    if (q > hi * (1 + 1e-6) || q < lo * (1 - 1e-6))
        return k + 1;
    const double dm = ((k0 + 3) * q + fabs(q - lo)) / (hi - lo) + 3;
    return k + 5 + (s->factor - 1) * dm;
}

/* dynamic beyond L0: base' = base P, P = g^x, g = s S/L0 - (s - 1), x = R/(R - 2):
 * g within dg = (2 s S/L0 + (s - 1))/g + 1, P within x dg + x ln(g) + 2 (x's
 * rounding, pow), base' one more; theta = base'^(-2j/R) carries 2j/R of it. */
static double dynamic_units(size_t j, size_t R, double base, const refenc_rope_scaling *s, int64_t S)
{
    const double L0 = (double)s->max_position_embeddings, f = s->factor;
    if ((double)S <= L0)
        return refenc_angle_error_units(2 * j, R, base);
    const double a = f * (double)S / L0, g = a - (f - 1), x = (double)R / (double)(R - 2);
    const double dg = (2 * a + (f - 1)) / g + 1, db = x * dg + x * log(g) + 3;
    return refenc_angle_error_units(2 * j, R, refenc_rope_scaled_base(base, R, s, S)) +
           (double)(2 * j) / (double)R * db;
}

/* GTE's ntk as HF forms it in float32: fixed, base s rounded to float32
 * (theta moves by (2j/R) u), its power as refenc_angle_error_units says, then
 * a division by s^(2/R) (a Python double): one u; mixed_b, x = a (j + 1)^b
 * with a = ln(fl(s)) / (R/2)^b: fl(s) moves ln s by u, log, pow (2u each), a
 * division and a product: x within (6 + 1/ln s) x u, exp(x) that plus 2u,
 * theta / exp(x) one u more. */
static double ntk_units(size_t j, size_t R, double base, const refenc_rope_scaling *s)
{
    const double ls = log(s->factor);
    if (!s->mixed)
        return refenc_angle_error_units(2 * j, R, base * s->factor) + (double)(2 * j) / (double)R + 1;
    const double x = ls * pow((double)(j + 1) / ((double)R / 2), s->mixed_b);
    return refenc_angle_error_units(2 * j, R, base) + (ls > 0 ? 6 * x + x / ls : 0) + 3;
}

double refenc_angle_scaled_units(size_t j, size_t R, double base, const refenc_rope_scaling *s, int64_t S)
{
    switch (s == NULL ? REFENC_ROPE_SCALING_NONE : s->type) {
    case REFENC_ROPE_SCALING_LINEAR:
    case REFENC_ROPE_SCALING_LONGROPE: return refenc_angle_error_units(2 * j, R, base) + 1;
    case REFENC_ROPE_SCALING_DYNAMIC: return dynamic_units(j, R, base, s, S);
    case REFENC_ROPE_SCALING_YARN: return refenc_angle_error_units(2 * j, R, base) + 7 + 2 * s->factor;
    case REFENC_ROPE_SCALING_LLAMA3: return llama3_units(j, R, base, s);
    case REFENC_ROPE_SCALING_NTK: return ntk_units(j, R, base, s);
    default: return refenc_angle_error_units(2 * j, R, base);
    }
}

/* The angle allowance of element k of an (N, L, width) output of pairs:
 * interleaved PE (2i, 2i+1) or RoPE in its layout over its first R
 * coordinates (the rest pass through: no angle), its frequencies scaled. */
typedef struct {
    const refenc_case *c;
    size_t L, width, R;
    double base;
    int rope;
    int64_t S;
} angle_layout;

static double allowance_at(const angle_layout *a, const double *want, size_t k)
{
    const size_t d = k % a->width, l = (k / a->width) % a->L, half = a->R / 2;
    size_t j, partner;
    if (a->rope && d >= a->R)
        return 0.0; /* passed through, copied */
    if (!a->rope) { /* sin at 2i, cos at 2i + 1: |delta| <= |delta angle| */
        j = d / 2;
        partner = SIZE_MAX;
    } else if (a->c->cfg.rope_layout == REFENC_ROPE_HALF) {
        j = d < half ? d : d - half;
        partner = d < half ? k + half : k - half;
    } else {
        j = d / 2;
        partner = d % 2 == 0 ? k + 1 : k - 1;
    }
    const refenc_rope_scaling *s = a->rope ? &a->c->cfg.rope_scaling : NULL;
    const double omega = a->rope ? refenc_rope_scaled_frequency(j, a->R, a->base, s, a->S)
                                 : refenc_rope_frequency(j, a->width, a->base); /* the PE's omega_j */
    const double units = a->rope ? refenc_angle_scaled_units(j, a->R, a->base, s, a->S)
                                 : refenc_angle_error_units(2 * j, a->width, a->base);
    const double dangle = units * 0x1p-24 * fabs((double)a->c->positions[l] * omega);
    /* a rotation by theta + e moves (a', b') to (a' - e b', b' + e a') */
    return (partner == SIZE_MAX ? 1.0 : fabs(want[partner])) * dangle;
}

/* Whether an output may hold a PE or RoPE angle, from the metadata alone. */
static int angle_output(const refenc_st_file *golden, const char *output)
{
    const char *comp = refenc_st_metadata(golden, "component");
    if (comp == NULL)
        return 0;
    if (strcmp(comp, "sinusoidal_pe") == 0 || strcmp(comp, "rope") == 0)
        return strcmp(output, "out.output") == 0;
    return strcmp(comp, "encoder") == 0 && strcmp(output, "out.embed") == 0;
}

int refenc_angle_allowance(int *applies, double *allow, const refenc_st_file *golden, const char *output,
                           const double *want, size_t numel, refenc_error *err)
{
    *applies = 0;
    if (!angle_output(golden, output))
        return REFENC_OK;
    refenc_case c;
    memset(&c, 0, sizeof c);
    const int st = refenc_case_from_file(&c, golden, err);
    if (st != REFENC_OK) {
        refenc_case_free(&c);
        return st;
    }
    const int rope = c.component == REFENC_COMP_ROPE;
    const size_t width = rope ? refenc_config_head_dim(&c.cfg) : c.cfg.d_model;
    const size_t R = rope ? refenc_rope_scaling_rotary_dim(&c.cfg.rope_scaling, width) : width;
    const angle_layout a = {&c, c.L, width, R, rope ? c.cfg.rope_base : 10000.0, rope,
                            refenc_rope_seq_len(c.positions, c.L)};
    *applies = (rope || c.component == REFENC_COMP_SINUSOIDAL_PE || c.cfg.positional == REFENC_POS_SINUSOIDAL) &&
               width > 0 && numel % (c.L * width) == 0;
    for (size_t k = 0; *applies && k < numel; k++)
        allow[k] = allowance_at(&a, want, k);
    refenc_case_free(&c);
    return REFENC_OK;
}
