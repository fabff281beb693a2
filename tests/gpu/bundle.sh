#!/bin/bash
# bundle.sh: builds, on the build machine (CUDA toolkit and our Debian libraries here), what
# tests/gpu/check.sh runs on a lent GPU machine (CUDA driver and PyTorch's CUDA wheels there, none of
# our libraries), small enough to travel with the working tree with room to spare.
#
#   bash tests/gpu/bundle.sh [BUILD_DIR]        (default build-gpu; a bash script: not `sh`)
#
# 1. configures BUILD_DIR (once; RECONFIGURE=1 again) for CUDA, -Werror, with what keeps the bundle
#    small and the same whatever this machine happens to have installed:
#      --with-cuda=/usr/local/cuda --with-cuda-arch=90 (the H200 only: one cubin, PTX for 9.0)
#      --without-mpi --without-pmi2 --without-dnnl --disable-torch-tests
#    HDF5, libjpeg, libpng, jansson, zlib and libaec linked statically from their Debian -dev
#    packages (HDF5's shared library drags in curl, gnutls, krb5 and ssl: about 12 MB that a GPU
#    check never uses), and the reference BLAS (Debian's libblas3, 0.4 MB, with the CBLAS interface)
#    instead of OpenBLAS (36 MB): on the GPU machine only ops_check's CPU reference multiplies
#    matrices, on small shapes. tools/install-deps installs all of these;
# 2. builds dtrain, tests/gpu/ops_check and tests/gpu/nccl_one there (JOBS parallel jobs, default 2),
#    strips them, and packs each as PROGRAM.gz beside it (gzip -9: dtrain and ops_check, static with
#    the CUDA kernels, from 13 MiB each to under 4), which is what travels: check.sh unpacks them in
#    place before its first stage, on the device as in the rehearsal;
# 3. copies the shared libraries they still need, except the C library's and the CUDA ones (the GPU
#    machine's driver gives libcuda, PyTorch's wheels cudart, cuBLAS, cuDNN and NCCL under the same
#    sonames, which check.sh puts on the library path), stripped, into BUILD_DIR/lib; libstdc++,
#    libgcc_s and libgomp go to BUILD_DIR/lib/fallback, which check.sh uses only for those the GPU
#    machine lacks (or has older than the programs need);
# 4. prints the sizes and fails when what is carried (the packed programs and lib/) plus the working
#    tree passes half of the device tool's 64 MiB (DT_BUNDLE_MAX_MIB, default 32), then the carry
#    list for the device tool.
#    `bundle.sh --size [BUILD_DIR]` does this step alone, on a bundle made before.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # a bash script, also when started as `sh script`
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
SIZE_ONLY=0
[ "${1:-}" = --size ] && { SIZE_ONLY=1; shift; } # only step 4, on a bundle made before (check.sh --dry-run)
B=${1:-build-gpu}
JOBS=${JOBS:-2}
CUDA=${CUDA_HOME:-/usr/local/cuda}
ARCH=${DT_BUNDLE_ARCH:-90}
MAX_MIB=${DT_BUNDLE_MAX_MIB:-32}

die() { echo "bundle.sh: $*" >&2; exit 1; }
BINS=("$B/dtrain" "$B/tests/gpu/ops_check" "$B/tests/gpu/nccl_one")
# step 4, also alone with --size
sizes() {
    mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
    echo
    echo "bundle.sh: the CUDA libraries the programs need (from PyTorch's wheels on the GPU machine):"
    ldd "${BINS[@]}" | awk '$2 == "=>" {print "  " $1}' | grep -E '^  (libcuda|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink)' | sort -u
    echo "bundle.sh: bundled programs and libraries:"
    for f in "${BINS[@]}"; do echo "  $f.gz $(mib "$(du -b "$f.gz" | cut -f1)") ($(mib "$(du -b "$f" | cut -f1)") unpacked)"; done
    (cd "$B/lib" && find . -type f -printf '%P %s\n' | sort | while read -r f s; do echo "  $B/lib/$f $(mib "$s")"; done)
    carried=$(du -cb "${BINS[@]/%/.gz}" "$B/lib" | tail -1 | cut -f1)
    tree=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
    echo "bundle.sh: carried $(mib "$carried") + working tree $(mib "$tree") = $(mib $((carried + tree))) of 64 MiB" \
        "(at most $MAX_MIB MiB allowed)"
    [ $((carried + tree)) -le $((MAX_MIB * 1048576)) ] ||
        die "the bundle and the working tree pass $MAX_MIB MiB, half of what a device call may carry"
    echo "bundle.sh: on the GPU machine: run(command=\"tests/gpu/check.sh $B\", timeout_s=400," \
        "carry=[\"$B/dtrain.gz\", \"$B/tests/gpu/ops_check.gz\", \"$B/tests/gpu/nccl_one.gz\", \"$B/lib\"])"
}
if [ "$SIZE_ONLY" = 1 ]; then
    for f in "${BINS[@]}" "${BINS[@]/%/.gz}" "$B/lib"; do [ -e "$f" ] || die "--size: no $f (make the bundle first: bash tests/gpu/bundle.sh $B)"; done
    sizes
    exit
