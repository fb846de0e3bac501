/* One encoder layer's backward in MPFR, from layer.h and docs/gradients.md:
 *   Pre-LN   h = x + MHA(LN1(x)),  y = h + FFN(LN2(h))
 *            dh = dy + LN2^T(FFN^T dy);   dx = dh + LN1^T(MHA^T dh)
 *   Post-LN  r1 = x + MHA(x), h = LN1(r1), r2 = h + FFN(h), y = LN2(r2)
 *            dr2 = LN2^T dy;  dh = dr2 + FFN^T dr2;  dr1 = LN1^T dh;  dx = dr1 + MHA^T dr1
 *   MHA^T    dctx = dy W_o, split into heads, attention backward, dq and dk
 *            rotated back by -theta (RoPE), merged; dx = dqkv W_in
 *   FFN^T    dh = dy W2, da = dh act'(a), dx = da W1
 * The forward is recomputed here in MPFR from the oracle's kernels (every
 * intermediate exact to the working precision, nothing rounded to double),
 * then the backward kernels of backward.h run on it: every output is the
 * exact gradient of the exact layer, certified by Ziv's loop.  The
 * parameter gradients are accumulated as in the double layer. */
#include "layer_backward.h"

#include <stdlib.h>
#include <string.h>


/* (BL, 3D) -> q, k, v (B, H, L, Dh) (dir 0) or back into dqkv (dir 1) */
static void heads(lyr *m, mpfr_ptr qkv, mpfr_ptr q, mpfr_ptr k, mpfr_ptr v, int dir)
{
    const size_t D = m->D, Dh = m->Dh;
    mpfr_ptr part[3] = {q, k, v};
    for (size_t b = 0; b < m->B; b++)
        for (size_t l = 0; l < m->L; l++)
            for (size_t c = 0; c < 3 * D; c++) {
                const size_t hh = (c % D) / Dh, d = c % Dh;
                mpfr_ptr hv = part[c / D] + ((b * m->H + hh) * m->L + l) * Dh + d;
                mpfr_ptr rv = qkv + (b * m->L + l) * 3 * D + c;
                mpfr_set(dir == 0 ? hv : rv, dir == 0 ? rv : hv, MPFR_RNDN);
            }
}

/* ctx (BL, D) <- o (B, H, L, Dh) (dir 0), or o <- ctx (dir 1) */
static void merge(lyr *m, mpfr_ptr ctx, mpfr_ptr o, int dir)
{
    for (size_t b = 0; b < m->B; b++)
        for (size_t l = 0; l < m->L; l++)
            for (size_t c = 0; c < m->D; c++) {
                mpfr_ptr hv = o + ((b * m->H + c / m->Dh) * m->L + l) * m->Dh + c % m->Dh;
                mpfr_ptr cv = ctx + (b * m->L + l) * m->D + c;
                mpfr_set(dir == 0 ? cv : hv, dir == 0 ? hv : cv, MPFR_RNDN);
            }
}

/* t = MHA(in) */
static void mha_fwd(lyr *m, mpfr_srcptr in, refenc_mp_ws *ws)
{
    refenc_mpk_linear_forward(m->qkv, in, m->P[IPW], m->P[IPB], m->BL, m->D, 3 * m->D, ws);
    heads(m, m->qkv, m->q, m->k, m->v, 0);
    if (m->rope != NULL) {
        refenc_mpk_rope_forward(m->q, m->q, m->rope->positions, m->B * m->H, m->L, m->Dh, m->base,
                                m->rope->layout, NULL, ws); /* unscaled: blocks_supported */
        refenc_mpk_rope_forward(m->k, m->k, m->rope->positions, m->B * m->H, m->L, m->Dh, m->base,
                                m->rope->layout, NULL, ws); /* unscaled: blocks_supported */
    }
    refenc_mpk_attention_forward(m->o, m->Pw, m->q, m->k, m->v, m->opt, m->B, m->H, m->L, m->Dh, ws);
    merge(m, m->ctx, m->o, 0);
    refenc_mpk_linear_forward(m->t, m->ctx, m->P[OPW], m->P[OPB], m->BL, m->D, m->D, ws);
}

/* f = FFN(in), keeping the pre-activation z and the activations hid */
static void ffn_fwd(lyr *m, mpfr_srcptr in, refenc_mp_ws *ws)
{
    refenc_mpk_linear_forward(m->z, in, m->P[L1W], m->P[L1B], m->BL, m->D, m->F, ws);
    refenc_mpk_activation_forward(m->hid, m->z, m->BL * m->F, m->act, ws);
    refenc_mpk_linear_forward(m->f, m->hid, m->P[L2W], m->P[L2B], m->BL, m->F, m->D, ws);
}

