/* The budgets of F32, F16 and BF16 gradients (docs/gradients.md, "Budgets
 * of F32, F16 and BF16 gradients"; ref/tool/budget.h, emulate_backward.h):
 *   - correct implementations pass: the double backward rounded to each
 *     dtype, and a backward that reduces its parameter gradients over the
 *     batch items in the dtype (data-parallel or micro-batched);
 *   - the emulated backward in float64 is the reference's backward: within
 *     the F64 gradient tolerance of the oracle (and in float32 it is not);
 *   - a planted bug fails in every dtype: the shipped backward bug
 *     layernorm_backward_mean_missing (`refenc run --grad --bug`), first at
 *     the final norm's input gradient;
 *   - the growth term is needed: without it, the budget rejects the
 *     per-item reduction on a case whose items' gradients cancel.
 * Every control here is run by the tests themselves. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/io/case_file.h"
#include "../../ref/io/grad_input.h"
#include "../../ref/io/half.h"
#include "../../ref/io/safetensors.h"
#include "../../ref/refenc.h"
#include "../../ref/tool/budget.h"
#include "../../ref/tool/emulate_backward.h"
#include "../common/tensor_set.h"
#include "../robustness/robust.h"

static const char *const grad_cases[] = {"grad_pre_rope_padding", "grad_post_rope_interleaved_padding",
                                         "grad_bert_tokens", "grad_llama_gqa"};
static const refenc_format low[] = {REFENC_FMT_F32, REFENC_FMT_F16, REFENC_FMT_BF16};

/* ---- named tensors ------------------------------------------------------------------- */

/* ---- cases, results, certify ---------------------------------------------------------- */

static void shipped(char *p, size_t n, const char *name)
{
    snprintf(p, n, "golden/cases/%s.safetensors", name);
}

static void certify(refenc_case_report *rep, const char *golden, const char *results)
{
    refenc_st_file gf, rf;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&gf, golden, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(&rf, results, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_certify_case(rep, &gf, &rf, NULL, &err), REFENC_OK, "%s", err.message);
    refenc_st_free(&gf);
    refenc_st_free(&rf);
}

/* s <- the double reference's out.output and gradients of the golden g. */
static void reference_results(tensor_set *s, const char *g, const char *dir)
{
    char out[RB_PATH_MAX + 32];
    snprintf(out, sizeof out, "%s/ref64.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "run", "--case", g, "--grad", "--out", out, NULL});
    tensor_set_load(s, out, 1);
}

/* Certifies s in format f against g; returns the report (free it). */
static void certify_as(refenc_case_report *rep, const tensor_set *s, const char *g, const char *dir, refenc_format f)
{
    char out[RB_PATH_MAX + 32];
    snprintf(out, sizeof out, "%s/results-%s.safetensors", dir, refenc_format_name(f));
    tensor_set_write(s, out, f, NULL);
    certify(rep, g, out);
}

static void load_case(refenc_case *c, double **dY, const char *g)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, g, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_case_from_file(c, &f, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_grad_dy_from_file(dY, c, &f, &err), REFENC_OK, "%s", err.message);
    cr_assert_not_null(*dY);
    refenc_st_free(&f);
}

static double worst_grad(const refenc_case_report *rep, const char **name)
{
    double w = 0;
    for (size_t i = 0; i < rep->n_outputs; i++)
        if (rep->outputs[i].grad && rep->outputs[i].excess >= w) {
            w = rep->outputs[i].excess;
            *name = rep->outputs[i].name;
        }
    return w;
}

/* ---- correct implementations pass ----------------------------------------------------- */

