# dt_optional.m4: dtrain's optional parts, each a tri-state --with-X[=PREFIX]:
#   (absent)       check: use it when found, say why not in the summary otherwise;
#   --with-X       required at the default location: stop configure if it is missing;
#   --with-X=DIR   required under DIR: stop configure if DIR lacks it;
#   --without-X    not used.
# Each sets dt_have_X (yes/no), dt_X_why (why not), an AM_CONDITIONAL HAVE_X and a config.h HAVE_X.

# DT_ARG_WITH_PREFIX(NAME, HELP): sets dt_want_NAME (check/yes/no) and dt_NAME_prefix.
AC_DEFUN([DT_ARG_WITH_PREFIX], [
  AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1@<:@=PREFIX@:>@], [$2 (default: use if found)])],
    [], [with_$1=check])
  dt_$1_prefix=
  AS_CASE([$with_$1],
    [check], [dt_want_$1=check],
    [yes], [dt_want_$1=yes],
    [no], [dt_want_$1=no],
    [dt_want_$1=yes; dt_$1_prefix=$with_$1
     AS_IF([test -d "$dt_$1_prefix"], [],
       [AC_MSG_ERROR([--with-$1=$dt_$1_prefix: no such directory])])])
  dt_have_$1=no
  AS_IF([test "$dt_want_$1" = no], [dt_$1_why="disabled (--without-$1)"], [dt_$1_why=])
])

# DT_OPTIONAL_DONE(NAME, WHAT): when NAME was explicitly requested but not found, stop with dt_NAME_why;
# define the conditional and the config.h symbol.
AC_DEFUN([DT_OPTIONAL_DONE], [
  AS_IF([test "$dt_have_$1" != yes && test "$dt_want_$1" = yes],
    [AC_MSG_ERROR([--with-$1${dt_$1_prefix:+=$dt_$1_prefix} was given but $2 is not usable: $dt_$1_why])])
  AS_IF([test "$dt_have_$1" = yes],
    [AC_DEFINE(m4_toupper([HAVE_$1]), [1], [Define to 1 when built with $2.])])
  AM_CONDITIONAL(m4_toupper([HAVE_$1]), [test "$dt_have_$1" = yes])
])

# DT_FIRST_LIBDIR(PREFIX): echo the first of PREFIX/lib64, PREFIX/lib, PREFIX/targets/*/lib that exists.
AC_DEFUN([DT_FIRST_LIBDIR], [`for d in "$1/lib64" "$1/lib" "$1"/targets/*/lib; do test -d "$d" && { echo "$d"; break; }; done`])

