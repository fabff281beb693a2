#!/usr/bin/env python3
"""h5flip.py: byte-flip fuzz of the HDF5 files dtrain reads (shards: doc/formats.md; checkpoints:
doc/checkpoints.md).

The promise it holds: one changed byte anywhere in a shard or a checkpoint never crashes or hangs
`dtpack verify` or dtrain's start (`dtrain DATA`, `--resume PATH`, `-e --resume PATH`,
`--pretrained PATH`). Each command exits 0 (a harmless flip) or 2, the bad-input code of both
programs, after exactly one `error:` line that names the file (exit 1 is a run-time failure: I/O).

It packs a small Fashion-MNIST (256 training and 64 validation images) and trains a resnet8 for 2
steps into a checkpoint, maps each file's bytes (h5py for the raw data of every dataset; the rest,
"metadata", labelled by a small parser of HDF5's structures: superblock, object header messages,
B-trees, symbol nodes, local and global heaps), then runs cases. Case K of seed S flips one byte
(half of the time one bit, else a new random value): with probability --raw-share in the raw data of
a dataset picked uniformly (for /classes that data is the strings' references into the global heap),
otherwise in the metadata (a tenth of those picks among the bytes no reader looks at: free space,
padding). Files take turns: train shard, val shard, checkpoint. A shard's flip goes through
`dtpack verify` twice, as it is (the manifest's CRC-32 catches it) and after the manifest got its
CRC-32 (so that HDF5 reads it: verify-crc), and through `dtrain DATA` (start: a 1-step run). Each
command runs with --timeout and an address space of --mem-limit-mib. Every case is printed (seed, file, offset, old and new byte, region, what each
command did); the summary counts cases per file and command, passes and failures by kind and region,
and gives every failure's reproduction line.

  h5flip.py --bindir BUILD [--cases N] [--seed S] [--jobs J] [--raw-share X] [--timeout SEC] [--keep DIR]
  h5flip.py --bindir BUILD --seed S --case K [--cmd NAME]      one case of a run, again
  h5flip.py --bindir BUILD --flip FILE:OFFSET:OLD:NEW [--cmd NAME]   one given flip

Exit status: 0 every case passed; 1 a case failed; 2 a bad command line; 77 something it needs is
missing (h5py, Fashion-MNIST, the build), with the reason. tests/fuzz/h5flip.sh runs it in make check.
"""
import argparse
import concurrent.futures
import gzip
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib

try:
    import h5py
except ImportError as e:  # pragma: no cover
    print("SKIP: h5flip.py needs h5py and numpy (Debian: python3-h5py): %s" % e)
    sys.exit(77)

FMNIST = "/usr/share/datasets/fashion-mnist"
N_TRAIN, N_VAL = 256, 64
SHARDS = ("train-00000.h5", "val-00000.h5")
CKPT = "checkpoint.h5"
TARGETS = SHARDS + (CKPT,)
DTRAIN_FAST = ["-a", "resnet8", "-b", "32", "-p", "0", "--threads", "1", "-j", "1"]

# ------------------------------------------------------------------------------------------------
# the byte map of an HDF5 file


def u16(b, o):
    return struct.unpack_from("<H", b, o)[0]


def u32(b, o):
    return struct.unpack_from("<I", b, o)[0]


def u64(b, o):
    return struct.unpack_from("<Q", b, o)[0]


# metadata no reader looks at: flips there are drawn with DEAD_SHARE of the metadata cases
DEAD = ("unused", "gheap:free-space", "objhdr:nil-space")
DEAD_SHARE = 0.1
MSG_NAMES = {0x00: "nil", 0x01: "dataspace", 0x02: "link-info", 0x03: "datatype", 0x04: "fill-old",
             0x05: "fill-value", 0x06: "link", 0x08: "layout", 0x0A: "group-info", 0x0B: "filters",
             0x0C: "attribute", 0x0E: "mtime-old", 0x10: "continuation", 0x11: "symbol-table",
             0x12: "mtime", 0x15: "attribute-info", 0x16: "refcount"}


