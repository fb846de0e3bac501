/* The encoder stack (ref/encoder.h): the final LayerNorm, the embedding and
 * positional steps, the wiring of masks and ALiBi into every layer, and the
 * input checks at the boundary. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <gsl/gsl_rng.h>

#include "../../ref/refenc.h"
#include "trace_log.h"
#include "unit.h"
#include "../../ref/tool/random_params.h"

typedef struct {
    refenc_config cfg;
    refenc_params p;
    refenc_workspace ws;
} encoder_fixture;

static void fixture_alloc(encoder_fixture *f, size_t B, size_t L)
{
    refenc_error err;
    cr_assert_eq(refenc_params_alloc(&f->p, &f->cfg, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_workspace_alloc(&f->ws, &f->cfg, B, L, &err), REFENC_OK, "%s", err.message);
}

static void fixture_free(encoder_fixture *f)
{
    refenc_workspace_free(&f->ws);
    refenc_params_free(&f->p);
}

/* ---- the final LayerNorm ------------------------------------------------------------
 * Two Pre-LN layers whose sublayers are constants (as in test_layer.c:
 * out_proj.weight = 0, linear1 = 0): each adds b_o + b2 = [-0.5, -0.5, 1], so
 * before the final norm  h = x + 2 [-0.5, -0.5, 1]:
 *   x = [[1, 2, 6], [-0.5, 3, 0.5]]  ->  h = [[0, 1, 8], [-1.5, 2, 2.5]]  (exact)
 * Row means 3 and 1 and deviations [-3, -2, 5], [-2.5, 1, 1.5] are exact,
 * variances 38/3 and 9.5/3.  With gamma = [2, 0.5, -1] (powers of two) and
 * beta = [0, 0, 0.25]:  y = dev / sqrt(var + eps) * gamma + beta.
 * Tolerance: var, + eps, sqrt, division: 3u relative on dev/sd (4 ULPs with
 * the reference), exact gamma, plus beta (u |y|) and the reference (u |y|). */
static const double X3[6] = {1.0, 2.0, 6.0, -0.5, 3.0, 0.5};
static const double H3[6] = {0.0, 1.0, 8.0, -1.5, 2.0, 2.5};

static void constant_sublayers(encoder_fixture *f, int final_norm)
{
    refenc_config_default(&f->cfg);
    f->cfg.d_model = 3, f->cfg.n_heads = 1, f->cfg.d_ff = 2, f->cfg.n_layers = 2;
    f->cfg.final_norm = final_norm;
    fixture_alloc(f, 1, 2);
    static const double b_o[3] = {0.5, -0.5, 0.0}, b2[3] = {-1.0, 0.0, 1.0};
    for (size_t i = 0; i < 2; i++) {
        refenc_layer_params *lp = &f->p.layers[i];
        for (size_t j = 0; j < 27; j++)
            lp->in_proj_weight[j] = 0.05 * (double)j - 0.4;
        for (size_t j = 0; j < 6; j++)
            lp->linear2_weight[j] = 1.5;
        memcpy(lp->out_proj_bias, b_o, sizeof b_o);
        memcpy(lp->linear2_bias, b2, sizeof b2);
        for (int d = 0; d < 3; d++)
            lp->norm1_weight[d] = lp->norm2_weight[d] = 1.0;
    }
    if (final_norm) {
        static const double gamma[3] = {2.0, 0.5, -1.0}, beta[3] = {0.0, 0.0, 0.25};
        memcpy(f->p.norm_weight, gamma, sizeof gamma);
        memcpy(f->p.norm_bias, beta, sizeof beta);
    }
}

Test(encoder, final_norm_normalises_the_last_layers_output)
{
    encoder_fixture f;
    constant_sublayers(&f, 1);
    const refenc_input in = {.B = 1, .L = 2, .x = X3};
    double y[6];
    trace_log log = {0};
    const refenc_trace tr = {trace_log_record, &log};
    refenc_error err;
    cr_assert_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &in, &tr, &err), REFENC_OK, "%s",
                 err.message);
    static const double gamma[3] = {2.0, 0.5, -1.0}, beta[3] = {0.0, 0.0, 0.25};
    const long double mean[2] = {3, 1}, var[2] = {38.0L / 3, 9.5L / 3};
    for (int r = 0; r < 2; r++)
        for (int d = 0; d < 3; d++) {
            const long double norm = (H3[r * 3 + d] - mean[r]) / sqrtl(var[r] + (long double)1e-5) * gamma[d];
            const double want = (double)(norm + beta[d]);
            const double tol = 4 * TEST_U * fabsl(norm) + 2 * TEST_U * fabs(want);
            EXPECT_ABS(y[r * 3 + d], want, tol, "y[0,%d,%d]", r, d);
            /* negative control: the un-normalised last layer */
            EXPECT_ABS_REJECTS(y[r * 3 + d], H3[r * 3 + d], tol, "no final norm at [0,%d,%d]", r, d);
        }
    const int last = trace_log_find(&log, "layers.1.output"), norm = trace_log_find(&log, "norm");
    cr_assert(last >= 0 && norm == last + 1, "norm does not follow layers.1.output");
    for (int i = 0; i < 6; i++)
        EXPECT_EXACT(log.value[last][i], H3[i], "layers.1.output[%d] = x + 2 (b_o + b2)", i);
    fixture_free(&f);
}

