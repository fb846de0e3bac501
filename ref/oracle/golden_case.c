/* A golden case's outputs from the oracle (golden_case.h): the twin of
 * refenc_case_run_reference.  The encoder and the blocks (attention, FFN)
 * run on the engine (engine.c); the one-kernel components on their kernels
 * under Ziv's loop (refenc_mp_certify). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"

typedef struct {
    const refenc_case *c;
    const refenc_mp_hooks *hooks;
} case_args;

/* What every component's evaluation shares: the case's input x and hyper-parameters in MPFR, an
 * arena for the outputs and a kernel workspace, all at prec. */
typedef struct {
    const case_args *a;
    mpfr_prec_t prec;
    refenc_mp_arena ar;
    refenc_mp_ws ws;
    mpfr_ptr x, eps, tau, base;
} component_state;

/* The sinusoidal table (L, D) at the case's positions. */
static int sinusoidal_eval(component_state *s, const refenc_mp_sink *sink, refenc_error *err)
{
    const refenc_case *c = s->a->c;
    const size_t L = c->L, D = c->cfg.d_model;
    mpfr_ptr pe = refenc_mp_arena_alloc(&s->ar, L * D, s->prec);
    if (s->ar.failed)
        return refenc_mp_enomem(err, c->name, s->prec);
    refenc_mpk_sinusoidal_table(pe, c->positions, L, D, &s->ws);
    const size_t sy[2] = {L, D};
    return refenc_mp_sink_emit(sink, "output", pe, 2, sy);
}

/* ALiBi: the slopes (H) and the bias (H, L, L) at the case's positions. */
static int alibi_eval(component_state *s, const refenc_mp_sink *sink, refenc_error *err)
{
    const refenc_case *c = s->a->c;
    const size_t L = c->L, H = c->cfg.n_heads;
    mpfr_ptr m = refenc_mp_arena_alloc(&s->ar, H, s->prec);
    mpfr_ptr bias = refenc_mp_arena_alloc(&s->ar, H * L * L, s->prec);
    if (s->ar.failed)
        return refenc_mp_enomem(err, c->name, s->prec);
    refenc_mpk_alibi_slopes_of(m, H, NULL, s->a->hooks, &s->ws);
    /* bias[h,i,j] = -m_h |pos_i - pos_j|, |pos_i - pos_j| < 2^53 exact */
    for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < L; j++) {
                const int64_t d = c->positions[i] > c->positions[j] ? c->positions[i] - c->positions[j]
                                                                    : c->positions[j] - c->positions[i];
                mpfr_ptr b = bias + (h * L + i) * L + j;
                refenc_mp_mul_pos(b, m + h, d);
                mpfr_neg(b, b, MPFR_RNDN);
            }
    const size_t ss[1] = {H}, sb[3] = {H, L, L};
    int st = refenc_mp_sink_emit(sink, "slopes", m, 1, ss);
    if (st == REFENC_OK)
        st = refenc_mp_sink_emit(sink, "bias", bias, 3, sb);
    return st;
}

/* The components computed in place on x: LayerNorm, softmax, activation, RoPE. */
static int in_place_eval(component_state *s, const refenc_mp_sink *sink, refenc_error *err)
{
    const refenc_case *c = s->a->c;
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model, H = cfg->n_heads, Dh = refenc_config_head_dim(cfg);
    const refenc_layer_params *lp = &c->params.layers[0];
    mpfr_ptr x = s->x;
    switch (c->component) {
    case REFENC_COMP_LAYERNORM: {
        const int rms = cfg->norm_type == REFENC_NORMTYPE_RMSNORM; /* the configured norm */
        mpfr_ptr g = refenc_mp_arena_from_d(&s->ar, lp->norm1_weight, D, 53);
        mpfr_ptr b = rms || lp->norm1_bias == NULL ? NULL : refenc_mp_arena_from_d(&s->ar, lp->norm1_bias, D, 53);
        if (s->ar.failed)
            return refenc_mp_enomem(err, c->name, s->prec);
        if (rms)
            refenc_mpk_rmsnorm_forward(x, x, g, B * L, D, s->eps, cfg->rmsnorm_offset, &s->ws);
        else
            refenc_mpk_layernorm_forward(x, x, g, b, B * L, D, s->eps, &s->ws);
        const size_t sy[3] = {B, L, D};
        return refenc_mp_sink_emit(sink, "output", x, 3, sy);
    }
    case REFENC_COMP_SOFTMAX: {
        refenc_mpk_softmax_forward(x, x, B, L, s->tau, &s->ws);
        const size_t sy[2] = {B, L};
        return refenc_mp_sink_emit(sink, "output", x, 2, sy);
    }
    case REFENC_COMP_ACTIVATION: {
        refenc_mpk_activation_forward(x, x, B * L, cfg->activation, &s->ws);
        const size_t sy[2] = {B, L};
        return refenc_mp_sink_emit(sink, "output", x, 2, sy);
    }
    case REFENC_COMP_ROPE: {
        refenc_mpk_rope_forward(x, x, c->positions, B * H, L, Dh, s->base, cfg->rope_layout,
                                &cfg->rope_scaling, &s->ws);
        const size_t sy[4] = {B, H, L, Dh};
        return refenc_mp_sink_emit(sink, "output", x, 4, sy);
    }
    default:
        return refenc_error_set(err, REFENC_EINVAL, "%s: unknown component", c->name);
    }
}

