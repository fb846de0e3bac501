/* The family presets (family.h); sources in docs/families.md. */
#include "family.h"

/* The sizes and conventions of one family's base model. */
typedef struct {
    size_t D, H, F, N, V, P, T;
    refenc_norm_placement norm;
    refenc_activation act;
    double eps;
    refenc_position_ids position_ids;
    int64_t padding_idx;
    int causal, embedding_norm;
} preset;

static const preset presets[REFENC_FAMILY_COUNT] = { /* the decoder families' rows unused: llm_presets */
    /* bert-base-uncased: config.json; BertEmbeddings, BertLayer */
    [REFENC_FAMILY_BERT] = {768, 12, 3072, 12, 30522, 512, 2, REFENC_NORM_POST, REFENC_ACT_GELU,
                            1e-12, REFENC_POSIDS_INDEX, 0, 0, 1},
    /* roberta-base: 514 positions, padding_idx 1, one token type, eps 1e-5 */
    [REFENC_FAMILY_ROBERTA] = {768, 12, 3072, 12, 50265, 514, 1, REFENC_NORM_POST, REFENC_ACT_GELU,
                               1e-5, REFENC_POSIDS_ROBERTA, 1, 0, 1},
    /* distilbert-base-uncased: 6 layers, no token types, eps 1e-12 */
    [REFENC_FAMILY_DISTILBERT] = {768, 12, 3072, 6, 30522, 512, 0, REFENC_NORM_POST, REFENC_ACT_GELU,
                                  1e-12, REFENC_POSIDS_INDEX, 0, 0, 1},
    /* gpt2 (124M): n_inner = 4 n_embd, gelu_new, ln_f, no pad token */
    [REFENC_FAMILY_GPT2] = {768, 12, 3072, 12, 50257, 1024, 0, REFENC_NORM_PRE, REFENC_ACT_GELU_TANH,
                            1e-5, REFENC_POSIDS_INDEX, -1, 1, 0},
    /* openai/clip-vit-base-patch32, text_config: 77 positions, quick_gelu */
    [REFENC_FAMILY_CLIP_TEXT] = {512, 8, 2048, 12, 49408, 77, 0, REFENC_NORM_PRE,
                                 REFENC_ACT_QUICK_GELU, 1e-5, REFENC_POSIDS_INDEX, -1, 1, 0},
};

/* The sizes of a decoder family's base model (its config.json); the
 * conventions every one shares are set by llama_conventions. */
typedef struct {
    size_t D, H, Hkv, Dh, F, N, V, P, window; /* Dh 0: D / H; window 0: none  */
    double theta, eps;
    int qkv_bias;
    refenc_qk_norm_type qk_norm;
} llm_preset;

static const llm_preset llm_presets[REFENC_FAMILY_QWEN3 - REFENC_FAMILY_LLAMA + 1] = {
    /* meta-llama/Meta-Llama-3-8B config.json: hidden_size 4096, num_attention_heads 32,
     * num_key_value_heads 8, intermediate_size 14336, num_hidden_layers 32, vocab_size
     * 128256, max_position_embeddings 8192, rope_theta 500000, rms_norm_eps 1e-5,
     * attention_bias false, mlp_bias false, rope_scaling null */
    {4096, 32, 8, 0, 14336, 32, 128256, 8192, 0, 500000.0, 1e-5, 0, REFENC_QKNORM_NONE},
    /* mistralai/Mistral-7B-v0.1 config.json: as Llama-3-8B but vocab_size 32000,
     * max_position_embeddings 32768, rope_theta 10000, sliding_window 4096 */
    {4096, 32, 8, 0, 14336, 32, 32000, 32768, 4096, 10000.0, 1e-5, 0, REFENC_QKNORM_NONE},
    /* Qwen/Qwen2-7B-Instruct config.json: hidden_size 3584, 28 heads, 4 KV heads,
     * intermediate_size 18944, 28 layers, vocab_size 152064, max_position_embeddings
     * 32768, rope_theta 1e6, rms_norm_eps 1e-6, sliding_window null; modeling_qwen2.py:
     * q_proj, k_proj, v_proj with bias=True, o_proj and the MLP without */
    {3584, 28, 4, 0, 18944, 28, 152064, 32768, 0, 1e6, 1e-6, 1, REFENC_QKNORM_NONE},
    /* Qwen/Qwen3-Embedding-0.6B config.json: hidden_size 1024, 16 heads, 8 KV heads,
     * head_dim 128, intermediate_size 3072, 28 layers, vocab_size 151669,
     * max_position_embeddings 32768, rope_theta 1e6, rms_norm_eps 1e-6, attention_bias
     * false (595 776 512 parameters with this vocabulary, keras-hub#2455's count for the
     * model; Qwen3-0.6B's 151936 rows would give 596 049 920); modeling_qwen3.py: q_norm,
     * k_norm (Qwen3RMSNorm(head_dim)) before RoPE */
    {1024, 16, 8, 128, 3072, 28, 151669, 32768, 0, 1e6, 1e-6, 0, REFENC_QKNORM_RMS},
};

