/* The config file of `refenc run --config FILE.json`:
 *     {"model": {...}, "input": {"batch": B, "seq_len": L, "padding": [...]}}
 * (docs/cli.md lists every key).  Separate from cmd_run.c so that the
 * fuzzer (checks/fuzz/) can reach the whole reader without the program. */
#ifndef REFENC_CLI_RUN_CONFIG_H
#define REFENC_CLI_RUN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../core/config.h"
#include "../core/status.h"

/* The run's input description: "input": {"batch", "seq_len", "padding"}. */
typedef struct {
    size_t batch, seq_len;
    size_t *padding; /* (batch): trailing padding positions per item, or NULL */
    int64_t *rows;   /* (n_rows): the last layer's query rows ("rows"), or NULL */
    size_t n_rows;
    int given;       /* the file has an "input" object                         */
} run_input;

/* "rows" of an input object: a non-empty JSON array of integers, strictly
 * increasing, each in [0, L) (rows.h, docs/cli.md).  *rows is allocated
 * (the caller frees it, whatever the result); where names the object
 * ("FILE: input"), the message names where.rows and the element.
 * Errors: REFENC_EINVAL, REFENC_ENOMEM. */
int run_input_rows(int64_t **rows, size_t *n_rows, const json_t *v, size_t L, const char *where,
                   refenc_error *err);

/* 1 MiB: a config is a few hundred bytes; anything larger is not one. */
#define RUN_CONFIG_MAX_BYTES ((size_t)1 << 20)

/* Reads FILE.json (a regular file of at most RUN_CONFIG_MAX_BYTES) into a model config and an input description, and checks
 * that a forward pass on them fits the limits (refused before anything is
 * allocated).  Messages start with the path.  The caller frees in->padding
 * and in->rows, whatever the result.
 * Errors: REFENC_EIO (cannot be read, a directory, a FIFO, a device),
 * REFENC_ELIMIT (too large), REFENC_EINVAL, REFENC_ENOMEM. */
int run_config_load(refenc_config *cfg, run_input *in, const char *path, refenc_error *err);

/* The same for a document already parsed (root: any JSON value); `path`
 * names it in messages. */
int run_config_from_json(refenc_config *cfg, run_input *in, const json_t *root, const char *path,
                         refenc_error *err);

#endif
