"""FSDP units of CNNs whose blocks change width (scale/units.py, pass 2 and the channel chain), on parameter lists
built as torchvision builds these models, in gradient-ready order (the forward reversed, a norm's weight and bias one
forward op), and a property of every inference."""
from __future__ import annotations

from typing import Any, Optional

from hypothesis import given
from hypothesis import strategies as st

from habitat_trace.scale.units import fsdp_units

Tensors = list[tuple[tuple[int, ...], int]]  # (shape, forward op id) in gradient-ready order


def _conv_bn(out: int, cin: int, k: int = 1, dw: bool = False) -> Tensors:
    """torchvision Conv2dNormActivation: conv (no bias), BatchNorm2d(out), reversed: the norm's tensors first."""
    return [((out,), 1), ((out,), 1), ((out, 1 if dw else cin, k, k), 0)]


def _dense_layer(cin: int, growth: int = 32, bn_size: int = 4) -> Tensors:
    """torchvision densenet._DenseLayer: norm1(cin), conv1 1x1 -> bn_size x growth, norm2, conv2 3x3 -> growth."""
    mid = bn_size * growth
    return [((growth, mid, 3, 3), 0), ((mid,), 1), ((mid,), 1), ((mid, cin, 1, 1), 2), ((cin,), 3), ((cin,), 3)]


