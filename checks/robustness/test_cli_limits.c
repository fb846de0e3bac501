/* refenc golden's and refenc run's options at their limits, and text that is
 * not UTF-8 where it ends up in a file's JSON metadata: each is either done
 * or refused with one message naming the option, exit 2, nothing written;
 * never an empty message, a false "out of memory" or an exit inside a
 * library.  Each refusal has its negative control just inside the limit. */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "robust.h"

#define TINY "{\"model\": {\"d_model\": 4, \"n_heads\": 1, \"d_ff\": 4, \"n_layers\": 1, \"vocab_size\": 5}, " \
             "\"input\": {\"batch\": 1, \"seq_len\": 2}}"

typedef struct {
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
} tiny_setup;

static void tiny(tiny_setup *t)
{
    rb_tmpdir(t->dir);
    snprintf(t->cfg, sizeof t->cfg, "%s/tiny.json", t->dir);
    snprintf(t->out, sizeof t->out, "%s/case.safetensors", t->dir);
    rb_write_file(t->cfg, TINY, strlen(TINY));
}

/* Cheap at any precision: relu, no final norm (no erf; 65472 bits take 0.03 s). */
#define CHEAP "{\"model\": {\"d_model\": 2, \"n_heads\": 1, \"d_ff\": 2, \"n_layers\": 1, \"vocab_size\": 3, " \
              "\"activation\": \"relu\", \"final_norm\": false}, \"input\": {\"batch\": 1, \"seq_len\": 1}}"

static rb_result golden_with(const tiny_setup *t, const char *opt, const char *value, const rb_run_options *o)
{
    const char *args[] = {"refenc", "golden", "--config", t->cfg, "--out-file", t->out, "--quiet", opt, value, NULL};
    return rb_run_with(args, o);
}

/* Ziv's check runs at P + 64 bits and the oracle stops above 65536: the
 * first precision is at most 65472 (docs/cli.md). */
