/* engine_check.c: libdt's named operations (dt.h) under mpirun, each result checked against what every
 * rank computes on its own. Run by tests/libdt/engine.sh with 1, 2 and 3 ranks and with the engine's
 * settings varied (DT_ALLREDUCE_STREAMS, DT_FUSION_THRESHOLD). Checks:
 *   - 40 all-reduces submitted in a different order on every rank (rotated by rank), some of which
 *     fuse: each equals the sum over ranks of known values;
 *   - every reduction on float32, prescale and postscale, the average;
 *   - a grouped all-reduce, a broadcast from the last rank, an all-gather with a first dimension
 *     that differs by rank, an all-to-all with uneven splits (and the splits received), a
 *     reduce-scatter with uneven rows;
 *   - a shape mismatch on one rank: fails on every rank with a line naming the tensor and the ranks,
 *     and the next operation still works;
 *   - join: rank 0 does one more all-reduce than the others, which have joined: its result is its
 *     own tensor (zeros from the others); join returns the last rank to join.
 * Prints "rank R of N: engine correct" or the first wrong check, exit 0 / 1. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libdt/dt.h"

static int bad;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond) && !bad++) {                                                                                       \
            printf("rank %d: ", dt_rank());                                                                            \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

static dt_tensor vec(void *p, int64_t n, dt_dtype t)
{
    dt_tensor x = {.data = p, .type = t, .ndim = 1, .device = DT_HOST};
    x.shape[0] = n;
    return x;
}

static dt_tensor mat(void *p, int64_t rows, int64_t cols, dt_dtype t)
{
    dt_tensor x = {.data = p, .type = t, .ndim = 2, .device = DT_HOST};
    x.shape[0] = rows;
    x.shape[1] = cols;
    return x;
}

/* "stall": rank 0 submits an operation no other rank submits: it fails on rank 0 after the timeout
 * (DT_COMM_TIMEOUT), naming the ranks that did not submit it; then every rank meets at a barrier */