Test(encoder, without_final_norm_the_output_is_the_last_layers_output)
{
    encoder_fixture f;
    constant_sublayers(&f, 0);
    cr_expect_null(refenc_params_find(&f.p, "norm.weight"), "norm.weight exists without final norm");
    const refenc_input in = {.B = 1, .L = 2, .x = X3};
    double y[6];
    trace_log log = {0};
    const refenc_trace tr = {trace_log_record, &log};
    cr_assert_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &in, &tr, NULL), REFENC_OK);
    for (int i = 0; i < 6; i++)
        EXPECT_EXACT(y[i], H3[i], "y[%d]", i);
    cr_expect_eq(trace_log_find(&log, "norm"), -1, "a norm step without final norm");
    cr_expect_str_eq(log.name[log.n - 1], "output");
    fixture_free(&f);
}

/* ---- embedding and positional steps ------------------------------------------------ */

/* tokens -> table[token] * sqrt(4) + pos_embedding[pos], all exact (dyadic
 * values, sqrt(4) = 2); the padding token's row is used as the caller stored
 * it (here nonzero); explicit positions pick the PE rows. */
Test(encoder, embed_step_is_scaled_embedding_plus_learned_pe_at_the_given_positions)
{
    encoder_fixture f;
    refenc_config_default(&f.cfg);
    f.cfg.d_model = 4, f.cfg.n_heads = 2, f.cfg.d_ff = 3, f.cfg.n_layers = 1;
    f.cfg.vocab_size = 5, f.cfg.padding_idx = 0, f.cfg.positional = REFENC_POS_LEARNED, f.cfg.max_len = 6;
    fixture_alloc(&f, 2, 3);
    for (size_t i = 0; i < 20; i++)
        f.p.embedding[i] = 0.25 * (double)i - 1.0; /* row 0 (padding) = [-1, -0.75, -0.5, -0.25] */
    for (size_t i = 0; i < 24; i++)
        f.p.pos_embedding[i] = 0.125 * (double)(i % 9);
    const int64_t tokens[6] = {3, 1, 0, 0, 4, 2}, pos[3] = {5, 0, 2};
    const uint8_t mask[6] = {0, 0, 1, 1, 0, 0};
    const refenc_input in = {.B = 2, .L = 3, .tokens = tokens, .positions = pos, .key_padding_mask = mask};
    double y[24];
    trace_log log = {0};
    const refenc_trace tr = {trace_log_record, &log};
    refenc_error err;
    cr_assert_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &in, &tr, &err), REFENC_OK, "%s",
                 err.message);
    cr_assert_str_eq(log.name[0], "embed");
    for (int bl = 0; bl < 6; bl++)
        for (int d = 0; d < 4; d++) {
            const double want = 2.0 * f.p.embedding[tokens[bl] * 4 + d] + f.p.pos_embedding[pos[bl % 3] * 4 + d];
            EXPECT_EXACT(log.value[0][bl * 4 + d], want, "embed[%d,%d,%d]", bl / 3, bl % 3, d);
        }
    /* negative control: positions 0..L-1 instead of the given ones */
    cr_expect(log.value[0][0] != 2.0 * f.p.embedding[12] + f.p.pos_embedding[0], "default positions used");

    /* the key padding mask reaches the layer: padding keys get weight 0 in every head */
    const int w = trace_log_find(&log, "layers.0.self_attn.weights"); /* (B=2, H=2, L=3, L=3) */
    cr_assert(w >= 0);
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    const double v = log.value[w][((b * 2 + h) * 3 + i) * 3 + j];
                    if (mask[b * 3 + j])
                        EXPECT_EXACT(v, 0.0, "weight[%d,%d,%d,%d] on a padding key", b, h, i, j);
                    else
                        cr_expect(v > 0.0, "weight[%d,%d,%d,%d] on a token is %g", b, h, i, j, v);
                }
    fixture_free(&f);
}

/* x with sinusoidal PE at the default positions 0, 1: position 0 adds
 * [0, 1, 0, 1] exactly; position 1 adds [sin 1, cos 1, sin 0.01, cos 0.01]
 * (D = 4: w_1 = 10000^(-1/2) = 0.01), each within 1 ulp (w_1 within 1 ulp
 * too: its relative error carries into sin 0.01), then one rounded addition:
 * |err| <= 2u |pe| + 2u |pe| (w_1) + u |y| + u |y| (reference). */
