"""The durable SQLite Admission Log: authentication, atomic append-or-return-existing,
durability across reopen, and append-only integrity (spec 6.4)."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from mwp.core.trust.admission import (
    AdmissionReason,
    AppendCommitted,
    AppendExisting,
    LogFailed,
    LogFailure,
    LookupAbsent,
    LookupFound,
    admit_first,
    verify_historical,
)
from mwp.core.trust.registry import Principal
from mwp.core.wire.jcs import canonicalize
from mwp.stores.admission_log import (
    ServiceCredential,
    SqliteAdmissionLog,
    provision_service,
    revoke_service,
)
from tests.unit.test_admission import (
    ADMISSION,
    COMMAND,
    ORG,
    OTHER_SERVICE,
    context,
    record_for,
    rejected,
    verified_document,
)

SECRET = b"s" * 32
READER = Principal("service", "urn:example:service:auditor")
READER_SECRET = b"r" * 32


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    path = tmp_path / "admission.sqlite"
    provision_service(path, ORG, ADMISSION, SECRET)
    provision_service(path, ORG, READER, READER_SECRET, may_append=False)
    return path


def open_log(
    path: Path, service: Principal = ADMISSION, secret: bytes = SECRET
) -> SqliteAdmissionLog:
    return SqliteAdmissionLog(path, ServiceCredential(ORG, service, secret), timeout=10.0)


def candidate(record_id: str = "urn:example:admission-record:1", **kwargs: Any) -> bytes:
    return canonicalize(record_for(verified_document(), record_id=record_id, **kwargs))


def row_count(path: Path) -> int:
    with sqlite3.connect(path) as connection:
        count: int = connection.execute("SELECT count(*) FROM admission_records").fetchone()[0]
    return count


def test_first_admission_is_durable_across_reopen(log_path: Path) -> None:
    verified = verified_document()
    record = admit_first(verified, open_log(log_path), context())
    reopened = open_log(log_path)
    found = reopened.lookup(ORG, verified.signing_hash)
    assert found == LookupFound(record.raw, ADMISSION)
    # A different authenticated reader sees the writer as the accepting service.
    assert verify_historical(verified, open_log(log_path, READER, READER_SECRET)) == record
    assert reopened.verify_chain() is None


def test_retry_returns_existing_without_appending(log_path: Path) -> None:
    log = open_log(log_path)
    first = log.append_or_return_existing(ORG, verified_document().signing_hash, candidate())
    assert isinstance(first, AppendCommitted)
    again = log.append_or_return_existing(
        ORG, verified_document().signing_hash, candidate("urn:example:admission-record:2")
    )
    assert again == AppendExisting(first.record, ADMISSION)
    assert row_count(log_path) == 1
    assert admit_first(verified_document(), log, context()).raw == first.record


def test_absent_is_authoritative(log_path: Path) -> None:
    assert open_log(log_path).lookup(ORG, "sha256:" + "0" * 64) == LookupAbsent()
    rejected(
        AdmissionReason.RECORD_MISSING,
        lambda: verify_historical(verified_document(), open_log(log_path)),
    )


@pytest.mark.parametrize(
    "credential",
    [
        ServiceCredential(ORG, ADMISSION, b"x" * 32),  # wrong secret
        ServiceCredential(ORG, OTHER_SERVICE, SECRET),  # never provisioned
        ServiceCredential("urn:example:organization:other", ADMISSION, SECRET),
        ServiceCredential(ORG, Principal("agent", ADMISSION.id), SECRET),
    ],
)
def test_unauthenticated_callers_get_typed_failures(
    log_path: Path, credential: ServiceCredential
) -> None:
    log = SqliteAdmissionLog(log_path, credential)
    signing_hash = verified_document().signing_hash
    for result in (
        log.lookup(ORG, signing_hash),
        log.append_or_return_existing(ORG, signing_hash, candidate()),
    ):
        assert isinstance(result, LogFailed) and result.failure is LogFailure.UNAUTHENTICATED
    rejected(
        AdmissionReason.LOG_AUTHENTICATION_FAILED,
        lambda: admit_first(verified_document(), log, context()),
    )
    assert row_count(log_path) == 0


def test_revoked_service_is_no_longer_authenticated(log_path: Path) -> None:
    revoke_service(log_path, ORG, ADMISSION)
    result = open_log(log_path).lookup(ORG, verified_document().signing_hash)
    assert isinstance(result, LogFailed) and result.failure is LogFailure.UNAUTHENTICATED


def test_only_authorized_services_write_and_only_as_themselves(log_path: Path) -> None:
    signing_hash = verified_document().signing_hash
    reader = open_log(log_path, READER, READER_SECRET)
    refused = reader.append_or_return_existing(ORG, signing_hash, candidate(accepted_by=READER))
    assert isinstance(refused, LogFailed) and refused.failure is LogFailure.UNAUTHORIZED
    impersonating = open_log(log_path).append_or_return_existing(
        ORG, signing_hash, candidate(accepted_by=READER)
    )
    assert isinstance(impersonating, LogFailed)
    assert impersonating.failure is LogFailure.UNAUTHORIZED
    assert row_count(log_path) == 0


def test_candidate_must_belong_to_the_logical_key(log_path: Path) -> None:
    result = open_log(log_path).append_or_return_existing(ORG, "sha256:" + "1" * 64, candidate())
    assert isinstance(result, LogFailed) and result.failure is LogFailure.COMMIT_FAILED
    garbage = open_log(log_path).append_or_return_existing(ORG, "sha256:" + "1" * 64, b"[]")
    assert isinstance(garbage, LogFailed) and garbage.failure is LogFailure.COMMIT_FAILED


def test_conflicting_binding_under_the_same_key_is_refused(log_path: Path) -> None:
    log = open_log(log_path)
    signing_hash = verified_document().signing_hash
    log.append_or_return_existing(ORG, signing_hash, candidate())
    other = candidate("urn:example:admission-record:2", keyId="urn:example:key:other")
    result = log.append_or_return_existing(ORG, signing_hash, other)
    assert isinstance(result, LogFailed) and result.failure is LogFailure.CONFLICT
    assert row_count(log_path) == 1


def test_record_id_reused_under_another_key_is_refused_after_reopen(log_path: Path) -> None:
    one = verified_document()
    two = verified_document(document={**COMMAND, "payload": {"n": 2}})
    open_log(log_path).append_or_return_existing(ORG, one.signing_hash, candidate())
    reused = canonicalize(record_for(two, record_id="urn:example:admission-record:1"))
    result = open_log(log_path).append_or_return_existing(ORG, two.signing_hash, reused)
    assert isinstance(result, LogFailed) and result.failure is LogFailure.CONFLICT
    assert isinstance(open_log(log_path).lookup(ORG, two.signing_hash), LookupAbsent)
    fresh = canonicalize(record_for(two, record_id="urn:example:admission-record:2"))
    ok = open_log(log_path).append_or_return_existing(ORG, two.signing_hash, fresh)
    assert isinstance(ok, AppendCommitted)
    assert open_log(log_path).verify_chain() is None


# --- concurrency ----------------------------------------------------------------------------


def _append_in_thread(
    log: SqliteAdmissionLog, index: int, barrier: threading.Barrier, out: list[Any]
) -> None:
    barrier.wait()
    out[index] = log.append_or_return_existing(
        ORG, verified_document().signing_hash, candidate(f"urn:example:admission-record:t{index}")
    )


def test_concurrent_threads_leave_exactly_one_record(log_path: Path) -> None:
    workers = 8
    barrier = threading.Barrier(workers)
    results: list[Any] = [None] * workers
    shared = open_log(log_path)  # one instance, shared: each operation has its own connection
    threads = [
        threading.Thread(target=_append_in_thread, args=(shared, i, barrier, results))
        for i in range(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(isinstance(r, AppendCommitted) for r in results) == 1
    assert sum(isinstance(r, AppendExisting) for r in results) == workers - 1
    assert len({r.record for r in results}) == 1
    assert row_count(log_path) == 1


def _append_in_process(path: str, index: int, start: Any, queue: Any) -> None:
    log = open_log(Path(path))
    start.wait()
    result = log.append_or_return_existing(
        ORG, verified_document().signing_hash, candidate(f"urn:example:admission-record:p{index}")
    )
    queue.put((type(result).__name__, getattr(result, "record", None)))


def test_concurrent_processes_leave_exactly_one_record(log_path: Path) -> None:
    spawn = multiprocessing.get_context("spawn")
    workers = 4
    start = spawn.Event()
    queue = spawn.Queue()
    processes = [
        spawn.Process(target=_append_in_process, args=(str(log_path), i, start, queue))
        for i in range(workers)
    ]
    for process in processes:
        process.start()
    start.set()
    outcomes = [queue.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    kinds = sorted(kind for kind, _ in outcomes)
    assert kinds == ["AppendCommitted"] + ["AppendExisting"] * (workers - 1)
    assert len({record for _, record in outcomes}) == 1
    assert row_count(log_path) == 1
    found = open_log(log_path).lookup(ORG, verified_document().signing_hash)
    assert isinstance(found, LookupFound) and found.record == outcomes[0][1]


def test_a_held_write_lock_makes_the_log_unavailable_not_absent(log_path: Path) -> None:
    blocker = sqlite3.connect(log_path, isolation_level=None)
    try:
        blocker.execute("BEGIN EXCLUSIVE")
        log = SqliteAdmissionLog(log_path, ServiceCredential(ORG, ADMISSION, SECRET), timeout=0.1)
        result = log.append_or_return_existing(ORG, verified_document().signing_hash, candidate())
        assert isinstance(result, LogFailed) and result.failure is LogFailure.UNAVAILABLE
        rejected(
            AdmissionReason.LOG_UNAVAILABLE,
            lambda: admit_first(verified_document(), log, context()),
        )
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert row_count(log_path) == 0


def test_a_missing_file_is_unavailable_and_never_created(tmp_path: Path) -> None:
    path = tmp_path / "typo.sqlite"
    log = open_log(path)
    signing_hash = verified_document().signing_hash
    for result in (
        log.lookup(ORG, signing_hash),
        log.append_or_return_existing(ORG, signing_hash, candidate()),
    ):
        assert isinstance(result, LogFailed) and result.failure is LogFailure.UNAVAILABLE
    assert not path.exists()


# --- append-only integrity ------------------------------------------------------------------


def test_rows_cannot_be_updated_or_deleted(log_path: Path) -> None:
    open_log(log_path).append_or_return_existing(ORG, verified_document().signing_hash, candidate())
    with sqlite3.connect(log_path) as connection:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            connection.execute("UPDATE admission_records SET writer_id = 'urn:x:y'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            connection.execute("DELETE FROM admission_records")
    assert row_count(log_path) == 1


def _tamper(path: Path, sql: str, *params: Any) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TRIGGER admission_records_no_update")
        connection.execute("DROP TRIGGER admission_records_no_delete")
        connection.execute(sql, params)


def test_edited_record_is_detected_on_read(log_path: Path) -> None:
    verified = verified_document()
    admit_first(verified, open_log(log_path), context())
    edited = canonicalize(record_for(verified, accepted_at="2026-07-15T00:06:00Z"))
    _tamper(log_path, "UPDATE admission_records SET record = ?", edited)
    result = open_log(log_path).lookup(ORG, verified.signing_hash)
    assert isinstance(result, LogFailed) and result.failure is LogFailure.INTEGRITY_FAILED
    rejected(
        AdmissionReason.APPEND_INTEGRITY_NOT_ESTABLISHED,
        lambda: verify_historical(verified, open_log(log_path)),
    )
    assert open_log(log_path).verify_chain() is not None


def test_removed_predecessor_breaks_the_chain(log_path: Path) -> None:
    one = verified_document()
    two = verified_document(document={**COMMAND, "payload": {"n": 2}})
    log = open_log(log_path)
    admit_first(one, log, context())
    admit_first(two, log, context(record_id="urn:example:admission-record:2"))
    _tamper(log_path, "DELETE FROM admission_records WHERE seq = 1")
    result = open_log(log_path).lookup(ORG, two.signing_hash)
    assert isinstance(result, LogFailed) and result.failure is LogFailure.INTEGRITY_FAILED


def test_record_filed_under_another_key_is_detected(log_path: Path) -> None:
    verified = verified_document()
    admit_first(verified, open_log(log_path), context())
    _tamper(log_path, "UPDATE admission_records SET signing_hash = ?", "sha256:" + "2" * 64)
    result = open_log(log_path).lookup(ORG, "sha256:" + "2" * 64)
    assert isinstance(result, LogFailed) and result.failure is LogFailure.INTEGRITY_FAILED


def test_provisioning_refuses_weak_or_non_service_credentials(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite"
    with pytest.raises(ValueError):
        provision_service(path, ORG, ADMISSION, b"short")
    with pytest.raises(ValueError):
        provision_service(path, ORG, Principal("agent", "urn:example:agent:a"), SECRET)
    with pytest.raises(ValueError):
        provision_service(path, "relative", ADMISSION, SECRET)


def test_secret_is_not_in_the_credential_repr() -> None:
    assert "sss" not in repr(ServiceCredential(ORG, ADMISSION, SECRET))
