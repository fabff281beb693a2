#!/usr/bin/env python3
"""make_fixtures.py: writes tests/report/fixtures/, the small results folders dtreport's golden test
(report.sh, expected.md) reads. Run it from anywhere; the output is the same bytes every time, and
the fixtures are committed, so this only matters when they change.

Designed numbers (what expected.md must show):
  resnet50 on imagenet, cuda, 256 per rank, O0: 1, 2, 4, 8 and 16 ranks at a steady 1000, 1900,
    3600, 6800 and 12800 img/s: speed-ups 1.90x 3.60x 6.80x 12.80x, efficiencies 95.0% 90.0% 85.0%
    80.0%. Each epoch's first print interval runs at 42% of that (warm-up: left out, else the median
    of the 1-rank run would read 997.5). The 4-rank run repeats epoch 1 (a crash after its epoch line,
    resumed from the epoch-0 checkpoint): its first epoch-1 line must not count, and the replayed
    steps start with a warm-up interval of their own. The 16-rank run is in progress: one complete
    epoch, three intervals of the next and a last line cut mid-write. A second 4-rank run
    ("-stopped") was stopped by SIGUSR1 inside epoch 1: its last line is dtrain's end line. The
    complete runs end with an end line saying "done".
  resnet50 on imagenet, O2 bf16, 8 ranks at 11200 img/s: alone in its configuration; epoch 1 not
    validated (null).
  resnet50 on imagenet, 128 per rank, 6 GPUs over 2 nodes (4 on rank 0's node, 2 on the other; run.json
    says nodes 2, ranks_per_node 4): alone in its configuration; the ranks column must not claim
    2 x 4.
  a 2-rank run with a corrupt line 9 (a crash mid-line, then a resumed run appending): skipped.
  resnet18 on cifar10, cpu, 64 per rank, O0: 2 ranks on one node at 400 img/s, and 3 ranks over 2
    nodes (sbatch -N2 -n3: run.json says nodes 2, ranks_per_node 2) at 576 img/s: speed-up 1.44x,
    efficiency 96.0%; the ranks column says ranks, not GPUs, and "2 nodes, uneven" for the second.
  orphan-metrics/: metrics.jsonl without run.json: skipped.
  fmnist-run/ (given as a PATH itself): resnet20 on fashion-mnist, cpu, O1 fp16 with a dynamic loss
    scale, --desired-acc 0.9 (run.json: 90, a percent) reached at epoch 3 (cumulative training time 237.8 s).
"""
import json, os, shutil

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
T0 = 1793000000.0  # 2026-10-26, a fixed wall clock


def run_json(arch, dataset, data, device, world, nodes, rpn, batch, epochs, opt=0, prec="fp16",
             scale="static", scale0=1.0, desired=None, job=None, run_dir=""):
    return {
        "amp": {"keep_batchnorm_fp32": True, "loss_scale": scale, "loss_scale_start": scale0,
                "master_weights": opt >= 2, "opt_level": opt, "precision": prec},
        "arch": arch, "batch_per_rank": batch, "classes": 1000 if dataset == "imagenet" else 10,
        "data": data, "dataset": dataset,
        "ddp": {"accum_steps": 1, "bucket_mb": 25.0, "first_bucket_mb": 1.0, "overlap": True,
                "sync_bn": False},
        "desired_acc": desired, "deterministic": False, "device": device, "dtrain": "0.1.0",
        "epochs": epochs, "global_batch": batch * world, "label_smoothing": 0.0,
        "launch": "slurm" if world > 1 else "single process", "lr": 0.1,
        "lr_scaled": 0.1 * batch * world / 256, "lr_schedule": "step", "lr_steps": [30, 60, 80],
        "momentum": 0.9, "nodes": nodes, "pretrained": None, "ranks_per_node": rpn,
        "run_dir": run_dir, "seed": 0, "slurm_job_id": job, "start_epoch": 0,
        "started": "2026-10-26T12:00:00Z", "warmup_epochs": 0.0, "weight_decay": 0.0001,
        "workers": 4, "world_size": world,
    }


def line(obj):
    return json.dumps(obj, separators=(",", ":")) + "\n"


