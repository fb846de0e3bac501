/* Accuracy of every reference operation against the oracle, checked
 * elementwise against the derived bounds of docs/error-bounds.md
 * (bounds.c), on random and on ill-conditioned inputs. */
#include <math.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "acc_common.h"

/* ---- linear ---- */
Test(accuracy_linear, within_gamma_n_of_the_absolute_sum)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(101);
    const size_t ins[] = {1, 7, 64, 129, 256}, N = 3, out = 5;
    for (size_t c = 0; c < 5; c++)
        for (int bias = 0; bias < 2; bias++)
            for (int cancel = 0; cancel < 2; cancel++) {
                const size_t in = ins[c];
                double *x = acc_randn(N * in, 0.3, 1.7, r), *W = acc_randn(out * in, 0, 0.5, r);
                double *b = bias ? acc_randn(out, 0, 0.1, r) : NULL;
                if (cancel && in > 1) /* the last weight makes row 0's sum nearly cancel */
                    for (size_t o = 0; o < out; o++) {
                        double s = 0;
                        for (size_t k = 0; k + 1 < in; k++)
                            s += x[k] * W[o * in + k];
                        W[o * in + in - 1] = -s / x[in - 1];
                    }
                double *y = acc_zeros(N * out), *yo = acc_zeros(N * out), *E = acc_zeros(N * out);
                refenc_linear_forward(y, x, W, b, N, in, out);
                MP_OK(refenc_mp_linear_forward(yo, x, W, b, N, in, out, P0, REP));
                bnd_linear(E, x, NULL, W, b, y, N, in, out);
                acc_check(&a, "y", y, yo, E, N * out);
                free(x), free(W), free(b), free(y), free(yo), free(E);
            }
    gsl_rng_free(r);
    acc_finish(&a, "linear");
}

/* ---- LayerNorm ---- */
static void layernorm_case(acc_stats *a, size_t N, size_t D, double mean, double sd, double eps,
                           gsl_rng *r)
{
    double *x = acc_randn(N * D, mean, sd, r), *g = acc_randn(D, 1, 0.1, r);
    double *b = acc_randn(D, 0, 0.1, r);
    double *y = acc_zeros(N * D), *yo = acc_zeros(N * D), *E = acc_zeros(N * D);
    refenc_layernorm_forward(y, x, g, b, N, D, eps);
    MP_OK(refenc_mp_layernorm_forward(yo, x, g, b, N, D, eps, P0, REP));
    cr_assert(bnd_layernorm(E, x, NULL, g, b, y, N, D, eps), "bound not applicable");
    acc_check(a, "y", y, yo, E, N * D);
    free(x), free(g), free(b), free(y), free(yo), free(E);
}

Test(accuracy_layernorm, random_rows)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(102);
    const size_t Ds[] = {1, 2, 7, 64, 100};
    for (size_t c = 0; c < 5; c++) {
        layernorm_case(&a, 4, Ds[c], 0.3, 1.7, 1e-5, r);
        layernorm_case(&a, 4, Ds[c], -2.385, 0.01, 1e-12, r);
    }
    gsl_rng_free(r);
    acc_finish(&a, "layernorm (random rows)");
}

/* the bias-free LayerNorm (beta NULL, ModernBERT's norm_bias=False): the same
 * bound (bnd_layernorm reads no beta), and bit for bit the LayerNorm with
 * beta = 0 wherever that is not -0 + 0 */
Test(accuracy_layernorm, bias_free_rows)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(105);
    const size_t N = 4, Ds[] = {1, 7, 64};
    for (size_t c = 0; c < 3; c++) {
        const size_t D = Ds[c];
        double *x = acc_randn(N * D, 0.3, 1.7, r), *g = acc_randn(D, 1, 0.1, r), *z = acc_zeros(D);
        double *y = acc_zeros(N * D), *yo = acc_zeros(N * D), *E = acc_zeros(N * D), *y0 = acc_zeros(N * D);
        refenc_layernorm_forward(y, x, g, NULL, N, D, 1e-5);
        MP_OK(refenc_mp_layernorm_forward(yo, x, g, NULL, N, D, 1e-5, P0, REP));
        cr_assert(bnd_layernorm(E, x, NULL, g, NULL, y, N, D, 1e-5), "bound not applicable");
        acc_check(&a, "y", y, yo, E, N * D);
        refenc_layernorm_forward(y0, x, g, z, N, D, 1e-5);
        for (size_t i = 0; i < N * D; i++)
            cr_expect(y[i] == y0[i], "D %zu, y[%zu]: bias-free %.17g, beta = 0 %.17g", D, i, y[i], y0[i]);
        free(x), free(g), free(z), free(y), free(yo), free(E), free(y0);
    }
    gsl_rng_free(r);
    acc_finish(&a, "layernorm (bias-free)");
}

