#!/usr/bin/env python3
"""Make kiln's bundled example: a small int8 CNN for scikit-learn's 8x8 digits, no TensorFlow.

    python examples/make_digits_model.py [--out examples/digits]

Trains a float CNN in numpy on sklearn's bundled digits (1,797 images, no
download), quantizes it the way the TFLite converter does (int8 activations
with calibrated ranges; per-channel symmetric int8 conv weights, per-tensor FC
weights, int32 biases at input_scale * weight_scale), and writes it as a .tflite
flatbuffer with the `tflite` package's builders. Outputs (small, committed):

    digits_int8.tflite   input int8 1x8x8x1 (pixel/16, scale 1/255, zp -128)
                         CONV_2D 3x3x8 +ReLU, MAX_POOL 2x2, CONV_2D 3x3x16 +ReLU,
                         MAX_POOL 2x2, FULLY_CONNECTED 64->10: int8 logits
    digits_test_x.npy    the held-out test images, int8 quantized, (N, 8, 8, 1)
    digits_test_y.npy    their labels, uint8

There is no SOFTMAX: the prediction is the argmax of the logits, which softmax
would not change. Deterministic for a given numpy build (fixed seeds).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SEED = 0
EPOCHS = 40
BATCH = 32
LEARNING_RATE = 3e-3
INPUT_SCALE, INPUT_ZERO_POINT = 1.0 / 255.0, -128


# ---- data ----------------------------------------------------------------------

def load_digits_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]      # N, 8, 8, 1 in [0, 1]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=SEED, stratify=y)


# ---- a float CNN in numpy (NHWC, SAME 3x3 convs via im2col) ----------------------

def im2col(x: np.ndarray) -> np.ndarray:
    """(N, H, W, C) -> (N*H*W, 9*C): 3x3 SAME patches in (kh, kw, c) order."""
    n, h, w, c = x.shape
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    cols = [p[:, i:i + h, j:j + w, :] for i in range(3) for j in range(3)]
    return np.concatenate(cols, axis=-1).reshape(n * h * w, 9 * c)


def col2im(cols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, h, w, c = shape
    cols = cols.reshape(n, h, w, 9, c)
    p = np.zeros((n, h + 2, w + 2, c), cols.dtype)
    for k in range(9):
        i, j = divmod(k, 3)
        p[:, i:i + h, j:j + w, :] += cols[:, :, :, k, :]
    return p[:, 1:-1, 1:-1, :]


def maxpool(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, h, w, c = x.shape
    blocks = x.reshape(n, h // 2, 2, w // 2, 2, c)
    out = blocks.max(axis=(2, 4))
    mask = blocks == out[:, :, None, :, None, :]
    return out, mask


@dataclass
class Params:
    w1: np.ndarray   # (9*1, 8)   rows in (kh, kw, cin) order
    b1: np.ndarray
    w2: np.ndarray   # (9*8, 16)
    b2: np.ndarray
    w3: np.ndarray   # (64, 10)   rows in NHWC flatten order of (2, 2, 16)
    b3: np.ndarray

    @classmethod
    def init(cls, rng: np.random.Generator) -> "Params":
        def he(fan_in: int, shape: tuple[int, int]) -> np.ndarray:
            return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        return cls(he(9, (9, 8)), np.zeros(8, np.float32), he(72, (72, 16)),
                   np.zeros(16, np.float32), he(64, (64, 10)), np.zeros(10, np.float32))

    def names(self) -> list[str]:
        return ["w1", "b1", "w2", "b2", "w3", "b3"]


def forward(p: Params, x: np.ndarray) -> tuple[np.ndarray, dict]:
    n = x.shape[0]
    c1_in = im2col(x)
    a1 = np.maximum(c1_in @ p.w1 + p.b1, 0).reshape(n, 8, 8, 8)
    p1, m1 = maxpool(a1)
    c2_in = im2col(p1)
    a2 = np.maximum(c2_in @ p.w2 + p.b2, 0).reshape(n, 4, 4, 16)
    p2, m2 = maxpool(a2)
    flat = p2.reshape(n, 64)
    logits = flat @ p.w3 + p.b3
    return logits, dict(c1_in=c1_in, a1=a1, m1=m1, p1=p1, c2_in=c2_in, a2=a2, m2=m2, flat=flat)


def backward(p: Params, cache: dict, dlogits: np.ndarray) -> dict[str, np.ndarray]:
    n = dlogits.shape[0]
    g = {"w3": cache["flat"].T @ dlogits, "b3": dlogits.sum(0)}
    dp2 = (dlogits @ p.w3.T).reshape(n, 2, 2, 16)
    da2 = (cache["m2"] * dp2[:, :, None, :, None, :]).reshape(n, 4, 4, 16) * (cache["a2"] > 0)
    da2 = da2.reshape(-1, 16)
    g["w2"], g["b2"] = cache["c2_in"].T @ da2, da2.sum(0)
    dp1 = col2im(da2 @ p.w2.T, (n, 4, 4, 8))
    da1 = (cache["m1"] * dp1[:, :, None, :, None, :]).reshape(n, 8, 8, 8) * (cache["a1"] > 0)
    da1 = da1.reshape(-1, 8)
    g["w1"], g["b1"] = cache["c1_in"].T @ da1, da1.sum(0)
    return g


def train(x: np.ndarray, y: np.ndarray) -> Params:
    rng = np.random.default_rng(SEED)
    p = Params.init(rng)
    m = {k: np.zeros_like(getattr(p, k)) for k in p.names()}
    v = {k: np.zeros_like(getattr(p, k)) for k in p.names()}
    step = 0
    for _ in range(EPOCHS):
        order = rng.permutation(len(x))
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            logits, cache = forward(p, x[idx])
            prob = np.exp(logits - logits.max(1, keepdims=True))
            prob /= prob.sum(1, keepdims=True)
            prob[np.arange(len(idx)), y[idx]] -= 1.0          # d(cross-entropy)/d(logits)
            grads = backward(p, cache, prob / len(idx))
            step += 1
            for k in p.names():                                 # Adam
                m[k] = 0.9 * m[k] + 0.1 * grads[k]
                v[k] = 0.999 * v[k] + 0.001 * grads[k] ** 2
                update = LEARNING_RATE * (m[k] / (1 - 0.9 ** step)) / (
                    np.sqrt(v[k] / (1 - 0.999 ** step)) + 1e-8)
                setattr(p, k, (getattr(p, k) - update).astype(np.float32))
    return p


# ---- post-training int8 quantization, TFLite conventions --------------------------

@dataclass
class QTensor:
    name: str
    shape: tuple[int, ...]
    dtype: str                          # "int8" | "int32"
    scale: np.ndarray
    zero_point: np.ndarray
    data: np.ndarray | None = None      # constants only
    axis: int = 0


def activation(name: str, shape: tuple[int, ...], lo: float, hi: float) -> QTensor:
    """Asymmetric int8 over [lo, hi] widened to contain 0, as the converter does."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0
    zp = int(np.clip(np.round(-128 - lo / scale), -128, 127))
    return QTensor(name, shape, "int8", np.array([scale]), np.array([zp]))


