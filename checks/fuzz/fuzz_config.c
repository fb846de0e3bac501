/* libFuzzer target: the JSON config readers on any bytes, parsed as jansson
 * parses a config file (json_loadb with JSON_REJECT_DUPLICATES):
 *   - refenc_config_from_json on the document (a model object), and
 *   - run_config_from_json, the whole `refenc run --config` file reader
 *     (ref/io/run_config.c): model, input and the limits of a forward pass.
 *
 * Properties, beyond the sanitizers':
 *   - on error: REFENC_EINVAL, REFENC_ELIMIT or REFENC_ENOMEM, and one clean
 *     message line that starts with the name given;
 *   - an accepted model passes refenc_config_validate, and reads back the same
 *     through refenc_config_to_json;
 *   - an accepted run config fits the limits: the batch and sequence length
 *     are in range, the padding within the sequence, and the parameters plus
 *     the activations of a forward pass within REFENC_MAX_BYTES (so `refenc
 *     run` never tries to allocate more). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../ref/io/run_config.h"
#include "../../ref/core/config.h"
#include "../../ref/io/config_json.h"
#include "fuzz_check.h"

static int same_config(const refenc_config *a, const refenc_config *b)
{
    return a->d_model == b->d_model && a->n_heads == b->n_heads && a->d_ff == b->d_ff &&
           a->n_layers == b->n_layers && a->norm == b->norm && a->activation == b->activation &&
           memcmp(&a->layer_norm_eps, &b->layer_norm_eps, sizeof(double)) == 0 &&
           a->final_norm == b->final_norm && a->positional == b->positional &&
           a->rope_layout == b->rope_layout &&
           memcmp(&a->rope_base, &b->rope_base, sizeof(double)) == 0 && a->max_len == b->max_len &&
           memcmp(&a->temperature, &b->temperature, sizeof(double)) == 0 && a->causal == b->causal &&
           a->vocab_size == b->vocab_size && a->padding_idx == b->padding_idx;
}

static void check_error(int st, const refenc_error *err, const char *prefix)
{
    FUZZ_CHECK(st == REFENC_EINVAL || st == REFENC_ELIMIT || st == REFENC_ENOMEM, "status %d", st);
    FUZZ_CHECK(err->status == st, "err.status %d, returned %d", err->status, st);
    FUZZ_CHECK(strncmp(err->message, prefix, strlen(prefix)) == 0, "message: %s", err->message);
    FUZZ_CHECK(fuzz_message_ok(err->message), "message not one clean line: %s", err->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return 0;

    refenc_config cfg;
    refenc_error err;
    refenc_error_clear(&err);
    int st = refenc_config_from_json(&cfg, root, "fuzz", &err);
    if (st != REFENC_OK) {
        check_error(st, &err, "fuzz");
    } else {
        FUZZ_CHECK(refenc_config_validate(&cfg, &err) == REFENC_OK, "accepted, then: %s", err.message);
        json_t *back = refenc_config_to_json(&cfg);
        refenc_config again;
        FUZZ_CHECK(back != NULL && refenc_config_from_json(&again, back, "back", &err) == REFENC_OK,
                   "the config does not read back: %s", err.message);
        FUZZ_CHECK(same_config(&cfg, &again), "the config reads back different");
        json_decref(back);
    }

    run_input in;
    refenc_error_clear(&err);
    st = run_config_from_json(&cfg, &in, root, "fuzz.json", &err);
    if (st != REFENC_OK) {
        check_error(st, &err, "fuzz.json: ");
    } else {
        FUZZ_CHECK(in.batch >= 1 && in.batch <= REFENC_MAX_BATCH, "batch %zu", in.batch);
        FUZZ_CHECK(in.seq_len >= 1 && in.seq_len <= REFENC_MAX_DIM, "seq_len %zu", in.seq_len);
        for (size_t b = 0; in.padding != NULL && b < in.batch; b++)
            FUZZ_CHECK(in.padding[b] <= in.seq_len, "padding[%zu] = %zu", b, in.padding[b]);
        const size_t params = refenc_config_param_count(&cfg);
        const size_t work = refenc_config_workspace_count(&cfg, in.batch, in.seq_len);
        FUZZ_CHECK(params > 0 && work > 0 && params + work >= params &&
                       (params + work) <= REFENC_MAX_BYTES / sizeof(double),
                   "accepted a forward pass of %zu + %zu doubles", params, work);
        FUZZ_CHECK(refenc_config_validate_shape(&cfg, in.batch, in.seq_len, &err) == REFENC_OK,
                   "accepted, then: %s", err.message);
    }
    free(in.padding);
    free(in.rows);
    json_decref(root);
    return 0;
}
