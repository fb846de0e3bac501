/* The scaled RoPE of the reference (ref/rope_scaling.c) against its MPFR twin
 * (ref/oracle/rope_scaling.c), which evaluates the same formulas exactly:
 * the angles pos theta_j of every type at positions up to 131 071, and the
 * rotation with its attention factor, within bounds derived below.
 *
 * Frequency bounds, first order, in units of u = 2^-53 relative to theta_j^
 * (glibc's pow, log, sin, cos: 1 ulp <= 2u, bounds.h):
 *   K0 = ln(base) e + 2         theta = pow(base, -fl(e)), e = 2j/R (bounds.c)
 *   linear, longrope: K0 + 1    one division
 *   dynamic (S > L0): g = fl(fl(s S)/L0) - fl(s - 1) errs by
 *     dg = (2 sS/L0 + (s - 1))/g + 1; P = pow(g, fl(x)), x = R/(R-2):
 *     dP = x dg + x ln g + 2; base' = fl(base P): db = dP + 1;
 *     theta = pow(base', -e): K = e db + e ln(base') + 2
 *   yarn: y = theta/s (1 - e') + theta e', e' = 1 - r, r = (j - lo)/(hi - lo)
 *     (lo, hi integers, exact): y >= theta/s; theta's error K0, the
 *     roundings of /, *, *, + (4), 1 - e' within 3u of r (3 relative to y), e'
 *     within 2u of 1 - r times theta (2s relative to y >= theta/s):
 *     K = K0 + 7 + 2s
 *   llama3, middle band: q = L0/w, w = fl(2 pi)/theta: q within (K0 + 3) u;
 *     m = (q - low)/(high - low): dm = ((K0 + 3) q + (q - low))/(high - low)
 *     + 3; y = theta ((1 - m)/s + m) >= theta/s moves by (s - 1) dm relative,
 *     plus K0 and 5 roundings: K = K0 + 5 + (s - 1) dm (the band edges are
 *     continuous, so a decision that flips at an edge is inside this bound)
 *   ntk (GTE's fixed NTK): b' = fl(base s) within u moves theta by e u;
 *     pow(b', -fl(e)): e ln(b') + 2; pow(s, fl(2/R)): (2/R) ln s + 2; the
 *     division 1: K = e ln(base s) + e + (2/R) ln s + 5
 *   ntk, mixed_b: a = fl(log s / pow(R/2, b)) within 5u (log, pow 1 ulp each,
 *     a division), (j + 1)^b 2u, their product 1u: x = a (j + 1)^b within
 *     8u relative, so exp(x) within 8 x u + 2u; theta_j / exp(x):
 *     K = K0 + 8 x + 3,  x = ln s ((j + 1) / (R/2))^b <= ln s
 * The angle fl(p theta) adds 1.  Rotation (bounds.c bnd_rope) with c' =
 * fl(cos(a) f): its error is f (da + ulp(c)) + Kf u f |c| + u |c'|, Kf the
 * attention factor's: yarn 0.1 m ln(s) + 1: 6 (0.1's own rounding, log, two
 * products, a sum); the mscale ratio: 13; longrope sqrt(1 + ln s / ln L0): 5. */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/rope_scaling.h"
#include "acc_common.h"

static const int64_t POS[] = {0, 1, 10, 100, 2047, 2048, 4095, 4096, 8191, 8192, 32768, 65535, 100000, 131071};
#define NPOS (sizeof POS / sizeof POS[0])
#define U BOUND_U

static double k0(size_t j, size_t R, double base)
{
    return log(base) * (double)(2 * j) / (double)R + 2 * LIBM_ULP_POW;
}

static double k_dynamic(size_t j, size_t R, double base, const refenc_rope_scaling *s, int64_t S)
{
    const double L0 = (double)s->max_position_embeddings, f = s->factor;
    if ((double)S <= L0)
        return k0(j, R, base);
    const double a = f * (double)S / L0, g = a - (f - 1), x = (double)R / (double)(R - 2);
    const double dg = (2 * a + (f - 1)) / g + 1, dP = x * dg + x * log(g) + 2, db = dP + 1;
    const double e = (double)(2 * j) / (double)R;
    return e * db + e * log(base * pow(g, x)) + 2;
}

static double k_llama3(size_t j, size_t R, double base, const refenc_rope_scaling *s)
{
    const double K0 = k0(j, R, base), theta = refenc_rope_frequency(j, R, base);
    const double q = (double)s->original_max_position_embeddings * theta / (2 * M_PI);
    const double lo = s->low_freq_factor, hi = s->high_freq_factor;
    if (q > hi * (1 + 1e-9) || q < lo * (1 - 1e-9)) /* clear of the band edges */
        return K0 + 1;
    const double dm = ((K0 + 3) * q + fabs(q - lo)) / (hi - lo) + 3;
    return K0 + 5 + (s->factor - 1) * dm;
}

