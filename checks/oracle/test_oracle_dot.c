/* The oracle's dot products (ref/oracle/dot.c) against the definition they
 * replace: every product exact at 2p bits, one mpfr_sum.  Same value, same
 * sign of zero, same inexact flag -- on random vectors at every precision,
 * and on what the fixed-point accumulator must get right: zeros of both
 * signs, exact cancellation, subnormal doubles, exponents far apart (past the
 * accumulator, where the general path takes over), NaN and infinities;
 * and the row kernel's fixed-point weights (outliers, signs, groups, long
 * rows). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../../ref/oracle/internal.h"
#include "../common/testutil.h"

#define N_MAX 64

/* The definition: exact products at 2p bits, mpfr_sum.  Returns the inexact
 * flag it raised. */
static int reference_dot(mpfr_ptr r, mpfr_srcptr x, mpfr_srcptr y, size_t n, mpfr_srcptr extra)
{
    mpfr_t prod[N_MAX + 1];
    mpfr_ptr p[N_MAX + 1];
    const mpfr_prec_t pr = mpfr_get_prec(r);
    for (size_t k = 0; k < n; k++) {
        mpfr_init2(prod[k], mpfr_get_prec(x + k) + mpfr_get_prec(y + k));
        cr_assert_eq(mpfr_mul(prod[k], x + k, y + k, MPFR_RNDN), 0, "a product was not exact");
        p[k] = prod[k];
    }
    size_t m = n;
    if (extra != NULL) {
        mpfr_init2(prod[m], mpfr_get_prec(extra));
        mpfr_set(prod[m], extra, MPFR_RNDN);
        p[m] = prod[m];
        m++;
    }
    (void)pr;
    mpfr_clear_flags();
    mpfr_sum(r, p, m, MPFR_RNDN);
    const int inexact = mpfr_inexflag_p();
    for (size_t k = 0; k < m; k++)
        mpfr_clear(prod[k]);
    return inexact;
}

static int same(mpfr_srcptr a, mpfr_srcptr b)
{
    if (mpfr_nan_p(a) || mpfr_nan_p(b))
        return mpfr_nan_p(a) && mpfr_nan_p(b);
    return mpfr_equal_p(a, b) && mpfr_signbit(a) == mpfr_signbit(b);
}

/* x (n values at px bits), y (doubles, also as 53-bit MPFR numbers), extra. */
typedef struct {
    size_t n;
    mpfr_prec_t px, pr;
    mpfr_t x[N_MAX], ym[N_MAX], extra_m, got, want;
    double y[N_MAX], extra;
    int has_extra;
} dot_case;

static void case_init(dot_case *c, size_t n, mpfr_prec_t px, mpfr_prec_t pr)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->px = px;
    c->pr = pr;
    for (size_t k = 0; k < N_MAX; k++) {
        mpfr_init2(c->x[k], px);
        mpfr_init2(c->ym[k], 53);
    }
    mpfr_init2(c->extra_m, 53);
    mpfr_init2(c->got, pr);
    mpfr_init2(c->want, pr);
}

static void case_clear(dot_case *c)
{
    for (size_t k = 0; k < N_MAX; k++) {
        mpfr_clear(c->x[k]);
        mpfr_clear(c->ym[k]);
    }
    mpfr_clear(c->extra_m);
    mpfr_clear(c->got);
    mpfr_clear(c->want);
}

/* Checks both kernels against the definition; where: for the message. */
static void check(dot_case *c, const char *where)
{
    for (size_t k = 0; k < c->n; k++)
        mpfr_set_d(c->ym[k], c->y[k], MPFR_RNDN);
    mpfr_set_d(c->extra_m, c->extra, MPFR_RNDN);
    mpfr_srcptr extra = c->has_extra ? c->extra_m : NULL;
    /* the x values as one contiguous array, as the kernels take them */
    mpfr_ptr x = refenc_mp_alloc(N_MAX, c->px), y = refenc_mp_alloc(N_MAX, 53);
    for (size_t k = 0; k < c->n; k++) {
        mpfr_set(x + k, c->x[k], MPFR_RNDN);
        mpfr_set(y + k, c->ym[k], MPFR_RNDN);
    }
    const int want_inexact = reference_dot(c->want, x, y, c->n, extra);
    refenc_mp_ws ws;
    cr_assert_eq(refenc_mp_ws_alloc(&ws, c->px > c->pr ? c->px : c->pr, 4, N_MAX + 1), REFENC_OK);
    for (int kernel = 0; kernel < 5; kernel++) {
        mpfr_clear_flags();
        if (kernel == 0) {
            refenc_mp_dot(c->got, x, 1, y, 1, c->n, extra, &ws);
        } else if (kernel == 1) { /* the operands the other way round */
            refenc_mp_dot(c->got, y, 1, x, 1, c->n, extra, &ws);
        } else { /* the row kernel; kernels 3 and 4 with the weights in fixed point */
            refenc_mp_wspan span;
            refenc_mp_wspan_of(&span, c->y, c->n, c->has_extra ? &c->extra : NULL, 1);
            if (kernel >= 3) /* 4: the portable group sums */
                cr_assert_eq(refenc_mp_wspan_fix(&span, c->y, 1, c->n), REFENC_OK);
            refenc_mp_dot_portable(kernel == 4);
            refenc_mp_row_load(&ws, x, c->n);
            mpfr_clear_flags();
            refenc_mp_dot_row_d(c->got, x, c->y, c->has_extra ? &c->extra : NULL, 0, &span, &ws);
            refenc_mp_wspan_unfix(&span);
        }
        refenc_mp_dot_portable(0);
        const int inexact = mpfr_inexflag_p();
        cr_expect(same(c->got, c->want), "%s (kernel %d, n %zu, x at %ld bits, result at %ld): got %s%.17g, want %s%.17g",
                  where, kernel, c->n, (long)c->px, (long)c->pr, mpfr_signbit(c->got) ? "-" : "+",
                  mpfr_get_d(c->got, MPFR_RNDN), mpfr_signbit(c->want) ? "-" : "+",
                  mpfr_get_d(c->want, MPFR_RNDN));
        cr_expect_eq(inexact, want_inexact, "%s (kernel %d): inexact flag %d, mpfr_sum's %d", where, kernel,
                     inexact, want_inexact);
    }
    refenc_mp_ws_free(&ws);
    refenc_mp_free(x, N_MAX);
    refenc_mp_free(y, N_MAX);
}

