"""A training step's parameters, read from a one-GPU trace: shape, dtype and bytes of each, and when the backward
made its gradient.

Contract: ``recover(tables) -> Params``: one row per (ProfilerStep, parameter) in the order the gradients became
ready, or ``TraceFormatError`` (no backward, no shapes); ``feature_joins(tables, step, bwd_start)``: where the
step's forward joins feature maps (FSDP's units, scale/units.py). Pure: reads the ingest ``ops`` table only.

Sources, best first (``Params.source`` says which was used; warnings travel with the result):
1. ``torch::autograd::AccumulateGrad``: the autograd engine runs one per leaf parameter when its gradient is
   complete, with the gradient (the parameter's shape and dtype) as its input; the end of its
   ``autograd::engine::evaluate_function`` wrapper is the CPU time the gradient is ready, which is where DDP's
   post-hook fires (reducer.cpp ``autograd_hook``). Its forward use: the backward node that ran just before it on
   the same thread produced the gradient, and that node's autograd ``Sequence number`` is the one of the forward
   op that recorded it.
2. Without AccumulateGrad (a step whose autograd ran outside the profiler's view): the weight inputs of the
   forward's weight ops (``WEIGHT_INPUTS``: linear, convolution, embedding, norms), each use counted (a tied
   weight twice), every gradient taken as ready at the backward's end: an upper bound on the exposed
   communication, said in a warning.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from habitat_trace.errors import TraceFormatError
from habitat_trace.ingest import schema as S
from habitat_trace.scale.cost import DTYPE_BYTES

ACCUMULATE = "torch::autograd::AccumulateGrad"
EVALUATE = "autograd::engine::evaluate_function: "  # the autograd engine's span around every backward node
SOURCE_ACCUMULATE, SOURCE_WEIGHTS = "AccumulateGrad", "weight ops"
# The input positions that hold a parameter (ATen signatures, native_functions.yaml): linear(input, weight, bias),
# convolution(input, weight, bias, ...), embedding(weight, indices), layer_norm(input, shape, weight, bias),
# batch_norm(input, weight, bias, ...), group_norm(input, groups, weight, bias), rms_norm(input, shape, weight).
WEIGHT_INPUTS: dict[str, tuple[int, ...]] = {
    "aten::linear": (1, 2), "aten::conv1d": (1, 2), "aten::conv2d": (1, 2), "aten::conv3d": (1, 2),
    "aten::conv_transpose1d": (1, 2), "aten::conv_transpose2d": (1, 2), "aten::conv_transpose3d": (1, 2),
    "aten::convolution": (1, 2), "aten::embedding": (0,), "aten::layer_norm": (2, 3), "aten::batch_norm": (1, 2),
    "aten::group_norm": (2, 3), "aten::rms_norm": (2,),
}
# Kineto's input-type spelling -> the dtype name PyTorch's collectives record ("dtype" of record_param_comms)
COMM_DTYPE = {"float": "Float", "double": "Double", "c10::BFloat16": "BFloat16", "c10::Half": "Half",
              "c10::Float8_e4m3fn": "Float8_e4m3fn", "c10::Float8_e5m2": "Float8_e5m2", "long int": "Long"}
COLUMNS = ("step", "k", "shape", "dtype", "numel", "nbytes", "ready_ns", "node_ns", "forward_ns")


@dataclass(frozen=True)
class Params:
    """Per (step, parameter), in gradient-ready order ``k`` within the step: ``shape`` (tuple), ``dtype`` (Kineto's
    spelling), ``numel``, ``nbytes``, ``ready_ns`` (CPU time its gradient is complete), ``node_ns`` (start of the
    backward node that produced it), ``forward_ns`` (start of the forward op that used it; -1 unknown). ``step`` is
    the row in the steps table (-1: a trace without ProfilerSteps)."""

    table: pd.DataFrame
    source: str
    warnings: tuple[str, ...] = ()

    def of_step(self, step: int) -> pd.DataFrame:
        return self.table[self.table["step"].to_numpy() == step].reset_index(drop=True)

    @property
    def steps(self) -> list[int]:
        return sorted(int(s) for s in pd.unique(self.table["step"]))

    def summary(self) -> dict[str, Any]:
        """Count, elements and bytes of one step's parameters (the first step), by dtype."""
        first = self.of_step(self.steps[0]) if len(self.table) else self.table
        by = first.groupby("dtype")["nbytes"].sum()
        return {"count": int(len(first)), "numel": int(first["numel"].sum()), "nbytes": int(first["nbytes"].sum()),
                "bytes_by_dtype": {str(k): int(v) for k, v in by.items()}, "source": self.source,
                "warnings": list(self.warnings)}


