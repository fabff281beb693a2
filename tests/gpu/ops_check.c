/* ops_check.c: every op of the CUDA backend's table against the CPU backend, then whole-model
 * training steps on both. Built in CUDA builds only; run by tests/gpu/check.sh on a GPU machine.
 *
 *   ops_check [--seed N] [--only GROUP] [--no-model] [--quick] [--list] [--backend cuda|cpu] [--verbose]
 *             [--model ARCH] [--model-batch N] [--model-size S] [--no-fork]
 *
 * GROUP: mem, conv, bn, relu, add, copy_grad, scale, fill, sgd, adam, rmsprop, ema_update, tensor_sumsq, lars,
 * lamb, act, chanmul, maxpool, avgpool, linear, flatten, ln, chan_copy, attn (ViT's tokens_* and attn_*),
 * slice (conv, BN and the pools on a channel slice of a wider tensor: ys, xs), dropout, sdepth, xent,
 * round_half, unscale_check, normalize_u8, step_end or model (a test runs when its group's name contains GROUP).
 * Without a usable GPU it prints "SKIP: no GPU" and exits 77. Otherwise it prints one row per op,
 * variant and dtype, then the failing rows again, one line each ("  FAILED op type shape: why"), and
 * last "ops_check: N rows, M failed (seed S)"; it exits 1 when any row fails (0 when all pass, 2 on a
 * bad command line). A failing CUDA, cuDNN or cuBLAS call costs the rows of its op, not the run, and
 * a crash the unit it happened in ("units, faults and processes" below: the rows run in child
 * processes; DT_OPS_CHECK_FAULT plants a fault; --no-fork keeps one process).
 * --quick: every op once in fp32, fp16 and bf16 (the 2-byte elements' indexing and vector paths), on
 * small shapes: convolutions in fp32 (and, in the slice group, all three), BN in fp32 at 37 channels
 * (the scalar paths) and in fp16 and bf16 at 40 (bn.cu's 8-wide paths), cuDNN's algorithms chosen by
 * its heuristics; no model but one graph row (resnet8 at O2, batch 8, 16x16, unless --model-batch and
 * --model-size say otherwise): for compute-sanitizer, which slows kernels 10-100x.
 * --list: prints each row the same options would check (op, type, shape; no result), then
 * "ops_check: N rows", and exits 0, without touching CUDA (it runs on a machine with no GPU): the
 * tests run on a "dry" backend whose ops do nothing and which stores fp32, fp16 and bf16, as the
 * CUDA backend does, so the rows are exactly those of a real run.
 * The table's members and the ops to cover come from nn/backend.h's list (DT_OPS): a row checks
 * that the table is complete, one that its storage_types has fp16 and bf16 (the rows of a type it
 * does not store are not run), and (without --only) one that every op of the list had a row.
 * --backend cpu checks dt_backend_cpu instead (oneDNN's convolutions where built, else the same
 * code as the reference; its graph table, so that the graph rows run): a check of this program
 * itself, runnable without a GPU (tests/gpu/rehearse.sh runs it with a planted fault).
 *
 * What is compared. The reference is the CPU: dt_backend_cpu_ref for convolutions (im2col + BLAS),
 * dt_backend_cpu for everything else, on host memory. The device op gets the same random inputs
 * (dt_rng, seeded by --seed), through mem_put; its outputs come back through mem_get. Before an op
 * that overwrites, every device output is poisoned with a quiet NaN with a payload that neither a
 * conversion nor an op makes: 0x7fc0dead in fp32 storage, 0x7e5d in fp16, 0x7fad in bf16 (POISON_*),
 * so an element the op never writes fails (and is reported as such); an accumulating variant starts
 * from the same random non-zero contents on both sides. In-place use (relu, add, the gradient of
 * relu) is checked as the model uses it.
 *
 * dtypes. Rows of type fp32, fp16 and bf16 (--quick: fp32 and fp16). fp32: every operand fp32. fp16 and
 * bf16: the device stores them for real (nn/backend.h's type rule): each typed operand of the op is
 * a device array of 16-bit elements and the op is called with DT_FLOAT16 / DT_BFLOAT16 for it. Its
 * values are drawn in fp32 and rounded to the type on the host (round_half), uploaded converted to
 * 16-bit elements (util/half.h; exact: an upload of a value the type does not hold stops this
 * program, a bug of the test), and results come back as 16-bit elements widened to fp32 (exact).
 * Which operands are typed follows each op's signature in nn/backend.h:
 *   - convolutions, linear, pools, relu, act, flatten, dropout, sdepth, scale, fill, unscale_check,
 *     xent's logits and dlogits, normalize_u8's output: every typed operand of the row's type;
 *   - chanmul: x, s, y (dy, dx, ds) of the row's type; then, in fp16/bf16 rows, s (and ds) fp32
 *     ("(s fp32)");
 *   - BN: x, y, dx, dy (and bn_add_relu's residual and its gradient) of the row's type, its
 *     parameters, running statistics and their gradients fp32, as under keep_batchnorm_fp32 (O2's
 *     default); then, for the first three cases, those of the row's type too (shape "..., O3": O3's
 *     BN); the saved state fp32 always;
 *   - LN: as BN, x, y, dx, dy of the row's type, gamma, beta and their gradients fp32, then (the cases
 *     marked o3) of the row's type too ("..., O3"); the saved means and rstds fp32;
 *   - tokens: x, y, dx, dy of the row's type, cls, pos and their gradients fp32, then of the row's type
 *     too ("..., O3");
 *   - attention: qkv, dqkv, y and dy of the row's type, then (the cases marked y32) y and dy fp32
 *     ("(y fp32)"); the probabilities p fp32;
 *   - sgd: p and g of the row's type (a model without master weights), then p fp32 and g of the row's
 *     type (name "(p fp32)": O2's fp32 master weights, train/optim.c); the momentum buffer fp32;
 *   - add_fwd: all three operands of the row's type, then each in turn fp32 ("(a fp32)" ...);
 *   - copy_grad and chan_copy: both sides of the row's type, then converting "from fp32" and "to fp32",
 *     overwriting and accumulating;
 *   - masks, argmax uint8, labels int32, scalars blocks as they are; round_half works on fp32 arrays
 *     (its rows have no type).
 * The reference is the emulation: the CPU op on fp32 host arrays holding the same (rounded) values,
 * each output then rounded to its storage type (round_half; accumulating: the rounded fp32 sum).
 * That is what real reduced storage gives, bit for bit (nn/backend.h's type rule, shown for
 * dt_backend_cpu by tests/unit/test_ops_typed.c); the one freedom is a convolution's or linear
 * layer's summation order on half operands (below).
 *
 * Errors. max abs = max |got - want|. max rel = max |got - want| / max(|want|, floor), with
 * floor = the RMS of the reference tensor: an element far smaller than the tensor's typical size
 * (a sum that cancels to near zero) is judged against that size, so summation order does not show
 * up as a huge relative error, while any error large on the tensor's own scale does. Non-finite
 * values must match exactly (NaN with NaN, inf with the same inf). Rows compared as bit patterns
 * compare every non-NaN bit for bit, and a NaN in fp32 rows too (payload and sign), but in fp16 and
 * bf16 rows any NaN matches any NaN: the device's hardware conversions give a canonical NaN where
 * util/half.c keeps payload bits.
 *
 * Tolerances (the "tol" column):
 *   0, bits    copies (copy_grad's and chan_copy's conversions too), flatten, relu, add (mixed types too), scale,
 *              tokens_fwd and tokens_bwd's dx,
 *              fill, max pool's values and window positions and its gradient where windows do not
 *              overlap, dropout's and sdepth's masks (and sdepth's = dropout's first n), round_half,
 *              unscale_check (its flag, and g left unchanged), step_end (the whole scalars block,
 *              after every step), xent's hits and counts: each
 *              result is one IEEE operation or none, so any correct implementation gives the same
 *              bits ("bits": compared as bit patterns, so +0/-0 and (fp32) NaN payloads count; "0":
 *              compared as values). In fp16 and bf16 rows too: one operation in fp32 followed by one
 *              rounding to the type is as deterministic. Bits too: the slice group's BN and pool
 *              results against the same op packed on the same backend (the same kernels summing in
 *              the same order, only the row offsets moved), and the channels outside a slice.
 *   1e-5       element-wise arithmetic of a few operations (SGD, dropout's and sdepth's scaling,
 *              normalize_u8, BN inference, gradients of pools summing a few overlapping windows,
 *              chanmul's forward and dx, act's relu6, hardsigmoid and hardswish both ways): fp32
 *              rounds each to 6e-8, and a device compiler contracting a*b+c into one FMA (nvcc does
 *              by default; our C code is built with -ffp-contract=off; hardswish's dy*(x/3+1/2) is
 *              such a case) moves results by an ulp or two, and more only through cancellation,
 *              which the floor absorbs.
 *              act's sigmoid, silu and gelu too: they call expf and erff, within 2 ulp on CUDA,
 *              act.c's own exp_f32 (1.3 ulp) and glibc's erff (1 ulp) on the CPU, so exp(-x) or erf
 *              differ by up to ~3.5 ulps (2e-7 relative), and
 *              act.c's arithmetic carries that to at most ~3.5e-6 of the floor. The worst case is
 *              sigmoid's backward for x in about 4..8: 1 - s keeps only s's last bits, and s moves by
 *              one ulp of 1 + exp(-x) (1.2e-7) when that sum rounds the other way; times |dy| < 3.5
 *              against an RMS of 0.12. A host emulation of these inputs with exp and erf moved by 2
 *              to 4 ulps gave 3.0e-6 there, 1.3e-6 for silu's backward, 1.1e-6 for gelu's, and at
 *              most 1.2e-6 for the forwards (gelu's near x = -20 only if erf(-14) were not -1).
 *              act's inputs: N(0, 16) with the kinks (-6, -3, 0, -0, 3, 6, one fp32 ulp either side,
 *              1/32 either side), +-9.5, 15, 16, 17, 20, 88, 90, a subnormal, NaN and +-inf
 *              (ACT_SPECIAL) in the 8-wide part, and NaN, -3, 6 in the scalar tail.
 *   1e-4       reductions, GEMMs and convolutions (BN and LN statistics and gradients, linear, conv,
 *              average pool, the loss's softmax, chanmul's ds over hw positions, tokens_bwd's dcls and
 *              dpos over the images, attention's GEMMs and softmax both ways): the sums run in
 *              another order (cuDNN's and cuBLAS's tiles and split-K versus im2col + BLAS; act.cu's
 *              and ln.cu's double sums in lanes versus the CPU's in one), with error growing like
 *              eps * sqrt(K) to eps * K for K terms; K reaches 4608 (3x3x512) here, so about 3e-4
 *              at worst and about 2e-6 typical against the floor; measured between oneDNN and the
 *              im2col reference on these shapes: at most 7e-6. TF32 (10-bit mantissa), which cuDNN
 *              and cuBLAS use for fp32 unless told not to, gives about 1e-3 and fails here, as it
 *              should: the contract is fp32 (a failing row then says so).
 *   loss       xent's mean loss: 1e-5 relative (the CPU sums in double).
 *   fp16/bf16  where the fp32 tolerance is not 0, it plus one unit in the last place of the type,
 *              2^-10 (fp16) or 2^-7 (bf16) relative: outputs are rounded after the op, so two fp32
 *              results within the tolerance can straddle a rounding boundary and end one ulp apart.
 *              Convolutions and linear layers on half operands run on tensor cores on the GPU (and
 *              bf16 convolutions of --backend cpu on oneDNN's own bf16 kernels on AMX machines): the
 *              products of two halves exact, summed in fp32 in the library's order, so the fp32
 *              rule holds before the rounding and the same 1e-4 plus one ulp applies (sums kept in
 *              fp16 or bf16 are not what the contract allows).
 *
 * Planning (nn/backend.h): each op family's planning op (conv_workspace, bn_scratch, linear_scratch,
 * attn_scratch, xent_scratch, normalize_scratch) is asked for the shapes its rows run, then
 * reserve_scratch (the reference's too where its ops use scratch: attention's); a row
 * "<planning op> ..." then checks that the ops made no unplanned allocation (dt_cuda_unplanned_allocs;
 * always 0 on the CPU backend). LN and the tokens have no planning op: "ln_fwd, ln_bwd allocate
 * nothing" and "tokens_fwd, tokens_bwd allocate nothing" check the same after reserving nothing.
 *
 * The whole-model check trains resnet8 (batch 32, 32x32, 10 classes, SGD lr 0.01 with momentum and
 * weight decay, label smoothing 0.1) for two steps at O0, O2 (fp16) and O2 (bf16) from the same seed
 * on the CPU reference and on the device, planned for batch 32 and 29, then runs one forward and
 * backward at 29 (an epoch's last batch), which must allocate nothing on the device (a row says): the
 * planner's memory sharing, in-place ops, the gradient sums of residual blocks, the loss scaler and
 * the master weights, on device memory. It compares the two losses, and per tensor, by norm-wise
 * relative difference: what training changed (weights, or O2's fp32 master weights, and BN running
 * statistics: |got - want| / |want - initial|), the momentum buffers (the gradients), and O2's
 * rounded weights (|got - want| / |want|); the worst tensor is named.
 * A network at initialisation is ill-conditioned: between two correct fp32 implementations (oneDNN
 * and im2col, 6 seeds) the worst tensor differed by up to 4e-3 (typically 3e-5), and at O2 a
 * last-bit difference flips fp16 roundings that then spread: up to 7e-2 (fp16) and 1e-1 (bf16) for
 * the worst tensor, 1e-2 for all together; losses differed by up to 1e-8 (O0), 2e-5 (O2) and 6e-5
 * (bf16). Tolerances: tensors 2e-2 (O0), 0.25 (O2), 0.4 (bf16), about 4x the worst seen; losses
 * 1e-5, 1e-3, 2e-3, wider (cuDNN's algorithms may round differently from oneDNN's). So at O2 the
 * model check finds gross errors (a missing loss scale, master weights not updated, a wrong
 * accumulate), while the fp16/bf16 rows above check each op closely.
 * Then, per level, the step as a graph: 3 steps with step 1 captured and launched and step 2
 * launched again must equal the same 3 steps issued on the same backend, bit for bit (ops_check
 * keeps to deterministic algorithms); with --backend cpu, on the CPU's graph table.
 */
#include "config.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn/backend.h"
#include "nn/cuda/cuda.h"
#include "nn/model.h"
#include "train/amp.h"
#include "train/optim.h"
#include "util/check.h"
#include "util/half.h"
#include "util/log.h"
#include "util/rng.h"

/* --- setup, options, bookkeeping ----------------------------------------------------------------- */

static const dt_backend *DEV;                           /* the backend under test */
static const dt_backend *REF = &dt_backend_cpu;         /* reference for all but convolutions */
static const dt_backend *CREF = &dt_backend_cpu_ref;    /* reference for convolutions, models */
static dt_rng RNG;
static const char *ONLY;                                /* --only: run tests whose name has this */
static int QUICK;                                       /* --quick: each op once, small (memcheck's) */
static int LIST;                                        /* --list: name the rows, check nothing */
static int n_rows, n_failed;

enum dtype { F32, F16, BF16 };
static const char *const DTYPE_NAME[] = {"fp32", "fp16", "bf16"};
/* S32: the type of every reference operand (the reference computes on fp32 arrays holding the row's
 * values, see "dtypes" above); ty(dt): the type of a row's typed operands on the device */
#define S32 DT_FLOAT32
static dt_dtype ty(int dt)
{
    return dt == F16 ? DT_FLOAT16 : dt == BF16 ? DT_BFLOAT16 : DT_FLOAT32;
}
static size_t elt_bytes(int dt)
{
    return dt == F32 ? sizeof(float) : sizeof(uint16_t);
}
/* 1 when the backend under test stores the type (storage_types): the rows of a type it does not
 * store are not run (a row says so) */
static int stores(int dt)
{
    return (DEV->storage_types & 1u << ty(dt)) != 0;
}
#define ALL_DTYPES                          \
    for (int dt = F32; dt <= BF16; dt++) \
        if (stores(dt))
/* the size of the element-wise tests: odd, several blocks (--quick: a few) */
static int64_t NE = 100003;

/* how a row compares: as values (0), as bit patterns, or with a relative tolerance */
enum mode { M_EXACT, M_BITS, M_ELT, M_RED, M_LOSS };
#define TOL_ELT 1e-5
#define TOL_RED 1e-4
#define TOL_LOSS 1e-5

/* "never written": quiet NaNs with a payload, per storage type, that neither a conversion nor the
 * arithmetic of an op makes (their canonical NaNs are 0x7fc00000 / 0x7fffffff, 0x7e00 / 0x7fff,
 * 0x7fc0 / 0x7fff); a reduced one widens to fp32 0x7fcba000 (fp16) and 0x7fad0000 (bf16) */
#define POISON_BITS 0x7fc0deadu
#define POISON_F16 0x7e5du
#define POISON_BF16 0x7fadu
#define POISON_U8 0xa5

static double tol_of(enum mode m, int dt)
{
    double t = m == M_ELT ? TOL_ELT : m == M_RED ? TOL_RED : m == M_LOSS ? TOL_LOSS : 0;
    if (t > 0 && dt == F16)
        t += 0x1p-10;
    else if (t > 0 && dt == BF16)
        t += 0x1p-7;
    return t;
}

static int want_test(const char *name)
{
    return !ONLY || strstr(name, ONLY);
}

/* Allocations of one test, freed together by release(). */
#define MAX_HELD 256
static struct {
    void *p;
    int dev;
} held[MAX_HELD];
static int n_held;

static void *hold(void *p, int dev)
{
    if (!p) {
        fprintf(stderr, "FATAL: out of %s memory\n", dev ? "device" : "host");
        exit(1);
    }
    if (n_held == MAX_HELD) {
        fprintf(stderr, "FATAL: ops_check holds too many buffers (raise MAX_HELD)\n");
        exit(1);
    }
    held[n_held].p = p;
    held[n_held++].dev = dev;
    return p;
}

static void release(void)
{
    while (n_held > 0) {
        n_held--;
        if (held[n_held].dev)
            DEV->mem_free(held[n_held].p);
        else
            free(held[n_held].p);
    }
}

/* host arrays */
static float *h_new(int64_t n)
{
    return hold(calloc((size_t)(n > 0 ? n : 1), sizeof(float)), 0);
}

static void h_round(float *h, int64_t n, int dt)
{
    if (dt != F32)
        REF->round_half(n, h, dt == BF16);
}

/* n values of mean + sd * z, rounded to the dtype, z about N(0, 1): the sum of four 16-bit uniforms
 * (Irwin-Hall, scaled to variance 1; |z| < 3.47), one 64-bit draw per value: random enough for these
 * checks and quick for the large tensors */
static float *h_randn(int64_t n, double mean, double sd, int dt)
{
    float *h = h_new(n);
    if (LIST) /* nothing is computed: zeros will do */
        return h;
    const double k = sqrt(3.0) / 65536.0; /* four U[0, 65536): mean 131070, variance 4 * 65536^2 / 12 */
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = dt_rng_next(&RNG);
        double s4 = (double)(r & 0xffff) + (double)((r >> 16) & 0xffff) + (double)((r >> 32) & 0xffff) +
                    (double)(r >> 48);
        h[i] = (float)(mean + sd * (s4 - 131070.0) * k);
    }
    h_round(h, n, dt);
    return h;
}

static float *h_uniform(int64_t n, double lo, double hi)
{
    float *h = h_new(n);
    if (LIST)
        return h;
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)(lo + (hi - lo) * dt_rng_uniform(&RNG));
    return h;
}

static float *h_copy(const float *src, int64_t n)
{
    float *h = h_new(n);
    memcpy(h, src, (size_t)n * sizeof(float));
    return h;
}

/* Device arrays: n elements of storage type dt (fp32, or 16-bit elements for fp16 and bf16). The
 * host side is always fp32: an upload converts values the type holds (exactly: a value it does not
 * hold is a bug of this program, which stops it), a download widens (exactly). */
static void *d_bytes(size_t bytes)
{
    return hold(DEV->mem_alloc(bytes ? bytes : 1), 1);
}

static uint16_t *u16_new(int64_t n)
{
    uint16_t *t = malloc((size_t)(n > 0 ? n : 1) * sizeof(uint16_t));
    if (!t) {
        fprintf(stderr, "FATAL: out of host memory\n");
        exit(1);
    }
    return t;
}

static void d_put(void *d, const float *h, int64_t n, int dt)
{
    if (dt == F32) {
        DEV->mem_put(d, h, (size_t)n * sizeof(float));
        return;
    }
    if (!LIST && !dt_is_half(h, n, dt == BF16)) {
        fprintf(stderr, "FATAL: ops_check uploads values that are not %s (the test forgot to round them)\n",
                DTYPE_NAME[dt]);
        exit(1);
    }
    uint16_t *t = u16_new(n);
    if (dt == BF16)
        dt_f32_to_bf16_n((size_t)n, h, t);
    else
        dt_f32_to_f16_n((size_t)n, h, t);
    DEV->mem_put(d, t, (size_t)n * sizeof(uint16_t));
    free(t);
}

static void *d_from(const float *h, int64_t n, int dt)
{
    void *d = d_bytes((size_t)n * elt_bytes(dt));
    d_put(d, h, n, dt);
    return d;
}

static void d_poison(void *d, int64_t n, int dt)
{
    if (dt == F32) {
        uint32_t *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(uint32_t));
        if (!p) {
            fprintf(stderr, "FATAL: out of host memory\n");
            exit(1);
        }
        for (int64_t i = 0; i < n; i++)
            p[i] = POISON_BITS;
        DEV->mem_put(d, p, (size_t)n * sizeof(float));
        free(p);
        return;
    }
    uint16_t *t = u16_new(n);
    for (int64_t i = 0; i < n; i++)
        t[i] = dt == BF16 ? POISON_BF16 : POISON_F16;
    DEV->mem_put(d, t, (size_t)n * sizeof(uint16_t));
    free(t);
}

static void *d_poisoned(int64_t n, int dt)
{
    void *d = d_bytes((size_t)n * elt_bytes(dt));
    d_poison(d, n, dt);
    return d;
}

static uint8_t *d_poisoned_u8(int64_t n)
{
    uint8_t *h = malloc((size_t)(n > 0 ? n : 1)), *d = d_bytes((size_t)n);
    if (!h)
        exit(1);
    memset(h, POISON_U8, (size_t)n);
    DEV->mem_put(d, h, (size_t)n);
    free(h);
    return d;
}

/* the device array (storage type dt) back on the host, widened to fp32 */
static float *d_result(const void *d, int64_t n, int dt)
{
    float *h = h_new(n);
    if (dt == F32) {
        DEV->mem_get(h, d, (size_t)n * sizeof(float));
        return h;
    }
    uint16_t *t = u16_new(n);
    DEV->mem_get(t, d, (size_t)n * sizeof(uint16_t));
    if (dt == BF16)
        dt_bf16_to_f32_n((size_t)n, t, h);
    else
        dt_f16_to_f32_n((size_t)n, t, h);
    free(t);
    return h;
}

static uint8_t *d_result_u8(const uint8_t *d, int64_t n)
{
    uint8_t *h = hold(malloc((size_t)(n > 0 ? n : 1)), 0);
    DEV->mem_get(h, d, (size_t)n);
    return h;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* one of the poisons, as it comes back widened to fp32 */
static int is_poison(uint32_t u)
{
    static uint32_t p16, pbf;
    if (!p16) {
        p16 = bits_of(dt_f16_to_f32(POISON_F16));
        pbf = bits_of(dt_bf16_to_f32(POISON_BF16));
    }
    return u == POISON_BITS || u == p16 || u == pbf;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Coverage: which ops of nn/backend.h's list some row tested. A row is about the op its name starts
 * with, up to a space or '+' ("bn_fwd_train+relu y" tests bn_fwd_train). */
#define OP_NAME(name, ret, params, args) #name,
static const char *const OP_NAMES[] = {DT_OPS(OP_NAME)};
#undef OP_NAME
_Static_assert(sizeof OP_NAMES / sizeof OP_NAMES[0] == DT_BACKEND_OP_COUNT, "one name per op");
static int covered[DT_BACKEND_OP_COUNT];

static void cover(const char *row_name)
{
    size_t len = strcspn(row_name, " +");
    for (int k = 0; k < DT_BACKEND_OP_COUNT; k++)
        if (strlen(OP_NAMES[k]) == len && !strncmp(row_name, OP_NAMES[k], len))
            covered[k] = 1;
}

/* one row of --list: what a run would check, no result */
static void list_row(const char *op, const char *dtype, const char *shape)
{
    printf("%-40s %-4s %s\n", op, dtype, shape);
    cover(op);
    n_rows++;
}

/* units, faults and processes (below) */
static int fault_of_row(const char *op);
static void fault_told(int i, char *why, size_t why_len);
static void tally(const char *op, const char *dtype, const char *shape, int pass, const char *why);

/* one table row; it fails when its op's call failed (a pending fault, below), and says why */
static void row(const char *op, const char *dtype, const char *shape, double maxabs, double maxrel, enum mode m,
                double tol, int pass)
{
    if (LIST) {
        list_row(op, dtype, shape);
        return;
    }
    const int fault = fault_of_row(op);
    char t[16], why[300] = "";
    if (m == M_BITS)
        snprintf(t, sizeof t, "bits");
    else if (m == M_EXACT)
        snprintf(t, sizeof t, "0");
    else
        snprintf(t, sizeof t, "%.1e", tol);
    pass = pass && fault < 0;
    printf("%-40s %-4s %-30s %9.2e %9.2e %8s  %s\n", op, dtype, shape, maxabs, maxrel, t, pass ? "PASS" : "FAIL");
    if (fault >= 0)
        fault_told(fault, why, sizeof why);
    tally(op, dtype, shape, pass, why);
    fflush(stdout);
}

/* got (device, widened) against want (reference), n floats; dt: the row's type (-1: none); tt: the
 * output's storage type, which sets the tolerance (an fp32 output of a reduced row, such as BN's
 * statistics or SGD's master weights, is computed in fp32 from the same reduced inputs on both sides,
 * so it keeps the fp32 tolerance) */
static int cmp_f32_as(const char *op, int dt, int tt, const char *shape, const float *got, const float *want,
                      int64_t n, enum mode m)
{
    const double tol = tol_of(m, tt);
    if (LIST) {
        row(op, dt < 0 ? "-" : DTYPE_NAME[dt], shape, 0, 0, m, tol, 1);
        return 1;
    }
    double ss = 0;
    int64_t finite = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(want[i])) {
            ss += (double)want[i] * want[i];
            finite++;
        }
    double floor_ = finite ? sqrt(ss / (double)finite) : 0;
    if (!(floor_ > 1e-30))
        floor_ = 1e-30;
    double maxabs = 0, maxrel = 0;
    int64_t bad = 0, unwritten = 0, nan_got = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        const float a = got[i], b = want[i];
        const uint32_t ab = bits_of(a), bb = bits_of(b);
        int ok;
        if (is_poison(ab) && !is_poison(bb))
            unwritten++;
        if (isnan(a) && !isnan(b))
            nan_got++;
        if (isfinite(a) && isfinite(b)) {
            double d = fabs((double)a - (double)b), r = d / fmax(fabs((double)b), floor_);
            maxabs = fmax(maxabs, d);
            maxrel = fmax(maxrel, r);
            ok = m == M_BITS ? ab == bb : m == M_EXACT ? a == b : r <= tol;
        } else if (m == M_BITS) {
            /* fp32: NaN payloads count; reduced storage: a NaN is a NaN (the device's conversions give
             * a canonical NaN where util/half.c keeps payload bits) */
            ok = ab == bb || (dt > F32 && isnan(a) && isnan(b));
        } else {
            ok = (isnan(a) && isnan(b)) || (!isnan(a) && !isnan(b) && a == b);
        }
        if (!ok && bad++ == 0)
            first = i;
    }
    char dts[8];
    snprintf(dts, sizeof dts, "%s", dt < 0 ? "-" : DTYPE_NAME[dt]);
    row(op, dts, shape, maxabs, maxrel, m, tol, bad == 0);
    if (bad)
        printf("      %lld of %lld elements off (%lld NaN where the reference is not, %lld of them the poison: never "
               "written); first at [%lld]: got %.9g (0x%08x), want %.9g (0x%08x)\n",
               (long long)bad, (long long)n, (long long)nan_got, (long long)unwritten, (long long)first, (double)got[first],
               (unsigned)bits_of(got[first]), (double)want[first], (unsigned)bits_of(want[first]));
    if (bad && m == M_RED && dt == F32 && maxrel > TOL_RED && maxrel < 3e-2 && nan_got == 0)
        printf("      (errors of 1e-4..1e-2 in an fp32 GEMM or convolution look like TF32: cuDNN needs "
               "CUDNN_FMA_MATH, cuBLAS CUBLAS_DEFAULT_MATH without NVIDIA_TF32_OVERRIDE=1)\n");
    return bad == 0;
}

