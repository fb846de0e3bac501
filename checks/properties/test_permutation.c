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
 * within E_PX + E_X.  With token inputs the tokens and their types are
 * permuted (keep_types: the types are not, a negative control).  Returns the
 * number of violations. */
static size_t check_equivariance_of(test_worst *w, const prop_case *c, const size_t *perm,
                                    int keep_types)
{
    size_t *identity = prop_calloc(c->L, sizeof(size_t));
    for (size_t i = 0; i < c->L; i++)
        identity[i] = i;
    const size_t B = c->B, L = c->L, D = c->cfg.d_model, BLD = B * L * D;
    double *yA = prop_calloc(BLD, sizeof(double)), *yB = prop_calloc(BLD, sizeof(double));
    double *xP = c->x ? prop_calloc(BLD, sizeof(double)) : NULL;
    uint8_t *padP = c->pad ? prop_calloc(B * L, 1) : NULL;
    int64_t *tokP = c->tokens ? prop_calloc(B * L, sizeof(int64_t)) : NULL;
    int64_t *typP = c->types ? prop_calloc(B * L, sizeof(int64_t)) : NULL;
    if (xP)
        permute_tokens(xP, c->x, perm, B, L, D * sizeof(double));
    if (padP)
        permute_tokens(padP, c->pad, perm, B, L, 1);
    if (tokP)
        permute_tokens(tokP, c->tokens, perm, B, L, sizeof(int64_t));
    if (typP) /* the control types_not_permuted leaves them in place */
        permute_tokens(typP, c->types, keep_types ? identity : perm, B, L, sizeof(int64_t));

    const refenc_input inA = {.B = B, .L = L, .x = c->x, .key_padding_mask = c->pad,
                              .tokens = c->tokens, .token_types = c->types};
    const refenc_input inB = {.B = B, .L = L, .x = xP, .key_padding_mask = padP, .tokens = tokP,
                              .token_types = typP};
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
    free(tokP);
    free(typP);
    free(identity);
    return bad;
}

static size_t check_equivariance(test_worst *w, const prop_case *c, const size_t *perm)
{
    return check_equivariance_of(w, c, perm, 0);
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
        prop_case_redraw(&c, r);
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

/* ---- the families' embedding path ---------------------------------------------------
 * Token inputs through the embedding lookup (scaled or not), token-type rows
 * and the embedding LayerNorm, each position alone: the encoder stays
 * equivariant when tokens, their types and the padding mask are permuted
 * together, under either mask value (an all-padding item's rows average v
 * over every key, a permutation-invariant mean).  Tolerance: fb_encoder's
 * bounds, which follow the embedding path (fwdbound.h). */
static void run_tokens(unsigned long stream, size_t n, refenc_positional pos,
                       refenc_position_ids rule, int keep_types, const char *control)
{
    gsl_rng *r = test_rng(stream);
    prop_opts o;
    prop_opts_default(&o);
    o.positional = pos;
    o.max_len = 24;
    o.min_d_model = 4;
    if (control != NULL)
        o.min_len = 3, o.padding = 0;
    test_worst w;
    test_worst_init(&w);
    size_t bad = 0, cases = 0;
    char buf[640];
    for (size_t t = 0; t < n; t++) {
        prop_case c;
        prop_case_random(&c, r, t, &o);
        prop_case_tokens(&c, r, keep_types ? 2 + 3 * t : t); /* the control: T = 2 */
        if (keep_types) /* type 1 at position 0 only, which the permutation moves */
            for (size_t i = 0; i < c.B * c.L; i++)
                c.types[i] = i % c.L == 0;
        if (rule == REFENC_POSIDS_ROBERTA) {
            c.cfg.position_ids = rule;
            c.cfg.max_len = c.L + 1 + gsl_rng_uniform_int(r, 4);
            prop_case_redraw(&c, r);
        }
        size_t *perm = prop_calloc(c.L, sizeof(size_t));
        do
            prop_random_permutation(perm, c.L, r);
        while (control != NULL && (prop_perm_is_trivial(perm, c.L) || (keep_types && perm[0] == 0)));
        const size_t b = check_equivariance_of(&w, &c, perm, keep_types);
        if (control != NULL)
            cr_assert_gt(b, 0, "negative control %s: %s stayed equivariant within the derived "
                         "tolerance (seed %lu); the comparison cannot see it", control, c.desc,
                         test_seed());
        bad += b;
        cases++;
        free(perm);
        prop_case_free(&c);
    }
    gsl_rng_free(r);
    if (control != NULL) {
        cr_log_info("control %s: %s", control, test_worst_describe(&w, buf, sizeof buf));
        return;
    }
    cr_assert_eq(bad, 0, "%zu outputs violate f(PX) = P f(X) on token inputs: %s", bad,
                 test_worst_describe(&w, buf, sizeof buf));
    cr_assert_gt(w.checked, 0, "nothing was checked");
    cr_log_info("%zu cases: %s", cases, test_worst_describe(&w, buf, sizeof buf));
}

Test(permutation, embedding_path_is_equivariant_without_positions)
{
    run_tokens(121, 24, REFENC_POS_NONE, REFENC_POSIDS_INDEX, 0, NULL);
}

/* Negative controls: the token types left in place while the tokens move;
 * RoBERTa's learned positions (counted over the tokens, so tied to the
 * order). */
Test(permutation, token_types_not_permuted_break_equivariance)
{
    run_tokens(122, 6, REFENC_POS_NONE, REFENC_POSIDS_INDEX, 1, "token types not permuted");
}

Test(permutation, roberta_positions_break_equivariance)
{
    run_tokens(123, 6, REFENC_POS_LEARNED, REFENC_POSIDS_ROBERTA, 0, "roberta positions");
}
