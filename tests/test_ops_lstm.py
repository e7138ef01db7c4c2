"""UNIDIRECTIONAL_SEQUENCE_LSTM (int8, int16 cell state) against tflite-micro, bit for bit.

Models are built with the TF converter's quantization scheme (`lstm_model`): int8
activations, per-tensor symmetric int8 weights, int32 biases at input_scale ×
weight_scale, the hidden state sharing the output's quantization, an int16 cell state
with a power-of-two scale. Every case runs several calls in a row (the state carries
over) and again after a reset, in kiln and in TFLM.
"""

from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.codegen.ops.lstm import (cell_scale_power, quantized_cell_clip,
                                            tanh_scaling)
from kiln.compiler.errors import ModelError
from reference import _arena_size, assert_equal_exact
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int, rand_int8

GATES = ("input", "forget", "cell", "output")


def lstm_model(rng: np.random.Generator, batches: int = 1, steps: int = 4, depth: int = 5,
               units: int = 6, time_major: bool = False, cell_clip: float = 0.0,
               input_q: tuple[float, int] = (0.03, -5), hidden_q: tuple[float, int] = (1 / 128, 3),
               cell_power: int = -11, weight_scale: float = 0.02,
               variants: tuple[str, ...] = (), activations: str = "int8") -> bytes:
    """One LSTM op; `variants` adds the tensors of "peephole", "projection", "layer_norm"
    or drops the input gate ("cifg"), for the refusal tests. `activations` "int16" makes
    the 16x8 form: int16 input, hidden state and output (zero points 0), int64 biases."""
    wide = activations == "int16"
    if wide:
        input_q, hidden_q = (input_q[0] / 256, 0), (hidden_q[0] / 256, 0)
    act, bias_type = activations, "int64" if wide else "int32"
    shape_in = (steps, batches, depth) if time_major else (batches, steps, depth)
    shape_out = shape_in[:2] + (units,)
    tensors = [TensorSpec(shape_in, act, scale=input_q[0], zero_point=input_q[1], name="x")]
    idx = [0] + [-1] * 23

    def add(spec: TensorSpec, at: int) -> None:
        idx[at] = len(tensors)
        tensors.append(spec)

    for g_i, g in enumerate(GATES):
        if g == "input" and "cifg" in variants:
            continue
        s_in = float(np.float32(weight_scale * rng.uniform(0.5, 1.5)))
        s_rec = float(np.float32(weight_scale * rng.uniform(0.5, 1.5)))
        add(TensorSpec((units, depth), "int8", scale=s_in, zero_point=0,
                       data=rand_int8((units, depth), rng, -127, 127), name=f"w_in_{g}"), 1 + g_i)
        add(TensorSpec((units, units), "int8", scale=s_rec, zero_point=0,
                       data=rand_int8((units, units), rng, -127, 127), name=f"w_rec_{g}"), 5 + g_i)
        b_scale = float(np.float32(input_q[0]) * np.float32(s_in))
        bias = rng.integers(-3000, 3000, units) * (256 if wide else 1)
        add(TensorSpec((units,), bias_type, scale=b_scale, zero_point=0, data=bias,
                       name=f"b_{g}"), 12 + g_i)
    if "peephole" in variants:
        for k in range(3):
            add(TensorSpec((units,), "int16", scale=0.001, zero_point=0,
                           data=np.ones(units, np.int16), name=f"peep{k}"), 9 + k)
    if "projection" in variants:
        add(TensorSpec((units, units), "int8", scale=0.01, zero_point=0,
                       data=np.ones((units, units), np.int8), name="proj"), 16)
    if "layer_norm" in variants:
        for k in range(4):
            add(TensorSpec((units,), "int16", scale=0.001, zero_point=0,
                           data=np.ones(units, np.int16), name=f"ln{k}"), 20 + k)
    add(TensorSpec((batches, units), act, scale=hidden_q[0], zero_point=hidden_q[1],
                   variable=True, name="hidden_state"), 18)
    add(TensorSpec((batches, units), "int16", scale=2.0 ** cell_power, zero_point=0,
                   variable=True, name="cell_state"), 19)
    out = len(tensors)
    tensors.append(TensorSpec(shape_out, act, scale=hidden_q[0], zero_point=hidden_q[1],
                              name="y"))
    op = OpSpec("UNIDIRECTIONAL_SEQUENCE_LSTM", idx, [out],
                {"fused_activation_function": "TANH", "cell_clip": cell_clip,
                 "proj_clip": 0.0, "time_major": time_major,
                 "asymmetric_quantize_inputs": False})
    return build_model([op], tensors, [0], [out])


