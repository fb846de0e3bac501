/* Correctly rounded dot products, by exact fixed-point accumulation.
 *
 *   r = RN_p( sum_k x_k y_k  (+ extra) )
 *
 * Every finite MPFR number and every double is an integer times a power of
 * two: x = (-1)^s X 2^e, X the significand's limbs read as an integer (MPFR's
 * custom interface gives them), e the exponent of its last bit.  A product is
 * then the integer X Y times 2^(e_x + e_y), exactly, and the sum of all of
 * them is one integer times 2^(min e): accumulated without any rounding in
 * two multi-limb integers (the positive and the negative terms), it is the
 * exact sum, rounded once to r's precision by mpfr_set_z_2exp.  The result is
 * therefore the same number, the same ternary value (hence the same inexact
 * flag) and the same sign of zero as mpfr_sum of the exact products -- the
 * method the oracle used before, at a fraction of the cost: no product is
 * rounded or normalised, no term allocated.  checks/oracle/test_oracle_dot.c
 * compares the two on every kind of input.
 *
 * Terms that are NaN or infinite, and sums whose exponents spread over more
 * than the accumulator holds (REFENC_MP_ACC_SPREAD bits between the terms'
 * exponents), take the general path: exact products into 2p-bit numbers and
 * one mpfr_sum.
 *
 * The linear maps' rows (refenc_mp_dot_row_d) with the weights in fixed
 * point (refenc_mp_wspan_fix) add most of their terms in registers: the
 * row's values, shifted once, are grouped by limb offset and sign, and each
 * group's sum of products with a weight row's 63-bit integers is exact in
 * a few registers, added once to the accumulators; the weights outside a
 * row's window go, as every term without fixed-point weights does, into
 * residue accumulators in memory. */
#include "internal.h"

#include <math.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(GMP_NUMB_BITS == 64 && sizeof(mp_limb_t) == 8, "64-bit limbs without nails");
_Static_assert(sizeof(double) == 8, "IEEE binary64 doubles");

typedef unsigned __int128 u128;

/* ---- the accumulator ------------------------------------------------------ */

/* a[0..) += c, the carry running up as far as it goes (the accumulator
 * has the headroom: see refenc_mp_acc_limbs). */
static inline void propagate(mp_limb_t *a, mp_limb_t c)
{
    const mp_limb_t v = *a + c; /* the high word of a product: almost never carries further */
    *a = v;
    if (__builtin_expect(v < c, 0))
        for (a++; ++*a == 0; a++)
            ;
}

/* One limb of X (shifted left by r, 0 < r < 64) times w, added at a[i]
 * with the carry c. */
#define STEP_SHIFTED(i)                                                \
    do {                                                               \
        const mp_limb_t s_ = X[i] << r | prev >> (64 - r);             \
        prev = X[i];                                                   \
        const u128 t_ = (u128)s_ * w + a[i] + c;                       \
        a[i] = (mp_limb_t)t_;                                          \
        c = (mp_limb_t)(t_ >> 64);                                     \
    } while (0)
#define STEP(i)                                                        \
    do {                                                               \
        const u128 t_ = (u128)X[i] * w + a[i] + c;                     \
        a[i] = (mp_limb_t)t_;                                          \
        c = (mp_limb_t)(t_ >> 64);                                     \
    } while (0)

#if defined(__x86_64__) && !defined(REFENC_MP_PORTABLE_DOT)
#define REFENC_MP_ADC_CHAINS 1
/* a[0..N] += X[0..N) w, for N = 2 to 4 limbs of X (p = 65 to 256
 * bits): the products' low halves go into a[i] and their high halves into
 * a[i + 1] in two add-with-carry chains, whose carries out (at most 2)
 * then run up from a[N + 1].  The same sum as STEP's, which passes one
 * carry word from limb to limb; gcc's code for the 128-bit additions
 * spills, and x86-64's adc chain is about half the instructions.
 * -DREFENC_MP_PORTABLE_DOT (and any other machine) takes the C code, which
 * make check-determinism compares bit for bit. */
/* The accumulator's limbs are addressed through one register (%[a]) and
 * declared read and written as one array operand: a memory operand per limb
 * wants a register each at -O0, more than x86-64 has. */
#define ACC(N) [acc] "+m"(*(mp_limb_t(*)[N])a)
static inline __attribute__((always_inline)) void add_product_2(mp_limb_t *a, const mp_limb_t *X,
                                                                mp_limb_t w)
{
    const u128 p0 = (u128)X[0] * w, p1 = (u128)X[1] * w;
    mp_limb_t c = 0;
    __asm__("addq %[l0], (%[a])\n\t"
            "adcq %[l1], 8(%[a])\n\t"
            "adcq $0, 16(%[a])\n\t"
            "adcq $0, %[c]\n\t"
            "addq %[h0], 8(%[a])\n\t"
            "adcq %[h1], 16(%[a])\n\t"
            "adcq $0, %[c]"
            : ACC(3), [c] "+&r"(c)
            : [a] "r"(a), [l0] "r"((mp_limb_t)p0), [l1] "r"((mp_limb_t)p1),
              [h0] "r"((mp_limb_t)(p0 >> 64)), [h1] "r"((mp_limb_t)(p1 >> 64))
            : "cc");
    if (__builtin_expect(c != 0, 0))
        propagate(a + 3, c);
}
static inline __attribute__((always_inline)) void add_product_3(mp_limb_t *a, const mp_limb_t *X,
                                                                mp_limb_t w)
{
    const u128 p0 = (u128)X[0] * w, p1 = (u128)X[1] * w, p2 = (u128)X[2] * w;
    mp_limb_t c = 0;
    __asm__("addq %[l0], (%[a])\n\t"
            "adcq %[l1], 8(%[a])\n\t"
            "adcq %[l2], 16(%[a])\n\t"
            "adcq $0, 24(%[a])\n\t"
            "adcq $0, %[c]\n\t"
            "addq %[h0], 8(%[a])\n\t"
            "adcq %[h1], 16(%[a])\n\t"
            "adcq %[h2], 24(%[a])\n\t"
            "adcq $0, %[c]"
            : ACC(4), [c] "+&r"(c)
            : [a] "r"(a), [l0] "r"((mp_limb_t)p0), [l1] "r"((mp_limb_t)p1), [l2] "r"((mp_limb_t)p2),
              [h0] "r"((mp_limb_t)(p0 >> 64)), [h1] "r"((mp_limb_t)(p1 >> 64)),
              [h2] "r"((mp_limb_t)(p2 >> 64))
            : "cc");
    if (__builtin_expect(c != 0, 0))
        propagate(a + 4, c);
}
static inline __attribute__((always_inline)) void add_product_4(mp_limb_t *a, const mp_limb_t *X,
                                                                mp_limb_t w)
{
    const u128 p0 = (u128)X[0] * w, p1 = (u128)X[1] * w, p2 = (u128)X[2] * w, p3 = (u128)X[3] * w;
    mp_limb_t c = 0;
    __asm__("addq %[l0], (%[a])\n\t"
            "adcq %[l1], 8(%[a])\n\t"
            "adcq %[l2], 16(%[a])\n\t"
            "adcq %[l3], 24(%[a])\n\t"
            "adcq $0, 32(%[a])\n\t"
            "adcq $0, %[c]\n\t"
            "addq %[h0], 8(%[a])\n\t"
            "adcq %[h1], 16(%[a])\n\t"
            "adcq %[h2], 24(%[a])\n\t"
            "adcq %[h3], 32(%[a])\n\t"
            "adcq $0, %[c]"
            : ACC(5), [c] "+&r"(c)
            : [a] "r"(a), [l0] "r"((mp_limb_t)p0), [l1] "r"((mp_limb_t)p1), [l2] "r"((mp_limb_t)p2),
              [l3] "r"((mp_limb_t)p3), [h0] "r"((mp_limb_t)(p0 >> 64)),
              [h1] "r"((mp_limb_t)(p1 >> 64)), [h2] "r"((mp_limb_t)(p2 >> 64)),
              [h3] "r"((mp_limb_t)(p3 >> 64))
            : "cc");
    if (__builtin_expect(c != 0, 0))
        propagate(a + 5, c);
}
#undef ACC
#else
#define REFENC_MP_ADC_CHAINS 0
#endif

