"""Measure torch.profiler's host overhead per workload, and the launch queue's depth (issue 16).

Per workload, after warm-up: the un-profiled iteration (synced median between CUDA events, steady
back-to-back wall time, host issue time of step() started on an idle GPU), then the same for six
profiler variants (a: CPU+CUDA record_shapes, our default; b: no shapes; c: +with_stack;
d: +profile_memory; e: CUDA activity only; f: CPU activity only), each ``--active`` recorded steps started
on an idle GPU, with per-step counts and trivial-event durations read from its exported trace. Variant
(a)'s trace is kept (gzipped, trimmed to its first ``--trace-steps`` steps). The
launch-queue probe runs first: a long spin kernel holds the stream, tiny kernels are launched behind it and
each launch is timed on the host; the first launch that waits for the spin marks the queue's depth. An
allocator probe times a cached allocation, a fresh cudaMalloc and empty_cache() behind the same spin.

    python benchmarks/collect/profiler_overhead.py --out DIR [--only a,b] [--budget-s 420]
    python benchmarks/collect/profiler_overhead.py --dry-run --out /tmp/oh   # CPU: tiny sizes, CPU profiler

Writes DIR/overhead.jsonl (one line per workload and variant), DIR/queue.json, DIR/device.json and
DIR/traces/<workload>.pt.trace.json.gz.

Host issue time: step() is timed from an idle GPU (synchronize first) to its return. It is the CPU's
cost only while fewer launches are pending than the queue holds and no op syncs; a GPU-bound step with
more launches than the queue depth blocks the host. Compare ``n_cuda_runtime_per_step`` with queue.json's
depth and ``issue_ms`` with ``median_ms`` to tell (the recorded workloads with more launches than the
depth are CPU-bound, so the GPU drains the queue as fast as they fill it).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from collect_traces import gzip_to, run_each  # noqa: E402
from workloads import WORKLOADS, Built, SkipWorkload, Workload, _train_step  # noqa: E402

WARMUP_ITERS = 5
PROFILE_WAIT, PROFILE_WARMUP = 1, 1
TRIVIAL_OPS = ("aten::empty", "aten::view", "aten::detach", "aten::as_strided", "aten::t",
               "aten::transpose", "aten::expand", "aten::reshape", "aten::empty_strided", "aten::slice")
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
VARIANTS: dict[str, dict[str, Any]] = {
    "a_shapes": dict(cpu=True, record_shapes=True),
    "b_noshapes": dict(cpu=True, record_shapes=False),
    "c_stack": dict(cpu=True, record_shapes=True, with_stack=True),
    "d_memory": dict(cpu=True, record_shapes=True, profile_memory=True),
    "e_cudaonly": dict(cpu=False, record_shapes=False),
    "f_cpuonly": dict(cpu=True, cuda=False, record_shapes=True),
}


# ---------------------------------------------------------------- extra workloads
def small_mlp(dev: torch.device, tiny: bool) -> Built:
    """Launch-bound: 8 small linears, batch 32, Adam (foreach): CPU time sets the iteration."""
    width = 64 if tiny else 512
    model = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(width, width), nn.ReLU())]).to(dev)
    x, y = torch.randn(32, width, device=dev), torch.randn(32, width, device=dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return Built(_train_step(model, opt, lambda: F.mse_loss(model(x), y), dev, amp=False))


def small_mlp_sgd_loop(dev: torch.device, tiny: bool) -> Built:
    """Many tiny ops per launch: SGD with foreach=False (one aten op per parameter and update)."""
    width = 64 if tiny else 256
    model = nn.Sequential(*[m for _ in range(16) for m in (nn.Linear(width, width), nn.Tanh())]).to(dev)
    x, y = torch.randn(16, width, device=dev), torch.randn(16, width, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False)
    return Built(_train_step(model, opt, lambda: F.mse_loss(model(x), y), dev, amp=False))


def _transformers():
    try:
        import transformers
    except ImportError as exc:
        raise SkipWorkload(f"transformers not importable ({exc})") from exc
    return transformers


def hf_gpt2(dev: torch.device, tiny: bool) -> Built:
    tr = _transformers()
    cfg = tr.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256) if tiny else tr.GPT2Config()
    model = tr.GPT2LMHeadModel(cfg).to(dev)
    idx = torch.randint(0, cfg.vocab_size, (2 if tiny else 8, 32 if tiny else 512), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: model(idx, labels=idx).loss, dev, amp=True), "HF GPT-2 small, bf16 autocast")


def hf_bert(dev: torch.device, tiny: bool) -> Built:
    tr = _transformers()
    cfg = (tr.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                         vocab_size=256) if tiny else tr.BertConfig())
    model = tr.BertForSequenceClassification(cfg).to(dev)
    idx = torch.randint(0, cfg.vocab_size, (4 if tiny else 32, 128), device=dev)
    y = torch.randint(0, 2, (idx.shape[0],), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: model(idx, labels=y).loss, dev, amp=True), "HF BERT-base, bf16 autocast")


def hf_gpt2_decode(dev: torch.device, tiny: bool) -> Built:
    """LLM decode loop: prefill 64 tokens then 16 greedy steps with the KV cache, batch 1, no host syncs."""
    tr = _transformers()
    cfg = tr.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256) if tiny else tr.GPT2Config()
    model = tr.GPT2LMHeadModel(cfg).to(dev).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, 64), device=dev)
    new_tokens = 4 if tiny else 16

    def step() -> None:
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16):
            out = model(prompt, use_cache=True)
            for _ in range(new_tokens):
                tok = out.logits[:, -1:].argmax(-1)
                out = model(tok, past_key_values=out.past_key_values, use_cache=True)
    return Built(step, f"HF GPT-2 small decode, {new_tokens} tokens, bf16 autocast")


def timm_model(dev: torch.device, tiny: bool) -> Built:
    try:
        import timm
    except ImportError as exc:
        raise SkipWorkload(f"timm not importable ({exc})") from exc
    name, bs, res = ("resnet18", 2, 32) if tiny else ("convnext_tiny", 64, 224)
    model = timm.create_model(name, pretrained=False).to(dev, memory_format=torch.channels_last)
    x = torch.randn(bs, 3, res, res, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (bs,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Built(_train_step(model, opt, lambda: F.cross_entropy(model(x), y), dev, amp=True), f"timm {name}")


EXTRA = [Workload("mlp8_w512_b32_fp32", small_mlp, 15), Workload("mlp16_w256_sgdloop_fp32", small_mlp_sgd_loop, 15),
         Workload("hf_gpt2_b8_s512_amp", hf_gpt2, 30), Workload("hf_bert_b32_s128_amp", hf_bert, 30),
         Workload("hf_gpt2_decode16_b1", hf_gpt2_decode, 30), Workload("timm_convnext_tiny_b64_amp", timm_model, 30)]
REUSED = ["llama_d1024_l8_b4_s1024_bf16", "t5_d768_l6_b16_s256_amp", "resnet152_b32_cl_amp",
          "unet_c128_b16_64px_amp", "moe_top2_e8_d1024_b8_s1024_bf16", "graphsage_n200k_e2m_fp32"]
ALL: dict[str, Workload] = {w.name: w for w in EXTRA + [WORKLOADS[n] for n in REUSED]}


# ---------------------------------------------------------------- timing
def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def timed_steps(step: Callable[[], None], n: int, dev: torch.device,
                after: Callable[[], None] = lambda: None) -> tuple[list[float], list[float]]:
    """Per step: host issue time (idle GPU -> step() returns) and synced time (-> GPU done), in ms."""
    issue, synced = [], []
    for _ in range(n):
        sync(dev)
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        sync(dev)
        t2 = time.perf_counter()
        after()
        issue.append((t1 - t0) * 1e3)
        synced.append((t2 - t0) * 1e3)
    return issue, synced


def steady_ms(step: Callable[[], None], n: int, dev: torch.device, after: Callable[[], None] = lambda: None) -> float:
    sync(dev)
    t = time.perf_counter()
    for _ in range(n):
        step()
        after()
    sync(dev)
    return (time.perf_counter() - t) * 1e3 / n


def event_median_ms(step: Callable[[], None], n: int, dev: torch.device) -> float | None:
    if dev.type != "cuda":
        return None
    from timing import event_times_ms
    return statistics.median(event_times_ms(step, n))


# ---------------------------------------------------------------- trace evidence
def trace_summary(path: str, n_steps: int, keep_steps: int) -> dict[str, Any]:
    """Per-step counts and trivial-event duration quantiles (µs) from an exported chrome trace; rewrites the
    file with only its first ``keep_steps`` steps when ``keep_steps`` > 0 (steps are synced, so nothing of
    a kept step's GPU work lies past the next step's start)."""
    with open(path) as f:
        doc = json.load(f)
    events = doc.get("traceEvents", [])
    steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    counts: dict[str, int] = {}
    shapes = 0
    trivial: list[float] = []
    launch: list[float] = []
    for e in events:
        if e.get("ph") not in ("X", "i", "I"):
            continue
        cat = str(e.get("cat", ""))
        name = str(e.get("name", ""))
        key = "memory" if name == "[memory]" else cat
        counts[key] = counts.get(key, 0) + 1
        if cat == "cpu_op":
            if "Input Dims" in e.get("args", {}):
                shapes += 1
            if name in TRIVIAL_OPS:
                trivial.append(float(e.get("dur", 0)))
        elif cat == "cuda_runtime" and name in LAUNCH_CALLS:
            launch.append(float(e.get("dur", 0)))
    step_dur = sorted(float(s["dur"]) / 1e3 for s in steps)
    out: dict[str, Any] = {f"n_{k}_per_step": round(v / n_steps, 1) for k, v in counts.items()}
    out.update(n_shapes_per_step=round(shapes / n_steps, 1), trace_steps=len(steps),
               trace_step_ms=statistics.median(step_dur) if step_dur else None,
               trace_step_min_ms=step_dur[0] if step_dur else None)
    if 0 < keep_steps < len(steps):
        cut = steps[keep_steps]["ts"]
        doc["traceEvents"] = [e for e in events if "ts" not in e or float(e["ts"]) < cut]
        with open(path, "w") as f:
            json.dump(doc, f)
    for label, xs in (("trivial_op", trivial), ("launch", launch)):
        xs.sort()
        if xs:
            out.update({f"{label}_us_p10": xs[len(xs) // 10], f"{label}_us_p50": xs[len(xs) // 2],
                        f"{label}_us_min": xs[0], f"{label}_n": len(xs)})
    return out


def profiled(step: Callable[[], None], dev: torch.device, variant: dict[str, Any], active: int,
             raw_path: str, keep_steps: int) -> dict[str, Any]:
    """``active`` recorded steps, each started on an idle GPU (synchronize, step(), time, synchronize): the host
    issue time and synced time while recording; then the trace's counts. Profiler warm-up steps do not record
    CPU ops (RecordFunction callbacks start with the active phase), so only active steps are timed."""
    cuda = dev.type == "cuda" and variant.get("cuda", True)
    acts = ([ProfilerActivity.CPU] if variant["cpu"] else []) + ([ProfilerActivity.CUDA] if cuda else [])
    if not acts:
        acts = [ProfilerActivity.CPU]  # dry run of the CUDA-only variant: keep the code path alive
    kw = {k: v for k, v in variant.items() if k not in ("cpu", "cuda")}
    with profile(activities=acts, schedule=schedule(wait=PROFILE_WAIT, warmup=PROFILE_WARMUP, active=active),
                 on_trace_ready=lambda p: p.export_chrome_trace(raw_path), **kw) as prof:
        for _ in range(PROFILE_WAIT + PROFILE_WARMUP):
            step()
            prof.step()
        issue, synced = timed_steps(step, active - 1, dev, after=prof.step)
        i_last, s_last = timed_steps(step, 1, dev)  # the last prof.step() exports: keep it out of the timing
        t_export = time.perf_counter()
        prof.step()
    issue, synced = issue + i_last, synced + s_last
    r = dict(prof_issue_ms=statistics.median(issue), prof_issue_min_ms=min(issue), prof_synced_ms=statistics.median(synced),
             export_s=round(time.perf_counter() - t_export, 2))
    r.update(trace_summary(raw_path, active, keep_steps))
    return r


def measure(w: Workload, dev: torch.device, a: argparse.Namespace) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    built = w.build(dev, a.dry_run)
    for _ in range(WARMUP_ITERS if not a.dry_run else 1):
        built.step()
    sync(dev)
    issue, synced = timed_steps(built.step, a.iters, dev)
    base = dict(workload=w.name, note=built.note, variant="none", median_ms=event_median_ms(built.step, a.iters, dev),
                steady_wall_ms=steady_ms(built.step, a.iters, dev), issue_ms=statistics.median(issue),
                issue_p10_ms=sorted(issue)[len(issue) // 10], synced_ms=statistics.median(synced))
    rows = [base]
    tmp = os.path.join(a.out, "tmp.json")
    for vname, variant in VARIANTS.items():
        if a.variants and vname not in a.variants.split(","):
            continue
        keep = a.trace_steps if vname == "a_shapes" else 0
        r = dict(workload=w.name, variant=vname, **profiled(built.step, dev, variant, a.active, tmp, keep))
        if vname == "a_shapes":
            os.makedirs(os.path.join(a.out, "traces"), exist_ok=True)
            r["trace_gz_bytes"] = gzip_to(tmp, os.path.join(a.out, "traces", f"{w.name}.pt.trace.json.gz"))
        os.remove(tmp)
        rows.append(r)
    return rows


# ---------------------------------------------------------------- launch queue
def spin_cycles_per_s() -> float:
    """torch.cuda._sleep counts SM cycles: calibrate cycles per second with CUDA events."""
    torch.cuda._sleep(1_000_000)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(50_000_000)
    end.record()
    torch.cuda.synchronize()
    return 50_000_000 / (start.elapsed_time(end) * 1e-3)


def queue_probe(n_launch: int = 8192, spin_ms: float = 300.0) -> dict[str, Any]:
    """Depth of one stream's launch queue: hold it with a spin kernel, launch tiny kernels behind it, time each."""
    dev = torch.device("cuda")
    clock_hz = spin_cycles_per_s()
    x = torch.zeros(16, device=dev)
    out: dict[str, Any] = {}
    out["spin_cycles_per_s"] = clock_hz
    for label, launch in (("sleep0", lambda: torch.cuda._sleep(0)), ("add_", lambda: x.add_(1.0))):
        for _ in range(20):
            launch()
        torch.cuda.synchronize()
        torch.cuda._sleep(int(spin_ms * 1e-3 * clock_hz))
        ts = []
        for _ in range(n_launch):
            t0 = time.perf_counter_ns()
            launch()
            ts.append(time.perf_counter_ns() - t0)
        torch.cuda.synchronize()
        blocked = [i for i, t in enumerate(ts) if t > 0.2 * spin_ms * 1e6]
        first = blocked[0] if blocked else None
        after = ts[first + 1:first + 501] if first is not None else []
        out[label] = dict(depth=first, blocked_launch_ms=ts[first] / 1e6 if first is not None else None,
                          unblocked_launch_us_p50=statistics.median(ts[:first or n_launch]) / 1e3,
                          after_block_launch_us_p50=statistics.median(after) / 1e3 if after else None,
                          n_launch=n_launch, spin_ms=spin_ms)
    out["allocator"] = allocator_probe(clock_hz, spin_ms)
    return out


