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

double refenc_silu(double x)
{
    /* x sigma(x) = x / (1 + exp(-x)) */
    return x / (1.0 + exp(-x));
}

void refenc_activation_forward(double *y, const double *x, size_t n, refenc_activation act)
{
    for (size_t i = 0; i < n; i++) {
        switch (act) {
        case REFENC_ACT_RELU: y[i] = refenc_relu(x[i]); break;
        case REFENC_ACT_GELU: y[i] = refenc_gelu(x[i]); break;
        case REFENC_ACT_GELU_TANH: y[i] = refenc_gelu_tanh(x[i]); break;
        case REFENC_ACT_QUICK_GELU: y[i] = refenc_quick_gelu(x[i]); break;
        case REFENC_ACT_SILU: y[i] = refenc_silu(x[i]); break;
        }
    }
}

/* Derivatives (backward of y = act(x), dx = dy act'(x)):
 *   ReLU'       1 for x > 0, 0 for x <= 0 (PyTorch's threshold_backward)
 *   GELU'       Phi(x) + x phi(x),  phi(x) = exp(-x^2/2) / sqrt(2 pi)
 *   GELU-tanh'  s + 2 x s (1 - s) z',  s = sigma(2z),  z' = sqrt(2/pi) (1 + 3 0.044715 x^2)
 *   quick'      s + 1.702 x s (1 - s), s = sigma(1.702 x)
 *   SiLU'       s + x s (1 - s),       s = sigma(x)
 * 1 - sigma(t) is computed as sigma(-t) = 1 / (1 + exp(t)): no cancellation. */
static const double INV_SQRT_2PI = 0.3989422804014327; /* 1/sqrt(2 pi), nearest double */

static double act_derivative(double x, refenc_activation act)
{
    switch (act) {
    case REFENC_ACT_RELU:
        return x <= 0.0 ? 0.0 : 1.0;
    case REFENC_ACT_GELU:
        return 0.5 * erfc(-x * M_SQRT1_2) + x * (INV_SQRT_2PI * exp(-0.5 * (x * x)));
    case REFENC_ACT_GELU_TANH: {
        const double z = SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x));
        const double dz = SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * (x * x));
        const double s = 1.0 / (1.0 + exp(-2.0 * z)), sc = 1.0 / (1.0 + exp(2.0 * z));
        return s + 2.0 * x * (s * sc) * dz;
    }
    case REFENC_ACT_QUICK_GELU: {
        const double t = 1.702 * x;
        const double s = 1.0 / (1.0 + exp(-t)), sc = 1.0 / (1.0 + exp(t));
        return s + 1.702 * x * (s * sc);
    }
    case REFENC_ACT_SILU: {
        const double s = 1.0 / (1.0 + exp(-x)), sc = 1.0 / (1.0 + exp(x));
        return s + x * (s * sc);
    }
    }
    return 0.0; /* not reached: every activation is a case */
}

double refenc_activation_derivative(double x, refenc_activation act)
{
    return act_derivative(x, act);
}

void refenc_activation_backward(double *dx, const double *dy, const double *x, size_t n,
                                refenc_activation act)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * act_derivative(x[i], act);
}
