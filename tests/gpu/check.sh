#!/bin/bash
# check.sh: the one call on a lent GPU machine (tests/gpu/README): does the CUDA backend run, is every
# CUDA op right, and how fast does dtrain train resnet50 next to PyTorch. With --dry-run, the
# rehearsal of that call on a machine without a GPU.
#
#   tests/gpu/check.sh [BUILD_DIR]              on the GPU machine (BUILD_DIR: default build-gpu, made
#                                               here by tests/gpu/bundle.sh and carried; its programs
#                                               travel as PROGRAM.gz, unpacked in place first)
#   tests/gpu/check.sh --dry-run [BUILD_DIR]    here: everything but the GPU
#   tests/gpu/check.sh --only S1,S2 ...         only those stages (names below)
#
# Stages, in the order of what they teach (issue 37), each with its own time limit inside a budget of
# DT_CHECK_BUDGET seconds (default 360; the device call's limit 400, which with the machine's start
# leaves a second call of about 3 minutes inside the 15 minutes), none stopping the others; each
# prints its verdict when it ends:
#   machine     nvidia-smi, the C library, every bundled program's libraries resolved (ldd -r: also
#               functions missing from the CUDA wheels), dtrain --version (the CUDA, cuBLAS, cuDNN and
#               NCCL versions it was built with and finds)
#   ops_check   every op of the CUDA table against the CPU in fp32/fp16/bf16, then two training steps
#               of a model on both (tests/gpu/ops_check.c, the driver, and ops_check_<family>.c); a
#               failing op costs its row, not the run
#   dtrain-O2, torch-fp16  resnet50, batch DT_CHECK_BATCH (256), dtrain --device cuda --synthetic at O2
#               (fp16) against bench/torch_gpu_resnet50.py (PyTorch eager, channels_last, autocast)
#   nccl        a world-of-one NCCL communicator on the device: allreduce, broadcast, allgather,
#               barrier, each result checked (tests/gpu/nccl_one.c), with NCCL_DEBUG=INFO
#   memcheck    compute-sanitizer memcheck over ops_check --quick (out-of-bounds and misaligned
#               accesses in our kernels)
#   then, when time is left: dtrain-O2-bf16 and torch-bf16; dtrain-O0 and torch-fp32; dtrain-O2-nograph
#               (O2 with every op issued by the host, next to dtrain-O2's graphs: what they gain);
#               dtrain-O2-exhaustive (cuDNN's exhaustive search, next to dtrain-O2's bounded one);
#               dtrain-mobilenet_v2, torch-mobilenet_v2, dtrain-efficientnet_b0, torch-efficientnet_b0,
#               dtrain-vit_b_16, torch-vit_b_16 (the zoo's rows, O2 against autocast fp16; the rehearsal
#               runs vit_test, a small ViT at 32x32, for vit_b_16: ViT-B/16 takes 224x224 only, minutes
#               on the bundle's reference BLAS). A second call runs those left out: --only LIST.
#
# The comparison is fair: both upload the batch from ordinary host memory every step as uint8
# pixels and normalise it on the device (dtrain --synthetic does; the PyTorch script's --input host,
# its default), and both time 20 steps after 10 warm-up steps: dtrain's rate is read from the
# timestamps of its progress lines at steps 10 and 30 (-p 10 --max-steps 30), PyTorch's from its own
# clock around steps 11 to 30. cuDNN's algorithm search happens at planning, before step 1, and is
# printed per shape (dtrain's "cuDNN conv ... search" lines); the summary shows the slowest.
# Peak memory: the most nvidia-smi saw in use during the stage (CUDA context and caching allocators
# included, so comparable between the two), and PyTorch's own max_memory_allocated.
#
# The rehearsal (--dry-run) runs on the build machine what the device run runs, except the GPU:
#   - the programs are unpacked from the bundle's .gz files first, as on the device (one made
#     before the program was last built is refused);
#   - every bundled program is started inside a clean root file system (a user and mount namespace:
#     no root needed) that holds only the bundle, the C library and the CUDA libraries laid out as
#     PyTorch's wheels lay them out (site/nvidia/*/lib), so a library missing from the bundle, a
#     wrong RUNPATH or a glibc too new shows up here; without user namespaces, the library paths are
#     audited with the dynamic loader instead (said in the output);
#   - each stage's command line is printed and run as on the device, with overrides appended that
#     make it fit a CPU (getopt takes the last value): ops_check --list, nccl_one (it must skip for
#     want of a GPU), ops_check --quick --list, dtrain ... --device cpu --crop 32 -b 2 --max-steps 4
#     -p 1 and --graph but in the --no-graph stage (the CPU's graphs, so that the summary's graph line is
#     read as on CUDA), the PyTorch script ... --device cpu --size 32 -b 2 --warmup 1 --steps 2;
#   - the summary is made from those logs by the same tests/gpu/summary.py, which fails (one line
#     naming the stage) when a stage's output is not in the format it reads;
#   - the bundle's size is checked (tests/gpu/bundle.sh's limit).
#   It ends with "rehearsal: passed" (exit 0) or "rehearsal: FAILED: ..." (exit 1).
#
# Environment: DT_CHECK_BUDGET (seconds), DT_CHECK_SEED (ops_check's seed; default: the time,
# printed), DT_CHECK_BATCH (default 256); for the rehearsal DT_REHEARSAL_PYTHON (a python3 with
# torch), DT_REHEARSAL_LOGS (where the logs go), DT_REHEARSAL_NO_NAMESPACE=1 (the loader audit even
# where user namespaces work).
# Logs: $OUT (the device tool's folder that comes back: at most 8 files) or /tmp/dt-gpu-check:
# summary.txt (the table, printed last), stages.log (every stage's command and output, written as
# each stage ends, so it comes back even from a call stopped at its limit), ops_check.txt (every
# row), results (one line per stage: name, exit status, seconds, limit, peak MiB).
# Exit status on the device: ops_check's (0 every row passed, 1 a row failed, 2 the programs are
# missing or do not unpack, 124 timed out, other: it crashed); summary.py's verdicts are in summary.txt.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # a bash script, also when started as `sh script`
set -u

