/* Accuracy of whole layers and stacks against the oracle: every trace step
 * of refenc_encoder_forward ("embed", "layers.{i}.*", "norm", "output") is
 * checked elementwise against a running bound (bounds.c: bnd_encoder),
 * propagated step by step from the reference's own intermediates.
 * One configuration per positional scheme, Pre/Post-LN, each activation,
 * with and without masks; and one per family preset. */
#include <math.h>
#include <string.h>

#include "acc_common.h"
#include "../../ref/tool/random_params.h"

typedef struct {
    const char *name;
    refenc_positional pos;
    refenc_rope_layout layout;
    double base;
    refenc_norm_placement norm;
    refenc_activation act;
    int final_norm, causal, pad, mask, vocab;
    size_t H;
    double tau, x_mean, x_sd;
    int64_t first_pos;  /* positions first_pos .. first_pos + L - 1 */
    refenc_norm_type norm_type; /* every norm: LayerNorm (0) or RMSNorm */
    int rmsnorm_offset;         /* RMSNorm's (1 + w) */
    int glu;                    /* 0: the MLP; 1: gated, gate first; 2: gate second */
    int no_bias;                /* 1: LayerNorms without beta and bias-free linears */
} stack_case;

static const stack_case CASES[17] = {
    {"none pre gelu", REFENC_POS_NONE, 0, 1e4, REFENC_NORM_PRE, REFENC_ACT_GELU, 1, 0, 0, 0, 0, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"sinusoidal post relu padding", REFENC_POS_SINUSOIDAL, 0, 1e4, REFENC_NORM_POST, REFENC_ACT_RELU, 0, 0, 1, 0, 0, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"sinusoidal pre gelu pos 8185..8191", REFENC_POS_SINUSOIDAL, 0, 1e4, REFENC_NORM_PRE, REFENC_ACT_GELU, 1, 0, 0, 0, 0, 3, 1.0, 0, 1, 8185, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"learned pre gelu_tanh causal tokens", REFENC_POS_LEARNED, 0, 1e4, REFENC_NORM_PRE, REFENC_ACT_GELU_TANH, 1, 1, 0, 0, 13, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"rope half pre gelu attn_mask", REFENC_POS_ROPE, REFENC_ROPE_HALF, 1e4, REFENC_NORM_PRE, REFENC_ACT_GELU, 1, 0, 0, 1, 0, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"rope interleaved post gelu_tanh", REFENC_POS_ROPE, REFENC_ROPE_INTERLEAVED, 5e5, REFENC_NORM_POST, REFENC_ACT_GELU_TANH, 0, 1, 1, 0, 0, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"rope half pre relu pos 8185..8191", REFENC_POS_ROPE, REFENC_ROPE_HALF, 1e4, REFENC_NORM_PRE, REFENC_ACT_RELU, 1, 0, 1, 0, 0, 3, 1.0, 0, 1, 8185, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"alibi 3 heads pre relu padding", REFENC_POS_ALIBI, 0, 1e4, REFENC_NORM_PRE, REFENC_ACT_RELU, 1, 0, 1, 0, 0, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"alibi 4 heads post gelu tau", REFENC_POS_ALIBI, 0, 1e4, REFENC_NORM_POST, REFENC_ACT_GELU, 1, 0, 0, 1, 0, 4, 0.37, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"none pre gelu large-mean input", REFENC_POS_NONE, 0, 1e4, REFENC_NORM_PRE, REFENC_ACT_GELU, 0, 0, 0, 0, 0, 3, 1.0, 100, 0.01, 0, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
    {"rmsnorm rope half pre gelu_tanh", REFENC_POS_ROPE, REFENC_ROPE_HALF, 1e4, REFENC_NORM_PRE, REFENC_ACT_GELU_TANH, 1, 0, 1, 0, 0, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_RMSNORM, 0, 0, 0},
    {"rmsnorm (1 + w) rope half pre gelu_tanh", REFENC_POS_ROPE, REFENC_ROPE_HALF, 1e4, REFENC_NORM_PRE, REFENC_ACT_GELU_TANH, 1, 0, 1, 0, 0, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_RMSNORM, 1, 0, 0},
    {"rmsnorm alibi post relu tokens", REFENC_POS_ALIBI, 0, 1e4, REFENC_NORM_POST, REFENC_ACT_RELU, 0, 0, 1, 0, 13, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_RMSNORM, 0, 0, 0},
    {"swiglu (gate first) rmsnorm rope pre", REFENC_POS_ROPE, REFENC_ROPE_HALF, 1e4, REFENC_NORM_PRE, REFENC_ACT_SILU, 1, 0, 1, 0, 0, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_RMSNORM, 0, 1, 0},
    {"geglu (gate second) post alibi", REFENC_POS_ALIBI, 0, 1e4, REFENC_NORM_POST, REFENC_ACT_GELU, 0, 0, 1, 0, 0, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 2, 0},
    {"geglu (gate first) bias-free layernorm and linears rope pre tokens", REFENC_POS_ROPE, REFENC_ROPE_HALF, 1.6e5, REFENC_NORM_PRE, REFENC_ACT_GELU, 1, 0, 1, 0, 13, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 1, 1},
    {"learned pre gelu, a vocabulary of one token", REFENC_POS_LEARNED, 0, 1e4, REFENC_NORM_PRE, REFENC_ACT_GELU, 1, 0, 1, 0, 1, 3, 1.0, 0, 1, 0, REFENC_NORMTYPE_LAYERNORM, 0, 0, 0},
};

typedef struct {
    char name[64];
    size_t n;
    double *v;
} captured;

typedef struct {
    captured c[64];
    size_t n;
} capture;

static void capture_fn(void *ctx, const char *name, const double *data, size_t ndim,
                       const size_t *shape)
{
    capture *cap = ctx;
    cr_assert_lt(cap->n, 64);
    captured *c = &cap->c[cap->n++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->n = 1;
    for (size_t d = 0; d < ndim; d++)
        c->n *= shape[d];
    c->v = acc_zeros(c->n);
    memcpy(c->v, data, c->n * sizeof(double));
}

/* The reference on (cfg, p, in), its recomputation with running bounds
 * (bnd_encoder), and the oracle: every trace step within its bound. */
static void check_stack(const refenc_config *cfgp, const refenc_params *pp, const refenc_input *inp,
                        const char *case_name)
{
    const refenc_config cfg = *cfgp;
    const refenc_params p = *pp;
    const refenc_input in = *inp;
    const size_t B = in.B, L = in.L, n = B * L * cfg.d_model;
    refenc_error err;
    /* the reference, and its recomputation with bounds: identical outputs */
    double *y = acc_zeros(n), *y2 = acc_zeros(n);
    refenc_workspace ws;
    cr_assert_eq(refenc_workspace_alloc(&ws, &cfg, B, L, &err), REFENC_OK);
    cr_assert_eq(refenc_encoder_forward(y, &ws, &p, &cfg, &in, NULL, &err), REFENC_OK, "%s",
                 err.message);
    bnd_steps st;
    cr_assert(bnd_encoder(&st, y2, &p, &cfg, &in), "%s: a LayerNorm bound does not apply",
              case_name);
    cr_assert(memcmp(y, y2, n * sizeof(double)) == 0,
              "%s: the bound followed another computation than refenc_encoder_forward", case_name);

    /* the oracle, every step */
    capture cap = {0};
    const refenc_trace tr = {capture_fn, &cap};
    refenc_mp_report rep;
    const int s = refenc_mp_encoder_forward(y2, &p, &cfg, &in, &tr, P0, &rep);
    cr_assert_eq(s, REFENC_OK, "%s: %s", case_name, rep.error.message);
    cr_assert_eq(cap.n, st.n, "%s: %zu oracle steps, %zu reference steps", case_name, cap.n, st.n);

    acc_stats a;
    acc_init(&a);
    for (size_t i = 0; i < cap.n; i++) {
        const bnd_step *b = bnd_steps_find(&st, cap.c[i].name);
        cr_assert_not_null(b, "%s: no reference step %s", case_name, cap.c[i].name);
        cr_assert_eq(b->n, cap.c[i].n);
        acc_check(&a, cap.c[i].name, b->ref, cap.c[i].v, b->E, b->n);
        free(cap.c[i].v);
    }
    char name[96];
    snprintf(name, sizeof name, "stack: %s", case_name);
    bnd_steps_free(&st);
    refenc_workspace_free(&ws);
    free(y), free(y2);
    acc_finish(&a, name);
}


static void run_case(const stack_case *c)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 12, cfg.n_heads = c->H, cfg.d_ff = 20, cfg.n_layers = 2;
    if (c->H == 4)
        cfg.d_model = 16;
    cfg.positional = c->pos, cfg.rope_layout = c->layout, cfg.rope_base = c->base;
    cfg.norm = c->norm, cfg.activation = c->act, cfg.final_norm = c->final_norm;
    cfg.causal = c->causal, cfg.temperature = c->tau, cfg.vocab_size = (size_t)c->vocab;
    cfg.max_len = 16;
    cfg.norm_type = c->norm_type, cfg.rmsnorm_offset = c->rmsnorm_offset;
    if (c->glu)
        cfg.ffn_type = REFENC_FFN_GLU, cfg.glu_gate = c->glu == 1 ? REFENC_GLU_GATE_FIRST : REFENC_GLU_GATE_SECOND;
    cfg.norm_bias = cfg.linear_bias = !c->no_bias;
    refenc_params p;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&p, &cfg, &err), REFENC_OK, "%s", err.message);
    gsl_rng *r = test_rng(200 + (unsigned long)(c - CASES));
    refenc_params_init_random(&p, &cfg, r);

    const size_t B = 2, L = 7, D = cfg.d_model, n = B * L * D;
    double *x = c->vocab ? NULL : acc_randn(n, c->x_mean, c->x_sd, r);
    int64_t tokens[14], pos[7];
    for (size_t i = 0; i < B * L; i++)
        tokens[i] = (int64_t)gsl_rng_uniform_int(r, cfg.vocab_size ? cfg.vocab_size : 1);
    for (size_t l = 0; l < L; l++)
        pos[l] = c->first_pos + (int64_t)l;
    uint8_t pad[14] = {0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0};
    double mask[49];
    for (size_t i = 0; i < L * L; i++)
        mask[i] = i % 6 == 1 ? -INFINITY : gsl_rng_uniform(r) - 0.5;
    refenc_input in = {.B = B, .L = L, .tokens = c->vocab ? tokens : NULL, .x = x,
                       .key_padding_mask = c->pad ? pad : NULL,
                       .positions = c->first_pos ? pos : NULL,
                       .attn_mask = c->mask ? mask : NULL};

    check_stack(&cfg, &p, &in, c->name);
    refenc_params_free(&p);
    gsl_rng_free(r);
    free(x);
}

