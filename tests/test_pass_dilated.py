"""fold_dilated: TF's SPACE_TO_BATCH_ND → conv → BATCH_TO_SPACE_ND emulation of a dilated
convolution folded into one dilated convolution, bit-exact; and the unfolded pattern (batch
> 1 inside the graph) bit-exact too.

References. tflite-micro's SPACE_TO_BATCH_ND pads with a value it never initialises
(SpaceToBatchParams.output_offset; stale arena bytes, see test_ops_data_movement), so a
pattern whose S2B pads values that reach the output (SAME) has no defined TFLM result:
those are compared with TFLite's reference kernels on the pattern and with tflite-micro
on the equivalent one-op dilated convolution. VALID patterns are compared with
tflite-micro on the pattern itself.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, replace

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.passes import fold_dilated, optimize
from reference import assert_equal_exact, run_reference, run_tflite_ref
from tflite_builder import OpSpec, TensorSpec, bias_spec, build_model, const, weight_spec

SX, ZX, SY, ZY = 0.05, -3, 0.08, 5


def tf_paddings(size: int, k: int, d: int, padding: str) -> tuple[list[int], list[int]]:
    """(S2B paddings, B2S crops) along one axis, as TF's with_space_to_batch computes them
    for a stride-1 convolution (required_space_to_batch_paddings): the SAME padding split
    total // 2 before, the rest after, then padded at the end to a multiple of d, which the
    crops take off again."""
    total = (k - 1) * d if padding == "SAME" else 0
    p0, p1 = total // 2, total - total // 2
    extra = (-(size + p0 + p1)) % d
    return [p0, p1 + extra], [0, extra]


@dataclass
class Pattern:
    """One dilated convolution as TF writes it: `dims` 1 (NLC, through EXPAND_DIMS and
    SQUEEZE) or 2 (NHWC)."""

    kind: str = "conv"               # or "dw"
    dims: int = 2
    dilation: tuple[int, int] = (2, 2)
    padding: str = "SAME"
    size: tuple[int, int] = (9, 10)  # (H, W); dims 1 uses W as L
    kernel: tuple[int, int] = (3, 3)
    cin: int = 4
    cout: int = 6
    bias_add: bool = False           # an ADD of a per-channel constant before B2S
    pad_op: bool = False             # a PAD after the conv that the crops remove
    unknown_batch: bool = False      # batch 1 written for the pattern's inner tensors
    crops: list | None = None        # override TF's crops (a pattern that is no conv)
    dtype: str = "int8"
    reshapes: bool = False           # dims 1: RESHAPE in place of EXPAND_DIMS / SQUEEZE
    batch: int = 1                   # the model input's batch
    conv_bias: str = "random"        # "zero", or "none" (Keras' bias_add left after B2S)
    tf_axes: bool = False            # dims 1: axis -3 as TF's conv1d writes it
    seed: int = 0

    @property
    def label(self) -> str:
        extra = "".join(f" {k}" for k in ("bias_add", "pad_op", "unknown_batch", "reshapes")
                        if getattr(self, k))
        return (f"{self.kind} {self.dims}-D d{self.dilation} {self.padding} {self.size} "
                f"k{self.kernel}{extra}")

    def axes(self) -> list[tuple[int, int, int]]:
        """(size, kernel, dilation) per spatial axis of the S2B input."""
        if self.dims == 1:
            return [(self.size[1], self.kernel[1], self.dilation[1])]
        return [(self.size[i], self.kernel[i], self.dilation[i]) for i in range(2)]

    def out_shape(self) -> list[int]:
        c = self.cin if self.kind == "dw" else self.cout
        sp = [s if self.padding == "SAME" else s - (k - 1) * d for s, k, d in self.axes()]
        return [self.batch] + sp + [c]

    def filter_shape(self) -> tuple[int, int, int, int]:
        kh, kw = self.kernel if self.dims == 2 else (1, self.kernel[1])
        return (1, kh, kw, self.cin) if self.kind == "dw" else (self.cout, kh, kw, self.cin)

    def act(self, shape, q=(SX, ZX)) -> TensorSpec:
        zp = q[1] if self.dtype == "int8" else 0
        return TensorSpec(tuple(shape), self.dtype, scale=q[0], zero_point=zp)

    def weights(self):
        rng = np.random.default_rng(self.seed)
        w = weight_spec(self.filter_shape(), rng, per_channel_axis=3 if self.kind == "dw" else 0)
        n = self.filter_shape()[3 if self.kind == "dw" else 0]
        b = bias_spec(n, rng, SX, w.scale)
        if self.conv_bias == "zero":
            b.data[:] = 0
        if self.dtype == "int16":
            b = TensorSpec(b.shape, "int64", scale=b.scale, zero_point=b.zero_point,
                           data=b.data.astype(np.int64))
        add = TensorSpec((n,), self.dtype, scale=0.03, zero_point=0,
                         data=rng.integers(-100, 100, n))
        return w, b, add

    def build(self, tensors: list[TensorSpec], ops: list[OpSpec], x: int) -> int:
        """Append the pattern reading tensor `x`; return its output tensor's index."""
        def add(t: TensorSpec) -> int:
            tensors.append(t)
            return len(tensors) - 1

        axes = self.axes()
        pads, crops, sub = [], [], []
        for s, k, d in axes:
            p, c = tf_paddings(s, k, d, self.padding)
            pads.append(p)
            crops.append(c)
            sub.append((s + p[0] + p[1]) // d)
        crops = self.crops or crops
        block = [d for _, _, d in axes]
        batch = 1 if self.unknown_batch else self.batch * int(np.prod(block))
        c_out = self.filter_shape()[3 if self.kind == "dw" else 0]
        conv_sp = [s - k + 1 for s, (_, k, _) in zip(sub, axes)]
        w, b, bias_add = self.weights()
        cur = add(self.act([batch] + sub + [self.cin]))
        ops.append(OpSpec("SPACE_TO_BATCH_ND", [x, add(const(block)), add(const(pads))], [cur]))
        if self.dims == 1:
            shape = [batch, 1, sub[0], self.cin]
            e = add(self.act(shape))
            ops.append(OpSpec("RESHAPE", [cur, add(const([-1] + shape[1:]))], [e])
                       if self.reshapes else
                       OpSpec("EXPAND_DIMS", [cur, add(const([-3 if self.tf_axes else 1]))], [e]))
            cur = e
        y = add(self.act([batch] + ([1] if self.dims == 1 else []) + conv_sp + [c_out], (SY, ZY)))
        options = {"padding": "VALID"}
        if self.kind == "dw":
            options["depth_multiplier"] = 1
        ops.append(OpSpec("CONV_2D" if self.kind == "conv" else "DEPTHWISE_CONV_2D",
                          [cur, add(w), -1 if self.conv_bias == "none" else add(b)], [y],
                          options))
        cur = y
        if self.dims == 1:
            shape = [batch] + conv_sp + [c_out]
            s = add(self.act(shape, (SY, ZY)))
            ops.append(OpSpec("RESHAPE", [cur, add(const([-1] + shape[1:]))], [s])
                       if self.reshapes else
                       OpSpec("SQUEEZE", [cur], [s], {"squeeze_dims": [-3 if self.tf_axes else 1]}))
            cur = s
        if self.bias_add:
            a = add(self.act(tensors[cur].shape, (SY, ZY)))
            ops.append(OpSpec("ADD", [cur, add(bias_add)], [a]))
            cur = a
        if self.pad_op:
            shape = list(tensors[cur].shape)
            p = add(self.act([shape[0]] + [e + 1 for e in shape[1:-1]] + [shape[-1]], (SY, ZY)))
            ops.append(OpSpec("PAD", [cur, add(const([[0, 0]] + [[0, 1]] * len(block)
                                                     + [[0, 0]]))], [p]))
            crops = [[c[0], c[1] + d] for c, d in zip(crops, block)]
            conv_sp = [e + 1 for e in conv_sp]
            cur = p
        spatial = [c * d - cr[0] - cr[1] for c, d, cr in zip(conv_sp, block, crops)]
        out = add(self.act([self.batch] + spatial + [c_out], (SY, ZY)))
        ops.append(OpSpec("BATCH_TO_SPACE_ND", [cur, add(const(block)), add(const(crops))], [out]))
        return out

    def input_shape(self) -> list[int]:
        return [self.batch] + [s for s, _, _ in self.axes()] + [self.cin]

    def build_direct(self, tensors: list[TensorSpec], ops: list[OpSpec], x: int) -> int:
        """The same layer as one dilated convolution over an NHWC (dims 1: N1WC) input."""
        def add(t: TensorSpec) -> int:
            tensors.append(t)
            return len(tensors) - 1

        w, b, bias_add = self.weights()
        out = self.out_shape()
        out4 = out if self.dims == 2 else [out[0], 1] + out[1:]
        y = add(self.act(out4, (SY, ZY)))
        options = {"padding": self.padding, "dilation_h_factor": self.dilation[0],
                   "dilation_w_factor": self.dilation[1]}
        if self.kind == "dw":
            options["depth_multiplier"] = 1
        ops.append(OpSpec("CONV_2D" if self.kind == "conv" else "DEPTHWISE_CONV_2D",
                          [x, add(w), -1 if self.conv_bias == "none" else add(b)], [y],
                          options))
        if self.bias_add:
            a = add(self.act(out4, (SY, ZY)))
            ops.append(OpSpec("ADD", [y, add(bias_add)], [a]))
            y = a
        return y


def pattern_model(patterns: list[Pattern], direct: bool = False) -> bytes:
    """One model with every pattern (or its one-op equivalent) as an independent layer."""
    tensors: list[TensorSpec] = []
    ops: list[OpSpec] = []
    ins, outs = [], []
    for p in patterns:
        shape = p.input_shape()
        if direct and p.dims == 1:
            shape = [shape[0], 1] + shape[1:]
        tensors.append(p.act(shape))
        ins.append(len(tensors) - 1)
        outs.append((p.build_direct if direct else p.build)(tensors, ops, ins[-1]))
    return build_model(ops, tensors, ins, outs)


def inputs_for(patterns: list[Pattern], seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    info = np.iinfo(patterns[0].dtype)
    return [rng.integers(info.min, info.max, p.input_shape(), endpoint=True).astype(p.dtype)
            for p in patterns]


def check_equal(got, want, patterns, what) -> None:
    for g, w, p in zip(got, want, patterns):
        assert_equal_exact(g.reshape(-1), np.asarray(w).reshape(-1), f"{p.label} vs {what}")


def compile_without_fold(model: bytes, monkeypatch):
    # the module (kiln.compiler.compile is also the name of the function)
    compile_module = importlib.import_module("kiln.compiler.compile")
    monkeypatch.setattr(compile_module, "optimize_graph",
                        functools.partial(optimize, dilated=False))
    return kiln_compile(load(model), board="host")


FOLDABLE = [
    Pattern("conv", 2, (2, 2), "SAME"),
    Pattern("conv", 2, (4, 4), "VALID", size=(13, 14)),
    Pattern("conv", 2, (2, 4), "SAME", size=(7, 12), kernel=(3, 2)),
    Pattern("dw", 2, (2, 2), "VALID"),
    Pattern("dw", 2, (4, 4), "SAME", size=(10, 9), cin=8),
    Pattern("conv", 1, (1, 2), "VALID", size=(1, 17), kernel=(1, 3)),
    Pattern("conv", 1, (1, 4), "SAME", size=(1, 30), kernel=(1, 3), cin=3, cout=5),
    Pattern("dw", 1, (1, 4), "VALID", size=(1, 25), kernel=(1, 2)),
    Pattern("dw", 1, (1, 2), "SAME", size=(1, 11), kernel=(1, 5)),
    Pattern("conv", 1, (1, 2), "SAME", size=(1, 14), kernel=(1, 3), reshapes=True),
    Pattern("conv", 2, (2, 2), "SAME", size=(6, 7), batch=3),
    Pattern("dw", 1, (1, 4), "VALID", size=(1, 19), kernel=(1, 3), batch=2),
    Pattern("conv", 2, (2, 2), "SAME", bias_add=True),
    Pattern("conv", 2, (2, 2), "VALID", pad_op=True),
    Pattern("conv", 1, (1, 2), "SAME", size=(1, 16), kernel=(1, 3), unknown_batch=True),
    Pattern("dw", 2, (2, 2), "VALID", unknown_batch=True),
]


# 16x8: symmetric int16 activations, int64 bias (tflite-micro has no int16
# SPACE_TO_BATCH_ND: the pattern itself runs in TFLite's reference kernels only).
FOLDABLE16 = [replace(p, dtype="int16") for p in (
    Pattern("conv", 2, (2, 2), "SAME"),
    Pattern("dw", 2, (4, 4), "VALID", size=(13, 12)),
    Pattern("conv", 1, (1, 4), "SAME", size=(1, 30), kernel=(1, 3), cin=3, cout=5),
    Pattern("dw", 1, (1, 2), "VALID", size=(1, 11), kernel=(1, 5), unknown_batch=True),
)]


def _layer_types(art) -> list[str]:
    return [op["type"] for op in art.report["ops"]]


@pytest.mark.parametrize("patterns", [FOLDABLE, FOLDABLE16], ids=["int8", "int16"])
def test_fold_gives_one_dilated_conv_bit_exact(patterns):
    """Every pattern folds to one dilated convolution; outputs equal TFLite's reference on
    the pattern, tflite-micro on the one-op dilated convolution, and (int8 VALID)
    tflite-micro on the pattern."""
    model = pattern_model(patterns)
    art = kiln_compile(load(model), board="host")
    types = _layer_types(art)
    assert "SPACE_TO_BATCH_ND" not in types and "BATCH_TO_SPACE_ND" not in types
    assert sum(t in ("CONV_2D", "DEPTHWISE_CONV_2D") for t in types) == len(patterns)
    c = art.files["model.c"]
    for p in patterns:
        dh, dw = p.dilation
        assert f"dilation {dh}x{dw}, {p.padding} padding" in c, p.label
    xs = inputs_for(patterns)
    got = art.run(*xs)
    check_equal(got, run_tflite_ref(model, xs), patterns, "TFLite reference (pattern)")
    check_equal(got, run_reference(pattern_model(patterns, direct=True),
                                   [x.reshape(x.shape[0], 1, -1, x.shape[-1]) if p.dims == 1 else x
                                    for x, p in zip(xs, patterns)]),
                patterns, "tflite-micro (one dilated conv)")
    # tflite-micro does not resize tensors: on a pattern written with batch 1 inside it
    # computes one sub-image only, so it runs those with their real batch written.
    valid = [i for i, p in enumerate(patterns) if p.padding == "VALID" and p.dtype == "int8"]
    if valid:
        want = run_reference(pattern_model([replace(patterns[i], unknown_batch=False)
                                            for i in valid]), [xs[i] for i in valid])
        check_equal([got[i] for i in valid], want, [patterns[i] for i in valid], "tflite-micro")


def test_fold_keeps_no_batch_expanded_buffer():
    """The folded model's arena is the one-op dilated convolution's: no tensor of the
    batch-expanded shapes is planned."""
    for p in (Pattern("conv", 2, (4, 4), "SAME", size=(12, 12)),
              Pattern("dw", 1, (1, 4), "SAME", size=(1, 40), kernel=(1, 3), cin=8)):
        folded = kiln_compile(load(pattern_model([p])), board="host")
        direct = kiln_compile(load(pattern_model([p], direct=True)), board="host")
        assert folded.report["arena_bytes"] == direct.report["arena_bytes"], p.label
        planned = {t["id"]: t for t in folded.report["tensors"]
                   if t["offset"] not in ("const", "unused")}
        assert all(t["shape"][0] == 1 for t in planned.values()), planned


@pytest.mark.parametrize("patterns", [FOLDABLE, FOLDABLE16], ids=["int8", "int16"])
def test_unfolded_patterns_run_with_batch_above_one(patterns, monkeypatch):
    """With the pass off, the same models run S2B / conv / B2S over batch-expanded tensors,
    bit-exact; and they need a larger arena."""
    known = [p for p in patterns if not p.unknown_batch]
    model = pattern_model(known)
    folded = kiln_compile(load(model), board="host")
    art = compile_without_fold(model, monkeypatch)
    types = _layer_types(art)
    assert types.count("SPACE_TO_BATCH_ND") == types.count("BATCH_TO_SPACE_ND") == len(known)
    assert art.report["arena_bytes"] > folded.report["arena_bytes"]
    xs = inputs_for(known)
    check_equal(art.run(*xs), folded.run(*xs), known, "the folded model")


def test_unknown_batch_without_fold_is_refused_with_its_shapes(monkeypatch):
    """Without the pass, a pattern written with batch 1 for an unknown batch does not
    compile (its tensors are too small for what the ops write): the error names them."""
    from kiln.compiler.errors import ModelError
    model = pattern_model([Pattern("conv", 1, (1, 2), "VALID", size=(1, 16), kernel=(1, 3),
                                   unknown_batch=True)])
    with pytest.raises(ModelError,
                       match=r"SPACE_TO_BATCH_ND .*output shape \[1, 8, 4\] != \[2, 8, 4\]"):
        compile_without_fold(model, monkeypatch)


UNFOLDABLE = [
    # crops that are not TF's: the B2S output starts one sample later than any conv's
    Pattern("conv", 2, (2, 2), "VALID", size=(10, 10), crops=[[1, 1], [0, 0]]),
    Pattern("dw", 1, (1, 2), "VALID", size=(1, 12), kernel=(1, 3), crops=[[2, 0]]),
    Pattern("conv", 2, (2, 2), "VALID", size=(8, 8), crops=[[0, 0], [1, 1]], batch=2),
    # the same with batch 1 written inside: the pass sets the batch the tensors hold
    Pattern("conv", 2, (2, 2), "VALID", size=(10, 10), crops=[[1, 1], [0, 0]],
            unknown_batch=True),
]


def test_patterns_that_are_no_dilated_conv_stay_and_are_exact():
    model = pattern_model(UNFOLDABLE)
    art = kiln_compile(load(model), board="host")
    types = _layer_types(art)
    assert types.count("SPACE_TO_BATCH_ND") == types.count("BATCH_TO_SPACE_ND") == len(UNFOLDABLE)
    xs = inputs_for(UNFOLDABLE)
    got = art.run(*xs)
    check_equal(got, run_tflite_ref(model, xs), UNFOLDABLE, "TFLite reference")
    known = [i for i, p in enumerate(UNFOLDABLE) if not p.unknown_batch]
    want = run_reference(pattern_model([UNFOLDABLE[i] for i in known]), [xs[i] for i in known])
    check_equal([got[i] for i in known], want, [UNFOLDABLE[i] for i in known], "tflite-micro")


def _graph_of(p: Pattern):
    return load(pattern_model([p]))


def test_pass_rewrites_conv_options():
    g = fold_dilated(_graph_of(Pattern("dw", 2, (2, 4), "SAME", size=(7, 12), kernel=(3, 2))))
    assert [op.type for op in g.ops] == ["DEPTHWISE_CONV_2D"]
    o = g.ops[0].options
    assert (o["padding"], o["dilation_h_factor"], o["dilation_w_factor"]) == ("SAME", 2, 4)
    assert g.ops[0].inputs[0] == g.inputs[0] and g.ops[0].outputs[0] == g.outputs[0]
    g = fold_dilated(_graph_of(Pattern("conv", 1, (1, 4), "VALID", size=(1, 30), kernel=(1, 3))))
    assert [op.type for op in g.ops] == ["EXPAND_DIMS", "CONV_2D", "SQUEEZE"]
    assert g.tensor(g.ops[1].outputs[0]).shape == (1, 1, 22, 6)
    assert g.ops[1].options["dilation_w_factor"] == 4 and g.ops[1].options["padding"] == "VALID"
    g.verify()


def test_pass_leaves_shared_and_strided_patterns():
    """An inner tensor read twice, or a strided inner conv, is not the emulation."""
    p = Pattern("conv", 2, (2, 2), "VALID", size=(10, 10))
    g = _graph_of(p)
    s2b_out = g.ops[0].outputs[0]
    g.outputs.append(s2b_out)                    # the S2B output is also a model output
    assert [op.type for op in fold_dilated(g).ops][0] == "SPACE_TO_BATCH_ND"
    g = _graph_of(p)
    g.ops[1].options["stride_w"] = 2
    assert [op.type for op in fold_dilated(g).ops][0] == "SPACE_TO_BATCH_ND"




@pytest.mark.cross
@pytest.mark.slow
def test_generated_c_builds_for_cortex_m(tmp_path):
    """The folded convolutions and an unfolded batch > 1 pattern, int8 and int16, in one
    firmware: arm-none-eabi-gcc with -Wall -Wextra -Werror."""
    from conftest import require_tool
    from kiln.project_gen import create_project
    require_tool("arm-none-eabi-gcc")
    require_tool("make")
    int16 = FOLDABLE16 + [replace(UNFOLDABLE[0], dtype="int16")]
    for name, patterns in (("int8", FOLDABLE[:4] + UNFOLDABLE[:1]), ("int16", int16)):
        art = kiln_compile(load(pattern_model(patterns)), board="mps2-an386")
        report = create_project(art, board="mps2-an386", out_dir=tmp_path / name).build()
        assert report.flash.used > 0, name


def test_bias_added_first_folds_too():
    """bias + y is the same ADD as y + bias."""
    g = _graph_of(Pattern("conv", 2, (2, 2), "SAME", bias_add=True))
    add = next(op for op in g.ops if op.type == "ADD")
    add.inputs.reverse()
    assert [op.type for op in fold_dilated(g).ops] == ["CONV_2D", "ADD"]


def test_malformed_patterns_are_errors_not_crashes():
    """A SPACE_TO_BATCH_ND without its paddings, a conv without a filter: one ModelError."""
    from kiln.compiler.errors import ModelError
    p = Pattern("conv", 2, (2, 2), "VALID", size=(10, 10))
    for op_index, drop in ((0, 2), (1, 1)):
        g = _graph_of(p)
        g.ops[op_index].inputs = g.ops[op_index].inputs[:drop]
        assert [op.type for op in fold_dilated(g).ops][0] == "SPACE_TO_BATCH_ND"
        with pytest.raises(ModelError):
            kiln_compile(g, board="host")


def test_conv_without_bias_folds_exactly():
    """Keras adds the bias after B2S: the convolution has none. The reference is the same
    patterns with an all-zero bias: TFLite's reference refuses an int8 convolution without
    one, and tflite-micro crashed (SIGSEGV) running these two patterns without bias in one
    model (each alone runs). The 1-D one uses TF's conv1d axes (-3)."""
    patterns = [Pattern("conv", 1, (1, 2), "VALID", size=(1, 15), kernel=(1, 3), tf_axes=True,
                        conv_bias="none"),
                Pattern("dw", 2, (2, 2), "VALID", conv_bias="none")]
    art = kiln_compile(load(pattern_model(patterns)), board="host")
    assert _layer_types(art) == ["CONV_2D", "DEPTHWISE_CONV_2D"]
    xs = inputs_for(patterns)
    want = run_reference(pattern_model([replace(p, conv_bias="zero") for p in patterns]), xs)
    check_equal(art.run(*xs), want, patterns, "tflite-micro (zero bias)")
