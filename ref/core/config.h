/* The encoder's configuration: one struct, one validation function.
 *
 * Glossary of dimension letters (used in every shape comment in ref/):
 *   B  batch size            L  sequence length       D  model width (d_model)
 *   H  number of heads       Dh head width = D / H    F  feed-forward width (d_ff)
 *   Hkv key/value heads (n_kv_heads, divides H; g = H / Hkv query heads share one)
 *   (Dh = head_dim when the config sets it, independent of D / H; E = H * Dh)
 *   V  vocabulary size       N  number of layers      P  rows of the learned PE table (max_len)
 *   T  token types (type_vocab_size)
 */
#ifndef REFENC_CONFIG_H
#define REFENC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "rope_scaling.h"
#include "status.h"

typedef enum { REFENC_NORM_PRE = 0, REFENC_NORM_POST = 1 } refenc_norm_placement;

typedef enum {
    REFENC_ACT_RELU = 0,
    REFENC_ACT_GELU = 1,      /* exact: x * Phi(x)                              */
    REFENC_ACT_GELU_TANH = 2, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    REFENC_ACT_QUICK_GELU = 3, /* x sigmoid(1.702 x) (CLIP's quick_gelu)            */
    REFENC_ACT_SILU = 4        /* x sigmoid(x) (SiLU, swish; SwiGLU's gate)           */
} refenc_activation;

typedef enum {
    REFENC_POS_NONE = 0,
    REFENC_POS_SINUSOIDAL = 1, /* added to the input, interleaved sin/cos      */
    REFENC_POS_LEARNED = 2,    /* a (P, D) table added to the input            */
    REFENC_POS_ROPE = 3,       /* rotation of q and k in every attention       */
    REFENC_POS_ALIBI = 4       /* linear bias on the scores in every attention */
} refenc_positional;

typedef enum {
    REFENC_ROPE_HALF = 0,        /* rotate_half: pairs (j, j + Dh/2), GPT-NeoX, HF LLaMA */
    REFENC_ROPE_INTERLEAVED = 1  /* pairs (2j, 2j + 1), RoFormer, GPT-J                  */
} refenc_rope_layout;

/* Which positions index the learned PE table (positional "learned"). */
typedef enum {
    REFENC_POSIDS_INDEX = 0,  /* 0 .. L-1, or in.positions (BERT, GPT-2, CLIP)         */
    REFENC_POSIDS_ROBERTA = 1 /* per batch item from the tokens: padding_idx + 1 + the  *
                               * number of earlier non-padding tokens; padding tokens  *
                               * get padding_idx (RoBERTa's create_position_ids_...)   */
} refenc_position_ids;

/* The score a masked (query, key) pair gets (key padding, causal mask).
 * Rows with some key visible give masked keys weight exactly 0 either way;
 * they differ only on rows whose every key is masked (attention.h). */
typedef enum {
    REFENC_MASK_NEG_INF = 0,  /* -inf: a fully masked row gets weights 0           */
    REFENC_MASK_FINFO_MIN = 1 /* the most negative finite double, -DBL_MAX, as      *
                               * torch.finfo(dtype).min in HF models: a fully       *
                               * masked row gets uniform weights 1/L                */
} refenc_mask_value;

/* Which normalisation every norm of the stack computes (embedding, layers,
 * final): LayerNorm (with its bias beta) or RMSNorm (no mean, no bias;
 * rmsnorm.h).  With RMSNorm the parameters have no .bias tensors. */
typedef enum {
    REFENC_NORMTYPE_LAYERNORM = 0, /* (x - mu) / sqrt(var + eps) * gamma + beta        */
    REFENC_NORMTYPE_RMSNORM = 1    /* x / sqrt(mean(x^2) + eps) * w, or * (1 + w)      */
} refenc_norm_type;

/* The feed-forward block (glu.h): act(x W1^T + b1) W2^T + b2, or gated. */
typedef enum {
    REFENC_FFN_MLP = 0, /* act(x W1^T + b1) W2^T + b2                           */
    REFENC_FFN_GLU = 1  /* (act(x Wg^T + bg) * (x Wu^T + bu)) W2^T + b2: GeGLU with
                         * gelu / gelu_tanh, SwiGLU with silu; linear1 is (2F, D) */
} refenc_ffn_type;

/* Which rows of the gated linear1 (2F, D) are the gate, the activated half. */
typedef enum {
    REFENC_GLU_GATE_FIRST = 0, /* [gate | up]: ModernBERT's Wi, Jina's gated_layers,
                                * Llama's gate_proj stacked over up_proj      */
    REFENC_GLU_GATE_SECOND = 1 /* [up | gate]: GTE's up_gate_proj               */
} refenc_glu_gate;

