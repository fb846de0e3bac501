/* The finite-difference budget and the reference's kernel table
 * (gradcheck.h; the derivation is in docs/gradients.md). */
#include "gradcheck.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <gsl/gsl_randist.h>

const gc_kernels gc_reference = {
    .name = "reference",
    .linear = refenc_linear_backward,
    .layernorm = refenc_layernorm_backward,
    .softmax = refenc_softmax_backward,
    .attention = refenc_attention_backward,
    .rope = refenc_rope_backward,
    .activation = refenc_activation_backward,
    .embedding = refenc_embedding_backward,
};

/* D(h) = (phi(h) - phi(-h)) / (2h) = phi' + c3 h^2 + c5 h^4 + ...,
 * c3 = phi'''/6, c5 = phi^(5)/120 (Taylor, phi smooth on [-h, h]).
 * Computed: |D^(h) - D(h)| <= rho(h) = (err(h) + err(-h)) / (2h) + u |D^(h)|
 * (the division by 2h, a power of two, is exact; the subtraction rounds
 * once).
 * Halving: D(h) - D(h/2) = (3/4) c3 h^2 + (15/16) c5 h^4 + ..., so
 *   D(h/2) - phi' = (D(h) - D(h/2))/3 - c5 h^4/4 + ...
 * and, with the one assumption of the scheme, |c5| h^4/4 <= |D(h) - D(h/2)|/3
 * (the step is in the asymptotic range: the h^4 term is below the h^2 one),
 *   |D^(h/2) - phi'| <= (2/3)|D^(h) - D^(h/2)| + (5/3) rho(h/2) + (2/3) rho(h). */
void gc_central(gc_fd *r, gc_phi phi, void *ctx, double h)
{
    double e[4];
    const double p1 = phi(ctx, h, &e[0]), m1 = phi(ctx, -h, &e[1]);
    const double p2 = phi(ctx, h / 2, &e[2]), m2 = phi(ctx, -h / 2, &e[3]);
    r->d1 = (p1 - m1) / (2.0 * h);
    r->d2 = (p2 - m2) / h;
    const double rho1 = (e[0] + e[1]) / (2.0 * h), rho2 = (e[2] + e[3]) / h; /* rho(h), rho(h/2) */
    r->trunc = (2.0 / 3.0) * fabs(r->d1 - r->d2);
    const double rho1u = rho1 + 0x1p-53 * fabs(r->d1), rho2u = rho2 + 0x1p-53 * fabs(r->d2);
    r->round = (5.0 / 3.0) * rho2u + (2.0 / 3.0) * rho1u;
    r->tol = (r->trunc + r->round) * (1.0 + 0x1p-20);
}

void gc_quantize(double *x, size_t n, double grid)
{
    for (size_t i = 0; i < n; i++)
        x[i] = nearbyint(x[i] / grid) * grid; /* grid a power of two: exact */
}

void gc_direction(double *v, size_t n, double sigma, gsl_rng *r)
{
    for (size_t i = 0; i < n; i++)
        v[i] = fmax(-8.0, fmin(8.0, gsl_ran_gaussian_ziggurat(r, sigma)));
    gc_quantize(v, n, GC_GRID_V);
}

double gc_dot(const double *a, const double *b, size_t n, double *err)
{
    double s = 0.0, mag = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += a[i] * b[i];
        mag += fabs(a[i] * b[i]);
    }
    if (err != NULL)
        *err = test_gamma((double)n + 1.0) * mag;
    return s;
}

int gc_fd_check(test_worst *w, double a, double ea, const gc_fd *fd, const char *fmt, ...)
{
    char where[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where, sizeof where, fmt, ap);
    va_end(ap);
    return test_worst_check(w, a, fd->d2, fd->tol + ea,
                            "%s (d(h) %.17g, trunc %.3g, round %.3g)", where, fd->d1, fd->trunc,
                            fd->round);
}

const gc_named_property gc_properties[] = {
    {"linear_fd", gp_linear_fd},
    {"linear_outer", gp_linear_outer},
    {"layernorm_rows", gp_layernorm_rows},
    {"layernorm_fd", gp_layernorm_fd},
    {"softmax_rows", gp_softmax_rows},
    {"softmax_fd", gp_softmax_fd},
    {"activation_fd", gp_activation_fd},
    {"rope_fd", gp_rope_fd},
    {"embedding_repeats", gp_embedding_repeats},
    {"attention_adjoint", gp_attention_adjoint},
    {"attention_rows", gp_attention_rows},
    {"attention_masked_keys", gp_attention_masked_keys},
};
const size_t gc_n_properties = sizeof gc_properties / sizeof gc_properties[0];

void gc_report(const test_worst *w, size_t bad)
{
    char msg[768];
    cr_log_info("%s", test_worst_describe(w, msg, sizeof msg));
    cr_assert(w->checked > 0, "nothing was checked");
    cr_assert(bad == 0, "%zu violations; %s", bad, test_worst_describe(w, msg, sizeof msg));
}

void gc_holds(gc_property run, const gc_kernels *K, unsigned long stream)
{
    gsl_rng *r = test_rng(stream);
    test_worst w;
    test_worst_init(&w);
    const size_t bad = run(K, r, &w);
    gsl_rng_free(r);
    gc_report(&w, bad);
}

double gc_dot_rounded(const double *dY, const double *y, size_t n, double *err)
{
    double e = 0;
    const double s = gc_dot(dY, y, n, &e);
    for (size_t i = 0; i < n; i++)
        e += fabs(dY[i]) * TEST_U * (1.0 + 2.0 * TEST_U) * fabs(y[i]);
    *err = e;
    return s;
}
