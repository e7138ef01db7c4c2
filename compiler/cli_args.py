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
