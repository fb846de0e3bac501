/* Outputs that cannot be written: `refenc run --case --out FILE` and
 * `refenc certify --json REPORT` when the disk refuses the bytes (a file
 * size limit, RLIMIT_FSIZE, makes the write fail with EFBIG as a full disk
 * would), when the directory does not exist, or when the name is a
 * directory (refused: only a regular file is ever replaced).  Each exits 2 with one message naming the file, leaves no
 * temporary file, and leaves a file already at that name untouched: outputs
 * are written to a temporary file and renamed (docs/cli.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "robust.h"

/* The limit lets the messages, the printed report (5 kB) and, in a coverage
 * build, libgcov's counter files (under 7 kB) be written, but not the results
 * of encoder_pre_rope (54 kB) nor the certificate of the 3 encoder cases of
 * the fixture (24 kB). */
#define CASE "encoder_pre_rope"
#define LIMIT 16384

static const char previous[] = "the previous file, which must survive\n";

static void expect_untouched(const char *path)
{
    size_t n;
    char *b = (char *)rb_read_file(path, &n);
    cr_expect(n == sizeof previous - 1 && memcmp(b, previous, n) == 0, "%s was changed: '%s'", path, b);
    free(b);
}

Test(write_errors, run_case_that_cannot_write_its_results_leaves_the_old_file)
{
    char dir[RB_PATH_MAX], out[RB_PATH_MAX + 32], golden[RB_PATH_MAX], frag[3 * RB_PATH_MAX];
    rb_tmpdir(dir);
    snprintf(out, sizeof out, "%s/results.safetensors", dir);
    rb_fixture_case(golden, CASE);
    rb_write_file(out, previous, sizeof previous - 1);

    const char *args[] = {"refenc", "run", "--case", golden, "--out", out, NULL};
    const rb_run_options opt = {.file_size = LIMIT};
    rb_result r = rb_run_with(args, &opt);
    snprintf(frag, sizeof frag, "refenc run: %s: cannot write: File too large", out);
    rb_expect_error(&r, 2, "run", "a write past the file size limit", (const char *[]){frag, NULL});
    cr_expect_str_empty(r.out);
    expect_untouched(out);
    cr_expect(!rb_has_temporary_file(dir), "a temporary file is left in %s", dir);
    rb_result_free(&r);

    /* a directory that does not exist */
    char missing[RB_PATH_MAX + 64];
    snprintf(missing, sizeof missing, "%s/no/such/dir/results.safetensors", dir);
    const char *args2[] = {"refenc", "run", "--case", golden, "--out", missing, NULL};
    r = rb_run(args2);
    snprintf(frag, sizeof frag, "refenc run: %s: cannot write into its directory: No such file or directory",
             missing);
    rb_expect_error(&r, 2, "run", "no such directory", (const char *[]){frag, NULL});
    rb_result_free(&r);

    /* a directory as the output: refused, never replaced */
    char as_dir[RB_PATH_MAX + 32];
    snprintf(as_dir, sizeof as_dir, "%s/a-directory", dir);
    cr_assert_eq(mkdir(as_dir, 0700), 0);
    const char *args3[] = {"refenc", "run", "--case", golden, "--out", as_dir, NULL};
    r = rb_run(args3);
    snprintf(frag, sizeof frag, "refenc run: %s: is a directory, not a regular file: refusing to replace it",
             as_dir);
    rb_expect_error(&r, 2, "run", "a directory as --out", (const char *[]){frag, NULL});
    cr_expect(!rb_has_temporary_file(dir), "a temporary file is left in %s", dir);
    rb_result_free(&r);
    rmdir(as_dir);
    rb_tmpdir_remove(dir);
}

