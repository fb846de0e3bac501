/* Position-wise FFN in MPFR (ffn.h, glu.h), one batch item on the engine
 * (engine.h), row by row:  y[r,:] = act(x[r,:] W1^T + b1) W2^T + b2, or gated
 * y[r,:] = (act(x[r,:] Wg^T + bg) * (x[r,:] Wu^T + bu)) W2^T + b2 with Wg, Wu
 * the gate and up halves of linear1 (2F, D) (glu_gate), the product exact to
 * the working precision (one rounding, which Ziv's loop covers). */
#include "engine.h"

typedef struct {
    int src;
    int keep; /* the activations go to the lane's hid (L, F), else the worker's row */
} ffn_arg;

static void ffn_row(refenc_mpe_unit *u, int li, size_t r, refenc_mpe_worker *w, const void *arg)
{
    const ffn_arg *a = arg;
    const size_t D = u->D, F = u->F;
    const refenc_layer_params *lp = u->lm->lp;
    refenc_mp_ws *ws = &w->ws[li];
    mpfr_srcptr x_r = refenc_mpe_buf(u, li, a->src) + r * D;
    mpfr_ptr hid = a->keep ? u->lanes[li].hid + r * F : w->hidden[li]; /* (F) */
    const int glu = u->cfg->ffn_type == REFENC_FFN_GLU;
    const size_t g = glu && u->cfg->glu_gate == REFENC_GLU_GATE_SECOND ? F : 0; /* the gate's rows */
    refenc_mp_row_load(ws, x_r, D);
    for (size_t f = 0; f < F; f++) /* x[r,:] . W1[g+f,:] + b1[g+f]: the gate (all of W1 unless gated) */
        refenc_mp_dot_row_d(hid + f, x_r, lp->linear1_weight + (g + f) * D, REFENC_MP_BIAS_AT(lp->linear1_bias, g + f),
                            g + f, &u->lm->l1_span, ws);
    refenc_mpk_activation_forward(hid, hid, F, u->cfg->activation, ws);
    if (glu) { /* h = act(a) * b, b = x . W1[up rows] + b1[up rows], in the worker's second half */
        const size_t up = F - g;
        mpfr_ptr b = w->hidden[li] + F;
        refenc_mp_row_load(ws, x_r, D); /* again: nothing between may have kept it */
        for (size_t f = 0; f < F; f++) {
            refenc_mp_dot_row_d(b, x_r, lp->linear1_weight + (up + f) * D, REFENC_MP_BIAS_AT(lp->linear1_bias, up + f),
                                up + f, &u->lm->l1_span, ws);
            mpfr_mul(hid + f, hid + f, b, MPFR_RNDN);
        }
    }
    refenc_mp_row_load(ws, hid, F);
    for (size_t o = 0; o < D; o++) /* act[r,:] . W2[o,:] + b2[o] */
        refenc_mp_dot_row_d(u->lanes[li].t + r * D + o, hid, lp->linear2_weight + o * F, REFENC_MP_BIAS_AT(lp->linear2_bias, o),
                            o, &u->lm->l2_span, ws);
}

int refenc_mpe_ffn(refenc_mpe_unit *u, int src, const char *hidden_step, const char *out_step)
{
    const refenc_config *c = u->cfg;
    const double L = (double)u->L, D = (double)u->D, F = (double)u->F;
    const double work = 2 * L * D * F + (c->activation == REFENC_ACT_RELU ? 0 : 600 * L * F);
    const ffn_arg a = {src, u->lanes[0].hid != NULL};
    if (!refenc_mpe_block_weights(u, 1, 1))
        return 0;
    refenc_mpe_rows(u, u->L, ffn_row, &a, "ffn", work);
    refenc_mpe_block_weights(u, 1, 0);
    if (a.keep && hidden_step != NULL && !refenc_mpe_step_buf(u, hidden_step, MPE_HID))
        return 0;
    if (out_step == NULL) /* the caller normalises, then certifies (sandwich_norm) */
        return 1;
    if (!refenc_mpe_step_buf(u, out_step, MPE_T))
        return 0;
    refenc_mpe_progress(u, out_step, 0);
    return 1;
}

/* The MLP (gated < 0) or the gated FFN with that gate, as one block. */
static int ffn_twin(double *y, double *hidden, const double *x, const double *W1, const double *b1,
                    const double *W2, const double *b2, size_t N, size_t D, size_t F,
                    refenc_activation act, int gated, mpfr_prec_t prec, refenc_mp_report *rep)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = D, cfg.n_heads = 1, cfg.d_ff = F, cfg.n_layers = 1, cfg.activation = act;
    cfg.positional = REFENC_POS_NONE;
    if (gated >= 0)
        cfg.ffn_type = REFENC_FFN_GLU, cfg.glu_gate = (refenc_glu_gate)gated;
    refenc_layer_params lp = {.linear1_weight = (double *)W1, .linear1_bias = (double *)b1,
                              .linear2_weight = (double *)W2, .linear2_bias = (double *)b2};
    const refenc_params p = {.n_layers = 1, .layers = &lp};
    const refenc_input in = {.B = 1, .L = N, .x = x}; /* the N rows, one item */
    const refenc_mp_output outs[] = {{"hidden", hidden}, {"output", y}};
    return refenc_mp_run_block(&cfg, &p, &in, REFENC_MP_BLOCK_FFN, NULL, prec, rep, outs, 2);
}

int refenc_mp_ffn_forward(double *y, double *hidden, const double *x,
                          const double *W1, const double *b1,
                          const double *W2, const double *b2,
                          size_t N, size_t D, size_t F, refenc_activation act,
                          mpfr_prec_t prec, refenc_mp_report *rep)
{
    return ffn_twin(y, hidden, x, W1, b1, W2, b2, N, D, F, act, -1, prec, rep);
}

int refenc_mp_glu_forward(double *y, double *hidden, const double *x,
                          const double *W1, const double *b1,
                          const double *W2, const double *b2,
                          size_t N, size_t D, size_t F, refenc_activation act,
                          refenc_glu_gate gate, mpfr_prec_t prec, refenc_mp_report *rep)
{
    return ffn_twin(y, hidden, x, W1, b1, W2, b2, N, D, F, act, (int)gate, prec, rep);
}
