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

int refenc_name_is_grad(const char *name)
{
    return starts_with(name, REFENC_NAME_GRAD) || strcmp(name, REFENC_NAME_GRAD_DY) == 0;
}

int refenc_name_layer_input(char *buf, size_t cap, size_t layer)
{
    return fits(snprintf(buf, cap, REFENC_NAME_INPUT "layers.%zu.input", layer), cap);
}

int refenc_name_is_layer_input(const char *name, size_t *layer)
{
    const char *prefix = REFENC_NAME_INPUT "layers.";
    if (!starts_with(name, prefix))
        return 0;
    const char *p = name + strlen(prefix);
    size_t i = 0, digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++)
        i = 10 * i + (size_t)(*p - '0');
    if (digits == 0 || (digits > 1 && name[strlen(prefix)] == '0') || strcmp(p, ".input") != 0)
        return 0;
    *layer = i;
    return 1;
}
