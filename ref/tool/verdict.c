/* The verdict rules (verdict.h, docs/verdict.md "The verdict"). */
#include "verdict.h"

#include <math.h>
#include <stdio.h>

void refenc_verdict_output(refenc_output_report *r, int nmse_over)
{
    const int fails = r->compared == 0 || r->nonfinite > 0 || r->out_of_tol > 0 || nmse_over;
    r->status = fails ? REFENC_OUT_FAIL : REFENC_OUT_PASS;
    if (r->compared == 0)
        snprintf(r->note, sizeof r->note, "compared 0 elements: every element is don't-care, nothing shows "
                 "the result right");
    else if (r->nonfinite)
        snprintf(r->note, sizeof r->note, "%zu non-finite value%s where the golden is finite", r->nonfinite,
                 r->nonfinite == 1 ? "" : "s");
    else if (nmse_over)
        snprintf(r->note, sizeof r->note, "nmse %.3g is above its budget %.3g", r->nmse, r->budget_nmse);
}

void refenc_verdict_case(refenc_case_report *rep)
{
    size_t compared = 0;
    rep->pass = 1;
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const refenc_output_status s = rep->outputs[i].status;
        compared += s == REFENC_OUT_PASS || s == REFENC_OUT_FAIL;
        if (s == REFENC_OUT_FAIL || s == REFENC_OUT_BAD_SHAPE || s == REFENC_OUT_MISSING) {
            rep->pass = 0;
            if (rep->first_divergence < 0 && s != REFENC_OUT_MISSING)
                rep->first_divergence = (int)i;
        }
    }
    if (compared == 0) {
        rep->pass = 0;
        if (rep->note[0] == '\0')
            snprintf(rep->note, sizeof rep->note, "no output was compared");
    }
    rep->verdict = rep->pass ? REFENC_VERDICT_PASS : REFENC_VERDICT_FAIL;
}

int refenc_verdict_within_hazard(const refenc_output_report *r)
{
    if (!r->hazard_checked || r->compared == 0 || r->nonfinite > 0)
        return 0;
    return r->max_abs <= r->hazard_max_abs && (r->rule != REFENC_RULE_BUDGET || r->nmse <= r->hazard_nmse);
}

void refenc_verdict_hazard(refenc_case_report *rep, const char *reason)
{
    snprintf(rep->hazard, sizeof rep->hazard, "%s", reason);
    if (rep->pass) {
        rep->verdict = REFENC_VERDICT_XPASS;
        return;
    }
    int excused = 0;
    for (size_t i = 0; i < rep->n_outputs; i++) {
        const refenc_output_report *r = &rep->outputs[i];
        if (r->status == REFENC_OUT_BAD_SHAPE || r->status == REFENC_OUT_MISSING ||
            (r->status == REFENC_OUT_FAIL && !refenc_verdict_within_hazard(r))) {
            rep->verdict = REFENC_VERDICT_FAIL;
            snprintf(rep->note, sizeof rep->note, "%s fails beyond what the hazard allows (%s)", r->name,
                     r->status != REFENC_OUT_FAIL ? refenc_output_status_name(r->status)
                     : r->nonfinite || r->compared == 0 ? "not finite, or nothing compared"
                                                        : "outside the hazard's budget");
            return;
        }
        excused |= r->status == REFENC_OUT_FAIL;
    }
    rep->verdict = excused ? REFENC_VERDICT_XFAIL : REFENC_VERDICT_FAIL;
}

const char *refenc_output_status_name(refenc_output_status s)
{
    switch (s) {
    case REFENC_OUT_PASS: return "PASS";
    case REFENC_OUT_FAIL: return "FAIL";
    case REFENC_OUT_BAD_SHAPE: return "FAIL (shape)";
    case REFENC_OUT_MISSING: return "FAIL (missing)";
    case REFENC_OUT_NOT_PROVIDED: return "not provided";
    case REFENC_OUT_NOT_CHECKED: return "not checked";
    }
    return "?";
}

const char *refenc_verdict_name(refenc_verdict v)
{
    static const char *const names[] = {"PASS", "FAIL", "XFAIL", "XPASS", "SKIP"};
    return (unsigned)v <= REFENC_VERDICT_SKIP ? names[v] : "?";
}

int refenc_verdict_fails(refenc_verdict v)
{
    return v == REFENC_VERDICT_FAIL;
}
