/* Certification: compare an implementation's results file with a golden case.
 *
 * A golden case (docs/golden-format.md) lists its outputs in forward order in
 * its metadata ("outputs": [{"name": "out.embed", "required": false}, ...]),
 * stores each as an F64 tensor, and marks elements whose value is
 * implementation-defined in "dontcare.<output>" BOOL tensors.  A results file
 * holds some of the same out.* tensors in F64, F32, F16 or BF16.
 *
 * Two rules, by the result's dtype (docs/certify.md derives every number):
 *   policy (F64, F32): an element passes when |got - want| <= atol + rtol
 *     |want| (refenc_certify_policy, times the case's scale for the dtype from
 *     its metadata "tolerance"); for F32 plus twice the largest error of the
 *     emulated float32 baseline, which grows with depth (refenc_budget_f32),
 *     and the angle allowance of PE and RoPE outputs (budget.h);
 *   budget (F16, BF16): an output passes when its largest error and its NMSE
 *     are within the budget set by the emulated baseline of the dtype
 *     (budget.h).
 * The verdict rules are verdict.h's: a non-finite result where the golden
 * is finite never passes; an output passes when at least one element is
 * compared and every element that is not don't-care passes; a case passes
 * when every output present passes, every required output is present and
 * some output was compared.  A hazard is declared per dtype: inputs that the
 * result's dtype cannot hold (input_dtype).  A case with a hazard is XPASS
 * when it passes, XFAIL when it fails but every failing output is finite and
 * within the budget of the hazard's own baseline (the emulation with the
 * inputs rounded to the dtype), FAIL otherwise.  The golden's
 * "float32_hazard" is no hazard of any dtype: the float32 baseline forms the
 * angles and the statistics it names in float32, so every budget holds it.
 * A failing case is compared with the bug variants the golden carries
 * (alt.<variant>.<output>, with the variant's own don't-care masks), under the
 * same rule: the variant that every provided output matches is the
 * diagnosis; none matching is said as such, never guessed. */
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

/* The policy of a result dtype that is certified by tolerance:
 *   F64  rtol 1e-10   atol 1e-11    (derived in docs/certify.md)
 *   F32  rtol 1.3e-6  atol 1e-5     (torch.testing.assert_close's defaults)
 * Returns 0 for any other dtype (F16 and BF16 are certified by budget). */
int refenc_certify_policy(refenc_tolerance *tol, refenc_st_dtype dtype);

/* How an output was judged. */
typedef enum {
    REFENC_RULE_POLICY = 0, /* per element: atol + rtol |want| (+ angle allowance)    */
    REFENC_RULE_BUDGET      /* per output: max error and NMSE within the budget       */
} refenc_rule;

/* The verdict of a case. */
typedef enum {
    REFENC_VERDICT_PASS = 0,
    REFENC_VERDICT_FAIL,
    REFENC_VERDICT_XFAIL,   /* failed within the hazard's budget (rep->hazard says why) */
    REFENC_VERDICT_XPASS,   /* passed, though a failure was expected                  */
    REFENC_VERDICT_SKIP     /* not certified (the caller's choice, e.g. no results)   */
} refenc_verdict;

/* "PASS", "FAIL", "XFAIL", "XPASS", "SKIP". */
const char *refenc_verdict_name(refenc_verdict v);

/* Whether a verdict counts as a failure of the run (FAIL only). */
int refenc_verdict_fails(refenc_verdict v);

typedef enum {
    REFENC_OUT_PASS = 0,
    REFENC_OUT_FAIL,          /* some element out of tolerance or not finite        */
    REFENC_OUT_BAD_SHAPE,     /* present with another shape                          */
    REFENC_OUT_MISSING,       /* required and absent                                 */
    REFENC_OUT_NOT_PROVIDED,  /* optional and absent: not compared, not a failure    */
    REFENC_OUT_NOT_CHECKED    /* excluded by the caller (options->outputs_glob)      */
} refenc_output_status;

const char *refenc_output_status_name(refenc_output_status s); /* "PASS", "FAIL", ... */

