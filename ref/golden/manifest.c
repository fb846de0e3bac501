#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../io/atomic_write.h"
#include "../io/file_read.h"
#include "../io/golden_names.h"
#include "../io/manifest.h"
#include "catalogue.h"
#include "../io/safetensors.h"
#include "../encoder.h"
#include "../io/case_file.h"
#include "../io/config_json.h"
#include "../io/safetensors.h"
#include "../io/manifest.h"
#include "../tool/certify.h"

int golden_manifest_entry(json_t **entry, const char *path, const char *file, refenc_error *err)
{
    *entry = NULL;
    refenc_st_file f;
    int st = refenc_st_read(&f, path, err);
    if (st != REFENC_OK)
        return st;
    char hex[65];
    const size_t bytes = f.size;
    refenc_sha256_hex(hex, f.buf, f.size); /* the bytes read are the bytes hashed */
    const char *name = refenc_st_metadata(&f, "case");
    const char *comp = refenc_st_metadata(&f, "component");
    const char *desc = refenc_st_metadata(&f, "description");
    const char *outs_s = refenc_st_metadata(&f, "outputs");
    const char *bugs_s = refenc_st_metadata(&f, "bug_classes");
    json_t *outs = outs_s ? json_loads(outs_s, 0, NULL) : NULL;
    json_t *bugs = bugs_s ? json_loads(bugs_s, 0, NULL) : NULL;
    if (name == NULL || comp == NULL || desc == NULL || !json_is_array(outs) || !json_is_array(bugs)) {
        st = refenc_error_set(err, REFENC_EFORMAT,
                              "%s: __metadata__ needs case, component, description, outputs and "
                              "bug_classes (a golden case file)", path);
    } else {
        json_t *names = json_array();
        size_t k;
        json_t *o;
        json_array_foreach(outs, k, o)
            json_array_append(names, json_object_get(o, "name"));
        *entry = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:O, s:I}", "case", name, "file", file,
                           "sha256", hex, "component", comp, "description", desc, "outputs", names,
                           "bug_classes", bugs, "bytes", (json_int_t)bytes);
        const char *hazard = refenc_st_metadata(&f, "float32_hazard");
        if (*entry != NULL && hazard != NULL)
            json_object_set_new(*entry, "float32_hazard", json_string(hazard));
        if (*entry == NULL)
            st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", path);
    }
    json_decref(outs);
    json_decref(bugs);
    refenc_st_free(&f);
    return st;
}

int golden_manifest_write(const char *path, const json_t *cases, refenc_error *err)
{
    size_t i, total = 0;
    json_t *e;
    json_array_foreach(cases, i, e)
        total += (size_t)json_integer_value(json_object_get(e, "bytes"));
    json_t *doc = json_pack("{s:s, s:s, s:I, s:O}", "format", REFENC_GOLDEN_FORMAT, "format_version",
                            REFENC_GOLDEN_FORMAT_VERSION, "total_bytes", (json_int_t)total, "cases",
                            cases);
    if (doc == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", path);
    const int st = refenc_atomic_write_json(path, doc, JSON_INDENT(2) | JSON_SORT_KEYS, err);
    json_decref(doc);
    return st;
}

int golden_manifest_for_catalogue(const char *catalogue, const char *cases_dir, const char *out,
                                  refenc_error *err)
{
    /* a regular file only, as every reader; a "cases" array of objects, each with a "case" name */
    json_t *cat = catalogue_load(catalogue, err);
    if (cat == NULL)
        return err ? err->status : REFENC_EINVAL;
    json_t *list = json_array();
    size_t i;
    json_t *e;
    int st = REFENC_OK;
    json_array_foreach(json_object_get(cat, "cases"), i, e) {
        const char *name = json_string_value(json_object_get(e, "case"));
        char file[512], path[4096];
        snprintf(file, sizeof file, "%s.safetensors", name);
        snprintf(path, sizeof path, "%s/%s", cases_dir, file);
        json_t *entry;
        if ((st = golden_manifest_entry(&entry, path, file, err)) != REFENC_OK)
            break;
        json_array_append_new(list, entry);
    }
    if (st == REFENC_OK)
        st = golden_manifest_write(out, list, err);
    json_decref(list);
    json_decref(cat);
    return st;
}

int golden_mkdirs(const char *dir, const char *sub, refenc_error *err)
{
    char path[4096];
    for (int k = 0; k < (sub != NULL ? 2 : 1); k++) {
        if (k == 0)
            snprintf(path, sizeof path, "%s", dir);
        else
            snprintf(path, sizeof path, "%s/%s", dir, sub);
        struct stat sb;
        if (stat(path, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode))
                return refenc_error_set(err, REFENC_EIO, "%s: exists and is not a directory", path);
            continue;
        }
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return refenc_error_set(err, REFENC_EIO, "%s: cannot create the directory: %s", path,
                                    strerror(errno));
    }
    return REFENC_OK;
}

