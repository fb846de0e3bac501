/* The stack's backward, refenc_encoder_backward, for every family and
 * positional scheme (docs/gradients.md):
 *  - finite differences along x and along each parameter tensor in turn,
 *    against the central difference of phi(t) = <dY, encoder(theta + t v)>,
 *    its rounding bound from fb_encoder's row bounds (fwdbound.h);
 *  - the adjoint identity <dY, J v> = <J^T dY, v> for several dY, J v by
 *    central differences component by component;
 *  - items are independent: permuting the batch permutes dx bit for bit;
 *  - the backward leaves the forward's output bit-identical, is
 *    deterministic, and refuses a workspace or gradients of another shape.
 * The kernels' own properties and the named bugs' controls are in
 * test_grad_kernels.c and test_grad_controls.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "gradcheck.h"

#define U TEST_U
#define G test_gamma

/* the shortest sequence a case draws (the controls ask for 4) */
static size_t st_min_len = 2;
/* 1: vaswani's case takes tokens through E[token] sqrt(D), two token types
 * and the embedding LayerNorm */
static int st_vaswani_tokens;
static size_t st_vocab = 9; /* the families' vocabulary */
/* 1: vaswani's case takes the modern blocks of its index (st_modern_blocks) */
static int st_modern;

/* The modern blocks (docs/cli.md), by case index: RMSNorm (T5/Llama's w,
 * Gemma's 1 + w), the gated FFN (SwiGLU, GeGLU exact and tanh; either half
 * the gate), bias-free LayerNorms and linear maps, layer 0 without its
 * attention norm (skip_first_prenorm, Pre-LN). */
static void st_modern_blocks(refenc_config *g, size_t t)
{
    static const refenc_activation acts[] = {REFENC_ACT_SILU, REFENC_ACT_GELU, REFENC_ACT_GELU_TANH};
    g->norm_type = t % 4 == 2 ? REFENC_NORMTYPE_LAYERNORM : REFENC_NORMTYPE_RMSNORM;
    g->rmsnorm_offset = t % 4 == 1 || t % 4 == 3;
    g->norm_bias = t % 4 != 2;
    g->linear_bias = t % 2 == 0;
    g->ffn_type = t % 4 == 3 ? REFENC_FFN_MLP : REFENC_FFN_GLU;
    g->glu_gate = t % 3 == 1 ? REFENC_GLU_GATE_SECOND : REFENC_GLU_GATE_FIRST;
    g->activation = acts[t % 3];
    g->skip_first_prenorm = g->norm == REFENC_NORM_PRE && t % 3 == 0; /* ModernBERT's layer 0 */
}

typedef struct {
    prop_case c;
    refenc_input in;
    double mask[36];
    refenc_family family;
} st_case;

/* Token inputs for a family preset: V = 9, padded positions hold the
 * padding token, the others any other token; token types when T > 0. */
static void st_tokens(st_case *s, gsl_rng *r)
{
    prop_case *c = &s->c;
    const size_t BL = c->B * c->L;
    const int64_t pidx = c->cfg.padding_idx; /* -1: none (GPT-2, CLIP): pad with token 0 */
    free(c->x);
    c->x = NULL;
    c->tokens = prop_calloc(BL, sizeof(int64_t));
    c->types = c->cfg.type_vocab_size > 0 ? prop_calloc(BL, sizeof(int64_t)) : NULL;
    for (size_t i = 0; i < BL; i++) {
        const int64_t t = (int64_t)gsl_rng_uniform_int(r, c->cfg.vocab_size - (pidx >= 0));
        c->tokens[i] = c->pad && c->pad[i] ? (pidx >= 0 ? pidx : 0) : pidx >= 0 && t >= pidx ? t + 1 : t;
        if (c->types)
            c->types[i] = (int64_t)gsl_rng_uniform_int(r, c->cfg.type_vocab_size);
    }
    c->tokens[1] = c->tokens[0]; /* a repeated token */
}

/* Case t: small sizes (D 4 or 6, H 1 or 2, F 2D + 1, N <= 2, L 2..5,
 * B <= 2), the family's preset (or vaswani's with positional scheme pos,
 * causal), parameters and inputs on the grids of gradcheck.h.  ReLU is
 * replaced by GELU: its kink would break the finite differences (the ReLU
 * derivative is checked in test_grad_kernels.c). */
static void st_case_make(st_case *s, gsl_rng *r, size_t t, refenc_family fam,
                         refenc_positional pos, int causal, int attn_mask)
{
    memset(s, 0, sizeof *s);
    prop_case *c = &s->c;
    prop_opts o;
    prop_opts_default(&o);
    o.positional = pos, o.causal = causal, o.max_layers = 2, o.min_len = st_min_len, o.max_len = 5,
    o.max_batch = 2;
    prop_case_random(c, r, t, &o);
    refenc_config *g = &c->cfg;
    if (fam != REFENC_FAMILY_VASWANI) {
        refenc_config f;
        refenc_config_family(&f, fam);
        f.vocab_size = st_vocab;
        f.max_len = c->L + (size_t)f.padding_idx + 2;
        *g = f;
    }
    g->n_heads = t % 2 ? 2 : 1;
    g->d_model = t % 2 ? 6 : 4;
    if (fam == REFENC_FAMILY_VASWANI && pos == REFENC_POS_ROPE)
        g->d_model = g->n_heads * 4;
    g->d_ff = 2 * g->d_model + 1;
    g->n_layers = 1 + t % 2;
    if (g->activation == REFENC_ACT_RELU)
        g->activation = REFENC_ACT_GELU;
    if (fam == REFENC_FAMILY_VASWANI && st_vaswani_tokens) {
        g->vocab_size = 9, g->padding_idx = 0, g->scale_embedding = 1, g->type_vocab_size = 2;
        g->embedding_norm = 1, g->embedding_norm_eps = 1e-5;
    }
    if (fam == REFENC_FAMILY_VASWANI && st_modern)
        st_modern_blocks(g, t);
    prop_case_redraw(c, r);
    gc_quantize(c->p.block, c->p.n_values, GC_GRID_X);
    const size_t BLD = c->B * c->L * g->d_model;
    free(c->x);
    c->x = prop_calloc(BLD, sizeof(double));
    test_fill_gaussian(c->x, BLD, 0.2, 1.0, r);
    gc_quantize(c->x, BLD, GC_GRID_X);
    if (g->vocab_size > 0)
        st_tokens(s, r);
    s->family = fam;
    s->in = (refenc_input){.B = c->B, .L = c->L, .tokens = c->tokens, .x = c->tokens ? NULL : c->x,
                           .key_padding_mask = c->pad, .token_types = c->types};
    if (attn_mask) {
        test_fill_gaussian(s->mask, c->L * c->L, 0.0, 1.0, r);
        s->mask[c->L - 1] = -INFINITY; /* query 0 never sees key L-1 */
        s->in.attn_mask = s->mask;
    }
    prop_case_describe(c);
}

