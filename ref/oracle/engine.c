/* The oracle's forward engine (oracle.h: refenc_mp_run; engine.h for the
 * blocks): every forward computation of the oracle -- the encoder whole or
 * layer by layer, at any size, on any number of threads, in shards of
 * units, and the blocks alone -- runs here, batch item by batch item.
 *
 *   - items are independent (attention never looks across the batch), so an
 *     item is evaluated, certified and forgotten before the next: the MPFR
 *     storage is one item's, whatever B;
 *   - certified runs evaluate both precisions of Ziv's pair together, step
 *     by step, so a step is certified while its two evaluations are at hand
 *     and nothing is collected; an item whose step is not certified is
 *     evaluated again from its input at the next pair of precisions.  A bug
 *     variant's run evaluates one lane once and rounds each value;
 *   - within a step, rows (LayerNorm, linear maps, FFN) or heads (attention)
 *     go to OpenMP threads, each with its own workspace.  A value is
 *     computed by the same operations whatever the thread; MPFR's flags are
 *     per thread, so each thread reports whether it saw an inexact operation
 *     and the unit's flag is their union.  The output does not depend on the
 *     number of threads.
 * The arithmetic is the kernels' (refenc_mpk_*), called on one row or one
 * head at a time; parameters stay doubles (refenc_mp_dot_row_d). */
#include "engine.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../core/alloc.h"

