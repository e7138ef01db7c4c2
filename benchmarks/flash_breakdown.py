#!/usr/bin/env python3
"""Where the flash bytes go, per model: weights by kind, kernel code by function, the
layer glue, the firmware's harness, runtime and C library, the baked sample input.

    python benchmarks/flash_breakdown.py [--board mps2-an386] [--models DIR]
                                         [--only KWS,VWW,IC,AD] [--functions N] [--json OUT]

Two figures per model, both text + data of a `-O2` build with arm-none-eabi-gcc:
- firmware: the standalone firmware `benchmarks/firmware.py` runs (flash used: vectors,
  code, constants, weights, the baked sample input, the .data image); split by the
  linker map's input sections into the parts above;
- model: what the model itself pulls into a program, i.e. `kiln compile --board` built
  as a library (model.c, weights.c, the kernels, the board's CPU flags and the firmware's
  compile flags) and linked with --gc-sections against a stub that only calls kiln_run():
  the model's code, weights and the C library functions it calls, without the stub.
The flash goal (issue 17: weights + at most 16 KB of code) is checked against both.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from kiln.project_gen import create_project, get_board

from _common import FLASH_GOAL, MLPERF, models_root

# The code-size flags of the firmware's Makefile (templates/Makefile.j2), -O aside.
FIRMWARE_CFLAGS = ["-ffunction-sections", "-fdata-sections", "-fmerge-all-constants"]

# Input sections of the map: one line (" .text.f  0xADDR  0xSIZE  obj") or two (the
# name alone when it is long, then the address, size and object on the next line).
_ONE = re.compile(r"^ (\.\S+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
_NAME = re.compile(r"^ (\.\S+)\s*$")
_REST = re.compile(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
# Weights by kind: the suffix kiln gives each constant array of a layer.
_WEIGHT_KIND = re.compile(r"^l\d+_(?:\w+_)?(filter|bias|mult|shift|requant|table|exp_table)$")


def map_sections(map_text: str) -> list[tuple[str, int, int, str]]:
    """(input section, address, size, object) of every input section the link kept."""
    text = map_text.split("Linker script and memory map", 1)[1]
    found = []
    pending = None
    for line in text.splitlines():
        if pending is not None:
            m = _REST.match(line)
            if m:
                found.append((pending, int(m[1], 16), int(m[2], 16), m[3].strip()))
            pending = None
            continue
        m = _ONE.match(line)
        if m:
            found.append((m[1], int(m[2], 16), int(m[3], 16), m[4].strip()))
            continue
        m = _NAME.match(line)
        if m:
            pending = m[1]
    return [s for s in found if s[2] and not s[0].startswith((".debug", ".comment", ".ARM.attributes"))]


def symbols(elf: Path) -> list[tuple[int, int, str]]:
    """(address, size, name) of every sized symbol of the ELF."""
    out = subprocess.run(["arm-none-eabi-nm", "-S", "-t", "d", str(elf)],
                         capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            syms.append((int(parts[0]), int(parts[1]), parts[3]))
    return syms


def flash_sections(elf: Path) -> dict[str, tuple[int, int]]:
    """{output section: (address, size)} of the sections with bytes in flash."""
    out = subprocess.run(["arm-none-eabi-size", "-A", str(elf)],
                         capture_output=True, text=True, check=True).stdout
    keep = {}
    for line in out.splitlines()[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0].startswith(".") and parts[1].isdigit():
            name, size, addr = parts[0], int(parts[1]), int(parts[2])
            if size and name not in (".bss", ".stack", ".heap", ".comment", ".ARM.attributes") \
                    and not name.startswith(".debug"):
                keep[name] = (addr, size)
    return keep


def category(section: str, obj: str) -> str:
    if section.startswith(".kiln_weights"):
        return "weights"
    if section.startswith(".kiln_inputs"):
        return "input"
    if "/crt/kernels/" in obj or obj.startswith(("build/crt/kernels/", "kernels/")):
        return "kernels"
    if "/model/" in obj or obj.startswith("build/model/") or obj.endswith(("model.o",)):
        return "model glue"
    if "/src/" in obj or obj.startswith("build/src/"):
        return "harness"
    if "/crt/platform/" in obj or obj.startswith("build/crt/platform/"):
        return "runtime"
    if ".a(" in obj:
        return "libc/libgcc"
    return "other"


def function_name(section: str) -> str:
    for prefix in (".text.startup.", ".text.", ".rodata.", ".data."):
        if section.startswith(prefix):
            return section[len(prefix):]
    return section


def firmware_breakdown(build: Path) -> dict:
    """Flash of a built standalone project, by category, with its kernels' functions and
    its weights by kind (from the map file and the ELF's symbols)."""
    elf = build / "firmware.elf"
    sections = map_sections((build / "firmware.map").read_text())
    out_secs = flash_sections(elf)
    total = sum(size for _, size in out_secs.values())
    # .data is copied from flash: its load image counts, at its RAM address in the map.
    spans = list(out_secs.values())

    def in_flash(addr: int) -> bool:
        return any(a <= addr < a + s for a, s in spans)

    by_cat: dict[str, int] = defaultdict(int)
    functions: dict[str, int] = defaultdict(int)
    for name, addr, size, obj in sections:
        if not in_flash(addr):
            continue
        cat = category(name, obj)
        by_cat[cat] += size
        if cat in ("kernels", "libc/libgcc", "harness", "runtime", "model glue"):
            label = function_name(name) if name not in (".text", ".rodata", ".data") \
                else Path(obj.split("(")[-1].rstrip(")")).stem
            functions[f"{cat}: {label}"] += size
    by_cat["alignment"] = total - sum(by_cat.values())
    weights_sec = out_secs.get(".kiln_weights")
    kinds: dict[str, int] = defaultdict(int)
    if weights_sec:
        lo, size = weights_sec
        for addr, sz, sym in symbols(elf):
            if lo <= addr < lo + size:
                m = _WEIGHT_KIND.match(sym)
                kinds[m[1] if m else "other"] += sz
    return {"total": total, "categories": dict(by_cat), "functions": dict(functions),
            "weights": dict(kinds)}


STUB = """\
#include <stdint.h>
#include "model.h"
static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));
int kiln_flash_stub(void);
int kiln_flash_stub(void)
{
    return kiln_run(0, 0, arena);
}
"""


def library_share(model: Path, board_name: str, out: Path, cpu_flags: list[str],
                  opt: str = "-O2", optimize: str | None = None) -> dict:
    """text + data of what the model pulls into a program: `kiln compile --board` built as
    a library and linked with --gc-sections against a stub that calls kiln_run()
    (`optimize`: kiln compile --optimize, default kiln's)."""
    from kiln.compiler.cli import main as kiln_main

    with contextlib.redirect_stdout(io.StringIO()):
        status = kiln_main(["compile", str(model), "-o", str(out), "--board", board_name, "--force",
                            *(["--optimize", optimize] if optimize else [])])
    if status:
        raise SystemExit(f"kiln compile {model} failed")
    (out / "stub.c").write_text(STUB)
    srcs = [out / "model.c", out / "weights.c", out / "stub.c"] + sorted((out / "kernels").glob("*.c"))
    flags = [*cpu_flags, "-std=c99", opt, *FIRMWARE_CFLAGS, f"-I{out}", f"-I{out / 'kernels'}"]
    objs = []
    for src in srcs:  # one object per source, so the map names each one
        obj = out / f"{src.stem}.o"
        subprocess.run(["arm-none-eabi-gcc", *flags, "-c", str(src), "-o", str(obj)],
                       check=True, capture_output=True)
        objs.append(str(obj))
    elf = out / "lib.elf"
    subprocess.run(["arm-none-eabi-gcc", *cpu_flags, *objs, "-nostartfiles", "--specs=nano.specs",
                    "-Wl,--gc-sections", "-Wl,-e,kiln_flash_stub", f"-Wl,-Map={out / 'lib.map'}",
                    "-lm", "-o", str(elf)], check=True, capture_output=True)
    sections = map_sections((out / "lib.map").read_text())
    out_secs = flash_sections(elf)
    spans = list(out_secs.values())
    parts: dict[str, int] = defaultdict(int)
    for name, addr, size, obj in sections:
        if not any(a <= addr < a + s for a, s in spans):
            continue
        if obj.endswith("/stub.o"):
            continue
        if name.startswith(".kiln_weights"):
            parts["weights"] += size
        elif ".a(" in obj:
            parts["libc/libgcc"] += size
        elif obj.endswith(("/model.o", "/weights.o")):
            parts["model glue"] += size
        else:
            parts["kernels"] += size
    parts["total"] = sum(parts.values())
    return dict(parts)


def verdict(used: int, goal: int) -> str:
    return "meets" if used <= goal else f"over by {used - goal:,}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="mps2-an386")
    parser.add_argument("--models", default=str(models_root()))
    parser.add_argument("--only", default="KWS,VWW,IC,AD")
    parser.add_argument("--functions", type=int, default=12,
                        help="largest N functions to list per model (0: none)")
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args()
    board = get_board(args.board)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="kiln-flash-") as tmp:
        for short in args.only.split(","):
            stem = MLPERF[short]
            path = Path(args.models) / "mlperf_tiny" / f"{stem}.tflite"
            project = create_project(path, board=board, out_dir=Path(tmp) / stem)
            project.build()
            fw = firmware_breakdown(Path(tmp) / stem / "build")
            lib = library_share(path, board.name, Path(tmp) / f"{stem}-lib", board.cpu_flags)
            rows[short] = {"firmware": fw, "model": lib}
            goal = FLASH_GOAL[short]
            cats = fw["categories"]
            print(f"\n{short} ({stem}) on {board.name}, bytes of flash")
            print(f"  firmware {fw['total']:>8,}  goal {goal:,}: {verdict(fw['total'], goal)}")
            for cat in ("weights", "kernels", "model glue", "input", "harness", "runtime",
                        "libc/libgcc", "alignment", "other"):
                if cats.get(cat):
                    print(f"    {cat:<12}{cats[cat]:>8,}")
            print("    weights by kind: " + ", ".join(
                f"{k} {v:,}" for k, v in sorted(fw["weights"].items(), key=lambda kv: -kv[1])))
            code = lib["total"] - lib.get("weights", 0)
            print(f"  model    {lib['total']:>8,}  goal {goal:,}: {verdict(lib['total'], goal)}"
                  f"  (weights {lib.get('weights', 0):,} + code {code:,}: kernels "
                  f"{lib.get('kernels', 0):,}, glue {lib.get('model glue', 0):,}, "
                  f"libc {lib.get('libc/libgcc', 0):,})")
            if args.functions:
                top = sorted(fw["functions"].items(), key=lambda kv: -kv[1])[:args.functions]
                print("    largest functions: " + ", ".join(f"{k} {v:,}" for k, v in top))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
