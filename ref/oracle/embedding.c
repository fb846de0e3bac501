/* Token embeddings in MPFR (embedding.h):
 *   forward  x[b,l,:] = table[tokens[b,l],:] s,  s = sqrt(D) or its rounding
 *            to a dtype
 *   lookup   x[b,l,:] = table[tokens[b,l],:]
 *   add      y[b,l,:] = x[b,l,:] + table[ids[b,l],:] */
#include "internal.h"

/* The significand of the normaliser's dtype (IEEE binary64, binary32,
 * bfloat16's 8 bits, binary16); 0: exact. */
static mpfr_prec_t normalizer_prec(refenc_normalizer_dtype dtype)
{
    switch (dtype) {
    case REFENC_NORMALIZER_FLOAT64: return 53;
    case REFENC_NORMALIZER_FLOAT32: return 24;
    case REFENC_NORMALIZER_BFLOAT16: return 8;
    case REFENC_NORMALIZER_FLOAT16: return 11;
    default: return 0;
    }
}

void refenc_mpk_embedding_forward(mpfr_ptr x, unsigned char *exact, const int64_t *tokens,
                                  mpfr_srcptr table, size_t B, size_t L, size_t D,
                                  refenc_normalizer_dtype dtype, refenc_mp_ws *ws)
{
    mpfr_ptr scale = ws->tmp;
    int scale_exact = mpfr_sqrt_ui(scale, D, MPFR_RNDN) == 0; /* D a perfect square */
    const mpfr_prec_t p = normalizer_prec(dtype);
    if (p != 0) { /* sqrt(D) rounded once to p bits: a number of the model's dtype, exact from here */
        mpfr_t s;
        mpfr_init2(s, p);
        mpfr_sqrt_ui(s, D, MPFR_RNDN);
        mpfr_set(scale, s, MPFR_RNDN); /* exact: p <= the working precision */
        mpfr_clear(s);
        scale_exact = 1;
    }
    for (size_t bl = 0; bl < B * L; bl++) {
        mpfr_srcptr row = table + (size_t)tokens[bl] * D; /* table[tokens[b,l],:] */
        for (size_t d = 0; d < D; d++) {
            const int t = mpfr_mul(x + bl * D + d, row + d, scale, MPFR_RNDN);
            if (exact != NULL)
                exact[bl * D + d] = scale_exact && t == 0;
        }
    }
}

void refenc_mpk_embedding_lookup(mpfr_ptr x, unsigned char *exact, const int64_t *tokens,
                                 mpfr_srcptr table, size_t B, size_t L, size_t D)
{
    for (size_t bl = 0; bl < B * L; bl++) {
        mpfr_srcptr row = table + (size_t)tokens[bl] * D; /* table[tokens[b,l],:] */
        for (size_t d = 0; d < D; d++) {
            const int t = mpfr_set(x + bl * D + d, row + d, MPFR_RNDN); /* exact: prec >= 53 */
            if (exact != NULL)
                exact[bl * D + d] = t == 0;
        }
    }
}

void refenc_mpk_embedding_add(mpfr_ptr y, unsigned char *exact, mpfr_srcptr x,
                              const int64_t *ids, mpfr_srcptr table, size_t B, size_t L,
                              size_t D)
{
    for (size_t bl = 0; bl < B * L; bl++) {
        mpfr_srcptr row = table + (size_t)ids[bl] * D; /* table[ids[b,l],:] */
        for (size_t d = 0; d < D; d++) {
            const int t = mpfr_add(y + bl * D + d, x + bl * D + d, row + d, MPFR_RNDN);
            if (exact != NULL)
                exact[bl * D + d] = exact[bl * D + d] && t == 0;
        }
    }
}

typedef struct {
    const int64_t *tokens;
    const double *table;
    size_t B, L, V, D;
    int scaled;
} emb_args;

static int emb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const emb_args *a = ctx;
    const size_t n = a->B * a->L * a->D;
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 1, 1);
    mpfr_ptr t = refenc_mp_from_d(a->table, a->V * a->D, 53);
    mpfr_ptr x = refenc_mp_alloc(n, prec);
    if (st || !t || !x) {
        st = refenc_mp_enomem(err, "embedding", prec);
    } else {
        if (a->scaled)
            refenc_mpk_embedding_forward(x, NULL, a->tokens, t, a->B, a->L, a->D, REFENC_NORMALIZER_EXACT, &ws);
        else
            refenc_mpk_embedding_lookup(x, NULL, a->tokens, t, a->B, a->L, a->D);
        const size_t shape[3] = {a->B, a->L, a->D};
        st = refenc_mp_sink_emit(sink, "x", x, 3, shape);
    }
    refenc_mp_free(x, n);
    refenc_mp_free(t, a->V * a->D);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_embedding_forward(double *x, const int64_t *tokens, const double *table,
                                size_t B, size_t L, size_t V, size_t D,
                                mpfr_prec_t prec, refenc_mp_report *rep)
{
    emb_args a = {tokens, table, B, L, V, D, 1};
    const refenc_mp_output outs[] = {{"x", x}};
    return refenc_mp_run_twin(emb_eval, &a, prec, rep, outs, 1);
}

int refenc_mp_embedding_lookup(double *x, const int64_t *tokens, const double *table,
                               size_t B, size_t L, size_t V, size_t D,
                               mpfr_prec_t prec, refenc_mp_report *rep)
{
    emb_args a = {tokens, table, B, L, V, D, 0};
    const refenc_mp_output outs[] = {{"x", x}};
    return refenc_mp_run_twin(emb_eval, &a, prec, rep, outs, 1);
}

typedef struct {
    const double *x, *table;
    const int64_t *ids;
    size_t B, L, R, D;
} add_args;

static int add_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const add_args *a = ctx;
    const size_t n = a->B * a->L * a->D;
    int st;
    mpfr_ptr y = refenc_mp_from_d(a->x, n, prec); /* in place */
    mpfr_ptr t = refenc_mp_from_d(a->table, a->R * a->D, 53);
    if (!y || !t) {
        st = refenc_mp_enomem(err, "embedding add", prec);
    } else {
        refenc_mpk_embedding_add(y, NULL, y, a->ids, t, a->B, a->L, a->D);
        const size_t shape[3] = {a->B, a->L, a->D};
        st = refenc_mp_sink_emit(sink, "y", y, 3, shape);
    }
    refenc_mp_free(t, a->R * a->D);
    refenc_mp_free(y, n);
    return st;
}

int refenc_mp_embedding_add(double *y, const double *x, const int64_t *ids, const double *table,
                            size_t B, size_t L, size_t R, size_t D,
                            mpfr_prec_t prec, refenc_mp_report *rep)
{
    add_args a = {x, table, ids, B, L, R, D};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(add_eval, &a, prec, rep, outs, 1);
}