/* a += X w, X of nx limbs (unrolled for the common sizes). */
static inline __attribute__((always_inline)) void add_unshifted(mp_limb_t *a, const mp_limb_t *X,
                                                                size_t nx, mp_limb_t w)
{
#if REFENC_MP_ADC_CHAINS
    switch (nx) {
    case 2: add_product_2(a, X, w); return;
    case 3: add_product_3(a, X, w); return;
    case 4: add_product_4(a, X, w); return;
    default: break;
    }
#endif
    mp_limb_t c = 0;
#if REFENC_MP_ADC_CHAINS
    for (size_t i = 0; i < nx; i++) /* one limb, or more than four */
        STEP(i);
#else
    switch (nx) {
    case 1: STEP(0); break;
    case 2: STEP(0); STEP(1); break;
    case 3: STEP(0); STEP(1); STEP(2); break;
    case 4: STEP(0); STEP(1); STEP(2); STEP(3); break;
    default:
        for (size_t i = 0; i < nx; i++)
            STEP(i);
    }
#endif
    propagate(a + nx, c);
}

/* a += (X 2^r) w, X of nx limbs, 0 <= r < 64.  The common sizes (p = 53
 * to 256 bits) are unrolled; inlined where nx is a constant, the switch
 * goes. */
static inline __attribute__((always_inline)) void add_shifted(mp_limb_t *a, unsigned r,
                                                              const mp_limb_t *X, size_t nx,
                                                              mp_limb_t w)
{
    if (r == 0) {
        add_unshifted(a, X, nx, w);
        return;
    }
    mp_limb_t c = 0, prev = 0;
#if REFENC_MP_ADC_CHAINS
    for (size_t i = 0; i < nx; i++) /* more than three limbs: add_product takes the others */
        STEP_SHIFTED(i);
#else
    switch (nx) {
    case 1: STEP_SHIFTED(0); break;
    case 2: STEP_SHIFTED(0); STEP_SHIFTED(1); break;
    case 3: STEP_SHIFTED(0); STEP_SHIFTED(1); STEP_SHIFTED(2); break;
    case 4: STEP_SHIFTED(0); STEP_SHIFTED(1); STEP_SHIFTED(2); STEP_SHIFTED(3); break;
    default:
        for (size_t i = 0; i < nx; i++)
            STEP_SHIFTED(i);
    }
#endif
    const u128 t = (u128)(prev >> (64 - r)) * w + a[nx] + c;
    a[nx] = (mp_limb_t)t;
    propagate(a + nx + 1, (mp_limb_t)(t >> 64));
}

/* acc += (X Y) 2^off, off >= 0 bits. */
static void add_product(mp_limb_t *acc, long off, const mp_limb_t *X, size_t nx, const mp_limb_t *Y,
                        size_t ny)
{
    if (nx < ny) { /* one pass over the longer operand per limb of the shorter */
        const mp_limb_t *t = X;
        X = Y, Y = t;
        const size_t tn = nx;
        nx = ny, ny = tn;
    }
    mp_limb_t *a = acc + (size_t)off / 64;
    const unsigned r = (unsigned)off % 64;
#if REFENC_MP_ADC_CHAINS
    if (nx <= 3) { /* X shifted once, then a product of nx + 1 limbs per limb of Y */
        mp_limb_t xs[4];
        const size_t ns = nx + 1;
        if (r == 0) {
            memcpy(xs, X, nx * sizeof *X);
            xs[nx] = 0;
        } else {
            xs[0] = X[0] << r;
            for (size_t i = 1; i < nx; i++)
                xs[i] = X[i] << r | X[i - 1] >> (64 - r);
            xs[nx] = X[nx - 1] >> (64 - r);
        }
        for (size_t j = 0; j < ny; j++)
            if (Y[j] != 0) {
                if (ns == 4)
                    add_product_4(a + j, xs, Y[j]);
                else if (ns == 3)
                    add_product_3(a + j, xs, Y[j]);
                else
                    add_product_2(a + j, xs, Y[j]);
            }
        return;
    }
#endif
    for (size_t j = 0; j < ny; j++)
        if (Y[j] != 0)
            add_shifted(a + j, r, X, nx, Y[j]);
}

/* ---- operands ---------------------------------------------------------------- */

enum { OP_ZERO, OP_REGULAR, OP_SPECIAL };

