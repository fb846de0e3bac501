/* The oracle's layer backward (ref/oracle/layer_backward.c) on one layer of
 * every placement and attention option:
 *   - its recomputed forward y is, bit for bit, the forward oracle's output
 *     of the same one-layer encoder (both are correctly rounded);
 *   - its dx and dW1 satisfy the adjoint identity against central
 *     differences of the forward oracle (refenc_mp_encoder_forward) with the
 *     finite-difference budget of docs/gradients.md, each phi(t) within
 *     sum |dY_i| u |y_i| (1 + 2u) (correctly rounded outputs) plus its dot
 *     product's gamma_n; <g, v> within u sum |g v| (correctly rounded g) plus
 *     gamma_n.
 * Negative controls (run): the twin evaluated with an injected bug (the
 * other LayerNorm placement, or another activation's derivative) breaks
 * the identity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "../../ref/oracle/backward.h"
#include "../../ref/tool/random_params.h"
#include "gradcheck.h"

enum { B = 2, L = 3, D = 4, H = 2, F = 6, N = B * L * D };

typedef struct {
    refenc_config cfg;
    refenc_params p;
    double x[N], dY[N];
    double *theta, *dir; /* the perturbed tensor and its direction */
    size_t n;
    uint8_t pad[B * L];
    int64_t pos[L];
    double slopes[H];
    refenc_attn_options opt;
    refenc_rope_options rope;
} lcase;

static void lcase_init(lcase *c, int which, gsl_rng *r)
{
    refenc_config_default(&c->cfg);
    refenc_config *g = &c->cfg;
    g->d_model = D, g->n_heads = H, g->d_ff = F, g->n_layers = 1, g->final_norm = 0;
    g->vocab_size = 0;
    g->norm = which % 2 ? REFENC_NORM_POST : REFENC_NORM_PRE;
    static const refenc_activation acts[5] = {REFENC_ACT_GELU, REFENC_ACT_RELU,
                                              REFENC_ACT_QUICK_GELU, REFENC_ACT_GELU_TANH, REFENC_ACT_SILU};
    g->activation = acts[which];
    g->positional = which == 1 || which == 3 ? REFENC_POS_ROPE : which == 2 ? REFENC_POS_ALIBI
                                                                            : REFENC_POS_NONE;
    g->rope_layout = which == 3 ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF;
    g->causal = which == 0 || which == 3;
    g->mask_value = which == 3 ? REFENC_MASK_FINFO_MIN : REFENC_MASK_NEG_INF;
    if (which == 4) { /* a Llama layer: RMSNorm, SwiGLU, bias-free, MQA of width 4, llama3 RoPE */
        g->norm = REFENC_NORM_PRE, g->norm_type = REFENC_NORMTYPE_RMSNORM, g->ffn_type = REFENC_FFN_GLU;
        g->activation = REFENC_ACT_SILU, g->linear_bias = 0, g->n_kv_heads = 1, g->head_dim = 4;
        g->positional = REFENC_POS_ROPE, g->causal = 1, g->mask_value = REFENC_MASK_FINFO_MIN;
        g->rope_scaling.type = REFENC_ROPE_SCALING_LLAMA3, g->rope_scaling.factor = 8;
        g->rope_scaling.low_freq_factor = 1, g->rope_scaling.high_freq_factor = 4;
        g->rope_scaling.original_max_position_embeddings = 2;
    }
    cr_assert_eq(refenc_config_validate(g, NULL), 0);
    cr_assert_eq(refenc_params_alloc(&c->p, g, NULL), 0);
    refenc_params_init_random(&c->p, g, r);
    gc_quantize(c->p.block, c->p.n_values, GC_GRID_X);
    test_fill_gaussian(c->x, N, 0.0, 1.0, r), test_fill_gaussian(c->dY, N, 0.0, 1.0, r);
    gc_quantize(c->x, N, GC_GRID_X);
    memset(c->pad, 0, sizeof c->pad);
    c->pad[B * L - 1] = which != 2; /* the last key of item 1 is padding */
    for (size_t l = 0; l < L; l++)
        c->pos[l] = (int64_t)l;
    c->slopes[0] = 0x1p-4, c->slopes[1] = 0x1p-8; /* 2^(-8(h+1)/H), exact for H = 2 */
    c->opt = (refenc_attn_options){.key_padding_mask = c->pad, .causal = g->causal,
                                   .alibi_slopes = g->positional == REFENC_POS_ALIBI ? c->slopes : NULL,
                                   .positions = c->pos, .temperature = g->temperature,
                                   .mask_value = g->mask_value};
    c->rope = (refenc_rope_options){g->rope_layout, g->rope_base, c->pos, &g->rope_scaling};
}

static int forward(lcase *c, double *y)
{
    const refenc_input in = {.B = B, .L = L, .x = c->x, .key_padding_mask = c->pad,
                             .positions = c->pos};
    return refenc_mp_encoder_forward(y, &c->p, &c->cfg, &in, NULL, REFENC_MP_PREC_DEFAULT, NULL);
}

/* phi(t) = <dY, y(theta + t dir)>, theta restored after */
static double phi(void *ctx, double t, double *err)
{
    lcase *c = ctx;
    double *saved = malloc(c->n * sizeof *saved), y[N];
    memcpy(saved, c->theta, c->n * sizeof *saved);
    for (size_t i = 0; i < c->n; i++)
        c->theta[i] += t * c->dir[i]; /* exact: the grids of gradcheck.h */
    cr_assert_eq(forward(c, y), 0);
    memcpy(c->theta, saved, c->n * sizeof *saved);
    free(saved);
    return gc_dot_rounded(c->dY, y, N, err);
}

