/* LayerNorm in MPFR, from the formula of layernorm.h:
 *   mu = sum_d x_d / D,   var = sum_d (x_d - mu)^2 / D,
 *   y_d = (x_d - mu) / sqrt(var + eps) * gamma_d + beta_d.
 * The sums are correctly rounded (mpfr_sum, refenc_mp_dot), so the only loss is
 * the cancellation in x_d - mu, relative 2^-p |mu| / |x_d - mu|, which
 * Ziv's loop detects. */
#include "internal.h"

void refenc_mpk_layernorm_forward(mpfr_ptr y, mpfr_srcptr x, mpfr_srcptr gamma,
                                  mpfr_srcptr beta, size_t N, size_t D, mpfr_srcptr eps,
                                  refenc_mp_ws *ws)
{
    mpfr_ptr dev = ws->tmp;              /* (D) x_d - mu */
    mpfr_ptr mu = ws->tmp + D, var = ws->tmp + D + 1, t = ws->tmp + D + 2;
    for (size_t n = 0; n < N; n++) {
        mpfr_srcptr x_n = x + n * D; /* x[n,:] */
        mpfr_ptr y_n = y + n * D;

        for (size_t d = 0; d < D; d++)
            ws->pa[d] = (mpfr_ptr)(x_n + d);
        mpfr_sum(mu, ws->pa, D, MPFR_RNDN);
        mpfr_div_ui(mu, mu, D, MPFR_RNDN);

        for (size_t d = 0; d < D; d++)
            mpfr_sub(dev + d, x_n + d, mu, MPFR_RNDN);
        refenc_mp_dot(var, dev, 1, dev, 1, D, NULL, ws); /* sum of squares */
        mpfr_div_ui(var, var, D, MPFR_RNDN);         /* biased */
        mpfr_add(var, var, eps, MPFR_RNDN);
        mpfr_sqrt(var, var, MPFR_RNDN);              /* sqrt(var + eps) */

        for (size_t d = 0; d < D; d++) {
            mpfr_div(t, dev + d, var, MPFR_RNDN);
            if (beta != NULL)
                mpfr_fma(y_n + d, t, gamma + d, beta + d, MPFR_RNDN);
            else /* bias-free */
                mpfr_mul(y_n + d, t, gamma + d, MPFR_RNDN);
        }
    }
}

typedef struct {
    const double *x, *gamma, *beta;
    size_t N, D;
    double eps;
} ln_args;

static int ln_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const ln_args *a = ctx;
    const size_t ND = a->N * a->D;
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, a->D + 3, a->D);
    mpfr_ptr x = refenc_mp_from_d(a->x, ND, 53);
    mpfr_ptr g = refenc_mp_from_d(a->gamma, a->D, 53);
    mpfr_ptr b = a->beta != NULL ? refenc_mp_from_d(a->beta, a->D, 53) : NULL;
    mpfr_ptr eps = refenc_mp_from_d(&a->eps, 1, 53);
    mpfr_ptr y = refenc_mp_alloc(ND, prec);
    if (st || !x || !g || (a->beta != NULL && !b) || !eps || !y) {
        st = refenc_mp_enomem(err, "layernorm", prec);
    } else {
        refenc_mpk_layernorm_forward(y, x, g, b, a->N, a->D, eps, &ws);
        const size_t shape[2] = {a->N, a->D};
        st = refenc_mp_sink_emit(sink, "y", y, 2, shape);
    }
    refenc_mp_free(y, ND);
    refenc_mp_free(eps, 1);
    if (b != NULL)
        refenc_mp_free(b, a->D);
    refenc_mp_free(g, a->D);
    refenc_mp_free(x, ND);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_layernorm_forward(double *y, const double *x, const double *gamma,
                                const double *beta, size_t N, size_t D, double eps,
                                mpfr_prec_t prec, refenc_mp_report *rep)
{
    ln_args a = {x, gamma, beta, N, D, eps};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(ln_eval, &a, prec, rep, outs, 1);
}
