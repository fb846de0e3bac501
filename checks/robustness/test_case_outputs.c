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