Test(accuracy_layernorm, large_mean_small_variance_rows)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(103);
    layernorm_case(&a, 4, 64, 1e4, 1e-3, 1e-5, r);   /* 7 digits of cancellation */
    layernorm_case(&a, 4, 100, 1e8, 1.0, 1e-12, r);
    layernorm_case(&a, 4, 7, -3e5, 0.37, 1e-5, r);
    gsl_rng_free(r);
    acc_finish(&a, "layernorm (large mean, small var)");
}

/* ---- RMSNorm ---- */
static void rmsnorm_case(acc_stats *a, size_t N, size_t D, double mean, double sd, double eps,
                         int offset, gsl_rng *r)
{
    double *x = acc_randn(N * D, mean, sd, r), *w = acc_randn(D, offset ? 0 : 1, 0.1, r);
    double *y = acc_zeros(N * D), *yo = acc_zeros(N * D), *E = acc_zeros(N * D);
    refenc_rmsnorm_forward(y, x, w, N, D, eps, offset);
    MP_OK(refenc_mp_rmsnorm_forward(yo, x, w, N, D, eps, offset, P0, REP));
    cr_assert(bnd_rmsnorm(E, x, NULL, w, offset, y, N, D, eps), "bound not applicable");
    acc_check(a, "y", y, yo, E, N * D);
    free(x), free(w), free(y), free(yo), free(E);
}

/* Both scales, T5's eps 1e-6, eps 0, a large mean (RMSNorm does not subtract
 * it: no cancellation, the bound stays a few u), tiny rows where eps
 * dominates. */
Test(accuracy_rmsnorm, random_rows_both_scales)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(104);
    const size_t Ds[] = {1, 2, 7, 64, 100};
    for (size_t c = 0; c < 5; c++)
        for (int offset = 0; offset < 2; offset++) {
            rmsnorm_case(&a, 4, Ds[c], 0.3, 1.7, 1e-6, offset, r);
            rmsnorm_case(&a, 4, Ds[c], -2.385, 0.01, 0.0, offset, r);
            rmsnorm_case(&a, 4, Ds[c], 1e4, 1e-3, 1e-5, offset, r);
            rmsnorm_case(&a, 4, Ds[c], 0.0, 1e-3, 1e-5, offset, r);
        }
    gsl_rng_free(r);
    acc_finish(&a, "rmsnorm (random rows)");
}

/* ---- softmax ---- */
static void softmax_case(acc_stats *a, size_t R, size_t n, double sd, double tau, double masked,
                         gsl_rng *r)
{
    double *s = acc_randn(R * n, 0.5, sd, r);
    for (size_t i = 0; i < R * n; i++)
        if (gsl_rng_uniform(r) < masked)
            s[i] = -INFINITY;
    if (masked > 0)
        for (size_t i = 0; i < n; i++)
            s[i] = -INFINITY; /* row 0 fully masked */
    double *y = acc_zeros(R * n), *yo = acc_zeros(R * n), *E = acc_zeros(R * n);
    refenc_softmax_forward(y, s, R, n, tau);
    MP_OK(refenc_mp_softmax_forward(yo, s, R, n, tau, P0, REP));
    bnd_softmax(E, s, y, R, n, tau);
    acc_check(a, "y", y, yo, E, R * n);
    free(s), free(y), free(yo), free(E);
}

Test(accuracy_softmax, random_and_masked_logits)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(104);
    const size_t ns[] = {1, 5, 33};
    for (size_t c = 0; c < 3; c++) {
        softmax_case(&a, 4, ns[c], 3.0, 1.0, 0.0, r);
        softmax_case(&a, 4, ns[c], 3.0, 0.37, 0.25, r);
        softmax_case(&a, 4, ns[c], 1.0, 2.385, 0.25, r);
    }
    gsl_rng_free(r);
    acc_finish(&a, "softmax (random, masked)");
}

Test(accuracy_softmax, logits_in_the_hundreds)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(105);
    softmax_case(&a, 6, 17, 300.0, 1.0, 0.0, r);
    softmax_case(&a, 6, 17, 30.0, 0.37, 0.1, r);
    gsl_rng_free(r);
    acc_finish(&a, "softmax (large logits)");
}

/* ---- activations ---- */
static void activation_case(acc_stats *a, refenc_activation act, const char *name)
{
    enum { NG = 648, NR = 1000, N = NG + NR };
    double *x = acc_zeros(N), *y = acc_zeros(N), *yo = acc_zeros(N), *E = acc_zeros(N);
    for (size_t i = 0; i < NG; i++)
        x[i] = -12.0 + 0.0371 * (double)i; /* a grid over [-12, 12] */
    gsl_rng *r = test_rng(106);
    test_fill_gaussian(x + NG, NR, 0.0, 3.0, r);
    for (size_t i = NG; i < N; i++)
        x[i] = fmax(-12.0, x[i]);
    x[0] = 0.0, x[1] = -0.0, x[2] = 1e-300, x[3] = -1e-300;
    refenc_activation_forward(y, x, N, act);
    MP_OK(refenc_mp_activation_forward(yo, x, N, act, P0, REP));
    bnd_activation(E, x, NULL, y, N, act);
    acc_check(a, "y", y, yo, E, N);
    free(x), free(y), free(yo), free(E);
    gsl_rng_free(r);
    acc_finish(a, name);
}