/* one test per configuration, so that each fails on its own */
Test(accuracy_stack, none_pre_gelu) { run_case(&CASES[0]); }
Test(accuracy_stack, sinusoidal_post_relu_padding) { run_case(&CASES[1]); }
Test(accuracy_stack, sinusoidal_pre_gelu_positions_to_8191) { run_case(&CASES[2]); }
Test(accuracy_stack, learned_pre_gelu_tanh_causal_tokens) { run_case(&CASES[3]); }
Test(accuracy_stack, rope_half_pre_gelu_attn_mask) { run_case(&CASES[4]); }
Test(accuracy_stack, rope_interleaved_post_gelu_tanh_padding_causal) { run_case(&CASES[5]); }
Test(accuracy_stack, rope_half_pre_relu_positions_to_8191) { run_case(&CASES[6]); }
Test(accuracy_stack, alibi_3_heads_pre_relu_padding) { run_case(&CASES[7]); }
Test(accuracy_stack, alibi_4_heads_post_gelu_temperature_mask) { run_case(&CASES[8]); }
Test(accuracy_stack, none_pre_gelu_large_mean_input) { run_case(&CASES[9]); }
Test(accuracy_stack, rmsnorm_rope_half_pre_gelu_tanh_padding) { run_case(&CASES[10]); }
Test(accuracy_stack, rmsnorm_offset_rope_half_pre_gelu_tanh_padding) { run_case(&CASES[11]); }
Test(accuracy_stack, rmsnorm_alibi_post_relu_tokens_padding) { run_case(&CASES[12]); }
Test(accuracy_stack, swiglu_gate_first_rmsnorm_rope_pre_padding) { run_case(&CASES[13]); }
Test(accuracy_stack, geglu_gate_second_post_alibi_padding) { run_case(&CASES[14]); }
Test(accuracy_stack, geglu_gate_first_bias_free_norms_and_linears_rope_tokens) { run_case(&CASES[15]); }
Test(accuracy_stack, learned_pre_gelu_vocabulary_of_one_token) { run_case(&CASES[16]); }

