/* RoPE scaling in MPFR (ref/rope_scaling.h): the scaled frequency theta_j
 * and the attention factor, evaluated at the precision of the result from
 * the exact double hyper-parameters.  An implementation of its own: it
 * calls nothing of the double kernel.  The formulas' constants are taken
 * exactly (pi from mpfr_const_pi, 0.1 as 1/10); Hugging Face's are Python
 * doubles, within one rounding of them.
 *   linear    theta_j / s              dynamic   (base (s S/L0 - s + 1)^(R/(R-2)))^(-2j/R), S > L0
 *   yarn      theta_j (r_j / s + 1 - r_j)  (= HF's theta/s (1 - e) + theta e, e = 1 - r)
 *   llama3    bands by w_j = 2 pi / theta_j     longrope  theta_j / ext_j
 *   ntk       exp(-(2j ln(base s) + 2 ln s) / R) = (base s)^(-2j/R) s^(-2/R);
 *             mixed_b: exp(-2j ln(base) / R - ln(s) ((j + 1) / (R/2))^b) */
#include "internal.h"

#include <math.h>

/* y = base^(-2j/R) */
static void unscaled(mpfr_ptr y, size_t j, size_t R, mpfr_srcptr base, mpfr_ptr t)
{
    mpfr_set_si(t, -(long)(2 * j), MPFR_RNDN);
    mpfr_div_ui(t, t, R, MPFR_RNDN);
    mpfr_pow(y, base, t, MPFR_RNDN);
}

/* dynamic NTK: the base grows when S > L0 */
static void dynamic(mpfr_ptr y, size_t j, size_t R, mpfr_srcptr base, const refenc_rope_scaling *s, int64_t S,
                    mpfr_ptr t, mpfr_ptr u)
{
    if ((uint64_t)S <= s->max_position_embeddings) {
        unscaled(y, j, R, base, t);
        return;
    }
    mpfr_set_d(u, s->factor, MPFR_RNDN);
    mpfr_mul_ui(u, u, (unsigned long)S, MPFR_RNDN);
    mpfr_div_ui(u, u, s->max_position_embeddings, MPFR_RNDN); /* s S / L0 */
    mpfr_sub_d(u, u, s->factor, MPFR_RNDN);
    mpfr_add_ui(u, u, 1, MPFR_RNDN);                           /* - (s - 1) */
    mpfr_set_ui(t, R, MPFR_RNDN);
    mpfr_div_ui(t, t, R - 2, MPFR_RNDN);
    mpfr_pow(u, u, t, MPFR_RNDN);
    mpfr_mul(u, u, base, MPFR_RNDN);                           /* base' */
    unscaled(y, j, R, u, t);
}

/* YaRN's correction dim R ln(L0 / (beta 2 pi)) / (2 ln base) into y */
static void correction_dim(mpfr_ptr y, double beta, size_t R, mpfr_srcptr base, size_t L0, mpfr_ptr t)
{
    mpfr_const_pi(t, MPFR_RNDN);
    mpfr_mul_d(t, t, 2.0 * beta, MPFR_RNDN); /* 2 beta is exact */
    mpfr_ui_div(y, (unsigned long)L0, t, MPFR_RNDN);
    mpfr_log(y, y, MPFR_RNDN);
    mpfr_mul_ui(y, y, R, MPFR_RNDN);
    mpfr_log(t, base, MPFR_RNDN);
    mpfr_div(y, y, t, MPFR_RNDN);
    mpfr_div_ui(y, y, 2, MPFR_RNDN);
}

/* YaRN: the ramp r_j between lo and hi, theta_j (r_j / s + 1 - r_j) */
static void yarn(mpfr_ptr y, size_t j, size_t R, mpfr_srcptr base, const refenc_rope_scaling *s, mpfr_ptr t,
                 mpfr_ptr lo, mpfr_ptr hi)
{
    const size_t L0 = s->original_max_position_embeddings ? s->original_max_position_embeddings
                                                          : s->max_position_embeddings;
    correction_dim(lo, s->beta_fast, R, base, L0, t);
    correction_dim(hi, s->beta_slow, R, base, L0, t);
    if (s->truncate)
        mpfr_floor(lo, lo), mpfr_ceil(hi, hi);
    if (mpfr_sgn(lo) < 0)
        mpfr_set_ui(lo, 0, MPFR_RNDN);
    if (mpfr_cmp_ui(hi, R - 1) > 0)
        mpfr_set_ui(hi, R - 1, MPFR_RNDN);
    if (mpfr_equal_p(lo, hi))
        mpfr_add_d(hi, hi, 0.001, MPFR_RNDN); /* HF's Python float 0.001 */
    mpfr_sub(hi, hi, lo, MPFR_RNDN);
    mpfr_ui_sub(lo, j, lo, MPFR_RNDN);
    mpfr_div(lo, lo, hi, MPFR_RNDN); /* r, then clamped to [0, 1] */
    if (mpfr_sgn(lo) < 0)
        mpfr_set_ui(lo, 0, MPFR_RNDN);
    if (mpfr_cmp_ui(lo, 1) > 0)
        mpfr_set_ui(lo, 1, MPFR_RNDN);
    mpfr_div_d(hi, lo, s->factor, MPFR_RNDN);
    mpfr_sub(hi, hi, lo, MPFR_RNDN);
    mpfr_add_ui(hi, hi, 1, MPFR_RNDN); /* r/s + 1 - r */
    unscaled(y, j, R, base, t);
    mpfr_mul(y, y, hi, MPFR_RNDN);
}

