#include "config.h"

#include <math.h>
#include <string.h>

void refenc_config_default(refenc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->d_model = 64;
    cfg->n_heads = 4;
    cfg->d_ff = 256;
    cfg->n_layers = 2;
    cfg->norm = REFENC_NORM_PRE;
    cfg->activation = REFENC_ACT_GELU;
    cfg->layer_norm_eps = 1e-5;
    cfg->final_norm = 1;
    cfg->positional = REFENC_POS_NONE;
    cfg->rope_layout = REFENC_ROPE_HALF;
    cfg->rope_base = 10000.0;
    cfg->max_len = 512;
    cfg->temperature = 1.0;
    cfg->causal = 0;
    cfg->vocab_size = 0;
    cfg->padding_idx = -1;
    cfg->family = REFENC_FAMILY_VASWANI;
    cfg->scale_embedding = 1;
    cfg->type_vocab_size = 0;
    cfg->embedding_norm = 0;
    cfg->embedding_norm_eps = 1e-5;
    cfg->position_ids = REFENC_POSIDS_INDEX;
    cfg->mask_value = REFENC_MASK_NEG_INF;
    refenc_rope_scaling_default(&cfg->rope_scaling);
    cfg->norm_type = REFENC_NORMTYPE_LAYERNORM;
    cfg->rmsnorm_offset = 0;
    cfg->norm_bias = 1;
    cfg->linear_bias = 1;
    cfg->linear1_bias = 1;
    cfg->ffn_type = REFENC_FFN_MLP;
    cfg->glu_gate = REFENC_GLU_GATE_FIRST;
    cfg->pooling = REFENC_POOL_NONE;
    cfg->pooling_normalize = 1;
    cfg->relative_attention_num_buckets = 0;
    cfg->relative_attention_max_distance = 128; /* T5Config's default */
}

int refenc_config_norm_has_bias(const refenc_config *cfg)
{
    return cfg->norm_type == REFENC_NORMTYPE_LAYERNORM && cfg->norm_bias;
}

int refenc_config_has_qkv_bias(const refenc_config *cfg)
{
    return cfg->linear_bias || cfg->qkv_bias;
}

int refenc_config_has_linear1_bias(const refenc_config *cfg)
{
    return cfg->linear_bias && cfg->linear1_bias;
}

size_t refenc_config_kv_heads(const refenc_config *cfg)
{
    return cfg->n_kv_heads != 0 ? cfg->n_kv_heads : cfg->n_heads;
}

size_t refenc_config_head_dim(const refenc_config *cfg)
{
    return cfg->head_dim != 0 ? cfg->head_dim : cfg->d_model / cfg->n_heads;
}

int refenc_config_attention_is_mha(const refenc_config *cfg)
{
    return refenc_config_kv_heads(cfg) == cfg->n_heads &&
           refenc_config_head_dim(cfg) * cfg->n_heads == cfg->d_model;
}

size_t refenc_config_ffn_rows(const refenc_config *cfg)
{
    return cfg->ffn_type == REFENC_FFN_GLU ? 2 * cfg->d_ff : cfg->d_ff; /* F <= 2^20: no overflow */
}

int refenc_size_mul(size_t *r, size_t a, size_t b)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *r = a * b;
    return 1;
}

int refenc_size_add(size_t *r, size_t a, size_t b)
{
    if (b > SIZE_MAX - a)
        return 0;
    *r = a + b;
    return 1;
}

size_t refenc_config_qkv_rows(const refenc_config *c)
{
    size_t E, Ekv, R;
    const size_t Dh = refenc_config_head_dim(c);
    if (!refenc_size_mul(&E, c->n_heads, Dh) || !refenc_size_mul(&Ekv, refenc_config_kv_heads(c), Dh) ||
        !refenc_size_add(&R, E, Ekv) || !refenc_size_add(&R, R, Ekv))
        return 0;
    return R;
}

/* acc += a * b, with overflow recorded in *ok. */
static void mul_add(size_t *acc, size_t a, size_t b, int *ok)
{
    size_t t;
    if (!*ok || !refenc_size_mul(&t, a, b) || !refenc_size_add(acc, *acc, t))
        *ok = 0;
}

