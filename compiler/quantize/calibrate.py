"""Calibration: run the float model on the calibration data and choose each tensor's range.

Two passes over the data, each one vectorised float inference per batch:
1. exact min / max of every activation (and, for bias correction, the per-channel mean of
   the inputs of weight layers);
2. only for the histogram methods: a 2048-bin histogram of every activation over its
   pass-1 range.

Range methods (per tensor, by option):
- `minmax`: the observed range (what the TFLite converter does).
- `percentile`: clip to the p-th / (100 − p)-th percentile (default p = 99.99).
- `mse`: the range [α_lo·min, α_hi·max], α ∈ [0.01, 1], that minimises the expected
  squared int8 quantization error (rounding + clipping) over the histogram.

Every range is widened to include 0, so zero is exactly representable (padding, ReLU).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .float_eval import FloatModel, iter_batches

METHODS = ("minmax", "percentile", "mse")
HIST_BINS = 2048
QMIN, QMAX = -128, 127


@dataclass
class TensorStats:
    """What calibration saw of one activation tensor."""

    min: float = np.inf
    max: float = -np.inf
    count: int = 0
    hist: np.ndarray | None = None          # HIST_BINS counts over [min, max]
    means: dict[int, np.ndarray] = field(default_factory=dict)   # depth → mean over rows
    _sums: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _rows: dict[int, int] = field(default_factory=dict, repr=False)


@dataclass
class Calibration:
    stats: dict[int, TensorStats]
    samples: int
    seconds: float


def collect(model: FloatModel, inputs: list[np.ndarray], *, histograms: bool,
            mean_depths: dict[int, set[int]] | None = None, batch: int = 64) -> Calibration:
    """Observe every activation of `model` on `inputs` (one (N, ...) array per input).

    `mean_depths`: tensor id → depths K for which the mean of `value.reshape(-1, K)` over
    rows is wanted (the inputs of conv / FC layers, for bias correction).
    """
    start = time.perf_counter()
    stats: dict[int, TensorStats] = {}
    mean_depths = mean_depths or {}

    def first_pass(tid: int, value: np.ndarray) -> None:
        if not np.all(np.isfinite(value)):    # finite inputs can still overflow float32
            raise InputError(
                f"the float model computes non-finite values in tensor "
                f"{model.graph.tensor(tid).name!r} on this calibration data (values beyond "
                f"float32's range): calibrate with data in the range the model expects")
        s = stats.setdefault(tid, TensorStats())
        s.min = min(s.min, float(value.min()))
        s.max = max(s.max, float(value.max()))
        s.count += value.size
        for k in mean_depths.get(tid, ()):
            rows = value.reshape(-1, k)
            s._sums[k] = s._sums.get(k, 0) + rows.sum(axis=0, dtype=np.float64)
            s._rows[k] = s._rows.get(k, 0) + rows.shape[0]

    # Each pass runs the samples in order from the zero state: a stateful layer (SVDF)
    # carries its state from one sample to the next, as TF's converter calibrates.
    model.reset()
    with np.errstate(over="ignore", invalid="ignore"):    # first_pass names an overflow
        for xs in iter_batches(inputs, batch):
            model.run(xs, observe=first_pass)
    for s in stats.values():
        s.means = {k: (s._sums[k] / s._rows[k]).astype(np.float32) for k in s._sums}

    if histograms:
        def second_pass(tid: int, value: np.ndarray) -> None:
            s = stats[tid]
            if s.hist is None:
                s.hist = np.zeros(HIST_BINS, np.int64)
            width = s.max - s.min
            if width <= 0:
                s.hist[0] += value.size
                return
            idx = ((value.reshape(-1) - s.min) * (HIST_BINS / width)).astype(np.int64)
            s.hist += np.bincount(np.clip(idx, 0, HIST_BINS - 1), minlength=HIST_BINS)

        model.reset()
        for xs in iter_batches(inputs, batch):
            model.run(xs, observe=second_pass)
    return Calibration(stats=stats, samples=int(inputs[0].shape[0]),
                       seconds=time.perf_counter() - start)


# --- choosing a range ---------------------------------------------------------------------

def asymmetric_params(lo: float, hi: float) -> tuple[float, int]:
    """(scale, zero_point) of an int8 range, as TFLite's GetAsymmetricQuantizationParams.

    The range is widened to include 0; the zero point is nudged to an integer.
    """
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo < 1e-12:
        hi = lo + 1.0            # an all-zero tensor: any scale represents it
    scale = (hi - lo) / (QMAX - QMIN)
    zp_from_min = QMIN - lo / scale
    zp_from_max = QMAX - hi / scale
    zp = zp_from_min if abs(QMIN) + abs(lo / scale) < abs(QMAX) + abs(hi / scale) else zp_from_max
    zp = int(np.clip(np.floor(zp + 0.5), QMIN, QMAX))
    return float(np.float32(scale)), zp


def _bin_centers(s: TensorStats) -> np.ndarray:
    edges = np.linspace(s.min, s.max, HIST_BINS + 1)
    return 0.5 * (edges[:-1] + edges[1:])


def _percentile_range(s: TensorStats, p: float) -> tuple[float, float]:
    if s.hist is None or s.max <= s.min:
        return s.min, s.max
    cdf = np.cumsum(s.hist) / s.hist.sum()
    edges = np.linspace(s.min, s.max, HIST_BINS + 1)
    hi = edges[min(int(np.searchsorted(cdf, p / 100.0)) + 1, HIST_BINS)]
    lo = edges[int(np.searchsorted(cdf, 1.0 - p / 100.0))]
    return (float(lo) if s.min < 0 else s.min), (float(hi) if s.max > 0 else s.max)


def _quant_error(centers: np.ndarray, counts: np.ndarray, lo: float, hi: float) -> float:
    scale, zp = asymmetric_params(lo, hi)
    q = np.clip(np.floor(centers / scale + 0.5) + zp, QMIN, QMAX)
    return float(np.dot(counts, ((q - zp) * scale - centers) ** 2))


def _mse_range(s: TensorStats) -> tuple[float, float]:
    """Coordinate descent over the two ends: each end in turn takes the fraction
    α ∈ [0.01, 1] (log grid) of its min/max value that minimises the expected error."""
    if s.hist is None or s.max <= s.min:
        return s.min, s.max
    centers = _bin_centers(s)
    counts = s.hist.astype(np.float64)
    lo0, hi0 = min(s.min, 0.0), max(s.max, 0.0)
    alphas = np.geomspace(0.01, 1.0, 120)
    lo, hi = lo0, hi0
    for _ in range(3):
        before = (lo, hi)
        if hi0 > 0:
            errors = [_quant_error(centers, counts, lo, a * hi0) for a in alphas]
            hi = alphas[_best(errors)] * hi0
        if lo0 < 0:
            errors = [_quant_error(centers, counts, a * lo0, hi) for a in alphas]
            lo = alphas[_best(errors)] * lo0
        if (lo, hi) == before:
            break
    return (lo if s.min < 0 else s.min), (hi if s.max > 0 else s.max)


def _best(errors: list[float]) -> int:
    """Index of the smallest error; among ties (flat error) the widest range."""
    e = np.asarray(errors)
    return int(np.flatnonzero(e <= e.min() * (1 + 1e-9))[-1])


def choose_range(s: TensorStats, method: str, percentile: float = 99.99) -> tuple[float, float]:
    """The (lo, hi) float range to quantize a tensor to, by `method`."""
    if s.count == 0:
        return 0.0, 1.0
    if method == "minmax":
        return s.min, s.max
    if method == "percentile":
        return _percentile_range(s, percentile)
    if method == "mse":
        return _mse_range(s)
    raise InputError(f"unknown calibration method {method!r}; choose one of {', '.join(METHODS)}")
