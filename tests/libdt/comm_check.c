/* comm_check.c: run by tests/libdt/comm_mpi.sh, alone (the one-rank communicator) and under mpirun
 * (MPI's). Checks the host communicator (dt_comm_host) against values each rank computes alone,
 * from the ranks' numbers and the element indices, with no communication:
 *   allgatherv  uneven counts (every third rank sends nothing), gaps between the parts left untouched,
 *               for every element width, and once in place;
 *   alltoallv   uneven splits (some zero), gaps untouched, for every element width;
 *   allreduce   SUM, PRODUCT, MIN and MAX on float32, float16, bfloat16, int8, int32, int64, float64
 *               (values whose products and sums are exact in every type, so results compare bit
 *               for bit), DT_AVG on float32, and DT_AVG refused on int8 (DT_ERR_STATE, one line).
 * Prints "rank R of S: all N checks correct" and exits 0, or a line per wrong element and exits 1. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libdt/comm.h"
#include "libdt/launch.h"
#include "util/check.h"
#include "util/half.h"
#include "util/log.h"

static int checks, failures;

static void expect(int ok, const char *what, size_t i, double got, double want)
{
    if (ok)
        return;
    if (failures++ < 20)
        fprintf(stderr, "WRONG: %s element %zu: got %g, expected %g\n", what, i, got, want);
}

/* ---- moving elements: allgatherv, alltoallv ------------------------------------------------------ */

/* byte j of element k that rank `from` sends to rank `to` (to = -1: to everyone) */
static unsigned char pattern(int from, int to, size_t k, size_t j)
{
    return (unsigned char)(from * 53 + (to + 1) * 17 + (int)k * 5 + (int)j * 3 + 1);
}

#define GAP 0xA5 /* what the gaps between parts hold before and must hold after */

/* counts[r] = 0 for every third rank (r % 3 == 1), else r + 2; a gap of one element after each part */
static void allgatherv_layout(int size, size_t *counts, size_t *displs)
{
    size_t at = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = r % 3 == 1 ? 0 : (size_t)r + 2;
        displs[r] = at;
        at += counts[r] + 1;
    }
}

static int check_allgatherv(dt_comm *c, dt_dtype t, int in_place)
{
    size_t es = dt_dtype_size(t), counts[64], displs[64];
    allgatherv_layout(c->size, counts, displs);
    size_t total = displs[c->size - 1] + counts[c->size - 1] + 1;
    unsigned char *recv = malloc(total * es), *send = malloc((counts[c->rank] + 1) * es);
    if (!recv || !send)
        return DT_ERR_NOMEM;
    memset(recv, GAP, total * es);
    unsigned char *mine = in_place ? recv + displs[c->rank] * es : send;
    for (size_t k = 0; k < counts[c->rank]; k++)
        for (size_t j = 0; j < es; j++)
            mine[k * es + j] = pattern(c->rank, -1, k, j);
    char what[64];
    snprintf(what, sizeof what, "allgatherv of %s%s", dt_dtype_name(t), in_place ? " in place" : "");
    int rc = c->ops->allgatherv(c, mine, counts[c->rank], recv, counts, displs, t);
    checks++;
    if (rc != DT_OK) {
        fprintf(stderr, "WRONG: %s failed (%d)\n", what, rc);
        failures++;
    } else {
        size_t at = 0; /* walk every byte: each belongs to a rank's part or to a gap */
        for (int r = 0; r < c->size; r++) {
            for (size_t k = 0; k < counts[r]; k++)
                for (size_t j = 0; j < es; j++, at++)
                    expect(recv[at] == pattern(r, -1, k, j), what, at / es, recv[at], pattern(r, -1, k, j));
            for (size_t j = 0; j < es; j++, at++)
                expect(recv[at] == GAP, what, at / es, recv[at], GAP);
        }
    }
    free(recv);
    free(send);
    return DT_OK;
}

/* elements rank `from` sends to rank `to`: 0, 1 or 2, some zero among 3 ranks, 1 for a rank alone */
static size_t split(int from, int to)
{
    return (size_t)((from + 2 * to + 1) % 3);
}

