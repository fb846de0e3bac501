/* Seeded random parameters for a config: what the golden generator and
 * `refenc run --config` use when no weights are given.  Needs GSL. */
#ifndef REFENC_RANDOM_PARAMS_H
#define REFENC_RANDOM_PARAMS_H

#include <gsl/gsl_rng.h>

#include "../core/config.h"
#include "../core/params.h"

/* Fills every parameter with Gaussian values from rng (GSL's Ziggurat
 * sampler), tensor by tensor in table order, element by element:
 *   weights of linear maps (in_proj, out_proj, linear1, linear2): N(0, 1/fan_in)
 *   their biases:                            N(0, 0.1^2)
 *   LayerNorm weights (gamma):               1 + N(0, 0.1^2)
 *   LayerNorm biases (beta):                 N(0, 0.1^2)
 *   embedding.weight:                        N(0, 1/D), padding row 0
 *   pos_embedding.weight:                    N(0, 0.5^2)
 * so activations stay of order 1.  The same rng state gives the same
 * values on every machine (mt19937 and the Ziggurat are exact integer and
 * double algorithms).  Never fails. */
void refenc_params_init_random(refenc_params *p, const refenc_config *cfg, gsl_rng *rng);

#endif
