/* The oracle's kernel backward twins under allocation failures (fault.h):
 * with the n-th allocation failing, each returns REFENC_ENOMEM (never a
 * crash, never REFENC_OK); when none fails, its outputs are those of a run
 * without fault injection.  Not checked: that a failed call writes nothing.
 * refenc_mp_run_twin hands the certified steps to the outputs one by one,
 * so an allocation failing while a later step is rounded leaves the earlier
 * outputs written (as for the forward twins); the layer and encoder twins
 * (about 900 allocations, minutes under this loop) are left out. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/core/family.h"
#include "../../ref/oracle/backward.h"
#include "fault.h"

enum { B = 1, L = 2, D = 4, F = 4, H = 2, N = B * L * D };

typedef struct {
    int which;                /* 0 linear ... 7 encoder */
    double out[4][64], want[4][64];
    refenc_config cfg;
    refenc_params p, g;
    long run;
} bctx;

static const double X[N] = {0.5, -1.25, 2, 0.75, -0.5, 1.5, -2.5, 1};
static const double Y[N] = {1, 0.25, -0.75, 2, -1.5, 0.5, 1.25, -1};
static const int64_t TOK[B * L] = {1, 1};

static int call(void *p)
{
    bctx *c = p;
    const mpfr_prec_t pr = REFENC_MP_PREC_DEFAULT;
    refenc_attn_options o = {.causal = 1, .temperature = 1.0};
    refenc_layer_params *lp = &c->p.layers[0];
    refenc_input in = {.B = B, .L = L, .x = X};
    switch (c->which) {
    case 0: return refenc_mp_linear_backward(c->out[0], c->out[1], c->out[2], Y, X, X, 2, 4, 2, pr, NULL);
    case 1: return refenc_mp_layernorm_backward(c->out[0], c->out[1], c->out[2], Y, X, X, 2, 4, 1e-5, pr, NULL);
    case 2: return refenc_mp_softmax_backward(c->out[0], Y, X, 2, 4, 0.5, pr, NULL);
    case 3: return refenc_mp_activation_backward(c->out[0], Y, X, N, REFENC_ACT_GELU, pr, NULL);
    case 4: return refenc_mp_attention_backward(c->out[0], c->out[1], c->out[2], c->out[3], NULL, NULL,
                                                Y, X, Y, X, &o, 1, 1, 2, 4, pr, NULL);
    case 5: return refenc_mp_embedding_backward(c->out[0], X, TOK, 1, 2, 3, 4, 1, pr, NULL);
    case 6: return refenc_mp_layer_backward(c->out[0], &c->g.layers[0], c->out[1], Y, X, lp, &c->cfg,
                                            &o, NULL, B, L, pr, NULL);
    default: return refenc_mp_encoder_backward(&c->g, c->out[0], c->out[1], &c->p, &c->cfg, &in, Y, pr, NULL);
    }
}

/* The outputs before a run: 7 where written, 0 where accumulated. */
static void reset(bctx *c)
{
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 64; i++)
            c->out[k][i] = 7.0;
    if (c->which == 0 || c->which == 1) /* dW, db; dgamma, dbeta */
        memset(c->out[1], 0, 2 * 64 * sizeof(double));
    if (c->which == 5) /* the table's gradient */
        memset(c->out[0], 0, 64 * sizeof(double));
    memset(c->g.block, 0, c->g.n_values * sizeof(double));
}

static void check(void *p, int st, int failed)
{
    bctx *c = p;
    c->run++;
    if (failed) {
        cr_expect_eq(st, REFENC_ENOMEM, "twin %d, allocation %ld: status %d", c->which, c->run, st);
    } else {
        cr_expect_eq(st, REFENC_OK);
        cr_expect(memcmp(c->out, c->want, sizeof c->out) == 0, "twin %d: other outputs", c->which);
    }
    reset(c);
}

Test(out_of_memory, oracle_backward_twins, .timeout = 600)
{
    static bctx c;
    refenc_config_default(&c.cfg);
    c.cfg.d_model = D, c.cfg.n_heads = H, c.cfg.d_ff = F, c.cfg.n_layers = 1, c.cfg.vocab_size = 0;
    c.cfg.causal = 1;
    cr_assert_eq(refenc_params_alloc(&c.p, &c.cfg, NULL), 0);
    cr_assert_eq(refenc_params_alloc(&c.g, &c.cfg, NULL), 0);
    for (size_t i = 0; i < c.p.n_values; i++)
        c.p.block[i] = (double)((i * 7) % 11) / 8.0 - 0.5;
    for (c.which = 0; c.which < 6; c.which++) { /* the kernels' twins */
        reset(&c);
        cr_assert_eq(call(&c), REFENC_OK, "twin %d", c.which);
        memcpy(c.want, c.out, sizeof c.out);
        reset(&c);
        c.run = 0;
        cr_expect_gt(fault_run(call, check, &c, 0), 0, "twin %d allocates nothing", c.which);
    }
    refenc_params_free(&c.g), refenc_params_free(&c.p);
}