Test(accuracy_activation, relu_is_exact)
{
    acc_stats a;
    acc_init(&a);
    activation_case(&a, REFENC_ACT_RELU, "activation relu");
    cr_assert_eq(a.max_ulps, 0.0);
}

Test(accuracy_activation, gelu)
{
    acc_stats a;
    acc_init(&a);
    activation_case(&a, REFENC_ACT_GELU, "activation gelu");
}

Test(accuracy_activation, gelu_tanh)
{
    acc_stats a;
    acc_init(&a);
    activation_case(&a, REFENC_ACT_GELU_TANH, "activation gelu_tanh");
}

Test(accuracy_activation, quick_gelu)
{
    acc_stats a;
    acc_init(&a);
    activation_case(&a, REFENC_ACT_QUICK_GELU, "activation quick_gelu");
}

Test(accuracy_activation, silu)
{
    acc_stats a;
    acc_init(&a);
    activation_case(&a, REFENC_ACT_SILU, "activation silu");
}

/* ---- positional encodings, embedding ---- */
static const int64_t POS[] = {0, 1, 2, 3, 5, 17, 31, 100, 1000, 4097, 8190, 8191};
#define NPOS (sizeof POS / sizeof POS[0])

Test(accuracy_pe, sinusoidal_angle_up_to_position_8191)
{
    acc_stats a;
    acc_init(&a);
    const size_t Ds[] = {2, 6, 64, 512};
    for (size_t c = 0; c < 4; c++) {
        const size_t D = Ds[c], n = NPOS * D / 2;
        double *ang = acc_zeros(n), *E = acc_zeros(n), *ango = acc_zeros(n);
        bnd_sinusoidal_angles(ang, E, POS, NPOS, D);
        MP_OK(refenc_mp_sinusoidal_angles(ango, POS, NPOS, D, P0, REP));
        acc_check(&a, "angle", ang, ango, E, n);
        free(ang), free(E), free(ango);
    }
    acc_finish(&a, "sinusoidal angle");
}

Test(accuracy_pe, sinusoidal_table_and_forward)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(107);
    const size_t Ds[] = {2, 6, 64};
    for (size_t c = 0; c < 3; c++) {
        const size_t D = Ds[c], n = NPOS * D, B = 2;
        double *pe = acc_zeros(n), *peo = acc_zeros(n), *E = acc_zeros(n);
        refenc_sinusoidal_table(pe, POS, NPOS, D);
        MP_OK(refenc_mp_sinusoidal_table(peo, POS, NPOS, D, P0, REP));
        bnd_sinusoidal_table(E, POS, NPOS, D);
        acc_check(&a, "table", pe, peo, E, n);
        double *x = acc_randn(B * n, 0.3, 1.7, r), *y = acc_zeros(B * n), *yo = acc_zeros(B * n);
        double *Ey = acc_zeros(B * n);
        refenc_sinusoidal_forward(y, x, POS, B, NPOS, D);
        MP_OK(refenc_mp_sinusoidal_forward(yo, x, POS, B, NPOS, D, P0, REP));
        for (size_t i = 0; i < B * n; i++)
            Ey[i] = E[i % n] + BOUND_U * fabs(y[i]);
        acc_check(&a, "forward", y, yo, Ey, B * n);
        free(pe), free(peo), free(E), free(x), free(y), free(yo), free(Ey);
    }
    gsl_rng_free(r);
    acc_finish(&a, "sinusoidal table and forward");
}

Test(accuracy_pe, rope_angle_and_rotation_both_layouts)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(108);
    const size_t Dhs[] = {2, 8, 64};
    const double bases[] = {10000.0, 500000.0};
    for (size_t c = 0; c < 3; c++)
        for (size_t bi = 0; bi < 2; bi++) {
            const size_t Dh = Dhs[c], N = 3, n = NPOS * Dh / 2;
            double *ang = acc_zeros(n), *E = acc_zeros(n), *ango = acc_zeros(n);
            bnd_rope_angles(ang, E, POS, NPOS, Dh, bases[bi]);
            MP_OK(refenc_mp_rope_angles(ango, POS, NPOS, Dh, bases[bi], P0, REP));
            acc_check(&a, "angle", ang, ango, E, n);
            for (int layout = 0; layout < 2; layout++) {
                const size_t m = N * NPOS * Dh;
                double *x = acc_randn(m, 0, 1.3, r), *y = acc_zeros(m), *yo = acc_zeros(m);
                double *Ey = acc_zeros(m);
                refenc_rope_forward(y, x, POS, N, NPOS, Dh, bases[bi], (refenc_rope_layout)layout);
                MP_OK(refenc_mp_rope_forward(yo, x, POS, N, NPOS, Dh, bases[bi],
                                             (refenc_rope_layout)layout, P0, REP));
                bnd_rope(Ey, x, NULL, POS, N, NPOS, Dh, bases[bi], (refenc_rope_layout)layout, y);
                acc_check(&a, layout ? "interleaved" : "half", y, yo, Ey, m);
                free(x), free(y), free(yo), free(Ey);
            }
            free(ang), free(E), free(ango);
        }
    gsl_rng_free(r);
    acc_finish(&a, "rope angle and rotation");
}

