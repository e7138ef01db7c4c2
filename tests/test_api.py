"""The Python API as a library user calls it: the documented argument forms work, and the
wrong ones are a KilnError naming what was expected (never an AttributeError from inside)."""

from __future__ import annotations

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import REPO, models_root
from kiln.compiler.tune import Records, tune
from kiln.project_gen.boards import get_board

DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"


def test_compile_takes_a_path_and_a_board_object():
    by_path = kc.compile(str(DIGITS), board=get_board("mps2-an386"))
    by_graph = kc.compile(kc.load(DIGITS), board="mps2-an386")
    assert by_path.board == "mps2-an386" and by_path.files == by_graph.files


@pytest.mark.parametrize("call, error, message", [
    (lambda: kc.compile(123), kc.InputError, "expected a Graph from kiln.compiler.load()"),
    (lambda: kc.compile(DIGITS, board=None), kc.BoardError, "board must be a board name"),
    (lambda: kc.compile(DIGITS, optimize="fast"), kc.InputError, "optimize must be one of"),
    (lambda: tune(DIGITS, "mps2-an386", None), kc.InputError, "records must be"),
    (lambda: tune(DIGITS, "mps2-an386", Records(), {"workers": 1}), kc.InputError,
     "options must be a TuneOptions"),
    (lambda: kc.quantize(5, None), kc.InputError, "expected a Graph"),
])
def test_wrong_argument_types_are_kiln_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_quantize_stays_a_function_after_its_subpackage_is_imported(tmp_path):
    """`kiln.compiler.quantize` is both the function and a subpackage: importing a module
    of the subpackage used to rebind the name to the module (TypeError on the next call)."""
    import kiln.compiler.quantize.cli  # noqa: F401
    from kiln.compiler.quantize import QuantizeOptions  # noqa: F401

    assert callable(kc.quantize)
    float_model = models_root() / "digits" / "digits_cnn_float.tflite"
    calib = models_root() / "digits" / "digits_calib_x.npy"
    if not float_model.exists():
        pytest.skip(f"{float_model} is absent (set KILN_MODELS)")
    g = kc.quantize(str(float_model), np.load(calib)[:16])
    assert {t.dtype for t in g.tensors if not t.is_const} <= {"int8", "int32"}
