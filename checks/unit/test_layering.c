/* The rules between the rooms of ref/ (docs/architecture.md), enforced by
 * scripts/check-layering.sh: the real tree obeys them, and each rule catches a
 * violation planted in a small tree of its own (the negative controls). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#define PATH_CAP 4096

static const char *source_root(void)
{
    const char *r = getenv("REFENC_SOURCE_ROOT");
    cr_assert(r != NULL && *r, "REFENC_SOURCE_ROOT is not set: it must name the source tree (make check sets it)");
    return r;
}

/* Runs the checker on root; returns its exit status and its output in out. */
static int run_checker(const char *root, char *out, size_t cap)
{
    char cmd[3 * PATH_CAP];
    snprintf(cmd, sizeof cmd, "sh '%s/scripts/check-layering.sh' '%s' 2>&1", source_root(), root);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL, "cannot run %s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    const int st = pclose(p);
    cr_assert(WIFEXITED(st), "the checker did not exit normally: %s", out);
    return WEXITSTATUS(st);
}

static void write_file(const char *root, const char *rel, const char *text)
{
    char path[PATH_CAP], cmd[2 * PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    cr_assert(system(cmd) == 0);
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* A small tree whose includes all obey the rules. */
static void make_clean_tree(char root[PATH_CAP])
{
    snprintf(root, PATH_CAP, "%s/refenc-layering-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(root) != NULL);
    write_file(root, "ref/layernorm.c", "#include \"layernorm.h\"\n#include <math.h>\n#include \"core/status.h\"\n");
    write_file(root, "ref/core/status.c", "#include \"status.h\"\n#include <stdio.h>\n");
    write_file(root, "ref/oracle/layernorm.c", "#include <mpfr.h>\n#include \"../core/config.h\"\n#include \"internal.h\"\n");
    write_file(root, "ref/io/safetensors.c", "#include <jansson.h>\n#include \"../core/status.h\"\n");
    write_file(root, "ref/tool/certify.c", "#include \"../io/safetensors.h\"\n#include \"../layernorm.h\"\n");
    write_file(root, "ref/tool/random_params.c", "#include <gsl/gsl_randist.h>\n");
    write_file(root, "ref/golden/make.c", "#include \"../oracle/oracle.h\"\n#include \"../tool/variants.h\"\n#include \"engine.h\"\n");
    write_file(root, "ref/cli/main.c", "#include \"../refenc.h\"\n#include \"../golden/make.h\"\n#include <gsl/gsl_rng.h>\n");
    write_file(root, "ref/refenc.h", "#include \"io/safetensors.h\"\n#include \"tool/certify.h\"\n");
}

static void remove_tree(const char *root)
{
    char cmd[2 * PATH_CAP];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_assert(system(cmd) == 0);
}

Test(layering, the_source_tree_obeys_every_rule)
{
    char out[16384];
    const int rc = run_checker(source_root(), out, sizeof out);
    cr_expect_eq(rc, 0, "check-layering failed on the source tree (exit %d):\n%s", rc, out);
    cr_expect_str_empty(out, "check-layering printed on a clean tree:\n%s", out);
}

Test(layering, a_tree_that_obeys_the_rules_passes)
{
    char root[PATH_CAP], out[4096];
    make_clean_tree(root);
    const int rc = run_checker(root, out, sizeof out);
    cr_expect_eq(rc, 0, "exit %d on a clean tree:\n%s", rc, out);
    remove_tree(root);
}

/* Each planted include breaks exactly one rule; the checker must exit 1 and
 * name the file, the line and the rule. */
static const struct {
    const char *file, *text, *message;
} planted[] = {
    {"ref/softmax.c", "#include <math.h>\n#include \"oracle/oracle.h\"\n", "ref/softmax.c:2: kernels include ref/oracle/oracle.h"},
    {"ref/softmax.c", "#include \"io/safetensors.h\"\n", "ref/softmax.c:1: kernels include ref/io/safetensors.h"},
    {"ref/softmax.c", "#include \"tool/certify.h\"\n", "kernels include ref/tool/certify.h"},
    {"ref/softmax.c", "#include <jansson.h>\n", "ref/softmax.c:1: kernels includes <jansson.h>"},
    {"ref/softmax.c", "#include \"refenc.h\"\n", "kernels includes the umbrella"},
    {"ref/core/trace.c", "#include \"../encoder.h\"\n", "ref/core/trace.c:1: core includes ref/encoder.h (kernels)"},
    {"ref/core/params.c", "#include <gsl/gsl_randist.h>\n", "core includes <gsl/gsl_randist.h>"},
    {"ref/core/case.c", "#include \"../io/safetensors.h\"\n", "core includes ref/io/safetensors.h"},
    {"ref/oracle/mha.c", "#include \"../mha.h\"\n", "ref/oracle/mha.c:1: oracle includes ref/mha.h (kernels)"},
    {"ref/oracle/case.c", "#include \"../io/case_file.h\"\n", "oracle includes ref/io/case_file.h"},
    {"ref/oracle/case.c", "#include \"../tool/variants.h\"\n", "oracle includes ref/tool/variants.h"},
    {"ref/oracle/case.c", "#include <jansson.h>\n", "oracle includes <jansson.h>"},
    {"ref/io/case_file.c", "#include \"../oracle/oracle.h\"\n", "io includes ref/oracle/oracle.h"},
    {"ref/io/case_file.c", "#include \"../tool/certify.h\"\n", "io includes ref/tool/certify.h"},
    {"ref/io/case_file.c", "#include <mpfr.h>\n", "io includes <mpfr.h>"},
    {"ref/tool/certify.c", "#include \"../oracle/oracle.h\"\n", "tool includes ref/oracle/oracle.h"},
    {"ref/tool/certify.c", "#include <gsl/gsl_rng.h>\n", "GSL only in tool/random_params"},
    {"ref/refenc.h", "#include \"oracle/oracle.h\"\n", "the umbrella includes ref/oracle/oracle.h"},
    {"ref/refenc.h", "#include \"golden/make.h\"\n", "the umbrella includes ref/golden/make.h"},
    {"ref/cli/main.c", "#include \"../oracle/oracle.h\"\n", "ref/cli/main.c:1: cli includes ref/oracle/oracle.h"},
    {"ref/golden/make.c", "#include \"../cli/cli.h\"\n", "golden includes ref/cli/cli.h"},
    {"ref/golden/make.c", "#include \"../refenc.h\"\n", "golden includes the umbrella"},
    {"ref/tool/certify.c", "#include \"../golden/make.h\"\n", "tool includes ref/golden/make.h"},
    {"ref/io/case_file.c", "#include \"../golden/file.h\"\n", "io includes ref/golden/file.h"},
};

Test(layering, each_rule_catches_a_planted_violation)
{
    for (size_t i = 0; i < sizeof planted / sizeof planted[0]; i++) {
        char root[PATH_CAP], out[4096];
        make_clean_tree(root);
        write_file(root, planted[i].file, planted[i].text);
        const int rc = run_checker(root, out, sizeof out);
        cr_expect_eq(rc, 1, "planted %s in %s: exit %d, want 1:\n%s", planted[i].text,
                     planted[i].file, rc, out);
        cr_expect(strstr(out, planted[i].message) != NULL,
                  "planted %s in %s: the output does not say \"%s\":\n%s", planted[i].text,
                  planted[i].file, planted[i].message, out);
        remove_tree(root);
    }
}
