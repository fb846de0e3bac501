/* Why attention divides by sqrt(d_k) (attention.h): statistical properties.
 *
 * For q, k with independent N(0, 1) entries, Var(q.k) = d_k and
 * Var(q.k / sqrt(d_k)) = 1, for d_k in {16, 64, 256, 1024}; without the
 * scaling the mean largest attention weight grows with d_k, with it it stays
 * flat.  The scores come from the reference: refenc_attention_forward on
 * many heads (H > 1, so a scale of 1/sqrt(H Dh) would show), with a zero key
 * next to each random one, so that a score is recovered exactly from two
 * weights: s = log(w_1 / w_0).  "Unscaled" is the same call with
 * tau = 1/sqrt(d_k), which makes the divisor sqrt(d_k) tau exactly 1 for
 * these d_k (powers of 4).
 *
 * Each check is a hypothesis test whose probability of failing when the
 * property holds is at most 1e-9, derived without a normal approximation
 * (docs/properties.md, "Variance of the QK^T scaling"):
 *  - unconditional variance: the median of m = 41 batch sample variances,
 *    each within t of sigma^2 with probability >= 1 - p by Chebyshev, using
 *    the exact variance of a sample variance (fourth moment of q.k below);
 *    the median is off by more than t only if >= 21 batches are, a binomial
 *    tail (gsl_cdf_binomial_Q) that p is chosen to make <= 1e-9;
 *  - conditional variance: given q, the scores q.k_j / sqrt(d) are exactly
 *    N(0, |q|^2 / d), so sum_j s_j^2 / (|q|^2/d) is exactly chi-square;
 *    two-sided quantiles from gsl_cdf_chisq_Pinv / Qinv.
 *
 * Fourth moment: q.k = sum_i Y_i, Y_i = q_i k_i iid with E Y = E Y^3 = 0,
 * E Y^2 = 1, E Y^4 = E q^4 E k^4 = 3 * 3 = 9 (so Var(Y^2) = 80).  Then
 * E (q.k)^4 = sum_i E Y_i^4 + 3 sum_{i != j} E Y_i^2 E Y_j^2 = 9d + 3d(d-1)
 * = 3d^2 + 6d; for q.k / sqrt(d): 3 + 6/d.  A sample variance of n iid
 * values has Var(S^2) = mu4/n - sigma^4 (n-3)/(n(n-1)). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "../common/fwdbound.h"
#include "../common/propcase.h"
#include "../common/testutil.h"

#define ALPHA 1e-9 /* false-failure probability of each check */
/* GSL evaluates the binomial tail and the chi-square quantiles to close to
 * machine precision; a relative error e in a quantile q moves the level by
 * about density(q) q e, negligible against 1e-9. */

static const size_t dks[] = {16, 64, 256, 1024};
#define N_DK 4

#define U TEST_U

/* How far a score recovered as s^ = log(w_j / w_0) (key 0 is zero, so its
 * score is exactly 0) can be from the exact q.k_j / (sqrt(d) tau).
 * The reference computes z = fl(fl(q.k) / fl(fl(sqrt d) tau)): within
 * gamma_4 |z| + gamma_d M (1 + gamma_2) / div of the exact score, M = sum |q_d k_d|
 * (fwdbound.h, attention scores, exact inputs).  The row's softmax over n
 * entries whose scores lie within `spread` of the row maximum gives each
 * weight within a factor 1 + r of softmax(z), r = (1 + a)(1 + u) /
 * ((1 - a)(1 - gamma_{n-1})) - 1, a = e^{u spread}(1 + 2u) - 1 (fb_softmax's
 * bound); the ratio w_j / w_0 and its division are e^z (1 + eps),
 * eps = (1 + r)(1 + u) / (1 - r) - 1, whose log is within eps / (1 - eps) of
 * z, and log adds 1 ulp (2u of its value).  |z| is taken as |s^| + 1: the
 * recovery error is far below 1 for the |s^| < 10^4 the callers check. */