/* x = a Gaussian divided by 3 (an inexact, full-precision value), times 2^scale. */
static void random_x(mpfr_ptr x, gsl_rng *r, long scale)
{
    mpfr_set_d(x, gsl_ran_gaussian(r, 1.0), MPFR_RNDN);
    mpfr_div_ui(x, x, 3, MPFR_RNDN);
    mpfr_mul_2si(x, x, scale, MPFR_RNDN);
}

Test(oracle_dot, random_vectors_at_every_precision_equal_mpfr_sum)
{
    gsl_rng *r = test_rng(71);
    const mpfr_prec_t precs[] = {53, 64, 100, 128, 192, 256, 383, 1000};
    char where[128];
    for (size_t pi = 0; pi < sizeof precs / sizeof precs[0]; pi++)
        for (int trial = 0; trial < 20; trial++) {
            dot_case c;
            const size_t n = 1 + gsl_rng_uniform_int(r, N_MAX);
            case_init(&c, n, precs[pi], precs[(pi + (size_t)trial) % (sizeof precs / sizeof precs[0])]);
            for (size_t k = 0; k < n; k++) {
                random_x(c.x[k], r, (long)gsl_rng_uniform_int(r, 40) - 20);
                c.y[k] = gsl_ran_gaussian(r, 0.1);
            }
            c.has_extra = trial % 2;
            c.extra = gsl_ran_gaussian(r, 0.01);
            snprintf(where, sizeof where, "seed %lu, precision %ld, trial %d", test_seed(), (long)precs[pi], trial);
            check(&c, where);
            case_clear(&c);
        }
    gsl_rng_free(r);
}

Test(oracle_dot, zeros_cancellation_and_special_values_equal_mpfr_sum)
{
    gsl_rng *r = test_rng(72);
    dot_case c;
    /* every term a -0: the sum is -0; one +0 makes it +0 */
    case_init(&c, 3, 192, 192);
    mpfr_set_zero(c.x[0], -1), c.y[0] = 2.0;
    mpfr_set_zero(c.x[1], 1), c.y[1] = -3.0;
    mpfr_set_d(c.x[2], 5.0, MPFR_RNDN), c.y[2] = -0.0;
    check(&c, "three -0 terms");
    c.has_extra = 1, c.extra = -0.0;
    check(&c, "three -0 terms and a -0 bias");
    c.extra = 0.0;
    check(&c, "three -0 terms and a +0 bias");
    c.has_extra = 0;
    mpfr_set_zero(c.x[1], -1);
    check(&c, "a +0 term among -0 terms");
    /* exact cancellation of nonzero terms: +0 */
    random_x(c.x[0], r, 0), c.y[0] = 0.75;
    mpfr_neg(c.x[1], c.x[0], MPFR_RNDN), c.y[1] = 0.75;
    mpfr_set_zero(c.x[2], -1), c.y[2] = 1.0;
    check(&c, "x - x");
    case_clear(&c);
    /* no term */
    case_init(&c, 0, 192, 192);
    check(&c, "no term");
    c.has_extra = 1, c.extra = -0.0;
    check(&c, "only a -0 bias");
    c.extra = 0x1p-1074;
    check(&c, "only a subnormal bias");
    case_clear(&c);
    /* subnormal and huge doubles; exponents far apart (general path past 4096 bits) */
    const long scales[] = {0, 300, 1000, 3000, 5000, -5000};
    for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
        case_init(&c, 6, 256, 192);
        for (size_t k = 0; k < 6; k++)
            random_x(c.x[k], r, k == 3 ? scales[s] : 0);
        c.y[0] = 0x1p-1074, c.y[1] = -0x1.8p-1060, c.y[2] = 0x1.fffffffffffffp+1023;
        c.y[3] = 1.5, c.y[4] = -2.25, c.y[5] = 0x1p-600;
        c.has_extra = 1, c.extra = -0x1.23p-40;
        char where[64];
        snprintf(where, sizeof where, "spread 2^%ld", scales[s]);
        check(&c, where);
        case_clear(&c);
    }
    /* NaN and infinities: the general path */
    case_init(&c, 3, 192, 192);
    random_x(c.x[0], r, 0), c.y[0] = INFINITY;
    random_x(c.x[1], r, 0), c.y[1] = 1.0;
    random_x(c.x[2], r, 0), c.y[2] = 2.0;
    check(&c, "an infinite weight");
    c.y[1] = -INFINITY;
    check(&c, "inf - inf");
    c.y[0] = 1.0, c.y[1] = 1.0;
    mpfr_set_nan(c.x[2]);
    check(&c, "a NaN input");
    case_clear(&c);
    gsl_rng_free(r);
}

/* What the linear maps' row kernel does to be fast: a value whose low limbs
 * are zero (a double held at p bits, as a layer's stored input is) enters
 * the sum by its top limbs only, so rows of such values, and rows mixing
 * them with full values, take other paths; and sums whose every limb is all
 * ones carry out of each product's add-with-carry chains into the limbs
 * above, which random values almost never do. */
