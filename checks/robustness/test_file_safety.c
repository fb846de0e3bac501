/* How `refenc run --case --out` and `refenc certify` treat the file system
 * (docs/cli.md, "Files"): each reproducer of a way an output could be lost,
 * redirected or clobbered, an input could hang the program or cost unbounded
 * memory, or a directory problem could pass for "no results file", gives a
 * clean error (exit 2, one message with the system's reason) or the right
 * verdict, with no file lost, changed or left behind. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "robust.h"


#define CASE "act_gelu"
static const char previous[] = "the previous file, which must survive\n";

typedef struct {
    char dir[RB_PATH_MAX];
    char golden[RB_PATH_MAX + 32];      /* a fixture case file, as a golden dir of one case */
    char results[RB_PATH_MAX + 32];     /* its results directory, holding the reference's results */
    char rfile[RB_PATH_MAX + 64];
} setup;

static void make_setup(setup *s)
{
    rb_tmpdir(s->dir);
    char gcase[RB_PATH_MAX];
    rb_golden_dir(s->dir, CASE, gcase);
    snprintf(s->golden, sizeof s->golden, "%s", gcase);
    snprintf(s->results, sizeof s->results, "%s/results", s->dir);
    cr_assert_eq(mkdir(s->results, 0700), 0);
    snprintf(s->rfile, sizeof s->rfile, "%s/" CASE ".safetensors", s->results);
    rb_reference_results(CASE, s->rfile);
}

static void expect_bytes(const char *path, const void *bytes, size_t n, const char *what)
{
    size_t m;
    unsigned char *b = rb_read_file(path, &m);
    cr_expect(m == n && memcmp(b, bytes, n) == 0, "%s: %s was changed", what, path);
    free(b);
}

static void expect_previous(const char *path, const char *what)
{
    expect_bytes(path, previous, sizeof previous - 1, what);
}

static rb_result certify_json(const setup *s, const char *json, const rb_run_options *opt)
{
    const char *args[] = {"refenc", "certify", "--golden", s->dir, "--results", s->results,
                          "--case", CASE, "--json", json, NULL};
    return rb_run_with(args, opt);
}

static rb_result run_out(const char *golden, const char *out, const rb_run_options *opt)
{
    const char *args[] = {"refenc", "run", "--case", golden, "--out", out, NULL};
    return rb_run_with(args, opt);
}

/* ---- outputs ----------------------------------------------------------------------- */

Test(file_safety, an_output_is_never_written_through_a_link_or_over_a_device)
{
    setup s;
    make_setup(&s);
    char victim[RB_PATH_MAX + 16], link[RB_PATH_MAX + 16], frag[3 * RB_PATH_MAX];
    snprintf(victim, sizeof victim, "%s/victim", s.dir);
    snprintf(link, sizeof link, "%s/link", s.dir);
    rb_write_file(victim, previous, sizeof previous - 1);
    cr_assert_eq(symlink(victim, link), 0);
    snprintf(frag, sizeof frag, "%s: is a symbolic link, not a regular file: refusing to replace it", link);

    rb_result r = certify_json(&s, link, NULL);
    rb_expect_error(&r, 2, "certify", "--json a symbolic link", (const char *[]){frag, NULL});
    rb_result_free(&r);
    r = run_out(s.golden, link, NULL);
    rb_expect_error(&r, 2, "run", "--out a symbolic link", (const char *[]){frag, NULL});
    cr_expect_str_empty(r.out);
    rb_result_free(&r);
    expect_previous(victim, "the link's target");
    struct stat sb;
    cr_expect(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode), "the link was replaced");

    /* a link to a device, and a FIFO */
    unlink(link);
    cr_assert_eq(symlink("/dev/null", link), 0);
    r = certify_json(&s, link, NULL);
    rb_expect_error(&r, 2, "certify", "--json a link to /dev/null", (const char *[]){frag, NULL});
    rb_result_free(&r);
    cr_expect(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode), "the link to /dev/null was replaced");
    r = certify_json(&s, "/dev/null", NULL);
    rb_expect_error(&r, 2, "certify", "--json /dev/null",
                    (const char *[]){"/dev/null: is a character device, not a regular file", NULL});
    rb_result_free(&r);
    char fifo[RB_PATH_MAX + 16];
    snprintf(fifo, sizeof fifo, "%s/fifo", s.dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    r = run_out(s.golden, fifo, NULL);
    rb_expect_error(&r, 2, "run", "--out a FIFO", (const char *[]){"fifo: is a FIFO, not a regular file", NULL});
    rb_result_free(&r);
    cr_expect(!rb_has_temporary_file(s.dir), "a temporary file is left");
    rb_tmpdir_remove(s.dir);
}

