/* NaN, infinities and subnormal numbers in the inputs: the reference never
 * crashes and never refuses them (they are values, not format errors), and
 * it propagates them as docs/hardening.md documents — the IEEE 754 result
 * of the formulas in ref/, which is also PyTorch's:
 *   - activations: ReLU(NaN) = NaN, ReLU(-inf) = 0, ReLU(+inf) = +inf;
 *     GELU and GELU-tanh: NaN -> NaN, +inf -> +inf, -inf -> NaN (-inf x 0);
 *   - softmax: a NaN or a +inf anywhere in a row makes the whole row NaN;
 *     -inf entries weigh 0, a row of -inf only is all 0 (a fully masked row);
 *   - LayerNorm: a NaN or an infinity in a row makes that row NaN, and no
 *     other;
 *   - encoder: from the first attention on, a NaN or an infinity anywhere in
 *     a batch item's input makes that whole item NaN — even positions that
 *     do not attend to it (padded, or later under the causal mask), whose
 *     weight 0 multiplies it (0 x NaN = NaN, as in PyTorch's matmul) — and
 *     leaves the other items bit for bit as they were;
 *   - subnormal inputs give finite outputs.
 * And `refenc certify` never passes NaN where the golden is finite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../ref/activation.h"
#include "../../ref/core/case.h"
#include "../../ref/io/case_file.h"
#include "../../ref/tool/run_case.h"
#include "../../ref/layernorm.h"
#include "../../ref/softmax.h"
#include "robust.h"

static const double MIN_SUB = 0x1p-1074; /* the smallest subnormal */

/* ---- elementwise and row-wise operations -------------------------------------- */

Test(nonfinite, activations_propagate_nan_and_map_infinities)
{
    const struct {
        refenc_activation act;
        double minus_inf, plus_inf; /* NAN means NaN */
    } acts[] = {
        {REFENC_ACT_RELU, 0.0, INFINITY},
        {REFENC_ACT_GELU, NAN, INFINITY},
        {REFENC_ACT_GELU_TANH, NAN, INFINITY},
    };
    for (size_t a = 0; a < 3; a++) {
        const double x[4] = {NAN, -INFINITY, INFINITY, 3 * MIN_SUB};
        double y[4];
        refenc_activation_forward(y, x, 4, acts[a].act);
        const char *name = refenc_activation_name(acts[a].act);
        cr_expect(isnan(y[0]), "%s(NaN) = %g", name, y[0]);
        if (isnan(acts[a].minus_inf))
            cr_expect(isnan(y[1]), "%s(-inf) = %g, want NaN", name, y[1]);
        else
            cr_expect(y[1] == acts[a].minus_inf && !signbit(y[1]), "%s(-inf) = %g", name, y[1]);
        cr_expect(y[2] == acts[a].plus_inf, "%s(+inf) = %g", name, y[2]);
        /* a subnormal x: ReLU exact; GELU ~ x/2 rounds into [0, x] */
        cr_expect(isfinite(y[3]) && y[3] >= 0 && y[3] <= 3 * MIN_SUB, "%s(3 * 2^-1074) = %a", name, y[3]);
    }
}

/* Regression: a row of NaN only, or of NaN and -inf only, came out as zeros
 * (the row's maximum skipped the NaN and took the row for fully masked),
 * while a NaN next to finite values gave a NaN row.  PyTorch's softmax gives
 * NaN in all three. */
Test(nonfinite, softmax_row_with_a_nan_or_plus_inf_is_nan_and_minus_inf_weighs_0)
{
    enum { R = 8, N = 3 };
    const double s[R][N] = {
        {NAN, 1.5, 2.5},              /* NaN next to finite values      */
        {NAN, NAN, NAN},              /* NaN only                       */
        {NAN, -INFINITY, -INFINITY},  /* NaN and masked entries         */
        {-INFINITY, NAN, 0.25},       /* NaN after a masked entry       */
        {INFINITY, 1.5, 2.5},         /* +inf: inf - inf                 */
        {-INFINITY, 1.5, -INFINITY},  /* masked entries weigh 0         */
        {-INFINITY, -INFINITY, -INFINITY}, /* fully masked: all 0         */
        {MIN_SUB, -MIN_SUB, 0.0},     /* subnormal logits: uniform      */
    };
    double y[R][N];
    refenc_softmax_forward(&y[0][0], &s[0][0], R, N, 0.7);
    for (size_t r = 0; r <= 4; r++)
        for (size_t i = 0; i < N; i++)
            cr_expect(isnan(y[r][i]), "row %zu: y[%zu] = %g, want NaN", r, i, y[r][i]);
    cr_expect(y[5][0] == 0.0 && y[5][1] == 1.0 && y[5][2] == 0.0, "masked entries: %g %g %g", y[5][0], y[5][1],
              y[5][2]);
    cr_expect(y[6][0] == 0.0 && y[6][1] == 0.0 && y[6][2] == 0.0, "a fully masked row");
    /* exp(+-2^-1074 / 0.7) rounds to 1: each weight is 1/3 rounded */
    for (size_t i = 0; i < N; i++)
        cr_expect(y[7][i] == 1.0 / 3.0, "subnormal logits: y[%zu] = %a", i, y[7][i]);
}

