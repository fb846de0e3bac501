/* refenc run: an encoder from a JSON config on seeded random weights and
 * inputs; prints a summary of the output and, with --trace, of every step. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>

#include "../refenc.h"
#include "cli.h"

#define DEFAULT_SEED 20240521u

static const char run_usage[] =
    "usage: refenc run --config FILE.json [--seed N] [--trace]\n"
    "       refenc run --case CASE.safetensors --out RESULTS.safetensors\n"
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
    "  -h, --help          this help\n"
    "\n"
    "exit codes: 0 success, 2 usage or input error (one message on stderr)\n";

/* The run's input description: "input": {"batch", "seq_len", "padding"}. */
typedef struct {
    size_t batch, seq_len;
    size_t *padding; /* (batch): trailing padding positions per item, or NULL */
} run_input;

static const char *const input_keys[] = {"batch", "seq_len", "padding", NULL};

static int read_input_spec(run_input *in, const json_t *obj, const char *where, refenc_error *err)
{
    int st;
    in->batch = 2;
    in->seq_len = 8;
    in->padding = NULL;
    if (obj == NULL)
        return REFENC_OK;
    if (!json_is_object(obj))
        return refenc_error_set(err, REFENC_EINVAL, "%s: expected a JSON object", where);
    if ((st = refenc_json_check_keys(obj, input_keys, where, err)) ||
        (st = refenc_json_get_size(&in->batch, obj, "batch", where, err)) ||
        (st = refenc_json_get_size(&in->seq_len, obj, "seq_len", where, err)))
        return st;
    if (in->batch == 0 || in->batch > REFENC_MAX_BATCH)
        return refenc_error_set(err, in->batch ? REFENC_ELIMIT : REFENC_EINVAL,
                                "%s.batch: %zu is outside [1, %zu]", where, in->batch, REFENC_MAX_BATCH);
    if (in->seq_len == 0 || in->seq_len > REFENC_MAX_DIM)
        return refenc_error_set(err, in->seq_len ? REFENC_ELIMIT : REFENC_EINVAL,
                                "%s.seq_len: %zu is outside [1, %zu]", where, in->seq_len, REFENC_MAX_DIM);

    const json_t *pad = json_object_get(obj, "padding");
    if (pad == NULL)
        return REFENC_OK;
    if (!json_is_array(pad) || json_array_size(pad) != in->batch)
        return refenc_error_set(err, REFENC_EINVAL,
                                "%s.padding: expected an array of %zu integers (one per batch item)",
                                where, in->batch);
    in->padding = calloc(in->batch, sizeof *in->padding);
    if (in->padding == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "%s.padding: out of memory", where);
    for (size_t b = 0; b < in->batch; b++) {
        const json_t *v = json_array_get(pad, b);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > in->seq_len)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "%s.padding[%zu]: expected an integer in [0, seq_len = %zu]",
                                    where, b, in->seq_len);
        in->padding[b] = (size_t)json_integer_value(v);
    }
    return REFENC_OK;
}

/* The top level holds "model" and "input" only.  (refenc_json_check_keys
 * would name the key "FILE.key", which reads as a file name.) */
static int check_top_keys(const json_t *root, const char *path, refenc_error *err)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)root, key, value) {
        (void)value;
        if (strcmp(key, "model") != 0 && strcmp(key, "input") != 0)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "%s: %s: unknown top-level key (known keys: model, input)",
                                    path, key);
    }
    return REFENC_OK;
}

/* Reads FILE.json into a model config and an input description. */
static int load_config(refenc_config *cfg, run_input *in, const char *path, refenc_error *err)
{
    json_error_t jerr;
    char where[1024];
    struct stat sb;
    int st;

    in->padding = NULL;
    /* jansson reads a directory as an empty file: say what it is instead */
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return refenc_error_set(err, REFENC_EIO, "%s: is a directory, not a JSON file", path);
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        if (jerr.line < 0)
            return refenc_error_set(err, REFENC_EINVAL, "%s: %s", path, jerr.text);
        return refenc_error_set(err, REFENC_EINVAL, "%s: line %d, column %d (byte %d): %s",
                                path, jerr.line, jerr.column, jerr.position, jerr.text);
    }
    if (!json_is_object(root))
        st = refenc_error_set(err, REFENC_EINVAL, "%s: the top level must be a JSON object", path);
    else if ((st = check_top_keys(root, path, err)) == REFENC_OK) {
        const json_t *model = json_object_get(root, "model");
        snprintf(where, sizeof where, "%s: model", path);
        if (model == NULL)
            st = refenc_error_set(err, REFENC_EINVAL, "%s: the key \"model\" is required", path);
        else
            st = refenc_config_from_json(cfg, model, where, err);
        if (st == REFENC_OK) {
            snprintf(where, sizeof where, "%s: input", path);
            st = read_input_spec(in, json_object_get(root, "input"), where, err);
        }
        if (st == REFENC_OK) {
            st = refenc_config_validate_shape(cfg, in->batch, in->seq_len, err);
            if (st) { /* "config: <field> ..." becomes "FILE: <field> ..." */
                char msg[REFENC_ERRMSG_MAX];
                const char *rest = strncmp(err->message, "config: ", 8) == 0 ? err->message + 8
                                                                            : err->message;
                snprintf(msg, sizeof msg, "%s", rest);
                refenc_error_set(err, st, "%s: %s", path, msg);
            }
        }
    }
    json_decref(root);
    return st;
}

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

int cmd_run(int argc, char **argv)
{
    const char *config_path = NULL, *case_path = NULL, *out_path = NULL;
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
        return run_case(case_path, out_path);
    }
    if (config_path == NULL)
        return cli_error("run", "--config FILE.json is required (see 'refenc run --help')");

    refenc_config cfg;
    run_input spec;
    refenc_error err;
    refenc_error_clear(&err);
    if (load_config(&cfg, &spec, config_path, &err) != REFENC_OK) {
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