Test(file_safety, an_output_never_replaces_an_input)
{
    setup s;
    make_setup(&s);
    size_t n_case, n_res, n_man;
    unsigned char *case_bytes = rb_read_file(s.golden, &n_case);
    unsigned char *res_bytes = rb_read_file(s.rfile, &n_res);
    char manifest[RB_PATH_MAX + 32], dotted[RB_PATH_MAX + 96], hard[RB_PATH_MAX + 32];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", s.dir);
    unsigned char *man_bytes = rb_read_file(manifest, &n_man);

    /* run --case X --out X, by the same name, by another spelling, by a hard link */
    snprintf(dotted, sizeof dotted, "%s/./cases/" CASE ".safetensors", s.dir);
    snprintf(hard, sizeof hard, "%s/hard.safetensors", s.dir);
    cr_assert_eq(link(s.golden, hard), 0);
    const char *outs[] = {s.golden, dotted, hard};
    for (size_t i = 0; i < 3; i++) {
        rb_result r = run_out(s.golden, outs[i], NULL);
        rb_expect_error(&r, 2, "run", outs[i],
                        (const char *[]){": is the same file as the golden case ", ": refusing to overwrite it", NULL});
        cr_expect_str_empty(r.out);
        rb_result_free(&r);
    }
    expect_bytes(s.golden, case_bytes, n_case, "run --case X --out X");

    /* certify --json over the manifest, the golden case, the results file */
    const struct {
        const char *path, *what;
    } inputs[] = {{manifest, "the manifest "}, {s.golden, "the golden case "}, {s.rfile, "the results file "}};
    for (size_t i = 0; i < 3; i++) {
        rb_result r = certify_json(&s, inputs[i].path, NULL);
        rb_expect_error(&r, 2, "certify", inputs[i].what,
                        (const char *[]){": is the same file as ", inputs[i].what, NULL});
        cr_expect(strstr(r.out, "PASS") == NULL, "%s", r.out);
        rb_result_free(&r);
    }
    expect_bytes(manifest, man_bytes, n_man, "certify --json manifest.json");
    expect_bytes(s.golden, case_bytes, n_case, "certify --json CASE");
    expect_bytes(s.rfile, res_bytes, n_res, "certify --json RESULTS");
    free(case_bytes);
    free(res_bytes);
    free(man_bytes);
    cr_expect(!rb_has_temporary_file(s.dir) && !rb_has_temporary_file(s.results));
    rb_tmpdir_remove(s.dir);
}

/* A case the run leaves out (--case) is still the user's: the certificate
 * and the report never replace its golden case or its results file either.  The case is
 * the manifest's first, which the check visits first. */
Test(file_safety, an_output_never_replaces_an_input_of_a_case_left_out)
{
    setup s;
    make_setup(&s);
    char manifest[RB_PATH_MAX + 32];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", s.dir);
    json_error_t jerr;
    json_t *man = json_load_file(manifest, 0, &jerr);
    cr_assert_not_null(man, "%s", jerr.text);
    const char *first = json_string_value(json_object_get(json_array_get(json_object_get(man, "cases"), 0), "case"));
    cr_assert(first != NULL && strcmp(first, CASE) != 0);
    char gfirst[RB_PATH_MAX + 96], rfirst[RB_PATH_MAX + 96];
    snprintf(gfirst, sizeof gfirst, "%s/cases/%s.safetensors", s.dir, first);
    snprintf(rfirst, sizeof rfirst, "%s/%s.safetensors", s.results, first);
    rb_write_file(gfirst, previous, sizeof previous - 1);
    rb_write_file(rfirst, previous, sizeof previous - 1);
    const struct {
        const char *path, *what;
    } inputs[] = {{gfirst, "the golden case "}, {rfirst, "the results file "}};
    for (size_t i = 0; i < 2; i++) {
        rb_result r = certify_json(&s, inputs[i].path, NULL);
        rb_expect_error(&r, 2, "certify", inputs[i].what,
                        (const char *[]){": is the same file as ", inputs[i].what, NULL});
        rb_result_free(&r);
        const char *report[] = {"refenc", "report", "--golden", s.dir, "--results", s.results, "--case", CASE,
                                "--html", inputs[i].path, NULL};
        r = rb_run(report);
        rb_expect_error(&r, 2, "report", inputs[i].what,
                        (const char *[]){": is the same file as ", inputs[i].what, NULL});
        rb_result_free(&r);
        expect_previous(inputs[i].path, inputs[i].what);
    }
    json_decref(man);
    cr_expect(!rb_has_temporary_file(s.dir) && !rb_has_temporary_file(s.results));
    rb_tmpdir_remove(s.dir);
}

