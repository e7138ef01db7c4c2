"""WHILE and IF (frontend/control_flow.py): loops with a static trip count unrolled into
the main graph, IF with a constant condition inlined, the rest refused in one line.

- int8 models with a real WHILE (and IF, and a nested WHILE) built here: kiln (unrolled)
  is bit-exact with tflite-micro, whose while and if kernels run the subgraphs;
- hostile ones (a run-time bound, too many trips, nested loops that fold to nothing,
  wrong subgraph indices, a loop value that changes quantization) are refused;
- Keras GRU and SimpleRNN as TF's converter writes them (tests/fixtures/recurrent/, made
  by make_models.py there): the float evaluator of the unrolled graph matches
  tflite-micro running the WHILE. Their quantization: tests/test_quantize_recurrent.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.errors import ModelError
from kiln.compiler.frontend import control_flow
from kiln.compiler.quantize import FloatModel, prepare
from reference import assert_equal_exact, run_reference
from resource_builder import Subgraph, build_subgraphs
from tflite_builder import TensorSpec, OpSpec, bias_spec, const, rand_int8, weight_spec

FIXTURES = Path(__file__).parent / "fixtures" / "recurrent"
sys.path.insert(0, str(FIXTURES))
from make_models import MODELS, sequences  # noqa: E402  (no TensorFlow needed)


# --- int8 models with a WHILE, built here ---------------------------------------------

def rnn_while_model(rng: np.random.Generator, steps: int = 6, depth: int = 4, units: int = 5,
                    limit_from_input: bool = False, trips: int | None = None,
                    body_h_scale: float = 1 / 128) -> bytes:
    """An int8 SimpleRNN as TF writes it: main: WHILE(time=0, h0, x) → FC → output;
    cond: time < steps; body: GATHER(x, time) → FC, FC(h) → ADD → TANH, time + 1.
    `limit_from_input`: the bound is a model input (no static trip count);
    `body_h_scale`: the body's h input scale (h0's is 1/128)."""
    s_x, s_a, s_r, s_s = 0.05, 0.04, 0.03, 0.06
    w = weight_spec((units, depth), rng, per_channel_axis=None)
    r = weight_spec((units, units), rng, per_channel_axis=None)
    main_t = [
        TensorSpec((steps, 1, depth), scale=s_x, zero_point=3, name="x"),          # 0
        const(0, shape=()),                                                        # 1 time
        TensorSpec((1, units), scale=1 / 128, zero_point=0, name="h0",
                   data=np.zeros((1, units), np.int8)),                            # 2
        TensorSpec((), "int32", name="time_out"),                                  # 3
        TensorSpec((1, units), scale=1 / 128, zero_point=0, name="h_out"),         # 4
        TensorSpec((steps, 1, depth), scale=s_x, zero_point=3, name="x_out"),      # 5
        weight_spec((3, units), rng, per_channel_axis=None),                       # 6
        None, TensorSpec((1, 3), scale=0.02, zero_point=-4, name="y"),             # 7, 8
        TensorSpec((), "int32", name="limit"),                                     # 9
        TensorSpec((), "int32", name="limit_out"),                                 # 10
    ]
    main_t[7] = bias_spec(3, rng, 1 / 128, main_t[6].scale)
    bound = steps if trips is None else trips
    loop_in = [1, 2, 0] + ([9] if limit_from_input else [])
    loop_out = [3, 4, 5] + ([10] if limit_from_input else [])
    main = Subgraph(main_t, [
        OpSpec("WHILE", loop_in, loop_out, {"cond_subgraph_index": 1, "body_subgraph_index": 2}),
        OpSpec("FULLY_CONNECTED", [4, 6, 7], [8])],
        inputs=[0] + ([9] if limit_from_input else []), outputs=[8])
    extra = [TensorSpec((), "int32", name="limit")] if limit_from_input else []
    cond_t = [TensorSpec((), "int32", name="time"),
              TensorSpec((1, units), scale=1 / 128, zero_point=0, name="h"),
              TensorSpec((steps, 1, depth), scale=s_x, zero_point=3, name="x"), *extra,
              const(bound, shape=()), TensorSpec((), "bool", name="more")]
    n = len(cond_t)
    cond = Subgraph(cond_t, [OpSpec("LESS", [0, 3 if limit_from_input else n - 2], [n - 1])],
                    inputs=list(range(3 + len(extra))), outputs=[n - 1])
    body_t = [
        TensorSpec((), "int32", name="time"),                                      # 0
        TensorSpec((1, units), scale=body_h_scale, zero_point=0, name="h"),        # 1
        TensorSpec((steps, 1, depth), scale=s_x, zero_point=3, name="x"),          # 2
        const(1, shape=()),                                                        # 3
        TensorSpec((), "int32", name="time_next"),                                 # 4
        TensorSpec((1, depth), scale=s_x, zero_point=3, name="x_t"),               # 5
        w, bias_spec(units, rng, s_x, w.scale),                                    # 6, 7
        TensorSpec((1, units), scale=s_a, zero_point=-2, name="a"),                # 8
        r, TensorSpec((1, units), scale=s_r, zero_point=1, name="rh"),             # 9, 10
        TensorSpec((1, units), scale=s_s, zero_point=0, name="s"),                 # 11
        TensorSpec((1, units), scale=1 / 128, zero_point=0, name="h_next"),        # 12
        *extra,                                                                    # 13
    ]
    body = Subgraph(body_t, [
        OpSpec("ADD", [0, 3], [4]),
        OpSpec("GATHER", [2, 0], [5], {"axis": 0}),
        OpSpec("FULLY_CONNECTED", [5, 6, 7], [8]),
        OpSpec("FULLY_CONNECTED", [1, 9, -1], [10]),
        OpSpec("ADD", [8, 10], [11]),
        OpSpec("TANH", [11], [12])],
        inputs=[0, 1, 2] + ([13] if limit_from_input else []),
        outputs=[4, 12, 2] + ([13] if limit_from_input else []))
    return build_subgraphs([main, cond, body])


def test_int8_while_unrolled_bit_exact_with_tflm():
    """kiln unrolls the loop (no WHILE left, one GATHER per step); tflite-micro runs the
    WHILE kernel: the outputs are equal on random inputs."""
    rng = np.random.default_rng(3)
    model = rnn_while_model(rng)
    g = load(model)
    types = [op.type for op in g.ops]
    assert "WHILE" not in types and types.count("GATHER") == 6 and types.count("TANH") == 6
    art = kiln_compile(g, board="host")
    for i in range(4):
        x = rand_int8((6, 1, 4), rng)
        assert_equal_exact(art.run(x)[0], run_reference(model, x)[0], f"sample {i}")


def test_zero_trip_loop_passes_its_values_through():
    rng = np.random.default_rng(4)
    model = rnn_while_model(rng, trips=0)
    g = load(model)
    assert [op.type for op in g.ops] == ["FULLY_CONNECTED"]
    x = rand_int8((6, 1, 4), rng)
    assert_equal_exact(kiln_compile(g, board="host").run(x)[0], run_reference(model, x)[0])


def test_while_without_static_trip_count_is_refused():
    model = rnn_while_model(np.random.default_rng(5), limit_from_input=True)
    with pytest.raises(ModelError) as e:
        load(model)
    msg = str(e.value)
    assert "op 0 (WHILE)" in msg and "limit" in msg and "not static" in msg and "\n" not in msg


def test_too_many_trips_are_refused(monkeypatch):
    monkeypatch.setattr(control_flow, "MAX_TRIPS", 5)
    with pytest.raises(ModelError, match=r"loops more than 5 times"):
        load(rnn_while_model(np.random.default_rng(6)))


def if_model(rng: np.random.Generator, cond: bool | None) -> bytes:
    """main: IF(c, x) → y, then: TANH(x), else: x + x. `cond` None: c is a model input."""
    t = lambda name, s=0.05, z=1: TensorSpec((1, 8), scale=s, zero_point=z, name=name)  # noqa
    c = (TensorSpec((), "bool", name="c") if cond is None
         else TensorSpec((), "bool", data=np.array(cond), name="c"))
    main = Subgraph([t("x"), c, t("y", 1 / 128, 0)],
                    [OpSpec("IF", [1, 0], [2], {"then_subgraph_index": 1,
                                                "else_subgraph_index": 2})],
                    inputs=[0] + ([1] if cond is None else []), outputs=[2])
    then = Subgraph([t("a"), TensorSpec((1, 8), scale=1 / 128, zero_point=0, name="b")],
                    [OpSpec("TANH", [0], [1])], inputs=[0], outputs=[1])
    other = Subgraph([t("a"), TensorSpec((1, 8), scale=1 / 128, zero_point=0, name="b")],
                     [OpSpec("ADD", [0, 0], [1])], inputs=[0], outputs=[1])
    return build_subgraphs([main, then, other])


@pytest.mark.parametrize("taken", [True, False])
def test_if_with_constant_condition_is_its_branch(taken):
    rng = np.random.default_rng(7)
    model = if_model(rng, taken)
    g = load(model)
    assert [op.type for op in g.ops] == ["TANH" if taken else "ADD"]
    x = rand_int8((1, 8), rng)
    assert_equal_exact(kiln_compile(g, board="host").run(x)[0], run_reference(model, x)[0])


def test_if_decided_at_run_time_is_refused():
    with pytest.raises(ModelError, match=r"op 0 \(IF\): its condition c is computed at run time"):
        load(if_model(np.random.default_rng(8), None))


def test_cli_names_the_loop_in_one_line(tmp_path, capsys):
    from kiln.compiler.cli import main

    path = tmp_path / "loop.tflite"
    path.write_bytes(rnn_while_model(np.random.default_rng(5), limit_from_input=True))
    assert main(["compile", str(path), "--board", "host", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kiln: error:") and "WHILE" in err and "\n" not in err


# --- Keras GRU and SimpleRNN, as TF's converter writes them -------------------------------

@pytest.mark.parametrize("name", list(MODELS))
def test_keras_rnn_float_unrolled_matches_tflm_while(name):
    """The converter's WHILE (cond: time < T and i < T) unrolls to T steps; the float
    evaluator of the unrolled graph = tflite-micro running the WHILE (measured: 1.2e-7)."""
    _, steps, _ = MODELS[name]
    path = FIXTURES / f"{name}_float.tflite"
    g = load(path)
    assert not any(op.type in ("WHILE", "IF") for op in g.ops)
    assert sum(op.type == "GATHER" for op in g.ops) == steps
    x, _ = sequences(4, steps, seed=5)
    got = FloatModel(prepare(g)).run([x[:, None]])[0]
    data = path.read_bytes()
    for i in range(len(x)):
        want = run_reference(data, x[i:i + 1])[0]
        np.testing.assert_allclose(got[i].reshape(want.shape), want, atol=1e-5)


def test_nested_loops_that_fold_away_still_stop(monkeypatch):
    """A hostile model: a 4,000-trip loop whose body runs a 4,000-trip loop of counter
    arithmetic only (all folded: no op is ever added). The work budget refuses it
    instead of evaluating 16 million steps (lowered here to keep the test fast: the
    default 200,000 takes about 6 s)."""
    monkeypatch.setattr(control_flow, "MAX_WORK", 20_000)
    i32 = lambda name: TensorSpec((), "int32", name=name)  # noqa: E731
    x = TensorSpec((1, 4), scale=0.1, zero_point=0, name="x")
    main = Subgraph([x, const(0, shape=()), i32("i_out"), TensorSpec((1, 4), scale=0.1,
                                                                     zero_point=0, name="y")],
                    [OpSpec("WHILE", [1], [2], {"cond_subgraph_index": 1,
                                                "body_subgraph_index": 2}),
                     OpSpec("RELU", [0], [3])], inputs=[0], outputs=[3])

    def cond(limit):
        return Subgraph([i32("i"), const(limit, shape=()), TensorSpec((), "bool", name="c")],
                        [OpSpec("LESS", [0, 1], [2])], inputs=[0], outputs=[2])

    outer = Subgraph([i32("i"), const(1, shape=()), i32("i1"), const(0, shape=()), i32("j")],
                     [OpSpec("ADD", [0, 1], [2]),
                      OpSpec("WHILE", [3], [4], {"cond_subgraph_index": 3,
                                                 "body_subgraph_index": 4})],
                     inputs=[0], outputs=[2])
    inner = Subgraph([i32("j"), const(1, shape=()), i32("j1")], [OpSpec("ADD", [0, 1], [2])],
                     inputs=[0], outputs=[2])
    model = build_subgraphs([main, cond(4000), outer, cond(4000), inner])
    with pytest.raises(ModelError, match=r"visits more than 20,000 ops"):
        load(model)


def test_nested_loop_unrolls_and_matches_tflm():
    """A WHILE inside a WHILE body (2 outer × 3 inner trips of an int8 ADD) = TFLM."""
    i32 = lambda name: TensorSpec((), "int32", name=name)  # noqa: E731
    act = lambda name: TensorSpec((1, 4), scale=0.1, zero_point=-3, name=name)  # noqa: E731
    main = Subgraph([act("x"), const(0, shape=()), i32("i_out"), act("y")],
                    [OpSpec("WHILE", [1, 0], [2, 3], {"cond_subgraph_index": 1,
                                                      "body_subgraph_index": 2})],
                    inputs=[0], outputs=[3])

    def cond(limit):
        return Subgraph([i32("i"), act("v"), const(limit, shape=()),
                         TensorSpec((), "bool", name="c")],
                        [OpSpec("LESS", [0, 2], [3])], inputs=[0, 1], outputs=[3])

    outer = Subgraph([i32("i"), act("v"), const(1, shape=()), i32("i1"), const(0, shape=()),
                      i32("j"), act("w")],
                     [OpSpec("ADD", [0, 2], [3]),
                      OpSpec("WHILE", [4, 1], [5, 6], {"cond_subgraph_index": 3,
                                                       "body_subgraph_index": 4})],
                     inputs=[0, 1], outputs=[3, 6])
    inner = Subgraph([i32("j"), act("v"), const(1, shape=()), i32("j1"),
                      TensorSpec((1, 4), scale=0.1, zero_point=-3, name="v2",
                                 data=np.array([[1, -2, 3, 0]], np.int8)), act("w")],
                     [OpSpec("ADD", [0, 2], [3]), OpSpec("ADD", [1, 4], [5])],
                     inputs=[0, 1], outputs=[3, 5])
    model = build_subgraphs([main, cond(2), outer, cond(3), inner])
    g = load(model)
    assert [op.type for op in g.ops] == ["ADD"] * 6
    x = rand_int8((1, 4), np.random.default_rng(9))
    assert_equal_exact(kiln_compile(g, board="host").run(x)[0], run_reference(model, x)[0])


def test_loop_value_changing_quantization_is_refused():
    """TFLM copies a loop value's bytes into the body input and reads them in the body
    input's scale: a model whose h0 and body h disagree is refused, not silently read in
    h0's scale."""
    with pytest.raises(ModelError, match=r"op 0 \(WHILE\): h0 passes into h with another "
                                         r"quantization"):
        load(rnn_while_model(np.random.default_rng(3), body_h_scale=1 / 64))


@pytest.mark.parametrize("cond,body,message", [
    (0, 2, r"names subgraph 0, out of range"),          # the main graph as its condition
    (1, 7, r"names subgraph 7, out of range"),
    (2, 1, r"loop condition \(subgraph 2\) depends on x"),   # body and cond swapped
])
def test_while_naming_wrong_subgraphs_is_refused(cond, body, message):
    data = _with_while_indices(rnn_while_model(np.random.default_rng(3)), cond, body)
    with pytest.raises(ModelError, match=message):
        load(data)


def _with_while_indices(model: bytes, cond: int, body: int) -> bytes:
    """`model` with its WHILE's cond/body subgraph indices patched in place (the two
    int32 fields of its WhileOptions table)."""
    import tflite

    m = tflite.Model.GetRootAs(model, 0)
    op = m.Subgraphs(0).Operators(0)
    table = op.BuiltinOptions()
    opts = tflite.WhileOptions()
    opts.Init(table.Bytes, table.Pos)
    data = bytearray(model)
    for slot, value in ((4, cond), (6, body)):       # vtable offsets of the two fields
        field = opts._tab.Offset(slot)
        assert field, "field written"
        data[table.Pos + field:table.Pos + field + 4] = np.int32(value).tobytes()
    return bytes(data)
