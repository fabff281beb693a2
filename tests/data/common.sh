# common.sh: sourced by the data tests after tests/common.sh: small inputs made in a second (a slice
# of Debian's Fashion-MNIST, tiny CIFAR-10 batches) and the check that bad input got one line.
DTPACK="$top_builddir/dtpack"

# small_fmnist DIR: 100 training and 50 test images of Fashion-MNIST as IDX files in DIR, or skip
small_fmnist() {
  fmnist_idx "$1" 100 50
}

# cifar_batches DIR [NAME3]: CIFAR-10's six binary batches (2 records each, 3 in test_batch.bin)
# and batches.meta.txt, class 3 named NAME3 (default "cat")
cifar_records() {
  i=0
  while [ "$i" -lt "$1" ]; do printf "\\00$((i % 8))"; head -c 3072 /dev/zero; i=$((i + 1)); done
}
cifar_batches() {
  mkdir -p "$1"
  for b in 1 2 3 4 5; do cifar_records 2 > "$1/data_batch_$b.bin"; done
  cifar_records 3 > "$1/test_batch.bin"
  printf 'airplane\nautomobile\nbird\n%s\ndeer\ndog\nfrog\nhorse\nship\ntruck\n' "${2:-cat}" > "$1/batches.meta.txt"
}

# one_error WHAT PATTERN: the last expect_status's stderr is one line, an error matching PATTERN
one_error() {
  [ "$(grep -c . "$DT_TMP/err")" -eq 1 ] || { cat "$DT_TMP/err"; fail "$1: not exactly one line on stderr"; }
  grep -q "error: .*$2" "$DT_TMP/err" || { cat "$DT_TMP/err"; fail "$1: the error does not say '$2'"; }
}

# refused WHAT PATTERN CMD...: CMD exits 2 within 20 s (a hang fails as 124) with one error line
refused() {
  what=$1 pat=$2; shift 2
  expect_status 2 timeout 20 "$@"
  one_error "$what" "$pat"
}

# need_h5py: $py, a Python with h5py and numpy (the build's PyTorch one first), or skip
need_h5py() {
  py=
  for p in "${DT_PYTHON_TORCH:-}" python3 /usr/bin/python3; do
    if [ -n "$p" ] && "$p" -c 'import h5py, numpy' >/dev/null 2>&1; then py=$p; return 0; fi
  done
  skip "no Python with h5py and numpy (Debian: python3-h5py)"
}

# small_fmnist_packed DIR: small_fmnist's 100 + 50 images packed into DIR, or skip
small_fmnist_packed() {
  fmnist_packed "$1" 100 50
}

# private_tmpfs DIR: $ns, a command that runs its arguments in a private mount namespace where a
# tmpfs can be mounted on DIR (unshare -m as root, unshare -rm otherwise), or skip: a container
# without CAP_SYS_ADMIN or user namespaces has neither
private_tmpfs() {
  command -v unshare >/dev/null || skip "no unshare (Debian: util-linux)"
  mkdir -p "$1"
  ns=
  for u in "unshare -m" "unshare -rm"; do
    if $u sh -c 'mount -t tmpfs -o size=64k tmpfs "$1"' sh "$1" 2>"$DT_TMP/ns.err"; then ns=$u; return 0; fi
  done
  skip "cannot mount a tmpfs in a private mount namespace: $(tail -n 1 "$DT_TMP/ns.err")"
}