Test(file_safety, a_file_size_limit_fails_the_write_even_when_sigxfsz_is_not_ignored)
{
    /* `ulimit -f` in a shell: SIGXFSZ left at its default, which would kill
     * the program mid-write; refenc ignores it and reports EFBIG.  The limit
     * lets the message and, in a coverage build, libgcov's counter files
     * (under 7 kB) through, not the results of encoder_pre_rope (54 kB) nor
     * the certificate of the fixture's three encoder cases (24 kB), as in
     * test_write_errors.c. */
    char dir[RB_PATH_MAX], results[RB_PATH_MAX + 16], golden[RB_PATH_MAX], out[RB_PATH_MAX + 16],
        json[RB_PATH_MAX + 16], frag[3 * RB_PATH_MAX];
    rb_tmpdir(dir);
    rb_encoder_results(dir, results);
    rb_fixture_case(golden, "encoder_pre_rope");
    snprintf(out, sizeof out, "%s/out.safetensors", dir);
    snprintf(json, sizeof json, "%s/report.json", dir);
    rb_write_file(out, previous, sizeof previous - 1);
    rb_write_file(json, previous, sizeof previous - 1);
    const rb_run_options opt = {.file_size = 16384, .keep_sigxfsz = 1};

    rb_result r = run_out(golden, out, &opt);
    snprintf(frag, sizeof frag, "refenc run: %s: cannot write: File too large", out);
    rb_expect_error(&r, 2, "run", "run --out under ulimit -f", (const char *[]){frag, NULL});
    rb_result_free(&r);
    const char *args[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results,
                          "--case", "encoder_*", "--json", json, NULL};
    r = rb_run_with(args, &opt);
    snprintf(frag, sizeof frag, "refenc certify: %s: cannot write: File too large", json);
    rb_expect_error(&r, 2, "certify", "certify --json under ulimit -f", (const char *[]){frag, NULL});
    rb_result_free(&r);
    expect_previous(out, "run --out");
    expect_previous(json, "certify --json");
    cr_expect(!rb_has_temporary_file(dir), "a temporary file is left");
    rb_tmpdir_remove(dir);
}

/* A --json path of exactly PATH_MAX - 1 bytes, in directories made under dir. */
static void long_json_path(char *path, const char *dir)
{
    const size_t len = PATH_MAX - 1;
    size_t n = (size_t)snprintf(path, PATH_MAX, "%s", dir);
    while (len - n > 1 + 255 + 1 + 200) {
        n += (size_t)snprintf(path + n, PATH_MAX - n, "/%0200d", 0);
        cr_assert(mkdir(path, 0700) == 0, "mkdir: %s", strerror(errno));
    }
    const size_t last = len - n - 1 - 200 - 1;
    path[n++] = '/';
    memset(path + n, 'e', last);
    n += last;
    path[n] = '\0';
    cr_assert(mkdir(path, 0700) == 0, "mkdir: %s", strerror(errno));
    path[n++] = '/';
    memset(path + n, 'j', 195);
    memcpy(path + n + 195, ".json", 6);
    cr_assert_eq(strlen(path), len);
}

