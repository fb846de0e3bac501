/* Gradient goldens (docs/golden-format.md, "Gradients"; docs/gradients.md,
 * "Certifying gradients"): the double reference's backward passes every
 * shipped gradient case in F64; planted backward bugs fail, and certify names
 * the first backward step they change; a NaN never passes; F32 gradients
 * are certified (their budgets: test_golden_grad_budget.c); bad upstream
 * gradients are refused.
 *
 * The planted bugs are computed independently of certify: the LayerNorm
 * backward with its mean term subtracted twice, applied to the final norm,
 * and the rest of the stack's backward run on its wrong gradient by the
 * public API (refenc_encoder_backward_traced of the stack without its final
 * norm, whose layers' backward does not depend on it); and a bias gradient
 * summed over one batch item only. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../common/tensor_set.h"
#include "../../ref/golden/grad.h"
#include "../../ref/io/grad_input.h"
#include "../../ref/io/case_file.h"
#include "../../ref/io/golden_names.h"
#include "../../ref/io/safetensors.h"
#include "../../ref/refenc.h"
#include "../robustness/robust.h"

static const char *const grad_cases[] = {"grad_pre_rope_padding", "grad_post_rope_interleaved_padding",
                                         "grad_bert_tokens", "grad_llama_gqa"};

/* ---- a results file as named double tensors ---------------------------------- */

/* A tensor the test needs from s (asserted). */
static double *must_get(const tensor_set *s, const char *name)
{
    double *x = tensor_set_get(s, name);
    cr_assert_not_null(x, "no tensor %s", name);
    return x;
}

/* ---- running and certifying ------------------------------------------------------- */

static void golden_path(char *p, size_t n, const char *name)
{
    snprintf(p, n, "golden/cases/%s.safetensors", name);
}

/* The reference's results (forward and --grad) for a shipped case, in out. */
static void reference_results(const char *name, const char *out)
{
    char g[RB_PATH_MAX];
    golden_path(g, sizeof g, name);
    rb_run_ok((const char *[]){"refenc", "run", "--case", g, "--grad", "--out", out, NULL});
}

static void certify(refenc_case_report *rep, const char *name, const char *results)
{
    char g[RB_PATH_MAX];
    golden_path(g, sizeof g, name);
    refenc_st_file gf, rf;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&gf, g, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(&rf, results, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_certify_case(rep, &gf, &rf, NULL, &err), REFENC_OK, "%s", err.message);
    refenc_st_free(&gf);
    refenc_st_free(&rf);
}

static const refenc_output_report *output(const refenc_case_report *rep, const char *name)
{
    for (size_t i = 0; i < rep->n_outputs; i++)
        if (strcmp(rep->outputs[i].name, name) == 0)
            return &rep->outputs[i];
    cr_assert_fail("case %s has no output %s", rep->name, name);
    return NULL;
}

Test(golden_grad, the_double_backward_passes_every_gradient_case_in_f64, .timeout = 60)
{
    char dir[RB_PATH_MAX], out[RB_PATH_MAX + 64];
    rb_tmpdir(dir);
    for (size_t k = 0; k < sizeof grad_cases / sizeof grad_cases[0]; k++) {
        snprintf(out, sizeof out, "%s/%s.safetensors", dir, grad_cases[k]);
        reference_results(grad_cases[k], out);
        refenc_case_report rep;
        certify(&rep, grad_cases[k], out);
        cr_expect_eq(rep.verdict, REFENC_VERDICT_PASS, "%s: the reference does not pass", grad_cases[k]);
        /* 17 at least: the bias-free Llama case's (every other case has biases) */
        cr_expect(rep.grads >= 17 && rep.grads_given == rep.grads, "%s: %zu of %zu gradients given",
                  grad_cases[k], rep.grads_given, rep.grads);
        double worst = 0;
        for (size_t i = 0; i < rep.n_outputs; i++)
            if (rep.outputs[i].grad) {
                cr_expect_eq(rep.outputs[i].status, REFENC_OUT_PASS, "%s", rep.outputs[i].name);
                worst = fmax(worst, rep.outputs[i].excess);
            }
        cr_log_info("%s: the reference uses %.2g of the gradient tolerance at most", grad_cases[k], worst);
        cr_expect_eq(rep.first_grad_divergence, -1);
        refenc_case_report_free(&rep);
    }
    rb_tmpdir_remove(dir);
}

/* ---- planted bugs ----------------------------------------------------------------- */

/* The LayerNorm backward with its mean term subtracted twice (tt-metal#53204):
 * dx = (g - 2 mean(g) - xhat mean(g xhat)) / sigma, g = dy gamma. */