/* A finite nonzero MPFR number as (-1)^neg d 2^lsb, d its n limbs. */
static int from_mpfr(refenc_mp_operand *o, mpfr_srcptr x)
{
    o->neg = mpfr_signbit(x);
    if (!mpfr_regular_p(x))
        return mpfr_zero_p(x) ? OP_ZERO : OP_SPECIAL;
    o->n = ((size_t)mpfr_get_prec(x) + 63) / 64;
    o->d = (const mp_limb_t *)mpfr_custom_get_significand(x);
    o->lsb = (long)mpfr_custom_get_exp(x) - 64 * (long)o->n;
    return OP_REGULAR;
}

/* A double w as (-1)^neg *m 2^lsb (m < 2^53).  Returns the kind. */
static inline int decode_double(double w, mp_limb_t *m, long *lsb, int *neg)
{
    uint64_t bits;
    memcpy(&bits, &w, sizeof bits);
    const unsigned ex = (unsigned)(bits >> 52) & 0x7ff;
    const uint64_t frac = bits & (((uint64_t)1 << 52) - 1);
    *neg = (int)(bits >> 63);
    if (ex == 0x7ff)
        return OP_SPECIAL;
    if (ex == 0 && frac == 0)
        return OP_ZERO;
    *m = ex == 0 ? frac : frac | (uint64_t)1 << 52;
    *lsb = ex == 0 ? -1074 : (long)ex - 1075;
    return OP_REGULAR;
}

/* ---- the sum -------------------------------------------------------------------- */

/* The span of the terms: the lowest exponent of a last bit and a bound on
 * the highest exponent. */
typedef struct {
    long lo, hi;
    size_t terms;       /* nonzero terms */
} span;

static void span_add(span *s, long lsb, long top)
{
    if (s->terms == 0 || lsb < s->lo)
        s->lo = lsb;
    if (s->terms == 0 || top > s->hi)
        s->hi = top;
    s->terms++;
}

static size_t refenc_mp_acc_limbs(long lo, long hi, const refenc_mp_ws *ws)
{
    /* bits from lo to hi, 64 more for the carries of up to 2^64 terms, and
     * a limb for the shifted operand's spill */
    const long bits = hi - lo + 64;
    if (bits <= 0 || bits / 64 + 3 > (long)ws->acc_limbs)
        return 0;
    return (size_t)bits / 64 + 3;
}

/* The accumulated sum (pos - neg, its last bit of weight 2^lo) rounded into
 * r.  Returns 0 if the sum is exactly zero (r untouched). */
static int refenc_mp_acc_finish(mpfr_ptr r, mp_limb_t *pos, mp_limb_t *neg, size_t n, long lo)
{
    int sign = 1;
    mp_limb_t *m = pos;
    const int c = mpn_cmp(pos, neg, (mp_size_t)n);
    if (c == 0)
        return 0;
    if (c > 0) {
        mpn_sub_n(pos, pos, neg, (mp_size_t)n);
    } else {
        mpn_sub_n(neg, neg, pos, (mp_size_t)n);
        m = neg;
        sign = -1;
    }
    size_t used = n;
    while (used > 0 && m[used - 1] == 0)
        used--;
    mpz_t z;
    mpz_roinit_n(z, m, sign * (mp_size_t)used);
    mpfr_set_z_2exp(r, z, lo, MPFR_RNDN);
    return 1;
}

/* The sign of an exact zero sum, as mpfr_sum gives it in round-to-nearest:
 * -0 when every term is a -0 (and there is at least one), else +0. */
static int zero_sign(mpfr_srcptr x, size_t sx, mpfr_srcptr y, size_t sy, size_t n, mpfr_srcptr extra)
{
    if (n == 0 && extra == NULL)
        return 1;
    for (size_t k = 0; k < n; k++)
        if (!(mpfr_zero_p(x + k * sx) || mpfr_zero_p(y + k * sy)) ||
            mpfr_signbit(x + k * sx) == mpfr_signbit(y + k * sy))
            return 1;
    return extra == NULL || (mpfr_zero_p(extra) && mpfr_signbit(extra)) ? -1 : 1;
}

/* The general path: exact products at 2p bits, one mpfr_sum. */
static void dot_general(mpfr_ptr r, mpfr_srcptr x, size_t sx, mpfr_srcptr y, size_t sy, size_t n,
                        mpfr_srcptr extra, refenc_mp_ws *ws)
{
    for (size_t k = 0; k < n; k++)
        mpfr_mul(ws->prod + k, x + k * sx, y + k * sy, MPFR_RNDN); /* exact */
    if (extra != NULL)
        mpfr_set(ws->prod + n++, extra, MPFR_RNDN); /* exact */
    mpfr_sum(r, ws->pprod, n, MPFR_RNDN);
}

static const mp_limb_t one_limb = 1;

void refenc_mp_dot(mpfr_ptr r, mpfr_srcptr x, size_t sx, mpfr_srcptr y, size_t sy, size_t n,
                   mpfr_srcptr extra, refenc_mp_ws *ws)
{
    span s = {0};
    refenc_mp_operand ox = {0};
    int special = 0;
    size_t m = 0; /* the nonzero terms, decoded once into ws->dx, ws->dy */
    for (size_t k = 0; k < n && !special; k++) {
        refenc_mp_operand *dx = ws->dx + m, *dy = ws->dy + m;
        const int kx = from_mpfr(dx, x + k * sx), ky = from_mpfr(dy, y + k * sy);
        special = kx == OP_SPECIAL || ky == OP_SPECIAL;
        if (kx == OP_REGULAR && ky == OP_REGULAR) {
            span_add(&s, dx->lsb + dy->lsb, dx->lsb + dy->lsb + 64 * (long)(dx->n + dy->n));
            m++;
        }
    }
    if (extra != NULL && !special) {
        const int ke = from_mpfr(&ox, extra);
        special = ke == OP_SPECIAL;
        if (ke == OP_REGULAR)
            span_add(&s, ox.lsb, ox.lsb + 64 * (long)ox.n);
    }
    const size_t limbs = special || s.terms == 0 ? 0 : refenc_mp_acc_limbs(s.lo, s.hi, ws);
    if (special || (s.terms > 0 && limbs == 0)) {
        dot_general(r, x, sx, y, sy, n, extra, ws);
        return;
    }
    mp_limb_t *pos = ws->acc, *neg = ws->acc + limbs;
    if (s.terms > 0) {
        memset(ws->acc, 0, 2 * limbs * sizeof *ws->acc);
        for (size_t j = 0; j < m; j++) {
            const refenc_mp_operand *dx = ws->dx + j, *dy = ws->dy + j;
            add_product(dx->neg != dy->neg ? neg : pos, dx->lsb + dy->lsb - s.lo, dx->d, dx->n, dy->d, dy->n);
        }
        if (extra != NULL && from_mpfr(&ox, extra) == OP_REGULAR)
            add_product(ox.neg ? neg : pos, ox.lsb - s.lo, ox.d, ox.n, &one_limb, 1);
        if (refenc_mp_acc_finish(r, pos, neg, limbs, s.lo))
            return;
    }
    mpfr_set_zero(r, zero_sign(x, sx, y, sy, n, extra));
}