def conv_weights(name: str, w: np.ndarray, cin: int) -> QTensor:
    """(9*cin, cout) trained layout -> TFLite (cout, 3, 3, cin), per-channel symmetric."""
    w = w.reshape(3, 3, cin, -1).transpose(3, 0, 1, 2)
    scale = np.maximum(np.abs(w).reshape(w.shape[0], -1).max(1), 1e-9) / 127.0
    q = np.clip(np.round(w / scale[:, None, None, None]), -127, 127).astype(np.int8)
    return QTensor(name, q.shape, "int8", scale, np.zeros_like(scale, np.int64), q, axis=0)


def bias(name: str, b: np.ndarray, input_scale: float, weight_scale: np.ndarray) -> QTensor:
    scale = input_scale * weight_scale
    q = np.round(b / scale).astype(np.int32)
    return QTensor(name, q.shape, "int32", scale, np.zeros_like(scale, np.int64), q, axis=0)


def quantize(p: Params, calib: np.ndarray) -> list[QTensor]:
    logits, cache = forward(p, calib)
    x = QTensor("input", (1, 8, 8, 1), "int8", np.array([INPUT_SCALE]), np.array([INPUT_ZERO_POINT]))
    a1 = activation("conv1", (1, 8, 8, 8), 0.0, float(cache["a1"].max()))
    pool1 = QTensor("pool1", (1, 4, 4, 8), "int8", a1.scale, a1.zero_point)
    a2 = activation("conv2", (1, 4, 4, 16), 0.0, float(cache["a2"].max()))
    pool2 = QTensor("pool2", (1, 2, 2, 16), "int8", a2.scale, a2.zero_point)
    out = activation("logits", (1, 10), float(logits.min()), float(logits.max()))

    w1 = conv_weights("conv1/weights", p.w1, 1)
    w2 = conv_weights("conv2/weights", p.w2, 8)
    w3f = p.w3.T                                                 # TFLite FC: (out, in)
    s3 = np.array([max(np.abs(w3f).max(), 1e-9) / 127.0])
    w3 = QTensor("fc/weights", w3f.shape, "int8", s3, np.zeros(1, np.int64),
                 np.clip(np.round(w3f / s3[0]), -127, 127).astype(np.int8))
    return [x, w1, bias("conv1/bias", p.b1, x.scale[0], w1.scale), a1, pool1,
            w2, bias("conv2/bias", p.b2, pool1.scale[0], w2.scale), a2, pool2,
            w3, bias("fc/bias", p.b3, pool2.scale[0], s3), out]