Test(accuracy_pe, alibi_slopes_within_one_ulp)
{
    acc_stats a;
    acc_init(&a);
    for (size_t H = 1; H <= 24; H++) {
        double m[24], mo[24], E[24];
        refenc_alibi_slopes(m, H);
        MP_OK(refenc_mp_alibi_slopes(mo, H, P0, REP));
        for (size_t h = 0; h < H; h++)
            E[h] = LIBM_ULP_EXP2 * bnd_ulp(m[h]); /* exp2 of an exact argument */
        acc_check(&a, "slopes", m, mo, E, H);
    }
    acc_finish(&a, "alibi slopes");
}

Test(accuracy_pe, embedding_and_learned_pe)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(109);
    const size_t Ds[] = {7, 64}, V = 11, P = 9, B = 2, L = 5;
    for (size_t c = 0; c < 2; c++) {
        const size_t D = Ds[c], n = B * L * D;
        double *table = acc_randn(V * D, 0, 1.0 / sqrt((double)D), r);
        int64_t tokens[10], pos[5] = {8, 0, 3, 3, 1};
        for (size_t i = 0; i < B * L; i++)
            tokens[i] = (int64_t)gsl_rng_uniform_int(r, V);
        double *x = acc_zeros(n), *xo = acc_zeros(n), *E = acc_zeros(n);
        refenc_embedding_forward(x, tokens, table, B, L, V, D, sqrt((double)D));
        MP_OK(refenc_mp_embedding_forward(xo, tokens, table, B, L, V, D, P0, REP));
        for (size_t i = 0; i < n; i++)
            E[i] = bnd_gamma(2) * fabs(x[i]); /* sqrt(D) rounded, one product */
        acc_check(&a, "embedding", x, xo, E, n);
        /* learned PE: one addition, correctly rounded: equal to the oracle */
        double *pt = acc_randn(P * D, 0, 0.5, r), *y = acc_zeros(n), *yo = acc_zeros(n);
        refenc_learned_pe_forward(y, x, pos, pt, B, L, P, D);
        MP_OK(refenc_mp_learned_pe_forward(yo, x, pos, pt, B, L, P, D, P0, REP));
        acc_check(&a, "learned_pe", y, yo, NULL, n);
        free(table), free(x), free(xo), free(E), free(pt), free(y), free(yo);
    }
    gsl_rng_free(r);
    acc_finish(&a, "embedding and learned PE");
}

/* The families' embedding path: the unscaled lookup is a copy and each
 * table row added is one correctly rounded sum, so both equal the oracle;
 * RoBERTa's position ids are integers, equal to the oracle's own count. */
Test(accuracy_pe, embedding_lookup_add_and_roberta_positions)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(111);
    const size_t V = 11, T = 3, D = 13, B = 3, L = 9, n = B * L * D;
    double *table = acc_randn(V * D, 0, 0.02, r), *tt = acc_randn(T * D, 0, 0.02, r);
    int64_t tokens[27], types[27], pos[27], pos_mp[27];
    const int64_t padding_idx = 1;
    for (size_t i = 0; i < B * L; i++) {
        tokens[i] = (int64_t)gsl_rng_uniform_int(r, V);
        types[i] = (int64_t)gsl_rng_uniform_int(r, T);
    }
    tokens[0] = tokens[1] = padding_idx;          /* left padding, item 0 */
    tokens[L + 4] = padding_idx;                  /* a pad between tokens, item 1 */
    tokens[3 * L - 1] = padding_idx;              /* right padding, item 2 */
    double *x = acc_zeros(n), *xo = acc_zeros(n), *y = acc_zeros(n), *yo = acc_zeros(n);
    refenc_embedding_lookup(x, tokens, table, B, L, V, D);
    MP_OK(refenc_mp_embedding_lookup(xo, tokens, table, B, L, V, D, P0, REP));
    acc_check(&a, "lookup", x, xo, NULL, n);
    refenc_embedding_add(y, x, types, tt, B, L, T, D);
    MP_OK(refenc_mp_embedding_add(yo, x, types, tt, B, L, T, D, P0, REP));
    acc_check(&a, "token types", y, yo, NULL, n);

    refenc_position_ids_roberta(pos, tokens, B, L, padding_idx);
    refenc_mpk_position_ids_roberta(pos_mp, tokens, B, L, padding_idx);
    for (size_t i = 0; i < B * L; i++)
        cr_expect_eq(pos[i], pos_mp[i], "position id [%zu][%zu]: reference %lld, oracle %lld",
                     i / L, i % L, (long long)pos[i], (long long)pos_mp[i]);
    /* negative control: the oracle's count disagrees with 0 .. L-1 */
    int differ = 0;
    for (size_t i = 0; i < B * L; i++)
        differ |= pos_mp[i] != (int64_t)(i % L);
    cr_expect(differ, "RoBERTa's positions equal 0 .. L-1");
    free(table), free(tt), free(x), free(xo), free(y), free(yo);
    gsl_rng_free(r);
    acc_finish(&a, "embedding lookup, add");
}

