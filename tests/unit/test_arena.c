/* test_arena.c: planning gives the offsets real carving uses; alignment; exhaustion and overflow
 * refused with a message naming the arena; mark/reset reuse; external buffers; free. And the
 * growing arrays' one helper (util/grow.h): contents kept, doubling, overflow refused. */
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

/* carve the same pieces the way a model plan would: persistent pieces, then scratch reused twice */
static int carve(dt_arena *a, size_t *off)
{
    for (size_t i = 0; i < NS; i++)
        if ((off[i] = dt_arena_push(a, sizes[i])) == DT_ARENA_FAIL)
            return -1;
    size_t m = dt_arena_mark(a);
    for (int rep = 0; rep < 2; rep++) {
        if (dt_arena_push(a, 10000 + (size_t)rep) == DT_ARENA_FAIL)
            return -1;
        dt_arena_reset(a, m);
    }
    return 0;
}

int main(void)
{
    tap_log_begin();

    dt_arena plan;
    size_t poff[NS], roff[NS];
    dt_arena_init_plan(&plan, "plan");
    TAP_OK(dt_arena_planning(&plan), "planning mode reported");
    TAP_OK(carve(&plan, poff) == 0, "planning carves without memory");
    TAP_OK(dt_arena_alloc(&plan, 8) == NULL, "planning gives no addresses");
    int aligned = 1, disjoint = 1;
    for (size_t i = 0; i < NS; i++) {
        aligned = aligned && poff[i] % DT_ARENA_ALIGN == 0;
        if (i > 0)
            disjoint = disjoint && poff[i] >= poff[i - 1] + sizes[i - 1];
    }
    TAP_OK(aligned, "every offset is a multiple of %zu", DT_ARENA_ALIGN);
    TAP_OK(disjoint, "pieces do not overlap");
    size_t need = dt_arena_peak(&plan);
    TAP_OK(need >= poff[NS - 1] + 10001 && need % DT_ARENA_ALIGN == 0, "peak %zu covers the scratch high-water mark", need);

    dt_arena a;
    TAP_OK(dt_arena_init(&a, "activations", need) == DT_OK, "allocate the planned size");
    TAP_OK(!dt_arena_planning(&a) && (uintptr_t)a.base % DT_ARENA_ALIGN == 0, "base is aligned");
    TAP_OK(carve(&a, roff) == 0 && memcmp(poff, roff, sizeof poff) == 0, "real carving gives the planned offsets");
    TAP_OK(dt_arena_peak(&a) == need, "and the same peak");
    unsigned char *p = dt_arena_at(&a, roff[3]);
    int zero = 1;
    for (size_t i = 0; i < sizes[3]; i++)
        zero = zero && p[i] == 0;
    memset(p, 0xab, sizes[3]);
    TAP_OK(zero, "fresh memory is zeroed and writable");

    size_t used = dt_arena_mark(&a);
    char *s = tap_log_take();
    TAP_OK(s && s[0] == '\0', "nothing logged so far");
    free(s);
    TAP_OK(dt_arena_push(&a, need) == DT_ARENA_FAIL && dt_arena_mark(&a) == used, "exhaustion refused, arena unchanged");
    TAP_OK(dt_arena_push(&a, SIZE_MAX - 3) == DT_ARENA_FAIL, "overflowing size refused");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 2 && strstr(s, "arena activations: out of space") &&
               strstr(s, "arena activations: a piece of"),
           "both refusals name the arena: %s", s);
    free(s);

    size_t m = dt_arena_mark(&a);
    void *x = dt_arena_alloc(&a, 100);
    dt_arena_reset(&a, m);
    void *y = dt_arena_alloc(&a, 50);
    TAP_OK(x && x == y, "reset gives the space back");
    dt_arena_reset(&a, need * 2);
    TAP_OK(dt_arena_mark(&a) == m + DT_ARENA_ALIGN * 1, "reset beyond the end is ignored");
    dt_arena_free(&a);
    TAP_OK(a.base == NULL && a.capacity == 0, "free empties the arena");
    dt_arena_free(&a);
    dt_arena_free(NULL);
    TAP_OK(a.base == NULL && a.capacity == 0, "double free and NULL are harmless");

    _Alignas(64) unsigned char buf[256];
    dt_arena b;
    dt_arena_init_buffer(&b, "device", buf, sizeof buf);
    void *q1 = dt_arena_alloc(&b, 100), *q2 = dt_arena_alloc(&b, 100);
    TAP_OK(q1 == buf && q2 == buf + 128, "external buffer carved in 64-byte steps");
    TAP_OK(dt_arena_alloc(&b, 1) == NULL, "and refused when full");
    dt_arena_free(&b);
    TAP_OK(b.base == NULL, "free of an external buffer forgets it without freeing");

    dt_arena big;
    TAP_OK(dt_arena_init(&big, "huge", SIZE_MAX - 10) == DT_ERR_NOMEM && big.base == NULL,
           "an impossible size is refused with DT_ERR_NOMEM");
    dt_arena_free(&big);

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
