"""Session: run, time and profile a model on a host-driven target, in numpy terms.

    with Session(transport, inputs=specs_in, outputs=specs_out) as s:
        outs = s.run(x)              # list of np.ndarray (a stateful model's state
                                     # carries from run to run; s.reset_state())
        t = s.time(repeat=10)        # Timing: ticks and the tick rate
        prof = s.profile()           # Profile: ticks per layer

Inputs go up in chunks sized to the negotiated payload and shrink when the line is
noisy; RUN checks the inputs' CRC-32 on the device and returns the outputs' CRC-32,
which the downloaded outputs must match, so a damaged transfer is retried or reported,
never returned.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from kiln.compiler.artifact import MAX_MANIFEST_BYTES
from kiln.compiler.errors import DeviceError, InputError
from kiln.compiler.fsutil import read_regular_file
from kiln.compiler.inputs import TensorSpec, split_samples
from .rpc_client import (
    DeviceInfo, NoisyLinkError, RpcClient, RpcOptions, RpcStatusError, Timing, VariantInfo,
)
from .rpc_frame import Status
from .transport import Transport

SPACE_INPUT, SPACE_OUTPUT, SPACE_TUNE, SPACE_ARENA = 0, 1, 2, 3
_WRITE_OVERHEAD = 8  # space, index, variant, offset before the data
_MIN_CHUNK = 32
_T = TypeVar("_T")


@dataclass(frozen=True)
class ExpectedFirmware:
    """What the device must report in HELLO; None fields are not checked."""

    model_hash: str | None = None
    build_id: str | None = None
    board: str | None = None


@dataclass(frozen=True)
class LayerTicks:
    index: int
    name: str
    ticks: int


@dataclass(frozen=True)
class Profile:
    """Ticks of each layer of one layer-by-layer pass, and the tick rate."""

    layers: list[LayerTicks]
    total_ticks: int
    tick_hz: int


def specs_from_kiln_json(path: str | os.PathLike[str]) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Input and output specs from a compiled model's kiln.json (a regular file of bounded
    size; a report that is not JSON or lacks its tensor lists is an InputError)."""
    data = read_regular_file(path, "kiln.json", MAX_MANIFEST_BYTES)
    try:
        report = json.loads(data.decode("utf-8", "replace"))
        return ([TensorSpec.from_report(t) for t in report["inputs"]],
                [TensorSpec.from_report(t) for t in report["outputs"]])
    except (ValueError, RecursionError, KeyError, TypeError, IndexError) as e:
        raise InputError(f"{path} is not a kiln.json report kiln can read "
                         f"({type(e).__name__}: {str(e)[:80]})") from None


