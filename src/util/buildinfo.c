/* buildinfo.c: the parts of this build and their versions (contract in buildinfo.h). */
#include "config.h"

#include "util/buildinfo.h"

#include <cblas.h>
#include <hdf5.h>
#include <jpeglib.h>
#include <png.h>
#include <stdio.h>
#include <string.h>
#ifdef HAVE_JCONFIG_H
#include <jconfig.h>
#endif
#ifdef HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
#endif
#ifdef HAVE_MPI
#include <mpi.h>
#endif
#ifdef HAVE_DNNL
#include <dnnl.h>
#endif
#ifdef HAVE_PMI2
#include <slurm/pmi2.h>
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

static void row(FILE *out, const char *name, const char *state, const char *detail)
{
    fprintf(out, "  %-14s %-4s %s\n", name, state, detail);
}

#ifdef HAVE_CUDA
/* "12.4" from CUDA-style 12040 (major*1000 + minor*10) */
static void cuda_ver(char *buf, size_t n, int v)
{
    snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}
#endif

static void print_cuda(FILE *out)
{
#ifdef HAVE_CUDA
    char d[256], rt[16], built[16], drv[16];
    int runtime = 0, driver = 0, ndev = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver); /* 0 when no driver is installed */
    if (cudaGetDeviceCount(&ndev) != cudaSuccess)
        ndev = 0;
    cudaGetLastError(); /* leave no sticky error behind */
    cuda_ver(rt, sizeof rt, runtime);
    cuda_ver(built, sizeof built, CUDART_VERSION);
    if (driver)
        cuda_ver(drv, sizeof drv, driver);
    else
        snprintf(drv, sizeof drv, "none");
    snprintf(d, sizeof d, "runtime %s (built with %s), driver %s, %d device%s", rt, built, drv, ndev,
             ndev == 1 ? "" : "s");
    row(out, "CUDA", "yes", d);
    int maj = 0, min = 0, pat = 0;
    cublasGetProperty(MAJOR_VERSION, &maj);
    cublasGetProperty(MINOR_VERSION, &min);
    cublasGetProperty(PATCH_LEVEL, &pat);
    snprintf(d, sizeof d, "%d.%d.%d (built with %d.%d.%d)", maj, min, pat, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR,
             CUBLAS_VER_PATCH);
    row(out, "cuBLAS", "yes", d);
    size_t v = cudnnGetVersion();
    snprintf(d, sizeof d, "%zu.%zu.%zu (built with %d.%d.%d)", v / 10000, (v % 10000) / 100, v % 100, CUDNN_MAJOR,
             CUDNN_MINOR, CUDNN_PATCHLEVEL);
    row(out, "cuDNN", "yes", d);
    int nv = 0;
    ncclGetVersion(&nv);
    snprintf(d, sizeof d, "%d.%d.%d (built with %d.%d.%d)", nv / 10000, (nv % 10000) / 100, nv % 100, NCCL_MAJOR,
             NCCL_MINOR, NCCL_PATCH);
    row(out, "NCCL", "yes", d);
    row(out, "CUDA arch", "", DT_CUDA_ARCH);
#else
    row(out, "CUDA", "no", "(configure --with-cuda)");
    row(out, "cuBLAS", "no", "");
    row(out, "cuDNN", "no", "");
    row(out, "NCCL", "no", "");
#endif
}

static void print_pmi2(FILE *out)
{
#ifdef HAVE_PMI2
    row(out, "PMI2", "yes", "Slurm libpmi2 (ranks from srun --mpi=pmi2)");
#else
    row(out, "PMI2", "no", "(configure --with-pmi2)");
#endif
}

static void print_mpi(FILE *out)
{
#ifdef HAVE_MPI
    char lib[MPI_MAX_LIBRARY_VERSION_STRING], d[300];
    int len = 0;
    MPI_Get_library_version(lib, &len); /* allowed before MPI_Init */
    lib[strcspn(lib, ",\n")] = '\0';
    snprintf(d, sizeof d, "%s (MPI %d.%d)", lib, MPI_VERSION, MPI_SUBVERSION);
    row(out, "MPI", "yes", d);
#else
    row(out, "MPI", "no", "(configure --with-mpi)");
#endif
}

void dt_buildinfo_print(FILE *out, const char *program)
{
    char d[300];
    fprintf(out, "%s %s\n", program, PACKAGE_VERSION);
    fprintf(out, "required:\n");
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    snprintf(d, sizeof d, "%u.%u.%u (built with %d.%d.%d)", maj, min, rel, H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE);
    row(out, "HDF5", "yes", d);
#ifdef LIBJPEG_TURBO_VERSION
    row(out, "libjpeg-turbo", "yes", STR(LIBJPEG_TURBO_VERSION));
#else
    row(out, "libjpeg-turbo", "yes", "(version not known)");
#endif
    snprintf(d, sizeof d, "%s (built with %s)", png_get_libpng_ver(NULL), PNG_LIBPNG_VER_STRING);
    row(out, "libpng", "yes", d);
#ifdef HAVE_OPENBLAS_GET_CONFIG
    snprintf(d, sizeof d, "%s", openblas_get_config());
    row(out, "BLAS", "yes", d);
#else
    row(out, "BLAS", "yes", "CBLAS (not OpenBLAS)");
#endif
    fprintf(out, "optional:\n");
#ifdef HAVE_DNNL
    const dnnl_version_t *dv = dnnl_version();
    snprintf(d, sizeof d, "%d.%d.%d (CPU convolutions; built with %d.%d.%d)", dv->major, dv->minor, dv->patch,
             DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, DNNL_VERSION_PATCH);
    row(out, "oneDNN", "yes", d);
#else
    row(out, "oneDNN", "no", "(configure --with-dnnl; convolutions use im2col + BLAS)");
#endif
    print_cuda(out);
    print_pmi2(out);
    print_mpi(out);
}
