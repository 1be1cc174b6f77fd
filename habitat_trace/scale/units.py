"""FSDP's wrapped units, inferred from the parameter list alone (a Kineto trace records no module boundaries).

Contract: ``fsdp_units(signatures, wrap, shapes, forward, joins) -> (units, warnings)``: half-open ranges of positions
in the gradient-ready order, one per wrapped unit; the positions in no range belong to the root unit.
``wrap="blocks"``, three passes; 1 and 2 find maximal runs of a repeated block (two repeats or more), longest first,
then in what remains on either side:
1. blocks of equal (shape, dtype): transformer layers (``ModuleWrapPolicy({Block})``), a CNN's identical residual
   blocks, an MLP's linears;
2. in what pass 1 left, blocks of equal *structure* at any width (each tensor's rank, kernel size, depthwise flag and
   dtype), two convolutions or more a block, one of the run's blocks starting where feature maps join (below):
   torchvision builds MobileNetV3's ``InvertedResidual``, EfficientNet's ``MBConv`` and DenseNet's ``_DenseLayer``
   from per-block channel counts (torchvision/models/mobilenetv3.py ``InvertedResidualConfig.adjust_channels``,
   efficientnet.py ``_MBConvConfig.adjust_channels``, densenet.py ``num_input_features + i * growth_rate``), so
   their blocks repeat in structure, not in shape;
3. a gap between two units with the structure of either is one more unit (a stage's first block).
With ``shapes`` given, a unit holds a weight (a tensor of two dimensions or more), never a convolution alone, splits
no convolution layer and spans no break of the channel chain: each layer feeds the next in the forward with its
output channels (``chain_rules``) except where feature maps join, ``joins``: a residual add (ResNet's ``out +=
identity``, MBConv's ``result += input``) or a concatenation (DenseNet's ``torch.cat`` before every layer). Of a
run's phases, the one whose units start at the most joins, then the latest.
``wrap="none"``: no units, the whole model is the root (FSDP without an ``auto_wrap_policy``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Optional, Sequence

import numpy as np
import pandas as pd

MIN_PERIOD = 2  # a unit of one tensor is a module with a single parameter: not what auto-wrap policies wrap
MIN_REPEATS = 2
# Pass 2's blocks hold two convolutions or more: a single conv + norm (torchvision's Conv2dNormActivation) repeats in
# structure inside every CNN block, and is not the block a user wraps (ResNet's Bottleneck, MobileNet's
# InvertedResidual, DenseNet's _DenseLayer each hold 2-5 convolutions); and a transformer's blocks differ by shape
# only where they differ in structure too (T5's first block holds the relative position bias), so pass 2 would only
# cut their q/k/v/o projections into units of two
MIN_STRUCTURAL_CONVS = 2


@dataclass(frozen=True)
class _Rules:
    """Per position: ``weight`` (1 for a tensor of >= 2 dims), ``conv`` (1 for a 4-d weight), ``brk`` (1 where the
    channel chain breaks between the tensor before and this one; ``marks`` 1 where feature maps join there, kept at
    a part's first tensor),
    ``inner`` (1 where this tensor is in the same convolution layer as the one before: no unit starts there; one more
    entry, past the end); a unit holds ``min_weights`` of ``weight`` (of ``conv`` with ``by_convs``), and with
    ``evidence`` a run's units start at a join at least once."""

    weight: np.ndarray
    conv: np.ndarray
    brk: np.ndarray
    marks: np.ndarray
    inner: np.ndarray
    min_weights: int = 0
    by_convs: bool = False
    evidence: bool = False

    def part(self, lo: int, hi: int, min_weights: Optional[int] = None) -> "_Rules":
        brk = self.brk[lo:hi].copy()
        if len(brk):
            brk[0] = 0  # a break before the part's first tensor is outside it
        return _Rules(self.weight[lo:hi], self.conv[lo:hi], brk, self.marks[lo:hi], self.inner[lo:hi + 1],
                      self.min_weights if min_weights is None else min_weights, self.by_convs, self.evidence)

    def structural(self, min_convs: int) -> "_Rules":
        """Pass 2's rules: ``min_convs`` convolutions a unit, a join at one of a run's unit starts."""
        return _Rules(self.weight, self.conv, self.brk, self.marks, self.inner, min_convs, True, True)

    def whole(self, p: int) -> np.ndarray:
        """Per start u: [u, u + p) holds enough weights, no break inside, splits no convolution layer, and holds
        another weight beside any convolution."""
        w, c, b = (np.concatenate(([0], np.cumsum(x))) for x in (self.weight, self.conv, self.brk))
        u = np.arange(len(self.weight) - p + 1)
        counted = (c if self.by_convs else w)[u + p] - (c if self.by_convs else w)[u]
        # a conv (+ norm) alone is a block's part (Conv2dNormActivation), not a block
        alone = (c[u + p] - c[u] > 0) & (w[u + p] - w[u] < 2)
        return (counted >= self.min_weights) & (b[u + p] - b[u + 1] == 0) & (self.inner[u] == 0) & \
            (self.inner[u + p] == 0) & ~alone


def fsdp_units(signatures: Sequence[Hashable], wrap: str = "blocks", shapes: Optional[Sequence[Any]] = None,
               forward: Optional[Sequence[int]] = None, joins: Optional[Sequence[int] | np.ndarray] = None
               ) -> tuple[list[tuple[int, int]], list[str]]:
    """Unit ranges over ``signatures`` (one per parameter, e.g. (shape, dtype)), and warnings (module doc).
    ``shapes`` (tuples) and ``forward`` (the start of the forward op that used each parameter, -1 unknown) enable
    the weight and channel-chain rules and pass 2; ``joins``: forward times where feature maps join (a residual add,
    a concatenation), where the chain breaks too."""
    if wrap == "none" or len(signatures) < MIN_PERIOD * MIN_REPEATS:
        return [], []
    codes = _codes(signatures)
    rules = None if shapes is None else chain_rules([tuple(s) for s in shapes], forward, joins)
    units: list[tuple[int, int]] = []
    _search(codes, 0, len(codes), units, None if rules is None else rules.part(0, len(codes), 1))
    if rules is not None and shapes is not None:
        structure = _codes([_structure(tuple(s), sig) for s, sig in zip(shapes, signatures)])
        for lo, hi in _gaps(units, len(codes)):
            _search(structure, lo, hi, units, rules.structural(MIN_STRUCTURAL_CONVS))
        units += _between(units, structure, rules)
    if not units:
        return [], ["no repeated block of parameters found: one FSDP unit (the whole model, as FSDP without an "
                    "auto_wrap_policy)"]
    return sorted(units), []


def _between(units: list[tuple[int, int]], structure: np.ndarray, rules: _Rules) -> list[tuple[int, int]]:
    """Pass 3: a gap between two units that has the structure of either is one more unit (a stage's first block,
    whose widths differ from its stage's and whose structure its neighbours' runs took: EfficientNet's first MBConv
    of a stage between two stages' runs)."""
    spans = sorted(units)
    out = []
    for (_, lo), (hi, b) in zip(spans, spans[1:]):
        if hi <= lo:
            continue
        p = hi - lo
        like = [(a, c) for a, c in ((lo - p, lo), (hi, hi + p)) if (a, c) in spans]
        if any(np.array_equal(structure[lo:hi], structure[a:c]) for a, c in like) and \
                rules.structural(MIN_STRUCTURAL_CONVS).part(lo, hi).whole(p)[0]:
            out.append((lo, hi))
    return out


def _codes(items: Sequence[Hashable]) -> np.ndarray:
    return pd.factorize(pd.Series(list(items), dtype=object))[0].astype(np.int64)


def _structure(shape: tuple[int, ...], signature: Hashable) -> Hashable:
    """A tensor's role without its widths: rank, a convolution's kernel size and depthwise flag (one input channel
    per group), and the dtype (the signature's last element when it is a (shape, dtype) pair)."""
    dtype = signature[-1] if isinstance(signature, tuple) and signature else None
    kernel = shape[2:] if len(shape) >= 3 else ()
    return len(shape), kernel, len(shape) == 4 and shape[1] == 1, dtype


def _gaps(units: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    out, at = [], 0
    for a, b in sorted(units):
        if a > at:
            out.append((at, a))
        at = max(at, b)
    return out + ([(at, n)] if at < n else [])


def chain_rules(shapes: list[tuple[int, ...]], forward: Optional[Sequence[int]],
                joins: Optional[Sequence[int] | np.ndarray] = None) -> _Rules:
    """The weight flags and the channel chain's breaks (module doc). A layer is a run of tensors in gradient-ready
    order that one forward op uses (the same ``forward`` start), or a weight with the 1-d tensors beside it of its
    output channels (its bias: under autocast cast by an op of its own; the norm after it, ``_same_layer``). The
    chain is checked only where a convolution (a 4-d weight) is on either side: CNN blocks are a conv/norm chain,
    while a transformer layer's q/k/v or gate/up projections branch by design. ``joins`` (forward times of residual
    adds and concatenations of feature maps) break it wherever they fall between two tensors' forward ops."""
    n = len(shapes)
    fwd = np.full(n, -1, dtype=np.int64) if forward is None else np.asarray(forward, dtype=np.int64)
    weight = np.array([len(s) >= 2 for s in shapes], dtype=np.int64)
    layer = np.zeros(n, dtype=np.int64)
    for i in range(1, n):
        layer[i] = layer[i - 1] + (0 if _same_layer(shapes, fwd, i - 1, i, layer) else 1)
    ends = {}  # layer -> (in, out, kind): kind "conv", "dw" or "" (a linear or a norm: not checked)
    for k in np.unique(layer):
        members = [shapes[i] for i in np.flatnonzero(layer == k)]
        main = max(members, key=len)
        if len(main) == 4:
            ends[k] = (main[0] if main[1] == 1 else main[1], main[0], "dw" if main[1] == 1 else "conv")
        else:
            ends[k] = (main[-1] if len(main) == 2 else main[0] if main else 0, main[0] if main else 0, "")
    marks = np.zeros(n, dtype=np.int64)
    if joins is not None and len(joins):
        # a join between two tensors' forward ops (tensor i ran before tensor i-1) ends a block there, where a
        # convolution is on either side (a transformer's residual adds fall inside its layers)
        t = np.sort(np.asarray(joins, dtype=np.int64))
        conv = np.array([ends[k][2] != "" for k in layer])
        known = (fwd[1:] >= 0) & (fwd[:-1] >= 0) & (fwd[1:] < fwd[:-1]) & (conv[1:] | conv[:-1])
        between = np.searchsorted(t, fwd[:-1], "left") > np.searchsorted(t, fwd[1:], "right")
        marks[1:] = known & between
    brk, inner = np.zeros(n, dtype=np.int64), np.zeros(n + 1, dtype=np.int64)  # inner[n]: past the end
    inputs: set[int] = set()  # input channels of the convolutions since the last join (forward-earlier: later here)
    any_join = bool(marks.any())  # siblings only where the joins bound the blocks
    for i in range(n - 1, 0, -1):
        if ends[layer[i]][2] == "conv":
            inputs.add(ends[layer[i]][0])
        inner[i] = int(layer[i] == layer[i - 1] and ends[layer[i]][2] != "")
        if layer[i] != layer[i - 1]:
            # gradient-ready order runs backward: layer i ran before layer i-1 in the forward, so i feeds i-1; or,
            # with the joins known, i-1 is a sibling branch that reads what an earlier convolution of the same
            # block read (an Inception block's four branches from its input, concatenated at its end: Szegedy et
            # al., "Going deeper with convolutions", CVPR 2015, fig. 2; torchvision googlenet.py Inception)
            dst = ends[layer[i - 1]]
            sibling = any_join and dst[2] == "conv" and dst[0] in inputs and not marks[i]
            brk[i] = int(not _feeds(ends[layer[i]], dst) and not sibling)
        if marks[i]:
            inputs = set()
    brk |= marks
    inner[1:n] &= (1 - marks[1:]).astype(np.int64)  # a norm after a join is the next block's (DenseNet's norm1)
    return _Rules(weight, np.array([len(s) == 4 for s in shapes], dtype=np.int64), brk, marks, inner)


def _same_layer(shapes: list[tuple[int, ...]], fwd: np.ndarray, a: int, b: int, layer: np.ndarray) -> bool:
    """Adjacent tensors a, b (gradient-ready order) in one layer: one forward op; or a 1-d tensor of a weight's
    output channels just before it (the norm after the conv in the forward: its weight and bias are one op, so the
    norm joins whole) or just after it, if not a norm's pair (its bias, cast on its own under autocast)."""
    if fwd[a] >= 0 and fwd[a] == fwd[b]:
        return True
    sa, sb = shapes[a], shapes[b]
    if len(sa) == 1 and len(sb) >= 2:  # one weight a layer: a's layer must hold none yet
        return sa[0] == sb[0] and not any(len(shapes[j]) >= 2 for j in np.flatnonzero(layer[:a + 1] == layer[a]))
    if len(sa) >= 2 and len(sb) == 1:
        pair = b + 1 < len(shapes) and shapes[b + 1] == sb and fwd[b] >= 0 and fwd[b + 1] == fwd[b]
        return sb[0] == sa[0] and not pair
    return False


def _feeds(src: tuple[int, int, str], dst: tuple[int, int, str]) -> bool:
    """Whether layer ``src`` (in, out, kind) can feed layer ``dst`` by channels; True where not checked (no
    convolution on either side). A conv's weight is (out, in / groups, kh, kw): depthwise takes out channels in, a
    grouped conv a multiple of its weight's in."""
    if not src[2] and not dst[2]:
        return True
    if dst[2] == "conv":
        return dst[0] > 0 and src[1] % dst[0] == 0
    return src[1] == dst[0]


def _search(codes: np.ndarray, lo: int, hi: int, out: list[tuple[int, int]], rules: Optional[_Rules]) -> None:
    """Best run in codes[lo:hi], its repeats appended to ``out``; then the same left and right of it."""
    best = best_run(codes[lo:hi], None if rules is None else rules.part(lo, hi))
    if best is None:
        return
    start, period, repeats = best
    start += lo
    out.extend((start + r * period, start + (r + 1) * period) for r in range(repeats))
    _search(codes, lo, start, out, rules)
    _search(codes, start + repeats * period, hi, out, rules)


def _stretches(ok: Optional[np.ndarray], reps: int) -> list[tuple[int, int]]:
    """(first, count) of each maximal stretch of allowed repeats, two or more (all ``reps`` where none is checked)."""
    if ok is None:
        return [(0, reps)]
    edges = np.flatnonzero(np.diff(np.concatenate(([0], ok.astype(np.int8), [0]))))
    return [(int(a), int(b - a)) for a, b in zip(edges[::2], edges[1::2]) if b - a >= MIN_REPEATS]


def best_run(codes: np.ndarray, rules: Optional[_Rules] = None) -> tuple[int, int, int] | None:
    """(start, period, repeats) of the periodic run covering the most positions whose repeats ``rules`` allows as
    units, None without one. Ties: the shorter period, then the phase whose units start at the most joins (a block
    starts where a concat or a residual add is: DenseNet's layers, a residual block), then the later start. The
    phase is ambiguous where tensors beside the run look like a block's ends: a transformer's final norm before its
    layers in gradient-ready order (the later phase is right; no convolution, so no break says otherwise), a CNN
    stage's first block after its identical ones (the residual add at each block's end says where it starts)."""
    n = len(codes)
    best: tuple[Any, ...] | None = None
    for p in range(MIN_PERIOD, n // MIN_REPEATS + 1):
        same = np.concatenate(([False], codes[:-p] == codes[p:], [False]))
        edges = np.flatnonzero(np.diff(same.astype(np.int8)))
        whole = None if rules is None else rules.whole(p)
        for a, b in zip(edges[::2].tolist(), edges[1::2].tolist()):  # same[a+1 .. b] true: codes[a:b+p] p-periodic
            length = b - a + p
            if length // p < MIN_REPEATS:
                continue
            for s in range(min(p, length - MIN_REPEATS * p + 1)):
                reps = (length - s) // p
                for first, count in _stretches(None if whole is None else whole[a + s:a + s + reps * p:p], reps):
                    start = a + s + first * p
                    hits = 0 if rules is None else int(rules.marks[start:start + count * p:p].sum())
                    if rules is not None and rules.evidence and not hits:
                        continue
                    key = (count * p, -p, hits, start)
                    if best is None or key > best[0]:
                        best = (key, start, p, count)
    return None if best is None else (int(best[1]), int(best[2]), int(best[3]))
