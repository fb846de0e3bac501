/* RoPE (rope.h) depends on relative positions only, in both layouts.
 *
 * Properties: <R_m q, R_n k> = <R_{m+s} q, R_{n+s} k>; |R_m x| = |x|; R_0 is
 * the identity exactly; R_a R_b = R_{a+b}; in full attention with RoPE,
 * shifting every position by s leaves the attention weights and the output
 * unchanged.
 * Why: R_m is block diagonal with 2x2 rotations by m theta_j, so R_m^T R_n =
 * R_{n-m}, rotations preserve length, and angles add.
 * Exact model: the identities hold for any theta_j, so "exact" uses the
 * frequencies the reference computes and exact angles p theta_j; the
 * computed values are bounded by fb_rope (componentwise) and fb_encoder
 * (attention), see fwdbound.h.  Tolerances are the sums of the two sides'
 * bounds, so they grow with the positions (the angle is rounded relative to
 * its size).
 * Negative controls: q rotated in one layout and k in the other; a product of
 * rotations compared with R_{a-b}; one position shifted differently. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "../common/testutil.h"

static const size_t head_widths[] = {2, 4, 6, 10, 16, 30, 64, 128};
#define N_HW (sizeof head_widths / sizeof head_widths[0])

static const refenc_rope_layout layouts[2] = {REFENC_ROPE_HALF, REFENC_ROPE_INTERLEAVED};

/* y = R_p x for one vector, with componentwise bound ey (exact x). */
static void rotate(double *y, double *ey, const double *x, int64_t p, size_t Dh, double base,
                   refenc_rope_layout layout)
{
    fb_rope(y, ey, x, NULL, &p, 1, 1, Dh, base, layout);
}

/* fl(x . y) and its distance bound to the exact dot of the exact vectors:
 * gamma_n sum |x^ y^| + sum |x^| ey + ex |y^| + ex ey. */
static double dot_bound(double *err, const double *x, const double *ex, const double *y,
                        const double *ey, size_t n)
{
    double d = 0.0, mag = 0.0, prop = 0.0;
    for (size_t i = 0; i < n; i++) {
        d += x[i] * y[i];
        mag += fabs(x[i] * y[i]);
        prop += fabs(x[i]) * ey[i] + ex[i] * fabs(y[i]) + ex[i] * ey[i];
    }
    *err = test_gamma((double)n) * mag + prop;
    return d;
}

static int64_t random_position(gsl_rng *r)
{
    return (int64_t)gsl_rng_uniform_int(r, 4096);
}

/* <R_m q, R_n k> against <R_{m+s} q, R_{n+s} k>, q rotated in layout lq and
 * k in layout lk.  Returns 1 if they differ by more than both bounds. */
static int check_offset(test_worst *w, gsl_rng *r, size_t Dh, double base, refenc_rope_layout lq,
                        refenc_rope_layout lk)
{
    double q[128], k[128], a[128], ea[128], b[128], eb[128];
    test_fill_gaussian(q, Dh, 0.0, 1.0, r);
    test_fill_gaussian(k, Dh, 0.0, 1.0, r);
    const int64_t m = random_position(r), n = random_position(r);
    const int64_t s = 1 + (int64_t)gsl_rng_uniform_int(r, 100000);
    double e1, e2;
    rotate(a, ea, q, m, Dh, base, lq);
    rotate(b, eb, k, n, Dh, base, lk);
    const double d1 = dot_bound(&e1, a, ea, b, eb, Dh);
    rotate(a, ea, q, m + s, Dh, base, lq);
    rotate(b, eb, k, n + s, Dh, base, lk);
    const double d2 = dot_bound(&e2, a, ea, b, eb, Dh);
    return !fb_within(w, d2, e2, d1, e1, "Dh=%zu base=%g layouts %s/%s m=%lld n=%lld s=%lld", Dh,
                      base, refenc_rope_layout_name(lq), refenc_rope_layout_name(lk),
                      (long long)m, (long long)n, (long long)s);
}

