"""``kernel_report(trace, prediction) -> DataFrame``: the per-kernel facts behind a prediction.

One row per GPU event (aligned with ``trace.gpu``): origin and predicted time, waves on both GPUs, γ (the
memory-bound share), u (the FLOP share of a GEMM's origin time at its pipe's peak), the memory- and compute-side
factors, method and reason: a wave-law row's prediction is wave.combine(dur_origin, γ, f_mem, f_comp, u). Read
from the facts the engine computed for this very prediction (``Prediction.facts``), so it explains exactly the
durations replay used; for an identity prediction (same GPU) the facts are computed to show waves and γ, and
both factors are 1. Rows whose time no wave law made (``NO_WAVES``: copies by their bytes, NCCL kernels by the
collective model, the kernels a scale-out synthesizes) carry no waves and no γ: their launch was not recorded or not
read (every synthesized kernel showed "waves 236.74 -> 236.74, γ 0.80", a default grid's: issue 33, item 3).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.ingest.trace import Tables
from habitat_trace.scale import engine
from habitat_trace.scale.prediction import (COLLECTIVE, COLLECTIVE_MEASURED, COLLECTIVE_SYNTHESIZED, COPY,
                                           COPY_SYNTHESIZED, Prediction)

NO_WAVES = (COPY, COPY_SYNTHESIZED, COLLECTIVE, COLLECTIVE_MEASURED, COLLECTIVE_SYNTHESIZED)
REPORT_COLUMNS = ("name", "kclass", "op_name", "root_op_name", "step", "dur_origin_ns", "dur_target_ns",
                  "waves_origin", "waves_target", "gamma", "flop_share", "f_mem", "f_comp", "method", "reason")


def kernel_report(trace: Tables, prediction: Prediction) -> pd.DataFrame:
    g = trace.gpu
    facts = prediction.facts
    f_mem, f_comp = (facts.f_mem, facts.f_comp) if facts is not None else (np.ones(len(g)), np.ones(len(g)))
    if facts is None:  # identity: nothing scales
        facts = engine.kernel_facts(trace, prediction.origin, prediction.target)
    law = ~np.isin(prediction.method, NO_WAVES)
    waves_o, waves_t, gamma = (np.where(law, x, np.nan) for x in (facts.waves_origin, facts.waves_target, facts.gamma))
    u = np.clip(np.nan_to_num(facts.flop_share, nan=0.0), 0.0, 1.0)  # as wave.combine reads it
    return pd.DataFrame({
        "name": g[S.NAME].to_numpy(), "kclass": g[S.KCLASS].to_numpy(), "op_name": g[S.OP_NAME].to_numpy(),
        "root_op_name": g[S.ROOT_OP_NAME].to_numpy(), "step": g[S.STEP].to_numpy(),
        "dur_origin_ns": g[S.DUR].to_numpy(), "dur_target_ns": prediction.dur_ns,
        "waves_origin": waves_o, "waves_target": waves_t, "gamma": gamma,
        "flop_share": u, "f_mem": f_mem, "f_comp": f_comp, "method": prediction.method, "reason": prediction.reason,
    }, columns=list(REPORT_COLUMNS))
