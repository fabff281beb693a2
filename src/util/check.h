/* check.h: status codes and checked calls.
 *
 * Functions in dtrain return int: DT_OK (0) on success, a negative enum dt_status on failure, after
 * logging why. A checked call runs a library call, and when it fails logs one error line naming the
 * library, the call as written, its return code and message, the function and file:line (the log
 * prefix adds time, rank/world, host and device), then leaves the function:
 *
 *     DT_CHECK_CUDA(cudaMalloc(&p, n));                  returns DT_ERR_CUDA on failure
 *     DT_CHECK_HDF5_GOTO(h = H5Fopen(...), rc, out);     sets rc = DT_ERR_HDF5 and jumps to out
 *
 * One generic macro (DT_CHECK_) is instantiated per library: the instance decides what failure looks
 * like, how to describe the code, and which status to return:
 *     SYS    POSIX/stdio calls returning < 0 (-1, EOF), errno's message     -> DT_ERR_SYS
 *     PTR    calls returning NULL on failure (malloc, fopen), errno's message -> DT_ERR_NOMEM / DT_ERR_SYS
 *     POSIX  calls returning an errno value (pthread_*)                      -> DT_ERR_SYS
 *     HDF5   herr_t/hid_t < 0, the innermost message of HDF5's error stack   -> DT_ERR_HDF5
 *     CUDA, CUBLAS, CUDNN, NCCL, MPI, PMI2: non-zero status, the library's message
 * The library-specific message functions exist only in builds with that library.
 *
 * DT_TRY(call) relays a failure from our own functions upward unchanged, logging at debug level one
 * "from" line per frame, so DT_LOG_LEVEL=debug shows the call chain and the default shows one line.
 */
#ifndef DT_UTIL_CHECK_H
#define DT_UTIL_CHECK_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dt_status {
    DT_OK = 0,
    DT_ERR_SYS = -1,     /* an operating system or C library call failed */
    DT_ERR_NOMEM = -2,   /* out of memory (host or arena) */
    DT_ERR_INPUT = -3,   /* bad user input: a flag, a file's contents */
    DT_ERR_STATE = -4,   /* a call made out of order or with inconsistent arguments */
    DT_ERR_TIMEOUT = -5, /* a collective or wait ran past its deadline */
    DT_ERR_HDF5 = -6,
    DT_ERR_CUDA = -7,
    DT_ERR_CUBLAS = -8,
    DT_ERR_CUDNN = -9,
    DT_ERR_NCCL = -10,
    DT_ERR_MPI = -11,
    DT_ERR_PMI2 = -12,
};

/* "ok", "system error", ..., or "unknown status" */
const char *dt_status_str(int status);

/* Logs the failed-call line (see above). msg may be NULL. */
void dt_check_fail(const char *lib, const char *call, long long rc, const char *msg, const char *func,
                   const char *file, int line);
/* Logs, at debug level, one frame of a relayed failure. */
void dt_check_trace(const char *call, int status, const char *func, const char *file, int line);
/* Between dt_check_defer() and dt_check_reason() (this thread, nestable), a failed checked call is
 * logged at debug level only (with its call and source line), and the first one's reason is kept:
 * dt_check_reason returns it ("No space left on device": the last part of the message, what a user
 * acts on), or "" when none failed, for the caller's own one line about what was not done. */
void dt_check_defer(void);
const char *dt_check_reason(void);

/* Message functions: each returns a string valid until the calling thread's next call of it. */
const char *dt_errstr_errno(long long rc, int saved_errno); /* strerror(saved_errno) */
const char *dt_errstr_value(long long rc, int saved_errno); /* strerror(rc): pthread style */
const char *dt_errstr_hdf5(long long rc, int saved_errno);
const char *dt_errstr_cuda(long long rc, int saved_errno);
const char *dt_errstr_cublas(long long rc, int saved_errno);
const char *dt_errstr_cudnn(long long rc, int saved_errno);
const char *dt_errstr_nccl(long long rc, int saved_errno);
const char *dt_errstr_mpi(long long rc, int saved_errno);
const char *dt_errstr_pmi2(long long rc, int saved_errno);

