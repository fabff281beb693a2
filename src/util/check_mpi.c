/* check_mpi.c: MPI's message for DT_CHECK_MPI (MPI_Error_string may be called before MPI_Init). */
#include "config.h"

#include <mpi.h>
#include <stdio.h>

#include "util/check.h"

static _Thread_local char mpi_buf[MPI_MAX_ERROR_STRING + 32];

const char *dt_errstr_mpi(long long rc, int saved_errno)
{
    (void)saved_errno;
    int len = 0;
    if (MPI_Error_string((int)rc, mpi_buf, &len) != MPI_SUCCESS)
        snprintf(mpi_buf, sizeof mpi_buf, "MPI error %lld", rc);
    else
        mpi_buf[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    return mpi_buf;
}
