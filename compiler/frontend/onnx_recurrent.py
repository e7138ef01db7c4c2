"""ONNX LSTM and GRU (float; forward direction, layout 0, a static sequence length) in
kiln's IR. Registered in onnx_reader's _Converter as its _op_LSTM / _op_GRU methods:
each function here takes the converter as `self`.

LSTM → one UNIDIRECTIONAL_SEQUENCE_LSTM, time-major ([seq, batch, input]), the op TF's
converter writes for a Keras LSTM; quantize/lstm.py makes it the int8 (int16 cell)
layer tflite-micro runs. ONNX packs the gates i, o, f, c in W [1, 4H, I], R [1, 4H, H]
and B [1, 8H] (input biases, then recurrent biases); TFLite takes one [H, I] / [H, H]
matrix and one bias per gate, the two ONNX biases summed.

GRU (TFLite has no GRU op; TF's converter writes a WHILE loop, which tflite-micro runs
slowly if at all) → unrolled over the time steps into FULLY_CONNECTED, ADD, SUB, MUL,
LOGISTIC and TANH, with ONNX's gates z, r, h:
    z = σ(x Wzᵀ + h Rzᵀ + Wbz + Rbz)          r = σ(x Wrᵀ + h Rrᵀ + Wbr + Rbr)
    linear_before_reset 0:  ĥ = tanh(x Whᵀ + (r ⊙ h) Rhᵀ + Wbh + Rbh)
    linear_before_reset 1:  ĥ = tanh(x Whᵀ + r ⊙ (h Rhᵀ + Rbh) + Wbh)
    h' = ĥ + z ⊙ (h − ĥ)                       (= (1 − z) ⊙ ĥ + z ⊙ h)
At step 0 the state is zero (no initial_h), so its recurrent products are left out.

State: ONNX runs each sequence from a zero state (no initial_h / initial_c). kiln's LSTM
keeps its state variables from one run to the next as TFLite and tflite-micro do:
reset it (kiln_reset(); the Interpreter's reset()) before each sequence. The unrolled
GRU has no state between runs.

Refused, one line naming the attribute or input: direction other than forward,
activations other than the defaults, activation_alpha/beta, clip, input_forget, layout
1, peepholes (LSTM's P), an initial state or sequence_lens that is not constant zero /
the full length, and LSTM's Y_c (the final cell state stays inside the op).
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError

_DEFAULTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}
# A GRU is unrolled into up to 19 ops a step: a hostile length must not make millions (the
# same bound as control_flow.py's unrolled WHILE loops).
MAX_GRU_OPS = 20_000
_MAX_CONCAT_INPUTS = 10          # tflite-micro's CONCATENATION (concatenation.cc)
_GRU_OPS_PER_STEP = 19           # at most: slice, 6 FC, 12 elementwise and views


def _text(s) -> str:
    return s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s)


def _check_attributes(self, node, a: dict, gates: int) -> tuple[int, int, int, int]:
    """Refuse what kiln does not run; (seq, batch, input size, hidden size)."""
    kind = node.op_type
    where = self._where()
    direction = _text(a.get("direction", "forward"))
    if direction != "forward":
        raise ModelError(f"{where}: {kind} direction={direction} is not supported (forward only)")
    acts = [_text(s) for s in a.get("activations", _DEFAULTS[kind])]
    if [s.lower() for s in acts] != [s.lower() for s in _DEFAULTS[kind]]:
        raise ModelError(f"{where}: {kind} activations={acts} are not supported (the defaults "
                         f"{_DEFAULTS[kind]} only)")
    for name in ("activation_alpha", "activation_beta", "clip"):
        if name in a:
            raise ModelError(f"{where}: {kind} attribute {name} is not supported")
    if a.get("input_forget", 0):
        raise ModelError(f"{where}: {kind} input_forget=1 (coupled gates) is not supported")
    if a.get("layout", 0):
        raise ModelError(f"{where}: {kind} layout=1 (batch-major) is not supported (layout 0: "
                         "[seq, batch, input])")
    if kind == "LSTM" and len(node.input) > 7 and node.input[7]:
        raise ModelError(f"{where}: LSTM input P (peepholes) is not supported")
    shape = self._shape(node.input[0])
    if len(shape) != 3:
        raise ModelError(f"{where}: {kind} input X has shape {list(shape)} (3-D [seq, batch, "
                         "input] only)")
    seq, batch, depth = shape
    w = self._c(node, 1, "W")
    hidden = int(a.get("hidden_size", w.shape[1] // gates if w.ndim == 3 else 0))
    if min(seq, batch, depth, hidden) < 1:
        raise ModelError(f"{where}: {kind} with an empty dimension (sequence {seq}, batch "
                         f"{batch}, input {depth}, hidden_size {hidden})")
    if kind == "GRU" and seq * _GRU_OPS_PER_STEP > MAX_GRU_OPS:
        raise ModelError(f"{where}: GRU of {seq} steps: kiln unrolls a GRU into "
                         f"{_GRU_OPS_PER_STEP} ops a step, at most "
                         f"{MAX_GRU_OPS // _GRU_OPS_PER_STEP} steps")
    if w.shape != (1, gates * hidden, depth):
        raise ModelError(f"{where}: {kind} W has shape {list(w.shape)}, expected "
                         f"[1, {gates * hidden}, {depth}]")
    if tuple(self._c(node, 2, "R").shape) != (1, gates * hidden, hidden):
        raise ModelError(f"{where}: {kind} R has shape {list(self._c(node, 2).shape)}, "
                         f"expected [1, {gates * hidden}, {hidden}]")
    if len(node.input) > 4 and node.input[4]:
        lens = self._c(node, 4, "sequence_lens")
        if lens.size != batch or np.any(lens.reshape(-1) != seq):
            raise ModelError(f"{where}: {kind} sequence_lens {lens.reshape(-1).tolist()} are not "
                             f"the full length {seq} (a static sequence length only)")
    for i, name in ((5, "initial_h"), (6, "initial_c")):
        if i < len(node.input) and node.input[i] and (name == "initial_h" or kind == "LSTM"):
            if node.input[i] not in self.consts or np.any(self.consts[node.input[i]] != 0):
                raise ModelError(f"{where}: {kind} input {name} is not supported (the state "
                                 "starts at zero)")
    return seq, batch, depth, hidden


def _bias(self, node, gates: int, hidden: int) -> np.ndarray:
    """B [1, 2·gates·H] as ([gates, H] input biases, [gates, H] recurrent biases)."""
    if len(node.input) > 3 and node.input[3]:
        b = self._c(node, 3, "B").astype(np.float32)
        if b.shape != (1, 2 * gates * hidden):
            raise ModelError(f"{self._where()}: {node.op_type} B has shape {list(b.shape)}, "
                             f"expected [1, {2 * gates * hidden}]")
        return b.reshape(2, gates, hidden)
    return np.zeros((2, gates, hidden), np.float32)


def _used(self, value: str) -> bool:
    return bool(value) and (value in self.outputs or bool(self.consumers.get(value)))


def _reshape(self, tid: int, shape, name: str) -> int:
    out = self._tensor(name, shape)
    self._op("RESHAPE", [tid, self._const(name + "_shape", np.array(shape, np.int32))], [out],
             {"new_shape": list(shape)})
    return out


def _step_slice(self, tid: int, t: int, name: str) -> int:
    """Time step t of a [seq, batch, n] tensor, as [batch, n] (STRIDED_SLICE + a view)."""
    seq, batch, n = self.tensors[tid].shape
    if seq == 1:
        return _reshape(self, tid, (batch, n), name)
    out = self._tensor(name + "_slice", (1, batch, n))
    ins = [tid] + [self._const(f"{name}_{what}", np.array(v, np.int32)) for what, v in
                   (("begin", [t, 0, 0]), ("end", [t + 1, batch, n]), ("strides", [1, 1, 1]))]
    self._op("STRIDED_SLICE", ins, [out], {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0,
                                           "new_axis_mask": 0, "shrink_axis_mask": 0})
    return _reshape(self, out, (batch, n), name)


def _outputs(self, node, seq_out: int, last: int, batch: int, hidden: int) -> None:
    """Y [seq, 1, batch, H] (held NHWC: [seq, batch, H, 1], a view of [seq, batch, H])
    and Y_h [1, batch, H] from the [seq, batch, H] sequence and the last [batch, H]
    (each -1 where the model does not read that output)."""
    if _used(self, node.output[0]):
        y = self._out(node.output[0])
        shape = self.tensors[y].shape
        self._op("RESHAPE", [seq_out, self._const(node.output[0] + "_shape",
                                                  np.array(shape, np.int32))], [y],
                 {"new_shape": list(shape)})
    if len(node.output) > 1 and _used(self, node.output[1]):
        y_h = self._out(node.output[1])
        self._op("RESHAPE", [last, self._const(node.output[1] + "_shape",
                                               np.array((1, batch, hidden), np.int32))], [y_h],
                 {"new_shape": [1, batch, hidden]})


def _joined(self, views: list[int], name: str, batch: int, hidden: int) -> list[int]:
    """`views` ([1, batch, hidden] each) joined in groups until at most
    _MAX_CONCAT_INPUTS are left: tflite-micro's CONCATENATION refuses more inputs (its
    kMaxInputNum), so a longer GRU's Y would not run there."""
    level = 0
    while len(views) > _MAX_CONCAT_INPUTS:
        groups = []
        for k in range(0, len(views), _MAX_CONCAT_INPUTS):
            part = views[k:k + _MAX_CONCAT_INPUTS]
            if len(part) == 1:
                groups.append(part[0])
                continue
            rows = sum(self.tensors[v].shape[0] for v in part)
            joined = self._tensor(f"{name}_y{level}_{k}", (rows, batch, hidden))
            self._op("CONCATENATION", part, [joined],
                     {"axis": 0, "fused_activation_function": "NONE"})
            groups.append(joined)
        views, level = groups, level + 1
    return views