Test(write_errors, certify_that_cannot_write_its_certificate_leaves_the_old_one)
{
    char dir[RB_PATH_MAX], results[RB_PATH_MAX + 16], report[RB_PATH_MAX + 32], frag[3 * RB_PATH_MAX];
    rb_tmpdir(dir);
    rb_encoder_results(dir, results);
    snprintf(report, sizeof report, "%s/report.json", dir);
    rb_write_file(report, previous, sizeof previous - 1);

    const char *args[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results,
                          "--case", "encoder_*", "--json", report, NULL};
    const rb_run_options opt = {.file_size = LIMIT};
    rb_result r = rb_run_with(args, &opt);
    snprintf(frag, sizeof frag, "refenc certify: %s: cannot write: File too large", report);
    rb_expect_error(&r, 2, "certify", "a certificate past the file size limit", (const char *[]){frag, NULL});
    expect_untouched(report);
    cr_expect(!rb_has_temporary_file(dir), "a temporary file is left in %s", dir);
    rb_result_free(&r);

    char missing[RB_PATH_MAX + 64];
    snprintf(missing, sizeof missing, "%s/no/such/dir/report.json", dir);
    const char *args2[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results,
                           "--case", CASE, "--json", missing, NULL};
    r = rb_run(args2);
    snprintf(frag, sizeof frag, "refenc certify: %s: cannot write into its directory: No such file or directory",
             missing);
    rb_expect_error(&r, 2, "certify", "no such directory", (const char *[]){frag, NULL});
    rb_result_free(&r);

    char as_dir[RB_PATH_MAX + 32];
    snprintf(as_dir, sizeof as_dir, "%s/a-directory", dir);
    cr_assert_eq(mkdir(as_dir, 0700), 0);
    const char *args3[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results,
                           "--case", CASE, "--json", as_dir, NULL};
    r = rb_run(args3);
    snprintf(frag, sizeof frag, "refenc certify: %s: is a directory, not a regular file: refusing to replace it",
             as_dir);
    rb_expect_error(&r, 2, "certify", "a directory as --json", (const char *[]){frag, NULL});
    cr_expect(!rb_has_temporary_file(dir), "a temporary file is left in %s", dir);
    rb_result_free(&r);
    rmdir(as_dir);
    rb_tmpdir_remove(dir);
}

/* A shard reserves its whole part when it opens it (safetensors.h,
 * refenc_st_stream), before its oracle run: a part that cannot fit fails at
 * once, with one message and no progress line (REFENC_PROGRESS_INTERVAL=0
 * prints one per step of the run), and leaves neither a part nor its
 * temporary.  Part 2 of this case (slices only: layer 0's items 1 and 2)
 * is 28 kB, over the limit.  Negative control (run when this was written):
 * with nothing reserved at open, the shard ran its units and failed at a
 * write within them (progress lines, another message).  Under a file-size
 * limit setting the size alone already fails; the blocks reserved are for
 * a full disk, which a test cannot make here. */
Test(write_errors, a_shard_whose_part_cannot_fit_fails_before_its_oracle_run)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], part[RB_PATH_MAX + 32], frag[3 * RB_PATH_MAX];
    rb_tmpdir(dir);
    rb_text_file(cfg, sizeof cfg, dir, "config.json",
                 "{\"model\": {\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 24, \"n_layers\": 2},"
                 " \"input\": {\"batch\": 3, \"seq_len\": 12}}");
    snprintf(part, sizeof part, "%s/part.safetensors", dir);
    const char *args[] = {"refenc", "golden", "--config", cfg, "--per-layer", "--shard", "2/4", "--threads", "1",
                          "--out-file", part, NULL};
    const rb_run_options opt = {.file_size = LIMIT, .env_name = "REFENC_PROGRESS_INTERVAL", .env_value = "0"};
    rb_result r = rb_run_with(args, &opt);
    snprintf(frag, sizeof frag, "refenc golden: %s: cannot write its ", part);
    rb_expect_error(&r, 2, "golden", "a part past the file size limit",
                    (const char *[]){frag, "bytes: File too large", NULL});
    cr_expect(!rb_exists(part), "a part was written");
    cr_expect(!rb_has_temporary_file(dir), "a temporary file is left in %s", dir);
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}
