"""`mwp demo` starts its stack before the command line imports anything else
(`mwp.demo.head_start`); a demo that never runs (a usage error) leaves none of it behind, and
other commands start nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mwp.demo import head_start

REPO = Path(__file__).resolve().parents[2]


def _running_in(folder: Path) -> list[int]:
    """The processes whose working directory is ``folder`` (where the demo starts its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) == folder:
                found.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def test_a_usage_error_stops_the_stack_the_demo_began(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "mwp", "demo", "--state-dir", str(state), "--no-such-option"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "unrecognized arguments: --no-such-option" in done.stderr
    folder = (state / head_start.FOLDER).resolve()
    assert (folder / "logs" / "dev.log").exists()  # the stack had begun...
    deadline = time.monotonic() + 15
    while _running_in(folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running_in(folder) == []  # ...and nothing of it is left


def test_only_the_proof_of_concept_begins_early(tmp_path: Path) -> None:
    for argv in (
        ["demo", "--codec", "--state-dir", str(tmp_path / "codec")],
        ["demo", "--one-mission", "--state-dir", str(tmp_path / "one")],
        ["demo", "--help", "--state-dir", str(tmp_path / "help")],
        ["agent", "status", "--state-dir", str(tmp_path / "agent")],
    ):
        head_start.begin_if_demo(argv)
        head_start.abandon()
    assert list(tmp_path.iterdir()) == []
