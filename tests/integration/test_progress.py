"""Long operations show progress: plain lines on stderr when piped, a bar on a terminal, nothing
beside ``--json`` output."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
from pathlib import Path

import pytest

from mwp.cli import main
from mwp.client import Identity, KeyStore, MwpClient
from mwp.dev.stack import BackgroundStack
from mwp.stores.objects import FolderObjectStore
from mwp.workers.progress import Progress
from tests.integration.conftest import stack_keyring, stack_log_location
from tests.integration.missions_helper import eventually, new_mission
from tests.integration.stores.group_history import (
    AUTHORITY,
    EVIDENCE,
    GROUP,
    KEY,
    KEY_ID,
    closed_mission,
    open_mission,
    stored_log,
)

COUNT = re.compile(r"^(?P<done>\d+)(?:/(?P<total>\d+))? (?P<unit>\w+)$")


def progress_lines(err: str, label: str) -> list[tuple[int, int | None]]:
    found = []
    for text in err.splitlines():
        shown, _, count = text.rpartition(": ")
        match = COUNT.match(count)
        if match and shown == label:
            total = match["total"]
            found.append((int(match["done"]), int(total) if total else None))
    return found


@pytest.fixture
def signing(tmp_path: Path) -> list[str]:
    """The --store, --evidence and key options of `mwp log compact` and `archive`."""
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps(EVIDENCE.to_json()))
    KeyStore(tmp_path / "state" / "keys").save(
        "authority", Identity(AUTHORITY, KEY_ID, KEY, "2020-01-01T00:00:00Z")
    )
    return [
        *("--store", str(tmp_path / "objects"), "--evidence", str(evidence)),
        *("--key-name", "authority", "--state-dir", str(tmp_path / "state")),
    ]


def test_a_piped_compaction_prints_progress_lines_and_json_output_stays_clean(
    tmp_path: Path, signing: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    events = open_mission()
    stored_log(FolderObjectStore(tmp_path / "objects"), events)
    assert main(["log", "compact", GROUP, "--through", "10", *signing]) == 0
    shown = progress_lines(capsys.readouterr().err, f"compacting {GROUP}")
    # Verifying 10 entries, then removing 10: the first step, and where it ended.
    assert shown[0] == (1, 20) and shown[-1] == (20, 20)
    assert [done for done, _ in shown] == sorted(done for done, _ in shown)

    assert main(["log", "compact", GROUP, "--through", "12", "--json", *signing]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and json.loads(captured.out)["removed"] == 2


def test_a_piped_archive_prints_progress_lines(
    tmp_path: Path, signing: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    events = closed_mission()
    stored_log(FolderObjectStore(tmp_path / "objects"), events)
    assert main(["log", "archive", GROUP, "--snapshot-only", *signing]) == 0
    shown = progress_lines(capsys.readouterr().err, f"verifying {GROUP}")
    assert shown[0] == (1, len(events)) and shown[-1] == (len(events), len(events))


async def test_a_piped_rebuild_prints_progress_lines(
    mwp_client: MwpClient,
    temporal_stack: BackgroundStack,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rig = await new_mission(mwp_client)
    await rig.post(rig.crew.owner, "hello")
    sequence = await rig.mission.sequence()
    handle = mwp_client.temporal.get_workflow_handle(rig.workflow_id)

    async def mirrored() -> bool:
        through: int = await handle.query("mirrored_through")
        return through == sequence

    await eventually(mirrored, timeout=20)
    argv = ["log", "rebuild", rig.mission.group_id, "--into", str(tmp_path / "rebuilt")]
    argv += ["--store", stack_log_location(), "--address", temporal_stack.address]
    argv += ["--state-dir", str(stack_keyring().directory.parent)]
    argv += ["--org", rig.crew.organization.organization_id]
    assert await asyncio.to_thread(main, argv) == 0  # main runs its own event loop
    captured = capsys.readouterr()
    assert "byte-identical" in captured.out
    read = progress_lines(captured.err, f"reading the history of {rig.mission.group_id}")
    assert read[0] == (1, None) and read[-1][0] > sequence  # more history events than Events
    assert progress_lines(captured.err, "comparing with the mirrored log")[-1] == (
        sequence,
        sequence,
    )


def test_on_a_terminal_progress_is_a_bar_not_lines() -> None:
    leader, follower = pty.openpty()
    with open(follower, "w") as terminal, Progress("work", unit="steps", stream=terminal) as bar:
        for done in range(1, 4):
            bar.report(done, 3)
    try:
        written = _drained(leader)
    finally:
        os.close(leader)
    assert "work" in written  # drawn by rich
    assert "work: 3/3 steps" not in written  # not the piped line


def _drained(leader: int) -> str:
    """All the terminal has been sent: one read may return only the first escape sequence
    while the rest is still on its way through the pseudo-terminal."""
    chunks = []
    while select.select([leader], [], [], 0.5)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the follower side is closed and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")
