/* The house rules of ref/ (docs/architecture.md), each enforced by a script:
 * the rules between the rooms (scripts/check-layering.sh), no circle between
 * modules (scripts/check-include-cycles.sh) and functions at kernel size
 * (scripts/check-function-size.sh).  The real tree obeys them, and each rule
 * catches a violation planted in a small tree of its own (the negative
 * controls). */
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

/* Runs scripts/<script> on root; returns its exit status and its output in out. */
static int run_script(const char *script, const char *root, char *out, size_t cap)
{
    char cmd[3 * PATH_CAP];
    snprintf(cmd, sizeof cmd, "sh '%s/scripts/%s' '%s' 2>&1", source_root(), script, root);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL, "cannot run %s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    const int st = pclose(p);
    cr_assert(WIFEXITED(st), "the checker did not exit normally: %s", out);
    return WEXITSTATUS(st);
}

static int run_checker(const char *root, char *out, size_t cap)
{
    return run_script("check-layering.sh", root, out, cap);
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

/* ---- no circle between modules (scripts/check-include-cycles.sh) ---------- */

static int run_cycles(const char *root, char *out, size_t cap)
{
    return run_script("check-include-cycles.sh", root, out, cap);
}

Test(layering, the_source_tree_has_no_include_circle)
{
    char out[16384];
    const int rc = run_cycles(source_root(), out, sizeof out);
    cr_expect_eq(rc, 0, "check-include-cycles failed on the source tree (exit %d):\n%s", rc, out);
    cr_expect_str_empty(out, "check-include-cycles printed on the source tree:\n%s", out);
}

/* The clean tree (each .c includes its own header, which is no circle) and a
 * diamond (a uses b and c, both use d) have no circle. */
Test(layering, a_tree_without_circles_passes)
{
    char root[PATH_CAP], out[4096];
    make_clean_tree(root);
    write_file(root, "ref/tool/a.c", "#include \"a.h\"\n#include \"b.h\"\n#include \"c.h\"\n");
    write_file(root, "ref/tool/b.h", "#include \"d.h\"\n");
    write_file(root, "ref/tool/c.c", "#include \"c.h\"\n#include \"d.h\"\n");
    write_file(root, "ref/tool/d.h", "#include \"../core/status.h\"\n");
    const int rc = run_cycles(root, out, sizeof out);
    cr_expect_eq(rc, 0, "exit %d on a tree without circles:\n%s", rc, out);
    cr_expect_str_empty(out, "printed on a tree without circles:\n%s", out);
    remove_tree(root);
}

/* Each planted set of includes closes one circle; the checker must exit 1,
 * name the circle and each include on it. */
static const struct {
    const char *file[3], *text[3], *message[3];
} circles[] = {
    /* the circle ref/tool had: the kernels' header used the file that defined them */
    {{"ref/tool/emulate.c", "ref/tool/emulate_kernels.h"},
     {"#include \"emulate_kernels.h\"\n", "#include <stddef.h>\n#include \"emulate.h\"\n"},
     {"ref/tool: include circle: emulate -> emulate_kernels -> emulate",
      "ref/tool/emulate.c:1 includes emulate_kernels.h", "ref/tool/emulate_kernels.h:2 includes emulate.h"}},
    /* three headers, no source */
    {{"ref/io/a.h", "ref/io/b.h", "ref/io/c.h"},
     {"#include \"b.h\"\n", "#include \"c.h\"\n", "#include \"a.h\"\n"},
     {"ref/io: include circle: a -> b -> c -> a", "ref/io/c.h:1 includes a.h", "ref/io/a.h:1 includes b.h"}},
    /* across rooms (check-layering.sh refuses io -> tool as well) */
    {{"ref/io/case_file.h", "ref/tool/certify.h"},
     {"#include \"../tool/certify.h\"\n", "#include \"../io/case_file.h\"\n"},
     {"include circle: case_file -> ref/tool/certify -> case_file",
      "ref/tool/certify.h:1 includes ../io/case_file.h", "ref/io/case_file.h:1 includes ../tool/certify.h"}},
};

Test(layering, each_planted_circle_is_caught)
{
    for (size_t i = 0; i < sizeof circles / sizeof circles[0]; i++) {
        char root[PATH_CAP], out[4096];
        make_clean_tree(root);
        for (size_t f = 0; f < 3 && circles[i].file[f] != NULL; f++)
            write_file(root, circles[i].file[f], circles[i].text[f]);
        const int rc = run_cycles(root, out, sizeof out);
        cr_expect_eq(rc, 1, "circle %zu: exit %d, want 1:\n%s", i, rc, out);
        for (size_t m = 0; m < 3 && circles[i].message[m] != NULL; m++)
            cr_expect(strstr(out, circles[i].message[m]) != NULL,
                      "circle %zu: the output does not say \"%s\":\n%s", i, circles[i].message[m], out);
        remove_tree(root);
    }
}

/* ---- functions at kernel size (scripts/check-function-size.sh) ------------- */

static int run_sizes(const char *root, char *out, size_t cap)
{
    return run_script("check-function-size.sh", root, out, cap);
}

/* A definition `lines` lines long from its signature (two lines) to its
 * closing brace, appended to text. */
static void append_function(char *text, size_t cap, const char *name, int lines)
{
    size_t n = strlen(text);
    n += (size_t)snprintf(text + n, cap - n, "static int %s(int a,\n                  int b)\n{\n", name);
    for (int i = 0; i < lines - 4; i++)
        n += (size_t)snprintf(text + n, cap - n, "    a += b;\n");
    snprintf(text + n, cap - n, "}\n\n");
}

Test(layering, the_source_tree_has_its_functions_at_kernel_size)
{
    char out[16384];
    const int rc = run_sizes(source_root(), out, sizeof out);
    cr_expect_eq(rc, 0, "check-function-size failed on the source tree (exit %d):\n%s", rc, out);
    cr_expect_str_empty(out, "check-function-size printed on the source tree:\n%s", out);
}

/* 60 lines pass, 61 do not; a static table's braces are not a function. */
Test(layering, a_function_over_60_lines_is_caught)
{
    char root[PATH_CAP], out[4096], text[8192] = "/* a table */\nstatic const int t[] = {\n    1,\n};\n\n";
    make_clean_tree(root);
    append_function(text, sizeof text, "at_limit", 60);
    write_file(root, "ref/tool/sizes.c", text);
    int rc = run_sizes(root, out, sizeof out);
    cr_expect_eq(rc, 0, "exit %d with a function of 60 lines:\n%s", rc, out);
    cr_expect_str_empty(out, "printed with a function of 60 lines:\n%s", out);

    append_function(text, sizeof text, "over_limit", 61); /* its signature is line 67 */
    write_file(root, "ref/tool/sizes.c", text);
    rc = run_sizes(root, out, sizeof out);
    cr_expect_eq(rc, 1, "exit %d with a function of 61 lines, want 1:\n%s", rc, out);
    cr_expect(strstr(out, "ref/tool/sizes.c:67: over_limit is 61 lines, over the limit of 60") != NULL,
              "the output does not name the function, its line and its length:\n%s", out);
    cr_expect(strstr(out, "at_limit") == NULL, "the function of 60 lines is named:\n%s", out);
    remove_tree(root);
}

/* A listed function with a reason passes; an entry without a reason, or for a
 * function no longer over the limit, is an error. */
Test(layering, the_allowlist_needs_a_reason_and_a_long_function)
{
    static const struct {
        const char *list, *message;
    } lists[] = {
        {"# comment\n\nref/tool/sizes.c long_one  the reason\n", NULL},
        {"ref/tool/sizes.c long_one\n", "function-size-allowlist.txt:1: ref/tool/sizes.c long_one: no reason given"},
        {"ref/tool/sizes.c long_one  the reason\nref/tool/sizes.c short_one  a reason\n",
         "function-size-allowlist.txt:2: ref/tool/sizes.c short_one is listed but not over 60 lines"},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        char root[PATH_CAP], out[4096], text[8192] = "";
        make_clean_tree(root);
        append_function(text, sizeof text, "long_one", 75);
        append_function(text, sizeof text, "short_one", 20);
        write_file(root, "ref/tool/sizes.c", text);
        write_file(root, "scripts/function-size-allowlist.txt", lists[i].list);
        const int rc = run_sizes(root, out, sizeof out);
        cr_expect_eq(rc, lists[i].message ? 1 : 0, "list %zu: exit %d:\n%s", i, rc, out);
        if (lists[i].message != NULL)
            cr_expect(strstr(out, lists[i].message) != NULL, "list %zu: the output does not say \"%s\":\n%s", i,
                      lists[i].message, out);
        else
            cr_expect_str_empty(out, "list %zu: printed:\n%s", i, out);
        remove_tree(root);
    }
}