static int cmp_f32(const char *op, int dt, const char *shape, const float *got, const float *want, int64_t n,
                   enum mode m)
{
    return cmp_f32_as(op, dt, dt, shape, got, want, n, m);
}

static int cmp_u8(const char *op, int dt, const char *shape, const uint8_t *got, const uint8_t *want, int64_t n)
{
    int64_t bad = 0, first = -1, unwritten = 0;
    if (LIST)
        n = 0;
    double maxabs = 0;
    for (int64_t i = 0; i < n; i++) {
        maxabs = fmax(maxabs, fabs((double)got[i] - (double)want[i]));
        if (got[i] != want[i]) {
            unwritten += got[i] == POISON_U8;
            if (bad++ == 0)
                first = i;
        }
    }
    row(op, DTYPE_NAME[dt], shape, maxabs, maxabs > 0 ? 1 : 0, M_BITS, 0, bad == 0);
    if (bad)
        printf("      %lld of %lld bytes off (%lld still the poison 0x%02x); first at [%lld]: got %u, want %u\n",
               (long long)bad, (long long)n, (long long)unwritten, POISON_U8, (long long)first, got[first],
               want[first]);
    return bad == 0;
}

/* a scalar: relative (M_LOSS) or exact */
static int cmp_scalar(const char *op, int dt, const char *shape, double got, double want, enum mode m)
{
    double d = fabs(got - want), r = d / fmax(fabs(want), 1e-30);
    /* a non-finite reference (xent on NaN or inf logits) is matched as a value: NaN with NaN */
    int same_nonfinite = !isfinite(want) && ((isnan(got) && isnan(want)) || got == want);
    int pass = LIST || same_nonfinite || (m == M_EXACT ? got == want : r <= tol_of(m, F32));
    char dts[8];
    snprintf(dts, sizeof dts, "%s", dt < 0 ? "-" : DTYPE_NAME[dt]);
    row(op, dts, shape, d, r, m, tol_of(m, F32), pass);
    if (!pass)
        printf("      got %.12g, want %.12g\n", got, want);
    return pass;
}

/* got from the device output d (of the row's type dt; check_as: of storage type st) against the
 * reference h */
static void check_as(const char *op, int dt, int st, const char *shape, const void *d, const float *want, int64_t n,
                     enum mode m)
{
    cmp_f32_as(op, dt, st, shape, d_result(d, n, st), want, n, m);
}

static void check(const char *op, int dt, const char *shape, const void *d, const float *want, int64_t n, enum mode m)
{
    check_as(op, dt, dt, shape, d, want, n, m);
}

/* the reference output, rounded to its storage type dt after the op, as the device stores it */
static void ref_out(float *h, int64_t n, int dt)
{
    h_round(h, n, dt);
}

/* Planning, as a model does it: the device reserves the scratch its planning ops asked for (bytes),
 * and from here on its ops must not allocate; planned_row then checks that they did not. */
static long unplanned_at;
static int reserve_rc;

static void plan_scratch(size_t bytes)
{
    reserve_rc = DEV->reserve_scratch(bytes);
    unplanned_at = dt_cuda_unplanned_allocs();
}

static void planned_row(const char *op, int dt, const char *shape)
{
    long k = dt_cuda_unplanned_allocs() - unplanned_at;
    row(op, DTYPE_NAME[dt], shape, (double)k, (double)k, M_EXACT, 0, k == 0 && reserve_rc == DT_OK);
    if (!LIST && reserve_rc != DT_OK)
        printf("      reserve_scratch failed: %s\n", dt_status_str(reserve_rc));
    else if (!LIST && k)
        printf("      %ld allocations inside the ops after planning (DT_LOG_LEVEL=debug names them)\n", k);
}

/* --- the dry backend of --list ------------------------------------------------------------------- */

/* Host memory, and ops that do nothing (returning 0): every test runs its course, so each row is
 * named as a real run names it, and nothing is computed. */
static void *dry_alloc(size_t bytes)
{
    return calloc(1, bytes ? bytes : 1);
}
static void dry_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memcpy(dst, src, bytes);
}
static void dry_copy_queued(void *dst, const void *src, size_t bytes, int queue)
{
    (void)queue;
    dry_copy(dst, src, bytes);
}
struct dt_event {
    int unused;
};
static dt_event dry_event;
static dt_event *dry_event_create(void)
{
    return &dry_event;
}
static void dry_event_one(dt_event *e)
{
    (void)e;
}
static void dry_event_record(dt_event *e, int queue)
{
    (void)e;
    (void)queue;
}
static void dry_event_wait(int queue, dt_event *e)
{
    (void)e;
    (void)queue;
}
static int dry_reserve(size_t bytes)
{
    (void)bytes;
    return DT_OK;
}
static void dry_use(int unused, ...)
{
    (void)unused;
}
#define DRY_USE(...) dry_use(0, __VA_ARGS__)
#define DRY_RETURN_void
#define DRY_RETURN_int return 0;
#define DRY_RETURN_double return 0;
#define DRY_RETURN_size_t return 0;
#define DRY_OP(name, ret, params, args) \
    static ret dry_##name params        \
    {                                   \
        DRY_USE args;                   \
        DRY_RETURN_##ret                \
    }
DT_OPS(DRY_OP)
#undef DRY_OP
#define DRY_MEMBER(name, ret, params, args) .name = dry_##name,
static const dt_backend DRY = {
    .name = "dry",
    .host_memory = 1,
    .storage_types = 1u << DT_FLOAT32 | 1u << DT_FLOAT16 | 1u << DT_BFLOAT16, /* the rows of a real run */
    .mem_alloc = dry_alloc,
    .mem_free = free,
    .mem_put = dry_copy,
    .mem_get = dry_copy,
    .host_alloc = dry_alloc,
    .host_free = free,
    .upload = dry_copy_queued,
    .download = dry_copy_queued,
    .event_create = dry_event_create,
    .event_destroy = dry_event_one,
    .event_record = dry_event_record,
    .event_wait = dry_event_wait,
    .event_sync = dry_event_one,
    .reserve_scratch = dry_reserve,
    .max_tensor_elems = INT64_MAX,
    DT_OPS(DRY_MEMBER)
};
#undef DRY_MEMBER

/* --- units, faults and processes ------------------------------------------------------------------ */

/* A unit: one call of a test function (one case of an op family in one type, the memory test, the
 * table's rows, one opt level of the model). Every row belongs to one. A unit draws its inputs from
 * its own stream of the seed (its name's hash), so it checks the same values whatever ran before
 * it, in this process or in another, or with --only.
 *
 * Faults. The table under test is wrapped (W below): each op and member is called inside a setjmp,
 * and dt_cuda_fatal_hook (nn/cuda/cuda.h: every failing CUDA, cuDNN or cuBLAS call of the backend,
 * and an operand of a type it does not store) jumps back there instead of aborting. The call then
 * returns as if it had done nothing (its outputs keep the poison) with its error pending: the next
 * row of that op (the row's name starts with the op's name) fails and says the call, its status and
 * the shape; a pending fault of a memory, event or graph member fails the next row, whatever it is;
 * one no row claimed fails a row of its own when the unit ends. So a failing op costs its rows.
 * DT_OPS_CHECK_FAULT=OP[:MODE] plants one: every call of op OP of the wrapped table goes through
 * dt_cuda_fatal as a failing CUDA call does, instead of running (MODE error, the default); "lost"
 * as one that leaves the context unusable; "abort" as one that kills the process. It works with
 * --backend cpu too, which is how tests/gpu/rehearse.sh checks all this without a GPU.
 *
 * Processes. The process that starts (the parent) touches neither CUDA nor the backend (a CUDA
 * context does not survive fork): it runs the units in a child, which tells it through a pipe each
 * unit it begins and each row. When a child must not go on (the error left the context unusable:
 * a sticky error such as an illegal address, found by a device synchronisation after the fault; or
 * a convolution failed, which may leave conv_cudnn.c's cache lock held) it prints the row, says so
 * and exits; when it dies (a signal, an exit from a failed allocation) the parent prints a failing
 * row for the unit it died in, with the last error the backend logged. Either way the parent starts
 * a new child at the next unit (a new context: about a second), at most MAX_CHILDREN times. Then it
 * prints the failing rows again, together, and the last line. --no-fork runs everything in one
 * process (for a debugger; a fault then still costs its row, a crash the run). */
static const dt_backend *BASE; /* the table under test; DEV is W, which wraps it */
static dt_backend W;
static uint64_t SEED;
static int NO_FORK;
static int REPORT_FD = -1;  /* a child's pipe to the parent; -1: none */
static int UNIT_START;      /* a child's first unit; the ones before it ran in a process before */
static int unit_index = -1; /* the current unit */
static char unit_name[96];
#define MAX_CHILDREN 24

/* one line to the parent (one write: a pipe keeps it whole), "KIND text"; nothing without a parent */
__attribute__((format(printf, 1, 2))) static void report(const char *fmt, ...)
{
    if (REPORT_FD < 0)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if (k > (int)sizeof line - 2)
        k = (int)sizeof line - 2;
    for (int i = 0; i < k; i++) /* one line: the parent splits fields at tabs, messages at newlines */
        if (line[i] == '\n')
            line[i] = ' ';
    line[k++] = '\n';
    fflush(stdout); /* the rows before this message, printed before the parent reads it */
    if (write(REPORT_FD, line, (size_t)k) != k)
        REPORT_FD = -1; /* the parent is gone: go on alone */
}

/* the failing rows, for the list printed before the last line */
static char **failed_rows;
static int n_failed_rows, cap_failed_rows;

/* a row counted: the coverage, the totals, the list of failing rows (why: the error that failed it,
 * or "") */
static void note_row(const char *op, const char *dtype, const char *shape, int pass, const char *why)
{
    cover(op);
    n_rows++;
    if (pass)
        return;
    n_failed++;
    if (n_failed_rows == cap_failed_rows) {
        int cap = cap_failed_rows ? 2 * cap_failed_rows : 64;
        char **grown = realloc(failed_rows, (size_t)cap * sizeof *grown);
        if (!grown)
            return;
        failed_rows = grown;
        cap_failed_rows = cap;
    }
    char line[400];
    snprintf(line, sizeof line, "%-40s %-4s %s%s%s", op, dtype, shape, why[0] ? ": " : "", why);
    failed_rows[n_failed_rows] = strdup(line);
    if (failed_rows[n_failed_rows])
        n_failed_rows++;
}

/* a row of this process: counted, and told to the parent */
static void tally(const char *op, const char *dtype, const char *shape, int pass, const char *why)
{
    note_row(op, dtype, shape, pass, why);
    report("R %d %s\t%s\t%s\t%s", pass, op, dtype, shape, why);
}

/* Pending faults: calls that failed and returned, each waiting for a row to fail (see above). */
#define MAX_PENDING 8
static struct {
    char op[48];    /* the member's name */
    int any_row;    /* a member outside the op list: the next row takes it */
    char why[240];  /* "call: status" */
} pending[MAX_PENDING];
static int n_pending;
static char last_error[240]; /* the backend's last fatal error, "call: status" */
static jmp_buf *catcher;     /* where dt_cuda_fatal_hook jumps: the wrapped call in progress */
static long call_unplanned;  /* dt_cuda_unplanned_allocs() when it began */

static int is_op_name(const char *name)
{
    for (int k = 0; k < DT_BACKEND_OP_COUNT; k++)
        if (!strcmp(name, OP_NAMES[k]))
            return 1;
    return 0;
}

/* the pending fault a row of op takes (the first of its op, else one of a member outside the list),
 * or -1 */
static int fault_of_row(const char *op)
{
    const size_t len = strcspn(op, " +");
    for (int i = 0; i < n_pending; i++)
        if (!pending[i].any_row && strlen(pending[i].op) == len && !strncmp(op, pending[i].op, len))
            return i;
    for (int i = 0; i < n_pending; i++)
        if (pending[i].any_row)
            return i;
    return -1;
}

/* fault i, told under the row that took it, and gone; its text into why (why_len bytes) */
static void fault_told(int i, char *why, size_t why_len)
{
    printf("      its call failed: %s (%s)\n", pending[i].why, pending[i].op);
    snprintf(why, why_len, "%s: %s", pending[i].op, pending[i].why);
    for (int j = i + 1; j < n_pending; j++)
        pending[j - 1] = pending[j];
    n_pending--;
}

/* every pending fault as a failing row of its own (at the end of its unit: no row of its op came) */
static void faults_unclaimed(void)
{
    while (n_pending > 0) {
        char op[96], why[300];
        snprintf(op, sizeof op, "%s (its call failed)", pending[0].op);
        printf("%-40s %-4s %-30s %9s %9s %8s  %s\n", op, "-", unit_name, "-", "-", "-", "FAIL");
        fault_told(0, why, sizeof why);
        tally(op, "-", unit_name, 0, why);
    }
}

/* Begins the next unit, named by fmt; 0 when this process skips it (a process before ran it). */
__attribute__((format(printf, 1, 2))) static int unit(const char *fmt, ...)
{
    faults_unclaimed(); /* the previous unit's */
    unit_index++;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(unit_name, sizeof unit_name, fmt, ap);
    va_end(ap);
    if (unit_index < UNIT_START)
        return 0;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = unit_name; *c; c++)
        h = (h ^ (uint8_t)*c) * 1099511628211ull;
    dt_rng_seed(&RNG, SEED, h);
    report("U %d %s", unit_index, unit_name);
    return 1;
}

/* the backend's fatal path (dt_cuda_fatal_hook): told to the parent, then back to the wrapped call
 * in progress, if any (else dt_cuda_fatal aborts: the parent reports the unit) */
static void on_fatal(const char *what, const char *message)
{
    snprintf(last_error, sizeof last_error, "%s: %s", what, message);
    report("E %s", last_error);
    if (catcher)
        longjmp(*catcher, 1);
}

/* DT_OPS_CHECK_FAULT */
enum { PLANT_ERROR, PLANT_LOST, PLANT_ABORT };
static int plant_op = -1, plant_mode;

static void planted(int op, const char *name)
{
    if (op < 0 || op != plant_op)
        return;
    char what[80];
    snprintf(what, sizeof what, "DT_OPS_CHECK_FAULT=%s", name);
    if (plant_mode == PLANT_ABORT) { /* dt_cuda_fatal aborts, as without ops_check's hook */
        snprintf(last_error, sizeof last_error, "%s: a planted fault (the process killed)", what);
        report("E %s", last_error);
        dt_cuda_fatal_hook = NULL;
        dt_cuda_fatal(what, "a planted fault (the process killed)");
    }
    dt_cuda_fatal(what, plant_mode == PLANT_LOST ? "a planted fault (the context lost)" : "a planted fault");
}

/* may this process go on using the backend after a fault in member name? */
static int usable_after(const char *name)
{
    if (plant_op >= 0 && plant_mode == PLANT_LOST && !strcmp(name, OP_NAMES[plant_op]))
        return 0;
    if (BASE != &dt_backend_cuda)
        return 1;
    /* conv_cudnn.c's cache lock may be held (nn/cuda/cuda.h): always in conv_workspace's search, and in
     * a convolution's when it searched (an unplanned shape: counted as unplanned before the search) */
    if (!strcmp(name, "conv_workspace") || (!strncmp(name, "conv_", 5) && dt_cuda_unplanned_allocs() != call_unplanned))
        return 0;
    (void)cudaGetLastError(); /* the failed call's own error, if it was not sticky */
    return cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess;
}

/* a wrapped call failed (the hook jumped back): pending; or, when the backend is no longer usable
 * here, the row now and this process leaves (the parent goes on at the next unit) */
static void fault_caught(const char *name)
{
    if (n_pending < MAX_PENDING) {
        snprintf(pending[n_pending].op, sizeof pending[n_pending].op, "%s", name);
        pending[n_pending].any_row = !is_op_name(name);
        snprintf(pending[n_pending].why, sizeof pending[n_pending].why, "%s", last_error);
        n_pending++;
    }
    if (REPORT_FD >= 0 && !usable_after(name)) {
        faults_unclaimed();
        printf("-- the backend is not usable in this process after that (a sticky error, or a lock left held): "
               "the next unit runs in a new one\n");
        report("X %d", unit_index);
        fflush(stdout);
        _exit(3);
    }
}

/* W's members: BASE's, each call inside a setjmp (a fault returns a default: NULL, DT_ERR_CUDA, NaN,
 * 0); an op of the list also checks for the planted fault */
#define W_FAILED_void return;
#define W_FAILED_int return DT_ERR_CUDA;
#define W_FAILED_double return NAN;
#define W_FAILED_size_t return 0;
#define W_FAILED_ptr return NULL;
#define W_CALL_void(call) \
    call;                 \
    catcher = outer;
#define W_CALL_int(call) \
    int r_ = call;       \
    catcher = outer;     \
    return r_;
#define W_CALL_double(call) \
    double r_ = call;       \
    catcher = outer;        \
    return r_;
#define W_CALL_size_t(call) \
    size_t r_ = call;       \
    catcher = outer;        \
    return r_;
#define W_CALL_ptr(call)    \
    void *r_ = (void *)call; \
    catcher = outer;        \
    return r_;
#define W_FN(tag, ret, name, params, args, op) \
    static ret w_##name params                 \
    {                                          \
        jmp_buf jb;                            \
        jmp_buf *volatile outer = catcher;     \
        if (setjmp(jb)) {                      \
            catcher = outer;                   \
            fault_caught(#name);               \
            W_FAILED_##tag                     \
        }                                      \
        catcher = &jb;                         \
        call_unplanned = dt_cuda_unplanned_allocs(); \
        planted(op, #name);                    \
        W_CALL_##tag(BASE->name args)          \
    }
#define W_OP(name, ret, params, args) W_FN(ret, ret, name, params, args, DT_BACKEND_OP_##name)
DT_OPS(W_OP)
#undef W_OP
W_FN(ptr, void *, mem_alloc, (size_t bytes), (bytes), -1)
W_FN(void, void, mem_free, (void *p), (p), -1)
W_FN(void, void, mem_put, (void *dst, const void *src, size_t bytes), (dst, src, bytes), -1)
W_FN(void, void, mem_get, (void *dst, const void *src, size_t bytes), (dst, src, bytes), -1)
W_FN(ptr, void *, host_alloc, (size_t bytes), (bytes), -1)
W_FN(void, void, host_free, (void *p), (p), -1)
W_FN(void, void, upload, (void *dst, const void *src, size_t bytes, int queue), (dst, src, bytes, queue), -1)
W_FN(void, void, download, (void *dst, const void *src, size_t bytes, int queue), (dst, src, bytes, queue), -1)
W_FN(ptr, dt_event *, event_create, (void), (), -1)
W_FN(void, void, event_destroy, (dt_event *e), (e), -1)
W_FN(void, void, event_record, (dt_event *e, int queue), (e, queue), -1)
W_FN(void, void, event_wait, (int queue, dt_event *e), (queue, e), -1)
W_FN(void, void, event_sync, (dt_event *e), (e), -1)
W_FN(int, int, reserve_scratch, (size_t bytes), (bytes), -1)
W_FN(int, int, graph_begin, (void), (), -1)
W_FN(ptr, dt_graph *, graph_end, (void), (), -1)
W_FN(void, void, graph_launch, (dt_graph *g), (g), -1)
W_FN(void, void, graph_destroy, (dt_graph *g), (g), -1)
#undef W_FN

/* W: BASE with every member above wrapped (the others, such as the profile's timers, BASE's own) */
static void wrap_base(void)
{
    W = *BASE;
#define W_SET(name) W.name = w_##name;
    W_SET(mem_alloc) W_SET(mem_free) W_SET(mem_put) W_SET(mem_get) W_SET(host_alloc) W_SET(host_free)
    W_SET(upload) W_SET(download) W_SET(event_create) W_SET(event_destroy) W_SET(event_record)
    W_SET(event_wait) W_SET(event_sync) W_SET(reserve_scratch)
    if (BASE->graph_begin) {
        W_SET(graph_begin) W_SET(graph_end) W_SET(graph_launch) W_SET(graph_destroy)
    }
#define W_SET_OP(name, ret, params, args) W.name = BASE->name ? w_##name : NULL;
    DT_OPS(W_SET_OP)
#undef W_SET_OP
#undef W_SET
    DEV = &W;
}

/* every op issued to b's compute queue so far complete: an event recorded there, waited on */
static void drain(const dt_backend *b)
{
    dt_event *e = b->event_create();
    if (!e) {
        fprintf(stderr, "ops_check: %s: cannot create an event\n", b->name);
        exit(1);
    }
    b->event_record(e, DT_QUEUE_COMPUTE);
    b->event_sync(e);
    b->event_destroy(e);
}

/* --- the table itself ---------------------------------------------------------------------------- */

static int table_complete(void)
{
    const struct {
        const char *name;
        int present;
    } m[] = {
#define M(x) {#x, DEV->x != NULL}
        M(mem_alloc), M(mem_free), M(mem_put), M(mem_get), M(host_alloc), M(host_free), M(upload), M(download),
        M(event_create), M(event_destroy), M(event_record), M(event_wait), M(event_sync), M(reserve_scratch),
        {"max_tensor_elems", DEV->max_tensor_elems > 0},
        {"storage_types with float32", (DEV->storage_types & 1u << DT_FLOAT32) != 0},
#undef M
#define OP(name, ret, params, args) {#name, DEV->name != NULL},
        DT_OPS(OP) /* every op of nn/backend.h's list */
#undef OP
    };
    int missing = 0;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!m[i].present) {
            printf("      the table has no %s\n", m[i].name);
            missing++;
        }
    char shape[64];
    snprintf(shape, sizeof shape, "%d members, host_memory %d", (int)(sizeof m / sizeof m[0]), DEV->host_memory);
    row("table complete", "-", shape, missing, missing, M_EXACT, 0, missing == 0);
    /* the reduced rows call the ops on real fp16 and bf16 storage: a type not stored is not run */
    const int lacking = !stores(F16) + !stores(BF16);
    snprintf(shape, sizeof shape, "storage_types 0x%x", DEV->storage_types);
    row("storage_types with float16 and bfloat16", "-", shape, lacking, lacking, M_EXACT, 0, lacking == 0);
    if (lacking && !QUICK)
        printf("      the backend does not store%s%s: those rows are not run\n", stores(F16) ? "" : " fp16",
               stores(BF16) ? "" : " bf16");
    return missing == 0;
}

static void test_memory(void)
{
    if (!unit("mem"))
        return;
    if (!want_test("mem"))
        return;
    const size_t bytes = 1000003; /* odd: no multiple of any vector width */
    uint8_t *d = d_bytes(bytes), *h = hold(malloc(bytes), 0), *back = hold(malloc(bytes), 0);
    memset(h, 0x5a, bytes);
    DEV->mem_get(h, d, bytes);
    int64_t nonzero = 0;
    for (size_t i = 0; i < bytes; i++)
        nonzero += h[i] != 0;
    row("mem_alloc zeroed", "-", "1000003 bytes", (double)nonzero, (double)nonzero, M_EXACT, 0, nonzero == 0);
    for (size_t i = 0; i < bytes; i++)
        h[i] = (uint8_t)dt_rng_next(&RNG);
    DEV->mem_put(d, h, bytes);
    drain(DEV);
    DEV->mem_get(back, d, bytes);
    int64_t off = 0;
    for (size_t i = 0; i < bytes; i++)
        off += h[i] != back[i];
    row("mem_put/mem_get round trip", "-", "1000003 bytes", (double)off, (double)off, M_BITS, 0, off == 0);
    /* at an offset inside a buffer, as the model's arenas use it */
    float *f = d_poisoned(1000, F32), *src = h_randn(1000, 0, 1, F32), *got = h_new(1000);
    DEV->mem_put(f + 3, src + 3, 501 * sizeof(float));
    DEV->mem_get(got + 3, f + 3, 501 * sizeof(float));
    cmp_f32("mem_put/mem_get at an offset", -1, "floats [3, 504)", got + 3, src + 3, 501, M_BITS);
    release();
}

/* --- convolutions --------------------------------------------------------------------------------- */

typedef struct conv_case {
    const char *name;
    int n, h, w, c, oc, k, s, p, dil, g, bias;
} conv_case;

static const conv_case CONV_CASES[] = {
    {"3x3", 4, 14, 14, 64, 64, 3, 1, 1, 1, 1, 0},
    {"3x3 s2 bias, odd size", 2, 15, 15, 32, 48, 3, 2, 1, 1, 1, 1},
    {"1x1", 4, 14, 14, 128, 256, 1, 1, 0, 1, 1, 0},
    {"1x1 s2 (downsample)", 4, 14, 14, 64, 128, 1, 2, 0, 1, 1, 0},
    {"7x7 s2 p3 stem", 2, 64, 64, 3, 64, 7, 2, 3, 1, 1, 0},
    {"3x3 dilation 2", 2, 16, 16, 32, 32, 3, 1, 2, 2, 1, 0},
    {"3x3 groups 4, bias", 2, 14, 14, 64, 64, 3, 1, 1, 1, 4, 1},
    {"3x3 depthwise", 2, 14, 14, 32, 32, 3, 1, 1, 1, 32, 0},
    {"11x11 s4 p2 bias (alexnet)", 2, 63, 63, 3, 16, 11, 4, 2, 1, 1, 1},
    {"5x5 p2 bias", 2, 13, 13, 24, 40, 5, 1, 2, 1, 1, 1},
    {"3x3 512 (K=4608)", 1, 7, 7, 512, 512, 3, 1, 1, 1, 1, 0},
};
/* --quick: one small case with everything (bias, a smaller batch) */
static const conv_case CONV_QUICK = {"3x3 bias (quick)", 3, 8, 8, 8, 16, 3, 1, 1, 1, 1, 1};

static void test_conv(const conv_case *cc, int dt)
{
    if (!unit("conv [%s] %s", cc->name, DTYPE_NAME[dt]))
        return;
    char name[96], shape[64];
    snprintf(shape, sizeof shape, "n%d %dx%dx%d>%d k%ds%dp%dd%dg%d", cc->n, cc->h, cc->w, cc->c, cc->oc, cc->k, cc->s,
             cc->p, cc->dil, cc->g);
    dt_conv_desc d, da; /* the reference's (fp32); the device's (dd, dda, dds) of the row's type */
    if (dt_conv_desc_set(&d, cc->n, cc->h, cc->w, cc->c, cc->oc, cc->k, cc->k, cc->s, cc->s, cc->p, cc->p, cc->dil,
                         cc->dil, cc->g) != 0) {
        snprintf(name, sizeof name, "conv [%s]", cc->name);
        row(name, DTYPE_NAME[dt], "dt_conv_desc_set refused it", 0, 0, M_EXACT, 0, 0);
        return;
    }
    d.bias = cc->bias;
    da = d;
    da.dx_accumulate = 1;
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.oc,
                  nw = (int64_t)d.oc * d.kh * d.kw * (d.c / d.groups), nb = d.oc;
    /* planning, as a model plans: the batch, and a smaller one (an epoch's last) */
    dt_conv_desc ds = d;
    ds.n = d.n > 1 ? d.n - 1 : 1;
    dt_conv_desc dd = d, dda = da, dds = ds;
    dd.t = dda.t = dds.t = ty(dt);
    size_t wr = CREF->conv_workspace(&da), wr0 = CREF->conv_workspace(&d), wrs = CREF->conv_workspace(&ds);
    wr = wr > wr0 ? wr : wr0;
    wr = wr > wrs ? wr : wrs;
    size_t wd = DEV->conv_workspace(&dd), wd2 = DEV->conv_workspace(&dda), wds = DEV->conv_workspace(&dds);
    wd = wd > wd2 ? wd : wd2;
    wd = wd > wds ? wd : wds;
    void *ws_ref = hold(malloc(wr ? wr : 64), 0);
    void *ws_dev = d_bytes(wd ? wd : 64);
    plan_scratch(0); /* (the conv ops use no scratch: this starts the count of allocations) */

    const double wsd = 1.0 / sqrt((double)d.kh * d.kw * (d.c / d.groups));
    float *x = h_randn(nx, 0, 1, dt), *w = h_randn(nw, 0, wsd, dt), *b = h_randn(nb, 0, 0.5, dt);
    float *dy = h_randn(ny, 0, 1, dt);
    void *Dx = d_from(x, nx, dt), *Dw = d_from(w, nw, dt), *Db = d_from(b, nb, dt), *Ddy = d_from(dy, ny, dt);
    const float *bias = cc->bias ? b : NULL;
    const void *Dbias = cc->bias ? Db : NULL;

    /* forward */
    float *y = h_new(ny);
    void *Dy = d_poisoned(ny, dt);
    CREF->conv_fwd(&d, x, w, bias, y, ws_ref);
    DEV->conv_fwd(&dd, Dx, Dw, Dbias, Dy, ws_dev);
    ref_out(y, ny, dt);
    snprintf(name, sizeof name, "conv_fwd [%s]", cc->name);
    check(name, dt, shape, Dy, y, ny, M_RED);

    /* a smaller batch, planned too (an epoch's last), in the same workspace */
    if (d.n > 1) {
        const int64_t nys = (int64_t)ds.n * d.oh * d.ow * d.oc;
        float *ys = h_new(nys);
        void *Dys = d_poisoned(nys, dt);
        CREF->conv_fwd(&ds, x, w, bias, ys, ws_ref);
        DEV->conv_fwd(&dds, Dx, Dw, Dbias, Dys, ws_dev);
        ref_out(ys, nys, dt);
        snprintf(name, sizeof name, "conv_fwd smaller batch [%s]", cc->name);
        check(name, dt, shape, Dys, ys, nys, M_RED);
    }

    /* backward-data, overwrite and accumulate */
    float *dx = h_new(nx);
    void *Ddx = d_poisoned(nx, dt);
    CREF->conv_bwd_data(&d, dy, w, dx, 0, ws_ref);
    DEV->conv_bwd_data(&dd, Ddy, Dw, Ddx, 0, ws_dev);
    ref_out(dx, nx, dt);
    snprintf(name, sizeof name, "conv_bwd_data [%s]", cc->name);
    check(name, dt, shape, Ddx, dx, nx, M_RED);

    /* overwrite through a descriptor that allows adding (the model's first write to a residual
     * input's gradient) */
    float *dxo = h_new(nx);
    void *Ddxo = d_poisoned(nx, dt);
    CREF->conv_bwd_data(&da, dy, w, dxo, 0, ws_ref);
    DEV->conv_bwd_data(&dda, Ddy, Dw, Ddxo, 0, ws_dev);
    ref_out(dxo, nx, dt);
    snprintf(name, sizeof name, "conv_bwd_data acc-desc [%s]", cc->name);
    check(name, dt, shape, Ddxo, dxo, nx, M_RED);

    float *prior = h_randn(nx, 0, 1, dt), *dxa = h_copy(prior, nx);
    void *Ddxa = d_from(prior, nx, dt);
    CREF->conv_bwd_data(&da, dy, w, dxa, 1, ws_ref);
    DEV->conv_bwd_data(&dda, Ddy, Dw, Ddxa, 1, ws_dev);
    ref_out(dxa, nx, dt);
    snprintf(name, sizeof name, "conv_bwd_data acc [%s]", cc->name);
    check(name, dt, shape, Ddxa, dxa, nx, M_RED);

    /* backward-filter (and bias), overwrite and accumulate */
    float *dw = h_new(nw), *db = h_new(nb);
    void *Ddw = d_poisoned(nw, dt), *Ddb = d_poisoned(nb, dt);
    CREF->conv_bwd_filter(&d, x, dy, dw, cc->bias ? db : NULL, 0, ws_ref);
    DEV->conv_bwd_filter(&dd, Dx, Ddy, Ddw, cc->bias ? Ddb : NULL, 0, ws_dev);
    ref_out(dw, nw, dt);
    snprintf(name, sizeof name, "conv_bwd_filter dw [%s]", cc->name);
    check(name, dt, shape, Ddw, dw, nw, M_RED);
    if (cc->bias) {
        ref_out(db, nb, dt);
        snprintf(name, sizeof name, "conv_bwd_filter dbias [%s]", cc->name);
        check(name, dt, shape, Ddb, db, nb, M_RED);
    }
    float *pw = h_randn(nw, 0, 1, dt), *pb = h_randn(nb, 0, 1, dt);
    float *dwa = h_copy(pw, nw), *dba = h_copy(pb, nb);
    void *Ddwa = d_from(pw, nw, dt), *Ddba = d_from(pb, nb, dt);
    CREF->conv_bwd_filter(&d, x, dy, dwa, cc->bias ? dba : NULL, 1, ws_ref);
    DEV->conv_bwd_filter(&dd, Dx, Ddy, Ddwa, cc->bias ? Ddba : NULL, 1, ws_dev);
    ref_out(dwa, nw, dt);
    snprintf(name, sizeof name, "conv_bwd_filter acc dw [%s]", cc->name);
    check(name, dt, shape, Ddwa, dwa, nw, M_RED);
    if (cc->bias) {
        ref_out(dba, nb, dt);
        snprintf(name, sizeof name, "conv_bwd_filter acc dbias [%s]", cc->name);
        check(name, dt, shape, Ddba, dba, nb, M_RED);
    }
    /* every shape above was planned: no algorithm search, no allocation in the ops */
    snprintf(name, sizeof name, "conv_workspace reserved, ops allocate nothing [%s]", cc->name);
    planned_row(name, dt, shape);
    release();
}

static void test_convs(void)
{
    if (!want_test("conv"))
        return;
    if (QUICK) {
        test_conv(&CONV_QUICK, F32);
        return;
    }
    for (size_t i = 0; i < sizeof CONV_CASES / sizeof CONV_CASES[0]; i++)
        ALL_DTYPES test_conv(&CONV_CASES[i], dt);
}

/* --- batch norm ----------------------------------------------------------------------------------- */

typedef struct bn_case {
    const char *name;
    int64_t rows;
    int c;
    int o3; /* fp16/bf16: also with the parameters and statistics of the row's type (O3's BN) */
} bn_case;

static const bn_case BN_CASES[] = {
    {"rows 784 c64", 784, 64, 1},
    {"rows 1001 c37 (odd)", 1001, 37, 1},
    {"rows 98 c300 (blocks)", 98, 300, 1},
    {"rows 392 c2048 (layer4)", 392, 2048, 0},
    {"rows 100352 c64 (32x56x56)", 100352, 64, 0},
};
/* --quick: fp32 at 37 channels (the scalar paths), fp16 and bf16 at 40 (c % 8 == 0: bn.cu's 8-wide
 * paths, which index 8 channels of a row at a time), O3's BN in fp16 */
static const bn_case BN_QUICK = {"rows 200 c37 (quick)", 200, 37, 0};
static const bn_case BN_QUICK8 = {"rows 203 c40 (quick, 8-wide)", 203, 40, 1};

/* BN's x: n values of c channels, N(0, 1.5^2) around an offset per channel (the one-pass variance must not
 * cancel), rounded to dt */
static float *h_bn_x(int64_t n, int c, int dt)
{
    float *off = h_uniform(c, -4, 4), *x = h_randn(n, 0, 1, F32);
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] * 1.5f + off[i % c];
    h_round(x, n, dt);
    return x;
}