/* The families (family.h): each preset at small sizes (D 12, H 3, F 20,
 * N 2, V 13, P 16), on token inputs with token types where the family has
 * them and padding on the right (BERT-like) or the left (GPT-2 style, where
 * causal + left padding masks whole rows: under finfo_min those rows take
 * uniform weights, in the reference as in the oracle).  Embedding tables at
 * BERT's initialisation scale (std 0.02), where the embedding LayerNorm's
 * eps matters most. */
typedef struct {
    const char *name;
    refenc_family family;
    int left_padding;
    refenc_mask_value mask;
} family_case;

static void run_family(const family_case *c, unsigned long stream)
{
    refenc_config cfg;
    refenc_config_family(&cfg, c->family);
    cfg.d_model = 12, cfg.n_heads = 3, cfg.d_ff = 20, cfg.n_layers = 2, cfg.vocab_size = 13;
    cfg.max_len = 16, cfg.mask_value = c->mask;
    if (cfg.padding_idx < 0)
        cfg.padding_idx = 0; /* GPT-2 and CLIP have no pad token: pad with token 0 */
    refenc_params p;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&p, &cfg, &err), REFENC_OK, "%s", err.message);
    gsl_rng *r = test_rng(stream);
    refenc_params_init_random(&p, &cfg, r);
    for (size_t i = 0; i < cfg.vocab_size * cfg.d_model; i++)
        p.embedding[i] *= 0.02 * sqrt((double)cfg.d_model);
    for (size_t i = 0; p.token_type_embedding && i < cfg.type_vocab_size * cfg.d_model; i++)
        p.token_type_embedding[i] *= 0.02 * sqrt((double)cfg.d_model);
    for (size_t i = 0; i < cfg.max_len * cfg.d_model; i++)
        p.pos_embedding[i] *= 0.04;

    enum { B = 2, L = 7 };
    uint8_t pad[B * L] = {0};
    int64_t tokens[B * L], types[B * L];
    for (size_t l = 0; l < L; l++) {
        pad[l] = c->left_padding ? l < 2 : l >= 5;       /* item 0: two pads */
        pad[L + l] = c->left_padding ? l < 4 : l >= 3;   /* item 1: four pads */
    }
    for (size_t i = 0; i < B * L; i++) {
        const int64_t t = 1 + (int64_t)gsl_rng_uniform_int(r, cfg.vocab_size - 1);
        tokens[i] = pad[i] ? cfg.padding_idx : (t == cfg.padding_idx ? 0 : t);
        types[i] = cfg.type_vocab_size > 0 && !pad[i] ? (int64_t)(i % cfg.type_vocab_size) : 0;
    }
    refenc_input in = {.B = B, .L = L, .tokens = tokens, .key_padding_mask = pad,
                       .token_types = cfg.type_vocab_size > 0 ? types : NULL};
    check_stack(&cfg, &p, &in, c->name);
    refenc_params_free(&p);
    gsl_rng_free(r);
}