Test(encoder, embed_step_adds_sinusoidal_pe_at_default_positions)
{
    encoder_fixture f;
    refenc_config_default(&f.cfg);
    f.cfg.d_model = 4, f.cfg.n_heads = 1, f.cfg.d_ff = 2, f.cfg.n_layers = 1;
    f.cfg.positional = REFENC_POS_SINUSOIDAL;
    fixture_alloc(&f, 1, 2);
    const double x[8] = {2.385, -0.75, 1.5, 0.3125, -1.1, 0.6, 2.0, -0.45};
    const refenc_input in = {.B = 1, .L = 2, .x = x};
    double y[8];
    trace_log log = {0};
    const refenc_trace tr = {trace_log_record, &log};
    cr_assert_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &in, &tr, NULL), REFENC_OK);
    for (int d = 0; d < 4; d++)
        EXPECT_EXACT(log.value[0][d], x[d] + (d % 2 ? 1.0 : 0.0), "embed[0,0,%d]", d);
    const long double pe1[4] = {sinl(1.0L), cosl(1.0L), sinl(0.01L), cosl(0.01L)};
    for (int d = 0; d < 4; d++) {
        const double want = (double)(x[4 + d] + pe1[d]);
        EXPECT_ABS(log.value[0][4 + d], want, 4 * TEST_U * fabsl(pe1[d]) + 2 * TEST_U * fabs(want),
                   "embed[0,1,%d]", d);
    }
    /* negative control: the PE of position 1 is not that of position 0 */
    EXPECT_ABS_REJECTS(log.value[0][4], x[4], 4 * TEST_U, "PE missing at position 1");
    fixture_free(&f);
}

/* ---- ALiBi, causal mask and RoPE reach every layer ---------------------------------- */

/* With in_proj = 0 every score is 0, so the weights are softmax of the
 * ALiBi bias alone.  L = 2 at the explicit positions 0 and 3 (distance 3):
 * row i gives its own key 1/(1 + e^-3m) and the other e^-3m/(1 + e^-3m).
 * H = 2: slopes 2^-4 and 2^-8.  Both layers.  The bias -3m is exact, exp
 * adds 1 ulp, the sum and division: 6 ULPs (as in test_softmax.c).  Causal
 * on top: row 0 sees only key 0 (weight exactly 1). */
Test(encoder, alibi_and_causal_mask_reach_every_layer)
{
    for (int causal = 0; causal < 2; causal++) {
        encoder_fixture f;
        refenc_config_default(&f.cfg);
        f.cfg.d_model = 4, f.cfg.n_heads = 2, f.cfg.d_ff = 2, f.cfg.n_layers = 2;
        f.cfg.positional = REFENC_POS_ALIBI, f.cfg.causal = causal;
        fixture_alloc(&f, 1, 2);
        const double x[8] = {2.385, -0.75, 1.5, 0.3125, -1.1, 0.6, 2.0, -0.45};
        const int64_t pos[2] = {0, 3};
        const refenc_input in = {.B = 1, .L = 2, .x = x, .positions = pos};
        double y[8];
        trace_log log = {0};
        const refenc_trace tr = {trace_log_record, &log};
        cr_assert_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &in, &tr, NULL), REFENC_OK);
        for (int layer = 0; layer < 2; layer++) {
            char name[64];
            snprintf(name, sizeof name, "layers.%d.self_attn.weights", layer);
            const int s = trace_log_find(&log, name);
            cr_assert(s >= 0, "%s", name);
            const double m[2] = {3 * 0x1p-4, 3 * 0x1p-8}; /* slope times distance 3 */
            for (int h = 0; h < 2; h++) {
                const double self = (double)(1.0L / (1.0L + expl(-(long double)m[h])));
                const double other = (double)(expl(-(long double)m[h]) / (1.0L + expl(-(long double)m[h])));
                const double *w = log.value[s] + h * 4;
                if (causal) {
                    EXPECT_EXACT(w[0], 1.0, "causal %s head %d [0][0]", name, h);
                    EXPECT_EXACT(w[1], 0.0, "causal %s head %d [0][1]", name, h);
                } else {
                    EXPECT_ULPS(w[0], self, 6, "%s head %d [0][0]", name, h);
                    EXPECT_ULPS(w[1], other, 6, "%s head %d [0][1]", name, h);
                }
                EXPECT_ULPS(w[2], other, 6, "%s head %d [1][0]", name, h);
                EXPECT_ULPS(w[3], self, 6, "%s head %d [1][1]", name, h);
                /* negative controls: without ALiBi the weights would be 1/2; at the
                 * default positions 0, 1 the distance would be 1 */
                EXPECT_ULPS_REJECTS(w[2], 0.5, 6, "%s head %d without ALiBi", name, h);
                EXPECT_ULPS_REJECTS(w[2], (double)(expl(-(long double)m[h] / 3) /
                                                   (1.0L + expl(-(long double)m[h] / 3))),
                                    6, "%s head %d at default positions", name, h);
            }
        }
        fixture_free(&f);
    }
}

