/* libFuzzer target: a golden case (any bytes) through `refenc run --case
 * CASE --out RESULTS` as the program runs it (run_case, ref/cli/cmd_run_case.c):
 * refenc_st_read, refenc_case_from_file, the reference on the case, the
 * results written atomically.
 *
 * Properties, beyond the sanitizers':
 *   - it succeeds exactly when the case loads (refenc_st_parse and
 *     refenc_case_from_file accept it) and lists its outputs as a JSON array;
 *   - on success the results file reads back, holds only F64 tensors the
 *     case lists as outputs, and names the case;
 *   - on failure there is no results file, and the message is one clean
 *     line starting with the case's path;
 *   - never a temporary file left behind.
 * Cases whose attention or activations would need more than about 8 MB are
 * skipped (the fuzzer would spend its time on them), after loading. */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../../ref/cli/cli.h"
#include "../../ref/io/case_file.h"
#include "../../ref/io/safetensors.h"
#include "fuzz_check.h"

static char dir[64], case_path[96], out_path[96];
static char last_error[2048];

/* The program's error printer (ref/cli/main.c, not linked here): kept. */
int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(last_error, sizeof last_error, "refenc %s: ", cmd);
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return REFENC_EXIT_USAGE;
}

static void clean_up(void)
{
    unlink(case_path);
    unlink(out_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "/tmp/refenc-fuzz-case-XXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("fuzz-case: mkdtemp");
        exit(2);
    }
    snprintf(case_path, sizeof case_path, "%s/case.safetensors", dir);
    snprintf(out_path, sizeof out_path, "%s/results.safetensors", dir);
    /* run_case prints a line per success */
    if (freopen("/dev/null", "w", stdout) == NULL)
        exit(2);
    atexit(clean_up);
    return 0;
}

static int temporary_left(void)
{
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        found |= strstr(e->d_name, ".tmp.") != NULL;
    if (d != NULL)
        closedir(d);
    return found;
}

/* 1 if the case loads, with its outputs list in *outs and its name; 0 if not;
 * -1 if it loads but is too large to run here. */
static int loads(const uint8_t *data, size_t size, json_t **outs, char name[128])
{
    refenc_st_file f;
    refenc_case c;
    refenc_error err;
    *outs = NULL;
    if (refenc_st_parse(&f, data, size, case_path, &err) != REFENC_OK)
        return 0;
    int ok = refenc_case_from_file(&c, &f, &err) == REFENC_OK;
    if (ok) {
        const char *o = refenc_st_metadata(&f, "outputs");
        *outs = o ? json_loads(o, 0, NULL) : NULL;
        ok = json_is_array(*outs);
        snprintf(name, 128, "%s", c.name);
        const double B = (double)c.B, L = (double)c.L, H = (double)c.cfg.n_heads, D = (double)c.cfg.d_model,
                     F = (double)c.cfg.d_ff, N = (double)c.cfg.n_layers;
        if (ok && N * B * L * (H * L + 8 * D + F) > 1e6)
            ok = -1;
        refenc_case_free(&c);
    }
    refenc_st_free(&f);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *outs;
    char name[128];
    const int expect = loads(data, size, &outs, name);
    if (expect < 0) {
        json_decref(outs);
        return 0;
    }
    FILE *f = fopen(case_path, "wb");
    FUZZ_CHECK(f != NULL && fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", case_path);
    unlink(out_path);
    last_error[0] = '\0';

    const run_case_spec spec = {0};
    const int rc = run_case(case_path, out_path, &spec);
    if (expect) {
        FUZZ_CHECK(rc == REFENC_EXIT_OK, "a case that loads failed: %s", last_error);
        refenc_st_file r;
        refenc_error err;
        FUZZ_CHECK(refenc_st_read(&r, out_path, &err) == REFENC_OK, "the results do not read back: %s",
                   err.message);
        for (size_t i = 0; i < r.n_tensors; i++) {
            int listed = 0;
            size_t k;
            json_t *o;
            json_array_foreach(outs, k, o)
                listed |= json_is_string(json_object_get(o, "name")) &&
                          strcmp(json_string_value(json_object_get(o, "name")), r.tensors[i].name) == 0;
            FUZZ_CHECK(listed && r.tensors[i].dtype == REFENC_ST_F64, "tensor '%s' is not a listed F64 output",
                       r.tensors[i].name);
        }
        const char *rn = refenc_st_metadata(&r, "case");
        FUZZ_CHECK(rn != NULL && strcmp(rn, name) == 0, "the results name case '%s', not '%s'", rn ? rn : "",
                   name);
        refenc_st_free(&r);
    } else {
        FUZZ_CHECK(rc == REFENC_EXIT_USAGE, "a case that does not load gave exit %d", rc);
        FUZZ_CHECK(access(out_path, F_OK) != 0, "a results file was written for a case that does not load");
        FUZZ_CHECK(fuzz_message_ok(last_error) &&
                       strncmp(last_error, "refenc run: ", 12) == 0 &&
                       strncmp(last_error + 12, case_path, strlen(case_path)) == 0,
                   "the message: '%s'", last_error);
    }
    FUZZ_CHECK(!temporary_left(), "a temporary file is left in %s", dir);
    json_decref(outs);
    return 0;
}
