/* What certification reports (certify.h computes it, verdict.h decides the
 * statuses): the tolerance of an output, the rule that judged it, its
 * status and figures, and a case's verdict with its outputs and diagnosis.
 * Types only, shared by certify and verdict without either including the
 * other. */
#ifndef REFENC_TOOL_OUTCOME_H
#define REFENC_TOOL_OUTCOME_H

#include <stddef.h>
#include <stdint.h>

#include "../io/safetensors.h"

typedef struct {
    double rtol, atol;
} refenc_tolerance;

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


typedef enum {
    REFENC_OUT_PASS = 0,
    REFENC_OUT_FAIL,          /* some element out of tolerance or not finite        */
    REFENC_OUT_BAD_SHAPE,     /* present with another shape                          */
    REFENC_OUT_MISSING,       /* required and absent                                 */
    REFENC_OUT_NOT_PROVIDED,  /* optional and absent: not compared, not a failure    */
    REFENC_OUT_NOT_CHECKED    /* excluded by the caller (options->outputs_glob)      */
} refenc_output_status;


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
    int grad;                   /* a gradient (grad.*, backward order), not an output */
} refenc_output_report;

/* Room for every known variant (variants.h checks REFENC_VAR_COUNT fits). */
#define REFENC_CASE_MAX_VARIANTS 128

/* A set of variants, bit v for variant v. */
typedef struct {
    uint64_t w[REFENC_CASE_MAX_VARIANTS / 64];
} refenc_variant_set;

static inline void refenc_variant_set_add(refenc_variant_set *s, int v)
{
    s->w[v / 64] |= (uint64_t)1 << (v % 64);
}

static inline int refenc_variant_set_has(const refenc_variant_set *s, int v)
{
    return (int)((s->w[v / 64] >> (v % 64)) & 1);
}

/* The set {a, b}; a or b < 0: left out. */
static inline refenc_variant_set refenc_variant_set_of(int a, int b)
{
    refenc_variant_set s = {{0}};
    if (a >= 0)
        refenc_variant_set_add(&s, a);
    if (b >= 0)
        refenc_variant_set_add(&s, b);
    return s;
}

static inline int refenc_variant_set_equal(refenc_variant_set a, refenc_variant_set b)
{
    for (size_t i = 0; i < sizeof a.w / sizeof a.w[0]; i++)
        if (a.w[i] != b.w[i])
            return 0;
    return 1;
}

typedef struct {
    char name[128];
    int pass;                       /* every compared output passed                 */
    refenc_verdict verdict;
    char hazard[256];               /* why the dtype cannot be expected to pass, or "" */
    size_t n_outputs;
    refenc_output_report *outputs;  /* forward order                                */
    int first_divergence;           /* index of the first failing output, or -1      */
    int first_grad_divergence;      /* index of the first failing gradient (backward */
                                    /* order), or -1                                 */
    size_t grads, grads_given;      /* gradients the case holds, and the results give */
    char note[256];                 /* a case-level reason, e.g. missing file        */
    /* Diagnosis of a failing case (variants.h): the known bug variant whose
     * outputs, stored in the golden as alt.<variant>.*, the results match
     * within the same tolerance; "" when none does. */
    size_t variants_checked;        /* variants the case carries, all compared        */
    char diagnosis[64];             /* the matching variant's name, or ""            */
    double diagnosis_ratio;         /* its largest error / tolerance (<= 1)           */
    refenc_variant_set candidates;  /* bit v: variant v matches too (the diagnosis is */
                                    /* the closest); two or more: indistinguishable  */
                                    /* on this case in the result's dtype             */
    /* Every variant the case stores, matched or not (certify.h): the one
     * closest to the results, and those whose effect on the case (their
     * distance from the golden) is too small for this dtype's bounds to
     * tell them from a correct result, which no verdict here rules out.
     * Distances are in bounds of each output's rule (1: at the bound). */
    size_t variants_stored;         /* variants the case stores (0: none to name)   */
    int variants_by_reference;      /* they are the double reference's, not the     */
                                    /* oracle's (metadata variant_engine)            */
    char closest[64];               /* the closest variant, or "" (none compared)    */
    double closest_distance;        /* its largest error / bound                     */
    refenc_variant_set not_ruled_out; /* bit v: variant v's effect within the bounds   */
    double effect[REFENC_CASE_MAX_VARIANTS]; /* variant v's distance from the golden,
                                       -1 when the case does not store it         */
    char hint[256];                 /* a recognisable mistake (certify.h), or ""     */
    int results_missing;            /* no results file (certificate.h)               */
} refenc_case_report;

#endif
