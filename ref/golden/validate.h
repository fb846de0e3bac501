/* A golden case's inputs, validated before the oracle runs (docs/cli.md,
 * refenc golden's errors): ground truth is never made from bad input.
 *
 *   finite        every parameter finite; in.x finite (a softmax case's
 *                 logits may be -inf: a masked logit); in.attn_mask finite
 *                 or -inf.  A NaN or an infinity elsewhere would make
 *                 expected values NaN, which even the reference fails.
 *   compared      the required output keeps at least one element that is
 *                 not don't-care (golden_uncompared_inputs, the rule the
 *                 case file's dontcare.* masks follow): a golden with
 *                 nothing compared would let certify pass anything. */
#ifndef REFENC_GOLDEN_VALIDATE_H
#define REFENC_GOLDEN_VALIDATE_H

#include "../core/case.h"
#include "../core/status.h"

/* Where the case's inputs and parameters came from, for the messages: the
 * inputs file, the weights file (NULL: seeded), and the config or
 * catalogue (its path). */
typedef struct {
    const char *inputs_path, *weights_path, *source_path;
} golden_sources;

/* Errors: REFENC_EINVAL naming the tensor and its flat index (and where it
 * came from), or the input field that leaves nothing compared;
 * REFENC_ENOMEM. */
int golden_validate_case(const refenc_case *c, const char *name, const golden_sources *src, refenc_error *err);

#endif
