/* Attention windows (ref/window.h), worked out by hand: the masks of small
 * windows as tables, the two edges of each rule (the off-by-one bugs on
 * record are one key past an edge), and attention with equal scores, where
 * each weight is exactly 1 / (the number of keys the query sees). */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/attention.h"
#include "../../ref/window.h"
#include "unit.h"

enum { WL = 6 };

/* '1' where refenc_window_excludes(sw, la, i, j) is 1, row i */
static void expect_table(size_t sw, size_t la, const char *const rows[WL])
{
    for (size_t i = 0; i < WL; i++)
        for (size_t j = 0; j < WL; j++)
            cr_expect_eq(refenc_window_excludes(sw, la, i, j), rows[i][j] == '1',
                         "sliding_window %zu, local_attention %zu: (i %zu, j %zu) should be %s", sw, la, i,
                         j, rows[i][j] == '1' ? "outside" : "inside");
}

/* sliding_window 3: |i - j| <= 2 (with the causal mask: i-2 .. i, 3 keys);
 * local_attention 4 and 5: 4 // 2 = 5 // 2 = 2, the same band;
 * local_attention 3: 3 // 2 = 1; both windows: the narrower band. */
Test(window, masks_by_hand)
{
    const char *const band2[WL] = {"000111", "000011", "000001", "100000", "110000", "111000"};
    const char *const band1[WL] = {"001111", "000111", "100011", "110001", "111000", "111100"};
    const char *const none[WL] = {"000000", "000000", "000000", "000000", "000000", "000000"};
    const char *const self[WL] = {"011111", "101111", "110111", "111011", "111101", "111110"};
    expect_table(3, 0, band2);
    expect_table(0, 4, band2);
    expect_table(0, 5, band2);
    expect_table(0, 3, band1);
    expect_table(3, 3, band1);
    expect_table(0, 0, none);
    expect_table(1, 0, self); /* a window of 1: the query's own key */
    expect_table(0, 1, self); /* 1 // 2 = 0 */
    expect_table(6, 0, none); /* w >= L: every key */
}

/* The edges: the causal window sees i - j = w - 1 and not w (w keys, Hugging
 * Face's kv_idx > q_idx - w); the symmetric one sees |i - j| = w // 2 and not
 * w // 2 + 1 (ModernBERT's |i - j| <= local_attention // 2).  Negative
 * control: the off-by-one rules of the reports each disagree at an edge. */
Test(window, edges_are_inclusive_as_hugging_face)
{
    const size_t ws[] = {1, 2, 4, 5, 128, 4096};
    for (size_t c = 0; c < sizeof ws / sizeof ws[0]; c++) {
        const size_t w = ws[c], i = 10000;
        cr_expect(!refenc_window_excludes(w, 0, i, i - (w - 1)), "sw %zu: i - j = w - 1 must be seen", w);
        cr_expect(refenc_window_excludes(w, 0, i, i - w), "sw %zu: i - j = w must be cut", w);
        cr_expect(!refenc_window_excludes(0, w, i, i - w / 2), "la %zu: |i-j| = w/2 must be seen", w);
        cr_expect(!refenc_window_excludes(0, w, i, i + w / 2), "la %zu: j - i = w/2 must be seen", w);
        cr_expect(refenc_window_excludes(0, w, i, i - w / 2 - 1), "la %zu: |i-j| = w/2+1 must be cut", w);
        cr_expect(refenc_window_excludes(0, w, i, i + w / 2 + 1), "la %zu: j-i = w/2+1 must be cut", w);
        /* negative controls: FlashAttention's (w, w) sees i - j = w (2w+1
         * keys), the exclusive rule (sglang#26147) cuts i - j = w - 1 */
        const size_t j_fa = i - w, j_excl = i - (w - 1);
        cr_expect((i - j_fa <= w) && refenc_window_excludes(w, 0, i, j_fa),
                  "sw %zu: (w, w) and the inclusive rule must differ at i - j = w", w);
        cr_expect(!(i - j_excl < w - 1) && !refenc_window_excludes(w, 0, i, j_excl),
                  "sw %zu: the exclusive rule and the inclusive one must differ at i - j = w - 1", w);
    }
}

/* With q = k = 0 every score is 0: row i weighs each key it sees ('1' in
 * seen[i]) exactly 1/n, n the keys it sees, and the others 0. */
static void expect_uniform_over_seen(const double *w, const char *const seen[WL])
{
    for (size_t i = 0; i < WL; i++) {
        double n = 0;
        for (size_t j = 0; j < WL; j++)
            n += seen[i][j] == '1';
        for (size_t j = 0; j < WL; j++)
            EXPECT_EXACT(w[i * WL + j], seen[i][j] == '1' ? 1.0 / n : 0.0, "weight (%zu, %zu)", i, j);
    }
}

/* Attention with q = k = 0: every score 0, so a query's weights are exactly
 * 1 / n over the n keys it sees (n exact, one rounded division) and exactly 0
 * elsewhere; the window combines with the causal and the padding masks.
 * L 6, causal, sliding_window 3, key 4 padding: row 4 sees keys 2 and 3,
 * row 5 keys 3 and 5. */
Test(window, attention_weights_with_causal_padding_and_window)
{
    double q[WL] = {0}, k[WL] = {0}, v[WL], out[WL], w[WL * WL];
    for (size_t j = 0; j < WL; j++)
        v[j] = 2.385 * (double)(j + 1);
    const uint8_t pad[WL] = {0, 0, 0, 0, 1, 0};
    refenc_attn_options opt = {.key_padding_mask = pad, .causal = 1, .temperature = 1.0, .sliding_window = 3};
    refenc_attention_forward(out, w, q, k, v, &opt, 1, 1, WL, 1);
    const char *const seen[WL] = {"100000", "110000", "111000", "011100", "001100", "000101"};
    expect_uniform_over_seen(w, seen);
    /* negative control: without the window row 5 sees keys 0 .. 3 and 5 */
    opt.sliding_window = 0;
    refenc_attention_forward(out, w, q, k, v, &opt, 1, 1, WL, 1);
    cr_expect(w[5 * WL + 0] == 0.2, "the control must see key 0: %a", w[5 * WL + 0]);
}

/* The symmetric window without the causal mask: local_attention 4 (|i-j| <=
 * 2), key 0 padding.  Row 0 sees nothing but keys 1, 2; row 3 sees 1 .. 5. */
Test(window, attention_weights_with_local_window_and_padding)
{
    double q[WL] = {0}, k[WL] = {0}, v[WL], out[WL], w[WL * WL];
    for (size_t j = 0; j < WL; j++)
        v[j] = 1.5 - 0.25 * (double)j;
    const uint8_t pad[WL] = {1, 0, 0, 0, 0, 0};
    refenc_attn_options opt = {.key_padding_mask = pad, .temperature = 1.0, .local_attention = 4};
    refenc_attention_forward(out, w, q, k, v, &opt, 1, 1, WL, 1);
    const char *const seen[WL] = {"011000", "011100", "011110", "011111", "001111", "000111"};
    expect_uniform_over_seen(w, seen);
    /* negative control: local_attention 6 (|i-j| <= 3) lets row 5 see key 2 */
    opt.local_attention = 6;
    refenc_attention_forward(out, w, q, k, v, &opt, 1, 1, WL, 1);
    cr_expect(w[5 * WL + 2] == 0.25, "the control must see key 2: %a", w[5 * WL + 2]);
}
