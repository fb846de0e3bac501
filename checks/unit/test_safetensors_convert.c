/* The 16-bit float conversions of ref/safetensors.c: binary16 (F16) and
 * bfloat16 (BF16) decoded exactly, doubles encoded with round-to-nearest,
 * ties to even.
 *
 * Two references: MPFR, which rounds to any precision and exponent range
 * (mpfr_subnormalize emulates gradual underflow), for both formats; and, for
 * F16, the compiler's own _Float16 conversions when it has them (gcc 12 on
 * x86-64 does, through libgcc's soft-float __truncdfhf2 / __extendhfdf2). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>
#include <mpfr.h>

#include "../../ref/io/safetensors.h"
#include "../common/testutil.h"

typedef struct {
    const char *name;
    double (*decode)(uint16_t);
    uint16_t (*encode)(double);
    int prec;            /* significant bits, with the implicit one          */
    mpfr_exp_t emin;     /* MPFR exponents (x = 0.1b... * 2^e): smallest      */
    mpfr_exp_t emax;     /*   subnormal 2^(emin-1), largest finite < 2^emax   */
    uint16_t inf;        /* encoding of +infinity                            */
    double max;          /* largest finite                                    */
    double min_sub;      /* smallest positive subnormal                       */
} format;

/* binary16: 11 bits, subnormals down to 2^-24, max 65504 = (2 - 2^-10) 2^15.
 * bfloat16: 8 bits, subnormals down to 2^-133, max (2 - 2^-7) 2^127. */
static const format F16 = {"F16", refenc_f16_to_double, refenc_double_to_f16, 11, -23, 16,
                           0x7C00, 65504.0, 0x1p-24};
static const format BF16 = {"BF16", refenc_bf16_to_double, refenc_double_to_bf16, 8, -132, 128,
                            0x7F80, 0x1.fep127, 0x1p-133};