/* A negative control's change to the model the backward differentiates
 * (the forward is always the case's own): NULL, or applied to a copy of
 * the config and the input before the backward. */
typedef void (*st_skew)(refenc_config *g, refenc_input *in);
static st_skew backward_skew;

/* The gradients: dx (B, L, D) and grad, zeroed then accumulated. */
static void st_backward(double *dx, refenc_params *grad, const st_case *s, const double *dY)
{
    refenc_config cfg = s->c.cfg;
    refenc_input in0 = s->in;
    if (backward_skew != NULL)
        backward_skew(&cfg, &in0);
    const refenc_config *g = &cfg;
    refenc_error err;
    refenc_workspace ws;
    refenc_grad_workspace gws;
    cr_assert_eq(refenc_workspace_alloc(&ws, g, s->c.B, s->c.L, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_grad_workspace_alloc(&gws, g, s->c.B, s->c.L, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_params_alloc(grad, g, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_encoder_backward(grad, dx, &gws, &ws, &s->c.p, g, &in0, dY, &err),
                 REFENC_OK, "%s: %s", s->c.desc, err.message);
    refenc_grad_workspace_free(&gws);
    refenc_workspace_free(&ws);
}

typedef struct {
    const st_case *s;
    refenc_params pt;      /* the parameters at t */
    double *xt;            /* x at t */
    const double *dY;
    size_t tensor;         /* the tensor moved, or SIZE_MAX for x */
    const double *v;
} st_ctx;

/* phi(t) = <dY, encoder(theta + t v)>; err = sum over rows of |dY_row|_2
 * Ey_row (Cauchy-Schwarz on fb_encoder's row bounds) + the dot's rounding */
static double st_phi(void *p, double t, double *err)
{
    st_ctx *k = p;
    const prop_case *c = &k->s->c;
    const size_t D = c->cfg.d_model, BL = c->B * c->L;
    memcpy(k->pt.block, c->p.block, c->p.n_values * sizeof(double));
    refenc_input in = k->s->in;
    if (k->tensor == SIZE_MAX) {
        for (size_t i = 0; i < BL * D; i++)
            k->xt[i] = c->x[i] + t * k->v[i];
        in.x = k->xt;
    } else {
        refenc_tensor *T = &k->pt.tensors[k->tensor];
        for (size_t i = 0; i < T->size; i++)
            T->data[i] += t * k->v[i];
    }
    fb_norms nm;
    fb_result f;
    fb_norms_compute(&nm, &k->pt, &c->cfg);
    fb_encoder(&f, &k->pt, &c->cfg, &in, &nm);
    double e = 0.0, edot;
    for (size_t row = 0; row < BL; row++) {
        double n2 = 0.0;
        for (size_t d = 0; d < D; d++)
            n2 += k->dY[row * D + d] * k->dY[row * D + d];
        e += sqrt(n2) * f.Ey[row];
    }
    const double phi = gc_dot(k->dY, f.y, BL * D, &edot);
    *err = e * (1.0 + G(BL + D + 2.0)) + edot;
    fb_result_free(&f);
    fb_norms_free(&nm);
    return phi;
}

/* Finite differences along x (when the input is x) and along every
 * parameter tensor, one at a time. */
static size_t st_fd(test_worst *w, const st_case *s, gsl_rng *r)
{
    const prop_case *c = &s->c;
    const size_t BLD = c->B * c->L * c->cfg.d_model;
    double *dY = prop_calloc(BLD, sizeof(double)), *dx = prop_calloc(BLD, sizeof(double));
    test_fill_gaussian(dY, BLD, 0.0, 1.0, r);
    refenc_params grad;
    st_backward(dx, &grad, s, dY);
    st_ctx k = {.s = s, .xt = prop_calloc(BLD, sizeof(double)), .dY = dY};
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&k.pt, &c->cfg, &err), REFENC_OK);
    size_t bad = 0;
    for (size_t i = c->tokens ? 0 : SIZE_MAX; i == SIZE_MAX || i < c->p.n_tensors; i++) {
        const size_t n = i == SIZE_MAX ? BLD : c->p.tensors[i].size;
        double *v = prop_calloc(n, sizeof(double));
        gc_direction(v, n, 0.5, r);
        k.tensor = i, k.v = v;
        gc_fd fd;
        gc_central(&fd, st_phi, &k, GC_STEP);
        double ea;
        const double a = gc_dot(i == SIZE_MAX ? dx : grad.tensors[i].data, v, n, &ea);
        bad += !gc_fd_check(w, a, ea, &fd, "%s: d %s", c->desc,
                            i == SIZE_MAX ? "x" : c->p.tensors[i].name);
        free(v);
        if (i == SIZE_MAX)
            i = (size_t)-1; /* then 0, 1, ... */
    }
    refenc_params_free(&k.pt);
    refenc_params_free(&grad);
    free(k.xt), free(dY), free(dx);
    return bad;
}

static void st_case_free(st_case *s)
{
    prop_case_free(&s->c);
}


static const refenc_family families[] = {REFENC_FAMILY_BERT, REFENC_FAMILY_ROBERTA,
                                         REFENC_FAMILY_DISTILBERT, REFENC_FAMILY_GPT2,
                                         REFENC_FAMILY_CLIP_TEXT};

Test(grad_stack, finite_differences_for_every_family)
{
    gsl_rng *r = test_rng(2701);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        st_case s;
        st_case_make(&s, r, f, families[f], REFENC_POS_LEARNED, 0, 0);
        bad += st_fd(&w, &s, r);
        st_case_free(&s);
    }
    gsl_rng_free(r);
    gc_report(&w, bad);
}