class ByteMap:
    """Each byte's region: raw data of a dataset, or a labelled metadata structure ("unused" when no
    structure the parser knows claims it: free space, padding, or structures it does not parse).
    Regions have a kind (coarse, for the summary) and a detail (for the case's line)."""

    def __init__(self, path):
        self.path = path
        self.data = open(path, "rb").read()
        self.size = len(self.data)
        self.raw = []    # (start, end, kind, detail)
        self.meta = []   # (start, end, kind, detail), later ones never override earlier ones
        self._objects = []  # (name, object header address)
        with h5py.File(path, "r") as f:
            self._objects.append(("/", h5py.h5o.get_info(f.id).addr))

            def visit(name, obj):
                self._objects.append(("/" + name, h5py.h5o.get_info(obj.id).addr))
                if isinstance(obj, h5py.Dataset):
                    self._dataset_raw("/" + name, obj)
            f.visititems(visit)
        try:
            self._parse()
        except (struct.error, IndexError, ValueError) as e:  # a map that is only coarser
            self.meta.append((0, 0, "parse-error", str(e)))
        self.raw.sort()
        self.segments = self._segments()

    def _dataset_raw(self, name, ds):
        top = "/" + name.strip("/").split("/")[0]
        vlen = h5py.check_vlen_dtype(ds.dtype) is not None or ds.dtype.kind == "O"
        kind = ("raw-vlen:" if vlen else "raw:") + top
        lay = ds.id.get_create_plist().get_layout()
        if lay == h5py.h5d.CONTIGUOUS:
            off, n = ds.id.get_offset(), ds.id.get_storage_size()
            if off is not None and n:
                self.raw.append((off, off + n, kind, name))
        elif lay == h5py.h5d.CHUNKED:
            for i in range(ds.id.get_num_chunks()):
                c = ds.id.get_chunk_info(i)
                if c.byte_offset is not None and c.size:
                    self.raw.append((c.byte_offset, c.byte_offset + c.size, kind, "%s chunk %d" % (name, i)))
        # compact: the data is in the object header (a layout message): metadata

    def _add(self, start, end, kind, detail):
        if 0 <= start < end <= self.size:
            self.meta.append((start, end, kind, detail))

    def _parse(self):
        b = self.data
        self.leaf_k, self.internal_k = 4, 16
        if b[:8] == b"\x89HDF\r\n\x1a\n":
            ver = b[8]
            if ver in (0, 1):
                self.leaf_k, self.internal_k = u16(b, 16), u16(b, 18)
                self._add(0, 96 if ver == 0 else 100, "superblock", "superblock v%d" % ver)
            else:
                self._add(0, 48, "superblock", "superblock v%d" % ver)
        for name, addr in self._objects:
            self._object_header(name, addr)
        # global heaps (variable-length data: strings), found by their signature outside raw data
        pos = b.find(b"GCOL")
        while pos >= 0:
            if not self._in_raw(pos):
                self._global_heap(pos)
            pos = b.find(b"GCOL", pos + 4)

    def _in_raw(self, off):
        return any(s <= off < e for s, e, _, _ in self.raw)

    def _object_header(self, name, addr):
        b = self.data
        if b[addr:addr + 4] == b"OHDR":  # version 2: only its start is labelled
            self._add(addr, addr + 16, "objhdr:prefix", "object header v2 of %s" % name)
            return
        if b[addr] != 1:
            return
        self._add(addr, addr + 16, "objhdr:prefix", "object header of %s: prefix" % name)
        blocks = [(addr + 16, u32(b, addr + 8))]
        seen = 0
        while blocks and seen < 64:
            start, length = blocks.pop(0)
            seen += 1
            pos = start
            while pos + 8 <= start + length:
                mtype, msize = u16(b, pos), u16(b, pos + 2)
                mname = MSG_NAMES.get(mtype, "msg-0x%02x" % mtype)
                end = min(pos + 8 + msize, start + length)
                detail = "object header of %s: %s message" % (name, mname)
                kind = "objhdr:" + mname
                body = pos + 8
                if mtype == 0x0C:  # attribute: its name
                    aver = b[body]
                    nlen = u16(b, body + 2)
                    at = body + (9 if aver == 3 else 8)
                    aname = b[at:at + max(nlen - 1, 0)].decode("utf-8", "replace")
                    detail = "object header of %s: attribute %s" % (name, aname)
                elif mtype == 0x10:  # continuation: another block of messages
                    blocks.append((u64(b, body), u64(b, body + 8)))
                elif mtype == 0x11:  # symbol table: the group's B-tree and local heap
                    self._group_btree(name, u64(b, body), 0)
                    self._local_heap(name, u64(b, body + 8))
                if mtype == 0x00:  # a nil message: free space in the header, only its 8 bytes count
                    self._add(pos, pos + 8, kind, detail)
                    self._add(pos + 8, end, "objhdr:nil-space", "object header of %s: free space" % name)
                else:
                    self._add(pos, end, kind, detail)
                pos += 8 + msize

    def _group_btree(self, name, addr, depth):
        b = self.data
        if depth > 8 or b[addr:addr + 4] != b"TREE":
            return
        k = self.internal_k
        self._add(addr, addr + 24 + (2 * k + 1) * 8 + 2 * k * 8, "btree", "B-tree node of group %s" % name)
        level, used = b[addr + 5], u16(b, addr + 6)
        for i in range(min(used, 2 * k)):
            child = u64(b, addr + 24 + 8 + 16 * i)
            if level > 0:
                self._group_btree(name, child, depth + 1)
            elif b[child:child + 4] == b"SNOD":
                self._add(child, child + 8 + 2 * self.leaf_k * 40, "snod", "symbol table node of group %s" % name)

    def _local_heap(self, name, addr):
        b = self.data
        if b[addr:addr + 4] != b"HEAP":
            return
        self._add(addr, addr + 32, "lheap", "local heap of group %s: header" % name)
        size, data = u64(b, addr + 8), u64(b, addr + 24)
        self._add(data, data + size, "lheap-data", "local heap of group %s: link names" % name)

    def _global_heap(self, addr):
        b = self.data
        size = u64(b, addr + 8)
        end = min(addr + size, self.size)
        self._add(addr, addr + 16, "gheap:hdr", "global heap at %d: collection header" % addr)
        pos = addr + 16
        while pos + 16 <= end:
            idx, osize = u16(b, pos), u64(b, pos + 8)
            if idx == 0:  # the free-space object: its header counts, the rest is unused
                self._add(pos, pos + 16, "gheap:free-hdr", "global heap at %d: free-space object header" % addr)
                self._add(pos + 16, end, "gheap:free-space", "global heap at %d: free space" % addr)
                break
            self._add(pos, pos + 16, "gheap:obj-hdr", "global heap at %d: object %d header" % (addr, idx))
            padded = (osize + 7) // 8 * 8
            self._add(pos + 16, min(pos + 16 + padded, end), "gheap:obj-data",
                      "global heap at %d: object %d data" % (addr, idx))
            pos += 16 + padded

    def _segments(self):
        """every byte outside raw data as runs (start, end, kind, detail): the first label that
        claims a byte wins; bytes that none claims are unused"""
        owner = [-1] * self.size
        for i in range(len(self.meta) - 1, -1, -1):
            s, e = self.meta[i][:2]
            owner[s:e] = [i] * (e - s)
        for s, e, _, _ in self.raw:
            owner[s:e] = [-2] * (e - s)
        segs, s = [], 0
        for o in range(1, self.size + 1):
            if o == self.size or owner[o] != owner[s]:
                if owner[s] == -1:
                    segs.append((s, o, "unused", "no structure the map knows (free space, padding or unparsed)"))
                elif owner[s] >= 0:
                    segs.append((s, o) + self.meta[owner[s]][2:])
                s = o
        return segs

    def region(self, off):
        """(kind, detail) of the byte at off"""
        for s, e, kind, detail in self.raw:
            if s <= off < e:
                return kind, "raw data of %s (byte %d of %d)" % (detail, off - s, e - s)
        for s, e, kind, detail in self.segments:
            if s <= off < e:
                return kind, detail
        return "unused", "?"

    def pick_meta(self, rng):
        """a metadata offset: DEAD_SHARE of the picks among the bytes no reader looks at (free space,
        unused), the rest among the bytes of live structures, uniformly"""
        live = [(s, e) for s, e, k, _ in self.segments if k not in DEAD]
        dead = [(s, e) for s, e, k, _ in self.segments if k in DEAD]
        runs = dead if dead and (not live or rng.random() < DEAD_SHARE) else live
        at = rng.randrange(sum(e - s for s, e in runs))
        for s, e in runs:
            if at < e - s:
                return s + at
            at -= e - s
        raise AssertionError("unreachable")

    def summary(self):
        raw = sum(e - s for s, e, _, _ in self.raw)
        dead = sum(e - s for s, e, k, _ in self.segments if k in DEAD)
        return "%d bytes: %d raw data in %d datasets, %d metadata (%d of them free space or unused)" % (
            self.size, raw, len(self.raw), self.size - raw, dead)