static uint64_t bits_of(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static double from_bits(uint64_t b)
{
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* x rounded to the format by MPFR (round to nearest, ties to even, with
 * gradual underflow and overflow to infinity).  MPFR's exponent range is
 * process-wide state: it is narrowed for this call and restored (each
 * Criterion test runs in its own process). */
static double ref_round(const format *fm, double x)
{
    const mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    mpfr_t r;
    mpfr_init2(r, fm->prec);
    mpfr_set_emin(fm->emin);
    mpfr_set_emax(fm->emax);
    int t = mpfr_set_d(r, x, MPFR_RNDN);
    t = mpfr_check_range(r, t, MPFR_RNDN);
    mpfr_subnormalize(r, t, MPFR_RNDN);
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    const double y = mpfr_get_d(r, MPFR_RNDN); /* exact: prec <= 53 and in range */
    mpfr_clear(r);
    return y;
}

/* Both NaN, or the same double bit for bit (so -0 != +0). */
static int same(double a, double b)
{
    return (isnan(a) && isnan(b)) || bits_of(a) == bits_of(b);
}

/* Compares fm->encode(x) with MPFR's rounding of x; returns 1 if equal. */
static int encode_matches_mpfr(const format *fm, double x)
{
    return same(fm->decode(fm->encode(x)), ref_round(fm, x));
}

/* ---------------------------------------------------------------- decode */

Test(safetensors, f16_decodes_known_values)
{
    cr_assert_eq(refenc_f16_to_double(0x3C00), 1.0);
    cr_assert_eq(refenc_f16_to_double(0x3E00), 1.5);
    cr_assert_eq(refenc_f16_to_double(0x40C5), 2.384765625); /* 2.385 in F16 */
    cr_assert_eq(refenc_f16_to_double(0xC000), -2.0);
    cr_assert_eq(refenc_f16_to_double(0x7BFF), 65504.0);
    cr_assert_eq(refenc_f16_to_double(0x0400), 0x1p-14); /* smallest normal      */
    cr_assert_eq(refenc_f16_to_double(0x03FF), 0x3FFp-24); /* largest subnormal  */
    cr_assert_eq(refenc_f16_to_double(0x0001), 0x1p-24); /* smallest subnormal   */
    cr_assert_eq(refenc_f16_to_double(0x8001), -0x1p-24);
    cr_assert(refenc_f16_to_double(0x0000) == 0 && !signbit(refenc_f16_to_double(0x0000)));
    cr_assert(refenc_f16_to_double(0x8000) == 0 && signbit(refenc_f16_to_double(0x8000)));
    cr_assert(isinf(refenc_f16_to_double(0x7C00)) && refenc_f16_to_double(0x7C00) > 0);
    cr_assert(isinf(refenc_f16_to_double(0xFC00)) && refenc_f16_to_double(0xFC00) < 0);
    cr_assert(isnan(refenc_f16_to_double(0x7E00)));
    cr_assert(isnan(refenc_f16_to_double(0x7C01))); /* signalling: still a NaN */
    cr_assert(isnan(refenc_f16_to_double(0xFFFF)) && signbit(refenc_f16_to_double(0xFFFF)));
    /* the payload sits in the top bits of the double's significand */
    cr_assert_eq(bits_of(refenc_f16_to_double(0x7E01)), 0x7FF8040000000000ull);
    /* negative control: a neighbour is a different value */
    cr_assert_neq(refenc_f16_to_double(0x3C01), 1.0);
}

Test(safetensors, bf16_decodes_known_values)
{
    cr_assert_eq(refenc_bf16_to_double(0x3F80), 1.0);
    cr_assert_eq(refenc_bf16_to_double(0x4019), 2.390625); /* 2.385 in BF16 */
    cr_assert_eq(refenc_bf16_to_double(0xC000), -2.0);
    cr_assert_eq(refenc_bf16_to_double(0x7F7F), 0x1.fep127); /* largest finite */
    cr_assert_eq(refenc_bf16_to_double(0x0080), 0x1p-126);   /* smallest normal */
    cr_assert_eq(refenc_bf16_to_double(0x007F), 0x7Fp-133);  /* largest subnormal */
    cr_assert_eq(refenc_bf16_to_double(0x0001), 0x1p-133);
    cr_assert(signbit(refenc_bf16_to_double(0x8000)) && refenc_bf16_to_double(0x8000) == 0);
    cr_assert(isinf(refenc_bf16_to_double(0x7F80)) && isinf(refenc_bf16_to_double(0xFF80)));
    cr_assert(isnan(refenc_bf16_to_double(0x7FC0)) && isnan(refenc_bf16_to_double(0x7F81)));
    cr_assert_eq(bits_of(refenc_bf16_to_double(0xFFC1)), 0xFFF8200000000000ull);
    /* every bfloat16 is the float32 with the same top 16 bits */
    for (uint32_t h = 0; h < 65536; h++) {
        const uint32_t u = h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        cr_assert(same(refenc_bf16_to_double((uint16_t)h), (double)f), "0x%04x", (unsigned)h);
    }
    cr_assert_neq(refenc_bf16_to_double(0x3F81), 1.0);
}

/* -------------------------------------------------------------- round trip */

static void all_values_round_trip(const format *fm)
{
    for (uint32_t h = 0; h < 65536; h++) {
        const double d = fm->decode((uint16_t)h);
        const uint16_t back = fm->encode(d);
        cr_assert_eq(back, h, "%s: 0x%04x -> %a -> 0x%04x", fm->name, (unsigned)h, d,
                     (unsigned)back);
    }
}

Test(safetensors, f16_every_value_round_trips_bit_for_bit)
{
    all_values_round_trip(&F16);
}

Test(safetensors, bf16_every_value_round_trips_bit_for_bit)
{
    all_values_round_trip(&BF16);
}

/* ----------------------------------------------------------------- encode */

/* Between consecutive finite values lo < hi of the format (positive and
 * negative): the midpoint is exact in double (prec + 1 <= 53 bits) and goes
 * to the one with an even last bit; a double either side goes to the nearer.
 * Above the largest finite, the midpoint between it and 2^emax (the next
 * value if the exponent range went on) and everything beyond go to
 * infinity, as IEEE 754 specifies. */
static void midpoints_round_to_even(const format *fm)
{
    const uint16_t last = (uint16_t)(fm->inf - 1);
    for (uint16_t k = 0; k <= last; k++) {
        const double lo = fm->decode(k);
        const double hi = k < last ? fm->decode((uint16_t)(k + 1)) : ldexp(1.0, (int)fm->emax);
        const uint16_t k_hi = (uint16_t)(k + 1); /* = inf after the last */
        const double mid = lo + (hi - lo) / 2;
        cr_assert(mid > lo && mid < hi, "%s: midpoint not exact at 0x%04x", fm->name, k);
        const uint16_t even = (k & 1) ? k_hi : k;
        for (int s = 0; s < 2; s++) {
            const uint16_t sign = s ? 0x8000 : 0;
            const double m = s ? -mid : mid;
            cr_assert_eq(fm->encode(m), sign | even, "%s: midpoint %a of 0x%04x", fm->name, m, k);
            cr_assert_eq(fm->encode(s ? -nextafter(mid, 0) : nextafter(mid, 0)), sign | k,
                         "%s: below the midpoint %a", fm->name, m);
            cr_assert_eq(fm->encode(s ? -nextafter(mid, INFINITY) : nextafter(mid, INFINITY)),
                         sign | k_hi, "%s: above the midpoint %a", fm->name, m);
        }
    }
}

Test(safetensors, f16_encode_rounds_midpoints_to_even)
{
    midpoints_round_to_even(&F16);
}

Test(safetensors, bf16_encode_rounds_midpoints_to_even)
{
    midpoints_round_to_even(&BF16);
}

Test(safetensors, f16_encode_edge_cases)
{
    cr_assert_eq(refenc_double_to_f16(65504.0), 0x7BFF);
    cr_assert_eq(refenc_double_to_f16(65519.99), 0x7BFF);
    cr_assert_eq(refenc_double_to_f16(65520.0), 0x7C00); /* the midpoint to 2^16: inf */
    cr_assert_eq(refenc_double_to_f16(-65520.0), 0xFC00);
    cr_assert_eq(refenc_double_to_f16(1e300), 0x7C00);
    cr_assert_eq(refenc_double_to_f16(DBL_MAX), 0x7C00);
    cr_assert_eq(refenc_double_to_f16(INFINITY), 0x7C00);
    cr_assert_eq(refenc_double_to_f16(-INFINITY), 0xFC00);
    cr_assert_eq(refenc_double_to_f16(0x1p-25), 0x0000);                 /* tie to even 0 */
    cr_assert_eq(refenc_double_to_f16(nextafter(0x1p-25, 1)), 0x0001);
    cr_assert_eq(refenc_double_to_f16(3 * 0x1p-25), 0x0002);             /* tie to even 2 */
    cr_assert_eq(refenc_double_to_f16(0x1p-14 - 0x1p-25), 0x0400);       /* to the normal */
    cr_assert_eq(refenc_double_to_f16(-0.0), 0x8000);
    cr_assert_eq(refenc_double_to_f16(-1e-300), 0x8000);
    cr_assert_eq(refenc_double_to_f16(0x1p-1074), 0x0000); /* double subnormal */
    cr_assert_eq(refenc_double_to_f16(2.385), 0x40C5); /* 197.12 units of 2^-9 above 2 */
    cr_assert_eq(refenc_double_to_f16(1 + 0x1p-11), 0x3C00);
    cr_assert_eq(refenc_double_to_f16(1 + 0x1p-11 + 0x1p-40), 0x3C01);
    /* NaN stays NaN, keeping sign and the top payload bits */
    cr_assert_eq(refenc_double_to_f16(NAN) & 0x7E00, 0x7E00);
    cr_assert_eq(refenc_double_to_f16(from_bits(0xFFF8040000000000ull)), 0xFE01);
    cr_assert_eq(refenc_double_to_f16(from_bits(0x7FF0000000000001ull)), 0x7E00); /* low payload */
    cr_assert_eq(refenc_double_to_f16(from_bits(0x7FF4000000000000ull)), 0x7D00); /* signalling */
}

Test(safetensors, bf16_encode_edge_cases)
{
    cr_assert_eq(refenc_double_to_bf16(1 + 0x1p-8), 0x3F80);          /* tie to even */
    cr_assert_eq(refenc_double_to_bf16(1 + 3 * 0x1p-8), 0x3F82);      /* tie to even */
    cr_assert_eq(refenc_double_to_bf16(2.385), 0x4019);
    cr_assert_eq(refenc_double_to_bf16(0x1.fep127), 0x7F7F);
    cr_assert_eq(refenc_double_to_bf16(0x1.ffp127), 0x7F80);          /* the midpoint: inf */
    cr_assert_eq(refenc_double_to_bf16(nextafter(0x1.ffp127, 0)), 0x7F7F);
    cr_assert_eq(refenc_double_to_bf16(FLT_MAX), 0x7F80);
    cr_assert_eq(refenc_double_to_bf16(0x1p-134), 0x0000);            /* tie to even 0 */
    cr_assert_eq(refenc_double_to_bf16(nextafter(0x1p-134, 1)), 0x0001);
    cr_assert_eq(refenc_double_to_bf16(-0x1p-126), 0x8080);
    cr_assert_eq(refenc_double_to_bf16(0x1p-1074), 0x0000);
    cr_assert_eq(refenc_double_to_bf16(-INFINITY), 0xFF80);
    cr_assert_eq(refenc_double_to_bf16(-NAN) & 0xFFC0, 0xFFC0);
    /* double rounding through float32 would give 1 + 2^-7 here: x is just
     * above the midpoint 1 + 2^-8, by less than float32 can hold */
    const double x = 1 + 0x1p-8 + 0x1p-40;
    cr_assert_eq(refenc_double_to_bf16(x), 0x3F81);
    const float xf = (float)x; /* 1 + 2^-8 exactly: the tie */
    cr_assert_eq((double)xf, 1 + 0x1p-8);
}

/* Doubles spread over the format's whole range and beyond: random sign,
 * exponent uniform in [lo, hi], random 52-bit significand. */
static double random_double(gsl_rng *rng, int lo, int hi)
{
    const uint64_t m = ((uint64_t)gsl_rng_get(rng) << 32 | gsl_rng_get(rng)) & ((1ull << 52) - 1);
    const int e = lo + (int)gsl_rng_uniform_int(rng, (unsigned long)(hi - lo + 1));
    const double x = ldexp(1.0 + ldexp((double)m, -52), e);
    return gsl_rng_uniform(rng) < 0.5 ? -x : x;
}

#define N_RANDOM 300000

static void encode_matches_mpfr_on_random_doubles(const format *fm, unsigned long stream)
{
    gsl_rng *rng = test_rng(stream);
    const int lo = (int)fm->emin - 4, hi = (int)fm->emax + 2;
    for (long i = 0; i < N_RANDOM; i++) {
        const double x = random_double(rng, lo, hi);
        cr_assert(encode_matches_mpfr(fm, x),
                  "seed %lu: %s(%a = %.17g) = 0x%04x, MPFR gives %a", test_seed(), fm->name, x, x,
                  (unsigned)fm->encode(x), ref_round(fm, x));
    }
    /* and the special values */
    const double special[] = {0.0, -0.0, INFINITY, -INFINITY, DBL_MAX, -DBL_MIN, 0x1p-1074,
                              fm->max, fm->min_sub, fm->min_sub / 2, fm->min_sub * 1.5};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        cr_assert(encode_matches_mpfr(fm, special[i]), "%s(%a)", fm->name, special[i]);
    gsl_rng_free(rng);
}

Test(safetensors, f16_encode_matches_mpfr)
{
    encode_matches_mpfr_on_random_doubles(&F16, 101);
}

Test(safetensors, bf16_encode_matches_mpfr)
{
    encode_matches_mpfr_on_random_doubles(&BF16, 102);
}

/* The reference can tell a wrong rounding: truncation and round-half-up
 * disagree with it where they should. */
Test(safetensors, mpfr_reference_rejects_wrong_roundings)
{
    /* truncation: 1 + 3/4 ulp goes up */
    cr_assert(ref_round(&F16, 1 + 0x1.8p-11) == 1 + 0x1p-10);
    /* half-up: the tie 1 + 2^-11 stays at 1 */
    cr_assert(ref_round(&F16, 1 + 0x1p-11) == 1.0);
    /* no gradual underflow: 2^-24 would flush to 0 */
    cr_assert(ref_round(&F16, 0x1p-24) == 0x1p-24);
    cr_assert(ref_round(&F16, 0x1.8p-24) == 0x1p-23);
    /* no overflow to infinity */
    cr_assert(isinf(ref_round(&F16, 65520.0)) && ref_round(&F16, 65519.0) == 65504.0);
    cr_assert(isinf(ref_round(&BF16, 0x1.ffp127)));
    cr_assert(ref_round(&BF16, 0x1p-133) == 0x1p-133 && ref_round(&BF16, 0x1p-134) == 0);
}

#ifdef __FLT16_MAX__
/* The compiler's binary16 conversions as a second, independent reference. */
static uint16_t compiler_f16(double x)
{
    const _Float16 h = (_Float16)x;
    uint16_t b;
    memcpy(&b, &h, sizeof b);
    return b;
}

Test(safetensors, f16_matches_the_compilers_float16)
{
    for (uint32_t h = 0; h < 65536; h++) {
        _Float16 v;
        const uint16_t h16 = (uint16_t)h;
        memcpy(&v, &h16, sizeof v);
        cr_assert(same(refenc_f16_to_double(h16), (double)v), "decode 0x%04x: %a vs %a",
                  (unsigned)h, refenc_f16_to_double(h16), (double)v);
    }
    gsl_rng *rng = test_rng(103);
    for (long i = 0; i < N_RANDOM; i++) {
        const double x = random_double(rng, -30, 18);
        const uint16_t want = compiler_f16(x), got = refenc_double_to_f16(x);
        cr_assert_eq(got, want, "seed %lu: f16(%a) = 0x%04x, compiler 0x%04x", test_seed(), x,
                     (unsigned)got, (unsigned)want);
    }
    gsl_rng_free(rng);
}
#endif
