"""The comparison engine of `kiln validate`: a model on a target against its references.

Every sample runs on the target (a host-driven firmware over RPC: QEMU, a board, or the
host board's POSIX build), on kiln's host build (cffi; bit-exact with tflite-micro's
reference kernels, so any difference is a toolchain, board or kiln fault) and on a float
model (the float model itself, `--float`, or the int8 model's float twin). Per output:

* vs the host reference: the share of samples whose output is identical, the largest
  difference in LSB and a histogram of the differences;
* vs float (target output dequantized): RMSE, MAE, L2r = |t - f| / |f|, cosine
  similarity and SQNR = 10 log10(sum f^2 / sum (t - f)^2), over all samples;
* top-1 accuracy against labels (first output) for target, host and float.

Per layer (`per_layer` samples): the target steps through the model one layer at a time
(RPC STEP) and each layer's output is read from the arena right after that layer ran,
before a later one can write over it (in-place plans need no special plan); the host
build does the same through kiln_run_layer. The first layer whose output differs is
named with its op, shapes, parameters and differences; every layer gets its SQNR vs the
float model's tensor of the same name (the float twin's when the float model has none)
and the SQNR it loses against its input's, the ranking of which says which layer to
keep at 16 bits or recalibrate.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from kiln.compiler.artifact import Artifact, layer_output_locations
from kiln.compiler.errors import InputError
from kiln.compiler.inputs import TensorSpec
from kiln.compiler.ir import Graph, Tensor
from kiln.compiler.quantize.float_eval import FloatModel, dequantize

from .session import Session

Sample = list[np.ndarray]           # one array per model input
MAX_DIFFS_SHOWN = 8


# -- metrics ------------------------------------------------------------------------------

def exact_metrics(target: np.ndarray, host: np.ndarray) -> dict[str, Any]:
    """target and host: (N, ...) outputs of N samples. Integer outputs differ in LSB (with
    a histogram); float ones (a model quantized with --io float) by their real values."""
    n = len(target)
    wide = np.float64 if target.dtype.kind == "f" else np.int64
    diff = np.abs(target.astype(wide) - host.astype(wide)).reshape(n, -1)
    same = ~diff.any(axis=1)
    counts = Counter(diff.ravel().tolist()) if wide is np.int64 else Counter()
    largest = diff.max().item() if diff.size else 0
    return {"samples": n, "exact_samples": int(same.sum()),
            "exact_rate": float(same.mean()) if n else 1.0,
            "differing_elements": int(np.count_nonzero(diff)),
            "max_abs_diff_lsb": largest,
            "diff_histogram_lsb": {str(k): counts[k] for k in sorted(counts)}}


def sqnr_db(approx: np.ndarray, ref: np.ndarray) -> float | None:
    """10 log10(signal / noise) in dB; None when the noise is 0 (identical)."""
    ref64, err = ref.astype(np.float64), approx.astype(np.float64) - ref.astype(np.float64)
    noise = float(np.sum(err * err))
    if noise == 0.0:
        return None
    signal = float(np.sum(ref64 * ref64))
    return 10.0 * math.log10(signal / noise) if signal > 0 else -math.inf


def layer_sqnr_db(input_db: float | None, output_db: float | None) -> float | None:
    """The SQNR a layer would leave if its own noise were the only one: noise-to-signal
    ratios add (uncorrelated noise), so the layer's own is the output's NSR less its
    input's. None (exact) inputs have NSR 0; None when the layer adds no noise (a pool
    or softmax may lower the NSR) or its SQNR is unknown."""
    if output_db is None or not math.isfinite(output_db):
        return None

    def nsr(db: float | None) -> float:
        return 0.0 if db is None else 10.0 ** (-db / 10.0)

    added = nsr(output_db) - nsr(input_db)
    return -10.0 * math.log10(added) if added > 0 else None


def float_metrics(approx: np.ndarray, ref: np.ndarray) -> dict[str, float | None]:
    """Errors of `approx` against the float reference `ref` (same size), over all values."""
    a = approx.astype(np.float64).ravel()
    f = ref.astype(np.float64).ravel()
    err = a - f
    norm_a, norm_f, norm_e = (float(np.linalg.norm(v)) for v in (a, f, err))
    cosine = float(a @ f) / (norm_a * norm_f) if norm_a and norm_f else float(norm_a == norm_f)
    return {"rmse": float(np.sqrt(np.mean(err * err))) if err.size else 0.0,
            "mae": float(np.mean(np.abs(err))) if err.size else 0.0,
            "l2r": norm_e / norm_f if norm_f else None,
            "cosine": cosine, "sqnr_db": sqnr_db(a, f)}


def top1(outputs: np.ndarray, labels: np.ndarray) -> float:
    """Share of samples whose largest output is the label's class."""
    return float(np.mean(outputs.reshape(len(outputs), -1).argmax(axis=1) == labels))


