/* nn.Linear in double:  y[n,o] = sum_k x[n,k] W[o,k] + b[o]. */
#include "linear.h"

void refenc_linear_forward(double *y, const double *x, const double *W, const double *b,
                           size_t N, size_t in, size_t out)
{
    /* y (N, out) = x (N, in) . W^T (in, out) + b (out) */
    for (size_t n = 0; n < N; n++) {
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
        if (dx != NULL) {
            /* dx[n,:] = sum_o dy[n,o] W[o,:], o in order: each dx[n,k] is
             * the same sum, term by term, as a loop over o for each k, but W
             * is read along its rows instead of down its columns */
            double *dx_n = dx + n * in;    /* dx[n,:] */
            for (size_t k = 0; k < in; k++)
                dx_n[k] = 0.0;
            for (size_t o = 0; o < out; o++) {
                const double *w_o = W + o * in; /* W[o,:] */
                for (size_t k = 0; k < in; k++)
                    dx_n[k] += dy_n[o] * w_o[k];
            }
        }
    }
    /* dW[o,:] += dy[n,o] x[n,:] and db[o] += dy[n,o], n in order: each value
     * the same sum, term by term, as a loop over n outside, with dW's row o
     * kept in cache over the N tokens instead of all of dW read N times */
    for (size_t o = 0; o < out; o++) {
        double *dw_o = dW + o * in;        /* dW[o,:] */
        for (size_t n = 0; n < N; n++) {
            const double dy_no = dy[n * out + o], *x_n = x + n * in;
            for (size_t k = 0; k < in; k++)
                dw_o[k] += dy_no * x_n[k];
            if (db != NULL)
                db[o] += dy_no;
        }
    }
}
