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
 * Files. This one is the driver: the options, host and device arrays, the compare helpers and the
 * row helper (check_row), the dry backend of --list, units, faults and processes (W), the walk, main.
 * The tests are in one file per op family, mirroring src/nn/cuda/: ops_check_act.c (act.cu),
 * ops_check_attn.c (attn.cu), ops_check_bn.c (bn.cu), ops_check_conv.c (conv_cudnn.c),
 * ops_check_eltwise.c (eltwise.cu), ops_check_layout.c (layout.cu's chan_copy), ops_check_linear.c
 * (linear_cublas.c), ops_check_ln.c (ln.cu), ops_check_optim.c (optim.cu), ops_check_pool.c
 * (pool.cu), ops_check_xent.c (linear.cu's xent), ops_check_backend.c (backend_cuda.c's memory);
 * ops_check_slice.c holds the group "slice" (conv, BN and the pools on a channel slice) and
 * ops_check_model.c the whole-model check; ops_check.h is what they share. Each file ends in a table
 * of its tests, {stage, --only group, function}; the driver walks the stages in order (enum stage in
 * ops_check.h, the run's order), in each the families in FAMILIES' order and each family's tests in
 * its table's order, once or once per stored type (STAGES). Adding an op: in its family's file, a test
 * function (per case and type a unit(), inputs drawn with h_randn in the row's type and uploaded with
 * d_from, outputs d_poisoned, the reference on fp32 host arrays and the op on the device, then one
 * check_row per output: the reference rounded to the output's storage type, the device's result
 * downloaded, compared under the mode's tolerance, named and counted; then release()), and one row
 * in the family's table. Until a row's name starts with the op's, the "every op tested" row fails.
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
#include "nn/backend_wrap.h"
#include "nn/cuda/cuda.h"
#include "util/check.h"
#include "util/half.h"
#include "util/log.h"
#include "util/rng.h"
#include "ops_check.h"

/* --- setup, options, bookkeeping ----------------------------------------------------------------- */

/* (ops_check.h declares what the family files share) */
const dt_backend *DEV;                           /* the backend under test */
const dt_backend *REF = &dt_backend_cpu;         /* reference for all but convolutions */
const dt_backend *CREF = &dt_backend_cpu_ref;    /* reference for convolutions, models */
dt_rng RNG;
static const char *ONLY;                         /* --only: run tests whose name has this */
int QUICK;                                       /* --quick: each op once, small (memcheck's) */
int LIST;                                        /* --list: name the rows, check nothing */
int MODEL = 1;                                   /* not --no-model */
int VERBOSE;                                     /* --verbose */
static int n_rows, n_failed;
/* the model and its batch: --model ARCH --model-batch N --model-size S change them */
const char *MARCH = "resnet8";
int MB = 32, MS = 32;
uint64_t MSEED; /* from --seed: the model's weights and batches */

const char *const DTYPE_NAME[] = {"fp32", "fp16", "bf16"};
dt_dtype ty(int dt)
{
    return dt == F16 ? DT_FLOAT16 : dt == BF16 ? DT_BFLOAT16 : DT_FLOAT32;
}
size_t elt_bytes(int dt)
{
    return dt == F32 ? sizeof(float) : sizeof(uint16_t);
}
/* 1 when the backend under test stores the type (storage_types): the rows of a type it does not
 * store are not run (a row says so) */
int stores(int dt)
{
    return (DEV->storage_types & 1u << ty(dt)) != 0;
}
/* the size of the element-wise tests: odd, several blocks (--quick: a few) */
int64_t NE = 100003;

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

int want_test(const char *name)
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

void *hold(void *p, int dev)
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

void release(void)
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
float *h_new(int64_t n)
{
    return hold(calloc((size_t)(n > 0 ? n : 1), sizeof(float)), 0);
}

void h_round(float *h, int64_t n, int dt)
{
    if (dt != F32)
        REF->round_half(n, h, dt == BF16);
}

/* n values of mean + sd * z, rounded to the dtype, z about N(0, 1): the sum of four 16-bit uniforms
 * (Irwin-Hall, scaled to variance 1; |z| < 3.47), one 64-bit draw per value: random enough for these
 * checks and quick for the large tensors */
float *h_randn(int64_t n, double mean, double sd, int dt)
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

float *h_uniform(int64_t n, double lo, double hi)
{
    float *h = h_new(n);
    if (LIST)
        return h;
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)(lo + (hi - lo) * dt_rng_uniform(&RNG));
    return h;
}

float *h_copy(const float *src, int64_t n)
{
    float *h = h_new(n);
    memcpy(h, src, (size_t)n * sizeof(float));
    return h;
}

/* Device arrays: n elements of storage type dt (fp32, or 16-bit elements for fp16 and bf16). The
 * host side is always fp32: an upload converts values the type holds (exactly: a value it does not
 * hold is a bug of this program, which stops it), a download widens (exactly). */
void *d_bytes(size_t bytes)
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

void *d_from(const float *h, int64_t n, int dt)
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

void *d_poisoned(int64_t n, int dt)
{
    void *d = d_bytes((size_t)n * elt_bytes(dt));
    d_poison(d, n, dt);
    return d;
}

uint8_t *d_poisoned_u8(int64_t n)
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
float *d_result(const void *d, int64_t n, int dt)
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

uint8_t *d_result_u8(const uint8_t *d, int64_t n)
{
    uint8_t *h = hold(malloc((size_t)(n > 0 ? n : 1)), 0);
    DEV->mem_get(h, d, (size_t)n);
    return h;
}

uint32_t bits_of(float f)
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

float float_of(uint32_t u)
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
void list_row(const char *op, const char *dtype, const char *shape)
{
    printf("%-40s %-4s %s\n", op, dtype, shape);
    cover(op);
    n_rows++;
}

/* units, faults and processes (below) */
static int fault_of_row(const char *op);
static void fault_told(int i, char *why, size_t why_len);

/* one table row; it fails when its op's call failed (a pending fault, below), and says why */
void row(const char *op, const char *dtype, const char *shape, double maxabs, double maxrel, enum mode m,
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
int cmp_f32_as(const char *op, int dt, int tt, const char *shape, const float *got, const float *want,
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

int cmp_f32(const char *op, int dt, const char *shape, const float *got, const float *want, int64_t n,
                   enum mode m)
{
    return cmp_f32_as(op, dt, dt, shape, got, want, n, m);
}

int cmp_u8(const char *op, int dt, const char *shape, const uint8_t *got, const uint8_t *want, int64_t n)
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
int cmp_scalar(const char *op, int dt, const char *shape, double got, double want, enum mode m)
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

/* the reference output, rounded to its storage type dt after the op, as the device stores it */
void ref_out(float *h, int64_t n, int dt)
{
    h_round(h, n, dt);
}

/* The row helper (ops_check.h): the reference rounded as the device stores the output, the device's
 * output downloaded and widened, compared, named, counted. Rounding twice changes nothing (a value
 * of the type converts to itself), so a reference rounded before is fine. */
int check_row(int dt, int st, const char *shape, const void *d, float *want, int64_t n, enum mode m, const char *name,
              ...)
{
    char op[160];
    va_list ap;
    va_start(ap, name);
    vsnprintf(op, sizeof op, name, ap);
    va_end(ap);
    ref_out(want, n, st);
    return cmp_f32_as(op, dt, st, shape, d_result(d, n, st), want, n, m);
}

/* Planning, as a model does it: the device reserves the scratch its planning ops asked for (bytes),
 * and from here on its ops must not allocate; planned_row then checks that they did not. */
static long unplanned_at;
static int reserve_rc;

void plan_scratch(size_t bytes)
{
    reserve_rc = DEV->reserve_scratch(bytes);
    unplanned_at = dt_cuda_unplanned_allocs();
}

void planned_row(const char *op, int dt, const char *shape)
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
const dt_backend *BASE; /* the table under test; DEV is W, which wraps it */
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
void tally(const char *op, const char *dtype, const char *shape, int pass, const char *why)
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
int unit(const char *fmt, ...)
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

/* W's members (nn/backend_wrap.h): BASE's, each call inside a setjmp (a fault returns a default:
 * NULL, DT_ERR_CUDA, NaN, 0, by the member's return type); an op of the list also checks for the
 * planted fault. The timers are BASE's own. */
#define W_FAILED_void return;
#define W_FAILED_int return DT_ERR_CUDA;
#define W_FAILED_double return NAN;
#define W_FAILED_size_t return 0;
#define W_FAILED_dt_wrap_ptr return NULL;
#define W_FAILED_dt_wrap_event return NULL;
#define W_FAILED_dt_wrap_graph return NULL;
/* before the inner call: the catcher set (the hook jumps back here on a fault), op planted or not
 * (-1: a member outside the op list) */
#define W_BEFORE(name, ret, op)                      \
    jmp_buf jb;                                      \
    jmp_buf *volatile outer = catcher;               \
    if (setjmp(jb)) {                                \
        catcher = outer;                             \
        fault_caught(#name);                         \
        W_FAILED_##ret                               \
    }                                                \
    catcher = &jb;                                   \
    call_unplanned = dt_cuda_unplanned_allocs();     \
    planted(op, #name)
#define W_OP(name, ret, params, args) \
    DT_WRAP_AROUND(name, ret, params, W_BEFORE(name, ret, DT_BACKEND_OP_##name), BASE->name args, catcher = outer)
#define W_MEMBER(name, ret, params, args) \
    DT_WRAP_AROUND(name, ret, params, W_BEFORE(name, ret, -1), BASE->name args, catcher = outer)
DT_OPS(W_OP)
DT_BACKEND_MEMORY(W_MEMBER)
DT_BACKEND_EVENTS(W_MEMBER)
DT_BACKEND_GRAPHS(W_MEMBER)
#undef W_OP
#undef W_MEMBER

/* W: BASE with the members above wrapped (the graph members only where BASE has graphs) */
static void wrap_base(void)
{
    W = *BASE;
    DT_WRAP_SET(&W, BASE, DT_OPS);
    DT_WRAP_SET(&W, BASE, DT_BACKEND_MEMORY);
    DT_WRAP_SET(&W, BASE, DT_BACKEND_EVENTS);
    DT_WRAP_SET(&W, BASE, DT_BACKEND_GRAPHS);
    DEV = &W;
}

/* every op issued to b's compute queue so far complete: an event recorded there, waited on */
void drain(const dt_backend *b)
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

/* --- the scalars block (nn/scalars.h) ------------------------------------------------------------- */

/* A dt_scalars for the ops that read or write it: the reference's on the host, the device's a copy
 * of it in device memory (mem_put), read back with mem_get. s_clean: zeroed, with the numbers an op
 * reads set as a step has them (lr, scale 1, the dynamic scaler's defaults). */
dt_scalars s_clean(void)
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

dt_scalars *d_scalars(const dt_scalars *h)
{
    dt_scalars *d = d_bytes(sizeof *h);
    DEV->mem_put(d, h, sizeof *h);
    return d;
}

dt_scalars d_scalars_get(const dt_scalars *d)
{
    dt_scalars h;
    DEV->mem_get(&h, d, sizeof h);
    return h;
}

/* one field of the device's block written from the host (the test setting what a step's start would) */
void d_scalars_set(dt_scalars *d, size_t off, const void *v, size_t bytes)
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
int scalars_differ(const dt_scalars *got, const dt_scalars *want, int loose, char *names, size_t len)
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

void print_scalars(const char *who, const dt_scalars *s)
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
int cmp_scalars(const char *op, int dt, const char *shape, const dt_scalars *Ds, const dt_scalars *want,
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

/* xent writes into the scalars block: the mean loss, and adds to loss_sum, the hits, rows and
 * non-finite rows (the block starts with some, so the additions show) */
dt_scalars s_metrics(void)
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

/* The run: the families (ops_check_<family>.c) in this order within a stage (see ops_check.h) */
static const ops_family *const FAMILIES[] = {
    &OPS_BACKEND, &OPS_CONV, &OPS_BN,  &OPS_LN,  &OPS_LAYOUT, &OPS_ATTN,  &OPS_LINEAR,
    &OPS_ELTWISE, &OPS_XENT, &OPS_OPTIM, &OPS_ACT, &OPS_POOL, &OPS_SLICE, &OPS_MODEL,
};

/* How each stage runs: per_type, once per type the backend stores (each type all the stage's tests
 * before the next), else each test once; unit: the name of a unit the driver begins for each type,
 * which the stage's tests share (their rows draw from one stream), else NULL (each test begins its
 * own). The stages the enum leaves out run once, without a unit of the driver's. */
static const struct {
    int per_type;
    const char *unit;
} STAGES[ST_COUNT] = {
    [ST_CHAN_COPY] = {1, NULL},     [ST_ELTWISE] = {1, "eltwise"},       [ST_MISC] = {1, NULL},
    [ST_UNSCALE_CHECK] = {1, NULL}, [ST_GRAD_SUMSQ] = {1, NULL},         [ST_OPTIMIZERS] = {1, NULL},
    [ST_NORMALIZE_U8] = {1, NULL},
};

/* the tests of stage st, every family's, for type dt (-1: a stage run once) */
static void run_stage(enum stage st, int dt)
{
    for (size_t f = 0; f < sizeof FAMILIES / sizeof FAMILIES[0]; f++)
        for (size_t i = 0; i < FAMILIES[f]->n_tests; i++) {
            const ops_test *t = &FAMILIES[f]->tests[i];
            if (t->stage == st && (!t->group || want_test(t->group)))
                t->run(dt);
        }
}

/* the units in order: every row of a run but the coverage row; 1 when the table is incomplete (then
 * nothing is called) */
static int run_units(void)
{
    if (unit("table") && !table_complete()) {
        printf("ops_check: the table is incomplete; not calling it\n");
        return 1;
    }
    for (int st = 0; st < ST_COUNT; st++) {
        if (!STAGES[st].per_type) {
            run_stage(st, -1);
            continue;
        }
        ALL_DTYPES
        {
            if (!STAGES[st].unit || unit("%s %s", STAGES[st].unit, DTYPE_NAME[dt]))
                run_stage(st, dt);
        }
    }
    faults_unclaimed();
    return 0;
}

/* A child (or the one process of --no-fork and --list): the device ready, the units from start on,
 * rows to stdout and (fd >= 0) messages to the parent: "S" (started), "U k name" (unit k begins),
 * "R pass op<TAB>dtype<TAB>shape<TAB>why" (a row), "E call: status" (the backend's fatal error),
 * "X k" (leaving after unit k: see fault_caught), "D rc" (done). Its exit status: 0; 1 when the
 * device could not start or the table is incomplete; 77 without a GPU. */
static int child(int start, int fd, int cuda)
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
    const int rc = run_units();
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
static int parent(int *cut, int *incomplete)
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
            int rc = child(start, fds[1], BASE == NULL);
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
    int cpu = 0, mb_set = 0, ms_set = 0;
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
            MODEL = 0;
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
        MODEL = 0;
        if (!mb_set) /* the graph row's model: small */
            MB = 8;
        if (!ms_set)
            MS = 16;
    }
    SEED = MSEED = seed;
    int cut = 0, incomplete = 0;
    if (LIST) { /* nothing touches CUDA: every backend is the dry one */
        DEV = REF = CREF = BASE = &DRY;
        incomplete = run_units();
    } else {
        /* CUDA: BASE is set in the child, which initialises the device (the parent must not) */
        BASE = cpu ? dt_cpu_graph_backend() : NULL;
        if (cpu)
            DEV = BASE;
        if (NO_FORK) {
            if (!cpu)
                BASE = &dt_backend_cuda;
            int rc = child(0, -1, !cpu);
            if (rc == 77)
                return 77;
            incomplete = rc == 1;
        } else {
            int rc = parent(&cut, &incomplete);
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
