#!/bin/sh
# cuda_smoke.sh: the CUDA self-test on every visible device; skipped without CUDA or a GPU.
. "$top_srcdir/tests/common.sh"
[ "$DT_HAVE_CUDA" = yes ] || skip "built without CUDA (configure found no CUDA toolkit or was given --without-cuda)"
exec "$top_builddir/tests/gpu/cuda_smoke"