class Session:
    """An open RPC session with a host-driven target (see the module doc)."""

    def __init__(self, transport: Transport, inputs: Sequence[TensorSpec] | None = None,
                 outputs: Sequence[TensorSpec] | None = None,
                 expected: ExpectedFirmware | None = None, options: RpcOptions | None = None,
                 layer_names: Sequence[str] | None = None, connect: bool = True) -> None:
        self.transport = transport
        self.client = RpcClient(transport, options)
        self.input_specs = list(inputs) if inputs is not None else None
        self.output_specs = list(outputs) if outputs is not None else None
        self.expected = expected
        self._layer_names = list(layer_names) if layer_names is not None else None
        self._chunk = 0
        self._clean_calls = 0
        self._device: DeviceInfo | None = None
        self.last_run_ticks: int | None = None  # device ticks of the last run()
        # Inputs a run has written over since they were uploaded (models whose plan lets a
        # layer reuse an input's bytes; DeviceInfo.inputs_overwritten).
        self._consumed_inputs: set[int] = set()
        if connect:
            try:
                self.connect()
            except BaseException:
                transport.close()  # the session owns its transport, even when it fails
                raise

    # ---- connection -------------------------------------------------------------------

    def connect(self, timeout: float | None = None) -> DeviceInfo:
        """(Re)open the session; checks protocol, model hash, build id and board."""
        info = self.client.connect(timeout)
        self._check_identity(info)
        self._device = info
        self._chunk = self.client.max_payload - _WRITE_OVERHEAD
        self._check_tensor_sizes()
        return info

    def _check_identity(self, info: DeviceInfo) -> None:
        exp = self.expected
        if exp is None:
            return
        for field, want, got in (("model hash", exp.model_hash, info.model_hash),
                                 ("build id", exp.build_id, info.build_id),
                                 ("board", exp.board, info.board)):
            if want is not None and want != got:
                raise DeviceError(
                    f"stale or other firmware on {self.transport.name}: its {field} is {got!r}, "
                    f"expected {want!r} (model {info.model_name!r}); rebuild and flash the project")

    def _check_tensor_sizes(self) -> None:
        dev = self.device
        for specs, space, count in ((self.input_specs, SPACE_INPUT, dev.num_inputs),
                                    (self.output_specs, SPACE_OUTPUT, dev.num_outputs)):
            if specs is None:
                continue
            if len(specs) != count:
                raise DeviceError(f"the firmware's model has {count} tensors in space {space}, "
                                  f"the host expects {len(specs)}: stale firmware?")
            for i, spec in enumerate(specs):
                size = self.client.tensor(space, i).bytes
                if size != spec.nbytes:
                    raise DeviceError(f"tensor {spec.name!r} is {size} bytes on the device, "
                                      f"{spec.nbytes} on the host: stale firmware?")

    @property
    def device(self) -> DeviceInfo:
        if self._device is None:
            raise DeviceError("the session is not connected")
        return self._device

    def info(self, refresh: bool = False) -> DeviceInfo:
        """The device's identity (from the handshake, or asked again with refresh)."""
        if refresh:
            self._device = self.client.info()
        return self.device

    def close(self, exit_server: bool = False) -> None:
        """Close the transport; with exit_server, first make kiln_rpc_serve() return."""
        try:
            if exit_server:
                self.client.reset(exit_server=True)
        finally:
            self.transport.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset(self) -> DeviceInfo:
        """RESET (end the session, zero the arena), then a fresh handshake."""
        self.client.reset(exit_server=False)
        return self.connect()

    def reset_state(self) -> None:
        """Set the model state (a stateful model's variables, kept from one run to the
        next) back to its initial value, as kiln_reset() does; the session goes on. A
        session starts from that state too (HELLO resets it)."""
        if not self.device.has_state_reset:
            raise DeviceError(f"the firmware on {self.transport.name} predates model state "
                              f"(no state reset over RPC): rebuild and flash the project")
        self.client.reset_state()

    def echo(self, data: bytes) -> bytes:
        """The device's copy of `data` (a link check; at most the payload size less one)."""
        return self.client.echo(data)

    # ---- chunked transfers ------------------------------------------------------------

    def _adaptive(self, op: Callable[[int], _T]) -> _T:
        """Run op(chunk_size); halve the chunk when the line is noisy, grow it back when clean."""
        max_chunk = self.client.max_payload - _WRITE_OVERHEAD
        while True:
            before = self.client.stats.damage_retransmissions
            try:
                result = op(self._chunk)
            except NoisyLinkError:
                if self._chunk <= _MIN_CHUNK:
                    raise
                self._chunk = max(_MIN_CHUNK, self._chunk // 2)
                continue
            # Damaged frames, not a slow link, are a reason for shorter frames.
            if self.client.stats.damage_retransmissions > before:
                self._chunk = max(_MIN_CHUNK, self._chunk // 2)
                self._clean_calls = 0
            else:
                self._clean_calls += 1
                if self._clean_calls >= 8 and self._chunk < max_chunk:
                    self._chunk = min(max_chunk, self._chunk * 2)
                    self._clean_calls = 0
            return result

    def _upload(self, space: int, index: int, data: bytes, variant: int = 0) -> None:
        offset = 0
        while offset < len(data):
            def put(chunk: int, at: int = offset) -> int:
                piece = data[at: at + chunk]
                self.client.write(space, index, at, piece, variant)
                return len(piece)
            offset += self._adaptive(put)

    def _download(self, space: int, index: int, size: int, variant: int = 0,
                  start: int = 0) -> bytes:
        out = bytearray()
        while len(out) < size:
            def get(chunk: int, at: int = len(out)) -> bytes:
                return self.client.read(space, index, start + at, min(chunk, size - at), variant)
            out += self._adaptive(get)
        return bytes(out)

    # ---- model I/O ----------------------------------------------------------------------

    def _input_bytes(self, index: int, x: np.ndarray | bytes) -> bytes:
        """One input as the bytes the device expects: raw bytes as given, arrays checked
        (and float data quantized) against the input's spec when the session has specs."""
        expected = self._tensor_bytes(SPACE_INPUT, index)
        if isinstance(x, (bytes, bytearray, memoryview)):
            data = bytes(x)
        elif self.input_specs is not None:
            samples = split_samples([np.asarray(x)], [self.input_specs[index]])
            if len(samples) != 1:
                raise InputError(f"run() takes one sample; input {index} holds {len(samples)}")
            arr = samples[0][0]
            data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        else:
            data = np.ascontiguousarray(x).tobytes()
        if len(data) != expected:
            raise InputError(f"input {index} must be {expected} bytes, got {len(data)}")
        return data

    def _tensor_bytes(self, space: int, index: int) -> int:
        specs = self.input_specs if space == SPACE_INPUT else self.output_specs
        if specs is not None:
            if not 0 <= index < len(specs):
                raise InputError(f"the model has no tensor {index} in space {space}")
            return specs[index].nbytes
        return self.client.tensor(space, index).bytes

    def write_input(self, index: int, x: np.ndarray | bytes) -> None:
        """Upload input `index` into the device's arena (chunked)."""
        self._upload(SPACE_INPUT, index, self._input_bytes(index, x))
        self._consumed_inputs.discard(index)

    def _ran_model(self) -> None:
        """Note that the model ran: on some models that consumes the inputs in place."""
        if self.device.inputs_overwritten:
            self._consumed_inputs = set(range(self.device.num_inputs))

    def read_output(self, index: int) -> np.ndarray:
        """Download output `index` as an array of its spec's dtype and shape (else flat int8)."""
        raw = self._download(SPACE_OUTPUT, index, self._tensor_bytes(SPACE_OUTPUT, index))
        return self._as_output(index, raw)

    def _as_output(self, index: int, raw: bytes) -> np.ndarray:
        if self.output_specs is None:
            return np.frombuffer(raw, dtype=np.int8).copy()
        spec = self.output_specs[index]
        return np.frombuffer(raw, dtype=np.dtype(spec.dtype)).reshape(spec.shape).copy()

    def run(self, x: np.ndarray | bytes | Sequence[np.ndarray | bytes] | None = None,
            timeout: float | None = None, attempts: int = 3) -> list[np.ndarray]:
        """Upload the inputs, run the model once, download and verify the outputs.

        x: one array (single-input models) or one per input; None runs on what is in
        place. Raises InputError for wrong shapes/dtypes, DeviceError/TransportError
        from the link.
        """
        n_in = self.device.num_inputs
        if x is None:
            if self._consumed_inputs:
                raise InputError(
                    f"the last run wrote over input(s) {sorted(self._consumed_inputs)} on the "
                    f"device (the model reuses their memory): pass the inputs to run() again")
            blobs = None
        else:
            items = [x] if (n_in == 1 and not isinstance(x, (list, tuple))) else list(x)
            if len(items) != n_in:
                raise InputError(f"the model takes {n_in} inputs, got {len(items)}")
            blobs = [self._input_bytes(i, item) for i, item in enumerate(items)]
        for attempt in range(attempts):
            if blobs is not None:
                for i, blob in enumerate(blobs):
                    self._upload(SPACE_INPUT, i, blob)
            crc = None if blobs is None else _crc_all(blobs)
            try:
                reply = self.client.run(crc, timeout=timeout)
            except RpcStatusError as exc:
                if exc.status == Status.INPUT_CRC and attempt + 1 < attempts:
                    continue  # an upload was damaged: send the inputs again
                raise
            self.last_run_ticks = reply.ticks
            self._ran_model()
            for _ in range(attempts):
                raws = [self._download(SPACE_OUTPUT, i, self._tensor_bytes(SPACE_OUTPUT, i))
                        for i in range(self.device.num_outputs)]
                if _crc_all(raws) == reply.output_crc:
                    return [self._as_output(i, raw) for i, raw in enumerate(raws)]
            raise DeviceError(f"outputs read from {self.transport.name} never matched the "
                              f"device's CRC-32 after {attempts} reads")
        raise DeviceError("unreachable")  # pragma: no cover

    def time(self, repeat: int = 10, warmup: int = 1, timeout: float | None = None) -> Timing:
        """Run the model `warmup` times, then time `repeat` runs (ticks and tick rate).

        On a model that writes over its inputs (DeviceInfo.inputs_overwritten) only the
        first run sees the uploaded inputs; the outputs left behind are not theirs.
        """
        timing = self.client.time(repeat, warmup, timeout=timeout)
        self._ran_model()
        return timing

    def layer_names(self) -> list[str]:
        """The op type of every layer, as the firmware names them (asked once, cached)."""
        if self._layer_names is None:
            self._layer_names = [self.client.layer_name(i) for i in range(self.device.num_layers)]
        if len(self._layer_names) != self.device.num_layers:
            raise DeviceError(f"the firmware's model has {self.device.num_layers} layers, the "
                              f"host expects {len(self._layer_names)}: stale firmware?")
        return self._layer_names

    def profile(self, warmup: int = 1, timeout: float | None = None) -> Profile:
        """Ticks of every layer, timed one by one in a layer-by-layer pass."""
        n = self.device.num_layers
        names = self.layer_names()
        layers: list[LayerTicks] = []
        first = 0
        while first < n:
            # The client checks each reply (its layer count, first layer, ticks, and that
            # it holds a layer: an empty chunk would loop here forever).
            chunk = self.client.profile(first, n - first, warmup if first == 0 else 0, timeout)
            for k, ticks in enumerate(chunk.ticks):
                layers.append(LayerTicks(first + k, names[first + k], ticks))
            first += len(chunk.ticks)
        self._ran_model()
        return Profile(layers, sum(layer.ticks for layer in layers), self.device.tick_hz)

    def step(self, first: int, count: int = 1, timeout: float | None = None) -> int:
        """Run layers [first, first + count) on what the device's arena holds (after
        write_input for layer 0); their ticks. Read a layer's output with read_arena
        before a later layer writes over it."""
        if not self.device.has_step:
            raise DeviceError(f"the firmware on {self.transport.name} predates layer-by-layer "
                              f"runs (STEP): rebuild and flash the project")
        ticks = self.client.step(first, count, timeout)
        self._ran_model()
        return ticks

    def read_arena(self, offset: int, size: int) -> bytes:
        """`size` bytes of the device's arena from `offset` (a tensor where kiln.json's
        plan puts it)."""
        return self._download(SPACE_ARENA, 0, size, start=offset)

    # ---- tuning -------------------------------------------------------------------------

    def kernel_info(self, variant_id: int) -> VariantInfo:
        """Name and buffers of tuning variant `variant_id` (tuning builds only: else a
        DeviceError with status UNSUPPORTED)."""
        return self.client.tune_info(variant_id)

    def run_kernel(self, variant_id: int, inputs: Sequence[bytes | np.ndarray]) -> list[bytes]:
        """Upload a tuning variant's input buffers (in declaration order), run it once,
        and return its output buffers' bytes."""
        info = self.client.tune_info(variant_id)
        in_idx = [i for i, is_out in enumerate(info.outputs) if not is_out]
        if len(inputs) != len(in_idx):
            raise InputError(f"variant {variant_id} ({info.name}) takes {len(in_idx)} inputs, "
                             f"got {len(inputs)}")
        for i, x in zip(in_idx, inputs):
            data = bytes(x) if isinstance(x, (bytes, bytearray)) else np.ascontiguousarray(x).tobytes()
            if len(data) != info.buffers[i].bytes:
                raise InputError(f"buffer {i} of variant {variant_id} is {info.buffers[i].bytes} "
                                 f"bytes, got {len(data)}")
            self._upload(SPACE_TUNE, i, data, variant_id)
        self.client.tune_run(variant_id, repeat=1, warmup=0)
        return [self._download(SPACE_TUNE, i, info.buffers[i].bytes, variant_id)
                for i, is_out in enumerate(info.outputs) if is_out]

    def time_kernel(self, variant_id: int, repeat: int = 10, warmup: int = 1,
                    timeout: float | None = None) -> Timing:
        """Time a tuning variant on whatever is in its buffers."""
        return self.client.tune_run(variant_id, repeat, warmup, timeout)


def _crc_all(blobs: Sequence[bytes]) -> int:
    crc = 0
    for blob in blobs:
        crc = zlib.crc32(blob, crc)
    return crc & 0xFFFFFFFF
