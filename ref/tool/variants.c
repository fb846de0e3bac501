#include "variants.h"

#include <math.h>
#include <string.h>

#include "../embedding.h"
#include "../layer_pattern.h"
#include "../rope_scaling.h"

static const refenc_variant_info table[REFENC_VAR_FIRST_BACKWARD] = {
    [REFENC_VAR_LAYERNORM_EPS_X10] = {
        "layernorm_eps_x10", "layernorm_eps",
        "LayerNorm outputs shrink toward beta where the row variance is small",
        "LayerNorm eps is 10 times the configured value (e.g. 1e-4 for 1e-5)",
        "use the config's layer_norm_eps (PyTorch's default is 1e-5, BERT's 1e-12)"},
    [REFENC_VAR_LAYERNORM_EPS_DIV10] = {
        "layernorm_eps_div10", "layernorm_eps",
        "LayerNorm outputs grow where the row variance is small",
        "LayerNorm eps is a tenth of the configured value (e.g. 1e-6 for 1e-5)",
        "use the config's layer_norm_eps (PyTorch's default is 1e-5, BERT's 1e-12)"},
    [REFENC_VAR_UNBIASED_VARIANCE] = {
        "unbiased_variance", "unbiased_variance",
        "LayerNorm outputs are smaller by a factor sqrt((D-1)/D)",
        "LayerNorm divides the squared deviations by D - 1 (unbiased variance, "
        "torch.var's default) instead of D",
        "use the biased variance: mean((x - mean)^2), i.e. torch.var(x, unbiased=False)"},
    [REFENC_VAR_GELU_TANH_FOR_EXACT] = {
        "gelu_tanh_for_exact", "gelu_tanh_for_exact",
        "FFN outputs differ by up to about 5e-4 per hidden unit, most near |x| = 2",
        "the tanh approximation of GELU is used where the exact x * Phi(x) is meant",
        "use exact GELU: F.gelu(x) (approximate='none'), x * 0.5 * (1 + erf(x / sqrt(2)))"},
    [REFENC_VAR_GELU_EXACT_FOR_TANH] = {
        "gelu_exact_for_tanh", "gelu_exact_for_tanh",
        "FFN outputs differ by up to about 5e-4 per hidden unit, most near |x| = 2",
        "exact GELU is used where the tanh approximation is meant (GPT-2's gelu_new)",
        "use F.gelu(x, approximate='tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"},
    [REFENC_VAR_ROPE_LAYOUT_SWAPPED] = {
        "rope_layout_swapped", "rope_layout_swapped",
        "q and k rotated at the right angles but in the wrong coordinate pairs; "
        "position 0 is unaffected",
        "RoPE pairs coordinates in the other layout: rotate_half (j, j + Dh/2) vs "
        "interleaved (2j, 2j + 1)",
        "use the config's rope_layout: 'half' as GPT-NeoX / HF LLaMA, 'interleaved' as "
        "RoFormer / GPT-J (converting weights between them permutes W_q and W_k rows)"},
    [REFENC_VAR_ROPE_BASE_WRONG] = {
        "rope_base_wrong", "rope_base_wrong",
        "rotations right at position 0, increasingly wrong with the position",
        "RoPE frequencies use the wrong base (10000 where 500000 is meant, or the reverse)",
        "use the config's rope_base: theta_j = base^(-2j/Dh) (Llama 2: 10000, Llama 3: 500000)"},
    [REFENC_VAR_ATTENTION_SCALE_SQRT_D] = {
        "attention_scale_sqrt_d", "attention_scale_sqrt_d",
        "attention weights too flat (scores divided by too much)",
        "scores are divided by sqrt(d_model) instead of sqrt(head width)",
        "scale by 1/sqrt(Dh), Dh = head_dim or d_model / n_heads"},
    [REFENC_VAR_ATTENTION_UNSCALED] = {
        "attention_unscaled", "attention_unscaled",
        "attention weights too sharp (scores not scaled)",
        "the 1/sqrt(Dh) scaling of the scores is missing",
        "divide q.k by sqrt(Dh) (and by the temperature, if any) before the softmax"},
    [REFENC_VAR_MISSING_FINAL_NORM] = {
        "missing_final_norm", "missing_final_norm",
        "every layer matches, the final output does not (it is not normalised)",
        "the final LayerNorm of a Pre-LN stack is missing",
        "apply the stack's final LayerNorm (nn.TransformerEncoder(norm=...)) after the last "
        "Pre-LN layer"},
    [REFENC_VAR_EMBEDDING_UNSCALED] = {
        "embedding_unscaled", "embedding_unscaled",
        "the embedded input is sqrt(d_model) times too small",
        "token embeddings are not multiplied by sqrt(d_model)",
        "multiply the embedding lookup by sqrt(d_model) before adding the positional encoding"},
    [REFENC_VAR_ALIBI_SLOPES_POW2] = {
        "alibi_slopes_pow2", "alibi_slopes_pow2",
        "correct for a power-of-two head count; wrong biases for the others",
        "ALiBi slopes computed as 2^(-8(h+1)/H) for a head count H that is not a power of two",
        "for H not a power of two take the slopes of the closest power of two C below H, then "
        "every other slope of the sequence for 2C heads (the ALiBi paper's get_slopes)"},
    [REFENC_VAR_PADDING_MASK_INVERTED] = {
        "padding_mask_inverted", "padding_mask_inverted",
        "outputs of every item with padding wrong; tokens attend only to padding",
        "the key padding mask's polarity is inverted (1 taken as 'attend')",
        "mask the keys where key_padding_mask is 1 (True = padding, as in PyTorch)"},
    [REFENC_VAR_PRE_POST_SWAPPED] = {
        "pre_post_swapped", "pre_post_swapped",
        "everything after the input differs from the first layer on",
        "the layer is Post-LN where Pre-LN is meant, or the reverse (norm_first)",
        "Pre-LN: x + f(LN(x)); Post-LN: LN(x + f(x)); check norm_first"},
    [REFENC_VAR_HEADS_MERGED_WITHOUT_TRANSPOSE] = {
        "heads_merged_without_transpose", "heads_merged_without_transpose",
        "attention weights right, the attention block's output scrambled across positions",
        "the heads' outputs (B, H, L, Dh) are reshaped to (B, L, D) without transposing H and L",
        "transpose to (B, L, H, Dh) before the reshape: ctx.transpose(1, 2).reshape(B, L, D)"},
    [REFENC_VAR_EPS_1E5_FOR_1E12] = {
        "layernorm_eps_1e-5_for_1e-12", "layernorm_eps_1e-5_for_1e-12",
        "LayerNorm outputs shrink toward beta in rows of small variance: the embedding "
        "LayerNorm first",
        "LayerNorm eps is PyTorch's default 1e-5 where the model's 1e-12 is meant (BERT, "
        "DistilBERT: nn.LayerNorm built without config.layer_norm_eps)",
        "pass the model's eps to every LayerNorm, the embedding LayerNorm included: "
        "nn.LayerNorm(D, eps=config.layer_norm_eps)"},
    [REFENC_VAR_EPS_1E12_FOR_1E5] = {
        "layernorm_eps_1e-12_for_1e-5", "layernorm_eps_1e-12_for_1e-5",
        "LayerNorm outputs grow in rows of small variance: the embedding LayerNorm first",
        "LayerNorm eps is BERT's 1e-12 where 1e-5 is meant (RoBERTa, GPT-2 and CLIP use 1e-5: "
        "a BERT implementation reused for them)",
        "take eps from the model's config: RoBERTa's layer_norm_eps is 1e-5, not BERT's 1e-12"},
    [REFENC_VAR_EMBEDDING_NORM_MISSING] = {
        "embedding_norm_missing", "embedding_norm_missing",
        "the embedded input is not normalised: every row's mean and scale are off from the "
        "first step",
        "the LayerNorm after the embedding sum (BERT's embeddings.LayerNorm) is missing",
        "apply the embedding LayerNorm, with its own gamma, beta and eps, to word + type + "
        "position embeddings before the first layer"},
    [REFENC_VAR_TOKEN_TYPES_IGNORED] = {
        "token_types_ignored", "token_types_ignored",
        "positions of token type 1 differ from the first step; type-0 positions are right "
        "until attention mixes them in",
        "token_type_ids are not passed: every position gets type 0 (HF's default)",
        "pass the segment ids (token_type_ids) with the input ids: the second sentence of a "
        "pair is type 1"},
    [REFENC_VAR_ROBERTA_POSITIONS_FROM_ZERO] = {
        "roberta_positions_from_zero", "roberta_positions_from_zero",
        "every position's embedding is shifted by padding_idx + 1 rows of the table; padding "
        "moves the rest",
        "RoBERTa's positions counted 0 .. L-1 (BERT's rule) instead of from padding_idx + 1 "
        "over the non-padding tokens",
        "create the position ids as RoBERTa does: cumsum(ids != padding_idx) * (ids != "
        "padding_idx) + padding_idx (create_position_ids_from_input_ids)"},
    [REFENC_VAR_CONV1D_NOT_TRANSPOSED] = {
        "conv1d_not_transposed", "conv1d_not_transposed",
        "attention weights right, the attention block's output wrong from the first layer on",
        "GPT-2's square Conv1D weight attn.c_proj (stored (in, out), used as x W + b) loaded "
        "into an nn.Linear (out, in) as it is: W where W^T is meant (the non-square ones "
        "would not load)",
        "transpose every Conv1D weight (c_attn, c_proj, c_fc, mlp.c_proj) when moving GPT-2's "
        "weights into nn.Linear layers"},
    [REFENC_VAR_QUICK_GELU_FOR_GELU] = {
        "quick_gelu_for_gelu", "quick_gelu_for_gelu",
        "FFN outputs differ by up to 0.02 per hidden unit, most near x = 2.3",
        "quick GELU x sigmoid(1.702 x) (CLIP's) where the exact or tanh GELU is meant",
        "use the model's activation: hidden_act 'gelu' (exact) for BERT, 'gelu_new' (tanh) for "
        "GPT-2; quick_gelu only for OpenAI's CLIP"},
    [REFENC_VAR_GELU_FOR_QUICK_GELU] = {
        "gelu_for_quick_gelu", "gelu_for_quick_gelu",
        "FFN outputs differ by up to 0.02 per hidden unit, most near x = 2.3",
        "exact GELU where CLIP's quick GELU x sigmoid(1.702 x) is meant (OpenAI's CLIP weights "
        "were trained with quick_gelu; OpenCLIP's with exact GELU)",
        "use hidden_act 'quick_gelu': x * torch.sigmoid(1.702 * x)"},
    [REFENC_VAR_EMBEDDING_SCALED] = {
        "embedding_scaled", "embedding_scaled",
        "the embedded input is sqrt(d_model) times too large",
        "token embeddings multiplied by sqrt(d_model) (the original Transformer's) in a model "
        "that does not scale them (BERT, GPT-2, CLIP)",
        "look the embeddings up as stored: wte(ids), word_embeddings(ids), without a factor"},
    [REFENC_VAR_GLU_HALVES_SWAPPED] = {
        "glu_halves_swapped", "glu_halves_swapped",
        "FFN outputs wrong everywhere, yet coherent-looking: the activation lands on the "
        "wrong half of the gated projection",
        "the gated FFN activates the up half and multiplies by the gate: the halves of the "
        "fused [a | b] projection swapped, or the gate/up matrices loaded in the other order "
        "(nntrainer#4194), or SwiGLU's operands swapped, silu(up) * gate (mlx-lm#767): one "
        "function for fused and separate weights",
        "activate the half the model's code activates: the first for ModernBERT and Jina "
        "(input, gate = Wi(x).chunk(2)), the second for GTE (up_gate_proj = [up | gate]), "
        "silu(gate_proj(x)) * up_proj(x) for Llama"},
    [REFENC_VAR_GQA_TILED] = {
        "gqa_tiled", "gqa_tiled",
        "attention weights and outputs wrong in every head but those of the first group: "
        "query heads attend with another group's keys and values",
        "grouped-query attention's key/value heads tiled, [kv0, kv1, kv0, kv1], where each is "
        "repeated for its group, [kv0, kv0, kv1, kv1]: query head h reads key/value head h % n_kv_heads "
        "instead of h / (n_heads / n_kv_heads) (onnx/onnx#7274, apple/axlearn#842, "
        "huggingface/transformers#41423)",
        "repeat each key/value head for its group as Hugging Face's repeat_kv does: "
        "k.repeat_interleave(n_heads // n_kv_heads, dim=1), or expand (B, Hkv, 1, L, Dh) to "
        "(B, Hkv, g, L, Dh) and reshape; not k.repeat(1, g, 1, 1) or a Tile"},
    [REFENC_VAR_SOFTCAP_MISSING] = {
        "softcap_missing", "softcap_missing",
        "attention too sharp where scores are large: weights of the largest scores too high, "
        "unchanged where every |score| is small against the cap",
        "attn_logit_softcapping not applied: the scores go to the softmax uncapped, where "
        "cap * tanh(score / cap) is meant (sgl-project/sglang#33915, vllm-project/vllm-metal#665, "
        "kekzl/imp#688, sgl-project/sgl-kernel-xpu#491: a kernel that accepts the cap and drops it)",
        "after the scaling and before the mask: scores = cap * tanh(scores / cap) "
        "(Gemma2Attention), or pass softcap=cap to a kernel that applies it"},
    [REFENC_VAR_QUERY_SCALE_HEAD_DIM] = {
        "query_scale_head_dim", "query_scale_head_dim",
        "attention sharper or flatter by sqrt(query_pre_attn_scalar / head_dim) in every head",
        "scores scaled by head_dim^-0.5 although query_pre_attn_scalar sets the scale "
        "(antonellof/ferrox#40: Gemma-2/3 27B, where query_pre_attn_scalar = d_model / n_heads "
        "= 144 and head_dim = 128; google/gemma_pytorch#71)",
        "scale the scores by query_pre_attn_scalar^-0.5 when the config sets it "
        "(Gemma2Attention: self.scaling = config.query_pre_attn_scalar**-0.5)"},
    [REFENC_VAR_SOFTCAP_AFTER_MASK] = {
        "softcap_after_mask", "softcap_after_mask",
        "masked keys (padding, causal, -inf in attn_mask) get weight: a masked score becomes -cap, "
        "finite, instead of -inf; fully masked rows get uniform weights",
        "the soft-cap applied after the masks and biases, cap * tanh((score + bias) / cap), where "
        "Gemma 2 caps the bare scaled score and adds the mask after it (onnx/onnx#7865: the ONNX "
        "Attention op's definition; emmtrix/emx-onnx-cgen#731; the review of "
        "sgl-project/sgl-kernel-xpu#491; Dao-AILab/flash-attention#1025)",
        "cap the scaled scores first, then add ALiBi, the additive mask and the masks: "
        "scores = cap * tanh(scores / cap); scores = scores + mask"},
    [REFENC_VAR_WINDOW_OFF_BY_ONE] = {
        "window_off_by_one", "window_off_by_one",
        "rows near the window's edge attend one key too many on each windowed side: the weight of "
        "keys just outside the window is not 0; rows whose window reaches the sequence's ends unchanged",
        "the attention window one key wider than Hugging Face's inclusive rule: FlashAttention given "
        "window_size (w, w) for a causal window of w keys, so 2w+1 or w+1 keys "
        "(huggingface/transformers#39408, #40163, #26792; ml-explore/mlx-lm#390: a window of 128 "
        "attended 129 keys; apple/axlearn#1009; sgl-project/sglang#26147: exclusive against inclusive)",
        "sliding_window w: key j is seen iff i - w < j <= i (w keys with the query's own; "
        "FlashAttention window_size (w - 1, 0)); local_attention w: |i - j| <= w // 2 "
        "(window_size (w // 2, w // 2))"},
    [REFENC_VAR_WINDOW_IGNORED] = {
        "window_ignored", "window_ignored",
        "every row attends to keys outside its window: the output of a long sequence is a global "
        "attention's, short rows near the start unchanged",
        "the attention window never reaches the kernel: full (causal or bidirectional) attention "
        "where sliding_window or local_attention is set (huggingface/transformers#30127: the window "
        "not passed to SDPA; unslothai/unsloth#8253; vllm-project/semantic-router#3406: a flash "
        "path that ignored the window and the padding mask)",
        "pass the window to every attention path (the mask, or FlashAttention's window_size) and "
        "test a sequence longer than the window"},
    [REFENC_VAR_LOCAL_BASE_ON_GLOBAL_LAYER0] = {
        "local_base_on_global_layer0", "local_base_on_global_layer0",
        "the global layers' outputs (layer 0 first) differ while the windows are right: every "
        "rotation uses the local layers' frequencies",
        "every layer, layer 0 included, rotated with the local RoPE base (ModernBERT's 10 000) "
        "where global_attn_every_n_layers makes layer 0, n, 2n, ... global with global_rope_theta "
        "(160 000) (ggml-org/llama.cpp#18330: the layer pattern lacked \"dense first\", so layer 0 "
        "took the local base; \"countless hours\")",
        "take each layer's base from its type: global iff layer % global_attn_every_n_layers == 0 "
        "(layer 0 is global) with global_rope_theta, local_rope_theta otherwise"},
    [REFENC_VAR_ROPE_SCALING_ON_LOCAL_LAYERS] = {
        "rope_scaling_on_local_layers", "rope_scaling_on_local_layers",
        "the local (sliding-window) layers' outputs differ, more at larger positions, while the "
        "global layers' inputs are right up to the first local layer",
        "Gemma 3's rope_scaling (linear, factor 8 from 4B up) applied to every layer, where it "
        "scales the global layers only and the sliding layers rotate unscaled with "
        "rope_local_base_freq (antonellof/ferrox#39: a per-layer base but one global frequency "
        "scale; ggml-org/llama.cpp#14367: one freq_scale for both layer types)",
        "build the local layers' rotation without rope_scaling (modeling_gemma3: the local rotary "
        "embedding has rope_type \"default\"); scale the global layers only"},
    [REFENC_VAR_GLOBAL_ROPE_SCALING_IGNORED] = {
        "global_rope_scaling_ignored", "global_rope_scaling_ignored",
        "the global layers' outputs differ, more at larger positions (\"negligible at short "
        "context and compounds with length\"), while the local layers up to the first global one "
        "are right",
        "Gemma 3's rope_scaling parsed and never applied: the global layers rotate unscaled "
        "(lablup/mlxcel#1340: every layer rotated with scale 1.0; Blaizzy/mlx-vlm#1709: a plain "
        "RoPE built without the config's scaling, a different greedy token at 2916 tokens)",
        "apply rope_scaling to the global layers' frequencies (linear: theta_j / factor)"},
    [REFENC_VAR_EMBEDDING_NORMALIZER_UNROUNDED] = {
        "embedding_normalizer_unrounded", "embedding_normalizer_unrounded",
        "every embedding (and so every output) scaled by sqrt(D) / s, s the model's rounded "
        "normaliser: a relative shift of up to 2^-(p+1) for a dtype of p significand bits "
        "(0.13% at D 3072 in bfloat16), the same for every token",
        "the embedding normaliser sqrt(D) kept unrounded (a Python float, or float32) where Gemma "
        "forms it in the model's dtype: torch.tensor(hidden_size ** 0.5, dtype=bfloat16) is 55.5 "
        "for D 3072, not 55.4256 (huggingface/transformers#29402; google/gemma_pytorch#67)",
        "multiply by sqrt(D) rounded to the model's dtype, as GemmaModel's normalizer is "
        "(embedding_normalizer_dtype)"},
    [REFENC_VAR_FIRST_PRENORM_APPLIED] = {
        "first_prenorm_applied", "first_prenorm_applied",
        "every output off from layer 0's attention on, by how far the embedding LayerNorm's "
        "weights are from 1: layer 0's attention sees its input normalised twice",
        "layer 0 given an attention norm: ModernBERT's attn_norm is nn.Identity() in layer 0 "
        "(the embedding LayerNorm already normalises its input: skip_first_prenorm, "
        "AnswerDotAI/ModernBERT#64), and a port that builds every layer alike normalises it again "
        "with a fresh norm of weight 1, as the checkpoint has no layers.0.attn_norm "
        "(hyprstream/hyprstream#1666's port allocated every norm alike, weights 1 and biases 0, "
        "whatever the checkpoint holds)",
        "make layer 0's attention norm the identity (ModernBertEncoderLayer: attn_norm = "
        "nn.Identity() if layer_id == 0)"},
    [REFENC_VAR_SANDWICH_NORMS_MISSING] = {
        "sandwich_norms_missing", "sandwich_norms_missing",
        "every output off from layer 0's attention on: each sublayer adds its raw output to the "
        "residual, at its own scale instead of the norm's",
        "Gemma 2/3's post_attention_layernorm and post_feedforward_layernorm left out: a "
        "Llama-shaped block (one norm before each sublayer) run on a Gemma 2/3 checkpoint "
        "(tenstorrent/tt-metal#22808: \"Gemma3 has additional normalizations in Decoder\"; "
        "keras-team/keras-hub#1678 maps Gemma 2's norms apart from Gemma's)",
        "normalise each sublayer's output before the residual adds it: h = x + "
        "post_attention_layernorm(attn(input_layernorm(x))), y = h + "
        "post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))) (Gemma2DecoderLayer)"},
    [REFENC_VAR_POST_ATTENTION_NORM_AS_PRE_FFN] = {
        "post_attention_norm_as_pre_ffn", "post_attention_norm_as_pre_ffn",
        "every FFN input off from layer 0 on, by how far the post-attention norm's weights are from "
        "the pre-FFN norm's; attention outputs right",
        "the pre-FFN norm loaded from post_attention_layernorm, Llama's name for its pre-FFN norm, "
        "where Gemma 2/3 call that norm pre_feedforward_layernorm and post_attention_layernorm "
        "normalises the attention's output (NVIDIA-NeMo/Megatron-Bridge#4201: the dense MLP "
        "\"never received its real pre-FFN normalization\")",
        "load the FFN's input norm from pre_feedforward_layernorm.weight (Gemma 2/3), "
        "post_attention_layernorm.weight only for Llama-shaped blocks"},
    [REFENC_VAR_BIDIRECTIONAL_RUN_CAUSALLY] = {
        "bidirectional_run_causally", "bidirectional_run_causally",
        "every token but the last sees too little: each query attends to the keys up to itself "
        "only, so early tokens' outputs (and any mean-pooled embedding) move most; the last "
        "unpadded token's first layer is right",
        "an embedding model built from decoder blocks and trained bidirectionally (EmbeddingGemma, "
        "gte-Qwen2, LLM2Vec) run with the decoder's causal mask "
        "(huggingface/sentence-transformers#3513: one EmbeddingGemma similarity was 0.469 with a causal "
        "mask and 0.748 with the bidirectional one; huggingface/text-embeddings-inference#358: gte-Qwen2 "
        "without trust_remote_code's bidirectional attention gives wrong embeddings)",
        "build the attention mask from the padding only (use_bidirectional_attention, is_causal "
        "False) for these models, as their config or modeling code says"},
    [REFENC_VAR_QKV_BIAS_DROPPED] = {
        "qkv_bias_dropped", "qkv_bias_dropped",
        "every attention output off from the first layer on, at every position: q, k and v lack "
        "their constant offsets",
        "Qwen2's q_proj, k_proj and v_proj biases not loaded or not added: a Llama-style loader or "
        "block with bias-free projections (attention_bias false) run on a Qwen2 checkpoint, whose "
        "o_proj and MLP are bias-free but q, k, v are not (sbryngelson/ANEForge#253: the dense "
        "adapter dropped them, \"garbage output\"; OminiX-ai/OminiX-MLX#7, the quantized loader; "
        "EricLBuehler/candle-vllm#167, attention_bias defaulting to false for Qwen2)",
        "load q_proj.bias, k_proj.bias, v_proj.bias and add them after the projections "
        "(Qwen2Attention: nn.Linear(..., bias=True) for q, k, v only)"},
    [REFENC_VAR_QK_NORM_AFTER_ROPE] = {
        "qk_norm_after_rope", "qk_norm_after_rope",
        "attention weights off at every position but 0, by an amount that grows with how much the "
        "q_norm/k_norm weights of the two halves of each rotated pair differ",
        "Qwen3's q_norm and k_norm applied after RoPE instead of before (Qwen3Attention normalises "
        "the projections, then rotates).  RoPE keeps each head's rms, so the two orders differ only "
        "through the weight: x_hat w rotated against (x_hat rotated) w (karpathy/nanochat#743 and "
        "marin-community/marin#5114 found the orders equivalent for a weight-free norm; "
        "HunYuan's dense model rotates first, allenai/OLMo#806)",
        "normalise q and k per head right after the projections, then apply the rotary embedding"},
    [REFENC_VAR_QK_NORM_OVER_ALL_HEADS] = {
        "qk_norm_over_all_heads", "qk_norm_over_all_heads",
        "every head's queries and keys scaled by the rms of the whole row instead of their own: "
        "heads of large norm too sharp, heads of small norm too flat",
        "q and k normalised over the full width H Dh (Hkv Dh for k), OLMo-2's convention "
        "(Olmo2Attention's q_norm over num_heads * head_dim), where Qwen3's q_norm and k_norm "
        "normalise each head over head_dim (Alpha-VLLM/Lumina-T2X#112 normalised before "
        "splitting the heads)",
        "reshape to (..., heads, head_dim) before q_norm and k_norm (Qwen3: view(hidden_shape) "
        "then the norm over the last axis)"},
    [REFENC_VAR_MEAN_COUNTS_PADDING] = {
        "mean_counts_padding", "mean_counts_padding",
        "out.output right, out.embedding wrong for the padded items only (an unpadded item's is "
        "unchanged): the same sentence embeds differently with a longer neighbour in its batch",
        "mean pooling over all L positions, padding included (last_hidden_state.mean(dim=1) "
        "without the attention mask): the padded rows' hidden states enter the sum and the "
        "divisor is L, not the item's token count (huggingface/transformers#17463: mean pooling "
        "that depended on the batch; lanterndata/lantern_extras#91)",
        "sum y[b,l,:] over the tokens whose key_padding_mask is 0 and divide by their number "
        "(sentence-transformers' Pooling: sum(y * mask) / sum(mask))"},
    [REFENC_VAR_LAST_TOKEN_IGNORES_PADDING] = {
        "last_token_ignores_padding", "last_token_ignores_padding",
        "out.output right, out.embedding wrong for the right-padded items only: a left-padded "
        "or unpadded batch passes, so single-sentence tests miss it",
        "last-token pooling that takes position L - 1 whatever the padding, which is right only "
        "under left padding: a right-padded item's embedding is a padding row's "
        "(huggingface/text-embeddings-inference#648: Qwen3-Embedding's batch and single results "
        "differed; Qwen3-Embedding's last_token_pool tests for left padding before taking [:, -1])",
        "take each item's last token that is not padding: l* = max{l : key_padding_mask[b,l] = 0} "
        "(sum(mask) - 1 under right padding, L - 1 under left padding)"},
    [REFENC_VAR_POOLING_NOT_NORMALIZED] = {
        "pooling_not_normalized", "pooling_not_normalized",
        "out.embedding in the right direction but not of unit length: every item scaled by its "
        "norm (cosine similarities unchanged, dot products and distances wrong)",
        "the pooled vector returned without sentence-transformers' Normalize module, whose model "
        "lists it (run-llama/llama_index#8145: \"compared to sentence-transformers, we were "
        "missing the step of normalizing embeddings\", #8143)",
        "divide each pooled vector by max(||e||_2, 1e-12) (torch.nn.functional.normalize) when "
        "the model's modules.json has a Normalize module (pooling_normalize)"},
    [REFENC_VAR_T5_SCORES_SCALED] = {
        "t5_scores_scaled", "t5_scores_scaled",
        "every attention too flat (weights closer to uniform) in every layer: the scores divided "
        "by sqrt(Dh) where T5 leaves them unscaled",
        "T5's scores scaled by 1/sqrt(d_kv), as every other Transformer does: T5 folds the scale "
        "into its initialisation (\"Mesh TensorFlow initialization to avoid scaling before "
        "softmax\", HF T5Attention), and a generic attention kernel divides once too often "
        "(nntile/nntile#356: a C++ T5 whose sdpa_eager always divides by sqrt(head_size); "
        "allenai/allennlp#5360 found T5's scaling factor forced to 1)",
        "compute q k^T without any 1/sqrt(d) (query_pre_attn_scalar 1: the divisor is 1)"},
    [REFENC_VAR_T5_BUCKET_NOT_CLAMPED] = {
        "t5_bucket_not_clamped", "t5_bucket_not_clamped",
        "right for every pair of positions closer than max_distance; wrong from |i - j| = "
        "max_distance on (T5: 128): those keys get another bucket's bias",
        "the large-offset bucket max_exact + floor(log(r / max_exact) / log(max_distance / "
        "max_exact) (nb/2 - max_exact)) not clamped to nb/2 - 1 (huggingface/candle#1312): at "
        "r >= max_distance it is nb/2, the other sign's first row (keys before the query) or "
        "past the table (after it; refenc reads row index mod nb, row 0)",
        "take min(bucket, nb/2 - 1) before adding the sign's offset (T5Attention."
        "_relative_position_bucket: torch.min(relative_position_if_large, num_buckets - 1))"},
    [REFENC_VAR_T5_BIAS_PER_LAYER] = {
        "t5_bias_per_layer", "t5_bias_per_layer",
        "layer 0 right, every later layer's attention without position information: its "
        "weights depend on the content only",
        "the relative bias computed per layer from that layer's own relative_attention_bias, "
        "which only block 0 has (has_relative_attention_bias): the later layers add none "
        "(huggingface/transformers#13397 and #10221 asked why only the first layer had it; "
        "OpenNMT/CTranslate2#1335 reuses the first layer's bias in every layer)",
        "compute position_bias once, in layer 0, from its table, and add the same bias in every "
        "layer (T5Stack passes position_bias from block 0 to the next blocks)"},
    [REFENC_VAR_ALIBI_BIAS_POSITIVE] = {
        "alibi_bias_positive", "alibi_bias_positive",
        "attention favours distant keys: the weights grow with |i - j| instead of decaying",
        "the ALiBi bias added with the wrong sign, +m_h |i - j| (huggingface/candle#1187, "
        "fixed in #1189: candle's first Jina-v2 port)",
        "add -m_h |i - j| to the scores: ALiBi penalises distance (slopes m_h > 0)"},
    [REFENC_VAR_RMSNORM_MEAN_SUBTRACTED] = {
        "rmsnorm_mean_subtracted", "rmsnorm_mean_subtracted",
        "norm outputs differ where a row's mean is not small against its spread",
        "RMSNorm computed as a LayerNorm without bias: the row's mean subtracted before the "
        "root mean square (ggml-org/llama.cpp#173, LLaMA's norms through ggml_norm; "
        "huggingface/pytorch-image-models#2380; keras-team/keras#21234)",
        "divide x itself by sqrt(mean(x^2) + eps): RMSNorm does not centre the row"},
    [REFENC_VAR_LAYER_PATTERN_SHIFTED] = {
        "layer_pattern_shifted", "layer_pattern_shifted",
        "layer 0 matches only without a window; later layers alternate wrongly between "
        "windowed and global attention (and their RoPE bases)",
        "the local/global layer pattern shifted by one layer: ModernBERT's global layers at "
        "l % n == 0 taken as Gemma's (l + 1) % n == 0, or the reverse (ggml-org/llama.cpp#18330: "
        "the SWA pattern set without dense_first)",
        "take the family's rule: global_attn_every_n_layers (ModernBERT, layer 0 global) or "
        "sliding_window_pattern (Gemma 2/3, layer p - 1 global)"},
    [REFENC_VAR_RMSNORM_OFFSET_MISSING] = {
        "rmsnorm_offset_missing", "rmsnorm_offset_missing",
        "every RMSNorm output scaled by w (near 0) instead of 1 + w: outputs far too small",
        "Gemma's RMSNorm computed as x_hat * w where x_hat * (1 + w) is meant (w is stored as "
        "the deviation from 1; linkedin/Liger-Kernel#74)",
        "scale by (1 + w) in the working precision, as GemmaRMSNorm does"},
    [REFENC_VAR_RMSNORM_OFFSET_DOUBLED] = {
        "rmsnorm_offset_doubled", "rmsnorm_offset_doubled",
        "every RMSNorm output about twice too large (scale 2 + w)",
        "the +1 of Gemma's RMSNorm applied twice: once folded into the stored weights by a "
        "converter, once by the kernel (utensils/mold#1074: final cosine 0.19)",
        "add 1 once: either keep w as stored and scale by (1 + w), or fold it into the weights "
        "and scale by w"},
    [REFENC_VAR_LLAMA3_SCALING_IGNORED] = {
        "llama3_scaling_ignored", "llama3_scaling_ignored",
        "right at short positions; low-frequency pairs wrong from about L0 / low_freq_factor on",
        "rope_scaling of type llama3 is not applied: the unscaled frequencies "
        "(huggingface/transformers#32330, Llama 3.1)",
        "apply the llama3 bands: theta_j kept for wavelengths < L0/high_freq_factor, theta_j / "
        "factor above L0/low_freq_factor, smoothed between (modeling_rope_utils.py)"},
    [REFENC_VAR_YARN_FACTOR_SQUARED] = {
        "yarn_attention_factor_squared", "yarn_attention_factor",
        "q and k too long by the YaRN attention factor f: scores f^2 too large, attention too "
        "sharp, at every position",
        "the YaRN attention factor is applied twice: f^2 on cos and sin (sgl-project/sglang#33558)",
        "multiply cos and sin by f = 0.1 ln(factor) + 1 once (HF: attention_scaling)"},
    [REFENC_VAR_YARN_FACTOR_DROPPED] = {
        "yarn_attention_factor_dropped", "yarn_attention_factor",
        "q and k too short by the YaRN attention factor f: scores f^2 too small, attention too "
        "flat, at every position",
        "the YaRN attention factor is not applied (turboderp-org/exllamav3#259)",
        "multiply cos and sin by f = 0.1 ln(factor) + 1 (or the config's attention_factor)"},
    [REFENC_VAR_DYNAMIC_NTK_FROM_MAX_POSITIONS] = {
        "dynamic_ntk_from_max_positions", "dynamic_ntk_length",
        "right up to max_position_embeddings; beyond, every pair but the first rotates too fast",
        "dynamic NTK's base computed for max_position_embeddings (HF's initial inv_freq) "
        "instead of the sequence length, i.e. never grown",
        "recompute base' = base (s S/L0 - (s-1))^(R/(R-2)) with S = max(position_ids) + 1 when "
        "S > L0 (HF dynamic_rope_update)"},
    [REFENC_VAR_NTK_SCALING_IGNORED] = {
        "ntk_scaling_ignored", "ntk_scaling_ignored",
        "right at position 0, increasingly wrong with the position: every pair rotates too fast, "
        "by s^(2(j+1)/R), even the first (gte-base-en-v1.5: 2^(1/32), a radian off near position 47)",
        "GTE's rope_scaling {\"type\": \"ntk\"} never read: the unscaled frequencies "
        "base^(-2j/R) (the class of lablup/mlxcel#1355, rope_scaling never read)",
        "apply new-impl's NTKScalingRotaryEmbedding at every length: theta_j = (base s)^(-2j/R) / "
        "s^(2/R) (with mixed_b: theta_j / exp(a (j + 1)^b), a = ln s / (R/2)^b)"},
};

