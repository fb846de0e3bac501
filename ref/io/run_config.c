#include "run_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/input.h"
#include "config_json.h"
#include "file_read.h"

/* The keys of "input" (the model's are refenc_config_from_json's). */
static const char *const input_keys[] = {"batch", "seq_len", "padding", "rows", NULL};

int run_input_rows(int64_t **rows, size_t *n_rows, const json_t *v, size_t L, const char *where,
                   refenc_error *err)
{
    char field[1100];
    *rows = NULL;
    *n_rows = 0;
    snprintf(field, sizeof field, "%s.rows", where);
    if (!json_is_array(v))
        return refenc_error_set(err, REFENC_EINVAL, "%s: expected an array of query rows (integers in "
                                "[0, seq_len = %zu), strictly increasing)", field, L);
    const size_t R = json_array_size(v);
    *rows = malloc((R ? R : 1) * sizeof **rows);
    if (*rows == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", field);
    int st = REFENC_OK;
    for (size_t r = 0; st == REFENC_OK && r < R; r++) {
        const json_t *e = json_array_get(v, r);
        if (!json_is_integer(e))
            st = refenc_error_set(err, REFENC_EINVAL, "%s[%zu]: expected an integer in [0, seq_len = %zu)",
                                  field, r, L);
        else
            (*rows)[r] = (int64_t)json_integer_value(e);
    }
    if (st == REFENC_OK)
        st = refenc_rows_validate(*rows, R, L, field, err);
    if (st != REFENC_OK) { /* nothing kept: the caller frees only what a success hands it */
        free(*rows);
        *rows = NULL;
        return st;
    }
    *n_rows = R;
    return REFENC_OK;
}

static int read_input_spec(run_input *in, const json_t *obj, const char *where, refenc_error *err)
{
    int st;
    in->batch = 2;
    in->seq_len = 8;
    in->padding = NULL;
    in->rows = NULL;
    in->n_rows = 0;
    in->given = obj != NULL;
    if (obj == NULL)
        return REFENC_OK;
    if (!json_is_object(obj))
        return refenc_error_set(err, REFENC_EINVAL, "%s: expected a JSON object", where);
    if ((st = refenc_json_check_keys(obj, input_keys, where, err)) ||
        (st = refenc_json_get_size(&in->batch, obj, "batch", where, err)) ||
        (st = refenc_json_get_size(&in->seq_len, obj, "seq_len", where, err)))
        return st;
    if (in->batch == 0 || in->batch > REFENC_MAX_BATCH)
        return refenc_error_set(err, in->batch ? REFENC_ELIMIT : REFENC_EINVAL,
                                "%s.batch: %zu is outside [1, %zu]", where, in->batch, REFENC_MAX_BATCH);
    if (in->seq_len == 0 || in->seq_len > REFENC_MAX_DIM)
        return refenc_error_set(err, in->seq_len ? REFENC_ELIMIT : REFENC_EINVAL,
                                "%s.seq_len: %zu is outside [1, %zu]", where, in->seq_len, REFENC_MAX_DIM);

    const json_t *rows = json_object_get(obj, "rows");
    if (rows != NULL && (st = run_input_rows(&in->rows, &in->n_rows, rows, in->seq_len, where, err)))
        return st;
    const json_t *pad = json_object_get(obj, "padding");
    if (pad == NULL)
        return REFENC_OK;
    if (!json_is_array(pad) || json_array_size(pad) != in->batch)
        return refenc_error_set(err, REFENC_EINVAL,
                                "%s.padding: expected an array of %zu integers (one per batch item)",
                                where, in->batch);
    in->padding = calloc(in->batch, sizeof *in->padding);
    if (in->padding == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s.padding: out of memory", where);
    for (size_t b = 0; b < in->batch; b++) {
        const json_t *v = json_array_get(pad, b);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > in->seq_len)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "%s.padding[%zu]: expected an integer in [0, seq_len = %zu]",
                                    where, b, in->seq_len);
        in->padding[b] = (size_t)json_integer_value(v);
    }
    return REFENC_OK;
}

