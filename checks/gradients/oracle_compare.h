/* The reference's backward against the oracle's (oracle_compare.c): each
 * returns the number of elements outside their derived bound. */
#ifndef REFENC_ORACLE_COMPARE_H
#define REFENC_ORACLE_COMPARE_H

#include <criterion/criterion.h>

#include "gradcheck.h"

size_t go_linear(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t go_layernorm(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t go_softmax(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t go_attention(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t go_rope(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t go_activation_relu(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t go_activation_gelu(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t go_embedding(const gc_kernels *K, gsl_rng *r, test_worst *w);
size_t go_scatter_unscaled(const gc_kernels *K, gsl_rng *r, test_worst *w);

#endif
