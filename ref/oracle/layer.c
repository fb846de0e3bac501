/* One encoder layer in MPFR (layer.h), on the engine (engine.h), nothing
 * rounded between steps:
 *   Pre-LN:   h = x + MHA(LN1(x));   y = h + FFN(LN2(h))
 *   Post-LN:  h = LN1(x + MHA(x));   y = LN2(h + FFN(h))
 * LN is the configured norm: LayerNorm, or RMSNorm (rmsnorm.c) under
 * norm_type "rmsnorm", whose beta is never read (the parameters have none).
 * Both are two residual sublayers, written once (sublayer): the placement
 * only decides whether the LayerNorm comes before the block or after the
 * residual sum.  Trace steps, in forward order:
 *   Pre-LN:   norm1, self_attn.weights, self_attn, norm2, ffn, output
 *   Post-LN:  self_attn.weights, self_attn, norm1, ffn, norm2, output */
#include "engine.h"

#include <stdio.h>
#include <string.h>

/* ---- the configured norm (LayerNorm or RMSNorm), row by row ---------------------------------- */

typedef struct {
    int dst, src;
    mpfr_srcptr gamma, beta, eps;
} ln_arg;

static void layernorm_row(refenc_mpe_unit *u, int li, size_t r, refenc_mpe_worker *w, const void *arg)
{
    const ln_arg *a = arg;
    const size_t D = u->D;
    mpfr_ptr y = refenc_mpe_buf(u, li, a->dst) + r * D;
    mpfr_srcptr x = refenc_mpe_buf(u, li, a->src) + r * D;
    if (u->cfg->norm_type == REFENC_NORMTYPE_RMSNORM) /* no beta */
        refenc_mpk_rmsnorm_forward(y, x, a->gamma, 1, D, a->eps, u->cfg->rmsnorm_offset, &w->ws[li]);
    else
        refenc_mpk_layernorm_forward(y, x, a->gamma, a->beta, 1, D, a->eps, &w->ws[li]);
}

void refenc_mpe_layernorm(refenc_mpe_unit *u, int dst, int src, mpfr_srcptr gamma, mpfr_srcptr beta,
                          mpfr_srcptr eps)
{
    const ln_arg a = {dst, src, gamma, beta, eps};
    refenc_mpe_rows(u, u->L, layernorm_row, &a, NULL, 0);
}

/* dst[r,:] = a[r,:] + b[r,:] */
typedef struct {
    int dst, a, b;
} add_arg;

static void add_row(refenc_mpe_unit *u, int li, size_t r, refenc_mpe_worker *w, const void *arg)
{
    (void)w;
    const add_arg *s = arg;
    const size_t D = u->D;
    mpfr_ptr y = refenc_mpe_buf(u, li, s->dst) + r * D;
    mpfr_srcptr a = refenc_mpe_buf(u, li, s->a) + r * D, b = refenc_mpe_buf(u, li, s->b) + r * D;
    for (size_t d = 0; d < D; d++)
        mpfr_add(y + d, a + d, b + d, MPFR_RNDN);
}

/* ---- the layer ------------------------------------------------------------------------------- */

double refenc_mpe_layer_work(const refenc_config *c, size_t L)
{
    const double D = (double)c->d_model, F = (double)c->d_ff, H = (double)c->n_heads;
    const double Dh = (double)refenc_config_head_dim(c), E = H * Dh, R = (double)refenc_config_qkv_rows(c);
    const double act = c->activation == REFENC_ACT_RELU ? 0 : 600; /* erfc, tanh: about 600 multiply-adds */
    return 4 * L * D + L * R * D + 2 * H * L * L * Dh + 60 * H * L * L + L * E * D +
           2 * L * D * F + act * L * F;
}

/* The span of W (out, in) and b, for all the rows' dot products; W's
 * fixed point comes with its block (refenc_mpe_block_weights).  A block's
 * twin leaves the other blocks' W NULL. */
static void span_init(refenc_mp_wspan *s, const double *W, const double *b, size_t out, size_t in)
{
    memset(s, 0, sizeof *s);
    if (W != NULL)
        refenc_mp_wspan_of(s, W, out * in, b, out);
}

/* W (out, in) in fixed point for span s (none without W); 0 on allocation failure. */
static int span_fix(refenc_mp_wspan *s, const double *W, size_t out, size_t in)
{
    return W == NULL || refenc_mp_wspan_fix(s, W, out, in) == REFENC_OK;
}