# ------------------------------------------------------------------------------------------------
# the pristine inputs


def run_quiet(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=child_env(), start_new_session=True)
    if p.returncode != 0:
        print("h5flip: '%s' failed (exit %d):\n%s" % (" ".join(cmd), p.returncode, p.stdout))
        sys.exit(1)


def child_env():
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    # dtrain's HDF5 probe gives up on a file whose metadata it cannot read in this long (default
    # 120 s); a damaged global heap can send HDF5 into an endless loop, which must end well within
    # --timeout here
    env.setdefault("DT_H5_PROBE_TIMEOUT", "5")
    env.pop("DT_LOG_LEVEL", None)
    return env


def prepare(work, bindir, fmnist):
    """work/pristine: idx/ (small IDX files), data/ (dtpack's shards) and run/ (a resnet8 run
    directory with its checkpoint.h5). Relative paths only, so that the bytes are the same in every
    work directory (the shard's source attribute and the checkpoint's config hold them)."""
    pr = os.path.join(work, "pristine")
    os.makedirs(os.path.join(pr, "idx"))
    for idx, n in (("train", N_TRAIN), ("t10k", N_VAL)):
        src = os.path.join(fmnist, "%s-images-idx3-ubyte.gz" % idx)
        if not os.path.exists(src):
            print("SKIP: Fashion-MNIST not found in %s (Debian: dataset-fashion-mnist)" % fmnist)
            sys.exit(77)
        img = gzip.open(src).read()
        lab = gzip.open(os.path.join(fmnist, "%s-labels-idx1-ubyte.gz" % idx)).read()
        with open(os.path.join(pr, "idx", "%s-images-idx3-ubyte" % idx), "wb") as f:
            f.write(struct.pack(">IIII", 0x803, n, 28, 28) + img[16:16 + n * 784])
        with open(os.path.join(pr, "idx", "%s-labels-idx1-ubyte" % idx), "wb") as f:
            f.write(struct.pack(">II", 0x801, n) + lab[8:8 + n])
    run_quiet([os.path.join(bindir, "dtpack"), "fashion-mnist", "idx", "-o", "data", "--no-progress"], pr)
    run_quiet([os.path.join(bindir, "dtrain")] + DTRAIN_FAST +
              ["--max-steps", "2", "--epochs", "1", "--results", "R", "--run-name", "flip", "data"], pr)
    runs = [d for d in os.listdir(os.path.join(pr, "R")) if d.endswith("-flip")]
    if len(runs) != 1 or not os.path.exists(os.path.join(pr, "R", runs[0], CKPT)):
        print("h5flip: the training run wrote no %s under %s/R" % (CKPT, pr))
        sys.exit(1)
    os.rename(os.path.join(pr, "R", runs[0]), os.path.join(pr, "run"))
    shutil.rmtree(os.path.join(pr, "R"))
    return pr