Test(oracle_dot, rows_of_doubles_mixed_rows_and_carries_equal_mpfr_sum)
{
    gsl_rng *r = test_rng(73);
    const mpfr_prec_t precs[] = {64, 128, 192, 256, 320};
    char where[128];
    for (size_t pi = 0; pi < sizeof precs / sizeof precs[0]; pi++) {
        for (int kind = 0; kind < 3; kind++) {
            dot_case c;
            case_init(&c, N_MAX, precs[pi], precs[(pi + 1) % (sizeof precs / sizeof precs[0])]);
            for (size_t k = 0; k < N_MAX; k++) {
                if (kind == 0 || (kind == 1 && k % 3 != 0)) /* a double, or (kind 1) now and then a full value */
                    mpfr_set_d(c.x[k], ldexp(gsl_ran_gaussian(r, 1.0), (int)gsl_rng_uniform_int(r, 16) - 8), MPFR_RNDN);
                else
                    random_x(c.x[k], r, (long)gsl_rng_uniform_int(r, 16) - 8);
                c.y[k] = gsl_ran_gaussian(r, 0.1);
            }
            if (kind == 2) { /* every limb all ones, every term of one sign: carries everywhere */
                for (size_t k = 0; k < N_MAX; k++) {
                    mpfr_set_ui(c.x[k], 1, MPFR_RNDN);
                    mpfr_nextbelow(c.x[k]); /* 1 - 2^-p: p ones */
                    mpfr_mul_2si(c.x[k], c.x[k], (long)(k % 64), MPFR_RNDN);
                    c.y[k] = (2.0 - 0x1p-52) * ldexp(1.0, (int)(k % 7)); /* 53 ones */
                }
            }
            c.has_extra = kind != 1;
            c.extra = kind == 2 ? 0x1.fffffffffffffp-3 : gsl_ran_gaussian(r, 0.01);
            snprintf(where, sizeof where, "seed %lu, precision %ld, %s", test_seed(), (long)precs[pi],
                     kind == 0 ? "doubles" : kind == 1 ? "doubles and full values" : "all ones");
            check(&c, where);
            case_clear(&c);
        }
    }
    gsl_rng_free(r);
}

/* Both operands multi-limb MPFR values (attention: q.k, weights.v), every
 * pair of limb counts 1 to 5, with and without zero low limbs: the
 * products of the longer operand, shifted once, by each limb of the
 * shorter. */
Test(oracle_dot, mpfr_times_mpfr_at_every_pair_of_precisions_equals_mpfr_sum)
{
    gsl_rng *r = test_rng(74);
    const mpfr_prec_t precs[] = {53, 64, 128, 192, 256, 300};
    const size_t np = sizeof precs / sizeof precs[0];
    for (size_t a = 0; a < np; a++)
        for (size_t b = 0; b < np; b++)
            for (int trial = 0; trial < 4; trial++) {
                const size_t n = 1 + gsl_rng_uniform_int(r, N_MAX);
                mpfr_ptr x = refenc_mp_alloc(n, precs[a]), y = refenc_mp_alloc(n, precs[b]);
                for (size_t k = 0; k < n; k++) {
                    random_x(x + k, r, (long)gsl_rng_uniform_int(r, 40) - 20);
                    random_x(y + k, r, (long)gsl_rng_uniform_int(r, 40) - 20);
                    if (trial == 3 && k % 2 == 0) /* a double held at p bits: zero low limbs */
                        mpfr_set_d(y + k, mpfr_get_d(y + k, MPFR_RNDN), MPFR_RNDN);
                }
                mpfr_t got, want;
                mpfr_init2(got, precs[(a + b) % np]);
                mpfr_init2(want, precs[(a + b) % np]);
                const int want_inexact = reference_dot(want, x, y, n, NULL);
                refenc_mp_ws ws;
                cr_assert_eq(refenc_mp_ws_alloc(&ws, precs[a] > precs[b] ? precs[a] : precs[b], 4, N_MAX + 1),
                             REFENC_OK);
                for (int order = 0; order < 2; order++) {
                    mpfr_clear_flags();
                    if (order == 0)
                        refenc_mp_dot(got, x, 1, y, 1, n, NULL, &ws);
                    else
                        refenc_mp_dot(got, y, 1, x, 1, n, NULL, &ws);
                    cr_expect(same(got, want), "seed %lu, %ld x %ld bits, n %zu, trial %d, order %d: got %.17g, want %.17g",
                              test_seed(), (long)precs[a], (long)precs[b], n, trial, order,
                              mpfr_get_d(got, MPFR_RNDN), mpfr_get_d(want, MPFR_RNDN));
                    cr_expect_eq(mpfr_inexflag_p() != 0, want_inexact != 0, "%ld x %ld bits: inexact flag",
                                 (long)precs[a], (long)precs[b]);
                }
                refenc_mp_ws_free(&ws);
                mpfr_clear(got);
                mpfr_clear(want);
                refenc_mp_free(x, n);
                refenc_mp_free(y, n);
            }
    gsl_rng_free(r);
}

Test(oracle_dot, the_comparison_sees_one_ulp)
{
    /* negative control: the check above tells a result one ulp off, or of
     * the other sign of zero, from mpfr_sum's */
    mpfr_t a, b;
    mpfr_init2(a, 192);
    mpfr_init2(b, 192);
    mpfr_set_d(a, 1.0 / 3.0, MPFR_RNDN);
    mpfr_div_ui(a, a, 7, MPFR_RNDN);
    mpfr_set(b, a, MPFR_RNDN);
    mpfr_nextabove(b);
    cr_expect(!same(a, b), "one ulp apart compare equal");
    mpfr_set_zero(a, 1);
    mpfr_set_zero(b, -1);
    cr_expect(!same(a, b), "+0 and -0 compare equal");
    mpfr_clear(a);
    mpfr_clear(b);
}

/* nn.Linear with the parameters kept as doubles (refenc_mpk_linear_d, with its span given or
 * computed) is, output by output, the same correctly rounded sum as with them in MPFR
 * (refenc_mpk_linear_forward), bias or none; widths that are not powers of two. */
