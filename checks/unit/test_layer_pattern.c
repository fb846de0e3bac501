/* Local and global layers (ref/layer_pattern.h), worked out by hand: which
 * layers take the window and which RoPE base each rotates with, for the
 * periods ModernBERT and small stacks use; llama.cpp#18330's layer 0 (given
 * the local base) is the negative control of the first test. */
#include <criterion/criterion.h>

#include "../../ref/layer_pattern.h"
#include "unit.h"

/* 'G' global, 'L' local (windowed), layer l at column l */
static void expect_pattern(size_t n, const char *want)
{
    refenc_config c;
    refenc_config_default(&c);
    c.global_attn_every_n_layers = n;
    for (size_t l = 0; want[l] != '\0'; l++)
        cr_expect_eq(refenc_layer_windowed(&c, l), want[l] == 'L',
                     "global_attn_every_n_layers %zu: layer %zu should be %s", n, l,
                     want[l] == 'L' ? "local" : "global");
}

/* ModernBERT-base: n 3, 22 layers: 0, 3, 6, ..., 21 global; n 1: every
 * layer global; n 2: even layers global; n larger than the stack: layer 0
 * global only; no pattern: every layer takes the window. */
Test(layer_pattern, layer_types_by_hand)
{
    expect_pattern(3, "GLLGLLGLLGLLGLLGLLGLLG");
    expect_pattern(1, "GGGGGG");
    expect_pattern(2, "GLGLGL");
    expect_pattern(7, "GLLLLLL");
    expect_pattern(0, "LLLLLL");
}

/* The bases of ModernBERT (global 160 000, local 10 000) by layer, and
 * either theta left 0 falling back to rope_base.  Negative control: layer 0
 * is global, so its base is not the local one (llama.cpp#18330). */
Test(layer_pattern, rope_base_per_layer_type)
{
    refenc_config c;
    refenc_config_default(&c);
    c.rope_base = 500.0;
    cr_expect_eq(refenc_layer_rope_base(&c, 0), 500.0, "no pattern: rope_base");
    cr_expect_eq(refenc_layer_rope_base(&c, 4), 500.0, "no pattern: rope_base");
    c.global_attn_every_n_layers = 3, c.local_rope_theta = 10000.0, c.global_rope_theta = 160000.0;
    const double want[7] = {160000.0, 10000.0, 10000.0, 160000.0, 10000.0, 10000.0, 160000.0};
    for (size_t l = 0; l < 7; l++)
        cr_expect_eq(refenc_layer_rope_base(&c, l), want[l], "layer %zu: %g", l, refenc_layer_rope_base(&c, l));
    cr_expect_neq(refenc_layer_rope_base(&c, 0), c.local_rope_theta, "layer 0 is global");
    c.local_rope_theta = 0;
    cr_expect_eq(refenc_layer_rope_base(&c, 1), 500.0, "local 0: rope_base");
    cr_expect_eq(refenc_layer_rope_base(&c, 0), 160000.0);
    c.local_rope_theta = 10000.0, c.global_rope_theta = 0;
    cr_expect_eq(refenc_layer_rope_base(&c, 3), 500.0, "global 0: rope_base");
    cr_expect_eq(refenc_layer_rope_base(&c, 2), 10000.0);
    /* n 1: every layer global, every base the global one, not rope_base */
    c.global_attn_every_n_layers = 1, c.global_rope_theta = 160000.0;
    for (size_t l = 0; l < 4; l++)
        cr_expect_eq(refenc_layer_rope_base(&c, l), 160000.0, "n 1, layer %zu: %g", l, refenc_layer_rope_base(&c, l));
}

/* 'G' global, 'L' local under Gemma 3's sliding_window_pattern p */
static void expect_gemma3_pattern(size_t p, const char *want)
{
    refenc_config c;
    refenc_config_default(&c);
    c.sliding_window_pattern = p;
    for (size_t l = 0; want[l] != '\0'; l++)
        cr_expect_eq(refenc_layer_windowed(&c, l), want[l] == 'L', "sliding_window_pattern %zu: layer %zu should be %s",
                     p, l, want[l] == 'L' ? "local" : "global");
}

/* Gemma-3-1B: p 6, 26 layers: 5, 11, 17, 23 global (Gemma3TextConfig's
 * layer_types: "sliding_attention" iff (i + 1) % 6 != 0); p 1: every layer
 * global; p 2: odd layers global; p 3: 2, 5 global.  Negative control:
 * ModernBERT's rule with the same period makes layer 0 global, Gemma 3's
 * never does. */
Test(layer_pattern, gemma3_layer_types_by_hand)
{
    expect_gemma3_pattern(6, "LLLLLGLLLLLGLLLLLGLLLLLGLL");
    expect_gemma3_pattern(1, "GGGGGG");
    expect_gemma3_pattern(2, "LGLGLG");
    expect_gemma3_pattern(3, "LLGLLG");
    refenc_config c;
    refenc_config_default(&c);
    c.global_attn_every_n_layers = 6;
    cr_expect_eq(refenc_layer_windowed(&c, 0), 0, "control: ModernBERT's layer 0 is global");
    c.global_attn_every_n_layers = 0, c.sliding_window_pattern = 6;
    cr_expect_eq(refenc_layer_windowed(&c, 0), 1, "Gemma 3's layer 0 is local");
}

/* Each layer's options under Gemma 3's pattern p 3: the local layers keep
 * the window, rotate with local_rope_theta and unscaled (scaling NULL); the
 * global layer has no window, rope_base and the model's scaling.  Negative
 * control: under ModernBERT's rule (same period) a local layer keeps the
 * scaling. */
Test(layer_pattern, gemma3_local_layers_unscaled)
{
    refenc_config c;
    refenc_config_default(&c);
    c.rope_base = 1e6, c.local_rope_theta = 1e4, c.sliding_window = 4, c.causal = 1;
    c.rope_scaling.type = REFENC_ROPE_SCALING_LINEAR, c.rope_scaling.factor = 8;
    c.sliding_window_pattern = 3;
    for (size_t l = 0; l < 6; l++) {
        refenc_attn_options opt = {.sliding_window = 4};
        refenc_rope_options rope = {REFENC_ROPE_HALF, c.rope_base, NULL, &c.rope_scaling};
        refenc_layer_options(&c, l, &opt, &rope);
        const int global = (l + 1) % 3 == 0;
        cr_expect_eq(opt.sliding_window, global ? 0u : 4u, "layer %zu window %zu", l, opt.sliding_window);
        cr_expect_eq(rope.base, global ? 1e6 : 1e4, "layer %zu base %g", l, rope.base);
        cr_expect_eq(rope.scaling, global ? &c.rope_scaling : NULL, "layer %zu: scaled only if global", l);
    }
    c.sliding_window_pattern = 0, c.global_attn_every_n_layers = 3;
    refenc_rope_options rope = {REFENC_ROPE_HALF, c.rope_base, NULL, &c.rope_scaling};
    refenc_layer_options(&c, 1, NULL, &rope);
    cr_expect_eq(rope.scaling, &c.rope_scaling, "control: ModernBERT's local layer 1 keeps the scaling");
}
