/* Every error is one message line (docs/cli.md): a CI log shows it whole,
 * and a file cannot forge a second line ("PASS") or send escape sequences to
 * the terminal of whoever runs refenc.  Names and values taken from the input
 * reach messages: control characters in them are shown as \xNN, and a
 * message is valid UTF-8 (it also goes into the --json certificate), even
 * when it is cut to REFENC_ERRMSG_MAX bytes.
 *
 * Regressions found by the fuzzers (checks/fuzz/, make fuzz):
 *   - fuzz_config: an unknown key "d\x7fmodle" was printed raw;
 *   - fuzz_safetensors: jansson's error text quotes the token where it
 *     stopped, raw ("']' expected near '\x01'").
 * The fix is in refenc_error_set, which builds every message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/io/config_json.h"
#include "../../ref/io/safetensors.h"
#include "../../ref/core/status.h"
#include "../../ref/core/text.h"
#include "robust.h"

/* 1 if s is valid UTF-8 without control characters. */
static int clean_line(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p < 0x20 || *p == 0x7F)
            return 0;
        if (*p < 0x80) {
            p++;
            continue;
        }
        size_t len = *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC2 ? 2 : 0;
        if (len == 0 || *p > 0xF4)
            return 0;
        for (size_t k = 1; k < len; k++)
            if ((p[k] & 0xC0) != 0x80)
                return 0;
        p += len;
    }
    return 1;
}

Test(messages, control_characters_are_shown_as_escapes)
{
    refenc_error e;
    refenc_error_set(&e, REFENC_EINVAL, "key '%s' near '%s'", "a\nPASS", "\x01\x1b[31m\x7f");
    cr_expect_str_eq(e.message, "key 'a\\x0aPASS' near '\\x01\\x1b[31m\\x7f'");
    cr_expect_eq(e.status, REFENC_EINVAL);
}

Test(messages, printable_and_utf8_text_is_kept)
{
    refenc_error e;
    refenc_error_set(&e, REFENC_EFORMAT, "%s", "tensor 'poids.é→ü' at byte 42 \\x is fine");
    cr_expect_str_eq(e.message, "tensor 'poids.é→ü' at byte 42 \\x is fine");
}

Test(messages, bytes_that_are_not_utf8_are_shown_as_escapes)
{
    refenc_error e;
    refenc_error_set(&e, REFENC_EIO, "%s", "/tmp/caf\xe9/x: \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82");
    cr_expect_str_eq(e.message,
                     "/tmp/caf\\xe9/x: \\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 \\xe2\\x82");
    cr_expect(clean_line(e.message));
}

Test(messages, a_message_cut_to_the_limit_ends_on_a_character_boundary)
{
    char *long_name = malloc(4 * REFENC_ERRMSG_MAX);
    cr_assert_not_null(long_name);
    for (size_t i = 0; i + 2 < 4 * REFENC_ERRMSG_MAX; i += 2)
        memcpy(long_name + i, "\xc3\xa9", 2); /* é */
    long_name[4 * REFENC_ERRMSG_MAX - 2] = '\0';
    refenc_error e;
    for (size_t shift = 0; shift < 4; shift++) { /* every position of the cut in a character */
        refenc_error_set(&e, REFENC_EINVAL, "%.*s%s", (int)shift, "xxx", long_name);
        cr_expect(clean_line(e.message), "shift %zu: the cut message is not clean UTF-8", shift);
        cr_expect_lt(strlen(e.message), (size_t)REFENC_ERRMSG_MAX);
        cr_expect_gt(strlen(e.message), (size_t)REFENC_ERRMSG_MAX - 8, "shift %zu: cut too early", shift);
    }
    /* escapes are cut whole too */
    memset(long_name, '\x01', 4 * REFENC_ERRMSG_MAX - 2);
    for (size_t shift = 0; shift < 4; shift++) {
        refenc_error_set(&e, REFENC_EINVAL, "%.*s%s", (int)shift, "xxx", long_name);
        const size_t n = strlen(e.message);
        cr_expect(n >= 4 && strcmp(e.message + n - 4, "\\x01") == 0, "shift %zu: ends with '%s'", shift,
                  e.message + (n >= 4 ? n - 4 : 0));
    }
    free(long_name);
}

