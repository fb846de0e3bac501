/* Shared by the libFuzzer targets in checks/fuzz/.  A property that fails
 * stops the run like a crash (libFuzzer saves the input as crash-*), with a
 * line on stderr saying which property. */
#ifndef REFENC_FUZZ_CHECK_H
#define REFENC_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                    \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz property failed at %s:%d: %s: ", __FILE__,     \
                    __LINE__, #cond);                                            \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            abort();                                                             \
        }                                                                        \
    } while (0)

/* An error message as the CLI prints it: non-empty, one line, no control
 * characters (names taken from the input must be escaped). */
static inline int fuzz_message_ok(const char *m)
{
    if (m[0] == '\0')
        return 0;
    for (const unsigned char *p = (const unsigned char *)m; *p; p++)
        if (*p < 0x20 || *p == 0x7F)
            return 0;
    return 1;
}

#endif