/* Moves x away from where the fused ReLU's decision (x*scale + shift > 0) is within rounding of
 * zero, so that two correct implementations make the same decision; x stays in the dtype. */
static void bn_keep_off_zero(const dt_bn_desc *d, float *x, const float *gamma, const float *beta, int dt)
{
    if (LIST) /* the reference computes nothing */
        return;
    const int64_t n = d->rows * d->c;
    float *y = malloc((size_t)n * sizeof(float)), *saved = malloc(DT_BN_SAVED(d->c) * sizeof(float));
    float *rm = calloc((size_t)d->c, sizeof(float)), *rv = calloc((size_t)d->c, sizeof(float));
    if (!y || !saved || !rm || !rv)
        exit(1);
    for (int iter = 0; iter < 8; iter++) {
        REF->bn_fwd_train(d, x, gamma, beta, y, saved, rm, rv, 0);
        const float *invstd = saved + d->c, *scale = saved + 2 * d->c, *shift = saved + 3 * d->c;
        int64_t moved = 0;
        for (int64_t i = 0; i < n; i++) {
            int j = (int)(i % d->c);
            double v = (double)x[i] * scale[j] + shift[j], size = fabs((double)x[i] * scale[j]) + fabs(shift[j]);
            if (fabs(v) <= 1e-3 * size + 1e-30) {
                x[i] += (float)((v >= 0 ? 0.05 : -0.05) / invstd[j]);
                moved++;
            }
        }
        h_round(x, n, dt);
        if (!moved)
            break;
    }
    free(y);
    free(saved);
    free(rm);
    free(rv);
}

/* SyncBN's hook as two replicas holding the same batch would see it: every sum doubled, in place, in
 * the memory of the backend whose op calls it (ctx): the device's own buffer on a GPU, handed over as
 * a communicator that reduces device memory gets it (nn/backend.h, dt_bn_desc) */
static const dt_backend *sync_side[2]; /* the backend each descriptor's hook works through */
static int sync_twice(void *ctx, double *buf, int n)
{
    const dt_backend *b = *(const dt_backend **)ctx;
    double *h = malloc((size_t)n * sizeof(double));
    if (!h)
        exit(1);
    b->mem_get(h, buf, (size_t)n * sizeof(double));
    for (int i = 0; i < n; i++)
        h[i] *= 2;
    b->mem_put(buf, h, (size_t)n * sizeof(double));
    free(h);
    return 0;
}

/* BN's operands: x, y and their gradients of the row's type dt (xt, yt), the parameters, running
 * statistics and their gradients of type pdt (pt: fp32, as keep_batchnorm_fp32 has them, or the
 * row's type: O3), saved state fp32. d: the reference's descriptor (every type fp32), dd: the
 * device's. */

/* BN's training forward and backward with SyncBN on d's shape: both sides against each other */
static void test_bn_sync(const dt_bn_desc *d0, const dt_bn_desc *dd0, int dt, int pdt, const char *shape)
{
    const int c = d0->c;
    const int64_t n = d0->rows * c;
    dt_bn_desc dr = *d0, dd = *dd0;
    dr.sync = dd.sync = sync_twice;
    sync_side[0] = REF;
    sync_side[1] = DEV;
    dr.sync_ctx = &sync_side[0];
    dd.sync_ctx = &sync_side[1];
    plan_scratch(DEV->bn_scratch(&dd));
    float *x = h_bn_x(n, c, dt);
    float *gamma = h_randn(c, 1, 0.3, pdt), *beta = h_randn(c, 0, 0.5, pdt);
    float *rm0 = h_randn(c, 0, 0.1, pdt), *rv0 = h_uniform(c, 0.5, 1.5);
    h_round(rv0, c, pdt);
    void *Dx = d_from(x, n, dt), *Dg = d_from(gamma, c, pdt), *Db = d_from(beta, c, pdt);
    float *y = h_new(n), *saved = h_new((int64_t)DT_BN_SAVED(c)), *rm = h_copy(rm0, c), *rv = h_copy(rv0, c);
    void *Dy = d_poisoned(n, dt), *Drm = d_from(rm0, c, pdt), *Drv = d_from(rv0, c, pdt);
    float *Dsaved = d_poisoned((int64_t)DT_BN_SAVED(c), F32);
    REF->bn_fwd_train(&dr, x, gamma, beta, y, saved, rm, rv, 0);
    DEV->bn_fwd_train(&dd, Dx, Dg, Db, Dy, Dsaved, Drm, Drv, 0);
    ref_out(y, n, dt);
    check("bn_fwd_train syncbn y", dt, shape, Dy, y, n, M_RED);
    cmp_f32_as("bn_fwd_train syncbn saved", dt, F32, shape, d_result(Dsaved, (int64_t)DT_BN_SAVED(c), F32), saved,
            (int64_t)DT_BN_SAVED(c), M_RED);
    ref_out(rv, c, pdt);
    cmp_f32_as("bn_fwd_train syncbn running_var", dt, pdt, shape, d_result(Drv, c, pdt), rv, c, M_RED);
    float *dy = h_randn(n, 0, 1, dt), *dx = h_new(n), *dg = h_new(c), *db = h_new(c);
    void *Ddy = d_from(dy, n, dt), *Ddx = d_poisoned(n, dt), *Ddg = d_poisoned(c, pdt), *Ddb = d_poisoned(c, pdt);
    REF->bn_bwd(&dr, x, dy, 0, gamma, saved, dx, dg, db, 0, 0);
    DEV->bn_bwd(&dd, Dx, Ddy, 0, Dg, Dsaved, Ddx, Ddg, Ddb, 0, 0);
    ref_out(dx, n, dt);
    check("bn_bwd syncbn dx", dt, shape, Ddx, dx, n, M_RED);
    ref_out(dg, c, pdt);
    cmp_f32_as("bn_bwd syncbn dgamma", dt, pdt, shape, d_result(Ddg, c, pdt), dg, c, M_RED);
    release();
}

/* the residual block's tail in one op each way (bn_add_relu_*) on d's shape: both sides against each
 * other, the backward's mask from a given block output (as a model keeps it); the residual and its
 * gradient of y's type */
static void test_bn_add_relu(const dt_bn_desc *d, const dt_bn_desc *dd, int dt, int pdt, const char *shape)
{
    const int c = d->c;
    const int64_t n = d->rows * c;
    const dt_dtype rt = ty(dt);
    float *x = h_bn_x(n, c, dt);
    float *gamma = h_randn(c, 1, 0.3, pdt), *beta = h_randn(c, 0, 0.5, pdt), *r = h_randn(n, 0, 1, dt);
    float *rm0 = h_randn(c, 0, 0.1, pdt), *rv0 = h_uniform(c, 0.5, 1.5);
    h_round(rv0, c, pdt);
    void *Dx = d_from(x, n, dt), *Dg = d_from(gamma, c, pdt), *Db = d_from(beta, c, pdt), *Dr = d_from(r, n, dt);
    float *y = h_new(n), *saved = h_new((int64_t)DT_BN_SAVED(c)), *rm = h_copy(rm0, c), *rv = h_copy(rv0, c);
    void *Dy = d_poisoned(n, dt), *Drm = d_from(rm0, c, pdt), *Drv = d_from(rv0, c, pdt);
    float *Dsaved = d_poisoned((int64_t)DT_BN_SAVED(c), F32);
    REF->bn_add_relu_fwd_train(d, x, gamma, beta, r, S32, y, saved, rm, rv);
    DEV->bn_add_relu_fwd_train(dd, Dx, Dg, Db, Dr, rt, Dy, Dsaved, Drm, Drv);
    ref_out(y, n, dt);
    check("bn_add_relu_fwd_train y", dt, shape, Dy, y, n, M_RED);
    cmp_f32_as("bn_add_relu_fwd_train saved", dt, F32, shape, d_result(Dsaved, (int64_t)DT_BN_SAVED(c), F32), saved,
            (int64_t)DT_BN_SAVED(c), M_RED);
    ref_out(rv, c, pdt);
    cmp_f32_as("bn_add_relu_fwd_train running_var", dt, pdt, shape, d_result(Drv, c, pdt), rv, c, M_RED);
    float *yi = h_new(n);
    void *Dyi = d_poisoned(n, dt), *Drm0 = d_from(rm0, c, pdt), *Drv0 = d_from(rv0, c, pdt);
    REF->bn_add_relu_fwd_infer(d, x, gamma, beta, rm0, rv0, r, S32, yi);
    DEV->bn_add_relu_fwd_infer(dd, Dx, Dg, Db, Drm0, Drv0, Dr, rt, Dyi);
    ref_out(yi, n, dt);
    check("bn_add_relu_fwd_infer y", dt, shape, Dyi, yi, n, M_ELT);
    /* backward: the same block output for both (its zeros are the mask), each side's own saved state */
    float *yo = h_randn(n, 0, 1, dt), *dy = h_randn(n, 0, 1, dt);
    void *Dyo = d_from(yo, n, dt), *Ddy = d_from(dy, n, dt);
    for (int acc = 0; acc <= 1; acc++) {
        float *p0 = h_randn(n, 0, 1, dt), *p1 = h_randn(n, 0, 1, dt), *p2 = h_randn(c, 0, 1, pdt);
        float *p3 = h_randn(c, 0, 1, pdt);
        float *dx = h_copy(p0, n), *dr = h_copy(p1, n), *dg = h_copy(p2, c), *db = h_copy(p3, c);
        void *Ddx = d_from(p0, n, dt), *Ddr = d_from(p1, n, dt), *Ddg = d_from(p2, c, pdt), *Ddb = d_from(p3, c, pdt);
        REF->bn_add_relu_bwd(d, x, yo, dy, gamma, saved, dx, dr, S32, dg, db, acc, acc, acc);
        DEV->bn_add_relu_bwd(dd, Dx, Dyo, Ddy, Dg, Dsaved, Ddx, Ddr, rt, Ddg, Ddb, acc, acc, acc);
        ref_out(dx, n, dt);
        ref_out(dr, n, dt);
        ref_out(dg, c, pdt);
        ref_out(db, c, pdt);
        check(acc ? "bn_add_relu_bwd acc dx" : "bn_add_relu_bwd dx", dt, shape, Ddx, dx, n, M_RED);
        check(acc ? "bn_add_relu_bwd acc dr" : "bn_add_relu_bwd dr", dt, shape, Ddr, dr, n, M_ELT);
        cmp_f32_as(acc ? "bn_add_relu_bwd acc dgamma" : "bn_add_relu_bwd dgamma", dt, pdt, shape, d_result(Ddg, c, pdt), dg,
                c, M_RED);
        cmp_f32_as(acc ? "bn_add_relu_bwd acc dbeta" : "bn_add_relu_bwd dbeta", dt, pdt, shape, d_result(Ddb, c, pdt), db, c,
                M_RED);
    }
    release();
}

/* o3: the parameters and statistics (and their gradients) of the row's type too */
static void test_bn(const bn_case *bc, int dt, int o3)
{
    if (!unit("bn [%s] %s%s", bc->name, DTYPE_NAME[dt], o3 ? " O3" : ""))
        return;
    char name[96], shape[64];
    snprintf(shape, sizeof shape, "%s%s", bc->name, o3 ? ", O3" : "");
    const int c = bc->c, pdt = o3 ? dt : F32;
    const int64_t n = bc->rows * c;
    dt_bn_desc d = {.rows = bc->rows, .c = c, .eps = 1e-5f, .momentum = 0.1f, .xt = S32, .yt = S32, .pt = S32};
    dt_bn_desc dd = d;
    dd.xt = dd.yt = ty(dt);
    dd.pt = ty(pdt);
    plan_scratch(DEV->bn_scratch(&dd));
    for (int relu = 0; relu <= 1; relu++) {
        float *x = h_bn_x(n, c, dt);
        float *gamma = h_randn(c, 1, 0.3, pdt), *beta = h_randn(c, 0, 0.5, pdt);
        if (relu)
            bn_keep_off_zero(&d, x, gamma, beta, dt);
        float *rm0 = h_randn(c, 0, 0.1, pdt), *rv0 = h_uniform(c, 0.5, 1.5);
        h_round(rv0, c, pdt);
        void *Dx = d_from(x, n, dt), *Dg = d_from(gamma, c, pdt), *Db = d_from(beta, c, pdt);

        /* training forward: y, saved, running statistics */
        float *y = h_new(n), *saved = h_new((int64_t)DT_BN_SAVED(c)), *rm = h_copy(rm0, c), *rv = h_copy(rv0, c);
        void *Dy = d_poisoned(n, dt), *Drm = d_from(rm0, c, pdt), *Drv = d_from(rv0, c, pdt);
        float *Dsaved = d_poisoned((int64_t)DT_BN_SAVED(c), F32);
        REF->bn_fwd_train(&d, x, gamma, beta, y, saved, rm, rv, relu);
        DEV->bn_fwd_train(&dd, Dx, Dg, Db, Dy, Dsaved, Drm, Drv, relu);
        ref_out(y, n, dt);
        snprintf(name, sizeof name, "bn_fwd_train%s y", relu ? "+relu" : "");
        check(name, dt, shape, Dy, y, n, M_RED);
        /* saved state is fp32 at every level, the running statistics of the parameters' type (the
         * dtype column says which inputs were reduced) */
        snprintf(name, sizeof name, "bn_fwd_train%s saved", relu ? "+relu" : "");
        cmp_f32_as(name, dt, F32, shape, d_result(Dsaved, (int64_t)DT_BN_SAVED(c), F32), saved, (int64_t)DT_BN_SAVED(c),
                M_RED);
        ref_out(rm, c, pdt);
        ref_out(rv, c, pdt);
        snprintf(name, sizeof name, "bn_fwd_train%s running_mean", relu ? "+relu" : "");
        cmp_f32_as(name, dt, pdt, shape, d_result(Drm, c, pdt), rm, c, M_RED);
        snprintf(name, sizeof name, "bn_fwd_train%s running_var", relu ? "+relu" : "");
        cmp_f32_as(name, dt, pdt, shape, d_result(Drv, c, pdt), rv, c, M_RED);

        /* inference forward from the running statistics */
        float *yi = h_new(n);
        void *Dyi = d_poisoned(n, dt), *Drm0 = d_from(rm0, c, pdt), *Drv0 = d_from(rv0, c, pdt);
        REF->bn_fwd_infer(&d, x, gamma, beta, rm0, rv0, yi, relu);
        DEV->bn_fwd_infer(&dd, Dx, Dg, Db, Drm0, Drv0, Dyi, relu);
        ref_out(yi, n, dt);
        snprintf(name, sizeof name, "bn_fwd_infer%s", relu ? "+relu" : "");
        check(name, dt, shape, Dyi, yi, n, M_ELT);

        /* backward, from each side's own saved state (as a model runs it) */
        float *dy = h_randn(n, 0, 1, dt);
        void *Ddy = d_from(dy, n, dt);
        for (int acc = 0; acc <= 1; acc++) {
            float *dx, *dg, *db;
            void *Ddx, *Ddg, *Ddb;
            if (acc) {
                float *p0 = h_randn(n, 0, 1, dt), *p1 = h_randn(c, 0, 1, pdt), *p2 = h_randn(c, 0, 1, pdt);
                dx = h_copy(p0, n);
                dg = h_copy(p1, c);
                db = h_copy(p2, c);
                Ddx = d_from(p0, n, dt);
                Ddg = d_from(p1, c, pdt);
                Ddb = d_from(p2, c, pdt);
            } else {
                dx = h_new(n);
                dg = h_new(c);
                db = h_new(c);
                Ddx = d_poisoned(n, dt);
                Ddg = d_poisoned(c, pdt);
                Ddb = d_poisoned(c, pdt);
            }
            REF->bn_bwd(&d, x, dy, relu, gamma, saved, dx, dg, db, acc, acc);
            DEV->bn_bwd(&dd, Dx, Ddy, relu, Dg, Dsaved, Ddx, Ddg, Ddb, acc, acc);
            ref_out(dx, n, dt);
            ref_out(dg, c, pdt);
            ref_out(db, c, pdt);
            snprintf(name, sizeof name, "bn_bwd%s%s dx", relu ? "+relu" : "", acc ? " acc" : "");
            check(name, dt, shape, Ddx, dx, n, M_RED);
            snprintf(name, sizeof name, "bn_bwd%s%s dgamma", relu ? "+relu" : "", acc ? " acc" : "");
            cmp_f32_as(name, dt, pdt, shape, d_result(Ddg, c, pdt), dg, c, M_RED);
            snprintf(name, sizeof name, "bn_bwd%s%s dbeta", relu ? "+relu" : "", acc ? " acc" : "");
            cmp_f32_as(name, dt, pdt, shape, d_result(Ddb, c, pdt), db, c, M_RED);
        }
        /* dx alone accumulating, the parameters overwritten (a block input's gradient) */
        {
            float *p0 = h_randn(n, 0, 1, dt), *dx = h_copy(p0, n), *dg = h_new(c), *db = h_new(c);
            void *Ddx = d_from(p0, n, dt), *Ddg = d_poisoned(c, pdt), *Ddb = d_poisoned(c, pdt);
            REF->bn_bwd(&d, x, dy, relu, gamma, saved, dx, dg, db, 1, 0);
            DEV->bn_bwd(&dd, Dx, Ddy, relu, Dg, Dsaved, Ddx, Ddg, Ddb, 1, 0);
            ref_out(dx, n, dt);
            ref_out(dg, c, pdt);
            snprintf(name, sizeof name, "bn_bwd%s acc_dx only dx", relu ? "+relu" : "");
            check(name, dt, shape, Ddx, dx, n, M_RED);
            snprintf(name, sizeof name, "bn_bwd%s acc_dx only dgamma", relu ? "+relu" : "");
            cmp_f32_as(name, dt, pdt, shape, d_result(Ddg, c, pdt), dg, c, M_RED);
        }
        release();
    }
    test_bn_sync(&d, &dd, dt, pdt, shape);
    test_bn_add_relu(&d, &dd, dt, pdt, shape);
    planned_row("bn_scratch reserved, ops allocate nothing", dt, shape);
}

static void test_bns(void)
{
    if (!want_test("bn"))
        return;
    if (QUICK) {
        test_bn(&BN_QUICK, F32, 0);
        if (stores(F16)) {
            test_bn(&BN_QUICK8, F16, 0);
            test_bn(&BN_QUICK8, F16, 1);
        }
        if (stores(BF16))
            test_bn(&BN_QUICK8, BF16, 0);
        return;
    }
    for (size_t i = 0; i < sizeof BN_CASES / sizeof BN_CASES[0]; i++)
        ALL_DTYPES
        {
            test_bn(&BN_CASES[i], dt, 0);
            if (dt != F32 && BN_CASES[i].o3)
                test_bn(&BN_CASES[i], dt, 1);
        }
}

/* --- layer norm ------------------------------------------------------------------------------------ */

typedef struct ln_case {
    const char *name;
    int64_t rows;
    int c;
    float eps;
    int o3; /* fp16/bf16: also with the parameters and their gradients of the row's type */
} ln_case;

/* rows of up to 1024 values run a warp a row on the device, longer ones a block a row */
static const ln_case LN_CASES[] = {
    {"rows 6272 c96 (convnext)", 6272, 96, 1e-6f, 1},
    {"rows 1001 c37 (odd)", 1001, 37, 1e-5f, 1},
    {"rows 394 c768 (vit)", 394, 768, 1e-6f, 0},
    {"rows 98 c1500 (block a row)", 98, 1500, 1e-5f, 1},
    {"rows 3 c4100", 3, 4100, 1e-5f, 0},
    {"rows 7 c1", 7, 1, 1e-5f, 0},
};
static const ln_case LN_QUICK = {"rows 200 c37 (quick)", 200, 37, 1e-5f, 0};

/* ln_fwd and ln_bwd: x, y, dx, dy of the row's type dt, the parameters and their gradients of pdt (fp32,
 * or the row's type: O3), saved fp32; the backward on each side's own saved statistics (as a model
 * runs it), with both flags, each flag alone, and dx NULL */
