/* The golden manifest and the checks of trust (manifest.h). */
#include "manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <nettle/sha2.h>

#include "file_names.h"
#include "file_read.h"

void refenc_sha256_hex(char hex[65], const void *bytes, size_t n)
{
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, n, bytes);
    sha256_digest(&ctx, sizeof digest, digest);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}

int refenc_manifest_name_ok(const char *s)
{
    /* the one rule of names that become file names (file_names.h) */
    return refenc_file_name_ok(s) && strlen(s) < REFENC_CASE_NAME_MAX;
}

static int is_sha256_hex(const char *s)
{
    if (s == NULL || strlen(s) != 64)
        return 0;
    for (size_t i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* One entry of "cases", checked, into c. */
static int read_entry(refenc_manifest_case *c, const json_t *e, size_t i, const char *path,
                      refenc_error *err)
{
    const char *name = json_string_value(json_object_get(e, "case"));
    const char *file = json_string_value(json_object_get(e, "file"));
    const char *sha = json_string_value(json_object_get(e, "sha256"));
    if (name == NULL || file == NULL || strchr(file, '/') != NULL)
        return refenc_error_set(err, REFENC_EFORMAT, "%s: cases[%zu] needs \"case\" and a plain \"file\" name",
                                path, i);
    if (!refenc_manifest_name_ok(name) || !refenc_manifest_name_ok(file))
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: cases[%zu]: case '%s', file '%s': a name must be 1 to %d characters "
                                "of A-Z a-z 0-9 . _ -, not start with '.' and not contain '..'",
                                path, i, name, file, REFENC_CASE_NAME_MAX - 1);
    if (!is_sha256_hex(sha))
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: cases[%zu] (case '%s') lists no \"sha256\" of 64 lower-case hex "
                                "digits: its file cannot be verified",
                                path, i, name);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->file, sizeof c->file, "%s", file);
    memcpy(c->sha256, sha, 65);
    return REFENC_OK;
}

/* The "cases" array of the parsed document, into m->cases. */
static int read_cases(refenc_manifest *m, const json_t *doc, refenc_error *err)
{
    const json_t *cases = json_object_get(doc, "cases");
    if (!json_is_array(cases))
        return refenc_error_set(err, REFENC_EFORMAT, "%s: expected an object with a \"cases\" array", m->path);
    const size_t n = json_array_size(cases);
    m->cases = calloc(n ? n : 1, sizeof *m->cases);
    if (m->cases == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory for %zu cases", m->path, n);
    for (size_t i = 0; i < n; i++) {
        int st = read_entry(&m->cases[i], json_array_get(cases, i), i, m->path, err);
        if (st)
            return st;
        for (size_t k = 0; k < i; k++)
            if (strcmp(m->cases[k].name, m->cases[i].name) == 0)
                return refenc_error_set(err, REFENC_EFORMAT, "%s: cases[%zu] and cases[%zu] are both case '%s'",
                                        m->path, k, i, m->cases[i].name);
        m->n_cases = i + 1;
    }
    return REFENC_OK;
}

int refenc_manifest_read(refenc_manifest *m, const char *golden_dir, refenc_error *err)
{
    memset(m, 0, sizeof *m);
    const size_t len = strlen(golden_dir) + sizeof "/manifest.json";
    m->path = malloc(len);
    if (m->path == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s/manifest.json: out of memory", golden_dir);
    snprintf(m->path, len, "%s/manifest.json", golden_dir);
    char *text;
    size_t n;
    int st = refenc_read_file(&text, &n, m->path, REFENC_MANIFEST_MAX_BYTES, err);
    if (st) {
        refenc_manifest_free(m);
        return st;
    }
    refenc_sha256_hex(m->sha256, text, n);
    json_error_t jerr;
    json_t *doc = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (doc == NULL)
        st = refenc_error_set(err, REFENC_EFORMAT, "%s: line %d, column %d (byte %d): %s", m->path, jerr.line,
                              jerr.column, jerr.position, jerr.text);
    else
        st = read_cases(m, doc, err);
    json_decref(doc);
    if (st)
        refenc_manifest_free(m);
    return st;
}

void refenc_manifest_free(refenc_manifest *m)
{
    if (m == NULL)
        return;
    free(m->path);
    free(m->cases);
    memset(m, 0, sizeof *m);
}

int refenc_manifest_verify(const refenc_manifest_case *c, const refenc_st_file *f, refenc_error *err)
{
    char hex[65];
    refenc_sha256_hex(hex, f->buf, f->size);
    if (strcmp(hex, c->sha256) != 0)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: sha256 %s, but the manifest lists %s for case '%s': the file was "
                                "changed after its release (regenerate it, or the manifest, with "
                                "refenc-golden)",
                                f->path, hex, c->sha256, c->name);
    const char *meta = refenc_st_metadata(f, "case");
    if (meta == NULL || strcmp(meta, c->name) != 0)
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: its __metadata__.case is '%s', but the manifest lists it as case '%s'",
                                f->path, meta ? meta : "(none)", c->name);
    return REFENC_OK;
}
