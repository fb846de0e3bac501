/* libFuzzer target: certification of a results file (any bytes) against a
 * fixed golden case, as `refenc certify` does it: refenc_st_parse, then
 * refenc_certify_case.  The golden case is the file named by
 * REFENC_FUZZ_GOLDEN (make fuzz picks one from golden/).
 *
 * Properties, beyond the sanitizers' (never a PASS on bad input):
 *   - the verdict agrees with an independent reading of the rules
 *     (ref/tool/certify.h): an error (REFENC_EFORMAT) exactly when a tensor is not
 *     an output of the case or an output has a dtype other than F64, F32, F16,
 *     BF16; otherwise PASS exactly when every required output is present,
 *     every output present has the golden's shape, and every element that is
 *     not don't-care is finite and, for F64 and F32, within atol + rtol
 *     |want| with the dtype's policy scaled by the case (plus the angle
 *     allowance for F32), for F16 and BF16 within the budget of the emulated
 *     baseline, whose NMSE bound the output's NMSE must also meet;
 *   - each output's status says the same (MISSING, NOT_PROVIDED, BAD_SHAPE);
 *   - an error message is one clean line naming the results file. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../ref/tool/budget.h"
#include "../../ref/tool/certify.h"
#include "../../ref/io/safetensors.h"
#include "fuzz_check.h"

#define RESULTS_NAME "fuzz-results.safetensors"

static refenc_st_file golden;
static json_t *outputs; /* the golden's __metadata__.outputs */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *path = getenv("REFENC_FUZZ_GOLDEN");
    refenc_error err;
    if (path == NULL || *path == '\0') {
        fprintf(stderr, "fuzz-certify: REFENC_FUZZ_GOLDEN must name a golden case file\n");
        exit(2);
    }
    if (refenc_st_read(&golden, path, &err) != REFENC_OK) {
        fprintf(stderr, "fuzz-certify: %s\n", err.message);
        exit(2);
    }
    const char *o = refenc_st_metadata(&golden, "outputs");
    outputs = o ? json_loads(o, 0, NULL) : NULL;
    if (!json_is_array(outputs)) {
        fprintf(stderr, "fuzz-certify: %s is not a golden case\n", path);
        exit(2);
    }
    return 0;
}

static int is_float(refenc_st_dtype d)
{
    return d == REFENC_ST_F64 || d == REFENC_ST_F32 || d == REFENC_ST_F16 || d == REFENC_ST_BF16;
}

static int is_output(const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(outputs, i, o) if (strcmp(json_string_value(json_object_get(o, "name")), name) == 0) return 1;
    return 0;
}

/* The case's scale for dtype (metadata "tolerance": {"scale": {"F32": s}}). */
static double scale_for(refenc_st_dtype d)
{
    const char *t = refenc_st_metadata(&golden, "tolerance");
    json_t *j = t ? json_loads(t, 0, NULL) : NULL;
    const json_t *v = json_object_get(json_object_get(j, "scale"), refenc_st_dtype_name(d));
    const double s = json_is_number(v) && json_number_value(v) > 0 ? json_number_value(v) : 1.0;
    json_decref(j);
    return s;
}

/* The emulated baselines of F16 and BF16, measured once. */
static refenc_baseline baselines[REFENC_FMT_COUNT];
static int have_baseline[REFENC_FMT_COUNT];

static const refenc_baseline_error *baseline_of(refenc_format f, const char *name)
{
    refenc_error err;
    if (!have_baseline[f]) {
        FUZZ_CHECK(refenc_baseline_measure(&baselines[f], &golden, f, &err) == REFENC_OK, "%s", err.message);
        have_baseline[f] = 1;
    }
    return refenc_baseline_find(&baselines[f], name);
}

/* F16 and BF16: max |got - want| and the NMSE within the budget. */
static int within_budget(const double *got, const double *want, const int64_t *skip, size_t n,
                         refenc_st_dtype dt, const char *name)
{
    const refenc_format f = dt == REFENC_ST_F16 ? REFENC_FMT_F16 : REFENC_FMT_BF16;
    double max_want = 0, max_d = 0, d2 = 0, w2 = 0, b_abs, b_nmse;
    for (size_t i = 0; i < n; i++)
        if (!skip[i]) {
            if (!isfinite(got[i]))
                return 0;
            max_want = fmax(max_want, fabs(want[i]));
            max_d = fmax(max_d, fabs(got[i] - want[i]));
            d2 += (got[i] - want[i]) * (got[i] - want[i]);
            w2 += want[i] * want[i];
        }
    refenc_budget(&b_abs, &b_nmse, baseline_of(f, name), f, max_want);
    return max_d <= b_abs && (w2 > 0 ? d2 / w2 : d2) <= b_nmse;
}

