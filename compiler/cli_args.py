"""argparse value types shared by kiln's subcommands: a bad number is refused by argparse
with the option's name, before any work starts.

Every count or duration an option takes has a range: where the number travels to a
device, the width of its field in the RPC wire format (crt/rpc/README.md) bounds it;
elsewhere, a limit past which the value can only be a typo (a week of timeout, more
parallel QEMUs than any machine runs). A value outside is refused here, by name, rather
than raising deep inside (struct.error, OverflowError in a wait, a list of 2^32 groups).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from .limits import RPC_MAX_REPEAT     # the width of TIME / TUNE_RUN's repeat field

# Host-side limits.
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week; Python's waits overflow not far beyond (~292 years)
MAX_WORKERS = 256                # parallel tuning firmwares (one QEMU or board each)


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [lo, hi]."""
    def parse(text: str) -> int:
        value = _whole(text)
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo}, got {value}")
        if value > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi:,}, got {value:,}")
        return value
    parse.__name__ = f"int in [{lo}, {hi}]"
    return parse


def positive_int(text: str) -> int:
    """A whole number >= 1 with no upper limit (a count kiln only compares against)."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# --repeat of `kiln profile` and `kiln tune`: the u32 repeat of TIME / TUNE_RUN.
repeat_count = bounded_int(1, RPC_MAX_REPEAT)
# --workers of `kiln tune`.
worker_count = bounded_int(1, MAX_WORKERS)


def positive_float(text: str) -> float:
    """Seconds: a finite number in (0, MAX_TIMEOUT_S] (nan, inf and 1e400 are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    if value > MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_TIMEOUT_S:,.0f} seconds "
                                         f"(a week), got {text}")
    return value


# --input-shape NAME=D,D,... and --layout: how an ONNX model is read (frontend.load).
LAYOUTS = ("nchw", "nhwc")


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """NAME=1,3,32,32: an ONNX input's name and the dims that pin its dynamic ones. The
    name is everything before the last '=' (an ONNX name may hold '=' or ',')."""
    name, sep, dims = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=DIMS (e.g. input=1,3,32,32)")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: the dims must be whole numbers separated "
                                         f"by commas (e.g. {name}=1,3,32,32)") from None
    if any(d < 1 for d in shape):
        raise argparse.ArgumentTypeError(f"{text!r}: every dim must be at least 1")
    return name, shape


def add_model_options(p: argparse.ArgumentParser) -> None:
    """--input-shape and --layout, on every command that reads a model."""
    p.add_argument("--input-shape", dest="input_shape", action="append", type=input_shape,
                   default=[], metavar="NAME=D,D,...",
                   help="pin the dynamic dims of an ONNX input (e.g. x=1,3,32,32; repeat "
                        "per input); not for .tflite models")
    p.add_argument("--layout", choices=LAYOUTS, default=None,
                   help="an ONNX model's image inputs and outputs: nchw (as the model "
                        "declares them, the default) or nhwc (no layout transposes at all; "
                        "docs/onnx.md)")


def model_options(args) -> dict:
    """The keyword arguments of frontend.load() that the options above give (empty when
    none is given: the model is read as it is)."""
    from .errors import InputError

    options: dict = {}
    pins = getattr(args, "input_shape", None) or []
    if pins:
        shapes: dict[str, tuple[int, ...]] = {}
        for name, shape in pins:
            if name in shapes and shapes[name] != shape:
                raise InputError(f"--input-shape names {name!r} twice with different dims")
            shapes[name] = shape
        options["input_shapes"] = shapes
    if getattr(args, "layout", None):
        options["layout"] = args.layout
    return options