/* The named backward bugs (issue 25, item 5; docs/gradients.md). */
static const refenc_variant_info backward_table[REFENC_VAR_COUNT - REFENC_VAR_FIRST_BACKWARD] = {
    [REFENC_VAR_LAYERNORM_BACKWARD_MEAN_TWICE - REFENC_VAR_FIRST_BACKWARD] = {
        "layernorm_backward_mean_twice", "layernorm_backward_mean_twice",
        "forward right; every LayerNorm's input gradient off by -mean(dy gamma)/sigma per row: its "
        "rows no longer sum to zero, the training loss still decreases",
        "LayerNorm's backward subtracts mean(dy gamma) twice: dx = (g - 2 mean(g) - x^ mean(g x^)) / "
        "sigma (tenstorrent/tt-metal#53204: \"silent, loss still decreases\", hidden by an atol of 0.5)",
        "dx = (g - mean(g) - x^ mean(g x^)) / sigma, g = dy gamma: subtract the mean term once"},
    [REFENC_VAR_LAYERNORM_BACKWARD_MEAN_MISSING - REFENC_VAR_FIRST_BACKWARD] = {
        "layernorm_backward_mean_missing", "layernorm_backward_mean_missing",
        "forward right; every LayerNorm's input gradient off by +mean(dy gamma)/sigma per row: its "
        "rows no longer sum to zero",
        "LayerNorm's backward without the mean term: dx = (g - x^ mean(g x^)) / sigma, the gradient "
        "through the mean mu dropped (issue 25's list of LayerNorm backward bugs)",
        "dx = (g - mean(g) - x^ mean(g x^)) / sigma: differentiate through mu as well as sigma"},
    [REFENC_VAR_LAYERNORM_BACKWARD_VARIANCE_MISSING - REFENC_VAR_FIRST_BACKWARD] = {
        "layernorm_backward_variance_missing", "layernorm_backward_variance_missing",
        "forward right; every LayerNorm's input gradient keeps its component along x^: its rows "
        "are no longer orthogonal to the normalised input",
        "LayerNorm's backward without the variance term: dx = (g - mean(g)) / sigma, sigma treated "
        "as a constant (issue 25's list of LayerNorm backward bugs)",
        "subtract x^ mean(g x^) too: sigma depends on x"},
    [REFENC_VAR_SOFTMAX_BACKWARD_WITHOUT_ROWSUM - REFENC_VAR_FIRST_BACKWARD] = {
        "softmax_backward_without_rowsum", "softmax_backward_without_rowsum",
        "forward right, dV right; dQ and dK wrong in every head: dS = P dP, whose rows no longer "
        "sum to zero",
        "the attention's softmax backward without the row term D_i = rowsum(dO O): dS_ij = P_ij "
        "dP_ij where P_ij (dP_ij - D_i) is meant (Dao-AILab/flash-attention#2481: a corrupted "
        "row term, dpsum, moved dQ and dK and not dV)",
        "dS_ij = P_ij (dP_ij - D_i), D_i = sum_d dO_id O_id (FlashAttention's row term)"},
    [REFENC_VAR_ATTENTION_BACKWARD_UNSCALED - REFENC_VAR_FIRST_BACKWARD] = {
        "attention_backward_unscaled", "attention_backward_unscaled",
        "forward right, dV right; dQ and dK sqrt(Dh) tau times too large",
        "the attention backward forgets the scores' scale 1/(sqrt(Dh) tau) in dQ and dK "
        "(NVIDIA/TransformerEngine#3216: FA4's dQ about 5 times too large with a right forward)",
        "dQ = dS K / (sqrt(Dh) tau), dK = dS^T Q / (sqrt(Dh) tau): the forward's scale, once"},
    [REFENC_VAR_ATTENTION_BACKWARD_SCALED_TWICE - REFENC_VAR_FIRST_BACKWARD] = {
        "attention_backward_scaled_twice", "attention_backward_scaled_twice",
        "forward right, dV right; dQ and dK sqrt(Dh) tau times too small",
        "the scale 1/(sqrt(Dh) tau) applied twice in dQ and dK: once folded into Q (or the "
        "scores) and once more at the end (the class of NVIDIA/TransformerEngine#3216)",
        "apply the scores' scale once in the backward, where the forward applied it"},
    [REFENC_VAR_ATTENTION_BACKWARD_UNMASKED - REFENC_VAR_FIRST_BACKWARD] = {
        "attention_backward_unmasked", "attention_backward_unmasked",
        "forward right; padded keys get gradient: dK and dV of padding positions nonzero, and "
        "through them every earlier gradient of the padded positions, dQ off where rows see padding",
        "dK from the unmasked scores: the backward recomputes the weights from the scores and the "
        "forward's normaliser (P = exp(S - LSE)) without the key padding mask, so masked keys get "
        "weight and gradient (issue 25's list)",
        "apply the same mask in the backward's recomputation as in the forward: a masked key's "
        "weight is 0, its dS 0, its dK and dV 0"},
    [REFENC_VAR_ROPE_BACKWARD_PLUS_THETA - REFENC_VAR_FIRST_BACKWARD] = {
        "rope_backward_plus_theta", "rope_backward_plus_theta",
        "forward right; dQ and dK (so the q and k projections' gradients) right at position 0, "
        "rotated by 2 pos theta elsewhere",
        "RoPE's backward rotates the gradient by +theta (the forward's rotation) where R(pos)^T = "
        "R(-pos theta) is meant (issue 25's list; the class of PaddlePaddle/Paddle#74716, a fused RoPE "
        "backward that rotated the gradient wrongly, unseen while the test's sin halves were equal)",
        "rotate the gradient back: (ga cos + gb sin, gb cos - ga sin) for each pair (a, b)"},
    [REFENC_VAR_GELU_BACKWARD_TANH_DERIVATIVE - REFENC_VAR_FIRST_BACKWARD] = {
        "gelu_backward_tanh_derivative", "gelu_backward_tanh_derivative",
        "forward right; the FFN's gradients off by up to about 1e-3 relative per hidden unit, "
        "most near |x| = 2",
        "exact GELU's backward uses the tanh approximation's derivative (issue 25's list)",
        "differentiate x Phi(x): Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi)"},
    [REFENC_VAR_BIAS_GRAD_NOT_SUMMED_OVER_BATCH - REFENC_VAR_FIRST_BACKWARD] = {
        "bias_grad_not_summed_over_batch", "bias_grad_not_summed_over_batch",
        "forward right, input gradients right; every bias gradient of a linear map is one "
        "token's dy",
        "a linear map's bias gradient not reduced over the B L tokens: db = dy[0] where "
        "sum_n dy[n] is meant (mlpack/mlpack#3679: an Add layer's gradient = error, right only for "
        "batch size 1)",
        "db = sum over the batch and the sequence of dy (dy.sum over every dimension but the last)"},
    [REFENC_VAR_EMBEDDING_GRAD_OVERWRITTEN - REFENC_VAR_FIRST_BACKWARD] = {
        "embedding_grad_overwritten", "embedding_grad_overwritten",
        "forward right; the token embedding's gradient wrong only in the rows of repeated "
        "tokens: each holds one occurrence's gradient",
        "the embedding's backward writes dE[token] = dx instead of accumulating dE[token] += dx, "
        "so a token at several positions keeps the last one's (karpathy/nn-zero-to-hero#57 and "
        "pytorch/pytorch#1528: indexed += with repeated indices keeps one contribution)",
        "scatter-add: dE[tokens[n]] += dx[n] (index_add_, or atomics in a kernel)"},
    [REFENC_VAR_LINEAR_DW_TRANSPOSED - REFENC_VAR_FIRST_BACKWARD] = {
        "linear_dw_transposed", "linear_dw_transposed",
        "forward right, input gradients right; every linear weight's gradient is in the wrong "
        "layout: dW^T's values read as dW",
        "a linear map's weight gradient written as x^T dy, (in, out), into the (out, in) tensor of "
        "nn.Linear (issue 25's list; nntrainer/nntrainer#705: a weight gradient transposed in the "
        "wrong order)",
        "dW = dy^T x, shape (out, in) like W (nn.Linear's layout)"},
};

