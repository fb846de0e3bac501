/* Selected query rows of the last layer (ref/rows.h, input.rows): the rows
 * run's every step is, bit for bit, the full run's at the selected rows --
 * for both placements, grouped-query attention, RoPE with a scaling that
 * reads the sequence length (dynamic), ALiBi, T5's bias, an additive mask,
 * key padding, windows, Qwen3's q/k norms, one and two layers -- in the
 * reference and in its emulation.  Controls: the comparison fails with the
 * selected rows' positions wrong, with the keys cut short, and with the
 * query rows read as positions 0 .. NR-1.  Bad rows are refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <jansson.h>

#include "../../ref/attention.h"
#include "../../ref/io/config_json.h"
#include "../../ref/refenc.h"
#include "../../ref/tool/emulate.h"
#include "../../ref/tool/random_params.h"
#include "../common/rows_steps.h"

/* Every step of the reference's run on c. */
static void run(trace_steps *s, const refenc_case *c)
{
    refenc_error err;
    const refenc_trace tr = {trace_steps_record, s};
    cr_assert_eq(refenc_case_run_reference(c, &tr, &err), REFENC_OK, "%s", err.message);
}

/* Every step of the float32 emulation's run on c (tool/emulate.h). */
static void run_emulated(trace_steps *s, const refenc_case *c)
{
    refenc_error err;
    const refenc_emulation e = refenc_emulation_baseline(REFENC_FMT_F32);
    const refenc_trace tr = {trace_steps_record, s};
    cr_assert_eq(refenc_emulation_run_case(c, &e, NULL, &tr, &err), REFENC_OK, "%s", err.message);
}

static size_t compare(const trace_steps *rows_run, const trace_steps *full, size_t *n)
{
    return rows_steps_mismatches(rows_run, full, ROWS, NR, n);
}

ParameterizedTestParameters(rows, rows_equal_the_full_runs_rows_bit_for_bit)
{
    static size_t idx[N_CONFIGS];
    for (size_t i = 0; i < N_CONFIGS; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_CONFIGS);
}

ParameterizedTest(size_t *k, rows, rows_equal_the_full_runs_rows_bit_for_bit)
{
    for (int emulated = 0; emulated < 2; emulated++) {
        refenc_case c;
        trace_steps full = {0}, sel = {0};
        make_case(&c, *k);
        (emulated ? run_emulated : run)(&full, &c);
        select_rows(&c);
        (emulated ? run_emulated : run)(&sel, &c);
        cr_assert_eq(full.n, sel.n, "config %zu: %zu steps, the full run %zu", *k, sel.n, full.n);
        size_t n;
        const size_t bad = compare(&sel, &full, &n);
        cr_expect_eq(bad, 0, "config %zu%s: %zu of %zu values differ from the full run's rows", *k,
                     emulated ? " (f32 emulation)" : "", bad, n);
        cr_expect_gt(n, 0);
        trace_steps_free(&full);
        trace_steps_free(&sel);
        refenc_case_free(&c);
    }
}

/* Control: one selected row's position off by one (RoPE reads it): the
 * comparison must see it. */
Test(rows, control_wrong_positions_of_the_rows_fail_the_comparison)
{
    refenc_case c;
    trace_steps full = {0}, sel = {0};
    make_case(&c, 0);
    run(&full, &c);
    refenc_case_free(&c);
    /* the selected rows alone one position off */
    make_case(&c, 0);
    select_rows(&c);
    c.positions[4] += 1;
    run(&sel, &c);
    size_t n;
    const size_t bad = compare(&sel, &full, &n);
    cr_expect_gt(bad, 0, "row 4 one position off went unseen (%zu values compared)", n);
    trace_steps_free(&full);
    trace_steps_free(&sel);
    refenc_case_free(&c);
}

/* Controls at the attention: with the keys cut short (the last key left
 * out: bidirectional, every query sees it) or the query rows read as
 * positions 0 .. NR-1 (causal), the rows' weights and outputs differ. */