/* What Llama, Mistral, Qwen2 and Qwen3 share (modeling_llama.py and its copies):
 * token embeddings unscaled, no token types, no embedding norm, Pre-norm
 * RMSNorm blocks (input_layernorm, post_attention_layernorm) and a final
 * RMSNorm (norm), RoPE rotate_half on q and k, SwiGLU MLP
 * down_proj(silu(gate_proj(x)) * up_proj(x)) stacked gate first, no linear
 * biases but Qwen2's q/k/v, a causal mask of finfo.min, no pad token. */
static void llama_conventions(refenc_config *cfg, const llm_preset *p)
{
    cfg->d_model = p->D, cfg->n_heads = p->H, cfg->n_kv_heads = p->Hkv, cfg->head_dim = p->Dh;
    cfg->d_ff = p->F, cfg->n_layers = p->N, cfg->vocab_size = p->V, cfg->max_len = p->P;
    cfg->sliding_window = p->window;
    cfg->rope_base = p->theta;
    cfg->layer_norm_eps = cfg->embedding_norm_eps = p->eps;
    cfg->qkv_bias = p->qkv_bias;
    cfg->qk_norm = p->qk_norm;
    cfg->norm = REFENC_NORM_PRE;
    cfg->final_norm = 1;
    cfg->norm_type = REFENC_NORMTYPE_RMSNORM;
    cfg->activation = REFENC_ACT_SILU;
    cfg->ffn_type = REFENC_FFN_GLU;
    cfg->glu_gate = REFENC_GLU_GATE_FIRST;
    cfg->linear_bias = 0;
    cfg->positional = REFENC_POS_ROPE;
    cfg->rope_layout = REFENC_ROPE_HALF;
    cfg->type_vocab_size = 0;
    cfg->embedding_norm = 0;
    cfg->padding_idx = -1;
    cfg->causal = 1;
    cfg->scale_embedding = 0;
    cfg->mask_value = REFENC_MASK_FINFO_MIN;
}

/* answerdotai/ModernBERT-base config.json: hidden_size 768, num_attention_heads 12,
 * intermediate_size 1152, num_hidden_layers 22, vocab_size 50368,
 * max_position_embeddings 8192, norm_eps 1e-5, norm_bias false, attention_bias and
 * mlp_bias false, hidden_activation "gelu" (exact), global_attn_every_n_layers 3,
 * local_attention 128, global_rope_theta 160000, local_rope_theta 10000,
 * pad_token_id 50283.  modeling_modernbert.py: tok_embeddings then a bias-free
 * LayerNorm (no positions, no scale), Pre-LN layers whose layer 0 has attn_norm =
 * nn.Identity(), fused Wqkv, RoPE rotate_half, Wi (2F, D) chunked input | gate with
 * the first half activated, a final_norm; bidirectional, padding masked with
 * finfo.min (_prepare_4d_attention_mask). */
