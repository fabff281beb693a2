# dt_required.m4: dtrain's checks for its required libraries (HDF5, libjpeg-turbo, libpng, zlib, jansson,
# a CBLAS).
# Each macro fills <NAME>_CFLAGS / <NAME>_LIBS (overridable by the user, as pkg-config's macro allows)
# and stops configure with one clear message when the library is missing.

# DT_VERIFY_LIB(NAME, HEADER, FUNCTION, WHAT): compile and link a call of FUNCTION from HEADER with
# NAME_CFLAGS and NAME_LIBS, or stop with a message about WHAT.
AC_DEFUN([DT_VERIFY_LIB], [
  dt_save_CPPFLAGS=$CPPFLAGS; dt_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $$1_CFLAGS"; LIBS="$$1_LIBS $LIBS"
  AC_MSG_CHECKING([whether $4 ($3 from $2) links])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <$2>]], [[void (*volatile fp)(void) = (void (*)(void))$3; return fp == 0;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([$4 is required but $3 from <$2> did not compile and link with $1_CFLAGS='$$1_CFLAGS' $1_LIBS='$$1_LIBS'; on Debian: apt-get install $5])])
  CPPFLAGS=$dt_save_CPPFLAGS; LIBS=$dt_save_LIBS
])

# DT_CHECK_HDF5: HDF5 1.10 or newer through pkg-config (hdf5, then hdf5-serial), else h5cc.
AC_DEFUN([DT_CHECK_HDF5], [
  AC_ARG_VAR([HDF5_CFLAGS], [C compiler flags for HDF5, overriding pkg-config and h5cc])
  AC_ARG_VAR([HDF5_LIBS], [linker flags for HDF5, overriding pkg-config and h5cc])
  dt_hdf5_pc=
  AS_IF([test -z "$HDF5_LIBS"], [
    PKG_CHECK_EXISTS([hdf5], [dt_hdf5_pc=hdf5], [PKG_CHECK_EXISTS([hdf5-serial], [dt_hdf5_pc=hdf5-serial])])
    AS_IF([test -n "$dt_hdf5_pc"],
      [HDF5_CFLAGS=`$PKG_CONFIG --cflags $dt_hdf5_pc`; HDF5_LIBS=`$PKG_CONFIG --libs $dt_hdf5_pc`
       HDF5_VERSION_FOUND=`$PKG_CONFIG --modversion $dt_hdf5_pc`],
      [AC_PATH_PROGS([DT_H5CC], [h5cc h5pcc])
       AS_IF([test -n "$DT_H5CC"], [
         # h5cc -show prints the wrapped compiler line: keep its -I/-D and -L/-l/-Wl words.
         dt_h5show=`$DT_H5CC -show 2>/dev/null`
         for dt_w in $dt_h5show; do
           AS_CASE([$dt_w], [-I*|-D*], [HDF5_CFLAGS="$HDF5_CFLAGS $dt_w"],
                            [-L*|-l*|-Wl,*], [HDF5_LIBS="$HDF5_LIBS $dt_w"])
         done
         AS_CASE([" $HDF5_LIBS "], [*" -lhdf5 "*], [], [HDF5_LIBS="$HDF5_LIBS -lhdf5"])])])])
  AC_MSG_CHECKING([for HDF5])
  AC_MSG_RESULT([${dt_hdf5_pc:-${DT_H5CC:-user flags}}: $HDF5_CFLAGS $HDF5_LIBS])
  DT_VERIFY_LIB([HDF5], [hdf5.h], [H5open], [HDF5], [libhdf5-dev])
  dt_save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $HDF5_CFLAGS"
  AC_MSG_CHECKING([whether HDF5 is 1.10 or newer])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>
#if !H5_VERSION_GE(1, 10, 0)
#error too old
#endif]])], [AC_MSG_RESULT([yes])], [AC_MSG_RESULT([no]); AC_MSG_ERROR([HDF5 1.10 or newer is required])])
  CPPFLAGS=$dt_save_CPPFLAGS
])