# ------------------------------------------------------------------------------------------------
# commands and verdicts

# name -> (the files it reads, its exit codes for bad input, its argv from (build dir, case dir));
# verify-crc is verify after the manifest got the flipped file's CRC-32, so that HDF5 reads the file
COMMANDS = {
    "verify": (SHARDS, (2,), lambda b, d: [b + "/dtpack", "verify", d + "/data"]),
    "verify-crc": (SHARDS, (2,), lambda b, d: [b + "/dtpack", "verify", d + "/data"]),
    "start": (SHARDS, (2,), lambda b, d: [b + "/dtrain"] + DTRAIN_FAST +
              ["--max-steps", "1", "--epochs", "1", "--results", d + "/R", d + "/data"]),
    "evaluate": ((CKPT,), (2,), lambda b, d: [b + "/dtrain"] + DTRAIN_FAST +
                 ["-e", "--resume", d + "/run/" + CKPT, d + "/data"]),
    "pretrained": ((CKPT,), (2,), lambda b, d: [b + "/dtrain"] + DTRAIN_FAST +
                   ["--max-steps", "1", "--epochs", "1", "--pretrained", d + "/run/" + CKPT,
                    "--results", d + "/R", d + "/data"]),
    "resume": ((CKPT,), (2,), lambda b, d: [b + "/dtrain"] + DTRAIN_FAST +
               ["--max-steps", "1", "--epochs", "1", "--resume", d + "/run/" + CKPT,
                "--results", d + "/R", d + "/data"]),
}
# kinds of failure that only count with --strict-names (the promise's letter: the line names the file)
SOFT = ("error line without the file",)
STRICT_NAMES = False
ORDER = ("verify", "verify-crc", "start", "evaluate", "pretrained", "resume")  # resume rewrites the file