static void random_params(encoder_fixture *f, unsigned long stream)
{
    gsl_rng *r = test_rng(stream);
    refenc_params_init_random(&f->p, &f->cfg, r);
    gsl_rng_free(r);
}

/* RoPE is applied in the layers: explicit positions all 0 give exactly the
 * output without positional information; positions 0..L-1 differ. */
Test(encoder, rope_positions_reach_the_attention)
{
    const double x[12] = {2.385, -0.75, 1.5, 0.3125, -1.1, 0.6, 2.0, -0.45, 0.9, 1.7, -0.35, -2.2};
    double y_none[12], y_rope0[12], y_rope[12];
    const int64_t zeros[3] = {0, 0, 0};
    for (int scheme = 0; scheme < 3; scheme++) {
        encoder_fixture f;
        refenc_config_default(&f.cfg);
        f.cfg.d_model = 4, f.cfg.n_heads = 1, f.cfg.d_ff = 5, f.cfg.n_layers = 2;
        f.cfg.positional = scheme == 0 ? REFENC_POS_NONE : REFENC_POS_ROPE;
        fixture_alloc(&f, 1, 3);
        random_params(&f, 7); /* same stream: the same parameters for all three */
        const refenc_input in = {.B = 1, .L = 3, .x = x, .positions = scheme == 1 ? zeros : NULL};
        double *y = scheme == 0 ? y_none : scheme == 1 ? y_rope0 : y_rope;
        cr_assert_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &in, NULL, NULL), REFENC_OK);
        fixture_free(&f);
    }
    cr_expect(memcmp(y_none, y_rope0, sizeof y_none) == 0, "RoPE at position 0 changed the output");
    cr_expect(memcmp(y_none, y_rope, sizeof y_none) != 0, "RoPE at positions 0..2 changed nothing");
}

/* The same input twice: bit-identical output (no hidden state). */
Test(encoder, forward_is_deterministic)
{
    encoder_fixture f;
    refenc_config_default(&f.cfg);
    f.cfg.d_model = 6, f.cfg.n_heads = 3, f.cfg.d_ff = 7, f.cfg.n_layers = 2;
    f.cfg.positional = REFENC_POS_ROPE, f.cfg.vocab_size = 9, f.cfg.padding_idx = 0;
    fixture_alloc(&f, 2, 4);
    random_params(&f, 3);
    const int64_t tokens[8] = {1, 2, 3, 0, 8, 7, 0, 0};
    const uint8_t mask[8] = {0, 0, 0, 1, 0, 0, 1, 1};
    const refenc_input in = {.B = 2, .L = 4, .tokens = tokens, .key_padding_mask = mask};
    double y1[48], y2[48];
    cr_assert_eq(refenc_encoder_forward(y1, &f.ws, &f.p, &f.cfg, &in, NULL, NULL), REFENC_OK);
    cr_assert_eq(refenc_encoder_forward(y2, &f.ws, &f.p, &f.cfg, &in, NULL, NULL), REFENC_OK);
    cr_expect(memcmp(y1, y2, sizeof y1) == 0, "two runs differ");
    for (int i = 0; i < 48; i++)
        cr_expect(isfinite(y1[i]), "y[%d] = %g", i, y1[i]);
    fixture_free(&f);
}

/* ---- input checks --------------------------------------------------------------------
 * Base: D = 4, H = 2, V = 5, learned PE with max_len 6, input (B = 2, L = 3). */
typedef struct {
    int64_t tokens[6], positions[3];
    uint8_t mask[6];
    double x[24], attn_mask[9];
    refenc_input in;
    size_t ws_B, ws_L;
    int vocab; /* 0: the config has no vocabulary */
} input_case_data;

typedef void (*input_mutation)(input_case_data *d);

static void m_tokens_missing(input_case_data *d) { d->in.tokens = NULL; }
static void m_x_with_vocabulary(input_case_data *d) { d->in.x = d->x; }
static void m_token_too_large(input_case_data *d) { d->tokens[5] = 5; }
static void m_token_negative(input_case_data *d) { d->tokens[0] = -1; }
static void m_x_missing(input_case_data *d) { d->vocab = 0, d->in.tokens = NULL; }
static void m_tokens_without_vocabulary(input_case_data *d) { d->vocab = 0, d->in.x = d->x; }
static void m_mask_not_binary(input_case_data *d) { d->in.key_padding_mask = d->mask, d->mask[3] = 2; }
static void m_position_negative(input_case_data *d) { d->in.positions = d->positions, d->positions[1] = -1; }
static void m_position_past_table(input_case_data *d) { d->in.positions = d->positions, d->positions[2] = 6; }
static void m_attn_mask_nan(input_case_data *d) { d->in.attn_mask = d->attn_mask, d->attn_mask[1] = NAN; }
static void m_attn_mask_plus_inf(input_case_data *d) { d->in.attn_mask = d->attn_mask, d->attn_mask[5] = INFINITY; }
static void m_workspace_other_shape(input_case_data *d) { d->ws_L = 4; }
static void m_batch_zero(input_case_data *d) { d->in.B = 0; }

