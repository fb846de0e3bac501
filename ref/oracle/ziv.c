/* Ziv's loop for the oracle: evaluate at two precisions, certify each
 * rounding to double, raise the precision until every value is certified.
 * Also the MPFR arrays and the kernels' workspace. */
#include "internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"

mpfr_prec_t refenc_mp_next_prec(mpfr_prec_t p, unsigned k)
{
    if (k > 20)
        return REFENC_MP_PREC_MAX + 1;
    return p + ((mpfr_prec_t)64 << k);
}

int refenc_mp_sink_emit_exact(const refenc_mp_sink *sink, const char *name, mpfr_srcptr data,
                              const unsigned char *exact, size_t ndim, const size_t *shape)
{
    if (sink == NULL || sink->fn == NULL)
        return REFENC_OK;
    return sink->fn(sink->ctx, name, data, exact, ndim, shape);
}

int refenc_mp_sink_emit(const refenc_mp_sink *sink, const char *name, mpfr_srcptr data,
                        size_t ndim, const size_t *shape)
{
    return refenc_mp_sink_emit_exact(sink, name, data, NULL, ndim, shape);
}

/* ---- arrays ---- */

mpfr_ptr refenc_mp_alloc(size_t n, mpfr_prec_t prec)
{
    if (n == 0 || n > SIZE_MAX / sizeof(__mpfr_struct))
        return NULL;
    mpfr_ptr a = malloc(n * sizeof(__mpfr_struct));
    if (a == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        mpfr_init2(a + i, prec);
        mpfr_set_zero(a + i, 1);
    }
    return a;
}

void refenc_mp_free(mpfr_ptr a, size_t n)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        mpfr_clear(a + i);
    free(a);
}

/* [n structs][n significands of mpfr_custom_get_size(prec) bytes] in one
 * malloc (MPFR's custom interface): 32 + 8 ceil(prec / 64) bytes a value,
 * where refenc_mp_alloc's mpfr_init2 gives each value's limbs and MPFR's
 * size limb a malloc chunk of their own (48 bytes instead of 64 at 96
 * bits, 56 instead of 80 at 160). */
mpfr_ptr refenc_mp_block_alloc(size_t n, mpfr_prec_t prec)
{
    const size_t limbs = mpfr_custom_get_size(prec), each = sizeof(__mpfr_struct) + limbs;
    if (n == 0 || n > SIZE_MAX / each)
        return NULL;
    mpfr_ptr a = malloc(n * each);
    if (a == NULL)
        return NULL;
    char *sig = (char *)(a + n); /* 8-byte aligned: a struct is a multiple of 8 bytes */
    for (size_t i = 0; i < n; i++, sig += limbs) {
        mpfr_custom_init(sig, prec);
        mpfr_custom_init_set(a + i, MPFR_ZERO_KIND, 0, prec, sig); /* +0 */
    }
    return a;
}

void refenc_mp_block_free(mpfr_ptr a)
{
    free(a); /* the structs and every limb */
}

size_t refenc_mp_set_d(mpfr_ptr y, const double *x, size_t n)
{
    /* a double has 53 significant bits: at >= 53 bits the conversion is exact
     * and the ternary value 0; counting the others documents it */
    size_t inexact = 0;
    for (size_t i = 0; i < n; i++)
        if (mpfr_set_d(y + i, x[i], MPFR_RNDN) != 0)
            inexact++;
    return inexact;
}

void refenc_mp_get_d(double *y, mpfr_srcptr x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = mpfr_get_d(x + i, MPFR_RNDN);
}

/* ---- workspace ---- */

