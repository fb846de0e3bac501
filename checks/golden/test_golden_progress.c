/* `refenc golden` off a terminal (its stderr here is a pipe, as in a CI log
 * or a Slurm output file) prints a whole progress line at least every 30 s:
 * the unit of how many, the layer, the step, the share done, the time
 * elapsed and the ETA; none with --quiet (docs/cli.md).  30 s would make
 * the test slow, so REFENC_PROGRESS_INTERVAL = 0 (documented for tests)
 * asks for a line at every report of the oracle.  The clock must not reach
 * the case: the file is byte for byte the one the default interval writes
 * (which, for a case of a second, prints no line: the control that the
 * interval decides, not the pipe alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../robustness/robust.h"

#define CONFIG "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 2, \"vocab_size\": 10}, " \
               "\"input\": {\"batch\": 2, \"seq_len\": 3}}"

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "cannot read %s", path);
    char *s = malloc(1 << 20);
    cr_assert(s != NULL);
    *n = fread(s, 1, 1 << 20, f);
    fclose(f);
    return s;
}

Test(golden_progress, lines_off_a_terminal_none_with_quiet_and_the_same_bytes)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], a[RB_PATH_MAX + 32], b[RB_PATH_MAX + 32], q[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(a, sizeof a, "%s/a.safetensors", dir);
    snprintf(b, sizeof b, "%s/b.safetensors", dir);
    snprintf(q, sizeof q, "%s/q.safetensors", dir);
    rb_write_file(cfg, CONFIG, strlen(CONFIG));
    const rb_run_options every = {.env_name = "REFENC_PROGRESS_INTERVAL", .env_value = "0"};

    rb_result r = rb_run_with((const char *[]){"refenc", "golden", "--config", cfg, "--out-file", a, NULL}, &every);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const size_t lines = count(r.err, "oracle: progress: unit ");
    cr_expect(lines >= 2, "off a terminal at interval 0: %zu progress lines: %s", lines, r.err);
    cr_expect(strstr(r.err, "oracle: progress: unit 2/2, layer 2/2, ") != NULL, "no line of the last unit: %s",
              r.err);
    cr_expect(count(r.err, "% done, elapsed ") == lines && count(r.err, ", ETA ") == lines,
              "a line without its share done, elapsed time or ETA: %s", r.err);
    cr_expect(strchr(r.err, '\r') == NULL, "a terminal's carriage return in a log: %s", r.err);
    rb_result_free(&r);

    r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--out-file", b, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "oracle: progress") == NULL, "a line before 30 s at the default interval: %s", r.err);
    rb_result_free(&r);

    r = rb_run_with((const char *[]){"refenc", "golden", "--config", cfg, "--out-file", q, "--quiet", NULL}, &every);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "progress") == NULL, "a progress line with --quiet: %s", r.err);
    rb_result_free(&r);

    size_t na, nb, nq;
    char *fa = slurp(a, &na), *fb = slurp(b, &nb), *fq = slurp(q, &nq);
    cr_expect(na == nb && memcmp(fa, fb, na) == 0, "the progress lines changed the case's bytes");
    cr_expect(na == nq && memcmp(fa, fq, na) == 0, "--quiet changed the case's bytes");
    free(fa);
    free(fb);
    free(fq);
    rb_tmpdir_remove(dir);
}

/* The bug variants of --variants, each its own oracle run: a line before
 * each one at interval 0 (the variant, how many of how many are done, the
 * time elapsed), none with --quiet, and the same bytes as the default
 * interval writes. */
Test(golden_progress, the_variants_runs_report_off_a_terminal)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], a[RB_PATH_MAX + 32], b[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/c.json", dir);
    snprintf(a, sizeof a, "%s/a.safetensors", dir);
    snprintf(b, sizeof b, "%s/b.safetensors", dir);
    rb_write_file(cfg, CONFIG, strlen(CONFIG));
    const rb_run_options every = {.env_name = "REFENC_PROGRESS_INTERVAL", .env_value = "0"};
    rb_result r = rb_run_with((const char *[]){"refenc", "golden", "--config", cfg, "--variants", "--out-file", a,
                                               NULL}, &every);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "refenc golden: c: bug variants: 0/") != NULL, "no line before the first variant: %s",
              r.err);
    cr_expect(count(r.err, ": bug variants: ") >= 2 && count(r.err, ", elapsed ") >= count(r.err, ": bug variants: "),
              "the variants' lines: %s", r.err);
    rb_result_free(&r);
    r = rb_run_with((const char *[]){"refenc", "golden", "--config", cfg, "--variants", "--out-file", b, "--quiet",
                                     NULL}, &every);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "bug variants:") == NULL, "a variants line with --quiet: %s", r.err);
    rb_result_free(&r);
    size_t na, nb;
    char *fa = slurp(a, &na), *fb = slurp(b, &nb);
    cr_expect(na == nb && memcmp(fa, fb, na) == 0, "the progress lines changed the case's bytes");
    free(fa);
    free(fb);
    rb_tmpdir_remove(dir);
}
