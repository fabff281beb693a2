/* ops_check.h: what the files of tests/gpu/ops_check share: the driver's (ops_check.c) options,
 * arrays, compare and row helpers, units and scalars-block helpers, and the tables of tests each family
 * file (ops_check_<family>.c, one per file of src/nn/cuda/) hands the driver. Internal to ops_check;
 * the rules (dtypes, tolerances, poison, units) are in ops_check.c's top comment. */
#ifndef DT_TESTS_GPU_OPS_CHECK_H
#define DT_TESTS_GPU_OPS_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"
#include "nn/scalars.h"
#include "util/check.h"
#include "util/rng.h"

/* --- options and the backends (ops_check.c) ---------------------------------------------------------- */

extern const dt_backend *DEV;  /* the backend under test (W, which wraps BASE) */
extern const dt_backend *REF;  /* reference for all but convolutions */
extern const dt_backend *CREF; /* reference for convolutions, models */
extern const dt_backend *BASE; /* the table under test */
extern dt_rng RNG;             /* the current unit's stream (unit() seeds it) */
extern int QUICK;              /* --quick: each op once, small (memcheck's) */
extern int LIST;               /* --list: name the rows, check nothing */
extern int64_t NE;             /* the size of the element-wise tests: odd, several blocks (--quick: a few) */
extern int MODEL;              /* the whole-model check runs (not --no-model, not --quick) */
extern int VERBOSE;            /* --verbose: the model check prints every tensor */
extern const char *MARCH;      /* the model and its batch: --model ARCH --model-batch N --model-size S */
extern int MB, MS;
extern uint64_t MSEED;         /* from --seed: the model's weights and batches */

enum dtype { F32, F16, BF16 };
extern const char *const DTYPE_NAME[];
/* S32: the type of every reference operand (the reference computes on fp32 arrays holding the row's
 * values); ty(dt): the type of a row's typed operands on the device */
#define S32 DT_FLOAT32
dt_dtype ty(int dt);
size_t elt_bytes(int dt);
int stores(int dt);
#define ALL_DTYPES                       \
    for (int dt = F32; dt <= BF16; dt++) \
        if (stores(dt))

/* how a row compares: as values (0), as bit patterns, or with a relative tolerance */
enum mode { M_EXACT, M_BITS, M_ELT, M_RED, M_LOSS };
#define TOL_ELT 1e-5
#define TOL_RED 1e-4
#define TOL_LOSS 1e-5

int want_test(const char *name);

/* --- host and device arrays, freed together by release() ------------------------------------------ */

void *hold(void *p, int dev);
void release(void);
float *h_new(int64_t n);
void h_round(float *h, int64_t n, int dt);
float *h_randn(int64_t n, double mean, double sd, int dt);
float *h_uniform(int64_t n, double lo, double hi);
float *h_copy(const float *src, int64_t n);
void *d_bytes(size_t bytes);
void *d_from(const float *h, int64_t n, int dt);
void *d_poisoned(int64_t n, int dt);
uint8_t *d_poisoned_u8(int64_t n);
float *d_result(const void *d, int64_t n, int dt);
uint8_t *d_result_u8(const uint8_t *d, int64_t n);
uint32_t bits_of(float f);
float float_of(uint32_t u);

/* --- rows ------------------------------------------------------------------------------------------- */

void list_row(const char *op, const char *dtype, const char *shape);
void row(const char *op, const char *dtype, const char *shape, double maxabs, double maxrel, enum mode m, double tol,
         int pass);
void tally(const char *op, const char *dtype, const char *shape, int pass, const char *why);
int cmp_f32_as(const char *op, int dt, int tt, const char *shape, const float *got, const float *want, int64_t n,
               enum mode m);
