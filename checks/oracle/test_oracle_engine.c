/* The oracle's one forward engine (refenc_mp_encoder_run, ref/oracle/engine.c):
 * the threads and the cut into units change no bit, for every norm
 * placement, positional scheme, mask, input kind and family; per layer, each
 * layer's outputs are those of a one-layer encoder run on the stored input;
 * an item that needs more precision escalates alone; the bug variants'
 * hooks change what they should and nothing else; one evaluation at a high
 * precision rounds to the certified doubles; the memory estimate bounds
 * what a run allocates.  (The values themselves are checked against the
 * reference's running error bounds in accuracy_stack, and against the
 * committed golden files by golden-verify.) */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>

#include "../../ref/oracle/oracle.h"
#include "../../ref/refenc.h"
#include "../../ref/tool/random_params.h"
#include "../common/testutil.h"

#define MAX_STEPS 64

/* Every step of an encoder, full tensors, by name. */
typedef struct {
    size_t n;
    char name[MAX_STEPS][64];
    size_t numel[MAX_STEPS];
    double *data[MAX_STEPS];
    size_t B;
} steps;

static double *find(steps *s, const char *name, size_t numel)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0)
            return s->data[i];
    cr_assert_lt(s->n, MAX_STEPS);
    snprintf(s->name[s->n], 64, "%s", name);
    s->numel[s->n] = numel;
    s->data[s->n] = calloc(numel, sizeof(double));
    return s->data[s->n++];
}

static size_t numel_of(const steps *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0)
            return s->numel[i];
    return 0;
}

static void from_trace(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    memcpy(find(ctx, name, n), data, n * sizeof(double));
}

static void from_emit(void *ctx, const char *name, size_t item, const double *data, size_t ndim,
                      const size_t *shape)
{
    steps *s = ctx;
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    memcpy(find(s, name, n * s->B) + item * n, data, n * sizeof(double));
}

static void steps_free(steps *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->data[i]);
    memset(s, 0, sizeof *s);
}

/* Every step of `got` is bit for bit the same step of `want`; returns the
 * number of steps compared. */
static size_t same_steps(steps *got, steps *want, const char *what)
{
    size_t compared = 0;
    for (size_t i = 0; i < got->n; i++) {
        double *w = NULL;
        for (size_t j = 0; j < want->n; j++)
            if (strcmp(want->name[j], got->name[i]) == 0)
                w = want->data[j];
        cr_assert_not_null(w, "%s: step %s missing from the reference run", what, got->name[i]);
        for (size_t k = 0; k < got->numel[i]; k++)
            cr_assert(memcmp(&got->data[i][k], &w[k], sizeof(double)) == 0,
                      "%s: %s[%zu]: %a (%.17g), want %a (%.17g)", what, got->name[i], k, got->data[i][k],
                      got->data[i][k], w[k], w[k]);
        compared++;
    }
    return compared;
}

typedef struct {
    refenc_config cfg;
    refenc_params p;
    size_t B, L;
    double *x, *attn_mask;
    int64_t *tokens, *positions;
    uint8_t *mask;
    refenc_input in;
} model;

static void model_make(model *m, const refenc_config *cfg, size_t B, size_t L, int with_mask,
                       int with_attn_mask, unsigned long stream)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->B = B, m->L = L;
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&m->p, cfg, &err), REFENC_OK, "%s", err.message);
    gsl_rng *r = test_rng(stream);
    refenc_params_init_random(&m->p, cfg, r);
    const size_t D = cfg->d_model;
    if (cfg->vocab_size > 0) {
        m->tokens = malloc(B * L * sizeof *m->tokens);
        for (size_t i = 0; i < B * L; i++)
            m->tokens[i] = (int64_t)gsl_rng_uniform_int(r, cfg->vocab_size);
    } else {
        m->x = malloc(B * L * D * sizeof *m->x);
        test_fill_gaussian(m->x, B * L * D, 0.2, 1.3, r);
    }
    if (with_mask) { /* item b has b padded positions at the end */
        m->mask = calloc(B * L, 1);
        for (size_t b = 0; b < B; b++)
            for (size_t l = L - (b < L ? b : L - 1); l < L; l++)
                m->mask[b * L + l] = 1;
    }
    if (with_attn_mask) {
        m->attn_mask = malloc(L * L * sizeof *m->attn_mask);
        for (size_t i = 0; i < L * L; i++)
            m->attn_mask[i] = i % 7 == 3 ? -INFINITY : gsl_ran_gaussian(r, 0.5);
    }
    m->positions = malloc(L * sizeof *m->positions);
    for (size_t l = 0; l < L; l++)
        m->positions[l] = (int64_t)(3 * l + 2);
    m->in = (refenc_input){.B = B, .L = L, .tokens = m->tokens, .x = m->x, .key_padding_mask = m->mask,
                           .positions = m->positions, .attn_mask = m->attn_mask};
    gsl_rng_free(r);
}