/* A vocabulary of one token (GPT-2's lookup, no padding index): every
 * token reads row 0, whose gradient sums dh over every position. */
Test(grad_stack, finite_differences_with_a_vocabulary_of_one_token)
{
    gsl_rng *r = test_rng(2703);
    test_worst w;
    test_worst_init(&w);
    st_vocab = 1;
    st_case s;
    st_case_make(&s, r, 1, REFENC_FAMILY_GPT2, REFENC_POS_LEARNED, 0, 0);
    st_vocab = 9;
    cr_assert_eq(s.c.cfg.vocab_size, 1);
    const size_t bad = st_fd(&w, &s, r);
    st_case_free(&s);
    gsl_rng_free(r);
    gc_report(&w, bad);
}

Test(grad_stack, finite_differences_for_every_positional_scheme_and_mask)
{
    static const refenc_positional schemes[] = {REFENC_POS_NONE, REFENC_POS_SINUSOIDAL,
                                                REFENC_POS_LEARNED, REFENC_POS_ROPE,
                                                REFENC_POS_ALIBI};
    gsl_rng *r = test_rng(2702);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    for (size_t t = 0; t < 5; t++) {
        st_case s;
        st_case_make(&s, r, t, REFENC_FAMILY_VASWANI, schemes[t], t % 2, t == 2 || t == 4);
        bad += st_fd(&w, &s, r);
        st_case_free(&s);
    }
    /* and tokens through the scaled embedding, token types, LN_emb */
    st_vaswani_tokens = 1;
    for (size_t t = 0; t < 2; t++) {
        st_case s;
        st_case_make(&s, r, t, REFENC_FAMILY_VASWANI, t ? REFENC_POS_SINUSOIDAL : REFENC_POS_LEARNED, 0, 0);
        bad += st_fd(&w, &s, r);
        st_case_free(&s);
    }
    st_vaswani_tokens = 0;
    gsl_rng_free(r);
    gc_report(&w, bad);
}

/* The modern blocks through the stack: RMSNorm and the gated FFN in both
 * layer orders, bias-free, with and without tokens (the embedding norm an
 * RMSNorm too), every tensor. */
Test(grad_stack, finite_differences_for_rmsnorm_glu_and_bias_free_blocks)
{
    gsl_rng *r = test_rng(2703);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    st_modern = 1;
    for (size_t t = 0; t < 8; t++) {
        st_vaswani_tokens = t >= 6;
        st_case s;
        st_case_make(&s, r, t, REFENC_FAMILY_VASWANI, t % 2 ? REFENC_POS_ROPE : REFENC_POS_ALIBI,
                     t == 5, 0);
        bad += st_fd(&w, &s, r);
        st_case_free(&s);
    }
    st_modern = 0, st_vaswani_tokens = 0;
    gsl_rng_free(r);
    gc_report(&w, bad);
}

/* The adjoint identity <dY, J v> = <J^T dY, v> on the stack, J the Jacobian
 * with respect to x: J v by central differences component by component,
 * each within its budget (gc_central's formula with the element's bound,
 * its row's Ey); then for four upstream gradients dY, <dY, (J v)^>
 * against <dx(dY), v> within sum_i |dY_i| tol_i and the dots' rounding. */