int refenc_mp_ws_alloc(refenc_mp_ws *ws, mpfr_prec_t prec, size_t n_tmp, size_t n_ptr)
{
    memset(ws, 0, sizeof *ws);
    ws->prec = prec;
    ws->n_tmp = n_tmp > 0 ? n_tmp : 1;
    ws->n_ptr = n_ptr > 0 ? n_ptr : 1;
    ws->tmp = refenc_mp_alloc(ws->n_tmp, prec);
    ws->prod = refenc_mp_alloc(ws->n_ptr, 2 * prec);
    ws->pa = malloc(ws->n_ptr * sizeof(mpfr_ptr));
    ws->pprod = malloc(ws->n_ptr * sizeof(mpfr_ptr));
    /* the dot product's accumulators: two operands' limbs, 64 limbs (4096
     * bits) of spread between the terms' exponents, headroom */
    const size_t op_limbs = ((size_t)prec + 63) / 64;
    ws->acc_limbs = 2 * op_limbs + 64 + 4;
    /* two sums, the 2 x 64 residue sums of refenc_mp_dot_row_d (zero between
     * calls), and a shifted copy */
    ws->acc = calloc((2 + 128 + 1) * ws->acc_limbs, sizeof *ws->acc);
    ws->wconv = refenc_mp_alloc(1, 53);
    ws->row.idx = malloc(ws->n_ptr * sizeof *ws->row.idx);
    ws->row.op = malloc(ws->n_ptr * sizeof *ws->row.op);
    /* the row's values shifted for the fixed-point weights: an index and
     * op_limbs + 1 limbs each */
    ws->row.fx_x = malloc(ws->n_ptr * (op_limbs + 2) * sizeof *ws->row.fx_x);
    ws->dx = malloc(ws->n_ptr * sizeof *ws->dx);
    ws->dy = malloc(ws->n_ptr * sizeof *ws->dy);
    if (ws->dx == NULL || ws->dy == NULL ||
        ws->tmp == NULL || ws->prod == NULL || ws->pa == NULL || ws->pprod == NULL ||
        ws->acc == NULL || ws->wconv == NULL || ws->row.idx == NULL || ws->row.op == NULL ||
        ws->row.fx_x == NULL) {
        refenc_mp_ws_free(ws);
        return REFENC_ENOMEM;
    }
    for (size_t k = 0; k < ws->n_ptr; k++)
        ws->pprod[k] = ws->prod + k;
    return REFENC_OK;
}

void refenc_mp_ws_free(refenc_mp_ws *ws)
{
    if (ws == NULL)
        return;
    refenc_mp_free(ws->tmp, ws->n_tmp);
    refenc_mp_free(ws->prod, ws->n_ptr);
    free(ws->pa);
    free(ws->pprod);
    free(ws->acc);
    refenc_mp_free(ws->wconv, 1);
    free(ws->row.idx);
    free(ws->row.op);
    free(ws->row.fx_x);
    free(ws->dx);
    free(ws->dy);
    memset(ws, 0, sizeof *ws);
}

static size_t max2(size_t a, size_t b) { return a > b ? a : b; }

size_t refenc_mpk_ws_tmp(size_t D, size_t F, size_t L, size_t Dh)
{
    (void)F;
    /* rope: L Dh + 5; sinusoidal forward: 3D/2 + 3; layernorm: D + 3 */
    return max2(max2(L * Dh + 5, 3 * D / 2 + 3), max2(D + 3, 8));
}

size_t refenc_mpk_ws_ptr(size_t D, size_t F, size_t L, size_t Dh)
{
    return max2(max2(D, F), max2(L, Dh)) + 1;
}

/* ---- Ziv's loop ---- */

/* One step emitted by an evaluation, kept in MPFR at that evaluation's
 * precision. */
typedef struct {
    char name[64];
    size_t ndim, shape[4], n;
    mpfr_ptr v;
    int exact;              /* no inexact operation happened before this step */
    unsigned char *exact_v; /* (n) or NULL: which values are exact            */
} step;

typedef struct {
    step *steps;
    size_t n, cap;
} collection;

static void collection_free(collection *c)
{
    for (size_t i = 0; i < c->n; i++) {
        refenc_mp_free(c->steps[i].v, c->steps[i].n);
        free(c->steps[i].exact_v);
    }
    free(c->steps);
    memset(c, 0, sizeof *c);
}

static int collect(void *ctx, const char *name, mpfr_srcptr data, const unsigned char *exact,
                   size_t ndim, const size_t *shape)
{
    collection *c = ctx;
    if (ndim > 4 || strlen(name) >= sizeof c->steps[0].name)
        return REFENC_EINVAL;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        step *s = realloc(c->steps, cap * sizeof *s);
        if (s == NULL)
            return REFENC_ENOMEM;
        c->steps = s;
        c->cap = cap;
    }
    step *s = &c->steps[c->n];
    memset(s, 0, sizeof *s);
    strcpy(s->name, name);
    s->ndim = ndim;
    s->n = 1;
    for (size_t d = 0; d < ndim; d++) {
        s->shape[d] = shape[d];
        s->n *= shape[d];
    }
    s->exact = !mpfr_flags_test(MPFR_FLAGS_INEXACT);
    c->n++; /* from here on, collection_free frees this step */
    if (exact != NULL && s->n > 0) {
        s->exact_v = malloc(s->n);
        if (s->exact_v == NULL)
            return REFENC_ENOMEM;
        memcpy(s->exact_v, exact, s->n);
    }
    if (s->n > 0) {
        s->v = malloc(s->n * sizeof(__mpfr_struct));
        if (s->v == NULL) {
            s->n = 0;
            return REFENC_ENOMEM;
        }
        for (size_t i = 0; i < s->n; i++) {
            mpfr_init2(s->v + i, mpfr_get_prec(data + i));
            mpfr_set(s->v + i, data + i, MPFR_RNDN); /* same precision: exact */
        }
    }
    return REFENC_OK;
}