static void model_free(model *m)
{
    refenc_params_free(&m->p);
    free(m->x), free(m->attn_mask), free(m->tokens), free(m->positions), free(m->mask);
}

/* The certified run of refenc_mp_encoder_forward (one thread, every unit): every step. */
static void reference_steps(steps *s, const model *m)
{
    memset(s, 0, sizeof *s);
    double *y = malloc(m->B * m->L * m->cfg.d_model * sizeof *y);
    const refenc_trace tr = {from_trace, s};
    refenc_mp_report rep;
    const int st = refenc_mp_encoder_forward(y, &m->p, &m->cfg, &m->in, &tr, REFENC_MP_PREC_DEFAULT, &rep);
    cr_assert_eq(st, REFENC_OK, "%s", rep.error.message);
    free(y);
}

static void run_steps(steps *s, const model *m, int threads, const double *const *layer_inputs,
                      size_t begin, size_t end, refenc_mp_report *rep)
{
    if (s->B == 0) {
        memset(s, 0, sizeof *s);
        s->B = m->B;
    }
    const refenc_mp_run run = {.cfg = &m->cfg, .params = &m->p, .in = &m->in, .layer_inputs = layer_inputs,
                               .unit_begin = begin, .unit_end = end, .emit = from_emit, .emit_ctx = s,
                               .prec = REFENC_MP_PREC_DEFAULT, .threads = threads};
    const int st = refenc_mp_encoder_run(&run, rep);
    cr_assert_eq(st, REFENC_OK, "%s", rep->error.message);
}

Test(oracle_engine, threads_and_units_change_no_bit, .timeout = 120)
{
    struct {
        const char *what;
        refenc_norm_placement norm;
        refenc_positional pos;
        refenc_activation act;
        size_t vocab, H;
        int mask, attn_mask, causal;
    } variants[] = {
        {"pre-LN, RoPE, padding", REFENC_NORM_PRE, REFENC_POS_ROPE, REFENC_ACT_GELU, 0, 2, 1, 0, 0},
        {"post-LN, ALiBi 3 heads, causal", REFENC_NORM_POST, REFENC_POS_ALIBI, REFENC_ACT_RELU, 0, 3, 0, 0, 1},
        {"pre-LN, tokens, sinusoidal, additive mask", REFENC_NORM_PRE, REFENC_POS_SINUSOIDAL, REFENC_ACT_GELU_TANH, 11, 2, 1, 1, 0},
        {"post-LN, learned PE", REFENC_NORM_POST, REFENC_POS_LEARNED, REFENC_ACT_GELU, 0, 1, 1, 0, 0},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        refenc_config cfg;
        refenc_config_default(&cfg);
        cfg.d_model = 12, cfg.n_heads = variants[v].H, cfg.d_ff = 18, cfg.n_layers = 2;
        cfg.norm = variants[v].norm, cfg.final_norm = variants[v].norm == REFENC_NORM_PRE;
        cfg.positional = variants[v].pos, cfg.activation = variants[v].act, cfg.causal = variants[v].causal;
        cfg.vocab_size = variants[v].vocab, cfg.max_len = 32;
        model m;
        model_make(&m, &cfg, 3, 5, variants[v].mask, variants[v].attn_mask, 10 + v);
        steps want, got1 = {0}, got3 = {0};
        reference_steps(&want, &m);
        refenc_mp_report rep;
        run_steps(&got1, &m, 1, NULL, 0, m.B, &rep);
        cr_expect_eq(rep.prec, REFENC_MP_PREC_DEFAULT, "%s: certified at %ld bits", variants[v].what, (long)rep.prec);
        run_steps(&got3, &m, 3, NULL, 0, m.B, &rep);
        cr_expect_eq(same_steps(&got1, &want, variants[v].what), want.n, "%s: steps", variants[v].what);
        cr_expect_eq(same_steps(&got3, &want, variants[v].what), want.n, "%s: steps", variants[v].what);
        /* units apart: item 2 alone, then items 0 and 1 */
        steps apart = {0};
        run_steps(&apart, &m, 2, NULL, 2, 3, &rep);
        run_steps(&apart, &m, 2, NULL, 0, 2, &rep);
        same_steps(&apart, &want, variants[v].what);
        steps_free(&want), steps_free(&got1), steps_free(&got3), steps_free(&apart);
        model_free(&m);
    }
}

