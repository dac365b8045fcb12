"""The process edge: running a cell's build commands.

Arguments go to the program as a list (no shell ever parses them); output streams live
and is written whole to a log file; the exit code comes back unchanged; a time limit and
SIGINT/SIGTERM stop the build's whole process group, and the caller still gets the log.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

TIMEOUT_EXIT = 124  # as timeout(1) reports a time limit
_GRACE_SECONDS = 10.0
_READ_SIZE = 64 << 10


@dataclass(frozen=True)
class Result:
    """How a command ended: its exit code (128+N for signal N), and why it was stopped."""

    exit_code: int
    stopped_by: str = ""  # "", "timeout" or the name of a forwarded signal
    missing_program: bool = False


def exit_code_of(returncode: int) -> int:
    """Shell convention: a process killed by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    sinks: Sequence[BinaryIO],
    deadline: float | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> Result:
    """Run one command, copying its output (stdout and stderr together) to every sink."""
    try:
        process = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    except FileNotFoundError:
        message = f"ci-matrix: {argv[0]}: command not found\n".encode()
        _write(sinks, message)
        return Result(127, missing_program=True)
    if on_start is not None:
        on_start(process)
    stopper = _Stopper(process, deadline)
    with stopper.forwarding():
        stream = process.stdout
        assert isinstance(stream, io.BufferedReader)
        for data in iter(lambda: stream.read1(_READ_SIZE), b""):
            _write(sinks, data)
        stream.close()
        process.wait()
    code = TIMEOUT_EXIT if stopper.reason == "timeout" else exit_code_of(process.returncode)
    return Result(code, stopper.reason)


def _write(sinks: Sequence[BinaryIO], data: bytes) -> None:
    for sink in sinks:
        sink.write(data)
        sink.flush()


class _Stopper:
    """Stops the build's process group on a deadline or a forwarded signal: SIGTERM, then
    SIGKILL after a grace period."""

    def __init__(self, process: subprocess.Popen[bytes], deadline: float | None) -> None:
        self.process, self.deadline = process, deadline
        self.reason = ""
        self._done = threading.Event()

    def stop(self, sig: int, reason: str) -> None:
        if not self.reason:
            self.reason = reason
        self._signal_group(sig)
        threading.Thread(target=self._kill_later, daemon=True).start()

    def _signal_group(self, sig: int) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def _kill_later(self) -> None:
        if not self._done.wait(_GRACE_SECONDS):
            self._signal_group(signal.SIGKILL)

    def _watch_deadline(self) -> None:
        assert self.deadline is not None
        if not self._done.wait(max(0.0, self.deadline - time.monotonic())):
            self.stop(signal.SIGTERM, "timeout")

    @contextmanager
    def forwarding(self) -> Iterator[None]:
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, lambda n, _f: self.stop(n, signal.Signals(n).name))
        if self.deadline is not None:
            threading.Thread(target=self._watch_deadline, daemon=True).start()
        try:
            yield
        finally:
            self._done.set()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