Test(rows, control_wrong_key_range_or_query_positions_fail)
{
    enum { H = 2, Dh = 4 };
    const size_t n_kv = (size_t)H * NL * Dh, n_q = (size_t)H * NR * Dh;
    double *q = malloc(n_kv * sizeof *q), *k = malloc(n_kv * sizeof *k), *v = malloc(n_kv * sizeof *v);
    double *qs = malloc(n_q * sizeof *qs), *w = malloc((size_t)H * NL * NL * sizeof *w);
    double *o = malloc(n_kv * sizeof *o), *ws = malloc((size_t)H * NR * NL * sizeof *ws), *os = malloc(n_q * sizeof *os);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t i = 0; i < n_kv; i++)
        q[i] = gsl_ran_gaussian(rng, 1.0), k[i] = gsl_ran_gaussian(rng, 1.0), v[i] = gsl_ran_gaussian(rng, 1.0);
    for (size_t h = 0; h < H; h++)
        for (size_t r = 0; r < NR; r++)
            memcpy(qs + (h * NR + r) * Dh, q + (h * NL + (size_t)ROWS[r]) * Dh, Dh * sizeof *q);
    for (int causal = 0; causal < 2; causal++) {
        refenc_attn_options opt = {.causal = causal, .temperature = 1.0};
        refenc_attention_forward(o, w, q, k, v, &opt, 1, H, NL, Dh);
        size_t same = 1, cut = 1, shifted = 1;
        refenc_attention_rows_forward(os, ws, qs, k, v, ROWS, &opt, 1, H, NR, NL, Dh);
        for (size_t h = 0; h < H; h++)
            for (size_t r = 0; r < NR; r++)
                for (size_t d = 0; d < Dh; d++)
                    same &= os[(h * NR + r) * Dh + d] == o[(h * NL + (size_t)ROWS[r]) * Dh + d];
        cr_expect(same, "causal %d: the rows' outputs are not the full attention's", causal);
        if (!causal) { /* keys 0 .. NL-2: k and v of (H, NL, Dh) read with stride NL - 1 would mix heads: one head */
            refenc_attention_rows_forward(os, ws, qs, k, v, ROWS, &opt, 1, 1, NR, NL - 1, Dh);
            for (size_t r = 0; r < NR; r++)
                for (size_t d = 0; d < Dh; d++)
                    cut &= os[r * Dh + d] == o[(size_t)ROWS[r] * Dh + d];
            cr_expect(!cut, "the last key left out went unseen");
        } else {
            refenc_attention_rows_forward(os, ws, qs, k, v, NULL, &opt, 1, H, NR, NL, Dh); /* rows 0 .. NR-1 */
            for (size_t h = 0; h < H; h++)
                for (size_t r = 0; r < NR; r++)
                    for (size_t d = 0; d < Dh; d++)
                        shifted &= os[(h * NR + r) * Dh + d] == o[(h * NL + (size_t)ROWS[r]) * Dh + d];
            cr_expect(!shifted, "query rows read as positions 0 .. NR-1 went unseen under the causal mask");
        }
    }
    gsl_rng_free(rng);
    free(q), free(k), free(v), free(qs), free(w), free(o), free(ws), free(os);
}

/* Bad rows, and rows where they have no meaning, are refused naming in.rows. */
Test(rows, bad_rows_are_refused_naming_the_element)
{
    static const struct {
        int64_t rows[3];
        size_t n;
        const char *msg;
    } bad[] = {
        {{0, 9}, 2, "in.rows[1] = 9 is outside [0, seq_len = 9)"},
        {{-1}, 1, "in.rows[0] = -1 is outside"},
        {{2, 2}, 2, "in.rows[1] = 2 repeats the row before it"},
        {{3, 1}, 2, "in.rows[1] = 1 is below the row before it"},
        {{0}, 0, "in.rows: empty"},
    };
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        refenc_case c;
        refenc_error err;
        make_case(&c, 1);
        c.rows = malloc(sizeof bad[t].rows);
        memcpy(c.rows, bad[t].rows, sizeof bad[t].rows);
        c.R = bad[t].n;
        cr_expect_eq(refenc_case_validate(&c, &err), REFENC_EINVAL, "rows %zu accepted", t);
        cr_expect(strstr(err.message, bad[t].msg) != NULL, "got '%s', want '%s'", err.message, bad[t].msg);
        refenc_case_free(&c);
    }
    refenc_case c;
    refenc_error err;
    make_case(&c, 1);
    select_rows(&c);
    c.cfg.pooling = REFENC_POOL_MEAN;
    cr_expect_eq(refenc_case_validate(&c, &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "pooling 'mean' reads every row") != NULL, "%s", err.message);
    refenc_case_free(&c);
}
