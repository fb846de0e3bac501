#include "status.h"

#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A message is one line of valid UTF-8 (it is printed on one line of a log
 * and stored in JSON reports), whatever names and values from the input it
 * quotes: control characters (and DEL) and bytes outside a valid UTF-8
 * sequence become "\xNN".  It is cut, if it must be, between two
 * characters or escapes. */
static void clean_message(char *out, size_t cap, const char *raw)
{
    const unsigned char *s = (const unsigned char *)raw;
    size_t o = 0;
    while (*s != '\0') {
        /* n = 4 is safe: the NUL that ends raw fails the continuation-byte
         * test, which refenc_utf8_char_len makes byte by byte */
        size_t len = *s >= 0x20 && *s < 0x7F ? 1 : *s >= 0x80 ? refenc_utf8_char_len(s, 4) : 0;
        if (len == 0) { /* a control character or a byte that is not UTF-8 */
            if (o + 4 >= cap)
                break;
            snprintf(out + o, cap - o, "\\x%02x", *s);
            o += 4;
            s++;
            continue;
        }
        if (o + len >= cap)
            break;
        memcpy(out + o, s, len);
        o += len;
        s += len;
    }
    out[o] = '\0';
}

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
        clean_message(err->message, sizeof err->message, raw);
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