/* A pooling needs a token that is not padding in every item (pooling.h):
 * said here with the file and the field, before the forward pass. */
static int check_pooled_padding(const refenc_config *cfg, const run_input *in, const char *path,
                                refenc_error *err)
{
    for (size_t b = 0; cfg->pooling != REFENC_POOL_NONE && in->padding != NULL && b < in->batch; b++)
        if (in->padding[b] == in->seq_len)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "%s: input.padding[%zu] = %zu pads every token, but model.pooling '%s' "
                                    "needs a token that is not padding", path, b, in->padding[b],
                                    refenc_pooling_name(cfg->pooling));
    return REFENC_OK;
}

/* The top level holds "model" and "input" only.  (refenc_json_check_keys
 * would name the key "FILE.key", which reads as a file name.) */
static int check_top_keys(const json_t *root, const char *path, refenc_error *err)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)root, key, value) {
        (void)value;
        if (strcmp(key, "model") != 0 && strcmp(key, "input") != 0)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "%s: %s: unknown top-level key (known keys: model, input)",
                                    path, key);
    }
    return REFENC_OK;
}

int run_config_from_json(refenc_config *cfg, run_input *in, const json_t *root, const char *path,
                         refenc_error *err)
{
    char where[1024];
    int st;

    in->padding = NULL;
    in->rows = NULL;
    if (!json_is_object(root))
        return refenc_error_set(err, REFENC_EINVAL, "%s: the top level must be a JSON object", path);
    if ((st = check_top_keys(root, path, err)) != REFENC_OK)
        return st;
    const json_t *model = json_object_get(root, "model");
    snprintf(where, sizeof where, "%s: model", path);
    if (model == NULL)
        st = refenc_error_set(err, REFENC_EINVAL, "%s: the key \"model\" is required", path);
    else
        st = refenc_config_from_json(cfg, model, where, err);
    if (st == REFENC_OK) {
        snprintf(where, sizeof where, "%s: input", path);
        st = read_input_spec(in, json_object_get(root, "input"), where, err);
    }
    if (st == REFENC_OK) {
        st = refenc_config_validate_shape(cfg, in->batch, in->seq_len, err);
        if (st) { /* "config: <field> ..." becomes "FILE: <field> ..." */
            char msg[REFENC_ERRMSG_MAX];
            const char *rest = strncmp(err->message, "config: ", 8) == 0 ? err->message + 8
                                                                        : err->message;
            snprintf(msg, sizeof msg, "%s", rest);
            refenc_error_set(err, st, "%s: %s", path, msg);
        }
    }
    if (st == REFENC_OK)
        st = check_pooled_padding(cfg, in, path, err);
    if (st == REFENC_OK && in->rows != NULL && cfg->pooling != REFENC_POOL_NONE)
        st = refenc_error_set(err, REFENC_EINVAL,
                              "%s: input.rows selects query rows, but model.pooling '%s' reads every row of "
                              "the output: compute the full sequence (no rows) for a pooled embedding",
                              path, refenc_pooling_name(cfg->pooling));
    return st;
}

int run_config_load(refenc_config *cfg, run_input *in, const char *path, refenc_error *err)
{
    json_error_t jerr;
    char *text;
    size_t n;

    in->padding = NULL;
    in->rows = NULL;
    /* a regular file only: a FIFO or a device would block jansson's read or
     * feed it forever; a directory reads as an empty file */
    int st = refenc_read_file(&text, &n, path, RUN_CONFIG_MAX_BYTES, err);
    if (st)
        return st;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (root == NULL) {
        if (jerr.line < 0)
            return refenc_error_set(err, REFENC_EINVAL, "%s: %s", path, jerr.text);
        return refenc_error_set(err, REFENC_EINVAL, "%s: line %d, column %d (byte %d): %s",
                                path, jerr.line, jerr.column, jerr.position, jerr.text);
    }
    st = run_config_from_json(cfg, in, root, path, err);
    json_decref(root);
    return st;
}