Test(oracle_dot, linear_on_double_parameters_equals_linear_on_mpfr_ones)
{
    enum { N = 3, IN = 7, OUT = 5 };
    const mpfr_prec_t prec = 113;
    gsl_rng *r = test_rng(41);
    double xd[N * IN], W[OUT * IN], b[OUT];
    test_fill_gaussian(xd, N * IN, 0.0, 1.7, r);
    test_fill_gaussian(W, OUT * IN, 0.0, 0.6, r);
    test_fill_gaussian(b, OUT, 0.3, 0.2, r);
    W[4] = 0.0, W[9] = -W[8]; /* a zero, and opposite neighbours */
    gsl_rng_free(r);
    mpfr_ptr x = refenc_mp_from_d(xd, N * IN, prec), Wm = refenc_mp_from_d(W, OUT * IN, 53);
    mpfr_ptr bm = refenc_mp_from_d(b, OUT, 53);
    mpfr_ptr y1 = refenc_mp_alloc(N * OUT, prec), y2 = refenc_mp_alloc(N * OUT, prec);
    cr_assert(x && Wm && bm && y1 && y2);
    refenc_mp_ws ws;
    cr_assert_eq(refenc_mp_ws_alloc(&ws, prec, 4, IN + 1), REFENC_OK);
    refenc_mp_wspan span;
    refenc_mp_wspan_of(&span, W, OUT * IN, b, OUT);
    for (int bias = 0; bias < 2; bias++)
        for (int given = 0; given < 2; given++) {
            refenc_mpk_linear_forward(y1, x, Wm, bias ? bm : NULL, N, IN, OUT, &ws);
            refenc_mpk_linear_d(y2, x, W, bias ? b : NULL, given && bias ? &span : NULL, N, IN, OUT, &ws);
            for (size_t i = 0; i < N * OUT; i++)
                cr_expect(mpfr_equal_p(y1 + i, y2 + i), "bias %d, span %d: output %zu: %a vs %a", bias, given, i,
                          mpfr_get_d(y1 + i, MPFR_RNDN), mpfr_get_d(y2 + i, MPFR_RNDN));
        }
    /* negative control: another bias changes the outputs */
    b[2] += 0x1p-20;
    refenc_mpk_linear_d(y2, x, W, b, NULL, N, IN, OUT, &ws);
    refenc_mpk_linear_forward(y1, x, Wm, bm, N, IN, OUT, &ws);
    cr_expect(!mpfr_equal_p(y1 + 2, y2 + 2), "a changed bias left the output unchanged");
    refenc_mp_ws_free(&ws);
    refenc_mp_free(x, N * IN), refenc_mp_free(Wm, OUT * IN), refenc_mp_free(bm, OUT);
    refenc_mp_free(y1, N * OUT), refenc_mp_free(y2, N * OUT);
}

/* The row kernel with the weights in fixed point (refenc_mp_wspan_fix):
 * per weight row a 63-bit window, the weights outside it (tiny ones,
 * subnormals) taken as outliers; the values grouped by limb offset and
 * sign, groups of one value among them; rows longer than 2048 values;
 * values with zero low limbs (doubles at p bits); all-ones limbs and
 * weights (carries); cancellation to exact zeros, and all-zero weight rows
 * with a -0 bias.  Every output, and its inexact flag, against mpfr_sum of
 * the exact products, at limb counts 1 to 5 (5: the residue path), and
 * refenc_mpk_linear_d (which fixes its own span) against the same. */