/* llama3: w = 2 pi / theta; w < L0/high: theta; w > L0/low: theta / s;
 * between, m = (L0 / w - low) / (high - low): theta ((1 - m) / s + m) */
static void llama3(mpfr_ptr y, size_t j, size_t R, mpfr_srcptr base, const refenc_rope_scaling *s, mpfr_ptr t,
                   mpfr_ptr m)
{
    const double L0 = (double)s->original_max_position_embeddings; /* an integer: exact */
    unscaled(y, j, R, base, t);
    mpfr_const_pi(m, MPFR_RNDN);
    mpfr_mul_2ui(m, m, 1, MPFR_RNDN);
    mpfr_div(m, m, y, MPFR_RNDN);                   /* w */
    mpfr_d_div(t, L0, m, MPFR_RNDN);                /* L0 / w */
    if (mpfr_cmp_d(t, s->high_freq_factor) > 0)     /* w < L0 / high */
        return;
    if (mpfr_cmp_d(t, s->low_freq_factor) < 0) {    /* w > L0 / low */
        mpfr_div_d(y, y, s->factor, MPFR_RNDN);
        return;
    }
    mpfr_sub_d(t, t, s->low_freq_factor, MPFR_RNDN);
    mpfr_set_d(m, s->high_freq_factor, MPFR_RNDN);
    mpfr_sub_d(m, m, s->low_freq_factor, MPFR_RNDN);
    mpfr_div(m, t, m, MPFR_RNDN);                   /* m */
    mpfr_ui_sub(t, 1, m, MPFR_RNDN);
    mpfr_div_d(t, t, s->factor, MPFR_RNDN);
    mpfr_add(t, t, m, MPFR_RNDN);                   /* (1 - m)/s + m */
    mpfr_mul(y, y, t, MPFR_RNDN);
}

/* GTE's ntk as one exponential of the exact exponent: fixed,
 * -(2/R) (j ln(base s) + ln s); mixed, -(2/R) j ln(base) - ln(s) ((j + 1) / (R/2))^b
 * (the same as theta_j / exp(a (j + 1)^b), a = ln s / (R/2)^b). */
static void ntk(mpfr_ptr y, size_t j, size_t R, mpfr_srcptr base, const refenc_rope_scaling *s, mpfr_ptr t,
                mpfr_ptr u, mpfr_ptr v)
{
    mpfr_set_d(u, s->factor, MPFR_RNDN);
    mpfr_log(u, u, MPFR_RNDN);                           /* ln s */
    mpfr_log(t, base, MPFR_RNDN);
    if (!s->mixed) {
        mpfr_add(t, t, u, MPFR_RNDN);                    /* ln(base s) */
        mpfr_mul_ui(t, t, j, MPFR_RNDN);
        mpfr_add(t, t, u, MPFR_RNDN);                    /* j ln(base s) + ln s */
        mpfr_mul_ui(t, t, 2, MPFR_RNDN);
        mpfr_div_ui(t, t, R, MPFR_RNDN);
    } else {
        mpfr_mul_ui(t, t, 2 * j, MPFR_RNDN);
        mpfr_div_ui(t, t, R, MPFR_RNDN);                 /* (2j/R) ln base */
        mpfr_set_ui(y, j + 1, MPFR_RNDN);
        mpfr_div_ui(y, y, R / 2, MPFR_RNDN);
        mpfr_set_d(v, s->mixed_b, MPFR_RNDN);
        mpfr_pow(y, y, v, MPFR_RNDN);                    /* ((j + 1) / (R/2))^b */
        mpfr_mul(u, u, y, MPFR_RNDN);
        mpfr_add(t, t, u, MPFR_RNDN);
    }
    mpfr_neg(t, t, MPFR_RNDN);
    mpfr_exp(y, t, MPFR_RNDN);
}

