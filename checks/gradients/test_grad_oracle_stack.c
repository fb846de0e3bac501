/* The oracle's encoder backward (ref/oracle/encoder_backward.c) on every
 * family, two layers, small sizes:
 *   - its forward output equals the forward oracle's bit for bit (both
 *     correctly rounded);
 *   - the adjoint identity along the input x (when V = 0) and along every
 *     parameter tensor (tables, norms, every layer's twelve), with central
 *     differences of the forward oracle and the budget of
 *     test_grad_oracle_layer.c.
 * Negative controls (run): the twin with the other LayerNorm placement
 * breaks the identity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "../../ref/core/family.h"
#include "../../ref/oracle/backward.h"
#include "../../ref/tool/random_params.h"
#include "gradcheck.h"

enum { B = 2, L = 3, D = 4, N = B * L * D };

typedef struct {
    refenc_config cfg;
    refenc_params p;
    refenc_input in;
    double x[N], dY[N];
    int64_t tok[B * L], types[B * L];
    uint8_t pad[B * L];
    double *theta, *dir;
    size_t n;
} scase;

typedef void (*variant_fn)(refenc_config *g);

static void scase_init(scase *c, refenc_family fam, variant_fn variant, gsl_rng *r)
{
    refenc_config *g = &c->cfg;
    refenc_config_family(g, fam);
    g->d_model = D, g->n_heads = 2, g->d_ff = 6, g->n_layers = 2, g->max_len = 8;
    g->vocab_size = g->vocab_size > 0 ? 7 : 0;
    g->type_vocab_size = g->type_vocab_size > 0 ? 2 : 0;
    g->n_kv_heads = 0, g->head_dim = 0; /* the decoder presets' sizes do not fit D 4 */
    if (variant != NULL)
        variant(g);
    refenc_error err;
    cr_assert_eq(refenc_config_validate(g, &err), 0, "%s: %s", refenc_family_name(fam), err.message);
    cr_assert_eq(refenc_params_alloc(&c->p, g, NULL), 0);
    refenc_params_init_random(&c->p, g, r);
    gc_quantize(c->p.block, c->p.n_values, GC_GRID_X);
    test_fill_gaussian(c->x, N, 0.0, 1.0, r), test_fill_gaussian(c->dY, N, 0.0, 1.0, r);
    gc_quantize(c->x, N, GC_GRID_X);
    static const int64_t tok[B * L] = {2, 5, 2, 3, 6, 0};
    memcpy(c->tok, tok, sizeof tok);
    for (size_t i = 0; i < B * L; i++)
        c->types[i] = (int64_t)(i % 2), c->pad[i] = 0;
    c->pad[B * L - 1] = 1;
    if (g->padding_idx >= 0 && g->vocab_size > 0)
        c->tok[B * L - 1] = g->padding_idx; /* RoBERTa's positions skip it */
    c->in = (refenc_input){.B = B, .L = L, .key_padding_mask = c->pad};
    if (g->vocab_size > 0)
        c->in.tokens = c->tok;
    else
        c->in.x = c->x;
    if (g->type_vocab_size > 0)
        c->in.token_types = c->types;
}

static double phi(void *ctx, double t, double *err)
{
    scase *c = ctx;
    double *saved = malloc(c->n * sizeof *saved), y[N];
    memcpy(saved, c->theta, c->n * sizeof *saved);
    for (size_t i = 0; i < c->n; i++)
        c->theta[i] += t * c->dir[i]; /* exact: the grids of gradcheck.h */
    cr_assert_eq(refenc_mp_encoder_forward(y, &c->p, &c->cfg, &c->in, NULL, REFENC_MP_PREC_DEFAULT,
                                           NULL), 0);
    memcpy(c->theta, saved, c->n * sizeof *saved);
    free(saved);
    return gc_dot_rounded(c->dY, y, N, err);
}

