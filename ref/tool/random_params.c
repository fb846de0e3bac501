/* Seeded random parameters (GSL's mt19937 and Ziggurat sampler). */
#include "random_params.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_randist.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

void refenc_params_init_random(refenc_params *p, const refenc_config *cfg, gsl_rng *rng)
{
    for (size_t t = 0; t < p->n_tensors; t++) {
        refenc_tensor *x = &p->tensors[t];
        double mean = 0.0, sigma;
        if (strcmp(x->name, "embedding.weight") == 0)
            sigma = 1.0 / sqrt((double)cfg->d_model);
        else if (strcmp(x->name, "pos_embedding.weight") == 0)
            sigma = 0.5;
        else if (strstr(x->name, "relative_attention_bias") != NULL)
            sigma = 1.0; /* T5's (nb, H) table: biases of the order of the unscaled scores */
        else if (strstr(x->name, "norm") != NULL) { /* norm1, norm2, norm: gamma and beta */
            sigma = 0.1; /* the scale near 1: Gemma's w stores (scale - 1), so it is near 0 */
            mean = ends_with(x->name, ".weight") && !cfg->rmsnorm_offset ? 1.0 : 0.0;
        } else if (ends_with(x->name, "weight")) /* linear maps: (out, in) */
            sigma = 1.0 / sqrt((double)x->shape[1]);
        else
            sigma = 0.1; /* biases of linear maps */

        for (size_t i = 0; i < x->size; i++)
            x->data[i] = mean + gsl_ran_gaussian_ziggurat(rng, sigma);
    }
    if (p->embedding != NULL && cfg->padding_idx >= 0)
        memset(p->embedding + (size_t)cfg->padding_idx * cfg->d_model, 0,
               cfg->d_model * sizeof(double));
}
