/* LayerNorm's backward in MPFR, from layernorm.h: with
 * x^ = (x - mu)/sd, sd = sqrt(var + eps) (biased variance), g = dy * gamma:
 *   dx[n,d]    = (g[n,d] - mean_d g[n,:] - x^[n,d] mean_d (g x^)[n,:]) / sd_n
 *   dgamma[d] += sum_n dy[n,d] x^[n,d]       accumulated (+=)
 *   dbeta[d]  += sum_n dy[n,d]               accumulated (+=)
 * mu, var and x^ are computed as the oracle's forward does (correctly rounded
 * sums); the three terms of dx are summed with one rounding (mpfr_sum), so the
 * only losses are the cancellations in x - mu and in that sum, which Ziv's
 * loop detects. */
#include "backward.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* xhat[d] = (x[d] - mu)/sd for one row; *sd set.  tmp: 1 value. */
static void ln_row_xhat(mpfr_ptr xhat, mpfr_ptr sd, mpfr_srcptr x, size_t D, mpfr_srcptr eps,
                        refenc_mp_ws *ws)
{
    for (size_t d = 0; d < D; d++)
        ws->pa[d] = (mpfr_ptr)(x + d);
    mpfr_sum(sd, ws->pa, D, MPFR_RNDN);
    mpfr_div_ui(sd, sd, D, MPFR_RNDN); /* mu */
    for (size_t d = 0; d < D; d++)
        mpfr_sub(xhat + d, x + d, sd, MPFR_RNDN);
    refenc_mp_dot(sd, xhat, 1, xhat, 1, D, NULL, ws);
    mpfr_div_ui(sd, sd, D, MPFR_RNDN); /* biased variance */
    mpfr_add(sd, sd, eps, MPFR_RNDN);
    mpfr_sqrt(sd, sd, MPFR_RNDN);
    for (size_t d = 0; d < D; d++)
        mpfr_div(xhat + d, xhat + d, sd, MPFR_RNDN);
}

/* dx of one row; tmp: g (D), then 4 values. */
static void ln_row_dx(mpfr_ptr dx, mpfr_srcptr dy, mpfr_srcptr xhat, mpfr_srcptr gamma,
                      mpfr_srcptr sd, size_t D, refenc_mp_ws *ws)
{
    mpfr_ptr g = ws->tmp, mg = ws->tmp + D, mgx = ws->tmp + D + 1, t = ws->tmp + D + 2;
    mpfr_ptr u = ws->tmp + D + 3;
    for (size_t d = 0; d < D; d++)
        mpfr_mul(g + d, dy + d, gamma + d, MPFR_RNDN);
    for (size_t d = 0; d < D; d++)
        ws->pa[d] = g + d;
    mpfr_sum(mg, ws->pa, D, MPFR_RNDN);
    mpfr_div_ui(mg, mg, D, MPFR_RNDN);                /* mean(g) */
    refenc_mp_dot(mgx, g, 1, xhat, 1, D, NULL, ws);
    mpfr_div_ui(mgx, mgx, D, MPFR_RNDN);              /* mean(g x^) */
    for (size_t d = 0; d < D; d++) {
        mpfr_mul(t, xhat + d, mgx, MPFR_RNDN);
        mpfr_neg(t, t, MPFR_RNDN);
        mpfr_neg(u, mg, MPFR_RNDN);
        mpfr_ptr terms[3] = {g + d, u, t};
        mpfr_sum(dx + d, terms, 3, MPFR_RNDN);        /* g - mean(g) - x^ mean(g x^) */
        mpfr_div(dx + d, dx + d, sd, MPFR_RNDN);
    }
}

