"""Boards: the facts in boards/<name>.toml as a validated dataclass.

A board file says what the core is (for the compiler flags), where flash and RAM
are (for the linker script and the size check), which UART and timer drivers
from crt/platform/ to link, the register pokes that bring them up on a real
chip, and how it runs here (QEMU machine, host process, or only on hardware).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import string
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
    """One memory of the board. `kind` says what kiln may place there: "flash" (read-only
    at run time: weights, sample inputs; the board's `flash` also holds the vector table
    and the code), "ram" (read-write: the arena, model state; the board's `ram` also holds
    .data, .bss and the stack), "" (an extra region listed for reference: unused).
    `speed` ranks the memories, 0 fastest (TCM); `loaded` says whether the region holds
    the ELF image's bytes when the firmware starts (always for flash; for RAM when the
    loader writes it: QEMU's -kernel loads every segment, a real board's RAM is undefined
    at reset), so only a loaded region takes constant data; `exec`: code may run there
    (the linker's x attribute; kiln places code only in the board's `flash`)."""
    name: str
    origin: int
    size: int
    kind: str = ""
    speed: int = 1
    loaded: bool = False
    exec: bool = False

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
class Flashing:
    """How a real board is flashed: a shell command with {elf} {hex} {bin} {port}
    placeholders, or pyOCD's name for the target chip (`pyocd list --targets`)."""

    command: str | None = None
    pyocd_target: str | None = None


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
    flashing: Flashing | None = None
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
    def memories(self) -> tuple[Region, ...]:
        """The regions kiln places into: `flash`, `ram`, then the extra regions with a kind
        (empty on the host)."""
        if self.flash is None or self.ram is None:
            return ()
        return (self.flash, self.ram, *(r for r in self.extra_regions if r.kind))

    @property
    def multi_region(self) -> bool:
        """Whether kiln spreads a model over several regions (kiln.project_gen.regions):
        an extra region with a kind, or a `ram` the loader fills (it may take weights)."""
        return len(self.memories) > 2 or (self.ram is not None and self.ram.loaded)

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
            "flash", "ram", "extra_regions", "uart", "timer", "qemu", "init", "flashing")
REGION_KEYS = ("origin", "size")
# The optional keys of the `flash` and `ram` tables and of an extra region (kind, speed
# rank, whether the loader fills it, whether code may run there).
FLASH_KEYS = ("name",) + REGION_KEYS + ("speed",)
RAM_KEYS = ("name",) + REGION_KEYS + ("speed", "loaded")
EXTRA_REGION_KEYS = ("name",) + REGION_KEYS + ("kind", "speed", "loaded", "exec")
REGION_KINDS = ("flash", "ram")
SPEED_RANGE = (0, 9)
DEFAULT_SPEED = 1
UART_KEYS = ("kind", "base", "baud", "clock_hz", "tx_pin", "rx_pin")
TIMER_KEYS = ("kind",)
QEMU_KEYS = ("machine", "args")
POKE_KEYS = ("reg", "set", "clear")
FLASHING_KEYS = ("command", "pyocd_target")
# A flash command is a shell line the user wrote, run only when they ask to flash (kiln
# flash, --flash); what kiln puts in it is shell-quoted (kiln.project_gen.flash).
FLASH_PLACEHOLDERS = ("elf", "hex", "bin", "port")
FLASH_COMMAND_MAX = 1000
PYOCD_TARGET_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}\Z", re.IGNORECASE)


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
    """The `flash` or `ram` table, or (named) an entry of `extra_regions`."""
    example = f", e.g. {key} = {{ origin = 0x20000000, size = 0x10000 }}"
    if isinstance(table, dict) and ("origin" not in table or "size" not in table):
        raise r.fail(key, f"{key} needs origin and size{example}")
    known = EXTRA_REGION_KEYS if named else FLASH_KEYS if key == "flash" else RAM_KEYS
    t = r.table(table, key, known, example)
    origin = r.int(t["origin"], f"{key}.origin", 0, U32_MAX)
    size = r.int(t["size"], f"{key}.size", 1, U32_MAX + 1)
    if origin + size > U32_MAX + 1:
        raise r.fail(key, f"origin 0x{origin:X} + size 0x{size:X} runs past the 4 GB address space")
    speed = r.int(t.get("speed", DEFAULT_SPEED), f"{key}.speed", *SPEED_RANGE)
    if not named:      # the board's own flash and RAM: what every firmware has had
        kind = key
        name = key.upper()
        if "name" in t:
            name = r.ident(t["name"], f"{key}.name", REGION_NAME_RE, 32,
                           "a letter then letters, digits or _").upper()
        return Region(name=name, origin=origin, size=size, kind=kind, speed=speed,
                      loaded=kind == "flash" or r.bool(t.get("loaded", False), f"{key}.loaded"),
                      exec=True)
    name = "REGION"
    if "name" in t:
        name = r.ident(t["name"], f"{key}.name", REGION_NAME_RE, 32,
                       "a letter then letters, digits or _").upper()
    kind = ""
    if "kind" in t:
        kind = r.choice(t["kind"], f"{key}.kind", REGION_KINDS)
    elif any(k in t for k in ("speed", "loaded", "exec")):
        raise r.fail(f"{key}.kind", "a region with speed, loaded or exec needs kind = "
                                    "\"flash\" or \"ram\" (without kind it is only listed)")
    loaded = kind == "flash"
    if "loaded" in t:
        loaded = r.bool(t["loaded"], f"{key}.loaded")
        if kind == "flash" and not loaded:
            raise r.fail(f"{key}.loaded", "a flash region always holds the image's bytes")
    return Region(name=name, origin=origin, size=size, kind=kind, speed=speed, loaded=loaded,
                  exec=r.bool(t.get("exec", False), f"{key}.exec"))