const refenc_variant_info *refenc_variant_get(refenc_variant v)
{
    if ((unsigned)v >= REFENC_VAR_COUNT)
        return NULL;
    return v >= REFENC_VAR_FIRST_BACKWARD ? &backward_table[v - REFENC_VAR_FIRST_BACKWARD] : &table[v];
}

int refenc_variant_parse(refenc_variant *v, const char *name)
{
    for (int i = 0; i < REFENC_VAR_COUNT; i++)
        if (strcmp(refenc_variant_get((refenc_variant)i)->name, name) == 0) {
            *v = (refenc_variant)i;
            return 1;
        }
    return 0;
}

static int has_layernorm(const refenc_case *c)
{
    return c->component == REFENC_COMP_ENCODER || c->component == REFENC_COMP_LAYERNORM;
}

/* Whether some LayerNorm of the case uses eps: the layers', or the embedding's. */
static int has_eps(const refenc_case *c, double eps)
{
    return has_layernorm(c) &&
           (c->cfg.layer_norm_eps == eps ||
            (c->component == REFENC_COMP_ENCODER && c->cfg.embedding_norm &&
             c->cfg.embedding_norm_eps == eps));
}

static int any_token_type(const refenc_case *c)
{
    for (size_t i = 0; c->token_types != NULL && i < c->B * c->L; i++)
        if (c->token_types[i] != 0)
            return 1;
    return 0;
}

