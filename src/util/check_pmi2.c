/* check_pmi2.c: names for the status codes of Slurm's libpmi2 (which has no message function). */
#include "config.h"

#include <slurm/pmi2.h>
#include <stdio.h>

#include "util/check.h"

static _Thread_local char pmi2_buf[64];

const char *dt_errstr_pmi2(long long rc, int saved_errno)
{
    (void)saved_errno;
    switch (rc) {
    case PMI2_SUCCESS: return "PMI2_SUCCESS";
    case PMI2_FAIL: return "PMI2_FAIL (operation failed; is this a task of an srun --mpi=pmi2 step?)";
    case PMI2_ERR_INIT: return "PMI2_ERR_INIT (PMI2 not initialised)";
    case PMI2_ERR_NOMEM: return "PMI2_ERR_NOMEM (buffer too small)";
    case PMI2_ERR_INVALID_ARG: return "PMI2_ERR_INVALID_ARG";
    case PMI2_ERR_INVALID_KEY: return "PMI2_ERR_INVALID_KEY";
    case PMI2_ERR_INVALID_KEY_LENGTH: return "PMI2_ERR_INVALID_KEY_LENGTH";
    case PMI2_ERR_INVALID_VAL: return "PMI2_ERR_INVALID_VAL";
    case PMI2_ERR_INVALID_VAL_LENGTH: return "PMI2_ERR_INVALID_VAL_LENGTH (values are at most 1024 bytes)";
    case PMI2_ERR_INVALID_LENGTH: return "PMI2_ERR_INVALID_LENGTH";
    case PMI2_ERR_INVALID_NUM_ARGS: return "PMI2_ERR_INVALID_NUM_ARGS";
    case PMI2_ERR_INVALID_ARGS: return "PMI2_ERR_INVALID_ARGS";
    case PMI2_ERR_INVALID_NUM_PARSED: return "PMI2_ERR_INVALID_NUM_PARSED";
    case PMI2_ERR_INVALID_KEYVALP: return "PMI2_ERR_INVALID_KEYVALP";
    case PMI2_ERR_INVALID_SIZE: return "PMI2_ERR_INVALID_SIZE";
    case PMI2_ERR_OTHER: return "PMI2_ERR_OTHER (is this a task of an srun --mpi=pmi2 step?)";
    default: snprintf(pmi2_buf, sizeof pmi2_buf, "PMI2 status %lld", rc); return pmi2_buf;
    }
}
