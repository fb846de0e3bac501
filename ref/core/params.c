#include "params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends a tensor view of `rows` x `cols` (cols 0: a vector) at *cursor. */
static double *add_tensor(refenc_params *p, double **cursor, const char *name,
                          size_t rows, size_t cols)
{
    refenc_tensor *t = &p->tensors[p->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->data = *cursor;
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->size = cols ? rows * cols : rows; /* no overflow: bounded by the validated total */
    *cursor += t->size;
    return t->data;
}

static double *add_layer_tensor(refenc_params *p, double **cursor, size_t layer,
                                const char *suffix, size_t rows, size_t cols)
{
    char name[REFENC_TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "layers.%zu.%s", layer, suffix);
    return add_tensor(p, cursor, name, rows, cols);
}

/* Layer i's norm `name`: its weight (D), and its bias (D) when bias. */
static void add_layer_norm(refenc_params *p, double **cur, size_t i, const char *name, size_t D, int bias,
                           double **weight, double **bias_out)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, "%s.weight", name);
    *weight = add_layer_tensor(p, cur, i, suffix, D, 0);
    if (bias) {
        snprintf(suffix, sizeof suffix, "%s.bias", name);
        *bias_out = add_layer_tensor(p, cur, i, suffix, D, 0);
    }
}

/* Layer i's tensors, in the order of docs/architecture.md; the norms' biases
 * only under LayerNorm; no norm1 in layer 0 under skip_first_prenorm. */
static void add_layer(refenc_params *p, double **cur, size_t i, const refenc_config *cfg)
{
    const size_t D = cfg->d_model, F = cfg->d_ff, F1 = refenc_config_ffn_rows(cfg);
    const int bias = refenc_config_norm_has_bias(cfg);
    refenc_layer_params *lp = &p->layers[i];
    const size_t R = refenc_config_qkv_rows(cfg), E = cfg->n_heads * refenc_config_head_dim(cfg);
    lp->in_proj_weight = add_layer_tensor(p, cur, i, "self_attn.in_proj_weight", R, D); /* 3D for MHA */
    if (refenc_config_has_qkv_bias(cfg)) /* linear_bias, or Qwen2's qkv_bias */
        lp->in_proj_bias = add_layer_tensor(p, cur, i, "self_attn.in_proj_bias", R, 0);
    lp->out_proj_weight = add_layer_tensor(p, cur, i, "self_attn.out_proj.weight", D, E);
    if (cfg->linear_bias)
        lp->out_proj_bias = add_layer_tensor(p, cur, i, "self_attn.out_proj.bias", D, 0);
    if (cfg->qk_norm == REFENC_QKNORM_RMS) { /* Qwen3: one (Dh) weight each, shared by the heads */
        lp->q_norm_weight = add_layer_tensor(p, cur, i, "self_attn.q_norm.weight", refenc_config_head_dim(cfg), 0);
        lp->k_norm_weight = add_layer_tensor(p, cur, i, "self_attn.k_norm.weight", refenc_config_head_dim(cfg), 0);
    }
    if (i == 0 && cfg->relative_attention_num_buckets > 0) /* T5: layer 0's, shared by every layer */
        lp->relative_attention_bias = add_layer_tensor(p, cur, i, "self_attn.relative_attention_bias.weight",
                                                       cfg->relative_attention_num_buckets, cfg->n_heads);
    lp->linear1_weight = add_layer_tensor(p, cur, i, "linear1.weight", F1, D); /* GLU: gate and up */
    if (refenc_config_has_linear1_bias(cfg)) /* linear_bias, but not Jina's or GTE's linear1 */
        lp->linear1_bias = add_layer_tensor(p, cur, i, "linear1.bias", F1, 0);
    lp->linear2_weight = add_layer_tensor(p, cur, i, "linear2.weight", D, F);
    if (cfg->linear_bias)
        lp->linear2_bias = add_layer_tensor(p, cur, i, "linear2.bias", D, 0);
    if (i > 0 || !cfg->skip_first_prenorm) /* ModernBERT's layer 0 has none */
        add_layer_norm(p, cur, i, "norm1", D, bias, &lp->norm1_weight, &lp->norm1_bias);
    add_layer_norm(p, cur, i, "norm2", D, bias, &lp->norm2_weight, &lp->norm2_bias);
    if (cfg->sandwich_norm) { /* Gemma 2/3's norms of the sublayers' outputs */
        add_layer_norm(p, cur, i, "post_attn_norm", D, bias, &lp->post_attn_norm_weight, &lp->post_attn_norm_bias);
        add_layer_norm(p, cur, i, "post_ffn_norm", D, bias, &lp->post_ffn_norm_weight, &lp->post_ffn_norm_bias);
    }
}

int refenc_params_alloc(refenc_params *p, const refenc_config *cfg, refenc_error *err)
{
    memset(p, 0, sizeof *p);
    int st = refenc_config_validate(cfg, err);
    if (st)
        return st;

    const size_t D = cfg->d_model, N = cfg->n_layers;
    const size_t n_values = refenc_config_param_count(cfg); /* > 0: validated */
    const size_t max_tensors = 18 * N + 8; /* 12 a layer, 14 with q_norm, k_norm, 18 sandwiched; T5's bias */
    const int bias = refenc_config_norm_has_bias(cfg); /* RMSNorm has no beta; nor LayerNorm without norm_bias */

    p->block = calloc(n_values, sizeof(double));
    p->layers = calloc(N, sizeof *p->layers);
    p->tensors = calloc(max_tensors, sizeof *p->tensors);
    if (p->block == NULL || p->layers == NULL || p->tensors == NULL) {
        refenc_params_free(p);
        return refenc_error_set(err, REFENC_ENOMEM,
                                "parameters: cannot allocate %zu values", n_values);
    }
    p->n_values = n_values;
    p->n_layers = N;

    double *cur = p->block;
    if (cfg->vocab_size > 0)
        p->embedding = add_tensor(p, &cur, "embedding.weight", cfg->vocab_size, D);
    if (cfg->type_vocab_size > 0)
        p->token_type_embedding = add_tensor(p, &cur, "token_type_embedding.weight",
                                             cfg->type_vocab_size, D);
    if (cfg->positional == REFENC_POS_LEARNED)
        p->pos_embedding = add_tensor(p, &cur, "pos_embedding.weight", cfg->max_len, D);
    if (cfg->embedding_norm) {
        p->embedding_norm_weight = add_tensor(p, &cur, "embedding_norm.weight", D, 0);
        if (bias)
            p->embedding_norm_bias = add_tensor(p, &cur, "embedding_norm.bias", D, 0);
    }
    for (size_t i = 0; i < N; i++)
        add_layer(p, &cur, i, cfg);
    if (cfg->final_norm) {
        p->norm_weight = add_tensor(p, &cur, "norm.weight", D, 0);
        if (bias)
            p->norm_bias = add_tensor(p, &cur, "norm.bias", D, 0);
    }
    if ((size_t)(cur - p->block) != n_values) { /* internal invariant: the count matches the views */
        refenc_params_free(p);
        return refenc_error_set(err, REFENC_EINVAL, "parameters: internal size mismatch");
    }
    return REFENC_OK;
}

void refenc_params_free(refenc_params *p)
{
    if (p == NULL)
        return;
    free(p->block);
    free(p->layers);
    free(p->tensors);
    memset(p, 0, sizeof *p);
}

refenc_tensor *refenc_params_find(const refenc_params *p, const char *name)
{
    for (size_t i = 0; i < p->n_tensors; i++)
        if (strcmp(p->tensors[i].name, name) == 0)
            return &p->tensors[i];
    return NULL;
}
