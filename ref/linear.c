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
