/* One encoder layer (ref/layer.h): Pre-LN vs Post-LN structure and the trace
 * steps, on weights constructed so that each sublayer is a constant:
 *   out_proj.weight = 0   ->  MHA(.) = out_proj.bias = b_o   (the attention
 *                             itself runs on nonzero in_proj weights; its
 *                             finite output times 0 is exactly 0)
 *   linear1 = 0           ->  hidden = act(0) = 0 for relu, gelu and gelu_tanh,
 *                             FFN(.) = linear2.bias = b2 (linear2.weight nonzero)
 * D = 3, H = 1, F = 2, B = 1, L = 2, eps = 1e-5:
 *   x  = [[1, 2, 6], [-0.5, 3, 0.5]]
 *   b_o = [0.5, -0.5, 0],  b2 = [-1, 0, 1]  (sums to 0),  norm1: gamma 1, beta 0,
 *   norm2: gamma [2.385, 1, -0.5], beta [0, 0.125, 1]
 * Pre-LN:  h = x + b_o = [[1.5, 1.5, 6], [0, 2.5, 0.5]];  y = h + b2 = [[0.5, 1.5, 7], [-1, 2.5, 1.5]]
 *          exact (short dyadic sums); norm1 = LN1(x), norm2 = LN2(h).
 * Post-LN: h = LN1(x + b_o): row 0 has mean 3, deviations [-1.5, -1.5, 3],
 *          variance 4.5; row 1 mean 1, deviations [-1, 1.5, -0.5], variance 7/6
 *          (all exact); h = dev / sqrt(var + eps).
 *          y = LN2(h + b2), and as mean(h) = mean(b2) = 0 the deviations of
 *          h + b2 are h + b2 itself; y = (h + b2) / sqrt(mean((h + b2)^2) + eps)
 *          * gamma2 + beta2.  Computed in long double from these formulas.
 */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/refenc.h"
#include "trace_log.h"
#include "unit.h"

static const double X[6] = {1.0, 2.0, 6.0, -0.5, 3.0, 0.5};
static const double B_O[3] = {0.5, -0.5, 0.0}, B_2[3] = {-1.0, 0.0, 1.0};
static const double GAMMA2[3] = {2.385, 1.0, -0.5}, BETA2[3] = {0.0, 0.125, 1.0};
static const double EPS = 1e-5;

/* Tolerances (u = 2^-53):
 * LN of a row whose mean and deviations are exact: var (u), + eps (u),
 * sqrt (u + half), division (u): 3u relative on dev/sd, below 4 ULPs with the
 * reference; times gamma (u) and plus beta (u |y|):
 *   |err| <= 4u |dev/sd * gamma| + 2u |y|.
 * Post-LN output: h is within 3u|h| (|h| <= 1.42), h + b2 rounds once: the
 * input of LN2 is off by <= 7u; its mean (about 0) by <= 10u after two
 * additions and a division; each deviation by <= 20u; the variance (>= 1) by
 * <= 24u relative, sd by 13u; dev/sd (min |dev| 0.46) by <= 60u relative;
 * times |gamma| <= 2.385 and plus beta: below 200u absolute for |y| < 4. */
#define LN_EXACT_DEV_FACTOR (4 * TEST_U)
#define POST_LN_TOL (200 * TEST_U)

typedef struct {
    refenc_config cfg;
    refenc_params p;
    refenc_workspace ws;
} layer_fixture;

static void setup(layer_fixture *f, refenc_norm_placement norm, refenc_activation act, size_t n_layers,
                  int final_norm)
{
    refenc_config_default(&f->cfg);
    f->cfg.d_model = 3, f->cfg.n_heads = 1, f->cfg.d_ff = 2, f->cfg.n_layers = n_layers;
    f->cfg.norm = norm, f->cfg.activation = act, f->cfg.layer_norm_eps = EPS;
    f->cfg.final_norm = final_norm;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&f->p, &f->cfg, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_workspace_alloc(&f->ws, &f->cfg, 1, 2, &err), REFENC_OK, "%s", err.message);
    for (size_t i = 0; i < n_layers; i++) {
        refenc_layer_params *lp = &f->p.layers[i];
        for (size_t j = 0; j < 27; j++)
            lp->in_proj_weight[j] = 0.1 * (double)(j % 7) - 0.3; /* a real attention pattern */
        for (size_t j = 0; j < 6; j++)
            lp->linear2_weight[j] = 0.7 + (double)j;              /* multiplied by hidden = 0 */
        memcpy(lp->out_proj_bias, B_O, sizeof B_O);
        memcpy(lp->linear2_bias, B_2, sizeof B_2);
        for (int d = 0; d < 3; d++)
            lp->norm1_weight[d] = 1.0;
        memcpy(lp->norm2_weight, GAMMA2, sizeof GAMMA2);
        memcpy(lp->norm2_bias, BETA2, sizeof BETA2);
    }
}

