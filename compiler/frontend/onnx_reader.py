"""Read a float or QDQ ONNX model (opset 13 and newer) into kiln's Graph IR.

The `onnx` package parses, checks and infers shapes; this module maps nodes onto the
TFLite op types and options the rest of kiln keys on (CONV_2D, FULLY_CONNECTED, ...),
with the options dicts the TFLite reader would give. The result is a float graph, which
`quantize()` / `--calibration` turn into int8 exactly as a float .tflite.

Layout: ONNX is NCHW, kiln's kernels NHWC. Every rank-4 value is held NHWC in the IR
(weights transposed at import); every other rank keeps its ONNX shape. A rank-4 model
input or output keeps the user's NCHW layout through one TRANSPOSE at the boundary; a
Reshape/Flatten of a rank-4 value goes back to NCHW order first (a RESHAPE where the
transpose moves only size-1 axes, e.g. after GlobalAveragePool; a Flatten read only by
a Gemm permutes the Gemm's weights instead); a permute undoing the one before it cancels.
BatchNormalization is folded into the Conv before it, and Relu/Clip(0, 6) into the
Conv/Gemm/MatMul/Add/Sub/Mul/pool before them; shape subgraphs on constants and static
shapes are folded here (docs/onnx.md has the op table). A QDQ model (QuantizeLinear/
DequantizeLinear pairs) is read as this float graph, then made int8 with the pairs'
scales (onnx_qdq.py).

Hostile input (docs/hostile_input.md): `frontend.load` reads the file through fsutil with
the models' size cap (1 GiB); a file onnx cannot parse, a failed check, a dynamic shape,
external data or an unsupported op is one ModelError line; folded constants are bounded
before numpy allocates them; names reach generated text only as IR tensor names, which
the code generator escapes.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from ..errors import ModelError
from ..ir import Graph, Op, Tensor
from . import onnx_qdq
from .onnx_external import load_external_data

MIN_OPSET = 13
_MAX_DIM = 1 << 24
_MAX_ELEMENTS = 1 << 28
_MAX_RANK = 8
_MAX_FOLDED = 1 << 24   # elements of a folded constant (shape subgraphs are tiny)

# Ops converted to kernels, and ops folded when their inputs are constant (or, for
# Shape, when the shape is static).
_CONVERTED = {
    "Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Clip", "LeakyRelu",
    "HardSwish", "HardSigmoid", "Sigmoid", "Tanh", "MaxPool", "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "ReduceMean", "ReduceMax", "Flatten", "Reshape", "Squeeze", "Unsqueeze",
    "Transpose", "Concat", "Pad", "Softmax", "LogSoftmax", "BatchNormalization", "Identity",
    "ConvTranspose", "PRelu", "Slice", "Split", "Gather", "Resize",
}
_CONVERTED |= {"LSTM", "GRU"}     # onnx_recurrent.py
_FOLDED = {"Constant", "Shape", "Cast", "ConstantOfShape", "Expand"}
# Converted ops that are folded too when every input is constant.
_FOLDABLE = _FOLDED | {"Add", "Sub", "Mul", "Div", "Reshape", "Flatten", "Identity", "Squeeze",
                       "Unsqueeze", "Concat", "Transpose", "Gather", "Slice"}
SUPPORTED_OPS = sorted(_CONVERTED | _FOLDED)
# Constant's attribute forms kiln reads, with their numpy dtype (None: a TensorProto).
_CONSTANT_FORMS = {"value": None, "value_float": np.float32, "value_floats": np.float32,
                   "value_int": np.int64, "value_ints": np.int64}

# Ops whose output is >= 0, and ops whose output is >= 0 when their input is (for MaxPool
# padding, see _pool).
_NONNEG_OPS = {"RELU", "RELU6", "LOGISTIC", "SOFTMAX"}
# ONNX ops whose output has their input's layout (elementwise): after a 1-D Conv they
# stay in its [N, 1, L, C] form.
_LAYOUT_FREE = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSwish", "HardSigmoid", "Clip",
                "Identity", "BatchNormalization", "Add", "Sub", "Mul", "Div", "PRelu"}
_ORDER_PRESERVING = {"MAX_POOL_2D", "PAD", "RESHAPE", "TRANSPOSE"}

# Ops that read a rank-3 value as a 1-D image [N, C, L].
_WINDOW_1D = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
              "GlobalMaxPool", "Resize"}

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


def parse(data: bytes, name: str = "model", input_shapes: dict | None = None,
          layout: str = "nchw", folder=None) -> Graph:
    """`data` as a Graph; `input_shapes` (input name → dims) pins the dynamic dims of the
    model's inputs (an export with dynamic_axes: batch "N"); `layout` "nhwc" makes the
    image inputs and outputs NHWC (no boundary transposes); `folder`: where the model's
    external data files are (onnx_external.py), None for a model given as bytes."""
    import onnx

    if len(data) == 0:
        raise ModelError("the model file is empty")
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:   # protobuf's DecodeError and friends
        raise ModelError(f"not a readable ONNX model ({_line(e)})") from None
    try:
        if not model.HasField("graph"):
            raise ModelError("not an ONNX model: no graph (truncated, or another format)")
        opset = _opset(model)
        if input_shapes:
            _pin_input_shapes(model.graph, input_shapes)
        external = load_external_data(model.graph, folder)
        qdq = None
        if onnx_qdq.has_qdq(model.graph):
            _check_ops(model.graph, opset, extra=onnx_qdq.QDQ_OPS)
            try:
                onnx.checker.check_model(model)
            except Exception as e:
                raise ModelError(f"invalid ONNX model: {_line(e)}") from None
            model, qdq = onnx_qdq.split(model)
        _check_ops(model.graph, opset)
        try:
            onnx.checker.check_model(model)
        except Exception as e:
            raise ModelError(f"invalid ONNX model: {_line(e)}") from None
        with np.errstate(all="ignore"):   # non-finite results are refused where they land
            converter = _Converter(_fold_shapes(model), name, opset, layout)
            if qdq is not None:     # zero point at its type's minimum: the value is >= 0
                converter.qdq_nonneg = {v for v, p in qdq.activations.items() if p.scale.size == 1
                                        and int(p.zero_point[0]) == {"int8": -128, "uint8": 0}.get(p.dtype)}
            graph = converter.graph()
            if qdq is not None:
                graph = onnx_qdq.apply(graph, qdq, converter.sources)
    except ModelError:
        raise
    except Exception as e:   # protobuf, numpy and onnx raise many kinds on bad values
        raise ModelError(f"malformed ONNX model ({type(e).__name__}: {_line(e)})") from None
    digest = hashlib.sha256(data)
    if input_shapes:            # another model than the file alone: caches must tell them apart
        digest.update(repr(sorted((k, tuple(v)) for k, v in input_shapes.items())).encode())
    if external:                # the weights in the data files are part of the model
        digest.update(b"external data " + external)
    if layout != "nchw":        # other inputs and outputs: another compiled model
        digest.update(f"layout {layout}".encode())
    graph.sha256 = digest.hexdigest()
    graph.verify()
    return graph


def _pin_input_shapes(graph, input_shapes: dict) -> None:
    """Set the dims of the named inputs: same rank, static dims unchanged, every dim
    between 1 and the reader's limit. ModelError names what does not fit."""
    inits = {t.name for t in graph.initializer}
    inputs = {vi.name: vi for vi in graph.input if vi.name not in inits}
    unknown = sorted(set(input_shapes) - set(inputs))
    if unknown:
        raise ModelError(f"input_shapes names {', '.join(map(repr, unknown))}; the model's "
                         f"inputs are {', '.join(map(repr, inputs)) or 'none'}")
    for name, dims in input_shapes.items():
        try:
            dims = [int(d) for d in dims]
        except (TypeError, ValueError):
            raise ModelError(f"input_shapes[{name!r}] is not a sequence of whole numbers") from None
        shape = inputs[name].type.tensor_type.shape
        declared = list(shape.dim)
        if len(declared) != len(dims):
            raise ModelError(f"input {name!r} has rank {len(declared)}; input_shapes gives "
                             f"{len(dims)} dims {dims}")
        for i, (d, want) in enumerate(zip(declared, dims)):
            if not 1 <= want <= _MAX_DIM:
                raise ModelError(f"input_shapes[{name!r}] dim {i} is {want}; dims are 1 to "
                                 f"{_MAX_DIM:,}")
            if d.HasField("dim_value") and d.dim_value != want:
                raise ModelError(f"input {name!r} dim {i} is {d.dim_value} in the model; "
                                 f"input_shapes gives {want} (only dynamic dims can be pinned)")
        for d, want in zip(declared, dims):
            d.dim_value = want


def _infer(model):
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as e:
        raise ModelError(f"invalid ONNX model: shape inference failed: {_line(e)}") from None


def _fold_shapes(model, rounds: int = 64):
    """The model with every node computable from constants and static shapes folded into
    initializers (Shape → Gather → Concat → Reshape chains), shapes inferred again after
    each round: a Reshape whose target was computed gets its static output shape. A chain
    of reshapes each computed from the shape of the one before (ShuffleNet's channel
    shuffles in a dynamic-batch export) takes one round per link."""
    from onnx import numpy_helper

    model = _infer(model)
    for _ in range(rounds):
        conv = _Converter(model, "", 0)
        folded = conv.fold_constants()
        if not folded:
            return model
        graph = model.graph
        keep = [n for i, n in enumerate(graph.node) if i not in folded]
        used = {v for n in keep for v in n.input} | {o.name for o in graph.output}
        known = {t.name for t in graph.initializer}
        for i in sorted(folded):
            for v in graph.node[i].output:
                if v in used and v not in known:
                    graph.initializer.append(numpy_helper.from_array(conv.consts[v], v))
        del graph.node[:]
        graph.node.extend(keep)
        del graph.value_info[:]
        model = _infer(model)
    return model


def _line(e: Exception) -> str:
    text = " ".join(str(e).split())
    return text[:300] + ("…" if len(text) > 300 else "")


