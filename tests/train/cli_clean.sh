#!/bin/sh
# cli_clean.sh: the command line's edges, for dtrain, dtpack and dtreport alike (cli.h).
# - Standard output that could not be written (>/dev/full) is one line and exit 1, never exit 0:
#   dtrain -e, --print-lr, --recipe list, --help, -V; dtpack verify, --help; dtreport --help.
# - getopt_long's refusals name the option as written, in one line without a control byte: a value
#   given to a flag that takes none (--nesterov=0), an abbreviation of several, an unknown option.
# - Numbers: decimal only (0x10, 0x1p3, inf, nan refused), 1e-310 is a number, 2^63 and 1e999 are
#   out of range; --opt in any case (torchvision's); two different --recipe flags refused.
# - A control character in any flag's value or operand is refused, shown escaped (\x0a); exit 2.
# - Every refusal of the command line is exit 2 (--nproc-per-node without a GPU, dtpack alone).
. "$top_srcdir/tests/common.sh"
DTPACK="$top_builddir/dtpack"
DTREPORT="$top_builddir/dtreport"
cd "$DT_TMP"
export OMP_NUM_THREADS=1
nl='
'
tab=$(printf '\t')
soh=$(printf '\001')

# one_line STATUS FRAGMENT CMD...: exits STATUS with exactly one line on stderr, holding FRAGMENT
# and no control byte
one_line() {
  st=$1; frag=$2; shift 2
  expect_status "$st" "$@"
  [ "$(wc -l < "$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "'$*': not one line on stderr"; }
  grep -qF -- "$frag" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "'$*': stderr does not say '$frag'"; }
  ! LC_ALL=C tr -d '\n' < "$DT_TMP/err" | LC_ALL=C grep -q '[[:cntrl:]]' ||
    { od -c "$DT_TMP/err" | head; fail "'$*': a control byte on stderr"; }
}

