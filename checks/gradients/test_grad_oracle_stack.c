/* The oracle's encoder backward (ref/oracle/encoder_backward.c) on every
 * family, two layers, small sizes:
 *   - its forward output equals the forward oracle's bit for bit (both
 *     correctly rounded);
 *   - the adjoint identity along the input x (when V = 0) and along every
 *     parameter tensor (tables, norms, every layer's twelve), with central
 *     differences of the forward oracle and the budget of
 *     test_grad_oracle_layer.c.
 * Negative controls (run): the twin with the other LayerNorm placement
 * breaks the identity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "../../ref/core/family.h"
#include "../../ref/oracle/backward.h"
#include "../../ref/tool/random_params.h"
#include "gradcheck.h"

enum { B = 2, L = 3, D = 4, N = B * L * D };

typedef struct {
    refenc_config cfg;
    refenc_params p;
    refenc_input in;
    double x[N], dY[N];
    int64_t tok[B * L], types[B * L];
    uint8_t pad[B * L];
    double *theta, *dir;
    size_t n;
} scase;

static void scase_init(scase *c, refenc_family fam, gsl_rng *r)
{
    refenc_config *g = &c->cfg;
    refenc_config_family(g, fam);
    g->d_model = D, g->n_heads = 2, g->d_ff = 6, g->n_layers = 2, g->max_len = 8;
    g->vocab_size = g->vocab_size > 0 ? 7 : 0;
    g->type_vocab_size = g->type_vocab_size > 0 ? 2 : 0;
    cr_assert_eq(refenc_config_validate(g, NULL), 0, "%s", refenc_family_name(fam));
    cr_assert_eq(refenc_params_alloc(&c->p, g, NULL), 0);
    refenc_params_init_random(&c->p, g, r);
    gc_quantize(c->p.block, c->p.n_values, GC_GRID_X);
    test_fill_gaussian(c->x, N, 0.0, 1.0, r), test_fill_gaussian(c->dY, N, 0.0, 1.0, r);
    gc_quantize(c->x, N, GC_GRID_X);
    static const int64_t tok[B * L] = {2, 5, 2, 3, 6, 0};
    memcpy(c->tok, tok, sizeof tok);
    for (size_t i = 0; i < B * L; i++)
        c->types[i] = (int64_t)(i % 2), c->pad[i] = 0;
    c->pad[B * L - 1] = 1;
    if (g->padding_idx >= 0 && g->vocab_size > 0)
        c->tok[B * L - 1] = g->padding_idx; /* RoBERTa's positions skip it */
    c->in = (refenc_input){.B = B, .L = L, .key_padding_mask = c->pad};
    if (g->vocab_size > 0)
        c->in.tokens = c->tok;
    else
        c->in.x = c->x;
    if (g->type_vocab_size > 0)
        c->in.token_types = c->types;
}

static double phi(void *ctx, double t, double *err)
{
    scase *c = ctx;
    double *saved = malloc(c->n * sizeof *saved), y[N];
    memcpy(saved, c->theta, c->n * sizeof *saved);
    for (size_t i = 0; i < c->n; i++)
        c->theta[i] += t * c->dir[i]; /* exact: the grids of gradcheck.h */
    cr_assert_eq(refenc_mp_encoder_forward(y, &c->p, &c->cfg, &c->in, NULL, REFENC_MP_PREC_DEFAULT,
                                           NULL), 0);
    memcpy(c->theta, saved, c->n * sizeof *saved);
    free(saved);
    return gc_dot_rounded(c->dY, y, N, err);
}

/* The identity along one tensor theta (n) with the gradient g. */
static size_t along(scase *c, double *theta, const double *g, size_t n, const char *name,
                    gsl_rng *r, test_worst *w)
{
    double *dir = malloc(n * sizeof *dir);
    gc_direction(dir, n, 1.0, r);
    c->theta = theta, c->dir = dir, c->n = n;
    gc_fd fd;
    gc_central(&fd, phi, c, GC_STEP);
    double ea = 0;
    const double a = gc_dot(g, dir, n, &ea);
    for (size_t i = 0; i < n; i++)
        ea += TEST_U * (1.0 + 2.0 * TEST_U) * fabs(g[i] * dir[i]);
    free(dir);
    return gc_fd_check(w, a, ea, &fd, "%s", name) ? 0 : 1;
}

