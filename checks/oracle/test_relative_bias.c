/* T5's relative position buckets (ref/relative_bucket.h) and bias
 * (ref/relative_bias.h), in the reference and in the oracle
 * (ref/oracle/relative_bias.c), against a third computation here in GMP's
 * integers: m(r) = me + max{t in [0, n] : (r/me)^n >= (md/me)^t}, clamped
 * to half - 1, i.e. r^n me^t >= md^t me^n, with no bound on the sizes (a
 * different arithmetic, and the comparison stated with me^t on the left,
 * not the reference's or the oracle's rearrangement).
 * Negative controls (run by hand, see the commit): the reference's >=
 * turned into > misses every boundary r = me (md/me)^(t/n) that is an
 * integer (T5: 16, 32, 64) and fails exact_everywhere; a reference without
 * the clamp fails it from r = md on. */
#include <gmp.h>
#include <math.h>
#include <string.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "../../ref/attention.h"
#include "../../ref/oracle/oracle.h"
#include "../../ref/relative_bias.h"
#include "../../ref/relative_bucket.h"

/* the bucket of rel by the definition, in unbounded integers */
static size_t gmp_bucket(int64_t rel, size_t nb, size_t md)
{
    const size_t half = nb / 2, me = half / 2, n = half - me;
    const size_t sign = rel > 0 ? half : 0;
    const uint64_t r = rel < 0 ? (uint64_t)(-rel) : (uint64_t)rel;
    if (r < me)
        return sign + r;
    mpz_t lhs, rhs, a;
    mpz_inits(lhs, rhs, a, NULL);
    size_t best = 0;
    for (size_t t = 0; t <= n; t++) { /* r^n me^t >= md^t me^n */
        mpz_ui_pow_ui(lhs, r, n);
        mpz_ui_pow_ui(a, me, t);
        mpz_mul(lhs, lhs, a);
        mpz_ui_pow_ui(rhs, md, t);
        mpz_ui_pow_ui(a, me, n);
        mpz_mul(rhs, rhs, a);
        if (mpz_cmp(lhs, rhs) >= 0)
            best = t;
    }
    mpz_clears(lhs, rhs, a, NULL);
    const size_t m = me + best;
    return sign + (m < half - 1 ? m : half - 1);
}

/* (nb, md): T5's, and others whose md^(nb/2 - nb/4) stays below 2^64 (the
 * config's bound), with and without exact boundaries, powers of two or not;
 * (34, 27) is one where HF's float32 formula misses the exact bucket (r 12, 18) */
static const size_t pairs[][2] = {{32, 128}, {32, 100}, {32, 64}, {16, 64}, {8, 20}, {4, 3},
                                  {20, 1000}, {12, 7}, {24, 81}, {34, 9}, {34, 27}};

Test(relative_bias, reference_and_oracle_buckets_exact_everywhere)
{
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        const size_t nb = pairs[k][0], md = pairs[k][1];
        mpz_t p;
        mpz_init(p);
        mpz_ui_pow_ui(p, md, nb / 2 - nb / 4);
        cr_assert(mpz_sizeinbase(p, 2) <= 64, "(%zu, %zu) within the config's bound md^n < 2^64", nb, md);
        mpz_clear(p);
        for (int64_t rel = -3000; rel <= 3000; rel++) {
            const size_t want = gmp_bucket(rel, nb, md);
            const size_t ref = refenc_relative_bucket(rel, nb, md, 0);
            const size_t mp = refenc_mpk_relative_bucket(rel, nb, md, 0);
            cr_assert(ref == want && mp == want,
                      "nb %zu, md %zu, rel %lld: reference %zu, oracle %zu, exact %zu", nb, md,
                      (long long)rel, ref, mp, want);
            cr_assert(want < nb);
        }
    }
}

/* T5 (32, 128): the bucket boundaries fall on r = 16, 32, 64, where the
 * argument of floor is exactly 2, 4, 6 (8 log(r/8) / log 16), and the clamp
 * on 128.  The values are HF's float32 _relative_position_bucket's too
 * (docs/certify.md: it agrees with the exact buckets for every r up to 4096
 * at (32, 128)); keys after the query take the upper half, + 16. */
