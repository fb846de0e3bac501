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

static const preset presets[REFENC_FAMILY_COUNT] = {
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

void refenc_config_family(refenc_config *cfg, refenc_family family)
{
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