static void test_ln(const ln_case *lc, int dt, int o3)
{
    if (!unit("ln [%s] %s%s", lc->name, DTYPE_NAME[dt], o3 ? " O3" : ""))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "%s%s", lc->name, o3 ? ", O3" : "");
    const int64_t rows = lc->rows, n = rows * lc->c;
    const int c = lc->c, pdt = o3 ? dt : F32;
    const dt_dtype T = ty(dt), P = ty(pdt);
    plan_scratch(0); /* no planning op: the ops need no scratch */
    /* each row with its own offset and scale (the variance must not come from cancellation) */
    float *off = h_uniform(rows, -4, 4), *sc = h_uniform(rows, 0.2, 3), *x = h_randn(n, 0, 1, F32);
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] * sc[i / c] + off[i / c];
    h_round(x, n, dt);
    float *gamma = h_randn(c, 1, 0.3, pdt), *beta = h_randn(c, 0, 0.5, pdt);
    void *Dx = d_from(x, n, dt), *Dg = d_from(gamma, c, pdt), *Db = d_from(beta, c, pdt);
    float *y = h_new(n), *saved = h_new(2 * rows);
    void *Dy = d_poisoned(n, dt);
    float *Dsaved = d_poisoned(2 * rows, F32);
    REF->ln_fwd(rows, c, lc->eps, x, S32, gamma, beta, S32, y, S32, saved);
    DEV->ln_fwd(rows, c, lc->eps, Dx, T, Dg, Db, P, Dy, T, Dsaved);
    ref_out(y, n, dt);
    check("ln_fwd y", dt, shape, Dy, y, n, M_RED);
    const float *got_saved = d_result(Dsaved, 2 * rows, F32);
    cmp_f32_as("ln_fwd saved mean", dt, F32, shape, got_saved, saved, rows, M_RED);
    cmp_f32_as("ln_fwd saved rstd", dt, F32, shape, got_saved + rows, saved + rows, rows, M_RED);

    float *dy = h_randn(n, 0, 1, dt);
    void *Ddy = d_from(dy, n, dt);
    static const struct {
        const char *name;
        int acc_dx, acc_params, dx;
    } v[] = {{"ln_bwd", 0, 0, 1},
             {"ln_bwd acc", 1, 1, 1},
             {"ln_bwd acc_dx only", 1, 0, 1},
             {"ln_bwd acc_params only", 0, 1, 1},
             {"ln_bwd (dx NULL)", 0, 0, 0}};
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        /* an accumulating output starts from the same random values on both sides, an overwritten
         * one from zeros (reference) and the poison (device) */
        float *dx = v[k].acc_dx ? h_randn(n, 0, 1, dt) : h_new(n);
        float *dg = v[k].acc_params ? h_randn(c, 0, 1, pdt) : h_new(c);
        float *db = v[k].acc_params ? h_randn(c, 0, 1, pdt) : h_new(c);
        void *Ddx = v[k].acc_dx ? d_from(dx, n, dt) : d_poisoned(n, dt);
        void *Ddg = v[k].acc_params ? d_from(dg, c, pdt) : d_poisoned(c, pdt);
        void *Ddb = v[k].acc_params ? d_from(db, c, pdt) : d_poisoned(c, pdt);
        REF->ln_bwd(rows, c, x, S32, gamma, S32, saved, dy, S32, v[k].dx ? dx : NULL, dg, db, v[k].acc_dx,
                    v[k].acc_params);
        DEV->ln_bwd(rows, c, Dx, T, Dg, P, Dsaved, Ddy, T, v[k].dx ? Ddx : NULL, Ddg, Ddb, v[k].acc_dx,
                    v[k].acc_params);
        char name[64];
        if (v[k].dx) {
            ref_out(dx, n, dt);
            snprintf(name, sizeof name, "%s dx", v[k].name);
            check(name, dt, shape, Ddx, dx, n, M_RED);
        }
        ref_out(dg, c, pdt);
        ref_out(db, c, pdt);
        snprintf(name, sizeof name, "%s dgamma", v[k].name);
        cmp_f32_as(name, dt, pdt, shape, d_result(Ddg, c, pdt), dg, c, M_RED);
        snprintf(name, sizeof name, "%s dbeta", v[k].name);
        cmp_f32_as(name, dt, pdt, shape, d_result(Ddb, c, pdt), db, c, M_RED);
    }
    release();
    planned_row("ln_fwd, ln_bwd allocate nothing", dt, shape);
}

static void test_lns(void)
{
    if (!want_test("ln"))
        return;
    if (QUICK) {
        ALL_DTYPES test_ln(&LN_QUICK, dt, 0);
        return;
    }
    for (size_t i = 0; i < sizeof LN_CASES / sizeof LN_CASES[0]; i++)
        ALL_DTYPES
        {
            test_ln(&LN_CASES[i], dt, 0);
            if (dt != F32 && LN_CASES[i].o3)
                test_ln(&LN_CASES[i], dt, 1);
        }
}

/* --- channel slices -------------------------------------------------------------------------------- */

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
    if (!want_test("chan_copy"))
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
            ref_out(y, rows * w, to);
            char name[64];
            snprintf(name, sizeof name, "chan_copy concat%s", tv[k].suffix);
            check_as(name, dt, to, cases[i].name, Dy, y, rows * w, M_BITS);
            float *dy = h_randn(rows * w, 0, 1, st), *da = h_randn(rows * c1, 0, 1, to), *db = h_new(rows * c2);
            void *Ddy = d_from(dy, rows * w, st), *Dda = d_from(da, rows * c1, to), *Ddb = d_poisoned(rows * c2, to);
            REF->chan_copy(rows, c1, dy, w, pad, S32, da, c1, 0, S32, 1);
            REF->chan_copy(rows, c2, dy, w, pad + c1, S32, db, c2, 0, S32, 0);
            DEV->chan_copy(rows, c1, Ddy, w, pad, S, Dda, c1, 0, D, 1);
            DEV->chan_copy(rows, c2, Ddy, w, pad + c1, S, Ddb, c2, 0, D, 0);
            ref_out(da, rows * c1, to);
            ref_out(db, rows * c2, to);
            snprintf(name, sizeof name, "chan_copy acc slice%s", tv[k].suffix);
            check_as(name, dt, to, cases[i].name, Dda, da, rows * c1, M_BITS);
            snprintf(name, sizeof name, "chan_copy slice%s", tv[k].suffix);
            check_as(name, dt, to, cases[i].name, Ddb, db, rows * c2, M_BITS);
            release();
        }
}

/* --- ViT: the tokens and attention ---------------------------------------------------------------- */

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
    char shape[64], name[64];
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
    ref_out(y, ny, dt);
    check("tokens_fwd y", dt, shape, Dy, y, ny, M_BITS);

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
            ref_out(dx, nx, dt);
            snprintf(name, sizeof name, "%s dx", v[k].name);
            check(name, dt, shape, Ddx, dx, nx, M_BITS);
        }
        ref_out(dcls, d, pdt);
        ref_out(dpos, npos, pdt);
        snprintf(name, sizeof name, "%s dcls", v[k].name);
        cmp_f32_as(name, dt, pdt, shape, d_result(Ddcls, d, pdt), dcls, d, M_RED);
        snprintf(name, sizeof name, "%s dpos", v[k].name);
        cmp_f32_as(name, dt, pdt, shape, d_result(Ddpos, npos, pdt), dpos, npos, M_RED);
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
    ref_out(y, ny, ydt);
    snprintf(name, sizeof name, "attn_fwd y%s", suffix);
    check_as(name, dt, ydt, shape, Dy, y, ny, M_RED);
    snprintf(name, sizeof name, "attn_fwd p%s", suffix);
    cmp_f32_as(name, dt, F32, shape, d_result(Dp, np, F32), p, np, M_RED);

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
static void test_vit(void)
{
    if (!want_test("attn"))
        return;
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

/* --- the scalars block (nn/scalars.h) ------------------------------------------------------------- */

/* A dt_scalars for the ops that read or write it: the reference's on the host, the device's a copy
 * of it in device memory (mem_put), read back with mem_get. s_clean: zeroed, with the numbers an op
 * reads set as a step has them (lr, scale 1, the dynamic scaler's defaults). */
static dt_scalars s_clean(void)
{
    dt_scalars s;
    memset(&s, 0, sizeof s); /* the layout has no padding (checked by scalars_differ) */
    s.lr = 0.1f;
    s.step = 7;
    s.scale = 1.0;
    s.scale_f = 1.0f;
    s.inv_scale = 1.0f;
    s.dynamic = 1;
    s.growth = 2.0;
    s.backoff = 0.5;
    s.max_scale = 0x1p24;
    s.growth_interval = 2000;
    s.max_nonfinite = 10;
    return s;
}

static dt_scalars *d_scalars(const dt_scalars *h)
{
    dt_scalars *d = d_bytes(sizeof *h);
    DEV->mem_put(d, h, sizeof *h);
    return d;
}

static dt_scalars d_scalars_get(const dt_scalars *d)
{
    dt_scalars h;
    DEV->mem_get(&h, d, sizeof h);
    return h;
}

/* one field of the device's block written from the host (the test setting what a step's start would) */
static void d_scalars_set(dt_scalars *d, size_t off, const void *v, size_t bytes)
{
    DEV->mem_put((char *)d + off, v, bytes);
}

#define SF(f) {#f, offsetof(dt_scalars, f), sizeof(((dt_scalars *)0)->f), 0}
#define SF_LOSS(f) {#f, offsetof(dt_scalars, f), sizeof(((dt_scalars *)0)->f), 1}
static const struct {
    const char *name;
    size_t off, size;
    int loss; /* a double sum of a loss: relative tolerance TOL_LOSS when asked for */
} SFIELDS[] = {
    SF(agree), SF(lr), SF(in_reserved), SF(step), SF(model_step), SF(mixing), SF(mix_lam), SF(mix_rest),
    SF(in_reserved2), SF(skipped), SF(diverged), SF(scale), SF(clean_steps),
    SF(overflows), SF(sgd_steps), SF(in_a_row), SF(scale_f), SF(inv_scale), SF(dynamic), SF(reserved),
    SF(growth), SF(backoff), SF(max_scale), SF(min_scale), SF(growth_interval), SF(max_nonfinite), SF(grad_sumsq),
    SF(clip_norm), SF(reserved2),
    SF_LOSS(loss), SF_LOSS(loss_sum), SF(hits1), SF(hits5), SF(rows), SF(nonfinite_rows),
};
#undef SF
#undef SF_LOSS

/* the fields of got that differ from want (bit patterns; loss and loss_sum within TOL_LOSS relative
 * when loose, non-finite values then matching as values do), named into names; -1 when the field
 * table above no longer covers the struct */
static int scalars_differ(const dt_scalars *got, const dt_scalars *want, int loose, char *names, size_t len)
{
    size_t covered_bytes = 0;
    int bad = 0;
    names[0] = 0;
    for (size_t i = 0; i < sizeof SFIELDS / sizeof SFIELDS[0]; i++) {
        const char *a = (const char *)got + SFIELDS[i].off, *b = (const char *)want + SFIELDS[i].off;
        covered_bytes += SFIELDS[i].size;
        int ok;
        if (loose && SFIELDS[i].loss) {
            double x, y;
            memcpy(&x, a, sizeof x);
            memcpy(&y, b, sizeof y);
            ok = isfinite(x) && isfinite(y) ? fabs(x - y) <= TOL_LOSS * fmax(fabs(y), 1e-30)
                                            : (isnan(x) && isnan(y)) || x == y;
        } else {
            ok = !memcmp(a, b, SFIELDS[i].size);
        }
        if (!ok) {
            size_t at = strlen(names);
            snprintf(names + at, len - at, "%s%s", bad ? " " : "", SFIELDS[i].name);
            bad++;
        }
    }
    return covered_bytes == sizeof(dt_scalars) ? bad : -1;
}

static void print_scalars(const char *who, const dt_scalars *s)
{
    printf("      %s: agree {%d %d} lr %.9g skipped %d diverged %d scale %.17g clean %lld overflows %lld sgd_steps %lld "
           "in_a_row %lld scale_f %.9g inv_scale %.9g loss %.17g loss_sum %.17g hits1 %lld hits5 %lld rows %lld "
           "nonfinite %lld\n",
           who, s->agree[0], s->agree[1], (double)s->lr, s->skipped, s->diverged, s->scale, (long long)s->clean_steps,
           (long long)s->overflows, (long long)s->sgd_steps, (long long)s->in_a_row, (double)s->scale_f,
           (double)s->inv_scale, s->loss, s->loss_sum, (long long)s->hits1, (long long)s->hits5, (long long)s->rows,
           (long long)s->nonfinite_rows);
}

/* one row: the device's block (read back) against the reference's, every field */
static int cmp_scalars(const char *op, int dt, const char *shape, const dt_scalars *Ds, const dt_scalars *want,
                       int loose)
{
    const char *dts = dt < 0 ? "-" : DTYPE_NAME[dt];
    if (LIST) {
        row(op, dts, shape, 0, 0, M_EXACT, 0, 1);
        return 1;
    }
    dt_scalars got = d_scalars_get(Ds);
    char names[512];
    int bad = scalars_differ(&got, want, loose, names, sizeof names);
    row(op, dts, shape, bad, bad, loose ? M_LOSS : M_BITS, loose ? TOL_LOSS : 0, bad == 0);
    if (bad < 0)
        printf("      ops_check's field table does not cover dt_scalars (scalars.h changed): update SFIELDS\n");
    else if (bad) {
        printf("      fields that differ: %s\n", names);
        print_scalars("got ", &got);
        print_scalars("want", want);
    }
    return bad == 0;
}

/* --- element-wise ----------------------------------------------------------------------------------- */

/* adam and rmsprop rows (torch.optim's Adam, AdamW, RMSprop): as sgd's, p of the row's type then fp32
 * (master weights), g as written and scaled by 1024 with 1/scale 1/1024, the state fp32; at the
 * first step and a later one (the bias corrections read sgd_steps), clipped, and skipped */
static void check_adaptive(int dt, const char *shape, int rms)
{
    static const struct {
        const char *name;
        double wd, mom; /* adam: mom 1 = AdamW; rmsprop: the momentum */
        int64_t steps;  /* sgd_steps before the update */
        int skip, clip;
    } adam[] = {
        {"adam first step", 1e-2, 0, 0, 0, 0},        {"adam step 5", 1e-2, 0, 4, 0, 0},
        {"adamw first step", 5e-2, 1, 0, 0, 0},       {"adamw step 5 no wd", 0, 1, 4, 0, 0},
        {"adamw clipped", 5e-2, 1, 4, 0, 1},          {"adamw skipped (overflow)", 5e-2, 1, 4, 1, 0},
    }, rmsprop[] = {
        {"rmsprop momentum 0.9", 1e-4, 0.9, 3, 0, 0}, {"rmsprop no momentum (buf NULL)", 1e-4, 0, 3, 0, 0},
        {"rmsprop clipped", 0, 0.9, 3, 0, 1},         {"rmsprop skipped (overflow)", 1e-4, 0.9, 3, 1, 0},
    };
    const size_t nv = rms ? sizeof rmsprop / sizeof rmsprop[0] : sizeof adam / sizeof adam[0];
    const dt_dtype T = ty(dt);
    for (int master = 0; master <= (dt != F32); master++)
        for (size_t k = 0; k < nv; k++) {
            const __typeof__(adam[0]) *v = rms ? &rmsprop[k] : &adam[k];
            const int pt = master ? F32 : dt, has_buf = !rms || v->mom > 0;
            float *p = h_randn(NE, 0, 0.05, pt), *g = h_randn(NE, 0, 0.01, dt), *m1 = h_randn(NE, 0, 0.01, F32),
                  *m2 = h_randn(NE, 0, 1e-4, F32);
            for (int64_t i = 0; i < NE; i++) /* a second moment is never negative */
                m2[i] = fabsf(m2[i]);
            float *in[2][4] = {{p, g, m1, m2}, {h_copy(p, NE), h_copy(g, NE), h_copy(m1, NE), h_copy(m2, NE)}};
            for (int scaled = 0; scaled < 2; scaled++) {
                float *p1 = in[scaled][0], *g1 = in[scaled][1], *a1 = in[scaled][2], *b1 = in[scaled][3];
                if (scaled)
                    for (int64_t i = 0; i < NE; i++)
                        g1[i] *= 1024.0f;
                dt_scalars hs = s_clean();
                hs.lr = rms ? 0.01f : 1e-3f;
                hs.inv_scale = scaled ? 1.0f / 1024 : 1.0f;
                hs.sgd_steps = v->steps;
                hs.agree[DT_AGREE_OVERFLOW] = v->skip;
                if (v->clip) {
                    hs.grad_sumsq = 4.0;
                    hs.clip_norm = 0.5f;
                }
                const dt_scalars hs0 = hs;
                dt_scalars *Ds = d_scalars(&hs);
                void *Dp = d_from(p1, NE, pt), *Dg = d_from(g1, NE, dt);
                float *Da = d_from(a1, NE, F32), *Db = d_from(b1, NE, F32);
                if (rms) {
                    REF->rmsprop(NE, p1, S32, g1, S32, b1, has_buf ? a1 : NULL, 0.9, 0.0316, v->wd, v->mom, &hs);
                    DEV->rmsprop(NE, Dp, ty(pt), Dg, T, Db, has_buf ? Da : NULL, 0.9, 0.0316, v->wd, v->mom, Ds);
                } else {
                    REF->adam(NE, p1, S32, g1, S32, a1, b1, 0.9, 0.999, 1e-8, v->wd, v->mom != 0, &hs);
                    DEV->adam(NE, Dp, ty(pt), Dg, T, Da, Db, 0.9, 0.999, 1e-8, v->wd, v->mom != 0, Ds);
                }
                ref_out(p1, NE, pt);
                char tag[48], op[128];
                const int mode = v->skip ? M_BITS : M_ELT;
                snprintf(tag, sizeof tag, "%s%s", master ? " (p fp32)" : "", scaled ? " 1/scale 1/1024" : "");
                snprintf(op, sizeof op, "%s%s p", v->name, tag);
                check_as(op, dt, pt, shape, Dp, p1, NE, mode);
                if (has_buf) {
                    snprintf(op, sizeof op, "%s%s %s", v->name, tag, rms ? "momentum" : "exp_avg");
                    check_as(op, dt, F32, shape, Da, a1, NE, mode);
                }
                snprintf(op, sizeof op, "%s%s %s", v->name, tag, rms ? "square_avg" : "exp_avg_sq");
                check_as(op, dt, F32, shape, Db, b1, NE, mode);
                snprintf(op, sizeof op, "%s%s scalars unchanged", v->name, tag);
                cmp_scalars(op, dt, shape, Ds, &hs0, 0);
            }
            release();
        }
}

static void test_eltwise(int dt)
{
    if (!unit("eltwise %s", DTYPE_NAME[dt]))
        return;
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    if (want_test("relu")) {
        float *x = h_randn(NE, 0, 1, dt);
        x[0] = 0.0f;
        x[1] = -0.0f;
        x[NE - 1] = 0.0f;
        float *y = h_new(NE);
        void *Dx = d_from(x, NE, dt), *Dy = d_poisoned(NE, dt);
        REF->relu_fwd(NE, S32, x, y);
        DEV->relu_fwd(NE, T, Dx, Dy);
        ref_out(y, NE, dt);
        check("relu_fwd", dt, shape, Dy, y, NE, M_EXACT);
        /* in place, as the model runs a ReLU whose input has no other reader */
        void *Dxi = d_from(x, NE, dt);
        DEV->relu_fwd(NE, T, Dxi, Dxi);
        check("relu_fwd in place", dt, shape, Dxi, y, NE, M_EXACT);

        float *dy = h_randn(NE, 0, 1, dt), *dx = h_new(NE);
        void *Ddy = d_from(dy, NE, dt), *Dyr = d_from(y, NE, dt), *Ddx = d_poisoned(NE, dt);
        REF->relu_bwd(NE, S32, y, dy, dx, 0);
        DEV->relu_bwd(NE, T, Dyr, Ddy, Ddx, 0);
        ref_out(dx, NE, dt);
        check("relu_bwd", dt, shape, Ddx, dx, NE, M_EXACT);
        float *prior = h_randn(NE, 0, 1, dt), *dxa = h_copy(prior, NE);
        void *Ddxa = d_from(prior, NE, dt);
        REF->relu_bwd(NE, S32, y, dy, dxa, 1);
        DEV->relu_bwd(NE, T, Dyr, Ddy, Ddxa, 1);
        ref_out(dxa, NE, dt);
        check("relu_bwd acc", dt, shape, Ddxa, dxa, NE, M_EXACT);
        void *Ddyi = d_from(dy, NE, dt);
        DEV->relu_bwd(NE, T, Dyr, Ddyi, Ddyi, 0);
        check("relu_bwd in place (dx = dy)", dt, shape, Ddyi, dx, NE, M_EXACT);
        release();
    }
    if (want_test("add")) {
        /* every operand of the row's type (and in place); then, in fp16/bf16 rows, one operand fp32 */
        static const struct {
            const char *name;
            int a32, b32, y32;
        } av[] = {{"add_fwd", 0, 0, 0}, {"add_fwd (a fp32)", 1, 0, 0}, {"add_fwd (b fp32)", 0, 1, 0},
                  {"add_fwd (y fp32)", 0, 0, 1}};
        for (int k = 0; k < (dt == F32 ? 1 : 4); k++) {
            const int at = av[k].a32 ? F32 : dt, bt = av[k].b32 ? F32 : dt, yt = av[k].y32 ? F32 : dt;
            float *a = h_randn(NE, 0, 1, at), *b = h_randn(NE, 0, 1, bt), *y = h_new(NE);
            void *Da = d_from(a, NE, at), *Db = d_from(b, NE, bt), *Dy = d_poisoned(NE, yt);
            REF->add_fwd(NE, a, S32, b, S32, y, S32);
            DEV->add_fwd(NE, Da, ty(at), Db, ty(bt), Dy, ty(yt));
            ref_out(y, NE, yt);
            check_as(av[k].name, dt, yt, shape, Dy, y, NE, M_EXACT);
            if (k == 0) {
                DEV->add_fwd(NE, Da, T, Db, T, Da, T);
                check("add_fwd in place (y = a)", dt, shape, Da, y, NE, M_EXACT);
            }
            release();
        }
    }
    if (want_test("copy_grad")) {
        /* the row's type both sides; then, in fp16/bf16 rows, converting from fp32 and to fp32 */
        static const struct {
            const char *name, *acc_name;
            int s32, d32;
        } cv[] = {{"copy_grad", "copy_grad acc", 0, 0},
                  {"copy_grad from fp32", "copy_grad acc from fp32", 1, 0},
                  {"copy_grad to fp32", "copy_grad acc to fp32", 0, 1}};
        for (int k = 0; k < (dt == F32 ? 1 : 3); k++) {
            const int st = cv[k].s32 ? F32 : dt, to = cv[k].d32 ? F32 : dt;
            float *s = h_randn(NE, 0, 1, st), *dd = h_new(NE);
            void *Ds = d_from(s, NE, st), *Dd = d_poisoned(NE, to);
            REF->copy_grad(NE, s, S32, dd, S32, 0);
            DEV->copy_grad(NE, Ds, ty(st), Dd, ty(to), 0);
            ref_out(dd, NE, to);
            check_as(cv[k].name, dt, to, shape, Dd, dd, NE, M_EXACT);
            float *prior = h_randn(NE, 0, 1, to), *da = h_copy(prior, NE);
            void *Dda = d_from(prior, NE, to);
            REF->copy_grad(NE, s, S32, da, S32, 1);
            DEV->copy_grad(NE, Ds, ty(st), Dda, ty(to), 1);
            ref_out(da, NE, to);
            check_as(cv[k].acc_name, dt, to, shape, Dda, da, NE, M_EXACT);
            release();
        }
    }
    if (want_test("scale")) {
        const float as[] = {0.37f, 65536.0f};
        for (int k = 0; k < 2; k++) {
            float *x = h_randn(NE, 0, 1, dt);
            void *Dx = d_from(x, NE, dt);
            REF->scale(NE, S32, as[k], x);
            DEV->scale(NE, T, as[k], Dx);
            ref_out(x, NE, dt);
            char op[32];
            snprintf(op, sizeof op, "scale %g", (double)as[k]);
            check(op, dt, shape, Dx, x, NE, M_EXACT);
            release();
        }
    }
    if (want_test("fill")) {
        const float vs[] = {3.25f, -0.0f};
        for (int k = 0; k < 2; k++) {
            float *x = h_new(NE);
            void *Dx = d_poisoned(NE, dt);
            REF->fill(NE, S32, vs[k], x);
            DEV->fill(NE, T, vs[k], Dx);
            ref_out(x, NE, dt);
            char op[32];
            snprintf(op, sizeof op, "fill %g", (double)vs[k]);
            check(op, dt, shape, Dx, x, NE, M_BITS);
            release();
        }
    }
    if (want_test("sgd")) {
        static const struct {
            const char *name;
            float mom, damp, wd;
            int nesterov, first;
            int skip; /* 0: runs; 1: an overflow agreed; 2: diverged (both: nothing changes) */
            int clip; /* 1: clip_norm set with a sum of squares that clips by 1/4 */
        } v[] = {
            {"sgd momentum first", 0.9f, 0, 1e-4f, 0, 1, 0, 0},
            {"sgd momentum", 0.9f, 0, 1e-4f, 0, 0, 0, 0},
            {"sgd nesterov", 0.9f, 0, 1e-4f, 1, 0, 0, 0},
            {"sgd dampening 0.1 wd 5e-4", 0.9f, 0.1f, 5e-4f, 0, 0, 0, 0},
            {"sgd no momentum (buf NULL)", 0, 0, 1e-4f, 0, 0, 0, 0},
            {"sgd no momentum no wd", 0, 0, 0, 0, 0, 0, 0},
            {"sgd skipped (overflow)", 0.9f, 0, 1e-4f, 0, 0, 1, 0},
            {"sgd skipped (diverged)", 0.9f, 0, 1e-4f, 1, 1, 2, 0},
            {"sgd clipped (clip_norm)", 0.9f, 0, 1e-4f, 0, 0, 0, 1},
        };
        /* p and g of the row's type (a model without master weights); then, in fp16/bf16 rows, p fp32
         * and g of the row's type (O2's fp32 master weights, train/optim.c); the momentum buffer fp32 */
        for (int master = 0; master <= (dt != F32); master++)
            for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
                const int pt = master ? F32 : dt;
                float *p = h_randn(NE, 0, 0.05, pt), *g = h_randn(NE, 0, 0.01, dt), *buf = h_randn(NE, 0, 0.01, F32);
                int has_buf = v[k].mom != 0;
                /* as written, then as the loss scaler runs it: the gradient scaled by 1024 (exact) and
                 * 1/scale = 1/1024, on the same inputs (copied first: no further random draws) */
                float *in[2][3] = {{p, g, buf}, {h_copy(p, NE), h_copy(g, NE), h_copy(buf, NE)}};
                for (int scaled = 0; scaled < 2; scaled++) {
                    float *p1 = in[scaled][0], *g1 = in[scaled][1], *buf1 = in[scaled][2];
                    if (scaled)
                        for (int64_t i = 0; i < NE; i++)
                            g1[i] *= 1024.0f;
                    /* lr, 1/scale, first (sgd_steps == 0) and the skip come from the scalars block */
                    dt_scalars hs = s_clean();
                    hs.lr = 0.1f;
                    hs.inv_scale = scaled ? 1.0f / 1024 : 1.0f;
                    hs.sgd_steps = v[k].first ? 0 : 3;
                    hs.agree[DT_AGREE_OVERFLOW] = v[k].skip == 1;
                    hs.diverged = v[k].skip == 2;
                    if (v[k].clip) { /* norm 2, clipped to 0.5: each unscaled gradient times 1/4 */
                        hs.grad_sumsq = 4.0;
                        hs.clip_norm = 0.5f;
                    }
                    const dt_scalars hs0 = hs;
                    dt_scalars *Ds = d_scalars(&hs);
                    float *p0 = v[k].skip ? h_copy(p1, NE) : NULL, *buf0 = v[k].skip ? h_copy(buf1, NE) : NULL;
                    void *Dp = d_from(p1, NE, pt), *Dg = d_from(g1, NE, dt);
                    float *Dbuf = d_from(buf1, NE, F32);
                    REF->sgd(NE, p1, S32, g1, S32, has_buf ? buf1 : NULL, v[k].mom, v[k].damp, v[k].wd,
                             v[k].nesterov, &hs);
                    DEV->sgd(NE, Dp, ty(pt), Dg, T, has_buf ? Dbuf : NULL, v[k].mom, v[k].damp, v[k].wd,
                             v[k].nesterov, Ds);
                    ref_out(p1, NE, pt);
                    char tag[48], op[128];
                    snprintf(tag, sizeof tag, "%s%s", master ? " (p fp32)" : "", scaled ? " 1/scale 1/1024" : "");
                    snprintf(op, sizeof op, "%s%s p", v[k].name, tag);
                    check_as(op, dt, pt, shape, Dp, p1, NE, v[k].skip ? M_BITS : M_ELT);
                    if (has_buf) {
                        snprintf(op, sizeof op, "%s%s buf", v[k].name, tag);
                        check_as(op, dt, F32, shape, Dbuf, buf1, NE, v[k].skip ? M_BITS : M_ELT);
                    }
                    if (v[k].skip) { /* the reference itself left them as they were */
                        snprintf(op, sizeof op, "%s%s p unchanged (reference)", v[k].name, tag);
                        cmp_f32(op, dt, shape, p1, p0, NE, M_BITS);
                        snprintf(op, sizeof op, "%s%s buf unchanged (reference)", v[k].name, tag);
                        cmp_f32(op, dt, shape, buf1, buf0, NE, M_BITS);
                    }
                    /* sgd only reads the block */
                    snprintf(op, sizeof op, "%s%s scalars unchanged", v[k].name, tag);
                    cmp_scalars(op, dt, shape, Ds, &hs0, 0);
                }
                release();
            }
    }
    if (want_test("ema_update")) { /* x of the row's type (a model's weights or statistics), avg fp32 */
        static const double decays[] = {0.8, 0.99998, 0};
        for (size_t k = 0; k < sizeof decays / sizeof decays[0]; k++) {
            float *x = h_randn(NE, 0, 0.05, dt), *avg = h_randn(NE, 0, 0.05, F32);
            float *Dx = d_from(x, NE, dt), *Davg = d_from(avg, NE, F32);
            REF->ema_update(NE, avg, x, S32, decays[k]);
            DEV->ema_update(NE, Davg, Dx, T, decays[k]);
            char op[48];
            snprintf(op, sizeof op, "ema_update decay %g%s", decays[k], decays[k] == 0 ? " (a copy)" : "");
            check_as(op, dt, F32, shape, Davg, avg, NE, decays[k] == 0 ? M_BITS : M_ELT);
            release();
        }
    }
    if (want_test("adam"))
        check_adaptive(dt, shape, 0);
    if (want_test("rmsprop"))
        check_adaptive(dt, shape, 1);
}

