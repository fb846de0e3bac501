#include "status.h"

#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A UTF-8 continuation byte: a cut never falls before one. */
static int continuation(char c)
{
    return ((unsigned char)c & 0xC0) == 0x80;
}

/* The escaped message s (valid UTF-8, n bytes, n >= cap) in cap bytes: its
 * head and its tail around a mark that counts the bytes left out.  The tail
 * usually holds the reason, which a 4 KiB path would otherwise push out
 * ("...: File name too long").  Both cuts fall between characters. */
static void shorten(char *dst, size_t cap, const char *s, size_t n)
{
    char mark[64];
    int m = snprintf(mark, sizeof mark, " [... %zu bytes ...] ", n);
    size_t head = (cap - 1 - (size_t)m) / 2, tail = n - (cap - 1 - (size_t)m - head);
    while (head > 0 && continuation(s[head]))
        head--;
    while (tail < n && continuation(s[tail]))
        tail++;
    m = snprintf(mark, sizeof mark, " [... %zu bytes ...] ", tail - head); /* no longer than the first */
    memcpy(dst, s, head);
    memcpy(dst + head, mark, (size_t)m);
    memcpy(dst + head + (size_t)m, s + tail, n - tail + 1);
}

int refenc_error_set(refenc_error *err, int status, const char *fmt, ...)
{
    if (err != NULL) {
        /* formatted apart from err->message, which may be an argument; room
         * for a whole path (PATH_MAX) and its reason */
        char raw[2 * REFENC_ERRMSG_MAX + 8192];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        err->status = status;
        const size_t cap = 4 * strlen(raw) + 1; /* \xNN: at most 4 bytes a byte */
        char *esc = strlen(raw) < REFENC_ERRMSG_MAX ? NULL : malloc(cap);
        if (esc == NULL) { /* short, or no memory: cut at the end */
            refenc_text_escape(err->message, sizeof err->message, raw);
            return status;
        }
        refenc_text_escape(esc, cap, raw);
        const size_t n = strlen(esc);
        if (n < sizeof err->message)
            memcpy(err->message, esc, n + 1);
        else
            shorten(err->message, sizeof err->message, esc, n);
        free(esc);
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
