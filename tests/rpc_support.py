"""Builds for the RPC tests and benchmarks: the fixture model as host firmware, as a
QEMU project (through project_gen.create_project), the C tests and the fuzzer.

The fixture (tests/fixtures/rpc_model) implements the generated-model interface by
hand: out0 = in0 + 1, out1 = sum(in1) + in0[0]; see its model.h.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CRT = REPO / "crt"
RPC = CRT / "rpc"
FIXTURE = REPO / "tests" / "fixtures" / "rpc_model"
C_TESTS = REPO / "tests" / "rpc_c"

WARNINGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"]
TUNE_FLAGS = ["-DKILN_HAS_TUNING", "-DKILN_TUNE_ARENA_BYTES=1024"]


def rpc_sources() -> list[Path]:
    return sorted(RPC.glob("*.c"))


def _cc(argv: list[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"build failed: {' '.join(argv)}\n{proc.stdout}{proc.stderr}")


def build_host_fixture(out: Path, tuning: bool = False, in0_bytes: int = 3000,
                       sanitize: bool = False, max_payload: int | None = None,
                       platform: str = "test") -> Path:
    """The fixture as host-board firmware: POSIX stdio is its serial line.

    platform "test": tests/rpc_c/posix_test_platform.c (sleeps while idle, flushes
    per frame); "crt": the host board's own crt/platform/posix.c.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = ["gcc", *WARNINGS, "-O2", f"-DFIXTURE_IN0_BYTES={in0_bytes}",
            f"-I{CRT}", f"-I{RPC}", f"-I{FIXTURE}"]
    if max_payload:
        argv.append(f"-DKILN_RPC_MAX_PAYLOAD={max_payload}u")
    if sanitize:
        argv += SANITIZE
    plat = C_TESTS / "posix_test_platform.c" if platform == "test" else CRT / "platform" / "posix.c"
    sources = [*rpc_sources(), FIXTURE / "model.c", FIXTURE / "main.c", plat]
    if tuning:
        argv += TUNE_FLAGS
        sources.append(FIXTURE / "kiln_tune.c")
    _cc([*argv, *map(str, sources), "-o", str(out)])
    return out