static int has_activation(const refenc_case *c, refenc_activation act)
{
    return (c->component == REFENC_COMP_ENCODER || c->component == REFENC_COMP_FFN ||
            c->component == REFENC_COMP_ACTIVATION) && c->cfg.activation == act;
}

static int has_attention(const refenc_case *c)
{
    return c->component == REFENC_COMP_ENCODER || c->component == REFENC_COMP_ATTENTION;
}

static int has_rope(const refenc_case *c)
{
    return c->component == REFENC_COMP_ROPE ||
           (has_attention(c) && c->cfg.positional == REFENC_POS_ROPE);
}

/* The local layers' RoPE base (layer_pattern.h: rope_base when unset). */
static double local_base(const refenc_config *cfg)
{
    return cfg->local_rope_theta != 0 ? cfg->local_rope_theta : cfg->rope_base;
}

/* rope_base_wrong's base: 10 000 for any other, 500 000 for 10 000. */
static double wrong_base(double base)
{
    return base == 10000.0 ? 500000.0 : 10000.0;
}

/* A stack of Gemma 3's layer pattern whose RoPE is scaled (a factor, or
 * an attention factor, other than 1). */
static int gemma3_scaled(const refenc_case *c)
{
    const refenc_rope_scaling *s = &c->cfg.rope_scaling;
    return c->component == REFENC_COMP_ENCODER && c->cfg.positional == REFENC_POS_ROPE &&
           c->cfg.sliding_window_pattern > 0 && s->type != REFENC_ROPE_SCALING_NONE &&
           (s->factor != 1.0 || refenc_rope_attention_factor(s) != 1.0);
}

