#include "input.h"

#include <math.h>

/* Positions are integers that convert exactly to double. */
#define MAX_POSITION ((int64_t)1 << 53)

/* Tokens when the model has a vocabulary (each in [0, V)), x otherwise. */
static int validate_tokens(const refenc_input *in, const refenc_config *cfg, refenc_error *err)
{
    const size_t B = in->B, L = in->L;
    if (cfg->vocab_size == 0) {
        if (in->x == NULL)
            return refenc_error_set(err, REFENC_EINVAL, "input: in.x is required (vocab_size = 0)");
        if (in->tokens != NULL)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "input: in.tokens is given but vocab_size = 0 expects in.x");
        return REFENC_OK;
    }
    if (in->tokens == NULL)
        return refenc_error_set(err, REFENC_EINVAL,
                                "input: in.tokens is required (vocab_size = %zu)", cfg->vocab_size);
    if (in->x != NULL)
        return refenc_error_set(err, REFENC_EINVAL,
                                "input: in.x is given but vocab_size = %zu expects in.tokens",
                                cfg->vocab_size);
    for (size_t i = 0; i < B * L; i++)
        if (in->tokens[i] < 0 || (uint64_t)in->tokens[i] >= cfg->vocab_size)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "input: in.tokens[%zu][%zu] = %lld is outside [0, vocab_size = %zu)",
                                    i / L, i % L, (long long)in->tokens[i], cfg->vocab_size);
    return REFENC_OK;
}

/* Token types (optional): only with a token-type table, each in [0, T). */
static int validate_token_types(const refenc_input *in, const refenc_config *cfg, refenc_error *err)
{
    const size_t B = in->B, L = in->L;
    if (in->token_types == NULL)
        return REFENC_OK;
    if (cfg->type_vocab_size == 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "input: in.token_type_ids is given but type_vocab_size = 0");
    for (size_t i = 0; i < B * L; i++)
        if (in->token_types[i] < 0 || (uint64_t)in->token_types[i] >= cfg->type_vocab_size)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "input: in.token_type_ids[%zu][%zu] = %lld is outside "
                                    "[0, type_vocab_size = %zu)", i / L, i % L,
                                    (long long)in->token_types[i], cfg->type_vocab_size);
    return REFENC_OK;
}

/* Positions (optional): not with RoBERTa's derived ones; each a row of the
 * learned table, or below 2^53 (exact in double) for the other schemes. */
static int validate_positions(const refenc_input *in, const refenc_config *cfg, refenc_error *err)
{
    if (in->positions != NULL && cfg->position_ids == REFENC_POSIDS_ROBERTA)
        return refenc_error_set(err, REFENC_EINVAL,
                                "input: in.positions is given but position_ids 'roberta' derives the "
                                "positions from in.tokens");
    if (in->positions == NULL)
        return REFENC_OK;
    const int64_t limit = cfg->positional == REFENC_POS_LEARNED ? (int64_t)cfg->max_len : MAX_POSITION;
    for (size_t l = 0; l < in->L; l++)
        if (in->positions[l] < 0 || in->positions[l] >= limit)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "input: in.positions[%zu] = %lld is outside [0, %lld)%s",
                                    l, (long long)in->positions[l], (long long)limit,
                                    cfg->positional == REFENC_POS_LEARNED
                                        ? " (the rows of the learned PE table, max_len)" : "");
    return REFENC_OK;
}

/* With a pooling (pooling.h): every item has a token that is not padding
 * (a mean over no token is 0 / 0, and no token is the last); cls reads
 * token 0, which must not be padding (a padded row is don't-care); a token
 * the pooling reads must see a key (a row that every key's mask removes is
 * don't-care: undefined in the implementations). */
static int validate_pooling(const refenc_input *in, const refenc_config *cfg, refenc_error *err)
{
    const size_t B = in->B, L = in->L;
    const uint8_t *m = in->key_padding_mask;
    if (cfg->pooling == REFENC_POOL_NONE || m == NULL)
        return REFENC_OK;
    for (size_t b = 0; b < B; b++) {
        size_t n = 0;
        for (size_t l = 0; l < L; l++)
            n += m[b * L + l] == 0;
        if (n == 0)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "input: in.key_padding_mask[%zu] pads every token, but pooling '%s' "
                                    "needs a token that is not padding", b, refenc_pooling_name(cfg->pooling));
        if (cfg->pooling == REFENC_POOL_CLS && m[b * L] != 0)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "input: in.key_padding_mask[%zu][0] = 1: pooling 'cls' reads token 0, "
                                    "which is padding (left padding: use 'last_token' or 'mean')", b);
    }
    return REFENC_OK;
}

