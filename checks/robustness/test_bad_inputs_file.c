/* A user's inputs file (--inputs) that does not fit the config: each fault
 * alone, through `refenc golden` (which must write nothing) and `refenc run`,
 * is one line naming the file and the tensor, exit 2.
 *
 * The files are written here tensor by tensor, so the expected message
 * follows from what was written, not from the reader under test.  The
 * negative control is the same file with the fault put right. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../ref/io/safetensors.h"
#include "robust.h"

/* B = 2 items of L = 3 positions; the model has a vocabulary of 10 tokens. */
#define TOKEN_CONFIG "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1, " \
                     "\"vocab_size\": 10, \"positional\": \"sinusoidal\"}}"
/* The same with a token-type table of 2 (segment ids 0 and 1). */
#define TYPED_CONFIG "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1, " \
                     "\"vocab_size\": 10, \"type_vocab_size\": 2, \"positional\": \"sinusoidal\"}}"
/* The same without a vocabulary: the input is x (B, L, D = 8). */
#define X_CONFIG "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1}}"

static const int64_t tokens[6] = {3, 1, 4, 1, 5, 9};
static const int64_t positions[3] = {0, 1, 2}, positions4[4] = {0, 1, 2, 3};
static const uint8_t mask[6] = {0, 0, 0, 0, 0, 1}, mask_bad[6] = {0, 0, 2, 0, 0, 0};
static const int64_t mask_i64[6] = {0}, attn_i64[9] = {0};
static const float mask_f32[6] = {0}, attn[9] = {0, -1.5f, 2.25f, 0.5f, 0, 1, -2, 0.75f, 0};
static const float x[48] = {0.25f, -1.5f, 3, 0.125f};
static const float tokens_f32[6] = {3, 1, 4, 1, 5, 9};
static const int64_t tokens_out[6] = {3, 1, 4, 1, 5, 10};
static const int64_t types[6] = {0, 0, 1, 0, 1, 1}, types_out[6] = {0, 0, 1, 0, 2, 1};
static const float types_f32[6] = {0, 0, 1, 0, 1, 1};

#define TOK(dt, d) {"in.tokens", dt, 2, {2, 3}, d}
#define MASK(dt, d) {"in.key_padding_mask", dt, 2, {2, 3}, d}

typedef struct {
    const char *what;
    int x_model; /* 1: the config without a vocabulary; 2: the one with token types */
    refenc_st_entry e[4];
    size_t n;
    const char *fragment[3];
} bad_inputs;