size_t refenc_config_param_count(const refenc_config *c)
{
    const size_t D = c->d_model, F = c->d_ff, F1 = refenc_config_ffn_rows(c);
    const size_t norm = refenc_config_norm_has_bias(c) ? 2 : 1; /* weight (and bias) */
    const size_t lb = c->linear_bias ? 1 : 0;                    /* the linears' biases */
    const size_t R = refenc_config_qkv_rows(c);                  /* E + 2 Hkv Dh, or 0 */
    size_t layer = 0, total = 0, E = 0;
    int ok = R != 0 && refenc_size_mul(&E, c->n_heads, refenc_config_head_dim(c));

    mul_add(&layer, R, D, &ok);                  /* self_attn.in_proj_weight (E + 2 Hkv Dh, D) */
    mul_add(&layer, refenc_config_has_qkv_bias(c) ? 1 : 0, R, &ok); /* self_attn.in_proj_bias (E + 2 Hkv Dh) */
    mul_add(&layer, D, E, &ok);                  /* self_attn.out_proj.weight (D, E)  */
    mul_add(&layer, lb, D, &ok);                 /* self_attn.out_proj.bias (D)       */
    mul_add(&layer, F1, D, &ok);                 /* linear1.weight (F or 2F, D)       */
    mul_add(&layer, refenc_config_has_linear1_bias(c) ? 1 : 0, F1, &ok); /* linear1.bias (F or 2F) */
    mul_add(&layer, D, F, &ok);                  /* linear2.weight (D, F)             */
    mul_add(&layer, lb, D, &ok);                 /* linear2.bias (D)                  */
    mul_add(&layer, 2 * norm, D, &ok);           /* norm1, norm2 weight (and bias) (D) */
    mul_add(&layer, c->sandwich_norm ? 2 * norm : 0, D, &ok); /* post_attn_norm, post_ffn_norm (D) */
    if (c->qk_norm == REFENC_QKNORM_RMS)
        mul_add(&layer, 2, refenc_config_head_dim(c), &ok); /* self_attn.q_norm, k_norm .weight (Dh) */
    mul_add(&total, c->n_layers, layer, &ok);
    if (c->skip_first_prenorm && ok && c->n_layers > 0)
        total -= norm * D;                       /* layer 0 without norm1 (D)          */
    mul_add(&total, c->relative_attention_num_buckets, c->n_heads, &ok); /* layers.0.self_attn.
                                                 * relative_attention_bias.weight (nb, H), layer 0 only */
    if (c->vocab_size > 0)
        mul_add(&total, c->vocab_size, D, &ok);  /* embedding.weight (V, D)           */
    mul_add(&total, c->type_vocab_size, D, &ok); /* token_type_embedding.weight (T, D) */
    if (c->positional == REFENC_POS_LEARNED)
        mul_add(&total, c->max_len, D, &ok);     /* pos_embedding.weight (P, D)       */
    if (c->embedding_norm)
        mul_add(&total, norm, D, &ok);           /* embedding_norm.weight (, .bias) (D) */
    if (c->final_norm)
        mul_add(&total, norm, D, &ok);           /* norm.weight (, norm.bias) (D)     */
    return ok ? total : 0;
}

/* Must match the buffers refenc_workspace_alloc (encoder.c) carves out. */
size_t refenc_config_workspace_count(const refenc_config *c, size_t B, size_t L)
{
    const size_t D = c->d_model, F = c->d_ff, H = c->n_heads;
    size_t BL, BLD = 0, BLE = 0, BLF = 0, BHLL = 0, BH, total = 0;
    int ok = refenc_size_mul(&BL, B, L) && refenc_size_mul(&BLD, BL, D) &&
             refenc_size_mul(&BLE, BL, H) && refenc_size_mul(&BLE, BLE, refenc_config_head_dim(c)) &&
             refenc_size_mul(&BLF, BL, F) && refenc_size_mul(&BH, B, H) &&
             refenc_size_mul(&BHLL, BH, L) && refenc_size_mul(&BHLL, BHLL, L);
    mul_add(&total, 6, BLD, &ok);   /* see refenc_workspace: 6 (B, L, D) buffers   */
    mul_add(&total, 8, BLE, &ok);   /* and attention's 8 (B, L, E), E = H Dh (mha.h) */
    mul_add(&total, c->ffn_type == REFENC_FFN_GLU ? 2 : 1, BLF, &ok); /* ffn hidden (B, L, F or 2F) */
    mul_add(&total, 1, BHLL, &ok);  /* attention weights (B, H, L, L)               */
    mul_add(&total, 1, H, &ok);     /* ALiBi slopes (H)                             */
    mul_add(&total, 1, L, &ok);     /* positions (L), int64 stored in double slots  */
    if (c->type_vocab_size > 0 || c->position_ids == REFENC_POSIDS_ROBERTA)
        mul_add(&total, B, L, &ok); /* token types or RoBERTa's position ids (B, L), int64 */
    return ok ? total : 0;
}