/* Every component but the encoder, in one evaluation at prec. */
static int component_eval(const case_args *a, mpfr_prec_t prec, const refenc_mp_sink *sink,
                          refenc_error *err)
{
    const refenc_case *c = a->c;
    const refenc_config *cfg = &c->cfg;
    const size_t L = c->L, D = cfg->d_model, H = cfg->n_heads, Dh = refenc_config_head_dim(cfg), F = cfg->d_ff;
    component_state s = {.a = a, .prec = prec};
    int st = refenc_mp_ws_alloc(&s.ws, prec, refenc_mpk_ws_tmp(D, F, L, Dh) + 2 * H + 4,
                                refenc_mpk_ws_ptr(D, F, L, Dh));
    s.x = c->x_numel ? refenc_mp_arena_from_d(&s.ar, c->x, c->x_numel, prec) : NULL;
    s.eps = refenc_mp_arena_from_d(&s.ar, &cfg->layer_norm_eps, 1, 53);
    s.tau = refenc_mp_arena_from_d(&s.ar, &cfg->temperature, 1, 53);
    s.base = refenc_mp_arena_from_d(&s.ar, &cfg->rope_base, 1, 53);
    if (st || s.ar.failed)
        st = refenc_mp_enomem(err, c->name, prec);
    else if (c->component == REFENC_COMP_SINUSOIDAL_PE)
        st = sinusoidal_eval(&s, sink, err);
    else if (c->component == REFENC_COMP_ALIBI)
        st = alibi_eval(&s, sink, err);
    else
        st = in_place_eval(&s, sink, err);
    refenc_mp_arena_free(&s.ar);
    refenc_mp_ws_free(&s.ws);
    return st;
}

static int case_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    return component_eval(ctx, prec, sink, err);
}

/* The FFN case reports its output only, not the activations. */
static int not_hidden(void *ctx, const char *step)
{
    (void)ctx;
    return strcmp(step, "hidden") != 0;
}

/* The encoder, attention and FFN cases: on the engine, one thread. */
static int engine_case(const refenc_case *c, const refenc_mp_hooks *hooks, int certify,
                       const refenc_trace *trace, mpfr_prec_t prec, refenc_mp_report *rep)
{
    const refenc_input in = refenc_case_input(c);
    const refenc_mp_block block = c->component == REFENC_COMP_ATTENTION ? REFENC_MP_BLOCK_MHA
                                  : c->component == REFENC_COMP_FFN     ? REFENC_MP_BLOCK_FFN
                                                                        : REFENC_MP_BLOCK_ENCODER;
    const refenc_mp_run run = {.cfg = &c->cfg, .params = &c->params, .in = &in, .unit_end = c->B,
                               .prec = prec, .threads = 1, .block = block, .hooks = hooks,
                               .one_evaluation = !certify, .wanted = not_hidden};
    return refenc_mp_run_collect(&run, trace, rep, NULL, 0);
}

/* One evaluation, every value rounded once to double and passed on. */
typedef struct {
    const refenc_trace *trace;
} round_once;

static int round_once_fn(void *ctx, const char *name, mpfr_srcptr data, const unsigned char *exact,
                         size_t ndim, const size_t *shape)
{
    const round_once *r = ctx;
    (void)exact;
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    double *y = refenc_alloc_array(n, sizeof *y);
    if (y == NULL)
        return REFENC_ENOMEM;
    refenc_mp_get_d(y, data, n);
    refenc_trace_emit(r->trace, name, y, ndim, shape);
    free(y);
    return REFENC_OK;
}

int refenc_mp_case_run(const refenc_case *c, const refenc_mp_hooks *hooks, int certify,
                       const refenc_trace *trace, mpfr_prec_t prec, refenc_mp_report *rep)
{
    refenc_mp_report local;
    if (rep == NULL)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    int st = refenc_case_validate(c, &rep->error);
    if (st != REFENC_OK)
        return st;
    case_args a = {c, hooks};
    if (c->component == REFENC_COMP_ENCODER || c->component == REFENC_COMP_ATTENTION ||
        c->component == REFENC_COMP_FFN) {
        st = engine_case(c, hooks, certify, trace, prec, rep);
    } else if (certify) {
        st = refenc_mp_certify(case_eval, &a, prec, trace, rep);
    } else {
        round_once r = {trace};
        const refenc_mp_sink sink = {round_once_fn, &r};
        st = case_eval(&a, prec, &sink, &rep->error);
        rep->prec = prec;
        rep->evaluations = 1;
    }
    if (st == REFENC_ENOMEM && rep->error.message[0] == '\0')
        refenc_error_set(&rep->error, st, "%s: out of memory", c->name);
    return st;
}
