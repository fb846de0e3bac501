/* Golden files wrong in one way, through `refenc run --case CASE --out OUT`
 * (the reference as a peer) and `refenc certify`: exit 2, one message naming
 * the file and the tensor or metadata field (and the byte offset of a
 * tensor's data), and no results file written.  Sizes that would need
 * terabytes are refused before anything is allocated: those runs are made
 * under an address-space limit of 1 GiB, and still give the limit's message,
 * not "out of memory".
 *
 * The files are fixture cases (checks/robustness/golden_catalogue.json)
 * rewritten with one change. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "robust.h"

#define ONE_GIB ((uint64_t)1 << 30)

typedef struct {
    char dir[RB_PATH_MAX];
    char golden[RB_PATH_MAX + 32]; /* the edited case file          */
    char out[RB_PATH_MAX + 32];    /* where run --case would write  */
} setup;

static void make_setup(setup *s)
{
    rb_tmpdir(s->dir);
    snprintf(s->golden, sizeof s->golden, "%s/case.safetensors", s->dir);
    snprintf(s->out, sizeof s->out, "%s/results.safetensors", s->dir);
}

/* The data offset of a tensor in the written golden file. */
static size_t data_at(const setup *s, const char *name)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, s->golden, &err), REFENC_OK, "%s", err.message);
    const refenc_st_tensor *t = refenc_st_find(&f, name);
    cr_assert_not_null(t);
    const size_t off = t->file_offset;
    refenc_st_free(&f);
    return off;
}

/* Changes the dtype of the entry `name` from U8 to BOOL in the header of the
 * file (the data offsets are relative to the data, so only the header length
 * changes). */
static void bool_header(const char *path, const char *name)
{
    size_t size;
    unsigned char *b = rb_read_file(path, &size);
    const size_t N = (size_t)rb_header_length(b, size);
    char *h = malloc(N + 3);
    cr_assert_not_null(h);
    memcpy(h, b + 8, N);
    h[N] = '\0';
    char key[160];
    snprintf(key, sizeof key, "\"%s\":", name);
    char *k = strstr(h, key), *d = k ? strstr(k, "\"dtype\":\"U8\"") : NULL;
    cr_assert_not_null(d, "no U8 entry %s", name);
    memmove(d + 14, d + 12, strlen(d + 12) + 1);
    memcpy(d, "\"dtype\":\"BOOL\"", 14);
    rb_write_safetensors(path, h, b + 8 + N, size - 8 - N);
    free(h);
    free(b);
}

/* run --case on the edited golden: exit 2, "refenc run: FILE: <message>",
 * no output. */
static void expect_run_error(const setup *s, const char *what, const char *message, uint64_t limit)
{
    const char *args[] = {"refenc", "run", "--case", s->golden, "--out", s->out, NULL};
    const rb_run_options opt = {.address_space = RB_UNDER_ASAN ? 0 : limit};
    rb_result r = rb_run_with(args, &opt);
    char full[4096];
    snprintf(full, sizeof full, "refenc run: %s: %s\n", s->golden, message);
    cr_expect_eq(r.status, 2, "%s: exit %d; stderr %s", what, r.status, r.err);
    cr_expect_str_eq(r.err, full, "%s", what);
    cr_expect_str_empty(r.out, "%s: stdout %s", what, r.out);
    cr_expect(!rb_exists(s->out), "%s: a results file was written", what);
    cr_expect(!rb_has_temporary_file(s->dir), "%s: a temporary file is left", what);
    rb_result_free(&r);
}

static void run_error(const setup *s, const rb_golden *g, const char *what, const char *message)
{
    rb_golden_write(g, s->golden);
    expect_run_error(s, what, message, 0);
}

/* ---- metadata ---------------------------------------------------------------- */