/* --- pooling -------------------------------------------------------------------------------------- */

typedef struct pool_case {
    const char *name;
    int n, h, w, c, k, s, p;
    int values; /* 0: N(0,1); 1: ties from {-1, -0.5, 0, 0.5, 1}; 2: all negative ties */
} pool_case;

static const pool_case MAXPOOL_CASES[] = {
    {"3x3/2 p1 odd", 2, 17, 17, 24, 3, 2, 1, 0},
    {"3x3/2 p1 resnet", 2, 32, 32, 64, 3, 2, 1, 0},
    {"3x3/1 p1", 1, 9, 9, 8, 3, 1, 1, 0},
    {"2x2/2", 2, 16, 16, 16, 2, 2, 0, 0},
    {"2x2/2 odd (floor)", 2, 15, 15, 12, 2, 2, 0, 0},
    {"3x3/2 p1 ties", 2, 17, 17, 16, 3, 2, 1, 1},
    {"3x3/2 p1 negative ties", 2, 16, 16, 8, 3, 2, 1, 2},
};

static void test_maxpool(const pool_case *pc, int dt)
{
    if (!unit("maxpool [%s] %s", pc->name, DTYPE_NAME[dt]))
        return;
    char name[96], shape[64];
    dt_pool_desc d;
    if (dt_pool_desc_set_max(&d, pc->n, pc->h, pc->w, pc->c, pc->k, pc->s, pc->p) != 0)
        return;
    snprintf(shape, sizeof shape, "n%d %dx%dx%d -> %dx%d", d.n, d.h, d.w, d.c, d.oh, d.ow);
    dt_pool_desc dd = d; /* the device's: x, y and their gradients of the row's type */
    dd.xt = dd.yt = ty(dt);
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.c;
    const int overlap = d.kh > d.sh || d.kw > d.sw;
    float *x = h_randn(nx, 0, 1, dt);
    if (pc->values)
        for (int64_t i = 0; i < nx; i++)
            x[i] = pc->values == 1 ? (float)((int)dt_rng_below(&RNG, 5) - 2) * 0.5f
                                   : -1.0f - (float)dt_rng_below(&RNG, 3);
    float *y = h_new(ny);
    void *Dx = d_from(x, nx, dt), *Dy = d_poisoned(ny, dt);
    uint8_t *am = hold(malloc((size_t)ny), 0), *Dam = d_poisoned_u8(ny);
    REF->maxpool_fwd(&d, x, y, am);
    DEV->maxpool_fwd(&dd, Dx, Dy, Dam);
    ref_out(y, ny, dt);
    snprintf(name, sizeof name, "maxpool_fwd y [%s]", pc->name);
    check(name, dt, shape, Dy, y, ny, M_EXACT);
    snprintf(name, sizeof name, "maxpool_fwd argmax [%s]", pc->name);
    cmp_u8(name, dt, shape, d_result_u8(Dam, ny), am, ny);

    /* backward from the reference's window positions (checked above) */
    uint8_t *Damr = d_bytes((size_t)ny);
    DEV->mem_put(Damr, am, (size_t)ny);
    float *dy = h_randn(ny, 0, 1, dt);
    void *Ddy = d_from(dy, ny, dt);
    for (int acc = 0; acc <= 1; acc++) {
        float *dx;
        void *Ddx;
        if (acc) {
            float *p0 = h_randn(nx, 0, 1, dt);
            dx = h_copy(p0, nx);
            Ddx = d_from(p0, nx, dt);
        } else {
            dx = h_new(nx);
            Ddx = d_poisoned(nx, dt);
        }
        REF->maxpool_bwd(&d, dy, am, dx, acc);
        DEV->maxpool_bwd(&dd, Ddy, Damr, Ddx, acc);
        ref_out(dx, nx, dt);
        snprintf(name, sizeof name, "maxpool_bwd%s [%s]", acc ? " acc" : "", pc->name);
        /* overlapping windows sum up to 4 (3x3/2) or 9 (3x3/1) values in an unspecified order */
        check(name, dt, shape, Ddx, dx, nx, overlap ? M_ELT : M_EXACT);
    }
    release();
}

typedef struct avg_case {
    const char *name;
    int n, h, w, c, oh, ow;
} avg_case;

static const avg_case AVGPOOL_CASES[] = {
    {"7x7 -> 1x1 (resnet)", 4, 7, 7, 512, 1, 1},
    {"14x14 -> 7x7", 2, 14, 14, 32, 7, 7},
    {"10x10 -> 7x7 (uneven, overlapping)", 2, 10, 10, 16, 7, 7},
    {"6x6 -> 6x6 (identity, alexnet)", 2, 6, 6, 24, 6, 6},
    {"5x3 -> 2x2", 3, 5, 3, 9, 2, 2},
};

static void test_avgpool(const avg_case *ac, int dt)
{
    if (!unit("avgpool [%s] %s", ac->name, DTYPE_NAME[dt]))
        return;
    char name[96], shape[64];
    dt_pool_desc d;
    if (dt_pool_desc_set_adaptive(&d, ac->n, ac->h, ac->w, ac->c, ac->oh, ac->ow) != 0)
        return;
    snprintf(shape, sizeof shape, "n%d %dx%dx%d -> %dx%d", d.n, d.h, d.w, d.c, d.oh, d.ow);
    dt_pool_desc dd = d; /* the device's: x, y and their gradients of the row's type */
    dd.xt = dd.yt = ty(dt);
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.c;
    float *x = h_randn(nx, 0.5, 1, dt), *y = h_new(ny);
    void *Dx = d_from(x, nx, dt), *Dy = d_poisoned(ny, dt);
    REF->avgpool_fwd(&d, x, y);
    DEV->avgpool_fwd(&dd, Dx, Dy);
    ref_out(y, ny, dt);
    snprintf(name, sizeof name, "avgpool_fwd [%s]", ac->name);
    check(name, dt, shape, Dy, y, ny, M_RED);
    float *dy = h_randn(ny, 0, 1, dt);
    void *Ddy = d_from(dy, ny, dt);
    for (int acc = 0; acc <= 1; acc++) {
        float *dx;
        void *Ddx;
        if (acc) {
            float *p0 = h_randn(nx, 0, 1, dt);
            dx = h_copy(p0, nx);
            Ddx = d_from(p0, nx, dt);
        } else {
            dx = h_new(nx);
            Ddx = d_poisoned(nx, dt);
        }
        REF->avgpool_bwd(&d, dy, dx, acc);
        DEV->avgpool_bwd(&dd, Ddy, Ddx, acc);
        ref_out(dx, nx, dt);
        snprintf(name, sizeof name, "avgpool_bwd%s [%s]", acc ? " acc" : "", ac->name);
        check(name, dt, shape, Ddx, dx, nx, M_ELT);
    }
    release();
}

static void test_pools(void)
{
    /* --quick: the first case of each (resnet's max pool, resnet's average pool) */
    const size_t n_max = QUICK ? 1 : sizeof MAXPOOL_CASES / sizeof MAXPOOL_CASES[0];
    const size_t n_avg = QUICK ? 1 : sizeof AVGPOOL_CASES / sizeof AVGPOOL_CASES[0];
    if (want_test("maxpool"))
        for (size_t i = 0; i < n_max; i++)
            ALL_DTYPES test_maxpool(&MAXPOOL_CASES[i], dt);
    if (want_test("avgpool"))
        for (size_t i = 0; i < n_avg; i++)
            ALL_DTYPES test_avgpool(&AVGPOOL_CASES[i], dt);
}

/* --- channel slices of a wider tensor (DenseNet's concatenation in place) ------------------------------ */

/* Group "slice": the ops that read or write a channel slice of a wider NHWC tensor through a row stride
 * in their descriptor (nn/backend.h): conv_fwd, conv_bwd_data and conv_bwd_filter with dt_conv_desc.ys
 * > oc (y and dy a slice at a channel offset), bn_fwd_train, bn_fwd_infer and bn_bwd with dt_bn_desc.xs >
 * c (x and dx the first c channels), maxpool and avgpool both ways with dt_pool_desc.ys > c (y and dy a
 * slice). Each result is compared with the same op on packed operands on the backend under test ("vs
 * packed": bit for bit for BN and the pools, whose kernels only move their row offsets; within the
 * convolutions' tolerance for conv, as a backend may run a strided layout on another algorithm) and with
 * the CPU reference on packed operands ("vs cpu", the tolerance of the op's own rows above); an output
 * slice's channels outside it start as random finite values that must come back bit for bit
 * ("outside"), and an input slice's other channels hold NaN and infinities (h_junk), so a kernel that
 * reads them spoils the results it reaches. */

/* NaN, +inf, -inf in turn: what an input slice's other channels hold (every type has them) */
static float *h_junk(int64_t n)
{
    float *h = h_new(n);
    static const float v[3] = {NAN, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++)
        h[i] = v[i % 3];
    return h;
}

/* [rows, w] values: around's, with channels off .. off + c - 1 from packed [rows, c] */
static float *h_wide(const float *packed, const float *around, int64_t rows, int w, int off, int c)
{
    float *h = h_copy(around, rows * w);
    for (int64_t r = 0; r < rows; r++)
        memcpy(h + r * w + off, packed + r * c, (size_t)c * sizeof(float));
    return h;
}

/* channels off .. off + c - 1 of [rows, w] values, packed; or (outside) the other channels */
static float *h_part(const float *wide, int64_t rows, int w, int off, int c, int outside)
{
    float *h = h_new(rows * (outside ? w - c : c));
    for (int64_t r = 0; r < rows; r++) {
        if (outside) {
            float *o = h + r * (w - c);
            memcpy(o, wide + r * w, (size_t)off * sizeof(float));
            memcpy(o + off, wide + r * w + off + c, (size_t)(w - off - c) * sizeof(float));
        } else {
            memcpy(h + r * c, wide + r * w + off, (size_t)c * sizeof(float));
        }
    }
    return h;
}

/* element off of a device array of type dt */
static void *d_at(void *d, int64_t off, int dt)
{
    return (char *)d + (size_t)off * elt_bytes(dt);
}

/* A packed output of the slice's op (Ds, n elements of storage type st) against the packed op's on the
 * device (Dp: mode mp) and against the reference (want: mode m). */
static void check_pair(const char *op, int dt, int st, const char *shape, const void *Ds, const void *Dp, int64_t n,
                       enum mode mp, const float *want, enum mode m)
{
    char name[96];
    const float *got = d_result(Ds, n, st);
    snprintf(name, sizeof name, "%s vs packed", op);
    cmp_f32_as(name, dt, st, shape, got, d_result(Dp, n, st), n, mp);
    snprintf(name, sizeof name, "%s vs cpu", op);
    cmp_f32_as(name, dt, st, shape, got, want, n, m);
}

/* An output slice: channels off .. off + c - 1 of the device's [rows, w] Dw (type dt; init: its values
 * before the op) as check_pair says, and its other channels init's, bit for bit. */
static void check_slice(const char *op, int dt, const char *shape, const void *Dw, const float *init, int64_t rows,
                        int w, int off, int c, const void *Dp, enum mode mp, const float *want, enum mode m)
{
    char name[96];
    const float *got = d_result(Dw, rows * w, dt), *part = h_part(got, rows, w, off, c, 0);
    snprintf(name, sizeof name, "%s vs packed", op);
    cmp_f32(name, dt, shape, part, d_result(Dp, rows * c, dt), rows * c, mp);
    snprintf(name, sizeof name, "%s vs cpu", op);
    cmp_f32(name, dt, shape, part, want, rows * c, m);
    snprintf(name, sizeof name, "%s outside", op);
    cmp_f32(name, dt, shape, h_part(got, rows, w, off, c, 1), h_part(init, rows, w, off, c, 1), rows * (w - c),
            M_BITS);
}

/* an output slice before the op: NaN in the slice (an element never written fails), random finite values
 * around it (which must stay) */
static float *h_out_init(int64_t rows, int w, int off, int c, int dt)
{
    return h_wide(h_junk(rows * c), h_randn(rows * w, 0, 1, dt), rows, w, off, c);
}

/* a convolution (conv_case) writing channels off .. off + oc - 1 of rows ys wide */
typedef struct slice_conv_case {
    conv_case cv;
    int off, ys;
} slice_conv_case;

static const slice_conv_case SLICE_CONV_CASES[] = {
    {{"3x3 32 at 64 of 128", 2, 8, 8, 64, 32, 3, 1, 1, 1, 1, 0}, 64, 128},
    {{"1x1 s2 bias 12 at 5 of 20", 2, 7, 7, 24, 12, 1, 2, 0, 1, 1, 1}, 5, 20},
};

static void test_slice_conv(const slice_conv_case *sc, int dt)
{
    if (!unit("slice conv [%s] %s", sc->cv.name, DTYPE_NAME[dt]))
        return;
    const conv_case *cc = &sc->cv;
    char name[96], shape[64];
    snprintf(shape, sizeof shape, "n%d %dx%dx%d>%d k%ds%d ys%d@%d", cc->n, cc->h, cc->w, cc->c, cc->oc, cc->k, cc->s,
             sc->ys, sc->off);
    dt_conv_desc d; /* the reference's (fp32, packed) */
    if (dt_conv_desc_set(&d, cc->n, cc->h, cc->w, cc->c, cc->oc, cc->k, cc->k, cc->s, cc->s, cc->p, cc->p, cc->dil,
                         cc->dil, cc->g)) {
        row("conv [slice]", DTYPE_NAME[dt], "dt_conv_desc_set refused it", 0, 0, M_EXACT, 0, 0);
        return;
    }
    d.bias = cc->bias;
    dt_conv_desc da = d;
    da.dx_accumulate = 1;
    /* the device's: packed (dp, dpa) and the slice (ds, dsa), of the row's type */
    dt_conv_desc dp = d, dpa = da;
    dp.t = dpa.t = ty(dt);
    dt_conv_desc ds = dp, dsa = dpa;
    ds.ys = dsa.ys = sc->ys;
    size_t wr = CREF->conv_workspace(&d), wra = CREF->conv_workspace(&da), wd = 0;
    const dt_conv_desc *planned[4] = {&dp, &dpa, &ds, &dsa};
    for (int i = 0; i < 4; i++) {
        size_t b = DEV->conv_workspace(planned[i]);
        wd = b > wd ? b : wd;
    }
    void *ws_ref = hold(malloc(wr > wra ? wr : wra), 0), *ws = d_bytes(wd ? wd : 64);
    plan_scratch(0);
    const int oc = d.oc, ys = sc->ys, off = sc->off;
    const int64_t npos = (int64_t)d.n * d.oh * d.ow, nx = (int64_t)d.n * d.h * d.w * d.c, ny = npos * oc,
                  nw = (int64_t)oc * d.kh * d.kw * (d.c / d.groups), nb = oc;
    const double wsd = 1.0 / sqrt((double)d.kh * d.kw * (d.c / d.groups));
    float *x = h_randn(nx, 0, 1, dt), *w = h_randn(nw, 0, wsd, dt), *b = h_randn(nb, 0, 0.5, dt);
    float *dy = h_randn(ny, 0, 1, dt);
    void *Dx = d_from(x, nx, dt), *Dw = d_from(w, nw, dt), *Db = d_from(b, nb, dt), *Ddy = d_from(dy, ny, dt);
    void *Ddyw = d_from(h_wide(dy, h_junk(npos * ys), npos, ys, off, oc), npos * ys, dt);
    const float *bias = cc->bias ? b : NULL;
    const void *Dbias = cc->bias ? Db : NULL;

    /* forward into the slice */
    float *y = h_new(ny), *init = h_out_init(npos, ys, off, oc, dt);
    void *Dyp = d_poisoned(ny, dt), *Dyw = d_from(init, npos * ys, dt);
    CREF->conv_fwd(&d, x, w, bias, y, ws_ref);
    DEV->conv_fwd(&dp, Dx, Dw, Dbias, Dyp, ws);
    DEV->conv_fwd(&ds, Dx, Dw, Dbias, d_at(Dyw, off, dt), ws);
    ref_out(y, ny, dt);
    check_slice("conv_fwd ys y", dt, shape, Dyw, init, npos, ys, off, oc, Dyp, M_RED, y, M_RED);

    /* backward-data from the slice of dy, overwriting and accumulating */
    for (int acc = 0; acc <= 1; acc++) {
        float *prior = acc ? h_randn(nx, 0, 1, dt) : NULL, *dx = acc ? h_copy(prior, nx) : h_new(nx);
        void *Ddxp = acc ? d_from(prior, nx, dt) : d_poisoned(nx, dt);
        void *Ddxs = acc ? d_from(prior, nx, dt) : d_poisoned(nx, dt);
        CREF->conv_bwd_data(&da, dy, w, dx, acc, ws_ref);
        DEV->conv_bwd_data(&dpa, Ddy, Dw, Ddxp, acc, ws);
        DEV->conv_bwd_data(&dsa, d_at(Ddyw, off, dt), Dw, Ddxs, acc, ws);
        ref_out(dx, nx, dt);
        snprintf(name, sizeof name, "conv_bwd_data ys%s dx", acc ? " acc" : "");
        check_pair(name, dt, dt, shape, Ddxs, Ddxp, nx, M_RED, dx, M_RED);
    }

    /* backward-filter (and bias) from the slice of dy, overwriting and accumulating */
    for (int acc = 0; acc <= 1; acc++) {
        float *pw = acc ? h_randn(nw, 0, 1, dt) : NULL, *pb = acc ? h_randn(nb, 0, 1, dt) : NULL;
        float *dw = acc ? h_copy(pw, nw) : h_new(nw), *db = acc ? h_copy(pb, nb) : h_new(nb);
        void *Ddwp = acc ? d_from(pw, nw, dt) : d_poisoned(nw, dt);
        void *Ddws = acc ? d_from(pw, nw, dt) : d_poisoned(nw, dt);
        void *Ddbp = acc ? d_from(pb, nb, dt) : d_poisoned(nb, dt);
        void *Ddbs = acc ? d_from(pb, nb, dt) : d_poisoned(nb, dt);
        CREF->conv_bwd_filter(&d, x, dy, dw, cc->bias ? db : NULL, acc, ws_ref);
        DEV->conv_bwd_filter(&dp, Dx, Ddy, Ddwp, cc->bias ? Ddbp : NULL, acc, ws);
        DEV->conv_bwd_filter(&ds, Dx, d_at(Ddyw, off, dt), Ddws, cc->bias ? Ddbs : NULL, acc, ws);
        ref_out(dw, nw, dt);
        snprintf(name, sizeof name, "conv_bwd_filter ys%s dw", acc ? " acc" : "");
        check_pair(name, dt, dt, shape, Ddws, Ddwp, nw, M_RED, dw, M_RED);
        if (cc->bias) {
            ref_out(db, nb, dt);
            snprintf(name, sizeof name, "conv_bwd_filter ys%s dbias", acc ? " acc" : "");
            check_pair(name, dt, dt, shape, Ddbs, Ddbp, nb, M_RED, db, M_RED);
        }
    }
    planned_row("conv_workspace ys, ops allocate nothing", dt, shape);
    release();
}

typedef struct slice_bn_case {
    const char *name;
    int64_t rows;
    int c, xs;
} slice_bn_case;

/* xs a multiple of 8 (the device's 8-wide paths) and not */
static const slice_bn_case SLICE_BN_CASES[] = {
    {"rows 784 c64 xs96", 784, 64, 96},
    {"rows 1001 c37 xs43", 1001, 37, 43},
};

/* x, y and their gradients of the row's type, the parameters and statistics fp32 */
static void test_slice_bn(const slice_bn_case *bc, int dt)
{
    if (!unit("slice bn [%s] %s", bc->name, DTYPE_NAME[dt]))
        return;
    char name[96];
    const char *shape = bc->name;
    const int c = bc->c, xs = bc->xs;
    const int64_t rows = bc->rows, n = rows * c, nw = rows * xs;
    dt_bn_desc d = {.rows = rows, .c = c, .eps = 1e-5f, .momentum = 0.1f, .xt = S32, .yt = S32, .pt = S32};
    dt_bn_desc dp = d; /* the device's, packed and (ds) at xs */
    dp.xt = dp.yt = ty(dt);
    dt_bn_desc ds = dp;
    ds.xs = xs;
    const size_t s0 = DEV->bn_scratch(&dp), s1 = DEV->bn_scratch(&ds);
    plan_scratch(s0 > s1 ? s0 : s1);
    for (int relu = 0; relu <= 1; relu++) {
        const char *r = relu ? "+relu" : "";
        float *x = h_bn_x(n, c, dt);
        float *gamma = h_randn(c, 1, 0.3, F32), *beta = h_randn(c, 0, 0.5, F32);
        if (relu)
            bn_keep_off_zero(&d, x, gamma, beta, dt);
        float *rm0 = h_randn(c, 0, 0.1, F32), *rv0 = h_uniform(c, 0.5, 1.5);
        void *Dx = d_from(x, n, dt), *Dxw = d_from(h_wide(x, h_junk(nw), rows, xs, 0, c), nw, dt);
        void *Dg = d_from(gamma, c, F32), *Db = d_from(beta, c, F32);

        /* training forward */
        float *y = h_new(n), *saved = h_new((int64_t)DT_BN_SAVED(c)), *rm = h_copy(rm0, c), *rv = h_copy(rv0, c);
        void *Dyp = d_poisoned(n, dt), *Dys = d_poisoned(n, dt);
        float *Dsp = d_poisoned((int64_t)DT_BN_SAVED(c), F32), *Dss = d_poisoned((int64_t)DT_BN_SAVED(c), F32);
        void *Drmp = d_from(rm0, c, F32), *Drvp = d_from(rv0, c, F32), *Drms = d_from(rm0, c, F32);
        void *Drvs = d_from(rv0, c, F32);
        REF->bn_fwd_train(&d, x, gamma, beta, y, saved, rm, rv, relu);
        DEV->bn_fwd_train(&dp, Dx, Dg, Db, Dyp, Dsp, Drmp, Drvp, relu);
        DEV->bn_fwd_train(&ds, Dxw, Dg, Db, Dys, Dss, Drms, Drvs, relu);
        ref_out(y, n, dt);
        snprintf(name, sizeof name, "bn_fwd_train%s xs y", r);
        check_pair(name, dt, dt, shape, Dys, Dyp, n, M_BITS, y, M_RED);
        snprintf(name, sizeof name, "bn_fwd_train%s xs saved", r);
        check_pair(name, dt, F32, shape, Dss, Dsp, (int64_t)DT_BN_SAVED(c), M_BITS, saved, M_RED);
        snprintf(name, sizeof name, "bn_fwd_train%s xs running_mean", r);
        check_pair(name, dt, F32, shape, Drms, Drmp, c, M_BITS, rm, M_RED);
        snprintf(name, sizeof name, "bn_fwd_train%s xs running_var", r);
        check_pair(name, dt, F32, shape, Drvs, Drvp, c, M_BITS, rv, M_RED);

        /* inference forward */
        float *yi = h_new(n);
        void *Dyip = d_poisoned(n, dt), *Dyis = d_poisoned(n, dt), *Drm0 = d_from(rm0, c, F32);
        void *Drv0 = d_from(rv0, c, F32);
        REF->bn_fwd_infer(&d, x, gamma, beta, rm0, rv0, yi, relu);
        DEV->bn_fwd_infer(&dp, Dx, Dg, Db, Drm0, Drv0, Dyip, relu);
        DEV->bn_fwd_infer(&ds, Dxw, Dg, Db, Drm0, Drv0, Dyis, relu);
        ref_out(yi, n, dt);
        snprintf(name, sizeof name, "bn_fwd_infer%s xs y", r);
        check_pair(name, dt, dt, shape, Dyis, Dyip, n, M_BITS, yi, M_ELT);

        /* backward into the prefix of a wide dx, overwriting and accumulating (dx and the parameters'
         * gradients), each side from its own saved state */
        float *dy = h_randn(n, 0, 1, dt);
        void *Ddy = d_from(dy, n, dt);
        for (int acc = 0; acc <= 1; acc++) {
            float *prior = acc ? h_randn(n, 0, 1, dt) : NULL, *pg = acc ? h_randn(c, 0, 1, F32) : NULL;
            float *pb = acc ? h_randn(c, 0, 1, F32) : NULL;
            float *dx = acc ? h_copy(prior, n) : h_new(n), *dg = acc ? h_copy(pg, c) : h_new(c);
            float *db = acc ? h_copy(pb, c) : h_new(c);
            float *init = acc ? h_wide(prior, h_randn(nw, 0, 1, dt), rows, xs, 0, c) : h_out_init(rows, xs, 0, c, dt);
            void *Ddxp = acc ? d_from(prior, n, dt) : d_poisoned(n, dt), *Ddxw = d_from(init, nw, dt);
            void *Ddgp = acc ? d_from(pg, c, F32) : d_poisoned(c, F32);
            void *Ddgs = acc ? d_from(pg, c, F32) : d_poisoned(c, F32);
            void *Ddbp = acc ? d_from(pb, c, F32) : d_poisoned(c, F32);
            void *Ddbs = acc ? d_from(pb, c, F32) : d_poisoned(c, F32);
            REF->bn_bwd(&d, x, dy, relu, gamma, saved, dx, dg, db, acc, acc);
            DEV->bn_bwd(&dp, Dx, Ddy, relu, Dg, Dsp, Ddxp, Ddgp, Ddbp, acc, acc);
            DEV->bn_bwd(&ds, Dxw, Ddy, relu, Dg, Dss, Ddxw, Ddgs, Ddbs, acc, acc);
            ref_out(dx, n, dt);
            snprintf(name, sizeof name, "bn_bwd%s%s xs dx", r, acc ? " acc" : "");
            check_slice(name, dt, shape, Ddxw, init, rows, xs, 0, c, Ddxp, M_BITS, dx, M_RED);
            snprintf(name, sizeof name, "bn_bwd%s%s xs dgamma", r, acc ? " acc" : "");
            check_pair(name, dt, F32, shape, Ddgs, Ddgp, c, M_BITS, dg, M_RED);
            snprintf(name, sizeof name, "bn_bwd%s%s xs dbeta", r, acc ? " acc" : "");
            check_pair(name, dt, F32, shape, Ddbs, Ddbp, c, M_BITS, db, M_RED);
        }
        release();
    }
    planned_row("bn_scratch xs, ops allocate nothing", dt, shape);
}

typedef struct slice_pool_case {
    const char *name;
    int max, n, h, w, c;
    int a, b, p; /* max: kernel, stride, padding; average: the output's height and width */
    int off, ys;
} slice_pool_case;

static const slice_pool_case SLICE_POOL_CASES[] = {
    {"max 3x3/2 p1, 64 at 0 of 96", 1, 2, 16, 16, 64, 3, 2, 1, 0, 96},
    {"max 2x2/2 odd, 12 at 4 of 19", 1, 2, 15, 15, 12, 2, 2, 0, 4, 19},
    {"avg 14x14->7x7, 32 at 0 of 48", 0, 2, 14, 14, 32, 7, 7, 0, 0, 48},
    {"avg 5x3->2x2, 9 at 3 of 14", 0, 3, 5, 3, 9, 2, 2, 0, 3, 14},
};