def allocator_probe(clock_hz: float, spin_ms: float) -> dict[str, Any]:
    """Does the caching allocator block behind a busy GPU? Cached reuse, a fresh cudaMalloc, and empty_cache."""
    dev = torch.device("cuda")
    r: dict[str, Any] = {}
    a = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
    del a  # now cached
    for label, fn in (("cached_alloc", lambda: torch.empty(64 << 20, dtype=torch.uint8, device=dev)),
                      ("fresh_cudamalloc", lambda: torch.empty(1 << 30, dtype=torch.uint8, device=dev)),
                      ("empty_cache", torch.cuda.empty_cache)):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(spin_ms * 1e-3 * clock_hz))
        t0 = time.perf_counter_ns()
        keep = fn()
        r[f"{label}_ms"] = (time.perf_counter_ns() - t0) / 1e6
        del keep
        torch.cuda.synchronize()
    r["spin_ms"] = spin_ms
    return r


# ---------------------------------------------------------------- main
def device_info(dev: torch.device) -> dict[str, Any]:
    import platform
    info: dict[str, Any] = dict(torch=torch.__version__, cpu=platform.processor(), cpus=os.cpu_count(),
                                python=platform.python_version())
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update(name=p.name, sms=p.multi_processor_count, cuda=torch.version.cuda)
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    return info


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated workload names (default: all)")
    ap.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--active", type=int, default=5, help="recorded steps per variant, each timed from an idle GPU")
    ap.add_argument("--trace-steps", type=int, default=2, help="active steps of variant a (kept trace)")
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--dry-run", action="store_true", help="CPU: tiny sizes, CPU profiler only")
    ap.add_argument("--no-queue", action="store_true")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    t_start = time.time()
    a = parse_args(argv)
    dev = torch.device("cpu" if a.dry_run else "cuda")
    os.makedirs(a.out, exist_ok=True)
    info = device_info(dev)
    print(json.dumps(info), flush=True)
    with open(os.path.join(a.out, "device.json"), "w") as f:
        json.dump(info, f)
    if dev.type == "cuda" and not a.no_queue:
        q = queue_probe()
        print(json.dumps(q), flush=True)
        with open(os.path.join(a.out, "queue.json"), "w") as f:
            json.dump(q, f)
    names = [n for n in a.only.split(",") if n] or list(ALL)

    def after() -> None:
        sync(dev)
        if dev.type == "cuda":
            torch.cuda.empty_cache()

    with open(os.path.join(a.out, "overhead.jsonl"), "a") as out:
        return run_each([ALL[n] for n in names], out, a.budget_s, t_start, lambda w: measure(w, dev, a), after)


if __name__ == "__main__":
    sys.exit(main())
