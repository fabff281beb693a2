#!/usr/bin/env python3
"""torch_gpu_resnet50.py: PyTorch's eager training speed for resnet50 on one GPU, the baseline that
tests/gpu/check.sh holds dtrain's CUDA backend against.

torchvision's resnet50 (1000 classes, 224x224), channels_last, SGD (momentum 0.9, weight decay 1e-4),
on one synthetic batch. The input is treated as dtrain --synthetic treats it (--input host, the
default): random uint8 pixels (NHWC) and labels in ordinary (pageable) host memory, uploaded every
step and normalised on the device. --input device keeps a ready float batch on the device instead
(no upload: PyTorch's best case). Precision: autocast fp16 with a GradScaler (default),
--bf16 (autocast bf16, no scaler: bf16 needs none), or --fp32 (no autocast; TF32 off unless --tf32,
so that it matches dtrain's O0, which keeps fp32 in fp32). cuDNN's autotuner is on
(torch.backends.cudnn.benchmark), as dtrain chooses its convolution algorithms by measurement.

--device cpu runs the same on the CPU (autocast there is bf16 only: fp16 runs as bf16 and says
so). It is for rehearsing the GPU check on a machine without a GPU (tests/gpu/check.sh --dry-run):
its numbers mean nothing.

Warm-up steps first (module load, cuDNN's algorithm search, the caching allocator's growth), then
the timed steps between two torch.cuda.synchronize() calls (on the CPU: between two clock reads). The last line of output is the result:

  RESULT torch_gpu_resnet50 precision=fp16 batch=256 steps=20 input=host img_s=2700.1 step_ms=94.81 \
      peak_alloc_mib=21000 peak_reserved_mib=23000 torch=2.11.0 cudnn=91400 device="NVIDIA H200"

(tests/gpu/summary.py reads this line: change both together.)
peak_alloc_mib is torch.cuda.max_memory_allocated() over the whole run (tensors only), and
peak_reserved_mib what the caching allocator held (closer to what nvidia-smi shows, less the
CUDA context).
"""
import argparse
import contextlib
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-a", "--arch", default="resnet50",
                    help="a torchvision model (default resnet50), or vit_test: dtrain's small ViT for 32x32 (its "
                    "fixture's VisionTransformer(32, 8, 2, 4, 64, 128), what the rehearsal runs for vit_b_16)")
    ap.add_argument("-b", "--batch", type=int, default=256, help="images per step (default 256)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--size", type=int, default=224, help="image height and width (default 224)")
    ap.add_argument("--classes", type=int, default=1000)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--bf16", action="store_true", help="autocast to bf16 (no loss scaling)")
    g.add_argument("--fp32", action="store_true", help="no autocast")
    ap.add_argument("--tf32", action="store_true", help="with --fp32: let cuDNN and cuBLAS use TF32")
    ap.add_argument("--no-benchmark", action="store_true", help="cuDNN's heuristics instead of its autotuner")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--input", choices=("host", "device"), default="host",
                    help="host: upload uint8 pixels and labels every step, as dtrain --synthetic (default); "
                    "device: a float batch kept on the device")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: a rehearsal of the script on a machine without a GPU (default cuda)")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import torchvision

    on_gpu = args.device == "cuda"
    if on_gpu and not torch.cuda.is_available():
        print("SKIP: no GPU visible to PyTorch", flush=True)
        return 77
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = not args.no_benchmark
    tf32 = bool(args.fp32 and args.tf32)
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    precision = "bf16" if args.bf16 else "fp32" if args.fp32 else "fp16"
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    if not on_gpu and amp_dtype is not None:
        if precision == "fp16":
            print("note: CPU autocast is bf16 only: fp16 runs as bf16 here", flush=True)
        amp_dtype = torch.bfloat16
    how = {"host": "uint8 pixels and labels uploaded from pageable host memory every step, normalised on the device",
           "device": "a float batch kept on the device"}[args.input]
    print(f"input: {args.input} ({how})", flush=True)

    if args.arch == "vit_test":
        model = torchvision.models.VisionTransformer(32, 8, 2, 4, 64, 128, num_classes=args.classes)
    else:
        model = getattr(torchvision.models, args.arch)(num_classes=args.classes)
    model = model.to(dev, memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    use_scaler = on_gpu and precision == "fp16"
    if hasattr(torch.amp, "GradScaler"):  # PyTorch 2.3 and newer
        scaler = torch.amp.GradScaler("cuda", enabled=use_scaler)
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=use_scaler)
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1)
    u8 = torch.randint(0, 256, (args.batch, args.size, args.size, 3), dtype=torch.uint8)  # NHWC, host
    y_host = torch.randint(0, args.classes, (args.batch,), dtype=torch.int64)

    def upload():
        """the batch on the device, NCHW shape in channels_last memory (NHWC, as uploaded)"""
        u = u8.to(dev)
        return (u.permute(0, 3, 1, 2).float().div_(255) - mean) / std, y_host.to(dev)

    x_dev, y_dev = upload()

    def sync():
        if on_gpu:
            torch.cuda.synchronize()

    def step():
        x, y = upload() if args.input == "host" else (x_dev, y_dev)
        opt.zero_grad(set_to_none=True)
        ctx = torch.autocast(device_type=args.device, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
        with ctx:
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    t0 = time.perf_counter()
    for _ in range(args.warmup):
        loss = step()
    sync()
    warm = time.perf_counter() - t0
    print(f"warm-up: {args.warmup} steps in {warm:.1f} s, loss {loss.item():.4f}", flush=True)

    if on_gpu:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    sync()
    t0 = time.perf_counter()
    if on_gpu:
        start.record()
    for _ in range(args.steps):
        loss = step()
    if on_gpu:
        end.record()
    sync()
    wall = time.perf_counter() - t0
    gpu_ms = start.elapsed_time(end) if on_gpu else 1e3 * wall
    final_loss = loss.item()
    if final_loss != final_loss:
        print("warning: the loss is NaN", flush=True)
    img_s = args.batch * args.steps / wall
    peak = torch.cuda.max_memory_allocated() / 2**20 if on_gpu else 0
    reserved = torch.cuda.max_memory_reserved() / 2**20 if on_gpu else 0
    name = torch.cuda.get_device_name(0) if on_gpu else "cpu"
    cudnn = torch.backends.cudnn.version() if on_gpu else None
    print(f"timed: {args.steps} steps in {wall:.3f} s wall ({gpu_ms / 1e3:.3f} s by CUDA events), loss {final_loss:.4f}",
          flush=True)
    print(f"RESULT torch_gpu_resnet50 arch={args.arch} precision={precision}{'-tf32' if tf32 else ''} batch={args.batch} "
          f"steps={args.steps} input={args.input} img_s={img_s:.1f} step_ms={1e3 * wall / args.steps:.2f} peak_alloc_mib={peak:.0f} "
          f"peak_reserved_mib={reserved:.0f} torch={torch.__version__} cudnn={cudnn} "
          f"device=\"{name}\"", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