Test(file_safety, a_json_path_of_path_max_minus_one_bytes)
{
    /* the certificate of the fixture's 3 encoder cases (24 kB) does not fit
     * under the file-size limit; the message and, in a coverage build,
     * libgcov's counter files do (as in test_write_errors.c) */
    char dir[RB_PATH_MAX], results[RB_PATH_MAX + 16];
    rb_tmpdir(dir);
    rb_encoder_results(dir, results);
    char *json = malloc(PATH_MAX);
    cr_assert_not_null(json);
    long_json_path(json, dir);
    rb_write_file(json, previous, sizeof previous - 1);
    const char *args[] = {"refenc", "certify", "--golden", rb_fixture_dir(), "--results", results,
                          "--case", "encoder_*", "--json", json, NULL};
    /* a failed write keeps the old certificate (the temporary was once named
     * like the target at this length, and its removal deleted it) */
    const rb_run_options opt = {.file_size = 16384};
    rb_result r = rb_run_with(args, &opt);
    cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "refenc certify: ") == r.err && rb_count_lines(r.err) == 1, "%s", r.err);
    rb_result_free(&r);
    expect_previous(json, "a failed write at PATH_MAX - 1 bytes");
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(json, '/') - json), json);
    cr_expect(!rb_has_temporary_file(parent), "a temporary file is left");
    /* and a write that succeeds replaces it with the certificate */
    r = rb_run(args);
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    json_error_t jerr;
    json_t *doc = json_load_file(json, 0, &jerr);
    cr_expect_not_null(doc, "the certificate is not JSON: %s", jerr.text);
    json_decref(doc);
    free(json);
    /* rb_tmpdir_remove's paths are shorter than these */
    char cmd[RB_PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* ---- inputs -------------------------------------------------------------------------- */

Test(file_safety, a_fifo_as_an_input_is_refused_at_once)
{
    setup s;
    make_setup(&s);
    char manifest[RB_PATH_MAX + 32], frag[3 * RB_PATH_MAX];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", s.dir);
    cr_assert_eq(unlink(manifest), 0);
    cr_assert_eq(mkfifo(manifest, 0600), 0);
    /* rb_run kills a run that hangs, after RB_RUN_SECONDS: a status 128 + 14 */
    const char *args[] = {"refenc", "certify", "--golden", s.dir, "--results", s.results, NULL};
    rb_result r = rb_run(args);
    snprintf(frag, sizeof frag, "refenc certify: %s: not a regular file", manifest);
    rb_expect_error(&r, 2, "certify", "a FIFO as manifest.json", (const char *[]){frag, NULL});
    rb_result_free(&r);

    char config[RB_PATH_MAX + 32];
    snprintf(config, sizeof config, "%s/config.json", s.dir);
    cr_assert_eq(mkfifo(config, 0600), 0);
    const char *run[] = {"refenc", "run", "--config", config, NULL};
    r = rb_run(run);
    snprintf(frag, sizeof frag, "refenc run: %s: not a regular file", config);
    rb_expect_error(&r, 2, "run", "a FIFO as --config", (const char *[]){frag, NULL});
    rb_result_free(&r);
    const char *dev[] = {"refenc", "run", "--config", "/dev/zero", NULL};
    r = rb_run(dev);
    rb_expect_error(&r, 2, "run", "a device as --config", (const char *[]){"/dev/zero: not a regular file", NULL});
    rb_result_free(&r);

    /* a results file that is a FIFO */
    unlink(manifest);
    rb_golden_dir(s.dir, CASE, manifest); /* the manifest back */
    cr_assert_eq(unlink(s.rfile), 0);
    cr_assert_eq(mkfifo(s.rfile, 0600), 0);
    r = certify_json(&s, "/nonexistent-dir/never-written.json", NULL);
    snprintf(frag, sizeof frag, "refenc certify: %s: not a regular file", s.rfile);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, frag) != NULL, "%s", r.err);
    rb_result_free(&r);
    rb_tmpdir_remove(s.dir);
}

/* certify with --results (or --golden) replaced */
static rb_result certify_dirs(const char *golden, const char *results, const rb_run_options *opt)
{
    const char *args[] = {"refenc", "certify", "--golden", golden, "--results", results, "--case", CASE, NULL};
    return rb_run_with(args, opt);
}

