"""`mwp log verify` on a folder and on a real SeaweedFS server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from mwp.cli import main
from mwp.dev.seaweed import SeaweedS3Server
from mwp.log.group_log import GroupEventLog
from mwp.stores.objects import FolderObjectStore, ObjectStore
from tests.event_log_samples import AUTHORITY_KEY, EVIDENCE, GROUP, KEY_ID, event
from tests.integration.s3_fixture import TEST_BUCKET, overwrite


@pytest.fixture
def evidence_file(tmp_path: Path) -> Path:
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(EVIDENCE.to_json()))
    return path


def _log(store: ObjectStore, count: int) -> GroupEventLog:
    log = GroupEventLog(store, GROUP)
    log.seal_and_append([event(n) for n in range(1, count + 1)], KEY_ID, AUTHORITY_KEY)
    return log


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["log", "verify", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_sound_folder_log_verifies(
    tmp_path: Path, evidence_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(FolderObjectStore(tmp_path / "store"), 5)
    head = log.head()
    assert head is not None
    code, out, _ = _run(
        capsys, GROUP, "--store", str(tmp_path / "store"), "--evidence", str(evidence_file)
    )
    assert code == 0
    assert out.strip() == f"ok 5 entries (sequences 1-5), head {head.signing_hash}"


def test_the_first_fault_is_reported(
    tmp_path: Path, evidence_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = FolderObjectStore(tmp_path / "store")
    log = _log(store, 5)
    overwrite(store, log.key(4), log.read()[3].data.replace(b"message 4", b"message 9"))
    code, out, _ = _run(capsys, GROUP, "--store", str(store.root), "--evidence", str(evidence_file))
    assert code == 1
    assert out.splitlines() == [
        "fault at sequence 4: signature: AUTH_INVALID_SIGNATURE at stage signature (equation)",
        "verified 3 entries before it",
    ]
    code, out, _ = _run(
        capsys, GROUP, "--store", str(store.root), "--evidence", str(evidence_file), "--json"
    )
    assert code == 1
    assert json.loads(out) == {
        "groupId": GROUP,
        "ok": False,
        "entries": 3,
        "lastSequence": 3,
        "headHash": log.read()[2].signing_hash,
        "fault": {
            "sequence": 4,
            "reason": "signature",
            "detail": "AUTH_INVALID_SIGNATURE at stage signature (equation)",
        },
    }


def test_another_authority_is_a_fault(
    tmp_path: Path, evidence_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _log(FolderObjectStore(tmp_path / "store"), 2)
    code, out, _ = _run(
        capsys,
        GROUP,
        "--store",
        str(tmp_path / "store"),
        "--evidence",
        str(evidence_file),
        "--authority",
        "urn:mwp:service:someone-else",
    )
    assert code == 1
    assert out.startswith("fault at sequence 1: wrong-authority")


def test_an_empty_log_or_unusable_evidence_is_not_ok(
    tmp_path: Path, evidence_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "store")
    code, out, _ = _run(
        capsys, "urn:mwp:group:none", "--store", store, "--evidence", str(evidence_file)
    )
    assert code == 1 and out.startswith("no entries for urn:mwp:group:none")
    broken = tmp_path / "broken.json"
    broken.write_text('{"organizationId": "urn:x:o", "bindings": [{"keyId": 1}]}')
    code, _, err = _run(capsys, GROUP, "--store", store, "--evidence", str(broken))
    assert code == 2 and "not usable" in err
    code, _, err = _run(
        capsys, GROUP, "--store", store, "--evidence", str(tmp_path / "absent.json")
    )
    assert code == 2 and "cannot read evidence" in err
    code, _, err = _run(capsys, GROUP, "--store", store, "--state-dir", str(tmp_path / "no-state"))
    assert code == 2 and "pass --evidence" in err


def test_registry_show_output_is_accepted_as_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _log(FolderObjectStore(tmp_path / "store"), 3)
    shown = tmp_path / "registry.json"
    shown.write_text(json.dumps({"revision": 3, "evidence": EVIDENCE.to_json()}))
    code, out, _ = _run(capsys, GROUP, "--store", str(tmp_path / "store"), "--evidence", str(shown))
    assert code == 0 and out.startswith("ok 3 entries")


def test_a_log_in_s3_verifies_and_its_faults_are_found(
    seaweed: SeaweedS3Server,
    evidence_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    store = seaweed.object_store(TEST_BUCKET, prefix)
    log = _log(store, 4)
    for name, value in seaweed.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MWP_OBJECT_STORE", f"s3://{TEST_BUCKET}/{prefix}")
    code, out, _ = _run(capsys, GROUP, "--evidence", str(evidence_file))
    assert code == 0 and out.startswith("ok 4 entries (sequences 1-4)")
    store.client.delete_object(Bucket=TEST_BUCKET, Key=store.prefix + log.key(2))
    code, out, _ = _run(capsys, GROUP, "--evidence", str(evidence_file))
    assert code == 1
    assert (
        out.splitlines()[0] == "fault at sequence 2: gap: no entry for sequence 2 (next stored: 3)"
    )