/* Runs eval at prec into c, with the MPFR flags cleared before and restored
 * after, so that the inexact flag tells which steps are exact. */
static int evaluate(refenc_mp_eval_fn eval, void *ctx, mpfr_prec_t prec, collection *c,
                    refenc_error *err)
{
    const mpfr_flags_t saved = mpfr_flags_save();
    mpfr_flags_clear(MPFR_FLAGS_ALL);
    const refenc_mp_sink sink = {collect, c};
    int st = eval(ctx, prec, &sink, err);
    mpfr_flags_restore(saved, MPFR_FLAGS_ALL);
    if (st != REFENC_OK && err->status == REFENC_OK)
        refenc_error_set(err, st, "oracle: evaluation at %ld bits failed (%s)", (long)prec,
                         refenc_status_name(st));
    return st;
}

/* |x| >= 2^1024 */
static int past_overflow(mpfr_srcptr x)
{
    return mpfr_inf_p(x) || (mpfr_number_p(x) && !mpfr_zero_p(x) && mpfr_get_exp(x) > 1024);
}

/* Is the rounding of b (at precision p_hi) to the nearest double certified
 * by a (at the lower precision)?  t, u: scratch at 64 bits.  (internal.h:
 * the engine, engine.c, certifies with it too.) */
int refenc_mp_certified(mpfr_srcptr a, mpfr_srcptr b, mpfr_prec_t p_hi, int exact,
                     mpfr_ptr t, mpfr_ptr u)
{
    if (mpfr_nan_p(a) || mpfr_nan_p(b))
        return mpfr_nan_p(a) && mpfr_nan_p(b);
    const double da = mpfr_get_d(a, MPFR_RNDN), db = mpfr_get_d(b, MPFR_RNDN);
    if (memcmp(&da, &db, sizeof da) != 0) /* also tells -0 from +0 */
        return 0;
    if (exact)
        return 1;
    if (isinf(db)) /* both overflow: certified if both are past 2^1024, far beyond the
                      boundary DBL_MAX + ulp/2 = 2^1024 - 2^970 */
        return past_overflow(a) && past_overflow(b);

    /* margin = max(|a - b|, 2^(16 - p_hi) |b|), rounded up */
    mpfr_sub(t, a, b, MPFR_RNDA);
    mpfr_abs(t, t, MPFR_RNDN);
    mpfr_abs(u, b, MPFR_RNDU);
    mpfr_mul_2si(u, u, 16 - (long)p_hi, MPFR_RNDU);
    if (mpfr_cmp(u, t) > 0)
        mpfr_set(t, u, MPFR_RNDU);

    /* dist = distance from b to the nearest rounding boundary, rounded down.
     * The boundaries around db are the midpoints with its two neighbours
     * (computed in MPFR: half the smallest subnormal is not a double); the
     * nearer one is on b's side of db, either side if b == db. */
    const int c = mpfr_cmp_d(b, db);
    const double up = nextafter(db, INFINITY), down = nextafter(db, -INFINITY);
    if (c >= 0 && !isinf(up)) {
        mpfr_set_d(u, up, MPFR_RNDN);          /* 64 bits: exact */
        mpfr_add_d(u, u, db, MPFR_RNDN);       /* neighbours: exact in 64 bits */
        mpfr_div_2ui(u, u, 1, MPFR_RNDN);      /* the upper midpoint */
        mpfr_sub(u, u, b, MPFR_RNDZ);          /* >= 0 */
        if (mpfr_cmp(u, t) <= 0)
            return 0;
    }
    if (c <= 0 && !isinf(down)) {
        mpfr_set_d(u, down, MPFR_RNDN);
        mpfr_add_d(u, u, db, MPFR_RNDN);
        mpfr_div_2ui(u, u, 1, MPFR_RNDN);      /* the lower midpoint */
        mpfr_sub(u, b, u, MPFR_RNDZ);
        if (mpfr_cmp(u, t) <= 0)
            return 0;
    }
    return 1;
}

/* Compares two evaluations; returns the number of uncertified values and
 * describes the first in err. */
