"""Build .tflite models with several subgraphs and resource variables (VAR_HANDLE,
READ_VARIABLE, ASSIGN_VARIABLE, CALL_ONCE), as TF's converter writes a tf.Variable:
tests/tflite_builder.py writes one subgraph and no string options, so this module
builds on its pieces.

    main = Subgraph(tensors, ops, inputs, outputs)
    init = Subgraph(...)           # CALL_ONCE's init subgraph
    data = build_subgraphs([main, init])

A tensor of dtype "resource" is a variable handle (TFLite's RESOURCE type, shape []).
VAR_HANDLE takes options {"container": str, "shared_name": str}; CALL_ONCE
{"init_subgraph_index": int}.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import flatbuffers
import numpy as np
import tflite
from tflite_builder import (OpSpec, TensorSpec, _buffer, _int32_vector, _offset_vector,
                            _operator, _operator_code, _tensor, default_version, _specs)

RESOURCE = "resource"


@dataclass
class Subgraph:
    tensors: list[TensorSpec | str]     # a TensorSpec, or RESOURCE for a handle
    ops: list[OpSpec]
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)   # names of RESOURCE tensors


def _resource_tensor(b: flatbuffers.Builder, name: str) -> int:
    shape = _int32_vector(b, [])
    text = b.CreateString(name)
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, tflite.TensorType.RESOURCE)
    tflite.TensorAddBuffer(b, 0)
    tflite.TensorAddName(b, text)
    return tflite.TensorEnd(b)


def _string_options_op(b: flatbuffers.Builder, spec: OpSpec, opcode_index: int) -> int:
    """VAR_HANDLE (string options) and CALL_ONCE, which tflite_builder does not write."""
    if spec.op == "VAR_HANDLE":
        container = b.CreateString(spec.options.get("container", ""))
        shared = b.CreateString(spec.options["shared_name"])
        tflite.VarHandleOptionsStart(b)
        tflite.VarHandleOptionsAddContainer(b, container)
        tflite.VarHandleOptionsAddSharedName(b, shared)
        options, kind = tflite.VarHandleOptionsEnd(b), tflite.BuiltinOptions.VarHandleOptions
    else:
        tflite.CallOnceOptionsStart(b)
        tflite.CallOnceOptionsAddInitSubgraphIndex(b, spec.options["init_subgraph_index"])
        options, kind = tflite.CallOnceOptionsEnd(b), tflite.BuiltinOptions.CallOnceOptions
    ins = _int32_vector(b, spec.inputs)
    outs = _int32_vector(b, spec.outputs)
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, opcode_index)
    tflite.OperatorAddInputs(b, ins)
    tflite.OperatorAddOutputs(b, outs)
    tflite.OperatorAddBuiltinOptionsType(b, kind)
    tflite.OperatorAddBuiltinOptions(b, options)
    return tflite.OperatorEnd(b)


def build_subgraphs(subgraphs: list[Subgraph], description: str = "kiln test model") -> bytes:
    """Serialise `subgraphs` (the first is the main one) into one model, version 3."""
    b = flatbuffers.Builder(1024)
    code_keys: list[tuple[str, int]] = []
    op_codes: list[list[int]] = []
    for sg in subgraphs:
        specs = [t if isinstance(t, TensorSpec) else None for t in sg.tensors]
        row = []
        for op in sg.ops:
            version = op.version
            if version is None:
                version = (1 if op.op in ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
                                          "CALL_ONCE")
                           else default_version(op.op, _specs(specs, op.inputs),
                                                _specs(specs, op.outputs), op.options))
            key = (op.op, version)
            if key not in code_keys:
                code_keys.append(key)
            row.append(code_keys.index(key))
        op_codes.append(row)
    code_offsets = [_operator_code(b, name, version) for name, version in code_keys]

    buffer_data: list[bytes | None] = [None]
    buffers: list[list[int]] = []
    for sg in subgraphs:
        row = []
        for t in sg.tensors:
            if isinstance(t, TensorSpec) and t.data is not None:
                buffer_data.append(np.ascontiguousarray(t.data).astype(
                    np.dtype(t.np_dtype).newbyteorder("<"), copy=False).tobytes())
                row.append(len(buffer_data) - 1)
            else:
                row.append(0)
        buffers.append(row)
    buffer_offsets = [_buffer(b, data) for data in buffer_data]

    sg_offsets = []
    for k, sg in enumerate(subgraphs):
        tensors = [_tensor(b, t, i, buffers[k][i]) if isinstance(t, TensorSpec)
                   else _resource_tensor(b, sg.names.get(i, f"resource{i}"))
                   for i, t in enumerate(sg.tensors)]
        ops = [_string_options_op(b, op, op_codes[k][i])
               if op.op in ("VAR_HANDLE", "CALL_ONCE") else _operator(b, op, op_codes[k][i])
               for i, op in enumerate(sg.ops)]
        t_vec = _offset_vector(b, tflite.SubGraphStartTensorsVector, tensors)
        in_vec = _int32_vector(b, sg.inputs)
        out_vec = _int32_vector(b, sg.outputs)
        op_vec = _offset_vector(b, tflite.SubGraphStartOperatorsVector, ops)
        name = b.CreateString("main" if k == 0 else f"subgraph{k}")
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, t_vec)
        tflite.SubGraphAddInputs(b, in_vec)
        tflite.SubGraphAddOutputs(b, out_vec)
        tflite.SubGraphAddOperators(b, op_vec)
        tflite.SubGraphAddName(b, name)
        sg_offsets.append(tflite.SubGraphEnd(b))

    codes_vec = _offset_vector(b, tflite.ModelStartOperatorCodesVector, code_offsets)
    subgraphs_vec = _offset_vector(b, tflite.ModelStartSubgraphsVector, sg_offsets)
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


def accumulator(shape=(1, 4), scale: float = 0.1, zero_point: int = -3,
                init: np.ndarray | None = None, shared_name: str = "acc") -> bytes:
    """state += x; y = state (an int8 tf.Variable accumulator), as TF's converter writes
    it: CALL_ONCE runs subgraph 1, which assigns `init` (default: no init subgraph, the
    variable starts at its zero point as tflite-micro allocates it)."""
    q = dict(scale=scale, zero_point=zero_point)
    main_tensors: list = [
        TensorSpec(shape, "int8", name="x", **q),          # 0
        RESOURCE,                                           # 1 handle
        TensorSpec(shape, "int8", name="acc_read", **q),   # 2
        TensorSpec(shape, "int8", name="acc_new", **q),    # 3
    ]
    ops = [OpSpec("VAR_HANDLE", [], [1], {"container": "", "shared_name": shared_name}),
           OpSpec("READ_VARIABLE", [1], [2]),
           OpSpec("ADD", [2, 0], [3]),
           OpSpec("ASSIGN_VARIABLE", [1, 3], [])]
    subgraphs = []
    if init is not None:
        ops.insert(0, OpSpec("CALL_ONCE", [], [], {"init_subgraph_index": 1}))
        init_tensors = [RESOURCE, TensorSpec(shape, "int8", data=np.asarray(init, np.int8),
                                             name="acc_init", **q)]
        subgraphs.append(Subgraph(init_tensors, [
            OpSpec("VAR_HANDLE", [], [0], {"container": "", "shared_name": shared_name}),
            OpSpec("ASSIGN_VARIABLE", [0, 1], [])], names={0: "acc_handle"}))
    main = Subgraph(main_tensors, ops, inputs=[0], outputs=[3], names={1: "acc_handle"})
    return build_subgraphs([main, *subgraphs])