static int check_size(const char *field, size_t v, size_t limit, refenc_error *err)
{
    if (v == 0)
        return refenc_error_set(err, REFENC_EINVAL, "config: %s must be at least 1", field);
    if (v > limit)
        return refenc_error_set(err, REFENC_ELIMIT,
                                "config: %s = %zu exceeds the limit %zu", field, v, limit);
    return REFENC_OK;
}

/* Each dimension at least 1 and within its limit; the vocabularies within theirs. */
static int validate_sizes(const refenc_config *c, refenc_error *err)
{
    int st;
    if ((st = check_size("d_model", c->d_model, REFENC_MAX_DIM, err)) ||
        (st = check_size("n_heads", c->n_heads, REFENC_MAX_HEADS, err)) ||
        (st = check_size("d_ff", c->d_ff, REFENC_MAX_DIM, err)) ||
        (st = check_size("n_layers", c->n_layers, REFENC_MAX_LAYERS, err)) ||
        (st = check_size("max_len", c->max_len, REFENC_MAX_DIM, err)))
        return st;
    /* 0 is the default (H, D / H): an explicit 0 is refused by the reader */
    if (c->n_kv_heads > c->n_heads)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: n_kv_heads = %zu exceeds n_heads = %zu (each key/value head "
                                "serves n_heads / n_kv_heads query heads)", c->n_kv_heads, c->n_heads);
    if (c->head_dim > REFENC_MAX_DIM)
        return refenc_error_set(err, REFENC_ELIMIT, "config: head_dim = %zu exceeds the limit %zu",
                                c->head_dim, REFENC_MAX_DIM);
    if (c->vocab_size > REFENC_MAX_VOCAB)
        return refenc_error_set(err, REFENC_ELIMIT, "config: vocab_size = %zu exceeds the limit %zu",
                                c->vocab_size, REFENC_MAX_VOCAB);
    if (c->type_vocab_size > REFENC_MAX_VOCAB)
        return refenc_error_set(err, REFENC_ELIMIT,
                                "config: type_vocab_size = %zu exceeds the limit %zu",
                                c->type_vocab_size, REFENC_MAX_VOCAB);
    return REFENC_OK;
}

/* Qwen's attention keys (qk_norm.h): qkv_bias a flag that only means
 * something on bias-free linears, qk_norm one of its names. */