# --- standard output lost: one line, exit 1 -------------------------------------------------------
expect_status 0 "$DTRAIN" -a resnet8 --crop 32 -b 8 --synthetic --max-steps 2 --epochs 1 --results R
ckpt=$(ls R/*/checkpoint.h5)
full() { # full CMD...: CMD with stdout to /dev/full: exit 1, one line naming standard output
  set +e; "$@" >/dev/full 2>"$DT_TMP/err"; got=$?; set -e
  [ "$got" -eq 1 ] || { cat "$DT_TMP/err"; fail "'$*' >/dev/full exited $got, expected 1"; }
  # (the cause is named when the last write says it; an earlier failed write leaves only "write error")
  [ "$(grep -c "error: " "$DT_TMP/err")" -eq 1 ] &&
    grep -Eq "error: standard output: (No space left on device|write error)$" "$DT_TMP/err" ||
    { cat "$DT_TMP/err"; fail "'$*' >/dev/full: not one line naming standard output"; }
}
full "$DTRAIN" -e --resume "$ckpt" -a resnet8 --crop 32 -b 8 --synthetic
full "$DTRAIN" --print-lr 3 --epochs 2
full "$DTRAIN" --recipe list
full "$DTRAIN" --help
full "$DTRAIN" -V
# a tiny Fashion-MNIST-like set for dtpack verify: IDX files of 20 and 10 blank images
be32() { printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)))"; }
idx() { # idx PREFIX N
  { be32 2051; be32 "$2"; be32 28; be32 28; head -c $(($2 * 784)) /dev/zero; } > "idx/$1-images-idx3-ubyte"
  { be32 2049; be32 "$2"; i=0; while [ "$i" -lt "$2" ]; do printf "\\$(printf %03o $((i % 10)))"; i=$((i + 1)); done; } \
    > "idx/$1-labels-idx1-ubyte"
}
mkdir idx && idx train 20 && idx t10k 10
expect_status 0 "$DTPACK" fashion-mnist idx -o packed
full "$DTPACK" verify packed
full "$DTPACK" --help
full "$DTREPORT" --help
full "$DTREPORT" -V
expect_status 0 "$DTPACK" verify packed
grep -q "split val: 10 images" "$DT_TMP/out" || fail "dtpack verify: no report on stdout"
expect_status 0 "$DTRAIN" --recipe list
pass "standard output lost (>/dev/full): one line and exit 1 from dtrain, dtpack and dtreport"

# --- getopt_long's refusals, named as written ----------------------------------------------------
for f in --nesterov=0 --synthetic=1 --model-ema=yes --amp=O2 --help=1 --test-only=x; do
  one_line 2 "$f: the option takes no value (see dtrain --help)" "$DTRAIN" "$f"
done
one_line 2 '--synthetic=\x0a: the option takes no value' "$DTRAIN" "--synthetic=$nl"
one_line 2 "--nest=0: --nesterov takes no value" "$DTRAIN" --nest=0
one_line 2 "--help=1: the option takes no value (see dtreport --help)" "$DTREPORT" --help=1
one_line 2 "--strict=1: the option takes no value (see dtpack --help)" "$DTPACK" --strict=1
one_line 2 "--n: ambiguous option: it could be " "$DTRAIN" --n
grep -q -- "--nesterov" "$DT_TMP/err" && grep -q -- "--nproc-per-node" "$DT_TMP/err" || fail "--n: the candidates are not named"
one_line 2 '--frob\x01: unknown option (see dtrain --help)' "$DTRAIN" "--frob$soh"
one_line 2 '-\x01: unknown option (see dtrain --help)' "$DTRAIN" "-$soh"
one_line 2 "-x: unknown option (see dtrain --help)" "$DTRAIN" --synthetic -xe
one_line 2 "-b: missing value" "$DTRAIN" -eb
one_line 2 "--lr: missing value" "$DTRAIN" --lr
pass "a value to a flag without one, an ambiguous or unknown option: one line naming it as written, no raw control byte"

# --- numbers ---------------------------------------------------------------------------------------
for v in 0x10 0x1p3 inf nan -inf 1e 0.1.2 "1 "; do
  one_line 2 "--lr: '$v' is not a number" "$DTRAIN" --lr "$v" --print-lr 1 --epochs 1
done
for v in 0x10 1e3 1.0; do
  one_line 2 "--epochs: '$v' is not an integer" "$DTRAIN" --epochs "$v" --print-lr 1
done
one_line 2 "--epochs: 9223372036854775808 is out of range (expected 1..1000000)" "$DTRAIN" --epochs 9223372036854775808 --print-lr 1
one_line 2 "--seed: -99999999999999999999 is out of range" "$DTRAIN" --seed -99999999999999999999 --print-lr 1
one_line 2 "--lr: 1e999 is out of range (expected 0..1e+06)" "$DTRAIN" --lr 1e999 --print-lr 1 --epochs 1
one_line 2 "--lr-steps: 99999999999999999999 is out of range" "$DTRAIN" --lr-steps 5,99999999999999999999 --print-lr 1
one_line 2 "--opt-eps: 1e-310 is out of range (expected 1e-30..1)" "$DTRAIN" --opt-eps 1e-310 --print-lr 1
expect_status 0 "$DTRAIN" --lr 1e-310 --no-lr-scaling --print-lr 1 --epochs 1
expect_status 0 "$DTRAIN" --lr .5 --lr-gamma 5. --print-lr 1 --epochs 1
pass "numbers: decimal only, 1e-310 is a number, 2^63 and 1e999 out of range"

expect_status 0 "$DTRAIN" --opt SGD --print-lr 1 --epochs 1
expect_status 0 "$DTRAIN" --opt AdamW -a resnet8 --crop 32 -b 8 --synthetic --max-steps 1 --epochs 1 --results R2 --run-name adamw
grep -q '"name": *"adamw"' R2/*-adamw/run.json || { cat R2/*-adamw/run.json; fail "--opt AdamW is not adamw in run.json"; }
one_line 2 "--opt: 'sgdx' is not one of sgd," "$DTRAIN" --opt sgdx --print-lr 1
pass "--opt in any case (SGD, AdamW)"

# --- control characters ----------------------------------------------------------------------------
ctl() { # ctl FRAGMENT CMD...: exit 2, one line holding FRAGMENT, nothing written under R3
  one_line 2 "$@"
  [ ! -e R3 ] || fail "'$*': something was written"
}
ctl "--run-name: 'a\\x0ab' holds a control character (\\x0a)" "$DTRAIN" --synthetic -a resnet8 --results R3 --run-name "a${nl}b"
ctl "--run-name: 'a\\x09b' holds a control character" "$DTRAIN" --synthetic -a resnet8 --results R3 "--run-name=a${tab}b"
ctl "--results: 'R3\\x01' holds a control character" "$DTRAIN" --synthetic -a resnet8 --results "R3$soh"
ctl "--output-dir: 'R3\\x0a' holds" "$DTRAIN" --synthetic -a resnet8 --output-dir "R3$nl"
ctl "-a: 'resnet8\\x0a' holds" "$DTRAIN" --synthetic --results R3 -a "resnet8$nl"
ctl "-a: 'resnet8\\x0a' holds" "$DTRAIN" --synthetic --results R3 "-aresnet8$nl"
ctl "--arch: 'resnet8\\x0a' holds" "$DTRAIN" --synthetic --results R3 --arch "resnet8$nl"
ctl "--recipe: 'fmnist\\x0a' holds" "$DTRAIN" --synthetic --results R3 --recipe "fmnist$nl"
ctl "--resume: 'x\\x0ay' holds" "$DTRAIN" --synthetic -a resnet8 --results R3 --resume "x${nl}y"
ctl "--lr: '0.1\\x0a' holds" "$DTRAIN" --synthetic -a resnet8 --results R3 --lr "0.1$nl"
ctl "DATA: 'packed\\x0a' holds" "$DTRAIN" -a resnet8 --results R3 "packed$nl"
ctl "-o: 'out\\x0a' holds" "$DTPACK" fashion-mnist idx -o "out$nl"
ctl "SRC: 'idx\\x0a' holds" "$DTPACK" fashion-mnist "idx$nl" -o out
ctl "PATH: 'R\\x0a' holds" "$DTREPORT" "R$nl"
ctl "--plots: 'p\\x1b[31m' holds" "$DTREPORT" --plots "p$(printf '\033')[31m" R
pass "a control character in a name, path or value: refused with one escaped line, exit 2"

# --- two recipes -----------------------------------------------------------------------------------
one_line 2 "--recipe resnet50 and --recipe vgg16: give one recipe" "$DTRAIN" --recipe resnet50 --recipe=vgg16 --synthetic
expect_status 0 "$DTRAIN" --recipe fmnist --recipe=fmnist --print-lr 1
pass "two different --recipe flags refused; the same one twice is one"

# --- a refused command line is exit 2 ----------------------------------------------------------------
if [ "${DT_HAVE_CUDA:-no}" != yes ]; then
  one_line 2 "--nproc-per-node starts one worker per GPU" env -u DT_SPAWN_CPU "$DTRAIN" --nproc-per-node 2 --synthetic
fi
one_line 2 "no FORMAT" "$DTPACK"
one_line 2 "no PATH" "$DTREPORT"
pass "refused command lines exit 2"
