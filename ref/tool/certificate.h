/* Certifying a results directory against a golden directory, case by case,
 * and the certificate: what `refenc certify` prints and writes as JSON and
 * what `refenc report` draws (docs/certify.md).
 *
 * A golden directory holds manifest.json (io/manifest.h: {"cases": [{"case":
 * NAME, "file": FILE, "sha256": HEX}, ...]}) and cases/FILE; a results
 * directory holds NAME.safetensors per case.  certify.h compares one results
 * file with one golden case. */
#ifndef REFENC_CERTIFICATE_H
#define REFENC_CERTIFICATE_H

#include <stddef.h>

#include <jansson.h>

#include "../core/status.h"
#include "../io/manifest.h"
#include "../io/safetensors.h"
#include "certify.h"
#include "variants.h"

/* --golden and --results must be directories this process can search:
 * one that is missing, is not a directory, may not be entered, or is a
 * symbolic-link loop is an error with the system's reason, never read as
 * "no results file" for every case.  what: "golden" or "results".
 * Errors: REFENC_EIO, "DIR (the WHAT directory): REASON". */
int refenc_certify_dir_check(const char *dir, const char *what, refenc_error *err);

/* An output (the certificate, the report) must never replace an input of
 * the run: the manifest, the golden case or the results file of any case
 * of the manifest, selected or not (a case left out of this run is still
 * the user's), under any name.
 * Errors: REFENC_EINVAL (refenc_refuse_same_file's message), REFENC_ENOMEM. */
int refenc_certify_refuse_output(const char *out_path, const refenc_manifest *m, const char *golden_dir,
                                 const char *results_dir, refenc_error *err);

/* Certifies one case of a golden directory (docs/verdict.md, the trust
 * model): reads GOLDEN_DIR/cases/<c->file> and checks it is the file the
 * manifest lists (its sha256 and its name: refenc_manifest_verify), then
 * RESULTS_DIR/<c->name>.safetensors, and compares them (refenc_certify_case).
 * A results file that does not exist makes a failing case whose note says
 * so (refenc_certify_missing; then results is left empty); any other reason
 * it cannot be reached (a loop, a permission) is an error.  golden and
 * results stay open for the caller, who frees them and rep, also on error.
 * Errors: those of refenc_st_read, refenc_manifest_verify and
 * refenc_certify_case; REFENC_EIO; REFENC_ENOMEM. */
int refenc_certify_dir_case(refenc_case_report *rep, refenc_st_file *golden, refenc_st_file *results,
                            const char *golden_dir, const refenc_manifest_case *c, const char *results_dir,
                            const refenc_certify_options *opt, refenc_error *err);

/* A JSON string of any bytes: a path or a note may hold bytes that are not
 * UTF-8, which JSON strings cannot; they are written \xNN, as in messages
 * (refenc_text_escape), so a certificate stays valid JSON and is never lost
 * to a file name.  A new reference, or NULL when out of memory. */
json_t *refenc_certificate_text(const char *s);

/* The same for the outputs matching outputs_glob only (NULL: all;
 * refenc_certify_case_outputs); *missing = 1 when the results file does not
 * exist (a caller may then skip the case). */
int refenc_certify_dir_case_outputs(refenc_case_report *rep, refenc_st_file *golden, refenc_st_file *results,
                                    const char *golden_dir, const refenc_manifest_case *c, const char *results_dir,
                                    const refenc_certify_options *opt, const char *outputs_glob, int *missing,
                                    refenc_error *err);

/* Whether name matches any of the patterns (shell patterns, fnmatch; none:
 * every name), counting in matched[i] (may be NULL) each pattern that does:
 * the case selection of certify and report (docs/cli.md). */
int refenc_certify_selected(const char *const *patterns, size_t n_patterns, size_t *matched, const char *name);

/* refenc_certify_dir_case_outputs under the selection's rules: a case
 * without a results file is SKIP when skip_missing, and a case where
 * outputs_glob leaves no output to check is SKIP with a note saying so. */
int refenc_certify_dir_case_selected(refenc_case_report *rep, refenc_st_file *golden, refenc_st_file *results,
                                     const char *golden_dir, const refenc_manifest_case *c, const char *results_dir,
                                     const refenc_certify_options *opt, const char *outputs_glob, int skip_missing,
                                     refenc_error *err);

/* A JSON number, or for inf and NaN (which JSON cannot hold) the strings
 * "inf", "-inf", "nan".  A new reference. */
json_t *refenc_certificate_number(double v);

/* The index of the output's worst element, one entry per dimension. */
void refenc_certificate_worst_index(size_t idx[REFENC_ST_MAX_NDIM], const refenc_output_report *r);

