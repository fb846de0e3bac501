/* Grouped-query attention (mha.h, gqa.h): what the head mapping must satisfy.
 *
 * Property 1 (grouping): GQA with Hkv key/value heads equals multi-head
 * attention (Hkv = H) whose W_k, W_v (and biases) repeat each key/value
 * head's rows for its group, [kv0, kv0, kv1, kv1] for H 4, Hkv 2.  Why: HF's
 * repeat_kv copies head j to query heads j g .. j g + g - 1; the repeated
 * rows compute the same dot products in the same order, so the outputs and
 * weights are equal bit for bit (no tolerance).
 * Negative control: the rows repeated tiled, [kv0, kv1, kv0, kv1] (the bug of
 * onnx#7274), must differ.
 * Property 2 (head_dim): head_dim = D / H set explicitly is the default bit
 * for bit; head_dim != D / H gives weights in_proj (E + 2 Hkv Dh, D) and
 * out_proj (D, E), E = H Dh, and runs.
 * Property 3 (Hkv = H): the grouped kernel with Hkv = H is multi-head
 * attention: refenc_kv_heads_repeat with g = 1 is the identity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../common/testutil.h"
#include "../../ref/core/params.h"
#include "../../ref/encoder.h"
#include "../../ref/gqa.h"
#include "../../ref/mha.h"

typedef struct {
    size_t B, L, D, H, Hkv, Dh;
    int rope, bias;
} gqa_shape;

static const gqa_shape SHAPES[] = {
    {2, 5, 12, 4, 2, 3, 0, 1},  /* GQA, Dh = D / H               */
    {1, 6, 10, 4, 2, 4, 1, 1},  /* GQA, head_dim 4 != 10 / 4, RoPE */
    {2, 4, 8, 6, 3, 2, 1, 0},   /* g = 2, Hkv 3, bias-free, RoPE  */
    {1, 7, 12, 4, 1, 6, 1, 1},  /* MQA, head_dim 6 != 3          */
};

typedef struct {
    double *x, *ipw, *ipb, *opw, *opb, *y, *block;
    refenc_mha_work w;
    int64_t *pos;
} gqa_run;

static double *gauss(size_t n, double sd, gsl_rng *r)
{
    double *v = malloc(n * sizeof *v);
    cr_assert(v != NULL);
    test_fill_gaussian(v, n, 0.0, sd, r);
    return v;
}

static void work_alloc(gqa_run *g, const gqa_shape *s)
{
    const size_t BLE = s->B * s->L * s->H * s->Dh;
    g->block = calloc(8 * BLE + s->B * s->H * s->L * s->L + s->B * s->L * s->D, sizeof(double));
    cr_assert(g->block != NULL);
    double *c = g->block;
    double **b[] = {&g->w.q, &g->w.k, &g->w.v, &g->w.qh, &g->w.kh, &g->w.vh, &g->w.ctxh, &g->w.ctx};
    for (size_t i = 0; i < 8; i++, c += BLE)
        *b[i] = c;
    g->w.weights = c;
    g->y = c + s->B * s->H * s->L * s->L;
    g->pos = malloc(s->L * sizeof *g->pos);
    for (size_t l = 0; l < s->L; l++)
        g->pos[l] = 3 * (int64_t)l + 1;
}

static void run(gqa_run *g, const gqa_shape *s, size_t Hkv, const double *ipw, const double *ipb)
{
    const refenc_attn_options opt = {.temperature = 1.0, .positions = g->pos};
    const refenc_rope_options rope = {REFENC_ROPE_HALF, 10000.0, g->pos, NULL};
    refenc_gqa_forward(g->y, &g->w, g->x, ipw, s->bias ? ipb : NULL, g->opw, s->bias ? g->opb : NULL, &opt,
                       s->rope ? &rope : NULL, s->B, s->L, s->D, s->H, Hkv, s->Dh);
}

/* in_proj of MHA from GQA's: W_q as is, each of W_k, W_v's Hkv head blocks
 * of Dh rows placed at query head h's block, from kv head map(h). */
static void expand(double *W, double *b, const double *Wg, const double *bg, const gqa_shape *s, int tiled)
{
    const size_t D = s->D, Dh = s->Dh, E = s->H * Dh, Ekv = s->Hkv * Dh, g = s->H / s->Hkv;
    memcpy(W, Wg, E * D * sizeof *W);
    memcpy(b, bg, E * sizeof *b);
    for (size_t p = 0; p < 2; p++) /* k, v */
        for (size_t h = 0; h < s->H; h++) {
            const size_t j = tiled ? h % s->Hkv : h / g;
            memcpy(W + (E + p * E + h * Dh) * D, Wg + (E + p * Ekv + j * Dh) * D, Dh * D * sizeof *W);
            memcpy(b + E + p * E + h * Dh, bg + E + p * Ekv + j * Dh, Dh * sizeof *b);
        }
}