/* The model families' embedding paths and mask (docs/families.md): every
 * step on two threads equals the one-thread run's. */
Test(oracle_engine, the_families_steps_do_not_depend_on_the_threads, .timeout = 120)
{
    enum { BERT, ROBERTA, GPT2, CLIP };
    const char *what[] = {"BERT: unscaled tokens, token types, learned PE, embedding norm",
                          "RoBERTa: position ids from the tokens, embedding norm",
                          "GPT-2: causal, finfo.min mask, left padding, final norm",
                          "CLIP text: causal, quick GELU, finfo.min mask"};
    for (int f = BERT; f <= CLIP; f++) {
        refenc_config cfg;
        refenc_config_default(&cfg);
        cfg.d_model = 12, cfg.n_heads = 2, cfg.d_ff = 18, cfg.n_layers = 2;
        cfg.vocab_size = 11, cfg.max_len = 16, cfg.scale_embedding = 0;
        cfg.positional = REFENC_POS_LEARNED;
        cfg.norm = f >= GPT2 ? REFENC_NORM_PRE : REFENC_NORM_POST;
        cfg.final_norm = f >= GPT2;
        cfg.activation = f == CLIP ? REFENC_ACT_QUICK_GELU : REFENC_ACT_GELU;
        cfg.causal = f >= GPT2;
        cfg.mask_value = f >= GPT2 ? REFENC_MASK_FINFO_MIN : REFENC_MASK_NEG_INF;
        cfg.type_vocab_size = f == BERT ? 2 : 0;
        cfg.embedding_norm = f <= ROBERTA;
        cfg.embedding_norm_eps = 1e-12;
        cfg.position_ids = f == ROBERTA ? REFENC_POSIDS_ROBERTA : REFENC_POSIDS_INDEX;
        cfg.padding_idx = f == ROBERTA ? 1 : -1;
        model m;
        model_make(&m, &cfg, 3, 5, 1, 0, 40 + (unsigned long)f);
        int64_t types[15];
        if (f == BERT) { /* segment A then B, as a sentence pair */
            for (size_t i = 0; i < 15; i++)
                types[i] = i % 5 >= 3;
            m.in.token_types = types;
        }
        if (f == ROBERTA || f == GPT2) {
            m.in.positions = NULL; /* RoBERTa's come from the tokens; GPT-2's are 0 .. L-1 */
            for (size_t b = 0; b < 3; b++)
                for (size_t l = 0; l < 5; l++) {
                    const int pad = f == ROBERTA ? l >= 5 - b : l < b; /* RoBERTa right, GPT-2 left padding */
                    m.mask[b * 5 + l] = (uint8_t)pad;
                    if (f == ROBERTA)
                        m.tokens[b * 5 + l] = pad ? 1 : 2 + (int64_t)((b * 5 + l) % 9);
                }
        }
        for (int no_types = 0; no_types <= (f == BERT); no_types++) { /* BERT: also without token types (all 0) */
            if (no_types)
                m.in.token_types = NULL;
            steps want, got = {0};
            reference_steps(&want, &m);
            refenc_mp_report rep;
            run_steps(&got, &m, 2, NULL, 0, m.B, &rep);
            cr_expect_eq(same_steps(&got, &want, what[f]), want.n, "%s%s: steps", what[f],
                         no_types ? ", no token types" : "");
            steps_free(&want), steps_free(&got);
        }
        model_free(&m);
    }
}

