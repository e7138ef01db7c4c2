"""Write a Graph as a .tflite flatbuffer (schema v3, one subgraph): the inverse of the reader.

Used by `kiln quantize` to export a quantized model that other runtimes (TFLM, TFLite)
can check and run. The graph must be one the reader could have produced: no aliased
tensors (write before the compile passes), options as the reader decodes them (snake_case
keys of the op's BuiltinOptions table, enum fields by name).

Layout: buffer 0 is the empty sentinel shared by every non-constant tensor; each constant
gets its own buffer, 16-byte aligned (what TFLM and CMSIS-NN prefer for weights).
"""

from __future__ import annotations

import flatbuffers
import numpy as np
import tflite

from ..errors import ModelError
from ..ir import DTYPES, Graph, Op, Tensor
from .tflite_reader import _snake  # accessor → option key: the writer inverts the reader

_TENSOR_TYPES = {
    "float32": tflite.TensorType.FLOAT32, "float16": tflite.TensorType.FLOAT16,
    "int8": tflite.TensorType.INT8, "uint8": tflite.TensorType.UINT8,
    "int16": tflite.TensorType.INT16, "int32": tflite.TensorType.INT32,
    "int64": tflite.TensorType.INT64, "bool": tflite.TensorType.BOOL,
}
_BUILTIN_CODES = {k: v for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_OPTIONS_TYPES = {k: v for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
_ENUMS = {"fused_activation_function": tflite.ActivationFunctionType, "padding": tflite.Padding}

# Ops whose options table is not "<OpNameInCamelCase>Options" (or that have none).
_OPTIONS_TABLE: dict[str, str | None] = {
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions", "MEAN": "ReducerOptions", "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions", "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions", "REDUCE_ANY": "ReducerOptions",
    "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "TOPK_V2": "TopKV2Options", "PADV2": "PadV2Options", "PAD": "PadOptions",
    "LOGISTIC": None, "TANH": None, "RELU": None, "RELU6": None, "RELU_N1_TO_1": None,
    "PRELU": None, "DEQUANTIZE": "DequantizeOptions", "QUANTIZE": "QuantizeOptions",
}


def options_table(op_type: str) -> str | None:
    if op_type in _OPTIONS_TABLE:
        return _OPTIONS_TABLE[op_type]
    camel = op_type.replace("_", "").lower() + "options"
    for name in _OPTIONS_TYPES:
        if name.lower() == camel:
            return name
    return None


def write(graph: Graph, description: str = "written by kiln") -> bytes:
    """Serialise `graph` to .tflite bytes. Raises ModelError for what cannot be written."""
    return _Writer(graph).build(description)


def save(graph: Graph, path, description: str = "written by kiln") -> None:
    """Write `graph` as a .tflite at `path`, through a temporary file renamed over it: an
    interrupted save leaves the old file, and a link at `path` is replaced, never
    written through."""
    from ..fsutil import atomic_write_bytes

    data = write(graph, description)
    try:
        atomic_write_bytes(path, data)
    except OSError as e:
        raise ModelError(f"cannot write {path}: {e.strerror or e}") from None


class _Writer:
    def __init__(self, graph: Graph):
        self.g = graph
        self.b = flatbuffers.Builder(1 << 16)
        for t in graph.tensors:
            if t.alias_of is not None:
                raise ModelError(f"tensor {t.id} ({t.name}) is an alias: write the graph "
                                 "before the compile passes")
            if t.dtype not in _TENSOR_TYPES:
                raise ModelError(f"tensor {t.id} ({t.name}) has type {t.dtype}, which kiln cannot write")

    def build(self, description: str) -> bytes:
        b, g = self.b, self.g
        codes: list[tuple[str, int]] = []
        op_code = []
        for op in g.ops:
            key = (op.type, op.version)
            if key not in codes:
                codes.append(key)
            op_code.append(codes.index(key))
        code_offsets = [self._opcode(name, version) for name, version in codes]

        buffers: list[bytes | None] = [None]
        tensor_buffer = []
        for t in g.tensors:
            if t.data is None:
                tensor_buffer.append(0)
            else:
                data = np.ascontiguousarray(t.data, dtype=DTYPES[t.dtype].newbyteorder("<"))
                buffers.append(data.tobytes())
                tensor_buffer.append(len(buffers) - 1)
        buffer_offsets = [self._buffer(d) for d in buffers]
        tensor_offsets = [self._tensor(t, tensor_buffer[t.id]) for t in g.tensors]
        op_offsets = [self._operator(op, op_code[i]) for i, op in enumerate(g.ops)]

        sg_tensors = self._vector(tflite.SubGraphStartTensorsVector, tensor_offsets)
        sg_inputs = self._int32s(g.inputs)
        sg_outputs = self._int32s(g.outputs)
        sg_ops = self._vector(tflite.SubGraphStartOperatorsVector, op_offsets)
        sg_name = b.CreateString("main")
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, sg_tensors)
        tflite.SubGraphAddInputs(b, sg_inputs)
        tflite.SubGraphAddOutputs(b, sg_outputs)
        tflite.SubGraphAddOperators(b, sg_ops)
        tflite.SubGraphAddName(b, sg_name)
        subgraph = tflite.SubGraphEnd(b)

        codes_vec = self._vector(tflite.ModelStartOperatorCodesVector, code_offsets)
        subgraphs = self._vector(tflite.ModelStartSubgraphsVector, [subgraph])
        buffers_vec = self._vector(tflite.ModelStartBuffersVector, buffer_offsets)
        desc = b.CreateString(description)
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, codes_vec)
        tflite.ModelAddSubgraphs(b, subgraphs)
        tflite.ModelAddDescription(b, desc)
        tflite.ModelAddBuffers(b, buffers_vec)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    # --- pieces ------------------------------------------------------------------------
    def _int32s(self, values) -> int:
        return self.b.CreateNumpyVector(np.asarray(list(values), dtype=np.int32))

    def _vector(self, start, offsets: list[int]) -> int:
        start(self.b, len(offsets))
        for off in reversed(offsets):
            self.b.PrependUOffsetTRelative(off)
        return self.b.EndVector()

    def _opcode(self, name: str, version: int) -> int:
        b = self.b
        custom = None
        if name.startswith("CUSTOM:"):
            custom = b.CreateString(name.split(":", 1)[1])
            code = tflite.BuiltinOperator.CUSTOM
        elif name in _BUILTIN_CODES:
            code = _BUILTIN_CODES[name]
        else:
            raise ModelError(f"op type {name} is not a TFLite builtin")
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(
            b, min(code, tflite.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES))
        tflite.OperatorCodeAddBuiltinCode(b, code)
        tflite.OperatorCodeAddVersion(b, max(int(version), 1))
        if custom is not None:
            tflite.OperatorCodeAddCustomCode(b, custom)
        return tflite.OperatorCodeEnd(b)

    def _buffer(self, data: bytes | None) -> int:
        b = self.b
        vec = None
        if data is not None:
            b.StartVector(1, len(data), 16)
            b.head -= len(data)
            b.Bytes[b.head:b.head + len(data)] = data
            vec = b.EndVector()
        tflite.BufferStart(b)
        if vec is not None:
            tflite.BufferAddData(b, vec)
        return tflite.BufferEnd(b)

    def _tensor(self, t: Tensor, buffer: int) -> int:
        b = self.b
        quant = None
        if t.quant is not None:
            scale = b.CreateNumpyVector(np.asarray(t.quant.scale, dtype=np.float32).reshape(-1))
            zp = b.CreateNumpyVector(np.asarray(t.quant.zero_point, dtype=np.int64).reshape(-1))
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, scale)
            tflite.QuantizationParametersAddZeroPoint(b, zp)
            tflite.QuantizationParametersAddQuantizedDimension(b, int(t.quant.axis))
            quant = tflite.QuantizationParametersEnd(b)
        shape = self._int32s(t.shape)
        name = b.CreateString(t.name)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        tflite.TensorAddType(b, _TENSOR_TYPES[t.dtype])
        tflite.TensorAddBuffer(b, buffer)
        tflite.TensorAddName(b, name)
        if quant is not None:
            tflite.TensorAddQuantization(b, quant)
        if t.is_variable:
            tflite.TensorAddIsVariable(b, True)
        return tflite.TensorEnd(b)

    def _operator(self, op: Op, code_index: int) -> int:
        b = self.b
        opt_type, opt = self._options(op)
        ins, outs = self._int32s(op.inputs), self._int32s(op.outputs)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, code_index)
        tflite.OperatorAddInputs(b, ins)
        tflite.OperatorAddOutputs(b, outs)
        if opt is not None:
            tflite.OperatorAddBuiltinOptionsType(b, opt_type)
            tflite.OperatorAddBuiltinOptions(b, opt)
        return tflite.OperatorEnd(b)

    def _options(self, op: Op) -> tuple[int, int | None]:
        table = options_table(op.type)
        if not op.options:
            return 0, None          # no table, as the reader saw it (or the op has none)
        if table is None or not hasattr(tflite, table):
            if op.options:
                raise ModelError(f"{op.describe()}: kiln does not know the options table "
                                 f"of {op.type} to write {sorted(op.options)}")
            return 0, None
        cls = getattr(tflite, table)
        accessors = {_snake(a): a for a in dir(cls) if not a.startswith("_")}
        fields = []
        for key, value in op.options.items():
            attr = accessors.get(key)
            adder = getattr(tflite, f"{table}Add{attr}", None) if attr else None
            if adder is None:
                raise ModelError(f"{op.describe()}: {table} has no field {key!r}")
            if hasattr(tflite, f"{table}Start{attr}Vector"):
                value = self._int32s(value)
            elif key in _ENUMS and isinstance(value, str):
                if not hasattr(_ENUMS[key], value):
                    raise ModelError(f"{op.describe()}: {key}={value!r} is not a TFLite value")
                value = getattr(_ENUMS[key], value)
            elif isinstance(value, str):
                value = self.b.CreateString(value)
            elif isinstance(value, (bool, np.bool_)):
                value = bool(value)
            fields.append((adder, value))
        getattr(tflite, f"{table}Start")(self.b)
        for adder, value in fields:
            adder(self.b, value)
        return _OPTIONS_TYPES[table], getattr(tflite, f"{table}End")(self.b)