/* x and dx packed, y and dy a slice; all of the row's type */
static void test_slice_pool(const slice_pool_case *pc, int dt)
{
    if (!unit("slice pool [%s] %s", pc->name, DTYPE_NAME[dt]))
        return;
    char name[96], shape[64];
    dt_pool_desc d;
    if (pc->max ? dt_pool_desc_set_max(&d, pc->n, pc->h, pc->w, pc->c, pc->a, pc->b, pc->p)
                : dt_pool_desc_set_adaptive(&d, pc->n, pc->h, pc->w, pc->c, pc->a, pc->b))
        return;
    snprintf(shape, sizeof shape, "n%d %dx%dx%d->%dx%d ys%d@%d", d.n, d.h, d.w, d.c, d.oh, d.ow, pc->ys, pc->off);
    const char *fwd = pc->max ? "maxpool_fwd" : "avgpool_fwd", *bwd = pc->max ? "maxpool_bwd" : "avgpool_bwd";
    dt_pool_desc dp = d; /* the device's, packed and (ds) into the slice */
    dp.xt = dp.yt = ty(dt);
    dt_pool_desc ds = dp;
    ds.ys = pc->ys;
    const int c = d.c, ys = pc->ys, off = pc->off;
    const int64_t nx = (int64_t)d.n * d.h * d.w * c, npos = (int64_t)d.n * d.oh * d.ow, ny = npos * c;
    const int overlap = pc->max && (d.kh > d.sh || d.kw > d.sw);
    float *x = h_randn(nx, pc->max ? 0 : 0.5, 1, dt), *y = h_new(ny), *init = h_out_init(npos, ys, off, c, dt);
    void *Dx = d_from(x, nx, dt), *Dyp = d_poisoned(ny, dt), *Dyw = d_from(init, npos * ys, dt);
    uint8_t *am = hold(malloc((size_t)ny), 0), *Damp = d_poisoned_u8(ny), *Dams = d_poisoned_u8(ny);
    if (pc->max) {
        REF->maxpool_fwd(&d, x, y, am);
        DEV->maxpool_fwd(&dp, Dx, Dyp, Damp);
        DEV->maxpool_fwd(&ds, Dx, d_at(Dyw, off, dt), Dams);
    } else {
        REF->avgpool_fwd(&d, x, y);
        DEV->avgpool_fwd(&dp, Dx, Dyp);
        DEV->avgpool_fwd(&ds, Dx, d_at(Dyw, off, dt));
    }
    ref_out(y, ny, dt);
    snprintf(name, sizeof name, "%s ys y", fwd);
    check_slice(name, dt, shape, Dyw, init, npos, ys, off, c, Dyp, M_BITS, y, pc->max ? M_EXACT : M_RED);
    if (pc->max) {
        const uint8_t *got = d_result_u8(Dams, ny);
        cmp_u8("maxpool_fwd ys argmax vs packed", dt, shape, got, d_result_u8(Damp, ny), ny);
        cmp_u8("maxpool_fwd ys argmax vs cpu", dt, shape, got, am, ny);
    }
    /* backward from the slice of dy (the reference's window positions, checked above) */
    float *dy = h_randn(ny, 0, 1, dt);
    void *Ddy = d_from(dy, ny, dt), *Ddyw = d_from(h_wide(dy, h_junk(npos * ys), npos, ys, off, c), npos * ys, dt);
    uint8_t *Dam = d_bytes((size_t)ny);
    DEV->mem_put(Dam, am, (size_t)ny);
    for (int acc = 0; acc <= 1; acc++) {
        float *prior = acc ? h_randn(nx, 0, 1, dt) : NULL, *dx = acc ? h_copy(prior, nx) : h_new(nx);
        void *Ddxp = acc ? d_from(prior, nx, dt) : d_poisoned(nx, dt);
        void *Ddxs = acc ? d_from(prior, nx, dt) : d_poisoned(nx, dt);
        if (pc->max) {
            REF->maxpool_bwd(&d, dy, am, dx, acc);
            DEV->maxpool_bwd(&dp, Ddy, Dam, Ddxp, acc);
            DEV->maxpool_bwd(&ds, d_at(Ddyw, off, dt), Dam, Ddxs, acc);
        } else {
            REF->avgpool_bwd(&d, dy, dx, acc);
            DEV->avgpool_bwd(&dp, Ddy, Ddxp, acc);
            DEV->avgpool_bwd(&ds, d_at(Ddyw, off, dt), Ddxs, acc);
        }
        ref_out(dx, nx, dt);
        snprintf(name, sizeof name, "%s%s ys dx", bwd, acc ? " acc" : "");
        check_pair(name, dt, dt, shape, Ddxs, Ddxp, nx, M_BITS, dx, pc->max && !overlap ? M_EXACT : M_ELT);
    }
    release();
}

static void test_slices(void)
{
    if (!want_test("slice"))
        return;
    const size_t n_conv = QUICK ? 1 : sizeof SLICE_CONV_CASES / sizeof SLICE_CONV_CASES[0];
    const size_t n_bn = QUICK ? 1 : sizeof SLICE_BN_CASES / sizeof SLICE_BN_CASES[0];
    for (size_t i = 0; i < n_conv; i++)
        ALL_DTYPES test_slice_conv(&SLICE_CONV_CASES[i], dt);
    for (size_t i = 0; i < n_bn; i++)
        ALL_DTYPES test_slice_bn(&SLICE_BN_CASES[i], dt);
    for (size_t i = 0; i < sizeof SLICE_POOL_CASES / sizeof SLICE_POOL_CASES[0]; i++)
        ALL_DTYPES test_slice_pool(&SLICE_POOL_CASES[i], dt);
}

/* --- activations, squeeze-and-excitation's scale --------------------------------------------------- */

static const char *const ACT_NAMES[] = {"relu6", "hardsigmoid", "hardswish", "sigmoid", "silu", "gelu"};
_Static_assert(sizeof ACT_NAMES / sizeof ACT_NAMES[0] == DT_ACT_COUNT, "one name per enum dt_act");

/* act's inputs beyond the random ones (rounded to the row's type with them): the kinks of relu6,
 * hardsigmoid and hardswish and their neighbours (one fp32 ulp, 1/32), where sigmoid, silu and gelu
 * saturate or underflow, a subnormal, and the non-finite values */
static const float ACT_SPECIAL[] = {
    -6.0f, -3.0f, -0.0f, 0.0f, 3.0f, 6.0f,
    -0x1.800002p+1f, -0x1.7ffffep+1f, 0x1.7ffffep+1f, 0x1.800002p+1f, 0x1.7ffffep+2f, 0x1.800002p+2f, /* 1 ulp */
    -3.03125f, -2.96875f, -0.03125f, 0.03125f, 2.96875f, 3.03125f, 5.96875f, 6.03125f,               /* 1/32 */
    9.5f, -9.5f, 15.0f, -15.0f, 16.0f, -16.0f, 17.0f, -17.0f, 20.0f, -20.0f, 88.0f, -88.0f, 90.0f, -90.0f,
    0x1p-149f, -0x1p-149f, NAN, INFINITY, -INFINITY,
};
#define N_ACT_SPECIAL ((int64_t)(sizeof ACT_SPECIAL / sizeof ACT_SPECIAL[0]))
/* the last values (NE % 8 = 3 of them are the scalar tail) */
static const float ACT_TAIL[] = {NAN, -3.0f, 6.0f, 3.0f, 0.0f};

/* act_fwd (also in place) and act_bwd (overwriting, accumulating) for each activation, on NE values:
 * N(0, 16) with ACT_SPECIAL at the start (the 8-wide path) and ACT_TAIL at the end (the scalar tail) */
static void test_act(int dt)
{
    if (!unit("act %s", DTYPE_NAME[dt]))
        return;
    char shape[32], name[64];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    for (int act = 0; act < DT_ACT_COUNT; act++) {
        float *x = h_randn(NE, 0, 4, dt);
        if (!LIST) {
            for (int64_t i = 0; i < N_ACT_SPECIAL; i++)
                x[i] = ACT_SPECIAL[i];
            for (int64_t i = 0; i < (int64_t)(sizeof ACT_TAIL / sizeof ACT_TAIL[0]); i++)
                x[NE - 1 - i] = ACT_TAIL[i];
            h_round(x, NE, dt);
        }
        float *y = h_new(NE);
        void *Dx = d_from(x, NE, dt), *Dy = d_poisoned(NE, dt);
        REF->act_fwd(NE, act, S32, x, y);
        DEV->act_fwd(NE, act, T, Dx, Dy);
        ref_out(y, NE, dt);
        snprintf(name, sizeof name, "act_fwd %s", ACT_NAMES[act]);
        check(name, dt, shape, Dy, y, NE, M_ELT);
        void *Dxi = d_from(x, NE, dt); /* y = x, as the contract allows */
        DEV->act_fwd(NE, act, T, Dxi, Dxi);
        snprintf(name, sizeof name, "act_fwd %s in place", ACT_NAMES[act]);
        check(name, dt, shape, Dxi, y, NE, M_ELT);

        float *dy = h_randn(NE, 0, 1, dt), *dx = h_new(NE);
        void *Ddy = d_from(dy, NE, dt), *Ddx = d_poisoned(NE, dt);
        REF->act_bwd(NE, act, S32, x, dy, dx, 0);
        DEV->act_bwd(NE, act, T, Dx, Ddy, Ddx, 0);
        ref_out(dx, NE, dt);
        snprintf(name, sizeof name, "act_bwd %s", ACT_NAMES[act]);
        check(name, dt, shape, Ddx, dx, NE, M_ELT);
        float *prior = h_randn(NE, 0, 1, dt), *dxa = h_copy(prior, NE);
        void *Ddxa = d_from(prior, NE, dt);
        REF->act_bwd(NE, act, S32, x, dy, dxa, 1);
        DEV->act_bwd(NE, act, T, Dx, Ddy, Ddxa, 1);
        ref_out(dxa, NE, dt);
        snprintf(name, sizeof name, "act_bwd %s acc", ACT_NAMES[act]);
        check(name, dt, shape, Ddxa, dxa, NE, M_ELT);
        release();
    }
}

typedef struct chanmul_case {
    const char *name;
    int n;
    int64_t hw;
    int c;
} chanmul_case;

static const chanmul_case CHANMUL_CASES[] = {
    {"se 7x7, 8-wide", 3, 49, 64},
    {"c 2048 > 1024", 2, 49, 2048},
    {"c 1030 > 1024, not 8k", 2, 25, 1030},
    {"hw 1", 5, 1, 200},
    {"hw 1, c 3", 3, 1, 3},
};

/* chanmul_fwd, and chanmul_bwd with both outputs, both accumulating, and each alone (the other NULL);
 * x, s, y and their gradients of the row's type, then (sf: fp16/bf16 rows) s and ds fp32 */
static void test_chanmul(const chanmul_case *cc, int dt, int sf)
{
    if (!unit("chanmul [%s] %s%s", cc->name, DTYPE_NAME[dt], sf ? " s32" : ""))
        return;
    char shape[64], name[96];
    snprintf(shape, sizeof shape, "n%d hw%lld c%d [%s]", cc->n, (long long)cc->hw, cc->c, cc->name);
    const int n = cc->n, c = cc->c, st = sf ? F32 : dt;
    const int64_t hw = cc->hw, nx = (int64_t)n * hw * c, ns = (int64_t)n * c;
    const char *tag = sf ? " (s fp32)" : "";
    float *x = h_randn(nx, 0, 1, dt), *s = h_uniform(ns, 0, 1), *y = h_new(nx);
    h_round(s, ns, st); /* a sigmoid's outputs, in (0, 1) */
    void *Dx = d_from(x, nx, dt), *Ds = d_from(s, ns, st), *Dy = d_poisoned(nx, dt);
    REF->chanmul_fwd(n, hw, c, x, S32, s, S32, y, S32);
    DEV->chanmul_fwd(n, hw, c, Dx, ty(dt), Ds, ty(st), Dy, ty(dt));
    ref_out(y, nx, dt);
    snprintf(name, sizeof name, "chanmul_fwd%s", tag);
    check(name, dt, shape, Dy, y, nx, M_ELT);

    float *dy = h_randn(nx, 0, 1, dt);
    void *Ddy = d_from(dy, nx, dt);
    /* variants: (dx wanted, ds wanted, accumulate both) */
    static const int V[][3] = {{1, 1, 0}, {1, 1, 1}, {0, 1, 0}, {1, 0, 0}};
    static const char *const VTAG[] = {"", " acc", " (dx NULL)", " (ds NULL)"};
    for (size_t k = 0; k < sizeof V / sizeof V[0]; k++) {
        const int want_dx = V[k][0], want_ds = V[k][1], acc = V[k][2];
        float *dx = NULL, *ds = NULL;
        void *Ddx = NULL, *Dds = NULL;
        if (want_dx) {
            float *p0 = h_randn(nx, 0, 1, dt);
            dx = acc ? h_copy(p0, nx) : h_new(nx);
            Ddx = acc ? d_from(p0, nx, dt) : d_poisoned(nx, dt);
        }
        if (want_ds) {
            float *p0 = h_randn(ns, 0, 1, st);
            ds = acc ? h_copy(p0, ns) : h_new(ns);
            Dds = acc ? d_from(p0, ns, st) : d_poisoned(ns, st);
        }
        REF->chanmul_bwd(n, hw, c, x, S32, s, S32, dy, S32, dx, ds, acc, acc);
        DEV->chanmul_bwd(n, hw, c, Dx, ty(dt), Ds, ty(st), Ddy, ty(dt), Ddx, Dds, acc, acc);
        if (want_dx) {
            ref_out(dx, nx, dt);
            snprintf(name, sizeof name, "chanmul_bwd%s%s dx", VTAG[k], tag);
            check(name, dt, shape, Ddx, dx, nx, M_ELT);
        }
        if (want_ds) {
            ref_out(ds, ns, st);
            snprintf(name, sizeof name, "chanmul_bwd%s%s ds", VTAG[k], tag);
            check_as(name, dt, st, shape, Dds, ds, ns, M_RED);
        }
    }
    release();
}

static void test_acts(void)
{
    if (want_test("act"))
        ALL_DTYPES test_act(dt);
    if (want_test("chanmul")) {
        /* --quick: the first case, and the one whose rows span two chunks of ds and leave a tail */
        for (size_t i = 0; i < sizeof CHANMUL_CASES / sizeof CHANMUL_CASES[0]; i++)
            if (!QUICK || i == 0 || i == 2)
                ALL_DTYPES
                {
                    test_chanmul(&CHANMUL_CASES[i], dt, 0);
                    if (dt != F32)
                        test_chanmul(&CHANMUL_CASES[i], dt, 1);
                }
    }
}

/* --- linear, flatten, dropout, loss --------------------------------------------------------------- */

static void test_linear(int n, int in, int out, int bias, int dt)
{
    if (!unit("linear n%d %d>%d%s %s", n, in, out, bias ? " bias" : "", DTYPE_NAME[dt]))
        return;
    char name[96], shape[64];
    snprintf(shape, sizeof shape, "n%d %d>%d%s", n, in, out, bias ? " bias" : "");
    const int64_t nx = (int64_t)n * in, ny = (int64_t)n * out, nw = (int64_t)out * in;
    const dt_dtype T = ty(dt);
    float *x = h_randn(nx, 0, 1, dt), *w = h_randn(nw, 0, 1 / sqrt(in), dt), *b = h_randn(out, 0, 0.5, dt);
    void *Dx = d_from(x, nx, dt), *Dw = d_from(w, nw, dt), *Db = d_from(b, out, dt);
    float *y = h_new(ny);
    void *Dy = d_poisoned(ny, dt);
    plan_scratch(DEV->linear_scratch(n, in, out, T));
    REF->linear_fwd(n, in, out, S32, x, w, bias ? b : NULL, y);
    DEV->linear_fwd(n, in, out, T, Dx, Dw, bias ? Db : NULL, Dy);
    ref_out(y, ny, dt);
    check("linear_fwd", dt, shape, Dy, y, ny, M_RED);

    float *dy = h_randn(ny, 0, 1, dt);
    void *Ddy = d_from(dy, ny, dt);
    /* variants: (dx wanted, acc_dx, acc_params) */
    static const int V[][3] = {{1, 0, 0}, {1, 1, 1}, {0, 0, 0}};
    for (size_t k = 0; k < 3; k++) {
        const int want_dx = V[k][0], adx = V[k][1], ap = V[k][2];
        float *dx = NULL, *dw, *db = NULL;
        void *Ddx = NULL, *Ddw, *Ddb = NULL;
        if (want_dx) {
            float *p0 = h_randn(nx, 0, 1, dt);
            dx = adx ? h_copy(p0, nx) : h_new(nx);
            Ddx = adx ? d_from(p0, nx, dt) : d_poisoned(nx, dt);
        }
        float *pw = h_randn(nw, 0, 1, dt), *pb = h_randn(out, 0, 1, dt);
        dw = ap ? h_copy(pw, nw) : h_new(nw);
        Ddw = ap ? d_from(pw, nw, dt) : d_poisoned(nw, dt);
        if (bias) {
            db = ap ? h_copy(pb, out) : h_new(out);
            Ddb = ap ? d_from(pb, out, dt) : d_poisoned(out, dt);
        }
        REF->linear_bwd(n, in, out, S32, x, w, dy, dx, dw, db, adx, ap);
        DEV->linear_bwd(n, in, out, T, Dx, Dw, Ddy, Ddx, Ddw, Ddb, adx, ap);
        const char *tag = !want_dx ? " (dx NULL)" : adx ? " acc" : "";
        if (want_dx) {
            ref_out(dx, nx, dt);
            snprintf(name, sizeof name, "linear_bwd%s dx", tag);
            check(name, dt, shape, Ddx, dx, nx, M_RED);
        }
        ref_out(dw, nw, dt);
        snprintf(name, sizeof name, "linear_bwd%s dw", tag);
        check(name, dt, shape, Ddw, dw, nw, M_RED);
        if (bias) {
            ref_out(db, out, dt);
            snprintf(name, sizeof name, "linear_bwd%s db", tag);
            check(name, dt, shape, Ddb, db, out, M_RED);
        }
    }
    planned_row("linear_scratch reserved, ops allocate nothing", dt, shape);
    release();
}

static void test_flatten(int n, int h, int w, int c, int dt)
{
    if (!unit("flatten n%d %dx%dx%d %s", n, h, w, c, DTYPE_NAME[dt]))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "n%d %dx%dx%d", n, h, w, c);
    const int64_t ne = (int64_t)n * h * w * c;
    const dt_dtype T = ty(dt);
    float *x = h_randn(ne, 0, 1, dt), *y = h_new(ne);
    void *Dx = d_from(x, ne, dt), *Dy = d_poisoned(ne, dt);
    REF->flatten_fwd(n, h, w, c, S32, x, y);
    DEV->flatten_fwd(n, h, w, c, T, Dx, Dy);
    ref_out(y, ne, dt);
    check("flatten_fwd", dt, shape, Dy, y, ne, M_EXACT);
    float *dy = h_randn(ne, 0, 1, dt), *dx = h_new(ne);
    void *Ddy = d_from(dy, ne, dt), *Ddx = d_poisoned(ne, dt);
    REF->flatten_bwd(n, h, w, c, S32, dy, dx, 0);
    DEV->flatten_bwd(n, h, w, c, T, Ddy, Ddx, 0);
    ref_out(dx, ne, dt);
    check("flatten_bwd", dt, shape, Ddx, dx, ne, M_EXACT);
    float *p0 = h_randn(ne, 0, 1, dt), *dxa = h_copy(p0, ne);
    void *Ddxa = d_from(p0, ne, dt);
    REF->flatten_bwd(n, h, w, c, S32, dy, dxa, 1);
    DEV->flatten_bwd(n, h, w, c, T, Ddy, Ddxa, 1);
    ref_out(dxa, ne, dt);
    check("flatten_bwd acc", dt, shape, Ddxa, dxa, ne, M_EXACT);
    release();
}

static void test_dropout(int64_t n, float p, uint64_t seed, int dt)
{
    if (!unit("dropout n%lld p%g %s", (long long)n, (double)p, DTYPE_NAME[dt]))
        return;
    char name[64], shape[64];
    snprintf(shape, sizeof shape, "n=%lld p=%g", (long long)n, (double)p);
    const dt_dtype T = ty(dt);
    float *x = h_randn(n, 0, 1, dt), *y = h_new(n);
    void *Dx = d_from(x, n, dt), *Dy = d_poisoned(n, dt);
    uint8_t *mask = hold(malloc((size_t)n), 0), *Dmask = d_poisoned_u8(n);
    /* seeded by a scalars block's model step (read when the op runs: a graph's launch), then by
     * the seed alone; the second is what the rows below use */
    dt_scalars hs = s_clean();
    hs.model_step = 1000003;
    REF->dropout_fwd(n, p, seed, 17, &hs, x, S32, y, S32, mask);
    DEV->dropout_fwd(n, p, seed, 17, d_scalars(&hs), Dx, T, Dy, T, Dmask);
    cmp_u8("dropout_fwd mask, model_step seeded", dt, shape, d_result_u8(Dmask, n), mask, n);
    REF->dropout_fwd(n, p, seed, 0, NULL, x, S32, y, S32, mask);
    DEV->dropout_fwd(n, p, seed, 0, NULL, Dx, T, Dy, T, Dmask);
    ref_out(y, n, dt);
    check("dropout_fwd y", dt, shape, Dy, y, n, M_ELT);
    snprintf(name, sizeof name, "dropout_fwd mask");
    cmp_u8(name, dt, shape, d_result_u8(Dmask, n), mask, n);
    uint8_t *Dm = d_bytes((size_t)n);
    DEV->mem_put(Dm, mask, (size_t)n);
    float *dy = h_randn(n, 0, 1, dt), *dx = h_new(n);
    void *Ddy = d_from(dy, n, dt), *Ddx = d_poisoned(n, dt);
    REF->dropout_bwd(n, p, mask, dy, S32, dx, S32, 0);
    DEV->dropout_bwd(n, p, Dm, Ddy, T, Ddx, T, 0);
    ref_out(dx, n, dt);
    check("dropout_bwd", dt, shape, Ddx, dx, n, M_ELT);
    float *p0 = h_randn(n, 0, 1, dt), *dxa = h_copy(p0, n);
    void *Ddxa = d_from(p0, n, dt);
    REF->dropout_bwd(n, p, mask, dy, S32, dxa, S32, 1);
    DEV->dropout_bwd(n, p, Dm, Ddy, T, Ddxa, T, 1);
    ref_out(dxa, n, dt);
    check("dropout_bwd acc", dt, shape, Ddxa, dxa, n, M_ELT);
    release();
}

/* stochastic depth on n images of per elements: the mask seeded by a scalars block's model step (it
 * must equal dropout_fwd's first n bytes under the same seed, salt and block, on the device), then by
 * the seed alone, with y, and the backward overwriting and accumulating */
static void test_sdepth(int n, int64_t per, float p, uint64_t seed, int dt)
{
    if (!unit("sdepth n%d per%lld p%g %s", n, (long long)per, (double)p, DTYPE_NAME[dt]))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "n%d per %lld p=%g", n, (long long)per, (double)p);
    const int64_t ne = (int64_t)n * per;
    const dt_dtype T = ty(dt);
    float *x = h_randn(ne, 0, 1, dt), *y = h_new(ne);
    void *Dx = d_from(x, ne, dt), *Dy = d_poisoned(ne, dt);
    uint8_t *mask = hold(malloc((size_t)n), 0), *Dmask = d_poisoned_u8(n), *Ddrop = d_poisoned_u8(n);
    dt_scalars hs = s_clean();
    hs.model_step = 1000003;
    dt_scalars *Ds = d_scalars(&hs);
    REF->sdepth_fwd(n, per, p, seed, 17, &hs, x, S32, y, S32, mask);
    DEV->sdepth_fwd(n, per, p, seed, 17, Ds, Dx, T, Dy, T, Dmask);
    cmp_u8("sdepth_fwd mask, model_step seeded", dt, shape, d_result_u8(Dmask, n), mask, n);
    /* image b's draw is dropout's for element b (n of them: y is the first n of x's) */
    void *Dyd = d_poisoned(n, dt);
    DEV->dropout_fwd(n, p, seed, 17, Ds, Dx, T, Dyd, T, Ddrop);
    cmp_u8("sdepth_fwd mask = dropout_fwd's (device)", dt, shape, d_result_u8(Dmask, n), d_result_u8(Ddrop, n), n);
    REF->sdepth_fwd(n, per, p, seed, 0, NULL, x, S32, y, S32, mask);
    DEV->sdepth_fwd(n, per, p, seed, 0, NULL, Dx, T, Dy, T, Dmask);
    ref_out(y, ne, dt);
    check("sdepth_fwd y", dt, shape, Dy, y, ne, M_ELT);
    cmp_u8("sdepth_fwd mask", dt, shape, d_result_u8(Dmask, n), mask, n);
    uint8_t *Dm = d_bytes((size_t)n);
    DEV->mem_put(Dm, mask, (size_t)n);
    float *dy = h_randn(ne, 0, 1, dt), *dx = h_new(ne);
    void *Ddy = d_from(dy, ne, dt), *Ddx = d_poisoned(ne, dt);
    REF->sdepth_bwd(n, per, p, mask, dy, S32, dx, S32, 0);
    DEV->sdepth_bwd(n, per, p, Dm, Ddy, T, Ddx, T, 0);
    ref_out(dx, ne, dt);
    check("sdepth_bwd", dt, shape, Ddx, dx, ne, M_ELT);
    float *p0 = h_randn(ne, 0, 1, dt), *dxa = h_copy(p0, ne);
    void *Ddxa = d_from(p0, ne, dt);
    REF->sdepth_bwd(n, per, p, mask, dy, S32, dxa, S32, 1);
    DEV->sdepth_bwd(n, per, p, Dm, Ddy, T, Ddxa, T, 1);
    ref_out(dxa, ne, dt);
    check("sdepth_bwd acc", dt, shape, Ddxa, dxa, ne, M_ELT);
    release();
}

/* labels and logits arranged so that every kind of row counts: i % 4 == 1, the label is the row's
 * (first) largest logit (top-1); 2, the label's logit ties the largest (top-1: a tie counts for the
 * label); 3, exactly one logit above the label's (top-5, not top-1); 0, as drawn (mostly misses) */
static void xent_arrange(int n, int k, float *z, int32_t *labels)
{
    for (int i = 0; i < n; i++) {
        float *r = z + (int64_t)i * k;
        int a = 0;
        for (int j = 1; j < k; j++)
            if (r[j] > r[a])
                a = j;
        if (i % 4 == 1) {
            labels[i] = a;
        } else if (i % 4 == 2) {
            r[labels[i]] = r[a];
        } else if (i % 4 == 3 && k > 1) {
            if (labels[i] == a)
                labels[i] = (a + 1) % k;
            r[labels[i]] = r[a];
            r[a] += 1.0f;
        }
    }
}

static int32_t *d_labels(const int32_t *labels, int n)
{
    int32_t *d = d_bytes((size_t)n * sizeof(int32_t));
    DEV->mem_put(d, labels, (size_t)n * sizeof(int32_t));
    return d;
}

/* xent writes into the scalars block: the mean loss, and adds to loss_sum, the hits, rows and
 * non-finite rows (the block starts with some, so the additions show) */
static dt_scalars s_metrics(void)
{
    dt_scalars s = s_clean();
    s.loss = 123.0;
    s.loss_sum = 2.5;
    s.hits1 = 3;
    s.hits5 = 4;
    s.rows = 11;
    s.nonfinite_rows = 1;
    s.agree[DT_AGREE_SIGNAL] = 1;
    return s;
}