static const struct {
    const char *name;
    input_mutation mutate;
    int status;
    const char *fragment;
} input_errors[] = {
    {"tokens_missing", m_tokens_missing, REFENC_EINVAL, "in.tokens is required (vocab_size = 5)"},
    {"x_given_with_vocabulary", m_x_with_vocabulary, REFENC_EINVAL, "in.x is given but vocab_size = 5"},
    {"token_equal_to_vocab_size", m_token_too_large, REFENC_EINVAL,
     "in.tokens[1][2] = 5 is outside [0, vocab_size = 5)"},
    {"token_negative", m_token_negative, REFENC_EINVAL, "in.tokens[0][0] = -1"},
    {"x_missing", m_x_missing, REFENC_EINVAL, "in.x is required (vocab_size = 0)"},
    {"tokens_given_without_vocabulary", m_tokens_without_vocabulary, REFENC_EINVAL,
     "in.tokens is given but vocab_size = 0"},
    {"key_padding_mask_not_0_or_1", m_mask_not_binary, REFENC_EINVAL, "in.key_padding_mask[1][0] = 2"},
    {"position_negative", m_position_negative, REFENC_EINVAL, "in.positions[1] = -1"},
    {"position_past_the_learned_table", m_position_past_table, REFENC_EINVAL,
     "in.positions[2] = 6 is outside [0, 6) (the rows of the learned PE table, max_len)"},
    {"attn_mask_nan", m_attn_mask_nan, REFENC_EINVAL, "in.attn_mask[0][1]"},
    {"attn_mask_plus_infinity", m_attn_mask_plus_inf, REFENC_EINVAL, "in.attn_mask[1][2]"},
    {"workspace_for_another_shape", m_workspace_other_shape, REFENC_EINVAL,
     "shape (2, 3) but the workspace is for (2, 4)"},
    {"batch_zero", m_batch_zero, REFENC_EINVAL, "batch (B) must be at least 1"},
};
#define N_INPUT_ERRORS (sizeof input_errors / sizeof input_errors[0])

ParameterizedTestParameters(encoder, forward_rejects_each_invalid_input)
{
    static size_t idx[N_INPUT_ERRORS];
    for (size_t i = 0; i < N_INPUT_ERRORS; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_INPUT_ERRORS);
}

ParameterizedTest(size_t *i, encoder, forward_rejects_each_invalid_input)
{
    input_case_data d;
    memset(&d, 0, sizeof d);
    const int64_t tokens[6] = {1, 2, 3, 4, 0, 1}, positions[3] = {0, 1, 2};
    memcpy(d.tokens, tokens, sizeof tokens);
    memcpy(d.positions, positions, sizeof positions);
    d.in = (refenc_input){.B = 2, .L = 3, .tokens = d.tokens};
    d.ws_B = 2, d.ws_L = 3, d.vocab = 1;
    input_errors[*i].mutate(&d);

    encoder_fixture f;
    refenc_config_default(&f.cfg);
    f.cfg.d_model = 4, f.cfg.n_heads = 2, f.cfg.d_ff = 3, f.cfg.n_layers = 1;
    f.cfg.vocab_size = d.vocab ? 5 : 0, f.cfg.positional = REFENC_POS_LEARNED, f.cfg.max_len = 6;
    fixture_alloc(&f, d.ws_B, d.ws_L);

    double y[24];
    for (int k = 0; k < 24; k++)
        y[k] = 2.385;
    refenc_error err;
    refenc_error_clear(&err);
    const int st = refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &d.in, NULL, &err);
    cr_expect_eq(st, input_errors[*i].status, "%s: status %d; message: %s", input_errors[*i].name, st,
                 err.message);
    cr_expect(strstr(err.message, input_errors[*i].fragment) != NULL, "%s: message '%s' lacks '%s'",
              input_errors[*i].name, err.message, input_errors[*i].fragment);
    for (int k = 0; k < 24; k++)
        cr_expect(y[k] == 2.385, "%s: y[%d] written on error", input_errors[*i].name, k);
    /* the embedding step alone checks the same */
    refenc_error_clear(&err);
    const int st_embed = refenc_encoder_embed(y, &f.ws, &f.p, &f.cfg, &d.in, &err);
    cr_expect_eq(st_embed, input_errors[*i].status, "%s (embed): status %d; message: %s", input_errors[*i].name,
                 st_embed, err.message);
    cr_expect(strstr(err.message, input_errors[*i].fragment) != NULL, "%s (embed): message '%s' lacks '%s'",
              input_errors[*i].name, err.message, input_errors[*i].fragment);
    for (int k = 0; k < 24; k++)
        cr_expect(y[k] == 2.385, "%s (embed): y[%d] written on error", input_errors[*i].name, k);
    fixture_free(&f);
}

