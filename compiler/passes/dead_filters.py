"""Remove channels that do not depend on the model's input: dead filters, exactly.

A CONV_2D / FULLY_CONNECTED output channel whose int8 filter is all zero (zero point 0)
accumulates its bias at every position, TFLM's kernels included (a padded tap adds
nothing either way), so it outputs the constant clamp(requantize(bias) + zero point).
Pruned models have many (VWW: 971 of 2,738 filters). Such a channel need not be computed
or stored when every layer reading it can take the constant in exactly:

* CONV_2D / FULLY_CONNECTED fold it into their int32 bias:
  bias'[o] = bias[o] + Σ_taps w[o, tap, c] · (v - input zero point). That is exact where
  every output position reads every tap (VALID, a 1x1 kernel, no padding), or where
  v is the input zero point (real 0, what padding reads as: it adds 0 everywhere). A
  SAME k×k convolution reading a constant other than the zero point sees it only where
  its window is inside the input: position-dependent, so the channel stays.
* DEPTHWISE_CONV_2D computes from it a channel that is itself input-independent: its
  value at each position is evaluated here (bias plus the taps that fall inside the
  input); when it is the same everywhere (always when v is the zero point) the
  depthwise channel is constant too and goes the same way, and so does its input.
* AVERAGE_POOL_2D / MAX_POOL_2D pass a constant through (clamped by their activation).

Propagation also finds channels computed only from removed constants (a depthwise
channel of a dead one, a filter that reads only constant channels). A tensor that is a
model output, is read by any other op (ADD, CONCATENATION, ...), is read twice or is
not int8 keeps all its channels, and so does any channel a reader cannot take exactly.
At least one channel of every tensor stays, and a depthwise layer keeps a multiple of
DEPTHWISE_CHANNEL_MULTIPLE channels where removing fewer of them can give one. The kept
channels' arithmetic is unchanged: their filters, per-channel scales and biases are
sliced, and folding only adds to a bias (a new one where the layer had none) the exact
integer the removed inputs contributed (checked to keep the kernels' accumulator
bound). Each changed op records what it lost in `op.removed` (original
channel indices) and `op.notes` (the layer's C comment, kiln.json).
"""

from __future__ import annotations

import copy

import numpy as np

from ..ir import Graph, Op, Quant, Tensor, same_quant
from ..numerics import activation_range, quantize_multiplier, requantize

_CONV, _DW, _FC = "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"
_POOLS = ("AVERAGE_POOL_2D", "MAX_POOL_2D")
_INT32_MAX = (1 << 31) - 1

Consts = dict[int, dict[int, int]]          # tensor id → {channel: its int8 value}

# A depthwise layer keeps a multiple of this many channels (a few removable ones stay):
# kiln's SIMD 3x3 depthwise kernels take C % 4 == 0, the others cost more per MAC or
# more code. On VWW (QEMU mps2-an386) keeping up to 3 more channels per depthwise layer
# gave 9.17M instructions instead of 9.52M and 3.9 KB less code (no second depthwise
# kernel); with the pixel-pair kernels (any C) 8.82M instead of 8.84M, code 24.6 KB
# instead of 28.5 KB.
DEPTHWISE_CHANNEL_MULTIPLE = 4


def dead_filters(graph: Graph) -> Graph:
    """A copy of `graph` with this pass applied (the graph itself is unchanged)."""
    return dead_filters_in_place(copy.deepcopy(graph))


def dead_filters_in_place(graph: Graph) -> Graph:
    consts = _constant_channels(graph)
    if not any(consts.values()):
        return graph
    removed = _removable(graph, consts)
    if any(removed.values()):
        _rewrite(graph, consts, removed)
    return graph


# -- which ops the pass understands ----------------------------------------------------------

def _scales_ok(q: Quant) -> bool:
    """Finite positive scales (a hostile model's NaN or 0 is codegen's to refuse)."""
    scale = np.asarray(q.scale, dtype=np.float64)
    return bool(scale.size and np.all(np.isfinite(scale)) and np.all(scale > 0))