Test(rope_relative, score_depends_only_on_offset)
{
    gsl_rng *r = test_rng(301);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 400; t++) {
        const refenc_rope_layout lay = layouts[t % 2];
        const double base = (t / 2) % 2 ? 500000.0 : 10000.0;
        bad += check_offset(&w, r, head_widths[t % N_HW], base, lay, lay);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu scores changed under a common shift: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

/* Negative control: q in one layout, k in the other (Dh >= 4: for Dh = 2 the
 * two layouts are the same pairing).  Each case must be flagged. */
Test(rope_relative, mixed_layouts_break_offset_invariance)
{
    gsl_rng *r = test_rng(302);
    for (size_t t = 0; t < 60; t++) {
        test_worst w;
        test_worst_init(&w);
        const size_t Dh = head_widths[1 + t % (N_HW - 1)];
        cr_assert(check_offset(&w, r, Dh, 10000.0, layouts[t % 2], layouts[(t + 1) % 2]),
                  "negative control: mixed layouts stayed offset-invariant (Dh=%zu, seed %lu)",
                  Dh, test_seed());
    }
    gsl_rng_free(r);
}

/* |fl(|y^|^2) - |y|^2| <= gamma_Dh sum y^^2 + sum (2|y^| ey + ey^2), and
 * |fl(|x|^2) - |x|^2| <= gamma_Dh sum x^2. */
static double sq_norm(double *err, const double *x, const double *ex, size_t n)
{
    double s = 0.0, prop = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += x[i] * x[i];
        if (ex != NULL)
            prop += 2.0 * fabs(x[i]) * ex[i] + ex[i] * ex[i];
    }
    *err = test_gamma((double)n) * s + prop;
    return s;
}

