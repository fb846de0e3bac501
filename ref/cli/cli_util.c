/* The helpers every subcommand shares (cli.h); main.c only dispatches. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

int cli_parse_tolerance(double *v, const char *s)
{
    char *end;
    if (s == NULL || *s == '\0')
        return 0;
    *v = strtod(s, &end);
    return *end == '\0' && isfinite(*v) && *v >= 0;
}

int cli_load_error(const char *cmd, char *report, const refenc_error *err)
{
    if (report != NULL) {
        cli_error(cmd, "%s", report);
        free(report);
        return REFENC_EXIT_USAGE;
    }
    return cli_error(cmd, "%s", err->message);
}
