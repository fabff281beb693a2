#!/usr/bin/env python3
"""summary.py: the table that tests/gpu/check.sh prints last, made from its stage logs.

    summary.py --mode device|rehearsal --logs DIR --batch N [--seed S]

DIR holds `results` (one line per stage: name rc seconds limit peak_mib) and NAME.log for each stage.
Each stage's output is read in the one format its program prints (the formats are named below, next
to the programs that print them). Output that is not in that format is not guessed at: one line
"FORMAT: <stage>: ..." on stderr per such stage, and exit status 1 (the rehearsal then fails, so a
changed format is caught on the build machine, not on a lent GPU). Exit 0 otherwise: a stage that
failed or timed out is a verdict in the table, not a format error.
"""
import argparse
import datetime
import os
import re
import sys

# dtrain's progress line (src/train/metrics.c), after the log's timestamp (src/util/log.c)
PROGRESS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\S* .*\binfo: epoch \d+ \[(\d+)/\d+\] loss (\S+) .* "
                      r"([\d.]+) img/s\b")
# the CUDA backend's line per planned convolution shape (src/nn/cuda/conv_cudnn.c): shape, seconds,
# and the mode (--cudnn-search: "heuristic", "bounded S s", "exhaustive"; a line of before the modes
# has none)
SEARCH = re.compile(r"cuDNN conv (.*?): search ([\d.]+) s(?: \(((?:heuristic|bounded|exhaustive)[^;)]*))?")
# train/step.c: the step captured as graphs, or a capture that failed and the run went on without
GRAPHS = re.compile(r"step (\d+): the training step captured as graphs")
NO_GRAPHS = re.compile(r"could not be captured as a graph")
# bench/torch_gpu_resnet50.py's last line
RESULT_KEYS = ("precision", "batch", "steps", "input", "img_s", "peak_alloc_mib", "torch", "device")
# tests/gpu/ops_check.c: the last line of a run, and of --list; the list of failing rows a run prints
# before its last line, one per row ("  FAILED op type shape: why")
OPS_FAILED = re.compile(r"^  FAILED (.*)$", re.M)
OPS_RUN = re.compile(r"^ops_check: (\d+) rows, (\d+) failed", re.M)
OPS_LIST = re.compile(r"^ops_check: (\d+) rows\s*$", re.M)
# compute-sanitizer's last line
SANITIZER = re.compile(r"^=+ ERROR SUMMARY: (\d+) errors?", re.M)
# tests/gpu/nccl_one.c
NCCL_OK = re.compile(r"^(ok|FAIL): NCCL world of 1", re.M)
NCCL_SKIP = re.compile(r"^SKIP: no CUDA device", re.M)
# its rows for libdt's engine (dt.h) on device tensors, after the communicator's
ENGINE_ROWS = re.compile(r"^(ok|FAIL): libdt engine, device tensors: .*$", re.M)
# dtrain's profile under DT_PROFILE (src/nn/model.c, dt_model_profile_report; doc/dtrain.1): a head line,
# a header, "kind ms/step share%" rows, a total; the stages check.sh runs with DT_PROFILE=last
PROFILE_HEAD = re.compile(r"^profile: (\d+) steps?, ms per step by kind \((\S+) timers\)$", re.M)
PROFILE_NONE = re.compile(r"^profile: no step was profiled$", re.M)
PROFILE_COLUMNS = re.compile(r"^kind +ms/step +share$")
PROFILE_ROW = re.compile(r"^(\S+) +(\d+\.\d{3}) +(\d+\.\d)%$")
PROFILED = ("dtrain-O2",)

format_errors = []


def bad_format(stage, what):
    format_errors.append("FORMAT: %s: %s" % (stage, what))


