/* The catalogue's explicit positions (ref/golden/catalogue.c, "positions"):
 * long-context cases put them on both sides of a RoPE scaling's edges. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/golden/catalogue.h"

/* Builds the one case of a catalogue written from `input`; returns the status. */
static int build(refenc_case *c, const char *input, refenc_error *err)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"cases\": [{\"case\": \"p\", \"description\": \"d\", \"component\": \"rope\", \"seed\": 1, \"model\": {\"n_heads\": 1, "
             "\"d_ff\": 1, \"n_layers\": 1, \"d_model\": 4, \"positional\": \"rope\"}, \"input\": %s}]}", input);
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    cr_assert_not_null(doc, "%s", je.text);
    catalogue_case cc;
    int st = catalogue_find(&cc, doc, "p", err);
    if (st == REFENC_OK)
        st = catalogue_build(c, &cc, err);
    json_decref(doc);
    return st;
}

Test(catalogue_positions, explicit_positions_are_the_case_positions)
{
    refenc_case c;
    refenc_error err = {0};
    cr_assert_eq(build(&c, "{\"batch\": 1, \"seq_len\": 3, \"positions\": [0, 131071, 8192]}", &err), REFENC_OK,
                 "%s", err.message);
    cr_expect_eq(c.positions[0], 0);
    cr_expect_eq(c.positions[1], 131071);
    cr_expect_eq(c.positions[2], 8192);
    cr_expect(c.has_positions);
    refenc_case_free(&c);
}

Test(catalogue_positions, a_wrong_list_is_refused_by_name)
{
    refenc_case c;
    refenc_error err = {0};
    cr_expect_eq(build(&c, "{\"batch\": 1, \"seq_len\": 3, \"positions\": [0, 1]}", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "case p: input.positions: expected an array of seq_len = 3 integers") != NULL,
              "%s", err.message);
    cr_expect_eq(build(&c, "{\"batch\": 1, \"seq_len\": 2, \"positions\": [0, -1]}", &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "input.positions[1]: expected an integer in [0, 2^31)") != NULL, "%s",
              err.message);
}
