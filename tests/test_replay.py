"""Replay: identity reproduces every time exactly; scaled timelines keep launch order, stream order and
the launch-bound / GPU-bound character of a step (issue 4)."""
from __future__ import annotations

import numpy as np
import pytest

from habitat_trace.timeline.links import blocking_calls
from habitat_trace.timeline.replay import cpu_map, replay
from habitat_trace.timeline.schedule import Breaks
from habitat_trace.ingest import load
from habitat_trace.ingest import schema as S
from habitat_trace.timeline.steps import step_figures
from tests.conftest import DATA, EXTERNAL, TRACES, needs_shared
from tests.emit_helpers import scaled

FIXTURE = DATA / "emit_mlp_h100.pt.trace.json.gz"
SHARED = ["h100-sxm/mlp_b32_fp32", "h100-sxm/vgg16_b32_fp32", "h100-sxm/gnmt_b64_fp32",
          "h100-sxm/resnet50_b64_amp", "h200-sxm/gpt2_b8_s1024_amp_compiled", "h100-sxm-sm64/bert_b32_s128_amp_sm64"]
EXTERNALS = ["a100_cuda_event_sync.json.gz", "a100_nccl.json.gz", "v100_resnet50_2021_tbplugin.pt.trace.json.gz"]


def _shared_path(name: str):
    return (TRACES / f"{name}.pt.trace.json.gz") if "/" in name else EXTERNAL / name


def _moved(tl) -> np.ndarray:
    """Which events' ts or dur differ from the origin's."""
    return (tl.ts_ns != tl.old_ts_ns) | (tl.dur_ns != tl.old_dur_ns)


def test_identity_fixture() -> None:
    trace = load(FIXTURE)
    tl = replay(trace, scaled(trace))
    assert not _moved(tl).any()
    assert (tl.gpu_start_ns == trace.gpu[S.TS].to_numpy()).all()


@needs_shared
@pytest.mark.parametrize("name", SHARED + EXTERNALS)
def test_identity_shared(name: str) -> None:
    trace = load(_shared_path(name))
    assert not _moved(replay(trace, scaled(trace))).any()


def _invariants(trace, tl) -> None:
    gpu, calls = trace.gpu, trace.calls
    assert len(tl.gpu_start_ns) == len(gpu)
    assert (tl.gpu_end_ns - tl.gpu_start_ns > 0).all()
    launch = gpu[S.LAUNCH].to_numpy()
    # a blocking copy's call ends after its own copy by definition: only other launches are compared
    has = (launch >= 0) & ~np.isin(launch, blocking_calls(trace)[0])
    cev = calls[S.EVENT].to_numpy()[launch[has]]
    new_lat = tl.gpu_start_ns[has] - (tl.ts_ns[cev] + tl.dur_ns[cev])
    old_lat = gpu[S.TS].to_numpy()[has] - calls[S.END].to_numpy()[launch[has]]
    # no kernel starts before its launch ends, unless the origin's call returned after its kernel started
    assert (new_lat >= np.minimum(old_lat, 0)).all()
    order = np.lexsort((gpu[S.TS].to_numpy(), gpu[S.STREAM].to_numpy(), gpu[S.DEVICE].to_numpy()))
    same = (np.diff(gpu[S.STREAM].to_numpy()[order]) == 0) & (np.diff(gpu[S.DEVICE].to_numpy()[order]) == 0)
    old_ov = (gpu[S.END].to_numpy()[order][:-1] - gpu[S.TS].to_numpy()[order][1:])[same]
    new_ov = (tl.gpu_end_ns[order][:-1] - tl.gpu_start_ns[order][1:])[same]
    assert (new_ov <= np.maximum(old_ov, 0)).all()  # no same-stream overlap the origin did not have
    assert (tl.gpu_start_ns[order][1:][same] >= tl.gpu_start_ns[order][:-1][same]).all()
    timed = tl.dur_ns != np.iinfo(np.int64).min
    assert (tl.dur_ns[timed] >= 0).all()


@pytest.mark.parametrize("factor", [0.5, 2.0, 0.1])
def test_invariants_fixture(factor: float) -> None:
    trace = load(FIXTURE)
    _invariants(trace, replay(trace, scaled(trace, factor)))