static const bad_inputs bad[] = {
    {"no in.tokens, in.x instead", 0, {{"in.x", REFENC_ST_F32, 3, {2, 3, 8}, x}}, 1,
     {"missing 'in.tokens' (B, L) (the config has vocab_size 10)",
      "extra 'in.x': the config has vocab_size 10, so the input is in.tokens", NULL}},
    {"in.tokens of three dimensions", 0, {{"in.tokens", REFENC_ST_I64, 3, {2, 3, 1}, tokens}}, 1,
     {"'in.tokens' has shape (2, 3, 1), expected (B, L)", NULL}},
    {"in.tokens in F32", 0, {TOK(REFENC_ST_F32, tokens_f32)}, 1, {"'in.tokens' has dtype F32, expected I64", NULL}},
    {"a key padding mask in I64", 0, {TOK(REFENC_ST_I64, tokens), MASK(REFENC_ST_I64, mask_i64)}, 2,
     {"'in.key_padding_mask' has dtype I64, expected BOOL or U8", NULL}},
    {"a key padding mask in F32", 0, {TOK(REFENC_ST_I64, tokens), MASK(REFENC_ST_F32, mask_f32)}, 2,
     {"'in.key_padding_mask' has dtype F32, expected BOOL or U8", NULL}},
    {"positions of another length", 0,
     {TOK(REFENC_ST_I64, tokens), {"in.positions", REFENC_ST_I64, 1, {4}, positions4}}, 2,
     {"'in.positions' has shape (4), expected (3)", NULL}},
    {"an attention mask of integers", 0,
     {TOK(REFENC_ST_I64, tokens), {"in.attn_mask", REFENC_ST_I64, 2, {3, 3}, attn_i64}}, 2,
     {"'in.attn_mask' has", "expected", NULL}},
    {"a tensor that is no input", 0, {TOK(REFENC_ST_I64, tokens), {"in.colour", REFENC_ST_I64, 1, {3}, positions}}, 2,
     {"extra 'in.colour' (inputs are in.tokens or in.x", NULL}},
    {"a token outside the vocabulary", 0, {TOK(REFENC_ST_I64, tokens_out)}, 1, {"inputs.safetensors: ", "10", NULL}},
    {"a key padding mask of 2", 0, {TOK(REFENC_ST_I64, tokens), MASK(REFENC_ST_U8, mask_bad)}, 2,
     {"inputs.safetensors: ", "key_padding_mask", NULL}},
    {"token types for a model without a token-type table", 0,
     {TOK(REFENC_ST_I64, tokens), {"in.token_type_ids", REFENC_ST_I64, 2, {2, 3}, types}}, 2,
     {"extra 'in.token_type_ids': the config has type_vocab_size 0", NULL}},
    {"token types for a model without vocabulary", 1,
     {{"in.x", REFENC_ST_F32, 3, {2, 3, 8}, x}, {"in.token_type_ids", REFENC_ST_I64, 2, {2, 3}, types}}, 2,
     {"extra 'in.token_type_ids': the config has vocab_size 0 (the input is in.x)", NULL}},
    {"token types of another shape", 2,
     {TOK(REFENC_ST_I64, tokens), {"in.token_type_ids", REFENC_ST_I64, 2, {3, 2}, types}}, 2,
     {"'in.token_type_ids' has shape (3, 2), expected (2, 3)", NULL}},
    {"token types in F32", 2,
     {TOK(REFENC_ST_I64, tokens), {"in.token_type_ids", REFENC_ST_F32, 2, {2, 3}, types_f32}}, 2,
     {"'in.token_type_ids' has dtype F32, expected I64", NULL}},
    {"a token type outside the table", 2,
     {TOK(REFENC_ST_I64, tokens), {"in.token_type_ids", REFENC_ST_I64, 2, {2, 3}, types_out}}, 2,
     {"inputs.safetensors: ", "in.token_type_ids[1][1] = 2 is outside [0, type_vocab_size = 2)", NULL}},
    {"no in.x for a model without vocabulary", 1, {TOK(REFENC_ST_I64, tokens)}, 1,
     {"missing 'in.x' (B, L, 8) (the config has vocab_size 0: the input is x)", NULL}},
    {"in.x of another width", 1, {{"in.x", REFENC_ST_F32, 3, {2, 3, 5}, x}}, 1,
     {"'in.x' has shape (2, 3, 5), expected (B, L, 8)", NULL}},
};

