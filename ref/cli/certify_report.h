/* refenc certify's reports: the text report, the JSON certificate, the JUnit
 * XML file and the run-level summary (docs/cli.md, docs/certify.md). */
#ifndef REFENC_CERTIFY_REPORT_H
#define REFENC_CERTIFY_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "../tool/certificate.h"
#include "../tool/certify.h"
#include "../tool/variants.h"

/* The case's block of the text report; quiet: failing outputs only. */
void certify_print_case(FILE *out, const refenc_case_report *rep, int quiet);

/* Cases the text report collapses into one line with a count (docs/cli.md):
 * those without a results file, those skipped. */
#define CERTIFY_GROUP_NAMES 4
typedef struct {
    size_t n;
    char names[CERTIFY_GROUP_NAMES][128]; /* the first few */
} certify_group;

void certify_group_add(certify_group *g, const char *name);

/* "VERDICT  N cases WHY: a, b, c, d and K more"; nothing when the group is empty. */
void certify_print_group(FILE *out, const certify_group *g, const char *verdict, const char *why);

/* The short summary, as pytest's: "FAILED case: explanation" for every
 * failing case that was compared, "ERROR case: message" for every case that
 * could not be read (cases: the certificate's "cases"); the cases without a
 * results file are the missing group's one line. */
void certify_print_short_summary(FILE *out, const json_t *cases);

/* The closing lines: the counts and verdict, then the most likely bug. */
void certify_print_summary(FILE *out, const refenc_certificate_tally *t, const char *verdict);

/* Write the certificate and the JUnit report atomically (io/atomic_write.h:
 * a temporary file renamed into place, never over anything but a regular
 * file).  Return REFENC_OK, or an error with its message in err, leaving
 * path as it was. */
int certify_write_json(const char *path, const json_t *doc, refenc_error *err);

/* The JUnit XML report (docs/ci.md): one testcase per case and output
 * (classname the case, name the output), the same granularity for every
 * case; a testcase named "case" for what belongs to no output (an
 * unreadable case: error; a case failing with no failing output: failure).
 * A failing output of a FAIL case is a failure whose message and body carry
 * the output's worst element, the case's verdict, first divergence and
 * diagnosis (certify_explain_case); outputs not compared (SKIP and XFAIL
 * cases, optional outputs not provided, outputs excluded by --outputs) are
 * skipped with the reason; XML-valid whatever the names and notes hold.
 * `cases` is the certificate's "cases" array. */
int certify_write_junit(const char *path, const json_t *cases, refenc_error *err);

/* One line explaining a case of the certificate (its JSON object): the
 * verdict, the first divergence (the output, its worst element, got and
 * want, how many times its bound, the bound) and the diagnosis (the variant
 * named, or why none is, with the closest), then any hint; an unreadable
 * case: its error. */
void certify_explain_case(FILE *f, const json_t *c);

/* One line explaining an output of the certificate: its worst element, the
 * values, its excess and bounds; a missing or misshapen one: its status. */
void certify_explain_output(FILE *f, const json_t *o);

#endif
