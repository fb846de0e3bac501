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
#include "outcome.h"
#include "verdict.h"

#define REFENC_GOLDEN_FORMAT "refenc-golden"
#define REFENC_GOLDEN_FORMAT_VERSION "1"

/* The policy of a result dtype that is certified by tolerance:
 *   F64  rtol 1e-10   atol 1e-11    (derived in docs/certify.md)
 *   F32  rtol 1.3e-6  atol 1e-5     (torch.testing.assert_close's defaults)
 * Returns 0 for any other dtype (F16 and BF16 are certified by budget). */
int refenc_certify_policy(refenc_tolerance *tol, refenc_st_dtype dtype);

/* Gradients (grad.*, docs/gradients.md "Certifying gradients"): an F64
 * element passes when |got - want| <= REFENC_GRAD_RTOL |want| +
 * REFENC_GRAD_ATOL max |want| over the tensor (times the case's F64 scale):
 * the forward's F64 policy with its absolute term at the tensor's own scale,
 * as a gradient's unit is its parameter's (a sum over the B L tokens).
 * Gradients in F32, F16 or BF16 get the forward's rules with the baseline
 * of the emulated backward (emulate_backward.h) and, for a parameter
 * gradient, the growth term G that grows with the B L tokens it sums over
 * (budget.h: refenc_grad_growth, refenc_grad_budget): F16 and BF16 the
 * budget, F32 the F32 policy with its absolute term times max |want| plus
 * twice the float32 backward's largest error plus G. */
#define REFENC_GRAD_RTOL 1e-10
#define REFENC_GRAD_ATOL 1e-11


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
