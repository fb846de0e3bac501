#include "variants.h"

#include <math.h>
#include <string.h>

static const refenc_variant_info table[REFENC_VAR_COUNT] = {
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
        "scale by 1/sqrt(Dh), Dh = d_model / n_heads"},
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
};

const refenc_variant_info *refenc_variant_get(refenc_variant v)
{
    return (unsigned)v < REFENC_VAR_COUNT ? &table[v] : NULL;
}

int refenc_variant_parse(refenc_variant *v, const char *name)
{
    for (int i = 0; i < REFENC_VAR_COUNT; i++)
        if (strcmp(table[i].name, name) == 0) {
            *v = (refenc_variant)i;
            return 1;
        }
    return 0;
}

static int has_layernorm(const refenc_case *c)
{
    return c->component == REFENC_COMP_ENCODER || c->component == REFENC_COMP_LAYERNORM;
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

int refenc_variant_applies(refenc_variant v, const refenc_case *c)
{
    const refenc_config *cfg = &c->cfg;
    const size_t H = cfg->n_heads;
    switch (v) {
    case REFENC_VAR_LAYERNORM_EPS_X10:
    case REFENC_VAR_LAYERNORM_EPS_DIV10:
        return has_layernorm(c) && cfg->layer_norm_eps > 0;
    case REFENC_VAR_UNBIASED_VARIANCE:
        return has_layernorm(c) && cfg->d_model > 1;
    case REFENC_VAR_GELU_TANH_FOR_EXACT:
        return has_activation(c, REFENC_ACT_GELU);
    case REFENC_VAR_GELU_EXACT_FOR_TANH:
        return has_activation(c, REFENC_ACT_GELU_TANH);
    case REFENC_VAR_ROPE_LAYOUT_SWAPPED:
    case REFENC_VAR_ROPE_BASE_WRONG:
        return has_rope(c);
    case REFENC_VAR_ATTENTION_SCALE_SQRT_D:
        return has_attention(c) && H > 1;
    case REFENC_VAR_ATTENTION_UNSCALED:
        return has_attention(c) && cfg->d_model / H > 1;
    case REFENC_VAR_MISSING_FINAL_NORM:
        return c->component == REFENC_COMP_ENCODER && cfg->norm == REFENC_NORM_PRE && cfg->final_norm;
    case REFENC_VAR_EMBEDDING_UNSCALED:
        return c->component == REFENC_COMP_ENCODER && cfg->vocab_size > 0 && cfg->d_model > 1;
    case REFENC_VAR_ALIBI_SLOPES_POW2:
        return (c->component == REFENC_COMP_ALIBI ||
                (has_attention(c) && cfg->positional == REFENC_POS_ALIBI)) && (H & (H - 1)) != 0;
    case REFENC_VAR_PADDING_MASK_INVERTED:
        return has_attention(c) && c->key_padding_mask != NULL;
    case REFENC_VAR_PRE_POST_SWAPPED:
        return c->component == REFENC_COMP_ENCODER;
    case REFENC_VAR_HEADS_MERGED_WITHOUT_TRANSPOSE:
        return has_attention(c) && H > 1 && c->L > 1;
    default:
        return 0;
    }
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
            p->layers[i].norm1_weight[d] *= f;
            p->layers[i].norm2_weight[d] *= f;
        }
    if (p->norm_weight != NULL)
        for (size_t d = 0; d < c->cfg.d_model; d++)
            p->norm_weight[d] *= f;
    c->cfg.layer_norm_eps *= (D - 1) / D;
}

void refenc_variant_apply(refenc_variant v, refenc_case *c, refenc_variant_hooks *hooks)
{
    refenc_config *cfg = &c->cfg;
    memset(hooks, 0, sizeof *hooks);
    switch (v) {
    case REFENC_VAR_LAYERNORM_EPS_X10: cfg->layer_norm_eps *= 10; break;
    case REFENC_VAR_LAYERNORM_EPS_DIV10: cfg->layer_norm_eps /= 10; break;
    case REFENC_VAR_UNBIASED_VARIANCE: unbiased(c); break;
    case REFENC_VAR_GELU_TANH_FOR_EXACT: cfg->activation = REFENC_ACT_GELU_TANH; break;
    case REFENC_VAR_GELU_EXACT_FOR_TANH: cfg->activation = REFENC_ACT_GELU; break;
    case REFENC_VAR_ROPE_LAYOUT_SWAPPED:
        cfg->rope_layout = cfg->rope_layout == REFENC_ROPE_HALF ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF;
        break;
    case REFENC_VAR_ROPE_BASE_WRONG: cfg->rope_base = cfg->rope_base == 10000.0 ? 500000.0 : 10000.0; break;
    /* sqrt(Dh) tau' = sqrt(D) tau with tau' = tau sqrt(H) */
    case REFENC_VAR_ATTENTION_SCALE_SQRT_D: cfg->temperature *= sqrt((double)cfg->n_heads); break;
    /* sqrt(Dh) tau' = tau with tau' = tau / sqrt(Dh) */
    case REFENC_VAR_ATTENTION_UNSCALED:
        cfg->temperature /= sqrt((double)(cfg->d_model / cfg->n_heads));
        break;
    case REFENC_VAR_MISSING_FINAL_NORM: cfg->final_norm = 0; break;
    case REFENC_VAR_EMBEDDING_UNSCALED: {
        const double s = sqrt((double)cfg->d_model);
        for (size_t i = 0; i < cfg->vocab_size * cfg->d_model; i++)
            c->params.embedding[i] /= s;
        break;
    }
    case REFENC_VAR_ALIBI_SLOPES_POW2: hooks->alibi_slopes_pow2 = 1; break;
    case REFENC_VAR_PADDING_MASK_INVERTED:
        for (size_t i = 0; i < c->B * c->L; i++)
            c->key_padding_mask[i] = !c->key_padding_mask[i];
        break;
    case REFENC_VAR_PRE_POST_SWAPPED:
        cfg->norm = cfg->norm == REFENC_NORM_PRE ? REFENC_NORM_POST : REFENC_NORM_PRE;
        break;
    case REFENC_VAR_HEADS_MERGED_WITHOUT_TRANSPOSE: hooks->merge_without_transpose = 1; break;
    default: break;
    }
}