def commands_for(target, only=None):
    return [c for c in ORDER if target in COMMANDS[c][0] and (only is None or c == only)]


def verdict(cmd, target, rc, err, timed_out):
    """None when the command kept the promise, else the failure's kind"""
    if timed_out:
        return "timeout"
    if rc < 0:
        try:
            return "signal " + signal.Signals(-rc).name
        except ValueError:
            return "signal %d" % -rc
    lines = [l for l in err.splitlines() if "error:" in l]
    if rc == 0:
        return None if not lines else "exit 0 with an error line"
    if rc not in COMMANDS[cmd][1]:
        return "exit %d" % rc
    if not lines:
        return "no error line"
    if len(lines) > 1:
        return "%d error lines" % len(lines)
    if target not in lines[0]:
        return "error line without the file"
    return None


def set_up_case(pr, d, target, offset, new):
    """d/data (and d/run): the pristine inputs with one byte of target changed"""
    os.makedirs(d + "/data")
    os.makedirs(d + "/run")
    for f in os.listdir(pr + "/data"):
        shutil.copyfile(pr + "/data/" + f, d + "/data/" + f)
    for f in os.listdir(pr + "/run"):
        if os.path.isfile(pr + "/run/" + f):
            shutil.copyfile(pr + "/run/" + f, d + "/run/" + f)
    path = d + ("/run/" if target == CKPT else "/data/") + target
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes([new]))
    return path


def fix_manifest_crc(d, target):
    path = d + "/data/manifest.tsv"
    crc = zlib.crc32(open(d + "/data/" + target, "rb").read()) & 0xFFFFFFFF
    out = []
    for line in open(path):
        cols = line.rstrip("\n").split("\t")
        if not line.startswith("#") and len(cols) == 5 and cols[1] == target:
            cols[4] = "%08x" % crc
            line = "\t".join(cols) + "\n"
        out.append(line)
    open(path, "w").write("".join(out))