Test(bad_golden, metadata_missing_or_wrong)
{
    setup s;
    make_setup(&s);
    rb_golden g;
    const char *keys[] = {"case", "component", "config"};
    for (size_t i = 0; i < 3; i++) {
        rb_golden_load(&g, "layernorm_small_variance");
        rb_golden_set_meta(&g, keys[i], NULL);
        run_error(&s, &g, keys[i], "__metadata__ needs case, component and config");
        rb_golden_free(&g);
    }
    rb_golden_load(&g, "layernorm_small_variance");
    rb_golden_set_meta(&g, "component", "transformer");
    run_error(&s, &g, "component", "__metadata__.component: unknown component 'transformer'");
    rb_golden_set_meta(&g, "component", "layernorm");
    rb_golden_set_meta(&g, "config", "{\"d_model\": 24,}");
    run_error(&s, &g, "config not JSON", "__metadata__.config: byte 16: string or '}' expected near '}'");
    rb_golden_free(&g);

    rb_golden_load(&g, "layernorm_small_variance");
    rb_golden_set_config(&g, "d_modle", "24");
    /* the list of every known key makes the message longer than
     * REFENC_ERRMSG_MAX - 1 bytes with the case's path in front: it keeps its
     * head (the key) and its tail around the cut (refenc_error_set) */
    rb_golden_write(&g, s.golden);
    const char *args[] = {"refenc", "run", "--case", s.golden, "--out", s.out, NULL};
    rb_result r = rb_run(args);
    char head[4096];
    snprintf(head, sizeof head, "refenc run: %s: __metadata__.config.d_modle: unknown key (known keys: "
             "d_model, n_heads, d_ff, ", s.golden);
    const char *tail = "local_attention, global_attn_every_n_layers, local_rope_theta, global_rope_theta, sliding_window_pattern, embedding_normalizer_dtype, qkv_bias, qk_norm, pooling, pooling_normalize, relative_attention_num_buckets, relative_attention_max_distance)\n";
    cr_expect_eq(r.status, 2, "an unknown config key: exit %d", r.status);
    cr_expect(strncmp(r.err, head, strlen(head)) == 0, "an unknown config key: %s", r.err);
    cr_expect(strlen(r.err) > strlen(tail) && strcmp(r.err + strlen(r.err) - strlen(tail), tail) == 0,
              "an unknown config key: %s", r.err);
    cr_expect(strstr(r.err, " bytes ...] ") != NULL, "an unknown config key, cut: %s", r.err);
    cr_expect(!rb_exists(s.out), "an unknown config key: a results file was written");
    rb_result_free(&r);
    rb_golden_free(&g);

    rb_golden_load(&g, "layernorm_small_variance");
    rb_golden_set_config(&g, "n_heads", "5");
    run_error(&s, &g, "an invalid config", "__metadata__.config: d_model = 24 is not divisible by n_heads = 5");
    rb_golden_free(&g);
    rb_tmpdir_remove(s.dir);
}

/* ---- sizes ------------------------------------------------------------------ */

Test(bad_golden, sizes_needing_terabytes_are_refused_before_allocating)
{
    setup s;
    make_setup(&s);
    rb_golden g;
    /* parameters: 1024 layers of width 2^20: 2^20 * 2^20 * 12 * 1024 doubles, 96 PiB */
    rb_golden_load(&g, "layernorm_small_variance");
    rb_golden_set_config(&g, "d_model", "1048576");
    rb_golden_set_config(&g, "d_ff", "1048576");
    rb_golden_set_config(&g, "n_layers", "1024");
    rb_golden_write(&g, s.golden);
    expect_run_error(&s, "parameters of 96 PiB",
                     "__metadata__.config: the parameters need more than the limit of 4294967296 bytes "
                     "(d_model, d_ff, n_layers, vocab_size and max_len are too large together)",
                     ONE_GIB);
    rb_golden_free(&g);

    /* activations: ALiBi biases for 12 heads over L = 100000 positions:
     * 12 L^2 doubles, 960 GB; the file itself is 800 kB of positions */
    rb_golden_load(&g, "alibi_12");
    const size_t L = 100000;
    int64_t *pos = rb_golden_reshape(&g, "in.positions", REFENC_ST_I64, 1, &L);
    for (size_t l = 0; l < L; l++)
        pos[l] = (int64_t)l;
    rb_golden_write(&g, s.golden);
    expect_run_error(&s, "activations of 960 GB",
                     "config: a forward pass on batch 1 x seq_len 100000 needs more than the limit of "
                     "4294967296 bytes",
                     ONE_GIB);
    rb_golden_free(&g);
    rb_tmpdir_remove(s.dir);
}

