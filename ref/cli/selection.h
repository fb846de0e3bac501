/* The selection grammar refenc certify and refenc report share (docs/cli.md,
 * "Selecting cases and outputs"), from one parser:
 *   --case GLOB[,GLOB...]  repeatable; a comma-separated list is several
 *                          patterns; a case is selected when any matches;
 *                          every pattern must match some case;
 *   --outputs GLOB         only the golden outputs matching GLOB are checked
 *                          (each then required), the others "not checked";
 *   --skip-missing         a case without a results file is SKIP, not FAIL. */
#ifndef REFENC_CLI_SELECTION_H
#define REFENC_CLI_SELECTION_H

#include <stddef.h>

typedef struct {
    char **patterns;      /* --case, split at commas (owned; as many as given) */
    size_t n_patterns;
    size_t *matched;      /* cases each pattern matched                        */
    const char *outputs_glob;              /* --outputs, or NULL              */
    int skip_missing;
} cli_selection;

/* Whether s is an option of the grammar; *takes_value: whether it takes one. */
int cli_selection_is_option(const char *s, int *takes_value);

/* Applies option s (with its value v, NULL for --skip-missing) of command
 * cmd; returns an exit code (REFENC_EXIT_USAGE with the message printed:
 * an empty pattern in a list, out of memory). */
int cli_selection_option(cli_selection *sel, const char *cmd, const char *s, const char *v);

/* Whether the case is selected; counts the patterns that match it. */
int cli_selection_selected(cli_selection *sel, const char *name);

/* The first pattern that matched no case so far, or NULL. */
const char *cli_selection_unmatched(const cli_selection *sel);

void cli_selection_free(cli_selection *sel);

#endif