Test(grad_budget, the_double_backward_rounded_to_each_dtype_passes, .timeout = 60)
{
    char dir[RB_PATH_MAX], g[RB_PATH_MAX];
    rb_tmpdir(dir);
    for (size_t k = 0; k < sizeof grad_cases / sizeof grad_cases[0]; k++) {
        shipped(g, sizeof g, grad_cases[k]);
        tensor_set s;
        reference_results(&s, g, dir);
        for (size_t j = 0; j < sizeof low / sizeof low[0]; j++) {
            refenc_case_report rep;
            certify_as(&rep, &s, g, dir, low[j]);
            cr_expect_eq(rep.verdict, REFENC_VERDICT_PASS, "%s %s", grad_cases[k], refenc_format_name(low[j]));
            cr_expect(rep.grads > 10 && rep.grads_given == rep.grads, "%s: %zu of %zu gradients certified",
                      grad_cases[k], rep.grads_given, rep.grads);
            for (size_t i = 0; i < rep.n_outputs; i++)
                if (rep.outputs[i].grad)
                    cr_expect(rep.outputs[i].status == REFENC_OUT_PASS &&
                                  rep.outputs[i].rule == (low[j] == REFENC_FMT_F32 ? REFENC_RULE_POLICY
                                                                                    : REFENC_RULE_BUDGET),
                              "%s %s %s", grad_cases[k], refenc_format_name(low[j]), rep.outputs[i].name);
            const char *wn = "";
            const double w = worst_grad(&rep, &wn);
            cr_log_info("%s %s: the rounded double backward uses %.3g of its bound (%s)", grad_cases[k],
                        refenc_format_name(low[j]), w, wn);
            refenc_case_report_free(&rep);
        }
        tensor_set_free(&s);
    }
    rb_tmpdir_remove(dir);
}

/* The emulated backward's gradients into an tensor_set (the golden's names). */
static void into_nset(void *ctx, const char *name, const double *g, const double *mag, size_t n)
{
    (void)mag;
    char full[REFENC_NAME_MAX];
    snprintf(full, sizeof full, "grad.%s", name);
    tensor_set *s = ctx;
    double *d = tensor_set_get(s, full);
    if (d != NULL)
        memcpy(d, g, n * sizeof *d); /* the shape the golden's (the reference's results) */
}

/* s's gradients replaced by the emulated backward's in e on the golden g. */
static void emulated(tensor_set *s, const char *g, const refenc_emulation *e)
{
    refenc_case c;
    double *dY;
    load_case(&c, &dY, g);
    refenc_emulation_round_case(&c, e->value);
    refenc_error err;
    const refenc_grad_sink sink = {into_nset, s};
    cr_assert_eq(refenc_emulation_backward_case(&c, dY, e, &sink, &err), REFENC_OK, "%s", err.message);
    free(dY);
    refenc_case_free(&c);
}

Test(grad_budget, the_emulated_backward_in_float64_is_the_reference_backward, .timeout = 60)
{
    char dir[RB_PATH_MAX], g[RB_PATH_MAX];
    rb_tmpdir(dir);
    for (size_t k = 0; k < sizeof grad_cases / sizeof grad_cases[0]; k++) {
        shipped(g, sizeof g, grad_cases[k]);
        tensor_set s;
        reference_results(&s, g, dir);
        const refenc_emulation e64 = refenc_emulation_baseline(REFENC_FMT_F64);
        emulated(&s, g, &e64);
        refenc_case_report rep;
        certify_as(&rep, &s, g, dir, REFENC_FMT_F64);
        const char *wn = "";
        const double w = worst_grad(&rep, &wn);
        cr_expect_eq(rep.verdict, REFENC_VERDICT_PASS, "%s: the F64 emulated backward fails (%s at %g)",
                     grad_cases[k], wn, w);
        cr_expect_eq(rep.grads_given, rep.grads);
        cr_log_info("%s: the F64 emulated backward uses %.3g of the F64 gradient tolerance (%s)", grad_cases[k],
                    w, wn);
        refenc_case_report_free(&rep);
        /* control: the float32 emulation's gradients are not float64's */
        const refenc_emulation e32 = refenc_emulation_baseline(REFENC_FMT_F32);
        emulated(&s, g, &e32);
        certify_as(&rep, &s, g, dir, REFENC_FMT_F64);
        cr_expect_eq(rep.verdict, REFENC_VERDICT_FAIL, "%s: the F32 emulation passes in F64", grad_cases[k]);
        refenc_case_report_free(&rep);
        tensor_set_free(&s);
    }
    rb_tmpdir_remove(dir);
}

