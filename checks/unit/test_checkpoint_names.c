/* Hugging Face checkpoints of the families (ref/io/checkpoint_names.h).
 *
 * For each family a small encoder (D 4, H 2, F 6, N 2, V 7, P 5, the
 * family's token types) gets random parameters P0 in refenc's layout; the
 * test writes them as the family's code saves them, under the names and in
 * the layouts typed here from the Hugging Face modeling files (not from
 * refenc's table): BERT's separate query, key, value, GPT-2's Conv1D (in,
 * out), ...  Loading the file must give back P0 bit for bit.  Negative
 * control: the same file with two of its names swapped loads into other
 * parameters.  Then every kind of file that does not fit is refused with a
 * message naming the tensor, its shape and the expected one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>

#include "../../ref/core/family.h"
#include "../../ref/core/params.h"
#include "../../ref/io/checkpoint_names.h"
#include "../../ref/io/safetensors.h"
#include "../../ref/tool/random_params.h"
#include "unit.h"

enum { D = 4, F = 6, N = 2 };

typedef enum { AS_IS, TRANSPOSED, ROWS_Q, ROWS_K, ROWS_V } how;

/* The file being built: names, shapes and F64 data, owned here. */
typedef struct {
    size_t n;
    refenc_st_entry e[128];
    char *names[128];
    double *data[128];
} ckpt;

static void ckpt_free(ckpt *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->names[i]);
        free(c->data[i]);
    }
    memset(c, 0, sizeof *c);
}

/* Adds tensor `name` holding refenc tensor `src` of p (layer i substituted
 * in both with "%zu"), converted as `h` says. */
static void put(ckpt *c, const refenc_params *p, const char *name_fmt, const char *src_fmt, size_t i,
                how h)
{
    char name[160], src[96];
    snprintf(name, sizeof name, name_fmt, i);
    snprintf(src, sizeof src, src_fmt, i);
    const refenc_tensor *t = refenc_params_find(p, src);
    cr_assert_not_null(t, "the test's source tensor %s is not in the config", src);
    cr_assert_lt(c->n, 128);
    refenc_st_entry *e = &c->e[c->n];
    const size_t rows = t->shape[0], cols = t->ndim == 2 ? t->shape[1] : 1;
    double *v = malloc(t->size * sizeof(double));
    cr_assert_not_null(v);
    size_t n_out = t->size;
    e->ndim = t->ndim, e->shape[0] = t->shape[0], e->shape[1] = t->shape[1];
    if (h == AS_IS) {
        memcpy(v, t->data, t->size * sizeof(double));
    } else if (h == TRANSPOSED) { /* Conv1D: W (in, out), y = x W + b */
        for (size_t o = 0; o < rows; o++)
            for (size_t k = 0; k < cols; k++)
                v[k * rows + o] = t->data[o * cols + k];
        e->shape[0] = cols, e->shape[1] = rows;
    } else { /* q, k or v: the row block [b D, (b+1) D) of in_proj */
        const size_t b = (size_t)(h - ROWS_Q), block = rows / 3;
        memcpy(v, t->data + b * block * cols, block * cols * sizeof(double));
        n_out = block * cols;
        e->shape[0] = block;
    }
    (void)n_out;
    c->names[c->n] = strdup(name);
    c->data[c->n] = v;
    e->name = c->names[c->n];
    e->dtype = REFENC_ST_F64;
    e->data = v;
    c->n++;
}

/* ---- the families, as their code saves them ---------------------------------------- */

/* P: a tensor named pre + name (its "%zu" the layer i) from refenc's src, as
 * it is or transposed; R: rows [first, first + count) of src.  Both for every
 * family's file below (each function's char f[160] and size_t i). */
