"""Boards: the facts in boards/<name>.toml as a validated dataclass.

A board file says what the core is (for the compiler flags), where flash and RAM
are (for the linker script and the size check), which UART and timer drivers
from crt/platform/ to link, the register pokes that bring them up on a real
chip, and how it runs here (QEMU machine, host process, or only on hardware).
"""

from __future__ import annotations

import difflib
import re
import tomllib
import unicodedata
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from kiln.compiler.errors import BoardError
from kiln.compiler.fsutil import read_regular_file
from kiln.compiler.limits import RPC_MAX_STRING
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


# --- the schema -------------------------------------------------------------------------
# A board file is data from outside kiln that ends up as C tokens (kiln_board.h/.c), linker
# script numbers, Makefile text and a QEMU command line. So every value is checked for its
# type (a TOML string is never read as a number, `dsp = "no"` is not true, `true` is not an
# integer), its range (what the C, the linker and the chip accept), and every string that
# becomes code is an identifier or one of a fixed set. Unknown keys are refused: a typo
# (`clock_Hz`) must not silently become a default. Every error is one line naming the file
# and the key.

U32_MAX = 2**32 - 1
MAX_BOARD_FILE_BYTES = 64 * 1024
# Board names: file names, C strings, Make text; and sent whole in the RPC identity block,
# whose strings are cut at RPC_MAX_STRING bytes (the host compares the board name).
NAME_MAX = RPC_MAX_STRING
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")
DESCRIPTION_MAX = 200
REGION_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}\Z")   # a linker MEMORY name
MAX_REGIONS = 16
MAX_POKES = 256
# QEMU options a board may add to the command line, each followed by one value. Only
# options that describe the machine: others read or write host files (-drive, -chardev,
# -device loader), load code into QEMU (-plugin) or change how kiln talks to it.
QEMU_OPTIONS = {"-cpu", "-m", "-smp"}
QEMU_MACHINE_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}\Z")
QEMU_VALUE_RE = re.compile(r"[A-Za-z0-9_.,=+-]{1,64}\Z")       # no shell, Make or path syntax
MAX_QEMU_ARGS = 16
BAUD_RANGE = (300, 12_000_000)
UART_CLOCK_MAX = 1_000_000_000    # uart_pl011.c computes 4 * clock in 32 bits
NRF_BAUD = 115200                 # uart_nrf.c knows the BAUDRATE value of this rate only
MAX_PIN = 31                      # uart_nrf.c shifts 1u << pin: P0.00 .. P0.31
STACK_RANGE = (256, 16 * 1024 * 1024)
# The FPUs each core can have, and the cores with the DSP extension (SMLAD & co.).
CPU_FPUS: dict[str, set[str]] = {
    "cortex-m0": {"none"}, "cortex-m0plus": {"none"}, "cortex-m3": {"none"},
    "cortex-m4": {"none", "fpv4-sp-d16"}, "cortex-m7": {"none", "fpv5-sp-d16", "fpv5-d16"},
    "cortex-m33": {"none", "fpv5-sp-d16"}, "cortex-m55": {"none", "fpv5-d16"},
    "host": {"none"},
}
DSP_CPUS = {"cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"}

TOP_KEYS = ("name", "description", "cpu", "fpu", "dsp", "clock_hz", "runs_on", "stack_bytes",
            "flash", "ram", "extra_regions", "uart", "timer", "qemu", "init")
REGION_KEYS = ("origin", "size")
UART_KEYS = ("kind", "base", "baud", "clock_hz", "tx_pin", "rx_pin")
TIMER_KEYS = ("kind",)
QEMU_KEYS = ("machine", "args")
POKE_KEYS = ("reg", "set", "clear")