def run_cmd(argv, cwd, timeout):
    t0 = time.time()
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace", env=child_env(), start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        timed_out = True
    return p.returncode, out, err, timed_out, time.time() - t0


# ------------------------------------------------------------------------------------------------
# cases


class Case:
    def __init__(self, k, seed, target, offset, old, new, region, detail, flip):
        self.k, self.seed, self.target, self.offset = k, seed, target, offset
        self.old, self.new, self.region, self.detail, self.flip = old, new, region, detail, flip
        self.results = []  # (cmd, rc, failure or None, first error line or the stderr tail, argv, seconds)

    def spec(self):
        return "%s:%d:0x%02x:0x%02x" % (self.target, self.offset, self.old, self.new)


def draw(k, seed, maps, raw_share):
    """case k of seed: its file, byte and new value (its own random stream: reproducible alone)"""
    rng = random.Random("h5flip/%d/%d" % (seed, k))
    target = TARGETS[k % len(TARGETS)]
    m = maps[target]
    if m.raw and rng.random() < raw_share:
        s, e, _, _ = rng.choice(m.raw)
        offset = rng.randrange(s, e)
        flip = "raw"
    else:
        offset = m.pick_meta(rng)
        flip = "meta"
    old = m.data[offset]
    if rng.random() < 0.5:
        new = old ^ (1 << rng.randrange(8))
    else:
        new = rng.choice([v for v in range(256) if v != old])
    region, detail = m.region(offset)
    return Case(k, seed, target, offset, old, new, region, detail, flip)


def run_case(c, pr, work, bindir, timeout, only, keep):
    d = os.path.join(work, "case-%d" % c.k)
    path = set_up_case(pr, d, c.target, c.offset, c.new)
    kept = False
    for cmd in commands_for(c.target, only):
        if cmd == "verify-crc":
            fix_manifest_crc(d, c.target)
        argv = COMMANDS[cmd][2](bindir, d)
        if keep and not kept:  # the flipped file before a command can rewrite it
            flipped = open(path, "rb").read()
        rc, _, err, timed_out, secs = run_cmd(argv, d, timeout)
        why = verdict(cmd, c.target, rc, err, timed_out)
        errs = [l for l in err.splitlines() if "error:" in l]
        note = " | ".join(errs) if errs else (err.strip().splitlines() or [""])[-1]
        c.results.append((cmd, rc, why, note, argv, secs))
        if why and keep and not kept:
            kd = os.path.join(keep, "case-%d-seed-%d" % (c.k, c.seed))
            os.makedirs(kd, exist_ok=True)
            open(os.path.join(kd, c.target), "wb").write(flipped)
            kept = True
    shutil.rmtree(d, ignore_errors=True)
    return c


def failed(why):
    return bool(why) and (STRICT_NAMES or why not in SOFT)


def describe(c):
    def one(cmd, rc, why):
        st = "timeout" if why == "timeout" else "exit %d" % rc if rc >= 0 else why
        return "%s %s%s" % (cmd, st, "" if not why else " %s (%s)" % ("FAIL" if failed(why) else "note", why))
    return "case %d seed %d: %s byte %d (0x%x) 0x%02x -> 0x%02x, %s [%s]: %s" % (
        c.k, c.seed, c.target, c.offset, c.offset, c.old, c.new, c.detail, c.region,
        ", ".join(one(cmd, rc, why) for cmd, rc, why, _, _, _ in c.results))


def repro(c, cmd, script, bindir):
    line = "%s %s --bindir %s --flip %s --cmd %s" % (sys.executable, script, bindir, c.spec(), cmd)
    return line + ("" if c.flip == "given" else "   # or: --seed %d --case %d" % (c.seed, c.k))