Test(bad_inputs_file, each_fault_is_named_and_nothing_is_written)
{
    char dir[RB_PATH_MAX], tcfg[RB_PATH_MAX + 32], xcfg[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32];
    char out[RB_PATH_MAX + 32], ycfg[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(ycfg, sizeof ycfg, "%s/typed.json", dir);
    rb_write_file(ycfg, TYPED_CONFIG, strlen(TYPED_CONFIG));
    snprintf(tcfg, sizeof tcfg, "%s/tokens.json", dir);
    snprintf(xcfg, sizeof xcfg, "%s/x.json", dir);
    snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
    snprintf(out, sizeof out, "%s/case.safetensors", dir);
    rb_write_file(tcfg, TOKEN_CONFIG, strlen(TOKEN_CONFIG));
    rb_write_file(xcfg, X_CONFIG, strlen(X_CONFIG));
    refenc_error err;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(refenc_st_write(in, bad[i].e, bad[i].n, NULL, &err), REFENC_OK, "%s", err.message);
        const char *cfg = bad[i].x_model == 1 ? xcfg : bad[i].x_model == 2 ? ycfg : tcfg;
        for (int k = 0; k < 2; k++) {
            const char *golden[] = {"refenc", "golden", "--config", cfg, "--inputs", in, "--out-file", out,
                                    "--quiet", NULL};
            const char *run[] = {"refenc", "run", "--config", cfg, "--inputs", in, NULL};
            rb_result r = rb_run(k == 0 ? golden : run);
            rb_expect_error(&r, 2, k == 0 ? "golden" : "run", bad[i].what, bad[i].fragment);
            cr_expect(strstr(r.err, "inputs.safetensors") != NULL, "%s: the file is not named: %s", bad[i].what,
                      r.err);
            rb_result_free(&r);
        }
        cr_expect(!rb_exists(out), "%s: %s was written", bad[i].what, out);
    }
    /* the config's own input section must agree with the file, and leave the padding to it */
    const refenc_st_entry tok[] = {TOK(REFENC_ST_I64, tokens)};
    cr_assert_eq(refenc_st_write(in, tok, 1, NULL, &err), REFENC_OK, "%s", err.message);
    char padded[RB_PATH_MAX + 32];
    snprintf(padded, sizeof padded, "%s/padded.json", dir);
    const char *ptext = "{\"model\": {\"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, \"n_layers\": 1, "
                        "\"vocab_size\": 10}, \"input\": {\"batch\": 2, \"seq_len\": 3, \"padding\": [0, 1]}}";
    rb_write_file(padded, ptext, strlen(ptext));
    rb_result pr = rb_run((const char *[]){"refenc", "golden", "--config", padded, "--inputs", in, "--out-file", out,
                                           NULL});
    rb_expect_error(&pr, 2, "golden", "padding in the config and an inputs file",
                    (const char *[]){"padded.json: input.padding: the padding comes from",
                                     "in.key_padding_mask); remove it from the config", NULL});
    rb_result_free(&pr);
    cr_expect(!rb_exists(out));
    /* negative control: every input, each right, makes the case */
    const refenc_st_entry good[] = {TOK(REFENC_ST_I64, tokens), MASK(REFENC_ST_BOOL, mask),
                                    {"in.positions", REFENC_ST_I64, 1, {3}, positions},
                                    {"in.attn_mask", REFENC_ST_F32, 2, {3, 3}, attn}};
    cr_assert_eq(refenc_st_write(in, good, 4, NULL, &err), REFENC_OK, "%s", err.message);
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", tcfg, "--inputs", in, "--out-file", out,
                                          "--quiet", NULL});
    cr_expect_eq(r.status, 0, "the good inputs were refused: %s", r.err);
    rb_result_free(&r);
    cr_expect(rb_exists(out));
    const refenc_st_entry good_x[] = {{"in.x", REFENC_ST_F32, 3, {2, 3, 8}, x}};
    cr_assert_eq(refenc_st_write(in, good_x, 1, NULL, &err), REFENC_OK, "%s", err.message);
    r = rb_run((const char *[]){"refenc", "run", "--config", xcfg, "--inputs", in, NULL});
    cr_expect_eq(r.status, 0, "the good x was refused: %s", r.err);
    rb_result_free(&r);
    const refenc_st_entry good_types[] = {TOK(REFENC_ST_I64, tokens),
                                          {"in.token_type_ids", REFENC_ST_I64, 2, {2, 3}, types}};
    cr_assert_eq(refenc_st_write(in, good_types, 2, NULL, &err), REFENC_OK, "%s", err.message);
    r = rb_run((const char *[]){"refenc", "run", "--config", ycfg, "--inputs", in, NULL});
    cr_expect_eq(r.status, 0, "the good token types were refused by run: %s", r.err);
    rb_result_free(&r);
    rb_tmpdir_remove(dir);
}

/* A file that is not safetensors at all, as --inputs and as --weights. */
Test(bad_inputs_file, a_file_that_is_not_safetensors_is_named)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], junk[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/tokens.json", dir);
    snprintf(junk, sizeof junk, "%s/junk.safetensors", dir);
    snprintf(out, sizeof out, "%s/case.safetensors", dir);
    rb_write_file(cfg, TOKEN_CONFIG, strlen(TOKEN_CONFIG));
    rb_write_file(junk, "not a tensor file", 17);
    for (int k = 0; k < 2; k++) {
        rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, k ? "--weights" : "--inputs", junk,
                                              "--out-file", out, NULL});
        rb_expect_error(&r, 2, "golden", k ? "junk weights" : "junk inputs",
                        (const char *[]){"junk.safetensors", "header length", NULL});
        rb_result_free(&r);
    }
    cr_expect(!rb_exists(out));
    rb_tmpdir_remove(dir);
}

