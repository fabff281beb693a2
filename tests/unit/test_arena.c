/* test_arena.c: planning gives the offsets real carving uses; alignment; exhaustion and overflow
 * refused with a message naming the arena; external buffers; free. And the growing arrays' one
 * helper (util/grow.h): contents kept, doubling, overflow refused. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util/arena.h"
#include "util/check.h"
#include "util/grow.h"
#include "util/log.h"

static const size_t sizes[] = {3, 64, 1, 1000, 0, 4096, 65, 7};
#define NS (sizeof sizes / sizeof sizes[0])

/* carve the same pieces the way a model plan would */
static int carve(dt_arena *a, size_t *off)
{
    for (size_t i = 0; i < NS; i++)
        if ((off[i] = dt_arena_push(a, sizes[i])) == DT_ARENA_FAIL)
            return -1;
    return 0;
}

int main(void)
{
    tap_log_begin();

    dt_arena plan;
    size_t poff[NS], roff[NS];
    dt_arena_init_plan(&plan, "plan");
    TAP_OK(carve(&plan, poff) == 0, "planning carves without memory");
    TAP_OK(dt_arena_at(&plan, poff[1]) == NULL, "planning gives no addresses");
    int aligned = 1, disjoint = 1;
    for (size_t i = 0; i < NS; i++) {
        aligned = aligned && poff[i] % DT_ARENA_ALIGN == 0;
        if (i > 0)
            disjoint = disjoint && poff[i] >= poff[i - 1] + sizes[i - 1];
    }
    TAP_OK(aligned, "every offset is a multiple of %zu", DT_ARENA_ALIGN);
    TAP_OK(disjoint, "pieces do not overlap");
    size_t need = dt_arena_peak(&plan);
    TAP_OK(need >= poff[NS - 1] + sizes[NS - 1] && need % DT_ARENA_ALIGN == 0, "peak %zu covers every piece", need);

    void *mem = NULL;
    TAP_OK(posix_memalign(&mem, DT_ARENA_ALIGN, need) == 0, "allocate the planned size");
    dt_arena a;
    dt_arena_init_buffer(&a, "activations", mem, need);
    TAP_OK(carve(&a, roff) == 0 && memcmp(poff, roff, sizeof poff) == 0, "real carving gives the planned offsets");
    TAP_OK(dt_arena_peak(&a) == need, "and the same peak");
    TAP_OK(dt_arena_at(&a, roff[3]) == (unsigned char *)mem + roff[3], "addresses are base + offset");

    char *s = tap_log_take();
    TAP_OK(s && s[0] == '\0', "nothing logged so far");
    free(s);
    size_t used = a.used;
    TAP_OK(dt_arena_push(&a, 1) == DT_ARENA_FAIL && a.used == used, "exhaustion refused, arena unchanged");
    TAP_OK(dt_arena_push(&a, SIZE_MAX - 3) == DT_ARENA_FAIL, "overflowing size refused");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 2 && strstr(s, "arena activations: out of space") &&
               strstr(s, "arena activations: a piece of"),
           "both refusals name the arena: %s", s);
    free(s);
    dt_arena_free(&a);
    TAP_OK(a.base == NULL && a.capacity == 0, "free empties the arena");
    dt_arena_free(&a);
    dt_arena_free(NULL);
    TAP_OK(a.base == NULL && a.capacity == 0, "double free and NULL are harmless");
    free(mem); /* the memory stayed the caller's */

    _Alignas(64) unsigned char buf[256];
    dt_arena b;
    dt_arena_init_buffer(&b, "device", buf, sizeof buf);
    size_t o1 = dt_arena_push(&b, 100), o2 = dt_arena_push(&b, 100);
    TAP_OK(dt_arena_at(&b, o1) == buf && dt_arena_at(&b, o2) == buf + 128, "external buffer carved in 64-byte steps");
    TAP_OK(dt_arena_push(&b, 1) == DT_ARENA_FAIL, "and refused when full");
    free(tap_log_take());
    dt_arena_free(&b);
    TAP_OK(b.base == NULL, "free of an external buffer forgets it without freeing");

    int *v = NULL;
    size_t cap = 0, reallocs = 0, ok = 1;
    for (int i = 0; i < 1000; i++) {
        size_t before = cap;
        if (dt_grow((void **)&v, &cap, (size_t)i + 1, sizeof *v) != DT_OK) {
            ok = 0;
            break;
        }
        reallocs += cap != before;
        v[i] = i;
    }
    for (int i = 0; ok && i < 1000; i++)
        ok = v[i] == i;
    TAP_OK(ok && cap >= 1000, "dt_grow: 1000 appends keep every element (capacity %zu)", cap);
    TAP_OK(reallocs <= 7, "dt_grow: capacity doubles (%zu reallocations for 1000 appends)", reallocs);
    size_t cap_before = cap;
    int *v_before = v;
    TAP_OK(dt_grow((void **)&v, &cap, 10, sizeof *v) == DT_OK && cap == cap_before && v == v_before,
           "dt_grow: a need within the capacity changes nothing");
    TAP_OK(dt_grow((void **)&v, &cap, SIZE_MAX / 2, sizeof *v) == DT_ERR_NOMEM && v == v_before && cap == cap_before,
           "dt_grow: an overflowing size is refused, the array kept");
    free(v);
    tap_log_end();
    return tap_done();
}
