/* The "rope_scaling" object of a model config (ref/io/rope_scaling_json.c):
 * Hugging Face's shapes read as they are, written back only when set, and
 * read back to the same config. */
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/io/config_json.h"
#include "unit.h"

static refenc_config read_config(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    cr_assert_not_null(j, "%s", je.text);
    refenc_config c;
    refenc_error err = {0};
    cr_assert_eq(refenc_config_from_json(&c, j, "model", &err), REFENC_OK, "%s", err.message);
    json_decref(j);
    return c;
}

/* Llama 3.1's config.json, as shipped (rope_type and the legacy type). */
Test(rope_scaling_json, reads_llama31_and_round_trips)
{
    const refenc_config c = read_config(
        "{\"positional\": \"rope\", \"rope_base\": 500000.0, \"d_model\": 64, \"n_heads\": 2,"
        " \"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
        " \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\", \"type\": \"llama3\"}}");
    const refenc_rope_scaling *s = &c.rope_scaling;
    cr_expect_eq(s->type, REFENC_ROPE_SCALING_LLAMA3);
    cr_expect_eq(s->factor, 8.0);
    cr_expect_eq(s->original_max_position_embeddings, 8192);
    cr_expect_eq(s->high_freq_factor, 4.0);
    json_t *j = refenc_config_to_json(&c);
    cr_assert_not_null(j);
    refenc_config back;
    refenc_error err = {0};
    cr_assert_eq(refenc_config_from_json(&back, j, "model", &err), REFENC_OK, "%s", err.message);
    json_decref(j);
    cr_expect(memcmp(&back.rope_scaling, s, sizeof *s) == 0, "the rope_scaling read back differs");
}

Test(rope_scaling_json, longrope_lists_and_partial_rotary_round_trip)
{
    const refenc_config c = read_config(
        "{\"positional\": \"rope\", \"d_model\": 32, \"n_heads\": 2, \"partial_rotary_factor\": 0.5,"
        " \"rope_scaling\": {\"type\": \"longrope\", \"max_position_embeddings\": 131072,"
        " \"original_max_position_embeddings\": 4096, \"short_factor\": [1.0, 1.5, 2.0, 3.0],"
        " \"long_factor\": [1.08, 2.6, 9.09, 30.42]}}");
    cr_expect_eq(c.rope_scaling.type, REFENC_ROPE_SCALING_LONGROPE);
    cr_expect_eq(c.rope_scaling.n_factors, 4);
    cr_expect_eq(c.rope_scaling.long_factor[3], 30.42);
    json_t *j = refenc_config_to_json(&c);
    refenc_config back;
    refenc_error err = {0};
    cr_assert_eq(refenc_config_from_json(&back, j, "model", &err), REFENC_OK, "%s", err.message);
    json_decref(j);
    cr_expect(memcmp(&back.rope_scaling, &c.rope_scaling, sizeof c.rope_scaling) == 0);
}

/* GTE's config.json: the legacy key "type", "ntk", no mixed_b (new-impl's
 * None: the fixed NTK); then the mixed form; both round-trip.  Negative
 * control: a mixed_b of null is the fixed NTK, not mixed. */
Test(rope_scaling_json, gte_ntk_and_mixed_b_round_trip)
{
    const char *texts[] = {
        "{\"positional\": \"rope\", \"rope_base\": 500000.0, \"d_model\": 64, \"n_heads\": 2,"
        " \"rope_scaling\": {\"factor\": 2.0, \"type\": \"ntk\"}}",
        "{\"positional\": \"rope\", \"d_model\": 64, \"n_heads\": 2,"
        " \"rope_scaling\": {\"factor\": 2.0, \"type\": \"ntk\", \"mixed_b\": 0.75}}"};
    for (int i = 0; i < 2; i++) {
        const refenc_config c = read_config(texts[i]);
        cr_expect_eq(c.rope_scaling.type, REFENC_ROPE_SCALING_NTK);
        cr_expect_eq(c.rope_scaling.factor, 2.0);
        cr_expect_eq(c.rope_scaling.mixed, i);
        cr_expect_eq(c.rope_scaling.mixed_b, i ? 0.75 : 0.0);
        json_t *j = refenc_config_to_json(&c);
        cr_assert_not_null(j);
        cr_expect_eq(json_object_get(json_object_get(j, "rope_scaling"), "mixed_b") != NULL, i, "mixed_b written: %d", i);
        refenc_config back;
        refenc_error err = {0};
        cr_assert_eq(refenc_config_from_json(&back, j, "model", &err), REFENC_OK, "%s", err.message);
        json_decref(j);
        cr_expect(memcmp(&back.rope_scaling, &c.rope_scaling, sizeof c.rope_scaling) == 0, "config %d", i);
    }
    const refenc_config n = read_config("{\"positional\": \"rope\", \"rope_scaling\": {\"type\": \"ntk\","
                                        " \"factor\": 2.0, \"mixed_b\": null}}");
    cr_expect_eq(n.rope_scaling.mixed, 0, "mixed_b null read as mixed");
}

/* null and absent are no scaling, and write nothing (goldens unchanged). */
Test(rope_scaling_json, null_means_none_and_writes_nothing)
{
    const refenc_config c = read_config("{\"positional\": \"rope\", \"rope_scaling\": null}");
    cr_expect_eq(c.rope_scaling.type, REFENC_ROPE_SCALING_NONE);
    json_t *j = refenc_config_to_json(&c);
    cr_expect_null(json_object_get(j, "rope_scaling"));
    cr_expect_null(json_object_get(j, "partial_rotary_factor"));
    json_decref(j);
    /* negative control: a set scaling is written */
    refenc_config d = c;
    d.rope_scaling.type = REFENC_ROPE_SCALING_LINEAR;
    j = refenc_config_to_json(&d);
    cr_expect_not_null(json_object_get(j, "rope_scaling"));
    json_decref(j);
}