Test(oracle_engine, the_comparison_sees_one_changed_step)
{
    /* negative control: a run of a different model differs */
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 8, cfg.n_heads = 2, cfg.d_ff = 10, cfg.n_layers = 1;
    model a, b;
    model_make(&a, &cfg, 1, 3, 0, 0, 20);
    model_make(&b, &cfg, 1, 3, 0, 0, 20);
    b.p.layers[0].linear2_bias[0] += 0x1p-30;
    steps sa = {0}, sb = {0};
    refenc_mp_report rep;
    run_steps(&sa, &a, 1, NULL, 0, 1, &rep);
    run_steps(&sb, &b, 1, NULL, 0, 1, &rep);
    double *oa = find(&sa, "output", 0), *ob = find(&sb, "output", 0);
    int differs = 0;
    for (size_t i = 0; i < 3 * 8; i++)
        differs |= oa[i] != ob[i];
    cr_expect(differs, "a changed bias left the output unchanged");
    steps_free(&sa), steps_free(&sb);
    model_free(&a), model_free(&b);
}

Test(oracle_engine, per_layer_outputs_are_functions_of_the_stored_inputs, .timeout = 60)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 12, cfg.n_heads = 3, cfg.d_ff = 16, cfg.n_layers = 3;
    cfg.positional = REFENC_POS_ROPE;
    model m;
    model_make(&m, &cfg, 2, 4, 1, 0, 30);
    const size_t N = cfg.n_layers, BLD = m.B * m.L * cfg.d_model;
    /* stored inputs: any doubles (here the whole-tensor oracle's layer outputs, rounded) */
    steps whole;
    reference_steps(&whole, &m);
    const double *inputs[3];
    char name[64];
    inputs[0] = find(&whole, "embed", BLD);
    for (size_t i = 1; i < N; i++) {
        snprintf(name, sizeof name, "layers.%zu.output", i - 1);
        inputs[i] = find(&whole, name, BLD);
    }
    steps per = {0};
    refenc_mp_report rep;
    run_steps(&per, &m, 2, inputs, 0, N * m.B, &rep);
    /* layer i's outputs = a one-layer encoder (layer i's parameters, no PE,
     * no final norm unless it is the last) on inputs[i] */
    for (size_t i = 0; i < N; i++) {
        refenc_config c1 = cfg;
        c1.n_layers = 1;
        c1.final_norm = i == N - 1 && cfg.final_norm;
        model one;
        model_make(&one, &c1, m.B, m.L, 1, 0, 30);
        memcpy(one.p.layers[0].in_proj_weight, m.p.layers[i].in_proj_weight,
               (size_t)(m.p.layers[i].norm2_bias + cfg.d_model - m.p.layers[i].in_proj_weight) * sizeof(double));
        if (c1.final_norm) {
            memcpy(one.p.norm_weight, m.p.norm_weight, cfg.d_model * sizeof(double));
            memcpy(one.p.norm_bias, m.p.norm_bias, cfg.d_model * sizeof(double));
        }
        memcpy(one.x, inputs[i], BLD * sizeof(double));
        steps w1;
        reference_steps(&w1, &one);
        static const char *const st[] = {"norm1", "self_attn.weights", "self_attn", "norm2", "ffn", "output"};
        for (size_t k = 0; k < 6; k++) {
            char n1[64], ni[64];
            snprintf(n1, sizeof n1, "layers.0.%s", st[k]);
            snprintf(ni, sizeof ni, "layers.%zu.%s", i, st[k]);
            size_t numel = 0;
            for (size_t j = 0; j < w1.n; j++)
                if (strcmp(w1.name[j], n1) == 0)
                    numel = w1.numel[j];
            const double *a = find(&per, ni, numel), *b = find(&w1, n1, numel);
            cr_expect(memcmp(a, b, numel * sizeof(double)) == 0, "per layer: %s differs from %s of one layer", ni, n1);
        }
        if (i == N - 1) {
            cr_expect(memcmp(find(&per, "output", BLD), find(&w1, "output", BLD), BLD * sizeof(double)) == 0,
                      "per layer: the final output");
        }
        steps_free(&w1);
        model_free(&one);
    }
    /* the embedding is the whole stack's */
    cr_expect(memcmp(find(&per, "embed", BLD), find(&whole, "embed", BLD), BLD * sizeof(double)) == 0);
    steps_free(&per), steps_free(&whole);
    model_free(&m);
}

