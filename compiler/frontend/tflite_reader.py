"""Read a .tflite flatbuffer into kiln's Graph IR (subgraph 0; the subgraphs its WHILE
and IF ops run, unrolled into it by control_flow.py; and the init subgraphs its CALL_ONCE
ops run: resources.py turns tf.Variables into variable tensors).

Everything read from the file is bounds-checked before use: a malformed, truncated or
hostile file raises ModelError, never another exception, a huge allocation or a hang.
"""

from __future__ import annotations

import hashlib
import math
import re
import struct

import numpy as np
import tflite

from ..errors import ModelError
from ..ir import DTYPES, Graph, Op, Quant, Tensor
from .control_flow import lower_control_flow
from .resources import resource_variables

# TFLite TensorType value → IR dtype name (types kiln can hold; others are reported).
_TENSOR_TYPES: dict[int, str] = {
    tflite.TensorType.FLOAT32: "float32",
    tflite.TensorType.FLOAT16: "float16",
    tflite.TensorType.INT8: "int8",
    tflite.TensorType.UINT8: "uint8",
    tflite.TensorType.INT16: "int16",
    tflite.TensorType.INT32: "int32",
    tflite.TensorType.INT64: "int64",
    tflite.TensorType.BOOL: "bool",
}
_TYPE_NAMES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_OP_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_OPTION_CLASSES = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
_ACTIVATIONS = {v: k for k, v in vars(tflite.ActivationFunctionType).items() if not k.startswith("_")}
# Types whose zero point must lie in the type's range (int32: biases, int64: never).
_ZERO_POINT_TYPES = ("int8", "uint8", "int16", "int32")
_PADDINGS = {v: k for k, v in vars(tflite.Padding).items() if not k.startswith("_")}

# Limits that keep a hostile file from asking for absurd memory, checked in Python's
# unbounded ints (a numpy product wraps in int64). Under these, every tensor's dims,
# axis strides and byte size fit the int32_t the kernels compute them in
# (codegen/bounds.py proves the rest per op). No kiln kernel takes more than 8 dims.
_MAX_DIM = 1 << 24
_MAX_ELEMENTS = 1 << 28
_MAX_RANK = 8
_FILE_IDENTIFIER = b"TFL3"
# The largest .tflite kiln reads: flatbuffers cap at 2 GiB, microcontroller models are
# well under this; a bigger "model" is refused before a byte of it is read.
MAX_MODEL_BYTES = 1 << 30


def _check_activation_quant(quant: Quant, what: str) -> None:
    """An activation's quantization must describe real values: a positive scale (the
    kernels divide by it). Its zero point is checked with every tensor's (_Reader._quant)."""
    if np.any(quant.scale <= 0):
        raise ModelError(f"{what} has a non-positive quantization scale "
                         f"{float(quant.scale.min())!r}")


def parse(data: bytes, name: str = "model") -> Graph:
    if len(data) == 0:
        raise ModelError("the model file is empty")
    if len(data) < 8 or data[4:8] != _FILE_IDENTIFIER:
        raise ModelError("not a TFLite model (no 'TFL3' file identifier at byte 4)")
    try:
        graph = _Reader(data, name).graph()
    except ModelError:
        raise
    except struct.error as e:   # an offset past the end of the data
        raise ModelError(f"the model file is truncated or corrupt: it points past its end "
                         f"({len(data):,} bytes; {e})") from None
    except Exception as e:  # flatbuffers raises many kinds on garbage offsets
        raise ModelError(f"malformed TFLite flatbuffer ({type(e).__name__}: {e})") from None
    graph.verify()
    return graph