static double k_ntk(size_t j, size_t R, double base, const refenc_rope_scaling *s)
{
    const double e = (double)(2 * j) / (double)R, ls = log(s->factor);
    if (s->mixed)
        return k0(j, R, base) + 8 * ls * pow((double)(j + 1) / ((double)R / 2), s->mixed_b) + 3;
    return e * log(base * s->factor) + e + 2.0 / (double)R * ls + 4 * LIBM_ULP_POW + 1;
}

/* The relative bound of theta_j^ in units of u. */
static double k_freq(size_t j, size_t R, double base, const refenc_rope_scaling *s, int64_t S)
{
    switch (s->type) {
    case REFENC_ROPE_SCALING_LINEAR:
    case REFENC_ROPE_SCALING_LONGROPE: return k0(j, R, base) + 1;
    case REFENC_ROPE_SCALING_DYNAMIC: return k_dynamic(j, R, base, s, S);
    case REFENC_ROPE_SCALING_YARN: return k0(j, R, base) + 7 + 2 * s->factor;
    case REFENC_ROPE_SCALING_LLAMA3: return k_llama3(j, R, base, s);
    case REFENC_ROPE_SCALING_NTK: return k_ntk(j, R, base, s);
    default: return k0(j, R, base);
    }
}

static double k_factor(const refenc_rope_scaling *s)
{
    if (s->type == REFENC_ROPE_SCALING_LONGROPE)
        return 5;
    if (s->type == REFENC_ROPE_SCALING_YARN)
        return s->mscale > 0 && s->mscale_all_dim > 0 ? 13 : 6;
    return 0;
}

typedef struct {
    const char *name;
    size_t Dh;
    double base;
    refenc_rope_scaling s;
} scaled_case;

static scaled_case make_case(const char *name, refenc_rope_scaling_type t, double factor, size_t Dh, double base)
{
    scaled_case c = {name, Dh, base, {0}};
    refenc_rope_scaling_default(&c.s);
    c.s.type = t, c.s.factor = factor;
    return c;
}

/* Every type at realistic settings (docs/rope-scaling.md). */
static size_t cases(scaled_case *c)
{
    size_t n = 0;
    c[n++] = make_case("linear 8", REFENC_ROPE_SCALING_LINEAR, 8.0, 64, 500000.0);
    c[n] = make_case("dynamic 4, L0 4096", REFENC_ROPE_SCALING_DYNAMIC, 4.0, 64, 10000.0);
    c[n++].s.max_position_embeddings = 4096;
    c[n] = make_case("yarn 4, L0 4096", REFENC_ROPE_SCALING_YARN, 4.0, 128, 10000.0);
    c[n++].s.original_max_position_embeddings = 4096;
    c[n] = make_case("yarn 40, mscale 1 / 0.707, partial 0.5", REFENC_ROPE_SCALING_YARN, 40.0, 128, 10000.0);
    c[n].s.original_max_position_embeddings = 4096, c[n].s.mscale = 1.0, c[n].s.mscale_all_dim = 0.707;
    c[n++].s.partial_rotary_factor = 0.5;
    /* hi = R ln(L0 / (beta_slow 2 pi)) / (2 ln base) = 16 ln(6.5e8) / 18.4 = 17.6 > R - 1 = 15:
     * HF clamps the ramp's end at R - 1 */
    c[n] = make_case("yarn 4, beta_slow 1e-6: ramp end clamped", REFENC_ROPE_SCALING_YARN, 4.0, 16, 10000.0);
    c[n].s.original_max_position_embeddings = 4096, c[n++].s.beta_slow = 1e-6;
    c[n] = make_case("llama3 8 (Llama 3.1)", REFENC_ROPE_SCALING_LLAMA3, 8.0, 128, 500000.0);
    c[n].s.original_max_position_embeddings = 8192, c[n].s.low_freq_factor = 1.0;
    c[n++].s.high_freq_factor = 4.0;
    c[n] = make_case("longrope 131072 / 4096", REFENC_ROPE_SCALING_LONGROPE, 1.0, 8, 10000.0);
    c[n].s.max_position_embeddings = 131072, c[n].s.original_max_position_embeddings = 4096;
    c[n].s.n_factors = 4;
    const double sf[4] = {1.0, 1.1, 1.3, 2.0}, lf[4] = {1.08, 2.6, 9.09, 30.42};
    memcpy(c[n].s.short_factor, sf, sizeof sf), memcpy(c[n++].s.long_factor, lf, sizeof lf);
    /* GTE: gte-base-en-v1.5 (Dh 64, rope_theta 500000, ntk 2), and the mixed form */
    c[n++] = make_case("ntk 2 (gte-base-en-v1.5)", REFENC_ROPE_SCALING_NTK, 2.0, 64, 500000.0);
    c[n] = make_case("ntk 8, mixed_b 0.75", REFENC_ROPE_SCALING_NTK, 8.0, 64, 160000.0);
    c[n].s.mixed = 1, c[n++].s.mixed_b = 0.75;
    return n;
}

