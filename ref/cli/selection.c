/* The selection grammar of certify and report (selection.h). */
#include "selection.h"

#include <stdlib.h>
#include <string.h>

#include "../tool/certificate.h"
#include "cli.h"

int cli_selection_is_option(const char *s, int *takes_value)
{
    *takes_value = strcmp(s, "--case") == 0 || strcmp(s, "--outputs") == 0;
    return *takes_value || strcmp(s, "--skip-missing") == 0;
}

/* --case GLOB[,GLOB...]: every non-empty pattern of the list. */
static int add_patterns(cli_selection *sel, const char *cmd, const char *list)
{
    const char *p = list;
    while (1) {
        const size_t n = strcspn(p, ",");
        if (n == 0)
            return cli_error(cmd, "--case: empty pattern in '%s'", list);
        char **grown = realloc(sel->patterns, (sel->n_patterns + 1) * sizeof *grown);
        if (grown != NULL)
            sel->patterns = grown;
        size_t *counts = grown ? realloc(sel->matched, (sel->n_patterns + 1) * sizeof *counts) : NULL;
        if (counts != NULL)
            sel->matched = counts;
        if (counts == NULL || (sel->patterns[sel->n_patterns] = strndup(p, n)) == NULL)
            return cli_error(cmd, "out of memory");
        sel->matched[sel->n_patterns++] = 0;
        if (p[n] == '\0')
            return REFENC_EXIT_OK;
        p += n + 1;
    }
}

int cli_selection_option(cli_selection *sel, const char *cmd, const char *s, const char *v)
{
    if (strcmp(s, "--case") == 0)
        return add_patterns(sel, cmd, v);
    if (strcmp(s, "--outputs") == 0)
        sel->outputs_glob = v;
    else
        sel->skip_missing = 1;
    return REFENC_EXIT_OK;
}

int cli_selection_selected(cli_selection *sel, const char *name)
{
    return refenc_certify_selected((const char *const *)sel->patterns, sel->n_patterns, sel->matched, name);
}

const char *cli_selection_unmatched(const cli_selection *sel)
{
    for (size_t i = 0; i < sel->n_patterns; i++)
        if (sel->matched[i] == 0)
            return sel->patterns[i];
    return NULL;
}

void cli_selection_free(cli_selection *sel)
{
    for (size_t i = 0; i < sel->n_patterns; i++)
        free(sel->patterns[i]);
    free(sel->patterns);
    free(sel->matched);
    sel->patterns = NULL;
    sel->matched = NULL;
    sel->n_patterns = 0;
}
