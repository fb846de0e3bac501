/* The oracle's own adjoint identity <dY, J v> = <J^T dY, v>: J^T dY is the
 * oracle's backward (its correctly rounded doubles g), J v a central
 * difference of the oracle's forward kernels (refenc_mpk_*) evaluated in
 * MPFR at AD_PREC bits, at points theta + t v that are exact there.
 *
 * With phi(t) = <dY, f(theta + t v)> (one correctly rounded dot product of
 * the MPFR outputs with dY) and D(h) = (phi(h) - phi(-h)) / (2h):
 *   truncation  D(h/2) - phi'(0) = (D(h) - D(h/2))/3 - c5 h^4/4 + ..., so
 *               |D(h/2) - phi'| <= (2/3)|D(h) - D(h/2)| under the scheme's
 *               assumption (docs/gradients.md) that the h^4 term is below
 *               the h^2 term -- at h = 2^-100 (its coefficients would have
 *               to exceed 2^200 times the h^2 one to break it).
 *   rounding    phi at AD_PREC and at 2 AD_PREC: their difference bounds
 *               the error of the first (Ziv's estimate, as the oracle
 *               certifies); each D is taken at 2 AD_PREC and charged twice
 *               that difference divided by its step.
 * The left side a = <g, v> is summed exactly (MPFR, 4096 bits); each g_i is
 * within u |g_i| (1 + 2u) of the exact gradient, so
 *   |a - phi'(0)| <= u (1 + 2u) sum |g_i v_i| = ea,
 * and the check is |a - D(h/2)| <= ea + the two budgets above.  The FD
 * terms are some 2^-150 of ea: the identity is checked at the level of the
 * oracle's own rounding to double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/oracle/backward.h"
#include "../../ref/oracle/internal.h"
#include "oracle_adjoint.h"

#define AD_PREC ((mpfr_prec_t)1024)
#define AD_H (-100) /* h = 2^-100 */

/* phi(t), t = 2^e or -2^e (sign s), at precision p. */
static void phi(mpfr_ptr out, const ad_problem *pb, int s, long e, mpfr_prec_t p)
{
    refenc_mp_ws ws;
    cr_assert_eq(refenc_mp_ws_alloc(&ws, p, 512, 128), 0);
    mpfr_ptr th = refenc_mp_alloc(pb->n, p), y = refenc_mp_alloc(pb->ny, p);
    mpfr_ptr dY = refenc_mp_from_d(pb->dY, pb->ny, 53), t = refenc_mp_alloc(1, p);
    cr_assert(th && y && dY && t);
    for (size_t i = 0; i < pb->n; i++) { /* theta + t v, exact at p */
        mpfr_set_d(t, pb->v[i], MPFR_RNDN);
        mpfr_mul_2si(t, t, e, MPFR_RNDN);
        if (s < 0)
            mpfr_neg(t, t, MPFR_RNDN);
        cr_assert_eq(mpfr_set_d(th + i, pb->theta[i], MPFR_RNDN), 0);
        cr_assert_eq(mpfr_add(th + i, th + i, t, MPFR_RNDN), 0, "theta + t v not exact");
    }
    pb->forward(pb->ctx, y, th, &ws);
    mpfr_set_zero(out, 1);
    for (size_t i = 0; i < pb->ny; i++)
        if (mpfr_number_p(y + i) && !mpfr_zero_p(dY + i)) /* masked outputs: dY 0 */
            mpfr_fma(out, y + i, dY + i, out, MPFR_RNDN);
    refenc_mp_free(t, 1);
    refenc_mp_free(dY, pb->ny);
    refenc_mp_free(y, pb->ny);
    refenc_mp_free(th, pb->n);
    refenc_mp_ws_free(&ws);
}

/* D(h) at precision p into d, h = 2^e. */
static void central(mpfr_ptr d, const ad_problem *pb, long e, mpfr_prec_t p)
{
    mpfr_t a;
    mpfr_init2(a, p);
    phi(d, pb, 1, e, p);
    phi(a, pb, -1, e, p);
    mpfr_sub(d, d, a, MPFR_RNDN);
    mpfr_div_2si(d, d, e + 1, MPFR_RNDN);
    mpfr_clear(a);
}

