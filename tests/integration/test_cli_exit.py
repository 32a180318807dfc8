"""`mwp` as a real process ends with its own exit code, never a signal at interpreter exit.

The Temporal SDK can abort or segfault while the interpreter finalizes after a clean run, so
about one `mwp mission show` in three used to die by SIGABRT or SIGSEGV after printing the
right output. Each subcommand here runs in a fresh interpreter, many times over.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mwp.dev.stack import BackgroundStack
from tests.integration.test_registry_cli import _run

REPO = Path(__file__).resolve().parents[2]
RUNS = 12


def _mwp(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mwp", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _outcome(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}" + (" (a signal)" if result.returncode < 0 else "")


def test_mission_show_exits_0_with_the_same_output_every_time(
    temporal_stack: BackgroundStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / ".mwp"
    common = ["--address", temporal_stack.address, "--state-dir", str(state)]
    organization = f"urn:mwp:organization:exit-{tmp_path.name}"
    assert _run(capsys, "registry", "init", "--org", organization, *common)[0] == 0
    assert _run(capsys, "registry", "add-human", "ada", *common)[0] == 0
    assert _run(capsys, "registry", "add-agent", "planner", "--owner", "ada", *common)[0] == 0
    code, out, err = _run(
        capsys, "mission", "create", "--owner", "ada", "--coordinator", "planner",
        "--objective", "Exit cleanly", *common,
    )  # fmt: skip
    assert code == 0, err
    mission = next(line.split()[1] for line in out.splitlines() if line.startswith("Mission "))
    code, expected, err = _run(capsys, "mission", "show", mission, *common)
    assert code == 0 and mission in expected and "Exit cleanly" in expected, err

    results = [_mwp("mission", "show", mission, *common) for _ in range(RUNS)]
    failures = [
        f"run {n}: {_outcome(r)}; stdout {r.stdout!r}; stderr {r.stderr[-500:]!r}"
        for n, r in enumerate(results, 1)
        if r.returncode != 0 or r.stdout != expected
    ]
    assert not failures, f"{len(failures)} of {RUNS} runs failed:\n" + "\n".join(failures)


def test_an_unknown_mission_exits_1_with_a_message_every_time(
    temporal_stack: BackgroundStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / ".mwp"
    common = ["--address", temporal_stack.address, "--state-dir", str(state)]
    organization = f"urn:mwp:organization:exit-unknown-{tmp_path.name}"
    assert _run(capsys, "registry", "init", "--org", organization, *common)[0] == 0

    results = [_mwp("mission", "show", "urn:nothing", *common) for _ in range(RUNS)]
    failures = [
        f"run {n}: {_outcome(r)}; stdout {r.stdout!r}; stderr {r.stderr[-500:]!r}"
        for n, r in enumerate(results, 1)
        if r.returncode != 1 or "no Missions match" not in r.stderr or r.stdout
    ]
    assert not failures, f"{len(failures)} of {RUNS} runs failed:\n" + "\n".join(failures)