/* ---- attention ---- */
typedef struct {
    const char *name;
    int pad, causal, mask, alibi;
    double tau, qscale;
    refenc_mask_value mask_value;
    double cap, S; /* attn_logit_softcapping, query_pre_attn_scalar: 0, unset */
} attn_case;

static void attention_case(acc_stats *a, const attn_case *c, size_t Dh, gsl_rng *r)
{
    const size_t B = 2, H = 3, L = 7, n = B * H * L * Dh, nw = B * H * L * L;
    double *q = acc_randn(n, 0, c->qscale, r), *k = acc_randn(n, 0, 1, r), *v = acc_randn(n, 0, 1, r);
    uint8_t pad[14] = {0};
    double mask[49], slopes[3];
    int64_t pos[7] = {3, 0, 1, 2, 4, 6, 5};
    if (c->pad) {
        for (size_t l = 0; l < L; l++)
            pad[l] = (uint8_t)(l % 3 == 1);
        for (size_t l = 0; l < L; l++)
            pad[L + l] = 1; /* batch 1: every key padding, masked-row policy */
    }
    for (size_t i = 0; i < L * L; i++)
        mask[i] = i % 5 == 2 ? -INFINITY : gsl_ran_gaussian(r, 1.0);
    /* Under finfo_min a fully masked row's output is the mean of v, whose
     * exact value, for v given as doubles, is often a dyadic number of 54
     * significant bits: a midpoint between two doubles, on which the
     * certified rounding cannot decide (it is the same at every precision
     * and the oracle does not track that it is exact).  v rounded to 24 bits
     * keeps the sums short: such a mean has at most 27 bits, never 54.  In an
     * encoder v comes from the projections and is never a short double. */
    for (size_t i = 0; c->mask_value == REFENC_MASK_FINFO_MIN && i < n; i++)
        v[i] = (double)(float)v[i];
    refenc_alibi_slopes(slopes, H);
    refenc_attn_options opt = {
        .key_padding_mask = c->pad ? pad : NULL, .causal = c->causal,
        .attn_mask = c->mask ? mask : NULL, .alibi_slopes = c->alibi ? slopes : NULL,
        .positions = pos, .temperature = c->tau, .mask_value = c->mask_value,
        .softcap = c->cap, .score_scalar = c->S,
    };
    double *out = acc_zeros(n), *w = acc_zeros(nw), *outo = acc_zeros(n), *wo = acc_zeros(nw);
    double *Eo = acc_zeros(n), *Ew = acc_zeros(nw);
    refenc_attention_forward(out, w, q, k, v, &opt, B, H, L, Dh);
    MP_OK(refenc_mp_attention_forward(outo, wo, q, k, v, &opt, B, H, L, Dh, P0, REP));
    bnd_attention(Eo, Ew, q, NULL, k, NULL, v, NULL, &opt, NULL, w, B, H, L, Dh);
    acc_check(a, "weights", w, wo, Ew, nw);
    acc_check(a, "out", out, outo, Eo, n);
    free(q), free(k), free(v), free(out), free(w), free(outo), free(wo), free(Eo), free(Ew);
}

static const attn_case ATTN_CASES[] = {
    {"plain", 0, 0, 0, 0, 1.0, 1.0, REFENC_MASK_NEG_INF, 0, 0},
    {"padding", 1, 0, 0, 0, 1.0, 1.0, REFENC_MASK_NEG_INF, 0, 0},
    {"causal", 0, 1, 0, 0, 1.0, 1.0, REFENC_MASK_NEG_INF, 0, 0},
    {"attn_mask", 0, 0, 1, 0, 1.0, 1.0, REFENC_MASK_NEG_INF, 0, 0},
    {"alibi+padding", 1, 0, 0, 1, 1.0, 1.0, REFENC_MASK_NEG_INF, 0, 0},
    {"temperature", 0, 1, 1, 1, 0.37, 1.0, REFENC_MASK_NEG_INF, 0, 0},
    {"large logits", 1, 0, 0, 0, 1.0, 40.0, REFENC_MASK_NEG_INF, 0, 0},
    /* finfo_min: batch 1 all padding takes uniform weights 1/7; causal +
     * padding (attention_case rounds v to float there: see its comment) */
    {"padding finfo_min", 1, 0, 0, 0, 1.0, 1.0, REFENC_MASK_FINFO_MIN, 0, 0},
    {"causal padding finfo_min", 1, 1, 0, 0, 1.0, 1.0, REFENC_MASK_FINFO_MIN, 0, 0},
    /* Gemma's soft-cap (before ALiBi, the additive mask and the masks) and
     * score scale, on the twin's own options: scores of scale 3 and 2
     * against caps 1.5 and 0.8 */
    {"softcap alibi mask padding", 1, 1, 1, 1, 1.0, 3.0, REFENC_MASK_NEG_INF, 1.5, 0.6},
    {"softcap causal padding finfo_min", 1, 1, 0, 0, 1.0, 2.0, REFENC_MASK_FINFO_MIN, 0.8, 0},
};