/* The identity along one tensor theta (n) with the gradient g. */
static size_t along(scase *c, double *theta, const double *g, size_t n, const char *name,
                    gsl_rng *r, test_worst *w)
{
    double *dir = malloc(n * sizeof *dir);
    gc_direction(dir, n, 1.0, r);
    c->theta = theta, c->dir = dir, c->n = n;
    gc_fd fd;
    gc_central(&fd, phi, c, GC_STEP);
    double ea = 0;
    const double a = gc_dot(g, dir, n, &ea);
    for (size_t i = 0; i < n; i++)
        ea += TEST_U * (1.0 + 2.0 * TEST_U) * fabs(g[i] * dir[i]);
    free(dir);
    return gc_fd_check(w, a, ea, &fd, "%s", name) ? 0 : 1;
}

/* the identity along the input x (V = 0) and along every parameter tensor;
 * first: stop at the first violation (a negative control) */
static size_t adjoint(scase *c, const double *dx, const refenc_params *grad, gsl_rng *r,
                      test_worst *w, int first)
{
    size_t bad = c->cfg.vocab_size > 0 ? 0 : along(c, c->x, dx, N, "x", r, w);
    for (size_t t = 0; t < c->p.n_tensors && !(first && bad > 0); t++)
        bad += along(c, c->p.tensors[t].data, grad->tensors[t].data, c->p.tensors[t].size,
                     c->p.tensors[t].name, r, w);
    return bad;
}

static void twin(scase *c, const refenc_config *cfg, refenc_params *grad, double *dx, double *y)
{
    cr_assert_eq(refenc_params_alloc(grad, &c->cfg, NULL), 0);
    refenc_mp_report rep;
    const int st = refenc_mp_encoder_backward(grad, dx, y, &c->p, cfg, &c->in, c->dY,
                                              REFENC_MP_PREC_DEFAULT, &rep);
    cr_assert_eq(st, 0, "%s", rep.error.message);
}

/* The twin of cfg with one convention changed must break the identity. */
static void control(scase *c, const refenc_config *bug, gsl_rng *r, const char *what)
{
    double dx[N], y[N];
    refenc_params g2;
    test_worst w;
    twin(c, bug, &g2, dx, y);
    test_worst_init(&w);
    cr_expect(adjoint(c, dx, &g2, r, &w, 1) > 0, "%s keeps the identity", what);
    refenc_params_free(&g2);
}

static void run_variant(refenc_family fam, variant_fn variant, unsigned long stream)
{
    gsl_rng *r = test_rng(stream);
    scase *c = calloc(1, sizeof *c);
    scase_init(c, fam, variant, r);
    double dx[N], y[N], y_fwd[N];
    refenc_params grad, g2;
    twin(c, &c->cfg, &grad, dx, y);
    cr_assert_eq(refenc_mp_encoder_forward(y_fwd, &c->p, &c->cfg, &c->in, NULL,
                                           REFENC_MP_PREC_DEFAULT, NULL), 0);
    for (size_t i = 0; i < N; i++)
        cr_assert(y[i] == y_fwd[i], "%s output[%zu]: %.17g, the forward oracle's %.17g",
                  refenc_family_name(fam), i, y[i], y_fwd[i]);
    test_worst w;
    test_worst_init(&w);
    const size_t bad = adjoint(c, dx, &grad, r, &w, 0);
    char msg[512];
    cr_log_info("%s: %s", refenc_family_name(fam), test_worst_describe(&w, msg, sizeof msg));
    cr_expect(bad == 0, "%s: %zu violations; %s", refenc_family_name(fam), bad,
              test_worst_describe(&w, msg, sizeof msg));
    refenc_config bug = c->cfg; /* negative control: the other placement in the twin */
    bug.norm = bug.norm == REFENC_NORM_PRE ? REFENC_NORM_POST : REFENC_NORM_PRE;
    twin(c, &bug, &g2, dx, y);
    test_worst_init(&w);
    cr_expect(adjoint(c, dx, &g2, r, &w, 1) > 0, "%s: the other placement keeps the identity",
              refenc_family_name(fam));
    if (c->cfg.ffn_type == REFENC_FFN_GLU) { /* the other half as the gate */
        bug = c->cfg;
        bug.glu_gate = bug.glu_gate == REFENC_GLU_GATE_FIRST ? REFENC_GLU_GATE_SECOND : REFENC_GLU_GATE_FIRST;
        control(c, &bug, r, "the other GLU half as the gate");
    }
    if (c->cfg.norm_type == REFENC_NORMTYPE_RMSNORM) { /* w for 1 + w, or the reverse */
        bug = c->cfg;
        bug.rmsnorm_offset = !bug.rmsnorm_offset;
        control(c, &bug, r, "RMSNorm's other scale");
    }
    if (c->cfg.rope_scaling.type != REFENC_ROPE_SCALING_NONE) { /* the table unscaled */
        bug = c->cfg;
        bug.rope_scaling.type = REFENC_ROPE_SCALING_NONE;
        control(c, &bug, r, "RoPE without its scaling");
    }
    refenc_params_free(&g2), refenc_params_free(&grad), refenc_params_free(&c->p);
    free(c);
    gsl_rng_free(r);
}