/* Positive control for the table above: the base input is valid. */
Test(encoder, the_base_input_of_the_error_table_is_valid)
{
    encoder_fixture f;
    refenc_config_default(&f.cfg);
    f.cfg.d_model = 4, f.cfg.n_heads = 2, f.cfg.d_ff = 3, f.cfg.n_layers = 1;
    f.cfg.vocab_size = 5, f.cfg.positional = REFENC_POS_LEARNED, f.cfg.max_len = 6;
    fixture_alloc(&f, 2, 3);
    const int64_t tokens[6] = {1, 2, 3, 4, 0, 1}, positions[3] = {5, 0, 3};
    const uint8_t mask[6] = {0, 1, 0, 1, 0, 0};
    const double attn_mask[9] = {0, -INFINITY, 0.5, 0, 0, -1, -INFINITY, 0, 0};
    const refenc_input in = {.B = 2, .L = 3, .tokens = tokens, .positions = positions,
                             .key_padding_mask = mask, .attn_mask = attn_mask};
    double y[24];
    refenc_error err;
    cr_expect_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &in, NULL, &err), REFENC_OK, "%s",
                 err.message);
    fixture_free(&f);
}

/* ---- the embedding path of the families ------------------------------------------------
 * D = 4, V = 5, T = 2 token types, learned positions, no scale, the embedding
 * LayerNorm (BERT's order: (word + type) + position, then LN).  Dyadic
 * tables: every sum is exact, so "embed" must equal refenc_layernorm_forward
 * of the hand-built sums bit for bit. */
static void family_fixture(encoder_fixture *f, refenc_position_ids rule, size_t B, size_t L)
{
    refenc_config_default(&f->cfg);
    f->cfg.d_model = 4, f->cfg.n_heads = 2, f->cfg.d_ff = 3, f->cfg.n_layers = 1;
    f->cfg.vocab_size = 5, f->cfg.padding_idx = 1, f->cfg.type_vocab_size = 2;
    f->cfg.positional = REFENC_POS_LEARNED, f->cfg.max_len = 8, f->cfg.position_ids = rule;
    f->cfg.scale_embedding = 0, f->cfg.embedding_norm = 1, f->cfg.embedding_norm_eps = 1e-12;
    f->cfg.norm = REFENC_NORM_POST, f->cfg.final_norm = 0, f->cfg.mask_value = REFENC_MASK_FINFO_MIN;
    fixture_alloc(f, B, L);
    for (size_t i = 0; i < 20; i++)
        f->p.embedding[i] = 0.25 * (double)(i % 7) - 0.5;
    /* rows that differ by more than a constant vector (which the LN would remove) */
    for (size_t i = 0; i < 8; i++)
        f->p.token_type_embedding[i] = 0.0625 * (double)(i * i % 5);
    for (size_t i = 0; i < 32; i++)
        f->p.pos_embedding[i] = 0.125 * (double)(i % 9) - 0.375;
    for (size_t d = 0; d < 4; d++) {
        f->p.embedding_norm_weight[d] = 1.5 - 0.25 * (double)d;
        f->p.embedding_norm_bias[d] = 0.125 * (double)d;
    }
}

/* embed[b,l,:] = LN(E[tok] (* scale) + TT[type] + P[pos[b,l]]) as the kernels compute it */
static void hand_embed(double *want, const encoder_fixture *f, const int64_t *tokens,
                       const int64_t *types, const int64_t *pos, size_t BL, double scale)
{
    for (size_t bl = 0; bl < BL; bl++)
        for (size_t d = 0; d < 4; d++)
            want[bl * 4 + d] = f->p.embedding[tokens[bl] * 4 + d] * scale +
                               (types ? f->p.token_type_embedding[types[bl] * 4 + d] : 0.0) +
                               f->p.pos_embedding[pos[bl] * 4 + d];
    refenc_layernorm_forward(want, want, f->p.embedding_norm_weight, f->p.embedding_norm_bias, BL,
                             4, f->cfg.embedding_norm_eps);
}

