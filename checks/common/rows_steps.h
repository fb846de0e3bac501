/* Selected query rows (ref/rows.h, input.rows) in the checks: every step of
 * a traced forward pass kept whole, by name, and the comparison of a rows
 * run's steps with the selected rows of a full run's. */
#ifndef REFENC_CHECKS_ROWS_STEPS_H
#define REFENC_CHECKS_ROWS_STEPS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <jansson.h>

#include "../../ref/core/case.h"
#include "../../ref/io/config_json.h"
#include "../../ref/tool/random_params.h"

#include "trace_steps.h"

/* The number of values of the rows run's steps (rows: R selected rows of
 * L) that differ, as bits, from the full run's at those rows: a step of
 * the same shape whole; a (B, R, W) step against (B, L, W) at rows[k], a
 * (B, H, R, L) one against (B, H, L, L).  Every step of the rows run must
 * be in the full run with a matching shape (asserted).  *compared counts
 * the values compared. */
static inline size_t rows_steps_mismatches(const trace_steps *rows_run, const trace_steps *full,
                                           const int64_t *rows, size_t R, size_t *compared)
{
    size_t bad = 0;
    *compared = 0;
    for (size_t i = 0; i < rows_run->n; i++) {
        size_t f = 0;
        while (f < full->n && strcmp(full->name[f], rows_run->name[i]) != 0)
            f++;
        cr_assert_lt(f, full->n, "step %s of the rows run is not in the full run", rows_run->name[i]);
        const size_t *rs = rows_run->shape[i], *fs = full->shape[f], nd = rows_run->ndim[i];
        cr_assert_eq(nd, full->ndim[f], "step %s: %zu dimensions, the full run's %zu", rows_run->name[i], nd,
                     full->ndim[f]);
        const double *a = rows_run->data[i], *b = full->data[f];
        if (rows_run->numel[i] == full->numel[f]) { /* a step before the rows' selection */
            for (size_t k = 0; k < rows_run->numel[i]; k++)
                bad += memcmp(&a[k], &b[k], sizeof(double)) != 0;
            *compared += rows_run->numel[i];
            continue;
        }
        /* (B, R, W) of (B, L, W), or (B, H, R, L) of (B, H, L, L) */
        const size_t qd = nd == 3 ? 1 : 2, L = fs[qd];
        cr_assert(nd == 3 || nd == 4, "step %s", rows_run->name[i]);
        cr_assert_eq(rs[qd], R, "step %s: %zu rows, %zu selected", rows_run->name[i], rs[qd], R);
        const size_t outer = nd == 3 ? rs[0] : rs[0] * rs[1], W = nd == 3 ? rs[2] : rs[3];
        for (size_t o = 0; o < outer; o++)
            for (size_t k = 0; k < R; k++)
                for (size_t w = 0; w < W; w++) {
                    const double x = a[(o * R + k) * W + w], y = b[(o * L + (size_t)rows[k]) * W + w];
                    bad += memcmp(&x, &y, sizeof x) != 0;
                }
        *compared += outer * R * W;
    }
    return bad;
}

/* Shapes and models the property is checked over (docs/cli.md's keys). */
static const char *const CONFIGS[] __attribute__((unused)) = {
    /* Pre-LN, GQA, RoPE with dynamic NTK (S = 9 > L0 = 4: the base grows with max(pos) + 1) */
    "{\"d_model\": 24, \"n_heads\": 4, \"n_kv_heads\": 2, \"d_ff\": 20, \"n_layers\": 2, \"causal\": true,"
    " \"positional\": \"rope\", \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2.0,"
    " \"max_position_embeddings\": 4}}",
    /* Post-LN, ALiBi, bidirectional, one layer */
    "{\"d_model\": 12, \"n_heads\": 3, \"d_ff\": 16, \"n_layers\": 1, \"norm\": \"post\","
    " \"positional\": \"alibi\"}",
    /* Llama's block: RMSNorm, SwiGLU, bias-free, a sliding window, Qwen3's q/k norms */
    "{\"family\": \"llama\", \"d_model\": 16, \"n_heads\": 4, \"n_kv_heads\": 1, \"head_dim\": 6,"
    " \"d_ff\": 12, \"n_layers\": 2, \"vocab_size\": 0, \"sliding_window\": 3, \"qk_norm\": \"rms\","
    " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"original_max_position_embeddings\": 8}}",
    /* T5's relative bias, unscaled scores, no final norm */
    "{\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 8, \"n_layers\": 2, \"final_norm\": false,"
    " \"relative_attention_num_buckets\": 8, \"relative_attention_max_distance\": 6,"
    " \"query_pre_attn_scalar\": 1.0}",
};
#define N_CONFIGS (sizeof CONFIGS / sizeof CONFIGS[0])

enum { NB = 2, NL = 9 };
static const int64_t ROWS[] __attribute__((unused)) = {0, 4, 5, 8};
#define NR (sizeof ROWS / sizeof ROWS[0])

/* A case of config k: seeded parameters, x N(0, 1), item 1's last two
 * positions padded, positions 3 .. 11, an additive mask for config 1. */
static inline void make_case(refenc_case *c, size_t k)
{
    refenc_error err;
    refenc_config cfg;
    json_error_t jerr;
    json_t *j = json_loads(CONFIGS[k], 0, &jerr);
    cr_assert_not_null(j, "config %zu: %s", k, jerr.text);
    cr_assert_eq(refenc_config_from_json(&cfg, j, "config", &err), REFENC_OK, "config %zu: %s", k, err.message);
    json_decref(j);
    cr_assert_eq(refenc_case_alloc(c, REFENC_COMP_ENCODER, &cfg, NB, NL, 0, 1, k == 1, &err), REFENC_OK, "%s",
                 err.message);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 24 + k);
    refenc_params_init_random(&c->params, &c->cfg, rng);
    for (size_t i = 0; i < c->x_numel; i++)
        c->x[i] = gsl_ran_gaussian(rng, 1.0);
    for (size_t l = 0; l < NL; l++)
        c->positions[l] = 3 + (int64_t)l;
    c->has_positions = 1;
    c->key_padding_mask[NL + NL - 1] = c->key_padding_mask[NL + NL - 2] = 1;
    for (size_t i = 0; c->attn_mask != NULL && i < NL * NL; i++)
        c->attn_mask[i] = gsl_ran_gaussian(rng, 1.0);
    gsl_rng_free(rng);
}

static inline void select_rows(refenc_case *c)
{
    c->R = NR;
    c->rows = malloc(sizeof ROWS);
    cr_assert_not_null(c->rows);
    memcpy(c->rows, ROWS, sizeof ROWS);
}


#endif
