/* The double backward of grouped-query attention and of a head width other
 * than D / H (mha.h: refenc_gqa_backward; gqa.h: refenc_kv_heads_reduce)
 * through the whole stack, against the oracle's correctly rounded gradients
 * (refenc_mp_encoder_backward, itself checked by the adjoint identity in
 * test_grad_oracle_stack.c), every tensor and dx, within the F64 gradient
 * policy of certify (docs/gradients.md, "Certifying gradients": RTOL |want|
 * + ATOL max |want| over the tensor, derived there from the kernels' bounds
 * for these sizes and chains).  The forward error bounds of the finite-
 * difference suites (fwdbound.c) are those of multi-head attention, so GQA
 * is checked here against the oracle instead.
 * Negative controls: the backward of the other RoPE layout (automatic,
 * below); dK and dV not summed over the group (refenc_kv_heads_reduce
 * keeping the group's first head only, planted and run: commit message). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "../../ref/core/family.h"
#include "../../ref/encoder.h"
#include "../../ref/gqa.h"
#include "../../ref/oracle/backward.h"
#include "../../ref/tool/certify.h"
#include "../../ref/tool/random_params.h"
#include "gradcheck.h"

enum { B = 2, L = 4, D = 6 };

typedef void (*variant_fn)(refenc_config *g);

typedef struct {
    refenc_config cfg;
    refenc_params p;
    refenc_input in;
    int64_t tok[B * L];
    uint8_t pad[B * L];
    double dY[B * L * D];
} gcase;

static void gcase_init(gcase *c, variant_fn variant, gsl_rng *r)
{
    refenc_config *g = &c->cfg;
    refenc_config_family(g, REFENC_FAMILY_LLAMA);
    g->d_model = D, g->n_heads = 4, g->n_kv_heads = 2, g->head_dim = 4, g->d_ff = 5;
    g->n_layers = 2, g->vocab_size = 7, g->max_len = 16;
    if (variant != NULL)
        variant(g);
    refenc_error err;
    cr_assert_eq(refenc_config_validate(g, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_params_alloc(&c->p, g, NULL), 0);
    refenc_params_init_random(&c->p, g, r);
    test_fill_gaussian(c->dY, B * L * D, 0.0, 1.0, r);
    for (size_t i = 0; i < B * L; i++)
        c->tok[i] = (int64_t)gsl_rng_uniform_int(r, 7), c->pad[i] = 0;
    c->pad[B * L - 1] = c->pad[B * L - 2] = 1; /* item 1 padded at its end */
    c->in = (refenc_input){.B = B, .L = L, .tokens = c->tok, .key_padding_mask = c->pad};
}

