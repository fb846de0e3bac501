/* An unknown prefix of every tensor name (name_prefix.h). */
#include "name_prefix.h"

#include <string.h>

size_t name_prefix_common(const refenc_st_file *f)
{
    if (f->n_tensors == 0)
        return 0;
    const char *first = f->tensors[0].name;
    size_t n = strlen(first);
    for (size_t k = 1; k < f->n_tensors; k++) {
        size_t i = 0;
        while (i < n && f->tensors[k].name[i] == first[i])
            i++;
        n = i;
    }
    for (size_t k = 0; k < f->n_tensors && n > 0; k++) /* no whole name: it must go on after the prefix */
        if (strlen(f->tensors[k].name) == n)
            n--;
    while (n > 0 && first[n - 1] != '.') /* back to the last '.' */
        n--;
    return n;
}

int name_prefix_refuse(const refenc_st_file *f, size_t plen, const char *whose, const char *name,
                       refenc_error *err)
{
    return refenc_error_set(err, REFENC_EFORMAT,
                            "%s: all %zu tensors start with '%.*s', which %s names do not (e.g. '%s' is "
                            "'%s' without it): strip the prefix (in Python, {k.removeprefix('%.*s'): v for "
                            "k, v in state_dict.items()}) or save the state_dict of the model inside the "
                            "wrapper",
                            f->path, f->n_tensors, (int)plen, f->tensors[0].name, whose, name, name + plen,
                            (int)plen, f->tensors[0].name);
}
