/* Activations in double (activation.h):
 *   ReLU       max(x, 0); NaN for a NaN
 *   GELU       x Phi(x) = x erfc(-x/sqrt 2) / 2
 *   GELU-tanh  x (1 + tanh(z)) / 2,  z = sqrt(2/pi) (x + 0.044715 x^3)
 *   quick GELU x sigma(1.702 x) = x / (1 + exp(-1.702 x)) */
#include "activation.h"

#include <math.h>

/* sqrt(2/pi), the double nearest to 0.79788456080286535588... */
static const double SQRT_2_OVER_PI = 0.7978845608028654;

double refenc_relu(double x)
{
    /* x > 0 is false for NaN: test it, so NaN propagates as in torch.relu */
    return x > 0.0 || isnan(x) ? x : 0.0;
}

double refenc_gelu(double x)
{
    /* x Phi(x) = x (1 + erf(x/sqrt2)) / 2 = x erfc(-x/sqrt2) / 2 */
    return x * (0.5 * erfc(-x * M_SQRT1_2));
}

double refenc_gelu_tanh(double x)
{
    /* 0.5 x (1 + tanh z) = x / (1 + exp(-2z)) */
    const double z = SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x));
    return x / (1.0 + exp(-2.0 * z));
}

double refenc_quick_gelu(double x)
{
    /* x sigma(t) = x / (1 + exp(-t)), t = 1.702 x */
    const double t = 1.702 * x;
    return x / (1.0 + exp(-t));
}

void refenc_activation_forward(double *y, const double *x, size_t n, refenc_activation act)
{
    for (size_t i = 0; i < n; i++) {
        switch (act) {
        case REFENC_ACT_RELU: y[i] = refenc_relu(x[i]); break;
        case REFENC_ACT_GELU: y[i] = refenc_gelu(x[i]); break;
        case REFENC_ACT_GELU_TANH: y[i] = refenc_gelu_tanh(x[i]); break;
        case REFENC_ACT_QUICK_GELU: y[i] = refenc_quick_gelu(x[i]); break;
        }
    }
}