def _per_tensor_int8(t: Tensor) -> bool:
    return (t.dtype == "int8" and t.quant is not None and not t.quant.per_channel
            and _scales_ok(t.quant) and not t.is_const and not t.is_variable)


_ACTIVATIONS = ("NONE", None, "RELU", "RELU6", "RELU_N1_TO_1")


def _eligible(graph: Graph, op: Op) -> bool:
    """An int8 op whose channels the pass can reason about: per-tensor activations,
    constant int8 weights with zero point 0 (channel axis where kiln's kernels expect it),
    a constant int32 bias or none."""
    if not op.inputs or op.inputs[0] < 0 or len(op.outputs) != 1:
        return False
    x, y = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
    if not (_per_tensor_int8(x) and _per_tensor_int8(y)) or not x.shape or not y.shape:
        return False
    # an activation codegen does not know is left for its one-line refusal
    if op.options.get("fused_activation_function", "NONE") not in _ACTIVATIONS:
        return False
    if op.type in _POOLS:
        return len(op.inputs) == 1 and len(x.shape) == 4 and same_quant(x.quant, y.quant)
    if op.type not in (_CONV, _DW, _FC) or len(op.inputs) < 2 or op.inputs[1] < 0:
        return False
    w = graph.tensor(op.inputs[1])
    b = graph.tensor(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    if (not w.is_const or w.dtype != "int8" or w.quant is None or not _scales_ok(w.quant)
            or np.any(w.quant.zero_point != 0)):
        return False
    if b is not None and (not b.is_const or b.dtype != "int32"):
        return False
    out_c = int(y.shape[-1])
    if w.quant.per_channel and (w.quant.scale.size != out_c
                                or w.quant.axis != (3 if op.type == _DW else 0)):
        return False
    if b is not None and b.size != out_c:
        return False
    if op.type == _FC:
        return (len(w.shape) == 2 and int(w.shape[0]) == out_c
                and int(w.shape[1]) == int(x.shape[-1]))
    if len(x.shape) != 4 or len(w.shape) != 4 or len(y.shape) != 4:
        return False
    if op.type == _CONV:
        return int(w.shape[0]) == out_c and int(w.shape[3]) == int(x.shape[3])
    mult = int(op.options.get("depth_multiplier", 1)) or 1
    return (int(w.shape[0]) == 1 and int(w.shape[3]) == out_c
            and out_c == int(x.shape[3]) * mult)


def _bias(graph: Graph, op: Op, out_c: int) -> np.ndarray:
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        return graph.tensor(op.inputs[2]).data.astype(np.int64).reshape(-1)
    return np.zeros(out_c, np.int64)


def _filters(op: Op, w: np.ndarray) -> np.ndarray:
    """The weights as [output channel, taps (, input channel)]: CONV_2D [o, kh*kw, c],
    DEPTHWISE_CONV_2D [o, kh*kw], FULLY_CONNECTED [o, 1, depth]."""
    w = w.astype(np.int64)
    if op.type == _DW:
        return w.reshape(-1, w.shape[-1]).T
    if op.type == _FC:
        return w[:, None, :]
    return w.reshape(w.shape[0], -1, w.shape[-1])


def _requant_const(graph: Graph, op: Op, acc: np.ndarray,
                   channels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The int8 outputs of accumulators `acc` (any shape, last axis = `channels`):
    requantize with each channel's multiplier, add the zero point, clamp (TFLM's order;
    the multiplier as TFLite derives it, in double). And per channel whether that is
    defined: a multiplier of 2^30 or more (codegen refuses it) has no exact value."""
    x, w, y = (graph.tensor(t) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    x_scale, _ = x.quant.single()
    y_scale, y_zp = y.quant.single()
    scales = w.quant.scale.astype(np.float32)
    pairs = [quantize_multiplier(float(x_scale) * float(scales[c if scales.size > 1 else 0])
                                 / float(y_scale)) for c in channels]
    mult = np.array([m for m, _ in pairs], np.int64)
    shift = np.array([s for _, s in pairs], np.int64)
    lo, hi = activation_range(op.options.get("fused_activation_function", "NONE"),
                              y_scale, y_zp)
    ok = shift <= 30
    shift = np.where(ok, shift, 0)
    return np.clip(requantize(acc, mult, shift) + y_zp, lo, hi), ok


def _bounded(bias, abs_weight_sum):
    """The int8 accumulator bound codegen checks (|bias| + 256 · Σ|w| within int32):
    inside it TFLM's int32 sums cannot wrap, so the int64 ones here are its values."""
    return np.abs(bias) + 256 * abs_weight_sum <= _INT32_MAX


def _valid_taps(op: Op, x: Tensor, y: Tensor, k_hw: tuple[int, int]) -> np.ndarray:
    """[out_h, out_w, kh*kw] bool: which taps of each output position fall inside the
    input (TFLite's SAME/VALID geometry; the output size is the tensor's)."""
    o = op.options
    masks = []
    for axis, k in enumerate(k_hw):
        n_in, n_out = int(x.shape[1 + axis]), int(y.shape[1 + axis])
        s = int(o.get("stride_h" if axis == 0 else "stride_w", 1))
        d = int(o.get("dilation_h_factor" if axis == 0 else "dilation_w_factor", 1))
        eff = (k - 1) * d + 1
        pad = (max(0, (n_out - 1) * s + eff - n_in) // 2
               if o.get("padding", "VALID") == "SAME" else 0)
        pos = np.arange(n_out)[:, None] * s - pad + np.arange(k)[None, :] * d
        masks.append((pos >= 0) & (pos < n_in))
    h, w = masks
    return (h[:, None, :, None] & w[None, :, None, :]).reshape(h.shape[0], w.shape[0], -1)


def _padding_free(op: Op, x: Tensor, y: Tensor, w: Tensor) -> bool:
    """Every output position of a convolution reads every tap (an FC always does)."""
    if op.type == _FC:
        return True
    return bool(_valid_taps(op, x, y, (int(w.shape[1]), int(w.shape[2]))).all())


# -- forward: which channels are constant --------------------------------------------------

def _constant_channels(graph: Graph) -> Consts:
    consts: Consts = {}
    for op in graph.ops:
        if not _eligible(graph, op):
            continue
        x, y = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
        root = graph.storage_root(x.id)     # a view keeps the channels if its last axis does
        root_shape = graph.tensor(root).shape
        cin = consts.get(root, {}) if root_shape and int(x.shape[-1]) == int(root_shape[-1]) \
            else {}
        found = {_POOLS[0]: _pool_consts, _POOLS[1]: _pool_consts, _DW: _dw_consts}.get(
            op.type, _conv_consts)(graph, op, cin)
        if found:
            consts[y.id] = found
    return consts


def _pool_consts(graph: Graph, op: Op, cin: dict[int, int]) -> dict[int, int]:
    """An average of equal values is that value (TFLM rounds the sum / count back to it),
    so is a max; then the activation clamps it."""
    y = graph.tensor(op.outputs[0])
    lo, hi = activation_range(op.options.get("fused_activation_function", "NONE"),
                              *y.quant.single())
    return {c: int(np.clip(v, lo, hi)) for c, v in cin.items()}


def _dw_consts(graph: Graph, op: Op, cin: dict[int, int]) -> dict[int, int]:
    x, w, y = (graph.tensor(t) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    out_c = int(y.shape[-1])
    mult = out_c // int(x.shape[-1])
    taps = _filters(op, w.data)                               # [o, kh*kw]
    bias = _bias(graph, op, out_c)
    zp = x.quant.single()[1]
    valid = None
    found = {}
    for o in range(out_c):
        v = cin.get(o // mult)
        if not taps[o].any() or v == zp:
            acc = np.array([bias[o]])                        # no tap adds anything
        elif v is not None:
            if valid is None:
                valid = _valid_taps(op, x, y, (int(w.shape[1]), int(w.shape[2])))
            acc = (bias[o] + (v - zp) * (valid * taps[o]).sum(axis=-1)).reshape(-1)
        else:
            continue
        values, ok = _requant_const(graph, op, acc, np.array([o]))
        values = np.unique(values)
        if values.size == 1 and ok[0] and _bounded(bias[o], np.abs(taps[o]).sum()):
            found[o] = int(values[0])
    return found


def _conv_consts(graph: Graph, op: Op, cin: dict[int, int]) -> dict[int, int]:
    """A filter that reads only constant channels, each either the zero point or with no
    padding, accumulates a constant (an all-zero filter reads none)."""
    x, w, y = (graph.tensor(t) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    out_c = int(y.shape[-1])
    filt = _filters(op, w.data)                               # [o, taps, c]
    used = filt.any(axis=1)                                   # [o, c]
    zp = x.quant.single()[1]
    const_c = np.zeros(used.shape[1], bool)
    delta = np.zeros(used.shape[1], np.int64)
    for c, v in cin.items():
        const_c[c] = True
        delta[c] = v - zp
    if (delta != 0).any() and not _padding_free(op, x, y, w):
        const_c &= delta == 0
    live = ~(used & ~const_c[None, :]).any(axis=1)            # reads nothing else
    chans = np.flatnonzero(live)
    if chans.size == 0:
        return {}
    acc = _bias(graph, op, out_c)[chans] + (filt[chans].sum(axis=1) * delta[None, :]).sum(axis=1)
    values, ok = _requant_const(graph, op, acc, chans)
    ok &= _bounded(_bias(graph, op, out_c)[chans], np.abs(filt[chans]).sum(axis=(1, 2)))
    return {c: v for c, v, good in zip(chans.tolist(), values.tolist(), ok) if good}


# -- backward: which constant channels every reader can take ---------------------------------

def _views(graph: Graph, tid: int) -> list[int]:
    """`tid` and the reshape views of its memory (transitively)."""
    out, todo = [tid], [tid]
    while todo:
        t = todo.pop()
        for v in graph.tensors:
            if v.alias_of == t:
                out.append(v.id)
                todo.append(v.id)
    return out


def _fold_ok(graph: Graph, op: Op, cin: dict[int, int]) -> bool:
    """Folding every constant input channel keeps the kernels' accumulator bound
    (|bias| + 256 · Σ|w| within int32, what codegen checks of an int8 layer)."""
    x, w = graph.tensor(op.inputs[0]), graph.tensor(op.inputs[1])
    filt = _filters(op, w.data)
    zp = x.quant.single()[1]
    worst = np.abs(_bias(graph, op, filt.shape[0])) + 256 * np.abs(filt).sum(axis=(1, 2))
    for c, v in cin.items():
        worst += np.abs(filt[:, :, c].sum(axis=1) * (v - zp))
    return bool(worst.max(initial=0) <= _INT32_MAX)


def _removable(graph: Graph, consts: Consts) -> dict[int, set[int]]:
    """tensor id → the channels to remove. First the candidates, readers before writers
    (a depthwise or pool reader takes channel c if its own output drops c's channels);
    then, writers before readers, a depthwise or pool output loses exactly the channels
    its input lost (its kernel needs input and output channels to match)."""
    readers: dict[int, list[Op]] = {}
    for op in graph.ops:
        for t in op.inputs:
            if t >= 0:
                readers.setdefault(t, []).append(op)
    outputs = set(graph.outputs)
    cand: dict[int, set[int]] = {}
    for op in reversed(graph.ops):
        if len(op.outputs) != 1 or op.outputs[0] not in consts or not _eligible(graph, op):
            continue
        t = op.outputs[0]
        channels = int(graph.tensor(t).shape[-1])
        keep = set(consts[t])
        for v in _views(graph, t):
            view = graph.tensor(v)
            if v in outputs or view.is_variable or int(view.shape[-1]) != channels:
                keep = set()
            for reader in readers.get(v, []):
                if reader.inputs.count(v) != 1 or reader.inputs[0] != v \
                        or not _eligible(graph, reader):
                    keep = set()
                elif reader.type in (_CONV, _FC):
                    # The zero point adds nothing anywhere; another constant folds only
                    # where every position reads every tap and the bias bound holds.
                    zero = {c for c in keep if consts[t][c] == view.quant.single()[1]}
                    w, y = graph.tensor(reader.inputs[1]), graph.tensor(reader.outputs[0])
                    if not (_padding_free(reader, view, y, w)
                            and _fold_ok(graph, reader, {c: consts[t][c] for c in keep})):
                        keep = zero
                else:                                         # depthwise, pool
                    out = reader.outputs[0]
                    m = int(graph.tensor(out).shape[-1]) // channels
                    keep = {c for c in keep
                            if all(c * m + j in cand.get(out, ()) for j in range(m))}
        if len(keep) == channels:                             # one channel stays
            keep.discard(max(keep))
        if any(r.type == _DW for v in _views(graph, t) for r in readers.get(v, [])):
            # keep fewer, up to the next multiple of channels left (none if it leaves none)
            fewer = len(keep) - (len(keep) - channels) % DEPTHWISE_CHANNEL_MULTIPLE
            if fewer >= 0:
                keep -= set(sorted(keep)[fewer:])
        cand[t] = keep
    removed: dict[int, set[int]] = {}
    for op in graph.ops:
        if len(op.outputs) != 1 or op.outputs[0] not in cand:
            continue
        t = op.outputs[0]
        if op.type in (_CONV, _FC):
            removed[t] = cand[t]
        else:                                                 # follows its input
            src = graph.storage_root(op.inputs[0])
            m = int(graph.tensor(t).shape[-1]) // int(graph.tensor(op.inputs[0]).shape[-1])
            removed[t] = {c * m + j for c in removed.get(src, ()) for j in range(m)}
            assert removed[t] <= cand[t]
    return removed


# -- rewrite -------------------------------------------------------------------------------

def _ranges(channels) -> str:
    """[0, 1, 2, 5] → '0-2, 5'."""
    out, run = [], []
    for c in sorted(channels):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
    return ", ".join(out)


def _own_const(graph: Graph, op: Op, slot: int, data: np.ndarray, quant: Quant | None) -> None:
    """Give input `slot` of `op` the constant `data` (a new tensor: the old one may be
    shared with another op, or be a TFLite buffer other tensors view)."""
    old = graph.tensor(op.inputs[slot])
    tid = len(graph.tensors)
    graph.tensors.append(Tensor(id=tid, name=old.name, shape=tuple(data.shape), dtype=old.dtype,
                                quant=quant, data=data))
    op.inputs[slot] = tid


def _sliced_quant(q: Quant | None, keep: np.ndarray) -> Quant | None:
    if q is None or not q.per_channel:
        return q
    return Quant(scale=q.scale[keep], zero_point=q.zero_point[keep], axis=q.axis)


def _rewrite(graph: Graph, consts: Consts, removed: dict[int, set[int]]) -> None:
    for op in graph.ops:
        if not _eligible(graph, op):
            continue
        x_id, y_id = op.inputs[0], op.outputs[0]
        src = graph.storage_root(x_id)
        gone_in = removed.get(src, set())
        gone_out = removed.get(y_id, set())
        if not gone_in and not gone_out:
            continue
        if gone_out:
            op.removed["outputs"] = sorted(gone_out)
            _note_outputs(graph, op, gone_out)
        if gone_in:
            op.removed["inputs"] = sorted(gone_in)
        if op.type in (_CONV, _FC):
            _rewrite_conv(graph, op, consts.get(src, {}), gone_in, gone_out)
        elif op.type == _DW:
            _rewrite_dw(graph, op, gone_out)
    for tid, gone in removed.items():
        if not gone:
            continue
        for v in _views(graph, tid):
            t = graph.tensor(v)
            # The name stays (kiln validate finds its float twin by it, and slices the
            # twin's channels by the op's `removed`).
            t.shape = tuple(t.shape[:-1]) + (int(t.shape[-1]) - len(gone),)


def _rewrite_conv(graph: Graph, op: Op, cin: dict[int, int], gone_in: set[int],
                  gone_out: set[int]) -> None:
    x, w, y = (graph.tensor(t) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    out_c = int(y.shape[-1])
    bias = _bias(graph, op, out_c)
    if gone_in:
        filt = _filters(op, w.data)
        zp = x.quant.single()[1]
        for c in gone_in:
            bias = bias + filt[:, :, c].sum(axis=1) * (cin[c] - zp)
        folded = [c for c in gone_in if cin[c] != zp]
        op.notes.append(
            f"input channels removed, {len(gone_in)} of {x.shape[-1]}: {_ranges(gone_in)}; "
            "constants the layer writing them no longer computes, "
            + (f"{_ranges(folded)} folded into the bias, the others the zero point (adding "
               "nothing)" if folded else "all the zero point (adding nothing)"))
    keep_out = np.array([c for c in range(out_c) if c not in gone_out], np.int64)
    keep_in = np.array([c for c in range(int(w.shape[-1])) if c not in gone_in], np.int64)
    data = w.data[keep_out][..., keep_in]
    _own_const(graph, op, 1, data, _sliced_quant(w.quant, keep_out))
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        b = graph.tensor(op.inputs[2])
        _own_const(graph, op, 2, bias[keep_out].astype(np.int32), _sliced_quant(b.quant, keep_out))
    elif bias.any():                      # folding gave a layer without a bias one
        scale = x.quant.scale.astype(np.float64) * w.quant.scale.astype(np.float64)
        quant = Quant(scale=scale.astype(np.float32)[keep_out if scale.size > 1 else [0]],
                      zero_point=np.zeros(keep_out.size if scale.size > 1 else 1, np.int64))
        tid = len(graph.tensors)
        graph.tensors.append(Tensor(id=tid, name=f"{w.name};kiln: folded bias",
                                    shape=(keep_out.size,), dtype="int32", quant=quant,
                                    data=bias[keep_out].astype(np.int32)))
        op.inputs = op.inputs[:2] + [tid] + op.inputs[3:]


def _rewrite_dw(graph: Graph, op: Op, gone_out: set[int]) -> None:
    w, y = graph.tensor(op.inputs[1]), graph.tensor(op.outputs[0])
    keep = np.array([c for c in range(int(y.shape[-1])) if c not in gone_out], np.int64)
    _own_const(graph, op, 1, w.data[..., keep], _sliced_quant(w.quant, keep))
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        b = graph.tensor(op.inputs[2])
        _own_const(graph, op, 2, b.data[keep], _sliced_quant(b.quant, keep))


def _note_outputs(graph: Graph, op: Op, gone: set[int]) -> None:
    """Why the removed output channels are constants, grouped by reason (before the op's
    weights are sliced)."""
    if op.type in (_CONV, _FC):
        filt = _filters(op, graph.tensor(op.inputs[1]).data)
        zero = {c for c in gone if not filt[c].any()}
    else:                      # depthwise and pools lose the channels their input lost
        zero = set()
    reasons = [(zero, "all-zero filter, outputs clamp(requantize(bias))"),
               (gone - zero, "reads only removed constant channels" if op.type in (_CONV, _FC)
                else "its input channel is a removed constant")]
    y = graph.tensor(op.outputs[0])
    parts = [f"{_ranges(cs)} ({why})" for cs, why in reasons if cs]
    op.notes.append(f"output channels removed, {len(gone)} of {y.shape[-1]}: "
                    + "; ".join(parts) + f"; each is one value at every position whatever "
                    f"the input, which the layers reading {y.c_name} take in")