Test(accuracy_attention, every_mask_and_large_logits)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(110);
    for (size_t c = 0; c < sizeof ATTN_CASES / sizeof ATTN_CASES[0]; c++) {
        attention_case(&a, &ATTN_CASES[c], 5, r);
        attention_case(&a, &ATTN_CASES[c], 8, r);
    }
    gsl_rng_free(r);
    acc_finish(&a, "attention");
}

Test(accuracy_attention, multi_head_with_rope_and_alibi)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(111);
    const size_t B = 2, L = 6, D = 12, H = 3, n = B * L * D, nw = B * H * L * L;
    int64_t pos[6];
    for (size_t l = 0; l < L; l++)
        pos[l] = 8191 - (int64_t)l;
    for (int variant = 0; variant < 4; variant++) {
        double *x = acc_randn(n, 0, 1, r), *ipw = acc_randn(3 * D * D, 0, 1 / sqrt(12.0), r);
        double *ipb = acc_randn(3 * D, 0, 0.1, r), *opw = acc_randn(D * D, 0, 1 / sqrt(12.0), r);
        double *opb = acc_randn(D, 0, 0.1, r), slopes[3];
        uint8_t pad[12] = {0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0};
        refenc_alibi_slopes(slopes, H);
        refenc_attn_options opt = {.key_padding_mask = variant == 3 ? pad : NULL,
                                   .causal = variant == 1,
                                   .alibi_slopes = variant == 2 ? slopes : NULL,
                                   .positions = pos, .temperature = 1.0};
        refenc_rope_options rope = {variant == 1 ? REFENC_ROPE_INTERLEAVED : REFENC_ROPE_HALF,
                                    variant == 1 ? 500000.0 : 10000.0, pos, NULL};
        const refenc_rope_options *rp = variant == 0 || variant == 1 ? &rope : NULL;
        bnd_mha_run run;
        bnd_mha_run_alloc(&run, B, L, D, H);
        double *Ey = acc_zeros(n), *Ew = acc_zeros(nw), *yo = acc_zeros(n), *wo = acc_zeros(nw);
        bnd_mha(Ey, Ew, &run, x, NULL, ipw, ipb, opw, opb, &opt, rp, NULL);
        MP_OK(refenc_mp_mha_forward(yo, wo, x, ipw, ipb, opw, opb, &opt, rp, B, L, D, H, P0, REP));
        acc_check(&a, "weights", run.w.weights, wo, Ew, nw);
        acc_check(&a, "y", run.y, yo, Ey, n);
        bnd_mha_run_free(&run);
        free(x), free(ipw), free(ipb), free(opw), free(opb), free(Ey), free(Ew), free(yo), free(wo);
    }
    gsl_rng_free(r);
    acc_finish(&a, "multi-head attention");
}

/* One attention case against the oracle's twin within bnd_mha's bound: x
 * (standard deviation sx), in_proj (H Dh + 2 Hkv Dh rows) and out_proj drawn
 * from r in that order. */
static void attention_vs_oracle(acc_stats *a, gsl_rng *r, double sx, size_t B, size_t L, size_t D, size_t H,
                                size_t Hkv, size_t Dh, const refenc_attn_options *opt,
                                const refenc_rope_options *rp)
{
    const size_t E = H * Dh, R = E + 2 * Hkv * Dh, n = B * L * D, nw = B * H * L * L;
    double *x = acc_randn(n, 0, sx, r), *ipw = acc_randn(R * D, 0, 1 / sqrt((double)D), r);
    double *ipb = acc_randn(R, 0, 0.1, r), *opw = acc_randn(D * E, 0, 1 / sqrt((double)E), r);
    double *opb = acc_randn(D, 0, 0.1, r);
    bnd_mha_run run;
    bnd_gqa_run_alloc(&run, B, L, D, H, Hkv, Dh);
    double *Ey = acc_zeros(n), *Ew = acc_zeros(nw), *yo = acc_zeros(n), *wo = acc_zeros(nw);
    bnd_mha(Ey, Ew, &run, x, NULL, ipw, ipb, opw, opb, opt, rp, NULL);
    MP_OK(refenc_mp_gqa_forward(yo, wo, x, ipw, ipb, opw, opb, opt, rp, B, L, D, H, Hkv, Dh, P0, REP));
    acc_check(a, "weights", run.w.weights, wo, Ew, nw);
    acc_check(a, "y", run.y, yo, Ey, n);
    bnd_mha_run_free(&run);
    free(x), free(ipw), free(ipb), free(opw), free(opb), free(Ey), free(Ew), free(yo), free(wo);
}

