/* refenc: the command-line program.  Subcommands live in cmd_*.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../refenc.h"
#include "cli.h"

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "refenc %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return REFENC_EXIT_USAGE;
}

int cli_parse_u64(uint64_t *v, const char *s)
{
    if (s == NULL || *s < '0' || *s > '9')
        return 0;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return 0;
    *v = (uint64_t)x;
    return 1;
}

static const char usage[] =
    "usage: refenc <command> [options]\n"
    "\n"
    "refenc is a double-precision reference Transformer encoder.\n"
    "\n"
    "commands:\n"
    "  run       build an encoder from a JSON config, run it on seeded random\n"
    "            weights and inputs, print a summary (and a trace of every step);\n"
    "            or run the reference on a golden case and write its results file\n"
    "  certify   compare an implementation's results files with the golden cases\n"
    "  golden    make a golden case with the MPFR oracle: from a config or a\n"
    "            catalogue entry, with seeded or your own weights and inputs\n"
    "\n"
    "options:\n"
    "  -h, --help     this help; 'refenc <command> --help' for a command's own\n"
    "  --version      print the version\n"
    "\n"
    "exit codes: 0 success, 1 certification failure, 2 usage or input error\n"
    "docs: README.md and docs/ in the source tree\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return REFENC_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return REFENC_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("refenc %s\n", REFENC_VERSION);
        return REFENC_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "certify") == 0)
        return cmd_certify(argc - 1, argv + 1);
    if (strcmp(cmd, "golden") == 0)
        return cmd_golden(argc - 1, argv + 1);
    fprintf(stderr, "refenc: unknown command '%s'\n\n%s", cmd, usage);
    return REFENC_EXIT_USAGE;
}
