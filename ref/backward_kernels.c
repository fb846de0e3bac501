/* The backward's kernel table (backward_kernels.h): the reference's. */
#include "backward_kernels.h"

#include "embedding.h"
#include "layernorm.h"
#include "linear.h"

void refenc_embedding_token_backward(double *dtable, const double *dx, const int64_t *tokens, size_t B,
                                     size_t L, size_t V, size_t D, int scaled)
{
    if (scaled)
        refenc_embedding_backward(dtable, dx, tokens, B, L, V, D);
    else
        refenc_embedding_lookup_backward(dtable, dx, tokens, B, L, V, D);
}

const refenc_backward_kernels refenc_backward_reference = {
    .linear = refenc_linear_backward,
    .layernorm = refenc_layernorm_backward,
    .attention = refenc_attention_backward,
    .rope = refenc_rope_scaled_backward,
    .activation = refenc_activation_backward,
    .embedding = refenc_embedding_token_backward,
};

const refenc_backward_kernels *refenc_backward_kernels_or_reference(const refenc_backward_kernels *k)
{
    return k != NULL ? k : &refenc_backward_reference;
}