/* An item that needs more precision is evaluated again, alone: the values
 * are still the whole-tensor oracle's, and only that item pays. */
Test(oracle_engine, an_item_that_needs_precision_escalates_alone, .timeout = 60)
{
    /* Post-LN: item 0's rows are 2^180 + MHA(x) (the huge-mean LayerNorm of
     * oracle_ziv), item 1's ordinary. */
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 8, cfg.n_heads = 2, cfg.d_ff = 12, cfg.n_layers = 1, cfg.norm = REFENC_NORM_POST;
    cfg.final_norm = 0, cfg.activation = REFENC_ACT_RELU;
    model m;
    model_make(&m, &cfg, 2, 3, 0, 0, 11);
    for (size_t i = 0; i < 3 * 8; i++)
        m.x[i] = 0x1p180;
    for (size_t i = 0; i < 3 * 8 * 8; i++)
        m.p.layers[0].in_proj_weight[i] = ldexp(m.p.layers[0].in_proj_weight[i], -180);
    steps want, got = {0}, ordinary = {0};
    reference_steps(&want, &m);
    refenc_mp_report rep;
    run_steps(&got, &m, 2, NULL, 0, 2, &rep);
    cr_expect_gt(rep.prec, REFENC_MP_PREC_DEFAULT, "no escalation: certified at %ld bits", (long)rep.prec);
    cr_expect_geq(rep.evaluations, 3);
    cr_expect_eq(same_steps(&got, &want, "escalated item"), want.n);
    /* negative control: the ordinary item alone needs no escalation */
    run_steps(&ordinary, &m, 2, NULL, 1, 2, &rep);
    cr_expect_eq(rep.prec, REFENC_MP_PREC_DEFAULT, "the ordinary item was certified at %ld bits", (long)rep.prec);
    steps_free(&want), steps_free(&got), steps_free(&ordinary);
    model_free(&m);
}

/* A run outside its bounds is refused with a message naming the bound, before any work; the
 * same run inside them succeeds (the negative control). */
Test(oracle_engine, a_run_outside_its_bounds_is_refused)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 8, cfg.n_heads = 2, cfg.d_ff = 10, cfg.n_layers = 1, cfg.vocab_size = 7;
    model m;
    model_make(&m, &cfg, 2, 3, 0, 0, 21);
    steps s = {0};
    s.B = m.B;
    const refenc_mp_run good = {.cfg = &m.cfg, .params = &m.p, .in = &m.in, .unit_begin = 0, .unit_end = 2,
                                .emit = from_emit, .emit_ctx = &s, .prec = REFENC_MP_PREC_DEFAULT, .threads = 1};
    refenc_mp_run bad[5];
    const char *fragment[5] = {"oracle: units [1, 0) of 2", "oracle: units [0, 3) of 2", "1 threads",
                               "oracle: precision 10 bits is outside", "token"};
    for (int k = 0; k < 5; k++)
        bad[k] = good;
    bad[0].unit_begin = 1, bad[0].unit_end = 0;
    bad[1].unit_end = 3;
    bad[2].threads = 0;
    bad[3].prec = 10;
    refenc_input in = m.in;
    int64_t tokens[6] = {1, 2, 3, 4, 5, 7}; /* 7: outside the vocabulary */
    in.tokens = tokens;
    bad[4].in = &in;
    for (int k = 0; k < 5; k++) {
        refenc_mp_report rep;
        const int st = refenc_mp_encoder_run(&bad[k], &rep);
        cr_expect_eq(st, REFENC_EINVAL, "case %d: status %d: %s", k, st, rep.error.message);
        cr_expect(k == 2 ? strstr(rep.error.message, "0 threads") != NULL
                         : strstr(rep.error.message, fragment[k]) != NULL,
                  "case %d: the message lacks '%s': %s", k, fragment[k], rep.error.message);
    }
    cr_expect_eq(s.n, 0, "a refused run emitted steps");
    /* an empty range [1, 1) is inside the bounds: a run of no unit, not an error */
    refenc_mp_run empty = good;
    empty.unit_begin = empty.unit_end = 1;
    refenc_mp_report rep;
    cr_expect_eq(refenc_mp_encoder_run(&empty, &rep), REFENC_OK, "%s", rep.error.message);
    cr_expect_eq(s.n, 0, "a run of no unit emitted steps");
    cr_expect_eq(refenc_mp_encoder_run(&good, NULL), REFENC_OK);
    cr_expect_gt(s.n, 0, "the good run emitted nothing");
    steps_free(&s);
    model_free(&m);
}

