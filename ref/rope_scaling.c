/* RoPE scaling in double (rope_scaling.h): the formulas of Hugging Face's
 * modeling_rope_utils.py, one function per rope type. */
#include "rope_scaling.h"

#include <math.h>

static const double TWO_PI = 6.283185307179586; /* fl(2 pi) */

int64_t refenc_rope_seq_len(const int64_t *pos, size_t L)
{
    int64_t m = 0;
    for (size_t l = 0; l < L; l++)
        m = pos[l] > m ? pos[l] : m;
    return m + 1;
}

/* base^(-2j/R) */
static double unscaled(size_t j, size_t R, double base)
{
    return pow(base, -((double)(2 * j) / (double)R));
}

double refenc_rope_scaled_base(double base, size_t R, const refenc_rope_scaling *s, int64_t S)
{
    if (s == NULL || s->type != REFENC_ROPE_SCALING_DYNAMIC || (double)S <= (double)s->max_position_embeddings)
        return base;
    const double grow = s->factor * (double)S / (double)s->max_position_embeddings - (s->factor - 1.0);
    return base * pow(grow, (double)R / (double)(R - 2));
}

/* YaRN's correction dim: the pair index whose wavelength makes `rotations`
 * turns over L0 positions: R ln(L0 / (rotations 2 pi)) / (2 ln base). */
static double correction_dim(double rotations, size_t R, double base, double L0)
{
    return (double)R * log(L0 / (rotations * TWO_PI)) / (2.0 * log(base));
}

static double yarn_frequency(size_t j, size_t R, double base, const refenc_rope_scaling *s)
{
    const double L0 = (double)(s->original_max_position_embeddings ? s->original_max_position_embeddings
                                                                     : s->max_position_embeddings);
    double lo = correction_dim(s->beta_fast, R, base, L0), hi = correction_dim(s->beta_slow, R, base, L0);
    if (s->truncate)
        lo = floor(lo), hi = ceil(hi);
    lo = lo > 0 ? lo : 0;
    hi = hi < (double)(R - 1) ? hi : (double)(R - 1);
    if (lo == hi)
        hi += 0.001; /* HF: avoids a division by zero, a step at lo */
    double r = ((double)j - lo) / (hi - lo);
    r = r < 0 ? 0 : r > 1 ? 1 : r;
    /* HF: extrapolation factor e = 1 - r; theta/s (1 - e) + theta e */
    const double theta = unscaled(j, R, base), e = 1.0 - r;
    return theta / s->factor * (1.0 - e) + theta * e;
}

static double llama3_frequency(size_t j, size_t R, double base, const refenc_rope_scaling *s)
{
    const double theta = unscaled(j, R, base), w = TWO_PI / theta;
    const double L0 = (double)s->original_max_position_embeddings;
    const double low = s->low_freq_factor, high = s->high_freq_factor;
    if (w < L0 / high) /* high frequencies: unchanged */
        return theta;
    if (w > L0 / low)  /* low frequencies: interpolated by s */
        return theta / s->factor;
    const double m = (L0 / w - low) / (high - low);
    return (1.0 - m) * theta / s->factor + m * theta;
}

/* GTE's ntk: the fixed NTK (base s)^(-2j/R) / s^(2/R), or with mixed_b the
 * unscaled theta_j / lambda_j, lambda_j = exp(a (j + 1)^b), a = ln s / (R/2)^b */
static double ntk_frequency(size_t j, size_t R, double base, const refenc_rope_scaling *s)
{
    if (!s->mixed)
        return unscaled(j, R, base * s->factor) / pow(s->factor, 2.0 / (double)R);
    const double a = log(s->factor) / pow((double)R / 2.0, s->mixed_b);
    return unscaled(j, R, base) / exp(a * pow((double)(j + 1), s->mixed_b));
}

double refenc_rope_scaled_frequency(size_t j, size_t R, double base, const refenc_rope_scaling *s,
                                    int64_t S)
{
    if (s == NULL)
        return unscaled(j, R, base);
    switch (s->type) {
    case REFENC_ROPE_SCALING_LINEAR: return unscaled(j, R, base) / s->factor;
    case REFENC_ROPE_SCALING_DYNAMIC: return unscaled(j, R, refenc_rope_scaled_base(base, R, s, S));
    case REFENC_ROPE_SCALING_YARN: return yarn_frequency(j, R, base, s);
    case REFENC_ROPE_SCALING_LLAMA3: return llama3_frequency(j, R, base, s);
    case REFENC_ROPE_SCALING_NTK: return ntk_frequency(j, R, base, s);
    case REFENC_ROPE_SCALING_LONGROPE: {
        const size_t L0 = s->original_max_position_embeddings ? s->original_max_position_embeddings
                                                              : s->max_position_embeddings;
        const double ext = (uint64_t)S > L0 ? s->long_factor[j] : s->short_factor[j];
        return unscaled(j, R, base) / ext;
    }
    default: return unscaled(j, R, base);
    }
}

/* YaRN's get_mscale: 0.1 m ln(s) + 1 for s > 1, else 1 */
static double yarn_mscale(double s, double m)
{
    return s <= 1.0 ? 1.0 : 0.1 * m * log(s) + 1.0;
}

double refenc_rope_attention_factor(const refenc_rope_scaling *s)
{
    if (s == NULL || (s->type != REFENC_ROPE_SCALING_YARN && s->type != REFENC_ROPE_SCALING_LONGROPE))
        return 1.0;
    if (s->attention_factor > 0)
        return s->attention_factor;
    if (s->type == REFENC_ROPE_SCALING_YARN)
        return s->mscale > 0 && s->mscale_all_dim > 0
                   ? yarn_mscale(s->factor, s->mscale) / yarn_mscale(s->factor, s->mscale_all_dim)
                   : yarn_mscale(s->factor, 1.0);
    /* longrope: s = max / original when original is given */
    const double L0 = (double)(s->original_max_position_embeddings ? s->original_max_position_embeddings
                                                                   : s->max_position_embeddings);
    const double f = s->original_max_position_embeddings
                         ? (double)s->max_position_embeddings / L0 : s->factor;
    return f <= 1.0 ? 1.0 : sqrt(1.0 + log(f) / log(L0));
}
