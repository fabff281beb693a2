#!/bin/sh
# cpu_train.sh: bench/cpu_train.sh runs (resnet8, batch 8 at 32x32, 3 steps, 2 threads, once, at O0 and
# at O2) and prints, per level, both rates and its ratio line with a positive ratio and both peak
# resident sizes.
. "$top_srcdir/tests/common.sh"
. "$top_srcdir/tests/bench/common.sh"
bench_setup
levels="O0 O2"
# ONEDNN_MAX_CPU_ISA below AVX-512's bf16 (emulating an AVX2-only CPU on a newer one) hides oneDNN's
# bf16 kernels from PyTorch's copy of oneDNN too, while PyTorch's own CPU check still offers its
# bf16 autocast (O2's side): its convolution then fails to make a primitive. On a real AVX2 CPU
# PyTorch takes another path, so under such a setting only O0 is compared.
case "${ONEDNN_MAX_CPU_ISA:-${DNNL_MAX_CPU_ISA:-ALL}}" in
  ALL | all | *AMX* | *amx* | *BF16* | *bf16*) ;;
  *) levels=O0; echo "ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-$DNNL_MAX_CPU_ISA}: PyTorch's bf16 autocast cannot run; O0 only" ;;
esac
bench_run 300 cpu_train.sh "$top_builddir" 2 1 resnet8:8:32:3 "$levels"
summary=
for lv in $levels; do
  r=$(result_line "^dtrain resnet8 b8 32x32 threads 2 $lv( fp16)?: [0-9.]+ img/s" | sed -n 's/.*: \([0-9.]*\) img\/s.*/\1/p')
  positive "dtrain $lv img/s" "$r"
  case $lv in O0) prec=fp32 ;; *) prec='autocast (bf|fp)16.*' ;; esac   # bf16 where torch's CPU autocast has no fp16
  r=$(result_line "^torch resnet8 b8 32x32 threads 2 [a-z_]+ $prec: [0-9.]+ img/s" | sed -n 's/.*: \([0-9.]*\) img\/s.*/\1/p')
  positive "torch $lv img/s" "$r"
  line=$(result_line "^resnet8 +$lv +ratio dtrain/PyTorch ")
  set -- $(echo "$line" | sed -n 's/^resnet8 *'$lv' *ratio dtrain\/PyTorch \([^ ]*\) *peak RSS dtrain \([^ ]*\) MiB, PyTorch \([^ ]*\) MiB$/\1 \2 \3/p')
  [ $# -eq 3 ] || fail "the $lv ratio line does not parse: $line"
  positive "$lv ratio dtrain/PyTorch" "$1"
  positive "$lv dtrain's peak RSS (MiB)" "$2"
  positive "$lv PyTorch's peak RSS (MiB)" "$3"
  summary="$summary${summary:+; }$lv ratio dtrain/PyTorch $1, peak RSS $2 and $3 MiB"
done
pass "bench/cpu_train.sh: $summary"
