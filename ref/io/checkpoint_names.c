/* The families' checkpoint names (checkpoint_names.h) and their loader. */
#include "checkpoint_names.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/text.h"
#include "name_prefix.h"

#define Q REFENC_CK_Q
#define K REFENC_CK_K
#define V REFENC_CK_V
#define COPY REFENC_CK_COPY
#define T REFENC_CK_TRANSPOSE
#define GATE REFENC_CK_GATE
#define UP REFENC_CK_UP

/* ---- the tables ------------------------------------------------------------ */

/* HF BertModel and RobertaModel (modeling_bert.py, modeling_roberta.py) */
static const refenc_ck_entry bert[] = {
    {"embeddings.word_embeddings.weight", "embedding.weight", COPY},
    {"embeddings.token_type_embeddings.weight", "token_type_embedding.weight", COPY},
    {"embeddings.position_embeddings.weight", "pos_embedding.weight", COPY},
    {"embeddings.LayerNorm.weight", "embedding_norm.weight", COPY},
    {"embeddings.LayerNorm.bias", "embedding_norm.bias", COPY},
    {"encoder.layer.{i}.attention.self.query.weight", "layers.{i}.self_attn.in_proj_weight", Q},
    {"encoder.layer.{i}.attention.self.query.bias", "layers.{i}.self_attn.in_proj_bias", Q},
    {"encoder.layer.{i}.attention.self.key.weight", "layers.{i}.self_attn.in_proj_weight", K},
    {"encoder.layer.{i}.attention.self.key.bias", "layers.{i}.self_attn.in_proj_bias", K},
    {"encoder.layer.{i}.attention.self.value.weight", "layers.{i}.self_attn.in_proj_weight", V},
    {"encoder.layer.{i}.attention.self.value.bias", "layers.{i}.self_attn.in_proj_bias", V},
    {"encoder.layer.{i}.attention.output.dense.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"encoder.layer.{i}.attention.output.dense.bias", "layers.{i}.self_attn.out_proj.bias", COPY},
    {"encoder.layer.{i}.attention.output.LayerNorm.weight", "layers.{i}.norm1.weight", COPY},
    {"encoder.layer.{i}.attention.output.LayerNorm.bias", "layers.{i}.norm1.bias", COPY},
    {"encoder.layer.{i}.intermediate.dense.weight", "layers.{i}.linear1.weight", COPY},
    {"encoder.layer.{i}.intermediate.dense.bias", "layers.{i}.linear1.bias", COPY},
    {"encoder.layer.{i}.output.dense.weight", "layers.{i}.linear2.weight", COPY},
    {"encoder.layer.{i}.output.dense.bias", "layers.{i}.linear2.bias", COPY},
    {"encoder.layer.{i}.output.LayerNorm.weight", "layers.{i}.norm2.weight", COPY},
    {"encoder.layer.{i}.output.LayerNorm.bias", "layers.{i}.norm2.bias", COPY},
};
static const char *const bert_ignored[] = {"pooler.dense.weight", "pooler.dense.bias",
                                           "embeddings.position_ids", "embeddings.token_type_ids",
                                           NULL};

/* HF DistilBertModel (modeling_distilbert.py) */
static const refenc_ck_entry distilbert[] = {
    {"embeddings.word_embeddings.weight", "embedding.weight", COPY},
    {"embeddings.position_embeddings.weight", "pos_embedding.weight", COPY},
    {"embeddings.LayerNorm.weight", "embedding_norm.weight", COPY},
    {"embeddings.LayerNorm.bias", "embedding_norm.bias", COPY},
    {"transformer.layer.{i}.attention.q_lin.weight", "layers.{i}.self_attn.in_proj_weight", Q},
    {"transformer.layer.{i}.attention.q_lin.bias", "layers.{i}.self_attn.in_proj_bias", Q},
    {"transformer.layer.{i}.attention.k_lin.weight", "layers.{i}.self_attn.in_proj_weight", K},
    {"transformer.layer.{i}.attention.k_lin.bias", "layers.{i}.self_attn.in_proj_bias", K},
    {"transformer.layer.{i}.attention.v_lin.weight", "layers.{i}.self_attn.in_proj_weight", V},
    {"transformer.layer.{i}.attention.v_lin.bias", "layers.{i}.self_attn.in_proj_bias", V},
    {"transformer.layer.{i}.attention.out_lin.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"transformer.layer.{i}.attention.out_lin.bias", "layers.{i}.self_attn.out_proj.bias", COPY},
    {"transformer.layer.{i}.sa_layer_norm.weight", "layers.{i}.norm1.weight", COPY},
    {"transformer.layer.{i}.sa_layer_norm.bias", "layers.{i}.norm1.bias", COPY},
    {"transformer.layer.{i}.ffn.lin1.weight", "layers.{i}.linear1.weight", COPY},
    {"transformer.layer.{i}.ffn.lin1.bias", "layers.{i}.linear1.bias", COPY},
    {"transformer.layer.{i}.ffn.lin2.weight", "layers.{i}.linear2.weight", COPY},
    {"transformer.layer.{i}.ffn.lin2.bias", "layers.{i}.linear2.bias", COPY},
    {"transformer.layer.{i}.output_layer_norm.weight", "layers.{i}.norm2.weight", COPY},
    {"transformer.layer.{i}.output_layer_norm.bias", "layers.{i}.norm2.bias", COPY},
};
static const char *const distilbert_ignored[] = {"embeddings.position_ids", NULL};

/* HF GPT2Model (modeling_gpt2.py): Conv1D weights are (in, out) */
static const refenc_ck_entry gpt2[] = {
    {"wte.weight", "embedding.weight", COPY},
    {"wpe.weight", "pos_embedding.weight", COPY},
    {"h.{i}.ln_1.weight", "layers.{i}.norm1.weight", COPY},
    {"h.{i}.ln_1.bias", "layers.{i}.norm1.bias", COPY},
    {"h.{i}.attn.c_attn.weight", "layers.{i}.self_attn.in_proj_weight", T},
    {"h.{i}.attn.c_attn.bias", "layers.{i}.self_attn.in_proj_bias", COPY},
    {"h.{i}.attn.c_proj.weight", "layers.{i}.self_attn.out_proj.weight", T},
    {"h.{i}.attn.c_proj.bias", "layers.{i}.self_attn.out_proj.bias", COPY},
    {"h.{i}.ln_2.weight", "layers.{i}.norm2.weight", COPY},
    {"h.{i}.ln_2.bias", "layers.{i}.norm2.bias", COPY},
    {"h.{i}.mlp.c_fc.weight", "layers.{i}.linear1.weight", T},
    {"h.{i}.mlp.c_fc.bias", "layers.{i}.linear1.bias", COPY},
    {"h.{i}.mlp.c_proj.weight", "layers.{i}.linear2.weight", T},
    {"h.{i}.mlp.c_proj.bias", "layers.{i}.linear2.bias", COPY},
    {"ln_f.weight", "norm.weight", COPY},
    {"ln_f.bias", "norm.bias", COPY},
};
static const char *const gpt2_ignored[] = {"h.{i}.attn.bias", "h.{i}.attn.masked_bias", NULL};

/* HF CLIPTextModel (modeling_clip.py) */
static const refenc_ck_entry clip_text[] = {
    {"embeddings.token_embedding.weight", "embedding.weight", COPY},
    {"embeddings.position_embedding.weight", "pos_embedding.weight", COPY},
    {"encoder.layers.{i}.self_attn.q_proj.weight", "layers.{i}.self_attn.in_proj_weight", Q},
    {"encoder.layers.{i}.self_attn.q_proj.bias", "layers.{i}.self_attn.in_proj_bias", Q},
    {"encoder.layers.{i}.self_attn.k_proj.weight", "layers.{i}.self_attn.in_proj_weight", K},
    {"encoder.layers.{i}.self_attn.k_proj.bias", "layers.{i}.self_attn.in_proj_bias", K},
    {"encoder.layers.{i}.self_attn.v_proj.weight", "layers.{i}.self_attn.in_proj_weight", V},
    {"encoder.layers.{i}.self_attn.v_proj.bias", "layers.{i}.self_attn.in_proj_bias", V},
    {"encoder.layers.{i}.self_attn.out_proj.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"encoder.layers.{i}.self_attn.out_proj.bias", "layers.{i}.self_attn.out_proj.bias", COPY},
    {"encoder.layers.{i}.layer_norm1.weight", "layers.{i}.norm1.weight", COPY},
    {"encoder.layers.{i}.layer_norm1.bias", "layers.{i}.norm1.bias", COPY},
    {"encoder.layers.{i}.mlp.fc1.weight", "layers.{i}.linear1.weight", COPY},
    {"encoder.layers.{i}.mlp.fc1.bias", "layers.{i}.linear1.bias", COPY},
    {"encoder.layers.{i}.mlp.fc2.weight", "layers.{i}.linear2.weight", COPY},
    {"encoder.layers.{i}.mlp.fc2.bias", "layers.{i}.linear2.bias", COPY},
    {"encoder.layers.{i}.layer_norm2.weight", "layers.{i}.norm2.weight", COPY},
    {"encoder.layers.{i}.layer_norm2.bias", "layers.{i}.norm2.bias", COPY},
    {"final_layer_norm.weight", "norm.weight", COPY},
    {"final_layer_norm.bias", "norm.bias", COPY},
};
static const char *const clip_ignored[] = {"embeddings.position_ids", NULL};

/* HF LlamaModel (modeling_llama.py), and MistralModel, Qwen2Model, Qwen3Model, which
 * keep its names: Qwen2 adds the q/k/v biases (qkv_bias), Qwen3 q_norm and k_norm
 * (qk_norm 'rms'); the other biases exist with attention_bias / mlp_bias true
 * (linear_bias true) */
static const refenc_ck_entry llama[] = {
    {"embed_tokens.weight", "embedding.weight", COPY},
    {"layers.{i}.self_attn.q_proj.weight", "layers.{i}.self_attn.in_proj_weight", Q},
    {"layers.{i}.self_attn.q_proj.bias", "layers.{i}.self_attn.in_proj_bias", Q},
    {"layers.{i}.self_attn.k_proj.weight", "layers.{i}.self_attn.in_proj_weight", K},
    {"layers.{i}.self_attn.k_proj.bias", "layers.{i}.self_attn.in_proj_bias", K},
    {"layers.{i}.self_attn.v_proj.weight", "layers.{i}.self_attn.in_proj_weight", V},
    {"layers.{i}.self_attn.v_proj.bias", "layers.{i}.self_attn.in_proj_bias", V},
    {"layers.{i}.self_attn.o_proj.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"layers.{i}.self_attn.o_proj.bias", "layers.{i}.self_attn.out_proj.bias", COPY},
    {"layers.{i}.self_attn.q_norm.weight", "layers.{i}.self_attn.q_norm.weight", COPY},
    {"layers.{i}.self_attn.k_norm.weight", "layers.{i}.self_attn.k_norm.weight", COPY},
    {"layers.{i}.mlp.gate_proj.weight", "layers.{i}.linear1.weight", GATE},
    {"layers.{i}.mlp.gate_proj.bias", "layers.{i}.linear1.bias", GATE},
    {"layers.{i}.mlp.up_proj.weight", "layers.{i}.linear1.weight", UP},
    {"layers.{i}.mlp.up_proj.bias", "layers.{i}.linear1.bias", UP},
    {"layers.{i}.mlp.down_proj.weight", "layers.{i}.linear2.weight", COPY},
    {"layers.{i}.mlp.down_proj.bias", "layers.{i}.linear2.bias", COPY},
    {"layers.{i}.input_layernorm.weight", "layers.{i}.norm1.weight", COPY},
    {"layers.{i}.post_attention_layernorm.weight", "layers.{i}.norm2.weight", COPY},
    {"norm.weight", "norm.weight", COPY},
};
/* the rotary inverse frequencies older checkpoints saved as a buffer */
static const char *const llama_ignored[] = {"layers.{i}.self_attn.rotary_emb.inv_freq", "rotary_emb.inv_freq",
                                            NULL};

/* HF ModernBertModel (modeling_modernbert.py): Wqkv fused [q; k; v] as refenc's
 * in_proj, Wi (2F, D) [input | gate] with the first half activated as refenc's
 * gated linear1, no biases, bias-free LayerNorms; layer 0 has no attn_norm
 * (nn.Identity(), skip_first_prenorm) */
static const refenc_ck_entry modernbert[] = {
    {"embeddings.tok_embeddings.weight", "embedding.weight", COPY},
    {"embeddings.norm.weight", "embedding_norm.weight", COPY},
    {"layers.{i}.attn_norm.weight", "layers.{i}.norm1.weight", COPY},
    {"layers.{i}.attn.Wqkv.weight", "layers.{i}.self_attn.in_proj_weight", COPY},
    {"layers.{i}.attn.Wo.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"layers.{i}.mlp_norm.weight", "layers.{i}.norm2.weight", COPY},
    {"layers.{i}.mlp.Wi.weight", "layers.{i}.linear1.weight", COPY},
    {"layers.{i}.mlp.Wo.weight", "layers.{i}.linear2.weight", COPY},
    {"final_norm.weight", "norm.weight", COPY},
};

/* HF Gemma3TextModel (modeling_gemma3.py; Gemma3ForCausalLM under "model.",
 * EmbeddingGemma's sentence-transformers module without it): Llama's
 * attention and MLP names, q_norm/k_norm, and four norms a layer:
 * post_attention_layernorm is the norm of the attention's output (refenc's
 * post_attn_norm, sandwich_norm), not Llama's pre-FFN norm, which is
 * pre_feedforward_layernorm here (refenc's norm2) */
static const refenc_ck_entry gemma3[] = {
    {"embed_tokens.weight", "embedding.weight", COPY},
    {"layers.{i}.self_attn.q_proj.weight", "layers.{i}.self_attn.in_proj_weight", Q},
    {"layers.{i}.self_attn.k_proj.weight", "layers.{i}.self_attn.in_proj_weight", K},
    {"layers.{i}.self_attn.v_proj.weight", "layers.{i}.self_attn.in_proj_weight", V},
    {"layers.{i}.self_attn.o_proj.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"layers.{i}.self_attn.q_norm.weight", "layers.{i}.self_attn.q_norm.weight", COPY},
    {"layers.{i}.self_attn.k_norm.weight", "layers.{i}.self_attn.k_norm.weight", COPY},
    {"layers.{i}.mlp.gate_proj.weight", "layers.{i}.linear1.weight", GATE},
    {"layers.{i}.mlp.up_proj.weight", "layers.{i}.linear1.weight", UP},
    {"layers.{i}.mlp.down_proj.weight", "layers.{i}.linear2.weight", COPY},
    {"layers.{i}.input_layernorm.weight", "layers.{i}.norm1.weight", COPY},
    {"layers.{i}.post_attention_layernorm.weight", "layers.{i}.post_attn_norm.weight", COPY},
    {"layers.{i}.pre_feedforward_layernorm.weight", "layers.{i}.norm2.weight", COPY},
    {"layers.{i}.post_feedforward_layernorm.weight", "layers.{i}.post_ffn_norm.weight", COPY},
    {"norm.weight", "norm.weight", COPY},
};
/* HF T5EncoderModel (modeling_t5.py): the embedding is the model's `shared`, the
 * stack's names under encoder.; T5Attention's q, k, v (H d_kv, D) as the row
 * blocks of in_proj, o; relative_attention_bias (nb, H) in block 0 only (a file
 * with one in another block is refused: relative_attention_num_buckets);
 * T5DenseActDense's wi (v1.0) or T5DenseGatedActDense's wi_0, the activated half
 * (gelu_new), and wi_1 (v1.1, flan-T5: ffn_type "glu"), wo; T5LayerNorm's
 * weight; no biases anywhere */
static const refenc_ck_entry t5_encoder[] = {
    {"shared.weight", "embedding.weight", COPY},
    {"encoder.block.{i}.layer.0.layer_norm.weight", "layers.{i}.norm1.weight", COPY},
    {"encoder.block.{i}.layer.0.SelfAttention.q.weight", "layers.{i}.self_attn.in_proj_weight", Q},
    {"encoder.block.{i}.layer.0.SelfAttention.k.weight", "layers.{i}.self_attn.in_proj_weight", K},
    {"encoder.block.{i}.layer.0.SelfAttention.v.weight", "layers.{i}.self_attn.in_proj_weight", V},
    {"encoder.block.{i}.layer.0.SelfAttention.o.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"encoder.block.{i}.layer.0.SelfAttention.relative_attention_bias.weight",
     "layers.{i}.self_attn.relative_attention_bias.weight", COPY},
    {"encoder.block.{i}.layer.1.layer_norm.weight", "layers.{i}.norm2.weight", COPY},
    {"encoder.block.{i}.layer.1.DenseReluDense.wi.weight", "layers.{i}.linear1.weight", COPY},
    {"encoder.block.{i}.layer.1.DenseReluDense.wi_0.weight", "layers.{i}.linear1.weight", GATE},
    {"encoder.block.{i}.layer.1.DenseReluDense.wi_1.weight", "layers.{i}.linear1.weight", UP},
    {"encoder.block.{i}.layer.1.DenseReluDense.wo.weight", "layers.{i}.linear2.weight", COPY},
    {"encoder.final_layer_norm.weight", "norm.weight", COPY},
};
/* encoder.embed_tokens is shared, tied (a state_dict holds both, a saved file
 * one); a T5Model or T5ForConditionalGeneration file's decoder and LM head,
 * v1.0's and v1.1's, which the encoder does not read */
static const char *const t5_ignored[] = {
    "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight",
    "decoder.final_layer_norm.weight",
    "decoder.block.{i}.layer.0.layer_norm.weight", "decoder.block.{i}.layer.0.SelfAttention.q.weight",
    "decoder.block.{i}.layer.0.SelfAttention.k.weight", "decoder.block.{i}.layer.0.SelfAttention.v.weight",
    "decoder.block.{i}.layer.0.SelfAttention.o.weight",
    "decoder.block.{i}.layer.0.SelfAttention.relative_attention_bias.weight",
    "decoder.block.{i}.layer.1.layer_norm.weight", "decoder.block.{i}.layer.1.EncDecAttention.q.weight",
    "decoder.block.{i}.layer.1.EncDecAttention.k.weight", "decoder.block.{i}.layer.1.EncDecAttention.v.weight",
    "decoder.block.{i}.layer.1.EncDecAttention.o.weight",
    "decoder.block.{i}.layer.1.EncDecAttention.relative_attention_bias.weight",
    "decoder.block.{i}.layer.2.layer_norm.weight", "decoder.block.{i}.layer.2.DenseReluDense.wi.weight",
    "decoder.block.{i}.layer.2.DenseReluDense.wi_0.weight", "decoder.block.{i}.layer.2.DenseReluDense.wi_1.weight",
    "decoder.block.{i}.layer.2.DenseReluDense.wo.weight", NULL};

/* NomicBertModel (contrastors' modeling_hf_nomic_bert.py, nomic-embed-text's remote
 * code): Wqkv fused [q; k; v] as refenc's in_proj, out_proj; the gated MLP's fc12
 * (activated by silu) and fc11 as the gate and up halves of linear1, fc2; emb_ln and
 * the Post-LN norm1, norm2 with biases; the linears' biases exist with
 * qkv_proj_bias / mlp_fc1_bias / mlp_fc2_bias true (linear_bias true).  Prefix
 * bert. as NomicBertForPreTraining stores it. */
static const refenc_ck_entry nomic_bert[] = {
    {"embeddings.word_embeddings.weight", "embedding.weight", COPY},
    {"embeddings.token_type_embeddings.weight", "token_type_embedding.weight", COPY},
    {"emb_ln.weight", "embedding_norm.weight", COPY},
    {"emb_ln.bias", "embedding_norm.bias", COPY},
    {"encoder.layers.{i}.attn.Wqkv.weight", "layers.{i}.self_attn.in_proj_weight", COPY},
    {"encoder.layers.{i}.attn.Wqkv.bias", "layers.{i}.self_attn.in_proj_bias", COPY},
    {"encoder.layers.{i}.attn.out_proj.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"encoder.layers.{i}.attn.out_proj.bias", "layers.{i}.self_attn.out_proj.bias", COPY},
    {"encoder.layers.{i}.norm1.weight", "layers.{i}.norm1.weight", COPY},
    {"encoder.layers.{i}.norm1.bias", "layers.{i}.norm1.bias", COPY},
    {"encoder.layers.{i}.mlp.fc12.weight", "layers.{i}.linear1.weight", GATE},
    {"encoder.layers.{i}.mlp.fc12.bias", "layers.{i}.linear1.bias", GATE},
    {"encoder.layers.{i}.mlp.fc11.weight", "layers.{i}.linear1.weight", UP},
    {"encoder.layers.{i}.mlp.fc11.bias", "layers.{i}.linear1.bias", UP},
    {"encoder.layers.{i}.mlp.fc2.weight", "layers.{i}.linear2.weight", COPY},
    {"encoder.layers.{i}.mlp.fc2.bias", "layers.{i}.linear2.bias", COPY},
    {"encoder.layers.{i}.norm2.weight", "layers.{i}.norm2.weight", COPY},
    {"encoder.layers.{i}.norm2.bias", "layers.{i}.norm2.bias", COPY},
};
/* NomicBertModel's optional pooler (add_pooling_layer) */
static const char *const nomic_ignored[] = {"pooler.dense.weight", "pooler.dense.bias", NULL};

/* JinaBertModel (jinaai/jina-bert-implementation's modeling_bert.py; candle's
 * jina_bert.rs): BERT's embeddings without a positions table (ALiBi), BERT's
 * attention names; the GLU MLP's gated_layers (2F, D) [gated; non_gated] is
 * linear1 as it is (the first half activated, glu_gate first) and has no bias,
 * wo is linear2, and mlp.layernorm the FFN's Post-LN norm2.  Prefix bert. as
 * JinaBertForMaskedLM stores it. */
static const refenc_ck_entry jina_bert_v2[] = {
    {"embeddings.word_embeddings.weight", "embedding.weight", COPY},
    {"embeddings.token_type_embeddings.weight", "token_type_embedding.weight", COPY},
    {"embeddings.LayerNorm.weight", "embedding_norm.weight", COPY},
    {"embeddings.LayerNorm.bias", "embedding_norm.bias", COPY},
    {"encoder.layer.{i}.attention.self.query.weight", "layers.{i}.self_attn.in_proj_weight", Q},
    {"encoder.layer.{i}.attention.self.query.bias", "layers.{i}.self_attn.in_proj_bias", Q},
    {"encoder.layer.{i}.attention.self.key.weight", "layers.{i}.self_attn.in_proj_weight", K},
    {"encoder.layer.{i}.attention.self.key.bias", "layers.{i}.self_attn.in_proj_bias", K},
    {"encoder.layer.{i}.attention.self.value.weight", "layers.{i}.self_attn.in_proj_weight", V},
    {"encoder.layer.{i}.attention.self.value.bias", "layers.{i}.self_attn.in_proj_bias", V},
    {"encoder.layer.{i}.attention.output.dense.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"encoder.layer.{i}.attention.output.dense.bias", "layers.{i}.self_attn.out_proj.bias", COPY},
    {"encoder.layer.{i}.attention.output.LayerNorm.weight", "layers.{i}.norm1.weight", COPY},
    {"encoder.layer.{i}.attention.output.LayerNorm.bias", "layers.{i}.norm1.bias", COPY},
    {"encoder.layer.{i}.mlp.gated_layers.weight", "layers.{i}.linear1.weight", COPY},
    {"encoder.layer.{i}.mlp.gated_layers.bias", "layers.{i}.linear1.bias", COPY}, /* linear1_bias true */
    {"encoder.layer.{i}.mlp.wo.weight", "layers.{i}.linear2.weight", COPY},
    {"encoder.layer.{i}.mlp.wo.bias", "layers.{i}.linear2.bias", COPY},
    {"encoder.layer.{i}.mlp.layernorm.weight", "layers.{i}.norm2.weight", COPY},
    {"encoder.layer.{i}.mlp.layernorm.bias", "layers.{i}.norm2.bias", COPY},
};

/* GTE's NewModel (Alibaba-NLP/new-impl modeling.py, gte-*-en-v1.5's remote code):
 * embeddings.LayerNorm after word (+ token-type) embeddings; per layer
 * attention.qkv_proj (pack_qkv) [q; k; v] as refenc's in_proj, attention.o_proj,
 * attn_ln, mlp.up_gate_proj [up; gate] as linear1 as it is (glu_gate second, no
 * bias: linear1_bias false), mlp.down_proj, mlp_ln.  Prefix new. as NewForMaskedLM
 * stores it (its lm_head outside ignored). */
static const refenc_ck_entry gte[] = {
    {"embeddings.word_embeddings.weight", "embedding.weight", COPY},
    {"embeddings.token_type_embeddings.weight", "token_type_embedding.weight", COPY},
    {"embeddings.LayerNorm.weight", "embedding_norm.weight", COPY},
    {"embeddings.LayerNorm.bias", "embedding_norm.bias", COPY},
    {"encoder.layer.{i}.attention.qkv_proj.weight", "layers.{i}.self_attn.in_proj_weight", COPY},
    {"encoder.layer.{i}.attention.qkv_proj.bias", "layers.{i}.self_attn.in_proj_bias", COPY},
    {"encoder.layer.{i}.attention.o_proj.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"encoder.layer.{i}.attention.o_proj.bias", "layers.{i}.self_attn.out_proj.bias", COPY},
    {"encoder.layer.{i}.attn_ln.weight", "layers.{i}.norm1.weight", COPY},
    {"encoder.layer.{i}.attn_ln.bias", "layers.{i}.norm1.bias", COPY},
    {"encoder.layer.{i}.mlp.up_gate_proj.weight", "layers.{i}.linear1.weight", COPY},
    {"encoder.layer.{i}.mlp.up_gate_proj.bias", "layers.{i}.linear1.bias", COPY},
    {"encoder.layer.{i}.mlp.down_proj.weight", "layers.{i}.linear2.weight", COPY},
    {"encoder.layer.{i}.mlp.down_proj.bias", "layers.{i}.linear2.bias", COPY},
    {"encoder.layer.{i}.mlp_ln.weight", "layers.{i}.norm2.weight", COPY},
    {"encoder.layer.{i}.mlp_ln.bias", "layers.{i}.norm2.bias", COPY},
};
/* NewModel's optional pooler (add_pooling_layer), and the position_ids buffer
 * older exports saved */
static const char *const gte_ignored[] = {"pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids",
                                          NULL};

/* refenc's own names, nn.TransformerEncoder's (params.h) */
static const refenc_ck_entry vaswani[] = {
    {"embedding.weight", "embedding.weight", COPY},
    {"token_type_embedding.weight", "token_type_embedding.weight", COPY},
    {"pos_embedding.weight", "pos_embedding.weight", COPY},
    {"embedding_norm.weight", "embedding_norm.weight", COPY},
    {"embedding_norm.bias", "embedding_norm.bias", COPY},
    {"layers.{i}.self_attn.in_proj_weight", "layers.{i}.self_attn.in_proj_weight", COPY},
    {"layers.{i}.self_attn.in_proj_bias", "layers.{i}.self_attn.in_proj_bias", COPY},
    {"layers.{i}.self_attn.out_proj.weight", "layers.{i}.self_attn.out_proj.weight", COPY},
    {"layers.{i}.self_attn.out_proj.bias", "layers.{i}.self_attn.out_proj.bias", COPY},
    {"layers.{i}.linear1.weight", "layers.{i}.linear1.weight", COPY},
    {"layers.{i}.linear1.bias", "layers.{i}.linear1.bias", COPY},
    {"layers.{i}.linear2.weight", "layers.{i}.linear2.weight", COPY},
    {"layers.{i}.linear2.bias", "layers.{i}.linear2.bias", COPY},
    {"layers.{i}.norm1.weight", "layers.{i}.norm1.weight", COPY},
    {"layers.{i}.norm1.bias", "layers.{i}.norm1.bias", COPY},
    {"layers.{i}.norm2.weight", "layers.{i}.norm2.weight", COPY},
    {"layers.{i}.norm2.bias", "layers.{i}.norm2.bias", COPY},
    {"norm.weight", "norm.weight", COPY},
    {"norm.bias", "norm.bias", COPY},
    {"layers.{i}.self_attn.q_norm.weight", "layers.{i}.self_attn.q_norm.weight", COPY}, /* qk_norm 'rms' */
    {"layers.{i}.self_attn.k_norm.weight", "layers.{i}.self_attn.k_norm.weight", COPY},
    {"layers.{i}.self_attn.relative_attention_bias.weight", "layers.{i}.self_attn.relative_attention_bias.weight",
     COPY}, /* T5's table, layer 0 only */
};
static const char *const none_ignored[] = {NULL};

#define N_OF(t) (sizeof t / sizeof t[0])

static const struct {
    const refenc_ck_entry *table;
    size_t n;
    const char *prefix;
    const char *const *ignored;
    int gqa; /* 1: the names hold grouped-query attention and head_dim */
} families[REFENC_FAMILY_COUNT] = {
    [REFENC_FAMILY_VASWANI] = {vaswani, N_OF(vaswani), "", none_ignored, 1},
    [REFENC_FAMILY_BERT] = {bert, N_OF(bert), "bert.", bert_ignored, 0},
    [REFENC_FAMILY_ROBERTA] = {bert, N_OF(bert), "roberta.", bert_ignored, 0},
    [REFENC_FAMILY_DISTILBERT] = {distilbert, N_OF(distilbert), "distilbert.", distilbert_ignored, 0},
    [REFENC_FAMILY_GPT2] = {gpt2, N_OF(gpt2), "transformer.", gpt2_ignored, 0},
    [REFENC_FAMILY_CLIP_TEXT] = {clip_text, N_OF(clip_text), "text_model.", clip_ignored, 0},
    [REFENC_FAMILY_LLAMA] = {llama, N_OF(llama), "model.", llama_ignored, 1},
    [REFENC_FAMILY_MISTRAL] = {llama, N_OF(llama), "model.", llama_ignored, 1},
    [REFENC_FAMILY_QWEN2] = {llama, N_OF(llama), "model.", llama_ignored, 1},
    [REFENC_FAMILY_QWEN3] = {llama, N_OF(llama), "model.", llama_ignored, 1},
    [REFENC_FAMILY_MODERNBERT] = {modernbert, N_OF(modernbert), "model.", none_ignored, 0},
    [REFENC_FAMILY_GEMMA3] = {gemma3, N_OF(gemma3), "model.", llama_ignored, 1},
    [REFENC_FAMILY_T5_ENCODER] = {t5_encoder, N_OF(t5_encoder), "", t5_ignored, 1}, /* d_kv: head_dim */
    [REFENC_FAMILY_NOMIC_BERT] = {nomic_bert, N_OF(nomic_bert), "bert.", nomic_ignored, 0},
    [REFENC_FAMILY_JINA_BERT_V2] = {jina_bert_v2, N_OF(jina_bert_v2), "bert.", bert_ignored, 0},
    [REFENC_FAMILY_GTE] = {gte, N_OF(gte), "new.", gte_ignored, 0},
};

const refenc_ck_entry *refenc_checkpoint_table(refenc_family family, size_t *n,
                                               const char **prefix)
{
    if ((unsigned)family >= REFENC_FAMILY_COUNT)
        return NULL;
    *n = families[family].n;
    if (prefix != NULL)
        *prefix = families[family].prefix;
    return families[family].table;
}

/* ---- names with "{i}" ---------------------------------------------------------- */

/* Whether name matches pattern, "{i}" standing for a layer index written
 * without leading zeros (*i receives it; SIZE_MAX when there is none). */
static int name_match(const char *pattern, const char *name, size_t *i)
{
    *i = SIZE_MAX;
    const char *slot = strstr(pattern, "{i}");
    if (slot == NULL)
        return strcmp(pattern, name) == 0;
    const size_t head = (size_t)(slot - pattern);
    if (strncmp(pattern, name, head) != 0)
        return 0;
    const char *d = name + head;
    size_t v = 0, nd = 0;
    while (d[nd] >= '0' && d[nd] <= '9') {
        if (v > (SIZE_MAX - 9) / 10)
            return 0;
        v = v * 10 + (size_t)(d[nd] - '0');
        nd++;
    }
    if (nd == 0 || (nd > 1 && d[0] == '0'))
        return 0;
    if (strcmp(d + nd, slot + 3) != 0)
        return 0;
    *i = v;
    return 1;
}

/* pattern with "{i}" replaced by i. */
static void name_expand(char *buf, size_t cap, const char *pattern, size_t i)
{
    const char *slot = strstr(pattern, "{i}");
    if (slot == NULL)
        snprintf(buf, cap, "%s", pattern);
    else
        snprintf(buf, cap, "%.*s%zu%s", (int)(slot - pattern), pattern, i, slot + 3);
}

/* ---- problems --------------------------------------------------------------------- */

/* Every problem of one load, one per line; the first also goes to err. */
typedef struct {
    char *text;
    size_t len, cap, count;
    int oom;
    char first[REFENC_ERRMSG_MAX];
} problems_list;

static void problem(problems_list *pl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(problems_list *pl, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (pl->count++ == 0) /* cut, to fit err's message */
        snprintf(pl->first, sizeof pl->first, "%.*s", (int)sizeof pl->first - 1, line);
    const size_t n = strlen(line);
    if (pl->len + n + 2 > pl->cap) {
        const size_t cap = (pl->cap ? 2 * pl->cap : 1024) + n + 2;
        char *t = realloc(pl->text, cap);
        if (t == NULL) {
            pl->oom = 1;
            return;
        }
        pl->text = t;
        pl->cap = cap;
    }
    memcpy(pl->text + pl->len, line, n);
    pl->len += n;
    pl->text[pl->len++] = '\n';
    pl->text[pl->len] = '\0';
}

/* ---- the loader ----------------------------------------------------------------- */

/* The rows [*first, *first + *count) of the refenc tensor t (in_proj or
 * linear1, its weight or bias) that a row-block layout fills: q, k, v by the
 * grouped-query sizes (params.h), gate and up by glu_gate. */
static void block_rows(const refenc_config *cfg, const refenc_tensor *t, refenc_ck_layout layout, size_t *first,
                       size_t *count)
{
    if (layout == REFENC_CK_GATE || layout == REFENC_CK_UP) {
        const int second = (layout == REFENC_CK_GATE) == (cfg->glu_gate == REFENC_GLU_GATE_SECOND);
        *count = t->shape[0] / 2;
        *first = second ? *count : 0;
        return;
    }
    const size_t Dh = refenc_config_head_dim(cfg), E = cfg->n_heads * Dh, Ekv = refenc_config_kv_heads(cfg) * Dh;
    *count = layout == REFENC_CK_Q ? E : Ekv;
    *first = layout == REFENC_CK_Q ? 0 : layout == REFENC_CK_K ? E : E + Ekv;
}

/* The checkpoint shape a refenc tensor's source has, for a layout. */
static size_t source_shape(size_t shape[2], const refenc_config *cfg, const refenc_tensor *t, refenc_ck_layout layout)
{
    if (layout == REFENC_CK_TRANSPOSE && t->ndim == 2) {
        shape[0] = t->shape[1], shape[1] = t->shape[0];
        return 2;
    }
    shape[0] = t->shape[0], shape[1] = t->shape[1];
    size_t first;
    if (layout >= REFENC_CK_Q)
        block_rows(cfg, t, layout, &first, &shape[0]); /* one of the row blocks */
    return t->ndim;
}

/* Writes the source's values (as read, n of them) into the refenc tensor. */
static void place(refenc_tensor *t, const refenc_config *cfg, const double *v, refenc_ck_layout layout)
{
    if (layout == REFENC_CK_COPY) {
        memcpy(t->data, v, t->size * sizeof(double));
    } else if (layout == REFENC_CK_TRANSPOSE) { /* v (in, out) -> t (out, in); 2-D only */
        const size_t out = t->shape[0], in = t->shape[1];
        for (size_t o = 0; o < out; o++)
            for (size_t k = 0; k < in; k++)
                t->data[o * in + k] = v[k * out + o];
    } else { /* a row block: q, k, v of in_proj, gate or up of linear1 */
        const size_t width = t->ndim == 2 ? t->shape[1] : 1;
        size_t first, count;
        block_rows(cfg, t, layout, &first, &count);
        memcpy(t->data + first * width, v, count * width * sizeof(double));
    }
}

/* The bits a layout fills of its tensor: one per row block, all for the others. */
static unsigned layout_bits(refenc_ck_layout layout)
{
    if (layout == REFENC_CK_GATE || layout == REFENC_CK_UP)
        return 1u << (layout - REFENC_CK_GATE);
    return layout >= REFENC_CK_Q ? 1u << (layout - REFENC_CK_Q) : 7u;
}

static int is_ignored(const char *const *ignored, const char *name)
{
    size_t i;
    for (size_t k = 0; ignored[k] != NULL; k++)
        if (name_match(ignored[k], name, &i))
            return 1;
    return 0;
}

static const char *const layout_words[] = {"copied", "transposed from Conv1D (in, out)",
                                           "rows [0, D)", "rows [D, 2D)", "rows [2D, 3D)"};
static const char *const gqa_words[] = {"rows [0, H Dh)", "rows [H Dh, H Dh + Hkv Dh)",
                                        "rows [H Dh + Hkv Dh, H Dh + 2 Hkv Dh)"};

/* How a layout fills its refenc tensor, in words (the blocks of in_proj as
 * multiples of D under multi-head attention). */
static const char *layout_text(const refenc_config *cfg, refenc_ck_layout layout)
{
    if (layout == REFENC_CK_GATE || layout == REFENC_CK_UP)
        return (layout == REFENC_CK_GATE) == (cfg->glu_gate == REFENC_GLU_GATE_FIRST) ? "rows [0, F), the gate first"
                                                                                       : "rows [F, 2F)";
    if (layout >= REFENC_CK_Q && !refenc_config_attention_is_mha(cfg))
        return gqa_words[layout - REFENC_CK_Q];
    return layout_words[layout];
}

/* One loading of a checkpoint into p: the family's names, what was seen and the problems found. */
typedef struct {
    refenc_params *p;
    const refenc_config *cfg;
    const refenc_st_file *f;
    refenc_ck_report *rep;
    const char *prefix; /* the family's, in use when some tensor carries it */
    size_t plen;
    int use_prefix;
    unsigned char *seen; /* q/k/v bits per tensor of p */
    double *buf;         /* one tensor in double, the size of p's largest */
    problems_list pl;
} ck_load;

/* The refenc tensor that checkpoint tensor s fills, with its table entry; NULL (and a problem
 * noted) when s is not a parameter of this config. */
static refenc_tensor *ck_target(ck_load *ld, const refenc_st_tensor *s, const char *local_name,
                                const char *shape_s, const refenc_ck_entry **entry, char *rname, size_t rsize)
{
    const refenc_ck_entry *table = families[ld->cfg->family].table;
    const size_t n_table = families[ld->cfg->family].n;
    const refenc_ck_entry *e = NULL;
    size_t layer = SIZE_MAX;
    for (size_t r = 0; r < n_table && e == NULL; r++)
        if (name_match(table[r].checkpoint, local_name, &layer))
            e = &table[r];
    if (e == NULL) {
        problem(&ld->pl, "%s: tensor '%s' %s is not a parameter of a %s encoder", ld->f->path, s->name,
                shape_s, refenc_family_name(ld->cfg->family));
        return NULL;
    }
    if (layer != SIZE_MAX && layer >= ld->cfg->n_layers) {
        problem(&ld->pl, "%s: tensor '%s' %s belongs to layer %zu, but the config has n_layers = %zu",
                ld->f->path, s->name, shape_s, layer, ld->cfg->n_layers);
        return NULL;
    }
    name_expand(rname, rsize, e->refenc, layer);
    refenc_tensor *t = refenc_params_find(ld->p, rname);
    if (t == NULL)
        problem(&ld->pl, "%s: tensor '%s' %s maps to refenc's '%s', which this config does not have "
                "(see type_vocab_size, embedding_norm, positional, final_norm, linear_bias, linear1_bias, qkv_bias, "
                "qk_norm, skip_first_prenorm, sandwich_norm, relative_attention_num_buckets)", ld->f->path, s->name,
                shape_s, rname);
    *entry = e;
    return t;
}

/* Checkpoint tensor s into its refenc tensor, converted and laid out; a tensor outside the prefix,
 * an ignored buffer or an unfit one is counted or noted as a problem.  Returns an error only when
 * the file cannot be read. */
static int ck_map_tensor(ck_load *ld, const refenc_st_tensor *s, refenc_error *err)
{
    char shape_s[128];
    refenc_shape_format(shape_s, sizeof shape_s, s->shape, s->ndim, "()");
    if (ld->use_prefix && strncmp(s->name, ld->prefix, ld->plen) != 0) {
        ld->rep->ignored_outside++;
        return REFENC_OK;
    }
    const char *local_name = s->name + (ld->use_prefix ? ld->plen : 0);
    if (is_ignored(families[ld->cfg->family].ignored, local_name)) {
        ld->rep->ignored_buffers++;
        return REFENC_OK;
    }
    const refenc_ck_entry *e = NULL;
    char rname[REFENC_TENSOR_NAME_MAX];
    refenc_tensor *t = ck_target(ld, s, local_name, shape_s, &e, rname, sizeof rname);
    if (t == NULL)
        return REFENC_OK;
    size_t want[2];
    const size_t nd = source_shape(want, ld->cfg, t, e->layout);
    ld->seen[t - ld->p->tensors] |= (unsigned char)layout_bits(e->layout); /* found, if unfit */
    if (!refenc_st_shape_is(s, nd, want)) {
        char want_s[128];
        refenc_shape_format(want_s, sizeof want_s, want, nd, "()");
        problem(&ld->pl, "%s: tensor '%s' has shape %s, expected %s (refenc's '%s', %s)", ld->f->path,
                s->name, shape_s, want_s, rname, layout_text(ld->cfg, e->layout));
        return REFENC_OK;
    }
    if (s->dtype != REFENC_ST_F64 && s->dtype != REFENC_ST_F32 && s->dtype != REFENC_ST_F16 &&
        s->dtype != REFENC_ST_BF16) {
        problem(&ld->pl, "%s: tensor '%s' %s has dtype %s, not a floating type (F64, F32, F16, BF16)",
                ld->f->path, s->name, shape_s, refenc_st_dtype_name(s->dtype));
        return REFENC_OK;
    }
    const int st = refenc_st_to_f64(ld->buf, ld->f, s, err);
    if (st == REFENC_OK) {
        place(t, ld->cfg, ld->buf, e->layout);
        ld->rep->mapped++;
    }
    return st;
}

/* Every parameter, and every row block of in_proj, must have come: a problem for each missing. */
static void ck_note_missing(ck_load *ld)
{
    const refenc_ck_entry *table = families[ld->cfg->family].table;
    const size_t n_table = families[ld->cfg->family].n;
    for (size_t k = 0; k < ld->p->n_tensors; k++) {
        const refenc_tensor *t = &ld->p->tensors[k];
        if (ld->seen[k] == 7)
            continue;
        for (size_t r = 0; r < n_table; r++) {
            size_t layer;
            if (!name_match(table[r].refenc, t->name, &layer) ||
                (ld->seen[k] & layout_bits(table[r].layout)) != 0)
                continue;
            char cname[256], want_s[128];
            size_t want[2];
            name_expand(cname, sizeof cname, table[r].checkpoint, layer);
            refenc_shape_format(want_s, sizeof want_s, want, source_shape(want, ld->cfg, t, table[r].layout),
                                "()");
            problem(&ld->pl, "%s: tensor '%s%s' %s is missing (refenc's '%s', %s)", ld->f->path,
                    ld->rep->prefix, cname, want_s, t->name, layout_text(ld->cfg, table[r].layout));
        }
    }
}

/* Whether name, after the family's prefix if it has it, is a tensor of the family's table or one
 * of its ignored buffers. */
static int ck_known(const ck_load *ld, const char *name)
{
    const refenc_ck_entry *table = families[ld->cfg->family].table;
    const size_t n_table = families[ld->cfg->family].n;
    size_t layer;
    if (ld->plen > 0 && strncmp(name, ld->prefix, ld->plen) == 0)
        name += ld->plen;
    for (size_t r = 0; r < n_table; r++)
        if (name_match(table[r].checkpoint, name, &layer))
            return 1;
    return is_ignored(families[ld->cfg->family].ignored, name);
}

/* A prefix every name carries and the family does not know, as the problem: when no name is known
 * as it is and some are without the prefix.  Returns REFENC_OK when that is not the case. */
static int ck_foreign_prefix(const ck_load *ld, refenc_error *err)
{
    size_t plen = name_prefix_common(ld->f);
    if (ld->use_prefix || plen == 0)
        return REFENC_OK;
    const char *first = ld->f->tensors[0].name; /* "model.bert.": only "model." is unknown */
    if (ld->plen > 0 && plen > ld->plen && strncmp(first + plen - ld->plen, ld->prefix, ld->plen) == 0)
        plen -= ld->plen;
    const char *stripped = NULL;
    for (size_t k = 0; k < ld->f->n_tensors; k++) {
        const char *name = ld->f->tensors[k].name;
        if (ck_known(ld, name))
            return REFENC_OK;
        if (stripped == NULL && ck_known(ld, name + plen))
            stripped = name;
    }
    if (stripped == NULL)
        return REFENC_OK;
    char whose[64];
    snprintf(whose, sizeof whose, "a %s checkpoint's", refenc_family_name(ld->cfg->family));
    return name_prefix_refuse(ld->f, plen, whose, stripped, err);
}

/* The buffers of a loading: the seen bits and one tensor's worth of doubles. */
static int ck_alloc(ck_load *ld)
{
    size_t max_n = 0;
    for (size_t k = 0; k < ld->p->n_tensors; k++)
        max_n = ld->p->tensors[k].size > max_n ? ld->p->tensors[k].size : max_n;
    ld->seen = calloc(ld->p->n_tensors ? ld->p->n_tensors : 1, 1);
    ld->buf = refenc_alloc_array(max_n ? max_n : 1, sizeof(double));
    return ld->seen != NULL && ld->buf != NULL;
}

int refenc_params_from_checkpoint(refenc_params *p, const refenc_config *cfg,
                                  const refenc_st_file *f, refenc_ck_report *rep,
                                  char **problems, refenc_error *err)
{
    refenc_ck_report local;
    if (rep == NULL)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    if (problems != NULL)
        *problems = NULL;
    if ((unsigned)cfg->family >= REFENC_FAMILY_COUNT)
        return refenc_error_set(err, REFENC_EINVAL, "%s: unknown family %d", f->path, (int)cfg->family);
    if (!families[cfg->family].gqa && !refenc_config_attention_is_mha(cfg))
        return refenc_error_set(err, REFENC_EINVAL,
                                "%s: config key %s: the %s family's names hold q, k and v as three blocks "
                                "of d_model rows (or one fused (D, 3D) c_attn), which grouped-query "
                                "attention and head_dim do not have; save the weights under refenc's "
                                "names (docs/families.md)", f->path,
                                refenc_config_kv_heads(cfg) != cfg->n_heads ? "n_kv_heads" : "head_dim",
                                refenc_family_name(cfg->family));
    ck_load ld = {.p = p, .cfg = cfg, .f = f, .rep = rep, .prefix = families[cfg->family].prefix};

    /* the prefix, when some tensor carries it */
    ld.plen = strlen(ld.prefix);
    for (size_t k = 0; ld.plen > 0 && k < f->n_tensors && !ld.use_prefix; k++)
        ld.use_prefix = strncmp(f->tensors[k].name, ld.prefix, ld.plen) == 0;
    rep->prefix = ld.use_prefix ? ld.prefix : "";
    const int foreign = ck_foreign_prefix(&ld, err);
    if (foreign != REFENC_OK)
        return foreign;

    if (!ck_alloc(&ld)) {
        free(ld.seen);
        free(ld.buf);
        return refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", f->path);
    }
    int st = REFENC_OK;
    for (size_t k = 0; k < f->n_tensors && st == REFENC_OK; k++)
        st = ck_map_tensor(&ld, &f->tensors[k], err);
    if (st == REFENC_OK)
        ck_note_missing(&ld);
    free(ld.seen);
    free(ld.buf);
    const problems_list *pl = &ld.pl;
    if (st == REFENC_OK && (pl->count > 0 || pl->oom)) {
        st = pl->oom ? refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", f->path)
             : pl->count == 1 ? refenc_error_set(err, REFENC_EFORMAT, "%s", pl->first)
                              : refenc_error_set(err, REFENC_EFORMAT, "%s (and %zu more problems)",
                                                 pl->first, pl->count - 1);
    }
    if (st == REFENC_OK || problems == NULL)
        free(pl->text);
    else
        *problems = pl->text;
    return st;
}
