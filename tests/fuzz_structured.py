"""Structured fuzzing: valid-looking models with hostile shapes and parameters.

Unlike tests/test_fuzz_models.py (byte flips of real models), every model here is a
well-formed flatbuffer built with tests/tflite_builder.py: one op of every type kiln
supports, or a chain of 2-5 ops, whose shapes, options, quantization and constant data
are drawn from a seeded generator that mostly picks ordinary values and sometimes
hostile ones (rank 0 or 9, dims 0 or 2^31-1, products that wrap int32/int64, strides
and dilations of 2^30+1, zero points beyond int8/int32, scales of 0, -1, denormals,
inf and nan, axes out of range, gather indices out of range, ...). Output shapes are
derived from the drawn parameters the way TFLite does, so a hostile value reaches the
check that should catch it instead of bouncing off a shape mismatch.

The driver (`run_fuzz`) compiles every model with `kiln.compiler.compile(load(path),
board="host")` in worker subprocesses (a crash or hang is caught and pinned to one
model), then builds the generated C of each model that compiles with ASan + UBSan
(kernels built once per run, linked into each model's executable) and runs it on
random input bytes. Outcomes:

    compiled     compiled; its C built and ran clean under the sanitizers
    rejected     a KilnError (one line): the intended answer to a hostile model
    skipped      compiled, but its arena or I/O is too large to run here
    traceback    any other exception in compile                      (failure)
    crash        the compiler process died on a signal               (failure)
    hang         compile exceeded its timeout                        (failure)
    cbuild       the generated C does not build (-Werror)            (failure)
    sanitizer    an ASan/UBSan report, a signal or a timeout at run  (failure)
    status       kiln_run returned non-zero on a model kiln accepted (failure)

Used by tests/test_fuzz_structured.py (short budget) and benchmarks/fuzz_structured.py.
Run directly as a worker: `python fuzz_structured.py --worker DIR` (reads model ids on
stdin).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tflite_builder import OpSpec, TensorSpec, build_model  # noqa: E402

FAILURES = ("traceback", "crash", "hang", "cbuild", "sanitizer", "status")

# --------------------------------------------------------------------------- hostile values

I32_MAX, I32_MIN = 2**31 - 1, -2**31
# Dims: empty, unit, large, and the edges of int16/int32 index arithmetic.
HOSTILE_DIMS = [0, 1, 1, 255, 65536, 46341, 2**23 + 1, 2**24 - 1, 2**24, 2**24 + 1, 2**30 + 1,
                I32_MAX, -1, I32_MIN]
# Shapes whose element count sits near or past 2^31 / 2^63 (each dim fits int32).
WRAP_SHAPES = [(46341, 46341), (2**16, 2**15), (2**21, 2**21, 2**21), (I32_MAX, I32_MAX, 2),
               (2**31 - 1, 2**31 - 1, 2**31 - 1), (1, 2**16, 2**16, 1), (1, 2**31 - 1, 2, 1),
               (3, 1431655766), (2**8, 2**8, 2**8, 2**8), (1, 2**20, 2**12, 1),
               # every dim within a 2^24 cap, the product past 2^31, 2^32 or 2^63
               (2**24, 2**7), (2**24, 2**8, 1), (1, 2**12, 2**12, 2**7), (2**24, 2**24),
               (2**24, 2**24, 2**24), (2**16, 2**16, 2**16, 2**16), (1, 2**24, 2**24, 1),
               (1, 46341, 46341, 1), (1, 2**15, 2**16, 1)]
HOSTILE_INTS = [0, -1, -2, 2**15, 2**16 + 1, 2**30 + 1, I32_MAX, I32_MIN, -2**30]
HOSTILE_FLOATS = [0.0, -0.0, -1.0, 1e-45, 1.2e-38, 1e-30, 1e30, 3.4e38, float("inf"),
                  -float("inf"), float("nan"), 2.0**31, 2.0**-32]
HOSTILE_ZPS = [-129, 128, 255, 256, -32769, 32768, I32_MAX, I32_MIN, 2**40, -2**63, 2**63 - 1]
ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
HOSTILE_ACTS = ["TANH", "SIGN_BIT", 6, 99, -1]
HOSTILE_NAMES = ["*/\n#error injected\n/*", "a\"b\\c", "\n", "x" * 5000, "é€\u202e",
                 "??/", "#define memcpy", ""]


# Kinds of hostile draw. A model focuses on one (mostly), so a bad option is not always
# preceded by a bad shape that the reader refuses first.
CATEGORIES = frozenset({"param", "shape", "quant", "graph", "dtype", "name"})
FOCUS_WEIGHTS = {"param": 0.5, "shape": 0.2, "quant": 0.15, "graph": 0.08, "dtype": 0.04,
                 "name": 0.03}


class Draw:
    """The random source: ordinary values, and with probability `hostility` per draw a
    hostile one. `hostility` 0 gives a model TFLite itself would accept."""

    def __init__(self, rng: np.random.Generator, hostility: float, budget: int = 1 << 30,
                 focus: frozenset[str] = CATEGORIES, targets: frozenset[int] | None = None):
        self.rng = rng
        self.hostility = hostility
        self.focus = focus              # which kinds of draw may turn hostile (CATEGORIES)
        # Targeted mode: the draws of the focus kind are counted and those numbered in
        # `targets` turn hostile, so the bad value lands on any option with even odds
        # (sequential coin flips would mostly spend it on the first ones drawn).
        self.targets = targets
        self.count = 0
        self.budget = budget            # hostile draws left: one bad value per model mostly,
                                        # so each reaches its own check, not the first one
        self.notes: list[str] = []      # what was made hostile, for the finding reports

    def hostile(self, what: str = "", weight: float = 1.0, cat: str = "param") -> bool:
        if cat not in self.focus:
            return False
        if self.targets is not None:
            self.count += 1
            fire = self.count - 1 in self.targets
        else:
            fire = self.rng.random() < self.hostility * weight
        if fire and self.budget > 0:
            self.budget -= 1
            if what:
                self.notes.append(what)
            return True
        return False

    def pick(self, seq: list) -> Any:
        return seq[int(self.rng.integers(0, len(seq)))]

    def int(self, lo: int, hi: int) -> int:
        """Uniform in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def param(self, what: str, lo: int, hi: int, hostile: list[int] | None = None) -> int:
        """An integer option: in [lo, hi], or hostile."""
        if self.hostile():
            # half extreme values, half odd-but-plausible ones (past the usual range,
            # within what a range check might let through to the kernel)
            v = int(self.pick(hostile or HOSTILE_INTS)) if self.rng.random() < 0.7 \
                else self.int(hi, 64)
            self.notes.append(f"{what}={v}")
            return v
        return self.int(lo, hi)

    def dim(self, lo: int = 1, hi: int = 6) -> int:
        if self.hostile(weight=0.5, cat="shape"):
            v = int(self.pick(HOSTILE_DIMS)) if self.bool() else self.int(hi, 300)
            self.notes.append(f"dim={v}")
            return v
        return self.int(lo, hi)

    def shape(self, rank_lo: int = 1, rank_hi: int = 4, lo: int = 1, hi: int = 6) -> tuple:
        if self.hostile("wrap-shape", 0.15, cat="shape"):
            return tuple(self.pick(WRAP_SHAPES))
        rank = self.int(rank_lo, rank_hi)
        if self.hostile(weight=0.2, cat="shape"):
            rank = int(self.pick([0, 5, 6, 7, 9, 16]))
            self.notes.append(f"rank={rank}")
        return tuple(self.dim(lo, hi) for _ in range(rank))

    def scale(self) -> float:
        if self.hostile(weight=0.5, cat="quant"):
            v = float(self.pick(HOSTILE_FLOATS))
            self.notes.append(f"scale={v}")
            return v
        return float(np.float32(np.exp(self.rng.uniform(np.log(0.004), np.log(0.5)))))

    def zp(self, dtype: str = "int8") -> int:
        if self.hostile(weight=0.5, cat="quant"):
            v = int(self.pick(HOSTILE_ZPS))
            self.notes.append(f"zp={v}")
            return v
        lo, hi = {"int8": (-128, 127), "uint8": (0, 255), "int16": (0, 0)}.get(dtype, (0, 0))
        return self.int(lo, hi)

    def real(self, what: str, lo: float, hi: float) -> float:
        if self.hostile():
            v = float(self.pick(HOSTILE_FLOATS))
            self.notes.append(f"{what}={v}")
            return v
        return float(np.float32(self.rng.uniform(lo, hi)))

    def act(self, allowed: list[str] | None = None) -> Any:
        if self.hostile(weight=0.3):
            v = self.pick(HOSTILE_ACTS)
            self.notes.append(f"activation={v}")
            return v
        return self.pick(allowed or ACTIVATIONS)

    def dtype(self) -> str:
        if self.hostile("dtype", 0.5, cat="dtype"):
            return self.pick(["int16", "int32", "uint8", "float32", "int64", "bool"])
        return "int8"

    def bool(self) -> bool:
        return bool(self.rng.random() < 0.5)


# --------------------------------------------------------------------------- graph builder


def _count(shape: tuple) -> int:
    """Element count as a Python int (big, never wraps); negative dims count as 0."""
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


# Constants larger than this get a small buffer and a shape that lies about it (a
# hostile model in its own right: the buffer is shorter than the shape says).
MAX_CONST_ELEMS = 1 << 16


