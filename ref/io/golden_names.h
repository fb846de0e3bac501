/* The tensor names of the golden format (docs/golden-format.md), built and
 * recognised here only:
 *   in.<input>                      the case's inputs
 *   out.<step>                      an expected output (a trace step)
 *   dontcare.out.<step>             its don't-care mask
 *   alt.<variant>.out.<step>        a known bug variant's output
 *   alt.<variant>.dontcare.out.<step>  and its mask
 *   in.layers.<i>.input             layer i's stored input (a case made per
 *                                   layer: its outputs are functions of it)
 *   in.grad.dY                      the upstream gradient of a gradient case
 *   grad.<step>, grad.<parameter>   its expected gradients (format version 2)
 * Every other tensor of a golden file is a parameter. */
#ifndef REFENC_GOLDEN_NAMES_H
#define REFENC_GOLDEN_NAMES_H

#include <stddef.h>

#define REFENC_NAME_INPUT "in."
#define REFENC_NAME_OUTPUT "out."
#define REFENC_NAME_DONTCARE "dontcare."
#define REFENC_NAME_ALT "alt."
#define REFENC_NAME_GRAD "grad."
#define REFENC_NAME_GRAD_DY "in.grad.dY"

/* Longest name these functions build, with its NUL. */
#define REFENC_NAME_MAX 256

/* "out.<step>".  Returns 0 if it does not fit in cap bytes (buf then holds
 * a cut, still terminated, string). */
int refenc_name_output(char *buf, size_t cap, const char *step);

/* The don't-care mask of an output: "dontcare.<output>", or with a variant
 * (not NULL) "alt.<variant>.dontcare.<output>".  output is "out.<step>". */
int refenc_name_dontcare(char *buf, size_t cap, const char *variant, const char *output);

/* A variant's copy of an output: "alt.<variant>.<output>". */
int refenc_name_alt(char *buf, size_t cap, const char *variant, const char *output);

/* The prefix of a variant's tensors: "alt.<variant>.". */
int refenc_name_alt_prefix(char *buf, size_t cap, const char *variant);

/* Whether a tensor name is an output, a mask or a variant's tensor: not an
 * input and not a parameter. */
int refenc_name_is_expected(const char *name);

/* Whether a tensor is of the backward: in.grad.dY or grad.* (docs/golden-format.md,
 * "Gradients"); the forward's readers skip them. */
int refenc_name_is_grad(const char *name);

/* "in.layers.<layer>.input". */
int refenc_name_layer_input(char *buf, size_t cap, size_t layer);

/* Whether name is "in.layers.<i>.input" (i a decimal number without sign or
 * leading zero); *layer receives i. */
int refenc_name_is_layer_input(const char *name, size_t *layer);

#endif
