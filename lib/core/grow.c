/*
 * Growable arrays: room for one more element, by doubling (core/grow.h).
 */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>

#include "core/grow.h"

void *sn_grow(void *arr, size_t *cap, size_t n, size_t size, size_t first)
{
    size_t ncap;
    void *p;
    if (n < *cap)
        return arr;
    ncap = *cap ? *cap : first ? first : 1;
    while (ncap < n + 1) {
        if (ncap > SIZE_MAX / 2)
            return NULL;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / size)
        return NULL;
    if (!(p = realloc(arr, ncap * size)))
        return NULL;
    *cap = ncap;
    return p;
}
