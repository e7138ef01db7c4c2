"""Model state (issue 13, item 1): variable tensors and resource variables live in a
static state region apart from the arena, survive kiln_run calls, and reset as
tflite-micro's interpreter resets them; on the host (Artifact, `kiln run`), over RPC and
in standalone firmware.

The stateful models here are built today without recurrent ops: a tf.Variable
accumulator (state += x, as TF's converter writes it: VAR_HANDLE, READ_VARIABLE,
ASSIGN_VARIABLE, and CALL_ONCE with an init subgraph) and an ADD reading a variable
tensor. SVDF and LSTM tests (tests/test_ops_svdf.py, tests/test_ops_lstm.py) run the
same plumbing with their own states.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from conftest import run_kiln
from reference import _arena_size, assert_equal_exact
from resource_builder import accumulator
from tflite_builder import OpSpec, TensorSpec, build_model

from kiln.compiler import compile, load
from kiln.compiler.errors import ModelError
from kiln.compiler.ir import GraphError
from kiln.compiler.passes import optimize

INIT = np.array([[5, -6, 7, -8]], dtype=np.int8)
X = np.array([[1, 2, 3, -4]], dtype=np.int8)
STEPS, AFTER_RESET = 4, 2


def tflm_sequence(model: bytes, xs: list[np.ndarray], reset_at: int | None = None
                  ) -> list[np.ndarray]:
    """Output 0 of tflite-micro's interpreter invoked once per x, without a reset, but
    before xs[reset_at] (interpreter.reset())."""
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(model, arena_size=_arena_size(model))
    out = []
    for i, x in enumerate(xs):
        if i == reset_at:
            interp.reset()
        interp.set_input(np.ascontiguousarray(x), 0)
        interp.invoke()
        out.append(np.array(interp.get_output(0), copy=True))
    return out


def kiln_sequence(art, xs: list[np.ndarray], reset_at: int | None = None) -> list[np.ndarray]:
    out = []
    for i, x in enumerate(xs):
        if i == reset_at:
            art.reset()
        out.append(art.run(x)[0])
    return out


def inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-20, 21, size=(1, 4)).astype(np.int8) for _ in range(n)]


def variable_add() -> bytes:
    """y = x + v, v an int8 variable tensor no op writes: it keeps its reset value (its
    zero point, -7), which tflite-micro gives it too."""
    tensors = [TensorSpec((1, 8), "int8", 0.05, 3, name="x"),
               TensorSpec((1, 8), "int8", 0.05, -7, name="state", variable=True),
               TensorSpec((1, 8), "int8", 0.1, 1, name="y")]
    return build_model([OpSpec("ADD", [0, 1], [2])], tensors, [0], [2])


# --- host: Artifact ------------------------------------------------------------------------

@pytest.mark.parametrize("init", [None, INIT], ids=["zero_point_start", "call_once_init"])
def test_accumulator_carries_state_and_resets_like_tflite_micro(init):
    model = accumulator(init=init)
    xs = inputs(STEPS + AFTER_RESET)
    want = tflm_sequence(model, xs, reset_at=STEPS)
    got = kiln_sequence(compile(load(model)), xs, reset_at=STEPS)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_equal_exact(g, w, f"run {i}")
    # the state did change from run to run (the test would pass on a stateless model
    # otherwise only if every x were 0)
    assert not np.array_equal(got[0], got[STEPS - 1])


def test_after_reset_call_once_is_not_run_again():
    """tflite-micro's reset() fills a resource variable with its zero point and does not
    run CALL_ONCE's init subgraph again: after a reset the accumulator starts at 0, not
    at INIT (kiln does the same)."""
    art = compile(load(accumulator(init=INIT)))
    first = art.run(X)[0]
    art.reset()
    after = art.run(X)[0]
    zp = -3
    assert np.array_equal(first, INIT + X - zp)          # INIT (real) + X (real), same scale
    assert np.array_equal(after, X)                        # 0 + X


def test_two_artifacts_of_one_model_keep_their_own_state():
    model = accumulator()
    a, b = compile(load(model)), compile(load(model))
    for _ in range(3):
        a.run(X)
    assert np.array_equal(b.run(X)[0], X)                  # b starts from its own reset


def test_a_variable_tensor_read_by_an_op_starts_at_its_zero_point():
    model = variable_add()
    x = np.arange(-4, 4, dtype=np.int8).reshape(1, 8)
    art = compile(load(model))
    assert art.report["state_bytes"] == 8
    want = tflm_sequence(model, [x, x])
    assert_equal_exact(art.run(x)[0], want[0], "first run")
    assert_equal_exact(art.run(x)[0], want[1], "second run")
    assert "memset(kiln_state.bytes + 0, 249, 8);" in art.files["model.c"]  # -7 as a byte


# --- the plan, kiln.json, model.h --------------------------------------------------------

def test_variables_are_never_placed_in_the_arena():
    art = compile(load(accumulator(init=INIT)))
    r = art.report
    tensors = {t["name"]: t for t in r["tensors"]}
    assert tensors["acc"]["offset"] == "state:0"
    assert r["state_bytes"] == 8                           # 4 bytes, ALIGNed
    assert r["state_plan"] == [{"buffer": "t1_acc", "offset": 0, "size": 4}]
    assert "t1_acc" not in {b["buffer"] for b in r["memory_plan"]}
    assert all(b.kind != "state" for b in art.plan.buffers)
    assert [(b.name, b.offset, b.size) for b in art.plan.state] == [("t1_acc", 0, 4)]
    h = art.files["model.h"]
    assert "#define KILN_STATE_BYTES 8" in h and "void kiln_reset(void);" in h
    c = art.files["model.c"]
    assert "uint8_t bytes[KILN_STATE_BYTES];" in c
    assert "int8_t *t1_acc = (int8_t *)(kiln_state.bytes + 0);" in c


def test_several_variables_get_disjoint_state():
    """Two accumulators on different resources: their state never overlaps, and an
    arena buffer never takes their bytes (the region is apart)."""
    from resource_builder import RESOURCE, Subgraph, build_subgraphs

    q = dict(scale=0.1, zero_point=0)
    tensors = [TensorSpec((1, 4), "int8", name="x", **q), RESOURCE, RESOURCE,
               TensorSpec((1, 4), "int8", name="a", **q), TensorSpec((1, 4), "int8", name="a2", **q),
               TensorSpec((1, 12), "int16", name="big", scale=0.01, zero_point=0),
               TensorSpec((1, 4), "int8", name="y", **q)]
    ops = [OpSpec("VAR_HANDLE", [], [1], {"shared_name": "one"}),
           OpSpec("VAR_HANDLE", [], [2], {"shared_name": "two"}),
           OpSpec("READ_VARIABLE", [1], [3]), OpSpec("ADD", [3, 0], [4]),
           OpSpec("ASSIGN_VARIABLE", [1, 4], []), OpSpec("READ_VARIABLE", [2], [5]),
           OpSpec("ASSIGN_VARIABLE", [2, 5], []), OpSpec("ADD", [4, 4], [6])]
    model = build_subgraphs([Subgraph(tensors, ops, [0], [6])])
    art = compile(load(model))
    state = sorted((b.offset, b.offset + b.size) for b in art.plan.state)
    assert state == [(0, 4), (8, 32)] and art.report["state_bytes"] == 32
    xs = inputs(3, seed=1)
    for i, (g, w) in enumerate(zip(kiln_sequence(art, xs), tflm_sequence(model, xs))):
        assert_equal_exact(g, w, f"run {i}")


def test_stateless_models_keep_a_no_op_reset_and_zero_state():
    tensors = [TensorSpec((1, 4), "int8", 0.1, 0, name="x"), TensorSpec((1, 4), "int8", 0.1, 0)]
    art = compile(load(build_model([OpSpec("RELU", [0], [1])], tensors, [0], [1])))
    assert art.report["state_bytes"] == 0
    assert "#define KILN_STATE_BYTES 0" in art.files["model.h"]
    assert "void kiln_reset(void)\n{\n}\n" in art.files["model.c"]
    assert "kiln_state" not in art.files["model.c"]
    art.reset()                                            # callable, harmless


def test_prefixed_export_names_the_state_with_the_prefix(tmp_path):
    art = compile(load(accumulator(init=INIT)))
    src = art.sources("acc")
    h, c = src["acc.h"], src["acc.c"]
    assert "#define ACC_STATE_BYTES 8" in h and "void acc_reset(void);" in h
    assert "} acc_state ACC_STATE_ALIGNED;" in c and "static int acc_state_ready;" in c
    assert "kiln_state" not in c and "KILN_STATE" not in h + c
    (tmp_path / "acc.c").write_text(c)
    (tmp_path / "acc.h").write_text(h)
    from kiln.compiler.paths import crt_dir

    obj = tmp_path / "acc.o"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "-I", str(tmp_path),
                    "-I", str(crt_dir() / "kernels"), str(tmp_path / "acc.c"), "-o", str(obj)],
                   check=True)
    nm = subprocess.run(["nm", "-g", "--defined-only", str(obj)], capture_output=True,
                        text=True, check=True).stdout
    exported = set(re.findall(r" [A-Z] (\w+)$", nm, re.M))
    assert exported == {"acc_run", "acc_run_layer", "acc_layer_names", "acc_reset"}


# --- the IR ---------------------------------------------------------------------------------

def test_verify_takes_variables_as_available_and_refuses_writing_them():
    g = load(variable_add())
    assert g.tensor(1).is_variable and g.variables() == [1]
    g.ops[0].outputs = [1]                                 # an op writing the variable
    with pytest.raises(GraphError, match="a variable, as its output"):
        g.verify()


def test_dead_code_removal_keeps_the_ops_that_write_state():
    g = optimize(load(accumulator(init=INIT)))
    assert [op.type for op in g.ops] == ["CALL_ONCE", "READ_VARIABLE", "ADD", "ASSIGN_VARIABLE"]


def test_a_resource_read_but_never_assigned_is_refused():
    from resource_builder import RESOURCE, Subgraph, build_subgraphs

    tensors = [TensorSpec((1, 4), "int8", 0.1, 0, name="x"), RESOURCE,
               TensorSpec((1, 4), "int8", 0.1, 0, name="v"), TensorSpec((1, 4), "int8", 0.1, 0)]
    ops = [OpSpec("VAR_HANDLE", [], [1], {"shared_name": "v"}), OpSpec("READ_VARIABLE", [1], [2]),
           OpSpec("ADD", [2, 0], [3])]
    with pytest.raises(ModelError, match="resource variable v is read but never assigned"):
        load(build_subgraphs([Subgraph(tensors, ops, [0], [3])]))


# --- host: the CLI ----------------------------------------------------------------------------

def test_kiln_run_carries_state_across_stacked_samples(tmp_path, capsys):
    model = accumulator(init=INIT)
    path, xs_path, out = tmp_path / "acc.tflite", tmp_path / "x.npy", tmp_path / "y.npz"
    path.write_bytes(model)
    xs = inputs(5, seed=3)
    np.save(xs_path, np.concatenate(xs))
    code, printed, err = run_kiln(capsys, "run", path, "--input", xs_path, "--output", out)
    assert code == 0, err
    got = np.load(out)
    want = np.concatenate(tflm_sequence(model, xs))
    assert_equal_exact(got[got.files[0]], want, "kiln run, 5 samples")


def test_kiln_info_and_compile_report_state_bytes(tmp_path, capsys):
    path = tmp_path / "acc.tflite"
    path.write_bytes(accumulator(init=INIT))
    code, out, err = run_kiln(capsys, "info", path)
    assert code == 0, err
    assert "state 8 B: kept from one run to the next" in out
    assert "ASSIGN_VARIABLE" in out and "(state)" in out


# --- firmware: host board (RPC and standalone), QEMU -----------------------------------------

def _project(tmp_path, mode: str, board: str = "host", samples: np.ndarray | None = None):
    from kiln.project_gen.project import create_project

    path = tmp_path / "acc.tflite"
    path.write_bytes(accumulator(init=INIT))
    return create_project(path, board=board, out_dir=tmp_path / f"{board}-{mode}", mode=mode,
                          inputs=None if samples is None else [samples])


@pytest.fixture(scope="module")
def host_driven(tmp_path_factory):
    """The accumulator's host-driven firmware for the host board, built once."""
    from conftest import require_tool

    require_tool("cc")
    project = _project(tmp_path_factory.mktemp("state"), "host-driven")
    project.build()
    return project


