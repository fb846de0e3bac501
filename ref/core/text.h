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

/* Copies raw into out as one line of valid UTF-8 (a message printed on one
 * line of a log, a string stored in a JSON certificate), whatever names,
 * paths and values from the input it quotes: control characters (and DEL)
 * and bytes outside a valid UTF-8 sequence become "\xNN".  It is cut, if it
 * must be, between two characters or escapes, to fit cap bytes with its NUL;
 * 4 strlen(raw) + 1 bytes always suffice. */
void refenc_text_escape(char *out, size_t cap, const char *raw);

/* Writes a shape, "(2, 3, 4)" with brackets "()" or "[2, 3, 4]" with "[]",
 * into buf (cut to cap bytes, always terminated).  Returns buf. */
const char *refenc_shape_format(char *buf, size_t cap, const size_t *shape, size_t ndim,
                                const char *brackets);

#endif