static int validate_qwen(const refenc_config *c, refenc_error *err)
{
    if (c->qkv_bias != 0 && c->qkv_bias != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: qkv_bias must be true or false");
    if (c->qkv_bias && c->linear_bias)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: qkv_bias (Qwen2's biased q, k, v on bias-free linears) needs "
                                "linear_bias false; with linear_bias every linear map has its bias");
    if ((unsigned)c->qk_norm > REFENC_QKNORM_RMS)
        return refenc_error_set(err, REFENC_EINVAL, "config: qk_norm is not 'none' or 'rms'");
    return REFENC_OK;
}

/* A flag of a Pre-LN layer's structure (key): 0 or 1, and set only with
 * norm 'pre' (why: what it changes that Post-LN places elsewhere). */
static int validate_pre_ln_flag(const refenc_config *c, int v, const char *key, const char *why,
                                refenc_error *err)
{
    if (v != 0 && v != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: %s must be true or false", key);
    if (v && c->norm != REFENC_NORM_PRE)
        return refenc_error_set(err, REFENC_EINVAL, "config: %s needs norm 'pre' (%s)", key, why);
    return REFENC_OK;
}

/* The norms' keys: their biases, Gemma's offset, the layer's structure
 * (Gemma 2/3's sandwich norms, ModernBERT's first layer). */
static int validate_norms(const refenc_config *c, refenc_error *err)
{
    int st;
    if (c->norm_bias != 0 && c->norm_bias != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: norm_bias must be true or false");
    if ((st = validate_pre_ln_flag(c, c->sandwich_norm, "sandwich_norm",
                                   "it adds norms on the sublayers' outputs of a Pre-LN layer, as Gemma 2 and 3 do",
                                   err)) ||
        (st = validate_pre_ln_flag(c, c->skip_first_prenorm, "skip_first_prenorm",
                                   "it drops layer 0's attention norm, which Post-LN applies after the residual",
                                   err)))
        return st;
    if (c->rmsnorm_offset != 0 && c->rmsnorm_offset != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: rmsnorm_offset must be true or false");
    if (c->rmsnorm_offset && c->norm_type != REFENC_NORMTYPE_RMSNORM)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: rmsnorm_offset (the (1 + w) scale) needs norm_type 'rmsnorm', "
                                "but norm_type is '%s'", refenc_norm_type_name(c->norm_type));
    return validate_qwen(c, err);
}

/* Each enumeration one of its values, each flag 0 or 1. */
static int validate_choices(const refenc_config *c, refenc_error *err)
{
    if ((unsigned)c->norm > REFENC_NORM_POST)
        return refenc_error_set(err, REFENC_EINVAL, "config: norm is not 'pre' or 'post'");
    if ((unsigned)c->activation > REFENC_ACT_SILU)
        return refenc_error_set(err, REFENC_EINVAL, "config: activation is not a known activation");
    if ((unsigned)c->positional > REFENC_POS_ALIBI)
        return refenc_error_set(err, REFENC_EINVAL, "config: positional is not a known scheme");
    if ((unsigned)c->rope_layout > REFENC_ROPE_INTERLEAVED)
        return refenc_error_set(err, REFENC_EINVAL, "config: rope_layout is not 'half' or 'interleaved'");
    if (c->final_norm != 0 && c->final_norm != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: final_norm must be true or false");
    if (c->causal != 0 && c->causal != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: causal must be true or false");
    if ((unsigned)c->family >= REFENC_FAMILY_COUNT)
        return refenc_error_set(err, REFENC_EINVAL, "config: family is not a known family");
    if ((unsigned)c->position_ids > REFENC_POSIDS_ROBERTA)
        return refenc_error_set(err, REFENC_EINVAL, "config: position_ids is not 'index' or 'roberta'");
    if ((unsigned)c->mask_value > REFENC_MASK_FINFO_MIN)
        return refenc_error_set(err, REFENC_EINVAL, "config: mask_value is not '-inf' or 'finfo_min'");
    if (c->scale_embedding != 0 && c->scale_embedding != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: scale_embedding must be true or false");
    if ((unsigned)c->embedding_normalizer_dtype > REFENC_NORMALIZER_FLOAT16)
        return refenc_error_set(err, REFENC_EINVAL, "config: embedding_normalizer_dtype is not a known dtype");
    if (c->embedding_normalizer_dtype != REFENC_NORMALIZER_EXACT && !(c->scale_embedding && c->vocab_size > 0))
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: embedding_normalizer_dtype '%s' needs scale_embedding and a vocabulary "
                                "(it rounds the embedding's sqrt(D) scale)",
                                refenc_normalizer_dtype_name(c->embedding_normalizer_dtype));
    if (c->embedding_norm != 0 && c->embedding_norm != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: embedding_norm must be true or false");
    if ((unsigned)c->ffn_type > REFENC_FFN_GLU)
        return refenc_error_set(err, REFENC_EINVAL, "config: ffn_type is not 'mlp' or 'glu'");
    if ((unsigned)c->glu_gate > REFENC_GLU_GATE_SECOND)
        return refenc_error_set(err, REFENC_EINVAL, "config: glu_gate is not 'first' or 'second'");
    if ((unsigned)c->pooling > REFENC_POOL_LAST_TOKEN)
        return refenc_error_set(err, REFENC_EINVAL, "config: pooling is not 'none', 'mean', 'cls' or 'last_token'");
    if (c->pooling_normalize != 0 && c->pooling_normalize != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: pooling_normalize must be true or false");
    if ((unsigned)c->norm_type > REFENC_NORMTYPE_RMSNORM)
        return refenc_error_set(err, REFENC_EINVAL, "config: norm_type is not 'layernorm' or 'rmsnorm'");
    if (c->linear_bias != 0 && c->linear_bias != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: linear_bias must be true or false");
    if (c->linear1_bias != 0 && c->linear1_bias != 1)
        return refenc_error_set(err, REFENC_EINVAL, "config: linear1_bias must be true or false");
    if (!c->linear1_bias && !c->linear_bias)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: linear1_bias false (linear1 bias-free beside biased linear maps: "
                                "Jina-v2, GTE) needs linear_bias true; with linear_bias false every linear "
                                "map is bias-free already");
    return validate_norms(c, err);
}


/* The widths the heads and the positional schemes need: Dh = D/H whole,
 * RoPE's Dh and the sinusoidal D even (they work on pairs). */
static int validate_widths(const refenc_config *c, refenc_error *err)
{
    if (c->head_dim == 0 && c->d_model % c->n_heads != 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: d_model = %zu is not divisible by n_heads = %zu",
                                c->d_model, c->n_heads);
    if (c->n_heads % refenc_config_kv_heads(c) != 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: n_kv_heads = %zu does not divide n_heads = %zu (grouped-query "
                                "attention shares each key/value head among a whole group)",
                                refenc_config_kv_heads(c), c->n_heads);
    if (c->positional == REFENC_POS_ROPE && refenc_config_head_dim(c) % 2 != 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: positional 'rope' needs an even head width, "
                                "but %s = %zu", c->head_dim != 0 ? "head_dim" : "d_model / n_heads",
                                refenc_config_head_dim(c));
    if (c->positional == REFENC_POS_SINUSOIDAL && c->d_model % 2 != 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: positional 'sinusoidal' needs an even d_model, got %zu",
                                c->d_model);
    return REFENC_OK;
}

/* The real hyper-parameters: finite, and in the range their formula needs. */
static int validate_reals(const refenc_config *c, refenc_error *err)
{
    if (!isfinite(c->layer_norm_eps) || c->layer_norm_eps < 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: layer_norm_eps must be finite and >= 0, got %.17g",
                                c->layer_norm_eps);
    if (!isfinite(c->embedding_norm_eps) || c->embedding_norm_eps < 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: embedding_norm_eps must be finite and >= 0, got %.17g",
                                c->embedding_norm_eps);
    if (!isfinite(c->temperature) || !(c->temperature > 0))
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: temperature must be finite and > 0, got %.17g",
                                c->temperature);
    /* 0 is off (the JSON reader refuses an explicit 0 by name) */
    if (!isfinite(c->attn_logit_softcapping) || c->attn_logit_softcapping < 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: attn_logit_softcapping must be finite and > 0 (0: off), got %.17g",
                                c->attn_logit_softcapping);
    if (!isfinite(c->query_pre_attn_scalar) || c->query_pre_attn_scalar < 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: query_pre_attn_scalar must be finite and > 0 (0: head_dim), got %.17g",
                                c->query_pre_attn_scalar);
    if (!isfinite(c->rope_base) || !(c->rope_base > 1))
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: rope_base must be finite and > 1, got %.17g", c->rope_base);
    return REFENC_OK;
}

/* The layer pattern (layer_pattern.h): a period above the layer limit is a
 * mistake; the two bases are RoPE bases (finite, > 1) and mean nothing
 * without the pattern that says which layers are local. */
static int validate_layer_pattern(const refenc_config *c, refenc_error *err)
{
    if (c->global_attn_every_n_layers > REFENC_MAX_LAYERS)
        return refenc_error_set(err, REFENC_ELIMIT, "config: global_attn_every_n_layers = %zu exceeds %zu",
                                c->global_attn_every_n_layers, REFENC_MAX_LAYERS);
    if (c->sliding_window_pattern > REFENC_MAX_LAYERS)
        return refenc_error_set(err, REFENC_ELIMIT, "config: sliding_window_pattern = %zu exceeds %zu",
                                c->sliding_window_pattern, REFENC_MAX_LAYERS);
    if (c->global_attn_every_n_layers != 0 && c->sliding_window_pattern != 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: global_attn_every_n_layers (ModernBERT: layer 0 global) and "
                                "sliding_window_pattern (Gemma 3: layer p - 1 global) are two rules for "
                                "the same pattern; give one");
    if (c->sliding_window_pattern != 0 && c->rope_scaling.partial_rotary_factor != 1)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: partial_rotary_factor with sliding_window_pattern is not supported "
                                "(the local layers rotate unscaled and Gemma 3 rotates every coordinate)");
    const char *name[2] = {"local_rope_theta", "global_rope_theta"};
    const double theta[2] = {c->local_rope_theta, c->global_rope_theta};
    for (int k = 0; k < 2; k++) {
        if (theta[k] != 0 && (!isfinite(theta[k]) || !(theta[k] > 1)))
            return refenc_error_set(err, REFENC_EINVAL,
                                    "config: %s must be finite and > 1 (0: rope_base), got %.17g",
                                    name[k], theta[k]);
        if (theta[k] != 0 && c->global_attn_every_n_layers == 0 && c->sliding_window_pattern == 0)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "config: %s needs global_attn_every_n_layers or sliding_window_pattern "
                                    "(which layers are local)",
                                    name[k]);
    }
    return REFENC_OK;
}

/* The attention windows (window.h): 0 is off; a window wider than any
 * sequence refenc accepts is a mistake, not a no-op; Hugging Face's
 * sliding_window is the causal models' (Mistral, Qwen2, Gemma), and
 * local_attention is the bidirectional window. */
static int validate_windows(const refenc_config *c, refenc_error *err)
{
    if (c->sliding_window > REFENC_MAX_DIM)
        return refenc_error_set(err, REFENC_ELIMIT, "config: sliding_window = %zu exceeds %zu",
                                c->sliding_window, REFENC_MAX_DIM);
    if (c->local_attention > REFENC_MAX_DIM)
        return refenc_error_set(err, REFENC_ELIMIT, "config: local_attention = %zu exceeds %zu",
                                c->local_attention, REFENC_MAX_DIM);
    if (c->sliding_window > 0 && !c->causal)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: sliding_window = %zu needs causal: true (the bidirectional "
                                "window is local_attention)", c->sliding_window);
    return validate_layer_pattern(c, err);
}

/* T5's relative position bias (relative_bucket.h, relative_bias.h): nb = 0
 * is off; otherwise nb even (nb / 2 buckets per sign; an odd nb leaves a row
 * no offset reads) and >= 4 (max_exact = nb / 4 >= 1: log(r / max_exact));
 * max_distance > max_exact (log(md / max_exact) > 0) and small enough for the
 * exact integer bucket (md^(nb/2 - nb/4) < 2^64).  The buckets are T5's
 * bidirectional ones: not with causal attention; the bias is the model's
 * only position signal: positional 'none' (ALiBi and RoPE are other relative
 * schemes; no model stacks them). */
/* 1 when md^k < 2^64 (relative_bucket.h's comparisons are exact) */
static int power_fits(size_t md, size_t k)
{
    uint64_t p = 1;
    for (size_t i = 0; i < k; i++) {
        if (p > UINT64_MAX / md)
            return 0;
        p *= md;
    }
    return 1;
}

static int validate_relative_bias(const refenc_config *c, refenc_error *err)
{
    const size_t nb = c->relative_attention_num_buckets, md = c->relative_attention_max_distance;
    if (nb == 0)
        return REFENC_OK;
    if (nb > REFENC_MAX_DIM)
        return refenc_error_set(err, REFENC_ELIMIT, "config: relative_attention_num_buckets = %zu exceeds %zu",
                                nb, REFENC_MAX_DIM);
    if (nb < 4 || nb % 2 != 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: relative_attention_num_buckets = %zu must be even and at least 4 "
                                "(nb / 2 buckets per sign, max_exact = nb / 4 >= 1), or 0 for none", nb);
    if (md <= nb / 4)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: relative_attention_max_distance = %zu must exceed max_exact = "
                                "relative_attention_num_buckets / 4 = %zu", md, nb / 4);
    if (!power_fits(md, nb / 2 - nb / 4))
        return refenc_error_set(err, REFENC_ELIMIT,
                                "config: relative_attention_max_distance = %zu to the power nb/2 - nb/4 = %zu "
                                "reaches 2^64 (the exact bucket compares integers below it)", md, nb / 2 - nb / 4);
    if (c->causal)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: relative_attention_num_buckets: the bidirectional buckets of T5's "
                                "encoder need causal: false");
    if (c->positional != REFENC_POS_NONE)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: relative_attention_num_buckets: T5's relative bias is the model's "
                                "position signal; positional must be 'none', not '%s'",
                                refenc_positional_name(c->positional));
    return REFENC_OK;
}

/* The token side: padding_idx a row of the table (or -1), token types only
 * with tokens, RoBERTa's positions inside the learned PE table. */
static int validate_tokens(const refenc_config *c, refenc_error *err)
{
    if (c->padding_idx < -1 || (c->padding_idx >= 0 && (uint64_t)c->padding_idx >= c->vocab_size))
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: padding_idx = %lld must be -1 or in [0, vocab_size = %zu)",
                                (long long)c->padding_idx, c->vocab_size);
    if (c->type_vocab_size > 0 && c->vocab_size == 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: type_vocab_size = %zu needs token inputs (vocab_size > 0)",
                                c->type_vocab_size);
    if (c->position_ids != REFENC_POSIDS_ROBERTA)
        return REFENC_OK;
    if (c->positional != REFENC_POS_LEARNED)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: position_ids 'roberta' index the learned PE table, but "
                                "positional is '%s'", refenc_positional_name(c->positional));
    if (c->padding_idx < 0)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: position_ids 'roberta' count from padding_idx, which is -1 "
                                "(needs token inputs and a padding token)");
    if ((uint64_t)c->padding_idx + 1 >= c->max_len)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: position_ids 'roberta' start at padding_idx + 1 = %lld, "
                                "outside the max_len = %zu rows of the learned PE table",
                                (long long)c->padding_idx + 1, c->max_len);
    return REFENC_OK;
}