class Metrics:
    def __init__(self, world, batch, steps_per_epoch, print_freq):
        self.world, self.batch, self.spe, self.pf = world, batch, steps_per_epoch, print_freq
        self.lines, self.step, self.t = [], 0, T0

    def steps(self, epoch, rate, scales=None, start=0):
        """print intervals of an epoch from epoch_step start: the first at 42% of rate (warm-up), then
        99.5%, 100%, 100.5% in turn; returns the step count at the end"""
        marks = list(range(start + self.pf, self.spe, self.pf)) + [self.spe]
        cycle = [0.995, 1.0, 1.005]
        prev = start
        for i, m in enumerate(marks):
            r = rate * (0.42 if i == 0 else cycle[(i - 1) % 3])
            self.step += m - prev
            self.t += (m - prev) * self.batch * self.world / r
            s = scales[i] if scales else 1.0
            self.lines.append(line({"kind": "step", "epoch": epoch, "epoch_step": m, "step": self.step,
                                    "lr": 0.1, "train_loss": round(6.9 - 0.3 * epoch - 0.001 * m, 4),
                                    "img_per_s": round(r, 3), "epoch_img_per_s": round(rate * 0.97, 3),
                                    "data_ms": 1.5, "loss_scale": s, "time": round(self.t, 3)}))
            prev = m
        return marks

    def end(self, reason, epoch, step, signal=0):
        self.t += 1.0
        self.lines.append(line({"kind": "end", "reason": reason, "epoch": epoch, "step": step,
                                "signal": signal, "time": round(self.t, 3)}))

    def epoch(self, epoch, rate, time_s, top1, top5, val1, val5, scale=1.0, overflows=0):
        self.t += 20.0
        val = val1 is not None
        self.lines.append(line({
            "kind": "epoch", "epoch": epoch, "step": self.step, "lr": 0.1,
            "train_loss": round(6.5 - 0.4 * epoch, 4), "train_top1": top1, "train_top5": top5,
            "val_loss": round(3.0 - 0.2 * epoch, 4) if val else None, "val_top1": val1,
            "val_top5": val5, "img_per_s": round(rate * 0.97, 3),
            "val_img_per_s": round(rate * 3, 3) if val else None, "time_s": time_s,
            "step_time_s": round(time_s / self.spe, 6), "loss_scale": scale, "overflows": overflows,
            "time": round(self.t, 3)}))


def write_run(parent, name, cfg, text):
    d = os.path.join(OUT, parent, name) if name else os.path.join(OUT, parent)
    os.makedirs(d, exist_ok=True)
    if cfg is not None:
        cfg["run_dir"] = "/scratch/results/" + (name or parent)
        with open(os.path.join(d, "run.json"), "w") as f:
            f.write(json.dumps(cfg, indent=2, sort_keys=True))
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        f.write(text)


