/* The verdict rules of certification, in one place (docs/verdict.md, "The
 * verdict"): refenc certify, refenc report and the in-process
 * refenc_certify_case all decide an output's status and a case's verdict
 * here, from the figures certify.c measured.
 *
 *   - an output PASSes only with at least one element compared (not
 *     don't-care), every compared element finite and within its bound and,
 *     under the budget, its NMSE within the budget;
 *   - a case PASSes only when every output present passes, every required
 *     output is present and at least one output was compared;
 *   - XFAIL is "outside the derived bounds, inside the declared hazard's
 *     budget, and finite": a failing case with a hazard whose failing
 *     outputs are all compared, finite and within the hazard's bounds; any
 *     other failure of a hazard case is FAIL. */
#ifndef REFENC_VERDICT_H
#define REFENC_VERDICT_H

#include "outcome.h"

/* "PASS", "FAIL", "XFAIL", "XPASS", "SKIP". */
const char *refenc_verdict_name(refenc_verdict v);

/* Whether a verdict counts as a failure of the run (FAIL only). */
int refenc_verdict_fails(refenc_verdict v);

const char *refenc_output_status_name(refenc_output_status s); /* "PASS", "FAIL", ... */

/* The status of a compared output (PASS or FAIL) from its figures, and the
 * reason in r->note.  nmse_over: the budget rule's NMSE is above its bound. */
void refenc_verdict_output(refenc_output_report *r, int nmse_over);

/* rep->pass, first_divergence and verdict (PASS or FAIL) from the outputs;
 * a case with no output compared fails with a note. */
void refenc_verdict_case(refenc_case_report *rep);

/* Whether output r, compared and failing, fails only as far as the hazard
 * allows: compared elements, all finite, and its largest error and (budget)
 * NMSE within r->hazard_max_abs and r->hazard_nmse.  0 when no hazard
 * bounds were set. */
int refenc_verdict_within_hazard(const refenc_output_report *r);

/* A case with a declared hazard (reason, written to rep->hazard): XPASS
 * when it passed; XFAIL when every failing output is within the hazard
 * (refenc_verdict_within_hazard) and no output is missing or misshapen;
 * FAIL otherwise, the note saying that the hazard does not excuse it. */
void refenc_verdict_hazard(refenc_case_report *rep, const char *reason);

#endif
