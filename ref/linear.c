/* nn.Linear in double:  y[n,o] = sum_k x[n,k] W[o,k] + b[o]. */
#include "linear.h"

/* y[n,o] for rows n .. n+3 at once: four sums, each over k in increasing
 * order as the one-row loop below adds them (so the same doubles, bit for
 * bit), independent of each other, so their additions overlap and each
 * W[o,:] is read once for four rows instead of four times. */
static void four_rows(double *y, const double *x, const double *W, const double *b, size_t in, size_t out)
{
    const double *x0 = x, *x1 = x + in, *x2 = x + 2 * in, *x3 = x + 3 * in; /* x[n+i,:] */
    for (size_t o = 0; o < out; o++) {
        const double *w_o = W + o * in; /* W[o,:] */
        double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
        for (size_t k = 0; k < in; k++) {
            a0 += x0[k] * w_o[k];
            a1 += x1[k] * w_o[k];
            a2 += x2[k] * w_o[k];
            a3 += x3[k] * w_o[k];
        }
        y[o] = b != NULL ? a0 + b[o] : a0;
        y[out + o] = b != NULL ? a1 + b[o] : a1;
        y[2 * out + o] = b != NULL ? a2 + b[o] : a2;
        y[3 * out + o] = b != NULL ? a3 + b[o] : a3;
    }
}

void refenc_linear_forward(double *y, const double *x, const double *W, const double *b,
                           size_t N, size_t in, size_t out)
{
    /* y (N, out) = x (N, in) . W^T (in, out) + b (out) */
    size_t n = 0;
    for (; n + 4 <= N; n += 4)
        four_rows(y + n * out, x + n * in, W, b, in, out);
    for (; n < N; n++) {
        const double *x_n = x + n * in;    /* x[n,:] */
        double *y_n = y + n * out;         /* y[n,:] */
        for (size_t o = 0; o < out; o++) {
            const double *w_o = W + o * in; /* W[o,:] */
            double acc = 0.0;
            for (size_t k = 0; k < in; k++)
                acc += x_n[k] * w_o[k];
            y_n[o] = b != NULL ? acc + b[o] : acc;
        }
    }
}

/* Backward of y = x W^T + b, given dy = dL/dy (N, out):
 *   dx[n,k]  = sum_o dy[n,o] W[o,k]          dx (N, in), written
 *   dW[o,k] += sum_n dy[n,o] x[n,k]          dW (out, in), accumulated: the
 *                                            sum over the N tokens of the
 *                                            outer products dy[n,:] x[n,:]^T
 *   db[o]   += sum_n dy[n,o]                 db (out), accumulated
 * Saved: x, the forward's input (nothing else). */
void refenc_linear_backward(double *dx, double *dW, double *db,
                            const double *dy, const double *x, const double *W,
                            size_t N, size_t in, size_t out)
{
    for (size_t n = 0; n < N; n++) {
        const double *dy_n = dy + n * out; /* dy[n,:] */
        const double *x_n = x + n * in;    /* x[n,:]  */
        if (dx != NULL) {
            double *dx_n = dx + n * in;    /* dx[n,:] */
            for (size_t k = 0; k < in; k++) {
                double acc = 0.0;
                for (size_t o = 0; o < out; o++)
                    acc += dy_n[o] * W[o * in + k];
                dx_n[k] = acc;
            }
        }
        for (size_t o = 0; o < out; o++) {
            double *dw_o = dW + o * in;    /* dW[o,:] */
            for (size_t k = 0; k < in; k++)
                dw_o[k] += dy_n[o] * x_n[k];
            if (db != NULL)
                db[o] += dy_n[o];
        }
    }
}