/* Makes HDF5 quiet: its own error-stack printing is replaced by the one line of DT_CHECK_HDF5.
 * Call once at start-up before any HDF5 call. */
void dt_check_hdf5_init(void);

/* --- the generic checked call -------------------------------------------------------------------
 * LIB: library name; TEXT: the call as written; TYPE: long long or const void *; CALL: the call;
 * FAILED(rc): true on failure; RCVAL(rc): the code as long long; ERRSTR: message function;
 * ON_FAIL: statement run after logging (return or goto). */
#define DT_CHECK_(LIB, TEXT, TYPE, CALL, FAILED, RCVAL, ERRSTR, ON_FAIL)                                \
    do {                                                                                             \
        TYPE dt_rc_ = (CALL);                                                                        \
        int dt_errno_ = errno;                                                                       \
        if (FAILED(dt_rc_)) {                                                                        \
            dt_check_fail(LIB, TEXT, RCVAL(dt_rc_), ERRSTR(RCVAL(dt_rc_), dt_errno_), __func__,        \
                          __FILE__, __LINE__);                                                       \
            ON_FAIL;                                                                                 \
        }                                                                                            \
    } while (0)

#define DT_FAILED_NEG_(rc) ((rc) < 0)
#define DT_FAILED_NONZERO_(rc) ((rc) != 0)
#define DT_FAILED_NULL_(p) ((p) == 0)
#define DT_RC_(rc) ((long long)(rc))
#define DT_RC_PTR_(p) (0LL)
#define DT_GOTO_(rcvar, status, label)                                                               \
    {                                                                                                \
        (rcvar) = (status);                                                                          \
        goto label;                                                                                  \
    }

/* Status-code libraries: FAILED when non-zero, message from ERRSTR, status STATUS. */
#define DT_CHECK_CODE_(LIB, TEXT, CALL, ERRSTR, ON_FAIL)                                              \
    DT_CHECK_(LIB, TEXT, long long, CALL, DT_FAILED_NONZERO_, DT_RC_, ERRSTR, ON_FAIL)

