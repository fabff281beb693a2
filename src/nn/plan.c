/* plan.c: packing buffers with known lifetimes into one arena (contract in plan.h). */
#include "config.h"

#include "nn/plan.h"

#include <stdlib.h>

static int lifetimes_overlap(const dt_plan_buffer *a, const dt_plan_buffer *b)
{
    return a->first <= b->last && b->first <= a->last;
}

/* First fit in the given order: each buffer takes the lowest offset whose range is free of every
 * buffer placed before it with an overlapping lifetime. Returns the bytes needed, or DT_PLAN_FAIL
 * when an offset overflows. */
static size_t first_fit(const dt_plan_buffer *buf, const size_t *size, int k, const int *order, size_t *off)
{
    size_t total = 0;
    for (int a = 0; a < k; a++) {
        int v = order[a];
        size_t o = 0;
        for (int moved = 1; moved;) { /* bump past every overlapping placed buffer */
            moved = 0;
            for (int q = 0; q < a; q++) {
                int u = order[q];
                if (lifetimes_overlap(&buf[u], &buf[v]) && o < off[u] + size[u] && off[u] < o + size[v]) {
                    o = off[u] + size[u];
                    moved = 1;
                }
            }
        }
        if (o > SIZE_MAX - size[v])
            return DT_PLAN_FAIL;
        off[v] = o;
        if (o + size[v] > total)
            total = o + size[v];
    }
    return total;
}

/* the sort key of buffer i under a placement order (descending keys are placed first) */
static double order_key(const dt_plan_buffer *b, size_t size, enum dt_plan_order order)
{
    double life = (double)b->last - b->first, bytes = (double)size;
    switch (order) {
    case DT_PLAN_LONGEST_FIRST: return life * 1e15 + bytes;
    case DT_PLAN_EARLIEST_FIRST: return -(double)b->first * 1e15 + bytes;
    default: return bytes;
    }
}

size_t dt_plan_pack(dt_plan_buffer *buf, int n, size_t align, enum dt_plan_order order)
{
    size_t slots = (size_t)(n > 0 ? n : 1), best = DT_PLAN_FAIL, mask = align > 1 ? align - 1 : 0;
    int *ord = calloc(slots, sizeof(int));
    double *key = calloc(slots, sizeof(double));
    size_t *size = calloc(slots, sizeof(size_t)), *trial = calloc(slots, sizeof(size_t));
    int ok = ord && key && size && trial;
    for (int i = 0; i < n; i++) {
        buf[i].offset = 0;
        if (ok && buf[i].bytes > SIZE_MAX - mask)
            ok = 0;
        else if (ok)
            size[i] = (buf[i].bytes + mask) & ~mask;
    }
    for (int rule = DT_PLAN_LARGEST_FIRST; rule <= DT_PLAN_EARLIEST_FIRST && ok; rule++) {
        if (order != DT_PLAN_SMALLEST && rule != (int)order)
            continue;
        int k = 0;
        for (int i = 0; i < n; i++) {
            trial[i] = 0;
            if (!size[i])
                continue;
            ord[k++] = i;
            key[i] = order_key(&buf[i], size[i], (enum dt_plan_order)rule);
        }
        for (int a = 1; a < k; a++) /* descending key; insertion sort keeps ties in index order */
            for (int b = a; b > 0 && key[ord[b]] > key[ord[b - 1]]; b--) {
                int t = ord[b];
                ord[b] = ord[b - 1];
                ord[b - 1] = t;
            }
        size_t total = first_fit(buf, size, k, ord, trial);
        if (total != DT_PLAN_FAIL && (best == DT_PLAN_FAIL || total < best)) {
            best = total;
            for (int i = 0; i < n; i++)
                buf[i].offset = trial[i];
        }
    }
    free(ord);
    free(key);
    free(size);
    free(trial);
    return best;
}
