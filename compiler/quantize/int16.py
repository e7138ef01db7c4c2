"""The 16x8 scheme of `kiln quantize --activations int16`, as TF's converter writes it in its
EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8 mode (so TFLM runs the result):

- activations int16, symmetric, per tensor: zero point 0, scale max(|min|, |max|) / 32767
  of the calibrated range;
- weights int8 exactly as in the int8 scheme (rewrite.py);
- the biases of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED int64, scale input_scale ×
  weight_scale[c]; every such layer gets one (zeros where the float model had none: TFLM's
  16x8 depthwise kernel cannot run without it, and for the others a zero int64 bias is
  TFLM's arithmetic without a bias);
- fixed output ranges: SOFTMAX, LOGISTIC and TANH 1/32768 with zero point 0;
- ADD and SUB with general scales (pot_scale_int16 false), as the converter writes them.

Only the ops TFLM runs with int16 activations are quantized (`VERSIONS`, the op versions
TF's op_version.cc gives them); the rewrite names any other op and stops.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..ir import Graph

QMAX16 = 32767

# Ops TFLM runs with int16 activations, and the version TF's converter writes for them.
VERSIONS = {
    "CONV_2D": 4, "DEPTHWISE_CONV_2D": 5, "FULLY_CONNECTED": 1, "TRANSPOSE_CONV": 3,
    "AVERAGE_POOL_2D": 3, "MAX_POOL_2D": 3, "SOFTMAX": 3, "LOGISTIC": 3, "TANH": 3,
    "ADD": 3, "SUB": 5, "MUL": 4, "CONCATENATION": 3, "PAD": 3, "PADV2": 3, "RESHAPE": 1,
    "SQUEEZE": 1, "EXPAND_DIMS": 1, "TRANSPOSE": 5, "MEAN": 3, "MAXIMUM": 4, "MINIMUM": 4,
    "RELU": 3, "RELU6": 1, "RELU_N1_TO_1": 1, "LEAKY_RELU": 2, "QUANTIZE": 2, "DEQUANTIZE": 3,
    "STRIDED_SLICE": 1, "UNIDIRECTIONAL_SEQUENCE_LSTM": 1,   # (lstm.py)
}

FIXED_OUTPUT = {"SOFTMAX": (1.0 / 32768, 0), "LOGISTIC": (1.0 / 32768, 0),
                "TANH": (1.0 / 32768, 0)}

# Largest |int64 bias| the rewrite writes: TFLM's int64 requantization takes accumulators
# below 2^47, and the 16x8 kernels' check (codegen/ops/conv.py) adds 32768 * sum|w|.
BIAS_LIMIT = float(1 << 46)


def symmetric_params(lo: float, hi: float) -> tuple[float, int]:
    """(scale, 0) of an int16 range: the largest magnitude maps to 32767."""
    m = max(abs(float(lo)), abs(float(hi)))
    if m < 1e-12:
        m = 1.0                  # an all-zero tensor: any scale represents it
    return float(np.float32(m / QMAX16)), 0


def quantize_data(v: np.ndarray, scale: float) -> np.ndarray:
    """A float constant read as data (an ADD's addend) as int16 with zero point 0."""
    q = np.sign(v) * np.floor(np.abs(v.astype(np.float64) / np.float32(scale)) + 0.5)
    return np.clip(q, -QMAX16, QMAX16).astype(np.int16)


def check_ops(graph: Graph) -> None:
    """Refuse, naming them, the ops without a 16x8 form in TFLM (before calibration)."""
    missing = sorted({op.type for op in graph.ops if op.type not in VERSIONS})
    if missing:
        raise ModelError(f"cannot quantize {graph.name} to int16 activations: "
                         f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no "
                         "int16 form in tflite-micro (quantize to int8 instead)")
