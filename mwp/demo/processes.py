"""The demo's processes: `mwp dev`, each agent's runtime and the Coordinator's, started as
separate OS processes with their output in a log file each, and ended by the PID the demo
started (SIGTERM, then SIGKILL), or killed on purpose to inject a failure. The runtimes and the
gateway are forked from a warm launcher (`mwp.demo.launcher`); `mwp dev` starts beside it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from mwp.demo.launcher import Launcher


class Handle(Protocol):
    """What the demo needs of a process: a `subprocess.Popen`, or one the launcher forked."""

    pid: int

    def poll(self) -> int | None: ...
    def send_signal(self, signum: int) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...


class ProcessFailedError(RuntimeError):
    """A demo process exited, or never said it was ready (the message quotes its log)."""


@dataclass
class DemoProcess:
    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    log_path: Path
    # A service the others reach their Groups through (the stack, the gateway): stopped after them.
    service: bool = False
    # Forked from it when given; otherwise a new Python process.
    launcher: Launcher | None = None
    process: Handle | None = None
    starts: int = 0
    pids: list[int] = field(default_factory=list)

    def start(self) -> None:
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts} ---\n".encode())
            log.flush()  # before the process's own output
            if self.launcher is not None:
                self.process = self.launcher.spawn(self.argv, self.cwd, self.log_path)
            else:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "mwp", *self.argv],
                    cwd=self.cwd,
                    env={**os.environ, **self.env},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # a terminal's Ctrl-C reaches only the demo
                )
        self.pids.append(self.process.pid)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def this_run(self) -> str:
        """The log since the latest start."""
        return self.log().rsplit(f"--- start {self.starts} ---\n", 1)[-1]

    async def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.this_run()
            if text in run:
                return run
            if self.process is not None and self.process.poll() is not None:
                raise ProcessFailedError(f"{self.name} exited: {run[-1500:]}")
            await asyncio.sleep(0.1)
        raise ProcessFailedError(f"{self.name} did not print {text!r} in {timeout:.0f} s")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> int:
        """SIGKILL: the process dies without stopping anything (an injected crash)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        return self.process.pid

    def terminate(self) -> None:
        """SIGTERM, if it still runs: it stops what it serves and exits."""
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGTERM)

    def reap(self, deadline: float) -> bool:
        """Wait for its exit until ``deadline`` (monotonic), then SIGKILL; whether it had to."""
        if self.process is None:
            return False
        try:
            self.process.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            return True
        return False


@dataclass
class Processes:
    """Every process the demo started, stopped in reverse order at the end."""

    cwd: Path
    logs: Path
    env: dict[str, str]
    started: list[DemoProcess] = field(default_factory=list)
    launcher: Launcher | None = None

    def warm_up(self) -> None:
        """Start the launcher (it imports while other things start): the processes started
        with ``warm`` are forked from it from now on."""
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.launcher = Launcher(self.cwd, self.env)

    def start(
        self, name: str, *argv: str, service: bool = False, warm: bool = False
    ) -> DemoProcess:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        launcher = self.launcher if warm else None
        process = DemoProcess(name, argv, self.env, self.cwd, log, service, launcher)
        process.start()
        self.started.append(process)
        return process

    async def run(self, *argv: str, timeout: float = 60.0) -> str:
        """One `mwp` command to its end; its output, or ProcessFailedError."""
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mwp",
            *argv,
            cwd=self.cwd,
            env={**os.environ, **self.env},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            output, _ = await asyncio.wait_for(child.communicate(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            raise ProcessFailedError(f"mwp {' '.join(argv)} took over {timeout:.0f} s") from None
        text = output.decode(errors="replace")
        if child.returncode != 0:
            raise ProcessFailedError(f"mwp {' '.join(argv)} exited {child.returncode}: {text}")
        return text

    def stop_all(self) -> list[str]:
        """The agents first, all at once, then each service in reverse order of starting (the
        gateway before the stack it reaches Temporal through): a step takes as long as its
        slowest process, not the sum of them. The names of those that ignored SIGTERM and were
        killed (a runtime that does not stop is a fault to look into, not to wait out quietly)."""
        steps = [[p for p in self.started if not p.service]]
        steps += [[p] for p in reversed(self.started) if p.service]
        killed = []
        for step in steps:
            for process in step:
                with contextlib.suppress(Exception):
                    process.terminate()
            deadline = time.monotonic() + STOP_SECONDS
            for process in step:
                with contextlib.suppress(Exception):
                    if process.reap(deadline):
                        killed.append(process.name)
        if self.launcher is not None:
            self.launcher.close()
        return killed


# How long a stopped process may take to exit before it is killed.
STOP_SECONDS = 10.0