static void add(mpfr_ptr y, mpfr_srcptr a, mpfr_srcptr b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mpfr_add(y + i, a + i, b + i, MPFR_RNDN);
}

void refenc_mpb_layer_forward(lyr *m, mpfr_srcptr x, refenc_mp_ws *ws)
{
    const size_t n = m->BL * m->D;
    if (m->pre) {
        refenc_mpk_layernorm_forward(m->a, x, m->P[N1W], m->P[N1B], m->BL, m->D, m->eps, ws);
        mha_fwd(m, m->a, ws);
        add(m->h, x, m->t, n);
        refenc_mpk_layernorm_forward(m->a2, m->h, m->P[N2W], m->P[N2B], m->BL, m->D, m->eps, ws);
        ffn_fwd(m, m->a2, ws);
        add(m->y, m->h, m->f, n);
    } else {
        mha_fwd(m, x, ws);
        add(m->r1, x, m->t, n);
        refenc_mpk_layernorm_forward(m->h, m->r1, m->P[N1W], m->P[N1B], m->BL, m->D, m->eps, ws);
        ffn_fwd(m, m->h, ws);
        add(m->r2, m->h, m->f, n);
        refenc_mpk_layernorm_forward(m->y, m->r2, m->P[N2W], m->P[N2B], m->BL, m->D, m->eps, ws);
    }
}

/* d in_proj_bias += sum_n dqkv[n,:] for the q and v blocks.  Without RoPE
 * the k block's gradient is exactly 0 and is left unchanged: a key bias b_k
 * adds q_i . b_k to every score of query i alike (ALiBi, attn_mask and the
 * masks' constants do not depend on it), which the softmax ignores;
 * equivalently each row of dS sums to 0, so sum_j dk_j = sum_i (sum_j dS_ij)
 * q_i / divisor = 0.  Computed, the sum is a cancellation to 0 whose sign of
 * zero differs between precisions, which no precision certifies.  With RoPE
 * the key is rotated after the bias, R_j (W x_j + b_k), so the bias adds
 * q_i . R_j b_k, which depends on j: the block is summed like the others. */
static void in_bias_backward(lyr *m, refenc_mp_ws *ws)
{
    mpfr_ptr t = ws->tmp;
    for (size_t c = 0; c < 3 * m->D; c++) {
        if (c >= m->D && c < 2 * m->D && m->rope == NULL)
            continue;
        for (size_t n = 0; n < m->BL; n++)
            ws->pa[n] = m->dqkv + n * 3 * m->D + c;
        ws->pa[m->BL] = m->G[IPB] + c;
        mpfr_sum(t, ws->pa, m->BL + 1, MPFR_RNDN);
        mpfr_set(m->G[IPB] + c, t, MPFR_RNDN);
    }
}

/* dx_out = MHA^T dy (the block's input in); uses d1, dob, dqkv, dq, dk, dv */
static void mha_bwd(lyr *m, mpfr_ptr dx_out, mpfr_srcptr dy, mpfr_srcptr in, refenc_mp_ws *ws)
{
    const size_t BH = m->B * m->H;
    refenc_mpk_linear_backward(m->d1, m->G[OPW], m->G[OPB], dy, m->ctx, m->P[OPW], m->BL, m->D,
                               m->D, NULL, NULL, NULL, ws);
    merge(m, m->d1, m->dob, 1);
    refenc_mpk_attention_backward(m->dq, m->dk, m->dv, m->dP, m->dS, m->Dr, m->dob, m->q, m->k,
                                  m->v, m->Pw, m->o, m->opt, m->B, m->H, m->L, m->Dh, NULL, NULL,
                                  ws);
    if (m->rope != NULL) {
        refenc_mpk_rope_backward(m->dq, m->dq, m->rope->positions, BH, m->L, m->Dh, m->base,
                                 m->rope->layout, ws);
        refenc_mpk_rope_backward(m->dk, m->dk, m->rope->positions, BH, m->L, m->Dh, m->base,
                                 m->rope->layout, ws);
    }
    heads(m, m->dqkv, m->dq, m->dk, m->dv, 1);
    refenc_mpk_linear_backward(dx_out, m->G[IPW], NULL, m->dqkv, in, m->P[IPW], m->BL, m->D,
                               3 * m->D, NULL, NULL, NULL, ws);
    in_bias_backward(m, ws);
}