/* The dtype the embedding's sqrt(D) scale is rounded to (embedding.h:
 * refenc_embedding_normalizer).  EXACT: sqrt(D) itself (the original
 * Transformer); a dtype: sqrt(D) rounded to it, as Gemma's normaliser
 * torch.tensor(hidden_size ** 0.5, dtype=model dtype) is. */
typedef enum {
    REFENC_NORMALIZER_EXACT = 0,
    REFENC_NORMALIZER_FLOAT64,
    REFENC_NORMALIZER_FLOAT32,
    REFENC_NORMALIZER_BFLOAT16,
    REFENC_NORMALIZER_FLOAT16
} refenc_normalizer_dtype;
/* Qwen3's per-head normalisation of q and k (qk_norm.h): none, or an RMSNorm
 * over head_dim on every head after the projection, before RoPE. */
typedef enum {
    REFENC_QKNORM_NONE = 0,
    REFENC_QKNORM_RMS = 1      /* q_norm, k_norm: RMSNorm (Dh), eps layer_norm_eps   */
} refenc_qk_norm_type;
/* The pooled sentence embedding, out.embedding (pooling.h): which row(s) of
 * the final output make it, then optionally divided by its L2 norm. */
typedef enum {
    REFENC_POOL_NONE = 0,      /* no pooled output (the default)                     */
    REFENC_POOL_MEAN = 1,      /* the mean over each item's non-padding tokens       */
    REFENC_POOL_CLS = 2,       /* token 0 (BERT's [CLS])                             */
    REFENC_POOL_LAST_TOKEN = 3 /* each item's last non-padding token (Qwen3-Embedding) */
} refenc_pooling;

/* A named preset (docs/families.md): the conventions of a model family, each
 * still overridable key by key.  Set by refenc_config_family (family.h). */
typedef enum {
    REFENC_FAMILY_VASWANI = 0, /* refenc's seed encoder: the defaults below        */
    REFENC_FAMILY_BERT,
    REFENC_FAMILY_ROBERTA,
    REFENC_FAMILY_DISTILBERT,
    REFENC_FAMILY_GPT2,        /* the block stack, without the LM head             */
    REFENC_FAMILY_CLIP_TEXT,
    REFENC_FAMILY_LLAMA,       /* decoder blocks as encoders: the block stack,    */
    REFENC_FAMILY_MISTRAL,     /* causal by default, without the LM head          */
    REFENC_FAMILY_QWEN2,
    REFENC_FAMILY_QWEN3,
    REFENC_FAMILY_MODERNBERT,  /* ModernBertModel: local/global layers, GeGLU       */
    REFENC_FAMILY_GEMMA3,      /* Gemma3TextModel: sandwich norms, (1 + w), 5:1     */
    REFENC_FAMILY_T5_ENCODER,  /* T5EncoderModel: relative bias, RMSNorm, no biases */
    REFENC_FAMILY_NOMIC_BERT,  /* NomicBertModel: Post-LN, RoPE, SwiGLU, no biases  */
    REFENC_FAMILY_JINA_BERT_V2, /* JinaBertModel: Post-LN, symmetric ALiBi, GeGLU    */
    REFENC_FAMILY_GTE,         /* GTE "new" NewModel: Post-LN, ntk RoPE, GeGLU      */
    REFENC_FAMILY_COUNT
} refenc_family;

