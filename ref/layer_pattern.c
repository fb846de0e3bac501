/* Local and global layers in double's reference (layer_pattern.h). */
#include "layer_pattern.h"

int refenc_layer_windowed(const refenc_config *cfg, size_t l)
{
    const size_t n = cfg->global_attn_every_n_layers, p = cfg->sliding_window_pattern;
    if (p != 0)
        return (l + 1) % p != 0; /* global iff (l + 1) % p == 0 */
    return n == 0 || l % n != 0; /* global iff l % n == 0 */
}

double refenc_layer_rope_base(const refenc_config *cfg, size_t l)
{
    if (cfg->global_attn_every_n_layers == 0 && cfg->sliding_window_pattern == 0)
        return cfg->rope_base;
    const double theta = refenc_layer_windowed(cfg, l) ? cfg->local_rope_theta : cfg->global_rope_theta;
    return theta != 0 ? theta : cfg->rope_base;
}

void refenc_layer_options(const refenc_config *cfg, size_t l, refenc_attn_options *opt,
                          refenc_rope_options *rope)
{
    if (opt && !refenc_layer_windowed(cfg, l))
        opt->sliding_window = 0, opt->local_attention = 0;
    if (rope) {
        rope->base = refenc_layer_rope_base(cfg, l);
        if (cfg->sliding_window_pattern != 0 && refenc_layer_windowed(cfg, l))
            rope->scaling = NULL; /* Gemma 3's local layers: unscaled */
    }
}
