/* An engine run's steps gathered into whole tensors: each item's slice
 * (L, D), (H, L, L) or (L, F) goes to its place in (B, ...), the steps kept
 * in the order first emitted (forward order).  What the twins and the golden
 * case runner hand to a trace. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"

typedef struct {
    char name[64];
    size_t ndim, shape[4], numel;
    double *data;
} mp_step;

typedef struct {
    size_t B, n, cap;
    mp_step *s;
    int failed; /* out of memory */
} mp_steps;

static mp_step *steps_add(mp_steps *s, const char *name, size_t ndim, const size_t *shape)
{
    if (!refenc_array_reserve((void **)&s->s, &s->cap, s->n + 1, sizeof *s->s))
        return NULL;
    mp_step *st = &s->s[s->n];
    memset(st, 0, sizeof *st);
    snprintf(st->name, sizeof st->name, "%s", name);
    st->ndim = ndim + 1;
    st->shape[0] = s->B;
    st->numel = s->B;
    for (size_t d = 0; d < ndim; d++)
        st->numel *= (st->shape[d + 1] = shape[d]);
    if ((st->data = refenc_alloc_array(st->numel, sizeof(double))) == NULL)
        return NULL;
    s->n++;
    return st;
}

static void steps_emit(void *ctx, const char *name, size_t item, const double *data, size_t ndim,
                       const size_t *shape)
{
    mp_steps *s = ctx;
    mp_step *st = NULL;
    for (size_t i = 0; i < s->n && st == NULL; i++)
        if (strcmp(s->s[i].name, name) == 0)
            st = &s->s[i];
    if (st == NULL && !s->failed && (st = steps_add(s, name, ndim, shape)) == NULL)
        s->failed = 1;
    if (st != NULL)
        memcpy(st->data + item * (st->numel / s->B), data, st->numel / s->B * sizeof(double));
}

static void steps_free(mp_steps *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->s[i].data);
    free(s->s);
}

int refenc_mp_run_collect(const refenc_mp_run *run, const refenc_trace *trace, refenc_mp_report *rep,
                          const refenc_mp_output *outs, size_t n_outs)
{
    refenc_mp_report local;
    if (rep == NULL)
        rep = &local;
    mp_steps s = {.B = run->in->B};
    refenc_mp_run r = *run;
    r.emit = steps_emit, r.emit_ctx = &s;
    int st = refenc_mp_encoder_run(&r, rep);
    if (st == REFENC_OK && s.failed)
        st = refenc_mp_enomem(&rep->error, "the oracle's steps", 53);
    for (size_t i = 0; i < s.n && st == REFENC_OK; i++) {
        refenc_trace_emit(trace, s.s[i].name, s.s[i].data, s.s[i].ndim, s.s[i].shape);
        for (size_t k = 0; k < n_outs; k++)
            if (outs[k].dst != NULL && strcmp(outs[k].name, s.s[i].name) == 0)
                memcpy(outs[k].dst, s.s[i].data, s.s[i].numel * sizeof(double));
    }
    steps_free(&s);
    return st;
}

typedef struct {
    const refenc_mp_output *outs;
    size_t n;
} outs_ctx;

static int wanted_out(void *ctx, const char *step)
{
    const outs_ctx *o = ctx;
    for (size_t k = 0; k < o->n; k++)
        if (o->outs[k].dst != NULL && strcmp(o->outs[k].name, step) == 0)
            return 1;
    return 0;
}

int refenc_mp_run_block(const refenc_config *cfg, const refenc_params *p, const refenc_input *in,
                        refenc_mp_block block, const double *alibi_slopes, mpfr_prec_t prec,
                        refenc_mp_report *rep, const refenc_mp_output *outs, size_t n_outs)
{
    outs_ctx o = {outs, n_outs};
    const refenc_mp_run run = {.cfg = cfg, .params = p, .in = in, .unit_end = in->B, .prec = prec,
                               .threads = 1, .block = block, .alibi_slopes = alibi_slopes,
                               .wanted = wanted_out, .wanted_ctx = &o};
    return refenc_mp_run_collect(&run, NULL, rep, outs, n_outs);
}
