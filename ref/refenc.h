/* refenc: a double-precision reference Transformer encoder.
 *
 * Glossary of dimension letters (every shape comment in ref/ uses them):
 *   B  batch size            L  sequence length       D  model width (d_model)
 *   H  number of heads       Dh head width = D / H    F  feed-forward width (d_ff)
 *   V  vocabulary size       N  number of layers      P  rows of the learned PE table
 *   T  token types
 * Tensors are row-major and batch-first: (B, L, D).
 * u = 2^-53 is the unit roundoff of double; gamma_n = n u / (1 - n u).
 *
 * One concept per header; docs/architecture.md maps each step of a layer to
 * the file and function that computes it, and shows the rooms of ref/ (core,
 * the kernels, io, tool, oracle, cli) and the rules between them.
 * Inference only: no dropout.
 *
 * This umbrella is the installed C API (<refenc/refenc.h>, docs/c-api.md):
 * it needs jansson, nettle and libm, never GSL or MPFR. */
#ifndef REFENC_H
#define REFENC_H

/* C++ (and CUDA) code includes this header as it is. */
#ifdef __cplusplus
extern "C" {
#endif

/* core: what the kernels and the oracle share */
#include "core/alloc.h"
#include "core/case.h"
#include "core/config.h"
#include "core/family.h"
#include "core/input.h"
#include "core/options.h"
#include "core/params.h"
#include "core/status.h"
#include "core/trace.h"
#include "core/version.h"

/* the double kernels */
#include "activation.h"
#include "alibi.h"
#include "attention.h"
#include "embedding.h"
#include "encoder.h"
#include "ffn.h"
#include "glu.h"
#include "layer.h"
#include "layernorm.h"
#include "learned_pe.h"
#include "linear.h"
#include "mha.h"
#include "norm.h"
#include "position_ids.h"
#include "rmsnorm.h"
#include "rope.h"
#include "sinusoidal.h"
#include "softmax.h"

/* io: golden cases and results files */
#include "io/case_file.h"
#include "io/config_json.h"
#include "io/file_read.h"
#include "io/golden_names.h"
#include "io/half.h"
#include "io/manifest.h"
#include "io/model_file.h"
#include "io/safetensors.h"

/* tool: running a case, certification, the known bug variants */
#include "tool/certificate.h"
#include "tool/certify.h"
#include "tool/emulate.h"
#include "tool/report.h"
#include "tool/backward_bugs.h"
#include "tool/run_backward.h"
#include "tool/run_case.h"
#include "tool/variants.h"

#ifdef __cplusplus
}
#endif

#endif