static const family_case FAMILIES[] = {
    {"bert right padding finfo_min", REFENC_FAMILY_BERT, 0, REFENC_MASK_FINFO_MIN},
    {"roberta positions right padding", REFENC_FAMILY_ROBERTA, 0, REFENC_MASK_FINFO_MIN},
    {"distilbert right padding", REFENC_FAMILY_DISTILBERT, 0, REFENC_MASK_FINFO_MIN},
    {"gpt2 causal left padding finfo_min", REFENC_FAMILY_GPT2, 1, REFENC_MASK_FINFO_MIN},
    {"gpt2 causal left padding -inf", REFENC_FAMILY_GPT2, 1, REFENC_MASK_NEG_INF},
    {"clip-text quick_gelu causal", REFENC_FAMILY_CLIP_TEXT, 0, REFENC_MASK_FINFO_MIN},
};

Test(accuracy_stack, family_bert) { run_family(&FAMILIES[0], 260); }
Test(accuracy_stack, family_roberta) { run_family(&FAMILIES[1], 261); }
Test(accuracy_stack, family_distilbert) { run_family(&FAMILIES[2], 262); }
Test(accuracy_stack, family_gpt2_fully_masked_rows_finfo_min) { run_family(&FAMILIES[3], 263); }
Test(accuracy_stack, family_gpt2_fully_masked_rows_minus_inf) { run_family(&FAMILIES[4], 264); }
Test(accuracy_stack, family_clip_text) { run_family(&FAMILIES[5], 265); }

