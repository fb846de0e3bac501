/* binary16, bfloat16 and binary32 to and from double, bit-exact. */
#include "half.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------ binary16 and bfloat16 */

/* A 16-bit float with p stored significand bits and an exponent field of
 * ebits bits, bias 2^(ebits-1) - 1 (binary16: p 10, ebits 5; bfloat16: p 7,
 * ebits 8).  Every such value is a double: p + 1 <= 53 significant bits and
 * an exponent range inside double's normal range. */

static double double_from_bits(uint64_t b)
{
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* value = (-1)^s * m * 2^(1 - bias - p)                 if e == 0 (subnormal)
 *       = (-1)^s * (2^p + m) * 2^(e - bias - p)         if 0 < e < max
 * Infinities and NaNs are built from bits: the NaN's p payload bits become
 * the top p bits of the double's significand, so a payload (and the quiet
 * bit) survives the round trip through refenc_double_to_*. */
static double small_float_decode(uint16_t h, int p, int ebits)
{
    const unsigned emax_field = (1u << ebits) - 1;
    const int bias = (1 << (ebits - 1)) - 1;
    const unsigned sign = h >> 15;
    const unsigned e = (h >> p) & emax_field;
    const unsigned m = h & ((1u << p) - 1);
    if (e == emax_field)
        return double_from_bits((uint64_t)sign << 63 | (uint64_t)0x7FF << 52 |
                                (uint64_t)m << (52 - p));
    /* ldexp is exact: the result is a normal double */
    double v =
        e == 0 ? ldexp((double)m, 1 - bias - p) : ldexp((double)((1u << p) | m), (int)e - bias - p);
    return sign ? -v : v;
}

/* Rounds x to the nearest value of the format, ties to even; overflow gives
 * infinity (IEEE 754: |x| >= (2 - 2^-(p+1)) * 2^emax rounds to inf).
 *
 * Let x = m * 2^e exactly (m < 2^53 the double's integer significand) and
 * E = floor(log2 |x|).  The format's spacing at x is 2^q with
 * q = max(E, emin) - p, emin = 1 - bias.  n = round_even(m * 2^(e - q)) is the
 * result in units of 2^q: shifting m right by s = q - e >= 52 - p, rounding
 * on the bits shifted out.  Then the encoding is
 *     n                            if E < emin (subnormal; n = 2^p is the
 *                                   smallest normal, which the same formula
 *                                   encodes correctly)
 *     ((E + bias - 1) << p) + n    otherwise (n's leading bit 2^p adds the
 *                                   last 1 to the exponent field, and a carry
 *                                   to n = 2^(p+1) moves to the next binade)
 * and an encoding at or above the infinity's is infinity. */
static uint16_t small_float_encode(double x, int p, int ebits)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    const uint16_t sign = (uint16_t)((b >> 63) << 15);
    const unsigned E_field = (unsigned)(b >> 52) & 0x7FF;
    const uint64_t M = b & (((uint64_t)1 << 52) - 1);
    const unsigned emax_field = (1u << ebits) - 1;
    const int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
    const uint16_t inf = (uint16_t)(sign | emax_field << p);

    if (E_field == 0x7FF) {
        if (M == 0)
            return inf;
        uint16_t payload = (uint16_t)(M >> (52 - p));
        if (payload == 0) /* payload only in bits the format lacks: stay a NaN */
            payload = (uint16_t)(1u << (p - 1));
        return (uint16_t)(inf | payload);
    }
    /* Zero, or a subnormal double (< 2^-1022): far below half the smallest
     * subnormal of either format (2^-25, 2^-134), so it rounds to zero. */
    if (E_field == 0)
        return sign;
    const int E = (int)E_field - 1023;
    if (E > bias) /* |x| >= 2^(emax + 1) */
        return inf;

    const uint64_t m = M | (uint64_t)1 << 52;
    const int e = (int)E_field - 1075;
    const int q = (E < emin ? emin : E) - p;
    const int s = q - e; /* >= 52 - p >= 42 */
    uint64_t n;
    if (s >= 54) {
        n = 0; /* m < 2^53 <= 2^(s-1): below half a unit */
    } else {
        const uint64_t rem = m & (((uint64_t)1 << s) - 1), half = (uint64_t)1 << (s - 1);
        n = m >> s;
        if (rem > half || (rem == half && (n & 1)))
            n++;
    }
    const uint64_t enc = E < emin ? n : ((uint64_t)(E + bias - 1) << p) + n;
    if (enc >= (uint64_t)emax_field << p)
        return inf;
    return (uint16_t)(sign | enc);
}

double refenc_f16_to_double(uint16_t h)
{
    return small_float_decode(h, 10, 5);
}

double refenc_bf16_to_double(uint16_t b)
{
    return small_float_decode(b, 7, 8);
}

uint16_t refenc_double_to_f16(double x)
{
    return small_float_encode(x, 10, 5);
}

uint16_t refenc_double_to_bf16(double x)
{
    return small_float_encode(x, 7, 8);
}

/* binary32 to double: exact; NaNs built from bits (as above) because the
 * hardware conversion would quiet a signalling NaN. */
double refenc_f32_to_double(uint32_t u)
{
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0)
        return double_from_bits((uint64_t)(u >> 31) << 63 | (uint64_t)0x7FF << 52 |
                                (uint64_t)(u & 0x007FFFFFu) << 29);
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}