size_t ad_check(const ad_problem *pb, const double *g, test_worst *w, const char *what)
{
    const mpfr_prec_t P = AD_PREC, P2 = 2 * AD_PREC;
    mpfr_t d1, d2, d1lo, d2lo, t, a, ea;
    mpfr_inits2(P2, d1, d2, d1lo, d2lo, t, (mpfr_ptr)0);
    mpfr_inits2(4096, a, ea, (mpfr_ptr)0);
    central(d1, pb, AD_H, P2), central(d2, pb, AD_H - 1, P2);
    central(d1lo, pb, AD_H, P), central(d2lo, pb, AD_H - 1, P);
    mpfr_set_zero(a, 1), mpfr_set_zero(ea, 1);
    for (size_t i = 0; i < pb->n; i++) { /* <g, v> exactly, and sum |g v| */
        mpfr_set_d(t, g[i], MPFR_RNDN);
        mpfr_mul_d(t, t, pb->v[i], MPFR_RNDN); /* exact: 106 bits at P2 */
        mpfr_add(a, a, t, MPFR_RNDN);
        mpfr_abs(t, t, MPFR_RNDN);
        mpfr_add(ea, ea, t, MPFR_RNDN);
    }
    mpfr_mul_d(ea, ea, 0x1p-53 * (1.0 + 0x1p-52), MPFR_RNDU);
    /* the budget: ea + (2/3)|d1 - d2| + 2 (|d1 - d1lo| + |d2 - d2lo|) */
    mpfr_sub(t, d1, d2, MPFR_RNDN), mpfr_abs(t, t, MPFR_RNDN), mpfr_mul_d(t, t, 2.0 / 3.0, MPFR_RNDU);
    mpfr_add(ea, ea, t, MPFR_RNDU);
    mpfr_sub(t, d1, d1lo, MPFR_RNDN), mpfr_abs(t, t, MPFR_RNDN), mpfr_mul_2ui(t, t, 1, MPFR_RNDN);
    mpfr_add(ea, ea, t, MPFR_RNDU);
    mpfr_sub(t, d2, d2lo, MPFR_RNDN), mpfr_abs(t, t, MPFR_RNDN), mpfr_mul_2ui(t, t, 1, MPFR_RNDN);
    mpfr_add(ea, ea, t, MPFR_RNDU);
    mpfr_sub(a, a, d2, MPFR_RNDN);
    mpfr_abs(a, a, MPFR_RNDN);
    const int ok = mpfr_lessequal_p(a, ea);
    /* the worst comparison, in doubles: got <g, v> - D, want 0, tol the budget */
    test_worst_check(w, mpfr_get_d(a, MPFR_RNDN), 0.0, mpfr_get_d(ea, MPFR_RNDD), "%s", what);
    mpfr_clears(d1, d2, d1lo, d2lo, t, a, ea, (mpfr_ptr)0);
    return ok ? 0 : 1;
}

/* ---- the kernels ------------------------------------------------------------ */

#define PREC REFENC_MP_PREC_DEFAULT

static void fill(double *x, size_t n, gsl_rng *r) { test_fill_gaussian(x, n, 0.0, 1.0, r); }

static mpfr_ptr conv(const double *x, size_t n) { return refenc_mp_from_d(x, n, 53); }

/* linear: theta is x (which 0), W (1) or b (2) */
typedef struct {
    const double *x, *W, *b;
    size_t N, in, out;
    int which;
} lin_ctx;

static void lin_fwd(const void *c_, mpfr_ptr y, mpfr_srcptr th, refenc_mp_ws *ws)
{
    const lin_ctx *c = c_;
    mpfr_ptr x = conv(c->x, c->N * c->in), W = conv(c->W, c->out * c->in), b = conv(c->b, c->out);
    refenc_mpk_linear_forward(y, c->which == 0 ? th : x, c->which == 1 ? th : W,
                              c->which == 2 ? th : b, c->N, c->in, c->out, ws);
    refenc_mp_free(x, c->N * c->in), refenc_mp_free(W, c->out * c->in), refenc_mp_free(b, c->out);
}

