/* test_check.c: every instance of the checked-call macro fails a real call of its library and must
 * return its status, log one line naming the call, the code, the library's message, the function and
 * file:line with the rank/host prefix; a succeeding call must log nothing; DT_TRY relays. */
#include "config.h"

#include <fcntl.h>
#include <hdf5.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_MPI
#include <mpi.h>
#endif
#ifdef HAVE_PMI2
#include <slurm/pmi2.h>
#endif
#ifdef HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
#endif

#include "tap.h"
#include "util/check.h"
#include "util/log.h"

static int fail_line; /* the line of the checked call that failed last */

/* The captured log must be exactly one error line from FUNC at this file's fail_line containing
 * every one of the NULL-terminated fragments. */
static void expect_line(const char *what, const char *func, ...)
{
    char *s = tap_log_take();
    char re[256];
    snprintf(re, sizeof re, "^[-0-9T:.]+ \\[rank 1/2 testhost\\] error: .* in %s at [^ ]*test_check\\.c:%d\n$", func,
             fail_line);
    int ok = tap_count_lines(s) == 1 && tap_match(s, re);
    va_list ap;
    va_start(ap, func);
    for (const char *frag; (frag = va_arg(ap, const char *));)
        ok = ok && strstr(s, frag) != NULL;
    va_end(ap);
    TAP_OK(ok, "%s logs one line: %s", what, s);
    free(s);
}

static int sys_fails(void)
{
    fail_line = __LINE__ + 1;
    DT_CHECK_SYS(open("/nonexistent/dtrain", O_RDONLY));
    return DT_OK;
}

static int sys_succeeds(void)
{
    int fd = -1;
    DT_CHECK_SYS(fd = open("/dev/null", O_RDONLY));
    DT_CHECK_SYS(close(fd));
    return DT_OK;
}

static volatile size_t huge_size = SIZE_MAX - 4096; /* volatile: the compiler must not see it */

static int alloc_fails(void)
{
    void *volatile p;
    fail_line = __LINE__ + 1;
    DT_CHECK_ALLOC(p = malloc(huge_size));
    free(p);
    return DT_OK;
}

static int cleaned;
static int ptr_goto_fails(void)
{
    int rc = DT_OK;
    FILE *f = NULL;
    char *buf = malloc(16);
    fail_line = __LINE__ + 1;
    DT_CHECK_PTR_GOTO(f = fopen("/nonexistent/dtrain.h5", "rb"), rc, out);
    fclose(f);
out:
    free(buf);
    cleaned = 1;
    return rc;
}

static int posix_fails(void)
{
    pthread_mutexattr_t at;
    pthread_mutex_t m;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&m, &at);
    pthread_mutexattr_destroy(&at);
    int rc = DT_OK;
    fail_line = __LINE__ + 1;
    DT_CHECK_POSIX_GOTO(pthread_mutex_unlock(&m), rc, out); /* not locked: EPERM */
out:
    pthread_mutex_destroy(&m);
    return rc;
}

static int hdf5_fails(void)
{
    hid_t f;
    fail_line = __LINE__ + 1;
    DT_CHECK_HDF5(f = H5Fopen("/nonexistent/shard-00000.h5", H5F_ACC_RDONLY, H5P_DEFAULT));
    H5Fclose(f);
    return DT_OK;
}

static int hdf5_fails_again(void)
{
    fail_line = __LINE__ + 1;
    DT_CHECK_HDF5(H5Dopen2((hid_t)-1, "images", H5P_DEFAULT));
    return DT_OK;
}

static int relays(void)
{
    DT_TRY(sys_fails());
    return DT_OK;
}

#ifdef HAVE_MPI
static int mpi_fails(void)
{
    int x = 0;
    fail_line = __LINE__ + 1;
    DT_CHECK_MPI(MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD));
    return DT_OK;
}
#endif