static int thread_num(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

mpfr_ptr refenc_mpe_buf(refenc_mpe_unit *u, int li, int which)
{
    refenc_mpe_lane *ln = &u->lanes[li];
    switch (which) {
    case MPE_H: return ln->h;
    case MPE_A: return ln->a;
    case MPE_T: return ln->t;
    case MPE_HID: return ln->hid;
    default: return ln->ctx;
    }
}

void refenc_mpe_inexact_begin(void)
{
    mpfr_clear_inexflag();
}

void refenc_mpe_inexact_end(refenc_mpe_unit *u, int li)
{
    u->lanes[li].inexact |= mpfr_inexflag_p() != 0;
}

int refenc_mpe_wanted(const refenc_mpe_unit *u, const char *step)
{
    return u->run->wanted == NULL || u->run->wanted(u->run->wanted_ctx, step);
}

void refenc_mpe_progress(refenc_mpe_unit *u, const char *step, double work)
{
    u->done += work;
    if (u->run->progress != NULL) {
        const refenc_mp_progress p = {u->unit, u->units, u->layer, step, u->done, u->total,
                                      u->lanes[0].p};
        u->run->progress(u->run->progress_ctx, &p);
    }
}

/* ---- the parallel schedule ------------------------------------------------------------ */

void refenc_mpe_rows(refenc_mpe_unit *u, size_t n, refenc_mpe_row_fn fn, const void *arg,
                     const char *step, double work)
{
    int inex0 = 0, inex1 = 0;
    const long total = u->lanes_n * (long)n;
    const double done0 = u->done;
    long finished = 0;
#pragma omp parallel for schedule(dynamic) num_threads(u->threads) reduction(| : inex0, inex1)
    for (long it = 0; it < total; it++) {
        const int li = it >= (long)n;
        const int t = thread_num();
        mpfr_clear_inexflag();
        fn(u, li, (size_t)(li ? it - (long)n : it), &u->workers[t], arg);
        if (mpfr_inexflag_p()) {
            if (li)
                inex1 = 1;
            else
                inex0 = 1;
        }
        long now;
#pragma omp atomic capture
        now = ++finished;
        if (t == 0 && step != NULL) { /* a long step shows its progress */
            u->done = done0;
            refenc_mpe_progress(u, step, work * (double)now / (double)total);
        }
    }
    u->done = done0 + (step != NULL ? work : 0);
    u->lanes[0].inexact |= inex0;
    u->lanes[1].inexact |= inex1;
}

void refenc_mpe_heads(refenc_mpe_unit *u, refenc_mpe_head_fn fn, void *arg)
{
#pragma omp parallel for schedule(dynamic) num_threads(u->threads)
    for (long h = 0; h < (long)u->H; h++)
        fn(u, (size_t)h, &u->workers[thread_num()], arg);
}

/* ---- certifying and emitting a step ----------------------------------------------------- */

static void record_failure(refenc_mpe_unit *u, const char *step, size_t index, mpfr_srcptr lo,
                           mpfr_srcptr hi)
{
    u->failed = 1;
    snprintf(u->fail, sizeof u->fail,
             "oracle: the rounding of %s[%zu] of batch item %zu (%.17g) is not certified: %.17g at "
             "%ld bits, %.17g at %ld bits; no precision up to %ld bits certified it",
             step, index, u->item, mpfr_get_d(hi, MPFR_RNDN), mpfr_get_d(lo, MPFR_RNDN),
             (long)u->lanes[0].p, mpfr_get_d(hi, MPFR_RNDN), (long)u->lanes[1].p,
             (long)REFENC_MP_PREC_MAX);
}

int refenc_mpe_value(refenc_mpe_unit *u, refenc_mpe_worker *w, mpfr_srcptr const *v, int exact,
                     double *dst)
{
    if (u->lanes_n == 1) {
        *dst = mpfr_get_d(v[0], MPFR_RNDN);
        return 1;
    }
    if (!refenc_mp_certified(v[0], v[1], u->lanes[1].p, exact, w->t, w->u))
        return 0;
    *dst = mpfr_get_d(v[1], MPFR_RNDN);
    return 1;
}

int refenc_mpe_step(refenc_mpe_unit *u, const char *step, mpfr_srcptr const *data, size_t n,
                    const unsigned char *exact_v, size_t ndim, const size_t *shape)
{
    if (!refenc_mpe_wanted(u, step))
        return 1;
    const int exact_step = !u->lanes[u->lanes_n - 1].inexact;
    size_t first = SIZE_MAX;
#pragma omp parallel for schedule(static) num_threads(u->threads) reduction(min : first)
    for (long i = 0; i < (long)n; i++) {
        mpfr_srcptr v[2] = {data[0] + i, data[u->lanes_n - 1] + i};
        const int ex = exact_step || (exact_v != NULL && exact_v[i]);
        if (!refenc_mpe_value(u, &u->workers[thread_num()], v, ex, u->dbl + i) && (size_t)i < first)
            first = (size_t)i;
    }
    if (first != SIZE_MAX) {
        record_failure(u, step, first, data[0] + first, data[1] + first);
        return 0;
    }
    u->run->emit(u->run->emit_ctx, step, u->item, u->dbl, ndim, shape);
    return 1;
}

int refenc_mpe_step_buf(refenc_mpe_unit *u, const char *step, int which)
{
    const size_t cols = which == MPE_HID ? u->F : u->D, shape[2] = {u->L, cols};
    mpfr_srcptr data[2] = {refenc_mpe_buf(u, 0, which), refenc_mpe_buf(u, u->lanes_n - 1, which)};
    return refenc_mpe_step(u, step, data, u->L * cols, NULL, 2, shape);
}

/* ---- memory ------------------------------------------------------------------------------- */

/* The FFN's activations of one lane: hid (L F), when the run reports
 * "hidden" (the other buffers: lane_buf_n, slopes (H)). */
static size_t lane_hid(const refenc_mpe_unit *u)
{
    return u->run->block == REFENC_MP_BLOCK_FFN && refenc_mpe_wanted(u, "hidden") ? u->L * u->F : 0;
}

/* The values of buffer i of a lane, in the order of bufs below: h, a (Lseq,
 * D); q and t, one buffer of max(Lseq D, Lq E) values: the queries (Lq, E)
 * are dead once the heads have run (ctx holds their output) and t (L, D),
 * the sublayers' output, is born in out_proj and dead once added to h; ctx
 * (Lq, E); k, v (Lseq, Hkv Dh), the key/value heads' width under
 * grouped-query attention (a quarter of E at Llama's 32 / 8).  Lq is the
 * query rows a unit of a rows run's last layer holds (engine.h). */
static size_t lane_buf_n(const refenc_mpe_unit *u, size_t i)
{
    const size_t qt = u->Lseq * u->D > u->Lq * u->E ? u->Lseq * u->D : u->Lq * u->E;
    return i < 2 ? u->Lseq * u->D : i == 2 ? qt : i == 5 ? u->Lq * u->E : u->Lseq * u->Hkv * u->Dh;
}

static void lane_free(refenc_mpe_lane *ln)
{
    mpfr_ptr *bufs[] = {&ln->h, &ln->a, &ln->q, &ln->k, &ln->v, &ln->ctx}; /* t is q */
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        refenc_mp_block_free(*bufs[i]);
    refenc_mp_block_free(ln->hid);
    refenc_mp_block_free(ln->slopes);
    free(ln->exact);
    memset(ln, 0, sizeof *ln);
}

static int lane_alloc(refenc_mpe_lane *ln, const refenc_mpe_unit *u, mpfr_prec_t p)
{
    const size_t LD = u->L * u->D, hid = lane_hid(u);
    memset(ln, 0, sizeof *ln);
    ln->p = p;
    mpfr_ptr *bufs[] = {&ln->h, &ln->a, &ln->q, &ln->k, &ln->v, &ln->ctx};
    int ok = 1;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ok &= (*bufs[i] = refenc_mp_block_alloc(lane_buf_n(u, i), p)) != NULL;
    ln->t = ln->q;
    ok &= hid == 0 || (ln->hid = refenc_mp_block_alloc(hid, p)) != NULL;
    ok &= (ln->slopes = refenc_mp_block_alloc(u->H, p)) != NULL;
    ok &= (ln->exact = malloc(LD)) != NULL;
    return ok;
}

static void worker_free(refenc_mpe_worker *w)
{
    for (int li = 0; li < 2; li++) {
        refenc_mp_ws_free(&w->ws[li]);
        refenc_mp_block_free(w->weights[li]);
        refenc_mp_block_free(w->out[li]);
        refenc_mp_block_free(w->hidden[li]);
    }
    mpfr_clear(w->t);
    mpfr_clear(w->u);
}

static int worker_alloc(refenc_mpe_worker *w, const refenc_mpe_unit *u)
{
    memset(w, 0, sizeof *w);
    mpfr_init2(w->t, 64);
    mpfr_init2(w->u, 64);
    int ok = 1;
    for (int li = 0; li < u->lanes_n; li++) {
        const mpfr_prec_t p = u->lanes[li].p;
        ok &= refenc_mp_ws_alloc(&w->ws[li], p, refenc_mpk_ws_tmp(u->W, u->F, u->L, u->Dh),
                                 refenc_mpk_ws_ptr(u->W, u->F, u->L, u->Dh)) == REFENC_OK;
        ok &= (w->weights[li] = refenc_mp_block_alloc(u->Lq * u->Lseq, p)) != NULL; /* (Lq, L) */
        ok &= (w->out[li] = refenc_mp_block_alloc(u->Lq * u->Dh, p)) != NULL;
        ok &= (w->hidden[li] = refenc_mp_block_alloc(refenc_config_ffn_rows(u->cfg), p)) != NULL; /* GLU: a, b */
    }
    return ok;
}

/* n MPFR numbers at precision p as refenc_mp_alloc makes them: the
 * structs, and each value's limbs in a malloc chunk of their own (MPFR keeps
 * one more limb for the size; glibc's chunk adds 8 bytes and rounds to 16,
 * 32 at least). */
static double mp_bytes(double n, mpfr_prec_t p)
{
    const double limbs = (double)(((size_t)p + 63) / 64) + 1, chunk = 16 * ceil((8 * limbs + 8) / 16);
    return n * ((double)sizeof(__mpfr_struct) + fmax(chunk, 32));
}

/* n MPFR numbers at precision p as refenc_mp_block_alloc makes them (the
 * lanes' and the workers' buffers): the structs and their limbs in one
 * block, 32 + 8 ceil(p / 64) bytes a value (malloc's header, once an
 * array, is in the estimate's slack). */
static double mp_block_bytes(double n, mpfr_prec_t p)
{
    return n * ((double)sizeof(__mpfr_struct) + (double)mpfr_custom_get_size(p));
}

/* A kernel workspace at precision p for n_tmp values and n_ptr terms
 * (ziv.c: refenc_mp_ws_alloc): tmp at p, products at 2p, pointers, the
 * accumulators, the decoded row and its fixed-point copy, the operands. */
static double ws_bytes(double n_tmp, double n_ptr, mpfr_prec_t p)
{
    const double op_limbs = (double)(((size_t)p + 63) / 64), acc_limbs = 2 * op_limbs + 68;
    return mp_bytes(n_tmp, p) + mp_bytes(n_ptr, 2 * p) + mp_bytes(1, 53) + 131 * acc_limbs * 8 +
           n_ptr * (2 * sizeof(mpfr_ptr) + sizeof(size_t) + 3 * sizeof(refenc_mp_operand) + 8 * (op_limbs + 2));
}

/* One thread's workspace and buffers at precision p: a head's weights and
 * context, an FFN row. */
static double worker_bytes(const refenc_config *cfg, size_t L, mpfr_prec_t p)
{
    const size_t F = cfg->d_ff, Dh = refenc_config_head_dim(cfg), E = cfg->n_heads * Dh;
    const size_t W = cfg->d_model > E ? cfg->d_model : E; /* the longest dot product: D or E */
    return mp_block_bytes((double)L * L + (double)L * Dh + (double)refenc_config_ffn_rows(cfg), p) +
           ws_bytes((double)refenc_mpk_ws_tmp(W, F, L, Dh), (double)refenc_mpk_ws_ptr(W, F, L, Dh), p);
}

size_t refenc_mp_encoder_run_bytes(const refenc_config *cfg, size_t L, int threads, mpfr_prec_t prec)
{
    const double D = (double)cfg->d_model, H = (double)cfg->n_heads, F = (double)cfg->d_ff, LD = (double)L * D;
    const mpfr_prec_t p[2] = {prec, refenc_mp_next_prec(prec, 0)};
    double bytes = 0;
    const double E = H * (double)refenc_config_head_dim(cfg), LE = (double)L * E;
    const double LKV = (double)L * (double)refenc_config_kv_heads(cfg) * (double)refenc_config_head_dim(cfg);
    const double R = (double)refenc_config_qkv_rows(cfg); /* in_proj's rows: E + 2 Hkv Dh */
    for (int li = 0; li < 2; li++) /* the lanes (h, a; q and t; ctx; k, v), exact flags, threads' buffers */
        bytes += mp_block_bytes(2 * LD + (double)L * fmax(D, E) + LE + 2 * LKV + H, p[li]) + LD + threads * worker_bytes(cfg, L, p[li]);
    bytes += 8 * fmax(fmax(LD, H * L * L), (double)L * F); /* a step's doubles */
    bytes += 32 * (double)L + threads * (double)sizeof(refenc_mpe_worker); /* positions, ids; the workers */
    /* one block's weights in fixed point (U, and at most one outlier index
     * each): the attention's or the FFN's, whichever is larger */
    const double F1 = (double)refenc_config_ffn_rows(cfg); /* linear1's rows: 2F gated */
    bytes += 16 * fmax(R * D + D * E, D * F + D * F1) + 8 * 4 * (fmax(R + D, F1 + D) + 2);
    bytes += mp_bytes(fmax(L, 2) * D + 8 * D + (double)L * L + 5, 53); /* tables, the norms (sandwiched: 8 D), mask, scalars */
    /* what the model does not count: MPFR's own temporaries inside its
     * functions and malloc's bookkeeping, which depend on the values (one
     * seed of twelve measured 56 bytes above the model); a page a thread */
    bytes += 4096.0 * (threads + 1);
    return bytes > (double)(SIZE_MAX / 2) ? 0 : (size_t)bytes;
}

/* ---- a unit --------------------------------------------------------------------------------- */

static int unit_alloc(refenc_mpe_unit *u, mpfr_prec_t p_lo, mpfr_prec_t p_hi, int *n_workers)
{
    memset(u->workers, 0, (size_t)u->threads * sizeof *u->workers);
    memset(u->lanes, 0, sizeof u->lanes);
    int ok = lane_alloc(&u->lanes[0], u, p_lo);
    if (u->lanes_n == 2)
        ok &= lane_alloc(&u->lanes[1], u, p_hi);
    for (*n_workers = 0; ok && *n_workers < u->threads; (*n_workers)++)
        ok &= worker_alloc(&u->workers[*n_workers], u);
    return ok;
}

static void unit_free(refenc_mpe_unit *u, int n_workers)
{
    for (int t = 0; t < n_workers; t++)
        worker_free(&u->workers[t]);
    lane_free(&u->lanes[0]);
    lane_free(&u->lanes[1]);
}

/* The lanes' ALiBi slopes: the run's (given doubles), the bug variant's,
 * or the exact ones; negated under alibi_bias_positive. */
static void unit_slopes(refenc_mpe_unit *u)
{
    const refenc_mp_hooks *hooks = u->run->hooks;
    REFENC_MPE_LANES(u, li) {
        refenc_mp_ws *ws = &u->workers[0].ws[li];
        refenc_mpe_inexact_begin();
        refenc_mpk_alibi_slopes_of(u->lanes[li].slopes, u->H, u->run->alibi_slopes, hooks, ws);
        refenc_mpe_inexact_end(u, li);
    }
}

/* h = the stored double input of the unit (in.x, or a layer's input), exactly */
static void unit_load(refenc_mpe_unit *u, const double *x)
{
    REFENC_MPE_LANES(u, li) {
        refenc_mp_set_d(u->lanes[li].h, x + u->item * u->L * u->D, u->L * u->D);
        u->lanes[li].inexact = 0;
    }
}

/* Layers first .. last on h; 0 if a step is not certified, -1 out of memory. */
static int unit_layers(refenc_mpe_unit *u, size_t first, size_t last)
{
    int ok = 1;
    for (size_t i = first; ok && i <= last; i++) {
        refenc_mpe_layer lm;
        if (!refenc_mpe_layer_init(&lm, &u->run->params->layers[i], u->cfg))
            return -1;
        ok = refenc_mpe_layer_run(u, &lm, i);
        refenc_mpe_layer_free(&lm, u->D);
    }
    return ok;
}

/* "embedding" (D) from the final output `which` (pooling.c), in the
 * table's first row, free here. */
static int unit_pool(refenc_mpe_unit *u, int which)
{
    const refenc_config *cfg = u->cfg;
    const uint8_t *pad = u->run->in->key_padding_mask;
    const int ignore = u->run->hooks != NULL && u->run->hooks->pooling_ignores_padding;
    const uint8_t *m = pad != NULL && !ignore ? pad + u->item * u->L : NULL;
    mpfr_ptr e[2];
    REFENC_MPE_LANES(u, li) {
        e[li] = refenc_mpe_buf(u, li, MPE_T); /* t (L, D): the sublayers' output, free after the stack */
        refenc_mpe_inexact_begin();
        refenc_mpk_pooling_forward(e[li], refenc_mpe_buf(u, li, which), m, u->L, u->D, cfg->pooling,
                                   cfg->pooling_normalize, &u->workers[0].ws[li]);
        refenc_mpe_inexact_end(u, li);
    }
    const size_t shape[1] = {u->D};
    mpfr_srcptr data[2] = {e[0], e[u->lanes_n - 1]};
    return refenc_mpe_step(u, "embedding", data, u->D, NULL, 1, shape);
}

/* The final norm (if any), "output" and the pooled "embedding" (if any). */
static int unit_final(refenc_mpe_unit *u)
{
    const refenc_params *p = u->run->params;
    int ok;
    if (u->cfg->final_norm) {
        mpfr_ptr g = u->table, b = u->table + u->D; /* the table's first rows: free here */
        refenc_mp_set_d(g, p->norm_weight, u->D);
        if (p->norm_bias != NULL) /* RMSNorm and a bias-free LayerNorm have none */
            refenc_mp_set_d(b, p->norm_bias, u->D);
        refenc_mpe_layernorm(u, MPE_A, MPE_H, g, p->norm_bias != NULL ? b : NULL, u->eps);
        ok = refenc_mpe_step_buf(u, "norm", MPE_A) && refenc_mpe_step_buf(u, "output", MPE_A);
    } else {
        ok = refenc_mpe_step_buf(u, "output", MPE_H);
    }
    if (ok && u->cfg->pooling != REFENC_POOL_NONE)
        ok = unit_pool(u, u->cfg->final_norm ? MPE_A : MPE_H);
    if (ok)
        refenc_mpe_progress(u, "output", 0);
    return ok;
}

/* The computation of a unit: the encoder (embedding, layers, final norm),
 * its layers from stored inputs, or one block of layer 0 on in.x.
 * Returns 1 (certified), 0 (evaluate again) or -1 (out of memory). */
static int unit_compute(refenc_mpe_unit *u, size_t first, size_t last)
{
    const refenc_mp_run *run = u->run;
    if (run->block != REFENC_MP_BLOCK_ENCODER) {
        refenc_mpe_layer lm;
        if (!refenc_mpe_layer_init(&lm, &run->params->layers[0], u->cfg))
            return -1;
        u->lm = &lm;
        unit_load(u, run->in->x);
        unit_slopes(u);
        const int ok = run->block == REFENC_MP_BLOCK_MHA ? refenc_mpe_mha(u, MPE_H, "weights", "output")
                                                         : refenc_mpe_ffn(u, MPE_H, "hidden", "output");
        refenc_mpe_layer_free(&lm, u->D);
        return ok;
    }
    int ok = 1;
    if (first == 0)
        ok = refenc_mpe_embed(u);
    if (ok && run->layer_inputs != NULL) /* the layer's input is the stored double, exactly */
        unit_load(u, run->layer_inputs[first]);
    if (ok)
        unit_slopes(u);
    if (ok)
        ok = unit_layers(u, first, last);
    if (ok == 1 && last == u->N - 1)
        ok = unit_final(u);
    return ok;
}

/* Runs unit (first .. last, item) with lanes at p_lo (and p_hi).
 * Returns REFENC_OK with *certified 1, or 0 (evaluate again), or an error. */
static int run_unit(refenc_mpe_unit *u, size_t first, size_t last, mpfr_prec_t p_lo,
                    mpfr_prec_t p_hi, int *certified, refenc_error *err)
{
    int n_workers = 0, st = REFENC_OK;
    *certified = 0;
    u->failed = 0;
    u->oom = 0;
    /* a unit of the last layer alone, with selected rows, holds R query rows
     * in its heads' buffers; every other unit all L */
    const refenc_input *in = u->run->in;
    u->L = u->Lseq, u->qrows = NULL, u->kv_ready = 0;
    u->Lq = in->rows != NULL && first == last && last == u->N - 1 && u->run->block == REFENC_MP_BLOCK_ENCODER
                ? in->R : u->Lseq;
    if (!unit_alloc(u, p_lo, p_hi, &n_workers)) {
        st = refenc_mp_enomem(err, "one batch item", u->lanes_n == 2 ? p_hi : p_lo);
    } else {
        const int ok = unit_compute(u, first, last);
        u->L = u->Lseq, u->qrows = NULL, u->kv_ready = 0; /* the next unit starts from every row */
        if (ok < 0 || u->oom)
            st = refenc_mp_enomem(err, "a layer's parameters", 53);
        *certified = ok == 1;
    }
    unit_free(u, n_workers);
    return st;
}

/* ---- the run -------------------------------------------------------------------------------- */

/* Ziv's loop for unit k: pairs of precisions until it is certified (one
 * evaluation for a one-lane run). */
static int run_unit_ziv(refenc_mpe_unit *u, size_t k, refenc_mp_report *rep)
{
    const int per_layer = u->run->layer_inputs != NULL;
    const size_t first = per_layer ? k / u->B : 0, last = per_layer ? first : u->N - 1;
    u->item = k % u->B;
    u->unit = k;
    mpfr_prec_t p_lo = u->run->prec;
    const double done0 = u->done;
    for (unsigned step = 0;; step++) {
        const mpfr_prec_t p_hi = refenc_mp_next_prec(p_lo, step);
        if (u->lanes_n == 2 && p_hi > REFENC_MP_PREC_MAX)
            return refenc_error_set(&rep->error, REFENC_ELIMIT, "%s", u->fail);
        int certified, st;
        u->done = done0;
        if ((st = run_unit(u, first, last, p_lo, p_hi, &certified, &rep->error)) != REFENC_OK)
            return st;
        if (certified) {
            rep->prec = p_lo > rep->prec ? p_lo : rep->prec;
            if (u->lanes_n == 2 && p_hi > rep->prec_check)
                rep->prec_check = p_hi;
            if (u->lanes_n == 2 && step + 2 > rep->evaluations)
                rep->evaluations = step + 2;
            return REFENC_OK;
        }
        p_lo = p_hi;
    }
}

static int run_check(const refenc_mp_run *run, size_t units, refenc_error *err)
{
    int st = REFENC_OK;
    if (run->block == REFENC_MP_BLOCK_ENCODER && (st = refenc_input_validate(run->in, run->cfg, err)) != REFENC_OK)
        return st;
    if (run->unit_begin > run->unit_end || run->unit_end > units || run->threads < 1)
        return refenc_error_set(err, REFENC_EINVAL, "oracle: units [%zu, %zu) of %zu, %d threads",
                                run->unit_begin, run->unit_end, units, run->threads);
    if (run->prec < REFENC_MP_PREC_MIN || run->prec > REFENC_MP_PREC_MAX)
        return refenc_error_set(err, REFENC_EINVAL, "oracle: precision %ld bits is outside [%ld, %ld]",
                                (long)run->prec, (long)REFENC_MP_PREC_MIN, (long)REFENC_MP_PREC_MAX);
    return REFENC_OK;
}

static void run_free(refenc_mpe_unit *u, int64_t *pos_default)
{
    const size_t L = u->L, D = u->D;
    free(pos_default);
    free(u->rows), free(u->workers), free(u->dbl), free(u->zeros), free(u->ids);
    refenc_mp_free(u->eps, 1), refenc_mp_free(u->tau, 1), refenc_mp_free(u->base, 1);
    refenc_mp_free(u->emb_eps, 1);
    refenc_mp_free(u->base_local, 1), refenc_mp_free(u->base_global, 1);
    refenc_mp_free(u->scalar, 1), refenc_mp_free(u->cap, 1);
    refenc_mp_free(u->mask, L * L);
    refenc_mp_free(u->table, (L > 2 ? L : 2) * D);
}

/* The RoPE bases of the local and global layers of a pattern: each its own
 * theta, or rope_base where that theta is 0.  0 on allocation failure. */
static int pattern_bases(refenc_mpe_unit *u, const refenc_config *cfg)
{
    const double *local = cfg->local_rope_theta > 0 ? &cfg->local_rope_theta : &cfg->rope_base;
    const double *global = cfg->global_rope_theta > 0 ? &cfg->global_rope_theta : &cfg->rope_base;
    u->base_local = refenc_mp_from_d(local, 1, 53);
    u->base_global = refenc_mp_from_d(global, 1, 53);
    return u->base_local != NULL && u->base_global != NULL;
}

/* What every unit of the run shares: sizes, the hyper-parameters at 53
 * bits, the mask, a table's rows, positions.  0 on allocation failure. */
static int run_alloc(refenc_mpe_unit *u, const refenc_mp_run *run, int64_t **pos_default)
{
    const refenc_config *cfg = run->cfg;
    memset(u, 0, sizeof *u);
    u->run = run, u->cfg = cfg, u->threads = run->threads, u->lanes_n = run->one_evaluation ? 1 : 2;
    u->B = run->in->B, u->L = run->in->L, u->D = cfg->d_model, u->H = cfg->n_heads, u->F = cfg->d_ff;
    u->Dh = refenc_config_head_dim(cfg), u->N = cfg->n_layers, u->Hkv = refenc_config_kv_heads(cfg);
    u->E = u->H * u->Dh, u->W = u->E > u->D ? u->E : u->D;
    u->Lseq = u->Lq = u->L;
    /* the heads' weights step: (H, R, L) when the only layer has selected rows */
    const size_t Lq = run->in->rows != NULL && u->N == 1 ? run->in->R : u->L;
    const size_t L = u->L, D = u->D, LD = L * D, HLL = u->H * Lq * L, LF = L * u->F;
    *pos_default = refenc_alloc_array(L, sizeof **pos_default);
    u->rows = refenc_alloc_array(L, sizeof *u->rows);
    u->workers = refenc_alloc_array((size_t)u->threads, sizeof *u->workers);
    u->dbl = refenc_alloc_array(LD > HLL ? (LD > LF ? LD : LF) : (HLL > LF ? HLL : LF), sizeof *u->dbl);
    u->eps = refenc_mp_from_d(&cfg->layer_norm_eps, 1, 53);
    u->tau = refenc_mp_from_d(&cfg->temperature, 1, 53);
    u->base = refenc_mp_from_d(&cfg->rope_base, 1, 53);
    u->mask = run->in->attn_mask ? refenc_mp_from_d(run->in->attn_mask, L * L, 53) : NULL;
    u->emb_eps = refenc_mp_from_d(&cfg->embedding_norm_eps, 1, 53);
    if (cfg->query_pre_attn_scalar != 0 && !(u->scalar = refenc_mp_from_d(&cfg->query_pre_attn_scalar, 1, 53)))
        return 0;
    if ((cfg->global_attn_every_n_layers != 0 || cfg->sliding_window_pattern != 0) && !pattern_bases(u, cfg))
        return 0;
    if (cfg->attn_logit_softcapping != 0 && !(u->cap = refenc_mp_from_d(&cfg->attn_logit_softcapping, 1, 53)))
        return 0;
    u->table = refenc_mp_alloc((L > 2 ? L : 2) * D, 53); /* 2 rows at least: a LayerNorm's weight, bias */
    u->zeros = calloc(L, sizeof *u->zeros);
    u->ids = refenc_alloc_array(L, sizeof *u->ids);
    if (!*pos_default || !u->rows || !u->workers || !u->dbl || !u->eps || !u->tau || !u->base ||
        (run->in->attn_mask && !u->mask) || !u->emb_eps || !u->table || !u->zeros || !u->ids)
        return 0;
    for (size_t l = 0; l < L; l++)
        (*pos_default)[l] = u->rows[l] = (int64_t)l;
    u->pos = run->in->positions != NULL ? run->in->positions : *pos_default;
    return 1;
}

int refenc_mp_encoder_run(const refenc_mp_run *run, refenc_mp_report *rep)
{
    refenc_mp_report local;
    if (rep == NULL)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    const int per_layer = run->layer_inputs != NULL;
    const size_t units = refenc_mp_encoder_units(run->cfg, run->in->B, per_layer && run->block == 0);
    int st = run_check(run, units, &rep->error);
    if (st != REFENC_OK)
        return st;
    refenc_mpe_unit u;
    int64_t *pos_default = NULL;
    if (!run_alloc(&u, run, &pos_default)) {
        run_free(&u, pos_default);
        return refenc_mp_enomem(&rep->error, "the encoder run", 53);
    }
    u.units = units;
    for (size_t k = run->unit_begin; k < run->unit_end; k++)
        u.total += refenc_mp_encoder_unit_work(run->cfg, u.L, per_layer, per_layer ? k / u.B : 0);
    const mpfr_flags_t saved = mpfr_flags_save(); /* the caller's flags are restored on return */
    rep->evaluations = u.lanes_n;
    for (size_t k = run->unit_begin; k < run->unit_end && st == REFENC_OK; k++)
        st = run_unit_ziv(&u, k, rep);
    mpfr_flags_restore(saved, MPFR_FLAGS_ALL);
    /* MPFR's caches (constants, exp's tables) are per thread: the threads'
     * are freed here, not left to outlive the run */
#pragma omp parallel num_threads(u.threads)
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    run_free(&u, pos_default);
    return st;
}

size_t refenc_mp_encoder_units(const refenc_config *cfg, size_t B, int per_layer)
{
    return per_layer ? cfg->n_layers * B : B;
}

double refenc_mp_encoder_unit_work(const refenc_config *cfg, size_t L, int per_layer, size_t layer)
{
    (void)layer;
    const double w = refenc_mpe_layer_work(cfg, L);
    return per_layer ? w : (double)cfg->n_layers * w;
}
