/* test_plan.c: the memory planner (nn/plan.h) on plain interval problems. Buffers live at the same
 * time never overlap in memory; offsets and the peak are aligned; the peak is never below the most
 * bytes live at one step and never above what the offsets use; disjoint lifetimes share bytes;
 * empty problems, one buffer and zero sizes; sizes that overflow are refused; and random problems
 * checked against a brute-force overlap checker, under every placement order. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/plan.h"
#include "tap.h"

static size_t round_up(size_t b, size_t align)
{
    return align > 1 ? (b + align - 1) / align * align : b;
}

/* Brute force: every pair of buffers with overlapping lifetimes and memory is a failure; so is an
 * unaligned offset, or a buffer that ends past the peak. Returns the number of violations. */
static int violations(const dt_plan_buffer *b, int n, size_t align, size_t peak)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        size_t si = round_up(b[i].bytes, align);
        if ((align > 1 && b[i].offset % align) || (si && b[i].offset + si > peak))
            bad++;
        for (int j = i + 1; j < n; j++) {
            size_t sj = round_up(b[j].bytes, align);
            int live_together = b[i].first <= b[j].last && b[j].first <= b[i].last;
            int share_bytes = si && sj && b[i].offset < b[j].offset + sj && b[j].offset < b[i].offset + si;
            if (live_together && share_bytes)
                bad++;
        }
    }
    return bad;
}

/* the most bytes live at one step: no packing can need less */
static size_t max_live(const dt_plan_buffer *b, int n, size_t align)
{
    size_t most = 0;
    for (int i = 0; i < n; i++) { /* the maximum is reached at some buffer's first step */
        size_t sum = 0;
        for (int j = 0; j < n; j++)
            if (b[j].first <= b[i].first && b[i].first <= b[j].last)
                sum += round_up(b[j].bytes, align);
        most = sum > most ? sum : most;
    }
    return most;
}

