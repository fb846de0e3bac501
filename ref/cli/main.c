/* refenc: the command-line program.  Subcommands live in cmd_*.c. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../refenc.h"
#include "cli.h"

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
    "  report    certify, and draw the result as one self-contained HTML file\n"
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
    /* Under a file-size limit (ulimit -f) a write past it would kill the
     * program with SIGXFSZ, leaving its temporary file; ignored, the write
     * fails with EFBIG, which is reported and cleaned up (io/atomic_write.h). */
    signal(SIGXFSZ, SIG_IGN);
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
    if (strcmp(cmd, "report") == 0)
        return cmd_report(argc - 1, argv + 1);
    if (strcmp(cmd, "golden") == 0)
        return cmd_golden(argc - 1, argv + 1);
    fprintf(stderr, "refenc: unknown command '%s'\n\n%s", cmd, usage);
    return REFENC_EXIT_USAGE;
}
