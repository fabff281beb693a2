#!/bin/sh
# torchrun.sh: a torchrun (PyTorch env://) launch is never ignored (libdt/launch.c, rdzv.c). Ranks come
# from RANK, WORLD_SIZE and LOCAL_RANK, and meet at the rendezvous at MASTER_ADDR:MASTER_PORT, which
# carries a 128-byte id (an NCCL unique id's size). Its failures are one line each, within the
# deadline: the port in use, nothing listening, a listener that never answers, world sizes that
# differ, a rank twice. Then Debian's torchrun (python3-torch) itself starts 2 ranks of rank_probe
# (id through the rendezvous), and 2 CPU ranks of dtrain: both stop with the one line that says to use
# mpirun or srun, exit 2; neither trains alone.
. "$top_srcdir/tests/common.sh"
probe="$top_builddir/tests/libdt/rank_probe"

# a port nothing listens on (nor on the next one: torchrun's rendezvous may take it), from this
# shell's pid so that tests running at once differ
port=$((20000 + $$ % 20000))
while ss -ltn 2>/dev/null | grep -Eq ":($port|$((port + 1)))\b"; do port=$((port + 2)); done

# rank R of W by hand, as torchrun would start it, through the rank_probe (DT_TIMEOUT: the deadline)
by_hand() { env RANK=$1 WORLD_SIZE=$2 LOCAL_RANK=$1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DT_TIMEOUT=$3 "$probe"; }
# the same in the background, output into file OUT; $! is then the rank_probe's own pid (env execs it)
by_hand_bg() {
  env RANK=$1 WORLD_SIZE=$2 LOCAL_RANK=$1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DT_TIMEOUT=$3 "$probe" > "$4" 2>&1 &
}

# three ranks by hand: each once, the id intact, all on this node
for r in 1 2; do by_hand_bg $r 3 20 "$DT_TMP/out.$r"; done
expect_status 0 by_hand 0 3 20
wait
cat "$DT_TMP/out" "$DT_TMP/out.1" "$DT_TMP/out.2" | grep '^rank' | sort > "$DT_TMP/lines"; cat "$DT_TMP/lines"
[ "$(grep -c "size 3 local ./3 node 0 .* id OK kind torchrun" "$DT_TMP/lines")" -eq 3 ] || fail "3 ranks of 3, id OK"
[ "$(awk '{print $2}' "$DT_TMP/lines" | tr '\n' ' ')" = "0 1 2 " ] || fail "ranks are not 0, 1, 2"
pass "3 ranks by RANK/WORLD_SIZE/LOCAL_RANK meet at MASTER_ADDR:MASTER_PORT; the id reaches each"

# within: the run took at most S seconds
start() { t0=$(date +%s); }
within() { took=$(( $(date +%s) - t0 )); [ "$took" -le "$1" ] || fail "$2: took $took s, deadline $1"; }

# the port in use: a rank 0 waiting for a world of 2 holds it; a second rank 0 cannot listen
by_hand_bg 0 2 10 "$DT_TMP/holder"
holder=$!
sleep 0.5
start
expect_status 1 by_hand 0 2 3
within 2 "port in use"
cat "$DT_TMP/err"
grep -q "cannot listen on port $port .*the port is in use on this node.*torchrun --master_port" "$DT_TMP/err" ||
  fail "port in use: no line naming it"
[ "$(grep -c . "$DT_TMP/err")" -eq 1 ] || fail "port in use: one line expected"
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
pass "port $port in use: rank 0 says so at once, naming the port and what to do"

# no rank 0: connection refused until the deadline, then one line naming the address
start
expect_status 1 by_hand 1 2 2
within 4 "nothing listens"
cat "$DT_TMP/err"
grep -q "no rank 0 at 127.0.0.1:$port within 2 s (connection refused: nothing listens there)" "$DT_TMP/err" ||
  fail "no rank 0: no line naming 127.0.0.1:$port"
pass "nothing listens at the master: one line after the 2 s deadline"

# world sizes that differ, and a rank twice: both sides say it, at once
by_hand_bg 0 2 10 "$DT_TMP/r0"
r0=$!
sleep 0.3
start
expect_status 1 by_hand 1 3 10
set +e; wait $r0; rc0=$?; set -e
within 3 "world sizes differ"
cat "$DT_TMP/err" "$DT_TMP/r0"
[ "$rc0" -eq 1 ] || fail "world sizes differ: rank 0 exited $rc0"
grep -q "rank 0 has a world of 2 ranks, this rank 1 has WORLD_SIZE=3" "$DT_TMP/err" || fail "rank 1 did not say it"
grep -q "rank 1 (.*) has WORLD_SIZE=3, rank 0 has 2" "$DT_TMP/r0" || fail "rank 0 did not say it"
pass "WORLD_SIZE 2 against 3: both ranks name the sizes"

by_hand_bg 0 3 10 "$DT_TMP/r0"
r0=$!
by_hand_bg 1 3 10 "$DT_TMP/r1"
r1=$!
sleep 0.5
expect_status 1 by_hand 1 3 10
set +e; wait $r0; rc0=$?; wait $r1; set -e
cat "$DT_TMP/err" "$DT_TMP/r0"
[ "$rc0" -eq 1 ] || fail "rank twice: rank 0 exited $rc0"
grep -q "rank 0 already has a rank 1: every process of a launch needs its own RANK" "$DT_TMP/err" ||
  fail "the second rank 1 did not say it"