/* and the same through `refenc run --config` (the configs of checks/unit/bad_configs/) */
Test(bad_golden, run_configs_needing_terabytes_are_refused_before_allocating)
{
    const struct {
        const char *file, *fragment;
    } configs[] = {
        {"parameters_over_max_bytes.json", "model: the parameters need more than the limit of 4294967296 bytes"},
        {"activations_over_max_bytes.json",
         "a forward pass on batch 65536 x seq_len 1024 needs more than the limit of 4294967296 bytes"},
    };
    for (size_t i = 0; i < 2; i++) {
        char path[RB_PATH_MAX];
        snprintf(path, sizeof path, "checks/unit/bad_configs/%s", configs[i].file);
        const char *args[] = {"refenc", "run", "--config", path, NULL};
        const rb_run_options opt = {.address_space = RB_UNDER_ASAN ? 0 : ONE_GIB};
        rb_result r = rb_run_with(args, &opt);
        rb_expect_error(&r, 2, "run", configs[i].file, (const char *[]){path, configs[i].fragment, NULL});
        rb_result_free(&r);
    }
}

Test(bad_golden, zero_batch_or_sequence_length)
{
    setup s;
    make_setup(&s);
    rb_golden g;
    const struct {
        const char *case_name, *tensor;
        refenc_st_dtype dtype;
        size_t ndim, shape[3];
        const char *message;
    } zero[] = {
        {"act_gelu", "in.x", REFENC_ST_F32, 2, {4, 0}, "config: input seq_len (L) must be at least 1"},
        {"act_gelu", "in.x", REFENC_ST_F32, 2, {0, 16}, "config: input batch (B) must be at least 1"},
        {"layernorm_small_variance", "in.x", REFENC_ST_F32, 3, {2, 0, 24},
         "config: input seq_len (L) must be at least 1"},
        {"pe_large", "in.positions", REFENC_ST_I64, 1, {0}, "config: input seq_len (L) must be at least 1"},
        {"encoder_post_alibi6", "in.x", REFENC_ST_F32, 3, {2, 0, 24}, "config: input seq_len (L) must be at least 1"},
    };
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++) {
        rb_golden_load(&g, zero[i].case_name);
        rb_golden_reshape(&g, zero[i].tensor, zero[i].dtype, zero[i].ndim, zero[i].shape);
        run_error(&s, &g, zero[i].case_name, zero[i].message);
        rb_golden_free(&g);
    }
    /* tokens (B, 0): the mask must follow, or it is the mask's shape that is wrong */
    rb_golden_load(&g, "encoder_pre_rope");
    const size_t b0[2] = {2, 0};
    rb_golden_reshape(&g, "in.tokens", REFENC_ST_I64, 2, b0);
    rb_golden_reshape(&g, "in.key_padding_mask", REFENC_ST_BOOL, 2, b0);
    rb_golden_reshape(&g, "in.positions", REFENC_ST_I64, 1, b0 + 1);
    run_error(&s, &g, "tokens (2, 0)", "config: input seq_len (L) must be at least 1");
    rb_golden_free(&g);
    rb_tmpdir_remove(s.dir);
}

/* ---- tensors ---------------------------------------------------------------- */

