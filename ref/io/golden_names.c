#include "golden_names.h"

#include <stdio.h>
#include <string.h>

static int fits(int n, size_t cap)
{
    return n >= 0 && (size_t)n < cap;
}

int refenc_name_output(char *buf, size_t cap, const char *step)
{
    return fits(snprintf(buf, cap, REFENC_NAME_OUTPUT "%s", step), cap);
}

int refenc_name_dontcare(char *buf, size_t cap, const char *variant, const char *output)
{
    if (variant == NULL)
        return fits(snprintf(buf, cap, REFENC_NAME_DONTCARE "%s", output), cap);
    return fits(snprintf(buf, cap, REFENC_NAME_ALT "%s." REFENC_NAME_DONTCARE "%s", variant, output),
                cap);
}

int refenc_name_alt(char *buf, size_t cap, const char *variant, const char *output)
{
    return fits(snprintf(buf, cap, REFENC_NAME_ALT "%s.%s", variant, output), cap);
}

int refenc_name_alt_prefix(char *buf, size_t cap, const char *variant)
{
    return fits(snprintf(buf, cap, REFENC_NAME_ALT "%s.", variant), cap);
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int refenc_name_is_expected(const char *name)
{
    return starts_with(name, REFENC_NAME_OUTPUT) || starts_with(name, REFENC_NAME_DONTCARE) ||
           starts_with(name, REFENC_NAME_ALT);
}
