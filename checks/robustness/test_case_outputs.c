/* `refenc run --case` as a peer must be complete and must refuse a case it
 * cannot run: it writes every output the case lists (optional ones too: an
 * output left out would still certify, since certify skips what is not
 * provided, and nothing else would notice), each with the golden's shape, in
 * F64, and nothing else; a positional case without its positions is exit 2,
 * never a run on default positions nor a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "robust.h"

static const char *const fixture_cases[] = {
    "act_gelu", "alibi_12", "attention_basic", "attention_rope_causal", "encoder_causal_learned",
    "encoder_post_alibi6", "encoder_pre_rope", "ffn_gelu_tanh", "layernorm_small_variance", "pe_large",
    "rope_interleaved", "softmax_masked"};

Test(case_outputs, run_case_writes_every_listed_output_and_nothing_else)
{
    char dir[RB_PATH_MAX], out[RB_PATH_MAX + 32], golden[RB_PATH_MAX];
    rb_tmpdir(dir);
    snprintf(out, sizeof out, "%s/results.safetensors", dir);
    for (size_t k = 0; k < sizeof fixture_cases / sizeof fixture_cases[0]; k++) {
        rb_fixture_case(golden, fixture_cases[k]);
        rb_reference_results(fixture_cases[k], out);
        refenc_st_file g, r;
        refenc_error err;
        cr_assert_eq(refenc_st_read(&g, golden, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(refenc_st_read(&r, out, &err), REFENC_OK, "%s", err.message);
        json_t *list = json_loads(refenc_st_metadata(&g, "outputs"), 0, NULL);
        cr_assert(json_is_array(list) && json_array_size(list) > 0, "%s: no outputs listed", fixture_cases[k]);
        size_t i;
        json_t *o;
        json_array_foreach(list, i, o) {
            const char *name = json_string_value(json_object_get(o, "name"));
            const refenc_st_tensor *want = refenc_st_find(&g, name), *got = refenc_st_find(&r, name);
            cr_assert_not_null(want);
            cr_expect_not_null(got, "%s: run --case did not write %s", fixture_cases[k], name);
            if (got == NULL)
                continue;
            cr_expect_eq(got->dtype, REFENC_ST_F64, "%s: %s", fixture_cases[k], name);
            cr_expect(got->ndim == want->ndim && memcmp(got->shape, want->shape, want->ndim * sizeof(size_t)) == 0,
                      "%s: %s has another shape than the golden's", fixture_cases[k], name);
        }
        cr_expect_eq(r.n_tensors, json_array_size(list), "%s: %zu tensors written for %zu outputs",
                     fixture_cases[k], r.n_tensors, json_array_size(list));
        json_decref(list);
        refenc_st_free(&g);
        refenc_st_free(&r);
    }
    rb_tmpdir_remove(dir);
}

Test(case_outputs, a_positional_case_without_positions_is_refused)
{
    char dir[RB_PATH_MAX], gcase[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32], full[3 * RB_PATH_MAX];
    rb_tmpdir(dir);
    snprintf(gcase, sizeof gcase, "%s/case.safetensors", dir);
    snprintf(out, sizeof out, "%s/results.safetensors", dir);
    const struct {
        const char *name, *message;
    } cases[] = {
        {"rope_interleaved", "a rope case needs in.positions"},
        {"pe_large", "a sinusoidal_pe case needs in.positions of shape (L)"},
        {"alibi_12", "a alibi case needs in.positions of shape (L)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rb_golden g;
        rb_golden_load(&g, cases[k].name);
        rb_golden_drop(&g, "in.positions");
        rb_golden_write(&g, gcase);
        rb_golden_free(&g);
        const char *args[] = {"refenc", "run", "--case", gcase, "--out", out, NULL};
        rb_result r = rb_run(args);
        snprintf(full, sizeof full, "refenc run: %s: %s\n", gcase, cases[k].message);
        cr_expect_eq(r.status, 2, "%s: exit %d: %s", cases[k].name, r.status, r.err);
        cr_expect_str_eq(r.err, full, "%s", cases[k].name);
        cr_expect(!rb_exists(out), "%s: a results file was written", cases[k].name);
        rb_result_free(&r);
    }
    rb_tmpdir_remove(dir);
}

/* run --case on an edited fixture case: exit 0, out.output of that shape. */
static void expect_runs(rb_golden *g, const char *what, size_t ndim, const size_t *shape)
{
    char dir[RB_PATH_MAX], gcase[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(gcase, sizeof gcase, "%s/case.safetensors", dir);
    snprintf(out, sizeof out, "%s/results.safetensors", dir);
    rb_golden_write(g, gcase);
    const char *args[] = {"refenc", "run", "--case", gcase, "--out", out, NULL};
    rb_result r = rb_run(args);
    cr_expect_eq(r.status, 0, "%s: exit %d: %s", what, r.status, r.err);
    rb_result_free(&r);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, out, &err), REFENC_OK, "%s: %s", what, err.message);
    const refenc_st_tensor *t = refenc_st_find(&f, "out.output");
    cr_assert_not_null(t, "%s: no out.output", what);
    cr_expect(t->ndim == ndim && memcmp(t->shape, shape, ndim * sizeof *shape) == 0, "%s: out.output's shape",
              what);
    refenc_st_free(&f);
    rb_tmpdir_remove(dir);
}

Test(case_outputs, cases_at_the_edges_of_their_shapes_run)
{
    /* a vocabulary of one token: the input is still tokens, not x */
    rb_golden g;
    rb_golden_load(&g, "encoder_pre_rope"); /* tokens (2, 7), D = 32 */
    rb_golden_set_config(&g, "vocab_size", "1");
    rb_golden_set_config(&g, "padding_idx", "-1");
    const size_t emb[2] = {1, 32}, tok[2] = {2, 7};
    float *e = rb_golden_reshape(&g, "embedding.weight", REFENC_ST_F32, 2, emb);
    for (size_t i = 0; i < 32; i++)
        e[i] = 0.375f * (float)(i % 5) - 0.5f;
    rb_golden_reshape(&g, "in.tokens", REFENC_ST_I64, 2, tok); /* all token 0 */
    const size_t enc_shape[3] = {2, 7, 32};
    expect_runs(&g, "vocab_size 1", 3, enc_shape);
    rb_golden_free(&g);

    /* RoPE with a batch other than the head count: x (3, 2, 5, 8) */
    rb_golden_load(&g, "rope_interleaved"); /* x (2, 2, 5, 8) */
    const float *x2 = rb_golden_entry(&g, "in.x")->data;
    float copy[2 * 2 * 5 * 8];
    memcpy(copy, x2, sizeof copy);
    const size_t x3_shape[4] = {3, 2, 5, 8};
    float *x3 = rb_golden_reshape(&g, "in.x", REFENC_ST_F32, 4, x3_shape);
    for (size_t i = 0; i < 3 * 80; i++)
        x3[i] = copy[i % 160];
    expect_runs(&g, "rope, B = 3, H = 2", 4, x3_shape);
    rb_golden_free(&g);
}
