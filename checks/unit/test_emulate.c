/* The emulation of low precision (ref/tool/emulate.h): the rounding helpers
 * on hand-checked values, the negative control (with every rounding the
 * identity it is the double reference, bit for bit, on every golden case),
 * and single ops whose low-precision result is predicted by hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/alibi.h"
#include "../../ref/io/case_file.h"
#include "../../ref/io/safetensors.h"
#include "../../ref/tool/emulate.h"
#include "../../ref/tool/emulate_kernels.h"
#include "../../ref/tool/run_case.h"
#include "../common/trace_steps.h"

static const char *srcdir(void)
{
    const char *s = getenv("REFENC_SRCDIR");
    return s && *s ? s : ".";
}

Test(emulate, rounding_is_nearest_even_with_subnormals_and_overflow)
{
    /* bfloat16: 8 significant bits, ulp(1) = 2^-7 */
    cr_expect_eq(refenc_round(REFENC_FMT_BF16, 1 + 0x1p-8), 1.0, "a tie goes to the even 1.0");
    cr_expect_eq(refenc_round(REFENC_FMT_BF16, 1 + 3 * 0x1p-8), 1 + 0x1p-6, "a tie goes to the even 1 + 2^-6");
    cr_expect_eq(refenc_round(REFENC_FMT_BF16, 1 + 0x1p-8 + 0x1p-30), 1 + 0x1p-7, "above the tie: up");
    cr_expect_eq(refenc_round(REFENC_FMT_BF16, 0x1p-133), 0x1p-133, "the smallest subnormal is exact");
    cr_expect_eq(refenc_round(REFENC_FMT_BF16, 0x1p-134), 0.0, "half of it ties to 0");
    cr_expect(isinf(refenc_round(REFENC_FMT_BF16, 0x1p128)), "overflow gives infinity");
    /* float16: 11 bits, subnormal unit 2^-24, largest 65504 */
    cr_expect_eq(refenc_round(REFENC_FMT_F16, 65519.0), 65504.0);
    cr_expect(isinf(refenc_round(REFENC_FMT_F16, 65520.0)), "65520 rounds to infinity");
    cr_expect_eq(refenc_round(REFENC_FMT_F16, 1.5 * 0x1p-24), 0x1p-23, "a subnormal tie goes to even");
    cr_expect_eq(refenc_round(REFENC_FMT_F16, 0x1p-25), 0.0);
    cr_expect_eq(refenc_round(REFENC_FMT_F16, 1 + 0x1p-11), 1.0);
    /* float32: 24 bits */
    cr_expect_eq(refenc_round(REFENC_FMT_F32, 1 + 0x1p-24), 1.0);
    cr_expect_eq(refenc_round(REFENC_FMT_F32, 1 + 3 * 0x1p-24), 1 + 0x1p-22);
    /* float64: the identity; NaN stays NaN in every format */
    cr_expect_eq(refenc_round(REFENC_FMT_F64, 1 + 0x1p-52), 1 + 0x1p-52);
    for (int f = 0; f < REFENC_FMT_COUNT; f++)
        cr_expect(isnan(refenc_round((refenc_format)f, NAN)), "%s", refenc_format_name((refenc_format)f));
    cr_expect_str_eq(refenc_format_name(REFENC_FMT_BF16), "BF16");
}

Test(emulate, presets_accumulate_in_float32_or_in_the_dtype)
{
    const refenc_emulation b = refenc_emulation_baseline(REFENC_FMT_BF16);
    cr_expect(b.value == REFENC_FMT_BF16 && b.acc == REFENC_FMT_F32 && !b.fused && !b.reverse_sums);
    const refenc_emulation p = refenc_emulation_pure(REFENC_FMT_F16);
    cr_expect(p.value == REFENC_FMT_F16 && p.acc == REFENC_FMT_F16);
    const refenc_emulation d = refenc_emulation_baseline(REFENC_FMT_F64);
    cr_expect(d.value == REFENC_FMT_F64 && d.acc == REFENC_FMT_F64);
}

/* y = [1, 3 2^-10, 3 2^-10] . [1, 1, 1] = 1 + 3 2^-9 = 1 + 0.75 ulp_bf16(1):
 *   float32 accumulation: exact, then rounded once to bfloat16: 1 + 2^-7;
 *   bfloat16 accumulation: 1 + 3 2^-10 rounds to 1 (0.375 ulp), twice: 1;
 *   the same in reverse order: 3 2^-10 + 3 2^-10 = 3 2^-9 is exact, + 1 gives 1 + 2^-7. */