/* ---- rows of MPFR values against rows of doubles (linear maps) ------------------ */

void refenc_mp_wspan_of(refenc_mp_wspan *s, const double *W, size_t n_w, const double *b, size_t n_b)
{
    memset(s, 0, sizeof *s);
    s->w_empty = s->b_empty = 1;
    for (int part = 0; part < 2; part++) {
        const double *v = part == 0 ? W : b;
        const size_t n = part == 0 ? n_w : (b != NULL ? n_b : 0);
        for (size_t i = 0; i < n; i++) {
            mp_limb_t m;
            long lsb;
            int neg;
            const int kind = decode_double(v[i], &m, &lsb, &neg);
            if (kind == OP_SPECIAL) {
                s->special = 1;
            } else if (kind == OP_REGULAR) {
                long *lo = part == 0 ? &s->w_lo : &s->b_lo, *hi = part == 0 ? &s->w_hi : &s->b_hi;
                int *empty = part == 0 ? &s->w_empty : &s->b_empty;
                if (*empty || lsb < *lo)
                    *lo = lsb;
                if (*empty || lsb + 53 > *hi)
                    *hi = lsb + 53;
                *empty = 0;
            }
        }
    }
}

/* Each row's window: its largest weight's top bit is below base + 63,
 * base no lower than W's lowest last bit (so that the sums' offsets from
 * refenc_mp_dot_row_d's lo stay >= 0).  A weight m 2^lsb, m's trailing
 * zeros stripped, is in the window if lsb >= base: then m 2^(lsb - base)
 * < 2^63 is exact in an int64 M, with the weight's sign, stored as
 * M + 2^63 >= 0 (refenc_mp_dot_row_d's products are then unsigned, and
 * the bias times the sum of the values is taken off once per group).
 * Narrow, the same with 31 for 63 and 32-bit integers: weights of 8
 * significant bits (bf16) fit a 31-bit window unless they are 2^23 times
 * below their row's largest, and the matrix takes half the memory (a
 * Llama-3-8B layer's 218 M weights: 832 MiB instead of 1664) and half the
 * memory traffic of the sums. */
/* Row w's window of `width` bits: base = (its largest weight's top bit) -
 * width, not below lo. */
static long row_window(const double *w, size_t in, long lo, int width)
{
    long top = lo;
    for (size_t k = 0; k < in; k++) {
        mp_limb_t m;
        long lsb;
        int neg;
        if (decode_double(w[k], &m, &lsb, &neg) == OP_REGULAR && lsb + 64 - __builtin_clzll(m) > top)
            top = lsb + 64 - __builtin_clzll(m);
    }
    return top - width > lo ? top - width : lo;
}

/* The weights of row w outside its window [base, base + width) (top bit
 * below base + width by row_window's choice): those whose last bit, once
 * the trailing zeros are stripped, is below base. */
static size_t row_outliers(const double *w, size_t in, long base)
{
    size_t n = 0;
    for (size_t k = 0; k < in; k++) {
        mp_limb_t m;
        long lsb;
        int neg;
        if (decode_double(w[k], &m, &lsb, &neg) == OP_REGULAR && lsb + __builtin_ctzll(m) < base)
            n++;
    }
    return n;
}

/* Row o of f: its weights biased in U (U32 when narrow), its outliers
 * appended to out_idx (n_out of cap).  0 on allocation failure. */
static int row_fix(refenc_mp_wfix *f, size_t o, size_t *n_out, size_t *cap)
{
    const size_t in = f->in;
    const double *w = f->W + o * in;
    const long base = f->base[o];
    for (size_t k = 0; k < in; k++) {
        mp_limb_t m;
        long lsb;
        int neg;
        int64_t M = 0;
        if (decode_double(w[k], &m, &lsb, &neg) == OP_REGULAR) {
            const int tz = __builtin_ctzll(m);
            m >>= tz;
            lsb += tz;
            if (lsb >= base) { /* in the window: m 2^(lsb - base) < 2^width */
                M = (int64_t)(m << (lsb - base));
                M = neg ? -M : M;
            } else { /* an outlier */
                if (*n_out == *cap) {
                    size_t *t = realloc(f->out_idx, 2 * *cap * sizeof *t);
                    if (t == NULL)
                        return 0;
                    f->out_idx = t;
                    *cap *= 2;
                }
                f->out_idx[(*n_out)++] = k;
            }
        }
        if (f->U32 != NULL)
            f->U32[o * in + k] = (uint32_t)M ^ (uint32_t)1 << 31; /* M + 2^31, |M| < 2^31 */
        else
            f->U[o * in + k] = (uint64_t)M ^ (uint64_t)1 << 63; /* M + 2^63 */
    }
    return 1;
}

/* Whether W's rows fit 31-bit windows but for at most one weight in 1024
 * (the outliers take the slower residue path).  A double has up to 53
 * significant bits, so general weights do not; weights rounded to bf16 or
 * to a few bits (the seeded parameters) spread over fewer than 31 bits
 * below their row's largest but for the tiny ones. */
static int fits_narrow(const double *W, size_t out, size_t in, long lo)
{
    size_t outliers = 0;
    const size_t allowed = out * in / 1024;
    for (size_t o = 0; o < out && outliers <= allowed; o++)
        outliers += row_outliers(W + o * in, in, row_window(W + o * in, in, lo, 31));
    return outliers <= allowed;
}

