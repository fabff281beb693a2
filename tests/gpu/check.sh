#!/bin/bash
# check.sh: the one call on a lent GPU machine (doc/design.md, "The CUDA backend: the plan"): is every
# CUDA op right, and how fast does dtrain train resnet50 next to PyTorch.
#
#   tests/gpu/check.sh [BUILD_DIR]          (default build-gpu, made on the build machine by
#                                            tests/gpu/bundle.sh)
#
# From the repository root on the device machine, with the bundle carried:
#   run(command="tests/gpu/check.sh", timeout_s=500,
#       carry=["build-gpu/dtrain", "build-gpu/tests/gpu/ops_check", "build-gpu/lib"])
#
# Stages, each with its own time limit inside a budget of DT_CHECK_BUDGET seconds (default 450: the
# call stays under 8 minutes), none stopping the others (a failure or timeout is recorded and shown):
#   1. the machine: nvidia-smi -L, the library path built here, any library the binaries still miss;
#   2. ops_check: every op of the CUDA table against the CPU in fp32/fp16/bf16, then two training
#      steps of a model on both (tests/gpu/ops_check.c);
#   3. dtrain --device cuda --synthetic -a resnet50 -b 256 --max-steps 30 -p 10 at O2, O2 bf16, O0, O3;
#   4. bench/torch_gpu_resnet50.py at batch 256: fp16 and bf16 autocast, then fp32 (TF32 off, as
#      dtrain's O0) when time is left.
# Speeds: dtrain's is the rate between its last two progress lines, from their timestamps (steps 20
# to 30: cuDNN's algorithm search and the first steps left out); PyTorch's is over 20 steps after 10
# warm-up steps. Peak memory: the most nvidia-smi saw in use on the GPU during the run (CUDA context
# and caching allocators included, so comparable between the two), and PyTorch's own
# max_memory_allocated.
#
# Environment: DT_CHECK_BUDGET (seconds, default 450), DT_CHECK_SEED (ops_check's seed; default: the
# time, printed), DT_CHECK_BATCH (default 256), DT_CHECK_STEPS (dtrain's --max-steps, default 30).
# Logs: $OUT (the device tool's folder that comes back) or /tmp/dt-gpu-check: ops_check.txt (every
# row), stages.log (every stage's output), summary.txt (the table printed last).
# Exit status: ops_check's: 0 every row passed, 1 a row failed, 77 no GPU, 124 timed out, 2 the
# binaries or the GPU are missing, other: it crashed.
set -u

cd "$(dirname "$0")/../.." || exit 2
B=${1:-build-gpu}
BUDGET=${DT_CHECK_BUDGET:-450}
SEED=${DT_CHECK_SEED:-$(date +%s)}
BATCH=${DT_CHECK_BATCH:-256}
STEPS=${DT_CHECK_STEPS:-30}
LOGS=${OUT:-/tmp/dt-gpu-check}
WORK=$(mktemp -d /tmp/dt-gpu-check.XXXXXX)
mkdir -p "$LOGS"
: > "$LOGS/stages.log"
T0=$(date +%s)
export PYTHONUNBUFFERED=1

left() { echo $((BUDGET - ($(date +%s) - T0))); }
say() { echo "[check.sh +$(($(date +%s) - T0))s] $*"; }

# --- the binaries and their libraries -------------------------------------------------------------
say "repository $(pwd), build $B, budget ${BUDGET}s, batch $BATCH, ops_check seed $SEED"
nvidia-smi -L 2>&1 || say "nvidia-smi failed"
missing=0
for f in "$B/dtrain" "$B/tests/gpu/ops_check"; do
    [ -x "$f" ] || { say "missing: $f (build it on the build machine with tests/gpu/bundle.sh and carry it)"; missing=1; }
done