Test(emulate, a_dot_product_differs_exactly_as_predicted)
{
    const double x[3] = {1.0, 3 * 0x1p-10, 3 * 0x1p-10}, w[3] = {1.0, 1.0, 1.0};
    double y;
    refenc_emulation e = refenc_emulation_baseline(REFENC_FMT_BF16);
    emu_linear(&e, &y, x, w, NULL, 1, 3, 1);
    cr_expect_eq(y, 1 + 0x1p-7, "float32 accumulation: %a", y);
    e = refenc_emulation_pure(REFENC_FMT_BF16);
    emu_linear(&e, &y, x, w, NULL, 1, 3, 1);
    cr_expect_eq(y, 1.0, "bfloat16 accumulation: %a", y);
    e.reverse_sums = 1;
    emu_linear(&e, &y, x, w, NULL, 1, 3, 1);
    cr_expect_eq(y, 1 + 0x1p-7, "bfloat16 accumulation in reverse: %a", y);
    /* negative control: in double every order gives the exact sum */
    e = refenc_emulation_baseline(REFENC_FMT_F64);
    emu_linear(&e, &y, x, w, NULL, 1, 3, 1);
    cr_expect_eq(y, 1 + 3 * 0x1p-9);
}

/* LayerNorm of the row [1, 3] (D = 2, eps = 0): mean 2, variance 1, output
 * [-1, 1] exactly in every format; with gamma = 1 + 2^-8 (a bfloat16 tie
 * after the product, 1 + 2^-8 itself is not a bfloat16: it is given
 * unrounded) the product rounds to even: -1 and 1 again, where float32
 * keeps -(1 + 2^-8). */
Test(emulate, layernorm_rounds_each_step_of_the_normalisation)
{
    const double x[2] = {1.0, 3.0}, gamma[2] = {1 + 0x1p-8, 1 + 0x1p-8}, beta[2] = {0, 0};
    double y[2];
    refenc_emulation e = refenc_emulation_baseline(REFENC_FMT_BF16);
    emu_layernorm(&e, y, x, gamma, beta, 1, 2, 0.0);
    cr_expect(y[0] == -1.0 && y[1] == 1.0, "bfloat16: %a %a", y[0], y[1]);
    e = refenc_emulation_baseline(REFENC_FMT_F32);
    emu_layernorm(&e, y, x, gamma, beta, 1, 2, 0.0);
    cr_expect(y[0] == -(1 + 0x1p-8) && y[1] == 1 + 0x1p-8, "float32: %a %a", y[0], y[1]);
}

/* ---- the negative control: no rounding is the reference ---------------------- */

/* The first element where two runs differ in their bits, or -1. */
static long first_difference(const trace_steps *a, const trace_steps *b, size_t *which)
{
    cr_assert_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        cr_assert_str_eq(a->name[i], b->name[i]);
        cr_assert_eq(a->numel[i], b->numel[i]);
        for (size_t k = 0; k < a->numel[i]; k++)
            if (memcmp(&a->data[i][k], &b->data[i][k], sizeof(double)) != 0) {
                *which = i;
                return (long)k;
            }
    }
    return -1;
}

static void load_case(refenc_case *c, refenc_st_file *f, const char *file)
{
    char path[4096];
    refenc_error err;
    snprintf(path, sizeof path, "%s/golden/cases/%s", srcdir(), file);
    cr_assert_eq(refenc_st_read(f, path, &err), REFENC_OK, "%s", err.message);
    memset(c, 0, sizeof *c);
    cr_assert_eq(refenc_case_from_file(c, f, &err), REFENC_OK, "%s", err.message);
}

/* Cases whose outputs bfloat16 holds exactly: ReLU of bfloat16 inputs, and
 * ALiBi when every slope is a power of two (H = 4, 6, 8: 2^-8(h+1)/C with C
 * dividing 8, and the interleaved 2^-(2k+1) for H = 6). */
static int exact_in_bf16(const refenc_case *c)
{
    if (c->component == REFENC_COMP_ACTIVATION)
        return c->cfg.activation == REFENC_ACT_RELU;
    if (c->component != REFENC_COMP_ALIBI)
        return 0;
    double m[64];
    cr_assert(c->cfg.n_heads <= 64);
    refenc_alibi_slopes(m, c->cfg.n_heads);
    for (size_t h = 0; h < c->cfg.n_heads; h++) {
        int e;
        if (frexp(m[h], &e) != 0.5)
            return 0;
    }
    return 1;
}