class GraphBuilder:
    """Tensors and ops of one model; the op builders below append to it."""

    def __init__(self, d: Draw):
        self.d = d
        self.tensors: list[TensorSpec] = []
        self.ops: list[OpSpec] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        # data-dependent checks: random input bytes may make kiln_run refuse (GATHER
        # indices from a model input); a non-zero status is then the right answer
        self.runtime_checked = False
        self.no_outputs = False

    def _name(self) -> str:
        if self.d.hostile("name", 0.1, cat="name"):
            return self.d.pick(HOSTILE_NAMES)
        return ""

    def add(self, spec: TensorSpec) -> int:
        if not spec.name:
            spec.name = self._name()
        self.tensors.append(spec)
        return len(self.tensors) - 1

    def quant(self, dtype: str) -> dict:
        """Per-tensor quantization for an activation (none for float/bool; rarely none or
        per-channel for int8: both hostile)."""
        if dtype in ("float32", "bool"):
            return {}
        if self.d.hostile("no-quant", 0.1, cat="quant"):
            return {}
        if self.d.hostile("multi-scale", 0.05, cat="quant"):
            return {"scale": [self.d.scale(), self.d.scale()], "zero_point": [0, 0]}
        return {"scale": self.d.scale(), "zero_point": self.d.zp(dtype)}

    def act(self, shape: tuple, dtype: str = "int8", q: dict | None = None) -> int:
        """A non-constant activation tensor (an op output, or a model input)."""
        return self.add(TensorSpec(tuple(shape), dtype, **(self.quant(dtype) if q is None else q)))

    def input(self, shape: tuple, dtype: str = "int8", q: dict | None = None) -> int:
        t = self.act(shape, dtype, q)
        self.inputs.append(t)
        return t

    def const(self, values: Any, dtype: str = "int32", shape: tuple | None = None,
              **quant: Any) -> int:
        data = np.asarray(values)
        if shape is None:
            shape = data.shape
        if _count(shape) > MAX_CONST_ELEMS or any(int(s) < 0 for s in shape):
            spec = TensorSpec((1,), dtype, data=np.zeros(1), **quant)
            spec.shape = tuple(int(s) for s in shape)        # the lie: see MAX_CONST_ELEMS
            self.d.notes.append("const-shape-lie")
            return self.add(spec)
        shape = tuple(int(s) for s in shape)
        data = np.asarray(np.resize(data, shape) if data.size else np.zeros(shape))
        if np.dtype(data.dtype).kind in "iu" and dtype != "bool":
            # Clip into the target dtype so hostile ints stay what the dtype can hold.
            info = np.iinfo(np.dtype(DT[dtype]))
            data = np.asarray(np.clip(data.astype(object), info.min, info.max)).astype(np.int64)
        return self.add(TensorSpec(tuple(int(s) for s in shape), dtype, data=data, **quant))

    def q_of(self, t: int) -> dict:
        s = self.tensors[t]
        return {} if s.scale is None else {"scale": s.scale, "zero_point": s.zero_point}

    def shape(self, t: int) -> tuple:
        return self.tensors[t].shape

    def dtype(self, t: int) -> str:
        return self.tensors[t].dtype

    def op(self, name: str, inputs: list[int], outputs: list[int], options: dict | None = None,
           ) -> None:
        self.ops.append(OpSpec(name, inputs, outputs, dict(options or {})))

    def out(self, shape: tuple, dtype: str = "int8", q: dict | None = None) -> int:
        """An op's output tensor; sometimes its shape is off by one dim (hostile)."""
        shape = tuple(int(s) for s in shape)
        if shape and self.d.hostile("out-shape", 0.1, cat="shape"):
            i = self.d.int(0, len(shape) - 1)
            shape = shape[:i] + (shape[i] + self.d.pick([1, -1, 7, 2**31 - 1 - shape[i]]),) \
                + shape[i + 1:]
            shape = tuple(max(I32_MIN, min(I32_MAX, s)) for s in shape)
        return self.act(shape, dtype, q)

    def model(self) -> bytes:
        outs = self.outputs or ([] if self.no_outputs else [self.ops[-1].outputs[0]])
        return build_model(self.ops, self.tensors, self.inputs, outs)


DT = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
      "uint8": np.uint8, "float32": np.float32, "bool": np.bool_}


def _clamp32(v: int) -> int:
    return max(I32_MIN, min(I32_MAX, int(v)))


def _rand_data(d: Draw, shape: tuple, dtype: str) -> np.ndarray:
    n = min(_count(shape), MAX_CONST_ELEMS)
    if dtype == "float32":
        return d.rng.standard_normal(n).astype(np.float32)
    if dtype == "bool":
        return d.rng.integers(0, 2, n).astype(np.bool_)
    info = np.iinfo(DT[dtype])
    return d.rng.integers(max(info.min, -2**40), min(info.max, 2**40), n, endpoint=True)


# --------------------------------------------------------------------------- op builders
# Each builder takes the graph, the draw and the tensor it consumes (x, already in the
# graph) and returns the tensor it produces. Builders of ops that need a certain rank say
# so in RANK (the chain driver reshapes to it).

Builder = Callable[[GraphBuilder, Draw, int], int]
BUILDERS: dict[str, Builder] = {}
RANK: dict[str, int] = {}


def builder(*names: str, rank: int | None = None):
    def reg(fn):
        for n in names:
            BUILDERS[n] = fn
            if rank is not None:
                RANK[n] = rank
        return fn
    return reg


def _same_q(g: GraphBuilder, x: int) -> dict:
    """Output quantization equal to the input's (data movement), or hostile."""
    if g.d.hostile("requant", 0.3, cat="quant"):
        return g.quant(g.dtype(x))
    return g.q_of(x)


def _axis(d: Draw, rank: int, extra: int = 0) -> int:
    """An axis in [-rank-extra, rank+extra-1], or hostile."""
    if d.hostile():
        v = int(d.pick([rank + extra, -rank - extra - 1, I32_MAX, I32_MIN, 64]))
        d.notes.append(f"axis={v}")
        return v
    r = max(rank + extra, 1)
    return d.int(-r, r - 1)


def _norm(axis: int, rank: int) -> int:
    return axis % rank if rank > 0 and -rank <= axis < rank else 0


@builder("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")
def _binary(g: GraphBuilder, d: Draw, x: int, op: str = "ADD") -> int:
    xs = g.shape(x)
    if d.rng.random() < 0.1:
        y = x                                               # the same tensor twice
    else:
        ys = tuple(s if d.rng.random() < 0.7 else 1 for s in xs)
        if ys and d.rng.random() < 0.3:
            ys = ys[d.int(0, len(ys)):]                     # fewer leading dims
        if d.hostile("broadcast-mismatch", 0.4):
            ys = tuple(s + 1 for s in ys) or (3,)
        if d.rng.random() < 0.3:
            y = g.const(_rand_data(d, ys, g.dtype(x)), g.dtype(x), ys, **g.quant(g.dtype(x)))
        else:
            y = g.input(ys, g.dtype(x))
    try:
        out = np.broadcast_shapes(tuple(max(s, 0) for s in xs),
                                  tuple(max(s, 0) for s in g.shape(y)))
    except ValueError:
        out = xs
    opts = {}
    if op in ("ADD", "SUB", "MUL"):
        opts["fused_activation_function"] = d.act()
    q = g.q_of(x) if op in ("MAXIMUM", "MINIMUM") and not d.hostile() else None
    o = g.out(out, g.dtype(x), q)
    ins = [x, y] if d.rng.random() < 0.7 else [y, x]
    g.op(op, ins, [o], opts)
    return o


_FIXED_OUT_Q = {"LOGISTIC": {"scale": 1 / 256, "zero_point": -128},
                "SOFTMAX": {"scale": 1 / 256, "zero_point": -128},
                "LOG_SOFTMAX": {"scale": 16 / 256, "zero_point": 127},
                "TANH": {"scale": 1 / 128, "zero_point": 0}}


@builder("RELU", "RELU6", "LOGISTIC", "TANH", "HARD_SWISH", "ABS", "RSQRT", "LEAKY_RELU",
         "SOFTMAX", "LOG_SOFTMAX")
def _unary(g: GraphBuilder, d: Draw, x: int, op: str = "RELU") -> int:
    q = None
    if op in _FIXED_OUT_Q and not d.hostile("out-q", 0.5):
        q = dict(_FIXED_OUT_Q[op])
    elif op in ("RELU", "RELU6") and d.rng.random() < 0.4:
        q = g.q_of(x)
    opts = {}
    if op == "LEAKY_RELU":
        opts["alpha"] = d.real("alpha", -1.0, 1.0)
    if op == "SOFTMAX":
        opts["beta"] = d.real("beta", 0.1, 4.0)
    o = g.out(g.shape(x), g.dtype(x), q)
    g.op(op, [x], [o], opts)
    return o