/* Grouped-query attention and head_dim against the oracle's twin, which
 * reads key/value head h / g by index instead of repeating: within bnd_mha's
 * bound, whose score terms are dot products of length Dh (head_dim, not
 * D / H) and out_proj's of length E = H Dh. */
Test(accuracy_attention, grouped_query_and_head_dim)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(113);
    const struct { size_t B, L, D, H, Hkv, Dh; int rope; } cs[] = {
        {2, 5, 12, 4, 2, 3, 0}, {1, 6, 10, 4, 2, 4, 1}, {1, 6, 12, 4, 1, 6, 1}, {2, 4, 8, 6, 3, 2, 1}};
    int64_t pos[6];
    for (size_t l = 0; l < 6; l++)
        pos[l] = 4095 - 7 * (int64_t)l;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const refenc_attn_options opt = {.causal = c == 1, .positions = pos, .temperature = 1.0};
        const refenc_rope_options rope = {REFENC_ROPE_HALF, 500000.0, pos, NULL};
        attention_vs_oracle(&a, r, 1, cs[c].B, cs[c].L, cs[c].D, cs[c].H, cs[c].Hkv, cs[c].Dh, &opt,
                            cs[c].rope ? &rope : NULL);
    }
    gsl_rng_free(r);
    acc_finish(&a, "grouped-query attention");
}

/* Gemma 2/3's attention: scores divided by sqrt(query_pre_attn_scalar) tau
 * and soft-capped, cap tanh(s / cap), against the oracle's twin (mpfr_tanh,
 * certified by Ziv's loop) within bnd_mha's bound with the cap's term
 * (bnd_attention: the carried error, u|s| + 5u|y|).  The caps (0.75 to 3) are
 * of the order of the scores, so tanh is far from linear; the scalars are
 * not Dh, and one case has head_dim and grouped-query attention as Gemma. */
Test(accuracy_attention, gemma_softcap_and_query_pre_attn_scalar)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(117);
    const struct { size_t B, L, D, H, Hkv, Dh; int rope, causal; double cap, S; } cs[] = {
        {2, 5, 12, 4, 4, 3, 0, 0, 0.75, 0.3}, {1, 6, 10, 4, 2, 4, 1, 1, 1.5, 7.3},
        {1, 5, 12, 3, 3, 4, 0, 1, 3.0, 0}, {2, 4, 8, 2, 1, 6, 1, 0, 0, 2.385}};
    int64_t pos[6];
    for (size_t l = 0; l < 6; l++)
        pos[l] = 17 + 3 * (int64_t)l;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const refenc_attn_options opt = {.causal = cs[c].causal, .positions = pos, .temperature = 1.0,
                                         .softcap = cs[c].cap, .score_scalar = cs[c].S};
        const refenc_rope_options rope = {REFENC_ROPE_HALF, 10000.0, pos, NULL};
        attention_vs_oracle(&a, r, 1.5, cs[c].B, cs[c].L, cs[c].D, cs[c].H, cs[c].Hkv, cs[c].Dh, &opt,
                            cs[c].rope ? &rope : NULL);
    }
    gsl_rng_free(r);
    acc_finish(&a, "Gemma's softcap and score scale");
}

/* Attention windows (ref/window.h): the causal sliding_window (keys i-w+1
 * .. i) and the symmetric local_attention (|i - j| <= w // 2), with padding
 * on either side, against the oracle's own rule within bnd_mha's bound (a
 * masked key weighs 0 on both sides: no error term).  L 12 with windows of
 * 3 to 5 keys cuts most rows; an odd local_attention (5: w // 2 = 2) and
 * both windows together are rows too.  Control run: the oracle's causal
 * window one key wider (j + w >= i) fails it. */
Test(accuracy_attention, sliding_and_local_windows)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(131);
    const struct { size_t B, H, sw, la; int rope, causal, pad; } cs[] = {
        {2, 2, 4, 0, 1, 1, 1}, {1, 3, 5, 0, 0, 1, 0}, {2, 2, 0, 6, 1, 0, 1},
        {1, 2, 0, 5, 0, 0, 0}, {2, 2, 3, 8, 1, 1, 1}};
    enum { L = 12, D = 12 };
    int64_t pos[L];
    for (size_t l = 0; l < L; l++)
        pos[l] = 5 + 2 * (int64_t)l;
    uint8_t pad[2 * L] = {0};
    for (size_t l = 0; l < 3; l++)
        pad[l] = 1, pad[2 * L - 1 - l] = 1; /* item 0 left-padded, item 1 right-padded */
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const refenc_attn_options opt = {.causal = cs[c].causal, .positions = pos, .temperature = 1.0,
                                         .key_padding_mask = cs[c].pad ? pad : NULL,
                                         .sliding_window = cs[c].sw, .local_attention = cs[c].la};
        const refenc_rope_options rope = {REFENC_ROPE_HALF, 10000.0, pos, NULL};
        attention_vs_oracle(&a, r, 1.5, cs[c].B, L, D, cs[c].H, cs[c].H, D / cs[c].H, &opt,
                            cs[c].rope ? &rope : NULL);
    }
    gsl_rng_free(r);
    acc_finish(&a, "attention windows");
}

