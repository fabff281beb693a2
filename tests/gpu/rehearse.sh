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
#    and with its packed dtrain cut short: it must fail with one line naming dtrain.gz, before any stage;
# 4. the logs of 2, with one stage's output format changed at a time (dtrain's progress lines and
#    the line saying its step was captured as graphs, the profile of dtrain-O2's last step, the
#    PyTorch script's RESULT line, ops_check's last line): tests/gpu/summary.py must fail, naming the
#    stage;
# 5. ops_check with a planted fault (DT_OPS_CHECK_FAULT=act_fwd: every act_fwd call of the checked
#    table goes through the CUDA backend's fatal path), on the CPU's table (check.sh --dry-run --only
#    ops_check then runs ops_check --backend cpu --quick): exactly act_fwd's rows fail, each saying
#    why, every later group's rows run, the list of failing rows and the last line count them, and
#    ops_check exits 1; then with the process killed at each act_fwd call (act_fwd:abort): one row per
#    unit it died in, and the later groups run in new processes;
# 6. the planted capture fallbacks: tests/train/graph_fallback.sh on the bundle's dtrain (--device cpu
#    --graph: the CPU's capture backend, with an allocation, then a host wait, planted inside the
#    capture of the second step): one line naming each, the run goes on without graphs, exit 0, and
#    it equals the run without --graph, bit for bit;
# 7. check.sh in device mode, here: each stage fails or skips at once for want of a GPU, and what it
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
    # as the device gets it: the packed programs and lib/
    cp -a "$B/dtrain.gz" "$B/lib" "$B-nolib/" && cp -a "$B/tests/gpu/ops_check.gz" "$B/tests/gpu/nccl_one.gz" "$B-nolib/tests/gpu/" ||
        return 1
    rm -f "$B-nolib/lib/fallback/libgomp.so.1"
    dry "$WORK/nolib" --only machine,dtrain-O0 "$B-nolib"
    local rc=$?
    grep -E 'rehearsal: FAILED|libgomp' "$WORK/nolib.out" | head -5
    [ "$rc" = 1 ] && grep -q 'libgomp.so.1' "$WORK/nolib.out" && tail -1 "$WORK/nolib.out" | grep -q '^rehearsal: FAILED: '
}
check "the rehearsal fails, naming libgomp.so.1, when the bundle lacks it" no_lib