@pytest.mark.slow
def test_rpc_session_carries_state_and_resets_it(host_driven):
    """A host-driven firmware (host board): RUN after RUN carries the state, and
    reset_state() (RESET mode 2) is tflite-micro's reset()."""
    project = host_driven
    model = accumulator(init=INIT)
    xs = inputs(STEPS + AFTER_RESET, seed=4)
    want = tflm_sequence(model, xs, reset_at=STEPS)
    with project.connect() as s:
        assert s.device.has_state_reset
        got = []
        for i, x in enumerate(xs):
            if i == STEPS:
                s.reset_state()
            got.append(s.run(x)[0])
    for i, (g, w) in enumerate(zip(got, want)):
        assert_equal_exact(g, w, f"RPC run {i}")


@pytest.mark.slow
def test_kiln_run_over_rpc_carries_state(host_driven, tmp_path, capsys):
    """`kiln run DIR --input` on a host-driven project: the stacked samples are successive
    runs of one session, which starts from the initial state (HELLO resets it) though
    the firmware ran before."""
    project = host_driven
    with project.connect() as s:       # leave state behind in the firmware
        s.run(X)
    xs = inputs(5, seed=5)
    xs_path, out = tmp_path / "x.npy", tmp_path / "y.npz"
    np.save(xs_path, np.concatenate(xs))
    code, _, err = run_kiln(capsys, "run", project.path, "--input", xs_path, "--output", out)
    assert code == 0, err
    got = np.load(out)
    assert_equal_exact(got[got.files[0]], np.concatenate(tflm_sequence(accumulator(init=INIT),
                                                                       xs)), "kiln run RPC")