int refenc_mpe_block_weights(refenc_mpe_unit *u, int block, int on)
{
    refenc_mpe_layer *lm = u->lm;
    const refenc_layer_params *lp = lm->lp;
    const size_t D = u->D, F = u->F, E = u->E;
    int ok = 1;
    if (on && block == 0)
        ok = span_fix(&lm->in_span, lp->in_proj_weight, refenc_config_qkv_rows(u->cfg), D) && /* (E + 2 Ekv, D) */
             span_fix(&lm->out_span, lp->out_proj_weight, D, E);
    else if (on)
        ok = span_fix(&lm->l1_span, lp->linear1_weight, refenc_config_ffn_rows(u->cfg), D) && /* F, gated 2F */
             span_fix(&lm->l2_span, lp->linear2_weight, D, F);
    if (!on || !ok) {
        refenc_mp_wspan_unfix(block ? &lm->l1_span : &lm->in_span);
        refenc_mp_wspan_unfix(block ? &lm->l2_span : &lm->out_span);
    }
    u->oom |= !ok;
    return ok;
}

int refenc_mpe_layer_init(refenc_mpe_layer *lm, const refenc_layer_params *lp, const refenc_config *cfg)
{
    const size_t D = cfg->d_model, F = cfg->d_ff, F1 = refenc_config_ffn_rows(cfg);
    const size_t R = refenc_config_qkv_rows(cfg), E = cfg->n_heads * refenc_config_head_dim(cfg);
    const double *ln[8] = {lp->norm1_weight,          lp->norm1_bias,          lp->norm2_weight,
                           lp->norm2_bias,            lp->post_attn_norm_weight, lp->post_attn_norm_bias,
                           lp->post_ffn_norm_weight,  lp->post_ffn_norm_bias};
    memset(lm, 0, sizeof *lm);
    lm->lp = lp;
    lm->ln = refenc_mp_alloc(8 * D, 53);
    int ok = lm->ln != NULL;
    for (size_t k = 0; ok && k < 8; k++)
        if (ln[k] != NULL)
            refenc_mp_set_d(lm->ln + k * D, ln[k], D);
    span_init(&lm->in_span, lp->in_proj_weight, lp->in_proj_bias, R, D); /* (E + 2 Ekv, D) */
    span_init(&lm->out_span, lp->out_proj_weight, lp->out_proj_bias, D, E);
    span_init(&lm->l1_span, lp->linear1_weight, lp->linear1_bias, F1, D); /* F1 = F, gated 2F */
    span_init(&lm->l2_span, lp->linear2_weight, lp->linear2_bias, D, F);
    if (ok && lp->q_norm_weight != NULL && lp->k_norm_weight != NULL) { /* Qwen3's (Dh) weights */
        const size_t Dh = refenc_config_head_dim(cfg);
        lm->qkn = refenc_mp_alloc(2 * Dh, 53);
        ok = lm->qkn != NULL;
        lm->qkn_n = ok ? 2 * Dh : 0;
        if (ok) {
            refenc_mp_set_d(lm->qkn, lp->q_norm_weight, Dh);
            refenc_mp_set_d(lm->qkn + Dh, lp->k_norm_weight, Dh);
        }
    }
    if (!ok)
        refenc_mpe_layer_free(lm, D);
    return ok;
}

void refenc_mpe_layer_free(refenc_mpe_layer *lm, size_t D)
{
    refenc_mp_free(lm->ln, 8 * D);
    lm->ln = NULL;
    refenc_mp_free(lm->qkn, lm->qkn_n);
    lm->qkn = NULL, lm->qkn_n = 0;
    refenc_mp_wspan_unfix(&lm->in_span);
    refenc_mp_wspan_unfix(&lm->out_span);
    refenc_mp_wspan_unfix(&lm->l1_span);
    refenc_mp_wspan_unfix(&lm->l2_span);
}

/* dst[r,:] = src[r,:]: an attention norm that is the identity (ModernBERT's
 * layer 0, whose attn_norm is nn.Identity()); the buffers share a precision. */
typedef struct {
    int dst, src;
} copy_arg;

static void copy_row(refenc_mpe_unit *u, int li, size_t r, refenc_mpe_worker *w, const void *arg)
{
    (void)w;
    const copy_arg *s = arg;
    const size_t D = u->D;
    mpfr_ptr y = refenc_mpe_buf(u, li, s->dst) + r * D;
    mpfr_srcptr x = refenc_mpe_buf(u, li, s->src) + r * D;
    for (size_t d = 0; d < D; d++)
        mpfr_set(y + d, x + d, MPFR_RNDN);
}

/* A residual sublayer's block: t = block(src), its steps certified. */
typedef int (*block_fn)(refenc_mpe_unit *u, int src, size_t i);

/* Gemma 2/3's norm of a sublayer's output (sandwich_norm), t = N'(t), then
 * t certified as step; k: 0 the attention's (post_attention), 1 the FFN's
 * (post_feedforward): their (gamma, beta) follow norm1's and norm2's. */