static void bert_like(ckpt *c, const refenc_params *p, const char *pre, int types)
{
    char f[160];
#define P(name, src, how_)                                    \
    do {                                                      \
        snprintf(f, sizeof f, "%s%s", pre, name);             \
        put(c, p, f, src, i, how_);                           \
    } while (0)
#define R(name, src, first, count)                        \
    do {                                                      \
        snprintf(f, sizeof f, "%s%s", pre, name);             \
        put_rows(c, p, f, src, i, first, count);              \
    } while (0)
    size_t i = 0;
    P("embeddings.word_embeddings.weight", "embedding.weight", AS_IS);
    if (types)
        P("embeddings.token_type_embeddings.weight", "token_type_embedding.weight", AS_IS);
    P("embeddings.position_embeddings.weight", "pos_embedding.weight", AS_IS);
    P("embeddings.LayerNorm.weight", "embedding_norm.weight", AS_IS);
    P("embeddings.LayerNorm.bias", "embedding_norm.bias", AS_IS);
    for (i = 0; i < N; i++) {
        P("encoder.layer.%zu.attention.self.query.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_Q);
        P("encoder.layer.%zu.attention.self.query.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_Q);
        P("encoder.layer.%zu.attention.self.key.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_K);
        P("encoder.layer.%zu.attention.self.key.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_K);
        P("encoder.layer.%zu.attention.self.value.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_V);
        P("encoder.layer.%zu.attention.self.value.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_V);
        P("encoder.layer.%zu.attention.output.dense.weight", "layers.%zu.self_attn.out_proj.weight", AS_IS);
        P("encoder.layer.%zu.attention.output.dense.bias", "layers.%zu.self_attn.out_proj.bias", AS_IS);
        P("encoder.layer.%zu.attention.output.LayerNorm.weight", "layers.%zu.norm1.weight", AS_IS);
        P("encoder.layer.%zu.attention.output.LayerNorm.bias", "layers.%zu.norm1.bias", AS_IS);
        P("encoder.layer.%zu.intermediate.dense.weight", "layers.%zu.linear1.weight", AS_IS);
        P("encoder.layer.%zu.intermediate.dense.bias", "layers.%zu.linear1.bias", AS_IS);
        P("encoder.layer.%zu.output.dense.weight", "layers.%zu.linear2.weight", AS_IS);
        P("encoder.layer.%zu.output.dense.bias", "layers.%zu.linear2.bias", AS_IS);
        P("encoder.layer.%zu.output.LayerNorm.weight", "layers.%zu.norm2.weight", AS_IS);
        P("encoder.layer.%zu.output.LayerNorm.bias", "layers.%zu.norm2.bias", AS_IS);
    }
}

static void distilbert_file(ckpt *c, const refenc_params *p, const char *pre)
{
    char f[160];
    size_t i = 0;
    P("embeddings.word_embeddings.weight", "embedding.weight", AS_IS);
    P("embeddings.position_embeddings.weight", "pos_embedding.weight", AS_IS);
    P("embeddings.LayerNorm.weight", "embedding_norm.weight", AS_IS);
    P("embeddings.LayerNorm.bias", "embedding_norm.bias", AS_IS);
    for (i = 0; i < N; i++) {
        P("transformer.layer.%zu.attention.q_lin.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_Q);
        P("transformer.layer.%zu.attention.q_lin.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_Q);
        P("transformer.layer.%zu.attention.k_lin.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_K);
        P("transformer.layer.%zu.attention.k_lin.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_K);
        P("transformer.layer.%zu.attention.v_lin.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_V);
        P("transformer.layer.%zu.attention.v_lin.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_V);
        P("transformer.layer.%zu.attention.out_lin.weight", "layers.%zu.self_attn.out_proj.weight", AS_IS);
        P("transformer.layer.%zu.attention.out_lin.bias", "layers.%zu.self_attn.out_proj.bias", AS_IS);
        P("transformer.layer.%zu.sa_layer_norm.weight", "layers.%zu.norm1.weight", AS_IS);
        P("transformer.layer.%zu.sa_layer_norm.bias", "layers.%zu.norm1.bias", AS_IS);
        P("transformer.layer.%zu.ffn.lin1.weight", "layers.%zu.linear1.weight", AS_IS);
        P("transformer.layer.%zu.ffn.lin1.bias", "layers.%zu.linear1.bias", AS_IS);
        P("transformer.layer.%zu.ffn.lin2.weight", "layers.%zu.linear2.weight", AS_IS);
        P("transformer.layer.%zu.ffn.lin2.bias", "layers.%zu.linear2.bias", AS_IS);
        P("transformer.layer.%zu.output_layer_norm.weight", "layers.%zu.norm2.weight", AS_IS);
        P("transformer.layer.%zu.output_layer_norm.bias", "layers.%zu.norm2.bias", AS_IS);
    }
}

static void gpt2_file(ckpt *c, const refenc_params *p, const char *pre)
{
    char f[160];
    size_t i = 0;
    P("wte.weight", "embedding.weight", AS_IS);
    P("wpe.weight", "pos_embedding.weight", AS_IS);
    for (i = 0; i < N; i++) {
        P("h.%zu.ln_1.weight", "layers.%zu.norm1.weight", AS_IS);
        P("h.%zu.ln_1.bias", "layers.%zu.norm1.bias", AS_IS);
        P("h.%zu.attn.c_attn.weight", "layers.%zu.self_attn.in_proj_weight", TRANSPOSED);
        P("h.%zu.attn.c_attn.bias", "layers.%zu.self_attn.in_proj_bias", AS_IS);
        P("h.%zu.attn.c_proj.weight", "layers.%zu.self_attn.out_proj.weight", TRANSPOSED);
        P("h.%zu.attn.c_proj.bias", "layers.%zu.self_attn.out_proj.bias", AS_IS);
        P("h.%zu.ln_2.weight", "layers.%zu.norm2.weight", AS_IS);
        P("h.%zu.ln_2.bias", "layers.%zu.norm2.bias", AS_IS);
        P("h.%zu.mlp.c_fc.weight", "layers.%zu.linear1.weight", TRANSPOSED);
        P("h.%zu.mlp.c_fc.bias", "layers.%zu.linear1.bias", AS_IS);
        P("h.%zu.mlp.c_proj.weight", "layers.%zu.linear2.weight", TRANSPOSED);
        P("h.%zu.mlp.c_proj.bias", "layers.%zu.linear2.bias", AS_IS);
    }
    P("ln_f.weight", "norm.weight", AS_IS);
    P("ln_f.bias", "norm.bias", AS_IS);
}

static void clip_file(ckpt *c, const refenc_params *p, const char *pre)
{
    char f[160];
    size_t i = 0;
    P("embeddings.token_embedding.weight", "embedding.weight", AS_IS);
    P("embeddings.position_embedding.weight", "pos_embedding.weight", AS_IS);
    for (i = 0; i < N; i++) {
        P("encoder.layers.%zu.self_attn.q_proj.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_Q);
        P("encoder.layers.%zu.self_attn.q_proj.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_Q);
        P("encoder.layers.%zu.self_attn.k_proj.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_K);
        P("encoder.layers.%zu.self_attn.k_proj.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_K);
        P("encoder.layers.%zu.self_attn.v_proj.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_V);
        P("encoder.layers.%zu.self_attn.v_proj.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_V);
        P("encoder.layers.%zu.self_attn.out_proj.weight", "layers.%zu.self_attn.out_proj.weight", AS_IS);
        P("encoder.layers.%zu.self_attn.out_proj.bias", "layers.%zu.self_attn.out_proj.bias", AS_IS);
        P("encoder.layers.%zu.layer_norm1.weight", "layers.%zu.norm1.weight", AS_IS);
        P("encoder.layers.%zu.layer_norm1.bias", "layers.%zu.norm1.bias", AS_IS);
        P("encoder.layers.%zu.mlp.fc1.weight", "layers.%zu.linear1.weight", AS_IS);
        P("encoder.layers.%zu.mlp.fc1.bias", "layers.%zu.linear1.bias", AS_IS);
        P("encoder.layers.%zu.mlp.fc2.weight", "layers.%zu.linear2.weight", AS_IS);
        P("encoder.layers.%zu.mlp.fc2.bias", "layers.%zu.linear2.bias", AS_IS);
        P("encoder.layers.%zu.layer_norm2.weight", "layers.%zu.norm2.weight", AS_IS);
        P("encoder.layers.%zu.layer_norm2.bias", "layers.%zu.norm2.bias", AS_IS);
    }
    P("final_layer_norm.weight", "norm.weight", AS_IS);
    P("final_layer_norm.bias", "norm.bias", AS_IS);
}

/* The family's small config and random parameters P0. */
static void small(refenc_config *cfg, refenc_params *p, refenc_family fam, unsigned long stream)
{
    refenc_config_family(cfg, fam);
    cfg->d_model = D, cfg->n_heads = 2, cfg->d_ff = F, cfg->n_layers = N, cfg->vocab_size = 7;
    cfg->max_len = 5;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(p, cfg, &err), REFENC_OK, "%s", err.message);
    gsl_rng *r = test_rng(stream);
    refenc_params_init_random(p, cfg, r);
    gsl_rng_free(r);
}

static void build(ckpt *c, const refenc_params *p, refenc_family fam, const char *pre)
{
    memset(c, 0, sizeof *c);
    switch (fam) {
    case REFENC_FAMILY_BERT: bert_like(c, p, pre, 1); break;
    case REFENC_FAMILY_ROBERTA: bert_like(c, p, pre, 1); break;
    case REFENC_FAMILY_DISTILBERT: distilbert_file(c, p, pre); break;
    case REFENC_FAMILY_GPT2: gpt2_file(c, p, pre); break;
    case REFENC_FAMILY_CLIP_TEXT: clip_file(c, p, pre); break;
    default: cr_assert_fail("no file for this family");
    }
}

/* Writes the entries (plus extra ones) and reads the file back parsed. */
static void write_read(refenc_st_file *f, const ckpt *c, const refenc_st_entry *extra, size_t n_extra)
{
    char path[] = "/tmp/refenc-ckpt-XXXXXX";
    const int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    refenc_st_entry all[160];
    memcpy(all, c->e, c->n * sizeof *all);
    if (n_extra > 0)
        memcpy(all + c->n, extra, n_extra * sizeof *all);
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, all, c->n + n_extra, NULL, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(f, path, &err), REFENC_OK, "%s", err.message);
    unlink(path);
}

/* Loads f into a fresh allocation for cfg; returns the status, *q the params. */
static int load(refenc_params *q, const refenc_config *cfg, const refenc_st_file *f,
                refenc_ck_report *rep, char **problems, refenc_error *err)
{
    refenc_error e2;
    cr_assert_eq(refenc_params_alloc(q, cfg, &e2), REFENC_OK, "%s", e2.message);
    refenc_error_clear(err);
    return refenc_params_from_checkpoint(q, cfg, f, rep, problems, err);
}

static const struct {
    refenc_family family;
    const char *prefix;
    size_t tensors;  /* in the file: N per layer + the rest */
} FAMILIES[] = {
    {REFENC_FAMILY_BERT, "bert.", 5 + 16 * N},
    {REFENC_FAMILY_ROBERTA, "roberta.", 5 + 16 * N},
    {REFENC_FAMILY_DISTILBERT, "distilbert.", 4 + 16 * N},
    {REFENC_FAMILY_GPT2, "transformer.", 4 + 12 * N},
    {REFENC_FAMILY_CLIP_TEXT, "text_model.", 4 + 16 * N},
};

Test(checkpoint_names, each_family_loads_its_own_checkpoint_bit_for_bit)
{
    for (size_t k = 0; k < sizeof FAMILIES / sizeof FAMILIES[0]; k++) {
        for (int with_prefix = 0; with_prefix < 2; with_prefix++) {
            refenc_config cfg;
            refenc_params p0, p1;
            small(&cfg, &p0, FAMILIES[k].family, 700 + k);
            ckpt c;
            build(&c, &p0, FAMILIES[k].family, with_prefix ? FAMILIES[k].prefix : "");
            cr_expect_eq(c.n, FAMILIES[k].tensors);
            refenc_st_file f;
            write_read(&f, &c, NULL, 0);
            refenc_ck_report rep;
            refenc_error err;
            const int st = load(&p1, &cfg, &f, &rep, NULL, &err);
            const char *name = refenc_family_name(FAMILIES[k].family);
            cr_expect_eq(st, REFENC_OK, "%s: %s", name, err.message);
            cr_expect_eq(rep.mapped, c.n, "%s: %zu tensors mapped of %zu", name, rep.mapped, c.n);
            cr_expect_str_eq(rep.prefix, with_prefix ? FAMILIES[k].prefix : "", "%s: prefix", name);
            cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) == 0,
                      "%s%s: the parameters differ from the ones written", name,
                      with_prefix ? " (with its prefix)" : "");
            refenc_st_free(&f);
            refenc_params_free(&p1);

            /* negative control: two names of tensors of one shape swapped
             * (BERT, RoBERTa: query and key weights; DistilBERT: q_lin and
             * k_lin biases; CLIP: k_proj and v_proj biases; GPT-2: ln_1 and
             * ln_2 weights) */
            refenc_st_entry swapped = c.e[k == 3 ? 2 : 5];
            c.e[k == 3 ? 2 : 5].name = c.e[k == 3 ? 8 : 7].name;
            c.e[k == 3 ? 8 : 7].name = swapped.name;
            write_read(&f, &c, NULL, 0);
            cr_expect_eq(load(&p1, &cfg, &f, NULL, NULL, &err), REFENC_OK, "%s", err.message);
            cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) != 0,
                      "%s: two swapped names loaded the same parameters", name);
            refenc_st_free(&f);
            refenc_params_free(&p1);
            ckpt_free(&c);
            refenc_params_free(&p0);
        }
    }
}

/* The model prefix: tensors outside it (heads, the other tower) and the
 * family's buffers inside it are ignored and counted; dtypes convert exactly. */
Test(checkpoint_names, heads_outside_the_prefix_and_buffers_are_ignored)
{
    refenc_config cfg;
    refenc_params p0, p1;
    small(&cfg, &p0, REFENC_FAMILY_BERT, 720);
    ckpt c;
    build(&c, &p0, REFENC_FAMILY_BERT, "bert.");
    static const double head[3] = {1, 2, 3};
    static const int64_t ids[5] = {0, 1, 2, 3, 4};
    static const double pooler[D * D] = {0};
    const refenc_st_entry extra[] = {
        {"cls.predictions.bias", REFENC_ST_F64, 1, {3}, head},
        {"bert.embeddings.position_ids", REFENC_ST_I64, 2, {1, 5}, ids},
        {"bert.pooler.dense.weight", REFENC_ST_F64, 2, {D, D}, pooler},
    };
    refenc_st_file f;
    write_read(&f, &c, extra, 3);
    refenc_ck_report rep;
    refenc_error err;
    cr_assert_eq(load(&p1, &cfg, &f, &rep, NULL, &err), REFENC_OK, "%s", err.message);
    cr_expect_eq(rep.ignored_outside, 1);
    cr_expect_eq(rep.ignored_buffers, 2);
    cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) == 0);
    refenc_st_free(&f);
    refenc_params_free(&p1);
    ckpt_free(&c);
    refenc_params_free(&p0);

    /* GPT-2's causal-mask buffers inside the prefix */
    small(&cfg, &p0, REFENC_FAMILY_GPT2, 721);
    build(&c, &p0, REFENC_FAMILY_GPT2, "transformer.");
    static const double mask[4] = {1, 0, 1, 1}, masked_bias = -1e4;
    const refenc_st_entry gpt2_extra[] = {
        {"transformer.h.0.attn.bias", REFENC_ST_F64, 4, {1, 1, 2, 2}, mask},
        {"transformer.h.1.attn.masked_bias", REFENC_ST_F64, 0, {0}, &masked_bias},
        {"lm_head.weight", REFENC_ST_F64, 1, {3}, head},
    };
    write_read(&f, &c, gpt2_extra, 3);
    cr_assert_eq(load(&p1, &cfg, &f, &rep, NULL, &err), REFENC_OK, "%s", err.message);
    cr_expect(rep.ignored_outside == 1 && rep.ignored_buffers == 2, "%zu outside, %zu buffers",
              rep.ignored_outside, rep.ignored_buffers);
    cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) == 0);
    refenc_st_free(&f);
    refenc_params_free(&p1);
    ckpt_free(&c);
    refenc_params_free(&p0);
}

/* A file that does not fit: the message names the tensor, its shape and the
 * expected one; every problem is listed. */
static void expect_refused(ckpt *c, const refenc_config *cfg, const refenc_st_entry *extra,
                           size_t n_extra, const char *fragment, size_t n_problems)
{
    refenc_st_file f;
    write_read(&f, c, extra, n_extra);
    refenc_params q;
    refenc_error err;
    char *problems = NULL;
    const int st = load(&q, cfg, &f, NULL, &problems, &err);
    cr_expect_eq(st, REFENC_EFORMAT, "'%s': status %d, message %s", fragment, st, err.message);
    cr_expect(strstr(err.message, fragment) != NULL, "message '%s' lacks '%s'", err.message, fragment);
    cr_expect(strstr(err.message, f.path) == err.message, "message '%s' does not start with the path",
              err.message);
    size_t lines = 0;
    for (const char *s = problems; s != NULL && *s; s++)
        lines += *s == '\n';
    cr_expect_eq(lines, n_problems, "'%s': %zu problems listed, want %zu:\n%s", fragment, lines,
                 n_problems, problems ? problems : "");
    free(problems);
    refenc_st_free(&f);
    refenc_params_free(&q);
}

Test(checkpoint_names, tensors_that_do_not_fit_are_named_with_their_shapes)
{
    refenc_config cfg;
    refenc_params p0;
    small(&cfg, &p0, REFENC_FAMILY_BERT, 730);
    ckpt c;
    build(&c, &p0, REFENC_FAMILY_BERT, "");
    static double big[64];
    static const int64_t ints[5 * D];

    /* a misshapen query, as (D, D + 1) */
    refenc_st_entry keep = c.e[5];
    c.e[5].shape[1] = D + 1, c.e[5].data = big;
    expect_refused(&c, &cfg, NULL, 0,
                   "tensor 'encoder.layer.0.attention.self.query.weight' has shape (4, 5), expected "
                   "(4, 4) (refenc's 'layers.0.self_attn.in_proj_weight', rows [0, D))", 1);
    c.e[5] = keep;

    /* a missing key block while the query's is there: its rows of in_proj
     * are named (each row block is counted apart from the others) */
    const refenc_st_entry last = c.e[c.n - 1], key = c.e[7];
    c.e[7] = last, c.n--;
    expect_refused(&c, &cfg, NULL, 0,
                   "tensor 'encoder.layer.0.attention.self.key.weight' (4, 4) is missing (refenc's "
                   "'layers.0.self_attn.in_proj_weight', rows [D, 2D))", 1);
    c.n++, c.e[7] = key, c.e[c.n - 1] = last;

    /* a missing tensor: drop the last (layer 1's output LayerNorm bias) */
    c.n--;
    expect_refused(&c, &cfg, NULL, 0,
                   "tensor 'encoder.layer.1.output.LayerNorm.bias' (4) is missing (refenc's "
                   "'layers.1.norm2.bias', copied)", 1);
    c.n++;

    /* a layer index with a leading zero, or too large for size_t, is no index */
    const refenc_st_entry odd[] = {
        {"encoder.layer.01.output.LayerNorm.bias", REFENC_ST_F64, 1, {D}, big},
        {"encoder.layer.99999999999999999999999.output.LayerNorm.bias", REFENC_ST_F64, 1, {D}, big},
    };
    expect_refused(&c, &cfg, odd, 1, "tensor 'encoder.layer.01.output.LayerNorm.bias' (4) is not a "
                   "parameter of a bert encoder", 1);
    expect_refused(&c, &cfg, odd + 1, 1, "tensor 'encoder.layer.99999999999999999999999.output."
                   "LayerNorm.bias' (4) is not a parameter of a bert encoder", 1);

    /* a third layer for a 2-layer config; an unknown name; integers */
    const refenc_st_entry extra[] = {
        {"encoder.layer.2.attention.self.query.weight", REFENC_ST_F64, 2, {D, D}, big},
        {"encoder.layer.0.attention.self.quer.bias", REFENC_ST_F64, 1, {D}, big},
    };
    expect_refused(&c, &cfg, extra, 1,
                   "tensor 'encoder.layer.2.attention.self.query.weight' (4, 4) belongs to layer 2, "
                   "but the config has n_layers = 2", 1);
    expect_refused(&c, &cfg, extra + 1, 1,
                   "tensor 'encoder.layer.0.attention.self.quer.bias' (4) is not a parameter of a bert "
                   "encoder", 1);
    expect_refused(&c, &cfg, extra, 2, "(and 1 more problems)", 2);
    keep = c.e[2];
    c.e[2].dtype = REFENC_ST_I64, c.e[2].data = ints;
    c.e[2].ndim = 1, c.e[2].shape[0] = D; /* and the wrong shape: the shape is named first */
    expect_refused(&c, &cfg, NULL, 0, "tensor 'embeddings.position_embeddings.weight' has shape (4), "
                   "expected (5, 4)", 1);
    c.e[2].ndim = 2, c.e[2].shape[0] = 5, c.e[2].shape[1] = D;
    expect_refused(&c, &cfg, NULL, 0, "tensor 'embeddings.position_embeddings.weight' (5, 4) has "
                   "dtype I64, not a floating type", 1);
    c.e[2] = keep;

    /* a config of no known family */
    refenc_config unknown = cfg;
    unknown.family = REFENC_FAMILY_COUNT;
    refenc_st_file uf;
    write_read(&uf, &c, NULL, 0);
    refenc_params uq;
    refenc_error uerr;
    cr_assert_eq(refenc_params_alloc(&uq, &cfg, &uerr), REFENC_OK);
    cr_expect_eq(refenc_params_from_checkpoint(&uq, &unknown, &uf, NULL, NULL, &uerr), REFENC_EINVAL);
    cr_expect(strstr(uerr.message, "unknown family") != NULL, "%s", uerr.message);
    /* a grouped-query config: the family's three q, k, v blocks cannot hold it */
    refenc_config grouped = cfg;
    grouped.n_kv_heads = 1;
    cr_expect_eq(refenc_params_from_checkpoint(&uq, &grouped, &uf, NULL, NULL, &uerr), REFENC_EINVAL);
    cr_expect(strstr(uerr.message, "config key n_kv_heads: the bert family's names hold q, k and v") != NULL,
              "%s", uerr.message);
    refenc_params_free(&uq);
    refenc_st_free(&uf);

    /* the same file for a config without token types */
    refenc_config no_types = cfg;
    no_types.type_vocab_size = 0;
    expect_refused(&c, &no_types, NULL, 0,
                   "tensor 'embeddings.token_type_embeddings.weight' (2, 4) maps to refenc's "
                   "'token_type_embedding.weight', which this config does not have", 1);
    ckpt_free(&c);
    refenc_params_free(&p0);

    /* GPT-2's c_attn saved untransposed, in nn.Linear's (3D, D) */
    small(&cfg, &p0, REFENC_FAMILY_GPT2, 731);
    build(&c, &p0, REFENC_FAMILY_GPT2, "transformer.");
    c.e[4].shape[0] = 3 * D, c.e[4].shape[1] = D;
    expect_refused(&c, &cfg, NULL, 0,
                   "tensor 'transformer.h.0.attn.c_attn.weight' has shape (12, 4), expected (4, 12) "
                   "(refenc's 'layers.0.self_attn.in_proj_weight', transposed from Conv1D (in, out))", 1);
    ckpt_free(&c);
    refenc_params_free(&p0);
}

/* The tables: every refenc tensor of a family's preset has a source, and the
 * vaswani family reads refenc's own names. */
Test(checkpoint_names, tables_cover_every_parameter_of_each_preset)
{
    for (int fam = 0; fam < REFENC_FAMILY_COUNT; fam++) {
        refenc_config cfg;
        refenc_config_family(&cfg, (refenc_family)fam);
        cfg.d_model = D, cfg.n_heads = 2, cfg.d_ff = F, cfg.n_layers = N, cfg.max_len = 5;
        cfg.vocab_size = 7;
        if (cfg.padding_idx >= 7) /* ModernBERT's pad token 50283 */
            cfg.padding_idx = 0;
        if (fam == REFENC_FAMILY_VASWANI) /* every optional tensor present */
            cfg.type_vocab_size = 2, cfg.embedding_norm = 1, cfg.positional = REFENC_POS_LEARNED,
            cfg.qk_norm = REFENC_QKNORM_RMS; /* Qwen3's q_norm, k_norm */
        if (cfg.n_kv_heads != 0) /* the Llama-style presets: grouped, their head_dim small */
            cfg.n_kv_heads = 1, cfg.head_dim = cfg.head_dim ? 4 : 0;
        if (fam == REFENC_FAMILY_LLAMA) /* attention_bias and mlp_bias: every bias */
            cfg.linear_bias = 1;
        refenc_params p;
        refenc_error err;
        cr_assert_eq(refenc_params_alloc(&p, &cfg, &err), REFENC_OK, "%s", err.message);
        size_t n;
        const char *prefix;
        const refenc_ck_entry *t = refenc_checkpoint_table((refenc_family)fam, &n, &prefix);
        cr_assert_not_null(t);
        for (size_t k = 0; k < p.n_tensors; k++) {
            int found = 0;
            for (size_t r = 0; r < n && !found; r++) {
                char name[96];
                const char *slot = strstr(t[r].refenc, "{i}");
                if (slot == NULL)
                    snprintf(name, sizeof name, "%s", t[r].refenc);
                else
                    snprintf(name, sizeof name, "%.*s%c%s", (int)(slot - t[r].refenc), t[r].refenc,
                             p.tensors[k].name[7], slot + 3); /* "layers.N." with N < 10 */
                found = strcmp(name, p.tensors[k].name) == 0;
            }
            cr_expect(found, "%s: refenc's '%s' has no source", refenc_family_name((refenc_family)fam),
                      p.tensors[k].name);
        }
        refenc_params_free(&p);
    }
    size_t n;
    cr_expect_null(refenc_checkpoint_table(REFENC_FAMILY_COUNT, &n, NULL), "an unknown family");
}

/* ---- refenc run --config C --weights W ------------------------------------------------ */

/* Runs the program (REFENC_CLI) with the arguments; returns the exit code,
 * stdout and stderr in out and err (cap bytes each). */
static int run_cli(char *out, char *err, size_t cap, const char *args)
{
    const char *cli = getenv("REFENC_CLI");
    cr_assert(cli != NULL && *cli, "REFENC_CLI is not set (make check sets it)");
    char errpath[] = "/tmp/refenc-ckpt-err-XXXXXX", cmd[2048];
    const int fd = mkstemp(errpath);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "%s %s 2>%s", cli, args, errpath);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    const size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    const int status = pclose(p);
    FILE *e = fopen(errpath, "r");
    const size_t m = e ? fread(err, 1, cap - 1, e) : 0;
    err[m] = '\0';
    if (e)
        fclose(e);
    unlink(errpath);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void fingerprint_of(char *fp, size_t cap, const char *out)
{
    const char *s = strstr(out, "fingerprint (FNV-1a of the output's bytes): ");
    cr_assert_not_null(s, "no fingerprint in:\n%s", out);
    snprintf(fp, cap, "%.16s", s + strlen("fingerprint (FNV-1a of the output's bytes): "));
}

/* The parameters the program draws from seed 7, written as a GPT-2
 * checkpoint and read back with --weights, give the output it gives without
 * --weights, bit for bit (same fingerprint); another seed's parameters give
 * another output; a misshapen tensor is refused with exit 2, one line naming
 * it, and nothing on stdout. */
Test(checkpoint_names, run_with_weights_uses_the_checkpoint)
{
    char dir[] = "/tmp/refenc-ckpt-run-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cfg_path[96], w_path[96], args[512];
    snprintf(cfg_path, sizeof cfg_path, "%s/gpt2.json", dir);
    snprintf(w_path, sizeof w_path, "%s/gpt2.safetensors", dir);
    FILE *j = fopen(cfg_path, "w");
    cr_assert_not_null(j);
    fputs("{\"model\": {\"family\": \"gpt2\", \"d_model\": 4, \"n_heads\": 2, \"d_ff\": 6, \"n_layers\": 2,"
          " \"vocab_size\": 7, \"max_len\": 5}, \"input\": {\"batch\": 2, \"seq_len\": 4}}", j);
    fclose(j);

    refenc_config cfg;
    refenc_config_family(&cfg, REFENC_FAMILY_GPT2);
    cfg.d_model = D, cfg.n_heads = 2, cfg.d_ff = F, cfg.n_layers = N, cfg.vocab_size = 7, cfg.max_len = 5;
    char out[8192], err[8192], fp0[17], fp1[17], fp2[17];
    for (unsigned long seed = 7; seed <= 8; seed++) {
        refenc_params p;
        refenc_error e;
        cr_assert_eq(refenc_params_alloc(&p, &cfg, &e), REFENC_OK, "%s", e.message);
        gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
        gsl_rng_set(r, seed); /* the program's stream: the parameters first */
        refenc_params_init_random(&p, &cfg, r);
        gsl_rng_free(r);
        ckpt c;
        build(&c, &p, REFENC_FAMILY_GPT2, "transformer.");
        cr_assert_eq(refenc_st_write(w_path, c.e, c.n, NULL, &e), REFENC_OK, "%s", e.message);
        snprintf(args, sizeof args, "run --config %s --weights %s --seed 7", cfg_path, w_path);
        cr_assert_eq(run_cli(out, err, sizeof out, args), 0, "stderr: %s", err);
        fingerprint_of(seed == 7 ? fp1 : fp2, 17, out);
        if (seed == 7) {
            char want[256];
            snprintf(want, sizeof want, "weights: %s, gpt2 checkpoint names under 'transformer.': "
                     "28 tensors read, 0 outside the prefix and 0 buffers ignored", w_path);
            cr_expect(strstr(out, want) != NULL, "no '%s' in:\n%s", want, out);
        }
        ckpt_free(&c);
        refenc_params_free(&p);
    }
    snprintf(args, sizeof args, "run --config %s --seed 7", cfg_path);
    cr_assert_eq(run_cli(out, err, sizeof out, args), 0, "stderr: %s", err);
    fingerprint_of(fp0, 17, out);
    cr_expect_str_eq(fp1, fp0, "the seed's own parameters read back give another output");
    cr_expect_str_neq(fp2, fp0, "another seed's parameters gave the same output");

    /* a checkpoint saved as nn.Linear would: c_attn (3D, D) */
    refenc_params p;
    refenc_error e;
    cr_assert_eq(refenc_params_alloc(&p, &cfg, &e), REFENC_OK);
    ckpt c;
    build(&c, &p, REFENC_FAMILY_GPT2, "transformer.");
    c.e[4].shape[0] = 3 * D, c.e[4].shape[1] = D;
    cr_assert_eq(refenc_st_write(w_path, c.e, c.n, NULL, &e), REFENC_OK, "%s", e.message);
    snprintf(args, sizeof args, "run --config %s --weights %s", cfg_path, w_path);
    cr_expect_eq(run_cli(out, err, sizeof out, args), 2);
    char want[512];
    snprintf(want, sizeof want, "refenc run: %s: tensor 'transformer.h.0.attn.c_attn.weight' has shape "
             "(12, 4), expected (4, 12) (refenc's 'layers.0.self_attn.in_proj_weight', transposed from "
             "Conv1D (in, out))\n", w_path);
    cr_expect_str_eq(err, want);
    cr_expect_str_empty(out, "stdout: %s", out);
    ckpt_free(&c);
    refenc_params_free(&p);

    /* a weights file that is not there */
    snprintf(args, sizeof args, "run --config %s --weights %s/absent.safetensors", cfg_path, dir);
    cr_expect_eq(run_cli(out, err, sizeof out, args), 2);
    snprintf(want, sizeof want, "refenc run: %s/absent.safetensors: cannot open", dir);
    cr_expect(strstr(err, want) == err, "stderr '%s' lacks '%s'", err, want);

    /* --weights goes with --config only */
    snprintf(args, sizeof args, "run --case %s --out %s/x --weights %s", w_path, dir, w_path);
    cr_expect_eq(run_cli(out, err, sizeof out, args), 2);
    cr_expect_str_eq(err, "refenc run: --case does not combine with --config, --weights, --inputs or --trace\n");
    unlink(w_path);
    unlink(cfg_path);
    rmdir(dir);
}

/* A checkpoint whose every name carries a prefix the family does not know
 * (a sentence-transformers model's "0.auto_model.", a wrapper's "model."
 * before the family's own) is refused with the prefix named as the problem,
 * not with a "not a parameter" for each tensor; the control is the same
 * file without the prefix, which loads.  A file with one unknown tensor
 * among known ones keeps the per-tensor message (no prefix is common). */
Test(checkpoint_names, an_unknown_prefix_of_every_name_is_named)
{
    static const struct {
        const char *pre, *prefix;
    } wrapped[] = {{"0.auto_model.", "0.auto_model."}, {"model.bert.", "model."}, {"encoder.", "encoder."}};
    for (size_t w = 0; w < sizeof wrapped / sizeof wrapped[0]; w++) {
        refenc_config cfg;
        refenc_params p0, q;
        small(&cfg, &p0, REFENC_FAMILY_BERT, 760 + w);
        ckpt c;
        build(&c, &p0, REFENC_FAMILY_BERT, wrapped[w].pre);
        refenc_st_file f;
        write_read(&f, &c, NULL, 0);
        refenc_error err;
        char *problems = NULL, want[256];
        cr_expect_eq(load(&q, &cfg, &f, NULL, &problems, &err), REFENC_EFORMAT, "%s", wrapped[w].pre);
        snprintf(want, sizeof want, "%s: all %zu tensors start with '%s', which a bert checkpoint's names do not",
                 f.path, c.n, wrapped[w].prefix);
        cr_expect(strstr(err.message, want) == err.message, "'%s' lacks '%s'", err.message, want);
        cr_expect(strstr(err.message, "strip the prefix") != NULL, "%s", err.message);
        free(problems);
        refenc_st_free(&f);
        refenc_params_free(&q);
        ckpt_free(&c);
        /* control: without the prefix it loads, bit for bit */
        build(&c, &p0, REFENC_FAMILY_BERT, "");
        write_read(&f, &c, NULL, 0);
        cr_expect_eq(load(&q, &cfg, &f, NULL, NULL, &err), REFENC_OK, "%s", err.message);
        cr_expect(memcmp(p0.block, q.block, p0.n_values * sizeof(double)) == 0);
        refenc_st_free(&f);
        refenc_params_free(&q);
        ckpt_free(&c);
        refenc_params_free(&p0);
    }
    /* one unknown name among known ones: named itself */
    refenc_config cfg;
    refenc_params p0;
    small(&cfg, &p0, REFENC_FAMILY_BERT, 770);
    ckpt c;
    build(&c, &p0, REFENC_FAMILY_BERT, "");
    static const double x[3] = {1, 2, 3};
    const refenc_st_entry extra[] = {{"colour.weight", REFENC_ST_F64, 1, {3}, x}};
    expect_refused(&c, &cfg, extra, 1, "tensor 'colour.weight' (3) is not a parameter of a bert encoder", 1);
    ckpt_free(&c);
    refenc_params_free(&p0);
}

/* The same through `refenc run --weights` for nn.TransformerEncoder's own
 * names (the vaswani family): a state_dict saved from a wrapper
 * ("module." of DataParallel) is refused naming the prefix, exit 2; the
 * same file without it runs. */
Test(checkpoint_names, run_names_the_unknown_prefix_of_a_state_dict)
{
    char dir[] = "/tmp/refenc-ckpt-prefix-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cfg_path[96], w_path[96], args[512], out[8192], err[8192];
    snprintf(cfg_path, sizeof cfg_path, "%s/v.json", dir);
    snprintf(w_path, sizeof w_path, "%s/v.safetensors", dir);
    FILE *j = fopen(cfg_path, "w");
    cr_assert_not_null(j);
    fputs("{\"model\": {\"d_model\": 4, \"n_heads\": 2, \"d_ff\": 6, \"n_layers\": 2}, "
          "\"input\": {\"batch\": 1, \"seq_len\": 3}}", j);
    fclose(j);
    refenc_config cfg;
    refenc_config_family(&cfg, REFENC_FAMILY_VASWANI);
    cfg.d_model = D, cfg.n_heads = 2, cfg.d_ff = F, cfg.n_layers = N;
    refenc_params p;
    refenc_error e;
    cr_assert_eq(refenc_params_alloc(&p, &cfg, &e), REFENC_OK, "%s", e.message);
    gsl_rng *r = test_rng(780);
    refenc_params_init_random(&p, &cfg, r);
    gsl_rng_free(r);
    for (int prefixed = 1; prefixed >= 0; prefixed--) {
        refenc_st_entry ent[64];
        char names[64][128];
        cr_assert(p.n_tensors <= 64);
        for (size_t k = 0; k < p.n_tensors; k++) {
            snprintf(names[k], sizeof names[k], "%s%s", prefixed ? "module." : "", p.tensors[k].name);
            ent[k] = (refenc_st_entry){names[k], REFENC_ST_F64, p.tensors[k].ndim, {0}, p.tensors[k].data};
            memcpy(ent[k].shape, p.tensors[k].shape, p.tensors[k].ndim * sizeof(size_t));
        }
        cr_assert_eq(refenc_st_write(w_path, ent, p.n_tensors, NULL, &e), REFENC_OK, "%s", e.message);
        snprintf(args, sizeof args, "run --config %s --weights %s", cfg_path, w_path);
        const int status = run_cli(out, err, sizeof out, args);
        if (prefixed) {
            char want[512];
            snprintf(want, sizeof want, "refenc run: %s: all %zu tensors start with 'module.', which "
                     "nn.TransformerEncoder's state_dict names do not", w_path, p.n_tensors);
            cr_expect_eq(status, 2, "stderr: %s", err);
            cr_expect(strstr(err, want) == err, "'%s' lacks '%s'", err, want);
        } else {
            cr_expect_eq(status, 0, "without the prefix: %s", err);
        }
    }
    refenc_params_free(&p);
    char rm[160];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    cr_expect_eq(system(rm), 0);
}

/* ---- Llama, Mistral, Qwen2, Qwen3: LlamaModel's names -------------------------------- */

/* Adds tensor `name` holding rows [first, first + count) of refenc tensor src
 * (a weight (R, D) or a bias (R)): how modeling_llama's separate projections
 * sit in refenc's stacked in_proj and linear1. */
static void put_rows(ckpt *c, const refenc_params *p, const char *name_fmt, const char *src_fmt, size_t i,
                     size_t first, size_t count)
{
    put(c, p, name_fmt, src_fmt, i, AS_IS);
    refenc_st_entry *e = &c->e[c->n - 1];
    const size_t cols = e->ndim == 2 ? e->shape[1] : 1;
    memmove(c->data[c->n - 1], c->data[c->n - 1] + first * cols, count * cols * sizeof(double));
    e->shape[0] = count;
}

/* The family's file as LlamaModel.state_dict() saves it (modeling_llama.py:
 * q_proj (H Dh, D), k_proj and v_proj (Hkv Dh, D), o_proj (D, H Dh), mlp's
 * gate_proj and up_proj (F, D), down_proj (D, F); Qwen2's q/k/v biases,
 * Qwen3's q_norm and k_norm (Dh)), under pre. */
static void llama_file(ckpt *c, const refenc_params *p, const refenc_config *cfg, const char *pre)
{
    char f[160];
    const size_t Dh = refenc_config_head_dim(cfg), E = cfg->n_heads * Dh, Ekv = refenc_config_kv_heads(cfg) * Dh;
    const size_t Fh = cfg->d_ff, gate = cfg->glu_gate == REFENC_GLU_GATE_FIRST ? 0 : Fh, up = Fh - gate;
    const int qb = cfg->qkv_bias || cfg->linear_bias, lb = cfg->linear_bias;
    memset(c, 0, sizeof *c);
    size_t i = 0;
    P("embed_tokens.weight", "embedding.weight", AS_IS);
    for (i = 0; i < N; i++) {
        R("layers.%zu.self_attn.q_proj.weight", "layers.%zu.self_attn.in_proj_weight", 0, E);
        R("layers.%zu.self_attn.k_proj.weight", "layers.%zu.self_attn.in_proj_weight", E, Ekv);
        R("layers.%zu.self_attn.v_proj.weight", "layers.%zu.self_attn.in_proj_weight", E + Ekv, Ekv);
        if (qb) {
            R("layers.%zu.self_attn.q_proj.bias", "layers.%zu.self_attn.in_proj_bias", 0, E);
            R("layers.%zu.self_attn.k_proj.bias", "layers.%zu.self_attn.in_proj_bias", E, Ekv);
            R("layers.%zu.self_attn.v_proj.bias", "layers.%zu.self_attn.in_proj_bias", E + Ekv, Ekv);
        }
        P("layers.%zu.self_attn.o_proj.weight", "layers.%zu.self_attn.out_proj.weight", AS_IS);
        if (cfg->qk_norm == REFENC_QKNORM_RMS) {
            P("layers.%zu.self_attn.q_norm.weight", "layers.%zu.self_attn.q_norm.weight", AS_IS);
            P("layers.%zu.self_attn.k_norm.weight", "layers.%zu.self_attn.k_norm.weight", AS_IS);
        }
        R("layers.%zu.mlp.gate_proj.weight", "layers.%zu.linear1.weight", gate, Fh);
        R("layers.%zu.mlp.up_proj.weight", "layers.%zu.linear1.weight", up, Fh);
        P("layers.%zu.mlp.down_proj.weight", "layers.%zu.linear2.weight", AS_IS);
        if (lb) {
            P("layers.%zu.self_attn.o_proj.bias", "layers.%zu.self_attn.out_proj.bias", AS_IS);
            R("layers.%zu.mlp.gate_proj.bias", "layers.%zu.linear1.bias", gate, Fh);
            R("layers.%zu.mlp.up_proj.bias", "layers.%zu.linear1.bias", up, Fh);
            P("layers.%zu.mlp.down_proj.bias", "layers.%zu.linear2.bias", AS_IS);
        }
        P("layers.%zu.input_layernorm.weight", "layers.%zu.norm1.weight", AS_IS);
        P("layers.%zu.post_attention_layernorm.weight", "layers.%zu.norm2.weight", AS_IS);
    }
    P("norm.weight", "norm.weight", AS_IS);
}

/* A small config of a Llama-style family: D 8, 4 query heads over 2 KV heads;
 * variant 1: attention_bias and mlp_bias (linear_bias), 2: the gate second. */
static void small_llama(refenc_config *cfg, refenc_params *p, refenc_family fam, int variant, unsigned long stream)
{
    refenc_config_family(cfg, fam);
    cfg->d_model = 8, cfg->n_heads = 4, cfg->n_kv_heads = 2, cfg->d_ff = F, cfg->n_layers = N;
    cfg->vocab_size = 7, cfg->max_len = 5, cfg->sliding_window = cfg->sliding_window ? 3 : 0;
    cfg->head_dim = cfg->head_dim ? 4 : 0; /* Qwen3: H Dh = 16 != D */
    cfg->linear_bias = variant == 1;
    cfg->glu_gate = variant == 2 ? REFENC_GLU_GATE_SECOND : REFENC_GLU_GATE_FIRST;
    refenc_error err;
    cr_assert_eq(refenc_config_validate(cfg, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_params_alloc(p, cfg, &err), REFENC_OK, "%s", err.message);
    gsl_rng *r = test_rng(stream);
    refenc_params_init_random(p, cfg, r);
    gsl_rng_free(r);
}

/* Swaps the names of the file's tensors a and b. */
static void swap_names(ckpt *c, const char *a, const char *b)
{
    size_t ia = c->n, ib = c->n;
    for (size_t e = 0; e < c->n; e++) {
        ia = strstr(c->e[e].name, a) != NULL ? e : ia;
        ib = strstr(c->e[e].name, b) != NULL ? e : ib;
    }
    cr_assert(ia < c->n && ib < c->n, "no %s or %s in the file", a, b);
    const char *t = c->e[ia].name;
    c->e[ia].name = c->e[ib].name;
    c->e[ib].name = t;
}

/* Each family reads its LlamaModel file bit for bit, with and without the
 * model. prefix of *ForCausalLM (lm_head outside it ignored, the old
 * rotary_emb.inv_freq buffer inside); Llama also with attention_bias and
 * mlp_bias (linear_bias) and with the gate second.  Negative control: layer
 * 0's gate_proj and up_proj swapped load other parameters. */
Test(checkpoint_names, llama_families_load_their_checkpoints_bit_for_bit)
{
    static const double head[3] = {1, 2, 3}, inv_freq[2] = {1, 0.01};
    const refenc_st_entry extra[] = {{"lm_head.weight", REFENC_ST_F64, 1, {3}, head},
                                     {"model.layers.1.self_attn.rotary_emb.inv_freq", REFENC_ST_F64, 1, {2},
                                      inv_freq}};
    const refenc_family fams[] = {REFENC_FAMILY_LLAMA, REFENC_FAMILY_MISTRAL, REFENC_FAMILY_QWEN2,
                                  REFENC_FAMILY_QWEN3, REFENC_FAMILY_LLAMA, REFENC_FAMILY_LLAMA};
    for (size_t k = 0; k < sizeof fams / sizeof fams[0]; k++) {
        for (int with_prefix = 0; with_prefix < 2; with_prefix++) {
            refenc_config cfg;
            refenc_params p0, p1;
            small_llama(&cfg, &p0, fams[k], k < 4 ? 0 : (int)k - 3, 760 + k);
            ckpt c;
            llama_file(&c, &p0, &cfg, with_prefix ? "model." : "");
            refenc_st_file f;
            write_read(&f, &c, extra, with_prefix ? 2 : 0);
            refenc_ck_report rep;
            refenc_error err;
            const char *name = refenc_family_name(fams[k]);
            cr_expect_eq(load(&p1, &cfg, &f, &rep, NULL, &err), REFENC_OK, "%s (%zu): %s", name, k, err.message);
            cr_expect_eq(rep.mapped, c.n, "%s (%zu): %zu tensors mapped of %zu", name, k, rep.mapped, c.n);
            cr_expect(rep.ignored_outside == (size_t)with_prefix && rep.ignored_buffers == (size_t)with_prefix,
                      "%s (%zu): %zu outside, %zu buffers", name, k, rep.ignored_outside, rep.ignored_buffers);
            cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) == 0,
                      "%s (%zu%s): the parameters differ from the ones written", name, k,
                      with_prefix ? ", with its prefix" : "");
            refenc_st_free(&f);
            refenc_params_free(&p1);

            swap_names(&c, "layers.0.mlp.gate_proj.weight", "layers.0.mlp.up_proj.weight");
            write_read(&f, &c, NULL, 0);
            cr_expect_eq(load(&p1, &cfg, &f, NULL, NULL, &err), REFENC_OK, "%s", err.message);
            cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) != 0,
                      "%s (%zu): gate_proj and up_proj swapped loaded the same parameters", name, k);
            refenc_st_free(&f);
            refenc_params_free(&p1);
            ckpt_free(&c);
            refenc_params_free(&p0);
        }
    }
}

/* A Llama file that does not fit: a k_proj of H Dh rows (a loader that
 * ignores grouped-query attention), a missing up_proj, Qwen2's q bias in a
 * Llama config, each named with its shapes and the rows it fills. */
Test(checkpoint_names, llama_tensors_that_do_not_fit_are_named)
{
    refenc_config cfg;
    refenc_params p0;
    small_llama(&cfg, &p0, REFENC_FAMILY_LLAMA, 0, 780);
    ckpt c;
    llama_file(&c, &p0, &cfg, "model.");
    static double big[8 * 8];
    refenc_st_entry keep = c.e[2]; /* layer 0's k_proj */
    cr_assert_str_eq(keep.name, "model.layers.0.self_attn.k_proj.weight");
    c.e[2].shape[0] = 8, c.e[2].data = big;
    expect_refused(&c, &cfg, NULL, 0,
                   "tensor 'model.layers.0.self_attn.k_proj.weight' has shape (8, 8), expected (4, 8) (refenc's "
                   "'layers.0.self_attn.in_proj_weight', rows [H Dh, H Dh + Hkv Dh))", 1);
    c.e[2] = keep;

    refenc_st_entry up = c.e[6]; /* layer 0's up_proj, dropped */
    cr_assert_str_eq(up.name, "model.layers.0.mlp.up_proj.weight");
    c.e[6] = c.e[--c.n];
    expect_refused(&c, &cfg, NULL, 0,
                   "tensor 'model.layers.0.mlp.up_proj.weight' (6, 8) is missing (refenc's 'layers.0.linear1.weight', "
                   "rows [F, 2F))", 1);
    c.e[c.n++] = c.e[6], c.e[6] = up;

    const refenc_st_entry bias[] = {{"model.layers.0.self_attn.q_proj.bias", REFENC_ST_F64, 1, {8}, big}};
    expect_refused(&c, &cfg, bias, 1,
                   "tensor 'model.layers.0.self_attn.q_proj.bias' (8) maps to refenc's "
                   "'layers.0.self_attn.in_proj_bias', which this config does not have", 1);
    ckpt_free(&c);
    refenc_params_free(&p0);
}

/* ---- T5: T5EncoderModel's names ------------------------------------------------------- */

/* The file as T5EncoderModel saves it (modeling_t5.py: shared (V, D); per
 * block layer.0.SelfAttention.q, k, v (H d_kv, D), o (D, H d_kv), block 0's
 * relative_attention_bias (nb, H), layer.0/1.layer_norm (D); layer.1's
 * DenseReluDense wi (F, D), or v1.1's wi_0 (the gelu_new half) and wi_1, wo
 * (D, F); encoder.final_layer_norm), typed from that file's shapes. */
static void t5_file(ckpt *c, const refenc_params *p, const refenc_config *cfg)
{
    const size_t E = cfg->n_heads * refenc_config_head_dim(cfg), Fh = cfg->d_ff;
    memset(c, 0, sizeof *c);
    size_t i = 0;
    put(c, p, "shared.weight", "embedding.weight", 0, AS_IS);
    for (i = 0; i < N; i++) {
        put(c, p, "encoder.block.%zu.layer.0.layer_norm.weight", "layers.%zu.norm1.weight", i, AS_IS);
        put_rows(c, p, "encoder.block.%zu.layer.0.SelfAttention.q.weight", "layers.%zu.self_attn.in_proj_weight", i,
                 0, E);
        put_rows(c, p, "encoder.block.%zu.layer.0.SelfAttention.k.weight", "layers.%zu.self_attn.in_proj_weight", i,
                 E, E);
        put_rows(c, p, "encoder.block.%zu.layer.0.SelfAttention.v.weight", "layers.%zu.self_attn.in_proj_weight", i,
                 2 * E, E);
        put(c, p, "encoder.block.%zu.layer.0.SelfAttention.o.weight", "layers.%zu.self_attn.out_proj.weight", i,
            AS_IS);
        if (i == 0)
            put(c, p, "encoder.block.%zu.layer.0.SelfAttention.relative_attention_bias.weight",
                "layers.%zu.self_attn.relative_attention_bias.weight", i, AS_IS);
        put(c, p, "encoder.block.%zu.layer.1.layer_norm.weight", "layers.%zu.norm2.weight", i, AS_IS);
        if (cfg->ffn_type == REFENC_FFN_GLU) {
            put_rows(c, p, "encoder.block.%zu.layer.1.DenseReluDense.wi_0.weight", "layers.%zu.linear1.weight", i,
                     0, Fh);
            put_rows(c, p, "encoder.block.%zu.layer.1.DenseReluDense.wi_1.weight", "layers.%zu.linear1.weight", i,
                     Fh, Fh);
        } else {
            put(c, p, "encoder.block.%zu.layer.1.DenseReluDense.wi.weight", "layers.%zu.linear1.weight", i, AS_IS);
        }
        put(c, p, "encoder.block.%zu.layer.1.DenseReluDense.wo.weight", "layers.%zu.linear2.weight", i, AS_IS);
    }
    put(c, p, "encoder.final_layer_norm.weight", "norm.weight", 0, AS_IS);
}

/* t5-encoder, v1.0 (wi) and v1.1 (wi_0, wi_1, ffn_type glu), also with
 * head_dim (d_kv) other than D / H as t5-11b has it: the file loads bit for
 * bit; a T5ForConditionalGeneration file's decoder, LM head and the tied
 * encoder.embed_tokens are ignored as buffers.  Negative control: wi_0 and
 * wi_1 swapped load other parameters.  A relative_attention_bias in block 1
 * (a port that gives every block its table) is refused naming the key. */
Test(checkpoint_names, t5_encoder_loads_its_checkpoint_bit_for_bit)
{
    static const double v[64] = {0.25, -1.5, 3.125};
    const refenc_st_entry extra[] = {{"lm_head.weight", REFENC_ST_F64, 2, {7, 4}, v},
                                     {"encoder.embed_tokens.weight", REFENC_ST_F64, 2, {7, 4}, v},
                                     {"decoder.block.1.layer.1.EncDecAttention.q.weight", REFENC_ST_F64, 2, {4, 4}, v},
                                     {"decoder.block.0.layer.2.DenseReluDense.wi_1.weight", REFENC_ST_F64, 2, {6, 4},
                                      v}};
    for (int variant = 0; variant < 3; variant++) {
        refenc_config cfg;
        refenc_params p0, p1;
        refenc_config_family(&cfg, REFENC_FAMILY_T5_ENCODER);
        cfg.d_model = D, cfg.n_heads = 2, cfg.d_ff = F, cfg.n_layers = N, cfg.vocab_size = 7, cfg.max_len = 5;
        cfg.ffn_type = variant >= 1 ? REFENC_FFN_GLU : REFENC_FFN_MLP;
        cfg.activation = variant >= 1 ? REFENC_ACT_GELU_TANH : REFENC_ACT_RELU;
        cfg.head_dim = variant == 2 ? 3 : 0; /* H d_kv = 6 != D */
        refenc_error err;
        cr_assert_eq(refenc_config_validate(&cfg, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(refenc_params_alloc(&p0, &cfg, &err), REFENC_OK, "%s", err.message);
        gsl_rng *r = test_rng(790 + (unsigned long)variant);
        refenc_params_init_random(&p0, &cfg, r);
        gsl_rng_free(r);
        ckpt c;
        t5_file(&c, &p0, &cfg);
        refenc_st_file f;
        write_read(&f, &c, extra, 4);
        refenc_ck_report rep;
        cr_expect_eq(load(&p1, &cfg, &f, &rep, NULL, &err), REFENC_OK, "variant %d: %s", variant, err.message);
        cr_expect(rep.mapped == c.n && rep.ignored_buffers == 4, "variant %d: %zu mapped of %zu, %zu ignored",
                  variant, rep.mapped, c.n, rep.ignored_buffers);
        cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) == 0,
                  "variant %d: the parameters differ from the ones written", variant);
        refenc_st_free(&f);
        refenc_params_free(&p1);
        if (variant == 1) {
            swap_names(&c, "block.0.layer.1.DenseReluDense.wi_0", "block.0.layer.1.DenseReluDense.wi_1");
            write_read(&f, &c, NULL, 0);
            cr_expect_eq(load(&p1, &cfg, &f, NULL, NULL, &err), REFENC_OK, "%s", err.message);
            cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) != 0,
                      "wi_0 and wi_1 swapped loaded the same parameters");
            refenc_st_free(&f);
            refenc_params_free(&p1);
        }
        if (variant == 0) {
            const refenc_st_entry per_layer[] = {
                {"encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight", REFENC_ST_F64, 2, {32, 2},
                 v}};
            expect_refused(&c, &cfg, per_layer, 1,
                           "tensor 'encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight' (32, 2) "
                           "maps to refenc's 'layers.1.self_attn.relative_attention_bias.weight', which this config "
                           "does not have",
                           1);
        }
        ckpt_free(&c);
        refenc_params_free(&p0);
    }
}

/* ---- NomicBERT: NomicBertModel's names ------------------------------------------------ */

/* The file as NomicBertModel saves it (contrastors' modeling_hf_nomic_bert.py:
 * word and token-type embeddings, emb_ln; per layer attn.Wqkv (3D, D) [q; k; v],
 * attn.out_proj, norm1, mlp.fc11 and mlp.fc12 (F, D) with fc12 the silu-activated
 * one, mlp.fc2 (D, F), norm2; the biases of the linears with linear_bias),
 * typed from that file's shapes. */
static void nomic_file(ckpt *c, const refenc_params *p, const refenc_config *cfg, const char *pre)
{
    char f[160];
    const size_t Fh = cfg->d_ff;
    memset(c, 0, sizeof *c);
    size_t i = 0;
    P("embeddings.word_embeddings.weight", "embedding.weight", AS_IS);
    P("embeddings.token_type_embeddings.weight", "token_type_embedding.weight", AS_IS);
    P("emb_ln.weight", "embedding_norm.weight", AS_IS);
    P("emb_ln.bias", "embedding_norm.bias", AS_IS);
    for (i = 0; i < N; i++) {
        P("encoder.layers.%zu.attn.Wqkv.weight", "layers.%zu.self_attn.in_proj_weight", AS_IS);
        P("encoder.layers.%zu.attn.out_proj.weight", "layers.%zu.self_attn.out_proj.weight", AS_IS);
        P("encoder.layers.%zu.norm1.weight", "layers.%zu.norm1.weight", AS_IS);
        P("encoder.layers.%zu.norm1.bias", "layers.%zu.norm1.bias", AS_IS);
        R("encoder.layers.%zu.mlp.fc12.weight", "layers.%zu.linear1.weight", 0, Fh);
        R("encoder.layers.%zu.mlp.fc11.weight", "layers.%zu.linear1.weight", Fh, Fh);
        P("encoder.layers.%zu.mlp.fc2.weight", "layers.%zu.linear2.weight", AS_IS);
        if (cfg->linear_bias) {
            P("encoder.layers.%zu.attn.Wqkv.bias", "layers.%zu.self_attn.in_proj_bias", AS_IS);
            P("encoder.layers.%zu.attn.out_proj.bias", "layers.%zu.self_attn.out_proj.bias", AS_IS);
            R("encoder.layers.%zu.mlp.fc12.bias", "layers.%zu.linear1.bias", 0, Fh);
            R("encoder.layers.%zu.mlp.fc11.bias", "layers.%zu.linear1.bias", Fh, Fh);
            P("encoder.layers.%zu.mlp.fc2.bias", "layers.%zu.linear2.bias", AS_IS);
        }
        P("encoder.layers.%zu.norm2.weight", "layers.%zu.norm2.weight", AS_IS);
        P("encoder.layers.%zu.norm2.bias", "layers.%zu.norm2.bias", AS_IS);
    }
}

/* The file as JinaBertModel saves it (jina-bert-implementation's
 * modeling_bert.py; candle's jina_bert.rs): BERT's embeddings without
 * positions, BERT's attention names; mlp.gated_layers (2F, D) as linear1 (its
 * bias only under linear1_bias), mlp.wo, mlp.layernorm. */
static void jina_file(ckpt *c, const refenc_params *p, const refenc_config *cfg, const char *pre)
{
    char f[160];
    memset(c, 0, sizeof *c);
    size_t i = 0;
    P("embeddings.word_embeddings.weight", "embedding.weight", AS_IS);
    P("embeddings.token_type_embeddings.weight", "token_type_embedding.weight", AS_IS);
    P("embeddings.LayerNorm.weight", "embedding_norm.weight", AS_IS);
    P("embeddings.LayerNorm.bias", "embedding_norm.bias", AS_IS);
    for (i = 0; i < N; i++) {
        P("encoder.layer.%zu.attention.self.query.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_Q);
        P("encoder.layer.%zu.attention.self.query.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_Q);
        P("encoder.layer.%zu.attention.self.key.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_K);
        P("encoder.layer.%zu.attention.self.key.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_K);
        P("encoder.layer.%zu.attention.self.value.weight", "layers.%zu.self_attn.in_proj_weight", ROWS_V);
        P("encoder.layer.%zu.attention.self.value.bias", "layers.%zu.self_attn.in_proj_bias", ROWS_V);
        P("encoder.layer.%zu.attention.output.dense.weight", "layers.%zu.self_attn.out_proj.weight", AS_IS);
        P("encoder.layer.%zu.attention.output.dense.bias", "layers.%zu.self_attn.out_proj.bias", AS_IS);
        P("encoder.layer.%zu.attention.output.LayerNorm.weight", "layers.%zu.norm1.weight", AS_IS);
        P("encoder.layer.%zu.attention.output.LayerNorm.bias", "layers.%zu.norm1.bias", AS_IS);
        P("encoder.layer.%zu.mlp.gated_layers.weight", "layers.%zu.linear1.weight", AS_IS);
        if (cfg->linear1_bias)
            P("encoder.layer.%zu.mlp.gated_layers.bias", "layers.%zu.linear1.bias", AS_IS);
        P("encoder.layer.%zu.mlp.wo.weight", "layers.%zu.linear2.weight", AS_IS);
        P("encoder.layer.%zu.mlp.wo.bias", "layers.%zu.linear2.bias", AS_IS);
        P("encoder.layer.%zu.mlp.layernorm.weight", "layers.%zu.norm2.weight", AS_IS);
        P("encoder.layer.%zu.mlp.layernorm.bias", "layers.%zu.norm2.bias", AS_IS);
    }
}
#undef R
#undef P

/* nomic-bert reads its NomicBertModel file bit for bit, with and without the
 * bert. prefix of NomicBertForPreTraining (its cls head outside ignored, the
 * pooler inside), bias-free as the preset and with every bias.  Negative
 * control: layer 0's fc11 and fc12 swapped (the gate read from the other
 * matrix) load other parameters. */
Test(checkpoint_names, nomic_bert_loads_its_checkpoint_bit_for_bit)
{
    static const double v[64] = {0.5, -2.25};
    const refenc_st_entry extra[] = {{"cls.predictions.decoder.weight", REFENC_ST_F64, 2, {7, 4}, v},
                                     {"bert.pooler.dense.bias", REFENC_ST_F64, 1, {4}, v}};
    for (int variant = 0; variant < 4; variant++) {
        const int with_prefix = variant & 1, biased = variant >> 1;
        refenc_config cfg;
        refenc_params p0, p1;
        refenc_config_family(&cfg, REFENC_FAMILY_NOMIC_BERT);
        cfg.d_model = D, cfg.n_heads = 2, cfg.d_ff = F, cfg.n_layers = N, cfg.vocab_size = 7, cfg.max_len = 5;
        cfg.linear_bias = biased;
        refenc_error err;
        cr_assert_eq(refenc_config_validate(&cfg, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(refenc_params_alloc(&p0, &cfg, &err), REFENC_OK, "%s", err.message);
        gsl_rng *r = test_rng(800 + (unsigned long)variant);
        refenc_params_init_random(&p0, &cfg, r);
        gsl_rng_free(r);
        ckpt c;
        nomic_file(&c, &p0, &cfg, with_prefix ? "bert." : "");
        refenc_st_file f;
        write_read(&f, &c, extra, with_prefix ? 2 : 0);
        refenc_ck_report rep;
        cr_expect_eq(load(&p1, &cfg, &f, &rep, NULL, &err), REFENC_OK, "variant %d: %s", variant, err.message);
        cr_expect(rep.mapped == c.n && rep.ignored_outside == (size_t)with_prefix &&
                      rep.ignored_buffers == (size_t)with_prefix,
                  "variant %d: %zu mapped of %zu, %zu outside, %zu buffers", variant, rep.mapped, c.n,
                  rep.ignored_outside, rep.ignored_buffers);
        cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) == 0,
                  "variant %d: the parameters differ from the ones written", variant);
        refenc_st_free(&f);
        refenc_params_free(&p1);
        swap_names(&c, "layers.0.mlp.fc11.weight", "layers.0.mlp.fc12.weight");
        write_read(&f, &c, NULL, 0);
        cr_expect_eq(load(&p1, &cfg, &f, NULL, NULL, &err), REFENC_OK, "%s", err.message);
        cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) != 0,
                  "variant %d: fc11 and fc12 swapped loaded the same parameters", variant);
        refenc_st_free(&f);
        refenc_params_free(&p1);
        ckpt_free(&c);
        refenc_params_free(&p0);
    }
}

/* ---- Jina-v2: JinaBertModel's names ---------------------------------------------------- */

/* jina-bert-v2 reads its JinaBertModel file bit for bit, with and without the
 * bert. prefix of JinaBertForMaskedLM (its cls head outside ignored, the
 * pooler inside), gated_layers bias-free as the preset and biased.  Negative
 * control: layer 0's two LayerNorms swapped (the attention's read as the
 * MLP's) load other parameters. */
Test(checkpoint_names, jina_bert_v2_loads_its_checkpoint_bit_for_bit)
{
    static const double v[64] = {0.5, -2.25};
    const refenc_st_entry extra[] = {{"cls.predictions.decoder.weight", REFENC_ST_F64, 2, {7, 4}, v},
                                     {"bert.pooler.dense.bias", REFENC_ST_F64, 1, {4}, v}};
    for (int variant = 0; variant < 4; variant++) {
        const int with_prefix = variant & 1, biased = variant >> 1;
        refenc_config cfg;
        refenc_params p0, p1;
        refenc_config_family(&cfg, REFENC_FAMILY_JINA_BERT_V2);
        cfg.d_model = D, cfg.n_heads = 2, cfg.d_ff = F, cfg.n_layers = N, cfg.vocab_size = 7, cfg.max_len = 5;
        cfg.linear1_bias = biased;
        refenc_error err;
        cr_assert_eq(refenc_config_validate(&cfg, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(refenc_params_alloc(&p0, &cfg, &err), REFENC_OK, "%s", err.message);
        gsl_rng *r = test_rng(820 + (unsigned long)variant);
        refenc_params_init_random(&p0, &cfg, r);
        gsl_rng_free(r);
        ckpt c;
        jina_file(&c, &p0, &cfg, with_prefix ? "bert." : "");
        refenc_st_file f;
        write_read(&f, &c, extra, with_prefix ? 2 : 0);
        refenc_ck_report rep;
        cr_expect_eq(load(&p1, &cfg, &f, &rep, NULL, &err), REFENC_OK, "variant %d: %s", variant, err.message);
        cr_expect(rep.mapped == c.n && rep.ignored_outside == (size_t)with_prefix &&
                      rep.ignored_buffers == (size_t)with_prefix,
                  "variant %d: %zu mapped of %zu, %zu outside, %zu buffers", variant, rep.mapped, c.n,
                  rep.ignored_outside, rep.ignored_buffers);
        cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) == 0,
                  "variant %d: the parameters differ from the ones written", variant);
        refenc_st_free(&f);
        refenc_params_free(&p1);
        swap_names(&c, "encoder.layer.0.attention.output.LayerNorm.weight", "encoder.layer.0.mlp.layernorm.weight");
        write_read(&f, &c, NULL, 0);
        cr_expect_eq(load(&p1, &cfg, &f, NULL, NULL, &err), REFENC_OK, "%s", err.message);
        cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) != 0,
                  "variant %d: the two LayerNorms swapped loaded the same parameters", variant);
        refenc_st_free(&f);
        refenc_params_free(&p1);
        ckpt_free(&c);
        refenc_params_free(&p0);
    }
}

/* ---- GTE: NewModel's names -------------------------------------------------------------- */

/* The file as GTE's NewModel saves it (Alibaba-NLP/new-impl modeling.py: word
 * (and, with type_vocab_size > 0, token-type) embeddings, embeddings.LayerNorm;
 * per layer attention.qkv_proj (3D, D) [q; k; v] and o_proj with biases, attn_ln,
 * mlp.up_gate_proj (2F, D) [up; gate] without bias, mlp.down_proj with bias,
 * mlp_ln). */
static void gte_file(ckpt *c, const refenc_params *p, const refenc_config *cfg, const char *pre)
{
    char f[160];
    memset(c, 0, sizeof *c);
#define P(name, src)                                              \
    do {                                                          \
        snprintf(f, sizeof f, "%s%s", pre, name);                 \
        put(c, p, f, src, i, AS_IS);                              \
    } while (0)
    size_t i = 0;
    P("embeddings.word_embeddings.weight", "embedding.weight");
    if (cfg->type_vocab_size > 0)
        P("embeddings.token_type_embeddings.weight", "token_type_embedding.weight");
    P("embeddings.LayerNorm.weight", "embedding_norm.weight");
    P("embeddings.LayerNorm.bias", "embedding_norm.bias");
    for (i = 0; i < N; i++) {
        P("encoder.layer.%zu.attention.qkv_proj.weight", "layers.%zu.self_attn.in_proj_weight");
        P("encoder.layer.%zu.attention.qkv_proj.bias", "layers.%zu.self_attn.in_proj_bias");
        P("encoder.layer.%zu.attention.o_proj.weight", "layers.%zu.self_attn.out_proj.weight");
        P("encoder.layer.%zu.attention.o_proj.bias", "layers.%zu.self_attn.out_proj.bias");
        P("encoder.layer.%zu.attn_ln.weight", "layers.%zu.norm1.weight");
        P("encoder.layer.%zu.attn_ln.bias", "layers.%zu.norm1.bias");
        P("encoder.layer.%zu.mlp.up_gate_proj.weight", "layers.%zu.linear1.weight");
        P("encoder.layer.%zu.mlp.down_proj.weight", "layers.%zu.linear2.weight");
        P("encoder.layer.%zu.mlp.down_proj.bias", "layers.%zu.linear2.bias");
        P("encoder.layer.%zu.mlp_ln.weight", "layers.%zu.norm2.weight");
        P("encoder.layer.%zu.mlp_ln.bias", "layers.%zu.norm2.bias");
    }
#undef P
}

/* gte reads its NewModel file bit for bit, with and without the new. prefix of
 * NewForMaskedLM (its lm_head outside ignored, the pooler inside), with
 * gte-base's no token types and gte-large's two.  Negative controls: layer 0's
 * attn_ln and mlp_ln swapped load other parameters; an up_gate_proj.bias (a
 * port that gave the GLU a bias) is refused, naming the tensor. */
Test(checkpoint_names, gte_loads_its_checkpoint_bit_for_bit)
{
    static const double v[64] = {0.5, -2.25};
    const refenc_st_entry extra[] = {{"lm_head.decoder.weight", REFENC_ST_F64, 2, {7, 4}, v},
                                     {"new.pooler.dense.bias", REFENC_ST_F64, 1, {4}, v}};
    for (int variant = 0; variant < 4; variant++) {
        const int with_prefix = variant & 1;
        refenc_config cfg;
        refenc_params p0, p1;
        refenc_config_family(&cfg, REFENC_FAMILY_GTE);
        cfg.d_model = D, cfg.n_heads = 2, cfg.d_ff = F, cfg.n_layers = N, cfg.vocab_size = 7, cfg.max_len = 5;
        cfg.type_vocab_size = (size_t)(variant >> 1) * 2;
        refenc_error err;
        cr_assert_eq(refenc_config_validate(&cfg, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(refenc_params_alloc(&p0, &cfg, &err), REFENC_OK, "%s", err.message);
        gsl_rng *r = test_rng(900 + (unsigned long)variant);
        refenc_params_init_random(&p0, &cfg, r);
        gsl_rng_free(r);
        ckpt c;
        gte_file(&c, &p0, &cfg, with_prefix ? "new." : "");
        refenc_st_file f;
        write_read(&f, &c, extra, with_prefix ? 2 : 0);
        refenc_ck_report rep;
        cr_expect_eq(load(&p1, &cfg, &f, &rep, NULL, &err), REFENC_OK, "variant %d: %s", variant, err.message);
        cr_expect(rep.mapped == c.n && rep.ignored_outside == (size_t)with_prefix &&
                      rep.ignored_buffers == (size_t)with_prefix,
                  "variant %d: %zu mapped of %zu, %zu outside, %zu buffers", variant, rep.mapped, c.n,
                  rep.ignored_outside, rep.ignored_buffers);
        cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) == 0,
                  "variant %d: the parameters differ from the ones written", variant);
        refenc_st_free(&f);
        refenc_params_free(&p1);
        swap_names(&c, "encoder.layer.0.attn_ln.weight", "encoder.layer.0.mlp_ln.weight");
        write_read(&f, &c, NULL, 0);
        cr_expect_eq(load(&p1, &cfg, &f, NULL, NULL, &err), REFENC_OK, "%s", err.message);
        cr_expect(memcmp(p0.block, p1.block, p0.n_values * sizeof(double)) != 0,
                  "variant %d: attn_ln and mlp_ln swapped loaded the same parameters", variant);
        refenc_st_free(&f);
        refenc_params_free(&p1);
        const refenc_st_entry glu_bias[] = {{with_prefix ? "new.encoder.layer.0.mlp.up_gate_proj.bias"
                                                         : "encoder.layer.0.mlp.up_gate_proj.bias",
                                             REFENC_ST_F64, 1, {2 * F}, v}};
        write_read(&f, &c, glu_bias, 1);
        cr_expect_neq(load(&p1, &cfg, &f, NULL, NULL, &err), REFENC_OK, "variant %d: up_gate_proj.bias loaded", variant);
        cr_expect(strstr(err.message, "encoder.layer.0.mlp.up_gate_proj.bias") != NULL, "%s", err.message);
        refenc_st_free(&f);
        refenc_params_free(&p1);
        ckpt_free(&c);
        refenc_params_free(&p0);
    }
}