static void ln_backward_mean_twice(double *dx, const double *dy, const double *x, const double *gamma,
                                   size_t N, size_t D, double eps)
{
    for (size_t n = 0; n < N; n++) {
        const double *xn = x + n * D, *dyn = dy + n * D;
        double mu = 0, var = 0, mg = 0, mgx = 0;
        for (size_t d = 0; d < D; d++)
            mu += xn[d];
        mu /= (double)D;
        for (size_t d = 0; d < D; d++)
            var += (xn[d] - mu) * (xn[d] - mu);
        const double sd = sqrt(var / (double)D + eps);
        for (size_t d = 0; d < D; d++) {
            mg += dyn[d] * gamma[d];
            mgx += dyn[d] * gamma[d] * (xn[d] - mu) / sd;
        }
        mg /= (double)D, mgx /= (double)D;
        for (size_t d = 0; d < D; d++)
            dx[n * D + d] = (dyn[d] * gamma[d] - 2.0 * mg - (xn[d] - mu) / sd * mgx) / sd;
    }
}

static void collect_grad(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    char full[REFENC_NAME_MAX];
    snprintf(full, sizeof full, "grad.%s", name);
    tensor_set_put(ctx, full, data, ndim, shape);
}

/* The planted final-norm bug's gradients into s (replacing the correct ones). */
static void plant_final_norm_bug(tensor_set *s, const refenc_case *c, const double *dY)
{
    const size_t B = c->B, L = c->L, D = c->cfg.d_model, n = B * L * D, N = c->cfg.n_layers;
    const refenc_input in = refenc_case_input(c);
    refenc_error err;
    refenc_workspace ws;
    refenc_grad_workspace gws;
    refenc_params grad, p2, g2;
    cr_assert_eq(refenc_workspace_alloc(&ws, &c->cfg, B, L, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_grad_workspace_alloc(&gws, &c->cfg, B, L, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_params_alloc(&grad, &c->cfg, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_encoder_backward(&grad, NULL, &gws, &ws, &c->params, &c->cfg, &in, dY, &err), 0);
    double *dh = malloc(n * sizeof *dh), *dx = malloc(n * sizeof *dx);
    ln_backward_mean_twice(dh, dY, gws.acts + N * n, c->params.norm_weight, B * L, D, c->cfg.layer_norm_eps);
    refenc_config cfg2 = c->cfg; /* the layers' backward does not depend on the final norm */
    cfg2.final_norm = 0;
    cr_assert_eq(refenc_params_alloc(&p2, &cfg2, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_params_alloc(&g2, &cfg2, &err), 0, "%s", err.message);
    for (size_t t = 0; t < p2.n_tensors; t++)
        memcpy(p2.tensors[t].data, refenc_params_find(&c->params, p2.tensors[t].name)->data,
               p2.tensors[t].size * sizeof(double));
    refenc_workspace ws2;
    refenc_grad_workspace gws2;
    cr_assert_eq(refenc_workspace_alloc(&ws2, &cfg2, B, L, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_grad_workspace_alloc(&gws2, &cfg2, B, L, &err), 0, "%s", err.message);
    const refenc_trace tr = {collect_grad, s};
    cr_assert_eq(refenc_encoder_backward_traced(&g2, dx, &gws2, &ws2, &p2, &cfg2, &in, dh, &tr, &err), 0,
                 "%s", err.message);
    for (size_t t = 0; t < g2.n_tensors; t++)
        collect_grad(s, g2.tensors[t].name, g2.tensors[t].data, g2.tensors[t].ndim, g2.tensors[t].shape);
    const size_t bld[3] = {B, L, D};
    collect_grad(s, "x", dx, 3, bld);
    free(dh), free(dx);
    refenc_params_free(&grad), refenc_params_free(&p2), refenc_params_free(&g2);
    refenc_workspace_free(&ws), refenc_workspace_free(&ws2);
    refenc_grad_workspace_free(&gws), refenc_grad_workspace_free(&gws2);
}

/* The case and its dY, from the golden file. */
static void load_case(refenc_case *c, double **dY, const char *name)
{
    char g[RB_PATH_MAX];
    golden_path(g, sizeof g, name);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, g, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_case_from_file(c, &f, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_grad_dy_from_file(dY, c, &f, &err), REFENC_OK, "%s", err.message);
    cr_assert_not_null(*dY);
    refenc_st_free(&f);
}

/* The reference's results of a case in a temporary directory (good), the
 * tensors loaded into s to plant a bug in, and where to write them (bad). */
typedef struct {
    char dir[RB_PATH_MAX], good[RB_PATH_MAX + 32], bad[RB_PATH_MAX + 32];
    tensor_set s;
} planted;

static void planted_open(planted *p, const char *name)
{
    rb_tmpdir(p->dir);
    snprintf(p->good, sizeof p->good, "%s/good.safetensors", p->dir);
    snprintf(p->bad, sizeof p->bad, "%s/bad.safetensors", p->dir);
    reference_results(name, p->good);
    tensor_set_load(&p->s, p->good, 0);
}

static void planted_close(planted *p)
{
    tensor_set_free(&p->s);
    rb_tmpdir_remove(p->dir);
}

Test(golden_grad, layernorm_mean_subtracted_twice_fails_first_at_the_last_layer_output, .timeout = 60)
{
    const char *name = "grad_pre_rope_padding"; /* Pre-LN: a final norm */
    planted p;
    planted_open(&p, name);
    refenc_case c;
    double *dY;
    load_case(&c, &dY, name);
    cr_assert(c.cfg.final_norm && c.cfg.n_layers == 2);
    plant_final_norm_bug(&p.s, &c, dY);
    tensor_set_write(&p.s, p.bad, REFENC_FMT_F64, NULL);
    refenc_case_report rep;
    certify(&rep, name, p.bad);
    cr_expect_eq(rep.verdict, REFENC_VERDICT_FAIL);
    cr_assert_geq(rep.first_grad_divergence, 0);
    /* the norm's own dgamma, dbeta are right; the gradient it passes on is not */
    cr_expect_str_eq(rep.outputs[rep.first_grad_divergence].name, "grad.layers.1.output");
    cr_expect_eq(output(&rep, "grad.norm.weight")->status, REFENC_OUT_PASS);
    cr_expect_eq(output(&rep, "grad.layers.0.output")->status, REFENC_OUT_FAIL);
    cr_expect_eq(output(&rep, "out.output")->status, REFENC_OUT_PASS);
    refenc_case_report_free(&rep);
    free(dY);
    refenc_case_free(&c);
    planted_close(&p);
}

Test(golden_grad, a_bias_gradient_of_one_batch_item_fails_at_that_bias_only, .timeout = 60)
{
    const char *name = "grad_pre_rope_padding";
    planted p;
    planted_open(&p, name);
    /* Pre-LN: linear2's output gradient is the layer's output gradient; the
     * bug sums it over the tokens of batch item 0 only (L = 5, D = 8) */
    const double *dh = must_get(&p.s, "grad.layers.1.output");
    double db[8] = {0};
    for (size_t l = 0; l < 5; l++)
        for (size_t d = 0; d < 8; d++)
            db[d] += dh[l * 8 + d];
    const size_t shape[1] = {8};
    tensor_set_put(&p.s, "grad.layers.1.linear2.bias", db, 1, shape);
    tensor_set_write(&p.s, p.bad, REFENC_FMT_F64, NULL);
    refenc_case_report rep;
    certify(&rep, name, p.bad);
    cr_expect_eq(rep.verdict, REFENC_VERDICT_FAIL);
    cr_assert_geq(rep.first_grad_divergence, 0);
    cr_expect_str_eq(rep.outputs[rep.first_grad_divergence].name, "grad.layers.1.linear2.bias");
    cr_expect_eq(output(&rep, "grad.layers.1.output")->status, REFENC_OUT_PASS);
    refenc_case_report_free(&rep);
    planted_close(&p);
}

Test(golden_grad, a_nan_gradient_never_passes_and_f32_gradients_are_certified, .timeout = 60)
{
    const char *name = "grad_post_rope_interleaved_padding";
    planted p;
    planted_open(&p, name);
    const double keep = must_get(&p.s, "grad.layers.0.norm1.weight")[3];
    must_get(&p.s, "grad.layers.0.norm1.weight")[3] = NAN;
    tensor_set_write(&p.s, p.bad, REFENC_FMT_F64, NULL);
    refenc_case_report rep;
    certify(&rep, name, p.bad);
    cr_expect_eq(rep.verdict, REFENC_VERDICT_FAIL);
    const refenc_output_report *o = output(&rep, "grad.layers.0.norm1.weight");
    cr_expect(o->status == REFENC_OUT_FAIL && o->nonfinite == 1);
    cr_expect_str_eq(rep.outputs[rep.first_grad_divergence].name, "grad.layers.0.norm1.weight");
    refenc_case_report_free(&rep);

    must_get(&p.s, "grad.layers.0.norm1.weight")[3] = keep;
    tensor_set_write(&p.s, p.bad, REFENC_FMT_F32, "grad."); /* every gradient F32: certified by their budget (test_golden_grad_budget.c) */
    certify(&rep, name, p.bad);
    cr_expect_eq(rep.verdict, REFENC_VERDICT_PASS);
    cr_expect_eq(rep.grads_given, rep.grads);
    o = output(&rep, "grad.x");
    cr_expect(o->status == REFENC_OUT_PASS, "%s", o->note);
    refenc_case_report_free(&rep);
    planted_close(&p);
}

/* ---- refused ----------------------------------------------------------------------- */

/* dir/inputs.safetensors: in.x (1, 3, 8) and in.grad.dY of the shape given,
 * its element 1 set to bad1. */
static void inputs_file(const char *path, size_t L_dy, double bad1)
{
    double x[24], dy[24];
    for (size_t i = 0; i < 24; i++)
        x[i] = (double)((int)i % 5 - 2) / 4, dy[i] = (double)((int)i % 3 - 1) / 2;
    dy[1] = bad1;
    const refenc_st_entry e[2] = {
        {.name = "in.x", .dtype = REFENC_ST_F64, .ndim = 3, .shape = {1, 3, 8}, .data = x},
        {.name = "in.grad.dY", .dtype = REFENC_ST_F64, .ndim = 3, .shape = {1, L_dy, 8}, .data = dy}};
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, e, 2, NULL, &err), REFENC_OK, "%s", err.message);
}

/* The same, with dY (1, 3, 8) of dtype F32 (the values of inputs_file, its
 * element 1 0.25) or I64 (zeros). */
static void inputs_file_typed(const char *path, refenc_st_dtype dtype)
{
    double x[24];
    float dy32[24];
    int64_t dy64[24] = {0};
    for (size_t i = 0; i < 24; i++)
        x[i] = (double)((int)i % 5 - 2) / 4, dy32[i] = (float)((int)i % 3 - 1) / 2;
    dy32[1] = 0.25f;
    const refenc_st_entry e[2] = {
        {.name = "in.x", .dtype = REFENC_ST_F64, .ndim = 3, .shape = {1, 3, 8}, .data = x},
        {.name = "in.grad.dY", .dtype = dtype, .ndim = 3, .shape = {1, 3, 8},
         .data = dtype == REFENC_ST_F32 ? (const void *)dy32 : (const void *)dy64}};
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, e, 2, NULL, &err), REFENC_OK, "%s", err.message);
}

static void expect_refused(const char *const *args, const char *cmd, const char *what, const char *fragment,
                           const char *out)
{
    rb_result r = rb_run(args);
    rb_expect_error(&r, 2, cmd, what, (const char *[]){fragment, NULL});
    rb_result_free(&r);
    cr_expect(!rb_exists(out), "%s: %s was written", what, out);
}

Test(golden_grad, bad_upstream_gradients_and_configs_are_refused, .timeout = 60)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], rms[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32],
        out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(rms, sizeof rms, "%s/r.json", dir);
    snprintf(in, sizeof in, "%s/in.safetensors", dir);
    snprintf(out, sizeof out, "%s/o.safetensors", dir);
    const char *c = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 1}}";
    const char *r = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 1, "
                    "\"norm\": \"pre\", \"sandwich_norm\": true}, \"input\": {\"batch\": 1, \"seq_len\": 3}}";
    rb_write_file(cfg, c, strlen(c));
    rb_write_file(rms, r, strlen(r));
    const char *gi[] = {"refenc", "golden", "--config", cfg, "--inputs", in, "--grad", "--quiet",
                        "--out-file", out, NULL};
    inputs_file(in, 2, 0.5);
    expect_refused(gi, "golden", "dY of the wrong shape", "expected the output's shape [1, 3, 8]", out);
    inputs_file(in, 3, NAN);
    expect_refused(gi, "golden", "a NaN in dY", "in.grad.dY' element 1 (at byte", out);
    inputs_file(in, 3, INFINITY);
    expect_refused(gi, "golden", "an infinity in dY", "is infinite", out);
    inputs_file_typed(in, REFENC_ST_I64);
    expect_refused(gi, "golden", "an integer dY", "in.grad.dY' (data at byte", out);
    expect_refused(gi, "golden", "an integer dY", "dtype I64, expected F64, F32, F16 or BF16", out);
    /* without --grad, in.grad.dY is no input of the forward */
    const char *fwd[] = {"refenc", "golden", "--config", cfg, "--inputs", in, "--quiet", "--out-file", out, NULL};
    expect_refused(fwd, "golden", "dY without --grad", "in.grad.dY", out);
    const char *rm[] = {"refenc", "golden", "--config", rms, "--grad", "--quiet", "--out-file", out, NULL};
    expect_refused(rm, "golden", "Gemma's sandwich norms", "sandwich_norm", out);
    /* the forward-only conventions have no backward yet: each refused by its key */
    static const struct {
        const char *model, *key; /* the model's keys besides d_model 8, n_heads 2, d_ff 16 */
    } forward_only[] = {
        {"\"n_layers\": 1, \"attn_logit_softcapping\": 5.0", "attn_logit_softcapping"},
        {"\"n_layers\": 1, \"query_pre_attn_scalar\": 6.0", "query_pre_attn_scalar"},
        {"\"n_layers\": 1, \"causal\": true, \"sliding_window\": 2", "sliding_window"},
        {"\"n_layers\": 1, \"local_attention\": 2", "local_attention"},
        {"\"n_layers\": 2, \"positional\": \"rope\", \"global_attn_every_n_layers\": 2, \"local_rope_theta\": 100",
         "global_attn_every_n_layers"},
        {"\"n_layers\": 2, \"positional\": \"rope\", \"sliding_window_pattern\": 2", "sliding_window_pattern"},
        {"\"n_layers\": 1, \"vocab_size\": 5, \"embedding_normalizer_dtype\": \"bfloat16\"",
         "embedding_normalizer_dtype"},
        {"\"n_layers\": 1, \"pooling\": \"mean\"", "pooling"},
        {"\"n_layers\": 1, \"linear_bias\": false, \"qkv_bias\": true", "qkv_bias"},
        {"\"n_layers\": 1, \"qk_norm\": \"rms\"", "qk_norm"},
    };
    for (size_t k = 0; k < sizeof forward_only / sizeof forward_only[0]; k++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, %s}, "
                 "\"input\": {\"batch\": 1, \"seq_len\": 3}}",
                 forward_only[k].model);
        rb_write_file(rms, text, strlen(text));
        expect_refused(rm, "golden", forward_only[k].key, forward_only[k].key, out);
    }
    const char *pl[] = {"refenc", "golden", "--config", cfg, "--grad", "--per-layer", "--quiet", "--out-file",
                        out, NULL};
    expect_refused(pl, "golden", "--per-layer", "not made in parts", out);
    const char *nr[] = {"refenc", "run", "--case", "golden/cases/encoder_pre.safetensors", "--grad", "--out", out,
                        NULL};
    expect_refused(nr, "run", "--grad on a forward case", "holds no gradients", out);

    /* the same inputs with a good dY: the case holds it as given */
    inputs_file(in, 3, 0.25);
    rb_run_ok(gi);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s", err.message);
    cr_expect_str_eq(refenc_st_metadata(&f, "grad_dY"), "given");
    cr_expect_null(refenc_st_metadata(&f, "grad_seed"), "a given dY has no seed");
    cr_expect_str_eq(refenc_st_metadata(&f, "format_version"), GOLDEN_GRAD_FORMAT_VERSION);
    double dy[24];
    cr_assert_eq(refenc_st_to_f64(dy, &f, refenc_st_find(&f, "in.grad.dY"), &err), REFENC_OK);
    cr_expect_eq(dy[1], 0.25);
    /* a case of inputs x (no vocabulary) holds their gradient, after the embedding's */
    cr_expect_not_null(refenc_st_find(&f, "grad.x"), "no grad.x");
    cr_expect_not_null(refenc_st_find(&f, "grad.embed"), "no grad.embed");
    refenc_st_free(&f);
    /* a float32 dY is taken, its values exactly */
    unlink(out);
    inputs_file_typed(in, REFENC_ST_F32);
    rb_run_ok(gi);
    cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_to_f64(dy, &f, refenc_st_find(&f, "in.grad.dY"), &err), REFENC_OK);
    cr_expect(dy[0] == -0.5 && dy[1] == 0.25 && dy[2] == 0.5, "%g %g %g", dy[0], dy[1], dy[2]);
    refenc_st_free(&f);
    rb_tmpdir_remove(dir);
}

Test(golden_grad, a_shipped_gradient_case_regenerates_byte_for_byte, .timeout = 60)
{
    char dir[RB_PATH_MAX], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(out, sizeof out, "%s/case.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--catalogue", "golden/catalogue.json", "--case", "grad_bert_tokens",
                            "--threads", "2", "--out-file", out, "--quiet", NULL});
    cr_expect(rb_same_file(out, "golden/cases/grad_bert_tokens.safetensors"));
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s", err.message);
    cr_expect_str_eq(refenc_st_metadata(&f, "grad_dY"), "seeded");
    cr_expect_str_eq(refenc_st_metadata(&f, "grad_seed"), "903");
    refenc_st_free(&f);
    rb_tmpdir_remove(dir);
}