class Stages:
    def __init__(self, logs):
        self.logs = logs
        self.st = {}
        with open(os.path.join(logs, "results")) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 5:
                    bad_format("results", "line %r is not 'name rc seconds limit peak'" % line.strip())
                    continue
                name, rc, secs, limit, peak = parts
                self.st[name] = dict(rc=int(rc), secs=int(secs), limit=int(limit), peak=peak)

    def ran(self, name):
        return name in self.st and self.st[name]["rc"] != 125

    def text(self, name):
        try:
            with open(os.path.join(self.logs, name + ".log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def verdict(self, name):
        if name not in self.st:
            return "not run"
        rc = self.st[name]["rc"]
        return {0: "ok", 77: "skipped", 124: "TIMED OUT after %d s" % self.st[name]["limit"],
                125: "not run (no time left)"}.get(rc, "exit %d" % rc)

    def last_error(self, name):
        lines = [l for l in self.text(name).splitlines()
                 if re.search(r"error|Error|FATAL|fatal|Traceback|abort|ERROR", l)]
        return lines[-1].strip()[:160] if lines else ""


def dtrain_profile(s, name):
    """dtrain's profile in the stage's log: dict(steps, timers, rows [(kind, ms, share)], total), or
    None (a format error when the stage should have one, or has one not in the format); read once"""
    if name not in _profiles:
        _profiles[name] = read_profile(s, name)
    return _profiles[name]


_profiles = {}


def read_profile(s, name):
    text = s.text(name)
    m = PROFILE_HEAD.search(text)
    if not m:
        if name in PROFILED and s.st.get(name, {}).get("rc") == 0 and not PROFILE_NONE.search(text):
            bad_format(name, "dtrain ended well under DT_PROFILE=last but printed no line 'profile: N steps, ms "
                       "per step by kind (B timers)'")
        return None
    lines = text[m.end():].lstrip("\n").splitlines()
    if not lines or not PROFILE_COLUMNS.match(lines[0]):
        bad_format(name, "the profile's second line is %r, not 'kind ms/step share'" % (lines[0] if lines else ""))
        return None
    rows, total = [], None
    for line in lines[1:]:
        r = PROFILE_ROW.match(line)
        if not r:
            bad_format(name, "profile row %r is not 'KIND MS SHARE%%' (three columns, ms to 0.001)" % line)
            return None
        if r.group(1) == "total":
            total = float(r.group(2))
            break
        rows.append((r.group(1), float(r.group(2)), float(r.group(3))))
    if total is None or not rows:
        bad_format(name, "the profile has %d rows and %s total row" % (len(rows), "a" if total is not None else "no"))
        return None
    if abs(sum(ms for _, ms, _ in rows) - total) > 0.001 * len(rows) + 1e-9:
        bad_format(name, "the profile's rows sum to %.3f ms, its total says %.3f" % (sum(ms for _, ms, _ in rows), total))
        return None
    return dict(steps=int(m.group(1)), timers=m.group(2), rows=rows, total=total)


def dtrain_speed(s, name, batch):
    """(img/s from the first to the last progress line, steps timed, last loss, slowest searches); a
    profiled run's last steps (DT_PROFILE=last: issued, with timers) are left out of the timing"""
    pts = []
    for line in s.text(name).splitlines():
        m = PROGRESS.match(line)
        if m:
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
            pts.append((t, int(m.group(2)), m.group(3), float(m.group(4))))
    searches = sorted(((float(m.group(2)), m.group(1)) for m in SEARCH.finditer(s.text(name))), reverse=True)
    if s.st.get(name, {}).get("rc") == 0 and len(pts) < 2:
        bad_format(name, "dtrain ended well but printed %d progress lines in the format "
                   "'<time> ... info: epoch E [STEP/N] loss X ... R img/s' (two are needed)" % len(pts))
    prof = dtrain_profile(s, name) if name in PROFILED else None
    if prof and pts:  # the progress lines up to the first profiled step's start
        last = max(p[1] for p in pts)
        pts = [p for p in pts if p[1] <= last - prof["steps"]] or pts[:1]
    if len(pts) >= 2 and pts[-1][0] > pts[0][0] and pts[-1][1] > pts[0][1]:
        (t1, s1, _, _), (t2, s2, loss, _) = pts[0], pts[-1]
        return (s2 - s1) * batch / (t2 - t1), "%d-%d" % (s1, s2), loss, searches
    return None, None, pts[-1][2] if pts else None, searches


def graphs_note(s, name, dry):
    """whether dtrain's steps ran as graphs, as its log says (the rehearsal runs with --graph but in
    the -nograph stage: there a run that ended well must say which)"""
    text = s.text(name)
    if name.endswith("-nograph"):
        if GRAPHS.search(text):
            bad_format(name, "dtrain --no-graph printed 'captured as graphs'")
        return "%s: steps issued op by op (--no-graph)" % name
    if NO_GRAPHS.search(text):
        # the backend's line naming what the capture could not hold, else the last error
        why = re.search(r"the capture failed: (.*)", text)
        return "%s: steps ran WITHOUT graphs, the capture failed: %s" % (
            name, why.group(1).strip()[:160] if why else s.last_error(name))
    m = GRAPHS.search(text)
    if m:
        return "%s: steps as graphs from step %s" % (name, m.group(1))
    if s.st.get(name, {}).get("rc") == 0:
        if dry:
            bad_format(name, "dtrain --graph ended well but printed no 'step N: the training step captured as "
                       "graphs' line")
        return "%s: steps issued op by op (no graph line)" % name
    return "%s: no graph line (the run failed)" % name


def torch_result(s, name):
    m = re.search(r"^RESULT torch_gpu_resnet50 .*", s.text(name), re.M)
    if not m:
        if s.st.get(name, {}).get("rc") == 0:
            bad_format(name, "no 'RESULT torch_gpu_resnet50 ...' line")
        return None
    kv = dict((k, v.strip('"')) for k, v in re.findall(r"(\w+)=(\"[^\"]*\"|\S+)", m.group(0)))
    missing = [k for k in RESULT_KEYS if k not in kv]
    if missing:
        bad_format(name, "its RESULT line lacks %s" % ", ".join(missing))
        return None
    try:
        kv["img_s"] = float(kv["img_s"])
    except ValueError:
        bad_format(name, "img_s=%s is not a number" % kv["img_s"])
        return None
    return kv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("device", "rehearsal"), required=True)
    ap.add_argument("--logs", required=True)
    ap.add_argument("--batch", type=int, required=True, help="the device run's batch")
    ap.add_argument("--run-batch", type=int, help="the batch the stages ran at (the rehearsal's; default --batch)")
    ap.add_argument("--seed", default="?")
    a = ap.parse_args()
    s = Stages(a.logs)
    dry = a.mode == "rehearsal"
    out = []
    say = out.append

    say("== stages")
    for name, v in s.st.items():
        say("  %-15s %-28s %4d s (limit %d s)" % (name, s.verdict(name), v["secs"], v["limit"]))

    # machine
    if s.ran("machine"):
        txt = s.text("machine")
        for l in txt.splitlines():
            if l.startswith("machine: ") or re.match(r"^\s*(CUDA|cuBLAS|cuDNN|NCCL)\s+yes", l) or l.startswith("C library"):
                say("  " + l.strip())
        if s.st["machine"]["rc"] == 0 and not re.search(r"^\s*CUDA\s+yes\s+runtime", txt, re.M):
            bad_format("machine", "no 'CUDA yes runtime ...' line from dtrain --version")

    # ops_check and memcheck
    say("")
    if s.ran("ops_check"):
        txt = s.text("ops_check")
        # the rehearsal's ops_check lists the rows (--list), or checks the CPU's table with a planted
        # fault (rehearse.sh: DT_OPS_CHECK_FAULT), which ends as a device run does
        m = OPS_RUN.search(txt) or (OPS_LIST.search(txt) if dry else None)
        if m:
            say("== ops_check (seed %s): %s" % (a.seed, m.group(0).strip()))
        else:
            say("== ops_check (seed %s): no result line, %s" % (a.seed, s.verdict("ops_check")))
            if s.st["ops_check"]["rc"] in (0, 1):
                bad_format("ops_check", "no line 'ops_check: N rows%s'" % ("" if dry else ", M failed"))
        # every failing row, from ops_check's own list; without it (a run stopped at its limit) the FAIL
        # rows and their detail lines so far
        listed = OPS_FAILED.findall(txt)
        fails = listed or [l for l in txt.splitlines() if l.rstrip().endswith("FAIL") or l.startswith("      ")]
        cap = 60 if listed else 30
        for l in fails[:cap]:
            say("  " + ("FAILED " if listed else "") + l[:200])
        if len(fails) > cap:
            say("  ... %d more lines in ops_check.txt" % (len(fails) - cap))
        if not m:
            for l in txt.splitlines()[-6:]:
                say("  | " + l[:160])
    if s.ran("memcheck"):
        txt = s.text("memcheck")
        m = (OPS_LIST if dry else SANITIZER).search(txt)
        if m and not dry:
            # one ERROR SUMMARY per process the sanitizer followed (ops_check runs its rows in children)
            counts = [int(n) for n in SANITIZER.findall(txt)]
            say("== memcheck (compute-sanitizer over ops_check --quick): ERROR SUMMARY: %d error%s%s"
                % (sum(counts), "" if sum(counts) == 1 else "s",
                   " in %d processes" % len(counts) if len(counts) > 1 else ""))
        elif m:
            say("== memcheck (compute-sanitizer over ops_check --quick): %s" % m.group(0).strip("= \n"))
        else:
            say("== memcheck: %s" % s.verdict("memcheck"))
            if s.st["memcheck"]["rc"] in (0, 3):
                bad_format("memcheck", "no line %s" % ("'ops_check: N rows'" if dry else "'========= ERROR SUMMARY: N errors'"))
        errs = [l for l in txt.splitlines() if re.match(r"^=+ (Invalid|Program hit|Saved host backtrace|Address)", l)]
        for l in errs[:12]:
            say("  " + l[:160])
    if s.ran("nccl"):
        txt = s.text("nccl")
        m = (NCCL_SKIP if dry else NCCL_OK).search(txt)
        say("== nccl (world of 1, NCCL_DEBUG=INFO): %s" % (m.group(0) if m else s.verdict("nccl")))
        if not m and s.st["nccl"]["rc"] in ((77,) if dry else (0, 1)):
            bad_format("nccl", "no line '%s'" % ("SKIP: no CUDA device" if dry else "ok|FAIL: NCCL world of 1"))
        for e in ENGINE_ROWS.finditer(txt):
            say("  " + e.group(0)[:160])
        if not dry and m and s.st["nccl"]["rc"] in (0, 1) and len(ENGINE_ROWS.findall(txt)) != 2:
            bad_format("nccl", "not the 2 lines 'ok|FAIL: libdt engine, device tensors: ...'")
        for l in [l for l in txt.splitlines() if "NCCL WARN" in l][:8]:
            say("  " + l[:160])
        # NCCL's INFO lines (version, transports, devices) only when it failed: they say what it tried
        if not dry and s.st["nccl"]["rc"] != 0:
            for l in [l for l in txt.splitlines() if "NCCL INFO" in l][-12:]:
                say("  " + l[:160])

    # training speed
    say("")
    say("== training, batch %d, one GPU: dtrain --device cuda --synthetic vs PyTorch eager, channels_last (resnet50"
        " unless the config names another model);" % a.batch)
    say("   both upload uint8 pixels from host memory every step and normalise on the device; both timed over 20 steps"
        " after 10")
    if dry:
        say("   (rehearsal: on the CPU at batch 2, 32x32: the numbers mean nothing, the formats are what is checked)")
    rows = [("O0 fp32", "dtrain-O0", "torch-fp32", "fp32, TF32 off"),
            ("O2 fp16", "dtrain-O2", "torch-fp16", "autocast fp16"),
            ("O2 bf16", "dtrain-O2-bf16", "torch-bf16", "autocast bf16"),
            ("O2 issued", "dtrain-O2-nograph", "torch-fp16", "autocast fp16"),
            ("O2 exhaust", "dtrain-O2-exhaustive", "torch-fp16", "autocast fp16"),
            ("mbv2 O2", "dtrain-mobilenet_v2", "torch-mobilenet_v2", "autocast fp16"),
            ("effb0 O2", "dtrain-efficientnet_b0", "torch-efficientnet_b0", "autocast fp16"),
            ("vit O2", "dtrain-vit_b_16", "torch-vit_b_16", "autocast fp16")]
    say("%-10s %12s %12s %6s  %-15s %9s %9s %16s" % ("config", "dtrain img/s", "torch img/s", "ratio", "torch config",
                                                   "dt steps", "dt loss", "MiB dt / torch"))
    notes, searches_all, shown = [], {}, set()
    torch = {t: torch_result(s, t) for _, _, t, _ in rows if s.ran(t)}  # each RESULT line read once
    for cfg, d, t, tcfg in rows:
        if not s.ran(d) and not (s.ran(t) and t not in shown):
            continue
        shown.add(t)
        batch = a.run_batch or a.batch
        dv, steps, loss, searches = dtrain_speed(s, d, batch)
        searches_all[d] = searches
        tr = torch.get(t)
        tv = tr["img_s"] if tr else None
        ratio = "%.2f" % (dv / tv) if dv and tv else "-"
        dmem = s.st.get(d, {}).get("peak", "-")
        tmem = "%s/%s" % (tr["peak_alloc_mib"], s.st.get(t, {}).get("peak", "-")) if tr else "-"
        say("%-10s %12s %12s %6s  %-15s %9s %9s %16s" % (cfg, "%.1f" % dv if dv else "-", "%.1f" % tv if tv else "-",
                                                       ratio, tcfg, steps or "-", loss or "-", "%s / %s" % (dmem, tmem)))
        if loss is not None and not re.match(r"^-?[\d.]+(e[-+]?\d+)?$", loss):
            notes.append("%s: the loss is %s" % (d, loss))
        if dv is None:
            notes.append("%s: %s %s" % (d, s.verdict(d), s.last_error(d)))
        if s.ran(d):
            notes.append(graphs_note(s, d, dry))
        if tv is None:
            notes.append("%s: %s %s" % (t, s.verdict(t), s.last_error(t)))
        if tr and tr.get("input") != "host":
            notes.append("%s: input=%s, not host: not the same work as dtrain --synthetic" % (t, tr.get("input")))
    say("(ratio: dtrain / PyTorch; MiB: the peak nvidia-smi saw in use, for PyTorch max_memory_allocated / "
        "nvidia-smi's peak)")
    for n in notes:
        say("note: " + n.strip())
    for d, searches in searches_all.items():
        if searches:
            total = sum(t for t, _ in searches)
            modes = sorted(set(m.group(3) or "mode not said" for m in SEARCH.finditer(s.text(d))))
            say("%s: cuDNN algorithm search (%s) %.1f s over %d shapes; slowest: %s" % (
                d, ", ".join(modes), total, len(searches), "; ".join("%s %.2f s" % (shape, t) for t, shape in searches[:3])))
    for d in PROFILED:
        prof = dtrain_profile(s, d) if s.ran(d) else None
        if prof:  # where the device's time goes (the step as issued, not as a graph)
            say("%s: profile of its last %s (DT_PROFILE=last, %s timers, issued op by op): %.2f ms/step, "
                "%.1f img/s at batch %d; the most time:" % (
                    d, "step" if prof["steps"] == 1 else "%d steps" % prof["steps"], prof["timers"], prof["total"],
                    1e3 * (a.run_batch or a.batch) / prof["total"] if prof["total"] > 0 else 0, a.run_batch or a.batch))
            top = prof["rows"][:8]
            for i in range(0, len(top), 4):
                say("  " + "; ".join("%s %.2f ms %.1f%%" % r for r in top[i:i + 4]))
        elif s.ran(d) and PROFILE_NONE.search(s.text(d)):
            say("%s: no step was profiled (the run stopped before its last step)" % d)
    for t in ("torch-fp16", "torch-bf16", "torch-fp32"):
        tr = torch.get(t)
        if tr:
            say("PyTorch %s, cuDNN %s, %s" % (tr.get("torch"), tr.get("cudnn"), tr.get("device")))
            break
    print("\n".join(out))
    for e in format_errors:
        print(e, file=sys.stderr)
    return 1 if format_errors else 0


if __name__ == "__main__":
    sys.exit(main())
