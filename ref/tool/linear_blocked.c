/* refenc_linear_forward in register blocks (linear_blocked.h):
 *   y[n,o] = (((0.0 + x[n,0] W[o,0]) + x[n,1] W[o,1]) + ...) + b[o]
 * the reference's sum, term for term; only the schedule differs.
 *
 * The schedule.  Outputs go in groups of OB = 4 (o0 .. o0+3), whose rows of
 * W are packed column by column into pk (pk[4k + j] = W[o0+j, k0+k]) for KC
 * terms at a time, so that one aligned pair of loads gives the 4 weights of
 * term k.  Tokens go in groups of TB = 4: for each term k, the 4 tokens'
 * x[n,k] times the 4 weights are 16 products added to 16 accumulators, each
 * its own y[n,o]'s chain.  Each vector lane is one chain: lanes never mix
 * (no horizontal sum), so every chain is the reference's, in its order.
 * Between two passes over the terms (in > KC) a chain's partial sum waits
 * in y[n,o] (a store and a load of a double: exact); the last pass adds the
 * bias.  Leftover tokens (N mod 4) run the same chains one token at a time,
 * leftover outputs (out mod 4) the reference's own loop. */
#include "linear_blocked.h"

#include <string.h>

#include "../linear.h"

#if defined(__GNUC__) /* GCC and Clang: their vector extension */

#define OB 4    /* outputs per group: two vectors of two doubles        */
#define TB 4    /* tokens per group: 4 x 4 = 16 chains, 8 registers     */
#define KC 256  /* terms per pass: pk holds KC * OB doubles (8 KiB)     */

/* Two doubles: a lane is an independent chain, + and * act lane by lane
 * with IEEE rounding (no contraction: -ffp-contract=off). */
typedef double v2d __attribute__((vector_size(16)));

static v2d load2(const double *p)
{
    v2d v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void store2(double *p, v2d v)
{
    memcpy(p, &v, sizeof v);
}

/* The chains' sums so far: 0.0 on the first pass, else their partial sums,
 * waiting in y[n, o0 .. o0+3]. */
static v2d start2(const double *y, int first)
{
    return first ? (v2d){0.0, 0.0} : load2(y);
}

/* Stores two chains' sums; on the last pass (b not NULL) with the bias
 * added: acc + b[o], the reference's last operation. */
static void finish2(double *y, v2d acc, const double *b)
{
    store2(y, b != NULL ? acc + load2(b) : acc);
}

/* pk[4k + j] = W[j, k] for k < kn, j < 4: W's rows o0 .. o0+3 from term
 * k0 (W points at W[o0, k0]; its rows are in apart). */
static void pack(double *pk, const double *W, size_t in, size_t kn)
{
    for (size_t k = 0; k < kn; k++)
        for (size_t j = 0; j < OB; j++)
            pk[OB * k + j] = W[j * in + k];
}

/* One token's 4 chains over the pass's kn terms.  y: y[n, o0], x: x[n, k0];
 * b: b + o0 on the last pass, else NULL. */
static void row_1x4(double *y, const double *x, const double *pk, size_t kn, int first,
                    const double *b)
{
    v2d a0 = start2(y, first), a1 = start2(y + 2, first);
    for (size_t k = 0; k < kn; k++) {
        const v2d w0 = load2(pk + OB * k), w1 = load2(pk + OB * k + 2);
        const v2d xk = {x[k], x[k]};
        a0 += xk * w0;
        a1 += xk * w1;
    }
    finish2(y, a0, b);
    finish2(y + 2, a1, b != NULL ? b + 2 : NULL);
}

/* Four tokens' 16 chains over the pass's kn terms: y: y[n, o0] (rows out
 * apart), x: x[n, k0] (rows in apart); b as row_1x4. */
static void block_4x4(double *y, size_t out, const double *x, size_t in, const double *pk,
                      size_t kn, int first, const double *b)
{
    double *y0 = y, *y1 = y + out, *y2 = y + 2 * out, *y3 = y + 3 * out;
    const double *x0 = x, *x1 = x + in, *x2 = x + 2 * in, *x3 = x + 3 * in;
    v2d a00 = start2(y0, first), a01 = start2(y0 + 2, first);
    v2d a10 = start2(y1, first), a11 = start2(y1 + 2, first);
    v2d a20 = start2(y2, first), a21 = start2(y2 + 2, first);
    v2d a30 = start2(y3, first), a31 = start2(y3 + 2, first);
    for (size_t k = 0; k < kn; k++) {
        const v2d w0 = load2(pk + OB * k), w1 = load2(pk + OB * k + 2); /* W[o0 .. o0+3, k] */
        const v2d x0k = {x0[k], x0[k]}, x1k = {x1[k], x1[k]};
        const v2d x2k = {x2[k], x2[k]}, x3k = {x3[k], x3[k]};
        a00 += x0k * w0, a01 += x0k * w1;
        a10 += x1k * w0, a11 += x1k * w1;
        a20 += x2k * w0, a21 += x2k * w1;
        a30 += x3k * w0, a31 += x3k * w1;
    }
    const double *b2 = b != NULL ? b + 2 : NULL;
    finish2(y0, a00, b), finish2(y0 + 2, a01, b2);
    finish2(y1, a10, b), finish2(y1 + 2, a11, b2);
    finish2(y2, a20, b), finish2(y2 + 2, a21, b2);
    finish2(y3, a30, b), finish2(y3 + 2, a31, b2);
}

/* Outputs o0 .. o0+3 of every token, pass by pass over the terms. */
static void output_group(double *y, const double *x, const double *W, const double *b, size_t N,
                         size_t in, size_t out, size_t o0)
{
    _Alignas(16) double pk[KC * OB];
    for (size_t k0 = 0; k0 < in; k0 += KC) {
        const size_t kn = in - k0 < KC ? in - k0 : KC;
        const int first = k0 == 0;
        const double *b_o = k0 + kn == in && b != NULL ? b + o0 : NULL; /* the last pass: bias */
        pack(pk, W + o0 * in + k0, in, kn);
        size_t n = 0;
        for (; n + TB <= N; n += TB)
            block_4x4(y + n * out + o0, out, x + n * in + k0, in, pk, kn, first, b_o);
        for (; n < N; n++)
            row_1x4(y + n * out + o0, x + n * in + k0, pk, kn, first, b_o);
    }
}

void refenc_linear_blocked_forward(double *y, const double *x, const double *W, const double *b,
                                   size_t N, size_t in, size_t out)
{
    if (in == 0) { /* no term: y = 0.0 + b, the reference's */
        refenc_linear_forward(y, x, W, b, N, in, out);
        return;
    }
    size_t o0 = 0;
    for (; o0 + OB <= out; o0 += OB)
        output_group(y, x, W, b, N, in, out, o0);
    if (o0 < out) /* the last out mod 4 outputs: the reference's loop, token by token */
        for (size_t n = 0; n < N; n++)
            refenc_linear_forward(y + n * out + o0, x + n * in, W + o0 * in,
                                  b != NULL ? b + o0 : NULL, 1, in, out - o0);
}

#else /* another compiler: the reference's loop itself (the same doubles) */

void refenc_linear_blocked_forward(double *y, const double *x, const double *W, const double *b,
                                   size_t N, size_t in, size_t out)
{
    refenc_linear_forward(y, x, W, b, N, in, out);
}

#endif
