/* refenc run: an encoder from a JSON config on seeded random weights and
 * inputs; prints a summary of the output and, with --trace, of every step. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>

#include "../refenc.h"
#include "cli.h"
#include "run_config.h"
#include "../tool/random_params.h"

#define DEFAULT_SEED 20240521u

static const char run_usage[] =
    "usage: refenc run --config FILE.json [--seed N] [--trace]\n"
    "       refenc run --case CASE.safetensors --out RESULTS.safetensors\n"
    "                  [--emulate DTYPE] [--bug VARIANT]\n"
    "\n"
    "Builds the encoder described by FILE.json, fills its parameters and its\n"
    "input from a seeded Mersenne Twister (GSL mt19937), runs one forward pass\n"
    "in double precision and prints a summary of the output.\n"
    "\n"
    "options:\n"
    "  --config FILE.json  the config: {\"model\": {...}, \"input\": {...}}\n"
    "                      (docs/cli.md lists every key; unknown keys are errors)\n"
    "  --seed N            seed of the random weights and inputs (default 20240521);\n"
    "                      the same seed gives bit-identical output\n"
    "  --trace             print every step of the forward pass: name, shape,\n"
    "                      mean, std, min, max\n"
    "  --case CASE         instead: run the reference on a golden case's inputs and\n"
    "                      parameters (docs/golden-format.md) ...\n"
    "  --out FILE          ... and write every output it lists to FILE, a results\n"
    "                      file for 'refenc certify' (written atomically)\n"
    "  --emulate DTYPE[,M] ... computed instead by the emulation of a straightforward\n"
    "                      implementation in DTYPE: f32, f16 or bf16, accumulating in\n"
    "                      float32; modifiers: pure (accumulate in DTYPE), fused,\n"
    "                      reverse, float-libm; results written in DTYPE (docs/certify.md)\n"
    "  --bug VARIANT       ... with a known bug (refenc certify --list-bugs)\n"
    "  -h, --help          this help\n"
    "\n"
    "exit codes: 0 success, 2 usage or input error (one message on stderr)\n";

/* mean, std (population), min, max of n values, with GSL's statistics. */
static void print_stats(const char *name, const double *x, size_t ndim, const size_t *shape)
{
    size_t n = 1;
    char dims[96] = "(", part[32];
    for (size_t i = 0; i < ndim; i++) {
        n *= shape[i];
        snprintf(part, sizeof part, i + 1 < ndim ? "%zu, " : "%zu)", shape[i]);
        strncat(dims, part, sizeof dims - strlen(dims) - 1);
    }
    double mean = gsl_stats_mean(x, 1, n);
    double sd = gsl_stats_sd_with_fixed_mean(x, 1, n, mean);
    double min, max;
    gsl_stats_minmax(&min, &max, x, 1, n);
    printf("%-28s %-16s %13.6g %13.6g %13.6g %13.6g\n", name, dims, mean, sd, min, max);
}

static void trace_step(void *ctx, const char *name, const double *data, size_t ndim,
                       const size_t *shape)
{
    (void)ctx;
    print_stats(name, data, ndim, shape);
}

/* FNV-1a over the bytes of the output: equal fingerprints mean bit-identical
 * outputs. */