int refenc_mp_wspan_fix(refenc_mp_wspan *s, const double *W, size_t out, size_t in)
{
    s->fix = NULL;
    if (s->special || s->w_empty || out == 0 || in == 0)
        return REFENC_OK; /* the general path or nothing: no fixed point needed */
    refenc_mp_wfix *f = calloc(1, sizeof *f);
    if (f == NULL)
        return REFENC_ENOMEM;
    f->W = W, f->out = out, f->in = in;
    f->width = fits_narrow(W, out, in, s->w_lo) ? 31 : 63;
    if (f->width == 31)
        f->U32 = malloc(out * in * sizeof *f->U32);
    else
        f->U = malloc(out * in * sizeof *f->U);
    f->base = malloc(out * sizeof *f->base);
    f->out_off = malloc((out + 1) * sizeof *f->out_off);
    size_t cap = 64, n_out = 0;
    f->out_idx = malloc(cap * sizeof *f->out_idx);
    s->fix = f;
    if ((f->U == NULL && f->U32 == NULL) || f->base == NULL || f->out_off == NULL || f->out_idx == NULL)
        goto fail;
    for (size_t o = 0; o < out; o++) {
        f->base[o] = row_window(W + o * in, in, s->w_lo, f->width);
        f->out_off[o] = n_out;
        if (!row_fix(f, o, &n_out, &cap))
            goto fail;
    }
    f->out_off[out] = n_out;
    return REFENC_OK;
fail:
    refenc_mp_wspan_unfix(s);
    return REFENC_ENOMEM;
}

void refenc_mp_wspan_unfix(refenc_mp_wspan *s)
{
    refenc_mp_wfix *f = s->fix;
    if (f == NULL)
        return;
    free(f->U);
    free(f->U32);
    free(f->base);
    free(f->out_off);
    free(f->out_idx);
    free(f);
    s->fix = NULL;
}

/* The loaded row's values for the fixed-point weights: value j, X_j 2^lsb_j
 * with lsb_j - lo = 64 k_j + r_j, becomes X_j 2^r_j in fx_n = (the longest
 * value's limbs) + 1 limbs after its index in the row (one pointer runs
 * over both), and the values are sorted by (k_j, sign) (a
 * counting sort: k_j <= 64, or the row takes the residue path).  Each
 * group's correction, 2^63 times its sum of X_j 2^r_j, is computed once
 * here for all the rows of weights. */
static void row_load_fixed(refenc_mp_row *row)
{
    row->fx_n = 0;
    row->fx_groups = 0;
    size_t nmax = 0, count[130] = {0};
    if (row->nnz == 0 || row->nnz > ((size_t)1 << 20))
        return; /* the column sums below hold 2^20 terms */
    for (size_t j = 0; j < row->nnz; j++) {
        const refenc_mp_operand *o = &row->op[j];
        if ((o->lsb - row->lo) / 64 > 64)
            return;
        count[2 * ((o->lsb - row->lo) / 64) + o->neg]++;
        nmax = o->n > nmax ? o->n : nmax;
    }
    if (nmax + 1 > 5)
        return;
    const size_t N = nmax + 1;
    size_t at[130], group[130], end = 0;
    for (unsigned key = 0; key < 130; key++) {
        at[key] = end;
        end += count[key];
        if (count[key] > 0) {
            const size_t g = row->fx_groups++;
            group[key] = g;
            row->fx_end[g] = end;
            row->fx_k[g] = key / 2;
            row->fx_neg[g] = (int)(key % 2);
            memset(row->fx_corr[g], 0, sizeof row->fx_corr[g]);
        }
    }
    for (size_t j = 0; j < row->nnz; j++) {
        const refenc_mp_operand *o = &row->op[j];
        const size_t off = (size_t)(o->lsb - row->lo), key = 2 * (off / 64) + (size_t)o->neg, t = at[key]++;
        const unsigned r = (unsigned)(off % 64);
        mp_limb_t *X = row->fx_x + t * (N + 1) + 1;
        X[-1] = row->idx[j];
        memset(X, 0, N * sizeof *X);
        if (r == 0) {
            memcpy(X, o->d, o->n * sizeof *X);
        } else {
            X[0] = o->d[0] << r;
            for (size_t i = 1; i < o->n; i++)
                X[i] = o->d[i] << r | o->d[i - 1] >> (64 - r);
            X[o->n] = o->d[o->n - 1] >> (64 - r);
        }
        /* the group's sum of X, at most N + 1 limbs for 2^20 values */
        mp_limb_t *c = row->fx_corr[group[key]];
        mpn_add(c, c, (mp_size_t)(N + 1), X, (mp_size_t)N);
    }
    for (size_t g = 0; g < row->fx_groups; g++) { /* times 2^63: one limb up, one bit down */
        mp_limb_t *c = row->fx_corr[g];
        memmove(c + 1, c, (N + 1) * sizeof *c);
        c[0] = 0;
        mpn_rshift(c, c, (mp_size_t)(N + 2), 1);
    }
    row->fx_n = N;
}

/* Drops an operand's low limbs that are zero (a double at p bits: all but
 * the top one), raising its last bit: the same value in fewer limbs. */
static void trim_low_limbs(refenc_mp_operand *o)
{
    while (o->d[0] == 0) {
        o->d++;
        o->n--;
        o->lsb += 64;
    }
}

void refenc_mp_row_load(refenc_mp_ws *ws, mpfr_srcptr x, size_t n)
{
    refenc_mp_row *row = &ws->row;
    row->n = n;
    row->nnz = 0;
    row->special = 0;
    row->nx = 0;
    int empty = 1;
    for (size_t k = 0; k < n; k++) {
        refenc_mp_operand o;
        const int kind = from_mpfr(&o, x + k);
        if (kind == OP_SPECIAL)
            row->special = 1;
        if (kind != OP_REGULAR)
            continue;
        trim_low_limbs(&o);
        const size_t j = row->nnz++;
        row->idx[j] = k;
        row->op[j] = o;
        const long top = o.lsb + 64 * (long)o.n;
        if (empty || o.lsb < row->lo)
            row->lo = o.lsb;
        if (empty || top > row->hi)
            row->hi = top;
        row->nx = empty || row->nx == o.n ? o.n : 5; /* 5: sizes differ */
        empty = 0;
    }
    row_load_fixed(row);
}

/* One group of the row's values (cnt >= 1 slots from P: an index k and N
 * limbs X each) against row o's biased weights U (W + 2^63, unsigned): S =
 * sum X U[k], exactly, in N + 2 limbs (below 2^(64 (N + 1) + 20) for
 * n <= 2^20 terms), accumulated in registers. */
#if REFENC_MP_ADC_CHAINS
/* x86-64 with BMI2 and ADX (checked at run time): S in N + 2 registers, each
 * term added as the products' low words in one carry chain (adcx, CF) and
 * their high words one limb up in another (adox, OF), interleaved with the
 * multiplications (mulx, which leaves the flags alone); the two carries
 * out end in S's top limbs.  N + 8 registers: 13 at most (-O0 and
 * -fno-omit-frame-pointer builds have them). */