void refenc_mpk_layernorm_backward(mpfr_ptr dx, mpfr_ptr dgamma, mpfr_ptr dbeta, mpfr_ptr xhat,
                                   mpfr_srcptr dy, mpfr_srcptr x, mpfr_srcptr gamma, size_t N,
                                   size_t D, mpfr_srcptr eps, unsigned char *ex_dbeta,
                                   refenc_mp_ws *ws)
{
    mpfr_ptr sd = ws->tmp + D + 4;
    for (size_t n = 0; n < N; n++) {
        ln_row_xhat(xhat + n * D, sd, x + n * D, D, eps, ws);
        ln_row_dx(dx + n * D, dy + n * D, xhat + n * D, gamma, sd, D, ws);
    }
    mpfr_ptr t = ws->tmp; /* the new values, then copied */
    for (size_t d = 0; d < D; d++) {
        refenc_mp_dot(t, dy + d, D, xhat + d, D, N, dgamma + d, ws); /* dgamma0 + sum_n dy x^ */
        mpfr_set(dgamma + d, t, MPFR_RNDN);
        for (size_t n = 0; n < N; n++)
            ws->pa[n] = (mpfr_ptr)(dy + n * D + d);
        if (dbeta == NULL) /* a bias-free LayerNorm (norm_bias false) */
            continue;
        ws->pa[N] = dbeta + d;
        const int exact = mpfr_sum(t, ws->pa, N + 1, MPFR_RNDN) == 0; /* dbeta0 + sum_n dy */
        if (ex_dbeta != NULL)
            ex_dbeta[d] = (unsigned char)exact;
        mpfr_set(dbeta + d, t, MPFR_RNDN);
    }
}

typedef struct {
    const double *dy, *x, *gamma, *dg0, *db0;
    size_t N, D;
    double eps;
} lnb_args;

static int lnb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const lnb_args *a = ctx;
    const size_t N = a->N, D = a->D;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, D + 5, (N > D ? N : D) + 1);
    mpfr_ptr dy = refenc_mp_arena_from_d(&ar, a->dy, N * D, 53);
    mpfr_ptr x = refenc_mp_arena_from_d(&ar, a->x, N * D, 53);
    mpfr_ptr gamma = refenc_mp_arena_from_d(&ar, a->gamma, D, 53);
    mpfr_ptr eps = refenc_mp_arena_from_d(&ar, &a->eps, 1, 53);
    mpfr_ptr dg = refenc_mp_arena_alloc(&ar, D, prec), db = refenc_mp_arena_alloc(&ar, D, prec);
    mpfr_ptr dx = refenc_mp_arena_alloc(&ar, N * D, prec);
    mpfr_ptr xhat = refenc_mp_arena_alloc(&ar, N * D, prec);
    unsigned char *ex = malloc(D); /* which values of dbeta are exact (sums of doubles) */
    if (st || ar.failed || ex == NULL) {
        st = refenc_mp_enomem(err, "layernorm backward", prec);
    } else {
        refenc_mp_set_d(dg, a->dg0, D); /* exact: prec >= 53 */
        refenc_mp_set_d(db, a->db0, D);
        refenc_mpk_layernorm_backward(dx, dg, db, xhat, dy, x, gamma, N, D, eps, ex, &ws);
        const size_t sx[2] = {N, D}, sp[1] = {D};
        st = refenc_mp_sink_emit(sink, "dx", dx, 2, sx);
        if (st == REFENC_OK)
            st = refenc_mp_sink_emit(sink, "dgamma", dg, 1, sp);
        if (st == REFENC_OK)
            st = refenc_mp_sink_emit_exact(sink, "dbeta", db, ex, 1, sp);
    }
    free(ex);
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_layernorm_backward(double *dx, double *dgamma, double *dbeta, const double *dy,
                                 const double *x, const double *gamma, size_t N, size_t D,
                                 double eps, mpfr_prec_t prec, refenc_mp_report *rep)
{
    double *start = malloc(2 * D * sizeof *start); /* dgamma0, dbeta0: written over */
    if (start == NULL)
        return refenc_mp_enomem(rep ? &rep->error : NULL, "layernorm backward", prec);
    memcpy(start, dgamma, D * sizeof *start);
    memcpy(start + D, dbeta, D * sizeof *start);
    lnb_args a = {dy, x, gamma, start, start + D, N, D, eps};
    const refenc_mp_output outs[] = {{"dx", dx}, {"dgamma", dgamma}, {"dbeta", dbeta}};
    const int st = refenc_mp_run_twin(lnb_eval, &a, prec, rep, outs, 3);
    free(start);
    return st;
}