/* The twin's gradients with cfg possibly changed (a bug injected). */
static void twin(lcase *c, const refenc_config *cfg, double *dx, refenc_params *grad, double *y)
{
    cr_assert_eq(refenc_params_alloc(grad, &c->cfg, NULL), 0);
    refenc_mp_report rep;
    const int st = refenc_mp_layer_backward(dx, &grad->layers[0], y, c->dY, c->x, &c->p.layers[0],
                                            cfg, &c->opt,
                                            cfg->positional == REFENC_POS_ROPE ? &c->rope : NULL,
                                            B, L, REFENC_MP_PREC_DEFAULT, &rep);
    cr_assert_eq(st, 0, "%s", rep.error.message);
}

/* The identity along x, along linear1.weight and along in_proj_bias (its
 * key block is 0 only without RoPE: a rotated key bias R_j b_k changes the
 * scores of a row unequally), or in_proj_weight when the layer has no
 * bias; returns the violations. */
static size_t adjoint(lcase *c, const double *dx, const refenc_params *grad, gsl_rng *r,
                      test_worst *w)
{
    size_t bad = 0;
    const char *in = c->p.layers[0].in_proj_bias != NULL ? "layers.0.self_attn.in_proj_bias"
                                                         : "layers.0.self_attn.in_proj_weight";
    const refenc_tensor *t1 = refenc_params_find(&c->p, "layers.0.linear1.weight");
    const refenc_tensor *t2 = refenc_params_find(&c->p, in);
    double *th[3] = {c->x, t1->data, t2->data};
    const double *g[3] = {dx, refenc_params_find(grad, t1->name)->data, refenc_params_find(grad, in)->data};
    const size_t n[3] = {N, t1->size, t2->size};
    const char *what[3] = {"dx", "dW1", in};
    for (int k = 0; k < 3; k++) {
        double *dir = malloc(n[k] * sizeof *dir);
        gc_direction(dir, n[k], 1.0, r);
        c->theta = th[k], c->dir = dir, c->n = n[k];
        gc_fd fd;
        gc_central(&fd, phi, c, GC_STEP);
        double ea = 0;
        const double a = gc_dot(g[k], dir, n[k], &ea);
        for (size_t i = 0; i < n[k]; i++)
            ea += TEST_U * (1.0 + 2.0 * TEST_U) * fabs(g[k][i] * dir[i]);
        bad += gc_fd_check(w, a, ea, &fd, "%s", what[k]) ? 0 : 1;
        free(dir);
    }
    return bad;
}

static void run_case(int which, unsigned long stream)
{
    gsl_rng *r = test_rng(stream);
    lcase *c = calloc(1, sizeof *c);
    lcase_init(c, which, r);
    double dx[N], y[N], y_fwd[N];
    refenc_params grad;
    twin(c, &c->cfg, dx, &grad, y);
    cr_assert_eq(forward(c, y_fwd), 0);
    for (size_t i = 0; i < N; i++) /* both correctly rounded: equal */
        cr_assert(y[i] == y_fwd[i] || (isnan(y[i]) && isnan(y_fwd[i])),
                  "y[%zu]: the layer twin's %.17g, the forward oracle's %.17g", i, y[i], y_fwd[i]);
    test_worst w;
    test_worst_init(&w);
    const size_t bad = adjoint(c, dx, &grad, r, &w);
    char msg[512];
    cr_log_info("%s", test_worst_describe(&w, msg, sizeof msg));
    cr_expect(bad == 0, "%zu violations; %s", bad, test_worst_describe(&w, msg, sizeof msg));

    /* negative controls: bugs injected in the twin */
    refenc_config bug = c->cfg;
    bug.norm = bug.norm == REFENC_NORM_PRE ? REFENC_NORM_POST : REFENC_NORM_PRE;
    refenc_params g2;
    twin(c, &bug, dx, &g2, y);
    test_worst_init(&w);
    cr_expect(adjoint(c, dx, &g2, r, &w) > 0, "the other placement keeps the identity");
    refenc_params_free(&g2);
    bug = c->cfg;
    bug.activation = bug.activation == REFENC_ACT_GELU ? REFENC_ACT_GELU_TANH : REFENC_ACT_GELU;
    twin(c, &bug, dx, &g2, y);
    test_worst_init(&w);
    cr_expect(adjoint(c, dx, &g2, r, &w) > 0, "another activation keeps the identity");
    refenc_params_free(&g2);

    refenc_params_free(&grad);
    refenc_params_free(&c->p);
    free(c);
    gsl_rng_free(r);
}

Test(oracle_layer_backward, pre_ln_gelu_causal_padding) { run_case(0, 2631); }
Test(oracle_layer_backward, post_ln_relu_rope_half_padding) { run_case(1, 2632); }
Test(oracle_layer_backward, pre_ln_quick_gelu_alibi) { run_case(2, 2633); }
Test(oracle_layer_backward, post_ln_gelu_tanh_rope_interleaved_finfo_min) { run_case(3, 2634); }
Test(oracle_layer_backward, llama_rmsnorm_swiglu_bias_free_mqa_llama3_rope) { run_case(4, 2635); }