@needs_shared
@pytest.mark.parametrize("name", SHARED + EXTERNALS)
@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_invariants_shared(name: str, factor: float) -> None:
    trace = load(_shared_path(name))
    _invariants(trace, replay(trace, scaled(trace, factor)))


def _figures(trace, tl):
    gpu = trace.gpu.assign(**{S.TS: tl.gpu_start_ns, S.END: tl.gpu_end_ns})
    return step_figures(trace.steps, gpu)


def test_launch_bound_step_stays_launch_bound() -> None:
    trace = load(FIXTURE)
    tl = replay(trace, scaled(trace, 0.5))
    steps = trace.steps[S.EVENT].to_numpy()
    np.testing.assert_allclose(tl.dur_ns[steps], trace.steps[S.DUR].to_numpy(), rtol=0.01)
    old, new = step_figures(trace.steps, trace.gpu), _figures(trace, tl)
    assert new.mean_ms("gpu_busy_ns") == pytest.approx(old.mean_ms("gpu_busy_ns") * 0.5, rel=0.05)
    assert new.mean_ms("gpu_span_ns") == pytest.approx(old.mean_ms("gpu_span_ns"), rel=0.05)  # GPU idles


@needs_shared
def test_gpu_bound_step_compresses() -> None:
    trace = load(TRACES / "h100-sxm/vgg16_b32_fp32.pt.trace.json.gz")
    old = step_figures(trace.steps, trace.gpu)
    for factor in (0.5, 2.0):
        new = _figures(trace, replay(trace, scaled(trace, factor)))
        assert new.mean_ms("gpu_span_ns") == pytest.approx(old.mean_ms("gpu_span_ns") * factor, rel=0.05)


def test_cpu_map_squeezes_inside_a_wait_and_shifts_after() -> None:
    # one wait [100, 200) that now ends at 150: shift -50 after it, times inside clipped to 150
    br = Breaks(np.array([100]), np.array([200]), np.array([150]))
    out = cpu_map(np.array([50, 100, 120, 180, 199, 200, 300]), br)
    assert out.tolist() == [50, 100, 120, 150, 150, 150, 250]
    assert (np.diff(out) >= 0).all()


def _two_stream_trace(tmp_path):
    """K1 on stream 7, an event recorded after it, stream 8 made to wait on that event, K2 on stream 8."""
    import orjson

    def call(name, ts, dur, corr):
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"correlation": corr}}

    def kernel(ts, dur, stream, corr):
        return {"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                "args": {"correlation": corr, "stream": stream, "device": 0}}

    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::work", "pid": 1, "tid": 1, "ts": 99.0, "dur": 20.0},
              call("cudaLaunchKernel", 100.0, 5.0, 1), call("cudaEventRecord", 106.0, 2.0, 2),
              call("cudaStreamWaitEvent", 109.0, 2.0, 3), call("cudaLaunchKernel", 112.0, 5.0, 4),
              kernel(106.0, 20.0, 7, 1), kernel(127.0, 5.0, 8, 4)]
    path = tmp_path / "two_streams.json"
    path.write_bytes(orjson.dumps({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                                   "traceEvents": events}))
    return load(path)


def test_stream_wait_event_delays_the_waiting_stream(tmp_path) -> None:
    trace = _two_stream_trace(tmp_path)
    # K2 launched at 117 µs but started at 127 µs, 1 µs after K1 ended: it waited on K1, not on its launch
    slow = replay(trace, scaled(trace, 2.0))
    assert slow.gpu_start_ns.tolist() == [106_000, 147_000]  # K1 now ends at 146 µs; K2 1 µs later, as before
    fast = replay(trace, scaled(trace, 0.5))
    assert fast.gpu_start_ns[0] == 106_000
    # K1 ends at 116 µs: K2 only waits for its launch (ends 117 µs) + the trace's idle launch latency (1 µs)
    assert fast.gpu_start_ns[1] == 118_000


