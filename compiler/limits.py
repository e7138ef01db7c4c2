"""The limits kiln's C and wire format put on a model, in one place, checked before a build.

Each limit is where the generated firmware or the RPC protocol (crt/rpc/README.md) stops
working, named after the C or the field that sets it. `check_firmware_limits` checks a
compiled report (kiln.json) against them for a project mode before any file is written,
so a model beyond one is refused in one line naming the limit and the value, not by a
static assert deep in a build ("size of array is negative").
"""

from __future__ import annotations

from .errors import ModelError
from .numerics import INT32_MAX

# --- RPC (host-driven firmware and `kiln run`/`profile`/`tune` on a device) -------------
# crt/rpc/kiln_rpc_server.c, kiln_rpc_check_tensors: the server's tensor tables hold 1..8
# inputs and 1..8 outputs (TENSOR/READ/WRITE address them by a u8 index).
RPC_MAX_INPUTS = 8
RPC_MAX_OUTPUTS = 8
# INFO's layer count, LAYER's index and PROFILE's first/count are u16.
RPC_MAX_LAYERS = 0xFFFF
# TIME / TUNE_RUN: u32 repeat (>= 1); TIME / PROFILE / TUNE_RUN: u16 warm-up runs.
RPC_MAX_REPEAT = 0xFFFF_FFFF
RPC_MAX_WARMUP = 0xFFFF
# KILN_RPC_MAX_STRING (crt/rpc/kiln_rpc_wire.h): the identity block's strings (board name,
# build id, model name and hash) are cut to this many bytes. The host compares the board
# name, so a board's name must fit whole (project_gen/boards.py).
RPC_MAX_STRING = 48

# --- every firmware -----------------------------------------------------------------------
# Kernels index the arena and compute buffer offsets in int32_t (the proof of that for each
# op is kiln.compiler.codegen.bounds): no arena may exceed it.
ARENA_MAX_BYTES = INT32_MAX

MODES = ("standalone", "host-driven")


def _count(report: dict, key: str) -> int:
    value = report.get(key)
    return len(value) if isinstance(value, list) else 0


def check_firmware_limits(report: dict, mode: str, board: object = None) -> None:
    """ModelError, one line naming the limit and the value, when the model compiled in
    `report` (kiln.json) exceeds what a `mode` firmware (standalone | host-driven) for
    `board` (a Board or its name, for the message) can hold; None when it fits."""
    name = report.get("model", {}).get("name", "the model") if isinstance(
        report.get("model"), dict) else "the model"
    where = f"a {mode} firmware" + (f" for {getattr(board, 'name', board)}" if board else "")
    arena = report.get("arena_bytes", 0)
    if isinstance(arena, int) and arena > ARENA_MAX_BYTES:
        raise ModelError(f"{name} needs a {arena:,}-byte arena; {where} indexes it in int32_t "
                         f"(at most {ARENA_MAX_BYTES:,} bytes)")
    if mode != "host-driven":
        return
    why = "use standalone mode, which has no such limit"
    for key, most in (("inputs", RPC_MAX_INPUTS), ("outputs", RPC_MAX_OUTPUTS)):
        n = _count(report, key)
        if not 1 <= n <= most:
            raise ModelError(f"{name} has {n} {key}; {where} takes 1 to {most} (the RPC "
                             f"server's tensor tables, crt/rpc/kiln_rpc_server.c): {why}")
    layers = _count(report, "ops")
    if layers > RPC_MAX_LAYERS:
        raise ModelError(f"{name} has {layers:,} layers; {where} numbers them in 16 bits "
                         f"(at most {RPC_MAX_LAYERS:,}, crt/rpc/README.md): {why}")
