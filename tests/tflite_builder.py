"""Build small .tflite flatbuffers in memory, for kernel tests.

A model is a list of tensors (``TensorSpec``) and a list of operators (``OpSpec``) that
refer to tensors by index. ``single_op_model`` covers the common case of one operator::

    x = TensorSpec((1, 8, 8, 3), scale=0.02, zero_point=-3)
    w = weight_spec((4, 3, 3, 3), rng, per_channel_axis=0)
    b = bias_spec(4, rng, input_scale=0.02, weight_scales=w.scale)
    y = TensorSpec((1, 8, 8, 4), scale=0.05, zero_point=2)
    model = single_op_model("CONV_2D", [x, w, b], [y],
                            {"padding": "SAME", "fused_activation_function": "RELU6"})

Options are written into the operator's BuiltinOptions table. Keys are the schema's field
names (``stride_w``, ``keep_num_dims``, ``new_axis_mask`` ...); enum fields take the enum
member's name (``"SAME"``, ``"RELU6"``) and type fields a dtype name (``"int32"``). An
unknown key raises, so a typo cannot silently become a default. Op versions default to
what the TFLite converter writes for the tensor types (a transcription of
``tensorflow/lite/tools/versioning/op_version.cc``); pass ``version=`` to override.

Buffers: buffer 0 is the empty sentinel, shared by every non-constant tensor; each constant
tensor gets its own buffer, 16-byte aligned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import flatbuffers
import numpy as np
import tflite

# dtype name -> (TensorType value, numpy dtype)
DTYPES: dict[str, tuple[int, type]] = {
    "float32": (tflite.TensorType.FLOAT32, np.float32),
    "int32": (tflite.TensorType.INT32, np.int32),
    "uint8": (tflite.TensorType.UINT8, np.uint8),
    "int64": (tflite.TensorType.INT64, np.int64),
    "bool": (tflite.TensorType.BOOL, np.bool_),
    "int16": (tflite.TensorType.INT16, np.int16),
    "int8": (tflite.TensorType.INT8, np.int8),
}

_BUILTIN_CODES: dict[str, int] = {
    k: v for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")
}
_OPTIONS_TYPES: dict[str, int] = {
    k: v for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")
}

# Ops whose options table is not simply "<OpNameInCamelCase>Options".
_OPTIONS_TABLE: dict[str, str | None] = {
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions",
    "MEAN": "ReducerOptions",
    "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "REDUCE_ANY": "ReducerOptions",
    "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions",
    "L2_NORMALIZATION": "L2NormOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "TOPK_V2": "TopKV2Options",
    "ARG_MAX": "ArgMaxOptions",
    "ARG_MIN": "ArgMinOptions",
    "PAD": "PadOptions",
    "PADV2": "PadV2Options",
    # No options table at all in the schema.
    "LOGISTIC": None,
    "TANH": None,
    "RELU": None,
    "RELU6": None,
    "RELU_N1_TO_1": None,
    "RELU_0_TO_1": None,
    "ELU": None,
    "PRELU": None,
    "FLOOR": None,
    "CEIL": None,
    "ROUND": None,
    "SQRT": None,
    "RSQRT": None,
    "SIN": None,
    "EMBEDDING_LOOKUP": None,
}

# Options every converter-written model sets; the schema default (often 0) is unusable.
_DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    "CONV_2D": {"padding": "VALID", "stride_w": 1, "stride_h": 1,
                "dilation_w_factor": 1, "dilation_h_factor": 1},
    "DEPTHWISE_CONV_2D": {"padding": "VALID", "stride_w": 1, "stride_h": 1,
                          "depth_multiplier": 1,
                          "dilation_w_factor": 1, "dilation_h_factor": 1},
    "TRANSPOSE_CONV": {"padding": "VALID", "stride_w": 1, "stride_h": 1},
    "AVERAGE_POOL_2D": {"padding": "VALID", "stride_w": 1, "stride_h": 1},
    "MAX_POOL_2D": {"padding": "VALID", "stride_w": 1, "stride_h": 1},
    "SOFTMAX": {"beta": 1.0},
    "ADD": {"pot_scale_int16": True},
    "SUB": {"pot_scale_int16": True},
}
_REQUIRED_OPTIONS: dict[str, tuple[str, ...]] = {
    "AVERAGE_POOL_2D": ("filter_width", "filter_height"),
    "MAX_POOL_2D": ("filter_width", "filter_height"),
    "SPLIT": ("num_splits",),
    "PACK": ("values_count", "axis"),
    "UNPACK": ("num", "axis"),
}

# Option fields whose value is an enum, by field name.
_ENUM_FIELDS: dict[str, type] = {
    "padding": tflite.Padding,
    "fused_activation_function": tflite.ActivationFunctionType,
    "activation": tflite.ActivationFunctionType,
    "weights_format": tflite.FullyConnectedOptionsWeightsFormat,
    "mode": tflite.MirrorPadMode,
    "kernel_type": tflite.LSTMKernelType,
    "combiner": tflite.CombinerType,
}
# Option fields whose value is a TensorType, given as a dtype name.
_TYPE_FIELDS = {"out_type", "output_type", "idx_out_type", "quantized_bias_type",
                "in_data_type", "out_data_type"}


@dataclass
class TensorSpec:
    """One tensor. ``data`` makes it a constant stored in its own buffer.

    ``scale``/``zero_point`` are scalars (per-tensor) or sequences (per-channel along
    ``quantized_dimension``); ``scale=None`` writes no quantization (float, shape tensors).
    ``variable`` marks a state tensor (is_variable: an op's persistent state, SVDF's or
    LSTM's, which the interpreter keeps between invocations).
    """

    shape: tuple[int, ...]
    dtype: str = "int8"
    scale: float | Sequence[float] | None = None
    zero_point: int | Sequence[int] | None = None
    quantized_dimension: int = 0
    data: np.ndarray | None = None
    name: str = ""
    variable: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}; known: {sorted(DTYPES)}")
        self.shape = tuple(int(d) for d in self.shape)
        if self.data is not None:
            self.data = np.asarray(self.data, dtype=DTYPES[self.dtype][1])
            if self.data.shape != self.shape:
                if self.data.size != int(np.prod(self.shape, dtype=np.int64)):
                    raise ValueError(f"tensor {self.name!r}: data shape {self.data.shape} "
                                     f"does not fit shape {self.shape}")
                self.data = self.data.reshape(self.shape)

    @property
    def np_dtype(self) -> type:
        return DTYPES[self.dtype][1]

    @property
    def scales(self) -> list[float]:
        if self.scale is None:
            return []
        return [float(s) for s in np.atleast_1d(np.asarray(self.scale, dtype=np.float64))]

    @property
    def zero_points(self) -> list[int]:
        if self.scale is None:
            return []
        zp = 0 if self.zero_point is None else self.zero_point
        zps = [int(z) for z in np.atleast_1d(np.asarray(zp, dtype=np.int64))]
        if len(zps) == 1 and len(self.scales) > 1:
            zps = zps * len(self.scales)
        return zps


@dataclass
class OpSpec:
    """One operator: builtin name, tensor indices (-1 = omitted optional input)."""

    op: str
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    version: int | None = None  # None: what the TFLite converter would write


def const(values: Any, dtype: str = "int32", shape: tuple[int, ...] | None = None,
          **kwargs: Any) -> TensorSpec:
    """A constant tensor (shape/axis/paddings/perm ... tensors): ``const([0, 2, 1])``."""
    data = np.asarray(values, dtype=DTYPES[dtype][1])
    return TensorSpec(data.shape if shape is None else shape, dtype, data=data, **kwargs)


# --------------------------------------------------------------------------- model build


def build_model(ops: list[OpSpec], tensors: list[TensorSpec], inputs: list[int],
                outputs: list[int], description: str = "kiln test model") -> bytes:
    """Serialise one subgraph (model version 3) holding ``ops`` over ``tensors``."""
    for spec in ops:
        for t in list(spec.inputs) + list(spec.outputs):
            if t != -1 and not 0 <= t < len(tensors):
                raise ValueError(f"{spec.op}: tensor index {t} out of range")
    b = flatbuffers.Builder(1024)

    # Operator codes, one per (op, version).
    code_keys: list[tuple[str, int]] = []
    op_code_index: list[int] = []
    for spec in ops:
        key = (spec.op, spec.version if spec.version is not None
               else default_version(spec.op, _specs(tensors, spec.inputs),
                                    _specs(tensors, spec.outputs), spec.options))
        if key not in code_keys:
            code_keys.append(key)
        op_code_index.append(code_keys.index(key))
    code_offsets = [_operator_code(b, name, version) for name, version in code_keys]

    # Buffers: 0 is the empty sentinel; constants get their own.
    buffer_data: list[bytes | None] = [None]
    tensor_buffer: list[int] = []
    for t in tensors:
        if t.data is None:
            tensor_buffer.append(0)
        else:
            buffer_data.append(np.ascontiguousarray(t.data).astype(
                np.dtype(t.np_dtype).newbyteorder("<"), copy=False).tobytes())
            tensor_buffer.append(len(buffer_data) - 1)
    buffer_offsets = [_buffer(b, data) for data in buffer_data]

    tensor_offsets = [_tensor(b, t, i, tensor_buffer[i]) for i, t in enumerate(tensors)]
    op_offsets = [_operator(b, spec, op_code_index[i]) for i, spec in enumerate(ops)]

    sg_tensors = _offset_vector(b, tflite.SubGraphStartTensorsVector, tensor_offsets)
    sg_inputs = _int32_vector(b, inputs)
    sg_outputs = _int32_vector(b, outputs)
    sg_ops = _offset_vector(b, tflite.SubGraphStartOperatorsVector, op_offsets)
    sg_name = b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, sg_tensors)
    tflite.SubGraphAddInputs(b, sg_inputs)
    tflite.SubGraphAddOutputs(b, sg_outputs)
    tflite.SubGraphAddOperators(b, sg_ops)
    tflite.SubGraphAddName(b, sg_name)
    subgraph = tflite.SubGraphEnd(b)

    codes_vec = _offset_vector(b, tflite.ModelStartOperatorCodesVector, code_offsets)
    subgraphs_vec = _offset_vector(b, tflite.ModelStartSubgraphsVector, [subgraph])
    buffers_vec = _offset_vector(b, tflite.ModelStartBuffersVector, buffer_offsets)
    desc = b.CreateString(description)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes_vec)
    tflite.ModelAddSubgraphs(b, subgraphs_vec)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, buffers_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def single_op_model(op: str, inputs: Sequence[TensorSpec | None],
                    outputs: Sequence[TensorSpec], options: dict[str, Any] | None = None,
                    version: int | None = None) -> bytes:
    """One operator. ``None`` in ``inputs`` is an omitted optional input (index -1).

    Model inputs are the non-constant, non-variable inputs in order; model outputs are
    ``outputs``.
    """
    tensors: list[TensorSpec] = []
    in_idx: list[int] = []
    for t in inputs:
        if t is None:
            in_idx.append(-1)
        else:
            in_idx.append(len(tensors))
            tensors.append(t)
    out_idx = list(range(len(tensors), len(tensors) + len(outputs)))
    tensors.extend(outputs)
    model_inputs = [i for i in in_idx
                    if i != -1 and tensors[i].data is None and not tensors[i].variable]
    spec = OpSpec(op, in_idx, out_idx, dict(options or {}), version)
    return build_model([spec], tensors, model_inputs, out_idx)


# --------------------------------------------------------------------------- tables


def _specs(tensors: list[TensorSpec], idx: list[int]) -> list[TensorSpec | None]:
    return [None if i == -1 else tensors[i] for i in idx]


def _int32_vector(b: flatbuffers.Builder, values: Sequence[int]) -> int:
    return b.CreateNumpyVector(np.asarray(list(values), dtype=np.int32))


def _offset_vector(b: flatbuffers.Builder, start: Any, offsets: list[int]) -> int:
    start(b, len(offsets))
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _operator_code(b: flatbuffers.Builder, name: str, version: int) -> int:
    if name not in _BUILTIN_CODES:
        raise ValueError(f"unknown builtin operator {name!r}")
    code = _BUILTIN_CODES[name]
    tflite.OperatorCodeStart(b)
    # deprecated_builtin_code is an int8: codes >= 127 go in builtin_code only.
    tflite.OperatorCodeAddDeprecatedBuiltinCode(
        b, min(code, tflite.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES))
    tflite.OperatorCodeAddBuiltinCode(b, code)
    tflite.OperatorCodeAddVersion(b, version)
    return tflite.OperatorCodeEnd(b)


def _buffer(b: flatbuffers.Builder, data: bytes | None) -> int:
    vec = None
    if data is not None:
        # CreateByteVector aligns to 4; TFLM and CMSIS-NN like 16 for weights.
        b.StartVector(1, len(data), 16)
        b.head -= len(data)
        b.Bytes[b.head:b.head + len(data)] = data
        vec = b.EndVector()
    tflite.BufferStart(b)
    if vec is not None:
        tflite.BufferAddData(b, vec)
    return tflite.BufferEnd(b)


def _tensor(b: flatbuffers.Builder, t: TensorSpec, index: int, buffer: int) -> int:
    quant = None
    if t.scale is not None:
        scales, zps = t.scales, t.zero_points
        if len(zps) != len(scales):
            raise ValueError(f"tensor {t.name or index}: {len(scales)} scales but "
                             f"{len(zps)} zero points")
        if len(scales) > 1 and t.shape[t.quantized_dimension] != len(scales):
            raise ValueError(f"tensor {t.name or index}: {len(scales)} scales but dim "
                             f"{t.quantized_dimension} has {t.shape[t.quantized_dimension]}")
        scale_vec = b.CreateNumpyVector(np.asarray(scales, dtype=np.float32))
        zp_vec = b.CreateNumpyVector(np.asarray(zps, dtype=np.int64))
        tflite.QuantizationParametersStart(b)
        tflite.QuantizationParametersAddScale(b, scale_vec)
        tflite.QuantizationParametersAddZeroPoint(b, zp_vec)
        tflite.QuantizationParametersAddQuantizedDimension(b, t.quantized_dimension)
        quant = tflite.QuantizationParametersEnd(b)
    shape = _int32_vector(b, t.shape)
    name = b.CreateString(t.name or f"t{index}")
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, DTYPES[t.dtype][0])
    tflite.TensorAddBuffer(b, buffer)
    tflite.TensorAddName(b, name)
    if quant is not None:
        tflite.TensorAddQuantization(b, quant)
    if t.variable:
        tflite.TensorAddIsVariable(b, True)
    return tflite.TensorEnd(b)


def _operator(b: flatbuffers.Builder, spec: OpSpec, opcode_index: int) -> int:
    opt_type, opt_offset = _options(b, spec.op, spec.options)
    ins = _int32_vector(b, spec.inputs)
    outs = _int32_vector(b, spec.outputs)
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, opcode_index)
    tflite.OperatorAddInputs(b, ins)
    tflite.OperatorAddOutputs(b, outs)
    if opt_offset is not None:
        tflite.OperatorAddBuiltinOptionsType(b, opt_type)
        tflite.OperatorAddBuiltinOptions(b, opt_offset)
    return tflite.OperatorEnd(b)


def options_table(op: str) -> str | None:
    """Name of the BuiltinOptions table of ``op`` (None if it has none)."""
    if op in _OPTIONS_TABLE:
        return _OPTIONS_TABLE[op]
    camel = op.replace("_", "").lower() + "options"
    for name in _OPTIONS_TYPES:
        if name.lower() == camel:
            return name
    return None


def _camel(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_"))


def _options(b: flatbuffers.Builder, op: str, options: dict[str, Any]) -> tuple[int, int | None]:
    table = options_table(op)
    merged = {**_DEFAULT_OPTIONS.get(op, {}), **options}
    if table is None:
        if options:
            raise ValueError(f"{op} has no options, got {sorted(options)}")
        return 0, None
    missing = [k for k in _REQUIRED_OPTIONS.get(op, ()) if k not in merged]
    if missing:
        raise ValueError(f"{op} needs options {missing}")

    # Vectors must be built before the table starts.
    fields: list[tuple[Any, Any]] = []
    for key, value in merged.items():
        camel = _camel(key)
        adder = getattr(tflite, f"{table}Add{camel}", None)
        if adder is None:
            raise ValueError(f"{op}: {table} has no field {key!r}")
        if hasattr(tflite, f"{table}Start{camel}Vector"):
            value = _int32_vector(b, value)
        elif key in _ENUM_FIELDS and isinstance(value, str):
            enum = _ENUM_FIELDS[key]
            if not hasattr(enum, value):
                raise ValueError(f"{op}: {key}={value!r} is not a {enum.__name__}")
            value = getattr(enum, value)
        elif key in _TYPE_FIELDS and isinstance(value, str):
            value = DTYPES[value][0]
        elif isinstance(value, (bool, np.bool_)):
            value = bool(value)
        fields.append((adder, value))
    getattr(tflite, f"{table}Start")(b)
    for adder, value in fields:
        adder(b, value)
    return _OPTIONS_TYPES[table], getattr(tflite, f"{table}End")(b)


# --------------------------------------------------------------------------- versions

# Ops whose version depends only on the first input's type, as in op_version.cc.
_VERSION_BY_INPUT_TYPE: dict[str, dict[str, int]] = {
    **{op: {"int16": 3, "int8": 2} for op in (
        "SOFTMAX", "MEAN", "MIRROR_PAD", "REDUCE_MAX", "REDUCE_MIN", "RELU6", "RSQRT",
        "AVERAGE_POOL_2D", "MAX_POOL_2D", "TANH", "LOGISTIC", "CONCATENATION",
        "LESS", "GREATER_EQUAL", "BATCH_MATMUL")},
    **{op: {"int8": 2} for op in (
        "SPACE_TO_DEPTH", "SPLIT_V", "SUM", "LOG_SOFTMAX", "GREATER", "LESS_EQUAL",
        "SQUARED_DIFFERENCE", "DEPTH_TO_SPACE", "ARG_MAX", "ARG_MIN", "NOT_EQUAL")},
    "RELU": {"int16": 3, "int8": 2, "uint8": 2},
    "LEAKY_RELU": {"int16": 2},
    "TILE": {"int8": 3},
    "UNPACK": {"int16": 4, "int8": 2, "uint8": 2, "bool": 3},
    "PACK": {"int16": 3, "int8": 2},
    "ABS": {"int16": 3, "int8": 2, "uint8": 2, "int32": 5},
    "EQUAL": {"int16": 4, "int8": 2},
    "EXP": {"int8": 2, "int16": 2},
    "LOG": {"int8": 2, "int16": 2},
    "REDUCE_PROD": {"int8": 2, "int16": 2},
    "GELU": {"int8": 2, "uint8": 2},
    "BROADCAST_TO": {"int8": 3, "int16": 3, None: 2},
}


def default_version(op: str, inputs: Sequence[TensorSpec | None],
                    outputs: Sequence[TensorSpec], options: dict[str, Any]) -> int:
    """The op version the TFLite converter writes (op_version.cc), for the cases tests use."""
    def dt(specs: Sequence[TensorSpec | None], i: int) -> str | None:
        return specs[i].dtype if i < len(specs) and specs[i] is not None else None

    i0, i1, o0 = dt(inputs, 0), dt(inputs, 1), dt(outputs, 0)
    rank0 = len(inputs[0].shape) if inputs and inputs[0] is not None else 0
    opts = {**_DEFAULT_OPTIONS.get(op, {}), **options}
    per_channel = len(inputs) > 1 and inputs[1] is not None and len(inputs[1].scales) > 1
    broadcast5d = (len(inputs) >= 2 and inputs[1] is not None and inputs[0] is not None
                   and inputs[0].shape != inputs[1].shape
                   and max(len(inputs[0].shape), len(inputs[1].shape)) > 4)

    if op in _VERSION_BY_INPUT_TYPE:
        table = _VERSION_BY_INPUT_TYPE[op]
        return table.get(i0, table.get(None, 1))
    if op == "CONV_2D":
        if i0 == "int16" and i1 == "int8" and o0 == "int16":
            return 8 if opts.get("quantized_bias_type") else 4
        if (inputs[0] is not None and inputs[1] is not None
                and inputs[0].shape[-1] != inputs[1].shape[-1]):
            return 6  # grouped convolution
        if (i0, i1, o0) == ("int8", "int8", "int8"):
            return 3
        if (i0, i1, o0) == ("float32", "int8", "float32"):
            return 5 if per_channel else 2
        return 1
    if op == "DEPTHWISE_CONV_2D":
        if i0 == "int16":
            return 5
        if (i0, i1, o0) == ("float32", "int8", "float32"):
            return 6 if per_channel else 4
        if (i0, i1, o0) == ("int8", "int8", "int8"):
            return 3
        if opts.get("dilation_w_factor", 1) != 1 or opts.get("dilation_h_factor", 1) != 1:
            return 2
        return 1
    if op == "FULLY_CONNECTED":
        if (i0, i1, o0) == ("int16", "int8", "int16") and opts.get("quantized_bias_type"):
            return 11
        if (i0, i1, o0) == ("int16", "int16", "int16"):
            return 7
        if len(inputs) == 2:
            return 6
        if opts.get("keep_num_dims"):
            return 5
        if (i0, i1, o0) == ("int8", "int8", "int8"):
            return 4
        if (i0, i1, o0) == ("float32", "int8", "float32"):
            return 9 if opts.get("asymmetric_quantize_inputs") else 3
        return 1
    if op == "GATHER":
        if i1 == "int16":
            return 6
        if opts.get("batch_dims", 0) != 0:
            return 5
        return {"int16": 4, "bool": 3, "int8": 2}.get(i0, 1)
    if op == "MUL":
        if i0 == "int64":
            return 5
        if i0 == "int16":
            return 4
        if i0 == "int8":
            s1, s2, so = inputs[0].scales, inputs[1].scales, outputs[0].scales
            if s1 and s2 and so and s1[0] * s2[0] / so[0] >= 1.0:
                return 3
            return 2
        return 1
    if op == "ADD":
        if i0 == "int64":
            return 4
        if i0 == "int16" and o0 == "int16" and not opts.get("pot_scale_int16", True):
            return 3
        return 2 if i0 == "int8" else 1
    if op == "SUB":
        if i0 == "int16" and o0 == "int16" and not opts.get("pot_scale_int16", True):
            return 5
        if i0 == "int64":
            return 4
        if broadcast5d:
            return 3
        return 2 if i0 == "int8" else 1
    if op in ("MAXIMUM", "MINIMUM"):
        if i0 == "int16" and o0 == "int16":
            return 4
        if broadcast5d:
            return 3
        return 2 if i0 == "int8" else 1
    if op == "TRANSPOSE":
        if rank0 > 5:
            return 6
        if i0 == "int16":
            return 5
        if rank0 > 4:
            return 4
        return {"bool": 3, "int8": 2}.get(i0, 1)
    if op == "TRANSPOSE_CONV":
        # inputs: output_shape, weights, input, [bias]
        if opts.get("fused_activation_function", "NONE") not in ("NONE", 0):
            return 4
        if len(inputs) == 4 and inputs[3] is not None:
            return 3
        return 2 if i1 == "int8" else 1
    if op == "SPLIT":
        return {"int16": 4, "int32": 3, "int8": 2}.get(i1, 1)
    if op == "SLICE":
        if rank0 > 4:
            return 5
        return {"int16": 4, "int8": 2}.get(i0, 1)
    if op == "STRIDED_SLICE":
        if opts.get("offset"):
            return 8
        if opts.get("ellipsis_mask", 0) or opts.get("new_axis_mask", 0):
            return 6
        if rank0 > 4:
            return 4
        return {"bool": 3, "int8": 2}.get(i0, 1)
    if op == "DEQUANTIZE":
        if i0 in ("int16", "float16"):
            return 3
        if i0 == "int8":
            return 5 if len(inputs[0].scales) > 1 else 2
        return 1
    if op == "QUANTIZE":
        if len(outputs[0].scales) > 1:
            return 3
        return 2 if o0 == "int16" else 1
    if op in ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"):
        if i0 == "int16":
            return 4
        if opts.get("half_pixel_centers") or (
                op == "RESIZE_NEAREST_NEIGHBOR" and opts.get("align_corners")):
            return 3
        return 2 if i0 == "int8" else 1
    if op in ("SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND"):
        if i0 == "int16":
            return 4
        if rank0 != 4:
            return 3
        return 2 if i0 == "int8" else 1
    if op in ("PAD", "PADV2"):
        if rank0 > 4:
            return 4
        return {"int16": 3, "int8": 2}.get(i0, 1)
    if op == "L2_NORMALIZATION":
        return 2 if o0 == "int8" else 1
    if op == "SVDF":
        if i0 == "int8":
            return 3
        if i1 == "int8":   # hybrid: float input, int8 weights
            return 4 if opts.get("asymmetric_quantize_inputs") else 2
        return 1
    return 1


# --------------------------------------------------------------------------- test data


def rand_int8(shape: Sequence[int], rng: np.random.Generator, low: int = -128,
              high: int = 127) -> np.ndarray:
    """Uniform int8 in [low, high], inclusive."""
    return rng.integers(low, high + 1, size=tuple(shape), dtype=np.int64).astype(np.int8)


def rand_int(shape: Sequence[int], rng: np.random.Generator, dtype: str = "int8") -> np.ndarray:
    """Uniform over the full range of an integer dtype name."""
    info = np.iinfo(DTYPES[dtype][1])
    return rng.integers(info.min, info.max, size=tuple(shape), endpoint=True,
                        dtype=np.int64).astype(DTYPES[dtype][1])


def per_channel_scales(n: int, rng: np.random.Generator, low: float = 0.002,
                       high: float = 0.02) -> np.ndarray:
    """``n`` weight scales, log-uniform in [low, high], exactly float32-representable."""
    return np.exp(rng.uniform(np.log(low), np.log(high), n)).astype(np.float32)


def weight_spec(shape: Sequence[int], rng: np.random.Generator, per_channel_axis: int | None = 0,
                scale: float | Sequence[float] | None = None, name: str = "") -> TensorSpec:
    """Constant symmetric int8 weights in [-127, 127] (zero point 0, as TFLite requires).

    ``per_channel_axis``: 0 for CONV_2D/FULLY_CONNECTED/TRANSPOSE_CONV (OHWI / OI), 3 for
    DEPTHWISE_CONV_2D (1HWC); None for a single per-tensor scale.
    """
    shape = tuple(shape)
    if scale is None:
        n = 1 if per_channel_axis is None else shape[per_channel_axis]
        s = per_channel_scales(n, rng)
        scale = [float(v) for v in s] if per_channel_axis is not None else float(s[0])
    n_scales = len(np.atleast_1d(scale))
    return TensorSpec(shape, "int8", scale=scale, zero_point=[0] * n_scales,
                      quantized_dimension=per_channel_axis or 0,
                      data=rand_int8(shape, rng, -127, 127), name=name)


def bias_spec(n: int, rng: np.random.Generator, input_scale: float,
              weight_scales: float | Sequence[float], magnitude: int = 2000,
              name: str = "") -> TensorSpec:
    """Constant int32 bias with scale = input_scale · weight_scale, values in ±magnitude."""
    ws = np.atleast_1d(np.asarray(weight_scales, dtype=np.float32)).astype(np.float64)
    scales = [float(np.float32(input_scale) * w) for w in ws]
    data = rng.integers(-magnitude, magnitude + 1, size=n).astype(np.int32)
    scale: float | list[float] = scales if len(scales) > 1 else scales[0]
    return TensorSpec((n,), "int32", scale=scale, zero_point=[0] * len(scales),
                      data=data, name=name)


def chain_model(n: int, op: str = "ADD") -> bytes:
    """n int8 element-wise ops in a chain over a small tensor (ADD reads its input twice):
    the long graphs compile-time scaling is measured on."""
    ts = [TensorSpec((1, 8), scale=0.05, zero_point=0, name="t0")]
    ops = []
    for i in range(n):
        ts.append(TensorSpec((1, 8), scale=0.05, zero_point=0, name=f"t{i + 1}"))
        ops.append(OpSpec(op, [i, i] if op == "ADD" else [i], [i + 1]))
    return build_model(ops, ts, [0], [n])
