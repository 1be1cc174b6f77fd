"""``kernel_report(trace, origin, target) -> DataFrame``: the per-kernel facts behind ``engine.predict``.

One row per GPU event (aligned with ``trace.gpu``): origin and predicted time, waves on both GPUs, γ (the
memory-bound share), u (the FLOP share of a GEMM's origin time at its pipe's peak), the memory- and compute-side
factors, method and reason: a wave-law row's prediction is wave.combine(dur_origin, γ, f_mem, f_comp, u). Computed by the engine's own
``kernel_facts``/``scale_factors`` and ``predict``, so it explains exactly the prediction that replay uses.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.scale import engine
from habitat_trace.scale.gpu import GpuSpec

REPORT_COLUMNS = ("name", "kclass", "op_name", "root_op_name", "step", "dur_origin_ns", "dur_target_ns",
                  "waves_origin", "waves_target", "gamma", "flop_share", "f_mem", "f_comp", "method", "reason")


def kernel_report(trace, origin: GpuSpec, target: GpuSpec) -> pd.DataFrame:
    g = trace.gpu
    prediction = engine.predict(trace, origin, target)
    facts = engine.kernel_facts(trace, origin, target)
    f_mem, f_comp = engine.scale_factors(g, facts)
    if engine.same_gpu(origin, target):  # identity: nothing scales
        f_mem, f_comp = np.ones(len(g)), np.ones(len(g))
    return pd.DataFrame({
        "name": g[S.NAME].to_numpy(), "kclass": g[S.KCLASS].to_numpy(), "op_name": g[S.OP_NAME].to_numpy(),
        "root_op_name": g[S.ROOT_OP_NAME].to_numpy(), "step": g[S.STEP].to_numpy(),
        "dur_origin_ns": g[S.DUR].to_numpy(), "dur_target_ns": prediction.dur_ns,
        "waves_origin": facts["waves_origin"], "waves_target": facts["waves_target"], "gamma": facts["gamma"],
        "flop_share": np.clip(np.nan_to_num(facts["flop_share"], nan=0.0), 0.0, 1.0),  # as wave.combine reads it
        "f_mem": f_mem, "f_comp": f_comp, "method": prediction.method, "reason": prediction.reason,
    }, columns=list(REPORT_COLUMNS))