#define ADX_LIMB(OFF, LO, HI)                                                   \
    "mulxq " #OFF "(%[p]), %[l], %[h]\n\t"                                      \
    "adcxq %[l], %[" #LO "]\n\t"                                                \
    "adoxq %[h], %[" #HI "]\n\t"
#define ADX_HEAD(LOAD)                                                          \
    "1:\n\t"                                                                    \
    "movq (%[p]), %[l]\n\t"                                                     \
    LOAD                                                                        \
    "xorl %k[z], %k[z]\n\t" /* z = 0, CF = OF = 0 */
#define ADX_LOAD64 "movq (%[U],%[l],8), %%rdx\n\t"
#define ADX_LOAD32 "movl (%[U],%[l],4), %%edx\n\t" /* zero-extended into rdx */
#define ADX_TAIL(STRIDE, TOP1, TOP2)                                            \
    "adcxq %[z], %[" #TOP1 "]\n\t"                                              \
    "adoxq %[z], %[" #TOP2 "]\n\t"                                              \
    "adcxq %[z], %[" #TOP2 "]\n\t"                                              \
    "addq $" #STRIDE ", %[p]\n\t"                                               \
    "cmpq %[end], %[p]\n\t"                                                     \
    "jb 1b"
#define ADX_OUT(K) [s##K] "+r"(S[K])
#define ADX_IN [p] "+r"(p), [l] "=&r"(l), [h] "=&r"(h), [z] "=&r"(z)
#define ADX_ARGS : [U] "r"(U), [end] "m"(end) : "rdx", "cc", "memory"
static _Atomic int portable_only; /* refenc_mp_dot_portable: the tests' switch */
static int have_adx(void)
{
    static _Atomic int known = -1; /* cpuid once (slow, in a virtual machine); any thread may */
    if (atomic_load_explicit(&portable_only, memory_order_relaxed))
        return 0;
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k < 0) {
        unsigned a, b, c, d;
        k = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 8 & 1) && (b >> 19 & 1); /* BMI2, ADX */
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k;
}
/* group_sum_adx64 (U: 64-bit weights) and group_sum_adx32 (32-bit). */
#define GROUP_SUM_ADX(NAME, UTYPE, LOAD)                                                                    \
    static void NAME(mp_limb_t *S, const mp_limb_t *P, size_t cnt, const UTYPE *U, size_t N)               \
    {                                                                                                       \
        const mp_limb_t *p = P, *const end = P + cnt * (N + 1);                                             \
        mp_limb_t l, h, z;                                                                                  \
        memset(S, 0, (N + 2) * sizeof *S);                                                                  \
        switch (N) {                                                                                        \
        case 2:                                                                                             \
            __asm__(ADX_HEAD(LOAD) ADX_LIMB(8, s0, s1) ADX_LIMB(16, s1, s2) ADX_TAIL(24, s2, s3)            \
                    : ADX_IN, ADX_OUT(0), ADX_OUT(1), ADX_OUT(2), ADX_OUT(3) ADX_ARGS);                     \
            break;                                                                                          \
        case 3:                                                                                             \
            __asm__(ADX_HEAD(LOAD) ADX_LIMB(8, s0, s1) ADX_LIMB(16, s1, s2) ADX_LIMB(24, s2, s3)            \
                    ADX_TAIL(32, s3, s4)                                                                    \
                    : ADX_IN, ADX_OUT(0), ADX_OUT(1), ADX_OUT(2), ADX_OUT(3), ADX_OUT(4) ADX_ARGS);         \
            break;                                                                                          \
        case 4:                                                                                             \
            __asm__(ADX_HEAD(LOAD) ADX_LIMB(8, s0, s1) ADX_LIMB(16, s1, s2) ADX_LIMB(24, s2, s3)            \
                    ADX_LIMB(32, s3, s4) ADX_TAIL(40, s4, s5)                                               \
                    : ADX_IN, ADX_OUT(0), ADX_OUT(1), ADX_OUT(2), ADX_OUT(3), ADX_OUT(4),                   \
                      ADX_OUT(5) ADX_ARGS);                                                                 \
            break;                                                                                          \
        default:                                                                                            \
            __asm__(ADX_HEAD(LOAD) ADX_LIMB(8, s0, s1) ADX_LIMB(16, s1, s2) ADX_LIMB(24, s2, s3)            \
                    ADX_LIMB(32, s3, s4) ADX_LIMB(40, s4, s5) ADX_TAIL(48, s5, s6)                          \
                    : ADX_IN, ADX_OUT(0), ADX_OUT(1), ADX_OUT(2), ADX_OUT(3), ADX_OUT(4), ADX_OUT(5),       \
                      ADX_OUT(6) ADX_ARGS);                                                                 \
            break;                                                                                          \
        }                                                                                                   \
    }
GROUP_SUM_ADX(group_sum_adx64, uint64_t, ADX_LOAD64)
GROUP_SUM_ADX(group_sum_adx32, uint32_t, ADX_LOAD32)
#undef GROUP_SUM_ADX
#undef ADX_LOAD64
#undef ADX_LOAD32
#undef ADX_LIMB
#undef ADX_HEAD
#undef ADX_TAIL
#undef ADX_OUT
#undef ADX_IN
#undef ADX_ARGS
#endif

void refenc_mp_dot_portable(int on)
{
#if REFENC_MP_ADC_CHAINS
    atomic_store_explicit(&portable_only, on != 0, memory_order_relaxed);
#else
    (void)on; /* the portable code is the only one */
#endif
}

/* The portable code (and x86-64 without ADX): per term, X times the 64-bit
 * U[k] (or U32[k], narrow), the products' low and high words into N + 1
 * column sums of 128 bits -- no carry runs between the columns in the
 * loop.  A column stays below 2^(65 + 20); the columns are carried into S
 * at the end. */
