"""SVDF (int8, int16 or int8 state) against tflite-micro, bit for bit, over time.

SVDF keeps state: each case runs several successive calls without a reset (the state
carried from call to call), then resets (kiln's Artifact.reset / kiln_reset against the
interpreter's reset()) and runs again. Many cases share one model, each an independent
SVDF op with its own input, state and output, so a batch costs one host build.

TFLM's SVDF needs a bias (its Prepare reads the bias scale: a model without one crashes
it), so the bias-less cases compare with TFLite's reference kernel instead, which
requires RELU for int8 SVDF. Neither applies the fused activation in the integer path.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import numpy as np
import pytest
import tflite

from conftest import models_root, require_tool, run_sanitized_c
from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.errors import ModelError
from reference import assert_equal_exact
from test_ops_pool import ARM_TARGETS, cross_compile
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int, rand_int8


@dataclass
class SvdfCase:
    batches: int
    input_size: int
    filters: int
    rank: int
    memory: int
    state: str = "int16"          # state and time-weights type
    bias: bool = True
    act: str = "NONE"
    seed: int = 0
    saturate: bool = False        # a tiny state scale: the state sits at its type's limits
                                  # and the int32 time sums wrap
    output_zero_point: int | None = None   # None: random (-128 for RELU, as converted)
    state_zero_point: int | None = None    # None: 0 for int16 (as converted), random for int8

    @property
    def units(self) -> int:
        return self.filters // self.rank

    @property
    def label(self) -> str:
        return (f"B{self.batches} I{self.input_size} F{self.filters} rank{self.rank} "
                f"M{self.memory} {self.state} state{'' if self.bias else ' no bias'} "
                f"{self.act}{' saturating' if self.saturate else ''}")


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.float32(np.exp(rng.uniform(np.log(low), np.log(high)))))


def svdf_tensors(case: SvdfCase) -> tuple[list[TensorSpec | None], TensorSpec]:
    """(inputs: input, feature weights, time weights, bias or None, state; output)."""
    rng = np.random.default_rng(case.seed)
    b, i, f, m = case.batches, case.input_size, case.filters, case.memory
    sx, swf, swt = (_log_uniform(rng, 0.005, 0.1), _log_uniform(rng, 0.002, 0.02),
                    _log_uniform(rng, 1e-4, 0.01))
    # The state scale: a feature sum of ~sqrt(I) * 128 * 64 quanta lands in a few thousand
    # state quanta (int16), or near the limits (saturate).
    typical = sx * swf * 128 * 64 * np.sqrt(i)
    state_range = 32767 if case.state == "int16" else 127
    sst = float(np.float32(typical / (state_range / (0.01 if case.saturate else 4))))
    # The output scale: the time sum of M * rank products of uniform time weights (rms
    # range / sqrt(3)) and states (rms ~ range / 5, or range when saturated) spans ~+-40
    # output quanta, so outputs vary and rarely clamp.
    state_rms = state_range if case.saturate else state_range / 5
    sy = float(np.float32(sst * swt * (state_range / np.sqrt(3)) * state_rms
                          * np.sqrt(m * case.rank) / 40))
    bias_range = int(min(sy / (sst * swt) * 40, 1 << 28))   # ~ the time sum's own spread
    zx, zy = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    if case.output_zero_point is not None:
        zy = case.output_zero_point
    elif case.act == "RELU":
        zy = -128
    zst = 0 if case.state == "int16" else int(rng.integers(-20, 21))
    if case.state_zero_point is not None:
        zst = case.state_zero_point
    wt_data = rand_int((f, m), rng, case.state)
    inputs: list[TensorSpec | None] = [
        TensorSpec((b, i), "int8", scale=sx, zero_point=zx),
        TensorSpec((f, i), "int8", scale=swf, zero_point=0, data=rand_int8((f, i), rng, -127, 127)),
        TensorSpec((f, m), case.state, scale=swt, zero_point=0, data=wt_data),
        TensorSpec((case.units,), "int32", scale=float(np.float32(sst) * np.float32(swt)),
                   zero_point=0, data=rng.integers(-bias_range, bias_range + 1, case.units)
                   .astype(np.int32)) if case.bias else None,
        TensorSpec((b, f * m), case.state, scale=sst, zero_point=zst, variable=True),
    ]
    return inputs, TensorSpec((b, case.units), "int8", scale=sy, zero_point=zy)


def svdf_model(cases: list[SvdfCase]) -> bytes:
    """One model holding every case as an independent SVDF op."""
    tensors: list[TensorSpec] = []
    ops: list[OpSpec] = []
    model_inputs: list[int] = []
    model_outputs: list[int] = []
    for case in cases:
        ins, out = svdf_tensors(case)
        idx = []
        for t in ins:
            if t is None:
                idx.append(-1)
                continue
            idx.append(len(tensors))
            if t.data is None and not t.variable:
                model_inputs.append(len(tensors))
            tensors.append(t)
        model_outputs.append(len(tensors))
        tensors.append(out)
        ops.append(OpSpec("SVDF", idx, [model_outputs[-1]],
                          {"rank": case.rank, "fused_activation_function": case.act}))
    return build_model(ops, tensors, model_inputs, model_outputs)


def step_inputs(cases: list[SvdfCase], steps: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rand_int8((c.batches, c.input_size), rng) for c in cases] for _ in range(steps)]


def tflm_runs(model: bytes, steps: list[list[np.ndarray]], reset_at: int) -> list[list[np.ndarray]]:
    """tflite-micro's outputs for each step, reset() before step `reset_at`."""
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    n_out = tflite.Model.GetRootAs(model, 0).Subgraphs(0).OutputsLength()
    outs = []
    for k, xs in enumerate(steps):
        if k == reset_at:
            interp.reset()
        for i, x in enumerate(xs):
            interp.set_input(x, i)
        interp.invoke()
        outs.append([np.array(interp.get_output(j), copy=True) for j in range(n_out)])
    return outs