# ------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bindir", required=True, help="the build directory with dtrain and dtpack")
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    ap.add_argument("--case", type=int, default=None, help="run only this case of --seed")
    ap.add_argument("--flip", default=None, help="FILE:OFFSET:OLD:NEW, one given flip (OLD is checked)")
    ap.add_argument("--cmd", default=None, choices=ORDER, help="only this command")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--raw-share", type=float, default=0.2)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per command")
    ap.add_argument("--mem-limit-mib", type=int, default=2048,
                    help="address space of each command, MiB (0: no limit; a normal one needs ~100)")
    ap.add_argument("--work", default=None, help="work directory (default: a new temporary one)")
    ap.add_argument("--keep", default=None, help="copy each failing case's flipped file here")
    ap.add_argument("--strict-names", action="store_true",
                    help="an error line that does not name the flipped file is a failure, not a note")
    ap.add_argument("--fmnist", default=FMNIST)
    ap.add_argument("--max-listed", type=int, default=50, help="failures listed in full in the summary")
    a = ap.parse_args()
    if a.case is not None and a.seed is None:
        ap.error("--case K repeats case K of a run: give that run's --seed")
    global STRICT_NAMES
    STRICT_NAMES = a.strict_names
    bindir = os.path.abspath(a.bindir)
    script = os.path.abspath(sys.argv[0])
    for b in ("dtrain", "dtpack"):
        if not os.access(os.path.join(bindir, b), os.X_OK):
            print("SKIP: %s/%s is not built" % (bindir, b))
            return 77
    # limits the children inherit: no core files from the crashes it provokes, and an address space
    # of --mem-limit-mib (a flipped size field can make HDF5 allocate and clear gigabytes: on a shared
    # machine that must fail, not take the memory). Each child runs in a session of its own, so that
    # a timeout ends it and whatever it started.
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    if a.mem_limit_mib > 0:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        want = a.mem_limit_mib << 20
        resource.setrlimit(resource.RLIMIT_AS, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 1 << 31)
    t_start = time.time()
    own_work = a.work is None
    work = tempfile.mkdtemp(prefix="h5flip.") if own_work else os.path.abspath(a.work)
    try:
        return fuzz(a, bindir, script, seed, work, t_start)
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)


def fuzz(a, bindir, script, seed, work, t_start):
    os.makedirs(work, exist_ok=True)
    pr = prepare(work, bindir, a.fmnist)
    maps = {t: ByteMap(os.path.join(pr, "run" if t == CKPT else "data", t)) for t in TARGETS}
    print("h5flip: seed %d, %s cases, raw share %.2f, timeout %g s, memory limit %d MiB, %d jobs, build %s" % (
        seed, "case %d" % a.case if a.case is not None else a.flip or a.cases, a.raw_share, a.timeout,
        a.mem_limit_mib, a.jobs, bindir))
    for t in TARGETS:
        print("  %s: %s" % (t, maps[t].summary()))
    if a.flip:
        try:
            target, off, old, new = a.flip.split(":")
            off, old, new = int(off, 0), int(old, 0), int(new, 0)
            assert target in TARGETS and 0 <= off < maps[target].size and 0 <= new < 256
        except (ValueError, AssertionError):
            print("h5flip: --flip wants FILE:OFFSET:OLD:NEW with FILE one of %s" % ", ".join(TARGETS))
            return 2
        if maps[target].data[off] != old:
            print("h5flip: warning: byte %d of %s is 0x%02x here, not 0x%02x: another build or machine "
                  "lays the file out differently" % (off, target, maps[target].data[off], old))
        region, detail = maps[target].region(off)
        cases = [Case(0, seed, target, off, maps[target].data[off], new, region, detail, "given")]
    elif a.case is not None:
        cases = [draw(a.case, seed, maps, a.raw_share)]
    else:
        cases = [draw(k, seed, maps, a.raw_share) for k in range(a.cases)]
    keep = os.path.abspath(a.keep) if a.keep else None
    done = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        for c in ex.map(lambda c: run_case(c, pr, work, bindir, a.timeout, a.cmd, keep), cases):
            done.append(c)
            print(describe(c))
            for cmd, rc, why, note, argv, _ in c.results:
                if why:  # what it said (its error lines, else its last line)
                    print("    %s: %s" % (cmd, note[:400] or "(no stderr)"))
            sys.stdout.flush()
    return summary(done, script, bindir, seed, a, time.time() - t_start)


