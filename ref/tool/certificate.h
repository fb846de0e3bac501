/* Certifying a results directory against a golden directory, case by case,
 * and the certificate: what `refenc certify` prints and writes as JSON and
 * what `refenc report` draws (docs/certify.md).
 *
 * A golden directory holds manifest.json ({"cases": [{"case": NAME, "file":
 * FILE}, ...]}) and cases/FILE; a results directory holds NAME.safetensors
 * per case.  certify.h compares one results file with one golden case. */
#ifndef REFENC_CERTIFICATE_H
#define REFENC_CERTIFICATE_H

#include <stddef.h>

#include <jansson.h>

#include "../core/status.h"
#include "../io/safetensors.h"
#include "certify.h"

/* DIR/manifest.json, read. */
typedef struct {
    char path[4096]; /* for messages */
    json_t *root;
    const json_t *cases; /* the "cases" array, borrowed from root */
} refenc_manifest;

/* Reads DIR/manifest.json.  Errors: REFENC_EFORMAT (not JSON: the message
 * gives line, column and byte; or no "cases" array), REFENC_EIO (cannot be
 * read).  On error *m is empty (safe to free). */
int refenc_manifest_load(refenc_manifest *m, const char *golden_dir, refenc_error *err);

size_t refenc_manifest_size(const refenc_manifest *m);

/* The name and file of cases[i].  Errors: REFENC_EFORMAT (no "case" or no
 * plain "file" name: a file name with a '/' could leave the directory). */
int refenc_manifest_case(const refenc_manifest *m, size_t i, const char **name, const char **file,
                         refenc_error *err);

void refenc_manifest_free(refenc_manifest *m);

/* Certifies one case of a golden directory: reads GOLDEN_DIR/cases/FILE and
 * RESULTS_DIR/NAME.safetensors and compares them (refenc_certify_case); a
 * results file that does not exist makes a failing case whose note says so
 * (refenc_certify_missing; then results is left empty).  golden and results
 * stay open for the caller, who frees them and rep, also on error.
 * Errors: those of refenc_st_read and refenc_certify_case. */
int refenc_certify_dir_case(refenc_case_report *rep, refenc_st_file *golden, refenc_st_file *results,
                            const char *golden_dir, const char *file, const char *results_dir,
                            const char *name, const refenc_certify_options *opt, refenc_error *err);

/* A JSON number, or for inf and NaN (which JSON cannot hold) the strings
 * "inf", "-inf", "nan".  A new reference. */
json_t *refenc_certificate_number(double v);

/* The index of the output's worst element, one entry per dimension. */
void refenc_certificate_worst_index(size_t idx[REFENC_ST_MAX_NDIM], const refenc_output_report *r);

/* A case of the certificate (docs/certify.md): {"case", "verdict",
 * "first_divergence", "note", "diagnosis", "outputs": [{"name", "required",
 * "status", "dtype", "rtol", "atol", "compared", "dont_care",
 * "out_of_tolerance", "nonfinite", "max_abs_error", "max_rel_error",
 * "max_ulp_error", "nmse", "worst_index", "worst_got", "worst_want",
 * "note"}, ...]}.  A new reference, or NULL when out of memory. */
json_t *refenc_certificate_case(const refenc_case_report *rep);

/* The whole certificate: {"refenc_version", "golden", "results", "cases":
 * cases (the reference is stolen), "summary": {"cases", "passed", "failed",
 * "verdict"}}, failed = n_cases - n_passed (a case that could not be read
 * counts as failed).  verdict: "PASS", "FAIL" or "ERROR".  A new reference. */
json_t *refenc_certificate_doc(const char *version, const char *golden_dir, const char *results_dir,
                               json_t *cases, size_t n_cases, size_t n_passed, const char *verdict);

#endif
