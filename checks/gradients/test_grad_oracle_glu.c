/* The oracle's gated-FFN backward (ref/oracle/glu_backward.c), the kernel
 * the layer and stack twins run, on its own: SwiGLU, GeGLU (exact and
 * tanh), the gate's half first and second, with and without biases.
 *   - the twin's adjoint identity along x, W1, b1 and W2 against the
 *     oracle's forward kernels at 1024 bits (oracle_adjoint.c's budget);
 *   - the reference's refenc_ffn_block_backward within certify's F64
 *     gradient policy of the twin (docs/gradients.md, "Certifying
 *     gradients"; the kernel's first-order bound is in "Llama-style
 *     blocks").
 * Negative controls in each test: the gradients of the other half as the
 * gate (the twin's, the reference's) fail. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "../../ref/glu.h"
#include "../../ref/oracle/backward.h"
#include "../../ref/oracle/internal.h"
#include "../../ref/tool/certify.h"
#include "oracle_adjoint.h"

#define PREC REFENC_MP_PREC_DEFAULT

enum { N = 3, D = 4, F = 3, F2 = 2 * F };

typedef struct {
    refenc_activation act;
    refenc_glu_gate gate;
    int bias;
} glu_kind;

static const glu_kind kinds[] = {
    {REFENC_ACT_SILU, REFENC_GLU_GATE_FIRST, 0},      /* Llama's SwiGLU, bias-free */
    {REFENC_ACT_GELU_TANH, REFENC_GLU_GATE_SECOND, 1}, /* GTE's order, Gemma's gate */
    {REFENC_ACT_GELU, REFENC_GLU_GATE_FIRST, 1},       /* ModernBERT's GeGLU */
};

typedef struct {
    double x[N * D], W1[F2 * D], b1[F2], W2[D * F], b2[D], dY[N * D];
    glu_kind k;
} gcase;

static void gcase_fill(gcase *c, glu_kind k, gsl_rng *r)
{
    c->k = k;
    test_fill_gaussian(c->x, N * D, 0.1, 1.0, r), test_fill_gaussian(c->W1, F2 * D, 0.0, 0.7, r);
    test_fill_gaussian(c->b1, F2, 0.0, 0.3, r), test_fill_gaussian(c->W2, D * F, 0.0, 0.7, r);
    test_fill_gaussian(c->b2, D, 0.0, 0.3, r), test_fill_gaussian(c->dY, N * D, 0.0, 1.0, r);
}

/* the gradients (dx, dW1, db1, dW2), zero-started, of gate g (the twin or the reference) */
typedef struct {
    double dx[N * D], dW1[F2 * D], db1[F2], dW2[D * F], db2[D];
} grads;

static void twin(grads *o, const gcase *c, refenc_glu_gate g)
{
    memset(o, 0, sizeof *o);
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_glu_backward(o->dx, o->dW1, o->db1, o->dW2, o->db2, c->dY, c->x, c->W1,
                                        c->k.bias ? c->b1 : NULL, c->W2, c->k.bias ? c->b2 : NULL, N, D,
                                        F, c->k.act, g, PREC, &rep), 0, "%s", rep.error.message);
}

static void reference(grads *o, const gcase *c, refenc_glu_gate g)
{
    memset(o, 0, sizeof *o);
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = D, cfg.d_ff = F, cfg.ffn_type = REFENC_FFN_GLU, cfg.activation = c->k.act;
    cfg.glu_gate = c->k.gate;
    double hidden[N * F2], pre[N * 3 * F], dpre[N * F2], y[N * D];
    const double *b1 = c->k.bias ? c->b1 : NULL, *b2 = c->k.bias ? c->b2 : NULL;
    refenc_ffn_block_forward(y, hidden, c->x, c->W1, b1, c->W2, b2, N, &cfg);
    cfg.glu_gate = g; /* the backward of gate g on the case's forward */
    refenc_ffn_block_backward(o->dx, o->dW1, c->k.bias ? o->db1 : NULL, o->dW2, c->k.bias ? o->db2 : NULL,
                              pre, dpre, c->dY, c->x, hidden, c->W1, b1, c->W2, N, &cfg);
}

/* the oracle's forward with theta in place of x (0), W1 (1), b1 (2) or W2 (3) */
typedef struct {
    const gcase *c;
    int which;
} fwd_ctx;