Test(nonfinite, layernorm_row_with_a_nan_or_an_infinity_is_nan_and_no_other)
{
    enum { N = 5, D = 6 };
    double x[N][D], y_clean[N][D], y[N][D], gamma[D], beta[D];
    for (size_t n = 0; n < N; n++)
        for (size_t d = 0; d < D; d++)
            x[n][d] = 0.375 * (double)(n + 1) - 0.8125 * (double)d;
    for (size_t d = 0; d < D; d++)
        gamma[d] = 1.25 - 0.125 * (double)d, beta[d] = 0.0625 * (double)d;
    refenc_layernorm_forward(&y_clean[0][0], &x[0][0], gamma, beta, N, D, 1e-5);
    const double bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < 3; k++) {
        double xb[N][D];
        memcpy(xb, x, sizeof xb);
        xb[2][4] = bad[k];
        refenc_layernorm_forward(&y[0][0], &xb[0][0], gamma, beta, N, D, 1e-5);
        for (size_t n = 0; n < N; n++)
            for (size_t d = 0; d < D; d++) {
                if (n == 2)
                    cr_expect(isnan(y[n][d]), "x[2][4] = %g: y[2][%zu] = %g, want NaN", bad[k], d, y[n][d]);
                else
                    cr_expect(memcmp(&y[n][d], &y_clean[n][d], sizeof(double)) == 0,
                              "x[2][4] = %g changed row %zu", bad[k], n);
            }
    }
    /* a row of subnormal numbers: variance ~ 0, so y ~ beta, finite */
    for (size_t d = 0; d < D; d++)
        x[1][d] = (double)(d + 1) * MIN_SUB;
    refenc_layernorm_forward(&y[0][0], &x[0][0], gamma, beta, N, D, 1e-5);
    for (size_t d = 0; d < D; d++)
        cr_expect(isfinite(y[1][d]) && fabs(y[1][d] - beta[d]) < 1e-300, "subnormal row: y[1][%zu] = %a", d,
                  y[1][d]);
}

/* ---- the encoder, on fixture cases ------------------------------------------------ */

#define MAX_STEPS 32

typedef struct {
    size_t n;
    char name[MAX_STEPS][64];
    size_t numel[MAX_STEPS];
    double *data[MAX_STEPS];
} outputs;

static void keep(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    outputs *o = ctx;
    cr_assert_lt(o->n, (size_t)MAX_STEPS);
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    snprintf(o->name[o->n], sizeof o->name[o->n], "%s", name);
    o->numel[o->n] = n;
    o->data[o->n] = malloc((n ? n : 1) * sizeof(double));
    cr_assert_not_null(o->data[o->n]);
    memcpy(o->data[o->n], data, n * sizeof(double));
    o->n++;
}

static void outputs_free(outputs *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->data[i]);
    o->n = 0;
}

static void load_case(refenc_case *c, const char *name)
{
    char path[RB_PATH_MAX];
    rb_fixture_case(path, name);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_case_from_file(c, &f, &err), REFENC_OK, "%s", err.message);
    refenc_st_free(&f);
}

static void run(outputs *o, const refenc_case *c)
{
    memset(o, 0, sizeof *o);
    const refenc_trace tr = {keep, o};
    refenc_error err;
    cr_assert_eq(refenc_case_run_reference(c, &tr, &err), REFENC_OK, "%s", err.message);
}

/* x[b0, l0, d0] = v: every step from the first attention on is NaN over
 * batch item b0 and bit-identical to the clean run over the other items.
 * Before it (Pre-LN's first norm1), only row l0 is NaN.  The attention
 * weights themselves are NaN only in the rows whose scores see the value
 * (a query row whose every key is masked stays 0), so for them only the
 * other items are checked. */