static void teardown(layer_fixture *f)
{
    refenc_workspace_free(&f->ws);
    refenc_params_free(&f->p);
}

static void run(layer_fixture *f, double *y, trace_log *log)
{
    memset(log, 0, sizeof *log);
    const refenc_trace tr = {trace_log_record, log};
    const refenc_input in = {.B = 1, .L = 2, .x = X};
    refenc_error err;
    cr_assert_eq(refenc_encoder_forward(y, &f->ws, &f->p, &f->cfg, &in, &tr, &err), REFENC_OK, "%s",
                 err.message);
}

/* LN of a row (long double, from the formulas) */
static void ln_ld(long double *y, const long double *x, const double *gamma, const double *beta)
{
    const long double mu = (x[0] + x[1] + x[2]) / 3;
    long double var = 0;
    for (int d = 0; d < 3; d++)
        var += (x[d] - mu) * (x[d] - mu);
    var /= 3;
    for (int d = 0; d < 3; d++)
        y[d] = (x[d] - mu) / sqrtl(var + EPS) * (gamma ? gamma[d] : 1) + (beta ? beta[d] : 0);
}

/* checks a traced LN of exactly known rows against ln_ld */
static void expect_ln_rows(const trace_log *log, const char *step, const double *rows,
                           const double *gamma, const double *beta)
{
    const int s = trace_log_find(log, step);
    cr_assert(s >= 0, "no trace step %s", step);
    for (int r = 0; r < 2; r++) {
        long double in[3], want[3], norm[3];
        for (int d = 0; d < 3; d++)
            in[d] = rows[r * 3 + d];
        ln_ld(want, in, gamma, beta);
        ln_ld(norm, in, gamma, NULL);
        for (int d = 0; d < 3; d++)
            EXPECT_ABS(log->value[s][r * 3 + d], (double)want[d],
                       LN_EXACT_DEV_FACTOR * fabsl(norm[d]) + 2 * TEST_U * fabsl(want[d]),
                       "%s[0,%d,%d]", step, r, d);
    }
}

static void expect_exact_rows(const trace_log *log, const char *step, const double *want)
{
    const int s = trace_log_find(log, step);
    cr_assert(s >= 0, "no trace step %s", step);
    for (int i = 0; i < 6; i++)
        EXPECT_EXACT(log->value[s][i], want[i], "%s[0,%d,%d]", step, i / 3, i % 3);
}

Test(layer, pre_ln_adds_each_sublayer_to_the_residual_stream)
{
    for (int act = 0; act < 3; act++) {
        layer_fixture f;
        setup(&f, REFENC_NORM_PRE, (refenc_activation)act, 1, 0);
        double y[6];
        trace_log log;
        run(&f, y, &log);
        const double h[6] = {1.5, 1.5, 6.0, 0.0, 2.5, 0.5};
        const double want[6] = {0.5, 1.5, 7.0, -1.0, 2.5, 1.5};
        const double attn[6] = {0.5, -0.5, 0.0, 0.5, -0.5, 0.0}, ffn[6] = {-1, 0, 1, -1, 0, 1};
        for (int i = 0; i < 6; i++)
            EXPECT_EXACT(y[i], want[i], "%s: y[0,%d,%d] = x + b_o + b2",
                         refenc_activation_name((refenc_activation)act), i / 3, i % 3);
        expect_exact_rows(&log, "layers.0.self_attn", attn);
        expect_exact_rows(&log, "layers.0.ffn", ffn);
        expect_ln_rows(&log, "layers.0.norm1", X, NULL, NULL); /* LN1(x) */
        expect_ln_rows(&log, "layers.0.norm2", h, GAMMA2, BETA2); /* LN2(x + attn) */
        /* negative control: the Post-LN structure normalises the output */
        long double post[3], in[3] = {h[0] + B_2[0], h[1] + B_2[1], h[2] + B_2[2]};
        ln_ld(post, in, GAMMA2, BETA2);
        cr_expect(fabs(y[0] - (double)post[0]) > 0.1, "Pre-LN output looks normalised");
        teardown(&f);
    }
}

