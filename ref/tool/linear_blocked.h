/* The reference's linear map, faster: the tools' (the golden generator's
 * reference runs and bug variants, golden/alt.c, and the float64 emulation),
 * never the reference's own kernels, which stay the plain formula
 * (ref/linear.c, docs/architecture.md). */
#ifndef REFENC_LINEAR_BLOCKED_H
#define REFENC_LINEAR_BLOCKED_H

#include <stddef.h>

/* refenc_linear_forward (linear.h), bit for bit: y (N, out) = x (N, in) W^T
 * + b, every y[n,o] the same sum acc = 0.0, acc += x[n,k] W[o,k] for k = 0
 * upward, in one accumulator, then acc + b[o] (b NULL: acc): the same
 * roundings, so the same doubles (NaN payloads aside).  What changes is
 * only which sums are in flight at once: blocks of 4 tokens times 4
 * outputs, 16 independent chains that the CPU overlaps, each load of x or W
 * serving 4 of them (the plain loop waits for one addition's latency per
 * term).  Needs the build's -ffp-contract=off, as every kernel: a fused
 * multiply-add would round once where the formula rounds twice.
 * y must not alias x, W or b.  Never fails, never allocates (an 8 KiB
 * buffer on the stack). */
void refenc_linear_blocked_forward(double *y, const double *x, const double *W, const double *b,
                                   size_t N, size_t in, size_t out);

#endif