/* dx_out = FFN^T dy (input in); dy_exact: dy is the layer's own input dY
 * (exact doubles), so db2 = db2_0 + sum dy is recorded exact where it is */
static void ffn_bwd(lyr *m, mpfr_ptr dx_out, mpfr_srcptr dy, mpfr_srcptr in, int dy_exact,
                    refenc_mp_ws *ws)
{
    const size_t n = m->BL * m->F;
    refenc_mpk_linear_backward(m->dz, m->G[L2W], m->G[L2B], dy, m->hid, m->P[L2W], m->BL, m->F,
                               m->D, NULL, NULL, dy_exact ? m->ex[L2B] : NULL, ws);
    refenc_mpk_activation_derivative(m->hid, m->z, n, m->act, ws); /* hid is no longer needed */
    for (size_t i = 0; i < n; i++)
        mpfr_mul(m->dz + i, m->dz + i, m->hid + i, MPFR_RNDN);
    refenc_mpk_linear_backward(dx_out, m->G[L1W], m->G[L1B], m->dz, in, m->P[L1W], m->BL, m->D,
                               m->F, NULL, NULL, NULL, ws);
}

/* dx_out = LN^T dy (the norm's input x), the norm's gamma at P[w] */
static void ln_bwd(lyr *m, mpfr_ptr dx_out, mpfr_srcptr dy, mpfr_srcptr x, int w, int dy_exact,
                   refenc_mp_ws *ws)
{
    refenc_mpk_layernorm_backward(dx_out, m->G[w], m->G[w + 1], m->xhat, dy, x, m->P[w], m->BL,
                                  m->D, m->eps, dy_exact ? m->ex[w + 1] : NULL, ws);
}

/* dx = the layer's input gradient, into d3's place (returned) */
mpfr_ptr refenc_mpb_layer_backward(lyr *m, mpfr_srcptr dy, mpfr_srcptr x, refenc_mp_ws *ws)
{
    const size_t n = m->BL * m->D;
    if (m->pre) {
        ffn_bwd(m, m->d2, dy, m->a2, 1, ws);
        ln_bwd(m, m->d3, m->d2, m->h, N2W, 0, ws);
        add(m->dh, dy, m->d3, n);                 /* dh = dy + LN2^T FFN^T dy */
        mha_bwd(m, m->d2, m->dh, m->a, ws);
        ln_bwd(m, m->d3, m->d2, x, N1W, 0, ws);
        add(m->d3, m->dh, m->d3, n);              /* dx = dh + LN1^T MHA^T dh */
    } else {
        ln_bwd(m, m->d2, dy, m->r2, N2W, 1, ws);  /* dr2 */
        ffn_bwd(m, m->d3, m->d2, m->h, 0, ws);
        add(m->dh, m->d2, m->d3, n);              /* dh = dr2 + FFN^T dr2 */
        ln_bwd(m, m->d2, m->dh, m->r1, N1W, 0, ws); /* dr1 */
        mha_bwd(m, m->d3, m->d2, x, ws);
        add(m->d3, m->d2, m->d3, n);              /* dx = dr1 + MHA^T dr1 */
    }
    return m->d3;
}

int refenc_mpb_layer_ws(refenc_mp_ws *ws, const lyr *m, mpfr_prec_t prec)
{
    const size_t np = m->BL > 3 * m->D ? m->BL : 3 * m->D;
    return refenc_mp_ws_alloc(ws, prec, m->L * m->Dh + m->D + 8, (np > m->F ? np : m->F) + m->L + 1);
}

static const char *const grad_names[12] = {
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
    "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
    "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"};

/* the sizes of the 12 tensors, in refenc_layer_params order */
static void tensor_sizes(size_t *n, size_t D, size_t F)
{
    const size_t s[12] = {3 * D * D, 3 * D, D * D, D, F * D, F, D * F, D, D, D, D, D};
    memcpy(n, s, sizeof s);
}

static const double *param_ptr(const refenc_layer_params *p, int i)
{
    const double *const t[12] = {p->in_proj_weight, p->in_proj_bias, p->out_proj_weight,
                                 p->out_proj_bias, p->linear1_weight, p->linear1_bias,
                                 p->linear2_weight, p->linear2_bias, p->norm1_weight,
                                 p->norm1_bias, p->norm2_weight, p->norm2_bias};
    return t[i];
}

typedef struct {
    const double *dy, *x, *start; /* start: the 12 gradients' starting values, concatenated */
    const refenc_layer_params *lp;
    const refenc_config *cfg;
    const refenc_attn_options *opt;
    const refenc_rope_options *rope;
    size_t B, L;
} layb_args;

