/* rope_scaling: defaults, names and validation (rope_scaling.h).  The
 * formulas are in ref/rope_scaling.c; docs/rope-scaling.md cites them. */
#include "rope_scaling.h"

#include <math.h>
#include <string.h>


void refenc_rope_scaling_default(refenc_rope_scaling *s)
{
    memset(s, 0, sizeof *s);
    s->type = REFENC_ROPE_SCALING_NONE;
    s->factor = 1.0;
    s->partial_rotary_factor = 1.0;
    s->beta_fast = 32.0, s->beta_slow = 1.0, s->truncate = 1;
    s->low_freq_factor = 1.0, s->high_freq_factor = 4.0;
}

size_t refenc_rope_scaling_rotary_dim(const refenc_rope_scaling *s, size_t Dh)
{
    return (size_t)floor((double)Dh * s->partial_rotary_factor);
}

#define BAD(...) refenc_error_set(err, REFENC_EINVAL, "config: rope_scaling." __VA_ARGS__)

/* x finite and > lo (strict) or >= lo. */
static int in_range(double x, double lo, int strict)
{
    return isfinite(x) && (strict ? x > lo : x >= lo);
}

/* The rotated part: R even, R >= 2 (dynamic: R >= 4, its exponent R/(R-2)). */
static int validate_rotary(const refenc_rope_scaling *s, size_t Dh, refenc_error *err)
{
    const double p = s->partial_rotary_factor;
    if (!isfinite(p) || !(p > 0) || p > 1)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: partial_rotary_factor must be in (0, 1], got %.17g", p);
    const size_t R = refenc_rope_scaling_rotary_dim(s, Dh), min = s->type == REFENC_ROPE_SCALING_DYNAMIC ? 4 : 2;
    if (R % 2 != 0 || R < min)
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: partial_rotary_factor %.17g gives rotary_dim floor(%zu * %.17g) = %zu, "
                                "which must be even and >= %zu", p, Dh, p, R, min);
    return REFENC_OK;
}

static int validate_yarn(const refenc_rope_scaling *s, refenc_error *err)
{
    if (s->original_max_position_embeddings == 0 && s->max_position_embeddings == 0)
        return BAD("original_max_position_embeddings: 'yarn' needs it (or max_position_embeddings) >= 1");
    if (!in_range(s->beta_fast, 0, 1))
        return BAD("beta_fast must be finite and > 0, got %.17g", s->beta_fast);
    if (!in_range(s->beta_slow, 0, 1) || s->beta_slow > s->beta_fast)
        return BAD("beta_slow must be finite, > 0 and <= beta_fast = %.17g, got %.17g", s->beta_fast,
                   s->beta_slow);
    if (!in_range(s->mscale, 0, 0))
        return BAD("mscale must be finite and >= 0, got %.17g", s->mscale);
    if (!in_range(s->mscale_all_dim, 0, 0))
        return BAD("mscale_all_dim must be finite and >= 0, got %.17g", s->mscale_all_dim);
    if (s->truncate != 0 && s->truncate != 1)
        return BAD("truncate must be true or false");
    return REFENC_OK;
}

static int validate_llama3(const refenc_rope_scaling *s, refenc_error *err)
{
    if (s->original_max_position_embeddings == 0)
        return BAD("original_max_position_embeddings: 'llama3' needs it >= 1");
    if (!in_range(s->low_freq_factor, 0, 1))
        return BAD("low_freq_factor must be finite and > 0, got %.17g", s->low_freq_factor);
    if (!in_range(s->high_freq_factor, s->low_freq_factor, 1))
        return BAD("high_freq_factor must be finite and > low_freq_factor = %.17g, got %.17g",
                   s->low_freq_factor, s->high_freq_factor);
    return REFENC_OK;
}

