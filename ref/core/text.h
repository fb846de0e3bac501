/* Text helpers shared by every message and file reader: UTF-8 validity and
 * shapes written out. */
#ifndef REFENC_TEXT_H
#define REFENC_TEXT_H

#include <stddef.h>

/* Length (1 to 4) of the valid UTF-8 character at s, of which at most n
 * bytes may be read, or 0 if the bytes there are not one (RFC 3629: no
 * overlong form, no surrogate, nothing above U+10FFFF). */
size_t refenc_utf8_char_len(const unsigned char *s, size_t n);

/* Offset of the first byte of the first invalid UTF-8 sequence in s[0..n),
 * or n if it is all valid. */
size_t refenc_utf8_invalid_at(const unsigned char *s, size_t n);

/* Writes a shape, "(2, 3, 4)" with brackets "()" or "[2, 3, 4]" with "[]",
 * into buf (cut to cap bytes, always terminated).  Returns buf. */
const char *refenc_shape_format(char *buf, size_t cap, const size_t *shape, size_t ndim,
                                const char *brackets);

#endif