/* 1 if the output `name`, present in results as t, passes. */
static int output_passes(const refenc_st_file *results, const refenc_st_tensor *t, const char *name)
{
    const refenc_st_tensor *w = refenc_st_find(&golden, name);
    if (t->ndim != w->ndim)
        return 0;
    for (size_t d = 0; d < w->ndim; d++)
        if (t->shape[d] != w->shape[d])
            return 0;
    char dc_name[256];
    snprintf(dc_name, sizeof dc_name, "dontcare.%s", name);
    const refenc_st_tensor *dc = refenc_st_find(&golden, dc_name);
    const size_t n = w->numel;
    double *got = malloc((n + 1) * sizeof *got), *want = malloc((n + 1) * sizeof *want);
    int64_t *skip = malloc((n + 1) * sizeof *skip);
    refenc_error err;
    FUZZ_CHECK(got && want && skip, "out of memory");
    FUZZ_CHECK(refenc_st_to_f64(got, results, t, &err) == REFENC_OK, "%s", err.message);
    FUZZ_CHECK(refenc_st_to_f64(want, &golden, w, &err) == REFENC_OK, "%s", err.message);
    memset(skip, 0, (n + 1) * sizeof *skip);
    if (dc != NULL)
        FUZZ_CHECK(refenc_st_to_i64(skip, &golden, dc, &err) == REFENC_OK, "%s", err.message);
    refenc_tolerance tol;
    int pass = 1;
    if (refenc_certify_policy(&tol, t->dtype)) {
        const double s = scale_for(t->dtype);
        double *allow = calloc(n + 1, sizeof *allow);
        FUZZ_CHECK(allow != NULL, "out of memory");
        int applies;
        if (t->dtype == REFENC_ST_F32)
            FUZZ_CHECK(refenc_angle_allowance(&applies, allow, &golden, name, want, n, &err) == REFENC_OK, "%s",
                       err.message);
        for (size_t i = 0; i < n && pass; i++)
            if (!skip[i])
                pass = isfinite(got[i]) &&
                       fabs(got[i] - want[i]) <= tol.atol * s + tol.rtol * s * fabs(want[i]) + allow[i];
        free(allow);
    } else {
        pass = within_budget(got, want, skip, n, t->dtype, name);
    }
    free(got);
    free(want);
    free(skip);
    return pass;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    refenc_st_file results;
    refenc_error err;
    if (refenc_st_parse(&results, data, size, RESULTS_NAME, &err) != REFENC_OK)
        return 0;

    /* the rules, read independently */
    int want_error = 0;
    for (size_t i = 0; i < results.n_tensors; i++)
        want_error |= !is_output(results.tensors[i].name) || !is_float(results.tensors[i].dtype);

    refenc_case_report rep;
    refenc_error_clear(&err);
    const int st = refenc_certify_case(&rep, &golden, &results, NULL, &err);
    FUZZ_CHECK((st != REFENC_OK) == want_error, "status %d, expected %s: %s", st,
               want_error ? "an error" : "a verdict", err.message);
    if (st != REFENC_OK) {
        FUZZ_CHECK(st == REFENC_EFORMAT, "status %d", st);
        FUZZ_CHECK(strncmp(err.message, RESULTS_NAME ": ", strlen(RESULTS_NAME) + 2) == 0,
                   "the message does not name the results file: %s", err.message);
        FUZZ_CHECK(fuzz_message_ok(err.message), "message not one clean line: %s", err.message);
    } else {
        int pass = 1;
        size_t i;
        json_t *o;
        FUZZ_CHECK(rep.n_outputs == json_array_size(outputs), "%zu outputs", rep.n_outputs);
        json_array_foreach(outputs, i, o) {
            const char *name = json_string_value(json_object_get(o, "name"));
            const int required = json_is_true(json_object_get(o, "required"));
            const refenc_st_tensor *t = refenc_st_find(&results, name);
            const refenc_output_report *r = &rep.outputs[i];
            FUZZ_CHECK(strcmp(r->name, name) == 0, "output %zu is %s, not %s", i, r->name, name);
            int ok;
            if (t == NULL) {
                ok = !required;
                FUZZ_CHECK(r->status == (required ? REFENC_OUT_MISSING : REFENC_OUT_NOT_PROVIDED),
                           "%s absent, status %s", name, refenc_output_status_name(r->status));
            } else {
                ok = output_passes(&results, t, name);
                FUZZ_CHECK(ok == (r->status == REFENC_OUT_PASS), "%s: independent %s, certify %s", name,
                           ok ? "PASS" : "FAIL", refenc_output_status_name(r->status));
            }
            pass &= ok;
        }
        FUZZ_CHECK(rep.pass == pass, "certify says %s, the rules say %s", rep.pass ? "PASS" : "FAIL",
                   pass ? "PASS" : "FAIL");
        FUZZ_CHECK(rep.pass ? rep.first_divergence == -1
                            : rep.first_divergence < (int)rep.n_outputs,
                   "first divergence %d", rep.first_divergence);
    }
    refenc_case_report_free(&rep);
    refenc_st_free(&results);
    return 0;
}