/* the end of the highest buffer: the peak must be exactly this */
static size_t used_end(const dt_plan_buffer *b, int n, size_t align)
{
    size_t end = 0;
    for (int i = 0; i < n; i++) {
        size_t s = round_up(b[i].bytes, align);
        if (s && b[i].offset + s > end)
            end = b[i].offset + s;
    }
    return end;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

int main(void)
{
    const size_t A = 64;

    TAP_OK(dt_plan_pack(NULL, 0, A, DT_PLAN_SMALLEST) == 0, "no buffers: peak 0");

    dt_plan_buffer one = {.bytes = 100, .first = 3, .last = 7, .offset = 12345};
    size_t peak = dt_plan_pack(&one, 1, A, DT_PLAN_SMALLEST);
    TAP_OK(peak == 128 && one.offset == 0, "one buffer of 100: offset 0, peak 128 (64-aligned): %zu", peak);

    dt_plan_buffer zero[3] = {{.bytes = 0, .first = 0, .last = 9, .offset = 7},
                              {.bytes = 64, .first = 0, .last = 9},
                              {.bytes = 0, .first = 2, .last = 3, .offset = 7}};
    peak = dt_plan_pack(zero, 3, A, DT_PLAN_SMALLEST);
    TAP_OK(peak == 64 && zero[0].offset == 0 && zero[1].offset == 0 && zero[2].offset == 0,
           "zero-byte buffers take no memory and offset 0: peak %zu", peak);
    dt_plan_buffer zeros[2] = {{.bytes = 0, .first = 0, .last = 1}, {.bytes = 0, .first = 0, .last = 1}};
    TAP_OK(dt_plan_pack(zeros, 2, A, DT_PLAN_SMALLEST) == 0, "only zero-byte buffers: peak 0");

    /* the example of plan.h: a chain where the first and the third never meet */
    dt_plan_buffer chain[3] = {{.bytes = 100, .first = 0, .last = 1},
                               {.bytes = 100, .first = 1, .last = 2},
                               {.bytes = 100, .first = 2, .last = 3}};
    peak = dt_plan_pack(chain, 3, A, DT_PLAN_SMALLEST);
    TAP_OK(peak == 256 && chain[0].offset == chain[2].offset && chain[1].offset != chain[0].offset,
           "a chain of three: the first and the third share bytes, peak %zu", peak);

    dt_plan_buffer disjoint[4];
    for (int i = 0; i < 4; i++)
        disjoint[i] = (dt_plan_buffer){.bytes = 1000, .first = 2 * i, .last = 2 * i + 1};
    peak = dt_plan_pack(disjoint, 4, A, DT_PLAN_SMALLEST);
    TAP_OK(peak == 1024 && disjoint[0].offset == 0 && disjoint[3].offset == 0,
           "disjoint lifetimes all reuse the same bytes: peak %zu", peak);

    dt_plan_buffer together[4];
    for (int i = 0; i < 4; i++)
        together[i] = (dt_plan_buffer){.bytes = 1000, .first = 0, .last = 5};
    peak = dt_plan_pack(together, 4, A, DT_PLAN_SMALLEST);
    TAP_OK(peak == 4096 && violations(together, 4, A, peak) == 0, "overlapping lifetimes stack: peak %zu", peak);
    together[2].offset = together[1].offset + 512;
    TAP_OK(violations(together, 4, A, peak) == 1, "(the brute-force checker sees a buffer moved over another)");

    dt_plan_buffer odd[5] = {{.bytes = 3, .first = 0, .last = 4},
                             {.bytes = 65, .first = 1, .last = 2},
                             {.bytes = 1, .first = 0, .last = 0},
                             {.bytes = 127, .first = 2, .last = 4},
                             {.bytes = 64, .first = 3, .last = 3}};
    peak = dt_plan_pack(odd, 5, A, DT_PLAN_SMALLEST);
    int aligned = peak % A == 0;
    for (int i = 0; i < 5; i++)
        aligned = aligned && odd[i].offset % A == 0;
    TAP_OK(aligned && violations(odd, 5, A, peak) == 0, "odd sizes: every offset and the peak are multiples of 64");
    peak = dt_plan_pack(odd, 5, 1, DT_PLAN_SMALLEST);
    TAP_OK(peak == used_end(odd, 5, 1) && violations(odd, 5, 1, peak) == 0 && peak < 3 + 65 + 1 + 127 + 64,
           "alignment 1: exact sizes, peak %zu", peak);

    /* lifetimes are inclusive: a buffer dying at step 3 and one born at 3 are live together */
    dt_plan_buffer touch[2] = {{.bytes = 64, .first = 0, .last = 3}, {.bytes = 64, .first = 3, .last = 5}};
    peak = dt_plan_pack(touch, 2, A, DT_PLAN_SMALLEST);
    TAP_OK(peak == 128 && touch[0].offset != touch[1].offset, "first and last steps are inclusive");

    dt_plan_buffer huge[2] = {{.bytes = SIZE_MAX - 10, .first = 0, .last = 1}, {.bytes = 64, .first = 0, .last = 1}};
    TAP_OK(dt_plan_pack(huge, 2, A, DT_PLAN_SMALLEST) == DT_PLAN_FAIL, "a size that overflows when aligned is refused");
    dt_plan_buffer big[2] = {{.bytes = SIZE_MAX / 2 + 64, .first = 0, .last = 1},
                             {.bytes = SIZE_MAX / 2 + 64, .first = 1, .last = 2}};
    TAP_OK(dt_plan_pack(big, 2, A, DT_PLAN_SMALLEST) == DT_PLAN_FAIL, "offsets that overflow are refused");
    big[1].first = 2;
    TAP_OK(dt_plan_pack(big, 2, A, DT_PLAN_SMALLEST) == round_up(SIZE_MAX / 2 + 64, A),
           "the same sizes at disjoint times fit");

    /* random problems, under every order: the brute-force checker finds nothing, the peak is
     * between the most bytes live at once and what the offsets use, the smallest packing is the
     * least of the three orders, and a rerun gives the same offsets */
    enum { PROBLEMS = 400, MAXN = 48 };
    dt_plan_buffer b[MAXN], again[MAXN];
    int bad = 0, below = 0, loose = 0, not_least = 0, unstable = 0, reused = 0;
    for (int t = 0; t < PROBLEMS; t++) {
        int n = (int)(rnd() % (MAXN + 1)), steps = 1 + (int)(rnd() % 40);
        size_t align = (t % 3 == 0) ? 1 : (size_t)1 << (rnd() % 8);
        for (int i = 0; i < n; i++) {
            int f = (int)(rnd() % (uint64_t)steps), l = f + (int)(rnd() % (uint64_t)(steps - f));
            size_t bytes = rnd() % 8 == 0 ? 0 : (size_t)(rnd() % 5000);
            b[i] = (dt_plan_buffer){.bytes = bytes, .first = f, .last = l};
        }
        size_t least = SIZE_MAX, peaks[4];
        for (int o = DT_PLAN_SMALLEST; o <= DT_PLAN_EARLIEST_FIRST; o++) {
            memcpy(again, b, sizeof b);
            peaks[o] = dt_plan_pack(b, n, align, (enum dt_plan_order)o);
            bad += violations(b, n, align, peaks[o]) != 0 || peaks[o] == DT_PLAN_FAIL;
            below += peaks[o] < max_live(b, n, align);
            loose += peaks[o] != used_end(b, n, align) || (align > 1 && peaks[o] % align);
            if (o > DT_PLAN_SMALLEST && peaks[o] < least)
                least = peaks[o];
            dt_plan_pack(again, n, align, (enum dt_plan_order)o);
            for (int i = 0; i < n; i++)
                unstable += again[i].offset != b[i].offset;
            if (o == DT_PLAN_SMALLEST) {
                size_t sum = 0;
                for (int i = 0; i < n; i++)
                    sum += round_up(b[i].bytes, align);
                reused += peaks[o] < sum;
            }
        }
        not_least += n > 0 && peaks[DT_PLAN_SMALLEST] != least;
    }
    TAP_OK(bad == 0, "%d random problems x 4 orders: no two live buffers overlap, all aligned (%d failures)",
           PROBLEMS, bad);
    TAP_OK(below == 0, "the peak is never below the most bytes live at one step (%d below)", below);
    TAP_OK(loose == 0, "the peak is exactly the end of the highest buffer, aligned (%d not)", loose);
    TAP_OK(not_least == 0, "DT_PLAN_SMALLEST keeps the least of the three orders (%d not)", not_least);
    TAP_OK(unstable == 0, "the same problem gives the same offsets (%d differ)", unstable);
    TAP_OK(reused > PROBLEMS / 2, "bytes are reused in most random problems (%d of %d)", reused, PROBLEMS);
    return tap_done();
}