Test(bad_golden, tensors_missing_extra_or_of_the_wrong_shape_or_dtype)
{
    setup s;
    make_setup(&s);
    rb_golden g;
    char msg[512];

    rb_golden_load(&g, "layernorm_small_variance");
    rb_golden_drop(&g, "bias");
    run_error(&s, &g, "a missing parameter", "parameter 'bias' is missing");
    rb_golden_free(&g);

    rb_golden_load(&g, "layernorm_small_variance");
    rb_golden_rename(&g, "bias", "norm1.bias");
    rb_golden_write(&g, s.golden);
    snprintf(msg, sizeof msg, "tensor 'norm1.bias' (data at byte %zu) is neither an input, an output nor a "
             "parameter of a layernorm case with this config", data_at(&s, "norm1.bias"));
    expect_run_error(&s, "a misnamed parameter", msg, 0);
    rb_golden_free(&g);

    rb_golden_load(&g, "layernorm_small_variance");
    const size_t d23[1] = {23};
    rb_golden_reshape(&g, "weight", REFENC_ST_F32, 1, d23);
    rb_golden_write(&g, s.golden);
    snprintf(msg, sizeof msg, "tensor 'weight' (data at byte %zu) should have shape (24)", data_at(&s, "weight"));
    expect_run_error(&s, "a parameter of the wrong shape", msg, 0);
    rb_golden_free(&g);

    rb_golden_load(&g, "layernorm_small_variance");
    const size_t x_shape[3] = {2, 5, 23};
    rb_golden_reshape(&g, "in.x", REFENC_ST_F32, 3, x_shape);
    rb_golden_write(&g, s.golden);
    snprintf(msg, sizeof msg, "tensor 'in.x' (data at byte %zu) should have shape (2, 5, 24)", data_at(&s, "in.x"));
    expect_run_error(&s, "in.x of the wrong width", msg, 0);
    rb_golden_free(&g);

    rb_golden_load(&g, "act_gelu");
    const size_t x3[3] = {4, 16, 1};
    rb_golden_reshape(&g, "in.x", REFENC_ST_F32, 3, x3);
    run_error(&s, &g, "in.x of 3 dimensions", "a activation case needs in.x of shape (B, L)");
    rb_golden_drop(&g, "in.x");
    run_error(&s, &g, "no in.x", "a activation case needs in.x of shape (B, L)");
    rb_golden_free(&g);

    rb_golden_load(&g, "act_gelu");
    const size_t x2[2] = {4, 16};
    rb_golden_reshape(&g, "in.x", REFENC_ST_I64, 2, x2);
    rb_golden_write(&g, s.golden);
    snprintf(msg, sizeof msg, "tensor 'in.x' (data at byte %zu): dtype I64 is not a floating type (F64, F32, "
             "F16, BF16)", data_at(&s, "in.x"));
    expect_run_error(&s, "in.x of integers", msg, 0);
    rb_golden_free(&g);

    rb_golden_load(&g, "pe_large");
    const size_t l16[1] = {16};
    rb_golden_reshape(&g, "in.positions", REFENC_ST_F64, 1, l16);
    rb_golden_write(&g, s.golden);
    snprintf(msg, sizeof msg, "tensor 'in.positions' (data at byte %zu): dtype F64 is not an integer type (I64, "
             "U8, BOOL)", data_at(&s, "in.positions"));
    expect_run_error(&s, "positions in F64", msg, 0);
    rb_golden_free(&g);

    /* a layer's stored input (in.layers.<i>.input, of shape (B, L, D)) belongs
     * to an encoder case, for its layers 0 .. n_layers - 1 only */
    rb_golden_load(&g, "encoder_pre_rope"); /* 2 layers */
    const refenc_st_entry *y = rb_golden_entry(&g, "out.output");
    const size_t bld[3] = {y->shape[0], y->shape[1], y->shape[2]};
    rb_golden_reshape(&g, "in.layers.1.input", REFENC_ST_F32, 3, bld);
    rb_golden_write(&g, s.golden);
    const char *ok_args[] = {"refenc", "run", "--case", s.golden, "--out", s.out, NULL};
    rb_result ok = rb_run(ok_args); /* the control: the last layer's input is read */
    cr_expect_eq(ok.status, 0, "in.layers.1.input: %s", ok.err);
    rb_result_free(&ok);
    remove(s.out);
    rb_golden_drop(&g, "in.layers.1.input");
    rb_golden_reshape(&g, "in.layers.2.input", REFENC_ST_F32, 3, bld);
    rb_golden_write(&g, s.golden);
    snprintf(msg, sizeof msg, "tensor 'in.layers.2.input' (data at byte %zu) is neither an input, an output nor a "
             "parameter of a encoder case with this config", data_at(&s, "in.layers.2.input"));
    expect_run_error(&s, "the input of a layer past the last", msg, 0);
    rb_golden_free(&g);
    rb_golden_load(&g, "act_gelu");
    const size_t x3d[3] = {4, 16, 1};
    rb_golden_reshape(&g, "in.layers.0.input", REFENC_ST_F32, 3, x3d);
    rb_golden_write(&g, s.golden);
    snprintf(msg, sizeof msg, "tensor 'in.layers.0.input' (data at byte %zu) is neither an input, an output nor a "
             "parameter of a activation case with this config", data_at(&s, "in.layers.0.input"));
    expect_run_error(&s, "a layer's input in an activation case", msg, 0);
    rb_golden_free(&g);

    rb_golden_load(&g, "encoder_pre_rope");
    const size_t bl[2] = {2, 7};
    rb_golden_reshape(&g, "in.key_padding_mask", REFENC_ST_F32, 2, bl);
    rb_golden_write(&g, s.golden);
    snprintf(msg, sizeof msg, "tensor 'in.key_padding_mask' (data at byte %zu) must be BOOL or U8",
             data_at(&s, "in.key_padding_mask"));
    expect_run_error(&s, "a mask of floats", msg, 0);
    rb_golden_free(&g);
    rb_tmpdir_remove(s.dir);
}