# CUDA libraries: the PyTorch wheels' (site-packages/nvidia/*/lib: cudart, cublas, cudnn, nccl, nvrtc)
NVLIB=$(python3 - <<'EOF' 2>/dev/null
import glob, os
dirs = []
try:
    import nvidia
    for p in list(nvidia.__path__):
        dirs += sorted(glob.glob(os.path.join(p, "*", "lib")))
except Exception:
    pass
print(":".join(d for d in dirs if os.path.isdir(d)))
EOF
)
# the bundle's own libraries; lib/fallback (libstdc++, libgcc_s, libgomp) only for those this
# system lacks, so that a newer system copy is not shadowed by our older one
FALLBACK=$WORK/fallback
mkdir -p "$FALLBACK"
if [ -d "$B/lib/fallback" ]; then
    for f in "$B/lib/fallback"/*; do
        [ -e "$f" ] || continue
        so=$(basename "$f")
        if ! ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$so "; then
            ln -sf "$(cd "$(dirname "$f")" && pwd)/$so" "$FALLBACK/$so"
            say "using the bundle's $so (the system has none)"
        fi
    done
fi
BLIB=$(cd "$B/lib" 2>/dev/null && pwd)
# for our programs only: PyTorch keeps the system's libraries (ours are Debian 12's, older)
DT_LD="${BLIB:+$BLIB:}${NVLIB:+$NVLIB:}$FALLBACK${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "library path for dtrain and ops_check: LD_LIBRARY_PATH=$DT_LD"
[ -n "$NVLIB" ] || say "no site-packages/nvidia/*/lib found through python3: the CUDA libraries must come from elsewhere"
python3 -m pip show nvidia-cudnn-cu13 nvidia-cublas nvidia-cuda-runtime nvidia-nccl-cu13 2>/dev/null |
    awk '/^Name:/ {n = $2} /^Version:/ {printf "  %s %s\n", n, $2}'
for f in "$B/dtrain" "$B/tests/gpu/ops_check"; do
    [ -x "$f" ] || continue
    # -r: also functions missing from the libraries found (a CUDA wheel older than the headers)
    nf=$(LD_LIBRARY_PATH=$DT_LD ldd -r "$f" 2>&1 | grep -E "not found|undefined symbol" | head -20)
    if [ -n "$nf" ]; then
        say "$f still misses:"
        echo "$nf"
    fi
    [ "$f" = "$B/dtrain" ] && LD_LIBRARY_PATH=$DT_LD ldd "$f" 2>/dev/null |
        grep -E "lib(cudart|cublas|cublasLt|cudnn|nccl)\.so" | awk '{print "  " $1 " => " $3}' 
done

# --- stages ----------------------------------------------------------------------------------------
# results: one line per stage: name rc seconds limit peak_mib log
RESULTS=$WORK/results
: > "$RESULTS"

# peak GPU memory in use while a stage runs, from nvidia-smi every 250 ms
mem_start() {
    MEMLOG=$WORK/mem.$1
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > "$MEMLOG" 2>/dev/null &
    MEMPID=$!
}
mem_stop() {
    kill "$MEMPID" 2>/dev/null
    wait "$MEMPID" 2>/dev/null
    local peak
    peak=$(tr -dc '0-9\n' < "$MEMLOG" | sort -n | tail -1)
    echo "${peak:--}"
}

# stage NAME CAP RESERVE CMD...: runs CMD for at most min(CAP, time left - RESERVE) seconds, its
# output into $WORK/NAME.log (and $LOGS/stages.log); RESERVE keeps time for the stages after it
stage() {
    local name=$1 cap=$2 reserve=$3
    shift 3
    local log=$WORK/$name.log limit rc t peak
    limit=$(($(left) - reserve))
    [ "$limit" -gt "$cap" ] && limit=$cap
    if [ "$limit" -lt 20 ]; then
        say "$name: not run (${limit}s left for it)"
        echo "$name: not run (no time left)" > "$log"
        echo "$name 125 0 $limit - $log" >> "$RESULTS"
        return 125
    fi
    say "$name (limit ${limit}s): $*"
    t=$(date +%s)
    mem_start "$name"
    timeout -k 10 "$limit" "$@" > "$log" 2>&1
    rc=$?
    peak=$(mem_stop)
    t=$(($(date +%s) - t))
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        say "$name: timed out after ${limit}s"
    fi
    say "$name: exit $rc after ${t}s, GPU memory peak ${peak} MiB"
    echo "$name $rc $t $limit $peak $log" >> "$RESULTS"
    { echo "=== $name: exit $rc, ${t}s (limit ${limit}s), GPU memory peak ${peak} MiB: $*"; cat "$log"; echo; } \
        >> "$LOGS/stages.log"
    return "$rc"
}

