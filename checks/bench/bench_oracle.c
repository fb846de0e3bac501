/* make bench-oracle: time of the reference and of the certified oracle, per
 * operation and for the 2-layer encoder of the budget (D 64, H 4, F 256,
 * L 32, B 2, GELU), with the precision Ziv's loop needed.  Times are CPU
 * time of this process (one core), the best of a few runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../../ref/oracle/oracle.h"
#include "../../ref/refenc.h"
#include "../../ref/tool/random_params.h"

#define P0 REFENC_MP_PREC_DEFAULT

static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double *randn(size_t n, double sd, gsl_rng *r)
{
    double *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = gsl_ran_gaussian_ziggurat(r, sd);
    return x;
}

static int budget_failed = 0;

static void row(const char *name, double t_ref, double t_mp, const refenc_mp_report *rep, int st)
{
    if (st != REFENC_OK) {
        printf("| %-34s | oracle failed: %s |\n", name, rep->error.message);
        budget_failed = 1;
        return;
    }
    printf("| %-34s | %11.3g | %10.4f | %9.0f | %4ld / %4ld |\n", name, t_ref, t_mp,
           t_mp / t_ref, (long)rep->prec, (long)rep->prec_check);
}

/* best of reps runs */
#define TIME(var, reps, stmt)                     \
    do {                                          \
        var = INFINITY;                           \
        for (int r_ = 0; r_ < (reps); r_++) {     \
            const double t0_ = cpu();             \
            stmt;                                 \
            const double t_ = cpu() - t0_;        \
            if (t_ < var)                         \
                var = t_;                         \
        }                                         \
    } while (0)