/* Whether an attention window cuts a key of the case: w < L, or
 * w // 2 < L - 1 for the symmetric one. */
static int window_cuts(const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    return (cfg->sliding_window > 0 && cfg->sliding_window < c->L) ||
           (cfg->local_attention > 0 && cfg->local_attention / 2 + 1 < c->L);
}

/* layer_pattern_shifted: a stack with a pattern of period >= 2 (period 1:
 * every layer global either way), unscaled RoPE (Gemma's rule drops the
 * local layers' scaling, ModernBERT's does not) and no partial rotary
 * factor (refused with sliding_window_pattern), where a local layer differs
 * from a global one: a window that cuts a key, or two RoPE bases. */
static int pattern_shift_applies(const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    const size_t n = cfg->global_attn_every_n_layers, p = cfg->sliding_window_pattern;
    /* one period of the pattern holds a layer of each kind, when it has both */
    double global = cfg->rope_base, local = cfg->rope_base;
    for (size_t l = 0; l < n + p; l++) {
        if (refenc_layer_windowed(cfg, l))
            local = refenc_layer_rope_base(cfg, l);
        else
            global = refenc_layer_rope_base(cfg, l);
    }
    const int bases = cfg->positional == REFENC_POS_ROPE && global != local;
    return c->component == REFENC_COMP_ENCODER && (n >= 2 || p >= 2) &&
           cfg->rope_scaling.type == REFENC_ROPE_SCALING_NONE && cfg->rope_scaling.partial_rotary_factor == 1 &&
           (window_cuts(c) || bases);
}

/* T5's convention: a relative bias and unscaled scores (query_pre_attn_scalar
 * 1: the divisor is tau), where the scaled scores are t5_scores_scaled. */
static int t5_unscaled(const refenc_case *c)
{
    return c->cfg.relative_attention_num_buckets > 0 && c->cfg.query_pre_attn_scalar == 1.0;
}

/* The largest |pos_i - pos_j| of the case's positions. */
static int64_t position_span(const refenc_case *c)
{
    int64_t lo = 0, hi = 0;
    for (size_t l = 0; l < c->L; l++) {
        const int64_t p = c->positions != NULL ? c->positions[l] : (int64_t)l;
        lo = l == 0 || p < lo ? p : lo;
        hi = l == 0 || p > hi ? p : hi;
    }
    return hi - lo;
}

/* T5's variants (relative_bias.h): each only where it changes the scores. */
static int t5_applies(refenc_variant v, const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    if (!has_attention(c) || cfg->relative_attention_num_buckets == 0)
        return 0;
    switch (v) {
    case REFENC_VAR_T5_SCORES_SCALED: return t5_unscaled(c) && refenc_config_head_dim(cfg) > 1;
    case REFENC_VAR_T5_BUCKET_NOT_CLAMPED: /* a pair of positions max_distance apart */
        return position_span(c) >= (int64_t)cfg->relative_attention_max_distance;
    case REFENC_VAR_T5_BIAS_PER_LAYER: return c->component == REFENC_COMP_ENCODER && cfg->n_layers > 1;
    default: return 0;
    }
}

/* The modern blocks' variants: the gated FFN's, Gemma's (1 + w) RMSNorm's,
 * grouped-query attention's, the attention windows'. */
static int modern_block_applies(refenc_variant v, const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    switch (v) {
    case REFENC_VAR_GLU_HALVES_SWAPPED:
        return (c->component == REFENC_COMP_ENCODER || c->component == REFENC_COMP_FFN) &&
               cfg->ffn_type == REFENC_FFN_GLU;
    case REFENC_VAR_RMSNORM_OFFSET_MISSING:
    case REFENC_VAR_RMSNORM_OFFSET_DOUBLED:
        return has_layernorm(c) && cfg->norm_type == REFENC_NORMTYPE_RMSNORM && cfg->rmsnorm_offset;
    case REFENC_VAR_SOFTCAP_MISSING:
        return has_attention(c) && cfg->attn_logit_softcapping > 0;
    case REFENC_VAR_SOFTCAP_AFTER_MASK: /* only where a mask or a bias reaches the scores */
        return has_attention(c) && cfg->attn_logit_softcapping > 0 &&
               (cfg->causal || c->key_padding_mask != NULL || c->attn_mask != NULL ||
                cfg->positional == REFENC_POS_ALIBI);
    case REFENC_VAR_QUERY_SCALE_HEAD_DIM: /* S = Dh: the same scale; T5's is t5_scores_scaled */
        return has_attention(c) && cfg->query_pre_attn_scalar > 0 &&
               cfg->query_pre_attn_scalar != (double)refenc_config_head_dim(cfg) && !t5_unscaled(c);
    case REFENC_VAR_GQA_TILED: /* with Hkv = 1 or Hkv = H tiling is grouping */
        return has_attention(c) && refenc_config_kv_heads(cfg) > 1 && refenc_config_kv_heads(cfg) < cfg->n_heads;
    case REFENC_VAR_WINDOW_OFF_BY_ONE: /* only where the window cuts a key */
    case REFENC_VAR_WINDOW_IGNORED: return has_attention(c) && window_cuts(c);
    case REFENC_VAR_FIRST_PRENORM_APPLIED: return cfg->skip_first_prenorm; /* encoder cases only */
    case REFENC_VAR_BIDIRECTIONAL_RUN_CAUSALLY: /* a decoder's block (RoPE, RMSNorm) run bidirectionally */
        return c->component == REFENC_COMP_ENCODER && !cfg->causal && c->L > 1 &&
               cfg->positional == REFENC_POS_ROPE && cfg->norm_type == REFENC_NORMTYPE_RMSNORM;
    case REFENC_VAR_SANDWICH_NORMS_MISSING:
    case REFENC_VAR_POST_ATTENTION_NORM_AS_PRE_FFN: return cfg->sandwich_norm;
    case REFENC_VAR_QKV_BIAS_DROPPED: /* Qwen2's q, k, v biases on otherwise bias-free linears */
        return has_attention(c) && cfg->qkv_bias;
    case REFENC_VAR_QK_NORM_AFTER_ROPE: /* RoPE moves the weights only with RoPE */
        return has_attention(c) && cfg->qk_norm == REFENC_QKNORM_RMS && cfg->positional == REFENC_POS_ROPE;
    case REFENC_VAR_QK_NORM_OVER_ALL_HEADS: /* one head each for q and k: the same width */
        return has_attention(c) && cfg->qk_norm == REFENC_QKNORM_RMS &&
               (cfg->n_heads > 1 || refenc_config_kv_heads(cfg) > 1);
    case REFENC_VAR_LOCAL_BASE_ON_GLOBAL_LAYER0: /* a stack whose two bases differ (layer 0: global) */
        return c->component == REFENC_COMP_ENCODER && cfg->positional == REFENC_POS_ROPE &&
               cfg->global_attn_every_n_layers > 0 &&
               refenc_layer_rope_base(cfg, 0) != local_base(cfg);
    case REFENC_VAR_ROPE_SCALING_ON_LOCAL_LAYERS: /* a local layer: p >= 2 */
        return gemma3_scaled(c) && cfg->sliding_window_pattern >= 2;
    case REFENC_VAR_GLOBAL_ROPE_SCALING_IGNORED: /* a global layer: p <= N */
        return gemma3_scaled(c) && cfg->sliding_window_pattern <= cfg->n_layers;
    case REFENC_VAR_RMSNORM_MEAN_SUBTRACTED: /* Gemma's (1 + w) has no LayerNorm twin */
        return has_layernorm(c) && cfg->norm_type == REFENC_NORMTYPE_RMSNORM && !cfg->rmsnorm_offset &&
               cfg->d_model > 1;
    case REFENC_VAR_LAYER_PATTERN_SHIFTED: return pattern_shift_applies(c);
    case REFENC_VAR_ALIBI_BIAS_POSITIVE: return has_attention(c) && cfg->positional == REFENC_POS_ALIBI && c->L > 1;
    case REFENC_VAR_EMBEDDING_NORMALIZER_UNROUNDED: { /* only where rounding moves sqrt(D) */
        const unsigned bits = refenc_normalizer_bits(cfg->embedding_normalizer_dtype);
        return c->component == REFENC_COMP_ENCODER && cfg->vocab_size > 0 && cfg->scale_embedding &&
               bits != 0 && bits < 53 &&
               refenc_embedding_normalizer(cfg->d_model, bits) != sqrt((double)cfg->d_model);
    }
    default:
        return 0;
    }
}