Test(oracle_dot, fixed_point_weights_outliers_groups_and_long_rows_equal_mpfr_sum)
{
    enum { ROWS = 3, OUT = 7 };
    gsl_rng *r = test_rng(75);
    const mpfr_prec_t precs[] = {64, 100, 128, 192, 256, 320};
    const size_t lens[] = {1, 5, 130, 3000};
    char where[160];
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const size_t in = lens[li];
        double *W = malloc(OUT * in * sizeof *W), b[OUT];
        cr_assert(W != NULL);
        for (size_t o = 0; o < OUT; o++) {
            for (size_t k = 0; k < in; k++) {
                double w = gsl_ran_gaussian(r, 0.05);
                switch (o) {
                case 0: /* 53-bit weights, now and then a tiny one, a subnormal or a zero */
                    w = k % 17 == 3 ? ldexp(w, -40) : k % 29 == 5 ? 0x1.8p-1070 : k % 13 == 7 ? 0.0 : w;
                    break;
                case 1: /* float-like weights over 2^-60 .. 2^10, of both signs */
                    w = (double)(float)ldexp(w, (int)gsl_rng_uniform_int(r, 70) - 60);
                    break;
                case 2: /* one nonzero weight */
                    w = k == in / 2 ? -w : 0.0;
                    break;
                case 3: /* equal magnitudes, alternating signs */
                    w = k % 2 ? -0.375 : 0.375;
                    break;
                case 4: /* all ones, positive: the largest fixed-point weights */
                    w = (2.0 - 0x1p-52) * ldexp(1.0, (int)(k % 5));
                    break;
                case 5: /* zeros of both signs */
                    w = k % 2 ? -0.0 : 0.0;
                    break;
                default: /* the largest weight of the row an outlier's neighbour: weights 2^-11 apart */
                    w = k % 2 ? ldexp(1.0 + 0x1p-52, -11) : -1.0;
                    break;
                }
                W[o * in + k] = w;
            }
            b[o] = o == 5 ? -0.0 : gsl_ran_gaussian(r, 0.1);
        }
        refenc_mp_wspan span;
        refenc_mp_wspan_of(&span, W, OUT * in, b, OUT);
        cr_assert_eq(refenc_mp_wspan_fix(&span, W, OUT, in), REFENC_OK);
        cr_assert(span.fix != NULL);
        if (in >= 130)
            cr_expect(span.fix->out_off[OUT] > 0, "no outlier among the weights");
        for (size_t pi = 0; pi < sizeof precs / sizeof precs[0]; pi++) {
            const mpfr_prec_t prec = precs[pi];
            mpfr_ptr x = refenc_mp_alloc(ROWS * in, prec), y = refenc_mp_alloc(ROWS * OUT, prec);
            mpfr_ptr prod = refenc_mp_alloc(in + 1, 2 * prec + 53), want = refenc_mp_alloc(1, prec);
            mpfr_ptr alt = refenc_mp_alloc(1, prec);
            mpfr_ptr *pp = malloc((in + 1) * sizeof *pp);
            cr_assert(x && y && prod && want && alt && pp);
            for (size_t k = 0; k < in; k++) {
                random_x(x + k, r, (long)gsl_rng_uniform_int(r, 40) - 20); /* row 0: full values */
                if (k % 4 == 1) /* row 1: doubles at p bits, zeros, one value far above (a group of one) */
                    mpfr_set_d(x + in + k, ldexp(gsl_ran_gaussian(r, 1.0), (int)gsl_rng_uniform_int(r, 16) - 8),
                               MPFR_RNDN);
                else if (k % 4 == 2)
                    mpfr_set_zero(x + in + k, k % 8 == 2 ? -1 : 1);
                else
                    random_x(x + in + k, r, k == in / 3 ? 300 : (long)gsl_rng_uniform_int(r, 16) - 8);
                mpfr_set_ui(x + 2 * in + k, 1, MPFR_RNDN); /* row 2: all ones, one negative */
                mpfr_nextbelow(x + 2 * in + k);
                mpfr_mul_2si(x + 2 * in + k, x + 2 * in + k, (long)(k % 64), MPFR_RNDN);
                if (k == in - 1)
                    mpfr_neg(x + 2 * in + k, x + 2 * in + k, MPFR_RNDN);
            }
            refenc_mp_ws ws;
            cr_assert_eq(refenc_mp_ws_alloc(&ws, prec, 4, in + 1), REFENC_OK);
            for (size_t n = 0; n < ROWS; n++) {
                refenc_mp_row_load(&ws, x + n * in, in);
                /* which rows take the fixed-point path depends on the values'
                 * lengths and spans (random here): the path is checked on
                 * constructed rows, the_fixed_point_path_is_taken_exactly_where_the_values_fit */
                for (size_t o = 0; o < OUT; o++) {
                    for (size_t k = 0; k < in; k++) {
                        mpfr_set_prec(prod + k, 2 * prec + 53);
                        cr_assert_eq(mpfr_mul_d(prod + k, x + n * in + k, W[o * in + k], MPFR_RNDN), 0);
                        pp[k] = prod + k;
                    }
                    mpfr_set_prec(prod + in, 53);
                    mpfr_set_d(prod + in, b[o], MPFR_RNDN);
                    pp[in] = prod + in;
                    mpfr_clear_flags();
                    mpfr_sum(want, pp, in + 1, MPFR_RNDN);
                    const int want_inexact = mpfr_inexflag_p();
                    mpfr_clear_flags();
                    refenc_mp_dot_row_d(y + n * OUT + o, x + n * in, W + o * in, b + o, o, &span, &ws);
                    const int inexact = mpfr_inexflag_p();
                    snprintf(where, sizeof where, "seed %lu, n %zu, %ld bits, x row %zu, weight row %zu", test_seed(),
                             in, (long)prec, n, o);
                    cr_expect(same(y + n * OUT + o, want), "%s: got %s%a, want %s%a", where,
                              mpfr_signbit(y + n * OUT + o) ? "-" : "+", mpfr_get_d(y + n * OUT + o, MPFR_RNDN),
                              mpfr_signbit(want) ? "-" : "+", mpfr_get_d(want, MPFR_RNDN));
                    cr_expect_eq(inexact, want_inexact, "%s: inexact flag %d, mpfr_sum's %d", where, inexact,
                                 want_inexact);
                    /* the portable group sums, where x86-64's ADX code ran: the same */
                    refenc_mp_dot_portable(1);
                    mpfr_clear_flags();
                    refenc_mp_dot_row_d(alt, x + n * in, W + o * in, b + o, o, &span, &ws);
                    cr_expect(same(alt, want) && mpfr_inexflag_p() == want_inexact, "%s, portable: got %a",
                              where, mpfr_get_d(alt, MPFR_RNDN));
                    refenc_mp_dot_portable(0);
                }
            }
            /* refenc_mpk_linear_d with its own (fixed) span: the same outputs */
            mpfr_ptr y2 = refenc_mp_alloc(ROWS * OUT, prec);
            cr_assert(y2 != NULL);
            refenc_mpk_linear_d(y2, x, W, b, NULL, ROWS, in, OUT, &ws);
            for (size_t i = 0; i < ROWS * OUT; i++)
                cr_expect(same(y2 + i, y + i), "n %zu, %ld bits: linear_d's output %zu differs", in, (long)prec, i);
            refenc_mp_free(y2, ROWS * OUT);
            refenc_mp_ws_free(&ws);
            free(pp);
            refenc_mp_free(prod, in + 1), refenc_mp_free(want, 1), refenc_mp_free(alt, 1);
            refenc_mp_free(x, ROWS * in), refenc_mp_free(y, ROWS * OUT);
        }
        refenc_mp_wspan_unfix(&span);
        cr_expect(span.fix == NULL);
        free(W);
    }
    gsl_rng_free(r);
}

/* ---- the fixed-point path: where it is taken, and wide exponent spreads ---------------- */

/* want = mpfr_sum of the exact products x[k] w[k] and the bias b */
static void row_want(mpfr_ptr want, mpfr_srcptr x, const double *w, double b, size_t in)
{
    mpfr_t prod[N_MAX + 1];
    mpfr_ptr pp[N_MAX + 1];
    for (size_t k = 0; k < in; k++) {
        mpfr_init2(prod[k], mpfr_get_prec(x + k) + 53);
        cr_assert_eq(mpfr_mul_d(prod[k], x + k, w[k], MPFR_RNDN), 0, "a product was not exact");
        pp[k] = prod[k];
    }
    mpfr_init2(prod[in], 53);
    mpfr_set_d(prod[in], b, MPFR_RNDN);
    pp[in] = prod[in];
    mpfr_sum(want, pp, in + 1, MPFR_RNDN);
    for (size_t k = 0; k <= in; k++)
        mpfr_clear(prod[k]);
}

/* Every row o of W (OUT, in) and b against x: refenc_mp_dot_row_d with W in
 * fixed point (fix) or not, equal to mpfr_sum; returns how many sums took
 * the fixed-point path. */