def _opset(model) -> int:
    versions = {o.domain: o.version for o in model.opset_import}
    opset = versions.get("", versions.get("ai.onnx"))
    if opset is None:
        raise ModelError("the ONNX model imports no default-domain opset")
    if opset < MIN_OPSET:
        raise ModelError(f"the ONNX model uses opset {opset}; kiln reads opset {MIN_OPSET} and "
                         f"newer (onnx.version_converter.convert_version(model, {MIN_OPSET}) "
                         "upgrades it)")
    return int(opset)


def _text(s) -> str:
    """A protobuf string field for a message: one printable line (protobuf hands out bytes
    where a field is not UTF-8; control characters are shown escaped, as repr does)."""
    s = s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s)
    return s if s.isprintable() else repr(s)


def _check_ops(graph, opset: int, extra: frozenset[str] = frozenset()) -> None:
    """Every unsupported node at once, grouped by type, with its attributes (`extra`: op
    types read besides the converted and folded ones, QDQ's pairs)."""
    bad: dict[str, list[str]] = {}
    for i, node in enumerate(graph.node):
        domain = _text(node.domain) if node.domain not in ("", "ai.onnx") else ""
        if domain or node.op_type not in _CONVERTED | _FOLDED | extra:
            key = f"{domain + '.' if domain else ''}{_text(node.op_type)}"
            attrs = ",".join(_text(a.name) for a in node.attribute)
            bad.setdefault(key, []).append(f"{i}" + (f" [{attrs}]" if attrs else ""))
        elif node.op_type == "Constant" and any(a.name not in _CONSTANT_FORMS for a in node.attribute):
            bad.setdefault("Constant", []).append(
                f"{i} [{','.join(_text(a.name) for a in node.attribute)}]")
    if bad:
        parts = [f"{k} (node{'s' if len(v) > 1 else ''} {'; '.join(v[:5])}"
                 f"{f' and {len(v) - 5} more' if len(v) > 5 else ''})" for k, v in sorted(bad.items())]
        raise ModelError(f"unsupported ONNX op(s) at opset {opset}: {', '.join(parts)}; "
                         f"kiln reads {', '.join(SUPPORTED_OPS)}")


def _pin_flag(vi) -> str:
    """The --input-shape option that pins input `vi`: its static dims, 1 for a dynamic one."""
    import shlex

    dims = [str(d.dim_value) if d.HasField("dim_value") else "1"
            for d in vi.type.tensor_type.shape.dim]
    return "--input-shape " + shlex.quote(f"{_text(vi.name)}={','.join(dims)}")


def _check_shape(shape: tuple[int, ...], what: str) -> None:
    if len(shape) > _MAX_RANK:
        raise ModelError(f"{what} has rank {len(shape)} (kiln supports at most {_MAX_RANK})")
    if any(d < 0 or d > _MAX_DIM for d in shape) or math.prod(max(d, 1) for d in shape) > _MAX_ELEMENTS:
        raise ModelError(f"{what} has shape {list(shape)}, outside kiln's limits")


def _as_2d(a: dict) -> dict:
    """A 1-D window op's attributes as those of the 2-D op over [N, C, 1, L]."""
    two = dict(a)
    for key in ("kernel_shape", "strides", "dilations"):
        if key in a:
            two[key] = [1] + list(a[key])
    if "pads" in a:
        begin, end = list(a["pads"])
        two["pads"] = [0, begin, 0, end]
    return two


def _attrs(node) -> dict:
    import onnx.helper

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _to_array(t) -> np.ndarray:
    from onnx import numpy_helper

    _check_shape(tuple(int(d) for d in t.dims), f"constant {t.name!r}")
    return np.array(numpy_helper.to_array(t))