static void modernbert_conventions(refenc_config *cfg)
{
    cfg->d_model = 768, cfg->n_heads = 12, cfg->d_ff = 1152, cfg->n_layers = 22;
    cfg->vocab_size = 50368, cfg->max_len = 8192, cfg->padding_idx = 50283;
    cfg->layer_norm_eps = cfg->embedding_norm_eps = 1e-5;
    cfg->norm = REFENC_NORM_PRE, cfg->final_norm = 1, cfg->skip_first_prenorm = 1;
    cfg->norm_type = REFENC_NORMTYPE_LAYERNORM, cfg->norm_bias = 0, cfg->linear_bias = 0;
    cfg->embedding_norm = 1, cfg->scale_embedding = 0, cfg->type_vocab_size = 0;
    cfg->activation = REFENC_ACT_GELU, cfg->ffn_type = REFENC_FFN_GLU, cfg->glu_gate = REFENC_GLU_GATE_FIRST;
    cfg->positional = REFENC_POS_ROPE, cfg->rope_layout = REFENC_ROPE_HALF, cfg->rope_base = 160000.0;
    cfg->local_attention = 128, cfg->global_attn_every_n_layers = 3;
    cfg->local_rope_theta = 10000.0, cfg->global_rope_theta = 160000.0;
    cfg->causal = 0, cfg->mask_value = REFENC_MASK_FINFO_MIN;
}

/* google-t5/t5-base config.json: d_model 768, num_heads 12, d_kv 64 (= D / H),
 * d_ff 3072, num_layers 12, vocab_size 32128, n_positions 512,
 * relative_attention_num_buckets 32, layer_norm_epsilon 1e-6, feed_forward_proj
 * "relu" (relative_attention_max_distance absent: T5Config's default 128).
 * modeling_t5.py, the encoder stack of T5EncoderModel: shared = nn.Embedding(V, D)
 * without scale or padding row (the pad token 0 is an ordinary row), no absolute
 * positions; T5Block Pre-norm (T5LayerSelfAttention: layer_norm, SelfAttention,
 * residual; T5LayerFF: layer_norm, DenseReluDense, residual) and the stack's
 * final_layer_norm; T5LayerNorm = RMSNorm without mean or bias; q, k, v, o and
 * wi, wo without biases; scores not divided by sqrt(d_kv) (query_pre_attn_scalar
 * 1: the divisor is exactly 1); block 0's relative_attention_bias (32, H) shared
 * by every block; bidirectional, padding added as finfo.min
 * (get_extended_attention_mask).  v1.1 / flan-T5 differ by keys, not by this
 * preset: "ffn_type": "glu", "activation": "gelu_tanh" (gated-gelu, wi_0 the
 * activated half) and their sizes (docs/families.md). */
static void t5_encoder_conventions(refenc_config *cfg)
{
    cfg->d_model = 768, cfg->n_heads = 12, cfg->d_ff = 3072, cfg->n_layers = 12;
    cfg->vocab_size = 32128, cfg->max_len = 512, cfg->padding_idx = -1;
    cfg->layer_norm_eps = cfg->embedding_norm_eps = 1e-6;
    cfg->norm = REFENC_NORM_PRE, cfg->final_norm = 1;
    cfg->norm_type = REFENC_NORMTYPE_RMSNORM, cfg->linear_bias = 0;
    cfg->embedding_norm = 0, cfg->scale_embedding = 0, cfg->type_vocab_size = 0;
    cfg->activation = REFENC_ACT_RELU, cfg->ffn_type = REFENC_FFN_MLP;
    cfg->positional = REFENC_POS_NONE, cfg->query_pre_attn_scalar = 1.0;
    cfg->relative_attention_num_buckets = 32, cfg->relative_attention_max_distance = 128;
    cfg->causal = 0, cfg->mask_value = REFENC_MASK_FINFO_MIN;
}

/* What nomic-bert, jina-bert-v2 and gte share, each from its config.json
 * and remote code (below): BERT-base's sizes with a 30528-word vocabulary
 * and 8192 positions, pad id 0, LayerNorm eps 1e-12 on the embeddings and in
 * Post-LN layers, no final norm, unscaled word (+ type) embeddings then a
 * LayerNorm, bidirectional with the extended mask (finfo.min), a pooled
 * embedding L2-normalised. */
