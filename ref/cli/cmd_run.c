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

#include "../core/text.h"
#include "../refenc.h"
#include "cli.h"
#include "../io/model_sources.h"
#include "results.h"
#include "../io/run_config.h"
#include "../io/same_file.h"
#include "../tool/random_params.h"

#define DEFAULT_SEED 20240521u

static const char run_usage[] =
    "usage: refenc run --config FILE.json [--weights W.safetensors] [--inputs I.safetensors]\n"
    "                  [--seed N] [--trace] [--out RESULTS.safetensors]\n"
    "       refenc run --case CASE.safetensors --out RESULTS.safetensors\n"
    "                  [--emulate DTYPE[,MODIFIER...]] [--bug VARIANT] [--grad]\n"
    "\n"
    "Builds the encoder described by FILE.json, fills its parameters and its\n"
    "input from a seeded Mersenne Twister (GSL mt19937) or from your files, runs\n"
    "one forward pass in double precision and prints a summary of the output.\n"
    "\n"
    "options:\n"
    "  --config FILE.json  the config: {\"model\": {...}, \"input\": {...}}\n"
    "                      (docs/cli.md lists every key; unknown keys are errors)\n"
    "  --weights FILE      the parameters from a safetensors file (F64, F32, F16 or\n"
    "                      BF16) instead of random ones: under refenc's PyTorch\n"
    "                      state_dict names, or, for a family other than vaswani,\n"
    "                      as the family's Hugging Face checkpoint holds them\n"
    "                      (docs/families.md)\n"
    "  --inputs FILE       the input from a safetensors file (in.tokens or in.x, and\n"
    "                      optionally in.token_type_ids, in.key_padding_mask,\n"
    "                      in.positions, in.attn_mask)\n"
    "  --seed N            seed of the random weights and inputs (default 20240521);\n"
    "                      the same seed gives bit-identical output\n"
    "  --trace             print every step of the forward pass: name, shape,\n"
    "                      mean, std, min, max\n"
    "  --out FILE          also write every step's output (out.<step>, F64) to FILE,\n"
    "                      a results file for 'refenc certify' (written atomically)\n"
    "  --case CASE         instead: run the reference on a golden case's inputs and\n"
    "                      parameters (docs/golden-format.md) and write every output\n"
    "                      it lists to the --out file ...\n"
    "  --emulate DTYPE[,M] ... computed instead by the emulation of a straightforward\n"
    "                      implementation in DTYPE: f32, f16 or bf16, accumulating in\n"
    "                      float32; modifiers: pure (accumulate in DTYPE), fused,\n"
    "                      reverse, float-libm; results written in DTYPE (docs/certify.md)\n"
    "  --bug VARIANT       ... with a known bug (refenc certify --list-bugs), or with\n"
    "                      --grad a backward bug (refenc certify --list-grad-bugs)\n"
    "  --grad              ... and the reference's double backward at the case's\n"
    "                      in.grad.dY: every gradient it lists (grad.*), F64 (a\n"
    "                      case made with 'refenc golden --grad'); with --emulate the\n"
    "                      emulated backward, in DTYPE (not with --bug, fused,\n"
    "                      reverse or float-libm)\n"
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