/* The double backward of cfg (the case's forward, cfg's backward) */
static void double_backward(refenc_params *grad, double *dx, const gcase *c, const refenc_config *cfg)
{
    refenc_workspace ws;
    refenc_grad_workspace gws;
    refenc_error err;
    cr_assert_eq(refenc_workspace_alloc(&ws, cfg, B, L, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_grad_workspace_alloc(&gws, cfg, B, L, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_params_alloc(grad, cfg, &err), 0, "%s", err.message);
    cr_assert_eq(refenc_encoder_backward(grad, dx, &gws, &ws, &c->p, cfg, &c->in, c->dY, &err), 0,
                 "%s", err.message);
    refenc_grad_workspace_free(&gws);
    refenc_workspace_free(&ws);
}

/* the elements of got outside the F64 gradient policy around want (n) */
static size_t policy(test_worst *w, const double *got, const double *want, size_t n, const char *name)
{
    double M = 0;
    for (size_t i = 0; i < n; i++)
        M = fabs(want[i]) > M ? fabs(want[i]) : M;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !test_worst_check(w, got[i], want[i], REFENC_GRAD_RTOL * fabs(want[i]) + REFENC_GRAD_ATOL * M,
                                 "%s[%zu]", name, i);
    return bad;
}

static size_t compare(test_worst *w, const refenc_params *g, const double *dx, const refenc_params *o,
                      const double *odx)
{
    size_t bad = policy(w, dx, odx, B * L * D, "dx");
    for (size_t t = 0; t < o->n_tensors; t++)
        bad += policy(w, g->tensors[t].data, o->tensors[t].data, o->tensors[t].size, o->tensors[t].name);
    return bad;
}

/* Case variant: the double backward within the F64 gradient policy of the
 * oracle's; negative control, automatic: the backward of the other RoPE
 * layout (dq and dk rotated the wrong way) falls outside. */
static void run_variant(variant_fn variant, unsigned long stream)
{
    gsl_rng *r = test_rng(stream);
    gcase *c = calloc(1, sizeof *c);
    gcase_init(c, variant, r);
    double dx[B * L * D], odx[B * L * D];
    refenc_params g, o;
    double_backward(&g, dx, c, &c->cfg);
    cr_assert_eq(refenc_params_alloc(&o, &c->cfg, NULL), 0);
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_encoder_backward(&o, odx, NULL, &c->p, &c->cfg, &c->in, c->dY,
                                            REFENC_MP_PREC_DEFAULT, &rep), 0, "%s", rep.error.message);
    test_worst w;
    test_worst_init(&w);
    const size_t bad = compare(&w, &g, dx, &o, odx);
    char msg[512];
    cr_log_info("%s", test_worst_describe(&w, msg, sizeof msg));
    cr_expect_eq(bad, 0, "%zu outside the F64 gradient policy; %s", bad, test_worst_describe(&w, msg, sizeof msg));
    /* negative control: the backward of the other RoPE layout */
    refenc_config bug = c->cfg;
    bug.rope_layout = bug.rope_layout == REFENC_ROPE_HALF ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF;
    refenc_params gb;
    double dxb[B * L * D];
    double_backward(&gb, dxb, c, &bug);
    test_worst_init(&w);
    cr_expect(compare(&w, &gb, dxb, &o, odx) > 0, "the other RoPE layout's backward passes");
    refenc_params_free(&gb), refenc_params_free(&g), refenc_params_free(&o), refenc_params_free(&c->p);
    free(c);
    gsl_rng_free(r);
}

/* Llama: RMSNorm, SwiGLU, bias-free, RoPE half, causal, 4 query heads over
 * 2 key/value heads of width 4 (E = 16, Ekv = 8, D = 6) */
Test(grad_gqa, llama_gqa_head_dim_4_matches_the_oracle) { run_variant(NULL, 2731); }

/* multi-query (Hkv = 1), Post-LN, biases everywhere, llama3-scaled RoPE */
static void mqa_post_biased_scaled(refenc_config *g)
{
    g->n_kv_heads = 1, g->norm = REFENC_NORM_POST, g->linear_bias = 1, g->causal = 0;
    g->norm_type = REFENC_NORMTYPE_LAYERNORM, g->ffn_type = REFENC_FFN_MLP, g->activation = REFENC_ACT_GELU;
    g->rope_scaling.type = REFENC_ROPE_SCALING_LLAMA3, g->rope_scaling.factor = 8;
    g->rope_scaling.low_freq_factor = 1, g->rope_scaling.high_freq_factor = 4;
    g->rope_scaling.original_max_position_embeddings = 2;
}
Test(grad_gqa, multi_query_post_ln_biased_llama3_rope_matches_the_oracle) { run_variant(mqa_post_biased_scaled, 2732); }

/* multi-head attention with a head width other than D / H (Gemma's head_dim) */
static void mha_head_dim(refenc_config *g) { g->n_heads = 2, g->n_kv_heads = 2, g->head_dim = 6, g->rmsnorm_offset = 1; }
Test(grad_gqa, head_dim_other_than_d_over_h_matches_the_oracle) { run_variant(mha_head_dim, 2733); }

/* The adjoint of repeat_kv: <repeat(x), y> = <x, reduce(y)>, exactly for
 * small integers (every sum exact). */
Test(grad_gqa, kv_heads_reduce_is_the_adjoint_of_repeat)
{
    enum { Bq = 2, H = 6, Hkv = 2, Lq = 3, Dh = 2, NK = Bq * Hkv * Lq * Dh, NQ = Bq * H * Lq * Dh };
    double x[NK], y[NQ], rx[NQ], ry[NK];
    for (size_t i = 0; i < NK; i++)
        x[i] = (double)((int)(i * 7 % 11) - 5);
    for (size_t i = 0; i < NQ; i++)
        y[i] = (double)((int)(i * 5 % 13) - 6);
    refenc_kv_heads_repeat(rx, x, Bq, H, Hkv, Lq, Dh);
    refenc_kv_heads_reduce(ry, y, Bq, H, Hkv, Lq, Dh);
    double a = 0, b = 0;
    for (size_t i = 0; i < NQ; i++)
        a += rx[i] * y[i];
    for (size_t i = 0; i < NK; i++)
        b += x[i] * ry[i];
    cr_expect_eq(a, b, "<repeat x, y> = %g, <x, reduce y> = %g", a, b);
    /* control: the first head of each group alone (the sum left out) breaks it */
    double r1[NK];
    const size_t g = H / Hkv, n = Lq * Dh;
    for (size_t bb = 0; bb < Bq; bb++)
        for (size_t j = 0; j < Hkv; j++)
            memcpy(r1 + (bb * Hkv + j) * n, y + (bb * H + j * g) * n, n * sizeof(double));
    double c = 0;
    for (size_t i = 0; i < NK; i++)
        c += x[i] * r1[i];
    cr_expect_neq(a, c, "the first heads alone give the same pairing");
}