# DT_CHECK_JPEG: libjpeg-turbo's libjpeg API. jpeg_crop_scanline and jpeg_skip_scanlines (only
# libjpeg-turbo has them) let the loader decode just the crop it needs.
AC_DEFUN([DT_CHECK_JPEG], [
  PKG_CHECK_MODULES([JPEG], [libjpeg], [],
    [AC_MSG_NOTICE([no pkg-config file for libjpeg; trying -ljpeg])
     JPEG_CFLAGS=; JPEG_LIBS=-ljpeg])
  dt_save_CPPFLAGS=$CPPFLAGS; dt_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $JPEG_CFLAGS"; LIBS="$JPEG_LIBS $LIBS"
  AC_MSG_CHECKING([whether libjpeg is libjpeg-turbo 1.5 or newer (jpeg_crop_scanline links)])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <stdio.h>
#include <jpeglib.h>]], [[void (*volatile fp)(void) = (void (*)(void))jpeg_crop_scanline; return fp == 0;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([libjpeg-turbo 1.5 or newer is required (jpeg_crop_scanline did not link with JPEG_CFLAGS='$JPEG_CFLAGS' JPEG_LIBS='$JPEG_LIBS'); on Debian: apt-get install libjpeg62-turbo-dev])])
  AC_CHECK_HEADERS([jconfig.h])
  CPPFLAGS=$dt_save_CPPFLAGS; LIBS=$dt_save_LIBS
])

# DT_CHECK_PNG: libpng, for the one kind of image dtpack must convert that is not a JPEG (a PNG
# saved under a .JPEG name, as ImageNet has).
AC_DEFUN([DT_CHECK_PNG], [
  PKG_CHECK_MODULES([PNG], [libpng], [],
    [AC_MSG_NOTICE([no pkg-config file for libpng; trying -lpng])
     PNG_CFLAGS=; PNG_LIBS=-lpng])
  DT_VERIFY_LIB([PNG], [png.h], [png_image_begin_read_from_memory], [libpng 1.6], [libpng-dev])
])

# DT_CHECK_ZLIB: zlib, for dtpack's gzip'd IDX files (gzread reads plain files too).
AC_DEFUN([DT_CHECK_ZLIB], [
  PKG_CHECK_MODULES([ZLIB], [zlib], [],
    [AC_MSG_NOTICE([no pkg-config file for zlib; trying -lz])
     ZLIB_CFLAGS=; ZLIB_LIBS=-lz])
  DT_VERIFY_LIB([ZLIB], [zlib.h], [gzopen], [zlib], [zlib1g-dev])
])

# DT_CHECK_JANSSON: jansson, for run.json and metrics.jsonl.
AC_DEFUN([DT_CHECK_JANSSON], [
  PKG_CHECK_MODULES([JANSSON], [jansson >= 2.10], [],
    [AC_MSG_NOTICE([no pkg-config file for jansson; trying -ljansson])
     JANSSON_CFLAGS=; JANSSON_LIBS=-ljansson])
  DT_VERIFY_LIB([JANSSON], [jansson.h], [json_dumpf], [jansson], [libjansson-dev])
])

# DT_CHECK_BLAS: a CBLAS, OpenBLAS by default (BLAS_CFLAGS/BLAS_LIBS select another). With OpenMP,
# OpenBLAS's OpenMP build is preferred (Debian: libopenblas-openmp-dev): the pthread build's threads
# and ours then compete for the cores (measured here: resnet20 training 107 vs 392 img/s on 2 cores).
AC_DEFUN([DT_CHECK_BLAS], [
  AC_REQUIRE([AC_OPENMP])
  dt_blas_omp_dir=
  AS_IF([test -z "$BLAS_LIBS" && test -n "$OPENMP_CFLAGS"], [
    AC_MSG_CHECKING([for OpenBLAS built with OpenMP])
    for dt_d in /usr/lib/*/openblas-openmp /usr/lib64/openblas-openmp /usr/lib/openblas-openmp; do
      AS_IF([test -f "$dt_d/pkgconfig/openblas.pc"], [dt_blas_omp_dir=$dt_d; break])
    done
    AC_MSG_RESULT([${dt_blas_omp_dir:-no (the pthread build competes with OpenMP for the cores)}])
    AS_IF([test -n "$dt_blas_omp_dir"], [
      BLAS_CFLAGS=`PKG_CONFIG_PATH="$dt_blas_omp_dir/pkgconfig" $PKG_CONFIG --cflags openblas`
      # the rpath picks this build at run time whatever Debian's alternatives say
      BLAS_LIBS="-L$dt_blas_omp_dir -Wl,-rpath,$dt_blas_omp_dir -lopenblas"])])
  AS_IF([test -z "$BLAS_LIBS"], [
  PKG_CHECK_MODULES([BLAS], [openblas], [],
    [AC_MSG_NOTICE([no pkg-config file for openblas; trying -lopenblas])
     BLAS_CFLAGS=; BLAS_LIBS=-lopenblas])])
  DT_VERIFY_LIB([BLAS], [cblas.h], [cblas_sgemm], [a CBLAS (OpenBLAS)], [libopenblas-dev])
  dt_save_LIBS=$LIBS; LIBS="$BLAS_LIBS $LIBS"
  AC_CHECK_FUNCS([openblas_get_config openblas_set_num_threads])
  LIBS=$dt_save_LIBS
])
