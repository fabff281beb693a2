#!/bin/bash
# rehearse.sh: the rehearsal of the GPU check, and proof that it catches what it is there to catch
# (a CI step: .ci/run; it needs nvcc, no GPU and no root).
#
#   bash tests/gpu/rehearse.sh [BUILD_DIR]      (default build-gpu)
#
# 1. tests/gpu/bundle.sh BUILD_DIR: the bundle, built as for the device, its size checked;
# 2. tests/gpu/check.sh --dry-run BUILD_DIR: every stage as on the device but the GPU (see check.sh);
#    it must end "rehearsal: passed";
# 3. the same bundle less one library (lib/fallback/libgomp.so.1): the rehearsal must fail, naming it;
# 4. the logs of 2, with one stage's output format changed at a time (dtrain's progress lines and
#    the line saying its step was captured as graphs, the PyTorch script's RESULT line, ops_check's
#    last line): tests/gpu/summary.py must fail, naming the stage;
# 5. check.sh in device mode, here: each stage fails or skips at once for want of a GPU, and what it
#    leaves for the device tool to bring back is at most 8 files (the tool's limit), summary.txt
#    among them.
# Prints "ok N - ..." / "not ok N - ..." per check and "rehearse.sh: N passed, M failed"; exit 0 when
# all passed. RESKIP_BUNDLE=1 skips step 1 (an existing bundle).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # a bash script, also when started as `sh script`
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${1:-build-gpu}
WORK=$(mktemp -d /tmp/dt-rehearse.XXXXXX)
trap 'rm -rf "$WORK" "$B-nolib"' EXIT
n=0 failed=0
check() { # check DESCRIPTION COMMAND...: one numbered result
    local what=$1
    shift
    n=$((n + 1))
    if "$@"; then echo "ok $n - $what"; else echo "not ok $n - $what"; failed=$((failed + 1)); fi
}

if [ "${RESKIP_BUNDLE:-0}" != 1 ]; then
    check "the bundle builds and is within its size (tests/gpu/bundle.sh $B)" bash tests/gpu/bundle.sh "$B"
fi

dry() { # dry LOGDIR ARGS...: check.sh --dry-run, its output in LOGDIR.out
    local logs=$1
    shift
    mkdir -p "$logs"
    DT_REHEARSAL_LOGS=$logs bash tests/gpu/check.sh --dry-run "$@" > "$logs.out" 2>&1
}
passes() {
    dry "$WORK/good" "$B"
    local rc=$?
    tail -40 "$WORK/good.out"
    [ "$rc" = 0 ] && tail -1 "$WORK/good.out" | grep -q '^rehearsal: passed$'
}
check "the rehearsal passes on the bundle" passes

no_lib() { # the bundle less libgomp: the rehearsal must fail and name it
    rm -rf "$B-nolib"
    mkdir -p "$B-nolib/tests/gpu"
    cp -a "$B/dtrain" "$B/lib" "$B-nolib/" && cp -a "$B/tests/gpu/ops_check" "$B/tests/gpu/nccl_one" "$B-nolib/tests/gpu/" || return 1
    rm -f "$B-nolib/lib/fallback/libgomp.so.1"
    dry "$WORK/nolib" --only machine,dtrain-O0 "$B-nolib"
    local rc=$?
    grep -E 'rehearsal: FAILED|libgomp' "$WORK/nolib.out" | head -5
    [ "$rc" = 1 ] && grep -q 'libgomp.so.1' "$WORK/nolib.out" && tail -1 "$WORK/nolib.out" | grep -q '^rehearsal: FAILED: '
}
check "the rehearsal fails, naming libgomp.so.1, when the bundle lacks it" no_lib

format_change() { # format_change STAGE SED-EXPRESSION: summary.py must fail naming STAGE
    local stage=$1 expr=$2 logs=$WORK/fmt.$1
    rm -rf "$logs"
    cp -a "$WORK/good" "$logs" || return 1
    sed -i "$expr" "$logs/$stage.log"
    cmp -s "$WORK/good/$stage.log" "$logs/$stage.log" && { echo "the change did not apply to $stage.log"; return 1; }
    python3 tests/gpu/summary.py --mode rehearsal --logs "$logs" --batch 256 --run-batch 2 > /dev/null 2> "$logs.err"
    local rc=$?
    cat "$logs.err"
    [ "$rc" = 1 ] && grep -q "^FORMAT: $stage: " "$logs.err"
}
check "summary.py fails when dtrain's progress lines change (img/s -> images/s)" \
    format_change dtrain-O2 's| img/s | images/s |'
check "summary.py fails when the PyTorch script's RESULT line loses img_s" format_change torch-fp16 's| img_s=[^ ]*||'
check "summary.py fails when dtrain's graph line changes (captured as graphs -> captured)" \
    format_change dtrain-O0 's|captured as graphs|captured|'
check "summary.py fails when ops_check's last line changes" format_change ops_check 's|^ops_check: \([0-9]*\) rows|ops_check: \1 checks|'
check "summary.py reads the unchanged logs without complaint" \
    python3 tests/gpu/summary.py --mode rehearsal --logs "$WORK/good" --batch 256 --run-batch 2

device_mode() { # check.sh as on the device, here: every stage fails or skips for want of a GPU, fast
    rm -rf "$WORK/out"
    mkdir -p "$WORK/out"
    OUT=$WORK/out DT_CHECK_BUDGET=120 bash tests/gpu/check.sh "$B" > "$WORK/device.out" 2>&1
    local files
    files=$(find "$WORK/out" -type f | wc -l)
    grep -E '^\[check.sh' "$WORK/device.out" | tail -12
    echo "files back: $files ($(cd "$WORK/out" && ls | tr '\n' ' '))"
    [ "$files" -le 8 ] && [ -s "$WORK/out/summary.txt" ] && [ -s "$WORK/out/stages.log" ] &&
        grep -q '^== stages' "$WORK/out/summary.txt"
}
check "check.sh in device mode runs here (no GPU) and leaves at most 8 files in \$OUT, summary.txt among them" device_mode

echo "rehearse.sh: $((n - failed)) passed, $failed failed"
[ "$failed" = 0 ]
