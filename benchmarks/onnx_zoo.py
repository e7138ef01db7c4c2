"""ONNX models kiln's tests never saw: real PyTorch architectures exported by torch.onnx.

Run as a PyTorch user would: `torch.onnx.export` (the TorchScript exporter at opsets 13
and 17, random weights from a fixed seed, BatchNorm running statistics set away from
0/1 so that folding them matters), then kiln's CLI on each file:

- `kiln info model.onnx` (the reader's verdict: a model kiln refuses is one line naming
  the op or attribute);
- `kiln quantize model.onnx --calibration calib.npy -o model.tflite`, then `kiln run
  model.tflite --input test.npy --output out.npz` on the host: SQNR of kiln's int8 outputs
  against onnxruntime running the float model, and top-1 agreement, on 32 test inputs
  (half uniform noise, half smooth "structured" images / sequences) that the 64
  calibration samples do not include;
- the exported .tflite in tflite-micro (tests/reference.py run_reference) = kiln, bit for
  bit, on every test input;
- the float model quantized by onnxruntime's `quantize_static` (QDQ, after its
  `quant_pre_process`; per-channel int8 and per-tensor uint8 activations) → `kiln run
  model_qdq.onnx` against onnxruntime running the QDQ model, both fed the same integers:
  the fraction of output elements within 1 LSB and the largest difference;
- a dynamic-batch export (dynamic_axes) pinned with `--input-shape`;
- the same module through torch's default (dynamo) exporter, opset 18 and newer, its
  weights in an external data file: the table's "dynamo" rows.

The corpus is written to a cache folder (default ~/.cache/kiln/onnx_zoo) by whichever
Python has torch: this one, or the one given with `--torch-python` (torch stays out of
kiln's environment). Without torch it says how to install it. Prints one table.

    python benchmarks/onnx_zoo.py --torch-python /tmp/torchvenv/bin/python [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
KILN = [str(Path(sys.executable).with_name("kiln"))]   # the CLI beside this Python
N_CALIB, N_TEST = 64, 32

INSTALL = """torch is not importable here. Install it in a venv of its own (not kiln's), e.g.
    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch torchvision onnx onnxscript
then run  python benchmarks/onnx_zoo.py --torch-python /tmp/torchvenv/bin/python
(torchvision's wheel must match torch's: a CPU-only torch needs a CPU torchvision build)."""


# --------------------------------------------------------------------------------------
# The corpus (runs under the torch interpreter only)
# --------------------------------------------------------------------------------------

def _corpus():
    """name -> (factory, input shape, kind) with kind 'image', 'audio', 'seq' or 'vec'."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision.models as tvm

    class AudioCNN(nn.Module):          # 1-D: Conv1d / BatchNorm1d / MaxPool1d
        def __init__(self):
            super().__init__()
            c = [1, 8, 16, 16]
            self.f = nn.Sequential(*[m for i in range(3) for m in (
                nn.Conv1d(c[i], c[i + 1], 5, padding=2), nn.BatchNorm1d(c[i + 1]), nn.ReLU(),
                nn.MaxPool1d(2))])
            self.fc = nn.Linear(16, 6)

        def forward(self, x):
            return self.fc(self.f(x).mean(-1))

    class DSCNN(nn.Module):             # keyword spotting: 49 MFCC frames x 10
        def __init__(self, c=32):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, c, (10, 4), (2, 2), (5, 1)),
                                      nn.BatchNorm2d(c), nn.ReLU())
            self.blocks = nn.Sequential(*[nn.Sequential(
                nn.Conv2d(c, c, 3, 1, 1, groups=c), nn.BatchNorm2d(c), nn.ReLU(),
                nn.Conv2d(c, c, 1), nn.BatchNorm2d(c), nn.ReLU()) for _ in range(4)])
            self.fc = nn.Linear(c, 12)

        def forward(self, x):
            x = self.blocks(self.stem(x))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    class Recurrent(nn.Module):         # sequence classifier, batch_first
        def __init__(self, cell):
            super().__init__()
            self.rnn = cell(10, 16, batch_first=True)
            self.fc = nn.Linear(16, 5)

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.fc(y[:, -1])

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 32), nn.Tanh(),
                                   nn.Linear(32, 10))

        def forward(self, x):
            return self.f(x)

    class MBConvSiLU(nn.Module):        # EfficientNet-B0's block: expand, dw, SE, project
        def __init__(self, cin, cout, expand, stride):
            super().__init__()
            mid = cin * expand
            self.res = stride == 1 and cin == cout
            self.f = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU(),
                nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid),
                nn.SiLU())
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(mid, max(1, cin // 4), 1),
                                    nn.SiLU(), nn.Conv2d(max(1, cin // 4), mid, 1), nn.Sigmoid())
            self.p = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.f(x)
            y = self.p(y * self.se(y))
            return x + y if self.res else y

    class EffNetLike(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16),
                                      nn.SiLU())
            self.blocks = nn.Sequential(MBConvSiLU(16, 16, 1, 1), MBConvSiLU(16, 24, 4, 2),
                                        MBConvSiLU(24, 24, 4, 1), MBConvSiLU(24, 40, 4, 2))
            self.head = nn.Sequential(nn.Conv2d(40, 64, 1), nn.BatchNorm2d(64), nn.SiLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2),
                                      nn.Linear(64, 10))

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)))

    class UNet(nn.Module):              # ConvTranspose2d, nearest and bilinear, torch.cat
        def __init__(self):
            super().__init__()
            def cbr(a, b):
                return nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU())
            self.e1, self.e2, self.e3 = cbr(3, 8), cbr(8, 16), cbr(16, 32)
            self.up3 = nn.ConvTranspose2d(32, 16, 2, stride=2)
            self.d2 = cbr(32, 16)
            self.d1 = cbr(16 + 8, 8)
            self.out = nn.Conv2d(8 + 8, 4, 1)

        def forward(self, x):
            a = self.e1(x)                              # 32
            b = self.e2(F.max_pool2d(a, 2))             # 16
            c = self.e3(F.max_pool2d(b, 2))             # 8
            d = self.d2(torch.cat([self.up3(c), b], 1))  # 16
            e = self.d1(torch.cat([F.interpolate(d, scale_factor=2, mode="bilinear",
                                                 align_corners=False), a], 1))
            f = F.interpolate(F.max_pool2d(e, 2), scale_factor=2, mode="nearest")
            return self.out(torch.cat([e, f], 1))

    class Misc(nn.Module):              # PReLU, F.pad, view/flatten, chunk/split, mean(dims)
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, stride=2)
            self.p1 = nn.PReLU(16)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            self.c3 = nn.Conv2d(8, 8, 1)
            self.p2 = nn.PReLU()
            self.fc = nn.Linear(16 + 16, 7)

        def forward(self, x):
            x = self.p1(self.c1(F.pad(x, (1, 0, 1, 0))))
            a, b = torch.chunk(x, 2, dim=1)
            a = self.p2(self.c2(a))
            b1, b2 = torch.split(self.c3(b), [3, 5], dim=1)
            y = torch.cat([a, b2, b1], 1)
            m = y.mean(dim=(2, 3))
            v = y.view(y.shape[0], 16, -1).amax(-1)
            return self.fc(torch.cat([m, v], 1).flatten(1))

    class ShuffleBlock(nn.Module):      # one ShuffleNetV2 unit: split, shuffle
        def __init__(self, c=24):
            super().__init__()
            h = c // 2
            self.b = nn.Sequential(nn.Conv2d(h, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU(),
                                   nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False),
                                   nn.BatchNorm2d(h), nn.Conv2d(h, h, 1, bias=False),
                                   nn.BatchNorm2d(h), nn.ReLU())

        def forward(self, x):
            a, b = x.chunk(2, dim=1)
            y = torch.cat((a, self.b(b)), 1)
            n, c, h, w = y.shape
            return y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)

    class MBv3Block(nn.Module):         # MobileNetV3's block: hardswish, SE with hardsigmoid
        def __init__(self, c=16, mid=48):
            super().__init__()
            self.e = nn.Sequential(nn.Conv2d(c, mid, 1, bias=False), nn.BatchNorm2d(mid),
                                   nn.Hardswish(),
                                   nn.Conv2d(mid, mid, 3, 1, 1, groups=mid, bias=False),
                                   nn.BatchNorm2d(mid), nn.Hardswish())
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(mid, 12, 1), nn.ReLU(),
                                    nn.Conv2d(12, mid, 1), nn.Hardsigmoid())
            self.p = nn.Sequential(nn.Conv2d(mid, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            y = self.e(x)
            return x + self.p(y * self.se(y))

    class TinyViT(nn.Module):           # patch embedding, LayerNorm, attention, GELU
        def __init__(self, d=32):
            super().__init__()
            self.embed = nn.Conv2d(3, d, 8, 8)
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            self.head = nn.Linear(d, 10)

        def forward(self, x):
            t = self.embed(x).flatten(2).transpose(1, 2)          # [N, 16, d]
            q, k, v = self.qkv(self.norm1(t)).chunk(3, dim=-1)
            a = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
            t = t + self.proj(a @ v)
            t = t + self.mlp(self.norm2(t))
            return self.head(t.mean(1))

    class BiGRU(nn.Module):             # bidirectional: two directions, concatenated
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(10, 16, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(32, 5)

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.fc(y[:, -1])

    img = (1, 3, 64, 64)
    return {
        "mobilenet_v2": (lambda: tvm.mobilenet_v2(num_classes=10, width_mult=0.35), img, "image"),
        "mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(num_classes=10), img, "image"),
        "mnasnet0_5": (lambda: tvm.mnasnet0_5(num_classes=10), img, "image"),
        "shufflenet_v2_x0_5": (lambda: tvm.shufflenet_v2_x0_5(num_classes=10), img, "image"),
        "squeezenet1_1": (lambda: tvm.squeezenet1_1(num_classes=10), img, "image"),
        "resnet18": (lambda: tvm.resnet18(num_classes=10), img, "image"),
        "effnet_silu": (EffNetLike, img, "image"),
        "shuffle_block": (ShuffleBlock, (1, 24, 16, 16), "image"),
        "audio_cnn1d": (AudioCNN, (1, 1, 128), "audio"),
        "ds_cnn_kws": (DSCNN, (1, 1, 49, 10), "image"),
        "lstm": (lambda: Recurrent(nn.LSTM), (1, 12, 10), "seq"),
        "gru": (lambda: Recurrent(nn.GRU), (1, 12, 10), "seq"),
        "mlp": (MLP, (1, 64), "vec"),
        "unet": (UNet, (1, 3, 32, 32), "image"),
        "misc_ops": (Misc, (1, 3, 31, 31), "image"),
        # added later: appended, so that the seeds (the position) of the others stay
        "mbv3_block": (MBv3Block, (1, 16, 16, 16), "image"),
        "tiny_vit": (TinyViT, (1, 3, 32, 32), "image"),
        "bigru": (BiGRU, (1, 12, 10), "seq"),
    }


def _randomize(model, seed: int) -> None:
    """Fixed-seed weights; BatchNorm statistics and affine parameters away from 0 and 1 so
    that folding them changes the weights (a fresh BatchNorm is the identity)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.3)
            m.running_var.copy_(torch.rand(n, generator=g) * 1.5 + 0.25)
            m.weight.data.copy_(torch.rand(n, generator=g) * 1.0 + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=g) * 0.2)
    model.eval()


def export(cache: Path, only: list[str]) -> None:
    """Writes <cache>/<name>_op<13|17>.onnx, a dynamic-batch <name>_dyn.onnx and the
    dynamo exporter's <name>_dynamo.onnx."""
    import torch
    cache.mkdir(parents=True, exist_ok=True)
    for i, (name, (factory, shape, _)) in enumerate(_corpus().items()):
        if only and name not in only:
            continue
        torch.manual_seed(1000 + i)
        model = factory()
        _randomize(model, 2000 + i)
        x = torch.randn(*shape)
        for opset in (13, 17):
            torch.onnx.export(model, (x,), str(cache / f"{name}_op{opset}.onnx"), dynamo=False,
                              opset_version=opset, input_names=["x"], output_names=["y"])
        torch.onnx.export(model, (x,), str(cache / f"{name}_dyn.onnx"), dynamo=False,
                          opset_version=17, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        try:    # torch's default exporter since 2.9 (opset 18+, weights as external data)
            torch.onnx.export(model, (x,), str(cache / f"{name}_dynamo.onnx"), dynamo=True,
                              input_names=["x"], output_names=["y"], verbose=False)
        except Exception as e:     # onnxscript missing, or the exporter's own failure
            print(f"{name}: the dynamo exporter failed: {type(e).__name__}: {e}"[:300],
                  file=sys.stderr)
        print(f"exported {name}", file=sys.stderr)
    (cache / "corpus.json").write_text(json.dumps(
        {n: {"shape": list(s), "kind": k} for n, (_, s, k) in _corpus().items()}))


# --------------------------------------------------------------------------------------
# The check (runs under kiln's interpreter)
# --------------------------------------------------------------------------------------

def samples(shape, kind: str, n: int, seed: int) -> np.ndarray:
    """n samples of one input, [n, *shape[1:]]: half uniform noise in [-2, 2], half smooth
    signals (sums of random low-frequency waves plus a ramp), both in the range a
    BatchNorm'd network sees."""
    rng = np.random.default_rng(seed)
    per = tuple(shape[1:])
    noise = rng.uniform(-2, 2, size=(n - n // 2, *per))
    grids = np.meshgrid(*[np.linspace(0, 1, d) for d in per], indexing="ij")
    smooth = []
    for _ in range(n // 2):
        s = np.zeros(per)
        for _ in range(3):
            f = rng.uniform(0.5, 3, size=len(per)) * (np.arange(len(per)) > 0)  # not across C
            s += rng.uniform(0.3, 1) * np.sin(sum(fi * 2 * np.pi * g for fi, g in zip(f, grids))
                                              + rng.uniform(0, 6.3))
        s += rng.uniform(-1, 1) * grids[-1]
        smooth.append(s)
    return np.concatenate([noise, np.array(smooth).reshape(-1, *per)]).astype(np.float32)


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(np.sum((ref.astype(np.float64) - got) ** 2))
    signal = float(np.sum(ref.astype(np.float64) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(signal / noise)


def kiln(*args, cwd: Path) -> tuple[int, str]:
    p = subprocess.run([*KILN, *map(str, args)], cwd=cwd, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def one_line(text: str) -> str:
    """The line that says why, from kiln's output (or the last line of a traceback)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    err = [ln for ln in lines if ln.startswith("kiln: error:")]
    return (err or lines or ["(no output)"])[-1][:300]


def _quant(tflite_or_graph):
    from kiln.compiler import load
    g = load(tflite_or_graph)
    return g.tensor(g.inputs[0]).quant.single(), g.tensor(g.outputs[0]).quant.single(), g


def _to_int8(x, sz):
    s, z = sz
    return np.clip(np.round(x / np.float32(s)) + z, -128, 127).astype(np.int8)


def _tflm(model: bytes, qx: np.ndarray, y: np.ndarray) -> bool:
    sys.path.insert(0, str(REPO / "tests"))
    from reference import run_reference
    return all(np.array_equal(run_reference(model, [qx[i:i + 1]])[0].reshape(y[i:i + 1].shape),
                              y[i:i + 1]) for i in range(len(qx)))


def ort_session(path: Path):
    import onnxruntime as ort
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def run_samples(tfl: Path, qx: np.ndarray, work: Path, stateful: bool):
    """`kiln run` on the host: kiln's int8 outputs for each sample (or the error line).
    N stacked samples run one after the other in one process, as firmware runs them: a
    stateful model (an LSTM keeps its state, as in tflite-micro) gets one run a sample,
    so each sequence starts from zero as in onnxruntime."""
    ys = []
    for part in ([qx[i:i + 1] for i in range(len(qx))] if stateful else [qx]):
        np.save(work / "qx.npy", part)
        rc, out = kiln("run", tfl, "--input", work / "qx.npy", "--output", work / "y.npz", cwd=work)
        if rc:
            return None, one_line(out)
        ys.append(np.load(work / "y.npz")["output_0"])
    return np.concatenate(ys), None


def check_float(path: Path, calib, test, work: Path, stateful: bool = False) -> dict:
    """kiln quantize + kiln run on the host vs onnxruntime's float outputs; TFLM bit-exact."""
    tfl = work / (path.stem + ".tflite")
    tfl.unlink(missing_ok=True)
    np.save(work / "calib.npy", calib)
    rc, out = kiln("quantize", path, "--calibration", work / "calib.npy", "-o", tfl, cwd=work)
    if rc:
        return {"verdict": "quantize: " + one_line(out)}
    in_q, out_q, _ = _quant(tfl)
    qx = _to_int8(test, in_q)
    y, err = run_samples(tfl, qx, work, stateful)
    if err:
        return {"verdict": "run: " + err}
    sess = ort_session(path)
    want = np.concatenate([sess.run(None, {"x": t[None]})[0] for t in test])
    got = (y.astype(np.float32) - out_q[1]) * np.float32(out_q[0])
    got = got.reshape(want.shape)
    return {"verdict": "ok", "sqnr": sqnr_db(want, got),
            "top1": float(np.mean(np.argmax(want, 1) == np.argmax(got, 1))),
            "tflm": _tflm(tfl.read_bytes(), qx, y), "kiln_ops": len(_quant(tfl)[2].ops)}


class _Reader:
    def __init__(self, xs):
        self.items = iter([{"x": x[None]} for x in xs])

    def get_next(self):
        return next(self.items, None)


def check_qdq(path: Path, calib, test, work: Path, per_channel: bool, act: str,
              stateful: bool = False) -> dict:
    """onnxruntime's quantize_static (QDQ) → kiln quantize (as it is) → kiln run vs
    onnxruntime running the QDQ model on the same integers; TFLM on kiln's export."""
    from onnxruntime import quantization as q
    from onnxruntime.quantization.shape_inference import quant_pre_process
    pre = work / (path.stem + "_pre.onnx")
    qdq = work / (path.stem + f"_qdq_{act}{int(per_channel)}.onnx")
    try:
        import onnx
        if path.with_name(path.name + ".data").exists():  # the dynamo exporter's weights:
            inline = work / (path.stem + "_inline.onnx")  # onnxruntime's pre-processing
            onnx.save(onnx.load(str(path)), str(inline))  # looks for them beside its output
            path = inline
        quant_pre_process(str(path), str(pre), skip_symbolic_shape=True)
        q.quantize_static(str(pre), str(qdq), _Reader(calib), quant_format=q.QuantFormat.QDQ,
                          per_channel=per_channel, activation_type=getattr(q.QuantType, act),
                          weight_type=q.QuantType.QInt8)
    except Exception as e:      # onnxruntime's own failure: not kiln's
        return {"verdict": f"onnxruntime quantize_static failed: {type(e).__name__}: {e}"[:200]}
    tfl = work / (qdq.stem + ".tflite")
    tfl.unlink(missing_ok=True)
    rc, out = kiln("quantize", qdq, "-o", tfl, cwd=work)
    if rc:
        return {"verdict": "quantize: " + one_line(out)}
    in_q, out_q, _ = _quant(tfl)
    qx = _to_int8(test, in_q)
    y, err = run_samples(tfl, qx, work, stateful)
    if err:
        return {"verdict": "run: " + err}
    sess = ort_session(qdq)
    # The real value of each integer: onnxruntime quantizes it back to the same one.
    x = ((qx.astype(np.float32) - in_q[1]) * np.float32(in_q[0])).astype(np.float32)
    want = np.concatenate([sess.run(None, {"x": t[None]})[0] for t in x])
    want_q = np.clip(np.round(want / np.float32(out_q[0])) + out_q[1], -128, 127)
    d = np.abs(y.astype(np.int64).reshape(-1) - want_q.astype(np.int64).reshape(-1))
    return {"verdict": "ok", "within1": float(np.mean(d <= 1)), "max": int(d.max()),
            "top1": float(np.mean(np.argmax(want_q.reshape(want.shape), 1)
                                  == np.argmax(y.reshape(want.shape), 1))),
            "tflm": _tflm(tfl.read_bytes(), qx, y)}


def check_dynamic(path: Path, shape, calib, work: Path) -> str:
    """Refused without --input-shape (one line naming the flag), quantized with it."""
    tfl = work / (path.stem + ".tflite")
    tfl.unlink(missing_ok=True)
    np.save(work / "calib.npy", calib)
    rc, out = kiln("quantize", path, "--calibration", work / "calib.npy", "-o", tfl, cwd=work)
    if rc != 2 or "--input-shape" not in out or "Traceback" in out:
        return "unpinned: " + one_line(out)
    pin = "x=" + ",".join(map(str, shape))
    rc, out = kiln("quantize", path, "--input-shape", pin, "--calibration", work / "calib.npy",
                   "-o", tfl, cwd=work)
    return "ok" if rc == 0 else "pinned: " + one_line(out)


def evaluate(cache: Path, only: list[str], qdq: bool) -> list[dict]:
    import onnx
    corpus = json.loads((cache / "corpus.json").read_text())
    work = cache / "work"
    work.mkdir(exist_ok=True)
    rows = []
    for i, (name, info) in enumerate(corpus.items()):
        if only and name not in only:
            continue
        shape, kind = info["shape"], info["kind"]
        calib = samples(shape, kind, N_CALIB, 100 + i)
        test = samples(shape, kind, N_TEST, 200 + i)
        for opset in (13, 17, "dynamo"):
            path = cache / f"{name}_{'dynamo' if opset == 'dynamo' else f'op{opset}'}.onnx"
            if not path.exists():
                continue
            t0 = time.time()
            nodes = len(onnx.load(str(path), load_external_data=False).graph.node)
            rc, out = kiln("info", path, cwd=work)
            row = {"model": name, "opset": opset, "nodes": nodes}
            if rc:
                row["verdict"] = "info: " + one_line(out)
            else:
                row.update(check_float(path, calib, test, work, name == "lstm"))
            if qdq and row["verdict"] == "ok":
                for pc, act in ((True, "QInt8"), (False, "QUInt8")):
                    row[f"qdq_{'pc' if pc else 'pt'}_{act}"] = check_qdq(path, calib, test, work,
                                                                        pc, act, name == "lstm")
            if opset == 17 and row["verdict"] == "ok" and (cache / f"{name}_dyn.onnx").exists():
                row["dynamic"] = check_dynamic(cache / f"{name}_dyn.onnx", shape, calib, work)
            row["seconds"] = round(time.time() - t0, 1)
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def _qdq_cell(r: dict | None) -> str:
    if r is None:
        return "-"
    if r["verdict"] != "ok":
        return r["verdict"][:60]
    return (f"{100 * r['within1']:.1f}%≤1 max {r['max']} top1 {100 * r['top1']:.0f}%"
            f"{'' if r['tflm'] else ' TFLM DIFFERS'}")


def table(rows: list[dict]) -> str:
    head = ["model", "opset", "ONNX nodes→kiln ops", "kiln verdict", "SQNR dB", "top-1",
            "tflite-micro", "QDQ per-channel int8", "QDQ per-tensor uint8", "dynamic batch"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ok = r["verdict"] == "ok"
        lines.append("| " + " | ".join([
            r["model"], str(r["opset"]),
            f"{r['nodes']}→{r['kiln_ops']}" if ok else str(r["nodes"]),
            r["verdict"],
            f"{r['sqnr']:.1f}" if ok else "-",
            f"{100 * r['top1']:.0f}%" if ok else "-",
            ("bit-exact" if r["tflm"] else "DIFFERS") if ok else "-",
            _qdq_cell(r.get("qdq_pc_QInt8")), _qdq_cell(r.get("qdq_pt_QUInt8")),
            r.get("dynamic", "")]) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path,
                    default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                    / "kiln" / "onnx_zoo")
    ap.add_argument("--torch-python", help="a Python with torch/torchvision to export with")
    ap.add_argument("--only", action="append", default=[], help="one model (repeat)")
    ap.add_argument("--no-qdq", action="store_true", help="skip onnxruntime's QDQ models")
    ap.add_argument("--export-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.export_only or not (args.cache / "corpus.json").exists():
        try:
            import torch  # noqa: F401
            export(args.cache, args.only)
        except ImportError:
            if not args.torch_python:
                print(INSTALL, file=sys.stderr)
                return 1
            cmd = [args.torch_python, __file__, "--export-only", "--cache", str(args.cache)]
            subprocess.run(cmd + [a for n in args.only for a in ("--only", n)], check=True)
        if args.export_only:
            return 0
    rows = evaluate(args.cache, args.only, not args.no_qdq)
    print(table(rows))
    why = {v for r in rows for v in [r["verdict"], *(r[k]["verdict"] for k in r
                                                    if k.startswith("qdq_"))] if v != "ok"}
    for line in sorted(why):        # the refusals in full (the table cuts them)
        print("-", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