def _snake(name: str) -> str:
    """Accessor name → schema field name: DilationHFactor → dilation_h_factor."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


class _Reader:
    def __init__(self, data: bytes, name: str):
        self.data = data
        self.name = name
        self.model = tflite.Model.GetRootAsModel(data, 0)

    def _count(self, n: int, what: str, elem_bytes: int = 4) -> int:
        if n < 0 or n * elem_bytes > len(self.data):
            raise ModelError(f"malformed TFLite flatbuffer: {what} count {n} exceeds the file")
        return n

    def graph(self) -> Graph:
        m = self.model
        if self._count(m.SubgraphsLength(), "subgraph") < 1:
            raise ModelError("the model has no subgraph")
        self._buffer_list = self._buffers()
        self._codes = [self._opcode(m.OperatorCodes(i))
                       for i in range(self._count(m.OperatorCodesLength(), "operator code"))]
        tensors, ops, inputs, outputs = self.subgraph(0)
        if not outputs:
            raise ModelError("the model declares no outputs")
        desc = m.Description()
        graph = Graph(name=self.name, tensors=tensors, ops=ops, inputs=inputs, outputs=outputs,
                      sha256=hashlib.sha256(self.data).hexdigest(),
                      description=desc.decode("utf-8", "replace") if desc else "")
        # WHILE and IF become the ops they run (a loop with a static trip count,
        # unrolled); then tf.Variable's ops (VAR_HANDLE, READ_/ASSIGN_VARIABLE, CALL_ONCE
        # and its init subgraph) become variable tensors, the IR's one form of model state.
        graph = lower_control_flow(graph, self.subgraph, m.SubgraphsLength())
        return resource_variables(graph, self.subgraph, m.SubgraphsLength())

    def subgraph(self, index: int) -> tuple[list[Tensor], list[Op], list[int], list[int]]:
        """Tensors, ops, inputs and outputs of subgraph `index`, bounds-checked."""
        sg = self.model.Subgraphs(index)
        n_tensors = self._count(sg.TensorsLength(), "tensor")
        tensors = [self._tensor(sg.Tensors(i), i, self._buffer_list) for i in range(n_tensors)]
        ops = [self._op(sg.Operators(i), i, self._codes, n_tensors)
               for i in range(self._count(sg.OperatorsLength(), "operator"))]
        inputs = self._ids(sg.InputsAsNumpy() if sg.InputsLength() else [], n_tensors, "input")
        outputs = self._ids(sg.OutputsAsNumpy() if sg.OutputsLength() else [], n_tensors, "output")
        return tensors, ops, inputs, outputs

    @staticmethod
    def _ids(values, n_tensors: int, what: str) -> list[int]:
        ids = [int(v) for v in values]
        for v in ids:
            if not 0 <= v < n_tensors:
                raise ModelError(f"model {what} names tensor {v}, out of range")
        return ids

    def _buffers(self) -> list[bytes]:
        result = []
        for i in range(self._count(self.model.BuffersLength(), "buffer")):
            b = self.model.Buffers(i)
            offset, size = b.Offset(), b.Size()
            if offset > 1:  # large models keep buffers after the flatbuffer
                if offset + size > len(self.data):
                    raise ModelError(f"buffer {i} lies outside the file")
                result.append(self.data[offset:offset + size])
            elif b.DataLength():
                self._count(b.DataLength(), f"buffer {i} byte", 1)
                result.append(b.DataAsNumpy().tobytes())
            else:
                result.append(b"")
        return result

    def _tensor(self, t, index: int, buffers: list[bytes]) -> Tensor:
        name = (t.Name() or b"").decode("utf-8", "replace")
        ttype = t.Type()
        dtype = _TENSOR_TYPES.get(ttype)
        if dtype is None:
            # Kept as an unsupported marker; ops using it are reported by the support check.
            dtype = "unsupported:" + _TYPE_NAMES.get(ttype, str(ttype)).lower()
        self._count(t.ShapeLength(), f"tensor {index} rank")
        shape = tuple(int(d) for d in (t.ShapeAsNumpy() if t.ShapeLength() else []))
        self._check_shape(shape, index, name, dynamic=bool(t.ShapeSignatureLength()))
        quant = self._quant(t.Quantization(), index, name, dtype)
        data = None
        buf_index = t.Buffer()
        if not 0 <= buf_index < len(buffers):
            raise ModelError(f"tensor {index} ({name}) names buffer {buf_index}, out of range")
        raw = buffers[buf_index]
        # A variable (model state) starts at its reset value whatever its buffer holds,
        # as in tflite-micro, which gives it memory of its own and fills it on reset.
        is_variable = bool(t.IsVariable())
        if raw and not is_variable:
            if dtype not in DTYPES:
                raise ModelError(f"tensor {index} ({name}) holds constant data of type "
                                 f"{dtype.split(':')[1]}, which kiln does not support")
            item = DTYPES[dtype].itemsize
            count = math.prod(shape)
            if len(raw) != count * item:
                raise ModelError(f"tensor {index} ({name}) has {len(raw)} bytes of data, "
                                 f"shape {list(shape)} needs {count * item}")
            data = np.frombuffer(raw, dtype=DTYPES[dtype]).reshape(shape).copy()
        if quant is not None and data is None:
            _check_activation_quant(quant, f"tensor {index} ({name})")
        return Tensor(id=index, name=name or f"tensor_{index}", shape=shape, dtype=dtype,
                      quant=quant, data=data, is_variable=is_variable)

    @staticmethod
    def _check_shape(shape: tuple[int, ...], index: int, name: str, dynamic: bool) -> None:
        """Dims in [0, 2^24], at most 8 of them, at most 2^28 elements (a 0 dim counted
        as 1, so the strides of an empty tensor are bounded too)."""
        what = f"tensor {index} ({name})"
        if len(shape) > _MAX_RANK:
            raise ModelError(f"{what} has rank {len(shape)} (kiln supports at most {_MAX_RANK})")
        if any(d < 0 for d in shape):
            kind = "a dynamic" if dynamic else "a negative dim in its"
            raise ModelError(f"{what} has {kind} shape {list(shape)}")
        if any(d > _MAX_DIM for d in shape):
            raise ModelError(f"{what} has a dim above {_MAX_DIM:,} in its shape {list(shape)}")
        if math.prod(max(d, 1) for d in shape) > _MAX_ELEMENTS:
            raise ModelError(f"{what} has shape {list(shape)}: more than {_MAX_ELEMENTS:,} "
                             "elements")

    def _quant(self, q, index: int, name: str, dtype: str) -> Quant | None:
        if q is None or q.ScaleLength() == 0:
            return None
        n = self._count(q.ScaleLength(), f"tensor {index} scale")
        scale = q.ScaleAsNumpy().astype(np.float32)
        zp = (q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength()
              else np.zeros(n, dtype=np.int64))
        if zp.size != n:
            if zp.size == 1:
                zp = np.repeat(zp, n)
            else:
                raise ModelError(f"tensor {index}: {n} scales but {zp.size} zero points")
        if not np.all(np.isfinite(scale)):
            raise ModelError(f"tensor {index} has a non-finite quantization scale")
        # Zero points become C int32_t offsets (and are negated there): any tensor's must
        # fit its integer type (constants' too: a weight zero point is a filter offset).
        if dtype in _ZERO_POINT_TYPES:
            info = np.iinfo(DTYPES[dtype])
            bad = zp[(zp < info.min) | (zp > info.max)]
            if bad.size:
                raise ModelError(f"tensor {index} ({name}) has zero point {int(bad[0])}, outside "
                                 f"{dtype}'s [{info.min}, {info.max}]")
        # The axis is not checked against the shape: converters write per-channel biases
        # with their filter's axis (3 on a rank-1 bias); kiln's lowerings count scales
        # per channel themselves.
        return Quant(scale=scale, zero_point=zp, axis=int(q.QuantizedDimension()))

    @staticmethod
    def _opcode(code) -> tuple[str, int]:
        value = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
        if value == tflite.BuiltinOperator.CUSTOM:
            custom = code.CustomCode()
            return "CUSTOM:" + (custom.decode("utf-8", "replace") if custom else "?"), code.Version()
        return _OP_NAMES.get(value, f"BUILTIN_{value}"), int(code.Version())

    def _op(self, o, index: int, codes: list[tuple[str, int]], n_tensors: int) -> Op:
        opcode = o.OpcodeIndex()
        if not 0 <= opcode < len(codes):
            raise ModelError(f"op {index} names operator code {opcode}, out of range")
        op_type, version = codes[opcode]
        inputs = [int(v) for v in (o.InputsAsNumpy() if o.InputsLength() else [])]
        outputs = [int(v) for v in (o.OutputsAsNumpy() if o.OutputsLength() else [])]
        for v in inputs + outputs:
            if not -1 <= v < n_tensors:
                raise ModelError(f"op {index} ({op_type}) names tensor {v}, out of range")
        if -1 in outputs:
            raise ModelError(f"op {index} ({op_type}) has an omitted output")
        return Op(type=op_type, inputs=inputs, outputs=outputs,
                  options=self._options(o, op_type), version=version, index=index)

    @staticmethod
    def _options(o, op_type: str) -> dict:
        kind = _OPTION_CLASSES.get(o.BuiltinOptionsType())
        table = o.BuiltinOptions()
        if kind is None or kind == "NONE" or table is None:
            return {}
        cls = getattr(tflite, kind, None)
        if cls is None:
            return {}
        opts = cls()
        opts.Init(table.Bytes, table.Pos)
        result: dict = {}
        for attr in dir(cls):
            if (attr.startswith("_") or attr in ("Init", "GetRootAs") or attr.startswith("GetRootAs")
                    or attr.endswith(("IsNone", "Length", "BufferHasIdentifier"))):
                continue
            key = _snake(attr)
            if attr.endswith("AsNumpy"):
                base = attr[: -len("AsNumpy")]
                if getattr(opts, base + "Length")():
                    result[_snake(base)] = [int(v) for v in getattr(opts, attr)()]
                else:
                    result[_snake(base)] = []
                continue
            if hasattr(cls, attr + "AsNumpy"):
                continue  # vector field, read through AsNumpy above
            value = getattr(opts, attr)()
            if key == "fused_activation_function":
                value = _ACTIVATIONS.get(value, str(value))
            elif key == "padding":
                value = _PADDINGS.get(value, str(value))
            elif isinstance(value, (bytes, bytearray)):
                value = value.decode("utf-8", "replace")
            result[key] = value
        return result