static void test_xent(int n, int k, float eps, int dt)
{
    if (!unit("xent n%d k%d eps%g %s", n, k, (double)eps, DTYPE_NAME[dt]))
        return;
    char shape[64];
    snprintf(shape, sizeof shape, "n%d k%d eps %g", n, k, (double)eps);
    const int64_t nz = (int64_t)n * k;
    const dt_dtype T = ty(dt);
    float *z = h_randn(nz, 0, 3, dt), *g = h_new(nz);
    void *Dg = d_poisoned(nz, dt);
    int32_t *labels = hold(malloc((size_t)n * sizeof(int32_t)), 0);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)dt_rng_below(&RNG, (uint64_t)k);
    xent_arrange(n, k, z, labels);
    h_round(z, nz, dt);
    void *Dz = d_from(z, nz, dt);
    int32_t *Dl = d_labels(labels, n); /* labels are device memory */
    dt_scalars hs = s_metrics();
    dt_scalars *Ds = d_scalars(&hs);
    plan_scratch(DEV->xent_scratch(n, k));
    REF->xent(n, k, S32, z, labels, eps, g, &hs);
    DEV->xent(n, k, T, Dz, Dl, eps, Dg, Ds);
    cmp_scalar("xent loss", dt, shape, d_scalars_get(Ds).loss, hs.loss, M_LOSS);
    cmp_scalars("xent scalars (sums, hits, rows, flag)", dt, shape, Ds, &hs, 1);
    ref_out(g, nz, dt);
    check("xent dlogits", dt, shape, Dg, g, nz, M_RED);
    /* again on the same blocks, without dlogits: the loss as before, the sums added to again */
    REF->xent(n, k, S32, z, labels, eps, NULL, &hs);
    DEV->xent(n, k, T, Dz, Dl, eps, NULL, Ds);
    cmp_scalar("xent loss (dlogits NULL)", dt, shape, d_scalars_get(Ds).loss, hs.loss, M_LOSS);
    cmp_scalars("xent scalars (dlogits NULL, added)", dt, shape, Ds, &hs, 1);
    /* the loss scaler's factor from the block: dlogits times scale_f, the loss as it was */
    const float sf = 65536.0f;
    hs.scale_f = sf;
    d_scalars_set(Ds, offsetof(dt_scalars, scale_f), &sf, sizeof sf);
    float *gs = h_new(nz);
    void *Dgs = d_poisoned(nz, dt);
    REF->xent(n, k, S32, z, labels, eps, gs, &hs);
    DEV->xent(n, k, T, Dz, Dl, eps, Dgs, Ds);
    cmp_scalar("xent loss (scale 65536)", dt, shape, d_scalars_get(Ds).loss, hs.loss, M_LOSS);
    ref_out(gs, nz, dt);
    check("xent dlogits scale 65536", dt, shape, Dgs, gs, nz, M_RED);
    planned_row("xent_scratch reserved, ops allocate nothing", dt, shape);
    release();
}

/* rows holding NaN, +inf and -inf: each a miss counted in nonfinite_rows, the mean loss NaN, which
 * sets the overflow flag; the other rows' gradients as usual */
static void test_xent_nonfinite(int dt)
{
    if (!unit("xent non-finite %s", DTYPE_NAME[dt]))
        return;
    const int n = 9, k = 13;
    const int64_t nz = (int64_t)n * k;
    const char *shape = "n9 k13: NaN, inf, -inf rows";
    float *z = h_randn(nz, 0, 3, dt), *g = h_new(nz);
    void *Dg = d_poisoned(nz, dt);
    int32_t *labels = hold(malloc((size_t)n * sizeof(int32_t)), 0);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)dt_rng_below(&RNG, (uint64_t)k);
    xent_arrange(n, k, z, labels);
    z[2 * k + 5] = NAN;
    z[5 * k + 0] = INFINITY;
    z[6 * k + 3] = -INFINITY;
    h_round(z, nz, dt);
    void *Dz = d_from(z, nz, dt);
    int32_t *Dl = d_labels(labels, n);
    dt_scalars hs = s_metrics();
    const int64_t nonfinite0 = hs.nonfinite_rows;
    dt_scalars *Ds = d_scalars(&hs);
    plan_scratch(DEV->xent_scratch(n, k));
    REF->xent(n, k, S32, z, labels, 0.1f, g, &hs);
    DEV->xent(n, k, ty(dt), Dz, Dl, 0.1f, Dg, Ds);
    cmp_scalars("xent non-finite rows: scalars", dt, shape, Ds, &hs, 1);
    const dt_scalars got = d_scalars_get(Ds);
    const int pass = LIST || (got.agree[DT_AGREE_OVERFLOW] == 1 && hs.agree[DT_AGREE_OVERFLOW] == 1 &&
                              got.nonfinite_rows == nonfinite0 + 3 && hs.nonfinite_rows == nonfinite0 + 3 &&
                              isnan(got.loss) && isnan(hs.loss));
    row("xent non-finite rows: flag, count, NaN loss", DTYPE_NAME[dt], shape, 0, 0, M_EXACT, 0, pass);
    if (!pass) {
        print_scalars("got ", &got);
        print_scalars("want", &hs);
    }
    ref_out(g, nz, dt);
    check("xent non-finite rows: dlogits", dt, shape, Dg, g, nz, M_RED);
    release();
}

static void test_misc(void)
{
    if (QUICK) {
        if (want_test("linear"))
            test_linear(5, 33, 17, 1, F32);
        if (want_test("flatten"))
            test_flatten(2, 3, 5, 7, F32);
        if (want_test("dropout"))
            test_dropout(NE, 0.5f, 0x9e3779b97f4a7c15ull, F32);
        if (want_test("sdepth")) { /* both paths */
            test_sdepth(64, 8 * 8 * 16, 0.2f, 0x9e3779b97f4a7c15ull, F32);
            test_sdepth(37, 147, 0.5f, 12345, F32);
        }
        if (want_test("xent")) {
            test_xent(5, 17, 0.1f, F32);
            test_xent_nonfinite(F32);
        }
        return;
    }
    ALL_DTYPES
    {
        if (want_test("linear")) {
            test_linear(37, 512, 1000, 1, dt); /* resnet's fc */
            test_linear(16, 300, 129, 0, dt);
            test_linear(3, 2048, 10, 1, dt);
        }
        if (want_test("flatten")) {
            test_flatten(3, 7, 5, 19, dt);
            test_flatten(2, 6, 6, 256, dt); /* alexnet */
            test_flatten(4, 1, 1, 2048, dt);
        }
        if (want_test("dropout")) {
            test_dropout(NE, 0.5f, 0x9e3779b97f4a7c15ull, dt);
            test_dropout(4096 * 8 + 5, 0.1f, 12345, dt);
        }
        if (want_test("sdepth")) {
            test_sdepth(64, 8 * 8 * 16, 0.2f, 0x9e3779b97f4a7c15ull, dt); /* 8-wide: per a multiple of 8 */
            test_sdepth(37, 7 * 7 * 3, 0.5f, 12345, dt);                   /* per odd: one at a time */
            test_sdepth(4099, 8, 0.5f, 777, dt);                           /* many images */
            test_sdepth(1003, 1, 0.3f, 12345, dt);                         /* per 1: dropout's mask path */
        }
        if (want_test("xent")) {
            test_xent(37, 1000, 0.0f, dt);
            test_xent(37, 1000, 0.1f, dt);
            test_xent(256, 10, 0.1f, dt);
            test_xent_nonfinite(dt);
        }
    }
}

/* --- the step-level ops ---------------------------------------------------------------------------- */

static const uint32_t SPECIALS[] = {
    0x00000000u, 0x80000000u, /* +-0 */
    0x7f800000u, 0xff800000u, /* +-inf */
    0x7fc00000u, 0xffc00000u, 0x7fc00001u, 0x7fffffffu, 0xffffffffu, /* quiet NaNs, with payloads */
    0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7f80e000u,              /* signalling NaNs */
    0x477fe000u, 0xc77fe000u, /* 65504, fp16's largest */
    0x477fefffu, 0x477ff000u, 0xc77ff000u, 0x477ff001u, 0x47800000u, 0x49742400u, /* around fp16 overflow */
    0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x7f7effffu, /* FLT_MAX, bf16 overflow ties */
    0x38800000u, 0x387fc000u, 0x387fe000u, /* fp16 min normal, max subnormal, tie into min normal */
    0x33800000u, 0x33000000u, 0x33000001u, 0x33c00000u, 0x34200000u, 0x32ffffffu, 0xb3000000u, 0xb3c00000u,
    0x00000001u, 0x80000001u, 0x007fffffu, 0x00400000u, 0x80400000u, 0x00008000u, 0x00018000u, /* fp32 subnormals */
    0x00800000u, 0x80800000u,                                         /* FLT_MIN */
    0x3f801000u, 0x3f803000u, 0x3f801001u, 0x3f800fffu, /* fp16 ties at 1 */
    0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, /* bf16 ties at 1 */
    0x3f800001u, 0x3f7fffffu, 0xbf803000u, 0xbf818000u, 0x3eaaaaabu, 0x40490fdbu,
};

static void test_round_half(void)
{
    if (!unit("round_half"))
        return;
    if (!want_test("round_half"))
        return;
    const int64_t ns = (int64_t)(sizeof SPECIALS / sizeof SPECIALS[0]);
    const int64_t n = QUICK ? ns + 4096 : (1 << 20) + 5;
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        float *x = h_new(n);
        for (int64_t i = 0; i < n; i++) {
            if (i < ns)
                x[i] = float_of(SPECIALS[i]);
            else if (i % 2) /* any bit pattern: every exponent, NaNs and subnormals included */
                x[i] = float_of((uint32_t)dt_rng_next(&RNG));
            else /* around the reduced types' ranges: 2^-30 .. 2^20 */
                x[i] = (float)(dt_rng_normal(&RNG) * ldexp(1.0, (int)dt_rng_below(&RNG, 51) - 30));
        }
        float *Dx = d_from(x, n, F32); /* round_half works on fp32 arrays */
        REF->round_half(n, x, bf16);
        DEV->round_half(n, Dx, bf16);
        char shape[64];
        snprintf(shape, sizeof shape, "n=%lld (%lld specials)", (long long)n, (long long)ns);
        float *got = d_result(Dx, n, F32);
        int ok = cmp_f32(bf16 ? "round_half bf16" : "round_half fp16", -1, shape, got, x, n, M_BITS);
        if (!ok) { /* say which kinds of input differ */
            int64_t nan = 0, other = 0;
            for (int64_t i = 0; i < n; i++)
                if (bits_of(got[i]) != bits_of(x[i]))
                    *(isnan(x[i]) ? &nan : &other) += 1;
            printf("      differing: %lld NaN inputs (payload or sign), %lld others\n", (long long)nan,
                   (long long)other);
        }
        release();
    }
}

static void test_unscale_check(int dt)
{
    if (!unit("unscale_check %s", DTYPE_NAME[dt]))
        return;
    if (!want_test("unscale_check"))
        return;
    const int64_t n = QUICK ? 4099 : 3000017;
    static const struct {
        const char *name;
        int what; /* 0 clean, 1 inf near the end, 2 NaN first, 3 overflow by the multiply */
        float inv;
        int set; /* the overflow flag already set (by xent or another tensor's check) */
    } v[] = {
        {"unscale_check clean", 0, 1.0f / 65536, 0},
        {"unscale_check inf near the end", 1, 1.0f / 65536, 0},
        {"unscale_check clean leaves a set flag", 0, 1.0f / 1024, 1}, /* it only sets the flag */
        {"unscale_check NaN first", 2, 1.0f / 65536, 0},
        {"unscale_check overflow", 3, 4.0f, 0}, /* fp16: 65504 times 1e34 (below) */
    };
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        float *g = h_randn(n, 0, 4096, dt); /* |g| < 14200: finite in fp16 */
        /* the overflow by the multiply: fp16 holds at most 65504, so its case multiplies that by 1e34
         * (over FLT_MAX; the rest stays below 1.5e38) */
        const int fp16_overflow = v[k].what == 3 && dt == F16;
        if (v[k].what == 1)
            g[n - 2] = INFINITY;
        else if (v[k].what == 2)
            g[0] = NAN;
        else if (v[k].what == 3)
            g[n / 2] = fp16_overflow ? 65504.0f : 3e38f;
        h_round(g, n, dt);
        float *g0 = h_copy(g, n);
        void *Dg = d_from(g, n, dt);
        /* 1/scale from the block, the flag into it */
        dt_scalars hs = s_clean();
        hs.inv_scale = fp16_overflow ? 1e34f : v[k].inv;
        hs.agree[DT_AGREE_OVERFLOW] = v[k].set;
        hs.agree[DT_AGREE_SIGNAL] = 1;
        dt_scalars *Ds = d_scalars(&hs);
        REF->unscale_check(n, S32, g, &hs);
        DEV->unscale_check(n, ty(dt), Dg, Ds);
        const int fr = hs.agree[DT_AGREE_OVERFLOW], fd = d_scalars_get(Ds).agree[DT_AGREE_OVERFLOW];
        const int expect = v[k].what != 0 || v[k].set;
        char op[80];
        snprintf(op, sizeof op, "%s flag", v[k].name);
        row(op, DTYPE_NAME[dt], shape, fabs((double)fd - expect), fabs((double)fd - expect), M_EXACT, 0,
            LIST || (fd == expect && fr == expect));
        if (!LIST && fd != expect)
            printf("      the device's flag is %d, want %d\n", fd, expect);
        if (!LIST && fr != expect)
            printf("      the reference's flag is %d, want %d\n", fr, expect);
        /* nothing else in the block changes */
        snprintf(op, sizeof op, "%s scalars", v[k].name);
        cmp_scalars(op, dt, shape, Ds, &hs, 0);
        /* the op only reads g: it comes back bit for bit (on both sides) */
        snprintf(op, sizeof op, "%s g unchanged", v[k].name);
        check(op, dt, shape, Dg, g0, n, M_BITS);
        snprintf(op, sizeof op, "%s g unchanged (reference)", v[k].name);
        cmp_f32(op, dt, shape, g, g0, n, M_BITS);
        release();
    }
}

/* The gradients' sum of squares (clipping): n unscaled gradients' squares added to a sum already in
 * the block, by another summation order than the CPU's (a relative 1e-12 allowed; the rest of the
 * block bit for bit); g only read. */
/* two doubles on the device from host values, and back */
static double *d_doubles(const double *h, int n)
{
    double *d = d_bytes((size_t)n * sizeof(double));
    DEV->mem_put(d, h, (size_t)n * sizeof(double));
    return d;
}

static void d_doubles_get(double *h, const double *d, int n)
{
    if (LIST)
        return;
    DEV->mem_get(h, d, (size_t)n * sizeof(double));
}

/* LARS and LAMB: tensor_sumsq's norms (relative 1e-12: the device sums in another order), lars with
 * the reference's norms (a trust-ratio row and an excluded one), lamb_moments' moments and norms,
 * lamb_apply with the reference's norms; p of the row's type then fp32 (master weights) */
static void test_norm_optimizers(int dt)
{
    if (!unit("optimizers %s", DTYPE_NAME[dt]))
        return;
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)NE);
    const dt_dtype T = ty(dt);
    if (want_test("tensor_sumsq"))
        for (int unscale = 0; unscale <= 1; unscale++) {
            float *x = h_randn(NE, 0, unscale ? 512 : 0.05, dt);
            void *Dx = d_from(x, NE, dt);
            dt_scalars hs = s_clean();
            hs.inv_scale = 1.0f / 1024;
            hs.grad_sumsq = 9.0; /* with clip_norm 1.5: the unscaled values times 1/2 */
            hs.clip_norm = 1.5f;
            dt_scalars *Ds = d_scalars(&hs);
            double want = 0, got = 0, *Dout = d_doubles(&got, 1);
            REF->tensor_sumsq(NE, x, S32, unscale, &hs, &want);
            DEV->tensor_sumsq(NE, Dx, T, unscale, Ds, Dout);
            d_doubles_get(&got, Dout, 1);
            if (LIST)
                got = want;
            const double rel = fabs(got - want) / fmax(fabs(want), 1e-300);
            row(unscale ? "tensor_sumsq unscaled, clipped" : "tensor_sumsq", DTYPE_NAME[dt], shape, fabs(got - want),
                rel, M_RED, 1e-12, LIST || rel <= 1e-12);
            release();
        }
    for (int master = 0; master <= (dt != F32); master++) {
        const int pt = master ? F32 : dt;
        const char *tag = master ? " (p fp32)" : "";
        char op[96];
        if (want_test("lars"))
            for (int excluded = 0; excluded <= 1; excluded++) {
                float *p = h_randn(NE, 0, 0.05, pt), *g = h_randn(NE, 0, 0.01, dt), *buf = h_randn(NE, 0, 1e-3, F32);
                dt_scalars hs = s_clean();
                hs.lr = 0.5f;
                double norms[2];
                REF->tensor_sumsq(NE, p, S32, 0, &hs, norms);
                REF->tensor_sumsq(NE, g, S32, 1, &hs, norms + 1);
                dt_scalars *Ds = d_scalars(&hs);
                void *Dp = d_from(p, NE, pt), *Dg = d_from(g, NE, dt);
                float *Dbuf = d_from(buf, NE, F32);
                double *Dn = d_doubles(norms, 2);
                const double eta = excluded ? 0 : 0.001;
                REF->lars(NE, p, S32, g, S32, buf, 0.9, 5e-5, eta, norms, &hs);
                DEV->lars(NE, Dp, ty(pt), Dg, T, Dbuf, 0.9, 5e-5, eta, Dn, Ds);
                ref_out(p, NE, pt);
                snprintf(op, sizeof op, "lars%s%s p", excluded ? " excluded (eta 0)" : "", tag);
                check_as(op, dt, pt, shape, Dp, p, NE, M_ELT);
                snprintf(op, sizeof op, "lars%s%s buf", excluded ? " excluded (eta 0)" : "", tag);
                check_as(op, dt, F32, shape, Dbuf, buf, NE, M_ELT);
                release();
            }
        if (want_test("lamb")) {
            float *p = h_randn(NE, 0, 0.05, pt), *g = h_randn(NE, 0, 0.01, dt), *m1 = h_randn(NE, 0, 0.01, F32),
                  *m2 = h_randn(NE, 0, 1e-4, F32);
            for (int64_t i = 0; i < NE; i++)
                m2[i] = fabsf(m2[i]);
            dt_scalars hs = s_clean();
            hs.lr = 0.01f;
            hs.sgd_steps = 4;
            dt_scalars *Ds = d_scalars(&hs);
            void *Dp = d_from(p, NE, pt), *Dg = d_from(g, NE, dt);
            float *Da = d_from(m1, NE, F32), *Db = d_from(m2, NE, F32);
            double norms[2], got[2] = {0, 0}, *Dn = d_doubles(got, 2);
            REF->lamb_moments(NE, p, S32, g, S32, m1, m2, 0.9, 0.999, 1e-6, 0.01, &hs, norms);
            DEV->lamb_moments(NE, Dp, ty(pt), Dg, T, Da, Db, 0.9, 0.999, 1e-6, 0.01, Ds, Dn);
            snprintf(op, sizeof op, "lamb_moments%s exp_avg", tag);
            check_as(op, dt, F32, shape, Da, m1, NE, M_ELT);
            snprintf(op, sizeof op, "lamb_moments%s exp_avg_sq", tag);
            check_as(op, dt, F32, shape, Db, m2, NE, M_ELT);
            d_doubles_get(got, Dn, 2);
            if (LIST)
                got[0] = norms[0], got[1] = norms[1];
            const double rel = fmax(fabs(got[0] - norms[0]) / fmax(norms[0], 1e-300),
                                    fabs(got[1] - norms[1]) / fmax(norms[1], 1e-300));
            snprintf(op, sizeof op, "lamb_moments%s norms", tag);
            row(op, DTYPE_NAME[dt], shape, rel, rel, M_RED, 1e-10, LIST || rel <= 1e-10);
            DEV->mem_put(Dn, norms, sizeof norms); /* the update from the reference's norms */
            REF->lamb_apply(NE, p, S32, m1, m2, 0.9, 0.999, 1e-6, 0.01, norms, &hs);
            DEV->lamb_apply(NE, Dp, ty(pt), Da, Db, 0.9, 0.999, 1e-6, 0.01, Dn, Ds);
            ref_out(p, NE, pt);
            snprintf(op, sizeof op, "lamb_apply%s p", tag);
            check_as(op, dt, pt, shape, Dp, p, NE, M_ELT);
            release();
        }
    }
}

static void test_grad_sumsq(int dt)
{
    if (!unit("grad_sumsq %s", DTYPE_NAME[dt]))
        return;
    if (!want_test("grad_sumsq"))
        return;
    const int64_t sizes[] = {1, 4099, QUICK ? 70001 : 3000017};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        char shape[32];
        snprintf(shape, sizeof shape, "n=%lld", (long long)n);
        float *g = h_randn(n, 0, 4096, dt);
        h_round(g, n, dt);
        float *g0 = h_copy(g, n);
        void *Dg = d_from(g, n, dt);
        dt_scalars hs = s_clean();
        hs.inv_scale = 1.0f / 65536;
        hs.grad_sumsq = 0.5; /* a sum already there: the op adds to it */
        dt_scalars *Ds = d_scalars(&hs);
        REF->grad_sumsq(n, S32, g, &hs);
        DEV->grad_sumsq(n, ty(dt), Dg, Ds);
        const double want = hs.grad_sumsq, got = LIST ? want : d_scalars_get(Ds).grad_sumsq;
        const double rel = fabs(got - want) / fmax(fabs(want), 1e-300);
        row("grad_sumsq sum", DTYPE_NAME[dt], shape, fabs(got - want), rel, M_RED, 1e-12, LIST || rel <= 1e-12);
        hs.grad_sumsq = got; /* the rest of the block: unchanged, bit for bit */
        cmp_scalars("grad_sumsq scalars", dt, shape, Ds, &hs, 0);
        check("grad_sumsq g unchanged", dt, shape, Dg, g0, n, M_BITS);
        release();
    }
}

/* The end of a step (scalars.h's dt_scalars_step_end on both sides): a run of steps per case, each
 * with or without an agreed overflow (written into the device's block as a step's start would), the
 * whole block compared bit for bit after every step; then the reference's final scale and
 * divergence against what the case works out to by hand. */
static void test_step_end(void)
{
    if (!unit("step_end"))
        return;
    if (!want_test("step_end"))
        return;
    static const struct {
        const char *name;
        int dynamic;
        double scale, min_scale, max_scale;
        int64_t growth_interval, max_nonfinite;
        const char *steps; /* one step per character: '1' an overflow agreed, '0' clean */
        double scale_after;
        int diverged_after;
    } v[] = {
        {"step_end dynamic, clean steps grow", 1, 65536, 0, 0x1p24, 3, 10, "0000000", 262144, 0},
        {"step_end dynamic, overflows back off", 1, 65536, 0, 0x1p24, 2, 10, "0110100", 16384, 0},
        {"step_end dynamic, max_scale caps", 1, 0x1p23, 0, 1e7, 1, 10, "0000", 1e7, 0},
        {"step_end dynamic, min_scale floors, diverges", 1, 4, 1.5, 0x1p24, 2000, 10, "1110", 1.5, 1},
        {"step_end dynamic, overflow at 2^-24 diverges", 1, 0x1p-23, 0, 0x1p24, 2000, 10, "1100", 0x1p-25, 1},
        {"step_end static, max_nonfinite in a row", 0, 128, 0, 0x1p24, 2000, 3, "1101110", 128, 1},
        {"step_end static, clean", 0, 1, 0, 0x1p24, 2000, 3, "000", 1, 0},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        dt_scalars hs = s_metrics(); /* metrics and the stop signal: step_end leaves them */
        hs.dynamic = v[k].dynamic;
        hs.scale = v[k].scale;
        hs.min_scale = v[k].min_scale;
        hs.max_scale = v[k].max_scale;
        hs.growth_interval = v[k].growth_interval;
        hs.max_nonfinite = v[k].max_nonfinite;
        hs.scale_f = (float)v[k].scale;
        hs.inv_scale = (float)(1.0 / v[k].scale);
        hs.sgd_steps = 5;
        dt_scalars *Ds = d_scalars(&hs);
        const int nsteps = (int)strlen(v[k].steps);
        int first_bad = -1;
        char names[512] = "";
        dt_scalars got_bad = hs, want_bad = hs;
        for (int i = 0; i < nsteps; i++) {
            const int32_t f = v[k].steps[i] == '1';
            hs.agree[DT_AGREE_OVERFLOW] = f;
            d_scalars_set(Ds, offsetof(dt_scalars, agree) + DT_AGREE_OVERFLOW * sizeof(int32_t), &f, sizeof f);
            REF->step_end(&hs);
            DEV->step_end(Ds);
            if (LIST || first_bad >= 0)
                continue;
            dt_scalars got = d_scalars_get(Ds);
            if (scalars_differ(&got, &hs, 0, names, sizeof names) != 0) {
                first_bad = i;
                got_bad = got;
                want_bad = hs;
            }
        }
        char shape[64];
        snprintf(shape, sizeof shape, "%d steps: %s", nsteps, v[k].steps);
        row(v[k].name, "-", shape, first_bad >= 0, first_bad >= 0, M_BITS, 0, first_bad < 0);
        if (first_bad >= 0) {
            printf("      after step %d: fields that differ: %s\n", first_bad + 1,
                   names[0] ? names : "(ops_check's field table does not cover dt_scalars: update SFIELDS)");
            print_scalars("got ", &got_bad);
            print_scalars("want", &want_bad);
        }
        char op[96];
        snprintf(op, sizeof op, "%s (reference by hand)", v[k].name);
        const int as_expected = hs.scale == v[k].scale_after && hs.diverged == v[k].diverged_after &&
                                hs.agree[DT_AGREE_OVERFLOW] == 0;
        row(op, "-", shape, fabs(hs.scale - v[k].scale_after), 0, M_EXACT, 0, LIST || as_expected);
        if (!LIST && !as_expected)
            printf("      the reference ends with scale %.17g diverged %d overflow %d, want scale %.17g diverged %d "
                   "overflow 0\n",
                   hs.scale, hs.diverged, hs.agree[DT_AGREE_OVERFLOW], v[k].scale_after, v[k].diverged_after);
        release();
    }
}

static void test_normalize_u8(int dt)
{
    if (!unit("normalize_u8 %s", DTYPE_NAME[dt]))
        return;
    if (!want_test("normalize_u8"))
        return;
    static const float mean[4] = {0.485f, 0.456f, 0.406f, 0.5f}, sd[4] = {0.229f, 0.224f, 0.225f, 0.25f};
    const int cs[] = {3, 1, 4};
    for (int k = 0; k < (QUICK ? 1 : 3); k++) {
        const int c = cs[k];
        const int64_t n = (int64_t)c * 8 * 17 * 19;
        uint8_t *u = hold(malloc((size_t)n), 0);
        for (int64_t i = 0; i < n; i++)
            u[i] = (uint8_t)dt_rng_below(&RNG, 256);
        uint8_t *Du = d_bytes((size_t)n); /* the batch in device memory, as a step uploads it */
        DEV->mem_put(Du, u, (size_t)n);
        float *x = h_new(n);
        void *Dx = d_poisoned(n, dt);
        float dmean[4], dsd[4];
        memcpy(dmean, mean, sizeof dmean);
        memcpy(dsd, sd, sizeof dsd);
        plan_scratch(DEV->normalize_scratch(n));
        REF->normalize_u8(n, c, u, mean, sd, S32, x);
        DEV->normalize_u8(n, c, Du, dmean, dsd, ty(dt), Dx);
        /* mean and std are read when the op is issued: changing them afterwards changes nothing */
        for (int j = 0; j < 4; j++)
            dmean[j] = dsd[j] = NAN;
        ref_out(x, n, dt);
        char shape[32];
        snprintf(shape, sizeof shape, "n=%lld c=%d", (long long)n, c);
        check("normalize_u8", dt, shape, Dx, x, n, M_ELT);
        planned_row("normalize_scratch reserved, ops allocate nothing", dt, shape);
        release();
    }
}

/* --- whole model ----------------------------------------------------------------------------------- */

/* the model and its batch: --model ARCH --model-batch N --model-size S change them */
static const char *MARCH = "resnet8";
static int MB = 32, MS = 32;
static uint64_t MSEED; /* from --seed: the model's weights and batches */
#define MCLASSES 10
#define MLR 0.01f

#define MSTEPS_MAX 3
typedef struct trained {
    double loss[MSTEPS_MAX];
    int skipped[MSTEPS_MAX];
    double scale;
    int tail_ok;     /* the smaller batch's forward and backward ran */
    long unplanned;  /* device allocations inside ops after planning (CUDA) */
    float *weights, *buffers, *momentum, *master; /* host copies after the steps */
    float *weights0, *buffers0;                   /* ... and before them */
    int64_t nw, nb;
} trained;

static float *fetch(const dt_backend *be, const float *src, int64_t n)
{
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!h)
        exit(1);
    be->mem_get(h, src, (size_t)n * sizeof(float));
    return h;
}

/* a model's trainable parameters (buffers: its BN statistics) as fp32 at their places in the fp32
 * layout (dt_param.off), whatever their storage types */