typedef struct {
    char name[96];
    int required;
    refenc_output_status status;
    refenc_st_dtype dtype;      /* of the result (when present)                     */
    refenc_rule rule;
    refenc_tolerance tol;       /* the element bound applied: the policy's, or for  */
                                /* the budget rtol 0 and atol budget_max_abs        */
    int angle_allowance;        /* policy, F32: the PE/RoPE angle allowance added   */
    double base_max_abs, base_nmse;     /* budget: the emulated baseline's error     */
    double budget_max_abs, budget_nmse; /* budget: the bounds                        */
    size_t numel, compared, dont_care, out_of_tol, nonfinite;
    /* Figures.  rel and ulp are measured at max(|want|, scale): below the
     * scale the tolerance is absolute (policy: atol / rtol; budget: the
     * output's largest |want|), so an error near 0 reads at that scale.  A
     * NaN result makes max_abs, max_rel and max_ulp NaN, an infinity +inf. */
    double max_abs, max_rel, max_ulp, nmse, scale;
    size_t ndim, shape[REFENC_ST_MAX_NDIM];
    size_t worst_flat;          /* the element with the largest error / tolerance  */
    double worst_got, worst_want, worst_ratio;
    double excess;              /* the largest error / bound of the output's rule;   */
                                /* budget: also sqrt(nmse / its budget) (> 1: fails) */
    char note[256];             /* e.g. "shape (2, 3) but the golden is (2, 4)"     */
    double base_allowance;      /* policy, F32: refenc_budget_f32, in every bound    */
    double max_want;            /* the largest |want| compared                       */
    int hazard_checked;         /* a hazard's bounds were set (below)                */
    double hazard_max_abs, hazard_nmse; /* the budget of the hazard's baseline       */
} refenc_output_report;

typedef struct {
    char name[128];
    int pass;                       /* every compared output passed                 */
    refenc_verdict verdict;
    char hazard[256];               /* why the dtype cannot be expected to pass, or "" */
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
    unsigned long candidates;       /* bit v: variant v matches too (the diagnosis is */
                                    /* the closest); two or more: indistinguishable  */
                                    /* on this case in the result's dtype             */
} refenc_case_report;

typedef struct {
    int override_tolerance; /* 1: the policy rule with tol for every dtype, ignoring the
                               policy table, the case scale, allowances and budgets */
    refenc_tolerance tol;
} refenc_certify_options;

/* Compares results with golden and fills rep (free it with
 * refenc_case_report_free).  The verdict is in rep->verdict.
 * Errors: REFENC_EFORMAT (the golden lacks its metadata or an output, its
 *   metadata "tolerance" or "variants" cannot be parsed, a results tensor is
 *   not an output of the case, an output has a dtype that is not
 *   F64/F32/F16/BF16), REFENC_ENOMEM.  The message names the file, the case
 *   and the tensor or key.  On error rep is still safe to free. */
int refenc_certify_case(refenc_case_report *rep, const refenc_st_file *golden,
                        const refenc_st_file *results, const refenc_certify_options *opt,
                        refenc_error *err);

/* The same for part of the outputs (a fused kernel's): outputs_glob NULL,
 * or only the outputs whose name matches this shell pattern are checked,
 * each of them then required, the others NOT_CHECKED. */
int refenc_certify_case_outputs(refenc_case_report *rep, const refenc_st_file *golden,
                                const refenc_st_file *results, const refenc_certify_options *opt,
                                const char *outputs_glob, refenc_error *err);

/* A case whose results file could not be found: every output MISSING or
 * NOT_PROVIDED, verdict FAIL, note set.  Errors as above for the golden.
 * The _outputs form also marks the outputs outputs_glob excludes NOT_CHECKED
 * (as refenc_certify_case_outputs).  A caller that skips such a case sets
 * rep->verdict to REFENC_VERDICT_SKIP. */
int refenc_certify_missing(refenc_case_report *rep, const refenc_st_file *golden,
                           const char *note, refenc_error *err);
int refenc_certify_missing_outputs(refenc_case_report *rep, const refenc_st_file *golden, const char *note,
                                   const char *outputs_glob, refenc_error *err);

void refenc_case_report_free(refenc_case_report *rep);

/* The distance |got - want| in units in the last place of `dtype` at want
 * (ulp of the binade of want, subnormal binades included). */
double refenc_ulp_error(double got, double want, refenc_st_dtype dtype);

#endif