/* The RoPE scaling variants: the case's type, and a change in the output
 * (an attention factor other than 1; a length past L0 for dynamic). */
static int rope_scaling_applies(refenc_variant v, const refenc_case *c)
{
    const refenc_rope_scaling *s = &c->cfg.rope_scaling;
    if (!has_rope(c))
        return 0;
    switch (v) {
    case REFENC_VAR_LLAMA3_SCALING_IGNORED: return s->type == REFENC_ROPE_SCALING_LLAMA3 && s->factor != 1.0;
    case REFENC_VAR_YARN_FACTOR_SQUARED:
    case REFENC_VAR_YARN_FACTOR_DROPPED:
        return s->type == REFENC_ROPE_SCALING_YARN && refenc_rope_attention_factor(s) != 1.0;
    case REFENC_VAR_DYNAMIC_NTK_FROM_MAX_POSITIONS:
        return s->type == REFENC_ROPE_SCALING_DYNAMIC && s->factor != 1.0 &&
               (uint64_t)refenc_rope_seq_len(c->positions, c->L) > s->max_position_embeddings;
    case REFENC_VAR_NTK_SCALING_IGNORED: return s->type == REFENC_ROPE_SCALING_NTK && s->factor != 1.0;
    default: return 0;
    }
}

/* Whether item b's last position is padding (right padding). */
static int right_padded(const refenc_case *c, size_t b)
{
    return c->key_padding_mask != NULL && c->key_padding_mask[b * c->L + c->L - 1];
}

/* The pooling variants (pooling.h): each only where it changes out.embedding. */
static int pooling_applies(refenc_variant v, const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    int padded = 0, right = 0;
    for (size_t i = 0; c->key_padding_mask != NULL && i < c->B * c->L; i++)
        padded |= c->key_padding_mask[i];
    for (size_t b = 0; b < c->B; b++)
        right |= right_padded(c, b);
    if (c->component != REFENC_COMP_ENCODER)
        return 0;
    switch (v) {
    case REFENC_VAR_MEAN_COUNTS_PADDING: return cfg->pooling == REFENC_POOL_MEAN && padded;
    case REFENC_VAR_LAST_TOKEN_IGNORES_PADDING: return cfg->pooling == REFENC_POOL_LAST_TOKEN && right;
    case REFENC_VAR_POOLING_NOT_NORMALIZED: return cfg->pooling != REFENC_POOL_NONE && cfg->pooling_normalize;
    default: return 0;
    }
}

int refenc_variant_is_backward(refenc_variant v)
{
    return v >= REFENC_VAR_FIRST_BACKWARD && v < REFENC_VAR_COUNT;
}

/* Whether a token occurs twice among the case's unpadded and padded
 * positions alike (the embedding's scatter-add reads every one). */
static int token_repeats(const refenc_case *c)
{
    for (size_t i = 0; c->tokens != NULL && i < c->B * c->L; i++)
        for (size_t j = 0; j < i; j++)
            if (c->tokens[i] == c->tokens[j])
                return 1;
    return 0;
}

/* Whether some item has a padded key and an unpadded one. */
static int padded_key(const refenc_case *c)
{
    for (size_t b = 0; c->key_padding_mask != NULL && b < c->B; b++) {
        size_t padded = 0;
        for (size_t l = 0; l < c->L; l++)
            padded += c->key_padding_mask[b * c->L + l] != 0;
        if (padded > 0 && padded < c->L)
            return 1;
    }
    return 0;
}

/* The backward variants: where the kernel they replace runs on the case
 * and the bug changes what it computes.  The encoder's backward only. */
static int backward_applies(refenc_variant v, const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    const int layernorm = cfg->norm_type == REFENC_NORMTYPE_LAYERNORM;
    if (c->component != REFENC_COMP_ENCODER)
        return 0;
    switch (v) {
    case REFENC_VAR_LAYERNORM_BACKWARD_MEAN_TWICE:
    case REFENC_VAR_LAYERNORM_BACKWARD_MEAN_MISSING:
    case REFENC_VAR_LAYERNORM_BACKWARD_VARIANCE_MISSING: return layernorm && cfg->d_model > 1;
    case REFENC_VAR_SOFTMAX_BACKWARD_WITHOUT_ROWSUM: return c->L > 1 && cfg->n_layers > 0;
    case REFENC_VAR_ATTENTION_BACKWARD_UNSCALED:
    case REFENC_VAR_ATTENTION_BACKWARD_SCALED_TWICE:
        return cfg->n_layers > 0 && refenc_config_head_dim(cfg) * cfg->temperature * cfg->temperature != 1.0;
    case REFENC_VAR_ATTENTION_BACKWARD_UNMASKED: /* a padded key some row can see past */
        return cfg->n_layers > 0 && c->L > 1 && padded_key(c);
    case REFENC_VAR_ROPE_BACKWARD_PLUS_THETA: return cfg->n_layers > 0 && cfg->positional == REFENC_POS_ROPE;
    case REFENC_VAR_GELU_BACKWARD_TANH_DERIVATIVE: return cfg->n_layers > 0 && cfg->activation == REFENC_ACT_GELU;
    case REFENC_VAR_BIAS_GRAD_NOT_SUMMED_OVER_BATCH:
        return cfg->n_layers > 0 && c->B * c->L > 1 && cfg->linear_bias;
    case REFENC_VAR_EMBEDDING_GRAD_OVERWRITTEN: return cfg->vocab_size > 0 && token_repeats(c);
    case REFENC_VAR_LINEAR_DW_TRANSPOSED: return cfg->n_layers > 0 && cfg->d_model > 1;
    default: return 0;
    }
}

static int forward_applies(refenc_variant v, const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    const size_t H = cfg->n_heads;
    switch (v) {
    case REFENC_VAR_LAYERNORM_EPS_X10:
    case REFENC_VAR_LAYERNORM_EPS_DIV10:
        return has_layernorm(c) && cfg->layer_norm_eps > 0;
    case REFENC_VAR_UNBIASED_VARIANCE: /* RMSNorm has no variance about the mean */
        return has_layernorm(c) && cfg->norm_type == REFENC_NORMTYPE_LAYERNORM && cfg->d_model > 1;
    case REFENC_VAR_GELU_TANH_FOR_EXACT:
        return has_activation(c, REFENC_ACT_GELU);
    case REFENC_VAR_GELU_EXACT_FOR_TANH:
        return has_activation(c, REFENC_ACT_GELU_TANH);
    case REFENC_VAR_ROPE_LAYOUT_SWAPPED:
    case REFENC_VAR_ROPE_BASE_WRONG:
        return has_rope(c);
    case REFENC_VAR_ATTENTION_SCALE_SQRT_D:
        return has_attention(c) && H > 1;
    case REFENC_VAR_ATTENTION_UNSCALED: /* not where the scores are unscaled already (T5) */
        return has_attention(c) && refenc_config_head_dim(cfg) > 1 && cfg->query_pre_attn_scalar != 1.0;
    case REFENC_VAR_MISSING_FINAL_NORM:
        return c->component == REFENC_COMP_ENCODER && cfg->norm == REFENC_NORM_PRE && cfg->final_norm;
    case REFENC_VAR_EMBEDDING_UNSCALED:
        return c->component == REFENC_COMP_ENCODER && cfg->vocab_size > 0 && cfg->d_model > 1 &&
               cfg->scale_embedding;
    case REFENC_VAR_EMBEDDING_SCALED:
        return c->component == REFENC_COMP_ENCODER && cfg->vocab_size > 0 && cfg->d_model > 1 &&
               !cfg->scale_embedding;
    case REFENC_VAR_ALIBI_SLOPES_POW2:
        return (c->component == REFENC_COMP_ALIBI ||
                (has_attention(c) && cfg->positional == REFENC_POS_ALIBI)) && (H & (H - 1)) != 0;
    case REFENC_VAR_PADDING_MASK_INVERTED: /* not under a pooling: it would pool the padding */
        return has_attention(c) && c->key_padding_mask != NULL && cfg->pooling == REFENC_POOL_NONE;
    case REFENC_VAR_PRE_POST_SWAPPED: /* Post-LN needs layer 0's norm1 and has no post norms */
        return c->component == REFENC_COMP_ENCODER && !cfg->skip_first_prenorm && !cfg->sandwich_norm;
    case REFENC_VAR_HEADS_MERGED_WITHOUT_TRANSPOSE:
        return has_attention(c) && H > 1 && c->L > 1;
    case REFENC_VAR_EPS_1E5_FOR_1E12:
        return has_eps(c, 1e-12);
    case REFENC_VAR_EPS_1E12_FOR_1E5:
        return has_eps(c, 1e-5);
    case REFENC_VAR_EMBEDDING_NORM_MISSING:
        return c->component == REFENC_COMP_ENCODER && cfg->embedding_norm;
    case REFENC_VAR_TOKEN_TYPES_IGNORED:
        return c->component == REFENC_COMP_ENCODER && any_token_type(c);
    case REFENC_VAR_ROBERTA_POSITIONS_FROM_ZERO:
        return c->component == REFENC_COMP_ENCODER && cfg->positional == REFENC_POS_LEARNED &&
               cfg->position_ids == REFENC_POSIDS_ROBERTA;
    case REFENC_VAR_CONV1D_NOT_TRANSPOSED:
        return c->component == REFENC_COMP_ENCODER && cfg->family == REFENC_FAMILY_GPT2 &&
               cfg->d_model > 1 && refenc_config_attention_is_mha(cfg); /* a square out_proj */
    case REFENC_VAR_QUICK_GELU_FOR_GELU:
        return has_activation(c, REFENC_ACT_GELU) || has_activation(c, REFENC_ACT_GELU_TANH);
    case REFENC_VAR_GELU_FOR_QUICK_GELU:
        return has_activation(c, REFENC_ACT_QUICK_GELU);
    default: /* the modern blocks', the RoPE scaling and the pooling variants, else 0 */
        return modern_block_applies(v, c) || rope_scaling_applies(v, c) || pooling_applies(v, c) || t5_applies(v, c);
    }
}

