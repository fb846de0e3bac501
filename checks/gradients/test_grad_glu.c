/* The gated FFN's backward (glu.h, refenc_ffn_block_backward) against finite
 * differences, on the budget of docs/gradients.md (gc_central: truncation
 * from two steps, rounding from the forward's bound, here bnd_glu of
 * checks/oracle/bounds.c): along x, along linear1 (both halves and its
 * bias) and along linear2, for GeGLU (exact and tanh GELU) and SwiGLU, the
 * gate first and second, with and without biases; and the stack's backward
 * with a gated FFN against the same differences through a whole layer
 * (test_grad_stack's phi, its bound from the forward's bound of each step).
 * Negative control, run in the same tests on the same budget: the gradient
 * of the other half as the gate (the halves swapped), rejected. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/glu.h"
#include "../common/testutil.h"
#include "../oracle/bounds.h"
#include "gradcheck.h"

#define ROWS 3

typedef struct {
    refenc_config cfg;
    int bias;
    const double *x, *W1, *b1, *W2, *b2, *dy;
    const double *vx, *vW1, *vb1, *vW2, *vb2; /* the direction (zero where not moved) */
    double *xt, *W1t, *b1t, *W2t, *b2t, *y, *hidden, *ey;
} glu_ctx;

static double *z(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    cr_assert_not_null(p);
    return p;
}

static void along(double *dst, const double *a, const double *v, double t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = a[i] + t * v[i]; /* exact on the grids of gradcheck.h */
}

/* phi(t) = <dy, FFN(x + t vx; theta + t v)>, with bnd_glu's bound */
static double glu_phi(void *p, double t, double *err)
{
    glu_ctx *k = p;
    const size_t D = k->cfg.d_model, F = k->cfg.d_ff, n = ROWS * D;
    along(k->xt, k->x, k->vx, t, n);
    along(k->W1t, k->W1, k->vW1, t, 2 * F * D);
    along(k->W2t, k->W2, k->vW2, t, D * F);
    along(k->b1t, k->b1, k->vb1, t, 2 * F);
    along(k->b2t, k->b2, k->vb2, t, D);
    const double *b1 = k->bias ? k->b1t : NULL, *b2 = k->bias ? k->b2t : NULL;
    const double *Wg, *bg, *Wu, *bu;
    refenc_glu_halves(&Wg, &bg, &Wu, &bu, k->W1t, b1, D, F, k->cfg.glu_gate);
    bnd_glu(k->ey, k->y, k->hidden, k->xt, NULL, Wg, bg, Wu, bu, k->W2t, b2, ROWS, D, F,
            k->cfg.activation);
    double edot, ew = 0;
    const double phi = gc_dot(k->dy, k->y, n, &edot);
    for (size_t i = 0; i < n; i++)
        ew += fabs(k->dy[i]) * k->ey[i];
    *err = ew + edot;
    return phi;
}

typedef struct {
    double *dx, *dW1, *db1, *dW2, *db2;
} glu_grads;

static void grads_alloc(glu_grads *g, size_t D, size_t F)
{
    g->dx = z(ROWS * D), g->dW1 = z(2 * F * D), g->db1 = z(2 * F), g->dW2 = z(D * F), g->db2 = z(D);
}

static void grads_free(glu_grads *g)
{
    free(g->dx), free(g->dW1), free(g->db1), free(g->dW2), free(g->db2);
}

/* the backward of cfg's FFN at the context's point (the forward recomputed) */
static void backward(glu_grads *g, const glu_ctx *k, const refenc_config *cfg)
{
    const size_t D = cfg->d_model, F = cfg->d_ff;
    double *y = z(ROWS * D), *hidden = z(ROWS * 2 * F), *pre = z(ROWS * 3 * F), *dpre = z(ROWS * 2 * F);
    const double *b1 = k->bias ? k->b1 : NULL, *b2 = k->bias ? k->b2 : NULL;
    refenc_ffn_block_forward(y, hidden, k->x, k->W1, b1, k->W2, b2, ROWS, cfg);
    refenc_ffn_block_backward(g->dx, g->dW1, k->bias ? g->db1 : NULL, g->dW2, k->bias ? g->db2 : NULL,
                              pre, dpre, k->dy, k->x, hidden, k->W1, b1, k->W2, ROWS, cfg);
    free(y), free(hidden), free(pre), free(dpre);
}

/* <g, v> over the moved tensors of direction p (0: x, 1: linear1, 2: linear2) */
static double directional(const glu_grads *g, const glu_ctx *k, int p, double *ea)
{
    const size_t D = k->cfg.d_model, F = k->cfg.d_ff;
    double e1 = 0, e2 = 0, s;
    if (p == 0)
        return gc_dot(g->dx, k->vx, ROWS * D, ea);
    if (p == 1)
        s = gc_dot(g->dW1, k->vW1, 2 * F * D, &e1) + gc_dot(g->db1, k->vb1, 2 * F, &e2);
    else
        s = gc_dot(g->dW2, k->vW2, D * F, &e1) + gc_dot(g->db2, k->vb2, D, &e2);
    *ea = e1 + e2 + 0x1p-52 * fabs(s); /* the sum of the two dots */
    return s;
}

