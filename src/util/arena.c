/* arena.c: carving memory into aligned pieces, or planning it (contract in arena.h). */
#include "config.h"

#include "util/arena.h"

#include <stdio.h>
#include <string.h>

#include "util/log.h"

static void set_name(dt_arena *a, const char *name)
{
    snprintf(a->name, sizeof a->name, "%s", name ? name : "arena");
}

/* round n up to DT_ARENA_ALIGN; returns 0 when that overflows */
static int align_up(size_t n, size_t *out)
{
    if (n > SIZE_MAX - (DT_ARENA_ALIGN - 1))
        return 0;
    *out = (n + DT_ARENA_ALIGN - 1) & ~(DT_ARENA_ALIGN - 1);
    return 1;
}

void dt_arena_init_plan(dt_arena *a, const char *name)
{
    memset(a, 0, sizeof *a);
    set_name(a, name);
    a->capacity = SIZE_MAX;
}

void dt_arena_init_buffer(dt_arena *a, const char *name, void *base, size_t capacity)
{
    memset(a, 0, sizeof *a);
    set_name(a, name);
    a->base = base;
    a->capacity = base ? capacity : 0;
}

size_t dt_arena_push(dt_arena *a, size_t bytes)
{
    size_t start, len;
    if (!align_up(a->used, &start) || !align_up(bytes, &len) || len > SIZE_MAX - start) {
        dt_error("arena %s: a piece of %zu bytes overflows the address space", a->name, bytes);
        return DT_ARENA_FAIL;
    }
    if (start + len > a->capacity) {
        dt_error("arena %s: out of space: %zu bytes asked with %zu of %zu in use", a->name, bytes, a->used,
                 a->capacity);
        return DT_ARENA_FAIL;
    }
    a->used = start + len;
    if (a->used > a->peak)
        a->peak = a->used;
    return start;
}

void *dt_arena_at(const dt_arena *a, size_t offset)
{
    return a->base ? a->base + offset : NULL;
}

size_t dt_arena_peak(const dt_arena *a)
{
    return a->peak;
}

void dt_arena_free(dt_arena *a)
{
    if (!a)
        return;
    a->base = NULL;
    a->capacity = 0;
    a->used = 0;
}
