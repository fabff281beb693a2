/* ops_check_layout.c: ops_check's channel slices (chan_copy: src/nn/cuda/layout.cu). The rules are in
 * ops_check.c's top comment. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>

#include "ops_check.h"

/* A concatenation along channels both ways: a [rows, c1] and b [rows, c2] into the channels pad ..
 * pad + c1 + c2 - 1 of y [rows, c1 + c2 + 2 pad] (the channels outside keep their values), then the
 * slices of a gradient dy of y's shape back into da (added into) and db (overwritten). Both sides of
 * the row's type; then, in fp16/bf16 rows, the sources fp32 ("from fp32") or the destinations
 * ("to fp32"). Channels and offsets multiples of 8 take the device's 8-wide path, the others its
 * scalar one; an unconverted overwrite is a 2-D copy of the bytes. */
static void test_chan_copy(int dt)
{
    if (!unit("chan_copy %s", DTYPE_NAME[dt]))
        return;
    static const struct {
        const char *name;
        int64_t rows;
        int c1, c2, pad;
    } cases[] = {{"rows 3136 64+32 at 8 of 112", 3136, 64, 32, 8}, {"rows 1001 3+5 at 1 of 10", 1001, 3, 5, 1}};
    static const struct {
        const char *suffix;
        int s32, d32;
    } tv[] = {{"", 0, 0}, {" from fp32", 1, 0}, {" to fp32", 0, 1}};
    for (size_t i = 0; i < (QUICK ? 1 : sizeof cases / sizeof cases[0]); i++)
        for (int k = 0; k < (dt == F32 ? 1 : 3); k++) {
            const int64_t rows = cases[i].rows;
            const int c1 = cases[i].c1, c2 = cases[i].c2, pad = cases[i].pad, w = c1 + c2 + 2 * pad;
            const int st = tv[k].s32 ? F32 : dt, to = tv[k].d32 ? F32 : dt;
            const dt_dtype S = ty(st), D = ty(to);
            float *a = h_randn(rows * c1, 0, 1, st), *b = h_randn(rows * c2, 0, 1, st);
            float *y = h_randn(rows * w, 0, 1, to); /* the channels outside keep these */
            void *Da = d_from(a, rows * c1, st), *Db = d_from(b, rows * c2, st), *Dy = d_from(y, rows * w, to);
            REF->chan_copy(rows, c1, a, c1, 0, S32, y, w, pad, S32, 0);
            REF->chan_copy(rows, c2, b, c2, 0, S32, y, w, pad + c1, S32, 0);
            DEV->chan_copy(rows, c1, Da, c1, 0, S, Dy, w, pad, D, 0);
            DEV->chan_copy(rows, c2, Db, c2, 0, S, Dy, w, pad + c1, D, 0);
            check_row(dt, to, cases[i].name, Dy, y, rows * w, M_BITS, "chan_copy concat%s", tv[k].suffix);
            float *dy = h_randn(rows * w, 0, 1, st), *da = h_randn(rows * c1, 0, 1, to), *db = h_new(rows * c2);
            void *Ddy = d_from(dy, rows * w, st), *Dda = d_from(da, rows * c1, to), *Ddb = d_poisoned(rows * c2, to);
            REF->chan_copy(rows, c1, dy, w, pad, S32, da, c1, 0, S32, 1);
            REF->chan_copy(rows, c2, dy, w, pad + c1, S32, db, c2, 0, S32, 0);
            DEV->chan_copy(rows, c1, Ddy, w, pad, S, Dda, c1, 0, D, 1);
            DEV->chan_copy(rows, c2, Ddy, w, pad + c1, S, Ddb, c2, 0, D, 0);
            check_row(dt, to, cases[i].name, Dda, da, rows * c1, M_BITS, "chan_copy acc slice%s", tv[k].suffix);
            check_row(dt, to, cases[i].name, Ddb, db, rows * c2, M_BITS, "chan_copy slice%s", tv[k].suffix);
            release();
        }
}

static const ops_test TESTS[] = {
    {ST_CHAN_COPY, "chan_copy", test_chan_copy},
};
OPS_FAMILY(OPS_LAYOUT, "layout.cu", TESTS);
