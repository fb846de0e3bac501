#include "catalogue.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "../io/config_json.h"
#include "../io/file_read.h"
#include "../io/run_config.h"
#include "../tool/random_params.h"

static const char *const case_keys[] = {"case", "component", "description", "model", "input", "seed",
                                        "input_bits", "bug_classes", "tolerance", "float32_hazard",
                                        "params", "embedding_std", "grad", "outputs", NULL};
static const char *const input_keys[] = {"batch", "seq_len", "padding", "padding_side",
                                         "positions_start", "positions", "x_mean", "x_scale", "x_grid",
                                         "attn_mask", "masked_fraction", "fully_masked_rows", "rows", NULL};

json_t *catalogue_load(const char *path, refenc_error *err)
{
    /* a regular file only (a FIFO would block the read), as every reader */
    char *text;
    size_t n;
    if (refenc_read_file(&text, &n, path, (size_t)16 << 20, err) != REFENC_OK)
        return NULL;
    json_error_t jerr;
    json_t *doc = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (doc == NULL) {
        refenc_error_set(err, REFENC_EINVAL, "%s: line %d, column %d: %s", path, jerr.line, jerr.column,
                         jerr.text);
        return NULL;
    }
    const json_t *cases = json_object_get(doc, "cases");
    if (!json_is_array(cases)) {
        refenc_error_set(err, REFENC_EINVAL, "%s: expected an object with a \"cases\" array", path);
        json_decref(doc);
        return NULL;
    }
    size_t i;
    json_t *e;
    json_array_foreach(cases, i, e) {
        char where[4200];
        snprintf(where, sizeof where, "%s: cases[%zu]", path, i);
        int st = !json_is_object(e) ? refenc_error_set(err, REFENC_EINVAL, "%s is not an object", where)
                                    : refenc_json_check_keys(e, case_keys, where, err);
        if (st == REFENC_OK && !json_is_string(json_object_get(e, "case")))
            st = refenc_error_set(err, REFENC_EINVAL, "%s needs a \"case\" name", where);
        if (st != REFENC_OK) {
            json_decref(doc);
            return NULL;
        }
    }
    return doc;
}

const char *catalogue_case_name(const json_t *catalogue, size_t i)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(catalogue, "cases"), i), "case"));
}

int catalogue_find(catalogue_case *cc, const json_t *catalogue, const char *name, refenc_error *err)
{
    const json_t *cases = json_object_get(catalogue, "cases");
    size_t i;
    json_t *e;
    memset(cc, 0, sizeof *cc);
    json_array_foreach(cases, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "case")), name) != 0)
            continue;
        cc->entry = e;
        cc->name = name;
        cc->description = json_string_value(json_object_get(e, "description"));
        const char *comp = json_string_value(json_object_get(e, "component"));
        const json_t *seed = json_object_get(e, "seed");
        const json_t *bits = json_object_get(e, "input_bits");
        if (cc->description == NULL || comp == NULL || !refenc_component_parse(&cc->component, comp) ||
            !json_is_integer(seed) || json_integer_value(seed) < 0)
            return refenc_error_set(err, REFENC_EINVAL,
                                    "case %s: needs a description, a known component and a seed >= 0", name);
        cc->seed = (unsigned long)json_integer_value(seed);
        cc->input_bits = bits ? (int)json_integer_value(bits) : 8;
        if (cc->input_bits != 8 && cc->input_bits != 24)
            return refenc_error_set(err, REFENC_EINVAL, "case %s: input_bits must be 8 or 24", name);
        const json_t *grad = json_object_get(e, "grad");
        if (grad != NULL && !json_is_boolean(grad))
            return refenc_error_set(err, REFENC_EINVAL, "case %s: grad must be true or false", name);
        cc->grad = json_is_true(grad);
        /* "outputs": "final", as --outputs final: the required outputs only (a long case's
         * (B, L, ...) steps would weigh megabytes) */
        const json_t *outs = json_object_get(e, "outputs");
        const char *os = json_string_value(outs);
        if (outs != NULL && (os == NULL || (strcmp(os, "all") != 0 && strcmp(os, "final") != 0)))
            return refenc_error_set(err, REFENC_EINVAL, "case %s: outputs must be \"all\" or \"final\"", name);
        cc->final_only = os != NULL && strcmp(os, "final") == 0;
        /* a case file's bug_classes is an array of names (the manifest and certify read it so) */
        const json_t *bugs = json_object_get(e, "bug_classes");
        size_t k;
        json_t *b;
        int names = json_is_array(bugs);
        json_array_foreach(bugs, k, b)
            names &= json_is_string(b);
        if (bugs != NULL && !names)
            return refenc_error_set(err, REFENC_EINVAL, "case %s: bug_classes must be an array of bug class "
                                    "names", name);
        const json_t *tol = json_object_get(e, "tolerance"), *hazard = json_object_get(e, "float32_hazard");
        if (tol != NULL && !json_is_object(tol))
            return refenc_error_set(err, REFENC_EINVAL, "case %s: tolerance must be an object", name);
        if (hazard != NULL && !json_is_string(hazard))
            return refenc_error_set(err, REFENC_EINVAL, "case %s: float32_hazard must be a string", name);
        return REFENC_OK;
    }
    return refenc_error_set(err, REFENC_EINVAL, "no case named '%s' in the catalogue", name);
}