/* the angles at positions pos[0 .. L) (S = max + 1) */
static void check_angles(acc_stats *a, const scaled_case *c, size_t L)
{
    const size_t R = refenc_rope_scaling_rotary_dim(&c->s, c->Dh), half = R / 2, n = L * half;
    const int64_t S = refenc_rope_seq_len(POS, L);
    double *ang = acc_zeros(n), *ango = acc_zeros(n), *E = acc_zeros(n);
    for (size_t l = 0; l < L; l++)
        for (size_t j = 0; j < half; j++) {
            ang[l * half + j] = (double)POS[l] * refenc_rope_scaled_frequency(j, R, c->base, &c->s, S);
            E[l * half + j] = (k_freq(j, R, c->base, &c->s, S) + 1) * U * fabs(ang[l * half + j]);
        }
    MP_OK(refenc_mp_rope_scaled_angles(ango, POS, L, c->Dh, c->base, &c->s, P0, REP));
    acc_check(a, c->name, ang, ango, E, n);
    free(ang), free(ango), free(E);
}

Test(accuracy_rope_scaling, angles_of_every_type_up_to_position_131071)
{
    acc_stats a;
    acc_init(&a);
    scaled_case c[9];
    const size_t n = cases(c);
    for (size_t i = 0; i < n; i++) {
        check_angles(&a, &c[i], NPOS); /* S = 131072: dynamic grown, longrope long */
        check_angles(&a, &c[i], 5);    /* S = 2048: dynamic unscaled, longrope short */
    }
    acc_finish(&a, "rope scaling angles");
}

/* the bound of each output of the rotation, bnd_rope's with the factor f */
static void rotation_bound(double *E, const double *x, const double *y, const scaled_case *c, size_t N, size_t L)
{
    const size_t Dh = c->Dh, R = refenc_rope_scaling_rotary_dim(&c->s, Dh), half = R / 2;
    const int64_t S = refenc_rope_seq_len(POS, L);
    const double f = refenc_rope_attention_factor(&c->s), kf = k_factor(&c->s);
    for (size_t i = 0; i < N * L * Dh; i++)
        E[i] = 0; /* the passed-through coordinates are copied */
    for (size_t nl = 0; nl < N * L; nl++)
        for (size_t j = 0; j < half; j++) {
            const size_t ia = nl * Dh + j, ib = nl * Dh + j + half; /* half layout */
            const double ang = (double)POS[nl % L] * refenc_rope_scaled_frequency(j, R, c->base, &c->s, S);
            const double da = (k_freq(j, R, c->base, &c->s, S) + 1) * U * fabs(ang);
            const double cs = fabs(cos(ang)), sn = fabs(sin(ang));
            const double Ec = f * (da + LIBM_ULP_SINCOS * bnd_ulp(cs)) + (kf + 1) * U * f * cs;
            const double Es = f * (da + LIBM_ULP_SINCOS * bnd_ulp(sn)) + (kf + 1) * U * f * sn;
            const double xa = fabs(x[ia]), xb = fabs(x[ib]);
            E[ia] = xa * Ec + xb * Es + U * f * (xa * cs + xb * sn) + U * fabs(y[ia]);
            E[ib] = xb * Ec + xa * Es + U * f * (xb * cs + xa * sn) + U * fabs(y[ib]);
        }
}

Test(accuracy_rope_scaling, rotation_with_the_attention_factor)
{
    acc_stats a;
    acc_init(&a);
    gsl_rng *r = test_rng(211);
    scaled_case c[9];
    const size_t n = cases(c), N = 2;
    for (size_t i = 0; i < n; i++) {
        const size_t m = N * NPOS * c[i].Dh;
        double *x = acc_randn(m, 0, 1.3, r), *y = acc_zeros(m), *yo = acc_zeros(m), *E = acc_zeros(m);
        refenc_rope_scaled_forward(y, x, POS, N, NPOS, c[i].Dh, c[i].base, REFENC_ROPE_HALF, &c[i].s);
        MP_OK(refenc_mp_rope_scaled_forward(yo, x, POS, N, NPOS, c[i].Dh, c[i].base, REFENC_ROPE_HALF, &c[i].s,
                                            P0, REP));
        rotation_bound(E, x, y, &c[i], N, NPOS);
        acc_check(&a, c[i].name, y, yo, E, m);
        free(x), free(y), free(yo), free(E);
    }
    gsl_rng_free(r);
    acc_finish(&a, "rope scaling rotation");
}
