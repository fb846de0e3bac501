/* Position-wise FFN in MPFR (ffn.h), one batch item on the engine
 * (engine.h), row by row:  y[r,:] = act(x[r,:] W1^T + b1) W2^T + b2. */
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
    refenc_mp_row_load(ws, x_r, D);
    for (size_t f = 0; f < F; f++) /* x[r,:] . W1[f,:] + b1[f] */
        refenc_mp_dot_row_d(hid + f, x_r, lp->linear1_weight + f * D, lp->linear1_bias + f, f,
                            &u->lm->l1_span, ws);
    refenc_mpk_activation_forward(hid, hid, F, u->cfg->activation, ws);
    refenc_mp_row_load(ws, hid, F);
    for (size_t o = 0; o < D; o++) /* act[r,:] . W2[o,:] + b2[o] */
        refenc_mp_dot_row_d(u->lanes[li].t + r * D + o, hid, lp->linear2_weight + o * F, lp->linear2_bias + o,
                            o, &u->lm->l2_span, ws);
}

int refenc_mpe_ffn(refenc_mpe_unit *u, int src, const char *hidden_step, const char *out_step)
{
    const refenc_config *c = u->cfg;
    const double L = (double)u->L, D = (double)u->D, F = (double)u->F;
    const double work = 2 * L * D * F + (c->activation == REFENC_ACT_RELU ? 0 : 600 * L * F);
    const ffn_arg a = {src, u->lanes[0].hid != NULL};
    refenc_mpe_rows(u, u->L, ffn_row, &a, "ffn", work);
    if (a.keep && hidden_step != NULL && !refenc_mpe_step_buf(u, hidden_step, MPE_HID))
        return 0;
    if (!refenc_mpe_step_buf(u, out_step, MPE_T))
        return 0;
    refenc_mpe_progress(u, out_step, 0);
    return 1;
}

int refenc_mp_ffn_forward(double *y, double *hidden, const double *x,
                          const double *W1, const double *b1,
                          const double *W2, const double *b2,
                          size_t N, size_t D, size_t F, refenc_activation act,
                          mpfr_prec_t prec, refenc_mp_report *rep)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = D, cfg.n_heads = 1, cfg.d_ff = F, cfg.n_layers = 1, cfg.activation = act;
    cfg.positional = REFENC_POS_NONE;
    refenc_layer_params lp = {.linear1_weight = (double *)W1, .linear1_bias = (double *)b1,
                              .linear2_weight = (double *)W2, .linear2_bias = (double *)b2};
    const refenc_params p = {.n_layers = 1, .layers = &lp};
    const refenc_input in = {.B = 1, .L = N, .x = x}; /* the N rows, one item */
    const refenc_mp_output outs[] = {{"hidden", hidden}, {"output", y}};
    return refenc_mp_run_block(&cfg, &p, &in, REFENC_MP_BLOCK_FFN, NULL, prec, rep, outs, 2);
}
