/* Attention-logit soft-capping in double (softcap.h):
 *   y = cap * tanh(s / cap). */
#include "softcap.h"

#include <math.h>

double refenc_softcap(double s, double cap)
{
    /* as Hugging Face: divide, tanh, multiply, each rounded */
    const double t = tanh(s / cap);
    return cap * t;
}