def _show(value: object) -> str:
    """A value for an error line: repr (control characters escaped), at most 60 chars."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Reader:
    """Typed reads of one board file's values; every error names the file and the key."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, message: str) -> BoardError:
        return BoardError(f"{self.source}: {key}: {message}" if key else f"{self.source}: {message}")

    def table(self, value: object, key: str, known: tuple[str, ...], example: str = "") -> dict:
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a table{example}, got {_show(value)}")
        unknown = [k for k in value if k not in known]
        if unknown:
            close = difflib.get_close_matches(str(unknown[0]), known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            where = f"{key}." if key else ""
            raise self.fail("", f"unknown key {_show(where + str(unknown[0]))}{hint}; "
                                f"known keys{' of ' + key if key else ''}: {', '.join(known)}")
        return value

    def int(self, value: object, key: str, lo: int, hi: int) -> int:
        # bool is a subclass of int in Python: `true` is not a number of bytes.
        if type(value) is not int:
            raise self.fail(key, f"must be an integer, got {_show(value)}")
        if not lo <= value <= hi:
            raise self.fail(key, f"{value} is out of range [{lo:,}, {hi:,}]")
        return value

    def bool(self, value: object, key: str) -> bool:
        if type(value) is not bool:
            raise self.fail(key, f"must be true or false, got {_show(value)}")
        return value

    def choice(self, value: object, key: str, choices) -> str:
        if not isinstance(value, str) or value not in choices:
            raise self.fail(key, f"{_show(value)} is not one of {', '.join(choices)}")
        return value

    def ident(self, value: object, key: str, pattern: re.Pattern, max_len: int, what: str) -> str:
        if not isinstance(value, str) or len(value) > max_len or not pattern.match(value):
            raise self.fail(key, f"must be {what} of at most {max_len} characters, got {_show(value)}")
        return value

    def text(self, value: object, key: str, max_len: int) -> str:
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {_show(value)}")
        if len(value) > max_len:
            raise self.fail(key, f"is {len(value)} characters, more than {max_len}")
        # Control characters (newlines, escapes), format characters (bidi overrides) and
        # line separators have no place in a one-line description that lands in comments.
        bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")), None)
        if bad is not None:
            raise self.fail(key, f"holds the control character U+{ord(bad):04X}; one line of plain text")
        return value

    def list(self, value: object, key: str, max_len: int) -> list:
        if not isinstance(value, list):
            raise self.fail(key, f"must be a list, got {_show(value)}")
        if len(value) > max_len:
            raise self.fail(key, f"has {len(value)} entries, more than {max_len}")
        return value


def _region(r: _Reader, table: object, key: str, named: bool = False) -> Region:
    example = f", e.g. {key} = {{ origin = 0x20000000, size = 0x10000 }}"
    if isinstance(table, dict) and ("origin" not in table or "size" not in table):
        raise r.fail(key, f"{key} needs origin and size{example}")
    t = r.table(table, key, REGION_KEYS + (("name",) if named else ()), example)
    origin = r.int(t["origin"], f"{key}.origin", 0, U32_MAX)
    size = r.int(t["size"], f"{key}.size", 1, U32_MAX + 1)
    if origin + size > U32_MAX + 1:
        raise r.fail(key, f"origin 0x{origin:X} + size 0x{size:X} runs past the 4 GB address space")
    name = "REGION" if named else key.upper()
    if named and "name" in t:
        name = r.ident(t["name"], f"{key}.name", REGION_NAME_RE, 32,
                       "a letter then letters, digits or _").upper()
    return Region(name=name, origin=origin, size=size)


def _uart(r: _Reader, table: object, core_clock_hz: int) -> Uart:
    t = r.table(table, "uart", UART_KEYS, ", e.g. uart = { kind = \"cmsdk\", base = 0x40004000 }")
    kind = r.choice(t.get("kind"), "uart.kind", UART_DRIVERS)
    if kind == "posix":
        extra = [k for k in t if k != "kind"]
        if extra:
            raise r.fail(f"uart.{extra[0]}", "a posix UART (stdio) takes only kind")
        return Uart(kind=kind)
    if "base" not in t:
        raise r.fail("uart.base", f"a {kind} UART needs its register base address")
    base = r.int(t["base"], "uart.base", 1, U32_MAX)
    if base % 4:
        raise r.fail("uart.base", f"0x{base:X} is not 4-byte aligned (the registers are 32-bit)")
    baud = r.int(t.get("baud", DEFAULT_BAUD), "uart.baud", *BAUD_RANGE)
    clock_hz = None
    if "clock_hz" in t:
        clock_hz = r.int(t["clock_hz"], "uart.clock_hz", 1, UART_CLOCK_MAX)
    uart_clock = clock_hz or core_clock_hz
    if uart_clock > UART_CLOCK_MAX:
        raise r.fail("clock_hz", f"the UART runs on the core clock here, and {uart_clock:,} Hz is "
                                 f"more than {UART_CLOCK_MAX:,}; give uart.clock_hz")
    if baud > uart_clock:       # the drivers divide the clock by the baud rate: not to 0
        raise r.fail("uart.baud", f"{baud:,} baud is faster than the UART clock ({uart_clock:,} Hz)")
    pins = {}
    for pin in ("tx_pin", "rx_pin"):
        if kind != "nrf" and pin in t:
            raise r.fail(f"uart.{pin}", "only an nrf UART is routed to pins by kiln")
        if kind == "nrf":
            if pin not in t:
                raise r.fail(f"uart.{pin}", "an nrf UART needs tx_pin and rx_pin")
            pins[pin] = r.int(t[pin], f"uart.{pin}", 0, MAX_PIN)
    if kind == "nrf":
        if pins["tx_pin"] == pins["rx_pin"]:
            raise r.fail("uart.rx_pin", f"is the same pin as tx_pin ({pins['tx_pin']})")
        if baud != NRF_BAUD:
            raise r.fail("uart.baud", f"an nrf UART runs at {NRF_BAUD} baud only (uart_nrf.c)")
    return Uart(kind=kind, base=base, baud=baud, clock_hz=clock_hz, **pins)


def _qemu(r: _Reader, table: object) -> Qemu:
    t = r.table(table, "qemu", QEMU_KEYS, ", e.g. qemu = { machine = \"mps2-an386\" }")
    if "machine" not in t:
        raise r.fail("qemu.machine", "missing: the QEMU machine name (qemu-system-arm -M help)")
    machine = r.ident(t["machine"], "qemu.machine", QEMU_MACHINE_RE, 64,
                      "a QEMU machine name (lower-case letters, digits, '.', '_', '-')")
    args = r.list(t.get("args", []), "qemu.args", MAX_QEMU_ARGS)
    if len(args) % 2:
        raise r.fail("qemu.args", "must be option, value pairs, e.g. [\"-m\", \"16M\"]")
    for i in range(0, len(args), 2):
        r.choice(args[i], f"qemu.args[{i}]", sorted(QEMU_OPTIONS))
        r.ident(args[i + 1], f"qemu.args[{i + 1}]", QEMU_VALUE_RE, 64,
                "a value of letters, digits and . , = + _ -")
    return Qemu(machine=machine, args=tuple(args))


def _poke(r: _Reader, table: object, i: int) -> Poke:
    key = f"init[{i}]"
    if isinstance(table, dict) and "reg" not in table:
        raise r.fail(key, f"{key} needs reg (and set and/or clear)")
    t = r.table(table, key, POKE_KEYS, ", e.g. { reg = 0x40021058, set = 0x1 }")
    reg = r.int(t["reg"], f"{key}.reg", 0, U32_MAX)
    if reg % 4:
        raise r.fail(f"{key}.reg", f"0x{reg:X} is not 4-byte aligned (a 32-bit register)")
    return Poke(reg=reg, set=r.int(t.get("set", 0), f"{key}.set", 0, U32_MAX),
                clear=r.int(t.get("clear", 0), f"{key}.clear", 0, U32_MAX))


def parse_board(data: dict, source: str = "<board>") -> Board:
    """A Board from the parsed TOML of one board file; BoardError names the bad key."""
    r = _Reader(source)
    data = r.table(data, "", TOP_KEYS)

    def need(key: str) -> object:
        if key not in data:
            raise BoardError(f"{source}: missing key '{key}'")
        return data[key]

    name = r.ident(need("name"), "name", NAME_RE, NAME_MAX,
                   "lower-case letters, digits, '_' and '-' (starting with a letter or digit)")
    description = r.text(data.get("description", ""), "description", DESCRIPTION_MAX)
    cpu = need("cpu")
    if not isinstance(cpu, str) or cpu not in CPU_FLAGS:
        raise r.fail("cpu", f"cpu {_show(cpu)} is not one of {', '.join(CPU_FLAGS)}")
    fpu = data.get("fpu", "none")
    if not isinstance(fpu, str) or fpu not in FPUS:
        raise r.fail("fpu", f"fpu {_show(fpu)} is not one of {', '.join(sorted(FPUS))}")
    if fpu not in CPU_FPUS[cpu]:
        raise r.fail("fpu", f"a {cpu} has no {fpu} FPU (it can have: {', '.join(sorted(CPU_FPUS[cpu]))})")
    dsp = r.bool(data.get("dsp", False), "dsp")
    if dsp and cpu not in DSP_CPUS:
        raise r.fail("dsp", f"a {cpu} has no DSP extension (only {', '.join(sorted(DSP_CPUS))})")
    runs_on = data.get("runs_on", "board")
    if not isinstance(runs_on, str) or runs_on not in RUNS_ON:
        raise r.fail("runs_on", f"runs_on {_show(runs_on)} is not one of {', '.join(sorted(RUNS_ON))}")
    clock_hz = r.int(need("clock_hz"), "clock_hz", 1, U32_MAX)

    timer_t = r.table(need("timer"), "timer", TIMER_KEYS, ", e.g. timer = { kind = \"systick\" }")
    timer = timer_t.get("kind")
    if not isinstance(timer, str) or timer not in TIMER_DRIVERS:
        raise r.fail("timer.kind", f"timer.kind must be one of {', '.join(TIMER_DRIVERS)}, "
                                   f"got {_show(timer)}")
    uart_t = need("uart")
    uart_kind = uart_t.get("kind") if isinstance(uart_t, dict) else None
    host = cpu == "host"
    if host != (uart_kind == "posix") or host != (timer == "posix") or host != (runs_on == "host"):
        raise r.fail("cpu", "cpu 'host' goes with uart/timer kind 'posix' and runs_on 'host', "
                            "and only with them")
    uart = _uart(r, uart_t, clock_hz)

    if host:
        extra = [k for k in ("flash", "ram", "extra_regions", "qemu", "init") if k in data]
        if extra:
            raise r.fail(extra[0], "the host board runs as a process here: it has no "
                                   "flash, RAM map, QEMU machine or start-up pokes")
    qemu = _qemu(r, data["qemu"]) if "qemu" in data else None
    if runs_on == "qemu" and qemu is None:
        raise r.fail("qemu", "runs_on = 'qemu' needs a qemu = { machine = ... } table")
    if runs_on != "qemu" and qemu is not None:
        raise r.fail("qemu", f"a qemu table is for runs_on = 'qemu' (this board runs on {runs_on})")

    flash = ram = None
    if not host:
        flash, ram = _region(r, need("flash"), "flash"), _region(r, need("ram"), "ram")
        if flash.origin < ram.end and ram.origin < flash.end:
            raise r.fail("ram", f"RAM [0x{ram.origin:X}, 0x{ram.end:X}) overlaps flash "
                                f"[0x{flash.origin:X}, 0x{flash.end:X})")
    extra_regions = tuple(_region(r, t, f"extra_regions[{i}]", named=True) for i, t in
                          enumerate(r.list(data.get("extra_regions", []), "extra_regions", MAX_REGIONS)))
    pokes = tuple(_poke(r, t, i) for i, t in enumerate(r.list(data.get("init", []), "init", MAX_POKES)))

    stack_bytes = r.int(data.get("stack_bytes", DEFAULT_STACK_BYTES), "stack_bytes", *STACK_RANGE)
    if stack_bytes % 8:
        raise r.fail("stack_bytes", f"{stack_bytes} is not a multiple of 8 (the AAPCS stack alignment)")
    # A stack larger than the RAM is a fit problem, named with the arena by check_fits.

    return Board(name=name, description=description, cpu=cpu, fpu=fpu, dsp=dsp,
                 clock_hz=clock_hz, runs_on=runs_on, uart=uart, timer=timer, flash=flash, ram=ram,
                 extra_regions=extra_regions, qemu=qemu, init=pokes, stack_bytes=stack_bytes)


def load_board_file(path: str | Path) -> Board:
    """The board in the TOML file `path`, validated (parse_board); the file must be a
    regular file of at most MAX_BOARD_FILE_BYTES, named after the board."""
    path = Path(path)
    raw = read_regular_file(path, "board file", MAX_BOARD_FILE_BYTES)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise BoardError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise BoardError(f"{path}: not valid TOML: {e}") from None
    board = parse_board(data, source=str(path))
    if board.name != path.stem:
        raise BoardError(f"{path}: name '{board.name}' must match the file name {_show(path.stem)}")
    return replace(board, source=path)


def _board_data(b: Board) -> dict:
    """A Board as the TOML data it would be read from (for check_board)."""
    u = b.uart
    uart = {"kind": u.kind} if u.kind == "posix" else {
        k: v for k, v in (("kind", u.kind), ("base", u.base), ("baud", u.baud),
                          ("clock_hz", u.clock_hz), ("tx_pin", u.tx_pin), ("rx_pin", u.rx_pin))
        if v is not None}
    data = {"name": b.name, "description": b.description, "cpu": b.cpu, "fpu": b.fpu,
            "dsp": b.dsp, "clock_hz": b.clock_hz, "runs_on": b.runs_on,
            "stack_bytes": b.stack_bytes, "uart": uart, "timer": {"kind": b.timer}}
    for key in ("flash", "ram"):
        region = getattr(b, key)
        if region is not None:
            data[key] = {"origin": region.origin, "size": region.size}
    if b.extra_regions:
        data["extra_regions"] = [{"name": r.name, "origin": r.origin, "size": r.size}
                                 for r in b.extra_regions]
    if b.qemu is not None:
        data["qemu"] = {"machine": b.qemu.machine, "args": list(b.qemu.args)}
    if b.init:
        data["init"] = [{"reg": p.reg, "set": p.set, "clear": p.clear} for p in b.init]
    return data


def check_board(board: Board) -> None:
    """BoardError unless a Board built in Python (dataclasses.replace of a known board, or
    from the caller's own data) passes the same schema as a board file."""
    try:
        data = _board_data(board)
    except (AttributeError, TypeError) as e:
        raise BoardError(f"board {_show(getattr(board, 'name', board))} is not a whole Board: {e}") from None
    parse_board(data, source=f"board {_show(board.name)}")


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
        check_board(board)
        return board
    if not isinstance(board, str):      # e.g. a "board" of a damaged kiln.json
        raise BoardError(f"a board is named by a string such as 'mps2-an386', not {_show(board)}")
    boards = _all_boards()
    if board not in boards:
        close = difflib.get_close_matches(board, boards, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise BoardError(f"unknown board {_show(board)}{hint}; `kiln boards` lists them")
    return boards[board]