def _check_regions(r: _Reader, regions: list[tuple[str, Region]]) -> None:
    """Region names are unique (they are the linker's MEMORY names) and no two regions
    share an address."""
    seen: dict[str, str] = {}
    for key, region in regions:
        if region.name in seen:
            raise r.fail(f"{key}.name", f"region name {region.name} is also {seen[region.name]}'s "
                                        f"(names are upper-cased linker MEMORY names)")
        seen[region.name] = key
    for i, (key_a, a) in enumerate(regions):
        for key_b, b in regions[i + 1:]:
            if a.origin < b.end and b.origin < a.end:
                raise r.fail(key_b, f"{b.name} [0x{b.origin:X}, 0x{b.end:X}) overlaps "
                                    f"{key_a} {a.name} [0x{a.origin:X}, 0x{a.end:X})")


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


def check_flash_command(command: object, where: str = "flash command") -> str:
    """`command` if it is shell text whose only {} fields are {elf} {hex} {bin}
    {port} (no attribute, index, conversion or format spec: str.format would evaluate
    them); BoardError naming `where` otherwise. `{{`/`}}` stand for braces."""
    if not isinstance(command, str) or not command.strip():
        raise BoardError(f"{where}: must be a non-empty string, got {_show(command)}")
    if len(command) > FLASH_COMMAND_MAX:
        raise BoardError(f"{where}: is {len(command)} characters, more than {FLASH_COMMAND_MAX}")
    # Tabs and newlines are shell syntax; other control and bidi characters only hide
    # what the command does from a reader of the file.
    bad = next((c for c in command if c not in "\t\n" and
                unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")), None)
    if bad is not None:
        raise BoardError(f"{where}: holds the control character U+{ord(bad):04X}")
    try:
        fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(command)
                  if f is not None]
    except ValueError as e:
        raise BoardError(f"{where}: {e} (write {{{{ and }}}} for literal braces)") from None
    for f, spec, conv in fields:
        if f not in FLASH_PLACEHOLDERS or spec or conv:
            raise BoardError(f"{where}: {{{f}{'!' + conv if conv else ''}{':' + spec if spec else ''}}} "
                             f"is not a placeholder; the placeholders are "
                             f"{', '.join('{' + p + '}' for p in FLASH_PLACEHOLDERS)}")
    return command


def _flashing(r: _Reader, table: object) -> Flashing:
    t = r.table(table, "flashing", FLASHING_KEYS,
                ", e.g. flashing = { command = \"st-flash write {bin} 0x08000000\" }")
    if not t:
        raise r.fail("flashing", "needs command or pyocd_target")
    if "command" in t and "pyocd_target" in t:
        raise r.fail("flashing", "give command or pyocd_target, not both")
    if "command" in t:
        try:
            return Flashing(command=check_flash_command(t["command"], "flashing.command"))
        except BoardError as e:
            raise r.fail("", str(e)) from None
    return Flashing(pyocd_target=r.ident(t["pyocd_target"], "flashing.pyocd_target",
                                         PYOCD_TARGET_RE, 64, "a pyOCD target name"))


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
    flashing = _flashing(r, data["flashing"]) if "flashing" in data else None
    if flashing is not None and runs_on != "board":
        raise r.fail("flashing", f"is for runs_on = 'board' (this board runs on {runs_on}: "
                                 f"kiln launches it, nothing is flashed)")
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
    if not host:
        _check_regions(r, [("flash", flash), ("ram", ram)] +
                       [(f"extra_regions[{i}]", x) for i, x in enumerate(extra_regions)])
    pokes = tuple(_poke(r, t, i) for i, t in enumerate(r.list(data.get("init", []), "init", MAX_POKES)))

    stack_bytes = r.int(data.get("stack_bytes", DEFAULT_STACK_BYTES), "stack_bytes", *STACK_RANGE)
    if stack_bytes % 8:
        raise r.fail("stack_bytes", f"{stack_bytes} is not a multiple of 8 (the AAPCS stack alignment)")
    # A stack larger than the RAM is a fit problem, named with the arena by check_fits.

    return Board(name=name, description=description, cpu=cpu, fpu=fpu, dsp=dsp,
                 clock_hz=clock_hz, runs_on=runs_on, uart=uart, timer=timer, flash=flash, ram=ram,
                 extra_regions=extra_regions, qemu=qemu, init=pokes, stack_bytes=stack_bytes,
                 flashing=flashing)


def load_board_file(path: str | Path, named_after_file: bool = True) -> Board:
    """The board in the TOML file `path`, validated (parse_board); the file must be a
    regular file of at most MAX_BOARD_FILE_BYTES. With named_after_file (the files kiln
    finds by name: boards/ and KILN_BOARD_PATH), its name must be the file's name; a
    file the user names by its path may be called anything (the board's name is the
    `name` inside it)."""
    path = Path(path)
    raw = read_regular_file(path, "board file", MAX_BOARD_FILE_BYTES)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise BoardError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise BoardError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise BoardError(f"{path}: not valid TOML: nested too deep") from None
    board = parse_board(data, source=str(path))
    if named_after_file and board.name != path.stem:
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
            if region.name != key.upper():
                data[key] = {"name": region.name, **data[key]}
            if region.speed != DEFAULT_SPEED:
                data[key]["speed"] = region.speed
            if key == "ram" and region.loaded:
                data[key]["loaded"] = True
    if b.extra_regions:
        data["extra_regions"] = [_extra_region_data(r) for r in b.extra_regions]
    if b.qemu is not None:
        data["qemu"] = {"machine": b.qemu.machine, "args": list(b.qemu.args)}
    if b.init:
        data["init"] = [{"reg": p.reg, "set": p.set, "clear": p.clear} for p in b.init]
    if b.flashing is not None:
        data["flashing"] = {k: v for k, v in (("command", b.flashing.command),
                                              ("pyocd_target", b.flashing.pyocd_target))
                            if v is not None}
    return data


def _extra_region_data(region: Region) -> dict:
    """An extra region as its TOML table: the keys that differ from their defaults."""
    data: dict = {"name": region.name, "origin": region.origin, "size": region.size}
    if region.kind:
        data["kind"] = region.kind
        data["speed"] = region.speed
        if region.kind == "ram" and region.loaded:
            data["loaded"] = True
        if region.exec:
            data["exec"] = True
    return data


# Keys whose integers are addresses, sizes or register bits: written in hex.
_HEX_KEYS = {"origin", "size", "base", "reg", "set", "clear"}


def _toml_value(value: object, key: str = "") -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"0x{value:X}" if key in _HEX_KEYS else f"{value:_}" if value >= 10_000 else str(value)
    if isinstance(value, str):
        # JSON's string escapes are a subset of TOML's basic-string escapes.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v, k)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def board_toml(board: Board, header: str = "") -> str:
    """The TOML text of a (validated) Board: load_board_file reads it back as an equal
    Board. `header`: comment lines put first (each line gets its '# ')."""
    data = _board_data(get_board(board))
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for key, value in data.items():
        if key == "init" or key == "extra_regions":
            lines.append(f"{key} = [")
            lines += [f"    {_toml_value(v)}," for v in value]
            lines.append("]")
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def board_digest(board: Board) -> str:
    """A digest of a board's facts (not of its file's comments or layout): what a cached
    build for it depends on."""
    text = json.dumps(_board_data(board), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def check_board(board: Board) -> Board:
    """BoardError unless a Board built in Python (dataclasses.replace of a known board, or
    from the caller's own data) passes the same schema as a board file; returns it as
    that file would read (e.g. a `Region("RAM", origin, size)` gets the kind, speed and
    flags the `ram` table implies), equal to `board` when it was built whole."""
    try:
        data = _board_data(board)
    except (AttributeError, TypeError) as e:
        raise BoardError(f"board {_show(getattr(board, 'name', board))} is not a whole Board: {e}") from None
    return replace(parse_board(data, source=f"board {_show(board.name)}"), source=board.source)


@cache
def _all_boards() -> dict[str, Board]:
    return {p.stem: load_board_file(p) for p in sorted(boards_dir().glob("*.toml"))}


BOARD_PATH_VARIABLE = "KILN_BOARD_PATH"


def board_path(environ: dict[str, str] | None = None) -> list[Path]:
    """The folders of KILN_BOARD_PATH (os.pathsep-separated), searched for <name>.toml
    before kiln's own boards/. Relative entries are ignored (as XDG does): a board must
    not change with the folder kiln happens to run in."""
    value = (os.environ if environ is None else environ).get(BOARD_PATH_VARIABLE, "")
    return [Path(p) for p in value.split(os.pathsep) if p and os.path.isabs(p)]


def is_board_path(text: str) -> bool:
    """Whether a --board value names a board file rather than a board: it holds a '/'
    (or the OS's separator) or ends in .toml. A name is only ever looked up."""
    return "/" in text or os.sep in text or text.endswith(".toml")


def _user_boards() -> dict[str, Board]:
    """The boards in the KILN_BOARD_PATH folders; a name in an earlier folder wins."""
    found: dict[str, Board] = {}
    for folder in board_path():
        try:
            files = sorted(folder.glob("*.toml"))
        except OSError:
            continue
        for p in files:
            if p.stem not in found and NAME_RE.match(p.stem):
                found[p.stem] = load_board_file(p)
    return found


def board_names() -> list[str]:
    return [b.name for b in list_boards()]


def list_boards() -> list[Board]:
    """Every board kiln knows: those in the KILN_BOARD_PATH folders, then kiln's own
    (boards/*.toml, and the host) that no folder of KILN_BOARD_PATH overrides."""
    user = _user_boards()
    return list(user.values()) + [b for n, b in _all_boards().items() if n not in user]


def is_kiln_board(board: Board) -> bool:
    """Whether `board` is one of kiln's own boards, unchanged (so its name is all a
    project needs to record)."""
    return _all_boards().get(board.name) == board


def get_board(board: str | Path | Board) -> Board:
    """The board `board` names: a Board (checked, passed through); a path to a board file
    (a value holding '/' or ending in .toml: read, whatever its file name); or a name,
    looked up in the KILN_BOARD_PATH folders, then among kiln's boards. BoardError with
    suggestions if unknown."""
    if isinstance(board, Board):
        return check_board(board)
    if isinstance(board, Path):
        return load_board_file(board, named_after_file=False)
    if not isinstance(board, str):      # e.g. a "board" of a damaged kiln.json
        raise BoardError(f"a board is named by a string such as 'mps2-an386', not {_show(board)}")
    if is_board_path(board):
        return load_board_file(board, named_after_file=False)
    if NAME_RE.match(board) and len(board) <= NAME_MAX:   # never joined into a path otherwise
        for folder in board_path():
            candidate = folder / f"{board}.toml"
            if os.path.lexists(candidate):
                return load_board_file(candidate)
    boards = _all_boards()
    if board not in boards:
        names = [*_user_boards(), *boards]
        close = difflib.get_close_matches(board, names, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        where = f" or a folder of {BOARD_PATH_VARIABLE}" if board_path() else ""
        raise BoardError(f"unknown board {_show(board)}{hint}; `kiln boards` lists them; a "
                         f"board file of your own is named by its path (./{board}.toml){where}")
    return boards[board]


# What each key of a board file means: the comments of `kiln boards --new`.
FIELD_NOTES = {
    "name": "lower-case letters, digits, _ and -; in KILN_BOARD_PATH the file is NAME.toml",
    "description": "one line, shown by `kiln boards`",
    "cpu": "cortex-m0|m0plus|m3|m4|m7|m33|m55 (compiler flags, kernel variants)",
    "fpu": "none|fpv4-sp-d16|fpv5-sp-d16|fpv5-d16 (one the core can have)",
    "dsp": "the DSP extension (SMLAD...): M4/M7/M33/M55 only",
    "clock_hz": "what the tick counter counts: the core clock for SysTick and DWT",
    "runs_on": "qemu (kiln launches QEMU), board (flashed), host",
    "stack_bytes": "the stack reserve at the top of RAM (256 B..16 MB, multiple of 8)",
    "uart": "the serial port kiln prints to / talks RPC over; kinds: "
            + ", ".join(k for k in UART_DRIVERS if k != "posix"),
    "timer": "systick|dwt: what kiln_platform_ticks() reads",
    "flash": "where code, weights and inputs go (linker FLASH); speed: rank, 0 fastest",
    "ram": "where the arena, data and stack go (linker RAM); speed; loaded: the loader fills it",
    "extra_regions": "more memories, by name; with kind = \"flash\"|\"ram\" kiln places weights, "
                     "arena or state there (speed 0 fastest; loaded: the loader fills it)",
    "qemu": "runs_on = \"qemu\": the machine (qemu-system-arm -M help); args: -cpu/-m/-smp pairs",
    "init": "start-up register read-modify-writes: clock gates, pin mux",
    "flashing": "runs_on = \"board\": how `kiln flash` flashes it",
}


def new_board_toml(name: str, like: str | Board) -> str:
    """A commented board file for a new board `name`, starting from the facts of `like`
    (`kiln boards --new NAME --like B`); it loads as a valid board as written."""
    r = _Reader("--new")
    r.ident(name, "name", NAME_RE, NAME_MAX,
            "lower-case letters, digits, '_' and '-' (starting with a letter or digit)")
    base = get_board(like)
    if base.is_host:
        raise BoardError("the host board runs as a process here; start from a microcontroller "
                         "board (--like mps2-an386, nucleo-l4r5zi, ...)")
    data = _board_data(replace(base, name=name,
                               description=f"{name} (started from {base.name})"))
    lines = [f"# Board file for {name}, started from kiln's {base.name}: change what differs.",
             "# Every key is checked (boards/README.md lists the rules); use it with",
             f"#   kiln project create MODEL --board ./{name}.toml -o DIR",
             f"# or put it in a folder of {BOARD_PATH_VARIABLE} and say --board {name}.", ""]
    for key in TOP_KEYS:
        note = f"# {FIELD_NOTES[key]}"
        if key not in data:
            if key == "flashing" and base.runs_on == "board":
                lines += [note, "# flashing = { command = \"st-flash write {bin} 0x08000000\" }",
                          "# flashing = { pyocd_target = \"stm32l4r5zitx\" }   (pip install kiln[flash])"]
            elif key == "init":
                lines += [note, "# init = [ { reg = 0x40021058, set = 0x1 }, ]"]
            continue
        value = data[key]
        lines.append(note)
        if key in ("init", "extra_regions"):
            lines.append(f"{key} = [")
            lines += [f"    {_toml_value(v)}," for v in value]
            lines.append("]")
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"
