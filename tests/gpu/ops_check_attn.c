/* ops_check_attn.c: ops_check's ViT ops (src/nn/cuda/attn.cu): the tokens (tokens_fwd, tokens_bwd) and
 * attention's core (attn_fwd, attn_bwd and the planning op attn_scratch). The rules are in ops_check.c's
 * top comment. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_check.h"

typedef struct tokens_case {
    const char *name;
    int n, np, d;
} tokens_case;

static const tokens_case TOKENS_CASES[] = {
    {"n2 np196 d768 (vit-b)", 2, 196, 768},
    {"n5 np5 d7 (odd)", 5, 5, 7},
};
static const tokens_case TOKENS_QUICK = {"n3 np5 d7 (quick)", 3, 5, 7};

/* tokens_fwd and tokens_bwd: x, y, dx, dy of the row's type dt, cls, pos and their gradients of pdt
 * (fp32, or the row's type: O3); the backward with both flags, both off, and dx NULL. The forward and
 * dx are one add or a copy (bits); dcls and dpos sums over the images (the contract allows fp32 or
 * wider: 1e-4) */
static void test_tokens(const tokens_case *tc, int dt, int o3)
{
    if (!unit("tokens [%s] %s%s", tc->name, DTYPE_NAME[dt], o3 ? " O3" : ""))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "%s%s", tc->name, o3 ? ", O3" : "");
    const int n = tc->n, np = tc->np, d = tc->d, pdt = o3 ? dt : F32;
    const int64_t nx = (int64_t)n * np * d, ny = (int64_t)n * (np + 1) * d, npos = (int64_t)(np + 1) * d;
    const dt_dtype T = ty(dt), P = ty(pdt);
    plan_scratch(0); /* no planning op: the ops need no scratch */
    float *x = h_randn(nx, 0, 1, dt), *cls = h_randn(d, 0, 0.5, pdt), *pos = h_randn(npos, 0, 0.5, pdt);
    void *Dx = d_from(x, nx, dt), *Dcls = d_from(cls, d, pdt), *Dpos = d_from(pos, npos, pdt);
    float *y = h_new(ny);
    void *Dy = d_poisoned(ny, dt);
    REF->tokens_fwd(n, np, d, x, S32, cls, pos, S32, y, S32);
    DEV->tokens_fwd(n, np, d, Dx, T, Dcls, Dpos, P, Dy, T);
    check_row(dt, dt, shape, Dy, y, ny, M_BITS, "tokens_fwd y");

    float *dy = h_randn(ny, 0, 1, dt);
    void *Ddy = d_from(dy, ny, dt);
    static const struct {
        const char *name;
        int acc_dx, acc_params, dx;
    } v[] = {{"tokens_bwd", 0, 0, 1}, {"tokens_bwd acc", 1, 1, 1}, {"tokens_bwd (dx NULL)", 0, 0, 0}};
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        /* an accumulating output starts from the same random values on both sides, an overwritten one
         * from zeros (reference) and the poison (device) */
        float *dx = v[k].acc_dx ? h_randn(nx, 0, 1, dt) : h_new(nx);
        float *dcls = v[k].acc_params ? h_randn(d, 0, 1, pdt) : h_new(d);
        float *dpos = v[k].acc_params ? h_randn(npos, 0, 1, pdt) : h_new(npos);
        void *Ddx = v[k].acc_dx ? d_from(dx, nx, dt) : d_poisoned(nx, dt);
        void *Ddcls = v[k].acc_params ? d_from(dcls, d, pdt) : d_poisoned(d, pdt);
        void *Ddpos = v[k].acc_params ? d_from(dpos, npos, pdt) : d_poisoned(npos, pdt);
        REF->tokens_bwd(n, np, d, dy, S32, v[k].dx ? dx : NULL, S32, dcls, dpos, S32, v[k].acc_dx, v[k].acc_params);
        DEV->tokens_bwd(n, np, d, Ddy, T, v[k].dx ? Ddx : NULL, T, Ddcls, Ddpos, P, v[k].acc_dx, v[k].acc_params);
        if (v[k].dx) {
            check_row(dt, dt, shape, Ddx, dx, nx, M_BITS, "%s dx", v[k].name);
        }
        check_row(dt, pdt, shape, Ddcls, dcls, d, M_RED, "%s dcls", v[k].name);
        check_row(dt, pdt, shape, Ddpos, dpos, npos, M_RED, "%s dpos", v[k].name);
    }
    release();
    planned_row("tokens_fwd, tokens_bwd allocate nothing", dt, shape);
}

typedef struct attn_case {
    const char *name;
    int n, s, heads, dh;
    int y32; /* fp16/bf16: also with y and dy fp32 (qkv and dqkv of the row's type) */
} attn_case;

/* the device runs a block per row of P: s = 300 has rows longer than a block (256 threads) */
static const attn_case ATTN_CASES[] = {
    {"n2 s197 h12 dh64 (vit-b)", 2, 197, 12, 64, 0},
    {"n3 s5 h3 dh7 (odd)", 3, 5, 3, 7, 1},
    {"n2 s300 h2 dh16 (long rows)", 2, 300, 2, 16, 0},
};
static const attn_case ATTN_QUICK = {"n3 s5 h3 dh7 (quick)", 3, 5, 3, 7, 0};

