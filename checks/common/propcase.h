/* Random configurations, parameters and inputs for the property suites
 * (checks/properties/), and small helpers they share: permutations, running
 * the encoder with a trace that keeps every layer's attention weights.
 *
 * Every case is drawn from a test_rng() stream, so a failure replays from
 * the seed it prints.  Widths are chosen so that both powers of two and
 * other widths occur (even / odd case index), the activation and the norm
 * placement cycle with the case index so that each one is covered. */
#ifndef REFENC_PROPCASE_H
#define REFENC_PROPCASE_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "../../ref/refenc.h"

/* What a property needs from its random cases. */
typedef struct {
    refenc_positional positional; /* scheme to use                                  */
    int causal;                   /* causal mask                                    */
    size_t max_layers;            /* N drawn in 1 .. max_layers                      */
    size_t max_len;               /* L drawn in 1 .. max_len (<= 64)                 */
    size_t min_len;               /* and at least min_len                            */
    size_t max_batch;             /* B drawn in 1 .. max_batch (<= 3)                */
    int padding;                  /* 1: a random key padding mask on half the cases  */
    int norm;                     /* -1: cycle Pre/Post; else that placement         */
    size_t min_d_model;           /* D at least this (widths are redrawn)            */
} prop_opts;

/* Defaults: no positions, not causal, N <= 2, L <= 64, B <= 3, padding on,
 * norm placement cycling, any D >= 1. */
void prop_opts_default(prop_opts *o);

/* One random case: config, parameters, input x and key padding mask. */
typedef struct {
    refenc_config cfg;
    size_t B, L;
    refenc_params p;
    double *x;          /* (B, L, D), or NULL with tokens */
    uint8_t *pad;       /* (B, L) or NULL          */
    int64_t *tokens;    /* (B, L) or NULL (prop_case_tokens) */
    int64_t *types;     /* (B, L) or NULL          */
    char desc[320];     /* the case, for messages */
} prop_case;

/* Draws case number `index` (the index fixes the activation, the norm
 * placement and whether D is a power of two; the activations ReLU, GELU,
 * GELU-tanh and quick GELU in turn).  Aborts the test on error. */
void prop_case_random(prop_case *c, gsl_rng *r, size_t index, const prop_opts *o);
void prop_case_free(prop_case *c);

/* Turns a case into token inputs through the families' embedding path:
 * V in 3 .. 20 with padding_idx 0 (the token at padded positions), and with
 * the case index: T = index % 3 token types, the sqrt(D) scale on odd
 * index / 3, the embedding LayerNorm unless index % 4 == 3 (eps 1e-12, 1e-5
 * or 2.5e-3), mask_value finfo_min on odd indices.  Redraws the
 * parameters; x is freed.  Aborts the test on error. */
void prop_case_tokens(prop_case *c, gsl_rng *r, size_t index);

/* Redraws the parameters (from r) after the test changed the config, and
 * refreshes the description.  Aborts the test on error. */
void prop_case_redraw(prop_case *c, gsl_rng *r);

/* Refreshes the description after the test changed the config. */
void prop_case_describe(prop_case *c);

/* perm: a uniformly random permutation of 0 .. n-1 (gsl_ran_shuffle). */
void prop_random_permutation(size_t *perm, size_t n, gsl_rng *r);

/* 1 if perm is the identity or the reversal (which ALiBi's |i - j| cannot see). */
int prop_perm_is_trivial(const size_t *perm, size_t n);

/* What the encoder emitted: the output and each layer's attention weights. */
typedef struct {
    size_t n_layers, BHLL;
    double **weights;   /* (N) of (B, H, L, L) */
    double **layer_out; /* (N) of (B, L, D)    */
} prop_capture;

/* Runs refenc_encoder_forward on (B, L) with its own workspace; y: (B, L, D).
 * cap may be NULL.  Aborts the test if the encoder returns an error. */
void prop_encoder_run(double *y, prop_capture *cap, const refenc_params *p,
                      const refenc_config *cfg, const refenc_input *in);
void prop_capture_free(prop_capture *cap);

/* Allocation that aborts the test on failure; zeroed. */
void *prop_calloc(size_t n, size_t size);

/* For bitwise properties: the number of i with !(a[i] == b[i]); buf (if
 * not NULL) receives the seed and the first such i with both values in %a
 * and %.17g, for the failure message. */
size_t prop_count_unequal(const double *a, const double *b, size_t n, char *buf, size_t len);

#endif
