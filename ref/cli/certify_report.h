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

/* The closing lines: the counts and verdict, then the most likely bug. */
void certify_print_summary(FILE *out, const refenc_certificate_tally *t, const char *verdict);

/* Write the certificate and the JUnit report atomically (io/atomic_write.h:
 * a temporary file renamed into place, never over anything but a regular
 * file).  Return REFENC_OK, or an error with its message in err, leaving
 * path as it was. */
int certify_write_json(const char *path, const json_t *doc, refenc_error *err);

/* The JUnit XML report: one testcase per case and output (classname the
 * case, name the output), a failure with the worst element for each failing
 * output, skipped for outputs not compared and for XFAIL/SKIP cases; every
 * case's reports in `cases`, the certificate's "cases" array. */
int certify_write_junit(const char *path, const json_t *cases, refenc_error *err);

#endif
