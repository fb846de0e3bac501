#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../io/atomic_write.h"
#include "../io/file_names.h"
#include "../io/file_read.h"
#include "../io/golden_names.h"
#include "../io/manifest.h"
#include "../io/out_dir.h"
#include "../io/safetensors.h"
#include "../io/same_file.h"
#include "../encoder.h"
#include "../io/case_file.h"
#include "../io/config_json.h"
#include "../tool/certify.h"
#include "catalogue.h"

/* The entry of the case file f, listed as `file`. */
static int entry_of(json_t **entry, const refenc_st_file *f, const char *file, refenc_error *err)
{
    *entry = NULL;
    char hex[65];
    const size_t bytes = f->size;
    refenc_sha256_hex(hex, f->buf, f->size); /* the bytes read are the bytes hashed */
    const char *name = refenc_st_metadata(f, "case");
    const char *comp = refenc_st_metadata(f, "component");
    const char *desc = refenc_st_metadata(f, "description");
    const char *outs_s = refenc_st_metadata(f, "outputs");
    const char *bugs_s = refenc_st_metadata(f, "bug_classes");
    json_t *outs = outs_s ? json_loads(outs_s, 0, NULL) : NULL;
    json_t *bugs = bugs_s ? json_loads(bugs_s, 0, NULL) : NULL;
    int st = REFENC_OK;
    if (name == NULL || comp == NULL || desc == NULL || !json_is_array(outs) || !json_is_array(bugs)) {
        st = refenc_error_set(err, REFENC_EFORMAT,
                              "%s: __metadata__ needs case, component, description, outputs and "
                              "bug_classes (a golden case file)", f->path);
    } else {
        json_t *names = json_array();
        size_t k;
        json_t *o;
        json_array_foreach(outs, k, o)
            json_array_append(names, json_object_get(o, "name"));
        *entry = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:O, s:I}", "case", name, "file", file,
                           "sha256", hex, "component", comp, "description", desc, "outputs", names,
                           "bug_classes", bugs, "bytes", (json_int_t)bytes);
        const char *hazard = refenc_st_metadata(f, "float32_hazard");
        if (*entry != NULL && hazard != NULL)
            json_object_set_new(*entry, "float32_hazard", json_string(hazard));
        if (*entry == NULL)
            st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", f->path);
    }
    json_decref(outs);
    json_decref(bugs);
    return st;
}

int golden_manifest_entry(json_t **entry, const char *path, const char *file, refenc_error *err)
{
    *entry = NULL;
    refenc_st_file f;
    int st = refenc_st_read(&f, path, err);
    if (st == REFENC_OK)
        st = entry_of(entry, &f, file, err);
    refenc_st_free(&f);
    return st;
}

/* The manifest document of these entries (total_bytes summed), or NULL. */
static json_t *manifest_doc(const json_t *cases)
{
    size_t i, total = 0;
    json_t *e;
    json_array_foreach(cases, i, e)
        total += (size_t)json_integer_value(json_object_get(e, "bytes"));
    return json_pack("{s:s, s:s, s:I, s:O}", "format", REFENC_GOLDEN_FORMAT, "format_version",
                     REFENC_GOLDEN_FORMAT_VERSION, "total_bytes", (json_int_t)total, "cases", cases);
}