# DT_CHECK_CUDA: the CUDA toolkit (nvcc, cudart, cuBLAS) plus cuDNN and NCCL.
AC_DEFUN([DT_CHECK_CUDA], [
  DT_ARG_WITH_PREFIX([cuda], [build the CUDA backend with the toolkit at PREFIX (nvcc, cudart, cuBLAS,
                              cuDNN, NCCL); default prefix \$CUDA_HOME or /usr/local/cuda])
  AC_ARG_WITH([cudnn], [AS_HELP_STRING([--with-cudnn=PREFIX], [cuDNN installed outside the CUDA prefix])],
    [], [with_cudnn=])
  AC_ARG_WITH([nccl], [AS_HELP_STRING([--with-nccl=PREFIX], [NCCL installed outside the CUDA prefix])],
    [], [with_nccl=])
  AC_ARG_WITH([cuda-arch], [AS_HELP_STRING([--with-cuda-arch=LIST],
    [compute capabilities to build CUDA code for, with PTX for the last (default: "80 90")])],
    [], [with_cuda_arch="80 90"])
  AC_ARG_VAR([NVCC], [the CUDA compiler (default: PREFIX/bin/nvcc)])
  AC_ARG_VAR([NVCCFLAGS], [flags for the CUDA compiler])
  CUDA_CPPFLAGS=; CUDA_LDFLAGS=; CUDA_LIBS=; NVCC_GENCODE=
  AS_IF([test "$dt_want_cuda" != no], [
    dt_cuda_root=${dt_cuda_prefix:-${CUDA_HOME:-/usr/local/cuda}}
    AS_IF([test -z "$NVCC" && test -x "$dt_cuda_root/bin/nvcc"], [NVCC=$dt_cuda_root/bin/nvcc])
    AS_IF([test -z "$NVCC" && test -z "$dt_cuda_prefix"], [
      AC_PATH_PROG([NVCC], [nvcc])
      AS_IF([test -n "$NVCC"], [dt_cuda_root=`AS_DIRNAME([\`AS_DIRNAME(["$NVCC"])\`])`])])
    AC_MSG_CHECKING([for nvcc])
    AC_MSG_RESULT([${NVCC:-no}])
    AS_IF([test -z "$NVCC"], [dt_cuda_why="nvcc not found in $dt_cuda_root/bin or PATH"], [
      dt_cuda_libdir=DT_FIRST_LIBDIR([$dt_cuda_root])
      CUDA_CPPFLAGS="-isystem $dt_cuda_root/include"
      CUDA_LDFLAGS="-L$dt_cuda_libdir -Wl,-rpath,$dt_cuda_libdir"
      for dt_p in "$with_cudnn" "$with_nccl"; do
        AS_IF([test -n "$dt_p"], [
          AS_IF([test -d "$dt_p"], [], [AC_MSG_ERROR([--with-cudnn/--with-nccl=$dt_p: no such directory])])
          dt_l=DT_FIRST_LIBDIR([$dt_p])
          CUDA_CPPFLAGS="$CUDA_CPPFLAGS -isystem $dt_p/include"
          CUDA_LDFLAGS="$CUDA_LDFLAGS -L$dt_l -Wl,-rpath,$dt_l"])
      done
      dt_save_CPPFLAGS=$CPPFLAGS; dt_save_LDFLAGS=$LDFLAGS; dt_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
      dt_cuda_ok=yes
      for dt_h in cuda_runtime.h cublas_v2.h cudnn.h nccl.h; do
        AS_IF([test $dt_cuda_ok = yes], [
          AC_MSG_CHECKING([for $dt_h])
          AC_PREPROC_IFELSE([AC_LANG_SOURCE([[#include <$dt_h>]])], [AC_MSG_RESULT([yes])],
            [AC_MSG_RESULT([no]); dt_cuda_ok=no; dt_cuda_why="$dt_h not found under $CUDA_CPPFLAGS"])])
      done
      for dt_lf in cudart:cudaRuntimeGetVersion cublas:cublasCreate_v2 cudnn:cudnnGetVersion nccl:ncclGetVersion; do
        AS_IF([test $dt_cuda_ok = yes], [
          dt_l=${dt_lf%%:*}; dt_f=${dt_lf#*:}
          AC_MSG_CHECKING([for $dt_f in -l$dt_l])
          LIBS="-l$dt_l $dt_save_LIBS"
          AC_LINK_IFELSE([AC_LANG_CALL([], [$dt_f])],
            [AC_MSG_RESULT([yes]); CUDA_LIBS="$CUDA_LIBS -l$dt_l"],
            [AC_MSG_RESULT([no]); dt_cuda_ok=no; dt_cuda_why="lib$dt_l ($dt_f) does not link with $CUDA_LDFLAGS"])])
      done
      CPPFLAGS=$dt_save_CPPFLAGS; LDFLAGS=$dt_save_LDFLAGS; LIBS=$dt_save_LIBS
      AS_IF([test $dt_cuda_ok = yes], [
        for dt_a in $with_cuda_arch; do
          AS_CASE([$dt_a], [*[[!0-9]]*|""], [AC_MSG_ERROR([--with-cuda-arch: '$dt_a' is not a compute capability like 80 or 90])])
          NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$dt_a,code=sm_$dt_a"
          dt_last=$dt_a
        done
        AS_IF([test -z "$NVCC_GENCODE"], [AC_MSG_ERROR([--with-cuda-arch: the list is empty])])
        NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$dt_last,code=compute_$dt_last"
        AC_MSG_CHECKING([whether $NVCC compiles for $with_cuda_arch])
        printf '__global__ void dt_k(float *x) { x@<:@threadIdx.x@:>@ = 0.f; }\n' > conftest.cu
        AS_IF([$NVCC $NVCC_GENCODE $NVCCFLAGS -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
          [AC_MSG_RESULT([yes]); dt_have_cuda=yes
           CUDA_LIBS="$CUDA_LIBS -lstdc++"  # nvcc's objects need the C++ runtime
           AC_DEFINE_UNQUOTED([DT_CUDA_ARCH], ["$with_cuda_arch"], [Compute capabilities the CUDA code is built for.])],
          [AC_MSG_RESULT([no]); dt_cuda_why="$NVCC cannot compile for $with_cuda_arch (see config.log)"])
        rm -f conftest.cu conftest.$OBJEXT])])])
  DT_OPTIONAL_DONE([cuda], [the CUDA toolkit with cuBLAS, cuDNN and NCCL])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([NVCC_GENCODE])
])

# DT_CHECK_PMI2: Slurm's PMI2 client library (slurm/pmi2.h, -lpmi2).
AC_DEFUN([DT_CHECK_PMI2], [
  DT_ARG_WITH_PREFIX([pmi2], [take ranks from Slurm's PMI2 (libpmi2, slurm/pmi2.h) under PREFIX])
  PMI2_CPPFLAGS=; PMI2_LIBS=
  AS_IF([test "$dt_want_pmi2" != no], [
    AS_IF([test -n "$dt_pmi2_prefix"], [
      dt_l=DT_FIRST_LIBDIR([$dt_pmi2_prefix])
      PMI2_CPPFLAGS="-I$dt_pmi2_prefix/include"
      PMI2_LIBS="-L$dt_l -Wl,-rpath,$dt_l"])
    AS_IF([test -n "$dt_pmi2_prefix" && test ! -f "$dt_pmi2_prefix/include/slurm/pmi2.h"],
      [dt_pmi2_why="$dt_pmi2_prefix/include/slurm/pmi2.h does not exist"], [
      dt_save_CPPFLAGS=$CPPFLAGS; dt_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $PMI2_CPPFLAGS"; LIBS="$PMI2_LIBS -lpmi2 $LIBS"
      AC_MSG_CHECKING([for PMI2_Init in slurm/pmi2.h and -lpmi2])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <slurm/pmi2.h>]],
          [[int s, r, n, a; return PMI2_Init(&s, &n, &r, &a);]])],
        [AC_MSG_RESULT([yes]); dt_have_pmi2=yes; PMI2_LIBS="$PMI2_LIBS -lpmi2"],
        [AC_MSG_RESULT([no]); dt_pmi2_why="slurm/pmi2.h or libpmi2 not found (Debian: libpmi2-0-dev)"])
      CPPFLAGS=$dt_save_CPPFLAGS; LIBS=$dt_save_LIBS])])
  DT_OPTIONAL_DONE([pmi2], [Slurm's PMI2 library])
  AC_SUBST([PMI2_CPPFLAGS])
  AC_SUBST([PMI2_LIBS])
])

# DT_CHECK_MPI: MPI for the CPU collectives: pkg-config ompi-c (Open MPI), else the mpicc wrapper.
AC_DEFUN([DT_CHECK_MPI], [
  DT_ARG_WITH_PREFIX([mpi], [use MPI (Open MPI: pkg-config ompi-c, or PREFIX/bin/mpicc) for CPU collectives])
  AC_ARG_VAR([MPICC], [MPI compiler wrapper to take MPI flags from (default: PREFIX/bin/mpicc or mpicc)])
  AS_IF([test "$dt_want_mpi" != no && test -z "$MPI_LIBS"], [
    # under an explicit PREFIX only that prefix's pkg-config files count
    dt_save_PKG_CONFIG_LIBDIR=$PKG_CONFIG_LIBDIR
    AS_IF([test -n "$dt_mpi_prefix"], [
      PKG_CONFIG_LIBDIR="$dt_mpi_prefix/lib/pkgconfig:$dt_mpi_prefix/lib64/pkgconfig"; export PKG_CONFIG_LIBDIR
      AS_IF([test -z "$MPICC" && test -x "$dt_mpi_prefix/bin/mpicc"], [MPICC=$dt_mpi_prefix/bin/mpicc])])
    AC_MSG_CHECKING([for MPI flags])
    AS_IF([$PKG_CONFIG --exists ompi-c 2>/dev/null], [
        MPI_CFLAGS=`$PKG_CONFIG --cflags ompi-c`; MPI_LIBS=`$PKG_CONFIG --libs ompi-c`
        AC_MSG_RESULT([pkg-config ompi-c])], [
      AS_IF([test -z "$MPICC" && test -z "$dt_mpi_prefix"], [MPICC=`command -v mpicc 2>/dev/null`])
      AS_IF([test -n "$MPICC" && MPI_CFLAGS=`$MPICC -showme:compile 2>/dev/null` &&
             MPI_LIBS=`$MPICC -showme:link 2>/dev/null`], [AC_MSG_RESULT([$MPICC -showme])],
        [AS_IF([test -n "$MPICC" && MPI_CFLAGS=`$MPICC -compile_info 2>/dev/null | cut -d' ' -f2-` &&
                MPI_LIBS=`$MPICC -link_info 2>/dev/null | cut -d' ' -f2-`], [AC_MSG_RESULT([$MPICC -compile_info])],
           [AC_MSG_RESULT([none]); MPI_CFLAGS=; MPI_LIBS=
            dt_mpi_why="no pkg-config ompi-c and no mpicc${dt_mpi_prefix:+ under $dt_mpi_prefix} (Debian: libopenmpi-dev)"])])])
    PKG_CONFIG_LIBDIR=$dt_save_PKG_CONFIG_LIBDIR
    AS_IF([test -z "$PKG_CONFIG_LIBDIR"], [AS_UNSET([PKG_CONFIG_LIBDIR])])])
  AS_IF([test "$dt_want_mpi" != no && test -n "$MPI_LIBS"], [
    dt_save_CPPFLAGS=$CPPFLAGS; dt_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
    AC_MSG_CHECKING([whether MPI_Init from mpi.h links])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[return MPI_Init(0, 0);]])],
      [AC_MSG_RESULT([yes]); dt_have_mpi=yes],
      [AC_MSG_RESULT([no]); dt_mpi_why="mpi.h/MPI_Init do not build with MPI_CFLAGS='$MPI_CFLAGS' MPI_LIBS='$MPI_LIBS'"])
    CPPFLAGS=$dt_save_CPPFLAGS; LIBS=$dt_save_LIBS])
  AS_IF([test "$dt_have_mpi" != yes], [MPI_CFLAGS=; MPI_LIBS=])
  DT_OPTIONAL_DONE([mpi], [MPI])
  AC_ARG_VAR([MPI_CFLAGS], [C compiler flags for MPI, overriding pkg-config and mpicc])
  AC_ARG_VAR([MPI_LIBS], [linker flags for MPI, overriding pkg-config and mpicc])
])

# DT_CHECK_DNNL: oneDNN (dnnl.h, -ldnnl; Debian libdnnl-dev) for the CPU backend's convolutions.
AC_DEFUN([DT_CHECK_DNNL], [
  DT_ARG_WITH_PREFIX([dnnl], [run CPU convolutions through oneDNN (dnnl.h, -ldnnl) under PREFIX])
  DNNL_CPPFLAGS=; DNNL_LIBS=
  AS_IF([test "$dt_want_dnnl" != no], [
    AS_IF([test -n "$dt_dnnl_prefix"], [
      dt_l=DT_FIRST_LIBDIR([$dt_dnnl_prefix])
      DNNL_CPPFLAGS="-I$dt_dnnl_prefix/include"
      DNNL_LIBS="-L$dt_l -Wl,-rpath,$dt_l"])
    AS_IF([test -n "$dt_dnnl_prefix" && test ! -f "$dt_dnnl_prefix/include/dnnl.h"],
      [dt_dnnl_why="$dt_dnnl_prefix/include/dnnl.h does not exist"], [
      dt_save_CPPFLAGS=$CPPFLAGS; dt_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $DNNL_CPPFLAGS"; LIBS="$DNNL_LIBS -ldnnl $LIBS"
      AC_MSG_CHECKING([for dnnl_engine_create in dnnl.h and -ldnnl])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <dnnl.h>]],
          [[dnnl_engine_t e; return dnnl_engine_create(&e, dnnl_cpu, 0) != dnnl_success;]])],
        [AC_MSG_RESULT([yes]); dt_have_dnnl=yes; DNNL_LIBS="$DNNL_LIBS -ldnnl"],
        [AC_MSG_RESULT([no]); dt_dnnl_why="dnnl.h or libdnnl not found (Debian: libdnnl-dev)"])
      CPPFLAGS=$dt_save_CPPFLAGS; LIBS=$dt_save_LIBS])])
  DT_OPTIONAL_DONE([dnnl], [oneDNN])
  AC_SUBST([DNNL_CPPFLAGS])
  AC_SUBST([DNNL_LIBS])
])
