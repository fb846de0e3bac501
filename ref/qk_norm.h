/* Per-head normalisation of the queries and keys (docs/families.md, "Qwen's
 * attention"): Qwen3's q_norm and k_norm (Hugging Face modeling_qwen3.py,
 * Qwen3Attention.forward):
 *     q = q_norm(q_proj(x).view(B, L, H, Dh))      RMSNorm over Dh, per head
 *     k = k_norm(k_proj(x).view(B, L, Hkv, Dh))    the key/value heads' keys
 *     q, k = apply_rotary_pos_emb(q, k, cos, sin)  RoPE after the norms
 * Each norm is an RMSNorm (rmsnorm.h) over the head width Dh with one weight
 * (Dh) shared by every head (the query heads for q_norm, the Hkv key/value
 * heads for k_norm), eps = rms_norm_eps (refenc's layer_norm_eps) and the
 * model's RMSNorm scale (w, or Gemma 3's 1 + w: rmsnorm_offset).  V is not
 * normalised.  OLMo-2 normalises q and k over the whole width H Dh instead,
 * with weights (H Dh): a different model (the variant qk_norm_over_all_heads).
 * Qwen2's counterpart is the bias of q_proj, k_proj and v_proj
 * (config qkv_bias, in_proj_bias), which needs no kernel of its own. */
#ifndef REFENC_QK_NORM_H
#define REFENC_QK_NORM_H

#include <stddef.h>

#include "core/config.h"
#include "core/params.h"

/* One layer's q/k normalisation. */
typedef struct {
    const double *q_weight; /* (Dh) self_attn.q_norm.weight */
    const double *k_weight; /* (Dh) self_attn.k_norm.weight */
    double eps;             /* layer_norm_eps (rms_norm_eps) */
    int offset;             /* rmsnorm_offset: scale 1 + w   */
} refenc_qk_norm;

/* The normalisation of layer lp under cfg, or NULL when cfg has no qk_norm
 * (then *n is untouched).  Never fails. */
const refenc_qk_norm *refenc_qk_norm_of(refenc_qk_norm *n, const refenc_config *cfg,
                                        const refenc_layer_params *lp);

/* q: (BL, H Dh) and k: (BL, Hkv Dh), the projections as Linear writes them,
 * normalised in place head by head: rows of Dh values, (BL H, Dh) and
 * (BL Hkv, Dh), by refenc_rmsnorm_forward.  Never fails. */
void refenc_qk_norm_forward(double *q, double *k, const refenc_qk_norm *n, size_t BL, size_t H,
                            size_t Hkv, size_t Dh);

/* The same with BLq rows of q (the selected query rows, rows.h) and BL of k.
 * Never fails. */
void refenc_qk_norm_rows_forward(double *q, double *k, const refenc_qk_norm *n, size_t BLq, size_t BL,
                                 size_t H, size_t Hkv, size_t Dh);

#endif
