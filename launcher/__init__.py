"""The `kiln` console command's entry point (pyproject.toml [project.scripts]).

It lives apart from kiln.compiler on purpose: importing any module of kiln.compiler runs
kiln/compiler/__init__.py, which imports numpy and the compiler (about half a second),
and a Ctrl-C during those imports would end kiln with a traceback. This module imports
nothing but the standard library's `os`, `signal` and `sys`, and imports the CLI inside
its try, so a Ctrl-C at any instant once Python runs kiln's code ends kiln with one line
("kiln: interrupted") and exit code 130, as a shell reports a process killed by SIGINT.
(Python's own start-up and the console script's `from kiln.launcher import main`, the
few milliseconds before this module's first line runs, are out of kiln's reach.) Child processes (make, gcc, QEMU) share kiln's process group and get the
terminal's SIGINT too, and any still running are ended here; staging folders are removed
as the KeyboardInterrupt unwinds (kiln.compiler.fsutil.staging_dir).
"""

EXIT_INTERRUPTED = 130      # 128 + SIGINT, what a shell reports for a process Ctrl-C ended

try:
    import _thread
    import os
    import signal       # not loaded by Python's start-up: building its enums takes ~1 ms
    import sys
    import time
except KeyboardInterrupt:
    # A Ctrl-C while these load: kiln has started nothing. SystemExit ends Python quietly.
    __import__("sys").stderr.write("kiln: interrupted\n")
    raise SystemExit(EXIT_INTERRUPTED) from None


def _say_interrupted() -> None:
    try:
        os.write(2, b"kiln: interrupted\n")     # no buffers: safe in a signal handler
    except OSError:
        pass


def _end_children() -> None:
    """End what kiln started and is still running: a SIGINT sent to kiln alone leaves
    make's gcc or a worker's QEMU running (kiln.compiler.processes). Nothing was started
    if kiln.compiler is not imported yet, and importing it now would only take time."""
    if "kiln.compiler" not in sys.modules:
        return
    try:
        from kiln.compiler.processes import end_descendants

        end_descendants()
    except Exception:       # best effort: the interrupt is what gets reported
        pass


def _quiet_teardown() -> None:
    """kiln's work is done (or interrupted): a Ctrl-C while Python shuts down (joining
    worker threads, flushing) ends the process at once, without a traceback."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, KeyboardInterrupt):
            pass

    def on_sigint(signum: int, frame: object) -> None:
        _say_interrupted()
        os._exit(EXIT_INTERRUPTED)

    signal.signal(signal.SIGINT, on_sigint)


_sigint_seen = False


def _signal_again() -> None:
    time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGINT)


def _on_sigint(signum: int, frame: object) -> None:
    """Python's own handler (raise KeyboardInterrupt), remembering that it ran: a
    KeyboardInterrupt raised inside an import or a class body may reach main() wrapped
    in another exception (numpy's ImportError, the RuntimeError of a __set_name__)."""
    global _sigint_seen
    _sigint_seen = True
    code = frame.f_code if frame is not None else None
    if code is not None and code.co_filename.startswith("<frozen importlib") and code.co_name == "cb":
        # A weakref callback of the import system (a module lock being dropped): Python
        # prints an exception raised there as "Exception ignored" and carries on. Deliver
        # the signal again from a thread a millisecond later, once the callback returned.
        _thread.start_new_thread(_signal_again, ())
        return
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    reported = False
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:   # not if ignored
            signal.signal(signal.SIGINT, _on_sigint)
        try:
            from kiln.compiler.cli import main as cli_main

            code = cli_main(argv)       # reports a Ctrl-C in a command itself: 130
            if _sigint_seen and code not in (0, EXIT_INTERRUPTED):
                _say_interrupted()      # an error the interrupt caused
                code = EXIT_INTERRUPTED
        except BaseException as exc:
            if not (_sigint_seen or isinstance(exc, KeyboardInterrupt)):
                raise                   # SystemExit from argparse, a kiln bug
            _say_interrupted()
            code = EXIT_INTERRUPTED
        reported = True
        if code == EXIT_INTERRUPTED:
            _end_children()
        _quiet_teardown()
        return code
    except KeyboardInterrupt:   # before kiln's handler is set, or while one is being reported
        if not reported:
            _say_interrupted()
        _quiet_teardown()
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