/* An inputs file that cannot be read, or holds token ids in an integer dtype
 * refenc does not read (docs/golden-format.md: I32, I16, I8 are valid
 * safetensors but refused): through `refenc run` and `refenc golden`, one
 * message naming the file (and the tensor and its header offset where one is
 * at fault), exit 2, never a crash and never a wait for a FIFO's writer.
 * The headers are written here by hand; the expected offsets follow from them. */
Test(bad_inputs_file, an_unreadable_inputs_file_is_named_never_a_crash)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32], out[RB_PATH_MAX + 32];
    char missing[RB_PATH_MAX + 32], fifo[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/tokens.json", dir);
    snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
    snprintf(out, sizeof out, "%s/case.safetensors", dir);
    snprintf(missing, sizeof missing, "%s/missing.safetensors", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo.safetensors", dir);
    rb_write_file(cfg, TOKEN_CONFIG, strlen(TOKEN_CONFIG));
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    struct {
        const char *what, *path, *fragment[3];
    } unreadable[] = {
        {"a missing file", missing, {"missing.safetensors: cannot open: No such file or directory", NULL}},
        {"a directory", dir, {": is a directory, not a file", NULL}},
        {"a FIFO", fifo, {"fifo.safetensors: not a regular file", NULL}},
        {"garbage", in, {"inputs.safetensors: ", "header length", NULL}},
    };
    rb_write_file(in, "not a tensor file at all", 24);
    for (size_t i = 0; i < sizeof unreadable / sizeof unreadable[0]; i++)
        for (int k = 0; k < 2; k++) {
            const char *golden[] = {"refenc", "golden", "--config", cfg, "--inputs", unreadable[i].path,
                                    "--out-file", out, "--quiet", NULL};
            const char *run[] = {"refenc", "run", "--config", cfg, "--inputs", unreadable[i].path, NULL};
            rb_result r = rb_run(k == 0 ? golden : run);
            rb_expect_error(&r, 2, k == 0 ? "golden" : "run", unreadable[i].what, unreadable[i].fragment);
            rb_result_free(&r);
        }
    /* in.tokens (2, 3) as I32, I16, I8: the header entry of 'in.tokens' starts at byte 9 */
    static const char *const dtypes[] = {"I32", "I16", "I8"};
    static const size_t sizes[] = {4, 2, 1};
    static const unsigned char zeros[24] = {0};
    for (size_t i = 0; i < 3; i++) {
        char header[160], frag0[128];
        snprintf(header, sizeof header,
                 "{\"in.tokens\":{\"dtype\":\"%s\",\"shape\":[2,3],\"data_offsets\":[0,%zu]}}", dtypes[i],
                 6 * sizes[i]);
        rb_write_safetensors(in, header, zeros, 6 * sizes[i]);
        snprintf(frag0, sizeof frag0, "tensor 'in.tokens' (header entry at byte 9): unknown dtype '%s'", dtypes[i]);
        for (int k = 0; k < 2; k++) {
            const char *golden[] = {"refenc", "golden", "--config", cfg, "--inputs", in, "--out-file", out,
                                    "--quiet", NULL};
            const char *run[] = {"refenc", "run", "--config", cfg, "--inputs", in, NULL};
            rb_result r = rb_run(k == 0 ? golden : run);
            rb_expect_error(&r, 2, k == 0 ? "golden" : "run", dtypes[i],
                            (const char *[]){"inputs.safetensors: ", frag0, NULL});
            rb_result_free(&r);
        }
    }
    cr_expect(!rb_exists(out), "%s was written", out);
    /* negative control: the same tokens as I64 run */
    static const int64_t zeros64[6] = {0};
    rb_write_safetensors(in, "{\"in.tokens\":{\"dtype\":\"I64\",\"shape\":[2,3],\"data_offsets\":[0,48]}}", zeros64,
                         48);
    rb_result r = rb_run((const char *[]){"refenc", "run", "--config", cfg, "--inputs", in, NULL});
    cr_expect_eq(r.status, 0, "the I64 tokens were refused: %s", r.err);
    rb_result_free(&r);
    unlink(fifo);
    rb_tmpdir_remove(dir);
}

/* RoBERTa derives its positions from in.tokens (position_ids "roberta"), so
 * an inputs file without in.positions must be taken, by run and by golden,
 * and give what the same tokens give when seeded: the case made from the
 * seeded case's own tokens, as an inputs file, has the same out.output, bit
 * for bit (the parameters are the seed's in both).  An inputs file that does
 * give in.positions stays refused (the negative control of the refusal). */
#define ROBERTA "{\"model\": {\"family\": \"roberta\", \"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, " \
                "\"n_layers\": 1, \"vocab_size\": 10, \"max_len\": 8}, \"input\": {\"batch\": 2, \"seq_len\": 3}}"

static void read_tensor(const char *path, const char *name, void *out, int integers)
{
    refenc_st_file f;
    refenc_error err;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    const refenc_st_tensor *t = refenc_st_find(&f, name);
    cr_assert_not_null(t, "%s: no %s", path, name);
    const int st = integers ? refenc_st_to_i64(out, &f, t, &err) : refenc_st_to_f64(out, &f, t, &err);
    cr_assert_eq(st, REFENC_OK, "%s", err.message);
    refenc_st_free(&f);
}

Test(bad_inputs_file, roberta_takes_an_inputs_file_and_derives_its_positions)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32], seeded[RB_PATH_MAX + 32];
    char from_file[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/roberta.json", dir);
    snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
    snprintf(seeded, sizeof seeded, "%s/seeded.safetensors", dir);
    snprintf(from_file, sizeof from_file, "%s/from_file.safetensors", dir);
    rb_write_file(cfg, ROBERTA, strlen(ROBERTA));
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--outputs", "final", "--out-file",
                                          seeded, "--quiet", NULL});
    cr_assert_eq(r.status, 0, "the seeded case: %s", r.err);
    rb_result_free(&r);
    int64_t tok[6];
    read_tensor(seeded, "in.tokens", tok, 1);
    const refenc_st_entry e[] = {{"in.tokens", REFENC_ST_I64, 2, {2, 3}, tok}};
    refenc_error err;
    cr_assert_eq(refenc_st_write(in, e, 1, NULL, &err), REFENC_OK, "%s", err.message);

    r = rb_run((const char *[]){"refenc", "run", "--config", cfg, "--inputs", in, NULL});
    cr_expect_eq(r.status, 0, "run --inputs: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--inputs", in, "--outputs", "final",
                                "--out-file", from_file, "--quiet", NULL});
    cr_assert_eq(r.status, 0, "golden --inputs: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    double y0[48], y1[48];
    read_tensor(seeded, "out.output", y0, 0);
    read_tensor(from_file, "out.output", y1, 0);
    cr_expect(memcmp(y0, y1, sizeof y0) == 0, "the same tokens from a file give another out.output");

    /* given positions are refused under position_ids "roberta" */
    const refenc_st_entry ep[] = {{"in.tokens", REFENC_ST_I64, 2, {2, 3}, tok},
                                  {"in.positions", REFENC_ST_I64, 1, {3}, positions}};
    cr_assert_eq(refenc_st_write(in, ep, 2, NULL, &err), REFENC_OK, "%s", err.message);
    for (int k = 0; k < 2; k++) {
        const char *golden[] = {"refenc", "golden", "--config", cfg, "--inputs", in, "--out-file", from_file,
                                "--quiet", NULL};
        const char *run[] = {"refenc", "run", "--config", cfg, "--inputs", in, NULL};
        r = rb_run(k == 0 ? golden : run);
        rb_expect_error(&r, 2, k == 0 ? "golden" : "run", "in.positions under roberta",
                        (const char *[]){"inputs.safetensors: ", "in.positions is given", NULL});
        rb_result_free(&r);
    }
    rb_tmpdir_remove(dir);
}