/* A path of 4 KiB in a message would push its reason out of the buffer: a
 * long message keeps its head and its tail (the reason), with the count of
 * bytes left out between them.  Cutting at the end alone (the negative
 * control: the old behaviour) loses "File name too long". */
Test(messages, a_long_message_keeps_its_reason)
{
    const size_t n = 5000;
    char *path = malloc(n + 1);
    cr_assert_not_null(path);
    memset(path, 'd', n);
    memcpy(path, "/start", 6);
    path[n] = '\0';
    refenc_error e;
    refenc_error_set(&e, REFENC_EIO, "%s: cannot open (File name too long)", path);
    const size_t len = strlen(e.message);
    cr_expect_lt(len, (size_t)REFENC_ERRMSG_MAX);
    cr_expect(strncmp(e.message, "/start", 6) == 0, "the head is lost: %s", e.message);
    cr_expect(strstr(e.message, "cannot open (File name too long)") != NULL, "the reason is lost: %s",
              e.message);
    cr_expect(strstr(e.message, " bytes ...] ") != NULL, "no mark of what was left out: %s", e.message);
    /* control: the same text cut at the end, as refenc_text_escape alone does */
    char cut[REFENC_ERRMSG_MAX], raw[8192];
    snprintf(raw, sizeof raw, "%s: cannot open (File name too long)", path);
    refenc_text_escape(cut, sizeof cut, raw);
    cr_expect(strstr(cut, "File name too long") == NULL, "the control keeps the reason: the test cannot fail");
    free(path);
}

/* the library paths the fuzzers found */
Test(messages, config_reader_escapes_a_key)
{
    json_t *j = json_loads("{\"d\\u007fmodle\": 65}", 0, NULL);
    cr_assert_not_null(j);
    refenc_config cfg;
    refenc_error e;
    cr_expect_eq(refenc_config_from_json(&cfg, j, "model", &e), REFENC_EINVAL);
    cr_expect(strncmp(e.message, "model.d\\x7fmodle: unknown key", 29) == 0, "%s", e.message);
    json_decref(j);
}

Test(messages, safetensors_reader_escapes_the_token_quoted_by_jansson)
{
    static const char header[] = "{\"t\":{\"dtype\":\"F64\",\"shape\":[1\x01],\"data_offsets\":[0,8]}}";
    unsigned char buf[8 + sizeof header + 8] = {0};
    buf[0] = (unsigned char)(sizeof header - 1);
    memcpy(buf + 8, header, sizeof header - 1);
    refenc_st_file f;
    refenc_error e;
    cr_expect_eq(refenc_st_parse(&f, buf, 8 + sizeof header - 1 + 8, "x.safetensors", &e), REFENC_EFORMAT);
    cr_expect(clean_line(e.message), "%s", e.message);
    cr_expect(strstr(e.message, "near '\\x01'") != NULL, "%s", e.message);
}

/* and through the program: exit 2, one line */
Test(messages, cli_prints_one_line_for_a_key_with_a_newline)
{
    char dir[RB_PATH_MAX], path[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    static const char config[] = "{\"model\": {\"d_model\\nPASS\\u001b[2J\": 64}}";
    rb_write_file(path, config, sizeof config - 1);
    const char *args[] = {"refenc", "run", "--config", path, NULL};
    rb_result r = rb_run(args);
    const char *frag[] = {path, "model.d_model\\x0aPASS\\x1b[2J: unknown key", NULL};
    rb_expect_error(&r, 2, "run", "a key with a newline", frag);
    cr_expect_str_empty(r.out);
    rb_result_free(&r);

    static const char norm[] = "{\"model\": {\"norm\": \"pre\\npost\"}}";
    rb_write_file(path, norm, sizeof norm - 1);
    r = rb_run(args);
    const char *frag2[] = {"model.norm: unknown name 'pre\\x0apost'", NULL};
    rb_expect_error(&r, 2, "run", "a name with a newline", frag2);
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}
