/* One allocator for arrays, so that no caller multiplies sizes unchecked. */
#ifndef REFENC_ALLOC_H
#define REFENC_ALLOC_H

#include <stddef.h>

/* malloc of n elements of `size` bytes; at least one element is allocated,
 * so n == 0 gives a valid pointer to free (never NULL for "nothing").
 * Returns NULL when n * size overflows size_t or the allocation fails.
 * The memory is not initialised. */
void *refenc_alloc_array(size_t n, size_t size);

/* Makes the array *p, of *cap elements of `size` bytes, hold at least
 * `need` (doubling its capacity, from 16).  Returns 1, or 0 when the size
 * overflows or the allocation fails (then *p and *cap are unchanged). */
int refenc_array_reserve(void **p, size_t *cap, size_t need, size_t size);

#endif