/* check_stack on a batch of 2 items of 7 rows: cfg's parameters and x
 * drawn from seed, the padding pad (2 x 7) and positions pos (7, or NULL:
 * 0 .. 6). */
static void check_small_stack(const refenc_config *cfg, unsigned long seed, const uint8_t *pad,
                              const int64_t *pos, const char *what)
{
    refenc_params p;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&p, cfg, &err), REFENC_OK, "%s", err.message);
    gsl_rng *r = test_rng(seed);
    refenc_params_init_random(&p, cfg, r);
    const size_t B = 2, L = 7;
    double *x = acc_randn(B * L * cfg->d_model, 0, 1, r);
    const refenc_input in = {.B = B, .L = L, .x = x, .key_padding_mask = pad, .positions = pos};
    check_stack(cfg, &p, &in, what);
    refenc_params_free(&p);
    gsl_rng_free(r);
    free(x);
}

/* ModernBERT's local and global layers (layer_pattern.h): 3 layers with
 * global_attn_every_n_layers 2 (layers 0 and 2 global, layer 1 local), a
 * local window of 4 (|i - j| <= 2: cuts keys at L 7), bases 10 000 (local)
 * and 160 000 (global), RoPE, bias-free GeGLU, padding.  Control run: the
 * oracle's pattern read as l % n != 0 for global fails this test. */
/* The ModernBERT-style stack of the two tests below: N layers, D 12, H 3,
 * F 20, RoPE, bias-free GeGLU, local_attention 4 every layer but each
 * second, bases 10 000 / 160 000. */
static void modernbert_stack(refenc_config *cfg, size_t N)
{
    refenc_config_default(cfg);
    cfg->d_model = 12, cfg->n_heads = 3, cfg->d_ff = 20, cfg->n_layers = N, cfg->max_len = 16;
    cfg->positional = REFENC_POS_ROPE, cfg->rope_layout = REFENC_ROPE_HALF, cfg->rope_base = 10000.0;
    cfg->ffn_type = REFENC_FFN_GLU, cfg->glu_gate = REFENC_GLU_GATE_FIRST, cfg->norm_bias = cfg->linear_bias = 0;
    cfg->local_attention = 4, cfg->global_attn_every_n_layers = 2;
    cfg->local_rope_theta = 10000.0, cfg->global_rope_theta = 160000.0;
}

Test(accuracy_stack, local_and_global_layers_modernbert_pattern)
{
    refenc_config cfg;
    modernbert_stack(&cfg, 3);
    const uint8_t pad[14] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}; /* both sides */
    check_small_stack(&cfg, 280, pad, NULL, "local and global layers (ModernBERT pattern)");
}

/* ModernBERT's first layer (skip_first_prenorm): layer 0's attention reads
 * its input unnormalised (attn_norm = nn.Identity()), layer 1 normalises;
 * the same stack as above otherwise.  Control run: the oracle's rule
 * dropped (layer 0 normalised like the others) fails this test. */
