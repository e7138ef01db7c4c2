"""passes/dead_filters.py: channels of all-zero filters removed, bit-exact with tflite-micro.

Small built models put dead filters (all-zero int8 weights; their channel outputs the
constant requantize(bias)) in front of each kind of reader: a 1x1 convolution (folds any
constant into its bias), a SAME 3x3 convolution (takes only the zero point; another
constant is position-dependent at the borders, so that channel stays), a VALID 3x3
one (folds), a depthwise convolution (whose channel becomes a constant in turn), a
fully connected layer, an average pool and a reshape, a residual ADD and a model output
(both keep every channel). Each model runs in kiln and in tflite-micro on the same random
inputs and every output must be identical; each test also asserts which channels the pass
removed, so a pass that removes nothing (or too much) fails.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import numpy as np

import kiln.compiler as kc
from kiln.compiler.passes import dead_filters, optimize
from reference import assert_equal_exact, run_reference
from tflite_builder import OpSpec, TensorSpec, build_model, const, per_channel_scales, rand_int8

from conftest import model_path

X_SCALE, X_ZP = 0.05, -3          # every activation's quantization (a nonzero zero point)


@dataclass
class Net:
    """A model under construction: tensors and ops in the tflite_builder's terms."""

    rng: np.random.Generator
    tensors: list[TensorSpec] = field(default_factory=list)
    ops: list[OpSpec] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)

    def add(self, spec: TensorSpec) -> int:
        self.tensors.append(spec)
        return len(self.tensors) - 1

    def act(self, shape, name: str) -> int:
        return self.add(TensorSpec(tuple(shape), scale=X_SCALE, zero_point=X_ZP, name=name))

    def input(self, shape) -> int:
        t = self.act(shape, f"in{len(self.inputs)}")
        self.inputs.append(t)
        return t

    def shape(self, t: int) -> tuple[int, ...]:
        return self.tensors[t].shape

    def _weights(self, shape, axis: int, dead: dict[int, int], name: str) -> tuple[int, int]:
        """Weights with the filters in `dead` all zero, and a bias: `dead` maps each dead
        channel to its bias (which picks the constant it outputs); others get random."""
        n = shape[axis]
        w = rand_int8(shape, self.rng, -127, 127)
        scales = per_channel_scales(n, self.rng)
        bias = self.rng.integers(-3000, 3000, size=n).astype(np.int32)
        for c, b in dead.items():
            np.moveaxis(w, axis, 0)[c] = 0
            bias[c] = b
        wid = self.add(TensorSpec(tuple(shape), "int8", scale=[float(s) for s in scales],
                                  zero_point=[0] * n, quantized_dimension=axis, data=w,
                                  name=f"{name}/w"))
        bscale = [float(np.float32(X_SCALE) * s) for s in scales]
        bid = self.add(TensorSpec((n,), "int32", scale=bscale, zero_point=[0] * n, data=bias,
                                  name=f"{name}/b"))
        return wid, bid

    def conv(self, x: int, out_c: int, k: int = 1, padding: str = "SAME", act: str = "NONE",
             dead: dict[int, int] | None = None, stride: int = 1, name: str = "conv") -> int:
        n, h, w, c = self.shape(x)
        wid, bid = self._weights((out_c, k, k, c), 0, dead or {}, name)
        oh = -(-h // stride) if padding == "SAME" else (h - k) // stride + 1
        ow = -(-w // stride) if padding == "SAME" else (w - k) // stride + 1
        y = self.act((n, oh, ow, out_c), name)
        self.ops.append(OpSpec("CONV_2D", [x, wid, bid], [y], {
            "padding": padding, "stride_w": stride, "stride_h": stride,
            "fused_activation_function": act}))
        return y

    def dwconv(self, x: int, k: int = 3, mult: int = 1, padding: str = "SAME", act: str = "NONE",
               dead: dict[int, int] | None = None, name: str = "dw") -> int:
        n, h, w, c = self.shape(x)
        wid, bid = self._weights((1, k, k, c * mult), 3, dead or {}, name)
        oh, ow = (h, w) if padding == "SAME" else (h - k + 1, w - k + 1)
        y = self.act((n, oh, ow, c * mult), name)
        self.ops.append(OpSpec("DEPTHWISE_CONV_2D", [x, wid, bid], [y], {
            "padding": padding, "stride_w": 1, "stride_h": 1, "depth_multiplier": mult,
            "fused_activation_function": act}))
        return y

    def fc(self, x: int, units: int, act: str = "NONE", dead: dict[int, int] | None = None,
           name: str = "fc") -> int:
        depth = self.shape(x)[-1]
        wid, bid = self._weights((units, depth), 0, dead or {}, name)
        y = self.act((self.shape(x)[0], units), name)
        self.ops.append(OpSpec("FULLY_CONNECTED", [x, wid, bid], [y],
                               {"fused_activation_function": act}))
        return y

    def op(self, op: str, inputs: list[int], shape, options: dict | None = None,
           name: str = "") -> int:
        y = self.act(shape, name or op.lower())
        self.ops.append(OpSpec(op, inputs, [y], options or {}))
        return y

    def model(self, outputs: list[int]) -> bytes:
        return build_model(self.ops, self.tensors, self.inputs, outputs)


def _run(model: bytes, seed: int = 0, trials: int = 4) -> kc.Artifact:
    """Compile `model` for the host, check every output against tflite-micro on `trials`
    random inputs, and return the artifact (its graph says what the pass removed)."""
    art = kc.compile(kc.load(model), board="host")
    rng = np.random.default_rng(seed)
    for trial in range(trials):
        xs = [rand_int8(s["shape"], rng) for s in art.report["inputs"]]
        want = run_reference(model, xs)
        got = art.run(*xs)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_equal_exact(g, w.reshape(g.shape), f"trial {trial} output {i}")
    return art


def _removed(art: kc.Artifact) -> list[dict]:
    return [op.removed for op in art.graph.ops]


# Biases of dead filters, in the units of the layers above (scale X_SCALE * weight scale):
# requantize(bias) moves the output 6-60 steps away from the zero point.
POS, NEG = 3000, -3000


def test_1x1_consumer_folds_any_constant():
    net = Net(np.random.default_rng(1))
    x = net.input((1, 6, 6, 5))
    a = net.conv(x, 8, k=3, dead={1: POS, 4: NEG, 6: 0}, name="a")
    y = net.conv(a, 6, k=1, act="RELU", name="b")
    art = _run(net.model([y]))
    assert _removed(art) == [{"outputs": [1, 4, 6]}, {"inputs": [1, 4, 6]}]
    conv_b = art.graph.ops[1]
    assert art.graph.tensor(conv_b.inputs[1]).shape == (6, 1, 1, 5)
    assert any("folded into the bias" in n for n in conv_b.notes)
    assert "input channels removed, 3 of 8: 1, 4, 6" in art.files["model.c"]
    assert art.report["ops"][0]["removed_channels"]["outputs"] == [1, 4, 6]


def test_fold_gives_a_layer_without_bias_one():
    net = Net(np.random.default_rng(13))
    x = net.input((1, 4, 4, 3))
    a = net.conv(x, 5, k=1, dead={1: POS, 3: NEG}, name="a")
    y = net.conv(a, 4, k=1, name="b")
    net.ops[-1].inputs[2] = -1                    # b has no bias
    art = _run(net.model([y]))
    assert _removed(art) == [{"outputs": [1, 3]}, {"inputs": [1, 3]}]
    bias = art.graph.tensor(art.graph.ops[1].inputs[2])
    assert bias.dtype == "int32" and bias.shape == (4,) and bias.data.any()


def test_same_3x3_consumer_takes_only_the_zero_point():
    """Channel 2 (RELU of a negative bias) is the zero point: it reads like padding and
    is removed; channel 5 (a positive constant) would differ at the borders: kept."""
    net = Net(np.random.default_rng(2))
    x = net.input((1, 5, 5, 4))
    a = net.conv(x, 7, k=1, act="RELU", dead={2: NEG, 5: POS}, name="a")
    y = net.conv(a, 3, k=3, padding="SAME", name="b")
    art = _run(net.model([y]))
    assert _removed(art) == [{"outputs": [2]}, {"inputs": [2]}]


def test_valid_3x3_consumer_folds_any_constant():
    net = Net(np.random.default_rng(3))
    x = net.input((1, 6, 6, 3))
    a = net.conv(x, 6, k=1, dead={0: POS, 3: NEG}, name="a")
    y = net.conv(a, 4, k=3, padding="VALID", stride=2, name="b")
    art = _run(net.model([y]))
    assert _removed(art) == [{"outputs": [0, 3]}, {"inputs": [0, 3]}]


def test_depthwise_consumer_passes_constants_on():
    """pointwise → depthwise 3x3 SAME → pointwise, as in VWW. Dead channels 0, 1 and 7
    output the zero point: their depthwise channels are requantize(bias) everywhere and go
    too. Channel 4's constant is another value, but the depthwise RELU clamps it to the
    zero point everywhere (a large negative bias): uniform, removed. Channel 6's constant
    gives border values that differ: kept."""
    net = Net(np.random.default_rng(4))
    x = net.input((1, 6, 6, 4))
    a = net.conv(x, 8, k=1, act="RELU", dead={0: NEG, 1: NEG, 4: POS, 6: POS, 7: NEG},
                 name="a")
    d = net.dwconv(a, act="RELU", dead={}, name="d")
    dw_bias = net.tensors[net.ops[-1].inputs[2]].data
    dw_w = net.tensors[net.ops[-1].inputs[1]].data
    dw_bias[4] = -2**29               # RELU clamps every position to the zero point
    dw_w[..., 6] = 1                  # borders read fewer taps: smaller values there
    dw_bias[6] = 0
    y = net.conv(d, 5, k=1, name="b")
    art = _run(net.model([y]))
    gone = [0, 1, 4, 7]
    assert _removed(art) == [{"outputs": gone}, {"inputs": gone, "outputs": gone},
                             {"inputs": gone}]
    assert art.graph.tensor(art.graph.ops[1].outputs[0]).shape == (1, 6, 6, 4)


def test_depthwise_keeps_a_multiple_of_4_channels():
    """Five removable channels of 8 read by a depthwise: four go (the SIMD 3x3 depthwise
    kernels take C % 4 == 0), the highest-numbered one stays."""
    net = Net(np.random.default_rng(12))
    x = net.input((1, 5, 5, 4))
    a = net.conv(x, 8, k=1, act="RELU", dead={c: NEG for c in (0, 2, 3, 5, 6)}, name="a")
    y = net.conv(net.dwconv(a, name="d"), 3, k=1, name="b")
    art = _run(net.model([y]))
    gone = [0, 2, 3, 5]
    assert _removed(art) == [{"outputs": gone}, {"inputs": gone, "outputs": gone},
                             {"inputs": gone}]


def test_depthwise_multiplier_removes_whole_groups():
    net = Net(np.random.default_rng(5))
    x = net.input((1, 5, 5, 3))
    a = net.conv(x, 6, k=1, act="RELU", dead={2: NEG, 4: NEG}, name="a")
    d = net.dwconv(a, mult=2, name="d")
    y = net.conv(d, 3, k=1, name="b")
    art = _run(net.model([y]))
    assert _removed(art) == [{"outputs": [2, 4]}, {"inputs": [2, 4], "outputs": [4, 5, 8, 9]},
                             {"inputs": [4, 5, 8, 9]}]


def test_fully_connected_chain_and_pool_reshape():
    """conv → average pool → reshape → FC (VWW's head) and FC → FC: the pool passes the
    constants on, the reshape view keeps the channel axis, the FCs fold them."""
    net = Net(np.random.default_rng(6))
    x = net.input((1, 4, 4, 3))
    a = net.conv(x, 6, k=3, dead={0: POS, 5: NEG}, name="a")
    p = net.op("AVERAGE_POOL_2D", [a], (1, 1, 1, 6), {
        "padding": "VALID", "stride_w": 4, "stride_h": 4, "filter_width": 4,
        "filter_height": 4, "fused_activation_function": "NONE"}, name="pool")
    shape = net.add(const([1, 6]))
    r = net.op("RESHAPE", [p, shape], (1, 6), name="flat")
    f = net.fc(r, 5, act="RELU", dead={3: POS}, name="f")
    y = net.fc(f, 4, name="g")
    art = _run(net.model([y]))
    assert _removed(art) == [{"outputs": [0, 5]}, {"inputs": [0, 5], "outputs": [0, 5]},
                             {"inputs": [0, 5], "outputs": [3]}, {"inputs": [3]}]


def test_residual_add_and_model_output_keep_every_channel():
    """A dead channel read by ADD, or a model output, stays: the pass leaves both alone."""
    net = Net(np.random.default_rng(7))
    x = net.input((1, 4, 4, 4))
    a = net.conv(x, 4, k=1, dead={1: POS}, name="a")
    b = net.conv(x, 4, k=1, dead={2: NEG}, name="b")
    s = net.op("ADD", [a, b], (1, 4, 4, 4), {"fused_activation_function": "NONE"}, name="sum")
    c = net.conv(x, 5, k=1, dead={0: POS}, name="c")
    art = _run(net.model([s, c]))
    assert _removed(art) == [{}, {}, {}, {}]


def test_a_tensor_with_two_readers_loses_what_both_take():
    """Read by a 1x1 conv (takes any constant) and a SAME 3x3 conv (only the zero
    point): only the zero-point channel goes."""
    net = Net(np.random.default_rng(8))
    x = net.input((1, 5, 5, 3))
    a = net.conv(x, 6, k=1, act="RELU", dead={1: NEG, 4: POS}, name="a")
    y1 = net.conv(a, 3, k=1, name="b")
    y2 = net.conv(a, 3, k=3, name="c")
    art = _run(net.model([y1, y2]))
    assert _removed(art) == [{"outputs": [1]}, {"inputs": [1]}, {"inputs": [1]}]


def test_all_dead_keeps_one_channel():
    net = Net(np.random.default_rng(9))
    x = net.input((1, 4, 4, 2))
    a = net.conv(x, 3, k=1, dead={0: POS, 1: NEG, 2: 0}, name="a")
    y = net.conv(a, 2, k=1, name="b")
    art = _run(net.model([y]))
    assert _removed(art) == [{"outputs": [0, 1]}, {"inputs": [0, 1]}]


def test_pass_leaves_a_graph_without_dead_filters_unchanged():
    net = Net(np.random.default_rng(10))
    x = net.input((1, 4, 4, 2))
    y = net.conv(net.conv(x, 3, k=1, name="a"), 2, k=3, name="b")
    g = kc.load(net.model([y]))
    after = dead_filters(g)
    assert [op.inputs for op in after.ops] == [op.inputs for op in g.ops]
    assert [t.shape for t in after.tensors] == [t.shape for t in g.tensors]


# -- VWW ---------------------------------------------------------------------------------------

def test_vww_layers_equal_the_unpruned_build_on_kept_channels(monkeypatch):
    """VWW with and without the pass, layer by layer on the host: every layer's kept
    channels are identical to the same channels of the build without the pass, and every
    removed channel of that build holds one value everywhere (the constant the pass
    claimed). The outputs match tflite-micro (test_models_host checks more inputs)."""
    path = model_path("vww_96_int8")
    art = kc.compile(kc.load(path), board="host")
    monkeypatch.setattr(importlib.import_module("kiln.compiler.compile"), "optimize_graph",
                        lambda g: optimize(g, dead_filters=False))
    plain = kc.compile(kc.load(path), board="host")
    ops = art.graph.ops
    assert sum(len(op.removed.get("outputs", ())) for op in ops) >= 1900
    macs = [sum(o["macs"] for o in a.report["ops"]) for a in (art, plain)]
    assert macs[0] < 0.55 * macs[1]
    x = rand_int8(art.report["inputs"][0]["shape"], np.random.default_rng(11))
    assert_equal_exact(art.run(x)[0], run_reference(path.read_bytes(), [x])[0], "vww output")
    pruned, full = art.run_layers(x), plain.run_layers(x)
    assert len(pruned) == len(full) == len(ops)
    for k, op in enumerate(ops):
        got, want = pruned[k][0], full[k][0]
        gone = op.removed.get("outputs", [])
        keep = [c for c in range(want.shape[-1]) if c not in gone]
        assert_equal_exact(got, want[..., keep], f"layer {k} kept channels")
        for c in gone:
            assert np.unique(want[..., c]).size == 1, f"layer {k} channel {c} is not constant"
