/* A golden case in memory: which component it exercises, its config, its
 * inputs and parameters.  Reading one from a file is io/case_file.h; running
 * the reference on it is tool/run_case.h; the oracle's run is oracle.h.
 *
 * Components and their tensors (docs/golden-format.md is the contract):
 *   encoder        in.x (B,L,D) F32 or in.tokens (B,L) I64, [in.key_padding_mask (B,L) BOOL],
 *                  [in.positions (L) I64], [in.attn_mask (L,L)],
 *                  in.token_type_ids (B,L) I64 when type_vocab_size > 0;
 *                  parameters under nn.TransformerEncoder's state_dict names
 *                  (layers.{i}.self_attn.in_proj_weight, ..., norm.weight) plus
 *                  embedding.weight, token_type_embedding.weight, pos_embedding.weight,
 *                  embedding_norm.weight, embedding_norm.bias;
 *                  outputs: every trace step of refenc_encoder_forward.
 *   attention      in.x (B,L,D), masks, positions; nn.MultiheadAttention's names
 *                  in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias;
 *                  outputs weights (B,H,L,L), output (B,L,D).
 *   ffn            in.x (B,L,D); linear1.weight, linear1.bias, linear2.weight,
 *                  linear2.bias; output (B,L,D).
 *   layernorm      in.x (B,L,D); nn.LayerNorm's weight, bias; output (B,L,D).
 *   softmax        in.x (B,L) logits (may hold -inf); output (B,L), over the last axis.
 *   activation     in.x (B,L); output (B,L).
 *   sinusoidal_pe  in.positions (L); output (L,D).
 *   rope           in.x (B,H,L,Dh), in.positions (L); output (B,H,L,Dh).
 *   alibi          in.positions (L); slopes (H), bias (H,L,L).
 * Output names in files are "out." + the names above. */
#ifndef REFENC_CASE_H
#define REFENC_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "input.h"
#include "params.h"
#include "status.h"

typedef enum {
    REFENC_COMP_ENCODER = 0,
    REFENC_COMP_ATTENTION,
    REFENC_COMP_FFN,
    REFENC_COMP_LAYERNORM,
    REFENC_COMP_SOFTMAX,
    REFENC_COMP_ACTIVATION,
    REFENC_COMP_SINUSOIDAL_PE,
    REFENC_COMP_ROPE,
    REFENC_COMP_ALIBI,
    REFENC_COMP_COUNT
} refenc_component;

const char *refenc_component_name(refenc_component c);
int refenc_component_parse(refenc_component *c, const char *name);

typedef struct {
    char name[128];
    refenc_component component;
    refenc_config cfg;        /* for components, the fields they use; n_layers 1      */
    size_t B, L;              /* the input's leading dimensions (see above)          */
    refenc_params params;     /* a whole encoder's parameters; components use layer 0 */
    double *x;                /* in.x, or NULL                                        */
    size_t x_numel;
    int64_t *tokens;          /* in.tokens (B, L), or NULL                            */
    int64_t *token_types;     /* in.token_type_ids (B, L), with tokens when T > 0     */
    uint8_t *key_padding_mask;/* (B, L), or NULL                                      */
    int64_t *positions;       /* (L); always set (0..L-1 when the file has none)     */
    int has_positions;        /* in.positions is part of the case                    */
    double *attn_mask;        /* (L, L), or NULL                                      */
    int64_t *rows;            /* in.rows (R): the last layer's query rows, or NULL    */
    size_t R;                 /* their number (0 without rows)                        */
} refenc_case;

/* The file name of a parameter of the encoder's tensor table in a case of
 * this component ("layers.0.norm1.weight" is "weight" in a layernorm case),
 * or NULL if the component does not use it. */
const char *refenc_case_param_name(refenc_component c, const char *encoder_name);

/* Allocates a case's arrays for component, cfg and shape (B, L); zeroed,
 * positions 0..L-1; token types (zero) with the tokens when T > 0.  Errors: REFENC_EINVAL, REFENC_ELIMIT, REFENC_ENOMEM. */
int refenc_case_alloc(refenc_case *c, refenc_component component, const refenc_config *cfg,
                      size_t B, size_t L, int with_tokens, int with_mask, int with_attn_mask,
                      refenc_error *err);
void refenc_case_free(refenc_case *c);

/* Frees the inputs (x, tokens, token types, masks, positions) and zeroes
 * the case, leaving its parameters alone: for a copy of a case that shares
 * another's parameters (ref/golden/alt.c). */
void refenc_case_free_inputs(refenc_case *c);

/* The case's inputs as the encoder takes them (refenc_encoder_forward); no
 * positions under the RoBERTa rule, which derives them from the tokens. */
refenc_input refenc_case_input(const refenc_case *c);

/* Checks the inputs of a case (tokens and token types in range, masks 0/1,
 * positions in range and absent under RoBERTa's rule, attn_mask without
 * NaN/+inf).  Errors: REFENC_EINVAL. */
int refenc_case_validate(const refenc_case *c, refenc_error *err);

#endif
