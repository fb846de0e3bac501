/* The reader's token limit (ref/io/safetensors.h, REFENC_ST_MAX_TOKENS):
 * headers of known token counts, built here construct by construct, give
 * exactly that count in the refusal's message; a header of exactly the
 * limit is read; the bytes after the header (the data) never count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../ref/io/safetensors.h"

/* A growing text. */
typedef struct {
    char *s;
    size_t n, cap;
} text;

static void put(text *t, const char *s)
{
    const size_t k = strlen(s);
    if (t->n + k + 1 > t->cap) {
        t->cap = 2 * (t->n + k + 1);
        t->s = realloc(t->s, t->cap);
        cr_assert_not_null(t->s);
    }
    memcpy(t->s + t->n, s, k + 1);
    t->n += k;
}

/* The file: the 8-byte length of the header, the header, then `data`. */
static unsigned char *file_of(const text *h, const char *data, size_t *size)
{
    const size_t d = strlen(data);
    *size = 8 + h->n + d;
    unsigned char *b = malloc(*size);
    cr_assert_not_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h->n >> (8 * i));
    memcpy(b + 8, h->s, h->n);
    memcpy(b + 8 + h->n, data, d);
    return b;
}

/* Parses; returns the token count the refusal names, or 0 if the header
 * was not refused for its tokens. */
static size_t refused_count(const text *h, const char *data)
{
    size_t size;
    unsigned char *b = file_of(h, data, &size);
    refenc_st_file f;
    refenc_error err;
    const int st = refenc_st_parse(&f, b, size, "t.safetensors", &err);
    size_t count = 0;
    if (st != REFENC_OK) {
        const char *p = strstr(err.message, "header holds ");
        if (p != NULL)
            count = strtoull(p + 13, NULL, 10);
    }
    refenc_st_free(&f);
    free(b);
    return count;
}

/* '{"k":[' then n zeros separated by "," and extra between two of them: 3 + n
 * tokens plus extra's. */
static text zeros(size_t n, const char *extra)
{
    text t = {0};
    put(&t, "{\"k\":[");
    for (size_t i = 0; i < n; i++) {
        put(&t, i ? ",0" : "0");
        if (i == n / 2)
            put(&t, extra);
    }
    put(&t, "]}");
    return t;
}

Test(st_limits, each_construct_counts_as_documented)
{
    const size_t n = REFENC_ST_MAX_TOKENS; /* 3 + n: over the limit */
    const struct {
        const char *extra;
        size_t tokens;
    } constructs[] = {
        {"", 0},
        {",-1.5e+3", 1},              /* a number, one token */
        {",true,false,null", 3},      /* literals */
        {",\"a\\\"b,c:d]\"", 1},      /* a string with an escaped quote and punctuation inside */
        {",\"\\\\\"", 1},             /* a string of one escaped backslash */
        {", \t\n\r0", 1},             /* whitespace of every kind, then a number */
        {",[0,[]]", 3},               /* opening brackets are tokens, closing ones are not */
        {",{\"x\":{}}", 3},           /* an object, its key, an empty object */
        {",garbage!!", 1},            /* a run of anything else */
    };
    for (size_t i = 0; i < sizeof constructs / sizeof constructs[0]; i++) {
        text t = zeros(n, constructs[i].extra);
        const size_t want = 3 + n + constructs[i].tokens;
        const size_t got = refused_count(&t, "");
        cr_expect_eq(got, want, "'%s': %zu tokens counted, want %zu", constructs[i].extra, got, want);
        free(t.s);
    }
}

Test(st_limits, the_data_after_the_header_never_counts)
{
    /* the header's last byte is in a run; the data starts with more of it */
    text t = zeros(REFENC_ST_MAX_TOKENS, "");
    t.n -= 2; /* drop "]}": the header text ends in "0" */
    t.s[t.n] = '\0';
    cr_expect_eq(refused_count(&t, "x1\"y{[,"), 3 + (size_t)REFENC_ST_MAX_TOKENS);
    free(t.s);
}

/* A valid header: __metadata__ with k string pairs, and one tensor "x"
 * of shape [0] (11 tokens) or [0, 0] (12): 14 + 2k or 15 + 2k tokens. */
static text valid(size_t k, int two_dims)
{
    text t = {0};
    char buf[64];
    put(&t, "{\"__metadata__\":{");
    for (size_t i = 0; i < k; i++) {
        snprintf(buf, sizeof buf, "%s\"m%zu\":\"v\"", i ? "," : "", i);
        put(&t, buf);
    }
    put(&t, two_dims ? "},\"x\":{\"dtype\":\"U8\",\"shape\":[0,0],\"data_offsets\":[0,0]}}"
                     : "},\"x\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}");
    return t;
}

Test(st_limits, a_header_of_exactly_the_limit_is_read_and_one_more_is_not)
{
    const size_t k = (REFENC_ST_MAX_TOKENS - 14) / 2;
    text t = valid(k, 0); /* 14 + 2k = the limit */
    size_t size;
    unsigned char *b = file_of(&t, "", &size);
    refenc_st_file f;
    refenc_error err;
    cr_expect_eq(refenc_st_parse(&f, b, size, "t.safetensors", &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(f.n_tensors, 1);
    refenc_st_free(&f);
    free(b);
    free(t.s);
    t = valid(k, 1); /* one more */
    cr_expect_eq(refused_count(&t, ""), (size_t)REFENC_ST_MAX_TOKENS + 1);
    free(t.s);
}

/* Headers whose text ends inside a token, read from a file (the reader holds
 * exactly the header's bytes): refused as JSON, and nothing past the header
 * is read to count or to name them (AddressSanitizer, under make sanitize
 * and in make mutation's second stage, sees any byte read past). */
Test(st_limits, a_header_ending_inside_a_token_is_refused_without_reading_past_it)
{
    const char *headers[] = {"{\"a\":10", "{\"abc", "{\"a\":\"x\\", "{\"a\":tru"};
    char dir[] = "/tmp/refenc-limits-XXXXXX", path[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/h.safetensors", dir);
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        text t = {0};
        put(&t, headers[i]);
        size_t size;
        unsigned char *b = file_of(&t, "", &size);
        FILE *f = fopen(path, "wb");
        cr_assert(f != NULL && fwrite(b, 1, size, f) == size && fclose(f) == 0);
        refenc_st_file st;
        refenc_error err;
        cr_expect_eq(refenc_st_read(&st, path, &err), REFENC_EFORMAT, "'%s'", headers[i]);
        cr_expect(strstr(err.message, "header is not valid JSON near byte ") != NULL, "'%s': %s", headers[i],
                  err.message);
        free(b);
        free(t.s);
    }
    unlink(path);
    rmdir(dir);
}
