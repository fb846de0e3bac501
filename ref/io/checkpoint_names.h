/* Hugging Face checkpoints of the encoder families (docs/families.md): each
 * family's parameter names and layouts, mapped to refenc's (params.h), and a
 * loader that turns such a safetensors file, as the family's code saves it,
 * into refenc_params.
 *
 * A family's table lists, for every refenc tensor, the checkpoint tensor(s) it
 * comes from, with "{i}" standing for the layer index, and how:
 *   copy       the same layout (nn.Linear's (out, in), nn.Embedding's (V, D),
 *              LayerNorm's (D));
 *   transpose  GPT-2's Conv1D stores W as (in, out) and computes x W + b:
 *              refenc's (out, in) is its transpose (c_attn (D, 3D) becomes
 *              in_proj_weight (3D, D), its columns [0, D) the query's rows);
 *   q, k, v    BERT, RoBERTa, DistilBERT and CLIP keep separate query, key and
 *              value projections (D, D) and (D): they are the row blocks
 *              [0, D), [D, 2D), [2D, 3D) of in_proj_weight and in_proj_bias.
 *              Under grouped-query attention (Llama, Mistral, Qwen) q_proj
 *              has H Dh rows and k_proj, v_proj Hkv Dh rows each: the blocks
 *              [0, E), [E, E + Ekv), [E + Ekv, E + 2 Ekv), E = H Dh, Ekv =
 *              Hkv Dh (params.h's in_proj layout);
 *   gate, up   Llama's gate_proj and up_proj (F, D): the halves of the gated
 *              linear1 (2F, D), the gate the half glu_gate names (the
 *              families' preset: first, rows [0, F)).
 * The vaswani family's names are refenc's own (nn.TransformerEncoder's).
 *
 * Names may carry the family's model prefix ("bert.", "roberta.",
 * "distilbert.", "transformer.", "text_model.", "model." for Llama, Mistral
 * and Qwen as their *ForCausalLM save them): a file whose tensors have it
 * is read through it, and its tensors outside it (task heads, the pooler of
 * a task model, the other tower of a CLIPModel) are ignored and counted.
 * Inside, the family's buffers and pooler (embeddings.position_ids, GPT-2's
 * attn.bias and attn.masked_bias masks, BERT's pooler, the rotary_emb.inv_freq
 * of older Llama checkpoints) are ignored too; any other tensor is an error.
 * BERT, RoBERTa, DistilBERT, GPT-2 and CLIP have no grouped-query attention
 * (a config with n_kv_heads or head_dim is refused for them). */
#ifndef REFENC_CHECKPOINT_NAMES_H
#define REFENC_CHECKPOINT_NAMES_H

#include <stddef.h>

#include "../core/config.h"
#include "../core/params.h"
#include "../core/status.h"
#include "safetensors.h"

typedef enum {
    REFENC_CK_COPY = 0,
    REFENC_CK_TRANSPOSE = 1, /* Conv1D (in, out) -> (out, in)              */
    REFENC_CK_Q = 2,         /* row block 0 of in_proj_weight / _bias      */
    REFENC_CK_K = 3,         /* row block 1                                */
    REFENC_CK_V = 4,         /* row block 2                                */
    REFENC_CK_GATE = 5,      /* the gate half of a gated linear1 (2F rows) */
    REFENC_CK_UP = 6         /* its other half                             */
} refenc_ck_layout;

/* One row of a family's table. */
typedef struct {
    const char *checkpoint; /* e.g. "encoder.layer.{i}.attention.self.query.weight" */
    const char *refenc;     /* e.g. "layers.{i}.self_attn.in_proj_weight"          */
    refenc_ck_layout layout;
} refenc_ck_entry;

/* The family's table (n rows) and its model prefix ("" for vaswani), or NULL
 * for an unknown family. */
const refenc_ck_entry *refenc_checkpoint_table(refenc_family family, size_t *n,
                                               const char **prefix);

/* What a load did. */
typedef struct {
    const char *prefix;      /* the prefix the names were read under ("" if none) */
    size_t mapped;           /* checkpoint tensors read into the parameters        */
    size_t ignored_outside;  /* tensors outside the prefix (heads, other tower)   */
    size_t ignored_buffers;  /* the family's buffers and pooler, inside it        */
} refenc_ck_report;

/* Fills p, allocated for cfg (refenc_params_alloc), from the checkpoint f
 * of cfg->family, converting every value exactly (F64, F32, F16, BF16).
 * Every parameter of p must come from the file, and every tensor of the file
 * (under the prefix, but for the ignored ones) must be a parameter of p:
 * a missing tensor, one of another shape (the message gives both), one of
 * an integer dtype, or one this config has no place for is an error naming
 * it.  *problems, when problems is not NULL, receives every problem, one per
 * line (malloc'ed, NULL when there is none; err holds the first, with the
 * count).  rep (may be NULL) says what was read and what ignored.
 * Errors: REFENC_EFORMAT (the file does not fit), REFENC_EINVAL (an unknown
 * family), REFENC_ENOMEM.  On error p's values are unspecified. */
int refenc_params_from_checkpoint(refenc_params *p, const refenc_config *cfg,
                                  const refenc_st_file *f, refenc_ck_report *rep,
                                  char **problems, refenc_error *err);

#endif
