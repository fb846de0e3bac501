/* Certification: compare an implementation's results file with a golden case.
 *
 * A golden case (docs/golden-format.md) lists its outputs in forward order in
 * its metadata ("outputs": [{"name": "out.embed", "required": false}, ...]),
 * stores each as an F64 tensor, and marks elements whose value is
 * implementation-defined in "dontcare.<output>" BOOL tensors.  A results file
 * holds some of the same out.* tensors in F64, F32, F16 or BF16.
 *
 * An element passes when |got - want| <= atol + rtol |want| and got is finite;
 * an output passes when every element that is not don't-care passes; a case
 * passes when every output present passes and every required output is
 * present.  A failing case is compared with the bug variants the golden carries
 * (alt.<variant>.<output>, with the variant's own don't-care masks), under the
 * same tolerance: the variant that every provided output matches is the
 * diagnosis; none matching is said as such, never guessed.
 * The tolerance comes from the result's dtype (refenc_certify_policy)
 * times the case's scale for that dtype (metadata "tolerance"), unless the
 * caller overrides it.  docs/certify.md justifies the numbers. */
#ifndef REFENC_CERTIFY_H
#define REFENC_CERTIFY_H

#include <stddef.h>

#include "../io/safetensors.h"
#include "../core/status.h"

#define REFENC_GOLDEN_FORMAT "refenc-golden"
#define REFENC_GOLDEN_FORMAT_VERSION "1"

typedef struct {
    double rtol, atol;
} refenc_tolerance;

/* The default policy for a result dtype (F64, F32, F16, BF16):
 *   F64  rtol 1e-10   atol 1e-11
 *   F32  rtol 1.3e-6  atol 1e-5     (torch.testing.assert_close's defaults)
 *   F16  rtol 1e-3    atol 1e-5
 *   BF16 rtol 1.6e-2  atol 1e-5
 * Returns 0 for a dtype that is not a floating result dtype. */
int refenc_certify_policy(refenc_tolerance *tol, refenc_st_dtype dtype);

typedef enum {
    REFENC_OUT_PASS = 0,
    REFENC_OUT_FAIL,          /* some element out of tolerance or not finite        */
    REFENC_OUT_BAD_SHAPE,     /* present with another shape                          */
    REFENC_OUT_MISSING,       /* required and absent                                 */
    REFENC_OUT_NOT_PROVIDED   /* optional and absent: not compared, not a failure    */
} refenc_output_status;

const char *refenc_output_status_name(refenc_output_status s); /* "PASS", "FAIL", ... */

typedef struct {
    char name[96];
    int required;
    refenc_output_status status;
    refenc_st_dtype dtype;      /* of the result (when present)                     */
    refenc_tolerance tol;       /* applied                                          */
    size_t numel, compared, dont_care, out_of_tol, nonfinite;
    double max_abs, max_rel, max_ulp, nmse;
    size_t ndim, shape[REFENC_ST_MAX_NDIM];
    size_t worst_flat;          /* the element with the largest error / tolerance  */
    double worst_got, worst_want, worst_ratio;
    char note[256];             /* e.g. "shape (2, 3) but the golden is (2, 4)"     */
} refenc_output_report;

typedef struct {
    char name[128];
    int pass;
    size_t n_outputs;
    refenc_output_report *outputs;  /* forward order                                */
    int first_divergence;           /* index of the first failing output, or -1      */
    char note[256];                 /* a case-level reason, e.g. missing file        */
    /* Diagnosis of a failing case (variants.h): the known bug variant whose
     * outputs, stored in the golden as alt.<variant>.*, the results match
     * within the same tolerance; "" when none does. */
    size_t variants_checked;        /* variants the case carries, all compared        */
    char diagnosis[64];             /* the matching variant's name, or ""            */
    double diagnosis_ratio;         /* its largest error / tolerance (<= 1)           */
} refenc_case_report;

typedef struct {
    int override_tolerance; /* 1: use tol for every dtype, ignoring the policy and case scale */
    refenc_tolerance tol;
} refenc_certify_options;

/* Compares results with golden and fills rep (free it with
 * refenc_case_report_free).  The verdict is in rep->pass.
 * Errors: REFENC_EFORMAT (the golden lacks its metadata or an output, a
 *   results tensor is not an output of the case, an output has a dtype that
 *   is not F64/F32/F16/BF16), REFENC_ENOMEM.  The message names the file and
 *   the tensor.  On error rep is still safe to free. */
int refenc_certify_case(refenc_case_report *rep, const refenc_st_file *golden,
                        const refenc_st_file *results, const refenc_certify_options *opt,
                        refenc_error *err);

/* A case whose results file could not be found: every output MISSING or
 * NOT_PROVIDED, verdict fail, note set.  Errors as above for the golden. */
int refenc_certify_missing(refenc_case_report *rep, const refenc_st_file *golden,
                           const char *note, refenc_error *err);

void refenc_case_report_free(refenc_case_report *rep);

/* The distance |got - want| in units in the last place of `dtype` at want
 * (ulp of the binade of want, subnormal binades included). */
double refenc_ulp_error(double got, double want, refenc_st_dtype dtype);

#endif