cd "$(dirname "$0")/../.." || exit 2
DRY=0
ONLY=
while [ $# -gt 0 ]; do
    case $1 in
    --dry-run) DRY=1 ;;
    --only)
        STAGES=machine,ops_check,nccl,memcheck,dtrain-O2,torch-fp16,dtrain-O0,torch-fp32,dtrain-O2-bf16,torch-bf16,dtrain-O2-nograph
        STAGES+=,dtrain-O2-exhaustive
        STAGES+=,dtrain-mobilenet_v2,torch-mobilenet_v2,dtrain-efficientnet_b0,torch-efficientnet_b0
        STAGES+=,dtrain-vit_b_16,torch-vit_b_16
        [ $# -ge 2 ] || { echo "check.sh: --only needs a list of stages ($STAGES)" >&2; exit 2; }
        for x in ${2//,/ }; do
            [[ ,$STAGES, == *",$x,"* ]] || { echo "check.sh: --only $2: no stage '$x' (stages: $STAGES)" >&2; exit 2; }
        done
        ONLY=",$2,"
        shift ;;
    -h | --help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    -*) echo "check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
B=${1:-build-gpu}
B=${B%/}
BUDGET=${DT_CHECK_BUDGET:-360}
SEED=${DT_CHECK_SEED:-$(date +%s)}
BATCH=${DT_CHECK_BATCH:-256}
WORK=$(mktemp -d /tmp/dt-gpu-check.XXXXXX)
# every stage's log goes to LOGS; what comes back from the device (at most 8 files) to BACK
LOGS=$WORK/logs
BACK=${OUT:-/tmp/dt-gpu-check}
[ "$DRY" = 1 ] && LOGS=${DT_REHEARSAL_LOGS:-$LOGS} BACK=$LOGS
mkdir -p "$LOGS" "$BACK"
: > "$BACK/stages.log"
T0=$(date +%s)
export PYTHONUNBUFFERED=1
trap 'rm -rf "$WORK"' EXIT

left() { echo $((BUDGET - ($(date +%s) - T0))); }
say() { echo "[check.sh +$(($(date +%s) - T0))s] $*"; }
wanted() { [ -z "$ONLY" ] || [[ $ONLY == *",$1,"* ]]; }
PROGS=(dtrain tests/gpu/ops_check tests/gpu/nccl_one)
REHEARSAL_FAIL=()
rehearsal_fail() { REHEARSAL_FAIL+=("$*"); say "rehearsal: FAILED: $*"; }

say "$([ "$DRY" = 1 ] && echo "rehearsal (--dry-run)" || echo "device run"): repository $(pwd), build $B," \
    "budget ${BUDGET}s, batch $BATCH, ops_check seed $SEED"
# The programs travel packed (PROGRAM.gz, tests/gpu/bundle.sh): each is unpacked in place first, over
# any copy a call before left on the machine, so that only what this call carried runs. Here (the
# rehearsal) a program newer than its .gz was built since the bundle was made: refused, not
# overwritten with the older one.
missing=0
for p in "${PROGS[@]}"; do
    gz=$B/$p.gz
    if [ ! -f "$gz" ]; then
        say "missing: $gz (make it with tests/gpu/bundle.sh and carry it)"
        missing=1
    elif [ "$DRY" = 1 ] && [ "$B/$p" -nt "$gz" ]; then
        say "stale: $gz is older than $B/$p (built since the bundle was made): make the bundle again"
        missing=1
    elif ! err=$(gzip -dc "$gz" 2>&1 > "$B/$p.unpacking"); then
        rm -f "$B/$p.unpacking"
        say "corrupt: $gz does not unpack ($(echo "$err" | grep -m1 .)): make the bundle again and carry it"
        missing=1
    else # its time the .gz's, so that make, here, sees the program as built when the bundle was made
        chmod 755 "$B/$p.unpacking" && touch -r "$gz" "$B/$p.unpacking" && mv -f "$B/$p.unpacking" "$B/$p" ||
            { say "cannot unpack $gz into $B/$p"; missing=1; }
    fi
done
[ -d "$B/lib" ] || { say "missing: $B/lib (tests/gpu/bundle.sh makes it)"; missing=1; }

# --- where the programs run: RUN prefixes each command; P is the repository root as they see it -----
# On the device: here, P=. ; the CUDA libraries are PyTorch's wheels' (site-packages/nvidia/*/lib).
# In the rehearsal: a clean root R (below), P=/repo; the CUDA libraries are this machine's toolkit's,
# mounted into R as R/site/nvidia/{cu13,cudnn,nccl}/lib.
RUN=()
P=.
SYSLIB_DIR= # the rehearsal root's system library folder (for "does the system have X")
if [ "$DRY" = 0 ]; then
    SITE=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
    [ -n "$SITE" ] || say "no PyTorch CUDA wheels found through python3 (import nvidia): the CUDA libraries must come from elsewhere"
    SITE_IN=$SITE
else
    CUDA=${CUDA_HOME:-/usr/local/cuda}
    MA=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    R=$WORK/root
    SITE=$R/site
    SITE_IN=/site
    mkdir -p "$R"/{repo,tmp,proc,dev,sys,lib64,etc,"lib/$MA"} "$WORK/roottmp"
    # what R gets, "source target" per line: the C library, the bundle, the CUDA libraries
    MOUNTS=$WORK/mounts
    : > "$MOUNTS"
    # the C library, and zlib (cuDNN needs it; Debian's and Ubuntu's zlib1g is of Priority required)
    for so in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 libutil.so.1 libz.so.1; do
        [ -e "/lib/$MA/$so" ] && echo "/lib/$MA/$so /lib/$MA/$so" >> "$MOUNTS"
    done
    echo "/lib64/ld-linux-x86-64.so.2 /lib64/ld-linux-x86-64.so.2" >> "$MOUNTS"
    echo "$(command -v env) /usr/bin/env" >> "$MOUNTS" # to set the loader's variables inside (the C library only)
    for p in "${PROGS[@]}"; do echo "$(pwd)/$B/$p /repo/$B/$p" >> "$MOUNTS"; done
    [ -d "$B/lib" ] && echo "$(pwd)/$B/lib /repo/$B/lib" >> "$MOUNTS"
    echo "$WORK/roottmp /tmp" >> "$MOUNTS"
    for f in "$CUDA"/lib64/libcudart.so.* "$CUDA"/lib64/libcublas.so.* "$CUDA"/lib64/libcublasLt.so.* \
        "$CUDA"/lib64/libnvrtc*.so.* "$CUDA"/lib64/libcudnn*.so.? "$CUDA"/lib64/libnccl.so.?; do
        [ -e "$f" ] || continue
        case $(basename "$f") in
        libcudnn*) pkg=cudnn ;; libnccl*) pkg=nccl ;; *) pkg=cu13 ;;
        esac
        echo "$(readlink -f "$f") /site/nvidia/$pkg/lib/$(basename "$f")" >> "$MOUNTS"
    done
    while read -r src dst; do # the mount points
        if [ -d "$src" ]; then mkdir -p "$R$dst"; else mkdir -p "$(dirname "$R$dst")" && : > "$R$dst"; fi
    done < "$MOUNTS"
    SYSLIB_DIR=$WORK/system # the root's system libraries, by soname (the audit below uses it too)
    mkdir -p "$SYSLIB_DIR"
    while read -r src dst; do
        case $dst in "/lib/$MA/"*) ln -sf "$src" "$SYSLIB_DIR/$(basename "$dst")" ;; esac
    done < "$MOUNTS"
    in_root() { # in_root CMD...: CMD (a path inside R) run inside R, in a new user and mount namespace
        unshare --user --map-root-user --mount -- bash -c '
            R=$1 MOUNTS=$2; shift 2
            while read -r src dst; do mount --bind "$src" "$R$dst" || exit 125; done < "$MOUNTS"
            for d in dev proc sys; do mount --rbind "/$d" "$R/$d" 2>/dev/null; done
            exec chroot "$R" "$@"' in_root "$R" "$MOUNTS" "$@"
    }
    if [ "${DT_REHEARSAL_NO_NAMESPACE:-0}" != 1 ] && in_root /lib64/ld-linux-x86-64.so.2 --version > /dev/null 2>&1; then
        RUN=(in_root)
        P=/repo
        say "clean root: $R (user and mount namespace): the C library, $B's programs and lib/, and" \
            "$CUDA's CUDA libraries as $SITE_IN/nvidia/*/lib; nothing else"
    else
        # no user namespaces here: the programs run in this system, and the loader's choices are audited
        say "no user namespaces here (unshare --user --mount failed): the programs run in this system;" \
            "each library they load is checked to come from $B/lib, the CUDA libraries or the C library"
        rm -rf "$R"
        SITE=$WORK/site
        SITE_IN=$SITE
        while read -r src dst; do
            case $dst in /site/*) mkdir -p "$(dirname "$WORK$dst")" && ln -sf "$src" "$WORK$dst" ;; esac
        done < "$MOUNTS"
    fi
fi

# --- the library path for our programs --------------------------------------------------------------
NVLIB=$(for d in "$SITE"/nvidia/*/lib; do [ -d "$d" ] && echo "$SITE_IN/nvidia/$(basename "$(dirname "$d")")/lib"; done | paste -sd:)
# the bundle's lib/fallback (libstdc++, libgcc_s, libgomp) only for those the system lacks, or has
# older than the programs need, so that a newer system copy is not shadowed by our older one
FALLBACK_HOST=$WORK/fallback
FALLBACK_IN=$([ ${#RUN[@]} -gt 0 ] && echo /tmp/fallback || echo "$FALLBACK_HOST")
[ ${#RUN[@]} -gt 0 ] && FALLBACK_HOST=$WORK/roottmp/fallback
mkdir -p "$FALLBACK_HOST"
system_lib() { # the system's file for soname $1, or nothing (in the rehearsal: the root's)
    if [ "$DRY" = 1 ]; then
        [ -e "$SYSLIB_DIR/$1" ] && echo "$SYSLIB_DIR/$1"
    else
        ldconfig -p 2>/dev/null | awk -v so="$1" '$1 == so && /x86-64/ {print $NF; exit}'
    fi
}
newest_needed() { # newest_needed PREFIX: the newest PREFIX_x.y.z version our programs ask for
    for p in "${PROGS[@]}"; do [ -x "$B/$p" ] && grep -aoE "$1_[0-9]+(\.[0-9]+)+" "$B/$p"; done |
        sort -u -V | tail -1
}
for f in "$B"/lib/fallback/*; do
    [ -e "$f" ] || continue
    so=$(basename "$f")
    sys=$(system_lib "$so")
    why=
    if [ -z "$sys" ]; then
        why="the system has none"
    elif [ "$so" = libstdc++.so.6 ] && v=$(newest_needed GLIBCXX) && [ -n "$v" ] && ! grep -aq "$v" "$sys"; then
        why="the system's ($sys) lacks $v"
    fi
    if [ -n "$why" ]; then
        ln -sf "$([ "$P" = . ] && pwd || echo "$P")/$B/lib/fallback/$so" "$FALLBACK_HOST/$so"
        say "using the bundle's $so ($why)"
    fi
done
DT_LD="$P/$B/lib${NVLIB:+:$NVLIB}:$FALLBACK_IN"
[ "$DRY" = 0 ] && DT_LD="$DT_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "library path for our programs: LD_LIBRARY_PATH=$DT_LD"
# each of our commands: env LD_LIBRARY_PATH=... PROGRAM ARGS (in the rehearsal's root: its env, mounted)
if [ ${#RUN[@]} -gt 0 ]; then
    ours() { "${RUN[@]}" /usr/bin/env LD_LIBRARY_PATH="$DT_LD" "$@"; }
else
    ours() { env LD_LIBRARY_PATH="$DT_LD" "$@"; }
fi

# --- the machine stage ------------------------------------------------------------------------------------
machine() {
    local rc=0 p out
    if [ "$DRY" = 0 ]; then
        nvidia-smi -L || { echo "machine: nvidia-smi failed"; rc=1; }
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
        python3 -m pip show nvidia-cudnn-cu13 nvidia-cublas nvidia-cuda-runtime nvidia-nccl-cu13 2>/dev/null |
            awk '/^Name:/ {n = $2} /^Version:/ {printf "wheel %s %s\n", n, $2}'
        python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    fi
    local have need
    have=$(ldd --version 2>&1 | head -1 | grep -oE '[0-9]+\.[0-9]+$')
    need=$(newest_needed GLIBC)
    echo "C library: glibc ${have:-unknown} here; our programs need ${need:-no versioned symbol} at most"
    if [ -n "$have" ] && [ -n "$need" ] && [ "$(printf '%s\n' "GLIBC_$have" "$need" | sort -V | tail -1)" != "GLIBC_$have" ]; then
        echo "machine: our programs need $need, this system's C library is $have: build the bundle on an older system"
        rc=1
    fi
    for p in "${PROGS[@]}"; do
        [ -x "$B/$p" ] || continue
        # ldd -r: every library found, and every function bound (a CUDA wheel older than our headers)
        out=$(ours LD_TRACE_LOADED_OBJECTS=1 LD_WARN=yes LD_BIND_NOW=yes /lib64/ld-linux-x86-64.so.2 "$P/$B/$p" 2>&1)
        echo "$P/$B/$p:"
        echo "$out" | sed 's/^/  /'
        if echo "$out" | grep -qE "not found|undefined symbol|error while loading"; then
            echo "machine: $B/$p cannot start here: $(echo "$out" | grep -E "not found|undefined symbol|error while loading" | head -3 | tr -s ' \t\n' ' ')"
            rc=1
        fi
        if [ ${#RUN[@]} -eq 0 ] && [ "$DRY" = 1 ]; then # the audit: nothing from this system but the C library
            local bad
            bad=$(echo "$out" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r so path; do
                case $path in
                "$(pwd)/$B/lib/"* | "$B/lib/"* | "$SITE"/* | "$FALLBACK_HOST"/* | "$P/$B/lib/"*) ;;
                *) [ -e "$SYSLIB_DIR/$so" ] || echo "$so from $path" ;; # the root's system libraries only
                esac
            done)
            [ -z "$bad" ] || { echo "machine: $B/$p would load from this system, not the bundle: $(echo $bad)"; rc=1; }
        fi
    done
    out=$(ours "$P/$B/dtrain" --version 2>&1) || { echo "machine: dtrain --version failed"; rc=1; }
    echo "$out"
    return $rc
}

# --- stages ------------------------------------------------------------------------------------------------
RESULTS=$LOGS/results # one line per stage: name rc seconds limit peak_mib (summary.py reads it)
: > "$RESULTS"
mem_start() {
    MEMPID=
    [ "$DRY" = 1 ] && return
    MEMLOG=$WORK/mem.$1
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > "$MEMLOG" 2>/dev/null &
    MEMPID=$!
}
mem_stop() {
    [ -n "$MEMPID" ] || { echo -; return; }
    kill "$MEMPID" 2>/dev/null
    wait "$MEMPID" 2>/dev/null
    local peak
    peak=$(tr -dc '0-9\n' < "$MEMLOG" | sort -n | tail -1)
    echo "${peak:--}"
}

# the line of a failed stage's log that says why: its own "NAME: ..." line, else the last one
why_line() { # why_line NAME
    { grep -m1 "^$1: " "$LOGS/$1.log" || grep -v '^\s*$' "$LOGS/$1.log" | tail -1; } | cut -c1-240
}

# run_limited LIMIT CMD...: like timeout(1), for shell functions too (CMD in its own process group,
# all of it stopped at the limit: TERM, then KILL 5 s later); 124 when stopped
run_limited() {
    local limit=$1 pid wd rc
    shift
    set -m
    "$@" &
    pid=$!
    set +m
    (sleep "$limit"; kill -TERM -- -"$pid" 2> /dev/null && { sleep 5; kill -KILL -- -"$pid" 2> /dev/null; }) > /dev/null 2>&1 &
    wd=$!
    wait "$pid"
    rc=$?
    pkill -P "$wd" 2> /dev/null
    kill "$wd" 2> /dev/null
    wait "$wd" 2> /dev/null
    { [ "$rc" -eq 143 ] || [ "$rc" -eq 137 ]; } && rc=124
    return "$rc"
}

# stage NAME CAP RESERVE CMD...: CMD for at most min(CAP, time left - RESERVE) seconds (RESERVE keeps
# time for the stages after it), its output into $LOGS/NAME.log and stages.log; one verdict line
stage() {
    local name=$1 cap=$2 reserve=$3
    shift 3
    wanted "$name" || return 0
    local log=$LOGS/$name.log limit rc t peak
    limit=$(($(left) - reserve))
    [ "$limit" -gt "$cap" ] && limit=$cap
    if [ "$limit" -lt 10 ]; then
        say "$name: not run (${limit}s left for it)"
        echo "$name: not run (no time left)" > "$log"
        echo "$name 125 0 $limit -" >> "$RESULTS"
        return 125
    fi
    say "$name (limit ${limit}s): $*"
    t=$(date +%s)
    mem_start "$name"
    run_limited "$limit" "$@" > "$log" 2>&1
    rc=$?
    peak=$(mem_stop)
    t=$(($(date +%s) - t))
    echo "$name $rc $t $limit $peak" >> "$RESULTS"
    { echo "=== $name: exit $rc, ${t}s (limit ${limit}s), GPU memory peak ${peak} MiB: $*"; cat "$log"; echo; } \
        >> "$BACK/stages.log"
    local verdict="exit $rc"
    case $rc in 0) verdict=ok ;; 77) verdict="skipped (exit 77)" ;; 124) verdict="TIMED OUT after ${limit}s" ;; esac
    say "$name: $verdict, ${t}s, GPU memory peak ${peak} MiB$([ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] &&
        echo "; $(why_line "$name")")"
    return "$rc"
}

# the device's command lines; in the rehearsal the same, then overrides that fit a CPU
D_OPS=("$P/$B/tests/gpu/ops_check" --seed "$SEED")
D_QUICK=("$P/$B/tests/gpu/ops_check" --quick --seed "$SEED")
D_DTRAIN=("$P/$B/dtrain" --device cuda --synthetic -a resnet50 -b "$BATCH" --max-steps 30 -p 10)
D_TORCH=(python3 bench/torch_gpu_resnet50.py -b "$BATCH" --warmup 10 --steps 20)
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
    /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
if [ "$DRY" = 1 ]; then
    X_OPS=(--list)
    # rehearse.sh's planted fault (DT_OPS_CHECK_FAULT=OP[:MODE], tests/gpu/ops_check.c): the ops_check
    # stage then checks the CPU's table against the CPU (--backend cpu --quick), so that its flow
    # (the rows, the fault costing its rows, the processes, the list of failing rows, the last line)
    # runs here as it would on the device
    [ -n "${DT_OPS_CHECK_FAULT:-}" ] && X_OPS=(--backend cpu --quick)
    RUN_BATCH=2
    X_DTRAIN=(--device cpu --crop 32 -b "$RUN_BATCH" --max-steps 4 -p 1 --threads 2)
    X_TORCH=(--device cpu --size 32 -b "$RUN_BATCH" --warmup 1 --steps 2)
    # PyTorch is not in the bundle (the GPU machine has its own): a python3 here that has it
    for py in ${DT_REHEARSAL_PYTHON:-} python3 /usr/bin/python3; do
        "$py" -c 'import torch, torchvision' 2> /dev/null && { D_TORCH[0]=$py; break; }
    done
    [ "${D_TORCH[0]}" != python3 ] || "${D_TORCH[0]}" -c 'import torch' 2> /dev/null ||
        rehearsal_fail "no python3 with torch and torchvision here (Debian: python3-torch python3-torchvision; or set DT_REHEARSAL_PYTHON)"
    # its CPU autocast free of an ONEDNN_MAX_CPU_ISA below AVX-512 bf16 (an AVX2 emulation), which hides
    # oneDNN's bf16 kernels from PyTorch's copy while PyTorch's own check still picks bf16: its
    # convolution fails to make a primitive. The rehearsal checks the check's flow, not the kernels.
    D_TORCH=(env -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA "${D_TORCH[@]}")
    RESDIR=$([ ${#RUN[@]} -gt 0 ] && echo /tmp || echo "$WORK/roottmp")
else
    X_OPS=() X_DTRAIN=() X_TORCH=()
    RUN_BATCH=$BATCH
    RESDIR=$WORK
fi
# memcheck's options. --report-api-errors no: cuDNN and cuBLAS probe the device with calls they
# expect to fail, and handle; the sanitizer's default (explicit) counts each as an error, which would
# fail the stage with no bug of ours. Our own calls need no sanitizer for that: the backend checks
# every CUDA, cuDNN and cuBLAS status it gets (FATAL_CUDA and the like), and ops_check reports a
# failing one on its row (the call and its status) and exits 1. So the errors counted here are the
# device's: out-of-bounds and misaligned accesses, in our kernels (ops_check --quick) as in the
# libraries'. --target-processes all: ops_check runs its rows in child processes.
SANITIZER_OPTS=(--tool memcheck --report-api-errors no --target-processes all --error-exitcode 3 --print-limit 20)
memcheck() {
    if [ "$DRY" = 1 ]; then
        echo "compute-sanitizer: $([ -n "$SANITIZER" ] && echo "$SANITIZER (not run without a GPU)" ||
            echo "not on this machine (it is on the GPU machine's image)")"
        echo "its command on the device: compute-sanitizer ${SANITIZER_OPTS[*]} ${D_QUICK[*]}"
        ours "${D_QUICK[@]}" --list
        return
    fi
    [ -n "$SANITIZER" ] || { echo "memcheck: no compute-sanitizer on this machine"; return 2; }
    LD_LIBRARY_PATH="$DT_LD" "$SANITIZER" "${SANITIZER_OPTS[@]}" "${D_QUICK[@]}"
}
dtrain_run() { # dtrain_run NAME CAP RESERVE EXTRA... (an EXTRA DT_X=VALUE is dtrain's environment)
    local name=$1 cap=$2 reserve=$3
    shift 3
    local envs=() args=() x # DT_PROFILE=last: the stage's environment, before the program
    for x in "$@"; do
        if [[ $x =~ ^DT_[A-Z0-9_]*= ]]; then envs+=("$x"); else args+=("$x"); fi
    done
    set -- "${args[@]}"
    rm -rf "$WORK/roottmp/r.$name" "$WORK/r.$name"
    # the rehearsal's CPU run takes CUDA's default, graphs, unless the stage turns them off
    local xg=()
    [ "$DRY" = 1 ] && [[ " $* " != *" --no-graph "* ]] && xg=(--graph)
    # --cudnn-search is refused without --device cuda (a flag without effect), so the rehearsal's CPU
    # run goes without it; the device's command line, with it, is checked first by the bundled dtrain
    # (a CUDA build) with --print-lr 1: every check a run makes, and no device touched
    local cmd=("${D_DTRAIN[@]}" "$@") i
    if [ "$DRY" = 1 ] && [[ " ${cmd[*]} " == *" --cudnn-search"[\ =]* ]] && wanted "$name"; then
        ours "${cmd[@]}" --print-lr 1 > /dev/null 2> "$WORK/$name.flags" ||
            rehearsal_fail "$name: the bundled dtrain refuses the device's command line: $(tail -1 "$WORK/$name.flags")"
        set --
        for ((i = 0; i < ${#cmd[@]}; i++)); do
            case ${cmd[i]} in
                --cudnn-search) i=$((i + 1)) ;;
                --cudnn-search=*) ;;
                *) set -- "$@" "${cmd[i]}" ;;
            esac
        done
        cmd=("$@")
        say "$name: the device's --cudnn-search is checked (dtrain --print-lr) and left out of the CPU run"
    fi
    stage "$name" "$cap" "$reserve" ours "${envs[@]}" "${cmd[@]}" --results "$RESDIR/r.$name" "${X_DTRAIN[@]}" "${xg[@]}" \
        "${X_LAST[@]}"
    rm -rf "$WORK/roottmp/r.$name" "$WORK/r.$name" # its checkpoint
}
torch_run() { # torch_run NAME CAP RESERVE EXTRA...
    local name=$1 cap=$2 reserve=$3
    shift 3
    stage "$name" "$cap" "$reserve" "${D_TORCH[@]}" "$@" "${X_TORCH[@]}" "${X_LAST_TORCH[@]}"
}
X_LAST=() X_LAST_TORCH=() # a stage's own overrides of the rehearsal's (ViT's model)
# the dtrain stages' cuDNN algorithm search: bounded, at most 0.5 s per convolution shape (doc/dtrain.1,
# --cudnn-search), so that planning cannot eat a stage's cap and every stage prints a throughput;
# dtrain-O2-exhaustive, when time is left, shows what the exhaustive search (PyTorch's cudnn.benchmark)
# would gain
SEARCH=(--cudnn-search bounded:0.5)
# dtrain-O2's profiled step (DT_PROFILE=last, doc/dtrain.1): a 31st step after the 20 timed (10 to 30),
# issued op by op with device timers around each kind of work; summary.py shows its top kinds and
# times only the steps before it (in the rehearsal: step 4 profiled, steps 1 to 3 timed)
O2_EXTRA=(DT_PROFILE=last --max-steps 31 "${SEARCH[@]}")

if [ "$missing" = 0 ]; then
    # The order that teaches most first (issue 37): does the device run our code at all (machine), is
    # every op right (ops_check), how fast is the main path (dtrain O2 fp16 next to PyTorch's autocast
    # fp16), does NCCL start, do our kernels stay in bounds (memcheck); then bf16, then the O0/fp32
    # pair, what the graphs gain and the zoo, as time allows. name, cap, reserve (the time kept for the
    # stages after it): in the default budget (DT_CHECK_BUDGET, 360 s) the first six always get their
    # caps: 20 + 60 + 80 + 35 + 20 + 40 = 255 s, and bf16's pair fits after them.
    stage machine 20 235 machine
    stage ops_check 60 175 ours "${D_OPS[@]}" "${X_OPS[@]}"
    OPS_RC=$?
    wanted ops_check && cp "$LOGS/ops_check.log" "$BACK/ops_check.txt"
    dtrain_run dtrain-O2 80 95 --opt-level O2 "${O2_EXTRA[@]}"
    torch_run torch-fp16 35 60
    # NCCL_DEBUG=INFO: on a failure its lines say which transport, device or library version failed
    # (summary.py shows them only then); a world of one takes a second either way
    stage nccl 20 40 ours NCCL_DEBUG=INFO "$P/$B/tests/gpu/nccl_one"
    stage memcheck 40 0 memcheck
    # bf16 only with time for both
    if [ "$(left)" -ge 70 ] || [ "$DRY" = 1 ]; then
        dtrain_run dtrain-O2-bf16 45 25 --opt-level O2 --precision bf16 "${SEARCH[@]}"
        torch_run torch-bf16 40 0 --bf16
    else
        say "dtrain-O2-bf16, torch-bf16: not run ($(left)s left; a second call: --only dtrain-O2-bf16,torch-bf16)"
    fi
    # fp32 throughout: the slowest searches and steps, the least taught
    if [ "$(left)" -ge 70 ] || [ "$DRY" = 1 ]; then
        dtrain_run dtrain-O0 45 35 --opt-level O0 "${SEARCH[@]}"
        torch_run torch-fp32 35 0 --fp32
    else
        say "dtrain-O0, torch-fp32: not run ($(left)s left; a second call: --only dtrain-O0,torch-fp32)"
    fi
    # what the graphs gain: O2 with every op issued (a second call: --only dtrain-O2-nograph,torch-fp16)
    if [ "$(left)" -ge 50 ] || [ "$DRY" = 1 ]; then
        dtrain_run dtrain-O2-nograph 45 0 --opt-level O2 --no-graph "${SEARCH[@]}"
    else
        say "dtrain-O2-nograph: not run ($(left)s left)"
    fi
    # what the exhaustive search gains over the bounded one (a second call: --only dtrain-O2-exhaustive,dtrain-O2)
    if [ "$(left)" -ge 80 ] || [ "$DRY" = 1 ]; then
        dtrain_run dtrain-O2-exhaustive 75 0 --opt-level O2 "${SEARCH[@]}" --cudnn-search exhaustive
    else
        say "dtrain-O2-exhaustive: not run ($(left)s left)"
    fi
    # the zoo (issue 22): mobilenet_v2, efficientnet_b0 and vit_b_16 at O2 next to autocast fp16, when time
    # is left (a second call: --only dtrain-mobilenet_v2,torch-mobilenet_v2,dtrain-efficientnet_b0,
    # torch-efficientnet_b0,dtrain-vit_b_16,torch-vit_b_16)
    # (the rehearsal's PyTorch runs them in fp32: torch 1.13's CPU autocast is bf16, and its ReLU6 has
    # no bf16 backward on the CPU)
    zx=()
    [ "$DRY" = 1 ] && zx=(--fp32)
    for zm in mobilenet_v2 efficientnet_b0 vit_b_16; do
        if [ "$(left)" -ge 70 ] || [ "$DRY" = 1 ]; then
            # ViT-B/16's position embedding fixes its input at 224x224, too slow for the rehearsal's CPU:
            # it runs vit_test (the same ops at 32x32) on both sides instead
            [ "$DRY" = 1 ] && [ "$zm" = vit_b_16 ] && X_LAST=(-a vit_test) X_LAST_TORCH=(-a vit_test)
            dtrain_run "dtrain-$zm" 40 0 --opt-level O2 -a "$zm" "${SEARCH[@]}"
            torch_run "torch-$zm" 30 0 -a "$zm" "${zx[@]}"
            X_LAST=() X_LAST_TORCH=()
        else
            say "dtrain-$zm, torch-$zm: not run ($(left)s left)"
        fi
    done
else
    OPS_RC=2
fi
[ -n "${OPS_RC:-}" ] || OPS_RC=0

# --- the summary ---------------------------------------------------------------------------------------------
MODE=$([ "$DRY" = 1 ] && echo rehearsal || echo device)
python3 tests/gpu/summary.py --mode "$MODE" --logs "$LOGS" --batch "$BATCH" --run-batch "$RUN_BATCH" --seed "$SEED" > "$LOGS/summary.txt" 2> "$WORK/summary.err"
SUM_RC=$?
[ -s "$LOGS/summary.txt" ] || echo "(no summary: tests/gpu/summary.py failed: $(tail -1 "$WORK/summary.err"))" > "$LOGS/summary.txt"
cat "$WORK/summary.err" >> "$LOGS/summary.txt"
[ "$BACK" = "$LOGS" ] || cp "$LOGS/summary.txt" "$LOGS/results" "$BACK/"
say "done in $(($(date +%s) - T0))s; logs in $BACK"
echo
cat "$LOGS/summary.txt"

if [ "$DRY" = 0 ]; then
    exit "$OPS_RC"
fi
# --- the rehearsal's verdict ----------------------------------------------------------------------------------
[ "$missing" = 0 ] || rehearsal_fail "the bundle is incomplete (see the missing lines above)"
while read -r name rc _; do
    case $name:$rc in
    nccl:77) grep -q '^SKIP: no CUDA device' "$LOGS/nccl.log" || rehearsal_fail "nccl: exit 77 without its SKIP line" ;;
    nccl:*) rehearsal_fail "nccl: exit $rc (it must start and skip for want of a GPU: $(tail -1 "$LOGS/nccl.log"))" ;;
    *:0) ;;
    *) rehearsal_fail "$name: exit $rc: $(why_line "$name")" ;;
    esac
done < "$RESULTS"
[ "$SUM_RC" = 0 ] || rehearsal_fail "tests/gpu/summary.py: $(grep -E '^FORMAT|^summary' "$WORK/summary.err" | head -3 | tr '\n' ' ')"
if [ -z "$ONLY" ] && [ "$missing" = 0 ]; then # the bundle's size, by bundle.sh's own measure and limit
    bash tests/gpu/bundle.sh --size "$B" || rehearsal_fail "$B: the bundle and the working tree are too large to carry"
fi
if [ ${#REHEARSAL_FAIL[@]} -eq 0 ]; then
    echo "rehearsal: passed"
    exit 0
fi
echo "rehearsal: FAILED: ${REHEARSAL_FAIL[0]}$([ ${#REHEARSAL_FAIL[@]} -gt 1 ] && echo " (and $((${#REHEARSAL_FAIL[@]} - 1)) more above)")"
exit 1