static int post_norm(refenc_mpe_unit *u, const char *step, int k)
{
    const size_t D = u->D;
    mpfr_srcptr gamma = u->lm->ln + (4 + 2 * (size_t)k) * D;
    mpfr_srcptr beta = u->lm->lp->post_attn_norm_bias != NULL ? gamma + D : NULL;
    refenc_mpe_layernorm(u, MPE_T, MPE_T, gamma, beta, u->eps);
    refenc_mpe_progress(u, step, 2.0 * (double)u->L * (double)D);
    return refenc_mpe_step_buf(u, step, MPE_T);
}

static int attention_block(refenc_mpe_unit *u, int src, size_t i)
{
    char w[64], o[64];
    const int sandwich = u->cfg->sandwich_norm;
    snprintf(w, sizeof w, "layers.%zu.self_attn.weights", i);
    snprintf(o, sizeof o, "layers.%zu.self_attn", i);
    return refenc_mpe_mha(u, src, w, sandwich ? NULL : o) && (!sandwich || post_norm(u, o, 0));
}

static int ffn_block(refenc_mpe_unit *u, int src, size_t i)
{
    char o[64];
    const int sandwich = u->cfg->sandwich_norm;
    snprintf(o, sizeof o, "layers.%zu.ffn", i);
    return refenc_mpe_ffn(u, src, NULL, sandwich ? NULL : o) && (!sandwich || post_norm(u, o, 1));
}

/* h = h + block(LN(h)) (Pre-LN), or h = LN(h + block(h)) (Post-LN), the
 * LayerNorm (gamma, beta) certified as layers.{i}.{norm}; gamma NULL: LN is
 * the identity (Pre-LN only: skip_first_prenorm).  select: the attention
 * sublayer of the last layer of a rows run, which selects its query rows
 * (refenc_mpe_select_rows) from the block's input, every position's LN
 * computed first: from there on the steps hold the R rows. */
static int sublayer(refenc_mpe_unit *u, size_t i, block_fn block, const char *norm, mpfr_srcptr gamma,
                    mpfr_srcptr beta, int select)
{
    const int pre = u->cfg->norm == REFENC_NORM_PRE;
    const double w_ln = 2.0 * (double)u->L * (double)u->D;
    char name[64];
    snprintf(name, sizeof name, "layers.%zu.%s", i, norm);
    if (pre && gamma == NULL) {
        const copy_arg cp = {MPE_A, MPE_H};
        refenc_mpe_rows(u, u->L, copy_row, &cp, NULL, 0);
    } else if (pre) {
        refenc_mpe_layernorm(u, MPE_A, MPE_H, gamma, beta, u->eps);
        refenc_mpe_progress(u, name, w_ln);
    }
    if (select && !refenc_mpe_select_rows(u, pre ? MPE_A : MPE_H))
        return 0;
    if (pre && !refenc_mpe_step_buf(u, name, MPE_A))
        return 0;
    if (!block(u, pre ? MPE_A : MPE_H, i))
        return 0;
    const add_arg sum = {MPE_H, MPE_H, MPE_T};
    refenc_mpe_rows(u, u->L, add_row, &sum, NULL, 0);
    if (!pre) {
        refenc_mpe_layernorm(u, MPE_H, MPE_H, gamma, beta, u->eps);
        refenc_mpe_progress(u, name, w_ln);
        if (!refenc_mpe_step_buf(u, name, MPE_H))
            return 0;
    }
    return 1;
}

int refenc_mpe_layer_run(refenc_mpe_unit *u, refenc_mpe_layer *lm, size_t i)
{
    const size_t D = u->D;
    char name[64];
    u->lm = lm;
    u->layer = i;
    const int bias = lm->lp->norm2_bias != NULL; /* none: RMSNorm, or a bias-free LayerNorm */
    /* ModernBERT's layer 0 has no attention norm (attn_norm = nn.Identity()) */
    const int identity = i == 0 && u->cfg->skip_first_prenorm;
    /* the last layer of a rows run computes its selected query rows alone */
    const int select = u->run->in->rows != NULL && i == u->N - 1 && u->run->block == REFENC_MP_BLOCK_ENCODER;
    if (!sublayer(u, i, attention_block, "norm1", identity ? NULL : lm->ln, bias && !identity ? lm->ln + D : NULL,
                  select) ||
        !sublayer(u, i, ffn_block, "norm2", lm->ln + 2 * D, bias ? lm->ln + 3 * D : NULL, 0))
        return 0;
    snprintf(name, sizeof name, "layers.%zu.output", i);
    if (!refenc_mpe_step_buf(u, name, MPE_H))
        return 0;
    refenc_mpe_progress(u, name, 0);
    return 1;
}