@pytest.mark.slow
def test_standalone_firmware_runs_its_samples_as_successive_calls(tmp_path):
    """The baked samples run one after another from the initial state (no warm-up run
    for a stateful model: CALL_ONCE's init is the first call's)."""
    from conftest import require_tool

    require_tool("cc")
    xs = inputs(5, seed=6)
    project = _project(tmp_path, "standalone", samples=np.concatenate(xs))
    project.build()
    result = project.run()
    want = tflm_sequence(accumulator(init=INIT), xs)
    got = [outs[0] for outs in result.samples]
    assert len(got) == 5
    for i, (g, w) in enumerate(zip(got, want)):
        assert_equal_exact(np.asarray(g).reshape(w.shape), w, f"sample {i}")


@pytest.mark.slow
def test_standalone_firmware_on_qemu_runs_successive_calls(tmp_path):
    from conftest import require_tool

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    xs = inputs(4, seed=8)
    project = _project(tmp_path, "standalone", board="mps2-an386", samples=np.concatenate(xs))
    result = project.run()
    want = tflm_sequence(accumulator(init=INIT), xs)
    for i, (g, w) in enumerate(zip([outs[0] for outs in result.samples], want)):
        assert_equal_exact(np.asarray(g).reshape(w.shape), w, f"QEMU sample {i}")


