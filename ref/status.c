#include "status.h"

#include <stdarg.h>
#include <stdio.h>

int refenc_error_set(refenc_error *err, int status, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        err->status = status;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
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