#ifdef HAVE_PMI2
static int pmi2_fails(void)
{
    fail_line = __LINE__ + 1;
    DT_CHECK_PMI2(PMI2_KVS_Put("dtrain-test", "value"));
    return DT_OK;
}
#endif

#ifdef HAVE_CUDA
static int cuda_fails(void)
{
    void *p = NULL;
    fail_line = __LINE__ + 1;
    DT_CHECK_CUDA(cudaMalloc(&p, (size_t)1 << 62)); /* no device, or far more than any device has */
    cudaFree(p);
    return DT_OK;
}

static int cublas_fails(void)
{
    fail_line = __LINE__ + 1;
    DT_CHECK_CUBLAS(cublasSetStream(NULL, 0));
    return DT_OK;
}

static int cudnn_fails(void)
{
    fail_line = __LINE__ + 1;
    DT_CHECK_CUDNN(cudnnSetTensor4dDescriptor(NULL, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, 1, 1, 1));
    return DT_OK;
}

static int nccl_fails(void)
{
    ncclComm_t comm;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    fail_line = __LINE__ + 1;
    DT_CHECK_NCCL(ncclCommInitRank(&comm, -1, id, 0));
    return DT_OK;
}
#endif

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    tap_log_begin();
    dt_log_set_rank(1, 2);
    dt_log_set_host("testhost");

    const int codes[] = {DT_ERR_SYS, DT_ERR_NOMEM, DT_ERR_INPUT, DT_ERR_STATE, DT_ERR_TIMEOUT, DT_ERR_HDF5,
                         DT_ERR_CUDA, DT_ERR_CUBLAS, DT_ERR_CUDNN, DT_ERR_NCCL, DT_ERR_MPI, DT_ERR_PMI2};
    int named = 1;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        for (size_t j = 0; j < i; j++)
            named = named && strcmp(dt_status_str(codes[i]), dt_status_str(codes[j])) != 0 &&
                    strcmp(dt_status_str(codes[i]), "unknown status") != 0;
    TAP_OK(named && strcmp(dt_status_str(DT_OK), "ok") == 0 && strcmp(dt_status_str(99), "unknown status") == 0,
           "every status has its own name");

    TAP_OK(sys_fails() == DT_ERR_SYS, "SYS: failing open returns DT_ERR_SYS");
    expect_line("SYS", "sys_fails", "system call failed: open(\"/nonexistent/dtrain\", O_RDONLY) -> -1",
                "(No such file or directory)", NULL);
    TAP_OK(sys_succeeds() == DT_OK, "SYS: succeeding calls return DT_OK");
    char *s = tap_log_take();
    TAP_OK(s[0] == '\0', "and log nothing");
    free(s);

    TAP_OK(alloc_fails() == DT_ERR_NOMEM, "ALLOC: huge malloc returns DT_ERR_NOMEM");
    expect_line("ALLOC", "alloc_fails", "alloc call failed: p = malloc(huge_size)", "Cannot allocate memory", NULL);

    TAP_OK(ptr_goto_fails() == DT_ERR_SYS && cleaned, "PTR_GOTO: failing fopen sets rc and runs the cleanup label");
    expect_line("PTR_GOTO", "ptr_goto_fails", "f = fopen(\"/nonexistent/dtrain.h5\", \"rb\")", "No such file", NULL);

    TAP_OK(posix_fails() == DT_ERR_SYS, "POSIX: unlocking an unlocked error-checking mutex fails");
    expect_line("POSIX", "posix_fails", "posix call failed: pthread_mutex_unlock(&m) -> 1", "(Operation not permitted)",
                NULL);

    /* HDF5 must print nothing of its own: watch stderr while it fails */
    dt_check_hdf5_init();
    fflush(stderr);
    int saved = dup(2);
    FILE *err = tmpfile();
    dup2(fileno(err), 2);
    int h5 = hdf5_fails();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char *e = tap_slurp(err);
    fclose(err);
    TAP_OK(h5 == DT_ERR_HDF5, "HDF5: opening a missing file returns DT_ERR_HDF5");
    TAP_OK(e && e[0] == '\0', "HDF5 printed nothing itself (got %zu bytes)", e ? strlen(e) : 0);
    free(e);
    expect_line("HDF5", "hdf5_fails", "HDF5 call failed: f = H5Fopen(\"/nonexistent/shard-00000.h5\", H5F_ACC_RDONLY, H5P_DEFAULT) -> -1",
                "unable to open file", "No such file or directory", NULL);
    TAP_OK(hdf5_fails_again() == DT_ERR_HDF5, "HDF5: a second failure");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1 && strstr(s, "H5Dopen2") && !strstr(s, "shard-00000"),
           "describes its own error, not the previous one: %s", s);
    free(s);

    TAP_OK(relays() == DT_ERR_SYS, "DT_TRY relays the status");
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 1, "and adds nothing at the default level");
    free(s);
    dt_log_set_level(DT_LOG_DEBUG);
    relays();
    s = tap_log_take();
    TAP_OK(tap_count_lines(s) == 2 && tap_match(s, "debug:   from relays at [^ ]*test_check\\.c:[0-9]+: sys_fails\\(\\) -> system error"),
           "and one debug frame at debug level: %s", s);
    free(s);
    dt_log_set_level(DT_LOG_INFO);

