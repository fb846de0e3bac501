/* Position-wise FFN in double (ffn.h): y = act(x W1^T + b1) W2^T + b2;
 * backward: da = (dy W2) * act'(a), dx = da W1 (below). */
#include "ffn.h"

#include "activation.h"
#include "linear.h"

void refenc_ffn_forward(double *y, double *hidden, const double *x,
                        const double *W1, const double *b1,
                        const double *W2, const double *b2,
                        size_t N, size_t D, size_t F, refenc_activation act)
{
    refenc_ffn_forward_with(y, hidden, x, W1, b1, W2, b2, N, D, F, act, refenc_linear_forward);
}

void refenc_ffn_forward_with(double *y, double *hidden, const double *x,
                             const double *W1, const double *b1,
                             const double *W2, const double *b2,
                             size_t N, size_t D, size_t F, refenc_activation act,
                             refenc_linear_fn *linear)
{
    linear(hidden, x, W1, b1, N, D, F);   /* (N, D) -> (N, F) */
    refenc_activation_forward(hidden, hidden, N * F, act);
    linear(y, hidden, W2, b2, N, F, D);   /* (N, F) -> (N, D) */
}

/* Backward: with a = x W1^T + b1 (recomputed), hidden = act(a):
 *   d hidden = dy W2;  da = d hidden * act'(a);  dx = da W1
 *   dW2 += dy^T hidden, db2 += sum dy;  dW1 += da^T x, db1 += sum da */
void refenc_ffn_backward(double *dx, double *dW1, double *db1, double *dW2, double *db2,
                         double *pre, double *dpre,
                         const double *dy, const double *x, const double *hidden,
                         const double *W1, const double *b1, const double *W2,
                         size_t N, size_t D, size_t F, refenc_activation act)
{
    refenc_ffn_backward_k(NULL, dx, dW1, db1, dW2, db2, pre, dpre, dy, x, hidden, W1, b1, W2, N, D, F, act);
}

void refenc_ffn_backward_k(const refenc_backward_kernels *k, double *dx, double *dW1, double *db1, double *dW2,
                           double *db2, double *pre, double *dpre, const double *dy, const double *x,
                           const double *hidden, const double *W1, const double *b1, const double *W2,
                           size_t N, size_t D, size_t F, refenc_activation act)
{
    const refenc_backward_kernels *K = refenc_backward_kernels_or_reference(k);
    K->linear(dpre, dW2, db2, dy, hidden, W2, N, F, D);   /* (N, D) -> (N, F) */
    refenc_linear_forward(pre, x, W1, b1, N, D, F);       /* a, as the forward */
    K->activation(dpre, dpre, pre, N * F, act);
    K->linear(dx, dW1, db1, dpre, x, W1, N, D, F);        /* (N, F) -> (N, D) */
}
