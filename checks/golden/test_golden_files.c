/* Where `refenc golden` (and the other commands with outputs) may write and
 * what they may read (docs/cli.md, "Files"), as an attacker or a careless
 * user meets it, each a reproducer of a file lost, misplaced or hung on:
 *
 *   - an output that is an input of the same command is refused, the input
 *     untouched (golden --out-file, golden merge, golden manifest, run
 *     --config --out, certify --json with --junit);
 *   - a case name that is not a file name is refused wherever it becomes
 *     one: --name 'a..b', a config file's name, a case name inside part
 *     files (recomputed fingerprint included) that would take merge --out
 *     DIR outside DIR;
 *   - a FIFO, a symbolic link at the golden directory's manifest.json,
 *     cases/ or parts/ is refused at once, never waited on nor followed;
 *   - a path over PATH_MAX is an error, never a shorter path;
 *   - two runs with one --name into one directory: each stores its own case
 *     (the directory lock covers the case and the manifest).
 *
 * Each group has its control: the same command with the one wrong thing
 * put right succeeds. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/golden/digest.h"
#include "../../ref/golden/file.h"
#include "../../ref/golden/plan.h"
#include "../../ref/io/case_file.h"
#include "../../ref/io/manifest.h"
#include "../../ref/io/safetensors.h"
#include "../robustness/robust.h"

#define CONFIG "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1}, " \
               "\"input\": {\"batch\": 2, \"seq_len\": 3}}"
#define CATALOGUE "{\"cases\": [{\"case\": \"t\", \"component\": \"layernorm\", \"description\": \"d\", " \
                  "\"seed\": 7, \"model\": {\"d_model\": 4, \"n_heads\": 1, \"d_ff\": 1, \"n_layers\": 1}, " \
                  "\"input\": {\"batch\": 2, \"seq_len\": 3}}]}"

/* Formats a path into buf (PATH_MAX bytes); the test fails if it does not fit. */
__attribute__((format(printf, 2, 3))) static void pf(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf, PATH_MAX, fmt, ap);
    va_end(ap);
    cr_assert(n > 0 && n < PATH_MAX, "a test path does not fit");
}

/* dir/name holding text; its path in path (PATH_MAX bytes). */
static const char *text_file(char *path, const char *dir, const char *name, const char *text)
{
    pf(path, "%s/%s", dir, name);
    rb_write_file(path, text, strlen(text));
    return path;
}