int main(void)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 20240521ul);
    refenc_mp_report rep;
    int st = 0;
    double tr, tm;
    const size_t B = 2, L = 32, D = 64, H = 4, F = 256, Dh = D / H, BL = B * L;

    printf("| operation (sizes)                  | reference s | oracle s   | ratio     | prec / check |\n");
    printf("|------------------------------------|-------------|------------|-----------|--------------|\n");
    {
        double *x = randn(BL * D, 1, r), *W = randn(D * D, 0.125, r), *b = randn(D, 0.1, r);
        double *y = malloc(BL * D * sizeof *y);
        TIME(tr, 50, refenc_linear_forward(y, x, W, b, BL, D, D));
        TIME(tm, 3, st = refenc_mp_linear_forward(y, x, W, b, BL, D, D, P0, &rep));
        row("linear (64 x 64 -> 64)", tr, tm, &rep, st);
        double *g = randn(D, 1, r);
        TIME(tr, 50, refenc_layernorm_forward(y, x, g, b, BL, D, 1e-5));
        TIME(tm, 3, st = refenc_mp_layernorm_forward(y, x, g, b, BL, D, 1e-5, P0, &rep));
        row("layernorm (64 x 64)", tr, tm, &rep, st);
        free(x), free(W), free(b), free(y), free(g);
    }
    {
        const size_t n = B * H * L * L;
        double *s = randn(n, 3, r), *y = malloc(n * sizeof *y);
        TIME(tr, 50, refenc_softmax_forward(y, s, B * H * L, L, 1.0));
        TIME(tm, 3, st = refenc_mp_softmax_forward(y, s, B * H * L, L, 1.0, P0, &rep));
        row("softmax (256 rows of 32)", tr, tm, &rep, st);
        free(s), free(y);
    }
    for (int act = 0; act < 3; act++) {
        const size_t n = BL * F;
        double *x = randn(n, 1, r), *y = malloc(n * sizeof *y);
        static const char *names[] = {"relu (16384)", "gelu (16384)", "gelu_tanh (16384)"};
        TIME(tr, 20, refenc_activation_forward(y, x, n, (refenc_activation)act));
        TIME(tm, 2, st = refenc_mp_activation_forward(y, x, n, (refenc_activation)act, P0, &rep));
        row(names[act], tr, tm, &rep, st);
        free(x), free(y);
    }
    {
        int64_t pos[32];
        for (size_t l = 0; l < L; l++)
            pos[l] = 8160 + (int64_t)l;
        double *pe = malloc(L * D * sizeof *pe), *x = randn(B * H * L * Dh, 1, r);
        double *y = malloc(B * H * L * Dh * sizeof *y);
        TIME(tr, 50, refenc_sinusoidal_table(pe, pos, L, D));
        TIME(tm, 3, st = refenc_mp_sinusoidal_table(pe, pos, L, D, P0, &rep));
        row("sinusoidal table (32 x 64)", tr, tm, &rep, st);
        TIME(tr, 50, refenc_rope_forward(y, x, pos, B * H, L, Dh, 1e4, REFENC_ROPE_HALF));
        TIME(tm, 3, st = refenc_mp_rope_forward(y, x, pos, B * H, L, Dh, 1e4, REFENC_ROPE_HALF, P0, &rep));
        row("rope (8 x 32 x 16)", tr, tm, &rep, st);
        free(pe), free(x), free(y);
    }
    {
        const size_t n = B * H * L * Dh;
        double *q = randn(n, 1, r), *k = randn(n, 1, r), *v = randn(n, 1, r);
        double *o = malloc(n * sizeof *o), *w = malloc(B * H * L * L * sizeof *w);
        int64_t pos[32];
        for (size_t l = 0; l < L; l++)
            pos[l] = (int64_t)l;
        refenc_attn_options opt = {.positions = pos, .temperature = 1.0};
        TIME(tr, 50, refenc_attention_forward(o, w, q, k, v, &opt, B, H, L, Dh));
        TIME(tm, 3, st = refenc_mp_attention_forward(o, w, q, k, v, &opt, B, H, L, Dh, P0, &rep));
        row("attention (2 x 4 x 32 x 16)", tr, tm, &rep, st);
        free(q), free(k), free(v), free(o), free(w);
    }
    {
        double *x = randn(BL * D, 1, r), *W1 = randn(F * D, 0.125, r), *b1 = randn(F, 0.1, r);
        double *W2 = randn(D * F, 0.0625, r), *b2 = randn(D, 0.1, r);
        double *y = malloc(BL * D * sizeof *y), *h = malloc(BL * F * sizeof *h);
        TIME(tr, 20, refenc_ffn_forward(y, h, x, W1, b1, W2, b2, BL, D, F, REFENC_ACT_GELU));
        TIME(tm, 2, st = refenc_mp_ffn_forward(y, h, x, W1, b1, W2, b2, BL, D, F, REFENC_ACT_GELU, P0, &rep));
        row("ffn gelu (64 x 64 -> 256 -> 64)", tr, tm, &rep, st);
        free(x), free(W1), free(b1), free(W2), free(b2), free(y), free(h);
    }

    /* the budget: a 2-layer encoder, D 64, H 4, F 256, L 32, B 2, defaults
     * (Pre-LN, exact GELU, final LayerNorm), with the rounding check */
    double worst = 0;
    static const refenc_activation acts[] = {REFENC_ACT_GELU, REFENC_ACT_GELU_TANH, REFENC_ACT_RELU};
    static const char *enc_names[] = {"encoder 2 layers, gelu (budget)", "encoder 2 layers, gelu_tanh",
                                      "encoder 2 layers, relu"};
    for (int a = 0; a < 3; a++) {
        refenc_config cfg;
        refenc_config_default(&cfg);
        cfg.activation = acts[a];
        refenc_params p;
        refenc_error err;
        refenc_workspace ws;
        if (refenc_params_alloc(&p, &cfg, &err) || refenc_workspace_alloc(&ws, &cfg, B, L, &err)) {
            fprintf(stderr, "%s\n", err.message);
            return 2;
        }
        refenc_params_init_random(&p, &cfg, r);
        double *x = randn(BL * D, 1, r), *y = malloc(BL * D * sizeof *y);
        refenc_input in = {.B = B, .L = L, .x = x};
        TIME(tr, 20, refenc_encoder_forward(y, &ws, &p, &cfg, &in, NULL, &err));
        TIME(tm, 2, st = refenc_mp_encoder_forward(y, &p, &cfg, &in, NULL, P0, &rep));
        row(enc_names[a], tr, tm, &rep, st);
        if (a == 0)
            worst = tm;
        free(x), free(y);
        refenc_workspace_free(&ws);
        refenc_params_free(&p);
    }
    gsl_rng_free(r);
    printf("\nbudget: 2-layer encoder (D 64, H 4, F 256, L 32, B 2) in the oracle with the "
           "rounding check: %.3f s CPU, limit 2 s: %s\n", worst, worst < 2.0 ? "holds" : "EXCEEDED");
    return worst < 2.0 && !budget_failed ? 0 : 1;
}