grep -q "rank 1 came twice" "$DT_TMP/r0" || fail "rank 0 did not say it"
pass "RANK=1 twice: refused on both sides"

# a master that never answers: something listens at the port but says nothing (needs python3)
py=${DT_PYTHON_TORCH:-$(command -v python3 || true)}
if [ -n "$py" ]; then
  "$py" -c "import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $port)); s.listen(); print('up', flush=True); time.sleep(15)" > "$DT_TMP/silent" &
  silent=$!
  k=0; while ! grep -q up "$DT_TMP/silent" && [ $k -lt 50 ]; do sleep 0.1; k=$((k + 1)); done
  start
  expect_status 1 by_hand 1 2 2
  within 4 "silent master"
  cat "$DT_TMP/err"
  grep -q "127.0.0.1:$port took the connection but never answered within 2 s: that is not a dtrain rank 0" \
    "$DT_TMP/err" || fail "silent master: no line naming it"
  # dtrain itself: its --comm-timeout is the rendezvous's deadline
  start
  expect_status 1 env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$DTRAIN" --synthetic --arch resnet8 -b 8 --max-steps 1 --comm-timeout 2
  within 4 "dtrain, silent master"
  grep -q "never answered within 2 s" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "dtrain: no line"; }
  kill "$silent" 2>/dev/null || true
  wait "$silent" 2>/dev/null || true
  pass "a master that listens and never answers: one line after the deadline (rank_probe and dtrain --comm-timeout 2)"
fi

# torchrun itself (Debian's python3-torch). Its 1.13 spells --no_python, and under Python 3.11 its
# default --redirects/--tee of 0 fails to parse (an IntFlag change): -r 1 -t 1 avoids that.
[ -n "$py" ] && "$py" -c "import torch.distributed.run" 2>/dev/null ||
  skip "no python3 with torch for torchrun (Debian: python3-torch); the rendezvous itself passed above"
expect_status 0 timeout 60 "$py" -m torch.distributed.run --nproc_per_node=2 --master_port=$port --monitor_interval=0.5 \
  -r 1 -t 1 --no_python "$probe"
grep '^\[default' "$DT_TMP/out" | sort > "$DT_TMP/lines"; cat "$DT_TMP/lines"
[ "$(grep -c "size 2 local ./2 node 0 .* id OK kind torchrun" "$DT_TMP/lines")" -eq 2 ] ||
  { cat "$DT_TMP/err"; fail "torchrun: 2 ranks of 2 with the id"; }
grep -q "launch: torchrun, 2 ranks, 2 on this node, rendezvous at 127.0.0.1:$((port + 1)) (MASTER_PORT + 1)" \
  "$DT_TMP/err" || fail "torchrun: rank 0's launch line (its own store holds MASTER_PORT: the next port)"
pass "torchrun --nproc_per_node=2: ranks 0 and 1, the id through the rendezvous at MASTER_PORT + 1"

expect_status 0 timeout 60 "$py" -m torch.distributed.launch --use_env --nproc_per_node=2 --master_port=$port \
  --monitor_interval=0.5 -r 1 -t 1 --no_python "$probe"
[ "$(grep -c "size 2 local ./2 node 0 .* id OK kind torchrun" "$DT_TMP/out")" -eq 2 ] ||
  { cat "$DT_TMP/out" "$DT_TMP/err"; fail "torch.distributed.launch --use_env: 2 ranks of 2 with the id"; }
pass "python3 -m torch.distributed.launch --use_env: the same"

# 2 CPU ranks of dtrain: each stops with the one line, exit 2; no step is taken
set +e
timeout 60 sh -c "exec \"$py\" -m torch.distributed.run --nproc_per_node=2 --master_port=$port --monitor_interval=0.5 \
  -r 1 -t 1 --no_python \"$DTRAIN\" --synthetic --arch resnet8 -b 8 --max-steps 2 --comm-timeout 30" \
  > "$DT_TMP/out" 2> "$DT_TMP/err"
rc=$?
set -e
grep "rank\|exitcode" "$DT_TMP/err" | head -20
[ "$rc" -ne 0 ] || fail "torchrun exited 0: the CPU ranks were not refused"
if grep -q "single process\|epoch 0 \[" "$DT_TMP/out" "$DT_TMP/err"; then fail "a rank trained alone"; fi
for r in 0 1; do
  [ "$(grep -c "\[rank $r/2 .*error: 2 CPU ranks started by torchrun: .*run mpirun -np 2 dtrain .* or srun --mpi=pmix" \
    "$DT_TMP/err")" -eq 1 ] || fail "rank $r: not the one line saying to use mpirun or srun"
done
grep -q "exitcode *: 2" "$DT_TMP/err" || fail "the ranks did not exit 2"
pass "torchrun, 2 CPU ranks of dtrain: both meet, then each says to use mpirun or srun and exits 2"