Test(relative_bias, t5_boundaries)
{
    static const struct {
        int64_t r;
        size_t m;
    } rows[] = {{0, 0}, {7, 7}, {8, 8}, {15, 9}, {16, 10}, {31, 11}, {32, 12}, {63, 13},
                {64, 14}, {127, 15}, {128, 15}, {129, 15}, {4096, 15}};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const int64_t r = rows[k].r;
        cr_expect_eq(refenc_relative_bucket(-r, 32, 128, 0), rows[k].m, "rel -%lld", (long long)r);
        cr_expect_eq(refenc_mpk_relative_bucket(-r, 32, 128, 0), rows[k].m, "oracle rel -%lld", (long long)r);
        if (r > 0) {
            cr_expect_eq(refenc_relative_bucket(r, 32, 128, 0), 16 + rows[k].m, "rel %lld", (long long)r);
            cr_expect_eq(refenc_mpk_relative_bucket(r, 32, 128, 0), 16 + rows[k].m, "oracle rel %lld", (long long)r);
        }
    }
}

/* The bug variant t5_bucket_not_clamped: only r >= md moves, to m = half,
 * and the bias reads row (index mod nb): row 16 before the query, row 0 after. */
Test(relative_bias, unclamped_variant_moves_only_far_keys)
{
    enum { NB = 32, H = 2 };
    double table[NB * H];
    for (size_t i = 0; i < NB * H; i++)
        table[i] = 0.375 + 1.25 * (double)i;
    for (int64_t rel = -300; rel <= 300; rel++) {
        const int far = rel <= -128 || rel >= 128;
        const size_t c = refenc_relative_bucket(rel, NB, 128, 0), u = refenc_relative_bucket(rel, NB, 128, 1);
        cr_assert_eq(refenc_mpk_relative_bucket(rel, NB, 128, 1), u, "rel %lld", (long long)rel);
        cr_assert_eq(u, far ? (rel > 0 ? 32u : 16u) : c, "rel %lld", (long long)rel);
        for (size_t h = 0; h < H; h++) {
            const double want = table[(far ? (rel > 0 ? 0 : 16) : c) * H + h];
            cr_assert_eq(refenc_relative_bias(table, H, h, 1000, 1000 + rel, NB, 128, 1), want);
            cr_assert_eq(refenc_relative_bias(table, H, h, 1000, 1000 + rel, NB, 128, 0), table[c * H + h]);
        }
    }
}

/* bias[h, i, j] reads bucket(pos_j - pos_i): key minus query (HF's
 * memory_position - query_position), so a key after the query reads the
 * upper half.  Negative control: pos_i - pos_j would read row 3 for row 16+3. */
Test(relative_bias, key_minus_query)
{
    enum { NB = 32, H = 3 };
    double table[NB * H];
    for (size_t i = 0; i < NB * H; i++)
        table[i] = (double)i;
    cr_assert_eq(refenc_relative_bias(table, H, 2, 5, 8, NB, 128, 0), (double)((16 + 3) * H + 2));
    cr_assert_eq(refenc_relative_bias(table, H, 2, 8, 5, NB, 128, 0), (double)(3 * H + 2));
}

/* The oracle's attention with T5's bias equals, bit for bit, its attention
 * with that bias written out as an additive mask: both add the same double
 * to the same score with one rounding, so the certified weights and outputs
 * are identical.  Each head h of an H = 2 run is compared with an H = 1 run
 * on that head's q, k, v and the mask table[bucket(j - i), h] built here with
 * the GMP bucket, so a wrong head, a transposed table or a reversed offset
 * fails.  Positions 0, 1, 3, 9, 17, 30: offsets up to 30 with md 16 (the
 * clamp) and nb 16 (max_exact 4).  Negative control (run by hand): the
 * oracle reading rel = pos_i - pos_j fails it. */