/* ---- input values ----------------------------------------------------------- */

Test(bad_golden, input_values_out_of_range)
{
    setup s;
    make_setup(&s);
    rb_golden g;
    char msg[512];

    rb_golden_load(&g, "encoder_pre_rope"); /* vocab_size 50, B 2, L 7 */
    int64_t *tok = rb_golden_data(&g, "in.tokens");
    tok[1 * 7 + 3] = 50;
    run_error(&s, &g, "a token = V", "input: in.tokens[1][3] = 50 is outside [0, vocab_size = 50)");
    tok[1 * 7 + 3] = -1;
    run_error(&s, &g, "a token = -1", "input: in.tokens[1][3] = -1 is outside [0, vocab_size = 50)");
    rb_golden_free(&g);

    rb_golden_load(&g, "encoder_pre_rope");
    unsigned char *mask = rb_golden_data(&g, "in.key_padding_mask");
    mask[1] = 2;
    rb_golden_entry(&g, "in.key_padding_mask")->dtype = REFENC_ST_U8;
    run_error(&s, &g, "a U8 mask of 2", "input: in.key_padding_mask[0][1] = 2 is not 0 or 1");
    /* a BOOL byte of 2: the writer refuses it, so the U8 file's header is edited */
    bool_header(s.golden, "in.key_padding_mask");
    snprintf(msg, sizeof msg, "tensor 'in.key_padding_mask': BOOL element 1 is 2, not 0 or 1 (at byte %zu)",
             data_at(&s, "in.key_padding_mask") + 1);
    expect_run_error(&s, "a BOOL mask byte of 2", msg, 0);
    rb_golden_free(&g);

    rb_golden_load(&g, "encoder_causal_learned"); /* learned PE, max_len 9, L 6 */
    int64_t *pos = rb_golden_data(&g, "in.positions");
    pos[3] = 9;
    run_error(&s, &g, "a position past the learned table",
              "input: in.positions[3] = 9 is outside [0, 9) (the rows of the learned PE table, max_len)");
    pos[3] = -4;
    run_error(&s, &g, "a negative position",
              "input: in.positions[3] = -4 is outside [0, 9) (the rows of the learned PE table, max_len)");
    rb_golden_free(&g);

    rb_golden_load(&g, "encoder_causal_learned");
    float *am = rb_golden_data(&g, "in.attn_mask");
    am[2 * 6 + 4] = NAN;
    run_error(&s, &g, "a NaN in the additive mask",
              "input: in.attn_mask[2][4] = nan: only finite values and -inf are allowed");
    am[2 * 6 + 4] = INFINITY;
    run_error(&s, &g, "+inf in the additive mask",
              "input: in.attn_mask[2][4] = inf: only finite values and -inf are allowed");
    rb_golden_free(&g);
    rb_tmpdir_remove(s.dir);
}

/* A case without the input that defines its shape, for the components whose
 * in.x is (B, L, D) or (B, H, L, Dh): the message names the shape expected. */