Test(cli_limits, prec_is_refused_where_the_check_would_pass_the_oracle_limit)
{
    tiny_setup t;
    tiny(&t);
    rb_write_file(t.cfg, CHEAP, strlen(CHEAP));
    const char *over[] = {"65473", "65536"};
    for (int i = 0; i < 2; i++) {
        rb_result r = golden_with(&t, "--prec", over[i], NULL);
        char frag[96];
        snprintf(frag, sizeof frag, "--prec: '%s' is not an integer in [64, 65472]", over[i]);
        rb_expect_error(&r, 2, "golden", over[i], (const char *[]){frag, "P + 64", NULL});
        rb_result_free(&r);
        cr_expect(!rb_exists(t.out));
    }
    rb_result r = golden_with(&t, "--prec", "65472", NULL); /* negative control: the largest */
    cr_expect_eq(r.status, 0, "--prec 65472: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    cr_expect(rb_exists(t.out));
    rb_tmpdir_remove(t.dir);
}

/* 4096 threads, each with its stack (8 MiB by default), do not fit in 2 GiB
 * of address space: refused before the oracle starts, naming --threads;
 * 2 threads in the same space run, and so do 4096 with 64 KiB stacks
 * (OMP_STACKSIZE, which libgomp and the check both honour). */
Test(cli_limits, threads_that_cannot_start_are_refused_with_a_message)
{
    if (RB_UNDER_ASAN)
        cr_skip_test("AddressSanitizer's shadow memory does not fit an address-space limit");
    tiny_setup t;
    tiny(&t);
    const rb_run_options lim = {.address_space = (uint64_t)2 << 30};
    rb_result r = golden_with(&t, "--threads", "4096", &lim);
    rb_expect_error(&r, 2, "golden", "--threads 4096 in 2 GiB",
                    (const char *[]){"--threads 4096: only", "threads could be started", NULL});
    cr_expect(strstr(r.err, "libgomp") == NULL, "%s", r.err);
    rb_result_free(&r);
    cr_expect(!rb_exists(t.out));
    r = golden_with(&t, "--threads", "2", &lim);
    cr_expect_eq(r.status, 0, "--threads 2 in 2 GiB: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    cr_expect(rb_exists(t.out));
    /* the check gives its threads the stack libgomp will: with OMP_STACKSIZE=64K, 4096 fit in 2 GiB */
    unlink(t.out);
    const rb_run_options small = {.address_space = (uint64_t)2 << 30, .env_name = "OMP_STACKSIZE",
                                  .env_value = "64K"};
    r = golden_with(&t, "--threads", "4096", &small);
    cr_expect_eq(r.status, 0, "--threads 4096 with 64 KiB stacks in 2 GiB: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    cr_expect(rb_exists(t.out));
    rb_tmpdir_remove(t.dir);
}

/* A --description or --name that is not UTF-8 cannot be stored in the
 * case's JSON metadata: named, not "out of memory". */
Test(cli_limits, text_options_that_are_not_utf8_are_named)
{
    tiny_setup t;
    tiny(&t);
    rb_result r = golden_with(&t, "--description", "caf\xe9", NULL);
    rb_expect_error(&r, 2, "golden", "a Latin-1 description",
                    (const char *[]){"--description: not valid UTF-8 (byte 0xe9 at byte 3)", NULL});
    cr_expect(strstr(r.err, "out of memory") == NULL, "%s", r.err);
    rb_result_free(&r);
    r = golden_with(&t, "--name", "caf\xe9", NULL);
    rb_expect_error(&r, 2, "golden", "a Latin-1 name", (const char *[]){"--name: 'caf\\xe9' is not a case name", NULL});
    rb_result_free(&r);
    cr_expect(!rb_exists(t.out));
    r = golden_with(&t, "--description", "caf\xc3\xa9", NULL); /* negative control: the same in UTF-8 */
    cr_expect_eq(r.status, 0, "a UTF-8 description: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    cr_expect(rb_exists(t.out));
    rb_tmpdir_remove(t.dir);
}

/* File names are bytes: one that is not UTF-8 is quoted \xNN in the
 * metadata that names it (golden's default description, run --out's
 * sources), never a reason to fail. */
Test(cli_limits, file_names_that_are_not_utf8_are_quoted_in_metadata)
{
    tiny_setup t;
    tiny(&t);
    char latin[RB_PATH_MAX + 32], res[RB_PATH_MAX + 32];
    snprintf(latin, sizeof latin, "%s/caf\xe9.json", t.dir);
    snprintf(res, sizeof res, "%s/results.safetensors", t.dir);
    rb_write_file(latin, TINY, strlen(TINY));
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", latin, "--name", "cafe", "--out-file", t.out,
                                          "--quiet", NULL});
    cr_expect_eq(r.status, 0, "golden --config caf\\xe9.json: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    size_t n;
    unsigned char *bytes = rb_read_file(t.out, &n);
    cr_expect(bytes != NULL && memmem(bytes, n, "caf\\\\xe9.json", 13) != NULL,
              "the description does not quote the name as caf\\xe9.json");
    free(bytes);
    char inputs[RB_PATH_MAX + 32];
    snprintf(inputs, sizeof inputs, "%s/in\xe9.safetensors", t.dir);
    static const int64_t tokens[2] = {1, 2};
    rb_write_safetensors(inputs, "{\"in.tokens\":{\"dtype\":\"I64\",\"shape\":[1,2],\"data_offsets\":[0,16]}}",
                         tokens, 16);
    r = rb_run((const char *[]){"refenc", "run", "--config", t.cfg, "--inputs", inputs, "--out", res, NULL});
    cr_expect_eq(r.status, 0, "run --inputs in\\xe9.safetensors --out: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    bytes = rb_exists(res) ? rb_read_file(res, &n) : NULL;
    cr_expect(bytes != NULL && memmem(bytes, n, "in\\\\xe9.safetensors", 19) != NULL,
              "the results' metadata does not quote the inputs as in\\xe9.safetensors");
    free(bytes);
    r = rb_run((const char *[]){"refenc", "golden", "--config", t.cfg, "--inputs", inputs, "--out-file", t.out,
                                "--quiet", NULL});
    cr_expect_eq(r.status, 0, "golden --inputs in\\xe9.safetensors: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    unlink(inputs);
    unlink(latin);
    rb_tmpdir_remove(t.dir);
}

/* golden --out DIR whose manifest.json is a FIFO: refused at once (never a
 * wait for a writer while the directory is locked), the case not stored. */
Test(cli_limits, a_fifo_as_the_output_manifest_is_refused_at_once)
{
    tiny_setup t;
    tiny(&t);
    char gdir[RB_PATH_MAX + 32], manifest[RB_PATH_MAX + 64], stored[RB_PATH_MAX + 64], frag[RB_PATH_MAX + 128];
    snprintf(gdir, sizeof gdir, "%s/g", t.dir);
    snprintf(manifest, sizeof manifest, "%s/manifest.json", gdir);
    snprintf(stored, sizeof stored, "%s/cases/m.safetensors", gdir);
    cr_assert_eq(mkdir(gdir, 0700), 0);
    cr_assert_eq(mkfifo(manifest, 0600), 0);
    /* rb_run kills a run that hangs (status 128 + SIGALRM) */
    const char *args[] = {"refenc", "golden", "--config", t.cfg, "--out", gdir, "--name", "m", "--quiet", NULL};
    rb_result r = rb_run(args);
    snprintf(frag, sizeof frag, "%s: not a regular file", manifest);
    rb_expect_error(&r, 2, "golden", "a FIFO as manifest.json", (const char *[]){frag, NULL});
    rb_result_free(&r);
    cr_expect(!rb_exists(stored), "the case was stored");
    /* negative control: without the FIFO the case is stored and listed */
    cr_assert_eq(unlink(manifest), 0);
    r = rb_run(args);
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    cr_expect(rb_exists(stored) && rb_exists(manifest));
    char cases[RB_PATH_MAX + 64];
    snprintf(cases, sizeof cases, "%s/cases", gdir);
    unlink(stored);
    unlink(manifest);
    rb_tmpdir_remove(cases);
    rb_tmpdir_remove(gdir);
    rb_tmpdir_remove(t.dir);
}
