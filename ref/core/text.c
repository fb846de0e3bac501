#include "text.h"

#include <stdio.h>
#include <string.h>

size_t refenc_utf8_char_len(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    const unsigned c = s[0];
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    size_t len;
    if (c < 0x80) {
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : lo; /* overlong */
        hi = c == 0xED ? 0x9F : hi; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : lo; /* overlong */
        hi = c == 0xF4 ? 0x8F : hi; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return len;
}

size_t refenc_utf8_invalid_at(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const size_t len = refenc_utf8_char_len(s + i, n - i);
        if (len == 0)
            return i;
        i += len;
    }
    return n;
}

const char *refenc_shape_format(char *buf, size_t cap, const size_t *shape, size_t ndim,
                                const char *brackets)
{
    size_t o = (size_t)snprintf(buf, cap, "%c", brackets[0]);
    for (size_t i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%zu", i ? ", " : "", shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "%c", brackets[1]);
    return buf;
}

void refenc_text_escape(char *out, size_t cap, const char *raw)
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