#define DT_CHECK_SYS(call) DT_CHECK_("system", #call, long long, call, DT_FAILED_NEG_, DT_RC_, dt_errstr_errno, return DT_ERR_SYS)
#define DT_CHECK_SYS_GOTO(call, rc, label)                                                            \
    DT_CHECK_("system", #call, long long, call, DT_FAILED_NEG_, DT_RC_, dt_errstr_errno, DT_GOTO_(rc, DT_ERR_SYS, label))
#define DT_CHECK_ALLOC(call)                                                                          \
    DT_CHECK_("alloc", #call, const void *, call, DT_FAILED_NULL_, DT_RC_PTR_, dt_errstr_errno, return DT_ERR_NOMEM)
#define DT_CHECK_ALLOC_GOTO(call, rc, label)                                                          \
    DT_CHECK_("alloc", #call, const void *, call, DT_FAILED_NULL_, DT_RC_PTR_, dt_errstr_errno,     \
              DT_GOTO_(rc, DT_ERR_NOMEM, label))
#define DT_CHECK_PTR(call)                                                                            \
    DT_CHECK_("system", #call, const void *, call, DT_FAILED_NULL_, DT_RC_PTR_, dt_errstr_errno, return DT_ERR_SYS)
#define DT_CHECK_PTR_GOTO(call, rc, label)                                                            \
    DT_CHECK_("system", #call, const void *, call, DT_FAILED_NULL_, DT_RC_PTR_, dt_errstr_errno,    \
              DT_GOTO_(rc, DT_ERR_SYS, label))
#define DT_CHECK_POSIX(call) DT_CHECK_CODE_("posix", #call, call, dt_errstr_value, return DT_ERR_SYS)
#define DT_CHECK_POSIX_GOTO(call, rc, label)                                                          \
    DT_CHECK_CODE_("posix", #call, call, dt_errstr_value, DT_GOTO_(rc, DT_ERR_SYS, label))
#define DT_CHECK_HDF5(call) DT_CHECK_("HDF5", #call, long long, call, DT_FAILED_NEG_, DT_RC_, dt_errstr_hdf5, return DT_ERR_HDF5)
#define DT_CHECK_HDF5_GOTO(call, rc, label)                                                           \
    DT_CHECK_("HDF5", #call, long long, call, DT_FAILED_NEG_, DT_RC_, dt_errstr_hdf5, DT_GOTO_(rc, DT_ERR_HDF5, label))
#define DT_CHECK_CUDA(call) DT_CHECK_CODE_("CUDA", #call, call, dt_errstr_cuda, return DT_ERR_CUDA)
#define DT_CHECK_CUDA_GOTO(call, rc, label) DT_CHECK_CODE_("CUDA", #call, call, dt_errstr_cuda, DT_GOTO_(rc, DT_ERR_CUDA, label))
#define DT_CHECK_CUBLAS(call) DT_CHECK_CODE_("cuBLAS", #call, call, dt_errstr_cublas, return DT_ERR_CUBLAS)
#define DT_CHECK_CUBLAS_GOTO(call, rc, label)                                                         \
    DT_CHECK_CODE_("cuBLAS", #call, call, dt_errstr_cublas, DT_GOTO_(rc, DT_ERR_CUBLAS, label))
#define DT_CHECK_CUDNN(call) DT_CHECK_CODE_("cuDNN", #call, call, dt_errstr_cudnn, return DT_ERR_CUDNN)
#define DT_CHECK_CUDNN_GOTO(call, rc, label)                                                          \
    DT_CHECK_CODE_("cuDNN", #call, call, dt_errstr_cudnn, DT_GOTO_(rc, DT_ERR_CUDNN, label))
#define DT_CHECK_NCCL(call) DT_CHECK_CODE_("NCCL", #call, call, dt_errstr_nccl, return DT_ERR_NCCL)
#define DT_CHECK_NCCL_GOTO(call, rc, label) DT_CHECK_CODE_("NCCL", #call, call, dt_errstr_nccl, DT_GOTO_(rc, DT_ERR_NCCL, label))
#define DT_CHECK_MPI(call) DT_CHECK_CODE_("MPI", #call, call, dt_errstr_mpi, return DT_ERR_MPI)
#define DT_CHECK_MPI_GOTO(call, rc, label) DT_CHECK_CODE_("MPI", #call, call, dt_errstr_mpi, DT_GOTO_(rc, DT_ERR_MPI, label))
#define DT_CHECK_PMI2(call) DT_CHECK_CODE_("PMI2", #call, call, dt_errstr_pmi2, return DT_ERR_PMI2)
#define DT_CHECK_PMI2_GOTO(call, rc, label) DT_CHECK_CODE_("PMI2", #call, call, dt_errstr_pmi2, DT_GOTO_(rc, DT_ERR_PMI2, label))

/* Relay a failure of one of our own functions (which has logged already). */
#define DT_TRY(call)                                                                                  \
    do {                                                                                             \
        int dt_st_ = (call);                                                                         \
        if (dt_st_ != DT_OK) {                                                                       \
            dt_check_trace(#call, dt_st_, __func__, __FILE__, __LINE__);                             \
            return dt_st_;                                                                           \
        }                                                                                            \
    } while (0)
#define DT_TRY_GOTO(call, rc, label)                                                                  \
    do {                                                                                             \
        int dt_st_ = (call);                                                                         \
        if (dt_st_ != DT_OK) {                                                                       \
            dt_check_trace(#call, dt_st_, __func__, __FILE__, __LINE__);                             \
            (rc) = dt_st_;                                                                           \
            goto label;                                                                              \
        }                                                                                            \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
