"""A warm launcher for the demo's runtimes: each is still its own OS process, forked from a
process that has already imported the product.

Every `mwp agent run`, `mwp coordinator run` and `mwp gateway` spends most of its start on
imports (Temporal's SDK, Pydantic's wire models, the Group core), and the demo starts six of
them at once on two cores, then starts three again after killing them. The launcher imports
them once, before any event loop, thread or Temporal runtime exists (so a fork copies nothing
that cannot be copied), and forks a child per command: a new session, its output in its log
file, its own connections, keys and Session from there on, as a process started from scratch
would have. gunicorn's preload and Android's zygote start their workers the same way.

The demo writes one JSON line per command (``argv``, ``cwd``, ``log``) and reads back the
child's PID. The launcher reaps its children as they exit (their CPU is counted as its own
children's, and so in the demo's); once the demo closes its input it waits a moment for the
children still exiting, then ends.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

# What `mwp agent run`, `mwp coordinator run` and `mwp gateway` import, and the demo's cast.
WARM_MODULES = (
    "mwp.cli",
    "mwp.workers.agent",
    "mwp.workers.coordinator",
    "mwp.coordinator.runtime",
    "mwp.gateway.server",
    "mwp.demo.cast",
)
READY = "launcher ready"
# How long the launcher, told to end, waits for children that are still exiting.
END_SECONDS = 5.0


class LauncherError(RuntimeError):
    """The launcher could not start a process (the message says why)."""


# --- the demo's side -------------------------------------------------------------------------


class LaunchedProcess:
    """A process the launcher forked, handled as the demo handles a `subprocess.Popen`: it is
    not the demo's child, so its end is seen in ``/proc`` (the launcher reaps it)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        """None while it runs; 0 once it has ended (its status is the launcher's to read)."""
        return None if _running(self.pid) else 0

    def send_signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"PID {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        return 0


def _running(pid: int) -> bool:
    """Whether ``pid`` runs: not gone, and not a zombie waiting for the launcher's reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc here: whether the PID still exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


class Launcher:
    """The demo's handle on the launcher process."""

    def __init__(self, cwd: Path, env: Mapping[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mwp.demo.launcher"],
            cwd=cwd,
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # a terminal's Ctrl-C reaches only the demo
        )
        self._ready = False

    def spawn(self, argv: Sequence[str], cwd: Path, log: Path) -> LaunchedProcess:
        """`mwp *argv` forked in ``cwd``, its output appended to ``log``."""
        if not self._ready:
            self._ready = self._read().get("ready") is True
        request = {"argv": list(argv), "cwd": str(cwd), "log": str(log)}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        answer = self._read()
        if "pid" not in answer:
            raise LauncherError(str(answer.get("error", answer)))
        return LaunchedProcess(int(answer["pid"]))

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise LauncherError(f"the launcher exited ({self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self, timeout: float = END_SECONDS + 1.0) -> None:
        """End the launcher once its children have ended (the demo stopped them first)."""
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# --- the launcher's side ---------------------------------------------------------------------


def _reap(*_: object) -> None:
    """Collect every child that has ended (SIGCHLD)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _child(argv: list[str], cwd: str, log: str) -> None:
    """In the forked child: the command's own session, output and working folder, then the
    command, which ends the process (`mwp.cli.run`, through `mwp/__main__.py`)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.close(nothing)
    os.chdir(cwd)
    sys.argv = ["mwp", *argv]
    runpy.run_module("mwp", run_name="__main__")  # as `python -m mwp` would: it exits


def _answer(out: IO[str], value: Mapping[str, Any]) -> None:
    out.write(json.dumps(value) + "\n")
    out.flush()


def serve(requests: IO[str], out: IO[str]) -> None:
    """Warm up, then fork a child per request until ``requests`` ends."""
    for module in WARM_MODULES:
        importlib.import_module(module)
    signal.signal(signal.SIGCHLD, _reap)
    _answer(out, {"ready": True})
    for line in requests:
        try:
            request = json.loads(line)
            pid = os.fork()
        except (ValueError, OSError) as exc:
            _answer(out, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        if pid == 0:
            try:
                _child(request["argv"], request["cwd"], request["log"])
            finally:
                os._exit(70)  # only if the command itself could not be started
        _answer(out, {"pid": pid})
    _end()


def _end() -> None:
    """Wait (a bounded while) for children still exiting, so that their CPU is counted."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    deadline = time.monotonic() + END_SECONDS
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.02)
        except ChildProcessError:
            return


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
    os._exit(0)