static void embed_of(double *embed, encoder_fixture *f, const refenc_input *in)
{
    double y[64];
    trace_log log = {0};
    const refenc_trace tr = {trace_log_record, &log};
    refenc_error err;
    cr_assert_eq(refenc_encoder_forward(y, &f->ws, &f->p, &f->cfg, in, &tr, &err), REFENC_OK, "%s",
                 err.message);
    cr_assert_str_eq(log.name[0], "embed");
    memcpy(embed, log.value[0], in->B * in->L * 4 * sizeof(double));
    /* the step alone (refenc_encoder_embed, the layer inputs' first) is the same, bit for bit */
    double alone[64];
    cr_assert_eq(refenc_encoder_embed(alone, &f->ws, &f->p, &f->cfg, in, &err), REFENC_OK, "%s", err.message);
    cr_expect(memcmp(alone, embed, in->B * in->L * 4 * sizeof(double)) == 0,
              "refenc_encoder_embed differs from the stack's embed step");
    /* and so it is on a workspace for the embedding alone, which the whole
     * stack refuses (it has no layer buffers) */
    refenc_workspace small;
    cr_assert_eq(refenc_workspace_alloc_embed(&small, &f->cfg, in->B, in->L, &err), REFENC_OK, "%s", err.message);
    cr_expect_null(small.block);
    memset(alone, 0, sizeof alone);
    cr_assert_eq(refenc_encoder_embed(alone, &small, &f->p, &f->cfg, in, &err), REFENC_OK, "%s", err.message);
    cr_expect(memcmp(alone, embed, in->B * in->L * 4 * sizeof(double)) == 0,
              "refenc_encoder_embed on the embedding's workspace differs");
    cr_expect_eq(refenc_encoder_forward(y, &small, &f->p, &f->cfg, in, NULL, &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "embedding alone") != NULL, "%s", err.message);
    refenc_workspace_free(&small);
}

Test(encoder, embed_step_adds_token_types_and_positions_then_the_embedding_layernorm)
{
    encoder_fixture f;
    family_fixture(&f, REFENC_POSIDS_INDEX, 2, 3);
    const int64_t tokens[6] = {3, 0, 1, 4, 2, 2}, types[6] = {0, 1, 1, 1, 0, 1};
    const int64_t pos[6] = {0, 1, 2, 0, 1, 2};
    const refenc_input in = {.B = 2, .L = 3, .tokens = tokens, .token_types = types};
    double embed[24], want[24];
    embed_of(embed, &f, &in);
    hand_embed(want, &f, tokens, types, pos, 6, 1.0);
    for (int i = 0; i < 24; i++)
        EXPECT_EXACT(embed[i], want[i], "embed[%d,%d,%d]", i / 12, i / 4 % 3, i % 4);

    /* negative controls: token types ignored; the embedding LN left out */
    double no_types[24];
    hand_embed(no_types, &f, tokens, NULL, pos, 6, 1.0);
    cr_expect(memcmp(embed, no_types, sizeof embed) != 0, "token types made no difference");
    f.cfg.embedding_norm = 0;
    double raw[24];
    embed_of(raw, &f, &in);
    EXPECT_EXACT(raw[0], f.p.embedding[12] + f.p.token_type_embedding[0] + f.p.pos_embedding[0],
                 "without the embedding LN: the plain sum");
    cr_expect(raw[0] != embed[0], "the embedding LN made no difference");

    /* scale_embedding on: E[tok] sqrt(4) = 2 E[tok], still exact */
    f.cfg.embedding_norm = 1, f.cfg.scale_embedding = 1;
    double scaled[24];
    embed_of(scaled, &f, &in);
    hand_embed(want, &f, tokens, types, pos, 6, 2.0);
    for (int i = 0; i < 24; i++)
        EXPECT_EXACT(scaled[i], want[i], "scaled embed[%d]", i);
    fixture_free(&f);
}

/* Without in.token_type_ids every position is type 0 (HF's default), bit for
 * bit the same as passing zeros; type 1 somewhere changes the result. */
Test(encoder, missing_token_types_are_type_zero)
{
    encoder_fixture f;
    family_fixture(&f, REFENC_POSIDS_INDEX, 1, 4);
    const int64_t tokens[4] = {2, 3, 4, 0}, zeros[4] = {0, 0, 0, 0}, ones[4] = {0, 1, 0, 0};
    refenc_input in = {.B = 1, .L = 4, .tokens = tokens};
    double a[16], b[16], c[16];
    embed_of(a, &f, &in);
    in.token_types = zeros;
    embed_of(b, &f, &in);
    in.token_types = ones;
    embed_of(c, &f, &in);
    cr_expect(memcmp(a, b, sizeof a) == 0, "absent token types differ from explicit zeros");
    cr_expect(memcmp(a, c, sizeof a) != 0, "a type-1 position made no difference");
    fixture_free(&f);
}

/* RoBERTa's rule: padding_idx = 1; tokens [[3, 0, 1, 1], [1, 4, 2, 1]] (a pad
 * on the left and in the middle) take positions [[2, 3, 1, 1], [1, 2, 3, 1]]
 * (position_ids.h); positions 0..L-1 must not be used. */
