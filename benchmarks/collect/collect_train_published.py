"""AMP training steps the way NVIDIA DeepLearningExamples' PyTorch ConvNets benchmark them, recorded on the lent GPU
for the held-out check against DLE's published 1-GPU training throughput (benchmarks/crossarch/train_published.py).

DLE's setup (PyTorch/Classification/ConvNets, configs.yml and main.py): native AMP (fp16 autocast, GradScaler with a
static loss scale of 128), NHWC (channels_last), SGD momentum 0.875, weight decay 3.0517578125e-05 not applied to the
batch-norm parameters, label smoothing 0.1, cudnn.benchmark, batch 256 (ResNet50) or 128 (ResNeXt101-32x4d) per GPU.
Data loading is left out here: the inputs are synthetic and already on the GPU, so the figures are compute only.

Per config: 10 warm-up steps, 20 un-profiled steps timed with CUDA events (benchmarks/collect/timing.py; median,
p10, p90 and the implied img/s), then torch.profiler (CPU + CUDA, record_shapes=True, schedule wait=1 warmup=1
active=2) exported as <name>.pt.trace.json.gz, and one line appended to ground_truth.jsonl.

    python3 benchmarks/collect/collect_train_published.py --out DIR [--only resnet50_b256,...] [--budget-s 200]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch
import torchvision

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import event_times_ms, record_trace  # noqa: E402

WARMUP, ITERS = 10, 20
# DLE configs.yml: AMP static_loss_scale 128; resnet_params momentum 0.875, label_smoothing 0.1; the 2k/4k optimizer
# batch sizes use weight_decay 1/32768, the 1k ones 1/16384 (ResNeXt101-32x4d)
LOSS_SCALE, MOMENTUM, SMOOTHING = 128.0, 0.875, 0.1


def resnet50() -> torch.nn.Module:
    return torchvision.models.resnet50(weights=None)  # torchvision's ResNet50 is v1.5 (stride in the 3x3 conv)


def resnext101_32x4d() -> torch.nn.Module:
    # DLE's resnext101-32x4d: bottleneck [3, 4, 23, 3], 32 groups of width 4; torchvision ships only 32x8d
    from torchvision.models.resnet import Bottleneck, ResNet
    return ResNet(Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=4)


# name -> (builder, batch, weight decay, learning rate): DLE's per-GPU batch sizes for AMP on DGXA100 / DGX-1
CONFIGS: dict[str, tuple[Callable[[], torch.nn.Module], int, float, float]] = {
    "resnet50_b256": (resnet50, 256, 3.0517578125e-05, 0.256),
    "resnext101_32x4d_b128": (resnext101_32x4d, 128, 6.103515625e-05, 0.128),
}


def make_step(builder: Callable[[], torch.nn.Module], batch: int, wd: float, lr: float) -> Callable[[], None]:
    torch.manual_seed(0)
    model = builder().cuda().to(memory_format=torch.channels_last).train()
    # DLE: no weight decay on batch-norm parameters (bn_weight_decay false); the 1-D tensors here are BN gamma/beta
    # and the classifier bias
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.SGD([{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": wd}],
                          lr=lr, momentum=MOMENTUM)
    scaler = torch.amp.GradScaler("cuda", init_scale=LOSS_SCALE, growth_interval=1_000_000_000)  # static scale
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=SMOOTHING)
    x = torch.randn(batch, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


def record(name: str, out: Path) -> dict:
    builder, batch, wd, lr = CONFIGS[name]
    t0 = time.time()
    step = make_step(builder, batch, wd, lr)
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    times = sorted(event_times_ms(step, ITERS))
    median = statistics.median(times)
    gz = out / f"{name}.pt.trace.json.gz"
    record_trace(step, str(gz))
    return dict(workload=name, model=builder.__name__, batch=batch, image=224, precision="amp_fp16",
                memory_format="channels_last", gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                torchvision=torchvision.__version__, cuda=torch.version.cuda,
                cudnn=torch.backends.cudnn.version(), iters=ITERS, median_ms=round(median, 4),
                mean_ms=round(statistics.fmean(times), 4), p10_ms=round(times[len(times) // 10], 4),
                p90_ms=round(times[(9 * len(times)) // 10], 4), img_per_s=round(batch / median * 1e3, 1),
                trace=gz.name, trace_gz_bytes=gz.stat().st_size, record_shapes=True, profiled_steps=2,
                collect_s=round(time.time() - t0, 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default="", help=f"comma-separated names from {sorted(CONFIGS)}")
    ap.add_argument("--budget-s", type=float, default=200, help="skip a config that would start after this")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.benchmark = True  # DLE main.py sets it
    names = [n for n in CONFIGS if not a.only or n in a.only.split(",")]
    t0 = time.time()
    for name in names:
        if time.time() - t0 > a.budget_s:
            print("SKIP (budget)", name, flush=True)
            continue
        try:
            row = record(name, a.out)
            print(json.dumps(row), flush=True)
            with open(a.out / "ground_truth.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
        except Exception as e:  # one config failing is reported; the others still run
            print("FAIL", name, repr(e)[:400], flush=True)
        finally:
            gc.collect()
            torch.cuda.empty_cache()
    props = torch.cuda.get_device_properties(0)
    (a.out / "device.json").write_text(json.dumps(dict(
        name=props.name, sms=props.multi_processor_count, memory_gib=round(props.total_memory / 2**30, 1),
        torch=torch.__version__, cuda=torch.version.cuda, driver_smi=os.popen("nvidia-smi --query-gpu="
        "driver_version,clocks.max.sm,power.limit --format=csv,noheader").read().strip()), indent=1))


if __name__ == "__main__":
    main()