/* ---- a correct backward that reduces over the batch items in the dtype --------------------- */

typedef struct {
    tensor_set *s;
    const refenc_case *c;
    size_t b;           /* the item */
    refenc_format f;
} item_ctx;

/* Item b's gradients into s: a (B, L, D) gradient into its slice; a
 * parameter gradient added to the sum of the items before, rounded to f
 * (item 0's is the sum's first value). */
static void item_grad(void *ctx, const char *name, const double *g, const double *mag, size_t n)
{
    (void)mag;
    item_ctx *x = ctx;
    char full[REFENC_NAME_MAX];
    snprintf(full, sizeof full, "grad.%s", name);
    double *d = tensor_set_get(x->s, full);
    if (d == NULL)
        return;
    if (refenc_params_find(&x->c->params, name) == NULL) {
        memcpy(d + x->b * n, g, n * sizeof *d);
        return;
    }
    for (size_t i = 0; i < n; i++)
        d[i] = x->b == 0 ? g[i] : refenc_round(x->f, d[i] + g[i]);
}

/* s's gradients replaced by those of the emulated backward in f run on each
 * batch item alone (a batch of one: the items are independent), the
 * parameter gradients summed over the items in f: micro-batches of one
 * item accumulated into .grad in the dtype, or data parallel with the
 * gradients reduced in the dtype. */
static void per_item(tensor_set *s, const char *g, refenc_format f)
{
    refenc_case c;
    double *dY;
    load_case(&c, &dY, g);
    refenc_emulation_round_case(&c, f);
    const refenc_emulation e = refenc_emulation_baseline(f);
    const size_t B = c.B, L = c.L, D = c.cfg.d_model;
    for (size_t b = 0; b < B; b++) {
        refenc_case cb = c; /* item b: views into c's arrays */
        cb.B = 1;
        if (c.x != NULL)
            cb.x = c.x + b * L * D, cb.x_numel = L * D;
        if (c.tokens != NULL)
            cb.tokens = c.tokens + b * L;
        if (c.token_types != NULL)
            cb.token_types = c.token_types + b * L;
        if (c.key_padding_mask != NULL)
            cb.key_padding_mask = c.key_padding_mask + b * L;
        item_ctx x = {s, &c, b, f};
        const refenc_grad_sink sink = {item_grad, &x};
        refenc_error err;
        cr_assert_eq(refenc_emulation_backward_case(&cb, dY + b * L * D, &e, &sink, &err), REFENC_OK, "%s",
                     err.message);
    }
    free(dY);
    refenc_case_free(&c);
}

/* Whether output r exceeds the budget computed without the growth term:
 * refenc_budget's, the forward's rule on the emulated backward's baseline. */
static int exceeds_without_growth(const refenc_output_report *r, refenc_format f)
{
    refenc_baseline_error e = {.max_abs = r->base_max_abs, .nmse = r->base_nmse, .finite = 1};
    double max_abs, nmse;
    refenc_budget(&max_abs, &nmse, &e, f, r->max_want);
    return r->max_abs > max_abs || r->nmse > nmse;
}

