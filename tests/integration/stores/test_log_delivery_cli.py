"""`mwp log tail`, `mwp log compact` and `mwp log archive`, on a folder and on SeaweedFS S3."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from mwp.cli import main
from mwp.client import Identity, KeyStore
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import FolderObjectStore, ObjectStore
from tests.integration.s3_fixture import TEST_BUCKET, overwrite
from tests.integration.stores.group_history import (
    AUTHORITY,
    EVIDENCE,
    GROUP,
    IMPOSTOR,
    IMPOSTOR_KEY,
    IMPOSTOR_KEY_ID,
    KEY,
    KEY_ID,
    closed_mission,
    open_mission,
    stored_log,
)

KEY_NAME = "group-authority"


@pytest.fixture(params=["folder", "s3"])
def located(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[ObjectStore, str]:
    """A store and the --store location the CLI opens it by."""
    if request.param == "folder":
        return FolderObjectStore(tmp_path / "objects"), str(tmp_path / "objects")
    server = request.getfixturevalue("seaweed")
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    for name, value in server.environment().items():
        monkeypatch.setenv(name, value)
    return server.object_store(TEST_BUCKET, prefix), f"s3://{TEST_BUCKET}/{prefix}"


@pytest.fixture
def options(tmp_path: Path, located: tuple[ObjectStore, str]) -> list[str]:
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps(EVIDENCE.to_json()))
    keys = KeyStore(tmp_path / "state" / "keys")
    keys.save(KEY_NAME, Identity(AUTHORITY, KEY_ID, KEY, "2020-01-01T00:00:00Z"))
    keys.save("impostor", Identity(IMPOSTOR, IMPOSTOR_KEY_ID, IMPOSTOR_KEY, "2020-01-01T00:00:00Z"))
    return ["--store", located[1], "--evidence", str(evidence)]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["log", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def key_options(tmp_path: Path, name: str = KEY_NAME) -> list[str]:
    return ["--key-name", name, "--state-dir", str(tmp_path / "state")]


def lines(events: list[dict[str, Any]], first: int) -> list[str]:
    return [
        f"{e['sequence']} {e['kind']} {e['eventId']} {e['occurredAt']}" for e in events[first - 1 :]
    ]


def test_tail_prints_the_verified_events_after_a_sequence(
    located: tuple[ObjectStore, str], options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    events = open_mission()
    log = stored_log(located[0], events)
    code, out, _ = run(capsys, "tail", GROUP, "--after", "3", *options)
    assert code == 0
    assert out.splitlines() == lines(events, 4)
    code, out, _ = run(capsys, "tail", GROUP, "--after", "15", "--json", *options)
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [e.event for e in log.read(15)]


def test_tail_stops_at_a_tampered_event(
    located: tuple[ObjectStore, str], options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    events = open_mission()
    log = stored_log(located[0], events)
    entry = log.get(6)
    assert entry is not None
    overwrite(located[0], log.key(6), entry.data.replace(b"urn:example", b"urn:exampld", 1))
    code, out, err = run(capsys, "tail", GROUP, *options)
    assert code == 1
    assert out.splitlines() == lines(events, 1)[:5]
    assert "failed verification at sequence 6: signature" in err


def test_compact_then_tail_needs_the_snapshot(
    tmp_path: Path,
    located: tuple[ObjectStore, str],
    options: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    events = open_mission()
    log = stored_log(located[0], events)
    code, out, err = run(
        capsys, "compact", GROUP, "--through", "10", *key_options(tmp_path), *options
    )
    assert code == 0, err
    assert out.splitlines()[1] == "archived 10, removed 10; the online log starts at 11"
    assert log.first_sequence() == 11

    code, out, err = run(capsys, "tail", GROUP, "--after", "2", *options)
    assert code == 1 and out == ""
    assert "starts at sequence 11" in err
    assert "signed snapshot groups/" in err and "--restore" in err

    code, out, err = run(capsys, "tail", GROUP, "--after", "2", "--restore", *options)
    assert code == 0
    assert out.splitlines() == lines(events, 11)
    assert "restored the verified snapshot through 10" in err

    code, out, _ = run(capsys, "tail", GROUP, "--after", "10", *options)  # not too old
    assert code == 0 and out.splitlines() == lines(events, 11)


def test_compact_refusals(
    tmp_path: Path,
    located: tuple[ObjectStore, str],
    options: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    events = open_mission()
    log = stored_log(located[0], events)
    last = str(len(events))
    code, _, err = run(
        capsys, "compact", GROUP, "--through", last, *key_options(tmp_path), *options
    )
    assert code == 1 and "stays online" in err
    code, _, err = run(
        capsys, "compact", GROUP, "--through", "5", *key_options(tmp_path, "absent"), *options
    )
    assert code == 2 and "cannot use key 'absent'" in err
    code, _, err = run(
        capsys,
        "compact",
        GROUP,
        "--through",
        "5",
        "--authority",
        "urn:example:service:someone-else",
        *key_options(tmp_path),
        *options,
    )
    assert code == 1 and "not the Group Authority's key" in err
    code, _, err = run(
        capsys,
        "compact",
        GROUP,
        "--through",
        "5",
        "--authority",
        AUTHORITY.id,
        *key_options(tmp_path, "impostor"),
        *options,
    )
    assert code == 1 and "AUTH_FORBIDDEN" in err
    assert log.first_sequence() == 1  # nothing moved


def test_archive_writes_the_final_snapshot(
    tmp_path: Path,
    located: tuple[ObjectStore, str],
    options: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    events = closed_mission()
    stored_log(located[0], events)
    code, out, err = run(
        capsys, "archive", GROUP, "--snapshot-only", "--json", *key_options(tmp_path), *options
    )
    assert code == 0, err
    snapshot = json.loads(out)["snapshot"]
    assert snapshot["purpose"] == "archival" and snapshot["throughSequence"] == len(events)
    assert located[0].get(snapshot["key"]) is not None
    log = GroupEventLog(located[0], GROUP)
    assert log.verify_all(EVIDENCE).verified == len(events)


def test_archive_refuses_an_open_group(
    tmp_path: Path,
    located: tuple[ObjectStore, str],
    options: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    stored_log(located[0], open_mission())
    code, _, err = run(
        capsys, "archive", GROUP, "--snapshot-only", *key_options(tmp_path), *options
    )
    assert code == 1 and "INVALID_STATE_TRANSITION" in err
    code, out, _ = run(capsys, "archive", GROUP, "--allow-open", *key_options(tmp_path), *options)
    assert code == 0 and out.startswith("archived through")
