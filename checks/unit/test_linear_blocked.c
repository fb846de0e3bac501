/* The tools' blocked linear map (ref/tool/linear_blocked.h) is the
 * reference's refenc_linear_forward bit for bit, and the reference's runs
 * with it (refenc_case_run_reference_with, the golden generator's) are the
 * plain runs bit for bit.
 *
 * The data are seeded random doubles with full significands, signs mixed and
 * magnitudes spread over 2^-8 .. 2^8, so nearly every product and partial
 * sum rounds: any other order of the additions, or a fused multiply-add,
 * changes some bits (the negative controls run two such maps through the
 * same comparison and require it to fail).  The shapes cover the blocks'
 * edges: N and out of 1 .. 9 (the 4 x 4 blocks and their leftovers), in
 * across the 256-term passes (255, 256, 257, 511, 1025), bias and no bias. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/io/case_file.h"
#include "../../ref/io/safetensors.h"
#include "../../ref/linear.h"
#include "../../ref/tool/linear_blocked.h"
#include "../../ref/tool/run_case.h"
#include "../common/trace_steps.h"

#define SEED 0x5eed1b10c4edULL

/* splitmix64: a seeded stream of 64-bit words */
static uint64_t next_word(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A double in +-[2^-8, 2^8) with a random 53-bit significand. */
static double next_value(uint64_t *s)
{
    const uint64_t w = next_word(s);
    const double m = 1.0 + (double)(w >> 11) * 0x1p-53; /* [1, 2) */
    const int e = (int)(w & 15) - 8;
    return (w >> 4 & 1 ? -1 : 1) * ldexp(m, e);
}

static double *random_array(size_t n, uint64_t *s)
{
    double *a = malloc((n ? n : 1) * sizeof *a);
    cr_assert_not_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = next_value(s);
    return a;
}

/* How many of y's N * out elements map differs from refenc_linear_forward
 * in, bits compared, on seeded data of this shape; the first one's index in
 * *first (with both values). */
static size_t differences(refenc_linear_fn *map, size_t N, size_t in, size_t out, int bias,
                          uint64_t seed, size_t *first, double *got, double *want)
{
    uint64_t s = seed;
    double *x = random_array(N * in, &s), *W = random_array(out * in, &s), *b = random_array(out, &s);
    double *y_ref = malloc(N * out * sizeof *y_ref), *y = malloc(N * out * sizeof *y);
    cr_assert(y_ref != NULL && y != NULL);
    for (size_t i = 0; i < N * out; i++)
        y[i] = NAN; /* an element map does not write stays different */
    refenc_linear_forward(y_ref, x, W, bias ? b : NULL, N, in, out);
    map(y, x, W, bias ? b : NULL, N, in, out);
    size_t n_diff = 0;
    for (size_t i = 0; i < N * out; i++)
        if (memcmp(&y[i], &y_ref[i], sizeof y[i]) != 0 && n_diff++ == 0)
            *first = i, *got = y[i], *want = y_ref[i];
    free(x), free(W), free(b), free(y_ref), free(y);
    return n_diff;
}

static const size_t SIZES[] = {1, 2, 3, 4, 5, 7, 8, 9};
#define N_SIZES (sizeof SIZES / sizeof SIZES[0])
static const size_t LONG_IN[] = {63, 255, 256, 257, 511, 1025};
#define N_LONG (sizeof LONG_IN / sizeof LONG_IN[0])

/* Runs map over every shape; returns the shapes where it differs from the
 * reference, printing the first (expect: 1 to print them as failures). */
static size_t shapes_differing(refenc_linear_fn *map, int expect_equal)
{
    size_t bad = 0, n_shapes = 0;
    for (int bias = 0; bias < 2; bias++) {
        for (size_t i = 0; i < N_SIZES * N_SIZES * N_SIZES + N_LONG * 4; i++) {
            size_t N, in, out;
            if (i < N_SIZES * N_SIZES * N_SIZES) {
                N = SIZES[i % N_SIZES], in = SIZES[i / N_SIZES % N_SIZES], out = SIZES[i / (N_SIZES * N_SIZES)];
            } else { /* the long sums, across the passes; N, out 5 and 13: leftovers too */
                const size_t j = i - N_SIZES * N_SIZES * N_SIZES;
                in = LONG_IN[j / 4], N = j % 2 ? 13 : 8, out = j / 2 % 2 ? 5 : 12;
            }
            const uint64_t seed = SEED + 1000003 * i + bias;
            size_t first = 0;
            double got = 0, want = 0;
            const size_t n = differences(map, N, in, out, bias, seed, &first, &got, &want);
            n_shapes++;
            if (n == 0)
                continue;
            bad++;
            if (expect_equal)
                cr_expect_fail("N %zu in %zu out %zu %s (seed %#llx): %zu elements differ, "
                               "first y[%zu,%zu] = %a (%.17g), the reference's %a (%.17g)",
                               N, in, out, bias ? "bias" : "no bias", (unsigned long long)seed, n,
                               first / out, first % out, got, got, want, want);
        }
    }
    cr_assert_eq(n_shapes, 2 * (N_SIZES * N_SIZES * N_SIZES + N_LONG * 4));
    return bad;
}

Test(linear_blocked, equals_the_reference_bit_for_bit_over_every_shape)
{
    cr_expect_eq(shapes_differing(refenc_linear_blocked_forward, 1), 0);
}

/* Negative controls: the same sums in another order (even and odd terms in
 * two accumulators, added at the end), and each term fused (fma: one
 * rounding where the formula has two). */
static void two_accumulators(double *y, const double *x, const double *W, const double *b,
                             size_t N, size_t in, size_t out)
{
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < out; o++) {
            double even = 0.0, odd = 0.0;
            for (size_t k = 0; k < in; k++)
                if (k % 2)
                    odd += x[n * in + k] * W[o * in + k];
                else
                    even += x[n * in + k] * W[o * in + k];
            const double acc = even + odd;
            y[n * out + o] = b != NULL ? acc + b[o] : acc;
        }
}

