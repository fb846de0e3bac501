/* Safe names and bounded paths (file_names.h). */
#include "file_names.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int refenc_file_name_ok(const char *s)
{
    const size_t n = s != NULL ? strlen(s) : 0;
    if (n == 0 || n > REFENC_SAFE_NAME_MAX || s[0] == '.' || strstr(s, "..") != NULL)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

int refenc_path_format(char *buf, size_t cap, refenc_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < cap)
        return REFENC_OK;
    /* the message shows the path's start: the whole would not fit in it either */
    const int st = refenc_error_set(err, REFENC_ELIMIT, "%.200s...: path too long (%d bytes, longer than the "
                                    "limit of %zu)", buf, n, cap - 1);
    buf[0] = '\0';
    return st;
}
