/* check.c: status names and the reporting half of the checked-call macros (contract in check.h). */
#include "config.h"

#include "util/check.h"

#include <string.h>

#include "util/log.h"

const char *dt_status_str(int status)
{
    switch (status) {
    case DT_OK: return "ok";
    case DT_ERR_SYS: return "system error";
    case DT_ERR_NOMEM: return "out of memory";
    case DT_ERR_INPUT: return "bad input";
    case DT_ERR_STATE: return "invalid state";
    case DT_ERR_TIMEOUT: return "timed out";
    case DT_ERR_HDF5: return "HDF5 error";
    case DT_ERR_CUDA: return "CUDA error";
    case DT_ERR_CUBLAS: return "cuBLAS error";
    case DT_ERR_CUDNN: return "cuDNN error";
    case DT_ERR_NCCL: return "NCCL error";
    case DT_ERR_MPI: return "MPI error";
    case DT_ERR_PMI2: return "PMI2 error";
    default: return "unknown status";
    }
}

/* file names are shown from "src/" on: the build directory says nothing useful */
static const char *short_file(const char *file)
{
    const char *s = strstr(file, "src/");
    return s ? s : file;
}

static _Thread_local int defer_depth;
static _Thread_local char reason[512];

void dt_check_defer(void)
{
    if (defer_depth++ == 0)
        reason[0] = '\0';
}

const char *dt_check_reason(void)
{
    if (defer_depth > 0)
        defer_depth--;
    return reason;
}

void dt_check_fail(const char *lib, const char *call, long long rc, const char *msg, const char *func,
                   const char *file, int line)
{
    if (defer_depth > 0) { /* the caller says it in its own line: the first failure is the cause */
        dt_debug("%s call failed: %s -> %lld (%s) in %s at %s:%d", lib, call, rc, msg ? msg : "no message", func,
                 short_file(file), line);
        if (!reason[0]) {
            const char *m = msg ? msg : "no message", *last = m;
            for (const char *p = strstr(m, ": "); p; p = strstr(p + 2, ": "))
                last = p + 2;
            snprintf(reason, sizeof reason, "%s", *last ? last : m);
        }
        return;
    }
    dt_error("%s call failed: %s -> %lld (%s) in %s at %s:%d", lib, call, rc, msg ? msg : "no message",
             func, short_file(file), line);
}

void dt_check_trace(const char *call, int status, const char *func, const char *file, int line)
{
    dt_debug("  from %s at %s:%d: %s -> %s", func, short_file(file), line, call, dt_status_str(status));
}

static _Thread_local char errno_buf[256];

static const char *errno_text(int e)
{
#ifdef STRERROR_R_CHAR_P
    return strerror_r(e, errno_buf, sizeof errno_buf);
#else
    if (strerror_r(e, errno_buf, sizeof errno_buf) != 0)
        snprintf(errno_buf, sizeof errno_buf, "error %d", e);
    return errno_buf;
#endif
}

const char *dt_errstr_errno(long long rc, int saved_errno)
{
    (void)rc;
    return errno_text(saved_errno);
}

const char *dt_errstr_value(long long rc, int saved_errno)
{
    (void)saved_errno;
    return errno_text((int)rc);
}
