/* The reader never reads outside the buffer it is given (ref/io/safetensors.c),
 * even where its error messages look back at the header: each file here ends
 * at the last byte of a readable page, and the next page cannot be read, so a
 * read of one byte past the file is a crash, also inside jansson, which no
 * sanitizer instruments.  The headers are cut inside a string at their very
 * end, where the scan for the key to name stops. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../ref/io/safetensors.h"

/* Two pages, the second unreadable; returns the first. */
static unsigned char *guarded_page(size_t *page)
{
    *page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *map = mmap(NULL, 2 * *page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(map != MAP_FAILED);
    cr_assert_eq(mprotect(map + *page, *page, PROT_NONE), 0);
    return map;
}

/* The file of header hdr (its length N, then hdr, no data) placed to end
 * where the readable page ends. */
static unsigned char *at_page_end(unsigned char *map, size_t page, const char *hdr, size_t *size)
{
    const size_t h = strlen(hdr);
    *size = 8 + h;
    unsigned char *b = map + page - *size;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, hdr, h);
    return b;
}

Test(safetensors, a_header_cut_in_a_string_is_refused_without_reading_past_the_file)
{
    size_t page;
    unsigned char *map = guarded_page(&page);
    /* jansson stops at the end of the input, byte 8 + N of the file; a cut
     * inside an entry names it */
    static const struct {
        const char *hdr, *frag;
    } cases[] = {
        {"{\"abc", "header is not valid JSON near byte 13: premature end of input"},
        {"{\"ab\\", "header is not valid JSON near byte 13: invalid escape near '\"ab\\'"},
        {"{\"a\":\"xy", "header is not valid JSON near byte 16: premature end of input"},
        {"{\"a\":{\"b\":\"xy\\", "header is not valid JSON near byte 22, in the entry of 'a' (at byte 9): invalid escape"},
        {"{\"a\":1,\"bc", "header is not valid JSON near byte 18: premature end of input"},
        /* cut in a bare token (a number, a literal): the token count's scan stops at the end */
        {"{\"a\":12", "header is not valid JSON"},
        {"{\"a\":tru", "header is not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t size;
        const unsigned char *b = at_page_end(map, page, cases[i].hdr, &size);
        refenc_st_file f;
        refenc_error err;
        cr_assert_eq(refenc_st_parse(&f, b, size, "cut.safetensors", &err), REFENC_EFORMAT, "'%s'",
                     cases[i].hdr);
        cr_expect(strstr(err.message, cases[i].frag) != NULL, "'%s': %s", cases[i].hdr, err.message);
        cr_expect(strncmp(err.message, "cut.safetensors: ", 17) == 0, "%s", err.message);
    }
    /* a header that is whole at the end of the page is read (the layout itself is sound) */
    size_t size;
    const unsigned char *b = at_page_end(map, page, "{\"__metadata__\":{\"k\":\"v\"}}", &size);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_parse(&f, b, size, "whole.safetensors", &err), REFENC_OK, "%s", err.message);
    refenc_st_free(&f);
    munmap(map, 2 * page);
}

/* Negative control of the guard: the byte after a file at the page end cannot
 * be read, its last byte can.  The kernel says so (write from an unreadable
 * address fails with EFAULT) without a signal, which AddressSanitizer, under
 * make sanitize, would take over. */
Test(safetensors, the_byte_after_a_file_at_the_page_end_cannot_be_read)
{
    size_t page, size;
    unsigned char *map = guarded_page(&page);
    const unsigned char *b = at_page_end(map, page, "{}", &size);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    cr_expect_eq(write(fds[1], b + size - 1, 1), 1, "the file's last byte is not readable");
    errno = 0;
    cr_expect_eq(write(fds[1], b + size, 1), -1, "the byte after the file is readable");
    cr_expect_eq(errno, EFAULT, "%s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    munmap(map, 2 * page);
}
