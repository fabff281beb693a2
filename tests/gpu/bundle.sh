#!/bin/bash
# bundle.sh: builds, on the build machine (CUDA toolkit and our Debian libraries here), what
# tests/gpu/check.sh runs on a lent GPU machine (CUDA driver and PyTorch's CUDA wheels there, none of
# our libraries), small enough to travel with the working tree (64 MiB in all).
#
#   tests/gpu/bundle.sh [BUILD_DIR]        (default build-gpu)
#
# 1. configures BUILD_DIR (once; RECONFIGURE=1 again) for CUDA with what keeps the bundle small:
#      --with-cuda=/usr/local/cuda --with-cuda-arch=90 (the H200 only: one cubin, PTX for 9.0)
#      --without-mpi --without-pmi2 --without-dnnl --disable-torch-tests
#    and the reference BLAS (Debian's libblas3, 0.4 MB, which has the CBLAS interface) instead of
#    OpenBLAS (36 MB): on the GPU machine only ops_check's CPU reference multiplies matrices, on small
#    shapes. DT_BUNDLE_BLAS=openblas keeps OpenBLAS; DT_BUNDLE_ARCH sets the compute capabilities.
# 2. builds dtrain and tests/gpu/ops_check there (JOBS parallel jobs, default 2) and strips them;
# 3. copies the shared libraries they need, except the C library's and the CUDA ones (the GPU
#    machine's driver gives libcuda, PyTorch's wheels cudart, cuBLAS, cuDNN and NCCL under the same
#    sonames, which check.sh puts on the library path), stripped, into BUILD_DIR/lib; libstdc++,
#    libgcc_s and libgomp go to BUILD_DIR/lib/fallback, which check.sh uses only for those the GPU
#    machine lacks;
# 4. prints the sizes (what is carried plus the working tree must stay under 64 MiB) and the carry
#    list for the device tool.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
B=${1:-build-gpu}
JOBS=${JOBS:-2}
CUDA=${CUDA_HOME:-/usr/local/cuda}
ARCH=${DT_BUNDLE_ARCH:-90}

[ -x "$CUDA/bin/nvcc" ] || { echo "bundle.sh: no nvcc in $CUDA/bin (set CUDA_HOME)" >&2; exit 1; }
[ -x configure ] || ./autogen.sh

# --- 1. configure ---------------------------------------------------------------------------------
mkdir -p "$B"
if [ ! -f "$B/config.status" ] || [ "${RECONFIGURE:-0}" = 1 ]; then
    blas=()
    netlib=/usr/lib/x86_64-linux-gnu/blas
    if [ "${DT_BUNDLE_BLAS:-netlib}" = netlib ] && [ -e "$netlib/libblas.so.3" ] &&
        nm -D "$netlib/libblas.so.3" 2>/dev/null | grep -q ' T cblas_sgemm$'; then
        blas=(BLAS_CFLAGS= "BLAS_LIBS=-L$netlib -Wl,-rpath,$netlib -lblas")
        echo "bundle.sh: BLAS: the reference BLAS in $netlib (libblas3)"
    else
        echo "bundle.sh: BLAS: configure's choice (OpenBLAS: a larger bundle)"
    fi
    (cd "$B" && "$ROOT/configure" --with-cuda="$CUDA" --with-cuda-arch="$ARCH" --without-mpi --without-pmi2 \
        --without-dnnl --disable-torch-tests "${blas[@]}")
fi
grep -q '^#define HAVE_CUDA 1' "$B/config.h" || { echo "bundle.sh: $B is not a CUDA build (see $B/config.log)" >&2; exit 1; }

# --- 2. build -----------------------------------------------------------------------------------------
make -C "$B" -j"$JOBS" dtrain
make -C "$B" -j"$JOBS" tests/gpu/ops_check
BINS=("$B/dtrain" "$B/tests/gpu/ops_check")
for f in "${BINS[@]}"; do
    if ! file -L "$f" | grep -q ELF; then
        echo "bundle.sh: $f is not an ELF program (a libtool wrapper?)" >&2
        exit 1
    fi
    strip --strip-unneeded "$f"
done

# --- 3. the libraries ------------------------------------------------------------------------------------
rm -rf "${B:?}/lib"
mkdir -p "$B/lib/fallback"
# the C library's own, the driver, and the CUDA libraries PyTorch's wheels provide
skip='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc[a-z-]*|libnvJitLink)\.so'
fallback='^(libstdc\+\+|libgcc_s|libgomp)\.so'
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
if ldd "${BINS[@]}" | grep -q "not found"; then
    echo "bundle.sh: unresolved libraries here:" >&2
    ldd "${BINS[@]}" | grep "not found" >&2
    exit 1
fi

# --- 4. sizes ------------------------------------------------------------------------------------------------
echo
echo "bundle.sh: the CUDA libraries the programs need (from PyTorch's wheels on the GPU machine):"
ldd "${BINS[@]}" | awk '$2 == "=>" {print "  " $1}' | grep -E '^  (libcuda|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink)' | sort -u
echo "bundle.sh: bundled libraries:"
(cd "$B/lib" && find . -type f -printf '  %P %s\n' | sort)
carried=$(du -cb "${BINS[@]}" "$B/lib" | tail -1 | cut -f1)
tree=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "bundle.sh: $B/dtrain $(mib "$(du -b "$B/dtrain" | cut -f1)"), $B/tests/gpu/ops_check" \
    "$(mib "$(du -b "$B/tests/gpu/ops_check" | cut -f1)"), $B/lib $(mib "$(du -cb "$B/lib" | tail -1 | cut -f1)")"
echo "bundle.sh: carried $(mib "$carried") + working tree $(mib "$tree") = $(mib $((carried + tree))) of 64 MiB"
if [ $((carried + tree)) -gt $((64 * 1048576)) ]; then
    echo "bundle.sh: too large to travel" >&2
    exit 1
fi
echo "bundle.sh: on the GPU machine: run(command=\"tests/gpu/check.sh $B\", timeout_s=500," \
    "carry=[\"$B/dtrain\", \"$B/tests/gpu/ops_check\", \"$B/lib\"])"