static size_t rows_check(mpfr_srcptr x, const double *W, const double *b, size_t out, size_t in, int fix,
                         const char *what)
{
    const mpfr_prec_t prec = mpfr_get_prec(x);
    refenc_mp_wspan span;
    refenc_mp_wspan_of(&span, W, out * in, b, out);
    if (fix)
        cr_assert_eq(refenc_mp_wspan_fix(&span, W, out, in), REFENC_OK);
    refenc_mp_ws ws;
    cr_assert_eq(refenc_mp_ws_alloc(&ws, prec, 4, in + 1), REFENC_OK);
    mpfr_t got, want;
    mpfr_inits2(prec, got, want, (mpfr_ptr)0);
    refenc_mp_row_load(&ws, x, in);
    for (size_t o = 0; o < out; o++) {
        refenc_mp_dot_row_d(got, x, W + o * in, b + o, o, &span, &ws);
        row_want(want, x, W + o * in, b[o], in);
        cr_expect(same(got, want), "seed %lu, %s, %ld bits, %s, row %zu: got %a, want %a", test_seed(), what,
                  (long)prec, fix ? "fixed point" : "general", o, mpfr_get_d(got, MPFR_RNDN),
                  mpfr_get_d(want, MPFR_RNDN));
    }
    const size_t fixed = ws.fixed_rows;
    mpfr_clears(got, want, (mpfr_ptr)0);
    refenc_mp_ws_free(&ws);
    refenc_mp_wspan_unfix(&span);
    return fixed;
}

/* The path is a matter of the values' lengths, and deterministic: doubles
 * (one limb once their zero low limbs are dropped) and values of 256 bits
 * take it at every precision; values that fill 5 limbs (320 bits of ones)
 * do not.  The same sums either way (mpfr_sum's).  Negative control: the
 * same rows without fixed-point weights take it nowhere. */
Test(oracle_dot, the_fixed_point_path_is_taken_exactly_where_the_values_fit)
{
    enum { OUT = 5, IN = 24 };
    gsl_rng *r = test_rng(77);
    double W[OUT * IN], b[OUT];
    for (size_t i = 0; i < OUT * IN; i++)
        W[i] = gsl_ran_gaussian(r, 0.2);
    for (size_t o = 0; o < OUT; o++)
        b[o] = gsl_ran_gaussian(r, 0.1);
    const mpfr_prec_t precs[] = {192, 256, 320, 640};
    for (size_t pi = 0; pi < sizeof precs / sizeof precs[0]; pi++) {
        const mpfr_prec_t p = precs[pi];
        mpfr_ptr dbl = refenc_mp_alloc(IN, p), w256 = refenc_mp_alloc(IN, p), ones = refenc_mp_alloc(IN, p);
        cr_assert(dbl && w256 && ones);
        for (size_t k = 0; k < IN; k++) {
            mpfr_set_d(dbl + k, gsl_ran_gaussian(r, 1.0), MPFR_RNDN);  /* a double at p bits */
            mpfr_set_ui_2exp(w256 + k, 1, (long)(k % 7), MPFR_RNDN);    /* 2^e (1 - 2^-256): 4 full limbs */
            mpfr_sub_ui(w256 + k, w256 + k, 0, MPFR_RNDN);
            mpfr_nextbelow(w256 + k);
            mpfr_prec_round(w256 + k, 256 < p ? 256 : p, MPFR_RNDD);
            mpfr_prec_round(w256 + k, p, MPFR_RNDN);
            mpfr_set_ui(ones + k, 1, MPFR_RNDN);                        /* 1 - 2^-p: p bits of ones */
            mpfr_nextbelow(ones + k);
            if (k % 3 == 1)
                mpfr_neg(ones + k, ones + k, MPFR_RNDN);
        }
        cr_expect_eq(rows_check(dbl, W, b, OUT, IN, 1, "doubles"), OUT, "doubles at %ld bits: not every sum took "
                     "the fixed-point path", (long)p);
        cr_expect_eq(rows_check(w256, W, b, OUT, IN, 1, "256-bit values"), OUT, "256-bit values at %ld bits",
                     (long)p);
        cr_expect_eq(rows_check(ones, W, b, OUT, IN, 1, "ones"), p <= 256 ? OUT : 0,
                     "%ld bits of ones: the path %s", (long)p, p <= 256 ? "not taken" : "taken");
        cr_expect_eq(rows_check(dbl, W, b, OUT, IN, 0, "doubles"), 0, "taken without fixed-point weights");
        refenc_mp_free(dbl, IN), refenc_mp_free(w256, IN), refenc_mp_free(ones, IN);
    }
    gsl_rng_free(r);
}

/* Weights, biases and inputs whose magnitudes lie far apart (2^200 to
 * 2^1200): the accumulator must be sized from the highest of the weights'
 * and the bias's top exponents, each of its own.  Weights near 2^200 with a
 * bias near 1 and the reverse, inputs near 1 or spread over 2^-150 ..
 * 2^150, at 192 and 256 bits (where both Ziv precisions would agree on a
 * wrong sum), fixed point and general: every sum mpfr_sum's. */
static void far_apart_rows(gsl_rng *r)
{
    enum { OUT = 6, IN = 40 };
    const int scales[][3] = { /* weights, bias, inputs' spread */
        {200, 0, 0}, {0, 200, 0}, {-200, 0, 0}, {0, -200, 0}, {200, -200, 150}, {-200, 200, 150}, {100, 100, 150},
        {400, -400, 400}, {-400, 400, 400}, {0, 600, 600}, {600, 0, 600},
    };
    const mpfr_prec_t precs[] = {192, 256};
    for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
        double W[OUT * IN], b[OUT];
        for (size_t i = 0; i < OUT * IN; i++)
            W[i] = ldexp(gsl_ran_gaussian(r, 1.0), scales[si][0] + (int)(i % 3));
        for (size_t o = 0; o < OUT; o++)
            b[o] = ldexp(gsl_ran_gaussian(r, 1.0), scales[si][1] - (int)o);
        for (size_t pi = 0; pi < 2; pi++) {
            mpfr_ptr x = refenc_mp_alloc(IN, precs[pi]);
            cr_assert(x != NULL);
            for (size_t k = 0; k < IN; k++) {
                const int spread = scales[si][2];
                random_x(x + k, r, spread ? (long)gsl_rng_uniform_int(r, 2 * (unsigned long)spread + 1) - spread : 0);
            }
            char what[64];
            snprintf(what, sizeof what, "weights 2^%d, bias 2^%d, inputs 2^+-%d", scales[si][0], scales[si][1],
                     scales[si][2]);
            rows_check(x, W, b, OUT, IN, 1, what);
            rows_check(x, W, b, OUT, IN, 0, what);
            refenc_mp_free(x, IN);
        }
    }
}

