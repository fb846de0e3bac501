/* The golden manifest (ref/io/manifest.h): the sha256 against the standard's
 * test vectors, the rules for case and file names, what an entry must hold,
 * and the verification of a case file against its entry. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../ref/io/manifest.h"

Test(manifest, sha256_of_the_fips_180_test_vectors)
{
    /* FIPS 180-2, appendix B, and the empty message */
    char hex[65];
    refenc_sha256_hex(hex, "abc", 3);
    cr_expect_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    refenc_sha256_hex(hex, "", 0);
    cr_expect_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    refenc_sha256_hex(hex, two, strlen(two));
    cr_expect_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *million = malloc(1000000);
    cr_assert_not_null(million);
    memset(million, 'a', 1000000);
    refenc_sha256_hex(hex, million, 1000000);
    cr_expect_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
}

Test(manifest, case_and_file_names_cannot_leave_their_directory)
{
    /* every edge of the allowed ranges: 0 9 A Z a z */
    const char *ok[] = {"act_gelu", "layernorm_eps1e-5", "encoder_pre_rope.safetensors", "a", "A.b-c_9", "z0Z9Aa"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        cr_expect(refenc_manifest_name_ok(ok[i]), "'%s' refused", ok[i]);
    char long_ok[REFENC_CASE_NAME_MAX], too_long[REFENC_CASE_NAME_MAX + 1];
    memset(long_ok, 'x', sizeof long_ok - 1);
    long_ok[sizeof long_ok - 1] = '\0';
    memset(too_long, 'x', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';
    cr_expect(refenc_manifest_name_ok(long_ok), "a name of %d bytes", REFENC_CASE_NAME_MAX - 1);
    const char *bad[] = {"", ".", "..", "../x", "x/..", "a/b", "/abs", "a..b", ".hidden", "a b", "a\\b",
                         "caf\xc3\xa9", "tab\t", "x\n", too_long,
                         /* the characters just outside each range: / : @ [ ` { */
                         "a/b", "a:b", "a@b", "a[b", "a`b", "a{b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect(!refenc_manifest_name_ok(bad[i]), "'%s' accepted", bad[i]);
    cr_expect(!refenc_manifest_name_ok(NULL));
}

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/refenc-manifest-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    unlink(p);
    rmdir(dir);
}

/* Writes text as the manifest and reads it; returns the status. */
static int read_text(refenc_manifest *m, const char *text, refenc_error *err)
{
    char p[128];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return refenc_manifest_read(m, dir, err);
}

#define SHA_A "a746f259158643bd6f3426c712d0133f947399a544436697a4cf53efd47eaf5b"

Test(manifest, entries_are_read_in_order_with_the_manifest_checksum, .init = setup, .fini = teardown)
{
    refenc_manifest m;
    refenc_error err;
    const char *text = "{\"cases\": [{\"case\": \"b\", \"file\": \"b.safetensors\", \"sha256\": \"" SHA_A "\"},"
                       " {\"case\": \"a\", \"file\": \"a.safetensors\", \"sha256\": \"" SHA_A "\", \"bytes\": 3}]}";
    cr_assert_eq(read_text(&m, text, &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(m.n_cases, 2);
    cr_expect_str_eq(m.cases[0].name, "b");
    cr_expect_str_eq(m.cases[1].file, "a.safetensors");
    cr_expect_str_eq(m.cases[1].sha256, SHA_A);
    char hex[65];
    refenc_sha256_hex(hex, text, strlen(text));
    cr_expect_str_eq(m.sha256, hex, "the manifest's own checksum is of its bytes");
    refenc_manifest_free(&m);
    refenc_manifest_free(&m); /* twice: safe */
}

Test(manifest, bad_entries_are_refused_naming_their_index, .init = setup, .fini = teardown)
{
    const struct {
        const char *text, *message;
    } bad[] = {
        {"{\"cases\": [{\"case\": \"a\", \"file\": \"a.st\"}]}",
         "cases[0] (case 'a') lists no \"sha256\" of 64 lower-case hex digits: its file cannot be verified"},
        {"{\"cases\": [{\"case\": \"a\", \"file\": \"a.st\", \"sha256\": \"A746f259158643bd6f3426c712d0133f947399a544436697a4cf53efd47eaf5b\"}]}",
         "cases[0] (case 'a') lists no \"sha256\""},
        {"{\"cases\": [{\"case\": \"a\", \"file\": \"a.st\", \"sha256\": \"a746\"}]}", "cases[0] (case 'a') lists no"},
        {"{\"cases\": [{\"case\": \"a\", \"file\": \"a.st\", \"sha256\": 3}]}", "cases[0] (case 'a') lists no"},
        {"{\"cases\": [{\"case\": \"../up\", \"file\": \"a.st\", \"sha256\": \"" SHA_A "\"}]}",
         "cases[0]: case '../up', file 'a.st': a name must be 1 to 127 characters of A-Z a-z 0-9 . _ -, not "
         "start with '.' and not contain '..'"},
        {"{\"cases\": [{\"case\": \"..\", \"file\": \"a.st\", \"sha256\": \"" SHA_A "\"}]}", "cases[0]: case '..'"},
        {"{\"cases\": [{\"case\": \"a/b\", \"file\": \"a.st\", \"sha256\": \"" SHA_A "\"}]}", "cases[0]: case 'a/b'"},
        {"{\"cases\": [{\"case\": \"a\", \"file\": \"..\", \"sha256\": \"" SHA_A "\"}]}", "cases[0]: case 'a', file '..'"},
        {"{\"cases\": [{\"case\": \"a\", \"file\": \"../a.st\", \"sha256\": \"" SHA_A "\"}]}",
         "cases[0] needs \"case\" and a plain \"file\" name"},
        {"{\"cases\": [{\"case\": \"a\", \"file\": \"a.st\", \"sha256\": \"" SHA_A "\"}, "
         "{\"case\": \"a\", \"file\": \"b.st\", \"sha256\": \"" SHA_A "\"}]}",
         "cases[0] and cases[1] are both case 'a'"},
        {"{\"cases\": {}}", "expected an object with a \"cases\" array"},
        {"[1]", "expected an object with a \"cases\" array"},
        {"{\"cases\": [], \"cases\": []}", "line 1, column 21 (byte 21): duplicate object key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        refenc_manifest m;
        refenc_error err;
        cr_expect_eq(read_text(&m, bad[i].text, &err), REFENC_EFORMAT, "%s", bad[i].text);
        cr_expect(strstr(err.message, "/manifest.json: ") && strstr(err.message, bad[i].message), "%s\nwant: %s",
                  err.message, bad[i].message);
        cr_expect_eq(m.n_cases, 0);
        cr_expect_null(m.cases);
        refenc_manifest_free(&m);
    }
}

Test(manifest, a_manifest_that_is_not_a_regular_file_or_too_large, .init = setup, .fini = teardown)
{
    refenc_manifest m;
    refenc_error err;
    char p[128];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    cr_assert_eq(mkfifo(p, 0600), 0);
    cr_expect_eq(refenc_manifest_read(&m, dir, &err), REFENC_EIO);
    cr_expect(strstr(err.message, "manifest.json: not a regular file"), "%s", err.message);
    unlink(p);
    cr_assert_eq(mkdir(p, 0700), 0);
    cr_expect_eq(refenc_manifest_read(&m, dir, &err), REFENC_EIO);
    cr_expect(strstr(err.message, "manifest.json: is a directory, not a file"), "%s", err.message);
    rmdir(p);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    cr_assert_eq(ftruncate(fileno(f), (off_t)REFENC_MANIFEST_MAX_BYTES + 1), 0);
    fclose(f);
    cr_expect_eq(refenc_manifest_read(&m, dir, &err), REFENC_ELIMIT);
    cr_expect(strstr(err.message, "bytes, more than the limit of 16777216"), "%s", err.message);
}

/* A golden file holding only metadata "case" = name, in memory. */
static void fake_case(refenc_st_file *f, unsigned char **buf, const char *name)
{
    char hdr[128];
    const int n = snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"case\":\"%s\"}}", name);
    *buf = calloc(8 + (size_t)n, 1);
    cr_assert_not_null(*buf);
    (*buf)[0] = (unsigned char)n;
    memcpy(*buf + 8, hdr, (size_t)n);
    refenc_error err;
    cr_assert_eq(refenc_st_parse(f, *buf, 8 + (size_t)n, "g.safetensors", &err), REFENC_OK, "%s", err.message);
}

Test(manifest, a_case_file_must_have_its_listed_checksum_and_name)
{
    refenc_st_file f;
    unsigned char *buf;
    fake_case(&f, &buf, "act_gelu");
    refenc_manifest_case c = {.name = "act_gelu", .file = "act_gelu.safetensors"};
    refenc_sha256_hex(c.sha256, buf, f.size);
    refenc_error err;
    cr_expect_eq(refenc_manifest_verify(&c, &f, &err), REFENC_OK, "%s", err.message);
    /* one bit of the listed checksum off */
    c.sha256[63] = c.sha256[63] == '0' ? '1' : '0';
    cr_expect_eq(refenc_manifest_verify(&c, &f, &err), REFENC_EFORMAT);
    cr_expect(strstr(err.message, "g.safetensors: sha256 ") &&
                  strstr(err.message, ", but the manifest lists ") && strstr(err.message, "for case 'act_gelu'"),
              "%s", err.message);
    /* the right bytes listed under another case's name */
    refenc_sha256_hex(c.sha256, buf, f.size);
    snprintf(c.name, sizeof c.name, "softmax_masked");
    cr_expect_eq(refenc_manifest_verify(&c, &f, &err), REFENC_EFORMAT);
    cr_expect(strstr(err.message, "its __metadata__.case is 'act_gelu', but the manifest lists it as case "
                                  "'softmax_masked'"),
              "%s", err.message);
    refenc_st_free(&f);
    free(buf);
}