fi
[ -x "$CUDA/bin/nvcc" ] || die "no nvcc in $CUDA/bin (set CUDA_HOME)"
[ -x configure ] || ./autogen.sh

# --- 1. configure ---------------------------------------------------------------------------------
MA=/usr/lib/$(gcc -print-multiarch)
# NAME=path:package ... the static archives, each with the Debian package that ships it
need() { # need PATH PACKAGE: PATH, or one line naming the package and exit
    [ -e "$1" ] || die "missing $1: install Debian's $2 (tools/install-deps does)"
    echo "$1"
}
H5=$(need "$MA/hdf5/serial/libhdf5.a" libhdf5-dev)
SZ=$(need "$MA/libsz.a" libaec-dev)
AEC=$(need "$MA/libaec.a" libaec-dev)
Z=$(need "$MA/libz.a" zlib1g-dev)
JPEG=$(need "$MA/libjpeg.a" libjpeg62-turbo-dev)
PNG=$(need "$MA/libpng16.a" libpng-dev)
JANSSON=$(need "$MA/libjansson.a" libjansson-dev)
NETLIB=$(need "$MA/blas/libblas.so.3" libblas3)
# (no grep -q on a pipe: under pipefail nm's SIGPIPE would fail the test)
[ "$(nm -D "$NETLIB" 2>/dev/null | grep -c ' T cblas_sgemm$')" -ge 1 ] || die "$NETLIB has no cblas_sgemm (not Debian's libblas3?)"

mkdir -p "$B"
if [ ! -f "$B/config.status" ] || [ "${RECONFIGURE:-0}" = 1 ]; then
    (cd "$B" && "$ROOT/configure" --enable-werror --with-cuda="$CUDA" --with-cuda-arch="$ARCH" --without-mpi \
        --without-pmi2 --without-dnnl --disable-torch-tests \
        HDF5_CFLAGS="-I/usr/include/hdf5/serial" HDF5_LIBS="$H5 $SZ $AEC $Z -ldl -lm" \
        JPEG_CFLAGS= JPEG_LIBS="$JPEG" PNG_CFLAGS= PNG_LIBS="$PNG $Z -lm" \
        JANSSON_CFLAGS= JANSSON_LIBS="$JANSSON" \
        BLAS_CFLAGS= BLAS_LIBS="-L$(dirname "$NETLIB") -Wl,-rpath,$(dirname "$NETLIB") -l:libblas.so.3")
fi
grep -q '^#define HAVE_CUDA 1' "$B/config.h" || die "$B is not a CUDA build (see $B/config.log)"

# --- 2. build -----------------------------------------------------------------------------------------
make -C "$B" -j"$JOBS" dtrain tests/gpu/ops_check tests/gpu/nccl_one
for f in "${BINS[@]}"; do
    [[ $(file -L "$f") == *ELF* ]] || die "$f is not an ELF program (a libtool wrapper?)"
    strip --strip-unneeded "$f"
    # what travels (-n: no name or time inside, the same program packs the same); made after the
    # strip, so a program newer than its .gz was built since (check.sh --dry-run refuses it)
    gzip -9 -n -c "$f" > "$f.gz"
done

# --- 3. the libraries ------------------------------------------------------------------------------------
# the C library's own, the driver, and the CUDA libraries PyTorch's wheels provide
skip='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc[a-z-]*|libnvJitLink)\.so'
fallback='^(libstdc\+\+|libgcc_s|libgomp)\.so'
rm -rf "${B:?}/lib"
mkdir -p "$B/lib/fallback"
ldd "${BINS[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r so path; do
    if [[ $so =~ $skip ]]; then
        continue
    elif [[ $so =~ $fallback ]]; then
        dest=$B/lib/fallback/$so
    else
        dest=$B/lib/$so
    fi
    cp -L "$path" "$dest"
    chmod u+w "$dest"
    strip --strip-unneeded "$dest" 2>/dev/null || true
done
if [ "$(ldd "${BINS[@]}" | grep -c "not found")" -gt 0 ]; then
    echo "bundle.sh: unresolved libraries here:" >&2
    ldd "${BINS[@]}" | grep "not found" >&2
    exit 1
fi

# --- 4. sizes ------------------------------------------------------------------------------------------------
sizes