static double score_error(double s_rec, double spread, size_t n, double M, double div, size_t d)
{
    const double z = fabs(s_rec) + 1.0;
    const double es = test_gamma(4) * z + test_gamma((double)d) * M * (1.0 + test_gamma(2)) / div;
    const double a = expm1(U * spread) * (1.0 + 2.0 * U) + 2.0 * U;
    const double r = (1.0 + a) * (1.0 + U) / ((1.0 - a) * (1.0 - test_gamma((double)n - 1.0))) - 1.0;
    const double eps = (1.0 + r) * (1.0 + U) / (1.0 - r) - 1.0;
    const double el = eps / (1.0 - eps) + 2.0 * U * (z + eps / (1.0 - eps));
    return es + el;
}

/* ------------------------------------------------------------------------
 * Median of batch variances. */

enum { MOM_BATCHES = 41, MOM_BATCH = 1000 };

/* The largest p with P(Bin(m, p) >= (m+1)/2) <= alpha. */
static double mom_p(unsigned m, double alpha)
{
    double lo = 0.0, hi = 0.5;
    for (int i = 0; i < 200; i++) {
        const double mid = 0.5 * (lo + hi);
        if (gsl_cdf_binomial_Q((m - 1) / 2, mid, m) <= alpha)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Variance of the sample variance of n iid values with variance s2 and
 * fourth central moment mu4. */
static double var_of_sample_variance(double s2, double mu4, double n)
{
    return mu4 / n - s2 * s2 * (n - 3.0) / (n * (n - 1.0));
}

/* Accepts sigma^2 = s2 (fourth moment mu4) for the MOM_BATCHES x MOM_BATCH
 * recovered scores x, each within dx of its exact value; writes a
 * description into msg.  Returns 1 if accepted.
 * Each batch variance S^2 = var n/(n-1) is computed by the two-pass
 * algorithm (fb_moments: within e_var, and n/(n-1) adds gamma_2), and the
 * scores' own errors move it by at most
 *   P = sum_i (dx_i + mean dx)(2 |x_i - mu^| + 2 e_mu + dx_i + mean dx) / (n - 1)
 * (|c^2 - c'^2| <= |c - c'| (2|c| + |c - c'|) for the centred values).  The
 * median of values each within P_b + e_b of the exact ones is within their
 * maximum of the exact median, which the test allows on top of t. */
static int mom_accepts(const double *x, const double *dx, double s2, double mu4, char *msg,
                       size_t len)
{
    const double n = MOM_BATCH, k = n / (n - 1.0);
    double v[MOM_BATCHES], slack = 0.0;
    for (size_t b = 0; b < MOM_BATCHES; b++) {
        const double *xb = x + b * MOM_BATCH, *db = dx + b * MOM_BATCH;
        double mu, emu, var, evar, dbar = 0.0, P = 0.0;
        fb_moments(xb, MOM_BATCH, &mu, &emu, &var, &evar);
        v[b] = var * k;
        for (size_t i = 0; i < MOM_BATCH; i++)
            dbar += db[i] / n;
        for (size_t i = 0; i < MOM_BATCH; i++)
            P += (db[i] + dbar) * (2.0 * fabs(xb[i] - mu) + 2.0 * emu + db[i] + dbar);
        slack = fmax(slack, (evar * k + test_gamma(2) * v[b] + P / (n - 1.0)) * FB_SLACK);
    }
    gsl_sort(v, 1, MOM_BATCHES);
    const double med = gsl_stats_median_from_sorted_data(v, 1, MOM_BATCHES);
    const double p = mom_p(MOM_BATCHES, ALPHA);
    const double t = sqrt(var_of_sample_variance(s2, mu4, MOM_BATCH) / p);
    /* diagnostic only: the z-score of the pooled variance (CLT, not used to decide) */
    const double pooled = gsl_stats_variance(x, 1, MOM_BATCHES * MOM_BATCH);
    const double z = (pooled - s2) / sqrt(var_of_sample_variance(s2, mu4, MOM_BATCHES * MOM_BATCH));
    snprintf(msg, len, "median of %d batch variances %.6g, expected %.6g +- %.4g (Chebyshev p = %.4g "
             "per batch) + %.3g (rounding); pooled variance %.6g, z = %.3g; seed %lu",
             MOM_BATCHES, med, s2, t, p, slack, pooled, z, test_seed());
    return fabs(med - s2) <= t + slack;
}

/* Scores of n independent (q, k) pairs of dimension d, through the
 * reference, with tau = 1 (scaled) and tau = 1/sqrt(d) (unscaled), and the
 * bound on each one's distance to the exact score (score_error). */
static void paired_scores(double *scaled, double *dsc, double *unscaled, double *dun, size_t n,
                          size_t d, gsl_rng *r)
{
    const size_t H = 200; /* heads per call */
    double *q = prop_calloc(H * 2 * d, sizeof(double)), *k = prop_calloc(H * 2 * d, sizeof(double));
    double *v = prop_calloc(H * 2 * d, sizeof(double)), *out = prop_calloc(H * 2 * d, sizeof(double));
    double *w = prop_calloc(H * 4, sizeof(double)), *M = prop_calloc(H, sizeof(double));
    for (size_t done = 0; done < n; done += H) {
        const size_t G = n - done < H ? n - done : H;
        for (size_t h = 0; h < G; h++) { /* row 0 of q and k stays 0 */
            const double *qh = q + (h * 2 + 1) * d, *kh = k + (h * 2 + 1) * d;
            test_fill_gaussian(q + (h * 2 + 1) * d, d, 0.0, 1.0, r);
            test_fill_gaussian(k + (h * 2 + 1) * d, d, 0.0, 1.0, r);
            M[h] = 0.0;
            for (size_t i = 0; i < d; i++)
                M[h] += fabs(qh[i] * kh[i]);
        }
        for (int pass = 0; pass < 2; pass++) {
            const double tau = pass ? 1.0 / sqrt((double)d) : 1.0;
            const refenc_attn_options opt = {.temperature = tau};
            refenc_attention_forward(out, w, q, k, v, &opt, 1, G, 2, d);
            for (size_t h = 0; h < G; h++) { /* query 1: keys 0 (zero) and 1 */
                const double sc = log(w[h * 4 + 3] / w[h * 4 + 2]);
                cr_assert(fabs(sc) < 1e4, "a recovered score %g is out of range", sc);
                (pass ? unscaled : scaled)[done + h] = sc;
                /* two entries, 0 and z: both within |z| of the maximum */
                (pass ? dun : dsc)[done + h] =
                    score_error(sc, fabs(sc) + 1.0, 2, M[h], sqrt((double)d) * tau, d);
            }
        }
    }
    free(q);
    free(k);
    free(v);
    free(out);
    free(w);
    free(M);
}

Test(qk_variance, score_variance_is_dk_unscaled_and_one_scaled, .timeout = 60)
{
    gsl_rng *r = test_rng(601);
    const size_t n = MOM_BATCHES * MOM_BATCH;
    double *sc = prop_calloc(n, sizeof(double)), *un = prop_calloc(n, sizeof(double));
    double *dsc = prop_calloc(n, sizeof(double)), *dun = prop_calloc(n, sizeof(double));
    char msg[512];
    for (size_t i = 0; i < N_DK; i++) {
        const double d = (double)dks[i];
        paired_scores(sc, dsc, un, dun, n, dks[i], r);
        cr_expect(mom_accepts(un, dun, d, 3.0 * d * d + 6.0 * d, msg, sizeof msg),
                  "Var(q.k) != d_k = %g: %s", d, msg);
        cr_log_info("unscaled, d_k = %g: %s", d, msg);
        cr_expect(mom_accepts(sc, dsc, 1.0, 3.0 + 6.0 / d, msg, sizeof msg),
                  "Var(q.k / sqrt(d_k)) != 1 at d_k = %g: %s", d, msg);
        cr_log_info("scaled, d_k = %g: %s", d, msg);
        /* negative controls: the same test rejects the unscaled scores as
         * having variance 1, and the scaled ones as having variance d_k */
        cr_expect(!mom_accepts(un, dun, 1.0, 3.0 + 6.0 / d, msg, sizeof msg),
                  "negative control: unscaled scores passed as variance 1 (d_k = %g): %s", d, msg);
        cr_expect(!mom_accepts(sc, dsc, d, 3.0 * d * d + 6.0 * d, msg, sizeof msg),
                  "negative control: scaled scores passed as variance d_k = %g: %s", d, msg);
    }
    free(sc);
    free(un);
    free(dsc);
    free(dun);
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------
 * Conditional chi-square. */

/* G heads, each with its own q ~ N(0, I_d) (query row 0; the other rows 0)
 * and keys k_0 = 0, k_1 .. k_{L-1} iid N(0, I_d).  The scores of query 0 are
 * s_j = log(w_0j / w_00) = q.k_j / (sqrt(d) tau).  Returns
 * T = sum_h sum_{j >= 1} s_hj^2 / var_h with var_h = f |q_h|^2 / d.  Given
 * q_h the scores are iid N(0, |q_h|^2 / (d tau^2)): with f = 1/tau^2 (1 for
 * tau = 1, d for tau = 1/sqrt(d)), T ~ chi2(G (L - 1)) exactly. */
static double chi2_statistic(double *dT, size_t G, size_t L, size_t d, double tau, double f,
                             gsl_rng *r)
{
    double *q = prop_calloc(G * L * d, sizeof(double)), *k = prop_calloc(G * L * d, sizeof(double));
    double *v = prop_calloc(G * L * d, sizeof(double)), *out = prop_calloc(G * L * d, sizeof(double));
    double *w = prop_calloc(G * L * L, sizeof(double)), *qn = prop_calloc(G, sizeof(double));
    for (size_t h = 0; h < G; h++) {
        test_fill_gaussian(q + h * L * d, d, 0.0, 1.0, r);
        test_fill_gaussian(k + (h * L + 1) * d, (L - 1) * d, 0.0, 1.0, r);
        double s = 0.0;
        for (size_t i = 0; i < d; i++)
            s += q[h * L * d + i] * q[h * L * d + i];
        qn[h] = s;
    }
    const refenc_attn_options opt = {.temperature = tau};
    refenc_attention_forward(out, w, q, k, v, &opt, 1, G, L, d);
    /* Each term s^2 / var: the recovered score within ds = score_error for
     * a row of L entries spread over at most 2 (max_j |s^_j| + 1), so
     * |s^^2 - s^2| <= ds (2|s^| + ds); var^ = f |q|^2 / d is within
     * gamma_{d+2} relative, the term's evaluation gamma_2, the sum gamma_n:
     * dT = sum ds (2|s^| + ds) / var^ (1 + gamma_{d+3}) + gamma_{n+d+6} T^. */
    double T = 0.0, prop = 0.0;
    for (size_t h = 0; h < G; h++) {
        const double var = f * qn[h] / (double)d;
        const double *qh = q + h * L * d;
        double spread = 0.0;
        for (size_t j = 1; j < L; j++)
            spread = fmax(spread, fabs(log(w[h * L * L + j] / w[h * L * L])) + 1.0);
        spread *= 2.0;
        for (size_t j = 1; j < L; j++) {
            const double *kj = k + (h * L + j) * d;
            double M = 0.0;
            for (size_t i = 0; i < d; i++)
                M += fabs(qh[i] * kj[i]);
            const double s = log(w[h * L * L + j] / w[h * L * L]);
            cr_assert(fabs(s) < 1e4, "a recovered score %g is out of range", s);
            const double ds = score_error(s, spread, L, M, sqrt((double)d) * tau, d);
            T += s * s / var;
            prop += ds * (2.0 * fabs(s) + ds) / var;
        }
    }
    const double nu = (double)(G * (L - 1));
    *dT = (prop * (1.0 + test_gamma((double)d + 3.0)) + test_gamma(nu + (double)d + 6.0) * T) * FB_SLACK;
    free(q);
    free(k);
    free(v);
    free(out);
    free(w);
    free(qn);
    return T;
}

/* T ~ chi2(nu) exactly under the property: accept iff the computed T^ is
 * within dT of the interval between the alpha/2 and 1 - alpha/2 quantiles
 * (some exact T in that interval is then consistent with T^). */
static int chi2_accepts(double T, double dT, double nu, char *msg, size_t len)
{
    const double lo = gsl_cdf_chisq_Pinv(ALPHA / 2, nu);
    const double hi = gsl_cdf_chisq_Qinv(ALPHA / 2, nu);
    snprintf(msg, len, "T = %.6g (+- %.3g), nu = %g, accepted range [%.6g, %.6g] (T/nu = %.4g); "
             "seed %lu", T, dT, nu, lo, hi, T / nu, test_seed());
    return lo - dT <= T && T <= hi + dT;
}

Test(qk_variance, score_given_q_is_exactly_normal_with_variance_q2_over_dk, .timeout = 60)
{
    gsl_rng *r = test_rng(602);
    const size_t L = 16;
    char msg[512];
    for (size_t i = 0; i < N_DK; i++) {
        const size_t d = dks[i], G = d >= 1024 ? 256 : 512;
        const double nu = (double)(G * (L - 1));
        double dT;
        double T = chi2_statistic(&dT, G, L, d, 1.0, 1.0, r);
        cr_expect(chi2_accepts(T, dT, nu, msg, sizeof msg),
                  "scaled scores are not N(0, |q|^2/d_k) at d_k = %zu: %s", d, msg);
        cr_log_info("scaled, d_k = %zu: %s", d, msg);
        /* negative control: the unscaled scores (variance |q|^2) tested as
         * if they had variance |q|^2 / d_k */
        T = chi2_statistic(&dT, G, L, d, 1.0 / sqrt((double)d), 1.0, r);
        cr_expect(!chi2_accepts(T, dT, nu, msg, sizeof msg),
                  "negative control: unscaled scores passed at d_k = %zu: %s", d, msg);
        /* and the unscaled scores do have variance |q|^2 */
        T = chi2_statistic(&dT, G, L, d, 1.0 / sqrt((double)d), (double)d, r);
        cr_expect(chi2_accepts(T, dT, nu, msg, sizeof msg),
                  "unscaled scores are not N(0, |q|^2) at d_k = %zu: %s", d, msg);
    }
    gsl_rng_free(r);
}

/* ------------------------------------------------------------------------
 * Mean largest weight: a coupling that makes the claim exact.
 *
 * Sample g: q = sqrt(d) e_r (r a random coordinate below 16, |q| = sqrt(d),
 * the typical norm of an N(0, I_d) vector) and keys with iid N(0, 1)
 * entries whose coordinate r is z_j, the same z_j for every d_k.  Then the
 * dot product is exactly sqrt(d) z_j (sqrt(d) is a power of two, the other
 * terms are zeros), so
 *   scaled:   s_j = z_j for every d_k          -> bitwise the same weights;
 *   unscaled: s_j = sqrt(d) z_j                -> the largest weight of
 *             softmax(lambda z) is nondecreasing in lambda (its derivative is
 *             w_max (z_max - sum w_j z_j) >= 0), strictly while below 1.
 * The keys' other coordinates are fresh for each d_k; they meet only zeros. */

enum { MW_HEADS = 512, MW_KEYS = 8 };

/* Largest weight of query 0 for each head, with tau = 1 or 1/sqrt(d); the
 * fb_softmax bound of each (recomputed from the scores, which are exact). */
static void largest_weights(double *wmax, double *emax, const size_t *coord, const double *z,
                            size_t d, int scaled, gsl_rng *r)
{
    const size_t G = MW_HEADS, L = MW_KEYS;
    double *q = prop_calloc(G * L * d, sizeof(double)), *k = prop_calloc(G * L * d, sizeof(double));
    double *v = prop_calloc(G * L * d, sizeof(double)), *out = prop_calloc(G * L * d, sizeof(double));
    double *w = prop_calloc(G * L * L, sizeof(double));
    double s[MW_KEYS], y[MW_KEYS], e[MW_KEYS];
    for (size_t h = 0; h < G; h++) {
        q[h * L * d + coord[h]] = sqrt((double)d);
        test_fill_gaussian(k + h * L * d, L * d, 0.0, 1.0, r);
        for (size_t j = 0; j < L; j++)
            k[(h * L + j) * d + coord[h]] = z[h * L + j];
    }
    const double tau = scaled ? 1.0 : 1.0 / sqrt((double)d);
    const refenc_attn_options opt = {.temperature = tau};
    refenc_attention_forward(out, w, q, k, v, &opt, 1, G, L, d);
    for (size_t h = 0; h < G; h++) {
        size_t jm = 0;
        for (size_t j = 0; j < L; j++) {
            s[j] = scaled ? z[h * L + j] : sqrt((double)d) * z[h * L + j]; /* the exact scores */
            if (w[h * L * L + j] > w[h * L * L + jm])
                jm = j;
        }
        fb_softmax(y, e, s, NULL, 1, L, 1.0);
        wmax[h] = w[h * L * L + jm];
        emax[h] = e[jm];
    }
    free(q);
    free(k);
    free(v);
    free(out);
    free(w);
}

/* flat: every largest weight identical (bitwise) to those at d_k = 16. */
static int flat(double *const wm[N_DK])
{
    for (size_t i = 1; i < N_DK; i++)
        if (memcmp(wm[i], wm[0], MW_HEADS * sizeof(double)) != 0)
            return 0;
    return 1;
}

/* grows: each sample's largest weight nondecreasing in d_k within the
 * bounds, and the mean strictly increasing beyond the mean bounds. */
static int grows(double *const wm[N_DK], double *const em[N_DK], char *msg, size_t len)
{
    double mean[N_DK], emean[N_DK];
    int ok = 1;
    for (size_t i = 0; i < N_DK; i++) {
        mean[i] = emean[i] = 0.0;
        for (size_t h = 0; h < MW_HEADS; h++) {
            mean[i] += wm[i][h];
            emean[i] += em[i][h];
            if (i > 0)
                ok &= wm[i][h] >= wm[i - 1][h] - (em[i][h] + em[i - 1][h]) * FB_SLACK;
        }
        mean[i] /= MW_HEADS;
        /* the mean's own rounding: gamma_n of the sum of values <= 1 */
        emean[i] = emean[i] / MW_HEADS + test_gamma(MW_HEADS + 1);
        if (i > 0)
            ok &= mean[i] > mean[i - 1] + (emean[i] + emean[i - 1]) * FB_SLACK;
    }
    snprintf(msg, len, "mean largest weight at d_k = 16, 64, 256, 1024: %.6f %.6f %.6f %.6f",
             mean[0], mean[1], mean[2], mean[3]);
    return ok;
}

Test(qk_variance, mean_largest_weight_grows_without_scaling_and_stays_flat_with_it)
{
    gsl_rng *r = test_rng(603);
    size_t coord[MW_HEADS];
    double *z = prop_calloc(MW_HEADS * MW_KEYS, sizeof(double));
    double *ws[N_DK], *es[N_DK], *wu[N_DK], *eu[N_DK];
    for (size_t h = 0; h < MW_HEADS; h++)
        coord[h] = gsl_rng_uniform_int(r, 16);
    test_fill_gaussian(z, MW_HEADS * MW_KEYS, 0.0, 1.0, r);
    for (size_t i = 0; i < N_DK; i++) {
        ws[i] = prop_calloc(MW_HEADS, sizeof(double));
        es[i] = prop_calloc(MW_HEADS, sizeof(double));
        wu[i] = prop_calloc(MW_HEADS, sizeof(double));
        eu[i] = prop_calloc(MW_HEADS, sizeof(double));
        largest_weights(ws[i], es[i], coord, z, dks[i], 1, r);
        largest_weights(wu[i], eu[i], coord, z, dks[i], 0, r);
    }
    char msg[256];
    cr_expect(flat(ws), "with scaling, the largest weights changed with d_k (seed %lu)", test_seed());
    cr_expect(grows(wu, eu, msg, sizeof msg), "without scaling, the largest weight did not grow: %s",
              msg);
    cr_log_info("unscaled: %s", msg);
    /* negative controls, the same checks the other way round */
    cr_expect(!flat(wu), "negative control: unscaled largest weights were flat");
    cr_expect(!grows(ws, es, msg, sizeof msg), "negative control: scaled largest weights grew: %s", msg);
    for (size_t i = 0; i < N_DK; i++) {
        free(ws[i]);
        free(es[i]);
        free(wu[i]);
        free(eu[i]);
    }
    free(z);
    gsl_rng_free(r);
}
