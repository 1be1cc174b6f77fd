"""Record Kineto traces of NeuSight's end-to-end label workloads (HF models from NeuSight's configs, FP32, eager
attention, forward+backward without optimizer for train, no_grad forward for inf) and time them the way NeuSight's
neusight/Tracing/trace.py measure_e2e does (gc + empty_cache before each iteration; CUDA events around forward and
backward; mean of the fastest 5). Run on a device machine:
    python3 benchmarks/collect/collect_neusight.py --out DIR [--only bert_large-train-512-2,...] [--iters 12]
The project's copy of ../shared/tools/collect_neusight.py (the script that recorded ../shared/data/neusight-e2e on the
H100), unchanged but for this line and the path; used to record the same workloads on the H200 (issue 25: the
cross-generation prediction must not depend on which GPU recorded the trace).
"""
import argparse, gc, gzip, json, os, shutil, time, traceback

import torch
import torch.nn.functional as F

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOADS = [
    "bert_large-train-512-2", "bert_large-train-512-8", "gpt2_large-train-1024-1", "gpt2_large-train-1024-4",
    "opt_13-train-2048-1", "opt_13-train-2048-2", "gpt3_xl-train-2048-1", "gpt3_27-train-2048-1",
    "bert_large-inf-512-8", "bert_large-inf-512-16", "gpt2_large-inf-1024-4", "gpt2_large-inf-1024-8",
    "opt_13-inf-2048-2", "opt_13-inf-2048-8", "gpt3_xl-inf-2048-2", "gpt3_xl-inf-2048-8",
    "gpt3_27-inf-2048-2", "gpt3_27-inf-2048-8",
]


def build(model_name, is_train):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForPreTraining, AutoModelForSequenceClassification
    cfg = json.load(open(os.path.join(HERE, "neusight_configs", model_name + ".json")))
    arch = cfg["architectures"][0].lower()
    d = dict(cfg)
    config = AutoConfig.for_model(d.pop("model_type"), **d)
    if is_train:
        cls = AutoModelForPreTraining if "bert" in arch else AutoModelForCausalLM
    else:
        cls = AutoModelForSequenceClassification if "bert" in arch else AutoModelForCausalLM
    with torch.device("cuda"):
        model = cls.from_config(config, attn_implementation="eager")
    return model.train() if is_train else model.eval()


def one(model, ids, is_train, ev):
    """One NeuSight iteration: returns (fw_ms, bw_ms)."""
    s, e = ev
    if is_train:
        s.record(); out = model(ids); e.record(); torch.cuda.synchronize(); fw = s.elapsed_time(e)
        logits = out["prediction_logits"] if "prediction_logits" in out else out["logits"]
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), ids.view(-1))
        out = logits = None
        s.record(); loss.backward(); e.record(); loss = None; torch.cuda.synchronize(); bw = s.elapsed_time(e)
        return fw, bw
    with torch.no_grad():
        s.record(); model(ids); e.record(); torch.cuda.synchronize()
        return s.elapsed_time(e), 0.0


def run(name, out, iters):
    model_name, mode, seq, bs = name.split("-")
    is_train = mode == "train"
    model = build(model_name, is_train)
    ids = torch.ones(int(bs), int(seq), dtype=torch.int64, device="cuda")
    ev = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    for _ in range(2):
        one(model, ids, is_train, ev)
    fws, bws = [], []
    for _ in range(iters):
        gc.collect(); torch.cuda.empty_cache()
        fw, bw = one(model, ids, is_train, ev)
        fws.append(fw); bws.append(bw)
    k = min(5, iters)
    fw = sum(sorted(fws)[:k]) / k
    bw = sum(sorted(bws)[:k]) / k
    from torch.profiler import profile, ProfilerActivity, schedule
    path = os.path.join(out, f"{name}.pt.trace.json")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=2),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(3):
            gc.collect(); torch.cuda.empty_cache()
            one(model, ids, is_train, ev)
            prof.step()
    torch.cuda.synchronize()
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    raw = os.path.getsize(path)
    os.remove(path)
    del model
    gc.collect(); torch.cuda.empty_cache()
    return dict(workload=name, gpu=torch.cuda.get_device_name(), torch=torch.__version__, iters=iters,
                e2e_ms=fw + bw, fw_ms=fw, bw_ms=bw, fw_all=fws, bw_all=bws, trace_bytes=raw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--budget-s", type=float, default=480)
    a = ap.parse_args()
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    import transformers
    p = torch.cuda.get_device_properties(0)
    info = dict(name=p.name, sms=p.multi_processor_count, torch=torch.__version__, cuda=torch.version.cuda,
                cudnn=torch.backends.cudnn.version(), transformers=transformers.__version__)
    print(json.dumps(info), flush=True)
    json.dump(info, open(os.path.join(a.out, "device.json"), "w"))
    names = [n for n in a.only.split(",") if n] or WORKLOADS
    with open(os.path.join(a.out, "labels.jsonl"), "a") as gt:
        for n in names:
            if time.time() - t0 > a.budget_s:
                print("SKIP (budget)", n, flush=True)
                continue
            try:
                t = time.time()
                r = run(n, a.out, a.iters)
                r["collect_s"] = round(time.time() - t, 1)
                gt.write(json.dumps(r) + "\n"); gt.flush()
                print(n, round(r["e2e_ms"], 1), "ms", r["collect_s"], "s", flush=True)
            except Exception:
                traceback.print_exc()
                print("FAILED", n, flush=True)
            gc.collect(); torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
