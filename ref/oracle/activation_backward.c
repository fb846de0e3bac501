/* The activations' derivatives in MPFR, from activation.h:
 *   ReLU        1 for x > 0, else 0 (0 at x = 0, as PyTorch)
 *   GELU        Phi(x) + x phi(x),  phi(x) = exp(-x^2/2)/sqrt(2 pi)
 *   GELU-tanh   s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2),  s = sigma(2z)
 *   quick GELU  s + 1.702 x s (1 - s),  s = sigma(1.702 x)
 *   SiLU        s + x s (1 - s),  s = sigma(x)
 * (1 - s is computed as sigma(-t), without cancellation.)  NaN for a NaN
 * x except ReLU (1: PyTorch passes dy).  Backward: dx[i] = dy[i] act'(x[i]).
 * Phi(x) = erfc(-x/sqrt 2)/2 (mpfr_erfc), sqrt(2/pi) from mpfr_const_pi, the
 * decimals 0.044715 and 1.702 rounded at the working precision, as the
 * oracle's forward: these are the derivatives of the functions it computes. */
#include "backward.h"
#include "internal.h"

/* s = 1/(1 + exp(-t)) and r = 1 - s = 1/(1 + exp(t)). */
static void sigmoid_pair(mpfr_ptr s, mpfr_ptr r, mpfr_srcptr t)
{
    mpfr_neg(s, t, MPFR_RNDN);
    mpfr_exp(s, s, MPFR_RNDN);
    mpfr_add_ui(s, s, 1, MPFR_RNDN);
    mpfr_ui_div(s, 1, s, MPFR_RNDN);
    mpfr_exp(r, t, MPFR_RNDN);
    mpfr_add_ui(r, r, 1, MPFR_RNDN);
    mpfr_ui_div(r, 1, r, MPFR_RNDN);
}

static void gelu_d(mpfr_ptr d, mpfr_srcptr x, mpfr_ptr *t)
{
    mpfr_sqrt_ui(t[0], 2, MPFR_RNDN);
    mpfr_div(t[1], x, t[0], MPFR_RNDN);
    mpfr_neg(t[1], t[1], MPFR_RNDN);
    mpfr_erfc(t[1], t[1], MPFR_RNDN);
    mpfr_div_2ui(t[1], t[1], 1, MPFR_RNDN);   /* Phi(x) */
    mpfr_sqr(t[2], x, MPFR_RNDN);
    mpfr_div_2ui(t[2], t[2], 1, MPFR_RNDN);
    mpfr_neg(t[2], t[2], MPFR_RNDN);
    mpfr_exp(t[2], t[2], MPFR_RNDN);          /* exp(-x^2/2) */
    mpfr_const_pi(t[3], MPFR_RNDN);
    mpfr_mul_2ui(t[3], t[3], 1, MPFR_RNDN);
    mpfr_sqrt(t[3], t[3], MPFR_RNDN);         /* sqrt(2 pi) */
    mpfr_div(t[2], t[2], t[3], MPFR_RNDN);    /* phi(x) */
    mpfr_fma(d, x, t[2], t[1], MPFR_RNDN);
}

static void gelu_tanh_d(mpfr_ptr d, mpfr_srcptr x, mpfr_ptr *t)
{
    mpfr_const_pi(t[0], MPFR_RNDN);
    mpfr_ui_div(t[0], 2, t[0], MPFR_RNDN);
    mpfr_sqrt(t[0], t[0], MPFR_RNDN);             /* k = sqrt(2/pi) */
    mpfr_set_str(t[1], "0.044715", 10, MPFR_RNDN);
    mpfr_sqr(t[2], x, MPFR_RNDN);                 /* x^2 */
    mpfr_mul(t[3], t[1], t[2], MPFR_RNDN);
    mpfr_mul(t[3], t[3], x, MPFR_RNDN);
    mpfr_add(t[3], t[3], x, MPFR_RNDN);
    mpfr_mul(t[3], t[3], t[0], MPFR_RNDN);        /* z */
    mpfr_mul_2ui(t[3], t[3], 1, MPFR_RNDN);       /* 2z */
    sigmoid_pair(t[4], t[5], t[3]);               /* s, 1 - s */
    mpfr_mul_ui(t[1], t[1], 3, MPFR_RNDN);
    mpfr_mul(t[2], t[2], t[1], MPFR_RNDN);
    mpfr_add_ui(t[2], t[2], 1, MPFR_RNDN);        /* 1 + 3 c x^2 */
    mpfr_mul(t[2], t[2], t[0], MPFR_RNDN);
    mpfr_mul(t[2], t[2], t[5], MPFR_RNDN);
    mpfr_mul(t[2], t[2], t[4], MPFR_RNDN);
    mpfr_mul(t[2], t[2], x, MPFR_RNDN);
    mpfr_mul_2ui(t[2], t[2], 1, MPFR_RNDN);       /* 2 x s (1 - s) k (1 + 3 c x^2) */
    mpfr_add(d, t[4], t[2], MPFR_RNDN);
}