Test(emulate, without_rounding_it_is_the_reference_bit_for_bit)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/manifest.json", srcdir());
    json_t *m = json_load_file(path, 0, NULL);
    cr_assert_not_null(m, "%s", path);
    size_t i, n_cases = 0, n_bf16_differs = 0;
    json_t *entry;
    json_array_foreach(json_object_get(m, "cases"), i, entry) {
        refenc_case c;
        refenc_st_file f;
        refenc_error err;
        load_case(&c, &f, json_string_value(json_object_get(entry, "file")));
        trace_steps ref = {0}, emu = {0}, low = {0};
        const refenc_trace tr = {trace_steps_record, &ref}, te = {trace_steps_record, &emu},
                           tl = {trace_steps_record, &low};
        cr_assert_eq(refenc_case_run_reference(&c, &tr, &err), REFENC_OK, "%s", err.message);
        const refenc_emulation id = refenc_emulation_baseline(REFENC_FMT_F64);
        cr_assert_eq(refenc_emulation_run_case(&c, &id, NULL, &te, &err), REFENC_OK, "%s", err.message);
        size_t which = 0;
        const long k = first_difference(&ref, &emu, &which);
        cr_expect(k < 0, "%s: %s[%ld]: emulation %a, reference %a", c.name, ref.name[which], k,
                  emu.data[which][k], ref.data[which][k]);
        /* negative control of the comparison: bfloat16 changes some output */
        const refenc_emulation bf = refenc_emulation_baseline(REFENC_FMT_BF16);
        cr_assert_eq(refenc_emulation_run_case(&c, &bf, NULL, &tl, &err), REFENC_OK, "%s", err.message);
        const int differs = first_difference(&ref, &low, &which) >= 0;
        cr_expect_eq(differs, !exact_in_bf16(&c), "%s: bfloat16 %s the outputs", c.name,
                     differs ? "changes" : "does not change");
        n_bf16_differs += differs;
        n_cases++;
        trace_steps_free(&ref);
        trace_steps_free(&emu);
        trace_steps_free(&low);
        refenc_case_free(&c);
        refenc_st_free(&f);
    }
    cr_expect(n_cases > 50, "%zu cases", n_cases);
    cr_expect(n_bf16_differs > 50, "bfloat16 changes the outputs of only %zu cases", n_bf16_differs);
    json_decref(m);
}

/* RMSNorm's baseline follows each family's rounding order (docs/verdict.md):
 * scaled by (1 + w) (Gemma), x / rms and 1 + w in float32 and the product
 * cast once; scaled by w (Llama, T5), x / rms cast to the dtype, then the
 * product rounded in it.  The expected values are formed here from
 * refenc_round, step by step; the rows are such that the two orders differ
 * somewhere, so the test tells them apart (control run: the earlier
 * baseline, which cast x / rms and 1 + w before the product for Gemma too,
 * fails the Gemma rows). */
Test(emulate, rmsnorm_follows_each_familys_rounding_order)
{
    enum { N = 16, D = 4 };
    const refenc_emulation e = refenc_emulation_baseline(REFENC_FMT_BF16);
    const double w[D] = {0.0123, -0.37, 1.9, 0.51}, eps = 1e-6;
    double x[N * D], y[N * D];
    for (size_t i = 0; i < N * D; i++)
        x[i] = refenc_round(REFENC_FMT_BF16, sin(1.7 * (double)i + 0.3) * (double)(1 + i % 3));
#define R32(v) refenc_round(REFENC_FMT_F32, (v))
#define RB(v) refenc_round(REFENC_FMT_BF16, (v))
    for (int offset = 0; offset <= 1; offset++) {
        emu_rmsnorm(&e, y, x, w, N, D, eps, offset);
        int orders_differ = 0;
        for (size_t n = 0; n < N; n++) {
            double ss = 0;
            for (size_t k = 0; k < D; k++)
                ss = R32(ss + R32(x[n * D + k] * x[n * D + k]));
            const double r = R32(sqrt(R32(R32(ss / D) + eps)));
            for (size_t d = 0; d < D; d++) {
                const double xd = x[n * D + d];
                const double gemma = RB(R32(R32(xd / r) * R32(1.0 + w[d])));
                const double cast_first = offset ? RB(RB(RB(xd / r) * RB(1.0 + w[d]))) : RB(RB(xd / r) * w[d]);
                const double want = offset ? gemma : cast_first;
                cr_expect_eq(y[n * D + d], want, "offset %d, row %zu, element %zu: %.17g, want %.17g", offset, n,
                             d, y[n * D + d], want);
                orders_differ |= gemma != cast_first;
            }
        }
        cr_expect(!offset || orders_differ, "the rows do not tell Gemma's order from the cast-first one");
    }
#undef R32
#undef RB
}
