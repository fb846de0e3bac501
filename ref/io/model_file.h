/* A model's own weights and inputs, read from safetensors files.
 *
 * Weights: every parameter of the config's tensor table (docs/architecture.md)
 * under its PyTorch state_dict name ("layers.0.self_attn.in_proj_weight",
 * ..., "norm.weight"), with its shape, in F64, F32, F16 or BF16 (converted
 * exactly), and nothing else: a checkpoint saved from nn.TransformerEncoder
 * with safetensors.torch.save_file(model.state_dict(), ...) loads as it is.
 *
 * Inputs: the golden format's names (docs/golden-format.md): in.tokens
 * (B, L) I64 when vocab_size > 0, else in.x (B, L, D) floating; optionally
 * in.token_type_ids (B, L) I64 in [0, type_vocab_size) when the config has a
 * token-type table (absent: every position type 0), in.key_padding_mask (B, L) BOOL or U8 (1 = padding), in.positions (L) I64,
 * in.attn_mask (L, L) floating (-inf masks).  B and L come from the file.
 *
 * When a file does not match, the message names every missing, extra and
 * misshapen tensor (with its shape and the expected one), on one line. */
#ifndef REFENC_MODEL_FILE_H
#define REFENC_MODEL_FILE_H

#include "../core/case.h"
#include "../core/params.h"
#include "../core/status.h"
#include "safetensors.h"

/* Fills p, allocated for its config, from the weights file f.
 * *report, when report is not NULL, receives the whole message of a
 * mismatch (malloc'ed; the caller frees it; NULL when there is none): err
 * holds the same message, cut to REFENC_ERRMSG_MAX.
 * Errors: REFENC_EFORMAT (a missing, extra or misshapen tensor, or one of
 * a dtype that is not floating), REFENC_ENOMEM. */
int refenc_params_from_file(refenc_params *p, const refenc_st_file *f, char **report,
                            refenc_error *err);

/* Allocates an encoder case for cfg and the shape the inputs file f
 * defines, and reads its inputs; positions default to 0 .. L-1 (and are
 * part of the case when the file has them or cfg uses positions).  The
 * values are validated (refenc_case_validate).  The parameters are left
 * zero.  *report as above.  On error *c is empty.
 * Errors: REFENC_EFORMAT (tensors), REFENC_EINVAL (values), REFENC_ELIMIT
 * (the shape is over a limit), REFENC_ENOMEM. */
int refenc_case_from_inputs_file(refenc_case *c, const refenc_config *cfg,
                                 const refenc_st_file *f, char **report, refenc_error *err);

/* Whether a tensor of dtype d holds floating values (F64, F32, F16, BF16). */
int refenc_st_dtype_is_float(refenc_st_dtype d);

#endif