def tflm_runs(model: bytes, inputs: list[np.ndarray], reset_before: set[int]) -> list[np.ndarray]:
    """TFLM invoked once per input without resetting, except before the calls listed."""
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(bytes(model), arena_size=_arena_size(model))
    outs = []
    for i, x in enumerate(inputs):
        if i in reset_before:
            interp.reset()
        interp.set_input(np.ascontiguousarray(x), 0)
        interp.invoke()
        outs.append(np.array(interp.get_output(0), copy=True))
    return outs


def check_lstm(model: bytes, calls: int = 3, seed: int = 0) -> None:
    """kiln vs TFLM over `calls` successive calls, a reset, and `calls` more."""
    art = kiln_compile(load(model), board="host")
    x = load(model).tensor(0)
    rng = np.random.default_rng(seed)
    xs = [rand_int(x.shape, rng, x.dtype) for _ in range(2 * calls)]
    want = tflm_runs(model, xs, reset_before={calls})
    for i, x in enumerate(xs):
        if i == calls:
            art.reset()
        got = art.run(x)[0]
        assert_equal_exact(got, want[i], f"call {i}")


CASES = [
    dict(batches=1, steps=4, depth=5, units=6),
    dict(batches=1, steps=28, depth=28, units=20, cell_power=-12, cell_clip=10.0),
    dict(batches=3, steps=5, depth=7, units=4, time_major=False),
    dict(batches=3, steps=5, depth=7, units=4, time_major=True),
    dict(batches=2, steps=3, depth=1, units=33, time_major=True, cell_clip=0.05),
    dict(batches=1, steps=6, depth=16, units=3, cell_power=-15, weight_scale=0.05),
    dict(batches=1, steps=6, depth=9, units=8, cell_power=-9, input_q=(0.1, 127),
         hidden_q=(0.004, -128)),
    dict(batches=1, steps=3, depth=4, units=5, cell_power=-13, cell_clip=0.5),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_lstm_matches_tflm(case):
    check_lstm(lstm_model(np.random.default_rng(1), **case))


CASES_16X8 = [
    dict(batches=1, steps=4, depth=5, units=6),
    dict(batches=1, steps=28, depth=28, units=20, cell_power=-12, cell_clip=10.0),
    dict(batches=3, steps=5, depth=7, units=4, time_major=True),
    dict(batches=2, steps=3, depth=9, units=8, cell_power=-14, cell_clip=0.3),
    dict(batches=1, steps=6, depth=16, units=3, cell_power=-10, weight_scale=0.05),
    # Scales whose input-gate FC multiplier rounds differently from a float32 product of
    # the scales than from the double one TFLM takes (found by benchmarks/lstm_fuzz.py).
    dict(batches=3, steps=9, depth=19, units=29, time_major=True, cell_clip=0.5,
         cell_power=-9, weight_scale=0.04739573839469371, input_q=(0.007689913975325479, 0),
         hidden_q=(0.0051969465164725176, 0), seed=12),
]


@pytest.mark.parametrize("case", CASES_16X8,
                         ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_lstm_16x8_matches_tflm(case):
    """int16 activations, int8 weights, int64 biases (TFLM's EvalLstm<int16, int8, int16,
    int64>): int64 accumulators and TFLM's int64 requantization."""
    case = dict(case)
    seed = case.pop("seed", 2)
    check_lstm(lstm_model(np.random.default_rng(seed), activations="int16", **case))


def test_mnist_lstm_model_matches_tflm(models_dir):
    """TFLM's mnist LSTM example (int8, 28 steps of 28 inputs, 20 units), calls in a row."""
    path = models_dir / "external" / "tfm_mnist_lstm_int8.tflite"
    data = path.read_bytes()
    art = kiln_compile(load(path), board="host")
    rng = np.random.default_rng(3)
    xs = [rand_int8((1, 28, 28), rng) for _ in range(4)]
    want = tflm_runs(data, xs, reset_before={2})
    for i, x in enumerate(xs):
        if i == 2:
            art.reset()
        assert_equal_exact(art.run(x)[0], want[i], f"call {i}")


@pytest.mark.parametrize("variant", ["cifg", "peephole", "projection", "layer_norm",
                                     "diagonal"])
def test_lstm_variants_refused_by_name(variant):
    g = load(lstm_model(np.random.default_rng(0), variants=(variant,)))
    if variant == "diagonal":
        g.ops[0].options["diagonal_recurrent_tensors"] = True
    with pytest.raises(ModelError, match={"cifg": "CIFG", "peephole": "peephole",
                                          "projection": "projection",
                                          "layer_norm": "layer normalization",
                                          "diagonal": "diagonal recurrent"}[variant]):
        kiln_compile(g, board="host")


def test_cell_scale_helpers():
    assert cell_scale_power(2.0 ** -12) == -12
    assert cell_scale_power(2.0 ** -11 * 1.3) == -11        # rounded like CheckedLog2
    assert tanh_scaling(-12) == (3, 0)
    assert tanh_scaling(-10) == (12, 0)
    assert tanh_scaling(-15) == (3, 3)
    assert quantized_cell_clip(0.0, 2.0 ** -12) == -1
    assert quantized_cell_clip(10.0, 2.0 ** -12) == 32767
    assert quantized_cell_clip(1e-5, 2.0 ** -12) == 0         # clipping on, to zero


@pytest.mark.slow
@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an385"])
def test_mnist_lstm_standalone_firmware_on_qemu(tmp_path, models_dir, board):
    """The standalone firmware runs its samples as successive calls (state carried, the
    warm-up call undone by a reset), like TFLM invoked once per sample without a reset."""
    from conftest import require_tool
    from kiln.project_gen import create_project

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    path = models_dir / "external" / "tfm_mnist_lstm_int8.tflite"
    rng = np.random.default_rng(5)
    x = np.stack([rand_int8((1, 28, 28), rng) for _ in range(3)])
    result = create_project(path, board=board, out_dir=tmp_path / "p", inputs=[x]).run()
    want = np.concatenate(tflm_runs(path.read_bytes(), list(x), reset_before=set()))
    assert_equal_exact(result.outputs[0], want, board)


_C_CHECKS = r"""
#include <stdio.h>
#include <string.h>
@PACKED@
#include "lstm.c"        /* built into this file: with or without KILN_LSTM_PACKED */
#include "kiln_kernels.h"

static const uint16_t table[256] = {@TABLE@};

static uint32_t rng_state = 12345u;
static int32_t rnd(int32_t lo, int32_t hi)   /* uniform in [lo, hi] */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return lo + (int32_t)((rng_state >> 8) % (uint32_t)(hi - lo + 1));
}

int main(void)
{
    /* The LSTM's scalar sigmoid and tanh = the int16 LOGISTIC and TANH kernels (checked
     * against tflite-micro elsewhere) on every int16 input, for each input scaling. */
    static int16_t in[65536], want[65536];
    for (int32_t i = 0; i < 65536; ++i) in[i] = (int16_t)(i - 32768);
    const kiln_dims_t dims = {1, 1, 1, 65536};
    int mismatches = 0;
    kiln_sigmoid_s16_params_t sp = {table, 3, 0};
    if (kiln_logistic_s16(&sp, &dims, in, &dims, want) != KILN_OK) return 1;
    for (int32_t i = 0; i < 65536; ++i) {
        mismatches += kiln_lstm_sigmoid_s16(table, in[i]) != want[i];
    }
    static const int32_t scalings[] = {-28, -17, -9, -4, -2, -1, 0, 1, 2, 3, 6, 10, 13};
    for (size_t n = 0; n < sizeof scalings / sizeof scalings[0]; ++n) {
        const int32_t k = scalings[n];
        const int32_t m = k >= 0 ? 3 << k : 3, s = k >= 0 ? 0 : -k;
        kiln_sigmoid_s16_params_t tp = {table, m, s};
        if (kiln_tanh_s16(&tp, &dims, in, &dims, want) != KILN_OK) return 2;
        for (int32_t i = 0; i < 65536; ++i) {
            mismatches += kiln_lstm_tanh_s16(table, in[i], m, s) != want[i];
        }
    }
    /* The largest input scaling the lowering allows (3 << 14) and the longest shift. */
    for (int32_t i = 0; i < 65536; ++i) {
        (void)kiln_lstm_tanh_s16(table, in[i], 3 << 14, 0);
        (void)kiln_lstm_tanh_s16(table, in[i], 3, 31);
    }
    printf("activation mismatches %d\n", mismatches);

    /* Whole steps with extreme values: full-range weights, biases at the accumulator
     * bound, saturating multipliers, both layouts, clipping on and off. */
    enum { B = 2, T = 3, I = 9, S = 7 };
    static int8_t w[8][S * I > S * S ? S * I : S * S];
    static int32_t bias[8][S];
    static int64_t bias64[4][S];
    int8_t x[B * T * I], hidden[B * S], out[B * T * S];
    int16_t x16[B * T * I], hidden16[B * S], out16[B * T * S], scratch[S];
    int16_t cell[B * S];
    for (int g = 0; g < 8; ++g) {
        for (int i = 0; i < S * I; ++i) w[g][i] = (int8_t)rnd(-127, 127);
        for (int i = 0; i < S; ++i) bias[g][i] = rnd(-1000000, 1000000);
    }
    for (int g = 0; g < 4; ++g) {    /* |bias| + 32768 * sum|w| < 2^47, as the lowering checks */
        for (int i = 0; i < S; ++i) bias64[g][i] = (int64_t)bias[g][i] * 65536;
    }
    uint32_t checksum = 0;
    for (int trial = 0; trial < 200; ++trial) {
        kiln_lstm_s8_params_t p;
        kiln_lstm_s16_params_t p16;
        kiln_lstm_gate_s8_t *gates[4] = {&p.forget_gate, &p.input_gate, &p.cell_gate,
                                         &p.output_gate};
        kiln_lstm_gate_s16_t *gates16[4] = {&p16.forget_gate, &p16.input_gate,
                                            &p16.cell_gate, &p16.output_gate};
        for (int g = 0; g < 4; ++g) {
            const kiln_lstm_gate_s8_t gate = {w[g], w[g + 4], bias[g], bias[g + 4],
                                              {rnd(1 << 30, 0x7FFFFFFF), rnd(-31, 8)},
                                              {rnd(1 << 30, 0x7FFFFFFF), rnd(-31, 8)}};
            const kiln_lstm_gate_s16_t gate16 = {w[g], w[g + 4], bias64[g],
                                                 {rnd(1 << 30, 0x7FFFFFFF), rnd(-31, 7)},
                                                 {rnd(1 << 30, 0x7FFFFFFF), rnd(-31, 7)}};
            *gates[g] = gate;
            *gates16[g] = gate16;
        }
        const int32_t power = rnd(-40, 2);
        const kiln_lstm_cell_t cell_params = {
            table,
            {rnd(1 << 30, 0x7FFFFFFF), rnd(-31, 1)}, {rnd(1 << 30, 0x7FFFFFFF), rnd(-31, 1)},
            {rnd(1 << 30, 0x7FFFFFFF), rnd(-31, 1)}, rnd(-128, 127), rnd(-1, 32767),
            power + 12 >= 0 ? 3 << (power + 12) : 3, power + 12 >= 0 ? 0 : -(power + 12),
            B, T, I, S, trial & 1};
        p.cell = cell_params;
        p16.cell = cell_params;
        p16.cell.hidden_zero_point = 0;
        for (int i = 0; i < B * T * I; ++i) {
            x[i] = (int8_t)rnd(-128, 127);
            x16[i] = (int16_t)rnd(-32768, 32767);
        }
        for (int i = 0; i < B * S; ++i) {
            hidden[i] = (int8_t)rnd(-128, 127);
            hidden16[i] = (int16_t)rnd(-32768, 32767);
            cell[i] = (int16_t)rnd(-32768, 32767);
        }
        const kiln_context_t ctx = {scratch, (int32_t)sizeof scratch};
        if (kiln_lstm_s8(&ctx, &p, x, hidden, cell, out) != KILN_OK) return 3;
        for (int i = 0; i < B * T * S; ++i) checksum = checksum * 31u + (uint8_t)out[i];
        if (kiln_lstm_s16(&ctx, &p16, x16, hidden16, cell, out16) != KILN_OK) return 4;
        for (int i = 0; i < B * T * S; ++i) checksum = checksum * 31u + (uint16_t)out16[i];
    }
    printf("checksum %u\n", checksum);
    const kiln_context_t small = {scratch, 2 * S - 1};
    kiln_lstm_s16_params_t bad;
    memset(&bad, 0, sizeof bad);
    bad.cell.sigmoid_table = table;
    bad.cell.input_size = I;
    bad.cell.state_size = S;
    if (kiln_lstm_s16(&small, &bad, x16, hidden16, cell, out16) != KILN_ERR_ARG) return 5;
    printf("steps ok\n");
    return 0;
}
"""


def test_lstm_kernel_under_sanitizers(tmp_path):
    """ASan + UBSan: the scalar activations equal the int16 LOGISTIC/TANH kernels on every
    input, and whole steps with extreme values run clean, with the plain dot products and
    with the packed ones of DSP cores (KILN_LSTM_PACKED), which give the same outputs."""
    from conftest import run_sanitized_c
    from kiln.compiler.codegen.ops.activation import sigmoid_table_u16

    table = ", ".join(str(int(v)) for v in sigmoid_table_u16())
    outs = []
    for packed in ("", "#define KILN_LSTM_PACKED"):
        source = _C_CHECKS.replace("@TABLE@", table).replace("@PACKED@", packed)
        work = tmp_path / ("packed" if packed else "plain")
        work.mkdir()
        out = run_sanitized_c(work, source, ["activation.c"])
        assert "activation mismatches 0" in out and "steps ok" in out, out
        outs.append(out)
    assert outs[0] == outs[1]


@pytest.mark.cross
@pytest.mark.parametrize("target", ["m0plus", "m3", "m4f"])
def test_lstm_kernel_cross_compiles(target):
    from test_ops_pool import ARM_TARGETS, cross_compile

    cross_compile(["lstm.c"], ARM_TARGETS[target])


_MODEL_MAIN = r"""
#include <stdio.h>
#include <stdint.h>
#include "model.h"
static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));
static uint8_t in[KILN_INPUT_0_BYTES], out[KILN_OUTPUT_0_BYTES];
int main(void)
{
    const void *inputs[] = {in};
    void *outputs[] = {out};
    for (int call = 0; call < 4; ++call) {
        if (call == 3) kiln_reset();
        if (fread(in, 1, sizeof in, stdin) != sizeof in) return 3;
        const int status = kiln_run(inputs, outputs, arena);
        if (status != 0) return status;
        fwrite(out, 1, sizeof out, stdout);
    }
    return 0;
}
"""


@pytest.mark.slow
def test_mnist_lstm_model_under_sanitizers(tmp_path, models_dir):
    """The generated C of TFLM's mnist LSTM, built with ASan + UBSan and -Werror: three
    calls in a row, a reset, a fourth call; outputs equal TFLM's."""
    import subprocess

    from kiln.compiler.host_build import build_executable

    path = models_dir / "external" / "tfm_mnist_lstm_int8.tflite"
    art = kiln_compile(load(path), board="host")
    files = {k: v for k, v in art.files.items() if k.endswith((".c", ".h"))}
    exe = build_executable(files, _MODEL_MAIN, tmp_path, sanitize=True)
    rng = np.random.default_rng(11)
    xs = [rand_int8((1, 28, 28), rng) for _ in range(4)]
    proc = subprocess.run([str(exe)], input=b"".join(x.tobytes() for x in xs),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    want = tflm_runs(path.read_bytes(), xs, reset_before={3})
    got = np.frombuffer(proc.stdout, np.int8).reshape(4, 1, 10)
    for i in range(4):
        assert_equal_exact(got[i], want[i], f"call {i}")


def test_lstm_type_refusals_name_the_reason():
    # int16 activations with int32 biases: TFLM would read them as int64.
    g = load(lstm_model(np.random.default_rng(0), activations="int16"))
    for k in (12, 13, 14, 15):
        t = g.tensor(g.ops[0].inputs[k])
        t.dtype, t.data = "int32", t.data.astype(np.int32)
    with pytest.raises(ModelError, match="must be constant int64 with int16 activations"):
        kiln_compile(g, board="host")
    # Per-channel weights: TFLM's LSTM quantizes gates per tensor.
    g = load(lstm_model(np.random.default_rng(0)))
    w = g.tensor(g.ops[0].inputs[2])
    w.quant.scale = np.full(w.shape[0], w.quant.scale[0], np.float32)
    w.quant.zero_point = np.zeros(w.shape[0], np.int64)
    with pytest.raises(ModelError, match="per-channel weights"):
        kiln_compile(g, board="host")


@pytest.mark.parametrize("which,scale", [(18, 0.0), (19, float("nan")), (2, float("inf")),
                                         (0, -1.0)])
def test_lstm_bad_scales_refused(which, scale):
    g = load(lstm_model(np.random.default_rng(0)))
    g.tensor(g.ops[0].inputs[which]).quant.scale = np.array([scale], np.float32)
    with pytest.raises(ModelError, match="must be finite and > 0"):
        kiln_compile(g, board="host")


def test_fc_multiplier_is_tflms_double_product():
    """The gate FCs take TFLM's FC multiplier, whose scale product is double, not float32:
    a one-weight FULLY_CONNECTED in TFLM whose bias lands where the two round apart
    follows the double one (the LSTM's int8 gates are FCs of the same Prepare)."""
    from kiln.compiler.codegen.ops.lstm import _fc_multiplier
    from kiln.compiler.numerics import quantize_multiplier, requantize
    from reference import run_reference
    from tflite_builder import single_op_model

    sx, sw, sy = 0.08884836733341217, 0.0020503662526607513, 0.26504915952682495
    m32, s32 = quantize_multiplier(float(np.float32(sx) * np.float32(sw)) / sy)
    m64, s64 = quantize_multiplier(sx * sw / sy)
    assert (m32, s32) != (m64, s64)
    b = np.arange(-100_000, 100_000, dtype=np.int64)
    r32, r64 = requantize(b, m32, s32), requantize(b, m64, s64)
    hits = np.nonzero((r32 != r64) & (np.abs(r64) < 120))[0]
    assert hits.size, "no bias separates the two multipliers"
    bias = int(b[hits[0]])
    model = single_op_model("FULLY_CONNECTED", [
        TensorSpec((1, 1), "int8", scale=sx, zero_point=0),
        TensorSpec((1, 1), "int8", scale=sw, zero_point=0, data=np.ones((1, 1), np.int8)),
        TensorSpec((1,), "int32", scale=float(np.float32(sx) * np.float32(sw)), zero_point=0,
                   data=np.array([bias]))], [TensorSpec((1, 1), "int8", scale=sy, zero_point=0)])
    assert int(run_reference(model, np.zeros((1, 1), np.int8))[0][0, 0]) == int(r64[hits[0]])
    assert _fc_multiplier(sx, sw) == quantize_multiplier(sx * sw / 2.0 ** -12)


@pytest.mark.slow
@pytest.mark.cross
@pytest.mark.qemu
def test_lstm_16x8_standalone_firmware_on_qemu(tmp_path):
    """A 16x8 LSTM (time major, 2 batches, cell clip) as firmware on mps2-an386: int64
    accumulators and requantization on Cortex-M, successive calls, as TFLM."""
    from conftest import require_tool
    from kiln.project_gen import create_project

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    model = lstm_model(np.random.default_rng(2), activations="int16", batches=2, steps=7,
                       depth=13, units=11, time_major=True, cell_clip=0.5, cell_power=-10)
    path = tmp_path / "lstm16.tflite"
    path.write_bytes(model)
    rng = np.random.default_rng(5)
    x = np.stack([rand_int((7, 2, 13), rng, "int16") for _ in range(3)])
    result = create_project(path, board="mps2-an386", out_dir=tmp_path / "p", inputs=[x]).run()
    want = np.stack(tflm_runs(model, list(x), reset_before=set()))
    assert_equal_exact(result.outputs[0].reshape(want.shape), want, "mps2-an386")