def summary(cases, script, bindir, seed, a, seconds):
    runs = [(c, r) for c in cases for r in c.results]
    print("\nh5flip summary: seed %d, %d cases (%d runs) in %.1f s" % (seed, len(cases), len(runs), seconds))
    print("  %-16s %-11s %6s %6s %6s %6s %7s %7s" % ("file", "command", "runs", "pass", "fail", "notes", "s/run",
                                                      "max s"))
    per = {}
    for c, (cmd, _, why, _, _, secs) in runs:
        n, f, o, t, mx = per.get((c.target, cmd), (0, 0, 0, 0.0, 0.0))
        per[(c.target, cmd)] = (n + 1, f + failed(why), o + (bool(why) and not failed(why)), t + secs, max(mx, secs))
    for (t, cmd), (n, f, o, secs, mx) in sorted(per.items(), key=lambda kv: (TARGETS.index(kv[0][0]),
                                                                            ORDER.index(kv[0][1]))):
        print("  %-16s %-11s %6d %6d %6d %6d %7.2f %7.1f" % (t, cmd, n, n - f - o, f, o, secs / n, mx))
    print("  cases by region of the flip (failing runs by command and kind; notes in brackets):")
    regions = {}
    for c in cases:
        n, bad = regions.get((c.flip, c.region), (0, {}))
        for cmd, _, why, _, _, _ in c.results:
            if why:
                key = (cmd, why if failed(why) else "[%s]" % why)
                bad[key] = bad.get(key, 0) + 1
        regions[(c.flip, c.region)] = (n + 1, bad)
    for (flip, region), (n, bad) in sorted(regions.items()):
        print("    %-4s %-26s %4d%s" % (flip, region, n, ": " + ", ".join(
            "%s %s %d" % (cmd, why, k) for (cmd, why), k in sorted(bad.items())) if bad else ""))
    fails = [(c, r) for c, r in runs if failed(r[2])]
    notes = [(c, r) for c, r in runs if r[2] and not failed(r[2])]
    bykind = {}
    for c, r in fails:
        bykind[(r[0], r[2])] = bykind.get((r[0], r[2]), 0) + 1
    print("  failures: %d of %d runs, in %d of %d cases%s" % (
        len(fails), len(runs), len({c.k for c, _ in fails}), len(cases),
        "".join("\n    %-11s %-28s %d" % (cmd, why, n) for (cmd, why), n in sorted(bykind.items()))))
    for c, (cmd, rc, why, note, argv, _) in fails[:a.max_listed]:
        print("  FAIL %s: %s byte %d 0x%02x -> 0x%02x (%s): %s" % (cmd, c.target, c.offset, c.old, c.new,
                                                                  c.detail, why))
        print("    " + repro(c, cmd, script, bindir))
    if len(fails) > a.max_listed:
        print("  ... and %d more (--max-listed N lists more)" % (len(fails) - a.max_listed))
    if notes:
        print("  notes: %d runs gave one error line that does not name the flipped file (--strict-names: "
              "failures), e.g.:" % len(notes))
        for c, (cmd, rc, why, note, argv, _) in notes[:5]:
            print("    %s, %s byte %d: %s" % (cmd, c.target, c.offset, note[:300]))
            print("      " + repro(c, cmd, script, bindir))
    print("h5flip: %s (seed %d)" % ("FAILED" if fails else "passed", seed))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