void refenc_mpb_layer_buffers(lyr *m, refenc_mp_arena *ar2, mpfr_prec_t p)
{
    const size_t nd = m->BL * m->D, nf = m->BL * m->F, nw = m->B * m->H * m->L * m->L;
    mpfr_ptr *fd[] = {&m->a, &m->q, &m->k, &m->v, &m->o, &m->ctx, &m->t, &m->h, &m->a2, &m->f,
                      &m->r1, &m->r2, &m->y, &m->d1, &m->d2, &m->d3, &m->dh, &m->dob, &m->dq,
                      &m->dk, &m->dv, &m->xhat};
    for (size_t i = 0; i < sizeof fd / sizeof fd[0]; i++)
        *fd[i] = refenc_mp_arena_alloc(ar2, nd, p);
    m->qkv = refenc_mp_arena_alloc(ar2, 3 * nd, p), m->dqkv = refenc_mp_arena_alloc(ar2, 3 * nd, p);
    m->z = refenc_mp_arena_alloc(ar2, nf, p), m->hid = refenc_mp_arena_alloc(ar2, nf, p);
    m->dz = refenc_mp_arena_alloc(ar2, nf, p);
    m->Pw = refenc_mp_arena_alloc(ar2, nw, p), m->dP = refenc_mp_arena_alloc(ar2, nw, p);
    m->dS = refenc_mp_arena_alloc(ar2, nw, p);
    m->Dr = refenc_mp_arena_alloc(ar2, m->B * m->H * m->L, p);
}

static int lyr_emit(const lyr *m, const refenc_mp_sink *sink, mpfr_srcptr dx)
{
    size_t n[12];
    tensor_sizes(n, m->D, m->F);
    const size_t sx[3] = {m->B, m->L, m->D};
    int st = refenc_mp_sink_emit(sink, "y", m->y, 3, sx);
    if (st == REFENC_OK)
        st = refenc_mp_sink_emit(sink, "dx", dx, 3, sx);
    for (int i = 0; i < 12 && st == REFENC_OK; i++) {
        const int matrix = i % 2 == 0 && i < 8;  /* the four weights */
        const size_t cols = i == L2W ? m->F : m->D;
        const size_t shape[2] = {matrix ? n[i] / cols : n[i], cols};
        st = refenc_mp_sink_emit_exact(sink, grad_names[i], m->G[i], m->ex[i], matrix ? 2 : 1,
                                       shape);
    }
    return st;
}

static int layb_eval(void *ctx, mpfr_prec_t prec, const refenc_mp_sink *sink, refenc_error *err)
{
    const layb_args *a = ctx;
    const refenc_config *c = a->cfg;
    lyr m = {.B = a->B, .L = a->L, .D = c->d_model, .H = c->n_heads, .F = c->d_ff,
             .act = c->activation, .pre = c->norm == REFENC_NORM_PRE, .rope = a->rope};
    m.Dh = m.D / m.H, m.BL = m.B * m.L;
    refenc_mp_arena ar1 = {0}, ar2 = {0};
    refenc_mp_ws ws;
    int st = refenc_mpb_layer_ws(&ws, &m, prec);
    void *handle = NULL;
    const int ok = refenc_mp_attn_options_from_d(&handle, &m.opt, a->opt, m.H, m.L);
    size_t n[12];
    tensor_sizes(n, m.D, m.F);
    for (int i = 0, off = 0; i < 12; off += (int)n[i], i++) {
        m.P[i] = refenc_mp_arena_from_d(&ar1, param_ptr(a->lp, i), n[i], 53);
        m.G[i] = refenc_mp_arena_from_d(&ar1, a->start + off, n[i], prec);
    }
    refenc_mpb_layer_buffers(&m, &ar2, prec);
    mpfr_ptr x = refenc_mp_arena_from_d(&ar1, a->x, m.BL * m.D, 53);
    mpfr_ptr dy = refenc_mp_arena_from_d(&ar1, a->dy, m.BL * m.D, 53);
    m.eps = refenc_mp_arena_from_d(&ar1, &c->layer_norm_eps, 1, 53);
    const double base = a->rope ? a->rope->base : 2.0;
    m.base = refenc_mp_arena_from_d(&ar1, &base, 1, 53);
    unsigned char *exb = malloc(m.D); /* the bias summed from dy: db2 (Pre-LN), dbeta2 (Post-LN) */
    m.ex[m.pre ? L2B : N2B] = exb;
    if (st || !ok || ar1.failed || ar2.failed || exb == NULL) {
        st = refenc_mp_enomem(err, "layer backward", prec);
    } else {
        refenc_mpb_layer_forward(&m, x, &ws);
        st = lyr_emit(&m, sink, refenc_mpb_layer_backward(&m, dy, x, &ws));
    }
    free(exb);
    refenc_mp_attn_options_free(handle);
    refenc_mp_arena_free(&ar2);
    refenc_mp_arena_free(&ar1);
    refenc_mp_ws_free(&ws);
    return st;
}

