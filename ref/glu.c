/* Gated FFN in double (glu.h):
 *   h = act(x Wg^T + bg) * (x Wu^T + bu),   y = h W2^T + b2.
 * Backward: dh = dy W2;  db = dh * act(a);  da = dh * b * act'(a);
 *   dx = d[a | b] W1 with linear1's fused rows. */
#include "glu.h"

#include "activation.h"
#include "ffn.h"
#include "linear.h"

/* refenc_glu_forward with the linear map linear (linear.h). */
static void glu_forward(double *y, double *hidden, double *up, const double *x,
                        const double *Wg, const double *bg, const double *Wu, const double *bu,
                        const double *W2, const double *b2,
                        size_t N, size_t D, size_t F, refenc_activation act, refenc_linear_fn *linear)
{
    linear(hidden, x, Wg, bg, N, D, F);  /* a: (N, D) -> (N, F) */
    refenc_activation_forward(hidden, hidden, N * F, act);
    linear(up, x, Wu, bu, N, D, F);      /* b: (N, D) -> (N, F) */
    for (size_t i = 0; i < N * F; i++)
        hidden[i] *= up[i];              /* h = act(a) * b      */
    linear(y, hidden, W2, b2, N, F, D);  /* (N, F) -> (N, D)    */
}

void refenc_glu_forward(double *y, double *hidden, double *up, const double *x,
                        const double *Wg, const double *bg, const double *Wu, const double *bu,
                        const double *W2, const double *b2,
                        size_t N, size_t D, size_t F, refenc_activation act)
{
    glu_forward(y, hidden, up, x, Wg, bg, Wu, bu, W2, b2, N, D, F, act, refenc_linear_forward);
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
    refenc_ffn_block_forward_with(y, hidden, x, W1, b1, W2, b2, N, cfg, refenc_linear_forward);
}

void refenc_ffn_block_forward_with(double *y, double *hidden, const double *x, const double *W1,
                                   const double *b1, const double *W2, const double *b2, size_t N,
                                   const refenc_config *cfg, refenc_linear_fn *linear)
{
    const size_t D = cfg->d_model, F = cfg->d_ff;
    if (cfg->ffn_type != REFENC_FFN_GLU) {
        refenc_ffn_forward_with(y, hidden, x, W1, b1, W2, b2, N, D, F, cfg->activation, linear);
        return;
    }
    const double *Wg, *bg, *Wu, *bu;
    refenc_glu_halves(&Wg, &bg, &Wu, &bu, W1, b1, D, F, cfg->glu_gate);
    glu_forward(y, hidden, hidden + N * F, x, Wg, bg, Wu, bu, W2, b2, N, D, F, cfg->activation, linear);
}

/* The gated FFN's backward (glu.h): dh into pre + NF, a into pre, dh * b
 * into pre + 2NF, then d[a | b] (N, 2F) in linear1's row order into dpre. */
static void glu_backward(const refenc_backward_kernels *K, double *dx, double *dW1, double *db1, double *dW2,
                         double *db2, double *pre, double *dpre, const double *dy, const double *x,
                         const double *hidden, const double *W1, const double *b1,
                         const double *W2, size_t N, const refenc_config *cfg)
{
    const size_t D = cfg->d_model, F = cfg->d_ff, NF = N * F;
    const double *Wg, *bg, *Wu, *bu;
    refenc_glu_halves(&Wg, &bg, &Wu, &bu, W1, b1, D, F, cfg->glu_gate);
    const size_t g = cfg->glu_gate == REFENC_GLU_GATE_FIRST ? 0 : F, u = F - g;
    double *a = pre, *dh = pre + NF, *dhb = pre + 2 * NF;
    const double *b = hidden + NF;
    K->linear(dh, dW2, db2, dy, hidden, W2, N, F, D);              /* (N, D) -> (N, F) */
    refenc_linear_forward(a, x, Wg, bg, N, D, F);                  /* a, as the forward */
    for (size_t i = 0; i < NF; i++)
        dhb[i] = dh[i] * b[i];
    K->activation(dhb, dhb, a, NF, cfg->activation);              /* da = dh b act'(a) */
    refenc_activation_forward(a, a, NF, cfg->activation);         /* act(a), a no longer needed */
    for (size_t n = 0; n < N; n++)
        for (size_t f = 0; f < F; f++) {
            dpre[n * 2 * F + g + f] = dhb[n * F + f];
            dpre[n * 2 * F + u + f] = dh[n * F + f] * a[n * F + f]; /* db = dh act(a) */
        }
    K->linear(dx, dW1, db1, dpre, x, W1, N, D, 2 * F);              /* (N, 2F) -> (N, D) */
}

void refenc_ffn_block_backward(double *dx, double *dW1, double *db1, double *dW2, double *db2,
                               double *pre, double *dpre, const double *dy, const double *x,
                               const double *hidden, const double *W1, const double *b1,
                               const double *W2, size_t N, const refenc_config *cfg)
{
    refenc_ffn_block_backward_k(NULL, dx, dW1, db1, dW2, db2, pre, dpre, dy, x, hidden, W1, b1, W2, N, cfg);
}

void refenc_ffn_block_backward_k(const refenc_backward_kernels *k, double *dx, double *dW1, double *db1,
                                 double *dW2, double *db2, double *pre, double *dpre, const double *dy,
                                 const double *x, const double *hidden, const double *W1, const double *b1,
                                 const double *W2, size_t N, const refenc_config *cfg)
{
    if (cfg->ffn_type != REFENC_FFN_GLU) {
        refenc_ffn_backward_k(k, dx, dW1, db1, dW2, db2, pre, dpre, dy, x, hidden, W1, b1, W2, N,
                              cfg->d_model, cfg->d_ff, cfg->activation);
        return;
    }
    glu_backward(refenc_backward_kernels_or_reference(k), dx, dW1, db1, dW2, db2, pre, dpre, dy, x, hidden,
                 W1, b1, W2, N, cfg);
}