def labels_as_classes(labels: np.ndarray, samples: int) -> np.ndarray:
    """Class indices from integer labels (N,) / (N, 1) or one-hot (N, C); InputError else."""
    y = np.asarray(labels)
    if y.ndim == 2 and y.shape[1] > 1:
        y = y.argmax(axis=1)
    y = y.reshape(len(y), -1) if y.ndim else y.reshape(1, 1)
    if y.shape[1] != 1 or y.dtype.kind not in "iub":
        raise InputError(f"labels must be class numbers (N,) or one-hot (N, C), got "
                         f"{y.dtype} of shape {list(np.shape(labels))}")
    if len(y) < samples:
        raise InputError(f"{len(y)} labels for {samples} samples")
    return y[:samples, 0].astype(np.int64)


def dequantize_spec(q: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """A model output in real numbers (float outputs as they are)."""
    if spec.scale is None or q.dtype.kind == "f":
        return q.astype(np.float32)
    return ((q.astype(np.float32) - (spec.zero_point or 0)) * np.float32(spec.scale))


# -- progress -----------------------------------------------------------------------------

class Progress:
    """`what i/N, elapsed, ETA` on one line of `stream`, only when it is a terminal."""

    def __init__(self, what: str, total: int, stream: TextIO | None = None) -> None:
        self.what, self.total = what, total
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.shown = 0.0

    def step(self, done: int) -> None:
        now = time.monotonic()
        if not self.live or (now - self.shown < 0.2 and done < self.total):
            return
        self.shown = now
        elapsed = now - self.start
        eta = elapsed / done * (self.total - done) if done else 0.0
        self.stream.write(f"\r{self.what} {done}/{self.total}  {elapsed:.1f} s, ETA {eta:.1f} s ")
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


# -- the references -------------------------------------------------------------------------

@dataclass
class FloatReference:
    """The float model and where it comes from: "model" (MODEL is float), "--float"
    or "twin" (the int8 model's own, float_twin); or none (graph None: an op the float
    evaluator lacks), and the report has no float figures."""

    graph: Graph | None
    kind: str
    twin: Graph | None   # the int8 model's twin: per-layer tensors the float model lacks

    def outputs(self, xs: list[np.ndarray]) -> list[np.ndarray] | None:
        return FloatModel(self.graph).run_batched(xs) if self.graph is not None else None

    def tensors(self, xs: list[np.ndarray], names: set[str]
                ) -> tuple[dict[str, np.ndarray], set[str]]:
        """Float values (N, *shape) of the tensors named `names`, from the float model
        where it has them, else from the twin; and the names the twin gave."""
        found: dict[str, np.ndarray] = {}
        from_model: set[str] = set()
        for graph in (g for g in (self.graph, self.twin) if g is not None):
            wanted = {t.id: t.name for t in graph.tensors if t.name in names - found.keys()}
            if wanted:
                FloatModel(graph).run(xs, observe=lambda tid, v: found.setdefault(wanted[tid], v)
                                      if tid in wanted else None)
            if graph is self.graph:
                from_model = set(found)
        return found, set(found) - from_model


# -- the target ------------------------------------------------------------------------------

class Target:
    """A host-driven firmware over an open Session, in validate's terms."""

    def __init__(self, session: Session, manifest: dict) -> None:
        self.session = session
        self.locations = layer_output_locations(manifest)

    def run(self, sample: Sample) -> tuple[list[np.ndarray], int]:
        outputs = self.session.run(sample)
        return outputs, self.session.last_run_ticks or 0

    def run_layers(self, sample: Sample) -> list[list[np.ndarray]]:
        """Every layer's outputs, each read right after its layer ran (RPC STEP)."""
        for i, x in enumerate(sample):
            self.session.write_input(i, x)
        layers = []
        for k, locations in enumerate(self.locations):
            self.session.step(k)
            layers.append([np.frombuffer(self.session.read_arena(offset, n), dtype).reshape(shape)
                           for offset, n, dtype, shape in locations])
        return layers


# -- the engine ------------------------------------------------------------------------------

@dataclass
class Inputs:
    samples: list[Sample]              # in the model's input dtypes (split_samples)
    floats: list[np.ndarray]           # per input, (N, *shape) real values for float models
    labels: np.ndarray | None = None   # class per sample


@dataclass
class Report:
    doc: dict[str, Any] = field(default_factory=dict)

    @property
    def matches(self) -> bool:
        return bool(self.doc["matches_host_reference"])


def validate(target: Target, host: Artifact, reference: FloatReference, data: Inputs,
             per_layer: int = 0, cycles: Callable[[int], int] = int,
             progress: Progress | None = None) -> Report:
    """Run every sample on the target and the references and compare (see module doc).
    `cycles` turns device ticks into the unit reported (instructions on QEMU)."""
    specs = [TensorSpec.from_report(e) for e in host.report["outputs"]]
    n = len(data.samples)
    # A stateful model: both sides start from the initial state and carry it in step.
    host.reset()
    if target.session.device.has_state_reset:
        target.session.reset_state()
    got: list[list[np.ndarray]] = [[] for _ in specs]
    ref: list[list[np.ndarray]] = [[] for _ in specs]
    ticks = []
    for s, sample in enumerate(data.samples):
        outputs, t = target.run(sample)
        ticks.append(t)
        for o, (a, b) in enumerate(zip(outputs, host.run(*sample))):
            got[o].append(a)
            ref[o].append(b)
        if progress:
            progress.step(s + 1)
    if progress:
        progress.close()
    target_out = [np.stack(v) for v in got]
    host_out = [np.stack(v) for v in ref]
    float_out = reference.outputs(data.floats)
    rows = []
    for o, spec in enumerate(specs):
        if float_out is not None and float_out[o].size != target_out[o].size:
            raise InputError(f"the float model's output {o} holds {float_out[o][0].size} values "
                             f"per sample, the int8 model's {spec.size}: not the same model?")
        real = dequantize_spec(target_out[o], spec)
        row = {"index": o, "name": spec.name, "shape": list(spec.shape),
               "vs_host": exact_metrics(target_out[o], host_out[o]),
               "vs_float": float_metrics(real, float_out[o]) if float_out is not None else None}
        rows.append(row)
    doc: dict[str, Any] = {"samples": n, "float_reference": reference.kind, "outputs": rows}
    if data.labels is not None:
        doc["accuracy"] = {"labels": n, "target": top1(target_out[0], data.labels),
                           "host": top1(host_out[0], data.labels), "float": None,
                           "target_agrees_with_float": None}
        if float_out is not None:
            doc["accuracy"]["float"] = top1(float_out[0], data.labels)
            doc["accuracy"]["target_agrees_with_float"] = float(np.mean(
                target_out[0].reshape(n, -1).argmax(1) == float_out[0].reshape(n, -1).argmax(1)))
    inst = [cycles(t) for t in ticks]
    doc["per_inference"] = {"mean": float(np.mean(inst)), "min": int(min(inst)),
                            "max": int(max(inst))}
    outputs_match = all(r["vs_host"]["exact_rate"] == 1.0 for r in rows)
    if per_layer:
        doc["per_layer"] = layer_report(target, host, reference, data, min(per_layer, n))
    layers_match = all(row["exact_rate"] == 1.0 for row in doc.get("per_layer", {}).get("layers", []))
    doc["matches_host_reference"] = outputs_match and layers_match
    return Report(doc)


def layer_report(target: Target, host: Artifact, reference: FloatReference, data: Inputs,
                 count: int) -> dict[str, Any]:
    """Layer-by-layer comparison on the first `count` samples (see the module doc)."""
    report, graph = host.report, host.graph
    ops = report["ops"]
    if len(target.locations) != len(ops) or len(graph.ops) != len(ops):
        raise InputError(f"the target runs {len(target.locations)} layers, the host reference "
                         f"{len(ops)}: the project was built from another model")
    tensors = {t["id"]: t for t in report["tensors"]}
    on_target = [target.run_layers(s) for s in data.samples[:count]]
    on_host = [host.run_layers(*s) for s in data.samples[:count]]
    floats, from_twin = reference.tensors([x[:count] for x in data.floats],
                                          {tensors[t]["name"] for op in ops for t in op["outputs"]}
                                          | {graph.tensor(t).name for t in graph.inputs})
    # SQNR of every activation, by the tensor it is stored in (reshapes are views).
    sqnr_of: dict[int, float | None] = {}
    for i, tid in enumerate(graph.inputs):
        t = graph.tensor(tid)
        if t.name in floats:
            q = np.stack([s[i] for s in data.samples[:count]])
            sqnr_of[tid] = sqnr_db(_real(q, t), floats[t.name])
    rows, first = [], None
    for k, op in enumerate(ops):
        outs = [graph.tensor(tid) for tid in op["outputs"]]
        # A layer's outputs (SPLIT has several) side by side, one row per sample.
        tq = _side_by_side([layers[k] for layers in on_target])
        hq = _side_by_side([layers[k] for layers in on_host])
        exact = exact_metrics(tq, hq)
        row: dict[str, Any] = {
            "index": k, "op": op["type"], "kernel": op.get("called", op.get("kernel", "")),
            "output_shape": list(tensors[outs[0].id]["shape"]), "outputs": len(outs),
            "exact_rate": exact["exact_rate"], "differing_elements": exact["differing_elements"],
            "max_abs_diff_lsb": exact["max_abs_diff_lsb"],
            "sqnr_db": None, "host_sqnr_db": None, "input_sqnr_db": None, "layer_sqnr_db": None,
            "float_from": "twin" if outs[0].name in from_twin else reference.kind}
        if all(t.name in floats and (t.quant is not None or tq.dtype.kind == "f") for t in outs):
            f = _side_by_side([[_kept(floats[t.name][s], op) for t in outs]
                               for s in range(count)])
            row["sqnr_db"] = sqnr_db(_real_all(on_target, k, outs), f)
            row["host_sqnr_db"] = sqnr_db(_real_all(on_host, k, outs), f)
        for t in outs:
            sqnr_of[t.id] = row["sqnr_db"]
        src = op["inputs"][0] if op["inputs"] else -1
        row["input_sqnr_db"] = sqnr_of.get(graph.storage_root(src) if src >= 0 else src,
                                           sqnr_of.get(src))
        row["layer_sqnr_db"] = layer_sqnr_db(row["input_sqnr_db"], row["sqnr_db"])
        rows.append(row)
        if first is None and exact["exact_rate"] < 1.0:
            first = first_difference(k, host, tq, hq)
    ranked = sorted((r for r in rows if r["layer_sqnr_db"] is not None),
                    key=lambda r: r["layer_sqnr_db"])
    return {"samples": count, "layers": rows, "first_difference": first,
            "ranked_by_layer_sqnr": [r["index"] for r in ranked]}


def _kept(values: np.ndarray, op: dict[str, Any]) -> np.ndarray:
    """A float tensor's channels the compiled layer kept (kiln.json lists the constant
    channels kiln.compiler.passes.dead_filters removed)."""
    gone = op.get("removed_channels", {}).get("outputs")
    return np.delete(values, gone, axis=-1) if gone else values


def _side_by_side(samples: list[list[np.ndarray]]) -> np.ndarray:
    """(N, total values): each sample's arrays flattened and concatenated in order."""
    return np.stack([np.concatenate([a.reshape(-1) for a in arrays]) for arrays in samples])


def _real_all(per_sample: list[list[list[np.ndarray]]], k: int, outs: list[Tensor]) -> np.ndarray:
    """Layer k's outputs in real numbers, side by side (each with its own quantization)."""
    return _side_by_side([[_real(layers[k][j][None], t)[0] for j, t in enumerate(outs)]
                          for layers in per_sample])


def _real(q: np.ndarray, t: Tensor) -> np.ndarray:
    """Values (N, *shape) of tensor t in real numbers (float tensors as they are)."""
    return q.astype(np.float32) if t.quant is None else dequantize(q, t.quant, 1)


def first_difference(k: int, host: Artifact, tq: np.ndarray, hq: np.ndarray) -> dict[str, Any]:
    """What a user needs to look at the first layer that differs: op, shapes, parameters,
    quantization and the differing values (sample, flat index, target, host)."""
    op, g_op = host.report["ops"][k], host.graph.ops[k]
    shapes = {t["id"]: t["shape"] for t in host.report["tensors"]}
    out = host.graph.tensor(op["outputs"][0])
    where = np.argwhere(tq.reshape(len(tq), -1) != hq.reshape(len(hq), -1))
    diffs = [{"sample": int(s), "index": int(i), "target": tq.reshape(len(tq), -1)[s, i].item(),
              "host": hq.reshape(len(hq), -1)[s, i].item()} for s, i in where[:MAX_DIFFS_SHOWN]]
    return {"layer": k, "op": op["type"], "tflite_index": op.get("tflite_index", k),
            "kernel": op.get("called", op.get("kernel", "")),
            "inputs": [list(shapes[t]) if t in shapes else None for t in op["inputs"]],
            "output": list(shapes[op["outputs"][0]]),
            "options": {k2: v for k2, v in g_op.options.items() if _plain(v)},
            "output_scale": float(out.quant.scale[0]) if out.quant is not None else None,
            "output_zero_point": int(out.quant.zero_point[0]) if out.quant is not None else None,
            "samples_differing": int(len({int(s) for s, _ in where})),
            "elements_differing": int(len(where)),
            "max_abs_diff_lsb": exact_metrics(tq, hq)["max_abs_diff_lsb"],
            "differences": diffs}


def _plain(value: object) -> bool:
    return isinstance(value, (int, float, str, bool)) or value is None


# -- the terminal table -----------------------------------------------------------------------

def _db(value: float | None) -> str:
    if value is None:
        return "exact"
    return f"{value:.2f}" if math.isfinite(value) else "-inf"


def _num(value: float | None, fmt: str = ".4g") -> str:
    return "-" if value is None else format(value, fmt)


def format_report(doc: dict[str, Any], unit: str) -> list[str]:
    lines = [f"{'output':<7} {'shape':<16} {'exact vs host':>13} {'max|diff|':>9}  "
             f"{'RMSE':>9} {'MAE':>9} {'L2r':>9} {'cosine':>8} {'SQNR dB':>8}"]
    for r in doc["outputs"]:
        h, f = r["vs_host"], r["vs_float"] or dict.fromkeys(("rmse", "mae", "l2r", "cosine"))
        lines.append(f"{r['index']:<7} {str(r['shape']):<16} {100 * h['exact_rate']:>12.2f}% "
                     f"{h['max_abs_diff_lsb']:>5} LSB  {_num(f['rmse']):>9} {_num(f['mae']):>9} "
                     f"{_num(f['l2r']):>9} {_num(f['cosine'], '.5f'):>8} "
                     f"{_db(f['sqnr_db']) if r['vs_float'] else '-':>8}")
        if h["max_abs_diff_lsb"]:
            lines.append(f"        |diff| histogram (LSB: elements): "
                         + ", ".join(f"{k}: {v}" for k, v in h["diff_histogram_lsb"].items()))
    acc = doc.get("accuracy")
    if acc:
        line = (f"top-1 accuracy on {acc['labels']} labels: target {100 * acc['target']:.2f}%, "
                f"host {100 * acc['host']:.2f}%")
        if acc["float"] is not None:
            line += (f", float {100 * acc['float']:.2f}%; target and float agree on "
                     f"{100 * acc['target_agrees_with_float']:.2f}%")
        lines.append(line)
    p = doc["per_inference"]
    lines.append(f"per inference: {p['mean']:,.0f} {unit} (min {p['min']:,}, max {p['max']:,})")
    layers = doc.get("per_layer")
    if layers:
        lines += _format_layers(layers)
    return lines


def _format_layers(pl: dict[str, Any]) -> list[str]:
    rows = pl["layers"]
    kw = max([len("kernel")] + [len(r["kernel"]) for r in rows])
    lines = [f"per layer, {pl['samples']} sample(s):",
             f"{'#':>3} {'op':<18} {'kernel':<{kw}} {'output':<16} {'exact':>7} {'max|diff|':>9} "
             f"{'SQNR dB':>8} {'layer dB':>8}"]
    for r in rows:
        lines.append(f"{r['index']:>3} {r['op']:<18} {r['kernel']:<{kw}} {str(r['output_shape']):<16} "
                     f"{100 * r['exact_rate']:>6.1f}% {r['max_abs_diff_lsb']:>5} LSB "
                     f"{_db(r['sqnr_db']):>8} {_num(r['layer_sqnr_db'], '.2f'):>8}")
    first = pl["first_difference"]
    if first:
        lines.append(f"first layer that differs on the target: layer {first['layer']} "
                     f"{first['op']} (TFLite op {first['tflite_index']}, {first['kernel']}), in "
                     f"{first['inputs']} out {first['output']}, {first['options']}, output scale "
                     f"{_num(first['output_scale'], '.6g')} zero point {first['output_zero_point']}: "
                     f"{first['elements_differing']} element(s) in {first['samples_differing']} "
                     f"sample(s), up to {first['max_abs_diff_lsb']} LSB; e.g. "
                     + ", ".join(f"sample {d['sample']} [{d['index']}] target {d['target']} host "
                                 f"{d['host']}" for d in first["differences"][:4]))
    else:
        lines.append("every layer's output matches the host reference")
    worst = [rows[i] for i in pl["ranked_by_layer_sqnr"][:3]]
    if worst:
        lines.append("layers adding most quantization noise (their own SQNR): " + ", ".join(
            f"{r['index']} {r['op']} ({r['layer_sqnr_db']:.2f} dB, output {_db(r['sqnr_db'])} dB)"
            for r in worst))
    return lines


def json_safe(value: Any) -> Any:
    """The report with non-finite floats as None (JSON has no inf / NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


__all__ = ["FloatReference", "Inputs", "Progress", "Report", "Target", "exact_metrics",
           "float_metrics", "format_report", "json_safe", "labels_as_classes", "sqnr_db",
           "validate"]