/* The memory estimate grows with the sequence, the threads and the precision, and says 0 when it
 * overflows. */
Test(oracle_engine, the_memory_estimate_grows_with_the_run)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 12, cfg.n_heads = 3, cfg.d_ff = 20, cfg.n_layers = 2;
    const size_t base = refenc_mp_encoder_run_bytes(&cfg, 5, 1, 128);
    cr_expect_gt(base, 0);
    cr_expect_gt(refenc_mp_encoder_run_bytes(&cfg, 9, 1, 128), base);
    cr_expect_gt(refenc_mp_encoder_run_bytes(&cfg, 5, 2, 128), base);
    cr_expect_gt(refenc_mp_encoder_run_bytes(&cfg, 5, 1, 1024), base);
    cr_expect_eq(refenc_mp_encoder_run_bytes(&cfg, (size_t)1 << 40, 4096, 65536), 0, "no overflow reported");
}

/* ---- one evaluation, the bug variants' hooks ------------------------------------------ */

/* Every step of a one-evaluation run (no certification, each value rounded once) at prec,
 * with hooks. */
static void once_steps(steps *s, const model *m, mpfr_prec_t prec, const refenc_mp_hooks *hooks)
{
    memset(s, 0, sizeof *s);
    s->B = m->B;
    const refenc_mp_run run = {.cfg = &m->cfg, .params = &m->p, .in = &m->in, .unit_end = m->B, .emit = from_emit,
                               .emit_ctx = s, .prec = prec, .threads = 2, .hooks = hooks, .one_evaluation = 1};
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_encoder_run(&run, &rep), REFENC_OK, "%s", rep.error.message);
    cr_expect_eq(rep.prec, prec);
    cr_expect_eq(rep.evaluations, 1);
}

/* Steps of a and b that differ, of those compared. */
static size_t differing_steps(steps *a, steps *b)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++) {
        const double *w = find(b, a->name[i], a->numel[i]);
        n += memcmp(a->data[i], w, a->numel[i] * sizeof(double)) != 0;
    }
    return n;
}

/* At 1000 bits an ordinary encoder's values round to the certified doubles
 * (their error, 2^-990 relative, is far below the distance of these values
 * to a rounding boundary): the one-lane evaluation computes the same
 * function as the certified one. */
Test(oracle_engine, one_evaluation_at_1000_bits_rounds_to_the_certified_doubles, .timeout = 60)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 12, cfg.n_heads = 3, cfg.d_ff = 18, cfg.n_layers = 2, cfg.positional = REFENC_POS_ALIBI;
    cfg.norm = REFENC_NORM_POST, cfg.final_norm = 1;
    model m;
    model_make(&m, &cfg, 2, 5, 1, 1, 50);
    steps want, once;
    reference_steps(&want, &m);
    once_steps(&once, &m, 1000, NULL);
    cr_expect_eq(once.n, want.n);
    cr_expect_eq(same_steps(&once, &want, "one evaluation at 1000 bits"), want.n);
    /* negative control: at 64 bits the rounding is off somewhere */
    steps low;
    once_steps(&low, &m, 64, NULL);
    cr_expect_gt(differing_steps(&low, &want), 0, "64 bits gave every certified double");
    steps_free(&want), steps_free(&once), steps_free(&low);
    model_free(&m);
}

/* The hooks of the bug variants (variants.h) do what the variant does:
 * ALiBi's power-of-two slopes change nothing for 4 heads and the attention
 * of 3 heads; merging the heads without the transpose changes nothing for
 * one head (its (1, L, Dh) is (L, D)) and the output of 3; ALiBi's bias
 * with the wrong sign changes the attention of 4 heads and of 1. */