Test(grad_budget, a_backward_reducing_over_the_batch_items_in_the_dtype_passes, .timeout = 60)
{
    char dir[RB_PATH_MAX], g[RB_PATH_MAX];
    rb_tmpdir(dir);
    for (size_t k = 0; k < sizeof grad_cases / sizeof grad_cases[0]; k++) {
        shipped(g, sizeof g, grad_cases[k]);
        tensor_set s;
        reference_results(&s, g, dir);
        for (size_t j = 1; j < sizeof low / sizeof low[0]; j++) {
            per_item(&s, g, low[j]);
            refenc_case_report rep;
            certify_as(&rep, &s, g, dir, low[j]);
            const char *wn = "";
            const double w = worst_grad(&rep, &wn);
            cr_expect_eq(rep.verdict, REFENC_VERDICT_PASS, "%s %s: %s at %g", grad_cases[k],
                         refenc_format_name(low[j]), wn, w);
            cr_log_info("%s %s: the per-item reduction uses %.3g of its budget (%s)", grad_cases[k],
                        refenc_format_name(low[j]), w, wn);
            refenc_case_report_free(&rep);
        }
        tensor_set_free(&s);
    }
    rb_tmpdir_remove(dir);
}

/* A gradient golden whose B = 16 items are one sequence (L 4, D 8, one
 * Pre-LN layer), the upstream gradient of item b the same pattern times
 * (-1)^b plus up to 0.1 of its own: every parameter gradient is a sum of 16
 * per-item gradients that nearly cancel in pairs, so that the sum is a
 * fraction of its terms' magnitudes (64 tokens' worth). */
#define CB 16
#define CL 4
#define CD 8
static void cancelling_golden(char *g, size_t n, const char *dir)
{
    char cfg[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32];
    rb_text_file(cfg, sizeof cfg, dir, "cancel.json",
                 "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 1, \"norm\": \"pre\", "
                 "\"activation\": \"gelu\"}, \"input\": {\"batch\": 16, \"seq_len\": 4}}");
    static double x[CB * CL * CD], dy[CB * CL * CD];
    uint64_t r = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < CL * CD; i++) { /* values on an 8-bit grid: exact in every dtype */
        r = r * 6364136223846793005u + 1442695040888963407u;
        const double u1 = (double)(r >> 11) * 0x1p-53;
        r = r * 6364136223846793005u + 1442695040888963407u;
        const double u2 = (double)(r >> 11) * 0x1p-53;
        x[i] = refenc_round(REFENC_FMT_BF16, 4.0 * u1 - 2.0);
        dy[i] = refenc_round(REFENC_FMT_BF16, 2.0 * u2 - 1.0);
    }
    for (size_t b = CB; b-- > 0;) /* item 0's pattern last: it is read by every item */
        for (size_t i = 0; i < CL * CD; i++) {
            r = r * 6364136223846793005u + 1442695040888963407u;
            const double eta = 0.2 * ((double)(r >> 11) * 0x1p-53 - 0.5); /* a few ulps: the items' */
            x[b * CL * CD + i] = x[i];                                      /* roundings decorrelate */
            dy[b * CL * CD + i] = refenc_round(REFENC_FMT_BF16, (b % 2 ? -dy[i] : dy[i]) + eta);
        }
    snprintf(in, sizeof in, "%s/cancel-inputs.safetensors", dir);
    const refenc_st_entry e[2] = {{"in.x", REFENC_ST_F64, 3, {CB, CL, CD}, x},
                                  {"in.grad.dY", REFENC_ST_F64, 3, {CB, CL, CD}, dy}};
    refenc_error err;
    cr_assert_eq(refenc_st_write(in, e, 2, NULL, &err), REFENC_OK, "%s", err.message);
    snprintf(g, n, "%s/cancel.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--inputs", in, "--grad", "--no-variants",
                               "--quiet", "--out-file", g, NULL});
}