static inline __attribute__((always_inline)) void group_sum(mp_limb_t *S, const mp_limb_t *P, size_t cnt,
                                                            const uint64_t *U, const uint32_t *U32,
                                                            const size_t N)
{
#if REFENC_MP_ADC_CHAINS
    if (have_adx()) {
        if (U32 != NULL)
            group_sum_adx32(S, P, cnt, U32, N);
        else
            group_sum_adx64(S, P, cnt, U, N);
        return;
    }
#endif
    u128 col[6] = {0};
    for (size_t t = 0; t < cnt; t++, P += N + 1) {
        const uint64_t u = U32 != NULL ? U32[P[0]] : U[P[0]];
        const mp_limb_t *X = P + 1;
        for (size_t i = 0; i < N; i++) {
            const u128 p = (u128)X[i] * u;
            col[i] += (uint64_t)p;
            col[i + 1] += (uint64_t)(p >> 64);
        }
    }
    u128 carry = 0;
    for (size_t i = 0; i <= N; i++) {
        const u128 v = col[i] + carry; /* < 2^(65 + 20) + 2^(1 + 20): no overflow */
        S[i] = (mp_limb_t)v;
        carry = v >> 64;
    }
    S[N + 1] = (mp_limb_t)carry;
}

/* The group sums of row o's fixed-point weights against the loaded row,
 * added to acc[0] (positive) or acc[1] (negative), the last bit of acc of
 * weight 2^lo.  A group's sum of X W is its sum of X U less its
 * correction (2^63 sum X; narrow, 2^31 sum X: the same shifted down 32
 * bits, exactly, as its low 63 bits are zero), of the group's sign times
 * the difference's. */
static void add_groups(mp_limb_t *acc[2], long lo, const refenc_mp_row *row, const refenc_mp_wfix *f, size_t o)
{
    const uint64_t *U = f->U != NULL ? f->U + o * f->in : NULL;
    const uint32_t *U32 = f->U32 != NULL ? f->U32 + o * f->in : NULL;
    const size_t N = row->fx_n;
    size_t t0 = 0;
    for (size_t g = 0; g < row->fx_groups; g++) {
        const size_t cnt = row->fx_end[g] - t0;
        const mp_limb_t *P = row->fx_x + t0 * (N + 1);
        mp_limb_t S[7], corr32[7];
        const mp_limb_t *corr = row->fx_corr[g];
        if (U32 != NULL) { /* constant N and width: the loop's body is straight code */
            switch (N) {
            case 2: group_sum(S, P, cnt, NULL, U32, 2); break;
            case 3: group_sum(S, P, cnt, NULL, U32, 3); break;
            case 4: group_sum(S, P, cnt, NULL, U32, 4); break;
            default: group_sum(S, P, cnt, NULL, U32, 5); break;
            }
            mpn_rshift(corr32, corr, (mp_size_t)(N + 2), 32);
            corr = corr32;
        } else {
            switch (N) {
            case 2: group_sum(S, P, cnt, U, NULL, 2); break;
            case 3: group_sum(S, P, cnt, U, NULL, 3); break;
            case 4: group_sum(S, P, cnt, U, NULL, 4); break;
            default: group_sum(S, P, cnt, U, NULL, 5); break;
            }
        }
        t0 = row->fx_end[g];
        int neg = row->fx_neg[g];
        if (mpn_sub_n(S, S, corr, (mp_size_t)(N + 2)) != 0) { /* a borrow: negative */
            mpn_neg(S, S, (mp_size_t)(N + 2));
            neg = !neg;
        }
        size_t used = N + 2;
        while (used > 0 && S[used - 1] == 0)
            used--;
        if (used == 0)
            continue;
        /* S 2^(row lo + 64 k + base), at that offset from lo (>= 0: base >= W's lowest last bit) */
        const size_t off = (size_t)(row->lo + 64 * (long)row->fx_k[g] + f->base[o] - lo);
        add_shifted(acc[neg] + off / 64, (unsigned)(off % 64), S, used, 1);
    }
}

/* The general path for a row: exact products of x and the doubles (converted
 * exactly) at 2p bits, one mpfr_sum. */
static void row_general(mpfr_ptr r, mpfr_srcptr x, size_t n, const double *w, const double *extra,
                        refenc_mp_ws *ws)
{
    for (size_t k = 0; k < n; k++) {
        mpfr_set_d(ws->wconv, w[k], MPFR_RNDN);               /* exact: 53 bits */
        mpfr_mul(ws->prod + k, x + k, ws->wconv, MPFR_RNDN);  /* exact: 2p bits */
    }
    if (extra != NULL)
        mpfr_set_d(ws->prod + n++, *extra, MPFR_RNDN);       /* exact */
    mpfr_sum(r, ws->pprod, n, MPFR_RNDN);
}

/* Row o of span's fixed-point weights, when the loaded row takes them, else
 * SIZE_MAX (no fixed-point weights, a row of another length, or none). */
static size_t fixed_row_of(const refenc_mp_wspan *span, const refenc_mp_row *row, size_t o)
{
    const refenc_mp_wfix *fx = span->fix;
    if (fx == NULL || row->fx_n == 0 || row->nnz == 0 || fx->in != row->n || o >= fx->out)
        return SIZE_MAX;
    return o;
}

/* The outliers of fixed-point weight row o (the weights outside its window)
 * times their values of x, into the residue sums res (as ROW_TERMS below). */
static void add_outliers(mp_limb_t *res, size_t stride, uint64_t used[2], long lo, mpfr_srcptr x,
                         const double *w, const refenc_mp_wfix *fx, size_t o)
{
    for (size_t q = fx->out_off[o]; q < fx->out_off[o + 1]; q++) {
        const size_t k = fx->out_idx[q];
        refenc_mp_operand xo;
        mp_limb_t m;
        long lsb;
        int neg;
        if (from_mpfr(&xo, x + k) != OP_REGULAR || decode_double(w[k], &m, &lsb, &neg) != OP_REGULAR)
            continue;
        trim_low_limbs(&xo); /* as refenc_mp_row_load: the span is of the trimmed values */
        const size_t off = (size_t)(xo.lsb + lsb - lo), r = off % 64;
        const int sgn = xo.neg ^ neg;
        used[sgn] |= (uint64_t)1 << r;
        add_unshifted(res + (sgn * 64 + r) * stride + off / 64, xo.d, xo.n, m);
    }
}

/* acc[sgn] (limbs) = the residue sums of that sign (those in used), each
 * shifted by its residue; the residue sums are zeroed again.  tmp: limbs. */