Test(relative_bias, oracle_attention_adds_the_table_entry)
{
    enum { H = 2, L = 6, DH = 3, NB = 16, MD = 16 };
    const int64_t pos[L] = {0, 1, 3, 9, 17, 30};
    double q[H * L * DH], k[H * L * DH], v[H * L * DH], table[NB * H];
    for (size_t i = 0; i < H * L * DH; i++) {
        q[i] = 0.3 * sin(1.0 + 0.7 * (double)i);
        k[i] = 0.4 * cos(2.0 + 1.3 * (double)i);
        v[i] = 2.385 - 0.25 * (double)(i % 11);
    }
    for (size_t i = 0; i < NB * H; i++)
        table[i] = 1.75 * sin(0.9 * (double)i) - 0.125;
    refenc_attn_options opt = {.positions = pos, .temperature = 1.0, .score_scalar = 1.0,
                               .relative_bias = table, .relative_num_buckets = NB,
                               .relative_max_distance = MD};
    double out[H * L * DH], w[H * L * L];
    refenc_mp_report rep;
    cr_assert_eq(refenc_mp_attention_forward(out, w, q, k, v, &opt, 1, H, L, DH, 128, &rep), 0);
    for (size_t h = 0; h < H; h++) {
        double mask[L * L], out1[L * DH], w1[L * L];
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < L; j++)
                mask[i * L + j] = table[gmp_bucket(pos[j] - pos[i], NB, MD) * H + h];
        refenc_attn_options opt1 = {.positions = pos, .temperature = 1.0, .score_scalar = 1.0, .attn_mask = mask};
        cr_assert_eq(refenc_mp_attention_forward(out1, w1, q + h * L * DH, k + h * L * DH, v + h * L * DH, &opt1,
                                                 1, 1, L, DH, 128, &rep), 0);
        for (size_t i = 0; i < L * L; i++)
            cr_assert_eq(w[h * L * L + i], w1[i], "head %zu weight %zu: %a vs %a", h, i, w[h * L * L + i], w1[i]);
        for (size_t i = 0; i < L * DH; i++)
            cr_assert_eq(out[h * L * DH + i], out1[i], "head %zu output %zu", h, i);
    }
}

/* The reference's attention with T5's bias depends on the positions only
 * through their differences: every position shifted by 1000 gives the same
 * weights and outputs, bit for bit (the bucket reads pos_j - pos_i; the
 * scores are otherwise position-free).  And the bias does act: a zero
 * table changes the weights.  Negative control (run by hand): the bias
 * indexed by bucket(pos_j) instead of bucket(pos_j - pos_i) fails the
 * shift. */
Test(relative_bias, reference_attention_depends_on_offsets_only)
{
    enum { H = 2, L = 40, DH = 4, NB = 32, MD = 20 };
    int64_t pos[L], shifted[L];
    double q[H * L * DH], k[H * L * DH], v[H * L * DH], table[NB * H], zeros[NB * H] = {0};
    for (size_t i = 0; i < L; i++)
        pos[i] = (int64_t)i, shifted[i] = (int64_t)i + 1000;
    for (size_t i = 0; i < H * L * DH; i++) {
        q[i] = 0.3 * sin(0.5 + 0.37 * (double)i);
        k[i] = 0.4 * cos(1.5 + 0.91 * (double)i);
        v[i] = 1.125 - 0.0625 * (double)(i % 23);
    }
    for (size_t i = 0; i < NB * H; i++)
        table[i] = 2.0 * sin(1.3 * (double)i);
    double out[3][H * L * DH], w[3][H * L * L];
    const int64_t *p[3] = {pos, shifted, pos};
    const double *t[3] = {table, table, zeros};
    for (int r = 0; r < 3; r++) {
        const refenc_attn_options opt = {.positions = p[r], .temperature = 1.0, .score_scalar = 1.0,
                                         .relative_bias = t[r], .relative_num_buckets = NB,
                                         .relative_max_distance = MD};
        refenc_attention_forward(out[r], w[r], q, k, v, &opt, 1, H, L, DH);
    }
    cr_assert(memcmp(w[0], w[1], sizeof w[0]) == 0 && memcmp(out[0], out[1], sizeof out[0]) == 0,
              "shifting every position by 1000 changed the attention");
    cr_assert(memcmp(w[0], w[2], sizeof w[0]) != 0, "the table did not reach the scores");
}