Test(oracle_engine, the_bug_variants_hooks_change_what_they_should, .timeout = 60)
{
    const refenc_mp_hooks pow2 = {.alibi_slopes_pow2 = 1}, flat = {.merge_without_transpose = 1},
                          positive = {.alibi_bias_positive = 1};
    const struct {
        const refenc_mp_hooks *hooks;
        size_t H;
        int changes;
    } cases[] = {{&pow2, 4, 0}, {&pow2, 3, 1}, {&flat, 1, 0}, {&flat, 3, 1}, {&positive, 4, 1}, {&positive, 1, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        refenc_config cfg;
        refenc_config_default(&cfg);
        cfg.d_model = 12, cfg.n_heads = cases[k].H, cfg.d_ff = 18, cfg.n_layers = 1;
        cfg.positional = REFENC_POS_ALIBI;
        model m;
        model_make(&m, &cfg, 2, 5, 0, 0, 60 + k);
        steps plain, hooked;
        once_steps(&plain, &m, 128, NULL);
        once_steps(&hooked, &m, 128, cases[k].hooks);
        const size_t d = differing_steps(&hooked, &plain);
        double *w0 = find(&plain, "layers.0.self_attn.weights", 0), *w1 = find(&hooked, "layers.0.self_attn.weights", 0);
        const size_t nw = numel_of(&plain, "layers.0.self_attn.weights");
        cr_assert(nw == 2 * cases[k].H * 5 * 5 && numel_of(&hooked, "layers.0.self_attn.weights") == nw,
                  "case %zu: the attention weights have %zu elements", k, nw);
        const int weights_differ = memcmp(w0, w1, nw * sizeof(double)) != 0;
        if (cases[k].changes)
            cr_expect(d > 0 && weights_differ == (cases[k].hooks != &flat), "case %zu: %zu steps differ, weights %s",
                      k, d, weights_differ ? "differ" : "do not");
        else
            cr_expect_eq(d, 0, "case %zu: %zu steps differ", k, d);
        steps_free(&plain), steps_free(&hooked);
        model_free(&m);
    }
}

/* ---- memory ---------------------------------------------------------------------------------- */

typedef struct {
    size_t base, peak;
} heap_watch;

/* glibc's count of the bytes in use: in the heap's chunks and in mmapped ones */
static size_t heap_in_use(void)
{
    const struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* Whether heap_in_use sees a 1 MiB allocation (not under a sanitizer's own allocator). */
static int heap_measurable(void)
{
    const size_t before = heap_in_use();
    char *volatile p = malloc((size_t)1 << 20);
    const int seen = p != NULL && heap_in_use() >= before + ((size_t)1 << 20);
    free(p);
    return seen;
}

/* sampled after every step, when the lanes, the workers and the layer's
 * fixed-point weights are allocated */
static void watch(void *ctx, const refenc_mp_progress *p)
{
    (void)p;
    heap_watch *w = ctx;
    const size_t now = heap_in_use();
    if (now > w->base && now - w->base > w->peak)
        w->peak = now - w->base;
}

static void discard(void *ctx, const char *step, size_t item, const double *data, size_t ndim, const size_t *shape)
{
    (void)ctx, (void)step, (void)item, (void)data, (void)ndim, (void)shape;
}

/* The peak of the heap (malloc's, where MPFR's limbs also live) during a
 * one-thread certified run, above what was in use before it. */
static size_t run_peak(const model *m, mpfr_prec_t prec)
{
    heap_watch w = {heap_in_use(), 0};
    const refenc_mp_run run = {.cfg = &m->cfg, .params = &m->p, .in = &m->in, .unit_end = m->B, .emit = discard,
                               .progress = watch, .progress_ctx = &w, .prec = prec, .threads = 1};
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_encoder_run(&run, &rep), REFENC_OK, "%s", rep.error.message);
    return w.peak;
}

/* refenc_mp_encoder_run_bytes is an upper bound of what a run allocates, at
 * several sizes and precisions (among them a long sequence at a small width,
 * where the dot products' term arrays, L long, are a sizable part); and no more than 4 times it (an estimate
 * that reports memory a run does not use would refuse runs that fit).
 * Negative control: the estimate for a quarter of the sequence lies below
 * the peak measured, so the measurement can see an estimate too small. */
Test(oracle_engine, the_memory_estimate_bounds_what_a_run_allocates, .timeout = 60)
{
    const struct {
        size_t D, H, F, L;
        mpfr_prec_t prec;
        refenc_positional pos;
    } cases[] = {{12, 3, 20, 16, REFENC_MP_PREC_DEFAULT, REFENC_POS_ROPE},
                 {24, 4, 40, 24, 96, REFENC_POS_ALIBI},
                 {16, 2, 64, 40, 320, REFENC_POS_SINUSOIDAL},
                 {8, 2, 8, 160, REFENC_MP_PREC_DEFAULT, REFENC_POS_NONE}};
    if (!heap_measurable())
        cr_skip_test("malloc's statistics do not count this allocator's memory");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        refenc_config cfg;
        refenc_config_default(&cfg);
        cfg.d_model = cases[k].D, cfg.n_heads = cases[k].H, cfg.d_ff = cases[k].F, cfg.n_layers = 2;
        cfg.positional = cases[k].pos;
        model m;
        model_make(&m, &cfg, 2, cases[k].L, 1, 1, 70 + k);
        const size_t peak = run_peak(&m, cases[k].prec);
        const size_t est = refenc_mp_encoder_run_bytes(&cfg, cases[k].L, 1, cases[k].prec);
        cr_expect_leq(peak, est, "case %zu: %zu bytes allocated, %zu estimated", k, peak, est);
        cr_expect_geq(4 * peak, est, "case %zu: %zu bytes allocated, %zu estimated", k, peak, est);
        cr_expect_gt(peak, refenc_mp_encoder_run_bytes(&cfg, cases[k].L / 4, 1, cases[k].prec),
                     "case %zu: the measurement cannot see a smaller estimate", k);
        model_free(&m);
    }
}

/* ---- progress ---------------------------------------------------------------------------- */

typedef struct {
    double last_done, total, most;
    size_t calls;
    char last_step[64];
} progress_log;

static void log_progress(void *ctx, const refenc_mp_progress *p)
{
    progress_log *g = ctx;
    g->last_done = p->done, g->total = p->total, g->calls++;
    g->most = fmax(g->most, p->done);
    snprintf(g->last_step, sizeof g->last_step, "%s", p->step);
}

/* The work a run reports adds up to the total it announces
 * (refenc_mp_encoder_unit_work, what the ETA divides by): every step counts
 * its multiply-adds once and the last report says all is done, never more.
 * The counts are integers below 2^53, so the sums are exact whatever their
 * order.  GELU's and ReLU's FFN work differ (erfc counts 600), so both run;
 * H 3 and L 5 tell H L L from H L and L / F from L F.  Negative controls
 * (run as mutants, scripts/mutation.py): a step counting 1 instead of 0,
 * H L instead of H L L, or L / F instead of L F fails it. */
Test(oracle_engine, the_work_reported_adds_up_to_the_total_announced)
{
    const refenc_activation acts[2] = {REFENC_ACT_GELU, REFENC_ACT_RELU};
    for (int k = 0; k < 2; k++) {
        refenc_config cfg;
        refenc_config_default(&cfg);
        cfg.d_model = 12, cfg.n_heads = 3, cfg.d_ff = 7, cfg.n_layers = 2;
        cfg.positional = REFENC_POS_ROPE, cfg.activation = acts[k];
        model m;
        model_make(&m, &cfg, 2, 5, 1, 0, 90 + (unsigned long)k);
        progress_log g = {0};
        const refenc_mp_run run = {.cfg = &m.cfg, .params = &m.p, .in = &m.in, .unit_end = m.B, .emit = discard,
                                   .progress = log_progress, .progress_ctx = &g, .prec = REFENC_MP_PREC_DEFAULT,
                                   .threads = 1};
        refenc_mp_report rep;
        cr_assert_eq(refenc_mp_encoder_run(&run, &rep), REFENC_OK, "%s", rep.error.message);
        const double want = (double)m.B * refenc_mp_encoder_unit_work(&cfg, m.L, 0, 0);
        cr_expect_gt(g.calls, 2 * cfg.n_layers, "%zu progress reports", g.calls);
        cr_expect_str_eq(g.last_step, "output");
        cr_expect_eq(g.total, want, "total %.17g, the units' work %.17g", g.total, want);
        cr_expect_eq(g.last_done, g.total, "activation %d: the last report says %.17g of %.17g done", k,
                     g.last_done, g.total);
        cr_expect_leq(g.most, g.total, "activation %d: %.17g reported done of %.17g", k, g.most, g.total);
        model_free(&m);
    }
}