static void fused(double *y, const double *x, const double *W, const double *b, size_t N,
                  size_t in, size_t out)
{
    for (size_t n = 0; n < N; n++)
        for (size_t o = 0; o < out; o++) {
            double acc = 0.0;
            for (size_t k = 0; k < in; k++)
                acc = fma(x[n * in + k], W[o * in + k], acc);
            y[n * out + o] = b != NULL ? acc + b[o] : acc;
        }
}

Test(linear_blocked, a_map_summing_in_another_order_or_fused_fails_the_comparison)
{
    /* two accumulators are the reference for in <= 2 (0 + p0, then + p1);
     * most longer shapes differ, every long one */
    const size_t all = 2 * (N_SIZES * N_SIZES * N_SIZES + N_LONG * 4);
    const size_t two = shapes_differing(two_accumulators, 0), fma_ = shapes_differing(fused, 0);
    cr_expect_gt(two, all / 2, "two accumulators differ on only %zu of %zu shapes", two, all);
    cr_expect_gt(fma_, all / 2, "fma differs on only %zu of %zu shapes", fma_, all);
    size_t first = 0;
    double got, want;
    for (size_t j = 0; j < N_LONG; j++) {
        cr_expect_gt(differences(two_accumulators, 8, LONG_IN[j], 12, 1, SEED, &first, &got, &want), 0,
                     "two accumulators pass at in %zu", LONG_IN[j]);
        cr_expect_gt(differences(fused, 8, LONG_IN[j], 12, 1, SEED, &first, &got, &want), 0,
                     "fma passes at in %zu", LONG_IN[j]);
    }
}

/* ---- the reference's runs with the map -------------------------------------- */

static const char *srcdir(void)
{
    const char *s = getenv("REFENC_SRCDIR");
    return s && *s ? s : ".";
}

/* Whether two runs' outputs are the same, name by name and bit for bit. */
static int same_outputs(const trace_steps *a, const trace_steps *b, const char *case_name)
{
    cr_assert_eq(a->n, b->n, "%s", case_name);
    for (size_t i = 0; i < a->n; i++) {
        cr_assert_str_eq(a->name[i], b->name[i]);
        cr_assert_eq(a->numel[i], b->numel[i]);
        if (memcmp(a->data[i], b->data[i], a->numel[i] * sizeof(double)) != 0)
            return 0;
    }
    return 1;
}