@builder("PRELU")
def _prelu(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    a_shape = xs[-1:] if d.rng.random() < 0.5 else tuple(s if d.bool() else 1 for s in xs)
    if d.hostile("alpha-shape", 0.3):
        a_shape = tuple(s + 2 for s in a_shape) or (5,)
    a = g.const(_rand_data(d, a_shape, "int8"), "int8", a_shape, **g.quant("int8"))
    o = g.out(xs, g.dtype(x))
    g.op("PRELU", [x, a], [o])
    return o


# Strides and dilations: mostly values whose products with a small index overflow int32.
_BIG_STEPS = [0, -1, 2**16, 2**24, 2**30 + 1, 2**30 + 1, I32_MAX, I32_MAX, 46341]


def _conv_out(padding: Any, size: int, k: int, stride: int, dil: int) -> int:
    if stride <= 0:
        return size
    eff = (k - 1) * dil + 1
    if padding == "SAME":
        return (size + stride - 1) // stride
    return (size - eff + stride) // stride


def _weights(g: GraphBuilder, d: Draw, shape: tuple, axis: int) -> int:
    """Constant int8 weights, per-channel along `axis` (or per-tensor), zero point 0 unless
    hostile."""
    n = shape[axis] if 0 <= axis < len(shape) else 1
    per_channel = d.rng.random() < 0.7 and 0 < n <= 4096
    scales = [d.scale() for _ in range(n)] if per_channel else [d.scale()]
    zps = [0] * len(scales)
    if d.hostile("weight-zp", 0.3, cat="quant"):
        zps[0] = d.zp()
    if d.hostile("scale-count", 0.1, cat="quant"):
        scales, zps = scales + [0.1], zps + [0]
    return g.const(_rand_data(d, shape, "int8"), "int8", shape, scale=scales, zero_point=zps,
                   quantized_dimension=axis if per_channel else 0)


def _bias(g: GraphBuilder, d: Draw, n: int, x: int) -> int:
    if d.hostile("no-bias", 0.3):
        return -1
    if d.hostile("bias-length", 0.2):
        n = n + 3
    shape = (max(n, 0),)
    data = d.rng.integers(-5000, 5000, min(max(n, 0), MAX_CONST_ELEMS))
    if d.hostile("bias-extreme", 0.3):
        data = np.resize(np.array([I32_MAX, I32_MIN], dtype=np.int64), data.shape)
    dtype = "int32" if not d.hostile("bias-dtype", 0.2) else d.pick(["int64", "int8", "float32"])
    return g.const(data, dtype, shape, scale=d.scale(), zero_point=0)


def _padding(d: Draw) -> Any:
    if d.hostile("padding", 0.2):
        return d.pick([7, -1, 2])
    return d.pick(["SAME", "SAME", "VALID"])   # SAME keeps a huge filter or dilation legal


@builder("CONV_2D", rank=4)
def _conv(g: GraphBuilder, d: Draw, x: int) -> int:
    n, h, w, c = g.shape(x)
    kh, kw = d.param("kh", 1, 4, [0, -1, 2**16, I32_MAX]), d.param("kw", 1, 4, [0, 65536])
    sh, sw = d.param("stride_h", 1, 3, _BIG_STEPS), d.param("stride_w", 1, 3, _BIG_STEPS)
    dh, dw = d.param("dilation_h", 1, 2, _BIG_STEPS), d.param("dilation_w", 1, 2, _BIG_STEPS)
    oc = d.dim(1, 8)
    ic = c if not d.hostile("groups", 0.3) else d.pick([1, max(c // 2, 1), c + 1, 0])
    pad = _padding(d)
    w_t = _weights(g, d, (oc, kh, kw, ic), 0)
    b = _bias(g, d, oc, x)
    out = (n, _conv_out(pad, h, kh, sh, dh), _conv_out(pad, w, kw, sw, dw), oc)
    o = g.out(out)
    g.op("CONV_2D", [x, w_t, b], [o], {"padding": pad, "stride_h": sh, "stride_w": sw,
                                        "dilation_h_factor": dh, "dilation_w_factor": dw,
                                        "fused_activation_function": d.act()})
    return o


@builder("DEPTHWISE_CONV_2D", rank=4)
def _dwconv(g: GraphBuilder, d: Draw, x: int) -> int:
    n, h, w, c = g.shape(x)
    kh, kw = d.param("kh", 1, 5, [0, -1, 2**16, I32_MAX]), d.param("kw", 1, 5, [0, 65536])
    sh, sw = d.param("stride_h", 1, 3, _BIG_STEPS), d.param("stride_w", 1, 3, _BIG_STEPS)
    dh, dw = d.param("dilation_h", 1, 2, _BIG_STEPS), d.param("dilation_w", 1, 2, _BIG_STEPS)
    mult = d.param("depth_multiplier", 1, 3, [0, -1, 2**16, I32_MAX])
    oc = c * mult if not d.hostile("dw-channels", 0.2) else c + 1
    pad = _padding(d)
    w_t = _weights(g, d, (1, kh, kw, oc), 3)
    b = _bias(g, d, oc, x)
    o = g.out((n, _conv_out(pad, h, kh, sh, dh), _conv_out(pad, w, kw, sw, dw), oc))
    g.op("DEPTHWISE_CONV_2D", [x, w_t, b], [o],
         {"padding": pad, "stride_h": sh, "stride_w": sw, "depth_multiplier": mult,
          "dilation_h_factor": dh, "dilation_w_factor": dw, "fused_activation_function": d.act()})
    return o


@builder("FULLY_CONNECTED")
def _fc(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    depth = xs[-1] if xs else 1
    if d.hostile("fc-depth", 0.2):
        depth = d.pick([depth + 1, 0, 2**20])
    units = d.dim(1, 10)
    w_t = _weights(g, d, (units, depth), 0)
    b = _bias(g, d, units, x)
    keep = d.rng.random() < 0.3
    batch = _count(xs) // depth if depth > 0 else 0
    out = tuple(xs[:-1]) + (units,) if keep else (batch, units)
    o = g.out(tuple(_clamp32(v) for v in out))
    g.op("FULLY_CONNECTED", [x, w_t, b], [o],
         {"keep_num_dims": keep, "fused_activation_function": d.act()})
    return o


@builder("TRANSPOSE_CONV", rank=4)
def _tconv(g: GraphBuilder, d: Draw, x: int) -> int:
    n, h, w, c = g.shape(x)
    kh, kw = d.param("kh", 1, 4, [0, -1, 2**16]), d.param("kw", 1, 4, [0, I32_MAX])
    sh, sw = d.param("stride_h", 1, 3, _BIG_STEPS), d.param("stride_w", 1, 3, _BIG_STEPS)
    oc = d.dim(1, 6)
    pad = _padding(d)
    if pad == "SAME":
        oh, ow = h * sh, w * sw
    else:
        oh, ow = (h - 1) * sh + kh, (w - 1) * sw + kw
    out = tuple(_clamp32(v) for v in (n, oh, ow, oc))
    spec = list(out)
    if d.hostile("output_shape-lie", 0.3):
        spec[d.int(0, 3)] = d.pick([0, -1, I32_MAX, spec[1] + 5])
    shape_t = g.const(spec, "int32", (4,))
    w_t = _weights(g, d, (oc, kh, kw, c), 0)
    ins = [shape_t, w_t, x]
    if d.rng.random() < 0.6:
        ins.append(_bias(g, d, oc, x))
    o = g.out(out)
    opts = {"padding": pad, "stride_h": sh, "stride_w": sw}
    if d.rng.random() < 0.3:
        opts["fused_activation_function"] = d.act()
    g.op("TRANSPOSE_CONV", ins, [o], opts)
    return o


@builder("AVERAGE_POOL_2D", "MAX_POOL_2D", rank=4)
def _pool(g: GraphBuilder, d: Draw, x: int, op: str = "MAX_POOL_2D") -> int:
    n, h, w, c = g.shape(x)
    fh = d.param("filter_h", 1, 4, [0, -1, 256, 257, 2**16, 2**20, I32_MAX])
    fw = d.param("filter_w", 1, 4, [0, 256, 2**16, I32_MAX])
    sh, sw = d.param("stride_h", 1, 3, _BIG_STEPS), d.param("stride_w", 1, 3, _BIG_STEPS)
    pad = _padding(d)
    o = g.out((n, _conv_out(pad, h, fh, sh, 1), _conv_out(pad, w, fw, sw, 1), c),
              g.dtype(x), _same_q(g, x))
    g.op(op, [x], [o], {"padding": pad, "stride_h": sh, "stride_w": sw, "filter_height": fh,
                        "filter_width": fw, "fused_activation_function": d.act()})
    return o


@builder("MEAN", "SUM", "REDUCE_MAX")
def _reduce(g: GraphBuilder, d: Draw, x: int, op: str = "MEAN") -> int:
    xs = g.shape(x)
    r = len(xs)
    axes = sorted(set(d.int(0, max(r - 1, 0)) for _ in range(d.int(1, max(r, 1)))))
    axes = [a - r if d.rng.random() < 0.3 else a for a in axes]
    if d.hostile("axes", 0.4):
        axes = axes + [d.pick([r, -r - 1, I32_MAX, axes[0] if axes else 0])]
    keep = d.bool()
    red = {a % r for a in axes if r and -r <= a < r}
    out = tuple((1 if i in red else s) for i, s in enumerate(xs) if keep or i not in red)
    a = g.const(axes, "int32", (len(axes),) if d.rng.random() < 0.8 else None)
    q = _same_q(g, x) if op == "REDUCE_MAX" else None
    o = g.out(out, g.dtype(x), q)
    g.op(op, [x, a], [o], {"keep_dims": keep})
    return o


@builder("ARG_MAX", "ARG_MIN")
def _arg(g: GraphBuilder, d: Draw, x: int, op: str = "ARG_MAX") -> int:
    xs = g.shape(x)
    axis = _axis(d, len(xs))
    a = _norm(axis, len(xs))
    out_t = d.pick(["int32", "int32", "int64"])
    at = g.const([axis], d.pick(["int32", "int32", "int64"]))
    o = g.out(tuple(s for i, s in enumerate(xs) if i != a), out_t, {})
    g.op(op, [x, at], [o], {"output_type": out_t})
    return o


@builder("CONCATENATION")
def _concat(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    r = len(xs)
    axis = _axis(d, r)
    a = _norm(axis, r)
    ins, total = [x], xs[a] if r else 1
    for _ in range(d.int(0, 3) if not d.hostile("many-inputs", 0.2) else d.int(8, 12)):
        s = list(xs)
        if r:
            s[a] = d.dim(1, 4)
            total += s[a]
        if d.hostile("concat-mismatch", 0.2) and r:
            s[(a + 1) % r] += 1
        ins.append(g.const(_rand_data(d, tuple(s), g.dtype(x)), g.dtype(x), tuple(s),
                           **_same_q(g, x)) if d.rng.random() < 0.3
                   else g.input(tuple(s), g.dtype(x), _same_q(g, x)))
    out = list(xs)
    if r:
        out[a] = _clamp32(total)
    o = g.out(tuple(out), g.dtype(x), _same_q(g, x))
    g.op("CONCATENATION", ins, [o], {"axis": axis, "fused_activation_function": d.act(["NONE"])})
    return o


@builder("PACK")
def _pack(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    n = d.int(1, 4) if not d.hostile("many-inputs", 0.2) else d.int(9, 12)
    ins = [x] + [g.input(xs, g.dtype(x), _same_q(g, x)) for _ in range(n - 1)]
    axis = _axis(d, len(xs), extra=1)
    a = axis % (len(xs) + 1) if -len(xs) - 1 <= axis <= len(xs) else 0
    count = n if not d.hostile("values_count", 0.3) else d.pick([n + 1, 0, -1])
    o = g.out(xs[:a] + (n,) + xs[a:], g.dtype(x), _same_q(g, x))
    g.op("PACK", ins, [o], {"values_count": count, "axis": axis})
    return o


@builder("UNPACK")
def _unpack(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    axis = _axis(d, len(xs))
    a = _norm(axis, len(xs))
    num = xs[a] if xs else 1
    if d.hostile("num", 0.3):
        num = d.pick([num + 1, 0, -1, I32_MAX])
    rest = xs[:a] + xs[a + 1:]
    outs = [g.out(rest, g.dtype(x), _same_q(g, x)) for _ in range(max(0, min(num, 8)))]
    g.op("UNPACK", [x], outs, {"num": num, "axis": axis})
    g.outputs.extend(outs[1:])
    return outs[0] if outs else x


@builder("SPLIT")
def _split(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    axis = _axis(d, len(xs))
    a = _norm(axis, len(xs))
    n = d.int(1, 3)
    if xs and xs[a] > 0 and xs[a] % n:
        n = 1
    if d.hostile("num_splits", 0.3):
        n = d.pick([n + 1, 0, -1, 5])
    part = list(xs)
    if xs and n > 0:
        part[a] = xs[a] // n
    outs = [g.out(tuple(part), g.dtype(x), _same_q(g, x)) for _ in range(max(0, min(n, 8)))]
    at = g.const([axis], "int32", (1,) if d.bool() else ())
    g.op("SPLIT", [at, x], outs, {"num_splits": n})
    g.outputs.extend(outs[1:])
    return outs[0] if outs else x


@builder("SPLIT_V")
def _split_v(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    axis = _axis(d, len(xs))
    a = _norm(axis, len(xs))
    size = xs[a] if xs else 1
    cut = sorted(set([0, size] + [d.int(0, max(size, 0)) for _ in range(d.int(0, 2))]))
    sizes = [b - a_ for a_, b in zip(cut, cut[1:])] or [size]
    spec = list(sizes)
    if len(spec) > 1 and d.rng.random() < 0.3:
        spec[d.int(0, len(spec) - 1)] = -1
    if d.hostile("size_splits", 0.4):
        spec[d.int(0, len(spec) - 1)] = d.pick([-2, -1, I32_MAX, size + 1, 0])
    outs = []
    for s in sizes:
        p = list(xs)
        if xs:
            p[a] = s
        outs.append(g.out(tuple(p), g.dtype(x), _same_q(g, x)))
    g.op("SPLIT_V", [x, g.const(spec, "int32"), g.const([axis], "int32")], outs,
         {"num_splits": len(outs)})
    g.outputs.extend(outs[1:])
    return outs[0]


@builder("PAD", "PADV2", "MIRROR_PAD")
def _pad(g: GraphBuilder, d: Draw, x: int, op: str = "PAD") -> int:
    xs = g.shape(x)
    pads = []
    for s in xs:
        hi = max(s - 1, 0) if op == "MIRROR_PAD" else 3
        pads.append([d.int(0, min(hi, 3)), d.int(0, min(hi, 3))])
    if d.hostile("paddings", 0.4) and pads:
        i = d.int(0, len(pads) - 1)
        pads[i][d.int(0, 1)] = d.pick([-1, -5, I32_MAX, 2**30, max(xs[i], 0) + 1, 2**16])
    out = tuple(_clamp32(s + p[0] + p[1]) for s, p in zip(xs, pads))
    pshape = (len(pads), 2) if not d.hostile("paddings-shape", 0.15) else \
        d.pick([(len(pads) + 1, 2), (len(pads), 3), (2 * len(pads),)])
    pt = g.const(np.array(pads, dtype=np.int64).reshape(-1) if pads else [],
                 d.pick(["int32", "int32", "int64"]), pshape)
    ins = [x, pt]
    opts: dict = {}
    if op == "PADV2":
        cshape = d.pick([(), (1,)]) if not d.hostile("constant_values", 0.3) else (2,)
        ins.append(g.const([d.int(-128, 127)], g.dtype(x), cshape, **_same_q(g, x)))
    if op == "MIRROR_PAD":
        opts["mode"] = d.pick(["REFLECT", "SYMMETRIC"]) if not d.hostile("mode", 0.2) else 7
    o = g.out(out, g.dtype(x), _same_q(g, x))
    g.op(op, ins, [o], opts)
    return o


def _factor_shape(d: Draw, count: int) -> tuple:
    """A random shape with `count` elements."""
    dims, left = [], count
    while left > 1 and len(dims) < 5:
        divs = [k for k in range(2, min(left, 64) + 1) if left % k == 0] or [left]
        k = d.pick(divs)
        dims.append(k)
        left //= k
    if left > 1:
        dims.append(left)
    d.rng.shuffle(dims)
    return tuple(int(v) for v in dims) or (count,)


@builder("RESHAPE")
def _reshape(g: GraphBuilder, d: Draw, x: int) -> int:
    count = _count(g.shape(x))
    out = _factor_shape(d, count) if 0 < count < 2**31 else g.shape(x)
    spec = list(out)
    if spec and d.rng.random() < 0.3:
        spec[d.int(0, len(spec) - 1)] = -1
    if d.hostile("reshape-spec", 0.4):
        spec = d.pick([spec + [-1, -1] if spec else [-1, -1], [0] + spec, [count + 1],
                       [-2] + spec, [I32_MAX, I32_MAX, 2]])
    ins = [x]
    opts: dict = {}
    how = d.int(0, 2)
    if how in (0, 2):
        ins.append(g.const(spec, "int32", (len(spec),)))
    if how in (1, 2):
        opts["new_shape"] = spec
    o = g.out(out, g.dtype(x), _same_q(g, x))
    g.op("RESHAPE", ins, [o], opts)
    return o


@builder("EXPAND_DIMS")
def _expand(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    axis = _axis(d, len(xs), extra=1)
    a = axis % (len(xs) + 1) if -len(xs) - 1 <= axis <= len(xs) else 0
    o = g.out(xs[:a] + (1,) + xs[a:], g.dtype(x), _same_q(g, x))
    g.op("EXPAND_DIMS", [x, g.const([axis], "int32", (1,) if d.bool() else ())], [o])
    return o


@builder("SQUEEZE")
def _squeeze(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    ones = [i for i, s in enumerate(xs) if s == 1]
    dims = [i for i in ones if d.bool()]
    if d.hostile("squeeze_dims", 0.4):
        dims = dims + [d.pick([len(xs), -len(xs) - 1, 0, I32_MAX])]
    drop = {i % len(xs) for i in dims if xs and -len(xs) <= i < len(xs)} if dims else set(ones)
    o = g.out(tuple(s for i, s in enumerate(xs) if i not in drop), g.dtype(x), _same_q(g, x))
    g.op("SQUEEZE", [x], [o], {"squeeze_dims": dims} if dims or d.bool() else {})
    return o


@builder("TRANSPOSE")
def _transpose(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    perm = [int(p) for p in d.rng.permutation(len(xs))]
    if d.hostile("perm", 0.4):
        perm = d.pick([perm + [0], perm[:-1], [0] * len(perm), [p + 1 for p in perm],
                       [I32_MAX] + perm[1:]]) or [1]
    out = tuple(xs[p] if 0 <= p < len(xs) else 1 for p in perm)
    o = g.out(out, g.dtype(x), _same_q(g, x))
    g.op("TRANSPOSE", [x, g.const(perm, "int32", (len(perm),))], [o])
    return o


@builder("SLICE")
def _slice(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    begin = [d.int(0, max(s - 1, 0)) for s in xs]
    size = [d.int(1, max(s - b, 1)) if d.rng.random() < 0.8 else -1 for s, b in zip(xs, begin)]
    if d.hostile("slice", 0.5) and xs:
        i = d.int(0, len(xs) - 1)
        if d.bool():
            begin[i] = d.pick([-1, xs[i], xs[i] + 1, I32_MAX, I32_MIN])
        else:
            size[i] = d.pick([xs[i] + 1, -2, 0, I32_MAX])
    out = tuple(_clamp32(s - b if z == -1 else z) for s, b, z in zip(xs, begin, size))
    it = d.pick(["int32", "int32", "int64"])
    o = g.out(out, g.dtype(x), _same_q(g, x))
    g.op("SLICE", [x, g.const(begin, it, (len(xs),)), g.const(size, it, (len(xs),))], [o])
    return o


def _strided_len(dim: int, b: int, e: int, s: int, bm: bool, em: bool) -> int:
    """TFLite's strided-slice extent on one axis (no ellipsis/new-axis)."""
    if s == 0 or dim < 0:
        return 0
    if s > 0:
        b = 0 if bm else (b + dim if b < 0 else b)
        e = dim if em else (e + dim if e < 0 else e)
        b, e = max(0, min(b, dim)), max(0, min(e, dim))
        return max(0, -(-(e - b) // s))
    b = dim - 1 if bm else (b + dim if b < 0 else b)
    e = -1 if em else (e + dim if e < 0 else e)
    b, e = max(-1, min(b, dim - 1)), max(-1, min(e, dim - 1))
    return max(0, -(-(b - e) // -s))


@builder("STRIDED_SLICE")
def _strided_slice(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    r = len(xs)
    begin = [d.int(-max(s, 1), max(s, 1)) for s in xs]
    end = [d.int(-max(s, 1), max(s, 1)) for s in xs]
    strides = [d.pick([1, 1, 2, 3, -1, -2]) for _ in xs]
    if d.hostile("strides", 0.4) and r:
        strides[d.int(0, r - 1)] = d.pick([0, I32_MIN, I32_MAX, -I32_MAX])
    if d.hostile("begin-end", 0.3) and r:
        begin[d.int(0, r - 1)] = d.pick([I32_MAX, I32_MIN])
        end[d.int(0, r - 1)] = d.pick([I32_MAX, I32_MIN])
    bm, em = d.int(0, 2**r - 1) if r else 0, d.int(0, 2**r - 1) if r else 0
    shrink = 0
    if r and d.rng.random() < 0.3:
        i = d.int(0, r - 1)
        shrink = 1 << i
        begin[i], end[i], strides[i] = min(begin[i], xs[i] - 1), begin[i] + 1, 1
        bm &= ~shrink
        em &= ~shrink
    opts = {"begin_mask": bm, "end_mask": em, "shrink_axis_mask": shrink}
    if d.hostile("masks", 0.3):
        opts[d.pick(["ellipsis_mask", "new_axis_mask", "begin_mask", "shrink_axis_mask"])] = \
            d.pick([1, 3, 2**31 - 1, -1])
    if d.hostile("offset", 0.1):
        opts["offset"] = True
    out = [_strided_len(s, b, e, st, bool(bm >> i & 1), bool(em >> i & 1))
           for i, (s, b, e, st) in enumerate(zip(xs, begin, end, strides)) if not shrink >> i & 1]
    o = g.out(tuple(out), g.dtype(x), _same_q(g, x))
    g.op("STRIDED_SLICE", [x, g.const(begin), g.const(end), g.const(strides)], [o], opts)
    return o


@builder("GATHER")
def _gather(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    r = len(xs)
    axis = _axis(d, r)
    a = _norm(axis, r)
    bd = 0
    if d.rng.random() < 0.2 and a > 0:
        bd = d.int(0, a)
    if d.hostile("batch_dims", 0.2):
        bd = d.pick([-1, r, a + 1, I32_MAX])
    idx_shape = tuple(xs[:max(0, min(bd, r))]) + tuple(d.int(1, 4) for _ in range(d.int(0, 2)))
    dim = xs[a] if xs else 1
    idx = d.rng.integers(0, max(dim, 1), min(max(_count(idx_shape), 1), MAX_CONST_ELEMS))
    if d.hostile("index-range", 0.6) and idx.size:
        idx[d.int(0, idx.size - 1)] = d.pick([-1, dim, dim + 1, I32_MAX, I32_MIN, 2**16])
    it = d.pick(["int32", "int32", "int64", "int16"])
    if d.rng.random() < 0.25 and idx_shape:
        i_t = g.input(idx_shape, it, {})           # runtime indices: random bytes in C
        g.runtime_checked = True
    else:
        i_t = g.const(idx, it, idx_shape)
    b = max(0, min(bd, len(idx_shape)))
    out = xs[:a] + idx_shape[b:] + xs[a + 1:]
    o = g.out(out, g.dtype(x), _same_q(g, x))
    g.op("GATHER", [x, i_t], [o], {"axis": axis, "batch_dims": bd})
    return o


@builder("TILE")
def _tile(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    mult = [d.int(1, 3) for _ in xs]
    if d.hostile("multiples", 0.4) and xs:
        mult[d.int(0, len(xs) - 1)] = d.pick([0, -1, I32_MAX, 2**16, 2**30 + 1])
    o = g.out(tuple(_clamp32(s * m) for s, m in zip(xs, mult)), g.dtype(x), _same_q(g, x))
    g.op("TILE", [x, g.const(mult, d.pick(["int32", "int64"]), (len(mult),))], [o])
    return o


@builder("SPACE_TO_DEPTH", "DEPTH_TO_SPACE", rank=4)
def _s2d(g: GraphBuilder, d: Draw, x: int, op: str = "SPACE_TO_DEPTH") -> int:
    n, h, w, c = g.shape(x)
    b = d.param("block_size", 1, 3, [0, -1, 2**16, 46341, I32_MAX])
    if 0 < b <= 3 and not d.hostile("block-fit", 0.3):      # make the input fit the block
        want = (n, h - h % b or b, w - w % b or b, c) if op == "SPACE_TO_DEPTH" else \
            (n, h, w, max(c - c % (b * b), b * b))
        if want != (n, h, w, c):
            x = _to_shape(g, x, want)
            n, h, w, c = want
    if op == "SPACE_TO_DEPTH":
        out = (n, h // b, w // b, c * b * b) if b > 0 else (n, h, w, c)
    else:
        out = (n, h * b, w * b, c // (b * b)) if b > 0 else (n, h, w, c)
    o = g.out(tuple(_clamp32(v) for v in out), g.dtype(x), _same_q(g, x))
    g.op(op, [x], [o], {"block_size": b})
    return o


@builder("SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", rank=4)
def _s2b(g: GraphBuilder, d: Draw, x: int, op: str = "SPACE_TO_BATCH_ND") -> int:
    n, h, w, c = g.shape(x)
    block = [d.int(1, 3), d.int(1, 3)]
    pads = [[d.int(0, 2), d.int(0, 2)], [d.int(0, 2), d.int(0, 2)]]
    if op == "SPACE_TO_BATCH_ND":             # pad up to a multiple of the block
        for i, s in enumerate((h, w)):
            pads[i][1] += (-(s + pads[i][0] + pads[i][1])) % block[i]
    elif n % (block[0] * block[1]) and not d.hostile("batch-fit", 0.3):
        block = [1, 1]
    if op == "BATCH_TO_SPACE_ND":
        for i, s in enumerate((h, w)):
            while pads[i][0] + pads[i][1] >= s * block[i] and pads[i] != [0, 0]:
                pads[i] = [max(pads[i][0] - 1, 0), max(pads[i][1] - 1, 0)]
    if d.hostile("block_shape", 0.4):
        block[d.int(0, 1)] = d.pick([0, -1, 2**16, I32_MAX])
    if d.hostile("pads/crops", 0.4):
        pads[d.int(0, 1)][d.int(0, 1)] = d.pick([-1, I32_MAX, 2**16, h + w + 10])
    if op == "SPACE_TO_BATCH_ND":
        sizes = [h + pads[0][0] + pads[0][1], w + pads[1][0] + pads[1][1]]
        out = [n * block[0] * block[1]] + [s // b if b > 0 else s for s, b in zip(sizes, block)] \
            + [c]
    else:
        prod = block[0] * block[1]
        out = [n // prod if prod > 0 else n, h * block[0] - pads[0][0] - pads[0][1],
               w * block[1] - pads[1][0] - pads[1][1], c]
    o = g.out(tuple(_clamp32(v) for v in out), g.dtype(x), _same_q(g, x))
    g.op(op, [x, g.const(block, "int32", (2,)), g.const(pads, "int32", (2, 2))], [o])
    return o


@builder("REVERSE_V2")
def _reverse(g: GraphBuilder, d: Draw, x: int) -> int:
    rank = len(g.shape(x))
    axis = d.param("axis", -rank, max(rank - 1, 0), [rank, -rank - 1, I32_MAX, I32_MIN])
    o = g.out(g.shape(x), g.dtype(x), _same_q(g, x))
    g.op("REVERSE_V2", [x, g.const([axis], "int32", (1,))], [o])
    return o


@builder("BROADCAST_TO")
def _broadcast_to(g: GraphBuilder, d: Draw, x: int) -> int:
    xs = g.shape(x)
    want = tuple(s if s != 1 else d.int(1, 4) for s in xs)
    if d.bool():
        want = (d.int(1, 3),) + want          # a new leading axis
    if d.hostile("broadcast-shape", 0.4) and want:
        i = d.int(0, len(want) - 1)
        want = want[:i] + (d.pick([0, -1, 2**16, I32_MAX, want[i] + 1]),) + want[i + 1:]
    o = g.out(tuple(_clamp32(v) for v in want), g.dtype(x), _same_q(g, x))
    g.op("BROADCAST_TO", [x, g.const(list(want), d.pick(["int32", "int64"]), (len(want),))], [o])
    return o


def _symmetric(g: GraphBuilder, d: Draw, dtype: str = "int8") -> dict:
    """Weight quantization: symmetric (zero point 0, what the kernels take), or hostile."""
    if d.hostile("weight-q", 0.2, cat="quant"):
        return g.quant(dtype)
    return {"scale": d.scale(), "zero_point": 0}


@builder("SVDF", rank=2)
def _svdf(g: GraphBuilder, d: Draw, x: int) -> int:
    """x (batch, input) int8; int8 feature weights, int16 time weights, int32 bias and an
    int16 state tensor (a variable: the op writes it in place)."""
    b, i = g.shape(x)
    rank = d.param("rank", 1, 2, [0, -1, 2**16, I32_MAX])
    units = d.int(1, 4)
    filters = units * rank if 0 < rank <= 2 else units
    memory = d.param("memory", 1, 5, [0, 2**16, 46341, I32_MAX])
    if d.hostile("filters", 0.2):
        filters = d.pick([0, filters + 1, 2**16])
    wf = g.const(_rand_data(d, (filters, i), "int8"), "int8", (filters, i), **_symmetric(g, d))
    wt = g.const(_rand_data(d, (filters, memory), "int16"), "int16", (filters, memory),
                 **_symmetric(g, d, "int16"))
    bias = -1 if d.bool() else g.const(_rand_data(d, (units,), "int32"), "int32", (units,),
                                       **g.quant("int32"))
    state_shape = (b, _clamp32(filters * memory))
    state = g.add(TensorSpec(state_shape, "int16", variable=True, **g.quant("int16")))
    o = g.out((b, units), "int8")
    g.op("SVDF", [x, wf, wt, bias, state], [o],
         {"rank": rank, "fused_activation_function": d.pick(ACTIVATIONS)})
    return o


@builder("UNIDIRECTIONAL_SEQUENCE_LSTM", rank=3)
def _lstm(g: GraphBuilder, d: Draw, x: int) -> int:
    """x (batch, time, depth) int8 (or time-major); four gates of int8 input and recurrent
    weights and int32 biases; int8 hidden and int16 cell state tensors (variables)."""
    b, t, depth = g.shape(x)
    time_major = d.bool()
    batches = t if time_major else b
    units = d.param("units", 1, 6, [0, 2**16, 46341])
    idx = [x] + [-1] * 23
    x_scale = g.q_of(x).get("scale", 0.05)
    x_scale = x_scale if isinstance(x_scale, float) else 0.05
    for k in range(4):
        for at, shape in ((1 + k, (units, depth)), (5 + k, (units, units))):
            wq = _symmetric(g, d)
            idx[at] = g.const(_rand_data(d, shape, "int8"), "int8", shape, **wq)
        bq = ({"scale": float(np.float32(x_scale) * np.float32(wq["scale"])), "zero_point": 0}
              if wq.get("scale") and not d.hostile("bias-scale", 0.2, cat="quant")
              else g.quant("int32"))
        idx[12 + k] = g.const(_rand_data(d, (units,), "int32"), "int32", (units,), **bq)
    if d.hostile("cifg", 0.2):
        idx[1] = idx[5] = idx[12] = -1
    hidden_q = g.quant("int8")
    idx[18] = g.add(TensorSpec((batches, units), "int8", variable=True, **hidden_q))
    cell_q = ({"scale": 2.0 ** d.int(-15, -8), "zero_point": 0}
              if not d.hostile("cell-scale", 0.3, cat="quant") else g.quant("int16"))
    idx[19] = g.add(TensorSpec((batches, units), "int16", variable=True, **cell_q))
    o = g.out((b, t, units), "int8", hidden_q if d.bool() else None)
    g.op("UNIDIRECTIONAL_SEQUENCE_LSTM", idx, [o],
         {"fused_activation_function": d.pick(["TANH", "TANH", "RELU", "NONE"]),
          "cell_clip": d.real("cell_clip", 0.0, 8.0), "proj_clip": 0.0,
          "time_major": time_major, "asymmetric_quantize_inputs": False})
    return o


@builder("RESIZE_NEAREST_NEIGHBOR", rank=4)
def _resize(g: GraphBuilder, d: Draw, x: int) -> int:
    n, h, w, c = g.shape(x)
    size = [d.int(1, 9), d.int(1, 9)]
    if d.hostile("size", 0.4):
        size[d.int(0, 1)] = d.pick([0, -1, 2**16, I32_MAX, 46341])
    ac, hp = d.bool() and d.rng.random() < 0.4, d.rng.random() < 0.3
    o = g.out((n, size[0], size[1], c), g.dtype(x), _same_q(g, x))
    g.op("RESIZE_NEAREST_NEIGHBOR", [x, g.const(size, "int32", (2,))], [o],
         {"align_corners": ac, "half_pixel_centers": hp})
    return o


@builder("RESIZE_BILINEAR", rank=4)
def _resize_bilinear(g: GraphBuilder, d: Draw, x: int) -> int:
    n, h, w, c = g.shape(x)
    size = [d.int(1, 9), d.int(1, 9)]
    if d.hostile("size", 0.4):
        size[d.int(0, 1)] = d.pick([0, -1, 2**16, I32_MAX, 46341, 91 * max(h, 1)])
    ac = d.rng.random() < 0.3
    hp = not ac and d.rng.random() < 0.4
    o = g.out((n, size[0], size[1], c), g.dtype(x), _same_q(g, x))
    g.op("RESIZE_BILINEAR", [x, g.const(size, "int32", (2,))], [o],
         {"align_corners": ac, "half_pixel_centers": hp})
    return o


@builder("QUANTIZE")
def _quantize(g: GraphBuilder, d: Draw, x: int) -> int:
    # x is int8 here (requantize); a float → int8 QUANTIZE is built as a model input
    # by `_float_front`.
    o = g.out(g.shape(x), d.pick(["int8", "int8", "int16"]) if d.hostile() else "int8")
    g.op("QUANTIZE", [x], [o])
    return o


@builder("DEQUANTIZE")
def _dequantize(g: GraphBuilder, d: Draw, x: int) -> int:
    o = g.out(g.shape(x), "float32", {})
    g.op("DEQUANTIZE", [x], [o])
    return o


@builder("CAST")
def _cast(g: GraphBuilder, d: Draw, x: int) -> int:
    """CAST of a constant (folded), feeding an ADD with x; or of x itself (hostile)."""
    if d.hostile("cast-activation", 0.3):
        o = g.out(g.shape(x), d.pick(["int32", "float32", "int16"]), {})
        g.op("CAST", [x], [o], {"in_data_type": g.dtype(x), "out_data_type": g.dtype(o)})
        return o
    xs = g.shape(x)
    c = g.const(_rand_data(d, xs, "int32"), "int32", xs)
    ct = g.out(xs, g.dtype(x), g.q_of(x))
    g.op("CAST", [c], [ct], {"in_data_type": "int32", "out_data_type": g.dtype(x)})
    o = g.out(xs, g.dtype(x))
    g.op("ADD", [x, ct], [o], {"fused_activation_function": "NONE"})
    return o


@builder("SHAPE")
def _shape(g: GraphBuilder, d: Draw, x: int) -> int:
    """SHAPE(x) feeding RESHAPE(x, ·): folded to a constant shape."""
    xs = g.shape(x)
    st = g.out((len(xs),), "int32", {})
    g.op("SHAPE", [x], [st], {"out_type": "int32"} if d.bool() else {})
    o = g.out(xs, g.dtype(x), _same_q(g, x))
    g.op("RESHAPE", [x, st], [o])
    return o


# Ops whose input a chain cannot continue from (type changes).
TERMINAL = {"ARG_MAX", "ARG_MIN", "DEQUANTIZE"}


def _pass_op(fn: Builder, name: str) -> Builder:
    """Builders shared by several ops take the op name as a keyword."""
    import inspect
    if "op" in inspect.signature(fn).parameters:
        return lambda g, d, x: fn(g, d, x, op=name)
    return fn


OPS = sorted(BUILDERS)
# Ops with geometry (filters, strides, dilations, blocks, windows) carry the index
# arithmetic that can overflow in a kernel: drawn three times as often.
_GEOMETRY = {"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "AVERAGE_POOL_2D",
             "MAX_POOL_2D", "FULLY_CONNECTED", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND",
             "STRIDED_SLICE", "RESIZE_NEAREST_NEIGHBOR", "MIRROR_PAD", "TILE", "GATHER"}
OP_WEIGHTS = [3.0 if op in _GEOMETRY else 1.0 for op in OPS]
OP_WEIGHTS = [w / sum(OP_WEIGHTS) for w in OP_WEIGHTS]


def _to_rank(g: GraphBuilder, x: int, rank: int) -> int:
    """RESHAPE x to `rank` dims (same element count), an aliasing view for the planner."""
    xs = g.shape(x)
    if len(xs) == rank:
        return x
    count = _count(xs)
    if count <= 0 or count >= 2**31:
        shape = (tuple(xs) + (1,) * rank)[:rank]
    else:
        shape = (1,) * (rank - 1) + (count,) if rank else ()
        f = _factor_shape(g.d, count)
        if len(f) <= rank:
            shape = (1,) * (rank - len(f)) + f
    o = g.act(shape, g.dtype(x), g.q_of(x))
    g.op("RESHAPE", [x, g.const(list(shape), "int32", (len(shape),))], [o])
    return o


def _to_shape(g: GraphBuilder, x: int, shape: tuple) -> int:
    """A fresh model input of `shape` in place of x when x is the model's only tensor so
    far, else x itself (a later op then sees a mismatch: fine, it is fuzzing)."""
    if g.ops or x not in g.inputs:
        return x
    g.inputs.remove(x)
    return g.input(shape, g.dtype(x), g.q_of(x))


def _first_shape(d: Draw, op: str) -> tuple:
    if RANK.get(op) == 4:
        if d.hostile("rank-4-wrap", 0.1, cat="shape"):
            return d.pick([(1, 2**16, 2**16, 1), (1, 46341, 46341, 1), (2**10, 2**10, 2**10, 2),
                           (1, I32_MAX, 1, 1), (1, 1, I32_MAX, 3), (1, 2**24, 2**24, 1),
                           (2**24, 2**24, 2**24, 2**24), (1, 2**12, 2**12, 2**8),
                           (1, 2**24, 1, 2**8), (1, 1, 2**24, 3)])
        if d.hostile("rank!=4", 0.05, cat="shape"):
            return d.shape(0, 6)
        return (d.dim(1, 2), d.dim(1, 9), d.dim(1, 9), d.dim(1, 8))
    return d.shape(0, 5, 1, 6)


def _graph_mutation(g: GraphBuilder, d: Draw, rng: np.random.Generator) -> None:
    """One structural attack on the graph the memory planner and emitter walk: tensors
    that are both model input and output, written twice, read before (or by) their writer,
    constants as outputs, required inputs omitted, inputs nobody reads."""
    kind = d.pick(["output-is-input", "output-is-const", "dup-output", "two-writers",
                   "self-loop", "missing-input", "writes-model-input", "unused-input",
                   "no-outputs", "reads-later-tensor"])
    d.notes.append(f"graph:{kind}")
    first_op = g.ops[0]
    x0 = g.inputs[0] if g.inputs else first_op.inputs[0]
    consts = [i for i, t in enumerate(g.tensors) if t.data is not None]
    if kind == "output-is-input":
        g.outputs.append(x0)
    elif kind == "output-is-const" and consts:
        g.outputs.append(consts[0])
    elif kind == "dup-output":
        g.outputs.append(g.outputs[0])
    elif kind == "two-writers":
        g.op("RELU", [x0], [g.ops[-1].outputs[0]])
    elif kind == "self-loop":
        o = first_op.outputs[0]
        g.op("RELU", [o], [o])
    elif kind == "missing-input":
        op = g.ops[int(rng.integers(0, len(g.ops)))]
        op.inputs[int(rng.integers(0, len(op.inputs)))] = -1
    elif kind == "writes-model-input":
        g.op("RELU", [g.ops[-1].outputs[0]], [x0])
    elif kind == "unused-input":
        g.input(g.shape(x0), g.dtype(x0))
    elif kind == "no-outputs":
        g.outputs = []
        g.no_outputs = True
    elif kind == "reads-later-tensor" and len(g.ops) > 1:
        g.ops[0].inputs[0] = g.ops[-1].outputs[0]


@dataclass
class Case:
    seed: int
    ops: list[str]
    notes: list[str]
    model: bytes
    runtime_checked: bool = False


def generate(seed: int, index: int) -> Case:
    """Model number `index` of the run seeded `seed` (deterministic). A draw the
    flatbuffer builder itself cannot write (e.g. a scale count that no dim matches) is
    drawn again from the next sub-seed."""
    for attempt in range(20):
        try:
            return _generate(seed, index, np.random.default_rng([seed, index, attempt]))
        except (ValueError, ArithmeticError, LookupError):
            continue
    raise RuntimeError(f"no model for seed {seed} index {index}")


def _generate(seed: int, index: int, rng: np.random.Generator) -> Case:
    # A quarter of the models are ordinary (hostility 0): their C must run clean; the rest
    # carry one hostile value (most), or a few.
    hostility = 0.0 if rng.random() < 0.25 else float(rng.uniform(0.05, 0.5))
    cats = list(FOCUS_WEIGHTS)
    focus = frozenset([cats[int(rng.choice(len(cats), p=list(FOCUS_WEIGHTS.values())))]]) \
        if rng.random() < 0.85 else CATEGORIES
    budget = int(rng.choice([1, 1, 1, 2, 4]))
    targets = None
    if hostility and len(focus) == 1:
        span = {"param": 10, "shape": 8, "quant": 8}.get(next(iter(focus)), 2)
        targets = frozenset(int(t) for t in rng.integers(0, span, budget))
    d = Draw(rng, hostility, budget=budget, focus=focus, targets=targets)
    g = GraphBuilder(d)
    n_ops = 1 if rng.random() < 0.6 else int(rng.integers(2, 6))
    names = [OPS[int(rng.choice(len(OPS), p=OP_WEIGHTS))] for _ in range(n_ops)]
    # chains continue from int8 tensors: terminal ops only at the end
    names = [n for n in names[:-1] if n not in TERMINAL] + names[-1:]
    first = names[0]
    dtype = d.dtype() if first not in ("QUANTIZE",) else "int8"
    shape = _first_shape(d, first)
    if first == "QUANTIZE" and rng.random() < 0.6:
        x = g.input(shape, "float32", {})                   # float → int8
    else:
        x = g.input(shape, dtype)
    tensors: list[int] = [x]
    for name in names:
        if name in RANK:
            x = _to_rank(g, x, RANK[name])
        if len(tensors) > 1 and rng.random() < 0.15:
            g.outputs.append(x)                              # an intermediate is an output
        x = _pass_op(BUILDERS[name], name)(g, d, x)
        tensors.append(x)
    if x not in g.outputs:
        g.outputs.insert(0, x)
    # fan-out: an earlier tensor also feeds a final op (keeps it live across the chain)
    if len(names) > 1 and rng.random() < 0.3 and g.shape(tensors[0]) == g.shape(x) \
            and g.dtype(x) == g.dtype(tensors[0]):
        o = g.out(g.shape(x), g.dtype(x))
        g.op("ADD", [tensors[0], x], [o], {"fused_activation_function": "NONE"})
        g.outputs[0] = o
        names.append("ADD")
    if d.hostile(weight=0.5, cat="graph"):
        _graph_mutation(g, d, rng)
    return Case(seed=seed, ops=names, notes=d.notes, model=g.model(),
                runtime_checked=g.runtime_checked)


# --------------------------------------------------------------------------- compile worker

def _worker(workdir: Path) -> None:
    """Compile each model id read on stdin; report "S id" before and "R id json" after.
    Files of a model that compiles go to workdir/c/<id>/."""
    from kiln.compiler import KilnError, compile, load
    for line in sys.stdin:
        mid = line.strip()
        if not mid:
            continue
        print(f"S {mid}", flush=True)
        res: dict[str, Any]
        try:
            art = compile(load(workdir / "models" / f"{mid}.tflite"), board="host")
            out = workdir / "c" / mid
            out.mkdir(parents=True, exist_ok=True)
            for name, text in art.files.items():
                if name != "kiln.json":
                    (out / name).write_text(text)
            io_bytes = sum(_count(t["shape"]) * np.dtype(t["dtype"]).itemsize
                           for t in art.report["inputs"] + art.report["outputs"])
            res = {"outcome": "compiled", "n_in": len(art.report["inputs"]),
                   "n_out": len(art.report["outputs"]), "arena": int(art.report["arena_bytes"]),
                   "io": int(io_bytes)}
        except KilnError as e:
            res = {"outcome": "rejected", "detail": f"{type(e).__name__}: {str(e)[:300]}"}
        except BaseException as e:  # noqa: BLE001 - classifying is the point
            tb = traceback.format_exception(type(e), e, e.__traceback__)
            where = [ln for ln in "".join(tb).splitlines() if ln.strip().startswith("File ")]
            res = {"outcome": "traceback", "detail": f"{type(e).__name__}: {str(e)[:300]}",
                   "where": where[-1].strip() if where else "", "tb": "".join(tb)[-3000:]}
        print(f"R {mid} {json.dumps(res)}", flush=True)


def _limit_memory() -> None:
    """Worker preexec: a memory cap (a hostile model then raises MemoryError, which is a
    traceback finding, instead of the OOM killer taking the machine) and its own group."""
    import resource
    os.setsid()
    cap = 6 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _compile_all(workdir: Path, ids: list[str], timeout: float, python: str,
                 log: Callable[[str], None]) -> dict[str, dict]:
    """Compile `ids` in worker processes; a crash or hang is pinned to the model being
    compiled, and a fresh worker continues with the rest."""
    results: dict[str, dict] = {}
    pending = list(ids)
    while pending:
        proc = subprocess.Popen([python, str(Path(__file__).resolve()), "--worker", str(workdir)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=_limit_memory)
        assert proc.stdin and proc.stdout
        proc.stdin.write("".join(f"{m}\n" for m in pending))
        proc.stdin.close()
        current: str | None = None
        started = time.monotonic()
        buf = ""
        while True:
            left = timeout - (time.monotonic() - started)
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
            if not ready:                                   # the current model hangs
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if current is not None:
                    results[current] = {"outcome": "hang", "detail": f"compile > {timeout:.0f} s"}
                break
            chunk = os.read(proc.stdout.fileno(), 65536).decode(errors="replace")
            if not chunk:                                   # worker exited
                rc = proc.wait()
                if current is not None:
                    err = proc.stderr.read()[-2000:] if proc.stderr else ""
                    sig = -rc if rc < 0 else 0
                    results[current] = {"outcome": "crash",
                                        "detail": (f"signal {signal.Signals(sig).name}" if sig
                                                   else f"exit {rc}"),
                                        "tb": err}
                break
            buf += chunk
            *lines, buf = buf.split("\n")
            for line in lines:
                if line.startswith("S "):
                    current, started = line[2:], time.monotonic()
                elif line.startswith("R "):
                    mid, _, payload = line[2:].partition(" ")
                    results[mid] = json.loads(payload)
                    current = None
        if proc.stderr:
            proc.stderr.close()
        proc.stdout.close()
        pending = [m for m in pending if m not in results]
        if pending:
            log(f"  worker restarted, {len(pending)} models left")
    return results


# --------------------------------------------------------------------------- sanitizer run

# Inputs filled with xorshift bytes, the arena too (stale data), every buffer on the heap
# at its exact size so ASan sees one byte past any of them.
_MAIN = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"

static uint32_t state = 0x9E3779B9u;
static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        state ^= state << 13; state ^= state >> 17; state ^= state << 5;
        p[i] = (uint8_t)state;
    }
}

int main(void)
{
    uint8_t *arena = malloc(KILN_ARENA_BYTES + 0);
    size_t in_bytes[] = {IN_BYTES}, out_bytes[] = {OUT_BYTES};
    const void *inputs[@NIN@ + 1];
    void *outputs[@NOUT@ + 1];
    if (arena == NULL && KILN_ARENA_BYTES != 0) return 90;
    fill(arena, KILN_ARENA_BYTES);
    for (int i = 0; i < @NIN@; i++) {
        uint8_t *p = malloc(in_bytes[i] ? in_bytes[i] : 1);
        fill(p, in_bytes[i]);
        inputs[i] = p;
    }
    for (int j = 0; j < @NOUT@; j++) outputs[j] = malloc(out_bytes[j] ? out_bytes[j] : 1);
    for (int round = 0; round < 2; round++) {
        int status = kiln_run(inputs, outputs, arena);
        if (status != 0) {
            printf("kiln_run returned %d\n", status);
            return 3;
        }
    }
    /* data left in the arena (NULL arrays), then layer by layer over the same arena */
    if (kiln_run(NULL, NULL, arena) != 0) return 3;
    for (int32_t layer = 0; layer < KILN_NUM_LAYERS; layer++) {
        if (kiln_run_layer(layer, arena) != 0) {
            printf("kiln_run_layer(%d) failed\n", (int)layer);
            return 3;
        }
    }
    for (int i = 0; i < @NIN@; i++) free((void *)inputs[i]);
    for (int j = 0; j < @NOUT@; j++) free(outputs[j]);
    free(arena);
    return 0;
}
"""


def main_c(n_in: int, n_out: int) -> str:
    ins = ", ".join(f"KILN_INPUT_{i}_BYTES" for i in range(n_in)) or "0"
    outs = ", ".join(f"KILN_OUTPUT_{j}_BYTES" for j in range(n_out)) or "0"
    return (_MAIN.replace("{IN_BYTES}", "{" + ins + "}").replace("{OUT_BYTES}", "{" + outs + "}")
            .replace("@NIN@", str(n_in)).replace("@NOUT@", str(n_out)))


def sanitizer_flags() -> list[str]:
    from kiln.compiler.host_build import SANITIZE_FLAGS
    # float-cast-overflow is not part of -fsanitize=undefined in GCC: a float input of
    # NaN or 1e30 converted to an integer type is undefined behaviour too.
    return ["-std=c99", "-Wall", "-Wextra", "-Werror", *SANITIZE_FLAGS,
            "-fsanitize=float-cast-overflow"]


def kernel_objects(cache: Path, cc: str = "cc") -> list[Path]:
    """crt/kernels/*.c built once with the sanitizers, cached by content and flags."""
    from kiln.compiler.host_build import kernel_sources
    from kiln.compiler.paths import crt_dir
    kdir = crt_dir() / "kernels"
    h = hashlib.sha256(" ".join([cc] + sanitizer_flags()).encode())
    for src in sorted(kdir.glob("*.[ch]")):
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    out = cache / f"kernels-{h.hexdigest()[:16]}"
    objs = [out / (s.stem + ".o") for s in kernel_sources()]
    if all(o.exists() for o in objs):
        return objs
    out.mkdir(parents=True, exist_ok=True)

    def one(src: Path) -> None:
        tmp = out / f"{src.stem}.{os.getpid()}.o.tmp"     # concurrent runs share the cache
        subprocess.run([cc, *sanitizer_flags(), "-c", "-I", str(kdir), "-o", str(tmp), str(src)],
                       check=True, capture_output=True)
        os.replace(tmp, out / (src.stem + ".o"))
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(one, kernel_sources()))
    return objs


_SAN_LINE = re.compile(r"(runtime error:.*|ERROR: AddressSanitizer:.*|AddressSanitizer:DEADLYSIGNAL"
                       r"|SUMMARY: .*)")


def sanitize_one(cdir: Path, info: dict, objs: list[Path], run_timeout: float,
                 cc: str = "cc", max_bytes: int = 256 << 20) -> dict:
    """Build one compiled model with ASan + UBSan and run it on random input bytes."""
    from kiln.compiler.paths import crt_dir
    if info["arena"] + info["io"] > max_bytes:
        return {"outcome": "skipped", "detail": f"arena {info['arena']} + io {info['io']} bytes"}
    (cdir / "main.c").write_text(main_c(info["n_in"], info["n_out"]))
    exe = cdir / "model_exe"
    srcs = sorted(str(p) for p in cdir.glob("*.c"))
    proc = subprocess.run([cc, *sanitizer_flags(), "-I", str(cdir),
                           "-I", str(crt_dir() / "kernels"), "-o", str(exe), *srcs,
                           *map(str, objs), "-lm"], capture_output=True, text=True)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr[:300])
        return {"outcome": "cbuild", "detail": first.replace(str(cdir) + "/", "")[:300],
                "tb": proc.stderr[-3000:]}
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:allocator_may_return_null=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    try:
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=run_timeout,
                             env=env, cwd=cdir)
    except subprocess.TimeoutExpired:
        return {"outcome": "sanitizer", "detail": f"run timeout > {run_timeout:.0f} s"}
    finally:
        exe.unlink(missing_ok=True)
    m = _SAN_LINE.search(run.stderr)
    if m or run.returncode not in (0, 3):
        detail = m.group(0) if m else f"exit {run.returncode}"
        # the first report's source line (kernel:line) makes the dedupe key
        loc = re.search(r"#\d+ 0x[0-9a-f]+ in (\S+) (\S+)", run.stderr)
        where = re.sub(r"^.*?/(crt/|c/\d+/)", r"\1", loc.group(2)) if loc else ""
        src = re.match(r"(\S+?):(\d+):\d+: runtime error", detail)
        if src:
            where = re.sub(r"^.*?/(crt/)", r"\1", src.group(1)) + ":" + src.group(2)
        return {"outcome": "sanitizer", "detail": re.sub(r"^\S*/", "", detail)[:300],
                "where": where, "func": loc.group(1) if loc else "", "tb": run.stderr[-3000:]}
    if run.returncode == 3:
        return {"outcome": "status", "detail": run.stdout.strip()[:200]}
    return {"outcome": "compiled"}


# --------------------------------------------------------------------------- the run

@dataclass
class Summary:
    counts: Counter = field(default_factory=Counter)
    per_op: dict[str, Counter] = field(default_factory=dict)
    results: dict[str, dict] = field(default_factory=dict)
    cases: dict[str, Case] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def failures(self) -> dict[str, dict]:
        return {m: r for m, r in self.results.items() if r["outcome"] in FAILURES}

    def table(self) -> str:
        lines = ["outcome counts: " + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))]
        lines.append("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items()))
        lines.append(f"{'op':26s} " + " ".join(f"{k:>9s}" for k in _COLUMNS))
        for op in sorted(self.per_op):
            c = self.per_op[op]
            lines.append(f"{op:26s} " + " ".join(f"{c.get(k, 0):9d}" for k in _COLUMNS))
        return "\n".join(lines)


_COLUMNS = ("compiled", "rejected", "skipped", *FAILURES)


def run_fuzz(n: int, seed: int, workdir: Path, jobs: int = 1, compile_timeout: float = 30.0,
             run_timeout: float = 30.0, sanitize: bool = True, start: int = 0,
             max_run_bytes: int = 256 << 20,
             log: Callable[[str], None] = lambda s: None) -> Summary:
    """Generate models start..start+n-1 of `seed`, compile each, run each compiled one under
    the sanitizers; return the counts (per outcome, per op) and the failures."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "models").mkdir(exist_ok=True)
    s = Summary()
    t0 = time.perf_counter()
    ids = []
    for i in range(start, start + n):
        case = generate(seed, i)
        mid = f"{i:06d}"
        (workdir / "models" / f"{mid}.tflite").write_bytes(case.model)
        s.cases[mid] = case
        ids.append(mid)
    t1 = time.perf_counter()
    s.seconds["generate"] = t1 - t0
    log(f"generated {n} models in {t1 - t0:.1f} s")

    chunks = [ids[k::jobs] for k in range(jobs)]
    with ThreadPoolExecutor(jobs) as ex:
        for part in ex.map(lambda c: _compile_all(workdir, c, compile_timeout, sys.executable,
                                                  log), chunks):
            s.results.update(part)
    t2 = time.perf_counter()
    s.seconds["compile"] = t2 - t1
    compiled = [m for m in ids if s.results[m]["outcome"] == "compiled"]
    log(f"compiled {len(compiled)} of {n} in {t2 - t1:.1f} s")

    if sanitize and compiled:
        from kiln.compiler.host_build import cache_root
        objs = kernel_objects(cache_root().parent / "fuzz-sanitize")

        def san(m: str) -> tuple[str, dict]:
            return m, sanitize_one(workdir / "c" / m, s.results[m], objs, run_timeout,
                                   max_bytes=max_run_bytes)
        with ThreadPoolExecutor(jobs) as ex:
            for m, r in ex.map(san, compiled):
                if r["outcome"] == "status" and s.cases[m].runtime_checked:
                    r = {"outcome": "compiled", "detail": "refused its random indices at run"}
                s.results[m] = {**s.results[m], **r}
        s.seconds["sanitize"] = time.perf_counter() - t2
        log(f"ran {len(compiled)} under ASan/UBSan in {s.seconds['sanitize']:.1f} s")
    with open(workdir / "results.jsonl", "w") as f:
        for m in ids:
            f.write(json.dumps({"id": m, "ops": s.cases[m].ops, "notes": s.cases[m].notes,
                                **{k: v for k, v in s.results[m].items() if k != "tb"}}) + "\n")
    for m in ids:
        out = s.results[m]["outcome"]
        s.counts[out] += 1
        for op in set(s.cases[m].ops):
            s.per_op.setdefault(op, Counter())[out] += 1
    s.seconds["total"] = time.perf_counter() - t0
    return s


def finding_key(case: Case, r: dict) -> str:
    """Dedupe key: the op (last op of a chain), the kind of failure and where it happened."""
    where = r.get("where") or ""
    where = re.sub(r'File ".*?/(compiler|crt|tests)/', r"\1/", where)
    where = re.sub(r'File "([^"]*)"', lambda m: Path(m.group(1)).name, where)
    what = r.get("detail", "").split(":")[0] if r["outcome"] == "traceback" else \
        re.sub(r"\d+", "N", r.get("detail", ""))[:80]
    if r["outcome"] in ("cbuild", "status", "hang"):
        where = ""
    op = case.ops[-1] if r["outcome"] != "sanitizer" else (r.get("func") or case.ops[-1])
    return f"{r['outcome']}|{op}|{what}|{where}"


def record_findings(s: Summary, findings_md: Path, repro_dir: Path) -> list[str]:
    """Append each new distinct failure to findings_md (ids F1, F2, ...) with a reproducer
    .tflite in repro_dir; return the ids seen in this run (new and known)."""
    repro_dir.mkdir(parents=True, exist_ok=True)
    index_path = repro_dir / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    seen = []
    for m, r in sorted(s.failures().items()):
        case = s.cases[m]
        key = finding_key(case, r)
        if key in index:
            fid = index[key]
            if fid not in seen:
                seen.append(fid)
            continue
        fid = f"F{len(index) + 1}"
        index[key] = fid
        seen.append(fid)
        repro = repro_dir / f"{fid}_{'_'.join(case.ops)[:60]}.tflite"
        repro.write_bytes(case.model)
        last = (r.get("tb") or "").strip().splitlines()[-6:]
        with open(findings_md, "a") as f:
            f.write(f"\n## {fid}: {r['outcome']} in {' -> '.join(case.ops)}\n"
                    f"- key: `{key}`\n- model: seed {case.seed} id {m}; hostile values: "
                    f"{', '.join(case.notes) or 'none (an ordinary model)'}\n"
                    f"- what: {r.get('detail', '')}\n"
                    + (f"- where: {r.get('where')}\n" if r.get("where") else "")
                    + ("- last lines:\n```\n" + "\n".join(last) + "\n```\n" if last else "")
                    + f"- reproducer: {repro}\n"
                    f"- reproduce: `python tests/fuzz_structured.py --repro {repro}`\n")
        index_path.write_text(json.dumps(index, indent=1))
    return seen


def repro(path: Path) -> int:
    """Compile one model in-process and, if it compiles, run it under the sanitizers."""
    import tempfile

    from kiln.compiler.host_build import cache_root
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "models").mkdir()
        shutil.copy(path, work / "models" / "000000.tflite")
        res = _compile_all(work, ["000000"], 60, sys.executable, print)["000000"]
        if res["outcome"] == "compiled":
            res = {**res, **sanitize_one(work / "c" / "000000", res,
                                         kernel_objects(cache_root().parent / "fuzz-sanitize"), 60)}
        print(res.get("tb", ""))
        print(json.dumps({k: v for k, v in res.items() if k != "tb"}))
        return 1 if res["outcome"] in FAILURES else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        _worker(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["--repro"]:
        sys.exit(repro(Path(sys.argv[2])))
    else:
        print(__doc__)
