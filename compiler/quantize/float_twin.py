"""The float twin of an int8 graph: the float model it approximates, for comparison.

When no float model is at hand (`kiln validate` on an int8 model without `--float`), the
twin is the best float reference kiln can make: every quantized constant dequantized
(weights per channel, int32 biases with their input × weight scale), every quantized
activation made float32, QUANTIZE ops (int8 → int8 requantization) made the identity.
FloatModel (float_eval) runs it on float inputs. Its outputs differ from the int8
model's by the activations' quantization only: the weights' rounding is in both.
"""

from __future__ import annotations

import dataclasses

from ..ir import Graph, Op, Tensor
from .float_eval import dequantize

_QUANTIZED = ("int8", "uint8", "int16")


def _float_tensor(t: Tensor) -> Tensor:
    if t.is_const and t.quant is not None and t.data is not None and t.data.dtype.kind in "iu":
        return dataclasses.replace(t, dtype="float32", quant=None, data=dequantize(t.data, t.quant))
    if not t.is_const and t.dtype in _QUANTIZED and t.quant is not None:
        return dataclasses.replace(t, dtype="float32", quant=None)
    return t        # float tensors, and integer constants without a scale (axes, shapes)


def _float_op(op: Op) -> Op:
    # DEQUANTIZE is float_eval's identity; QUANTIZE between two now-float tensors is too.
    return dataclasses.replace(op, type="DEQUANTIZE") if op.type == "QUANTIZE" else op


def float_twin(graph: Graph) -> Graph:
    """A new float Graph with `graph`'s ops, tensor ids and names (see the module doc)."""
    return dataclasses.replace(graph, tensors=[_float_tensor(t) for t in graph.tensors],
                               ops=[_float_op(op) for op in graph.ops])