/* The checks run in this order and the first failure is the message (the
 * parameter count needs the sizes checked first). */
int refenc_config_validate(const refenc_config *c, refenc_error *err)
{
    int st;
    if ((st = validate_sizes(c, err)) || (st = validate_choices(c, err)) ||
        (st = validate_widths(c, err)) || (st = validate_reals(c, err)) ||
        (st = validate_windows(c, err)) || (st = validate_tokens(c, err)) ||
        (st = validate_relative_bias(c, err)) ||
        (st = refenc_rope_scaling_validate(&c->rope_scaling, c->positional == REFENC_POS_ROPE,
                                           refenc_config_head_dim(c), err)))
        return st;
    size_t params = refenc_config_param_count(c), bytes;
    if (params == 0 || !refenc_size_mul(&bytes, params, sizeof(double)) || bytes > REFENC_MAX_BYTES)
        return refenc_error_set(err, REFENC_ELIMIT,
                                "config: the parameters need more than the limit of %zu bytes "
                                "(d_model, d_ff, n_layers, vocab_size and max_len are too large together)",
                                REFENC_MAX_BYTES);
    return REFENC_OK;
}

int refenc_config_validate_shape(const refenc_config *c, size_t B, size_t L, refenc_error *err)
{
    int st = refenc_config_validate(c, err);
    if (st)
        return st;
    if ((st = check_size("input batch (B)", B, REFENC_MAX_BATCH, err)) ||
        (st = check_size("input seq_len (L)", L, REFENC_MAX_DIM, err)))
        return st;
    if (c->positional == REFENC_POS_LEARNED && c->position_ids == REFENC_POSIDS_INDEX &&
        L > c->max_len)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: seq_len = %zu exceeds max_len = %zu, the rows of the "
                                "learned PE table", L, c->max_len);
    /* validated: 0 <= padding_idx < max_len - 1 <= 2^20 */
    if (c->position_ids == REFENC_POSIDS_ROBERTA && (size_t)c->padding_idx + L >= c->max_len)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: seq_len = %zu with position_ids 'roberta' reaches position "
                                "padding_idx + seq_len = %lld, outside the max_len = %zu rows of the "
                                "learned PE table", L, (long long)c->padding_idx + (long long)L,
                                c->max_len);

    size_t params = refenc_config_param_count(c), work = refenc_config_workspace_count(c, B, L);
    size_t total, bytes;
    if (work == 0 || !refenc_size_add(&total, params, work) ||
        !refenc_size_mul(&bytes, total, sizeof(double)) || bytes > REFENC_MAX_BYTES)
        return refenc_error_set(err, REFENC_ELIMIT,
                                "config: a forward pass on batch %zu x seq_len %zu needs more than "
                                "the limit of %zu bytes", B, L, REFENC_MAX_BYTES);
    return REFENC_OK;
}