Test(grad_budget, without_the_growth_term_a_correct_per_item_reduction_fails_where_items_cancel, .timeout = 120)
{
    char dir[RB_PATH_MAX], g[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    cancelling_golden(g, sizeof g, dir);
    tensor_set s;
    reference_results(&s, g, dir);
    for (size_t j = 1; j < sizeof low / sizeof low[0]; j++) {
        per_item(&s, g, low[j]);
        refenc_case_report rep;
        certify_as(&rep, &s, g, dir, low[j]);
        const char *wn = "";
        const double w = worst_grad(&rep, &wn);
        cr_expect_eq(rep.verdict, REFENC_VERDICT_PASS, "%s: the per-item reduction fails (%s at %g)",
                     refenc_format_name(low[j]), wn, w);
        size_t over = 0, params = 0;
        for (size_t i = 0; i < rep.n_outputs; i++) {
            const refenc_output_report *r = &rep.outputs[i];
            if (!r->grad || strstr(r->name, "output") != NULL || strcmp(r->name, "grad.x") == 0 ||
                strcmp(r->name, "grad.embed") == 0)
                continue;
            params++;
            if (exceeds_without_growth(r, low[j])) {
                refenc_baseline_error e = {.max_abs = r->base_max_abs, .nmse = r->base_nmse, .finite = 1};
                double nb, nn;
                refenc_budget(&nb, &nn, &e, low[j], r->max_want);
                over++;
                cr_log_info("%s %s: error %.3g, NMSE %.3g; without the growth term the budget is %.3g, NMSE "
                            "%.3g; with it %.3g, NMSE %.3g (%.3g used)", refenc_format_name(low[j]), r->name,
                            r->max_abs, r->nmse, nb, nn, r->budget_max_abs, r->budget_nmse, r->excess);
            }
        }
        cr_expect_gt(over, 0, "%s: no parameter gradient needs the growth term", refenc_format_name(low[j]));
        cr_log_info("%s: %zu of %zu parameter gradients exceed the budget without the growth term; with it "
                    "the worst uses %.3g (%s)", refenc_format_name(low[j]), over, params, w, wn);
        refenc_case_report_free(&rep);
    }
    tensor_set_free(&s);
    rb_tmpdir_remove(dir);
}

/* ---- a planted bug fails in every dtype ---------------------------------------------------- */

/* s <- the double reference's outputs and gradients with the named backward
 * bug layernorm_backward_mean_missing (tool/backward_bugs.h: every
 * LayerNorm's dx = (g - xhat mean(g xhat)) / sigma, g = dy gamma), as
 * `refenc run --case --grad --bug` writes them. */
static void planted_results(tensor_set *s, const char *g, const char *dir)
{
    char out[RB_PATH_MAX + 32];
    snprintf(out, sizeof out, "%s/planted.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "run", "--case", g, "--grad", "--bug", "layernorm_backward_mean_missing",
                               "--out", out, NULL});
    tensor_set_load(s, out, 1);
}

Test(grad_budget, a_layernorm_backward_without_its_mean_term_fails_in_every_dtype, .timeout = 60)
{
    char dir[RB_PATH_MAX], g[RB_PATH_MAX];
    rb_tmpdir(dir);
    shipped(g, sizeof g, "grad_pre_rope_padding"); /* Pre-LN: a final norm */
    tensor_set s;
    planted_results(&s, g, dir);
    const refenc_format all[] = {REFENC_FMT_F64, REFENC_FMT_F32, REFENC_FMT_F16, REFENC_FMT_BF16};
    for (size_t j = 0; j < 4; j++) {
        refenc_case_report rep;
        certify_as(&rep, &s, g, dir, all[j]);
        cr_expect_eq(rep.verdict, REFENC_VERDICT_FAIL, "%s", refenc_format_name(all[j]));
        cr_assert_geq(rep.first_grad_divergence, 0);
        const refenc_output_report *r = &rep.outputs[rep.first_grad_divergence];
        cr_expect_str_eq(r->name, "grad.layers.1.output", "%s", refenc_format_name(all[j]));
        cr_log_info("%s: first diverging backward step %s at %.3g bounds", refenc_format_name(all[j]), r->name,
                    r->excess);
        refenc_case_report_free(&rep);
    }
    tensor_set_free(&s);
    rb_tmpdir_remove(dir);
}

