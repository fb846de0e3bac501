/* The refenc program (ref/cli/): `refenc run` refuses every invalid config
 * with exit code 2, one message line on stderr naming the field and nothing
 * on stdout; bad usage exits 2; help exits 0; the bundled examples run; the
 * same seed gives the same output.
 *
 * The program is found through REFENC_CLI (make check sets it); the source
 * tree (for checks/unit/bad_configs/ and docs/examples/) through
 * REFENC_SRCDIR, else the current directory (make check runs from the top
 * of the tree).  The invalid configs are files in checks/unit/bad_configs/,
 * shared with scripts/valgrind-invalid-configs.sh; the table below gives,
 * for each, the fragment its message must contain. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "unit.h"

static const struct {
    const char *file;     /* in checks/unit/bad_configs/ */
    const char *fragment; /* the message names the field (and the offset for parse errors) */
} bad_configs[] = {
    /* combinations and values (refenc_config_validate) */
    {"d_model_not_divisible_by_n_heads.json", "model: d_model = 10 is not divisible by n_heads = 4"},
    {"rope_odd_head_width.json", "model: positional 'rope' needs an even head width"},
    {"sinusoidal_odd_d_model.json", "model: positional 'sinusoidal' needs an even d_model"},
    {"layer_norm_eps_negative.json", "model: layer_norm_eps must be finite and >= 0"},
    {"temperature_zero.json", "model: temperature must be finite and > 0"},
    {"temperature_negative.json", "model: temperature must be finite and > 0"},
    {"rope_base_one.json", "model: rope_base must be finite and > 1"},
    {"d_model_zero.json", "model: d_model must be at least 1"},
    {"n_heads_zero.json", "model: n_heads must be at least 1"},
    {"d_ff_zero.json", "model: d_ff must be at least 1"},
    {"n_layers_zero.json", "model: n_layers must be at least 1"},
    {"max_len_zero.json", "model: max_len must be at least 1"},
    {"d_model_over_limit.json", "model: d_model = 1048577 exceeds the limit"},
    {"n_heads_over_limit.json", "model: n_heads = 1025 exceeds the limit"},
    {"d_ff_over_limit.json", "model: d_ff = 1048577 exceeds the limit"},
    {"n_layers_over_limit.json", "model: n_layers = 1025 exceeds the limit"},
    {"max_len_over_limit.json", "model: max_len = 1048577 exceeds the limit"},
    {"vocab_size_over_limit.json", "model: vocab_size = 16777217 exceeds the limit"},
    {"padding_idx_out_of_range.json", "model: padding_idx = 100 must be -1 or in [0, vocab_size = 100)"},
    {"padding_idx_without_vocabulary.json", "model: padding_idx = 0 must be -1 or in [0, vocab_size = 0)"},
    {"padding_idx_below_minus_one.json", "model: padding_idx = -2"},
    {"parameters_over_max_bytes.json", "model: the parameters need more than the limit"},
    /* the input's shape against the model (refenc_config_validate_shape) */
    {"seq_len_over_max_len_learned.json", "seq_len = 17 exceeds max_len = 16"},
    {"activations_over_max_bytes.json", "a forward pass on batch 65536 x seq_len 1024 needs more than the limit"},
    /* unknown keys, wrong JSON types, unknown names */
    {"unknown_top_level_key.json", "inputs: unknown top-level key"},
    {"unknown_model_key.json", "model.d_modle: unknown key"},
    {"unknown_input_key.json", "input.seqlen: unknown key"},
    {"d_model_string.json", "model.d_model: expected an integer"},
    {"d_model_real.json", "model.d_model: expected an integer"},
    {"d_model_negative.json", "model.d_model: expected an integer >= 0"},
    {"layer_norm_eps_string.json", "model.layer_norm_eps: expected a number"},
    {"causal_integer.json", "model.causal: expected true or false"},
    {"final_norm_string.json", "model.final_norm: expected true or false"},
    {"norm_integer.json", "model.norm: expected a string"},
    {"padding_idx_real.json", "model.padding_idx: expected an integer"},
    {"norm_unknown_name.json", "model.norm: unknown name 'middle'"},
    {"activation_unknown_name.json", "model.activation: unknown name 'swish'"},
    {"norm_type_unknown_name.json", "model.norm_type: unknown name 'rms' (expected one of 'layernorm', 'rmsnorm')"},
    {"rmsnorm_offset_integer.json", "model.rmsnorm_offset: expected true or false"},
    {"ffn_type_unknown_name.json", "model.ffn_type: unknown name 'swiglu' (expected one of 'mlp', 'glu')"},
    {"glu_gate_unknown_name.json", "model.glu_gate: unknown name 'last' (expected one of 'first', 'second')"},
    {"glu_gate_without_glu.json", "model.glu_gate: needs ffn_type 'glu' (the MLP has no gate)"},
    {"linear_bias_integer.json", "model.linear_bias: expected true or false"},
    {"norm_bias_with_rmsnorm.json", "model.norm_bias: RMSNorm has no bias (norm_type 'rmsnorm')"},
    {"rmsnorm_offset_without_rmsnorm.json",
     "model: rmsnorm_offset (the (1 + w) scale) needs norm_type 'rmsnorm', but norm_type is 'layernorm'"},
    {"positional_unknown_name.json", "model.positional: unknown name 'rotary'"},
    {"rope_layout_unknown_name.json", "model.rope_layout: unknown name 'neox'"},
    /* the families' keys */
    {"family_unknown_name.json", "model.family: unknown name 'xlnet'"},
    {"mask_value_unknown_name.json", "model.mask_value: unknown name 'minus_inf'"},
    {"embedding_norm_string.json", "model.embedding_norm: expected true or false"},
    {"type_vocab_size_without_tokens.json", "model: type_vocab_size = 2 needs token inputs"},
    {"roberta_positions_past_the_table.json",
     "seq_len = 7 with position_ids 'roberta' reaches position padding_idx + seq_len = 8"},
    /* rope_scaling and partial_rotary_factor (docs/rope-scaling.md) */
    {"rope_scaling_type_unknown.json", "model.rope_scaling.rope_type: unknown name 'xpos'"},
    {"rope_scaling_type_missing.json", "model.rope_scaling.rope_type: missing"},
    {"rope_scaling_type_disagrees.json", "model.rope_scaling.type: 'dynamic' disagrees with rope_type 'linear'"},
    {"rope_scaling_factor_below_one.json", "model: rope_scaling.factor must be finite and >= 1, got 0.5"},
    {"rope_scaling_factor_string.json", "model.rope_scaling.factor: expected a number"},
    {"rope_scaling_unknown_key.json", "model.rope_scaling.low_freq: unknown key"},
    {"rope_scaling_not_an_object.json", "model.rope_scaling: expected an object or null"},
    {"rope_scaling_dynamic_without_max_positions.json",
     "model: rope_scaling.max_position_embeddings: 'dynamic' needs it >= 1"},
    {"rope_scaling_yarn_beta_slow_above_fast.json", "model: rope_scaling.beta_slow must be finite, > 0 and <= beta_fast"},
    {"rope_scaling_yarn_truncate_integer.json", "model.rope_scaling.truncate: expected true or false"},
    {"rope_scaling_llama3_without_original.json",
     "model: rope_scaling.original_max_position_embeddings: 'llama3' needs it >= 1"},
    {"rope_scaling_llama3_high_not_above_low.json", "model: rope_scaling.high_freq_factor must be finite and > low_freq_factor"},
    {"rope_scaling_longrope_wrong_count.json", "model: rope_scaling.short_factor: 'longrope' needs rotary_dim / 2 = 4 factors, got 3"},
    {"rope_scaling_longrope_factor_negative.json", "model: rope_scaling.long_factor[2] must be finite and > 0, got -2"},
    {"rope_scaling_ntk_mixed_b_negative.json", "model: rope_scaling.mixed_b must be finite and > 0, got -0.5"},
    {"rope_scaling_mixed_b_without_ntk.json", "model: rope_scaling.mixed_b: only the type 'ntk' reads it, the type is 'linear'"},
    {"rope_scaling_ntk_mixed_b_string.json", "model.rope_scaling.mixed_b: expected a number"},
    {"rope_scaling_attention_factor_negative.json", "model: rope_scaling.attention_factor must be finite and > 0"},
    {"rope_scaling_without_rope.json", "model: rope_scaling and partial_rotary_factor need positional 'rope'"},
    {"partial_rotary_factor_odd_rotary_dim.json", "model: partial_rotary_factor 0.20000000000000001 gives rotary_dim floor(16"},
    {"partial_rotary_factor_above_one.json", "model: partial_rotary_factor must be in (0, 1], got 1.5"},
    /* grouped-query attention and the head width (docs/families.md) */
    {"n_kv_heads_zero.json", "model.n_kv_heads: expected an integer >= 1, got 0"},
    {"n_kv_heads_negative.json", "model.n_kv_heads: expected an integer >= 1, got -2"},
    {"n_kv_heads_not_dividing.json", "model: n_kv_heads = 3 does not divide n_heads = 4"},
    {"n_kv_heads_above_n_heads.json", "model: n_kv_heads = 8 exceeds n_heads = 4"},
    {"n_kv_heads_real.json", "model.n_kv_heads: expected an integer"},
    {"n_kv_heads_string.json", "model.n_kv_heads: expected an integer"},
    {"head_dim_zero.json", "model.head_dim: expected an integer >= 1, got 0"},
    {"head_dim_negative.json", "model.head_dim: expected an integer >= 1, got -16"},
    {"head_dim_real.json", "model.head_dim: expected an integer"},
    {"head_dim_over_limit.json", "model: head_dim = 1048577 exceeds the limit 1048576"},
    {"head_dim_over_max_bytes.json", "model: the parameters need more than the limit of 4294967296 bytes"},
    {"rope_odd_head_dim.json", "model: positional 'rope' needs an even head width, but head_dim = 9"},
    /* Gemma 2/3's attention keys (docs/families.md): a number > 0, or null */
    {"attn_logit_softcapping_zero.json", "model.attn_logit_softcapping: expected a number > 0 or null, got 0"},
    {"attn_logit_softcapping_negative.json", "model.attn_logit_softcapping: expected a number > 0 or null, got -50"},
    {"attn_logit_softcapping_string.json", "model.attn_logit_softcapping: expected a number > 0 or null"},
    {"attn_logit_softcapping_nan.json", "line 1, column 40 (byte 40): invalid token near 'NaN'"},
    {"attn_logit_softcapping_overflow.json", "line 1, column 42 (byte 42): real number overflow near '1e999'"},
    {"query_pre_attn_scalar_zero.json", "model.query_pre_attn_scalar: expected a number > 0 or null, got 0"},
    {"query_pre_attn_scalar_negative.json", "model.query_pre_attn_scalar: expected a number > 0 or null, got -256"},
    {"query_pre_attn_scalar_string.json", "model.query_pre_attn_scalar: expected a number > 0 or null"},
    {"query_pre_attn_scalar_overflow.json", "line 1, column 41 (byte 41): real number overflow near '1e400'"},
    /* the attention windows (docs/families.md): an integer >= 1, or null */
    {"sliding_window_zero.json", "model.sliding_window: expected an integer >= 1 or null"},
    {"sliding_window_negative.json", "model.sliding_window: expected an integer >= 1 or null"},
    {"sliding_window_real.json", "model.sliding_window: expected an integer >= 1 or null"},
    {"sliding_window_too_large.json", "model.sliding_window: 2097152 exceeds 1048576"},
    {"sliding_window_not_causal.json", "model: sliding_window = 4 needs causal: true"},
    {"qkv_bias_with_linear_bias.json", "model: qkv_bias (Qwen2's biased q, k, v on bias-free linears) needs linear_bias false"},
    {"qkv_bias_string.json", "model.qkv_bias: expected true or false"},
    {"qk_norm_unknown_name.json", "model.qk_norm: unknown name 'rmsnorm' (expected one of 'none', 'rms')"},
    {"local_attention_zero.json", "model.local_attention: expected an integer >= 1 or null"},
    {"local_attention_negative.json", "model.local_attention: expected an integer >= 1 or null"},
    {"local_attention_string.json", "model.local_attention: expected an integer >= 1 or null"},
    /* the layer pattern (docs/families.md) */
    {"global_attn_every_n_layers_zero.json", "model.global_attn_every_n_layers: expected an integer >= 1 or null"},
    {"global_attn_every_n_layers_string.json", "model.global_attn_every_n_layers: expected an integer >= 1 or null"},
    {"local_rope_theta_zero.json", "model.local_rope_theta: expected a number > 0 or null, got 0"},
    {"global_rope_theta_without_pattern.json", "model: global_rope_theta needs global_attn_every_n_layers"},
    {"embedding_normalizer_dtype_unknown.json", "model.embedding_normalizer_dtype: unknown name 'bf16'"},
    {"embedding_normalizer_dtype_unscaled.json", "model: embedding_normalizer_dtype 'bfloat16' needs scale_embedding"},
    {"sliding_window_pattern_zero.json", "model.sliding_window_pattern: expected an integer >= 1 or null"},
    {"both_layer_patterns.json", "model: global_attn_every_n_layers (ModernBERT: layer 0 global) and "
                                 "sliding_window_pattern (Gemma 3: layer p - 1 global) are two rules"},
    /* the pooled embedding (docs/families.md, "Pooling") */
    {"pooling_unknown_name.json", "model.pooling: unknown name 'max' (expected one of 'none', 'mean', 'cls', 'last_token')"},
    {"pooling_not_a_string.json", "model.pooling: expected a string ('mean', 'cls' or 'last_token') or null"},
    {"pooling_normalize_string.json", "model.pooling_normalize: expected true or false"},
    {"pooling_normalize_without_pooling.json", "model.pooling_normalize: needs pooling"},
    {"pooling_all_padding.json", "input.padding[1] = 4 pads every token, but model.pooling 'mean' needs a token"},
    /* T5's relative position bias (docs/families.md, "T5's relative position bias") */
    {"relative_attention_num_buckets_odd.json", "model: relative_attention_num_buckets = 31 must be even and at least 4"},
    {"relative_attention_num_buckets_two.json", "model: relative_attention_num_buckets = 2 must be even and at least 4"},
    {"relative_attention_num_buckets_string.json", "model.relative_attention_num_buckets: expected an integer >= 1 or null"},
    {"relative_attention_num_buckets_negative.json", "model.relative_attention_num_buckets: expected an integer >= 1 or null"},
    {"relative_attention_max_distance_not_past_max_exact.json",
     "model: relative_attention_max_distance = 8 must exceed max_exact = relative_attention_num_buckets / 4 = 8"},
    {"relative_attention_max_distance_zero.json", "model.relative_attention_max_distance: expected an integer >= 1 or null"},
    {"relative_attention_max_distance_without_buckets.json",
     "model.relative_attention_max_distance: needs relative_attention_num_buckets"},
    {"relative_attention_max_distance_power_overflow.json",
     "model: relative_attention_max_distance = 1048576 to the power nb/2 - nb/4 = 16 reaches 2^64"},
    {"relative_attention_with_alibi.json", "model: relative_attention_num_buckets: T5's relative bias is the model's "
                                           "position signal; positional must be 'none', not 'alibi'"},
    {"relative_attention_causal.json", "model: relative_attention_num_buckets: the bidirectional buckets of T5's "
                                       "encoder need causal: false"},
    /* malformed JSON: line, column and byte offset */
    {"duplicate_model_key.json", "line 1, column 49 (byte 49): duplicate object key near '\"d_model\"'"},
    {"duplicate_top_level_key.json", "line 1, column 21 (byte 21): duplicate object key near '\"model\"'"},
    {"malformed_trailing_comma.json", "line 4, column 3 (byte 37)"},
    {"malformed_unterminated.json", "line 3, column 0 (byte 29)"},
    {"empty_file.json", "line 1, column 0 (byte 0)"},
    {"number_overflow.json", "line 1, column 34 (byte 34): real number overflow"},
    /* structure */
    {"top_level_array.json", "the top level must be a JSON object"},
    {"model_missing.json", "the key \"model\" is required"},
    {"model_not_an_object.json", "model: expected a JSON object"},
    {"input_not_an_object.json", "input: expected a JSON object"},
    /* the input description */
    {"batch_zero.json", "input.batch: 0 is outside [1, 65536]"},
    {"seq_len_zero.json", "input.seq_len: 0 is outside [1, 1048576]"},
    {"batch_over_limit.json", "input.batch: 65537 is outside [1, 65536]"},
    {"seq_len_over_limit.json", "input.seq_len: 1048577 is outside [1, 1048576]"},
    {"batch_string.json", "input.batch: expected an integer"},
    {"padding_wrong_length.json", "input.padding: expected an array of 2 integers"},
    {"padding_not_an_array.json", "input.padding: expected an array of 1 integers"},
    {"padding_over_seq_len.json", "input.padding[1]: expected an integer in [0, seq_len = 4]"},
    {"padding_negative.json", "input.padding[0]: expected an integer in [0, seq_len = 8]"},
    {"padding_element_string.json", "input.padding[0]: expected an integer"},
    {"rows_out_of_range.json", "input.rows[1] = 8 is outside [0, seq_len = 8)"},
    {"rows_negative.json", "input.rows[0] = -1 is outside [0, seq_len = 8)"},
    {"rows_duplicate.json", "input.rows[2] = 3 repeats the row before it (3, element 1)"},
    {"rows_unsorted.json", "input.rows[1] = 2 is below the row before it (4, element 0)"},
    {"rows_empty.json", "input.rows: empty; expected at least one query row"},
    {"rows_real.json", "input.rows[1]: expected an integer in [0, seq_len = 8)"},
    {"rows_string.json", "input.rows: expected an array of query rows"},
    {"rows_with_pooling.json", "input.rows selects query rows, but model.pooling 'mean' reads every row"},
};
#define N_BAD_CONFIGS (sizeof bad_configs / sizeof bad_configs[0])

