/* The embeddings' backwards in MPFR, from embedding.h and learned_pe.h:
 * scatter-add of the gradient into the table's rows, accumulated (+=):
 *   refenc_embedding_backward          dtable[tokens[b,l],:] += dx[b,l,:] * sqrt(D)
 *   refenc_embedding_lookup_backward   dtable[tokens[b,l],:] += dx[b,l,:]
 *   refenc_embedding_add_backward      dtable[ids[b,l],:]    += dy[b,l,:]
 *   refenc_learned_pe_backward         dtable[pos[l],:]      += sum_b dy[b,l,:]
 * A row that occurs k times receives the sum of its k gradients; rows that
 * do not occur are unchanged.  Without a factor, each element is the starting
 * value plus the sum of its terms, rounded once (mpfr_sum): usually exact at
 * the working precision, and certified as such; with sqrt(D), the sum is
 * rounded, then multiplied and added with one rounding (mpfr_fma), and Ziv's
 * loop certifies the result. */
#include "backward.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Whether row n is the first that reads its table row. */
static int first_reader(const int64_t *ids, size_t n)
{
    for (size_t m = 0; m < n; m++)
        if (ids[m] == ids[n])
            return 0;
    return 1;
}

void refenc_mpk_scatter_add_backward(mpfr_ptr dtable, mpfr_srcptr dy, const int64_t *ids,
                                     size_t N, size_t R, size_t D, mpfr_srcptr scale,
                                     unsigned char *ex, refenc_mp_ws *ws)
{
    mpfr_ptr t = ws->tmp;
    if (ex != NULL) /* rows no token reads keep their starting values: exact */
        memset(ex, 1, R * D);
    for (size_t n0 = 0; n0 < N; n0++) { /* each table row read, once: O(N^2 + N D), not O(R N D) */
        if (!first_reader(ids, n0))
            continue;
        const size_t r = (size_t)ids[n0];
        for (size_t d = 0; d < D; d++) {
            size_t m = 0;
            for (size_t n = n0; n < N; n++) /* the rows that read table row r */
                if (ids[n] == ids[n0])
                    ws->pa[m++] = (mpfr_ptr)(dy + n * D + d);
            mpfr_ptr e = dtable + r * D + d;
            const int was = refenc_mpb_exact_begin();
            if (scale != NULL) { /* e + s (sum) */
                mpfr_sum(t, ws->pa, m, MPFR_RNDN);
                mpfr_fma(e, t, scale, e, MPFR_RNDN);
            } else {             /* e + sum, one rounding */
                ws->pa[m++] = e;
                mpfr_sum(t, ws->pa, m, MPFR_RNDN);
                mpfr_set(e, t, MPFR_RNDN);
            }
            const unsigned char exact = refenc_mpb_exact_end(was);
            if (ex != NULL)
                ex[r * D + d] = exact;
        }
    }
}

typedef struct {
    const double *dy, *start;
    const int64_t *ids;
    size_t N, R, D;
    int scaled;
} scat_args;

static int scat_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const scat_args *a = ctx;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 2, a->N + 1);
    mpfr_ptr dy = refenc_mp_arena_from_d(&ar, a->dy, a->N * a->D, 53);
    mpfr_ptr dt = refenc_mp_arena_from_d(&ar, a->start, a->R * a->D, prec);
    unsigned char *ex = malloc(a->R * a->D); /* which values are exact */
    if (st || ar.failed || ex == NULL) {
        st = refenc_mp_enomem(err, "embedding backward", prec);
    } else {
        mpfr_ptr scale = NULL;
        if (a->scaled) {
            scale = ws.tmp + 1;
            mpfr_sqrt_ui(scale, a->D, MPFR_RNDN);
        }
        refenc_mpk_scatter_add_backward(dt, dy, a->ids, a->N, a->R, a->D, scale, ex, &ws);
        const size_t shape[2] = {a->R, a->D};
        st = refenc_mp_sink_emit_exact(sink, "dtable", dt, ex, 2, shape);
    }
    free(ex);
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

static int scatter_twin(double *dtable, const double *dy, const int64_t *ids, size_t N, size_t R,
                        size_t D, int scaled, mpfr_prec_t prec, refenc_mp_report *rep)
{
    double *start = malloc(R * D * sizeof *start); /* the starting values: written over */
    if (start == NULL)
        return refenc_mp_enomem(rep ? &rep->error : NULL, "embedding backward", prec);
    memcpy(start, dtable, R * D * sizeof *start);
    scat_args a = {dy, start, ids, N, R, D, scaled};
    const refenc_mp_output outs[] = {{"dtable", dtable}};
    const int st = refenc_mp_run_twin(scat_eval, &a, prec, rep, outs, 1);
    free(start);
    return st;
}

int refenc_mp_embedding_backward(double *dtable, const double *dx, const int64_t *tokens,
                                 size_t B, size_t L, size_t V, size_t D, int scaled,
                                 mpfr_prec_t prec, refenc_mp_report *rep)
{
    return scatter_twin(dtable, dx, tokens, B * L, V, D, scaled, prec, rep);
}

int refenc_mp_learned_pe_backward(double *dtable, const double *dy, const int64_t *pos, size_t B,
                                  size_t L, size_t P, size_t D, mpfr_prec_t prec,
                                  refenc_mp_report *rep)
{
    int64_t *ids = malloc(B * L * sizeof *ids); /* row (b, l) reads table row pos[l] */
    if (ids == NULL)
        return refenc_mp_enomem(rep ? &rep->error : NULL, "learned PE backward", prec);
    for (size_t b = 0; b < B; b++)
        memcpy(ids + b * L, pos, L * sizeof *ids);
    const int st = scatter_twin(dtable, dy, ids, B * L, P, D, 0, prec, rep);
    free(ids);
    return st;
}