/* Writes the manifest of these entries to path relative to `at`, atomically. */
static int manifest_write_at(int at, const char *path, const char *display, const json_t *cases,
                             refenc_error *err)
{
    json_t *doc = manifest_doc(cases);
    if (doc == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", display);
    const int st = refenc_atomic_write_json_at(at, path, display, doc, JSON_INDENT(2) | JSON_SORT_KEYS, err);
    json_decref(doc);
    return st;
}

int golden_manifest_write(const char *path, const json_t *cases, refenc_error *err)
{
    return manifest_write_at(AT_FDCWD, path, path, cases, err);
}

int golden_check_case_name(const char *name, const char *where, refenc_error *err)
{
    char file[REFENC_SAFE_NAME_MAX + 2];
    const int n = snprintf(file, sizeof file, "%s.safetensors", name != NULL ? name : "");
    if (refenc_file_name_ok(name) && n > 0 && (size_t)n < sizeof file && refenc_file_name_ok(file))
        return REFENC_OK;
    return refenc_error_set(err, REFENC_EINVAL, "%s: case name '%s' cannot be a file name (%s, "
                            "with .safetensors)", where, name != NULL ? name : "", REFENC_SAFE_NAME_RULE);
}

/* The catalogue's case `name`: its file CASES_DIR/<name>.safetensors (path,
 * checked) and its manifest entry; OUT must not be that file. */
static int catalogue_entry(json_t **entry, const char *catalogue, size_t i, const char *name,
                           const char *cases_dir, const char *out, refenc_error *err)
{
    char where[PATH_MAX + 32], file[REFENC_SAFE_NAME_MAX + 2], path[PATH_MAX];
    snprintf(where, sizeof where, "%s: cases[%zu]", catalogue, i);
    int st = golden_check_case_name(name, where, err);
    if (st == REFENC_OK)
        snprintf(file, sizeof file, "%s.safetensors", name);
    if (st == REFENC_OK)
        st = refenc_path_format(path, sizeof path, err, "%s/%s", cases_dir, file);
    if (st == REFENC_OK)
        st = refenc_refuse_same_file(out, path, "golden case", err);
    if (st == REFENC_OK)
        st = golden_manifest_entry(entry, path, file, err);
    return st;
}

int golden_manifest_for_catalogue(const char *catalogue, const char *cases_dir, const char *out,
                                  refenc_error *err)
{
    /* a regular file only, as every reader; a "cases" array of objects, each with a "case" name */
    if (refenc_refuse_same_file(out, catalogue, "catalogue", err) != REFENC_OK)
        return REFENC_EINVAL;
    json_t *cat = catalogue_load(catalogue, err);
    if (cat == NULL)
        return err ? err->status : REFENC_EINVAL;
    json_t *list = json_array();
    size_t i;
    json_t *e;
    int st = list != NULL ? REFENC_OK : refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    json_array_foreach(json_object_get(cat, "cases"), i, e) {
        json_t *entry;
        const char *name = json_string_value(json_object_get(e, "case"));
        if (st != REFENC_OK || (st = catalogue_entry(&entry, catalogue, i, name, cases_dir, out, err)) != REFENC_OK)
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
    refenc_out_dir d;
    int st = refenc_out_dir_open(&d, dir, 0, err), fd = -1;
    if (st == REFENC_OK && sub != NULL)
        st = refenc_out_dir_sub(&d, sub, &fd, err);
    if (fd >= 0)
        close(fd);
    refenc_out_dir_close(&d);
    return st;
}

/* The cases of the directory's manifest (a new reference), or a new empty
 * array when there is none yet.  Read relative to the directory, without
 * following a link and without blocking: a FIFO, a link or a directory at
 * the name is refused, with the lock released by the caller. */
static int read_cases(json_t **cases, int dirfd, const char *display, refenc_error *err)
{
    *cases = NULL;
    char *text;
    size_t n;
    int absent;
    int st = refenc_read_file_at(&text, &n, dirfd, "manifest.json", display, REFENC_MANIFEST_MAX_BYTES,
                                 &absent, err);
    if (st != REFENC_OK && absent) {
        *cases = json_array();
        return *cases ? REFENC_OK : refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    }
    if (st != REFENC_OK)
        return st;
    json_error_t jerr;
    json_t *doc = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    const json_t *list = json_object_get(doc, "cases");
    if (doc == NULL || !json_is_array(list)) {
        json_decref(doc);
        return refenc_error_set(err, REFENC_EFORMAT,
                                "%s: not a golden manifest (%s); it is left as it is", display,
                                doc == NULL ? jerr.text : "expected an object with a \"cases\" array");
    }
    *cases = json_incref((json_t *)list);
    json_decref(doc);
    return REFENC_OK;
}

/* entry in place of the entry of the same case in cases, or appended. */
static void put_entry(json_t *cases, json_t *entry)
{
    size_t i;
    json_t *e;
    json_array_foreach(cases, i, e)
        if (json_equal(json_object_get(e, "case"), json_object_get(entry, "case"))) {
            json_array_set(cases, i, entry);
            return;
        }
    json_array_append(cases, entry);
}

/* Under the lock: the manifest read first (nothing is written next to one
 * that is not a manifest), the case written, its entry read back from the
 * bytes on disk, then the manifest; a case that was new is taken back if
 * the manifest cannot be written. */
static int add_locked(const refenc_out_dir *d, int cases_fd, const golden_file *g, const char *file,
                      const char *case_path, const char *manifest, refenc_error *err)
{
    json_t *cases = NULL, *entry = NULL;
    refenc_st_file f;
    memset(&f, 0, sizeof f);
    struct stat sb;
    const int existed = fstatat(cases_fd, file, &sb, AT_SYMLINK_NOFOLLOW) == 0;
    int st = read_cases(&cases, d->fd, manifest, err);
    if (st == REFENC_OK)
        st = golden_file_write_at(g, cases_fd, file, case_path, err);
    if (st == REFENC_OK && (st = refenc_st_read_at(&f, cases_fd, file, case_path, err)) == REFENC_OK)
        st = entry_of(&entry, &f, file, err);
    if (st == REFENC_OK) {
        put_entry(cases, entry);
        if ((st = manifest_write_at(d->fd, "manifest.json", manifest, cases, err)) != REFENC_OK && !existed)
            unlinkat(cases_fd, file, 0);
    }
    refenc_st_free(&f);
    json_decref(entry);
    json_decref(cases);
    return st;
}

int golden_dir_add(const char *dir, const golden_file *g, refenc_error *err)
{
    char file[REFENC_SAFE_NAME_MAX + 2], case_path[PATH_MAX], manifest[PATH_MAX];
    int st = golden_check_case_name(g->name, dir, err);
    if (st == REFENC_OK)
        snprintf(file, sizeof file, "%s.safetensors", g->name);
    if (st == REFENC_OK)
        st = refenc_path_format(case_path, sizeof case_path, err, "%s/cases/%s", dir, file);
    if (st == REFENC_OK)
        st = refenc_path_format(manifest, sizeof manifest, err, "%s/manifest.json", dir);
    if (st != REFENC_OK)
        return st;
    /* the termination signals wait for the whole step in this thread (any
     * other thread's handler removes the temporary files: io/temporaries.h) */
    sigset_t set, saved;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGTERM);
    const int blocked = pthread_sigmask(SIG_BLOCK, &set, &saved) == 0;
    refenc_out_dir d;
    int cases_fd = -1;
    st = refenc_out_dir_open(&d, dir, 1, err);
    if (st == REFENC_OK)
        st = refenc_out_dir_sub(&d, "cases", &cases_fd, err);
    if (st == REFENC_OK)
        st = add_locked(&d, cases_fd, g, file, case_path, manifest, err);
    if (cases_fd >= 0)
        close(cases_fd);
    refenc_out_dir_close(&d);
    if (blocked)
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return st;
}