/* ---- names ---------------------------------------------------------------- */

static const char *const norm_names[] = {"pre", "post"};
static const char *const act_names[] = {"relu", "gelu", "gelu_tanh", "quick_gelu", "silu"};
static const char *const pos_names[] = {"none", "sinusoidal", "learned", "rope", "alibi"};
static const char *const layout_names[] = {"half", "interleaved"};
static const char *const posids_names[] = {"index", "roberta"};
static const char *const mask_names[] = {"-inf", "finfo_min"};
static const char *const norm_type_names[] = {"layernorm", "rmsnorm"};
static const char *const ffn_type_names[] = {"mlp", "glu"};
static const char *const glu_gate_names[] = {"first", "second"};
static const char *const normalizer_names[] = {"exact", "float64", "float32", "bfloat16", "float16"};
static const char *const qk_norm_names[] = {"none", "rms"};
static const char *const pooling_names[] = {"none", "mean", "cls", "last_token"};
static const char *const family_names[REFENC_FAMILY_COUNT] = {
    "vaswani", "bert", "roberta", "distilbert", "gpt2", "clip-text", "llama", "mistral", "qwen2", "qwen3",
    "modernbert", "gemma3", "t5-encoder", "nomic-bert", "jina-bert-v2", "gte"};

#define NAME_OF(table, v) ((unsigned)(v) < sizeof table / sizeof table[0] ? table[v] : "?")