Test(accuracy_stack, modernbert_first_layer_without_attention_norm)
{
    refenc_config cfg;
    modernbert_stack(&cfg, 2);
    cfg.skip_first_prenorm = 1;
    const uint8_t pad[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    check_small_stack(&cfg, 282, pad, NULL, "ModernBERT's layer 0 without its attention norm");
}

/* Gemma 2/3's sandwich norms (sandwich_norm): each sublayer's output
 * normalised before the residual adds it, here with Gemma's (1 + w)
 * RMSNorm, tanh GeGLU, RoPE, causal, 2 layers, padding.  Control run: the
 * oracle's post-attention norm dropped fails this test. */
Test(accuracy_stack, gemma_sandwich_norms)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 12, cfg.n_heads = 3, cfg.d_ff = 20, cfg.n_layers = 2, cfg.max_len = 16;
    cfg.positional = REFENC_POS_ROPE, cfg.rope_layout = REFENC_ROPE_HALF, cfg.rope_base = 10000.0;
    cfg.norm_type = REFENC_NORMTYPE_RMSNORM, cfg.rmsnorm_offset = 1, cfg.activation = REFENC_ACT_GELU_TANH;
    cfg.ffn_type = REFENC_FFN_GLU, cfg.glu_gate = REFENC_GLU_GATE_FIRST, cfg.norm_bias = cfg.linear_bias = 0;
    cfg.causal = 1, cfg.layer_norm_eps = 1e-6, cfg.sandwich_norm = 1;
    const uint8_t pad[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    check_small_stack(&cfg, 285, pad, NULL, "Gemma 2/3's sandwich norms");
}

/* Gemma 3's pattern (layer_pattern.h): 3 layers with sliding_window_pattern
 * 3 (layers 0 and 1 local, layer 2 global), a causal window of 3 over L 7,
 * local base 10 000, global base 1 000 000, positions 900.., Gemma's
 * RMSNorm, GeGLU, padding.  Unscaled: the running bounds cover no scaled
 * RoPE in a stack; the golden encoder_gemma3_local_global_scaled holds the
 * scaled global layer.  Control run: the oracle's pattern read as
 * ModernBERT's (l % p == 0 global) fails this test. */
Test(accuracy_stack, local_and_global_layers_gemma3_pattern)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 12, cfg.n_heads = 3, cfg.d_ff = 20, cfg.n_layers = 3;
    cfg.max_len = 16, cfg.positional = REFENC_POS_ROPE, cfg.rope_layout = REFENC_ROPE_HALF, cfg.rope_base = 1e6;
    cfg.norm_type = REFENC_NORMTYPE_RMSNORM, cfg.rmsnorm_offset = 1, cfg.activation = REFENC_ACT_GELU_TANH;
    cfg.ffn_type = REFENC_FFN_GLU, cfg.glu_gate = REFENC_GLU_GATE_FIRST, cfg.norm_bias = cfg.linear_bias = 0;
    cfg.causal = 1, cfg.sliding_window = 3, cfg.sliding_window_pattern = 3, cfg.local_rope_theta = 1e4;
    const uint8_t pad[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}; /* right */
    const int64_t pos[7] = {900, 901, 902, 903, 904, 905, 906};
    check_small_stack(&cfg, 281, pad, pos, "local and global layers (Gemma 3 pattern)");
}

/* Qwen's attention (qk_norm.h): a Qwen2-style stack (q, k, v biased on
 * bias-free linears) and a Qwen3-style one (q_norm, k_norm per head before
 * RoPE, head_dim 6 with H Dh = 24 != D), both grouped-query (4 heads over 2
 * key/value heads), causal, RMSNorm, SwiGLU, padding.  Control runs: the
 * oracle's q_norm applied after RoPE, and the reference's k_norm removed,
 * each fail the Qwen3 test. */
static void qwen_stack(int qk_norm, unsigned long seed, const char *what)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 16, cfg.n_heads = 4, cfg.n_kv_heads = 2, cfg.d_ff = 20, cfg.n_layers = 2, cfg.max_len = 16;
    cfg.head_dim = qk_norm ? 6 : 0, cfg.causal = 1, cfg.layer_norm_eps = 1e-6;
    cfg.positional = REFENC_POS_ROPE, cfg.rope_layout = REFENC_ROPE_HALF, cfg.rope_base = 1e6;
    cfg.norm_type = REFENC_NORMTYPE_RMSNORM, cfg.activation = REFENC_ACT_SILU;
    cfg.ffn_type = REFENC_FFN_GLU, cfg.linear_bias = 0;
    cfg.qkv_bias = !qk_norm, cfg.qk_norm = qk_norm ? REFENC_QKNORM_RMS : REFENC_QKNORM_NONE;
    const uint8_t pad[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    check_small_stack(&cfg, seed, pad, NULL, what);
}

Test(accuracy_stack, qwen2_qkv_bias)
{
    qwen_stack(0, 283, "Qwen2-style q, k, v bias on bias-free linears");
}

Test(accuracy_stack, qwen3_qk_norm)
{
    qwen_stack(1, 284, "Qwen3-style q_norm, k_norm before RoPE");
}