Test(file_safety, a_results_or_golden_directory_that_cannot_be_used_is_an_error)
{
    setup s;
    make_setup(&s);
    char missing[RB_PATH_MAX + 16], loop_a[RB_PATH_MAX + 16], loop_b[RB_PATH_MAX + 16], frag[3 * RB_PATH_MAX];
    snprintf(missing, sizeof missing, "%s/missing", s.dir);
    snprintf(loop_a, sizeof loop_a, "%s/loop-a", s.dir);
    snprintf(loop_b, sizeof loop_b, "%s/loop-b", s.dir);
    cr_assert_eq(symlink(loop_b, loop_a), 0);
    cr_assert_eq(symlink(loop_a, loop_b), 0);
    const struct {
        const char *golden, *results, *what, *reason;
    } bad[] = {
        {s.dir, missing, "results", "No such file or directory"},
        {s.dir, s.rfile, "results", "Not a directory"},
        {s.dir, loop_a, "results", "Too many levels of symbolic links"},
        {missing, s.results, "golden", "No such file or directory"},
        {loop_b, s.results, "golden", "Too many levels of symbolic links"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rb_result r = certify_dirs(bad[i].golden, bad[i].results, NULL);
        snprintf(frag, sizeof frag, "refenc certify: %s (the %s directory): %s",
                 bad[i].what[0] == 'r' ? bad[i].results : bad[i].golden, bad[i].what, bad[i].reason);
        rb_expect_error(&r, 2, "certify", frag, (const char *[]){frag, NULL});
        cr_expect(strstr(r.out, "no results file") == NULL, "%s", r.out);
        rb_result_free(&r);
    }

    /* a results file that is a symbolic-link loop: an error, not "no results file" */
    cr_assert_eq(unlink(s.rfile), 0);
    cr_assert_eq(symlink(s.rfile, s.rfile), 0);
    rb_result r = certify_dirs(s.dir, s.results, NULL);
    snprintf(frag, sizeof frag, "refenc certify: %s: cannot read: Too many levels of symbolic links", s.rfile);
    rb_expect_error(&r, 2, "certify", "a results file looping", (const char *[]){frag, NULL});
    rb_result_free(&r);
    /* the control: a results file that does not exist fails the case (exit 1) */
    cr_assert_eq(unlink(s.rfile), 0);
    r = certify_dirs(s.dir, s.results, NULL);
    cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, " without a results file in ") != NULL, "%s", r.out);
    rb_result_free(&r);
    rb_tmpdir_remove(s.dir);
}

Test(file_safety, a_results_directory_that_cannot_be_searched_is_an_error)
{
    /* permissions bind root only through the unprivileged run (as nobody) */
    setup s;
    make_setup(&s);
    char frag[3 * RB_PATH_MAX], case_dir[RB_PATH_MAX + 16];
    snprintf(case_dir, sizeof case_dir, "%s/cases", s.dir);
    cr_assert_eq(chmod(s.dir, 0755), 0);
    cr_assert_eq(chmod(case_dir, 0755), 0);
    cr_assert_eq(chmod(s.golden, 0644), 0);
    char manifest[RB_PATH_MAX + 32];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", s.dir);
    cr_assert_eq(chmod(manifest, 0644), 0);
    cr_assert_eq(chmod(s.rfile, 0644), 0);
    const rb_run_options opt = {.unprivileged = 1};

    /* the control: everything readable, the case passes */
    cr_assert_eq(chmod(s.results, 0755), 0);
    rb_result r = certify_dirs(s.dir, s.results, &opt);
    cr_expect_eq(r.status, 0, "the control: exit %d: %s", r.status, r.err);
    rb_result_free(&r);

    cr_assert_eq(chmod(s.results, 0644), 0); /* readable, not searchable */
    r = certify_dirs(s.dir, s.results, &opt);
    snprintf(frag, sizeof frag, "refenc certify: %s (the results directory): cannot be searched: Permission denied",
             s.results);
    cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, frag) != NULL, "%s", r.err);
    cr_expect(strstr(r.out, "no results file") == NULL, "%s", r.out);
    rb_result_free(&r);

    cr_assert_eq(chmod(s.results, 0755), 0);
    cr_assert_eq(chmod(s.rfile, 0), 0); /* a results file it may not read */
    r = certify_dirs(s.dir, s.results, &opt);
    snprintf(frag, sizeof frag, "refenc certify: %s: cannot open: Permission denied", s.rfile);
    cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, frag) != NULL, "%s", r.err);
    rb_result_free(&r);
    chmod(s.rfile, 0600);
    rb_tmpdir_remove(s.dir);
}