typedef struct {
    size_t d_model;            /* D  */
    size_t n_heads;            /* H  */
    size_t d_ff;               /* F  */
    size_t n_layers;           /* N  */
    refenc_norm_placement norm;
    refenc_activation activation;
    double layer_norm_eps;     /* >= 0, default 1e-5                                */
    int final_norm;            /* 1: LayerNorm after the last layer (default for Pre-LN) */
    refenc_positional positional;
    refenc_rope_layout rope_layout;
    double rope_base;          /* > 1, default 10000                                */
    size_t max_len;            /* P: learned PE rows; positions must be < P         */
    double temperature;        /* tau > 0, default 1                                */
    int causal;                /* 1: query i attends to keys j <= i only            */
    size_t vocab_size;         /* V; 0: the input is x (B, L, D), no embedding      */
    int64_t padding_idx;       /* token whose row is zero at initialisation; -1: none */
    /* the embedding path and the families (docs/families.md) */
    refenc_family family;      /* the preset the config started from (metadata)    */
    int scale_embedding;       /* 1: E[token] * sqrt(D) (default); 0: E[token]      */
    refenc_normalizer_dtype embedding_normalizer_dtype; /* sqrt(D) rounded to it    */
    size_t type_vocab_size;    /* T; 0: no token-type (segment) embeddings          */
    int embedding_norm;        /* 1: LayerNorm after the embedding sum (BERT)       */
    double embedding_norm_eps; /* >= 0, its eps; defaults to layer_norm_eps         */
    refenc_position_ids position_ids;
    refenc_mask_value mask_value;
    /* the normalisation (rmsnorm.h) */
    refenc_norm_type norm_type; /* every norm of the stack; default LayerNorm      */
    int rmsnorm_offset;         /* 1: RMSNorm scales by (1 + w) (Gemma); needs RMSNorm */
    int linear_bias;            /* 0: every linear map bias-free (in_proj, out_proj,
                                 * linear1, linear2: ModernBERT, Llama); default 1  */
    int linear1_bias;           /* 0: linear1 (the FFN's first map, both halves of a
                                 * gated FFN) bias-free while linear_bias keeps the
                                 * other maps' biases (Jina-v2's gated_layers, GTE's
                                 * up_gate_proj); needs linear_bias; default 1.  Read
                                 * through refenc_config_has_linear1_bias            */
    int norm_bias;              /* 0: LayerNorm without beta (ModernBERT); default 1;
                                 * RMSNorm never has one                             */
    int skip_first_prenorm;     /* 1: layer 0's attention norm is the identity, and
                                 * layer 0 has no norm1 tensors (ModernBERT: its
                                 * embedding LayerNorm already normalises layer 0's
                                 * input); Pre-LN only; default 0                    */
    int sandwich_norm;          /* 1: each sublayer's output normalised before the
                                 * residual adds it (Gemma 2/3's post_attention and
                                 * post_feedforward norms): h = x + N1'(MHA(N1(x))),
                                 * y = h + N2'(FFN(N2(h))); Pre-LN only; default 0  */
    /* the feed-forward block (glu.h) */
    refenc_ffn_type ffn_type;   /* default MLP                                        */
    refenc_glu_gate glu_gate;   /* with GLU: which half of linear1 is activated       */
    refenc_rope_scaling rope_scaling; /* RoPE scaling, partial rotary (rope_scaling.h) */
    /* grouped-query attention (docs/families.md): 0 means the default */
    size_t n_kv_heads;          /* Hkv: key/value heads, divides H; 0: H (multi-head);
                                 * 1: multi-query.  Read through refenc_config_kv_heads */
    size_t head_dim;            /* Dh independent of D / H (Gemma); 0: D / H.
                                 * Read through refenc_config_head_dim              */
    /* Gemma 2/3's attention conventions (softcap.h, docs/families.md): 0 = off */
    double attn_logit_softcapping; /* cap > 0: s <- cap tanh(s / cap) after the
                                    * scaling, before the masks; 0: no cap        */
    double query_pre_attn_scalar;  /* S > 0: scores divided by sqrt(S) tau instead
                                    * of sqrt(Dh) tau; 0: S = Dh                   */
    /* attention windows (window.h, docs/families.md): 0 = off */
    size_t sliding_window;      /* w >= 1, causal only: query i sees keys i-w+1 .. i */
    size_t local_attention;     /* w >= 1: query i sees |i - j| <= w / 2 (ModernBERT) */
    /* local and global layers (layer_pattern.h, docs/families.md): 0 = off */
    size_t global_attn_every_n_layers; /* n >= 1: layer l global iff l % n == 0 (no
                                        * window), local otherwise; 0: every layer
                                        * takes the window and rope_base            */
    size_t sliding_window_pattern;     /* p >= 1: layer l global iff (l + 1) % p == 0
                                        * (Gemma 3; local layers rotate unscaled);
                                        * 0: off.  At most one of the two patterns  */
    double local_rope_theta;    /* > 1: RoPE base of the local layers; 0: rope_base  */
    double global_rope_theta;   /* > 1: RoPE base of the global layers; 0: rope_base */
    /* Qwen's attention (qk_norm.h, docs/families.md): 0 = off */
    int qkv_bias;               /* 1: q, k, v projections biased (in_proj_bias) while
                                 * linear_bias is 0 (Qwen2); needs linear_bias false  */
    refenc_qk_norm_type qk_norm; /* 'rms': q_norm, k_norm per head (Qwen3); 'none'    */
    /* the pooled sentence embedding (pooling.h, docs/families.md) */
    refenc_pooling pooling;     /* default NONE: no out.embedding                    */
    int pooling_normalize;      /* 1: e / max(||e||, 1e-12) (sentence-transformers'
                                 * Normalize); default 1; read only with pooling     */
    /* T5's relative position bias (relative_bias.h, docs/families.md): 0 = off */
    size_t relative_attention_num_buckets;  /* nb: buckets of the (nb, H) table,
                                             * nb / 2 per sign (T5: 32)          */
    size_t relative_attention_max_distance; /* md: offsets >= md share the last
                                             * bucket of their sign (T5: 128);
                                             * default 128, read only with nb    */
} refenc_config;