@pytest.mark.slow
def test_rpc_on_qemu_carries_state_and_resets_it(tmp_path):
    from conftest import require_tool

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    project = _project(tmp_path, "host-driven", board="mps2-an386")
    model = accumulator(init=INIT)
    xs = inputs(STEPS + AFTER_RESET, seed=7)
    want = tflm_sequence(model, xs, reset_at=STEPS)
    with project.connect() as s:
        got = []
        for i, x in enumerate(xs):
            if i == STEPS:
                s.reset_state()
            got.append(s.run(x)[0])
    for i, (g, w) in enumerate(zip(got, want)):
        assert_equal_exact(g, w, f"QEMU RPC run {i}")


def test_a_handle_read_by_another_op_is_refused():
    from resource_builder import RESOURCE, Subgraph, build_subgraphs

    q = dict(scale=0.1, zero_point=0)
    tensors = [TensorSpec((1, 4), "int8", name="x", **q), RESOURCE,
               TensorSpec((1, 4), "int8", name="y", **q)]
    ops = [OpSpec("VAR_HANDLE", [], [1], {"shared_name": "v"}),
           OpSpec("ASSIGN_VARIABLE", [1, 0], []), OpSpec("ADD", [0, 1], [2])]
    with pytest.raises(ModelError, match=r"op 2 \(ADD\) reads a resource handle"):
        load(build_subgraphs([Subgraph(tensors, ops, [0], [2])]))