static void residues_gather(mp_limb_t *acc[2], mp_limb_t *res, size_t stride, const uint64_t used[2],
                            size_t limbs, mp_limb_t *tmp)
{
    for (int sgn = 0; sgn < 2; sgn++) {
        memset(acc[sgn], 0, limbs * sizeof *acc[sgn]);
        for (uint64_t u = used[sgn]; u != 0; u &= u - 1) { /* the residues used, lowest first */
            const unsigned r = (unsigned)__builtin_ctzll(u);
            mp_limb_t *a = res + (sgn * 64 + r) * stride;
            if (r == 0) {
                mpn_add_n(acc[sgn], acc[sgn], a, (mp_size_t)limbs);
            } else {
                mpn_lshift(tmp, a, (mp_size_t)limbs, r); /* the top r bits are headroom zeros */
                mpn_add_n(acc[sgn], acc[sgn], tmp, (mp_size_t)limbs);
            }
            memset(a, 0, limbs * sizeof *a);
        }
    }
}

/* r = an exact zero sum: -0 only when every term is a -0 (mpfr_sum's rule). */
static void row_zero(mpfr_ptr r, mpfr_srcptr x, size_t n, const double *w, const double *extra)
{
    int sign = n == 0 && extra == NULL ? 1 : -1;
    for (size_t k = 0; k < n && sign < 0; k++) {
        const double wk = w[k];
        if (!mpfr_zero_p(x + k) && wk != 0)
            sign = 1;
        else if (mpfr_signbit(x + k) == (signbit(wk) != 0))
            sign = 1;
    }
    if (extra != NULL && !(*extra == 0 && signbit(*extra)))
        sign = 1;
    mpfr_set_zero(r, sign);
}

/* The span of the row's terms with w and of extra: *lo, *hi; 0 if there is
 * no nonzero term. */
static int row_span(long *lo, long *hi, const refenc_mp_row *row, const double *extra,
                    const refenc_mp_wspan *span)
{
    int any = 0;
    if (row->nnz > 0 && !span->w_empty) {
        *lo = row->lo + span->w_lo;
        *hi = row->hi + span->w_hi;
        any = 1;
    }
    if (extra != NULL && !span->b_empty) {
        if (!any || span->b_lo < *lo)
            *lo = span->b_lo;
        if (!any || span->b_hi > *hi)
            *hi = span->b_hi;
        any = 1;
    }
    return any;
}

/* Every term x[k] w[k] of the loaded row (w's zeros skipped), unshifted,
 * into the residue sums res (stride limbs each) of its sign and of its
 * offset from lo modulo 64, at limb offset / 64; used marks the residues. */
#define ROW_TERMS(NX)                                                                   \
    for (size_t j = 0; j < row->nnz; j++) {                                             \
        const refenc_mp_operand *o = &row->op[j];                                       \
        mp_limb_t m;                                                                    \
        long lsb;                                                                       \
        int neg;                                                                        \
        if (decode_double(w[row->idx[j]], &m, &lsb, &neg) != OP_REGULAR)                \
            continue; /* a zero (specials were excluded) */                             \
        const size_t off = (size_t)(o->lsb + lsb - lo), r = off % 64;                   \
        const int sgn = o->neg ^ neg;                                                   \
        used[sgn] |= (uint64_t)1 << r;                                                  \
        add_unshifted(res + (sgn * 64 + r) * stride + off / 64, o->d, (NX), m);         \
    }
static void add_terms(mp_limb_t *res, size_t stride, uint64_t used[2], long lo, const refenc_mp_row *row,
                      const double *w)
{
    switch (row->nx) { /* constant limb counts: straight code */
    case 1: ROW_TERMS(1); break;
    case 2: ROW_TERMS(2); break;
    case 3: ROW_TERMS(3); break;
    case 4: ROW_TERMS(4); break;
    default: ROW_TERMS(o->n); /* mixed or longer operands */
    }
}
#undef ROW_TERMS

/* The bias *extra into the residue sums, as a term (add_terms). */
static void add_extra(mp_limb_t *res, size_t stride, uint64_t used[2], long lo, const double *extra)
{
    mp_limb_t m;
    long lsb;
    int neg;
    if (extra == NULL || decode_double(*extra, &m, &lsb, &neg) != OP_REGULAR)
        return;
    const size_t off = (size_t)(lsb - lo), r = off % 64;
    used[neg] |= (uint64_t)1 << r;
    add_unshifted(res + (neg * 64 + r) * stride + off / 64, &m, 1, 1);
}

void refenc_mp_dot_row_d(mpfr_ptr r, mpfr_srcptr x, const double *w, const double *extra, size_t w_row,
                         const refenc_mp_wspan *span, refenc_mp_ws *ws)
{
    const refenc_mp_row *row = &ws->row;
    const size_t n = row->n;
    long lo = 0, hi = 0;
    const int any = row_span(&lo, &hi, row, extra, span);
    const size_t limbs = !row->special && !span->special && any ? refenc_mp_acc_limbs(lo, hi, ws) : 0;
    if (row->special || span->special || (any && limbs == 0)) {
        row_general(r, x, n, w, extra, ws);
        return;
    }
    if (!any) {
        row_zero(r, x, n, w, extra);
        return;
    }
    /* Each term goes, unshifted, into the accumulator of its offset's
     * residue r modulo 64, at limb offset / 64: no term is shifted.  The
     * (at most 64) residues' sums are shifted by r and added once at the
     * end, and their accumulators zeroed again.  With fixed-point weights
     * (w = W + w_row in), the terms go into register sums per group of
     * values (add_groups) and only the outliers take the residues. */
    mp_limb_t *res = ws->acc + 2 * ws->acc_limbs; /* (2, 64, acc_limbs), kept zero */
    uint64_t used[2] = {0, 0};
    const size_t o_fx = fixed_row_of(span, row, w_row);
    if (o_fx != SIZE_MAX)
        add_outliers(res, ws->acc_limbs, used, lo, x, w, span->fix, o_fx);
    else
        add_terms(res, ws->acc_limbs, used, lo, row, w);
    add_extra(res, ws->acc_limbs, used, lo, extra);
    mp_limb_t *acc[2] = {ws->acc, ws->acc + ws->acc_limbs};
    residues_gather(acc, res, ws->acc_limbs, used, limbs, ws->acc + (2 + 128) * ws->acc_limbs);
    if (o_fx != SIZE_MAX) {
        add_groups(acc, lo, row, span->fix, o_fx);
        ws->fixed_rows++;
    }
    if (!refenc_mp_acc_finish(r, acc[0], acc[1], limbs, lo))
        row_zero(r, x, n, w, extra);
}
