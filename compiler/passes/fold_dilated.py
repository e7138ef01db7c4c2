"""Fold TF's emulated dilated convolution back into one dilated convolution.

TF writes a stride-1 dilated convolution it cannot run directly as a convolution over a
batch-expanded tensor (tf.nn.with_space_to_batch):

    SPACE_TO_BATCH_ND → [EXPAND_DIMS] → CONV_2D | DEPTHWISE_CONV_2D → [SQUEEZE]
        → [ADD bias] → [PAD] → BATCH_TO_SPACE_ND

(the EXPAND_DIMS/SQUEEZE pair, or RESHAPEs doing the same, adapts a 3-D NLC tensor to
the 4-D convolution; RESHAPE is also how a converter may write them). TF's converter
folds this back (its dilated-conv pass), except where a dimension is dynamic: Keras
models exported with a `None` batch keep the pattern, with batch 1 written in place of
the unknown batch of every tensor inside it. This pass folds it into one convolution
with dilation = block and SAME or VALID padding, so no batch-expanded tensor is kept.

Why it is exact. Along one spatial axis (input length L, block d, S2B paddings p0/p1,
kernel k, B2S crops c0/c1) the pattern computes, for every output j < Lo,
    out[j] = Σ_t w[t] · Xp[j + c0 + t·d],   Xp = X padded with p0 / p1 zero points,
    Lo = L + p0 + p1 - (k - 1)·d - c0 - c1,
because sub-image r of the S2B output holds Xp[r], Xp[r + d], ... and B2S interleaves
the sub-images back. That is a dilated convolution whose padding before is p0 - c0: it
is VALID when p0 - c0 = 0 and Lo = L - (k - 1)·d, and SAME (stride 1: before =
(k - 1)·d // 2) when p0 - c0 = (k - 1)·d // 2 and Lo = L. The convolution reads its
padding as the input zero point, which is what TFLite's SPACE_TO_BATCH_ND pads with
(tflite-micro pads with whatever its uninitialised params hold, so a padded pattern has
no defined TFLM result; kiln matches TFLite's). The quantized arithmetic per output is
unchanged (same filter, bias, scales). A bias ADD (a constant varying along channels
only) commutes with B2S; a PAD after the convolution that the crops remove entirely
only shortens the crop. Anything else (other crops, strides, an op in between, a
tensor read twice) is left alone: SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND then run as
they are, with the batch of the tensors inside the pattern set to the batch they hold
when the model wrote 1 for an unknown batch.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from ..ir import Graph, Op, Tensor, same_quant

_CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D")
_EXPANDS = ("EXPAND_DIMS", "RESHAPE")
_SQUEEZES = ("SQUEEZE", "RESHAPE")


@dataclass
class _Chain:
    """A matched S2B → … → B2S pattern."""

    s2b: Op
    conv: Op
    b2s: Op
    expand: Op | None          # rank-3 input: the op adding the unit axis
    squeeze: Op | None
    bias: Op | None
    pad: Op | None
    unit_axis: int             # 1 or 2: where the rank-3 case inserts its unit axis
    block: list[int]
    paddings: list[list[int]]
    crops: list[list[int]]     # after dropping the PAD
    pad_after: list[int]       # the PAD's spatial padding (0 without one)

    def inner_ops(self) -> list[Op]:
        return [op for op in (self.expand, self.conv, self.squeeze, self.bias, self.pad)
                if op is not None]


def fold_dilated(graph: Graph) -> Graph:
    """A copy of `graph` with this pass applied (the graph itself is unchanged)."""
    return fold_dilated_in_place(copy.deepcopy(graph))


def fold_dilated_in_place(graph: Graph) -> Graph:
    for op in [op for op in graph.ops if op.type == "SPACE_TO_BATCH_ND"]:
        chain = _match(graph, op)
        if chain is None:
            continue
        padding = _fold_padding(graph, chain)
        if padding is None:
            _repair_batch(graph, chain)
            continue
        _rewrite(graph, chain, padding)
        gone = {id(o) for o in (chain.s2b, chain.pad, chain.b2s) if o is not None}
        graph.ops = [o for o in graph.ops if id(o) not in gone]
    return graph


# --------------------------------------------------------------------------- matching


def _const_ints(graph: Graph, tid: int) -> np.ndarray | None:
    if tid < 0:
        return None
    t = graph.tensor(tid)
    if not t.is_const or t.dtype not in ("int32", "int64"):
        return None
    return np.asarray(t.data, dtype=np.int64)


def _same_quant(a: Tensor, b: Tensor) -> bool:
    return same_quant(a.quant, b.quant)


# Inputs each op of the pattern must have (a hostile model may give fewer).
_ARITY = {"SPACE_TO_BATCH_ND": 3, "BATCH_TO_SPACE_ND": 3, "EXPAND_DIMS": 2, "RESHAPE": 1,
          "SQUEEZE": 1, "CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "ADD": 2, "PAD": 2, "PADV2": 2}


def _well_formed(op: Op) -> bool:
    n = _ARITY.get(op.type, 1)
    return len(op.outputs) == 1 and len(op.inputs) >= n and all(i >= 0 for i in op.inputs[:n])


def _only_reader(graph: Graph, consumers: dict[int, list[int]], tid: int) -> Op | None:
    """The op that alone reads `tid`, once, as its first input, if `tid` is no model
    output (an ADD may read it second: bias + y)."""
    readers = consumers.get(tid, [])
    if len(readers) != 1 or tid in graph.outputs:
        return None
    op = graph.ops[readers[0]]
    if not _well_formed(op) or op.inputs.count(tid) != 1:
        return None
    return op if op.inputs[0] == tid or op.type == "ADD" else None


def _match(graph: Graph, s2b: Op) -> _Chain | None:
    if not _well_formed(s2b):
        return None
    consumers = graph.consumers()
    x = graph.tensor(s2b.inputs[0])
    block = _const_ints(graph, s2b.inputs[1])
    pads = _const_ints(graph, s2b.inputs[2])
    rank = len(x.shape)
    if block is None or pads is None or rank not in (3, 4):
        return None
    spatial = rank - 2
    if block.size != spatial or pads.shape != (spatial, 2) or (block < 1).any() or (pads < 0).any():
        return None
    if not _same_quant(x, graph.tensor(s2b.outputs[0])):
        return None
    nxt = _only_reader(graph, consumers, s2b.outputs[0])
    expand = squeeze = bias = pad = None
    unit_axis = 0
    if rank == 3:
        if nxt is None or nxt.type not in _EXPANDS:
            return None
        expand, unit_axis = nxt, _unit_axis(graph, nxt)
        if unit_axis not in (1, 2):
            return None
        nxt = _only_reader(graph, consumers, expand.outputs[0])
    if nxt is None or nxt.type not in _CONVS or nxt.inputs[0] != _last_out(s2b, expand):
        return None
    conv = nxt
    if not _plain_valid_conv(graph, conv):
        return None
    nxt = _only_reader(graph, consumers, conv.outputs[0])
    if rank == 3:
        if (nxt is None or nxt.type not in _SQUEEZES
                or _unit_axis(graph, nxt, squeeze=True) != unit_axis):
            return None
        squeeze = nxt
        nxt = _only_reader(graph, consumers, squeeze.outputs[0])
    if nxt is not None and nxt.type == "ADD" and _channel_constant(
            graph, nxt, (squeeze or conv).outputs[0]):
        bias = nxt
        nxt = _only_reader(graph, consumers, bias.outputs[0])
    after = [0] * spatial
    if nxt is not None and nxt.type in ("PAD", "PADV2"):
        after = _end_only_padding(graph, nxt, rank)
        if after is None or not _same_quant(graph.tensor(nxt.inputs[0]),
                                            graph.tensor(nxt.outputs[0])):
            return None
        pad = nxt
        nxt = _only_reader(graph, consumers, pad.outputs[0])
    if nxt is None or nxt.type != "BATCH_TO_SPACE_ND":
        return None
    b2s = nxt
    b2s_block = _const_ints(graph, b2s.inputs[1])
    crops = _const_ints(graph, b2s.inputs[2])
    if b2s_block is None or crops is None or b2s_block.reshape(-1).tolist() != block.tolist():
        return None
    if crops.shape != (spatial, 2) or (crops < 0).any():
        return None
    crops = crops.tolist()
    for i, a in enumerate(after):
        if crops[i][1] < a * int(block[i]):
            return None               # the PAD's values would reach the output
        crops[i][1] -= a * int(block[i])
    if not _same_quant(graph.tensor(b2s.inputs[0]), graph.tensor(b2s.outputs[0])):
        return None
    return _Chain(s2b, conv, b2s, expand, squeeze, bias, pad, unit_axis,
                  block.tolist(), pads.tolist(), crops, after)


def _last_out(s2b: Op, expand: Op | None) -> int:
    return (expand or s2b).outputs[0]


def _unit_axis(graph: Graph, op: Op, squeeze: bool = False) -> int:
    """The axis a rank-3 → rank-4 view inserts (or, `squeeze`, a 4 → 3 view removes);
    -1 if the op is no such view."""
    src, dst = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
    small, big = (dst, src) if squeeze else (src, dst)
    if len(small.shape) != 3 or len(big.shape) != 4:
        return -1
    if op.type == "SQUEEZE":
        dims = [int(d) + 4 if int(d) < 0 else int(d) for d in op.options.get("squeeze_dims", [])]
        return dims[0] if len(dims) == 1 else -1
    if op.type == "EXPAND_DIMS":
        axis = _const_ints(graph, op.inputs[1]) if len(op.inputs) > 1 else None
        if axis is None or axis.size != 1:
            return -1
        a = int(axis.reshape(-1)[0])
        return a + 4 if a < 0 else a
    # RESHAPE: the unit axis is where the shapes differ (batch aside: it may be a
    # placeholder 1 in either tensor).
    for a in (1, 2):
        if list(big.shape[1:]) == (list(small.shape[:a]) + [1] + list(small.shape[a:]))[1:]:
            return a
    return -1


def _plain_valid_conv(graph: Graph, conv: Op) -> bool:
    o = conv.options
    w = graph.tensor(conv.inputs[1]) if len(conv.inputs) > 1 and conv.inputs[1] >= 0 else None
    return (o.get("padding", "VALID") == "VALID"
            and all(int(o.get(k, 1)) == 1 for k in ("stride_h", "stride_w",
                                                   "dilation_h_factor", "dilation_w_factor"))
            and w is not None and len(w.shape) == 4
            and len(graph.tensor(conv.inputs[0]).shape) == 4)


def _channel_constant(graph: Graph, add: Op, tid: int) -> bool:
    """An ADD of `tid` and a constant that varies along the channel axis only (a bias)."""
    if len(add.inputs) != 2:
        return False
    c = graph.tensor(add.inputs[1] if add.inputs[0] == tid else add.inputs[0])
    y = graph.tensor(add.outputs[0])
    return c.is_const and all(int(e) == 1 for e in c.shape[:-1]) and len(c.shape) <= len(y.shape)


def _end_only_padding(graph: Graph, pad: Op, rank: int) -> list[int] | None:
    """The spatial 'after' paddings of a PAD that pads spatial axes at their end only."""
    p = _const_ints(graph, pad.inputs[1])
    if p is None or p.shape != (rank, 2):
        return None
    if (p[:, 0] != 0).any() or p[0, 1] != 0 or p[-1, 1] != 0 or (p < 0).any():
        return None
    return [int(v) for v in p[1:-1, 1]]


# --------------------------------------------------------------------------- geometry


def _conv_axes(chain: _Chain) -> list[int]:
    """For each spatial axis of the S2B input, the convolution axis (1 = h, 2 = w)."""
    if len(chain.block) == 2:
        return [1, 2]
    return [2 if chain.unit_axis == 1 else 1]


def _fold_padding(graph: Graph, chain: _Chain) -> str | None:
    """"SAME" or "VALID" if the pattern is that dilated convolution, else None."""
    x = graph.tensor(chain.s2b.inputs[0])
    w = graph.tensor(chain.conv.inputs[1])
    out = graph.tensor(chain.b2s.outputs[0])
    s2b_out, b2s_in = graph.tensor(chain.s2b.outputs[0]), graph.tensor(chain.b2s.inputs[0])
    names = {"SAME", "VALID"}
    for i, axis in enumerate(_conv_axes(chain)):
        size, d, k = int(x.shape[1 + i]), chain.block[i], int(w.shape[axis])
        (p0, p1), (c0, c1) = chain.paddings[i], chain.crops[i]
        span = (k - 1) * d
        length = size + p0 + p1 - span - c0 - c1
        if length != int(out.shape[1 + i]) or (size + p0 + p1) % d:
            return None
        # The tensors inside hold what the pattern computes (no shape to fold away).
        sub = (size + p0 + p1) // d
        if (int(s2b_out.shape[1 + i]) != sub
                or int(b2s_in.shape[1 + i]) != sub - k + 1 + chain.pad_after[i]):
            return None
        fits = set()
        if p0 - c0 == 0 and length == size - span:
            fits.add("VALID")
        if p0 - c0 == span // 2 and length == size:
            fits.add("SAME")
        names &= fits
    # A rank-3 pattern's unit axis has a 1-tap filter: SAME and VALID agree on it.
    if len(chain.block) == 1 and int(w.shape[chain.unit_axis]) != 1:
        return None
    if int(x.shape[0]) != int(out.shape[0]):
        return None
    return "VALID" if "VALID" in names else ("SAME" if names else None)


def _true_batch(graph: Graph, chain: _Chain) -> int:
    return int(graph.tensor(chain.s2b.inputs[0]).shape[0]) * math.prod(chain.block)


# --------------------------------------------------------------------------- rewriting


def _set_shape(t: Tensor, shape: list[int]) -> None:
    t.shape = tuple(int(e) for e in shape)


def _rewrite(graph: Graph, chain: _Chain, padding: str) -> None:
    x = graph.tensor(chain.s2b.inputs[0])
    y = graph.tensor(chain.b2s.outputs[0])
    n, c_out = int(x.shape[0]), int(y.shape[-1])
    out_spatial = [int(e) for e in y.shape[1:-1]]
    dilation = [1, 1]
    for i, axis in enumerate(_conv_axes(chain)):
        dilation[axis - 1] = chain.block[i]
    conv_in = x.id
    if chain.expand is not None:
        e = graph.tensor(chain.expand.outputs[0])
        shape = list(x.shape)
        shape.insert(chain.unit_axis, 1)
        _set_shape(e, shape)
        chain.expand.inputs[0] = x.id
        if chain.expand.type == "RESHAPE":      # its target shape is the output's now
            chain.expand.inputs = [x.id]
            chain.expand.options = {}
        conv_in = e.id
    conv_out = [n] + out_spatial + [c_out]
    if chain.expand is not None:
        conv_out.insert(chain.unit_axis, 1)
    chain.conv.inputs[0] = conv_in
    _set_shape(graph.tensor(chain.conv.outputs[0]), conv_out)
    chain.conv.options = {**chain.conv.options, "padding": padding,
                          "dilation_h_factor": dilation[0], "dilation_w_factor": dilation[1]}
    last = chain.conv
    if chain.squeeze is not None:
        _set_shape(graph.tensor(chain.squeeze.outputs[0]), list(y.shape))
        if chain.squeeze.type == "RESHAPE":
            chain.squeeze.inputs = [chain.squeeze.inputs[0]]
            chain.squeeze.options = {}
        last = chain.squeeze
    if chain.bias is not None:
        _set_shape(graph.tensor(chain.bias.outputs[0]), list(y.shape))
        last = chain.bias
    last.outputs[0] = y.id


def _repair_batch(graph: Graph, chain: _Chain) -> None:
    """Tensors inside an unfolded pattern hold N·prod(block) batches; a model exported
    with an unknown batch writes 1 there. Set them to what they hold."""
    batch = _true_batch(graph, chain)
    tids = [chain.s2b.outputs[0]] + [op.outputs[0] for op in chain.inner_ops()]
    for tid in tids:
        t = graph.tensor(tid)
        if int(t.shape[0]) == 1 and batch != 1:
            _set_shape(t, [batch] + list(t.shape[1:]))