def op_lstm(self, node, a: dict) -> None:
    """ONNX LSTM → UNIDIRECTIONAL_SEQUENCE_LSTM (time-major)."""
    seq, batch, depth, hidden = _check_attributes(self, node, a, 4)
    if len(node.output) > 2 and _used(self, node.output[2]):
        raise ModelError(f"{self._where()}: LSTM output Y_c (the final cell state) is not "
                         "supported: the cell state stays inside kiln's LSTM op")
    name = node.name or node.output[0] or "lstm"
    order = {"input": 0, "output": 1, "forget": 2, "cell": 3}     # ONNX's i, o, f, c
    w = self._c(node, 1).astype(np.float32)[0].reshape(4, hidden, depth)
    r = self._c(node, 2).astype(np.float32)[0].reshape(4, hidden, hidden)
    b = _bias(self, node, 4, hidden)
    inputs = [self._plain(node.input[0])] + [-1] * 23
    for slot, gate in enumerate(("input", "forget", "cell", "output")):    # TFLite's order
        g = order[gate]
        inputs[1 + slot] = self._const(f"{name}_input_to_{gate}_w", w[g])
        inputs[5 + slot] = self._const(f"{name}_recurrent_to_{gate}_w", r[g])
        inputs[12 + slot] = self._const(f"{name}_{gate}_gate_bias", b[0, g] + b[1, g])
    for slot, state in ((18, "hidden"), (19, "cell")):
        tid = self._tensor(f"{name}_{state}_state", (batch, hidden))
        self.tensors[tid].is_variable = True
        inputs[slot] = tid
    out = self._tensor(f"{name}_sequence", (seq, batch, hidden))
    self._op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [out],
             {"fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0,
              "time_major": True, "asymmetric_quantize_inputs": False})
    last = _step_slice(self, out, seq - 1, f"{name}_last") \
        if len(node.output) > 1 and _used(self, node.output[1]) else -1
    _outputs(self, node, out, last, batch, hidden)