/* ---- FFN ---- */
Test(accuracy_ffn, each_activation)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(112);
    const size_t N = 5, D = 12, F = 20;
    for (int act = 0; act <= REFENC_ACT_SILU; act++) {
        double *x = acc_randn(N * D, 0, 1, r), *W1 = acc_randn(F * D, 0, 1 / sqrt(12.0), r);
        double *b1 = acc_randn(F, 0, 0.1, r), *W2 = acc_randn(D * F, 0, 1 / sqrt(20.0), r);
        double *b2 = acc_randn(D, 0, 0.1, r);
        double *y = acc_zeros(N * D), *h = acc_zeros(N * F), *Ey = acc_zeros(N * D);
        double *Eh = acc_zeros(N * F), *yo = acc_zeros(N * D), *ho = acc_zeros(N * F);
        bnd_ffn(Ey, Eh, y, h, x, NULL, W1, b1, W2, b2, N, D, F, (refenc_activation)act);
        double *yr = acc_zeros(N * D), *hr = acc_zeros(N * F);
        refenc_ffn_forward(yr, hr, x, W1, b1, W2, b2, N, D, F, (refenc_activation)act);
        cr_assert(memcmp(yr, y, N * D * sizeof(double)) == 0, "the bound ran another computation");
        MP_OK(refenc_mp_ffn_forward(yo, ho, x, W1, b1, W2, b2, N, D, F, (refenc_activation)act,
                                    P0, REP));
        acc_check(&a, "hidden", h, ho, Eh, N * F);
        acc_check(&a, "y", y, yo, Ey, N * D);
        free(x), free(W1), free(b1), free(W2), free(b2), free(y), free(h), free(Ey), free(Eh);
        free(yo), free(ho), free(yr), free(hr);
    }
    gsl_rng_free(r);
    acc_finish(&a, "ffn");
}

/* ---- gated FFN ---- */
/* GeGLU (exact and tanh), SwiGLU, ReGLU; the gate first ([gate | up]) and
 * second ([up | gate]); against the oracle within bnd_glu. */
Test(accuracy_glu, each_activation_both_gates)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(113);
    const size_t N = 5, D = 12, F = 20;
    const refenc_activation acts[] = {REFENC_ACT_GELU, REFENC_ACT_GELU_TANH, REFENC_ACT_SILU,
                                      REFENC_ACT_RELU};
    for (size_t k = 0; k < 4; k++)
        for (int gate = 0; gate < 2; gate++) {
            double *x = acc_randn(N * D, 0, 1, r), *W1 = acc_randn(2 * F * D, 0, 1 / sqrt(12.0), r);
            double *b1 = acc_randn(2 * F, 0, 0.1, r), *W2 = acc_randn(D * F, 0, 1 / sqrt(20.0), r);
            double *b2 = acc_randn(D, 0, 0.1, r);
            double *y = acc_zeros(N * D), *yo = acc_zeros(N * D), *E = acc_zeros(N * D);
            double *h = acc_zeros(2 * N * F), *ho = acc_zeros(N * F), *hb = acc_zeros(N * F);
            double *yb = acc_zeros(N * D);
            const double *Wg, *bg, *Wu, *bu;
            refenc_glu_halves(&Wg, &bg, &Wu, &bu, W1, b1, D, F, (refenc_glu_gate)gate);
            refenc_glu_forward(y, h, h + N * F, x, Wg, bg, Wu, bu, W2, b2, N, D, F, acts[k]);
            MP_OK(refenc_mp_glu_forward(yo, ho, x, W1, b1, W2, b2, N, D, F, acts[k],
                                        (refenc_glu_gate)gate, P0, REP));
            bnd_glu(E, yb, hb, x, NULL, Wg, bg, Wu, bu, W2, b2, N, D, F, acts[k]);
            cr_assert(memcmp(y, yb, N * D * sizeof(double)) == 0, "the bound followed another computation");
            acc_check(&a, "y", y, yo, E, N * D);
            free(x), free(W1), free(b1), free(W2), free(b2), free(y), free(yo), free(E), free(h),
                free(ho), free(hb), free(yb);
        }
    gsl_rng_free(r);
    acc_finish(&a, "gated ffn");
}