Test(layer, post_ln_normalises_after_each_residual)
{
    layer_fixture f;
    setup(&f, REFENC_NORM_POST, REFENC_ACT_GELU, 1, 0);
    double y[6];
    trace_log log;
    run(&f, y, &log);

    const double r[6] = {1.5, 1.5, 6.0, 0.0, 2.5, 0.5}; /* x + b_o, exact */
    expect_ln_rows(&log, "layers.0.norm1", r, NULL, NULL);
    for (int row = 0; row < 2; row++) {
        long double in[3], h[3], z[3], want[3];
        for (int d = 0; d < 3; d++)
            in[d] = r[row * 3 + d];
        ln_ld(h, in, NULL, NULL);
        for (int d = 0; d < 3; d++)
            z[d] = h[d] + B_2[d];
        ln_ld(want, z, GAMMA2, BETA2);
        for (int d = 0; d < 3; d++) {
            const int i = row * 3 + d;
            EXPECT_ABS(y[i], (double)want[d], POST_LN_TOL, "y[0,%d,%d] = LN2(LN1(x + b_o) + b2)", row, d);
            /* negative control: the Pre-LN value x + b_o + b2 */
            EXPECT_ABS_REJECTS(y[i], r[i] + B_2[d], POST_LN_TOL, "Pre-LN value at [0,%d,%d]", row, d);
            /* negative control: the FFN added to x + b_o instead of to LN1's output */
            long double zz[3], wrong[3];
            for (int e = 0; e < 3; e++)
                zz[e] = in[e] + B_2[e];
            ln_ld(wrong, zz, GAMMA2, BETA2);
            EXPECT_ABS_REJECTS(y[i], (double)wrong[d], POST_LN_TOL, "residual around LN1 at [0,%d,%d]", row, d);
        }
    }
    const int s = trace_log_find(&log, "layers.0.norm2");
    cr_assert(s >= 0);
    cr_expect(memcmp(log.value[s], y, sizeof y) == 0, "the last step norm2 is the layer's output");
    teardown(&f);
}

static void expect_steps(const trace_log *log, const char *const *want, size_t n)
{
    cr_expect_eq(log->n, n, "%zu trace steps, want %zu", log->n, n);
    for (size_t i = 0; i < n && i < log->n; i++)
        cr_expect_str_eq(log->name[i], want[i], "step %zu", i);
}

/* The trace contract (layer.h, encoder.h): names, order, shapes. */
Test(layer, trace_steps_are_named_in_forward_order)
{
    static const char *const pre[] = {
        "embed",
        "layers.0.norm1", "layers.0.self_attn.weights", "layers.0.self_attn", "layers.0.norm2",
        "layers.0.ffn", "layers.0.output",
        "layers.1.norm1", "layers.1.self_attn.weights", "layers.1.self_attn", "layers.1.norm2",
        "layers.1.ffn", "layers.1.output",
        "norm", "output"};
    static const char *const post[] = {
        "embed",
        "layers.0.self_attn.weights", "layers.0.self_attn", "layers.0.norm1", "layers.0.ffn",
        "layers.0.norm2", "layers.0.output",
        "layers.1.self_attn.weights", "layers.1.self_attn", "layers.1.norm1", "layers.1.ffn",
        "layers.1.norm2", "layers.1.output",
        "output"};
    layer_fixture f;
    double y[6];
    trace_log log;

    setup(&f, REFENC_NORM_PRE, REFENC_ACT_RELU, 2, 1);
    run(&f, y, &log);
    expect_steps(&log, pre, sizeof pre / sizeof pre[0]);
    for (size_t i = 0; i < log.n; i++) {
        const int weights = strstr(log.name[i], "weights") != NULL;
        const size_t want_ndim = weights ? 4 : 3;
        static const size_t bhll[4] = {1, 1, 2, 2}, bld[3] = {1, 2, 3};
        const size_t *want_shape = weights ? bhll : bld;
        cr_expect_eq(log.ndim[i], want_ndim, "%s: ndim", log.name[i]);
        for (size_t d = 0; d < want_ndim; d++)
            cr_expect_eq(log.shape[i][d], want_shape[d], "%s: shape[%zu]", log.name[i], d);
    }
    teardown(&f);

    setup(&f, REFENC_NORM_POST, REFENC_ACT_RELU, 2, 0);
    run(&f, y, &log);
    expect_steps(&log, post, sizeof post / sizeof post[0]);
    teardown(&f);
}
