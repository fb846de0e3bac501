/* Named presets: the conventions of the encoder families people run
 * (docs/families.md cites the sources and lists every difference).
 *
 *   family      norm  final  act         eps    positions           embed       types  emb LN  causal
 *   vaswani     pre   yes    gelu        1e-5   none                x sqrt(D)   -      no      no
 *   bert        post  no     gelu        1e-12  learned, index      E[token]    T = 2  yes     no
 *   roberta     post  no     gelu        1e-5   learned, roberta    E[token]    T = 1  yes     no
 *   distilbert  post  no     gelu        1e-12  learned, index      E[token]    -      yes     no
 *   gpt2        pre   yes    gelu_tanh   1e-5   learned, index      E[token]    -      no      yes
 *   clip-text   pre   yes    quick_gelu  1e-5   learned, index      E[token]    -      no      yes
 *   llama       pre   yes    silu (GLU)  1e-5   rope 500000         E[token]    -      no      yes
 *   mistral     pre   yes    silu (GLU)  1e-5   rope 10000, w 4096  E[token]    -      no      yes
 *   qwen2       pre   yes    silu (GLU)  1e-6   rope 1e6            E[token]    -      no      yes
 *   qwen3       pre   yes    silu (GLU)  1e-6   rope 1e6            E[token]    -      no      yes
 *   modernbert  pre   yes    gelu (GLU)  1e-5   rope 160000/10000   E[token]    -      yes     no
 *   gemma3      pre   yes    gelu_tanh   1e-6   rope 1e6/10000      x sqrt(D)   -      no      yes
 *   t5-encoder  pre   yes    relu        1e-6   T5 buckets 32/128   E[token]    -      no      no
 *   nomic-bert  post  no     silu (GLU)  1e-12  rope 1000           E[token]    T = 2  yes     no
 *   jina-bert-v2 post no     gelu (GLU)  1e-12  alibi, symmetric    E[token]    T = 2  yes     no
 *   gte         post  no     gelu (GLU)  1e-12  rope 500000, ntk 2  E[token]    -      yes     no
 *
 * llama, mistral, qwen2 and qwen3 are decoder blocks run as encoders (the
 * block stack without the LM head): RMSNorm, bias-free linear maps (qwen2:
 * q/k/v biased), SwiGLU gate first, grouped-query attention (Hkv 8, qwen2 4),
 * qwen3 q/k RMSNorm and head_dim 128, mistral a sliding window of 4096.  They
 * are causal, as their base models; an embedding model built on one declares
 * what it changes ("causal": false for gte-Qwen2, "pooling": "last_token"
 * for Qwen3-Embedding).  gemma3 is Gemma3TextModel's block (1B): Llama's
 * layout with sandwich norms, (1 + w) RMSNorms (q/k norms too), tanh GeGLU,
 * multi-query attention of head_dim 256 scaled by query_pre_attn_scalar, five
 * local layers (causal window 512, base 10000) to one global, sqrt(D) rounded
 * to bfloat16.
 * modernbert, t5-encoder, nomic-bert, jina-bert-v2 and gte are encoders:
 * their every convention is listed in family.c and docs/families.md
 * (t5-encoder: RMSNorm, bias-free, unscaled scores, T5's relative bias in
 * layer 0; nomic-bert: bias-free linears, SwiGLU, LayerNorms with biases;
 * jina-bert-v2: BERT's layers with ALiBi and a GeGLU whose gated_layers
 * alone are bias-free; gte: biased linears but a bias-free linear1, the
 * GLU's second half activated, GTE's fixed NTK, CLS pooling).
 *
 * Every family but vaswani masks with finfo_min (the HF models' additive
 * torch.finfo(dtype).min) and takes the sizes of its base model (BERT-base:
 * D 768, H 12, F 3072, N 12, V 30522, P 512; ...); vaswani is
 * refenc_config_default.  Every field can be overridden afterwards (the
 * JSON reader applies "family" first, then the other keys). */
#ifndef REFENC_FAMILY_H
#define REFENC_FAMILY_H

#include "config.h"

/* Sets every field of cfg to the family's preset.  An unknown family leaves
 * the defaults (refenc_config_validate refuses it). */
void refenc_config_family(refenc_config *cfg, refenc_family family);

#endif