const char *refenc_norm_name(refenc_norm_placement v) { return NAME_OF(norm_names, v); }
const char *refenc_activation_name(refenc_activation v) { return NAME_OF(act_names, v); }
const char *refenc_positional_name(refenc_positional v) { return NAME_OF(pos_names, v); }
const char *refenc_rope_layout_name(refenc_rope_layout v) { return NAME_OF(layout_names, v); }
const char *refenc_position_ids_name(refenc_position_ids v) { return NAME_OF(posids_names, v); }
const char *refenc_mask_value_name(refenc_mask_value v) { return NAME_OF(mask_names, v); }
const char *refenc_family_name(refenc_family v) { return NAME_OF(family_names, v); }
const char *refenc_norm_type_name(refenc_norm_type v) { return NAME_OF(norm_type_names, v); }
const char *refenc_ffn_type_name(refenc_ffn_type v) { return NAME_OF(ffn_type_names, v); }
const char *refenc_glu_gate_name(refenc_glu_gate v) { return NAME_OF(glu_gate_names, v); }
const char *refenc_normalizer_dtype_name(refenc_normalizer_dtype v) { return NAME_OF(normalizer_names, v); }

unsigned refenc_normalizer_bits(refenc_normalizer_dtype v)
{
    static const unsigned bits[] = {0, 53, 24, 8, 11}; /* exact, float64, float32, bfloat16, float16 */
    return (unsigned)v < sizeof bits / sizeof bits[0] ? bits[v] : 0;
}
const char *refenc_qk_norm_name(refenc_qk_norm_type v) { return NAME_OF(qk_norm_names, v); }
const char *refenc_pooling_name(refenc_pooling v) { return NAME_OF(pooling_names, v); }

