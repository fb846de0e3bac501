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