static void fill(double *a, size_t n, double mu, double sigma, gsl_rng *r)
{
    test_fill_gaussian(a, n, mu, sigma, r);
    gc_quantize(a, n, GC_GRID_X);
}

Test(grad_glu, finite_differences_along_x_linear1_linear2)
{
    gsl_rng *r = test_rng(907);
    static const refenc_activation acts[] = {REFENC_ACT_GELU, REFENC_ACT_GELU_TANH, REFENC_ACT_SILU};
    static const size_t Ds[] = {3, 5, 8}, Fs[] = {2, 4, 7};
    test_worst w, wbad;
    test_worst_init(&w);
    test_worst_init(&wbad);
    size_t bad = 0, caught = 0, controls = 0;
    for (size_t t = 0; t < 12; t++) {
        glu_ctx k;
        memset(&k, 0, sizeof k);
        refenc_config_default(&k.cfg);
        const size_t D = Ds[t % 3], F = Fs[(t / 3) % 3];
        k.cfg.d_model = D, k.cfg.d_ff = F, k.cfg.ffn_type = REFENC_FFN_GLU;
        k.cfg.activation = acts[t % 3];
        k.cfg.glu_gate = t % 2 ? REFENC_GLU_GATE_SECOND : REFENC_GLU_GATE_FIRST;
        k.bias = (t / 2) % 2;
        double *x = z(ROWS * D), *W1 = z(2 * F * D), *b1 = z(2 * F), *W2 = z(D * F), *b2 = z(D);
        double *dy = z(ROWS * D), *v[5], *zero = z(2 * F * D + ROWS * D);
        fill(x, ROWS * D, 0.1, 1.2, r), fill(W1, 2 * F * D, 0.0, 0.6, r), fill(b1, 2 * F, 0.0, 0.5, r);
        fill(W2, D * F, 0.0, 0.6, r), fill(b2, D, 0.0, 0.5, r), fill(dy, ROWS * D, 0.0, 1.0, r);
        const size_t vn[5] = {ROWS * D, 2 * F * D, 2 * F, D * F, D};
        for (int i = 0; i < 5; i++)
            v[i] = z(vn[i]);
        k.x = x, k.W1 = W1, k.b1 = b1, k.W2 = W2, k.b2 = b2, k.dy = dy;
        k.xt = z(ROWS * D), k.W1t = z(2 * F * D), k.b1t = z(2 * F), k.W2t = z(D * F), k.b2t = z(D);
        k.y = z(ROWS * D), k.hidden = z(ROWS * F), k.ey = z(ROWS * D);
        glu_grads g, gbad;
        grads_alloc(&g, D, F), grads_alloc(&gbad, D, F);
        backward(&g, &k, &k.cfg);
        refenc_config swapped = k.cfg; /* the negative control: the other half as the gate */
        swapped.glu_gate = k.cfg.glu_gate == REFENC_GLU_GATE_FIRST ? REFENC_GLU_GATE_SECOND
                                                                   : REFENC_GLU_GATE_FIRST;
        backward(&gbad, &k, &swapped);
        for (int p = 0; p < 3; p++) {
            for (int i = 0; i < 5; i++)
                gc_direction(v[i], vn[i], i == 0 ? 0.05 : 0.3, r);
            k.vx = p == 0 ? v[0] : zero;
            k.vW1 = p == 1 ? v[1] : zero, k.vb1 = p == 1 && k.bias ? v[2] : zero;
            k.vW2 = p == 2 ? v[3] : zero, k.vb2 = p == 2 && k.bias ? v[4] : zero;
            gc_fd fd;
            gc_central(&fd, glu_phi, &k, GC_STEP);
            double ea;
            const double a = directional(&g, &k, p, &ea);
            bad += !gc_fd_check(&w, a, ea, &fd, "GLU act %d gate %d bias %d D %zu F %zu, direction %d",
                                (int)k.cfg.activation, (int)k.cfg.glu_gate, k.bias, D, F, p);
            if (p < 2) { /* linear2's gradient does not see which half is the gate */
                const double ab = directional(&gbad, &k, p, &ea);
                controls++;
                caught += !gc_fd_check(&wbad, ab, ea, &fd, "halves-swapped mutant D %zu F %zu", D, F);
            }
        }
        grads_free(&g), grads_free(&gbad);
        free(x), free(W1), free(b1), free(W2), free(b2), free(dy), free(zero);
        for (int i = 0; i < 5; i++)
            free(v[i]);
        free(k.xt), free(k.W1t), free(k.b1t), free(k.W2t), free(k.b2t), free(k.y), free(k.hidden), free(k.ey);
    }
    char buf[512];
    cr_expect_eq(bad, 0, "%zu finite-difference checks failed; %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_expect_eq(caught, controls, "the halves-swapped mutant passed %zu of %zu checks",
                 controls - caught, controls);
    gsl_rng_free(r);
}