double catalogue_round(double x, int bits)
{
    if (x == 0 || !isfinite(x))
        return x;
    if (bits <= 8) {
        if (fabs(x) < 0x1p-14)
            return 0.0;
        if (fabs(x) > 65280.0) /* the largest 8-bit value within float16's range */
            return copysign(65280.0, x);
    }
    int e;
    const double m = frexp(x, &e); /* x = m 2^e, 0.5 <= |m| < 1 */
    return ldexp(nearbyint(ldexp(m, bits)), e - bits);
}

static double number(const json_t *obj, const char *key, double dflt)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* "params": {"<name>": {"mean": m, "scale": s}, ...}: every parameter tensor
 * whose name is <name> or ends in ".<name>" (e.g. "linear1.bias" for every
 * layer's) is redrawn as N(m, s^2) (mean 0 and scale 0 by default), in the
 * catalogue's order, from the case's generator. */
static int override_params(refenc_case *c, const json_t *params, gsl_rng *rng, const char *where,
                           refenc_error *err)
{
    static const char *const keys[] = {"mean", "scale", NULL};
    const char *name;
    json_t *spec;
    if (params != NULL && !json_is_object(params))
        return refenc_error_set(err, REFENC_EINVAL, "%s: params must be an object", where);
    json_object_foreach((json_t *)params, name, spec) {
        int st;
        size_t hits = 0;
        char swhere[512];
        snprintf(swhere, sizeof swhere, "%s: params.%s", where, name);
        if (!json_is_object(spec) || (st = refenc_json_check_keys(spec, keys, swhere, err)))
            return json_is_object(spec) ? st : refenc_error_set(err, REFENC_EINVAL, "%s: params.%s must be an "
                                                                "object {\"mean\", \"scale\"}", where, name);
        const double mean = number(spec, "mean", 0.0), scale = number(spec, "scale", 0.0);
        for (size_t t = 0; t < c->params.n_tensors; t++) {
            const refenc_tensor *p = &c->params.tensors[t];
            const size_t n = strlen(p->name), k = strlen(name);
            if (!(n == k || (n > k && p->name[n - k - 1] == '.')) || strcmp(p->name + n - k, name) != 0)
                continue;
            for (size_t i = 0; i < p->size; i++)
                p->data[i] = mean + (scale > 0 ? gsl_ran_gaussian_ziggurat(rng, scale) : 0.0);
            hits++;
        }
        if (hits == 0)
            return refenc_error_set(err, REFENC_EINVAL, "%s: params.%s names no parameter of the case", where, name);
    }
    return REFENC_OK;
}

/* The embedding tables, word, type and position, rescaled to N(0, embedding_std^2) when the case
 * says: BERT's initializer_range 0.02 makes rows of small variance, where the embedding
 * LayerNorm's eps shows. */
static int scale_embeddings(refenc_case *c, const catalogue_case *cc, const refenc_config *cfg,
                            refenc_error *err)
{
    const json_t *estd = json_object_get(cc->entry, "embedding_std");
    if (estd == NULL)
        return REFENC_OK;
    if (!json_is_number(estd) || !(json_number_value(estd) > 0))
        return refenc_error_set(err, REFENC_EINVAL, "case %s: embedding_std must be a number > 0", cc->name);
    const double s = json_number_value(estd), s_tok = s * sqrt((double)cfg->d_model);
    refenc_params *p = &c->params;
    for (size_t i = 0; p->embedding != NULL && i < cfg->vocab_size * cfg->d_model; i++)
        p->embedding[i] *= s_tok; /* drawn N(0, 1/D) */
    for (size_t i = 0; p->token_type_embedding != NULL && i < cfg->type_vocab_size * cfg->d_model; i++)
        p->token_type_embedding[i] *= s_tok;
    for (size_t i = 0; p->pos_embedding != NULL && i < cfg->max_len * cfg->d_model; i++)
        p->pos_embedding[i] *= s / 0.5; /* drawn N(0, 0.25) */
    return REFENC_OK;
}

/* Parameters: the documented Gaussian scales (the embeddings rescaled as the case says), then some
 * redrawn as the case says ("params"), rounded. */
static int seeded_params(refenc_case *c, const catalogue_case *cc, const refenc_config *cfg, gsl_rng *rng,
                         refenc_error *err)
{
    refenc_params_init_random(&c->params, cfg, rng);
    int st = scale_embeddings(c, cc, cfg, err);
    if (st)
        return st;
    char pwhere[160];
    snprintf(pwhere, sizeof pwhere, "case %s", cc->name);
    st = override_params(c, json_object_get(cc->entry, "params"), rng, pwhere, err);
    if (st)
        return st;
    for (size_t i = 0; i < c->params.n_values; i++)
        c->params.block[i] = catalogue_round(c->params.block[i], cc->input_bits);
    return REFENC_OK;
}

/* Explicit positions: L integers in [0, 2^31) (long-context cases put
 * them on both sides of a RoPE scaling's band edges, up to 131 072). */
static int explicit_positions(refenc_case *c, const json_t *pa, size_t L, const char *where, refenc_error *err)
{
    if (!json_is_array(pa) || json_array_size(pa) != L)
        return refenc_error_set(err, REFENC_EINVAL, "%s.positions: expected an array of seq_len = %zu integers",
                                where, L);
    for (size_t l = 0; l < L; l++) {
        const json_t *p = json_array_get(pa, l);
        if (!json_is_integer(p) || json_integer_value(p) < 0 || json_integer_value(p) >= ((json_int_t)1 << 31))
            return refenc_error_set(err, REFENC_EINVAL, "%s.positions[%zu]: expected an integer in [0, 2^31)",
                                    where, l);
        c->positions[l] = (int64_t)json_integer_value(p);
    }
    c->has_positions = 1;
    return REFENC_OK;
}

/* Positions from positions_start (or the explicit list), and whether the case has them. */
static void set_positions(refenc_case *c, const json_t *in, const catalogue_case *cc, const refenc_config *cfg,
                          size_t L)
{
    const json_t *ps = json_object_get(in, "positions_start");
    c->has_positions = ps != NULL || cc->component == REFENC_COMP_SINUSOIDAL_PE ||
                       cc->component == REFENC_COMP_ROPE || cc->component == REFENC_COMP_ALIBI ||
                       cfg->positional != REFENC_POS_NONE;
    if (cfg->position_ids == REFENC_POSIDS_ROBERTA) /* derived from the tokens, never given */
        c->has_positions = 0;
    for (size_t l = 0; l < L; l++)
        c->positions[l] = (ps ? (int64_t)json_integer_value(ps) : 0) + (int64_t)l;
}

/* Key padding: the last (or first) padding[b] positions of item b. */
static int set_padding(refenc_case *c, const json_t *padding, int left, size_t B, size_t L, const char *where,
                       refenc_error *err)
{
    if (!json_is_array(padding) || json_array_size(padding) != B)
        return refenc_error_set(err, REFENC_EINVAL, "%s.padding: expected %zu integers", where, B);
    for (size_t b = 0; b < B; b++) {
        const size_t pad = (size_t)json_integer_value(json_array_get(padding, b));
        for (size_t l = 0; l < L; l++)
            c->key_padding_mask[b * L + l] = left ? l < pad : l >= L - (pad < L ? pad : L);
    }
    return REFENC_OK;
}

/* Tokens, never the padding token except at padded positions; then the token types (drawn after
 * every token, so that cases without them keep their stream): uniform, 0 at padded positions. */
static void seeded_tokens(refenc_case *c, const refenc_config *cfg, size_t B, size_t L, gsl_rng *rng)
{
    for (size_t i = 0; i < B * L; i++) {
        int64_t t;
        if (cfg->padding_idx >= 0 && cfg->vocab_size > 1) {
            t = (int64_t)gsl_rng_uniform_int(rng, (unsigned long)cfg->vocab_size - 1);
            if (t >= cfg->padding_idx)
                t++;
        } else {
            t = (int64_t)gsl_rng_uniform_int(rng, (unsigned long)cfg->vocab_size);
        }
        c->tokens[i] = c->key_padding_mask && c->key_padding_mask[i] && cfg->padding_idx >= 0
                           ? cfg->padding_idx : t;
    }
    for (size_t i = 0; c->token_types != NULL && i < B * L; i++) {
        const int64_t t = (int64_t)gsl_rng_uniform_int(rng, (unsigned long)cfg->type_vocab_size);
        c->token_types[i] = c->key_padding_mask && c->key_padding_mask[i] ? 0 : t;
    }
}

/* x: Gaussian N(x_mean, x_scale^2), or an even grid over x_grid = [lo, hi]; then the masked logits. */
static void seeded_x(refenc_case *c, const json_t *in, int bits, size_t B, size_t L, gsl_rng *rng)
{
    const json_t *grid = json_object_get(in, "x_grid");
    const double mean = number(in, "x_mean", 0.0), scale = number(in, "x_scale", 1.0);
    for (size_t i = 0; i < c->x_numel; i++) {
        double v;
        if (json_is_array(grid)) {
            const double lo = json_number_value(json_array_get(grid, 0));
            const double hi = json_number_value(json_array_get(grid, 1));
            v = c->x_numel > 1 ? lo + (hi - lo) * (double)i / (double)(c->x_numel - 1) : lo;
        } else {
            v = mean + gsl_ran_gaussian_ziggurat(rng, scale);
        }
        c->x[i] = catalogue_round(v, bits);
    }
    /* softmax logits: some entries masked (-inf), some rows entirely */
    const double frac = number(in, "masked_fraction", 0.0);
    if (frac > 0)
        for (size_t i = 0; i < c->x_numel; i++)
            if (gsl_rng_uniform(rng) < frac)
                c->x[i] = -INFINITY;
    const json_t *rows = json_object_get(in, "fully_masked_rows");
    size_t k;
    json_t *r;
    json_array_foreach(rows, k, r) {
        const size_t row = (size_t)json_integer_value(r);
        for (size_t j = 0; j < L && row < B; j++)
            c->x[row * L + j] = -INFINITY;
    }
}

/* Additive attention mask: N(0, 1) values, a quarter -inf off the diagonal. */
static void seeded_attn_mask(refenc_case *c, int bits, size_t L, gsl_rng *rng)
{
    for (size_t i = 0; i < L; i++)
        for (size_t j = 0; j < L; j++) {
            const double u = gsl_rng_uniform(rng);
            const double v = catalogue_round(gsl_ran_gaussian_ziggurat(rng, 1.0), bits);
            c->attn_mask[i * L + j] = i != j && u < 0.25 ? -INFINITY : v;
        }
}

/* Fills the case's parameters and inputs from the seed, in a fixed order of draws. */
static int seeded_values(refenc_case *c, const catalogue_case *cc, const refenc_config *cfg, const json_t *in,
                         size_t B, size_t L, const char *where, refenc_error *err)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (rng == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", cc->name);
    gsl_rng_set(rng, cc->seed);
    int st = seeded_params(c, cc, cfg, rng, err);
    if (st == REFENC_OK)
        set_positions(c, in, cc, cfg, L);
    if (st == REFENC_OK && json_object_get(in, "positions") != NULL)
        st = explicit_positions(c, json_object_get(in, "positions"), L, where, err);
    const json_t *padding = json_object_get(in, "padding");
    const char *side = json_string_value(json_object_get(in, "padding_side"));
    if (st == REFENC_OK && padding != NULL)
        st = set_padding(c, padding, side != NULL && strcmp(side, "left") == 0, B, L, where, err);
    if (st == REFENC_OK && c->tokens != NULL)
        seeded_tokens(c, cfg, B, L, rng);
    if (st == REFENC_OK && c->x != NULL)
        seeded_x(c, in, cc->input_bits, B, L, rng);
    if (st == REFENC_OK && c->attn_mask != NULL)
        seeded_attn_mask(c, cc->input_bits, L, rng);
    gsl_rng_free(rng);
    return st;
}

int catalogue_build(refenc_case *c, const catalogue_case *cc, refenc_error *err)
{
    char where[160];
    refenc_config cfg;
    memset(c, 0, sizeof *c); /* on failure c holds nothing (refenc_case_free is harmless) */
    snprintf(where, sizeof where, "case %s: model", cc->name);
    int st = refenc_config_from_json(&cfg, json_object_get(cc->entry, "model"), where, err);
    if (st)
        return st;

    const json_t *in = json_object_get(cc->entry, "input");
    snprintf(where, sizeof where, "case %s: input", cc->name);
    if (!json_is_object(in))
        return refenc_error_set(err, REFENC_EINVAL, "%s: expected an object", where);
    if ((st = refenc_json_check_keys(in, input_keys, where, err)))
        return st;
    size_t B = 1, L = 1;
    if ((st = refenc_json_get_size(&B, in, "batch", where, err)) ||
        (st = refenc_json_get_size(&L, in, "seq_len", where, err)))
        return st;

    const json_t *padding = json_object_get(in, "padding");
    const json_t *attn = json_object_get(in, "attn_mask");
    const int with_tokens = cc->component == REFENC_COMP_ENCODER && cfg.vocab_size > 0;
    if ((st = refenc_case_alloc(c, cc->component, &cfg, B, L, with_tokens, padding != NULL,
                                attn != NULL, err)))
        return st;
    snprintf(c->name, sizeof c->name, "%s", cc->name);
    st = seeded_values(c, cc, &cfg, in, B, L, where, err);
    const json_t *rows = json_object_get(in, "rows"); /* the last layer's query rows (rows.h) */
    if (st == REFENC_OK && rows != NULL)
        st = run_input_rows(&c->rows, &c->R, rows, L, where, err);
    if (st == REFENC_OK)
        st = refenc_case_validate(c, err);
    if (st != REFENC_OK)
        refenc_case_free(c);
    return st;
}