def imagenet_run(world, rate, times, vals, epochs=3, opt=0, prec="fp16", job=0, suffix="",
                 repeat_epoch1=False, in_progress=False, stopped_by=None, batch=256, layout=None):
    nodes, rpn = layout or ((1, world) if world <= 4 else (world // 4, 4))
    name = "20261026-%02d0000-gpu01-resnet50-w%d-job%d%s" % (9 + job % 10, world, 1000 + job, suffix)
    cfg = run_json("resnet50", "imagenet", "/scratch/imagenet", "cuda", world, nodes, rpn, batch, epochs,
                   opt=opt, prec=prec, job=str(1000 + job))
    m = Metrics(world, batch, 1251 * 256 // batch // world, 100 if world <= 4 else 40 if world <= 8 else 20)
    for e in range(epochs):
        if in_progress and e == 1:  # three intervals of epoch 1, then a line being written
            n = len(m.lines)
            m.steps(1, rate)
            m.lines = m.lines[:n + 3] + ['{"kind":"step","epoch":1,"epoch_step":1']
            break
        if stopped_by and e == 1:  # three intervals of epoch 1, then the signal: dtrain's end line
            n = len(m.lines)
            m.steps(1, rate)
            m.lines = m.lines[:n + 3]
            m.end("signal", 1, json.loads(m.lines[-1])["step"], stopped_by)
            break
        m.steps(e, rate)
        if repeat_epoch1 and e == 1:  # the crashed attempt's epoch line, then the replay
            m.epoch(1, rate, times[e] + 41.0, 41.0, 66.0, vals[e][0] - 3.0, vals[e][1] - 3.0)
            m.steps(1, rate)
        v1, v5 = vals[e] if vals[e] else (None, None)
        m.epoch(e, rate, times[e], 20.0 + 15 * e, 42.0 + 14 * e, v1, v5)
    if not in_progress and not stopped_by:
        m.end("done", epochs, m.step)
    write_run("results", name, cfg, "".join(m.lines))


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    vals = [(30.12, 55.48), (45.31, 70.42), (52.84, 77.9)]
    imagenet_run(1, 1000.0, [1300.0, 1290.0, 1295.0], vals, job=1)
    imagenet_run(2, 1900.0, [684.5, 680.1, 682.3], [(30.05, 55.41), (45.2, 70.3), (52.77, 77.83)], job=2)
    imagenet_run(4, 3600.0, [361.2, 358.0, 359.9], [(29.9, 55.3), (45.02, 70.11), (52.6, 77.71)], job=3,
                 repeat_epoch1=True)
    imagenet_run(8, 6800.0, [191.3, 189.9, 190.6], [(29.41, 54.9), (44.73, 69.88), (52.18, 77.35)], job=4)
    imagenet_run(16, 12800.0, [102.4], [(28.7, 54.1)], job=6, in_progress=True)
    imagenet_run(4, 3600.0, [361.0], [(29.95, 55.35)], job=8, suffix="-stopped", stopped_by=10)
    imagenet_run(8, 11200.0, [116.1, 115.2, 115.6], [(29.8, 55.2), None, (52.5, 77.6)], opt=2, prec="bf16",
                 job=5, suffix="-o2bf16")
    # the corrupt one: a crash mid-line 9, then a resumed run appending to the same line
    m = Metrics(2, 256, 625, 100)
    m.steps(0, 1900.0)
    m.epoch(0, 1900.0, 684.5, 20.0, 42.0, 30.05, 55.41)
    text = "".join(m.lines)
    text += '{"kind":"step","epoch":1,"epoch_step":100,"st' + m.lines[0]
    text += "".join(m.lines[1:4])
    cfg = run_json("resnet50", "imagenet", "/scratch/imagenet", "cuda", 2, 1, 2, 256, 3, job="1007")
    write_run("results", "20261026-170000-gpu01-resnet50-w2-job1007", cfg, text)
    # 6 GPUs over 2 nodes, 4 + 2
    imagenet_run(6, 4800.0, [267.0, 265.2, 266.1], [(29.5, 54.9), (44.9, 70.0), (52.4, 77.5)], job=11,
                 suffix="-b128", batch=128, layout=(2, 4))
    # CPU ranks: 2 on one node, 3 over two nodes (2 + 1)
    for world, nodes, rpn, rate, job in ((2, 1, 2, 400.0, 9), (3, 2, 2, 576.0, 10)):
        name = "20261026-18%02d00-cpu01-resnet18-w%d-job%d" % (world, world, 1000 + job)
        cfg = run_json("resnet18", "cifar10", "/scratch/cifar10", "cpu", world, nodes, rpn, 64, 2,
                       job=str(1000 + job))
        m = Metrics(world, 64, 781 // world, 50)
        for e in range(2):
            m.steps(e, rate)
            m.epoch(e, rate, round(50000 / rate, 1), 40.0 + 20 * e, 88.0 + 5 * e, 52.3 + 12 * e + world / 10,
                    93.1 + 3 * e)
        m.end("done", 2, m.step)
        write_run("results", name, cfg, "".join(m.lines))
    # metrics.jsonl without run.json
    m = Metrics(1, 64, 100, 50)
    m.steps(0, 500.0)
    write_run("results", "orphan-metrics", None, "".join(m.lines))
    # resnet20 on Fashion-MNIST, dynamic loss scale, --desired-acc 0.9 (run.json: 90, a percent) reached at epoch 3
    cfg = run_json("resnet20", "fashion-mnist", "data/fashion-mnist", "cpu", 1, 1, 1, 128, 10, opt=1,
                   scale="dynamic", scale0=65536.0, desired=90.0)
    m = Metrics(1, 128, 469, 120)
    scales = [[65536.0] * 4, [65536.0, 32768.0, 32768.0, 32768.0],
              [32768.0, 16384.0, 16384.0, 16384.0], [16384.0, 32768.0, 32768.0, 32768.0]]
    fm_vals = [(82.1, 99.1), (86.5, 99.5), (88.9, 99.6), (90.4, 99.8)]
    for e, t in enumerate([60.2, 58.8, 59.6, 59.2]):
        m.steps(e, 1010.0, scales[e])
        m.epoch(e, 1010.0, t, 75.0 + 4 * e, 97.0 + 0.5 * e, fm_vals[e][0], fm_vals[e][1], scale=scales[e][-1],
                overflows=[0, 1, 2, 2][e])
    write_run("fmnist-run", None, cfg, "".join(m.lines))


if __name__ == "__main__":
    main()