def recover(tables: Any) -> Params:
    """The parameters of every profiled step that ran a backward (module doc for the sources and fallbacks)."""
    ops = tables.ops
    path = getattr(tables, "path", "trace")
    names = ops[S.NAME].to_numpy(dtype=object) if len(ops) else np.zeros(0, dtype=object)
    evaluate = np.array([str(n).startswith(EVALUATE) for n in names], dtype=bool)
    if not evaluate.any():
        raise TraceFormatError(f"{path}: no backward pass in this trace (no autograd::engine::evaluate_function "
                               "events): data parallelism reduces gradients, so scale-out needs a training step; "
                               "profile forward, backward and optimizer step together")
    acc = np.flatnonzero(names == ACCUMULATE)
    if len(acc) and all(_shape(ops[S.INPUT_DIMS].iat[i]) is not None for i in acc):
        return _from_accumulate(ops, acc, evaluate)
    warnings = []
    if len(acc):
        warnings.append(f"{len(acc)} AccumulateGrad events carry no shapes: parameters read from the weight ops")
    return _from_weights(ops, evaluate, path, warnings)


def _shape(dims: Any) -> tuple[int, ...] | None:
    """The first input's shape, None when not recorded."""
    if not isinstance(dims, (list, tuple)) or not dims or not isinstance(dims[0], (list, tuple)):
        return None
    try:
        return tuple(int(x) for x in dims[0])
    except (TypeError, ValueError):
        return None


def _from_accumulate(ops: pd.DataFrame, acc: np.ndarray, evaluate: np.ndarray) -> Params:
    parent = ops[S.PARENT].to_numpy()[acc]
    names = ops[S.NAME].to_numpy(dtype=object)
    wrapped = (parent >= 0) & (names[np.maximum(parent, 0)] == EVALUATE + ACCUMULATE)
    span = np.where(wrapped, parent, acc)  # the engine's span when there is one, else the op itself
    shapes = [_shape(ops[S.INPUT_DIMS].iat[i]) or () for i in acc]
    types = [_first(ops[S.INPUT_TYPES].iat[i]) for i in acc]
    warnings = []
    unknown = sorted({t for t in types if t not in DTYPE_BYTES})
    if unknown:
        warnings.append(f"gradient dtype {unknown} not recorded or unknown: taken as float (4 bytes)")
    dtype = [t if t in DTYPE_BYTES else "float" for t in types]
    node = _producer(ops, span, evaluate)
    forward = _forward_start(ops, node, evaluate)
    table = _table(ops[S.STEP].to_numpy()[acc], shapes, dtype, ops[S.END].to_numpy()[span],
                   np.where(node >= 0, ops[S.TS].to_numpy()[np.maximum(node, 0)], ops[S.TS].to_numpy()[span]), forward)
    return Params(table, SOURCE_ACCUMULATE, tuple(warnings + _consistency(table)))


def _first(types: Any) -> str:
    return str(types[0]) if isinstance(types, (list, tuple)) and types else ""


def _producer(ops: pd.DataFrame, span: np.ndarray, evaluate: np.ndarray) -> np.ndarray:
    """Per AccumulateGrad span: the backward node that ran last before it on its thread (-1 none)."""
    rows = np.flatnonzero(evaluate)
    names = ops[S.NAME].to_numpy(dtype=object)
    f = pd.DataFrame({"row": rows, "tid": ops[S.TID].to_numpy()[rows], "ts": ops[S.TS].to_numpy()[rows],
                      "acc": names[rows] == EVALUATE + ACCUMULATE}).sort_values(["tid", "ts"], kind="stable")
    # at an AccumulateGrad span (NaN itself), the forward fill is the last other node before it on the thread
    last = pd.Series(np.where(f["acc"], np.nan, f["row"]), index=f.index).groupby(f["tid"]).ffill()
    lookup = pd.Series(last.to_numpy(), index=f["row"].to_numpy())
    out = lookup.reindex(span).to_numpy()
    return np.where(np.isfinite(out), out, -1).astype(np.int64)