static void expect_item_poisoned(const char *case_name, size_t b0, size_t l0, size_t d0, double v)
{
    refenc_case c;
    load_case(&c, case_name);
    cr_assert_eq(c.component, REFENC_COMP_ENCODER);
    cr_assert(c.x != NULL && b0 < c.B && l0 < c.L);
    outputs clean, bad;
    run(&clean, &c);
    const size_t D = c.cfg.d_model;
    c.x[(b0 * c.L + l0) * D + d0] = v;
    run(&bad, &c);
    cr_assert_eq(clean.n, bad.n);
    for (size_t s = 0; s < bad.n; s++) {
        if (strcmp(bad.name[s], "embed") == 0)
            continue;
        const int weights = strstr(bad.name[s], "weights") != NULL;
        const int row_only = c.cfg.norm == REFENC_NORM_PRE && strcmp(bad.name[s], "layers.0.norm1") == 0;
        /* every step is (B, ...) batch-first: item b is a contiguous block */
        const size_t per_item = bad.numel[s] / c.B;
        size_t nan_in = 0, wrong_in = 0, changed_out = 0;
        for (size_t i = 0; i < bad.numel[s]; i++) {
            const int nan = isnan(bad.data[s][i]) != 0;
            if (i / per_item != b0) {
                changed_out += memcmp(&bad.data[s][i], &clean.data[s][i], sizeof(double)) != 0;
                continue;
            }
            nan_in += nan;
            if (row_only) /* (B, L, D): NaN exactly in row l0 */
                wrong_in += nan != ((i % per_item) / D == l0);
        }
        if (row_only)
            cr_expect(wrong_in == 0 && nan_in == D, "%s, x[%zu][%zu][%zu] = %g: step %s: %zu NaN, %zu misplaced",
                      case_name, b0, l0, d0, v, bad.name[s], nan_in, wrong_in);
        else if (!weights)
            cr_expect(nan_in == per_item, "%s, x[%zu][%zu][%zu] = %g: step %s has %zu NaN of %zu in item %zu",
                      case_name, b0, l0, d0, v, bad.name[s], nan_in, per_item, b0);
        cr_expect_eq(changed_out, 0, "%s, x[%zu][%zu][%zu] = %g: step %s changed %zu values of other items",
                     case_name, b0, l0, d0, v, bad.name[s], changed_out);
    }
    outputs_free(&clean);
    outputs_free(&bad);
    refenc_case_free(&c);
}

Test(nonfinite, encoder_nan_or_infinity_poisons_its_batch_item_only)
{
    /* Post-LN, ALiBi, item 0 has its last position padded */
    expect_item_poisoned("encoder_post_alibi6", 1, 2, 5, NAN);
    expect_item_poisoned("encoder_post_alibi6", 1, 2, 5, INFINITY);
    expect_item_poisoned("encoder_post_alibi6", 0, 0, 0, -INFINITY);
    /* at a padded position: its weight is 0, and 0 x NaN is NaN */
    expect_item_poisoned("encoder_post_alibi6", 0, 5, 3, NAN);
    /* Pre-LN, causal: the last position reaches the first ones (weight 0 again);
     * item 0 has its first 2 positions padded (left padding) */
    expect_item_poisoned("encoder_causal_learned", 1, 5, 7, NAN);
    expect_item_poisoned("encoder_causal_learned", 0, 0, 7, INFINITY);
}

Test(nonfinite, encoder_on_subnormal_inputs_is_finite)
{
    const char *cases[] = {"encoder_post_alibi6", "encoder_causal_learned"};
    for (size_t k = 0; k < 2; k++) {
        refenc_case c;
        load_case(&c, cases[k]);
        for (size_t i = 0; i < c.x_numel; i++)
            c.x[i] = (double)((i % 7) + 1) * (i % 2 ? -MIN_SUB : MIN_SUB);
        outputs o;
        run(&o, &c);
        for (size_t s = 0; s < o.n; s++)
            for (size_t i = 0; i < o.numel[s]; i++)
                cr_expect(isfinite(o.data[s][i]), "%s: %s[%zu] = %g", cases[k], o.name[s], i, o.data[s][i]);
        outputs_free(&o);
        refenc_case_free(&c);
    }
}

/* ---- through the CLI: run --case accepts them, certify never passes them ---------------- */