static void describe(const refenc_config *c, const refenc_case *k, const run_input *in,
                     const char *path, uint64_t seed, const char *weights, const char *inputs)
{
    printf("refenc run: %s, seed %" PRIu64 "\n", path, seed);
    if (weights != NULL)
        printf("weights: %s\n", weights);
    printf("model: %zu layer%s, %s-LN, d_model %zu, %zu heads, d_ff %zu, %s, eps %g, "
           "temperature %g%s\n",
           c->n_layers, c->n_layers == 1 ? "" : "s", c->norm == REFENC_NORM_PRE ? "Pre" : "Post",
           c->d_model, c->n_heads, c->d_ff, refenc_activation_name(c->activation),
           c->layer_norm_eps, c->temperature, c->causal ? ", causal" : "");
    if (c->family != REFENC_FAMILY_VASWANI || !c->scale_embedding || c->type_vocab_size > 0 ||
        c->embedding_norm || c->position_ids != REFENC_POSIDS_INDEX || c->mask_value != REFENC_MASK_NEG_INF)
        printf("family: %s; embedding %s, %zu token types, %s, positions %s; masked scores %s\n",
               refenc_family_name(c->family), c->scale_embedding ? "x sqrt(D)" : "unscaled",
               c->type_vocab_size, c->embedding_norm ? "LayerNorm" : "no LayerNorm",
               refenc_position_ids_name(c->position_ids), refenc_mask_value_name(c->mask_value));
    printf("positional: %s", refenc_positional_name(c->positional));
    if (c->positional == REFENC_POS_ROPE)
        printf(" (layout %s, base %g)", refenc_rope_layout_name(c->rope_layout), c->rope_base);
    if (c->positional == REFENC_POS_LEARNED)
        printf(" (max_len %zu)", c->max_len);
    printf("; final norm: %s\n", c->final_norm ? "yes" : "no");
    printf("input: batch %zu, seq_len %zu, %s", k->B, k->L,
           c->vocab_size ? "tokens" : inputs != NULL ? "x" : "x ~ N(0, 1)");
    if (c->vocab_size)
        printf(" (vocab_size %zu, padding_idx %lld)", c->vocab_size, (long long)c->padding_idx);
    if (inputs != NULL) {
        printf(" from %s%s%s", inputs, k->key_padding_mask ? ", key padding mask" : "",
               k->attn_mask ? ", additive mask" : "");
    } else if (in->padding != NULL) {
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

/* The documented random stream: the parameters in table order (drawn and
 * discarded when they come from a file), then the input position by position
 * (unless it comes from a file): a token uniform in [0, V) other than padding_idx (padded
 * positions get padding_idx), or D values N(0, 1). */
static void seeded_fill(refenc_case *c, const run_input *spec, uint64_t seed, int params, int input,
                        gsl_rng *rng)
{
    const refenc_config *cfg = &c->cfg;
    const size_t B = c->B, L = c->L, D = cfg->d_model;
    gsl_rng_set(rng, (unsigned long)seed);
    if (params)
        refenc_params_init_random(&c->params, cfg, rng);
    else /* the same draws, discarded: the input is the one the seed gives without --weights */
        for (size_t t = 0; t < c->params.n_tensors; t++)
            for (size_t i = 0; i < c->params.tensors[t].size; i++)
                (void)gsl_ran_gaussian_ziggurat(rng, 1.0); /* sigma only scales: the same uniforms */
    if (!input)
        return;
    for (size_t b = 0; b < B; b++) {
        const size_t pad = spec->padding ? spec->padding[b] : 0;
        for (size_t l = 0; l < L; l++) {
            const int padded = l >= L - pad;
            if (c->key_padding_mask != NULL)
                c->key_padding_mask[b * L + l] = (uint8_t)padded;
            if (c->tokens != NULL) {
                int64_t t;
                if (cfg->padding_idx >= 0 && cfg->vocab_size > 1) { /* never the padding token */
                    t = (int64_t)gsl_rng_uniform_int(rng, (unsigned long)cfg->vocab_size - 1);
                    if (t >= cfg->padding_idx)
                        t++;
                } else {
                    t = (int64_t)gsl_rng_uniform_int(rng, (unsigned long)cfg->vocab_size);
                }
                c->tokens[b * L + l] = padded && cfg->padding_idx >= 0 ? cfg->padding_idx : t;
                if (c->token_types != NULL) /* padding gets type 0, as HF tokenizers give it */
                    c->token_types[b * L + l] =
                        padded ? 0 : (int64_t)gsl_rng_uniform_int(rng, (unsigned long)cfg->type_vocab_size);
            } else {
                for (size_t d = 0; d < D; d++)
                    c->x[(b * L + l) * D + d] = gsl_ran_gaussian_ziggurat(rng, 1.0);
            }
        }
    }
}

typedef struct {
    int print;
    results *keep;
} run_trace;

static void run_trace_fn(void *ctx, const char *name, const double *data, size_t ndim,
                         const size_t *shape)
{
    run_trace *t = ctx;
    if (t->print)
        print_stats(name, data, ndim, shape);
    if (t->keep != NULL)
        results_collect(t->keep, name, data, ndim, shape);
}

/* The command line of refenc run. */
typedef struct {
    const char *config_path, *case_path, *out_path, *weights_path, *inputs_path;
    uint64_t seed;
    int trace, help;
    run_case_spec cspec;
} run_args;

/* Reads the options into a (help: a->help set); returns REFENC_EXIT_OK or the exit code of a
 * refused command line, whose message it has printed. */
static int parse_run_args(run_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->seed = DEFAULT_SEED;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            a->help = 1;
            return REFENC_EXIT_OK;
        } else if (strcmp(o, "--trace") == 0) {
            a->trace = 1;
            continue;
        } else if (strcmp(o, "--grad") == 0) {
            a->cspec.grad = 1;
            continue;
        }
        const char **slot = strcmp(o, "--config") == 0    ? &a->config_path
                            : strcmp(o, "--case") == 0    ? &a->case_path
                            : strcmp(o, "--out") == 0     ? &a->out_path
                            : strcmp(o, "--weights") == 0 ? &a->weights_path
                            : strcmp(o, "--inputs") == 0  ? &a->inputs_path
                                                          : NULL;
        const int case_opt = strcmp(o, "--emulate") == 0 || strcmp(o, "--bug") == 0;
        if (slot == NULL && !case_opt && strcmp(o, "--seed") != 0)
            return cli_error("run", "unknown option '%s' (see 'refenc run --help')", o);
        if (++i >= argc)
            return cli_error("run", "%s needs a %s (see 'refenc run --help')", o,
                             slot == NULL ? "value" : "file name");
        if (slot != NULL)
            *slot = argv[i];
        else if (case_opt) {
            const int rc = case_option(&a->cspec, o, argv[i]);
            if (rc != REFENC_EXIT_OK)
                return rc;
        } else if (!cli_parse_u64(&a->seed, argv[i]) || a->seed > 0xffffffffu)
            return cli_error("run", "--seed: '%s' is not an integer in [0, 4294967295]", argv[i]);
    }
    return REFENC_EXIT_OK;
}