/* A case of the certificate (docs/certify.md): {"case", "verdict" (PASS,
 * FAIL, XFAIL, XPASS, SKIP), "first_divergence", "note", "hazard",
 * "diagnosis" (FAIL and XFAIL), "outputs": [{"name", "required", "status",
 * "dtype", "rule" ("policy" or "budget"), "rtol", "atol" (the element bound:
 * for the budget rtol 0 and atol its max error), "angle_allowance" (policy)
 * or "budget_max_abs_error", "budget_nmse", "baseline_max_abs_error",
 * "baseline_nmse" (budget), "baseline_max_abs_error" and
 * "baseline_allowance" (F32: the float32 baseline's share of the bound),
 * "hazard_budget_max_abs_error" and "hazard_budget_nmse" (a failing output
 * of a hazard case: what XFAIL allows), "compared", "dont_care", "out_of_tolerance",
 * "nonfinite", "max_abs_error", "max_rel_error", "max_ulp_error", "scale",
 * "nmse", "excess", "worst_index", "worst_got", "worst_want", "note"},
 * ...]}; the diagnosis {"variant" (or null), "symptom", "cause", "fix",
 * "ratio", "variants_checked", "candidates" (every variant that matches)}.  A new reference, or NULL when out of memory. */
json_t *refenc_certificate_case(const refenc_case_report *rep);

/* The whole certificate: {"refenc_version", "golden", "results",
 * "manifest_sha256" (the manifest the cases were verified against, for a CI
 * to pin), "cases": cases (the reference is stolen), "summary": {"cases",
 * "passed", "failed", "verdict"}}, failed = n_cases - n_passed (a case that
 * could not be read counts as failed).  verdict: "PASS", "FAIL" or "ERROR".
 * The paths are written with refenc_certificate_text.  A new reference, or
 * NULL when out of memory. */
json_t *refenc_certificate_doc(const char *version, const char *golden_dir, const char *results_dir,
                               const char *manifest_sha256, json_t *cases, size_t n_cases, size_t n_passed,
                               const char *verdict);

/* A run's tally of verdicts, and the diagnoses of its failing cases. */
typedef struct {
    size_t cases, passed, failed, xfail, xpass, skipped;
    size_t diagnosed[REFENC_VAR_COUNT]; /* failing cases naming each variant     */
    size_t undiagnosed;                 /* failing cases naming none (or ERROR)  */
    size_t errors;                      /* cases that could not be read (ERROR)  */
    size_t missing;                     /* failing cases without a results file:
                                           nothing examined, neither diagnosed
                                           nor undiagnosed                       */
    size_t candidate[REFENC_VAR_COUNT]; /* failing cases each variant matches    */
    size_t ambiguous;                   /* failing cases two variants or more match */
    int low_dtype;                      /* the lowest result dtype of the failing
                                           cases (refenc_format: 0 F64 .. 3 BF16) */
    /* the variants of the certified cases (SKIP not counted) */
    size_t with_variants;               /* cases that store some variant          */
    size_t stored[REFENC_VAR_COUNT];    /* cases that store and compared variant v */
    size_t told_apart[REFENC_VAR_COUNT];/* ... whose bounds tell v from the golden */
    double largest_effect[REFENC_VAR_COUNT]; /* v's largest effect where not told apart */
    int run_dtype;                      /* the lowest result dtype of any compared
                                           output (as low_dtype)                  */
} refenc_certificate_tally;

/* The variants no case of the run tells apart from the golden (stored and
 * compared somewhere, told apart nowhere): what the run's verdict does not
 * rule out.  Bit v set. */
refenc_variant_set refenc_certificate_not_ruled_out(const refenc_certificate_tally *t);

void refenc_certificate_tally_add(refenc_certificate_tally *t, const refenc_case_report *rep);

/* A case that could not be read (ERROR): failed, undiagnosed. */
void refenc_certificate_tally_error(refenc_certificate_tally *t);

/* The failing cases the diagnosis examined: not ERROR, not missing. */
size_t refenc_certificate_examined(const refenc_certificate_tally *t);

/* The run's most likely bug: the variant a majority of the failing cases
 * (each of which the diagnosis examined; ERROR cases and cases without a
 * results file not counted) name,
 * and that more failing cases match than any other variant; NULL
 * otherwise (refenc_certificate_bug_candidates then lists the candidates). */
const char *refenc_certificate_most_likely_bug(const refenc_certificate_tally *t);

/* The variants some failing case matches, most matched first, into buf as
 * "A (k cases) or B (m cases)", and *n their number; when a case matched
 * two or more, ": indistinguishable in DTYPE on these cases" follows. */
void refenc_certificate_bug_candidates(char *buf, size_t cap, size_t *n, const refenc_certificate_tally *t);

/* Sets the certificate's "summary" counts from the tally: "passed", "failed",
 * "xfail", "xpass", "skipped", "most_likely_bug" (null when no variant is
 * named by a majority of the failing cases, or none fails) and
 * "bug_candidates" ([{"variant", "cases"}], the variants the failing cases
 * match, most matched first). */
void refenc_certificate_summary_add(json_t *summary, const refenc_certificate_tally *t);

/* The certificate's "selection": {"cases": [patterns], "outputs": glob or
 * null, "skip_missing": bool}, every pattern kept whatever its bytes (those
 * that are not UTF-8 written \xNN, refenc_certificate_text).  A new
 * reference, or NULL when out of memory. */
json_t *refenc_certificate_selection(const char *const *patterns, size_t n_patterns, const char *outputs_glob,
                                     int skip_missing);

#endif