Test(rope_relative, rotation_preserves_norm)
{
    gsl_rng *r = test_rng(303);
    test_worst w, wc;
    test_worst_init(&w);
    test_worst_init(&wc);
    size_t bad = 0, ctrl = 0, n_ctrl = 0;
    char buf[640];
    double x[128], y[128], ey[128];
    for (size_t t = 0; t < 400; t++) {
        const size_t Dh = head_widths[t % N_HW];
        test_fill_gaussian(x, Dh, 0.3, 1.7, r);
        const int64_t p = (int64_t)gsl_rng_uniform_int(r, 1000000);
        rotate(y, ey, x, p, Dh, t % 3 ? 10000.0 : 500000.0, layouts[t % 2]);
        double e0, e1;
        const double n0 = sq_norm(&e0, x, NULL, Dh), n1 = sq_norm(&e1, y, ey, Dh);
        bad += !fb_within(&w, n1, e1, n0, e0, "Dh=%zu p=%lld %s", Dh, (long long)p,
                          refenc_rope_layout_name(layouts[t % 2]));
        /* negative control: the same comparison against an input whose
         * largest coordinate changed by a relative 1e-6 (the norm moves by
         * >= 2e-6 |x|^2 / Dh, far below any layout or sign bug, far above the
         * tolerance, which is < 1e-9 |x|^2 at positions below 10^6) */
        size_t imax = 0;
        for (size_t i = 1; i < Dh; i++)
            if (fabs(x[i]) > fabs(x[imax]))
                imax = i;
        x[imax] *= 1.0 + 1e-6;
        const double nc = sq_norm(&e0, x, NULL, Dh);
        ctrl += !fb_within(&wc, n1, e1, nc, e0, "control");
        n_ctrl++;
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu rotations changed the norm: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_assert_eq(ctrl, n_ctrl, "negative control: %zu of %zu perturbed inputs were not detected",
                 n_ctrl - ctrl, n_ctrl);
}

/* R_0: angle 0 * theta = 0, cos 0 = 1 and sin 0 = 0 exactly, a*1 - b*0 = a:
 * bitwise (== also accepts -0 for +0). */
Test(rope_relative, rotation_at_zero_is_identity)
{
    gsl_rng *r = test_rng(304);
    double x[128], y[128];
    for (size_t t = 0; t < 64; t++) {
        const size_t Dh = head_widths[t % N_HW];
        const refenc_rope_layout lay = layouts[t % 2];
        test_fill_gaussian(x, Dh, 0.0, 2.385, r);
        int64_t p = 0;
        char buf[400];
        refenc_rope_forward(y, x, &p, 1, 1, Dh, 10000.0, lay);
        cr_assert_eq(prop_count_unequal(y, x, Dh, buf, sizeof buf), 0, "R_0 x != x (Dh=%zu, %s): %s",
                     Dh, refenc_rope_layout_name(lay), buf);
        /* negative control: R_1 is not the identity */
        p = 1;
        refenc_rope_forward(y, x, &p, 1, 1, Dh, 10000.0, lay);
        cr_assert_gt(prop_count_unequal(y, x, Dh, NULL, 0), 0,
                     "negative control: R_1 left x unchanged (Dh=%zu)", Dh);
    }
    gsl_rng_free(r);
}

/* R_a (R_b x) against R_{a+c} x with c = b (the property) or c = -b (the
 * negative control, b >= 1).  The first rotation's errors propagate through
 * the second (fb_rope with ex).  Returns 1 if flagged. */
static int check_compose(test_worst *w, gsl_rng *r, size_t Dh, refenc_rope_layout lay, int sign)
{
    double x[128], y[128], ey[128], z[128], ez[128], d[128], ed[128];
    test_fill_gaussian(x, Dh, 0.0, 1.0, r);
    const int64_t a = (int64_t)gsl_rng_uniform_int(r, 50000);
    const int64_t b = 1 + (int64_t)gsl_rng_uniform_int(r, 50000);
    const int64_t c = sign > 0 ? a + b : a - b + 100000; /* keep the position >= 0 */
    rotate(y, ey, x, b, Dh, 10000.0, lay);
    fb_rope(z, ez, y, ey, &a, 1, 1, Dh, 10000.0, lay);
    rotate(d, ed, x, c, Dh, 10000.0, lay);
    size_t bad = 0;
    for (size_t i = 0; i < Dh; i++)
        bad += !fb_within(w, z[i], ez[i], d[i], ed[i], "Dh=%zu %s a=%lld b=%lld i=%zu", Dh,
                          refenc_rope_layout_name(lay), (long long)a, (long long)b, i);
    return bad > 0;
}

Test(rope_relative, rotations_compose)
{
    gsl_rng *r = test_rng(305);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 300; t++)
        bad += check_compose(&w, r, head_widths[t % N_HW], layouts[t % 2], 1);
    cr_assert_eq(bad, 0, "%zu cases with R_a R_b != R_{a+b}: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    /* negative control: R_a R_b against R_{a-b+100000} (a different angle for
     * theta_0 = 1 whenever 2b != 100000 mod 2 pi, i.e. always for integers) */
    for (size_t t = 0; t < 60; t++) {
        test_worst wc;
        test_worst_init(&wc);
        cr_assert(check_compose(&wc, r, head_widths[t % N_HW], layouts[t % 2], -1),
                  "negative control: R_a R_b matched R_{a-b+100000} (seed %lu)", test_seed());
    }
    gsl_rng_free(r);
}

/* Encoder with RoPE on positions p and p + s (or, for the control, with one
 * position moved differently).  Compares the output and every layer's
 * attention weights within the two runs' bounds; returns the violations. */