Test(grad_budget, a_nan_or_infinite_gradient_never_passes_in_any_dtype, .timeout = 60)
{
    char dir[RB_PATH_MAX], g[RB_PATH_MAX];
    rb_tmpdir(dir);
    shipped(g, sizeof g, "grad_bert_tokens");
    tensor_set s;
    reference_results(&s, g, dir);
    for (size_t j = 0; j < sizeof low / sizeof low[0]; j++)
        for (int inf = 0; inf < 2; inf++) {
            double *t = tensor_set_get(&s, "grad.embedding.weight");
            const double keep = t[5];
            t[5] = inf ? INFINITY : NAN;
            refenc_case_report rep;
            certify_as(&rep, &s, g, dir, low[j]);
            t[5] = keep;
            cr_expect_eq(rep.verdict, REFENC_VERDICT_FAIL, "%s", refenc_format_name(low[j]));
            const refenc_output_report *r = &rep.outputs[rep.first_grad_divergence];
            cr_expect(strcmp(r->name, "grad.embedding.weight") == 0 && r->nonfinite == 1, "%s %s",
                      refenc_format_name(low[j]), r->name);
            refenc_case_report_free(&rep);
        }
    tensor_set_free(&s);
    rb_tmpdir_remove(dir);
}

/* refenc run --case --grad --emulate: the emulated backward as a peer. */
Test(grad_budget, run_grad_emulate_writes_the_emulated_backward_in_the_dtype, .timeout = 60)
{
    char dir[RB_PATH_MAX], g[RB_PATH_MAX], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    shipped(g, sizeof g, "grad_post_rope_interleaved_padding");
    snprintf(out, sizeof out, "%s/emu.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "run", "--case", g, "--grad", "--emulate", "bf16", "--out", out, NULL});
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s", err.message);
    const refenc_st_tensor *t = refenc_st_find(&f, "grad.layers.0.linear1.weight");
    cr_assert_not_null(t);
    cr_expect_eq(t->dtype, REFENC_ST_BF16);
    refenc_st_free(&f);
    refenc_case_report rep;
    certify(&rep, g, out);
    cr_expect_eq(rep.verdict, REFENC_VERDICT_PASS);
    cr_expect_eq(rep.grads_given, rep.grads);
    refenc_case_report_free(&rep);
    /* the knobs the emulated backward does not model, and --bug, are refused */
    const char *const mods[] = {"bf16,fused", "f16,reverse", "f32,float-libm"};
    for (size_t k = 0; k < 3; k++) {
        rb_result r = rb_run((const char *[]){"refenc", "run", "--case", g, "--grad", "--emulate", mods[k], "--out",
                                              out, NULL});
        rb_expect_error(&r, 2, "run", mods[k], (const char *[]){"--grad", "does not model", NULL});
        rb_result_free(&r);
    }
    rb_result r = rb_run((const char *[]){"refenc", "run", "--case", g, "--grad", "--bug", "layernorm_eps_x10",
                                          "--out", out, NULL});
    rb_expect_error(&r, 2, "run", "--bug", (const char *[]){"--grad", "--bug", NULL});
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}

/* ---- the conventions no shipped golden holds ----------------------------------------- */

/* The worst relative difference, over the parameter gradients, between the
 * emulated backward's and the double reference's (ctx). */
typedef struct {
    const refenc_params *ref;
    double worst;
    const char *name;
} vs_ref;

static void against_ref(void *ctx, const char *name, const double *g, const double *mag, size_t n)
{
    (void)mag;
    vs_ref *v = ctx;
    const refenc_tensor *t = refenc_params_find(v->ref, name);
    if (t == NULL)
        return; /* a step's gradient (layers.{i}.output, embed): the parameters' cover them */
    cr_assert_eq(t->size, n, "%s", name);
    double scale = 0.0, err = 0.0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(t->data[i]));
        err = fmax(err, fabs(g[i] - t->data[i]));
    }
    if (scale > 0 && err / scale >= v->worst) {
        v->worst = err / scale;
        v->name = t->name;
    }
}

