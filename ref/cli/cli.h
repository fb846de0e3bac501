/* The refenc program: shared pieces of its subcommands. */
#ifndef REFENC_CLI_H
#define REFENC_CLI_H

#include <stdint.h>

#include "../core/status.h"
#include "../tool/emulate.h"
#include "../tool/variants.h"

/* Exit codes: part of refenc's contract (docs/cli.md). */
enum {
    REFENC_EXIT_OK = 0,    /* success; with certify: every case passed        */
    REFENC_EXIT_FAIL = 1,  /* certify: at least one case failed               */
    REFENC_EXIT_USAGE = 2  /* usage, input, format or resource error          */
};

/* Prints "refenc <cmd>: <message>" on stderr and returns REFENC_EXIT_USAGE. */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses a whole decimal unsigned integer (no sign, no trailing text, no
 * overflow).  Returns 1 on success. */
int cli_parse_u64(uint64_t *v, const char *s);

/* Parses a tolerance, --rtol or --atol: a whole finite number >= 0.
 * Returns 1 on success. */
int cli_parse_tolerance(double *v, const char *s);

/* Prints the error of a failed load: the whole report when there is one,
 * else err's message; frees the report; returns REFENC_EXIT_USAGE. */
int cli_load_error(const char *cmd, char *report, const refenc_error *err);

int cmd_run(int argc, char **argv);
int cmd_certify(int argc, char **argv);
int cmd_golden(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* What refenc run --case computes: the reference, or an emulated
 * low-precision implementation (tool/emulate.h), optionally with a known bug. */
typedef struct {
    int emulate;                /* 1: emulation, in emulation.value's dtype */
    refenc_emulation emulation;
    int has_bug;
    refenc_variant bug;
    int grad;                   /* 1: also the double backward's gradients (grad.*) */
} run_case_spec;

/* refenc run --case CASE --out FILE [--emulate F] [--bug V] (cmd_run_case.c). */
int run_case(const char *case_path, const char *out_path, const run_case_spec *spec);

#endif