def tflite_ref_runs(model: bytes, steps: list[list[np.ndarray]],
                    reset_at: int) -> list[list[np.ndarray]]:
    """TFLite's reference kernels (BUILTIN_REF), reset_all_variables() before `reset_at`."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interp = Interpreter(model_content=model, num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    ins, outs_d = interp.get_input_details(), interp.get_output_details()
    outs = []
    for k, xs in enumerate(steps):
        if k == reset_at:
            interp.reset_all_variables()
        for d, x in zip(ins, xs):
            interp.set_tensor(d["index"], x)
        interp.invoke()
        outs.append([np.array(interp.get_tensor(d["index"]), copy=True) for d in outs_d])
    return outs


def check_svdf(cases: list[SvdfCase], engine: str = "tflm", steps: int = 8, reset_at: int = 5,
               seed: int = 0) -> None:
    """kiln on the host equals the reference at every step, across a reset."""
    model = svdf_model(cases)
    art = kiln_compile(load(model), board="host")
    xs = step_inputs(cases, steps, seed)
    want = (tflm_runs if engine == "tflm" else tflite_ref_runs)(model, xs, reset_at)
    for k, step in enumerate(xs):
        if k == reset_at:
            art.reset()
        got = art.run(*step)
        when = f"step {k}{' after reset' if k >= reset_at else ''}"
        for c, g, w in zip(cases, got, want[k]):
            assert_equal_exact(g, w, f"{c.label}, {when}")


CASES = [
    SvdfCase(1, 5, 4, 1, 3),
    SvdfCase(1, 96, 64, 1, 8, act="RELU", seed=1),      # keyword_scrambled's first layer
    SvdfCase(2, 7, 6, 2, 5, act="RELU", seed=2),
    SvdfCase(3, 16, 12, 3, 1, seed=3),                   # memory 1: no history
    SvdfCase(1, 33, 8, 2, 32, seed=4),
    SvdfCase(4, 3, 2, 2, 10, seed=5),                    # one unit
    SvdfCase(2, 40, 16, 2, 16, saturate=True, seed=6),
    SvdfCase(1, 24, 10, 1, 6, act="RELU6", seed=7),      # any activation: not applied
    SvdfCase(2, 10, 6, 2, 4, saturate=True, state_zero_point=-300, seed=8),   # wraps
]
CASES_S8 = [
    SvdfCase(1, 5, 4, 1, 3, state="int8", seed=10),
    SvdfCase(2, 20, 12, 2, 7, state="int8", act="RELU", seed=11),
    SvdfCase(1, 30, 6, 3, 9, state="int8", saturate=True, seed=12),   # zero point wraps
]


def test_svdf_int16_state_matches_tflm_over_time():
    check_svdf(CASES)


def test_svdf_int8_state_matches_tflm_over_time():
    """int8 state with non-zero zero points: reset fills the state with its zero point, and
    a saturated value plus the zero point wraps in the int8 store, as tflite-micro does."""
    check_svdf(CASES_S8, seed=1)


def test_svdf_without_bias_matches_tflite_reference():
    check_svdf([SvdfCase(1, 9, 6, 2, 4, bias=False, act="RELU", seed=20),
                SvdfCase(2, 12, 4, 1, 5, bias=False, act="RELU", seed=21),
                SvdfCase(1, 7, 6, 3, 3, act="RELU", seed=22)], engine="tflite_ref")


def test_svdf_random_shapes_match_tflm():
    rng = np.random.default_rng(99)
    cases = []
    for n in range(12):
        rank = int(rng.integers(1, 4))
        cases.append(SvdfCase(int(rng.integers(1, 4)), int(rng.integers(1, 70)),
                              rank * int(rng.integers(1, 9)), rank, int(rng.integers(1, 20)),
                              state=str(rng.choice(["int16", "int16", "int8"])),
                              act=str(rng.choice(["NONE", "RELU"])), seed=100 + n,
                              saturate=bool(rng.integers(0, 4) == 0)))
    check_svdf(cases, steps=6, reset_at=4, seed=2)


def test_svdf_fused_activation_is_not_applied():
    """A RELU SVDF whose output zero point is not the int8 minimum: tflite-micro's integer
    kernel still clamps to int8 only, so outputs below the zero point occur, and kiln's are
    the same."""
    case = SvdfCase(1, 24, 10, 1, 6, act="RELU", output_zero_point=0, seed=30)
    outs = tflm_runs(svdf_model([case]), step_inputs([case], 6, 0), reset_at=6)
    assert min(int(o[0].min()) for o in outs) < 0
    check_svdf([case], steps=6)


def test_svdf_generated_code():
    model = svdf_model([SvdfCase(2, 7, 6, 2, 5, act="RELU", seed=2)])
    art = kiln_compile(load(model), board="host")
    c = art.files["model.c"]
    assert "kiln_svdf_s8_state_s16(&params" in c
    assert ".batches = 2, .input_size = 7, .filters = 6, .memory_size = 5, .rank = 2" in c
    assert "RELU left to the output range" in c
    assert art.state_bytes == 2 * 6 * 5 * 2


def _reject(cases_or_model, match: str) -> None:
    model = cases_or_model if isinstance(cases_or_model, bytes) else svdf_model(cases_or_model)
    with pytest.raises(ModelError, match=match):
        kiln_compile(load(model), board="host")


def _single(ins: list[TensorSpec | None], out: TensorSpec, rank: int = 1) -> bytes:
    tensors = [t for t in ins if t is not None] + [out]
    idx, k = [], 0
    for t in ins:
        idx.append(-1 if t is None else k)
        k += t is not None
    inputs = [n for n, t in enumerate(tensors[:-1]) if t.data is None and not t.variable]
    return build_model([OpSpec("SVDF", idx, [len(tensors) - 1], {"rank": rank})],
                       tensors, inputs, [len(tensors) - 1])


def test_svdf_rejections():
    ins, out = svdf_tensors(SvdfCase(1, 5, 4, 1, 3))
    # rank that does not divide the filters
    _reject(_single(ins, TensorSpec((1, 1), "int8", scale=0.1), rank=3),
            "rank 3 does not divide the 4 filters")
    # int16 time weights with int8 state
    bad = list(ins)
    bad[4] = TensorSpec((1, 12), "int8", scale=0.1, variable=True)
    _reject(_single(bad, out), "time weights and state must both be int16 or both int8")
    # a state tensor of the wrong size
    bad = list(ins)
    bad[4] = TensorSpec((1, 10), "int16", scale=0.1, variable=True)
    _reject(_single(bad, out), r"state \[1, 10\] != \[1, 12\]")
    # per-channel feature weights
    bad = list(ins)
    bad[1] = TensorSpec((4, 5), "int8", scale=[0.01, 0.02, 0.03, 0.04], zero_point=[0] * 4,
                        data=np.ones((4, 5), np.int8))
    _reject(_single(bad, out), "quantized per channel")


def test_svdf_float_model_is_refused_with_its_op():
    f = "float32"
    ins = [TensorSpec((1, 5), f), TensorSpec((4, 5), f, data=np.ones((4, 5), np.float32)),
           TensorSpec((4, 3), f, data=np.ones((4, 3), np.float32)),
           TensorSpec((4,), f, data=np.zeros(4, np.float32)),
           TensorSpec((1, 12), f, variable=True)]
    _reject(_single(ins, TensorSpec((1, 4), f)), "SVDF")


# --------------------------------------------------------------------------- C kernel


def _c_array(name: str, ctype: str, values: np.ndarray) -> str:
    body = ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1))
    return f"static const {ctype} {name}[] = {{{body}}};\n"


def test_svdf_kernel_clean_under_sanitizers(tmp_path):
    """The kernels run under ASan/UBSan on the generated parameters (saturating states
    whose time sums wrap, int8 state with a zero point that wraps, no bias), and print
    what tflite-micro (or TFLite's reference, without bias) computes."""
    from kiln.compiler.codegen.ops import svdf as svdf_ops

    cases = [SvdfCase(2, 40, 16, 2, 16, saturate=True, seed=6),
             SvdfCase(1, 30, 6, 3, 9, state="int8", saturate=True, seed=12),
             SvdfCase(2, 12, 4, 1, 5, bias=False, act="RELU", seed=21)]
    steps = 4
    main, expected = ["#include <stdio.h>\n#include \"svdf.h\"\n"], []
    calls = []
    for n, case in enumerate(cases):
        model = svdf_model([case])
        xs = step_inputs([case], steps, seed=n)
        ref = (tflm_runs if case.bias else tflite_ref_runs)(model, xs, reset_at=steps)
        expected += [int(v) for step in ref for v in step[0].reshape(-1)]
        ins, _ = svdf_tensors(case)
        art = kiln_compile(load(model), board="host")
        params = art.files["model.c"].split("static const kiln_svdf_params_t params = ")[1]
        params = params.split(";")[0]
        ctype = "int16_t" if case.state == "int16" else "int8_t"
        kernel = svdf_ops._KERNELS[case.state]
        main.append(f"static const kiln_svdf_params_t p{n} = {params};\n")
        main.append(_c_array(f"wf{n}", "int8_t", ins[1].data))
        main.append(_c_array(f"wt{n}", ctype, ins[2].data))
        if case.bias:
            main.append(_c_array(f"b{n}", "int32_t", ins[3].data))
        main.append(_c_array(f"x{n}", "int8_t", np.concatenate([s[0].reshape(-1) for s in xs])))
        zst = ins[4].zero_points[0]
        n_state = case.batches * case.filters * case.memory
        n_in, n_out = case.batches * case.input_size, case.batches * case.units
        calls.append(
            f"    {{ static {ctype} state[{n_state}]; int8_t out[{n_out}];\n"
            f"      for (int i = 0; i < {n_state}; ++i) state[i] = {zst};\n"
            f"      for (int k = 0; k < {steps}; ++k) {{\n"
            f"        if ({kernel}(&p{n}, x{n} + k * {n_in}, wf{n}, wt{n}, "
            f"{f'b{n}' if case.bias else 'NULL'}, state, out) != KILN_OK) return 1;\n"
            f"        for (int i = 0; i < {n_out}; ++i) printf(\"%d\\n\", out[i]);\n"
            f"      }} }}\n")
    main.append("int main(void)\n{\n" + "".join(calls) + "    return 0;\n}\n")
    out = run_sanitized_c(tmp_path, "".join(main), ["svdf.c"])
    assert [int(v) for v in out.split()] == expected


def test_svdf_kernel_rejects_bad_params(tmp_path):
    main = """#include <stdio.h>
#include "svdf.h"
int main(void)
{
    int16_t wt[4] = {0}, state[4] = {0};
    int8_t x[2] = {0}, wf[4] = {0}, out[2];
    kiln_svdf_params_t p = {1, 2, 2, 2, 1, 0, 0, 0, {1 << 30, 0}, {1 << 30, 0}};
    printf("%d", kiln_svdf_s8_state_s16(&p, x, wf, wt, NULL, state, out));
    p.rank = 3;                       /* does not divide 2 filters */
    printf(" %d", kiln_svdf_s8_state_s16(&p, x, wf, wt, NULL, state, out));
    p.rank = 1; p.memory_size = 0;
    printf(" %d", kiln_svdf_s8_state_s16(&p, x, wf, wt, NULL, state, out));
    p.memory_size = 2; p.input_zero_point = 128;
    printf(" %d", kiln_svdf_s8_state_s16(&p, x, wf, wt, NULL, state, out));
    p.input_zero_point = 0; p.batches = 1 << 20; p.filters = 1 << 10;   /* B*F*M > 2^31 */
    printf(" %d", kiln_svdf_s8_state_s16(&p, x, wf, wt, NULL, state, out));
    p.batches = 1; p.filters = 2; p.state_zero_point = 200;
    printf(" %d", kiln_svdf_s8_state_s8(&p, x, wf, (const int8_t *)wf, NULL, (int8_t *)x, out));
    printf(" %d\\n", kiln_svdf_s8_state_s16(&p, NULL, wf, wt, NULL, state, out));
    return 0;
}
"""
    assert run_sanitized_c(tmp_path, main, ["svdf.c"]).split() == ["0"] + ["1"] * 6


@pytest.mark.cross
@pytest.mark.parametrize("target", sorted(ARM_TARGETS))
def test_svdf_cross_compiles(target):
    cross_compile(["svdf.c"], ARM_TARGETS[target])


# --------------------------------------------------------------------------- keyword model


def keyword_path():
    path = models_root() / "external" / "tfm_keyword_scrambled.tflite"
    if not path.exists():
        pytest.skip(f"{path} not found (set KILN_MODELS)")
    return path


def keyword_every_layer() -> bytes:
    """TFLM's keyword benchmark model (QUANTIZE int16 -> int8, 7 SVDF, FULLY_CONNECTED,
    SOFTMAX int8 -> int16, QUANTIZE int16 -> int32) with every layer's output a model
    output: its weights are scrambled, so the final softmax is the same for every input,
    but the SVDF outputs and states vary from call to call."""
    from kiln.compiler.frontend import tflite_writer

    graph = load(keyword_path().read_bytes())
    graph.outputs = [op.outputs[0] for op in graph.ops]
    return tflite_writer.write(graph)


def keyword_inputs(steps: int, seed: int = 0) -> np.ndarray:
    """(steps, 1, 96) int16 feature frames: alternately wide normal and full-range uniform."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.normal(0, 3000, (1, 96)).clip(-32768, 32767).astype(np.int16)
                     if k % 2 == 0 else rng.integers(-32768, 32768, (1, 96)).astype(np.int16)
                     for k in range(steps)])


def test_keyword_scrambled_every_layer_matches_tflm_over_time():
    model = keyword_every_layer()
    graph = load(model)
    assert [op.type for op in graph.ops].count("SVDF") == 7
    art = kiln_compile(graph, board="host")
    assert art.state_bytes == 2 * (4 * 512 + 3 * 1024)
    xs = keyword_inputs(10)
    want = tflm_runs(model, [[x] for x in xs], reset_at=7)
    for k, x in enumerate(xs):
        if k == 7:
            art.reset()
        for j, (g, w) in enumerate(zip(art.run(x), want[k])):
            assert_equal_exact(g, w, f"step {k}, layer {j} ({graph.ops[j].type})")
    svdf_outputs = [tuple(w[1].ravel()) for w in want]     # the first SVDF's output
    assert len(set(svdf_outputs)) > 3                       # the steps differ


@pytest.mark.slow
def test_keyword_scrambled_generated_c_under_sanitizers(tmp_path):
    """The whole generated model (every layer exposed) under ASan/UBSan, several calls with
    the state carried: no report, and tflite-micro's outputs."""
    from kiln.compiler.host_build import build_executable

    model = keyword_every_layer()
    art = kiln_compile(load(model), board="host")
    n_out, steps = len(art.report["outputs"]), 4
    xs = keyword_inputs(steps, seed=5)
    main = "\n".join([
        "#include <stdio.h>", '#include "model.h"',
        "static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));",
        "static uint8_t in[KILN_INPUT_0_BYTES];",
        *[f"static uint8_t out{j}[KILN_OUTPUT_{j}_BYTES];" for j in range(n_out)],
        "int main(void)", "{",
        "    const void *inputs[] = {in};",
        "    void *outputs[] = {" + ", ".join(f"out{j}" for j in range(n_out)) + "};",
        f"    for (int k = 0; k < {steps}; ++k) {{",
        "        if (fread(in, 1, sizeof in, stdin) != sizeof in) return 3;",
        "        if (kiln_run(inputs, outputs, arena) != 0) return 4;",
        *[f"        fwrite(out{j}, 1, sizeof out{j}, stdout);" for j in range(n_out)],
        "    }", "    return 0;", "}", ""])
    sources = {k: v for k, v in art.files.items() if k.endswith((".c", ".h"))}
    exe = build_executable(sources, main, tmp_path / "build", sanitize=True)
    proc = subprocess.run([str(exe)], input=xs.tobytes(), capture_output=True, timeout=120)
    assert proc.returncode == 0 and b"runtime error" not in proc.stderr, proc.stderr[-3000:]
    want = tflm_runs(model, [[x] for x in xs], reset_at=steps)
    got, pos = np.frombuffer(proc.stdout, np.uint8), 0
    for k in range(steps):
        for j, w in enumerate(want[k]):
            g = got[pos: pos + w.nbytes].view(w.dtype).reshape(w.shape)
            assert_equal_exact(g, w, f"step {k} output {j} under sanitizers")
            pos += w.nbytes
    assert pos == got.size


@pytest.mark.slow
@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an385"])
def test_keyword_scrambled_on_qemu_carries_state(tmp_path, board):
    """The standalone firmware runs the stacked samples one after another with the state
    carried, as tflite-micro's interpreter invoked once per sample without a reset."""
    from kiln.project_gen import create_project

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    model = keyword_every_layer()
    path = tmp_path / "keyword_every_layer.tflite"
    path.write_bytes(model)
    xs = keyword_inputs(6, seed=3)
    p = create_project(path, board=board, out_dir=tmp_path / "p", inputs=[xs])
    r = p.run()
    want = tflm_runs(model, [[x] for x in xs], reset_at=len(xs))
    for j in range(len(want[0])):
        assert_equal_exact(np.asarray(r.outputs[j]).reshape(len(xs), -1),
                           np.stack([w[j].reshape(-1) for w in want]), f"{board} output {j}")
    # The per-op shapes: rank > 1, batches, int8 state with its zero point, wrapping sums.
    cases = CASES[2:4] + CASES[6:7] + CASES_S8
    path = tmp_path / "svdf_ops.tflite"
    path.write_bytes(svdf_model(cases))
    steps = step_inputs(cases, 5, seed=4)
    p = create_project(path, board=board, out_dir=tmp_path / "ops",
                       inputs=[np.stack([s[i] for s in steps]) for i in range(len(cases))])
    r = p.run()
    want = tflm_runs(path.read_bytes(), steps, reset_at=len(steps))
    for j, c in enumerate(cases):
        assert_equal_exact(np.asarray(r.outputs[j]).reshape(len(steps), -1),
                           np.stack([w[j].reshape(-1) for w in want]), f"{board} {c.label}")