static float *fetch_params(const dt_model *m, int buffers)
{
    int64_t n = buffers ? m->n_buffers : m->n_weights;
    float *h = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (!h)
        exit(1);
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        if (p->kind != DT_P_BN_COUNT && dt_param_trainable(p) == !buffers)
            dt_param_get(m, p, h + p->off);
    }
    return h;
}

/* the device part of one training step as dtrain issues it (train/step.c): the in scalars, pixels
 * and labels uploaded from their host buffers (the pixels on the copy queue, the compute queue
 * waiting for them), normalisation, forward, the loss, backward, the scaler's check, the optimiser and
 * the download of the out scalars. Nothing here waits on the host: a capture keeps all of it. */
typedef struct step_io {
    dt_optim *opt;
    dt_amp *amp;
    float *x;              /* the normalised batch */
    uint8_t *u, *ud;       /* its uint8 pixels: the host buffer, the uploaded copy */
    dt_event *up;          /* after the upload from u */
    size_t nu;
} step_io;

static int issue_step(const dt_backend *be, dt_model *m, const step_io *io)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    dt_model_step_upload(m);
    be->upload(io->ud, io->u, io->nu, DT_QUEUE_COPY);
    be->event_record(io->up, DT_QUEUE_COPY);
    be->event_wait(DT_QUEUE_COMPUTE, io->up);
    be->normalize_u8((int64_t)io->nu, 3, io->ud, mean, sd, S32, io->x);
    dt_model_labels_upload(m, MB);
    if (dt_model_forward(m, io->x, MB) != DT_OK || dt_model_loss_async(m, MB, 0.1f) != DT_OK ||
        dt_model_backward(m, MB, 0) != DT_OK)
        return 0;
    dt_amp_check(m);
    dt_amp_update(io->opt, m, io->amp->master);
    return 1;
}

/* `steps` SGD steps (momentum, weight decay, label smoothing) at opt level `level` on fixed random
 * uint8 batches, as dtrain runs them; with graph, step 0 issued, step 1 captured as a graph and
 * launched, the steps after it launched again (train/step.c's single-rank path: be needs graphs).
 * Without graph, then a forward and backward of a smaller batch (planned with the full one, as an
 * epoch's last). *m keeps the model's parameter table for the comparison. */
static int train_steps(const dt_backend *be, int level, int bf16, int steps, int graph, trained *t, dt_model *m)
{
    dt_optim opt;
    dt_amp amp;
    dt_amp_props props;
    dt_amp_overrides ov = {.keep_batchnorm_fp32 = -1, .master_weights = -1, .bf16 = bf16};
    memset(t, 0, sizeof *t);
    memset(m, 0, sizeof *m);
    if (dt_model_create(m, MARCH, 3, MCLASSES, be) != DT_OK)
        return 0;
    dt_model_init_weights(m, MSEED, 0);
    const int tail = MB > 3 ? MB - 3 : 1;
    int ok = dt_amp_resolve(level, &ov, &props) == DT_OK && dt_amp_attach(&amp, m, &props) == DT_OK &&
             dt_model_plan_sizes(m, MB, MS, MS, &tail, 1) == DT_OK &&
             dt_optim_init(&opt, m, MLR, 0.9f, 0, 1e-4f, 0, 0) == DT_OK;
    if (!ok)
        return 0;
    const long unplanned0 = dt_cuda_unplanned_allocs();
    t->weights0 = fetch_params(m, 0);
    t->buffers0 = fetch_params(m, 1);
    step_io io = {.opt = &opt, .amp = &amp, .nu = (size_t)MB * MS * MS * 3};
    io.x = be->mem_alloc(io.nu * sizeof(float));
    io.u = be->host_alloc(io.nu);
    io.ud = be->mem_alloc(io.nu);
    io.up = be->event_create();
    int32_t *y = malloc((size_t)MB * sizeof(int32_t));
    if (!io.x || !io.u || !io.ud || !y || !io.up)
        exit(1);
    dt_graph *g = NULL;
    dt_rng r;
    dt_rng_seed(&r, MSEED, 1);
    for (int s = 0; ok && s < steps; s++) {
        /* the host part: the in scalars, the batch into the host buffers (once the last upload from
         * them is done) */
        dt_model_step_write(m, MLR, s, 0);
        be->event_sync(io.up);
        for (size_t i = 0; i < io.nu; i++)
            io.u[i] = (uint8_t)dt_rng_below(&r, 256);
        for (int i = 0; i < MB; i++)
            y[i] = (int32_t)dt_rng_below(&r, MCLASSES);
        ok = dt_model_write_labels(m, y, MB) == DT_OK;
        if (ok && (!graph || s == 0)) {
            ok = issue_step(be, m, &io);
        } else if (ok && !g) {
            ok = be->graph_begin() == DT_OK;
            int issued = ok && issue_step(be, m, &io);
            g = ok ? be->graph_end() : NULL;
            ok = issued && g;
            if (ok)
                be->graph_launch(g);
        } else if (ok) {
            be->graph_launch(g);
            dt_model_host_step(m); /* what forward and backward count on the host */
        }
        if (!ok)
            break;
        const dt_scalars *out = dt_amp_finish(&amp.scaler, NULL, &opt, m);
        dt_scalars sc;
        ok = dt_model_get_scalars(m, &sc) == DT_OK; /* the step's loss (a check may read it) */
        t->loss[s] = sc.loss;
        t->skipped[s] = out ? out->skipped : -1;
    }
    if (g)
        be->graph_destroy(g);
    t->nw = m->n_weights;
    t->nb = m->n_buffers;
    t->scale = amp.scaler.scale;
    t->weights = fetch_params(m, 0);
    t->buffers = fetch_params(m, 1);
    t->momentum = fetch(be, opt.momentum_buf, m->n_weights);
    t->master = amp.master ? fetch(be, amp.master, m->n_weights) : NULL;
    double tail_loss = 0;
    t->tail_ok = ok && !graph && dt_model_forward(m, io.x, tail) == DT_OK &&
                 dt_model_loss(m, y, tail, 0.1f, &tail_loss) == DT_OK && dt_model_backward(m, tail, 0) == DT_OK;
    drain(be);
    t->unplanned = dt_cuda_unplanned_allocs() - unplanned0;
    be->event_sync(io.up);
    be->event_destroy(io.up);
    be->mem_free(io.x);
    be->mem_free(io.ud);
    be->host_free(io.u);
    free(y);
    dt_optim_free(&opt);
    dt_amp_free(&amp);
    return ok;
}

/* floats of a and b (n each; both NULL: none) whose bits differ */
static int64_t bits_differ(const float *a, const float *b, int64_t n)
{
    if (!a || !b)
        return a != b ? n : 0;
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

static void drop_trained(trained *t)
{
    free(t->weights);
    free(t->buffers);
    free(t->momentum);
    free(t->master);
    free(t->weights0);
    free(t->buffers0);
}

/* Per tensor of one of the flat arrays: |got - want| / |want - base| (norm-wise; base: the state
 * before training, so this is the relative error of what training changed) or |got - want| / |want|
 * without a base. One row: the worst tensor, named; --verbose prints every tensor. */
static int VERBOSE;
static void cmp_tensors(const char *what, const char *level, const dt_model *m, const float *got, const float *want,
                        const float *base, int buffers, double tol)
{
    if (LIST) {
        char op[64];
        snprintf(op, sizeof op, "model %s", what);
        list_row(op, level, "the worst tensor");
        return;
    }
    double worst = -1, all_num = 0, all_den = 0;
    const char *worst_name = "-";
    for (int i = 0; i < m->n_params; i++) {
        const dt_param *p = &m->params[i];
        int is_buf = p->kind == DT_P_BN_MEAN || p->kind == DT_P_BN_VAR;
        if (p->kind == DT_P_BN_COUNT || (buffers ? !is_buf : !dt_param_trainable(p)))
            continue;
        double num = 0, den = 0;
        for (int64_t k = p->off; k < p->off + p->numel; k++) {
            double d = (double)got[k] - want[k], r = (double)want[k] - (base ? base[k] : 0);
            num += d * d;
            den += r * r;
        }
        all_num += num;
        all_den += den;
        double r = den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0;
        if (isnan(r))
            r = INFINITY;
        if (VERBOSE)
            printf("      %s %s %-40s %.3e (|change| %.3e)\n", level, what, p->name, r, sqrt(den));
        if (r > worst) {
            worst = r;
            worst_name = p->name;
        }
    }
    double all = all_den > 0 ? sqrt(all_num / all_den) : all_num > 0 ? INFINITY : 0;
    char op[64], shape[128];
    snprintf(op, sizeof op, "model %s", what);
    snprintf(shape, sizeof shape, "worst %s", worst_name);
    int pass = worst <= tol;
    printf("%-40s %-4s %-30s %9s %9.2e %8.1e  %s   (all tensors together %.2e)\n", op, level, shape, "-", worst, tol,
           pass ? "PASS" : "FAIL", all);
    tally(op, level, shape, pass, "");
}

/* The step as a graph (train/step.c): 3 steps with step 1 captured and launched and step 2 launched
 * again equal the same 3 steps issued, on the backend under test (the CPU's: its graph table),
 * bit for bit: the losses and skips of every step, weights, BN statistics, momentum, O2's master
 * weights and the loss scale. ops_check keeps to deterministic algorithms, so a launch runs what
 * issuing runs; what changes between steps (the lr's step, the batch) must travel through memory. */
static void test_model_graph(int level, int bf16, const char *name)
{
    if (!unit("model graph %s", name))
        return;
    const dt_backend *be = DEV; /* (with --backend cpu, BASE is the CPU's graph table) */
    char shape[96];
    snprintf(shape, sizeof shape, "%s b%d, 3 steps: 1 captured, 2 launched", MARCH, MB);
    if (LIST) {
        list_row("model steps as a graph = issued", name, shape);
        return;
    }
    if (!be->graph_begin) {
        row("model steps as a graph = issued", name, "the backend has no graphs", 0, 0, M_EXACT, 0, 0);
        return;
    }
    trained a, b;
    dt_model ma, mb;
    int ok_a = train_steps(be, level, bf16, 3, 0, &a, &ma), ok_b = train_steps(be, level, bf16, 3, 1, &b, &mb);
    int ok = ok_a && ok_b;
    int64_t d = 0;
    if (ok) {
        for (int s = 0; s < 3; s++)
            d += memcmp(&a.loss[s], &b.loss[s], sizeof(double)) != 0 || a.skipped[s] != b.skipped[s];
        d += bits_differ(a.weights, b.weights, a.nw) + bits_differ(a.momentum, b.momentum, a.nw) +
             bits_differ(a.master, b.master, a.nw) + bits_differ(a.buffers, b.buffers, a.nb) +
             (memcmp(&a.scale, &b.scale, sizeof(double)) != 0);
        if (d)
            printf("      %lld values differ; losses %.9g %.9g %.9g (issued) vs %.9g %.9g %.9g (graph)\n", (long long)d,
                   a.loss[0], a.loss[1], a.loss[2], b.loss[0], b.loss[1], b.loss[2]);
    } else {
        printf("      the steps did not run%s\n", BASE == &dt_backend_cuda ? " (DT_LOG_LEVEL=debug: the capture's error)" : "");
    }
    row("model steps as a graph = issued", name, shape, (double)d, (double)d, M_EXACT, 0, ok && d == 0);
    drop_trained(&a);
    drop_trained(&b);
    dt_model_free(&ma);
    dt_model_free(&mb);
}

static void test_model(void)
{
    if (!want_test("model"))
        return;
    /* tolerances: see the comment at the top */
    static const struct {
        int level, bf16;
        const char *name;
        double loss_tol, tol;
    } L[] = {
        {0, 0, "O0", 1e-5, 2e-2},
        {2, 0, "O2", 1e-3, 0.25},
        {2, 1, "O2bf", 2e-3, 0.4},
    };
    for (size_t k = 0; k < sizeof L / sizeof L[0]; k++) {
        if (!unit("model %s", L[k].name)) {
            test_model_graph(L[k].level, L[k].bf16, L[k].name);
            continue;
        }
        trained a, b;
        dt_model ma, mb;
        int ok_a = train_steps(CREF, L[k].level, L[k].bf16, 2, 0, &a, &ma);
        int ok_b = train_steps(DEV, L[k].level, L[k].bf16, 2, 0, &b, &mb);
        char shape[96];
        snprintf(shape, sizeof shape, "%s b%d %dx%d, 2 steps", MARCH, MB, MS, MS);
        row("model training runs", L[k].name, shape, 0, 0, M_EXACT, 0, ok_a && ok_b);
        if (LIST || (ok_a && ok_b)) {
            snprintf(shape, sizeof shape, "b%d after b%d, planned together", MB > 3 ? MB - 3 : 1, MB);
            row("model smaller batch runs, allocates nothing", L[k].name, shape, (double)b.unplanned,
                (double)b.unplanned, M_EXACT, 0, a.tail_ok && b.tail_ok && b.unplanned == 0);
            if (!LIST && b.unplanned)
                printf("      %ld device allocations inside the ops after planning (DT_LOG_LEVEL=debug names "
                       "them)\n", b.unplanned);
            for (int s = 0; s < 2; s++) {
                double d = fabs(b.loss[s] - a.loss[s]), r = d / fmax(fabs(a.loss[s]), 1e-30);
                int pass = r <= L[k].loss_tol && a.skipped[s] == b.skipped[s];
                char op[48], sh[96];
                snprintf(op, sizeof op, "model loss step %d", s + 1);
                if (LIST) {
                    list_row(op, L[k].name, "the loss");
                    continue;
                }
                snprintf(sh, sizeof sh, "%.7f vs %.7f%s", b.loss[s], a.loss[s],
                         a.skipped[s] != b.skipped[s] ? " SKIP DIFFERS" : a.skipped[s] ? " (skipped)" : "");
                printf("%-40s %-4s %-30s %9.2e %9.2e %8.1e  %s\n", op, L[k].name, sh, d, r, L[k].loss_tol,
                       pass ? "PASS" : "FAIL");
                tally(op, L[k].name, sh, pass, "");
            }
            if (a.master && b.master) {
                /* O2: the fp32 master weights carry the update; the model's weights are their
                 * rounding, compared as they are */
                cmp_tensors("master weight change", L[k].name, &ma, b.master, a.master, a.weights0, 0, L[k].tol);
                cmp_tensors("weights", L[k].name, &ma, b.weights, a.weights, NULL, 0, L[k].tol);
            } else {
                cmp_tensors("weight change", L[k].name, &ma, b.weights, a.weights, a.weights0, 0, L[k].tol);
            }
            cmp_tensors("momentum", L[k].name, &ma, b.momentum, a.momentum, NULL, 0, L[k].tol);
            cmp_tensors("BN running stats change", L[k].name, &ma, b.buffers, a.buffers, a.buffers0, 1, L[k].tol);
            row("model loss scale", L[k].name, "after 2 steps", fabs(a.scale - b.scale), 0, M_EXACT, 0,
                LIST || a.scale == b.scale);
        }
        drop_trained(&a);
        drop_trained(&b);
        dt_model_free(&ma);
        dt_model_free(&mb);
        test_model_graph(L[k].level, L[k].bf16, L[k].name);
    }
}

/* --- coverage ------------------------------------------------------------------------------------ */

/* every op of the list has a row (a new op without a test here fails); not with --only */
static void test_coverage(void)
{
    if (ONLY)
        return;
    int missing = 0;
    for (int k = 0; k < DT_BACKEND_OP_COUNT; k++)
        if (!covered[k]) {
            printf("      no row tests %s\n", OP_NAMES[k]);
            missing++;
        }
    char shape[64];
    snprintf(shape, sizeof shape, "%d ops in nn/backend.h's list", DT_BACKEND_OP_COUNT);
    row("every op tested", "-", shape, missing, missing, M_EXACT, 0, missing == 0);
}

/* --- main -------------------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: ops_check [--seed N] [--only GROUP] [--no-model] [--quick] [--list] [--backend cuda|cpu]\n"
               "                 [--verbose] [--model ARCH] [--model-batch N] [--model-size S] [--no-fork]\n"
               "Checks every op of the CUDA backend against the CPU backend (fp32, and fp16 and bf16 storage),\n"
               "then two training steps of a model (default resnet8, batch 32, 32x32) on both. GROUP: mem,\n"
               "conv, bn, relu, add, copy_grad, scale, fill, sgd, adam, rmsprop, ema_update, tensor_sumsq, lars, lamb,\n"
               "act, chanmul, maxpool, avgpool, linear, flatten, ln, chan_copy, attn, slice, dropout,\n"
               "sdepth, xent, round_half, unscale_check, normalize_u8, step_end, model.\n"
               "--quick: every op once, fp32, fp16 and bf16, small shapes, one graph row of a small model\n"
               "(for compute-sanitizer).\n"
               "--list: print the rows these options would check and \"ops_check: N rows\"; no GPU needed.\n"
               "--no-fork: one process (a crash then ends the run; by default rows run in child processes,\n"
               "and a new one goes on at the next unit).\n"
               "DT_OPS_CHECK_FAULT=OP[:error|lost|abort]: every call of OP fails as a CUDA error would (lost: the\n"
               "context with it; abort: the process), to see that a fault costs only its rows.\n"
               "Exit 0: all rows pass (--list: always); 1: a row failed; 2: a bad command line; 77: no GPU.\n");
}

/* the units in order: every row of a run but the coverage row; 1 when the table is incomplete (then
 * nothing is called) */
static int run_units(int model)
{
    if (unit("table") && !table_complete()) {
        printf("ops_check: the table is incomplete; not calling it\n");
        return 1;
    }
    test_memory();
    test_convs();
    test_bns();
    test_lns();
    ALL_DTYPES test_chan_copy(dt);
    test_vit();
    ALL_DTYPES test_eltwise(dt);
    test_acts();
    test_pools();
    test_slices();
    test_misc();
    test_round_half();
    ALL_DTYPES test_unscale_check(dt);
    ALL_DTYPES test_grad_sumsq(dt);
    ALL_DTYPES test_norm_optimizers(dt);
    ALL_DTYPES test_normalize_u8(dt);
    test_step_end();
    if (model)
        test_model();
    else if (QUICK && want_test("model"))
        test_model_graph(2, 0, "O2"); /* --quick: one step as a graph, O2, on a small model */
    faults_unclaimed();
    return 0;
}

/* A child (or the one process of --no-fork and --list): the device ready, the units from start on,
 * rows to stdout and (fd >= 0) messages to the parent: "S" (started), "U k name" (unit k begins),
 * "R pass op<TAB>dtype<TAB>shape<TAB>why" (a row), "E call: status" (the backend's fatal error),
 * "X k" (leaving after unit k: see fault_caught), "D rc" (done). Its exit status: 0; 1 when the
 * device could not start or the table is incomplete; 77 without a GPU. */
static int child(int start, int fd, int model, int cuda)
{
    REPORT_FD = fd;
    UNIT_START = start;
    if (cuda) {
        int count = 0;
        cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess || count == 0) {
            printf("SKIP: no GPU (cudaGetDeviceCount: %s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
            return 77;
        }
        struct cudaDeviceProp prop;
        if (start == 0 && cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
            printf("device 0: %s, sm_%d%d, %.1f GiB\n", prop.name, prop.major, prop.minor,
                   (double)prop.totalGlobalMem / (1 << 30));
        int rc = dt_cuda_init(0);
        if (rc != DT_OK) {
            printf("FAIL: dt_cuda_init(0): %s\n", dt_status_str(rc));
            snprintf(last_error, sizeof last_error, "dt_cuda_init(0): %s", dt_status_str(rc));
            report("E %s", last_error);
            return 1;
        }
        BASE = &dt_backend_cuda;
        /* cuDNN's heuristics choose each convolution's algorithms: the check is of results, which every
         * algorithm must get right, and its time (a 60 s stage, a CUDA context per restarted process)
         * goes to the rows; under --quick (memcheck's) the sanitizer's time goes to our kernels, not to
         * timing every algorithm cuDNN has. dtrain's own search is timed in the check's dtrain stages. */
        dt_cuda_set_conv_search(DT_CUDA_SEARCH_HEURISTIC, 0);
    }
    if (!LIST) {
        wrap_base();
        dt_cuda_fatal_hook = on_fatal;
    }
    report("S");
    if (!LIST && start == 0) {
        if (!cuda)
            printf("backend under test: %s (a check of ops_check itself)\n", BASE->name);
        if (plant_op >= 0)
            printf("DT_OPS_CHECK_FAULT: every call of %s fails (%s)\n", OP_NAMES[plant_op],
                   plant_mode == PLANT_LOST ? "the context lost" : plant_mode == PLANT_ABORT ? "the process killed" : "an error");
        printf("seed %llu; references: %s (convolutions, models) and %s (other ops)%s\n", (unsigned long long)SEED,
               CREF->name, REF->name, QUICK ? "; --quick: each op once, small shapes" : "");
        printf("max rel = max |got - want| / max(|want|, RMS of want); fp16/bf16 rows: the device's operands stored "
               "as fp16/bf16, a non-zero fp32 tolerance plus 2^-10 / 2^-7 (one ulp)\n");
        printf("%-40s %-4s %-30s %9s %9s %8s  %s\n", "op", "type", "shape", "max abs", "max rel", "tol", "result");
    }
    const int rc = run_units(model);
    report("D %d", rc);
    return rc;
}

/* "signal 11 (Segmentation fault)", "exit 1" */
static void describe_end(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "exit %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* The parent: children run the units until one finishes them all (see "units, faults and
 * processes"). Returns 77 when the first child found no GPU, -1 when it could not start a child,
 * else 0 with the rows counted; *cut: how many units were cut short, *incomplete: the table was. */
static int parent(int model, int *cut, int *incomplete)
{
    int start = 0;
    for (int children = 1;; children++) {
        int fds[2];
        if (pipe(fds) != 0) {
            fprintf(stderr, "ops_check: pipe: %s\n", strerror(errno));
            return -1;
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "ops_check: fork: %s\n", strerror(errno));
            return -1;
        }
        if (pid == 0) {
            close(fds[0]);
            int rc = child(start, fds[1], model, BASE == NULL);
            fflush(stdout);
            exit(rc);
        }
        close(fds[1]);
        FILE *in = fdopen(fds[0], "r");
        if (!in) {
            fprintf(stderr, "ops_check: fdopen: %s\n", strerror(errno));
            return -1;
        }
        int started = 0, done = -1, left = -1, cur = -1;
        char cur_name[sizeof unit_name] = "", err[sizeof last_error] = "";
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, in) > 0) {
            line[strcspn(line, "\n")] = '\0';
            const char *arg = line[0] && line[1] == ' ' ? line + 2 : "";
            switch (line[0]) {
            case 'S':
                started = 1;
                break;
            case 'U': {
                char *rest;
                cur = (int)strtol(arg, &rest, 10);
                snprintf(cur_name, sizeof cur_name, "%s", *rest == ' ' ? rest + 1 : rest);
                err[0] = '\0';
                break;
            }
            case 'R': { /* pass op \t dtype \t shape \t why */
                char *f[4] = {NULL, NULL, NULL, NULL}, *p = line[0] && line[1] == ' ' && line[2] ? line + 4 : NULL;
                for (int i = 0; i < 4 && p; i++) {
                    f[i] = p;
                    p = strchr(p, '\t');
                    if (p)
                        *p++ = '\0';
                }
                note_row(f[0] ? f[0] : "?", f[1] ? f[1] : "-", f[2] ? f[2] : "", arg[0] == '1', f[3] ? f[3] : "");
                break;
            }
            case 'E':
                snprintf(err, sizeof err, "%s", arg);
                break;
            case 'X':
                left = atoi(arg);
                break;
            case 'D':
                done = atoi(arg);
                break;
            }
        }
        free(line);
        fclose(in);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (done >= 0) {
            *incomplete = done == 1;
            return 0;
        }
        char how[96];
        describe_end(status, how, sizeof how);
        if (!started) {
            if (children == 1 && WIFEXITED(status) && WEXITSTATUS(status) == 77)
                return 77;
            char why[400];
            snprintf(why, sizeof why, "%s%s%s", how, err[0] ? "; " : "", err);
            row("the check's process started", "-", start ? "a new process" : "the first process", 0, 0, M_EXACT, 0, 0);
            printf("      it ended before it was ready: %s\n", why);
            return 0;
        }
        (*cut)++;
        if (left >= 0) {
            start = left + 1;
        } else {
            char why[400];
            snprintf(why, sizeof why, "%s; the backend's last error: %s", how, err[0] ? err : "none");
            printf("%-40s %-4s %-30s %9s %9s %8s  %s\n", "process died in unit", "-", cur >= start ? cur_name : "-", "-",
                   "-", "-", "FAIL");
            printf("      %s\n", why);
            note_row("process died in unit", "-", cur >= start ? cur_name : "-", 0, why);
            start = (cur >= start ? cur : start) + 1;
        }
        if (children == MAX_CHILDREN) {
            row("the units after it not run", "-", "too many processes ended early", 0, 0, M_EXACT, 0, 0);
            return 0;
        }
        printf("-- the units from %d on run in a new process\n", start);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = 20251129;
    int model = 1, cpu = 0, mb_set = 0, ms_set = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            ONLY = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            MARCH = argv[++i];
        else if (!strcmp(argv[i], "--model-batch") && i + 1 < argc)
            MB = atoi(argv[++i]), mb_set = 1;
        else if (!strcmp(argv[i], "--model-size") && i + 1 < argc)
            MS = atoi(argv[++i]), ms_set = 1;
        else if (!strcmp(argv[i], "--verbose"))
            VERBOSE = 1;
        else if (!strcmp(argv[i], "--no-model"))
            model = 0;
        else if (!strcmp(argv[i], "--quick"))
            QUICK = 1;
        else if (!strcmp(argv[i], "--list"))
            LIST = 1;
        else if (!strcmp(argv[i], "--no-fork"))
            NO_FORK = 1;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc && !strcmp(argv[i + 1], "cpu"))
            cpu = 1, i++;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc && !strcmp(argv[i + 1], "cuda"))
            cpu = 0, i++;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    const char *fault = getenv("DT_OPS_CHECK_FAULT");
    if (fault && *fault) {
        const size_t len = strcspn(fault, ":");
        for (int k = 0; k < DT_BACKEND_OP_COUNT; k++)
            if (strlen(OP_NAMES[k]) == len && !strncmp(fault, OP_NAMES[k], len))
                plant_op = k;
        const char *mode = fault[len] ? fault + len + 1 : "error";
        plant_mode = !strcmp(mode, "lost") ? PLANT_LOST : !strcmp(mode, "abort") ? PLANT_ABORT : PLANT_ERROR;
        if (plant_op < 0 || (plant_mode == PLANT_ERROR && strcmp(mode, "error"))) {
            fprintf(stderr, "ops_check: DT_OPS_CHECK_FAULT=%s: want OP[:error|lost|abort], OP an op of nn/backend.h's "
                            "list\n", fault);
            return 2;
        }
    }
    dt_log_init();
    if (QUICK) {
        NE = 4099;
        model = 0;
        if (!mb_set) /* the graph row's model: small */
            MB = 8;
        if (!ms_set)
            MS = 16;
    }
    SEED = MSEED = seed;
    int cut = 0, incomplete = 0;
    if (LIST) { /* nothing touches CUDA: every backend is the dry one */
        DEV = REF = CREF = BASE = &DRY;
        incomplete = run_units(model);
    } else {
        /* CUDA: BASE is set in the child, which initialises the device (the parent must not) */
        BASE = cpu ? dt_cpu_graph_backend() : NULL;
        if (cpu)
            DEV = BASE;
        if (NO_FORK) {
            if (!cpu)
                BASE = &dt_backend_cuda;
            int rc = child(0, -1, model, !cpu);
            if (rc == 77)
                return 77;
            incomplete = rc == 1;
        } else {
            int rc = parent(model, &cut, &incomplete);
            if (rc == 77 || rc < 0)
                return rc == 77 ? 77 : 2;
        }
    }
    if (!incomplete) {
        if (cut)
            printf("-- every op tested: not checked (%d unit%s cut short by a fault)\n", cut, cut == 1 ? "" : "s");
        else
            test_coverage();
    }
    if (LIST) {
        printf("ops_check: %d rows\n", n_rows);
        return 0;
    }
    if (n_failed_rows > 0) {
        printf("failing rows (%d):\n", n_failed);
        for (int i = 0; i < n_failed_rows; i++)
            printf("  FAILED %s\n", failed_rows[i]);
    }
    printf("ops_check: %d rows, %d failed (seed %llu)\n", n_rows, n_failed, (unsigned long long)seed);
    return n_failed || incomplete ? 1 : 0;
}
