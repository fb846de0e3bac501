/* Activations in MPFR, from activation.h:
 *   ReLU       max(x, 0); NaN for a NaN, as activation.h's
 *   GELU       x Phi(x) = x erfc(-x/sqrt 2) / 2          (mpfr_erfc: no cancellation
 *                                                           for x < 0, unlike 1 + erf)
 *   GELU-tanh  x (1 + tanh(z)) / 2,  z = sqrt(2/pi) (x + 0.044715 x^3)
 *   quick GELU x sigma(1.702 x),  sigma(t) = 1 / (1 + exp(-t))   (no cancellation:
 *              1 + exp(-t) > 1)
 *   SiLU       x sigma(x), the same way
 * GELU-tanh is evaluated as its formula states, with mpfr_tanh: for z < 0,
 * 1 + tanh(z) cancels about 2.9 |z| bits, which Ziv's loop detects and pays
 * for with precision (z = -12, x about -6, costs 35 bits of the 192). */
#include "internal.h"

void refenc_mpk_activation_forward(mpfr_ptr y, mpfr_srcptr x, size_t n,
                                   refenc_activation act, refenc_mp_ws *ws)
{
    mpfr_ptr k = ws->tmp, c = ws->tmp + 1, t = ws->tmp + 2, z = ws->tmp + 3;
    switch (act) {
    case REFENC_ACT_RELU:
        for (size_t i = 0; i < n; i++) {
            if (mpfr_sgn(x + i) > 0 || mpfr_nan_p(x + i)) /* mpfr_sgn(NaN) is 0: NaN stays NaN */
                mpfr_set(y + i, x + i, MPFR_RNDN);
            else
                mpfr_set_zero(y + i, 1);
        }
        break;
    case REFENC_ACT_GELU:
        mpfr_sqrt_ui(k, 2, MPFR_RNDN); /* sqrt 2 */
        for (size_t i = 0; i < n; i++) {
            mpfr_div(t, x + i, k, MPFR_RNDN);
            mpfr_neg(t, t, MPFR_RNDN);
            mpfr_erfc(t, t, MPFR_RNDN);          /* erfc(-x/sqrt 2) = 2 Phi(x) */
            mpfr_mul(y + i, x + i, t, MPFR_RNDN);
            mpfr_div_2ui(y + i, y + i, 1, MPFR_RNDN);
        }
        break;
    case REFENC_ACT_GELU_TANH:
        mpfr_const_pi(k, MPFR_RNDN);
        mpfr_ui_div(k, 2, k, MPFR_RNDN);
        mpfr_sqrt(k, k, MPFR_RNDN);                    /* sqrt(2/pi) */
        mpfr_set_str(c, "0.044715", 10, MPFR_RNDN);    /* the decimal, at p bits */
        for (size_t i = 0; i < n; i++) {
            mpfr_sqr(t, x + i, MPFR_RNDN);
            mpfr_mul(t, t, x + i, MPFR_RNDN);          /* x^3 */
            mpfr_fma(z, c, t, x + i, MPFR_RNDN);       /* x + 0.044715 x^3 */
            mpfr_mul(z, z, k, MPFR_RNDN);
            mpfr_tanh(z, z, MPFR_RNDN);
            mpfr_add_ui(z, z, 1, MPFR_RNDN);
            mpfr_mul(y + i, x + i, z, MPFR_RNDN);
            mpfr_div_2ui(y + i, y + i, 1, MPFR_RNDN);
        }
        break;
    case REFENC_ACT_QUICK_GELU:
        mpfr_set_str(c, "1.702", 10, MPFR_RNDN);       /* the decimal, at p bits */
        for (size_t i = 0; i < n; i++) {
            mpfr_mul(t, c, x + i, MPFR_RNDN);           /* t = 1.702 x */
            mpfr_neg(t, t, MPFR_RNDN);
            mpfr_exp(t, t, MPFR_RNDN);
            mpfr_add_ui(t, t, 1, MPFR_RNDN);            /* 1 + exp(-t) = 1 / sigma(t) */
            mpfr_div(y + i, x + i, t, MPFR_RNDN);
        }
        break;
    case REFENC_ACT_SILU:
        for (size_t i = 0; i < n; i++) {
            mpfr_neg(t, x + i, MPFR_RNDN);
            mpfr_exp(t, t, MPFR_RNDN);
            mpfr_add_ui(t, t, 1, MPFR_RNDN);            /* 1 + exp(-x) = 1 / sigma(x) */
            mpfr_div(y + i, x + i, t, MPFR_RNDN);
        }
        break;
    }
}

typedef struct {
    const double *x;
    size_t n;
    refenc_activation act;
} act_args;

static int act_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const act_args *a = ctx;
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 6, 1);
    mpfr_ptr x = refenc_mp_from_d(a->x, a->n, 53);
    mpfr_ptr y = refenc_mp_alloc(a->n, prec);
    if (st || !x || !y) {
        st = refenc_mp_enomem(err, "activation", prec);
    } else {
        refenc_mpk_activation_forward(y, x, a->n, a->act, &ws);
        const size_t shape[1] = {a->n};
        st = refenc_mp_sink_emit(sink, "y", y, 1, shape);
    }
    refenc_mp_free(y, a->n);
    refenc_mp_free(x, a->n);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_activation_forward(double *y, const double *x, size_t n, refenc_activation act,
                                 mpfr_prec_t prec, refenc_mp_report *rep)
{
    act_args a = {x, n, act};
    const refenc_mp_output outs[] = {{"y", y}};
    return refenc_mp_run_twin(act_eval, &a, prec, rep, outs, 1);
}