static int parse_name(int *v, const char *const *names, size_t n, const char *name,
                      const char *field, refenc_error *err)
{
    char list[256] = "";
    for (size_t i = 0; i < n; i++) {
        if (strcmp(name, names[i]) == 0) {
            *v = (int)i;
            return REFENC_OK;
        }
        strncat(list, i ? ", '" : "'", sizeof list - strlen(list) - 1);
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        strncat(list, "'", sizeof list - strlen(list) - 1);
    }
    /* field is the caller's full location (e.g. "FILE: model.norm"): no prefix */
    return refenc_error_set(err, REFENC_EINVAL, "%s: unknown name '%s' (expected one of %s)",
                            field, name, list);
}

#define PARSE_ENUM(fn, type, table)                                                    \
    int fn(type *v, const char *name, const char *field, refenc_error *err)            \
    {                                                                                  \
        int i = 0, st = parse_name(&i, table, sizeof table / sizeof table[0], name,    \
                                   field, err);                                        \
        if (st == REFENC_OK)                                                           \
            *v = (type)i;                                                              \
        return st;                                                                     \
    }

PARSE_ENUM(refenc_norm_parse, refenc_norm_placement, norm_names)
PARSE_ENUM(refenc_activation_parse, refenc_activation, act_names)
PARSE_ENUM(refenc_positional_parse, refenc_positional, pos_names)
PARSE_ENUM(refenc_rope_layout_parse, refenc_rope_layout, layout_names)
PARSE_ENUM(refenc_position_ids_parse, refenc_position_ids, posids_names)
PARSE_ENUM(refenc_mask_value_parse, refenc_mask_value, mask_names)
PARSE_ENUM(refenc_family_parse, refenc_family, family_names)
PARSE_ENUM(refenc_norm_type_parse, refenc_norm_type, norm_type_names)
PARSE_ENUM(refenc_ffn_type_parse, refenc_ffn_type, ffn_type_names)
PARSE_ENUM(refenc_glu_gate_parse, refenc_glu_gate, glu_gate_names)
PARSE_ENUM(refenc_normalizer_dtype_parse, refenc_normalizer_dtype, normalizer_names)
PARSE_ENUM(refenc_qk_norm_parse, refenc_qk_norm_type, qk_norm_names)
PARSE_ENUM(refenc_pooling_parse, refenc_pooling, pooling_names)
