"""Build generated C for the host and call it: a shared library loaded with cffi.

Builds are cached by content hash under the user's cache directory, so running the
same model again costs a dlopen. The kernels are built once per crt version into a
static library and linked into each model's shared library. Each cache entry is a
folder built aside and renamed into place whole, under a lock (kiln.compiler.cache):
concurrent runs share it, an interrupted run leaves none.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from .cache import cache_dir, cached_entry
from .errors import BuildError
from .paths import crt_dir

HOST_CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC"]
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1"]
KERNEL_LIBRARY = "libkiln_kernels.a"
MODEL_LIBRARY = "libkiln_model.so"
# What a whole file of each kind starts with: an entry from a run that wrote it only in
# part (an older kiln killed mid-write, a full disk) is rebuilt rather than linked.
_MAGIC = {".a": b"!<arch>\n", ".so": b"\x7fELF"}


def cache_root() -> Path:
    return cache_dir("host")


def _whole(path: Path) -> bool:
    """Whether `path` is a regular file that starts as its kind must."""
    magic = _MAGIC[path.suffix]
    try:
        if not path.is_file() or path.stat().st_size <= len(magic):   # is_file: no FIFO
            return False
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


def kernel_sources() -> list[Path]:
    return sorted((crt_dir() / "kernels").glob("*.c"))


def _kernels_key(flags: list[str]) -> str:
    h = hashlib.sha256(" ".join(flags).encode())
    for src in kernel_sources() + sorted((crt_dir() / "kernels").glob("*.h")):
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def _run(cmd: list[str], cwd: Path) -> None:
    cc = shutil.which(cmd[0])
    if cc is None:
        raise BuildError(f"{cmd[0]} not found: install a C compiler (e.g. apt-get install gcc)")
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        raise BuildError(f"host C build failed: {' '.join(cmd[:3])} ...\n{proc.stderr.strip()[-4000:]}")


def kernel_library(cc: str = "cc") -> Path:
    """The kernels as a static library, built once per version of crt/kernels (cached)."""
    key = _kernels_key(HOST_CFLAGS + [cc])

    def build(work: Path) -> None:
        objects = []
        for src in kernel_sources():
            obj = work / (src.stem + ".o")
            _run([cc, *HOST_CFLAGS, "-c", "-I", str(crt_dir() / "kernels"), "-o", str(obj),
                  str(src)], work)
            objects.append(str(obj))
        _run(["ar", "rcs", str(work / KERNEL_LIBRARY), *objects], work)
        for obj in objects:                 # the entry keeps the library only
            Path(obj).unlink()

    entry = cached_entry(cache_root() / f"crt-{key}",
                         lambda d: _whole(d / KERNEL_LIBRARY), build,
                         "the host kernel library")
    return entry / KERNEL_LIBRARY


def build_shared_library(files: dict[str, str], cc: str = "cc") -> Path:
    """Compile model sources, link the kernel library; return the cached shared library."""
    kernels = kernel_library(cc)
    h = hashlib.sha256(kernels.parent.name.encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].encode() + b"\0")

    def build(work: Path) -> None:
        src_dir = work / "src"
        src_dir.mkdir()
        for name, text in files.items():
            (src_dir / name).write_text(text)
        sources = [str(src_dir / n) for n in sorted(files) if n.endswith(".c")]
        _run([cc, *HOST_CFLAGS, "-shared", "-Wl,-Bsymbolic", "-I", str(src_dir),
              "-I", str(crt_dir() / "kernels"), "-o", str(work / MODEL_LIBRARY), *sources,
              str(kernels), "-lm"], work)
        shutil.rmtree(src_dir)              # the entry keeps the library only

    entry = cached_entry(cache_root() / h.hexdigest()[:24],
                         lambda d: _whole(d / MODEL_LIBRARY), build,
                         "the host build of this model")
    return entry / MODEL_LIBRARY


def build_executable(files: dict[str, str], main_c: str, out_dir: Path,
                     sanitize: bool = False, cc: str = "cc") -> Path:
    """Compile model sources + kernels + a main() into an executable (sanitizer tests)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out_dir / name).write_text(text)
    (out_dir / "main.c").write_text(main_c)
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror"] + (SANITIZE_FLAGS if sanitize else ["-O2"])
    sources = [str(out_dir / n) for n in sorted(files) if n.endswith(".c")]
    sources += [str(out_dir / "main.c")] + [str(s) for s in kernel_sources()]
    exe = out_dir / "model_exe"
    _run([cc, *flags, "-I", str(out_dir), "-I", str(crt_dir() / "kernels"), "-o", str(exe),
          *sources, "-lm"], out_dir)
    return exe