static void glu_fwd(const void *p, mpfr_ptr y, mpfr_srcptr th, refenc_mp_ws *ws)
{
    const fwd_ctx *f = p;
    const gcase *c = f->c;
    const mpfr_prec_t pr = mpfr_get_prec(y);
    mpfr_ptr x = refenc_mp_from_d(c->x, N * D, 53), W1 = refenc_mp_from_d(c->W1, F2 * D, 53);
    mpfr_ptr b1 = refenc_mp_from_d(c->b1, F2, 53), W2 = refenc_mp_from_d(c->W2, D * F, 53);
    mpfr_ptr b2 = refenc_mp_from_d(c->b2, D, 53);
    mpfr_ptr z = refenc_mp_alloc(N * F2, pr), ga = refenc_mp_alloc(N * F, pr), h = refenc_mp_alloc(N * F, pr);
    const size_t gate = c->k.gate == REFENC_GLU_GATE_SECOND ? F : 0;
    refenc_mpk_glu_forward_keep(y, z, ga, h, f->which == 0 ? th : x, f->which == 1 ? th : W1,
                                c->k.bias ? (f->which == 2 ? th : b1) : NULL, f->which == 3 ? th : W2,
                                c->k.bias ? b2 : NULL, N, D, F, gate, c->k.act, ws);
    refenc_mp_free(z, N * F2), refenc_mp_free(ga, N * F), refenc_mp_free(h, N * F);
    refenc_mp_free(x, N * D), refenc_mp_free(W1, F2 * D), refenc_mp_free(b1, F2);
    refenc_mp_free(W2, D * F), refenc_mp_free(b2, D);
}

/* the identity along each tensor with the gradients o; returns the violations */
static size_t identities(const gcase *c, const grads *o, gsl_rng *r, test_worst *w)
{
    const double *th[4] = {c->x, c->W1, c->b1, c->W2}, *g[4] = {o->dx, o->dW1, o->db1, o->dW2};
    const size_t n[4] = {N * D, F2 * D, F2, D * F};
    static const char *const names[4] = {"glu dx", "glu dW1", "glu db1", "glu dW2"};
    double v[F2 * D];
    size_t bad = 0;
    for (int k = 0; k < 4; k++) {
        if (k == 2 && !c->k.bias)
            continue;
        test_fill_gaussian(v, n[k], 0.0, 1.0, r);
        const fwd_ctx f = {c, k};
        const ad_problem pb = {glu_fwd, &f, th[k], v, c->dY, n[k], N * D};
        bad += ad_check(&pb, g[k], w, names[k]);
    }
    return bad;
}

static refenc_glu_gate other(refenc_glu_gate g)
{
    return g == REFENC_GLU_GATE_FIRST ? REFENC_GLU_GATE_SECOND : REFENC_GLU_GATE_FIRST;
}

Test(oracle_adjoint, gated_ffn_every_gate_and_activation)
{
    gsl_rng *r = test_rng(2630);
    test_worst w, wc;
    test_worst_init(&w), test_worst_init(&wc);
    size_t bad = 0, caught = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        gcase c;
        gcase_fill(&c, kinds[k], r);
        grads o, ob;
        twin(&o, &c, c.k.gate);
        bad += identities(&c, &o, r, &w);
        twin(&ob, &c, other(c.k.gate)); /* control */
        caught += identities(&c, &ob, r, &wc) > 0;
    }
    char msg[512];
    cr_log_info("gated FFN: %s", test_worst_describe(&w, msg, sizeof msg));
    cr_expect_eq(bad, 0, "%zu violations; %s", bad, test_worst_describe(&w, msg, sizeof msg));
    cr_expect_eq(caught, 3, "the other gate kept the identity in %zu of 3", 3 - caught);
    gsl_rng_free(r);
}

/* elements of got outside certify's F64 gradient policy around want */
static size_t policy(test_worst *w, const double *got, const double *want, size_t n, const char *name)
{
    double M = 0;
    for (size_t i = 0; i < n; i++)
        M = fmax(M, fabs(want[i]));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !test_worst_check(w, got[i], want[i], REFENC_GRAD_RTOL * fabs(want[i]) + REFENC_GRAD_ATOL * M,
                                 "%s[%zu]", name, i);
    return bad;
}

static size_t compare(test_worst *w, const grads *a, const grads *o, int bias)
{
    size_t bad = policy(w, a->dx, o->dx, N * D, "dx") + policy(w, a->dW1, o->dW1, F2 * D, "dW1") +
                 policy(w, a->dW2, o->dW2, D * F, "dW2");
    if (bias)
        bad += policy(w, a->db1, o->db1, F2, "db1") + policy(w, a->db2, o->db2, D, "db2");
    return bad;
}

Test(grad_oracle, gated_ffn_reference_within_the_f64_gradient_policy)
{
    gsl_rng *r = test_rng(2611);
    test_worst w, wc;
    test_worst_init(&w), test_worst_init(&wc);
    size_t bad = 0, caught = 0;
    for (int rep = 0; rep < 4; rep++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            gcase c;
            gcase_fill(&c, kinds[k], r);
            grads o, a, ab;
            twin(&o, &c, c.k.gate);
            reference(&a, &c, c.k.gate);
            bad += compare(&w, &a, &o, c.k.bias);
            reference(&ab, &c, other(c.k.gate)); /* control */
            caught += compare(&wc, &ab, &o, c.k.bias) > 0;
        }
    char msg[512];
    cr_log_info("gated FFN: %s", test_worst_describe(&w, msg, sizeof msg));
    cr_expect_eq(bad, 0, "%zu outside; %s", bad, test_worst_describe(&w, msg, sizeof msg));
    cr_expect_eq(caught, 12, "the other gate's backward passed in %zu of 12", 12 - caught);
    gsl_rng_free(r);
}