/* Documented limits.  A config or input beyond them is refused with
 * REFENC_ELIMIT before anything is allocated.  REFENC_MAX_BYTES bounds the
 * memory a model needs (parameters plus activations, in doubles). */
#define REFENC_MAX_DIM ((size_t)1 << 20)       /* D, F, L, P                        */
#define REFENC_MAX_VOCAB ((size_t)1 << 24)     /* V                                 */
#define REFENC_MAX_HEADS ((size_t)1024)        /* H                                 */
#define REFENC_MAX_LAYERS ((size_t)1024)       /* N                                 */
#define REFENC_MAX_BATCH ((size_t)1 << 16)     /* B                                 */
#define REFENC_MAX_BYTES ((size_t)1 << 32)     /* 4 GiB of parameters + activations */

/* Defaults (the "vaswani" family): D 64, H 4, F 256, N 2, Pre-LN with final
 * LayerNorm, GELU (exact), eps 1e-5, no positional information, RoPE half
 * layout with base 10000, P 512, tau 1, not causal, V 0 (input x),
 * padding_idx -1; embeddings scaled by sqrt(D), no token types, no
 * embedding LayerNorm (its eps 1e-5), positions by index, masked scores -inf;
 * every norm a LayerNorm (norm_type "layernorm", rmsnorm_offset 0). */
void refenc_config_default(refenc_config *cfg);

/* Checks every field and every combination; on the first problem returns
 * REFENC_EINVAL or REFENC_ELIMIT with a message naming the field.
 * Errors: REFENC_EINVAL (D % H != 0 without head_dim, n_kv_heads not
 *         dividing n_heads, odd Dh with RoPE, odd D with
 *         sinusoidal PE, eps < 0 or not finite, tau <= 0 or not finite,
 *         attn_logit_softcapping or query_pre_attn_scalar < 0 or not finite,
 *         sliding_window without causal, a window > REFENC_MAX_DIM,
 *         rope_base <= 1 or not finite, a zero size, an enum out of range,
 *         padding_idx outside [-1, V), rmsnorm_offset without RMSNorm,
 *         token types or the RoBERTa position
 *         rule without tokens, the RoBERTa rule without a learned table or a
 *         padding_idx), REFENC_ELIMIT (a size above its limit, or parameters
 *         that need more than REFENC_MAX_BYTES). */
int refenc_config_validate(const refenc_config *cfg, refenc_error *err);

/* As refenc_config_validate, and also checks an input of shape (B, L):
 * B, L >= 1, L <= P when the positions index a table (padding_idx + L < P
 * under the RoBERTa rule, whose largest position is padding_idx + L), and
 * that parameters plus activations fit in REFENC_MAX_BYTES (computed without
 * overflow). */
int refenc_config_validate_shape(const refenc_config *cfg, size_t B, size_t L,
                                 refenc_error *err);

/* Number of doubles the parameters need, or 0 if that overflows size_t. */
size_t refenc_config_param_count(const refenc_config *cfg);

/* Number of doubles the activations of a forward pass on (B, L) need
 * (workspace and output), or 0 if that overflows size_t. */
size_t refenc_config_workspace_count(const refenc_config *cfg, size_t B, size_t L);

/* Names as they appear in JSON configs and golden metadata. */
const char *refenc_norm_name(refenc_norm_placement v);          /* "pre", "post"               */
const char *refenc_activation_name(refenc_activation v);        /* "relu", "gelu", "gelu_tanh",
                                                                   "quick_gelu", "silu"        */