Test(nonfinite, cli_runs_a_case_with_nan_input_and_certify_fails_its_results)
{
    char dir[RB_PATH_MAX], gcase[RB_PATH_MAX], results[RB_PATH_MAX + 16], rfile[RB_PATH_MAX + 64],
        edited[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    rb_golden_dir(dir, "act_gelu", gcase);
    snprintf(results, sizeof results, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    snprintf(rfile, sizeof rfile, "%s/act_gelu.safetensors", results);
    snprintf(edited, sizeof edited, "%s/edited.safetensors", dir);

    rb_golden g;
    rb_golden_load(&g, "act_gelu");
    float *x = rb_golden_data(&g, "in.x");
    x[3] = NAN;
    x[4] = INFINITY;
    x[5] = -INFINITY;
    x[6] = 0x1p-149f; /* the smallest float subnormal */
    rb_golden_write(&g, edited);
    rb_golden_free(&g);

    const char *run_args[] = {"refenc", "run", "--case", edited, "--out", rfile, NULL};
    rb_result r = rb_run(run_args);
    cr_expect_eq(r.status, 0, "run --case on NaN inputs: exit %d: %s", r.status, r.err);
    cr_expect_str_empty(r.err);
    rb_result_free(&r);

    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, rfile, &err), REFENC_OK, "%s", err.message);
    double y[64];
    const refenc_st_tensor *t = refenc_st_find(&f, "out.output");
    cr_assert(t != NULL && t->numel == 64);
    cr_assert_eq(refenc_st_to_f64(y, &f, t, &err), REFENC_OK);
    cr_expect(isnan(y[3]) && y[4] == INFINITY && isnan(y[5]) && isfinite(y[6]) && y[6] >= 0,
              "GELU of NaN, +inf, -inf, 2^-149: %g %g %g %a", y[3], y[4], y[5], y[6]);
    refenc_st_free(&f);

    /* the golden's out.output is finite there: FAIL, exit 1, never PASS */
    const char *certify[] = {"refenc", "certify", "--golden", dir, "--results", results, "--case", "act_gelu", NULL};
    r = rb_run(certify);
    cr_expect_eq(r.status, 1, "certify: exit %d: %s%s", r.status, r.out, r.err);
    cr_expect(strstr(r.out, "3 non-finite values where the golden is finite") != NULL, "%s", r.out);
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}

/* ---- the oracle agrees ------------------------------------------------------------ */

#include "../../ref/oracle/oracle.h"

/* The golden files come from the oracle: on non-finite inputs it must give
 * what the reference gives (NaN where it gives NaN, the same infinities).
 * Regression: the oracle's ReLU took mpfr_sgn(NaN) = 0 for "not positive"
 * and gave ReLU(NaN) = 0, where the reference (and torch.relu) give NaN. */
Test(nonfinite, oracle_activations_treat_non_finite_values_as_the_reference_does)
{
    const double x[6] = {NAN, INFINITY, -INFINITY, 2.5, -1.25, 3 * MIN_SUB};
    const refenc_activation acts[3] = {REFENC_ACT_RELU, REFENC_ACT_GELU, REFENC_ACT_GELU_TANH};
    for (size_t a = 0; a < 3; a++) {
        double y_ref[6], y_mp[6];
        refenc_mp_report rep;
        refenc_activation_forward(y_ref, x, 6, acts[a]);
        cr_assert_eq(refenc_mp_activation_forward(y_mp, x, 6, acts[a], REFENC_MP_PREC_DEFAULT, &rep), REFENC_OK,
                     "%s: %s", refenc_activation_name(acts[a]), rep.error.message);
        for (size_t i = 0; i < 6; i++) {
            const char *name = refenc_activation_name(acts[a]);
            if (isnan(y_ref[i]) || isnan(y_mp[i]) || isinf(y_ref[i]))
                cr_expect(isnan(y_ref[i]) == isnan(y_mp[i]) && (isnan(y_ref[i]) || y_ref[i] == y_mp[i]),
                          "%s(%g): reference %g, oracle %g", name, x[i], y_ref[i], y_mp[i]);
            else
                cr_expect(fabs(y_ref[i] - y_mp[i]) <= 1e-14 * fabs(y_mp[i]) + 0x1p-1074, "%s(%a): reference %a, oracle %a",
                          name, x[i], y_ref[i], y_mp[i]);
        }
    }
}

static void oracle_keep(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    keep(ctx, name, data, ndim, shape);
}

/* and so does the whole encoder: every step NaN at the same elements */
Test(nonfinite, oracle_encoder_propagates_nan_as_the_reference_does)
{
    const char *cases[] = {"encoder_causal_learned", "encoder_post_alibi6"};
    for (size_t k = 0; k < 2; k++) {
        refenc_case c;
        load_case(&c, cases[k]);
        c.x[5] = NAN;
        c.x[c.x_numel - 3] = -INFINITY;
        outputs ref, mp;
        run(&ref, &c);
        memset(&mp, 0, sizeof mp);
        const refenc_trace tr = {oracle_keep, &mp};
        refenc_mp_report rep;
        cr_assert_eq(refenc_mp_case_run(&c, NULL, 1, &tr, REFENC_MP_PREC_DEFAULT, &rep), REFENC_OK, "%s",
                     rep.error.message);
        cr_assert_eq(ref.n, mp.n);
        for (size_t s = 0; s < ref.n; s++) {
            size_t differ = 0;
            for (size_t i = 0; i < ref.numel[s]; i++)
                differ += isnan(ref.data[s][i]) != isnan(mp.data[s][i]);
            cr_expect_eq(differ, 0, "%s: step %s: NaN at %zu elements in one and not the other", cases[k],
                         ref.name[s], differ);
        }
        outputs_free(&ref);
        outputs_free(&mp);
        refenc_case_free(&c);
    }
}