static int stall(void)
{
    int r = dt_rank(), n = dt_size();
    if (r == 0) {
        float v = 1;
        dt_tensor t = vec(&v, 1, DT_FLOAT32);
        dt_handle *q;
        dt_allreduce_async("lonely", &t, &t, DT_SUM, 1, 1, &q);
        CHECK(dt_wait(q) != 0, "an operation no other rank submitted completed");
        printf("rank 0 stall: %s\n", dt_handle_error(q) ? dt_handle_error(q) : "(none)");
        dt_handle_free(q);
    } else {
        /* the barrier 1 s after the start: pending here while rank 0 waits for 'lonely' to time out (at
         * 2 s), then matched by rank 0's barrier at once, well within this one's own 2 s */
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
    CHECK(dt_barrier() == 0, "barrier after the stall");
    printf("rank %d of %d: %s\n", r, n, bad ? "WRONG" : "stall correct");
    dt_finalize();
    return bad != 0;
}

int main(int argc, char **argv)
{
    if (dt_init() != 0)
        return 1;
    if (argc > 1 && !strcmp(argv[1], "stall"))
        return stall();
    int r = dt_rank(), n = dt_size();
    char name[64];

    /* 40 tensors of 1 .. 40 * 37 elements, value (rank + 1) * (i + 1) + j % 5; submitted rotated */
    enum { T = 40 };
    float *x[T];
    dt_handle *h[T];
    for (int i = 0; i < T; i++) {
        x[i] = malloc((size_t)(i * 37 + 1) * sizeof(float));
        for (int j = 0; j <= i * 37; j++)
            x[i][j] = (float)((r + 1) * (i + 1) + j % 5);
    }
    for (int k = 0; k < T; k++) {
        int i = (k + 7 * r) % T;
        dt_tensor t = vec(x[i], i * 37 + 1, DT_FLOAT32);
        snprintf(name, sizeof name, "grad.%d", i);
        CHECK(dt_allreduce_async(name, &t, &t, DT_SUM, 1, 1, &h[i]) == 0, "allreduce_async %s refused", name);
    }
    float ranks_sum = (float)(n * (n + 1) / 2);
    for (int i = 0; i < T; i++) {
        CHECK(dt_wait(h[i]) == 0, "grad.%d failed: %s", i, dt_handle_error(h[i]));
        for (int j = 0; j <= i * 37; j++)
            CHECK(x[i][j] == ranks_sum * (float)(i + 1) + (float)(n * (j % 5)), "grad.%d[%d] = %g", i, j, x[i][j]);
        dt_handle_free(h[i]);
    }

    /* reductions on (rank + 2): min 2, max n + 1, product (n + 1)!, average; scale factors */
    static const dt_redop ops[] = {DT_MIN, DT_MAX, DT_PRODUCT, DT_AVG, DT_SUM};
    double fact = 1;
    for (int q = 0; q < n; q++)
        fact *= q + 2;
    const double want[] = {2, n + 1, fact, (n + 3) / 2.0, 0.5 * (n * (n + 3) / 2.0) * 3};
    for (int k = 0; k < 5; k++) {
        float v[3] = {(float)(r + 2), (float)(r + 2), (float)(r + 2)}, o[3];
        dt_tensor in = vec(v, 3, DT_FLOAT32), out = vec(o, 3, DT_FLOAT32);
        snprintf(name, sizeof name, "op.%d", k);
        dt_handle *q;
        double pre = ops[k] == DT_SUM ? 0.5 : 1, post = ops[k] == DT_SUM ? 3 : 1;
        dt_allreduce_async(name, &in, &out, ops[k], pre, post, &q);
        CHECK(dt_wait(q) == 0 && fabs(o[2] - want[k]) < 1e-4 * fabs(want[k]), "%s = %g, want %g", name, o[2], want[k]);
        CHECK(v[0] == (float)(r + 2), "%s changed its input", name);
        dt_handle_free(q);
    }

    /* grouped: two tensors, one handle */
    {
        double a[2] = {r, 1}, b[3] = {2 * r, 2, 3};
        dt_tensor in[2] = {vec(a, 2, DT_FLOAT64), vec(b, 3, DT_FLOAT64)};
        dt_handle *q;
        dt_grouped_allreduce_async("group", 2, in, in, DT_SUM, 1, 1, &q);
        double s = n * (n - 1) / 2.0;
        CHECK(dt_wait(q) == 0 && a[0] == s && a[1] == n && b[0] == 2 * s && b[2] == 3 * n, "grouped: %g %g %g %g",
              a[0], a[1], b[0], b[2]);
        dt_handle_free(q);
    }

    /* broadcast from the last rank, into a separate output */
    {
        int64_t v[4] = {r, r, r, r}, o[4] = {0};
        dt_tensor in = vec(v, 4, DT_INT64), out = vec(o, 4, DT_INT64);
        dt_handle *q;
        dt_broadcast_async("bcast", &in, &out, n - 1, &q);
        CHECK(dt_wait(q) == 0 && o[0] == n - 1 && o[3] == n - 1, "broadcast: %lld", (long long)o[0]);
        dt_handle_free(q);
    }

    /* all-gather: rank q gives q + 1 rows of 3, value 10 q + column */
    {
        int32_t v[3 * 8];
        for (int i = 0; i < (r + 1) * 3; i++)
            v[i] = 10 * r + i % 3;
        dt_tensor in = mat(v, r + 1, 3, DT_INT32), out;
        dt_handle *q;
        dt_allgather_async("gather", &in, &q);
        CHECK(dt_wait(q) == 0 && dt_output(q, &out) == 0, "allgather failed");
        CHECK(out.ndim == 2 && out.shape[0] == n * (n + 1) / 2 && out.shape[1] == 3, "allgather shape %lld",
              (long long)out.shape[0]);
        int32_t *g = out.data;
        for (int q2 = 0, row = 0; q2 < n && !bad; q2++)
            for (int k = 0; k <= q2; k++, row++)
                for (int c = 0; c < 3; c++)
                    CHECK(g[row * 3 + c] == 10 * q2 + c, "allgather row %d col %d = %d", row, c, g[row * 3 + c]);
        dt_handle_free(q);
    }

    /* all-to-all: rank r sends (d + 1) rows to rank d, valued 100 r + d */
    {
        int64_t splits[8], got[8], rows = 0;
        for (int d = 0; d < n; d++)
            rows += splits[d] = d + 1;
        float v[64];
        for (int d = 0, k = 0; d < n; d++)
            for (int i = 0; i < splits[d] * 2; i++)
                v[k++] = (float)(100 * r + d);
        dt_tensor in = mat(v, rows, 2, DT_FLOAT32), out;
        dt_handle *q;
        dt_alltoall_async("a2a", &in, splits, &q);
        CHECK(dt_wait(q) == 0 && dt_output(q, &out) == 0 && dt_received_splits(q, got) == 0, "alltoall failed");
        CHECK(out.shape[0] == (int64_t)n * (r + 1), "alltoall rows %lld", (long long)out.shape[0]);
        for (int s = 0; s < n; s++)
            CHECK(got[s] == r + 1, "alltoall: %lld rows from rank %d", (long long)got[s], s);
        float *g = out.data;
        for (int s = 0, k = 0; s < n && !bad; s++)
            for (int i = 0; i < (r + 1) * 2; i++, k++)
                CHECK(g[k] == (float)(100 * s + r), "alltoall element %d = %g", k, g[k]);
        dt_handle_free(q);
    }

    /* reduce-scatter of 2 n + 1 rows: rank q keeps 2 rows (3 for rank 0), each the sum of (rank + 1) * row */
    {
        int64_t rows = 2 * n + 1;
        float v[64];
        for (int i = 0; i < rows; i++)
            v[i] = (float)((r + 1) * i);
        dt_tensor in = vec(v, rows, DT_FLOAT32), out;
        dt_handle *q;
        dt_reducescatter_async("rs", &in, DT_SUM, 1, 1, &q);
        CHECK(dt_wait(q) == 0 && dt_output(q, &out) == 0, "reducescatter failed");
        int64_t mine = r == 0 ? 3 : 2, first = r == 0 ? 0 : 3 + 2 * (r - 1);
        if (n == 1)
            mine = rows, first = 0;
        CHECK(out.shape[0] == mine, "reducescatter rows %lld, want %lld", (long long)out.shape[0], (long long)mine);
        for (int i = 0; i < mine && !bad; i++)
            CHECK(((float *)out.data)[i] == ranks_sum * (float)(first + i), "reducescatter row %d", i);
        dt_handle_free(q);
    }

    /* a mismatch: the last rank gives 5 elements where the others give 4 */
    if (n > 1) {
        float v[5] = {1, 1, 1, 1, 1};
        dt_tensor in = vec(v, r == n - 1 ? 5 : 4, DT_FLOAT32);
        dt_handle *q;
        dt_allreduce_async("mismatched", &in, &in, DT_SUM, 1, 1, &q);
        CHECK(dt_wait(q) != 0, "a shape mismatch went through");
        const char *e = dt_handle_error(q);
        CHECK(e && strstr(e, "'mismatched'") && strstr(e, "shape") && strstr(e, "[5]") && strstr(e, "[4]"),
              "mismatch line: %s", e ? e : "(none)");
        printf("rank %d mismatch: %s\n", r, e ? e : "(none)");
        dt_handle_free(q);
        float one = 1;
        CHECK(dt_allreduce(&one, &one, 1, DT_FLOAT32, DT_SUM) == 0 && one == n, "after the mismatch: %g", one);
    }

    /* join: rank 0 all-reduces once more; the others have joined and give zeros */
    if (n > 1) {
        int last;
        if (r == 0) {
            float v[6] = {1, 2, 3, 4, 5, 6};
            dt_tensor t = vec(v, 6, DT_FLOAT32);
            dt_handle *q;
            dt_allreduce_async("after.join", &t, &t, DT_SUM, 1, 1, &q);
            CHECK(dt_wait(q) == 0 && v[0] == 1 && v[5] == 6, "allreduce beside joined ranks: %g %g", v[0], v[5]);
            dt_handle_free(q);
        }
        last = dt_join();
        CHECK(last == 0, "join returned %d, want 0 (the last to join)", last);
    }
    CHECK(dt_barrier() == 0, "barrier");

    for (int i = 0; i < T; i++)
        free(x[i]);
    printf("rank %d of %d: %s\n", r, n, bad ? "WRONG" : "engine correct");
    dt_finalize();
    return bad != 0;
}