static int check_alltoallv(dt_comm *c, dt_dtype t)
{
    size_t es = dt_dtype_size(t), sc[64], sd[64], rc_[64], rd[64], sat = 0, rat = 0;
    for (int r = 0; r < c->size; r++) { /* a gap of one element before each part */
        sc[r] = split(c->rank, r);
        sd[r] = sat + 1;
        sat += sc[r] + 1;
        rc_[r] = split(r, c->rank);
        rd[r] = rat + 1;
        rat += rc_[r] + 1;
    }
    unsigned char *send = malloc(sat * es), *recv = malloc(rat * es);
    if (!send || !recv)
        return DT_ERR_NOMEM;
    memset(send, 0x5A, sat * es);
    memset(recv, GAP, rat * es);
    for (int r = 0; r < c->size; r++)
        for (size_t k = 0; k < sc[r]; k++)
            for (size_t j = 0; j < es; j++)
                send[(sd[r] + k) * es + j] = pattern(c->rank, r, k, j);
    char what[64];
    snprintf(what, sizeof what, "alltoallv of %s", dt_dtype_name(t));
    int rc = c->ops->alltoallv(c, send, sc, sd, recv, rc_, rd, t);
    checks++;
    if (rc != DT_OK) {
        fprintf(stderr, "WRONG: %s failed (%d)\n", what, rc);
        failures++;
    } else {
        size_t at = 0;
        for (int r = 0; r < c->size; r++) {
            for (size_t j = 0; j < es; j++, at++)
                expect(recv[at] == GAP, what, at / es, recv[at], GAP);
            for (size_t k = 0; k < rc_[r]; k++)
                for (size_t j = 0; j < es; j++, at++)
                    expect(recv[at] == pattern(r, c->rank, k, j), what, at / es, recv[at], pattern(r, c->rank, k, j));
        }
    }
    free(send);
    free(recv);
    return DT_OK;
}

/* ---- reductions ---------------------------------------------------------------------------------- */

#define N 37

/* rank r's element i: a multiple of 0.5 in [-1.5, 1.5] for floating types, an integer in [-3, 3] for
 * the others (uint8 is not reduced here); products of up to a few ranks stay exact (and within int8) */
static double value(int r, size_t i, int integer)
{
    int k = (r * 5 + (int)i * 3) % 7 - 3;
    return integer ? k : k * 0.5;
}

static int is_int(dt_dtype t)
{
    return t == DT_INT8 || t == DT_INT32 || t == DT_INT64 || t == DT_UINT8;
}

static void store(dt_dtype t, void *buf, size_t i, double v)
{
    switch (t) {
    case DT_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case DT_FLOAT16: ((uint16_t *)buf)[i] = dt_f32_to_f16((float)v); break;
    case DT_BFLOAT16: ((uint16_t *)buf)[i] = dt_f32_to_bf16((float)v); break;
    case DT_FLOAT64: ((double *)buf)[i] = v; break;
    case DT_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case DT_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case DT_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case DT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    }
}

static double load(dt_dtype t, const void *buf, size_t i)
{
    switch (t) {
    case DT_FLOAT32: return ((const float *)buf)[i];
    case DT_FLOAT16: return dt_f16_to_f32(((const uint16_t *)buf)[i]);
    case DT_BFLOAT16: return dt_bf16_to_f32(((const uint16_t *)buf)[i]);
    case DT_FLOAT64: return ((const double *)buf)[i];
    case DT_INT8: return ((const int8_t *)buf)[i];
    case DT_INT32: return ((const int32_t *)buf)[i];
    case DT_INT64: return (double)((const int64_t *)buf)[i];
    case DT_UINT8: return ((const uint8_t *)buf)[i];
    }
    return 0;
}

static const char *op_name(dt_redop op)
{
    static const char *const n[] = {"SUM", "AVG", "MAX", "MIN", "PRODUCT"};
    return n[op];
}

