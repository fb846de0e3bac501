/* Position-wise FFN in double (ffn.h): y = act(x W1^T + b1) W2^T + b2. */
#include "ffn.h"

#include "activation.h"
#include "linear.h"

void refenc_ffn_forward(double *y, double *hidden, const double *x,
                        const double *W1, const double *b1,
                        const double *W2, const double *b2,
                        size_t N, size_t D, size_t F, refenc_activation act)
{
    refenc_linear_forward(hidden, x, W1, b1, N, D, F);   /* (N, D) -> (N, F) */
    refenc_activation_forward(hidden, hidden, N * F, act);
    refenc_linear_forward(y, hidden, W2, b2, N, F, D);   /* (N, F) -> (N, D) */
}