const char *refenc_positional_name(refenc_positional v);        /* "none", "sinusoidal", ...   */
const char *refenc_rope_layout_name(refenc_rope_layout v);      /* "half", "interleaved"       */
const char *refenc_position_ids_name(refenc_position_ids v);    /* "index", "roberta"          */
const char *refenc_mask_value_name(refenc_mask_value v);        /* "-inf", "finfo_min"         */
const char *refenc_family_name(refenc_family v);                /* "vaswani", "bert", ...,
                                                                   "clip-text", "llama",
                                                                   "mistral", "qwen2", "qwen3",
                                                                   "modernbert", "gemma3",
                                                                   "t5-encoder", "nomic-bert",
                                                                   "jina-bert-v2", "gte" */
const char *refenc_norm_type_name(refenc_norm_type v);          /* "layernorm", "rmsnorm"      */
const char *refenc_ffn_type_name(refenc_ffn_type v);            /* "mlp", "glu"                */
const char *refenc_glu_gate_name(refenc_glu_gate v);            /* "first", "second"           */
const char *refenc_normalizer_dtype_name(refenc_normalizer_dtype v); /* "exact", "float64",
                                                                   "float32", "bfloat16", "float16" */

/* The significand bits of the normaliser's dtype: 53, 24, 8, 11; 0 for
 * EXACT. */
unsigned refenc_normalizer_bits(refenc_normalizer_dtype v);
const char *refenc_qk_norm_name(refenc_qk_norm_type v);         /* "none", "rms"               */
const char *refenc_pooling_name(refenc_pooling v);              /* "none", "mean", "cls",
                                                                   "last_token"                */

/* Parse a name; return REFENC_EINVAL, naming `field` and listing the valid
 * names, when the name is unknown. */
int refenc_norm_parse(refenc_norm_placement *v, const char *name, const char *field, refenc_error *err);
int refenc_activation_parse(refenc_activation *v, const char *name, const char *field, refenc_error *err);
int refenc_positional_parse(refenc_positional *v, const char *name, const char *field, refenc_error *err);
int refenc_rope_layout_parse(refenc_rope_layout *v, const char *name, const char *field, refenc_error *err);
int refenc_position_ids_parse(refenc_position_ids *v, const char *name, const char *field, refenc_error *err);
int refenc_mask_value_parse(refenc_mask_value *v, const char *name, const char *field, refenc_error *err);
int refenc_family_parse(refenc_family *v, const char *name, const char *field, refenc_error *err);
int refenc_norm_type_parse(refenc_norm_type *v, const char *name, const char *field, refenc_error *err);
int refenc_ffn_type_parse(refenc_ffn_type *v, const char *name, const char *field, refenc_error *err);
int refenc_glu_gate_parse(refenc_glu_gate *v, const char *name, const char *field, refenc_error *err);
int refenc_normalizer_dtype_parse(refenc_normalizer_dtype *v, const char *name, const char *field,
                                  refenc_error *err);
int refenc_qk_norm_parse(refenc_qk_norm_type *v, const char *name, const char *field, refenc_error *err);
int refenc_pooling_parse(refenc_pooling *v, const char *name, const char *field, refenc_error *err);

/* Whether the norms have a bias (beta): LayerNorm with norm_bias. */
int refenc_config_norm_has_bias(const refenc_config *cfg);

/* Whether in_proj_bias exists: linear_bias, or qkv_bias (Qwen2). */
int refenc_config_has_qkv_bias(const refenc_config *cfg);

/* Whether linear1.bias exists: linear_bias and linear1_bias (not Jina's, GTE's). */
int refenc_config_has_linear1_bias(const refenc_config *cfg);

/* Hkv: n_kv_heads, or H when unset (0). */
size_t refenc_config_kv_heads(const refenc_config *cfg);

/* Dh: head_dim, or D / H when unset (0). */
size_t refenc_config_head_dim(const refenc_config *cfg);

/* Whether attention is plain multi-head with Dh = D / H (n_kv_heads and
 * head_dim at their defaults): what the backward passes support. */
int refenc_config_attention_is_mha(const refenc_config *cfg);

/* Rows of linear1: F, or 2F for a gated FFN (gate and up stacked). */
size_t refenc_config_ffn_rows(const refenc_config *cfg);

/* Rows of in_proj: E + 2 Hkv Dh (W_q, then W_k, then W_v, stacked; 3D for
 * plain multi-head attention), or 0 if that overflows size_t. */
size_t refenc_config_qkv_rows(const refenc_config *cfg);

/* Overflow-checked size arithmetic: return 0 and leave *r unspecified on
 * overflow, 1 otherwise. */
int refenc_size_mul(size_t *r, size_t a, size_t b);
int refenc_size_add(size_t *r, size_t a, size_t b);

#endif
