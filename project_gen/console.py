"""Parse what a standalone firmware prints (the KILN lines of templates/main_standalone.c.j2).

Everything that is not a KILN line (boot banners, QEMU warnings, user prints)
is ignored, so the parser survives noise on the serial line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kiln.compiler.errors import DeviceError
from kiln.compiler.escape import printable

from kiln.compiler.inputs import TensorSpec


@dataclass
class RunResult:
    """What one firmware run reported.

    outputs[i] is output i in the model's dtype; with N samples baked in, the
    samples are stacked on axis 0 (for one sample it has the model's shape).
    `cycles` is the per-inference figure in `unit`: core cycles on a real
    board, instructions on QEMU (SysTick ticks converted, see qemu.py), None
    on the host (see `seconds`).
    """

    outputs: list[np.ndarray]
    samples: list[list[np.ndarray]]
    ticks: list[int]
    tick_hz: int
    unit: str
    cycles: int | None = None
    instructions: int | None = None
    stack_bytes: int | None = None
    log: str = field(default="", repr=False)

    @property
    def seconds(self) -> float:
        """Wall (or, under QEMU, virtual) time of the first timed run."""
        return self.ticks[0] / self.tick_hz


@dataclass
class Transcript:
    model: str = ""
    board: str = ""
    num_samples: int = 0
    outputs: dict[tuple[int, int], bytes] = field(default_factory=dict)
    ticks: dict[int, int] = field(default_factory=dict)
    stack: int | None = None
    status: int | None = None
    tick_hz: int | None = None
    fault: str | None = None


def parse_lines(text: str) -> Transcript:
    t = Transcript()
    for raw in text.splitlines():
        line = raw.strip()
        start = line.find("KILN ")
        if start < 0:
            continue
        words = line[start:].split()
        try:
            tag = words[1]
            if tag == "BEGIN":
                # The model name may hold spaces; the board and count never do.
                t.model, t.board, t.num_samples = " ".join(words[2:-2]), words[-2], int(words[-1])
            elif tag == "OUTPUT":
                s, o, n = int(words[2]), int(words[3]), int(words[4])
                data = bytes.fromhex(words[5]) if n else b""
                if len(data) != n:
                    raise ValueError("short output")
                t.outputs[(s, o)] = data
            elif tag == "TICKS":
                t.ticks[int(words[2])] = int(words[3])
            elif tag == "STACK":
                t.stack = int(words[2])
            elif tag == "END":
                t.status, t.tick_hz = int(words[2]), int(words[3])
            elif tag == "FAULT":
                t.fault = " ".join(words[2:])
        except (IndexError, ValueError):
            continue    # a line garbled on the wire: the checks below report what is missing
    return t


def to_result(text: str, outputs: list[TensorSpec], unit: str, exit_code: int,
              where: str) -> RunResult:
    """Check the transcript is complete and decode it into a RunResult."""
    t = parse_lines(text)
    # What the device printed goes through escape.printable: control characters and
    # escape sequences in it never reach the terminal raw, nor split the error line.
    tail = " | ".join(text.strip().splitlines()[-3:])[-240:]
    if t.fault:
        raise DeviceError(f"{where}: the firmware faulted ({printable(t.fault[:120])}); "
                          f"last output: {printable(tail)}")
    if t.status is None:
        raise DeviceError(f"{where}: the firmware stopped without its KILN END line "
                          f"(exit code {exit_code}); last output: {printable(tail)}")
    if t.status != 0:
        raise DeviceError(f"{where}: kiln_run() returned status {t.status}")
    if not t.tick_hz or t.tick_hz < 0:
        raise DeviceError(f"{where}: the firmware reported a tick rate of {t.tick_hz} Hz")
    bad = {s: n for s, n in t.ticks.items() if not 0 <= n < 1 << 64}
    if bad:
        raise DeviceError(f"{where}: the firmware reported impossible ticks {bad}")
    samples = []
    for s in range(t.num_samples):
        row = []
        for o, spec in enumerate(outputs):
            data = t.outputs.get((s, o))
            if data is None or len(data) != spec.nbytes or s not in t.ticks:
                raise DeviceError(f"{where}: output {o} of sample {s} missing or garbled "
                                  f"in the firmware's transcript")
            row.append(np.frombuffer(data, dtype=spec.dtype.newbyteorder("<"))
                       .astype(spec.dtype).reshape(spec.shape))
        samples.append(row)
    if not samples:
        raise DeviceError(f"{where}: the firmware reported no samples")
    stacked = [np.concatenate([row[o] for row in samples], axis=0) if len(samples) > 1
               else samples[0][o] for o in range(len(outputs))]
    return RunResult(outputs=stacked, samples=samples,
                     ticks=[t.ticks[s] for s in range(t.num_samples)],
                     tick_hz=t.tick_hz, unit=unit, stack_bytes=t.stack, log=text)