/* ---- running the program ------------------------------------------------------------ */

typedef struct {
    int status;     /* exit code, or 128 + signal */
    char *out, *err; /* everything written to stdout and stderr (NUL-terminated) */
} cli_result;

static const char *cli_path(void)
{
    const char *p = getenv("REFENC_CLI");
    cr_assert(p != NULL && *p != '\0',
              "REFENC_CLI is not set: it must name the refenc program (make check sets it)");
    cr_assert(access(p, X_OK) == 0, "REFENC_CLI=%s is not an executable", p);
    return p;
}

static const char *src_dir(void)
{
    const char *s = getenv("REFENC_SRCDIR");
    return s != NULL && *s != '\0' ? s : ".";
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* A private temporary directory (mkdtemp) for a test's files. */
#define TMPDIR_MAX 256
static void make_tmpdir(char dir[TMPDIR_MAX])
{
    const char *base = getenv("TMPDIR");
    const int n = snprintf(dir, TMPDIR_MAX, "%s/refenc-cli-XXXXXX", base != NULL && *base ? base : "/tmp");
    cr_assert(n > 0 && n < TMPDIR_MAX, "TMPDIR is too long for a temporary directory name");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp(%s): %s", dir, strerror(errno));
}

/* Runs the program with argv (argv[0] is replaced by the program's path),
 * stdin from /dev/null, stdout and stderr captured through files. */
static cli_result run_cli(const char *const *args)
{
    char dir[TMPDIR_MAX], out_path[TMPDIR_MAX + 16], err_path[TMPDIR_MAX + 16];
    const char *program = cli_path(); /* before mkdtemp: a failed check leaves no directory */
    make_tmpdir(dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    const char *argv[32];
    size_t n = 0;
    argv[n++] = program;
    for (size_t i = 1; args[i] != NULL && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    fflush(NULL);
    const pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        const int in = open("/dev/null", O_RDONLY);
        const int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int wstatus;
    cr_assert(waitpid(pid, &wstatus, 0) == pid, "waitpid: %s", strerror(errno));
    cli_result r;
    r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    cr_assert(r.status != 126 && r.status != 127, "could not run %s", argv[0]);
    r.out = read_all(out_path);
    r.err = read_all(err_path);
    unlink(out_path);
    unlink(err_path);
    rmdir(dir);
    return r;
}

static void cli_result_free(cli_result *r)
{
    free(r->out);
    free(r->err);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* exit 2, nothing on stdout, exactly one line on stderr starting "refenc run: " */
static void expect_one_error_line(const cli_result *r, const char *what)
{
    cr_expect_eq(r->status, 2, "%s: exit code %d, want 2; stderr: %s", what, r->status, r->err);
    cr_expect_str_empty(r->out, "%s: partial output on stdout: %s", what, r->out);
    const size_t len = strlen(r->err);
    cr_expect(len > 0 && r->err[len - 1] == '\n' && count_lines(r->err) == 1,
              "%s: stderr is not exactly one line: '%s'", what, r->err);
    cr_expect(strncmp(r->err, "refenc run: ", 12) == 0, "%s: stderr does not start with 'refenc run: ': %s",
              what, r->err);
}

/* ---- invalid configs -------------------------------------------------------------------- */

ParameterizedTestParameters(cli_run, invalid_config_exits_2_with_one_message_naming_the_field)
{
    static size_t idx[N_BAD_CONFIGS];
    for (size_t i = 0; i < N_BAD_CONFIGS; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_BAD_CONFIGS);
}

ParameterizedTest(size_t *i, cli_run, invalid_config_exits_2_with_one_message_naming_the_field)
{
    char path[512];
    snprintf(path, sizeof path, "%s/checks/unit/bad_configs/%s", src_dir(), bad_configs[*i].file);
    cr_assert(access(path, R_OK) == 0, "%s is missing (run from the source tree or set REFENC_SRCDIR)",
              path);
    const char *args[] = {"refenc", "run", "--config", path, NULL};
    cli_result r = run_cli(args);
    expect_one_error_line(&r, bad_configs[*i].file);
    cr_expect(strstr(r.err, path) != NULL, "%s: the message does not name the file: %s",
              bad_configs[*i].file, r.err);
    cr_expect(strstr(r.err, bad_configs[*i].fragment) != NULL, "%s: message '%s' lacks '%s'",
              bad_configs[*i].file, r.err, bad_configs[*i].fragment);
    cli_result_free(&r);
}

/* One list for the test and the valgrind script: every file in
 * bad_configs/ is in the table, and every table entry is a file. */
Test(cli_run, bad_config_files_and_the_table_agree)
{
    char dir_path[512];
    snprintf(dir_path, sizeof dir_path, "%s/checks/unit/bad_configs", src_dir());
    DIR *dir = opendir(dir_path);
    cr_assert_not_null(dir, "cannot open %s (run from the source tree or set REFENC_SRCDIR)", dir_path);
    size_t files = 0;
    int seen[N_BAD_CONFIGS] = {0};
    const struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        const size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        files++;
        size_t k = 0;
        while (k < N_BAD_CONFIGS && strcmp(bad_configs[k].file, e->d_name) != 0)
            k++;
        cr_expect(k < N_BAD_CONFIGS, "%s/%s has no entry in the table of test_cli_run.c", dir_path,
                  e->d_name);
        if (k < N_BAD_CONFIGS)
            seen[k] = 1;
    }
    closedir(dir);
    for (size_t k = 0; k < N_BAD_CONFIGS; k++)
        cr_expect(seen[k], "table entry %s has no file in %s", bad_configs[k].file, dir_path);
    cr_expect_eq(files, N_BAD_CONFIGS);
}

/* Configs that are awkward to keep in the tree, written to a fresh mkdtemp
 * directory: bytes that are not UTF-8, a NUL byte, a directory given as the
 * file, a file that does not exist. */
Test(cli_run, unreadable_or_binary_config_exits_2)
{
    char dir[TMPDIR_MAX], path[TMPDIR_MAX + 32];
    (void)cli_path();
    make_tmpdir(dir);
    static const struct {
        const char *name, *bytes;
        size_t n;
        const char *fragment;
    } files[] = {
        {"latin1.json", "{\"model\": {\"norm\": \"pr\xe9\"}}", 26, "line 1"},
        {"nul.json", "{\"model\": {}\0}", 14, "line 1"},
    };
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[k].name);
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(files[k].bytes, 1, files[k].n, f), files[k].n);
        fclose(f);
        const char *args[] = {"refenc", "run", "--config", path, NULL};
        cli_result r = run_cli(args);
        expect_one_error_line(&r, files[k].name);
        cr_expect(strstr(r.err, files[k].fragment) != NULL, "%s: message '%s' lacks '%s'",
                  files[k].name, r.err, files[k].fragment);
        cli_result_free(&r);
        unlink(path);
    }

    const char *args_dir[] = {"refenc", "run", "--config", dir, NULL};
    cli_result r = run_cli(args_dir);
    expect_one_error_line(&r, "a directory as the config");
    cr_expect(strstr(r.err, "is a directory") != NULL, "the message does not say it is a directory: %s",
              r.err);
    cli_result_free(&r);

    snprintf(path, sizeof path, "%s/does-not-exist.json", dir);
    const char *args_missing[] = {"refenc", "run", "--config", path, NULL};
    r = run_cli(args_missing);
    expect_one_error_line(&r, "a missing config file");
    cr_expect(strstr(r.err, "does-not-exist.json") != NULL && strstr(r.err, "No such file") != NULL,
              "the message does not say the file is missing: %s", r.err);
    cli_result_free(&r);
    rmdir(dir);
}