static size_t check_shift(test_worst *w, const prop_case *c, int64_t s, int control)
{
    const size_t B = c->B, L = c->L, D = c->cfg.d_model, BLD = B * L * D;
    int64_t *p0 = prop_calloc(L, sizeof(int64_t)), *p1 = prop_calloc(L, sizeof(int64_t));
    for (size_t l = 0; l < L; l++) {
        p0[l] = (int64_t)(3 * l); /* not 0..L-1, to use the positions input */
        p1[l] = p0[l] + s;
    }
    if (control)
        p1[L / 2] += 1 + (int64_t)L; /* one token moved by more than the others */
    double *y0 = prop_calloc(BLD, sizeof(double)), *y1 = prop_calloc(BLD, sizeof(double));
    const refenc_input in0 = {.B = B, .L = L, .x = c->x, .key_padding_mask = c->pad, .positions = p0};
    const refenc_input in1 = {.B = B, .L = L, .x = c->x, .key_padding_mask = c->pad, .positions = p1};
    fb_norms nm;
    fb_result f0, f1;
    prop_capture k0 = {0}, k1 = {0};
    fb_norms_compute(&nm, &c->p, &c->cfg);
    fb_encoder_checked(&f0, y0, &k0, &c->p, &c->cfg, &in0, &nm, c->desc);
    fb_encoder_checked(&f1, y1, &k1, &c->p, &c->cfg, &in1, &nm, c->desc);
    char what[400];
    snprintf(what, sizeof what, "%s s=%lld", c->desc, (long long)s);
    size_t bad = fb_outputs_outside(w, y1, &f1, y0, &f0, what);
    for (size_t n = 0; n < f0.N; n++)
        for (size_t i = 0; i < f0.BHLL; i++)
            bad += !fb_within(w, k1.weights[n][i], f1.ew[n][i], k0.weights[n][i], f0.ew[n][i],
                              "%s s=%lld: layer %zu weight %zu", c->desc, (long long)s, n, i);
    prop_capture_free(&k0);
    prop_capture_free(&k1);
    fb_result_free(&f0);
    fb_result_free(&f1);
    fb_norms_free(&nm);
    free(y0);
    free(y1);
    free(p0);
    free(p1);
    return bad;
}

Test(rope_relative, attention_is_invariant_under_position_shift)
{
    gsl_rng *r = test_rng(306);
    prop_opts o;
    prop_opts_default(&o);
    o.positional = REFENC_POS_ROPE;
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 16; t++) {
        prop_case c;
        o.causal = t % 4 == 3;
        prop_case_random(&c, r, t, &o);
        bad += check_shift(&w, &c, 1 + (int64_t)gsl_rng_uniform_int(r, 100000), 0);
        prop_case_free(&c);
    }
    cr_assert_eq(bad, 0, "%zu outputs or weights changed under a common position shift: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));

    /* negative control: one position shifted by more than the others, no
     * padding (the moved token must be visible), L >= 2, D >= 4 (see
     * test_permutation.c: a Post-LN layer of width 2 forgets its input) */
    o.padding = 0;
    o.causal = 0;
    o.min_len = 2;
    o.min_d_model = 4;
    for (size_t t = 0; t < 6; t++) {
        prop_case c;
        prop_case_random(&c, r, t, &o);
        test_worst wc;
        test_worst_init(&wc);
        cr_assert_gt(check_shift(&wc, &c, 7, 1), 0,
                     "negative control: moving one position left %s unchanged (seed %lu)", c.desc,
                     test_seed());
        prop_case_free(&c);
    }
    gsl_rng_free(r);
}

/* The same at the level of one multi-head attention, with bounds derived
 * from refenc_mha_forward's own intermediates (fb_mha_observed) rather than
 * from a recomputation: they hold whichever coordinates RoPE pairs, so this
 * check does not presume that q and k share a layout, and it catches an
 * attention that rotates them in different layouts (the mutation of
 * docs/properties.md).  Returns the violations. */