Test(encoder, roberta_positions_come_from_the_tokens)
{
    encoder_fixture f;
    family_fixture(&f, REFENC_POSIDS_ROBERTA, 2, 4);
    const int64_t tokens[8] = {3, 0, 1, 1, 1, 4, 2, 1}, types[8] = {0};
    const int64_t pos[8] = {2, 3, 1, 1, 1, 2, 3, 1}, index[8] = {0, 1, 2, 3, 0, 1, 2, 3};
    const uint8_t mask[8] = {0, 0, 1, 1, 1, 0, 0, 1};
    const refenc_input in = {.B = 2, .L = 4, .tokens = tokens, .token_types = types,
                             .key_padding_mask = mask};
    double embed[32], want[32];
    embed_of(embed, &f, &in);
    hand_embed(want, &f, tokens, types, pos, 8, 1.0);
    for (int i = 0; i < 32; i++)
        EXPECT_EXACT(embed[i], want[i], "embed[%d,%d,%d]", i / 16, i / 4 % 4, i % 4);
    hand_embed(want, &f, tokens, types, index, 8, 1.0); /* negative control */
    cr_expect(memcmp(embed, want, sizeof embed) != 0, "positions 0..L-1 were used");
    fixture_free(&f);
}

/* Input checks of the embedding path: token types out of range or given
 * without a table, explicit positions under the RoBERTa rule. */
Test(encoder, forward_rejects_invalid_token_types_and_positions_under_roberta)
{
    encoder_fixture f;
    family_fixture(&f, REFENC_POSIDS_ROBERTA, 1, 3);
    const int64_t tokens[3] = {2, 3, 4}, bad_types[3] = {0, 2, 0}, neg_types[3] = {-1, 0, 0};
    const int64_t pos[3] = {2, 3, 4};
    double y[12];
    refenc_error err;
    const struct {
        refenc_input in;
        const char *fragment;
    } cases[] = {
        {{.B = 1, .L = 3, .tokens = tokens, .token_types = bad_types},
         "in.token_type_ids[0][1] = 2 is outside [0, type_vocab_size = 2)"},
        {{.B = 1, .L = 3, .tokens = tokens, .token_types = neg_types},
         "in.token_type_ids[0][0] = -1"},
        {{.B = 1, .L = 3, .tokens = tokens, .positions = pos},
         "in.positions is given but position_ids 'roberta' derives the positions from in.tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        refenc_error_clear(&err);
        cr_expect_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &cases[i].in, NULL, &err),
                     REFENC_EINVAL, "case %zu accepted", i);
        cr_expect(strstr(err.message, cases[i].fragment) != NULL, "case %zu: '%s' lacks '%s'", i,
                  err.message, cases[i].fragment);
    }
    fixture_free(&f);

    family_fixture(&f, REFENC_POSIDS_INDEX, 1, 3);
    f.cfg.type_vocab_size = 0; /* the params keep their table: only the input check matters */
    const int64_t types[3] = {0, 0, 0};
    const refenc_input in = {.B = 1, .L = 3, .tokens = tokens, .token_types = types};
    refenc_error_clear(&err);
    cr_expect_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &in, NULL, &err), REFENC_EINVAL);
    cr_expect(strstr(err.message, "in.token_type_ids is given but type_vocab_size = 0") != NULL,
              "%s", err.message);
    /* positive control: without the types the input is valid */
    const refenc_input ok = {.B = 1, .L = 3, .tokens = tokens};
    cr_expect_eq(refenc_encoder_forward(y, &f.ws, &f.p, &f.cfg, &ok, NULL, &err), REFENC_OK, "%s",
                 err.message);
    fixture_free(&f);
}

/* A vocabulary of one token: the unscaled lookup still reads the table (not
 * in.x), row 0 at every position; scaled, 2 E[0] for D = 4. */
Test(encoder, a_one_token_vocabulary_is_looked_up)
{
    encoder_fixture f;
    refenc_config_default(&f.cfg);
    f.cfg.d_model = 4, f.cfg.n_heads = 2, f.cfg.d_ff = 3, f.cfg.n_layers = 1, f.cfg.vocab_size = 1;
    f.cfg.scale_embedding = 0;
    fixture_alloc(&f, 1, 2);
    const double row[4] = {0.5, -1.25, 2.0, 0.375};
    memcpy(f.p.embedding, row, sizeof row);
    const int64_t tokens[2] = {0, 0};
    const refenc_input in = {.B = 1, .L = 2, .tokens = tokens};
    double embed[8];
    embed_of(embed, &f, &in);
    for (int i = 0; i < 8; i++)
        EXPECT_EXACT(embed[i], row[i % 4], "unscaled embed[0,%d,%d]", i / 4, i % 4);
    f.cfg.scale_embedding = 1;
    embed_of(embed, &f, &in);
    for (int i = 0; i < 8; i++)
        EXPECT_EXACT(embed[i], 2.0 * row[i % 4], "scaled embed[0,%d,%d]", i / 4, i % 4);
    fixture_free(&f);
}
