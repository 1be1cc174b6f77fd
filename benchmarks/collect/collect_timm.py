"""timm inference the way timm's benchmark.py measures it (AMP fp16, NCHW, eval + inference_mode, synthetic input),
recorded on the lent GPU at the batch and image size of timm's published tables, for issue 25's cross-generation
check (benchmarks/crossarch/timm_published.py).

The project's copy of ../shared/tools/collect_timm.py, which recorded ../shared/data/timm-published/h100 (2026-11-24):
the same steps and timing, plus options for the output folder, the batch size (timm's RTX PRO 6000 rows use 2048) and
a time budget. Per model: the un-profiled step time as benchmark.py times it (perf_counter, synchronize at each
step's end, mean over 20 steps after 8 warm-up steps), then a torch.profiler trace (record_shapes, 2 active steps).

    python3 benchmarks/collect/collect_timm.py benchmarks/collect/timm_dev_models.txt --out DIR [--batch 2048] [--reparam]

Writes DIR/<model>@<img>.pt.trace.json.gz and DIR/measured.csv (same columns as the shared h100/measured.csv).
"""
import argparse, csv, gc, os, sys, time

import torch
import timm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import record_trace  # noqa: E402


def record(name: str, img: int, bs: int, out: str, reparam: bool = False) -> dict:
    model = timm.create_model(name, pretrained=False).to("cuda").eval()
    if reparam:  # timm benchmark.py --reparam: fuse re-parameterizable branches (MobileOne, FastViT, RepGhost, ...)
        from timm.utils.model import reparameterize_model
        model = reparameterize_model(model)
    x = torch.randn(bs, 3, img, img, device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.float16):
            model(x)

    with torch.inference_mode():
        for _ in range(8):
            step()
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            a = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - a) * 1e3)
        path = os.path.join(out, f"{name}@{img}.pt.trace.json.gz")
        record_trace(step, path)
    ts = sorted(times)
    return dict(model=name, img=img, batch=bs, mean_ms=round(sum(times) / len(times), 3),
                median_ms=round(ts[len(ts) // 2], 3), min_ms=round(ts[0], 3), trace=os.path.basename(path),
                gpu=torch.cuda.get_device_name(), torch=torch.__version__, timm=timm.__version__)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", help='list file: "model img batch" per line')
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=0, help="override the list's batch size (0: keep it)")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--budget-s", type=float, default=540, help="skip what would start after this many seconds")
    ap.add_argument("--reparam", action="store_true", help="as timm benchmark.py --reparam")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    models = [line.split() for line in open(a.models) if line.strip()]
    only = {m for m in a.only.split(",") if m}
    t0, rows = time.time(), []
    for name, img, bs in models:
        if only and name not in only:
            continue
        if time.time() - t0 > a.budget_s:
            print("SKIP (budget)", name, flush=True)
            continue
        t = time.time()
        try:
            rows.append(record(name, int(img), a.batch or int(bs), a.out, a.reparam))
            print(name, img, rows[-1]["batch"], rows[-1]["mean_ms"], f"{time.time() - t:.1f}s", flush=True)
        except Exception as e:  # a model that does not build or run on this GPU is reported and skipped
            print("FAIL", name, repr(e)[:300], flush=True)
        finally:
            gc.collect()
            torch.cuda.empty_cache()
    with open(os.path.join(a.out, "measured.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