static uint64_t fingerprint(const double *x, size_t n)
{
    const unsigned char *p = (const unsigned char *)x;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n * sizeof(double); i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static void describe(const refenc_config *c, const run_input *in, const char *path, uint64_t seed)
{
    printf("refenc run: %s, seed %" PRIu64 "\n", path, seed);
    printf("model: %zu layer%s, %s-LN, d_model %zu, %zu heads, d_ff %zu, %s, eps %g, "
           "temperature %g%s\n",
           c->n_layers, c->n_layers == 1 ? "" : "s", c->norm == REFENC_NORM_PRE ? "Pre" : "Post",
           c->d_model, c->n_heads, c->d_ff, refenc_activation_name(c->activation),
           c->layer_norm_eps, c->temperature, c->causal ? ", causal" : "");
    printf("positional: %s", refenc_positional_name(c->positional));
    if (c->positional == REFENC_POS_ROPE)
        printf(" (layout %s, base %g)", refenc_rope_layout_name(c->rope_layout), c->rope_base);
    if (c->positional == REFENC_POS_LEARNED)
        printf(" (max_len %zu)", c->max_len);
    printf("; final norm: %s\n", c->final_norm ? "yes" : "no");
    printf("input: batch %zu, seq_len %zu, %s", in->batch, in->seq_len,
           c->vocab_size ? "tokens" : "x ~ N(0, 1)");
    if (c->vocab_size)
        printf(" (vocab_size %zu, padding_idx %lld)", c->vocab_size, (long long)c->padding_idx);
    if (in->padding != NULL) {
        printf(", trailing padding [");
        for (size_t b = 0; b < in->batch; b++)
            printf(b ? ", %zu" : "%zu", in->padding[b]);
        printf("]");
    }
    printf("\n");
}

/* --emulate DTYPE[,MODIFIER...]: f32, f16 or bf16, then any of pure (accumulate
 * in the dtype), fused, reverse, float-libm (emulate.h's knobs). */
static int parse_emulation(run_case_spec *spec, const char *arg)
{
    static const char *const dtypes[] = {"f64", "f32", "f16", "bf16"}; /* refenc_format order */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", arg);
    char *save = NULL, *tok = strtok_r(buf, ",", &save);
    int f = 1;
    while (tok != NULL && f < REFENC_FMT_COUNT && strcmp(tok, dtypes[f]) != 0)
        f++;
    if (tok == NULL || f == REFENC_FMT_COUNT)
        return 0;
    refenc_emulation e = refenc_emulation_baseline((refenc_format)f);
    while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
        if (strcmp(tok, "pure") == 0)
            e.acc = e.value;
        else if (strcmp(tok, "fused") == 0)
            e.fused = 1;
        else if (strcmp(tok, "reverse") == 0)
            e.reverse_sums = 1;
        else if (strcmp(tok, "float-libm") == 0)
            e.float_functions = 1;
        else
            return 0;
    }
    spec->emulate = 1;
    spec->emulation = e;
    return strlen(arg) < sizeof buf;
}

/* --emulate SPEC or --bug VARIANT of run --case. */
static int case_option(run_case_spec *spec, const char *opt, const char *v)
{
    if (opt[2] == 'e' && !parse_emulation(spec, v))
        return cli_error("run", "--emulate: '%s' is not f32, f16 or bf16 with modifiers pure, fused, reverse, "
                         "float-libm", v);
    if (opt[2] == 'b' && !(spec->has_bug = refenc_variant_parse(&spec->bug, v)))
        return cli_error("run", "--bug: unknown variant '%s' (see 'refenc certify --list-bugs')", v);
    return REFENC_EXIT_OK;
}

/* What the command line asks for. */
typedef struct {
    const char *config_path, *case_path, *out_path;
    uint64_t seed;
    int trace;
    run_case_spec cspec; /* --case: what computes it */
} run_args;