/* Also on the draw of REFENC_SEED=28085, on which the fixed-point path once
 * differed from mpfr_sum by one bit of weight 2^394 at 256 bits: a group's
 * sum of 3 limbs added at weight 1 (add_shifted(..., 1) -> add_product_3)
 * let gcc give the products' high words, all zero for w = 1, the register of
 * the carry word, which the first adc chain had already set (the carry's
 * operand is early-clobber now).  Control run: the constraint without '&'
 * fails this draw. */
Test(oracle_dot, weights_bias_and_inputs_far_apart_equal_mpfr_sum)
{
    gsl_rng *r = test_rng(78);
    far_apart_rows(r);
    gsl_rng_set(r, 28085ul + 78ul * 1000003ul);
    far_apart_rows(r);
    gsl_rng_free(r);
}

/* An extra term (a bias) far above every product, and far below: the
 * accumulator spans from the lowest last bit to the highest top bit of
 * every term, the extra's own top included (its limbs above its last bit).
 * A bias of 2^300 or 2^-300 next to products near 1, at 128 and 256 bits
 * of input: mpfr_sum's sums. */
Test(oracle_dot, an_extra_term_far_above_or_below_the_products_equals_mpfr_sum)
{
    gsl_rng *r = test_rng(79);
    const mpfr_prec_t precs[] = {128, 256};
    const long scales[] = {300, -300, 64, 1000};
    for (size_t pi = 0; pi < 2; pi++)
        for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
            const size_t n = 8;
            mpfr_ptr x = refenc_mp_alloc(n, precs[pi]), y = refenc_mp_alloc(n, precs[pi]);
            cr_assert(x != NULL && y != NULL);
            for (size_t k = 0; k < n; k++) {
                random_x(x + k, r, 0);
                random_x(y + k, r, 0);
            }
            mpfr_t extra, got, want;
            mpfr_init2(extra, precs[pi]);
            random_x(extra, r, scales[si]);
            mpfr_inits2(precs[pi], got, want, (mpfr_ptr)0);
            reference_dot(want, x, y, n, extra);
            refenc_mp_ws ws;
            cr_assert_eq(refenc_mp_ws_alloc(&ws, precs[pi], 4, n + 1), REFENC_OK);
            refenc_mp_dot(got, x, 1, y, 1, n, extra, &ws);
            cr_expect(same(got, want), "seed %lu, %ld bits, extra 2^%ld: got %a, want %a", test_seed(),
                      (long)precs[pi], scales[si], mpfr_get_d(got, MPFR_RNDN), mpfr_get_d(want, MPFR_RNDN));
            refenc_mp_ws_free(&ws);
            mpfr_clears(extra, got, want, (mpfr_ptr)0);
            refenc_mp_free(x, n);
            refenc_mp_free(y, n);
        }
    gsl_rng_free(r);
}

/* Rows whose fixed-point group sums cancel down to their lowest limb (a
 * sum of one limb, or of none): inputs 1 + 2^-(p-10) next to 1, and
 * 1/2 + 2^-(p-5) next to 1/2, with weights +-1 and +-2 that cancel their
 * top limbs, at 128 and 192 bits: every sum mpfr_sum's (a sum of one limb
 * is still added, one of none is zero). */
Test(oracle_dot, fixed_point_sums_of_one_limb_equal_mpfr_sum)
{
    enum { OUT = 5, IN = 4 };
    const double W[OUT * IN] = {1, -1, 0, 0, 0, 0, 1, -1, 1, -1, 2, -2, -1, 1, 0, 0, 1, -1, -2, 2};
    const double b[OUT] = {0, 0, 0, 0, 0};
    const mpfr_prec_t precs[] = {128, 192};
    for (size_t pi = 0; pi < 2; pi++) {
        const mpfr_prec_t p = precs[pi];
        mpfr_ptr x = refenc_mp_alloc(IN, p);
        cr_assert(x != NULL);
        mpfr_set_ui_2exp(x + 0, 1, -(long)(p - 10), MPFR_RNDN);
        mpfr_add_ui(x + 0, x + 0, 1, MPFR_RNDN);
        mpfr_set_ui(x + 1, 1, MPFR_RNDN);
        mpfr_set_ui_2exp(x + 2, 1, -(long)(p - 5), MPFR_RNDN);
        mpfr_add_d(x + 2, x + 2, 0.5, MPFR_RNDN);
        mpfr_set_d(x + 3, 0.5, MPFR_RNDN);
        cr_expect_eq(rows_check(x, W, b, OUT, IN, 1, "one-limb sums"), OUT, "not every row took the fixed-point path");
        refenc_mp_free(x, IN);
    }
}

/* ---- narrow fixed point: 32-bit weights ---------------------------------------------------- */

/* Weights of 8 significant bits (bfloat16's, and the seeded parameters')
 * take the narrow fixed point (refenc_mp_wspan_fix: U32, 31-bit windows,
 * half the memory): rows of gaussians rounded to 8 bits; with a tiny
 * outlier now and then (at most one weight in 1024 of the matrix); weights
 * at the top of the window, 8 bits of ones, of both signs (the largest
 * biased integers, carries); zeros of both signs; powers of two over the
 * whole window, the lowest at its last bit and its neighbour below an
 * outlier; one nonzero weight.  Every output and its inexact flag is
 * mpfr_sum's, with x86-64's ADX code and the portable one, at 1 to 4
 * limbs.  Negative controls: weights of 53 bits, and 8-bit ones with more
 * outliers than one in 1024, keep the 64-bit fixed point (same sums). */
static double bits8(double w)
{
    int e;
    const double m = frexp(w, &e);
    return ldexp(nearbyint(ldexp(m, 8)), e - 8); /* 8 significant bits */
}