#ifdef HAVE_MPI
    if (MPI_Init(&argc, &argv) == MPI_SUCCESS) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        TAP_OK(mpi_fails() == DT_ERR_MPI, "MPI: a send with count -1 returns DT_ERR_MPI");
        expect_line("MPI", "mpi_fails", "MPI call failed: MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD)",
                    "MPI_ERR_COUNT", NULL);
        MPI_Finalize();
    } else {
        TAP_OK(0, "MPI_Init as a singleton");
    }
#else
    tap_skip("built without MPI", "MPI instance");
#endif
#ifdef HAVE_PMI2
    TAP_OK(pmi2_fails() != DT_OK, "PMI2: a KVS put without PMI2_Init fails");
    expect_line("PMI2", "pmi2_fails", "PMI2 call failed: PMI2_KVS_Put(\"dtrain-test\", \"value\")", " (PMI2_", NULL);
#else
    tap_skip("built without PMI2", "PMI2 instance");
#endif
#ifdef HAVE_CUDA
    TAP_OK(cuda_fails() == DT_ERR_CUDA, "CUDA: a 4 EiB cudaMalloc returns DT_ERR_CUDA");
    expect_line("CUDA", "cuda_fails", "CUDA call failed: cudaMalloc(&p, (size_t)1 << 62)", "cudaError", NULL);
    TAP_OK(cublas_fails() == DT_ERR_CUBLAS, "cuBLAS: a NULL handle returns DT_ERR_CUBLAS");
    expect_line("cuBLAS", "cublas_fails", "cuBLAS call failed: cublasSetStream(NULL, 0)", "CUBLAS_STATUS_NOT_INITIALIZED", NULL);
    TAP_OK(cudnn_fails() == DT_ERR_CUDNN, "cuDNN: a NULL descriptor returns DT_ERR_CUDNN");
    expect_line("cuDNN", "cudnn_fails", "cuDNN call failed: cudnnSetTensor4dDescriptor(NULL,", "CUDNN_STATUS_BAD_PARAM", NULL);
    TAP_OK(nccl_fails() == DT_ERR_NCCL, "NCCL: -1 ranks returns DT_ERR_NCCL");
    expect_line("NCCL", "nccl_fails", "NCCL call failed: ncclCommInitRank(&comm, -1, id, 0)", NULL);
#else
    tap_skip("built without CUDA", "CUDA, cuBLAS, cuDNN and NCCL instances");
#endif
    tap_log_end();
    return tap_done();
}