size_t ad_linear(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { N = 4, IN = 3, OUT = 5 };
    double x[N * IN], W[OUT * IN], b[OUT], dY[N * OUT], v[OUT * IN + N * IN];
    double dx[N * IN], dW[OUT * IN] = {0}, db[OUT] = {0};
    fill(x, N * IN, r), fill(W, OUT * IN, r), fill(b, OUT, r), fill(dY, N * OUT, r);
    fill(v, OUT * IN + N * IN, r);
    if (K == NULL)
        cr_assert_eq(refenc_mp_linear_backward(dx, dW, db, dY, x, W, N, IN, OUT, PREC, NULL), 0);
    else
        K->linear(dx, dW, db, dY, x, W, N, IN, OUT);
    size_t bad = 0;
    const double *th[3] = {x, W, b}, *g[3] = {dx, dW, db};
    const size_t n[3] = {N * IN, OUT * IN, OUT};
    static const char *const names[3] = {"linear dx", "linear dW", "linear db"};
    for (int k = 0; k < 3; k++) {
        const lin_ctx c = {x, W, b, N, IN, OUT, k};
        const ad_problem pb = {lin_fwd, &c, th[k], v, dY, n[k], N * OUT};
        bad += ad_check(&pb, g[k], w, names[k]);
    }
    return bad;
}

/* LayerNorm: theta is x (0), gamma (1) or beta (2) */
typedef struct {
    const double *x, *gamma, *beta;
    size_t N, D;
    double eps;
    int which;
} ln_ctx;

static void ln_fwd(const void *c_, mpfr_ptr y, mpfr_srcptr th, refenc_mp_ws *ws)
{
    const ln_ctx *c = c_;
    mpfr_ptr x = conv(c->x, c->N * c->D), g = conv(c->gamma, c->D), b = conv(c->beta, c->D);
    mpfr_ptr eps = conv(&c->eps, 1);
    refenc_mpk_layernorm_forward(y, c->which == 0 ? th : x, c->which == 1 ? th : g,
                                 c->which == 2 ? th : b, c->N, c->D, eps, ws);
    refenc_mp_free(x, c->N * c->D), refenc_mp_free(g, c->D), refenc_mp_free(b, c->D);
    refenc_mp_free(eps, 1);
}

size_t ad_layernorm(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { N = 3, D = 6 };
    double x[N * D], ga[D], be[D], dY[N * D], v[N * D], dx[N * D], dg[D] = {0}, db[D] = {0};
    fill(x, N * D, r), fill(ga, D, r), fill(be, D, r), fill(dY, N * D, r), fill(v, N * D, r);
    const double eps = 1e-5;
    if (K == NULL)
        cr_assert_eq(refenc_mp_layernorm_backward(dx, dg, db, dY, x, ga, N, D, eps, PREC, NULL), 0);
    else
        K->layernorm(dx, dg, db, dY, x, ga, N, D, eps);
    size_t bad = 0;
    const double *th[3] = {x, ga, be}, *g[3] = {dx, dg, db};
    const size_t n[3] = {N * D, D, D};
    static const char *const names[3] = {"layernorm dx", "layernorm dgamma", "layernorm dbeta"};
    for (int k = 0; k < 3; k++) {
        const ln_ctx c = {x, ga, be, N, D, eps, k};
        const ad_problem pb = {ln_fwd, &c, th[k], v, dY, n[k], N * D};
        bad += ad_check(&pb, g[k], w, names[k]);
    }
    return bad;
}

/* softmax with temperature and masked entries (v = 0 there: -inf stays) */
typedef struct {
    size_t R, n;
    double tau;
} sm_ctx;

static void sm_fwd(const void *c_, mpfr_ptr y, mpfr_srcptr th, refenc_mp_ws *ws)
{
    const sm_ctx *c = c_;
    mpfr_ptr tau = conv(&c->tau, 1);
    refenc_mpk_softmax_forward(y, th, c->R, c->n, tau, ws);
    refenc_mp_free(tau, 1);
}