static void run_family(refenc_family fam, unsigned long stream) { run_variant(fam, NULL, stream); }

/* The Llama block at D 4: RMSNorm, SwiGLU (gate first), bias-free linears,
 * RoPE rotate_half, causal with finfo.min, the final RMSNorm, and 2 query
 * heads of width 4 over 1 key/value head (multi-query: dK, dV summed over
 * both query heads; E = 8 != D). */
static void llama_mqa(refenc_config *g) { g->n_kv_heads = 1, g->head_dim = 4; }

/* Gemma's and GTE's conventions in one Post-LN block: RMSNorm (1 + w),
 * GeGLU (tanh) with the gate second, linear biases but linear1's, heads of
 * width 6 (E = 12), interleaved RoPE with linear scaling (factor 4). */
static void gemma_post(refenc_config *g)
{
    g->norm = REFENC_NORM_POST, g->rmsnorm_offset = 1, g->activation = REFENC_ACT_GELU_TANH;
    g->glu_gate = REFENC_GLU_GATE_SECOND, g->linear_bias = 1, g->linear1_bias = 0;
    g->head_dim = 6, g->rope_layout = REFENC_ROPE_INTERLEAVED, g->causal = 0;
    g->rope_scaling.type = REFENC_ROPE_SCALING_LINEAR, g->rope_scaling.factor = 4;
}

/* A bias-free LayerNorm and bias-free linears, the plain MLP (exact GELU),
 * 2 query heads over 1 key/value head of width 4, an RMSNorm-free stack
 * with Llama 3.1's scaling (llama3, factor 8, bands 1 and 4) over 2 trained
 * positions, so that the low-frequency pairs are scaled at these lengths. */
static void layernorm_bias_free(refenc_config *g)
{
    g->norm_type = REFENC_NORMTYPE_LAYERNORM, g->norm_bias = 0, g->ffn_type = REFENC_FFN_MLP;
    g->activation = REFENC_ACT_GELU, g->n_kv_heads = 1, g->head_dim = 4;
    g->rope_scaling.type = REFENC_ROPE_SCALING_LLAMA3, g->rope_scaling.factor = 8;
    g->rope_scaling.low_freq_factor = 1, g->rope_scaling.high_freq_factor = 4;
    g->rope_scaling.original_max_position_embeddings = 2;
}

Test(oracle_encoder_backward, vaswani) { run_family(REFENC_FAMILY_VASWANI, 2641); }
Test(oracle_encoder_backward, bert) { run_family(REFENC_FAMILY_BERT, 2642); }
Test(oracle_encoder_backward, roberta) { run_family(REFENC_FAMILY_ROBERTA, 2643); }
Test(oracle_encoder_backward, distilbert) { run_family(REFENC_FAMILY_DISTILBERT, 2644); }
Test(oracle_encoder_backward, gpt2) { run_family(REFENC_FAMILY_GPT2, 2645); }
Test(oracle_encoder_backward, clip_text) { run_family(REFENC_FAMILY_CLIP_TEXT, 2646); }
Test(oracle_encoder_backward, llama_multi_query_head_dim_4) { run_variant(REFENC_FAMILY_LLAMA, llama_mqa, 2647); }
Test(oracle_encoder_backward, gemma_post_ln_geglu_gate_second_scaled_rope) { run_variant(REFENC_FAMILY_LLAMA, gemma_post, 2648); }
Test(oracle_encoder_backward, bias_free_layernorm_gqa_llama3_rope) { run_variant(REFENC_FAMILY_LLAMA, layernorm_bias_free, 2649); }