static int validate_longrope(const refenc_rope_scaling *s, size_t R, refenc_error *err)
{
    if (s->max_position_embeddings == 0)
        return BAD("max_position_embeddings: 'longrope' needs it >= 1");
    if (s->n_factors != R / 2)
        return BAD("short_factor: 'longrope' needs rotary_dim / 2 = %zu factors, got %zu", R / 2,
                   s->n_factors);
    for (size_t j = 0; j < s->n_factors; j++) {
        if (!in_range(s->short_factor[j], 0, 1))
            return BAD("short_factor[%zu] must be finite and > 0, got %.17g", j, s->short_factor[j]);
        if (!in_range(s->long_factor[j], 0, 1))
            return BAD("long_factor[%zu] must be finite and > 0, got %.17g", j, s->long_factor[j]);
    }
    return REFENC_OK;
}

/* GTE's ntk: mixed_b only with it, finite and > 0 when given. */
static int validate_mixed_b(const refenc_rope_scaling *s, refenc_error *err)
{
    if (s->mixed && s->type != REFENC_ROPE_SCALING_NTK)
        return BAD("mixed_b: only the type 'ntk' reads it, the type is '%s'", refenc_rope_scaling_name(s->type));
    if (s->mixed && !in_range(s->mixed_b, 0, 1))
        return BAD("mixed_b must be finite and > 0, got %.17g", s->mixed_b);
    return REFENC_OK;
}

int refenc_rope_scaling_validate(const refenc_rope_scaling *s, int rope, size_t Dh, refenc_error *err)
{
    if ((unsigned)s->type > REFENC_ROPE_SCALING_NTK)
        return BAD("rope_type is not a known type");
    if (!rope && (s->type != REFENC_ROPE_SCALING_NONE || s->partial_rotary_factor != 1.0))
        return refenc_error_set(err, REFENC_EINVAL,
                                "config: rope_scaling and partial_rotary_factor need positional 'rope'");
    if (!rope)
        return REFENC_OK;
    int st = validate_rotary(s, Dh, err);
    if (st || (st = validate_mixed_b(s, err)) || s->type == REFENC_ROPE_SCALING_NONE)
        return st;
    if (!in_range(s->factor, 1, 0))
        return BAD("factor must be finite and >= 1, got %.17g", s->factor);
    if (!in_range(s->attention_factor, 0, 0))
        return BAD("attention_factor must be finite and > 0 (0: derived), got %.17g", s->attention_factor);
    switch (s->type) {
    case REFENC_ROPE_SCALING_DYNAMIC:
        return s->max_position_embeddings == 0
                   ? BAD("max_position_embeddings: 'dynamic' needs it >= 1 (the length L0 beyond which the base grows)")
                   : REFENC_OK;
    case REFENC_ROPE_SCALING_YARN: return validate_yarn(s, err);
    case REFENC_ROPE_SCALING_LLAMA3: return validate_llama3(s, err);
    case REFENC_ROPE_SCALING_LONGROPE: return validate_longrope(s, refenc_rope_scaling_rotary_dim(s, Dh), err);
    default: return REFENC_OK;
    }
}

static const char *const type_names[] = {"default", "linear", "dynamic", "yarn", "llama3", "longrope", "ntk"};
#define N_TYPES (sizeof type_names / sizeof *type_names)

const char *refenc_rope_scaling_name(refenc_rope_scaling_type t)
{
    return (unsigned)t < N_TYPES ? type_names[t] : "?";
}

int refenc_rope_scaling_parse(refenc_rope_scaling_type *t, const char *name, const char *field,
                              refenc_error *err)
{
    for (size_t i = 0; i < N_TYPES; i++)
        if (strcmp(name, type_names[i]) == 0) {
            *t = (refenc_rope_scaling_type)i;
            return REFENC_OK;
        }
    return refenc_error_set(err, REFENC_EINVAL,
                            "%s: unknown name '%s' (known: default, linear, dynamic, yarn, llama3, longrope, ntk)",
                            field, name);
}