/* A map that counts its calls (then the reference's). */
static size_t n_calls;
static void counting(double *y, const double *x, const double *W, const double *b, size_t N,
                     size_t in, size_t out)
{
    n_calls++;
    refenc_linear_forward(y, x, W, b, N, in, out);
}

/* The linear maps a run of the case makes: 4 in an attention (q, k, v,
 * out_proj), 2 in an MLP, 3 in a gated FFN; a layer both. */
static size_t expected_calls(const refenc_case *c)
{
    const size_t ffn = c->cfg.ffn_type == REFENC_FFN_GLU ? 3 : 2;
    switch (c->component) {
    case REFENC_COMP_ENCODER: return c->cfg.n_layers * (4 + ffn);
    case REFENC_COMP_ATTENTION: return 4;
    case REFENC_COMP_FFN: return ffn;
    default: return 0;
    }
}

/* Every shipped golden case: the run with the blocked map is the plain run
 * bit for bit; every linear map of the run goes through the map given (the
 * calls counted); and a map of other sums (two accumulators) changes the
 * outputs of the cases that have a linear map, so the equality is no
 * accident of a map never called: all but the hand-checkable ones, whose
 * dyadic values make every sum exact in any order (ffn_relu). */
#define MAX_EXACT_CASES 1
Test(linear_blocked, the_references_runs_with_it_are_the_plain_runs_bit_for_bit, .timeout = 240)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/manifest.json", srcdir());
    json_t *m = json_load_file(path, 0, NULL);
    cr_assert_not_null(m, "%s", path);
    size_t i, n_cases = 0, n_with_maps = 0, n_changed = 0;
    json_t *entry;
    json_array_foreach(json_object_get(m, "cases"), i, entry) {
        refenc_case c;
        refenc_st_file f;
        refenc_error err;
        snprintf(path, sizeof path, "%s/golden/cases/%s", srcdir(),
                 json_string_value(json_object_get(entry, "file")));
        cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
        memset(&c, 0, sizeof c);
        cr_assert_eq(refenc_case_from_file(&c, &f, &err), REFENC_OK, "%s", err.message);
        trace_steps plain = {0}, blocked = {0}, other = {0};
        const refenc_trace tp = {trace_steps_record, &plain}, tb = {trace_steps_record, &blocked},
                           to = {trace_steps_record, &other};
        cr_assert_eq(refenc_case_run_reference(&c, &tp, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(refenc_case_run_reference_with(&c, refenc_linear_blocked_forward, &tb, &err),
                     REFENC_OK, "%s", err.message);
        cr_expect(same_outputs(&plain, &blocked, c.name), "%s: the blocked map's run differs", c.name);
        n_calls = 0;
        cr_assert_eq(refenc_case_run_reference_with(&c, counting, NULL, &err), REFENC_OK, "%s", err.message);
        cr_expect_eq(n_calls, expected_calls(&c), "%s: %zu linear maps through the map given, %zu expected",
                     c.name, n_calls, expected_calls(&c));
        if (expected_calls(&c) > 0) { /* the negative control */
            cr_assert_eq(refenc_case_run_reference_with(&c, two_accumulators, &to, &err), REFENC_OK);
            if (!same_outputs(&plain, &other, c.name))
                n_changed++;
            else
                cr_log_info("%s: two accumulators give the same outputs", c.name);
            n_with_maps++;
        }
        n_cases++;
        trace_steps_free(&plain), trace_steps_free(&blocked), trace_steps_free(&other);
        refenc_case_free(&c);
        refenc_st_free(&f);
    }
    cr_log_info("%zu cases, %zu with linear maps, %zu changed by two accumulators", n_cases, n_with_maps,
                n_changed);
    cr_expect(n_cases > 50, "%zu cases", n_cases);
    cr_expect(n_with_maps > 30, "only %zu cases with linear maps", n_with_maps);
    cr_expect_geq(n_changed + MAX_EXACT_CASES, n_with_maps,
                  "two accumulators change the outputs of only %zu of %zu cases", n_changed, n_with_maps);
    json_decref(m);
}
