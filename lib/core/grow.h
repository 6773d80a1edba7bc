/*
 * Growable arrays (private): the one place that decides how an array of n
 * elements in use, cap allocated, makes room for one more.  It is in core
 * because every layer keeps such arrays (the device list, the plan's steps
 * and allocations, the graph's values and nodes, the trace's events).
 */
#ifndef SN_GROW_H
#define SN_GROW_H

#include <stddef.h>

/*
 * Room for element n of arr (cap elements of size bytes allocated, n in
 * use): arr itself while n < *cap, else arr reallocated to twice *cap
 * (first when *cap is 0, then doubled until n fits) and *cap updated.
 * NULL when out of memory or the size overflows; arr and *cap are then
 * unchanged and arr still owned by the caller.
 */
void *sn_grow(void *arr, size_t *cap, size_t n, size_t size, size_t first);

#endif /* SN_GROW_H */