int refenc_variant_applies(refenc_variant v, const refenc_case *c)
{
    return refenc_variant_is_backward(v) ? backward_applies(v, c) : forward_applies(v, c);
}

/* gamma' = gamma sqrt((D-1)/D), eps' = eps (D-1)/D give
 *   (x - mu) / sqrt(var + eps') gamma' = (x - mu) / sqrt(var D/(D-1) + eps) gamma,
 * LayerNorm with the unbiased variance, up to the rounding of gamma' and eps'
 * (relative 2^-53, far below any tolerance). */
static void unbiased(refenc_case *c)
{
    const double D = (double)c->cfg.d_model, f = sqrt((D - 1) / D);
    refenc_params *p = &c->params;
    for (size_t i = 0; i < p->n_layers; i++)
        for (size_t d = 0; d < c->cfg.d_model; d++) {
            if (p->layers[i].norm1_weight != NULL) /* none: skip_first_prenorm's layer 0 */
                p->layers[i].norm1_weight[d] *= f;
            p->layers[i].norm2_weight[d] *= f;
            if (p->layers[i].post_attn_norm_weight != NULL) { /* sandwich_norm's */
                p->layers[i].post_attn_norm_weight[d] *= f;
                p->layers[i].post_ffn_norm_weight[d] *= f;
            }
        }
    if (p->norm_weight != NULL)
        for (size_t d = 0; d < c->cfg.d_model; d++)
            p->norm_weight[d] *= f;
    c->cfg.layer_norm_eps *= (D - 1) / D;
    if (c->cfg.embedding_norm && p->embedding_norm_weight != NULL) {
        for (size_t d = 0; d < c->cfg.d_model; d++)
            p->embedding_norm_weight[d] *= f;
        c->cfg.embedding_norm_eps *= (D - 1) / D;
    }
}

/* every eps equal to from becomes to: the layers' and the embedding's */
static void swap_eps(refenc_config *cfg, double from, double to)
{
    if (cfg->layer_norm_eps == from)
        cfg->layer_norm_eps = to;
    if (cfg->embedding_norm && cfg->embedding_norm_eps == from)
        cfg->embedding_norm_eps = to;
}

/* W := W^T for every layer's attention output projection (D, D) */
static void transpose_out_proj(refenc_case *c)
{
    const size_t D = c->cfg.d_model;
    for (size_t i = 0; i < c->params.n_layers; i++) {
        double *W = c->params.layers[i].out_proj_weight;
        for (size_t r = 0; r < D; r++)
            for (size_t k = r + 1; k < D; k++) {
                const double t = W[r * D + k];
                W[r * D + k] = W[k * D + r];
                W[k * D + r] = t;
            }
    }
}

/* eps x 10 (up) or eps / 10: the layers' and, when present, the embedding's */
static void scale_eps(refenc_config *cfg, int up)
{
    if (up) {
        cfg->layer_norm_eps *= 10;
        if (cfg->embedding_norm)
            cfg->embedding_norm_eps *= 10;
    } else {
        cfg->layer_norm_eps /= 10;
        if (cfg->embedding_norm)
            cfg->embedding_norm_eps /= 10;
    }
}

/* The embedding table (V, D) multiplied (up) or divided by sqrt(D): the
 * scaling moved from the lookup into the table, where the bug puts it. */
static void rescale_embedding(refenc_case *c, int up)
{
    const refenc_config *cfg = &c->cfg;
    const double s = sqrt((double)cfg->d_model);
    for (size_t i = 0; i < cfg->vocab_size * cfg->d_model; i++) {
        if (up)
            c->params.embedding[i] *= s;
        else
            c->params.embedding[i] /= s;
    }
}

/* 1 = padding read as 1 = attend: every entry of the key padding mask flipped */
static void invert_padding_mask(refenc_case *c)
{
    for (size_t i = 0; i < c->B * c->L; i++)
        c->key_padding_mask[i] = !c->key_padding_mask[i];
}

/* every norm weight w := fl(w + 1): with the kernel's own + 1, the scale
 * fl(1 + fl(w + 1)), within 2u of the buggy 2 + w */
static void fold_offset(refenc_case *c)
{
    refenc_params *p = &c->params;
    const size_t D = c->cfg.d_model;
    for (size_t i = 0; i < p->n_layers; i++)
        for (size_t d = 0; d < D; d++) {
            if (p->layers[i].norm1_weight != NULL) /* none: skip_first_prenorm's layer 0 */
                p->layers[i].norm1_weight[d] += 1.0;
            p->layers[i].norm2_weight[d] += 1.0;
            if (p->layers[i].post_attn_norm_weight != NULL) { /* sandwich_norm's */
                p->layers[i].post_attn_norm_weight[d] += 1.0;
                p->layers[i].post_ffn_norm_weight[d] += 1.0;
            }
        }
    for (size_t d = 0; p->norm_weight != NULL && d < D; d++)
        p->norm_weight[d] += 1.0;
    for (size_t d = 0; c->cfg.embedding_norm && p->embedding_norm_weight != NULL && d < D; d++)
        p->embedding_norm_weight[d] += 1.0;
    const size_t Dh = refenc_config_head_dim(&c->cfg); /* Gemma 3's q_norm, k_norm (qk_norm.h) */
    for (size_t i = 0; c->cfg.qk_norm == REFENC_QKNORM_RMS && i < p->n_layers; i++)
        for (size_t d = 0; d < Dh; d++) {
            p->layers[i].q_norm_weight[d] += 1.0;
            p->layers[i].k_norm_weight[d] += 1.0;
        }
}

/* every layer's in_proj_bias (E + 2 Hkv Dh) zero: Qwen2's q, k, v biases
 * never added (the tensors stay, so the case keeps its layout) */
static void zero_qkv_bias(refenc_case *c)
{
    const size_t R = refenc_config_qkv_rows(&c->cfg);
    for (size_t i = 0; i < c->params.n_layers; i++)
        if (c->params.layers[i].in_proj_bias != NULL)
            memset(c->params.layers[i].in_proj_bias, 0, R * sizeof(double));
}

/* The other family's phase with the same period: ModernBERT's global layers
 * l % n == 0 become Gemma's (l + 1) % n == 0, or the reverse. */
static void shift_pattern(refenc_config *cfg)
{
    const size_t n = cfg->global_attn_every_n_layers, p = cfg->sliding_window_pattern;
    cfg->global_attn_every_n_layers = p, cfg->sliding_window_pattern = n;
}

/* The modern blocks' variants (the gated FFN, Gemma's RMSNorm and attention,
 * RoPE scaling, grouped-query attention); hooks already cleared. */
static void apply_modern(refenc_variant v, refenc_case *c, refenc_variant_hooks *hooks)
{
    refenc_config *cfg = &c->cfg;
    switch (v) {
    case REFENC_VAR_GLU_HALVES_SWAPPED:
        cfg->glu_gate = cfg->glu_gate == REFENC_GLU_GATE_FIRST ? REFENC_GLU_GATE_SECOND : REFENC_GLU_GATE_FIRST;
        break;
    case REFENC_VAR_RMSNORM_OFFSET_MISSING: cfg->rmsnorm_offset = 0; break;
    case REFENC_VAR_RMSNORM_OFFSET_DOUBLED: fold_offset(c); break;
    /* the unscaled frequencies: type none (dynamic's base at S = L0 is base) */
    case REFENC_VAR_LLAMA3_SCALING_IGNORED:
    case REFENC_VAR_DYNAMIC_NTK_FROM_MAX_POSITIONS: cfg->rope_scaling.type = REFENC_ROPE_SCALING_NONE; break;
    case REFENC_VAR_NTK_SCALING_IGNORED:
        cfg->rope_scaling.type = REFENC_ROPE_SCALING_NONE, cfg->rope_scaling.mixed = 0;
        break;
    case REFENC_VAR_YARN_FACTOR_SQUARED: {
        const double f = refenc_rope_attention_factor(&cfg->rope_scaling);
        cfg->rope_scaling.attention_factor = f * f;
        break;
    }
    case REFENC_VAR_YARN_FACTOR_DROPPED: cfg->rope_scaling.attention_factor = 1.0; break;
    case REFENC_VAR_GQA_TILED: hooks->gqa_tiled = 1; break;
    case REFENC_VAR_SOFTCAP_MISSING: cfg->attn_logit_softcapping = 0; break;
    case REFENC_VAR_QUERY_SCALE_HEAD_DIM: cfg->query_pre_attn_scalar = 0; break;
    case REFENC_VAR_SOFTCAP_AFTER_MASK: hooks->softcap_after_mask = 1; break;
    /* one key more on each windowed side: w + 1 keys, or |i - j| <= w // 2 + 1 */
    case REFENC_VAR_WINDOW_OFF_BY_ONE:
        cfg->sliding_window += cfg->sliding_window > 0;
        cfg->local_attention += 2 * (cfg->local_attention > 0);
        break;
    case REFENC_VAR_WINDOW_IGNORED: cfg->sliding_window = 0, cfg->local_attention = 0; break;
    /* the global layers rotated with the local base */
    case REFENC_VAR_LOCAL_BASE_ON_GLOBAL_LAYER0: cfg->global_rope_theta = local_base(cfg); break;
    case REFENC_VAR_ROPE_SCALING_ON_LOCAL_LAYERS: hooks->rope_scaling_on_local_layers = 1; break;
    /* the local layers are unscaled already */
    case REFENC_VAR_GLOBAL_ROPE_SCALING_IGNORED: cfg->rope_scaling.type = REFENC_ROPE_SCALING_NONE; break;
    case REFENC_VAR_EMBEDDING_NORMALIZER_UNROUNDED: cfg->embedding_normalizer_dtype = REFENC_NORMALIZER_EXACT; break;
    case REFENC_VAR_QKV_BIAS_DROPPED: zero_qkv_bias(c); break;
    case REFENC_VAR_QK_NORM_AFTER_ROPE: hooks->qk_norm_after_rope = 1; break;
    case REFENC_VAR_QK_NORM_OVER_ALL_HEADS: hooks->qk_norm_over_all_heads = 1; break;
    /* the pooling given no padding mask: the mean over L, the last token L - 1 */
    case REFENC_VAR_MEAN_COUNTS_PADDING:
    case REFENC_VAR_LAST_TOKEN_IGNORES_PADDING: hooks->pooling_ignores_padding = 1; break;
    case REFENC_VAR_POOLING_NOT_NORMALIZED: cfg->pooling_normalize = 0; break;
    case REFENC_VAR_T5_SCORES_SCALED: cfg->query_pre_attn_scalar = 0; break; /* S = Dh */
    case REFENC_VAR_T5_BUCKET_NOT_CLAMPED: hooks->t5_bucket_not_clamped = 1; break;
    case REFENC_VAR_T5_BIAS_PER_LAYER: hooks->t5_bias_per_layer = 1; break;
    case REFENC_VAR_ALIBI_BIAS_POSITIVE: hooks->alibi_bias_positive = 1; break;
    /* a LayerNorm with the RMSNorm's weight and no bias */
    case REFENC_VAR_RMSNORM_MEAN_SUBTRACTED: cfg->norm_type = REFENC_NORMTYPE_LAYERNORM, cfg->norm_bias = 0; break;
    case REFENC_VAR_LAYER_PATTERN_SHIFTED: shift_pattern(cfg); break;
    default: break;
    }
}

