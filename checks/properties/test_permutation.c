/* Permutation equivariance of self-attention without positional information.
 *
 * Property: with positional scheme none and no causal mask, an encoder layer
 * and a stack satisfy f(P X, P mask) = P f(X, mask) for every permutation P of
 * the tokens, with the key padding mask permuted the same way.
 * Why: every stage but attention acts on each token alone, and attention
 * reads the keys as a set: permuting them permutes the terms of the softmax
 * sums and of sum_j w_ij v_j, nothing else.
 * Tolerance: not bitwise, because those sums are accumulated in another
 * order.  Each run's output row is within its forward error bound E
 * (fwdbound.h, derived from the data) of the exact result, and the exact
 * results are related by P, so |f^(PX)_i - f^(X)_P(i)| <= E_PX,i + E_X,P(i).
 * Negative controls: sinusoidal PE, learned PE, RoPE, ALiBi and the causal
 * mask each tie a token to its position; the same comparison must flag them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "../common/testutil.h"
#include "../../ref/tool/random_params.h"

/* (P X)[b, i] = X[b, perm[i]], rows of row_bytes bytes. */
static void permute_tokens(void *dst, const void *src, const size_t *perm, size_t B, size_t L,
                           size_t row_bytes)
{
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L; i++)
            memcpy((char *)dst + (b * L + i) * row_bytes,
                   (const char *)src + (b * L + perm[i]) * row_bytes, row_bytes);
}

/* Runs the encoder on X and on P X and compares f(PX)_i with f(X)_perm(i)
 * within E_PX + E_X.  Returns the number of violations. */
static size_t check_equivariance(test_worst *w, const prop_case *c, const size_t *perm)
{
    const size_t B = c->B, L = c->L, D = c->cfg.d_model, BLD = B * L * D;
    double *yA = prop_calloc(BLD, sizeof(double)), *yB = prop_calloc(BLD, sizeof(double));
    double *xP = prop_calloc(BLD, sizeof(double));
    uint8_t *padP = c->pad ? prop_calloc(B * L, 1) : NULL;
    permute_tokens(xP, c->x, perm, B, L, D * sizeof(double));
    if (padP)
        permute_tokens(padP, c->pad, perm, B, L, 1);

    const refenc_input inA = {.B = B, .L = L, .x = c->x, .key_padding_mask = c->pad};
    const refenc_input inB = {.B = B, .L = L, .x = xP, .key_padding_mask = padP};
    fb_norms nm;
    fb_result fA, fB;
    fb_norms_compute(&nm, &c->p, &c->cfg);
    fb_encoder_checked(&fA, yA, NULL, &c->p, &c->cfg, &inA, &nm, c->desc);
    fb_encoder_checked(&fB, yB, NULL, &c->p, &c->cfg, &inB, &nm, c->desc);

    size_t bad = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L; i++)
            for (size_t d = 0; d < D; d++) {
                const size_t rB = b * L + i, rA = b * L + perm[i];
                bad += !fb_within(w, yB[rB * D + d], fB.Ey[rB], yA[rA * D + d], fA.Ey[rA],
                                  "%s: f(PX)[%zu,%zu,%zu] vs f(X)[%zu,%zu,%zu]", c->desc,
                                  b, i, d, b, perm[i], d);
            }
    fb_result_free(&fA);
    fb_result_free(&fB);
    fb_norms_free(&nm);
    free(yA);
    free(yB);
    free(xP);
    free(padP);
    return bad;
}

/* Redraws the parameters after a change of n_layers or final_norm. */
static void redraw_params(prop_case *c, gsl_rng *r)
{
    refenc_error err;
    refenc_params_free(&c->p);
    cr_assert_eq(refenc_params_alloc(&c->p, &c->cfg, &err), REFENC_OK, "%s", err.message);
    refenc_params_init_random(&c->p, &c->cfg, r);
    prop_case_describe(c);
}

/* Positive cases: n random configurations; one layer (the encoder reduced to
 * a single layer without final norm) or a stack of 2 to max_layers. */
static void run_positive(unsigned long stream, size_t n, int single_layer, size_t max_layers)
{
    gsl_rng *r = test_rng(stream);
    prop_opts o;
    prop_opts_default(&o);
    o.max_layers = max_layers;
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0;
    char buf[640];
    for (size_t t = 0; t < n; t++) {
        prop_case c;
        prop_case_random(&c, r, t, &o);
        if (single_layer) {
            c.cfg.n_layers = 1;
            c.cfg.final_norm = 0;
        } else if (c.cfg.n_layers < 2) {
            c.cfg.n_layers = 2;
        }
        redraw_params(&c, r);
        size_t *perm = prop_calloc(c.L, sizeof(size_t));
        prop_random_permutation(perm, c.L, r);
        bad += check_equivariance(&w, &c, perm);
        free(perm);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
    cr_assert_eq(bad, 0, "%zu outputs violate f(PX) = P f(X): %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_assert_gt(w.checked, 0, "nothing was checked");
    cr_log_info("%s", test_worst_describe(&w, buf, sizeof buf));
}

Test(permutation, layer_is_equivariant_without_positions)
{
    run_positive(101, 24, 1, 1);
}

Test(permutation, stack_is_equivariant_without_positions)
{
    run_positive(102, 16, 0, 3);
}

/* Negative controls: each scheme or mask, on cases with L >= 3, no padding
 * (a single visible key would hide ALiBi), D >= 4 (a LayerNorm over two
 * features is a sign function up to eps, so a Post-LN layer of width 2
 * forgets almost all of its input, and a positional effect can vanish below
 * the bound) and a permutation that is neither the identity nor the reversal
 * (ALiBi's |i - j| is blind to the reversal): the same comparison must report
 * a violation in every case. */
static void run_control(unsigned long stream, refenc_positional pos, int causal, const char *name)
{
    gsl_rng *r = test_rng(stream);
    prop_opts o;
    prop_opts_default(&o);
    o.positional = pos;
    o.causal = causal;
    o.min_len = 3;
    o.max_len = 24;
    o.padding = 0;
    o.min_d_model = 4;
    for (size_t t = 0; t < 6; t++) {
        prop_case c;
        prop_case_random(&c, r, t, &o);
        size_t *perm = prop_calloc(c.L, sizeof(size_t));
        do
            prop_random_permutation(perm, c.L, r);
        while (prop_perm_is_trivial(perm, c.L));
        test_worst w;
        test_worst_init(&w);
        const size_t bad = check_equivariance(&w, &c, perm);
        char buf[640];
        cr_log_info("control %s: %s", name, test_worst_describe(&w, buf, sizeof buf));
        cr_assert_gt(bad, 0, "negative control %s: %s stayed equivariant within the derived "
                     "tolerance (seed %lu); the comparison cannot see it", name, c.desc,
                     test_seed());
        free(perm);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
}

Test(permutation, sinusoidal_pe_breaks_equivariance)
{
    run_control(111, REFENC_POS_SINUSOIDAL, 0, "sinusoidal");
}

Test(permutation, learned_pe_breaks_equivariance)
{
    run_control(112, REFENC_POS_LEARNED, 0, "learned");
}

Test(permutation, rope_breaks_equivariance)
{
    run_control(113, REFENC_POS_ROPE, 0, "rope");
}

Test(permutation, alibi_breaks_equivariance)
{
    run_control(114, REFENC_POS_ALIBI, 0, "alibi");
}

Test(permutation, causal_mask_breaks_equivariance)
{
    run_control(115, REFENC_POS_NONE, 1, "causal");
}