static size_t compare(const collection *lo, const collection *hi, mpfr_prec_t p_lo,
                      mpfr_prec_t p_hi, refenc_error *err)
{
    if (lo->n != hi->n) {
        refenc_error_set(err, REFENC_EINVAL, "oracle: %zu steps at %ld bits but %zu at %ld",
                         lo->n, (long)p_lo, hi->n, (long)p_hi);
        return SIZE_MAX;
    }
    mpfr_t t, u;
    mpfr_init2(t, 64);
    mpfr_init2(u, 64);
    size_t bad = 0;
    for (size_t s = 0; s < hi->n; s++) {
        const step *a = &lo->steps[s], *b = &hi->steps[s];
        if (strcmp(a->name, b->name) != 0 || a->n != b->n) {
            refenc_error_set(err, REFENC_EINVAL, "oracle: step %zu is %s at %ld bits but %s at %ld",
                             s, a->name, (long)p_lo, b->name, (long)p_hi);
            bad = SIZE_MAX;
            break;
        }
        for (size_t i = 0; i < b->n; i++) {
            const int exact = b->exact || (b->exact_v != NULL && b->exact_v[i]);
            if (refenc_mp_certified(a->v + i, b->v + i, p_hi, exact, t, u))
                continue;
            if (bad++ == 0)
                refenc_error_set(err, REFENC_ELIMIT,
                                 "oracle: the rounding of %s[%zu] (%.17g) is not certified: "
                                 "%.17g at %ld bits, %.17g at %ld bits; no precision up to %ld "
                                 "bits certified it",
                                 b->name, i, mpfr_get_d(b->v + i, MPFR_RNDN),
                                 mpfr_get_d(a->v + i, MPFR_RNDN), (long)p_lo,
                                 mpfr_get_d(b->v + i, MPFR_RNDN), (long)p_hi,
                                 (long)REFENC_MP_PREC_MAX);
        }
    }
    mpfr_clear(t);
    mpfr_clear(u);
    return bad;
}

/* Gives every step of c to trace, rounded to nearest double. */
static int emit_doubles(const collection *c, const refenc_trace *trace, size_t *values)
{
    *values = 0;
    for (size_t s = 0; s < c->n; s++)
        *values += c->steps[s].n;
    if (trace == NULL || trace->fn == NULL)
        return REFENC_OK;
    for (size_t s = 0; s < c->n; s++) {
        const step *st = &c->steps[s];
        double *d = refenc_alloc_array(st->n, sizeof(double));
        if (d == NULL)
            return REFENC_ENOMEM;
        refenc_mp_get_d(d, st->v, st->n);
        trace->fn(trace->ctx, st->name, d, st->ndim, st->shape);
        free(d);
    }
    return REFENC_OK;
}

int refenc_mp_certify(refenc_mp_eval_fn eval, void *ctx, mpfr_prec_t prec,
                      const refenc_trace *trace, refenc_mp_report *rep)
{
    refenc_mp_report local;
    if (rep == NULL)
        rep = &local;
    memset(rep, 0, sizeof *rep);
    refenc_error *err = &rep->error;
    if (prec < REFENC_MP_PREC_MIN || prec > REFENC_MP_PREC_MAX)
        return refenc_error_set(err, REFENC_EINVAL,
                                "oracle: precision %ld bits is outside [%ld, %ld]", (long)prec,
                                (long)REFENC_MP_PREC_MIN, (long)REFENC_MP_PREC_MAX);

    /* the caller's MPFR flags are restored on return: comparing and rounding
     * set the inexact flag */
    const mpfr_flags_t saved = mpfr_flags_save();
    collection lo = {0}, hi = {0};
    mpfr_prec_t p_lo = prec;
    int st = evaluate(eval, ctx, p_lo, &lo, err);
    rep->evaluations = 1;
    for (unsigned k = 0; st == REFENC_OK; k++) {
        const mpfr_prec_t p_hi = refenc_mp_next_prec(p_lo, k);
        if (p_hi > REFENC_MP_PREC_MAX) {
            st = REFENC_ELIMIT; /* err holds the last uncertified value */
            break;
        }
        collection_free(&hi);
        st = evaluate(eval, ctx, p_hi, &hi, err);
        rep->evaluations++;
        if (st != REFENC_OK)
            break;
        const size_t bad = compare(&lo, &hi, p_lo, p_hi, err);
        if (bad == SIZE_MAX) {
            st = REFENC_EINVAL;
            break;
        }
        if (bad == 0) {
            refenc_error_clear(err);
            rep->prec = p_lo;
            rep->prec_check = p_hi;
            st = emit_doubles(&hi, trace, &rep->values);
            break;
        }
        /* the higher evaluation becomes the lower one of the next pair */
        collection_free(&lo);
        lo = hi;
        memset(&hi, 0, sizeof hi);
        p_lo = p_hi;
    }
    collection_free(&lo);
    collection_free(&hi);
    mpfr_flags_restore(saved, MPFR_FLAGS_ALL);
    if (st != REFENC_OK && err->status == REFENC_OK)
        refenc_error_set(err, st, "oracle: %s", refenc_status_name(st));
    return st;
}