int cmp_f32(const char *op, int dt, const char *shape, const float *got, const float *want, int64_t n, enum mode m);
int cmp_u8(const char *op, int dt, const char *shape, const uint8_t *got, const uint8_t *want, int64_t n);
int cmp_scalar(const char *op, int dt, const char *shape, double got, double want, enum mode m);
/* The row helper: one output of an op, one row. want (n floats: the reference's output, computed in
 * fp32) is rounded to st, the output's storage type, as the device stores it (in place; a no-op on
 * values already rounded); the device array d (n elements of type st) comes back widened to fp32; the
 * two are compared in mode m under tol_of(m, st); the row is named by the printf format name, typed
 * dt (the row's type, -1: none), and counted. Returns 1 when it passed. */
__attribute__((format(printf, 8, 9))) int check_row(int dt, int st, const char *shape, const void *d, float *want,
                                                    int64_t n, enum mode m, const char *name, ...);
void ref_out(float *h, int64_t n, int dt);
void plan_scratch(size_t bytes);
void planned_row(const char *op, int dt, const char *shape);

/* --- units ---------------------------------------------------------------------------------------- */

__attribute__((format(printf, 1, 2))) int unit(const char *fmt, ...);
void drain(const dt_backend *b);

/* --- the scalars block (nn/scalars.h) ------------------------------------------------------------- */

dt_scalars s_clean(void);
dt_scalars s_metrics(void);
dt_scalars *d_scalars(const dt_scalars *h);
dt_scalars d_scalars_get(const dt_scalars *d);
void d_scalars_set(dt_scalars *d, size_t off, const void *v, size_t bytes);
int scalars_differ(const dt_scalars *got, const dt_scalars *want, int loose, char *names, size_t len);
void print_scalars(const char *who, const dt_scalars *s);
int cmp_scalars(const char *op, int dt, const char *shape, const dt_scalars *Ds, const dt_scalars *want, int loose);

/* --- what the families share --------------------------------------------------------------------- */

typedef struct conv_case {
    const char *name;
    int n, h, w, c, oc, k, s, p, dil, g, bias;
} conv_case;
float *h_bn_x(int64_t n, int c, int dt);
void bn_keep_off_zero(const dt_bn_desc *d, float *x, const float *gamma, const float *beta, int dt);

/* --- the tables the driver walks ------------------------------------------------------------------ */

/* The stages of a run, in order. A stage runs its tests once each, or (the driver's STAGES says which)
 * once per type the backend stores, each type all its tests before the next. Within a stage the
 * driver takes the families in the order of its FAMILIES, each family's tests in its table's order. */
enum stage {
    ST_MEM, ST_CONV, ST_BN, ST_LN, ST_CHAN_COPY, ST_ATTN, ST_ELTWISE, ST_ACT, ST_POOL, ST_SLICE, ST_MISC,
    ST_ROUND_HALF, ST_UNSCALE_CHECK, ST_GRAD_SUMSQ, ST_OPTIMIZERS, ST_NORMALIZE_U8, ST_STEP_END, ST_MODEL,
    ST_COUNT
};

/* One test of a family: run(dt) makes one or more units (unit()) of rows. dt: the type, in a stage
 * run per type; else -1. group: --only GROUP runs it when group contains GROUP (NULL: the test asks
 * want_test itself, for the several groups it holds). */
typedef struct ops_test {
    enum stage stage;
    const char *group;
    void (*run)(int dt);
} ops_test;

typedef struct ops_family {
    const char *name; /* the backend's file it mirrors */
    const ops_test *tests;
    size_t n_tests;
} ops_family;

#define OPS_FAMILY(var, name, table) const ops_family var = {name, table, sizeof table / sizeof table[0]}

extern const ops_family OPS_BACKEND, OPS_CONV, OPS_BN, OPS_LN, OPS_LAYOUT, OPS_ATTN, OPS_LINEAR, OPS_ELTWISE, OPS_XENT,
    OPS_OPTIM, OPS_ACT, OPS_POOL, OPS_SLICE, OPS_MODEL;

#endif