static void narrow_rows(gsl_rng *r, size_t in, int want_narrow, int outliers_per_row)
{
    enum { ROWS = 2, OUT = 6 };
    const mpfr_prec_t precs[] = {64, 96, 160, 256};
    double *W = malloc(OUT * in * sizeof *W), b[OUT];
    cr_assert(W != NULL);
    for (size_t o = 0; o < OUT; o++) {
        for (size_t k = 0; k < in; k++) {
            double w = bits8(gsl_ran_gaussian(r, 0.05));
            switch (o) {
            case 0: break; /* gaussians of 8 bits */
            case 1: /* the same, and outliers: 2^-40 below the row's largest */
                w = (int)(k % 997) < outliers_per_row ? ldexp(w, -40) : w;
                break;
            case 2: /* 8 bits of ones at the window's top, both signs */
                w = (k % 3 ? 1.0 : -1.0) * (2.0 - 0x1p-7);
                break;
            case 3: w = k % 2 ? -0.0 : 0.0; break;
            case 4: /* 2^0 .. 2^-30: the window [2^-30, 2^1); 2^-31 below it, an outlier */
                w = (k % 2 ? -1.0 : 1.0) * ldexp(1.0, k == in / 2 && outliers_per_row > 0 ? -31 : -(int)(k % 31));
                break;
            default: w = k == in / 3 ? -w : 0.0; break;
            }
            W[o * in + k] = w;
        }
        b[o] = o == 3 ? -0.0 : gsl_ran_gaussian(r, 0.1);
    }
    if (!want_narrow && outliers_per_row == 0) /* the control: 53-bit weights */
        for (size_t k = 0; k < OUT * in; k++)
            W[k] = W[k] != 0 ? W[k] * (1.0 + 0x1p-52) : W[k];
    refenc_mp_wspan span;
    refenc_mp_wspan_of(&span, W, OUT * in, b, OUT);
    cr_assert_eq(refenc_mp_wspan_fix(&span, W, OUT, in), REFENC_OK);
    cr_assert(span.fix != NULL);
    cr_expect_eq(span.fix->U32 != NULL, want_narrow, "n %zu, %d outliers a row: the %s fixed point was taken",
                 in, outliers_per_row, span.fix->U32 != NULL ? "narrow" : "wide");
    cr_expect_eq(span.fix->width, want_narrow ? 31 : 63);
    for (size_t pi = 0; pi < sizeof precs / sizeof precs[0]; pi++) {
        const mpfr_prec_t prec = precs[pi];
        mpfr_ptr x = refenc_mp_alloc(ROWS * in, prec), got = refenc_mp_alloc(2, prec), want = refenc_mp_alloc(1, prec);
        mpfr_ptr prod = refenc_mp_alloc(in + 1, 2 * prec + 53);
        mpfr_ptr *pp = malloc((in + 1) * sizeof *pp);
        cr_assert(x && got && want && prod && pp);
        for (size_t k = 0; k < in; k++) {
            random_x(x + k, r, (long)gsl_rng_uniform_int(r, 40) - 20); /* full values */
            mpfr_set_d(x + in + k, gsl_ran_gaussian(r, 1.0), MPFR_RNDN); /* doubles at p bits */
        }
        refenc_mp_ws ws;
        cr_assert_eq(refenc_mp_ws_alloc(&ws, prec, 4, in + 1), REFENC_OK);
        for (size_t n = 0; n < ROWS; n++) {
            refenc_mp_row_load(&ws, x + n * in, in);
            for (size_t o = 0; o < OUT; o++) {
                for (size_t k = 0; k < in; k++) {
                    cr_assert_eq(mpfr_mul_d(prod + k, x + n * in + k, W[o * in + k], MPFR_RNDN), 0);
                    pp[k] = prod + k;
                }
                mpfr_set_d(prod + in, b[o], MPFR_RNDN);
                pp[in] = prod + in;
                mpfr_clear_flags();
                mpfr_sum(want, pp, in + 1, MPFR_RNDN);
                const int want_inexact = mpfr_inexflag_p();
                for (int portable = 0; portable < 2; portable++) {
                    refenc_mp_dot_portable(portable);
                    mpfr_clear_flags();
                    const size_t fixed = ws.fixed_rows;
                    refenc_mp_dot_row_d(got + portable, x + n * in, W + o * in, b + o, o, &span, &ws);
                    cr_expect(same(got + portable, want) && mpfr_inexflag_p() == want_inexact,
                              "seed %lu, n %zu, %ld bits, x row %zu, weight row %zu, %s: got %a, want %a",
                              test_seed(), in, (long)prec, n, o, portable ? "portable" : "ADX where present",
                              mpfr_get_d(got + portable, MPFR_RNDN), mpfr_get_d(want, MPFR_RNDN));
                    if (n == 1 && o != 3) /* doubles: the fixed-point path is taken (zeros' row: no terms) */
                        cr_expect_eq(ws.fixed_rows, fixed + 1, "n %zu, %ld bits, row %zu: not the fixed-point path",
                                     in, (long)prec, o);
                }
                refenc_mp_dot_portable(0);
            }
        }
        refenc_mp_ws_free(&ws);
        free(pp);
        refenc_mp_free(x, ROWS * in), refenc_mp_free(got, 2), refenc_mp_free(want, 1);
        refenc_mp_free(prod, in + 1);
    }
    refenc_mp_wspan_unfix(&span);
    free(W);
}

Test(oracle_dot, narrow_fixed_point_weights_equal_mpfr_sum)
{
    gsl_rng *r = test_rng(79);
    narrow_rows(r, 40, 1, 0);
    narrow_rows(r, 3000, 1, 2);  /* 2 outliers in a row of 3000, 4 in the matrix of 18 000 */
    narrow_rows(r, 3000, 0, 0);  /* control: 53-bit weights, wide */
    narrow_rows(r, 3000, 0, 20); /* control: 40 outliers (row 1) + 1 (row 4) > 18 000 / 1024 */
    gsl_rng_free(r);
}