/* the identity along the input x (V = 0) and along every parameter tensor;
 * first: stop at the first violation (a negative control) */
static size_t adjoint(scase *c, const double *dx, const refenc_params *grad, gsl_rng *r,
                      test_worst *w, int first)
{
    size_t bad = c->cfg.vocab_size > 0 ? 0 : along(c, c->x, dx, N, "x", r, w);
    for (size_t t = 0; t < c->p.n_tensors && !(first && bad > 0); t++)
        bad += along(c, c->p.tensors[t].data, grad->tensors[t].data, c->p.tensors[t].size,
                     c->p.tensors[t].name, r, w);
    return bad;
}

static void twin(scase *c, const refenc_config *cfg, refenc_params *grad, double *dx, double *y)
{
    cr_assert_eq(refenc_params_alloc(grad, &c->cfg, NULL), 0);
    refenc_mp_report rep;
    const int st = refenc_mp_encoder_backward(grad, dx, y, &c->p, cfg, &c->in, c->dY,
                                              REFENC_MP_PREC_DEFAULT, &rep);
    cr_assert_eq(st, 0, "%s", rep.error.message);
}

static void run_family(refenc_family fam, unsigned long stream)
{
    gsl_rng *r = test_rng(stream);
    scase *c = calloc(1, sizeof *c);
    scase_init(c, fam, r);
    double dx[N], y[N], y_fwd[N];
    refenc_params grad, g2;
    twin(c, &c->cfg, &grad, dx, y);
    cr_assert_eq(refenc_mp_encoder_forward(y_fwd, &c->p, &c->cfg, &c->in, NULL,
                                           REFENC_MP_PREC_DEFAULT, NULL), 0);
    for (size_t i = 0; i < N; i++)
        cr_assert(y[i] == y_fwd[i], "%s output[%zu]: %.17g, the forward oracle's %.17g",
                  refenc_family_name(fam), i, y[i], y_fwd[i]);
    test_worst w;
    test_worst_init(&w);
    const size_t bad = adjoint(c, dx, &grad, r, &w, 0);
    char msg[512];
    cr_log_info("%s: %s", refenc_family_name(fam), test_worst_describe(&w, msg, sizeof msg));
    cr_expect(bad == 0, "%s: %zu violations; %s", refenc_family_name(fam), bad,
              test_worst_describe(&w, msg, sizeof msg));
    refenc_config bug = c->cfg; /* negative control: the other placement in the twin */
    bug.norm = bug.norm == REFENC_NORM_PRE ? REFENC_NORM_POST : REFENC_NORM_PRE;
    twin(c, &bug, &g2, dx, y);
    test_worst_init(&w);
    cr_expect(adjoint(c, dx, &g2, r, &w, 1) > 0, "%s: the other placement keeps the identity",
              refenc_family_name(fam));
    refenc_params_free(&g2), refenc_params_free(&grad), refenc_params_free(&c->p);
    free(c);
    gsl_rng_free(r);
}

Test(oracle_encoder_backward, vaswani) { run_family(REFENC_FAMILY_VASWANI, 2641); }
Test(oracle_encoder_backward, bert) { run_family(REFENC_FAMILY_BERT, 2642); }
Test(oracle_encoder_backward, roberta) { run_family(REFENC_FAMILY_ROBERTA, 2643); }
Test(oracle_encoder_backward, distilbert) { run_family(REFENC_FAMILY_DISTILBERT, 2644); }
Test(oracle_encoder_backward, gpt2) { run_family(REFENC_FAMILY_GPT2, 2645); }
Test(oracle_encoder_backward, clip_text) { run_family(REFENC_FAMILY_CLIP_TEXT, 2646); }