size_t ad_softmax(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { R = 3, n = 5 };
    double s[R * n], dY[R * n], v[R * n], y[R * n], ds[R * n];
    fill(s, R * n, r), fill(dY, R * n, r), fill(v, R * n, r);
    s[2] = s[n + 4] = -INFINITY, v[2] = v[n + 4] = 0.0;
    const sm_ctx c = {R, n, 0.6};
    if (K == NULL) {
        cr_assert_eq(refenc_mp_softmax_backward(ds, dY, s, R, n, c.tau, PREC, NULL), 0);
    } else {
        cr_assert_eq(refenc_mp_softmax_forward(y, s, R, n, c.tau, PREC, NULL), 0);
        K->softmax(ds, dY, y, R, n, c.tau);
    }
    const ad_problem pb = {sm_fwd, &c, s, v, dY, R * n, R * n};
    return ad_check(&pb, ds, w, "softmax ds");
}

/* attention: theta is q (0), k (1) or v (2); every mask kind */
enum { AB = 2, AH = 2, AL = 3, ADh = 4 };
#define AN (AB * AH * AL * ADh)
#define AW (AB * AH * AL * AL)

typedef struct {
    const double *q, *k, *v;
    const refenc_attn_options *opt;
    int which;
} at_ctx;

static void at_fwd(const void *c_, mpfr_ptr y, mpfr_srcptr th, refenc_mp_ws *ws)
{
    const at_ctx *c = c_;
    mpfr_ptr q = conv(c->q, AN), k = conv(c->k, AN), v = conv(c->v, AN);
    mpfr_ptr P = refenc_mp_alloc(AW, ws->prec);
    void *h = NULL;
    const refenc_mp_attn_options *o = NULL;
    cr_assert(refenc_mp_attn_options_from_d(&h, &o, c->opt, AH, AL));
    refenc_mpk_attention_forward(y, P, c->which == 0 ? th : q, c->which == 1 ? th : k,
                                 c->which == 2 ? th : v, o, AB, AH, AL, ADh, ws);
    refenc_mp_attn_options_free(h);
    refenc_mp_free(P, AW), refenc_mp_free(q, AN), refenc_mp_free(k, AN), refenc_mp_free(v, AN);
}

static size_t at_one(const gc_kernels *K, const double *const *qkv, const double *dY,
                     const double *dir, const refenc_attn_options *o, test_worst *w)
{
    double g[3][AN], P[AW], O[AN], dP[AW], dS[AW], Dr[AB * AH * AL];
    if (K == NULL) {
        cr_assert_eq(refenc_mp_attention_backward(g[0], g[1], g[2], NULL, NULL, NULL, dY, qkv[0],
                                                  qkv[1], qkv[2], o, AB, AH, AL, ADh, PREC, NULL), 0);
    } else {
        cr_assert_eq(refenc_mp_attention_forward(O, P, qkv[0], qkv[1], qkv[2], o, AB, AH, AL, ADh,
                                                 PREC, NULL), 0);
        K->attention(g[0], g[1], g[2], dP, dS, Dr, dY, qkv[0], qkv[1], qkv[2], P, O, o, AB, AH,
                     AL, ADh);
    }
    size_t bad = 0;
    static const char *const names[3] = {"attention dq", "attention dk", "attention dv"};
    for (int k = 0; k < 3; k++) {
        const at_ctx c = {qkv[0], qkv[1], qkv[2], o, k};
        const ad_problem pb = {at_fwd, &c, qkv[k], dir, dY, AN, AN};
        bad += ad_check(&pb, g[k], w, names[k]);
    }
    return bad;
}

size_t ad_attention(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    double q[AN], k[AN], v[AN], dY[AN], dir[AN], am[AL * AL], slopes[AH] = {0.5, 0.25};
    fill(q, AN, r), fill(k, AN, r), fill(v, AN, r), fill(dY, AN, r), fill(dir, AN, r);
    fill(am, AL * AL, r);
    am[1] = -INFINITY;
    static const uint8_t pad[AB * AL] = {0, 1, 0, 1, 1, 1};
    static const int64_t pos[AL] = {0, 1, 2};
    const refenc_attn_options opts[] = {
        {.temperature = 1.0},
        {.causal = 1, .temperature = 0.7},
        {.key_padding_mask = pad, .temperature = 1.0},
        {.attn_mask = am, .alibi_slopes = slopes, .positions = pos, .temperature = 1.0},
    };
    const double *const qkv[3] = {q, k, v};
    size_t bad = 0;
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        bad += at_one(K, qkv, dY, dir, &opts[i], w);
    return bad;
}

