/* refenc: a double-precision reference Transformer encoder.
 *
 * Glossary of dimension letters (every shape comment in ref/ uses them):
 *   B  batch size            L  sequence length       D  model width (d_model)
 *   H  number of heads       Dh head width = D / H    F  feed-forward width (d_ff)
 *   V  vocabulary size       N  number of layers      P  rows of the learned PE table
 * Tensors are row-major and batch-first: (B, L, D).
 * u = 2^-53 is the unit roundoff of double; gamma_n = n u / (1 - n u).
 *
 * One concept per header; docs/architecture.md maps each step of a layer to
 * the file and function that computes it.  Inference only: no dropout. */
#ifndef REFENC_H
#define REFENC_H

#include "activation.h"
#include "alibi.h"
#include "attention.h"
#include "config.h"
#include "config_json.h"
#include "embedding.h"
#include "encoder.h"
#include "ffn.h"
#include "layer.h"
#include "layernorm.h"
#include "learned_pe.h"
#include "linear.h"
#include "mha.h"
#include "params.h"
#include "rope.h"
#include "sinusoidal.h"
#include "softmax.h"
#include "status.h"
#include "trace.h"

#define REFENC_VERSION "0.1.0"

#endif
