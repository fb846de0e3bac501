#include "alloc.h"

#include <stdint.h>
#include <stdlib.h>

void *refenc_alloc_array(size_t n, size_t size)
{
    if (n == 0)
        n = 1;
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    return malloc(n * size);
}

int refenc_array_reserve(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 1;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2)
            return 0;
        n *= 2;
    }
    if (size != 0 && n > SIZE_MAX / size)
        return 0;
    void *q = realloc(*p, n * size);
    if (q == NULL)
        return 0;
    *p = q;
    *cap = n;
    return 1;
}
