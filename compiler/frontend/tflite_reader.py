"""Read a .tflite flatbuffer into kiln's Graph IR (subgraph 0).

Everything read from the file is bounds-checked before use: a malformed, truncated or
hostile file raises ModelError, never another exception, a huge allocation or a hang.
"""

from __future__ import annotations

import hashlib
import re
import struct
from pathlib import Path

import numpy as np
import tflite

from ..errors import ModelError
from ..ir import DTYPES, Graph, Op, Quant, Tensor

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
_PADDINGS = {v: k for k, v in vars(tflite.Padding).items() if not k.startswith("_")}

# Limits that keep a hostile file from asking for absurd memory.
_MAX_DIM = 1 << 24
_MAX_ELEMENTS = 1 << 28
_FILE_IDENTIFIER = b"TFL3"


def load(source: str | Path | bytes) -> Graph:
    """Parse a .tflite file (path or bytes) into a Graph. Raises ModelError on bad input."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "model"
    else:
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ModelError(f"cannot read {path}: {e.strerror or e}") from None
        name = path.stem
    return parse(data, name)


def _check_activation_quant(quant: Quant, dtype: str, what: str) -> None:
    """An activation's quantization must describe real values: a positive scale (the
    kernels divide by it) and a zero point its integer type holds (TFLite's spec; kiln's
    kernels check it at run time, so it is refused here, where the message can say why)."""
    if np.any(quant.scale <= 0):
        raise ModelError(f"{what} has a non-positive quantization scale "
                         f"{float(quant.scale.min())!r}")
    if dtype in ("int8", "uint8", "int16") and dtype in DTYPES:
        info = np.iinfo(DTYPES[dtype])
        bad = quant.zero_point[(quant.zero_point < info.min) | (quant.zero_point > info.max)]
        if bad.size:
            raise ModelError(f"{what} has zero point {int(bad[0])}, outside {dtype}'s "
                             f"[{info.min}, {info.max}]")


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
        sg = m.Subgraphs(0)
        buffers = self._buffers()
        n_tensors = self._count(sg.TensorsLength(), "tensor")
        tensors = [self._tensor(sg.Tensors(i), i, buffers) for i in range(n_tensors)]
        codes = [self._opcode(m.OperatorCodes(i))
                 for i in range(self._count(m.OperatorCodesLength(), "operator code"))]
        ops = [self._op(sg.Operators(i), i, codes, n_tensors)
               for i in range(self._count(sg.OperatorsLength(), "operator"))]
        inputs = self._ids(sg.InputsAsNumpy() if sg.InputsLength() else [], n_tensors, "input")
        outputs = self._ids(sg.OutputsAsNumpy() if sg.OutputsLength() else [], n_tensors, "output")
        if not outputs:
            raise ModelError("the model declares no outputs")
        desc = m.Description()
        return Graph(name=self.name, tensors=tensors, ops=ops, inputs=inputs, outputs=outputs,
                     sha256=hashlib.sha256(self.data).hexdigest(),
                     description=desc.decode("utf-8", "replace") if desc else "")

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
        shape = tuple(int(d) for d in (t.ShapeAsNumpy() if t.ShapeLength() else []))
        self._count(len(shape), f"tensor {index} rank")
        if any(d < 0 or d > _MAX_DIM for d in shape) or int(np.prod(shape, dtype=np.int64)) > _MAX_ELEMENTS:
            if t.ShapeSignatureLength() and any(d < 0 for d in shape):
                raise ModelError(f"tensor {index} ({name}) has a dynamic shape {list(shape)}")
            raise ModelError(f"tensor {index} ({name}) has an invalid shape {list(shape)}")
        quant = self._quant(t.Quantization(), index)
        data = None
        buf_index = t.Buffer()
        if not 0 <= buf_index < len(buffers):
            raise ModelError(f"tensor {index} ({name}) names buffer {buf_index}, out of range")
        raw = buffers[buf_index]
        if raw:
            if dtype not in DTYPES:
                raise ModelError(f"tensor {index} ({name}) holds constant data of type "
                                 f"{dtype.split(':')[1]}, which kiln does not support")
            item = DTYPES[dtype].itemsize
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if len(raw) != count * item:
                raise ModelError(f"tensor {index} ({name}) has {len(raw)} bytes of data, "
                                 f"shape {list(shape)} needs {count * item}")
            data = np.frombuffer(raw, dtype=DTYPES[dtype]).reshape(shape).copy()
        if quant is not None and data is None:
            _check_activation_quant(quant, dtype, f"tensor {index} ({name})")
        return Tensor(id=index, name=name or f"tensor_{index}", shape=shape, dtype=dtype,
                      quant=quant, data=data)

    def _quant(self, q, index: int) -> Quant | None:
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