def build_c_test(name: str, out: Path, tuning: bool = False, compiler: str = "gcc") -> Path:
    """tests/rpc_c/<name>.c linked with the RPC sources, the fixture and the fake platform."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if name == "test_rpc_frame":
        sources = [C_TESTS / f"{name}.c", RPC / "kiln_rpc_frame.c"]
    else:
        sources = [C_TESTS / f"{name}.c", *rpc_sources(), C_TESTS / "fake_platform.c",
                   FIXTURE / "model.c"]
    argv = [compiler, *WARNINGS, *SANITIZE, "-DFIXTURE_NO_HANG", f"-I{CRT}", f"-I{RPC}",
            f"-I{C_TESTS}", f"-I{FIXTURE}"]
    if tuning:
        argv += TUNE_FLAGS
        sources.append(FIXTURE / "kiln_tune.c")
    _cc([*argv, *map(str, sources), "-o", str(out)])
    return out


def fuzz_compiler() -> str | None:
    """clang with libFuzzer, or None."""
    for name in ("clang", "clang-14"):
        if shutil.which(name):
            return name
    return None


def build_fuzzer(out: Path) -> Path:
    """libFuzzer + ASan + UBSan binary over the parser and the whole command handler."""
    clang = fuzz_compiler()
    if clang is None:
        raise RuntimeError("clang is not installed")
    out.parent.mkdir(parents=True, exist_ok=True)
    sources = [C_TESTS / "fuzz_rpc.c", C_TESTS / "fake_platform.c", *rpc_sources(),
               FIXTURE / "model.c", FIXTURE / "kiln_tune.c"]
    argv = [clang, "-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-O1",
            "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all",
            "-DKILN_RPC_MAX_REPEAT=16u", "-DFIXTURE_NO_HANG", "-DFIXTURE_IN0_BYTES=300",
            "-DKILN_RPC_MAX_PAYLOAD=512u", *TUNE_FLAGS,
            f"-I{CRT}", f"-I{RPC}", f"-I{C_TESTS}", f"-I{FIXTURE}"]
    _cc([*argv, *map(str, sources), "-o", str(out)])
    return out


def write_seed_corpus(folder: Path) -> Path:
    """A few inputs that start the fuzzer inside every command (structured mode)."""
    import struct

    from kiln.project_gen.rpc_frame import encode_frame

    folder.mkdir(parents=True, exist_ok=True)

    def req(cmd: int, seq: int, payload: bytes) -> bytes:
        return bytes((cmd, seq)) + struct.pack("<H", len(payload)) + payload

    mem = lambda space, idx, var, off: struct.pack("<BBHI", space, idx, var, off)  # noqa: E731
    seeds = {
        "all_commands": bytes((3,)) + b"".join([
            req(0x02, 1, b""), req(0x03, 2, b"echo\x00"), req(0x04, 3, struct.pack("<BBH", 0, 0, 0)),
            req(0x05, 4, mem(0, 0, 0, 10) + bytes(40)), req(0x06, 5, mem(1, 0, 0, 0) + b"\x20\x00"),
            req(0x07, 6, struct.pack("<B3xI", 1, 0)), req(0x08, 7, struct.pack("<H2xI", 1, 2)),
            req(0x09, 8, struct.pack("<HHH", 0, 3, 0)), req(0x0A, 9, struct.pack("<H", 1)),
            req(0x0B, 10, struct.pack("<H", 0)), req(0x05, 11, mem(2, 0, 0, 0) + bytes(16)),
            req(0x0C, 12, struct.pack("<HHI", 1, 0, 2)), req(0x06, 13, mem(2, 1, 0, 0) + b"\x10\x00"),
            req(0x07, 13, struct.pack("<B3xI", 0, 0)), req(0x0D, 14, b"\x00"),
        ]),
        "raw_frames": b"\x00" + encode_frame(0x01, 7, struct.pack("<IH", 5, 512))
        + b"garbage\x00\xff" + encode_frame(0x06, 8, mem(1, 0, 0, 0) + b"\x08\x00"),
    }
    for name, data in seeds.items():
        (folder / name).write_bytes(data)
    return folder


@dataclass
class FixtureArtifact:
    """The fixture dressed as a compiled Artifact for project_gen.create_project."""

    board: str
    in0_bytes: int = 3000
    files: dict[str, str] = field(init=False)
    report: dict = field(init=False)

    def __post_init__(self) -> None:
        n = self.in0_bytes
        header = (FIXTURE / "model.h").read_text().replace(
            "#define FIXTURE_IN0_BYTES 3000", f"#define FIXTURE_IN0_BYTES {n}")
        self.files = {"model.h": header, "model.c": (FIXTURE / "model.c").read_text()}
        align = lambda x: (x + 15) // 16 * 16  # noqa: E731
        self.report = {
            "model": {"name": "rpc_fixture", "sha256": "fixture-0001"},
            "board": self.board,
            "inputs": [{"name": "in0", "shape": [n], "dtype": "int8"},
                       {"name": "in1", "shape": [8], "dtype": "int8"}],
            "outputs": [{"name": "out0", "shape": [n], "dtype": "int8"},
                        {"name": "out1", "shape": [1], "dtype": "int32"}],
            "arena_bytes": align(n) + 16 + align(n) + 16,
            "weights_bytes": 0,
            "ops": [{"index": i, "type": t, "macs": 0} for i, t in enumerate(["ADD", "SUM", "FILL"])],
        }


def build_fixture_project(board: str, out_dir: Path, in0_bytes: int = 3000) -> Path:
    """A host-driven project of the fixture for `board`, built with project_gen; the ELF."""
    from kiln.project_gen.project import create_project

    project = create_project(FixtureArtifact(board, in0_bytes), board=board, out_dir=out_dir,
                             mode="host-driven", force=True)
    project.build()
    return project.elf


def expected_outputs(x0: np.ndarray, x1: np.ndarray) -> list[np.ndarray]:
    """The fixture's outputs computed in numpy."""
    out0 = (x0.astype(np.int16) + 1).astype(np.int8)
    out1 = np.array([int(x1.astype(np.int64).sum()) + int(x0[0])], dtype=np.int32)
    return [out0, out1]


def fixture_specs(in0_bytes: int = 3000):
    from kiln.compiler.inputs import TensorSpec

    i8, i32 = np.dtype("int8"), np.dtype("int32")
    inputs = [TensorSpec("in0", (in0_bytes,), i8, None, None), TensorSpec("in1", (8,), i8, None, None)]
    outputs = [TensorSpec("out0", (in0_bytes,), i8, None, None), TensorSpec("out1", (1,), i32, None, None)]
    return inputs, outputs
