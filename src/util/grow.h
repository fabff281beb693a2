/* grow.h: the one way a growing array grows.
 *
 *     item *v = NULL; size_t cap = 0, n = 0;
 *     DT_TRY(dt_grow((void **)&v, &cap, n + 1, sizeof *v));   now cap >= n + 1
 *     v[n++] = x;
 *
 * The capacity doubles (from 16 elements), so appending n elements costs O(n). On failure
 * (DT_ERR_NOMEM, also when need * elem would overflow) *p and *cap are unchanged and still valid.
 */
#ifndef DT_UTIL_GROW_H
#define DT_UTIL_GROW_H

#include <stddef.h>

int dt_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