/* Under a pooling, a token that is not padding whose attn_mask row removes
 * every key it could see (j <= i when causal, j not padding). */
static int validate_pooled_rows_live(const refenc_input *in, const refenc_config *cfg, refenc_error *err)
{
    const size_t B = in->B, L = in->L;
    const uint8_t *m = in->key_padding_mask;
    if (cfg->pooling == REFENC_POOL_NONE || in->attn_mask == NULL)
        return REFENC_OK;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L; i++) {
            int sees = 0;
            for (size_t j = 0; j < L && !sees; j++)
                sees = !(m && m[b * L + j]) && !(cfg->causal && j > i) && in->attn_mask[i * L + j] != -INFINITY;
            if (!sees && !(m && m[b * L + i]))
                return refenc_error_set(err, REFENC_EINVAL,
                                        "input: in.attn_mask[%zu] removes every key of token %zu of item "
                                        "%zu, which pooling '%s' reads", i, i, b,
                                        refenc_pooling_name(cfg->pooling));
        }
    return REFENC_OK;
}

size_t refenc_input_rows(const refenc_input *in)
{
    return in->rows != NULL ? in->R : in->L;
}

int refenc_rows_validate(const int64_t *rows, size_t R, size_t L, const char *where, refenc_error *err)
{
    if (R == 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "%s: empty; expected at least one query row in [0, seq_len = %zu)", where, L);
    for (size_t r = 0; r < R; r++) {
        if (rows[r] < 0 || (uint64_t)rows[r] >= L)
            return refenc_error_set(err, REFENC_EINVAL, "%s[%zu] = %lld is outside [0, seq_len = %zu)", where,
                                    r, (long long)rows[r], L);
        if (r > 0 && rows[r] <= rows[r - 1])
            return refenc_error_set(err, REFENC_EINVAL,
                                    "%s[%zu] = %lld %s the row before it (%lld, element %zu): the rows must be "
                                    "strictly increasing", where, r, (long long)rows[r],
                                    rows[r] == rows[r - 1] ? "repeats" : "is below", (long long)rows[r - 1], r - 1);
    }
    return REFENC_OK;
}

/* Selected rows: valid, and not under a pooling, which reads every row of
 * the output (a mean over the selected rows is not the model's embedding). */
static int validate_rows(const refenc_input *in, const refenc_config *cfg, refenc_error *err)
{
    if (in->rows == NULL)
        return REFENC_OK;
    int st = refenc_rows_validate(in->rows, in->R, in->L, "input: in.rows", err);
    if (st == REFENC_OK && cfg->pooling != REFENC_POOL_NONE)
        st = refenc_error_set(err, REFENC_EINVAL,
                              "input: in.rows selects query rows, but pooling '%s' reads every row of the "
                              "output: compute the full sequence (no rows) for a pooled embedding",
                              refenc_pooling_name(cfg->pooling));
    return st;
}

/* The checks run in this order and the first failure is the message. */
int refenc_input_validate(const refenc_input *in, const refenc_config *cfg, refenc_error *err)
{
    int st = refenc_config_validate_shape(cfg, in->B, in->L, err);
    if (st || (st = validate_tokens(in, cfg, err)) || (st = validate_token_types(in, cfg, err)))
        return st;
    const size_t B = in->B, L = in->L;
    if (in->key_padding_mask != NULL)
        for (size_t i = 0; i < B * L; i++)
            if (in->key_padding_mask[i] > 1)
                return refenc_error_set(err, REFENC_EINVAL,
                                        "input: in.key_padding_mask[%zu][%zu] = %u is not 0 or 1",
                                        i / L, i % L, (unsigned)in->key_padding_mask[i]);
    if ((st = validate_positions(in, cfg, err)))
        return st;
    if (in->attn_mask != NULL)
        for (size_t i = 0; i < L * L; i++)
            if (isnan(in->attn_mask[i]) || in->attn_mask[i] == INFINITY)
                return refenc_error_set(err, REFENC_EINVAL,
                                        "input: in.attn_mask[%zu][%zu] = %g: only finite values "
                                        "and -inf are allowed", i / L, i % L, in->attn_mask[i]);
    if ((st = validate_pooling(in, cfg, err)) || (st = validate_rows(in, cfg, err)))
        return st;
    return validate_pooled_rows_live(in, cfg, err);
}
