#!/bin/sh
# nccl_one.sh: the NCCL communicator with one rank on a real GPU; skipped without CUDA or a GPU.
. "$top_srcdir/tests/common.sh"
[ "$DT_HAVE_CUDA" = yes ] || skip "built without CUDA (configure found no CUDA toolkit or was given --without-cuda)"
exec "$top_builddir/tests/gpu/nccl_one"