class _Converter:
    # LSTM and GRU live in their own module; these are methods like the _op_* below.
    from .onnx_recurrent import op_gru as _op_GRU, op_lstm as _op_LSTM

    def __init__(self, model, name: str, opset: int, layout: str = "nchw"):
        self.model, self.name, self.opset = model, name, opset
        self.layout = layout                      # of the model's inputs and outputs
        g = model.graph
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []
        self.consts: dict[str, np.ndarray] = {t.name: _to_array(t) for t in g.initializer}
        self.values: dict[str, int] = {}          # ONNX value name → IR tensor id
        self.nhwc: set[str] = set()               # values held NHWC (ONNX rank 4)
        self.nwc: set[str] = set()                # rank-3 values of 1-D ops, held [N, 1, L, C]
        self.reshaped_from: dict[int, int] = {}   # a layout RESHAPE's output → its input
        self.nhwc_columns: dict[str, tuple[int, int, int]] = {}   # flattened NHWC: (C, H, W)
        self.permuted: dict[tuple[int, tuple[int, ...]], int] = {}   # (tensor, perm) → its source
        self.nonneg: set[int] = set()             # IR tensors known >= 0 (after a Relu, ...)
        self.qdq_nonneg: set[str] = set()         # a QDQ model's values quantized from 0 up
        self.shapes: dict[str, tuple[int, ...]] = {}   # ONNX shapes, static
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            shape = self._static_shape(vi)
            if shape is not None:
                self.shapes[vi.name] = shape
        self.consumers: dict[str, list[int]] = {}
        for i, node in enumerate(g.node):
            for v in node.input:
                if v:
                    self.consumers.setdefault(v, []).append(i)
        self.outputs = {o.name for o in g.output}
        self.skip: set[int] = set()
        self.node_index = -1
        # IR constant → (model initializer it was made from, ONNX axis of its output
        # channels): a QDQ model's weights are requantized with that initializer's scales.
        self.sources: dict[int, tuple[str, int]] = {}

    # --- shapes -------------------------------------------------------------------------

    def _static_shape(self, vi) -> tuple[int, ...] | None:
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            return None
        dims = []
        for d in tt.shape.dim:
            if not d.HasField("dim_value"):
                return None
            dims.append(int(d.dim_value))
        return tuple(dims)

    def _shape(self, value: str) -> tuple[int, ...]:
        if value in self.consts:
            return tuple(self.consts[value].shape)
        if value not in self.shapes:
            raise ModelError(f"value {value!r} has a dynamic or unknown shape; kiln compiles "
                             "static shapes: export the model with fixed dims")
        return self.shapes[value]

    # --- IR building --------------------------------------------------------------------

    def _tensor(self, name: str, shape, data: np.ndarray | None = None, dtype: str = "float32") -> int:
        if isinstance(name, bytes):     # a name protobuf could not decode
            name = name.decode("utf-8", "replace")
        shape = tuple(int(d) for d in shape)
        _check_shape(shape, f"tensor {name!r}")
        tid = len(self.tensors)
        self.tensors.append(Tensor(id=tid, name=name or f"tensor_{tid}", shape=shape,
                                   dtype=dtype, data=data))
        return tid

    def _const(self, name: str, data: np.ndarray) -> int:
        data = np.ascontiguousarray(data)
        dtype = "int32" if data.dtype.kind in "iu" else "float32"
        data = data.astype(np.int32 if dtype == "int32" else np.float32)
        if dtype == "float32" and not np.all(np.isfinite(data)):
            raise ModelError(f"{self._where()}: constant {name!r} holds NaN or infinite values")
        return self._tensor(name, data.shape, data, dtype)

    def _op(self, op_type: str, inputs: list[int], outputs: list[int], options: dict | None = None) -> None:
        options = options or {}
        if (op_type in _NONNEG_OPS or options.get("fused_activation_function") in ("RELU", "RELU6")
                or (op_type in _ORDER_PRESERVING and inputs[0] in self.nonneg)):
            self.nonneg.update(outputs)
        self.ops.append(Op(type=op_type, inputs=inputs, outputs=outputs, options=options,
                           index=len(self.ops)))

    def _ir_shape(self, value: str) -> tuple[int, ...]:
        shape = self._shape(value)
        if len(shape) == 4:
            return tuple(shape[p] for p in NCHW_TO_NHWC)
        if value in self.nwc:
            n, c, length = shape
            return (n, 1, length, c)
        return shape

    def _out(self, value: str) -> int:
        """A new IR tensor for ONNX output `value` (NHWC if rank 4)."""
        tid = self._tensor(value, self._ir_shape(value))
        self.values[value] = tid
        if len(self._shape(value)) == 4:
            self.nhwc.add(value)
        return tid

    def _input(self, value: str) -> int:
        if value in self.consts:
            raise ModelError(f"{self._where()}: input {value!r} is a constant where kiln needs "
                             "an activation")
        if value not in self.values:
            raise ModelError(f"{self._where()}: input {value!r} is never produced")
        return self.values[value]

    def _permute(self, tid: int, perm: tuple[int, ...], name: str) -> int:
        """`tid` permuted by `perm`: a RESHAPE when only size-1 axes move, else a TRANSPOSE;
        the tensor it came from when `tid` was made by the inverse permute."""
        undone = self.permuted.get((tid, perm))
        if undone is not None:          # the inverse of the permute that made `tid`
            return undone
        shape = self.tensors[tid].shape
        new = tuple(shape[p] for p in perm)
        out = self._tensor(name, new)
        self.permuted[(out, tuple(int(i) for i in np.argsort(perm)))] = tid
        moved = [p for p in perm if shape[p] != 1]
        if moved == sorted(moved):
            self._op("RESHAPE", [tid, self._const(name + "_shape", np.array(new, np.int32))], [out],
                     {"new_shape": list(new)})
        else:
            self._op("TRANSPOSE", [tid, self._const(name + "_perm", np.array(perm, np.int32))], [out])
        return out

    def _plain(self, value: str) -> int:
        """The IR tensor of `value` in ONNX's own layout (NCHW for rank 4, NCL for rank 3)."""
        tid = self._input(value)
        if value in self.nwc:
            n, _, length, c = self.tensors[tid].shape
            return self._permute(self._reshaped(tid, (n, length, c), value + "_nlc"), (0, 2, 1),
                                 value + "_ncl")
        return self._permute(tid, NHWC_TO_NCHW, value + "_nchw") if value in self.nhwc else tid

    def _as_nwc(self, value: str) -> int:
        """Rank-3 `value` ([N, C, L]) as 1-D ops hold it: [N, 1, L, C], NHWC with H = 1."""
        tid = self._input(value)
        if value in self.nwc:
            return tid
        if len(self.tensors[tid].shape) != 3:
            raise ModelError(f"{self._where()}: a 1-D window op reads a rank-"
                             f"{len(self.tensors[tid].shape)} value (kiln reads [N, C, L])")
        nlc = self._permute(tid, (0, 2, 1), value + "_nlc")
        n, length, c = self.tensors[nlc].shape
        return self._reshaped(nlc, (n, 1, length, c), value + "_nwc")

    def _reshaped(self, tid: int, shape: tuple[int, ...], name: str) -> int:
        """A RESHAPE of `tid` (a view: kiln aliases it, no copy); the tensor it came from
        when `tid` is itself a reshape of a tensor of that shape."""
        source = self.reshaped_from.get(tid)
        if source is not None and self.tensors[source].shape == tuple(shape):
            return source
        out = self._tensor(name, shape)
        self.reshaped_from[out] = tid
        self._op("RESHAPE", [tid, self._const(name + "_shape", np.array(shape, np.int32))], [out],
                 {"new_shape": list(shape)})
        return out

    def _where(self) -> str:
        node = self.model.graph.node[self.node_index]
        return f"node {self.node_index} ({node.op_type}{' ' + repr(node.name) if node.name else ''})"

    # --- the graph ----------------------------------------------------------------------

    def _read_by_1d(self, value: str) -> bool:
        """Whether a 1-D window op (Conv, pools over [N, C, L]) reads `value`: with
        layout "nhwc" such a rank-3 input is [N, L, C]; any other rank-3 input keeps its
        shape (a sequence [N, T, F] is no image)."""
        return any(self.model.graph.node[i].op_type in _WINDOW_1D
                   for i in self.consumers.get(value, ()))

    def graph(self) -> Graph:
        g = self.model.graph
        inputs = []
        for vi in g.input:
            if vi.name in self.consts:
                continue      # old exporters list initializers as inputs
            if vi.type.tensor_type.elem_type != 1:
                raise ModelError(f"input {vi.name!r} is not float32; kiln reads float ONNX models "
                                 "and QDQ models (an integer input read by a DequantizeLinear)")
            shape = self._static_shape(vi)
            if shape is None:
                dims = [str(d.dim_value) if d.HasField("dim_value") else _text(d.dim_param) or "?"
                        for d in vi.type.tensor_type.shape.dim]
                raise ModelError(f"input {vi.name!r} has a dynamic shape [{','.join(dims)}]; kiln "
                                 f"compiles static shapes: add {_pin_flag(vi)} (your size for "
                                 "each dynamic dim; load(path, input_shapes=...) in Python)")
            if self.layout == "nhwc" and len(shape) == 4:    # held as given: no transpose
                tid = self._tensor(vi.name, tuple(shape[p] for p in NCHW_TO_NHWC))
                self.values[vi.name] = tid
                self.nhwc.add(vi.name)
            elif self.layout == "nhwc" and len(shape) == 3 and self._read_by_1d(vi.name):
                n, c, length = shape                           # [N, L, C], viewed [N, 1, L, C]
                tid = self._tensor(vi.name, (n, length, c))
                self.values[vi.name] = self._reshaped(tid, (n, 1, length, c), vi.name + "_nwc")
                self.nwc.add(vi.name)
            else:
                tid = self._tensor(vi.name, shape)
                self.values[vi.name] = tid
                if len(shape) == 4:
                    self.values[vi.name] = self._permute(tid, NCHW_TO_NHWC, vi.name + "_nhwc")
                    self.nhwc.add(vi.name)
            inputs.append(tid)
        if not inputs:
            raise ModelError("the ONNX model has no (non-constant) inputs")
        for i, node in enumerate(g.node):
            if i in self.skip:
                continue
            self.node_index = i
            self._node(node)
        outputs = []
        for vo in g.output:
            if vo.name in self.consts or vo.name not in self.values:
                raise ModelError(f"output {vo.name!r} is a constant or never computed")
            tid = self.values[vo.name]
            if self.layout == "nhwc" and vo.name in self.nwc:     # [N, 1, L, C] as [N, L, C]
                n, _, length, c = self.tensors[tid].shape
                inner, tid = tid, self._reshaped(tid, (n, length, c), vo.name)
                if inner != tid:
                    self.tensors[inner].name = vo.name + "_nwc"
            elif self.layout == "nhwc" and vo.name in self.nhwc:
                pass                                              # NHWC as it is held
            elif vo.name in self.nhwc:
                inner, tid = tid, self._permute(tid, NHWC_TO_NCHW, vo.name)
                if inner != tid:     # the model's output carries its ONNX name
                    self.tensors[inner].name = vo.name + "_nhwc"
            elif vo.name in self.nwc:
                inner, tid = tid, self._plain(vo.name)
                self.tensors[inner].name = vo.name + "_nwc"
                self.tensors[tid].name = vo.name
            outputs.append(tid)
        if len(set(outputs)) != len(outputs) or set(outputs) & set(inputs):
            raise ModelError("an ONNX model output is a model input or another output; kiln "
                             "needs each output computed")
        # Ops no output needs (a boundary transpose a later one cancelled, dead nodes).
        needed, kept = set(outputs), []
        for op in reversed(self.ops):
            if needed & set(op.outputs):
                kept.append(op)
                needed.update(t for t in op.inputs if t >= 0)
        ops = kept[::-1]
        for i, op in enumerate(ops):
            op.index = i
        return Graph(name=self.name, tensors=self.tensors, ops=ops, inputs=inputs,
                     outputs=outputs, description=f"ONNX opset {self.opset}")

    def fold_constants(self) -> set[int]:
        """Fold, in order, every node computable now; the indices of the nodes folded."""
        folded = set()
        for i, node in enumerate(self.model.graph.node):
            self.node_index = i
            if self._foldable(node):
                self._fold(node)
                folded.add(i)
        return folded

    def _foldable(self, node) -> bool:
        ins = [v for v in node.input if v]
        if node.op_type == "Constant":
            return True
        if node.op_type == "Shape":
            return node.input[0] in self.consts or node.input[0] in self.shapes
        return node.op_type in _FOLDABLE and all(v in self.consts for v in ins)

    def _node(self, node) -> None:
        if node.op_type in _FOLDED or self._foldable(node):
            self._fold(node)    # a _FOLDED op on an activation raises, naming it
            return
        # An elementwise op on a 1-D op's output keeps its [N, 1, L, C] layout.
        if node.op_type in _LAYOUT_FREE and any(v in self.nwc for v in node.input if v) \
                and len(self._shape(node.output[0])) == 3:
            self.nwc.add(node.output[0])
        getattr(self, "_op_" + node.op_type)(node, _attrs(node))

    # --- folding ------------------------------------------------------------------------

    def _c(self, node, i: int, what: str = "") -> np.ndarray:
        v = node.input[i] if i < len(node.input) else ""
        if v not in self.consts:
            raise ModelError(f"{self._where()}: input {i}{' (' + what + ')' if what else ''} must be "
                             "a constant (or computed from constants and static shapes)")
        return self.consts[v]

    def _fold(self, node) -> None:
        a = _attrs(node)
        t = node.op_type
        if t == "Shape":
            shape = np.array(self._shape(node.input[0]), np.int64)
            start, end = a.get("start", 0), a.get("end", None)
            result = shape[start:end]
        elif t == "Constant":
            (form, value), = a.items()
            result = _to_array(value) if form == "value" else np.array(value, _CONSTANT_FORMS[form])
        else:
            ins = [self._c(node, i) if v else None for i, v in enumerate(node.input)]
            result = self._fold_values(t, a, ins, node)
        result = np.asarray(result)
        _check_shape(tuple(result.shape), f"{self._where()} output")
        self.consts[node.output[0]] = result

    def _fold_values(self, t: str, a: dict, ins: list, node) -> np.ndarray:
        x = ins[0]
        # Sizes checked before numpy allocates: a hostile broadcast or gather is refused.
        if t in ("Add", "Sub", "Mul", "Div"):
            self._fold_size(np.broadcast_shapes(x.shape, ins[1].shape))
        elif t == "Gather":
            self._fold_size((ins[1].size, x.size // max(x.shape[a.get("axis", 0)], 1)))
        elif t == "ConstantOfShape":
            self._fold_size(tuple(int(d) for d in x.reshape(-1)))
        elif t == "Concat":
            self._fold_size((sum(v.size for v in ins),))
        elif t == "Expand":     # PyTorch's RNN exports expand a zero into initial_h / initial_c
            self._fold_size(tuple(int(d) for d in ins[1].reshape(-1)))
            self._fold_size(np.broadcast_shapes(x.shape, tuple(int(d) for d in ins[1].reshape(-1))))
        if t == "Gather":
            return np.take(x, ins[1].astype(np.int64), axis=a.get("axis", 0))
        if t == "Unsqueeze":
            out = x
            rank = x.ndim + len(ins[1])
            for ax in sorted(int(v) % rank for v in ins[1].reshape(-1)):
                out = np.expand_dims(out, ax)
            return out
        if t == "Squeeze":
            axes = (None if len(ins) < 2 or ins[1] is None
                    else tuple(int(v) % x.ndim for v in ins[1].reshape(-1)))
            return np.squeeze(x, axis=axes)
        if t == "Concat":
            return np.concatenate(ins, axis=a["axis"])
        if t == "Expand":
            return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(ins[1].reshape(-1)))).copy()
        if t == "Cast":
            import onnx.helper
            return x.astype(onnx.helper.tensor_dtype_to_np_dtype(a["to"]))
        if t == "ConstantOfShape":
            value = _to_array(a["value"]).reshape(-1) if "value" in a else np.zeros(1, np.float32)
            shape = tuple(int(d) for d in x.reshape(-1))
            _check_shape(shape, f"{self._where()} output")
            return np.full(shape, value[0], value.dtype)
        if t in ("Add", "Sub", "Mul", "Div"):
            fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}.get(t)
            if t == "Div":
                fn = np.floor_divide if x.dtype.kind in "iu" else np.divide
            return fn(x, ins[1]).astype(x.dtype)
        if t == "Slice":
            starts, ends = ins[1].reshape(-1), ins[2].reshape(-1)
            axes = ins[3].reshape(-1) if len(ins) > 3 and ins[3] is not None else range(len(starts))
            steps = ins[4].reshape(-1) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
            index = [slice(None)] * x.ndim
            for s, e, ax, st in zip(starts, ends, axes, steps):
                index[int(ax) % x.ndim] = slice(int(s), int(e), int(st))
            return x[tuple(index)]
        if t == "Transpose":
            return np.transpose(x, a.get("perm"))
        if t == "Reshape":
            return x.reshape(self._target_shape(x.shape, ins[1], a))
        if t == "Identity":
            return x
        if t == "Flatten":
            axis = a.get("axis", 1) % max(x.ndim, 1)
            return x.reshape(math.prod(x.shape[:axis]), -1)
        raise ModelError(f"{self._where()}: {t} is folded only when its inputs are constant, "
                         "and they are not")

    def _fold_size(self, shape) -> None:
        if any(int(d) < 0 for d in shape) or math.prod(int(d) for d in shape) > _MAX_FOLDED:
            raise ModelError(f"{self._where()}: folding it would make a constant of shape "
                             f"{list(shape)} (kiln folds at most {_MAX_FOLDED:,} elements)")

    @staticmethod
    def _target_shape(shape, target: np.ndarray, a: dict) -> tuple[int, ...]:
        dims = [int(d) for d in target.reshape(-1)]
        if not a.get("allowzero", 0):
            dims = [shape[i] if d == 0 else d for i, d in enumerate(dims)]
        return tuple(dims)

    # --- fusion -------------------------------------------------------------------------

    def _sole_consumer(self, value: str):
        users = self.consumers.get(value, [])
        if len(users) != 1 or value in self.outputs:
            return None, None
        return users[0], self.model.graph.node[users[0]]

    def _fuse_activation(self, value: str) -> tuple[str, str]:
        """(fused activation, last value) for a Relu / Clip(0, 6) / Clip(-1, 1) after `value`."""
        i, node = self._sole_consumer(value)
        if node is None or node.op_type not in ("Relu", "Clip"):
            return "NONE", value
        act = "RELU" if node.op_type == "Relu" else self._clip_kind(node)
        if act not in ("RELU", "RELU6", "RELU_N1_TO_1"):
            return "NONE", value
        self.skip.add(i)
        return act, node.output[0]

    def _clip_kind(self, node) -> str | None:
        lo = self.consts.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        hi = self.consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if (len(node.input) > 1 and node.input[1] and lo is None) or \
                (len(node.input) > 2 and node.input[2] and hi is None):
            return None
        lo_v = -math.inf if lo is None else float(lo.reshape(-1)[0])
        hi_v = math.inf if hi is None else float(hi.reshape(-1)[0])
        return {(0.0, math.inf): "RELU", (0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1"}.get((lo_v, hi_v))

    # --- ops ----------------------------------------------------------------------------

    def _spatial(self, node, a: dict, kh: int, kw: int, pool: bool, shape=None):
        """(padding, explicit pads or None, strides, dilations) for a 2-D window op (`shape`:
        its input's NCHW shape when it is not the ONNX one, for a 1-D op)."""
        shape = shape or self._shape(node.input[0])
        if len(shape) != 4:
            raise ModelError(f"{self._where()}: kiln reads 2-D (NCHW) {node.op_type}, not rank "
                             f"{len(shape)} inputs")
        h, w = shape[2], shape[3]
        sh, sw = (list(a.get("strides", [1, 1])) + [1, 1])[:2]
        dh, dw = (list(a.get("dilations", [1, 1])) + [1, 1])[:2]
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if min(sh, sw, dh, dw) < 1:
            raise ModelError(f"{self._where()}: strides and dilations must be positive")

        def same(size, k, s, d, lower=False):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            before = total - total // 2 if lower else total // 2
            return before, total - before

        if auto in ("SAME_UPPER", "SAME_LOWER"):
            (ph0, ph1), (pw0, pw1) = (same(h, kh, sh, dh, auto == "SAME_LOWER"),
                                      same(w, kw, sw, dw, auto == "SAME_LOWER"))
        elif auto == "VALID":
            ph0 = ph1 = pw0 = pw1 = 0
        elif auto == "NOTSET":
            pads = list(a.get("pads", [0, 0, 0, 0]))
            if len(pads) != 4:
                raise ModelError(f"{self._where()}: pads {pads} are not 2-D")
            ph0, pw0, ph1, pw1 = (int(p) for p in pads)
        else:
            raise ModelError(f"{self._where()}: auto_pad {auto!r} is not NOTSET, SAME_UPPER, "
                             "SAME_LOWER or VALID")
        if min(ph0, ph1, pw0, pw1) < 0:
            raise ModelError(f"{self._where()}: negative pads")
        if a.get("ceil_mode", 0):
            for size, k, s, d, p in ((h, kh, sh, dh, ph0 + ph1), (w, kw, sw, dw, pw0 + pw1)):
                span = size + p - (k - 1) * d - 1
                if span % s:
                    raise ModelError(f"{self._where()}: ceil_mode=1 changes the output size here; "
                                     "kiln pools with floor (export with ceil_mode=0)")
        if (ph0, ph1, pw0, pw1) == (0, 0, 0, 0):
            return "VALID", None, (sh, sw), (dh, dw)
        if ((ph0, ph1), (pw0, pw1)) == (same(h, kh, sh, dh), same(w, kw, sw, dw)) \
                and not (pool and a.get("count_include_pad", 0)):
            return "SAME", None, (sh, sw), (dh, dw)
        return "VALID", (ph0, ph1, pw0, pw1), (sh, sw), (dh, dw)

    def _pad(self, tid: int, pads, name: str) -> int:
        ph0, ph1, pw0, pw1 = pads
        n, h, w, c = self.tensors[tid].shape
        out = self._tensor(name + "_padded", (n, h + ph0 + ph1, w + pw0 + pw1, c))
        table = np.array([[0, 0], [ph0, ph1], [pw0, pw1], [0, 0]], np.int32)
        self._op("PAD", [tid, self._const(name + "_pads", table)], [out])
        return out

    def _op_Conv(self, node, a: dict) -> None:
        w = self._c(node, 1, "weights").astype(np.float32)
        one_d = w.ndim == 3
        if one_d:       # a 2-D conv over [N, 1, L, C]
            x, a, in_shape = self._as_nwc(node.input[0]), _as_2d(a), self._2d_shape(node.input[0])
            w = w[:, :, None, :]
        elif w.ndim == 4:
            x, in_shape = self._input(node.input[0]), None
        else:
            raise ModelError(f"{self._where()}: kiln reads 1-D and 2-D Conv (3-D or 4-D weights), "
                             f"not {w.ndim - 2}-D")
        m, cg, kh, kw = w.shape
        c_in = (in_shape or self._shape(node.input[0]))[1]
        group = int(a.get("group", 1))
        bias = (self._c(node, 2, "bias").astype(np.float32).reshape(-1)
                if len(node.input) > 2 and node.input[2] else np.zeros(m, np.float32))
        padding, pads, (sh, sw), (dh, dw) = self._spatial(node, a, kh, kw, pool=False, shape=in_shape)
        # BatchNormalization right after: folded into the weights and bias.
        out_value = node.output[0]
        i, bn = self._sole_consumer(out_value)
        if bn is not None and bn.op_type == "BatchNormalization" and bn.input[0] == out_value:
            scale, shift = self._bn_affine(bn)
            w = w * scale.reshape(-1, 1, 1, 1)
            bias = bias * scale + shift
            self.skip.add(i)
            out_value = bn.output[0]
        act, out_value = self._fuse_activation(out_value)
        if pads is not None:
            x = self._pad(x, pads, node.input[0])
        options = {"padding": padding, "stride_h": sh, "stride_w": sw, "dilation_h_factor": dh,
                   "dilation_w_factor": dw, "fused_activation_function": act}
        if group == 1 and cg != c_in:
            raise ModelError(f"{self._where()}: weights for {cg} input channels, input has {c_in}")
        if group == 1:
            op_type, wt = "CONV_2D", w.transpose(0, 2, 3, 1)          # OIHW → OHWI
            options["quantized_bias_type"] = 0
        elif group == c_in and cg == 1 and m % c_in == 0:
            op_type, wt = "DEPTHWISE_CONV_2D", w.transpose(1, 2, 3, 0)   # (C·M)1HW → 1HW(C·M)
            options["depth_multiplier"] = m // c_in
        elif 1 < group < c_in and c_in % group == 0 and m % group == 0 and cg == c_in // group:
            if one_d:
                self.nwc.add(out_value)
            self._grouped_conv(node, x, w, bias, group, options, out_value)
            return
        else:
            raise ModelError(f"{self._where()}: grouped Conv with group={group} of {c_in} channels "
                             f"and weights for {cg} input channels each is not a grouping kiln "
                             "reads (group divides the channels)")
        name = node.name or out_value
        wid = self._const(name + "_weights", wt)
        bid = self._const(name + "_bias", bias)
        self.sources[wid] = (node.input[1], 0)
        if one_d:
            self.nwc.add(out_value)
        self._op(op_type, [x, wid, bid], [self._out(out_value)], options)

    def _2d_shape(self, value: str) -> tuple[int, int, int, int]:
        """The NCHW shape a 1-D op's input [N, C, L] has as [N, C, 1, L]."""
        shape = self._shape(value)
        if len(shape) != 3:
            raise ModelError(f"{self._where()}: a 1-D {self.model.graph.node[self.node_index].op_type} "
                             f"reads a rank-{len(shape)} value (kiln reads [N, C, L])")
        return (shape[0], shape[1], 1, shape[2])

    def _bn_affine(self, node) -> tuple[np.ndarray, np.ndarray]:
        a = _attrs(node)
        gamma, beta, mean, var = (self._c(node, i, what).astype(np.float64).reshape(-1) for i, what in
                                  ((1, "scale"), (2, "bias"), (3, "mean"), (4, "var")))
        if (len(node.output) > 1 and any(node.output[1:])) or a.get("training_mode", 0):
            raise ModelError(f"{self._where()}: BatchNormalization in training mode")
        scale = gamma / np.sqrt(var + float(a.get("epsilon", 1e-5)))
        return scale.astype(np.float32), (beta - mean * scale).astype(np.float32)

    def _op_BatchNormalization(self, node, a: dict) -> None:
        """A BatchNormalization not after a Conv: MUL and ADD by per-channel constants."""
        x = self._input(node.input[0])
        scale, shift = self._bn_affine(node)
        rank = len(self._shape(node.input[0]))
        shape = ((1, 1, 1, -1) if node.input[0] in self.nhwc or node.input[0] in self.nwc
                 else (1, -1) + (1,) * (rank - 2))
        mid = self._tensor(node.output[0] + "_scaled", self.tensors[x].shape)
        self._op("MUL", [x, self._const(node.output[0] + "_scale", scale.reshape(shape))], [mid],
                 {"fused_activation_function": "NONE"})
        self._op("ADD", [mid, self._const(node.output[0] + "_shift", shift.reshape(shape))],
                 [self._out(node.output[0])], {"fused_activation_function": "NONE", "pot_scale_int16": True})

    def _fc(self, node, x: int, weights: np.ndarray, bias: np.ndarray, keep_dims: bool,
            units_axis: int) -> None:
        """FULLY_CONNECTED; `units_axis`: the axis of the model's weights that holds the
        output units (0 for Gemm with transB=1, else 1)."""
        act, out_value = self._fuse_activation(node.output[0])
        name = node.name or out_value
        wid = self._const(name + "_weights", weights)
        bid = self._const(name + "_bias", bias)
        self.sources[wid] = (node.input[1], units_axis)
        self._op("FULLY_CONNECTED", [x, wid, bid], [self._out(out_value)],
                 {"fused_activation_function": act, "weights_format": 0, "keep_num_dims": keep_dims,
                  "asymmetric_quantize_inputs": False, "quantized_bias_type": 0})

    def _op_Gemm(self, node, a: dict) -> None:
        if a.get("transA", 0):
            raise ModelError(f"{self._where()}: Gemm with transA=1 is not supported")
        if len(self._shape(node.input[0])) != 2:
            raise ModelError(f"{self._where()}: Gemm input is not 2-D")
        x = self._plain(node.input[0])
        b = self._c(node, 1, "B").astype(np.float32)
        w = (b if a.get("transB", 0) else b.T) * np.float32(a.get("alpha", 1.0))
        units = w.shape[0]
        if node.input[0] in self.nhwc_columns:     # columns in NCHW order → NHWC order
            c, h, wd = self.nhwc_columns[node.input[0]]
            w = w.reshape(units, c, h, wd).transpose(0, 2, 3, 1).reshape(units, -1)
        bias = np.zeros(units, np.float32)
        if len(node.input) > 2 and node.input[2]:
            c = self._c(node, 2, "C").astype(np.float32) * np.float32(a.get("beta", 1.0))
            if c.size not in (1, units) or (c.ndim == 2 and c.shape[0] != 1):
                raise ModelError(f"{self._where()}: Gemm C of shape {list(c.shape)} is not a "
                                 f"per-unit bias of {units}")
            bias = np.broadcast_to(c.reshape(-1), (units,)).astype(np.float32)
        self._fc(node, x, np.ascontiguousarray(w), bias, keep_dims=False,
                 units_axis=0 if a.get("transB", 0) else 1)

    def _op_MatMul(self, node, a: dict) -> None:
        b = self._c(node, 1, "weights")
        if b.ndim != 2:
            raise ModelError(f"{self._where()}: MatMul weights must be 2-D constants")
        rank = len(self._shape(node.input[0]))
        if rank < 2 or node.input[0] in self.nhwc:
            raise ModelError(f"{self._where()}: MatMul of a rank-{rank} input is not supported")
        x = self._plain(node.input[0])
        self._fc(node, x, np.ascontiguousarray(b.T.astype(np.float32)),
                 np.zeros(b.shape[1], np.float32), keep_dims=rank > 2, units_axis=1)

    def _operand(self, node, i: int, like_nhwc: bool, rank: int, value: np.ndarray | None = None) -> int:
        """Input i of a binary op (or `value` in its place) as an IR tensor in the output's layout."""
        v = node.input[i]
        nwc = node.output[0] in self.nwc
        if value is not None or v in self.consts:
            c = (self.consts[v] if value is None else value).astype(np.float32)
            if like_nhwc:
                c = c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(NCHW_TO_NHWC)
            elif nwc:       # [.., C, L] → [.., 1, L, C]
                c = c.reshape((1,) * (3 - c.ndim) + c.shape).transpose(0, 2, 1)
                c = c.reshape(c.shape[0], 1, *c.shape[1:])
            tid = self._const(f"{node.name or node.output[0]}_in{i}", c)
            if value is None:
                self.sources[tid] = (v, -1)
            return tid
        if nwc:
            return self._as_nwc(v)
        if v in self.nwc:
            return self._plain(v)
        if (v in self.nhwc) != like_nhwc:
            raise ModelError(f"{self._where()}: mixes a rank-4 input with one of another rank")
        return self._input(v)

    def _op_Add(self, node, a: dict) -> None:
        self._binary(node, "ADD")

    def _op_Mul(self, node, a: dict) -> None:
        self._binary(node, "MUL")

    def _op_Sub(self, node, a: dict) -> None:
        self._binary(node, "SUB")

    def _op_Div(self, node, a: dict) -> None:
        """Division by a constant: MUL by its reciprocal (int8 has no DIV)."""
        c = self._c(node, 1, "divisor")
        if c.dtype.kind not in "f" or not np.all(c != 0):
            raise ModelError(f"{self._where()}: Div by a constant needs a nonzero float divisor")
        self._binary(node, "MUL", divisor=(1.0 / c.astype(np.float64)).astype(np.float32))

    def _op_LeakyRelu(self, node, a: dict) -> None:
        self._op("LEAKY_RELU", [self._input(node.input[0])], [self._out(node.output[0])],
                 {"alpha": float(a.get("alpha", 0.01))})

    def _op_HardSwish(self, node, a: dict) -> None:
        self._unary(node, "HARD_SWISH")

    def _op_HardSigmoid(self, node, a: dict) -> None:
        """max(0, min(1, alpha·x + beta)); x · HardSigmoid(x) with alpha 1/6, beta 1/2 (how
        onnxruntime's optimizer writes HardSwish) is one HARD_SWISH."""
        alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
        x_value = node.input[0]
        i, user = self._sole_consumer(node.output[0])
        if (user is not None and user.op_type == "Mul" and sorted(user.input) ==
                sorted([x_value, node.output[0]]) and abs(alpha - 1 / 6) < 1e-6 and beta == 0.5):
            self.skip.add(i)
            if x_value in self.nwc:
                self.nwc.add(user.output[0])
            self._op("HARD_SWISH", [self._input(x_value)], [self._out(user.output[0])])
            return
        x = self._input(x_value)
        shape = self.tensors[x].shape
        name = node.output[0]
        steps = [("MUL", alpha, {"fused_activation_function": "NONE"}),
                 ("ADD", beta, {"fused_activation_function": "NONE", "pot_scale_int16": True}),
                 ("MAXIMUM", 0.0, {}), ("MINIMUM", 1.0, {})]
        for k, (op_type, value, options) in enumerate(steps):
            out = (self._out(name) if k == len(steps) - 1
                   else self._tensor(f"{name}_{op_type.lower()}", shape))
            c = self._const(f"{name}_{op_type.lower()}_c", np.array([value], np.float32))
            self._op(op_type, [x, c], [out], options)
            x = out

    def _binary(self, node, op_type: str, divisor: np.ndarray | None = None) -> None:
        out_rank = len(self._shape(node.output[0]))
        nhwc = out_rank == 4
        ins = [self._operand(node, i, nhwc, out_rank, divisor if i == 1 else None) for i in (0, 1)]
        act, out_value = self._fuse_activation(node.output[0])
        if node.output[0] in self.nwc:
            self.nwc.add(out_value)
        options = {"fused_activation_function": act}
        if op_type in ("ADD", "SUB"):
            options["pot_scale_int16"] = True
        self._op(op_type, ins, [self._out(out_value)], options)

    def _unary(self, node, op_type: str) -> None:
        self._op(op_type, [self._input(node.input[0])], [self._out(node.output[0])])

    def _op_Relu(self, node, a: dict) -> None:
        self._unary(node, "RELU")

    def _op_Sigmoid(self, node, a: dict) -> None:
        self._unary(node, "LOGISTIC")

    def _op_Tanh(self, node, a: dict) -> None:
        self._unary(node, "TANH")

    def _op_Clip(self, node, a: dict) -> None:
        kind = self._clip_kind(node)
        if kind is not None:
            self._unary(node, kind)
            return
        x = self._input(node.input[0])
        shape = self.tensors[x].shape
        for i, op_type in ((1, "MAXIMUM"), (2, "MINIMUM")):
            if len(node.input) > i and node.input[i]:
                bound = self._c(node, i, "min" if i == 1 else "max").astype(np.float32).reshape(1)
                last = i == 2 or not (len(node.input) > 2 and node.input[2])
                out = self._out(node.output[0]) if last else self._tensor(node.output[0] + "_lo", shape)
                self._op(op_type, [x, self._const(f"{node.output[0]}_bound{i}", bound)], [out])
                x = out
        if node.output[0] not in self.values:
            self.values[node.output[0]] = x
            if node.input[0] in self.nhwc:
                self.nhwc.add(node.output[0])

    def _pool(self, node, a: dict, op_type: str) -> None:
        one_d = len(a["kernel_shape"]) == 1
        if one_d:       # a 2-D pool over [N, 1, L, C]
            a = _as_2d(a)
        kh, kw = (list(a["kernel_shape"]) + [1, 1])[:2]
        if len(a["kernel_shape"]) != 2:
            raise ModelError(f"{self._where()}: kiln reads 1-D and 2-D pooling")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise ModelError(f"{self._where()}: dilated pooling is not supported")
        if len(node.output) > 1 and node.output[1]:
            raise ModelError(f"{self._where()}: MaxPool's Indices output is not supported")
        in_shape = self._2d_shape(node.input[0]) if one_d else None
        padding, pads, (sh, sw), _ = self._spatial(node, a, kh, kw, pool=True, shape=in_shape)
        x = self._as_nwc(node.input[0]) if one_d else self._input(node.input[0])
        if pads is not None:
            # Zeros pad a window op exactly only where they count (AveragePool with
            # count_include_pad=1) or can never win (MaxPool of a value known >= 0: after a
            # Relu, or quantized from 0 up in a QDQ model, where onnxruntime drops the Relu).
            known_nonneg = x in self.nonneg or node.input[0] in self.qdq_nonneg
            if op_type == "MAX_POOL_2D" and not known_nonneg:
                raise ModelError(f"{self._where()}: MaxPool pads {list(a.get('pads', []))} are "
                                 "neither VALID nor SAME and its input may be negative; kiln pads "
                                 "max pooling so only after a Relu/Clip(0, 6)")
            if op_type == "AVERAGE_POOL_2D" and not a.get("count_include_pad", 0):
                raise ModelError(f"{self._where()}: AveragePool pads {list(a.get('pads', []))} "
                                 "with count_include_pad=0 are neither VALID nor SAME (TFLite's "
                                 "padding); export with count_include_pad=1 or SAME padding")
            x = self._pad(x, pads, node.input[0])
        act, out_value = self._fuse_activation(node.output[0])
        if one_d:
            self.nwc.add(out_value)
        self._op(op_type, [x], [self._out(out_value)],
                 {"padding": padding, "stride_h": sh, "stride_w": sw, "filter_height": kh,
                  "filter_width": kw, "fused_activation_function": act})

    def _op_MaxPool(self, node, a: dict) -> None:
        self._pool(node, a, "MAX_POOL_2D")

    def _op_AveragePool(self, node, a: dict) -> None:
        self._pool(node, a, "AVERAGE_POOL_2D")

    def _op_GlobalAveragePool(self, node, a: dict) -> None:
        self._global_pool(node, "MEAN")

    def _op_GlobalMaxPool(self, node, a: dict) -> None:
        self._global_pool(node, "REDUCE_MAX")

    def _global_pool(self, node, op_type: str) -> None:
        rank = len(self._shape(node.input[0]))
        if rank not in (3, 4):
            raise ModelError(f"{self._where()}: kiln reads 1-D and 2-D GlobalAveragePool")
        x = self._input(node.input[0]) if rank == 4 else self._as_nwc(node.input[0])
        if rank == 3:
            self.nwc.add(node.output[0])
        axes = self._const((node.name or node.output[0]) + "_axes", np.array([1, 2], np.int32))
        self._op(op_type, [x, axes], [self._out(node.output[0])], {"keep_dims": True})

    def _ir_axes(self, value: str) -> tuple[int, ...]:
        """For each IR axis of `value`'s tensor, the ONNX axis it holds (NHWC-held rank-4
        values permute them; others keep ONNX's order)."""
        rank = len(self._shape(value))
        return NCHW_TO_NHWC if value in self.nhwc else tuple(range(rank))

    def _op_ReduceMean(self, node, a: dict) -> None:
        self._reduce(node, a, "MEAN")

    def _op_ReduceMax(self, node, a: dict) -> None:
        self._reduce(node, a, "REDUCE_MAX")

    def _reduce(self, node, a: dict, op_type: str) -> None:
        value = node.input[0]
        rank = len(self._shape(value))
        if len(node.input) > 1 and node.input[1]:      # opset 18: axes as an input
            axes = [int(v) for v in self._c(node, 1, "axes").reshape(-1)]
        else:
            axes = [int(v) for v in a.get("axes", [])]
        if not axes:
            if a.get("noop_with_empty_axes", 0):
                raise ModelError(f"{self._where()}: {node.op_type} with no axes and "
                                 "noop_with_empty_axes=1 is an identity; kiln reads real reductions")
            axes = list(range(rank))
        axes = sorted({ax % rank for ax in axes})
        keep = bool(a.get("keepdims", 1))
        x = self._plain(value) if value in self.nwc else self._input(value)
        held = self._ir_axes(value) if value not in self.nwc else tuple(range(rank))
        ir_axes = sorted(held.index(ax) for ax in axes)
        name = node.output[0]
        axes_id = self._const(name + "_axes", np.array(ir_axes, np.int32))
        out_rank = len(self._shape(name))
        remaining = [ax for ax in held if ax not in axes]
        if keep or out_rank == 4 or remaining == sorted(remaining):
            self._op(op_type, [x, axes_id], [self._out(name)], {"keep_dims": keep})
            return
        # NHWC order left after the reduction (N, W, C of a reduced H): back to ONNX order.
        shape = tuple(self.tensors[x].shape[i] for i in range(rank) if i not in ir_axes)
        mid = self._tensor(name + "_held", shape)
        self._op(op_type, [x, axes_id], [mid], {"keep_dims": False})
        self.values[name] = self._permute(mid, tuple(int(i) for i in np.argsort(remaining)), name)

    def _op_Transpose(self, node, a: dict) -> None:
        value, name = node.input[0], node.output[0]
        x = self._plain(value) if value in self.nwc else self._input(value)
        rank = len(self._shape(value))
        perm = [int(p) % rank for p in a.get("perm", list(range(rank))[::-1])]
        held_in = self._ir_axes(value) if value not in self.nwc else tuple(range(rank))
        held_out = NCHW_TO_NHWC if rank == 4 else tuple(range(rank))
        # IR out axis i holds ONNX out axis held_out[i], which is ONNX in axis perm[...].
        q = tuple(held_in.index(perm[held_out[i]]) for i in range(rank))
        self.values[name] = x if q == tuple(range(rank)) else self._permute(x, q, name)
        if rank == 4:
            self.nhwc.add(name)

    def _op_Squeeze(self, node, a: dict) -> None:
        self._reshape_to(node, self._plain(node.input[0]))

    def _op_Unsqueeze(self, node, a: dict) -> None:
        self._reshape_to(node, self._plain(node.input[0]))

    def _op_Concat(self, node, a: dict) -> None:
        name = node.output[0]
        rank = len(self._shape(name))
        axis = int(a["axis"]) % rank
        nwc = rank == 3 and any(v in self.nwc for v in node.input)
        ins = []
        for i, v in enumerate(node.input):
            if v in self.consts:
                c = self.consts[v].astype(np.float32)
                if rank == 4:
                    c = c.transpose(NCHW_TO_NHWC)
                elif nwc:
                    c = c.transpose(0, 2, 1)[:, None]
                tid = self._const(f"{name}_in{i}", c)
                self.sources[tid] = (v, -1)
                ins.append(tid)
            else:
                ins.append(self._as_nwc(v) if nwc else self._input(v) if rank == 4 else self._plain(v))
        if nwc:
            self.nwc.add(name)
            ir_axis = (0, 3, 2)[axis]
        else:
            ir_axis = NCHW_TO_NHWC.index(axis) if rank == 4 else axis
        self._op("CONCATENATION", ins, [self._out(name)],
                 {"axis": ir_axis, "fused_activation_function": "NONE"})

    def _op_Pad(self, node, a: dict) -> None:
        value, name = node.input[0], node.output[0]
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode != "constant":
            raise ModelError(f"{self._where()}: Pad mode {mode!r}; kiln reads constant padding")
        if len(node.input) > 3 and node.input[3]:
            raise ModelError(f"{self._where()}: Pad with an axes input is not supported")
        rank = len(self._shape(value))
        pads = [int(p) for p in self._c(node, 1, "pads").reshape(-1)]
        if len(pads) != 2 * rank or min(pads) < 0:
            raise ModelError(f"{self._where()}: pads {pads} are not {2 * rank} non-negative values")
        fill = (float(self._c(node, 2, "constant_value").reshape(-1)[0])
                if len(node.input) > 2 and node.input[2] else 0.0)
        x = self._plain(value) if value in self.nwc else self._input(value)
        held = self._ir_axes(value) if value not in self.nwc else tuple(range(rank))
        table = np.array([[pads[ax], pads[ax + rank]] for ax in held], np.int32)
        ins = [x, self._const(name + "_pads", table)]
        if fill != 0.0:
            ins.append(self._const(name + "_value", np.array([fill], np.float32)))
        self._op("PADV2" if fill != 0.0 else "PAD", ins, [self._out(name)])

    def _reshape_to(self, node, x: int) -> None:
        out_value = node.output[0]
        shape = self._shape(out_value)
        mid = self._tensor(out_value + ("_nchw" if len(shape) == 4 else ""), shape)
        self._op("RESHAPE", [x, self._const(out_value + "_shape", np.array(shape, np.int32))], [mid],
                 {"new_shape": list(shape)})
        if len(shape) == 4:
            self.values[out_value] = self._permute(mid, NCHW_TO_NHWC, out_value)
            self.nhwc.add(out_value)
        else:
            self.values[out_value] = mid

    def _op_Flatten(self, node, a: dict) -> None:
        src, out = node.input[0], node.output[0]
        i, user = self._sole_consumer(out)
        shape = self._shape(src)
        # Flatten of an NHWC value read only by a Gemm with constant B: flatten in NHWC
        # order (a free RESHAPE) and permute B's columns to match, no TRANSPOSE.
        if (src in self.nhwc and int(a.get("axis", 1)) % 4 == 1 and user is not None
                and user.op_type == "Gemm" and user.input[0] == out and user.input[1] in self.consts
                and not _attrs(user).get("transA", 0)):
            self.nhwc_columns[out] = tuple(shape[1:])
            self._reshape_to(node, self._input(src))
            return
        self._reshape_to(node, self._plain(src))

    def _op_Reshape(self, node, a: dict) -> None:
        self._c(node, 1, "shape")
        self._reshape_to(node, self._plain(node.input[0]))

    def _op_Softmax(self, node, a: dict) -> None:
        self._softmax(node, a, "SOFTMAX")

    def _op_LogSoftmax(self, node, a: dict) -> None:
        self._softmax(node, a, "LOG_SOFTMAX")

    def _softmax(self, node, a: dict, op_type: str) -> None:
        value = node.input[0]
        rank = len(self._shape(value))
        axis = int(a.get("axis", -1)) % rank
        channels_last = value in self.nhwc or value in self.nwc
        if channels_last and axis == 1:
            x = self._input(value)
            if value in self.nwc:
                self.nwc.add(node.output[0])
        elif axis == rank - 1 and value not in self.nhwc:
            x = self._plain(value)
        else:
            raise ModelError(f"{self._where()}: {node.op_type} on axis {axis} of a rank-{rank} "
                             "value; kiln computes it on the last axis (channels for rank 4)")
        self._op(op_type, [x], [self._out(node.output[0])], {"beta": 1.0} if op_type == "SOFTMAX" else {})

    # --- ops mapped onto TFLite's data movement, resize and transposed convolution -----

    def _grouped_conv(self, node, x: int, w: np.ndarray, bias: np.ndarray, group: int,
                      options: dict, out_value: str) -> None:
        """A Conv with 1 < group < channels: a SPLIT of the input's channels, one CONV_2D
        per group, a CONCATENATION of their outputs (tflite-micro's CONV_2D has no groups;
        this costs one copy of the input and of the output)."""
        name = node.name or out_value
        n, h, wd, c = self.tensors[x].shape
        cg, mg = c // group, w.shape[0] // group
        parts = [self._tensor(f"{name}_group{g}_in", (n, h, wd, cg)) for g in range(group)]
        self._op("SPLIT", [self._const(name + "_split_axis", np.array([3], np.int32)), x], parts,
                 {"num_splits": group})
        out_shape = self._ir_shape(out_value)
        outs = []
        for g in range(group):
            wid = self._const(f"{name}_weights{g}", w[g * mg:(g + 1) * mg].transpose(0, 2, 3, 1))
            bid = self._const(f"{name}_bias{g}", bias[g * mg:(g + 1) * mg])
            self.sources[wid] = (node.input[1], 0, g * mg)    # channels g·mg.. of the model's
            y = self._tensor(f"{name}_group{g}_out", out_shape[:3] + (mg,))
            self._op("CONV_2D", [parts[g], wid, bid], [y], {**options, "quantized_bias_type": 0})
            outs.append(y)
        self._op("CONCATENATION", outs, [self._out(out_value)],
                 {"axis": 3, "fused_activation_function": "NONE"})

    def _op_ConvTranspose(self, node, a: dict) -> None:
        """TRANSPOSE_CONV. TFLite's padding is VALID (none) or SAME as a forward conv of
        the output would pad; other pads become a larger VALID output cropped by a
        STRIDED_SLICE (output_padding only grows the output: TFLite's kernel writes the
        bias where no tap reaches). With groups: a SPLIT of the input's channels, one
        TRANSPOSE_CONV per group, a CONCATENATION (as for a grouped Conv)."""
        w = self._c(node, 1, "weights").astype(np.float32)
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        one_d = w.ndim == 3
        if one_d:       # a 2-D one over [N, 1, L, C]
            a = {**_as_2d(a), "output_padding": [0] + list(a.get("output_padding", [0]))}
            w = w[:, :, None, :]
        refuse = None
        if w.ndim != 4:
            refuse = f"{w.ndim - 2}-D ConvTranspose (kiln reads 1-D and 2-D)"
        elif any(int(d) != 1 for d in a.get("dilations", [1, 1])):
            refuse = f"dilations {list(a['dilations'])}"
        elif auto not in ("NOTSET", "VALID"):
            refuse = f"auto_pad {auto!r}"
        elif "output_shape" in a:
            refuse = "an output_shape attribute (give pads and output_padding)"
        if refuse:
            raise ModelError(f"{self._where()}: ConvTranspose with {refuse} is not supported "
                             "(kiln reads dilation 1, explicit pads, strides, output_padding "
                             "and groups)")
        c_in, mg, kh, kw = w.shape
        group = int(a.get("group", 1))
        m = mg * group
        x = self._as_nwc(node.input[0]) if one_d else self._input(node.input[0])
        n, h, wd, c = self.tensors[x].shape
        if c != c_in or group < 1 or c % group:
            raise ModelError(f"{self._where()}: weights for {c_in} input channels in {group} "
                             f"group(s), input has {c}")
        sh, sw = (int(s) for s in a.get("strides", [1, 1]))
        pads = [int(p) for p in a.get("pads", [0, 0, 0, 0])] if auto == "NOTSET" else [0] * 4
        if min(pads) < 0 or min(sh, sw) < 1:
            raise ModelError(f"{self._where()}: negative pads or non-positive strides")
        _, _, oh, ow = (self._2d_shape(node.output[0]) if one_d else self._shape(node.output[0]))
        bias = (self._c(node, 2, "bias").astype(np.float32).reshape(-1)
                if len(node.input) > 2 and node.input[2] else np.zeros(m, np.float32))
        # BatchNormalization right after: folded (output channel g·mg + j is w[g's inputs, j]);
        # then a Relu / Clip(0, 6) fused, as for Conv.
        out_value = node.output[0]
        i, bn = self._sole_consumer(out_value)
        if bn is not None and bn.op_type == "BatchNormalization" and bn.input[0] == out_value:
            scale, shift = self._bn_affine(bn)
            w = (w.reshape(group, c_in // group, mg, kh, kw) * scale.reshape(group, 1, mg, 1, 1)
                 ).reshape(c_in, mg, kh, kw)
            bias = bias * scale + shift
            self.skip.add(i)
            out_value = bn.output[0]
        act, out_value = self._fuse_activation(out_value)
        if one_d:
            self.nwc.add(out_value)

        def same(size, k, s):     # TFLite's SAME padding of a forward conv over `size`
            return max((-(-size // s) - 1) * s + k - size, 0) // 2

        top, left = pads[0], pads[1]
        if top == left == 0:
            padding, (th, tw) = "VALID", (oh, ow)
        elif (top, left) == (same(oh, kh, sh), same(ow, kw, sw)):
            padding, (th, tw) = "SAME", (oh, ow)
        else:
            padding, (th, tw) = "VALID", (oh + top, ow + left)
        name = node.name or out_value
        crop = (th, tw) != (oh, ow)
        y = self._tensor(name + "_uncropped", (n, th, tw, m)) if crop else self._out(out_value)
        cg = c // group
        if group > 1:
            parts = [self._tensor(f"{name}_group{g}_in", (n, h, wd, cg)) for g in range(group)]
            self._op("SPLIT", [self._const(name + "_split_axis", np.array([3], np.int32)), x],
                     parts, {"num_splits": group})
            outs = [self._tensor(f"{name}_group{g}_out", (n, th, tw, mg)) for g in range(group)]
        else:
            parts, outs = [x], [y]
        shape_id = self._const(name + "_output_shape", np.array([n, th, tw, mg], np.int32))
        for g in range(group):
            suffix = f"{g}" if group > 1 else ""
            # (I)(O/group)HW → OHWI; a QDQ model's per-channel scales run along axis 1
            wid = self._const(f"{name}_weights{suffix}", w[g * cg:(g + 1) * cg].transpose(1, 2, 3, 0))
            self.sources[wid] = (node.input[1], 1)
            bid = self._const(f"{name}_bias{suffix}", bias[g * mg:(g + 1) * mg])
            self._op("TRANSPOSE_CONV", [shape_id, wid, parts[g], bid], [outs[g]],
                     {"padding": padding, "stride_h": sh, "stride_w": sw,
                      "fused_activation_function": act})
        if group > 1:
            self._op("CONCATENATION", outs, [y], {"axis": 3, "fused_activation_function": "NONE"})
        if crop:
            self._strided_slice(y, [0, top, left, 0], [n, top + oh, left + ow, m], [1] * 4, 0,
                                self._out(out_value), name)

    def _strided_slice(self, x: int, begin, end, strides, end_mask: int, out: int, name: str) -> None:
        ins = [x] + [self._const(f"{name}_{what}", np.array(v, np.int32))
                     for what, v in (("begin", begin), ("end", end), ("strides", strides))]
        self._op("STRIDED_SLICE", ins, [out],
                 {"begin_mask": 0, "end_mask": end_mask, "ellipsis_mask": 0, "new_axis_mask": 0,
                  "shrink_axis_mask": 0})

    def _op_PRelu(self, node, a: dict) -> None:
        """PRELU: the slope per channel (C, 1, 1), a scalar, or an activation, broadcast."""
        rank = len(self._shape(node.output[0]))
        ins = [self._operand(node, i, rank == 4, rank) for i in (0, 1)]
        self._op("PRELU", ins, [self._out(node.output[0])])

    def _held(self, value: str) -> tuple[int, tuple[int, ...]]:
        """(IR tensor of `value`, the ONNX axis each of its IR axes holds): NHWC-held rank-4
        values as they are, 1-D ops' [N, 1, L, C] values back in ONNX order."""
        if value in self.nwc:
            return self._plain(value), tuple(range(len(self._shape(value))))
        return self._input(value), self._ir_axes(value)

    def _op_Slice(self, node, a: dict) -> None:
        """STRIDED_SLICE with constant starts, ends, axes and steps, clamped as ONNX does."""
        value, name = node.input[0], node.output[0]
        shape = self._shape(value)
        rank = len(shape)
        starts = [int(v) for v in self._c(node, 1, "starts").reshape(-1)]
        ends = [int(v) for v in self._c(node, 2, "ends").reshape(-1)]
        axes = ([int(v) % rank for v in self._c(node, 3, "axes").reshape(-1)]
                if len(node.input) > 3 and node.input[3] else list(range(len(starts))))
        steps = ([int(v) for v in self._c(node, 4, "steps").reshape(-1)]
                 if len(node.input) > 4 and node.input[4] else [1] * len(starts))
        picked = {ax: range(d) for ax, d in enumerate(shape)}   # ranges: never materialized
        step_of = {ax: 1 for ax in range(rank)}
        for s, e, ax, st in zip(starts, ends, axes, steps):
            if st == 0:
                raise ModelError(f"{self._where()}: Slice step 0")
            d = shape[ax]
            s, e = s + d if s < 0 else s, e + d if e < 0 else e
            s = min(max(s, 0), d) if st > 0 else min(max(s, 0), d - 1)
            e = min(max(e, 0), d) if st > 0 else min(max(e, -1), d - 1)
            picked[ax], step_of[ax] = range(s, e, st), st
        if any(not v for v in picked.values()):
            raise ModelError(f"{self._where()}: the Slice is empty")
        x, held = self._held(value)
        begin, end, strides, end_mask = [], [], [], 0
        for i, ax in enumerate(held):
            idx, st = picked[ax], step_of[ax]
            begin.append(idx[0])
            strides.append(st)
            stop = idx[-1] + st
            if stop < 0:                   # a negative step down to index 0: to the end
                end_mask |= 1 << i
                stop = 0
            end.append(stop)
        self._strided_slice(x, begin, end, strides, end_mask, self._out(name), name)

    def _op_Split(self, node, a: dict) -> None:
        """SPLIT (equal parts) or SPLIT_V; the sizes are the outputs' inferred ones (the
        `split` input of opset 13, the attribute before, num_outputs of opset 18)."""
        value = node.input[0]
        rank = len(self._shape(value))
        axis = int(a.get("axis", 0)) % rank
        sizes = [self._shape(o)[axis] for o in node.output]
        if value in self.nwc:              # [N, C, L] held [N, 1, L, C]
            x, ir_axis = self._input(value), (0, 3, 2)[axis]
            self.nwc.update(node.output)
        elif rank == 4:
            x, ir_axis = self._input(value), NCHW_TO_NHWC.index(axis)
        else:
            x, ir_axis = self._plain(value), axis
        outs = [self._out(o) for o in node.output]
        name = node.name or node.output[0]
        axis_id = self._const(name + "_axis", np.array([ir_axis], np.int32))
        if len(set(sizes)) == 1:
            self._op("SPLIT", [axis_id, x], outs, {"num_splits": len(outs)})
        else:
            self._op("SPLIT_V", [x, self._const(name + "_sizes", np.array(sizes, np.int32)), axis_id],
                     outs, {"num_splits": len(outs)})

    def _op_Gather(self, node, a: dict) -> None:
        """GATHER of an activation with constant indices (negative ones counted from the end)."""
        value, name = node.input[0], node.output[0]
        shape = self._shape(value)
        rank = len(shape)
        axis = int(a.get("axis", 0)) % rank
        idx = self._c(node, 1, "indices").astype(np.int64)
        idx = np.where(idx < 0, idx + shape[axis], idx)
        if idx.size == 0 or idx.min() < 0 or idx.max() >= shape[axis]:
            raise ModelError(f"{self._where()}: Gather indices outside [-{shape[axis]}, "
                             f"{shape[axis]}) or none")
        out_rank = len(self._shape(name))
        indices = self._const(name + "_indices", idx.astype(np.int32))
        if value in self.nhwc and out_rank == 4:      # e.g. channels picked: stays NHWC
            self._op("GATHER", [self._input(value), indices], [self._out(name)],
                     {"axis": NCHW_TO_NHWC.index(axis), "batch_dims": 0})
            return
        if idx.ndim == 0:       # a scalar index drops the axis: gather one, then a RESHAPE
            kept = shape[:axis] + (1,) + shape[axis + 1:]
            one = self._tensor(name + "_kept", kept)
            self._op("GATHER", [self._plain(value), indices], [one], {"axis": axis, "batch_dims": 0})
            y = self._reshaped(one, self._shape(name), name + ("_nchw" if out_rank == 4 else ""))
        else:
            y = self._tensor(name + ("_nchw" if out_rank == 4 else ""), self._shape(name))
            self._op("GATHER", [self._plain(value), indices], [y], {"axis": axis, "batch_dims": 0})
        if out_rank == 4:
            self.values[name] = self._permute(y, NCHW_TO_NHWC, name)
            self.nhwc.add(name)
        else:
            self.values[name] = y

    def _op_Resize(self, node, a: dict) -> None:
        """RESIZE_NEAREST_NEIGHBOR or RESIZE_BILINEAR over H and W of a rank-4 value. ONNX's
        coordinate mode (and nearest_mode) is matched, per model shape, against TFLite's
        three (plain, align_corners, half_pixel_centers): the one that computes the same
        source pixels (nearest) or coordinates (linear) is used; none is refused."""
        def text(key, default):
            v = a.get(key, default)
            return v.decode() if isinstance(v, bytes) else str(v)

        mode = text("mode", "nearest")
        ctm = text("coordinate_transformation_mode", "half_pixel")
        nearest = text("nearest_mode", "round_prefer_floor")
        value, name = node.input[0], node.output[0]
        shape, out = self._shape(value), self._shape(name)
        if mode not in ("nearest", "linear"):
            raise ModelError(f"{self._where()}: Resize mode {mode!r}; kiln reads nearest and linear")
        if a.get("antialias", 0) and mode == "linear" and any(o < i for o, i in zip(out, shape)):
            raise ModelError(f"{self._where()}: Resize with antialias=1 (downsampling); "
                             "TFLite's RESIZE_BILINEAR does not antialias")
        one_d = len(shape) == 3         # [N, C, L], resized as [N, C, 1, L]
        if (len(shape) not in (3, 4) or tuple(out[:2]) != tuple(shape[:2])
                or (len(shape) == 4 and value not in self.nhwc)):
            raise ModelError(f"{self._where()}: Resize of {list(shape)} to {list(out)}; kiln "
                             "resizes the spatial axes (L, or H and W) of a rank-3 or rank-4 "
                             "value only")
        if one_d:
            shape, out = (shape[0], shape[1], 1, shape[2]), (out[0], out[1], 1, out[2])
        if text("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise ModelError(f"{self._where()}: Resize with keep_aspect_ratio_policy "
                             f"{text('keep_aspect_ratio_policy', '')!r}; kiln reads 'stretch'")
        scales = None
        if len(node.input) > 2 and node.input[2] and self._c(node, 2, "scales").size:
            given = [float(v) for v in self._c(node, 2, "scales").reshape(-1)]
            rank = len(self._shape(value))
            axes = [int(ax) % rank for ax in a.get("axes", range(rank))]   # opset 18's axes
            full = [1.0] * rank
            for ax, v in zip(axes, given):
                full[ax] = v
            scales = ([1.0] + full[2:]) if one_d else full[2:]
        modes = ((False, False), (True, False), (False, True))
        found = None
        for ac, hp in modes:
            if all(self._resize_axis_matches(mode, ctm, nearest, i, o, scales[k] if scales else o / i,
                                             ac, hp)
                   for k, (i, o) in enumerate(zip(shape[2:], out[2:]))):
                found = (ac, hp)
                break
        if found is None:
            what = f"coordinate_transformation_mode {ctm!r}" + (
                f" and nearest_mode {nearest!r}" if mode == "nearest" else "")
            raise ModelError(f"{self._where()}: Resize ({mode}) with {what} maps {shape[2]}x{shape[3]} "
                             f"to {out[2]}x{out[3]} as none of TFLite's resize modes does "
                             "(asymmetric, align_corners, half_pixel, pytorch_half_pixel and "
                             "tf_half_pixel_for_nn match them, depending on the sizes)")
        ac, hp = found
        size = self._const(name + "_size", np.array(out[2:], np.int32))
        op_type = "RESIZE_NEAREST_NEIGHBOR" if mode == "nearest" else "RESIZE_BILINEAR"
        if one_d:
            self.nwc.add(name)
        x = self._as_nwc(value) if one_d else self._input(value)
        self._op(op_type, [x, size], [self._out(name)],
                 {"align_corners": ac, "half_pixel_centers": hp})

    @staticmethod
    def _resize_axis_matches(mode: str, ctm: str, nearest: str, n_in: int, n_out: int,
                             scale: float, ac: bool, hp: bool) -> bool:
        """Whether TFLite's resize (align_corners `ac`, half_pixel_centers `hp`) computes
        ONNX's along one axis: the same source index per output (nearest), the same
        source coordinate (linear, TFLite's float kernel; its int8 one rounds it to 1/1024)."""
        from ..codegen.ops.data_movement import nearest_map

        f32 = np.float32
        i = np.arange(n_out, dtype=np.float32)
        s = f32(scale)
        if ctm in ("half_pixel", "pytorch_half_pixel"):
            x = (i + f32(0.5)) / s - f32(0.5)
            if ctm == "pytorch_half_pixel" and n_out == 1:
                x = np.zeros(1, np.float32)
        elif ctm == "align_corners":
            x = i * f32(n_in - 1) / f32(n_out - 1) if n_out > 1 else np.zeros(1, np.float32)
        elif ctm == "asymmetric":
            x = i / s
        elif ctm == "tf_half_pixel_for_nn":
            x = (i + f32(0.5)) / s
        else:
            return False
        if mode == "nearest":
            rounded = {"round_prefer_floor": np.ceil(x - f32(0.5)), "round_prefer_ceil": np.floor(x + f32(0.5)),
                       "floor": np.floor(x), "ceil": np.ceil(x)}.get(nearest)
            if rounded is None:
                return False
            onnx_map = np.clip(rounded, 0, n_in - 1).astype(np.int64)
            return bool(np.array_equal(onnx_map, nearest_map(n_in, n_out, ac, hp)))
        t_scale = (f32(n_in - 1) / f32(n_out - 1)) if ac and n_out > 1 else f32(n_in) / f32(n_out)
        t = (i + f32(0.5)) * t_scale - f32(0.5) if hp else i * t_scale
        # Both clamp a coordinate outside [0, n_in - 1] to the edge pixel.
        x, t = np.clip(x, 0, n_in - 1), np.clip(t, 0, n_in - 1)
        return bool(np.allclose(x, t, rtol=0, atol=1e-4))

    def _op_Identity(self, node, a: dict) -> None:
        self.values[node.output[0]] = self._input(node.input[0])
        if node.input[0] in self.nhwc:
            self.nhwc.add(node.output[0])