/* RoPE, both layouts */
typedef struct {
    const int64_t *pos;
    size_t N, L, Dh;
    refenc_rope_layout layout;
} rp_ctx;

static void rp_fwd(const void *c_, mpfr_ptr y, mpfr_srcptr th, refenc_mp_ws *ws)
{
    const rp_ctx *c = c_;
    const double b = 10000.0;
    mpfr_ptr base = conv(&b, 1);
    refenc_mpk_rope_forward(y, th, c->pos, c->N, c->L, c->Dh, base, c->layout, NULL, ws);
    refenc_mp_free(base, 1);
}

size_t ad_rope(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { N = 2, L = 3, Dh = 4, n = N * L * Dh };
    static const int64_t pos[L] = {0, 5, 1000};
    double x[n], dY[n], v[n], dx[n];
    fill(x, n, r), fill(dY, n, r), fill(v, n, r);
    size_t bad = 0;
    for (int lay = 0; lay < 2; lay++) {
        const rp_ctx c = {pos, N, L, Dh, lay ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF};
        if (K == NULL)
            cr_assert_eq(refenc_mp_rope_backward(dx, dY, pos, N, L, Dh, 10000.0, c.layout, PREC, NULL), 0);
        else
            K->rope(dx, dY, pos, N, L, Dh, 10000.0, c.layout);
        const ad_problem pb = {rp_fwd, &c, x, v, dY, n, n};
        bad += ad_check(&pb, dx, w, lay ? "rope dx interleaved" : "rope dx half");
    }
    return bad;
}

/* the five activations */
static void ac_fwd(const void *c_, mpfr_ptr y, mpfr_srcptr th, refenc_mp_ws *ws)
{
    const refenc_activation *act = c_;
    refenc_mpk_activation_forward(y, th, 8, *act, ws);
}

size_t ad_activation(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { n = 8 };
    static const refenc_activation acts[5] = {REFENC_ACT_RELU, REFENC_ACT_GELU, REFENC_ACT_GELU_TANH,
                                              REFENC_ACT_QUICK_GELU, REFENC_ACT_SILU};
    static const char *const names[5] = {"relu dx", "gelu dx", "gelu_tanh dx", "quick_gelu dx", "silu dx"};
    double x[n], dY[n], v[n], dx[n];
    fill(x, n, r), fill(dY, n, r), fill(v, n, r);
    size_t bad = 0;
    for (int a = 0; a < 5; a++) {
        if (K == NULL)
            cr_assert_eq(refenc_mp_activation_backward(dx, dY, x, n, acts[a], PREC, NULL), 0);
        else
            K->activation(dx, dY, x, n, acts[a]);
        const ad_problem pb = {ac_fwd, &acts[a], x, v, dY, n, n};
        bad += ad_check(&pb, dx, w, names[a]);
    }
    return bad;
}

/* the token embedding (x sqrt D), theta the table; repeated tokens */
typedef struct {
    const int64_t *tok;
    size_t B, L, D;
} em_ctx;

static void em_fwd(const void *c_, mpfr_ptr y, mpfr_srcptr th, refenc_mp_ws *ws)
{
    const em_ctx *c = c_;
    refenc_mpk_embedding_forward(y, NULL, c->tok, th, c->B, c->L, c->D, REFENC_NORMALIZER_EXACT, ws);
}

size_t ad_embedding(const gc_kernels *K, gsl_rng *r, test_worst *w)
{
    enum { B = 2, L = 3, V = 4, D = 3 };
    static const int64_t tok[B * L] = {1, 3, 1, 1, 0, 3};
    double table[V * D], dY[B * L * D], v[V * D], dt[V * D] = {0};
    fill(table, V * D, r), fill(dY, B * L * D, r), fill(v, V * D, r);
    if (K == NULL)
        cr_assert_eq(refenc_mp_embedding_backward(dt, dY, tok, B, L, V, D, 1, PREC, NULL), 0);
    else
        K->embedding(dt, dY, tok, B, L, V, D);
    const em_ctx c = {tok, B, L, D};
    const ad_problem pb = {em_fwd, &c, table, v, dY, V * D, B * L * D};
    return ad_check(&pb, dt, w, "embedding dtable");
}