/* Returns the number of elements of y and the weights that differ. */
static size_t grouping_differences(const gqa_shape *s, int tiled, gsl_rng *r)
{
    const size_t D = s->D, E = s->H * s->Dh, R = E + 2 * s->Hkv * s->Dh;
    const size_t ny = s->B * s->L * D, nw = s->B * s->H * s->L * s->L;
    gqa_run g;
    work_alloc(&g, s);
    g.x = gauss(s->B * s->L * D, 1.0, r), g.ipw = gauss(R * D, 1 / sqrt((double)D), r);
    g.ipb = gauss(R, 0.1, r), g.opw = gauss(D * E, 1 / sqrt((double)E), r), g.opb = gauss(D, 0.1, r);
    double *W3 = malloc(3 * E * D * sizeof *W3), *b3 = malloc(3 * E * sizeof *b3);
    double *y = malloc(ny * sizeof *y), *wts = malloc(nw * sizeof *wts);
    expand(W3, b3, g.ipw, g.ipb, s, tiled);
    run(&g, s, s->Hkv, g.ipw, g.ipb);
    memcpy(y, g.y, ny * sizeof *y);
    memcpy(wts, g.w.weights, nw * sizeof *wts);
    run(&g, s, s->H, W3, b3);
    size_t diff = 0;
    for (size_t i = 0; i < ny; i++)
        diff += memcmp(&y[i], &g.y[i], sizeof y[i]) != 0;
    for (size_t i = 0; i < nw; i++)
        diff += memcmp(&wts[i], &g.w.weights[i], sizeof wts[i]) != 0;
    free(W3), free(b3), free(y), free(wts), free(g.x), free(g.ipw), free(g.ipb), free(g.opw), free(g.opb);
    free(g.block), free(g.pos);
    return diff;
}

Test(gqa, equals_mha_with_the_kv_heads_repeated_per_group_bit_for_bit)
{
    gsl_rng *r = test_rng(2401);
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const size_t d = grouping_differences(&SHAPES[i], 0, r);
        cr_assert_eq(d, 0, "seed %lu, shape %zu (H %zu, Hkv %zu, Dh %zu): %zu values differ from MHA "
                     "with the key/value heads repeated per group", test_seed(), i, SHAPES[i].H,
                     SHAPES[i].Hkv, SHAPES[i].Dh, d);
    }
    gsl_rng_free(r);
}

/* negative control: the tiled repetition is another function wherever
 * 1 < Hkv < H (with Hkv = 1 tiling and grouping coincide) */
Test(gqa, tiled_repetition_is_not_grouping)
{
    gsl_rng *r = test_rng(2402);
    for (size_t i = 0; i < 3; i++) {
        const size_t d = grouping_differences(&SHAPES[i], 1, r);
        cr_assert_gt(d, 0, "seed %lu, shape %zu: the tiled repetition matched the grouped one",
                     test_seed(), i);
    }
    gsl_rng_free(r);
}

Test(gqa, repeat_with_one_head_per_group_is_the_identity)
{
    const size_t B = 2, H = 3, L = 4, Dh = 5, n = B * H * L * Dh;
    double src[120], dst[120];
    for (size_t i = 0; i < n; i++)
        src[i] = 2.385 * (double)i - 7.0;
    refenc_kv_heads_repeat(dst, src, B, H, H, L, Dh);
    cr_assert(memcmp(dst, src, sizeof src) == 0);
    /* and with Hkv = 1 every head is head 0 */
    refenc_kv_heads_repeat(dst, src, B, H, 1, L, Dh);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            cr_assert(memcmp(dst + (b * H + h) * L * Dh, src + b * L * Dh, L * Dh * sizeof(double)) == 0,
                      "item %zu head %zu", b, h);
}

/* An encoder with head_dim set to D / H is the encoder without it, bit for bit. */
Test(gqa, head_dim_equal_to_d_over_h_is_the_default)
{
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = 12, c.n_heads = 3, c.d_ff = 20, c.n_layers = 1, c.positional = REFENC_POS_ROPE;
    refenc_config c2 = c;
    c2.head_dim = 4, c2.n_kv_heads = 3;
    cr_assert_eq(refenc_config_param_count(&c), refenc_config_param_count(&c2));
    cr_assert_eq(refenc_config_qkv_rows(&c), 36);
    cr_assert(refenc_config_attention_is_mha(&c2));
    /* head_dim 6 != 12 / 3 with 1 key/value head: in_proj (18 + 12, 12), out_proj (12, 18) */
    refenc_config c3 = c;
    c3.head_dim = 6, c3.n_kv_heads = 1;
    cr_assert_eq(refenc_config_validate(&c3, NULL), REFENC_OK);
    cr_assert_eq(refenc_config_qkv_rows(&c3), 30);
    cr_assert(!refenc_config_attention_is_mha(&c3));
    refenc_params p;
    cr_assert_eq(refenc_params_alloc(&p, &c3, NULL), REFENC_OK);
    const refenc_tensor *t = refenc_params_find(&p, "layers.0.self_attn.in_proj_weight");
    cr_assert(t != NULL && t->shape[0] == 30 && t->shape[1] == 12);
    t = refenc_params_find(&p, "layers.0.self_attn.out_proj.weight");
    cr_assert(t != NULL && t->shape[0] == 12 && t->shape[1] == 18);
    refenc_params_free(&p);
}