int refenc_mpb_blocks_supported(const refenc_config *cfg, refenc_error *err)
{
    const char *key = cfg->qkv_bias                                ? "qkv_bias" /* Qwen's: named first */
                      : cfg->qk_norm != REFENC_QKNORM_NONE         ? "qk_norm"
                      : cfg->relative_attention_num_buckets != 0 ? "relative_attention_num_buckets" /* T5's, too */
                      : cfg->norm_type != REFENC_NORMTYPE_LAYERNORM ? "norm_type"
                      : cfg->ffn_type != REFENC_FFN_MLP            ? "ffn_type"
                      : !cfg->norm_bias                            ? "norm_bias"
                      : !cfg->linear_bias                          ? "linear_bias"
                      : !cfg->linear1_bias                         ? "linear1_bias"
                      : cfg->rope_scaling.type != REFENC_ROPE_SCALING_NONE ? "rope_scaling"
                      : cfg->rope_scaling.partial_rotary_factor != 1.0     ? "partial_rotary_factor"
                      : refenc_config_kv_heads(cfg) != cfg->n_heads        ? "n_kv_heads"
                      : !refenc_config_attention_is_mha(cfg)               ? "head_dim"
                      : cfg->attn_logit_softcapping != 0                   ? "attn_logit_softcapping"
                      : cfg->query_pre_attn_scalar != 0                    ? "query_pre_attn_scalar"
                      : cfg->sliding_window != 0                           ? "sliding_window"
                      : cfg->local_attention != 0                          ? "local_attention"
                      : cfg->global_attn_every_n_layers != 0               ? "global_attn_every_n_layers"
                      : cfg->sliding_window_pattern != 0                   ? "sliding_window_pattern"
                      : cfg->embedding_normalizer_dtype != REFENC_NORMALIZER_EXACT ? "embedding_normalizer_dtype"
                      : cfg->pooling != REFENC_POOL_NONE                   ? "pooling"
                      : cfg->skip_first_prenorm                            ? "skip_first_prenorm"
                      : cfg->sandwich_norm                                 ? "sandwich_norm"
                                                                   : NULL;
    if (key == NULL)
        return REFENC_OK;
    return refenc_error_set(err, REFENC_EINVAL,
                            "oracle backward: config key %s: only LayerNorm with its bias, the plain MLP, "
                            "linears with biases, unscaled full-width RoPE and multi-head attention with "
                            "head width d_model / n_heads, uncapped, unwindowed and scaled by it, without Qwen's qkv_bias "
                            "or qk_norm, T5's relative bias or a pooling, every layer with its attention norm, have an MPFR backward yet", key);
}

int refenc_mp_layer_backward(double *dx, const refenc_layer_params *dlp, double *y,
                             const double *dy, const double *x, const refenc_layer_params *lp,
                             const refenc_config *cfg, const refenc_attn_options *opt,
                             const refenc_rope_options *rope, size_t B, size_t L,
                             mpfr_prec_t prec, refenc_mp_report *rep)
{
    size_t n[12], total = 0;
    refenc_error local;
    const int ok = refenc_mpb_blocks_supported(cfg, rep ? &rep->error : &local);
    if (ok != REFENC_OK)
        return ok;
    tensor_sizes(n, cfg->d_model, cfg->d_ff);
    for (int i = 0; i < 12; i++)
        total += n[i];
    double *start = malloc(total * sizeof *start); /* the starting values: written over */
    if (start == NULL)
        return refenc_mp_enomem(rep ? &rep->error : NULL, "layer backward", prec);
    refenc_mp_output outs[14] = {{"y", y}, {"dx", dx}};
    for (size_t i = 0, off = 0; i < 12; off += n[i], i++) {
        memcpy(start + off, param_ptr(dlp, (int)i), n[i] * sizeof *start);
        outs[2 + i].name = grad_names[i];
        outs[2 + i].dst = (double *)param_ptr(dlp, (int)i);
    }
    layb_args a = {dy, x, start, lp, cfg, opt, rope, B, L};
    const int st = refenc_mp_run_twin(layb_eval, &a, prec, rep, outs, 14);
    free(start);
    return st;
}
