"""Peak GPU memory of a training step: from the trace's ``[memory]`` events, else estimated from op shapes.

``peak_memory(trace) -> (GiB, "trace" | "estimate")``, or ``(None, "unknown")`` without evidence;
``fits(peak_gib, capacity_gib)`` applies the margin rule (None when the peak is unknown).
The estimate is coarse (Kineto records no output shapes, no tensor ids): parameters from the gradients that
``AccumulateGrad`` receives, optimizer state from the optimizer's name, activations from forward inputs.
Without a parameter seen (an inference trace, or no record_shapes) the weights are invisible, so no estimate; nor
with an embedding table no gradient shows (DLRM's 8 V100 ranks read "0.0 GiB, fits" before: issue 33, item 8).
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.ingest import schema as S
from habitat_trace.scale.cost import DTYPE_BYTES

GIB = 1024**3
CUDA_DEVICE_TYPE = 1  # Kineto [memory] "Device Type": 0 CPU, 1 CUDA
# Margin rule: the caching allocator reserves more than it hands out (reserved/allocated of a few to ~10%
# in steady training loops; PyTorch "CUDA memory management" notes), and the CUDA context, cuBLAS/cuDNN
# handles and workspaces take memory no allocator event shows (~0.3-0.6 GiB for the context alone on
# CUDA 12 with lazy loading). Assumptions, not fits: a trace needs peak x 1.1 + 1 GiB <= capacity.
FRAGMENTATION_FACTOR = 1.1
CONTEXT_GIB = 1.0
# optimizer state per parameter byte (fp32 state of the same size as the parameter)
OPTIMIZER_STATE = {"adam": 2.0, "adamw": 2.0, "adamax": 2.0, "nadam": 2.0, "radam": 2.0, "adagrad": 1.0,
                   "rmsprop": 1.0, "sgd": 1.0, "lion": 1.0, "adadelta": 2.0}
UNKNOWN_OPTIMIZER_STATE = 2.0  # Adam-like: the common and the larger case
# ops whose output aliases their input (no allocation) or that allocate nothing worth counting
VIEW_OPS = re.compile(r"^aten::(?:view|_unsafe_view|reshape|permute|transpose|t|expand|unbind|split|chunk|slice|"
                      r"select|as_strided|detach|alias|unsqueeze|squeeze|flatten|narrow|arange|empty|zeros|ones|"
                      r"lift_fresh|numpy_T|contiguous|size|stride|item|is_nonzero|_local_scalar_dense)$")
OPTIMIZER_ANNOTATION = re.compile(r"^Optimizer\.step#(\w+)\.step$")
# ops whose first input is an embedding table: a recommender's (DLRM's) largest parameters, whose sparse gradients
# AccumulateGrad may receive without a recorded shape
EMBEDDING_OPS = re.compile(r"^aten::(?:embedding|embedding_bag|_embedding_bag)$")
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"


UNKNOWN = "unknown"  # memory_source when the trace gives no evidence of the peak


def fits(peak_gib: float | None, capacity_gib: float) -> bool | None:
    """Whether the peak fits with the margin; None when the peak is unknown (never "fits" without evidence)."""
    if peak_gib is None:
        return None
    return bool(peak_gib * FRAGMENTATION_FACTOR + CONTEXT_GIB <= capacity_gib)


def peak_memory(trace: Any) -> tuple[float | None, str]:
    """Peak allocated GiB on the trace's GPU and where it came from ("trace" or "estimate"); (None, "unknown")
    when the trace has neither [memory] events nor a parameter gradient with its shape (the estimate would
    leave out the weights, so 0 or a few activations would read as "fits everywhere")."""
    recorded = _recorded_peak(trace)
    if recorded is not None:
        return recorded / GIB, "trace"
    estimate = _estimate_bytes(trace)
    return (None, UNKNOWN) if estimate is None else (estimate / GIB, "estimate")


def _recorded_peak(trace: Any) -> float | None:
    """Max Kineto "Total Allocated" on the origin GPU (CUDA device that ran most kernels)."""
    mem = trace.memory
    if len(mem) == 0:
        return None
    dev = int(trace.gpu[S.DEVICE].mode().iloc[0]) if len(trace.gpu) else 0
    sel = mem[(mem["device_type"] == CUDA_DEVICE_TYPE) & (mem["device_id"] == dev)]
    total = sel["total_allocated"].to_numpy()
    total = total[total >= 0]
    return float(total.max()) if len(total) else None


def _estimate_bytes(trace: Any) -> float | None:
    """params x (1 weight + 1 gradient + optimizer state) + the forward activations of the largest step;
    None when no parameter gradient with a recorded shape is seen."""
    ops = trace.ops
    if len(ops) == 0:
        return None
    grads = ops[S.NAME] == ACCUMULATE_GRAD
    params = _per_step_max(ops, grads)
    if params <= 0 or _unseen_tables(ops, grads):
        return None
    state = _optimizer_state(ops)
    return params * (2.0 + state) + _activation_bytes(ops)


def _unseen_tables(ops: pd.DataFrame, grads: pd.Series) -> bool:
    """An embedding op's table (its first input) that no AccumulateGrad received with its shape: sparse gradients
    or a frozen table, weights the estimate would leave out."""
    tables = {_first_shape(d) for d in ops.loc[ops[S.NAME].str.match(EMBEDDING_OPS), S.INPUT_DIMS]}
    if not tables:
        return False
    return not tables <= {_first_shape(d) for d in ops.loc[grads, S.INPUT_DIMS]} or None in tables


def _first_shape(dims: Any) -> tuple[int, ...] | None:
    first = dims[0] if isinstance(dims, (list, tuple)) and dims else None
    if isinstance(first, (list, tuple)) and first and all(isinstance(x, int) for x in first):
        return tuple(first)
    return None


def _optimizer_state(ops: pd.DataFrame) -> float:
    names = ops[S.NAME].str.extract(OPTIMIZER_ANNOTATION, expand=False).dropna()
    if names.empty:
        return UNKNOWN_OPTIMIZER_STATE
    return OPTIMIZER_STATE.get(str(names.iloc[0]).lower(), UNKNOWN_OPTIMIZER_STATE)


def _first_tensor_bytes(dims: Any, types: Any) -> float:
    """Bytes of the first tensor argument of an op (0 when shapes or dtypes were not recorded)."""
    if not isinstance(dims, (list, tuple)) or not isinstance(types, (list, tuple)):
        return 0.0
    for d, t in zip(dims, types):
        if isinstance(d, (list, tuple)) and d and all(isinstance(x, int) for x in d) and t in DTYPE_BYTES:
            return float(np.prod(d, dtype=np.float64)) * DTYPE_BYTES[t]
    return 0.0


def _per_step_max(ops: pd.DataFrame, mask: pd.Series) -> float:
    sel = ops[mask]
    if sel.empty:
        return 0.0
    nbytes = [_first_tensor_bytes(d, t) for d, t in zip(sel[S.INPUT_DIMS], sel[S.INPUT_TYPES])]
    return float(pd.Series(nbytes).groupby(sel[S.STEP].to_numpy()).sum().max())


def _activation_bytes(ops: pd.DataFrame) -> float:
    """Autograd keeps (about) the input of every forward op alive until backward: the first tensor input
    of each top-level op before the step's first backward op, views excluded, summed per step."""
    root = ops[S.ROOT_OP].to_numpy() == np.arange(len(ops))
    names = ops[S.NAME]
    backward = names.str.contains(r"Backward\d*$|^autograd::engine", regex=True)
    step = ops[S.STEP].to_numpy()
    ts = ops[S.TS].to_numpy()
    first_bwd = pd.Series(np.where(backward, ts, np.iinfo(np.int64).max)).groupby(step).transform("min").to_numpy()
    forward = root & (ts < first_bwd) & ~names.str.contains(VIEW_OPS, regex=True).to_numpy() \
        & ~names.str.startswith("Optimizer.").to_numpy() & ~names.str.startswith("ProfilerStep").to_numpy()
    return _per_step_max(ops, pd.Series(forward, index=ops.index))