static void remove_tree(const char *dir)
{
    char cmd[PATH_MAX + 32];
    pf(cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* The number of entries of dir (other than . and ..); -1 when it cannot be read. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    for (const struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* The file's bytes equal `want` (n bytes). */
static int holds(const char *path, const unsigned char *want, size_t n)
{
    size_t m;
    unsigned char *b = rb_read_file(path, &m);
    const int same = m == n && memcmp(b, want, n) == 0;
    free(b);
    return same;
}

/* ---- outputs that are inputs ------------------------------------------------------------- */

typedef struct {
    const char *what, *args[16], *input, *fragment;
} clobber;

Test(golden_files, an_output_that_is_an_input_of_the_same_command_is_refused, .timeout = 120)
{
    char dir[RB_PATH_MAX], cfg[PATH_MAX], cat[PATH_MAX], junk[PATH_MAX];
    char p1[PATH_MAX], p2[PATH_MAX], cases[PATH_MAX], tcase[PATH_MAX];
    char gold[PATH_MAX], gcfg[PATH_MAX], cert[PATH_MAX], results[RB_PATH_MAX + 16];
    rb_tmpdir(dir);
    text_file(cfg, dir, "config.json", CONFIG);
    text_file(cat, dir, "cat.json", CATALOGUE);
    text_file(junk, dir, "junk.safetensors", "not a safetensors file");
    pf(p1, "%s/p1.safetensors", dir);
    pf(p2, "%s/p2.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", "1/2", "--out-file", p1, "--quiet", NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", "2/2", "--out-file", p2, "--quiet", NULL});
    pf(cases, "%s/cases", dir);
    cr_assert_eq(mkdir(cases, 0700), 0);
    pf(tcase, "%s/t.safetensors", cases);
    rb_run_ok((const char *[]){"refenc", "golden", "--catalogue", cat, "--case", "t", "--out-file", tcase, "--quiet",
                            NULL});
    /* a golden directory whose manifest.json is the config of the run */
    pf(gold, "%s/gold", dir);
    cr_assert_eq(mkdir(gold, 0700), 0);
    text_file(gcfg, gold, "manifest.json", CONFIG);
    /* certify's two outputs on one name (the fixture's results) */
    rb_encoder_results(dir, results);
    pf(cert, "%s/cert.out", dir);
    const char *fixture = rb_fixture_dir();

    const clobber cases_[] = {
        {"golden --out-file the config", {"refenc", "golden", "--config", cfg, "--out-file", cfg, NULL}, cfg,
         "config.json: is the same file as the --config"},
        {"golden --out-file the catalogue",
         {"refenc", "golden", "--catalogue", cat, "--case", "t", "--out-file", cat, NULL}, cat,
         "cat.json: is the same file as the --catalogue"},
        {"golden --out-file the weights",
         {"refenc", "golden", "--config", cfg, "--weights", junk, "--out-file", junk, NULL}, junk,
         "is the same file as the --weights"},
        {"golden --out-file the inputs",
         {"refenc", "golden", "--config", cfg, "--inputs", junk, "--out-file", junk, NULL}, junk,
         "is the same file as the --inputs"},
        {"golden --out DIR whose manifest is the config",
         {"refenc", "golden", "--config", gcfg, "--name", "g", "--out", gold, NULL}, gcfg,
         "manifest.json: is the same file as the --config"},
        {"golden merge --out-file a part", {"refenc", "golden", "merge", "--out-file", p1, p1, p2, NULL}, p1,
         "p1.safetensors: is the same file as the part"},
        {"golden manifest OUT the catalogue", {"refenc", "golden", "manifest", cat, cases, cat, NULL}, cat,
         "cat.json: is the same file as the catalogue"},
        {"golden manifest OUT a case", {"refenc", "golden", "manifest", cat, cases, tcase, NULL}, tcase,
         "t.safetensors: is the same file as the golden case"},
        {"run --config --out the config", {"refenc", "run", "--config", cfg, "--out", cfg, NULL}, cfg,
         "config.json: is the same file as the --config"},
        {"run --config --out the weights",
         {"refenc", "run", "--config", cfg, "--weights", junk, "--out", junk, NULL}, junk,
         "is the same file as the --weights"},
    };
    for (size_t i = 0; i < sizeof cases_ / sizeof cases_[0]; i++) {
        size_t n;
        unsigned char *before = rb_read_file(cases_[i].input, &n);
        rb_result r = rb_run(cases_[i].args);
        const char *cmd = strcmp(cases_[i].args[1], "run") == 0 ? "run" : "golden";
        rb_expect_error(&r, 2, cmd, cases_[i].what, (const char *[]){cases_[i].fragment, "refusing to overwrite it", NULL});
        rb_result_free(&r);
        cr_expect(holds(cases_[i].input, before, n), "%s: the input was changed", cases_[i].what);
        free(before);
        cr_expect(!rb_has_temporary_file(dir), "%s: a temporary file is left", cases_[i].what);
    }
    /* certify --json X --junit X: neither replaces the other */
    rb_result r = rb_run((const char *[]){"refenc", "certify", "--golden", fixture, "--results", results, "--case",
                                          "encoder_*", "--json", cert, "--junit", cert, NULL});
    rb_expect_error(&r, 2, "certify", "--json and --junit on one file",
                    (const char *[]){"cert.out: is the same file as the --json certificate", NULL});
    rb_result_free(&r);
    cr_expect(!rb_exists(cert), "a certificate was written");

    /* controls: the same commands with another output succeed */
    char out[PATH_MAX];
    pf(out, "%s/other.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out-file", out, p1, p2, "--quiet", NULL});
    pf(out, "%s/manifest.json", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "manifest", cat, cases, out, NULL});
    pf(out, "%s/results.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "run", "--config", cfg, "--out", out, NULL});
    pf(out, "%s/cert.json", dir);
    char junit[PATH_MAX];
    pf(junit, "%s/cert.xml", dir);
    r = rb_run((const char *[]){"refenc", "certify", "--golden", fixture, "--results", results, "--case", "encoder_*",
                                "--json", out, "--junit", junit, NULL});
    cr_expect_eq(r.status, 0, "certify with two outputs: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    remove_tree(dir);
}

/* ---- names that become file names ---------------------------------------------------------- */

/* Part files whose case is renamed to `name`, with the plan and fingerprint
 * merge checks rewritten to match (an attacker can: they are unkeyed hashes
 * of the part's own claims, docs/certify.md), from the parts p1 (shard 1/2)
 * and p2 into q1, q2. */
static void rename_parts(const char *p1, const char *p2, const char *q1, const char *q2, const char *name)
{
    const char *from[2] = {p1, p2}, *to[2] = {q1, q2};
    for (int k = 0; k < 2; k++) {
        rb_golden part;
        rb_golden_load_file(&part, from[k]);
        json_t *plan = json_loads(json_string_value(json_object_get(part.meta, "plan")), 0, NULL);
        cr_assert_not_null(plan, "%s: no plan", from[k]);
        json_object_set_new(plan, "case", json_string(name));
        char *text = golden_plan_text(plan), fp[65];
        cr_assert_not_null(text);
        refenc_sha256_hex(fp, text, strlen(text));
        rb_golden_set_meta(&part, "case", name);
        rb_golden_set_meta(&part, "plan", text);
        rb_golden_set_meta(&part, "fingerprint", fp);
        rb_golden_write(&part, to[k]);
        rb_golden_free(&part);
        free(text);
        json_decref(plan);
    }
}

Test(golden_files, a_case_name_that_is_not_a_file_name_is_refused_where_it_becomes_one, .timeout = 120)
{
    char dir[RB_PATH_MAX], cfg[PATH_MAX], dotted[PATH_MAX], out[PATH_MAX];
    char p1[PATH_MAX], p2[PATH_MAX], q1[PATH_MAX], q2[PATH_MAX];
    char deep[PATH_MAX], escaped[PATH_MAX];
    rb_tmpdir(dir);
    text_file(cfg, dir, "config.json", CONFIG);
    text_file(dotted, dir, "x..y.json", CONFIG);
    pf(out, "%s/gold", dir);
    const struct {
        const char *what, *args[12], *fragment;
    } refused[] = {
        {"--name a..b", {"refenc", "golden", "--config", cfg, "--name", "a..b", "--out", out, NULL}, "'a..b'"},
        {"--name ../x", {"refenc", "golden", "--config", cfg, "--name", "../x", "--out", out, NULL}, "'../x'"},
        {"a config named x..y.json", {"refenc", "golden", "--config", dotted, "--out", out, NULL}, "'x..y'"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        rb_result r = rb_run(refused[i].args);
        rb_expect_error(&r, 2, "golden", refused[i].what,
                        (const char *[]){refused[i].fragment, "is not a case name", "no '..'", NULL});
        rb_result_free(&r);
        cr_expect(!rb_exists(out), "%s: the golden directory was made", refused[i].what);
    }
    /* parts naming their case ../../../x: merge --out DIR must not write outside DIR */
    pf(p1, "%s/p1.safetensors", dir);
    pf(p2, "%s/p2.safetensors", dir);
    pf(q1, "%s/q1.safetensors", dir);
    pf(q2, "%s/q2.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", "1/2", "--out-file", p1, "--quiet", NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--shard", "2/2", "--out-file", p2, "--quiet", NULL});
    rename_parts(p1, p2, q1, q2, "../../../x");
    pf(deep, "%s/one", dir);
    cr_assert_eq(mkdir(deep, 0700), 0);
    pf(deep, "%s/one/two", dir);
    cr_assert_eq(mkdir(deep, 0700), 0);
    pf(deep, "%s/one/two/out", dir);
    pf(escaped, "%s/one/x.safetensors", dir);
    rb_result r = rb_run((const char *[]){"refenc", "golden", "merge", "--out", deep, q1, q2, NULL});
    rb_expect_error(&r, 2, "golden", "a part naming its case ../../../x",
                    (const char *[]){"q1.safetensors: __metadata__.plan: case '../../../x' is not a case name", NULL});
    rb_result_free(&r);
    cr_expect(!rb_exists(escaped), "merge --out wrote %s, outside its directory", escaped);
    cr_expect(!rb_exists(deep), "merge made its output directory for a case it refuses");
    /* control: the same parts renamed to a file name merge into the directory */
    rename_parts(p1, p2, q1, q2, "x");
    rb_run_ok((const char *[]){"refenc", "golden", "merge", "--out", deep, q1, q2, "--quiet", NULL});
    pf(escaped, "%s/one/two/out/cases/x.safetensors", dir);
    cr_expect(rb_exists(escaped));
    /* control: a dotted name that is one, a.b */
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--name", "a.b", "--out", out, "--quiet", NULL});
    remove_tree(dir);
}

/* ---- what is inside the golden directory ------------------------------------------------- */

Test(golden_files, a_fifo_or_a_link_in_the_golden_directory_is_refused_at_once, .timeout = 150)
{
    char dir[RB_PATH_MAX], cfg[PATH_MAX], gold[PATH_MAX], man[PATH_MAX];
    char cases[PATH_MAX], victim[PATH_MAX], elsewhere[PATH_MAX];
    rb_tmpdir(dir);
    text_file(cfg, dir, "config.json", CONFIG);
    pf(gold, "%s/gold", dir);
    pf(man, "%s/manifest.json", gold);
    pf(cases, "%s/cases", gold);
    cr_assert_eq(mkdir(gold, 0700), 0);
    const char *make[] = {"refenc", "golden", "--config", cfg, "--name", "m", "--out", gold, "--quiet", NULL};

    /* a FIFO as manifest.json: refused at once (it hung, holding the lock) */
    cr_assert_eq(mkfifo(man, 0600), 0);
    const time_t t0 = time(NULL);
    rb_result r = rb_run(make);
    rb_expect_error(&r, 2, "golden", "a FIFO as manifest.json",
                    (const char *[]){"gold/manifest.json: not a regular file", NULL});
    rb_result_free(&r);
    cr_expect_lt(time(NULL) - t0, 60, "the run waited on the FIFO");
    cr_expect_eq(entries(cases), 0, "a case was stored next to a manifest that is not one");
    struct stat sb;
    cr_expect(lstat(man, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    unlink(man);

    /* a symbolic link as manifest.json: neither read nor replaced */
    text_file(victim, dir, "victim.json", "{\"cases\": []}");
    cr_assert_eq(symlink(victim, man), 0);
    r = rb_run(make);
    rb_expect_error(&r, 2, "golden", "a link as manifest.json",
                    (const char *[]){"gold/manifest.json: is a symbolic link, not a regular file", NULL});
    rb_result_free(&r);
    cr_expect(holds(victim, (const unsigned char *)"{\"cases\": []}", 13), "the link's target was changed");
    cr_expect_eq(entries(cases), 0);
    unlink(man);

    /* a symbolic link as cases/: nothing written through it */
    cr_assert_eq(rmdir(cases), 0);
    pf(elsewhere, "%s/elsewhere", dir);
    cr_assert_eq(mkdir(elsewhere, 0700), 0);
    cr_assert_eq(symlink(elsewhere, cases), 0);
    r = rb_run(make);
    rb_expect_error(&r, 2, "golden", "a link as cases/",
                    (const char *[]){"gold/cases: is a symbolic link, not a directory", NULL});
    rb_result_free(&r);
    cr_expect_eq(entries(elsewhere), 0, "a case was written through the link");
    cr_expect(!rb_exists(man));
    unlink(cases);

    /* a symbolic link as parts/: no part written through it */
    char parts[PATH_MAX];
    pf(parts, "%s/parts", gold);
    cr_assert_eq(symlink(elsewhere, parts), 0);
    r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--name", "m", "--shard", "1/2", "--out", gold,
                                "--quiet", NULL});
    rb_expect_error(&r, 2, "golden", "a link as parts/",
                    (const char *[]){"gold/parts: is a symbolic link, not a directory", NULL});
    rb_result_free(&r);
    cr_expect_eq(entries(elsewhere), 0, "a part was written through the link");
    unlink(parts);

    /* control: a plain directory takes the case and the manifest */
    rb_run_ok(make);
    pf(victim, "%s/m.safetensors", cases);
    cr_expect(rb_exists(victim) && rb_exists(man));
    remove_tree(dir);
}

/* A directory of `len` bytes under dir (made, every level), in path. */
static void deep_dir(char *path, size_t len, const char *dir)
{
    size_t n = (size_t)snprintf(path, PATH_MAX, "%s", dir);
    while (len - n > 1 + 200 + 1) {
        path[n++] = '/';
        memset(path + n, 'd', 200);
        n += 200;
        path[n] = '\0';
        cr_assert(mkdir(path, 0700) == 0, "mkdir: %s", strerror(errno));
    }
    path[n++] = '/';
    memset(path + n, 'e', len - n);
    path[len] = '\0';
    cr_assert(mkdir(path, 0700) == 0, "mkdir: %s", strerror(errno));
    cr_assert_eq(strlen(path), len);
}

Test(golden_files, a_path_over_path_max_is_an_error_not_a_shorter_path, .timeout = 120)
{
    char dir[RB_PATH_MAX], cfg[PATH_MAX], cat[PATH_MAX], deep[PATH_MAX], out[PATH_MAX];
    rb_tmpdir(dir);
    text_file(cfg, dir, "config.json", CONFIG);
    text_file(cat, dir, "cat.json", CATALOGUE);
    /* 4075 bytes: DIR/manifest.json (4089) fits, DIR/cases/abcdefgh.safetensors
     * (4102) does not; it was cut to .../abcdefgh.safe and reported written */
    deep_dir(deep, 4075, dir);
    const char *frag102[] = {"path too long (4102 bytes, longer than the limit of 4095)", NULL};
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--name", "abcdefgh", "--out", deep,
                                          "--quiet", NULL});
    rb_expect_error(&r, 2, "golden", "a case path of 4102 bytes", frag102);
    rb_result_free(&r);
    cr_expect_eq(entries(deep), 0, "something was written under the long directory");
    /* a part: DIR/parts/abcdefgh.part-1-of-2.safetensors (4114 bytes) */
    r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--name", "abcdefgh", "--shard", "1/2", "--out",
                                deep, "--quiet", NULL});
    rb_expect_error(&r, 2, "golden", "a part path of 4114 bytes",
                    (const char *[]){"path too long (4114 bytes, longer than the limit of 4095)", NULL});
    rb_result_free(&r);
    cr_expect_eq(entries(deep), 0, "something was written under the long directory");
    /* golden manifest: CASES_DIR/t.safetensors (4089) fits, a longer case name not */
    pf(out, "%s/manifest.json", dir);
    const char *cat_long = "{\"cases\": [{\"case\": \"tttttttttttttttttttttttt\", \"component\": \"layernorm\", "
                           "\"description\": \"d\", \"seed\": 7, \"model\": {\"d_model\": 4, \"n_heads\": 1, "
                           "\"d_ff\": 1, \"n_layers\": 1}, \"input\": {\"batch\": 2, \"seq_len\": 3}}]}";
    char catl[PATH_MAX];
    text_file(catl, dir, "catl.json", cat_long);
    r = rb_run((const char *[]){"refenc", "golden", "manifest", catl, deep, out, NULL});
    rb_expect_error(&r, 2, "golden", "a catalogue case path of 4112 bytes",
                    (const char *[]){"path too long (4112 bytes, longer than the limit of 4095)", NULL});
    rb_result_free(&r);
    cr_expect(!rb_exists(out));
    /* control: a short name fits, and is written where it says */
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--name", "m", "--out", deep, "--quiet", NULL});
    char file[PATH_MAX + 32];
    pf(file, "%s/cases", deep);
    cr_expect_eq(entries(file), 1);
    remove_tree(dir);
}

/* ---- two runs, one name, one directory ----------------------------------------------------- */

/* Starts `refenc golden --config cfg --seed seed --name m --out gold` in the background. */
static pid_t start_golden(const char *cfg, const char *seed, const char *gold)
{
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        const int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execl(rb_cli(), "refenc", "golden", "--config", cfg, "--seed", seed, "--name", "m", "--out", gold, "--quiet",
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* How many of the two pids wait for an flock (/proc/locks lists a waiter
 * as "N: -> FLOCK ... PID ..."); -1 when /proc/locks cannot be read. */
static int flock_waiters(pid_t a, pid_t b)
{
    FILE *f = fopen("/proc/locks", "r");
    if (f == NULL)
        return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        const char *w = strstr(line, "-> FLOCK");
        long pid;
        if (w != NULL && sscanf(w, "-> FLOCK %*s %*s %ld", &pid) == 1)
            n += pid == a || pid == b;
    }
    fclose(f);
    return n;
}

Test(golden_files, two_runs_with_one_name_each_store_their_own_case, .timeout = 300)
{
    char dir[RB_PATH_MAX], cfg[PATH_MAX], gold[PATH_MAX], ref1[PATH_MAX];
    char ref2[PATH_MAX], cases[PATH_MAX], stored[PATH_MAX];
    rb_tmpdir(dir);
    text_file(cfg, dir, "config.json", CONFIG);
    /* what each run makes on its own: two different cases named m */
    pf(ref1, "%s/seed1.safetensors", dir);
    pf(ref2, "%s/seed2.safetensors", dir);
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--seed", "1", "--name", "m", "--out-file", ref1,
                            "--quiet", NULL});
    rb_run_ok((const char *[]){"refenc", "golden", "--config", cfg, "--seed", "2", "--name", "m", "--out-file", ref2,
                            "--quiet", NULL});
    cr_assert(!rb_same_file(ref1, ref2));
    pf(gold, "%s/gold", dir);
    cr_assert_eq(mkdir(gold, 0700), 0);

    /* the test holds the directory's lock (the documented flock) while both
     * runs compute and write, so that both reach it before either goes on */
    const int lock = open(gold, O_RDONLY | O_DIRECTORY);
    cr_assert_geq(lock, 0);
    cr_assert_eq(flock(lock, LOCK_EX), 0);
    const pid_t a = start_golden(cfg, "1", gold), b = start_golden(cfg, "2", gold);
    /* up to 240 s: each run computes its case before it asks for the lock,
     * which takes well under a second alone but minutes on a loaded machine */
    int waiting = 0;
    for (int tries = 0; tries < 2400 && waiting < 2; tries++) {
        const struct timespec tick = {0, 100 * 1000 * 1000};
        nanosleep(&tick, NULL);
        waiting = flock_waiters(a, b);
        if (waiting < 0) { /* no /proc/locks: give them time instead */
            sleep(5);
            break;
        }
    }
    cr_expect(waiting < 0 || waiting == 2, "the runs never both waited for the directory's lock (%d)", waiting);
    flock(lock, LOCK_UN);
    close(lock);
    int wa, wb;
    cr_assert_eq(waitpid(a, &wa, 0), a);
    cr_assert_eq(waitpid(b, &wb, 0), b);
    cr_expect(WIFEXITED(wa) && WEXITSTATUS(wa) == 0, "run with seed 1: status %#x", wa);
    cr_expect(WIFEXITED(wb) && WEXITSTATUS(wb) == 0, "run with seed 2: status %#x", wb);

    /* one case m, one of the two, and the manifest lists exactly it */
    pf(cases, "%s/cases", gold);
    pf(stored, "%s/m.safetensors", cases);
    cr_expect_eq(entries(cases), 1, "cases/ holds %d files (a temporary left?)", entries(cases));
    cr_expect(rb_same_file(stored, ref1) || rb_same_file(stored, ref2), "the stored case is neither run's");
    refenc_manifest m;
    refenc_error err;
    cr_assert_eq(refenc_manifest_read(&m, gold, &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(m.n_cases, 1);
    size_t n;
    unsigned char *bytes = rb_read_file(stored, &n);
    char hex[65];
    refenc_sha256_hex(hex, bytes, n);
    cr_expect(m.n_cases == 1 && strcmp(m.cases[0].sha256, hex) == 0, "the manifest lists another file than cases/m");
    free(bytes);
    refenc_manifest_free(&m);
    remove_tree(dir);
}

/* ---- a termination signal while a threaded run writes ------------------------------------ */

#define THREADED_CONFIG "{\"model\": {\"d_model\": 64, \"n_heads\": 4, \"d_ff\": 96, \"n_layers\": 2}, " \
                        "\"input\": {\"batch\": 4, \"seq_len\": 32}}"

/* Runs `refenc golden --config cfg --threads 2 --out-file out` (with
 * shard: `--per-layer --shard shard`), stops it (SIGSTOP) as soon as a
 * temporary file appears in dir (inotify), sends SIGTERM and lets it go on:
 * a case file's main thread blocks the signal while it writes, so one of
 * the oracle's OpenMP workers, idle since the oracle's run, takes it; a
 * part's temporary appears before its oracle run, which the signal ends.
 * Returns the wait status; *caught = 1 when the temporary was seen (and the
 * signal sent mid-write). */
static int signal_threaded_write(const char *cfg, const char *dir, const char *out, const char *shard, int *caught)
{
    *caught = 0;
    const int in = inotify_init1(IN_CLOEXEC);
    cr_assert_geq(in, 0, "inotify: %s", strerror(errno));
    cr_assert_geq(inotify_add_watch(in, dir, IN_CREATE), 0);
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        const int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        signal(SIGTERM, SIG_DFL);
        if (shard != NULL)
            execl(rb_cli(), "refenc", "golden", "--config", cfg, "--per-layer", "--shard", shard, "--threads", "2",
                  "--out-file", out, "--quiet", (char *)NULL);
        else
            execl(rb_cli(), "refenc", "golden", "--config", cfg, "--threads", "2", "--out-file", out, "--quiet",
                  (char *)NULL);
        _exit(127);
    }
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (!*caught) {
        const ssize_t n = read(in, buf, sizeof buf);
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            if (e->len > 0 && strstr(e->name, ".tmp.") != NULL && !*caught) {
                kill(pid, SIGSTOP);
                *caught = 1;
            }
        }
    }
    close(in);
    kill(pid, SIGTERM);
    kill(pid, SIGCONT);
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    return ws;
}

Test(golden_files, a_termination_signal_during_a_threaded_write_leaves_no_temporary, .timeout = 300)
{
    char dir[RB_PATH_MAX], cfg[PATH_MAX], outdir[PATH_MAX], out[PATH_MAX];
    rb_tmpdir(dir);
    text_file(cfg, dir, "config.json", THREADED_CONFIG);
    pf(outdir, "%s/out", dir);
    pf(out, "%s/case.safetensors", outdir);
    /* a round counts when the signal came before the rename: the case is
     * then absent; a run that ended before it was stopped proves nothing
     * either way; up to 8 rounds to see one */
    int mid_write = 0;
    for (int round = 0; round < 8 && mid_write == 0; round++) {
        cr_assert_eq(mkdir(outdir, 0700), 0);
        int caught;
        const int ws = signal_threaded_write(cfg, outdir, out, NULL, &caught);
        cr_expect(caught, "round %d: no temporary file appeared", round);
        const int too_late = WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && rb_exists(out);
        cr_expect(too_late || (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM), "round %d: status %#x, not ended by "
                  "SIGTERM", round, ws);
        cr_expect(!rb_has_temporary_file(outdir), "round %d: SIGTERM taken by an OpenMP worker mid-write left a "
                  "temporary file", round);
        mid_write += !rb_exists(out);
        remove_tree(outdir);
    }
    cr_expect_gt(mid_write, 0, "the signal never came before the rename: the test tested nothing");
    remove_tree(dir);
}

/* A shard's part is written as its units complete (file.h,
 * golden_part_writer): its temporary file is there for the whole oracle
 * run, with the termination signals let through.  SIGTERM then ends the
 * shard by that signal, leaving neither a part nor the temporary file (a
 * rerun computes the shard again: docs/cli.md, "Reruns").  Negative control
 * (run when this was written): with the signals left blocked over the run,
 * the shard wrote its part before the signal ended it. */
Test(golden_files, a_termination_signal_during_a_streamed_part_leaves_no_part, .timeout = 300)
{
    char dir[RB_PATH_MAX], cfg[PATH_MAX], outdir[PATH_MAX], out[PATH_MAX];
    rb_tmpdir(dir);
    text_file(cfg, dir, "config.json", THREADED_CONFIG);
    pf(outdir, "%s/out", dir);
    pf(out, "%s/part.safetensors", outdir);
    cr_assert_eq(mkdir(outdir, 0700), 0);
    int caught;
    const int ws = signal_threaded_write(cfg, outdir, out, "1/2", &caught);
    cr_expect(caught, "no temporary file appeared");
    cr_expect(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGTERM, "status %#x, not ended by SIGTERM", ws);
    cr_expect(!rb_exists(out), "the shard ended by SIGTERM left a part");
    cr_expect(!rb_has_temporary_file(outdir), "the shard ended by SIGTERM left its temporary file");
    remove_tree(dir);
}

/* A part's digest of a named tensor (digest.h) covers its name and every
 * dimension, up to the format's REFENC_ST_MAX_NDIM: shapes that differ
 * only in their last dimension, or that are the same values in another
 * order, hash apart; the same tensor hashes the same. */
Test(golden_files, a_tensor_digest_covers_every_dimension)
{
    const double v[2] = {1.0, 2.0};
    size_t a[REFENC_ST_MAX_NDIM], b[REFENC_ST_MAX_NDIM];
    for (size_t d = 0; d < REFENC_ST_MAX_NDIM; d++)
        a[d] = b[d] = 1;
    a[REFENC_ST_MAX_NDIM - 1] = 2; /* (1, ..., 1, 2) */
    b[REFENC_ST_MAX_NDIM - 2] = 2; /* (1, ..., 2, 1) */
    char hx[3][65];
    const size_t *shapes[3] = {a, b, a};
    for (int k = 0; k < 3; k++) {
        struct sha256_ctx h;
        sha256_init(&h);
        golden_digest_tensor(&h, "out.t", REFENC_ST_MAX_NDIM, shapes[k], v, sizeof v);
        golden_digest_hex(hx[k], &h);
    }
    cr_expect_str_neq(hx[0], hx[1]);
    cr_expect_str_eq(hx[0], hx[2]);
}