/* ---- usage ---------------------------------------------------------------------------- */

Test(cli_run, bad_usage_exits_2_with_one_message)
{
    char example[512];
    snprintf(example, sizeof example, "%s/docs/examples/pre_ln_rope.json", src_dir());
    const struct {
        const char *what, *args[8], *fragment;
    } cases[] = {
        {"run without --config", {"refenc", "run", NULL}, "--config FILE.json is required"},
        {"--config without a value", {"refenc", "run", "--config", NULL}, "--config needs a file name"},
        {"unknown option", {"refenc", "run", "--config", example, "--frobnicate", NULL},
         "unknown option '--frobnicate'"},
        {"--seed abc", {"refenc", "run", "--config", example, "--seed", "abc", NULL}, "--seed: 'abc'"},
        {"--seed -1", {"refenc", "run", "--config", example, "--seed", "-1", NULL}, "--seed: '-1'"},
        {"--seed 2^32", {"refenc", "run", "--config", example, "--seed", "4294967296", NULL},
         "--seed: '4294967296'"},
        {"--seed 12x", {"refenc", "run", "--config", example, "--seed", "12x", NULL}, "--seed: '12x'"},
        {"--seed without a value", {"refenc", "run", "--config", example, "--seed", NULL},
         "--seed needs a value"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cli_result r = run_cli(cases[k].args);
        expect_one_error_line(&r, cases[k].what);
        cr_expect(strstr(r.err, cases[k].fragment) != NULL, "%s: message '%s' lacks '%s'", cases[k].what,
                  r.err, cases[k].fragment);
        cli_result_free(&r);
    }

    /* no command, an unknown command: exit 2, the usage on stderr, nothing on stdout */
    const char *none[] = {"refenc", NULL}, *unknown[] = {"refenc", "nosuchcommand", NULL};
    cli_result r = run_cli(none);
    cr_expect_eq(r.status, 2, "refenc without a command: exit %d", r.status);
    cr_expect_str_empty(r.out);
    cr_expect(strstr(r.err, "usage: refenc") != NULL, "no usage on stderr: %s", r.err);
    cli_result_free(&r);
    r = run_cli(unknown);
    cr_expect_eq(r.status, 2, "refenc nosuchcommand: exit %d", r.status);
    cr_expect_str_empty(r.out);
    cr_expect(strstr(r.err, "unknown command 'nosuchcommand'") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
}

Test(cli_run, help_exits_0_on_stdout)
{
    const struct {
        const char *args[4], *fragment;
    } cases[] = {
        {{"refenc", "--help", NULL}, "usage: refenc <command>"},
        {{"refenc", "-h", NULL}, "usage: refenc <command>"},
        {{"refenc", "run", "--help", NULL}, "usage: refenc run --config FILE.json"},
        {{"refenc", "run", "-h", NULL}, "usage: refenc run --config FILE.json"},
        {{"refenc", "--version", NULL}, "refenc 0."},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cli_result r = run_cli(cases[k].args);
        cr_expect_eq(r.status, 0, "%s %s: exit %d", cases[k].args[1], cases[k].args[2] ? cases[k].args[2] : "",
                     r.status);
        cr_expect(strstr(r.out, cases[k].fragment) != NULL, "stdout lacks '%s': %s", cases[k].fragment, r.out);
        cr_expect_str_empty(r.err, "stderr: %s", r.err);
        cli_result_free(&r);
    }
}

/* ---- valid runs ----------------------------------------------------------------------- */

/* the line "fingerprint (FNV-1a of the output's bytes): XXXXXXXXXXXXXXXX" */
static void fingerprint(char fp[17], const char *out)
{
    const char *p = strstr(out, "fingerprint (FNV-1a of the output's bytes): ");
    cr_assert_not_null(p, "no fingerprint line in: %s", out);
    p = strchr(p, ':') + 2;
    memcpy(fp, p, 16);
    fp[16] = '\0';
    for (int i = 0; i < 16; i++)
        cr_assert(strchr("0123456789abcdef", fp[i]) != NULL, "fingerprint '%s' is not 16 hex digits", fp);
}

Test(cli_run, bundled_examples_run_with_exit_0)
{
    char dir_path[512];
    snprintf(dir_path, sizeof dir_path, "%s/docs/examples", src_dir());
    DIR *dir = opendir(dir_path);
    cr_assert_not_null(dir, "cannot open %s", dir_path);
    size_t ran = 0;
    const struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        const size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char path[768];
        snprintf(path, sizeof path, "%s/%s", dir_path, e->d_name);
        const char *args[] = {"refenc", "run", "--config", path, NULL};
        cli_result r = run_cli(args);
        cr_expect_eq(r.status, 0, "%s: exit %d; stderr: %s", e->d_name, r.status, r.err);
        cr_expect_str_empty(r.err, "%s: stderr: %s", e->d_name, r.err);
        char fp[17];
        fingerprint(fp, r.out);
        /* the summary line "output (B, L, D) mean std min max" is finite */
        const char *line = strstr(r.out, "\noutput ");
        cr_expect_not_null(line, "%s: no output summary line: %s", e->d_name, r.out);
        if (line != NULL) {
            const char *end = strchr(line + 1, '\n');
            const size_t n = end ? (size_t)(end - line) : strlen(line);
            char buf[256];
            snprintf(buf, sizeof buf, "%.*s", (int)(n < 255 ? n : 255), line + 1);
            cr_expect(strstr(buf, "nan") == NULL && strstr(buf, "inf") == NULL,
                      "%s: non-finite output summary: %s", e->d_name, buf);
        }
        cli_result_free(&r);
        ran++;
    }
    closedir(dir);
    cr_expect_geq(ran, 2, "only %zu examples in %s (docs/cli.md promises a Pre-LN RoPE and a Post-LN "
                          "sinusoidal one)", ran, dir_path);
}

Test(cli_run, same_seed_gives_identical_output_and_another_seed_another_fingerprint)
{
    char path[512];
    snprintf(path, sizeof path, "%s/docs/examples/post_ln_sinusoidal.json", src_dir());
    const char *a1[] = {"refenc", "run", "--config", path, "--seed", "7", NULL};
    const char *a2[] = {"refenc", "run", "--seed", "8", "--config", path, NULL};
    const char *dflt[] = {"refenc", "run", "--config", path, NULL};
    const char *dflt_explicit[] = {"refenc", "run", "--config", path, "--seed", "20240521", NULL};
    cli_result r1 = run_cli(a1), r1b = run_cli(a1), r2 = run_cli(a2);
    cli_result rd = run_cli(dflt), rde = run_cli(dflt_explicit);
    cr_assert_eq(r1.status, 0, "%s", r1.err);
    cr_assert_eq(r2.status, 0, "%s", r2.err);
    cr_expect_str_eq(r1.out, r1b.out, "seed 7 twice gave different output");
    char f1[17], f2[17], fd[17], fde[17];
    fingerprint(f1, r1.out);
    fingerprint(f2, r2.out);
    fingerprint(fd, rd.out);
    fingerprint(fde, rde.out);
    cr_expect_str_neq(f1, f2, "seeds 7 and 8 gave the same fingerprint %s", f1);
    cr_expect_str_eq(fd, fde, "the default seed is not 20240521");
    cli_result_free(&r1), cli_result_free(&r1b), cli_result_free(&r2);
    cli_result_free(&rd), cli_result_free(&rde);
}

/* --trace prints every step in forward order and does not change the result. */
Test(cli_run, trace_prints_every_step_in_forward_order)
{
    char path[512];
    snprintf(path, sizeof path, "%s/docs/examples/pre_ln_rope.json", src_dir());
    const char *plain[] = {"refenc", "run", "--config", path, NULL};
    const char *traced[] = {"refenc", "run", "--config", path, "--trace", NULL};
    cli_result rp = run_cli(plain), rt = run_cli(traced);
    cr_assert_eq(rt.status, 0, "%s", rt.err);
    static const char *const steps[] = {
        "embed",
        "layers.0.norm1", "layers.0.self_attn.weights", "layers.0.self_attn", "layers.0.norm2",
        "layers.0.ffn", "layers.0.output",
        "layers.1.norm1", "layers.1.self_attn.weights", "layers.1.self_attn", "layers.1.norm2",
        "layers.1.ffn", "layers.1.output",
        "norm", "output"};
    /* each step starts a line, "name shape ...", in this order */
    const char *at = rt.out;
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        char needle[80];
        snprintf(needle, sizeof needle, "\n%s ", steps[k]);
        const char *p = strstr(at, needle);
        cr_expect_not_null(p, "step %s missing or out of order in:\n%s", steps[k], rt.out);
        if (p != NULL)
            at = p + 1;
    }
    cr_expect(strstr(rt.out, "(2, 4, 10, 10)") != NULL, "no (B, H, L, L) shape for the weights");
    char fp[17], ft[17];
    fingerprint(fp, rp.out);
    fingerprint(ft, rt.out);
    cr_expect_str_eq(fp, ft, "--trace changed the output");
    cli_result_free(&rp), cli_result_free(&rt);
}