def op_gru(self, node, a: dict) -> None:
    """ONNX GRU → its time steps unrolled into FULLY_CONNECTED and elementwise ops."""
    seq, batch, depth, hidden = _check_attributes(self, node, a, 3)
    name = node.name or node.output[0] or "gru"
    before_reset = bool(a.get("linear_before_reset", 0))
    w = self._c(node, 1).astype(np.float32)[0].reshape(3, hidden, depth)     # z, r, h
    r = self._c(node, 2).astype(np.float32)[0].reshape(3, hidden, hidden)
    b = _bias(self, node, 3, hidden)
    fc_options = {"fused_activation_function": "NONE", "weights_format": 0,
                  "keep_num_dims": False, "asymmetric_quantize_inputs": False,
                  "quantized_bias_type": 0}
    weights = {}          # (kind, gate) → (weights id, bias id): shared by every step

    def fc(x: int, kind: str, gate: int, bias: np.ndarray, out_name: str) -> int:
        key = (kind, gate)
        if key not in weights:
            m = w[gate] if kind == "x" else r[gate]
            weights[key] = (self._const(f"{name}_{kind}_{'zrh'[gate]}_w", m),
                            self._const(f"{name}_{kind}_{'zrh'[gate]}_b", bias))
        out = self._tensor(out_name, (batch, hidden))
        self._op("FULLY_CONNECTED", [x, *weights[key]], [out], dict(fc_options))
        return out

    def op(kind: str, ins: list[int], out_name: str) -> int:
        out = self._tensor(out_name, (batch, hidden))
        options = {"fused_activation_function": "NONE"} if kind in ("ADD", "SUB", "MUL") else {}
        if kind in ("ADD", "SUB"):
            options["pot_scale_int16"] = True     # as the reader's own ADD and SUB
        self._op(kind, ins, [out], options)
        return out

    zero = np.zeros(hidden, np.float32)
    # Biases: the input FC carries the input bias and, where it is added unconditionally,
    # the recurrent one (z and r always; h unless it is inside r ⊙ (...)).
    x_bias = [b[0, 0] + b[1, 0], b[0, 1] + b[1, 1],
              b[0, 2] if before_reset else b[0, 2] + b[1, 2]]
    # Step t's tensors are named <name>_<what>@step<t>, as control_flow.py names an
    # unrolled loop's: the quantizer gives each <what> one scale over the steps (as TF's
    # converter quantizes a loop body once), so the steps share their LOGISTIC/TANH
    # tables, multipliers and biases.
    x_all = self._plain(node.input[0])
    h = None
    steps = []
    def at(what: str) -> str:         # the name of step t's tensor `what`
        return f"{name}_{what}@step{t}"

    for t in range(seq):
        xt = _step_slice(self, x_all, t, at("x"))
        gx = [fc(xt, "x", g, x_bias[g], at("x" + "zrh"[g])) for g in range(3)]
        if h is None:                  # step 0: the state is zero
            z = op("LOGISTIC", [gx[0]], at("z"))
            if before_reset:           # r ⊙ Rbh: the recurrent bias alone
                rr = op("LOGISTIC", [gx[1]], at("r"))
                rb = self._const(at("rbh"), b[1, 2].reshape(1, hidden))
                pre = op("ADD", [gx[2], op("MUL", [rr, rb], at("rhh"))], at("pre"))
            else:
                pre = gx[2]
            cand = op("TANH", [pre], at("cand"))
            h = op("SUB", [cand, op("MUL", [z, cand], at("zc"))], at("h"))
        else:
            gh = [fc(h, "h", g, zero, at("h" + "zr"[g])) for g in range(2)]
            z = op("LOGISTIC", [op("ADD", [gx[0], gh[0]], at("zpre"))], at("z"))
            rr = op("LOGISTIC", [op("ADD", [gx[1], gh[1]], at("rpre"))], at("r"))
            if before_reset:
                inner = op("MUL", [rr, fc(h, "h", 2, b[1, 2], at("hh"))], at("rhh"))
            else:
                inner = fc(op("MUL", [rr, h], at("rh")), "h", 2, zero, at("hh"))
            cand = op("TANH", [op("ADD", [gx[2], inner], at("pre"))], at("cand"))
            diff = op("SUB", [h, cand], at("d"))
            h = op("ADD", [cand, op("MUL", [z, diff], at("zd"))], at("h"))
        steps.append(h)
    seq_out = -1
    if _used(self, node.output[0]):
        if seq == 1:
            seq_out = _reshape(self, steps[0], (1, batch, hidden), f"{name}_sequence")
        else:
            views = [_reshape(self, step, (1, batch, hidden), f"{name}_y@step{t}")
                     for t, step in enumerate(steps)]
            views = _joined(self, views, name, batch, hidden)
            seq_out = self._tensor(f"{name}_sequence", (seq, batch, hidden))
            self._op("CONCATENATION", views, [seq_out],
                     {"axis": 0, "fused_activation_function": "NONE"})
    _outputs(self, node, seq_out, steps[-1], batch, hidden)