static void long_bert_conventions(refenc_config *cfg)
{
    cfg->d_model = 768, cfg->n_heads = 12, cfg->d_ff = 3072, cfg->n_layers = 12;
    cfg->vocab_size = 30528, cfg->max_len = 8192, cfg->padding_idx = 0, cfg->type_vocab_size = 2;
    cfg->layer_norm_eps = cfg->embedding_norm_eps = 1e-12;
    cfg->norm = REFENC_NORM_POST, cfg->final_norm = 0, cfg->norm_type = REFENC_NORMTYPE_LAYERNORM;
    cfg->embedding_norm = 1, cfg->scale_embedding = 0;
    cfg->causal = 0, cfg->mask_value = REFENC_MASK_FINFO_MIN;
    cfg->pooling_normalize = 1;
}

/* nomic-ai/nomic-embed-text-v1.5 config.json (NomicBertConfig, GPT-2's key names):
 * n_embd 768, n_head 12, n_inner 3072, n_layer 12, vocab_size 30528, type_vocab_size
 * 2, n_positions 8192, max_trained_positions 2048, layer_norm_epsilon 1e-12,
 * activation_function "swiglu", prenorm false, qkv_proj_bias, mlp_fc1_bias and
 * mlp_fc2_bias false, rotary_emb_fraction 1.0, rotary_emb_base 1000,
 * rotary_emb_interleaved false, rotary_scaling_factor null, causal false.
 * contrastors' modeling_hf_nomic_bert.py (the model's remote code): word + token
 * type embeddings (no positions table: rotary_emb_fraction > 0), unscaled, then
 * emb_ln (LayerNorm with bias); NomicBertBlock Post-LN: norm1(attn(x) + x),
 * norm2(mlp(h) + h), no final norm; Wqkv fused [q; k; v], out_proj, no biases;
 * scores / sqrt(Dh) plus the extended mask (finfo.min); NeoX rotate_half RoPE on
 * every coordinate; NomciBertGatedMLP: fc2(fc11(x) * silu(fc12(x))), fc12 the
 * activated half.  The pad row 0 is [PAD] of its bert-base-uncased tokenizer.
 * Its dynamic NTK (rotary_scaling_factor, the model card's 8192-token use) is
 * the "dynamic" rope_scaling with max_position_embeddings = max_trained_positions
 * (docs/families.md); the config.json has none.  The model card's embedding:
 * the mean over the non-padding tokens, L2-normalised (pooling mean). */
static void nomic_bert_conventions(refenc_config *cfg)
{
    long_bert_conventions(cfg);
    cfg->linear_bias = 0;
    cfg->activation = REFENC_ACT_SILU, cfg->ffn_type = REFENC_FFN_GLU, cfg->glu_gate = REFENC_GLU_GATE_FIRST;
    cfg->positional = REFENC_POS_ROPE, cfg->rope_layout = REFENC_ROPE_HALF, cfg->rope_base = 1000.0;
    cfg->pooling = REFENC_POOL_MEAN;
}

/* jinaai/jina-embeddings-v2-base-en config.json (JinaBertConfig of
 * jinaai/jina-bert-implementation): hidden_size 768, num_attention_heads 12,
 * intermediate_size 3072, num_hidden_layers 12, vocab_size 30528,
 * type_vocab_size 2, max_position_embeddings 8192, layer_norm_eps 1e-12,
 * hidden_act "gelu", feed_forward_type "geglu", position_embedding_type
 * "alibi", pad_token_id 0.  JinaBertModel (candle's jina_bert.rs, TEI's
 * jina.rs): word + token-type embeddings, unscaled, no positions table, then
 * LayerNorm; Post-LN layers: attention.output.LayerNorm(dense(attn) + x),
 * mlp.layernorm(wo(gelu(g) * u) + h) with [g | u] = gated_layers(h), gated_layers
 * bias-free, query/key/value, dense and wo biased; scores / sqrt(Dh) plus the
 * symmetric ALiBi bias -m_h |i - j| (Press's slopes, interleaved when H is not a
 * power of two: 12 heads) and the extended mask (finfo.min); no final norm.
 * The model card's embedding (model.encode): the mean over the non-padding
 * tokens, L2-normalised (pooling mean). */