Test(bad_golden, defining_input_missing_for_each_shape)
{
    setup s;
    make_setup(&s);
    rb_golden g;
    rb_golden_load(&g, "layernorm_small_variance");
    rb_golden_drop(&g, "in.x");
    run_error(&s, &g, "a layernorm case without in.x", "a layernorm case needs in.x of shape (B, L, D)");
    rb_golden_free(&g);
    rb_golden_load(&g, "rope_interleaved");
    rb_golden_drop(&g, "in.x");
    run_error(&s, &g, "a rope case without in.x", "a rope case needs in.x of shape (B, H, L, Dh)");
    rb_golden_free(&g);
    rb_golden_load(&g, "roberta_types"); /* an encoder with a vocabulary: tokens (B, L), not x */
    const size_t t3[3] = {2, 3, 1};
    rb_golden_reshape(&g, "in.tokens", REFENC_ST_I64, 3, t3);
    run_error(&s, &g, "in.tokens of 3 dimensions", "a encoder case needs in.tokens of shape (B, L)");
    rb_golden_drop(&g, "in.tokens");
    run_error(&s, &g, "an encoder case without in.tokens", "a encoder case needs in.tokens of shape (B, L)");
    rb_golden_free(&g);
    rb_tmpdir_remove(s.dir);
}

/* The families' inputs: token types required with a table, in range; no
 * in.positions under RoBERTa's rule, which derives them from the tokens. */
Test(bad_golden, family_inputs_missing_or_out_of_range)
{
    setup s;
    make_setup(&s);
    rb_golden g;

    rb_golden_load(&g, "roberta_types"); /* T 2, B 2, L 6 */
    rb_golden_drop(&g, "in.token_type_ids");
    run_error(&s, &g, "no token types", "input 'in.token_type_ids' is missing (type_vocab_size = 2)");
    rb_golden_free(&g);

    rb_golden_load(&g, "roberta_types");
    int64_t *types = rb_golden_data(&g, "in.token_type_ids");
    types[1 * 6 + 3] = 2;
    run_error(&s, &g, "a token type = T",
              "input: in.token_type_ids[1][3] = 2 is outside [0, type_vocab_size = 2)");
    rb_golden_free(&g);

    rb_golden_load(&g, "roberta_types");
    const size_t l6[1] = {6};
    int64_t *pos = rb_golden_reshape(&g, "in.positions", REFENC_ST_I64, 1, l6);
    for (int64_t l = 0; l < 6; l++)
        pos[l] = l;
    run_error(&s, &g, "positions under RoBERTa's rule",
              "input: in.positions is given but position_ids 'roberta' derives the positions from in.tokens");
    rb_golden_free(&g);
    rb_tmpdir_remove(s.dir);
}

/* ---- what certify reads of a golden file ------------------------------------------ */

/* Runs refenc certify with args: with a message, exit 2 and exactly that
 * message about gcase; without, exit 1 (the case fails) and a diagnosis line.
 * Never a PASS. */
static void expect_certify_outcome(const char *const *args, const char *gcase, const char *message,
                                   const char *what)
{
    rb_result r = rb_run(args);
    char full[4096];
    if (message != NULL) {
        snprintf(full, sizeof full, "refenc certify: %s: %s\n", gcase, message);
        cr_expect_eq(r.status, 2, "%s: exit %d: %s", what, r.status, r.err);
        cr_expect_str_eq(r.err, full, "%s", what);
    } else { /* no error: the case fails, with or without a diagnosis */
        cr_expect_eq(r.status, 1, "%s: exit %d: %s", what, r.status, r.err);
        cr_expect_str_empty(r.err, "%s", what);
        cr_expect(strstr(r.out, "    diagnosis: ") != NULL, "%s: %s", what, r.out);
    }
    cr_expect(strstr(r.out, "PASS") == NULL, "%s: [%s] [%s]", what, r.out, r.err);
    rb_result_free(&r);
}

