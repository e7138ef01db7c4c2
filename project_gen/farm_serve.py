"""`kiln farm serve --board B --port P [--flash-command CMD | --flash] [--address A]`:
offer the board plugged into this host to a Ray farm (`kiln tune --ray`); and `kiln farm
status`: the farm's nodes and served boards.

serve starts a Ray node on this host joined to the cluster at ADDRESS, with no CPU for
Ray's other work and two custom resources: `board:B` (what `ray status` shows) and a
unique `kiln-board-<id>`. It then registers a named actor (kiln.compiler.tune.farm's
FarmWorker, namespace "kiln-farm", name "board:B:<id>") that holds both, so it runs on
this node and nowhere else: every tuning firmware a farm run sends it is flashed with
the command and measured over the port here. The actor belongs to this process: Ctrl-C
(or SIGTERM) removes the board from the farm and stops the node.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time

from kiln.compiler.errors import InputError, KilnError

NODE_START_TIMEOUT_S = 120.0
POLL_S = 5.0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("farm", help="a board farm on Ray: serve this host's board "
                                           "to `kiln tune --ray` (docs/farm.md)")
    sub = p.add_subparsers(dest="farm_command", metavar="{serve,status}")
    sub.required = True
    s = sub.add_parser("serve", help="offer the board on this host's serial port to the farm")
    s.add_argument("--board", "-b", required=True, help="board name or board file")
    s.add_argument("--port", required=True, metavar="URL",
                   help="the board's serial port (pyserial URL: /dev/ttyACM0, "
                        "socket://HOST:PORT, …)")
    s.add_argument("--flash-command", metavar="CMD",
                   help="shell command that flashes a firmware ({elf} {hex} {bin} {port})")
    s.add_argument("--flash", action="store_true",
                   help="flash as the board file says (flashing = ...)")
    s.add_argument("--address", default="auto",
                   help="the Ray cluster's head, HOST:PORT (default auto: this host's)")
    s.add_argument("--ray-temp-dir", metavar="DIR",
                   help="temporary folder of the Ray node serve starts (ray start --temp-dir)")
    s.set_defaults(handler=cmd_serve)
    st = sub.add_parser("status", help="the farm's nodes and the boards served to it")
    st.add_argument("--address", default="auto", help="the Ray cluster's head (default auto)")
    st.set_defaults(handler=cmd_status)


def _flash_how(board, args: argparse.Namespace) -> None:
    """A tuning firmware must reach the board: a flash command, or the board file's."""
    from .boards import check_flash_command

    if args.flash_command is not None:
        check_flash_command(args.flash_command, "--flash-command")
        if args.flash:
            raise InputError("--flash-command or --flash, not both")
    elif args.flash:
        if board.flashing is None:
            raise InputError(f"{board.name}'s board file does not say how it is flashed: "
                             f"pass --flash-command")
    else:
        raise InputError("each tuning firmware is flashed before it is measured: pass "
                         "--flash-command CMD (or --flash to flash as the board file says)")


class _Node:
    """`ray start --block` for this board's node; its output kept for error messages."""

    def __init__(self, address: str, resources: dict, temp_dir: str | None) -> None:
        self.proc = _ray_start(address, resources, temp_dir)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.append(raw.decode("utf-8", "replace").rstrip())

    def failure(self) -> str | None:
        if self.proc.poll() is None:
            return None
        time.sleep(0.2)                         # the reader's last lines
        last = [line for line in self.lines if line.strip()][-3:]
        return (f"the Ray node did not start (ray start exited with "
                f"{self.proc.returncode}): {' | '.join(last)}")

    def wait_started(self) -> None:
        """Until the node runs here: a driver (this process) needs a local raylet."""
        deadline = time.monotonic() + NODE_START_TIMEOUT_S
        while not any("Ray runtime started" in line for line in self.lines):
            if self.failure():
                raise KilnError(self.failure())
            if time.monotonic() > deadline:
                raise KilnError(f"the Ray node did not start within "
                                f"{NODE_START_TIMEOUT_S:g} s")
            time.sleep(0.2)


def _ray_start(address: str, resources: dict, temp_dir: str | None) -> subprocess.Popen:
    argv = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; "
            "sys.argv[0] = 'ray'; sys.exit(main())", "start", "--address", address,
            "--num-cpus", "0", "--resources", json.dumps(resources), "--block",
            "--disable-usage-stats"]
    if temp_dir:
        argv += ["--temp-dir", temp_dir]
    # Its own session: a Ctrl-C at the terminal reaches serve, which stops the node.
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _stop(node: subprocess.Popen) -> None:
    """SIGTERM: `ray start --block` drains and ends its node's processes."""
    if node.poll() is None:
        node.terminate()
        try:
            node.wait(timeout=40)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()


