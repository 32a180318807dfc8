"""The demo's warm launcher forks each runtime as its own process: its own session, its output
in its own log, its working folder, ended by its PID; the launcher reaps it and ends once the
demo closes it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mwp import __version__
from mwp.demo.launcher import LaunchedProcess, Launcher


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    launcher = Launcher(tmp_path, {})
    yield launcher
    launcher.close()


def _log_says(log: Path, text: str, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text():
            return True
        time.sleep(0.02)
    return False


def test_a_command_runs_with_its_output_in_its_log_and_ends(
    launcher: Launcher, tmp_path: Path
) -> None:
    log = tmp_path / "version.log"
    process = launcher.spawn(["--version"], tmp_path, log)
    assert process.wait(30) == 0
    assert process.poll() == 0
    assert __version__ in log.read_text()
    assert not Path(f"/proc/{process.pid}").exists()  # reaped by the launcher, not a zombie


def test_a_runtime_runs_in_its_own_session_and_folder_until_its_pid_is_signalled(
    launcher: Launcher, tmp_path: Path
) -> None:
    # An agent module that never finishes loading stands in for a runtime that runs until told.
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "sleeper.py").write_text(
        "import os, time\nprint('loading in', os.getcwd(), flush=True)\ntime.sleep(120)\n"
    )
    log = tmp_path / "sleeper.log"
    process = launcher.spawn(["agent", "run", "sleeper:agent"], folder, log)
    assert _log_says(log, f"loading in {folder}")
    assert process.poll() is None
    assert os.getsid(process.pid) == process.pid  # a terminal's Ctrl-C does not reach it
    assert os.getsid(process.pid) != os.getsid(launcher.process.pid)
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(0.1)
    process.send_signal(signal.SIGTERM)
    assert process.wait(10) == 0
    process.send_signal(signal.SIGTERM)  # already gone: nothing to signal, no error


def test_the_launcher_ends_once_closed(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path, {})
    first = launcher.spawn(["--version"], tmp_path, tmp_path / "a.log")
    second = launcher.spawn(["--version"], tmp_path, tmp_path / "b.log")
    assert first.pid != second.pid
    launcher.close()
    assert launcher.process.returncode == 0
    assert LaunchedProcess(first.pid).poll() == 0