void refenc_mpk_rope_frequency(mpfr_ptr y, size_t j, size_t R, mpfr_srcptr base, const refenc_rope_scaling *s,
                               int64_t S)
{
    const mpfr_prec_t p = mpfr_get_prec(y);
    mpfr_t t, u, v;
    mpfr_inits2(p, t, u, v, (mpfr_ptr)0);
    switch (s == NULL ? REFENC_ROPE_SCALING_NONE : s->type) {
    case REFENC_ROPE_SCALING_LINEAR:
        unscaled(y, j, R, base, t);
        mpfr_div_d(y, y, s->factor, MPFR_RNDN);
        break;
    case REFENC_ROPE_SCALING_DYNAMIC: dynamic(y, j, R, base, s, S, t, u); break;
    case REFENC_ROPE_SCALING_YARN: yarn(y, j, R, base, s, t, u, v); break;
    case REFENC_ROPE_SCALING_LLAMA3: llama3(y, j, R, base, s, t, u); break;
    case REFENC_ROPE_SCALING_NTK: ntk(y, j, R, base, s, t, u, v); break;
    case REFENC_ROPE_SCALING_LONGROPE: {
        const size_t L0 = s->original_max_position_embeddings ? s->original_max_position_embeddings
                                                              : s->max_position_embeddings;
        unscaled(y, j, R, base, t);
        mpfr_div_d(y, y, (uint64_t)S > L0 ? s->long_factor[j] : s->short_factor[j], MPFR_RNDN);
        break;
    }
    default: unscaled(y, j, R, base, t); break;
    }
    mpfr_clears(t, u, v, (mpfr_ptr)0);
}

/* 0.1 m ln(s) + 1 (s > 1), else 1, into y */
static void yarn_mscale(mpfr_ptr y, double s, double m)
{
    if (s <= 1.0) {
        mpfr_set_ui(y, 1, MPFR_RNDN);
        return;
    }
    mpfr_set_d(y, s, MPFR_RNDN);
    mpfr_log(y, y, MPFR_RNDN);
    mpfr_mul_d(y, y, m, MPFR_RNDN);
    mpfr_div_ui(y, y, 10, MPFR_RNDN);
    mpfr_add_ui(y, y, 1, MPFR_RNDN);
}

/* longrope: sqrt(1 + ln(s) / ln(L0)), s = max / original when original is given */
static void longrope_factor(mpfr_ptr y, const refenc_rope_scaling *s, mpfr_ptr t)
{
    const size_t o = s->original_max_position_embeddings, L0 = o ? o : s->max_position_embeddings;
    mpfr_set_d(y, s->factor, MPFR_RNDN);
    if (o)
        mpfr_set_ui(y, s->max_position_embeddings, MPFR_RNDN), mpfr_div_ui(y, y, o, MPFR_RNDN);
    if (mpfr_cmp_ui(y, 1) <= 0) {
        mpfr_set_ui(y, 1, MPFR_RNDN);
        return;
    }
    mpfr_log(y, y, MPFR_RNDN);
    mpfr_set_ui(t, L0, MPFR_RNDN);
    mpfr_log(t, t, MPFR_RNDN);
    mpfr_div(y, y, t, MPFR_RNDN);
    mpfr_add_ui(y, y, 1, MPFR_RNDN);
    mpfr_sqrt(y, y, MPFR_RNDN);
}

void refenc_mpk_rope_attention_factor(mpfr_ptr y, const refenc_rope_scaling *s)
{
    const int yarn_t = s != NULL && s->type == REFENC_ROPE_SCALING_YARN;
    if (s == NULL || (!yarn_t && s->type != REFENC_ROPE_SCALING_LONGROPE)) {
        mpfr_set_ui(y, 1, MPFR_RNDN);
    } else if (s->attention_factor > 0) {
        mpfr_set_d(y, s->attention_factor, MPFR_RNDN);
    } else if (yarn_t && s->mscale > 0 && s->mscale_all_dim > 0) {
        mpfr_t t;
        mpfr_init2(t, mpfr_get_prec(y));
        yarn_mscale(y, s->factor, s->mscale);
        yarn_mscale(t, s->factor, s->mscale_all_dim);
        mpfr_div(y, y, t, MPFR_RNDN);
        mpfr_clear(t);
    } else if (yarn_t) {
        yarn_mscale(y, s->factor, 1.0);
    } else {
        mpfr_t t;
        mpfr_init2(t, mpfr_get_prec(y));
        longrope_factor(y, s, t);
        mpfr_clear(t);
    }
}