static void certify_error(const rb_golden *g, const char *case_name, const char *what, const char *message)
{
    char dir[RB_PATH_MAX], gcase[RB_PATH_MAX], results[RB_PATH_MAX + 16], rfile[RB_PATH_MAX + 64];
    rb_tmpdir(dir);
    rb_golden_dir(dir, case_name, gcase);
    snprintf(results, sizeof results, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    snprintf(rfile, sizeof rfile, "%s/%s.safetensors", results, case_name);
    rb_reference_results(case_name, rfile);
    rb_golden_write(g, gcase);
    rb_golden_relist(dir, case_name); /* malformed, but as released: what certify makes of it */
    const char *args[] = {"refenc", "certify", "--golden", dir, "--results", results, "--case", case_name, NULL};
    expect_certify_outcome(args, gcase, message, what);
    rb_tmpdir_remove(dir);
}

Test(bad_golden, certify_refuses_a_golden_without_its_outputs)
{
    rb_golden g;
    rb_golden_load(&g, "act_gelu");
    rb_golden_set_meta(&g, "format", "something-else");
    certify_error(&g, "act_gelu", "format", "not a refenc golden case (its __metadata__ needs format = "
                  "\"refenc-golden\", case and outputs)");
    rb_golden_set_meta(&g, "format", "refenc-golden");
    rb_golden_set_meta(&g, "outputs", "[]");
    certify_error(&g, "act_gelu", "outputs []", "__metadata__.outputs is not a non-empty JSON array");
    rb_golden_set_meta(&g, "outputs", "{\"name\": \"out.output\"}");
    certify_error(&g, "act_gelu", "outputs an object", "__metadata__.outputs is not a non-empty JSON array");
    rb_golden_set_meta(&g, "outputs", "[{\"name\": \"out.nothing\", \"required\": true}]");
    certify_error(&g, "act_gelu", "an output not in the file",
                  "__metadata__.outputs[0] does not name an F64 tensor of the case");
    rb_golden_set_meta(&g, "outputs", "[{\"name\": \"in.x\", \"required\": true}]");
    certify_error(&g, "act_gelu", "an output in F32", "__metadata__.outputs[0] does not name an F64 tensor of the case");
    rb_golden_set_meta(&g, "outputs", "[{\"name\": \"out.output\"}]");
    certify_error(&g, "act_gelu", "no required flag", "__metadata__.outputs[0] does not name an F64 tensor of the case");
    rb_golden_free(&g);

    rb_golden_load(&g, "softmax_masked"); /* (4, 9), with a don't-care mask */
    const size_t wrong[2] = {4, 8};
    rb_golden_reshape(&g, "dontcare.out.output", REFENC_ST_BOOL, 2, wrong);
    certify_error(&g, "softmax_masked", "a don't-care mask of another shape",
                  "'dontcare.out.output' does not have the shape of 'out.output'");
    rb_golden_free(&g);
}

/* ---- the bug variants a golden case stores for the diagnosis ------------------------- */

/* certify of the reference's results for layernorm_small_variance, made to
 * fail (out.output shifted by 1e-3), against the golden g: the diagnosis
 * reads the golden's variants, which are wrong in one way. */
static void diagnosis_error(const rb_golden *g, const char *what, const char *message)
{
    char dir[RB_PATH_MAX], gcase[RB_PATH_MAX], results[RB_PATH_MAX + 16], rfile[RB_PATH_MAX + 64];
    rb_tmpdir(dir);
    rb_golden_dir(dir, "layernorm_small_variance", gcase);
    snprintf(results, sizeof results, "%s/results", dir);
    cr_assert_eq(mkdir(results, 0700), 0);
    snprintf(rfile, sizeof rfile, "%s/layernorm_small_variance.safetensors", results);
    rb_reference_results("layernorm_small_variance", rfile);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, rfile, &err), REFENC_OK);
    const refenc_st_tensor *t = refenc_st_find(&f, "out.output");
    cr_assert(t != NULL && t->numel == 240);
    double y[240];
    cr_assert_eq(refenc_st_to_f64(y, &f, t, &err), REFENC_OK);
    refenc_st_free(&f);
    for (size_t i = 0; i < 240; i++)
        y[i] += 1e-3;
    refenc_st_entry e = {"out.output", REFENC_ST_F64, 3, {2, 5, 24}, y};
    cr_assert_eq(refenc_st_write(rfile, &e, 1, NULL, &err), REFENC_OK, "%s", err.message);
    rb_golden_write(g, gcase);
    rb_golden_relist(dir, "layernorm_small_variance");

    const char *args[] = {"refenc", "certify", "--golden", dir, "--results", results, "--case",
                          "layernorm_small_variance", NULL};
    expect_certify_outcome(args, gcase, message, what);
    rb_tmpdir_remove(dir);
}