/* Parses argv; *done = 1 when --help was printed.  Returns an exit code. */
static int parse_run_args(run_args *ra, int argc, char **argv, int *done)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(run_usage, stdout);
            *done = 1;
            return REFENC_EXIT_OK;
        } else if (strcmp(a, "--trace") == 0) {
            ra->trace = 1;
            continue;
        }
        if (strcmp(a, "--config") != 0 && strcmp(a, "--seed") != 0 && strcmp(a, "--emulate") != 0 &&
            strcmp(a, "--bug") != 0 && strcmp(a, "--case") != 0 && strcmp(a, "--out") != 0)
            return cli_error("run", "unknown option '%s' (see 'refenc run --help')", a);
        if (++i >= argc)
            return cli_error("run", "%s needs %s (see 'refenc run --help')", a,
                             strcmp(a, "--seed") == 0 || a[2] == 'e' || a[2] == 'b' ? "a value" : "a file name");
        const char *v = argv[i];
        if (strcmp(a, "--seed") == 0) {
            if (!cli_parse_u64(&ra->seed, v) || ra->seed > 0xffffffffu)
                return cli_error("run", "--seed: '%s' is not an integer in [0, 4294967295]", v);
        } else if (strcmp(a, "--emulate") == 0 || strcmp(a, "--bug") == 0) {
            const int rc = case_option(&ra->cspec, a, v);
            if (rc != REFENC_EXIT_OK)
                return rc;
        } else {
            *(a[2] == 'c' && a[3] == 'o' ? &ra->config_path : a[2] == 'c' ? &ra->case_path : &ra->out_path) = v;
        }
    }
    return REFENC_EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
    run_args ra = {.seed = DEFAULT_SEED};
    int done = 0;
    const int rc = parse_run_args(&ra, argc, argv, &done);
    if (done || rc != REFENC_EXIT_OK)
        return rc;
    const char *config_path = ra.config_path;
    const uint64_t seed = ra.seed;
    const int trace = ra.trace;
    if (ra.case_path != NULL || ra.out_path != NULL) {
        if (ra.case_path == NULL || ra.out_path == NULL)
            return cli_error("run", "--case and --out go together (see 'refenc run --help')");
        if (config_path != NULL || trace)
            return cli_error("run", "--case does not combine with --config or --trace");
        return run_case(ra.case_path, ra.out_path, &ra.cspec);
    }
    if (ra.cspec.emulate || ra.cspec.has_bug)
        return cli_error("run", "--emulate and --bug go with --case");
    if (config_path == NULL)
        return cli_error("run", "--config FILE.json is required (see 'refenc run --help')");

    refenc_config cfg;
    run_input spec;
    refenc_error err;
    refenc_error_clear(&err);
    if (run_config_load(&cfg, &spec, config_path, &err) != REFENC_OK) {
        free(spec.padding);
        return cli_error("run", "%s", err.message);
    }

    const size_t B = spec.batch, L = spec.seq_len, D = cfg.d_model;
    refenc_params params;
    refenc_workspace ws;
    int st = refenc_params_alloc(&params, &cfg, &err);
    if (st == REFENC_OK)
        st = refenc_workspace_alloc(&ws, &cfg, B, L, &err);
    else
        memset(&ws, 0, sizeof ws);

    double *x = NULL, *y = NULL;
    int64_t *tokens = NULL;
    uint8_t *mask = NULL;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (st == REFENC_OK) {
        y = malloc(B * L * D * sizeof *y); /* sizes validated above */
        if (cfg.vocab_size > 0)
            tokens = malloc(B * L * sizeof *tokens);
        else
            x = malloc(B * L * D * sizeof *x);
        if (spec.padding != NULL)
            mask = calloc(B * L, 1);
        if (rng == NULL || y == NULL || (cfg.vocab_size > 0 ? !tokens : !x) ||
            (spec.padding != NULL && mask == NULL))
            st = refenc_error_set(&err, REFENC_ENOMEM, "out of memory for the input and output");
    }

    if (st == REFENC_OK) {
        /* the random stream: parameters in table order, then the input */
        gsl_rng_set(rng, (unsigned long)seed);
        refenc_params_init_random(&params, &cfg, rng);
        for (size_t b = 0; b < B; b++) {
            const size_t pad = spec.padding ? spec.padding[b] : 0;
            for (size_t l = 0; l < L; l++) {
                const int padded = l >= L - pad;
                if (mask != NULL)
                    mask[b * L + l] = (uint8_t)padded;
                if (tokens != NULL) {
                    int64_t t;
                    if (cfg.padding_idx >= 0 && cfg.vocab_size > 1) { /* never the padding token */
                        t = (int64_t)gsl_rng_uniform_int(rng, (unsigned long)cfg.vocab_size - 1);
                        if (t >= cfg.padding_idx)
                            t++;
                    } else {
                        t = (int64_t)gsl_rng_uniform_int(rng, (unsigned long)cfg.vocab_size);
                    }
                    tokens[b * L + l] = padded && cfg.padding_idx >= 0 ? cfg.padding_idx : t;
                } else {
                    for (size_t d = 0; d < D; d++)
                        x[(b * L + l) * D + d] = gsl_ran_gaussian_ziggurat(rng, 1.0);
                }
            }
        }

        describe(&cfg, &spec, config_path, seed);
        const refenc_input input = {.B = B, .L = L, .tokens = tokens, .x = x,
                                    .key_padding_mask = mask};
        const refenc_trace tr = {trace_step, NULL};
        if (trace)
            printf("\n%-28s %-16s %13s %13s %13s %13s\n", "step", "shape", "mean", "std", "min", "max");
        st = refenc_encoder_forward(y, &ws, &params, &cfg, &input, trace ? &tr : NULL, &err);
        if (st == REFENC_OK) {
            const size_t shape[3] = {B, L, D};
            printf("\n%-28s %-16s %13s %13s %13s %13s\n", "", "shape", "mean", "std", "min", "max");
            print_stats("output", y, 3, shape);
            const size_t shown = D < 4 ? D : 4;
            printf("output[0, 0, 0:%zu] =", shown);
            for (size_t d = 0; d < shown; d++)
                printf(" %.17g", y[d]);
            printf("\n");
            printf("fingerprint (FNV-1a of the output's bytes): %016" PRIx64 "\n",
                   fingerprint(y, B * L * D));
        }
    }

    gsl_rng_free(rng);
    free(x);
    free(y);
    free(tokens);
    free(mask);
    free(spec.padding);
    refenc_workspace_free(&ws);
    refenc_params_free(&params);
    if (st != REFENC_OK)
        return cli_error("run", "%s", err.message);
    return REFENC_EXIT_OK;
}