/* The worst relative difference of the emulated backward in e from the
 * double reference's (refenc_encoder_backward) on the case c. */
static double emulation_vs_reference(const refenc_case *c, const double *dY, const refenc_emulation *e,
                                     const char **worst)
{
    const refenc_input in = refenc_case_input(c);
    refenc_error err;
    refenc_workspace ws;
    refenc_grad_workspace gws;
    refenc_params grad;
    cr_assert_eq(refenc_workspace_alloc(&ws, &c->cfg, c->B, c->L, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_grad_workspace_alloc(&gws, &c->cfg, c->B, c->L, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_params_alloc(&grad, &c->cfg, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_encoder_backward(&grad, NULL, &gws, &ws, &c->params, &c->cfg, &in, dY, &err), 0, "%s",
                 err.message);
    vs_ref v = {&grad, 0.0, ""};
    const refenc_grad_sink sink = {against_ref, &v};
    cr_assert_eq(refenc_emulation_backward_case(c, dY, e, &sink, &err), REFENC_OK, "%s", err.message);
    static char name[REFENC_NAME_MAX];
    snprintf(name, sizeof name, "%s", v.name);
    *worst = name;
    refenc_params_free(&grad);
    refenc_grad_workspace_free(&gws);
    refenc_workspace_free(&ws);
    return v.worst;
}

/* The branches of the modelled blocks grad_llama_gqa does not take (Gemma's
 * 1 + w, the second gate half, GELU, interleaved RoPE, YaRN with its
 * attention factor and a partial rotary dim, dynamic NTK, which reads the
 * sequence length), each on grad_llama_gqa's config edited in memory: the
 * float64 emulation is the double reference's backward, every parameter
 * gradient within 1e-12 of its scale (a few ulps of its sums); control: the
 * float32 emulation is 1e-7 of its scale away or more (6e-7 to 7e-7 measured). */
Test(grad_budget, the_emulated_backward_in_float64_is_the_reference_backward_on_every_modelled_branch,
     .timeout = 60)
{
    char g[RB_PATH_MAX];
    shipped(g, sizeof g, "grad_llama_gqa");
    for (int k = 0; k < 3; k++) {
        refenc_case c;
        double *dY;
        load_case(&c, &dY, g);
        refenc_rope_scaling *sc = &c.cfg.rope_scaling;
        if (k == 0) {
            c.cfg.rmsnorm_offset = 1;
            c.cfg.glu_gate = REFENC_GLU_GATE_SECOND;
            c.cfg.activation = REFENC_ACT_GELU;
            c.cfg.rope_layout = REFENC_ROPE_INTERLEAVED;
        } else if (k == 1) {
            sc->type = REFENC_ROPE_SCALING_YARN;
            sc->factor = 4.0;
            sc->original_max_position_embeddings = 4;
            sc->partial_rotary_factor = 0.5;
        } else {
            sc->type = REFENC_ROPE_SCALING_DYNAMIC;
            sc->factor = 2.0;
            sc->max_position_embeddings = 2;
        }
        refenc_error err;
        cr_assert_eq(refenc_config_validate(&c.cfg, &err), 0, "%d: %s", k, err.message);
        const char *wn = "";
        const refenc_emulation e64 = refenc_emulation_baseline(REFENC_FMT_F64);
        const double w64 = emulation_vs_reference(&c, dY, &e64, &wn);
        cr_expect_lt(w64, 1e-12, "%d: the F64 emulation is %g of the scale off the reference (%s)", k, w64, wn);
        cr_log_info("branch set %d: the F64 emulated backward within %.3g of the scale (%s)", k, w64, wn);
        const refenc_emulation e32 = refenc_emulation_baseline(REFENC_FMT_F32);
        const double w32 = emulation_vs_reference(&c, dY, &e32, &wn);
        cr_expect_gt(w32, 1e-7, "%d: the F32 emulation is only %g off (%s)", k, w32, wn);
        free(dY);
        refenc_case_free(&c);
    }
}

/* A config outside the gradient goldens is refused by name, never computed
 * as another (embedding_normalizer_dtype: the backward would scale by the
 * exact sqrt(D); the oracle's backward refuses it, so no golden holds it). */
Test(grad_budget, the_emulated_backward_refuses_what_the_gradient_goldens_do_not_hold, .timeout = 60)
{
    char g[RB_PATH_MAX];
    shipped(g, sizeof g, "grad_bert_tokens");
    refenc_case c;
    double *dY;
    load_case(&c, &dY, g);
    c.cfg.scale_embedding = 1;
    c.cfg.embedding_normalizer_dtype = REFENC_NORMALIZER_BFLOAT16;
    const refenc_emulation e = refenc_emulation_baseline(REFENC_FMT_BF16);
    refenc_error err;
    cr_expect_eq(refenc_emulation_backward_case(&c, dY, &e, NULL, &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "embedding_normalizer_dtype") != NULL, "%s", err.message);
    free(dY);
    refenc_case_free(&c);
}

/* A gradient golden of a config the emulated backward does not model has no
 * baseline for its F32, F16 and BF16 budgets: certify says its gradients are
 * not certified, naming the key, and certifies the forward; it neither exits
 * with an error nor passes a gradient it did not compare.  Every config the
 * oracle's backward takes is now modelled (grad_llama_gqa included), so the
 * golden is grad_llama_gqa with its config edited to one the oracle refuses
 * (a scaled embedding with a bfloat16 normalizer; data and outputs unchanged,
 * so the double reference's results of the original still pass the forward).
 * Control (run): without the check in refenc_grad_baseline_measure, certify
 * fails with "the emulated backward does not support embedding_normalizer_dtype". */
Test(grad_budget, gradients_the_emulated_backward_does_not_model_are_reported_not_certified, .timeout = 60)
{
    char dir[RB_PATH_MAX], g[RB_PATH_MAX], edited[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    shipped(g, sizeof g, "grad_llama_gqa");
    tensor_set s;
    reference_results(&s, g, dir);
    rb_golden ed;
    rb_golden_load_file(&ed, g);
    rb_golden_set_config(&ed, "scale_embedding", "true");
    rb_golden_set_config(&ed, "embedding_normalizer_dtype", "\"bfloat16\"");
    snprintf(edited, sizeof edited, "%s/edited.safetensors", dir);
    rb_golden_write(&ed, edited);
    rb_golden_free(&ed);
    for (size_t j = 0; j < sizeof low / sizeof low[0]; j++) {
        refenc_case_report rep;
        certify_as(&rep, &s, edited, dir, low[j]);
        cr_expect_eq(rep.verdict, REFENC_VERDICT_PASS, "%s: the forward is certified", refenc_format_name(low[j]));
        cr_expect(rep.grads > 10 && rep.grads_given == 0, "%s: %zu of %zu gradients certified",
                  refenc_format_name(low[j]), rep.grads_given, rep.grads);
        cr_expect(strstr(rep.note, "not certified") != NULL && strstr(rep.note, "embedding_normalizer_dtype") != NULL,
                  "%s", rep.note);
        for (size_t i = 0; i < rep.n_outputs; i++)
            if (rep.outputs[i].grad)
                cr_expect(rep.outputs[i].status == REFENC_OUT_NOT_CHECKED, "%s", rep.outputs[i].name);
        refenc_case_report_free(&rep);
    }
    tensor_set_free(&s);
    rb_tmpdir_remove(dir);
}
