/* Every command's --help against docs/cli.md, both ways
 * (scripts/check-help-docs.py): each --help exits 0 (the verbs golden merge
 * and golden list too), and the options a command's sections of
 * docs/cli.md list are exactly those its --help names.  The negative
 * controls run the same check on copies of docs/cli.md with an option
 * planted in the golden table, and with one (golden's --seed) taken out:
 * each must be named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#define PATH_CAP 4096
#define OUT_CAP (64 * 1024)

static const char *env(const char *name)
{
    const char *r = getenv(name);
    cr_assert(r != NULL && *r, "%s is not set (make check sets it)", name);
    return r;
}

/* Runs the check on the cli.md at md; its exit status, its output in out. */
static int check(const char *md, char *out)
{
    char cmd[3 * PATH_CAP];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/scripts/check-help-docs.py' '%s' '%s' 2>&1",
             env("REFENC_SOURCE_ROOT"), env("REFENC_CLI"), md);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL, "cannot run %s", cmd);
    size_t n = fread(out, 1, OUT_CAP - 1, p);
    out[n] = '\0';
    const int st = pclose(p);
    cr_assert(WIFEXITED(st), "the check did not exit normally: %s", out);
    return WEXITSTATUS(st);
}

static char *read_docs(void)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/docs/cli.md", env("REFENC_SOURCE_ROOT"));
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL, "cannot read %s", path);
    char *s = malloc(1 << 20);
    cr_assert(s != NULL);
    size_t n = fread(s, 1, (1 << 20) - 1, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Writes a copy of text with the first occurrence of each old[i] after
 * after (a heading) replaced by new[i]; its path in path. */
static void write_copy(char path[PATH_CAP], const char *text, const char *after, const char *const *old,
                       const char *const *new, size_t n)
{
    char *s = malloc(strlen(text) + 4096);
    cr_assert(s != NULL);
    strcpy(s, text);
    for (size_t i = 0; i < n; i++) {
        char *from = strstr(s, after), *at = from ? strstr(from, old[i]) : NULL;
        cr_assert(at != NULL, "docs/cli.md has no '%s' after '%s': update the controls", old[i], after);
        memmove(at + strlen(new[i]), at + strlen(old[i]), strlen(at + strlen(old[i])) + 1);
        memcpy(at, new[i], strlen(new[i]));
    }
    snprintf(path, PATH_CAP, "%s/refenc-help-docs-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    const int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert(f != NULL);
    fputs(s, f);
    fclose(f);
    free(s);
}

Test(help_docs, every_help_exits_0_and_agrees_with_cli_md)
{
    char md[PATH_CAP], *out = malloc(OUT_CAP);
    cr_assert(out != NULL);
    snprintf(md, sizeof md, "%s/docs/cli.md", env("REFENC_SOURCE_ROOT"));
    cr_expect_eq(check(md, out), 0, "%s", out);
    free(out);
}

Test(help_docs, a_planted_or_missing_option_is_named)
{
    char *text = read_docs(), path[PATH_CAP], *out = malloc(OUT_CAP);
    cr_assert(out != NULL);
    const char *golden = "## `refenc golden`";

    const char *plant[] = {"| `--prec P` |"}, *planted[] = {"| `--planted-option` | planted |\n| `--prec P` |"};
    write_copy(path, text, golden, plant, planted, 1);
    cr_expect_eq(check(path, out), 1, "a planted option passed: %s", out);
    cr_expect(strstr(out, "--planted-option: in") != NULL && strstr(out, "but not in 'refenc golden --help'"),
              "the planted option is not named: %s", out);
    unlink(path);

    /* golden's --seed out of its synopsis and its table */
    const char *seed[] = {"[--seed N]", "| `--seed N` |"}, *gone[] = {"", "| seed |"};
    write_copy(path, text, golden, seed, gone, 2);
    cr_expect_eq(check(path, out), 1, "a missing option passed: %s", out);
    cr_expect(strstr(out, "--seed: in 'refenc golden --help' but not in") != NULL,
              "the missing option is not named: %s", out);
    unlink(path);
    free(text);
    free(out);
}

/* `refenc golden --help` states the --prec default a --config run uses:
 * the one a run without --prec reports ("computed at P bits"). */
Test(help_docs, golden_help_gives_the_prec_default_a_run_uses)
{
    char dir[] = "/tmp/refenc-help-prec-XXXXXX", cmd[3 * PATH_CAP], *out = malloc(OUT_CAP);
    cr_assert(out != NULL && mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && printf '%%s' '{\"model\": {\"d_model\": 4, \"n_heads\": 2, \"d_ff\": 6, \"n_layers\": 1}, "
             "\"input\": {\"batch\": 1, \"seq_len\": 2}}' > c.json && '%s' golden --config c.json --out-file c.st 2>&1 "
             "&& '%s' golden --help",
             dir, env("REFENC_CLI"), env("REFENC_CLI"));
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL);
    size_t n = fread(out, 1, OUT_CAP - 1, p);
    out[n] = '\0';
    cr_assert_eq(pclose(p), 0, "%s", out);
    const char *at = strstr(out, "(computed at ");
    cr_assert(at != NULL, "no precision in the summary: %s", out);
    const long prec = strtol(at + strlen("(computed at "), NULL, 10);
    char want[64];
    snprintf(want, sizeof want, "(default %ld for --config", prec);
    cr_expect(strstr(out, want) != NULL, "the help does not say '%s': %s", want, out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
    free(out);
}
