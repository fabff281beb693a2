/* arena.c: the arena allocator (contract in arena.h). */
#include "config.h"

#include "util/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
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

int dt_arena_init(dt_arena *a, const char *name, size_t capacity)
{
    memset(a, 0, sizeof *a);
    set_name(a, name);
    size_t cap;
    if (!align_up(capacity ? capacity : 1, &cap)) {
        dt_error("arena %s: %zu bytes cannot be allocated", a->name, capacity);
        return DT_ERR_NOMEM;
    }
    void *p = NULL;
    int e = posix_memalign(&p, DT_ARENA_ALIGN, cap);
    if (e != 0) {
        dt_error("arena %s: cannot allocate %zu bytes: %s", a->name, cap, dt_errstr_value(e, 0));
        return DT_ERR_NOMEM;
    }
    memset(p, 0, cap);
    a->base = p;
    a->capacity = cap;
    a->owned = 1;
    return DT_OK;
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

void *dt_arena_alloc(dt_arena *a, size_t bytes)
{
    size_t off = dt_arena_push(a, bytes);
    return off == DT_ARENA_FAIL ? NULL : dt_arena_at(a, off);
}

int dt_arena_planning(const dt_arena *a)
{
    return a->base == NULL && a->capacity == SIZE_MAX;
}

size_t dt_arena_mark(const dt_arena *a)
{
    return a->used;
}

void dt_arena_reset(dt_arena *a, size_t mark)
{
    if (mark <= a->used)
        a->used = mark;
}

size_t dt_arena_peak(const dt_arena *a)
{
    return a->peak;
}

void dt_arena_free(dt_arena *a)
{
    if (!a)
        return;
    if (a->owned)
        free(a->base);
    a->base = NULL;
    a->capacity = 0;
    a->used = 0;
    a->owned = 0;
}