static void jina_bert_v2_conventions(refenc_config *cfg)
{
    long_bert_conventions(cfg);
    cfg->linear_bias = 1, cfg->linear1_bias = 0;
    cfg->activation = REFENC_ACT_GELU, cfg->ffn_type = REFENC_FFN_GLU, cfg->glu_gate = REFENC_GLU_GATE_FIRST;
    cfg->positional = REFENC_POS_ALIBI;
    cfg->pooling = REFENC_POOL_MEAN;
}

/* Alibaba-NLP/gte-base-en-v1.5 config.json (NewConfig): hidden_size 768,
 * num_attention_heads 12, num_hidden_layers 12, intermediate_size 3072,
 * layer_norm_eps 1e-12, layer_norm_type "layer_norm", max_position_embeddings
 * 8192, position_embedding_type "rope", rope_theta 500000, rope_scaling
 * {"factor": 2.0, "type": "ntk"}, type_vocab_size 0, vocab_size 30528,
 * pad_token_id 0, hidden_act "gelu", pack_qkv true, logn_attention_scale false.
 * Alibaba-NLP/new-impl modeling.py (NewModel): word (+ token-type when
 * type_vocab_size > 0) embeddings, unscaled, then LayerNorm; NewLayer Post-LN:
 * attn_ln(x + attention(x)), mlp_ln(h + mlp(h)), no final norm; qkv_proj
 * [q; k; v] and o_proj biased; scores / sqrt(Dh) plus the extended mask
 * (finfo.min); rotate_half RoPE with NTKScalingRotaryEmbedding (rope_scaling
 * "ntk"); NewGatedMLP: up_gate_proj = [up | gate] without bias, down_proj(act(gate)
 * * up) biased (glu_gate second, linear1_bias false).  The model card's embedding:
 * last_hidden_state[:, 0], normalised (pooling cls).  gte-large-en-v1.5: D 1024,
 * H 16, N 24, F 4096, rope_theta 160000, type_vocab_size 2 (docs/families.md). */
static void gte_conventions(refenc_config *cfg)
{
    long_bert_conventions(cfg);
    cfg->type_vocab_size = 0, cfg->linear_bias = 1, cfg->linear1_bias = 0;
    cfg->activation = REFENC_ACT_GELU, cfg->ffn_type = REFENC_FFN_GLU, cfg->glu_gate = REFENC_GLU_GATE_SECOND;
    cfg->positional = REFENC_POS_ROPE, cfg->rope_layout = REFENC_ROPE_HALF, cfg->rope_base = 500000.0;
    cfg->rope_scaling.type = REFENC_ROPE_SCALING_NTK, cfg->rope_scaling.factor = 2.0;
    cfg->pooling = REFENC_POOL_CLS;
}

/* google/gemma-3-1b-pt config.json (Gemma3TextConfig): hidden_size 1152,
 * num_attention_heads 4, num_key_value_heads 1, head_dim 256, intermediate_size
 * 6912, num_hidden_layers 26, vocab_size 262144, max_position_embeddings 32768,
 * query_pre_attn_scalar 256, rms_norm_eps 1e-6, rope_theta 1000000,
 * rope_local_base_freq 10000, sliding_window 512, sliding_window_pattern 6,
 * hidden_activation "gelu_pytorch_tanh", attention_bias false,
 * attn_logit_softcapping null, rope_scaling null, pad_token_id 0, torch_dtype
 * "bfloat16".  modeling_gemma3.py: the embedding times sqrt(D) as a tensor of
 * the weights' dtype (Gemma3TextScaledWordEmbedding: bfloat16 as shipped), no
 * positions or types; Pre-norm blocks with sandwich norms (input_layernorm,
 * post_attention_layernorm, pre_feedforward_layernorm,
 * post_feedforward_layernorm), every norm and q_norm/k_norm Gemma3RMSNorm
 * x * (1 + w); q/k/v/o bias-free, scores over sqrt(query_pre_attn_scalar);
 * down(gelu_tanh(gate) * up); layer l global iff (l + 1) % 6 == 0, the others
 * a causal sliding window of 512 keys with base 10000; a final norm; causal
 * with finfo.min.  EmbeddingGemma declares what it changes (docs/families.md). */