static size_t check_mha_shift(test_worst *w, gsl_rng *r, size_t t, int control)
{
    static const size_t hs[] = {1, 2, 3, 4, 8}, dhs[] = {2, 4, 6, 8, 12, 16};
    const size_t H = hs[t % 5], Dh = dhs[gsl_rng_uniform_int(r, 6)], D = H * Dh;
    const size_t B = 1 + gsl_rng_uniform_int(r, 3), L = (control ? 2 : 1) + gsl_rng_uniform_int(r, 30);
    const size_t BLD = B * L * D, BHLL = B * H * L * L;
    double *x = prop_calloc(BLD, sizeof(double)), *in_w = prop_calloc(3 * D * D, sizeof(double));
    double *in_b = prop_calloc(3 * D, sizeof(double)), *out_w = prop_calloc(D * D, sizeof(double));
    double *out_b = prop_calloc(D, sizeof(double)), *nqkv = prop_calloc(3 * H, sizeof(double));
    double *y0 = prop_calloc(BLD, sizeof(double)), *y1 = prop_calloc(BLD, sizeof(double));
    double *E0 = prop_calloc(B * L, sizeof(double)), *E1 = prop_calloc(B * L, sizeof(double));
    double *w0 = prop_calloc(BHLL, sizeof(double)), *w1 = prop_calloc(BHLL, sizeof(double));
    double *e0 = prop_calloc(BHLL, sizeof(double)), *e1 = prop_calloc(BHLL, sizeof(double));
    int64_t *p0 = prop_calloc(L, sizeof(int64_t)), *p1 = prop_calloc(L, sizeof(int64_t));
    uint8_t *pad = NULL;
    test_fill_gaussian(x, BLD, 0.2, 1.1, r);
    test_fill_gaussian(in_w, 3 * D * D, 0.0, 1.0 / sqrt((double)D), r);
    test_fill_gaussian(in_b, 3 * D, 0.0, 0.1, r);
    test_fill_gaussian(out_w, D * D, 0.0, 1.0 / sqrt((double)D), r);
    test_fill_gaussian(out_b, D, 0.0, 0.1, r);
    for (size_t k = 0; k < 3; k++)
        for (size_t h = 0; h < H; h++)
            nqkv[k * H + h] = fb_norm2_upper(in_w + (k * D + h * Dh) * D, Dh, D);
    const double no = fb_norm2_upper(out_w, D, D);
    const int64_t s = 1 + (int64_t)gsl_rng_uniform_int(r, 100000);
    for (size_t l = 0; l < L; l++) {
        p0[l] = (int64_t)(2 * l + 1);
        p1[l] = p0[l] + s;
    }
    if (control)
        p1[L / 2] += 5;
    if (!control && t % 2) {
        pad = prop_calloc(B * L, 1);
        for (size_t i = 0; i < B * L; i++)
            pad[i] = gsl_rng_uniform(r) < 0.2;
    }
    refenc_attn_options opt = {.key_padding_mask = pad, .causal = !control && t % 4 == 1,
                               .temperature = 0.7 + gsl_rng_uniform(r)};
    const refenc_rope_options rope0 = {layouts[t % 2], t % 3 ? 10000.0 : 500000.0, p0, NULL};
    const refenc_rope_options rope1 = {layouts[t % 2], t % 3 ? 10000.0 : 500000.0, p1, NULL};
    fb_mha_observed(y0, E0, w0, e0, x, in_w, in_b, out_w, out_b, &opt, &rope0, B, L, D, H, nqkv, no);
    fb_mha_observed(y1, E1, w1, e1, x, in_w, in_b, out_w, out_b, &opt, &rope1, B, L, D, H, nqkv, no);
    size_t bad = 0;
    for (size_t i = 0; i < BLD; i++)
        bad += !fb_within(w, y1[i], E1[i / D], y0[i], E0[i / D], "MHA H=%zu Dh=%zu L=%zu %s s=%lld: "
                          "output %zu", H, Dh, L, refenc_rope_layout_name(layouts[t % 2]),
                          (long long)s, i);
    for (size_t i = 0; i < BHLL; i++)
        bad += !fb_within(w, w1[i], e1[i], w0[i], e0[i], "MHA H=%zu Dh=%zu L=%zu %s s=%lld: "
                          "weight %zu", H, Dh, L, refenc_rope_layout_name(layouts[t % 2]),
                          (long long)s, i);
    free(x);
    free(in_w);
    free(in_b);
    free(out_w);
    free(out_b);
    free(nqkv);
    free(y0);
    free(y1);
    free(E0);
    free(E1);
    free(w0);
    free(w1);
    free(e0);
    free(e1);
    free(p0);
    free(p1);
    free(pad);
    return bad;
}

Test(rope_relative, multi_head_attention_is_invariant_under_position_shift)
{
    gsl_rng *r = test_rng(307);
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < 40; t++)
        bad += check_mha_shift(&w, r, t, 0);
    cr_assert_eq(bad, 0, "%zu outputs or weights of one attention changed under a common shift: %s",
                 bad, test_worst_describe(&w, buf, sizeof buf));
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
    for (size_t t = 0; t < 10; t++) { /* negative control: one position moved by 5 */
        test_worst wc;
        test_worst_init(&wc);
        cr_assert_gt(check_mha_shift(&wc, r, t, 1), 0,
                     "negative control: moving one position left the attention unchanged (seed %lu)",
                     test_seed());
    }
    gsl_rng_free(r);
}