/* The cases of dir's manifest (a new reference), or a new empty array when
 * there is none yet. */
static int read_cases(json_t **cases, const char *path, refenc_error *err)
{
    *cases = NULL;
    if (access(path, F_OK) != 0) {
        *cases = json_array();
        return *cases ? REFENC_OK : refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    }
    /* read as every input is (io/file_read.h): a FIFO is refused, never waited on */
    char *text;
    size_t n;
    int st = refenc_read_file(&text, &n, path, REFENC_MANIFEST_MAX_BYTES, err);
    if (st != REFENC_OK)
        return st;
    json_error_t jerr;
    json_t *doc = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    const json_t *list = json_object_get(doc, "cases");
    if (doc == NULL || !json_is_array(list)) {
        json_decref(doc);
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: not a golden manifest (%s); it is left as it is", path,
                                doc == NULL ? jerr.text : "expected an object with a \"cases\" array");
    }
    *cases = json_incref((json_t *)list);
    json_decref(doc);
    return REFENC_OK;
}

int golden_dir_add(const char *dir, const char *name, const char *tmp_path, refenc_error *err)
{
    char file[512], final[4096], manifest[4096];
    snprintf(file, sizeof file, "%s.safetensors", name);
    snprintf(final, sizeof final, "%s/cases/%s", dir, file);
    snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);

    const int lock = open(dir, O_RDONLY | O_DIRECTORY);
    if (lock < 0 || flock(lock, LOCK_EX) != 0) {
        const int e = errno;
        if (lock >= 0)
            close(lock);
        remove(tmp_path);
        return refenc_error_set(err, REFENC_EIO, "%s: cannot lock the directory: %s", dir, strerror(e));
    }
    json_t *entry = NULL, *cases = NULL;
    int st = golden_manifest_entry(&entry, tmp_path, file, err);
    if (st == REFENC_OK)
        st = read_cases(&cases, manifest, err);
    if (st == REFENC_OK) {
        size_t i;
        json_t *e;
        int replaced = 0;
        json_array_foreach(cases, i, e)
            if (!replaced && json_equal(json_object_get(e, "case"), json_object_get(entry, "case"))) {
                json_array_set(cases, i, entry);
                replaced = 1;
            }
        if (!replaced)
            json_array_append(cases, entry);
    }
    /* the case into place, then the manifest that lists it (atomically); if
     * the manifest cannot be written, a case that was new is taken back */
    const int existed = access(final, F_OK) == 0;
    if (st == REFENC_OK && rename(tmp_path, final) != 0)
        st = refenc_error_set(err, REFENC_EIO, "%s: cannot write: %s", final, strerror(errno));
    else if (st == REFENC_OK && (st = golden_manifest_write(manifest, cases, err)) != REFENC_OK && !existed)
        remove(final);
    if (st != REFENC_OK)
        remove(tmp_path);
    flock(lock, LOCK_UN);
    close(lock);
    json_decref(entry);
    json_decref(cases);
    return st;
}