static void gemma3_conventions(refenc_config *cfg)
{
    const llm_preset p = {1152, 4, 1, 256, 6912, 26, 262144, 32768, 512, 1e6, 1e-6, 0, REFENC_QKNORM_RMS};
    llama_conventions(cfg, &p);
    cfg->padding_idx = 0;
    cfg->rmsnorm_offset = 1, cfg->sandwich_norm = 1;
    cfg->activation = REFENC_ACT_GELU_TANH;
    cfg->query_pre_attn_scalar = 256;
    cfg->sliding_window_pattern = 6, cfg->local_rope_theta = 10000.0;
    cfg->scale_embedding = 1, cfg->embedding_normalizer_dtype = REFENC_NORMALIZER_BFLOAT16;
}

void refenc_config_family(refenc_config *cfg, refenc_family family)
{
    if (family == REFENC_FAMILY_GEMMA3) {
        refenc_config_default(cfg);
        cfg->family = family;
        gemma3_conventions(cfg);
        return;
    }
    if (family == REFENC_FAMILY_MODERNBERT || family == REFENC_FAMILY_T5_ENCODER ||
        family == REFENC_FAMILY_NOMIC_BERT || family == REFENC_FAMILY_JINA_BERT_V2 ||
        family == REFENC_FAMILY_GTE) {
        refenc_config_default(cfg);
        cfg->family = family;
        if (family == REFENC_FAMILY_MODERNBERT)
            modernbert_conventions(cfg);
        else if (family == REFENC_FAMILY_T5_ENCODER)
            t5_encoder_conventions(cfg);
        else if (family == REFENC_FAMILY_NOMIC_BERT)
            nomic_bert_conventions(cfg);
        else if (family == REFENC_FAMILY_JINA_BERT_V2)
            jina_bert_v2_conventions(cfg);
        else
            gte_conventions(cfg);
        return;
    }
    if (family >= REFENC_FAMILY_LLAMA && family <= REFENC_FAMILY_QWEN3) {
        refenc_config_default(cfg);
        cfg->family = family;
        llama_conventions(cfg, &llm_presets[family - REFENC_FAMILY_LLAMA]);
        return;
    }
    refenc_config_default(cfg);
    if (family == REFENC_FAMILY_VASWANI || (unsigned)family >= REFENC_FAMILY_COUNT) {
        cfg->family = family;
        return;
    }
    const preset *p = &presets[family];
    cfg->family = family;
    cfg->d_model = p->D;
    cfg->n_heads = p->H;
    cfg->d_ff = p->F;
    cfg->n_layers = p->N;
    cfg->vocab_size = p->V;
    cfg->max_len = p->P;
    cfg->type_vocab_size = p->T;
    cfg->norm = p->norm;
    cfg->final_norm = p->norm == REFENC_NORM_PRE; /* BERT's stacks end with a layer's LN */
    cfg->activation = p->act;
    cfg->layer_norm_eps = p->eps;
    cfg->embedding_norm = p->embedding_norm;
    cfg->embedding_norm_eps = p->eps;             /* every family uses one eps for both */
    cfg->positional = REFENC_POS_LEARNED;
    cfg->position_ids = p->position_ids;
    cfg->padding_idx = p->padding_idx;
    cfg->causal = p->causal;
    cfg->scale_embedding = 0;                     /* none scales by sqrt(D) */
    cfg->mask_value = REFENC_MASK_FINFO_MIN;
}
