/* `refenc run --config` on the kinds of input the bundled examples do not
 * use: a config without "input" (the defaults, B 2 and L 8), the input x
 * (vocab_size 0) instead of tokens, a learned positional table, tokens
 * without a padding token.  Each runs, says what it ran, and gives the same
 * fingerprint twice. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "robust.h"

static void run_twice(const char *config, const char *const *fragments)
{
    char dir[RB_PATH_MAX], path[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    rb_write_file(path, config, strlen(config));
    const char *args[] = {"refenc", "run", "--config", path, NULL};
    rb_result a = rb_run(args), b = rb_run(args);
    cr_expect_eq(a.status, 0, "%s: exit %d: %s", config, a.status, a.err);
    cr_expect_str_empty(a.err);
    for (size_t i = 0; fragments[i] != NULL; i++)
        cr_expect(strstr(a.out, fragments[i]) != NULL, "%s: stdout lacks '%s':\n%s", config, fragments[i], a.out);
    const char *fa = strstr(a.out, "fingerprint"), *fb = strstr(b.out, "fingerprint");
    cr_expect(fa != NULL && fb != NULL && strcmp(fa, fb) == 0, "two runs differ:\n%s\n%s", a.out, b.out);
    rb_result_free(&a);
    rb_result_free(&b);
    rb_tmpdir_remove(dir);
}

Test(run_inputs, x_input_with_the_default_shape)
{
    run_twice("{\"model\": {\"d_model\": 12, \"n_heads\": 3, \"d_ff\": 20, \"n_layers\": 1}}",
              (const char *[]){"input: batch 2, seq_len 8, x ~ N(0, 1)", "model: 1 layer, Pre-LN, d_model 12",
                               "output[0, 0, 0:4] =", NULL});
}

Test(run_inputs, learned_positions_causal_post_ln)
{
    run_twice("{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 16, \"n_layers\": 2, \"norm\": \"post\","
              " \"positional\": \"learned\", \"max_len\": 16, \"causal\": true, \"activation\": \"relu\"},"
              " \"input\": {\"batch\": 3, \"seq_len\": 5, \"padding\": [0, 1, 4]}}",
              (const char *[]){"positional: learned (max_len 16); final norm: no", "Post-LN", ", causal",
                               "input: batch 3, seq_len 5, x ~ N(0, 1), trailing padding [0, 1, 4]", NULL});
}

Test(run_inputs, tokens_without_a_padding_token)
{
    run_twice("{\"model\": {\"d_model\": 4, \"n_heads\": 1, \"d_ff\": 4, \"n_layers\": 1, \"vocab_size\": 30},"
              " \"input\": {\"batch\": 1, \"seq_len\": 3}}",
              (const char *[]){"input: batch 1, seq_len 3, tokens (vocab_size 30, padding_idx -1)",
                               "output[0, 0, 0:4] =", NULL});
}
