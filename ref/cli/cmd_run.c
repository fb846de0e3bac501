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
#include "run_weights.h"
#include "../tool/random_params.h"

#define DEFAULT_SEED 20240521u

static const char run_usage[] =
    "usage: refenc run --config FILE.json [--weights W.safetensors] [--seed N] [--trace]\n"
    "       refenc run --case CASE.safetensors --out RESULTS.safetensors\n"
    "\n"
    "Builds the encoder described by FILE.json, fills its parameters and its\n"
    "input from a seeded Mersenne Twister (GSL mt19937), runs one forward pass\n"
    "in double precision and prints a summary of the output.\n"
    "\n"
    "options:\n"
    "  --config FILE.json  the config: {\"model\": {...}, \"input\": {...}}\n"
    "                      (docs/cli.md lists every key; unknown keys are errors)\n"
    "  --weights W         the parameters from W, a checkpoint in the config's family\n"
    "                      layout (Hugging Face names for bert, roberta, distilbert,\n"
    "                      gpt2, clip-text; refenc's own for vaswani; docs/families.md)\n"
    "                      instead of random ones; the input is the seed's, as without\n"
    "  --seed N            seed of the random weights and inputs (default 20240521);\n"
    "                      the same seed gives bit-identical output\n"
    "  --trace             print every step of the forward pass: name, shape,\n"
    "                      mean, std, min, max\n"
    "  --case CASE         instead: run the reference on a golden case's inputs and\n"
    "                      parameters (docs/golden-format.md) ...\n"
    "  --out FILE          ... and write every output it lists to FILE, a results\n"
    "                      file for 'refenc certify' (written atomically)\n"
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
    if (c->family != REFENC_FAMILY_VASWANI || !c->scale_embedding || c->type_vocab_size > 0 ||
        c->embedding_norm || c->position_ids != REFENC_POSIDS_INDEX || c->mask_value != REFENC_MASK_NEG_INF)
        printf("family: %s; embedding %s, %zu token types, %s, positions %s; masked scores %s\n",
               refenc_family_name(c->family), c->scale_embedding ? "x sqrt(D)" : "unscaled",
               c->type_vocab_size, c->embedding_norm ? "LayerNorm" : "no LayerNorm",
               refenc_position_ids_name(c->position_ids), refenc_mask_value_name(c->mask_value));
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

int cmd_run(int argc, char **argv)
{
    const char *config_path = NULL, *case_path = NULL, *out_path = NULL, *weights_path = NULL;
    char weights_summary[1024] = "";
    uint64_t seed = DEFAULT_SEED;
    int trace = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(run_usage, stdout);
            return REFENC_EXIT_OK;
        } else if (strcmp(a, "--config") == 0) {
            if (++i >= argc)
                return cli_error("run", "--config needs a file name (see 'refenc run --help')");
            config_path = argv[i];
        } else if (strcmp(a, "--seed") == 0) {
            if (++i >= argc)
                return cli_error("run", "--seed needs a value (see 'refenc run --help')");
            if (!cli_parse_u64(&seed, argv[i]) || seed > 0xffffffffu)
                return cli_error("run", "--seed: '%s' is not an integer in [0, 4294967295]", argv[i]);
        } else if (strcmp(a, "--weights") == 0) {
            if (++i >= argc)
                return cli_error("run", "--weights needs a file name (see 'refenc run --help')");
            weights_path = argv[i];
        } else if (strcmp(a, "--trace") == 0) {
            trace = 1;
        } else if (strcmp(a, "--case") == 0 || strcmp(a, "--out") == 0) {
            if (++i >= argc)
                return cli_error("run", "%s needs a file name (see 'refenc run --help')", a);
            *(a[2] == 'c' ? &case_path : &out_path) = argv[i];
        } else {
            return cli_error("run", "unknown option '%s' (see 'refenc run --help')", a);
        }
    }
    if (case_path != NULL || out_path != NULL) {
        if (case_path == NULL || out_path == NULL)
            return cli_error("run", "--case and --out go together (see 'refenc run --help')");
        if (config_path != NULL || trace)
            return cli_error("run", "--case does not combine with --config or --trace");
        if (weights_path != NULL)
            return cli_error("run", "--weights goes with --config, not with --case");
        return run_case(case_path, out_path);
    }
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
    int64_t *tokens = NULL, *types = NULL;
    uint8_t *mask = NULL;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (st == REFENC_OK) {
        y = malloc(B * L * D * sizeof *y); /* sizes validated above */
        if (cfg.vocab_size > 0)
            tokens = malloc(B * L * sizeof *tokens);
        if (cfg.type_vocab_size > 0)
            types = malloc(B * L * sizeof *types);
        if (cfg.vocab_size == 0)
            x = malloc(B * L * D * sizeof *x);
        if (spec.padding != NULL)
            mask = calloc(B * L, 1);
        if (rng == NULL || y == NULL || (cfg.vocab_size > 0 ? !tokens : !x) ||
            (cfg.type_vocab_size > 0 && types == NULL) ||
            (spec.padding != NULL && mask == NULL))
            st = refenc_error_set(&err, REFENC_ENOMEM, "out of memory for the input and output");
    }

    if (st == REFENC_OK) {
        /* the random stream: parameters in table order, then the input (with
         * --weights the parameters are drawn all the same, then replaced: the
         * input is the one the seed gives without) */
        gsl_rng_set(rng, (unsigned long)seed);
        refenc_params_init_random(&params, &cfg, rng);
        if (weights_path != NULL)
            st = run_load_weights(&params, &cfg, weights_path, weights_summary,
                                  sizeof weights_summary, &err);
    }

    if (st == REFENC_OK) {
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
                    if (types != NULL) /* padding gets type 0, as HF tokenizers give it */
                        types[b * L + l] = padded ? 0 : (int64_t)gsl_rng_uniform_int(
                                               rng, (unsigned long)cfg.type_vocab_size);
                } else {
                    for (size_t d = 0; d < D; d++)
                        x[(b * L + l) * D + d] = gsl_ran_gaussian_ziggurat(rng, 1.0);
                }
            }
        }

        describe(&cfg, &spec, config_path, seed);
        if (weights_summary[0] != '\0')
            printf("%s\n", weights_summary);
        const refenc_input input = {.B = B, .L = L, .tokens = tokens, .x = x,
                                    .key_padding_mask = mask, .token_types = types};
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
    free(types);
    free(mask);
    free(spec.padding);
    refenc_workspace_free(&ws);
    refenc_params_free(&params);
    if (st != REFENC_OK)
        return cli_error("run", "%s", err.message);
    return REFENC_EXIT_OK;
}