def _forward_start(ops: pd.DataFrame, node: np.ndarray, evaluate: np.ndarray) -> np.ndarray:
    """CPU start of the forward op that recorded each producing node (same autograd Sequence number), -1 unknown."""
    seq = ops[S.SEQUENCE].to_numpy()
    fwd = (~evaluate) & (seq >= 0) & ~ops[S.NAME].str.startswith("autograd::").to_numpy()
    first = pd.Series(ops[S.TS].to_numpy()[fwd]).groupby(seq[fwd]).min()
    want = np.where(node >= 0, seq[np.maximum(node, 0)], -1)
    out = first.reindex(want).to_numpy()
    return np.where(np.isfinite(out), out, -1).astype(np.int64)


def _table(step: np.ndarray, shapes: list[tuple[int, ...]], dtype: list[str], ready: np.ndarray, node: np.ndarray,
           forward: np.ndarray) -> pd.DataFrame:
    numel = np.array([int(np.prod(s, dtype=np.int64)) for s in shapes], dtype=np.int64)
    width = np.array([DTYPE_BYTES[d] for d in dtype], dtype=np.int64)
    f = pd.DataFrame({"step": step.astype(np.int64), "shape": pd.Series(shapes, dtype=object),
                      "dtype": pd.Series(dtype, dtype=object), "numel": numel, "nbytes": numel * width,
                      "ready_ns": ready.astype(np.int64), "node_ns": node.astype(np.int64),
                      "forward_ns": forward.astype(np.int64)})
    f = f.sort_values(["step", "ready_ns"], kind="stable").reset_index(drop=True)
    f["k"] = f.groupby("step").cumcount().astype(np.int64)
    return f[list(COLUMNS)]


def _consistency(table: pd.DataFrame) -> list[str]:
    """A warning when the steps disagree on the parameter list (a dynamic graph, a step cut by the window)."""
    counts = table.groupby("step").size()
    if len(counts) > 1 and counts.nunique() > 1:
        return [f"the steps have different parameter counts ({', '.join(map(str, counts.tolist()))}): each step is "
                "synthesized from its own"]
    return []


def _from_weights(ops: pd.DataFrame, evaluate: np.ndarray, path: Any, warnings: list[str]) -> Params:
    names = ops[S.NAME].to_numpy(dtype=object)
    parent = ops[S.PARENT].to_numpy()
    is_weight = np.isin(names, list(WEIGHT_INPUTS))
    # the outermost weight op only (conv2d calls convolution, layer_norm native_layer_norm with the same weights)
    nested = (parent >= 0) & is_weight[np.maximum(parent, 0)]
    rows = np.flatnonzero(is_weight & ~nested & ~evaluate)
    shapes, dtype, step, fwd = [], [], [], []
    for i in rows:
        dims, types = ops[S.INPUT_DIMS].iat[i], ops[S.INPUT_TYPES].iat[i]
        for pos in WEIGHT_INPUTS[str(names[i])]:
            shape = _at(dims, pos)
            if shape:  # an absent bias is recorded as an empty shape
                shapes.append(shape)
                t = types[pos] if isinstance(types, (list, tuple)) and pos < len(types) else ""
                dtype.append(t if t in DTYPE_BYTES else "float")
                step.append(int(ops[S.STEP].iat[i]))
                fwd.append(int(ops[S.TS].iat[i]))
    if not shapes:
        raise TraceFormatError(f"{path}: no parameter shapes in this trace (no AccumulateGrad with shapes, no weight "
                               "op with shapes): scale-out sizes every collective from the parameters; record again "
                               "with record_shapes=True")
    step_arr = np.array(step, dtype=np.int64)
    bwd_end = pd.Series(ops[S.END].to_numpy()[evaluate]).groupby(ops[S.STEP].to_numpy()[evaluate]).max()
    ready = bwd_end.reindex(step_arr).to_numpy()
    keep = np.isfinite(ready)
    order = np.argsort(-np.array(fwd, dtype=np.int64), kind="stable")  # reverse forward order: DDP's assumption
    order = order[keep[order]]
    end = ready.astype(np.float64)[order].astype(np.int64)
    table = _table(step_arr[order], [shapes[i] for i in order], [dtype[i] for i in order], end, end,
                   np.array(fwd, dtype=np.int64)[order])
    table["k"] = table.groupby("step").cumcount().astype(np.int64)  # ties at the backward's end: reverse forward
    warnings.append(f"parameters read from {len(rows)} forward weight ops (no AccumulateGrad): a weight used twice is "
                    "counted twice, one used outside these ops is missed, and every gradient is taken as ready at "
                    "the backward's end (no overlap: an upper bound on the exposed communication)")
    return Params(table, SOURCE_WEIGHTS, tuple(warnings + _consistency(table)))