/* columns part*D .. part*D + D - 1 of rows [rows, 3D] (qkv's layout): dq, dk or dv of a dqkv */
static float *qkv_part(const float *a, int64_t rows, int D, int part)
{
    float *h = h_new(rows * D);
    for (int64_t r = 0; r < rows; r++)
        memcpy(h + r * D, a + r * 3 * D + (int64_t)part * D, (size_t)D * sizeof(float));
    return h;
}

/* attn_fwd and attn_bwd: qkv and dqkv of the row's type dt, y and dy of ydt (the row's type, or fp32:
 * "(y fp32)"), p fp32. The forward's y and p; the backward on each side's own p (as a model runs it),
 * overwriting and accumulating, dqkv compared as its three parts dq, dk, dv (each against its own
 * scale). Queries and keys with sd 1.5 give scores of sd ~2.25: softmax rows far from uniform. The
 * CPU's attn_fwd needs its scratch reserved (its thread slots), as a planned model has it. */
static void test_attn(const attn_case *ac, int dt, int y32)
{
    if (!unit("attn [%s] %s%s", ac->name, DTYPE_NAME[dt], y32 ? " y32" : ""))
        return;
    char shape[64], name[64];
    snprintf(shape, sizeof shape, "%s", ac->name);
    const int n = ac->n, s = ac->s, heads = ac->heads, dh = ac->dh, D = heads * dh, ydt = y32 ? F32 : dt;
    const int64_t rows = (int64_t)n * s, nqkv = rows * 3 * D, ny = rows * D, np = (int64_t)n * heads * s * s;
    const dt_dtype T = ty(dt), Y = ty(ydt);
    const char *suffix = y32 ? " (y fp32)" : "";
    if (REF->reserve_scratch(REF->attn_scratch(n, s, heads, dh, S32, S32)) != DT_OK) {
        fprintf(stderr, "FATAL: the reference's scratch for attention\n");
        exit(1);
    }
    plan_scratch(DEV->attn_scratch(n, s, heads, dh, T, Y));
    float *qkv = h_randn(nqkv, 0, 1.5, dt);
    void *Dqkv = d_from(qkv, nqkv, dt);
    float *y = h_new(ny), *p = h_new(np);
    void *Dy = d_poisoned(ny, ydt);
    float *Dp = d_poisoned(np, F32);
    REF->attn_fwd(n, s, heads, dh, qkv, S32, y, S32, p);
    DEV->attn_fwd(n, s, heads, dh, Dqkv, T, Dy, Y, Dp);
    check_row(dt, ydt, shape, Dy, y, ny, M_RED, "attn_fwd y%s", suffix);
    check_row(dt, F32, shape, Dp, p, np, M_RED, "attn_fwd p%s", suffix);

    float *dy = h_randn(ny, 0, 1, ydt);
    void *Ddy = d_from(dy, ny, ydt);
    static const char *const PART[] = {"dq", "dk", "dv"};
    for (int acc = 0; acc <= 1; acc++) {
        float *dqkv = acc ? h_randn(nqkv, 0, 1, dt) : h_new(nqkv);
        void *Ddqkv = acc ? d_from(dqkv, nqkv, dt) : d_poisoned(nqkv, dt);
        REF->attn_bwd(n, s, heads, dh, qkv, S32, p, dy, S32, dqkv, acc);
        DEV->attn_bwd(n, s, heads, dh, Dqkv, T, Dp, Ddy, Y, Ddqkv, acc);
        ref_out(dqkv, nqkv, dt);
        const float *got = d_result(Ddqkv, nqkv, dt);
        for (int part = 0; part < 3; part++) {
            snprintf(name, sizeof name, "attn_bwd%s %s%s", acc ? " acc" : "", PART[part], suffix);
            cmp_f32(name, dt, shape, qkv_part(got, rows, D, part), qkv_part(dqkv, rows, D, part), ny, M_RED);
        }
    }
    release();
    snprintf(name, sizeof name, "attn_scratch reserved, ops allocate nothing%s", suffix);
    planned_row(name, dt, shape);
}

/* group "attn": ViT's token ops and attention */
static void vit(int dt_unused)
{
    (void)dt_unused;
    if (QUICK) {
        ALL_DTYPES
        {
            test_tokens(&TOKENS_QUICK, dt, 0);
            test_attn(&ATTN_QUICK, dt, 0);
        }
        return;
    }
    for (size_t i = 0; i < sizeof TOKENS_CASES / sizeof TOKENS_CASES[0]; i++)
        ALL_DTYPES
        {
            test_tokens(&TOKENS_CASES[i], dt, 0);
            if (dt != F32)
                test_tokens(&TOKENS_CASES[i], dt, 1);
        }
    for (size_t i = 0; i < sizeof ATTN_CASES / sizeof ATTN_CASES[0]; i++)
        ALL_DTYPES
        {
            test_attn(&ATTN_CASES[i], dt, 0);
            if (dt != F32 && ATTN_CASES[i].y32)
                test_attn(&ATTN_CASES[i], dt, 1);
        }
}

static const ops_test TESTS[] = {
    {ST_ATTN, "attn", vit},
};
OPS_FAMILY(OPS_ATTN, "attn.cu", TESTS);