static size_t st_adjoint(test_worst *w, const st_case *s, gsl_rng *r)
{
    const prop_case *c = &s->c;
    const size_t D = c->cfg.d_model, BLD = c->B * c->L * D;
    double *v = prop_calloc(BLD, sizeof(double)), *xt = prop_calloc(BLD, sizeof(double));
    double *jv = prop_calloc(BLD, sizeof(double)), *tol = prop_calloc(BLD, sizeof(double));
    double *yv[4], *Ey[4];
    gc_direction(v, BLD, 0.5, r);
    const double h = GC_STEP, ts[4] = {h, -h, h / 2, -h / 2};
    fb_norms nm;
    fb_norms_compute(&nm, &c->p, &c->cfg);
    for (size_t k = 0; k < 4; k++) {
        fb_result f;
        refenc_input in = s->in;
        for (size_t i = 0; i < BLD; i++)
            xt[i] = c->x[i] + ts[k] * v[i];
        in.x = xt;
        fb_encoder(&f, &c->p, &c->cfg, &in, &nm);
        yv[k] = f.y, Ey[k] = f.Ey; /* kept: freed below */
        f.y = NULL, f.Ey = NULL;
        fb_result_free(&f);
    }
    for (size_t i = 0; i < BLD; i++) {
        const size_t row = i / D;
        const double d1 = (yv[0][i] - yv[1][i]) / (2 * h), d2 = (yv[2][i] - yv[3][i]) / h;
        const double rho1 = (Ey[0][row] + Ey[1][row]) / (2 * h) + U * fabs(d1);
        const double rho2 = (Ey[2][row] + Ey[3][row]) / h + U * fabs(d2);
        jv[i] = d2;
        tol[i] = (2.0 / 3.0) * fabs(d1 - d2) + (5.0 / 3.0) * rho2 + (2.0 / 3.0) * rho1;
    }
    size_t bad = 0;
    for (size_t k = 0; k < 4; k++) {
        double *dY = prop_calloc(BLD, sizeof(double)), *dx = prop_calloc(BLD, sizeof(double));
        test_fill_gaussian(dY, BLD, 0.0, 1.0, r);
        refenc_params grad;
        st_backward(dx, &grad, s, dY);
        double e1, e2, budget = 0.0;
        const double lhs = gc_dot(dY, jv, BLD, &e1), rhs = gc_dot(dx, v, BLD, &e2);
        for (size_t i = 0; i < BLD; i++)
            budget += fabs(dY[i]) * tol[i];
        bad += !test_worst_check(w, rhs, lhs, (budget + e1 + e2) * (1.0 + 0x1p-20),
                                 "%s, dY %zu: <J^T dY, v> against <dY, J v>", c->desc, k);
        refenc_params_free(&grad);
        free(dY), free(dx);
    }
    for (size_t k = 0; k < 4; k++)
        free(yv[k]), free(Ey[k]);
    fb_norms_free(&nm);
    free(v), free(xt), free(jv), free(tol);
    return bad;
}

Test(grad_stack, adjoint_identity_with_respect_to_x)
{
    static const refenc_positional schemes[] = {REFENC_POS_NONE, REFENC_POS_ROPE,
                                                REFENC_POS_SINUSOIDAL, REFENC_POS_ALIBI};
    gsl_rng *r = test_rng(2703);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    for (size_t t = 0; t < 4; t++) {
        st_case s;
        st_case_make(&s, r, t, REFENC_FAMILY_VASWANI, schemes[t], t >= 2, t == 3);
        bad += st_adjoint(&w, &s, r);
        st_case_free(&s);
    }
    gsl_rng_free(r);
    gc_report(&w, bad);
}

/* Batch items are independent, in the backward as in the forward: swapping
 * the two items of a batch (inputs, padding, types, dY) swaps dx bit for
 * bit (each item's computation is the same sequence of operations). */
Test(grad_stack, permuting_the_batch_permutes_dx_bitwise)
{
    gsl_rng *r = test_rng(2704);
    size_t checked = 0;
    for (size_t t = 0; t < 12; t++) {
        st_case s;
        const refenc_family fam = t < 6 ? REFENC_FAMILY_VASWANI : families[t % 5];
        st_case_make(&s, r, t, fam, t % 3 == 0 ? REFENC_POS_ROPE : REFENC_POS_NONE, t % 2, 0);
        prop_case *c = &s.c;
        if (c->B < 2) {
            st_case_free(&s);
            continue;
        }
        const size_t L = c->L, D = c->cfg.d_model, LD = L * D, BLD = 2 * LD;
        double *dY = prop_calloc(BLD, sizeof(double)), *dYs = prop_calloc(BLD, sizeof(double));
        double *dx = prop_calloc(BLD, sizeof(double)), *dxs = prop_calloc(BLD, sizeof(double));
        double *xs = prop_calloc(BLD, sizeof(double));
        uint8_t *pads = c->pad ? prop_calloc(2 * L, 1) : NULL;
        int64_t *toks = c->tokens ? prop_calloc(2 * L, sizeof(int64_t)) : NULL;
        int64_t *typs = c->types ? prop_calloc(2 * L, sizeof(int64_t)) : NULL;
        test_fill_gaussian(dY, BLD, 0.0, 1.0, r);
        for (size_t b = 0; b < 2; b++) { /* item b of the swapped batch is item 1 - b */
            memcpy(dYs + b * LD, dY + (1 - b) * LD, LD * sizeof(double));
            if (c->x && !c->tokens)
                memcpy(xs + b * LD, c->x + (1 - b) * LD, LD * sizeof(double));
            if (pads)
                memcpy(pads + b * L, c->pad + (1 - b) * L, L);
            if (toks)
                memcpy(toks + b * L, c->tokens + (1 - b) * L, L * sizeof(int64_t));
            if (typs)
                memcpy(typs + b * L, c->types + (1 - b) * L, L * sizeof(int64_t));
        }
        refenc_params g0, g1;
        st_backward(dx, &g0, &s, dY);
        st_case sw = s;
        sw.in.x = c->tokens ? NULL : xs, sw.in.key_padding_mask = pads, sw.in.tokens = toks,
        sw.in.token_types = typs;
        st_backward(dxs, &g1, &sw, dYs);
        for (size_t b = 0; b < 2; b++) {
            char msg[256];
            const size_t n = prop_count_unequal(dxs + b * LD, dx + (1 - b) * LD, LD, msg, sizeof msg);
            cr_assert(n == 0, "%s: item %zu of the swapped batch differs from item %zu in %zu values; %s",
                      c->desc, b, 1 - b, n, msg);
            checked += LD;
        }
        refenc_params_free(&g0), refenc_params_free(&g1);
        free(dY), free(dYs), free(dx), free(dxs), free(xs), free(pads), free(toks), free(typs);
        st_case_free(&s);
    }
    gsl_rng_free(r);
    cr_assert(checked > 0, "no case had two batch items");
}

/* The backward recomputes the forward and must leave it as it was: the
 * output of refenc_encoder_forward is bit-identical before and after a
 * backward on the same workspace, and two backwards give the same bits. */