def _at(dims: Any, pos: int) -> tuple[int, ...] | None:
    if not isinstance(dims, (list, tuple)) or pos >= len(dims) or not isinstance(dims[pos], (list, tuple)):
        return None
    try:
        return tuple(int(x) for x in dims[pos]) or None
    except (TypeError, ValueError):
        return None


# A BatchNorm with running statistics (track_running_stats=True, torch/nn/modules/batchnorm.py _NormBase) registers
# three buffers: running_mean and running_var (num_features each, in the positions 3 and 4 of aten::batch_norm's
# inputs, with their dtype) and num_batches_tracked (a 0-dim torch.long)
BATCH_NORM = "aten::batch_norm"
RUNNING_STATS = (3, 4)
BUFFER_COLUMNS = ("step", "nbytes", "dtype")
COUNTER_DTYPE = "long int"  # Kineto's spelling of torch.long


def buffers(tables: Any) -> pd.DataFrame:
    """The module buffers a step's forward shows, one row per buffer (``BUFFER_COLUMNS``; dtype in Kineto's
    spelling, COUNTER_DTYPE for the counters): the running statistics of every BatchNorm call with them. DDP broadcasts
    every buffer of the module at each forward (scale/dataparallel.py); buffers that no op shows as an input of a
    known kind (a transformer's position ids, a rotary table) are not found, so the broadcast is a lower bound."""
    ops = tables.ops
    rows: list[tuple[int, int, str]] = []
    if not len(ops):
        return pd.DataFrame(rows, columns=list(BUFFER_COLUMNS))
    for i in np.flatnonzero(ops[S.NAME].to_numpy(dtype=object) == BATCH_NORM):
        dims, types = ops[S.INPUT_DIMS].iat[i], ops[S.INPUT_TYPES].iat[i]
        stats = [_at(dims, k) for k in RUNNING_STATS]
        if any(not s for s in stats) or not isinstance(types, (list, tuple)) or len(types) <= max(RUNNING_STATS):
            continue  # no running statistics (track_running_stats=False) or no shapes recorded
        step = int(ops[S.STEP].iat[i])
        for k, shape in zip(RUNNING_STATS, stats):
            dtype = str(types[k]) if str(types[k]) in DTYPE_BYTES else "float"
            rows.append((step, int(np.prod(shape or (0,))) * DTYPE_BYTES[dtype], dtype))
        rows.append((step, DTYPE_BYTES[COUNTER_DTYPE], COUNTER_DTYPE))
    return pd.DataFrame(rows, columns=list(BUFFER_COLUMNS))


# Where a CNN's feature maps join: a residual add (torchvision ResNet's ``out += identity``, MobileNetV3's and
# EfficientNet's ``result += input``, ConvNeXt's ``result += input``) or a concatenation (DenseNet's ``torch.cat``
# before every dense layer): ops of two or more 4-d inputs of one shape, or any 4-d inputs for a cat
JOIN_ADDS = ("aten::add", "aten::add_")
JOIN_CATS = ("aten::cat",)


def feature_joins(tables: Any, step: int, bwd_start: int) -> np.ndarray:
    """CPU start times of the step's forward ops that join feature maps (JOIN_ADDS, JOIN_CATS), before its backward."""
    ops = tables.ops
    names = ops[S.NAME].to_numpy(dtype=object)
    ts = ops[S.TS].to_numpy()
    near = (ops[S.STEP].to_numpy() == step) & (ts < bwd_start) & np.isin(names, JOIN_ADDS + JOIN_CATS)
    out = []
    for i in np.flatnonzero(near):
        dims = ops[S.INPUT_DIMS].iat[i]
        first = dims[0] if isinstance(dims, (list, tuple)) and dims else None
        maps = [d for d in (first if names[i] in JOIN_CATS and isinstance(first, (list, tuple)) else dims or [])
                if isinstance(d, (list, tuple)) and len(d) == 4]
        if (names[i] in JOIN_CATS and maps) or (len(maps) >= 2 and maps[0] == maps[1]):
            out.append(int(ts[i]))
    return np.array(out, dtype=np.int64)