def _inverted_residual(cin: int, exp: int, out: int, k: int, se: bool) -> Tensors:
    """torchvision mobilenetv3.InvertedResidual: expand 1x1 (when exp != cin), depthwise k x k, squeeze-excitation
    (fc1, fc2: 1x1 convs with bias), project 1x1; reversed."""
    squeeze = max(8, (exp // 4 + 4) // 8 * 8)
    block = _conv_bn(out, exp)
    if se:
        block += [((exp, squeeze, 1, 1), 0), ((exp,), 1), ((squeeze, exp, 1, 1), 2), ((squeeze,), 3)]
    block += _conv_bn(exp, exp, k, dw=True)
    return block + (_conv_bn(exp, cin) if exp != cin else [])


def _units(blocks: list[Tensors], amp: bool = False, joins: Optional[list[str]] = None
           ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(inferred units, the blocks' true ranges) of the blocks laid out in gradient-ready order (the forward
    reversed: block b's op k runs at (len - b) x 1000 - 10 k); ``amp``: every weight and bias its own forward op
    (autocast casts each on its own; a norm runs in fp32, one op); ``joins`` per block: "add" (a residual add after
    it in the forward), "cat" (a concatenation before it) or ""."""
    shapes: list[tuple[int, ...]] = []
    forward: list[int] = []
    truth, times = [], []
    for b, block in enumerate(blocks):
        truth.append((len(shapes), len(shapes) + len(block)))
        base = (len(blocks) - b) * 1000
        for i, (shape, op) in enumerate(block):
            shapes.append(shape)
            forward.append(base - 10 * op - (i if amp and (len(shape) > 1 or op % 2 == 0) else 0))
        kind = (joins or [""] * len(blocks))[b]
        if kind:
            times.append(base + 5 if kind == "add" else base - 10 * max(op for _, op in block) - 9)
    sig = [(s, "float") for s in shapes]
    units, warnings = fsdp_units(sig, "blocks", shapes, forward, times)
    assert not (warnings and units)  # a warning only where no unit is found (the whole model one unit)
    return units, truth


def test_every_dense_layer_is_a_unit() -> None:
    # a dense block of DenseNet-121 (6 layers from 64 channels, each 32 wider), reversed, the stem after it
    layers = [_dense_layer(64 + 32 * i) for i in reversed(range(6))]
    units, truth = _units(layers + [_conv_bn(64, 3, 7)], joins=["cat"] * 6 + [""])
    assert units == truth[:6]
    # the channel chain alone (norm1 takes the concatenated width, not conv2's 32 channels) is no evidence of a
    # block: without the concatenations pass 2 takes no run
    assert _units(layers + [_conv_bn(64, 3, 7)])[0] == []


def test_inverted_residuals_of_other_widths_are_units() -> None:
    # MobileNetV3-Large's 80-channel stage (expansions 240, 200, 184, 184: no two the same shapes but the last two),
    # reversed, with the stage before it beside
    blocks = [_inverted_residual(80, 184, 80, 3, False), _inverted_residual(80, 184, 80, 3, False),
              _inverted_residual(80, 200, 80, 3, False), _inverted_residual(40, 240, 80, 3, False),
              _inverted_residual(40, 120, 40, 5, True)]
    adds = ["add", "add", "add", "", "add"]  # torchvision's use_res_connect: stride 1 and in == out channels
    for amp in (False, True):
        units, truth = _units(blocks, amp, adds)
        assert units == truth[:4]  # the SE block alone is no run: the root's
        # without the residual adds nothing in the parameters says where a block ends: pass 2 takes no run
        assert _units(blocks, amp)[0] == truth[:2]


def _inception(cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool: int) -> Tensors:
    """torchvision googlenet.Inception: four branches from the block's input, concatenated: 1x1; 1x1 -> 3x3; 1x1 ->
    3x3 (torchvision's 5x5 is a 3x3); max-pool -> 1x1; each conv a BasicConv2d (conv, BatchNorm); reversed, so the
    pool branch's tensors come first."""
    return _conv_bn(pool, cin) + _conv_bn(c5, c5r, 3) + _conv_bn(c5r, cin) + _conv_bn(c3, c3r, 3) + \
        _conv_bn(c3r, cin) + _conv_bn(c1, cin)


def test_inception_blocks_of_other_widths_are_units() -> None:
    # GoogLeNet's stage 4 (inception4a..4e: widths from the paper's table 1), reversed, the stem's conv after it;
    # no branch feeds the next by channels (each reads the block's input): what a chain alone calls four breaks
    stage = [(480, 192, 96, 208, 16, 48, 64), (512, 160, 112, 224, 24, 64, 64), (512, 128, 128, 256, 24, 64, 64),
             (512, 112, 144, 288, 32, 64, 64), (528, 256, 160, 320, 32, 128, 128)]
    blocks = [_inception(*w) for w in reversed(stage)]
    units, truth = _units(blocks + [_conv_bn(192, 64, 3)], joins=["cat"] * 5 + [""])
    assert units == truth[:5]
    # without the concatenations nothing bounds a block, and the branches stay breaks: no unit
    assert _units(blocks + [_conv_bn(192, 64, 3)])[0] == []


def test_a_plain_conv_stack_has_no_units() -> None:
    # a conv/BN stack of changing widths (VGG-like, no joins): no block boundary anywhere, and a conv + norm alone
    # (its repeats of equal shapes included) is never a unit
    widths = [3, 64, 64, 64, 128, 192, 256, 320, 384]  # forward order: two equal 64-channel convs among them
    stack = [_conv_bn(o, i, 3) for i, o in reversed(list(zip(widths, widths[1:])))]
    assert _units(stack)[0] == []


def test_signatures_alone_find_equal_blocks_as_before() -> None:
    # without shapes (a caller that has only signatures) only pass 1 runs, unchanged
    assert fsdp_units(["a", "b"] * 3 + ["c"]) == ([(0, 2), (2, 4), (4, 6)], [])


@st.composite
def _models(draw: Any) -> list[Tensors]:
    kinds = st.sampled_from(["dense", "ir", "ir_se", "convbn"])
    blocks = []
    for kind in draw(st.lists(kinds, min_size=1, max_size=12)):
        cin, exp, out = (draw(st.sampled_from([16, 24, 40, 64, 96])) for _ in range(3))
        blocks.append(_dense_layer(cin) if kind == "dense" else _conv_bn(out, cin, 3) if kind == "convbn" else
                      _inverted_residual(cin, exp, out, draw(st.sampled_from([3, 5])), kind == "ir_se"))
    return blocks


@given(_models(), st.booleans(), st.booleans())
def test_units_are_disjoint_and_each_holds_a_weight(blocks: list[Tensors], amp: bool, joined: bool) -> None:
    units, _ = _units(blocks, amp, ["add"] * len(blocks) if joined else None)
    shapes = [s for b in blocks for s, _ in b]
    ends = 0
    for a, b in units:
        assert ends <= a < b <= len(shapes) and b - a >= 2
        assert any(len(s) >= 2 for s in shapes[a:b])
        ends = b