/* Layer 0 given the attention norm ModernBERT omits, as a port that builds
 * every layer alike does: a fresh norm, weight 1 (0 under Gemma's (1 + w))
 * and bias 0, where the checkpoint has none.  Every other tensor keeps its
 * values (found by name). */
static int restore_first_prenorm(refenc_case *c, refenc_error *err)
{
    refenc_config cfg = c->cfg;
    cfg.skip_first_prenorm = 0;
    refenc_params p;
    const int st = refenc_params_alloc(&p, &cfg, err);
    if (st)
        return st;
    for (size_t k = 0; k < p.n_tensors; k++) {
        const refenc_tensor *t = &p.tensors[k], *old = refenc_params_find(&c->params, t->name);
        const int weight = strstr(t->name, ".weight") != NULL;
        for (size_t i = 0; i < t->size; i++)
            t->data[i] = old != NULL ? old->data[i] : weight && !cfg.rmsnorm_offset ? 1.0 : 0.0;
    }
    refenc_params_free(&c->params);
    c->params = p;
    c->cfg = cfg;
    return REFENC_OK;
}

/* A Llama-shaped block on a Gemma 2/3 checkpoint: no norm on the sublayers'
 * outputs (the tensors stay, unread, so the case keeps its layout). */
static void drop_post_norms(refenc_case *c)
{
    c->cfg.sandwich_norm = 0;
    for (size_t i = 0; i < c->params.n_layers; i++) {
        refenc_layer_params *lp = &c->params.layers[i];
        lp->post_attn_norm_weight = lp->post_attn_norm_bias = NULL;
        lp->post_ffn_norm_weight = lp->post_ffn_norm_bias = NULL;
    }
}

/* Every layer's pre-FFN norm (norm2) given the post-attention norm's weights
 * (and bias), as a loader that maps Llama's post_attention_layernorm, its
 * pre-FFN norm, onto Gemma 2/3's checkpoint does. */
static void post_attention_norm_as_pre_ffn(refenc_case *c)
{
    const size_t D = c->cfg.d_model;
    for (size_t i = 0; i < c->params.n_layers; i++) {
        refenc_layer_params *lp = &c->params.layers[i];
        memcpy(lp->norm2_weight, lp->post_attn_norm_weight, D * sizeof(double));
        if (lp->norm2_bias != NULL && lp->post_attn_norm_bias != NULL)
            memcpy(lp->norm2_bias, lp->post_attn_norm_bias, D * sizeof(double));
    }
}

int refenc_variant_apply(refenc_variant v, refenc_case *c, refenc_variant_hooks *hooks, refenc_error *err)
{
    refenc_config *cfg = &c->cfg;
    /* the width whose square root scales the scores: query_pre_attn_scalar or Dh */
    const double Dh = cfg->query_pre_attn_scalar > 0 ? cfg->query_pre_attn_scalar
                                                     : (double)refenc_config_head_dim(cfg);
    memset(hooks, 0, sizeof *hooks);
    if (refenc_variant_is_backward(v))
        return REFENC_OK; /* the forward is right: the bug is in the backward's kernels */
    switch (v) {
    case REFENC_VAR_LAYERNORM_EPS_X10: scale_eps(cfg, 1); break;
    case REFENC_VAR_LAYERNORM_EPS_DIV10: scale_eps(cfg, 0); break;
    case REFENC_VAR_UNBIASED_VARIANCE: unbiased(c); break;
    case REFENC_VAR_GELU_TANH_FOR_EXACT: cfg->activation = REFENC_ACT_GELU_TANH; break;
    case REFENC_VAR_GELU_EXACT_FOR_TANH: cfg->activation = REFENC_ACT_GELU; break;
    case REFENC_VAR_ROPE_LAYOUT_SWAPPED:
        cfg->rope_layout = cfg->rope_layout == REFENC_ROPE_HALF ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF;
        break;
    case REFENC_VAR_ROPE_BASE_WRONG: /* every base the layers use (layer_pattern.h) */
        cfg->rope_base = wrong_base(cfg->rope_base);
        cfg->local_rope_theta = cfg->local_rope_theta != 0 ? wrong_base(cfg->local_rope_theta) : 0;
        cfg->global_rope_theta = cfg->global_rope_theta != 0 ? wrong_base(cfg->global_rope_theta) : 0;
        break;
    /* sqrt(Dh) tau' = sqrt(D) tau with tau' = tau sqrt(D / Dh): sqrt(H) when
     * Dh = D / H (D / Dh = H exactly), not with head_dim set */
    case REFENC_VAR_ATTENTION_SCALE_SQRT_D: cfg->temperature *= sqrt((double)cfg->d_model / Dh); break;
    /* sqrt(Dh) tau' = tau with tau' = tau / sqrt(Dh) */
    case REFENC_VAR_ATTENTION_UNSCALED:
        cfg->temperature /= sqrt(Dh);
        break;
    case REFENC_VAR_MISSING_FINAL_NORM: cfg->final_norm = 0; break;
    case REFENC_VAR_EMBEDDING_UNSCALED: rescale_embedding(c, 0); break;
    case REFENC_VAR_ALIBI_SLOPES_POW2: hooks->alibi_slopes_pow2 = 1; break;
    case REFENC_VAR_PADDING_MASK_INVERTED: invert_padding_mask(c); break;
    case REFENC_VAR_PRE_POST_SWAPPED:
        cfg->norm = cfg->norm == REFENC_NORM_PRE ? REFENC_NORM_POST : REFENC_NORM_PRE;
        break;
    case REFENC_VAR_HEADS_MERGED_WITHOUT_TRANSPOSE: hooks->merge_without_transpose = 1; break;
    case REFENC_VAR_EPS_1E5_FOR_1E12: swap_eps(cfg, 1e-12, 1e-5); break;
    case REFENC_VAR_EPS_1E12_FOR_1E5: swap_eps(cfg, 1e-5, 1e-12); break;
    case REFENC_VAR_EMBEDDING_NORM_MISSING: cfg->embedding_norm = 0; break;
    case REFENC_VAR_TOKEN_TYPES_IGNORED:
        memset(c->token_types, 0, c->B * c->L * sizeof *c->token_types);
        break;
    /* 0 .. L-1, the case's default positions (validated: L <= P) */
    case REFENC_VAR_ROBERTA_POSITIONS_FROM_ZERO: cfg->position_ids = REFENC_POSIDS_INDEX; break;
    case REFENC_VAR_CONV1D_NOT_TRANSPOSED: transpose_out_proj(c); break;
    case REFENC_VAR_QUICK_GELU_FOR_GELU: cfg->activation = REFENC_ACT_QUICK_GELU; break;
    case REFENC_VAR_GELU_FOR_QUICK_GELU: cfg->activation = REFENC_ACT_GELU; break;
    case REFENC_VAR_EMBEDDING_SCALED: rescale_embedding(c, 1); break;
    case REFENC_VAR_FIRST_PRENORM_APPLIED: return restore_first_prenorm(c, err);
    case REFENC_VAR_SANDWICH_NORMS_MISSING: drop_post_norms(c); break;
    case REFENC_VAR_BIDIRECTIONAL_RUN_CAUSALLY: c->cfg.causal = 1; break;
    case REFENC_VAR_POST_ATTENTION_NORM_AS_PRE_FFN: post_attention_norm_as_pre_ffn(c); break;
    default: apply_modern(v, c, hooks); break;
    }
    return REFENC_OK;
}

int refenc_variant_writes_params(refenc_variant v)
{
    switch (v) {
    case REFENC_VAR_UNBIASED_VARIANCE:             /* unbiased: the norms' weights      */
    case REFENC_VAR_EMBEDDING_UNSCALED:            /* rescale_embedding: the table      */
    case REFENC_VAR_EMBEDDING_SCALED:
    case REFENC_VAR_CONV1D_NOT_TRANSPOSED:         /* transpose_out_proj                */
    case REFENC_VAR_RMSNORM_OFFSET_DOUBLED:        /* fold_offset: the norms' weights   */
    case REFENC_VAR_QKV_BIAS_DROPPED:              /* zero_qkv_bias                     */
    case REFENC_VAR_FIRST_PRENORM_APPLIED:         /* restore_first_prenorm: new params */
    case REFENC_VAR_SANDWICH_NORMS_MISSING:        /* drop_post_norms: the pointers     */
    case REFENC_VAR_POST_ATTENTION_NORM_AS_PRE_FFN: return 1;
    default: return 0;
    }
}