# ---- the .tflite flatbuffer -------------------------------------------------------

# (op, builtin code, input tensor ids, output tensor ids); tensor ids index quantize()'s list.
OPS = [
    ("CONV_2D", [0, 1, 2], [3]),
    ("MAX_POOL_2D", [3], [4]),
    ("CONV_2D", [4, 5, 6], [7]),
    ("MAX_POOL_2D", [7], [8]),
    ("FULLY_CONNECTED", [8, 9, 10], [11]),
]
OP_VERSIONS = {"CONV_2D": 3, "MAX_POOL_2D": 2, "FULLY_CONNECTED": 4}


def write_tflite(tensors: list[QTensor]) -> bytes:
    import flatbuffers
    import tflite

    b = flatbuffers.Builder(4096)

    def int_vector(start, values, prepend):
        start(b, len(values))
        for v in reversed(values):
            prepend(v)
        return b.EndVector()

    def offsets(start, items):
        start(b, len(items))
        for o in reversed(items):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    # Buffers: 0 is the empty sentinel; each constant gets its own, 16-byte aligned.
    buffer_offsets, buffer_index = [], []
    tflite.BufferStart(b)
    buffer_offsets.append(tflite.BufferEnd(b))
    for t in tensors:
        if t.data is None:
            buffer_index.append(0)
            continue
        raw = np.ascontiguousarray(t.data).astype(t.data.dtype.newbyteorder("<")).tobytes()
        b.StartVector(1, len(raw), 16)
        b.head = b.head - len(raw)
        b.Bytes[b.head:b.head + len(raw)] = raw
        data = b.EndVector()
        tflite.BufferStart(b)
        tflite.BufferAddData(b, data)
        buffer_index.append(len(buffer_offsets))
        buffer_offsets.append(tflite.BufferEnd(b))

    tensor_offsets = []
    for t, buf in zip(tensors, buffer_index):
        name = b.CreateString(t.name)
        shape = int_vector(tflite.TensorStartShapeVector, list(t.shape), b.PrependInt32)
        scale = int_vector(tflite.QuantizationParametersStartScaleVector,
                           [float(s) for s in t.scale], b.PrependFloat32)
        zp = int_vector(tflite.QuantizationParametersStartZeroPointVector,
                        [int(z) for z in t.zero_point], b.PrependInt64)
        tflite.QuantizationParametersStart(b)
        tflite.QuantizationParametersAddScale(b, scale)
        tflite.QuantizationParametersAddZeroPoint(b, zp)
        tflite.QuantizationParametersAddQuantizedDimension(b, t.axis)
        quant = tflite.QuantizationParametersEnd(b)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        tflite.TensorAddType(b, tflite.TensorType.INT8 if t.dtype == "int8" else tflite.TensorType.INT32)
        tflite.TensorAddBuffer(b, buf)
        tflite.TensorAddName(b, name)
        tflite.TensorAddQuantization(b, quant)
        tensor_offsets.append(tflite.TensorEnd(b))

    op_names = list(dict.fromkeys(op for op, _, _ in OPS))
    code_offsets = []
    for op in op_names:
        code = getattr(tflite.BuiltinOperator, op)
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
        tflite.OperatorCodeAddBuiltinCode(b, code)
        tflite.OperatorCodeAddVersion(b, OP_VERSIONS[op])
        code_offsets.append(tflite.OperatorCodeEnd(b))

    op_offsets = []
    for op, ins, outs in OPS:
        if op == "CONV_2D":
            tflite.Conv2DOptionsStart(b)
            tflite.Conv2DOptionsAddPadding(b, tflite.Padding.SAME)
            tflite.Conv2DOptionsAddStrideW(b, 1)
            tflite.Conv2DOptionsAddStrideH(b, 1)
            tflite.Conv2DOptionsAddDilationWFactor(b, 1)
            tflite.Conv2DOptionsAddDilationHFactor(b, 1)
            tflite.Conv2DOptionsAddFusedActivationFunction(b, tflite.ActivationFunctionType.RELU)
            options, options_type = tflite.Conv2DOptionsEnd(b), tflite.BuiltinOptions.Conv2DOptions
        elif op == "MAX_POOL_2D":
            tflite.Pool2DOptionsStart(b)
            tflite.Pool2DOptionsAddPadding(b, tflite.Padding.VALID)
            tflite.Pool2DOptionsAddStrideW(b, 2)
            tflite.Pool2DOptionsAddStrideH(b, 2)
            tflite.Pool2DOptionsAddFilterWidth(b, 2)
            tflite.Pool2DOptionsAddFilterHeight(b, 2)
            options, options_type = tflite.Pool2DOptionsEnd(b), tflite.BuiltinOptions.Pool2DOptions
        else:
            tflite.FullyConnectedOptionsStart(b)
            tflite.FullyConnectedOptionsAddKeepNumDims(b, False)
            options = tflite.FullyConnectedOptionsEnd(b)
            options_type = tflite.BuiltinOptions.FullyConnectedOptions
        inputs = int_vector(tflite.OperatorStartInputsVector, ins, b.PrependInt32)
        outputs = int_vector(tflite.OperatorStartOutputsVector, outs, b.PrependInt32)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, op_names.index(op))
        tflite.OperatorAddInputs(b, inputs)
        tflite.OperatorAddOutputs(b, outputs)
        tflite.OperatorAddBuiltinOptionsType(b, options_type)
        tflite.OperatorAddBuiltinOptions(b, options)
        op_offsets.append(tflite.OperatorEnd(b))

    sg_tensors = offsets(tflite.SubGraphStartTensorsVector, tensor_offsets)
    sg_inputs = int_vector(tflite.SubGraphStartInputsVector, [0], b.PrependInt32)
    sg_outputs = int_vector(tflite.SubGraphStartOutputsVector, [len(tensors) - 1], b.PrependInt32)
    sg_ops = offsets(tflite.SubGraphStartOperatorsVector, op_offsets)
    sg_name = b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, sg_tensors)
    tflite.SubGraphAddInputs(b, sg_inputs)
    tflite.SubGraphAddOutputs(b, sg_outputs)
    tflite.SubGraphAddOperators(b, sg_ops)
    tflite.SubGraphAddName(b, sg_name)
    subgraph = tflite.SubGraphEnd(b)

    codes = offsets(tflite.ModelStartOperatorCodesVector, code_offsets)
    subgraphs = offsets(tflite.ModelStartSubgraphsVector, [subgraph])
    buffers = offsets(tflite.ModelStartBuffersVector, buffer_offsets)
    description = b.CreateString("kiln example: digits CNN, numpy-trained, int8")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes)
    tflite.ModelAddSubgraphs(b, subgraphs)
    tflite.ModelAddDescription(b, description)
    tflite.ModelAddBuffers(b, buffers)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def quantize_input(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x / INPUT_SCALE) + INPUT_ZERO_POINT, -128, 127).astype(np.int8)