MIN=35 # seconds kept for each training stage still to come

if [ "$missing" = 0 ]; then
    stage ops_check 150 $((6 * MIN)) env LD_LIBRARY_PATH="$DT_LD" "$B/tests/gpu/ops_check" --seed "$SEED"
    OPS_RC=$?
    cp "$WORK/ops_check.log" "$LOGS/ops_check.txt"
else
    OPS_RC=2
fi

dtrain_run() { # name reserve extra-args...
    local name=$1 reserve=$2
    shift 2
    rm -rf "$WORK/r.$name"
    [ "$missing" = 0 ] || return 0
    stage "$name" 75 "$reserve" env LD_LIBRARY_PATH="$DT_LD" "$B/dtrain" --device cuda --synthetic -a resnet50 -b "$BATCH" --max-steps "$STEPS" \
        -p 10 --results "$WORK/r.$name" "$@"
    rm -rf "$WORK/r.$name" # the checkpoint
}
torch_run() { # name reserve extra-args...
    local name=$1 reserve=$2
    shift 2
    stage "$name" 60 "$reserve" python3 bench/torch_gpu_resnet50.py -b "$BATCH" --warmup 10 --steps 20 "$@"
}

dtrain_run dtrain-O2 $((5 * MIN)) --opt-level O2
torch_run torch-fp16 $((4 * MIN))
dtrain_run dtrain-O2-bf16 $((3 * MIN)) --opt-level O2 --precision bf16
torch_run torch-bf16 $((2 * MIN)) --bf16
dtrain_run dtrain-O0 "$MIN" --opt-level O0
dtrain_run dtrain-O3 0 --opt-level O3
torch_run torch-fp32 0 --fp32

# --- the summary -------------------------------------------------------------------------------------
python3 - "$RESULTS" "$BATCH" "$SEED" "$OPS_RC" > "$WORK/summary.txt" <<'EOF'
import datetime, re, sys

results, batch, seed, ops_rc = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
st = {}
for line in open(results):
    name, rc, secs, limit, peak, log = line.split()
    st[name] = dict(rc=int(rc), secs=int(secs), limit=int(limit), peak=peak, log=log)

def text(name):
    try:
        return open(st[name]["log"], errors="replace").read()
    except (KeyError, OSError):
        return ""

def why(name):
    if name not in st:
        return "not run"
    s = st[name]
    if s["rc"] == 125:
        return "not run (no time left)"
    if s["rc"] in (124, 137):
        return "timed out after %d s" % s["limit"]
    return "exit %d" % s["rc"]

PROG = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) .*\binfo: epoch \d+ \[(\d+)/\d+\] .* ([\d.]+) img/s")

def dtrain_speed(name):
    """(img/s between the last two progress lines, how it was got) from the log's timestamps"""
    pts = []
    for line in text(name).splitlines():
        m = PROG.match(line)
        if m:
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
            pts.append((t, int(m.group(2)), float(m.group(3))))
    if len(pts) >= 2 and pts[-1][0] > pts[-2][0] and pts[-1][1] > pts[-2][1]:
        (t1, s1, _), (t2, s2, _) = pts[-2], pts[-1]
        return (s2 - s1) * batch / (t2 - t1), "steps %d-%d" % (s1, s2)
    if pts:
        return pts[-1][2], "step %d, its own rate" % pts[-1][1]
    return None, why(name)