/* A BERT-family model takes its segment ids from an inputs file: the case
 * made by `refenc golden --inputs` from the seeded case's own in.tokens and
 * in.token_type_ids has the same in.token_type_ids and out.output, bit for
 * bit, as the seeded case (the parameters are the seed's in both).  The
 * control: the same tokens without the types (every position type 0) give
 * another out.output, so the types were read, not defaulted. */
#define BERT "{\"model\": {\"family\": \"bert\", \"d_model\": 8, \"n_heads\": 2, \"d_ff\": 12, " \
             "\"n_layers\": 1, \"vocab_size\": 10, \"max_len\": 8, \"type_vocab_size\": 2}, " \
             "\"input\": {\"batch\": 2, \"seq_len\": 4}}"

Test(bad_inputs_file, bert_takes_its_token_types_from_an_inputs_file)
{
    char dir[RB_PATH_MAX], cfg[RB_PATH_MAX + 32], in[RB_PATH_MAX + 32], seeded[RB_PATH_MAX + 32];
    char from_file[RB_PATH_MAX + 32];
    rb_tmpdir(dir);
    snprintf(cfg, sizeof cfg, "%s/bert.json", dir);
    snprintf(in, sizeof in, "%s/inputs.safetensors", dir);
    snprintf(seeded, sizeof seeded, "%s/seeded.safetensors", dir);
    snprintf(from_file, sizeof from_file, "%s/from_file.safetensors", dir);
    rb_write_file(cfg, BERT, strlen(BERT));
    rb_result r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--outputs", "final", "--out-file",
                                          seeded, "--quiet", NULL});
    cr_assert_eq(r.status, 0, "the seeded case: %s", r.err);
    rb_result_free(&r);
    int64_t tok[8], typ[8], typ1[8];
    read_tensor(seeded, "in.tokens", tok, 1);
    read_tensor(seeded, "in.token_type_ids", typ, 1);
    int mixed = 0;
    for (size_t i = 0; i < 8; i++)
        mixed |= typ[i] != 0;
    cr_assert(mixed, "the seeded case's token types are all 0: the check below could not fail");
    const refenc_st_entry e[] = {{"in.tokens", REFENC_ST_I64, 2, {2, 4}, tok},
                                 {"in.token_type_ids", REFENC_ST_I64, 2, {2, 4}, typ}};
    refenc_error err;
    cr_assert_eq(refenc_st_write(in, e, 2, NULL, &err), REFENC_OK, "%s", err.message);

    r = rb_run((const char *[]){"refenc", "run", "--config", cfg, "--inputs", in, NULL});
    cr_expect_eq(r.status, 0, "run --inputs: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--inputs", in, "--outputs", "final",
                                "--out-file", from_file, "--quiet", NULL});
    cr_assert_eq(r.status, 0, "golden --inputs: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    double y0[64], y1[64];
    read_tensor(from_file, "in.token_type_ids", typ1, 1);
    cr_expect(memcmp(typ, typ1, sizeof typ) == 0, "the case does not store the given token types");
    read_tensor(seeded, "out.output", y0, 0);
    read_tensor(from_file, "out.output", y1, 0);
    cr_expect(memcmp(y0, y1, sizeof y0) == 0, "the same tokens and types from a file give another out.output");

    /* control: without the types, every position is type 0 and out.output differs */
    cr_assert_eq(refenc_st_write(in, e, 1, NULL, &err), REFENC_OK, "%s", err.message);
    r = rb_run((const char *[]){"refenc", "golden", "--config", cfg, "--inputs", in, "--outputs", "final",
                                "--out-file", from_file, "--quiet", NULL});
    cr_assert_eq(r.status, 0, "golden --inputs without types: exit %d: %s", r.status, r.err);
    rb_result_free(&r);
    read_tensor(from_file, "out.output", y1, 0);
    cr_expect(memcmp(y0, y1, sizeof y0) != 0, "token types 0 give the seeded case's out.output");
    rb_tmpdir_remove(dir);
}