/* The model: the case's parameters and input, from the user's files or the seeded stream.
 * On failure c is freed and *report may hold the loader's report for cli_load_error. */
static int model_load(refenc_case *c, const refenc_config *cfg, const run_input *spec, const run_args *a,
                      char *summary, size_t summary_size, char **report, refenc_error *err)
{
    int st;
    if (a->inputs_path != NULL)
        st = model_case_from_inputs(c, cfg, spec, a->config_path, a->inputs_path, report, err);
    else
        st = refenc_case_alloc(c, REFENC_COMP_ENCODER, cfg, spec->batch, spec->seq_len,
                               cfg->vocab_size > 0, spec->padding != NULL, 0, err);
    if (st == REFENC_OK && a->weights_path != NULL)
        st = model_params_from_checkpoint(&c->params, cfg, a->weights_path, summary, summary_size, report, err);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (st == REFENC_OK && rng == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    if (st == REFENC_OK)
        seeded_fill(c, spec, a->seed, a->weights_path == NULL, a->inputs_path == NULL, rng);
    else
        refenc_case_free(c);
    gsl_rng_free(rng);
    return st;
}

/* The output's summary: its statistics, its first values and its fingerprint.  y: (B, L, D). */
static void print_output(const double *y, size_t B, size_t L, size_t D)
{
    const size_t shape[3] = {B, L, D};
    printf("\n%-28s %-16s %13s %13s %13s %13s\n", "", "shape", "mean", "std", "min", "max");
    print_stats("output", y, 3, shape);
    const size_t shown = D < 4 ? D : 4;
    printf("output[0, 0, 0:%zu] =", shown);
    for (size_t d = 0; d < shown; d++)
        printf(" %.17g", y[d]);
    printf("\n");
    printf("fingerprint (FNV-1a of the output's bytes): %016" PRIx64 "\n", fingerprint(y, B * L * D));
}

/* --out: every step kept, with the config and the weights' and inputs' sources in the metadata. */
static int write_results(const results *keep, const refenc_config *cfg, const run_args *a, refenc_error *err)
{
    json_t *cj = refenc_config_to_json(cfg);
    char *cs = cj ? json_dumps(cj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char source[64];
    snprintf(source, sizeof source, "seed %" PRIu64, a->seed);
    /* file names are bytes, JSON strings UTF-8: quoted \xNN (4 bytes per byte at most) */
    const char *wp = a->weights_path ? a->weights_path : source, *ip = a->inputs_path ? a->inputs_path : source;
    char *wq = malloc(4 * strlen(wp) + 1), *iq = malloc(4 * strlen(ip) + 1);
    if (wq != NULL && iq != NULL) {
        refenc_text_escape(wq, 4 * strlen(wp) + 1, wp);
        refenc_text_escape(iq, 4 * strlen(ip) + 1, ip);
    }
    json_t *meta = cs == NULL || wq == NULL || iq == NULL
                       ? NULL
                       : json_pack("{s:s, s:s, s:s, s:s}", "implementation",
                                   "refenc reference " REFENC_VERSION " (double)", "config", cs, "weights", wq,
                                   "inputs", iq);
    free(wq);
    free(iq);
    const int st = meta == NULL ? refenc_error_set(err, REFENC_ENOMEM, "out of memory")
                                : results_write(keep, a->out_path, meta, err);
    if (st == REFENC_OK)
        printf("%zu outputs written to %s\n", keep->n, a->out_path);
    json_decref(meta);
    json_decref(cj);
    free(cs);
    return st;
}

/* One forward pass of the loaded model, printed (and traced, and kept for --out, as asked). */
static int forward_and_report(const refenc_case *c, const refenc_config *cfg, const run_input *spec,
                              const run_args *a, const char *weights_summary, refenc_error *err)
{
    const size_t B = c->B, L = c->L, D = cfg->d_model;
    refenc_workspace ws;
    double *y = NULL;
    int st = refenc_workspace_alloc(&ws, cfg, B, L, err);
    if (st == REFENC_OK && (y = refenc_alloc_array(B * L * D, sizeof *y)) == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory for the output");
    results keep;
    memset(&keep, 0, sizeof keep);
    if (st == REFENC_OK) {
        describe(cfg, c, spec, a->config_path, a->seed, a->weights_path, a->inputs_path);
        if (weights_summary[0] != '\0')
            printf("%s\n", weights_summary);
        const refenc_input input = refenc_case_input(c);
        run_trace rt = {a->trace, a->out_path != NULL ? &keep : NULL};
        const refenc_trace tr = {run_trace_fn, &rt};
        if (a->trace)
            printf("\n%-28s %-16s %13s %13s %13s %13s\n", "step", "shape", "mean", "std", "min", "max");
        st = refenc_encoder_forward(y, &ws, &c->params, cfg, &input, &tr, err);
    }
    if (st == REFENC_OK) /* (B, R, D) with input.rows */
        print_output(y, B, c->rows != NULL ? c->R : L, D);
    if (st == REFENC_OK && a->out_path != NULL)
        st = write_results(&keep, cfg, a, err);
    results_free(&keep);
    free(y);
    refenc_workspace_free(&ws);
    return st;
}

/* refenc run --case: the options that go together, then the run. */
static int cmd_run_case(const run_args *a)
{
    if (a->out_path == NULL)
        return cli_error("run", "--case and --out go together (see 'refenc run --help')");
    if (a->config_path != NULL || a->trace || a->weights_path != NULL || a->inputs_path != NULL)
        return cli_error("run", "--case does not combine with --config, --weights, --inputs or --trace");
    const refenc_emulation *ge = &a->cspec.emulation;
    const int backward_bug = a->cspec.has_bug && refenc_variant_is_backward(a->cspec.bug);
    if (a->cspec.grad && ((a->cspec.has_bug && !backward_bug) ||
                         (a->cspec.emulate && (a->cspec.has_bug || ge->fused || ge->reverse_sums ||
                                              ge->float_functions))))
        return cli_error("run", "--grad: the double backward (with --bug, one of the named backward bugs: "
                         "refenc certify --list-grad-bugs), or with --emulate the emulated backward (pure or "
                         "not); it does not combine with a forward bug, nor --emulate with --bug, fused, "
                         "reverse or float-libm (the emulated backward does not model them: docs/gradients.md)");
    if (backward_bug && !a->cspec.grad)
        return cli_error("run", "--bug %s is a backward bug: it goes with --grad", refenc_variant_get(a->cspec.bug)->name);
    return run_case(a->case_path, a->out_path, &a->cspec);
}

int cmd_run(int argc, char **argv)
{
    run_args a;
    const int rc = parse_run_args(&a, argc, argv);
    if (rc != REFENC_EXIT_OK || a.help) {
        if (a.help)
            fputs(run_usage, stdout);
        return rc;
    }
    if (a.case_path != NULL)
        return cmd_run_case(&a);
    if (a.cspec.emulate || a.cspec.has_bug)
        return cli_error("run", "--emulate and --bug go with --case (see 'refenc run --help')");
    if (a.cspec.grad)
        return cli_error("run", "--grad goes with --case: the gradients of a golden case made with "
                         "'refenc golden --grad' (see 'refenc run --help')");
    if (a.config_path == NULL)
        return cli_error("run", a.out_path != NULL ? "--out needs --config or --case (see 'refenc run --help')"
                                                   : "--config FILE.json is required (see 'refenc run --help')");

    refenc_config cfg;
    run_input spec;
    refenc_error err;
    refenc_error_clear(&err);
    /* --out must not replace one of the run's inputs (io/same_file.h) */
    const char *const inputs[] = {a.config_path, a.weights_path, a.inputs_path};
    static const char *const what[] = {"--config", "--weights", "--inputs"};
    for (size_t i = 0; i < 3 && a.out_path != NULL; i++)
        if (inputs[i] != NULL && refenc_refuse_same_file(a.out_path, inputs[i], what[i], &err) != REFENC_OK)
            return cli_error("run", "%s", err.message);
    if (run_config_load(&cfg, &spec, a.config_path, &err) != REFENC_OK) {
        free(spec.padding);
        free(spec.rows);
        return cli_error("run", "%s", err.message);
    }
    refenc_case c;
    char *report = NULL, weights_summary[1024] = "";
    int st = model_load(&c, &cfg, &spec, &a, weights_summary, sizeof weights_summary, &report, &err);
    if (st != REFENC_OK) {
        free(spec.padding);
        free(spec.rows);
        return cli_load_error("run", report, &err);
    }
    c.rows = spec.rows, c.R = spec.n_rows; /* the case owns them now (input.rows) */
    spec.rows = NULL;
    st = forward_and_report(&c, &cfg, &spec, &a, weights_summary, &err);
    free(spec.padding);
    refenc_case_free(&c);
    return st == REFENC_OK ? REFENC_EXIT_OK : cli_error("run", "%s", err.message);
}
