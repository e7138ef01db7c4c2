"""Sample inputs, the firmware transcript parser and the size/overflow logic: pure Python."""

from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler.errors import BoardError, DeviceError, InputError
from kiln.project_gen.boards import get_board
from kiln.project_gen.console import to_result
from kiln.compiler.inputs import TensorSpec, random_inputs, split_samples
from kiln.project_gen.inputs import c_bytes
from kiln.project_gen.qemu import qemu_args, ticks_to_instructions
from kiln.project_gen.sizes import check_fits, linker_overflows, overflow_error

SPEC = TensorSpec("x", (1, 4, 4, 1), np.dtype(np.int8), 0.5, -3)


def test_one_sample_with_or_without_its_batch_axis():
    [[x]] = split_samples([np.arange(16, dtype=np.int8).reshape(4, 4, 1)], [SPEC])
    assert x.shape == (1, 4, 4, 1) and x.dtype == np.int8
    with pytest.raises(InputError, match=r"got an array of shape \[16\]"):
        split_samples([np.arange(16, dtype=np.int8)], [SPEC])     # same size, other shape


def test_samples_stacked_on_axis_0():
    samples = split_samples([np.zeros((3, 4, 4, 1), np.int8)], [SPEC])
    assert len(samples) == 3 and samples[2][0].shape == (1, 4, 4, 1)


def test_float_data_is_quantized_with_the_input_scale_and_zero_point():
    data = np.array([0.0, 1.0, -1.0, 100.0] * 4, np.float32).reshape(4, 4, 1)
    [[x]] = split_samples([data], [SPEC])
    assert x.reshape(-1)[:4].tolist() == [-3, -1, -5, 127]   # q = round(x / 0.5) - 3, clamped


@pytest.mark.parametrize("array, message", [
    (np.zeros((2, 3), np.int8), r"shape \[1, 4, 4, 1\]"),
    (np.zeros((4, 4, 1), np.int32) + 1000, "do not fit int8"),
    (np.zeros((4, 4, 1), np.complex64), "wants int8"),
])
def test_bad_inputs(array, message):
    with pytest.raises(InputError, match=message):
        split_samples([array], [SPEC])


def test_input_count_must_match():
    with pytest.raises(InputError, match="1 input"):
        split_samples([], [SPEC])


def test_random_inputs_are_fixed_seed_and_span_the_dtype():
    a, b = random_inputs([SPEC]), random_inputs([SPEC])
    assert np.array_equal(a[0], b[0]) and a[0].dtype == np.int8 and a[0].shape == SPEC.shape


def test_c_bytes_are_little_endian():
    assert c_bytes(np.array([1, -2], np.int16)) == "    0x01, 0x00, 0xfe, 0xff,"


OUT = [TensorSpec("y", (1, 3), np.dtype(np.int8), 0.1, 0)]


def test_transcript_survives_noise_and_stacks_samples():
    text = ("boot banner\r\n\x00garbage KILN\nKILN BEGIN my model mps2-an386 2\n"
            "KILN OUTPUT 0 0 3 01ff7f\nKILN TICKS 0 160\n"
            "KILN OUTPUT 1 0 3 020304\nKILN TICKS 1 170\nKILN OUTPUT 1 0 zz\n"
            "KILN STACK 512\nKILN END 0 25000000\n")
    r = to_result(text, OUT, "instructions (QEMU -icount)", 0, "test")
    assert r.outputs[0].tolist() == [[1, -1, 127], [2, 3, 4]]
    assert r.ticks == [160, 170] and r.stack_bytes == 512 and r.tick_hz == 25_000_000


@pytest.mark.parametrize("text, message", [
    ("KILN BEGIN m b 1\nKILN OUTPUT 0 0 3 010203\n", "without its KILN END"),
    ("KILN BEGIN m b 1\nKILN END 2 100\n", "status 2"),
    ("KILN BEGIN m b 1\nKILN TICKS 0 5\nKILN END 0 100\n", "output 0 of sample 0 missing"),
    ("KILN BEGIN m b 1\nKILN FAULT exception 0x03\n", "faulted"),
])
def test_incomplete_transcripts_are_device_errors(text, message):
    with pytest.raises(DeviceError, match=message):
        to_result(text, OUT, "cycles", 1, "test")


def test_ticks_to_instructions():
    # MPS2: 25 MHz SysTick, 64 ns per instruction at shift 6 -> 1.6 ticks per instruction.
    assert ticks_to_instructions(1_600_000, 25_000_000, 6) == 1_000_000


def test_qemu_command_line():
    args = qemu_args(get_board("mps2-an386"))
    assert args[:2] == ["-M", "mps2-an386"]
    assert "shift=6" in args and "enable=on,target=native" in args
    with pytest.raises(BoardError, match="not emulated"):
        qemu_args(get_board("nucleo-l4r5zi"))


def test_linker_overflow_lines():
    log = ("ld: firmware.elf section `.kiln_weights' will not fit in region `FLASH'\n"
           "ld: region `FLASH' overflowed by 22980 bytes\n"
           "ld: region `RAM' overflowed by 12 bytes\n")
    overs = linker_overflows(log)
    assert overs == {"FLASH": 22980, "RAM": 12}
    msg = str(overflow_error("ad01_int8", get_board("lm3s6965evb"), overs))
    assert msg == ("ad01_int8 does not fit lm3s6965evb: FLASH overflows by 22,980 bytes "
                   "(the board has 262,144); RAM overflows by 12 bytes (the board has 65,536)")


def test_check_fits_before_building():
    check_fits("m", get_board("microbit"), weights_bytes=100_000, arena_bytes=8_000)
    with pytest.raises(BoardError, match="RAM overflows by at least 1,664 bytes"):
        check_fits("m", get_board("microbit"), weights_bytes=1_000, arena_bytes=16_000)
    check_fits("m", get_board("host"), weights_bytes=10**9, arena_bytes=10**9)