Test(bad_golden, certify_refuses_malformed_bug_variants)
{
    rb_golden g;
    /* the control: with the variants as generated, a failure (exit 1) */
    rb_golden_load(&g, "layernorm_small_variance");
    diagnosis_error(&g, "the variants as generated", NULL);

#define VARIANTS_MALFORMED(i) "case 'layernorm_small_variance': __metadata__.variants[" #i "] is malformed: " \
    "expected {\"name\": <a known variant>, \"outputs\": [<outputs of the case>]}"
    rb_golden_set_meta(&g, "variants", "[{\"outputs\": [\"out.output\"]}]");
    diagnosis_error(&g, "a variant without a name", VARIANTS_MALFORMED(0));
    rb_golden_set_meta(&g, "variants", "[{\"name\": \"no_such_bug\", \"outputs\": [\"out.output\"]}]");
    diagnosis_error(&g, "an unknown variant", VARIANTS_MALFORMED(0));
    rb_golden_set_meta(&g, "variants", "[{\"name\": \"layernorm_eps_x10\", \"outputs\": \"out.output\"}]");
    diagnosis_error(&g, "outputs not a list", VARIANTS_MALFORMED(0));
    rb_golden_set_meta(&g, "variants", "[{\"name\": \"layernorm_eps_x10\", \"outputs\": [\"out.outptu\"]}]");
    diagnosis_error(&g, "an output the case does not have", VARIANTS_MALFORMED(0));
    rb_golden_set_meta(&g, "variants", "{\"name\": \"layernorm_eps_x10\"}");
    diagnosis_error(&g, "variants not a list", "case 'layernorm_small_variance': __metadata__.variants is not a "
                    "JSON array");
    rb_golden_set_meta(&g, "variants", "not json");
    diagnosis_error(&g, "variants not JSON", "case 'layernorm_small_variance': __metadata__.variants is not a "
                    "JSON array");
#undef VARIANTS_MALFORMED
    rb_golden_free(&g);

    rb_golden_load(&g, "layernorm_small_variance");
    rb_golden_drop(&g, "alt.layernorm_eps_x10.out.output");
    diagnosis_error(&g, "a variant without its outputs",
                    "variant 'layernorm_eps_x10' of output 'out.output' is malformed");
    rb_golden_free(&g);

    rb_golden_load(&g, "layernorm_small_variance");
    const size_t short_shape[3] = {2, 5, 23};
    rb_golden_reshape(&g, "alt.unbiased_variance.out.output", REFENC_ST_F64, 3, short_shape);
    diagnosis_error(&g, "a variant output of another shape",
                    "variant 'unbiased_variance' of output 'out.output' is malformed");
    rb_golden_free(&g);

    /* a variant's don't-care mask of another shape, next to the output's own
     * mask of the right one: the variant's mask is named */
    rb_golden_load(&g, "layernorm_small_variance");
    const size_t right[3] = {2, 5, 24}, wrong[3] = {2, 5, 23};
    rb_golden_reshape(&g, "dontcare.out.output", REFENC_ST_BOOL, 3, right);
    rb_golden_reshape(&g, "alt.layernorm_eps_x10.dontcare.out.output", REFENC_ST_BOOL, 3, wrong);
    diagnosis_error(&g, "a variant's don't-care mask of another shape",
                    "'alt.layernorm_eps_x10.dontcare.out.output' does not have the shape of 'out.output'");
    rb_golden_free(&g);

    /* a variant's don't-care mask in doubles */
    rb_golden_load(&g, "layernorm_small_variance");
    const size_t shape[3] = {2, 5, 24};
    rb_golden_reshape(&g, "alt.layernorm_eps_x10.dontcare.out.output", REFENC_ST_F64, 3, shape);
    char dir[RB_PATH_MAX], path[RB_PATH_MAX + 32], msg[512];
    rb_tmpdir(dir);
    snprintf(path, sizeof path, "%s/g.safetensors", dir);
    rb_golden_write(&g, path);
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK);
    snprintf(msg, sizeof msg, "tensor 'alt.layernorm_eps_x10.dontcare.out.output' (data at byte %zu): dtype F64 "
             "is not an integer type (I64, U8, BOOL)",
             refenc_st_find(&f, "alt.layernorm_eps_x10.dontcare.out.output")->file_offset);
    refenc_st_free(&f);
    rb_tmpdir_remove(dir);
    diagnosis_error(&g, "a variant's don't-care mask of doubles", msg);
    rb_golden_free(&g);
}
