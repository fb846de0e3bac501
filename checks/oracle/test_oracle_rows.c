/* The oracle's selected query rows (ref/oracle/mha.c, layer.c: input.rows):
 * at a small size, every step of the oracle's rows run is, bit for bit, the
 * full oracle run's at the selected rows -- both certified by Ziv's loop, so
 * equal doubles are the expected outcome of two exact computations of the
 * same functions, whatever the precision each needed.  Control: one
 * selected row's position off by one fails the comparison. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "../../ref/oracle/oracle.h"
#include "../../ref/refenc.h"
#include "../common/rows_steps.h"

static void run_oracle(trace_steps *s, const refenc_case *c)
{
    const refenc_input in = refenc_case_input(c);
    const size_t R = c->rows != NULL ? c->R : c->L;
    double *y = malloc(c->B * R * c->cfg.d_model * sizeof *y);
    cr_assert_not_null(y);
    refenc_mp_report rep;
    const refenc_trace tr = {trace_steps_record, s};
    cr_assert_eq(refenc_mp_encoder_forward(y, &c->params, &c->cfg, &in, &tr, REFENC_MP_PREC_DEFAULT, &rep),
                 REFENC_OK, "%s", rep.error.message);
    free(y);
}

ParameterizedTestParameters(oracle_rows, rows_equal_the_full_oracle_runs_rows_bit_for_bit)
{
    static size_t idx[N_CONFIGS];
    for (size_t i = 0; i < N_CONFIGS; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_CONFIGS);
}

ParameterizedTest(size_t *k, oracle_rows, rows_equal_the_full_oracle_runs_rows_bit_for_bit)
{
    refenc_case c;
    trace_steps full = {0}, sel = {0};
    make_case(&c, *k);
    run_oracle(&full, &c);
    select_rows(&c);
    run_oracle(&sel, &c);
    cr_assert_eq(full.n, sel.n, "config %zu: %zu steps, the full run %zu", *k, sel.n, full.n);
    size_t n;
    const size_t bad = rows_steps_mismatches(&sel, &full, ROWS, NR, &n);
    cr_expect_eq(bad, 0, "config %zu: %zu of %zu values differ from the full oracle run's rows", *k, bad, n);
    cr_expect_gt(n, 0);
    trace_steps_free(&full);
    trace_steps_free(&sel);
    refenc_case_free(&c);
}

Test(oracle_rows, control_a_rows_position_off_by_one_fails_the_comparison)
{
    refenc_case c;
    trace_steps full = {0}, sel = {0};
    make_case(&c, 0);
    run_oracle(&full, &c);
    select_rows(&c);
    c.positions[4] += 1;
    run_oracle(&sel, &c);
    size_t n;
    cr_expect_gt(rows_steps_mismatches(&sel, &full, ROWS, NR, &n), 0, "went unseen (%zu values compared)", n);
    trace_steps_free(&full);
    trace_steps_free(&sel);
    refenc_case_free(&c);
}