static void quick_gelu_d(mpfr_ptr d, mpfr_srcptr x, mpfr_ptr *t)
{
    mpfr_set_str(t[0], "1.702", 10, MPFR_RNDN);
    mpfr_mul(t[1], t[0], x, MPFR_RNDN);           /* t = 1.702 x */
    sigmoid_pair(t[2], t[3], t[1]);               /* s, 1 - s */
    mpfr_mul(t[1], t[1], t[2], MPFR_RNDN);
    mpfr_mul(t[1], t[1], t[3], MPFR_RNDN);        /* 1.702 x s (1 - s) */
    mpfr_add(d, t[2], t[1], MPFR_RNDN);
}

static void silu_d(mpfr_ptr d, mpfr_srcptr x, mpfr_ptr *t)
{
    sigmoid_pair(t[2], t[3], x);                  /* s, 1 - s */
    mpfr_mul(t[1], x, t[2], MPFR_RNDN);
    mpfr_mul(t[1], t[1], t[3], MPFR_RNDN);        /* x s (1 - s) */
    mpfr_add(d, t[2], t[1], MPFR_RNDN);
}

void refenc_mpk_activation_derivative(mpfr_ptr d, mpfr_srcptr x, size_t n, refenc_activation act,
                                      refenc_mp_ws *ws)
{
    mpfr_ptr t[6];
    for (int j = 0; j < 6; j++)
        t[j] = ws->tmp + j;
    for (size_t i = 0; i < n; i++) {
        if (act == REFENC_ACT_RELU)
            mpfr_set_ui(d + i, mpfr_sgn(x + i) > 0 || mpfr_nan_p(x + i) ? 1 : 0, MPFR_RNDN);
        else if (mpfr_nan_p(x + i))
            mpfr_set_nan(d + i);
        else if (act == REFENC_ACT_GELU)
            gelu_d(d + i, x + i, t);
        else if (act == REFENC_ACT_GELU_TANH)
            gelu_tanh_d(d + i, x + i, t);
        else if (act == REFENC_ACT_SILU)
            silu_d(d + i, x + i, t);
        else
            quick_gelu_d(d + i, x + i, t);
    }
}

typedef struct {
    const double *dy, *x;
    size_t n;
    refenc_activation act;
} actb_args;

static int actb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const actb_args *a = ctx;
    refenc_mp_arena ar = {0};
    refenc_mp_ws ws;
    int st = refenc_mp_ws_alloc(&ws, prec, 6, 1);
    mpfr_ptr x = refenc_mp_arena_from_d(&ar, a->x, a->n, 53);
    mpfr_ptr dy = refenc_mp_arena_from_d(&ar, a->dy, a->n, 53);
    mpfr_ptr dx = refenc_mp_arena_alloc(&ar, a->n, prec);
    if (st || ar.failed) {
        st = refenc_mp_enomem(err, "activation backward", prec);
    } else {
        refenc_mpk_activation_derivative(dx, x, a->n, a->act, &ws);
        for (size_t i = 0; i < a->n; i++)
            mpfr_mul(dx + i, dx + i, dy + i, MPFR_RNDN);
        const size_t shape[1] = {a->n};
        st = refenc_mp_sink_emit(sink, "dx", dx, 1, shape);
    }
    refenc_mp_arena_free(&ar);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mp_activation_backward(double *dx, const double *dy, const double *x, size_t n,
                                  refenc_activation act, mpfr_prec_t prec, refenc_mp_report *rep)
{
    actb_args a = {dy, x, n, act};
    const refenc_mp_output outs[] = {{"dx", dx}};
    return refenc_mp_run_twin(actb_eval, &a, prec, rep, outs, 1);
}
