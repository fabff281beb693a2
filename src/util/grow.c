/* grow.c: dt_grow (grow.h). */
#include "config.h"

#include "util/grow.h"

#include <stdint.h>
#include <stdlib.h>

#include "util/check.h"

int dt_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return DT_OK;
    if (elem == 0 || need > SIZE_MAX / 2 / elem)
        return DT_ERR_NOMEM;
    size_t c = *cap >= 16 ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return DT_ERR_NOMEM;
    *p = q;
    *cap = c;
    return DT_OK;
}
