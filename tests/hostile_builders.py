"""Single-op models with hostile shapes and parameters (tests/test_hostile_models.py).

Each builder takes the one value under attack and fills the rest with small, valid
tensors, so a refusal can only come from that value. They return .tflite bytes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from tflite_builder import (OpSpec, TensorSpec, bias_spec, build_model, const, single_op_model,
                           weight_spec)


def _act(shape: Sequence[int], scale: float = 0.1, zero_point: int = 0) -> TensorSpec:
    return TensorSpec(tuple(shape), scale=scale, zero_point=zero_point)


def pool_model(in_shape: Sequence[int], out_shape: Sequence[int], op: str = "MAX_POOL_2D",
               **options) -> bytes:
    """A pooling layer; options default to a 1x1 VALID window of stride 1."""
    opts = {"padding": "VALID", "stride_w": 1, "stride_h": 1, "filter_width": 1,
            "filter_height": 1, **options}
    return single_op_model(op, [_act(in_shape)], [_act(out_shape)], opts)


def window_model(op: str, dilation: int = 1, stride: int = 1, padding: str = "SAME",
                 hw: int = 5, k: int = 3, channels: int = 4) -> bytes:
    """A CONV_2D or DEPTHWISE_CONV_2D on a hw x hw image whose output size is the one the
    options imply (SAME with stride 1: hw x hw)."""
    rng = np.random.default_rng(0)
    depthwise = op == "DEPTHWISE_CONV_2D"
    w = weight_spec((1, k, k, channels) if depthwise else (channels, k, k, channels), rng,
                    per_channel_axis=3 if depthwise else 0)
    b = bias_spec(channels, rng, 0.1, w.scale)
    eff = (k - 1) * dilation + 1
    out = -(-hw // stride) if padding == "SAME" else (hw + stride - eff) // stride
    opts = {"padding": padding, "stride_w": stride, "stride_h": stride,
            "dilation_w_factor": dilation, "dilation_h_factor": dilation}
    if depthwise:
        opts["depth_multiplier"] = 1
    return single_op_model(op, [_act((1, hw, hw, channels)), w, b],
                           [_act((1, out, out, channels), scale=0.2)], opts)


def fc_model(weight_zero_point: int) -> bytes:
    """A FULLY_CONNECTED 8 -> 4 whose per-tensor weights carry this zero point."""
    rng = np.random.default_rng(1)
    w = TensorSpec((4, 8), "int8", scale=0.01, zero_point=weight_zero_point,
                   data=rng.integers(-127, 128, (4, 8)).astype(np.int8))
    return single_op_model("FULLY_CONNECTED", [_act((1, 8)), w, None], [_act((1, 4), 0.2)], {})


def unary_model(shape: Sequence[int], op: str = "RELU") -> bytes:
    return single_op_model(op, [_act(shape)], [_act(shape)])


def live_outputs_model(n: int, shape: Sequence[int]) -> bytes:
    """n RELUs of one input, every result a model output: all live at the end, so the
    arena holds n + 1 tensors of `shape` side by side."""
    tensors = [_act(shape)] + [_act(shape) for _ in range(n)]
    ops = [OpSpec("RELU", [0], [1 + i]) for i in range(n)]
    return build_model(ops, tensors, [0], list(range(1, n + 1)))


def mean_model(out_scale: float) -> bytes:
    """MEAN over axes 0 and 2 (keep_dims) of a 6x2x5x2 input of scale 0.0227."""
    return single_op_model("MEAN", [_act((6, 2, 5, 2), 0.0227, -85), const([0, 2])],
                           [_act((1, 2, 1, 2), out_scale, 6)], {"keep_dims": True})
