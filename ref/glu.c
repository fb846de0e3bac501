/* Gated FFN in double (glu.h):
 *   h = act(x Wg^T + bg) * (x Wu^T + bu),   y = h W2^T + b2. */
#include "glu.h"

#include "activation.h"
#include "ffn.h"
#include "linear.h"

void refenc_glu_forward(double *y, double *hidden, double *up, const double *x,
                        const double *Wg, const double *bg, const double *Wu, const double *bu,
                        const double *W2, const double *b2,
                        size_t N, size_t D, size_t F, refenc_activation act)
{
    refenc_linear_forward(hidden, x, Wg, bg, N, D, F);  /* a: (N, D) -> (N, F) */
    refenc_activation_forward(hidden, hidden, N * F, act);
    refenc_linear_forward(up, x, Wu, bu, N, D, F);      /* b: (N, D) -> (N, F) */
    for (size_t i = 0; i < N * F; i++)
        hidden[i] *= up[i];                             /* h = act(a) * b      */
    refenc_linear_forward(y, hidden, W2, b2, N, F, D);  /* (N, F) -> (N, D)    */
}

void refenc_glu_halves(const double **Wg, const double **bg, const double **Wu, const double **bu,
                       const double *W1, const double *b1, size_t D, size_t F, refenc_glu_gate gate)
{
    const size_t g = gate == REFENC_GLU_GATE_FIRST ? 0 : F, u = F - g; /* first rows of each half */
    *Wg = W1 + g * D;
    *Wu = W1 + u * D;
    *bg = b1 != NULL ? b1 + g : NULL;
    *bu = b1 != NULL ? b1 + u : NULL;
}

void refenc_ffn_block_forward(double *y, double *hidden, const double *x, const double *W1,
                              const double *b1, const double *W2, const double *b2, size_t N,
                              const refenc_config *cfg)
{
    const size_t D = cfg->d_model, F = cfg->d_ff;
    if (cfg->ffn_type != REFENC_FFN_GLU) {
        refenc_ffn_forward(y, hidden, x, W1, b1, W2, b2, N, D, F, cfg->activation);
        return;
    }
    const double *Wg, *bg, *Wu, *bu;
    refenc_glu_halves(&Wg, &bg, &Wu, &bu, W1, b1, D, F, cfg->glu_gate);
    refenc_glu_forward(y, hidden, hidden + N * F, x, Wg, bg, Wu, bu, W2, b2, N, D, F, cfg->activation);
}
