#include "status.h"

#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int refenc_error_set(refenc_error *err, int status, const char *fmt, ...)
{
    if (err != NULL) {
        /* formatted apart from err->message, which may be an argument */
        char raw[2 * REFENC_ERRMSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        err->status = status;
        refenc_text_escape(err->message, sizeof err->message, raw);
    }
    return status;
}

void refenc_error_clear(refenc_error *err)
{
    if (err != NULL) {
        err->status = REFENC_OK;
        err->message[0] = '\0';
    }
}

const char *refenc_status_name(int status)
{
    switch (status) {
    case REFENC_OK: return "ok";
    case REFENC_EINVAL: return "invalid value";
    case REFENC_ELIMIT: return "size limit";
    case REFENC_ENOMEM: return "out of memory";
    case REFENC_EFORMAT: return "format error";
    case REFENC_EIO: return "i/o error";
    default: return "unknown status";
    }
}