Test(file_safety, paths_that_are_not_utf8_never_lose_the_certificate)
{
    setup s;
    make_setup(&s);
    char odd[RB_PATH_MAX + 32], json[RB_PATH_MAX + 32];
    snprintf(odd, sizeof odd, "%s/r\xff\xfe-\x01", s.dir);
    cr_assert_eq(mkdir(odd, 0700), 0);
    snprintf(json, sizeof json, "%s/cert.json", s.dir);
    const char *args[] = {"refenc", "certify", "--golden", s.dir, "--results", odd, "--case", CASE,
                          "--json", json, NULL};
    rb_result r = rb_run(args);
    cr_expect_eq(r.status, 1, "no results there: the case fails; exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "summary: 1 case, 0 passed, 1 failed: FAIL") != NULL, "%s", r.out);
    rb_result_free(&r);
    json_error_t jerr;
    json_t *doc = json_load_file(json, 0, &jerr);
    cr_assert_not_null(doc, "the certificate is missing or not JSON: %s", jerr.text);
    const char *res = json_string_value(json_object_get(doc, "results"));
    cr_expect(res != NULL && strstr(res, "/r\\xff\\xfe-\\x01") != NULL, "results: %s", res);
    const char *note = json_string_value(json_object_get(json_array_get(json_object_get(doc, "cases"), 0), "note"));
    cr_expect(note != NULL && strstr(note, "no results file ") && strstr(note, "/r\\xff\\xfe-\\x01/"), "note: %s",
              note);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc, "summary"), "verdict")), "FAIL");
    json_decref(doc);
    rb_tmpdir_remove(s.dir);
}

/* ---- memory: what a results file may cost ------------------------------------------- */

Test(file_safety, a_results_file_with_a_huge_tail_is_refused_before_it_is_read)
{
    setup s;
    make_setup(&s);
    /* the reference's results, then 2 GiB more (a sparse file: no disk) */
    const int fd = open(s.rfile, O_WRONLY);
    cr_assert(fd >= 0);
    struct stat sb;
    cr_assert_eq(fstat(fd, &sb), 0);
    cr_assert_eq(ftruncate(fd, sb.st_size + ((off_t)2 << 30)), 0);
    close(fd);
    /* 256 MiB of address space: reading the file whole would need 2 GiB */
    const rb_run_options opt = {.address_space = RB_UNDER_ASAN ? 0 : (uint64_t)256 << 20};
    rb_result r = certify_dirs(s.dir, s.results, &opt);
    rb_expect_error(&r, 2, "certify", "a 2 GiB tail",
                    (const char *[]){CASE ".safetensors: data bytes [", ") belong to no tensor", NULL});
    rb_result_free(&r);
    rb_tmpdir_remove(s.dir);
}

Test(file_safety, a_header_of_too_many_tokens_is_refused_before_it_is_parsed)
{
    setup s;
    make_setup(&s);
    /* 20 MB of tiny entries: about 4 million tokens, which jansson would
     * turn into some 460 MB */
    const size_t target = 20u << 20;
    char *h = malloc(target + 64);
    cr_assert_not_null(h);
    size_t n = 0, k = 0;
    h[n++] = '{';
    while (n < target)
        n += (size_t)sprintf(h + n, "%s\"t%zu\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}", k ? "," : "",
                             k), k++;
    h[n++] = '}';
    h[n] = '\0';
    rb_write_safetensors(s.rfile, h, NULL, 0);
    free(h);
    const rb_run_options opt = {.address_space = RB_UNDER_ASAN ? 0 : (uint64_t)160 << 20};
    rb_result r = certify_dirs(s.dir, s.results, &opt);
    rb_expect_error(&r, 2, "certify", "a header of millions of tokens",
                    (const char *[]){CASE ".safetensors: header holds ", " JSON tokens (keys, values, brackets), "
                                     "more than the limit of 524288", NULL});
    rb_result_free(&r);
    rb_tmpdir_remove(s.dir);
}
