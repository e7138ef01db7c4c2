"""Boards: the facts in boards/<name>.toml as a validated dataclass.

A board file says what the core is (for the compiler flags), where flash and RAM
are (for the linker script and the size check), which UART and timer drivers
from crt/platform/ to link, the register pokes that bring them up on a real
chip, and how it runs here (QEMU machine, host process, or only on hardware).
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from kiln.compiler.errors import BoardError
from kiln.compiler.paths import boards_dir

# gcc flags per core. The M55's FPU and MVE come with -mcpu; the others name
# their FPU explicitly so a board file's `fpu` is the whole story.
CPU_FLAGS: dict[str, list[str]] = {
    "cortex-m0": ["-mcpu=cortex-m0", "-mthumb"],
    "cortex-m0plus": ["-mcpu=cortex-m0plus", "-mthumb"],
    "cortex-m3": ["-mcpu=cortex-m3", "-mthumb"],
    "cortex-m4": ["-mcpu=cortex-m4", "-mthumb"],
    "cortex-m7": ["-mcpu=cortex-m7", "-mthumb"],
    "cortex-m33": ["-mcpu=cortex-m33", "-mthumb"],
    "cortex-m55": ["-mcpu=cortex-m55", "-mthumb"],
    "host": [],
}
FPUS = {"none", "fpv4-sp-d16", "fpv5-sp-d16", "fpv5-d16"}

# UART kind -> (driver file in crt/platform/, extra #defines it needs).
UART_DRIVERS: dict[str, tuple[str, dict[str, str]]] = {
    "cmsdk": ("uart_cmsdk.c", {}),
    "pl011": ("uart_pl011.c", {}),
    "stm32-usart": ("uart_stm32_usart.c", {}),
    "stm32-usart-v2": ("uart_stm32_usart_v2.c", {}),
    "stm32-lpuart": ("uart_stm32_usart_v2.c", {"KILN_UART_BRR_SCALE": "256u"}),
    "nrf": ("uart_nrf.c", {}),
    "posix": ("posix.c", {}),
}
TIMER_DRIVERS = {"systick": "timer_systick.c", "dwt": "timer_dwt.c", "posix": "posix.c"}
RUNS_ON = {"qemu", "host", "board"}

DEFAULT_STACK_BYTES = 4096
DEFAULT_BAUD = 115200


@dataclass(frozen=True)
class Region:
    name: str
    origin: int
    size: int

    @property
    def end(self) -> int:
        return self.origin + self.size

    def contains(self, address: int) -> bool:
        return self.origin <= address < self.end


@dataclass(frozen=True)
class Poke:
    """A read-modify-write of one register at start-up: clock gates, pin mux."""

    reg: int
    set: int = 0
    clear: int = 0


@dataclass(frozen=True)
class Uart:
    kind: str
    base: int = 0
    baud: int = DEFAULT_BAUD
    clock_hz: int | None = None      # peripheral clock, when it is not the core clock
    tx_pin: int | None = None        # nRF: pins the UART is routed to
    rx_pin: int | None = None


@dataclass(frozen=True)
class Qemu:
    machine: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    cpu: str
    fpu: str
    dsp: bool
    clock_hz: int
    runs_on: str                      # "qemu" | "host" | "board"
    uart: Uart
    timer: str
    flash: Region | None = None       # None on the host board
    ram: Region | None = None
    extra_regions: tuple[Region, ...] = ()
    qemu: Qemu | None = None
    init: tuple[Poke, ...] = ()
    stack_bytes: int = DEFAULT_STACK_BYTES
    source: Path | None = field(default=None, compare=False)

    @property
    def is_host(self) -> bool:
        return self.cpu == "host"

    @property
    def cpu_flags(self) -> list[str]:
        flags = list(CPU_FLAGS[self.cpu])
        if self.is_host:
            return flags
        if self.fpu == "none":
            flags.append("-mfloat-abi=soft")
        else:
            if self.cpu != "cortex-m55":
                flags.append(f"-mfpu={self.fpu}")
            flags.append("-mfloat-abi=hard")
        return flags

    @property
    def core(self) -> str:
        """Short label for listings: M4F, M55, host."""
        if self.is_host:
            return "host"
        core = self.cpu.replace("cortex-", "").upper().replace("PLUS", "+")
        return core + ("F" if self.fpu != "none" and self.cpu != "cortex-m55" else "")

    @property
    def uart_driver(self) -> str:
        return UART_DRIVERS[self.uart.kind][0]

    @property
    def timer_driver(self) -> str:
        return TIMER_DRIVERS[self.timer]

    @property
    def tick_unit(self) -> str:
        """What kiln_platform_ticks() counts on this board, as the run report names it."""
        if self.runs_on == "qemu":
            return "instructions (QEMU -icount)"
        if self.is_host:
            return "ns"
        return "cycles"


def _hex_or_int(value: object, what: str, source: str) -> int:
    if not isinstance(value, int) or value < 0:
        raise BoardError(f"{source}: {what} must be a non-negative integer, got {value!r}")
    return value


def _region(table: object, name: str, source: str) -> Region:
    if not isinstance(table, dict) or "origin" not in table or "size" not in table:
        raise BoardError(f"{source}: {name} needs origin and size, e.g. "
                         f"{name} = {{ origin = 0x20000000, size = 0x10000 }}")
    return Region(name=str(table.get("name", name)).upper(),
                  origin=_hex_or_int(table["origin"], f"{name}.origin", source),
                  size=_hex_or_int(table["size"], f"{name}.size", source))


def parse_board(data: dict, source: str = "<board>") -> Board:
    """A Board from the parsed TOML of one board file; BoardError names the bad key."""
    def need(key: str) -> object:
        if key not in data:
            raise BoardError(f"{source}: missing key '{key}'")
        return data[key]

    cpu = need("cpu")
    if cpu not in CPU_FLAGS:
        raise BoardError(f"{source}: cpu '{cpu}' is not one of {', '.join(CPU_FLAGS)}")
    fpu = data.get("fpu", "none")
    if fpu not in FPUS:
        raise BoardError(f"{source}: fpu '{fpu}' is not one of {', '.join(sorted(FPUS))}")
    runs_on = data.get("runs_on", "board")
    if runs_on not in RUNS_ON:
        raise BoardError(f"{source}: runs_on '{runs_on}' is not one of {', '.join(sorted(RUNS_ON))}")

    uart_t = need("uart")
    if not isinstance(uart_t, dict) or uart_t.get("kind") not in UART_DRIVERS:
        raise BoardError(f"{source}: uart.kind must be one of {', '.join(UART_DRIVERS)}")
    uart = Uart(kind=uart_t["kind"], base=int(uart_t.get("base", 0)),
                baud=int(uart_t.get("baud", DEFAULT_BAUD)), clock_hz=uart_t.get("clock_hz"),
                tx_pin=uart_t.get("tx_pin"), rx_pin=uart_t.get("rx_pin"))
    if uart.kind == "nrf" and (uart.tx_pin is None or uart.rx_pin is None):
        raise BoardError(f"{source}: an nrf UART needs tx_pin and rx_pin")

    timer_t = need("timer")
    timer = timer_t.get("kind") if isinstance(timer_t, dict) else None
    if timer not in TIMER_DRIVERS:
        raise BoardError(f"{source}: timer.kind must be one of {', '.join(TIMER_DRIVERS)}")

    host = cpu == "host"
    if host != (uart.kind == "posix") or host != (timer == "posix") or host != (runs_on == "host"):
        raise BoardError(f"{source}: cpu 'host' goes with uart/timer kind 'posix' and "
                         f"runs_on 'host', and only with them")

    qemu = None
    if "qemu" in data:
        q = data["qemu"]
        qemu = Qemu(machine=str(q["machine"]), args=tuple(str(a) for a in q.get("args", ())))
    if runs_on == "qemu" and qemu is None:
        raise BoardError(f"{source}: runs_on = 'qemu' needs a qemu = {{ machine = ... }} table")

    pokes = []
    for i, p in enumerate(data.get("init", ())):
        if "reg" not in p:
            raise BoardError(f"{source}: init[{i}] needs reg (and set and/or clear)")
        pokes.append(Poke(reg=_hex_or_int(p["reg"], f"init[{i}].reg", source),
                          set=_hex_or_int(p.get("set", 0), f"init[{i}].set", source),
                          clear=_hex_or_int(p.get("clear", 0), f"init[{i}].clear", source)))

    return Board(
        name=str(need("name")),
        description=str(data.get("description", "")),
        cpu=cpu, fpu=fpu, dsp=bool(data.get("dsp", False)),
        clock_hz=_hex_or_int(need("clock_hz"), "clock_hz", source),
        runs_on=runs_on, uart=uart, timer=timer,
        flash=None if host else _region(need("flash"), "flash", source),
        ram=None if host else _region(need("ram"), "ram", source),
        extra_regions=tuple(_region(r, "region", source) for r in data.get("extra_regions", ())),
        qemu=qemu, init=tuple(pokes),
        stack_bytes=_hex_or_int(data.get("stack_bytes", DEFAULT_STACK_BYTES), "stack_bytes", source),
    )


def load_board_file(path: str | Path) -> Board:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise BoardError(f"{path}: not valid TOML: {e}") from None
    board = parse_board(data, source=str(path))
    if board.name != path.stem:
        raise BoardError(f"{path}: name '{board.name}' must match the file name '{path.stem}'")
    return replace(board, source=path)


@cache
def _all_boards() -> dict[str, Board]:
    return {p.stem: load_board_file(p) for p in sorted(boards_dir().glob("*.toml"))}


def board_names() -> list[str]:
    return list(_all_boards())


def list_boards() -> list[Board]:
    """Every board kiln knows (boards/*.toml, and the host), in `kiln boards` order."""
    return list(_all_boards().values())


def get_board(board: str | Board) -> Board:
    """The named board (or a Board passed through); BoardError with suggestions if unknown."""
    if isinstance(board, Board):
        return board
    boards = _all_boards()
    if board not in boards:
        close = difflib.get_close_matches(board, boards, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise BoardError(f"unknown board '{board}'{hint}; `kiln boards` lists them")
    return boards[board]