def tflm_accuracy(model: bytes, x_q: np.ndarray, y: np.ndarray) -> float | None:
    """Accuracy of the written model under the tflite-micro interpreter, if installed."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        return None
    interp = runtime.Interpreter.from_bytes(model)
    hits = 0
    for xi, yi in zip(x_q, y):
        interp.set_input(xi[None], 0)
        interp.invoke()
        hits += int(np.argmax(interp.get_output(0)) == yi)
    return hits / len(y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "digits"))
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)

    x_train, x_test, y_train, y_test = load_digits_split()
    params = train(x_train, y_train)
    float_acc = float(np.mean(np.argmax(forward(params, x_test)[0], 1) == y_test))
    model = write_tflite(quantize(params, x_train))
    x_test_q = quantize_input(x_test)

    (out / "digits_int8.tflite").write_bytes(model)
    np.save(out / "digits_test_x.npy", x_test_q)
    np.save(out / "digits_test_y.npy", y_test.astype(np.uint8))
    int8_acc = tflm_accuracy(model, x_test_q, y_test)
    int8 = f"{int8_acc:.2%}" if int8_acc is not None else "n/a (tflite-micro not installed)"
    print(f"wrote {out}/digits_int8.tflite ({len(model):,} B), digits_test_x.npy, "
          f"digits_test_y.npy ({len(y_test)} samples)")
    print(f"test accuracy: float {float_acc:.2%}, int8 (tflite-micro) {int8}")


if __name__ == "__main__":
    main()