@pytest.mark.parametrize("compiler,flags", [
    ("gcc", ["-O2"]), ("clang", ["-O2"]),
    ("arm-none-eabi-gcc", ["-mcpu=cortex-m0plus", "-mthumb", "-Os"]),
    ("arm-none-eabi-gcc", ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-O2"])])
def test_stateful_c_compiles_warning_free(tmp_path, compiler, flags):
    """model.c and a prefixed P.c of a stateful model (the state union, its alignment,
    the CALL_ONCE flag) under -Wall -Wextra -Werror -pedantic, host and Cortex-M."""
    import shutil

    from kiln.compiler.paths import crt_dir

    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    art = compile(load(accumulator(init=INIT)))
    for name, text in {**art.sources(), **art.sources("acc")}.items():
        (tmp_path / name).write_text(text)
    for src in ("model.c", "weights.c", "acc.c"):
        proc = subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                               *flags, "-I", str(tmp_path), "-I", str(crt_dir() / "kernels"),
                               "-c", str(tmp_path / src), "-o", str(tmp_path / (src + ".o"))],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_a_project_manifest_with_a_bad_state_size_is_refused():
    from kiln.compiler.artifact import report_problem

    report = dict(compile(load(accumulator())).report)
    assert report_problem(report) is None
    for bad in ("8", -1, True, 2.5):
        report["state_bytes"] = bad
        assert report_problem(report) == "its 'state_bytes' is not a byte count"


def _hostile_resource_models():
    """(id, model bytes, message part): tf.Variable ops put together wrongly."""
    from resource_builder import RESOURCE, Subgraph, build_subgraphs

    q = dict(scale=0.1, zero_point=0)

    def main(ops, extra=(), init=None):
        tensors = [TensorSpec((1, 4), "int8", name="x", **q), RESOURCE,
                   TensorSpec((1, 4), "int8", name="r", **q),
                   TensorSpec((1, 4), "int8", name="y", **q), *extra]
        subgraphs = [Subgraph(tensors, ops, [0], [3])]
        return build_subgraphs(subgraphs + ([init] if init else []))

    handle = OpSpec("VAR_HANDLE", [], [1], {"shared_name": "v"})
    read_add = [OpSpec("READ_VARIABLE", [1], [2]), OpSpec("ADD", [2, 0], [3])]
    assign = OpSpec("ASSIGN_VARIABLE", [1, 0], [])
    wide = TensorSpec((1, 8), "int8", name="wide", **q)
    init_from_input = Subgraph([RESOURCE, TensorSpec((1, 4), "int8", name="v0", **q)],
                               [OpSpec("VAR_HANDLE", [], [0], {"shared_name": "v"}),
                                OpSpec("ASSIGN_VARIABLE", [0, 1], [])], inputs=[1])
    init_relu = Subgraph([RESOURCE, TensorSpec((1, 4), "int8", name="a", **q),
                          TensorSpec((1, 4), "int8", name="b", **q)],
                         [OpSpec("RELU", [1], [2])])
    return [
        ("call_once_out_of_range", main([OpSpec("CALL_ONCE", [], [], {"init_subgraph_index": 5}),
                                         handle, assign, *read_add]),
         "names init subgraph 5, out of range"),
        ("call_once_main_itself", main([OpSpec("CALL_ONCE", [], [], {"init_subgraph_index": 0}),
                                        handle, assign, *read_add]),
         "names init subgraph 0, out of range"),
        ("init_assigns_an_input", main([OpSpec("CALL_ONCE", [], [], {"init_subgraph_index": 1}),
                                        handle, *read_add], init=init_from_input),
         "assigns v0, which is not a constant"),
        ("init_computes", main([OpSpec("CALL_ONCE", [], [], {"init_subgraph_index": 1}),
                                handle, assign, *read_add], init=init_relu),
         "its init subgraph 1 computes with RELU"),
        ("assign_size_mismatch", main([handle, assign, OpSpec("ASSIGN_VARIABLE", [1, 4], []),
                                       *read_add], extra=[wide]),
         "does not match resource variable v"),
        ("read_without_handle", main([OpSpec("READ_VARIABLE", [1], [2]), OpSpec("ADD", [2, 0], [3])]),
         "reads a handle no VAR_HANDLE writes"),
        ("handle_with_input", main([OpSpec("VAR_HANDLE", [0], [1], {"shared_name": "v"}),
                                    assign, *read_add]),
         "takes no input and writes one handle"),
    ]


@pytest.mark.parametrize("data,message", [pytest.param(d, m, id=i)
                                          for i, d, m in _hostile_resource_models()])
def test_malformed_resource_variables_are_one_clear_error(data, message, tmp_path, capsys):
    with pytest.raises(ModelError, match=re.escape(message)):
        load(data)
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    code, _, err = run_kiln(capsys, "compile", path, "-o", tmp_path / "out")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