/* in place when in_place, else from a separate send buffer */
static int check_allreduce(dt_comm *c, dt_dtype t, dt_redop op, int in_place)
{
    size_t es = dt_dtype_size(t);
    unsigned char *send = malloc(N * es), *recv = malloc(N * es);
    if (!send || !recv)
        return DT_ERR_NOMEM;
    int integer = is_int(t);
    for (size_t i = 0; i < N; i++)
        store(t, in_place ? recv : send, i, value(c->rank, i, integer));
    int rc = c->ops->allreduce(c, in_place ? recv : send, recv, N, t, op);
    char what[64];
    snprintf(what, sizeof what, "allreduce %s of %s%s", op_name(op), dt_dtype_name(t), in_place ? " in place" : "");
    checks++;
    if (rc != DT_OK) {
        fprintf(stderr, "WRONG: %s failed (%d)\n", what, rc);
        failures++;
    } else {
        for (size_t i = 0; i < N; i++) {
            double want = value(0, i, integer);
            for (int r = 1; r < c->size; r++) {
                double v = value(r, i, integer);
                want = op == DT_PRODUCT ? want * v
                       : op == DT_MIN   ? (v < want ? v : want)
                       : op == DT_MAX   ? (v > want ? v : want)
                                        : want + v;
            }
            if (op == DT_AVG)
                want /= c->size;
            unsigned char typed[8]; /* the expected value as the type holds it (an average is rounded) */
            store(t, typed, 0, want);
            want = load(t, typed, 0);
            expect(load(t, recv, i) == want, what, i, load(t, recv, i), want);
        }
    }
    free(send);
    free(recv);
    return DT_OK;
}

int main(void)
{
    dt_log_init();
    double timeout = getenv("DT_TIMEOUT") ? atof(getenv("DT_TIMEOUT")) : 30;
    dt_launch l;
    if (dt_launch_init(&l) != DT_OK)
        return 1;
    dt_comm *c = NULL;
    if (dt_comm_host(&c, &l, timeout) != DT_OK)
        return 1;
    if (c->size > 64) {
        fprintf(stderr, "comm_check: at most 64 ranks\n");
        return 1;
    }
    int rc = DT_OK;
    static const dt_dtype widths[] = {DT_INT8, DT_FLOAT16, DT_INT32, DT_FLOAT64}; /* 1, 2, 4, 8 bytes */
    for (size_t k = 0; k < sizeof widths / sizeof *widths && rc == DT_OK; k++) {
        rc = check_allgatherv(c, widths[k], 0);
        if (rc == DT_OK)
            rc = check_alltoallv(c, widths[k]);
    }
    if (rc == DT_OK)
        rc = check_allgatherv(c, DT_FLOAT32, 1);
    static const dt_dtype types[] = {DT_FLOAT32, DT_FLOAT16, DT_BFLOAT16, DT_INT8, DT_INT32, DT_INT64, DT_FLOAT64};
    static const dt_redop ops[] = {DT_SUM, DT_PRODUCT, DT_MIN, DT_MAX};
    for (size_t k = 0; k < sizeof types / sizeof *types && rc == DT_OK; k++)
        for (size_t o = 0; o < sizeof ops / sizeof *ops && rc == DT_OK; o++)
            rc = check_allreduce(c, types[k], ops[o], (k + o) % 2);
    if (rc == DT_OK)
        rc = check_allreduce(c, DT_FLOAT32, DT_AVG, 0);
    if (rc == DT_OK) { /* refused on every rank alike, before any communication */
        int8_t x[4] = {1, 2, 3, 4};
        int r = c->ops->allreduce(c, x, x, 4, DT_INT8, DT_AVG);
        checks++;
        if (r != DT_ERR_STATE) {
            fprintf(stderr, "WRONG: allreduce AVG of int8 returned %d, expected DT_ERR_STATE (%d)\n", r, DT_ERR_STATE);
            failures++;
        }
    }
    if (rc == DT_OK && c->ops->barrier(c) != DT_OK) /* the communicator still works after the refusal */
        rc = DT_ERR_STATE;
    if (rc != DT_OK) {
        fprintf(stderr, "comm_check: rank %d stopped (%d)\n", c->rank, rc);
        failures++;
    }
    if (!failures)
        printf("rank %d of %d: all %d checks correct\n", c->rank, c->size, checks);
    else
        printf("rank %d of %d: %d wrong\n", c->rank, c->size, failures);
    fflush(stdout);
    dt_comm_free(c);
    dt_launch_finalize(&l);
    return failures ? 1 : 0;
}