bad_gz() { # the packed dtrain cut short (a transfer cut off): one line naming it, and no stage runs
    rm -rf "$B-nolib"
    mkdir -p "$B-nolib/tests/gpu"
    cp -a "$B/lib" "$B-nolib/" && cp -a "$B/tests/gpu/ops_check.gz" "$B/tests/gpu/nccl_one.gz" "$B-nolib/tests/gpu/" &&
        head -c 100000 "$B/dtrain.gz" > "$B-nolib/dtrain.gz" || return 1
    dry "$WORK/badgz" "$B-nolib"
    local rc=$?
    grep -E 'corrupt|rehearsal: FAILED' "$WORK/badgz.out" | head -3
    [ "$rc" = 1 ] && [ "$(grep -c "corrupt: $B-nolib/dtrain.gz does not unpack (gzip: " "$WORK/badgz.out")" = 1 ] &&
        ! grep -q '^\[check.sh +[0-9]*s\] machine (limit' "$WORK/badgz.out" && tail -1 "$WORK/badgz.out" | grep -q '^rehearsal: FAILED: '
}
check "the rehearsal fails with one line naming dtrain.gz when it does not unpack (cut short), before any stage" bad_gz

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
# dtrain-O2 runs under DT_PROFILE=last: the CPU's report, in the format the CUDA one has
profile_change() { # its head line, then its total row
    format_change dtrain-O2 's|ms per step by kind|ms by kind|' && format_change dtrain-O2 's|^total |sum   |'
}
check "summary.py fails when dtrain's profile changes (its head line; its total row)" profile_change
check "summary.py reads the unchanged logs without complaint" \
    python3 tests/gpu/summary.py --mode rehearsal --logs "$WORK/good" --batch 256 --run-batch 2

# planted FAULT: check.sh --dry-run --only ops_check with DT_OPS_CHECK_FAULT=FAULT; its ops_check log
# in $WORK/fault.FAULT/ops_check.log, checked by the caller
planted() {
    local logs=$WORK/fault.${1//:/-}
    rm -rf "$logs"
    DT_OPS_CHECK_FAULT=$1 dry "$logs" --only ops_check "$B"
    local rc=$?
    [ "$rc" = 1 ] || { echo "check.sh exited $rc, not 1"; return 1; }
    read -r _ ops_rc _ < <(grep '^ops_check ' "$logs/results")
    [ "$ops_rc" = 1 ] || { echo "ops_check exited ${ops_rc:-?}, not 1: $(tail -3 "$logs/ops_check.log")"; return 1; }
    PLOG=$logs/ops_check.log
}
# the rows of log $1 (name type shape ... PASS|FAIL), and the last line's counts, agree: $2 failing
later_groups_ran() { # rows of groups after act's, passing, in log $1
    local g
    for g in '^maxpool_fwd' '^sgd' '^step_end' '^model steps as a graph = issued'; do
        grep -E "$g.* PASS" "$1" > /dev/null || { echo "no passing row of $g after the fault"; return 1; }
    done
}
counts_agree() {
    local rows fails last
    rows=$(grep -cE ' (PASS|FAIL)( |$)' "$1")
    fails=$(grep -cE ' FAIL( |$)' "$1")
    last=$(tail -1 "$1")
    echo "$last"
    [ "$fails" = "$2" ] || { echo "$fails FAIL rows, expected $2"; return 1; }
    [[ $last =~ ^ops_check:\ $rows\ rows,\ $fails\ failed ]] || { echo "the last line does not count $rows rows, $fails failed"; return 1; }
    [ "$(grep -c '^  FAILED ' "$1")" = "$fails" ] || { echo "the list of failing rows does not hold $fails"; return 1; }
}
fault_costs_its_rows() {
    planted act_fwd || return 1
    local bad want
    grep -E ' FAIL( |$)' "$PLOG" | head -3
    bad=$(grep -E ' FAIL( |$)' "$PLOG" | grep -vE '^act_fwd ' | head -3)
    [ -z "$bad" ] || { echo "rows of other ops failed: $bad"; return 1; }
    # every act_fwd row: 6 activations, plain and in place, in fp32, fp16 and bf16; each says why
    want=$(grep -cE '^act_fwd ' "$PLOG")
    [ "$want" = 36 ] || { echo "$want act_fwd rows, not 36"; return 1; }
    [ "$(grep -c '      its call failed: DT_OPS_CHECK_FAULT=act_fwd: a planted fault' "$PLOG")" = 36 ] ||
        { echo "not every act_fwd row says its call failed"; return 1; }
    grep -qE '^act_bwd .* PASS' "$PLOG" || { echo "act_bwd's rows (the same units) did not pass"; return 1; }
    later_groups_ran "$PLOG" && counts_agree "$PLOG" 36 &&
        grep -q '^  FAILED act_fwd' "$WORK/fault.act_fwd/summary.txt" ||
        { echo "summary.txt does not list the failing rows"; return 1; }
}
check "a planted fault (DT_OPS_CHECK_FAULT=act_fwd, the CPU's table) fails exactly act_fwd's rows, and the rest runs" \
    fault_costs_its_rows
process_dies() {
    planted act_fwd:abort || return 1
    local died
    died=$(grep -cE '^process died in unit +- +act (fp32|fp16|bf16) .* FAIL$' "$PLOG")
    grep -A1 '^process died in unit' "$PLOG" | head -2
    [ "$died" = 3 ] || { echo "$died rows for the units that died, not 3 (act in fp32, fp16, bf16)"; return 1; }
    grep -q 'signal 6 (Aborted); the backend.s last error: DT_OPS_CHECK_FAULT=act_fwd' "$PLOG" ||
        { echo "the rows do not say how the process died"; return 1; }
    later_groups_ran "$PLOG" && counts_agree "$PLOG" 3
}
check "a process killed by a planted fault (act_fwd:abort) costs its unit's row, and the next units run in a new process" \
    process_dies

fallbacks() { # tests/train/graph_fallback.sh on the bundle's dtrain: --device cpu --graph captures on the CPU's
    # capture backend, which fails a capture as the CUDA backend does (nn/cpu/capture.c)
    env top_srcdir=. top_builddir="$B" DTRAIN_UNDER_TEST="$B/dtrain" DT_PYTHON_TORCH="${DT_REHEARSAL_PYTHON:-python3}" \
        OMP_NUM_THREADS=1 sh tests/train/graph_fallback.sh
}
check "the planted capture fallbacks (DT_PLANT_CAPTURE_FAULT=alloc, hostwait): one line naming each, the run goes on without graphs and equals --no-graph's, bit for bit" \
    fallbacks

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