def _wait_for_node(ray, node: _Node, resource: str) -> str:
    """The id of the node started with `resource`, once the cluster sees it alive."""
    deadline = time.monotonic() + NODE_START_TIMEOUT_S
    while time.monotonic() < deadline:
        for n in ray.nodes():
            if n.get("Alive") and resource in n.get("Resources", {}):
                return n["NodeID"]
        if node.failure():
            raise KilnError(node.failure())
        time.sleep(0.5)
    raise KilnError(f"the Ray node did not join the cluster within "
                    f"{NODE_START_TIMEOUT_S:g} s")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_serve(args: argparse.Namespace) -> int:
    from kiln.compiler.tune.farm import (BOARD_ACTOR, FarmWorker, check_reachable, connect,
                                         import_ray)

    from .boards import get_board

    import_ray()
    board = get_board(args.board)
    if board.is_host:
        raise InputError("the host board is not served: tune it on this host (kiln tune)")
    _flash_how(board, args)
    check_reachable(args.address)        # `ray start` would retry a dead address for ever
    import secrets                       # here: kiln's start-up does not pay for it

    uid = secrets.token_hex(4)
    own = f"kiln-board-{uid}"
    resources = {f"board:{board.name}": 1, own: 1}
    node = None
    ray = None
    try:
        node = _Node(args.address, resources, args.ray_temp_dir)
        node.wait_started()
        ray = connect(args.address)
        # SIGTERM as Ctrl-C (set once Ray's driver set up its own handlers): the board
        # leaves the farm and the node stops either way.
        signal.signal(signal.SIGTERM, _interrupt)
        _wait_for_node(ray, node, own)
        name = BOARD_ACTOR.format(board=board.name, uid=uid)
        actor = ray.remote(FarmWorker).options(
            name=name, num_cpus=0, resources=resources, max_restarts=-1,
            max_task_retries=0).remote(board, args.port, args.flash_command, args.flash)
        info = ray.get(actor.describe.remote(), timeout=NODE_START_TIMEOUT_S)
        print(f"serving {board.name} at {args.port} to the farm at {args.address} as "
              f"{name} (node {info['node']}); Ctrl-C to stop", flush=True)
        last = None
        while True:
            time.sleep(POLL_S)
            if node.proc.poll() is not None:
                raise KilnError(f"the Ray node of this board stopped (exit "
                                f"{node.proc.returncode})")
            try:
                err = ray.get(actor.describe.remote(), timeout=60)["last_error"]
            except Exception as e:                  # noqa: BLE001 - reported, kept serving
                err = f"the board's worker does not answer: {str(e).splitlines()[0]}"
            if err != last:
                print(f"{board.name} at {args.port}: "
                      f"{'down: ' + err if err else 'answering again'}", flush=True)
                last = err
    except KeyboardInterrupt:
        print(f"{board.name} at {args.port} leaves the farm", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if ray is not None:
            ray.shutdown()                      # the actor ends with its owner
        if node is not None:
            _stop(node.proc)


def cmd_status(args: argparse.Namespace) -> int:
    from kiln.compiler.tune.farm import NAMESPACE, connect

    ray = connect(args.address)
    try:
        for n in ray.nodes():
            if not n.get("Alive"):
                continue
            res = n["Resources"]
            boards = sorted(k for k in res if k.startswith("board:"))
            print(f"node {n['NodeManagerAddress']} {n['NodeID'][:8]}: "
                  f"{int(res.get('CPU', 0))} CPU"
                  + (f", {', '.join(boards)}" if boards else ""))
        names = sorted(a if isinstance(a, str) else a["name"]
                       for a in ray.util.list_named_actors(all_namespaces=False))
        for name in names:
            try:
                d = ray.get(ray.get_actor(name, namespace=NAMESPACE).describe.remote(),
                            timeout=30)
            except Exception as e:                  # noqa: BLE001 - reported
                print(f"{name}: does not answer ({str(e).splitlines()[0]})")
                continue
            state = f"down: {d['last_error']}" if d["last_error"] else "up"
            print(f"{name}: {d['board']} at {d['port']} on {d['node']}, {state}")
    finally:
        ray.shutdown()
    return 0