def torch_result(name):
    m = re.search(r"^RESULT .*", text(name), re.M)
    if not m:
        return None
    return dict(kv.split("=", 1) for kv in re.findall(r"(\w+=\"[^\"]*\"|\w+=\S+)", m.group(0)))

def last_error(name):
    lines = [l for l in text(name).splitlines() if re.search(r"error|Error|FATAL|fatal|Traceback|abort", l)]
    return lines[-1][:150] if lines else ""

# ops_check
ops = text("ops_check")
m = re.search(r"^ops_check: (\d+) rows, (\d+) failed.*$", ops, re.M)
print("== ops_check (seed %s): %s" % (seed, m.group(0) if m else "no result line, " + why("ops_check")))
fails = [l for l in ops.splitlines() if l.rstrip().endswith("FAIL") or l.startswith("      ")]
for l in fails[:40]:
    print("  " + l[:160])
if len(fails) > 40:
    print("  ... %d more lines in ops_check.txt" % (len(fails) - 40))
if not m and ops:
    for l in ops.splitlines()[-8:]:
        print("  | " + l[:160])

# training speed
print()
print("== resnet50 training, batch %d, one GPU (dtrain --device cuda --synthetic vs PyTorch eager, channels_last)" % batch)
rows = [("O0 fp32", "dtrain-O0", "torch-fp32", "fp32, TF32 off"),
        ("O2 fp16", "dtrain-O2", "torch-fp16", "autocast fp16"),
        ("O3 fp16", "dtrain-O3", "torch-fp16", "autocast fp16"),
        ("O2 bf16", "dtrain-O2-bf16", "torch-bf16", "autocast bf16")]
hdr = "%-8s %12s %12s %7s  %-15s %10s %16s" % ("config", "dtrain img/s", "torch img/s", "ratio", "torch config",
                                                "dtrain MiB", "torch MiB")
print(hdr)
notes = []
for cfg, d, t, tcfg in rows:
    dv, how = dtrain_speed(d)
    tr = torch_result(t)
    tv = float(tr["img_s"]) if tr else None
    ratio = "%.2f" % (dv / tv) if dv and tv else "-"
    dmem = st.get(d, {}).get("peak", "-")
    tmem = "%s/%s" % (tr["peak_alloc_mib"], st.get(t, {}).get("peak", "-")) if tr else "-"
    print("%-8s %12s %12s %7s  %-15s %10s %16s" % (cfg, "%.1f" % dv if dv else "-", "%.1f" % tv if tv else "-",
                                                   ratio, tcfg, dmem, tmem))
    if dv is None or "own rate" in how:
        notes.append("%s: %s %s" % (d, how, last_error(d)))
    if tv is None:
        notes.append("%s: %s %s" % (t, why(t), last_error(t)))
print("(ratio: dtrain / PyTorch; dtrain img/s between its last two progress lines; MiB: the peak nvidia-smi saw "
      "in use, for PyTorch max_memory_allocated / nvidia-smi's peak)")
for n in sorted(set(notes)):
    print("note: " + n.strip())
tr = torch_result("torch-fp16") or torch_result("torch-bf16")
if tr:
    print("PyTorch %s, cuDNN %s, %s" % (tr.get("torch"), tr.get("cudnn"), tr.get("device", "").strip('"')))
print("stages: " + ", ".join("%s %s %ds" % (k, "ok" if v["rc"] == 0 else why(k), v["secs"]) for k, v in st.items()))
EOF
[ -s "$WORK/summary.txt" ] || echo "(the summary could not be made: python3 failed; see the stages' logs in $LOGS)" > "$WORK/summary.txt"
cp "$WORK/summary.txt" "$LOGS/summary.txt"
say "done in $(($(date +%s) - T0))s; logs in $LOGS"
echo
cat "$WORK/summary.txt"
rm -rf "$WORK"
exit "$OPS_RC"
