#ifndef REFENC_PARAMS_H
#define REFENC_PARAMS_H

#include <stddef.h>

#include "config.h"
#include "status.h"

/* Parameters of one encoder layer: views into refenc_params.block, in
 * nn.TransformerEncoderLayer's layouts. */
typedef struct {
    double *in_proj_weight;  /* (3D, D)  self_attn.in_proj_weight  */
    double *in_proj_bias;    /* (3D)     self_attn.in_proj_bias    */
    double *out_proj_weight; /* (D, D)   self_attn.out_proj.weight */
    double *out_proj_bias;   /* (D)      self_attn.out_proj.bias   */
    double *linear1_weight;  /* (F, D)   linear1.weight; (2F, D) gated: gate and up rows */
    double *linear1_bias;    /* (F)      linear1.bias;   (2F) gated */
    double *linear2_weight;  /* (D, F)   linear2.weight            */
    double *linear2_bias;    /* (D)      linear2.bias              */
    double *norm1_weight;    /* (D)      norm1.weight (gamma); NULL: norm1 is the identity
                              *          (layer 0 under skip_first_prenorm) */
    double *norm1_bias;      /* (D)      norm1.bias (beta)         */
    double *norm2_weight;    /* (D)      norm2.weight              */
    double *norm2_bias;      /* (D)      norm2.bias                */
    double *q_norm_weight;   /* (Dh)     self_attn.q_norm.weight (qk_norm 'rms'), else NULL */
    double *k_norm_weight;   /* (Dh)     self_attn.k_norm.weight (qk_norm 'rms'), else NULL */
    double *post_attn_norm_weight, *post_attn_norm_bias; /* (D) post_attn_norm.weight, .bias  */
    double *post_ffn_norm_weight, *post_ffn_norm_bias;   /* (D) post_ffn_norm.weight, .bias:  *
                              * sandwich_norm only (the biases: LayerNorm with norm_bias), else NULL */
    double *relative_attention_bias; /* (nb, H) self_attn.relative_attention_bias.weight:
                              * layer 0 only, shared by every layer (T5); else NULL */
} refenc_layer_params;

#define REFENC_TENSOR_NAME_MAX 64

/* A named view of one parameter tensor. */
typedef struct {
    char name[REFENC_TENSOR_NAME_MAX]; /* PyTorch state_dict name, e.g. "layers.0.linear1.weight" */
    double *data;
    size_t ndim;                       /* 1 or 2 */
    size_t shape[2];
    size_t size;                       /* shape[0] * shape[1] (or shape[0]) */
} refenc_tensor;

/* All parameters of an encoder: every value lives in one allocation
 * (block); the pointers below and the tensor table are views into it.
 * Names (docs/architecture.md):
 *   embedding.weight (V, D)           when vocab_size > 0 (nn.Embedding)
 *   token_type_embedding.weight (T, D) when type_vocab_size > 0
 *   pos_embedding.weight (P, D)       when positional = learned
 *   embedding_norm.weight, .bias (D)  when embedding_norm
 *   layers.{i}.self_attn.in_proj_weight ... layers.{i}.norm2.bias
 *     (with qk_norm, self_attn.q_norm.weight and self_attn.k_norm.weight (Dh)
 *     after self_attn.out_proj; no layers.0.norm1.* under skip_first_prenorm;
 *     with sandwich_norm, post_attn_norm.weight (, .bias) and post_ffn_norm.weight
 *     (, .bias) (D) after norm2; with relative_attention_num_buckets,
 *     layers.0.self_attn.relative_attention_bias.weight (nb, H) after them,
 *     in layer 0 only: HF T5 stores it in its first block, shared by all)
 *   norm.weight, norm.bias (D)        when final_norm (nn.TransformerEncoder.norm)
 * The tensor table lists them in this order, layer by layer in the order of
 * refenc_layer_params. */
typedef struct {
    double *block;
    size_t n_values;
    double *embedding;          /* (V, D) or NULL */
    double *token_type_embedding; /* (T, D) or NULL */
    double *pos_embedding;      /* (P, D) or NULL */
    double *embedding_norm_weight; /* (D) or NULL */
    double *embedding_norm_bias;   /* (D) or NULL */
    size_t n_layers;
    refenc_layer_params *layers; /* (N) */
    double *norm_weight;        /* (D) or NULL */
    double *norm_bias;          /* (D) or NULL */
    size_t n_tensors;
    refenc_tensor *tensors;
} refenc_params;

/* Allocates zeroed parameters for a valid config.
 * Errors: REFENC_EINVAL / REFENC_ELIMIT (the config does not validate),
 *         REFENC_ENOMEM.  On error *p is left empty (safe to free). */
int refenc_params_alloc(refenc_params *p, const refenc_config *cfg, refenc_error *err);
void refenc_params_free(refenc_params *p);

/* The tensor with this name, or NULL. */
refenc_tensor *refenc_params_find(const refenc_params *p, const char *name);

#endif