Test(grad_stack, backward_is_deterministic_and_leaves_the_forward_unchanged)
{
    gsl_rng *r = test_rng(2705);
    for (size_t f = 0; f < 5; f++) {
        st_case s;
        st_case_make(&s, r, f, families[f], REFENC_POS_LEARNED, 0, 0);
        const prop_case *c = &s.c;
        const refenc_config *g = &c->cfg;
        const size_t BLD = c->B * c->L * g->d_model;
        double *y0 = prop_calloc(BLD, sizeof(double)), *y1 = prop_calloc(BLD, sizeof(double));
        double *dY = prop_calloc(BLD, sizeof(double)), *dx0 = prop_calloc(BLD, sizeof(double));
        double *dx1 = prop_calloc(BLD, sizeof(double));
        test_fill_gaussian(dY, BLD, 0.0, 1.0, r);
        refenc_error err;
        refenc_workspace ws;
        refenc_grad_workspace gws;
        refenc_params g0, g1;
        cr_assert_eq(refenc_workspace_alloc(&ws, g, c->B, c->L, &err), REFENC_OK);
        cr_assert_eq(refenc_grad_workspace_alloc(&gws, g, c->B, c->L, &err), REFENC_OK);
        cr_assert_eq(refenc_params_alloc(&g0, g, &err), REFENC_OK);
        cr_assert_eq(refenc_params_alloc(&g1, g, &err), REFENC_OK);
        cr_assert_eq(refenc_encoder_forward(y0, &ws, &c->p, g, &s.in, NULL, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(refenc_encoder_backward(&g0, dx0, &gws, &ws, &c->p, g, &s.in, dY, &err), REFENC_OK);
        cr_assert_eq(refenc_encoder_backward(&g1, dx1, &gws, &ws, &c->p, g, &s.in, dY, &err), REFENC_OK);
        cr_assert_eq(refenc_encoder_forward(y1, &ws, &c->p, g, &s.in, NULL, &err), REFENC_OK);
        char msg[256];
        cr_assert(prop_count_unequal(y1, y0, BLD, msg, sizeof msg) == 0, "%s: forward changed; %s", c->desc, msg);
        cr_assert(prop_count_unequal(dx1, dx0, BLD, msg, sizeof msg) == 0, "%s: dx; %s", c->desc, msg);
        cr_assert(prop_count_unequal(g1.block, g0.block, g0.n_values, msg, sizeof msg) == 0,
                  "%s: parameter gradients; %s", c->desc, msg);
        /* the last layer's output of the recomputation is the forward's */
        const double *last = gws.acts + g->n_layers * BLD;
        if (!g->final_norm)
            cr_assert(prop_count_unequal(last, y0, BLD, msg, sizeof msg) == 0, "%s: acts[N]; %s", c->desc, msg);
        refenc_params_free(&g0), refenc_params_free(&g1);
        refenc_grad_workspace_free(&gws);
        refenc_workspace_free(&ws);
        free(y0), free(y1), free(dY), free(dx0), free(dx1);
        st_case_free(&s);
    }
    gsl_rng_free(r);
}

/* Errors: a gradient workspace of another shape, gradients of another
 * config, invalid input: REFENC_EINVAL with a message, nothing written. */
/* The gradient workspace's buffers (encoder.h, layer.h, mha.h) are
 * disjoint and inside its block, whatever the sizes: an overlap would make
 * one step's scratch another's live values, which only some shapes expose
 * (here the attention's (B, H, L, L) buffers dwarf the FFN's: L 20 > F 16,
 * and the gated FFN's 5 slots for the other layout). */
typedef struct {
    const double *p;
    size_t n;
    const char *name;
} gw_span;

static void expect_disjoint(const gw_span *sp, size_t k, const double *block, size_t total)
{
    for (size_t i = 0; i < k; i++) {
        cr_expect(sp[i].p >= block && sp[i].p + sp[i].n <= block + total, "%s outside the block", sp[i].name);
        for (size_t j = i + 1; j < k; j++)
            cr_expect(sp[i].p + sp[i].n <= sp[j].p || sp[j].p + sp[j].n <= sp[i].p, "%s overlaps %s",
                      sp[i].name, sp[j].name);
    }
}

Test(grad_stack, the_workspace_buffers_are_disjoint_and_inside_the_block)
{
    for (int glu = 0; glu < 3; glu++) {
        refenc_config g;
        refenc_config_default(&g);
        g.d_model = 8, g.n_heads = 2, g.d_ff = 16, g.n_layers = 2;
        if (glu)
            g.ffn_type = REFENC_FFN_GLU;
        if (glu == 2) /* grouped-query attention, E = 2 x 12 > D: attention's buffers (B, L, E) */
            g.n_kv_heads = 1, g.head_dim = 12;
        const size_t B = 1, L = 20, N = g.n_layers, BLD = B * L * 8, BLF = B * L * 16, BHL = B * 2 * L;
        const size_t BLA = glu == 2 ? B * L * 24 : BLD;
        refenc_grad_workspace w;
        refenc_error err;
        cr_assert_eq(refenc_grad_workspace_alloc(&w, &g, B, L, &err), REFENC_OK, "%s", err.message);
        const refenc_layer_grad_work *lw = &w.layer;
        const size_t F3 = glu ? 3 : 1, F2 = glu ? 2 : 1;
        const gw_span sp[] = {
            {w.acts, (N + 1) * BLD, "acts"}, {w.e, BLD, "e"}, {w.dh0, BLD, "dh0"}, {w.dh1, BLD, "dh1"},
            {lw->y, BLD, "y"}, {lw->a, BLD, "a"}, {lw->d1, BLD, "d1"}, {lw->d2, BLD, "d2"}, {lw->d3, BLD, "d3"},
            {lw->pre, F3 * BLF, "pre"}, {lw->dpre, F2 * BLF, "dpre"},
            {lw->mha.dctx, BLA, "dctx"}, {lw->mha.dctxh, BLA, "dctxh"}, {lw->mha.dqh, BLA, "dqh"},
            {lw->mha.dkh, BLA, "dkh"}, {lw->mha.dvh, BLA, "dvh"}, {lw->mha.dq, BLA, "dq"},
            {lw->mha.dk, BLA, "dk"}, {lw->mha.dv, BLA, "dv"}, {lw->mha.dP, BHL * L, "dP"},
            {lw->mha.dS, BHL * L, "dS"}, {lw->mha.Drow, BHL, "Drow"}};
        const size_t k = sizeof sp / sizeof sp[0];
        size_t total = 0;
        for (size_t i = 0; i < k; i++)
            total += sp[i].n;
        expect_disjoint(sp, k, w.block, total);
        refenc_grad_workspace_free(&w);
    }
}

Test(grad_stack, refuses_mismatched_workspaces_and_gradients)
{
    gsl_rng *r = test_rng(2706);
    st_case s;
    st_case_make(&s, r, 1, REFENC_FAMILY_BERT, REFENC_POS_LEARNED, 0, 0);
    const prop_case *c = &s.c;
    refenc_config g = c->cfg, g2 = c->cfg;
    g2.n_layers = g.n_layers + 1;
    const size_t BLD = c->B * c->L * g.d_model;
    double *dY = prop_calloc(BLD, sizeof(double)), *dx = prop_calloc(BLD, sizeof(double));
    refenc_error err;
    refenc_workspace ws;
    refenc_grad_workspace gws, gbig;
    refenc_params grad, grad2;
    cr_assert_eq(refenc_workspace_alloc(&ws, &g, c->B, c->L, &err), REFENC_OK);
    cr_assert_eq(refenc_grad_workspace_alloc(&gws, &g, c->B, c->L, &err), REFENC_OK);
    cr_assert_eq(refenc_grad_workspace_alloc(&gbig, &g, c->B, c->L + 1, &err), REFENC_OK);
    cr_assert_eq(refenc_params_alloc(&grad, &g, &err), REFENC_OK);
    cr_assert_eq(refenc_params_alloc(&grad2, &g2, &err), REFENC_OK);
    dx[0] = 42.0;
    cr_assert_eq(refenc_encoder_backward(&grad, dx, &gbig, &ws, &c->p, &g, &s.in, dY, &err), REFENC_EINVAL);
    cr_assert(strstr(err.message, "gradient workspace") != NULL, "%s", err.message);
    cr_assert_eq(refenc_encoder_backward(&grad2, dx, &gws, &ws, &c->p, &g, &s.in, dY, &err), REFENC_EINVAL);
    cr_assert(strstr(err.message, "gradients") != NULL, "%s", err.message);
    refenc_input bad = s.in;
    int64_t tok[64];
    memcpy(tok, c->tokens, c->B * c->L * sizeof(int64_t));
    tok[0] = 9; /* V = 9: out of range */
    bad.tokens = tok;
    cr_assert_eq(refenc_encoder_backward(&grad, dx, &gws, &ws, &c->p, &g, &bad, dY, &err), REFENC_EINVAL);
    cr_assert(dx[0] == 42.0, "dx written on error");
    for (size_t i = 0; i < grad.n_values; i++)
        cr_assert(grad.block[i] == 0.0, "gradient written on error");
    refenc_config huge = g;
    huge.n_layers = REFENC_MAX_LAYERS;
    huge.d_model = 1024, huge.n_heads = 1, huge.d_ff = 4096;
    refenc_grad_workspace_free(&gbig); /* the refused allocation below starts from an empty workspace */
    cr_assert_eq(refenc_grad_workspace_alloc(&gbig, &huge, 64, 512, &err) != REFENC_OK, 1);
    cr_assert(gbig.block == NULL);
    refenc_params_free(&grad), refenc_params_free(&grad2);
    refenc_grad_workspace_free(&gws);
    refenc_workspace_free(&ws);
    free(dY), free(dx);
    st_case_free(&s);
    gsl_rng_free(r);
}

/* ---- negative controls: the backward of a model that differs from the
 * forward's in one convention must fail the finite differences and the
 * adjoint identity ---- */

static void skew_tanh(refenc_config *g, refenc_input *in)
{
    (void)in;
    if (g->activation == REFENC_ACT_GELU)
        g->activation = REFENC_ACT_GELU_TANH;
}

static void skew_unmasked(refenc_config *g, refenc_input *in)
{
    (void)g;
    in->key_padding_mask = NULL;
}

static void skew_rope_layout(refenc_config *g, refenc_input *in)
{
    (void)in;
    g->rope_layout = g->rope_layout == REFENC_ROPE_HALF ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF;
}

static void skew_eps(refenc_config *g, refenc_input *in)
{
    (void)in;
    g->layer_norm_eps = 0.1;
    g->embedding_norm_eps = 0.1;
}

/* the gated FFN's other half as the gate */
static void skew_glu_gate(refenc_config *g, refenc_input *in)
{
    (void)in;
    g->glu_gate = g->glu_gate == REFENC_GLU_GATE_FIRST ? REFENC_GLU_GATE_SECOND : REFENC_GLU_GATE_FIRST;
}

/* Gemma's (1 + w) dropped from the RMSNorm backward */
static void skew_rmsnorm_offset(refenc_config *g, refenc_input *in)
{
    (void)in;
    g->rmsnorm_offset = !g->rmsnorm_offset;
}

/* the finite differences of case t of `fam` with the backward skewed: the
 * number of violations */
static size_t skewed_fd(st_skew skew, refenc_family fam, refenc_positional pos, size_t t,
                        unsigned long stream)
{
    gsl_rng *r = test_rng(stream);
    test_worst w;
    test_worst_init(&w);
    st_case s;
    st_min_len = 4; /* cases where the skew shows: L >= 4, RoPE base 10^4, a padded key */
    st_case_make(&s, r, t, fam, pos, 0, 0);
    st_min_len = 2;
    s.c.cfg.rope_base = 10000.0;
    if (skew == skew_rope_layout) /* no padding: a fully padded item would hide q and k */
        s.in.key_padding_mask = NULL;
    if (skew == skew_unmasked) { /* item 0: distinct tokens 2, 3, ..., the last one padding */
        if (s.c.pad == NULL)
            s.c.pad = prop_calloc(s.c.B * s.c.L, 1);
        for (size_t l = 0; l < s.c.L; l++) {
            s.c.pad[l] = l == s.c.L - 1;
            s.c.tokens[l] = 2 + (int64_t)l;
        }
        s.in.key_padding_mask = s.c.pad;
    }
    backward_skew = skew;
    const size_t bad = st_fd(&w, &s, r);
    backward_skew = NULL;
    char msg[768];
    cr_log_info("%zu violations; %s", bad, test_worst_describe(&w, msg, sizeof msg));
    st_case_free(&s);
    gsl_rng_free(r);
    return bad;
}

Test(grad_stack, control_fd_flags_the_tanh_derivative_for_exact_gelu)
{
    cr_assert(skewed_fd(skew_tanh, REFENC_FAMILY_BERT, REFENC_POS_LEARNED, 0, 2710) > 0);
}

Test(grad_stack, control_fd_flags_gradients_from_the_unmasked_scores)
{
    cr_assert(skewed_fd(skew_unmasked, REFENC_FAMILY_ROBERTA, REFENC_POS_LEARNED, 1, 2711) > 0);
}

Test(grad_stack, control_fd_flags_the_other_rope_layout)
{
    cr_assert(skewed_fd(skew_rope_layout, REFENC_FAMILY_VASWANI, REFENC_POS_ROPE, 1, 2712) > 0);
}

Test(grad_stack, control_fd_flags_the_other_glu_half_and_the_rmsnorm_offset)
{
    st_modern = 1; /* case 1: RMSNorm (1 + w), GeGLU with the second half the gate */
    cr_assert(skewed_fd(skew_glu_gate, REFENC_FAMILY_VASWANI, REFENC_POS_ROPE, 1, 2714) > 0);
    cr_assert(skewed_fd(skew_rmsnorm_offset, REFENC_FAMILY_VASWANI, REFENC_POS_ROPE, 1, 2715) > 0);
    st_modern = 0;
}

Test(grad_stack, control_fd_flags_another_layernorm_eps)
{
    cr_assert(skewed_fd(skew_eps, REFENC_FAMILY_DISTILBERT, REFENC_POS_LEARNED, 0, 2713) > 0);
}

Test(grad_stack, control_adjoint_flags_the_other_rope_layout)
{
    gsl_rng *r = test_rng(2714);
    test_worst w;
    test_worst_init(&w);
    st_case s;
    st_min_len = 4;
    st_case_make(&s, r, 1, REFENC_FAMILY_VASWANI, REFENC_POS_ROPE, 0, 0);
    st_min_len = 2;
    s.c.cfg.rope_base = 10000.0;
    s.in.key_padding_mask = NULL;
    backward_skew = skew_rope_layout;
    const size_t bad = st_adjoint(&w, &s, r);
    backward_skew = NULL;
    char msg[768];
    cr_log_info("%zu violations; %s", bad, test_worst_describe(&w, msg, sizeof msg));
    st_case_free(&s);
    gsl_rng_free(r);
    cr_assert(bad > 0);
}

/* ---- permutation equivariance of the gradients without positions ---- */

/* Swaps tokens 0 and 1 of a one-item case (x or tokens, types, padding) and
 * of dY, runs the backward on both and counts the values of dx (swapped
 * back) and of every parameter gradient that differ.  Exact equality is the
 * property: without positional information the encoder is equivariant,
 * f(P X) = P f(X), so the gradient of <P dY, f(P X)> is P dx and the same
 * parameter gradients; and in double every sum over tokens starts from 0.0
 * with token 0 then token 1 (softmax and attention over keys, dW, db,
 * dgamma, the tables' rows), where swapping the first two terms of
 * ((0 + a) + b) + ... changes nothing (IEEE addition is commutative). */
static size_t swapped_differences(st_case *s, gsl_rng *r, char *msg, size_t len)
{
    prop_case *c = &s->c;
    const size_t L = c->L, D = c->cfg.d_model, LD = L * D;
    double *dY = prop_calloc(LD, sizeof(double)), *dYs = prop_calloc(LD, sizeof(double));
    double *dx = prop_calloc(LD, sizeof(double)), *dxs = prop_calloc(LD, sizeof(double));
    double *xs = prop_calloc(LD, sizeof(double));
    uint8_t pads[8] = {0};
    int64_t toks[8] = {0}, typs[8] = {0};
    test_fill_gaussian(dY, LD, 0.0, 1.0, r);
    for (size_t l = 0; l < L; l++) { /* (P X)[l] = X[perm l], perm = (0 1) */
        const size_t src = l == 0 ? 1 : l == 1 ? 0 : l;
        memcpy(dYs + l * D, dY + src * D, D * sizeof(double));
        if (!c->tokens)
            memcpy(xs + l * D, c->x + src * D, D * sizeof(double));
        pads[l] = c->pad ? c->pad[src] : 0;
        toks[l] = c->tokens ? c->tokens[src] : 0;
        typs[l] = c->types ? c->types[src] : 0;
    }
    refenc_params g0, g1;
    st_backward(dx, &g0, s, dY);
    st_case sw = *s;
    sw.in.x = c->tokens ? NULL : xs;
    sw.in.key_padding_mask = c->pad ? pads : NULL;
    sw.in.tokens = c->tokens ? toks : NULL;
    sw.in.token_types = c->types ? typs : NULL;
    st_backward(dxs, &g1, &sw, dYs);
    double *back = prop_calloc(LD, sizeof(double));
    for (size_t l = 0; l < L; l++)
        memcpy(back + (l == 0 ? 1 : l == 1 ? 0 : l) * D, dxs + l * D, D * sizeof(double));
    const size_t n = prop_count_unequal(back, dx, LD, msg, len) +
                     prop_count_unequal(g1.block, g0.block, g0.n_values, NULL, 0);
    refenc_params_free(&g0), refenc_params_free(&g1);
    free(dY), free(dYs), free(dx), free(dxs), free(xs), free(back);
    return n;
}

/* one-item cases without positions, not causal: x or tokens (scaled, types,
 * LN_emb), padding on some */
static void swap_case(st_case *s, gsl_rng *r, size_t t, refenc_positional pos, int causal)
{
    st_min_len = 3;
    st_vaswani_tokens = t % 2;
    st_case_make(s, r, t, REFENC_FAMILY_VASWANI, pos, causal, 0);
    st_vaswani_tokens = 0;
    st_min_len = 2;
    s->c.B = 1, s->in.B = 1; /* item 0 alone: its inputs are the first L rows */
}

Test(grad_stack, swapping_two_tokens_without_positions_swaps_dx_and_keeps_parameter_gradients)
{
    gsl_rng *r = test_rng(2707);
    for (size_t t = 0; t < 8; t++) {
        st_case s;
        swap_case(&s, r, t, REFENC_POS_NONE, 0);
        char msg[256] = "";
        const size_t n = swapped_differences(&s, r, msg, sizeof msg);
        cr_assert(n == 0, "%s: %zu values differ; %s", s.c.desc, n, msg);
        st_case_free(&s);
    }
    gsl_rng_free(r);
}

/* The control: positions (each scheme) or the causal mask tie a token to
 * its place, and the same comparison must see it. */
Test(grad_stack, control_swapping_two_tokens_with_positions_or_causal_changes_gradients)
{
    static const refenc_positional schemes[] = {REFENC_POS_SINUSOIDAL, REFENC_POS_LEARNED,
                                                REFENC_POS_ROPE, REFENC_POS_ALIBI, REFENC_POS_NONE};
    gsl_rng *r = test_rng(2708);
    for (size_t t = 0; t < 5; t++) {
        st_case s;
        swap_case(&s, r, t, schemes[t], t == 4);
        s.in.key_padding_mask = NULL; /* a padded token 0 or 1 could hide the swap */
        free(s.c.pad);
        s.c.pad = NULL;
        const size_t n = swapped_differences(&s, r, NULL, 0);
        cr_assert(n > 0, "%s: the swap went unseen", s.c.desc);
        st_case_free(&s);
    }
    gsl_rng_free(r);
}

/* Gemma's attention conventions are forward only (docs/gradients.md): the
 * gradient workspace refuses each by key and allocates nothing. */
Test(grad_stack, refuses_softcap_and_query_pre_attn_scalar_by_key)
{
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = 8, c.n_heads = 4, c.d_ff = 6, c.n_layers = 1;
    const char *key[2] = {"attn_logit_softcapping", "query_pre_attn_scalar"};
    for (int i = 0; i < 2; i++) {
        refenc_config g = c;
        if (i == 0)
            g.attn_logit_softcapping = 50.0;
        else
            g.query_pre_attn_scalar = 2.0; /* even equal to Dh: refused by key */
        refenc_grad_workspace gws;
        refenc_error err;
        cr_assert_eq(refenc_grad_workspace_alloc(&gws, &g, 1, 3, &err), REFENC_EINVAL);
        cr_expect(strstr(err.message, key[i]) != NULL, "%s", err.message);
        cr_expect_null(gws.block);
    }
}

/* The attention windows are forward only (docs/gradients.md): the gradient
 * workspace refuses each by key and allocates nothing, even a window wider
 * than the sequence. */
Test(grad_stack, refuses_attention_windows_by_key)
{
    refenc_config c;
    refenc_config_default(&c);
    c.d_model = 8, c.n_heads = 4, c.d_ff = 6, c.n_layers = 1;
    const char *key[7] = {"sliding_window", "local_attention", "global_attn_every_n_layers",
                          "sliding_window_pattern", "embedding_normalizer_dtype", "pooling", "sandwich_norm"};
    for (int i = 0; i < 7; i++) {
        refenc_config g = c;
        if (i == 0)
            g.causal = 1, g.sliding_window = 4;
        else if (i == 1)
            g.local_attention = 16;
        else if (i == 2)
            g.global_attn_every_n_layers = 3;
        else if (i == 3)
            g.sliding_window_pattern = 3;
        else if (i == 4)
            g.vocab_size = 5, g.embedding_normalizer_dtype = REFENC_NORMALIZER_FLOAT16;
        else if (i == 5)
            g.pooling = REFENC_POOL_MEAN; /* the pooled embedding: forward only */
        else
            g.sandwich_norm = 1; /* Gemma 2/3's norms of the sublayers' outputs: forward only */
        refenc_grad_workspace gws;
        refenc_error err;
        cr_assert_eq(refenc_grad_workspace_alloc(&gws, &g, 1, 3, &err), REFENC_EINVAL);
        cr_expect(strstr(err.message, key[i]) != NULL, "%s", err.message);
        cr_expect_null(gws.block);
    }
}