def _deferred_waits_trace(tmp_path, kernel="ncclDevKernel_AllReduce_Sum_f32_RING_LL"):
    """DDP's reducer at the end of backward, trimmed: one thread launches two all-reduces on stream 8 (N1, N2), an
    event recorded after each, then waits on both on stream 7 before copying each bucket back (M1, M2). The
    all-reduces ran long (they waited for a slower peer): M1 started 1 µs after N1 ended, M2 1 µs after N2."""
    import dataclasses

    import orjson

    def call(name, ts, dur, corr):
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"correlation": corr}}

    def gpu(cat, name, ts, dur, stream, corr):
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                "args": {"correlation": corr, "stream": stream, "device": 0}}

    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::work", "pid": 1, "tid": 1, "ts": 9.0, "dur": 80.0},
              call("cudaLaunchKernel", 10.0, 5.0, 1), call("cudaLaunchKernel", 16.0, 5.0, 2),
              call("cudaEventRecord", 22.0, 1.0, 3), call("cudaLaunchKernel", 24.0, 5.0, 4),
              call("cudaEventRecord", 30.0, 1.0, 5),
              call("cudaStreamWaitEvent", 40.0, 1.0, 6), call("cudaMemcpyAsync", 42.0, 3.0, 7),
              call("cudaStreamWaitEvent", 50.0, 1.0, 8), call("cudaMemcpyAsync", 52.0, 3.0, 9),
              gpu("kernel", "k_grad", 20.0, 70.0, 7, 1),
              gpu("kernel", kernel, 100.0, 100.0, 8, 2), gpu("kernel", kernel, 200.0, 100.0, 8, 4),
              gpu("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 201.0, 2.0, 7, 7),
              gpu("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 301.0, 2.0, 7, 9)]
    path = tmp_path / "deferred_waits.json"
    path.write_bytes(orjson.dumps({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                                   "traceEvents": events}))
    trace = load(path)
    dur = trace.gpu[S.DUR].to_numpy().copy()
    dur[(trace.gpu[S.STREAM] == 8).to_numpy()] = 10_000  # the transfers alone
    return trace, dataclasses.replace(scaled(trace, 1.0), dur_ns=dur)


def test_deferred_stream_waits_follow_the_work_they_awaited(tmp_path) -> None:
    """Pins the joint replay's over-prediction of DDP steps (issue 31): each bucket's copy followed its own
    all-reduce, not the thread's latest event (links.py binds both waits to N2's record: M1 had started before N2
    ended, so that link was dropped), and the 111 µs M1 spent waiting on N1 was kept as a gap on its own stream, so
    M1 stayed 111 µs behind k_grad however short the all-reduces became."""
    trace, short = _deferred_waits_trace(tmp_path)
    assert replay(trace, scaled(trace, 1.0)).gpu_start_ns.tolist() == [20_000, 100_000, 200_000, 201_000, 301_000]
    tl = replay(trace, short)
    k_grad, n1, n2, m1, m2 = tl.gpu_start_ns.tolist()
    # N1 keeps its recorded start (nothing in one trace says what it waited for), N2 follows N1, and each copy
    # follows its own all-reduce by the recorded 1 µs: before, M1 stayed at 201 µs (k_grad's end + a 111 µs "gap")
    assert n1 == 100_000 and n2 == n1 + 10_000
    assert m1 == n1 + 10_000 + 1_000 and m2 == n2 + 10_000 + 1_000


def test_an_unlinked_wait_on_other_work_is_not_guessed(tmp_path) -> None:
    """The same waits on two kernels that are not collectives (cuDNN's RNNs fork and join streams with waits links.py
    cannot attribute): nothing says which work M1 awaited, so it is not bound to one, and M1, queued behind k_grad
    with N1 running in between, keeps its latency from its launch as before (GNMT on 64 SMs: binding such waits to
    the latest work ending on another stream took its span error from -1.1% to +29.7%)."""
    trace, short = _deferred_waits_trace(tmp_path, kernel="void cudnn::rnn_fwd_kernel")
    tl = replay(trace, short)
    k_grad, n1, n2, m1, m2 = tl.gpu_start_ns.tolist()
    assert n2 == n1 + 10_000
    assert m1 == 201_000  # its origin start: anchored to its launch, not to N1
    assert m2 == m1 + 2_000 + 1_000  # behind M1 on its stream (its own link, N2, ended long before)
